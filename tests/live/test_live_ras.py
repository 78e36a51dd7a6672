"""The RAS watcher against a fake RAS server on a real loopback socket, replaying real NCCL 2.28.9 replies."""

from __future__ import annotations

import json
import threading
import time

import pytest
from click.testing import CliRunner
from fake_ras import FakeRasServer, Reply, scenario
from live_helpers import FAST, REAL, changes, free_port, watch

from ncclforensics.live.cli import live
from ncclforensics.live.ras_client import RasClient, RasReplyError
from ncclforensics.live.ras_watch import RasWatcher, WatchOptions

pytestmark = pytest.mark.live

@pytest.mark.parametrize("json_format", [True, False], ids=["json", "text"])
def test_unchanged_disagreeing_counts_are_stuck(tmp_path, json_format):
    """extra-op-4rank q0, q1: rank 0 at AllReduce 50, ranks 1-3 at 49 in both replies: stuck (exit 1)."""
    with FakeRasServer(scenario("extra-op-4rank", "q0", "q1"), json=json_format) as server:
        result, lines = watch(server.port, tmp_path / "ras", "--polls", "2", "--stuck-after", "2")
    assert result.exit_code == 1, result.output
    comm = "0x1715b7bd1b8fda9e"
    assert changes(lines, comm) == [(None, "mismatch"), ("mismatch", "stuck")]
    stuck = [c for c in lines if c.get("to") == "stuck"][0]
    assert "rank 0 at 50" in stuck["detail"] and "ranks 1, 2, 3 at 49" in stuck["detail"]
    assert stuck["counts"]["0"]["AllReduce"] == 50 and stuck["counts"]["3"]["AllReduce"] == 49
    summary = lines[-1]
    assert summary["kind"] == "summary" and summary["stuck"] == [comm] and summary["polls"] == 2
    # Every reply is saved byte for byte, and named as evidence.
    kind = "ras_json" if json_format else "ras_status"
    for n, q in enumerate(("q0", "q1")):
        saved = tmp_path / "ras" / f"ras_{n}.txt"
        assert saved.read_bytes() == (REAL / "extra-op-4rank" / f"{kind}_{q}.txt").read_bytes()
    assert "SET FORMAT json" in server.commands and "TIMEOUT 1" in server.commands
    assert server.commands[0] == "CLIENT PROTOCOL 2"


@pytest.mark.parametrize("json_format", [True, False], ids=["json", "text"])
def test_moving_counts_are_transient(tmp_path, json_format):
    """transient-skew q0 -> q1: a one-op skew that resolves: transient, not stuck (exit 0)."""
    with FakeRasServer(scenario("transient-skew", "q0", "q1"), json=json_format) as server:
        result, lines = watch(server.port, tmp_path / "ras", "--polls", "3", "--stuck-after", "2")
    assert result.exit_code == 0, result.output
    comm = "0x5eab805e14595f52"
    assert changes(lines, comm) == [(None, "mismatch"), ("mismatch", "ok")]
    assert lines[-1]["transient"] == [comm] and lines[-1]["stuck"] == []


def test_skew_that_keeps_moving_is_never_stuck(tmp_path):
    skew = scenario("transient-skew", "q0")[0]
    moved = Reply(json=skew.json.replace(b'"AllReduce": 273', b'"AllReduce": 280').replace(
        b'"AllReduce": 272', b'"AllReduce": 279'))
    with FakeRasServer([skew, moved, skew]) as server:
        result, lines = watch(server.port, tmp_path / "ras", "--polls", "3", "--stuck-after", "2")
    assert result.exit_code == 0, result.output
    assert changes(lines) == [(None, "mismatch"), ("mismatch", "skew")]


def test_missing_rank_reported(tmp_path):
    """killed-rank: rank 1 missing (JSON with NCCL 2.28.9's missing comma), the others waiting: stuck."""
    with FakeRasServer(scenario("killed-rank", "q0", "q1")) as server:
        result, lines = watch(server.port, tmp_path / "ras", "--polls", "2", "--stuck-after", "2")
    assert result.exit_code == 1, result.output
    first = lines[0]
    assert first["missing_ranks"] == [1] and "rank 1 missing" in first["detail"]
    assert "ranks 0, 2 report Remote process error" in first["detail"]
    assert lines[-1]["missing_ranks"] == {"0xd5dc471d2873616f": [1]}


