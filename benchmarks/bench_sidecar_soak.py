"""The gate sidecar over a million steps: 2 ranks, --no-follow on pre-written journals; peak RSS per rank.

Memory must not grow with the number of steps: exchanged steps are dropped and reading pauses while a rank is
ahead. The same run at --steps 100000 and 1000000 should show the same peak.

    python benchmarks/bench_sidecar_soak.py [--steps 1000000] [--format jsonl|kv] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def write_journals(folder: Path, steps: int, fmt: str) -> list[Path]:
    """Two journals; rank 1's gate passes alone every 100,000th step (so alerts are exercised too)."""
    paths = []
    for rank in range(2):
        path = folder / (f"gate_rank{rank}.jsonl" if fmt == "jsonl" else f"gate_rank{rank}.log")
        with open(path, "w", buffering=1 << 20) as f:
            for step in range(steps):
                decision = "pass" if rank == 1 and step % 100_000 == 99_999 else "skip"
                if fmt == "jsonl":
                    f.write(f'{{"step": {step}, "rank": {rank}, "seq": {1000 + step}, "decision": "{decision}", '
                            f'"fits": false, "md_none": false, "sched_count": 4, "mode": "observe"}}\n')
                else:
                    f.write(f"step={step} rank={rank} seq={1000 + step} fits=0 decision={decision}\n")
        paths.append(path)
    return paths


def peak_rss_kib(pid: int, sample: dict) -> None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    sample[pid] = max(sample.get(pid, 0), int(line.split()[1]))
    except OSError:
        pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--format", choices=["jsonl", "kv"], default="jsonl")
    parser.add_argument("--keep", default=None, help="write the journals here and keep them")
    args = parser.parse_args()
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="soak-"))
    folder.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    paths = write_journals(folder, args.steps, args.format)
    written = time.monotonic() - started
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    started = time.monotonic()
    procs = [subprocess.Popen(
        [sys.executable, "-m", "ncclforensics.live.cli", "sidecar", "--rank", str(rank), "--world-size", "2",
         "--store", f"127.0.0.1:{port}", "--journal", str(path), "--no-follow", "--timeout", "60",
         "--alerts", str(folder / f"alerts{rank}.jsonl")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for rank, path in enumerate(paths)]
    peaks: dict[int, int] = {}
    while any(p.poll() is None for p in procs):
        for p in procs:
            peak_rss_kib(p.pid, peaks)
        time.sleep(0.05)
    took = time.monotonic() - started
    outputs = [p.communicate() for p in procs]
    alerts = len((folder / "alerts0.jsonl").read_text().splitlines()) if (folder / "alerts0.jsonl").exists() else 0
    children_peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KiB on Linux
    result = {
        "steps": args.steps, "format": args.format, "journal_bytes": sum(p.stat().st_size for p in paths),
        "write_s": round(written, 1), "sidecar_s": round(took, 1), "steps_per_s": round(args.steps / took),
        "exit_codes": [p.returncode for p in procs], "alerts": alerts,
        "peak_rss_mib": {str(r): round(peaks.get(p.pid, 0) / 1024, 1) for r, p in enumerate(procs)},
        "peak_rss_mib_getrusage": round(children_peak / 1024, 1),
        "stderr": [o[1].strip().splitlines()[-1] if o[1].strip() else "" for o in outputs],
    }
    print(json.dumps(result, indent=2))
    if not args.keep:
        for path in folder.iterdir():
            path.unlink()
        folder.rmdir()
    return 0 if result["exit_codes"] == [1, 1] else 1


if __name__ == "__main__":
    sys.exit(main())
