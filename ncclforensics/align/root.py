"""The root of one communicator: every explanation the records allow, narrowed by every piece of evidence.

The model. The ranks of a communicator run one program. An outlier rank's stream is that program with an edit
in it: collectives of its own inserted (`extra`), program collectives left out (`missing`), or a block of
different ones in their place (`different`). Every rank's records stop somewhere (a wedge, a kill, a dump taken
while it ran), and a Flight Recorder ring may have lost their beginning: both ends of a stream are cuts, never
evidence that nothing came before or after.

A `Placement` is a set of explanations: one edit kind and size on one outlier, starting anywhere in a range of
seqs. The records propose placements: an edit is possible where the outlier's stream, shifted by the edit,
pairs with the reference stream position by position over everything both have on record. Two positions may
pair when every field both sides recorded is equal (op, count, dtype, reduction, root, call stack, tag, step);
a field one side did not record constrains nothing. Other evidence then narrows the placements as
`Constraint`s: results checked against their expected value (a wrong one is misaligned, a right one aligned),
and the step at which the drafter gates disagreed. A constraint that would leave nothing is a contradiction:
it is reported with both sides' evidence and the answer keeps what the records alone allow.

Worked example (long-window, signatures alone): rank 1 has 91 AllReduces of 1024 floats, ranks 0, 2, 3 have 90
of the same. An insertion of one collective anywhere in seq 1..91 explains that, so the answer is 1..91. The
fingerprint tags say rank 1's seq 8 is `draft` where the others' is `layer1`, and rank 1's seq 9..91 pair with
the others' 8..90 tag for tag: only an insertion at seq 8 survives, and the root is pinned there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Protocol

import numpy as np

from ..model import Location
from .edits import MAX_EDIT, Codes, EditKind, Placement, agree, blocks_through, compatible, merged, place_edits
from .parting import first_parting, first_parting_majority, loose_joined, reference_among_alike

__all__ = [
    "MAX_EDIT",
    "Codes",
    "Contradiction",
    "EditKind",
    "GateStep",
    "Placement",
    "ResultChecks",
    "Solution",
    "edits_before_stop",
    "place_edits",
    "propose",
    "solve",
]

@dataclass(frozen=True)
class Contradiction:
    """Two pieces of evidence that allow nothing in common: a constraint (`constraint`, its label) that allows no
    root the records allow (in `seq_range`), and the evidence of both."""

    constraint: str
    seq_range: tuple[int, int | None]
    locs: tuple[Location, ...]


@dataclass
class Solution:
    """What the evidence allows about one communicator's root."""

    placements: list[Placement]
    outliers: list[int]
    reference: list[int]
    majority: bool
    pinned_by: str
    narrowed_by: list[str] = field(default_factory=list)
    contradictions: list[Contradiction] = field(default_factory=list)
    departs_again: bool = False  # no single edit explains the whole stream: the outlier departs more than once
    prefer: EditKind | None = None  # the kind the gate journal implies (a rank that passed ran extra collectives)
    either_side: bool = False  # a two-way split placed both ways: one side's edits or the other's
    shown: bool = True  # some record differs between the outliers and the reference (not lengths alone)
    told: bool = False  # placed only because the gate journal names the outliers
    compared: list[str] = field(default_factory=list)  # the stages whose fields the answer rests on, in order
    members: dict[int, list[int]] = field(default_factory=dict)  # a placement's rank -> the ranks it stands for
    unplaced: list[int] = field(default_factory=list)  # ranks whose incomplete records end before the sides part
    # (field, seq, seq): a richer field that parts the same ranks at the first seq, where the poorer fields part them
    # only at the second (see _parts_earlier); the range runs from one to the other
    parted_earlier: tuple[str, int, int] | None = None
    # (field, rank, seq): a richer field that parts the outliers from this one rank of the reference alone, the only
    # one that recorded it, at that seq, where no one edit explains them against it: it is named beside them, since it
    # may have departed itself (see _lone_recorder_tie)
    lone_field: tuple[str, int, int] | None = None
    # the records differ in length only; results read back wrong show the group misaligned, which an edit of either
    # side at the same seq gives alike (a rank behind that left one out, or a rank ahead that ran one more)
    by_results: bool = False

    @property
    def leading(self) -> list[int]:
        """The outliers whose first edit may be the first divergent collective. Several outliers may depart
        differently: those whose every explanation starts after every seq where the others' first edits can be
        departed later, and are no outliers of the root. Where the two overlap, which departed first is not
        known, and every outlier stays named (as it does where no majority says who departed)."""
        return self._leading()[0]

    @property
    def named_range(self) -> tuple[int, int]:
        """`seq_range`, reaching on as far as each named outlier's likeliest departures do: one named beside the
        first because it may have departed at the first seq named may as well have departed after it (an extra
        collective among lookalikes there, or one left out past them), and the range says where every rank it
        names departed."""
        low, high = self.seq_range
        return low, max(high, self._leading()[1])

    def _leading(self) -> tuple[list[int], int]:
        """The leading outliers, and the last seq where their likeliest explanations place a departure."""
        high = self.seq_range[1]
        if not self.majority or self.either_side or not self.placements:
            return self.outliers, high
        # Each outlier's likeliest explanations say where it departed (as `best` names the kind): in a periodic
        # program a whole period shifted (13 extra collectives at seq 1) pairs too, and would put every outlier's
        # departure as early as any other's. A stop is kept beside the rank's likeliest edits (a rank behind whose
        # records agree may as well have skipped lookalikes), and weighs as an edit of its size that no record
        # confirms: a rank behind whose records fit no skip but a whole period's, at their start, stopped.
        top: dict[int, float] = {}
        for p in self.placements:
            score = -2 * p.size if p.kind is EditKind.STOPPED else p.score
            top[p.rank] = max(top.get(p.rank, score), score)
        spans: dict[int, tuple[int, int]] = {}
        for p in self.placements:
            if p.kind is not EditKind.STOPPED and p.score < top[p.rank]:
                continue
            low, last = spans.get(p.rank, (p.low, p.high))
            spans[p.rank] = (min(low, p.low), max(last, p.high))
        leading = [rep for rep, (low, _) in spans.items() if low <= high]
        later = [rep for rep in spans if rep not in leading]
        if later and max(spans[rep][1] for rep in leading) < min(spans[rep][0] for rep in later):
            keep = {r for rep in leading for r in self.members.get(rep, [rep])}
            named = [r for r in self.outliers if r in keep]
            if named:
                return named, max(spans[rep][1] for rep in leading)
        return self.outliers, max(last for _, last in spans.values())

    @property
    def seq_range(self) -> tuple[int, int]:
        """Where the first divergent collective can be: the earliest edit over all outliers (over either side of
        a split that nothing orients)."""
        by_rank: dict[int, tuple[int, int]] = {}
        for p in self.placements:
            low, high = by_rank.get(p.rank, (p.low, p.high))
            by_rank[p.rank] = (min(low, p.low), max(high, p.high))
        lows = [low for low, _ in by_rank.values()]
        highs = [high for _, high in by_rank.values()]
        return min(lows), (max(highs) if self.either_side else min(highs))

    @property
    def kinds(self) -> list[EditKind]:
        """The edit kinds left, likeliest first: of the leading outliers' edits (those of outliers that departed
        later are no explanation of the first departure)."""
        named = set(self.leading)
        theirs = [p for p in self.placements if p.rank in named or named & set(self.members.get(p.rank, ()))]
        ordered = sorted(theirs or self.placements, key=lambda p: (-p.score, p.size))
        return list(dict.fromkeys(p.kind for p in ordered))

    @property
    def best(self) -> Placement:
        """The likeliest explanation of the first edit, for naming its kind and size."""
        low, high = self.seq_range
        inside = [p for p in self.placements if p.low <= high and p.high >= low] or self.placements
        best = max(inside, key=lambda p: (p.score, -p.size, p.kind is EditKind.EXTRA))
        shifts = (EditKind.EXTRA, EditKind.MISSING)
        if best.kind in shifts and self.prefer in shifts and best.kind is not self.prefer:
            # The gate journal tells a gained collective from a lost one where the records score both.
            preferred = [p for p in inside if p.kind is self.prefer]
            if preferred:
                best = max(preferred, key=lambda p: (p.score, -p.size))
        return best


class Constraint(Protocol):
    """A piece of evidence that narrows placements."""

    label: str  # what it is, for `pinned_by` ("fingerprints", "steps")
    locs: tuple[Location, ...]  # where it is

    def narrow(self, placement: Placement) -> Placement | None:
        """The part of `placement` this evidence allows, or None."""


@dataclass
class Proposal:
    """The ranks grouped by their streams, and the placements the records allow."""

    placements: list[Placement]
    outliers: list[int]
    reference: list[int]
    majority: bool
    whole: bool
    stopped: list[int] = field(default_factory=list)  # ranks that agree but end where the majority goes on
    either_side: bool = False
    shown: bool = True  # some record differs; False where the streams differ in length only
    told: bool = False  # an edit placed only because the gate journal names the rank (its records agree)
    members: dict[int, list[int]] = field(default_factory=dict)  # a placement's rank -> the ranks it stands for
    unplaced: list[int] = field(default_factory=list)  # incomplete records that end before the groups part


