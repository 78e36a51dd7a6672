"""A communicator's collectives placed in each rank's own issue order across its communicators.

A rank's collectives run in issue order on its GPU whatever their communicator, so one that never completes holds
back everything the rank enqueued after it, in every communicator. A rank that launched fewer collectives in one
communicator may therefore be blocked in another: its peer there enqueued its collectives behind one that waits
for it here. The launch counts of the one communicator cannot tell that rank from one that skipped a collective,
nor can they tell which rank launched one too many: ranks that got further in the program (their own group of the
other communicator completed) launch the next step's collective, which pairs with the outlier's extra one, so the
extra rank looks like the majority.

Where every rank's records give its collectives of all its communicators in one order (an NCCL log's lines, a
Flight Recorder dump's records), the k-th collective of the communicator sits, for each rank, after some number of
collectives of its other communicators. Ranks that run one program put it after as many (the other communicators
are the same program's, on other ranks: TP groups of the same shape). A rank that puts it after fewer launched an
extra one there; a rank whose records end with as many others as the program has before its next one stopped
there, held back elsewhere. The end of a rank's records hides how many extra ones it launched: where its later
collectives here each sit one of its other communicators' short, an extra block here and one left out there put them
alike, and both stay candidates; so too where its records hold no later collective here at all, and end where an
extra one would leave them. Where they go on elsewhere past where the program issues its next collective here,
without issuing it, the rank launched no extra one here (an extra one moves its later collectives here on, never
its others): it left collectives out there (left_out_before.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum

import polars as pl

from ..model.kinds import is_p2p_comm
from .answers import EXTRA, STOPPED, RangeReason, Root, ops_at
from .comm_streams import comm_streams
from .constraints import result_checks
from .edits import EditKind, Placement
from .issue_orders import issue_size, issued_before, program_places
from .narrowing import ISSUE_ORDER
from .streams import SIGNATURE, Streams


@dataclass(frozen=True)
class IssueOrderSplit:
    """What the ranks' issue orders say of one communicator."""

    comm: str
    seq: int  # the first seq whose place in the issue order parts the ranks
    low: int  # the earliest seq the extra collective can be (those before it sit at the same place, alike)
    outliers: list[int]  # ranks that launched it after fewer collectives of their other communicators
    reference: list[int]
    before: dict[int, int]  # rank -> collectives of its other communicators before that seq (the outliers', theirs)
    blocked: list[int]  # ranks with fewer launches here whose records stop where the program has more elsewhere
    # ranks whose records, cut short, do not reach the split, or begin past it and side with neither (placed_late)
    unplaced: list[int] = field(default_factory=list)
    # other communicators where the outliers may instead have left one out before the split (their places fit that
    # as well as an extra block here): empty where only an extra one here fits
    left_out_in: tuple[str, ...] = ()
    size: int = 1  # how many extra collectives the outliers' later places show (0: not known)
    # no extra block here fits the outliers' places (their records go on elsewhere past where the program issues
    # its next collective here): they left collectives out in `left_out_in`, and departed there alone
    left_out_only: bool = False
    left_out_sizes: dict[int, int] = field(default_factory=dict)  # outlier -> how many it left out, where it may have
    # the first seq from which the outliers' places are on record, where `low` reaches back before it (their records
    # of the collectives before it are lost: a ring that dropped its oldest entries); else 1
    placed_from: int = 1
    # ranks whose places begin past `seq` (rank -> the first seq placed), sided by their count and later places
    # (_placed_late), or unplaced where those fit both sides or neither
    placed_late: dict[int, int] = field(default_factory=dict)
    # False where the reference is no strict majority (split_against: an even split, read one way of two)
    majority: bool = True


def issue_order_split(streams: Streams, comm: str, skipped: frozenset[int] = frozenset(),
                      apart: frozenset[int] = frozenset()) -> IssueOrderSplit | None:
    """The ranks of `comm` parted by where they issued its collectives among their other communicators' (see the
    module docstring), where that names a minority that launched one early while every rank with fewer here
    stopped where the program goes on elsewhere, or is one of `skipped` (ranks whose issue orders show that they
    left out a collective here, `skipped_here`: they departed too, and are neither blocked nor of the reference).
    Ranks `apart` departed in another communicator, which moves their places here as a departure here would: they
    are left unplaced, on neither side, and the rest must still be a strict majority without them. None where the
    records do not order each rank's collectives, the ranks are in other communicators of different shapes, or no
    strict majority places every seq."""
    return split_against(streams, comm, skipped, apart)


