"""What is wrong with a log's COLL lines, said at their file:line: each kind at most DIAGNOSTIC_LIMIT times."""

from __future__ import annotations

import polars as pl

from .history import History, fallback_comm
from .patterns import COLL_MARK, DIAGNOSTIC_LIMIT, Problems, coll_lines


def report_bad_lines(problems: Problems, lines: pl.Series, bad: pl.DataFrame, cut_line: int | None) -> None:
    """`lines`: every bad COLL line, in order; `bad`: the first of them (line, text)."""
    shown = 0
    for line, text in bad.head(DIAGNOSTIC_LIMIT + 1).iter_rows():
        quoted = text.strip()
        quoted = quoted if len(quoted) <= 160 else quoted[:157] + "..."
        if line == cut_line:
            problems.warn(line, f"last line is cut short (the process died mid-write?); ignored: {quoted!r}")
            continue
        if shown < DIAGNOSTIC_LIMIT:
            what = "COLL lines run together" if text.count(COLL_MARK) > 1 else "unrecognised COLL line"
            problems.error(line, f"{what}: {quoted!r}")
            shown += 1
    errors = len(lines) - (1 if cut_line is not None and lines[-1] == cut_line else 0)
    if errors > shown:
        problems.error(None, f"{errors - shown} more unrecognised COLL lines not listed")


def report_huge_counts(problems: Problems, lines: pl.Series) -> None:
    """Lines whose count is beyond 2**63 (`count 18446744073709551616`): no real collective, left unknown."""
    for line in lines.head(DIAGNOSTIC_LIMIT):
        problems.warn(line, "the collective's count is beyond 2**63 (no real collective has it); read as unknown")
    if len(lines) > DIAGNOSTIC_LIMIT:
        problems.warn(None, f"{len(lines) - DIAGNOSTIC_LIMIT} more COLL lines with a count beyond 2**63")


def report_unreadable(problems: Problems, rows: pl.DataFrame, shapes: pl.DataFrame) -> None:
    """Errors for lines with a field that holds no number (`count -4096`): the collective is kept, that field unknown.

    Dropping the line would leave a hole in its communicator's sequence, and every later collective of that rank
    would be compared with the wrong one of the others'."""
    by_shape = shapes.select("sid", pl.col("unreadable").alias("in_shape"))
    lines = (
        rows.select("line", "sid", "unreadable").join(by_shape, on="sid", how="left")
        .select("line", pl.concat_str(["unreadable", "in_shape"], separator=", ", ignore_nulls=True).alias("what"))
        .filter(pl.col("what").is_not_null() & (pl.col("what") != ""))
    )
    for line, what in lines.head(DIAGNOSTIC_LIMIT).iter_rows():
        problems.error(line, f"COLL line with unreadable fields (read as unknown, the collective kept in its place "
                             f"in the sequence): {what}")
    if lines.height > DIAGNOSTIC_LIMIT:
        problems.error(None, f"{lines.height - DIAGNOSTIC_LIMIT} more COLL lines with unreadable fields not listed")


def report_headerless(problems: Problems, rows: pl.DataFrame, shapes: pl.DataFrame, whos: pl.DataFrame) -> None:
    """One warning per comm pointer with COLL lines that carry no `host:pid:tid` header."""
    lost = shapes.filter("headerless")["sid"]
    if not len(lost):
        return
    summary = (
        rows.filter(pl.col("sid").is_in(lost.implode()))
        .group_by("who")
        .agg(pl.col("line").min().alias("first"), pl.len().alias("n"))
        .join(whos, on="who")
        .sort("first")
    )
    for _, first, n, host, pid, ptr in summary.head(DIAGNOSTIC_LIMIT).iter_rows():
        what = f"{coll_lines(n)} of comm {ptr} without a host:pid:tid header (interleaved output?)"
        if host is None:
            problems.warn(first, f"{what}: the process is unknown")
        else:
            problems.warn(first, f"{what}: attributed to {host}:{pid}, the one process using that comm pointer")
    problems.summarise(summary.height, "more comm pointers with headerless COLL lines")


def report_missing_inits(
    problems: Problems, rows: pl.DataFrame, comms: pl.DataFrame, whos: pl.DataFrame, history: History
) -> None:
    """One warning per communicator whose COLL lines cannot be tied to a commId hash."""
    hashed = comms.filter("hashed")["cid"]
    known = whos.filter(pl.col("host").is_not_null())["who"]
    unhashed = (
        rows.filter(pl.col("who").is_in(known.implode()) & ~pl.col("cid").is_in(hashed.implode()).fill_null(False))
        .group_by("who", "cid")
        .agg(pl.col("line").min().alias("first"), pl.len().alias("n"))
        .join(whos, on="who")
        .sort("first")
    )
    for _, cid, first, n, host, pid, ptr in unhashed.head(DIAGNOSTIC_LIMIT).iter_rows():
        if cid is None:
            why = "no INIT line for this comm pointer in this process precedes them (NCCL_DEBUG_SUBSYS lacks INIT?)"
        else:
            why = history.comms[cid].no_hash_reason or "its INIT line gives no commId"
        problems.warn(first, f"{coll_lines(n)} of comm {ptr} of {host}:{pid} cannot be tied to a communicator hash: "
                             f"{why}; they are reported as comm {fallback_comm(host, pid, ptr)!r}")
    problems.summarise(unhashed.height, "more communicators without a hash")
