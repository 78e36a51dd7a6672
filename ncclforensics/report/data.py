"""Findings as plain dicts: the JSON output contract."""

from __future__ import annotations

from ..align.acceptance import AcceptanceReport, RunAcceptance
from ..align.coverage import GateCoverage, RankTally
from ..align.diagnosis import Diagnosis
from ..align.answers import OpAt
from ..align.counted_progress import CountedProgress
from ..align.gates import GateDisagreement, decision_tuple
from ..align.side_by_side import SideBySide
from ..align.view import View
from ..align.wedge import Window
from ..model import Diagnostic, Evidence, Location
from . import ambiguity, root_words, words
from .receipts import receipt_words
from .notes import note_dict


def problem_dict(problem: Diagnostic) -> dict:
    """`{"file", "line", "message", "severity"}` for one diagnostic."""
    return {
        "file": problem.loc.path,
        "line": problem.loc.line,
        "message": problem.message,
        "severity": problem.severity.value,
    }


def parse_dict(evidence: Evidence) -> dict:
    """What `parse --json` prints for one file."""
    return {
        "file": evidence.path,
        "format": evidence.format.value if evidence.format else None,
        "also": [fmt.value for fmt in evidence.also],
        "version": evidence.version,
        "records": evidence.record_count,
        "ranks": evidence.ranks,
        "comms": evidence.comms,
        "errors": [
            {"line": p.loc.line, "message": p.message, "severity": p.severity.value} for p in evidence.problems
        ],
    }


def location_dict(loc: Location) -> dict:
    """`{"file", "line", "record", "at"}`: `at` is the printable `file:line` or `file#entries[i]`."""
    return {"file": loc.path, "line": loc.line, "record": loc.record, "at": str(loc)}


def op_dict(op: OpAt) -> dict:
    """One rank's collective at one seq."""
    return {
        "seq": op.seq, "op": op.op, "count": op.count, "dtype": op.dtype, "redop": op.redop, "root": op.root,
        "state": op.state, "callsite": op.callsite, "step": op.step, "evidence": str(op.loc),
        **({"flight_recorder": str(op.fr_loc)} if op.fr_loc else {}),
    }


def _ranks(mapping: dict) -> dict:
    """A per-rank map with string keys, in rank order (JSON objects keep the order they are written in)."""
    return {str(k): v for k, v in sorted(mapping.items())}


def _by_rank(mapping: dict[str, object] | None) -> dict[str, object] | None:
    """A map keyed by rank strings, in rank order."""
    return None if mapping is None else dict(sorted(mapping.items(), key=lambda item: int(item[0])))


def gate_dict(gate: GateDisagreement) -> dict:
    """The first disagreeing gate step with each rank's decision tuple."""
    return {
        "step": gate.step,
        "passed": gate.passed,
        "skipped": gate.skipped,
        "outlier_ranks": gate.outlier_ranks,
        "decisions": _ranks({r: {**decision_tuple(d), "evidence": str(d.loc)} for r, d in gate.decisions.items()}),
        "pass_totals": _ranks(gate.pass_totals),
        "proposed_pass_totals": _ranks(gate.proposed_totals),
        "ceiling_start": gate.ceiling_start,
        "in_ceiling_window": gate.in_ceiling_window,
        "missing_ranks": gate.missing_ranks,
    }


SCHEMA_VERSION = 8  # of `diff --json`; raised when a key changes meaning or goes away (README, JSON output)
PAIRING_RUNS = 20  # window pairing runs listed by default (the rest summed per kind; all with full_window)


