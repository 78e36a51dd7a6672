"""The gate consensus guard: the rule, its modes on a real TP-like loop (gloo, CPU), and its timeout."""

from __future__ import annotations

import importlib.util
import json
import multiprocessing as mp
import time
from pathlib import Path
from datetime import timedelta

import pytest
from live_helpers import REPO, free_port, read_jsonl

from ncclforensics.live.guard import Degenerate, consensus, local_pass, minority

pytestmark = pytest.mark.live


# -- the rule (no torch needed) ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("votes", "decision", "pass_count", "degenerate"),
    [
        ([(3, 0, 4, 0, 0)] * 4, "skip", 0, None),  # everyone skips
        ([(3, 4, 4, 1, 0)] * 4, "pass", 4, None),  # everyone runs
        ([(3, 0, 4, 0, 0), (3, 4, 4, 1, 0), (3, 0, 4, 0, 0)], "pass", 4, None),  # {0, N} -> N: everyone runs
        ([(3, 2, 4, 1, 0), (3, 4, 4, 1, 0)], "pass", 4, None),  # the max
        ([(3, 4, 4, 1, 0), (3, 4, 4, 1, 1)], "skip", 0, Degenerate.MD_NONE),  # a rank without metadata
        ([(3, 4, 4, 1, 0), (3, 4, 5, 1, 0)], "skip", 0, Degenerate.SCHED_SPLIT),  # scheduled counts split
        ([(3, 4, 4, 1, 0), (4, 4, 4, 1, 0)], "skip", 0, Degenerate.STEP_MISMATCH),  # not at the same step
    ],
)
def test_consensus_rule(votes, decision, pass_count, degenerate):
    rule = consensus(votes)
    assert (rule.decision, rule.pass_count, rule.degenerate) == (decision, pass_count, degenerate)


def test_local_gate():
    assert local_pass(True, False, 4) and not local_pass(False, False, 0)
    assert not local_pass(True, True, 4) and not local_pass(True, False, 0)


def test_minority_has_no_reference_rank():
    assert minority({0: "pass", 1: "skip", 2: "skip", 3: "skip"}) == (0,)
    assert minority({0: "skip", 1: "skip", 2: "skip", 3: "pass"}) == (3,)
    assert minority({0: "pass", 1: "pass", 2: "skip", 3: "skip"}) == (0, 1, 2, 3)
    assert minority({0: "skip", 1: "skip"}) == ()


def test_off_mode_needs_no_process_group(tmp_path):
    from ncclforensics.live.guard import GateConsensusGuard

    guard = GateConsensusGuard(mode="off", journal_path=str(tmp_path / "j.jsonl"), max_model_len=100)
    verdict = guard.decide(3, fits=True, sched_count=2, seq=97)
    guard.close()
    assert verdict.run_drafter and verdict.consensus is None and verdict.agreed is None
    (line,) = read_jsonl(tmp_path / "j.jsonl")
    assert line["decision"] == "pass" and line["mode"] == "off" and line["proposed_pass_count"] == 2
    assert "peers" not in line


# -- the modes, on the demo's TP decode loop (4 ranks, gloo) ------------------------------------------------