def split_against(streams: Streams, comm: str, skipped: frozenset[int] = frozenset(),
                  apart: frozenset[int] = frozenset(), voters: frozenset[int] | None = None) -> IssueOrderSplit | None:
    """issue_order_split, with the program's places taken from `voters` alone where given (one side of an even
    split, issue_order_ties.py): the split it gives then has `majority` false where neither side is a strict
    majority, and is None where the other side is one (the program is theirs)."""
    found = program_places(streams, comm, apart, voters)
    if found is None:
        return None
    places, launched, program = found
    ranks = [r for r in streams.members.get(comm, []) if r in places]
    split = next((seq for seq in sorted(program)
                  if any(seq in p and seq <= launched[r] and p[seq] != program[seq] for r, p in places.items())), None)
    if split is None:
        return None
    outliers = sorted(r for r, p in places.items()
                      if split in p and split <= launched[r] and p[split] != program[split])
    if any(places[r][split] > program[split] for r in outliers):
        return None  # launched later than the program: a skipped collective, which the counts already show
    # An extra collective here moves the outlier's later ones on by one seq; collectives left out in another
    # communicator leave each of its later ones as many of that communicator's short. Where both fit (the records
    # end before an extra block would show its size, or hold no later collective here at all), the issue orders
    # cannot tell them apart.
    shifted = all(_shifted_by_one(places[r], program, split, launched[r]) for r in outliers)
    unchecked = all(not _later_on_record(places[r], program, split, launched[r]) for r in outliers)
    left_out_in = _left_out_in(streams, comm, outliers, places, program, split, launched) \
        if not shifted or unchecked else ()
    blocks = {_block_size(places[r], program, split, launched[r]) for r in outliers} if not shifted else {1}
    sized = None not in blocks and len(blocks) == 1
    if not left_out_in and not sized:
        return None  # neither an extra block here nor one left out elsewhere puts them so
    # An extra block whose size the records do not show still leaves the outlier no further on elsewhere than the
    # program goes before this seq (its next collective here, once the block is done): one that went on past it
    # issued no extra one here, and left collectives out there.
    left_out_only = not sized and not all(_ends_before(places[r], program, split, launched[r]) for r in outliers)
    peers = [set(m) - {r} for r in outliers for c, m in streams.members.items()
             if c != comm and r in m and not set(ranks) <= set(m)]
    if peers and all(peer & set(outliers) for peer in peers):
        # Outliers that each sit where a peer of their other communicator does ran that communicator's program,
        # which other groups of its shape need not share (a data-parallel replica's own drafter pass).
        return None
    # Every rank that launched fewer must have stopped no further on elsewhere than the program allows before its
    # next collective here: one that went on past it skipped that collective.
    cut = {r for (c, r) in streams.cut if r in places and (c, r) in streams.parts} | (apart & set(places))
    unplaced = sorted(r for r in cut if split not in places[r] or launched[r] < split)
    agree = [r for r, p in places.items() if split in p and split <= launched[r] and p[split] == program[split]]
    # Ranks whose places begin past the split (a ring that dropped its oldest entries) side by their count and the
    # places they kept, never with the reference by default: one that neither side fits alone is unplaced.
    late = {r: _placed_late(r, places, launched, outliers, agree) for r in ranks
            if r not in cut and r not in skipped and split not in places[r] and launched[r] >= split}
    unplaced = sorted({*unplaced, *(r for r, side in late.items() if side is None)})
    agree = [*agree, *(r for r, side in late.items() if side is _Side.REFERENCE)]
    early = sorted(r for r, side in late.items() if side is _Side.OUTLIERS)
    # A rank whose file was cut before its records here may be of this communicator and side with either: it counts
    # against a strict majority, as unplaced (by rank where the config names it). A rank that left no file at all
    # is not counted: its records tell nothing of where it was cut.
    short = {r for (_, r) in streams.cut} - set(places) - set(skipped)
    absent = sorted(short & set(streams.expected_members.get(comm, [])))
    unnamed = min(len(short) - len(absent),
                  max(0, issue_size(streams, comm) - len(set(places) | set(absent) | set(skipped))))
    unplaced = sorted({*unplaced, *absent})
    total = len(agree) + len(outliers) + len(early) + len(unplaced) + len(set(skipped) & set(ranks)) + unnamed
    majority = len(agree) * 2 > total
    if not majority and (voters is None or (len(outliers) + len(early)) * 2 > total):
        return None  # the ones left unplaced may have issued it where the outliers did: no majority then
    blocked = sorted(r for r in ranks if launched[r] < split and r not in unplaced and r not in skipped)
    for r in blocked:
        end = launched[r] + 1
        if end not in program or end not in places[r] or places[r][end] > program[end]:
            return None
    def back_over_alike(r: int) -> int:
        # the world collectives the rank issued in a row before `split` look alike: the extra one may be any; so
        # may one whose place is on no record (a ring that dropped its oldest entries, or other communicators'
        # records that begin later): it shifted the rest alike, wherever the rank issued it
        low = split
        while low - 1 >= 1 and places[r].get(low - 1, places[r][split]) == places[r][split]:
            low -= 1
        return low

    low = min(back_over_alike(r) for r in outliers)
    # (the first seq from which every outlier's places are on record, where the range reaches back before it)
    placed_from = max(min(places[r]) for r in outliers)
    return IssueOrderSplit(comm=comm, seq=split, low=low, outliers=sorted({*outliers, *early}),
                           reference=sorted(r for r in ranks if r not in outliers and r not in early
                                            and r not in unplaced and r not in skipped),
                           before={r: p[split] for r, p in places.items() if split in p and split <= launched[r]},
                           blocked=blocked, unplaced=unplaced, left_out_in=left_out_in,
                           size=blocks.pop() if sized else 0, left_out_only=left_out_only,
                           placed_from=placed_from if low < placed_from else 1,
                           placed_late={r: min(places[r]) for r in late}, majority=majority,
                           left_out_sizes={r: n for r in outliers if left_out_in
                                           and (n := _left_out_size(places[r], program, split, launched[r]))})


