"""`diagnose`: everything `ncclforensics diff` concludes from a set of evidence files, as values."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import polars as pl

from ..model import (
    Diagnostic,
    EventState,
    Evidence,
    FingerprintRow,
    Location,
    SourceFormat,
    Verdict,
    WatchdogEvent,
    WedgeKind,
)
from ..model.kinds import is_p2p_comm
from ..model.phrases import ranks_words
from .clocks import clock_disagreements
from .comm_streams import comm_streams
from .consequences import Disagreement, candidates, consequences, odd_ones, other_side
from .divergence import (
    DIFFERENT_OPS,
    EXTRA,
    MISSING,
    STOPPED,
    CommAnalysis,
    RangeReason,
    Root,
    analyze_comm,
)
from .fingerprints import attach_fingerprints, corrupted, diverging_steps
from .gates import GateDisagreement, first_gate_disagreement
from .held_back import may_hold_back
from .interleave import issue_order_root, skipped_here
from .journal_progress import with_journal_progress
from .jobs import split_jobs
from .ranks import resolve_global_ranks
from .ras import RasHistory, ras_histories
from .ras_only import ras_comm_wedge, ras_only_roots, ras_only_wedge, ras_rank_map, unnamed_ranks
from .reconcile import Reconciliation, reconcile
from .step_sums import (step_sums_root, with_checksum_outliers, with_counted_outliers, with_sums_before_records,
                        with_sums_placing_cut_ranks)
from .streams import Streams, build_streams
from .traces import with_trace_rows
from .unranked import unranked_streams
from .watchdog import (
    STOP_EVENTS,
    EnqueueMarks,
    counted_past_cuts,
    enqueue_marks,
    enqueued_in,
    marks_only_roots,
    marks_only_wedge,
    with_watchdog_rows,
)
from .wedge import Wedge, Window, count_only_window, find_wedge, first_hanging_pairing, misaligned_window

DEATH_WORDS = ("remote process exited", "remote process error", "connection closed by remote peer",
               "process exited", "remoteerror")


@dataclass(frozen=True)
class Finding:
    """One receipt: where a piece of evidence is, and what it says."""

    loc: Location
    says: str


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
    checksum_splits: dict[int, dict[int, FingerprintRow]] = field(default_factory=dict)  # step -> rank -> row
    evidence: list[Finding] = field(default_factory=list)
    problems: list[Diagnostic] = field(default_factory=list)
    death: list[Finding] = field(default_factory=list)  # receipts that a process died
    gate_ties: list[int] = field(default_factory=list)  # outliers whose gate decision explains the root
    notes: list[str] = field(default_factory=list)  # caveats of the evidence's own (stand-in ranks, ...)
    stand_in_ranks: dict[int, str] = field(default_factory=dict)  # rank numbered for a process: its host:pid
    text_ras_replies: int = 0
    streams: Streams | None = None  # the merged per-(comm, rank) streams, for plots and reports


def diagnose(evidence: list[Evidence]) -> Diagnosis:
    """Align the ranks' streams and say whether, where and why they diverged, and what it cost."""
    evidence = [e for e in evidence if e.format is not None]
    evidence, foreign = split_jobs(evidence)
    evidence = with_watchdog_rows(evidence)
    evidence, unranked_caveats = unranked_streams(evidence)
    evidence, rank_caveats, stand_ins = resolve_global_ranks(evidence)
    unranked_caveats += rank_caveats
    evidence, trace_caveats = with_trace_rows(evidence)
    unranked_caveats += trace_caveats
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
    problems += clock_disagreements(evidence, streams)

    gate = first_gate_disagreement(gates)
    ras = ras_histories(snapshots)
    rank_map = ras_rank_map(streams, evidence, ras)
    dead = _dead_ranks(ras, rank_map, watchdog)

    marks = enqueue_marks(progress, watchdog, [c for e in evidence for c in e.comm_infos])
    counted = counted_past_cuts(streams, marks)
    analyses: dict[str, CommAnalysis] = {}
    for comm in sorted(streams.members):
        analyses[comm] = analyze_comm(streams, comm, gate, counted=counted.get(comm),
                                      enqueued=enqueued_in(marks, streams, comm))

    _apply_progress(analyses, streams, progress, watchdog)
    if not _death_evidence(ras, rank_map, watchdog):
        stopped = _stop_evidence(streams, analyses, ras, watchdog, dead)
        _behind_ranks(analyses, streams, gate, {**_hanging_pairings(streams, analyses), **stopped}, dead)
        _issue_order_roots(analyses, streams, gate)
    diagnosis = Diagnosis(verdict=Verdict.CONSISTENT, ranks=_all_ranks(evidence, streams), comms=analyses,
                          gate=gate, ras=ras, problems=problems, stand_in_ranks=stand_ins)
    diagnosis.corrupted_fingerprints = corrupted(fingerprints)
    diagnosis.checksum_splits = diverging_steps(fingerprints)
    root, comm_caveats = _pick_root(analyses, gate, streams)
    stops = _stop_evidence(streams, analyses, ras, watchdog, dead)
    counted_cause = None
    if root is not None and not root.shown:
        counted_cause = _counted_cause(root, analyses, streams, ras, rank_map, stops)
        if counted_cause is not None:
            root, comm_caveats = counted_cause
    if root is None:
        root, comm_caveats = _pick_counted(ras_only_roots(ras, rank_map, streams, stops)
                                           or marks_only_roots(marks, streams, watchdog, stopped=bool(stops)))
        if root is not None and root.pinned_by == "RAS counts":
            comm_caveats += unnamed_ranks(root.comm, ras, rank_map)
        if root is not None and root.pinned_by == "RAS counts" and (gate is None or not gate.outlier_ranks):
            # Journals that agree on every decision still say how far each rank got.
            named = {rank for (comm, _), rank in rank_map.items() if comm == root.comm}
            root = with_journal_progress(root, gates, named) or root
        counted_comms = {streams.aliases.get(c, c) for c in marks}
        if root is not None and root.kind == MISSING and ({*ras, *counted_comms, *streams.members} - {root.comm}):
            # Launch counts of one communicator, in a job with others: the ranks behind may be held back elsewhere.
            root = replace(root, behind_may_be_held=True,
                           may_be_held_back_by=may_hold_back(root, _memberships(streams, ras, rank_map, marks)))
    unranked_caveats += comm_caveats
    sums_step = None
    cut_files = {e.path for e in evidence if e.cut is not None}

    def sums_root():
        return step_sums_root(fingerprints, {**{c: set(r) for c, r in streams.expected_members.items()},
                                             **{c: set(r) for c, r in streams.members.items()}},
                              frozenset(r for ranks in streams.members.values() for r in ranks),
                              frozenset(f.rank for f in fingerprints if f.loc.path in cut_files))

    if root is None or root.reason in (RangeReason.COUNTS, RangeReason.TYPE_COUNTS):
        # Streams that show nothing leave the checksums' word (results mixed in some step); counts that place
        # nothing leave them the say on who else departed.
        found = sums_root()
        if found is not None and root is None:
            root, sums_step = found
        elif found is not None:
            root, said = with_checksum_outliers(root, found[0])
            unranked_caveats += said
    elif root.reason is RangeReason.BEFORE_RECORDS:
        # Records that begin after the ranks already disagree say who differs there; PyTorch's counts may show
        # others that launched more or fewer before it.
        counted = [r for r, _ in marks_only_roots(marks, streams, watchdog) if r.comm == root.comm]
        if counted:
            root, said = with_counted_outliers(root, counted[0], _held_before_records(root, marks, streams))
            unranked_caveats += said
        found = sums_root()
        if found is not None:
            root, said = with_sums_before_records(root, found[0])
            unranked_caveats += said
    elif root.unplaced_ranks and root.comm in analyses:
        # Records cut before the sides part place no one there; the checksums of the step they part at may.
        found = sums_root()
        if found is not None:
            root, said = with_sums_placing_cut_ranks(root, found[0], analyses[root.comm].launched)
            unranked_caveats += said
    if root is not None:
        root = _resolve_tie(root, gate)
        if root.kind == STOPPED and _death_evidence(ras, rank_map, watchdog):
            # A rank that stopped launching while its peers report a remote process gone is the dead one.
            dead |= set(root.outlier_ranks)
    diagnosis.root = root
    if root is not None and root.comm in analyses and analyses[root.comm].first_visible is not None:
        diagnosis.first_visible = (root.comm, analyses[root.comm].first_visible)
    else:
        visible = [(a.first_visible, c) for c, a in analyses.items() if a.first_visible is not None]
        if visible:
            seq, comm = min(visible)
            diagnosis.first_visible = (comm, seq)
    if root is not None:
        diagnosis.window = (misaligned_window(streams, analyses[root.comm], root) if root.comm in analyses
                            and analyses[root.comm].root is not None else count_only_window(root))
    diagnosis.wedge = find_wedge(streams, analyses, dead, stops, _root_comm_in_streams(root, streams, ras, rank_map))
    if counted_cause is not None:
        diagnosis.wedge = _counted_cause_wedge(diagnosis.wedge, root, ras, rank_map, stops, dead)
    if diagnosis.wedge is None:
        diagnosis.wedge = ras_only_wedge(ras, rank_map, stops, dead, streams) or marks_only_wedge(marks, streams, dead)
    diagnosis.reconciliation = reconcile(streams, progress, watchdog, ras, rank_map)
    diagnosis.death = _death_evidence(ras, rank_map, watchdog)
    diagnosis.gate_ties = _gate_ties(root, gate)
    diagnosis.root_step = gate.step if diagnosis.gate_ties else sums_step
    if diagnosis.root_step is None and root is not None and root.seq_range is not None:
        diagnosis.root_step = _recorded_step(root, streams)
    diagnosis.verdict = _verdict(diagnosis, ras)
    if diagnosis.verdict is Verdict.CONSISTENT and streams.cut:
        # Agreement up to where a file was cut short says nothing of what that rank launched after it.
        diagnosis.verdict = Verdict.INCONCLUSIVE
    traces = _completions_only(evidence)
    if diagnosis.verdict is Verdict.CONSISTENT and not ras and traces:
        # A record made once a collective completed cannot show one in flight: a hang (a collective every rank
        # launched and none completed), or a rank that died in it, leaves no record at all.
        diagnosis.verdict = Verdict.INCONCLUSIVE
        unranked_caveats.append(f"Only {traces} describe the collectives, and they record a collective once it "
                                "completed: a collective every rank launched and none completed (a hang), or a rank "
                                "that died in it, leaves no record, so the ranks' agreement up to where their records "
                                "end says nothing of what came after")
    unranked_caveats += [f"{ranks_words(sorted(r for (c, r) in streams.cut if c == comm))}'s records in comm {comm} "
                         f"end where a file was cut short ({loc}): what came after is unknown"
                         for comm, loc in sorted({c: loc for (c, _), loc in streams.cut.items()}.items())]
    unranked_caveats += _uncompared(analyses, root)
    diagnosis.streams = streams
    diagnosis.notes = unranked_caveats
    diagnosis.text_ras_replies = sum(1 for e in evidence if e.format is SourceFormat.RAS_TEXT and e.ras)
    diagnosis.evidence = _receipts(diagnosis, watchdog) + _job_level_ras(evidence)
    return diagnosis


