"""The ranks' streams side by side around the root and the first visible mismatch, aligned as the root says.

A position-by-position view (what `fr_trace -j` prints) puts every rank's seq s on one line, so after an extra
collective on one rank every later line looks mismatched. Here a line is a position of the reference ranks'
program, and each rank shows the collective it launched there, shifted by the root's edit. Worked example: rank
0 ran one extra collective at seq 25 (kind `extra`, size 1). Lines up to seq 24 pair seq s with seq s; then a
line holds rank 0's seq 25 and a gap on ranks 1-3; after it, reference seq s sits beside rank 0's seq s + 1. A
`missing` edit is the mirror image (a gap on the outliers), a `different` block stays in place, marked.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from .answers import DIFFERENT_OPS, EXTRA, MISSING, OpAt, Root, op_at
from .streams import Streams

ROOT, EDIT, VISIBLE, DIFFERS = "root", "edit", "first visible mismatch", "differs"


@dataclass(frozen=True)
class AlignedRow:
    """One position of the aligned streams."""

    seq: int | None  # the reference ranks' seq here; None on a line only the outliers launched (a gap for them)
    ops: dict[int, OpAt]  # rank -> what it launched at this position; a rank absent here has a gap
    marks: tuple[str, ...] = ()  # ROOT, EDIT (inside the root's edit), VISIBLE, DIFFERS (aligned, yet unequal)


@dataclass
class SideBySide:
    """The aligned view of one communicator: lines around the root, and around the first visible mismatch
    where that is further on than `around` lines."""

    comm: str
    ranks: list[int]
    outlier_ranks: list[int]
    kind: str
    size: int
    root_seq: int
    root_range: tuple[int, int | None]
    around: int
    near_root: list[AlignedRow] = field(default_factory=list)
    near_visible: list[AlignedRow] = field(default_factory=list)
    visible_seq: int | None = None
    root_ops: dict[int, OpAt] = field(default_factory=dict)  # each rank's collective at the root seq
    visible_ops: dict[int, OpAt] = field(default_factory=dict)  # ... at the first visible mismatch


def side_by_side(streams: Streams, root: Root | None, visible: tuple[str, int] | None,
                 visible_ops: dict[int, OpAt], around: int) -> SideBySide | None:
    """The aligned view of the root's communicator, `around` lines either side; None where the root places no
    collective in recorded streams (counts alone). `visible` and `visible_ops`: the first visible mismatch
    (comm, seq) and each rank's collective there."""
    if root is None or root.seq is None or root.seq_range is None or root.comm not in streams.members:
        return None
    ranks = list(streams.members[root.comm])
    outliers = [r for r in root.outlier_ranks if r in ranks]
    shift = root.size if root.kind in (EXTRA, MISSING) else 0
    if not outliers or (shift and len(outliers) == len(ranks)):  # (no side to shift against)
        return None
    view = SideBySide(comm=root.comm, ranks=ranks, outlier_ranks=outliers, kind=root.kind, size=root.size,
                      root_seq=root.seq, root_range=tuple(root.seq_range), around=max(0, around),
                      root_ops=dict(root.ops))
    visible_seq = visible[1] if visible is not None and visible[0] == root.comm else None
    view.visible_seq = visible_seq
    view.visible_ops = dict(visible_ops) if visible_seq is not None else {}
    # `around` lines before the root and after it (after the whole edit: a missing or different block).
    high = root.seq + view.around - 1 if root.kind == EXTRA else root.seq + max(root.size, 1) - 1 + view.around
    if visible_seq is not None and high < visible_seq <= high + view.around + 1:
        high = visible_seq + view.around  # the two would touch: one block
    view.near_root = _lines(streams, view, root.seq - view.around, high, visible_seq)
    if visible_seq is not None and visible_seq > high:
        view.near_visible = _lines(streams, view, visible_seq - view.around, visible_seq + view.around,
                                   visible_seq)
    return view


def _outlier_seq(view: SideBySide, seq: int) -> int | None:
    """The seq an outlier launched at the reference's position `seq` (None: a gap on the outlier)."""
    if seq < view.root_seq or view.kind not in (EXTRA, MISSING):
        return seq
    if view.kind == EXTRA:
        return seq + view.size
    return None if seq < view.root_seq + view.size else seq - view.size


def _lines(streams: Streams, view: SideBySide, low: int, high: int, visible_seq: int | None) -> list[AlignedRow]:
    """The aligned lines for reference seqs low..high (with the outliers' extra collectives where they fall)."""
    low = max(1, low)
    span = (low, high + (view.size if view.kind == EXTRA else 0))
    rows = {rank: _rows(streams, view.comm, rank, *span) for rank in view.ranks}
    outliers = set(view.outlier_ranks)
    lines: list[AlignedRow] = []
    for seq in range(low, high + 1):
        if view.kind == EXTRA and seq == view.root_seq:
            for extra in range(view.root_seq, view.root_seq + view.size):
                ops = {r: rows[r][extra] for r in view.outlier_ranks if extra in rows[r]}
                marks = (ROOT,) if extra == view.root_seq else (EDIT,)
                lines.append(AlignedRow(None, ops, marks))
        ops = {}
        for rank in view.ranks:
            at = _outlier_seq(view, seq) if rank in outliers else seq
            if at is not None and at in rows[rank]:
                ops[rank] = rows[rank][at]
        marks = []
        in_edit = view.root_seq <= seq < view.root_seq + view.size
        if view.kind != EXTRA and seq == view.root_seq:
            marks.append(ROOT)
        elif view.kind in (MISSING, DIFFERENT_OPS) and in_edit:
            marks.append(EDIT)
        if seq == visible_seq:
            marks.append(VISIBLE)
        if not (view.kind == DIFFERENT_OPS and in_edit) and len({op.signature() for op in ops.values()}) > 1:
            marks.append(DIFFERS)
        if ops:
            lines.append(AlignedRow(seq, ops, tuple(marks)))
    return lines


def _rows(streams: Streams, comm: str, rank: int, low: int, high: int) -> dict[int, OpAt]:
    """seq -> the rank's collective, for seqs low..high."""
    part = streams.parts.get((comm, rank))
    if part is None or part.height == 0:
        return {}
    window = part.filter(pl.col("seq").is_between(low, high))
    return {row["seq"]: op_at(row) for row in window.iter_rows(named=True)}
