"""The gate sidecar: real processes, a real TCPStore and real gloo groups on loopback."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import time

import pytest

from live_helpers import REAL, REPO, free_port, read_jsonl, run_sidecar_child

pytestmark = pytest.mark.live
pytest.importorskip("torch")


def journal_line(step: int, rank: int, decision: str, **extra) -> str:
    return json.dumps({"step": step, "rank": rank, "seq": 900 + step, "decision": decision, **extra}) + "\n"


def write_journal(path, rank: int, steps, outliers: dict[int, str] | None = None) -> None:
    outliers = outliers or {}
    with open(path, "w") as f:
        for step in steps:
            f.write(journal_line(step, rank, outliers.get(step, "skip")))


def sidecar_args(rank: int, world: int, port: int, journal, *more: str) -> list[str]:
    return ["sidecar", "--rank", str(rank), "--world-size", str(world), "--store", f"127.0.0.1:{port}",
            "--journal", str(journal), *more]


def test_agreement_exits_0(tmp_path, cli_fork):
    port = free_port()
    runs = []
    for rank in range(3):
        write_journal(tmp_path / f"j{rank}.jsonl", rank, range(50))
        runs.append(cli_fork(sidecar_args(rank, 3, port, tmp_path / f"j{rank}.jsonl", "--no-follow",
                                          "--timeout", "10", "--alerts", str(tmp_path / f"alerts{rank}.jsonl")),
                             f"rank{rank}"))
    codes = [run.wait(30) for run in runs]
    assert codes == [0, 0, 0], [run.text for run in runs]
    assert "50 steps compared, 0 disagreements" in runs[0].text
    assert not (tmp_path / "alerts0.jsonl").exists() or not read_jsonl(tmp_path / "alerts0.jsonl")


def test_disagreement_in_real_journals_exits_1_with_alert(tmp_path, cli_fork):
    """extra-op-4rank: rank 0's gate passed at step 5 while ranks 1-3 skipped (key=value journals)."""
    port = free_port()
    runs = [cli_fork(sidecar_args(rank, 4, port, REAL / "extra-op-4rank" / f"gate_journal_rank{rank}.log",
                                  "--no-follow", "--timeout", "10", "--alerts", str(tmp_path / f"alerts{rank}.jsonl")),
                     f"rank{rank}") for rank in range(4)]
    codes = [run.wait(30) for run in runs]
    assert codes == [1, 1, 1, 1], [run.text for run in runs]
    for rank in range(4):
        (alert,) = read_jsonl(tmp_path / f"alerts{rank}.jsonl")
        assert alert["step"] == 5 and alert["kind"] == "gate_disagreement"
        assert alert["outlier_ranks"] == [0]
        assert alert["decisions"]["0"]["decision"] == "pass"
        assert {alert["decisions"][str(r)]["decision"] for r in (1, 2, 3)} == {"skip"}
        assert isinstance(alert["time"], float)
    assert "step 5: gate disagreement: rank 0 pass; ranks 1, 2, 3 skip (outliers: rank 0)" in runs[2].text


def test_two_way_tie_names_every_rank(tmp_path, cli_fork):
    port = free_port()
    write_journal(tmp_path / "j0.jsonl", 0, range(10), {7: "pass"})
    write_journal(tmp_path / "j1.jsonl", 1, range(12))  # rank 1 is ahead: steps 10-11 are never compared
    runs = [cli_fork(sidecar_args(r, 2, port, tmp_path / f"j{r}.jsonl", "--no-follow", "--timeout", "10",
                                  "--alerts", str(tmp_path / "alerts.jsonl")), f"rank{r}") for r in range(2)]
    assert [run.wait(30) for run in runs] == [1, 1]
    alerts = read_jsonl(tmp_path / "alerts.jsonl")
    assert [a["step"] for a in alerts] == [7, 7]  # one line per reporting rank
    assert {a["rank"] for a in alerts} == {0, 1}
    assert alerts[0]["outlier_ranks"] == [0, 1]  # 1 vs 1: no majority, no reference rank
    assert "10 steps compared" in runs[0].text
    assert "rank 1 journaled up to step 11" in runs[0].text