def _shifted_by_one(places: dict[int, int], program: dict[int, int], split: int, launched: int) -> bool:
    """Whether a rank's collectives here after `split` sit where an extra one of its own would put them: its seq k
    where the program issues seq k - 1 (the extra one, at `split` or before it, wherever the rank issued it, moved
    the rest one seq on). A rank that instead left out a collective of its other communicator issues each one here
    after one collective fewer of those than the program, at every seq: with a tensor-parallel step of three
    collectives after one data-parallel one, it puts seq 2 after none where an extra seq 1 would put it after one
    (the program's seq 1). Such a rank's places fit one left out there (_left_out_in), or an extra block here of as
    many as the program has between two of that communicator's (_block_size): the issue orders then cannot tell."""
    return all(places[k] == program[k - 1] for k in range(split + 1, launched + 1)
               if k in places and k - 1 in program) and _ends_before(places, program, launched, launched)


def _later_on_record(places: dict[int, int], program: dict[int, int], split: int, launched: int) -> bool:
    """Whether a rank placed some collective here after `split` where the program places one: an extra one's
    shift shows there (with none, its records end too soon to tell an extra one here from ones left out
    elsewhere)."""
    return any(k in places and k - 1 in program for k in range(split + 1, launched + 1))


def _ends_before(places: dict[int, int], program: dict[int, int], seq: int, launched: int) -> bool:
    """Whether a rank's records end no further on in its other communicators than the program goes before `seq`
    here (its next collective here had it launched extra ones: it launched none of the program's past it). One
    whose records go on past that issued no extra collective here: an extra one moves its later ones on, never
    its others. Worked example: world collectives after 0 and 4 TP collectives, a rank that issued its second after
    3 and then 4 more TP collectives but no world one: an extra second world collective would have it issue the
    program's second after 4, which it went on past; it left a TP collective out. True where its end is not on
    record (a file cut short) or the program places no `seq`."""
    end = places.get(launched + 1)
    return end is None or seq not in program or end <= program[seq]


