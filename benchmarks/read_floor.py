"""The floor under `diff` on big NCCL logs: what reading the same files costs at each stage, in one run (not a
test). Prints one JSON line: seconds (best of --repeat) for `grep -c ' opCount '`, polars counting the lines of
every file (threads, one file each: the least any polars reader of these files does), the keyed reader of every
file (the parse `diff` runs, threads as `diff` has them), and the whole `diff --json`.

    python benchmarks/read_floor.py benchmarks/data/nccl-8r-1000000 [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import polars as pl

from ncclforensics.sources.base import InputFile
from ncclforensics.sources.nccl_log.keyed import read_keyed


def _best(repeat: int, work) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return round(min(times), 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    files = sorted(p for p in args.folder.iterdir() if p.is_file())
    for path in files:  # page cache warm for every side
        subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL, check=True)
    pool = ThreadPoolExecutor(len(files))

    def count_lines() -> None:
        list(pool.map(lambda p: pl.scan_lines(p).select(pl.len()).collect(engine="streaming"), files))

    def keyed() -> None:
        list(pool.map(lambda p: read_keyed(InputFile(p, p.name), 1), files))

    def grep() -> None:
        # a pipe, not /dev/null: GNU grep stops at the first match when its output is /dev/null
        subprocess.run(["grep", "-c", " opCount ", *map(str, files)], capture_output=True, check=False)

    def diff() -> None:
        subprocess.run([sys.executable, "-m", "ncclforensics.cli", "diff", "--json", str(args.folder)],
                       stdout=subprocess.DEVNULL, check=False)

    result = {"files": len(files), "bytes": sum(p.stat().st_size for p in files), "cpus": os.cpu_count(),
              "grep_s": _best(args.repeat, grep), "polars_count_lines_s": _best(args.repeat, count_lines),
              "keyed_parse_s": _best(args.repeat, keyed), "diff_s": _best(args.repeat, diff)}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