FIELD_WORDS = {"op": "collective type", "count": "count", "dtype": "data type", "redop": "reduction",
               "root": "root rank", "stack": "call stack", "tag": "tag", "step": "step"}


def _uncompared(analyses: dict[str, CommAnalysis], root: Root | None) -> list[str]:
    """What could not be compared because only some ranks' evidence carries it, for the root's communicator (or,
    with no root, each one compared): those fields constrain only the pairs that both recorded them."""
    comms = [root.comm] if root is not None and root.comm in analyses else sorted(analyses)
    said = []
    for comm in comms:
        by_ranks: dict[tuple, list[str]] = {}
        for name, ranks in analyses[comm].unrecorded.items():
            by_ranks.setdefault(tuple(ranks), []).append(FIELD_WORDS[name])
        for ranks, names in sorted(by_ranks.items()):
            said.append(f"In comm {comm}, {ranks_words(list(ranks))}'s evidence carries no {' or '.join(names)}: "
                        f"{'those were' if len(names) > 1 else 'that was'} compared only between ranks that "
                        f"recorded {'them' if len(names) > 1 else 'it'}")
    return said[:6]


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


def _behind_ranks(analyses: dict[str, CommAnalysis], streams: Streams, gate: GateDisagreement | None,
                  stops: dict[str, list[str]], dead: set[int]) -> None:
    """In a communicator that stopped, ranks that launched fewer than the others, with nothing saying they died,
    skipped collectives or are blocked elsewhere: analyse the communicator again with them as outliers."""
    for comm, analysis in list(analyses.items()):
        if comm not in stops or len(analysis.ranks) < 3 or is_p2p_comm(comm):
            continue
        root = analysis.root
        # Outliers that ran other collectives than the program (extra ones, say) launched as many as that made
        # them: the others are behind only if they launched fewer than the rest of the reference.
        pacing = set(root.reference_ranks) if root is not None and root.majority and root.kind != STOPPED \
            and root.reference_ranks else set(analysis.ranks)
        most = max(n for r, n in analysis.launched.items() if r in pacing)
        # records ending at a cut file: not behind, unknown (unless PyTorch counts what they launched past it)
        cut = {r for (c, r) in streams.cut if c == comm} - set(analysis.counted)
        behind = {r for r, n in analysis.launched.items() if n < most} - dead - cut
        named = set(analysis.root.outlier_ranks) if analysis.root is not None and analysis.root.kind != STOPPED \
            else set()
        # Where records already show a rank launching something else, ranks behind that also run in another
        # communicator are blocked there by it (a rank in this one alone would have nowhere else to wait), unless
        # their records there say that everything they launched completed (nothing holds them there).
        elsewhere = {r for c, other in analyses.items() if c != comm for r in other.ranks
                     if other.completed.get(r) is None or other.completed[r] < other.launched[r]}
        caused = analysis.root is not None and analysis.root.shown and analysis.root.kind != STOPPED \
            and behind <= elsewhere
        if behind and not behind <= named and not caused and len(behind) * 2 <= len(set(analysis.ranks) - cut):
            analyses[comm] = analyze_comm(streams, comm, gate, behind, analysis.counted)


