"""A NCCL RAS client that speaks the wire protocol itself (no `ncclras` binary needed).

Protocol (NCCL 2.24+, client protocol 2; see nccl_formats.md §1): plain TCP text on port 28028 of the node,
commands end in `\\n`, single-line replies end in `\\n`, and a STATUS report ends when the server closes the socket:

    -> CLIENT PROTOCOL 2      <- SERVER PROTOCOL 2
    -> TIMEOUT 5              <- OK                  (leg timeout of the RAS collective, seconds)
    -> SET FORMAT json        <- OK | ERROR: ...     (2.28.7+; older servers: text)
    -> STATUS                 <- the report, then EOF (one STATUS per connection)
    -> MONITOR lifecycle      <- OK, then one event per peer change until either side closes (2.29+)

Every socket operation has a timeout and a reply has a size limit, so a server that stalls, trickles, closes
mid-reply or talks garbage raises `RasReplyError` instead of hanging. Loopback by default: the RAS port has no
authentication either.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from dataclasses import dataclass
from collections.abc import Iterator

from ..errors import LiveError, printable

RAS_PORT = 28028
CLIENT_PROTOCOL = 2
MAX_REPLY_BYTES = 64 << 20
MAX_EVENT_BYTES = 1 << 20  # one MONITOR event (real ones are a few hundred bytes)
_MAX_LINE = 4096
# NCCL 2.28.7/2.28.9 forget the comma after "nvml_dev" in missing_ranks[] (fixed in 2.29.2).
_SPACE = re.compile(r"\s*")
_MISSING_COMMA = re.compile(r'("nvml_dev": -?\d+)(\s*\n\s*"status")')


class RasReplyError(LiveError):
    """The RAS server did not give a usable reply: unreachable, stalled, closed early, or not RAS at all."""


@dataclass(frozen=True)
class RasReply:
    """One STATUS report as it came over the wire (the handshake lines not included)."""

    data: bytes
    format: str  # "json" | "text"
    server_protocol: int | None
    elapsed: float  # seconds from connect to EOF

    @property
    def nccl_version(self) -> tuple[int, ...] | None:
        """(2, 28, 9) from the text header or the JSON `nccl_version`, when present."""
        head = self.data[:512].decode("utf-8", "replace")
        match = re.search(r'(?:NCCL version |"nccl_version":\s*")(\d+)\.(\d+)\.(\d+)', head)
        return tuple(int(g) for g in match.groups()) if match else None


class RasClient:
    """Talks to one RAS endpoint. `json_supported` is learnt on the first `SET FORMAT` and remembered."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = RAS_PORT,
        *,
        connect_timeout: float = 2.0,
        collective_timeout: int = 5,
        read_timeout: float | None = None,
        fmt: str = "auto",
        verbose: bool = False,
        max_bytes: int = MAX_REPLY_BYTES,
    ) -> None:
        if fmt not in ("auto", "json", "text"):
            raise LiveError(f"RAS format must be auto, json or text, not {fmt!r}")
        self.host, self.port = host, port
        self.connect_timeout = connect_timeout
        self.collective_timeout = int(collective_timeout)
        # ncclras waits 1 + T + 5 s for a report (T: the leg timeout); the server's hard cap is T + 5 s. Both
        # timeouts are wall-clock and total: connecting and the handshake together get connect_timeout, the
        # report (from STATUS to its end) read_timeout, so a server that trickles a byte a second cannot stretch
        # a poll past connect_timeout + read_timeout.
        self.read_timeout = read_timeout if read_timeout is not None else self.collective_timeout + 6.0
        self.fmt, self.verbose, self.max_bytes = fmt, verbose, max_bytes
        self.json_supported: bool | None = None if fmt == "auto" else fmt == "json"

    @property
    def address(self) -> str:
        """`host:port`, for messages."""
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def status(self) -> RasReply:
        """One STATUS (or VERBOSE STATUS) report; RasReplyError when none could be had."""
        started = time.monotonic()
        with self._connect() as conn:
            conn.deadline = started + self.connect_timeout
            protocol = conn.handshake(self.collective_timeout)
            fmt = self._set_format(conn)
            conn.send("VERBOSE STATUS" if self.verbose else "STATUS")
            conn.deadline = time.monotonic() + self.read_timeout
            data = conn.read_to_eof(max_bytes=self.max_bytes)
        check_report(data, fmt, self.address)
        return RasReply(data, fmt, protocol, time.monotonic() - started)

    def monitor(self, groups: str = "lifecycle", stop: threading.Event | None = None) -> Iterator[bytes]:
        """MONITOR events (2.29+), one per item (a text line, or one JSON object), until `stop` or EOF."""
        with self._connect() as conn:
            conn.deadline = time.monotonic() + self.connect_timeout
            conn.handshake(self.collective_timeout)
            fmt = self._set_format(conn)
            conn.send(f"MONITOR {groups}")
            answer = conn.line()
            if answer != "OK":
                raise RasReplyError(f"RAS server at {self.address} refused MONITOR: {_quoted(answer[:200])}",
                                    hint="MONITOR needs NCCL 2.29 or newer")
            yield from conn.events(fmt, stop)

    def _connect(self) -> _Connection:
        try:
            sock = socket.create_connection((self.host, self.port), timeout=self.connect_timeout)
        except OSError as e:
            reason = "timed out" if isinstance(e, socket.timeout) else (e.strerror or str(e))
            raise RasReplyError(f"cannot connect to the RAS server at {self.address}: {reason}",
                                hint="is a NCCL job (2.24+, NCCL_RAS_ENABLE=1) running on this node?") from e
        return _Connection(sock, self.address)

    def _set_format(self, conn: _Connection) -> str:
        if self.json_supported is False:
            return "text"
        conn.send("SET FORMAT json")
        answer = conn.line()
        if answer == "OK":
            self.json_supported = True
            return "json"
        if answer.startswith("ERROR"):
            if self.fmt == "json":
                raise RasReplyError(f"RAS server at {self.address} cannot send JSON: {answer[:200]}",
                                    hint="JSON needs NCCL 2.28.7 or newer; use --format text")
            self.json_supported = False
            return "text"
        raise RasReplyError(f"RAS server at {self.address} answered SET FORMAT with {_quoted(answer[:200])}")


