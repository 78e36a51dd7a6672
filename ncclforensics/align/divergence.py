"""Per communicator: the first visible mismatch and the root, the first divergent collective.

The first visible mismatch is the first seq whose signatures (op, count, dtype, reduction, root) differ
across ranks; that is what PyTorch's analyzer reports. The root is where the ranks' streams stop being the same
sequence of operations, found by alignment (see alignment.py). Call sites (Flight Recorder frames) and tags
(fingerprint traces) tell apart collectives whose signatures are equal and can pin the root; without them the
answer is a range.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import polars as pl

from ..model import Location
from ..model.kinds import is_p2p_comm
from .alignment import DELETION, DIFFERENT, INSERTION, SUBSTITUTION, Edit, explain
from .streams import SIGNATURE, Streams

EXTRA, MISSING, DIFFERENT_OPS, STOPPED = "extra", "missing", "different", "stopped"
_KIND = {INSERTION: EXTRA, DELETION: MISSING, SUBSTITUTION: DIFFERENT_OPS, DIFFERENT: DIFFERENT_OPS}


@dataclass(frozen=True)
class OpAt:
    """One rank's collective at one seq, with where it was read."""

    rank: int
    seq: int
    op: str | None
    count: int | None
    dtype: str | None
    redop: str | None
    root: int | None
    state: str | None
    callsite: str | None
    step: int | None
    loc: Location
    fr_loc: Location | None = None

    def signature(self) -> tuple:
        """What NCCL compares when it pairs collectives (and what must be equal for them to pair cleanly)."""
        return (self.op, self.count, self.dtype, self.redop, self.root)

    def describe(self) -> str:
        """`AllReduce 4096 x float32` style text."""
        parts = [self.op or "?"]
        if self.count is not None:
            parts.append(f"{self.count} x {self.dtype or '?'}")
        if self.callsite:
            parts.append(f"from {self.callsite}")
        return " ".join(parts)


@dataclass(frozen=True)
class Root:
    """The first divergent collective of one communicator."""

    comm: str
    seq: int  # earliest seq it can be
    seq_range: tuple[int, int]
    outlier_ranks: list[int]
    reference_ranks: list[int]  # the ranks the outliers departed from (the majority, or the other side)
    kind: str  # extra | missing | different | stopped
    size: int  # collectives gained or lost
    pinned_by: str  # what placed it: "call sites", "tags", "steps", "signatures"
    ambiguity: str | None  # why it is a range, when it is
    ops: dict[int, OpAt] = field(default_factory=dict)
    majority: bool = True  # False when no rank group is a strict majority


@dataclass
class CommAnalysis:
    """What the streams of one communicator say."""

    comm: str
    ranks: list[int]
    launched: dict[int, int]  # last seq launched, per rank
    completed: dict[int, int | None]  # last seq completed per rank; None where no source records completion
    first_seq: dict[int, int]
    first_visible: int | None = None
    first_visible_ops: dict[int, OpAt] = field(default_factory=dict)
    root: Root | None = None
    has_states: bool = False


def op_at(row: dict) -> OpAt:
    """An OpAt from one merged row (a dict from iter_rows(named=True))."""
    fr = Location(row["fr_file"], None, row["fr_record"]) if row.get("fr_file") else None
    return OpAt(
        rank=row["rank"], seq=row["seq"], op=row["op"], count=row["count"], dtype=row["dtype"],
        redop=row["redop"], root=row["root"], state=row["state"], callsite=row["callsite"], step=row["step"],
        loc=Location(row["file"], row["line"], row["record"]), fr_loc=fr,
    )


def ops_at(frame: pl.DataFrame | CommRows, seq: int) -> dict[int, OpAt]:
    """Each rank's collective at `seq` (ranks that never launched it are absent)."""
    if isinstance(frame, CommRows):
        return {row["rank"]: op_at(row) for row in frame.rows_at(seq)}
    return {row["rank"]: op_at(row) for row in frame.filter(pl.col("seq") == seq).iter_rows(named=True)}