def _block_size(places: dict[int, int], program: dict[int, int], split: int, launched: int) -> int | None:
    """The size of an extra block of two or more collectives of a rank's own here, where its collectives sit where
    that block would put them, on record: its seq k where the program issues seq k - m, for each of its seqs past
    the block (at least one; a block that runs past the end of its records fits any places, and shows nothing).
    None where no size fits so."""
    for m in range(2, launched - split + 1):
        checked = [k for k in range(split + m, launched + 1) if k in places and k - m in program]
        if checked and all(places[k] == program[k - m] for k in checked) \
                and _ends_before(places, program, launched + 1 - m, launched):
            return m
    return None


def _left_out_in(streams: Streams, comm: str, outliers: list[int], places: dict[int, dict[int, int]],
                 program: dict[int, int], split: int, launched: dict[int, int]) -> tuple[str, ...]:
    """The other communicators where the outliers may have left out collectives before `split` instead of
    launching an extra one here: each outlier issued every collective here from `split` on after as many
    collectives fewer of its other communicators than the program, one or more (as a block left out there, and none
    added here, puts them), and launched fewer in such a communicator than a peer there (or some member's records of
    it were cut short), or issued fewer of its collectives before `split` here than a peer of both issued before
    its own (a rank that went on past the block it left out makes up its count there, not its place). Empty where
    some outlier fits no such reading."""
    found: set[str] = set()
    for r in outliers:
        seqs = [k for k in places[r] if split <= k <= launched[r] and k in program]
        if not seqs or _left_out_size(places[r], program, split, launched[r]) is None:
            return ()
        counts = {c: {m: int(part.get_column("seq").max()) for (cc, m), part in streams.parts.items()
                      if cc == c and part.height}
                  for c, members in streams.members.items() if c != comm and r in members and not is_p2p_comm(c)}
        short = {c for c, n in counts.items() if r in n and (any(v > n[r] for v in n.values())
                                                             or any((c, m) in streams.cut for m in n))}
        mine = issued_before(streams, r, comm, split)
        for c in set(counts) - short if mine is not None else ():
            peers = [p for p in streams.members.get(c, []) if p not in outliers and p in streams.members.get(comm, [])]
            theirs = [issued_before(streams, p, comm, split) for p in peers]
            if any(t is not None and t.get(c, 0) > mine.get(c, 0) for t in theirs):
                short.add(c)
        if not short:
            return ()
        found |= short
    return tuple(sorted(found))


def _left_out_size(places: dict[int, int], program: dict[int, int], split: int, launched: int) -> int | None:
    """How many collectives of its other communicators a rank left out before `split` here, where each of its
    collectives here from `split` on sits that many short of the program's place (None where no one count fits)."""
    gaps = {program[k] - places[k] for k in places if split <= k <= launched and k in program}
    return gaps.pop() if len(gaps) == 1 and min(gaps) >= 1 else None


class _Side(str, Enum):
    """The side of a communicator's split a rank's records put it on."""

    OUTLIERS = "outliers"
    REFERENCE = "reference"


def _placed_late(rank: int, places: dict[int, dict[int, int]], launched: dict[int, int], outliers: list[int],
                 reference: list[int]) -> _Side | None:
    """The side of a rank whose places begin past the split (a ring that dropped its oldest entries keeps none of
    where it issued the split's seq): the side a rank of which launched as many here as it did and placed each
    collective both have on record, its end too, where it did, while no rank of the other side does. Where both
    sides fit it, or neither, its records do not side it (None): its count alone may be where the rank stopped,
    and the collectives here it kept may sit alike on both sides. Worked example: ranks 1 and 2 launch 12 TP
    collectives and rank 3, which issued TP seq 8 two world collectives early, launches 14; rank 0's ring keeps TP
    seqs 10 to 14, each after 4 world collectives, as rank 3's do and ranks 1 and 2's do where they have them. Its
    14 launches put it where rank 3 stopped, an extra block on from where ranks 1 and 2 stopped: an outlier too."""
    mine = places[rank]

    def fits(side: list[int]) -> bool:
        return any(launched[o] == launched[rank] and all(places[o][k] == v for k, v in mine.items() if k in places[o])
                   for o in side)

    early, alike = fits(outliers), fits(reference)
    if early == alike:
        return None
    return _Side.OUTLIERS if early else _Side.REFERENCE


