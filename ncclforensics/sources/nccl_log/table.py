"""The COLL table: what a reader found in a log's lines, joined with its INIT history into COLLECTIVE_SCHEMA.

Both readers (lines.py, keyed.py) hand over the same `LogLines`: one row per COLL line (its varying fields) and one
per distinct shape (what stays the same from call to call). Only the shapes are parsed field by field here.
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Callable

import polars as pl

from ...model import EventState, conform, empty_collectives
from ...model.kinds import NCCL_DTYPES, NCCL_REDOPS, P2P_OPS, P2P_SUFFIX, normalize_op
from .coll_problems import (
    report_bad_lines, report_headerless, report_huge_counts, report_missing_inits, report_unreadable,
)
from .history import History
from .patterns import DIAGNOSTIC_LIMIT, SHAPE, SHAPE_CHECKS, SHAPE_FIELDS, Problems, quoted


@dataclass(frozen=True)
class LogLines:
    """What a reader found in one log, before its COLL lines are tied to communicators."""

    misc: pl.DataFrame  # the INIT, WARN and version lines: `line` and one struct of groups per MISC pattern
    rows: pl.DataFrame  # one per COLL line: line, count (Int64), huge, unreadable, ts (String), merged, sid [, opcount]
    shapes: pl.DataFrame  # one per distinct shape: sid (UInt32), shape
    cut_line: int | None  # the last line, where it has no line feed (cut short)
    texts: Callable[[pl.Series], pl.DataFrame]  # (line, text) of some COLL lines, to quote bad ones
    long_lines: pl.DataFrame  # (line, size) of the lines over MAX_LINE_BYTES, skipped


LONG_LINES_SCHEMA = pl.Schema({"line": pl.Int64, "size": pl.UInt32})


def collectives(found: LogLines, history: History, problems: Problems) -> pl.DataFrame:
    """The collectives frame of a log whose INIT history is `history`."""
    rows = found.rows
    if rows.height == 0:
        return empty_collectives()
    shapes = _attribute_headerless(_parse_shapes(found.shapes), history)
    bad = pl.col("sid").is_in(shapes.filter(~pl.col("valid"))["sid"].implode()) | pl.col("merged")
    bad_lines = rows.filter(bad)["line"]
    if len(bad_lines):
        quoted = found.texts(bad_lines.head(DIAGNOSTIC_LIMIT + 1)).sort("line")
        report_bad_lines(problems, bad_lines, quoted, found.cut_line)
        rows = rows.filter(~bad)
    report_huge_counts(problems, rows.filter("huge")["line"])
    report_unreadable(problems, rows, shapes)
    rows = rows.drop("merged", "huge", "unreadable")
    whos = shapes.select("host", "pid", "ptr").unique().with_row_index("who")
    shapes = shapes.join(whos, on=["host", "pid", "ptr"], how="left", nulls_equal=True).sort("sid")
    rows = rows.with_columns(shapes["who"].gather(rows["sid"]).alias("who"))
    comms = _comm_table(history)
    keyed = comms.join(whos, on=["host", "pid", "ptr"], how="inner").select("init_line", "who", "cid")
    if keyed.height == 0 or keyed.get_column("who").is_unique().all():
        rows = _one_init_each(rows, keyed, whos.height)
    else:
        rows = rows.join_asof(
            keyed.sort("init_line"), left_on="line", right_on="init_line", by="who", strategy="backward",
            check_sortedness=False,
        )
    report_headerless(problems, rows, shapes, whos)
    report_missing_inits(problems, rows, comms, whos, history)
    return conform(_columns(problems.name, rows, shapes, whos, comms, history))


def _parse_shapes(shapes: pl.DataFrame) -> pl.DataFrame:
    """Parse the distinct shapes into typed fields; `valid` is false where one is no well-formed COLL line."""
    shape = pl.col("shape")
    shapes = shapes.with_columns(
        shape.str.contains(SHAPE).alias("valid"),
        *[shape.str.extract(rx, 1).alias(name) for name, rx in SHAPE_FIELDS.items()],
    )
    # A value that is no number (`datatype x`) is unknown, named in `unreadable`; the line stays a collective.
    bad = {name: ~pl.col(name).str.contains(rx) for name, (_, rx) in SHAPE_CHECKS.items()}
    shapes = shapes.with_columns(
        pl.concat_str([pl.when(bad[name]).then(pl.lit(what + " ") + quoted(pl.col(name)))
                       for name, (what, _) in SHAPE_CHECKS.items()], separator=", ", ignore_nulls=True)
        .replace("", None).alias("unreadable"),
        *[pl.when(bad[name]).then(None).otherwise(pl.col(name)).alias(name) for name in SHAPE_CHECKS],
    )
    ops = {op: normalize_op(op) for op in shapes["op"].unique().drop_nulls().to_list()}
    dtypes = {str(k): v for k, v in NCCL_DTYPES.items()}
    redops = {str(k): v for k, v in NCCL_REDOPS.items()}
    return shapes.with_columns(
        pl.col("op").replace_strict(ops, default=pl.col("op"), return_dtype=pl.String),
        pl.col("dt").replace_strict(dtypes, default=pl.lit("nccl_dtype_") + pl.col("dt"), return_dtype=pl.String)
        .alias("dtype"),
        pl.col("redop").replace_strict(redops, default=pl.col("redop"), return_dtype=pl.String),
        pl.col("root").cast(pl.Int64, strict=False),
        pl.col("nranks").cast(pl.Int64, strict=False),
        pl.col("pid").cast(pl.Int64, strict=False),
        pl.col("ptr").str.to_lowercase(),
    ).drop("dt", "shape")


def _attribute_headerless(shapes: pl.DataFrame, history: History) -> pl.DataFrame:
    """Give a COLL line without `host:pid:tid` the process whose lines use its comm pointer, if just one does."""
    headerless = pl.col("valid") & (pl.col("host").is_null() | pl.col("pid").is_null())
    shapes = shapes.with_columns(headerless.alias("headerless"))
    if not shapes["headerless"].any():
        return shapes
    owners = pl.concat([
        shapes.filter(pl.col("valid") & ~pl.col("headerless")).select("host", "pid", "ptr"),
        pl.DataFrame(
            [(c.host, c.pid, c.ptr) for c in history.comms if c.host is not None and c.pid is not None],
            schema={"host": pl.String, "pid": pl.Int64, "ptr": pl.String}, orient="row",
        ),
    ]).unique()
    sole = owners.filter(pl.len().over("ptr") == 1).rename({"host": "owner_host", "pid": "owner_pid"})
    return shapes.join(sole, on="ptr", how="left", maintain_order="left").with_columns(
        pl.when("headerless").then(pl.col("owner_host")).otherwise(pl.col("host")).alias("host"),
        pl.when("headerless").then(pl.col("owner_pid")).otherwise(pl.col("pid")).alias("pid"),
    ).drop("owner_host", "owner_pid")


def _comm_table(history: History) -> pl.DataFrame:
    """The communicators known from INIT lines; row `cid` is history.comms[cid]."""
    return pl.DataFrame(
        [
            (i, c.host, c.pid, c.ptr, c.first_line, c.key, c.hash is not None, c.comm_rank, c.comm_size,
             history.rank_of(c.host, c.pid, c.cuda_dev))
            for i, c in enumerate(history.comms)
        ],
        schema={
            "cid": pl.UInt32, "host": pl.String, "pid": pl.Int64, "ptr": pl.String, "init_line": pl.Int64,
            "comm": pl.String, "hashed": pl.Boolean, "comm_rank": pl.Int64, "comm_size": pl.Int64,
            "rank": pl.Int64,
        },
        orient="row",
    )


class _Same:
    """The one value a column has in every row (possibly null)."""

    def __init__(self, value: object) -> None:
        self.value = value


def _single(column: pl.Series) -> _Same | None:
    """_Same(value) when every row of `column` holds the same value (or null), else None."""
    if len(column) == 0 or column.n_unique() != 1:
        return None
    return _Same(column[0])


def _pick(table: pl.Series, index: str, same: _Same | None) -> pl.Expr:
    """`table` gathered by the row column `index`: one value where every row has the same index."""
    if same is None:
        return pl.lit(table).gather(pl.col(index))
    value = None if same.value is None else table[same.value]
    return pl.lit(value, table.dtype)


def _one_init_each(rows: pl.DataFrame, keyed: pl.DataFrame, whos: int) -> pl.DataFrame:
    """The asof join of rows (by `who`, on `line`) with `keyed` (init_line, who, cid) where each who has at most one
    INIT: a row belongs to its process's communicator from its INIT line on, before that to none."""
    init = [None] * whos
    cid = [None] * whos
    for line, who, c in keyed.iter_rows():
        init[who], cid[who] = line, c
    init_s = pl.Series("init_line", init, dtype=pl.Int64)
    cid_s = pl.Series("cid", cid, dtype=pl.UInt32)
    who = _single(rows.get_column("who"))
    started = pl.col("line") >= _pick(init_s, "who", who)
    return rows.with_columns(
        pl.when(started).then(_pick(init_s, "who", who)).otherwise(None).alias("init_line"),
        pl.when(started).then(_pick(cid_s, "who", who)).otherwise(None).alias("cid"),
    )


