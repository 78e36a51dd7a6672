"""Rendering for the live commands: the RAS watcher's communicator table and its summary (rich)."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from ..errors import printable
from .ras_watch import CommState, RasWatcher, WatchSummary

_STYLE = {CommState.OK: "green", CommState.MISMATCH: "yellow", CommState.SKEW: "cyan", CommState.STUCK: "bold red",
          CommState.GONE: "dim"}


def plural(n: int, word: str) -> str:
    """`1 poll`, `2 polls`."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def retry_words(error: str, delay: float, attempt: int) -> str:
    """A failed poll and when the next comes: `retrying in 2s (failed poll 2): cannot connect ...`."""
    return f"retrying in {delay:g}s (failed poll {attempt}): {printable(error)}"


def comm_table(watcher: RasWatcher, status: str | None = None) -> RenderableType:
    """One row per communicator the watcher has seen: state, counts, missing and dead ranks; below it `status`
    (the last failed poll, until a reply arrives), inside the live view rather than printed beside it."""
    summary = watcher.summary
    table = Table(title=f"NCCL RAS at {watcher.client.address}: {plural(summary.polls_ok, 'poll')}, "
                        f"{summary.failures} failed", title_justify="left")
    for column in ("comm", "size", "state", "counts", "missing", "dead", "same for"):
        table.add_column(column, no_wrap=column != "counts")
    for comm, track in sorted(watcher.tracks.items()):
        view = track.view
        table.add_row(
            comm, str(view.size or ""), Text(track.state.value, style=_STYLE[track.state]), _counts(view.counts)
            or view.describe_counts(), _list(view.missing), _list(view.dead), plural(track.unchanged, "poll"))
    if status is None:
        return table
    return Group(table, Text(status, style="yellow", no_wrap=False, overflow="fold"))


def summary_lines(summary: WatchSummary) -> list[str]:
    """The end-of-watch summary, one finding per line."""
    lines = [f"{plural(summary.polls_ok, 'poll')} ({summary.failures} failed); replies saved: "
             f"{summary.files[0] if summary.files else 'none'}" + (f" .. {summary.files[-1]}"
                                                                    if len(summary.files) > 1 else "")]
    for comm in sorted(summary.stuck):
        lines.append(f"STUCK: comm {comm}: counts unchanged while ranks disagree")
    for comm in sorted(summary.transient - summary.stuck):
        lines.append(f"transient skew: comm {comm} (counts moved; not a wedge)")
    for comm, ranks in sorted(summary.missing.items()):
        lines.append(f"missing ranks: comm {comm}: {_list(tuple(sorted(ranks)))}")
    for comm, ranks in sorted(summary.dead.items()):
        lines.append(f"dead ranks: comm {comm}: {_list(tuple(sorted(ranks)))}")
    if summary.gave_up:
        lines.append(f"gave up: {summary.gave_up}")
    elif not summary.polls_ok and summary.last_error:
        lines.append(f"no reply: {summary.last_error}")
    if not summary.stuck and summary.polls_ok:
        lines.append("nothing stuck")
    return lines


def _counts(counts: dict[int, dict[str, int]]) -> str:
    """`AllReduce 49..50` per collective type that any rank launched."""
    ops: dict[str, list[int]] = {}
    for per in counts.values():
        for op, value in per.items():
            ops.setdefault(op, []).append(value)
    parts = []
    for op, values in ops.items():
        if not any(values):
            continue
        low, high = min(values), max(values)
        parts.append(f"{op} {low}" if low == high else f"{op} {low}..{high}")
    return ", ".join(parts)


def _list(ranks: tuple[int, ...]) -> str:
    return ", ".join(str(r) for r in ranks)