def propose(codes: dict[int, Codes], start: int, deviants: set[int] | None = None,
            behind: set[int] | None = None, cut: set[int] | None = None,
            ended: set[int] | None = None, incomplete: set[int] | None = None,
            unseen: set[int] | None = None, closed: set[int] | None = None,
            settled: set[int] | None = None, held: dict[int, frozenset[int]] | None = None) -> Proposal | None:
    """Group the ranks into streams that agree; the largest group is the reference, and every other group's
    edits are placed against it. With no strict majority, both sides of a two-way split are placed against each
    other unless `deviants` (the ranks the gate journal says ran something the others did not) picks one.

    `behind`: ranks that launched fewer collectives than the others of a communicator that stopped, and that
    nothing says died. A stream that agrees with the others but ends sooner then is no mere cut: the rank
    skipped collectives somewhere (lookalikes), or stopped launching (blocked elsewhere).

    `ended`: ranks whose streams are known to end where their codes do (a count of what they launched runs past
    their records): one whose records agree with several groups goes with the one group that ends where it does.
    A stream that ends before the groups it agrees with part may belong to any of them (its end is a cut), so a
    group is the majority only if it stays one whichever group such streams belong to.

    `incomplete`: ranks whose records are known to end short of what they launched (a file cut short, collectives
    the others completed after their last record). One whose records agree with several groups sides with nobody:
    it is neither an outlier nor of the reference, and may be on any side.

    `unseen`: ranks with nothing on record but how many collectives they launched (a count in a peer's report).
    With no majority, one that sides with either group parts from neither: it is named on neither side, where every
    other rank that sides with either is known to be on neither side too (else every rank is named).

    `closed`: ranks whose records hold every collective they launched here (an NCCL log or a dump, whole). One
    that ends before the groups part never launched where they do: it is on neither side, and it cannot make the
    smaller side as large as the larger (a rank blocked elsewhere votes for nothing here). `settled`: those of them
    that nothing elsewhere held (in no other communicator, or with whole records there whose last collective
    completed): their streams end where their program did, as `ended` ones' do.

    `held`: ranks PyTorch's completion marks show held back in another communicator by peers ahead here that issued
    their next collective here early (held_back.py), rank -> those peers. One that agrees with several groups, its
    holders all in one of them, ran the program as far as it launched here, not what its holders ran: it goes with
    the largest of the others, where that one is larger than its holders' (the side that departed is the smaller),
    and makes no side larger (had it departed with its holders, it would have issued that collective here as early
    as they did)."""
    groups: list[tuple[list[int], Codes]] = []
    undecided: list[tuple[int, list[list[int]]]] = []
    # The streams that recorded most go first, and each group compares as everything its members recorded: a
    # stream without call stacks agrees with every group, so it must not found one that the others then join.
    for rank in sorted(codes, key=lambda r: (-codes[r].length, -_recorded(codes[r]), r)):
        matching = [i for i, (_, stream) in enumerate(groups) if agree(codes[rank], stream)]
        if not matching:
            groups.append(([rank], codes[rank]))
        elif len(matching) == 1:
            members, stream = groups[matching[0]]
            members.append(rank)
            groups[matching[0]] = (members, merged([stream, codes[rank]]))
        elif rank in (ended or set()) | (settled or set()) and len(
                same := [i for i in matching if groups[i][1].length == codes[rank].length]) == 1:
            members, stream = groups[same[0]]
            members.append(rank)
            groups[same[0]] = (members, merged([stream, codes[rank]]))
        else:
            undecided.append((rank, [groups[i][0] for i in matching]))
    groups = _regrouped(groups, codes, undecided, ended, incomplete, settled, closed)
    groups = _ran_on(groups, codes, incomplete, settled)
    # A stream that agrees with several groups (shorter, cut short, or lacking the field that parts them) tells
    # none of them apart: it goes with the largest, so that it does not make a minority look like half the ranks
    # (the fewest ranks departing is the likeliest explanation; the caveats name the cut).
    victims = {rank: apart for rank, matching in undecided if (apart := _apart_from_holders(rank, matching, held))}
    unplaced = sorted(rank for rank, _ in undecided if rank in (incomplete or ()) and rank not in victims)
    past = {rank: codes[rank].length > _parting(_groups_of_members(groups, matching)) for rank, matching in undecided}
    swing = sum(1 for rank, matching in undecided if rank not in victims and (rank in unplaced or _swings(
        past[rank], rank in (ended or ()), rank in (closed or ())) or rank in (closed or ()) and past[rank]
        and _ends_with_another(codes[rank], matching, groups)))
    # Known to be on neither side: a rank known only by its count, and one whose whole records end before the
    # groups part (it never launched where they do: it lags, or is held back elsewhere).
    aside = {rank for rank, _ in undecided if rank in (unseen or ()) or rank in (closed or ()) and not past[rank]}
    for rank, matching in undecided:
        if rank not in unplaced:
            max(victims.get(rank, matching), key=len).append(rank)
    groups = [(sorted(m), merged(codes[r] for r in m)) for m, _ in groups]
    if len(groups) == 1:
        return _with_behind(_lengths_only(codes, start, deviants, cut, incomplete), codes, start, behind)
    # Who is the majority is counted over the ranks whose records tell the groups apart: one that sides with
    # either could make the smaller side as large as the larger.
    loose = {rank for rank, _ in undecided}
    decided = [len(set(members) - loose) for members, _ in groups]
    order = sorted(range(len(groups)), key=lambda i: (-decided[i], -len(groups[i][0]), -groups[i][1].length,
                                                      groups[i][0]))
    groups, decided = [groups[i] for i in order], [decided[i] for i in order]
    # The reference is the strict majority, or, where the others split several ways, a group larger than each,
    # even where every stream that agrees with several groups belongs to another one (a stream's end is a cut: what
    # it launched past its records may be either group's).
    majority = decided[0] * 2 > sum(decided) + swing or (len(groups) > 2 and decided[0] > decided[1] + swing)
    if not majority and len(groups) > 2:
        # Split several ways with no majority over the whole streams, the ranks may still agree where the streams
        # first part: the first divergent collective is there, and who departed first is the minority there.
        at = first_parting([stream for _, stream in groups])
        first = first_parting_majority([stream for _, stream in groups], codes, at) if at is not None else None
        if at is not None and first is not None:
            # (groups that side with it there part later: the reference is the one a majority holds where they do)
            first = reference_among_alike([stream for _, stream in groups], codes, at, first)
            groups = loose_joined(groups, first, at, loose - set(unplaced), codes)
            groups = [groups[first], *groups[:first], *groups[first + 1:]]
            decided = [decided[first], *decided[:first], *decided[first + 1:]]
            majority = True
    sides = [groups[0]]
    if not majority and len(groups) == 2:
        chosen = [g for g in groups if deviants and set(g[0]) <= deviants]
        if len(chosen) == 1:  # the journal says which side deviated
            sides = [groups[1] if chosen[0] is groups[0] else groups[0]]
            majority = True
        else:
            sides = [groups[0], groups[1]]
    elif not majority:
        # Several groups and none larger than the rest: nothing says which one ran the program, so each is placed
        # against every other (against the first alone, one whose edit against another comes earlier would be
        # placed where it parts from the first only).
        sides = list(groups)
    placements: list[Placement] = []
    whole = True
    outliers: set[int] = set()
    standing: dict[int, list[int]] = {}
    parting: dict[frozenset[int], int] = {}  # a pair of groups (by their first ranks) -> where they have parted by
    for reference_ranks, reference in sides:
        for members, stream in groups:
            if members is reference_ranks:
                continue
            known = bool(deviants and set(members) & deviants)
            # (where the reference's shortest stream ends: an outlier that stopped no sooner got stuck in nothing)
            ends = min((codes[r].length for r in reference_ranks if r in codes), default=None)
            found, held = place_edits(members[0], stream, reference, start, known, ends)
            if found:
                pair = frozenset((members[0], reference_ranks[0]))
                parting[pair] = max(parting.get(pair, 0), max(p.high for p in found))
            for rank in _without_fields(members, stream, codes):
                # The group's stream carries fields this member never recorded (call stacks its NCCL log lacks):
                # where the others' records place the group's edit says nothing of where this member departed,
                # which may be anywhere its own records allow (ranks that agree in what both recorded may still
                # have departed at different lookalikes).
                found += place_edits(members[0], codes[rank], reference, start, known)[0]
            found += _before_own_records(members, codes, reference, start, known, found)
            whole &= held
            outliers.update(members)
            standing[members[0]] = list(members)
            placements.extend(replace(p, rank=members[0]) for p in found)
    if len(sides) > 2 and len(parting) == len(sides) * (len(sides) - 1) // 2:
        # Two groups that have parted by a seq cannot both be the program past it: the first divergent collective
        # comes no later than the earliest such parting of any two (edits that start after it depart later).
        bound = min(parting.values())
        placements = [replace(p, high=min(p.high, bound)) for p in placements if p.low <= bound]
    reference_ranks = sorted(set(codes) - outliers - set(unplaced)) if len(sides) == 1 else sorted(codes)
    named = sorted(outliers) if majority else sorted(codes)
    if not majority:
        # With no majority every rank is named, both sides and those that side with either (whose side is not on
        # record); or, where each of those is known to be on neither side, the two sides alone. (Naming the sides
        # less some of those that side with either would say the rest are known to be on a side.)
        blank = sorted(loose) if loose <= aside else []
        if blank and set(named) - set(blank):
            named = [r for r in named if r not in blank]
            reference_ranks = [r for r in reference_ranks if r not in blank]
            unplaced = blank
        else:
            unplaced = []
    proposal = Proposal(placements, named, reference_ranks, majority, whole, either_side=len(sides) > 1,
                        members=standing, unplaced=unplaced)
    return _with_behind(proposal, codes, start, behind) if majority else proposal


