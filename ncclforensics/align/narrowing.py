"""The evidence beside the records that narrows placements, as `Constraint`s, and how it narrows them.

Results checked against their expected value (`ResultChecks`), the step at which the drafter gates disagreed
(`GateStep`) and the ranks' issue orders across communicators (`LeftOut`) each allow part of a placement; `apply`
keeps what one of them allows, or says it allows nothing (a contradiction). constraints.py and divergence.py
build them from the records, and `solve` (root.py) applies them: they are apart from the solver, which only
applies them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Protocol

from ..model import Location
from .edits import EditKind, Placement


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
    kept = {rank: narrowed([p for p in placements if p.rank == rank], constraint) for rank in ranks}
    if joint and getattr(constraint, "wrong", None):
        kept = _later_departures(placements, constraint, kept)
    if not all(kept.values()):
        return None
    return [p for rank in ranks for p in kept[rank]]


def narrowed(theirs: list[Placement], constraint: Constraint) -> list[Placement]:
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
        likeliest = [n for rank in kept for n in narrowed(
            [p for p in placements if p.rank == rank and p.score == top[rank]], right_only)]
        if all(any(_misaligns(p, seq) for p in likeliest) for seq in constraint.wrong):
            return {rank: narrowed([p for p in placements if p.rank == rank], right_only) for rank in kept}
    explaining = leaders or {rank for rank, mine in kept.items() if mine}
    out = dict(kept)
    for rank, mine in kept.items():
        if rank in leaders or not explaining - {rank} or (mine and not leaders):
            continue
        out[rank] = narrowed([p for p in placements if p.rank == rank], right_only)
    return out


def _misaligns(placement: Placement, seq: int) -> bool:
    """Whether some edit of `placement` misaligns the collective at `seq`: a shift everything from it on, a block of
    different collectives itself alone, a stop nothing (nothing after it completes)."""
    if placement.kind in (EditKind.EXTRA, EditKind.MISSING):
        return placement.low <= seq
    if placement.kind is EditKind.DIFFERENT:
        return placement.low <= seq < placement.high + placement.size
    return False