def test_human_output(tmp_path):
    with FakeRasServer(scenario("extra-op-4rank", "q0", "q1")) as server:
        result = CliRunner().invoke(live, ["ras", "--port", str(server.port), "--out", str(tmp_path / "r"), *FAST,
                                           "--polls", "3", "--stuck-after", "2"])
    assert result.exit_code == 1
    assert "poll 2: comm 0x1715b7bd1b8fda9e: mismatch -> stuck (AllReduce: ranks 1, 2, 3 at 49, rank 0 at 50; " \
           "unchanged for 2 polls)" in result.stdout
    assert "STUCK: comm 0x1715b7bd1b8fda9e: counts unchanged while ranks disagree" in result.stdout


def test_slow_reply_is_read_whole(tmp_path):
    slow = scenario("extra-op-4rank", "q0")[0]
    slow.chunk_delay = 0.05  # 14 chunks of 200 bytes, 50 ms apart
    with FakeRasServer([slow]) as server:
        result, lines = watch(server.port, tmp_path / "ras", "--polls", "1", "--read-timeout", "1")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "ras" / "ras_0.txt").read_bytes() == slow.json


@pytest.mark.parametrize("bad", [
    Reply(json=(REAL / "extra-op-4rank" / "ras_json_q0.txt").read_bytes(), cut=700),  # closes mid-reply
    Reply(stall=3.0),  # says nothing past the read timeout
    Reply(garbage=b"HTTP/1.1 400 Bad Request\r\n\r\n"),  # not RAS
    Reply(garbage=b"\xff\xfe\x00garbage\n" * 3),
], ids=["closed-mid-reply", "stall", "http", "binary"])
def test_bad_replies_are_retried(tmp_path, bad):
    good = scenario("extra-op-4rank", "q0", "q1")
    with FakeRasServer([bad, *good]) as server:
        started = time.monotonic()
        result, lines = watch(server.port, tmp_path / "ras", "--polls", "2", "--stuck-after", "2",
                              "--read-timeout", "0.5")
    assert result.exit_code == 1, result.output
    assert time.monotonic() - started < 5
    assert "retrying in 0.05s (failed poll 1): " in result.stderr
    assert lines[-1]["failed_polls"] == 1 and lines[-1]["stuck"] == ["0x1715b7bd1b8fda9e"]
    # Only good replies become evidence: ras_0 and ras_1, byte for byte.
    assert sorted(p.name for p in (tmp_path / "ras").iterdir()) == ["ras_0.txt", "ras_1.txt"]


def test_server_that_always_stalls_is_trouble(tmp_path):
    with FakeRasServer([Reply(stall=5.0)]) as server:
        started = time.monotonic()
        result, lines = watch(server.port, tmp_path / "ras", "--read-timeout", "0.3", "--max-failures", "2")
    assert result.exit_code == 2, result.output
    assert time.monotonic() - started < 3
    assert "stalled" in result.stderr and lines[-1]["gave_up"]


def test_nobody_listening_is_trouble(tmp_path):
    result, lines = watch(free_port(), tmp_path / "ras", "--max-failures", "2")
    assert result.exit_code == 2
    assert "cannot connect to the RAS server at 127.0.0.1:" in result.stderr
    assert lines[-1]["polls"] == 0


def test_out_dir_is_refused_through_dotdot_or_into_evidence(tmp_path):
    evidence = tmp_path / "incident"
    evidence.mkdir()
    (evidence / "nccl.host.1.log").write_text("x")
    runner = CliRunner()
    result = runner.invoke(live, ["ras", "--port", "1", "--out", str(evidence)])
    assert result.exit_code == 2 and "looks like an evidence folder" in result.stderr
    result = runner.invoke(live, ["ras", "--port", "1", "--out", f"{tmp_path}/x/../incident/ras"])
    assert result.exit_code == 2 and "refusing a path that goes through '..'" in result.stderr


def test_numbering_continues_in_a_folder_a_previous_watch_wrote(tmp_path):
    with FakeRasServer(scenario("extra-op-4rank", "q0")) as server:
        for _ in range(2):
            result, _ = watch(server.port, tmp_path / "ras", "--polls", "1")
            assert result.exit_code == 0
    assert sorted(p.name for p in (tmp_path / "ras").iterdir()) == ["ras_0.txt", "ras_1.txt"]


