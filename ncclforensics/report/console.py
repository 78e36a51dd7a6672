"""Rich terminal output. The Console is passed in, so tests can record it."""

from __future__ import annotations

from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ..align.acceptance import AcceptanceReport
from ..align.coverage import GateCoverage, Jurisdiction
from ..align.diagnosis import Diagnosis
from ..model import Diagnostic, Evidence, Severity, Verdict
from . import words
from .escape import markup as _m
from .escape import printable
from .words import window_words


def render_problems(console: Console, problems: list[Diagnostic]) -> None:
    """One line per problem, `path:line: message`, for stderr."""
    lines = [f"{'error' if p.severity is Severity.ERROR else 'warning'}: {printable(p)}" for p in problems]
    if lines:  # one write: a folder of 100,000 empty files is 100,000 lines
        console.out("\n".join(lines), highlight=False)


def render_parse_table(console: Console, evidence: list[Evidence]) -> None:
    """A table: file, format, records, ranks, communicators, problems."""
    table = Table(title="Evidence files", show_lines=False)
    for column in ("file", "format", "records", "ranks", "comms", "problems"):
        table.add_column(column, overflow="fold")
    for item in evidence:
        ranks = item.ranks
        table.add_row(
            _m(item.path),
            (item.format.value + "".join(f" + {fmt.value}" for fmt in item.also)) if item.format
            else "[red]unrecognised[/red]",
            str(item.record_count),
            _span(ranks),
            "\n".join(_m(c) for c in item.comms) or "-",
            str(len(item.problems)) if item.problems else "-",
        )
    console.print(table)


def _span(ranks: list[int]) -> str:
    if not ranks:
        return "-"
    if len(ranks) > 4 and ranks == list(range(ranks[0], ranks[-1] + 1)):
        return f"{ranks[0]}..{ranks[-1]}"
    return ",".join(map(str, ranks))


_VERDICT_STYLE = {
    Verdict.DIVERGED: "bold white on red",
    Verdict.CONSISTENT: "bold white on green",
    Verdict.TRANSIENT: "bold black on yellow",
    Verdict.INCONCLUSIVE: "bold black on yellow",
}


