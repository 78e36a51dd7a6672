"""align/counted_places.py: where PyTorch's counts place a rank's collective among its other groups' ones, and
the ranks that issued one early."""

from __future__ import annotations

from dataclasses import replace

import polars as pl

from ncclforensics.align.answers import EXTRA, OpAt, RangeReason, Root
from ncclforensics.align.counted_places import early_by_counts, went_past_unissued, with_early_by_counts
from ncclforensics.align.notes import IssuedEarlyByCounts
from ncclforensics.align.streams import Streams
from ncclforensics.align.enqueue_marks import EnqueueMarks
from ncclforensics.model import Location


def _group(counts: dict[int, tuple[int, int]], snapshot: bool = True) -> EnqueueMarks:
    """A stopped group's counts, rank -> (last enqueued, last completed), with a desync report's snapshot of every
    member where `snapshot`."""
    return EnqueueMarks(launched={r: n for r, (n, _) in counts.items()},
                        completed={r: done for r, (_, done) in counts.items()}, stops=["watchdog timeout"],
                        last_ops={r: (n, "AllReduce") for r, (n, _) in counts.items()} if snapshot else {})


def _timeout(seq: int, count: int) -> pl.DataFrame:
    return pl.DataFrame({"seq": [seq], "state": ["started"], "op": ["AllReduce"], "count": [count]})


def _incident(tp_counts: tuple[int, int] = (2048, 2048), snapshot: bool = True) -> tuple[dict, Streams]:
    # Seed 1085699: world counts 2, 3, 4, 3 of ranks 0-3, 2 of each completed; TP pair {0, 1} launched 8 and
    # completed none, both timing out in its seq 1; TP pair {2, 3} launched 16 and completed 8.
    marks = {"0": _group({0: (2, 2), 1: (3, 2), 2: (4, 2), 3: (3, 2)}),
             "1": _group({0: (8, 0), 1: (8, 0)}, snapshot), "2": _group({2: (16, 8), 3: (16, 8)})}
    streams = Streams(parts={("0", 1): _timeout(3, 8), ("0", 2): _timeout(3, 1), ("0", 3): _timeout(3, 8),
                             ("1", 0): _timeout(1, tp_counts[0]), ("1", 1): _timeout(1, tp_counts[1]),
                             ("2", 2): _timeout(9, 2048), ("2", 3): _timeout(9, 2048)},
                      members={"0": [1, 2, 3], "1": [0, 1], "2": [2, 3]})
    return marks, streams


def test_a_rank_waiting_in_a_world_seq_issued_right_after_fewer_tp_collectives_issued_it_early():
    # Rank 0 waits in its pair's seq 1 (all its world work completed), recorded alike by both: rank 1 would have run
    # it too had it waited there, so rank 1 waits in world seq 3, issued right after none of its TP collectives.
    # Ranks 2 and 3 completed 8 TP collectives and not seq 3, rank 0 launched 8 and not seq 3: 8 or more.
    marks, streams = _incident()
    assert early_by_counts("0", 3, marks, streams) == ({1: 3}, {1: 0, 0: 8, 2: 8, 3: 8})
    # (a seq past the records' last says nothing of them)
    assert early_by_counts("0", 2, marks, streams) == ({}, {})


def test_nothing_is_placed_where_the_pair_may_not_have_run_its_collective():
    # Records of the pair's seq 1 that differ (a mismatch NCCL may hang in) or members not all known (no desync
    # report's snapshot of the pair) leave where rank 1 waits unknown.
    assert early_by_counts("0", 3, *_incident(tp_counts=(2048, 1024))) == ({}, {})
    assert early_by_counts("0", 3, *_incident(snapshot=False)) == ({}, {})


def test_a_rank_that_launched_its_pair_past_where_the_others_issued_the_seq_is_not_held_short_of_it():
    # Seed 1224518, watchdog logs of ranks 0, 2 and 3: world counts 7, 8, 9, all 7 completed; TP pair {2, 3}
    # launched 20 and completed 15, both timing out in its 16th alike, so one of them issued world seq 8 right after
    # its pair's 15th. Rank 0 launched 20 in its own pair {0, 1} (rank 1 left no file) and completed 15: it went
    # past where seq 8 comes, so it waits in its pair for its peer, not short of seq 8 for it.
    marks = {"0": _group({0: (7, 7), 2: (8, 7), 3: (9, 7)}, snapshot=False), "1": _group({0: (20, 15)}, False),
             "2": _group({2: (20, 15), 3: (20, 15)}, False)}
    parts = {("0", 2): _timeout(8, 8), ("0", 3): _timeout(8, 1), ("1", 0): _timeout(16, 512),
             ("2", 2): _timeout(16, 512), ("2", 3): _timeout(16, 512)}
    streams = Streams(parts=parts, members={"0": [2, 3], "1": [0], "2": [2, 3]})
    assert went_past_unissued("0", 0, marks, streams)
    # Launched no further in its pair than the others completed of theirs, it may be held short of seq 8.
    assert not went_past_unissued("0", 0, {**marks, "1": _group({0: (15, 14)}, False)}, streams)
    # Where the pair's 16th is recorded apart (a mismatch NCCL may hang in), nothing places seq 8.
    apart = Streams(parts={**parts, ("2", 3): _timeout(16, 256)}, members=streams.members)
    assert not went_past_unissued("0", 0, marks, apart)
    # Nor where the ranks of the pair do not all wait in seq 8 (rank 2 completed it).
    assert not went_past_unissued("0", 0, {**marks, "0": _group({0: (7, 7), 2: (8, 8), 3: (9, 7)}, False)}, streams)


def _op(rank: int, count: int, site: str) -> OpAt:
    return OpAt(rank=rank, seq=3, op="AllReduce", count=count, dtype=None, redop=None, root=None, state="started",
                callsite="parallel_state.py:93", step=None, loc=Location(f"torch_rank{rank}.log", 2),
                stack=f"parallel_state.py:93 < {site}")


def test_the_early_rank_is_named_and_a_tie_of_the_rest_parts_later():
    # The records begin at seq 3, where ranks 1 and 3 call from forward_context.py:102 and rank 2 from line 90: a
    # majority against rank 2. Rank 1 issued its seq 3 early, so its record says nothing of the program; ranks 2 and
    # 3 part with no majority there, past where rank 1 issued its own: rank 1 departed first.
    marks, streams = _incident()
    root = Root(comm="0", seq=1, seq_range=(1, 3), outlier_ranks=[2], reference_ranks=[1, 3], kind="different",
                size=1, pinned_by="signatures", reason=RangeReason.BEFORE_RECORDS, records_start=3, shown=True,
                ops={1: _op(1, 8, "forward_context.py:102"), 2: _op(2, 1, "forward_context.py:90"),
                     3: _op(3, 8, "forward_context.py:102")}, kinds=("different", EXTRA))
    found, notes = with_early_by_counts(root, marks, streams)
    assert (found.outlier_ranks, found.reference_ranks, found.seq_range, found.kind) == ([1], [0, 2, 3], (1, 3), EXTRA)
    assert found.majority and found.undecided_comms == ("1",)  # (or it left TP collectives out before it)
    assert notes == [IssuedEarlyByCounts((1,), "0", 3, 0, (0, 2, 3), 8, (2, 3))]
    # Where ranks 2 and 3 agree at seq 3, rank 1 alone departed, and no rank parts later.
    alike = {**root.ops, 2: _op(2, 8, "forward_context.py:102")}
    found, notes = with_early_by_counts(replace(root, ops=alike), marks, streams)
    assert found.outlier_ranks == [1] and notes[0].later == ()
