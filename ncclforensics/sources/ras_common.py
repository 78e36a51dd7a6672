"""What the RAS parsers share: hash spelling, NCCL's closed name sets, version gates and transcript noise.

Reference: /work/shared/reference/nccl_formats.md sections 1 to 3. Every string below is an NCCL C literal
(`src/ras/client_support.cc`) or a line the `ncclras` client or a shell adds around a reply.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..model import RasCountGroup

# ncclFuncStr[0..4]: the only collective types RAS counts (Send/Recv, AlltoAll, ... are never counted).
COLL_TYPES = ("Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce")
# RasRank.counts key on NCCL 2.24/2.25, which kept one counter for every collective.
SINGLE_COUNTER = "ops"

# Communicator status, lowest bit first (RAS_ACS_NOCOMM=1 ... ABORT=16). 2.24/2.25 print UNKNOWN for NOCOMM.
STATUS_ORDER = ("NOCOMM", "INIT", "RUNNING", "FINALIZE", "ABORT")
STATUS_NAMES = frozenset(STATUS_ORDER) | {"UNKNOWN"}
NO_COMM_STATUSES = frozenset({"NOCOMM", "UNKNOWN"})  # the rank's process answered but no longer has the comm
# The table's error column lists these in this order ("INCOMPLETE,ERROR,MISMATCH"); "OK" when none.
ERROR_ORDER = ("INCOMPLETE", "ERROR", "MISMATCH")

# ncclResult_t as RAS spells it (`ncclErrorToString`); 7 (in progress) is not an error, 8 came with 2.30.3.
NCCL_RESULTS = {
    0: "Success", 1: "Unhandled CUDA error", 2: "System error", 3: "Internal error", 4: "Invalid argument",
    5: "Invalid usage", 6: "Remote process error", 7: "NCCL operation in progress", 8: "Timeout",
}
NOT_AN_ERROR = frozenset({0, 7})

# MONITOR events (2.29.2+) and their group; PEER_DEAD and PEER_TIMEOUT_DEAD are the only fatal ones.
MONITOR_EVENTS = {
    "PEER_NEW": "LIFECYCLE", "PEER_DEAD": "LIFECYCLE", "PEER_CONNECTING": "TRACE", "PEER_CONNECTED": "TRACE",
    "PEER_RECOVERED": "TRACE", "PEER_UNRESPONSIVE": "TRACE", "PEER_KEEPALIVE_TIMEOUT": "TRACE",
    "PEER_SEND_STUCK": "TRACE", "PEER_RETRY": "TRACE", "PEER_INIT_TIMEOUT": "TRACE",
    "PEER_DISCONNECTED": "TRACE", "PEER_TIMEOUT_DEAD": "TRACE",
}
FATAL_EVENTS = frozenset({"PEER_DEAD", "PEER_TIMEOUT_DEAD"})

_HASH = re.compile(r"(?:0[xX])?([0-9a-fA-F]{1,16})")


def normalize_hash(raw: object) -> str | None:
    """One spelling for a commHash: lowercase `0x` + 16 hex digits, or None when it is not one.

    The text report prints `%016lx` without `0x` (`1715b7bd1b8fda9e`), the JSON `0x%lx` unpadded
    (`0x222add84e116d10`), NCCL_DEBUG `commId 0x...`: all three become `0x1715b7bd1b8fda9e` / `0x0222add84e116d10`.
    """
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return f"0x{raw:016x}" if 0 <= raw < 1 << 64 else None
    if not isinstance(raw, str):
        return None
    match = _HASH.fullmatch(raw.strip())
    return f"0x{int(match.group(1), 16):016x}" if match else None


def implausible_hash(comm: str) -> bool:
    """True for a hash no real comm has: zero, or six zero nibbles in a row (garbage like `93d7000200000001`).

    A random 64-bit hash has a run of six zero hex digits with probability below 1e-6.
    """
    return int(comm, 16) == 0 or "000000" in comm[2:]


def version_tuple(version: str | None) -> tuple[int, ...] | None:
    """`2.28.9`, `2.28.9+cuda13.0` or `2.30.7-1` -> (2, 28, 9); None when it is not a version."""
    if not version:
        return None
    match = re.match(r"(\d+)\.(\d+)\.(\d+)", version)
    return tuple(int(g) for g in match.groups()) if match else None


def has_comm_walk_bug(version: tuple[int, ...] | None) -> bool:
    """NCCL 2.26.2 to 2.28.9 decode comms after one with missing ranks from garbage (NVIDIA/nccl#1762)."""
    return version is not None and (2, 26) <= version < (2, 29)


def result_text(code: int) -> str:
    """ncclResult_t code -> the text RAS prints for it."""
    return NCCL_RESULTS.get(code, f"Unexpected error (code {code})")


def comm_status(statuses: Iterable[str]) -> str | None:
    """The status RAS shows for a comm: the highest of its ranks' statuses (ABORT > FINALIZE > ... > NOCOMM)."""
    ranked = [STATUS_ORDER.index("NOCOMM" if s == "UNKNOWN" else s) for s in statuses if s in STATUS_NAMES]
    return STATUS_ORDER[max(ranked)] if ranked else None


def is_outlier(count: int, total: int | None) -> bool:
    """Whether a text reply lists a group's members (`rasCountIsOutlier`, default STATUS, section 2.6).

    A group of one always is; a bigger group only with at most 10 members and at most 25% of `total`.
    """
    return count == 1 or (count <= 10 and (total is None or count * 4 <= total))


def count_groups(counts: dict[int, dict[str, int]]) -> tuple[RasCountGroup, ...]:
    """Per op type whose counts differ across ranks, the groups of ranks sharing a count, as a MISMATCH lists them.

    Groups are ordered as NCCL prints them: types in ncclFuncStr order, then biggest group first, ties by higher
    count. A count of 0 becomes None ("have not launched any operations").
    """
    ops = [op for op in COLL_TYPES if any(op in c for c in counts.values())]
    ops += sorted({op for c in counts.values() for op in c} - set(ops))
    groups: list[RasCountGroup] = []
    for op in ops:
        by_value: dict[int, list[int]] = {}
        for rank, per_op in counts.items():
            if op in per_op:
                by_value.setdefault(per_op[op], []).append(rank)
        if len(by_value) < 2:
            continue
        for value, ranks in sorted(by_value.items(), key=lambda kv: (-len(kv[1]), -kv[0])):
            name = None if op == SINGLE_COUNTER else op
            groups.append(RasCountGroup(op=name, count=value or None, nranks=len(ranks), ranks=tuple(sorted(ranks))))
    return tuple(groups)


# Lines around replies in a transcript: client commands, one-line server replies, ncclras chatter, shell prompts.
_COMMAND = re.compile(
    r"(?:CLIENT PROTOCOL \d+|SERVER PROTOCOL \d+|OK|TIMEOUT \d+|SET FORMAT \S+|(?:VERBOSE )?STATUS"
    r"|MONITOR(?: \S+)?|RAS Monitor Mode - .*|NCCL RAS protocol version mismatch.*"
    r"|Connection timed out; retrying\.\.\.)",
    re.IGNORECASE,
)
_PROMPT = re.compile(r"(?:\[[^\]]*\])?\S*[$#%] \S.*")  # `$ ncclras -v`, `root@node:~# echo status | nc ...`
SERVER_ERROR = re.compile(r"ERROR: (?P<message>.+)")  # `ERROR: Unknown command SET FORMAT json`, ...


def is_transcript_noise(line: str) -> bool:
    """True for a client command, a handshake reply, an ncclras banner or a shell prompt."""
    stripped = line.strip()
    return bool(_COMMAND.fullmatch(stripped) or _PROMPT.fullmatch(stripped))
