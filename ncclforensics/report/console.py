"""Rich terminal output. The Console is passed in, so tests can record it."""

from __future__ import annotations

import textwrap

from rich.console import Console
from rich.measure import Measurement
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ..align.acceptance import AcceptanceReport
from ..align.coverage import GateCoverage, Jurisdiction
from ..align.diagnosis import Diagnosis
from ..model import Diagnostic, Evidence, Severity, Verdict, phrases
from . import plain, root_words, wedge_words, words
from .escape import markup as _m
from .escape import printable


def render_problems(console: Console, problems: list[Diagnostic]) -> None:
    """One line per problem, `path:line: message`, for stderr."""
    lines = [f"{'error' if p.severity is Severity.ERROR else 'warning'}: {printable(p)}" for p in problems]
    if lines and console.is_terminal and len(lines) <= 200:  # read there: wrapped between words, never in a path
        _wrapped(console, lines)
    elif lines:  # one write: a folder of 100,000 empty files is 100,000 lines
        console.out("\n".join(lines), highlight=False)


def render_parse_table(console: Console, evidence: list[Evidence]) -> None:
    """A table: file, format, records, ranks, communicators, problems (plain lines where stdout is no terminal)."""
    if not console.is_terminal:
        _plain(console, plain.parse_lines(evidence))
        return
    table = Table(title="Evidence files", show_lines=False)
    for column in ("file", "format", "records", "ranks", "comms", "problems"):
        table.add_column(column)
    for item in evidence:
        table.add_row(
            _m(item.path),
            (item.format.value + "".join(f" + {fmt.value}" for fmt in item.also)) if item.format
            else "[red]unrecognised[/red]",
            str(item.record_count),
            _span(item.ranks),
            "\n".join(_m(c) for c in item.comms) or "-",
            str(len(item.problems)) if item.problems else "-",
        )
    _table_or_lines(console, table, ["Evidence files:"] + plain.parse_lines(evidence))


def _span(ranks: list[int]) -> str:
    if not ranks:
        return "-"
    if len(ranks) > 4 and ranks == list(range(ranks[0], ranks[-1] + 1)):
        return f"{ranks[0]}..{ranks[-1]}"
    return ",".join(map(str, ranks))


def _plain(console: Console, lines: list[str]) -> None:
    """Plain lines as they are: no wrapping, no markup (the text is already printable)."""
    if lines:
        console.out("\n".join(lines), highlight=False)


def _wrapped(console: Console, lines: list[str], style: str = "") -> None:
    """Lines wrapped at the terminal's width between words, so that a path, a `file:line` or a hash (no blanks
    in it) is never split unless it alone is wider than the terminal."""
    width = max(console.width, 20)
    for line in lines:
        lead = line[:len(line) - len(line.lstrip(" "))]
        longest = max((len(word) for word in line.split()), default=0)
        hang = " " * max(0, min(len(lead) + 2, width - longest))  # less indent where a long path needs the room
        rows = textwrap.wrap(line, width, initial_indent="", subsequent_indent=hang, break_long_words=False,
                             break_on_hyphens=False, drop_whitespace=True) or [""]
        rows[0] = lead + rows[0].lstrip(" ")
        console.print(Text("\n".join(rows), style=style, no_wrap=True, overflow="ignore"), highlight=False)


def _fit(console: Console, table: Table) -> bool:
    """Give every column at least its longest word (rich shrinks the widest columns first, splitting a path in
    two even where the words would fit): True when the table now fits the console without breaking a word."""
    options = console.options
    lows, highs = [], []
    for column in table.columns:
        cells = list(column.cells) + ([column.header] if table.show_header else [])
        sizes = [Measurement.get(console, options, cell) for cell in cells]
        lows.append(max((m.minimum for m in sizes), default=1))
        highs.append(max((m.maximum for m in sizes), default=1))
    # Borders and cell padding (rich computes them itself; read, not re-derived).
    extra = table._extra_width + sum(table._get_padding_width(i) for i in range(len(table.columns)))
    room = console.width - extra
    if sum(highs) <= room:
        return True
    if sum(lows) > room:
        return False
    spare, slack = room - sum(lows), sum(h - lo for lo, h in zip(lows, highs))
    for column, lo, high in zip(table.columns, lows, highs):
        column.width = lo + spare * (high - lo) // slack
    return True