def _issue_order_roots(analyses: dict[str, CommAnalysis], streams: Streams, gate: GateDisagreement | None) -> None:
    """In a communicator whose ranks launched different numbers of collectives, and whose records show no
    majority departing (only lengths, or no majority), the ranks' issue orders across their communicators may say
    who launched an extra one and who is held back elsewhere (align/interleave.py), or that ranks whose records
    stop short left out a collective here and went on elsewhere. They count only where every other communicator
    of its ranks is one program (no root there)."""
    for comm, analysis in list(analyses.items()):
        root = analysis.root
        if root is not None and root.shown and root.majority and root.kind != STOPPED:
            continue
        if len(set(analysis.launched.values())) < 2:
            continue
        others = {c for c, members in streams.members.items() if c != comm and set(members) & set(analysis.ranks)}
        rooted = [analyses[c].root for c in others if c in analyses and analyses[c].root is not None]
        # Another communicator whose records differ runs another program on some ranks; one whose records only
        # end apart is what a collective held back here leaves there, where this one's records show a departure
        # (else an early collective here and one left out there before it read the same).
        if root is not None and root.kind == STOPPED and not any(r.shown or r.kind != STOPPED for r in rooted):
            # (ranks that stopped short elsewhere too leave the places of what they issued before as they were)
            left_out = skipped_here(streams, comm, root.outlier_ranks)
            if left_out:
                analyses[comm] = analyze_comm(streams, comm, gate, counted=analysis.counted, left_out=left_out)
                continue
        if any(r.shown for r in rooted):
            continue
        found = issue_order_root(streams, comm, analysis.start)
        if found is not None and rooted and not (root is not None and root.shown):
            # The other communicators' records only end apart: an early collective here and collectives left out
            # there before it read the same, so those stay candidates beside this one.
            found = replace(found, undecided_comms=tuple(sorted(c for c in others if c in analyses
                                                                and analyses[c].root is not None)))
        if found is not None:
            analysis.root = found


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