class CommRows:
    """One communicator's rows, per rank (Streams.comm_parts: each rank's rows in seq order, one row per seq).

    Where every rank's seqs run without a gap (`contiguous`), a seq is a position in each rank's rows, and the
    per-seq questions of the analysis become array comparisons, rank against rank, with no frame of all ranks.
    `start`: rows below it are left out of `frame`, as the analysis leaves out seqs not every rank has.
    """

    def __init__(self, parts: dict[int, pl.DataFrame]) -> None:
        self.parts = parts
        self.start: int | None = None
        self._seqs = {rank: part.get_column("seq") for rank, part in parts.items()}
        self.contiguous = all(
            seq.null_count() == 0 and len(seq) and seq[-1] - seq[0] + 1 == len(seq) for seq in self._seqs.values())

    def first(self, rank: int) -> int:
        return self._seqs[rank][0]

    def last(self, rank: int) -> int:
        return self._seqs[rank][-1]

    def _index(self, rank: int, seq: int) -> int | None:
        """Where `seq` is in `rank`'s rows (None: not there, or below start)."""
        if self.start is not None and seq < self.start:
            return None
        seqs = self._seqs[rank]
        if self.contiguous:
            at = seq - seqs[0]
            return at if 0 <= at < len(seqs) else None
        at = int(seqs.search_sorted(seq))
        return at if at < len(seqs) and seqs[at] == seq else None

    def rows_at(self, seq: int) -> list[dict]:
        """Each rank's row at `seq`, in rank order."""
        found = []
        for rank, part in self.parts.items():
            at = self._index(rank, seq)
            if at is not None:
                found.append(part.row(at, named=True))
        return found

    def frame(self, low: int | None = None, high: int | None = None) -> pl.DataFrame:
        """The rows (from `start`, and within [low, high] where given), rank by rank: what filtering the streams
        frame by comm and seq gives."""
        bounds = [x for x in (low, self.start) if x is not None]
        low = max(bounds) if bounds else None
        pieces = []
        for rank, part in self.parts.items():
            if low is None and high is None:
                pieces.append(part)
            elif self.contiguous:
                first = self.first(rank)
                begin = 0 if low is None else max(0, low - first)
                stop = len(part) if high is None else max(begin, min(len(part), high - first + 1))
                pieces.append(part.slice(begin, stop - begin))
            else:
                keep = pl.lit(True)
                if low is not None:
                    keep = keep & (pl.col("seq") >= low)
                if high is not None:
                    keep = keep & (pl.col("seq") <= high)
                pieces.append(part.filter(keep))
        return pl.concat(pieces) if pieces else pl.DataFrame()

    def constants(self, columns: list[str]) -> dict[int, tuple] | None:
        """rank -> the values `columns` hold in every one of its rows, where every rank's rows hold one value in each
        (a log of one process and one shape); else None."""
        found = {}
        for rank, part in self.parts.items():
            if part.height == 0 or not all(part.select(pl.col(c).n_unique() == 1 for c in columns).row(0)):
                return None
            found[rank] = part.select(pl.col(c).first() for c in columns).row(0)
        return found

    def tokens(self, columns: list[str], until_null: str | None = None) -> dict[int, np.ndarray]:
        """rank -> a 64-bit hash of `columns` per row from `start` (contiguous rows only); with `until_null`, only
        the rows before the first one where that column is null (ranks with none are left out). Equal rows, equal
        tokens: the hash of the row, or, where all but `count` are constant in every rank, the hash of the count
        mixed with a hash of those constants."""
        fixed = self.constants([c for c in columns if c != "count"]) if "count" in columns else None
        out = {}
        for rank, part in self.parts.items():
            rows = part.slice(self.start - self.first(rank))
            if until_null is not None:
                nulls = rows.get_column(until_null).is_null()
                if nulls.any():
                    rows = rows.head(int(nulls.arg_max()))
                if rows.height == 0:
                    continue
            if fixed is None:
                out[rank] = rows.select(pl.struct(columns).hash()).to_series().to_numpy()
            else:
                out[rank] = rows.select(pl.col("count").hash()).to_series().to_numpy() ^ stable_hash(fixed[rank])
        return out

    def nulls_by_rank(self, column: str, high: int) -> dict[int, int]:
        """rank -> nulls of `column` among its rows from `start` up to `high`."""
        nulls = {}
        for rank, part in self.parts.items():
            begin = max(0, self.start - self.first(rank)) if self.start is not None else 0
            stop = max(begin, min(len(part), high - self.first(rank) + 1))
            nulls[rank] = part.get_column(column).slice(begin, stop - begin).null_count()
        return nulls