def _table_or_lines(console: Console, table: Table, lines: list[str]) -> None:
    """The table under its heading (`lines[0]`, wrapped at the terminal's width, not the table's) where it fits
    the terminal without splitting a word; else the same facts as wrapped lines."""
    table.title = None
    if _fit(console, table):
        _wrapped(console, lines[:1], style="bold")
        console.print(table)
    else:
        _wrapped(console, lines[:1], style="bold")
        _wrapped(console, lines[1:])


_VERDICT_STYLE = {
    Verdict.DIVERGED: "bold white on red",
    Verdict.CONSISTENT: "bold white on green",
    Verdict.TRANSIENT: "bold black on yellow",
    Verdict.INCONCLUSIVE: "bold black on yellow",
}


def render_diagnosis(console: Console, d: Diagnosis) -> None:
    """The diff report: verdict first, then root, cause, window, wedge, communicators, evidence, caveats. Boxes
    and tables on a terminal; plain lines elsewhere (plain.py)."""
    if not console.is_terminal:
        _plain(console, plain.diagnosis_lines(d))
        return
    label = words.verdict_label(d)
    style = "bold black on yellow" if label == "NOTHING COMPARED" else _VERDICT_STYLE[d.verdict]
    console.print(Panel(Text(printable(words.summary(d) or d.verdict.value, True)),
                        title=Text(f" {label} ", style=style), title_align="left"))
    if d.root is not None:
        _root(console, d)
    cause = words.cause(d)
    if cause:
        console.print(Panel(Text(printable(cause, True)), title="Cause", title_align="left"))
    if d.window is not None:
        _window(console, d)
    if d.wedge is not None:
        _wedge(console, d)
    if d.comms:
        table = Table(show_edge=False)
        for column in ("comm", "ranks", "launched", "completed", "first visible mismatch"):
            table.add_column(column)
        for comm, a in sorted(d.comms.items()):
            table.add_row(_m(comm), _span(a.ranks), plain.per_rank(a.launched, a.launched_floors), plain.per_rank(a.completed),
                          str(a.first_visible or "-"))
        _table_or_lines(console, table, plain.comm_lines(d))
    contradictions = plain.contradiction_lines(d)
    if contradictions:
        console.print(Text(contradictions[0], style="bold"))
        _wrapped(console, contradictions[1:])
    findings = plain.evidence_findings(d)
    if findings:
        table = Table(show_edge=False)
        table.add_column("where")
        table.add_column("says")
        for finding in findings[:plain.EVIDENCE_LINES]:
            table.add_row(_m(finding.loc), _m(words.finding_says(d, finding)))
        _table_or_lines(console, table, plain.evidence_lines(d))
        if len(findings) > plain.EVIDENCE_LINES:
            console.print(f"  ... {len(findings) - plain.EVIDENCE_LINES} more (all in --json)", highlight=False)
    for caveat in words.caveats(d):
        console.print(Text.assemble(("caveat: ", "yellow"), printable(caveat)), highlight=False)


