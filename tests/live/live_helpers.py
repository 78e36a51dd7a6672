"""Helpers shared by the live tests (imported as a plain module: the tests tree has no packages)."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import signal
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

from click.testing import CliRunner
from fixture_paths import REAL  # noqa: F401 - the live tests import it from here

from ncclforensics.live.cli import live

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    """A loopback port nobody listens on (bind to 0, read it, release it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_cli_child(args: list[str], out_path: str) -> None:
    """Child body: `ncclforensics live ARGS` with stdout+stderr into a file; the exit code is the process's."""
    fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    # pytest replaced sys.stdout/sys.stderr in the parent; the child writes to the file itself.
    sys.stdout = sys.stderr = open(fd, "w", buffering=1, closefd=False)  # noqa: SIM115 - the child's own stdout
    code = 3
    try:
        from ncclforensics.live.cli import live

        live.main(args=args, prog_name="ncclforensics live", standalone_mode=True)
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    except BaseException as e:  # noqa: BLE001
        print(f"child crashed: {e!r}", flush=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run_sidecar_child(rank: int, journal: str, port: int, results) -> None:
    """Child body: one small-buffered sidecar rank; puts (rank, steps compared, alerted steps) on `results`."""
    from ncclforensics.live.sidecar import SidecarOptions, run_sidecar

    options = SidecarOptions(rank=rank, world_size=2, journal=Path(journal), port=port, follow=False, timeout=10,
                             chunk=64, max_pending=128)
    seen: list[int] = []
    result = run_sidecar(options, on_alert=lambda alert: seen.append(alert.step))
    results.put((rank, result.steps_compared, seen))


@dataclass
class CliProcess:
    """A forked `ncclforensics live ...` run."""

    process: mp.process.BaseProcess
    output: Path
    started: float

    def wait(self, timeout: float) -> int:
        self.process.join(timeout)
        if self.process.exitcode is None:
            self.process.kill()
            self.process.join(5)
            raise AssertionError(f"still running after {timeout}s:\n{self.text}")
        return self.process.exitcode

    @property
    def text(self) -> str:
        return self.output.read_text(errors="replace") if self.output.exists() else ""

    def stop(self) -> None:
        os.kill(self.process.pid, signal.SIGTERM)

    def kill(self) -> None:
        os.kill(self.process.pid, signal.SIGKILL)


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


FAST = ["--interval", "0.05", "--retry", "0.05", "--connect-timeout", "1", "--timeout", "1"]  # `live ras` timings


def watch(port: int, out, *more: str):
    """`live ras --json` against a server on `port`: the result and the JSON lines it printed."""
    result = CliRunner().invoke(live, ["ras", "--port", str(port), "--out", str(out), "--json", *FAST, *more])
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    return result, lines


def changes(lines, comm=None):
    """(from, to) of the watcher's state changes (of one comm)."""
    return [(c["from"], c["to"]) for c in lines if c["kind"] == "state_change" and (comm is None or c["comm"] == comm)]