def test_client_falls_back_to_text_and_remembers():
    with FakeRasServer(scenario("extra-op-4rank", "q0", "q1"), json=False) as server:
        client = RasClient(port=server.port, collective_timeout=1)
        first = client.status()
        second = client.status()
    assert first.format == second.format == "text" and client.json_supported is False
    assert first.nccl_version == (2, 28, 9)
    assert server.commands.count("SET FORMAT json") == 1  # not asked again


def test_client_json_only_refuses_old_servers():
    with FakeRasServer(scenario("extra-op-4rank", "q0"), json=False) as server, \
            pytest.raises(RasReplyError, match="cannot send JSON"):
        RasClient(port=server.port, fmt="json").status()


def test_monitor_events_are_followed_and_saved(tmp_path):
    """MONITOR (NCCL 2.29+): concatenated pretty-printed JSON objects, split one per event."""
    events = [b'{\n  "timestamp": "2026-07-14 09:32:10",\n  "group": "LIFECYCLE",\n  "event": "PEER_DEAD",\n'
              b'  "peer": {"host": "10.0.0.12", "pid": 51008},\n  "details": ""\n}\n',
              b'{"timestamp": "2026-07-14 09:32:11", "group": "LIFECYCLE", "event": "PEER_NEW", "details": ""}\n']
    newer = [Reply(json=r.json.replace(b'"nccl_version": "2.28.9"', b'"nccl_version": "2.29.2"'))
             for r in scenario("extra-op-4rank", "q0", "q1")]
    with FakeRasServer(newer, monitor_events=events) as server:
        options = WatchOptions(out=tmp_path / "ras", port=server.port, interval=0.3, polls=3, monitor=True,
                               retry=0.05)
        (tmp_path / "ras").mkdir()
        seen: list[bytes] = []
        RasWatcher(options).run(on_change=lambda c: None, on_event=seen.append)
    assert [json.loads(e)["event"] for e in seen] == ["PEER_DEAD", "PEER_NEW"]
    assert (tmp_path / "ras" / "ras_monitor.txt").read_bytes().count(b'"event"') == 2


def test_stop_event_ends_a_watch_without_polls_limit(tmp_path):
    with FakeRasServer(scenario("extra-op-4rank", "q0")) as server:
        (tmp_path / "ras").mkdir()
        watcher = RasWatcher(WatchOptions(out=tmp_path / "ras", port=server.port, interval=0.05))
        stop = threading.Event()
        threading.Timer(0.5, stop.set).start()
        summary = watcher.run(on_change=lambda c: None, stop=stop)
    assert summary.polls_ok >= 2 and not summary.trouble


def test_ctrl_c_ends_the_watch_with_a_summary(tmp_path):
    """SIGINT: the watch stops at once, prints its summary and exits by what it saw (stuck: 1)."""
    import os
    import signal
    import subprocess
    import sys

    from live_helpers import REPO

    with FakeRasServer(scenario("extra-op-4rank", "q0", "q1")) as server:
        proc = subprocess.Popen([sys.executable, "-m", "ncclforensics.live.cli", "ras", "--port", str(server.port),
                                 "--out", str(tmp_path / "ras"), "--interval", "0.1", "--stuck-after", "2"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "PYTHONPATH": str(REPO)})
        deadline = time.monotonic() + 20
        while len(list((tmp_path / "ras").glob("ras_*.txt"))) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=10)
    assert proc.returncode == 1, stderr
    assert "STUCK: comm 0x1715b7bd1b8fda9e" in stdout and "polls (0 failed)" in stdout


def test_comm_table_renders(tmp_path):
    from rich.console import Console

    from ncclforensics.live.view import comm_table, summary_lines

    with FakeRasServer(scenario("extra-op-4rank", "q0", "q1")) as server:
        (tmp_path / "ras").mkdir()
        watcher = RasWatcher(WatchOptions(out=tmp_path / "ras", port=server.port, interval=0.01, polls=2,
                                          stuck_after=2))
        summary = watcher.run(on_change=lambda c: None)
    console = Console(record=True, width=120)
    console.print(comm_table(watcher))
    text = console.export_text()
    assert "0x1715b7bd1b8fda9e" in text and "stuck" in text and "AllReduce 49..50" in text
    assert summary_lines(summary)[1] == "STUCK: comm 0x1715b7bd1b8fda9e: counts unchanged while ranks disagree"
