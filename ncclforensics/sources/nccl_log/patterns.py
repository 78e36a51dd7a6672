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
CUT = r": opCount [0-9a-fA-F]+ sendbuff [^ \t]+ recvbuff [^ \t]+ count [0-9]+ | stream(?: .*)?$"
_OP = r"[A-Za-z0-9_]+"
COUNT = r" count ([0-9]+) (?:size [0-9]+ )?datatype "
OPCOUNT_VALUE = r": opCount ([0-9a-fA-F]{1,15}) "  # (at most 15 hex digits: an Int64)
SHAPE = (
    _OP + r"\|(?:size [0-9]+ )?datatype [0-9]+ op [0-9]+ (?:root -?[0-9]+ )?comm (?:0x[0-9a-fA-F]+|\(nil\))"
    r"(?: \[nranks=[0-9]+\])?\|$"
)
_BEFORE_BODY = r" \[-?[0-9]+\] NCCL INFO " + _OP + r"\|(?:size [0-9]+ )?datatype "  # of two headers, the last wins
SHAPE_FIELDS = {
    "op": "(" + _OP + r")\|(?:size [0-9]+ )?datatype ",
    "dt": r"datatype ([0-9]+) op ",
    "redop": r"datatype [0-9]+ op ([0-9]+) ",
    "root": r" root (-?[0-9]+) comm ",
    "ptr": r" comm (0x[0-9a-fA-F]+|\(nil\))(?: \[nranks=[0-9]+\])?\|$",
    "nranks": r" \[nranks=([0-9]+)\]\|$",
    "host": r"([^\s:|]+):[0-9]+:[0-9]+" + _BEFORE_BODY,
    "pid": r"[^\s:|]+:([0-9]+):[0-9]+" + _BEFORE_BODY,
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
