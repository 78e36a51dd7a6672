"""What the analysis of one communicator answers, as values: each rank's collective at a seq (`OpAt`), the root
(`Root`, why it is a range: `RangeReason`) and the communicator's summary (`CommAnalysis`). Built by divergence.py
and the modules that revise a root; worded in report/.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from ..model import Location
from .comm_streams import CommStreams
from .edits import EditKind
from .solution import Contradiction

ENQUEUED_COUNTS = "PyTorch's enqueued counts"  # the label of an answer resting on PyTorch's count of enqueued work


EXTRA, MISSING, DIFFERENT_OPS, STOPPED = (EditKind.EXTRA.value, EditKind.MISSING.value, EditKind.DIFFERENT.value,
                                          EditKind.STOPPED.value)


class RangeReason(str, Enum):
    """Why a root is a range rather than one seq (report/ambiguity.py says it in words)."""

    LOOKALIKE = "lookalike"  # collectives in the range look alike in everything recorded
    BEFORE_RECORDS = "before_records"  # the records begin after the streams already disagree
    COUNTS = "counts"  # only launch counts are known (which ranks launched more or fewer, not which collectives)
    TYPE_COUNTS = "type_counts"  # RAS counts per collective type: nothing places the root in launch order
    NO_DATA = "no_data"  # the outliers left no data at all (missing from RAS)
    STEP_SUMS = "step_sums"  # per-step checksums only: the step is known, the collective is on no record
    PAST_RECORDS = "past_records"  # a rank's records stop before collectives the others completed with it
    UNWRITTEN_STEP = "unwritten_step"  # traces not written as far as their ranks got: they part past the others' step
    UNWRITTEN_ENDS = "unwritten_ends"  # traces not written as far as their ranks got, and nothing parts them: lengths alone
    PAST_COUNTED = "past_counted"  # a rank's records stop before what PyTorch's counts say it launched
    UNREAD_STEP = "unread_step"  # the deviants' records end before the gate's step: the root is past them
    LAST_OPS = "last_ops"  # a desync report's snapshot: ranks whose last collectives, of one number, differ in type
    PARTED_EARLIER = "parted_earlier"  # a richer field parts the same ranks earlier than the signatures do
    LONE_FIELD = "lone_field"  # a richer field of one reference rank alone parts it from the outliers: both named
    COUNTED_ONLY = "counted_only"  # an outlier with no records here, known by its count alone: it departed anywhere
    UNPINNED = "unpinned"  # an outlier's records lack the field that pins its group's departure: its own is anywhere


@dataclass(frozen=True)
class OpAt:
    """One rank's collective at one seq, with where it was read."""

    rank: int
    seq: int
    op: str | None
    count: int | None
    dtype: str | None
    redop: str | None
    root: int | None
    state: str | None
    callsite: str | None
    step: int | None
    loc: Location
    fr_loc: Location | None = None
    stack: str | None = None  # every frame outside torch, innermost first, " < " between them

    def signature(self) -> tuple:
        """What NCCL compares when it pairs collectives (and what must be equal for them to pair cleanly)."""
        return (self.op, self.count, self.dtype, self.redop, self.root)

    def describe(self) -> str:
        """`AllReduce 4096 x float32` style text."""
        parts = [self.op or "?"]
        if self.count is not None:
            parts.append(f"{self.count} x {self.dtype or '?'}")
        if self.callsite:
            parts.append(f"from {self.callsite}")
        return " ".join(parts)


@dataclass(frozen=True)
class HeldBack:
    """Where the completion marks say the ranks behind wait, and where each side issued the collective."""

    group: str  # the other group the ranks behind wait in
    work: int  # the work there that every member launched and none completed
    issued_after: int  # collectives of that group the outliers issued before the root's last seq
    program_after: int  # the fewest collectives of their own groups the other groups' ranks completed before it
    program_ranks: tuple[int, ...]  # those ranks
    # whether the outliers' call stack of that collective (in their timeout lines) differs from those ranks':
    # None where some stack is not on record or they differ among themselves
    stacks_part: bool | None = None
    seq: int | None = None  # the collective pending here that the ranks ahead issued early (None: the last seq)


@dataclass(frozen=True)
class IssueSides:
    """The two sides of issue orders that part a communicator's ranks evenly (align/issue_order_ties.py): either
    may have departed, the early one by an extra block here (or collectives left out in `Root.left_out_in`), the
    later one by as many left out here (or run in `elsewhere` before the root's last seq)."""

    early: tuple[int, ...]  # the ranks that issued the root's last seq after fewer of their other comms' collectives
    later: tuple[int, ...]  # those that issued it after more
    elsewhere: tuple[str, ...] = ()


