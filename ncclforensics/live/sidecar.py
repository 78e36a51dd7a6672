"""The gate sidecar: one process per rank tails that rank's gate journal and compares every step across ranks.

The sidecars form their own gloo group through a torch TCPStore at HOST:PORT, which rank 0 hosts, bound to HOST
only (loopback by default). **TCPStore has no authentication**: anyone who can reach HOST:PORT can join or
disturb the group, so keep it on loopback or a private network.

Each round is lockstep on every rank, so no rank ever waits on a step another will never reach:

1. read new journal lines (at most `max_pending` steps held: back-pressure keeps memory bounded);
2. all-gather a head `(highest step read, lowest step held, at end of file, status)`: every rank learns the max
   common step, and whether a peer is in trouble or leaving;
3. all-gather the decisions of up to `chunk` steps from the lowest held step up to the max common step, compare
   them, and drop them (a million steps cost a few hundred exchanges and constant memory).

A peer that dies breaks the gloo connection (reported at once); one that hangs is reported when the gloo timeout
expires. Idle rounds repeat every `interval` seconds, so both are seen within `interval + timeout`.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any
from collections.abc import Callable

from ..errors import LiveError, require
from .guard import minority
from .journal_tail import GateLine, GateLineParser, JournalTail
from .journal_writer import JournalWriter

DEFAULT_PORT = 29517
_NO_STEP = -1
_NO_LOW = 1 << 62
_OK, _TROUBLE, _LEAVING = 0, 1, 2
_HEAD = 4  # hi, lo, eof, status
_ROW = 7  # present, decision (1 pass / 0 skip), seq, proposed_pass_count, sched_count, fits, md_none
_NONE = -1


@dataclass(frozen=True)
class SidecarOptions:
    """Everything one sidecar needs; the same `world_size`, `host`, `port` and `follow` on every rank."""

    rank: int
    world_size: int
    journal: Path
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    alerts: Path | None = None
    follow: bool = True
    timeout: float = 30.0
    interval: float = 0.2  # seconds between idle rounds (follow mode)
    chunk: int = 4096  # steps compared per exchange
    max_pending: int = 16384  # steps held before reading pauses


@dataclass(frozen=True)
class GateAlert:
    """Ranks took different gate decisions at one step."""

    step: int
    outlier_ranks: tuple[int, ...]
    decisions: dict[int, dict[str, Any]]
    time: float
    reporter: int

    def as_dict(self) -> dict[str, Any]:
        """The alert as one JSON line of `--alerts`."""
        return {"step": self.step, "kind": "gate_disagreement", "outlier_ranks": list(self.outlier_ranks),
                "decisions": {str(r): d for r, d in sorted(self.decisions.items())}, "time": self.time,
                "rank": self.reporter}

    def describe(self) -> str:
        """One human line: `step 5: gate disagreement: rank 0 pass; ranks 1, 2, 3 skip (outliers: rank 0)`."""
        by_choice: dict[str, list[int]] = {}
        for rank, d in sorted(self.decisions.items()):
            by_choice.setdefault(str(d.get("decision")), []).append(rank)
        sides = "; ".join(f"{_ranks(ranks)} {choice}" for choice, ranks in by_choice.items())
        return f"step {self.step}: gate disagreement: {sides} (outliers: {_ranks(self.outlier_ranks)})"


@dataclass
class SidecarResult:
    """What one sidecar saw."""

    steps_compared: int = 0
    disagreements: int = 0
    incomplete_steps: int = 0  # steps some ranks journaled and others skipped
    late_lines: int = 0  # lines for steps already compared (a replayed or restarted journal)
    uncompared: dict[int, tuple[int, int]] = field(default_factory=dict)  # rank -> (last compared, last journaled)


def parse_store(text: str) -> tuple[str, int]:
    """`HOST:PORT`, `[v6]:PORT` or `:PORT` (loopback) into (host, port)."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise LiveError(f"--store {text!r}: expected HOST:PORT")
    host = host.strip("[]") or "127.0.0.1"
    return host, int(port)


