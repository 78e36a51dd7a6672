"""Rich terminal output. The Console is passed in, so tests can record it."""

from __future__ import annotations

from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ..align.diagnosis import Diagnosis
from ..model import Diagnostic, Evidence, Severity, Verdict


def render_problems(console: Console, problems: list[Diagnostic]) -> None:
    """One line per problem, `path:line: message`, for stderr."""
    for problem in problems:
        label = "error" if problem.severity is Severity.ERROR else "warning"
        console.print(f"{label}: {problem}", markup=False, highlight=False, soft_wrap=True)


def render_parse_table(console: Console, evidence: list[Evidence]) -> None:
    """A table: file, format, records, ranks, communicators, problems."""
    table = Table(title="Evidence files", show_lines=False)
    for column in ("file", "format", "records", "ranks", "comms", "problems"):
        table.add_column(column, overflow="fold")
    for item in evidence:
        ranks = item.ranks
        table.add_row(
            item.path,
            item.format.value if item.format else "[red]unrecognised[/red]",
            str(item.record_count),
            _span(ranks),
            "\n".join(item.comms) or "-",
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
    console.print(Panel(Text(d.summary or d.verdict.value), title=Text(f" {d.verdict.value.upper()} ",
                                                                        style=_VERDICT_STYLE[d.verdict]),
                        title_align="left"))
    if d.root is not None:
        r = d.root
        where = f"seq {r.seq}" if r.seq_range[0] == r.seq_range[1] else f"seq {r.seq_range[0]}..{r.seq_range[1]}"
        table = Table(title=f"Root: first divergent collective, comm {r.comm}, {where}", title_justify="left",
                      show_edge=False)
        for column in ("rank", "role", "seq", "collective", "state", "evidence"):
            table.add_column(column, overflow="fold")
        for rank, op in sorted(r.ops.items()):
            role = "[bold red]outlier[/]" if rank in r.outlier_ranks else "reference"
            table.add_row(str(rank), role, str(op.seq), op.describe(), op.state or "-", str(op.loc))
        console.print(table)
        console.print(f"  kind: {r.kind} ({r.size}); placed by {r.pinned_by}; outlier rank(s): "
                      f"{', '.join(map(str, r.outlier_ranks))}", highlight=False)
        if d.root_step is not None:
            console.print(f"  step: {d.root_step}", highlight=False)
        if d.first_visible is not None and d.first_visible[1] != r.seq:
            console.print(f"  first visible mismatch (what a position-by-position check reports): comm "
                          f"{d.first_visible[0]} seq {d.first_visible[1]}", highlight=False)
    if d.cause:
        console.print(Panel(Text(d.cause), title="Cause", title_align="left"))
    if d.window is not None:
        w = d.window
        count = str(w.collectives) if w.collectives == w.collectives_min else \
            f"{w.collectives_min}..{w.collectives}"
        table = Table(title=f"Corrupt-and-continue window: {count} collectives, seq {w.first_seq}..{w.last_seq}"
                      + ("" if w.completion_known else " (completion inferred from launches)"),
                      title_justify="left", show_edge=False)
        table.add_column("seqs")
        table.add_column("pairing")
        table.add_column("collectives")
        for p in w.pairings:
            style = "red" if p.kind.value != "shape_equal" else "yellow"
            label = "silent corruption (shape-equal)" if p.kind.value == "shape_equal" else p.kind.value
            table.add_row(f"{p.first_seq}..{p.last_seq}", f"[{style}]{label}[/]", str(p.collectives))
        console.print(table)
    if d.wedge is not None:
        w = d.wedge
        table = Table(title=f"Wedge: comm {w.comm} seq {w.seq}: {w.kind.value}", title_justify="left",
                      show_edge=False)
        for column in ("rank", "last launched", "last completed", "at the wedge"):
            table.add_column(column)
        for rank in sorted(w.launched):
            op = w.ops.get(rank)
            done = w.completed.get(rank)
            table.add_row(str(rank), str(w.launched[rank]), "?" if done is None else str(done),
                          op.describe() if op else "[red]never launched[/]")
        console.print(table)
        if w.cycle:
            console.print("  wait-for cycle: " + " -> ".join(f"rank {r} in {c} seq {s}" for r, c, s in w.cycle),
                          highlight=False)
        for reason in w.confirmed_by:
            console.print(f"  stopped: {reason}", highlight=False)
    if d.comms:
        table = Table(title="Communicators", title_justify="left", show_edge=False)
        for column in ("comm", "ranks", "launched", "completed", "first visible mismatch"):
            table.add_column(column, overflow="fold")
        for comm, a in sorted(d.comms.items()):
            table.add_row(comm, _span(a.ranks), _per_rank(a.launched), _per_rank(a.completed),
                          str(a.first_visible or "-"))
        console.print(table)
    if d.reconciliation.contradictions:
        console.print("[bold]Sources that disagree[/]")
        for c in d.reconciliation.contradictions[:10]:
            values = "; ".join(f"{k}: {v} ({loc})" for k, (v, loc) in c.values.items())
            console.print(f"  rank {c.rank} comm {c.comm}: {values}", highlight=False, soft_wrap=True)
    if d.evidence:
        table = Table(title="Evidence", title_justify="left", show_edge=False)
        table.add_column("where", overflow="fold")
        table.add_column("says", overflow="fold")
        for finding in d.evidence[:40]:
            table.add_row(str(finding.loc), finding.says)
        console.print(table)
    for caveat in d.caveats:
        console.print(f"[yellow]caveat:[/] {caveat}", highlight=False, soft_wrap=True)


def _per_rank(values: dict) -> str:
    distinct = set(values.values())
    if len(distinct) == 1:
        value = next(iter(distinct))
        return f"all {'?' if value is None else value}"
    return ", ".join(f"{r}:{'?' if v is None else v}" for r, v in sorted(values.items()))
