"""The live mode against hostile peers on real loopback sockets: cut replies, trickling servers, endless events,
journal values out of range, a store that is not there. Every loop here is bounded by a timeout."""

from __future__ import annotations

import time

import pytest
from click.testing import CliRunner
from fake_ras import FakeRasServer, Reply, scenario
from live_helpers import changes, watch

from ncclforensics.live.cli import live

pytestmark = pytest.mark.live

@pytest.mark.parametrize("keep", ["Warnings\n========\n", "Warnings\n========\n\n#0-0 (1715b7bd1b8fda9e) MISMATCH\n",
                                  "  3 ranks have launched up to operation 49\n"], ids=["no-block", "heading", "half"])
def test_a_cut_text_reply_never_turns_a_stuck_comm_into_ok(tmp_path, keep):
    """A text reply cut after `Warnings` (no MISMATCH block) made the watcher say "mismatch -> ok (no longer
    listed with errors)" and call a stuck comm transient. A cut reply is kept as evidence and is a failed poll."""
    q0, q1 = scenario("extra-op-4rank", "q0", "q1")
    text = q1.text.decode()
    cut = Reply(text=text[: text.index(keep) + len(keep)].encode())
    with FakeRasServer([q0, cut, q1], json=False) as server:
        result, lines = watch(server.port, tmp_path / "ras", "--polls", "2", "--stuck-after", "2")
    assert result.exit_code == 1, result.output
    comm = "0x1715b7bd1b8fda9e"
    assert changes(lines, comm) == [(None, "mismatch"), ("mismatch", "stuck")]
    assert lines[-1]["transient"] == [] and lines[-1]["failed_polls"] == 1
    assert "is cut short" in result.stderr and "kept as evidence" in result.stderr
    assert (tmp_path / "ras" / "ras_1.txt").read_bytes() == cut.text  # the cut reply is evidence too


def test_a_trickling_server_cannot_stretch_a_poll_past_its_timeouts():
    """Bytes 50 ms apart never trip a per-recv timeout: a poll took 35 s (3 x read timeout + connect) where the
    timeouts promised 1 s. The timeouts are now wall-clock and total: connect plus handshake, then the report."""
    from ncclforensics.live.ras_client import RasClient, RasReplyError

    report = scenario("extra-op-4rank", "q0")[0]
    trickle = Reply(text=report.text * 20, json=report.json * 20, chunk_delay=0.05)  # ~55 KB at 4 KB/s: ~14 s
    with FakeRasServer([trickle]) as server:
        client = RasClient(port=server.port, connect_timeout=0.5, read_timeout=1.0, collective_timeout=1)
        started = time.monotonic()
        with pytest.raises(RasReplyError, match="stalled"):
            client.status()
        assert time.monotonic() - started < 2.5


def test_an_endless_monitor_event_is_refused_in_bounded_work():
    """One JSON event that never ends (`}` in its strings, so every chunk looked worth a decode) was decoded again
    from its start on every chunk: 56 s of CPU. Now an event is at most 1 MiB, decoded only when a `}` arrives."""
    from ncclforensics.live.ras_client import MAX_EVENT_BYTES, RasClient, RasReplyError

    endless = b'{"timestamp": "2026-07-14 09:32:10", "details": "' + b"}" * (6 << 20)
    newer = Reply(json=scenario("extra-op-4rank", "q0")[0].json.replace(b'"2.28.9"', b'"2.29.2"'))
    with FakeRasServer([newer], monitor_events=[endless]) as server:
        client = RasClient(port=server.port, connect_timeout=1, collective_timeout=1)
        started, cpu = time.monotonic(), time.process_time()
        with pytest.raises(RasReplyError, match=f"more than {MAX_EVENT_BYTES} bytes"):
            for _ in client.monitor():
                pass
        assert time.monotonic() - started < 10 and time.process_time() - cpu < 3


@pytest.mark.parametrize("line", ['{"step": 9223372036854775808, "rank": 0, "decision": "pass"}',
                                  '{"step": 0, "rank": 0, "seq": 1e30, "decision": "pass"}',
                                  '{"step": 0, "rank": 0, "seq": 1e999, "decision": "pass"}',
                                  "step=0 rank=0 seq=99999999999999999999999 decision=pass"])
def test_a_journal_value_out_of_range_is_trouble_with_its_line_not_a_traceback(tmp_path, line):
    """A step of 2**63 or a seq of 1e30 gave an OverflowError traceback and exit 1 (the disagreement code)."""
    from live_helpers import free_port

    journal = tmp_path / "gate_rank0.jsonl"
    journal.write_text('{"step": 0, "rank": 0, "decision": "pass"}\n' if "step=" not in line else "")
    journal.write_text(journal.read_text() + line + "\n")
    result = CliRunner().invoke(live, ["sidecar", "--rank", "0", "--world-size", "1", "--store",
                                       f"127.0.0.1:{free_port()}", "--journal", str(journal), "--no-follow",
                                       "--timeout", "5"])
    assert result.exit_code == 2, result.output
    assert not isinstance(result.exception, OverflowError) and "Traceback" not in result.output
    assert f"{journal}:" in result.stderr and ("out of range" in result.stderr or "not an integer" in
                                               result.stderr), result.stderr


@pytest.mark.parametrize("peer", ["nobody", "silent"])
def test_an_unreachable_store_is_trouble_within_the_timeout(peer):
    """With the store unreachable, `--timeout 10` returned after 25.6 s (TCPStore retries once after its timeout
    and a back-off); a port that accepts and never answers held it as long. The deadline is now one, wall-clock."""
    import socket as sockets

    from live_helpers import free_port

    from ncclforensics.errors import LiveError
    from ncclforensics.live.sidecar import SidecarOptions, run_sidecar

    pytest.importorskip("torch")
    listener = None
    port = free_port()
    if peer == "silent":
        listener = sockets.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]
    journal = __import__("pathlib").Path("/dev/null")
    try:
        started = time.monotonic()
        with pytest.raises(LiveError, match="cannot reach the sidecar store"):
            run_sidecar(SidecarOptions(rank=1, world_size=2, journal=journal, host="127.0.0.1", port=port,
                                       timeout=2.0))
        assert time.monotonic() - started < 3.0
    finally:
        if listener is not None:
            listener.close()
