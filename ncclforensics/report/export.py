"""Tables to take to polars, pandas or DuckDB, written by polars in the format the output's suffix names.

`collectives` is every collective as the analysis compared it: one row per (comm, rank, seq), merged from every
file that describes it (a rank's NCCL log and its Flight Recorder dump give one row), with the communicator and
the rank as the analysis resolved them. `file`, `line`, `record` are the row's first source, `fr_file` and
`fr_record` its Flight Recorder record, `sources` every format that described it. `gates`, `fingerprints` and
`ras` are the gate decisions, the fingerprint rows and the RAS counts as parsed, one row each.
"""

from __future__ import annotations

import io
from dataclasses import fields
from enum import Enum
from pathlib import Path

import polars as pl

from ..align.streams import Streams
from ..align.wedge import Window
from ..errors import OutputError
from ..model import COLLECTIVE_SCHEMA, Evidence, FingerprintRow, GateDecision
from .files import write_replacing


class TableFormat(str, Enum):
    """The file formats a table is written in, by the output's suffix."""

    PARQUET = ".parquet"
    CSV = ".csv"
    NDJSON = ".ndjson"


class ExportTable(str, Enum):
    """The tables `export --table` writes."""

    COLLECTIVES = "collectives"
    GATES = "gates"
    FINGERPRINTS = "fingerprints"
    RAS = "ras"


def table_format(out: str | Path, option: str = "--out") -> TableFormat:
    """The format `out`'s suffix names, or OutputError (checked before any input is read)."""
    suffix = Path(out).suffix.lower()
    for fmt in TableFormat:
        if suffix == fmt.value:
            return fmt
    named = f"suffix {suffix}" if suffix else "no suffix"
    raise OutputError(f"{option} {out}: {named}; the table format follows the suffix: .parquet, .csv or .ndjson")


# Columns of `collectives`, in order: where the row was read, then who launched it, then what it was.
COLLECTIVE_COLUMNS: dict[str, pl.DataType] = {
    "file": pl.String, "line": pl.Int64, "record": pl.Int64, "format": pl.String,
    "fr_file": pl.String, "fr_record": pl.Int64, "sources": pl.String,
    **{name: dtype for name, dtype in COLLECTIVE_SCHEMA.items() if name not in ("file", "line", "record")},
    "checked": pl.Boolean, "checked_at": pl.String,
}

GATE_COLUMNS: dict[str, pl.DataType] = {
    "file": pl.String, "line": pl.Int64, "rank": pl.Int64, "step": pl.Int64, "decision": pl.String,
    "seq": pl.Int64, "proposed_pass_count": pl.Int64, "sched_count": pl.Int64, "fits": pl.Boolean,
    "md_none": pl.Boolean, "max_model_len": pl.Int64, "spec_tokens": pl.Int64, "mode": pl.String,
    "time": pl.Float64,
}

FINGERPRINT_COLUMNS: dict[str, pl.DataType] = {
    "file": pl.String, "line": pl.Int64, "rank": pl.Int64, "step": pl.Int64, "op": pl.Int64, "tag": pl.String,
    "kind": pl.String, "numel": pl.Int64, "digest": pl.String, "sum": pl.Float64, "expected_sum": pl.Float64,
}

RAS_COLUMNS: dict[str, pl.DataType] = {
    "file": pl.String, "line": pl.Int64, "time": pl.String, "nccl_version": pl.String, "event": pl.String,
    "truncated": pl.Boolean, "comm": pl.String, "comm_size": pl.Int64, "comm_status": pl.String,
    "comm_rank": pl.Int64, "host": pl.String, "pid": pl.Int64, "cuda_dev": pl.Int64, "status": pl.String,
    "type": pl.String, "count": pl.Int64, "missing": pl.Boolean, "unresponsive": pl.Boolean, "dead": pl.Boolean,
}

COLUMNS: dict[ExportTable, dict[str, pl.DataType]] = {
    ExportTable.COLLECTIVES: COLLECTIVE_COLUMNS, ExportTable.GATES: GATE_COLUMNS,
    ExportTable.FINGERPRINTS: FINGERPRINT_COLUMNS, ExportTable.RAS: RAS_COLUMNS,
}


