"""`choose_root`: which divergence a diagnosis names as its root, of those the kinds of evidence offer.

The streams offer a root first. Among communicators with a root, the cause rather than its consequences
(consequences.py: a rank stuck in one communicator stops launching in the others it belongs to); then records that
differ beat lengths that differ, which beat a root only the gate journal places, and collectives gained or changed
beat collectives missing or stopped. Where the streams' root rests on lengths only, RAS counts of a communicator of
its odd ranks that no two ranks' whole records compare may be its cause by the nesting rule, as they would be were
that one's records whole: those counts take its place (causes.py).

With no root from the streams, counts give one: RAS counts, else PyTorch's enqueued counts and desync reports; of
those, the first communicator that is no consequence of another, since counts alone never say which diverged
first. Gate journals that agree on every decision still say how far each rank got, and narrow a root on RAS counts.
Where launch counts of one communicator, in a job with others, show ranks behind, those may be held back elsewhere
rather than short of a collective: counts cannot tell the two apart, and the root says so.

Per-step checksums come next. Streams that show nothing leave them the word (results mixed in some step), and
counts that place nothing leave them the say on who else departed (where they name no one, the ranks the counts
left together whose checksums part from the rest of them). Records alike in everything recorded, whose results
were misaligned, name every rank on either side; PyTorch's counts, where a minority launched more or fewer, say
which. Records that begin after the ranks already disagree say who differs there; PyTorch's counts, then the
checksums, may show others that launched more or fewer before it. Records cut before the sides part place no one
there; the checksums of the step they part at may. Records that part the ranks where they do leave out a rank that
left a collective out among lookalikes: its checksums, parting from the others', add it, anywhere up to its last record.

A root on lengths alone (a stop, records alike) names as candidates beside it the other communicators whose results
fingerprint traces read back wrong (mixed_elsewhere.py): they diverged, and a rank stuck there stops launching here.

The gate journal comes last, as it only splits a tie the rest leave: with no majority (a two-rank comm), it may say
which side deviated. Where that root stopped launching while peers report a remote process gone, its ranks are the
dead ones.
"""
from __future__ import annotations

from collections import Counter

from dataclasses import dataclass, replace

import polars as pl

from ..model import EventState, FingerprintRow, GateDecision, WatchdogEvent
from .causes import comm_choice_notes, enqueued_cause, pick_counted, ras_counted_cause, unseen_causes
from .compared_alike import departures_bounded
from .consequences import Disagreement, consequences, kept_outer, odd_behind, odd_ones, other_side, ran_ahead
from .counted_places import peer_issued_early, went_past_unissued, with_early_by_counts
from .counts_beside_records import short_of_records, with_counted_outliers, with_counted_past_records
from .enqueue_marks import EnqueueMarks
from .answers import DIFFERENT_OPS, ENQUEUED_COUNTS, EXTRA, MISSING, STOPPED, CommAnalysis, RangeReason, Root
from .gates import GateDisagreement, tie_resolved_by_gate
from .group_places import members_by_places
from .held_back import ahead_where_stuck, behind_in_chain, held_back_elsewhere, held_back_root, may_hold_back
from .journal_progress import with_journal_progress
from .lookalike_ties import alike_on_record, counted_among_lookalikes, parted_reference
from .marks_only import marks_only_roots
from .mixed_elsewhere import mixed_elsewhere
from .notes import Note
from .past_hang import with_ranks_past_hang
from .ras import RasHistory, job_processes
from .ras_only import ras_only_roots, unnamed_ranks, with_swapped_types
from .comms_apart import comms_by_rank
from .step_sums import step_sums_root
from .streams import Streams
from .snapshot_sides import with_snapshot_sides
from .sums_beside import (with_checksum_outliers, with_parted_reference, with_sums_before_records,
                          with_sums_beside_records, with_sums_placing_cut_ranks)
from .waiting import waiting_elsewhere
from .waiting_past_records import with_waiting_past_records
from .watchdog import timeout_stacks


@dataclass(frozen=True)
class Choice:
    """The root the evidence names, and what choosing it leaves for the rest of the diagnosis."""

    root: Root | None
    notes: tuple[Note, ...] = ()  # what the choice rests on, in the order the steps found it
    sums_step: int | None = None  # the step of a root the per-step checksums gave, where the steps before were right
    counted_cause: tuple[Root, list[Note]] | None = None  # RAS counts that took the streams' root's place, and why
    dead: frozenset[int] = frozenset()  # ranks the root shows dead: it stopped launching where a process died