def _before_own_records(members: list[int], codes: dict[int, Codes], reference: Codes, start: int, known: bool,
                        found: list[Placement]) -> list[Placement]:
    """The edits of a group's members whose records begin no earlier than where the group's edits are placed (a
    ring that kept fewer entries): the others' earlier records place the group's departure, and say nothing of
    where such a member departed, which may be anywhere before its own records allow, as its own records against
    the reference place it. Each such edit joins the group's, scored below them (theirs stay the likeliest), and no
    later than them (a later one moves no first departure).

    Worked example: ranks 1 and 3 are one all-reduce short from seq 6 on; rank 1's dump reaches back to seq 4 and
    pins its skip at seq 6, rank 3's begins at seq 6. Rank 3 may have skipped seq 5 (or any before): the group's
    answer is seq 1..6, not 6."""
    if not found:
        return []
    low, high = min(p.low for p in found), max(p.high for p in found)
    floor = min(p.score for p in found) - 1
    extra: list[Placement] = []
    for rank in members:
        first = min((int(hit[0]) for values in codes[rank].fields.values() if (hit := np.flatnonzero(values)).size),
                    default=None)
        if first is None or start + first < low:
            continue
        extra += [replace(p, rank=members[0], high=min(p.high, high), score=min(p.score, floor), widest=None)
                  for p in place_edits(members[0], codes[rank], reference, start, known)[0] if p.low < low]
    return extra


def _without_fields(members: list[int], stream: Codes, codes: dict[int, Codes]) -> list[int]:
    """The members that recorded nothing of some field the group's merged stream holds."""
    held = [name for name, values in stream.fields.items() if np.any(values)]
    return [rank for rank in members if any(not np.any(codes[rank].fields.get(name, np.zeros(0))) for name in held)]


def _swings(past_parting: bool, ended: bool, closed: bool) -> bool:
    """Whether a stream that agrees with several groups could make the smaller as large as the larger. One a count
    carries past its records is unrecorded where the groups part, and may be either's. One whose count, or whose
    whole records, end before the groups part never launched where they do: it votes for neither (a rank blocked
    elsewhere, or one that stopped, launched nothing there). Any other that ends before they part is cut there, and
    may have gone on as either did."""
    if ended:
        return past_parting
    return not past_parting and not closed


def _apart_from_holders(rank: int, matching: list[list[int]],
                        held: dict[int, frozenset[int]] | None) -> list[list[int]]:
    """The groups a rank held back elsewhere (`held`, see propose) may be with: of those it agrees with, every one
    but the one that holds all its holders, where a larger one is among them (the marks say the holders departed,
    which the records confirm only where theirs is the smaller side); none where its holders are not all in one."""
    holders = (held or {}).get(rank)
    if not holders:
        return []
    theirs = [members for members in matching if holders <= set(members)]
    others = [members for members in matching if len(theirs) == 1 and members is not theirs[0]]
    return others if others and max(map(len, others)) > len(theirs[0]) else []


def _ends_with_another(stream: Codes, matching: list[list[int]], groups: list[tuple[list[int], Codes]]) -> bool:
    """Whether a whole stream that agrees with several groups (lacking the field that parts them) ends where one
    of them does other than the largest, which it would go with, and not where that one does: its end sides it with
    the other as much as the fewest departures side it with the largest, so it may be either's. Worked example
    (351492): rank 3's call stack parts from rank 2's at seq 2 and it launched 3, rank 2 launched 2 and so did rank
    0 (a count); rank 1's NCCL log, whole, holds 3 lookalikes: it may be rank 3's, or rank 2's gone on past where
    rank 2 was held elsewhere."""
    largest = max(matching, key=len)
    ends = {id(members): s.length for members, s in groups}
    return stream.length != ends.get(id(largest)) and any(
        stream.length == ends.get(id(members)) for members in matching if members is not largest)


def _regrouped(groups: list[tuple[list[int], Codes]], codes: dict[int, Codes],
               undecided: list[tuple[int, list[list[int]]]], ended: set[int] | None,
               incomplete: set[int] | None = None, settled: set[int] | None = None,
               closed: set[int] | None = None) -> list[tuple[list[int], Codes]]:
    """The groups with every joiner that also agrees with a group founded after it joined taken out again (it
    joined while that group did not exist yet): a stream that recorded less (no call stacks, say) but went on
    longer goes first and joins the first group, whose records it then carries against streams that part from
    that group's founder alone. Such a rank goes with the one group it agrees with once the groups are rebuilt
    without it, or is undecided (added to `undecided`) where it agrees with several.

    Its length still tells: one that went on past the later group's end, as far as only a minority of the ranks
    did (they launched more than most: extra collectives), parts from that group by it and stays. And where the
    groups rebuilt without the joiners are even (the ranks whose records part them outnumber neither side), and
    collectives left out or added are all that parts them, a joiner goes with the one group it agrees with that
    ends where it does: had that group added them, the joiner would end where the other does (where different
    collectives part them too, its length tells nothing of who ran those, and it stays undecided). So does a
    `settled` joiner (its records hold all it launched, and nothing elsewhere held it) where they are not even."""
    if len(groups) < 2:
        return groups
    known = [r for r in codes if r not in (incomplete or ())] or list(codes)

    def apart(rank: int, stream: Codes) -> bool:  # ended past `stream`, as far as a minority did
        length = codes[rank].length
        return length > stream.length and sum(codes[r].length >= length for r in known) * 2 < len(known)

    loose = {r for i, (members, _) in enumerate(groups) for r in members[1:]
             if any(agree(codes[r], stream) and not apart(r, stream) for j, (_, stream) in enumerate(groups)
                    if j != i)}
    if not loose:
        return groups
    for members, _ in groups:  # (in place: the undecided name the groups by their member lists)
        members[:] = [r for r in members if r not in loose]
    rebuilt = [(members, merged(codes[r] for r in members)) for members, _ in groups]
    sizes = sorted((len(members) for members, _ in rebuilt), reverse=True)
    even = sizes[0] * 2 <= sum(sizes)
    for rank in sorted(loose, key=lambda r: (-codes[r].length, -_recorded(codes[r]), r)):
        matching = [i for i, (_, stream) in enumerate(rebuilt) if agree(codes[rank], stream)
                    and not apart(rank, stream)]
        same = [i for i in matching if rebuilt[i][1].length == codes[rank].length]
        # (a group whose records hold all a member launched here, while it runs in other communicators too, may end
        # where that member was held there, not where its program does: its end then tells nothing)
        held = (closed or set()) - (settled or set())
        whole = len(same) == 1 and not any(set(rebuilt[i][0]) & held for i in matching if i != same[0])
        # Where the joiner and every rank of the groups it agrees with are settled, each stream ends where its
        # program did: one that ran another group's program would end where that group does, whatever collectives
        # part the groups. Worked example: rank 3 skipped a drafter pass of 3 and ran on to its program's end, 8
        # collectives; rank 2 ran the pass, 9; whole NCCL logs of lookalikes, 9 each, are rank 2's program.
        ends_tell = len(same) == 1 and all(set(rebuilt[i][0]) | {rank} <= (settled or set()) for i in matching)
        if len(matching) == 1 or rank in (ended or ()) and len(same) == 1 or ends_tell or (
                even and whole or rank in (settled or ())) and len(same) == 1 and all(
                _length_edit(rebuilt[i][1], rebuilt[same[0]][1]) for i in matching if i != same[0]):
            members, _ = rebuilt[matching[0] if len(matching) == 1 else same[0]]
            members.append(rank)
        else:
            undecided.append((rank, [rebuilt[i][0] for i in matching]))
    return [(members, merged(codes[r] for r in members)) for members, _ in rebuilt]


def _ran_on(groups: list[tuple[list[int], Codes]], codes: dict[int, Codes], incomplete: set[int] | None,
            settled: set[int] | None) -> list[tuple[list[int], Codes]]:
    """The groups, with the members of one that went on past where the rest of it stopped split off as a group of
    their own, where the rest are `settled` (their records hold all they launched and nothing elsewhere held them:
    their streams end where their program stopped) and as far as only a minority of the ranks went: ranks that ran
    one program stop at one place, so those that launched more were elsewhere in it (they left out lookalikes, or
    added collectives at the end). Worked example: ranks 0 and 1 launch 4 all-reduces and stop, rank 2 launches 7
    and rank 3 departs visibly at seq 4: rank 2 agrees with ranks 0 and 1 wherever they overlap, yet departed too,
    perhaps first (it skipped one of the lookalikes before seq 4). Only where the records part other ranks too:
    streams that differ in length alone are weighed as such (`_lengths_only`)."""
    if len(groups) < 2 or not settled:
        return groups
    known = [r for r in codes if r not in (incomplete or ())] or list(codes)
    out = []
    for members, stream in groups:
        top = max(codes[r].length for r in members)
        ahead = [r for r in members if codes[r].length == top]
        rest = [r for r in members if codes[r].length < top]
        if rest and set(rest) <= settled and sum(codes[r].length >= top for r in known) * 2 < len(known):
            members[:] = rest  # (in place: the undecided name the groups by their member lists)
            out += [(members, merged(codes[r] for r in rest)), (ahead, merged(codes[r] for r in ahead))]
        else:
            out.append((members, stream))
    return out