def run_sidecar(
    options: SidecarOptions,
    on_alert: Callable[[GateAlert], None] | None = None,
    on_note: Callable[[str], None] | None = None,
    stop: threading.Event | None = None,
) -> SidecarResult:
    """Join the sidecar group and compare steps until the journals end (no follow) or `stop` is set.

    Raises LiveError for trouble: the store unreachable, a peer missing or gone past the timeout, an unreadable
    journal line (`path:line: ...`), or a peer reporting its own trouble.
    """
    if not 0 <= options.rank < options.world_size:
        raise LiveError(f"--rank {options.rank} is not in 0..{options.world_size - 1}")
    group = _SidecarGroup(options)
    try:
        return _Loop(options, group, on_alert or (lambda a: None), on_note or (lambda n: None), stop).run()
    finally:
        group.close()


class _SidecarGroup:
    """A gloo group of the sidecars, through a TCPStore that rank 0 hosts bound to HOST only."""

    def __init__(self, options: SidecarOptions) -> None:
        # One wall-clock deadline for joining, however many steps it takes: TCPStore's client alone retries once
        # after its timeout and a back-off (10 s became 25.6 s), so the store is first reached with plain
        # connects, and each step gets only what is left.
        torch = require("torch", "live")
        deadline = time.monotonic() + options.timeout  # from here: importing torch is no peer's fault
        dist = torch.distributed
        self.torch, self.world, self.timeout = torch, options.world_size, options.timeout
        delta = timedelta(seconds=options.timeout)
        where = f"{options.host}:{options.port}"
        unreachable = f"cannot reach the sidecar store at {where} within {options.timeout:g}s"
        hint = "start rank 0 first, on HOST, with the same --store"
        try:
            if options.rank == 0:
                listen_fd = _listen(options.host, options.port)
                store = dist.TCPStore(options.host, options.port, options.world_size, True, timeout=delta,
                                      wait_for_workers=False, master_listen_fd=listen_fd)
            else:
                _wait_for_listener(options.host, options.port, deadline, unreachable, hint)
                store = _before(deadline, unreachable, hint, lambda: dist.TCPStore(
                    options.host, options.port, options.world_size, False, timeout=_left(deadline)))
        except (RuntimeError, OSError, ValueError) as e:
            raise LiveError(f"{unreachable}: {_first_line(e)}", hint=hint) from e
        self.store = store
        gloo_options = dist.ProcessGroupGloo._Options()
        gloo_options._timeout = delta  # the collectives' timeout too: a peer silent this long is trouble
        device_host = "127.0.0.1" if _is_loopback(options.host) else ""
        gloo_options._devices = [dist.ProcessGroupGloo.create_device(hostname=device_host)] if device_host else [
            dist.ProcessGroupGloo.create_default_device()]
        unformed = f"the sidecar group of {options.world_size} ranks did not form within {options.timeout:g}s"
        try:
            self.pg = _before(deadline, unformed, "a rank missing?", lambda: dist.ProcessGroupGloo(
                dist.PrefixStore("ncclforensics-sidecar", store), options.rank, options.world_size, gloo_options))
        except (RuntimeError, OSError) as e:
            raise LiveError(f"{unformed} (a rank missing?): {_first_line(e)}") from e

    def gather(self, flat: Any) -> Any:
        """All-gather a flat int64 numpy vector of the same length on every rank; (world, length) array back."""
        torch = self.torch
        mine = torch.from_numpy(flat)
        out = torch.empty(self.world * mine.numel(), dtype=torch.int64)
        views = list(out.view(self.world, mine.numel()).unbind(0))
        try:
            self.pg.allgather([views], [mine]).wait()
        except RuntimeError as e:
            raise LiveError(f"lost the sidecar group: a peer died or did not answer within {self.timeout:g}s "
                            f"({_first_line(e)})") from e
        return out.numpy().reshape(self.world, mine.numel())

    def close(self) -> None:
        """Drop the group (the store goes with this process)."""
        self.pg = None


