"""The terminal reports as plain lines, for stdout that is no terminal (a pipe, a file, a ticket).

No box drawing and no wrapping: one finding per line, so that `grep` finds a whole finding and a ticket reflows
it; every receipt (`file:line: what it says`) on a line of its own, the way compilers print them. The words are
those of the terminal report (words.py); only the layout differs.
"""

from __future__ import annotations

from collections.abc import Collection

from ..align.acceptance import AcceptanceReport, RunAcceptance
from ..align.coverage import GateCoverage
from ..align.diagnosis import Diagnosis
from ..model import Evidence, phrases
from . import root_words, wedge_words, words
from .escape import printable

PAIRING_LINES = 20  # window runs listed one by one; the rest are summed up by kind
EVIDENCE_LINES = 40
SESSION_LINES = 25


def _p(value: object) -> str:
    return printable(str(value))


def diagnosis_lines(d: Diagnosis) -> list[str]:
    """The diff report: verdict line, root, cause, window, wedge, communicators, evidence, caveats."""
    out = [verdict_line(d)]
    out += _section(root_lines(d))
    cause = words.cause(d)
    if cause:
        out.append(f"Cause: {_p(cause)}")
    out += _section(window_lines(d))
    out += _section(wedge_lines(d))
    out += _section(comm_lines(d))
    out += _section(contradiction_lines(d))
    out += _section(evidence_lines(d))
    out += _section(caveat_lines(d))
    return out


def _section(lines: list[str]) -> list[str]:
    return [""] + lines if lines else []


def verdict_line(d: Diagnosis) -> str:
    """`DIVERGED: <summary>`."""
    return f"{words.verdict_label(d)}: {_p(words.summary(d))}"


def root_heading(d: Diagnosis) -> str:
    """`Root: comm X, at seq 25: 1 extra collective; placed by ...; outlier rank 0; step 5`."""
    r = d.root
    return (f"Root: comm {_p(r.comm)}, {root_words.where(r)}: {root_words.kind_words(r)}; placed by {_p(r.pinned_by)}; "
            f"outlier {phrases.ranks_words(r.outlier_ranks)}" + (f"; step {d.root_step}" if d.root_step is not None else ""))


def root_locations(d: Diagnosis) -> dict[int, list[str]]:
    """Per rank at the root, where its collective was read (the log line, then the Flight Recorder entry)."""
    return {rank: [_p(loc) for loc in dict.fromkeys([op.loc] + ([op.fr_loc] if op.fr_loc else []))]
            for rank, op in sorted(d.root.ops.items())}


def visible_line(d: Diagnosis) -> str | None:
    """Where a position-by-position check would first see a mismatch, when that is not the root."""
    if d.first_visible is None or d.root is None or d.first_visible[1] == d.root.seq:
        return None
    return (f"First visible mismatch (what a position-by-position check reports): comm {_p(d.first_visible[0])} "
            f"seq {d.first_visible[1]}")


def root_lines(d: Diagnosis) -> list[str]:
    """The root: heading, one line per rank, each rank's evidence on lines of its own."""
    r = d.root
    if r is None:
        return []
    out = [root_heading(d)]
    locations = root_locations(d)
    for rank, op in sorted(r.ops.items()):
        role = root_words.role(r, rank)
        out.append(f"  rank {rank} ({role}) seq {op.seq}: {_p(op.describe())}" + (f", {_p(op.state)}" if op.state else ""))
        out += [f"    {loc}" for loc in locations[rank]]
    visible = visible_line(d)
    return out + ([visible] if visible else [])


def comm_lines(d: Diagnosis) -> list[str]:
    """One line per communicator: ranks, launched and completed counts, first visible mismatch."""
    if not d.comms:
        return []
    out = ["Communicators:"]
    for comm, a in sorted(d.comms.items()):
        visible = f"; first visible mismatch at seq {a.first_visible}" if a.first_visible else ""
        out.append(f"  comm {_p(comm)}: {phrases.ranks_words(a.ranks)}; launched {per_rank(a.launched, a.launched_floors)}; "
                   f"completed {per_rank(a.completed)}{visible}")
    return out


def contradiction_lines(d: Diagnosis) -> list[str]:
    """Sources that disagree about one rank's count, each source on its own line."""
    if not d.reconciliation.contradictions:
        return []
    out = ["Sources that disagree:"]
    for c in d.reconciliation.contradictions[:10]:
        out.append(f"  rank {c.rank} comm {_p(c.comm)}:")
        out += [f"    {_p(loc)}: {_p(k)}: {v}" for k, (v, loc) in c.values.items()]
    return out


def evidence_findings(d: Diagnosis) -> list:
    """The receipts not already shown under the root."""
    shown = {loc for locs in (root_locations(d).values() if d.root else []) for loc in locs}
    return [f for f in d.evidence if _p(f.loc) not in shown]