def _death_evidence(ras: dict[str, RasHistory], rank_map: dict, watchdog: list[WatchdogEvent]) -> list[Finding]:
    """Receipts that a process died: RAS missing or dead ranks, peers' remote-process errors."""
    found: list[Finding] = []
    for comm, history in sorted(ras.items()):
        for label, ranks in (("missing from", history.missing_ranks), ("dead in", history.dead_ranks)):
            if ranks:
                shown = ", ".join(str(rank_map.get((comm, r), r)) for r in ranks)
                found.append(Finding(history.states[-1][1].loc, f"{ranks_words(shown)} {label} RAS for comm {comm}"))
    for event in watchdog:
        if event.kind == "async_error" and any(w in event.message.lower() for w in DEATH_WORDS):
            found.append(Finding(event.loc, f"rank {event.rank}: {event.message.strip()[:90]}"))
    return found


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


def _width(seq_range: tuple[int, int | None]) -> float:
    """How many seqs past its first a root's range spans (without end where nothing bounds it above)."""
    low, high = seq_range
    return float("inf") if high is None else high - low


def _held_before_records(root: Root, marks: dict, streams: Streams) -> set[int]:
    """The ranks whose own records in another comm end in a collective that started and never finished, and whose
    launch count in the root's comm goes no further than their records there (where they hold any): stuck
    elsewhere, they launched nothing here past their count, so launching fewer is no departure of theirs before
    the records (held back reads the same), and where they stopped, their records here already say."""
    launched = next((g.launched for name, g in marks.items() if streams.aliases.get(name, name) == root.comm), {})
    # (collectives enqueued behind the one it is stuck in are recorded after it, never started)
    stuck = {rank for (comm, rank), part in streams.parts.items()
             if comm != root.comm and (part.get_column("state") == EventState.STARTED.value).any()}
    recorded = {rank: part.get_column("seq").max() for (comm, rank), part in streams.parts.items()
                if comm == root.comm and part.height}
    return {rank for rank, n in launched.items() if rank in stuck and n <= recorded.get(rank, n)}