@dataclass(frozen=True)
class Root:
    """The first divergent collective of one communicator."""

    comm: str
    seq: int | None  # earliest seq it can be; None where the evidence places it nowhere (RAS type counts)
    seq_range: tuple[int, int | None] | None  # (low, None): at low or later, where nothing bounds it above
    outlier_ranks: list[int]
    reference_ranks: list[int]  # the ranks the outliers departed from (the majority, or the other side)
    kind: str  # extra | missing | different | stopped
    size: int  # collectives gained or lost
    pinned_by: str  # the last evidence that narrowed it: "signatures", "call sites", "tags", "steps", ...
    reason: RangeReason | None  # why it is a range, when it is
    ops: dict[int, OpAt] = field(default_factory=dict)
    majority: bool = True  # False when no rank group is a strict majority
    kinds: tuple[str, ...] = ()  # every edit kind the evidence leaves, likeliest first (`kind` is the first)
    narrowed_by: tuple[str, ...] = ()  # each evidence that narrowed the records' range, in order
    contradictions: tuple[Contradiction, ...] = ()
    departs_again: bool = False  # the outlier's stream departs again after the root (no single edit explains it)
    records_start: int = 1  # the first seq every rank of the comm has records for
    shown: bool = False  # a record differs (in any field) between outliers and reference, not only their lengths
    # shown only by results read back wrong: the records differ in length only, and the misalignment the results
    # show fits an edit of either side at the same seq (see solution.Solution.by_results)
    by_results: bool = False
    told: bool = False  # the records agree; the edit is placed only because the gate journal names the outliers
    counts_by_type: dict[str, dict[int, int]] = field(default_factory=dict)  # type -> rank -> launched (RAS)
    step_bound: int | None = None  # per-step checksums: the step the results part at; the root is in it or before
    compared: tuple[str, ...] = ()  # the evidence beyond signatures its records were compared by ("call sites", ...)
    # ... and the evidence compared only between the ranks that recorded it (call stacks of dumps beside logs)
    compared_where_recorded: tuple[str, ...] = ()
    # Placed by the ranks' issue order across communicators (align/interleave.py): rank -> collectives of its other
    # communicators it issued before the root's seq, and the ranks that launched fewer here, held back elsewhere.
    issue_places: dict[int, int] = field(default_factory=dict)
    blocked_elsewhere: tuple[int, ...] = ()
    # ... and ranks that launched more than the reference, whose own issue orders place an extra collective of
    # theirs (align/ran_ahead.py): rank -> the seqs where it may be; with them, `issue_seq` is the seq whose places
    # `issue_places` gives (the range reaches past it to theirs)
    ran_ahead: dict[int, tuple[int, int]] = field(default_factory=dict)
    issue_seq: int | None = None
    # ... and ranks that issued the root's seq where the reference did and then nothing anywhere, while the
    # reference went on past it though it never completed (interleave.with_stops_past_the_program): the program
    # does not wait on it, so theirs was another collective, one they wait on
    stopped_past: tuple[int, ...] = ()
    # Counts only, the outliers behind, in a job with other communicators: they may be held back in another one by
    # a rank ahead here that launched one more (see report/ambiguity.py), which counts cannot tell apart.
    behind_may_be_held: bool = False
    # ... and the ranks ahead here that may have launched that one more: each shares some other communicator with
    # every outlier, as far as the record goes (empty where no membership on record says)
    may_be_held_back_by: tuple[int, ...] = ()
    # Counts only, in three or more steps (align/held_back.py behind_in_chain): the ranks ahead of the outliers but
    # behind the rest. One that launched an extra collective here waits in it for the peers it holds back, so it
    # launches no further while ranks of other groups go on past it; each may be that one.
    behind_the_rest: tuple[int, ...] = ()
    # The same, where some ranks launched more than the rest, most ranks, did: an extra collective of theirs here
    # (holding peers back or not), a departure the steps below need besides their own. Where the counts part ranks
    # both ahead of the rest and behind it in one step each (ras_only.root_from_counts), whose departure came first
    # is not known: those ahead are outliers too, named here apart from the ranks behind.
    ahead_of_the_rest: tuple[int, ...] = ()
    # Placed by PyTorch's completion marks in the ranks' other groups (align/held_back.py): the ranks behind wait
    # there, held back by the outliers' extra collective.
    held_back: HeldBack | None = None
    # Placed by launch counts against how far each rank's gate journal got (align/journal_progress.py): rank -> the
    # last step it journaled.
    journal_steps: dict[int, int] = field(default_factory=dict)
    # ranks whose records are incomplete and end before the outliers and the reference part: on neither side
    unplaced_ranks: list[int] = field(default_factory=list)
    # Counts of dumps of a job that nothing says had stopped: the ranks behind may only lag (align/marks_only.py).
    unstopped: bool = False
    # the other communicators whose ranks disagree too and that nothing on record ranks against this one's: any of
    # them may be where the job diverged first (see consequences.py)
    undecided_comms: tuple[str, ...] = ()
    # Placed by the issue orders, which fit as well a collective the outliers left out before it in these other
    # communicators (their later collectives here each one of those short): either may be the divergence
    left_out_in: tuple[str, ...] = ()
    # The mirror of `left_out_in`: the outliers' issue orders show a collective left out here, on the end of their
    # records here alone, which fits as well extra collectives they ran in these other communicators before they
    # stopped (left_out_here.early_elsewhere): either may be the divergence; comm -> the outliers that may have run
    # early there (its members only)
    early_in: dict[str, tuple[int, ...]] = field(default_factory=dict)
    # Placed by the issue orders of another communicator (comm, seq): the outliers issued that seq there after
    # fewer of this one's collectives than the program, and went on past where its next one there comes without
    # issuing it, so they left collectives out here before it (align/left_out_before.py)
    left_out_before: tuple[str, int] | None = None
    # Counts only: ranks whose counts here part from the majority's as the outliers' do, but that depart in another
    # communicator too (rank -> those communicators), so their count here may follow from that departure or be one
    # of their own; the outliers are the ranks that depart here alone (see consequences.departing_elsewhere).
    outlier_candidates: dict[int, tuple[str, ...]] = field(default_factory=dict)
    # Records that begin after the ranks already disagree, with counts: ranks whose counts part as a departure
    # before the records would, but that wait in another communicator (rank -> those communicators): held back
    # there by a peer, or departed here first and then stopped; the counts read the same, so each is a candidate.
    waiting_candidates: dict[int, tuple[str, ...]] = field(default_factory=dict)
    # (field, seq, seq): a richer field ("call sites") parts the outliers from the reference at the first seq, the
    # poorer fields only at the second; the root is between them (richer_fields.parts_earlier)
    parted_earlier: tuple[str, int, int] | None = None
    # (field, rank, seq): a richer field that only this rank of the reference recorded parts it from the outliers at
    # the seq, where it may have departed itself: named beside them (solution.Solution.lone_field)
    lone_field: tuple[str, int, int] | None = None
    # Per-step checksums no expected value checks: the outliers each sum alone beside groups of ranks alike, in the
    # only step their traces hold beside those groups. A rank that reads back more by design (a gather to it) sums
    # apart as well, and no other step shows which it is: they departed, or nothing diverged (align/lone_sums.py).
    may_sum_apart_by_design: bool = False
    # Of those: the root rests on expected sums that part ranks every one of which read its sum back right, where no
    # record gives their comms (step_sums._expected_apart): the outliers launched other collectives than the ranks
    # they expected alike with in another step, or are of another class that reads back other data by design
    # (replicas serving other requests), which nothing here tells apart.
    expected_apart_reading_right: bool = False
    # Outliers with no records here at all, known only by PyTorch's count of what they launched (one short, as the
    # outliers beside them are): nothing places their departure, which reaches the range back as far as their count
    # allows (hidden_edits.hidden_departures)
    counted_only: tuple[int, ...] = ()
    # Outliers that joined a group by their length alone, whose records lack the field that pins the group's
    # departure (at seq_range[0]..`pinned_through`): their own departure is anywhere their records allow, as far as the
    # range reaches (hidden_edits.unpinned_departures)
    unpinned: tuple[int, ...] = ()
    pinned_through: int | None = None
    # Of `unplaced_ranks`, those the records of another communicator show departing there (rank -> those
    # communicators): that departure moves where they issue collectives here, so the issue orders place them nowhere
    departed_in: dict[int, tuple[str, ...]] = field(default_factory=dict)
    # Ranks whose places in the issue orders begin past where those part the ranks (rank -> the first seq placed: a
    # ring that dropped its oldest entries): sided by their count and later places, or, where those fit both sides or
    # neither, among `unplaced_ranks` (interleave._placed_late)
    placed_late: dict[int, int] = field(default_factory=dict)
    # Placed by issue orders that part the ranks evenly (align/issue_order_ties.py): which rank is on which side
    issue_sides: IssueSides | None = None
    # RAS counts per type that no one program gives, of a communicator whose records agree wherever they overlap: the
    # departure is where no record of the outliers reaches (ras_only._unordered_types_root)
    beyond_records: bool = False

    @property
    def outliers_behind(self) -> list[int]:
        """The outliers, less those that launched more than the rest (`ahead_of_the_rest`): where the root names
        ranks behind, those are they."""
        return [r for r in self.outlier_ranks if r not in self.ahead_of_the_rest]


