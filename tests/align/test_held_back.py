"""align/held_back.py: PyTorch's completion marks in the ranks' other groups tell a rank held back there by a peer's
extra world collective from one that skipped a world collective."""

from __future__ import annotations

from ncclforensics.align.answers import ENQUEUED_COUNTS
from ncclforensics.align.enqueue_marks import enqueue_marks
from ncclforensics.align.held_back import held_back_root
from ncclforensics.align.marks_only import marks_only_roots
from ncclforensics.align.ras_only import root_from_counts
from ncclforensics.align.streams import Streams
from ncclforensics.align.watchdog import timeout_stacks
from ncclforensics.model import Location, ProgressReport, WatchdogEvent, WatchdogKind
from ncclforensics.report.ambiguity import ambiguity
from ncclforensics.report.root_words import root_sentence

# A world group "0" of ranks 0..3 over TP groups "1" (ranks 0, 1) and "2" (ranks 2, 3). Rank 2 issued a world
# collective (seq 2) after 2 of its TP group's; ranks 0 and 1 issue their seq 2 after 6 of theirs. Rank 3 launched
# one world collective and completed it, and waits in TP work 3, which ranks 2 and 3 both launched: rank 2's GPU
# holds it behind the pending world collective.
WORLD = {0: 2, 1: 2, 2: 2, 3: 1}
WORLD_DONE = {0: 1, 1: 1, 2: 1, 3: 1}


def _marks(theirs_done: int = 6, held_launched: int = 6):
    launched = {"0": WORLD, "1": {0: 12, 1: 12}, "2": {2: held_launched, 3: 6}}
    completed = {"0": WORLD_DONE, "1": {0: theirs_done, 1: theirs_done}, "2": {2: 2, 3: 2}}
    return launched, completed


def _counted():
    return root_from_counts("0", WORLD, ENQUEUED_COUNTS)


def test_the_rank_ahead_of_a_held_peer_launched_the_extra_collective():
    root = _counted()
    assert (root.outlier_ranks, root.kind) == ([3], "missing")  # by counts alone, the rank behind
    held = held_back_root(root, *_marks())
    assert (held.outlier_ranks, held.reference_ranks, held.kind, held.seq_range, held.majority) == (
        [2], [0, 1, 3], "extra", (1, 2), True)
    assert held.blocked_elsewhere == (3,) and not held.behind_may_be_held
    assert (held.held_back.group, held.held_back.work, held.held_back.issued_after) == ("2", 3, 2)
    assert (held.held_back.program_after, held.held_back.program_ranks) == (6, (0, 1))
    said = root_sentence(held)
    assert "Rank 2 launched 1 collective in comm 0 that the others did not" in said and "held back" in said
    # No stacks on record: an extra world collective and TP collectives rank 2 left out read the same.
    assert "left out before it" in ambiguity(held)


def test_ranks_that_completed_no_more_before_it_leave_the_counts_undecided():
    # The others completed as many TP collectives before their seq 2 as rank 2 did: it issued seq 2 where the
    # program does, and rank 3 may have skipped it.
    assert held_back_root(_counted(), *_marks(theirs_done=2)) is None


def test_a_member_that_never_launched_the_held_work_is_what_it_waits_for():
    assert held_back_root(_counted(), *_marks(held_launched=2)) is None


def _event(rank: int, line: int, kind: str, comm: str | None = None, seq: int | None = None,
           message: str = "") -> WatchdogEvent:
    return WatchdogEvent(loc=Location(f"torch_rank{rank}.log", line), kind=kind, rank=rank, comm=comm, seq=seq,
                         op="AllReduce" if seq else None, message=message)


def _progress(rank: int, comm: str, enqueued: int, completed: int, line: int) -> ProgressReport:
    return ProgressReport(loc=Location(f"torch_rank{rank}.log", line), comm=comm, rank=rank, last_enqueued=enqueued,
                          last_completed=completed)


