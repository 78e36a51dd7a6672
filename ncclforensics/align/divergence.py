"""Per communicator: the first visible mismatch and the root, the first divergent collective.

The first visible mismatch is the first seq whose recorded signatures (op, count, dtype, reduction, root) differ
across ranks; that is what PyTorch's analyzer reports. The root is where the ranks' streams stop being one
program: root.py places every edit the records allow, then narrows by call stacks, tags, steps, checked results
and the gate journal. This module runs that for one communicator: codes.py turns its rows into what root.py
compares, constraints.py the evidence beside them into constraints, and the answer becomes a `Root` (answers.py).
"""

from __future__ import annotations

from dataclasses import replace

import polars as pl

from ..model.kinds import is_p2p_comm
from .answers import ENQUEUED_COUNTS, CommAnalysis, RangeReason, Root, ops_at
from .codes import (MAX_GAP, CodeBook, blank_codes, empty_codes, first_visible_seq, informative_columns,
                    reported_op_codes, silent_ranks, unrecorded_fields)
from .comm_streams import CommStreams, comm_streams
from .constraints import (UNBOUNDED, completed_by_a_peer, evidence_constraints, gate_deviants, parted_completions,
                          past_completions, past_counted, short_of_completions)
from .edits import Codes, EditKind
from .gates import GateDisagreement
from .hidden_edits import edits_before_stop
from .narrowing import LeftOut, ResultChecks
from .recurring_sites import broke_recurring_order, with_their_sides
from .root import solve
from .solution import Solution
from .streams import SIGNATURE, Streams
from .traces import grouped_by_traces

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
                 held: dict[int, frozenset[int]] | None = None, floors: frozenset[int] = frozenset(),
                 exact: frozenset[int] = frozenset(), places: dict[int, Codes] | None = None) -> CommAnalysis:
    """Launched and completed marks, the first visible mismatch and the root of one communicator.

    `gate`, the first step at which the drafter gates disagreed (if journaled), narrows the root to the
    deviating ranks' records of that step, and says which side of a tie deviated. `behind`: ranks that launched
    fewer than the others of this stopped communicator and did not die (see root.propose). `counted`: ranks whose
    records end at a cut file, with the last seq PyTorch's own count says they enqueued (past the cut): their
    streams go on that far, unrecorded, and end there. `left_out`: ranks among those behind whose issue orders show
    that they left out a collective here somewhere in a range of seqs (narrowing.LeftOut), rank -> that range.
    `enqueued`: PyTorch's count of the work each rank enqueued in this communicator's process group; a rank whose
    records end before a collective others completed (incomplete, as a cut file's are) is counted as far as it.
    `died`: the evidence says a process died (a rank that stopped launching is then the dead one, and its stop
    hides no edit before it). `reported`: rank -> (seq, op) of the last collective a peer's desync report gives a
    rank counted with none of its records kept: its stream holds that op there, else nothing. `held`: ranks the
    completion marks show held back elsewhere by peers ahead here, rank -> those peers (see root.propose).
    `floors`: ranks of `counted` whose count is only a floor of what they launched; `exact`: those whose count a
    desync report shows is all they launched. `places`: where each rank issued its collectives here among its other
    communicators' (issue_orders.place_codes), which side a rank whose records agree with several groups (propose).
    """
    rows = comm_streams(streams.comm_parts(comm))
    marks = pl.concat([part.select(pl.lit(rank, pl.Int64).alias("rank"), *_MARKS) for rank, part in rows.parts.items()])
    analysis = _marked(comm, marks)
    # (a rank whose records end in a completed collective recorded nothing it launched after: a trace records a
    # collective once it completed, so PyTorch's count past it is work launched and never completed)
    short = short_of_completions(analysis) | {r for r, last in analysis.launched.items()
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
    analysis.floors, analysis.exact = frozenset(floors), frozenset(exact)
    recorded = {r: analysis.launched[r] for r in counted}  # the last seq each counted rank's records hold
    analysis.launched.update(counted)
    ranks = analysis.ranks
    silent = [] if is_p2p_comm(comm) else [r for r in silent_ranks(streams, comm) if r not in unseen]
    # (p2p streams differ by design: see model/kinds.py)
    if len(ranks) + len(silent) + len(unseen) < 2 or is_p2p_comm(comm):
        return analysis
    # Positions from the earliest record of any rank: a ring that kept fewer entries has nothing recorded before
    # its first one, which pairs with anything, while the others' records there still tell collectives apart.
    start = min(analysis.first_seq.values())
    if max(analysis.first_seq.values()) - start > MAX_GAP:
        start = max(analysis.first_seq.values())  # (positions are seqs: memory stays bounded, as for gaps)
    rows.start = analysis.start = start
    columns, without = informative_columns(rows)
    analysis.unrecorded = unrecorded_fields(rows)
    signature = [c for c in SIGNATURE if c in columns]
    book = CodeBook(rows, start, counted)
    ops = reported_op_codes(rows, book, {r: at for r, at in (reported or {}).items() if r in unseen
                                          and start <= at[0] <= unseen[r]})
    for rank in silent:
        analysis.ranks.append(rank)
        analysis.launched[rank], analysis.first_seq[rank] = 0, start
        analysis.completed[rank] = 0 if analysis.has_states else None
    for rank, n in unseen.items():  # launched up to n by count, none of it on record
        analysis.ranks.append(rank)
        analysis.launched[rank], analysis.first_seq[rank], analysis.completed[rank] = n, start, None
    visible = first_visible_seq(book.codes(signature)) if signature else None
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
                       lambda fields=tuple(used): book.codes(list(fields)) | empty_codes(silent, fields)
                       | blank_codes(unseen, start, fields, ops)))
    deviants = gate_deviants(gate, ranks)
    prefer = None
    if deviants:
        prefer = EditKind.EXTRA if deviants <= set(gate.passed) else EditKind.MISSING
    # (a rank known by its timeout lines alone may have launched any number past them: its end is no stop)
    timed_out = streams.timeout_only(comm)
    cut = ({rank for (c, rank) in streams.cut if c == comm} | timed_out) - set(counted) - whole
    constraints = (evidence_constraints(rows, start, gate, deviants, analysis.counted)
                   + parted_completions(rows, start, {r: c for r, c in analysis.completed.items()
                                                       if r not in timed_out}))
    analysis.behind = frozenset(behind or ())
    if left_out:
        constraints.append(LeftOut(dict(left_out)))
        behind = set(behind or ()) | set(left_out)
    incomplete = cut | short_of_completions(analysis)
    closed = {r for r in ranks if (comm, r) in streams.launch_ends} - incomplete - set(counted)
    elsewhere = {r for c, members in streams.members.items() if c != comm for r in members
                 if not _free_there(streams, c, r)}
    solution = solve(stages, start, constraints,
                     lambda seq: tuple(op.loc for op in ops_at(rows, seq).values()), deviants, prefer, behind, cut,
                     set(counted) | set(unseen), incomplete, set(unseen),
                     lookalikes=not grouped_by_traces(comm), closed=closed, settled=closed - elsewhere,
                     held=analysis.held,
                     reported={r for r, at in (reported or {}).items() if unseen.get(r) == at[0]},
                     places=places)
    if solution is not None:
        right = frozenset().union(*(c.right for c in constraints if isinstance(c, ResultChecks)))
        moved = past_completions(solution, analysis, right)
        # (a rank counted with none of its records kept has recorded nothing from the start on)
        unrecorded_stop = past_counted(solution, {**recorded, **{r: start - 1 for r in unseen}}, right,
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
                                                | _counted_to_their_end(streams, comm, unseen, analysis.exact))
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
    unpinned, placed = solution.unpinned_named
    if reason is RangeReason.LOOKALIKE and unpinned:
        reason = RangeReason.UNPINNED
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
        unpinned=tuple(unpinned) if reason is RangeReason.UNPINNED else (),
        pinned_through=placed if reason is RangeReason.UNPINNED else None,
    )


def _counted_to_their_end(streams: Streams, comm: str, unseen: dict[int, int], exact: frozenset[int]) -> set[int]:
    """The ranks counted with none of their records of `comm` kept (`unseen`) whose count is all they launched
    there: a desync report says so (`exact`; a count of `last enqueued` lines or of a dump taken while the job ran
    on may be a floor), and no other communicator on record may hold them back. A peer's desync
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

    return {rank for rank in unseen if rank in exact and not held_elsewhere(rank)}


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
    return part.get_column("state")[-1] == "completed" or completed_by_a_peer(streams, comm, part)