def choose_root(analyses: dict[str, CommAnalysis], streams: Streams, gate: GateDisagreement | None, *,
                gates: list[GateDecision], ras: dict[str, RasHistory], rank_map: dict[tuple[str, int], int],
                marks: dict[str, EnqueueMarks], watchdog: list[WatchdogEvent], fingerprints: list[FingerprintRow],
                stops: dict[str, list[str]], cut_files: set[str], died: bool,
                guessed: frozenset[str] = frozenset(), cut_steps: dict[str, int] | None = None) -> Choice:
    """The root the evidence names (None where none offers one), and what the choice adds to the diagnosis.
    `stops`: comm -> what shows that it stopped rather than merely lagging; `cut_files`: the paths of the files cut
    short; `cut_steps`: path -> the step a trace cut short had begun in its last line (a floor); `died`: whether the evidence says a process died (RAS missing or dead ranks, peers' remote-process
    errors); `guessed`: the comms whose roots rest on trace records placed by a guess (traces.resting_on_guesses)."""
    root, comm_notes = _pick_root(analyses, gate, streams, guessed)
    counted_cause = None
    if root is not None and not root.shown:
        counted_cause = ras_counted_cause(root, analyses, streams, ras, rank_map, stops)
        if counted_cause is not None:
            root, comm_notes = counted_cause
        else:
            root, comm_notes = enqueued_cause(root, analyses, streams, marks, watchdog, stops) or (root, comm_notes)
    if root is None:
        root, comm_notes = pick_counted(ras_only_roots(ras, rank_map, streams, stops)
                                        or marks_only_roots(marks, streams, watchdog, stopped=bool(stops)),
                                        job_processes(ras))
        if root is not None and root.pinned_by == "RAS counts":
            comm_notes += unnamed_ranks(root.comm, ras, rank_map)
        if root is not None and root.pinned_by == "RAS counts" and (gate is None or not gate.outlier_ranks):
            # Journals that agree on every decision still say how far each rank got.
            named = {rank for (comm, _), rank in rank_map.items() if comm == root.comm}
            root = with_journal_progress(root, gates, named) or root
        counted_comms = {streams.aliases.get(c, c) for c in marks}
        if root is not None and ({*ras, *counted_comms, *streams.members} - {root.comm}):
            groups = _memberships(streams, ras, rank_map, marks)
            # Counts in three steps or more: ranks furthest behind, held back by a peer that launched one more
            # and, stuck in it, launched no further while the rest went on past it.
            levels = _counted_levels(root, ras, rank_map, marks, streams)
            if levels is not None:
                counts, floors, whole = levels
                root = behind_in_chain(root, counts, groups, floors, whole) or root
            if root.kind == MISSING:
                # Launch counts of one communicator, in a job with others: the ranks behind may be held back
                # elsewhere.
                root = replace(root, behind_may_be_held=True, may_be_held_back_by=may_hold_back(root, groups))
    notes = list(comm_notes)
    sums_step = None
    known = _known(streams)
    on_record = frozenset(r for ranks in streams.members.values() for r in ranks)

    def sums_root():
        return step_sums_root(fingerprints, known, on_record,
                              frozenset(f.rank for f in fingerprints if f.loc.path in cut_files),
                              comms_by_rank(streams.initialized),
                              {f.rank: (cut_steps or {})[f.loc.path] for f in fingerprints
                               if f.loc.path in (cut_steps or {})})

    if root is None or root.reason in (RangeReason.COUNTS, RangeReason.TYPE_COUNTS):
        # Streams that show nothing leave the checksums' word (results mixed in some step); counts that place
        # nothing leave them the say on who else departed.
        found = sums_root()
        said = []
        if found is not None and root is None:
            root, sums_step = found
        elif found is not None:
            placed = frozenset(r for group in marks if streams.aliases.get(group, group) == root.comm
                               for r in members_by_places(watchdog, group))
            root, said = with_checksum_outliers(root, found[0], fingerprints, on_record, placed)
            notes += said
        if root is not None and root.reason is RangeReason.COUNTS and not said:
            # Checksums that name no side (none, or every rank with no majority) may still part the ranks the
            # counts left together: they departed too.
            root, said = with_parted_reference(root, fingerprints, known, on_record)
            notes += said
    elif root.reason is RangeReason.BEFORE_RECORDS:
        # Records that begin after the ranks already disagree say who differs there; PyTorch's counts may show
        # that a rank issued the records' collective early (its record then says nothing of the program), or
        # others that launched more or fewer before it.
        root, said = with_early_by_counts(root, marks, streams)
        notes += said
        counted = [r for r, _ in marks_only_roots(marks, streams, watchdog) if r.comm == root.comm]
        if counted:
            stuck = waiting_elsewhere(streams, root.comm, marks)
            held = _held_before_records(root, marks, streams, stuck)
            launched = _counts_of(root.comm, marks, streams)
            short = short_of_records(root, launched, {rank for (comm, rank), part in streams.parts.items()
                                                      if comm == root.comm and part.height},
                                     _memberships(streams, ras, rank_map, marks))
            root, said = with_counted_outliers(root, counted[0], held, short - held, launched)
            notes += said
            # Ranks the counts part that wait elsewhere are left out as held back; yet one that departed here
            # before the records and then stopped, waiting in another communicator, leaves the same counts (a
            # twin incident with its departure undone writes the same logs): each stays a candidate.
            waiting = sorted(held & _counts_apart(root.comm, marks, streams) - set(root.outlier_ranks))
            if waiting:
                root = replace(root, waiting_candidates={r: tuple(sorted(stuck[r])) for r in waiting})
        found = sums_root()
        if found is not None:
            root, said = with_sums_before_records(root, found[0], fingerprints)
            notes += said
    elif not root.majority and set(root.outlier_ranks) == set(root.reference_ranks) and alike_on_record(root, streams):
        # Records alike in everything recorded, results misaligned: every rank is named, as no record says who
        # departed (over lookalikes, or at the one seq the checked results pin); PyTorch's counts, where a minority
        # launched more or fewer, say it.
        counted = [r for r, _ in marks_only_roots(marks, streams, watchdog) if r.comm == root.comm]
        if counted:
            held = _held_before_records(root, marks, streams)
            # (where the rest of the ranks part evenly in their records, nothing says who departed)
            parted = parted_reference(root, (set(root.outlier_ranks) - set(counted[0].outlier_ranks)) | held, streams)
            if parted is not None:
                root, said = counted_among_lookalikes(root, counted[0], held, parted)
                notes += said
    elif root.unplaced_ranks and root.comm in analyses:
        # Records cut before the sides part place no one there; the checksums of the step they part at may.
        found = sums_root()
        if found is not None:
            root, said = with_sums_placing_cut_ranks(root, found[0], analyses[root.comm].launched,
                                                     fingerprints)
            notes += said
    elif root.shown and root.majority and root.comm in analyses:
        # PyTorch's counts that go on past the records may part ranks whose records end alike: they departed too.
        counted = [r for r, _ in marks_only_roots(marks, streams, watchdog) if r.comm == root.comm]
        if counted:
            launched = _counts_of(root.comm, marks, streams)
            bounded = departures_bounded(root.comm, set(counted[0].outlier_ranks) - set(root.outlier_ranks),
                                         [r for r in root.reference_ranks if r not in counted[0].outlier_ranks],
                                         launched, streams)
            root, said = with_counted_past_records(root, counted[0], _recorded_ends(root.comm, streams),
                                                   _held_before_records(root, marks, streams), bounded,
                                                   carried=analyses[root.comm].counted)
            notes += said
        # Ranks of the reference whose records end before the sides part, counted short, that wait elsewhere: held
        # back there, or departed here past their records and then stopped; the counts read the same.
        root = with_waiting_past_records(root, _counts_of(root.comm, marks, streams), _recorded_ends(root.comm, streams),
                                         waiting_elsewhere(streams, root.comm, marks))
        # Ranks whose checksums part where their records show no departure (a collective left out among lookalikes)
        # departed too, somewhere no record shows.
        found = sums_root() if fingerprints else None
        if found is not None:
            whole = {r: end for r, end in _recorded_ends(root.comm, streams).items()
                     if (root.comm, r) not in streams.cut}
            root, said = with_sums_beside_records(root, found[0], whole, on_record)
            notes += said
    if root is not None and root.majority and root.comm in analyses:
        # Ranks that left no file, which a peer's desync report or PyTorch's counts put in the comm: the snapshot
        # sides them, and one it cannot side may make the outliers half the ranks.
        launched = _counts_of(root.comm, marks, streams)
        unfiled = set(launched) - {r for _, r in streams.parts} - {r for g in marks.values() for r in g.counted_at}
        root, said = with_snapshot_sides(root, launched, _last_ops_of(root.comm, marks, streams), unfiled,
                                         _held_before_records(root, marks, streams) if unfiled else set())
        notes += said
    if root is not None and root.comm in analyses:
        # Records of the reference that run on past a collective hanging on every rank, where most stop: they
        # departed too.
        root, said = with_ranks_past_hang(root, analyses[root.comm], streams)
        notes += said
    if root is not None and root.shown and root.comm in ras:
        # Records that part ranks where they do, beside RAS counts of as many collectives of other types: those
        # ranks departed too, somewhere no record shows.
        root, said = with_swapped_types(root, ras[root.comm], rank_map)
        notes += said
    if root is not None and not died:
        # Records that differ in length only, results read back wrong: PyTorch's completion marks in the other
        # groups may say that the ranks behind are held back there by a peer's extra collective here.
        root = _held_back_by_marks(root, marks, streams, watchdog)
    if root is not None and not died:
        # Ranks behind whose records differ from the others' in length only may be held back by a peer elsewhere.
        root = _held_back_by_peers(root, analyses, _memberships(streams, ras, rank_map, marks))
    dead: frozenset[int] = frozenset()
    if root is not None:
        # Results read back mixed in another communicator: it diverged too, and a root on lengths alone may be
        # what a rank stuck there left here.
        root, said = mixed_elsewhere(root, streams, fingerprints)
        notes += said
        # Ranks ahead that may hold the ranks behind back may have left collectives of the communicator they share
        # out, rather than launched an extra one here: that one is a candidate too.
        root, said = held_back_elsewhere(root, _memberships(streams, ras, rank_map, marks))
        notes += said
        root = tie_resolved_by_gate(root, gate)
        if root.kind == STOPPED and died:
            # A rank that stopped launching while its peers report a remote process gone is the dead one.
            dead = frozenset(root.outlier_ranks)
    return Choice(root, tuple(notes), sums_step, counted_cause, dead)