def test_follow_survives_rotation_and_truncation(tmp_path, cli_fork):
    port = free_port()
    paths = [tmp_path / f"j{r}.jsonl" for r in range(2)]
    alerts = tmp_path / "alerts0.jsonl"

    def wait_for_alert(step: int) -> None:
        # An alert at a journal's last step says both sidecars read their journals that far: the next change to
        # the files cannot overtake their reading.
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if alerts.exists() and any(a["step"] == step for a in read_jsonl(alerts)):
                return
            time.sleep(0.05)

    for rank, path in enumerate(paths):
        write_journal(path, rank, range(0, 20), {19: "pass"} if rank == 1 else None)
    runs = [cli_fork(sidecar_args(r, 2, port, paths[r], "--follow", "--timeout", "10", "--interval", "0.05",
                                  "--alerts", str(tmp_path / f"alerts{r}.jsonl")), f"rank{r}") for r in range(2)]
    wait_for_alert(19)
    # Rank 0 appends, in two writes that split a line; rank 1 rotates (rename + new file) mid-way.
    with open(paths[0], "a") as f:
        text = "".join(journal_line(s, 0, "skip") for s in range(20, 40))
        f.write(text[:37])
        f.flush()
        time.sleep(0.3)
        f.write(text[37:])
    with open(paths[1], "a") as f:
        f.write("".join(journal_line(s, 1, "skip") for s in range(20, 30)))
    os.rename(paths[1], tmp_path / "j1.jsonl.1")
    with open(paths[1], "w") as f:
        f.write("".join(journal_line(s, 1, "pass" if s == 39 else "skip") for s in range(30, 40)))
    wait_for_alert(39)
    # Rank 0's journal is truncated in place (copytruncate) and goes on from step 40.
    with open(paths[0], "w") as f:
        f.write("".join(journal_line(s, 0, "skip") for s in range(40, 45)))
    with open(paths[1], "a") as f:
        f.write("".join(journal_line(s, 1, "pass" if s == 44 else "skip") for s in range(40, 45)))
    wait_for_alert(44)
    for run in runs:
        run.stop()
    codes = [run.wait(20) for run in runs]
    assert codes == [1, 1], [run.text for run in runs]
    steps = [a["step"] for a in read_jsonl(alerts)]
    assert steps == [19, 39, 44], steps
    assert all(a["outlier_ranks"] == [0, 1] for a in read_jsonl(alerts))  # 1 vs 1
    assert "45 steps compared, 3 disagreements\n" in runs[0].text, runs[0].text


@pytest.mark.parametrize("victim", [2, 0], ids=["peer", "store-host"])
def test_killed_peer_is_trouble_within_twice_the_timeout(tmp_path, cli_fork, victim):
    """A sidecar killed mid-run (rank 0 also takes the store with it): the others exit 2 well within 2x timeout."""
    port = free_port()
    timeout = 2.0
    runs = []
    for rank in range(3):
        # A disagreement at step 3 tells the test that the group formed and is comparing.
        write_journal(tmp_path / f"j{rank}.jsonl", rank, range(5), {3: "pass"} if rank == 1 else None)
        runs.append(cli_fork(sidecar_args(rank, 3, port, tmp_path / f"j{rank}.jsonl", "--follow", "--timeout",
                                          str(timeout), "--interval", "0.1", "--alerts", str(tmp_path / "a.jsonl")),
                             f"rank{rank}"))
    deadline = time.monotonic() + 20
    while "ALERT step 3" not in runs[1].text and time.monotonic() < deadline:
        time.sleep(0.05)
    killed_at = time.monotonic()
    runs[victim].kill()
    survivors = [r for r in range(3) if r != victim]
    codes = [runs[r].wait(2 * timeout + 5) for r in survivors]
    took = time.monotonic() - killed_at
    assert codes == [2, 2], [run.text for run in runs]
    assert took <= 2 * timeout, took
    assert "error: lost the sidecar group" in runs[survivors[0]].text


def test_missing_store_is_trouble(tmp_path, cli_fork):
    write_journal(tmp_path / "j1.jsonl", 1, range(5))
    run = cli_fork(sidecar_args(1, 2, free_port(), tmp_path / "j1.jsonl", "--no-follow", "--timeout", "1"), "r1")
    assert run.wait(10) == 2
    assert "error: cannot reach the sidecar store at 127.0.0.1:" in run.text
    assert time.monotonic() - run.started < 2 * 1 + 3  # the store's timeout, plus start-up on a loaded machine


def test_missing_peer_is_trouble(tmp_path, cli_fork):
    write_journal(tmp_path / "j0.jsonl", 0, range(5))
    run = cli_fork(sidecar_args(0, 2, free_port(), tmp_path / "j0.jsonl", "--no-follow", "--timeout", "1"), "r0")
    assert run.wait(10) == 2
    assert "did not form within 1s (a rank missing?)" in run.text