def test_the_timeout_lines_and_their_stacks_name_the_extra_collective():
    timeout, stack = WatchdogKind.TIMEOUT.value, "stack_trace"
    site = {0: "forward_context.py:90", 1: "forward_context.py:90", 2: "forward_context.py:126"}
    watchdog = [e for r in (0, 1, 2) for e in (_event(r, 2, timeout, "0", 2), _event(r, 4, stack, message=site[r]))]
    watchdog += [_event(r, 9, timeout, "1" if r < 2 else "2", 7 if r < 2 else 3) for r in range(4)]
    progress = [_progress(r, "0", WORLD[r], WORLD_DONE[r], 20) for r in range(4)]
    progress += [_progress(r, "1", 12, 6, 10) for r in (0, 1)] + [_progress(r, "2", 6, 2, 10) for r in (2, 3)]
    assert timeout_stacks(watchdog)[("0", 2, 2)] == "forward_context.py:126"
    (root, _), = marks_only_roots(enqueue_marks(progress, watchdog), Streams(), watchdog)
    assert (root.outlier_ranks, root.kind, root.held_back.stacks_part) == ([2], "extra", True)
    assert "call stack of seq 2 differs" in root_sentence(root)
    assert "left out before it" not in ambiguity(root)


def test_each_rank_behind_may_be_held_back_by_its_own_peer():
    # Ranks 0 and 3 behind in the world, each in another TP group: ranks 1 and 2 may each have launched one more and
    # hold their own TP peer back. A rank on neither side whose records end as early (cut short) may be held so too.
    from ncclforensics.align.answers import Root
    from ncclforensics.align.answers import MISSING
    from ncclforensics.align.held_back import may_hold_back
    groups = {"0": ({0, 1, 2, 3}, 4), "1": ({0, 1}, 2), "2": ({2, 3}, 2)}

    def behind(outliers, unplaced=()):
        return Root(comm="0", seq=1, seq_range=(1, 2), outlier_ranks=outliers, reference_ranks=[
            r for r in range(4) if r not in outliers and r not in unplaced], unplaced_ranks=list(unplaced),
            kind=MISSING, size=1, pinned_by="signatures", reason=None)

    assert may_hold_back(behind([0, 3]), groups) == (1, 2)
    assert may_hold_back(behind([0], unplaced=[3]), groups, behind_too=[3]) == (1, 2)
    assert may_hold_back(behind([0], unplaced=[3]), groups) == (1,)
    # (a rank behind that shares no other communicator with a rank ahead: no peer holds it back)
    assert may_hold_back(behind([0, 1]), groups) == ()


def _counted_root(counts: dict[int, int]):
    return root_from_counts("0", counts, "RAS counts")


def test_counts_in_three_steps_name_the_ranks_furthest_behind_and_the_rank_between_that_may_hold_them():
    # Seed 99060, RAS counts alone: rank 3 ran one more world collective and waits in it; its TP peer rank 2 waits
    # for it in their TP comm, and the ranks of the other TP pairs launched on past rank 3. The TP comms' members
    # are not on record (a reply gives four comms of two ranks).
    from ncclforensics.align.held_back import behind_in_chain, may_hold_back
    counts = {0: 6, 1: 6, 2: 4, 3: 5, 4: 6, 5: 6, 6: 6, 7: 6}
    groups = {"0": (set(range(8)), 8), **{f"#1-{i}": (set(), 2) for i in range(4)}}
    root = behind_in_chain(_counted_root(counts), {r: (n,) for r, n in counts.items()}, groups, whole=True)
    assert (root.outlier_ranks, root.kind, root.behind_the_rest, root.majority) == ([2], "missing", (3,), True)
    assert root.reference_ranks == [0, 1, 3, 4, 5, 6, 7] and root.seq_range == (1, 5)
    assert may_hold_back(root, groups) == (0, 1, 3, 4, 5, 6, 7)
    # (with the TP pairs on record, only rank 2's own peer may hold it back, and it is the rank between)
    pairs = {"0": (set(range(8)), 8), "1": ({0, 1}, 2), "2": ({2, 3}, 2), "3": ({4, 5}, 2), "4": ({6, 7}, 2)}
    root = behind_in_chain(_counted_root(counts), {r: (n,) for r, n in counts.items()}, pairs, whole=True)
    assert root.outlier_ranks == [2] and may_hold_back(root, pairs) == (3,)


