"""Poll NCCL RAS, keep every reply as evidence, and tell stuck communicators from transient skew.

A MISMATCH in one RAS reply means little: busy communicators show one ("3 ranks at 273, rank 3 at 272") and
move on. NCCL's own advice (ras.rst) is to query again: counts that do not change mean the communicator is
stuck. Per communicator and poll the watcher computes a state:

- `ok`: every rank reports and the counts agree;
- `mismatch`: ranks disagree (different counts or status, or ranks missing), seen once or unchanged fewer than
  `stuck_after` polls: too early to tell;
- `skew`: ranks disagree but the counts moved since the last poll: transient, the job is progressing;
- `stuck`: ranks disagree and the counts stayed the same for `stuck_after` polls in a row;
- `gone`: the communicator is no longer reported.

Missing and dead ranks ride along with the state; a change of any of the three is a state change. Every reply
is saved as `ras_<n>.txt` in the output folder and read back through the offline parsers, so what the watcher
saw is exactly what `ncclforensics diff` will read later.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any
from collections.abc import Callable, Sequence

from ..errors import OutputError
from ..model import RasComm, RasCountGroup, RasSnapshot
from .ras_client import RasClient, RasReply, RasReplyError

_OURS = re.compile(r"(?:ras_\d+\.txt|ras_monitor\.txt|\.ras_\d+\.(?:partial|rejected))")
_SAVED = re.compile(r"ras_(\d+)\.txt")


class CommState(str, Enum):
    """What a communicator is doing, as far as successive RAS replies tell."""

    OK = "ok"
    MISMATCH = "mismatch"
    SKEW = "skew"
    STUCK = "stuck"
    GONE = "gone"


@dataclass(frozen=True)
class WatchOptions:
    """How to watch: where the RAS server is, how often, where the replies go, when a comm is stuck."""

    out: Path
    host: str = "127.0.0.1"
    port: int = 28028
    interval: float = 5.0
    polls: int | None = None  # stop after this many good replies (None: until stopped)
    stuck_after: int = 3  # polls with the same disagreeing counts that make a comm stuck
    fmt: str = "auto"  # auto | json | text
    verbose: bool = False  # VERBOSE STATUS (text only)
    collective_timeout: int = 5  # RAS `TIMEOUT` (seconds the RAS collective waits per leg)
    connect_timeout: float = 2.0
    read_timeout: float | None = None  # None: collective_timeout + 6, as ncclras
    retry: float = 1.0  # first back-off after a failed poll; doubles up to retry_cap
    retry_cap: float = 30.0
    max_failures: int = 5  # consecutive failed polls before giving up (0: never)
    monitor: bool = False  # also follow MONITOR events (NCCL 2.29+)


@dataclass(frozen=True)
class CommView:
    """One communicator in one reply, reduced to what the state machine compares."""

    comm: str
    size: int | None
    status: str | None
    errors: tuple[str, ...]
    counts: dict[int, dict[str, int]]  # comm rank -> collective type -> launched count
    groups: tuple[RasCountGroup, ...]
    missing: tuple[int, ...]
    dead: tuple[int, ...]
    async_errors: dict[int, str]

    @property
    def disagree(self) -> bool:
        """Ranks differ in counts or status, or some do not report."""
        if self.groups or self.missing or self.dead or "MISMATCH" in self.errors or "INCOMPLETE" in self.errors:
            return True
        ops = {op for per in self.counts.values() for op in per}
        return any(len({per.get(op) for per in self.counts.values()}) > 1 for op in ops)

    @property
    def signature(self) -> tuple:
        """What must stay equal across polls for the counts to be unchanged."""
        counts = tuple(sorted((r, tuple(sorted(per.items()))) for r, per in self.counts.items()))
        return counts, self.groups, self.missing, self.dead

    def describe_counts(self) -> str:
        """`AllReduce: rank 0 at 50, ranks 1, 2, 3 at 49` for every collective type whose counts differ."""
        parts = []
        ops: dict[str | None, list[RasCountGroup]] = {}
        for group in self.groups:
            ops.setdefault(group.op, []).append(group)
        for op, groups in ops.items():
            sides = []
            for g in groups:
                who = _ranks(g.ranks) if g.ranks else f"{g.nranks} ranks"
                sides.append(f"{who} at {g.count if g.count is not None else 0}")
            parts.append(f"{op or 'ops'}: " + ", ".join(sides))
        return "; ".join(parts)


def view_of(comm: RasComm) -> CommView:
    """The comparable view of one parsed communicator."""
    counts = {r.rank: dict(r.counts) for r in comm.ranks if r.counts and not r.missing}
    missing = tuple(sorted(set(comm.missing_ranks) | {r.rank for r in comm.ranks if r.missing}))
    dead = tuple(sorted(set(comm.dead_ranks) | {r.rank for r in comm.ranks if r.dead}))
    async_errors = {r.rank: r.async_error for r in comm.ranks if r.async_error}
    return CommView(comm.comm, comm.size, comm.status, tuple(comm.errors), counts, tuple(comm.count_groups),
                    missing, dead, async_errors)


@dataclass(frozen=True)
class StateChange:
    """A communicator changed state, or its missing or dead ranks changed."""

    poll: int
    time: float
    comm: str
    before: str | None
    after: str
    detail: str
    file: str
    missing_ranks: tuple[int, ...] = ()
    dead_ranks: tuple[int, ...] = ()
    counts: dict[int, dict[str, int]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """One JSON line of `--json`."""
        return {"kind": "state_change", "poll": self.poll, "time": self.time, "comm": self.comm,
                "from": self.before, "to": self.after, "detail": self.detail, "file": self.file,
                "missing_ranks": list(self.missing_ranks), "dead_ranks": list(self.dead_ranks),
                "counts": {str(r): c for r, c in sorted(self.counts.items())}}

    def describe(self) -> str:
        """One human line."""
        before = self.before or "new"
        return f"poll {self.poll}: comm {self.comm}: {before} -> {self.after}" + (
            f" ({self.detail})" if self.detail else "")


@dataclass
class _Track:
    view: CommView
    state: CommState
    unchanged: int  # consecutive polls with this signature, this one included
    polls: int = 1


@dataclass
class WatchSummary:
    """What a watch saw, for the final report and the exit code."""

    polls_ok: int = 0
    failures: int = 0
    stuck: set[str] = field(default_factory=set)
    transient: set[str] = field(default_factory=set)
    missing: dict[str, set[int]] = field(default_factory=dict)
    dead: dict[str, set[int]] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    gave_up: str | None = None  # the last error, when the watch ended by giving up
    last_error: str | None = None
    nccl_version: tuple[int, ...] | None = None

    @property
    def trouble(self) -> bool:
        """The watch could not do its job: it gave up, or never had a reply."""
        return self.gave_up is not None or self.polls_ok == 0

    def as_dict(self) -> dict[str, Any]:
        """The summary as the last JSON line of `--json`."""
        return {"kind": "summary", "polls": self.polls_ok, "failed_polls": self.failures,
                "stuck": sorted(self.stuck), "transient": sorted(self.transient),
                "missing_ranks": {c: sorted(r) for c, r in sorted(self.missing.items())},
                "dead_ranks": {c: sorted(r) for c, r in sorted(self.dead.items())},
                "files": self.files, "gave_up": self.gave_up,
                "nccl_version": ".".join(map(str, self.nccl_version)) if self.nccl_version else None}


def prepare_out_dir(out: Path, inputs: Sequence[Path] = ()) -> Path:
    """Check the folder replies go to: never through `..`, never in an input or an evidence folder. It is made
    at the first reply (`RasWatcher._save`), so a watch that never got one leaves no empty folder behind."""
    if ".." in out.parts:
        raise OutputError(f"--out {out}: refusing a path that goes through '..'", hint="give the folder plainly")
    resolved = out.resolve()
    for given in inputs:
        source = Path(given).resolve()
        if resolved == source or source in resolved.parents or (source.is_file() and source.parent == resolved):
            raise OutputError(f"--out {out}: inside the input {given}; replies would mix with the evidence read")
    if out.exists() and not out.is_dir():
        raise OutputError(f"--out {out}: exists and is not a folder")
    if out.is_dir():
        others = sorted(p.name for p in out.iterdir() if not _OURS.fullmatch(p.name))
        if others:
            shown = ", ".join(others[:3]) + (" ..." if len(others) > 3 else "")
            raise OutputError(f"--out {out}: already holds other files ({shown}); it looks like an evidence folder",
                              hint="give a new or empty folder, or one a previous watch wrote")
    return out


class RasWatcher:
    """Polls one RAS endpoint and keeps per-communicator state. `poll()` once, or `run()` until done."""

    def __init__(self, options: WatchOptions, client: RasClient | None = None) -> None:
        self.o = options
        self.client = client or RasClient(options.host, options.port, connect_timeout=options.connect_timeout,
                                          collective_timeout=options.collective_timeout,
                                          read_timeout=options.read_timeout, fmt=options.fmt,
                                          verbose=options.verbose)
        self.out = options.out
        self.summary = WatchSummary()
        self.tracks: dict[str, _Track] = {}
        self.job_issues: dict[str, tuple[int, ...]] = {}  # job-level INCOMPLETE / DEAD -> pids
        self.poll_count = 0
        saved = [int(m.group(1)) for p in self.out.iterdir() if (m := _SAVED.fullmatch(p.name))] \
            if self.out.is_dir() else []
        self._next_file = max(saved, default=-1) + 1
        self._events: list[bytes] = []
        self._events_lock = threading.Lock()
        self._monitor_thread: threading.Thread | None = None
        self._monitor_decided = False
        self._cut_reason = ""

    # -- one poll ---------------------------------------------------------------------------------------------

    def poll(self) -> list[StateChange]:
        """Query, save, parse and compare once; RasReplyError when no usable reply came back."""
        reply = self.client.status()
        path = self._save(reply)
        snapshot = self._parse(path)
        if snapshot.truncated:
            # What a cut reply does not show is unknown: a comm it does not list has not healed, a block it cuts
            # short has not moved. It stays as evidence (diff reports the cut) and counts as a failed poll.
            raise RasReplyError(f"reply {path.name} is cut short ({self._cut_reason}); kept as evidence, not used "
                                f"to judge the communicators")
        self.poll_count += 1
        self.summary.polls_ok += 1
        self.summary.files.append(str(path))
        version = reply.nccl_version
        if version:
            self.summary.nccl_version = version
        return self._update(snapshot, str(path))

    def _save(self, reply: RasReply) -> Path:
        number = self._next_file
        self._next_file += 1
        self.out.mkdir(parents=True, exist_ok=True)
        path = self.out / f"ras_{number}.txt"
        partial = self.out / f".ras_{number}.partial"
        partial.write_bytes(reply.data)
        partial.replace(path)
        return path

    def _parse(self, path: Path) -> RasSnapshot:
        from ..sources import InputFile, parse_file

        evidence = parse_file(InputFile(path=path, name=str(path)))
        if evidence.ras:
            cut = [p.message for p in evidence.problems if " is cut short: " in p.message]
            self._cut_reason = cut[0].split(" is cut short: ", 1)[1].split(". ")[0] if cut else ""
            return evidence.ras[0]
        path.replace(path.with_name(f".{path.stem}.rejected"))
        problems = "; ".join(p.message for p in evidence.problems[:2]) or "no communicator data"
        raise RasReplyError(f"reply {path.name} not understood as a RAS report: {problems}")

    def _update(self, snapshot: RasSnapshot, file: str) -> list[StateChange]:
        now = time.time()
        changes: list[StateChange] = []
        seen: set[str] = set()
        anonymous = any(c.comm.startswith("#") for c in snapshot.comms)
        for comm in snapshot.comms:
            view = view_of(comm)
            seen.add(view.comm)
            change = self._track(view, now, file)
            if change:
                changes.append(change)
        for comm, track in self.tracks.items():
            if comm in seen or track.state is CommState.GONE:
                continue
            # A text report names a comm's hash only while it has errors or warnings; an OK comm is `#g-i`.
            if anonymous and not comm.startswith("#"):
                healed = CommView(comm, track.view.size, None, (), {}, (), (), (), {})
                change = self._track(healed, now, file, detail="no longer listed with errors")
            else:
                change = self._change(track, comm, CommState.GONE, now, file, "no longer reported", track.view)
                track.state = CommState.GONE
            if change:
                changes.append(change)
        changes.extend(self._job_issues(snapshot, now, file))
        return changes

    def _track(self, view: CommView, now: float, file: str, detail: str | None = None) -> StateChange | None:
        previous = self.tracks.get(view.comm)
        if previous is not None and previous.state is not CommState.GONE and previous.view.signature == view.signature:
            unchanged = previous.unchanged + 1
        else:
            unchanged = 1
        moved = previous is not None and previous.state is not CommState.GONE and unchanged == 1
        if not view.disagree:
            state = CommState.OK
        elif unchanged >= self.o.stuck_after:
            state = CommState.STUCK
        elif moved:
            state = CommState.SKEW
        else:
            state = CommState.MISMATCH
        if state is CommState.STUCK:
            self.summary.stuck.add(view.comm)
        if state is CommState.SKEW or (state is CommState.OK and previous is not None
                                       and previous.state in (CommState.MISMATCH, CommState.SKEW)):
            self.summary.transient.add(view.comm)
        if view.missing:
            self.summary.missing.setdefault(view.comm, set()).update(view.missing)
        if view.dead:
            self.summary.dead.setdefault(view.comm, set()).update(view.dead)
        text = detail if detail is not None else self._detail(view, state, unchanged, previous)
        if previous is None:
            self.tracks[view.comm] = _Track(view, state, unchanged)
            if state is CommState.OK and view.comm.startswith("#"):
                return None  # an OK comm of a text report has no hash: nothing worth a line
            return StateChange(self.poll_count, now, view.comm, None, state.value, text, file, view.missing,
                               view.dead, view.counts)
        change = None
        if (previous.state, previous.view.missing, previous.view.dead) != (state, view.missing, view.dead):
            change = self._change(previous, view.comm, state, now, file, text, view)
        previous.view, previous.state, previous.unchanged = view, state, unchanged
        previous.polls += 1
        return change

    def _change(self, track: _Track, comm: str, state: CommState, now: float, file: str, detail: str,
                view: CommView) -> StateChange | None:
        if track.state is state and track.view.missing == view.missing and track.view.dead == view.dead:
            return None
        return StateChange(self.poll_count, now, comm, track.state.value, state.value, detail, file, view.missing,
                           view.dead, view.counts)

    def _detail(self, view: CommView, state: CommState, unchanged: int, previous: _Track | None) -> str:
        parts = []
        counts = view.describe_counts()
        if counts:
            parts.append(counts)
        if view.missing:
            parts.append(f"{_ranks(view.missing)} missing")
        if view.dead:
            parts.append(f"{_ranks(view.dead)} dead")
        by_error: dict[str, list[int]] = {}
        for rank, error in sorted(view.async_errors.items()):
            by_error.setdefault(error, []).append(rank)
        parts.extend(f"{_ranks(ranks)} report {error}" for error, ranks in by_error.items())
        if state is CommState.STUCK:
            parts.append(f"unchanged for {unchanged} poll{'' if unchanged == 1 else 's'}")
        elif state is CommState.SKEW:
            parts.append("counts moving: transient")
        elif state is CommState.OK and previous is not None and previous.state in (CommState.MISMATCH,
                                                                                    CommState.SKEW):
            parts.append("counts moved and agree: the skew was transient")
        elif state is CommState.OK and previous is not None and previous.state is CommState.STUCK:
            parts.append("recovered")
        return "; ".join(parts)

    def _job_issues(self, snapshot: RasSnapshot, now: float, file: str) -> list[StateChange]:
        """Job-level INCOMPLETE and DEAD (processes, not ranks of one comm)."""
        current = {i.kind: tuple(sorted(i.pids)) for i in snapshot.issues
                   if i.comm is None and i.kind in ("INCOMPLETE", "DEAD")}
        changes = []
        for kind in sorted(set(current) | set(self.job_issues)):
            before, after = self.job_issues.get(kind), current.get(kind)
            if before == after:
                continue
            label = {"INCOMPLETE": "processes missing", "DEAD": "processes dead"}[kind]
            detail = f"pids {', '.join(map(str, after))}" if after else "none"
            changes.append(StateChange(self.poll_count, now, "job", label if before else None,
                                       label if after else "ok", f"{label}: {detail}", file))
        self.job_issues = current
        return changes

    # -- the loop ---------------------------------------------------------------------------------------------

    def run(
        self,
        on_change: Callable[[StateChange], None],
        on_retry: Callable[[str, float, int], None] = lambda error, delay, attempt: None,
        on_poll: Callable[[RasWatcher], None] = lambda watcher: None,
        on_event: Callable[[bytes], None] = lambda event: None,
        on_note: Callable[[str], None] = lambda text: None,
        stop: threading.Event | None = None,
    ) -> WatchSummary:
        """Poll every `interval` until `polls` good replies, `stop`, or `max_failures` failures in a row."""
        stop = stop or threading.Event()
        failures = 0
        try:
            while not stop.is_set():
                started = time.monotonic()
                try:
                    changes = self.poll()
                except RasReplyError as e:
                    failures += 1
                    self.summary.failures += 1
                    self.summary.last_error = str(e)
                    if self.o.max_failures and failures >= self.o.max_failures:
                        self.summary.gave_up = str(e)
                        break
                    delay = min(self.o.retry * 2 ** (failures - 1), self.o.retry_cap)
                    on_retry(str(e), delay, failures)
                    stop.wait(delay)
                    continue
                failures = 0
                for change in changes:
                    on_change(change)
                on_poll(self)
                self._start_monitor(on_note, stop)
                for event in self._take_events():
                    on_event(event)
                if self.o.polls is not None and self.summary.polls_ok >= self.o.polls:
                    break
                stop.wait(max(0.0, self.o.interval - (time.monotonic() - started)))
        finally:
            stop.set()  # ends the monitor thread
            if self._monitor_thread is not None:
                self._monitor_thread.join(timeout=2.0)
            for event in self._take_events():
                on_event(event)
        return self.summary

    def _start_monitor(self, on_note: Callable[[str], None], stop: threading.Event) -> None:
        if not self.o.monitor or self._monitor_decided:
            return
        self._monitor_decided = True
        version = self.summary.nccl_version
        if version is not None and version < (2, 29):
            on_note(f"MONITOR needs NCCL 2.29 or newer; the server runs {'.'.join(map(str, version))}: "
                    "polling only")
            return
        self._monitor_thread = threading.Thread(target=self._monitor, args=(on_note, stop), daemon=True,
                                                name="ras-monitor")
        self._monitor_thread.start()

    def _monitor(self, on_note: Callable[[str], None], stop: threading.Event) -> None:
        try:
            with open(self.out / "ras_monitor.txt", "ab", buffering=0) as sink:
                for event in self.client.monitor("lifecycle", stop):
                    sink.write(event + b"\n")
                    with self._events_lock:
                        self._events.append(event)
        except RasReplyError as e:
            on_note(f"MONITOR stopped: {e}")

    def _take_events(self) -> list[bytes]:
        with self._events_lock:
            events, self._events = self._events, []
        return events


def _ranks(ranks: Sequence[int]) -> str:
    listed = ", ".join(str(r) for r in ranks)
    return f"rank {listed}" if len(ranks) == 1 else f"ranks {listed}"