def _held_back_by_marks(root: Root, marks: dict[str, EnqueueMarks], streams: Streams,
                        watchdog: list[WatchdogEvent]) -> Root:
    """A root whose outliers are behind in records that differ in length only, shown misaligned by results read
    back wrong, read against PyTorch's completion marks in the ranks' other groups (held_back.held_back_root): a
    wrong result at a seq fits a rank behind that left a collective out there and a rank ahead that ran an extra
    one there alike, and the marks may say the ranks behind wait in another group, held back by it. Unchanged
    where they do not, or where the ranks behind are not behind by the marks too."""
    if not root.by_results or root.kind != MISSING or root.seq_range is None or root.seq_range[1] is None:
        return root
    counted = {streams.aliases.get(name, name): g for name, g in marks.items()
               if g.source == ENQUEUED_COUNTS and g.stops}
    if root.comm not in counted:
        return root
    held = held_back_root(root, {name: g.launched for name, g in counted.items()},
                          {name: g.completed for name, g in counted.items()}, timeout_stacks(watchdog))
    if held is None:
        return root
    # (the results bound an extra collective of the ranks ahead as they bound the one the ranks behind left out)
    low, high = max(root.seq_range[0], held.seq_range[0]), min(root.seq_range[1], held.seq_range[1])
    return replace(held, seq=low, seq_range=(low, high)) if low <= high else root


