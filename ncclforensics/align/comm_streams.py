"""One interface over a communicator's streams: each rank's rows in seq order, one row per seq.

The analysis asks per-seq questions of one communicator (each rank's collective at a seq, the rows of a range,
one rank's rows over a span). Where every rank's seqs run without a gap, a seq is a position in each rank's rows
and every question is index arithmetic on the rank's own frame (`ContiguousStreams`); where a source left gaps (a
Flight Recorder ring, a watchdog line), positions are looked up (`GappedStreams`). Neither builds a frame of all
ranks unless asked for one.
"""

from __future__ import annotations

from typing import Protocol

import polars as pl


class CommStreams(Protocol):
    """One communicator's rows per rank (Streams.comm_parts). `start`: rows below it are left out of what the
    methods return, as the analysis leaves out seqs not every rank has."""

    parts: dict[int, pl.DataFrame]
    start: int | None
    contiguous: bool  # every rank's seqs run without a gap: a seq is a position

    def first(self, rank: int) -> int:
        """The rank's first seq."""

    def last(self, rank: int) -> int:
        """The rank's last seq."""

    def rows_at(self, seq: int) -> list[dict]:
        """Each rank's row at `seq`, in rank order (ranks that never launched it are absent)."""

    def row_at(self, rank: int, seq: int) -> dict | None:
        """The rank's row at `seq`, or None."""

    def frame(self, low: int | None = None, high: int | None = None, columns: list[str] | None = None
              ) -> pl.DataFrame:
        """The rows from `start`, within [low, high] where given, rank by rank (only `columns`, where given)."""

    def span(self, rank: int, first: int, last: int) -> pl.DataFrame | None:
        """The rank's rows of seqs first..last, where it has every one of them; else None."""


def comm_streams(parts: dict[int, pl.DataFrame]) -> CommStreams:
    """The streams of one comm, as positions where no rank's seqs have a gap."""
    seqs = {rank: part.get_column("seq") for rank, part in parts.items()}
    if all(seq.null_count() == 0 and len(seq) and seq[-1] - seq[0] + 1 == len(seq) for seq in seqs.values()):
        return ContiguousStreams(parts, seqs)
    return GappedStreams(parts, seqs)


class _Rows:
    """What both kinds share: the rows, their seqs, and lookups through `_index`."""

    contiguous = False

    def __init__(self, parts: dict[int, pl.DataFrame], seqs: dict[int, pl.Series]) -> None:
        self.parts = parts
        self.start: int | None = None
        self._seqs = seqs

    def first(self, rank: int) -> int:
        return self._seqs[rank][0]

    def last(self, rank: int) -> int:
        return self._seqs[rank][-1]

    def _index(self, rank: int, seq: int) -> int | None:
        raise NotImplementedError

    def rows_at(self, seq: int) -> list[dict]:
        return [row for rank in self.parts if (row := self.row_at(rank, seq)) is not None]

    def row_at(self, rank: int, seq: int) -> dict | None:
        if self.start is not None and seq < self.start:
            return None
        at = self._index(rank, seq)
        return self.parts[rank].row(at, named=True) if at is not None else None

    def _within(self, rank: int, low: int | None, high: int | None) -> pl.DataFrame:
        """The rank's rows of seqs in [low, high] (either bound open where None)."""
        raise NotImplementedError

    def frame(self, low: int | None = None, high: int | None = None, columns: list[str] | None = None
              ) -> pl.DataFrame:
        bounds = [x for x in (low, self.start) if x is not None]
        low = max(bounds) if bounds else None
        pieces = [self._within(rank, low, high) for rank in self.parts]
        return pl.concat([p.select(columns) for p in pieces] if columns else pieces) if pieces else pl.DataFrame()


class ContiguousStreams(_Rows):
    """Every rank's seqs run without a gap: seq s of a rank is row s - first."""

    contiguous = True

    def _index(self, rank: int, seq: int) -> int | None:
        at = seq - self._seqs[rank][0]
        return at if 0 <= at < len(self._seqs[rank]) else None

    def _within(self, rank: int, low: int | None, high: int | None) -> pl.DataFrame:
        part, first = self.parts[rank], self.first(rank)
        begin = 0 if low is None else min(len(part), max(0, low - first))
        stop = len(part) if high is None else max(begin, min(len(part), high - first + 1))
        return part.slice(begin, stop - begin)


    def span(self, rank: int, first: int, last: int) -> pl.DataFrame | None:
        if self.first(rank) > first or self.last(rank) < last:
            return None
        return self._within(rank, first, last)


class GappedStreams(_Rows):
    """Some rank's seqs have gaps: seqs are looked up in its sorted seq column."""

    def _index(self, rank: int, seq: int) -> int | None:
        seqs = self._seqs[rank]
        at = int(seqs.search_sorted(seq))
        return at if at < len(seqs) and seqs[at] == seq else None

    def _within(self, rank: int, low: int | None, high: int | None) -> pl.DataFrame:
        keep = pl.lit(True)
        if low is not None:
            keep = keep & (pl.col("seq") >= low)
        if high is not None:
            keep = keep & (pl.col("seq") <= high)
        return self.parts[rank].filter(keep)


    def span(self, rank: int, first: int, last: int) -> pl.DataFrame | None:
        rows = self._within(rank, first, last)
        return rows if rows.height == last - first + 1 else None