def evidence_lines(d: Diagnosis) -> list[str]:
    """`  file:line: what it says`, one receipt a line."""
    findings = evidence_findings(d)
    if not findings:
        return []
    out = ["Evidence:"] + [f"  {_p(f.loc)}: {_p(words.finding_says(d, f))}" for f in findings[:EVIDENCE_LINES]]
    if len(findings) > EVIDENCE_LINES:
        out.append(f"  ... {len(findings) - EVIDENCE_LINES} more (all in --json)")
    return out


def caveat_lines(d: Diagnosis) -> list[str]:
    """`caveat: ...`, one a line."""
    return [f"caveat: {_p(c)}" for c in words.caveats(d)]


def window_lines(d: Diagnosis) -> list[str]:
    """The corrupt-and-continue window and how the ranks' collectives paired in it."""
    w = d.window
    if w is None:
        return []
    if not w.collectives:
        return [_p(wedge_words.window_words(w))]
    count = phrases.plural(w.collectives, "collective") if w.collectives == w.collectives_min else \
        f"{w.collectives_min}..{w.collectives} collectives"
    out = [f"Corrupt-and-continue window: {count} in comm {_p(w.comm)}, seq {w.first_seq}..{w.last_seq}"
               + ("" if w.completion_known else " (completion inferred from launches)")]
    for p in w.pairings[:PAIRING_LINES]:
        out.append(f"  seq {p.first_seq}..{p.last_seq}: {pairing_words(p.kind.value)}, "
                   f"{phrases.plural(p.collectives, 'collective')}")
    rest = w.pairings[PAIRING_LINES:]
    if rest:
        totals = pairing_totals(rest)
        out.append(f"  seq {rest[0].first_seq}..{rest[-1].last_seq}: {len(rest)} more runs (all in --json --full-window), "
                   f"{phrases.plural(sum(totals.values()), 'collective')}: "
                   + ", ".join(f"{pairing_words(kind)} {n}" for kind, n in totals.items()))
    if not w.pairings:
        out.append("  no records inside the window say how the ranks' collectives paired")
    if w.completed_by_some is not None:
        out.append(f"  {wedge_words.completed_by_some_words(w)}")
    return out


def pairing_words(kind: str) -> str:
    """`silent corruption (shape-equal)`, `count mismatch`, ..."""
    return "silent corruption (shape-equal)" if kind == "shape_equal" else kind.replace("_", " ")


def pairing_totals(runs) -> dict[str, int]:
    """Collectives per pairing kind over many runs (a long window alternates kinds thousands of times)."""
    totals: dict[str, int] = {}
    for p in runs:
        totals[p.kind.value] = totals.get(p.kind.value, 0) + p.collectives
    return totals


def wedge_lines(d: Diagnosis) -> list[str]:
    """Where progress stopped, per rank; on a consistent run, where the records end."""
    w = d.wedge
    if w is None:
        return []
    if not wedge_words.shows_wedge(d):
        return [_p(wedge_words.records_end_words(w))]
    out = [f"Wedge: comm {_p(w.comm)} {wedge_words.wedge_seq_words(w)}: {wedge_words.wedge_kind_words(w.kind)}"]
    for rank in sorted(w.launched):
        op = w.ops.get(rank)
        done = w.completed.get(rank)
        at = f"{wedge_words.wedge_at(w)} {_p(op.describe())}" if op else wedge_words.never_launched(w, rank)
        counted = wedge_words.counted_words(w, rank)
        out.append(f"  rank {rank}: last launched {wedge_words.launched_words(w, rank)}, last completed {'?' if done is None else done}; "
                   f"{at}" + (f"; {_p(counted)}" if counted else ""))
    if w.cycle:
        out.append("  wait-for cycle: " + " -> ".join(f"rank {r} in {_p(c)} seq {q}" for r, c, q in w.cycle))
    out += [f"  stopped: {_p(reason)}" for reason in w.confirmed_by]
    return out


def per_rank(values: dict, floors: Collection[int] = ()) -> str:
    """`all 49`, or `0:50, 1:49`; a value of a rank in `floors` is only known to reach it: `808 or more`."""
    shown = {r: ("?" if v is None else str(v)) + (" or more" if r in floors else "") for r, v in values.items()}
    if len(set(shown.values())) == 1:
        return f"all {next(iter(shown.values()))}"
    return ", ".join(f"{r}:{v}" for r, v in sorted(shown.items()))


def parse_lines(evidence: list[Evidence]) -> list[str]:
    """`parse`: one line per file."""
    out = []
    for item in evidence:
        fmt = (item.format.value + "".join(f" + {f.value}" for f in item.also)) if item.format else "unrecognised"
        comms = ", ".join(_p(c) for c in item.comms) or "none"
        problems = f"; {phrases.plural(len(item.problems), 'problem')}" if item.problems else ""
        out.append(f"{_p(item.path)}: {fmt}; {phrases.plural(item.record_count, 'record')}; "
                   f"{phrases.ranks_words(item.ranks)}; comms {comms}{problems}")
    return out


