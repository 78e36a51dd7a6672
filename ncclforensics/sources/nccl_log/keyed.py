"""The keyed reader of big logs: COLL lines deduplicated before they are parsed.

A COLL line differs from the one before it mostly in its opCount. Masking that (`: opCount 0 `) and, where COLL
lines carry one, the timestamp in front (kept per line), leaves few distinct lines (keys) in a log of millions;
every per-line regex of the line reader then runs once per key instead of once per line. The opCount is hex
between `: opCount ` and a space, so no other pattern here can see it: a line and its key give the same count,
stamp, run-together flag and kind of line; and the same shape, unless the opCount is left in it (a malformed
body), which the key tells by giving another shape with `: opCount 1 `. Lines of such keys, and COLL lines that
are also INIT/WARN lines (whose fields quote the line), are re-read and keyed by their own text; so are the bad
lines that are quoted. The result is the line reader's exactly, but for `opcount`, left null. Logs read this way:
plain files (not gzip, no BOM, LF line ends) of at least the package's KEYED_MIN_BYTES; they are read a block of
lines at a time, never whole in memory (polars' own scan of a file holds all of it: 8 such logs parsed side by side
on 16 cores held their 1.45 GB at once).
"""

from __future__ import annotations

import codecs
import io
import re
from collections.abc import Iterator
from pathlib import Path

import polars as pl

from ..base import MAX_LINE_BYTES as MAX_TEXT_LINE_BYTES
from ..base import InputFile, long_line_at
from .lines import COMPRESSED_MAGIC
from .patterns import (
    COLL_MARK, COUNT, MAX_LINE_BYTES, MISC_MARK, STAMP, cut_shape, huge_count, misc_groups, unreadable,
)
from .table import LONG_LINES_SCHEMA, LogLines

_OPCOUNT = COLL_MARK + "[0-9a-fA-F]+ "
_LEAD_STAMP = "^" + STAMP
_STAND_IN = "[2000-01-01 00:00:00] "  # a stamp in place of another: the shape regex takes any stamp alike


def read_keyed(file: InputFile, min_bytes: int) -> LogLines | None:
    """What the lines of a big plain log hold, read by keys; None to read it line by line (same result)."""
    try:
        if file.path.stat().st_size < min_bytes or file.compressed:
            return None
        if long_line_at(file.path, MAX_TEXT_LINE_BYTES) is not None:
            # polars would build the whole line (a hole of 3 GiB is one line of NULs: 16 GiB of RSS) before any
            # length could be checked; the line reader refuses such a file unread
            return None
        with open(file.path, "rb") as f:
            head = f.read(1 << 16)
            f.seek(-1, 2)
            complete = f.read(1) == b"\n"
    except OSError:
        return None
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE, codecs.BOM_UTF8, *COMPRESSED_MAGIC)):
        return None
    first = head.split(b"\n", 1)
    if len(first) < 2 or b"\x1f" in first[0]:  # no LF early (or no LF at all), or the separator on line 1
        return None
    stamps = re.search(rb"(?m)^\[[0-9]{4}-[0-9]{2}-[0-9]{2} [^\n]*: opCount ", head) is not None
    try:
        return _KeyedReader(file.path, complete, stamps).run()
    except pl.exceptions.PolarsError:  # the separator in the text, bad UTF-8, ...: the line reader says what
        return None


BLOCK_BYTES = 4 << 20  # lines are read in blocks of about this size: the memory a big log costs while it is read


def _read_blocks(path: Path, *columns: pl.Expr | str, where: pl.Expr | None = None) -> pl.DataFrame:
    """`columns` of the file's lines (`text`, split as the line reader splits them: a blank line is "", not null)
    and each line's number (`line`, first), computed a block of whole lines at a time; `where` keeps some rows."""
    parts, first_line = [], 1
    for block in _blocks(path):
        part = _scan_bytes(block).select(*columns).collect(engine="streaming")
        part = part.with_row_index("line", offset=first_line).with_columns(pl.col("line").cast(pl.Int64))
        first_line += part.height
        parts.append(part if where is None else part.filter(where))
    if not parts:  # an empty file (or one emptied since it was first read)
        return pl.DataFrame(schema={"line": pl.Int64, "text": pl.String})
    return pl.concat(parts)


