"""`diagnose`: everything `ncclforensics diff` concludes from a set of evidence files, as values."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import polars as pl

from ..model import (
    Diagnostic,
    EventState,
    Evidence,
    FingerprintRow,
    SourceFormat,
    Verdict,
    WatchdogEvent,
    WedgeKind,
)
from .choose import choose_root
from .clocks import clock_disagreements
from .counted_progress import counted_progress, launched_no_more_contradictions, with_counted_progress
from .answers import DIFFERENT_OPS, ENQUEUED_COUNTS, EXTRA, MISSING, STOPPED, CommAnalysis, RangeReason, Root
from .divergence import analyze_comm
from .enqueue_marks import EnqueueMarks, enqueue_marks
from .enqueued_past_records import (count_past_timeouts, counted_past_cuts, enqueued_in, reported_ops_past_cuts,
                                    uncounted_timeouts)
from .fingerprints import attach_fingerprints, corrupted, diverging_steps
from .gates import GateDisagreement, first_gate_disagreement
from .held_back import held_back_ranks
from .jobs import split_jobs
from .marks_only import marks_only_wedge
from .notes import (
    CompletionsOnly,
    CutRecords,
    GuessedRootComm,
    GuessedTracePlacement,
    IssuedEarlyInTie,
    Note,
    RootOffMembers,
    TracesMayBeWider,
    UncomparedFields,
)
from .order_contradictions import OrderContradiction, order_contradiction_at
from .ranks import resolve_global_ranks
from .ras import RasHistory, ras_histories
from .ras_only import ras_only_wedge, ras_rank_map
from .reanalysis import reanalyze_behind_ranks, reanalyze_by_issue_orders, side_ties_by_issue_places
from .receipts import Finding, answer_receipts, death_receipts, job_ras_receipts
from .reconcile import Reconciliation, reconcile
from .streams import Streams, build_streams
from .traces import Guesses, guessed_comms, resting_on_guesses, seq_slack, wider_slack, with_trace_rows
from .unranked import unranked_streams
from .unwritten import completed_floors, parted_at_read_back, unwritten_ends
from .stop_evidence import counted_cause_wedge, hanging_pairings, stop_evidence
from .watchdog import with_watchdog_rows
from .wedge import Wedge, Window, count_only_window, find_wedge, misaligned_window


@dataclass
class Diagnosis:
    """The answer of `diff`, as values for the renderers."""

    verdict: Verdict
    ranks: list[int]
    comms: dict[str, CommAnalysis]
    root: Root | None = None
    root_step: int | None = None
    gate: GateDisagreement | None = None
    first_visible: tuple[str, int] | None = None
    window: Window | None = None
    wedge: Wedge | None = None
    ras: dict[str, RasHistory] = field(default_factory=dict)
    reconciliation: Reconciliation = field(default_factory=Reconciliation)
    corrupted_fingerprints: list[FingerprintRow] = field(default_factory=list)
    diverged_by_results: bool = False  # the verdict is `diverged` only because results were read back wrong
    checksum_splits: dict[int, dict[int, FingerprintRow]] = field(default_factory=dict)  # step -> rank -> row
    evidence: list[Finding] = field(default_factory=list)
    problems: list[Diagnostic] = field(default_factory=list)
    death: list[Finding] = field(default_factory=list)  # receipts that a process died
    gate_ties: list[int] = field(default_factory=list)  # outliers whose gate decision explains the root
    journaled_ranks: list[int] = field(default_factory=list)  # ranks whose gate decisions the evidence holds
    notes: list[Note] = field(default_factory=list)  # what the answer rests on and cannot see (align/notes.py)
    stand_in_ranks: dict[int, str] = field(default_factory=dict)  # rank numbered for a process: its host:pid
    text_ras_replies: int = 0
    # two ranks' issue orders no one program gives, in the root's or the wedge's comms: what alone makes it `diverged`
    order_contradiction: OrderContradiction | None = None
    streams: Streams | None = None  # the merged per-(comm, rank) streams, for plots and reports


def diagnose(evidence: list[Evidence], looked_at: frozenset[int] | None = None) -> Diagnosis:
    """Align the ranks' streams and say whether, where and why they diverged, and what it cost; `looked_at`: the
    ranks of a --rank view (align/view.py), whose evidence alone `evidence` is."""
    evidence = [e for e in evidence if e.format is not None]
    evidence, foreign, joined = split_jobs(evidence)
    evidence = with_watchdog_rows(evidence)
    evidence, notes = unranked_streams(evidence)
    notes = joined + notes
    evidence, rank_notes, stand_ins = resolve_global_ranks(evidence)
    notes += rank_notes
    # (the ranks PyTorch's counts give each group: a desync report lists members whose own lines never name it)
    listed = {group: set(m.launched) for group, m in enqueue_marks(
        [p for e in evidence for p in e.progress], [w for e in evidence for w in e.watchdog],
        [c for e in evidence for c in e.comm_infos], looked_at).items()}
    evidence, trace_notes, guesses = with_trace_rows(evidence, listed)
    notes += trace_notes
    streams = build_streams(evidence)
    problems = foreign + list(streams.problems)
    # A file that conflicts with another for the same rank is left out entirely, not only its collectives.
    evidence = [e for e in evidence if e.path not in set(streams.excluded_files)]
    gates = [g for e in evidence for g in e.gates]
    fingerprints = [f for e in evidence for f in e.fingerprints]
    watchdog = [w for e in evidence for w in e.watchdog]
    progress = [p for e in evidence for p in e.progress]
    snapshots = [(e.format.value, s) for e in evidence for s in e.ras]
    streams = attach_fingerprints(streams, fingerprints)
    # traces a PyTorch count or a peer's result shows were not written up to their rank's end: cut short, in effect
    floors = completed_floors(streams, progress, watchdog)
    unwritten = {key: where for key, where in unwritten_ends(streams, floors).items() if key not in streams.cut}
    counted_floors = completed_floors(streams, progress, watchdog, peers=False)
    for key, where in unwritten_ends(streams, counted_floors).items():
        streams.cut.setdefault(key, where)
        streams.launch_ends.discard(key)
    problems += clock_disagreements(evidence, streams)

    gate = first_gate_disagreement(gates)
    ras = ras_histories(snapshots)
    rank_map = ras_rank_map(streams, evidence, ras)
    dead = _dead_ranks(ras, rank_map, watchdog)

    marks = enqueue_marks(progress, watchdog, [c for e in evidence for c in e.comm_infos], looked_at)
    tied: dict[str, str] = {}  # (comm -> the process group whose counts carry its ranks)
    counted = counted_past_cuts(streams, marks, tied)
    reported = reported_ops_past_cuts(streams, marks, counted)
    died = bool(death_receipts(ras, rank_map, watchdog))
    held = _held_back(marks, streams)
    analyses: dict[str, CommAnalysis] = {}
    for comm in sorted(streams.members):
        analyses[comm] = analyze_comm(streams, comm, gate, counted=counted.get(comm),
                                      enqueued=enqueued_in(marks, streams, comm), died=died,
                                      reported=reported.get(comm), held=held.get(comm),
                                      floors=frozenset(marks[tied[comm]].floors) if comm in tied else frozenset(),
                                      exact=frozenset(marks[tied[comm]].exact) if comm in tied else frozenset())

    # Records that end where traces were not written say nothing of the ranks' lengths there (results checked wrong
    # still do); where such traces end before a step whole ones hold, the ranks part past its end. That is the root
    # only where no other communicator's records give one (lengths of unwritten traces give none).
    unsure = {c for c, a in analyses.items() if _lengths_at_most(a.root) and any(k[0] == c for k in unwritten)}
    parted = {comm: found for comm in unsure
              if (found := parted_at_read_back(streams, comm, set(unwritten), floors)) is not None}
    replaced = set(parted) if len(parted) == 1 and not any(
        a.root is not None for c, a in analyses.items() if c not in unsure) else set()
    for comm in sorted(unsure):
        if comm in replaced:
            analyses[comm].root = parted[comm]
        elif analyses[comm].root is not None:
            # (no parting replaces it: what its lengths say is no more than that the traces end)
            analyses[comm].root = _unwritten_widened(analyses[comm].root, streams, comm, set(unwritten))
    _apply_progress(analyses, streams, progress, watchdog)
    departed_later: list[Note] = []
    if not died:
        stopped = stop_evidence(streams, analyses, ras, watchdog, dead)
        reanalyze_behind_ranks(analyses, streams, gate, {**hanging_pairings(streams, analyses), **stopped}, dead,
                               marks)
        departed_later = reanalyze_by_issue_orders(analyses, streams, gate)
        side_ties_by_issue_places(analyses, streams, gate)
    diagnosis = Diagnosis(verdict=Verdict.CONSISTENT, ranks=_all_ranks(evidence, streams), comms=analyses,
                          gate=gate, ras=ras, problems=problems, stand_in_ranks=stand_ins,
                          journaled_ranks=sorted({g.rank for g in gates}))
    diagnosis.corrupted_fingerprints = corrupted(fingerprints)
    diagnosis.checksum_splits = diverging_steps(fingerprints)
    stops = stop_evidence(streams, analyses, ras, watchdog, dead)
    choice = choose_root(analyses, streams, gate, gates=gates, ras=ras, rank_map=rank_map, marks=marks,
                         watchdog=watchdog, fingerprints=fingerprints, stops=stops,
                         cut_files={e.path for e in evidence if e.cut is not None},
                         cut_steps={e.path: e.cut_step for e in evidence if e.cut_step is not None},
                         died=died, guessed=resting_on_guesses(
                             [a.root for a in analyses.values() if a.root is not None], guesses))
    root, counted_cause = choice.root, choice.counted_cause
    notes += choice.notes
    root, guessed = _widened_by_guesses(root, guesses)
    notes += guessed
    root, off = _members_only(root, streams)
    notes += off
    # (ranks a comm's root no longer names as they departed after the ones it names, and a tie the issue orders
    # broke where the root still names that side: of the root's comm alone)
    notes += [note for note in departed_later if root is not None and note.comm == root.comm
              and (set(note.ranks) <= set(root.outlier_ranks) if isinstance(note, IssuedEarlyInTie)
                   else not set(note.ranks) & set(root.outlier_ranks))]
    dead |= choice.dead
    diagnosis.root = root
    if root is not None and root.comm in analyses and analyses[root.comm].first_visible is not None:
        diagnosis.first_visible = (root.comm, analyses[root.comm].first_visible)
    else:
        visible = [(a.first_visible, c) for c, a in analyses.items() if a.first_visible is not None]
        if visible:
            seq, comm = min(visible)
            diagnosis.first_visible = (comm, seq)
    # What the ranks launched and completed past their records, by PyTorch's counts: the window and the wedge are
    # placed by them (the roots were found from the records, which the counts only extend).
    counted_launches = count_past_timeouts(analyses, streams, marks)
    progress_counts = counted_progress(analyses, streams, marks, watchdog)
    for comm, counted in progress_counts.items():
        analyses[comm] = with_counted_progress(analyses[comm], counted)
    if root is not None:
        # (only a rank's own timeout says it waits in the next one; one that launched no more waits in none)
        waiting = {r: p.completed for r, p in progress_counts.get(root.comm, {}).items() if p.waits_next}
        diagnosis.window = (misaligned_window(streams, analyses[root.comm], root, waiting) if root.comm in analyses
                            and analyses[root.comm].root is not None else count_only_window(root))
    for comm, analysis in list(analyses.items()):
        analyses[comm] = replace(analysis, launched_floors=(
            frozenset(uncounted_timeouts(streams, marks, comm)) & analysis.launched.keys()) | {
            r for r, p in progress_counts.get(comm, {}).items() if p.launched_floor
            and analysis.launched[r] == p.launched})
    diagnosis.wedge = find_wedge(streams, analyses, dead, stops, _root_comm_in_streams(root, streams, ras, rank_map),
                                 progress_counts)
    if counted_cause is not None:
        diagnosis.wedge = counted_cause_wedge(diagnosis.wedge, root, ras, rank_map, stops, dead)
    if diagnosis.wedge is None:
        diagnosis.wedge = ras_only_wedge(ras, rank_map, stops, dead, streams) or marks_only_wedge(marks, streams, dead)
    if diagnosis.wedge is not None:
        floors = analyses[diagnosis.wedge.comm].launched_floors if diagnosis.wedge.comm in analyses else frozenset()
        diagnosis.wedge.launched_floors = sorted(r for r in set(uncounted_timeouts(streams, marks, diagnosis.wedge.comm))
                                                 | floors | set(diagnosis.wedge.launched_floors)
                                                 if r in diagnosis.wedge.launched)
    diagnosis.reconciliation = reconcile(streams, progress, watchdog, ras, rank_map)
    diagnosis.reconciliation.contradictions += [
        c for comm, counted in sorted(progress_counts.items()) if comm in analyses
        for c in launched_no_more_contradictions(streams, analyses[comm], counted)]
    diagnosis.death = death_receipts(ras, rank_map, watchdog)
    diagnosis.gate_ties = _gate_ties(root, gate)
    diagnosis.root_step = gate.step if diagnosis.gate_ties else choice.sums_step
    if diagnosis.root_step is None and root is not None and root.seq_range is not None:
        diagnosis.root_step = _recorded_step(root, streams)
    diagnosis.verdict = _verdict(diagnosis, ras)
    # (not where _verdict finds the root itself unsure: counts that may still move, sums that may part by design)
    unsure = root is not None and (root.unstopped or root.may_sum_apart_by_design)
    if diagnosis.verdict is not Verdict.DIVERGED and not unsure:
        diagnosis.order_contradiction = order_contradiction_at(streams, root, diagnosis.wedge)
        if diagnosis.order_contradiction is not None:
            diagnosis.verdict = Verdict.DIVERGED
    if diagnosis.corrupted_fingerprints and diagnosis.verdict is not Verdict.DIVERGED:
        # A result read back wrong: collectives completed with mixed data, wherever the records place the root.
        diagnosis.verdict, diagnosis.diverged_by_results = Verdict.DIVERGED, True
    if diagnosis.verdict is Verdict.CONSISTENT and streams.cut:
        # Agreement up to where a file was cut short says nothing of what that rank launched after it.
        diagnosis.verdict = Verdict.INCONCLUSIVE
    traces = _completions_only(evidence)
    if diagnosis.verdict is Verdict.CONSISTENT and not ras and traces:
        # A record made once a collective completed cannot show one in flight: a hang (a collective every rank
        # launched and none completed), or a rank that died in it, leaves no record at all.
        diagnosis.verdict = Verdict.INCONCLUSIVE
        notes.append(CompletionsOnly(traces))
    notes += [CutRecords(comm, tuple(sorted(r for (c, r) in streams.cut if c == comm)), str(loc))
              for comm, loc in sorted({c: loc for (c, _), loc in streams.cut.items()}.items())]
    notes += _uncompared(analyses, root)
    diagnosis.streams = streams
    diagnosis.notes = notes
    diagnosis.text_ras_replies = sum(1 for e in evidence if e.format is SourceFormat.RAS_TEXT and e.ras)
    visible_ops = analyses[diagnosis.first_visible[0]].first_visible_ops if diagnosis.first_visible else {}
    diagnosis.evidence = answer_receipts(diagnosis.root, diagnosis.gate, diagnosis.first_visible, visible_ops,
                                         diagnosis.wedge, watchdog, diagnosis.checksum_splits,
                                         diagnosis.corrupted_fingerprints, diagnosis.ras,
                                         counted_launches) + job_ras_receipts(evidence)
    return diagnosis


def _held_back(marks: dict[str, EnqueueMarks], streams: Streams) -> dict[str, dict[int, frozenset[int]]]:
    """comm -> its ranks that PyTorch's completion marks of groups that stopped show held back in another group by
    peers ahead in it (held_back.held_back_ranks), rank -> those peers."""
    counted = {streams.aliases.get(name, name): g for name, g in marks.items()
               if g.source == ENQUEUED_COUNTS and g.stops}
    launched = {name: g.launched for name, g in counted.items()}
    completed = {name: g.completed for name, g in counted.items()}
    return {comm: found for comm in counted if (found := held_back_ranks(comm, launched, completed))}


def _widened_by_guesses(root: Root | None, guesses: Guesses) -> tuple[Root | None, list[Note]]:
    """The root, its seq range widened by as many records of its comm's fingerprint traces as were placed by their
    neighbours alone before it (each may be of another comm, or of this one where it went elsewhere: the seqs
    after it are then off by one), or that may be of a wider comm holding ranks that left no trace; and the notes
    that say so. A trace names no comm, so a seq it gives is only as good
    as the placing of every record before it."""
    if root is None or root.seq_range is None:
        return root, []
    low, high = root.seq_range
    others = tuple(c for c in guessed_comms(root.comm, root.seq_range, guesses) if c not in root.undecided_comms)
    notes: list[Note] = [GuessedRootComm(root.comm, others)] if others else []
    if others:
        root = replace(root, undecided_comms=tuple(sorted({*root.undecided_comms, *others})))
    down, up = seq_slack(root.comm, low, guesses)
    beyond = wider_slack(root.comm, low, guesses)
    if not down and not up and not beyond:
        return root, notes
    wider = (max(1, low - down - beyond), None if high is None else high + up)
    notes += [*([GuessedTracePlacement(down + up, root.comm, wider)] if down or up else []),
              *([TracesMayBeWider(beyond, root.comm, wider)] if beyond else [])]
    return replace(root, seq=wider[0], seq_range=wider), notes


def _unwritten_widened(root: Root, streams: Streams, comm: str, unwritten: set[tuple[str, int]]) -> Root:
    """A comm's root on lengths alone where some of its ranks' traces were not written as far as they got, and no
    parting at a step's read-back replaces it: those traces end where they were written, not where the ranks
    stopped, so the lengths say neither who departed nor where. Every rank of the root is named, no side a
    majority, from the first collective past the earliest unwritten trace's end on, with nothing bounding it
    above. Worked example: rank 2's trace holds seq 8, rank 3's seq 7 and ranks 0 and 1's seq 6, and rank 2's
    result of seq 8 needs every rank's part in it: none of the others' ends is where it stopped, and rank 2's
    longer trace is no extra collective."""
    ends = [int(part.get_column("seq").max()) for (c, rank), part in streams.parts.items()
            if c == comm and (c, rank) in unwritten and part.height]
    if not ends:
        return root
    low = min(ends) + 1
    everyone = sorted({*root.outlier_ranks, *root.reference_ranks, *root.unplaced_ranks})
    kinds = tuple(dict.fromkeys((root.kind, *root.kinds, EXTRA, MISSING, DIFFERENT_OPS)))
    return replace(root, seq=low, seq_range=(low, None), outlier_ranks=everyone, reference_ranks=everyone,
                   unplaced_ranks=[], majority=False, kind=root.kind, kinds=kinds, size=0, ops={},
                   reason=RangeReason.UNWRITTEN_ENDS, narrowed_by=(), records_start=min(root.records_start, low))


def _lengths_at_most(root: Root | None) -> bool:
    """Whether a comm's root, if any, rests on the lengths of its records alone (no record differs, no result
    checked wrong)."""
    return root is None or not root.shown and "fingerprints" not in root.narrowed_by


def _uncompared(analyses: dict[str, CommAnalysis], root: Root | None) -> list[Note]:
    """What could not be compared because only some ranks' evidence carries it, for the root's communicator (or,
    with no root, each one compared): those fields constrain only the pairs that both recorded them."""
    comms = [root.comm] if root is not None and root.comm in analyses else sorted(analyses)
    found: list[Note] = []
    for comm in comms:
        by_ranks: dict[tuple, list[str]] = {}
        for name, ranks in analyses[comm].unrecorded.items():
            by_ranks.setdefault(tuple(ranks), []).append(name)
        found += [UncomparedFields(comm, ranks, tuple(names)) for ranks, names in sorted(by_ranks.items())]
    return found[:6]


def _completions_only(evidence: list[Evidence]) -> str | None:
    """The formats (in words, plural) of the collectives on record, where every one is a completed collective from
    a trace (rows a format makes from its own records, as fingerprint traces do); None where any is a format's own
    launch or in-flight record (NCCL logs, dumps) or a timeout line's."""
    described = [e for e in evidence if e.collectives.height]
    if not described or any(e.facts is None or e.facts.records == "collectives" for e in described):
        return None
    if any(not (e.collectives.get_column("state") == EventState.COMPLETED.value).all() for e in described):
        return None
    return " and ".join(sorted({e.facts.label + "s" for e in described}))


