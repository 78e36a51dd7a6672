"""Where PyTorch's counts place a rank's collective among those of its other groups, and who issued one early.

A rank's GPU runs its collectives in issue order whatever their group, so what it completed is a prefix of what it
issued, and what it launched a longer one. PyTorch's counts of a group (`last enqueued work: 8, last completed
work: 0`) therefore bound where, among a rank's collectives of its other groups, it issued a collective of one:

- one it never completed came after every collective it completed elsewhere (a floor of its place), and one it
  never launched after every one it launched;
- the first one it never completed (its head, the one it waits in) came right after those it completed: its place
  is exact. A rank with unfinished work in one group only waits there. One with unfinished work in several does not
  wait in a group whose next collective every other member waits in, its first unfinished one, recorded alike on
  each: NCCL would have run that one.

Ranks that run one program (their other groups of one shape: TP groups of a size) issue a collective of the world
after as many of their other groups' collectives. A rank that waits in seq N of a group right after fewer than a
strict majority of its members had completed or launched elsewhere, none of them having issued seq N yet, issued it
early: it ran an extra collective of its own at seq N or before (or left collectives of its other groups out before
it, which reads the same). Its records at seq N then say nothing of the program, and where the rest's records there
part with no majority, their parting comes later than its departure: their seq N sits past where it issued its own.

Worked example (1085699): world counts 2, 3, 4, 3 of ranks 0-3, 2 of each completed; TP pairs {0, 1} with 8
launched, none completed, and {2, 3} with 16 launched, 8 completed. Rank 0 waits in its pair's first collective
(all its world work completed), which both ranks recorded alike: rank 1 does not wait there, so it waits in world
seq 3, issued after none of its TP collectives. Ranks 2 and 3 completed 8 TP collectives and no seq 3, and rank 0
launched 8 and no seq 3: they issue it after 8 or more. Rank 1 issued seq 3 early; ranks 2 and 3, whose call stacks
part at seq 3, part there later.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from ..model.kinds import is_p2p_comm
from .answers import ENQUEUED_COUNTS, EXTRA, Root
from .notes import IssuedEarlyByCounts, Note
from .streams import Streams
from .enqueue_marks import EnqueueMarks

_SIGNATURE = ("op", "count", "dtype", "redop", "root", "callsite", "stack")


def early_by_counts(comm: str, last: int, marks: dict[str, EnqueueMarks], streams: Streams
                    ) -> tuple[dict[int, int], dict[int, int]]:
    """The ranks of `comm` that, by PyTorch's counts, wait in a seq of it up to `last` that they issued after fewer
    of their other groups' collectives than a strict majority of its members issued before it (module docstring):
    rank -> that seq; and, for each member whose place of the earliest such seq is bounded, rank -> its place (exact
    for the early ones, a floor for the rest). Empty where the counts do not place them."""
    counts = _counts(marks, streams)
    if comm not in counts or is_p2p_comm(comm):
        return {}, {}
    members = set(counts[comm].launched) | set(streams.members.get(comm, ()))
    groups = {rank: [c for c, g in counts.items() if c != comm and not is_p2p_comm(c) and rank in _members(g, c, streams)]
              for rank in members}
    whole = {rank for rank in members if all(_counted(counts[c], rank) for c in [comm, *groups[rank]])}
    # (other groups of other shapes run other programs: their counts do not compare)
    shapes = {rank: tuple(sorted(len(_members(counts[c], c, streams)) for c in groups[rank])) for rank in whole}
    if len(whole) * 2 <= len(members) or len(set(shapes.values())) != 1 or not next(iter(shapes.values())):
        return {}, {}
    heads = _heads(counts, streams)
    early: dict[int, int] = {}
    places: dict[int, int] = {}
    for rank in sorted(whole):
        head = heads.get(rank)
        if head is None or head[0] != comm or head[1] > last:
            continue
        seq = head[1]
        place = sum(counts[c].completed[rank] for c in groups[rank])
        floors = {other: _floor(counts, groups[other], comm, other, seq) for other in whole - {rank}}
        if any(f is None for f in floors.values()):
            continue  # (a member completed it: nothing bounds its place there from below)
        later = [other for other, f in floors.items() if f > place]
        if len(later) * 2 > len(members):
            early[rank] = seq
            places.update({rank: place, **{o: f for o, f in floors.items() if o not in early}})
    return early, places


def peer_issued_early(comm: str, seq: int, peer: int, other: str, rank: int, marks: dict[str, EnqueueMarks],
                      streams: Streams) -> bool:
    """Whether `peer`, waiting in `seq` of `comm` while `rank` waits for it in `other`, issued `seq` early by
    PyTorch's counts: the collective of `other` that `rank` waits in (its first unfinished there) is one `peer`
    launched and never completed, so `peer` issued `seq` before it, after fewer of its other groups' collectives
    than a strict majority of the members of `comm` issued before `seq`. Then `peer`'s record at `seq` says nothing
    of the program, whatever it agrees with: it departed (or left collectives of its other groups out before it,
    which reads the same), and `rank`, which ran the program's order, is held back by it, not departed.

    Worked example (1104866): world counts 2 of ranks 0, 1, 4 and 1 of rank 5; TP pair {4, 5} with 5 launched and
    none completed, pair {0, 1} with 10 launched and 5 completed. Rank 5 waits in its pair's first collective, which
    rank 4 launched: rank 4 issued world seq 2 before it, after none of its TP collectives, where ranks 0 and 1
    issued it after 5 (and rank 5 issued 5 without it). Rank 4 issued seq 2 early, though its record there is the
    call site ranks 0 and 1 record there."""
    counts = _counts(marks, streams)
    if comm not in counts or other not in counts or is_p2p_comm(comm) or is_p2p_comm(other):
        return False
    there = counts[other]
    if not (_counted(there, rank) and _counted(there, peer)):
        return False
    head = there.completed[rank] + 1
    # (`peer` launched the rank's head there and never completed it, and both record it alike: NCCL would have run
    # it, had `peer` reached it)
    if not (there.completed[peer] < head <= there.launched[peer]) or not _recorded_alike(streams, other, head,
                                                                                          {rank, peer}):
        return False
    members = set(counts[comm].launched) | set(streams.members.get(comm, ()))
    groups = {m: [c for c, g in counts.items() if c != comm and not is_p2p_comm(c) and m in _members(g, c, streams)]
              for m in members}
    whole = {m for m in members if all(_counted(counts[c], m) for c in [comm, *groups[m]])}
    # (other groups of other shapes run other programs: their counts do not compare)
    shapes = {m: tuple(sorted(len(_members(counts[c], c, streams)) for c in groups[m])) for m in whole}
    if peer not in whole or len(set(shapes.values())) != 1 or not shapes[peer]:
        return False
    # `peer` issued `seq` before `head` of `other`, so after at most all it launched in its other groups but that one
    place = head - 1 + sum(counts[c].launched[peer] for c in groups[peer] if c != other)
    floors = [_floor(counts, groups[m], comm, m, seq) for m in whole - {peer}]
    return sum(1 for f in floors if f is not None and f > place) * 2 > len(members)


def went_past_unissued(comm: str, rank: int, marks: dict[str, EnqueueMarks], streams: Streams) -> bool:
    """Whether `rank`, which completed all it launched in `comm` and waits in its one other group X, launched more
    of X, without the next seq of `comm`, than the ranks waiting in that seq had issued of a group Y of theirs
    before it: then it is not held back short of that seq (its host went past where they issued it), so launching
    fewer there is a departure (its own, or theirs: they issued it early).

    Y places the seq: every member of Y (all its places on record, none in a third group, X no larger) completed
    the same work of Y and launched the next, recorded alike, and waits in `comm` from the seq on. NCCL would have
    run that work of Y had no member's GPU held it behind an earlier collective: one of `comm`'s, the seq or one
    after it. So some member issued the seq right after the work of Y they completed, and a rank that launched
    more of X than that issued its own collectives of X past where the seq comes.

    Worked example (1224518): world counts 7, 8, 9 of ranks 0, 2, 3, all 7 completed; TP pair {2, 3} launched 20
    and completed 15, its 16th recorded alike by both; rank 0 launched 20 in its own pair and completed 15. Rank 2
    or 3 issued world seq 8 after its pair's 15th; rank 0 launched 20 there and no seq 8: it went past where they
    issued it, and waits in its pair for a peer, not short of seq 8 for it."""
    counts = _counts(marks, streams)
    here = counts.get(comm)
    if here is None or is_p2p_comm(comm) or not _counted(here, rank) or here.completed[rank] < here.launched[rank]:
        return False
    seq = here.launched[rank] + 1
    mine = [c for c, g in counts.items() if c != comm and not is_p2p_comm(c) and rank in _members(g, c, streams)]
    if len(mine) != 1 or not _counted(counts[mine[0]], rank):
        return False
    x = counts[mine[0]]
    size = max(len(_members(x, mine[0], streams)), x.places)
    for other, group in counts.items():
        members = _members(group, other, streams)
        if other in (comm, mine[0]) or is_p2p_comm(other) or rank in members or len(members) < max(group.places, size):
            continue
        if not all(_counted(group, m) and _counted(here, m) for m in members):
            continue
        done = {group.completed[m] for m in members}
        if len(done) != 1 or any(group.launched[m] <= min(done) for m in members):
            continue
        work = done.pop() + 1
        waiting = all(here.completed[m] == seq - 1 < here.launched[m] for m in members)
        alone = all(m not in _members(g, c, streams) for c, g in counts.items() if c not in (comm, other)
                    for m in members)
        if waiting and alone and _recorded_alike(streams, other, work, members) and x.launched[rank] >= work:
            return True
    return False


def with_early_by_counts(root: Root, marks: dict[str, EnqueueMarks], streams: Streams) -> tuple[Root, list[Note]]:
    """A root whose records begin after the ranks already disagree, re-read with the ranks that PyTorch's counts
    show issued a collective of its comm early, at or before the records' seq (early_by_counts): they ran an extra
    collective of their own there or before, and their records say nothing of the program. The rest's records at
    the records' seq name who else departed: a strict minority of them departed too (nothing orders the two
    departures); where they part with no majority, they part later, past where the early ranks issued theirs, and
    the root leaves them out (a note says so). Unchanged where no rank issued one early, or the root names them
    already."""
    if root.seq_range is None or root.seq_range[1] is None or not root.ops:
        return root, []
    early, places = early_by_counts(root.comm, root.seq_range[1], marks, streams)
    if not early or set(early) <= set(root.outlier_ranks):
        return root, []
    members = {*root.outlier_ranks, *root.reference_ranks, *places}
    sides = Counter(_record(root, rank) for rank in root.ops if rank not in early)
    rest = [rank for rank in root.ops if rank not in early]
    minority: list[int] = []
    later: list[int] = []
    if len(sides) > 1:
        record, n = sides.most_common(1)[0]
        if n * 2 > len(rest):
            minority = [rank for rank in rest if _record(root, rank) != record]
        elif all(places.get(rank, -1) > max(places[r] for r in early) for rank in rest):
            later = sorted(rest)  # (their seq sits past where the early ranks issued theirs: they part later)
        else:
            return root, []
    outliers = sorted({*early, *minority})
    low = min(root.seq_range[0], *early.values())
    found = replace(root, seq=low, seq_range=(low, max(root.seq_range[1], *early.values())), outlier_ranks=outliers,
                    reference_ranks=sorted(members - set(outliers)), majority=len(outliers) * 2 < len(members),
                    kind=EXTRA if not minority else root.kind, pinned_by=ENQUEUED_COUNTS,
                    kinds=(EXTRA, *(k for k in root.kinds if k != EXTRA and minority)),
                    undecided_comms=tuple(sorted({*root.undecided_comms, *_other_groups(early, marks, streams,
                                                                                        root.comm)})))
    note = IssuedEarlyByCounts(tuple(sorted(early)), root.comm, max(early.values()),
                               max(places[r] for r in early), tuple(sorted(r for r in places if r not in early)),
                               min(places[r] for r in places if r not in early), tuple(later))
    return found, [note]


def _heads(counts: dict[str, EnqueueMarks], streams: Streams) -> dict[int, tuple[str, int]]:
    """rank -> (group, seq) of the first collective it never completed, where PyTorch's counts say which: its one
    group with unfinished work, or the one left where every other is ruled out (module docstring)."""
    unfinished: dict[int, dict[str, int]] = {}
    for comm, group in counts.items():
        for rank in group.launched:
            if _counted(group, rank) and group.completed[rank] < group.launched[rank]:
                unfinished.setdefault(rank, {})[comm] = group.completed[rank] + 1
    known = {rank: next(iter(where.items())) for rank, where in unfinished.items() if len(where) == 1}
    heads = dict(known)
    for rank, where in unfinished.items():
        left = [(comm, seq) for comm, seq in where.items() if not _would_run(counts, streams, known, comm, seq, rank)]
        if rank not in known and len(left) == 1:
            heads[rank] = left[0]
    return heads


def _would_run(counts: dict[str, EnqueueMarks], streams: Streams, heads: dict[int, tuple[str, int]], comm: str,
               seq: int, rank: int) -> bool:
    """Whether NCCL would have run `seq` of `comm` had `rank` waited in it: every other member (all of them known)
    waits in it, and every member's record of it is alike."""
    members = _members(counts[comm], comm, streams)
    if rank not in members or not counts[comm].last_ops or any(heads.get(m) != (comm, seq) for m in members - {rank}):
        return False
    return _recorded_alike(streams, comm, seq, members)


