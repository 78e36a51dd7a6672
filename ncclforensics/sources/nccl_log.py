"""NCCL_DEBUG logs (`NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,COLL`): collectives, comm identities, errors.

A file holds one process or many: lines of several processes interleave and are told apart by their
`host:pid:tid` header. Lines may carry NCCL's timestamp (`[2026-11-29 08:56:01] `, also sub-second), a launcher
prefix (`[1,0]<stdout>:`, `[rank0]:`, `0: `, `(RayTrainWorker pid=.., ip=..) `, grep's `LOG1.0.txt:`), `> `
quoting, trailing blanks and CRLF. See nccl_formats.md §4, §5.1 and §7.

What each kind of line becomes:
- A COLL line (`AllReduce: opCount 1d sendbuff .. count 8192 datatype 7 op 0 root 0 comm 0x2571a990 [nranks=4]
  stream (nil)`) is one row of the collectives frame, state `launched`:
  - `seq` is the 1-based ordinal of the line among the COLL lines of the same communicator in the same process
    (host, pid, comm pointer, INIT), not the opCount: grouped ops share one and 1-rank comms keep it at 0. The
    opCount is kept in `opcount` by the line reader (logs under 1 MiB: pasted fragments, where the ordinal means
    nothing); the keyed reader of big logs masks it and leaves `opcount` null. Send/Recv lines go to comm
    `<comm>:p2p` with their own seq (model/kinds.py, P2P_SUFFIX), as the Flight Recorder keeps `p2p_seq_id`.
  - `comm` is the commId hash (`0x%016x`) of the most recent INIT line for that pointer in that process before
    the COLL line (NCCL reuses pointers after a destroy). With no such INIT line `comm` is `host:pid:pointer`
    (`?` for an unknown host or pid) and `comm_rank` is null, and a warning says so once per communicator.
  - `rank` (global) is the process's comm rank in the largest communicator it belongs to in this file (the one
    with most ranks; ties: the one initialised first). That is the world rank when the world communicator's
    INIT line is in the file: NCCL never logs a global rank. A process driving several GPUs (one rank per device,
    `ncclCommInitAll`) gets per device the rank of the communicator's `cudaDev`. Null without an INIT line.
  - `time` comes from a timestamp prefix (UTC assumed; NCCL logs local time), else null. INFO lines carry one
    only with `NCCL_DEBUG_TIMESTAMP_LEVELS=WARN,INFO`.
- INIT lines (`ncclCommInitRankConfig comm 0x.. rank 0 nranks 4 cudaDev 0 nvmlDev 0 busId 60 commId 0x.. -
  Init COMPLETE`, the START form, `[Rank N]` from 2.29, the split/shrink forms, the older `comm 0x.. rank 0 nRanks
  4 nNodes ..`) become one ProcessIdentity per communicator a process joined. Split lines print no commId; from
  2.26.2 the hash is derived from the parent's (`child_comm_hash`); before that it cannot be known.
- WARN lines become WatchdogEvents: kind `abort`, `async_error` or `timeout` where the message says so, else
  `nccl_warn`. `Abort COMPLETE` INFO lines (and an Abort START that never completed) are kind `abort`.
- `NCCL version 2.28.9+cuda13.0` gives Evidence.version `2.28.9`.
A line with a COLL body (`<op>: opCount `) that does not parse is an error diagnostic (a warning for a cut
last line); a COLL line without a header is kept and attributed by its comm pointer where only one process
uses it. Every other line is ignored.

Speed: every line is matched by polars' (Rust, linear-time) regex engine, column-wise. A COLL line is cut down
to its shape (what stays the same from call to call), and only the distinct shapes are parsed field by field;
Python loops only over the few INIT, WARN and version lines. A million COLL lines take a few seconds and well
under 1 GiB (benchmarks/parse_nccl_log.py).
"""

from __future__ import annotations

import bisect
import codecs
import re
from dataclasses import dataclass
from typing import Callable

import polars as pl

from ..model import (
    Diagnostic,
    Evidence,
    EventState,
    Location,
    ProcessIdentity,
    Severity,
    SourceFormat,
    WatchdogEvent,
    conform,
    empty_collectives,
)
from ..model.kinds import NCCL_DTYPES, NCCL_REDOPS, P2P_OPS, P2P_SUFFIX, normalize_op
from .base import InputFile, decode

DIAGNOSTIC_LIMIT = 50  # per kind of problem; the rest are counted in one summary diagnostic
MAX_LINE_BYTES = 1 << 20  # longer lines are no NCCL output: reported once and skipped
# Separator bytes for read_csv, which splits the lines; the first one absent from the content is used.
_SEPARATORS = bytes([0x1F, 0x1E, 0x1D, 0x1C, *range(0x01, 0x09), *range(0x0E, 0x1C), 0x7F, 0x00])
# read_csv decompresses content that starts with these (gzip, zlib, zstd) with no size limit: a small file, or a
# .gz holding one, would expand past InputFile's decompression-bomb limit. Such content is split in Python.
_COMPRESSED_MAGIC = (b"\x1f\x8b", b"\x78\x01", b"\x78\x5e", b"\x78\x9c", b"\x78\xda", b"\x28\xb5\x2f\xfd")