def render_diagnosis(console: Console, d: Diagnosis) -> None:
    """The diff report: verdict first, then root, cause, window, wedge, communicators, evidence, caveats."""
    console.print(Panel(Text(printable(words.summary(d) or d.verdict.value, True)),
                        title=Text(f" {d.verdict.value.upper()} ", style=_VERDICT_STYLE[d.verdict]),
                        title_align="left"))
    if d.root is not None:
        r = d.root
        table = Table(title=f"Root: first divergent collective, comm {_m(r.comm)}, {_m(words.where(r))}",
                      title_justify="left",
                      show_edge=False)
        for column in ("rank", "role", "seq", "collective", "state", "evidence"):
            table.add_column(column, overflow="fold")
        for rank, op in sorted(r.ops.items()):
            role = "[bold red]outlier[/]" if rank in r.outlier_ranks else "reference"
            where = _m(op.loc) + (f"\n{_m(op.fr_loc)}" if op.fr_loc and op.fr_loc != op.loc else "")
            table.add_row(str(rank), role, str(op.seq), _m(op.describe()), _m(op.state or "-"), where)
        console.print(table)
        kinds = r.kind if len(r.kinds) < 2 else " or ".join(r.kinds)
        console.print(f"  kind: {_m(kinds)} ({r.size}); placed by {_m(r.pinned_by)}; outlier rank(s): "
                      f"{', '.join(map(str, r.outlier_ranks))}", highlight=False)
        if d.root_step is not None:
            console.print(f"  step: {d.root_step}", highlight=False)
        if d.first_visible is not None and d.first_visible[1] != r.seq:
            console.print(f"  first visible mismatch (what a position-by-position check reports): comm "
                          f"{_m(d.first_visible[0])} seq {d.first_visible[1]}", highlight=False)
    cause = words.cause(d)
    if cause:
        console.print(Panel(Text(printable(cause, True)), title="Cause", title_align="left"))
    if d.window is not None and not d.window.collectives:
        console.print(Text(printable(window_words(d.window), True), style="italic"))
    elif d.window is not None:
        w = d.window
        count = str(w.collectives) if w.collectives == w.collectives_min else \
            f"{w.collectives_min}..{w.collectives}"
        table = Table(title=f"Corrupt-and-continue window: {count} collectives, seq {w.first_seq}..{w.last_seq}"
                      + ("" if w.completion_known else " (completion inferred from launches)"),
                      title_justify="left", show_edge=False)
        table.add_column("seqs")
        table.add_column("pairing")
        table.add_column("collectives")
        for p in w.pairings[:PAIRING_ROWS]:
            table.add_row(f"{p.first_seq}..{p.last_seq}", _pairing_label(p.kind.value), str(p.collectives))
        rest = w.pairings[PAIRING_ROWS:]
        if rest:  # a long window alternates kinds thousands of times: sum the rest up by kind
            totals: dict[str, int] = {}
            for p in rest:
                totals[p.kind.value] = totals.get(p.kind.value, 0) + p.collectives
            table.add_row(f"{rest[0].first_seq}..{rest[-1].last_seq}",
                          f"{len(rest)} more runs (all in --json): "
                          + ", ".join(f"{_pairing_label(kind)} {n}" for kind, n in totals.items()),
                          str(sum(totals.values())))
        if w.pairings:
            console.print(table)
        else:
            console.print(Text(table.title, style="italic"))
            console.print("  no records inside the window say how the ranks' collectives paired", highlight=False)
    if d.wedge is not None:
        w = d.wedge
        table = Table(title=f"Wedge: comm {_m(w.comm)} seq {w.seq}: {w.kind.value}", title_justify="left",
                      show_edge=False)
        for column in ("rank", "last launched", "last completed", "at the wedge"):
            table.add_column(column)
        for rank in sorted(w.launched):
            op = w.ops.get(rank)
            done = w.completed.get(rank)
            table.add_row(str(rank), str(w.launched[rank]), "?" if done is None else str(done),
                          _m(op.describe()) if op else "[red]never launched[/]")
        console.print(table)
        if w.cycle:
            console.print("  wait-for cycle: " + " -> ".join(f"rank {r} in {_m(c)} seq {q}" for r, c, q in w.cycle),
                          highlight=False)
        for reason in w.confirmed_by:
            console.print(f"  stopped: {_m(reason)}", highlight=False)
    if d.comms:
        table = Table(title="Communicators", title_justify="left", show_edge=False)
        for column in ("comm", "ranks", "launched", "completed", "first visible mismatch"):
            table.add_column(column, overflow="fold")
        for comm, a in sorted(d.comms.items()):
            table.add_row(_m(comm), _span(a.ranks), _per_rank(a.launched), _per_rank(a.completed),
                          str(a.first_visible or "-"))
        console.print(table)
    if d.reconciliation.contradictions:
        console.print("[bold]Sources that disagree[/]")
        for c in d.reconciliation.contradictions[:10]:
            values = "; ".join(f"{k}: {v} ({loc})" for k, (v, loc) in c.values.items())
            console.print(f"  rank {c.rank} comm {_m(c.comm)}: {_m(values)}", highlight=False, soft_wrap=True)
    if d.evidence:
        table = Table(title="Evidence", title_justify="left", show_edge=False)
        table.add_column("where", overflow="fold")
        table.add_column("says", overflow="fold")
        for finding in d.evidence[:40]:
            table.add_row(_m(finding.loc), _m(finding.says))
        console.print(table)
    for caveat in words.caveats(d):
        console.print(f"[yellow]caveat:[/] {_m(caveat)}", highlight=False, soft_wrap=True)


PAIRING_ROWS = 20  # window runs listed one by one in the terminal report


def _pairing_label(kind: str) -> str:
    if kind == "shape_equal":
        return "[yellow]silent corruption (shape-equal)[/]"
    return f"[red]{kind}[/]"


def _per_rank(values: dict) -> str:
    distinct = set(values.values())
    if len(distinct) == 1:
        value = next(iter(distinct))
        return f"all {'?' if value is None else value}"
    return ", ".join(f"{r}:{'?' if v is None else v}" for r, v in sorted(values.items()))


_COVERAGE_STYLE = {
    Jurisdiction.EXERCISED: "bold white on green",
    Jurisdiction.NOT_EXERCISED: "bold white on red",
    Jurisdiction.WINDOW_UNKNOWN: "bold black on yellow",
    Jurisdiction.NO_JOURNALS: "bold black on yellow",
}