def _pick_root(analyses: dict[str, CommAnalysis], gate: GateDisagreement | None,
               streams: Streams) -> tuple[Root | None, list[str]]:
    """Among communicators with a root, the cause rather than its consequences (consequences.py: a rank stuck in
    one communicator stops launching in the others it belongs to), and the caveats of that choice. Then records
    that differ beat lengths that differ, which beat a root only the gate journal places; collectives gained or
    changed beat collectives missing or stopped."""
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
        found.append(Disagreement(a.comm, frozenset(a.ranks) | frozenset(streams.expected_members.get(a.comm, ())),
                                  odd, other=other_side(launched[a.comm], odd, a.root.majority)))
    explained = consequences([d for d, a in zip(found, rooted) if _shows_disagreement(a, launched[a.comm], streams)])

    def evidence(r: Root) -> tuple:
        # A root whose records differ beats one where streams differ only in length (a rank stuck elsewhere),
        # which beats one on a communicator whose ranks all launched as many (only the gate journal places it).
        return not r.shown, r.comm in explained, not (r.shown or len(set(launched[r.comm].values())) > 1)

    roots = [a.root for a in rooted]
    root = min(roots, key=lambda r: (*evidence(r), r.told, not (set(r.outlier_ranks) & deviants), order[r.kind],
                                     _width(r.seq_range), r.seq, r.comm))
    # (a root may come with the communicators its own evidence leaves undecided beside it)
    undecided = sorted({*root.undecided_comms,
                        *(r.comm for r in roots if r.comm != root.comm and evidence(r) == evidence(root))})
    explained = {c: causes for c, causes in explained.items() if c not in root.undecided_comms}
    odd = next(d.odd for d in found if d.comm == root.comm)
    caveats = _comm_caveats(root, roots, explained, undecided) + _unseen_causes(root, odd, streams)
    return replace(root, undecided_comms=tuple(undecided)), caveats


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
        add(streams.aliases.get(group, group), counted.launched, len(counted.launched))
    return found


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


def _counted_cause(root: Root, analyses: dict[str, CommAnalysis], streams: Streams, ras: dict[str, RasHistory],
                   rank_map: dict[tuple[str, int], int], stops: dict[str, list[str]]
                   ) -> tuple[Root, list[str]] | None:
    """Where the streams' root rests on lengths only, a communicator of its odd ranks that no two ranks' whole
    records compare, whose RAS counts disagree, is its cause by the nesting rule (consequences.py), as it would be
    were that one's records whole: a rank stuck there stops launching here. Returns that root (from the counts) and
    the caveats of the choice; None where no such communicator explains it."""
    whole = {c: set(ranks) - {r for (cut, r) in streams.cut if cut == c} for c, ranks in streams.members.items()}
    counted = [(r, d) for r, d in ras_only_roots(ras, rank_map, streams, stops)
               if r.comm != root.comm and len(whole.get(r.comm, ())) < 2
               and (r.comm not in analyses or analyses[r.comm].root is None)]
    if not counted:
        return None
    # RAS names processes by host and pid: the same keys for the streams' ranks, where a reply ties them.
    process = {rank_map[(comm, r.rank)]: (r.host, r.pid) for comm, history in ras.items()
               for _, block in history.states for r in block.ranks
               if r.pid is not None and (comm, r.rank) in rank_map}
    analysis = analyses[root.comm]
    members = {*analysis.ranks, *streams.expected_members.get(root.comm, ())}
    if not members <= set(process):
        return None
    launched = {process[r]: n for r, n in analysis.launched.items() if (root.comm, r) not in streams.cut}
    odd = odd_ones(launched, {process[r] for r in root.outlier_ranks}, root.majority)
    mine = Disagreement(root.comm, frozenset(process[r] for r in members), odd,
                        other=other_side(launched, odd, root.majority))
    explained = consequences([mine, *(d for _, d in counted)])
    causes = [c for c in explained.get(root.comm, []) if c != root.comm]
    if not causes:
        return None
    chosen, caveats = _pick_counted([(r, d) for r, d in counted if r.comm in causes])
    if chosen is None:
        return None
    return chosen, caveats + _comm_caveats(chosen, [root], {root.comm: causes}, [])


