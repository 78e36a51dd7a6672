"""The gate guard's per-step cost against one bare gloo all_gather of the same payload.

8 ranks (processes) on loopback; each step every rank either calls `dist.all_gather_into_tensor` on a 5-int64
payload (the floor: what any cross-rank agreement must pay) or `GateConsensusGuard.decide(...)` (the same
all_gather, plus the rule, plus the journal line when a journal is given). Variants run interleaved in blocks so
machine noise hits them alike. p50 and p99 are over every rank's per-step times. Target: guard <= 1.3x bare.

    python benchmarks/bench_guard.py [--ranks 8] [--steps 2000] [--json]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import socket
import statistics
import sys
import tempfile
import time
from datetime import timedelta

VARIANTS = ("bare all_gather", "guard enforce", "guard enforce + journal", "guard observe + journal")


def worker(rank: int, world: int, port: int, steps: int, block: int, folder: str, results) -> None:
    import torch
    import torch.distributed as dist

    from ncclforensics.live.guard import GateConsensusGuard

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=60))
    ranks = list(range(world))
    bare_group = dist.new_group(ranks, backend="gloo", timeout=timedelta(seconds=60))
    guards = {
        "guard enforce": GateConsensusGuard(ranks, "enforce", timeout=60),
        "guard enforce + journal": GateConsensusGuard(ranks, "enforce", timeout=60,
                                                      journal_path=f"{folder}/enforce_rank{rank}.jsonl"),
        "guard observe + journal": GateConsensusGuard(ranks, "observe", timeout=60,
                                                      journal_path=f"{folder}/observe_rank{rank}.jsonl"),
    }
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    payload = torch.zeros(5, dtype=torch.int64)
    out = torch.zeros(5 * world, dtype=torch.int64)
    times: dict[str, list[float]] = {v: [] for v in VARIANTS}
    clock = time.perf_counter
    step = 0

    def run(variant: str, count: int, keep: bool) -> None:
        nonlocal step
        samples = times[variant]
        for _ in range(count):
            step += 1
            fits = (step % 7 == 0) != (rank == 0 and step % 11 == 0)
            if variant == "bare all_gather":
                start = clock()
                payload[0] = step
                gather(out, payload, group=bare_group)
                elapsed = clock() - start
            else:
                guard = guards[variant]
                start = clock()
                guard.decide(step, fits=fits, sched_count=4, seq=step)
                elapsed = clock() - start
            if keep:
                samples.append(elapsed)

    for variant in VARIANTS:  # warm-up
        run(variant, 100, keep=False)
    done = 0
    while done < steps:
        count = min(block, steps - done)
        for variant in VARIANTS:
            run(variant, count, keep=True)
        done += count
    for guard in guards.values():
        guard.close()
    results.put((rank, times))
    dist.barrier()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--block", type=int, default=100, help="steps per variant before switching")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    with tempfile.TemporaryDirectory() as folder:
        procs = [ctx.Process(target=worker, args=(r, args.ranks, port, args.steps, args.block, folder, results))
                 for r in range(args.ranks)]
        for p in procs:
            p.start()
        gathered = [results.get(timeout=600) for _ in procs]
        for p in procs:
            p.join(timeout=60)
    merged: dict[str, list[float]] = {v: [] for v in VARIANTS}
    for _, times in gathered:
        for variant, samples in times.items():
            merged[variant].extend(samples)
    base50, base99 = percentile(merged[VARIANTS[0]], 0.5), percentile(merged[VARIANTS[0]], 0.99)
    rows = []
    for variant in VARIANTS:
        p50, p99 = percentile(merged[variant], 0.5), percentile(merged[variant], 0.99)
        rows.append({"variant": variant, "p50_us": p50 * 1e6, "p99_us": p99 * 1e6,
                     "mean_us": statistics.fmean(merged[variant]) * 1e6,
                     "p50_ratio": p50 / base50, "p99_ratio": p99 / base99})
    if args.json:
        print(json.dumps({"ranks": args.ranks, "steps": args.steps, "cpus": os.cpu_count(), "rows": rows}))
        return 0
    print(f"gate guard vs bare gloo all_gather: {args.ranks} ranks on loopback, {args.steps} steps per variant, "
          f"{os.cpu_count()} CPUs")
    print(f"{'variant':<26} {'p50 us':>9} {'p99 us':>9} {'mean us':>9} {'p50 x':>7} {'p99 x':>7}")
    for row in rows:
        print(f"{row['variant']:<26} {row['p50_us']:>9.1f} {row['p99_us']:>9.1f} {row['mean_us']:>9.1f} "
              f"{row['p50_ratio']:>7.2f} {row['p99_ratio']:>7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