def _root(console: Console, d: Diagnosis) -> None:
    r = d.root
    _wrapped(console, [f"Root: first divergent collective, comm {printable(r.comm)}, {printable(root_words.where(r))}"],
             style="bold")
    table = Table(show_edge=False)
    for column in ("rank", "role", "seq", "collective", "state"):
        table.add_column(column)
    for rank, op in sorted(r.ops.items()):
        role = "[bold red]outlier[/]" if rank in r.outlier_ranks else root_words.role(r, rank)
        table.add_row(str(rank), role, str(op.seq), _m(op.describe()), _m(op.state or "-"))
    if _fit(console, table):
        console.print(table)
        _wrapped(console, [f"  rank {rank}: {loc}" for rank, locs in plain.root_locations(d).items() for loc in locs])
    else:
        _wrapped(console, plain.root_lines(d)[1:])
    facts = [f"  {root_words.kind_words(r)}; placed by {printable(r.pinned_by)}; outlier "
             f"{phrases.ranks_words(r.outlier_ranks)}" + (f"; step {d.root_step}" if d.root_step is not None else "")]
    visible = plain.visible_line(d)
    _wrapped(console, facts + ([f"  {visible[0].lower()}{visible[1:]}"] if visible else []))


def _window(console: Console, d: Diagnosis) -> None:
    w = d.window
    if not w.collectives:
        console.print(Text(printable(wedge_words.window_words(w), True), style="italic"))
        return
    lines = plain.window_lines(d)
    table = Table(show_edge=False)
    table.add_column("seqs")
    table.add_column("pairing")
    table.add_column("collectives")
    for p in w.pairings[:plain.PAIRING_LINES]:
        table.add_row(f"{p.first_seq}..{p.last_seq}", _pairing_label(p.kind.value), str(p.collectives))
    rest = w.pairings[plain.PAIRING_LINES:]
    if rest:  # a long window alternates kinds thousands of times: sum the rest up by kind
        totals = plain.pairing_totals(rest)
        table.add_row(f"{rest[0].first_seq}..{rest[-1].last_seq}",
                      f"{len(rest)} more runs (all in --json --full-window): "
                      + ", ".join(f"{_pairing_label(kind)} {n}" for kind, n in totals.items()),
                      str(sum(totals.values())))
    if w.pairings:
        _table_or_lines(console, table, [line for line in lines if line.strip() != _by_some(w)])
        if w.completed_by_some is not None:
            _wrapped(console, [f"  {_by_some(w)}"])
    else:
        _wrapped(console, lines[:1], style="italic")
        _wrapped(console, lines[1:])


def _wedge(console: Console, d: Diagnosis) -> None:
    w = d.wedge
    lines = plain.wedge_lines(d)
    if not wedge_words.shows_wedge(d):
        _wrapped(console, lines, style="italic")
        return
    table = Table(show_edge=False)
    for column in ("rank", "last launched", "last completed", "at the wedge"):
        table.add_column(column)
    for rank in sorted(w.launched):
        op = w.ops.get(rank)
        done = w.completed.get(rank)
        counted = wedge_words.counted_words(w, rank)
        table.add_row(str(rank), wedge_words.launched_words(w, rank), "?" if done is None else str(done),
                      ((_m(op.describe()) if w.pinned else _m(f"{wedge_words.wedge_at(w)} {op.describe()}")) if op
                       else "[red]never launched[/]" if rank in w.absent_ranks
                       else _m(wedge_words.never_launched(w, rank))) + (f"; {_m(counted)}" if counted else ""))
    _table_or_lines(console, table, [line for line in lines if not line.startswith(("  wait-for", "  stopped"))])
    _wrapped(console, [line for line in lines if line.startswith(("  wait-for", "  stopped"))])


def _by_some(w) -> str | None:
    return wedge_words.completed_by_some_words(w) if w.completed_by_some is not None else None


def _pairing_label(kind: str) -> str:
    if kind == "shape_equal":
        return "[yellow]silent corruption (shape-equal)[/]"
    return f"[red]{kind}[/]"


_COVERAGE_STYLE = {
    Jurisdiction.EXERCISED: "bold white on green",
    Jurisdiction.NOT_EXERCISED: "bold white on red",
    Jurisdiction.WINDOW_UNKNOWN: "bold black on yellow",
    Jurisdiction.NO_JOURNALS: "bold black on yellow",
}


