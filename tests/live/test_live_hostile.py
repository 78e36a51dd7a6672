"""The live mode against hostile peers on real loopback sockets: cut replies, trickling servers, endless events,
journal values out of range, a store that is not there. Every loop here is bounded by a timeout."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from fake_ras import FakeRasServer, Reply, scenario

from ncclforensics.live.cli import live

pytestmark = pytest.mark.live

FAST = ["--interval", "0.05", "--retry", "0.05", "--connect-timeout", "1", "--timeout", "1"]


def watch(port: int, out, *more: str):
    result = CliRunner().invoke(live, ["ras", "--port", str(port), "--out", str(out), "--json", *FAST, *more])
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    return result, lines


def changes(lines, comm=None):
    return [(c["from"], c["to"]) for c in lines if c["kind"] == "state_change" and (comm is None or c["comm"] == comm)]


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