def _apply_progress(analyses: dict[str, CommAnalysis], streams: Streams, progress: list,
                    watchdog: list[WatchdogEvent]) -> None:
    """Where no dump records states, PyTorch's own marks say what completed: `last completed work` in
    pg_status and watchdog lines, and a timed-out SeqNum (which did not complete)."""
    marks: dict[tuple[str, int], int] = {}
    for report in progress:
        if report.rank is not None and report.last_completed is not None:
            comm = streams.aliases.get(report.comm, report.comm)
            marks[(comm, report.rank)] = report.last_completed
    for event in watchdog:
        if event.rank is None or event.comm is None:
            continue
        comm = streams.aliases.get(event.comm, event.comm)
        if event.last_completed is not None:
            marks.setdefault((comm, event.rank), event.last_completed)
        elif event.kind in ("timeout", "blocking_wait_timeout") and event.seq is not None:
            marks.setdefault((comm, event.rank), event.seq - 1)
    for (comm, rank), done in marks.items():
        analysis = analyses.get(comm)
        if analysis is not None and rank in analysis.completed and analysis.completed[rank] is None:
            analysis.completed[rank] = min(done, analysis.launched[rank])


def _all_ranks(evidence: list[Evidence], streams: Streams) -> list[int]:
    ranks: set[int] = set()
    for item in evidence:
        ranks.update(item.ranks)
    for members in streams.members.values():
        ranks.update(members)
    return sorted(ranks)