def stable_hash(values: tuple) -> np.uint64:
    """A 64-bit hash of plain values (str, int, None), the same in every process."""
    return np.uint64(int.from_bytes(hashlib.blake2b(repr(values).encode(), digest_size=8).digest(), "little"))


_MARKS = (
    pl.col("seq").min().alias("first"), pl.col("seq").max().alias("last"),
    pl.col("seq").filter(pl.col("state") == "completed").max().alias("completed"),
    # Only a source that tracks completion (a dump, a watchdog timeout) says anything about what finished.
    pl.col("state").is_in(["started", "completed"]).any().alias("has_state"),
)


def _marked(comm: str, marks: pl.DataFrame) -> CommAnalysis:
    """The analysis of one comm from its ranks' marks (rank, first, last, completed, has_state), root not yet
    found. A rank with states but nothing completed completed what came before its records: a dump keeps the
    latest entries, and a timeout line names the oldest work that did not finish."""
    ranks = marks.get_column("rank").to_list()
    return CommAnalysis(
        comm=comm, ranks=ranks,
        launched=dict(zip(ranks, marks.get_column("last").to_list())),
        completed={r: (c if c is not None else (first - 1 if h else None))
                   for r, first, c, h in marks.select("rank", "first", "completed", "has_state").iter_rows()},
        first_seq=dict(zip(ranks, marks.get_column("first").to_list())),
        has_states=bool(marks.get_column("has_state").any()),
    )


def _before_the_records(root: Root, start: int) -> Root:
    """A root at the first seq every rank has records for: nothing shows the streams agreeing before it (a dump
    that kept only its latest entries, timeout lines alone), so the divergence may be anywhere up to there."""
    if start <= 1 or root.seq_range[0] != start or root.kind == STOPPED:
        return root
    low, high = 1, root.seq_range[1]
    return Root(**{**root.__dict__, "seq": low, "seq_range": (low, high), "ambiguity": (
        f"the ranks' records only start at seq {start}, and they already disagree there: the first divergent "
        f"collective is at or before seq {high}, where records from before it would tell")})


def analyze_comm(streams: Streams, comm: str, step_spans: dict[int, tuple[int, int]] | None = None,
                 ) -> CommAnalysis:
    """Launched and completed marks, the first visible mismatch and the root of one communicator.

    `step_spans` maps rank -> (first seq, last seq) of the step at which the gates disagreed, on that rank,
    where known; it narrows a root range to that step (see diagnosis.py).
    """
    rows = CommRows(streams.comm_parts(comm))
    if not rows.contiguous:
        return _analyze_frame(comm, rows.frame(), step_spans)
    marks = pl.concat([part.select(pl.lit(rank, pl.Int64).alias("rank"), *_MARKS) for rank, part in rows.parts.items()])
    analysis = _marked(comm, marks)
    ranks = analysis.ranks
    if len(ranks) < 2 or is_p2p_comm(comm):  # (p2p streams differ by design: see model/kinds.py)
        return analysis
    start = max(analysis.first_seq.values())
    rows.start = start
    tokens = rows.tokens(SIGNATURE)
    # Every rank has every seq from `start` to its last: the longest rank has them all, and a seq shows a
    # mismatch exactly where another rank's token differs from the longest's.
    reference = max(ranks, key=lambda r: len(tokens[r]))
    differs = [np.flatnonzero(tokens[r] != tokens[reference][:len(tokens[r])]) for r in ranks if r != reference]
    firsts = [int(d[0]) for d in differs if d.size]
    if firsts:
        analysis.first_visible = start + min(firsts)
        analysis.first_visible_ops = ops_at(rows, analysis.first_visible)

    root = _root(comm, rows, ranks, tokens, start, "signatures")
    if root is None:
        return analysis
    root = _before_the_records(root, start)
    root = _sharpen(root, rows, start, lambda column: rows.tokens(SIGNATURE + [column], until_null=column),
                    lambda column, high: rows.nulls_by_rank(column, high))
    if step_spans and root.seq_range[0] != root.seq_range[1]:
        root = _narrow_by_steps(root, step_spans, rows)
    if "checked" in next(iter(rows.parts.values())).columns and root.seq_range[0] != root.seq_range[1]:
        root = _narrow_by_checksums(root, rows)
    analysis.root = root
    return analysis