def issue_order_root(streams: Streams, comm: str, start: int = 1, apart: frozenset[int] = frozenset()) -> Root | None:
    """The root the issue orders give `comm` (see issue_order_split; `apart`: ranks that departed in another
    communicator, placed on neither side): an extra collective of the outliers, at the seq where they issued one
    earlier than the program, or at a seq before it where they issued the same collectives in a row (alike: any
    of them may be the extra one)."""
    split = issue_order_split(streams, comm, apart=apart)
    if split is None or split.left_out_only:
        return None  # (the outliers departed elsewhere alone: left_out_before.py)
    rows = comm_streams(streams.comm_parts(comm))
    # A rank of the reference whose records part from the others' by the split departed too (it ran another
    # collective there, in its place): the root names it beside those the issue orders name. Where the reference's
    # records part with no majority (of two ranks there, one ran another collective), which of them departed is
    # not known: the issue orders then name no root of their own.
    departed, undecided = _parted_by_signatures(rows, split.reference, split.seq)
    if undecided:
        return None
    outliers = sorted(set(split.outliers) | departed)
    # Results read back over the collectives alike in place: a right one lies before the extra collective, a wrong
    # one at or after it, as for any extra collective (results that fit no seq of the range narrow nothing).
    low, high, narrowed_by = split.low, split.seq, ()
    checks = result_checks(rows, start)
    placed = checks.narrow(Placement(outliers[0], EditKind.EXTRA, max(split.size, 1), low, high)) if checks else None
    if placed is not None and (placed.low, placed.high) != (low, high):
        low, high, narrowed_by = placed.low, placed.high, (checks.label,)
    return Root(
        comm=comm, seq=low, seq_range=(low, high), outlier_ranks=outliers,
        reference_ranks=[r for r in split.reference if r not in departed], kind=EXTRA, size=split.size,
        pinned_by=ISSUE_ORDER, narrowed_by=narrowed_by,
        reason=RangeReason.BEFORE_RECORDS if low < split.placed_from
        else RangeReason.LOOKALIKE if low < high else None, ops=ops_at(rows, max(high, start)),
        majority=True, kinds=(EXTRA,), records_start=max(start, split.placed_from), shown=True,
        issue_places=dict(split.before),
        blocked_elsewhere=tuple(split.blocked), unplaced_ranks=list(split.unplaced),
        placed_late=dict(split.placed_late),
        undecided_comms=split.left_out_in, left_out_in=split.left_out_in,
    )


def with_early_issuers(root: Root, streams: Streams, left_out: dict[int, tuple[int, int]]) -> Root:
    """A root of ranks whose issue orders show that they left out a collective here (`left_out`, `skipped_here`),
    with the ranks whose issue orders show one issued early added (issue_order_split, where only an extra one
    here fits their places): they departed too, and nothing orders the two departures, so the root names both
    and its range reaches from the earliest seq where either may have departed to the last where one named
    did."""
    split = issue_order_split(streams, root.comm, frozenset(left_out))
    # (places that fit an extra block of unknown size here as well as collectives left out elsewhere say nothing
    # of this communicator; one of known size they fit alike leaves those communicators candidates)
    if split is None or split.left_out_in and not split.size or split.left_out_only or root.seq_range is None \
            or root.seq_range[1] is None:
        return root
    early = sorted(set(split.outliers) - set(root.outlier_ranks))
    if not early or not root.majority:
        return root
    outliers = sorted({*root.outlier_ranks, *early})
    low, high = min(root.seq_range[0], split.low), max(root.seq_range[1], split.seq)
    reference = [r for r in root.reference_ranks if r not in early]
    if not _majorities_apart(root, split, early, streams):
        # (no side stands for the program: every rank is named, and which side departed is not known)
        ranks = sorted({*root.outlier_ranks, *root.reference_ranks, *split.outliers, *split.reference})
        outliers, reference = ranks, ranks
    return replace(root, seq=low, seq_range=(low, high), outlier_ranks=outliers, reference_ranks=reference,
                   majority=len(outliers) * 2 < len(outliers) + len(reference),
                   kinds=(*root.kinds, *((EXTRA,) if EXTRA not in root.kinds else ())),
                   reason=root.reason or (RangeReason.LOOKALIKE if low < high else None),
                   issue_places={**root.issue_places, **split.before},
                   placed_late={**root.placed_late, **split.placed_late},
                   undecided_comms=tuple(sorted({*root.undecided_comms, *split.left_out_in})))


