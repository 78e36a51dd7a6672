"""A communicator whose ranks' issue orders part them evenly: no majority says which side issued its collectives
where the program does, yet the orders still say where the sides part and which rank is on which side.

Where each rank's records order its collectives of every communicator (interleave.py), the first seq whose place
parts the ranks has one side issue it after fewer of their other communicators' collectives (early) and the other
after more. With a strict majority on one side, that side is the program (interleave.issue_order_split). With none,
either reading fits: the early side ran an extra block here (or left collectives out elsewhere before it, where
interleave reads that too), or the other side left as many out here (a rank that issued its next collective after
more of its other communicators' ones went on elsewhere past where the other side issues this one). Both readings
part the sides at the same seq, and both place the first departure among the collectives before it that each side
issued at the same place as the early side's (they look alike in place: any of them may be the first one added or
left out). The root names every rank, with the sides apart (`Root.issue_sides`), over that range.

Worked example (1173206): ranks 0 to 3 are a TP group; ranks 1 and 2 issue TP seq 8 after 4 world collectives,
rank 3 after 2, and rank 0's ring keeps TP seqs 10 on, each where rank 3 has it, with rank 3's count (14 against
12): two against two. Ranks 0 and 3 ran two TP collectives more among seqs 3..8 (all issued after 2 world ones),
or ranks 1 and 2 left two out there.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..model.kinds import is_p2p_comm
from .answers import EXTRA, MISSING, IssueSides, RangeReason, Root, ops_at
from .comm_streams import comm_streams
from .interleave import IssueOrderSplit, split_against
from .issue_orders import issue_places, program_places
from .narrowing import ISSUE_ORDER
from .streams import Streams


@dataclass(frozen=True)
class IssueOrderTie:
    """An even split of one communicator's ranks by their issue orders, read both ways."""

    split: IssueOrderSplit  # the early side's extra block, against the other side's program (majority false)
    early: list[int]  # the ranks that issued the split's seq early (with those their later places side so)
    later: list[int]  # the ranks that issued it after more of their other communicators' collectives
    either: list[int]  # ranks their records side with neither: cut short, begun late, or stopped before the split
    low: int  # the earliest seq either reading allows the first departure at
    # the later side's other communicators, where its places fit extra collectives it ran there before the split as
    # well as ones it left out here (empty where its later places here tell them apart)
    elsewhere: tuple[str, ...] = ()


def issue_order_tie(streams: Streams, comm: str, apart: frozenset[int] = frozenset()) -> IssueOrderTie | None:
    """The even split of `comm`'s ranks by where they issued its collectives among their other communicators'
    (see the module docstring), where no side is a strict majority (None where one is, where no seq parts the
    ranks in two places, or where either reading fails: a side whose own places part, or an early side whose
    later places fit no extra block here nor collectives left out elsewhere). Ranks `apart` departed in another
    communicator: they are placed on neither side."""
    found = issue_places(streams, comm)
    if found is None:
        return None
    places, launched = found
    places = {r: {} if r in apart else p for r, p in places.items()}
    seen: dict[int, int] = {}
    for seq in range(1, max(launched.values()) + 1):
        seen = {r: p[seq] for r, p in places.items() if seq in p and seq <= launched[r]}
        if len(set(seen.values())) > 1:
            break
    else:
        return None
    if len(set(seen.values())) != 2:
        return None  # (three places at one seq: more than one departure, which no one tie reads)
    first = min(seen.values())
    split = split_against(streams, comm, apart=apart, voters=frozenset(r for r, v in seen.items() if v > first))
    if split is None or split.majority or split.left_out_only:
        return None
    early = list(split.outliers)
    either = sorted({*split.unplaced, *split.blocked})
    later = [r for r in split.reference if r not in either]
    # The other reading: the later side left collectives out here, against the early side's program. The first it
    # left out comes after the last collective it issued where that program has it and has the next elsewhere.
    theirs = program_places(streams, comm, apart, frozenset(early))
    if theirs is None or not later:
        return None
    _, _, program = theirs
    low = split.low
    placed = [r for r in later if r in split.before]  # (those placed late side so by places past the split)
    for r in placed:
        aligned = [seq for seq, place in places[r].items() if seq < split.seq and program.get(seq) == place
                   and program.get(seq + 1, place) != place]
        low = min(low, max(aligned, default=0) + 1)
    # (or the later side ran as many more in its other communicators before the split, and left nothing out here:
    # where its later places here fit that too, those communicators stay candidates)
    elsewhere = tuple(sorted({c for r in later for c, members in streams.members.items()
                              if c != comm and r in members and not is_p2p_comm(c)})) \
        if all(_added_elsewhere(places[r], program, split.seq, launched[r]) for r in placed) else ()
    return IssueOrderTie(split=split, early=early, later=later, either=either, low=low, elsewhere=elsewhere)


def _added_elsewhere(places: dict[int, int], program: dict[int, int], split: int, launched: int) -> bool:
    """Whether a rank that issued `split` after more of its other communicators' collectives than `program` has
    there issued each later one here where as many more there and none left out here put it (its places then fit
    extra collectives it ran there as well as collectives it left out here)."""
    more = places[split] - program[split]
    return all(places[k] == program[k] + more for k in range(split + 1, launched + 1) if k in places and k in program)


def issue_order_tie_root(streams: Streams, comm: str, start: int = 1,
                         apart: frozenset[int] = frozenset()) -> Root | None:
    """The root an even split of the issue orders gives `comm` (issue_order_tie): every rank named, no majority,
    the sides apart in `issue_sides`, over the seqs either reading allows. None where they give no such split."""
    tie = issue_order_tie(streams, comm, apart)
    if tie is None:
        return None
    split = tie.split
    low, high = tie.low, split.seq
    # (every rank is named, both sides and those that side with either: which side departed is not known)
    ranks = sorted({*tie.early, *tie.later, *tie.either})
    rows = comm_streams(streams.comm_parts(comm))
    return Root(
        comm=comm, seq=low, seq_range=(low, high), outlier_ranks=ranks, reference_ranks=ranks, kind=EXTRA,
        size=split.size, pinned_by=ISSUE_ORDER,
        reason=RangeReason.BEFORE_RECORDS if low < split.placed_from
        else RangeReason.LOOKALIKE if low < high else None, ops=ops_at(rows, max(high, start)),
        majority=False, kinds=(EXTRA, MISSING), records_start=max(start, split.placed_from), shown=True,
        issue_places=dict(split.before), placed_late=dict(split.placed_late),
        undecided_comms=tuple(sorted({*split.left_out_in, *tie.elsewhere})), left_out_in=split.left_out_in,
        issue_sides=IssueSides(tuple(tie.early), tuple(tie.later), tie.elsewhere),
    )


def narrows_tie(found: Root, root: Root | None) -> bool:
    """Whether the issue orders' tie `found` may take the place of a communicator's own `root`: one that names no
    majority either, whose ranks it names all, with a seq range that holds `found`'s and more (the issue orders
    narrow the records' range, and say which rank is on which side; over the same range, the root the records
    place keeps what pinned it)."""
    if root is None or root.majority or root.seq_range is None or found.seq_range is None:
        return False
    if not {*root.outlier_ranks, *root.reference_ranks, *root.unplaced_ranks} <= set(found.outlier_ranks):
        return False
    (low, high), (lowest, highest) = found.seq_range, root.seq_range
    return low >= lowest and (highest is None or high <= highest) and (low, high) != (lowest, highest)
