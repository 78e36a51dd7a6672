"""Each rank's records of a communicator as the integer codes root.py compares: one code per seq and field stage
(signatures, call stacks, tags, steps), 0 where a rank did not record the field; and the first visible mismatch,
the first seq whose recorded signatures differ (what PyTorch's analyzer reports).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from .comm_streams import CommStreams
from .edits import Codes
from .streams import SIGNATURE, Streams

COMPARED = (*SIGNATURE, "stack", "tag", "step")  # the fields a pairing compares, for saying which went uncompared


def unrecorded_fields(rows: CommStreams) -> dict[str, list[int]]:
    """Per field a pairing compares: the ranks that recorded none of it, where other ranks did (a Flight Recorder
    dump carries no reduction or root, an NCCL log no call stack)."""
    found = {}
    for name in COMPARED:
        lacking = [rank for rank, part in rows.parts.items()
                   if name not in part.columns or part.select(pl.col(name).null_count()).item() == part.height]
        if lacking and len(lacking) < len(rows.parts):
            found[name] = lacking
    return found


def silent_ranks(streams: Streams, comm: str) -> list[int]:
    """Members of `comm` with no records in it that launched none in it as far as their files go: by a dump's group
    config, a rank whose dump kept every collective of theirs from the first on (each of their comms' records
    begins at seq 1, so the ring lost nothing); by an INIT line, a rank whose whole log has collectives of other
    comms (it logged collectives, and none of this one)."""
    on_record = set(streams.members.get(comm, []))
    logged = set(streams.initialized.get(comm, []))
    silent = []
    for rank in sorted(set(streams.expected_members.get(comm, [])) | logged):
        if rank in on_record:
            continue
        theirs = [part for (c, r), part in streams.parts.items() if r == rank and c != comm and part.height]
        if theirs and (rank in logged or all(part.get_column("fr_file").is_not_null().all()
                                             and part.get_column("seq").min() == 1 for part in theirs)):
            silent.append(rank)
    return silent


def blank_codes(ends: dict[int, int], start: int, fields: tuple[str, ...],
                 ops: dict[int, tuple[int, np.uint64]] | None = None) -> dict[int, Codes]:
    """Streams known only by how far they ran: unrecorded (code 0) from `start` to each end, but for the op
    `ops` gives a rank at a seq (rank -> (seq, its code))."""
    out = {rank: Codes({name: np.zeros(max(0, end - start + 1), dtype=np.uint64) for name in fields},
                       max(0, end - start + 1)) for rank, end in ends.items()}
    for rank, (seq, code) in (ops or {}).items():
        if rank in out and "op" in fields:
            out[rank].fields["op"][seq - start] = code
    return out


def reported_op_codes(rows: CommStreams, book: CodeBook,
                       reported: dict[int, tuple[int, str]]) -> dict[int, tuple[int, np.uint64]]:
    """rank -> (seq, code) of the op a desync report gives a rank with no records, where some rank's record at
    that seq holds that very op (its code is the record's): a report names ops as PyTorch does, and only one a
    record names alike is compared (one no record holds says nothing the codes can weigh)."""
    out: dict[int, tuple[int, np.uint64]] = {}
    if not reported:
        return out
    codes = book.codes(["op"])
    for rank, (seq, op) in reported.items():
        for other, part in rows.parts.items():
            if "op" not in part.columns or not part.height:
                continue
            found = part.filter((pl.col("seq") == seq) & (pl.col("op") == op))
            position = seq - book.start
            if found.height and position < codes[other].length and codes[other].fields["op"][position]:
                out[rank] = (seq, codes[other].fields["op"][position])
                break
    return out


def empty_codes(ranks: list[int], fields: tuple[str, ...]) -> dict[int, Codes]:
    return {rank: Codes({name: np.zeros(0, dtype=np.uint64) for name in fields}, 0) for rank in ranks}


def informative_columns(rows: CommStreams) -> tuple[set[str], dict[str, list[int]]]:
    """Columns that can tell two collectives apart (recorded somewhere, and not one value everywhere), and for
    each the ranks that recorded none of it (a rank whose Flight Recorder dump is missing has no call sites)."""
    wanted = [*SIGNATURE, "stack", "callsite", "tag", "step"]
    present = [c for c in wanted if all(c in part.columns for part in rows.parts.values())]
    ranks = list(rows.parts)
    # Per rank, one query: each column's distinct values (an empty list where the rank recorded none of it).
    values = pl.concat([part.select(pl.col(c).drop_nulls().unique().implode() for c in present)
                        for part in rows.parts.values()]) if present else pl.DataFrame()
    found, without = set(), {}
    for c in present:
        if values.get_column(c).explode().drop_nulls().n_unique() > 1:  # one value, even with gaps, tells nothing
            found.add(c)
            empty = values.get_column(c).list.len() == 0
            without[c] = [r for r, none in zip(ranks, empty.to_list()) if none]
    if "stack" not in found and "callsite" in found:
        found.add("stack")  # a source with one frame only: that frame is the stack it knows
    if "stack" in found:
        without["stack"] = sorted(set(without.get("stack", ranks)) & set(without.get("callsite", ranks)))
    return found, without


class CodeBook:
    """Each rank's records from `start` as codes, one field at a time, kept: the stages of the analysis ask for
    the same fields again (signatures, then signatures and call sites, ...). `ends`: ranks known to have launched
    up to a seq past their records; their streams run to it, unrecorded (code 0) past their last record."""

    def __init__(self, rows: CommStreams, start: int, ends: dict[int, int] | None = None) -> None:
        self.start = start
        self._ends = ends or {}
        self._rows = rows
        self._cache: dict[str, dict[int, np.ndarray]] = {}
        self._parts: dict[int, pl.DataFrame] | None = None

    def _trimmed(self) -> dict[int, pl.DataFrame]:
        if self._parts is None:
            rows, start = self._rows, self.start
            self._parts = {rank: _before_wide_gap(part.filter(pl.col("seq") >= start)
                                                  if rows.first(rank) < start or not rows.contiguous else part)
                           for rank, part in rows.parts.items()}
            self._lengths = {rank: max(0, int(max(part.get_column("seq").max(), self._ends.get(rank, 0)) - start + 1))
                             if part.height else 0 for rank, part in self._parts.items()}
        return self._parts

    def codes(self, fields: list[str]) -> dict[int, Codes]:
        """rank -> its records from `start` as one code per field and position (0: not recorded there, a gap in
        the seqs included). Equal values, equal codes."""
        parts = self._trimmed()
        for name in fields:
            if name not in self._cache:
                self._cache[name] = self._field(parts, name)
        return {rank: Codes({name: self._cache[name][rank] for name in fields}, self._lengths[rank])
                for rank in parts}

    def _field(self, parts: dict[int, pl.DataFrame], name: str) -> dict[int, np.ndarray]:
        column = pl.col(name)
        if name == "stack":
            column = pl.coalesce(pl.col("stack"), pl.col("callsite"))
        code = pl.when(column.is_null()).then(pl.lit(0, pl.UInt64)).otherwise(column.hash() | 1)
        out = {}
        # Rank by rank (a value's hash is the same in any frame): no frame of every rank's rows is built, and a
        # rank's seqs are read only where its positions are not its rows.
        for rank, part in parts.items():
            mine = part.select(code.alias("code")).get_column("code").to_numpy()
            length = self._lengths[rank]
            if part.height == length and self._rows.contiguous:
                out[rank] = mine
            else:
                filled = np.zeros(length, dtype=np.uint64)
                filled[part.get_column("seq").to_numpy() - self.start] = mine
                out[rank] = filled
        return out


MAX_GAP = 65536  # seqs missing in a row past which a stream's later records are not compared (memory stays bounded)


def _before_wide_gap(part: pl.DataFrame) -> pl.DataFrame:
    """The rows before the first gap of more than MAX_GAP seqs: positions are seqs, and a seq far past the others
    (a damaged record) must not cost memory in proportion to it."""
    seqs = part.get_column("seq").to_numpy()
    wide = np.flatnonzero(np.diff(seqs) > MAX_GAP)
    return part.head(int(wide[0]) + 1) if wide.size else part


_UNRECORDED_HIGH = np.uint64(np.iinfo(np.uint64).max)  # an unrecorded code (0) where the smallest is sought


def first_visible_seq(codes: dict[int, Codes], chunk: int = 65536) -> int | None:
    """The first position where two ranks recorded different values of a field (what a position-by-position
    comparison reports first)."""
    longest = max(c.length for c in codes.values())
    for begin in range(0, longest, chunk):
        end = min(longest, begin + chunk)
        differs = np.zeros(end - begin, dtype=bool)
        for name in next(iter(codes.values())).fields:
            # The largest value and the smallest recorded one (0 is unrecorded) over the ranks, kept as each rank
            # is read: arrays of one chunk, never of every rank's.
            top = np.zeros(end - begin, dtype=np.uint64)
            low = np.full(end - begin, _UNRECORDED_HIGH, dtype=np.uint64)
            for c in codes.values():
                part = c.fields[name][begin:end]
                n = len(part)
                np.maximum(top[:n], part, out=top[:n])
                np.minimum(low[:n], np.where(part == 0, _UNRECORDED_HIGH, part), out=low[:n])
            differs |= (top != 0) & (low != top)
        hit = np.flatnonzero(differs)
        if hit.size:
            return begin + int(hit[0])
    return None