def test_counts_in_steps_that_one_held_back_rank_does_not_explain_are_left_as_they_are():
    from ncclforensics.align.held_back import behind_in_chain
    pairs = {"0": (set(range(8)), 8), "1": ({0, 1}, 2), "2": ({2, 3}, 2), "3": ({4, 5}, 2), "4": ({6, 7}, 2)}

    def chain(counts, groups=pairs, floors=()):
        return behind_in_chain(_counted_root(counts), {r: (n,) for r, n in counts.items()}, groups, floors, True)

    # the rank between shares no communicator with the rank behind: it holds nobody back here
    assert chain({0: 6, 1: 6, 2: 4, 3: 6, 4: 6, 5: 5, 6: 6, 7: 6}) is None
    # two ranks between, one behind: each that launched one more holds back a peer of its own
    assert chain({0: 6, 1: 6, 2: 4, 3: 5, 4: 6, 5: 6, 6: 6, 7: 6},
                 {"0": (set(range(8)), 8), "1": ({0, 1, 2, 3}, 4), "2": ({4, 5, 6, 7}, 4)}) is not None
    assert chain({0: 5, 1: 6, 2: 4, 3: 5, 4: 6, 5: 6, 6: 6, 7: 6},
                 {"0": (set(range(8)), 8), "1": ({0, 1, 2, 3}, 4), "2": ({4, 5, 6, 7}, 4)}) is None
    # a rank behind whose count is only a floor may have launched as many as the rank between
    assert chain({0: 6, 1: 6, 2: 4, 3: 5, 4: 6, 5: 6, 6: 6, 7: 6}, floors={2}) is None
    # two steps only: the one-level reading (may_hold_back) is all
    assert chain({0: 6, 1: 6, 2: 5, 3: 6, 4: 6, 5: 6, 6: 6, 7: 6}) is None
    # counts per type that do not rise together: a rank that launched other collectives, not fewer
    typed = {0: (6, 2), 1: (6, 2), 2: (4, 2), 3: (4, 3), 4: (6, 2), 5: (6, 2), 6: (6, 2), 7: (6, 2)}
    assert behind_in_chain(_counted_root({r: sum(c) for r, c in typed.items()}), typed, pairs) is None


def test_a_rank_that_departs_elsewhere_too_stays_a_candidate_out_of_the_steps():
    # Seed 135145, RAS counts alone: rank 2 issued an all-gather where its TP peer rank 3 issued an all-reduce (rank 3
    # waits there), and rank 4 ran one more world collective that its TP peer rank 5 waits behind. World counts 4, 4,
    # 4, 2, 3, 2, 4, 4; rank 3's TP comm disagrees too, so it is a candidate. Without it the counts come in three
    # steps: rank 5 furthest behind, rank 4 between.
    from dataclasses import replace

    from ncclforensics.align.held_back import behind_in_chain, may_hold_back
    counts = {0: 4, 1: 4, 2: 4, 3: 2, 4: 3, 5: 2, 6: 4, 7: 4}
    groups = {"0": (set(range(8)), 8), **{f"#1-{i}": (set(), 2) for i in range(4)}}
    root = replace(_counted_root(counts), outlier_ranks=[4, 5], outlier_candidates={3: ("#1-1",)})
    chain = behind_in_chain(root, {r: (n,) for r, n in counts.items()}, groups, whole=True)
    assert (chain.outlier_ranks, chain.behind_the_rest, chain.outlier_candidates) == ([5], (4,), {3: ("#1-1",)})
    assert 3 not in chain.reference_ranks and may_hold_back(chain, groups) == (0, 1, 2, 4, 6, 7)


