"""Per communicator: the first visible mismatch and the root, the first divergent collective.

The first visible mismatch is the first seq whose recorded signatures (op, count, dtype, reduction, root) differ
across ranks; that is what PyTorch's analyzer reports. The root is where the ranks' streams stop being one
program: root.py places every edit the records allow, then narrows by call stacks, tags, steps, checked results
and the gate journal. This module turns a communicator's rows into what root.py compares, and its answer into a
`Root`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum

import numpy as np
import polars as pl

from ..model import EventState, Location
from ..model.kinds import is_p2p_comm
from .comm_streams import CommStreams, comm_streams
from .gates import GateDisagreement
from .root import (
    Codes,
    Contradiction,
    EditKind,
    GateStep,
    PARTED_COMPLETIONS,
    LeftOut,
    ResultChecks,
    Solution,
    edits_before_stop,
    solve,
)
from .recurring_sites import broke_recurring_order, with_their_sides
from .streams import SIGNATURE, Streams, traced
from .traces import grouped_by_traces

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
    # show fits an edit of either side at the same seq (see root.Solution.by_results)
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
    # Counts of dumps of a job that nothing says had stopped: the ranks behind may only lag (align/watchdog.py).
    unstopped: bool = False
    # the other communicators whose ranks disagree too and that nothing on record ranks against this one's: any of
    # them may be where the job diverged first (see consequences.py)
    undecided_comms: tuple[str, ...] = ()
    # Placed by the issue orders, which fit as well a collective the outliers left out before it in these other
    # communicators (their later collectives here each one of those short): either may be the divergence
    left_out_in: tuple[str, ...] = ()
    # The mirror of `left_out_in`: the outliers' issue orders show a collective left out here, on the end of their
    # records here alone, which fits as well extra collectives they ran in these other communicators before they
    # stopped (interleave.early_elsewhere): either may be the divergence
    early_in: tuple[str, ...] = ()
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
    # the seq, where it may have departed itself: named beside them (root.Solution.lone_field)
    lone_field: tuple[str, int, int] | None = None
    # Per-step checksums no expected value checks: the outliers each sum alone beside groups of ranks alike, in the
    # only step their traces hold beside those groups. A rank that reads back more by design (a gather to it) sums
    # apart as well, and no other step shows which it is: they departed, or nothing diverged (align/lone_sums.py).
    may_sum_apart_by_design: bool = False
    # Outliers with no records here at all, known only by PyTorch's count of what they launched (one short, as the
    # outliers beside them are): nothing places their departure, which reaches the range back as far as their count
    # allows (root._hidden_departures)
    counted_only: tuple[int, ...] = ()
    # Of `unplaced_ranks`, those the records of another communicator show departing there (rank -> those
    # communicators): that departure moves where they issue collectives here, so the issue orders place them nowhere
    departed_in: dict[int, tuple[str, ...]] = field(default_factory=dict)

    @property
    def outliers_behind(self) -> list[int]:
        """The outliers, less those that launched more than the rest (`ahead_of_the_rest`): where the root names
        ranks behind, those are they."""
        return [r for r in self.outlier_ranks if r not in self.ahead_of_the_rest]


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
    # ranks whose last launched here is a timeout's SeqNum that no count of enqueued work covers: a floor
    launched_floors: frozenset[int] = frozenset()


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


_MARKS = (
    pl.col("seq").min().alias("first"), pl.col("seq").max().alias("last"),
    pl.col("seq").filter(pl.col("state") == "completed").max().alias("completed"),
    # Only a source that tracks completion (a dump, a watchdog timeout) says anything about what finished.
    pl.col("state").is_in(["started", "completed"]).any().alias("has_state"),
)


def _marked(comm: str, marks: pl.DataFrame) -> CommAnalysis:
    """The analysis of one comm from its ranks' marks (rank, first, last, completed, has_state), root not yet
    found. A rank with states but nothing completed completed what came before its records: a dump keeps the
    latest entries, and a timeout line names the oldest work that did not finish."""
    ranks = marks.get_column("rank").to_list()
    return CommAnalysis(
        comm=comm, ranks=ranks,
        launched=dict(zip(ranks, marks.get_column("last").to_list())),
        completed={r: (c if c is not None else (first - 1 if h else None))
                   for r, first, c, h in marks.select("rank", "first", "completed", "has_state").iter_rows()},
        first_seq=dict(zip(ranks, marks.get_column("first").to_list())),
        has_states=bool(marks.get_column("has_state").any()),
    )



# Fields compared between two ranks' collectives at a pairing, in stages: each stage adds evidence that tells
# collectives of equal signature apart. `stack` is the whole call stack outside torch (`callsite` where a source
# gives only one frame).
STAGES = (("signatures", tuple(SIGNATURE)), ("call sites", ("stack",)), ("tags", ("tag",)), ("steps", ("step",)))


def analyze_comm(streams: Streams, comm: str, gate: GateDisagreement | None = None,
                 behind: set[int] | None = None, counted: dict[int, int] | None = None,
                 left_out: dict[int, tuple[int, int]] | None = None,
                 enqueued: dict[int, int] | None = None, died: bool = False,
                 reported: dict[int, tuple[int, str]] | None = None,
                 held: dict[int, frozenset[int]] | None = None, floors: frozenset[int] = frozenset()) -> CommAnalysis:
    """Launched and completed marks, the first visible mismatch and the root of one communicator.

    `gate`, the first step at which the drafter gates disagreed (if journaled), narrows the root to the
    deviating ranks' records of that step, and says which side of a tie deviated. `behind`: ranks that launched
    fewer than the others of this stopped communicator and did not die (see root.propose). `counted`: ranks whose
    records end at a cut file, with the last seq PyTorch's own count says they enqueued (past the cut): their
    streams go on that far, unrecorded, and end there. `left_out`: ranks among those behind whose issue orders show
    that they left out a collective here somewhere in a range of seqs (root.LeftOut), rank -> that range.
    `enqueued`: PyTorch's count of the work each rank enqueued in this communicator's process group; a rank whose
    records end before a collective others completed (incomplete, as a cut file's are) is counted as far as it.
    `died`: the evidence says a process died (a rank that stopped launching is then the dead one, and its stop
    hides no edit before it). `reported`: rank -> (seq, op) of the last collective a peer's desync report gives a
    rank counted with none of its records kept: its stream holds that op there, else nothing. `held`: ranks the
    completion marks show held back elsewhere by peers ahead here, rank -> those peers (see root.propose).
    `floors`: ranks of `counted` whose count is only a floor of what they launched.
    """
    rows = comm_streams(streams.comm_parts(comm))
    marks = pl.concat([part.select(pl.lit(rank, pl.Int64).alias("rank"), *_MARKS) for rank, part in rows.parts.items()])
    analysis = _marked(comm, marks)
    # (a rank whose records end in a completed collective recorded nothing it launched after: a trace records a
    # collective once it completed, so PyTorch's count past it is work launched and never completed)
    short = _short_of_completions(analysis) | {r for r, last in analysis.launched.items()
                                               if analysis.completed.get(r) == last}
    # (a rank cut short that PyTorch's counts of the comm count no further than its records launched nothing past
    # them: they are whole. Those counts are of the job's end, as they are where every whole rank's records end; a
    # count taken while the job ran on, a dump's, is only a floor)
    whole = {r for r, n in (counted or {}).items() if r in analysis.launched and n == analysis.launched[r]}
    counted = {**{r: n for r, n in (enqueued or {}).items() if r in short}, **(counted or {})}
    unseen = {r: n for r, n in (counted or {}).items() if r not in analysis.launched}  # no records kept
    counted = {r: n for r, n in (counted or {}).items() if r in analysis.launched and n > analysis.launched[r]}
    analysis.counted = {**counted, **unseen}
    analysis.whole = frozenset(whole)
    analysis.held = dict(held or {})
    analysis.floors = frozenset(floors)
    recorded = {r: analysis.launched[r] for r in counted}  # the last seq each counted rank's records hold
    analysis.launched.update(counted)
    ranks = analysis.ranks
    silent = [] if is_p2p_comm(comm) else [r for r in _silent_ranks(streams, comm) if r not in unseen]
    # (p2p streams differ by design: see model/kinds.py)
    if len(ranks) + len(silent) + len(unseen) < 2 or is_p2p_comm(comm):
        return analysis
    # Positions from the earliest record of any rank: a ring that kept fewer entries has nothing recorded before
    # its first one, which pairs with anything, while the others' records there still tell collectives apart.
    start = min(analysis.first_seq.values())
    if max(analysis.first_seq.values()) - start > MAX_GAP:
        start = max(analysis.first_seq.values())  # (positions are seqs: memory stays bounded, as for gaps)
    rows.start = analysis.start = start
    columns, without = _informative_columns(rows)
    analysis.unrecorded = _unrecorded(rows)
    signature = [c for c in SIGNATURE if c in columns]
    book = CodeBook(rows, start, counted)
    ops = _reported_op_codes(rows, book, {r: at for r, at in (reported or {}).items() if r in unseen
                                          and start <= at[0] <= unseen[r]})
    for rank in silent:
        analysis.ranks.append(rank)
        analysis.launched[rank], analysis.first_seq[rank] = 0, start
        analysis.completed[rank] = 0 if analysis.has_states else None
    for rank, n in unseen.items():  # launched up to n by count, none of it on record
        analysis.ranks.append(rank)
        analysis.launched[rank], analysis.first_seq[rank], analysis.completed[rank] = n, start, None
    visible = _first_visible(book.codes(signature)) if signature else None
    if visible is not None:
        analysis.first_visible = start + visible
        analysis.first_visible_ops = ops_at(rows, analysis.first_visible)

    stages, used = [], []
    for label, fields in STAGES:
        added = [c for c in fields if c in columns]
        if not added and used:
            continue
        used = used + added
        stages.append((_stage_label(label, added, without, ranks),
                       lambda fields=tuple(used): book.codes(list(fields)) | _empty_codes(silent, fields)
                       | _blank_codes(unseen, start, fields, ops)))
    deviants = _deviants(gate, ranks)
    prefer = None
    if deviants:
        prefer = EditKind.EXTRA if deviants <= set(gate.passed) else EditKind.MISSING
    # (a rank known by its timeout lines alone may have launched any number past them: its end is no stop)
    timed_out = streams.timeout_only(comm)
    cut = ({rank for (c, rank) in streams.cut if c == comm} | timed_out) - set(counted) - whole
    constraints = (_constraints(rows, start, gate, deviants, analysis.counted)
                   + _parted_completions(rows, start, {r: c for r, c in analysis.completed.items()
                                                       if r not in timed_out}))
    analysis.behind = frozenset(behind or ())
    if left_out:
        constraints.append(LeftOut(dict(left_out)))
        behind = set(behind or ()) | set(left_out)
    incomplete = cut | _short_of_completions(analysis)
    closed = {r for r in ranks if (comm, r) in streams.launch_ends} - incomplete - set(counted)
    elsewhere = {r for c, members in streams.members.items() if c != comm for r in members
                 if not _free_there(streams, c, r)}
    solution = solve(stages, start, constraints,
                     lambda seq: tuple(op.loc for op in ops_at(rows, seq).values()), deviants, prefer, behind, cut,
                     set(counted) | set(unseen), incomplete, set(unseen),
                     lookalikes=not grouped_by_traces(comm), closed=closed, settled=closed - elsewhere,
                     held=analysis.held,
                     reported={r for r, at in (reported or {}).items() if unseen.get(r) == at[0]})
    if solution is not None:
        right = frozenset().union(*(c.right for c in constraints if isinstance(c, ResultChecks)))
        moved = _past_completions(solution, analysis, right)
        # (a rank counted with none of its records kept has recorded nothing from the start on)
        unrecorded_stop = _past_counted(solution, {**recorded, **{r: start - 1 for r in unseen}}, right,
                                        stages[-1][1](), start)
        if not died:
            # (a stop whose records may hide an edit just before it: an extra block among lookalikes, or a skip)
            edits_before_stop(solution, stages[-1][1](), start, constraints)
        # Evidence every rank recorded, in a stage the answer rests on (a stage of some ranks only is labelled
        # with them, and tells the words nothing about the others).
        full = {label for label, _ in STAGES[1:]}
        compared = tuple(label for label in solution.compared if label in full)
        partly = tuple(label for label, _ in STAGES[1:] if label not in compared
                       and any(used.startswith(f"{label} of ranks ") for used in solution.compared))
        analysis.root = replace(_as_root(comm, solution, rows, start), compared=compared,
                                compared_where_recorded=partly)
        if moved and analysis.root.reason is not None:
            analysis.root = replace(analysis.root, reason=RangeReason.PAST_RECORDS)
        elif unrecorded_stop:
            analysis.root = replace(analysis.root, reason=RangeReason.PAST_COUNTED)
        if analysis.counted and not analysis.root.shown:
            # Lengths part the ranks, and some ranks' lengths are PyTorch's counts past their records.
            analysis.root = replace(analysis.root, pinned_by=ENQUEUED_COUNTS)
        analysis.root = _with_unrecorded_members(analysis.root, streams, comm)
        if not analysis.root.majority and "stack" in columns:
            analysis.root = _by_recurring_sites(analysis.root, book, start, stages[-1][1](), solution,
                                                (closed - elsewhere) | (set(counted) - analysis.floors)
                                                | _counted_to_their_end(streams, comm, unseen, analysis.floors))
    return analysis


def _by_recurring_sites(root: Root, book: CodeBook, start: int, codes: dict[int, Codes],
                        solution: Solution | None = None, ended: set[int] = frozenset()) -> Root:
    """A tie of call stacks (the others' records side with either) told apart by the order of call sites the
    program repeats: the side whose run there recurs nowhere else departed (recurring_sites.py). The ranks without
    call stacks join the side their records (`codes`, every field compared) agree with, or where they agree with
    both, the side whose streams end where theirs does (`ended`: ranks whose streams end where their program did),
    else neither; the kind is then the likeliest of that side's edits in `solution`."""
    if root.seq_range is None or root.seq_range[1] is None or len(root.outlier_ranks) < 2:
        return root
    low, high = root.seq_range
    stacks = {rank: recorded.fields["stack"] for rank, recorded in book.codes(["stack"]).items()}
    found = broke_recurring_order(stacks, root.outlier_ranks, max(low, start) - start, high - start)
    if found is None:
        return root
    departed, kept, times = found
    sides = with_their_sides(departed, kept, codes, root.outlier_ranks, ended)
    if sides is None:
        return root
    label = (f"{root.pinned_by}, whose run there on rank{'s' if len(departed) > 1 else ''} "
             f"{', '.join(map(str, departed))} recurs nowhere else in the records and on the other side at {times} "
             f"other places")
    everyone = set(root.outlier_ranks) | set(root.reference_ranks)
    departed, neither = sides[0], sides[2]
    root = _kind_of_side(root, departed, solution)
    return replace(root, outlier_ranks=departed, reference_ranks=sorted(everyone - set(departed) - set(neither)),
                   unplaced_ranks=sorted(set(root.unplaced_ranks) | set(neither)), majority=True,
                   pinned_by=label, narrowed_by=(*root.narrowed_by[:-1], label) if root.narrowed_by else (label,))


def _kind_of_side(root: Root, departed: list[int], solution: Solution | None) -> Root:
    """`root` with the kind and size of the likeliest edit `solution` placed on the side that is `departed` (a tie
    places both sides' edits: one side's extra collective is the other's missing one)."""
    if solution is None:
        return root
    theirs = [p for p in solution.placements if sorted(solution.members.get(p.rank, [p.rank])) == departed]
    if not theirs:
        return root
    ordered = sorted(theirs, key=lambda p: (-p.score, p.size))
    return replace(root, kind=ordered[0].kind.value, size=ordered[0].size,
                   kinds=tuple(dict.fromkeys(p.kind.value for p in ordered)))


def _with_unrecorded_members(root: Root, streams: Streams, comm: str) -> Root:
    """A root that names every rank on record with no majority (nothing says which side ran the program), with
    the members of the communicator that recorded none of its collectives added: a rank whose file was cut before
    them (its other records go on elsewhere, so it is no silent member that launched none here) may have gone
    either way, as every rank that sides with either is named where no majority decides. So may one whose every
    file was cut, where its records elsewhere end no sooner than its peers' there (their files cut alike)."""
    if root.majority or not set(root.outlier_ranks) >= set(root.reference_ranks):
        return root
    cut = {rank for _, rank in streams.cut} | streams.cut_ranks
    elsewhere = {rank for (c, rank), part in streams.parts.items() if c != comm and part.height}
    absent = sorted(r for r in streams.expected_members.get(comm, []) if r not in root.outlier_ranks
                    and r in cut & elsewhere and (comm, r) not in streams.parts and r not in root.unplaced_ranks)
    if not absent:
        return root
    ranks = sorted({*root.outlier_ranks, *absent})
    return replace(root, outlier_ranks=ranks, reference_ranks=ranks)


def _short_of_completions(analysis: CommAnalysis) -> set[int]:
    """Ranks whose records end before a collective another rank completed: NCCL completes none without every
    rank's part, so they launched it, and their records are incomplete."""
    done = {r: c for r, c in analysis.completed.items() if c is not None}
    return {r for r, last in analysis.launched.items()
            if any(c > last for other, c in done.items() if other != r)}


def _past_completions(solution: Solution, analysis: CommAnalysis, right: frozenset[int] = frozenset()) -> bool:
    """A rank whose records stop where others completed collectives after them did not stop there: NCCL completes
    no collective without every rank's part, so it launched every one the others completed, and its records are
    incomplete (a file cut at a line's end, a lost tail). A misaligned pairing completes too, so what it launched
    there is unknown: where it departed is anywhere from its last record on (past the results checked right from
    there, which were aligned) to one past the last collective the others launched. Returns whether it moved a
    stop."""
    if not solution.placements or any(p.kind is not EditKind.STOPPED for p in solution.placements):
        return False
    others = [r for r in analysis.ranks if r not in solution.outliers]
    done = [analysis.completed[r] for r in others if analysis.completed.get(r) is not None]
    if not done or all(p.high > max(done) for p in solution.placements):
        return False
    low = max(done) + 1
    high = max(low, max(analysis.launched[r] for r in others) + 1)
    solution.placements = [replace(p, low=_first_unchecked(p.low, right, high), high=max(p.high, high))
                           if p.high < low else p for p in solution.placements]
    return True


def _past_counted(solution: Solution, recorded: dict[int, int], right: frozenset[int],
                  codes: dict[int, Codes] | None = None, start: int = 1) -> bool:
    """A rank whose stream PyTorch's counts carry past its records (a file cut short) launched collectives there
    that no record shows: the counts say how many, not which, so where it stopped or departed is anywhere from its
    first unrecorded one (past results checked right from there), not only where its count ends. Nor from there
    alone: where the others' collectives just before it look alike in everything recorded, its last records fit
    theirs one seq on as well, so it may have left out (or added) one at the head of that run. Returns whether
    it widened a stop."""
    if not solution.placements or any(p.kind is not EditKind.STOPPED for p in solution.placements):
        return False
    widened = False
    placements = []
    reference = [codes[r] for r in codes or {} if r not in solution.outliers and r not in recorded]
    for p in solution.placements:
        ranks = [r for r in solution.members.get(p.rank, [p.rank]) if r in recorded]
        first = min((_head_of_lookalikes(recorded[r] + 1, reference, start, right, (codes or {}).get(r))
                     for r in ranks), default=None)
        if first is not None and first < p.low:
            p = replace(p, low=_first_unchecked(first, right, p.low))
            widened = True
        placements.append(p)
    solution.placements = placements
    return widened


def _head_of_lookalikes(seq: int, reference: list[Codes], start: int, right: frozenset[int],
                        own: Codes | None = None) -> int:
    """The first seq of the run of collectives that, in every reference stream, look alike in every field up to
    `seq` (`seq` itself where the one before differs, is unrecorded, or had its results checked right). `own`:
    the counted rank's own records; where they lack a field (a log line without the call stack its dump would have
    given), the run goes on while its record there fits the reference's one seq on (or back) as well: what it did
    not record does not tell the two apart."""
    while reference and seq - 1 >= start and seq - 1 not in right:
        at, before = seq - start, seq - 1 - start
        if not (all(at < c.length and all(at < len(v) and v[at] != 0 and v[at] == v[before] for v in c.fields.values())
                    for c in reference) or _fits_shifted(own, before, reference)):
            break
        seq -= 1
    return seq


def _fits_shifted(own: Codes | None, position: int, reference: list[Codes]) -> bool:
    """Whether the rank's record at `position` fits every reference stream's record one position on, or one back,
    in every field both recorded (0: not recorded, which fits anything)."""
    if own is None or position >= own.length:
        return False

    def fits(other: int) -> bool:
        return other >= 0 and all(
            other < c.length and all(
                position < len(mine) and other < len(c.fields.get(name, ())) and (
                    mine[position] == 0 or c.fields[name][other] == 0 or mine[position] == c.fields[name][other])
                for name, mine in own.fields.items())
            for c in reference)
    return fits(position + 1) or fits(position - 1)


def _first_unchecked(seq: int, right: frozenset[int], high: int) -> int:
    """The first seq from `seq` on whose results were not checked right (at most `high`)."""
    while seq in right and seq < high:
        seq += 1
    return seq


COMPARED = (*SIGNATURE, "stack", "tag", "step")  # the fields a pairing compares, for saying which went uncompared


def _unrecorded(rows: CommStreams) -> dict[str, list[int]]:
    """Per field a pairing compares: the ranks that recorded none of it, where other ranks did (a Flight Recorder
    dump carries no reduction or root, an NCCL log no call stack)."""
    found = {}
    for name in COMPARED:
        lacking = [rank for rank, part in rows.parts.items()
                   if name not in part.columns or part.select(pl.col(name).null_count()).item() == part.height]
        if lacking and len(lacking) < len(rows.parts):
            found[name] = lacking
    return found


def _silent_ranks(streams: Streams, comm: str) -> list[int]:
    """Members of `comm` with no records in it that launched none in it as far as their files go: by a dump's group
    config, a rank whose dump kept every collective of theirs from the first on (each of their comms' records
    begins at seq 1, so the ring lost nothing); by an INIT line, a rank whose whole log has collectives of other
    comms (it logged collectives, and none of this one)."""
    on_record = set(streams.members.get(comm, []))
    logged = set(streams.initialized.get(comm, []))
    silent = []
    for rank in sorted(set(streams.expected_members.get(comm, [])) | logged):
        if rank in on_record:
            continue
        theirs = [part for (c, r), part in streams.parts.items() if r == rank and c != comm and part.height]
        if theirs and (rank in logged or all(part.get_column("fr_file").is_not_null().all()
                                             and part.get_column("seq").min() == 1 for part in theirs)):
            silent.append(rank)
    return silent


def _blank_codes(ends: dict[int, int], start: int, fields: tuple[str, ...],
                 ops: dict[int, tuple[int, np.uint64]] | None = None) -> dict[int, Codes]:
    """Streams known only by how far they ran: unrecorded (code 0) from `start` to each end, but for the op
    `ops` gives a rank at a seq (rank -> (seq, its code))."""
    out = {rank: Codes({name: np.zeros(max(0, end - start + 1), dtype=np.uint64) for name in fields},
                       max(0, end - start + 1)) for rank, end in ends.items()}
    for rank, (seq, code) in (ops or {}).items():
        if rank in out and "op" in fields:
            out[rank].fields["op"][seq - start] = code
    return out


def _reported_op_codes(rows: CommStreams, book: CodeBook,
                       reported: dict[int, tuple[int, str]]) -> dict[int, tuple[int, np.uint64]]:
    """rank -> (seq, code) of the op a desync report gives a rank with no records, where some rank's record at
    that seq holds that very op (its code is the record's): a report names ops as PyTorch does, and only one a
    record names alike is compared (one no record holds says nothing the codes can weigh)."""
    out: dict[int, tuple[int, np.uint64]] = {}
    if not reported:
        return out
    codes = book.codes(["op"])
    for rank, (seq, op) in reported.items():
        for other, part in rows.parts.items():
            if "op" not in part.columns or not part.height:
                continue
            found = part.filter((pl.col("seq") == seq) & (pl.col("op") == op))
            position = seq - book.start
            if found.height and position < codes[other].length and codes[other].fields["op"][position]:
                out[rank] = (seq, codes[other].fields["op"][position])
                break
    return out


def _empty_codes(ranks: list[int], fields: tuple[str, ...]) -> dict[int, Codes]:
    return {rank: Codes({name: np.zeros(0, dtype=np.uint64) for name in fields}, 0) for rank in ranks}


def _informative_columns(rows: CommStreams) -> tuple[set[str], dict[str, list[int]]]:
    """Columns that can tell two collectives apart (recorded somewhere, and not one value everywhere), and for
    each the ranks that recorded none of it (a rank whose Flight Recorder dump is missing has no call sites)."""
    wanted = [*SIGNATURE, "stack", "callsite", "tag", "step"]
    present = [c for c in wanted if all(c in part.columns for part in rows.parts.values())]
    ranks = list(rows.parts)
    # Per rank, one query: each column's distinct values (an empty list where the rank recorded none of it).
    values = pl.concat([part.select(pl.col(c).drop_nulls().unique().implode() for c in present)
                        for part in rows.parts.values()]) if present else pl.DataFrame()
    found, without = set(), {}
    for c in present:
        if values.get_column(c).explode().drop_nulls().n_unique() > 1:  # one value, even with gaps, tells nothing
            found.add(c)
            empty = values.get_column(c).list.len() == 0
            without[c] = [r for r, none in zip(ranks, empty.to_list()) if none]
    if "stack" not in found and "callsite" in found:
        found.add("stack")  # a source with one frame only: that frame is the stack it knows
    if "stack" in found:
        without["stack"] = sorted(set(without.get("stack", ranks)) & set(without.get("callsite", ranks)))
    return found, without


def _stage_label(label: str, added: list[str], without: dict[str, list[int]], ranks: list[int]) -> str:
    """`call sites`, or `call sites of ranks 0, 2, 3 (rank 1 without: ...)` where some ranks recorded none: the
    answer rests on the ranks that did (the others constrain nothing there)."""
    lacking = sorted({r for c in added for r in without.get(c, [])})
    if not lacking or not added:
        return label
    carrying = [r for r in ranks if r not in lacking]
    plural = "s" if len(lacking) > 1 else ""
    return (f"{label} of ranks {', '.join(map(str, carrying))} (rank{plural} {', '.join(map(str, lacking))} "
            f"without: compared as far as the others allow)")


class CodeBook:
    """Each rank's records from `start` as codes, one field at a time, kept: the stages of the analysis ask for
    the same fields again (signatures, then signatures and call sites, ...). `ends`: ranks known to have launched
    up to a seq past their records; their streams run to it, unrecorded (code 0) past their last record."""

    def __init__(self, rows: CommStreams, start: int, ends: dict[int, int] | None = None) -> None:
        self.start = start
        self._ends = ends or {}
        self._rows = rows
        self._cache: dict[str, dict[int, np.ndarray]] = {}
        self._parts: dict[int, pl.DataFrame] | None = None

    def _trimmed(self) -> dict[int, pl.DataFrame]:
        if self._parts is None:
            rows, start = self._rows, self.start
            self._parts = {rank: _before_wide_gap(part.filter(pl.col("seq") >= start)
                                                  if rows.first(rank) < start or not rows.contiguous else part)
                           for rank, part in rows.parts.items()}
            self._lengths = {rank: max(0, int(max(part.get_column("seq").max(), self._ends.get(rank, 0)) - start + 1))
                             if part.height else 0 for rank, part in self._parts.items()}
        return self._parts

    def codes(self, fields: list[str]) -> dict[int, Codes]:
        """rank -> its records from `start` as one code per field and position (0: not recorded there, a gap in
        the seqs included). Equal values, equal codes."""
        parts = self._trimmed()
        for name in fields:
            if name not in self._cache:
                self._cache[name] = self._field(parts, name)
        return {rank: Codes({name: self._cache[name][rank] for name in fields}, self._lengths[rank])
                for rank in parts}

    def _field(self, parts: dict[int, pl.DataFrame], name: str) -> dict[int, np.ndarray]:
        column = pl.col(name)
        if name == "stack":
            column = pl.coalesce(pl.col("stack"), pl.col("callsite"))
        code = pl.when(column.is_null()).then(pl.lit(0, pl.UInt64)).otherwise(column.hash() | 1)
        out = {}
        # Rank by rank (a value's hash is the same in any frame): no frame of every rank's rows is built, and a
        # rank's seqs are read only where its positions are not its rows.
        for rank, part in parts.items():
            mine = part.select(code.alias("code")).get_column("code").to_numpy()
            length = self._lengths[rank]
            if part.height == length and self._rows.contiguous:
                out[rank] = mine
            else:
                filled = np.zeros(length, dtype=np.uint64)
                filled[part.get_column("seq").to_numpy() - self.start] = mine
                out[rank] = filled
        return out


MAX_GAP = 65536  # seqs missing in a row past which a stream's later records are not compared (memory stays bounded)
UNBOUNDED = 2 ** 62  # the high end of a span no record bounds


def _before_wide_gap(part: pl.DataFrame) -> pl.DataFrame:
    """The rows before the first gap of more than MAX_GAP seqs: positions are seqs, and a seq far past the others
    (a damaged record) must not cost memory in proportion to it."""
    seqs = part.get_column("seq").to_numpy()
    wide = np.flatnonzero(np.diff(seqs) > MAX_GAP)
    return part.head(int(wide[0]) + 1) if wide.size else part


_UNRECORDED_HIGH = np.uint64(np.iinfo(np.uint64).max)  # an unrecorded code (0) where the smallest is sought


def _first_visible(codes: dict[int, Codes], chunk: int = 65536) -> int | None:
    """The first position where two ranks recorded different values of a field (what a position-by-position
    comparison reports first)."""
    longest = max(c.length for c in codes.values())
    for begin in range(0, longest, chunk):
        end = min(longest, begin + chunk)
        differs = np.zeros(end - begin, dtype=bool)
        for name in next(iter(codes.values())).fields:
            # The largest value and the smallest recorded one (0 is unrecorded) over the ranks, kept as each rank
            # is read: arrays of one chunk, never of every rank's.
            top = np.zeros(end - begin, dtype=np.uint64)
            low = np.full(end - begin, _UNRECORDED_HIGH, dtype=np.uint64)
            for c in codes.values():
                part = c.fields[name][begin:end]
                n = len(part)
                np.maximum(top[:n], part, out=top[:n])
                np.minimum(low[:n], np.where(part == 0, _UNRECORDED_HIGH, part), out=low[:n])
            differs |= (top != 0) & (low != top)
        hit = np.flatnonzero(differs)
        if hit.size:
            return begin + int(hit[0])
    return None


def _deviants(gate: GateDisagreement | None, ranks: list[int]) -> set[int] | None:
    """The ranks the gate journal says ran what the others did not: the minority side of the disagreement, or,
    with no minority, the side that passed."""
    if gate is None:
        return None
    mine = set(ranks)
    deviants = set(gate.outlier_ranks) & mine
    if not deviants and set(gate.skipped) & mine:
        deviants = set(gate.passed) & mine
    return deviants if deviants and deviants != mine else None


def _constraints(rows: CommStreams, start: int, gate: GateDisagreement | None, deviants: set[int] | None,
                 counted: dict[int, int] | None = None) -> list:
    """The evidence beside the records that narrows where the root is: checked results, then the gate's step."""
    checks = result_checks(rows, start)
    constraints: list = [checks] if checks is not None else []
    if gate is not None and deviants:
        spans = {rank: span for rank in deviants if rank in rows.parts
                 and (span := _gate_span(rows.parts[rank], gate, rank)) is not None}
        others = [r for r in rows.parts if r not in deviants]
        reference = _gate_span(rows.parts[others[0]], gate, others[0]) if others else None
        # A deviant whose records end before the step (it never read the step back) launched that step's
        # collectives past them: as far as its count goes, where one does.
        unread = {rank: (end, (counted or {}).get(rank, UNBOUNDED)) for rank, (low, high) in spans.items()
                  if high >= UNBOUNDED and low >= (end := int(rows.parts[rank].get_column("seq").max()) + 1)}
        if spans:
            constraints.append(GateStep(spans, reference, deviants <= set(gate.passed), tuple(gate.locations),
                                        unread=unread))
    return constraints


def result_checks(rows: CommStreams, start: int) -> ResultChecks | None:
    """The seqs (from `start` on) whose results were read back right on every rank that checked them, and those
    read back wrong on some, with where; None where some rank's records carry no checks, or none was checked."""
    if not all("checked" in part.columns for part in rows.parts.values()):
        return None
    frame = rows.frame(start, None, ["seq", "checked", "checked_at"])
    checks = frame.filter(pl.col("checked").is_not_null()).group_by("seq").agg(
        pl.col("checked").all().alias("right"), pl.col("checked_at").filter(~pl.col("checked")).first(),
        pl.col("checked_at").last().alias("any_at"))
    if not checks.height:
        return None
    right = checks.filter(pl.col("right"))
    wrong = checks.filter(~pl.col("right")).sort("seq")
    locs = []
    if wrong.height:
        locs.append(_parse_loc(wrong.get_column("checked_at")[0]))
    if right.height:
        locs.append(_parse_loc(right.sort("seq").get_column("any_at")[-1]))
    return ResultChecks(frozenset(right.get_column("seq").to_list()), frozenset(wrong.get_column("seq").to_list()),
                        tuple(locs))


ROOTLESS_OPS = ("AllReduce", "AllGather", "ReduceScatter")


def _parted_completions(rows: CommStreams, start: int, completed: dict[int, int | None]) -> list[ResultChecks]:
    """Seqs some rank completed while another timed out in its own collective there: NCCL completes a collective
    without a root (all-reduce, all-gather, reduce-scatter) on every rank of it or on none, so those two were
    different collectives, misaligned at or before that seq (a watchdog timeout row, `started` and no dump's
    entry, ran out its timeout and never finished; a rooted one's root may finish before the others).
    `completed` leaves out ranks known by their own timeout lines alone: PyTorch's word that a rank held at a later
    SeqNum completed this one records nothing of it, and a rank that sent its last part finishes before a peer
    whose receive waits on the network or on a rank with no lines here: that is a hang, not two collectives."""
    stuck = rows.frame(start, None, ["rank", "seq", "op", "state", "fr_file", "file", "line"]).filter(
        (pl.col("state") == EventState.STARTED.value) & pl.col("fr_file").is_null()
        & pl.col("op").is_in(list(ROOTLESS_OPS)))
    wrong, locs = set(), []
    for rank, seq, _, _, _, file, line in stuck.rows():
        done = completed.get(rank)
        if done is not None and done < seq and any(c is not None and c >= seq for r, c in completed.items()
                                                   if r != rank):
            wrong.add(seq)
            locs.append(Location(file, line))
    return [ResultChecks(frozenset(), frozenset(wrong), tuple(locs), label=PARTED_COMPLETIONS)] if wrong else []


def _gate_span(part: pl.DataFrame, gate: GateDisagreement, rank: int) -> tuple[int, int] | None:
    """The seqs a rank's collectives of the gate's step may cover: by the steps its records carry, and after the
    time of its decision (the drafter's collectives follow the decision that launched them; both times are read
    from one host's clock)."""
    span = _step_span(part, gate.step) if "step" in part.columns else None
    decision = gate.decisions.get(rank)
    times = part.select("seq", "time").drop_nulls()
    if decision is not None and decision.time is not None and times.height:
        first, last = times.get_column("time").min(), times.get_column("time").max()
        if first <= decision.time <= last + 3600:  # the same clock, not another timebase
            # (after the last record known to come before it: a record with no time may come after it; with none,
            # anywhere from the first seq, since records that begin later, a ring that wrapped, may begin past it)
            before = times.filter(pl.col("time") < decision.time - _half_last_digit(decision.time)).get_column(
                "seq").max()
            low = before + 1 if before is not None else 1
            high = span[1] if span else int(part.get_column("seq").max()) + 1
            span = (max(low, span[0]) if span else low, high)
    return span if span is None or span[0] <= span[1] else None


def _half_last_digit(value: float) -> float:
    """Half a unit of the last decimal a time was written with: a decision written to the millisecond may have
    been made up to half a millisecond before it (repr gives the shortest decimal that reads back as the value,
    so a time written with trailing zeros counts as written coarser, which only widens)."""
    text = repr(float(value))
    if "e" in text or "." not in text:
        return 0.5
    return 0.5 * 10.0 ** -len(text.split(".")[1])


def _step_span(part: pl.DataFrame, step: int) -> tuple[int, int] | None:
    """The seqs a rank's collectives of `step` may cover: after its last record of an earlier step, before its
    first of a later one (a step whose results were never read back has no step on its last records). None where
    no record of the rank is tied to a step. A trace records a collective once its result was read back: where
    it holds nothing of the step or later (the rank hung in it), the step's collectives go on past its end, as
    many as it launched, which no record counts."""
    steps = part.select("seq", "step").drop_nulls()
    if steps.height == 0:
        return None
    before = steps.filter(pl.col("step") < step).get_column("seq").max()
    after = steps.filter(pl.col("step") > step).get_column("seq").min()
    low = (before + 1) if before is not None else int(part.get_column("seq").min())
    last = int(part.get_column("seq").max())
    unread = traced(part) and before is not None and before == last
    high = (after - 1) if after is not None else UNBOUNDED if unread else last + 1
    return (low, high) if low <= high else None


def _parse_loc(text: str | None) -> Location:
    path, _, line = (text or "").rpartition(":")
    return Location(path, int(line)) if line.isdigit() else Location(text or "")


def _as_root(comm: str, solution: Solution, rows: CommStreams, start: int) -> Root:
    """The solution as a Root: its range, the likeliest kind and size, and why it is a range."""
    low, high = solution.named_range
    best = solution.best
    reason = None
    # (outliers known by their counts alone whose edits alone reach the range's low end)
    counted_only = tuple(sorted({p.unrecorded for p in solution.placements
                                 if p.unrecorded is not None and p.low <= low}))
    if any(p.low <= low for p in solution.placements if p.unrecorded is None):
        counted_only = ()
    if high >= UNBOUNDED:
        reason, high = RangeReason.UNREAD_STEP, None
    elif low != high:
        reason = RangeReason.BEFORE_RECORDS if low < start else RangeReason.LOOKALIKE
        if reason is RangeReason.LOOKALIKE and solution.parted_earlier is not None:
            reason = RangeReason.PARTED_EARLIER
        elif reason is RangeReason.LOOKALIKE and solution.lone_field is not None:
            reason = RangeReason.LONE_FIELD
        elif reason is RangeReason.LOOKALIKE and counted_only:
            reason = RangeReason.COUNTED_ONLY
    return Root(
        comm=comm, seq=low, seq_range=(low, high), outlier_ranks=solution.leading,
        reference_ranks=solution.reference, kind=best.kind.value, size=best.size, pinned_by=solution.pinned_by,
        reason=reason, ops=ops_at(rows, max(low, start)), majority=solution.majority,
        kinds=tuple(k.value for k in solution.kinds), narrowed_by=tuple(solution.narrowed_by),
        contradictions=tuple(solution.contradictions), departs_again=solution.departs_again, records_start=start,
        shown=solution.shown, told=solution.told, by_results=solution.by_results,
        unplaced_ranks=list(solution.unplaced),
        parted_earlier=solution.parted_earlier, lone_field=solution.lone_field,
        counted_only=counted_only if reason is RangeReason.COUNTED_ONLY else (),
    )


def _counted_to_their_end(streams: Streams, comm: str, unseen: dict[int, int], floors: frozenset[int]) -> set[int]:
    """The ranks counted with none of their records of `comm` kept (`unseen`) whose count is all they launched
    there: it is no floor (`floors`), and no other communicator on record may hold them back. A peer's desync
    report that says `[1, 2] finished collective #23, but didn't join collective #24` counts all rank 2 launched
    (its watchdog would have seen a next one start), unless another communicator's collective held its GPU: one
    whose records of the rank are whole and say its last collective there completed held nothing; one that names
    the rank a member with none of its records there, or whose members are known only by their records (any rank
    may be one), may have. Such a rank's stream ends where its program did, as a whole log's does."""
    others = {streams.aliases.get(c, c) for c in (*streams.members, *streams.expected_members)} - {comm}

    def held_elsewhere(rank: int) -> bool:
        return any(not _free_there(streams, c, rank) if (c, rank) in streams.parts
                   else rank in streams.expected_members.get(c, ()) or c not in streams.expected_members
                   for c in others)

    return {rank for rank in unseen if rank not in floors and not held_elsewhere(rank)}


def _free_there(streams: Streams, comm: str, rank: int) -> bool:
    """Whether nothing in `comm` held `rank`: its records there are whole (they end with a launch in a format that
    records every launch, in a file not cut short) and say its last collective there completed. Such a rank was
    blocked in no collective of `comm`: where it is in no other communicator that held it, its stream in the one
    analysed ends where its program stopped, as a rank's in no other communicator does (`settled`)."""
    if (comm, rank) not in streams.launch_ends:
        return False
    part = streams.parts.get((comm, rank))
    if part is None or part.height == 0:
        return False
    return part.get_column("state")[-1] == "completed" or _completed_by_a_peer(streams, comm, part)


def _completed_by_a_peer(streams: Streams, comm: str, part: pl.DataFrame) -> bool:
    """Whether a peer's records say the collective that ends `part` completed (an NCCL log records launches only):
    a collective every member feeds (an all-reduce: no rank's result is whole before all joined) that completed on
    one member was joined by every member, so none was held in it."""
    seq, op = part.get_column("seq")[-1], part.get_column("op")[-1]
    if op not in ROOTLESS_OPS:
        return False
    for (c, _), peer in streams.parts.items():
        if c != comm or peer is part or "state" not in peer.columns:
            continue
        last = peer.filter(peer.get_column("seq") == seq)
        if last.height and last.get_column("op")[-1] == op and last.get_column("state")[-1] == "completed":
            return True
    return False
