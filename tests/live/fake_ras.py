"""A threaded fake NCCL RAS server on loopback that replays captured replies byte for byte.

Each connection follows the real protocol (nccl_formats.md §1): `CLIENT PROTOCOL n` -> `SERVER PROTOCOL 2`,
`TIMEOUT t` -> `OK`, `SET FORMAT json` -> `OK` (or `ERROR: Unknown command ...` when `json=False`), `STATUS` ->
the next scripted reply, then close. A script entry can misbehave: stall, close mid-reply, send garbage.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass
from fixture_paths import REAL


@dataclass
class Reply:
    """One scripted STATUS answer: `text` for text mode, `json` for JSON mode, and how to misbehave."""

    text: bytes = b""
    json: bytes = b""
    chunk_delay: float = 0.0  # seconds between 200-byte chunks (a slow server)
    stall: float = 0.0  # seconds of silence before anything is sent (past the client's read timeout: a stall)
    cut: int | None = None  # close after this many bytes (mid-reply)
    garbage: bytes | None = None  # answer every command with this instead


def scenario(name: str, *queries: str) -> list[Reply]:
    """Replies from a real capture: `scenario("extra-op-4rank", "q0", "q1")`."""
    folder = REAL / name
    return [Reply(text=(folder / f"ras_status_{q}.txt").read_bytes(), json=(folder / f"ras_json_{q}.txt").read_bytes())
            for q in queries]


class FakeRasServer:
    """`with FakeRasServer(replies) as server:` ... `server.port`; the last reply repeats once the script ends."""

    def __init__(self, replies: list[Reply], json: bool = True, monitor_events: list[bytes] | None = None) -> None:
        self.replies = list(replies)
        self.json = json
        self.monitor_events = monitor_events or []
        self.served = 0
        self.commands: list[str] = []
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self._sock.settimeout(0.2)
        self.port = self._sock.getsockname()[1]
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def __enter__(self) -> FakeRasServer:
        thread = threading.Thread(target=self._accept, daemon=True)
        thread.start()
        self._threads.append(thread)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=5)
        self._sock.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _next(self) -> Reply:
        with self._lock:
            reply = self.replies[min(self.served, len(self.replies) - 1)]
            self.served += 1
            return reply

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(5)
        buffer = b""
        fmt = "text"
        reply: Reply | None = None
        try:
            while not self._stop.is_set():
                while b"\n" not in buffer:
                    chunk = conn.recv(1024)
                    if not chunk:
                        return
                    buffer += chunk
                raw, _, buffer = buffer.partition(b"\n")
                command = raw.decode().strip()
                self.commands.append(command)
                upper = command.upper()
                if upper.startswith("CLIENT PROTOCOL"):
                    reply = self._next()
                    if reply.garbage is not None:
                        conn.sendall(reply.garbage)
                        return
                    conn.sendall(b"SERVER PROTOCOL 2\n")
                elif upper.startswith("TIMEOUT"):
                    conn.sendall(b"OK\n")
                elif upper.startswith("SET FORMAT"):
                    if self.json and upper.endswith("JSON"):
                        fmt = "json"
                        conn.sendall(b"OK\n")
                    else:
                        conn.sendall(f"ERROR: Unknown command {command}\n".encode())
                elif upper in ("STATUS", "VERBOSE STATUS"):
                    reply = reply or self._next()
                    self._send_report(conn, reply, fmt)
                    return
                elif upper.startswith("MONITOR"):
                    conn.sendall(b"OK\n")
                    for event in self.monitor_events:
                        conn.sendall(event)
                        time.sleep(0.05)
                    self._stop.wait(30)
                    return
                else:
                    conn.sendall(f"ERROR: Unknown command {command}\n".encode())
        except OSError:
            pass
        finally:
            conn.close()

    def _send_report(self, conn: socket.socket, reply: Reply, fmt: str) -> None:
        data = reply.json if fmt == "json" and reply.json else reply.text
        if reply.stall and self._stop.wait(reply.stall):
            return
        if reply.cut is not None:
            data = data[: reply.cut]
        if reply.chunk_delay:
            for start in range(0, len(data), 200):
                conn.sendall(data[start:start + 200])
                time.sleep(reply.chunk_delay)
        else:
            conn.sendall(data)