def _counted_cause_wedge(wedge: Wedge | None, root: Root, ras: dict[str, RasHistory],
                         rank_map: dict[tuple[str, int], int], stops: dict[str, list[str]], dead: set[int]
                         ) -> Wedge | None:
    """Where the root is a communicator's counts that caused the streams' stop elsewhere (_counted_cause), a wedge
    in another communicator whose absent ranks are all the root's members waits on the root's: the wedge is the
    root's by its counts, confirmed by that stop too."""
    history = ras.get(root.comm)
    members = {rank for (comm, _), rank in rank_map.items() if comm == root.comm}
    if history is None or wedge is None or wedge.comm == root.comm or not wedge.absent_ranks \
            or not set(wedge.absent_ranks) <= members:
        return wedge
    found = ras_comm_wedge(root.comm, history, rank_map, stops, dead)
    if found is None:
        return wedge
    found.confirmed_by += [f"{reason}, in comm {wedge.comm}, which waits on it" for reason in wedge.confirmed_by
                           if reason not in found.confirmed_by]
    return found


def _shows_disagreement(analysis: CommAnalysis, whole_counts: dict[int, int], streams: Streams) -> bool:
    """Whether a communicator's root rests on a disagreement there. A root only the gate journal places, on records
    that agree and launched as many, shows none: it explains none elsewhere. Records that PyTorch's counts carry
    past, or that end where a file was cut short, are not known to agree."""
    root = analysis.root
    cut = any((analysis.comm, rank) in streams.cut for rank in analysis.ranks)
    return root.shown or not root.told or len(set(whole_counts.values())) > 1 or bool(analysis.counted) or cut


def _unseen_causes(root: Root, odd: frozenset, streams: Streams) -> list[str]:
    """Where the root's streams differ only in length, the other communicators of its odd ranks that no two ranks'
    whole records compare (one rank on record, or the others' files cut short): a divergence there would show in
    the root's communicator just so."""
    if root.shown:
        return []
    whole = {c: set(ranks) - {r for (cut, r) in streams.cut if cut == c} for c, ranks in streams.members.items()}
    unseen = sorted(c for c, ranks in streams.members.items()
                    if c != root.comm and len(whole[c]) < 2 and set(ranks) & odd and not is_p2p_comm(c))
    return [f"{ranks_words(sorted(set(streams.members[c]) & odd))} also runs in comm {c}, where no other rank's "
            f"records are whole to compare with: a divergence there would show in comm {root.comm} just so"
            for c in unseen]


def _pick_counted(found: list[tuple[Root, Disagreement]]) -> tuple[Root | None, list[str]]:
    """Of the roots counts give (RAS, PyTorch's marks), one per communicator, the first that is no consequence of
    another, and the caveats of that choice: counts alone never say which communicator diverged first."""
    if not found:
        return None, []
    explained = consequences([d for _, d in found])
    chosen = candidates([d for _, d in found])
    roots = [root for root, _ in found]
    root = next(r for r in roots if r.comm == chosen[0])
    caveats = _comm_caveats(root, roots, explained, chosen)
    return replace(root, undecided_comms=tuple(c for c in chosen if c != root.comm)), caveats


def _comm_caveats(root: Root, roots: list[Root], explained: dict[str, list[str]], undecided: list[str]) -> list[str]:
    """What the choice of the root's communicator rests on: the others whose ranks disagree too, read as its
    consequences, and those the evidence cannot rank against it."""
    said = {EXTRA: "launched more", MISSING: "launched fewer", STOPPED: "stopped"}
    caveats = []
    for other in roots:
        who = f"{ranks_words(other.outlier_ranks)} {said.get(other.kind, 'launched other collectives')} there"
        if other.comm in explained:
            caveats.append(f"comm {other.comm}'s ranks disagree too ({who}); read as a consequence of comm "
                           f"{' and '.join(explained[other.comm])}: a rank stuck in one communicator stops "
                           f"launching in the others it belongs to")
        elif other.comm in undecided and other.comm != root.comm:
            caveats.append(f"comm {other.comm}'s ranks disagree too ({who}), and nothing on record says whether "
                           f"comm {root.comm} or comm {other.comm} diverged first; the root names comm {root.comm}")
    return caveats