def _held_back_by_peers(root: Root, analyses: dict[str, CommAnalysis],
                        groups: dict[str, tuple[set[int], int]]) -> Root:
    """A root whose outliers launched fewer than the others, where their records differ from the others' in length
    only (a stop, or collectives left out among lookalikes), with what else reads the same: a rank runs its
    collectives in issue order across its communicators, so a peer of theirs in another communicator that launched
    one more here, alike to the program's next, keeps them waiting there (they launch no more here), while ranks of
    other groups that got further launch their next one here, which pairs with the extra one. Their stop is then
    the peer's departure, and the records cannot tell the two apart: the root names the ranks ahead that may have
    launched it (held_back.may_hold_back). Unchanged where something already placed who departed (issue orders,
    completion marks, gate journals) or where no rank ahead shares another communicator with each outlier."""
    if root.kind not in (STOPPED, MISSING) or (root.shown and not root.by_results) or root.behind_may_be_held or root.held_back is not None \
            or root.journal_steps or root.blocked_elsewhere or root.comm not in analyses:
        return root
    launched, completed = analyses[root.comm].launched, analyses[root.comm].completed
    if any(r not in launched for r in root.outlier_ranks):
        return root
    most = max(launched[r] for r in root.outlier_ranks)
    # (a rank ahead that completed all it launched here has nothing of its own here holding its GPU)
    ahead = [r for r in root.reference_ranks if launched.get(r, 0) > most
             and (completed.get(r) is None or completed[r] < launched[r])]
    if not ahead:
        return root
    # (ranks on neither side whose records end no further than the outliers' may be behind too)
    behind_too = [r for r in root.unplaced_ranks if launched.get(r, most) <= most]
    held = may_hold_back(replace(root, reference_ranks=ahead), groups, behind_too)
    return replace(root, behind_may_be_held=True, may_be_held_back_by=held) if held else root