def test_unreadable_line_is_one_stderr_line_naming_file_and_line(tmp_path, cli_fork):
    """Exit 2 on every rank; the rank with the bad line (a real CLI process) prints one line `path:line: ...`."""
    port = free_port()
    good, bad = tmp_path / "j0.jsonl", tmp_path / "j1.jsonl"
    write_journal(good, 0, range(5))
    bad.write_text(journal_line(0, 1, "skip") + journal_line(1, 1, "skip") + '{"step": 2, "rank": 1, "decision"\n')
    peer = cli_fork(sidecar_args(0, 2, port, good, "--no-follow", "--timeout", "10"), "rank0")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "ncclforensics.live.cli", *sidecar_args(
        1, 2, port, bad, "--no-follow", "--timeout", "10")], capture_output=True, text=True, env=env, timeout=30)
    assert proc.returncode == 2, proc
    stderr = proc.stderr.strip().splitlines()
    assert len(stderr) == 1, proc.stderr
    assert stderr[0].startswith(f"error: {bad}:3: unreadable journal line: invalid JSON")
    assert proc.stdout == ""
    assert peer.wait(10) == 2
    assert "error: sidecar rank 1 reported trouble; stopping" in peer.text


def test_wrong_rank_in_journal_is_trouble(tmp_path, cli_fork):
    port = free_port()
    write_journal(tmp_path / "j0.jsonl", 0, range(3))
    write_journal(tmp_path / "j1.jsonl", 0, range(3))  # rank 0's journal given to rank 1
    runs = [cli_fork(sidecar_args(r, 2, port, tmp_path / f"j{r}.jsonl", "--no-follow", "--timeout", "10"),
                     f"rank{r}") for r in range(2)]
    assert [run.wait(30) for run in runs] == [2, 2]
    assert "j1.jsonl:1: a line of rank 0 in the journal of rank 1" in runs[1].text


def test_small_buffers_many_steps(tmp_path):
    """Back-pressure and chunking: 20k steps through 64-step exchanges and a 128-step buffer, in one process."""
    import multiprocessing as mp

    port = free_port()
    for rank in range(2):
        with open(tmp_path / f"j{rank}.log", "w") as f:
            for step in range(20000):
                decision = "pass" if rank == 1 and step in (7, 19999) else "skip"
                f.write(f"I gate step={step} rank={rank} fits=0 decision={decision}\n")

    # From a server process that holds no threads: a plain fork of this process (polars' and torch's pools) can
    # copy a held lock into the child and hang it.
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["torch.distributed", "ncclforensics.live.sidecar", "live_helpers"])
    # (a port that another process takes between free_port and rank 0's bind fails the join: that pair of sidecars
    # ends with trouble at once, and the exchange is tried once more on another port)
    for _ in range(2):
        results = ctx.Queue()
        procs = [ctx.Process(target=run_sidecar_child, args=(r, str(tmp_path / f"j{r}.log"), port, results))
                 for r in range(2)]
        for p in procs:
            p.start()
        got, deadline = [], time.monotonic() + 180
        while len(got) < len(procs) and time.monotonic() < deadline:
            try:
                got.append(results.get(timeout=1))
            except queue.Empty:
                if any(p.exitcode not in (None, 0) for p in procs):
                    break
        for p in procs:
            p.join(10)
            if p.is_alive():
                p.kill()
        if len(got) == len(procs):
            break
        port = free_port()
    assert sorted(got) == [(0, 20000, [7, 19999]), (1, 20000, [7, 19999])]


def test_hung_peer_is_trouble_after_the_timeout(tmp_path, cli_fork):
    """A peer that stops answering (SIGSTOP: alive, silent) is reported once the gloo timeout expires."""
    import signal

    port = free_port()
    timeout = 2.0
    runs = []
    for rank in range(2):
        write_journal(tmp_path / f"j{rank}.jsonl", rank, range(5), {2: "pass"} if rank == 1 else None)
        runs.append(cli_fork(sidecar_args(rank, 2, port, tmp_path / f"j{rank}.jsonl", "--follow", "--timeout",
                                          str(timeout), "--interval", "0.1"), f"rank{rank}"))
    deadline = time.monotonic() + 20
    while "ALERT step 2" not in runs[0].text and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(runs[1].process.pid, signal.SIGSTOP)
    stopped_at = time.monotonic()
    try:
        assert runs[0].wait(2 * timeout + 5) == 2, runs[0].text
        assert time.monotonic() - stopped_at <= 2 * timeout
        assert "did not answer within 2s" in runs[0].text
    finally:
        runs[1].kill()