def _analyze_frame(comm: str, frame: pl.DataFrame, step_spans: dict[int, tuple[int, int]] | None) -> CommAnalysis:
    """analyze_comm on one frame of the comm's rows (sorted by rank, seq), for streams with gaps in their seqs."""
    frame = frame.with_columns(pl.struct(SIGNATURE).hash().alias("_sig"))
    marks = frame.group_by("rank").agg(*_MARKS).sort("rank")
    analysis = _marked(comm, marks)
    ranks = analysis.ranks
    if len(ranks) < 2 or is_p2p_comm(comm):  # (p2p streams differ by design: see model/kinds.py)
        return analysis
    start = max(analysis.first_seq.values())
    frame = frame.filter(pl.col("seq") >= start)

    per_seq = frame.group_by("seq").agg(pl.col("_sig").n_unique().alias("n"), pl.len().alias("ranks"))
    visible = per_seq.filter((pl.col("n") > 1) & (pl.col("ranks") > 1)).get_column("seq").min()
    if visible is not None:
        analysis.first_visible = int(visible)
        analysis.first_visible_ops = ops_at(frame, int(visible))

    frame = frame.sort(["rank", "seq"])
    tokens = _tokens(frame, "_sig")
    root = _root(comm, frame, ranks, tokens, start, "signatures")
    if root is None:
        return analysis
    root = _before_the_records(root, start)

    def rich_tokens(column: str) -> dict[int, np.ndarray]:
        rich = frame.with_columns(pl.struct(SIGNATURE + [column]).hash().alias("_rich"))
        return _tokens(rich.filter(pl.col(column).is_not_null().cum_min().over("rank", order_by="seq")), "_rich")

    def nulls_by_rank(column: str, high: int) -> dict[int, int]:
        counts = frame.filter(pl.col("seq") <= high).group_by("rank").agg(pl.col(column).null_count())
        return dict(counts.iter_rows())

    root = _sharpen(root, frame, start, rich_tokens, nulls_by_rank)
    if step_spans and root.seq_range[0] != root.seq_range[1]:
        root = _narrow_by_steps(root, step_spans, frame)
    if "checked" in frame.columns and root.seq_range[0] != root.seq_range[1]:
        root = _narrow_by_checksums(root, frame)
    analysis.root = root
    return analysis


def _tokens(frame: pl.DataFrame, column: str) -> dict[int, np.ndarray]:
    """rank -> its tokens in seq order, from a frame sorted by (rank, seq): one pass, not one filter per rank."""
    values = frame.get_column(column).to_numpy()
    ranks = frame.get_column("rank").to_numpy()
    if len(ranks) == 0:
        return {}
    starts = np.flatnonzero(np.r_[True, ranks[1:] != ranks[:-1]])
    ends = np.r_[starts[1:], len(ranks)]
    return {int(ranks[a]): values[a:b] for a, b in zip(starts, ends)}


RICH_COLUMNS = (("callsite", "call sites"), ("tag", "tags"))  # what tells equal signatures apart, best first