def window_dict(w: Window, full: bool = False) -> dict:
    """The corrupt-and-continue window: its extent, pairing totals per kind, and the first PAIRING_RUNS runs
    (every run with `full`: a long window alternates kinds tens of thousands of times)."""
    totals: dict[str, dict[str, int]] = {}
    for p in w.pairings:
        total = totals.setdefault(p.kind.value, {"runs": 0, "collectives": 0})
        total["runs"] += 1
        total["collectives"] += p.collectives
    shown = w.pairings if full else w.pairings[:PAIRING_RUNS]
    return {
        "comm": w.comm, "collectives": w.collectives, "collectives_min": w.collectives_min,
        "completed_by_some": None if w.completed_by_some is None else {
            "seq": w.completed_by_some[0], "ranks": list(w.completed_by_some[1])},
        "first_seq": w.first_seq, "last_seq": w.last_seq, "completion_known": w.completion_known,
        "pairing_runs": len(w.pairings), "pairing_totals": totals,
        "pairings_complete": len(shown) == len(w.pairings),
        "pairings": [{"first_seq": p.first_seq, "last_seq": p.last_seq, "kind": p.kind.value,
                      "collectives": p.collectives} for p in shown],
    }


def side_by_side_dict(view: SideBySide) -> dict:
    """`diff --around N --json`: the aligned lines around the root and the first visible mismatch."""
    def lines(rows) -> list[dict]:
        return [{"seq": line.seq, "marks": list(line.marks),
                 "ops": _ranks({r: op_dict(op) for r, op in line.ops.items()})} for line in rows]

    return {"comm": view.comm, "around": view.around, "outlier_ranks": view.outlier_ranks, "kind": view.kind,
            "size": view.size, "root_seq": view.root_seq, "visible_seq": view.visible_seq,
            "near_root": lines(view.near_root), "near_visible": lines(view.near_visible)}


def view_dict(view: View | None) -> dict | None:
    """The part of the job `--rank`/`--comm` chose (None: all of it)."""
    if view is None or view.whole:
        return None
    return {"ranks": sorted(view.ranks) if view.ranks is not None else None, "comm": view.comm}


def counted_dict(counted: dict[int, CountedProgress]) -> dict:
    """rank -> PyTorch's counts past its records: launched, completed, their lines, and where its records end
    (`records_launched`, `records_completed`: what the records alone say, the completed one null where no record
    says what completed; `records_evidence`: the last record at or before where they end)."""
    return {str(r): {"launched": c.launched, "completed": c.completed, "evidence": [str(loc) for loc in c.at],
                     "records_launched": c.records_launched, "records_completed": c.records_completed,
                     "records_evidence": None if c.records_at is None else str(c.records_at)}
            for r, c in sorted(counted.items())}


