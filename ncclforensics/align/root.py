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

from ..model import Location
from .edits import MAX_EDIT, Codes, EditKind, Placement, agree, blocks_through, merged, place_edits
from .left_out_tags import LEFT_OUT_TAGS, told_by_left_out_tags
from .propose import Proposal, propose, span_of, within
from .richer_fields import lengths_later, lone_recorder_tie, one_side, parted_sooner, parts_earlier, picks_side

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
    # only at the second (see richer_fields.parts_earlier); the range runs from one to the other
    parted_earlier: tuple[str, int, int] | None = None
    # (field, rank, seq): a richer field that parts the outliers from this one rank of the reference alone, the only
    # one that recorded it, at that seq, where no one edit explains them against it: it is named beside them, since it
    # may have departed itself (see richer_fields.lone_recorder_tie)
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
            # A member of a later group whose own records place its edit (they lack the field that places the
            # group's: an NCCL log beside a peer's call stacks) may have departed as early as the leading ones.
            # Worked example: ranks 1 and 0 each skipped an all-reduce alike in signature, rank 1 at seq 8 and rank
            # 0 at seq 9 by their call stacks; rank 5, one short too, kept an NCCL log only and joins rank 0's
            # group, yet may have skipped seq 8 as rank 1 did: it stays named.
            early = {m: span for m, span in self._member_spans().items() if span[0] <= high and m not in keep}
            named = [r for r in self.outliers if r in keep or r in early]
            if named:
                return named, max([spans[rep][1] for rep in leading] + [last for _, last in early.values()])
        return self.outliers, max(last for _, last in spans.values())

    def _member_spans(self) -> dict[int, tuple[int, int]]:
        """member -> the span of its likeliest edits, for members whose own records alone place theirs
        (`Placement.member`)."""
        top: dict[int, float] = {}
        for p in self.placements:
            if p.member is not None:
                top[p.member] = max(top.get(p.member, p.score), p.score)
        spans: dict[int, tuple[int, int]] = {}
        for p in self.placements:
            if p.member is not None and (p.kind is EditKind.STOPPED or p.score >= top[p.member]):
                low, last = spans.get(p.member, (p.low, p.high))
                spans[p.member] = (min(low, p.low), max(last, p.high))
        return spans

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