def _sharpen(root: Root, frame: pl.DataFrame | CommRows, start: int,
             rich_tokens: Callable[[str], dict[int, np.ndarray]],
             nulls_by_rank: Callable[[str, int], dict[int, int]]) -> Root:
    """Narrow a root range found from signatures with call sites, then tags.

    `rich_tokens(column)`: rank -> tokens of the signature and `column` from `start` up to the rank's first null
    there (a trace that stops early is compared as far as it goes; a rank without the column has none).
    `nulls_by_rank(column, high)`: rank -> nulls of `column` in its rows from `start` up to `high`.
    Ranks without the column at all (a rank's Flight Recorder dump is missing) are left out when they are
    reference ranks: signatures already showed that their streams are the reference's, so the call sites of the
    others place the outliers' collective as well. The answer says which ranks it rests on.
    """
    ranks = list(frame.parts) if isinstance(frame, CommRows) else sorted(frame.get_column("rank").unique())
    for column, label in RICH_COLUMNS:
        if root.seq_range[0] == root.seq_range[1]:
            break
        tokens = {r: t for r, t in rich_tokens(column).items() if len(t)}
        carrying = [r for r in ranks if r in tokens]
        left_out = sorted(set(ranks) - set(carrying))
        if not carrying or (left_out and (not root.majority or set(left_out) & set(root.outlier_ranks)
                                          or not set(carrying) - set(root.outlier_ranks))):
            continue
        outliers = root.outlier_ranks if left_out else None
        rich = _root(root.comm, frame, carrying, tokens, start, label, outliers=outliers)
        if rich is not None:
            rich = _before_the_records(rich, start)
        # Usable only where those ranks' rows carry the column up to the place it points at (traces often stop
        # short of the wedge: a rank that died never read back its last step).
        if rich is None or any(nulls_by_rank(column, rich.seq_range[1] + 1).get(r, 0) for r in carrying):
            continue
        if left_out:
            rich = Root(**{**rich.__dict__, "reference_ranks": root.reference_ranks,
                           "pinned_by": f"{label} of ranks {_ranks(carrying)} (rank{'s' if len(left_out) > 1 else ''} "
                                        f"{_ranks(left_out)} without: same signatures as the reference)"})
        if _refines(rich, root) and rich.seq_range != root.seq_range:
            root = rich
    return root


def _ranks(ranks: list[int]) -> str:
    return ", ".join(map(str, ranks))


def _refines(rich: Root, plain: Root) -> bool:
    """A richer token may only sharpen the answer found from signatures, never move it elsewhere."""
    return (
        rich.kind == plain.kind and rich.size == plain.size and set(rich.outlier_ranks) == set(plain.outlier_ranks)
        and plain.seq_range[0] <= rich.seq_range[0] <= rich.seq_range[1] <= plain.seq_range[1]
    )