class _Connection:
    """A socket with a line reader; every read has a timeout."""

    def __init__(self, sock: socket.socket, address: str) -> None:
        self.sock, self.address, self.buffer = sock, address, b""
        self.deadline = float("inf")  # wall-clock end of what is being read (set by the client per phase)

    def __enter__(self) -> _Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()

    def send(self, command: str) -> None:
        try:
            self.sock.sendall(command.encode("ascii") + b"\n")
        except OSError as e:
            raise RasReplyError(f"RAS server at {self.address} closed the connection: {e.strerror or e}") from e

    def handshake(self, collective_timeout: int) -> int:
        self.send(f"CLIENT PROTOCOL {CLIENT_PROTOCOL}")
        first = self.line()
        match = re.fullmatch(r"SERVER PROTOCOL (\d+)", first)
        if not match:
            raise RasReplyError(f"{self.address} is not a NCCL RAS server: it answered {_quoted(first[:120])}")
        self.send(f"TIMEOUT {collective_timeout}")
        answer = self.line()
        if answer != "OK":
            raise RasReplyError(f"RAS server at {self.address} answered TIMEOUT with {_quoted(answer[:120])}")
        return int(match.group(1))

    def line(self) -> str:
        """One reply line (without `\\n`, `\\r` stripped), before the deadline."""
        while b"\n" not in self.buffer:
            if len(self.buffer) > _MAX_LINE:
                raise RasReplyError(f"RAS server at {self.address} sent a {len(self.buffer)}-byte line; not RAS")
            chunk = self._recv(self.deadline, "a reply line")
            if not chunk:
                raise RasReplyError(f"RAS server at {self.address} closed the connection during the handshake")
            self.buffer += chunk
        raw, _, self.buffer = self.buffer.partition(b"\n")
        try:
            return raw.decode("ascii").rstrip("\r")
        except UnicodeDecodeError:
            raise RasReplyError(f"RAS server at {self.address} sent bytes that are not RAS: {_quoted(raw[:60])}") from None

    def read_to_eof(self, max_bytes: int) -> bytes:
        """Everything until the server closes, before the deadline (the whole report, however it trickles)."""
        chunks, size = [self.buffer], len(self.buffer)
        self.buffer = b""
        while True:
            chunk = self._recv(self.deadline, "the report")
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            size += len(chunk)
            if size > max_bytes:
                raise RasReplyError(f"RAS server at {self.address} sent more than {max_bytes} bytes; giving up")

    def _recv(self, deadline: float, what: str) -> bytes:
        left = deadline - time.monotonic()
        if left <= 0:
            raise RasReplyError(f"RAS server at {self.address} stalled: no complete {what} in time")
        self.sock.settimeout(left)
        try:
            return self.sock.recv(1 << 16)
        except TimeoutError:
            raise RasReplyError(f"RAS server at {self.address} stalled: no complete {what} within "
                                f"{left:.1f}s") from None
        except OSError as e:
            raise RasReplyError(f"RAS server at {self.address} broke the connection: {e.strerror or e}") from e

    def events(self, fmt: str, stop: threading.Event | None) -> Iterator[bytes]:
        """MONITOR events as they come. Each byte is looked at a bounded number of times: lines are searched from
        where the last search stopped, a JSON object is decoded only when a `}` arrived, and an event longer
        than MAX_EVENT_BYTES is an error (an endless one was decoded again on every chunk: quadratic)."""
        decoder = json.JSONDecoder()
        pending = bytearray()
        searched = 0  # bytes of `pending` known to hold no line break (text mode)
        while stop is None or not stop.is_set():
            try:
                self.sock.settimeout(0.5)
                chunk = self.buffer or self.sock.recv(1 << 16)
                self.buffer = b""
            except TimeoutError:
                continue
            except OSError as e:
                raise RasReplyError(f"RAS monitor at {self.address} broke: {e.strerror or e}") from e
            if not chunk:
                return
            pending += chunk
            if fmt == "json" and b"}" in chunk:
                text, pos = pending.decode("utf-8", "replace"), 0
                while True:
                    pos = _SPACE.match(text, pos).end()
                    try:
                        _, end = decoder.raw_decode(text, pos)
                    except json.JSONDecodeError:
                        break  # incomplete object (or nothing left): wait for more
                    yield text[pos:end].encode()
                    pos = end
                pending = bytearray(text[pos:].encode())
            else:
                while True:
                    cut = pending.find(b"\n", searched)
                    if cut < 0:
                        searched = len(pending)
                        break
                    line = bytes(pending[:cut]).decode("utf-8", "replace").rstrip("\r")
                    del pending[:cut + 1]
                    searched = 0
                    if line.strip():
                        yield line.encode()
            if len(pending) > MAX_EVENT_BYTES:
                raise RasReplyError(f"RAS monitor at {self.address} sent an event of more than {MAX_EVENT_BYTES} "
                                    f"bytes; giving up")


