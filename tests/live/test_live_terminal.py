"""`live ras` on a real terminal (a tmux pane): failed polls show inside the live view, not as lines that
collide with the table, and nothing runs past the edge. And a watch that never got a reply leaves no folder."""

from __future__ import annotations

import re
import sys

import pytest
from click.testing import CliRunner
from fake_ras import FakeRasServer, Reply, scenario
from live_helpers import free_port
from tmux_pane import needs_tmux, overflowing_rows, run_in_pane

from ncclforensics.live.cli import live

pytestmark = pytest.mark.live
BOX = re.compile("[\u2500-\u257f]")


@needs_tmux
@pytest.mark.parametrize("width", [80, 200])
def test_retries_stay_inside_the_live_view(tmp_path, width):
    # Two replies that are no RAS, then the real stuck capture: the watch retries, recovers and finds it stuck.
    bad = [Reply(garbage=b"\x07\x00garbage"), Reply(garbage=b"HTTP/1.1 400 Bad Request\r\n\r\n")]
    with FakeRasServer(bad + scenario("extra-op-4rank", "q0", "q1")) as server:
        out = tmp_path / "ras"
        pane = run_in_pane(tmp_path, [sys.executable, "-m", "ncclforensics.cli", "live", "ras", "--port",
                                      str(server.port), "--out", str(out), "--interval", "0.3", "--retry", "0.3",
                                      "--polls", "2", "--stuck-after", "2", "--connect-timeout", "2"], width)
    text = pane.text()
    assert pane.code == 1, text  # a stuck communicator
    assert not overflowing_rows(pane, width), overflowing_rows(pane, width)
    # No retry line printed beside the table (the view shows the last one, and it is gone once replies come):
    assert "retrying" not in text and "b'" not in text, text
    assert not [row for row in pane.shown if BOX.search(row) and re.search(r"[a-z]{4,}", BOX.sub("", row))
                and "comm" not in row and "0x" not in row and "NCCL RAS" not in row], text
    assert "poll 2: comm 0x1715b7bd1b8fda9e: mismatch -> stuck" in text
    assert "2 polls (2 failed)" in text and "STUCK: comm 0x1715b7bd1b8fda9e" in text
    assert sorted(p.name for p in out.iterdir() if p.suffix == ".txt") == ["ras_0.txt", "ras_1.txt"]


@needs_tmux
def test_the_last_error_shows_in_the_view_until_the_watch_gives_up(tmp_path):
    port = free_port()
    pane = run_in_pane(tmp_path, [sys.executable, "-m", "ncclforensics.cli", "live", "ras", "--port", str(port),
                                  "--out", str(tmp_path / "ras"), "--retry", "0.2", "--max-failures", "3"], 80)
    text = " ".join(pane.text().split())
    assert pane.code == 2 and "0 polls, 3 failed" in text
    assert f"cannot connect to the RAS server at 127.0.0.1:{port}" in text
    assert not overflowing_rows(pane, 80)[:-1]  # (the last, stderr's one-line `error:`, may wrap)


def test_no_reply_leaves_no_capture_folder(tmp_path):
    out = tmp_path / "capture"
    result = CliRunner().invoke(live, ["ras", "--port", str(free_port()), "--out", str(out), "--retry", "0.05",
                                       "--max-failures", "2", "--connect-timeout", "1"])
    assert result.exit_code == 2 and "replies saved: none" in result.stdout
    assert not out.exists()