def _demo():
    spec = importlib.util.spec_from_file_location("gate_consensus_demo", REPO / "examples" / "gate_consensus_demo.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def demo():
    pytest.importorskip("torch")
    return _demo()


def run_demo(demo, tmp_path, mode: str, world: int = 4, timeout: float = 2.0) -> dict:
    args = demo.parse_args(["--world-size", str(world), "--mode", mode, "--diverge-rank", "1", "--diverge-step", "5",
                            "--steps", "10", "--timeout", str(timeout), "--deadline", "30",
                            "--out", str(tmp_path / mode)])
    started = time.monotonic()
    summary = demo.run(args)
    summary["took"] = time.monotonic() - started
    return summary


def test_enforce_keeps_every_rank_in_step(demo, tmp_path):
    summary = run_demo(demo, tmp_path, "enforce")
    assert not summary["wedged"], summary
    assert summary["corrupted_steps"] == []
    counts = summary["collectives_per_rank"]
    assert len(counts) == 4 and len(set(counts.values())) == 1, counts
    assert summary["alerts"] == [{"step": 5, "kind": "gate_disagreement", "outlier_ranks": [1]}]
    journal = read_jsonl(tmp_path / "enforce" / "gate_rank2.jsonl")
    step5 = journal[5]
    assert step5["step"] == 5 and step5["local_decision"] == "skip" and step5["decision"] == "pass"
    assert step5["consensus"] == "pass" and step5["would_pass_total"] == 1
    assert step5["peers"]["1"] == [5, 1, 1, 1, 0] and step5["peers"]["2"] == [5, 0, 1, 0, 0]
    assert {line["mode"] for line in journal} == {"enforce"}


def test_observe_alerts_at_the_diverging_step_and_still_fails(demo, tmp_path):
    summary = run_demo(demo, tmp_path, "observe")
    assert summary["alerts"][0] == {"step": 5, "kind": "gate_disagreement", "outlier_ranks": [1]}
    assert summary["wedged"] or summary["corrupted_steps"], summary
    journal = read_jsonl(tmp_path / "observe" / "gate_rank1.jsonl")
    step5 = next(line for line in journal if line["step"] == 5)
    assert step5["decision"] == "pass" and step5["local_decision"] == "pass" and step5["consensus"] == "pass"
    assert step5["agreed"] is False and step5["outlier_ranks"] == [1]
    others = read_jsonl(tmp_path / "observe" / "gate_rank0.jsonl")
    assert next(line for line in others if line["step"] == 5)["decision"] == "skip"  # observe keeps the local one
    # The guard never blocked past its timeout: it journaled the failed exchange and went on locally.
    assert summary["took"] < 25


def test_off_corrupts_or_wedges(demo, tmp_path):
    summary = run_demo(demo, tmp_path, "off")
    assert summary["wedged"] or summary["corrupted_steps"], summary
    assert summary["wedged"] and summary["corrupted_steps"][0] == 5
    counts = summary["collectives_per_rank"]
    assert counts["1"] == counts["0"] + 1  # rank 1 launched the drafter's collective alone
    assert summary["alerts"] == []
    journal = read_jsonl(tmp_path / "off" / "gate_rank1.jsonl")
    assert journal[5]["decision"] == "pass" and "peers" not in journal[5]


def test_offline_reader_reads_the_guard_journal(demo, tmp_path):
    """The journal the guard writes is a gate journal to `ncclforensics parse`/`diff`."""
    from ncclforensics.live.journal_writer import JournalWriter, gate_record
    from ncclforensics.sources import InputFile, parse_file

    path = tmp_path / "gate_rank0.jsonl"
    with JournalWriter(path) as journal:
        journal.write(gate_record(5, 0, "pass", seq=995, fits=False, md_none=False, proposed_pass_count=0,
                                  sched_count=1, mode="enforce", time=1.5, local_decision="skip", consensus="pass",
                                  peers={"0": [5, 0, 1, 0, 0]}, would_pass_total=1))
    evidence = parse_file(InputFile(path=path, name="gate_rank0.jsonl"))
    assert not evidence.problems, evidence.problems
    (gate,) = evidence.gates
    assert (gate.step, gate.rank, gate.decision, gate.seq, gate.mode) == (5, 0, "pass", 995, "enforce")


# -- the timeout --------------------------------------------------------------------------------------------


def _timeout_rank(rank: int, port: int, results, done, folder: str) -> None:
    import torch.distributed as dist

    from ncclforensics.errors import LiveError
    from ncclforensics.live.guard import GateConsensusGuard

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2,
                            timeout=timedelta(seconds=30))
    observe = GateConsensusGuard(mode="observe", timeout=1.0)
    journal = f"{folder}/gate_rank{rank}.jsonl"
    enforce = GateConsensusGuard(mode="enforce", timeout=1.0, journal_path=journal)
    observe.decide(0, fits=True)  # both ranks: one good exchange
    enforce.decide(0, fits=True)
    if rank == 1:
        done.wait(20)  # alive, but never calls the guard again
        results.put((rank, None))
        return
    report = {}
    started = time.monotonic()
    verdict = observe.decide(1, fits=True)
    report["observe_s"] = time.monotonic() - started
    report["observe_error"] = verdict.error
    report["observe_decision"] = verdict.decision
    started = time.monotonic()
    verdict = observe.decide(2, fits=False)  # stopped: local decision, no exchange, no wait
    report["after_s"] = time.monotonic() - started
    report["after"] = (verdict.decision, verdict.consensus)
    started = time.monotonic()
    try:
        enforce.decide(1, fits=True)
        report["enforce"] = "no error"
    except LiveError as e:
        report["enforce"] = str(e)
    report["enforce_s"] = time.monotonic() - started
    try:
        enforce.decide(2, fits=True)
        report["enforce_again"] = "no error"
    except LiveError as e:
        report["enforce_again"] = str(e)
    enforce.close()
    report["journal"] = Path(journal).read_text()
    done.set()
    results.put((rank, report))


def test_guard_never_blocks_past_its_timeout(tmp_path):
    pytest.importorskip("torch")
    # From a server process that holds no threads: a plain fork of this process (polars' and torch's pools) can
    # copy a held lock into the child and hang it.
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["torch.distributed", "ncclforensics.live.guard", "live_helpers"])
    results, done = ctx.Queue(), ctx.Event()
    port = free_port()
    procs = [ctx.Process(target=_timeout_rank, args=(r, port, results, done, str(tmp_path)), daemon=True) for r in range(2)]
    for p in procs:
        p.start()
    reports = dict(results.get(timeout=40) for _ in procs)
    for p in procs:
        p.join(10)
    report = reports[0]
    assert report["observe_s"] < 1.0 + 1.0, report
    assert report["observe_decision"] == "pass" and "the gate exchange failed within 1s" in report["observe_error"]
    assert report["after_s"] < 0.1 and report["after"] == ("skip", None)
    assert report["enforce_s"] < 1.0 + 1.0, report
    assert report["enforce"].startswith("gate consensus guard (rank 0), step 1: the gate exchange failed within 1s")
    assert "step 2: stopped after an earlier failure" in report["enforce_again"]  # never runs unagreed
    lines = [json.loads(line) for line in report["journal"].splitlines()]
    assert [(line["step"], line["decision"]) for line in lines] == [(0, "pass"), (1, "skip")]
    assert "the gate exchange failed" in lines[1]["guard_error"] and lines[1]["local_decision"] == "pass"