def _blocks(path: Path) -> Iterator[memoryview]:
    """The file's bytes, about BLOCK_BYTES at a time, each block ending at a line break (but the last); a line
    longer than a block makes its block longer (long_line_at bounds it)."""
    with open(path, "rb") as f:
        while block := f.read(BLOCK_BYTES):
            if b"\n" not in block:  # a long line: read on to its end, joined once (not copied again per block)
                pieces = [block]
                while more := f.read(BLOCK_BYTES):
                    pieces.append(more)
                    if b"\n" in more:
                        break
                block = b"".join(pieces)
            cut = block.rfind(b"\n") + 1
            if 0 < cut < len(block):  # the part line after the last break starts the next block
                f.seek(cut - len(block), io.SEEK_CUR)
            else:
                cut = len(block)
            yield memoryview(block)[:cut]


def _scan_bytes(block: memoryview) -> pl.LazyFrame:
    """A block's lines as one column, `text`."""
    if hasattr(pl, "scan_lines"):  # newer polars: a third less work than the CSV reader, and no separator byte
        return pl.scan_lines(io.BytesIO(block), name="text")
    return pl.scan_csv(io.BytesIO(block), has_header=False, separator="\x1f", quote_char=None, new_columns=["text"],
                       infer_schema=False, encoding="utf8")


