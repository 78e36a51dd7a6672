"""Closed sets of names used across ncclforensics, as str enums, and the normalisers onto them."""

from __future__ import annotations

from enum import Enum


class SourceFormat(str, Enum):
    """The input formats ncclforensics reads; detected from content, never from a file name."""

    RAS_TEXT = "ras-text"
    RAS_JSON = "ras-json"
    RAS_MONITOR = "ras-monitor"
    NCCL_LOG = "nccl-log"
    FLIGHT_RECORDER = "flight-recorder"
    TORCH_LOG = "torch-log"
    GATE_JOURNAL = "gate-journal"
    FINGERPRINT = "fingerprint"
    VLLM_METRICS = "vllm-metrics"

    @classmethod
    def declare(cls, value: str) -> SourceFormat:
        """The format named `value`: a built-in one, or one that a format module declares for itself (a format is
        one module in sources/ plus its line in the registry; iterating SourceFormat gives the built-in ones)."""
        try:
            return cls(value)
        except ValueError:
            member = str.__new__(cls, value)
            member._name_ = value.upper().replace("-", "_")
            member._value_ = value
            cls._value2member_map_[value] = member  # SourceFormat(value) finds it from now on
            return member


class EventState(str, Enum):
    """How far a collective got on one rank, as far as the source knows."""

    LAUNCHED = "launched"  # issued (NCCL COLL line, FR `scheduled`)
    STARTED = "started"  # its kernel began (FR `started`)
    COMPLETED = "completed"  # finished (FR `completed`)


class Severity(str, Enum):
    """How bad a diagnostic is: an `error` makes the exit code 2."""

    WARNING = "warning"
    ERROR = "error"


class Verdict(str, Enum):
    """The one-word answer of `diff`."""

    DIVERGED = "diverged"
    CONSISTENT = "consistent"
    TRANSIENT = "transient"
    INCONCLUSIVE = "inconclusive"


class WedgeKind(str, Enum):
    """Why progress stopped."""

    TYPE_MISMATCH = "type_mismatch"
    COUNT_MISMATCH = "count_mismatch"
    NO_PARTNER = "no_partner"
    CROSS_COMM_DEADLOCK = "cross_comm_deadlock"
    RANK_GONE = "rank_gone"  # a rank died, or RAS cannot reach it, or it left the comm
    UNKNOWN = "unknown"


class PairingKind(str, Enum):
    """What NCCL did when it paired collectives of several ranks at one seq."""

    SHAPE_EQUAL = "shape_equal"  # same op, count and dtype: completes with mixed data (silent corruption)
    COUNT_MISMATCH = "count_mismatch"
    TYPE_MISMATCH = "type_mismatch"  # a different op, dtype or reduction


class WatchdogKind(str, Enum):
    """What a PyTorch ProcessGroupNCCL or NCCL message says happened (a WatchdogEvent's `kind`)."""

    TIMEOUT = "timeout"  # the watchdog caught a collective past its timeout
    BLOCKING_WAIT_TIMEOUT = "blocking_wait_timeout"  # TORCH_NCCL_BLOCKING_WAIT: the caller's wait timed out
    ASYNC_ERROR = "async_error"  # NCCL reported an error on the communicator (a peer gone, a CUDA failure, ...)
    WATCHDOG_TERMINATED = "watchdog_terminated"
    ABORT = "abort"  # a communicator was aborted (or revoked)
    DUMP_SIGNAL = "dump_signal"  # a Flight Recorder dump was asked for by another rank
    DUMP_SIGNAL_SENT = "dump_signal_sent"
    DUMP = "dump"
    OPS_FAILED = "ops_failed"
    PROCESS_DOWN = "process_down"
    HEARTBEAT_TIMEOUT = "heartbeat_timeout"
    WATCHDOG_STUCK = "watchdog_stuck"
    COMM_ERROR = "comm_error"
    NCCL_ERROR = "nccl_error"
    NCCL_WARN = "nccl_warn"  # an NCCL WARN line no other kind describes
    STACK_TRACE = "stack_trace"
    STACK_TRACE_UNAVAILABLE = "stack_trace_unavailable"
    PG_STATUS = "pg_status"  # a process group's last enqueued and completed work
    DESYNC_REPORT = "desync_report"  # TORCH_NCCL_DESYNC_DEBUG's analysis of a timeout
    DESYNC_REPORT_UNAVAILABLE = "desync_report_unavailable"