def _length_edit(stream: Codes, reference: Codes) -> bool:
    """Whether collectives left out or added are all that parts `stream` from `reference` (no different ones: a
    length that parts them then tells who left out or added them).

    Where the lengths differ, a block of different collectives is no rival to a collective left out or added that
    alone explains every record: it leaves the difference in length to explain, by such a collective beside it (two
    edits where one does). Worked example: rank 0 left out a drafter pass of two collectives at seq 1; only rank 2's
    dump reaches back to the pass's second collective, whose call stack parts it from rank 0's there. Rank 0 issuing
    another collective there explains that one record too, but not that it launched two fewer."""
    found, whole = place_edits(0, stream, reference, 0)
    shifts = [p for p in found if p.kind in (EditKind.MISSING, EditKind.EXTRA)]
    diff = stream.length - reference.length
    if diff:
        kind = EditKind.EXTRA if diff > 0 else EditKind.MISSING
        return whole and any(p.kind is kind and p.size == abs(diff) for p in shifts)
    return whole and bool(found) and len(shifts) == len(found)


def _groups_of_members(groups: list[tuple[list[int], Codes]], matching: list[list[int]]) -> list[Codes]:
    """The streams of the groups whose member lists are `matching`."""
    return [stream for members, stream in groups if any(members is m for m in matching)]


def _parting(streams: list[Codes]) -> int:
    """The first position where the streams may not all pair (the shorter's end where they agree throughout)."""
    first, at = streams[0], None
    for other in streams[1:]:
        n = min(first.length, other.length)
        bad = np.flatnonzero(~compatible(first, 0, other, 0, n))
        here = int(bad[0]) if bad.size else n
        at = here if at is None else min(at, here)
    return first.length if at is None else at


def _recorded(stream: Codes) -> int:
    """How many field values the stream recorded."""
    return sum(int(np.count_nonzero(values)) for values in stream.fields.values())


def _with_behind(proposal: Proposal | None, codes: dict[int, Codes], start: int,
                 behind: set[int] | None) -> Proposal | None:
    """`proposal` with the `behind` ranks among the reference added as outliers: collectives missing anywhere in
    their records, or a stop after their last one."""
    if not behind:
        return proposal
    reference_ranks = proposal.reference if proposal else sorted(codes)
    stopped = proposal.stopped if proposal else []
    late = sorted(r for r in behind if (r in reference_ranks or r in stopped) and r in codes)
    keep = [r for r in reference_ranks if r not in behind]
    if not late or len(late) * 2 > len(codes) or not keep:
        return proposal
    # A stream cut short no later than where the late ones end may be behind too (what it launched past its cut is
    # unknown): where it could make the late ones half the ranks, no majority says which side departed.
    cut_behind = [r for r in (proposal.unplaced if proposal else []) if r in codes and r not in late
                  and codes[r].length <= max(codes[rank].length for rank in late)]
    tie = (len(late) + len(cut_behind)) * 2 >= len(codes)
    reference = merged(codes[r] for r in keep)
    # Ranks that stopped short and are not behind (nothing says they left one out or are held back) merely lag:
    # their records end, and they side with nobody.
    lagging = [r for r in stopped if r not in late]
    placements = [] if proposal is None else [p for p in proposal.placements if p.kind is not EditKind.STOPPED
                                              or p.rank not in late and p.rank not in lagging]
    for rank in late:
        found, _ = place_edits(rank, codes[rank], reference, start, known=True)
        placements += [p for p in found if p.kind is EditKind.MISSING]
        end = start + codes[rank].length
        placements.append(Placement(rank, EditKind.STOPPED, reference.length - codes[rank].length, end, end))
    if tie:
        # Half the ranks behind: they skipped collectives, or the other half launched extra ones.
        ahead = merged(codes[r] for r in late)
        for rank in keep:
            placements += [p for p in place_edits(rank, codes[rank], ahead, start)[0] if p.kind is EditKind.EXTRA]
        return Proposal(placements, sorted(codes), sorted(codes), False, True, either_side=True,
                        shown=bool(proposal and proposal.shown))
    earlier = [] if proposal is None or not proposal.majority or proposal.stopped else proposal.outliers
    outliers = sorted(set(earlier) | set(late))
    standing = {rep: [r for r in ranks if r not in late or r == rep]
                for rep, ranks in (proposal.members if earlier else {}).items()}
    return Proposal(placements, outliers, keep, True, proposal.whole if proposal else True,
                    shown=bool(proposal and proposal.shown), members=standing,
                    unplaced=sorted(set(proposal.unplaced if proposal else []) | set(lagging)))


def _lengths_only(codes: dict[int, Codes], start: int, deviants: set[int] | None,
                  cut: set[int] | None = None, incomplete: set[int] | None = None) -> Proposal | None:
    """Streams that agree wherever they overlap and differ only in length: the side that goes on past the others
    (the minority) launched collectives the others did not; the side that stops short (the minority) stopped.
    Where the gate journal names the deviating ranks, their edit lies somewhere in their records; or, for a
    deviant whose records end short of what it launched (`incomplete`), anywhere past their end up to one past
    the others' records: what it launched there is on no record."""
    lengths = {r: c.length for r, c in codes.items()}
    if deviants and set(codes) - deviants:
        told = sorted(deviants & set(codes))
        reference = merged(codes[r] for r in codes if r not in deviants)
        # Deviants that launched more than everyone else show their extra collectives; otherwise only the
        # journal's word places an edit on them.
        ahead = all(lengths[r] > reference.length for r in told)
        last = start + reference.length
        found = [replace(p, high=max(p.high, last)) if rank in (incomplete or ()) and p.low >= start + lengths[rank]
                 else p for rank in told for p in place_edits(rank, codes[rank], reference, start, known=not ahead)[0]]
        if found:
            return Proposal(found, told, sorted(set(codes) - deviants), True, True, shown=False, told=not ahead)
    if len(set(lengths.values())) < 2:
        return None
    longest = max(lengths.values())
    ahead = sorted(r for r, n in lengths.items() if n == longest)
    # A stream that ends where its file was cut short may have gone on as far as any: it did not stop there.
    unknown = sorted(r for r in set(codes) - set(ahead) if r in (cut or ()))
    behind = sorted(set(codes) - set(ahead) - set(unknown))
    if not behind:
        return None  # the shorter streams end where their files were cut short: nothing differs on record
    # Two ranks, one ahead: it launched more, or the other stopped short; nothing says which. The streams cut
    # short side with neither, so they are not counted; yet each may be on either side, so a side is the minority
    # only where it stays one with every such stream on it: ranks 0 and 1 at 14, rank 3 at 15 and rank 2 cut at 14
    # may be two against two (rank 2 went on to 15 too), and both sides are then named.
    deciding = len(ahead) + len(behind)
    tie = len(ahead) * 2 == deciding and deciding == 2
    if len(ahead) * 2 < deciding or tie:
        # Ranks that ran one program stop at one place: where most of the rest end alike, those that end sooner
        # than they do departed as well (they left out lookalikes, or stopped short), and may have departed first.
        level = max(lengths[r] for r in behind)
        short = [r for r in behind if lengths[r] < level] if not tie and sum(
            lengths[r] == level for r in behind) * 2 > deciding + len(unknown) else []
        reference = merged(codes[r] for r in behind if r not in short)
        placements: list[Placement] = []
        for rank in ahead:
            found, _ = place_edits(rank, codes[rank], reference, start)
            placements.extend(found)
        for rank in short:
            found, _ = place_edits(rank, codes[rank], reference, start, known=True)
            placements += [p for p in found if p.kind is EditKind.MISSING]
            end = start + lengths[rank]
            placements.append(Placement(rank, EditKind.STOPPED, level - lengths[rank], end, end))
        if short:
            return Proposal(placements, sorted([*ahead, *short]), sorted(set(behind) - set(short)), True, True,
                            shown=False, unplaced=unknown)
        split = (len(ahead) + len(unknown)) * 2 >= deciding + len(unknown)  # (a two-rank tie among them)
        # (a stream cut short sides with neither: what it launched past its cut may place it, per-step checksums)
        return Proposal(placements, sorted(codes) if split else ahead, behind, not split, True, shown=False,
                        unplaced=[] if split else unknown)
    shortest = min(lengths[r] for r in behind)
    stopped = sorted(r for r in behind if lengths[r] == shortest)
    at = start + shortest
    # (a stream cut no later than where they stopped may have stopped there too; one cut short before the longest
    # ends may have stopped where the others did, or gone on: on no side)
    may_stop = [r for r in unknown if lengths[r] <= shortest]
    minority = (len(stopped) + len(may_stop)) * 2 < deciding + len(may_stop)
    return Proposal([Placement(r, EditKind.STOPPED, longest - shortest, at, at) for r in stopped], stopped,
                    sorted(set(codes) - set(stopped) - set(unknown)), minority, True, stopped, shown=False,
                    unplaced=unknown)