class _Loop:
    def __init__(self, options: SidecarOptions, group: _SidecarGroup, on_alert: Callable[[GateAlert], None],
                 on_note: Callable[[str], None], stop: threading.Event | None) -> None:
        import numpy as np

        self.np = np
        self.o, self.group, self.on_alert, self.on_note, self.stop = options, group, on_alert, on_note, stop
        self.result = SidecarResult()
        self.tail = JournalTail(options.journal, options.follow)
        self.parser = GateLineParser()
        self._generation = 0
        self.alerts = JournalWriter(options.alerts) if options.alerts else None
        self.pending: dict[int, GateLine] = {}
        self.hi = _NO_STEP  # highest step read
        self.done = _NO_STEP  # highest step compared (the same on every rank)
        self._stall_since: float | None = None
        self._stall_noted = False
        self._late_noted = False

    def run(self) -> SidecarResult:
        np = self.np
        if self.o.follow and not self.o.journal.exists():
            self.on_note(f"{self.o.journal}: not there yet; waiting for it to appear")
        try:
            while True:
                trouble, read_any = self._read()
                leaving = self.stop is not None and self.stop.is_set()
                status = _TROUBLE if trouble else (_LEAVING if leaving else _OK)
                low = min(self.pending) if self.pending else _NO_LOW
                heads = self.group.gather(np.array([self.hi, low, int(self.tail.eof), status], dtype=np.int64))
                if trouble:
                    raise trouble
                troubled = [r for r in range(self.o.world_size) if heads[r, 3] == _TROUBLE]
                if troubled:
                    raise LiveError(f"sidecar rank {_ranks(troubled, word=False)} reported trouble; stopping")
                end, start = int(heads[:, 0].min()), int(heads[:, 1].min())
                exchanged = start <= end
                if exchanged:
                    self._exchange(start, min(end, start + self.o.chunk - 1))
                if (heads[:, 3] == _LEAVING).any():
                    return self._finish(heads)
                if not exchanged:
                    if not self.o.follow and all(heads[r, 2] for r in range(self.o.world_size) if heads[r, 0] == end):
                        return self._finish(heads)  # the ranks holding back the common step have no more lines
                    self._watch_stall(heads, end)
                    if not read_any:
                        time.sleep(self.o.interval)
        finally:
            self.tail.close()
            if self.alerts:
                self.alerts.close()

    def _read(self) -> tuple[LiveError | None, bool]:
        room = min(self.o.chunk, self.o.max_pending - len(self.pending))
        if room <= 0:
            return None, False
        try:
            lines = self.tail.read(room)
            for generation, lineno, raw in lines:
                if generation != self._generation:
                    self._generation = generation
                    self.parser.reset()
                line = self._parse(lineno, raw)
                if line is None:
                    continue
                if line.step <= self.done:
                    self.result.late_lines += 1
                    if not self._late_noted:
                        self._late_noted = True
                        self.on_note(f"{self.tail.where(lineno)}: step {line.step} was already compared; lines at "
                                     f"or below step {self.done} are ignored (journal restarted?)")
                    continue
                self.pending[line.step] = line
                if line.step > self.hi:
                    self.hi = line.step
            return None, bool(lines)
        except LiveError as e:
            return e, False

    def _parse(self, lineno: int, raw: bytes) -> GateLine | None:
        try:
            line = self.parser.parse(raw.decode("utf-8"))
        except UnicodeDecodeError:
            raise LiveError(f"{self.tail.where(lineno)}: not valid UTF-8; unreadable journal line") from None
        except ValueError as e:
            raise LiveError(f"{self.tail.where(lineno)}: unreadable journal line: {e}") from None
        if line is not None and line.rank is not None and line.rank != self.o.rank:
            raise LiveError(f"{self.tail.where(lineno)}: a line of rank {line.rank} in the journal of rank "
                            f"{self.o.rank}", hint="give each sidecar its own rank's journal")
        return line

    def _exchange(self, start: int, end: int) -> None:
        np = self.np
        count = end - start + 1
        rows = np.full((count, _ROW), _NONE, dtype=np.int64)
        rows[:, 0] = 0
        pop = self.pending.pop
        for i in range(count):
            line = pop(start + i, None)
            if line is not None:
                rows[i] = (1, line.decision == "pass", _opt(line.seq), _opt(line.proposed_pass_count),
                           _opt(line.sched_count), _opt(line.fits), _opt(line.md_none))
        every = self.group.gather(rows.reshape(-1)).reshape(self.o.world_size, count, _ROW)
        self.done = end
        present = every[:, :, 0].astype(bool)
        full = present.all(axis=0)
        self.result.incomplete_steps += int((present.any(axis=0) & ~full).sum())
        self.result.steps_compared += int(full.sum())
        decisions = every[:, :, 1]
        for i in np.nonzero(full & (decisions.min(axis=0) != decisions.max(axis=0)))[0]:
            self._alert(start + int(i), every[:, i, :])

    def _alert(self, step: int, rows: Any) -> None:
        decisions = {r: _decode(rows[r]) for r in range(self.o.world_size)}
        outliers = minority({r: d["decision"] for r, d in decisions.items()})
        alert = GateAlert(step, outliers, decisions, time.time(), self.o.rank)
        self.result.disagreements += 1
        if self.alerts:
            self.alerts.write(alert.as_dict())
        self.on_alert(alert)

    def _watch_stall(self, heads: Any, end: int) -> None:
        """Note once per stall when some ranks' journals stopped while others went on (follow mode)."""
        ahead = [r for r in range(self.o.world_size) if heads[r, 0] > end]
        if not ahead:
            self._stall_since, self._stall_noted = None, False
            return
        now = time.monotonic()
        if self._stall_since is None:
            self._stall_since = now
        elif not self._stall_noted and now - self._stall_since > max(self.o.timeout, 5.0):
            self._stall_noted = True
            behind = [r for r in range(self.o.world_size) if heads[r, 0] == end]
            self.on_note(f"{_ranks(behind)} journaled nothing past step {end} for {now - self._stall_since:.0f}s "
                         f"while {_ranks(ahead)} went on (up to step {int(heads[:, 0].max())})")

    def _finish(self, heads: Any) -> SidecarResult:
        for r in range(self.o.world_size):
            if heads[r, 0] > self.done:
                self.result.uncompared[r] = (self.done, int(heads[r, 0]))
        return self.result


