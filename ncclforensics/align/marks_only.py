"""Roots and wedges from PyTorch's enqueued counts alone, where no streams compare a group's ranks.

Where no rank's collectives are on record, the counts of work each rank enqueued (`last enqueued NCCL work: 50`)
still say which ranks launched more or fewer, like RAS counts do; where they agree, a desync report's snapshot may
still show ranks whose last collectives are of different types (root_from_last_ops).
"""

from __future__ import annotations

from dataclasses import replace

from ..model import WatchdogEvent
from .answers import DIFFERENT_OPS, ENQUEUED_COUNTS, RangeReason, Root, ops_at
from .comm_streams import comm_streams
from .consequences import Disagreement, candidates, odd_ones, ran_ahead
from .enqueue_marks import EnqueueMarks
from .held_back import held_back_root
from .ras_only import root_from_counts, wedge_from_counts
from .streams import Streams, traced
from .watchdog import DESYNC_REPORT, timeout_stacks
from .wedge import Wedge


def root_from_last_ops(comm: str, marks: EnqueueMarks) -> Root | None:
    """Where the ranks' counts agree, the snapshot of a desync report may still show ranks whose last collectives,
    of one number, are of different types (`#4 started ranks: [2] started ALLREDUCE` beside `#4 finished ranks:
    [0, 1, 3] finished _ALLGATHER_BASE`): they issued different collectives there, or one side left one out and
    added one before it (the next of the others', or a reorder), so the root is at that number or before. The
    outliers are the ranks of the types fewer ranks issued; with no type issued by a strict majority, every rank
    there, with no majority."""
    by_number: dict[int, dict[str, list[int]]] = {}
    for rank, (number, op) in sorted(marks.last_ops.items()):
        by_number.setdefault(number, {}).setdefault(op, []).append(rank)
    mixed = sorted(number for number, ops in by_number.items() if len(ops) > 1)
    if not mixed:
        return None
    number = mixed[0]
    groups = sorted(by_number[number].values(), key=lambda ranks: (-len(ranks), ranks))
    there = sorted(r for ranks in groups for r in ranks)
    majority = len(groups[0]) * 2 > len(there)
    # (with no majority, every rank there is named on both sides, as streams that split evenly are)
    outliers = sorted(r for ranks in groups[1:] for r in ranks) if majority else there
    return Root(comm=comm, seq=1, seq_range=(1, number), outlier_ranks=outliers,
                reference_ranks=[r for r in there if r not in outliers] if majority else there, kind=DIFFERENT_OPS,
                size=1, pinned_by=DESYNC_REPORT, reason=RangeReason.LAST_OPS, ops={}, majority=majority,
                shown=True)  # (a record differs, not only a count)


def _compared(streams: Streams) -> bool:
    """Whether the streams let two ranks of some communicator be compared. Then they speak, not the counts: a
    group's PyTorch name and the communicator's hash cannot be told to be one, and the counts would only echo
    (or, where PyTorch counts work NCCL's lines do not, muddle) what the streams say."""
    # Rows made from timeout lines alone (one per rank) compare nothing but the op each rank waits in; streams
    # that end where a file was cut short speak only up to the cut, and past it the counts do. So do streams of
    # fingerprint traces alone: a trace records a collective once its result was read back (and is written out
    # per step), so it ends before whatever was in flight.
    return not streams.cut and any(len(members) > 1 for members in streams.members.values()) and any(
        part.height > 1 and not traced(part) for part in streams.parts.values())


def marks_only_root(groups: dict[str, EnqueueMarks], streams: Streams, stopped: bool = False) -> Root | None:
    """Where no streams compare a group's ranks, for a group that stopped: the ranks that enqueued more or fewer
    work than the others; of several groups, the first that is no consequence of another (see marks_only_roots)."""
    found = marks_only_roots(groups, streams, stopped=stopped)
    chosen = candidates([d for _, d in found])
    return next((root for root, d in found if d.comm in chosen), None)


def marks_only_roots(groups: dict[str, EnqueueMarks], streams: Streams, watchdog: list[WatchdogEvent] | None = None,
                     stopped: bool = False) -> list[tuple[Root, Disagreement]]:
    """Per group that no streams compare (none compare any ranks, or none holds the ranks that report on the
    group: the ring of every dump lost its entries, say), that stopped and whose ranks enqueued different counts
    of work, its root and who its disagreement involves (the ranks that reported on the group: its members on
    record). `watchdog`: the events, for the call stacks of the works that timed out; `stopped`: other evidence
    says the job stopped (a timeout, entries that never completed).

    The pg_status of dumps is a snapshot of every rank's progress, so its counts speak where nothing says the job
    stopped too; then the ranks behind may only lag (the dumps were taken while it ran), and the root says so
    (`Root.unstopped`)."""
    compared = _compared(streams)
    stacks = timeout_stacks(watchdog or [])
    found = []
    for comm, marks in sorted(groups.items()):
        if compared and _covered(marks, streams):
            continue
        if not (marks.stops or marks.dumped):
            continue
        # (a group that records tie to an NCCL comm hash goes by the hash, as its streams do)
        root = root_from_counts(streams.aliases.get(comm, comm), marks.launched, marks.source, marks.floors,
                                marks.unnamed)
        if root is None and marks.stops and len(set(marks.launched.values())) == 1:
            root = root_from_last_ops(streams.aliases.get(comm, comm), marks)
        if root is not None and marks.stops and marks.source == ENQUEUED_COUNTS:
            # Ranks behind may be held back in another group by an extra collective here: the groups'
            # completion marks may say so (a desync report's own numbering does not mix with them).
            counted = {name: g for name, g in groups.items() if g.source == ENQUEUED_COUNTS}
            root = held_back_root(root, {name: g.launched for name, g in counted.items()},
                                  {name: g.completed for name, g in counted.items()}, stacks) or root
        if root is not None:
            if not (marks.stops or stopped):
                root = replace(root, unstopped=True)
            odd = odd_ones(marks.launched, set(root.outlier_ranks), root.majority)
            found.append((root, Disagreement(root.comm, frozenset(marks.launched), odd,
                                             ahead=ran_ahead(marks.launched, odd))))
    return found


def _covered(marks: EnqueueMarks, streams: Streams) -> bool:
    """Whether some comm's streams already compare what the group's counts say: two or more ranks' records of a
    comm that holds every rank the counts are of, each going as far as its count (a group's name and a comm's
    hash are tied by nothing else). Counts past every such comm's records say what no stream compares."""
    def reaches(comm: str, rank: int, count: int) -> bool:
        part = streams.parts.get((comm, rank))
        return part is not None and part.height > 0 and int(part.get_column("seq").max()) >= count

    return any(len(members) > 1 and set(marks.launched) <= set(members)
               and all(reaches(comm, rank, n) for rank, n in marks.launched.items())
               for comm, members in streams.members.items())


def marks_only_wedge(groups: dict[str, EnqueueMarks], streams: Streams, dead: set[int]) -> Wedge | None:
    """Who waits on whom, by the same counts, where no streams compare ranks and a group stopped."""
    if _compared(streams):
        return None
    for comm, marks in sorted(groups.items()):
        if not marks.stops or len(set(marks.launched.values())) < 2:
            continue
        wedge = wedge_from_counts(comm, marks.launched, marks.completed, dead, list(marks.stops), marks.evidence,
                                  floors=marks.floors)
        wedge.ops = ops_at(comm_streams(streams.comm_parts(comm)), wedge.seq)  # a timed-out rank's own line
        return wedge
    return None
