"""align/reanalysis.py: which ranks of a communicator that stopped are analysed again as behind, and which stay
behind where the issue orders place some of them."""

from __future__ import annotations

import polars as pl

from ncclforensics.align import reanalysis
from ncclforensics.align.answers import STOPPED, CommAnalysis, Root
from ncclforensics.align.streams import Streams
from ncclforensics.align.enqueue_marks import EnqueueMarks

W, TP = "0xw0", "0xtp"


def _root(outliers, reference, kind, shown):
    return Root(comm=W, seq=3, seq_range=(3, 3), outlier_ranks=outliers, reference_ranks=reference, kind=kind,
                size=1, pinned_by="call sites", reason=None, shown=shown)


def _calls(monkeypatch):
    calls = []

    def analyze(streams, comm, gate=None, behind=None, counted=None, left_out=None, **_):
        calls.append((comm, set(behind or ()), dict(left_out or {})))
        return CommAnalysis(comm=comm, ranks=[], launched={}, completed={}, first_seq={})

    monkeypatch.setattr(reanalysis, "analyze_comm", analyze)
    return calls


def test_outliers_behind_need_no_block_elsewhere_to_leave_the_rest_held_back(monkeypatch):
    # 123788: ranks 1 and 4 ran a collective of their own at seq 3 (their call stacks show it) and launched one
    # fewer than the rest; rank 5 launched two fewer, and waits in its TP group, where its work never completed.
    # Ranks 1 and 4 are behind by their own departure; rank 5 is held back by it: no rank to analyse as behind.
    calls = _calls(monkeypatch)
    world = CommAnalysis(comm=W, ranks=list(range(8)), launched={0: 4, 1: 3, 2: 4, 3: 4, 4: 3, 5: 2, 6: 4, 7: 4},
                         completed=dict.fromkeys(range(8)), first_seq=dict.fromkeys(range(8), 1))
    world.root = _root([1, 4], [0, 2, 3, 5, 6, 7], "different", shown=True)
    tp = CommAnalysis(comm=TP, ranks=[4, 5], launched={4: 4, 5: 4}, completed={4: 2, 5: 2}, first_seq={4: 1, 5: 1})
    analyses = {W: world, TP: tp}
    reanalysis.reanalyze_behind_ranks(analyses, Streams(), None, {W: ["timeout"]}, set())
    assert calls == []
    # Where rank 5's TP work all completed, nothing holds it there: it is behind.
    tp.completed = {4: 4, 5: 4}
    reanalysis.reanalyze_behind_ranks(analyses, Streams(), None, {W: ["timeout"]}, set())
    assert calls == [(W, {1, 4, 5}, {})]


def test_ranks_behind_whose_issue_orders_place_nothing_stay_behind(monkeypatch):
    # 100643: ranks 4 and 6 launched one world collective fewer and were analysed as behind; the issue orders show
    # rank 6 left one out at seq 3 and went on elsewhere, and say nothing of rank 4: it stays behind.
    calls = _calls(monkeypatch)
    monkeypatch.setattr(reanalysis, "skipped_here", lambda streams, comm, ranks: {6: (3, 3)})
    world = CommAnalysis(comm=W, ranks=list(range(8)), launched={r: 2 if r in (4, 6) else 3 for r in range(8)},
                         completed=dict.fromkeys(range(8)), first_seq=dict.fromkeys(range(8), 2))
    world.root = _root([4, 6], [0, 1, 2, 3, 5, 7], STOPPED, shown=False)
    world.behind = frozenset({4, 6})
    streams = Streams(members={W: list(range(8))})
    reanalysis.reanalyze_by_issue_orders({W: world}, streams, None)
    assert calls == [(W, {4, 6}, {6: (3, 3)})]