# --- COLL lines: polars (Rust regex; ASCII classes keep its DFA small) ---------------------------------------
# A COLL line is cut down to its "shape" by one replace_all that swaps what changes from call to call (timestamp,
# opCount, buffers, count, stream) for `|`: `vm:442:442 [0] NCCL INFO AllReduce|datatype 7 op 0 root 0 comm
# 0x2571a990 [nranks=4]|`. A log has few distinct shapes; only those are parsed, field by field.
_COLL_MARK = ": opCount "
_STAMP = r"\[([0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?)\] "
_CUT = r": opCount [0-9a-fA-F]+ sendbuff [^ \t]+ recvbuff [^ \t]+ count [0-9]+ | stream(?: .*)?$"
_OP = r"[A-Za-z0-9_]+"
_COUNT = r" count ([0-9]+) (?:size [0-9]+ )?datatype "
_OPCOUNT_VALUE = r": opCount ([0-9a-fA-F]{1,15}) "  # (at most 15 hex digits: an Int64)
_SHAPE = (
    _OP + r"\|(?:size [0-9]+ )?datatype [0-9]+ op [0-9]+ (?:root -?[0-9]+ )?comm (?:0x[0-9a-fA-F]+|\(nil\))"
    r"(?: \[nranks=[0-9]+\])?\|$"
)
_BEFORE_BODY = r" \[-?[0-9]+\] NCCL INFO " + _OP + r"\|(?:size [0-9]+ )?datatype "  # of two headers, the last wins
_SHAPE_FIELDS = {
    "op": "(" + _OP + r")\|(?:size [0-9]+ )?datatype ",
    "dt": r"datatype ([0-9]+) op ",
    "redop": r"datatype [0-9]+ op ([0-9]+) ",
    "root": r" root (-?[0-9]+) comm ",
    "ptr": r" comm (0x[0-9a-fA-F]+|\(nil\))(?: \[nranks=[0-9]+\])?\|$",
    "nranks": r" \[nranks=([0-9]+)\]\|$",
    "host": r"([^\s:|]+):[0-9]+:[0-9]+" + _BEFORE_BODY,
    "pid": r"[^\s:|]+:([0-9]+):[0-9]+" + _BEFORE_BODY,
}

# --- INIT, WARN, version lines: also Rust regex (linear time on hostile lines), one pattern per kind of line ------
_TS = r"(?:\[(?P<ts>[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?)\] )?"
_WHO = r"(?P<host>[^\s:]+):(?P<pid>[0-9]+):[0-9]+ \[(?P<dev>-?[0-9]+)\] "
_INFO = _TS + "(?:" + _WHO + "NCCL INFO )?"
_PTR = r"0x[0-9a-fA-F]+"
_MISC = {  # checked in this order; the first that matches a line wins
    "warn": _TS + "(?:" + _WHO + r"(?:[^\s]+:[0-9]+ )?(?:\([^)]*\) )?)?NCCL WARN ?(?P<msg>.*)",
    "version": r"(?:NCCL|RCCL) version (?P<version>[0-9]+\.[0-9]+\.[0-9]+)",
    "init": _INFO + r"(?:\[Rank [0-9]+\] )?(?:(?P<func>[A-Za-z0-9_]+) )?comm (?P<ptr>" + _PTR + r") "
    r"rank (?P<rank>[0-9]+) nranks (?P<nranks>[0-9]+) cudaDev (?P<cuda_dev>-?[0-9]+) nvmlDev -?[0-9]+ "
    r"busId (?P<bus>[0-9a-fA-F]+) (?:parent (?P<parent>" + _PTR + r"|\(nil\)) "
    r"(?:(?P<ckind>splitCount|childCount) (?P<ccount>-?[0-9]+) )?color (?P<color>-?[0-9]+) key -?[0-9]+ ?)?"
    r"(?:commId 0x(?P<hash>[0-9a-fA-F]+) ?)?- Init (?P<phase>START|COMPLETE)",
    "nranks": _INFO + r"comm (?P<ptr>" + _PTR + r") rank (?P<rank>[0-9]+) nRanks (?P<nranks>[0-9]+) nNodes ",
    "teardown": _INFO + r"comm (?P<ptr>" + _PTR + r") rank (?P<rank>[0-9]+) n[Rr]anks (?P<nranks>[0-9]+) "
    r"cudaDev -?[0-9]+ busId [0-9a-fA-F]+ - (?P<what>Abort|Destroy|Revoke) (?P<phase>START|COMPLETE)",
    "async": _INFO + r"(?P<msg>ncclCommSetAsyncError: .*)",
}
_MISC_KEY = {  # a group every match of the pattern fills
    "warn": "msg", "version": "version", "init": "phase", "nranks": "nranks", "teardown": "phase", "async": "msg",
}
_MISC_MARK = (
    r"NCCL WARN|Init (?:START|COMPLETE)| nNodes |[NR]CCL version| - (?:Abort|Destroy|Revoke) |ncclCommSetAsyncError"
)
_MSG_COMM = re.compile(r"\b[Cc]omm (0x[0-9a-fA-F]{1,16})\b")
# How a WARN message is classified (first match wins); nccl_formats.md §5.1.
_KINDS = [
    ("abort", re.compile(r"in abort state|communicator was revoked|\bRevoke\b|\baborted\b", re.I)),
    ("async_error", re.compile(
        r"Connection closed by remote peer|Connection reset by peer|Got completion from peer|async fatal event|"
        r"Cuda failure|Call to \S+ failed|Message truncated|Failed to execute operation|ncclCommSetAsyncError|"
        r"remote process exited|unhandled (?:cuda|system) error|ncclRemoteError|ncclSystemError|ncclInternalError"
    )),
    ("timeout", re.compile(r"time[ d]?out|timed out|ncclTimeout", re.I)),
]
_SNIFF = (
    r"[^\s:]+:[0-9]+:[0-9]+ (?:\[-?[0-9]+\] (?:[^\s]+ ){0,2}(?:\([^)]*\) )?NCCL (?:INFO|WARN|TRACE)|NCCL CALL)"
)

_SIXTY_FOUR = (1 << 64) - 1