def _resolve_tie(root: Root, gate: GateDisagreement | None) -> Root:
    """With no majority (a two-rank comm), the gate journal can say which side deviated: the minority of all
    journaled ranks, or, when the journal has no majority either, the side whose gate passed (it ran the
    drafter's collectives the other side skipped). Otherwise, and where some rank of the tie has no decision at
    that step (it may side with either, and make either the minority), both sides stay named."""
    if root.majority or gate is None or not set(root.outlier_ranks) <= set(gate.decisions):
        return root
    in_comm = set(root.outlier_ranks)
    deviants = set(gate.outlier_ranks) & in_comm
    if not deviants and set(gate.skipped) & in_comm:
        deviants = set(gate.passed) & in_comm
    if deviants and deviants != in_comm:
        return replace(root, outlier_ranks=sorted(deviants))
    return root


def _stop_evidence(streams: Streams, analyses: dict[str, CommAnalysis], ras: dict[str, RasHistory],
                   watchdog: list[WatchdogEvent], dead: set[int]) -> dict[str, list[str]]:
    """comm -> what shows that it stopped rather than merely lagging."""
    stops: dict[str, list[str]] = {}
    for event in watchdog:
        if event.kind in STOP_EVENTS:
            comm = streams.aliases.get(event.comm, event.comm) if event.comm else None
            targets = [comm] if comm in analyses else [c for c, a in analyses.items() if event.rank in a.ranks]
            for c in targets:
                label = f"watchdog {event.kind.replace('_', ' ')} ({event.loc})"
                if label not in stops.setdefault(c, []):
                    stops[c].append(label)
    for comm, analysis in analyses.items():
        if analysis.has_states and _unfinished_entries(streams, comm):
            stops.setdefault(comm, []).append("Flight Recorder entries launched but never completed")
        if dead & set(analysis.ranks):
            stops.setdefault(comm, []).append(f"{ranks_words(sorted(dead & set(analysis.ranks)))} dead or missing in RAS")
    for comm, history in ras.items():
        if history.stuck:
            stops.setdefault(comm, []).append(
                f"RAS counts unchanged over {len(history.states)} replies while ranks disagree")
        lost = sorted(set(history.missing_ranks) | set(history.dead_ranks))
        if lost and comm not in analyses:
            stops.setdefault(comm, []).append(f"RAS lists comm {ranks_words(lost)} missing or dead")
    return stops


def _hanging_pairings(streams: Streams, analyses: dict[str, CommAnalysis]) -> dict[str, list[str]]:
    """comm -> a pairing its records show that NCCL never completes (types of different sizes at one seq, every
    rank in it), past a root the records show: the group stopped there, whatever else is on record, so ranks that
    launched fewer than the others are behind, not lagging (NCCL logs alone say nothing of completion)."""
    found: dict[str, list[str]] = {}
    for comm, analysis in analyses.items():
        root = analysis.root
        if root is None or not root.shown or root.kind == STOPPED or not analysis.launched:
            continue
        rows = comm_streams(streams.comm_parts(comm))
        hang = first_hanging_pairing(rows, max(analysis.first_seq.values()), max(analysis.launched.values()))
        if hang is not None:
            found[comm] = [f"a pairing NCCL never completes at seq {hang}"]
    return found


def _unfinished_entries(streams: Streams, comm: str) -> bool:
    """Whether a Flight Recorder dump holds an entry of `comm` it never saw complete. (Not a row some other source
    adds after the dump was taken: a log goes on where a dump taken by hand stopped.)"""
    unfinished = pl.col("fr_file").is_not_null() & (pl.col("state") != "completed")
    return any(part.select(unfinished.any()).item() for part in streams.comm_parts(comm).values())


def _verdict(diagnosis: Diagnosis, ras: dict[str, RasHistory]) -> Verdict:
    root, wedge = diagnosis.root, diagnosis.wedge
    if root is not None and root.unstopped:
        return Verdict.INCONCLUSIVE  # counts of a job that may have been running: the ranks behind may only lag
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
    if diagnosis.corrupted_fingerprints:
        return Verdict.INCONCLUSIVE  # results read back wrong: something was misaligned, though nothing says where
    return Verdict.CONSISTENT