def diff_dict(d: Diagnosis, full_window: bool = False, side: SideBySide | None = None,
              view: View | None = None) -> dict:
    """What `diff --json` prints: the verdict, root, first visible mismatch, window, wedge and receipts.
    `full_window`: every pairing run of the window; `side`: the aligned view of `--around`; `view`: the part of
    the job that was analysed."""
    root = None
    if d.root is not None:
        r = d.root
        root = {
            "comm": r.comm, "seq": r.seq, "seq_range": list(r.seq_range) if r.seq_range else None,
            "outlier_ranks": r.outlier_ranks,
            "reference_ranks": r.reference_ranks, "unplaced_ranks": r.unplaced_ranks, "step": d.root_step,
            "kind": r.kind, "size": r.size,
            "pinned_by": r.pinned_by, "ambiguity": ambiguity.ambiguity(r), "majority": r.majority,
            "kinds": list(r.kinds), "narrowed_by": list(r.narrowed_by), "compared": list(r.compared),
            "departs_again": r.departs_again,
            "unstopped": r.unstopped,
            "may_sum_apart_by_design": r.may_sum_apart_by_design,
            "comm_candidates": [r.comm, *r.undecided_comms] if r.undecided_comms else [],
            "may_be_held_back_by": list(r.may_be_held_back_by),
            "outlier_candidates": sorted(r.outlier_candidates),
            "waiting_candidates": _ranks({r: sorted(comms) for r, comms in r.waiting_candidates.items()}),
            "where_stacks_part": _by_rank(root_words.where_stacks_part(r)),
            "counts_by_type": {t: _ranks(c) for t, c in r.counts_by_type.items()},
            "contradictions": [{"what": words.contradiction_words(c), "evidence": [str(loc) for loc in c.locs]} for c in r.contradictions],
            "ops": {str(rank): op_dict(op) for rank, op in sorted(r.ops.items())},
            "cause": words.cause(d),
        }
    visible = None
    if d.first_visible is not None:
        comm, seq = d.first_visible
        visible = {"comm": comm, "seq": seq,
                   "ops": {str(k): op_dict(v) for k, v in sorted(d.comms[comm].first_visible_ops.items())}}
    window = window_dict(d.window, full_window) if d.window is not None else None
    wedge = None
    if d.wedge is not None:
        w = d.wedge
        wedge = {
            "comm": w.comm, "seq": w.seq if w.pinned else None, "seq_range": list(w.seq_range),
            "bounded_by": w.bounded_by, "kind": w.kind.value, "launched": _ranks(w.launched),
            "completed": _ranks(w.completed), "waiting_ranks": w.waiting_ranks, "absent_ranks": w.absent_ranks,
            "ops": {str(k): op_dict(v) for k, v in sorted(w.ops.items())},
            "waiting_past": {str(k): op_dict(v) for k, v in sorted(w.waiting_past.items())},
            "launched_floors": w.launched_floors,
            "counted": counted_dict(w.counted),
            "cycle": [{"rank": r, "comm": c, "seq": s} for r, c, s in w.cycle],
            "confirmed_by": w.confirmed_by,
        }
    return {
        "schema_version": SCHEMA_VERSION,
        "view": view_dict(view),
        "verdict": d.verdict.value,
        "summary": words.summary(d),
        "ranks": d.ranks,
        "stand_in_ranks": {str(rank): process for rank, process in sorted(d.stand_in_ranks.items())},
        "root": root,
        "first_visible_mismatch": visible,
        "window": window,
        "wedge": wedge,
        "gate": gate_dict(d.gate) if d.gate else None,
        "comms": [
            {"comm": c, "ranks": a.ranks, "launched": _ranks(a.launched),
             "launched_floors": sorted(a.launched_floors), "completed": _ranks(a.completed),
             "counted": counted_dict(a.raised),
             "first_visible_mismatch": a.first_visible,
             "root_seq_range": list(a.root.seq_range) if a.root and a.root.seq_range else None}
            for c, a in sorted(d.comms.items())
        ],
        "ras": [
            {"comm": c, "replies": len(h.states), "disagree": h.disagree, "moving": h.moving, "stuck": h.stuck,
             "missing_ranks": h.missing_ranks,
             "unresponsive_ranks": h.unresponsive_ranks, "dead_ranks": h.dead_ranks,
             "evidence": [str(loc) for loc in h.locations]}
            for c, h in sorted(d.ras.items())
        ],
        "contradictions": [
            {"comm": c.comm, "rank": c.rank, "values": {k: {"count": v, "evidence": str(loc)}
                                                         for k, (v, loc) in c.values.items()}, "note": c.note}
            for c in d.reconciliation.contradictions
        ],
        "corrupted_fingerprints": [
            {"rank": f.rank, "step": f.step, "op": f.op, "tag": f.tag, "sum": f.sum, "expected_sum": f.expected_sum,
             "evidence": str(f.loc)} for f in d.corrupted_fingerprints
        ],
        "checksum_splits": [
            {"step": step, "values": _ranks({r: (row.sum if row.sum is not None else row.digest)
                                             for r, row in rows.items()}),
             "evidence": [str(row.loc) for _, row in sorted(rows.items())]}
            for step, rows in sorted(d.checksum_splits.items())
        ],
        "caveats": words.caveats(d),
        "notes": [note_dict(note) for note in d.notes],
        "evidence": [{**location_dict(f.loc), "kind": f.fact.kind, "says": receipt_words(f.fact)} for f in d.evidence],
        "problems": [problem_dict(p) for p in d.problems],
        **({"side_by_side": side_by_side_dict(side)} if side is not None else {}),
    }