def _listen(host: str, port: int) -> int:
    """A listening socket bound to HOST only (TCPStore alone would listen on every interface); its fd."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as e:
        raise LiveError(f"--store host {host!r}: {e.strerror}") from e
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(128)
    except OSError as e:
        sock.close()
        raise LiveError(f"cannot host the sidecar store on {host}:{port}: {e.strerror}") from e
    return sock.detach()  # TCPStore owns the fd from here


def _left(deadline: float) -> timedelta:
    """What is left of a deadline, at least 50 ms (torch refuses a zero timeout)."""
    return timedelta(seconds=max(deadline - time.monotonic(), 0.05))


def _wait_for_listener(host: str, port: int, deadline: float, message: str, hint: str) -> None:
    """Plain TCP connects until one is accepted or the deadline passes (then LiveError)."""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise LiveError(f"{message}: nothing accepts connections there", hint=hint)
        try:
            socket.create_connection((host, port), timeout=min(left, 1.0)).close()
            return
        except OSError:
            time.sleep(min(0.1, max(deadline - time.monotonic(), 0)))


def _before(deadline: float, message: str, hint: str, make: Callable[[], Any]) -> Any:
    """`make()` if it returns before the deadline, else LiveError (it is left to finish in a daemon thread: the
    command ends with trouble either way)."""
    box: list = []

    def run() -> None:
        try:
            box.append((True, make()))
        except BaseException as e:  # noqa: BLE001 - handed to the caller below
            box.append((False, e))

    thread = threading.Thread(target=run, daemon=True, name="sidecar-store")
    thread.start()
    thread.join(max(deadline - time.monotonic(), 0) + 0.2)
    if not box:
        raise LiveError(f"{message}: no answer", hint=hint)
    ok, value = box[0]
    if not ok:
        raise value
    return value


def _is_loopback(host: str) -> bool:
    return host in ("localhost", "::1") or host.startswith("127.")


def _opt(value: int | bool | None) -> int:
    return _NONE if value is None else int(value)


def _decode(row: Any) -> dict[str, Any]:
    names = ("seq", "proposed_pass_count", "sched_count")
    out: dict[str, Any] = {"decision": "pass" if row[1] == 1 else "skip"}
    for name, value in zip(names, row[2:5]):
        if value != _NONE:
            out[name] = int(value)
    for name, value in zip(("fits", "md_none"), row[5:7]):
        if value != _NONE:
            out[name] = bool(value)
    return out


def _ranks(ranks: Any, word: bool = True) -> str:
    ranks = [int(r) for r in ranks]
    listed = ", ".join(str(r) for r in ranks)
    if not word:
        return listed
    return f"rank {listed}" if len(ranks) == 1 else f"ranks {listed}"


def _first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return lines[0][:300] if lines else type(error).__name__