def test_a_rank_behind_in_records_shown_misaligned_by_results_alone_may_be_held_back_by_an_extra_one():
    # Rank 0's records of the world group end sooner, and the others read back the world's seq 2 wrong: by records
    # and results, rank 0 left a world collective out at seq 2. But a wrong result at seq 2 fits rank 1 running an
    # extra one there alike, and the marks say so: rank 0 completed all it launched in the world and waits in TP
    # group "1" at work 5, which both of its members launched; rank 1 has the world's seq 3 pending after 4 of
    # that group's, where ranks 2 and 3 completed 8 of theirs before it. Rank 1 ran one more; rank 0 is held back.
    from dataclasses import replace

    from ncclforensics.align.choose import _held_back_by_marks, _held_back_by_peers
    from ncclforensics.align.answers import CommAnalysis, Root
    from ncclforensics.align.enqueue_marks import EnqueueMarks

    stops = ["watchdog timeout"]
    marks = {"0": EnqueueMarks({0: 2, 1: 3, 2: 3, 3: 3}, {0: 2, 1: 2, 2: 2, 3: 2}, stops=stops),
             "1": EnqueueMarks({0: 8, 1: 8}, {0: 4, 1: 4}, stops=stops),
             "2": EnqueueMarks({2: 12, 3: 12}, {2: 8, 3: 8}, stops=stops)}
    root = Root("0", 2, (2, 2), [0], [1, 2, 3], "missing", 1, "fingerprints", None, shown=True, by_results=True)
    held = _held_back_by_marks(root, marks, Streams(), [])
    assert (held.outlier_ranks, held.kind, held.seq_range, held.blocked_elsewhere) == ([1], "extra", (2, 2), (0,))
    assert held.held_back.seq == 3 and "only rank 1 has one pending, seq 3 here" in root_sentence(held)
    # Records that differ in more than length are no such reading; without the marks, the rank ahead that shares
    # a group with rank 0 is named as one that may hold it back.
    assert _held_back_by_marks(replace(root, by_results=False), marks, Streams(), []).outlier_ranks == [0]
    analysis = CommAnalysis("0", [0, 1, 2, 3], {0: 2, 1: 3, 2: 3, 3: 3}, {0: 1, 1: 1, 2: 2, 3: 2}, {})
    groups = {"1": ({0, 1}, 2), "2": ({2, 3}, 2)}
    assert _held_back_by_peers(root, {"0": analysis}, groups).may_be_held_back_by == (1,)


def test_ranks_above_the_rest_end_the_steps_at_the_rest_and_are_among_those_ahead():
    # Seed 570201, RAS counts alone: rank 5 ran one more world collective (its TP peer rank 4 waits behind it), and
    # rank 6 one more too. World counts 4, 4, 4, 4, 2, 3, 5, 4: the steps end at the rest's 4, rank 6 above them is
    # ahead (an extra collective of its own), and rank 5 between may hold rank 4 back.
    from ncclforensics.align.held_back import behind_in_chain, may_hold_back
    counts = {0: 4, 1: 4, 2: 4, 3: 4, 4: 2, 5: 3, 6: 5, 7: 4}
    groups = {"0": (set(range(8)), 8), **{f"#1-{i}": (set(), 2) for i in range(4)}}
    root = behind_in_chain(_counted_root(counts), {r: (n,) for r, n in counts.items()}, groups, whole=True)
    assert (root.outlier_ranks, root.behind_the_rest, root.ahead_of_the_rest) == ([4], (5,), (6,))
    assert root.kind == "missing" and may_hold_back(root, groups) == (0, 1, 2, 3, 5, 6, 7)
    from dataclasses import replace
    held = replace(root, behind_may_be_held=True, may_be_held_back_by=may_hold_back(root, groups))
    assert "Rank 6 launched more than the rest" in root_sentence(held)


