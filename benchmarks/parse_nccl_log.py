"""Benchmark the NCCL_DEBUG log parser on a generated log of a million lines (not a test; run by hand).

    python benchmarks/parse_nccl_log.py [--lines 1000000] [--ranks 8] [--path /tmp/ncclforensics_bench.log]

Writes an 8-process interleaved log (version, INIT and COLL lines, some with timestamps, one WARN) unless the
file exists already, parses it with NcclLogSource and prints the parse time (wall and CPU) and the process's
peak RSS. On a machine shared with other work, the CPU time is the steadier number.
"""

from __future__ import annotations

import argparse
import random
import resource
import time
from pathlib import Path

from ncclforensics.sources.base import InputFile
from ncclforensics.sources.nccl_log import NcclLogSource

OPS = ("AllReduce", "AllGather", "ReduceScatter", "Broadcast")


def generate(path: Path, lines: int, ranks: int) -> None:
    """Write `lines` lines: per rank a version and an INIT line, then interleaved COLL lines, then one WARN."""
    rnd = random.Random(0)
    ptrs = [f"0x{0x55D0C8A3E2B0 + r * 0x10000 + rnd.randrange(0x1000) * 16:x}" for r in range(ranks)]
    with open(path, "w") as out:
        for r in range(ranks):
            pid = 48211 + r
            out.write(f"node-{r // 4}:{pid}:{pid} [{r % 4}] NCCL INFO NCCL version 2.28.9+cuda13.0\n")
            out.write(
                f"node-{r // 4}:{pid}:{pid + 79} [{r % 4}] NCCL INFO ncclCommInitRankConfig comm {ptrs[r]} rank {r} "
                f"nranks {ranks} cudaDev {r % 4} nvmlDev {r % 4} busId {18000 + r * 0x12000:x} "
                "commId 0x3f2a9c1b7d4e8a06 - Init COMPLETE\n"
            )
        batch = []
        for i in range(lines - 2 * ranks - 2):
            r = i % ranks
            pid, n = 48211 + r, i // ranks
            stamp = f"[2026-07-14 09:{n // 60000 % 60:02d}:{n // 1000 % 60:02d}.{n % 1000:03d}] " if i % 3 == 0 else ""
            batch.append(
                f"{stamp}node-{r // 4}:{pid}:{pid} [{r % 4}] NCCL INFO {OPS[n % 4]}: opCount {n:x} "
                f"sendbuff 0x7f3c5e000000 recvbuff 0x7f3c5f400000 count {1048576 >> (n % 4)} datatype 7 op 0 "
                f"root 0 comm {ptrs[r]} [nranks={ranks}] stream 0x55d0c9b01230\n"
            )
            if len(batch) == 10000:
                out.writelines(batch)
                batch.clear()
        out.writelines(batch)
        out.write("\n[2026-07-14 09:41:09] node-1:48215:48301 [0] misc/socket.cc:35 NCCL WARN socketProgress: "
                  "Connection closed by remote peer node-0<43127>\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--path", type=Path, default=Path("/tmp/ncclforensics_bench.log"))
    args = parser.parse_args()
    if not args.path.exists():
        started = time.perf_counter()
        generate(args.path, args.lines, args.ranks)
        print(f"generated {args.path} in {time.perf_counter() - started:.1f}s")
    size = args.path.stat().st_size
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    started, cpu_started = time.perf_counter(), time.process_time()
    evidence = NcclLogSource().parse(InputFile(args.path, args.path.name))
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"input: {size / 1e6:.0f} MB; {evidence.collectives.height} collectives, "
          f"{len(evidence.identities)} identities, {len(evidence.watchdog)} watchdog events, "
          f"{len(evidence.problems)} problems")
    print(f"parse: {elapsed:.2f}s wall, {cpu:.2f}s CPU (all threads)")
    print(f"peak RSS: {peak:.0f} MiB (before parsing: {before:.0f} MiB)")


if __name__ == "__main__":
    main()
