"""The aligned side-by-side view (align/side_by_side.py) as plain text columns, for `diff --around` and the
postmortem: one line per position, a column per group of ranks that launched the same collectives, then the
file:line of every rank at the root and at the first visible mismatch."""

from __future__ import annotations

from ..align.answers import OpAt
from ..align.side_by_side import DIFFERS, EDIT, ROOT, VISIBLE, AlignedRow, SideBySide
from ..model.phrases import ranks_words, seq_words
from .escape import printable

GAP = "--"


def rank_groups(view: SideBySide) -> list[list[int]]:
    """Ranks whose cells are equal (seq and signature) on every shown line share a column; outliers first."""
    lines = view.near_root + view.near_visible

    def cells(rank: int) -> tuple:
        return tuple((op.seq, op.signature(), op.callsite) if (op := line.ops.get(rank)) else None for line in lines)

    groups: dict[tuple, list[int]] = {}
    for rank in sorted(view.ranks, key=lambda r: (r not in view.outlier_ranks, r)):
        groups.setdefault(cells(rank), []).append(rank)
    return list(groups.values())


def group_label(ranks: list[int], outliers: list[int]) -> str:
    """`rank 0 (outlier)`, `ranks 1-3`."""
    if len(ranks) == 1:
        label = f"rank {ranks[0]}"
    elif ranks == list(range(ranks[0], ranks[-1] + 1)):
        label = f"ranks {ranks[0]}-{ranks[-1]}"
    else:
        label = "ranks " + ",".join(map(str, ranks))
    return label + (" (outlier)" if set(ranks) <= set(outliers) else "")


def cell(op: OpAt | None, site: bool = False) -> str:
    """`25 AllReduce 4096 x float32` (`site`: with ` from model.py:212`, where call sites tell collectives of one
    signature apart), or the gap mark."""
    if op is None:
        return GAP
    shape = f" {op.count} x {op.dtype or '?'}" if op.count is not None else ""
    where = f" from {op.callsite}" if site and op.callsite else ""
    return printable(f"{op.seq} {op.op or '?'}{shape}{where}")


def note(line: AlignedRow, view: SideBySide) -> str:
    """What a line shows, in words."""
    words = []
    if ROOT in line.marks or EDIT in line.marks:
        what = f"{view.kind} on {ranks_words(view.outlier_ranks)}"
        words.append(("root: " if ROOT in line.marks else "") + what)
    if VISIBLE in line.marks:
        words.append("first visible mismatch by position" + ("" if DIFFERS in line.marks else
                                                            "; aligned, these agree"))
    if DIFFERS in line.marks:
        words.append("aligned, yet recorded differently")
    return "; ".join(words)


def table(view: SideBySide, lines: list[AlignedRow]) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """(headers, rows) of one part of the view: `seq`, a column per rank group, `note`."""
    groups = rank_groups(view)
    headers = ("seq", *(group_label(g, view.outlier_ranks) for g in groups), "note")
    rows = []
    for line in lines:
        seq = "+" if line.seq is None else str(line.seq)
        site = len({op.callsite for op in line.ops.values()}) > 1
        rows.append((seq, *(cell(line.ops.get(g[0]), site) for g in groups), note(line, view)))
    return headers, rows


def title(view: SideBySide) -> str:
    """What the view is aligned on."""
    where = (f"seq {view.root_seq}" if view.root_range[0] == view.root_range[1] else
             f"seq {view.root_seq} (the earliest the root can be; anywhere in {seq_words(*view.root_range)})")
    return (f"Aligned streams of comm {view.comm} as the root places them: {view.kind} ({view.size}) on "
            f"{ranks_words(view.outlier_ranks)} at {where}; seq is the reference ranks' (+: a collective "
            f"only the outliers launched), {GAP}: nothing launched at that position")


def receipts(view: SideBySide) -> list[str]:
    """Every rank's collective and file:line at the root seq and at the first visible mismatch (by position:
    each rank's own seq there), a line each, after a line that says which."""
    found = []
    for label, seq, ops in (("root", view.root_seq, view.root_ops),
                            ("first visible mismatch", view.visible_seq, view.visible_ops)):
        if ops:
            found.append(f"{label}, seq {seq}:")
            found += [f"  rank {rank}: {cell(op)} at {printable(op.loc)}" for rank, op in sorted(ops.items())]
    return found


def render_text(view: SideBySide) -> str:
    """The whole view as plain text (no box drawing; columns padded with spaces)."""
    out = [printable(title(view))]
    parts = [("around the root", view.near_root)]
    if view.near_visible:
        parts.append((f"around the first visible mismatch, seq {view.visible_seq}", view.near_visible))
    for label, lines in parts:
        headers, rows = table(view, lines)
        widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
        out.append("")
        out.append(label + ":")
        for row in (headers, *rows):
            out.append("  " + "  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip())
    found = receipts(view)
    if found:
        out.append("")
        out.extend(found)
    return "\n".join(out)
