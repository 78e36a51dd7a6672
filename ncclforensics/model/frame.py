"""The tabular form of collectives: one polars schema, the only place that names the columns."""

from __future__ import annotations

from dataclasses import fields
from collections.abc import Iterable

import polars as pl

from .event import CollectiveEvent
from .location import Location

# Column names are CollectiveEvent field names; `file`, `line` and `record` spell out its Location. `state`,
# `callsite` and `stack` are categoricals: a stream has a handful of distinct call stacks, and as text each row
# would cost a 16-byte view (1024 dumps of 20,000 entries: 0.7 GiB of 3); as categoricals 4 bytes.
COLLECTIVE_SCHEMA: dict[str, pl.DataType] = {
    "file": pl.String,
    "line": pl.Int64,
    "record": pl.Int64,
    "rank": pl.Int64,
    "comm": pl.String,
    "comm_rank": pl.Int64,
    "comm_size": pl.Int64,
    "seq": pl.Int64,
    "opcount": pl.Int64,
    "op": pl.String,
    "count": pl.Int64,
    "dtype": pl.String,
    "redop": pl.String,
    "root": pl.Int64,
    "state": pl.Categorical(),
    "step": pl.Int64,
    "tag": pl.String,
    "callsite": pl.Categorical(),
    "stack": pl.Categorical(),
    "time": pl.Float64,
    "host": pl.String,
    "pid": pl.Int64,
}

_EVENT_FIELDS = [f.name for f in fields(CollectiveEvent) if f.name != "loc"]


def empty_collectives() -> pl.DataFrame:
    """A frame with no rows and every column of COLLECTIVE_SCHEMA."""
    return pl.DataFrame(schema=COLLECTIVE_SCHEMA)


def conform(frame: pl.DataFrame) -> pl.DataFrame:
    """Add missing columns as nulls, cast to COLLECTIVE_SCHEMA and order the columns."""
    missing = [pl.lit(None, dtype=t).alias(c) for c, t in COLLECTIVE_SCHEMA.items() if c not in frame.columns]
    if missing:
        frame = frame.with_columns(missing)
    return frame.select([pl.col(c).cast(t) for c, t in COLLECTIVE_SCHEMA.items()])


def collectives_to_frame(events: Iterable[CollectiveEvent]) -> pl.DataFrame:
    """Build the frame from records (for sources with few events, and for tests)."""
    rows = {c: [] for c in COLLECTIVE_SCHEMA}
    for event in events:
        rows["file"].append(event.loc.path)
        rows["line"].append(event.loc.line)
        rows["record"].append(event.loc.record)
        for name in _EVENT_FIELDS:
            rows[name].append(getattr(event, name))
    return pl.DataFrame(rows, schema=COLLECTIVE_SCHEMA)


def frame_to_collectives(frame: pl.DataFrame) -> list[CollectiveEvent]:
    """Turn rows back into records (for reports on a handful of rows, never for whole streams)."""
    out = []
    for row in frame.iter_rows(named=True):
        loc = Location(row["file"], row["line"], row["record"])
        out.append(CollectiveEvent(loc=loc, **{name: row[name] for name in _EVENT_FIELDS}))
    return out


def location_of(row: dict) -> Location:
    """The Location of one row of a collectives frame (a dict from `iter_rows(named=True)`)."""
    return Location(row["file"], row["line"], row["record"])