def child_comm_hash(parent: int, child_count: int, color: int) -> int:
    """The commHash NCCL >= 2.26.2 gives a communicator split (or shrunk: color 0) from `parent` (bitops.h).

    Checked against NCCL's own code (nccl_formats.md §4.5): child_comm_hash(0x3f2a9c1b7d4e8a06, 1, 0) is
    0x823c12e5e79ad0fe.
    """

    def eat(acc: list[int], data: bytes) -> list[int]:
        a0, a1 = acc
        size, i = len(data), 0
        a0 ^= size
        while size:
            a0 = (a0 + a1) & _SIXTY_FOUR
            a1 ^= a0
            a0 ^= a0 >> 31
            a0 = (a0 * 0x9DE62BBC8CEF3CE3) & _SIXTY_FOUR
            a1 ^= a1 >> 32
            a1 = (a1 * 0x485CD6311B599E79) & _SIXTY_FOUR
            n = min(size, 8)
            a0 = (a0 + int.from_bytes(data[i : i + n], "little")) & _SIXTY_FOUR
            i += n
            size -= n
        return [a0, a1]

    acc = eat([1, 1], (parent & _SIXTY_FOUR).to_bytes(8, "little"))
    acc = eat(acc, (child_count & 0xFFFFFFFF).to_bytes(4, "little"))
    acc = eat(acc, (color & 0xFFFFFFFF).to_bytes(4, "little"))
    h = acc[0]
    h ^= h >> 31
    h = (h * 0xBAC3BD562846DE6B) & _SIXTY_FOUR
    h = (h + acc[1]) & _SIXTY_FOUR
    h ^= h >> 32
    return (h * 0x995A187A14E7B445) & _SIXTY_FOUR


def hash_name(value: int) -> str:
    """A commHash as the `comm` column spells it: lowercase, `0x` and 16 digits."""
    return f"0x{value:016x}"


class NcclLogSource:
    """NCCL_DEBUG output (INFO/WARN lines with a `host:pid:tid` header), one or many processes per file."""

    format = SourceFormat.NCCL_LOG

    def sniff(self, head: bytes, text: str) -> float:
        """The fraction of non-blank lines of the head that are NCCL debug lines (0 when there are none)."""
        lines = pl.Series([line for line in text.splitlines() if line.strip()], dtype=pl.String)
        return float(lines.str.contains(_SNIFF).mean()) if len(lines) else 0.0

    def parse(self, file: InputFile) -> Evidence:
        """Read the whole log: collectives column-wise, INIT/WARN lines one by one."""
        evidence = _keyed_parse(file)
        if evidence is not None:
            return evidence
        data, problems = file.read_bytes()
        frame, complete = _line_frame(data, file.name, problems)
        del data
        return _LogParser(file.name, problems).run(frame, complete)


def _line_frame(data: bytes, name: str, problems: list[Diagnostic]) -> tuple[pl.DataFrame, bool]:
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
    separator = None if data.startswith(_COMPRESSED_MAGIC) else next(
        (chr(b) for b in _SEPARATORS if bytes([b]) not in data), None)
    if separator is not None:
        try:
            frame = _read_lines(data, separator)
        except pl.exceptions.ComputeError:  # not valid UTF-8: decode with replacement, say where, try again
            text, problem = decode(data, name)
            if problem:
                problems.append(problem)
            data = text.encode("utf-8", errors="replace")
            try:
                frame = _read_lines(data, separator)
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


def _read_lines(data: bytes, separator: str) -> pl.DataFrame:
    return pl.read_csv(
        data, has_header=False, separator=separator, quote_char=None, new_columns=["text"],
        infer_schema=False, encoding="utf8",
    )


@dataclass
class _Comm:
    """One communicator as one process saw it: merged from its INIT START/COMPLETE and `nRanks` lines."""

    host: str | None
    pid: int | None
    ptr: str
    first_line: int  # where it starts for COLL lines (asof join)
    line: int  # the line cited: Init COMPLETE where there is one
    comm_rank: int | None = None
    comm_size: int | None = None
    cuda_dev: int | None = None
    bus_id: str | None = None
    hash: int | None = None
    complete: bool = False
    no_hash_reason: str | None = None

    @property
    def key(self) -> str:
        """The `comm` column value: the hash, or `host:pid:pointer` where the hash is unknown."""
        return hash_name(self.hash) if self.hash is not None else _fallback_comm(self.host, self.pid, self.ptr)


def _fallback_comm(host: str | None, pid: int | None, ptr: str) -> str:
    return f"{host if host is not None else '?'}:{pid if pid is not None else '?'}:{ptr}"


def _lines(n: int) -> str:
    return f"{n} COLL line{'' if n == 1 else 's'}"


def _int(value: str | None) -> int | None:
    """A decimal from a log field; None when absent or too long for Int64 (hostile input)."""
    return int(value) if value is not None and len(value) <= 18 else None


