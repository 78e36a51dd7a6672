"""What the evidence allows about one communicator's root (`Solution`), and the contradictions found on the way.

`solve` (root.py) builds a Solution; the answers (answers.py) and the reports read it. It is apart from the solver
so that what an answer holds, and how its range and leading outliers are read off its placements, stand on their
own.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..model import Location
from .edits import EditKind, Placement


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
    # edits of members joined by their length only that their own records allow after the group's placements end
    # (hidden_edits.unpinned_departures): they move no first departure, but a range naming them reaches them
    unpinned: list[Placement] = field(default_factory=list)
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
    # the last seq the reference's records hold, where they hold all it launched here and nothing elsewhere held it
    # (it stopped where its program did); `settled`: the ranks of whom the same holds. Ranks of one program stop
    # at one place, so a settled outlier that agrees with the reference through that seq and runs on past it was
    # elsewhere in the program: it may have left out the collective there (what it launched next meets nothing)
    reference_end: int | None = None
    settled: frozenset[int] = frozenset()

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

    @property
    def unpinned_named(self) -> tuple[list[int], int]:
        """The named members whose own records (`unpinned`) reach the range past where the placements do, and the
        last seq the placements reach."""
        named, last = self._leading_placed()
        placed = max(self.seq_range[1], last)
        return sorted(r for r, (_, high) in self._unpinned_spans().items() if r in named and high > placed), placed

    def _leading(self) -> tuple[list[int], int]:
        """The leading outliers, and the last seq where their likeliest explanations place a departure, or a named
        member's own records place its departure (`unpinned`: one named beside its group, whose records pin the
        group's departure and not its own, may have departed anywhere its records allow)."""
        named, last = self._leading_placed()
        return named, max([last, *(high for rank, (_, high) in self._unpinned_spans().items() if rank in named)])

    def _unpinned_spans(self) -> dict[int, tuple[int, int]]:
        """member -> the span of its likeliest edits among `unpinned`."""
        top: dict[int, float] = {}
        for p in self.unpinned:
            top[p.rank] = max(top.get(p.rank, p.score), p.score)
        spans: dict[int, tuple[int, int]] = {}
        for p in self.unpinned:
            if p.score >= top[p.rank]:
                low, last = spans.get(p.rank, (p.low, p.high))
                spans[p.rank] = (min(low, p.low), max(last, p.high))
        return spans

    def _leading_placed(self) -> tuple[list[int], int]:
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
        if self.reference_end is not None:
            # A settled outlier whose likeliest edits all lie past the settled reference's records ran on where they
            # stopped; it may as well have skipped their last collective (`reference_end`): it departed there at the
            # latest, not after it.
            end = self.reference_end
            spans = {rep: (end, last) if low > end and set(self.members.get(rep, [rep])) <= self.settled
                     else (low, last) for rep, (low, last) in spans.items()}
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