def render_coverage(console: Console, c: GateCoverage, max_sessions: int = 25) -> None:
    """Gate coverage: the verdict, per-rank totals, then the sessions (those that disagreed or reached the
    window first, at most `max_sessions`)."""
    console.print(Panel(Text(printable(c.summary, True)),
                        title=Text(f" {c.verdict.label} ", style=_COVERAGE_STYLE[c.verdict]), title_align="left"))
    if not c.sessions:
        return
    console.print(f"{len(c.sessions)} session(s), {c.steps} step(s), {c.steps_in_window} in the ceiling window; "
                  f"{len(c.lockstep_sessions)} session(s) in lockstep", highlight=False)
    table = Table(title="Per rank, all sessions", title_justify="left", show_edge=False)
    for column in ("rank", "steps", "pass", "skip", "would pass", "proposed pass total", "in window"):
        table.add_column(column, justify="right")
    for rank, t in sorted(c.totals.items()):
        table.add_row(str(rank), str(t.steps), str(t.passes), str(t.skips), str(t.would_pass),
                      "-" if t.proposed_pass_total is None else str(t.proposed_pass_total), str(t.in_window))
    console.print(table)
    ranked = sorted(c.sessions, key=lambda s: (s.disagreement is None, not s.exercised, c.sessions.index(s)))
    table = Table(title=f"Sessions ({min(max_sessions, len(ranked))} of {len(ranked)}: disagreements and "
                        f"exercised first)", title_justify="left", show_edge=False)
    for column in ("session", "steps", "max seq / ceiling", "in window", "pass/skip per rank", "lockstep",
                   "first disagreement"):
        table.add_column(column, overflow="fold")
    receipts = []
    for s in ranked[:max_sessions]:
        counts = " ".join(f"{r}:{t.passes}/{t.skips}" for r, t in sorted(s.tallies.items()))
        first = "-"
        if s.disagreement is not None:
            g = s.disagreement
            first = f"[red]step {g.step}[/]: pass {','.join(map(str, g.passed)) or '-'}"
            receipts.append(f"{s.name}: step {g.step}: " + ", ".join(str(loc) for loc in g.locations))
        limit = "?" if s.ceiling_start is None else str(s.ceiling_start)
        table.add_row(_m(s.name), str(s.steps), f"{'?' if s.max_seq is None else s.max_seq} / {limit}",
                      "unknown" if s.steps_in_window is None else str(s.steps_in_window), counts,
                      "yes" if s.lockstep else "[yellow]no[/]", first)
    console.print(table)
    for line in receipts:
        console.print(f"  {printable(line)}", highlight=False, soft_wrap=True, markup=False)


def render_acceptance(console: Console, report: AcceptanceReport) -> None:
    """One table row per run: per-position rates, mean acceptance length, conditional acceptance, verdict."""
    table = Table(title=f"Spec-decode acceptance (collapse: conditional < {report.options.threshold:g}"
                        + (f", or more than {report.options.baseline_margin:g} below the baseline" if report.baseline
                           else "") + ")", title_justify="left", show_edge=False)
    for column in ("run", "lines", "per position", "mean length", "conditional", "verdict"):
        table.add_column(column, overflow="fold")
    runs = ([report.baseline] if report.baseline else []) + list(report.runs)
    for run in runs:
        label = ("baseline " if run is report.baseline else "") + _m(run.file)
        verdict = "[bold red]COLLAPSED[/]" if run.collapsed else "ok"
        if run is report.baseline:
            verdict = "baseline" + (" [red](collapsed itself)[/]" if run.collapsed else "")
        table.add_row(label, str(run.lines), _rates(run.per_position),
                      "-" if run.mean_acceptance_length is None else f"{run.mean_acceptance_length:.2f}",
                      _rates(run.conditional), verdict)
    console.print(table)
    for run in report.runs:
        for reason in run.reasons:
            console.print(f"  {_m(run.file)}: {_m(reason)}", highlight=False, soft_wrap=True)
        if run.collapsed_lines:
            console.print(f"  {_m(run.file)}: {len(run.collapsed_lines)} of {run.lines} line(s) collapse on their "
                          f"own, first at {_m(run.collapsed_lines[0])}", highlight=False, soft_wrap=True)


def _rates(values: list[float | None]) -> str:
    return "/".join("?" if v is None else f"{v:.2f}" for v in values) or "-"