def render_coverage(console: Console, c: GateCoverage, max_sessions: int = plain.SESSION_LINES) -> None:
    """Gate coverage: the verdict, per-rank totals, then the sessions (those that disagreed or reached the
    window first, at most `max_sessions`). Plain lines where stdout is no terminal."""
    if not console.is_terminal:
        _plain(console, plain.coverage_lines(c, max_sessions))
        return
    console.print(Panel(Text(printable(words.coverage_summary(c), True)),
                        title=Text(f" {c.verdict.label} ", style=_COVERAGE_STYLE[c.verdict]), title_align="left"))
    if not c.sessions:
        return
    lines = plain.coverage_lines(c, max_sessions)
    _wrapped(console, [lines[2]])
    table = Table(title="Per rank, all sessions", title_justify="left", show_edge=False)
    for column in ("rank", "steps", "pass", "skip", "would pass", "proposed pass total", "in window"):
        table.add_column(column, justify="right")
    for rank, t in sorted(c.totals.items()):
        table.add_row(str(rank), str(t.steps), str(t.passes), str(t.skips), str(t.would_pass),
                      "-" if t.proposed_pass_total is None else str(t.proposed_pass_total), str(t.in_window))
    sessions_at = lines.index("", 3)
    _table_or_lines(console, table, lines[3:sessions_at])
    ranked = plain.session_order(c)
    table = Table(title=f"Sessions ({min(max_sessions, len(ranked))} of {len(ranked)}: disagreements and "
                        f"exercised first)", title_justify="left", show_edge=False)
    for column in ("session", "steps", "max seq / ceiling", "in window", "pass/skip per rank", "lockstep",
                   "first disagreement"):
        table.add_column(column)
    receipts = []
    for s in ranked[:max_sessions]:
        counts = " ".join(f"{r}:{t.passes}/{t.skips}" for r, t in sorted(s.tallies.items()))
        first = "-"
        if s.disagreement is not None:
            g = s.disagreement
            first = f"[red]step {g.step}[/]: pass {','.join(map(str, g.passed)) or '-'}"
            receipts.append(f"{printable(s.name)}: step {g.step}:")
            receipts += [f"  {printable(loc)}" for loc in g.locations]
        limit = "?" if s.ceiling_start is None else str(s.ceiling_start)
        table.add_row(_m(s.name), str(s.steps), f"{'?' if s.max_seq is None else s.max_seq} / {limit}",
                      "unknown" if s.steps_in_window is None else str(s.steps_in_window), counts,
                      "yes" if s.lockstep else "[yellow]no[/]", first)
    if _fit(console, table):
        console.print(table)
        _wrapped(console, [f"  {line}" for line in receipts])
    else:
        _wrapped(console, lines[sessions_at + 1:])


def render_acceptance(console: Console, report: AcceptanceReport) -> None:
    """One table row per run: overall acceptance, per-position rates, mean acceptance length, conditional
    acceptance, verdict; then why each flagged run is flagged. Plain lines where stdout is no terminal."""
    lines = plain.acceptance_lines(report)
    if not console.is_terminal:
        _plain(console, lines)
        return
    table = Table(title=lines[0], title_justify="left", show_edge=False)
    for column in ("run", "lines", "overall", "per position", "mean length", "conditional", "verdict"):
        table.add_column(column)
    runs = ([report.baseline] if report.baseline else []) + list(report.runs)
    for run in runs:
        label = ("baseline " if run is report.baseline else "") + _m(run.file)
        verdict = plain.run_verdict(report, run)
        if verdict != "ok":
            verdict = f"[bold red]{verdict}[/]" if run is not report.baseline else f"[red]{verdict}[/]"
        columns = plain.run_columns(run)
        table.add_row(label, str(run.lines), columns["overall"], columns["per position"], columns["mean length"],
                      columns["conditional"], verdict)
    if _fit(console, table):
        console.print(table)
        _wrapped(console, lines[1 + len(runs):])
    else:
        _wrapped(console, lines)