def held_by_early_issuers(streams: Streams, comm: str, left_out: dict[int, tuple[int, int]],
                          behind: set[int]) -> dict[int, frozenset[int]]:
    """Of the ranks `behind` here (they launched fewer in a communicator that stopped) and not `left_out`, those
    the issue orders show held back by a rank that issued a collective here early (issue_order_split, with the
    ranks `left_out` apart, where with_early_issuers adds such ranks): the rank ran the program here up to where
    it waits for its next collective (`blocked`), and waits in another communicator on a collective that an early
    issuer, its peer there, enqueued behind its early one, which the rank itself, never launching it, keeps from
    completing. A rank runs its collectives in issue order, so that peer's collective there never runs, and the
    rank launches no further: held back, not departed. Worked example (1221596): rank 0 issues world seq 2 after
    five of its tensor-parallel collectives, where the program has eight; its TP peer, rank 1, completes TP seq 5
    and waits in seq 6, which rank 0 enqueued after world seq 2, and never launches world seq 2 itself. Rank 1
    stopped where rank 0 holds it; named beside rank 0 and a rank that left world seq 2 out, it would be named for
    rank 0's departure. Returns rank -> the early issuers that hold it back."""
    split = issue_order_split(streams, comm, frozenset(left_out))
    if split is None or split.left_out_in and not split.size or split.left_out_only:
        return {}
    early = [r for r in split.outliers if r not in left_out]
    held: dict[int, frozenset[int]] = {}
    for rank in sorted(set(split.blocked) & behind - set(left_out)):
        for other, members in streams.members.items():
            part = streams.parts.get((other, rank))
            if other == comm or is_p2p_comm(other) or part is None or not part.height:
                continue
            for peer in (p for p in early if p in members):
                before = issued_before(streams, peer, comm, split.seq)
                if before is None:
                    continue
                # (what the rank launched there past what the peer issued before its early one, not seen completed)
                waits = part.filter((pl.col("seq") > before.get(other, 0))
                                    & (pl.col("state").is_null() | (pl.col("state") != "completed")))
                if waits.height:
                    held[rank] = held.get(rank, frozenset()) | {peer}
    return held


def _majorities_apart(root: Root, split: IssueOrderSplit, early: list[int], streams: Streams) -> bool:
    """Whether each of two departures, the records' (`root`) and the issue orders' (`split`, its outliers `early`
    not among the root's), keeps a strict majority against it without the other's outliers: each majority counts
    as the program's ranks the other one names departed, so it stands only where it still does without them.
    Where the records part there by what they hold, the records' voters are the ranks of its reference with a
    record at its last seq (one whose records end before it sides with either). Worked example (1188455): ranks 0
    and 3 record world seq 2 at another call site than rank 2, and rank 1's records end at seq 1; rank 0 issued
    seq 2 after one tensor-parallel collective, ranks 2 and 3 after three. Without rank 0, rank 3 alone sides
    against rank 2: ranks 0 and 3 may each have run one more world collective, or ranks 0 and 2 departed, and
    nothing says which."""
    rows = comm_streams(streams.comm_parts(root.comm))
    recorded = {row["rank"] for row in rows.rows_at(root.seq_range[1])}
    voters = [r for r in root.reference_ranks if r not in early]
    if root.shown and set(root.reference_ranks) & recorded:
        voters = [r for r in voters if r in recorded]
    theirs = [r for r in split.reference if r not in root.outlier_ranks and r not in split.unplaced]
    return len(voters) > len(root.outlier_ranks) and len(theirs) > len(early)