def _recorded_alike(streams: Streams, comm: str, seq: int, ranks: set[int]) -> bool:
    """Whether each of `ranks` holds one record of `seq` of `comm`, all alike in op and count."""
    records = set()
    for rank in ranks:
        part = streams.parts.get((comm, rank))
        rows = part.filter(part.get_column("seq") == seq) if part is not None else None
        if rows is None or rows.height != 1:
            return False
        records.add(tuple(rows.get_column(name).item() if name in rows.columns else None for name in ("op", "count")))
    return len(records) == 1


def _floor(counts: dict[str, EnqueueMarks], groups: list[str], comm: str, rank: int, seq: int) -> int | None:
    """How many collectives of its other groups `rank` issued at least before `seq` of `comm`: all it launched
    there where it never launched it, all it completed where it never completed it (None where it completed it)."""
    here = counts[comm]
    if here.launched[rank] < seq:
        return sum(counts[c].launched[rank] for c in groups)
    if here.completed[rank] < seq:
        return sum(counts[c].completed[rank] for c in groups)
    return None


def _counts(marks: dict[str, EnqueueMarks], streams: Streams) -> dict[str, EnqueueMarks]:
    """comm -> PyTorch's counts of it, of groups that stopped (counts of a job still running move on)."""
    return {streams.aliases.get(name, name): group for name, group in marks.items() if group.stops}


def _counted(group: EnqueueMarks, rank: int) -> bool:
    """Whether the group's counts give all `rank` launched there and all it completed."""
    return rank in group.launched and group.completed.get(rank) is not None and rank not in group.floors


def _members(group: EnqueueMarks, comm: str, streams: Streams) -> set[int]:
    """The members of a group: those a desync report's snapshot gives (it lists every member), else those on
    record."""
    return set(group.last_ops) or set(group.launched) | set(streams.members.get(comm, ()))


def _other_groups(early: dict[int, int], marks: dict[str, EnqueueMarks], streams: Streams, comm: str) -> list[str]:
    """The early ranks' other groups: they may have left collectives of those out before the early one instead."""
    counts = _counts(marks, streams)
    return sorted(c for c, g in counts.items() if c != comm and not is_p2p_comm(c)
                  and any(r in _members(g, c, streams) for r in early))


def _record(root: Root, rank: int) -> tuple:
    """A rank's record at the seq the root's records part the ranks, as the fields compared."""
    op = root.ops[rank]
    return tuple(getattr(op, name) for name in _SIGNATURE)
