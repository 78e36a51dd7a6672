"""The one event model: typed records that every parser produces, each carrying its Location.

Collectives are many (millions per rank) and travel as a polars frame with COLLECTIVE_SCHEMA (see frame.py);
`CollectiveEvent` is the same row as a record, for building and reading single events. Everything else is few
and travels as frozen dataclasses.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from collections.abc import Mapping

from .kinds import EventState, GateChoice, Severity, WatchdogKind
from .location import Location


@dataclass(frozen=True, slots=True)
class CollectiveEvent:
    """One collective as one rank issued it. Field names are the column names of COLLECTIVE_SCHEMA."""

    loc: Location
    comm: str  # NCCL commId hash as lowercase 0x hex where known, else the process-group name
    seq: int  # 1-based launch ordinal of this collective in `comm` on this rank
    op: str  # NCCL op name (AllReduce, AllGather, ...)
    rank: int | None = None  # global rank, where the source knows it
    comm_rank: int | None = None
    comm_size: int | None = None
    count: int | None = None  # elements, in NCCL's sense (per-rank send count for AllGather)
    dtype: str | None = None
    redop: str | None = None
    root: int | None = None  # root (Broadcast/Reduce) or peer (Send/Recv), in comm ranks
    state: str | None = None  # EventState value, where known
    step: int | None = None
    tag: str | None = None
    callsite: str | None = None  # innermost user frame `file:line` that issued it (Flight Recorder)
    # every frame outside torch, innermost first, `file:line` joined by " < ": wrappers and loops make the
    # innermost frame the same for many collectives, the whole stack less often
    stack: str | None = None
    time: float | None = None  # seconds since the epoch
    host: str | None = None
    pid: int | None = None
    # NCCL's own counter from a COLL line, where read: logs under 1 MiB are read line by line and keep it; bigger
    # ones are read by keys that mask it (sources/nccl_log/keyed.py). Grouped ops share one, 1-rank comms stay at 0.
    opcount: int | None = None

    def __post_init__(self) -> None:
        if self.state is not None:
            EventState(self.state)  # ValueError for a state outside the closed set


@dataclass(frozen=True, slots=True)
class ProcessIdentity:
    """Who a process is in one communicator: maps (host, pid) and comm ranks to global ranks."""

    loc: Location
    host: str | None = None
    pid: int | None = None
    rank: int | None = None  # global rank, where the source states it
    comm: str | None = None
    comm_rank: int | None = None
    comm_size: int | None = None
    cuda_dev: int | None = None
    bus_id: str | None = None
    comm_ptr: str | None = None  # the `comm 0x...` pointer in NCCL debug lines of this process


@dataclass(frozen=True, slots=True)
class CommInfo:
    """A communicator or process group as a source describes it (Flight Recorder `pg_config`, INIT lines)."""

    loc: Location
    comm: str
    name: str | None = None
    desc: str | None = None
    ranks: tuple[int, ...] = ()  # global ranks, in comm-rank order
    size: int | None = None


@dataclass(frozen=True, slots=True)
class ProgressReport:
    """How far one rank got in one communicator (Flight Recorder `pg_status`, PyTorch `PG status` lines)."""

    loc: Location
    comm: str
    rank: int | None
    last_enqueued: int | None = None
    last_started: int | None = None
    last_completed: int | None = None


@dataclass(frozen=True, slots=True)
class RasRank:
    """One rank of a communicator in a RAS reply."""

    rank: int
    host: str | None = None
    pid: int | None = None
    cuda_dev: int | None = None
    counts: Mapping[str, int] = field(default_factory=dict)  # per collective type (2.26+) or {"ops": n}
    status: str | None = None  # e.g. "RUNNING", "INIT", "ABORT"
    async_error: str | None = None
    missing: bool = False
    unresponsive: bool = False
    dead: bool = False


@dataclass(frozen=True, slots=True)
class RasCountGroup:
    """One line of a MISMATCH block: `3 ranks have launched up to operation 49`."""

    op: str | None  # collective type whose counts differ (None on 2.24/2.25: one counter)
    count: int | None  # None: "has not launched any operations"
    nranks: int
    ranks: tuple[int, ...] = ()  # comm ranks, where listed individually


@dataclass(frozen=True, slots=True)
class RasIssue:
    """An entry of the Errors or Warnings section (INCOMPLETE, DEAD, TIMEOUT, ERROR, MISMATCH, ...)."""

    loc: Location
    kind: str
    comm: str | None = None
    message: str = ""
    ranks: tuple[int, ...] = ()
    pids: tuple[int, ...] = ()
    warning: bool = False


@dataclass(frozen=True, slots=True)
class RasComm:
    """One communicator in a RAS reply."""

    loc: Location
    comm: str  # lowercase 0x hash
    size: int | None = None
    status: str | None = None
    errors: tuple[str, ...] = ()  # the table's error column, e.g. ("MISMATCH",)
    ranks: tuple[RasRank, ...] = ()
    count_groups: tuple[RasCountGroup, ...] = ()
    missing_ranks: tuple[int, ...] = ()
    dead_ranks: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class RasSnapshot:
    """One RAS STATUS reply (text or JSON) or one MONITOR event."""

    loc: Location
    time: str | None = None  # as the reply gives it
    nccl_version: str | None = None
    comms: tuple[RasComm, ...] = ()
    issues: tuple[RasIssue, ...] = ()
    event: str | None = None  # MONITOR event name; None for a STATUS reply
    # The reply was cut short (sources/ras_reply.py `cut_short`): it ends before its Warnings section or inside a
    # line, or a comm the table lists with errors has no block, or a block stops before all its ranks' counts.
    # What a cut reply does not show is unknown: never read it as "consistent" or a comm as "ok". A reply cut
    # exactly at the end of one part of a block cannot be told from a complete one.
    truncated: bool = False
    # The job summary's count of the job's processes (text replies; JSON replies have no summary): None where absent.
    processes: int | None = None


@dataclass(frozen=True, slots=True)
class GateDecision:
    """One rank's drafter-gate decision for one decode step."""

    loc: Location
    rank: int
    step: int
    decision: str  # a GateChoice value (checked)
    seq: int | None = None  # sequence length the rank saw
    proposed_pass_count: int | None = None
    sched_count: int | None = None
    fits: bool | None = None
    md_none: bool | None = None
    max_model_len: int | None = None
    spec_tokens: int | None = None
    mode: str | None = None
    time: float | None = None

    def __post_init__(self) -> None:
        GateChoice(self.decision)  # ValueError for a decision outside the closed set