def _recorded_ends(comm: str, streams: Streams) -> dict[int, int]:
    """rank -> the last seq its records of `comm` hold (ranks with none left out)."""
    return {rank: int(part.get_column("seq").max()) for (c, rank), part in streams.parts.items()
            if c == comm and part.height}


def _counted_levels(root: Root, ras: dict[str, RasHistory], rank_map: dict[tuple[str, int], int],
                    marks: dict[str, EnqueueMarks], streams: Streams
                    ) -> tuple[dict[int, tuple[int, ...]], set[int], bool] | None:
    """The launch counts a root on counts alone rests on: rank -> its counts (per collective type, of the types that
    differ, for RAS counts of NCCL 2.26+; else one count of all it launched), the ranks whose count is only a floor,
    and whether the counts are of every collective (see held_back.behind_in_chain). None where they are not known
    by the ranks the root names."""
    if root.pinned_by == "RAS counts" and root.comm in ras:
        if root.counts_by_type:
            types = sorted(root.counts_by_type)
            ranks = {r for counts in root.counts_by_type.values() for r in counts}
            return {r: tuple(root.counts_by_type[t].get(r, 0) for t in types) for r in ranks}, set(), False
        history = ras[root.comm]
        if any(set(c) - {"ops"} for c in history.by_type().values()):
            return None
        counts = {r: c.get("ops", 0) for r, c in history.by_type().items()}
        named = {r: rank_map[(root.comm, r)] for r in counts if (root.comm, r) in rank_map}
        if named and len(named) < len(counts):
            return None  # (some ranks by global rank, others by none: the root leaves those out)
        return {named.get(r, r): (n,) for r, n in counts.items()}, set(), True
    for group, counted in marks.items():
        if streams.aliases.get(group, group) == root.comm and counted.source == root.pinned_by:
            return {r: (n,) for r, n in counted.launched.items()}, set(counted.floors), True
    return None


def _known(streams: Streams) -> dict[str, set[int]]:
    """comm -> its members on record (what the streams hold, and what the evidence says a comm should hold)."""
    return {**{c: set(r) for c, r in streams.expected_members.items()},
            **{c: set(r) for c, r in streams.members.items()}}