def agreeing_hang(wedge: Wedge) -> bool:
    """Every rank on record waits in the same collective and none is known to be absent or dead: a hang, but
    nothing in the evidence shows the ranks disagreeing or whom they wait for."""
    signatures = {(o.op, o.count, o.dtype, o.redop, o.root) for o in wedge.ops.values()}
    return (wedge.kind is WedgeKind.UNKNOWN and not wedge.absent_ranks and len(signatures) == 1
            and set(wedge.ops) == set(wedge.waiting_ranks))


def _disagreed(comm) -> bool:
    return len({g.count for g in comm.count_groups}) > 1 or "MISMATCH" in comm.errors


def _receipts(diagnosis: Diagnosis, watchdog: list[WatchdogEvent]) -> list[Finding]:
    found: list[Finding] = []
    root = diagnosis.root
    if root is not None:
        for rank, op in sorted(root.ops.items()):
            role = "outlier" if rank in root.outlier_ranks else "rank"
            found.append(Finding(op.loc, f"{role} {rank} seq {op.seq}: {op.describe()}"))
            if op.fr_loc and op.fr_loc != op.loc:
                found.append(Finding(op.fr_loc, f"rank {rank} seq {op.seq} in the Flight Recorder: "
                                                f"{op.state or 'state unknown'}"))
    if diagnosis.gate is not None:
        for rank, d in diagnosis.gate.decisions.items():
            found.append(Finding(d.loc, f"rank {rank} gate at step {d.step}: {d.decision}"))
    if diagnosis.first_visible is not None:
        comm, seq = diagnosis.first_visible
        for rank, op in sorted(diagnosis.comms[comm].first_visible_ops.items()):
            found.append(Finding(op.loc, f"first visible mismatch, rank {rank} seq {seq}: {op.describe()}"))
    if diagnosis.wedge is not None:
        for rank, op in sorted(diagnosis.wedge.ops.items()):
            found.append(Finding(op.loc, f"wedge: rank {rank} launched seq {op.seq}: {op.describe()}"))
        for loc in diagnosis.wedge.evidence:
            if loc not in {f.loc for f in found}:
                found.append(Finding(loc, f"wedge in comm {diagnosis.wedge.comm}"))
    for event in watchdog:
        if event.kind == "desync_report_unavailable":
            found.append(Finding(event.loc, f"rank {event.rank}: PyTorch could not build its desync report, so it "
                                            f"names no culprit ({event.message.strip()[:60]}...)"))
        if event.kind in STOP_EVENTS:
            what = f"{event.kind.replace('_', ' ')}"
            if event.seq is not None:
                what += f" at seq {event.seq}"
            if event.op:
                what += f" ({event.op})"
            who = f"rank {event.rank}" if event.rank is not None else "a process"
            found.append(Finding(event.loc, f"{who}: {what}" + (f": {event.message.strip()[:80]}"
                                                               if event.rank is None else "")))
    for step, rows in list(diagnosis.checksum_splits.items())[:3]:
        values = ", ".join(f"rank {r}: {row.sum if row.sum is not None else row.digest}" for r, row in rows.items())
        for row in rows.values():
            found.append(Finding(row.loc, f"step {step} checksums differ across ranks (mixed data): {values}"))
            break
    for row in diagnosis.corrupted_fingerprints[:5]:
        found.append(Finding(row.loc, f"rank {row.rank} step {row.step}: checksum {row.sum} != expected "
                                      f"{row.expected_sum}"))
    for comm, history in diagnosis.ras.items():
        for _, block in history.states[:4]:
            state = ",".join(block.errors) or block.status or "OK"
            found.append(Finding(block.loc, f"RAS comm {comm}: {state}"))
    return found


def _job_level_ras(evidence: list[Evidence]) -> list[Finding]:
    """RAS errors about processes rather than communicators (`DEAD`: a process unreachable via RAS), which
    remain when a torn-down job leaves no communicator data."""
    first: dict[tuple, Location] = {}
    repeats: dict[tuple, int] = {}
    for item in evidence:
        for snapshot in item.ras:
            for issue in snapshot.issues:
                if issue.comm is None and not issue.warning:
                    key = (issue.kind, issue.message, issue.pids)
                    first.setdefault(key, issue.loc)
                    repeats[key] = repeats.get(key, -1) + 1
    found = []
    for (kind, message, pids), loc in first.items():
        said = f"RAS {kind}: {message}" + (f" (pid {', '.join(map(str, pids))})" if pids else "")
        more = repeats[(kind, message, pids)]
        found.append(Finding(loc, said + (f"; the same in {more} more repl{'y' if more == 1 else 'ies'}" if more else "")))
    return found