def coverage_lines(c: GateCoverage, max_sessions: int = SESSION_LINES) -> list[str]:
    """`gates`: the verdict, per-rank totals, then the sessions that disagreed or reached the window first."""
    out = [f"{c.verdict.label}: {_p(words.coverage_summary(c))}"]
    if not c.sessions:
        return out
    totals = (f"{phrases.plural(len(c.sessions), 'session')}, {phrases.plural(c.steps, 'step')}, "
              f"{c.steps_in_window} in the ceiling window; {len(c.lockstep_sessions)} in lockstep")
    out += ["", totals, "Per rank:"]
    for rank, t in sorted(c.totals.items()):
        proposed = "" if t.proposed_pass_total is None else f", proposed pass total {t.proposed_pass_total}"
        out.append(f"  rank {rank}: {phrases.plural(t.steps, 'step')}, {t.passes} pass, {t.skips} skip, "
                   f"{t.would_pass} would pass{proposed}, {t.in_window} in the window")
    ranked = session_order(c)
    out += ["", f"Sessions ({min(max_sessions, len(ranked))} of {len(ranked)}: disagreements and exercised first):"]
    for s in ranked[:max_sessions]:
        counts = " ".join(f"{r}:{t.passes}/{t.skips}" for r, t in sorted(s.tallies.items()))
        limit = "?" if s.ceiling_start is None else str(s.ceiling_start)
        window = "window unknown" if s.steps_in_window is None else f"{s.steps_in_window} in the window"
        out.append(f"  {_p(s.name)}: {phrases.plural(s.steps, 'step')}, max seq "
                   f"{'?' if s.max_seq is None else s.max_seq} / ceiling {limit}, {window}; pass/skip per rank "
                   f"{counts}; {'lockstep' if s.lockstep else 'not in lockstep'}")
        if s.disagreement is not None:
            g = s.disagreement
            out.append(f"    first disagreement at step {g.step}: pass on {phrases.ranks_words(g.passed)}")
            out += [f"    {_p(loc)}" for loc in g.locations]
    return out


def session_order(c: GateCoverage) -> list:
    """Sessions with a disagreement first, then exercised ones, else in input order."""
    index = {id(s): i for i, s in enumerate(c.sessions)}
    return sorted(c.sessions, key=lambda s: (s.disagreement is None, not s.exercised, index[id(s)]))


def acceptance_lines(report: AcceptanceReport) -> list[str]:
    """`acceptance`: one line per run, then why each flagged run is flagged."""
    out = [acceptance_title(report)]
    runs = ([report.baseline] if report.baseline else []) + list(report.runs)
    for run in runs:
        label = ("baseline " if run is report.baseline else "") + _p(run.file)
        out.append(f"  {label}: {run_verdict(report, run)}; {phrases.plural(run.lines, 'line')}; "
                   + "; ".join(f"{name} {value}" for name, value in run_columns(run).items()))
    for run in report.runs:
        out += [f"  {_p(run.file)}: {_p(reason)}" for reason in run.reasons + run.notes]
        if run.collapsed_lines:
            out.append(f"  {_p(run.collapsed_lines[0])}: first of {len(run.collapsed_lines)} of "
                       f"{phrases.plural(run.lines, 'line')} that collapse on their own")
    return out


def acceptance_title(report: AcceptanceReport) -> str:
    """What the verdicts mean, with the options used."""
    o = report.options
    base = f", or more than {o.baseline_margin:g} below the baseline" if report.baseline else ""
    return (f"Spec-decode acceptance (collapsed: conditional < {o.threshold:g}{base}; low: overall acceptance "
            f"< {o.low_rate:g})")


def run_verdict(report: AcceptanceReport, run: RunAcceptance) -> str:
    """`COLLAPSED`, `LOW ACCEPTANCE`, `ok`, `baseline`."""
    flag = "COLLAPSED" if run.collapsed else "LOW ACCEPTANCE" if run.low else "ok"
    if run is report.baseline:
        return "baseline" + ("" if flag == "ok" else f" ({flag.lower()} itself)")
    return flag


def run_columns(run: RunAcceptance) -> dict[str, str]:
    """The per-run values as shown: overall acceptance, per position, mean length, conditional."""
    rate = "-" if run.acceptance_rate is None else f"{run.acceptance_rate:.3f}"
    return {
        "overall": rate,
        "per position": _rates(run.per_position),
        "mean length": "-" if run.mean_acceptance_length is None else f"{run.mean_acceptance_length:.2f}",
        "conditional": _rates(run.conditional),
    }


def _rates(values: list[float | None]) -> str:
    return "/".join("?" if v is None else f"{v:.2f}" for v in values) or "-"