def test_the_communicator_a_rank_behind_shares_with_a_rank_that_may_hold_it_back_is_a_candidate():
    """World "0" of ranks 0..3 over TP pairs "1" (0, 1) and "2" (2, 3); the PyTorch group "pg1" holds ranks 0 and 1
    too (the pair's own name beside its NCCL hash "0x1"). Rank 1 launched fewer in the world and rank 0 may hold it
    back: rank 0 may have launched an extra world collective, or left collectives of their pair out (a skipped
    drafter pass) and issued the world's next one early, which reads the same. The pair is a candidate, named once
    (610262: a drafter skipped on rank 0)."""
    from dataclasses import replace

    from ncclforensics.align.answers import Root
    from ncclforensics.align.answers import STOPPED
    from ncclforensics.align.held_back import held_back_elsewhere
    from ncclforensics.report.notes import note_words
    groups = {"0": ({0, 1, 2, 3}, 4), "0x1": ({0, 1}, 2), "pg1": ({0, 1}, 2), "2": ({2, 3}, 2)}
    root = Root(comm="0", seq=1, seq_range=(1, 3), outlier_ranks=[1], reference_ranks=[0, 2, 3], kind=STOPPED,
                size=2, pinned_by="signatures", reason=None, behind_may_be_held=True, may_be_held_back_by=(0,))
    found, notes = held_back_elsewhere(root, groups)
    assert found.undecided_comms == ("0x1",)
    assert [(n.comm, n.ranks, n.ahead, n.root_comm) for n in notes] == [("0x1", (1,), (0,), "0")]
    assert "left collectives of comm 0x1 out" in note_words(notes[0])
    # (nothing holds rank 1 back: no candidate)
    assert held_back_elsewhere(replace(root, behind_may_be_held=False, may_be_held_back_by=()), groups) == (
        replace(root, behind_may_be_held=False, may_be_held_back_by=()), [])


def test_the_marks_name_the_held_rank_and_the_peer_that_holds_it():
    from ncclforensics.align.held_back import held_back_ranks

    assert held_back_ranks("0", *_marks()) == {3: frozenset({2})}
    assert held_back_ranks("0", *_marks(theirs_done=2)) == {}


def test_a_held_rank_whose_records_end_before_the_sides_part_sides_with_the_program_not_its_holder():
    # World records (fingerprint tags) of ranks 1..3 part at seq 2: rank 1 ran `retry` where ranks 2 and 3 ran the
    # next step's `tokens`. Rank 0's trace ends at seq 1, yet PyTorch counts it to seq 2 (`ended`): alone it could
    # be on either side, an even split. Its completion marks show it held back in its TP group by rank 1's early
    # world collective: it ran the program there, so rank 1 is a minority of one.
    import numpy as np

    from ncclforensics.align.edits import Codes
    from ncclforensics.align.propose import propose

    tokens, retry = 1, 2
    tags = {0: [tokens, 0], 1: [tokens, retry, tokens], 2: [tokens, tokens, tokens], 3: [tokens, tokens, tokens]}
    codes = {r: Codes({"tag": np.array(t, dtype=np.uint64)}, len(t)) for r, t in tags.items()}
    tie = propose(codes, 1, ended={0})
    assert not tie.majority and tie.outliers == [0, 1, 2, 3]
    held = propose(codes, 1, ended={0}, held={0: frozenset({1})})
    assert held.majority and held.outliers == [1] and held.reference == [0, 2, 3]
    # Held by a rank of the larger side it would join, the marks and the records do not agree: still a tie.
    assert not propose(codes, 1, ended={0}, held={0: frozenset({2})}).majority