def _dead_ranks(ras: dict[str, RasHistory], rank_map: dict, watchdog: list[WatchdogEvent]) -> set[int]:
    dead: set[int] = set()
    for comm, history in ras.items():
        for r in history.missing_ranks + history.dead_ranks:
            dead.add(rank_map.get((comm, r), r))
    return dead


def _gate_ties(root: Root | None, gate: GateDisagreement | None) -> list[int]:
    """The root's outlier ranks whose gate decision at the disagreeing step explains the root: they passed and
    ran the drafter's collectives (or skipped them, for a missing collective)."""
    if root is None or gate is None or root.kind == STOPPED:
        return []
    return sorted(set(gate.skipped if root.kind == MISSING else gate.passed) & set(root.outlier_ranks))


def _recorded_step(root: Root, streams: Streams) -> int | None:
    """The step the outliers' records give the root (fingerprint traces tie collectives to steps), where every
    seq of its range lies in one step."""
    steps: set[int] = set()
    low, high = root.seq_range
    for rank in root.outlier_ranks:
        part = streams.parts.get((root.comm, rank))
        if part is not None and "step" in part.columns:
            inside = pl.col("seq") >= low if high is None else pl.col("seq").is_between(low, high)
            steps.update(part.filter(inside).get_column("step").drop_nulls().to_list())
    return steps.pop() if len(steps) == 1 else None