def collectives_table(streams: Streams | None, formats: dict[str, str]) -> pl.DataFrame:
    """The compared rows (Streams.frame), sorted by comm, rank, seq; `formats` maps a file to its format."""
    if streams is None or not streams.parts:
        return pl.DataFrame(schema=COLLECTIVE_COLUMNS)
    frame = streams.frame
    missing = [pl.lit(None, dtype).alias(name) for name, dtype in COLLECTIVE_COLUMNS.items()
               if name not in frame.columns and name not in ("format", "sources")]
    return frame.with_columns(
        *missing,
        pl.col("file").replace_strict(formats, default=None, return_dtype=pl.String).alias("format"),
        pl.col("sources").list.join("+").alias("sources"),
    ).select([pl.col(name).cast(dtype) for name, dtype in COLLECTIVE_COLUMNS.items()])


def _records(rows: list, columns: dict[str, pl.DataType]) -> pl.DataFrame:
    """Frozen records with a `loc` as a frame of `columns` (`file` and `line` spell out the Location)."""
    names = [f.name for f in fields(rows[0])] if rows else []
    data = [{"file": r.loc.path, "line": r.loc.line, **{n: getattr(r, n) for n in names if n in columns}}
            for r in rows]
    return pl.DataFrame(data, schema=columns, strict=False, orient="row") if data else pl.DataFrame(schema=columns)


def gates_table(decisions: list[GateDecision]) -> pl.DataFrame:
    """One row per gate decision, in input order."""
    return _records(decisions, GATE_COLUMNS)


def fingerprints_table(rows: list[FingerprintRow]) -> pl.DataFrame:
    """One row per fingerprint row, in input order."""
    return _records(rows, FINGERPRINT_COLUMNS)


def ras_table(evidence: list[Evidence]) -> pl.DataFrame:
    """One row per (reply, comm, comm rank, collective type) of every RAS reply; a rank the reply gives no
    counts for (missing, dead) is one row with `type` and `count` null."""
    data = []
    for item in evidence:
        for snapshot in item.ras:
            reply = {"file": snapshot.loc.path, "line": snapshot.loc.line, "time": snapshot.time,
                     "nccl_version": snapshot.nccl_version, "event": snapshot.event,
                     "truncated": snapshot.truncated}
            for comm in snapshot.comms:
                where = {**reply, "comm": comm.comm, "comm_size": comm.size, "comm_status": comm.status}
                for rank in comm.ranks:
                    who = {**where, "comm_rank": rank.rank, "host": rank.host, "pid": rank.pid,
                           "cuda_dev": rank.cuda_dev, "status": rank.status, "missing": rank.missing,
                           "unresponsive": rank.unresponsive, "dead": rank.dead}
                    counts = sorted(rank.counts.items()) or [(None, None)]
                    data.extend({**who, "type": kind, "count": count} for kind, count in counts)
    return pl.DataFrame(data, schema=RAS_COLUMNS, strict=False) if data else pl.DataFrame(schema=RAS_COLUMNS)


PAIRING_COLUMNS: dict[str, pl.DataType] = {
    "comm": pl.String, "first_seq": pl.Int64, "last_seq": pl.Int64, "kind": pl.String, "collectives": pl.Int64,
}


def pairings_table(window: Window) -> pl.DataFrame:
    """Every pairing run of a corrupt-and-continue window, in seq order (what the postmortem writes beside the
    report: a long window alternates kinds tens of thousands of times)."""
    runs = window.pairings
    return pl.DataFrame({
        "comm": [window.comm] * len(runs), "first_seq": [r.first_seq for r in runs],
        "last_seq": [r.last_seq for r in runs], "kind": [r.kind.value for r in runs],
        "collectives": [r.collectives for r in runs],
    }, schema=PAIRING_COLUMNS)


def write_table(frame: pl.DataFrame, out: str | Path) -> Path:
    """Write `frame` to `out` in the format of its suffix, whole or not at all (files.write_replacing)."""
    fmt = table_format(out)
    buffer = io.BytesIO()
    if fmt is TableFormat.PARQUET:
        frame.write_parquet(buffer)
    elif fmt is TableFormat.CSV:
        frame.write_csv(buffer)
    elif fmt is TableFormat.NDJSON:
        frame.write_ndjson(buffer)
    else:  # pragma: no cover (every member is handled above; tests iterate them)
        raise AssertionError(fmt)
    return write_replacing(out, buffer.getvalue())


def read_table(path: str | Path, table: ExportTable = ExportTable.COLLECTIVES) -> pl.DataFrame:
    """A table write_table wrote, read back with polars in its column types (CSV and NDJSON carry none)."""
    fmt = table_format(path)
    if fmt is TableFormat.PARQUET:
        return pl.read_parquet(path)
    if fmt is TableFormat.CSV:
        return pl.read_csv(path, schema=COLUMNS[table])
    return pl.read_ndjson(path, schema=COLUMNS[table])