def _pick_root(analyses: dict[str, CommAnalysis], gate: GateDisagreement | None, streams: Streams,
               guessed: frozenset[str] = frozenset()) -> tuple[Root | None, list[Note]]:
    """Among communicators with a root, the cause rather than its consequences (consequences.py: a rank stuck in
    one communicator stops launching in the others it belongs to), and the notes of that choice. Then records
    that differ beat lengths that differ, which beat a root only the gate journal places; of those alike, a root
    whose departure records their results place beats one that may rest on a record only its neighbours placed
    (`guessed`: their comms), which stays a candidate beside it, as an outer group kept only because its odd ranks
    may have stopped there stays one beside the inner group; collectives gained or changed beat collectives missing
    or stopped."""
    rooted = [a for a in analyses.values() if a.root is not None]
    if not rooted:
        return None, []
    deviants = set(gate.passed if gate and len(gate.passed) <= len(gate.skipped) else
                   (gate.skipped if gate else []))
    order = {EXTRA: 0, DIFFERENT_OPS: 1, MISSING: 2, STOPPED: 3}
    if gate is not None and deviants and deviants <= set(gate.skipped):
        order = {MISSING: 0, DIFFERENT_OPS: 1, EXTRA: 2, STOPPED: 3}  # ranks that skipped the drafter lack some
    launched = {a.comm: {r: n for r, n in a.launched.items() if (a.comm, r) not in streams.cut} for a in rooted}
    found = []
    for a in rooted:
        odd = odd_ones(launched[a.comm], set(a.root.outlier_ranks), a.root.majority)
        counts = launched[a.comm]
        members = frozenset(a.ranks) | frozenset(streams.expected_members.get(a.comm, ()))
        found.append(Disagreement(a.comm, members, odd, other=other_side(counts, odd, a.root.majority),
                                  shown=a.root.shown, ahead=ran_ahead(counts, odd), behind=odd_behind(counts, odd),
                                  uncounted=members - frozenset(counts)))
    showing = [d for d, a in zip(found, rooted) if _shows_disagreement(a, launched[a.comm], streams)]
    explained = consequences(showing)
    # (an outer group kept only because its odd ranks may have stopped there comes after the inner one)
    kept = kept_outer([d for d in showing if d.comm not in explained])

    def evidence(r: Root) -> tuple:
        # A root whose records differ beats one where streams differ only in length (a rank stuck elsewhere),
        # which beats one on a communicator whose ranks all launched as many (only the gate journal places it).
        return not r.shown, r.comm in explained, not (r.shown or len(set(launched[r.comm].values())) > 1)

    roots = [a.root for a in rooted]
    root = min(roots, key=lambda r: (*evidence(r), r.comm in kept, r.comm in guessed, r.told,
                                     not (set(r.outlier_ranks) & deviants), order[r.kind], _width(r.seq_range), r.seq,
                                     r.comm))
    # (a root may come with the communicators its own evidence leaves undecided beside it)
    undecided = sorted({*root.undecided_comms,
                        *(r.comm for r in roots if r.comm != root.comm and evidence(r) == evidence(root))})
    explained = {c: causes for c, causes in explained.items() if c not in root.undecided_comms}
    odd = next(d.odd for d in found if d.comm == root.comm)
    unseen = unseen_causes(root, odd, streams)
    if root.told or len(set(launched[root.comm].values())) > 1:
        # A root on lengths alone (ranks that launched fewer or more here) is what a rank stuck in another
        # communicator of its odd ranks leaves here, and one the gate journal names among records that agree may
        # have run what the others did not there (a drafter's collectives on a TP comm): where no peer's whole
        # records compare that one (its peer left no evidence, or a file cut before it), nothing ranks it against
        # this one. Each is a candidate beside this one.
        undecided = sorted({*undecided, *(note.comm for note in unseen)})
    notes = comm_choice_notes(root, roots, explained, undecided) + unseen
    return replace(root, undecided_comms=tuple(undecided)), notes


def _shows_disagreement(analysis: CommAnalysis, whole_counts: dict[int, int], streams: Streams) -> bool:
    """Whether a communicator's root rests on a disagreement there. A root only the gate journal places, on records
    that agree and launched as many, shows none: it explains none elsewhere. Records that PyTorch's counts carry
    past, or that end where a file was cut short, are not known to agree."""
    root = analysis.root
    cut = any((analysis.comm, rank) in streams.cut for rank in analysis.ranks)
    return root.shown or not root.told or len(set(whole_counts.values())) > 1 or bool(analysis.counted) or cut


def _width(seq_range: tuple[int, int | None]) -> float:
    """How many seqs past its first a root's range spans (without end where nothing bounds it above)."""
    low, high = seq_range
    return float("inf") if high is None else high - low