def _root(comm: str, frame: pl.DataFrame | CommRows, ranks: list[int], tokens: dict[int, np.ndarray], start: int,
          pinned_by: str, outliers: list[int] | None = None) -> Root | None:
    """Group the ranks at their first disagreement; align each minority rank against the majority stream.
    With `outliers` given (found before, among more ranks), align those against the other ranks."""
    # A rank whose rows carry no value of the compared column (its dump missing) has no tokens: an empty stream.
    tokens = {r: tokens.get(r, np.empty(0, dtype=np.uint64)) for r in ranks}
    longest = max((len(t) for t in tokens.values()), default=0)
    at = None
    for index in range(0, longest, 4096):
        window = {r: t[index:index + 4096] for r, t in tokens.items()}
        if len({(len(w), w.tobytes()) for w in window.values()}) > 1:
            at = index + _first_split(window)
            break
    if at is None:
        return None
    groups: dict[object, list[int]] = {}
    for rank in ranks:
        key = int(tokens[rank][at]) if at < len(tokens[rank]) else "ended"
        groups.setdefault(key, []).append(rank)
    ordered = sorted(groups.values(), key=len, reverse=True)
    majority = len(ordered[0]) * 2 > len(ranks) or outliers is not None
    if outliers is not None:
        reference_ranks = [r for r in ranks if r not in outliers]
    elif majority:
        reference_ranks = ordered[0]
        outliers = sorted(r for g in ordered[1:] for r in g)
    else:
        # No majority (two ranks, or an even split): both sides are candidates. Explain each against the other
        # and keep the direction in which one side gained collectives (an insertion), if either is one.
        side_a, side_b = sorted(ordered[0]), sorted(ordered[1])
        a_vs_b = explain(tokens[side_a[0]], tokens[max(side_b, key=lambda r: len(tokens[r]))])
        outliers, reference_ranks = (side_a, side_b) if a_vs_b is None or a_vs_b.kind != DELETION else (
            side_b, side_a)
    reference = max(reference_ranks, key=lambda r: len(tokens[r]))
    edits: dict[int, Edit] = {}
    for rank in outliers:
        edit = explain(tokens[rank], tokens[reference])
        if edit is not None:
            edits[rank] = edit
    if not edits:
        return None
    first = min(edits, key=lambda r: (edits[r].at, edits[r].earliest))
    edit = edits[first]
    kind = STOPPED if (edit.kind == DELETION and edit.at == len(tokens[first])) else _KIND[edit.kind]
    low, high = start + edit.earliest, start + edit.at
    if kind == STOPPED:
        low = high  # the stream simply ends: nothing to place
    for rank, other in edits.items():
        if rank != first:
            low = min(low, start + other.earliest)
    ambiguity = None
    if low != high:
        ambiguity = (
            f"the {'extra' if kind == EXTRA else 'missing'} collective looks like its neighbours "
            f"(same {pinned_by if pinned_by != 'signatures' else 'op, count and dtype'}), so any seq in "
            f"{low}..{high} explains the streams equally well; gate journals with steps, fingerprint tags or "
            f"Flight Recorder call sites would pin it"
        )
    return Root(
        comm=comm, seq=low, seq_range=(low, high), outlier_ranks=sorted(edits) if majority else sorted(ranks),
        reference_ranks=sorted(reference_ranks), kind=kind, size=edit.size, pinned_by=pinned_by,
        ambiguity=ambiguity, ops=ops_at(frame, low), majority=majority,
    )


def _first_split(window: dict[int, np.ndarray]) -> int:
    """First index at which the windows disagree (a window ending counts as disagreeing)."""
    arrays = list(window.values())
    shortest = min(len(a) for a in arrays)
    stacked = np.stack([a[:shortest] for a in arrays])
    differs = np.flatnonzero((stacked != stacked[0]).any(axis=0))
    return int(differs[0]) if differs.size else shortest


def _narrow_by_checksums(root: Root, frame: pl.DataFrame | CommRows) -> Root:
    """Fingerprints with expected values bound the root: a seq whose results were right on every rank that
    checked it was still aligned, and the first seq with a wrong result was already misaligned."""
    low, high = root.seq_range
    rows = frame.frame(low - 1, high) if isinstance(frame, CommRows) else frame
    checks = rows.filter(pl.col("checked").is_not_null() & pl.col("seq").is_between(low - 1, high)).group_by(
        "seq").agg(pl.col("checked").all().alias("right"), (~pl.col("checked")).any().alias("wrong"))
    right = checks.filter(pl.col("right")).get_column("seq").max()
    if right is not None and right + 1 <= high:
        low = max(low, right + 1)
    wrong = checks.filter(pl.col("wrong") & (pl.col("seq") >= low)).get_column("seq").min()
    if wrong is not None:
        high = min(high, wrong)
    if (low, high) == root.seq_range or low > high:
        return root
    return Root(**{**root.__dict__, "seq": low, "seq_range": (low, high), "pinned_by": "fingerprints",
                   "ambiguity": root.ambiguity if low != high else None, "ops": ops_at(frame, low)})


def _narrow_by_steps(root: Root, step_spans: dict[int, tuple[int, int]], frame: pl.DataFrame | CommRows) -> Root:
    """Intersect the root range with the seqs of the disagreeing step on the outlier ranks."""
    low, high = root.seq_range
    for rank in root.outlier_ranks:
        if rank in step_spans:
            first, last = step_spans[rank]
            if first <= high and last >= low:
                low, high = max(low, first), min(high, last)
    if (low, high) == root.seq_range:
        return root
    ambiguity = root.ambiguity if low != high else None
    return Root(**{**root.__dict__, "seq": low, "seq_range": (low, high), "pinned_by": "steps",
                   "ambiguity": ambiguity, "ops": ops_at(frame, low)})