# -- other evidence narrows --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ResultChecks:
    """Collectives whose results were checked against the value a consistent world gives: a wrong result was
    misaligned at its seq, a right one aligned (every rank's pairing at a seq is the same physical collective)."""

    right: frozenset[int]
    wrong: frozenset[int]
    locs: tuple[Location, ...]
    label: str = "fingerprints"

    def narrow(self, placement: Placement) -> Placement | None:
        low, high = placement.low, placement.high
        if placement.kind in (EditKind.EXTRA, EditKind.MISSING):
            # Everything from the edit on pairs shifted: right results lie before it, wrong ones at or after it.
            if self.right:
                low = max(low, max(self.right) + 1)
            if self.wrong:
                high = min(high, min(self.wrong))
        elif placement.kind is EditKind.STOPPED:
            # A stop leaves everything before it aligned and nothing after it completes: no wrong result fits it.
            return None if self.wrong else placement
        elif placement.kind is EditKind.DIFFERENT:
            # A block of `size` different collectives misaligns only itself.
            block = range(placement.low, placement.low + placement.size)
            later_wrong = [s for s in self.wrong if s >= placement.low + placement.size]
            if any(s in self.right for s in block) or any(s < placement.low for s in self.wrong) or later_wrong:
                return None
        return replace(placement, low=low, high=high) if low <= high else None


@dataclass(frozen=True)
class GateStep:
    """The drafter gates disagreed first at `step`: the deviating ranks' first edit lies in their records of that
    step, and is of a kind their decision allows (a rank whose gate passed ran collectives the others did not:
    extra or different ones, never missing ones; a rank that skipped, missing or different ones)."""

    spans: dict[int, tuple[int, int]]  # deviant rank -> the seqs its records of that step may cover
    reference_span: tuple[int, int] | None
    passed: bool  # the deviants' gates passed
    locs: tuple[Location, ...]
    label: str = "steps"
    # deviant rank -> (the seq after its last record, the last seq it may have launched): its records hold nothing
    # of the step (a trace whose rank never read the step back), so an edit placed at their end may lie anywhere in
    # the step past them, as far as it launched
    unread: dict[int, tuple[int, int]] = field(default_factory=dict)

    def narrow(self, placement: Placement) -> Placement | None:
        if placement.rank not in self.spans:
            return placement
        ruled_out = EditKind.MISSING if self.passed else EditKind.EXTRA
        if placement.kind is ruled_out:
            return None
        end, reach = self.unread.get(placement.rank, (None, None))
        if end is not None and placement.low <= end <= placement.high:
            placement = replace(placement, high=max(placement.high, reach))
        if placement.kind is EditKind.MISSING and self.reference_span:
            span = self.reference_span
        elif placement.kind is EditKind.MISSING:
            # Collectives the rank left out of the step lie between its records of it, or after its last one,
            # before its first of the next step (a gate that skipped the step's drafter, whose collectives end it):
            # a missing edit is placed at the seq of the rank's next record, one past the step's.
            first, last = self.spans[placement.rank]
            span = (first, last + 1)
        else:
            span = self.spans[placement.rank]
        low, high = max(placement.low, span[0]), min(placement.high, span[1])
        return replace(placement, low=low, high=high) if low <= high else None


PARTED_COMPLETIONS = "completions"  # the label of results parted by completions (see divergence)
ISSUE_ORDER = "issue order across communicators"


@dataclass(frozen=True)
class LeftOut:
    """Ranks whose issue orders across their communicators show that they left out a collective somewhere in a
    range of seqs (align/interleave.py `skipped_here`): each went on elsewhere past where the program issues the
    range's last seq, so its first edit is a missing collective there, never a stop (a rank that stopped goes no
    further anywhere; one that left out a collective right after its last record reads like one that stopped)."""

    spans: dict[int, tuple[int, int]]  # rank -> the seqs it may have left one out at
    locs: tuple[Location, ...] = ()
    label: str = ISSUE_ORDER

    def narrow(self, placement: Placement) -> Placement | None:
        if placement.rank not in self.spans:
            return placement
        if placement.kind is EditKind.STOPPED:
            placement = replace(placement, kind=EditKind.MISSING, size=1)
        if placement.kind is not EditKind.MISSING:
            return None
        first, last = self.spans[placement.rank]
        low, high = max(placement.low, first), min(placement.high, last)
        return replace(placement, low=low, high=high) if low <= high else None


def apply(placements: list[Placement], constraint: Constraint, joint: bool = False) -> list[Placement] | None:
    """The placements `constraint` allows, or None where it rules out every edit of some outlier (whose stream
    still departs somewhere: that is a contradiction, not a narrowing). `joint`: the placements' ranks are outliers
    that each departed from one reference, not the two sides of a split one of which departed (_later_departures)."""
    ranks = dict.fromkeys(p.rank for p in placements)
    kept = {rank: _narrowed([p for p in placements if p.rank == rank], constraint) for rank in ranks}
    if joint and getattr(constraint, "wrong", None):
        kept = _later_departures(placements, constraint, kept)
    if not all(kept.values()):
        return None
    return [p for rank in ranks for p in kept[rank]]


def _narrowed(theirs: list[Placement], constraint: Constraint) -> list[Placement]:
    """The part of one outlier's placements `constraint` allows (none: it rules them all out)."""
    found = [(p, n) for p in theirs if (n := constraint.narrow(p)) is not None]
    if any(p.widest is not None for p in theirs) and all(p.widest is not None for p, _ in found):
        # The edits records confirmed are ruled out: an edit that runs off the records' end may start anywhere
        # it could before they held it to where the records part.
        found = [(p, n) for p in theirs
                 if (n := constraint.narrow(replace(p, low=p.widest, widest=None) if p.widest is not None
                                            else p)) is not None]
    return [n for _, n in found]


def _later_departures(placements: list[Placement], constraint: Constraint,
                      kept: dict[int, list[Placement]]) -> dict[int, list[Placement]]:
    """`kept` (rank -> the placements results checked allow), where several outliers each departed: results read
    back wrong say where the first departure is, not where each one is. An edit of one outlier that they keep
    misaligns every wrong result (a shift before the first, or a block holding them all), and another outlier may
    have departed after it, where its own records say: one whose likeliest edits the wrong results rule out (or
    all of its edits) is held to the right results alone, beside an outlier whose likeliest edits they keep (or,
    where none does, any edit). Worked example: rank 6 left out seq 1 and every result from seq 1 on read back
    wrong; rank 1 swapped seq 2 and 3. Rank 1's swap mixes no result at seq 1, and need not: rank 6's skip did, and
    rank 1 departed later (no longer forced onto a whole period of extra collectives at seq 1, which also fits)."""
    top = {rank: max(p.score for p in placements if p.rank == rank) for rank in kept}
    leaders = {rank for rank, mine in kept.items() if any(p.score == top[rank] for p in mine)}
    explaining = leaders or {rank for rank, mine in kept.items() if mine}
    right_only = replace(constraint, wrong=frozenset())
    out = dict(kept)
    for rank, mine in kept.items():
        if rank in leaders or not explaining - {rank} or (mine and not leaders):
            continue
        out[rank] = _narrowed([p for p in placements if p.rank == rank], right_only)
    return out


# -- one answer ---------------------------------------------------------------------------------------------------


