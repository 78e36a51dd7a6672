"""Run a command in a real terminal: a detached tmux pane of a given size, on a private tmux server.

`run_in_pane` returns the pane as a person sees it (`shown`: one row per terminal line) and with the rows the
terminal wrapped joined again (`joined`: a row longer than the pane is a line that overflowed it). Tests that use
it are skipped where tmux is not installed.
"""

from __future__ import annotations

import itertools
import shlex
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

TMUX = shutil.which("tmux")
needs_tmux = pytest.mark.skipif(TMUX is None, reason="tmux not installed (apt-get install -y tmux)")
DONE = "__pane_done__"
_SERVERS = itertools.count()


@dataclass
class Pane:
    """What a command left in the pane, and its exit code."""

    shown: list[str]
    joined: list[str]
    code: int

    def text(self) -> str:
        return "\n".join(self.shown)


def _tmux(socket: Path, *args: str) -> str:
    return subprocess.run([TMUX, "-S", str(socket), *args], capture_output=True, text=True, check=True,
                          timeout=30).stdout


def run_in_pane(tmp_path: Path, command: list[str], width: int, height: int = 400, timeout: float = 60.0,
                cwd: Path | None = None) -> Pane:
    """Run `command` in a `width` x `height` pane (rows past the height are read from the scrollback)."""
    socket = tmp_path / f"tmux-{next(_SERVERS)}.sock"  # one server per run: a killed one may linger a moment
    # COLUMNS/LINES from the test's own environment would override the pane's size.
    line = f"cd {shlex.quote(str(cwd or Path.cwd()))} && env -u COLUMNS -u LINES {shlex.join(command)}; " \
           f"echo {DONE} $?; sleep 600"
    _tmux(socket, "new-session", "-d", "-s", "t", "-x", str(width), "-y", str(height), line)
    try:
        deadline = time.monotonic() + timeout
        while True:
            shown = _tmux(socket, "capture-pane", "-p", "-S", "-", "-E", "-", "-t", "t").splitlines()
            done = [row for row in shown if row.startswith(DONE)]
            if done or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        joined = _tmux(socket, "capture-pane", "-p", "-J", "-S", "-", "-E", "-", "-t", "t").splitlines()
    finally:
        subprocess.run([TMUX, "-S", str(socket), "kill-server"], capture_output=True, timeout=30, check=False)
    assert done, f"{shlex.join(command)} did not finish in {timeout}s:\n" + "\n".join(shown)
    end = shown.index(done[0])
    end_joined = next(i for i, row in enumerate(joined) if row.startswith(DONE))
    return Pane([row.rstrip() for row in shown[:end]], [row.rstrip() for row in joined[:end_joined]],
                int(done[0].split()[1]))


def broken_tokens(pane: Pane, tokens: set[str]) -> list[str]:
    """The tokens (paths, `file:line`s, hashes) that no single row of the pane shows whole."""
    return sorted(t for t in tokens if not any(t in row for row in pane.shown))


def overflowing_rows(pane: Pane, width: int) -> list[str]:
    """Rows longer than the pane: lines the terminal had to wrap, wherever it happened to cut them."""
    return [row for row in pane.joined if len(row) > width]
