"""A tensor-parallel decode loop whose drafter gate diverges on one rank, with and without the consensus guard.

N processes behave like TP ranks of a speculative-decoding server. Every step runs the target model's
collectives on a data group (all_reduce of a small tensor), then the drafter's collectives when the rank's gate
says so. Near `max_model_len` the gate flips from pass to skip; rank R sees one token less at step S, so its gate
still passes while the others already skip (vllm#49027). Without agreement NCCL/gloo pair rank R's drafter
collective with the others' next target collective: shape-equal, so the results are silently wrong from there
on, and at the end rank R's last collective has no partner: a wedge, caught by the data group's timeout.

    --mode off       no guard traffic: corruption and a wedge
    --mode observe   the guard journals every rank's vote and alerts at step S; the job still corrupts and wedges
    --mode enforce   every rank adopts the max ({0, N} -> N): everyone runs the drafter at step S; no harm

Every collective's result is compared with what a consistent world gives, so corruption is counted exactly.
The last stdout line is a JSON summary:

    {"mode": "off", "wedged": true, "corrupted_steps": [5, 6, ...], "collectives_per_rank": {"0": 30, "1": 31, ...},
     "alerts": [...], ...}

With --out DIR each rank's gate journal goes to DIR/gate_rank<R>.jsonl; with --backend nccl also NCCL_DEBUG logs,
Flight Recorder dumps (TORCH_FR_DUMP_TEMP_FILE) and each rank's output, and with --ras-poll the RAS replies
(DIR/ras/), so `ncclforensics diff DIR` can explain what happened.

Example:
    python examples/gate_consensus_demo.py --world-size 4 --mode off --diverge-rank 1 --diverge-step 5
    python examples/gate_consensus_demo.py --world-size 4 --mode enforce --diverge-rank 1 --diverge-step 5
    python examples/gate_consensus_demo.py --world-size 4 --mode off --diverge-rank 1 --diverge-step 5 \\
        --backend nccl --timeout 60 --out incident/ --ras-poll
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import socket
import sys
import threading
import time
from pathlib import Path

TARGET_OPS = 2  # target-model all_reduces per step
DRAFT_OPS = 1  # drafter all_reduces per step, when the gate passes
SPEC_TOKENS = 3
MAX_MODEL_LEN = 1000
NUMEL = 4


def target_value(step: int, k: int) -> float:
    return float(1 + step * 16 + k)


def draft_value(step: int, k: int) -> float:
    return -float(1 + step * 16 + 8 + k)


def rank_env(rank: int, out: Path | None, backend: str) -> dict[str, str]:
    """What each rank's environment needs: a wedge on one GPU needs every rank to look like its own host."""
    env = {}
    if backend == "nccl":
        env.update({
            "NCCL_HOSTID": f"gate-demo-rank{rank}",
            "NCCL_SHM_DISABLE": "1",
            "NCCL_P2P_DISABLE": "1",
            "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
            "TORCH_NCCL_TRACE_BUFFER_SIZE": "20000",
            "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
            "TORCH_NCCL_DESYNC_DEBUG": "1",
        })
        if out is not None:
            env.update({
                "NCCL_DEBUG": "INFO",
                "NCCL_DEBUG_SUBSYS": "INIT,COLL",
                "NCCL_DEBUG_FILE": str(out / "nccl.%h.%p.log"),
                "TORCH_FR_DUMP_TEMP_FILE": str(out / "fr_rank"),
            })
    env.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
    return env