def _pair_report_logs(tmp_path) -> list[str]:
    """Watchdog logs of ranks 0..2 of a world group "0" over TP pairs "1" (ranks 0, 1) and "2" (ranks 2, 3); rank 3
    left none (1090577). In the world, ranks 1 and 2 launched 4 and wait at #3, and their reports say ranks 0 and 3
    finished #2 and joined no more. In pair "1", rank 0 launched 6 and rank 1 8; in pair "2", rank 2 launched 8 and
    its report names its peer, place 1, joined at #6 (which global rank that is, no line says)."""
    def timeout(rank: int, seq: int, numel: int) -> str:
        return (f"[rank{rank}]:[E1129 09:55:01.7 ProcessGroupNCCL.cpp:689] [Rank {rank}] Watchdog caught collective "
                f"operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn={numel}, NumelOut={numel}, "
                "Timeout(ms)=20000) ran for 20016 milliseconds before timing out.")

    def report(rank: int, place: int, at: int, lagging: str, latest: list[str]) -> list[str]:
        return [f"[rank{rank}]:[E1129 09:55:01.7 ProcessGroupNCCL.cpp:2495] Rank {place}",
                f"\t - [{place}] Timeout at collective: ALLREDUCE, #{at}",
                "\t - To our best knowledge, the lagging/dead/mismatched ranks that caused the desync are:",
                f"\t   {lagging}", "\t - Snapshot of ranks' latest states:", *(f"\t   {x}" for x in latest)]

    def status(rank: int, group: str, place: int, seq: int, enqueued: int, completed: int) -> str:
        return (f"[rank{rank}]:[E1129 09:55:01.7 ProcessGroupNCCL.cpp:2303] [PG ID {group} PG GUID {group} Rank "
                f"{place}]  failure detected by watchdog at work sequence id: {seq} PG status: last enqueued work: "
                f"{enqueued}, last completed work: {completed}")

    def world(rank: int) -> list[str]:
        return [timeout(rank, 3, 1), *report(rank, rank, 4, "  [0, 3] finished collective #2, but didn't join "
                                             "collective #3 (count from 1)",
                                             ["#2 finished ranks:", "  [0, 3] finished ALLREDUCE", "#4 started ranks:",
                                              "  [1, 2] started ALLREDUCE"]), status(rank, "0", rank, 3, 4, 2)]

    def pair(rank: int, group: str, place: int, enqueued: int) -> list[str]:
        peer = 1 - place
        return [timeout(rank, 5, 4096), *report(rank, place, enqueued, f"- [{peer}] joined but didn't finish "
                                                "collective #6 (count from 1)",
                                                ["#6 started ranks:", f"  [{peer}] started ALLREDUCE",
                                                 f"#{enqueued} started ranks:", f"  [{place}] started ALLREDUCE"]),
                status(rank, group, place, 5, enqueued, 4)]

    logs = {0: [timeout(0, 5, 4096), status(0, "1", 0, 5, 6, 4), "[rank0]:[E1129 09:55:07.7 ProcessGroupNCCL."
                "cpp:1914] [PG ID 0 PG GUID 0(default_pg) Rank 0] Received a dump signal due to a collective "
                "timeout from this local rank and we will try our best to dump the debug info. Last enqueued NCCL "
                "work: 2, last completed NCCL work: 2."],
            1: world(1) + pair(1, "1", 1, 8), 2: world(2) + pair(2, "2", 0, 8)}
    paths = []
    for rank, lines in logs.items():
        path = tmp_path / f"torch_rank{rank}.log"
        path.write_text("\n".join(lines) + "\n")
        paths.append(str(path))
    return paths


def test_a_peer_that_left_no_file_but_a_report_numbers_may_be_held_back_by_its_pair(tmp_path):
    """Ranks 0 and 3 launched fewer world collectives. Rank 0's pair peer rank 1 may have launched one more there
    and hold it back in their pair; so may rank 2 hold rank 3, which left no file: rank 2's report of pair "2"
    numbers two places, so the pair has two members, and rank 3 may be the other. Each pair is a candidate beside
    the world (each pair's drafter gate may have been skipped on rank 1 and on rank 2)."""
    from ncclforensics.api import diff_paths, parse_paths

    paths = _pair_report_logs(tmp_path)
    evidence = parse_paths(paths).evidence
    marks = enqueue_marks([p for e in evidence for p in e.progress], [w for e in evidence for w in e.watchdog])
    assert marks["2"].launched == {2: 8} and marks["2"].places == 2
    root = diff_paths(paths)[1].root
    assert (root.comm, root.outlier_ranks, root.kind) == ("0", [0, 3], "missing")
    assert root.may_be_held_back_by == (1, 2) and root.undecided_comms == ("1", "2")