PARTED_COMPLETIONS = "completions"  # the label of results parted by completions (see constraints.parted_completions)
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
    rank 1 departed later (no longer forced onto a whole period of extra collectives at seq 1, which also fits).

    Where no outlier's likeliest edits misalign every wrong result alone, but theirs together do, each outlier is
    held to the right results alone, where its records say. Worked example (982848): rank 4 swapped seq 3 and 4, rank
    7 left out seq 5, every result from seq 3 on read back wrong. The swap misaligns 3 and 4, the skip 5 on; neither
    all of them, so each alone would be forced onto a whole period of extra collectives at seq 3, naming rank 7
    beside rank 4 as departing there."""
    top = {rank: max(p.score for p in placements if p.rank == rank) for rank in kept}
    leaders = {rank for rank, mine in kept.items() if any(p.score == top[rank] for p in mine)}
    right_only = replace(constraint, wrong=frozenset())
    if not leaders:
        likeliest = [n for rank in kept for n in _narrowed(
            [p for p in placements if p.rank == rank and p.score == top[rank]], right_only)]
        if all(any(_misaligns(p, seq) for p in likeliest) for seq in constraint.wrong):
            return {rank: _narrowed([p for p in placements if p.rank == rank], right_only) for rank in kept}
    explaining = leaders or {rank for rank, mine in kept.items() if mine}
    out = dict(kept)
    for rank, mine in kept.items():
        if rank in leaders or not explaining - {rank} or (mine and not leaders):
            continue
        out[rank] = _narrowed([p for p in placements if p.rank == rank], right_only)
    return out


def _misaligns(placement: Placement, seq: int) -> bool:
    """Whether some edit of `placement` misaligns the collective at `seq`: a shift everything from it on, a block of
    different collectives itself alone, a stop nothing (nothing after it completes)."""
    if placement.kind in (EditKind.EXTRA, EditKind.MISSING):
        return placement.low <= seq
    if placement.kind is EditKind.DIFFERENT:
        return placement.low <= seq < placement.high + placement.size
    return False


# -- one answer ---------------------------------------------------------------------------------------------------


def solve(code_stages: list[tuple[str, Callable[[], dict[int, Codes] | None]]], start: int,
          constraints: list[Constraint], basis: Callable[[int], tuple[Location, ...]],
          deviants: set[int] | None = None, prefer: EditKind | None = None,
          behind: set[int] | None = None, cut: set[int] | None = None,
          ended: set[int] | None = None, incomplete: set[int] | None = None,
          unseen: set[int] | None = None, lookalikes: bool = True, closed: set[int] | None = None,
          settled: set[int] | None = None, held: dict[int, frozenset[int]] | None = None,
          reported: set[int] | None = None) -> Solution | None:
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
        found = propose(codes, start, deviants, behind, cut, ended, incomplete, unseen, closed, settled, held,
                        reported)
        if found is None or not found.placements:
            continue
        if proposal is not None:
            found = one_side(found, proposal, codes)
        # Records that differ beat streams that differ in length only (a trace flushed per step, a cut), where
        # they depart no later: the first departure is theirs.
        earlier = found.shown and not proposal.shown and (span_of(found.placements)[0] <= span_of(
            proposal.placements)[0] or lengths_later(found, proposal, codes, start)) \
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
        if picks_side(found, proposal, chosen, start):
            # A poorer field that only some ranks recorded split them evenly; a richer one more of them recorded
            # names one side of that split as a minority: it says who departed, within where.
            proposal, pinned_by, compared, chosen = found, label, list(stages), codes
            narrowed.append(label)
            continue
        if (wider := parts_earlier(found, proposal)) is not None:
            # A richer field parts the same ranks before the poorer ones do: either may say where they diverged.
            # (where its records part nobody sooner, the widening is of lookalikes, and says no more than they do)
            parted_earlier = (label, span_of(found.placements)[0], span_of(proposal.placements)[0]) \
                if parted_sooner(codes, chosen) else None
            proposal, compared, chosen = wider, list(stages), codes
            widened = proposal
            continue
        if set(found.outliers) != set(proposal.outliers) or not within(found, proposal):
            continue  # a field that moves the answer rather than narrowing it is not trusted
        if (tie := lone_recorder_tie(found, proposal, codes, added_fields, start)) is not None:
            # The richer field parts the outliers from one rank of the reference alone (the rest recorded none of
            # it), and no one edit explains their streams against it: that rank may have departed itself.
            proposal, compared, chosen = tie, list(stages), codes
            lone_field = (label, *[r for r in tie.outliers if r not in found.outliers], span_of(found.placements)[0])
            tied = tie
            continue
        if span_of(found.placements) != span_of(proposal.placements):
            narrowed.append(label)
            pinned_by = label
        proposal, compared, chosen = found, list(stages), codes
    told = told_by_left_out_tags(proposal, richest, start) if proposal is not None else None
    if told is not None:
        # A tie whose named ranks' own records of a step leave out a tag the steps repeat: those departed, where
        # those records say (no edit their streams may hide before it: their own records place it).
        proposal, chosen, pinned_by = told, richest, LEFT_OUT_TAGS
        narrowed.append(LEFT_OUT_TAGS)
    if proposal is None:
        proposal = _misaligned_lookalikes(richest, start, constraints) if lookalikes else None
        if proposal is None:
            return None
        pinned_by, compared, chosen = "fingerprints", list(stages), richest
    hidden = _hidden_departures(proposal, chosen, start, unseen) if told is None else []
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
        if span_of(kept) != span_of(solution.placements):
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
            found += [replace(p, score=min(p.score, floor), unrecorded=unrecorded, member=rank)
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