class _KeyedReader:
    """One big log read as keys: see the module docstring."""

    def __init__(self, path: Path, complete: bool, stamps: bool) -> None:
        self.path = path
        self.complete = complete
        self.stamps = stamps  # mask leading timestamps of COLL lines too
        self._texts: dict[int, str] = {}
        self._long = LONG_LINES_SCHEMA.to_frame()

    def run(self) -> LogLines | None:
        text = pl.col("text")
        coll = text.str.contains(COLL_MARK, literal=True)
        key = text.str.replace("(?-u)" + _OPCOUNT, COLL_MARK + "0 ")  # (?-u): the same on this pattern, faster
        lead = pl.lit(None, pl.String)
        if self.stamps:
            key = pl.when(coll).then(key.str.replace(_LEAD_STAMP, _STAND_IN)).otherwise(key)
            lead = pl.when(coll).then(text.str.extract(_LEAD_STAMP, 1))
        long = text.str.len_bytes() > MAX_LINE_BYTES  # no NCCL output: keyed as nothing, reported by its size
        categories = pl.Categories.random()  # one for all the blocks: a key has one id in the whole file
        columns = (pl.when(long).then(None).otherwise(key).cast(pl.Categorical(categories)).alias("key"),
                   pl.when(long).then(text.str.len_bytes()).alias("long"), lead.alias("lead"))
        lines = _read_blocks(self.path, *columns)
        if lines.height == 0:
            return None
        self._long = lines.filter(pl.col("long").is_not_null()).select("line", pl.col("long").alias("size"))
        cut_line = None if self.complete else lines.height
        present = lines.select(pl.col("key").unique().drop_nulls())["key"]
        keys = pl.DataFrame({"kid": present.to_physical(), "key": present.cast(pl.String)})
        lines = lines.select("line", pl.col("key").to_physical().alias("kid"), "lead")
        keys = self._classify(keys)
        unsafe = keys.filter(pl.col("unsafe"))["kid"]
        if len(unsafe):  # key these lines by their own text
            redo = lines.filter(pl.col("kid").is_in(unsafe.implode()))["line"]
            if len(redo) > max(10_000, lines.height // 100):
                return None
            own = self._originals(redo)
            own = own.with_columns(pl.col("text").rank("dense").cast(pl.UInt32).alias("rank"))
            base = int(keys["kid"].max()) + 1
            own = own.with_columns((pl.col("rank") + base - 1).alias("kid"))
            extra = own.select("kid", pl.col("text").alias("key")).unique("kid").with_columns(
                pl.lit(True).alias("exact"))
            keys = pl.concat([keys.filter(~pl.col("unsafe")).select("kid", "key", "exact"),
                              extra], how="vertical_relaxed")
            keys = self._classify(keys.select("kid", "key"), exact=keys["exact"])
            lines = lines.join(own.select("line", pl.col("kid").alias("own")), on="line", how="left").select(
                "line", pl.coalesce("own", "kid").alias("kid"), "lead")
        by_kid = keys.sort("kid")
        if by_kid["kid"].to_list() != list(range(by_kid.height)):
            dense = by_kid.with_row_index("dense")
            lines = lines.with_columns(
                pl.col("kid").replace_strict(dense["kid"], dense["dense"], return_dtype=pl.UInt32))
            by_kid = dense.drop("kid").rename({"dense": "kid"})
        return self._found(lines, by_kid, cut_line)

    def _classify(self, keys: pl.DataFrame, exact: pl.Series | None = None) -> pl.DataFrame:
        """Per key: what kind of line it is, and whether its lines must be keyed by their own text (`unsafe`)."""
        k = pl.col("key")
        keys = keys.with_columns(
            k.str.contains(COLL_MARK, literal=True).alias("coll"),
            k.str.contains(MISC_MARK).alias("misc"),
            k.str.contains(_OPCOUNT).alias("masked"),
            (k.str.starts_with(_STAND_IN) if self.stamps else pl.lit(False)).alias("restamped"),
        )
        if exact is None:
            exact = ~(keys["masked"] | keys["restamped"])
        keys = keys.with_columns(exact.alias("exact"))
        shape = cut_shape(k)
        other = cut_shape(k.str.replace(_OPCOUNT, COLL_MARK + "1 "))
        return keys.with_columns(
            (~pl.col("exact") & pl.col("coll") & (pl.col("misc") | (pl.col("masked") & (shape != other))))
            .alias("unsafe"))

    def _originals(self, lines: pl.Series) -> pl.DataFrame:
        """(line, text) of `lines`, read again."""
        wanted = [line for line in lines.to_list() if line not in self._texts]
        if wanted:
            wanted_lines = pl.Series(wanted, dtype=pl.Int64).implode()
            found = _read_blocks(self.path, "text", where=pl.col("line").is_in(wanted_lines))
            self._texts.update(zip(found["line"].to_list(), found["text"].to_list()))
        return pl.DataFrame({"line": lines, "text": [self._texts.get(line) for line in lines.to_list()]},
                            schema={"line": pl.Int64, "text": pl.String})

    def _found(self, lines: pl.DataFrame, keys: pl.DataFrame, cut_line: int | None) -> LogLines:
        """lines: (line, kid, lead); keys: one row per kid 0..n-1 (key, coll, misc, restamped, ...)."""
        misc_kids = keys.filter("misc")["kid"]
        misc = lines.filter(pl.col("kid").is_in(misc_kids.implode())).select(
            "line", pl.lit(keys["key"]).gather(pl.col("kid")).alias("text"))
        misc = misc.select("line", *misc_groups(pl.col("text")))
        coll = keys.filter("coll")
        rows = lines.filter(pl.col("kid").is_in(coll["kid"].implode()))
        if rows.height == 0:
            shapes = pl.DataFrame(schema={"sid": pl.UInt32, "shape": pl.String})
            return LogLines(misc, rows, shapes, cut_line, self._originals, self._long)
        k = pl.col("key")
        stamped = bool(coll.select(k.str.contains(STAMP).any()).item())
        keys = keys.with_columns(
            cut_shape(k, stamped).alias("shape"),
            k.str.extract(COUNT, 1).cast(pl.Int64, strict=False).alias("count"),
            huge_count(k).alias("huge"),
            unreadable(k).alias("unreadable"),
            (k.str.extract(STAMP, 1) if stamped else pl.lit(None, pl.String)).alias("ts"),
            (k.str.count_matches(COLL_MARK, literal=True) > 1).alias("merged"),
        )
        shapes = keys.filter("coll").select(pl.col("shape").unique()).with_row_index("sid")
        keys = keys.join(shapes, on="shape", how="left").sort("kid")
        used = keys.filter("coll")

        def per_key(name: str) -> pl.Expr:  # one value where every COLL key has the same
            column = used.get_column(name)
            if len(column) and column.n_unique() == 1:
                return pl.lit(column[0], keys[name].dtype).alias(name)
            return pl.lit(keys[name]).gather(pl.col("kid")).alias(name)

        ts = per_key("ts")
        if used.get_column("restamped").any():
            ts = pl.when(per_key("restamped")).then(pl.col("lead")).otherwise(ts).alias("ts")
        rows = rows.select("line", per_key("count"), per_key("huge"), per_key("unreadable"), ts, per_key("merged"),
                           per_key("sid"))
        return LogLines(misc, rows, shapes, cut_line, self._originals, self._long)