@dataclass(frozen=True, slots=True)
class FingerprintRow:
    """A checksum a rank computed after a step or after one collective."""

    loc: Location
    rank: int
    step: int
    op: int | None = None  # ordinal of the collective within the step, where per collective
    tag: str | None = None
    kind: str | None = None  # op name of the collective
    numel: int | None = None
    digest: str | None = None
    sum: float | None = None
    expected_sum: float | None = None


@dataclass(frozen=True, slots=True)
class WatchdogEvent:
    """A PyTorch ProcessGroupNCCL or NCCL message about a timeout, an error, an abort or a desync report."""

    loc: Location
    kind: str  # a WatchdogKind value (checked: a parser cannot make up a kind the analysis does not know)
    rank: int | None = None
    comm: str | None = None  # process group name or NCCL hash
    # the process whose line it is, where the source names it (NCCL logs): its `rank` is renumbered with the process
    # where the log's ranks are comm ranks (align/ranks.py)
    host: str | None = None
    pid: int | None = None
    seq: int | None = None
    op: str | None = None
    numel_in: int | None = None
    numel_out: int | None = None
    timeout_ms: int | None = None
    ran_ms: int | None = None
    last_enqueued: int | None = None
    last_completed: int | None = None
    ranks: tuple[int, ...] = ()  # ranks a desync report names
    group_rank: int | None = None  # the rank's place in the group (`comm`) where the line says it: `[PG ... Rank 3]`
    message: str = ""
    # a desync report's lines about laggards, (ranks, last collective they finished or joined, joined it):
    # `[6] finished collective #19, but didn't join collective #20` is ((6,), 19, False); `[0, 1] joined but didn't
    # finish collective #18` is ((0, 1), 18, True). Its collective numbers may differ from the watchdog's SeqNum.
    lagging: tuple[tuple[tuple[int, ...], int, bool], ...] = ()
    group_ranks: tuple[int, ...] = ()  # every rank (in its group) a desync report names, its snapshot included
    # a desync report's snapshot, (ranks, number of the last collective each started or finished, finished it, its
    # op): `#16 started ranks: [0, 2] started ALLREDUCE` is ((0, 2), 16, False, "AllReduce"). Numbered as `lagging`
    # is; what a report says of a rank other than its own is what that rank last wrote to the store, a floor of
    # what it enqueued (and the op of that one).
    latest: tuple[tuple[tuple[int, ...], int, bool, str | None], ...] = ()
    # a stack trace's frames outside torch, innermost first, `file:line` joined by " < " (as a collective's stack)
    stack: str | None = None

    def __post_init__(self) -> None:
        WatchdogKind(self.kind)  # ValueError for a kind outside the closed set


@dataclass(frozen=True, slots=True)
class SpecDecodeMetrics:
    """One vLLM `SpecDecoding metrics` (or older `Speculative metrics`) line."""

    loc: Location
    process: str | None = None  # pid or engine the line belongs to
    mean_acceptance_length: float | None = None
    accepted: int | None = None
    drafted: int | None = None
    per_position: tuple[float, ...] = ()
    avg_acceptance_rate: float | None = None  # fraction, 0..1
    cumulative: bool = False  # counts since the server started (vLLM V0), not over the logging interval


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """Something wrong with an input, at a place; `error` severity makes the exit code 2."""

    loc: Location
    message: str
    severity: Severity = Severity.ERROR

    def __str__(self) -> str:
        return f"{self.loc}: {self.message}"