def _tally_dict(t: RankTally) -> dict:
    return {"steps": t.steps, "passes": t.passes, "skips": t.skips, "would_pass": t.would_pass,
            "proposed_pass_total": t.proposed_pass_total, "steps_in_window": t.in_window}


def _lockstep_counts(tallies: dict[int, RankTally]) -> bool:
    return len({(t.passes, t.skips) for t in tallies.values()}) <= 1


def coverage_dict(c: GateCoverage) -> dict:
    """What `gates --json` prints: the verdict, totals, per-rank tallies and one object per session."""
    return {
        "verdict": c.verdict.value,
        "verdict_label": c.verdict.label,
        "summary": words.coverage_summary(c),
        "totals": {
            "sessions": len(c.sessions), "steps": c.steps, "steps_in_window": c.steps_in_window,
            "sessions_exercised": len(c.exercised_sessions), "sessions_window_unknown": len(c.unknown_sessions),
            "sessions_with_disagreement": len(c.disagreeing_sessions),
            "sessions_lockstep": len(c.lockstep_sessions),
        },
        "ranks": c.ranks,
        "per_rank": {str(r): _tally_dict(t) for r, t in sorted(c.totals.items())},
        "counts_lockstep": _lockstep_counts(c.totals),
        "sessions": [
            {
                "session": s.name, "folder": s.folder, "index": s.index, "ranks": s.ranks, "steps": s.steps,
                "first_step": s.first_step, "last_step": s.last_step, "ceiling_start": s.ceiling_start,
                "max_seq": s.max_seq, "headroom": s.headroom, "steps_in_window": s.steps_in_window,
                "first_step_in_window": s.first_step_in_window, "exercised": s.exercised,
                "lockstep": s.lockstep, "counts_lockstep": _lockstep_counts(s.tallies),
                "disagreeing_steps": s.disagreeing_steps, "missing_steps": _ranks(s.missing_steps),
                "per_rank": {str(r): _tally_dict(t) for r, t in sorted(s.tallies.items())},
                "first_disagreement": None if s.disagreement is None else {
                    "step": s.disagreement.step, "passed": s.disagreement.passed,
                    "skipped": s.disagreement.skipped, "outlier_ranks": s.disagreement.outlier_ranks,
                    "in_ceiling_window": s.disagreement.in_ceiling_window,
                    "evidence": [str(loc) for loc in s.disagreement.locations],
                },
                "evidence": str(s.first_location) if s.first_location else None,
            }
            for s in c.sessions
        ],
    }


def _rounded(values: list[float | None]) -> list[float | None]:
    return [None if v is None else round(v, 4) for v in values]


def run_dict(run: RunAcceptance) -> dict:
    """One run of `acceptance --json`."""
    return {
        "file": run.file, "lines": run.lines, "processes": run.processes,
        "per_position": _rounded(run.per_position),
        "mean_acceptance_length": None if run.mean_acceptance_length is None else round(run.mean_acceptance_length, 4),
        "conditional": _rounded(run.conditional),
        "collapsed": run.collapsed, "reasons": run.reasons, "low": run.low, "low_reasons": run.notes,
        "acceptance_rate": None if run.acceptance_rate is None else round(run.acceptance_rate, 4),
        "accepted": run.accepted, "drafted": run.drafted, "weighted_by_drafted": run.weighted,
        "collapsed_lines": [str(loc) for loc in run.collapsed_lines],
    }


def acceptance_dict(report: AcceptanceReport) -> dict:
    """What `acceptance --json` prints: `{"runs": [...]}` plus the baseline and the options used."""
    return {
        "runs": [run_dict(r) for r in report.runs],
        "baseline": run_dict(report.baseline) if report.baseline else None,
        "threshold": report.options.threshold,
        "baseline_margin": report.options.baseline_margin,
        "low_rate": report.options.low_rate,
    }
