"""The line reader: a log's content split into numbered lines in memory, every line matched column-wise.

Used for every log the keyed reader (keyed.py) does not take: small ones, gzip, UTF-16, CR line ends, bad UTF-8.
"""

from __future__ import annotations

import codecs

import polars as pl

from ...model import Diagnostic
from ..base import decode
from .patterns import (
    COLL_MARK, COUNT, DIAGNOSTIC_LIMIT, MAX_LINE_BYTES, MISC_MARK, OPCOUNT_VALUE, STAMP, Problems, cut_shape,
    huge_count, misc_groups, unreadable,
)
from .table import LogLines

# Separator bytes for read_csv, which splits the lines; the first one absent from the content is used.
_SEPARATORS = bytes([0x1F, 0x1E, 0x1D, 0x1C, *range(0x01, 0x09), *range(0x0E, 0x1C), 0x7F, 0x00])
# read_csv decompresses content that starts with these (gzip, zlib, zstd) with no size limit: a small file, or a
# .gz holding one, would expand past InputFile's decompression-bomb limit. Such content is split in Python.
COMPRESSED_MAGIC = (b"\x1f\x8b", b"\x78\x01", b"\x78\x5e", b"\x78\x9c", b"\x78\xda", b"\x28\xb5\x2f\xfd")


def read_lines(data: bytes, problems: Problems) -> LogLines:
    """What the lines of `data` (a whole log) hold; over-long lines are reported and skipped."""
    frame, complete = line_frame(data, problems.name, problems.items)
    del data
    cut_line = None if complete or frame.height == 0 else frame["line"][-1]
    long = pl.col("text").str.len_bytes() > MAX_LINE_BYTES
    long_lines = frame.filter(long).select("line", pl.col("text").str.len_bytes().alias("size"))
    frame = frame.filter(~long.fill_null(False))
    text = pl.col("text")
    marked = frame.with_columns(
        text.str.contains(COLL_MARK, literal=True).fill_null(False).alias("coll"),
        text.str.contains(MISC_MARK).fill_null(False).alias("misc"),
    )
    candidates = marked.filter(pl.col("coll")).select("line", "text")
    misc = marked.filter(pl.col("misc")).select("line", *misc_groups(text))
    del frame, marked
    stamped = candidates.height > 0 and candidates.select(text.str.contains(STAMP).any()).item()
    rows = candidates.select(
        "line",
        cut_shape(text, stamped).alias("shape"),
        text.str.extract(COUNT, 1).cast(pl.Int64, strict=False).alias("count"),
        huge_count(text).alias("huge"),
        unreadable(text).alias("unreadable"),
        (text.str.extract(STAMP, 1) if stamped else pl.lit(None, pl.String)).alias("ts"),
        (text.str.count_matches(COLL_MARK, literal=True) > 1).alias("merged"),  # two COLL lines run together
        text.str.extract(OPCOUNT_VALUE, 1).str.to_integer(base=16, strict=False).alias("opcount"),
    )
    shapes = rows.select(pl.col("shape").unique()).with_row_index("sid")
    rows = rows.with_columns(
        pl.col("shape").replace_strict(shapes["shape"], shapes["sid"], return_dtype=pl.UInt32).alias("sid")
    ).drop("shape")
    return LogLines(misc=misc, rows=rows, shapes=shapes, cut_line=cut_line,
                    texts=lambda lines: candidates.filter(pl.col("line").is_in(lines.implode())), long_lines=long_lines)


def report_long_lines(problems: Problems, long_lines: pl.DataFrame) -> None:
    """A warning for each line over MAX_LINE_BYTES (skipped by both readers)."""
    for line, size in long_lines.head(DIAGNOSTIC_LIMIT).iter_rows():
        problems.warn(line, f"line of {size} bytes is not NCCL debug output; skipped")
    problems.summarise(long_lines.height, "over-long lines skipped")


def line_frame(data: bytes, name: str, problems: list[Diagnostic]) -> tuple[pl.DataFrame, bool]:
    """The content as a frame of `line` (1-based) and `text` (null for a blank line), and whether it ends in LF.

    Lines end at LF (CRLF too; lone CR when the file has no LF at all). polars' CSV reader with a separator
    byte absent from the content splits them fastest; Python's split is the fallback.
    """
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        text, problem = decode(data, name)
        if problem:
            problems.append(problem)
        data = text.encode("utf-8", errors="replace")
    elif data.startswith(codecs.BOM_UTF8):
        data = data[3:]
    if b"\n" not in data and b"\r" in data:
        data = data.replace(b"\r", b"\n")
    complete = data.endswith(b"\n")
    if not data:
        return pl.DataFrame({"line": [], "text": []}, schema={"line": pl.Int64, "text": pl.String}), True
    frame = None
    separator = None if data.startswith(COMPRESSED_MAGIC) else next(
        (chr(b) for b in _SEPARATORS if bytes([b]) not in data), None)
    if separator is not None:
        try:
            frame = _split(data, separator)
        except pl.exceptions.ComputeError:  # not valid UTF-8: decode with replacement, say where, try again
            text, problem = decode(data, name)
            if problem:
                problems.append(problem)
            data = text.encode("utf-8", errors="replace")
            try:
                frame = _split(data, separator)
            except pl.exceptions.PolarsError:
                frame = None
        except pl.exceptions.PolarsError:
            frame = None
    if frame is None:
        text, problem = decode(data, name)
        if problem:
            problems.append(problem)
        pieces = text.split("\n")
        if complete:
            pieces.pop()
        frame = pl.DataFrame({"text": pieces}, schema={"text": pl.String})
        frame = frame.with_columns(pl.col("text").str.strip_suffix("\r"))
    return frame.with_row_index("line", offset=1).with_columns(pl.col("line").cast(pl.Int64)), complete


def _split(data: bytes, separator: str) -> pl.DataFrame:
    return pl.read_csv(
        data, has_header=False, separator=separator, quote_char=None, new_columns=["text"],
        infer_schema=False, encoding="utf8",
    )