def worker(rank: int, args: argparse.Namespace, port: int, results, release) -> None:
    """One TP rank: join the data group and the guard, run the decode loop, report, wait to be released."""
    out = Path(args.out) if args.out else None
    os.environ.update(rank_env(rank, out, args.backend))
    if out is not None and args.backend == "nccl":
        log = os.open(out / f"torch_rank{rank}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
    report = {"rank": rank, "collectives": 0, "corrupted_steps": [], "wedged": False, "error": None,
              "alerts": [], "guard_errors": []}
    try:
        run_rank(rank, args, port, report)
    except Exception as e:  # noqa: BLE001 - reported to the parent, which decides
        report["error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]
    results.put(report)
    release.wait(args.timeout * 3 + 60)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # a wedged communicator cannot be torn down cleanly


def run_rank(rank: int, args: argparse.Namespace, port: int, report: dict) -> None:
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    from ncclforensics.live.guard import GateConsensusGuard

    world = args.world_size
    timeout = timedelta(seconds=args.timeout)
    store = dist.TCPStore("127.0.0.1", port, world + 1, False, timeout=timedelta(seconds=60))
    if args.backend == "nccl":
        device = torch.device("cuda", rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", store=store, rank=rank, world_size=world, timeout=timeout,
                                device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo", store=store, rank=rank, world_size=world, timeout=timeout)
    out = Path(args.out) if args.out else None
    journal = str(out / f"gate_rank{rank}.jsonl") if out is not None else None
    guard = GateConsensusGuard(ranks=list(range(world)), mode=args.mode, timeout=args.guard_timeout,
                               journal_path=journal, max_model_len=MAX_MODEL_LEN, spec_tokens=SPEC_TOKENS)
    ranks_sum = world * (world + 1) / 2
    buffer = torch.empty(NUMEL, dtype=torch.float32, device=device)
    base_seq = MAX_MODEL_LEN - SPEC_TOKENS - args.diverge_step + 1  # the last step that fits is diverge_step - 1

    def collective(value: float, step: int) -> None:
        buffer.fill_(value * (rank + 1))
        report["collectives"] += 1
        work = dist.all_reduce(buffer, async_op=True)
        if args.backend == "nccl":
            wait_gpu(work, args.timeout)
        else:
            work.wait()
        got = buffer[0].item()
        if got != value * ranks_sum and step not in report["corrupted_steps"]:
            report["corrupted_steps"].append(step)

    try:
        for step in range(args.steps):
            for k in range(TARGET_OPS):
                collective(target_value(step, k), step)
            seq = base_seq + step - (1 if rank == args.diverge_rank and step == args.diverge_step else 0)
            fits = seq + SPEC_TOKENS <= MAX_MODEL_LEN
            verdict = guard.decide(step, fits=fits, sched_count=1, seq=seq)
            if verdict.error and verdict.error not in report["guard_errors"]:
                report["guard_errors"].append(verdict.error)
            if verdict.agreed is False:
                report["alerts"].append({"step": step, "kind": "gate_disagreement",
                                         "outlier_ranks": list(verdict.outlier_ranks)})
            if verdict.run_drafter:
                for k in range(DRAFT_OPS):
                    collective(draft_value(step, k), step)
    except RuntimeError as e:  # the data group's timeout (gloo) or an NCCL error: a wedge
        report["wedged"] = True
        report["error"] = f"{str(e).splitlines()[0] if str(e) else type(e).__name__}"[:300]
    except TimeoutError as e:
        report["wedged"] = True
        report["error"] = str(e)
    finally:
        guard.close()


def wait_gpu(work, timeout: float) -> None:
    """Wait for an NCCL collective without blocking the CPU forever (the watchdog acts at the same timeout)."""
    import torch

    work.wait()  # makes the current stream wait; returns at once
    event = torch.cuda.Event()
    event.record()
    deadline = time.monotonic() + timeout + 10
    while not event.query():
        if time.monotonic() > deadline:
            raise TimeoutError(f"collective did not complete within {timeout + 10:g}s: wedged")
        time.sleep(0.001)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(args: argparse.Namespace) -> dict:
    """Start the ranks, collect their reports (or declare a wedge at the deadline), and summarise."""
    import multiprocessing as mp
    from datetime import timedelta

    import torch.distributed as dist

    out = Path(args.out) if args.out else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    listen = socket.socket()
    listen.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listen.bind(("127.0.0.1", 0))
    listen.listen(64)
    port = listen.getsockname()[1]
    ctx = mp.get_context("spawn" if args.backend == "nccl" or args.start == "spawn" else "fork")
    results, release = ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=worker, args=(r, args, port, results, release), daemon=True)
             for r in range(args.world_size)]
    for p in procs:
        p.start()  # before the store's server thread exists (fork); the ranks' clients retry until it answers
    store = dist.TCPStore("127.0.0.1", port, args.world_size + 1, True, timeout=timedelta(seconds=60),
                          wait_for_workers=False, master_listen_fd=listen.detach())
    ras = start_ras_poll(out) if args.ras_poll and out is not None else None
    reports: dict[int, dict] = {}
    deadline = time.monotonic() + args.deadline
    while len(reports) < args.world_size and time.monotonic() < deadline:
        try:
            report = results.get(timeout=0.2)
            reports[report["rank"]] = report
            continue
        except queue.Empty:
            pass
        if all(r in reports or procs[r].exitcode is not None for r in range(args.world_size)):
            break  # the ranks that did not report died (NCCL's watchdog tears a wedged rank down)
    late = [r for r in range(args.world_size) if r not in reports]
    if args.backend == "nccl" and (late or any(r["wedged"] for r in reports.values())):
        # The wedged rank's watchdog asks every rank for a Flight Recorder dump; let the live ones write it.
        time.sleep(args.dump_grace)
    ras_summary = stop_ras_poll(ras) if ras is not None else None
    release.set()
    for p in procs:
        p.join(timeout=10)
        if p.exitcode is None:
            p.kill()
            p.join(timeout=5)
    del store
    return summarise(args, reports, late, procs, ras_summary)


def summarise(args, reports: dict[int, dict], late: list[int], procs, ras_summary) -> dict:
    alerts: dict[int, dict] = {}
    for report in reports.values():
        for alert in report["alerts"]:
            alerts.setdefault(alert["step"], alert)
    corrupted = sorted({s for r in reports.values() for s in r["corrupted_steps"]})
    wedged = bool(late) or any(r["wedged"] for r in reports.values())
    summary = {
        "mode": args.mode,
        "backend": args.backend,
        "world_size": args.world_size,
        "diverge_rank": args.diverge_rank,
        "diverge_step": args.diverge_step,
        "steps": args.steps,
        "wedged": wedged,
        "corrupted_steps": corrupted,
        "collectives_per_rank": {str(r): reports[r]["collectives"] for r in sorted(reports)},
        "alerts": [alerts[s] for s in sorted(alerts)],
        "unreported_ranks": late,
        "errors": {str(r): reports[r]["error"] for r in sorted(reports) if reports[r]["error"]},
        "guard_errors": {str(r): reports[r]["guard_errors"] for r in sorted(reports) if reports[r]["guard_errors"]},
        "exit_codes": {str(r): p.exitcode for r, p in enumerate(procs)},
    }
    if ras_summary is not None:
        summary["ras"] = ras_summary
    return summary


def start_ras_poll(out: Path):
    """Poll the job's NCCL RAS port into out/ras/ while it runs (NCCL 2.24+; backend nccl)."""
    from ncclforensics.live.ras_watch import RasWatcher, WatchOptions, prepare_out_dir

    options = WatchOptions(out=prepare_out_dir(out / "ras"), interval=2.0, stuck_after=3, max_failures=0,
                           retry=0.5, retry_cap=2.0)
    watcher = RasWatcher(options)
    stop = threading.Event()
    thread = threading.Thread(target=watcher.run, kwargs={"on_change": lambda c: print(c.describe(), file=sys.stderr),
                                                          "stop": stop}, daemon=True)
    thread.start()
    return watcher, stop, thread


def stop_ras_poll(ras) -> dict:
    watcher, stop, thread = ras
    stop.set()
    thread.join(timeout=20)
    return watcher.summary.as_dict()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--world-size", type=int, default=4)
    parser.add_argument("--mode", choices=["off", "observe", "enforce"], default="off")
    parser.add_argument("--diverge-rank", type=int, default=1, help="the rank whose gate sees one token less")
    parser.add_argument("--diverge-step", type=int, default=5, help="the step at which it does")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--backend", choices=["gloo", "nccl"], default="gloo", help="data group backend")
    parser.add_argument("--timeout", type=float, default=10.0, help="data group timeout: how long a wedge lasts")
    parser.add_argument("--guard-timeout", type=float, default=None, help="guard timeout (default: --timeout)")
    parser.add_argument("--deadline", type=float, default=None,
                        help="parent-side deadline for all ranks to report (default: 3 x timeout + 60)")
    parser.add_argument("--out", default=None, help="evidence folder (gate journals; with nccl also logs, FR dumps)")
    parser.add_argument("--ras-poll", action="store_true", help="poll NCCL RAS into OUT/ras/ while it runs")
    parser.add_argument("--start", choices=["fork", "spawn"], default="fork", help="process start method (gloo)")
    parser.add_argument("--dump-grace", type=float, default=10.0,
                        help="seconds the live ranks get to write Flight Recorder dumps after a wedge (nccl)")
    args = parser.parse_args(argv)
    if not 0 <= args.diverge_rank < args.world_size:
        parser.error("--diverge-rank must be a rank")
    if not 0 < args.diverge_step < args.steps:
        parser.error("--diverge-step must be inside 1..steps-1")
    if args.guard_timeout is None:
        args.guard_timeout = args.timeout
    if args.deadline is None:
        args.deadline = 3 * args.timeout + 60
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    summary = run(args)
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