def test_ranks_behind_waiting_for_a_departure_elsewhere_are_held_there(monkeypatch):
    # 357111: ranks 0 and 2 launched one world collective more than ranks 1, 3 and 6, which their lengths alone show;
    # ranks 4, 5 and 7 launched one fewer still, and wait in their TP group, where rank 6 ran seven collectives past
    # them. They are held back by rank 6 there, not behind here: the world is not analysed again.
    calls = _calls(monkeypatch)
    world = CommAnalysis(comm=W, ranks=list(range(8)), launched={0: 3, 1: 2, 2: 3, 3: 2, 4: 1, 5: 1, 6: 2, 7: 1},
                         completed=dict.fromkeys(range(8)), first_seq=dict.fromkeys(range(8), 1))
    world.root = _root([0, 2], [1, 3, 4, 5, 6, 7], "extra", shown=False)
    tp = CommAnalysis(comm=TP, ranks=[4, 5, 6, 7], launched={4: 8, 5: 8, 6: 15, 7: 8},
                      completed=dict.fromkeys((4, 5, 6, 7)), first_seq=dict.fromkeys((4, 5, 6, 7), 1))
    tp.root = Root(comm=TP, seq=1, seq_range=(1, 15), outlier_ranks=[6], reference_ranks=[4, 5, 7], kind="extra",
                   size=7, pinned_by="signatures", reason=None, shown=False)
    reanalysis.reanalyze_behind_ranks({W: world, TP: tp}, Streams(), None, {W: ["timeout"], TP: ["timeout"]}, set())
    assert calls == []
    # Where they are the ones departing there, nothing on record holds them: they are behind here too.
    tp.root = Root(comm=TP, seq=8, seq_range=(8, 8), outlier_ranks=[4, 5, 7], reference_ranks=[6], kind="stopped",
                   size=7, pinned_by="signatures", reason=None, shown=False)
    reanalysis.reanalyze_behind_ranks({W: world, TP: tp}, Streams(), None, {W: ["timeout"]}, set())
    assert calls == [(W, {4, 5, 7}, {})]


def test_ranks_departing_later_need_no_block_elsewhere_to_leave_the_rest_held_back(monkeypatch):
    # 998374: rank 0 swapped two world all-reduces at seq 5 (the root names it), and rank 3 ran one of its own at
    # seq 7, where it waits: the root leaves rank 3 off both sides, one short by its own departure. Rank 2 launched
    # two fewer and waits in its TP group, where its work never completed: held back there, not behind here.
    calls = _calls(monkeypatch)
    world = CommAnalysis(comm=W, ranks=[0, 1, 2, 3], launched={0: 8, 1: 8, 2: 6, 3: 7},
                         completed=dict.fromkeys(range(4), 6), first_seq=dict.fromkeys(range(4), 1))
    world.root = _root([0], [1, 2], "different", shown=True)
    tp = CommAnalysis(comm=TP, ranks=[2, 3], launched={2: 18, 3: 15}, completed={2: 15, 3: 15},
                      first_seq={2: 1, 3: 1})
    part = pl.DataFrame({"seq": [1], "state": ["completed"]})
    streams = Streams(parts={(W, r): part for r in range(4)} | {(TP, r): part for r in (2, 3)},
                      members={W: [0, 1, 2, 3], TP: [2, 3]})
    reanalysis.reanalyze_behind_ranks({W: world, TP: tp}, streams, None, {W: ["stuck"], TP: ["stuck"]}, set())
    assert calls == []
    # Where rank 2's TP work all completed, nothing holds it there: it is behind (rank 3 stays as its records say).
    tp.completed = {2: 18, 3: 15}
    reanalysis.reanalyze_behind_ranks({W: world, TP: tp}, streams, None, {W: ["stuck"], TP: ["stuck"]}, set())
    assert calls == [(W, {2, 3}, {})]


def test_a_rank_behind_with_no_records_that_a_peers_report_shows_waiting_elsewhere_is_held_there(monkeypatch):
    # Seed 1030037: in the DP group of ranks 0, 2, 4 and 6, rank 4's records show a collective of its own at seq 4
    # (it launched 5, ranks 0 and 6 launched 6); rank 2 left no file, and their desync reports count it at 4. Rank
    # 3's report on their TP group says rank 2 joined its collective #4 there and never finished it: rank 2 waits
    # there, held back, and is not analysed as behind here beside rank 4.
    calls = _calls(monkeypatch)
    dp = CommAnalysis(comm=W, ranks=[0, 2, 4, 6], launched={0: 6, 2: 4, 4: 5, 6: 6},
                      completed={0: None, 2: None, 4: 4, 6: 4}, first_seq=dict.fromkeys((0, 2, 4, 6), 1))
    dp.root = _root([4], [0, 2, 6], "extra", shown=True)
    tp = CommAnalysis(comm=TP, ranks=[3], launched={3: 5}, completed={3: 5}, first_seq={3: 1})
    marks = {TP: EnqueueMarks(launched={3: 5}, completed={3: 3}, waiting={2, 3})}
    reanalysis.reanalyze_behind_ranks({W: dp, TP: tp}, Streams(), None, {W: ["timeout"]}, set(), marks)
    assert calls == []
    # With no word of where it waits, it may have left collectives out here: it is behind.
    reanalysis.reanalyze_behind_ranks({W: dp, TP: tp}, Streams(), None, {W: ["timeout"]}, set())
    assert calls == [(W, {2, 4}, {})]