@dataclass(frozen=True)
class CountedProgress:
    """One rank's launched and completed in one comm where PyTorch's lines go past its records."""

    rank: int
    comm: str
    launched: int  # the last seq it launched, records and counts together
    completed: int | None  # the last seq it completed (None: nothing says)
    # it completed no more, for one of two reasons, else the counts are floors of where it got: it waits in the next
    # one (a timeout of its own), or it launched nothing more (a peer's desync report saw it finish its last and join
    # no next one), which says nothing of a next one: only the first waits in it
    waits_next: bool
    launched_no_more: bool
    launched_floor: bool  # `launched` is only known to reach this far (a timeout's SeqNum, a desync snapshot's start)
    at: tuple[Location, ...]  # the lines that give the counts
    records_launched: int  # what the records alone say
    records_completed: int | None
    records_at: Location | None  # the record where they end (the last one at or before records_launched)

    @property
    def final(self) -> bool:
        """It completed no more than `completed`: it waits in the next one, or launched nothing more."""
        return self.waits_next or self.launched_no_more


@dataclass
class CommAnalysis:
    """What the streams of one communicator say."""

    comm: str
    ranks: list[int]
    launched: dict[int, int]  # last seq launched, per rank
    completed: dict[int, int | None]  # last seq completed per rank; None where no source records completion
    first_seq: dict[int, int]
    first_visible: int | None = None
    first_visible_ops: dict[int, OpAt] = field(default_factory=dict)
    root: Root | None = None
    has_states: bool = False
    start: int = 1  # the first seq every rank has records for
    # fields some ranks recorded and others did not (field -> the ranks without): compared only where both did
    unrecorded: dict[str, list[int]] = field(default_factory=dict)
    # ranks whose records end where a file was cut short, with the last seq PyTorch counts them enqueueing
    counted: dict[int, int] = field(default_factory=dict)
    # ranks whose records end where a file was cut short, that PyTorch counts no further: their records are whole
    whole: frozenset[int] = frozenset()
    # ranks analysed as behind (root.propose): they launched fewer than the others of this stopped communicator
    behind: frozenset[int] = frozenset()
    # ranks PyTorch's completion marks show held back in another group by peers that issued their next collective
    # here early (held_back.held_back_ranks): rank -> those peers
    held: dict[int, frozenset[int]] = field(default_factory=dict)
    # ranks of `counted` whose count is only a floor of what they launched (a desync report's snapshot)
    floors: frozenset[int] = frozenset()
    # ranks of `counted` whose count a desync report shows is all they launched (they finished and joined no next)
    exact: frozenset[int] = frozenset()
    # ranks whose last launched here is a timeout's SeqNum that no count of enqueued work covers: a floor
    launched_floors: frozenset[int] = frozenset()
    # ranks whose launched or completed above are PyTorch's counts past their records (with_counted_progress): the
    # counts, the lines that give them and what the records alone say
    raised: dict[int, CountedProgress] = field(default_factory=dict)


def op_at(row: dict) -> OpAt:
    """An OpAt from one merged row (a dict from iter_rows(named=True))."""
    fr = Location(row["fr_file"], None, row["fr_record"]) if row.get("fr_file") else None
    return OpAt(
        rank=row["rank"], seq=row["seq"], op=row["op"], count=row["count"], dtype=row["dtype"],
        redop=row["redop"], root=row["root"], state=row["state"], callsite=row["callsite"], step=row["step"],
        loc=Location(row["file"], row["line"], row["record"]), fr_loc=fr, stack=row.get("stack"),
    )


def ops_at(rows: CommStreams, seq: int) -> dict[int, OpAt]:
    """Each rank's collective at `seq` (ranks that never launched it are absent)."""
    return {row["rank"]: op_at(row) for row in rows.rows_at(seq)}