class GateChoice(str, Enum):
    """A drafter gate's decision for one step."""

    PASS = "pass"
    SKIP = "skip"


# Point-to-point ops pair with their peer's opposite op, not with the same position on every rank: each source
# keeps them in a stream of their own per communicator, named `<comm>:p2p`, and the ranks' p2p streams are not
# compared position by position.
P2P_OPS = frozenset({"Send", "Recv"})
# Ops whose result is the same on every rank of the collective (a reduce-scatter's, an all-to-all's or a reduce's
# differ by rank): two ranks that read back different right results of one of them ran different collectives.
SAME_RESULT_OPS = frozenset({"AllReduce", "AllGather", "Broadcast"})
P2P_SUFFIX = ":p2p"


def is_p2p_comm(comm: str) -> bool:
    return comm.endswith(P2P_SUFFIX)


# NCCL's names are the canonical op names; every other spelling maps onto them.
_OP_ALIASES = {
    "allreduce": "AllReduce",
    "allgather": "AllGather",
    "allgatherbase": "AllGather",
    "allgatherintobase": "AllGather",
    "allgathercoalesced": "AllGather",
    "allgatherintotensorcoalesced": "AllGather",
    "reducescatter": "ReduceScatter",
    "reducescatterbase": "ReduceScatter",
    "reducescattertensorcoalesced": "ReduceScatter",
    "broadcast": "Broadcast",
    "reduce": "Reduce",
    "send": "Send",
    "recv": "Recv",
    "alltoall": "AllToAll",
    "alltoallbase": "AllToAll",
    "alltoallv": "AllToAll",
    "barrier": "Barrier",
    "gather": "Gather",
    "scatter": "Scatter",
    "allreducecoalesced": "AllReduce",
    "coalesced": "Coalesced",
}


def normalize_op(name: str) -> str:
    """Map `nccl:all_reduce`, `ALLREDUCE`, `_ALLGATHER_BASE`, `AllReduce` ... onto NCCL's op name."""
    raw = name.split(":", 1)[-1] if ":" in name else name
    key = raw.replace("_", "").replace(" ", "").lower()
    return _OP_ALIASES.get(key, raw)


# ncclDataType_t numbering (nccl.h), stable since NCCL 2.x; fp8 types from 2.24.
NCCL_DTYPES = {
    0: "int8", 1: "uint8", 2: "int32", 3: "uint32", 4: "int64", 5: "uint64",
    6: "float16", 7: "float32", 8: "float64", 9: "bfloat16", 10: "float8_e4m3", 11: "float8_e5m2",
}

_TORCH_DTYPES = {
    "float": "float32", "float32": "float32", "double": "float64", "float64": "float64",
    "half": "float16", "float16": "float16", "bfloat16": "bfloat16", "long": "int64", "int64": "int64",
    "int": "int32", "int32": "int32", "short": "int16", "char": "int8", "int8": "int8", "byte": "uint8",
    "uint8": "uint8", "bool": "bool", "float8_e4m3fn": "float8_e4m3", "float8_e5m2": "float8_e5m2",
}


def normalize_dtype(name: str | int) -> str:
    """Map an NCCL datatype number or a PyTorch scalar type name onto one spelling (`float32`, ...)."""
    if isinstance(name, int):
        return NCCL_DTYPES.get(name, f"nccl_dtype_{name}")
    key = name.strip().lower().removeprefix("torch.")
    return _TORCH_DTYPES.get(key, key)


# ncclRedOp_t numbering; values >= 5 are user-defined (ncclRedOpCreatePreMulSum).
NCCL_REDOPS = {0: "sum", 1: "prod", 2: "max", 3: "min", 4: "avg"}