def _root_comm_in_streams(root: Root | None, streams: Streams, ras: dict[str, RasHistory],
                          rank_map: dict[tuple[str, int], int]) -> str | None:
    """The root's communicator as the streams name it. A root on RAS counts names an NCCL comm hash that streams
    built from PyTorch's logs know only by process-group name: it is the one group whose ranks are the global
    ranks of every member the replies list."""
    if root is None or root.comm in streams.members or root.comm in streams.aliases or root.comm not in ras:
        return root.comm if root is not None else None
    size = ras[root.comm].states[-1][1].size
    members = {rank for (comm, _), rank in rank_map.items() if comm == root.comm}
    if not size or len(members) != size:
        return root.comm
    same = [comm for comm, ranks in streams.members.items() if set(ranks) == members]
    return same[0] if len(same) == 1 else root.comm


def _members_only(root: Root | None, streams: Streams) -> tuple[Root | None, list[Note]]:
    """The root, where every rank it names on either side is a member of its comm as its configuration lists them
    (a Flight Recorder `pg_config` lists every rank of a group; where none lists the comm, its members are not
    known and any rank may be one) and, with a majority, no rank is on both sides; else no root, and a note that
    says why: such a root comes of files tied to the comm inconsistently (a process group tied to the wrong
    communicator, comm ranks read as the job's), and would name ranks the evidence does not support."""
    if root is None:
        return root, []
    listed = set(streams.expected_members.get(root.comm, ()))
    named = set(root.outlier_ranks) | set(root.reference_ranks)
    strays = tuple(sorted(named - listed)) if listed else ()
    both = tuple(sorted(set(root.outlier_ranks) & set(root.reference_ranks))) if root.majority else ()
    if not strays and not both:
        return root, []
    return None, [RootOffMembers(root.comm, strays, both)]


