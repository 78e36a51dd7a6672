"""The INIT and teardown history of a log: which communicator a pointer names at each line, in each process.

Read from the few lines that are not COLL lines (INIT, `nRanks`, Abort/Destroy/Revoke, WARN, version), one by one,
in line order; the COLL table is then built against it (table.py).
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field

import polars as pl

from ...model import Location, ProcessIdentity, WatchdogEvent, WatchdogKind
from .comm_hash import child_comm_hash, hash_name
from .patterns import MISC, MISC_KEY, MSG_COMM, Problems

# How a WARN message is classified (first match wins); nccl_formats.md §5.1.
_WARN_KINDS = [
    (WatchdogKind.ABORT, re.compile(r"in abort state|communicator was revoked|\bRevoke\b|\baborted\b", re.IGNORECASE)),
    (WatchdogKind.ASYNC_ERROR, re.compile(
        r"Connection closed by remote peer|Connection reset by peer|Got completion from peer|async fatal event|"
        r"Cuda failure|Call to \S+ failed|Message truncated|Failed to execute operation|ncclCommSetAsyncError|"
        r"remote process exited|unhandled (?:cuda|system) error|ncclRemoteError|ncclSystemError|ncclInternalError"
    )),
    (WatchdogKind.TIMEOUT, re.compile(r"time[ d]?out|timed out|ncclTimeout", re.IGNORECASE)),
]


@dataclass
class Comm:
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
        return hash_name(self.hash) if self.hash is not None else fallback_comm(self.host, self.pid, self.ptr)


@dataclass
class _Event:
    """A watchdog event before ranks are known: they are filled in once every INIT line is read."""

    line: int
    kind: WatchdogKind
    message: str
    host: str | None
    pid: int | None
    dev: int | None
    comm: Comm | None = field(default=None)


def fallback_comm(host: str | None, pid: int | None, ptr: str) -> str:
    """The `comm` of a communicator whose hash is unknown: `host:pid:pointer` (`?` for what is unknown)."""
    return f"{host if host is not None else '?'}:{pid if pid is not None else '?'}:{ptr}"


def _int(value: str | None) -> int | None:
    """A decimal from a log field; None when absent or too long for Int64 (hostile input)."""
    return int(value) if value is not None and len(value) <= 18 else None


def _at_least(version: str | None, wanted: tuple[int, ...]) -> bool:
    """True when `version` (`2.28.9`) is known and not older than `wanted`."""
    if not version:
        return False
    return tuple(int(p) for p in version.split(".")) >= wanted


class History:
    """Every communicator of every process of one log, its version, its watchdog events and the global ranks."""

    def __init__(self, problems: Problems) -> None:
        self.problems = problems
        self.version: str | None = None
        self.comms: list[Comm] = []  # in order of first line
        self.proc_rank: dict[tuple, int] = {}  # (host, pid) -> global rank
        self._dev_rank: dict[tuple, int] = {}  # (host, pid, cudaDev) -> global rank
        self._history: dict[tuple, list[Comm]] = {}  # (host, pid, ptr) -> its communicators, in line order
        self._open: dict[tuple, Comm | None] = {}  # (host, pid, ptr) -> the communicator it points to now
        self._events: list[_Event] = []
        self._pending_aborts: dict[tuple, _Event] = {}

    def read(self, misc: pl.DataFrame) -> None:
        """Read the INIT, WARN and version lines (`misc`: line and MISC's groups, in line order)."""
        for row in misc.iter_rows(named=True):
            self._misc_line(row)
        for event in self._pending_aborts.values():
            event.message += " (no COMPLETE line follows: the abort may have hung)"
            self._events.append(event)
        self._pending_aborts.clear()
        self._global_ranks()

    def rank_of(self, host: str | None, pid: int | None, dev: int | None) -> int | None:
        """The global rank of a process (or of one of its devices); see the package docstring."""
        if (host, pid) in self.proc_rank:
            return self.proc_rank[(host, pid)]
        return self._dev_rank.get((host, pid, dev))

    def identities(self) -> list[ProcessIdentity]:
        return [
            ProcessIdentity(
                loc=Location(self.problems.name, c.line), host=c.host, pid=c.pid,
                rank=self.rank_of(c.host, c.pid, c.cuda_dev), comm=c.key, comm_rank=c.comm_rank,
                comm_size=c.comm_size, cuda_dev=c.cuda_dev, bus_id=c.bus_id, comm_ptr=c.ptr,
            )
            for c in self.comms
        ]

    def watchdog(self) -> list[WatchdogEvent]:
        events = []
        for e in sorted(self._events, key=lambda e: e.line):
            dev = e.comm.cuda_dev if e.comm is not None and e.comm.cuda_dev is not None else e.dev
            events.append(WatchdogEvent(
                loc=Location(self.problems.name, e.line), kind=e.kind.value, rank=self.rank_of(e.host, e.pid, dev),
                comm=e.comm.key if e.comm is not None else None, host=e.host, pid=e.pid, message=e.message,
            ))
        return events

    # --- one line at a time --------------------------------------------------------------------------------------

    def _misc_line(self, row: dict) -> None:
        line = row["line"]
        kind, g = next(((k, row[k]) for k in MISC if row[k] and row[k][MISC_KEY[k]] is not None), (None, None))
        if kind == "warn":
            message = g["msg"].rstrip()
            self._add_event(line, g, next((k for k, rx in _WARN_KINDS if rx.search(message)), WatchdogKind.NCCL_WARN), message)
        elif kind == "version":
            self._version_line(line, g["version"])
        elif kind in ("init", "nranks"):
            self._init_line(line, g)
        elif kind == "teardown":
            self._teardown_line(line, g)
        elif kind == "async":
            self._add_event(line, g, WatchdogKind.ASYNC_ERROR, g["msg"])

    def _version_line(self, line: int, version: str) -> None:
        if self.version is None:
            self.version = version
            if not version.startswith("2."):
                self.problems.warn(line, f"NCCL version {version} is not a 2.x release, the only ones there are "
                                         f"(this parser knows 2.x); read as 2.x")
        elif version != self.version:
            self.problems.warn(line, f"NCCL version {version} differs from {self.version} seen before")

    def _init_line(self, line: int, g: dict) -> None:
        host, pid, ptr = g["host"], _int(g["pid"]), g["ptr"].lower()
        where = (host, pid, ptr)
        rank, nranks = _int(g["rank"]), _int(g["nranks"])
        if rank is not None and nranks is not None and not 0 <= rank < nranks:
            self.problems.warn(line, f"rank {rank} in a communicator of {nranks} ranks (nranks): implausible, a "
                                     f"rank is below nranks; read as given")
        phase = g.get("phase")
        hash_value = int(g["hash"], 16) if g.get("hash") and len(g["hash"]) <= 16 else None
        comm = self._open.get(where)
        if comm is not None and (
            comm.complete
            or (comm.comm_rank, comm.comm_size) != (rank, nranks)
            or (hash_value is not None and comm.hash is not None and comm.hash != hash_value)
        ):
            comm = None  # a new communicator at a reused pointer
        if comm is None:
            comm = Comm(host, pid, ptr, first_line=line, line=line, comm_rank=rank, comm_size=nranks)
            self.comms.append(comm)
            self._history.setdefault(where, []).append(comm)
            self._open[where] = comm
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

    def _split_hash(self, comm: Comm, line: int, g: dict) -> None:
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
                self._open[where] = None
            return
        message = f"comm {g['ptr']} rank {g['rank']} nranks {g['nranks']}: {what} {phase}"
        if phase == "START":
            self._pending_aborts[where] = self._event(line, g, WatchdogKind.ABORT, message, where)
            return
        self._pending_aborts.pop(where, None)
        self._add_event(line, g, WatchdogKind.ABORT, message, ptr=where[2])
        self._open[where] = None

    def _add_event(self, line: int, g: dict, kind: WatchdogKind, message: str, ptr: str | None = None) -> None:
        if ptr is None and (found := MSG_COMM.search(message)):
            ptr = found.group(1).lower()
        self._events.append(self._event(line, g, kind, message, (g["host"], _int(g["pid"]), ptr)))

    def _event(self, line: int, g: dict, kind: WatchdogKind, message: str, where: tuple) -> _Event:
        comm = self._comm_at(*where, line) if where[2] else None
        return _Event(line, kind, message, host=where[0], pid=where[1], dev=_int(g["dev"]), comm=comm)

    def _comm_at(self, host: str | None, pid: int | None, ptr: str, line: int) -> Comm | None:
        """The communicator `ptr` pointed to in process (host, pid) at `line`: its most recent INIT before."""
        comms = self._history.get((host, pid, ptr), [])
        i = bisect.bisect_right([c.first_line for c in comms], line)
        return comms[i - 1] if i else None

    def _global_ranks(self) -> None:
        """Fill proc_rank[(host, pid)] and _dev_rank[(host, pid, cudaDev)]; see the package docstring."""
        by_process: dict[tuple, list[Comm]] = {}
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
                        self._dev_rank[(*process, c.cuda_dev)] = c.comm_rank