def solve(code_stages: list[tuple[str, Callable[[], dict[int, Codes] | None]]], start: int,
          constraints: list[Constraint], basis: Callable[[int], tuple[Location, ...]],
          deviants: set[int] | None = None, prefer: EditKind | None = None,
          behind: set[int] | None = None, cut: set[int] | None = None,
          ended: set[int] | None = None, incomplete: set[int] | None = None,
          unseen: set[int] | None = None, lookalikes: bool = True, closed: set[int] | None = None,
          settled: set[int] | None = None, held: dict[int, frozenset[int]] | None = None) -> Solution | None:
    """Propose from the records field set by field set (signatures first, then each richer field), keep each
    stage that narrows without changing who the outliers are, then narrow by every constraint.

    `code_stages`: (label, codes) where each stage adds fields to the last; `basis(seq)` gives the records'
    locations at a seq, for contradictions. `lookalikes`: streams that agree throughout may still hold an edit
    among lookalikes where results read back wrong (False where the ranks are grouped by their results: agreement
    among them says nothing).
    """
    proposal: Proposal | None = None
    chosen: dict[int, Codes] = {}  # the codes the proposal was made from
    pinned_by = ""
    narrowed: list[str] = []
    stages: list[str] = []  # every stage so far; each adds fields to the last
    compared: list[str] = []  # the stages up to the last one whose proposal was kept
    richest: dict[int, Codes] = {}  # the last stage's codes
    widened: Proposal | None = None  # the proposal a richer field that parts the same ranks earlier widened
    parted_earlier: tuple[str, int, int] | None = None
    lone_field: tuple[str, int, int] | None = None  # (see Solution.lone_field)
    tied: Proposal | None = None  # the proposal that named a lone recorder of a richer field beside the outliers
    fields_before: set[str] = set()
    for label, make in code_stages:
        codes = make()
        if codes is None:
            continue
        added_fields = {f for c in codes.values() for f in c.fields} - fields_before
        fields_before |= added_fields
        stages.append(label)
        richest = codes
        found = propose(codes, start, deviants, behind, cut, ended, incomplete, unseen, closed, settled, held)
        if found is None or not found.placements:
            continue
        if proposal is not None:
            found = _one_side(found, proposal, codes)
        # Records that differ beat streams that differ in length only (a trace flushed per step, a cut), where
        # they depart no later: the first departure is theirs.
        earlier = found.shown and not proposal.shown and (_span(found.placements)[0] <= _span(
            proposal.placements)[0] or _lengths_later(found, proposal, codes, start)) \
            if proposal is not None and proposal.placements else False
        if proposal is None or (proposal.stopped and not found.stopped) or earlier:
            if earlier:
                narrowed.append(label)
            proposal, pinned_by, compared, chosen = found, label, list(stages), codes
            continue
        added = set(found.outliers) - set(proposal.outliers)
        more = added and set(found.outliers) > set(proposal.outliers) and found.shown
        if more and found.reference and set(found.reference).isdisjoint(added):
            reference = merged(codes[r] for r in found.reference)
            more = all(not agree(codes[r], reference) for r in added)  # not merely unrecorded where others differ
        if more:
            # A richer field shows more ranks departing (where the others' records may only have differed in
            # length): they do, and the first departure may be theirs.
            proposal, pinned_by, compared, chosen = found, label, list(stages), codes
            narrowed.append(label)
            continue
        if _picks_side(found, proposal, chosen, start):
            # A poorer field that only some ranks recorded split them evenly; a richer one more of them recorded
            # names one side of that split as a minority: it says who departed, within where.
            proposal, pinned_by, compared, chosen = found, label, list(stages), codes
            narrowed.append(label)
            continue
        if (wider := _parts_earlier(found, proposal)) is not None:
            # A richer field parts the same ranks before the poorer ones do: either may say where they diverged.
            parted_earlier = (label, _span(found.placements)[0], _span(proposal.placements)[0])
            proposal, compared, chosen = wider, list(stages), codes
            widened = proposal
            continue
        if set(found.outliers) != set(proposal.outliers) or not _within(found, proposal):
            continue  # a field that moves the answer rather than narrowing it is not trusted
        if (tie := _lone_recorder_tie(found, proposal, codes, added_fields, start)) is not None:
            # The richer field parts the outliers from one rank of the reference alone (the rest recorded none of
            # it), and no one edit explains their streams against it: that rank may have departed itself.
            proposal, compared, chosen = tie, list(stages), codes
            lone_field = (label, *[r for r in tie.outliers if r not in found.outliers], _span(found.placements)[0])
            tied = tie
            continue
        if _span(found.placements) != _span(proposal.placements):
            narrowed.append(label)
            pinned_by = label
        proposal, compared, chosen = found, list(stages), codes
    if proposal is None:
        proposal = _misaligned_lookalikes(richest, start, constraints) if lookalikes else None
        if proposal is None:
            return None
        pinned_by, compared, chosen = "fingerprints", list(stages), richest
    hidden = _hidden_departures(proposal, chosen, start, unseen)
    solution = Solution(proposal.placements + hidden, proposal.outliers, proposal.reference, proposal.majority,
                        pinned_by, narrowed, departs_again=not proposal.whole, prefer=prefer,
                        either_side=proposal.either_side, shown=proposal.shown, told=proposal.told,
                        compared=compared, members=proposal.members, unplaced=proposal.unplaced,
                        parted_earlier=parted_earlier if proposal is widened else None,
                        lone_field=lone_field if proposal is tied else None)
    if proposal.stopped:
        if not any(getattr(c, "wrong", None) for c in constraints):
            return solution
        # Results read back wrong: the group ran misaligned, so the ranks that launched fewer did not merely stop
        # after their last record; they left collectives out at or before the first wrong result (or ran others
        # of their own and then blocked elsewhere, which their records cannot tell from it).
        skipped = _skips(chosen, proposal, start)
        if not skipped:
            return solution
        solution.placements = skipped + solution.placements
    # Blocks of different collectives where completions part streams that differ in length only: narrowed by
    # every constraint beside the records' placements, and joined to them after (they neither rule out the
    # records' explanations nor stand in for those a contradiction adds).
    blocks = _different_then_stopped(chosen, proposal, start, constraints) if not proposal.shown else []
    for constraint in constraints:
        blocks = [n for p in blocks if (n := constraint.narrow(p)) is not None]
        kept = apply(solution.placements, constraint, joint=solution.majority and not solution.either_side)
        if kept is None and not solution.shown and not getattr(constraint, "wrong", True):
            # Streams that differ in length only, and results checked right wherever an edit could be: the longer
            # stream is not ahead, the others' records stop short of it (a trace flushed per step, a cut).
            return None
        if kept is None:
            low, high = solution.seq_range
            solution.contradictions.append(Contradiction(constraint.label, (low, high),
                                                         tuple(constraint.locs) + basis(low)))
            solution.placements += _misaligned_by(constraint, solution.placements)
            continue
        if _span(kept) != _span(solution.placements):
            solution.narrowed_by.append(constraint.label)
            solution.pinned_by = constraint.label
        solution.placements = kept
        if getattr(constraint, "wrong", None):
            # results read back wrong: misaligned, whatever records say
            solution.by_results = solution.by_results or not solution.shown
            solution.shown, solution.told = True, False
    solution.placements += blocks
    return _unplaced_reached(solution, chosen, start)


def _unplaced_reached(solution: Solution, codes: dict[int, Codes], start: int) -> Solution:
    """A solution with no majority that left ranks unplaced whose records, cut short, end before the streams part
    by length, where other evidence (results read back wrong) places the parting within those records: they go on
    past it, agreeing with either side, so they side with either, and every rank is named (as propose names every
    rank that sides with either where no majority decides). Left unplaced, they would present one side as the lone
    one that departed. Worked example: ranks 1 and 3 launched 12, rank 2 11, and rank 0's log was cut, its trace
    reading back 11 whose results from seq 9 on are wrong, as rank 2's: it may be on either side, two against two."""
    if solution.majority or not solution.by_results or not solution.unplaced or not solution.placements:
        return solution
    high = solution.seq_range[1]
    if not any(r in codes and start + codes[r].length > high for r in solution.unplaced):
        return solution
    solution.outliers = sorted({*solution.outliers, *solution.reference, *solution.unplaced})
    solution.unplaced = []
    return solution


def _hidden_departures(proposal: Proposal, codes: dict[int, Codes], start: int,
                       unseen: set[int] | None = None) -> list[Placement]:
    """Edits of a group's members whose own records do not show the group's departure. A stream that lacks the
    field parting a group from the reference (an NCCL log without the call stacks the others' dumps have) agrees
    with both, and joins the group by its length only: it departed too, but its records say nothing of where the
    group's did. It may have left out (or added) a collective anywhere its own records allow against the
    reference, earlier than the group: every such edit joins the group's, scored below them (the group's stays the
    likeliest), and no later than them (a later one moves no first departure).

    Worked example: ranks 0..6 keep dumps with call stacks or NCCL logs, all-reduces alike in signature; rank 2's
    dump shows it skipped seq 22; rank 7, one short too, kept an NCCL log only. Rank 7 may have skipped any of seq
    1..22: the answer is seq 1..22, not 21..22.

    The group's placements are named after its lowest rank, which need not be the one whose records placed them:
    a rank known only by PyTorch's count of what it launched (`unseen`: no records of its own) may be that rank,
    and is weighed as any other member; its edits say so (`Placement.unrecorded`), as nothing but a count places
    them. Worked example: rank 5's records show it skipped seq 3; rank 3 left nothing, and a peer's desync report
    counts it one short too. Rank 3 may have left out any of seq 1..3: the answer is seq 1..3, not 3."""
    if not proposal.shown or not proposal.members or not proposal.placements or not proposal.reference:
        return []
    keep = [r for r in proposal.reference if r in codes]
    if not keep:
        return []
    reference = merged(codes[r] for r in keep)
    found: list[Placement] = []
    for rep, members in proposal.members.items():
        own = [p for p in proposal.placements if p.rank == rep]
        if not own:
            continue
        high, floor = max(p.high for p in own), min(p.score for p in own) - 1
        for rank in members:
            if rank not in codes or codes[rank].length == reference.length \
                    or not agree(codes[rank], reference):
                continue  # its records show a departure of their own (or none at all)
            unrecorded = rank if rank in (unseen or ()) else None
            found += [replace(p, score=min(p.score, floor), unrecorded=unrecorded)
                      for p in _edits_before(rep, codes[rank], reference, start, min(q.low for q in own), high)]
    return found


def _misaligned_by(constraint: Constraint, placements: list[Placement]) -> list[Placement]:
    """Where results that read back wrong rule out every edit the records place (a stop after the first wrong one,
    say), both stand, as a contradiction, and the answer may not choose: the ranks ran misaligned somewhere after
    the last right result before the first wrong one, which the records did not show. Those placements join the
    records' ones, each outlier's below its own (the records' explanation stays the likeliest kind)."""
    wrong = getattr(constraint, "wrong", ())
    if not wrong:
        return []
    first = min(wrong)
    before = [s for s in getattr(constraint, "right", ()) if s < first]
    low = max(before) + 1 if before else 1
    floor = min((p.score for p in placements), default=0) - 1
    return [Placement(rank, kind, 1, low, first, score=floor) for rank in dict.fromkeys(p.rank for p in placements)
            for kind in (EditKind.EXTRA, EditKind.MISSING)]