def _verdict(diagnosis: Diagnosis, ras: dict[str, RasHistory]) -> Verdict:
    root, wedge = diagnosis.root, diagnosis.wedge
    if root is not None and root.unstopped:
        return Verdict.INCONCLUSIVE  # counts of a job that may have been running: the ranks behind may only lag
    if root is not None and root.may_sum_apart_by_design:
        return Verdict.INCONCLUSIVE  # lone sums in the only step on record: they may part by design
    if root is not None:
        if root.kind in (EXTRA, MISSING, DIFFERENT_OPS) and (root.shown or diagnosis.first_visible or (
                wedge and wedge.confirmed_by)):
            return Verdict.DIVERGED
        if wedge is not None and wedge.confirmed_by:
            return Verdict.DIVERGED
        if diagnosis.first_visible is not None:
            return Verdict.DIVERGED
        if any(h.moving for h in ras.values()):
            return Verdict.TRANSIENT
        return Verdict.INCONCLUSIVE
    if wedge is not None and wedge.confirmed_by:
        return Verdict.INCONCLUSIVE if agreeing_hang(wedge) else Verdict.DIVERGED
    if any(h.moving and any(_disagreed(c) for _, c in h.states) for h in ras.values()):
        return Verdict.TRANSIENT
    if any(h.disagree and h.moving is None for h in ras.values()):
        return Verdict.INCONCLUSIVE
    if not ras and not any(len(a.ranks) > 1 for a in diagnosis.comms.values()):
        return Verdict.INCONCLUSIVE  # no two ranks' collectives were compared
    if any(h.missing_ranks or h.dead_ranks for h in ras.values()):
        return Verdict.INCONCLUSIVE  # RAS says a rank is gone: whatever else agrees, that is no consistent job
    return Verdict.CONSISTENT


def agreeing_hang(wedge: Wedge) -> bool:
    """Every rank on record waits in the same collective, or past it in one of its own after completing it (a
    timeout at a later SeqNum), and none is known to be absent or dead: a hang, but nothing in the evidence shows
    the ranks disagreeing or whom they wait for. (A rank still in a collective a peer completed lags or hangs: a
    broadcast's root finishes before its receivers, and a rank that sent its last part before a peer that waits
    on the network or a rank not on record.)"""
    signatures = {(o.op, o.count, o.dtype, o.redop, o.root) for o in wedge.ops.values()}
    return (wedge.kind is WedgeKind.UNKNOWN and not wedge.absent_ranks and len(signatures) == 1
            and set(wedge.ops) | set(wedge.waiting_past) == set(wedge.waiting_ranks))


def _disagreed(comm) -> bool:
    return len({g.count for g in comm.count_groups}) > 1 or "MISMATCH" in comm.errors



