"""Rich terminal output. The Console is passed in, so tests can record it."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from ..model import Diagnostic, Evidence, Severity


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
