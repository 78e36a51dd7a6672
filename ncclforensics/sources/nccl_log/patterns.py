"""What the lines of an NCCL debug log look like: the patterns both readers match, and the problems they report.

Every pattern is run by polars' Rust regex engine (linear time on hostile lines; ASCII classes keep its DFA small),
except the few applied in Python to the handful of WARN messages.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import polars as pl

from ...model import Diagnostic, Location, Severity

DIAGNOSTIC_LIMIT = 50  # per kind of problem; the rest are counted in one summary diagnostic
MAX_LINE_BYTES = 1 << 20  # longer lines are no NCCL output: reported once and skipped

# --- COLL lines ----------------------------------------------------------------------------------------------
# A COLL line is cut down to its "shape" by one replace_all that swaps what changes from call to call (timestamp,
# opCount, buffers, count, stream) for `|`: `vm:442:442 [0] NCCL INFO AllReduce|datatype 7 op 0 root 0 comm
# 0x2571a990 [nranks=4]|`. A log has few distinct shapes; only those are parsed, field by field.
COLL_MARK = ": opCount "
STAMP = r"\[([0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?)\] "
# The values are cut whatever they hold: a line with an unreadable opCount or count (`count -4096`) keeps its shape,
# so the collective keeps its place in its communicator's sequence and only that value is unknown (`unreadable`).
CUT = r": opCount [^ \t]+ sendbuff [^ \t]+ recvbuff [^ \t]+ count [^ \t]+ | stream(?: .*)?$"
_OP = r"[A-Za-z0-9_]+"
COUNT = r" count ([0-9]+) (?:size [0-9]+ )?datatype "
COUNT_TEXT = r" count ([^ \t]+) (?:size [0-9]+ )?datatype "
OPCOUNT_TEXT = r": opCount ([^ \t]+) sendbuff "
OPCOUNT_VALUE = r": opCount ([0-9a-fA-F]{1,15}) "  # (at most 15 hex digits: an Int64)
_VALUE = r"[^ \t|]+"  # a field's value, readable or not (SHAPE_CHECKS says which are readable)
SHAPE = (
    _OP + r"\|(?:size [0-9]+ )?datatype " + _VALUE + " op " + _VALUE + " (?:root " + _VALUE + " )?comm "
    r"(?:0x[0-9a-fA-F]+|\(nil\))(?: \[nranks=[^ \t|\]]*\])?\|$"
)
_BEFORE_BODY = r" \[-?[0-9]+\] NCCL INFO " + _OP + r"\|(?:size [0-9]+ )?datatype "  # of two headers, the last wins
SHAPE_FIELDS = {
    "op": "(" + _OP + r")\|(?:size [0-9]+ )?datatype ",
    "dt": "datatype (" + _VALUE + ") op ",
    "redop": "datatype " + _VALUE + " op (" + _VALUE + ") ",
    "root": " root (" + _VALUE + ") comm ",
    "ptr": r" comm (0x[0-9a-fA-F]+|\(nil\))(?: \[nranks=[^ \t|\]]*\])?\|$",
    "nranks": r" \[nranks=([^ \t|\]]*)\]\|$",
    "host": r"([^\s:|]+):[0-9]+:[0-9]+" + _BEFORE_BODY,
    "pid": r"[^\s:|]+:([0-9]+):[0-9]+" + _BEFORE_BODY,
}
SHAPE_CHECKS = {  # what a readable value of a shape field looks like (SHAPE_FIELDS name: (what NCCL calls it, regex))
    "dt": ("datatype", r"^[0-9]{1,9}$"), "redop": ("op", r"^[0-9]{1,9}$"), "root": ("root", r"^-?[0-9]{1,18}$"),
    "nranks": ("nranks", r"^[0-9]{1,18}$"),
}

# --- INIT, WARN, version lines: one pattern per kind of line ---------------------------------------------------
_TS = r"(?:\[(?P<ts>[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?)\] )?"
_WHO = r"(?P<host>[^\s:]+):(?P<pid>[0-9]+):[0-9]+ \[(?P<dev>-?[0-9]+)\] "
_INFO = _TS + "(?:" + _WHO + "NCCL INFO )?"
_PTR = r"0x[0-9a-fA-F]+"
MISC = {  # checked in this order; the first that matches a line wins
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
MISC_KEY = {  # a group every match of the pattern fills
    "warn": "msg", "version": "version", "init": "phase", "nranks": "nranks", "teardown": "phase", "async": "msg",
}
MISC_MARK = (
    r"NCCL WARN|Init (?:START|COMPLETE)| nNodes |[NR]CCL version| - (?:Abort|Destroy|Revoke) |ncclCommSetAsyncError"
)
MSG_COMM = re.compile(r"\b[Cc]omm (0x[0-9a-fA-F]{1,16})\b")
SNIFF = r"[^\s:]+:[0-9]+:[0-9]+ (?:\[-?[0-9]+\] (?:[^\s]+ ){0,2}(?:\([^)]*\) )?NCCL (?:INFO|WARN|TRACE)|NCCL CALL)"


def misc_groups(text: pl.Expr) -> list[pl.Expr]:
    """One struct column per kind of non-COLL line (MISC), its groups where the line is of that kind."""
    return [text.str.extract_groups(rx).alias(kind) for kind, rx in MISC.items()]


def cut_shape(text: pl.Expr, stamped: bool = True) -> pl.Expr:
    """A COLL line's shape (see COLL_MARK); `stamped`: the lines may carry a timestamp, cut too."""
    return text.str.replace_all(STAMP + "|" + CUT if stamped else CUT, "|", literal=False)


def huge_count(text: pl.Expr) -> pl.Expr:
    """A COLL line's count field holds a number too big for an int64 (it becomes null)."""
    raw = text.str.extract(COUNT, 1)
    return raw.is_not_null() & raw.cast(pl.Int64, strict=False).is_null()


def unreadable(text: pl.Expr) -> pl.Expr:
    """What a COLL line's opCount and count hold where they are no number (`count '-4096'`), else null."""
    count = text.str.extract(COUNT_TEXT, 1)
    opcount = text.str.extract(OPCOUNT_TEXT, 1)
    return pl.concat_str([
        pl.when(~opcount.str.contains(r"^[0-9a-fA-F]+$")).then(pl.lit("opCount ") + quoted(opcount)),
        pl.when(~count.str.contains(r"^[0-9]+$")).then(pl.lit("count ") + quoted(count)),
    ], separator=", ", ignore_nulls=True).replace("", None)


def quoted(value: pl.Expr) -> pl.Expr:
    """A value as a message quotes it: `'-4096'`, cut to 40 characters."""
    return pl.lit("'") + value.str.slice(0, 40) + pl.lit("'")


def coll_lines(n: int) -> str:
    return f"{n} COLL line{'' if n == 1 else 's'}"


@dataclass
class Problems:
    """The diagnostics of one log, in the order they are found."""

    name: str
    items: list[Diagnostic]

    def warn(self, line: int | None, message: str) -> None:
        self.items.append(Diagnostic(Location(self.name, line), message, Severity.WARNING))

    def error(self, line: int | None, message: str) -> None:
        self.items.append(Diagnostic(Location(self.name, line), message))

    def summarise(self, total: int, what: str) -> None:
        """One warning for the problems of a kind past DIAGNOSTIC_LIMIT (those are not listed one by one)."""
        if total > DIAGNOSTIC_LIMIT:
            self.warn(None, f"{total - DIAGNOSTIC_LIMIT} {what} not listed")