def _misaligned_lookalikes(codes: dict[int, Codes], start: int, constraints: list[Constraint]) -> Proposal | None:
    """Streams that agree in everything recorded, yet results read back wrong: the ranks ran misaligned on
    collectives that look alike (an edit among lookalikes shows in no record). No record says which ranks departed,
    so every rank is named, on either side, unless the ranks with no record of the first wrong result are a
    minority: those are named; the results say where (at or before the first wrong one, after the right ones: the
    constraints narrow these placements)."""
    wrong = [s for c in constraints for s in getattr(c, "wrong", ())]
    if len(codes) < 2 or not wrong or min(wrong) < start:
        return None
    first = min(wrong)
    # Every member of a misaligned collective read it back (it completed on all of them). Where the ranks with a
    # record of the first wrong result are a strict majority, alike in all they recorded there and after, the
    # rest, with no record of it, ran the other collective: the fewest departing.
    at = first - start
    blank = [r for r in sorted(codes) if codes[r].length <= at or not any(v[at] for v in codes[r].fields.values())]
    named = blank if blank and len(blank) * 2 < len(codes) else sorted(codes)
    placements = [Placement(rank, kind, 1, start, first) for rank in named
                  for kind in (EditKind.EXTRA, EditKind.MISSING)]
    placements += [Placement(rank, EditKind.DIFFERENT, 1, first, first) for rank in named]
    if named == blank:
        return Proposal(placements, blank, [r for r in sorted(codes) if r not in blank], True, True,
                        members={rank: [rank] for rank in blank})
    return Proposal(placements, sorted(codes), sorted(codes), False, True, either_side=True,
                    members={rank: [rank] for rank in codes})


def _one_side(found: Proposal, proposal: Proposal, codes: dict[int, Codes]) -> Proposal:
    """A richer field that splits the ranks recording it evenly, where a poorer one already named a minority
    that is one side of that split, and the rest of that side recorded nothing that parts it from the other (it
    sides with either): that side's named ranks departed (the richer field says where, not who), so the split's
    placements of that side are kept, as a narrowing of the same outliers."""
    if found.majority or not found.either_side or not proposal.majority or proposal.stopped \
            or len(found.members) != 2:
        return found  # (a split of several groups: another side's edits against the rest are not the named one's)
    named = set(proposal.outliers)
    sides = [rep for rep, ranks in found.members.items() if named <= set(ranks)]
    if len(sides) != 1:
        return found
    others = [r for rep, ranks in found.members.items() if rep != sides[0] for r in ranks]
    if not others:
        return found
    reference = merged(codes[r] for r in others)
    if any(not agree(codes[r], reference) for r in found.members[sides[0]] if r not in named):
        return found  # more ranks than those named depart with them
    mine = [replace(p, rank=proposal.outliers[0]) for p in found.placements if p.rank == sides[0]]
    if not mine:
        return found
    return Proposal(mine, proposal.outliers, proposal.reference, True, found.whole, shown=found.shown,
                    members={proposal.outliers[0]: list(proposal.outliers)})


def _lone_recorder_tie(found: Proposal, proposal: Proposal, codes: dict[int, Codes], fields: set[str],
                       start: int) -> Proposal | None:
    """Where a richer field narrows a poorer one's answer, but of the reference only one rank recorded that field
    (dumps with call stacks for it, NCCL logs without for the rest), and no one edit of the outliers explains their
    streams against it: the field pits the outliers against that one rank, which may itself have departed (an
    outlier's stream that departs from it twice may as well depart once, where the lone rank departed the other
    time). The field is no evidence against the outliers there: the poorer answer stands, and the lone rank is
    named beside the outliers, no majority, each placed against the other from where the field parts them.

    Worked example: ranks 0 and 1 keep NCCL logs, rank 2 a dump, rank 3 both; rank 3 is one all-reduce short
    (signatures: one left out somewhere in seq 8..13, among lookalikes). The call stacks, ranks 2 and 3's alone,
    part them at seq 2 (rank 2 issued two layers' all-reduces in each other's place) and again past seq 9 (rank 3's
    skip): they place rank 3's departure at seq 2 only by a block of a whole step. Rank 2 may have departed at seq 2,
    or rank 3: both are named over the signatures' range, seq 1..13, which holds seq 2."""
    if not found.majority or found.whole or found.stopped or not found.shown or not fields:
        return None
    outliers = set(found.outliers)

    def recorded(rank: int) -> bool:
        return any(f in codes[rank].fields and codes[rank].fields[f].any() for f in fields)

    recorders = [r for r in found.reference if r not in outliers and r in codes and recorded(r)]
    if len(recorders) != 1 or not any(recorded(r) for r in outliers if r in codes):
        return None
    lone = recorders[0]
    theirs = merged(codes[r] for r in found.outliers if r in codes)
    mine, _ = place_edits(lone, codes[lone], theirs, start)
    low = _span(found.placements)[0]
    floor = min((p.score for p in proposal.placements), default=0) - 1
    placements = proposal.placements + [replace(p, score=min(p.score, floor)) for p in mine if p.low <= low]
    if len(placements) == len(proposal.placements):
        return None
    members = {**proposal.members, lone: [lone]}
    return Proposal(placements, sorted(outliers | {lone}), [r for r in found.reference if r != lone], False,
                    proposal.whole, either_side=True, shown=True, members=members)


def _parts_earlier(found: Proposal, proposal: Proposal) -> Proposal | None:
    """Where a richer field parts the very ranks the poorer fields part (the same outliers, the same sides), but at
    an earlier seq: the proposal widened back to there, the richer field's earlier placements beside the poorer
    ones' (scored below them, reaching no later). Both can hold, and neither rules the other out: ranks may issue
    the same collective from different code (call stacks that differ where nothing diverged) and part where the
    signatures do, or issue collectives alike in signature in each other's place (a swap the signatures cannot
    show) where the richer field parts them. So the first divergent collective lies between the two.

    Worked example: ranks 4 and 5, a pair, run all-reduces alike in signature; their call stacks part at seq 1
    (rank 4 issued a layer's MLP before its attention), their signatures at seq 6 (rank 5 issued an all-gather in
    an all-reduce's place). The answer is seq 1..6, not 6."""
    if not found.shown or not proposal.shown or not found.placements or not proposal.placements:
        return None
    if found.stopped or proposal.stopped or set(found.outliers) != set(proposal.outliers):
        return None
    if found.majority != proposal.majority or found.either_side != proposal.either_side:
        return None
    if found.either_side and {frozenset(v) for v in found.members.values()} != {
            frozenset(v) for v in proposal.members.values()}:
        return None  # a split along other lines
    (low, _), (first, high) = _span(found.placements), _span(proposal.placements)
    if low >= first:
        return None
    floor = min(p.score for p in proposal.placements) - 1
    earlier = [replace(p, high=min(p.high, high), score=min(p.score, floor), widest=None)
               for p in found.placements if p.low < first]
    return replace(proposal, placements=proposal.placements + earlier,
                   members={**found.members, **proposal.members})


def _lengths_later(found: Proposal, proposal: Proposal, codes: dict[int, Codes], start: int) -> bool:
    """Whether a richer field that shows ranks departing at a seq (`found`) leaves the ranks whose streams differed
    in length only under the poorer fields (`proposal`) no edit before that seq: their early placements paired only
    lookalikes, which the richer field tells apart, so the first departure the records show is `found`'s, and the
    lengths differ after it (a trace flushed per step, or ranks that stopped). Worked example: rank 1's trace holds
    a step more than the others' (they hung in that step, their results never read back), which signatures alone
    place as extra collectives from seq 2 on; the tags say rank 0 issued seq 3 and 4 in each other's place, and
    rank 1's records pair with the others' tag for tag: rank 0 departed first, at seq 3."""
    low = _span(found.placements)[0]
    named = set(found.outliers)
    reference = [r for r in found.reference if r in codes and r not in named]
    late = [r for r in proposal.outliers if r not in named]
    if not late or any(r not in codes for r in late):
        return False
    for rank in late:
        others = [r for r in reference if r != rank]
        if not others:
            return False
        placed, _ = place_edits(rank, codes[rank], merged(codes[r] for r in others), start)
        if any(p.low < low for p in placed):
            return False
    return True


def _picks_side(found: Proposal, proposal: Proposal, poorer: dict[int, Codes], start: int = 1) -> bool:
    """Whether a richer field's proposal, with a majority, names as its outliers one side of a poorer field's even
    split (either side may have departed there) and places them within where that split did: the richer field
    decides who departed, as a narrowing (the ranks that did not record the poorer field side with either, and the
    richer one counts them). `poorer`: the codes the split was made from, from seq `start` on.

    The side named may be the split's side as grouped, or the ranks of it whose poorer records part it from the
    other side with any that side with either: a group of the split lumps ranks that recorded nothing there with
    one side or the other. Worked example (seed 740944): eight ranks, tags of every collective, call stacks from
    rings that reach back to the parting on ranks 0 and 6 alone; ranks 2 and 6 issued two layers' all-reduces in
    each other's place. The stacks part rank 0 from rank 6, one against one; the tags part ranks 2 and 6 from
    the six others: rank 6's side departed, and rank 2 (no stack there) with it.

    Outliers of the richer field whose every edit lies past the split depart later, apart from it (rank 4 skipped
    a collective three steps on): they say nothing of the split, and the side is judged by the others' edits."""
    if proposal.majority or not proposal.either_side or proposal.stopped or not found.majority or found.stopped:
        return False
    if not found.shown or not found.placements:
        return False
    low, high = _span(proposal.placements)
    early = [p for p in found.placements if p.low <= high]
    if not early or min(p.low for p in early) < low or max(p.high for p in early) > high:
        return False
    # (the groups whose edits all lie past the split are left out of the side named)
    named = {r for p in early for r in found.members.get(p.rank, [p.rank])}
    if any(named == set(ranks) for ranks in proposal.members.values()):
        return True
    # Each group of the split whose records part it from another goes wholly with the side named or wholly with
    # the other (a split of several groups as much as one of two): at least one with the side named, and one not
    # (of two groups, the other may have recorded nothing that parts it: its ranks side with either).
    upto = {r: _cut_at(c, high - start + 1) for r, c in poorer.items()}  # (what parts ranks later is another departure)
    parting = [ranks for ranks in _parting_ranks(proposal, upto) if ranks]
    inside = [ranks for ranks in parting if ranks <= named]
    outside = [ranks for ranks in parting if not ranks & named]
    return bool(inside) and len(inside) + len(outside) == len(parting) and (
        bool(outside) or len(parting) == 1 and len(proposal.members) == 2)