def _memberships(streams: Streams, ras: dict[str, RasHistory], rank_map: dict[tuple[str, int], int],
                 marks: dict[str, EnqueueMarks]) -> dict[str, tuple[set[int], int]]:
    """comm -> (the global ranks on record as its members, its size), from every kind that names members."""
    found: dict[str, tuple[set[int], int]] = {}

    def add(comm: str, ranks, size: int) -> None:
        known, most = found.get(comm, (set(), 0))
        known = known | set(ranks)
        found[comm] = (known, max(most, size, len(known)))

    for comm, ranks in streams.members.items():
        add(comm, ranks, len(set(ranks) | set(streams.expected_members.get(comm, ()))))
    for comm, history in ras.items():
        add(comm, [rank for (c, _), rank in rank_map.items() if c == comm], history.states[-1][1].size or 0)
    for group, counted in marks.items():
        # (its lines may number more places in it than ranks left counts: a TP peer with no file of its own)
        add(streams.aliases.get(group, group), counted.launched, max(len(counted.launched), counted.places))
    return found


def _held_before_records(root: Root, marks: dict, streams: Streams,
                         stuck: dict[int, set[str]] | None = None) -> set[int]:
    """The ranks that wait in another comm (waiting.py: their own records there end in a collective that started
    and never finished, a peer's desync report or PyTorch's counts show work there that never finished), and whose
    launch count in the root's comm goes no further than their records there (where they hold any): stuck
    elsewhere, they launched nothing here past their count, so launching fewer is no departure of theirs before
    the records (held back reads the same), and where they stopped, their records here already say. `stuck`: the
    root's comm's waiting_elsewhere, where the caller has it."""
    launched = _counts_of(root.comm, marks, streams)
    if stuck is None:
        stuck = waiting_elsewhere(streams, root.comm, marks)
    recorded = {rank: part.get_column("seq").max() for (comm, rank), part in streams.parts.items()
                if comm == root.comm and part.height}
    waiting = {rank: part.filter(pl.col("state") == EventState.STARTED.value).get_column("seq").max()
               for (comm, rank), part in streams.parts.items() if comm == root.comm and part.height}

    # (ranks the root names on the reference side alone: one that departed may wait here in a collective of its own)
    following = set(root.reference_ranks) - set(root.outlier_ranks)

    def holds_itself(rank: int, n: int) -> bool:
        # Every peer of each communicator it is stuck in follows the program here and waits in a collective past
        # the rank's count: one of the program's that the rank never launched. The peers wait for it, and it for
        # them: nothing outside this communicator holds it, so launching fewer is a departure of its own (or of
        # its peers' order, which the others share). Yet a peer that counts more there than the rank ran past it
        # there (held_back.ahead_where_stuck): its own departure there may hold the rank, which reads the same.
        # A peer that PyTorch's counts show issued its collective here before the one the rank waits in there,
        # where most ranks issued that one first, does not follow the program: its departure holds the rank.
        peers = {c: set(streams.members.get(c, ())) - {rank} for c in stuck[rank]}
        return all(peer and peer <= following and all((waiting.get(p) or 0) > n and not peer_issued_early(
            root.comm, waiting[p], p, c, rank, marks, streams) for p in peer) for c, peer in peers.items()) \
            and not ahead_where_stuck(rank, {c: _counts_of(c, marks, streams) for c in stuck[rank]})

    # (a rank that launched more of its other group than the ranks waiting in its next seq here issued of theirs
    # before it went past where that seq comes: no hold there keeps it short of it)
    return {rank for rank, n in launched.items() if rank in stuck and n <= recorded.get(rank, n)
            and not holds_itself(rank, n) and not went_past_unissued(root.comm, rank, marks, streams)}


def _counts_of(comm: str, marks: dict, streams: Streams) -> dict[int, int]:
    """rank -> PyTorch's count of work it enqueued in `comm` (a group its records tie to the comm's hash goes by
    the hash); empty where no group's counts are of it."""
    return next((g.launched for name, g in marks.items() if streams.aliases.get(name, name) == comm), {})


def _last_ops_of(comm: str, marks: dict, streams: Streams) -> dict[int, tuple[int, str]]:
    """rank -> (number, op) of its last collective in `comm` by a desync report's snapshot (empty where none)."""
    return next((g.last_ops for name, g in marks.items() if streams.aliases.get(name, name) == comm), {})


def _counts_apart(comm: str, marks: dict, streams: Streams) -> set[int]:
    """The ranks whose PyTorch count of work enqueued in `comm` differs from the count of a strict majority
    (none where no count is a strict majority's)."""
    launched = _counts_of(comm, marks, streams)
    most = Counter(launched.values()).most_common(1)
    if not most or most[0][1] * 2 <= len(launched):
        return set()
    return {r for r, n in launched.items() if n != most[0][0]}