def check_report(data: bytes, fmt: str, address: str = "the RAS server") -> None:
    """Raise RasReplyError unless `data` looks like one complete STATUS report of that format."""
    if not data.strip():
        raise RasReplyError(f"{address} closed the connection without a report")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise RasReplyError(f"{address} sent a report that is not UTF-8 text; not RAS") from None
    if fmt == "json":
        try:
            document = json.loads(repair_json(text))
        except json.JSONDecodeError as e:
            raise RasReplyError(f"{address} sent incomplete or invalid JSON ({e.msg} at line {e.lineno}); "
                                "closed mid-reply?") from None
        if not isinstance(document, dict) or "communicators" not in document:
            raise RasReplyError(f"{address} sent JSON that is not a RAS report")
        return
    lines = [line.strip() for line in text.splitlines()]
    if not any(line.startswith(("NCCL version", "Communicators", "Job summary")) for line in lines[:40]):
        raise RasReplyError(f"{address} sent text that is not a RAS report: {_quoted(text[:80])}")
    if "Warnings" not in lines:  # the last section of every report, printed even when empty
        raise RasReplyError(f"{address} closed the connection mid-report (no Warnings section)")


def repair_json(text: str) -> str:
    """Add the comma NCCL 2.28.7/2.28.9 leave out after `"nvml_dev"` in missing ranks."""
    return _MISSING_COMMA.sub(r"\1,\2", text)


def _quoted(data: str | bytes) -> str:
    """What a server sent, as text in backticks (`\x07` for a control byte, U+FFFD for bytes that are not UTF-8),
    never a Python repr such as `b'\x07...'`."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    return f"`{printable(text)}`"