def _cut_at(codes: Codes, length: int) -> Codes:
    """The stream's first `length` records."""
    return Codes({name: values[:length] for name, values in codes.fields.items()}, min(codes.length, length))


def _parting_ranks(proposal: Proposal, codes: dict[int, Codes]) -> list[set[int]]:
    """Per group of a split, its ranks whose records part them from another group's (the rest of that group
    recorded nothing that does: they side with either); empty sets for a split whose groups hold no codes."""
    sides = [[r for r in ranks if r in codes] for ranks in proposal.members.values()]
    if len(sides) < 2 or not all(sides):
        return [set() for _ in sides]
    others = [[merged(codes[o] for o in other) for j, other in enumerate(sides) if j != i] for i in range(len(sides))]
    return [{r for r in side if any(not agree(codes[r], theirs) for theirs in others[i])}
            for i, side in enumerate(sides)]


def _different_then_stopped(codes: dict[int, Codes], proposal: Proposal, start: int,
                            constraints: list[Constraint]) -> list[Placement]:
    """Where streams that differ in length only parted at a seq by their completions (one rank completed it while
    another timed out in its own collective there, `PARTED_COMPLETIONS`): a block of different collectives through
    that seq, on each rank the proposal places edits on, against the rest of the reference. A swap or substitution
    whose pair completes on one side (an all-gather and an all-reduce of equal bytes) leaves the other side stuck
    in it, launching nothing more: its stream ends short, which reads as lengths alone, yet no collective was added
    or left out. Worked example: ranks 2 and 3 swap a layer's all-reduce and the logits' all-gather at seq 13; the
    pair at 13 completes, and at 14 rank 2's all-gather completes while rank 3's all-reduce never does. Rank 3's
    trace stops a step before (its step never finished), so nothing recorded differs: the block may start anywhere
    its trace left unrecorded, up to 14."""
    parted = [s for c in constraints if getattr(c, "label", None) == PARTED_COMPLETIONS for s in c.wrong]
    if not parted:
        return []
    seq = min(parted)
    found: list[Placement] = []
    for rank in dict.fromkeys(p.rank for p in proposal.placements):
        if rank not in codes:
            continue
        mine = set(proposal.members.get(rank, [rank])) | {rank}
        others = [r for r in proposal.reference if r not in mine and r not in proposal.stopped and r in codes]
        if others:
            found += blocks_through(rank, codes[rank], merged(codes[r] for r in others), start, seq)
    return found


def _skips(codes: dict[int, Codes], proposal: Proposal, start: int) -> list[Placement]:
    """Collectives left out anywhere in the records of the ranks that stopped short, against the others'."""
    keep = [r for r in proposal.reference if r not in proposal.stopped]
    if not keep:
        return []
    reference = merged(codes[r] for r in keep)
    skips = [p for rank in proposal.stopped for p in place_edits(rank, codes[rank], reference, start, known=True)[0]
             if p.kind is EditKind.MISSING]
    # The same ranks may instead have run collectives of their own there and then blocked elsewhere: their
    # records, one for one with the others' up to their end, do not tell the two apart.
    return skips + [replace(p, kind=EditKind.EXTRA, score=p.score - 1) for p in skips]


def edits_before_stop(solution: Solution, codes: dict[int, Codes], start: int,
                      constraints: list[Constraint]) -> bool:
    """A stop's explanations widened by the edits its records hide: the end of a rank's records is a cut, so a rank
    whose records agree with the others' up to where it stopped may instead have run a block of collectives of its
    own just before (paired with its peers' regular ones, which its records cannot tell from its own where they
    look alike in everything recorded), or left some out, and then blocked elsewhere. Every such edit its records
    allow (`place_edits`, up to MAX_EDIT; none before a record that is provably the program's own collective there)
    joins the stop, each scored below it (the stop stays the likeliest kind), where every constraint allows it
    (results checked right before it, the gate journal's step, the issue orders). The shorter side of a tie of
    lengths that places the longer side's extra collectives alone (`_ends_of_a_tie`) is reached back from the same
    way, and the range then runs over both sides. Returns whether it widened a stop.

    Worked example (NCCL logs alone): ranks 0 and 1 logged eight all-reduces of 1024 floats, rank 3 six. Rank 3
    stopped after its sixth, or ran two of its own at seq 2 (a drafter pass that pairs with the others' layers) and
    then blocked in another communicator: the answer is seq 1..7, not a stop at 7."""
    stops, keep = solution.placements, list(solution.reference)
    tie = not stops or any(p.kind is not EditKind.STOPPED for p in stops)
    if tie:
        stops, keep = _ends_of_a_tie(solution, codes, start)
    stopped = {r for p in stops for r in solution.members.get(p.rank, [p.rank])}
    keep = [r for r in keep if r in codes and r not in stopped]
    if not stops or not keep:
        return False
    reference = merged(codes[r] for r in keep)
    found: list[Placement] = []
    for stop in stops:
        ranks = [r for r in solution.members.get(stop.rank, [stop.rank]) if r in codes]
        for rank in ranks:
            # (an edit held to where records after it confirm another, `Placement.widest`, reaches back as far as
            # it could where a constraint rules those out, as in `solve`)
            edits = [replace(p, score=min(p.score, stop.score) - 1)
                     for p in _edits_before(stop.rank, codes[rank], reference, start, stop.low, stop.high, held=True)]
            for constraint in constraints:
                edits = _narrowed(edits, constraint)
            found += [replace(p, widest=None) for p in edits if p.low < stop.low and p.low <= p.high]
    solution.placements = solution.placements + found
    # (a tie's two sides: either one departed, and the range runs over both)
    solution.either_side = solution.either_side or tie and bool(found)
    return bool(found)


def _ends_of_a_tie(solution: Solution, codes: dict[int, Codes], start: int) -> tuple[list[Placement], list[int]]:
    """Where streams that agree differ in length only and no majority says which side departed (two ranks), the
    records place the longer side's extra collectives alone; the shorter side may as well have stopped where its
    records end, after an edit of its own among lookalikes. Its stops, each scored below every placement (the
    records' own explanation stays the likeliest kind), for edits_before_stop to reach back from. Worked example:
    rank 5 ran one drafter all-reduce of its own at seq 3, alike in shape to rank 4's layer there, and then blocked
    in the world comm; rank 4 went on to an all-gather at seq 4. By lengths, rank 4 ran one extra at seq 4, or rank
    5 stopped there, or ran one of its own at seq 3 and then stopped: the answer is seq 3..4. Returns the stops and
    the ranks of the longer side, that they are placed against."""
    if solution.shown or solution.majority or not solution.placements \
            or any(p.kind is not EditKind.EXTRA for p in solution.placements):
        return [], []
    ahead = sorted({p.rank for p in solution.placements} & set(codes))
    if not ahead:
        return [], []
    longest = max(codes[r].length for r in ahead)
    floor = min(p.score for p in solution.placements) - 1
    ends = [Placement(r, EditKind.STOPPED, longest - codes[r].length, start + codes[r].length,
                      start + codes[r].length, score=floor)
            for r in solution.reference if r in codes and r not in ahead and codes[r].length < longest]
    return ends, ahead


def _edits_before(rank: int, stream: Codes, reference: Codes, start: int, low: int, high: int,
                  held: bool = False) -> list[Placement]:
    """The collectives left out or added that a stream agreeing with `reference` as far as it goes allows before
    `low` (its records say nothing of where its own departure is), as edits of `rank` that reach no later than
    `high`: what a stop, or a group the stream joined by its length only, may hide before the edit it shows.
    `held`: also those held at or past `low` by records that confirm another edit, that could start before it
    (`Placement.widest`, kept for a constraint that rules the confirmed ones out)."""
    placed, _ = place_edits(rank, stream, reference, start, known=True)
    return [replace(p, high=min(p.high, high), widest=p.widest if held else None) for p in placed
            if p.kind in (EditKind.EXTRA, EditKind.MISSING)
            and (p.low < low or held and p.widest is not None and p.widest < low)]


def _span(placements: list[Placement]) -> tuple[int, int]:
    return min(p.low for p in placements), max(p.high for p in placements)


def _within(inner: Proposal, outer: Proposal) -> bool:
    (a, b), (c, d) = _span(inner.placements), _span(outer.placements)
    return c <= a and b <= d