class _LogParser:
    """The state of one parse: the INIT history of every process, then the COLL frame built against it."""

    def __init__(self, name: str, problems: list[Diagnostic]) -> None:
        self.name = name
        self.problems = problems
        self.version: str | None = None
        self.comms: list[_Comm] = []  # in order of first line
        self.history: dict[tuple, list[_Comm]] = {}  # (host, pid, ptr) -> its communicators, in line order
        self.open: dict[tuple, _Comm | None] = {}  # (host, pid, ptr) -> the communicator it points to now
        self.events: list[tuple[int, dict]] = []  # (line, fields) of watchdog events, ranks filled in later
        self.pending_aborts: dict[tuple, tuple[int, dict]] = {}
        self.proc_rank: dict[tuple, int] = {}
        self.dev_rank: dict[tuple, int] = {}

    def run(self, frame: pl.DataFrame, complete: bool) -> Evidence:
        """Parse the lines of one file (`complete`: it ends with a line feed) into Evidence."""
        cut_line = None if complete or frame.height == 0 else frame["line"][-1]
        frame = self._drop_long_lines(frame)
        text = pl.col("text")
        marked = frame.with_columns(
            text.str.contains(_COLL_MARK, literal=True).fill_null(False).alias("coll"),
            text.str.contains(_MISC_MARK).fill_null(False).alias("misc"),
        )
        candidates = marked.filter(pl.col("coll")).select("line", "text")
        misc = marked.filter(pl.col("misc")).select(
            "line", *[text.str.extract_groups(rx).alias(kind) for kind, rx in _MISC.items()]
        )
        del frame, marked
        return self.finish(misc, lambda: self._collectives(candidates, cut_line))

    def finish(self, misc: pl.DataFrame, collectives: Callable[[], pl.DataFrame]) -> Evidence:
        """Read the INIT, WARN and version lines (`misc`: their groups, in line order), then the COLL lines."""
        for row in misc.iter_rows(named=True):
            self._misc_line(row)
        self._finish_aborts()
        self._global_ranks()
        evidence = Evidence(path=self.name, format=SourceFormat.NCCL_LOG, collectives=collectives())
        evidence.identities = [self._identity(c) for c in self.comms]
        evidence.watchdog = [self._event(line, fields) for line, fields in sorted(self.events, key=lambda e: e[0])]
        evidence.version = self.version
        evidence.problems = self.problems
        return evidence

    # --- lines that are not COLL lines -------------------------------------------------------------------------

    def _drop_long_lines(self, frame: pl.DataFrame) -> pl.DataFrame:
        long = pl.col("text").str.len_bytes() > MAX_LINE_BYTES
        too_long = frame.filter(long).select("line", pl.col("text").str.len_bytes().alias("size"))
        if too_long.height == 0:
            return frame
        for line, size in too_long.head(DIAGNOSTIC_LIMIT).iter_rows():
            self._warn(line, f"line of {size} bytes is not NCCL debug output; skipped")
        self._summarise(too_long.height, "over-long lines skipped")
        return frame.filter(~long.fill_null(False))

    def _misc_line(self, row: dict) -> None:
        line = row["line"]
        kind, g = next(((k, row[k]) for k in _MISC if row[k] and row[k][_MISC_KEY[k]] is not None), (None, None))
        if kind == "warn":
            self._warn_line(line, g)
        elif kind == "version":
            if self.version is None:
                self.version = g["version"]
                if not g["version"].startswith("2."):
                    self._warn(line, f"NCCL version {g['version']} is not a 2.x release, the only ones there are "
                                     f"(this parser knows 2.x); read as 2.x")
            elif g["version"] != self.version:
                self._warn(line, f"NCCL version {g['version']} differs from {self.version} seen before")
        elif kind in ("init", "nranks"):
            self._init_line(line, g)
        elif kind == "teardown":
            self._teardown_line(line, g)
        elif kind == "async":
            self._add_event(line, g, "async_error", g["msg"])

    def _init_line(self, line: int, g: dict) -> None:
        host, pid, ptr = g["host"], _int(g["pid"]), g["ptr"].lower()
        where = (host, pid, ptr)
        rank, nranks = _int(g["rank"]), _int(g["nranks"])
        if rank is not None and nranks is not None and not 0 <= rank < nranks:
            self._warn(line, f"rank {rank} in a communicator of {nranks} ranks (nranks): implausible, a rank is "
                             f"below nranks; read as given")
        phase = g.get("phase")
        hash_value = int(g["hash"], 16) if g.get("hash") and len(g["hash"]) <= 16 else None
        comm = self.open.get(where)
        if comm is not None and (
            comm.complete
            or (comm.comm_rank, comm.comm_size) != (rank, nranks)
            or (hash_value is not None and comm.hash is not None and comm.hash != hash_value)
        ):
            comm = None  # a new communicator at a reused pointer
        if comm is None:
            comm = _Comm(host, pid, ptr, first_line=line, line=line, comm_rank=rank, comm_size=nranks)
            self.comms.append(comm)
            self.history.setdefault(where, []).append(comm)
            self.open[where] = comm
        if g.get("cuda_dev") is not None:
            comm.cuda_dev = _int(g["cuda_dev"])
            comm.bus_id = g["bus"].lower()
        if hash_value is not None:
            comm.hash = hash_value
        elif g.get("color") is not None and comm.hash is None:
            self._split_hash(comm, line, g)
        if phase == "COMPLETE":
            comm.complete = True
            comm.line = line
        elif phase is None and comm.hash is None and comm.no_hash_reason is None:
            comm.no_hash_reason = "its INIT lines give no commId (only the `nRanks` line was logged)"
        elif phase is not None and comm.hash is None and comm.no_hash_reason is None:
            comm.no_hash_reason = "its INIT line gives no commId"

    def _split_hash(self, comm: _Comm, line: int, g: dict) -> None:
        """Derive a split communicator's hash from its parent's (NCCL >= 2.26.2), or say why not."""
        func, kind = g.get("func") or "ncclCommSplit", g.get("ckind")
        parent = self._comm_at(comm.host, comm.pid, (g.get("parent") or "").lower(), line)
        if kind is None or func == "ncclCommGrow":
            comm.no_hash_reason = f"{func} INIT lines of this NCCL version give no way to its commId"
        elif kind != "childCount" and not _at_least(self.version, (2, 26, 2)):
            comm.no_hash_reason = (
                f"{func} hashes can be derived only from NCCL 2.26.2 (this log's version: {self.version or 'unknown'})"
            )
        elif parent is None or parent.hash is None:
            comm.no_hash_reason = f"the parent comm {g.get('parent')} of this {func} has no known commId"
        else:
            color = 0 if func == "ncclCommShrink" else int(g["color"])
            comm.hash = child_comm_hash(parent.hash, int(g["ccount"]), color)
            comm.no_hash_reason = None

    def _teardown_line(self, line: int, g: dict) -> None:
        where = (g["host"], _int(g["pid"]), g["ptr"].lower())
        what, phase = g["what"], g["phase"]
        if what == "Destroy":
            if phase == "COMPLETE":
                self.open[where] = None
            return
        message = f"comm {g['ptr']} rank {g['rank']} nranks {g['nranks']}: {what} {phase}"
        if phase == "START":
            self.pending_aborts[where] = (line, self._event_fields(line, g, "abort", message, where))
            return
        self.pending_aborts.pop(where, None)
        self._add_event(line, g, "abort", message, ptr=where[2])
        self.open[where] = None

    def _finish_aborts(self) -> None:
        for line, fields in self.pending_aborts.values():
            fields["message"] += " (no COMPLETE line follows: the abort may have hung)"
            self.events.append((line, fields))
        self.pending_aborts.clear()

    def _warn_line(self, line: int, g: dict) -> None:
        message = g["msg"].rstrip()
        kind = next((k for k, rx in _KINDS if rx.search(message)), "nccl_warn")
        self._add_event(line, g, kind, message)

    def _add_event(self, line: int, g: dict, kind: str, message: str, ptr: str | None = None) -> None:
        if ptr is None and (found := _MSG_COMM.search(message)):
            ptr = found.group(1).lower()
        where = (g["host"], _int(g["pid"]), ptr)
        self.events.append((line, self._event_fields(line, g, kind, message, where)))

    def _event_fields(self, line: int, g: dict, kind: str, message: str, where: tuple) -> dict:
        comm = self._comm_at(*where, line) if where[2] else None
        return {
            "kind": kind, "message": message, "host": where[0], "pid": where[1], "dev": _int(g["dev"]), "comm": comm,
        }

    def _comm_at(self, host: str | None, pid: int | None, ptr: str, line: int) -> _Comm | None:
        """The communicator `ptr` pointed to in process (host, pid) at `line`: its most recent INIT before."""
        comms = self.history.get((host, pid, ptr), [])
        i = bisect.bisect_right([c.first_line for c in comms], line)
        return comms[i - 1] if i else None

    # --- ranks and records ---------------------------------------------------------------------------------------

    def _global_ranks(self) -> None:
        """Fill proc_rank[(host, pid)] and dev_rank[(host, pid, cudaDev)]; see the module docstring."""
        by_process: dict[tuple, list[_Comm]] = {}
        for comm in self.comms:
            if comm.host is not None and comm.comm_size is not None:
                by_process.setdefault((comm.host, comm.pid), []).append(comm)
        for process, comms in by_process.items():
            largest = max(c.comm_size for c in comms)
            chosen = next(c for c in comms if c.comm_size == largest)  # comms are in order of first line
            members = [c for c in comms if c.hash == chosen.hash] if chosen.hash is not None else [chosen]
            if len({c.comm_rank for c in members}) == 1:  # one rank per process (re-initialised or not)
                self.proc_rank[process] = chosen.comm_rank
            else:
                for c in members:
                    if c.cuda_dev is not None:
                        self.dev_rank[(*process, c.cuda_dev)] = c.comm_rank

    def _rank_of(self, host: str | None, pid: int | None, dev: int | None) -> int | None:
        if (host, pid) in self.proc_rank:
            return self.proc_rank[(host, pid)]
        return self.dev_rank.get((host, pid, dev))

    def _identity(self, comm: _Comm) -> ProcessIdentity:
        return ProcessIdentity(
            loc=Location(self.name, comm.line), host=comm.host, pid=comm.pid,
            rank=self._rank_of(comm.host, comm.pid, comm.cuda_dev), comm=comm.key, comm_rank=comm.comm_rank,
            comm_size=comm.comm_size, cuda_dev=comm.cuda_dev, bus_id=comm.bus_id, comm_ptr=comm.ptr,
        )

    def _event(self, line: int, fields: dict) -> WatchdogEvent:
        comm: _Comm | None = fields["comm"]
        dev = comm.cuda_dev if comm is not None and comm.cuda_dev is not None else fields["dev"]
        return WatchdogEvent(
            loc=Location(self.name, line), kind=fields["kind"], rank=self._rank_of(fields["host"], fields["pid"], dev),
            comm=comm.key if comm is not None else None, message=fields["message"],
        )

    # --- COLL lines, column-wise ---------------------------------------------------------------------------------

    def _collectives(self, candidates: pl.DataFrame, cut_line: int | None) -> pl.DataFrame:
        """The collectives frame from the lines that carry `: opCount `; `cut_line`: a last line without LF."""
        if candidates.height == 0:
            return empty_collectives()
        text = pl.col("text")
        stamped = candidates.select(text.str.contains(_STAMP).any()).item()
        rows = candidates.select(
            "line",
            text.str.replace_all(_STAMP + "|" + _CUT if stamped else _CUT, "|", literal=False).alias("shape"),
            text.str.extract(_COUNT, 1).cast(pl.Int64, strict=False).alias("count"),
            _huge_count(text).alias("huge"),
            (text.str.extract(_STAMP, 1) if stamped else pl.lit(None, pl.String)).alias("ts"),
            (text.str.count_matches(_COLL_MARK, literal=True) > 1).alias("merged"),  # two COLL lines run together
            text.str.extract(_OPCOUNT_VALUE, 1).str.to_integer(base=16, strict=False).alias("opcount"),
        )
        shapes = rows.select(pl.col("shape").unique()).with_row_index("sid")
        rows = rows.with_columns(
            pl.col("shape").replace_strict(shapes["shape"], shapes["sid"], return_dtype=pl.UInt32).alias("sid")
        ).drop("shape")
        return self.collectives_of(
            rows, shapes, cut_line, lambda lines: candidates.filter(pl.col("line").is_in(lines.implode())))

    def collectives_of(self, rows: pl.DataFrame, shapes: pl.DataFrame, cut_line: int | None,
                       texts: Callable[[pl.Series], pl.DataFrame]) -> pl.DataFrame:
        """The collectives frame from COLL `rows` (line, count, ts, merged, sid) and their distinct `shapes` (sid,
        shape); `texts(lines)` gives the text of some lines (line, text), for quoting bad ones."""
        shapes = self._parse_shapes(shapes)
        bad = pl.col("sid").is_in(shapes.filter(~pl.col("valid"))["sid"].implode()) | pl.col("merged")
        bad_lines = rows.filter(bad)["line"]
        if len(bad_lines):
            self._bad_lines(bad_lines, texts(bad_lines.head(DIAGNOSTIC_LIMIT + 1)).sort("line"), cut_line)
            rows = rows.filter(~bad)
        huge = rows.filter("huge")["line"]
        for line in huge.head(DIAGNOSTIC_LIMIT):  # count 18446744073709551616: no real collective, left unknown
            self._warn(line, "the collective's count is beyond 2**63 (no real collective has it); read as unknown")
        if len(huge) > DIAGNOSTIC_LIMIT:
            self._warn(None, f"{len(huge) - DIAGNOSTIC_LIMIT} more COLL lines with a count beyond 2**63")
        rows = rows.drop("merged", "huge")
        whos = shapes.select("host", "pid", "ptr").unique().with_row_index("who")
        shapes = shapes.join(whos, on=["host", "pid", "ptr"], how="left", nulls_equal=True).sort("sid")
        rows = rows.with_columns(shapes["who"].gather(rows["sid"]).alias("who"))
        comms = self._comm_table()
        keyed = comms.join(whos, on=["host", "pid", "ptr"], how="inner").select("init_line", "who", "cid")
        if keyed.height == 0 or keyed.get_column("who").is_unique().all():
            rows = _one_init_each(rows, keyed, whos.height)
        else:
            rows = rows.join_asof(
                keyed.sort("init_line"), left_on="line", right_on="init_line", by="who", strategy="backward",
                check_sortedness=False,
            )
        self._report_headerless(rows, shapes, whos)
        self._missing_inits(rows, comms, whos)
        return conform(self._columns(rows, shapes, whos, comms))

    def _parse_shapes(self, shapes: pl.DataFrame) -> pl.DataFrame:
        """Parse the distinct shapes into typed fields; `valid` is false where one is no well-formed COLL line."""
        shape = pl.col("shape")
        shapes = shapes.with_columns(
            shape.str.contains(_SHAPE).alias("valid"),
            *[shape.str.extract(rx, 1).alias(name) for name, rx in _SHAPE_FIELDS.items()],
        )
        ops = {op: normalize_op(op) for op in shapes["op"].unique().drop_nulls().to_list()}
        dtypes = {str(k): v for k, v in NCCL_DTYPES.items()}
        redops = {str(k): v for k, v in NCCL_REDOPS.items()}
        shapes = shapes.with_columns(
            pl.col("op").replace_strict(ops, default=pl.col("op"), return_dtype=pl.String),
            pl.col("dt").replace_strict(dtypes, default=pl.lit("nccl_dtype_") + pl.col("dt"), return_dtype=pl.String)
            .alias("dtype"),
            pl.col("redop").replace_strict(redops, default=pl.col("redop"), return_dtype=pl.String),
            pl.col("root").cast(pl.Int64, strict=False),
            pl.col("nranks").cast(pl.Int64, strict=False),
            pl.col("pid").cast(pl.Int64, strict=False),
            pl.col("ptr").str.to_lowercase(),
        ).drop("dt", "shape")
        return self._attribute_headerless(shapes)

    def _attribute_headerless(self, shapes: pl.DataFrame) -> pl.DataFrame:
        """Give a COLL line without `host:pid:tid` the process whose lines use its comm pointer, if just one does."""
        headerless = pl.col("valid") & (pl.col("host").is_null() | pl.col("pid").is_null())
        shapes = shapes.with_columns(headerless.alias("headerless"))
        if not shapes["headerless"].any():
            return shapes
        owners = pl.concat([
            shapes.filter(pl.col("valid") & ~pl.col("headerless")).select("host", "pid", "ptr"),
            pl.DataFrame(
                [(c.host, c.pid, c.ptr) for c in self.comms if c.host is not None and c.pid is not None],
                schema={"host": pl.String, "pid": pl.Int64, "ptr": pl.String}, orient="row",
            ),
        ]).unique()
        sole = owners.filter(pl.len().over("ptr") == 1).rename({"host": "owner_host", "pid": "owner_pid"})
        return shapes.join(sole, on="ptr", how="left", maintain_order="left").with_columns(
            pl.when("headerless").then(pl.col("owner_host")).otherwise(pl.col("host")).alias("host"),
            pl.when("headerless").then(pl.col("owner_pid")).otherwise(pl.col("pid")).alias("pid"),
        ).drop("owner_host", "owner_pid")

    def _comm_table(self) -> pl.DataFrame:
        """The communicators known from INIT lines; row `cid` is self.comms[cid]."""
        return pl.DataFrame(
            [
                (i, c.host, c.pid, c.ptr, c.first_line, c.key, c.hash is not None, c.comm_rank, c.comm_size,
                 self._rank_of(c.host, c.pid, c.cuda_dev))
                for i, c in enumerate(self.comms)
            ],
            schema={
                "cid": pl.UInt32, "host": pl.String, "pid": pl.Int64, "ptr": pl.String, "init_line": pl.Int64,
                "comm": pl.String, "hashed": pl.Boolean, "comm_rank": pl.Int64, "comm_size": pl.Int64,
                "rank": pl.Int64,
            },
            orient="row",
        )

    def _columns(
        self, rows: pl.DataFrame, shapes: pl.DataFrame, whos: pl.DataFrame, comms: pl.DataFrame
    ) -> pl.DataFrame:
        """Assemble COLLECTIVE_SCHEMA's columns: fields by shape (`sid`), communicator by INIT (`cid`), seq.

        Where every row has the same shape, process or communicator, the columns they give are one value, not one
        per row (a log of one process and one communicator is a frame of a few varying columns)."""
        same = {k: _single(rows.get_column(k)) for k in ("sid", "cid", "who")}
        by_cid = {name: _pick(comms[name], "cid", same["cid"]) for name in ("comm", "comm_rank", "comm_size", "rank")}
        by_sid = {name: _pick(shapes[name], "sid", same["sid"])
                  for name in ("op", "dtype", "redop", "root", "nranks", "host", "pid")}
        by_who = whos.join(
            pl.DataFrame([(h, p, r) for (h, p), r in self.proc_rank.items()],
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
            pl.lit(self.name, pl.String).alias("file"),
            "line",
            pl.coalesce(by_cid["rank"], _pick(by_who["rank"], "who", same["who"])).alias("rank"),
            comm.alias("comm"),
            by_cid["comm_rank"].alias("comm_rank"),
            pl.coalesce(by_sid["nranks"], by_cid["comm_size"]).alias("comm_size"),
            seq.alias("seq"),
            (pl.col("opcount") if "opcount" in rows.columns else pl.lit(None, pl.Int64)).alias("opcount"),
            by_sid["op"].alias("op"),
            "count",
            *[by_sid[name].alias(name) for name in ("dtype", "redop", "root")],
            pl.lit(EventState.LAUNCHED.value).alias("state"),
            (stamp.dt.epoch("us") / 1e6).alias("time"),
            by_sid["host"].alias("host"),
            by_sid["pid"].alias("pid"),
        )

    def _bad_lines(self, lines: pl.Series, bad: pl.DataFrame, cut_line: int | None) -> None:
        """`lines`: every bad COLL line, in order; `bad`: the first of them (line, text)."""
        shown = 0
        for line, text in bad.head(DIAGNOSTIC_LIMIT + 1).iter_rows():
            quoted = text.strip()
            quoted = quoted if len(quoted) <= 160 else quoted[:157] + "..."
            if line == cut_line:
                self._warn(line, f"last line is cut short (the process died mid-write?); ignored: {quoted!r}")
                continue
            if shown < DIAGNOSTIC_LIMIT:
                what = "COLL lines run together" if text.count(_COLL_MARK) > 1 else "unrecognised COLL line"
                self.problems.append(Diagnostic(Location(self.name, line), f"{what}: {quoted!r}"))
                shown += 1
        errors = len(lines) - (1 if cut_line is not None and lines[-1] == cut_line else 0)
        if errors > shown:
            self.problems.append(
                Diagnostic(Location(self.name), f"{errors - shown} more unrecognised COLL lines not listed")
            )

    def _report_headerless(self, rows: pl.DataFrame, shapes: pl.DataFrame, whos: pl.DataFrame) -> None:
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
            what = f"{_lines(n)} of comm {ptr} without a host:pid:tid header (interleaved output?)"
            if host is None:
                self._warn(first, f"{what}: the process is unknown")
            else:
                self._warn(first, f"{what}: attributed to {host}:{pid}, the one process using that comm pointer")
        self._summarise(summary.height, "more comm pointers with headerless COLL lines")

    def _missing_inits(self, rows: pl.DataFrame, comms: pl.DataFrame, whos: pl.DataFrame) -> None:
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
                why = self.comms[cid].no_hash_reason or "its INIT line gives no commId"
            self._warn(first, f"{_lines(n)} of comm {ptr} of {host}:{pid} cannot be tied to a communicator hash: "
                       f"{why}; they are reported as comm {_fallback_comm(host, pid, ptr)!r}")
        self._summarise(unhashed.height, "more communicators without a hash")

    # --- diagnostics ---------------------------------------------------------------------------------------------

    def _warn(self, line: int | None, message: str) -> None:
        self.problems.append(Diagnostic(Location(self.name, line), message, Severity.WARNING))

    def _summarise(self, total: int, what: str) -> None:
        if total > DIAGNOSTIC_LIMIT:
            self._warn(None, f"{total - DIAGNOSTIC_LIMIT} {what} not listed")


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


def _at_least(version: str | None, wanted: tuple[int, ...]) -> bool:
    """True when `version` (`2.28.9`) is known and not older than `wanted`."""
    if not version:
        return False
    return tuple(int(p) for p in version.split(".")) >= wanted


# --- big logs: COLL lines deduplicated before they are parsed ----------------------------------------------------
# A COLL line differs from the one before it mostly in its opCount. Masking that (`: opCount 0 `) and, where COLL
# lines carry one, the timestamp in front (kept per line), leaves few distinct lines (keys) in a log of millions;
# every per-line regex of the reader above then runs once per key instead of once per line. The opCount is hex
# between `: opCount ` and a space, so no other pattern here can see it: a line and its key give the same count,
# stamp, run-together flag and kind of line; and the same shape, unless the opCount is left in it (a malformed
# body), which the key tells by giving another shape with `: opCount 1 `. Lines of such keys, and COLL lines that
# are also INIT/WARN lines (whose fields quote the line), are re-read and keyed by their own text; so are the bad
# lines that are quoted. The result is the reader's exactly. Logs read this way: plain files (not gzip, no BOM,
# LF line ends) of at least KEYED_MIN_BYTES; they are read by polars' streaming CSV reader, never whole in memory.
KEYED_MIN_BYTES = 1 << 20
_OPCOUNT = _COLL_MARK + "[0-9a-fA-F]+ "
_LEAD_STAMP = "^" + _STAMP
_STAND_IN = "[2000-01-01 00:00:00] "  # a stamp in place of another: the shape regex takes any stamp alike


def _scan_lines(path) -> pl.LazyFrame:
    """The lines of a file as (line, text), split as _read_lines splits them (a blank line is "", not null)."""
    if hasattr(pl, "scan_lines"):  # newer polars: a third less work than the CSV reader, and no separator byte
        lines = pl.scan_lines(path, name="text")
    else:
        lines = pl.scan_csv(path, has_header=False, separator="\x1f", quote_char=None, new_columns=["text"],
                            infer_schema=False, encoding="utf8")
    return lines.with_row_index("line", offset=1).with_columns(pl.col("line").cast(pl.Int64))


def _keyed_parse(file: InputFile) -> Evidence | None:
    """The Evidence of a big plain log read by keys, or None to read it line by line (same result)."""
    try:
        if file.path.stat().st_size < KEYED_MIN_BYTES or file.compressed:
            return None
        with open(file.path, "rb") as f:
            head = f.read(1 << 16)
            f.seek(-1, 2)
            complete = f.read(1) == b"\n"
    except OSError:
        return None
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE, codecs.BOM_UTF8, *_COMPRESSED_MAGIC)):
        return None
    first = head.split(b"\n", 1)
    if len(first) < 2 or b"\x1f" in first[0]:  # no LF early (or no LF at all), or the separator on line 1
        return None
    stamps = re.search(rb"(?m)^\[[0-9]{4}-[0-9]{2}-[0-9]{2} [^\n]*: opCount ", head) is not None
    try:
        return _KeyedReader(file, complete, stamps).run()
    except pl.exceptions.PolarsError:  # the separator in the text, bad UTF-8, ...: the line reader says what
        return None