def _columns(
    name: str, rows: pl.DataFrame, shapes: pl.DataFrame, whos: pl.DataFrame, comms: pl.DataFrame, history: History
) -> pl.DataFrame:
    """Assemble COLLECTIVE_SCHEMA's columns: fields by shape (`sid`), communicator by INIT (`cid`), seq.

    Where every row has the same shape, process or communicator, the columns they give are one value, not one
    per row (a log of one process and one communicator is a frame of a few varying columns)."""
    same = {k: _single(rows.get_column(k)) for k in ("sid", "cid", "who")}
    by_cid = {k: _pick(comms[k], "cid", same["cid"]) for k in ("comm", "comm_rank", "comm_size", "rank")}
    by_sid = {k: _pick(shapes[k], "sid", same["sid"]) for k in ("op", "dtype", "redop", "root", "nranks", "host", "pid")}
    by_who = whos.join(
        pl.DataFrame([(h, p, r) for (h, p), r in history.proc_rank.items()],
                     schema={"host": pl.String, "pid": pl.Int64, "rank": pl.Int64}, orient="row"),
        on=["host", "pid"], how="left", maintain_order="left",
    ).select(
        pl.concat_str([pl.col("host").fill_null("?"), pl.col("pid").cast(pl.String).fill_null("?"), "ptr"],
                      separator=":").alias("comm"),
        "rank",
    )
    stamp = pl.col("ts").str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False, time_zone="UTC", time_unit="us")
    seq = pl.int_range(1, pl.len() + 1, dtype=pl.Int64)
    seq = seq if same["who"] is not None and same["cid"] is not None else seq.over("who", "cid")
    comm = pl.coalesce(by_cid["comm"], _pick(by_who["comm"], "who", same["who"]))
    if shapes.get_column("op").is_in(list(P2P_OPS)).any():  # Send/Recv lines: a stream of their own
        p2p = by_sid["op"].is_in(list(P2P_OPS))
        rows = rows.with_columns(p2p.alias("_p2p"))
        comm = pl.when(p2p).then(comm + P2P_SUFFIX).otherwise(comm)
        seq = pl.int_range(1, pl.len() + 1, dtype=pl.Int64).over("who", "cid", "_p2p")
    return rows.select(
        pl.lit(name, pl.String).alias("file"),
        "line",
        pl.coalesce(by_cid["rank"], _pick(by_who["rank"], "who", same["who"])).alias("rank"),
        comm.alias("comm"),
        by_cid["comm_rank"].alias("comm_rank"),
        pl.coalesce(by_sid["nranks"], by_cid["comm_size"]).alias("comm_size"),
        seq.alias("seq"),
        (pl.col("opcount") if "opcount" in rows.columns else pl.lit(None, pl.Int64)).alias("opcount"),
        by_sid["op"].alias("op"),
        "count",
        *[by_sid[k].alias(k) for k in ("dtype", "redop", "root")],
        pl.lit(EventState.LAUNCHED.value).alias("state"),
        (stamp.dt.epoch("us") / 1e6).alias("time"),
        by_sid["host"].alias("host"),
        by_sid["pid"].alias("pid"),
    )
