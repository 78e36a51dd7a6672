"""align/held_back.py: PyTorch's completion marks in the ranks' other groups tell a rank held back there by a peer's
extra world collective from one that skipped a world collective."""

from __future__ import annotations

from ncclforensics.align.divergence import ENQUEUED_COUNTS
from ncclforensics.align.held_back import held_back_root
from ncclforensics.align.ras_only import root_from_counts
from ncclforensics.align.streams import Streams
from ncclforensics.align.watchdog import enqueue_marks, marks_only_roots, timeout_stacks
from ncclforensics.model import Location, ProgressReport, WatchdogEvent, WatchdogKind
from ncclforensics.report.words import ambiguity, root_sentence

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
    from ncclforensics.align.divergence import MISSING, Root
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