def with_stops_past_the_program(root: Root, streams: Streams) -> Root:
    """A root with the ranks of its reference added whose issue orders show they stopped where the program does
    not: such a rank issued its last collective here where the program does, and issued nothing after it anywhere,
    while a strict majority of the reference issued the same seq there and went on elsewhere, though that
    collective never completed (a member whose whole records end before it never launched it). The program then
    does not wait on it, so a rank that stopped right after it ran another collective there, one it waits on (an
    extra one, alike in everything recorded), or departed before it among collectives alike in place. Worked
    example: rank 1 issues world seq 2 after two tensor-parallel collectives, as ranks 0 and 2 do, and then
    nothing; ranks 0 and 2 go on to two more tensor-parallel ones, and rank 5 never launched world seq 2: rank 1's
    seq 2 is an extra collective of its own, and the root names it beside the others."""
    if root.seq_range is None or root.seq_range[1] is None or not root.majority:
        return root
    found = program_places(streams, root.comm)
    if found is None:
        return root
    low, high = root.seq_range
    stopped = _stopped_past(root.reference_ranks, low, high, streams, found)
    if not stopped:
        return root
    outliers = sorted({*root.outlier_ranks, *stopped})
    rest = [r for r in root.reference_ranks if r not in stopped]
    if len(outliers) * 2 >= len(outliers) + len(rest):
        return root  # (no majority left to stand for the program)
    low = min(low, *stopped.values())
    return replace(root, seq=low, seq_range=(low, high), outlier_ranks=outliers, reference_ranks=rest,
                   stopped_past=tuple(sorted({*root.stopped_past, *stopped})),
                   kinds=(*root.kinds, *((EXTRA,) if EXTRA not in root.kinds else ())),
                   reason=root.reason or (RangeReason.LOOKALIKE if low < high else None))


def _stopped_past(reference: list[int], low: int, high: int, streams: Streams,
                  found: tuple[dict[int, dict[int, int]], dict[int, int], dict[int, int]]) -> dict[int, int]:
    """The ranks of `reference` whose whole records end with a seq in `low..high` issued where the program does,
    then nothing anywhere, while a strict majority of those that issued it there went on past it though some member
    whose whole records end before it never launched it (with_stops_past_the_program): rank -> the first seq its
    extra collective may be (those it issued in a row before it sit alike)."""
    places, launched, program = found
    cut = {r for (_, r) in streams.cut}
    whole = [r for r in places if r not in cut]
    reference = [r for r in reference if r in whole]
    stopped: dict[int, int] = {}
    for r in reference:
        seq = launched[r]
        if not low <= seq <= high or places[r].get(seq) != program.get(seq) or places[r].get(seq + 1) != places[r][seq]:
            continue  # (its last one here sits elsewhere, or it issued more after it)
        if not any(launched[m] < seq for m in whole):
            continue  # (every member launched it: it may have completed, and the program may wait on it)
        alike = [o for o in reference if o != r and launched[o] >= seq and places[o].get(seq) == program[seq]]
        went_on = [o for o in alike if launched[o] > seq or places[o].get(seq + 1, 0) > places[o][seq]]
        if len(went_on) * 2 <= len(alike) + 1:
            continue
        start = seq
        while start - 1 >= 1 and places[r].get(start - 1) == places[r][seq]:
            start -= 1  # (collectives it issued in a row before it look alike: the extra one may be any)
        stopped[r] = start
    return stopped