class _KeyedReader:
    """One big log read as keys: see the comment above KEYED_MIN_BYTES."""

    def __init__(self, file: InputFile, complete: bool, stamps: bool) -> None:
        self.file = file
        self.complete = complete
        self.stamps = stamps  # mask leading timestamps of COLL lines too
        self.parser = _LogParser(file.name, [])
        self._texts: dict[int, str] = {}

    def run(self) -> Evidence | None:
        text = pl.col("text")
        coll = text.str.contains(_COLL_MARK, literal=True)
        key = text.str.replace("(?-u)" + _OPCOUNT, _COLL_MARK + "0 ")  # (?-u): the same on this pattern, faster
        lead = pl.lit(None, pl.String)
        if self.stamps:
            key = pl.when(coll).then(key.str.replace(_LEAD_STAMP, _STAND_IN)).otherwise(key)
            lead = pl.when(coll).then(text.str.extract(_LEAD_STAMP, 1))
        lines = _scan_lines(self.file.path).select(
            "line", key.cast(pl.Categorical(pl.Categories.random())).alias("key"),
            (text.str.len_bytes() > MAX_LINE_BYTES).alias("long"), lead.alias("lead"),
        ).collect(engine="streaming")
        if lines.height == 0 or lines["long"].any():
            return None  # over-long lines: the line reader reports them
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
        return self._evidence(lines, by_kid, cut_line)

    def _classify(self, keys: pl.DataFrame, exact: pl.Series | None = None) -> pl.DataFrame:
        """Per key: what kind of line it is, and whether its lines must be keyed by their own text (`unsafe`)."""
        k = pl.col("key")
        keys = keys.with_columns(
            k.str.contains(_COLL_MARK, literal=True).alias("coll"),
            k.str.contains(_MISC_MARK).alias("misc"),
            k.str.contains(_OPCOUNT).alias("masked"),
            (k.str.starts_with(_STAND_IN) if self.stamps else pl.lit(False)).alias("restamped"),
        )
        if exact is None:
            exact = ~(keys["masked"] | keys["restamped"])
        keys = keys.with_columns(exact.alias("exact"))
        shape = _cut(k)
        other = _cut(k.str.replace(_OPCOUNT, _COLL_MARK + "1 "))
        return keys.with_columns(
            (~pl.col("exact") & pl.col("coll") & (pl.col("misc") | (pl.col("masked") & (shape != other))))
            .alias("unsafe"))

    def _originals(self, lines: pl.Series) -> pl.DataFrame:
        """(line, text) of `lines`, read again."""
        wanted = [line for line in lines.to_list() if line not in self._texts]
        if wanted:
            found = _scan_lines(self.file.path).filter(pl.col("line").is_in(wanted)).collect(engine="streaming")
            self._texts.update(zip(found["line"].to_list(), found["text"].to_list()))
        return pl.DataFrame({"line": lines, "text": [self._texts.get(line) for line in lines.to_list()]},
                            schema={"line": pl.Int64, "text": pl.String})

    def _evidence(self, lines: pl.DataFrame, keys: pl.DataFrame, cut_line: int | None) -> Evidence:
        """lines: (line, kid, lead); keys: one row per kid 0..n-1 (key, coll, misc, restamped, ...)."""
        misc_kids = keys.filter("misc")["kid"]
        misc = lines.filter(pl.col("kid").is_in(misc_kids.implode())).select(
            "line", pl.lit(keys["key"]).gather(pl.col("kid")).alias("text"))
        misc = misc.select("line", *[pl.col("text").str.extract_groups(rx).alias(kind) for kind, rx in _MISC.items()])
        return self.parser.finish(misc, lambda: self._collectives(lines, keys, cut_line))

    def _collectives(self, lines: pl.DataFrame, keys: pl.DataFrame, cut_line: int | None) -> pl.DataFrame:
        coll = keys.filter("coll")
        rows = lines.filter(pl.col("kid").is_in(coll["kid"].implode()))
        if rows.height == 0:
            return empty_collectives()
        k = pl.col("key")
        stamped = bool(coll.select(k.str.contains(_STAMP).any()).item())
        keys = keys.with_columns(
            _cut(k, stamped).alias("shape"),
            k.str.extract(_COUNT, 1).cast(pl.Int64, strict=False).alias("count"),
            _huge_count(k).alias("huge"),
            (k.str.extract(_STAMP, 1) if stamped else pl.lit(None, pl.String)).alias("ts"),
            (k.str.count_matches(_COLL_MARK, literal=True) > 1).alias("merged"),
        )
        shapes = keys.filter("coll").select(pl.col("shape").unique()).with_row_index("sid")
        keys = keys.join(shapes, on="shape", how="left").sort("kid")
        used = keys.filter("coll")

        def per_key(name: str) -> pl.Expr:  # one value where every COLL key has the same
            same = _single(used.get_column(name))
            return (pl.lit(keys[name]).gather(pl.col("kid")) if same is None
                    else pl.lit(same.value, keys[name].dtype)).alias(name)

        ts = per_key("ts")
        if used.get_column("restamped").any():
            ts = pl.when(per_key("restamped")).then(pl.col("lead")).otherwise(ts).alias("ts")
        rows = rows.select("line", per_key("count"), per_key("huge"), ts, per_key("merged"), per_key("sid"))
        return self.parser.collectives_of(rows, shapes, cut_line, self._originals)


def _huge_count(text: pl.Expr) -> pl.Expr:
    """A COLL line's count field holds a number too big for an int64 (it becomes null)."""
    raw = text.str.extract(_COUNT, 1)
    return raw.is_not_null() & raw.cast(pl.Int64, strict=False).is_null()


def _cut(text: pl.Expr, stamped: bool = True) -> pl.Expr:
    """A COLL line's shape, as _LogParser._collectives cuts it."""
    return text.str.replace_all(_STAMP + "|" + _CUT if stamped else _CUT, "|", literal=False)