def stops_past_the_ranks_behind(root: Root, streams: Streams) -> Root:
    """A stop of no majority whose ranks behind are held back elsewhere, read past them: each rank behind issued
    its last collective here where the program does, and its whole records end, in its other communicators, no
    further on than the program goes before its next one here (it waits there on what it issued, not short of one
    here), so its stop is no departure here. A rank of the reference that stopped right after a collective the
    program does not wait on (with_stops_past_the_program) departed instead: the root names it, an extra collective
    of its own, with the ranks behind as held back elsewhere. Worked example: world seq 3 comes after four
    tensor-parallel collectives; rank 2 issued four of its group's and then nothing, never launching seq 3; ranks
    4 to 7 launched seq 3 there, and ranks 4, 5 and 6 went on to two more of their group's, though seq 3 never
    completed; rank 7 issued nothing more: its seq 3 was an extra collective, one it waits on. Unchanged where a
    rank behind went on elsewhere, its records were cut, or no rank of the reference stopped so."""
    if root.kind != STOPPED or root.shown or root.majority or root.seq_range is None or root.seq_range[1] is None:
        return root
    found = program_places(streams, root.comm)
    if found is None:
        return root
    places, launched, program = found
    cut = {r for (_, r) in streams.cut}
    for r in root.outlier_ranks:
        end = launched.get(r, 0) + 1
        if r in cut or r not in places or end not in program or places[r].get(launched[r]) != program.get(
                launched[r]) or end not in places[r] or places[r][end] > program[end]:
            return root  # (it went on elsewhere past the program's next one here, or its records say nothing)
    stopped = _stopped_past(root.reference_ranks, *root.seq_range, streams, found)
    rest = [r for r in root.reference_ranks if r not in stopped]
    if not stopped or len(stopped) * 2 >= len(stopped) + len(rest):
        return root  # (no rank of the reference stopped so, or too many to leave the program a majority)
    low, high = min(stopped.values()), max(launched[r] for r in stopped)
    unplaced = sorted({*root.unplaced_ranks, *root.outlier_ranks})
    return replace(root, seq=low, seq_range=(low, high), outlier_ranks=sorted(stopped), reference_ranks=rest,
                   unplaced_ranks=unplaced, blocked_elsewhere=tuple(root.outlier_ranks),
                   stopped_past=tuple(sorted(stopped)), kind=EXTRA, kinds=(EXTRA,), size=1, shown=True,
                   pinned_by=ISSUE_ORDER, majority=len(rest) * 2 > len(rest) + len(stopped) + len(unplaced),
                   reason=RangeReason.LOOKALIKE if low < high else None)


def beside_early_issuers(root: Root, streams: Streams) -> Root:
    """A root its records show, with the ranks of its reference whose issue orders show a collective issued early
    added (issue_order_split), where that may come at or before the root's last seq: they departed too, and nothing
    orders the two departures (with_early_issuers). Worked example: a step is two world all-reduces and two
    tensor-parallel ones; rank 0's log shows it left out a world one at seq 4..5. Rank 3's world records read as a
    prefix of the others', yet it issued world seq 5 after two tensor-parallel collectives, where ranks 0 and 1
    issue it after four: it ran one more world collective at seq 3..5 (its seqs 3 to 5 sit alike). Rank 0's
    departure rests on rank 3's record of seq 5 beside rank 1's: without it, rank 1 alone stands against rank 0,
    so no side is the program and every rank is named (_majorities_apart)."""
    if root.seq_range is None or root.seq_range[1] is None:
        return root
    split = issue_order_split(streams, root.comm)
    if split is None or split.low > root.seq_range[1]:
        return root  # (one that issued early after the root's last seq departed later)
    return with_early_issuers(root, streams, {})


def _parted_by_signatures(rows, ranks: list[int], last: int) -> tuple[set[int], bool]:
    """The ranks among `ranks` with a signature field at some seq up to `last` that differs from the value a strict
    majority of the ranks recording that field there have (a field a rank did not record constrains nothing: a
    Flight Recorder dump carries no reduction or root); and whether at some seq up to `last` their values of a field
    differ with no strict majority (who departed there is not known)."""
    frame = rows.frame(None, last, ["rank", "seq", *SIGNATURE]).filter(pl.col("rank").is_in(ranks))
    parted: set[int] = set()
    undecided = False
    for name in SIGNATURE:
        values = frame.select("rank", "seq", pl.col(name).cast(pl.Utf8).alias("value")).drop_nulls("value")
        if values.height == 0:
            continue
        counts = values.group_by("seq", "value").agg(pl.len().alias("n"))
        totals = counts.group_by("seq").agg(pl.col("n").sum().alias("total"), pl.len().alias("values"))
        marked = counts.join(totals, on="seq")
        major = marked.filter(pl.col("n") * 2 > pl.col("total")).select("seq", pl.col("value").alias("major"))
        differing = set(marked.filter(pl.col("values") > 1).get_column("seq").to_list())
        undecided |= bool(differing - set(major.get_column("seq").to_list()))
        apart = values.join(major, on="seq").filter(pl.col("value") != pl.col("major"))
        parted |= set(apart.get_column("rank").to_list())
    return parted, undecided
