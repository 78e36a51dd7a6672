"""Speedup with worker processes: `diff` over R ranks of Flight Recorder dumps and of NCCL logs with 1, 2, 4, 8
and 16 workers; wall time, the parse (map) and diagnosis (reduce) phases, peak memory, and every answer checked
(root, window, wedge). Not a test; the README's scaling section comes from it.

    python benchmarks/scale_workers.py --out benchmarks/results --fr 1024x2000,4096x2000 \\
        --nccl 1024x2000,4096x2000 --workers 1,2,4,8,16 [--memory fr:1024x20000] [--budget-s 540]

Each point is one child process, `benchmarks/diff_phases.py` (what `diff --json --workers N` does, phases
timed). Results are written after every point (scale-workers.json), so a run cut short keeps what it measured;
--budget-s stops starting new points past that many seconds. The markdown table and the plot
(scale-workers.md, scale-workers.png) are written at the end, or from a saved JSON with --replot.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from generate import DATA, incident  # noqa: E402
from run_all import RESULTS, _warm, check_diff, measure  # noqa: E402

PHASES = [sys.executable, str(HERE / "diff_phases.py")]
NAMES = {"fr": "Flight Recorder dumps", "nccl": "NCCL debug logs"}


def _sizes(text: str, fmt: str) -> list[tuple[str, int, int]]:
    return [(fmt, int(r), int(o)) for r, o in (item.split("x") for item in text.split(",") if item)]


def point(folder: Path, truth, workers: int) -> dict:
    run = measure(PHASES + ["--workers", str(workers), str(folder)], f"{workers} workers")
    try:
        phases = json.loads(run["stderr"].strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        phases = {}
    check = check_diff(run, truth)
    return {"workers": workers, "wall_s": run["wall_s"], "rc": run["rc"], "maxrss_mib": run["maxrss_mib"],
            "tree_peak_mib": run["tree_peak_mib"], "user_s": run["user_s"], "sys_s": run["sys_s"], **phases,
            "ok": check["ok"], "problems": check["problems"],
            "answer": {k: check.get(k) for k in ("seq_range", "outlier_ranks", "first_visible", "window", "wedge",
                                                   "wedge_range")},
            "stderr_tail": "" if check["ok"] else run["stderr"][-600:]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--fr", default="1024x2000,4096x2000", help="RANKSxENTRIES of the dump incidents")
    parser.add_argument("--nccl", default="1024x2000,4096x2000", help="RANKSxCOLL lines of the log incidents")
    parser.add_argument("--workers", default="1,2,4,8,16")
    parser.add_argument("--memory", default="", help="FMT:RANKSxOPS incidents measured for their peak memory only")
    parser.add_argument("--memory-workers", default="2,16", help="worker counts of the --memory incidents")
    parser.add_argument("--budget-s", type=float, default=1e9, help="start no new point after this many seconds")
    parser.add_argument("--replot", type=Path, help="only write the table and plot of a saved JSON")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    RESULTS.mkdir(parents=True, exist_ok=True)  # measure() keeps a child's output there
    if args.replot:
        results = json.loads(args.replot.read_text())
        write_report(results, args.out)
        return
    started = time.perf_counter()
    workers = [int(w) for w in args.workers.split(",")]
    results: dict = {"when": time.strftime("%Y-%m-%d %H:%M:%S"),
                     "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
                     "command": "python benchmarks/scale_workers.py " + " ".join(sys.argv[1:]),
                     "series": [], "memory": [], "stopped_early": False}
    save = args.out / "scale-workers.json"
    plan = [(*size, "series") for size in _sizes(args.fr, "fr") + _sizes(args.nccl, "nccl")]
    plan += [(m.split(":")[0], *map(int, m.split(":")[1].split("x")), "memory") for m in args.memory.split(",") if m]
    for fmt, ranks, ops, kind in plan:
        if time.perf_counter() - started > args.budget_s:
            results["stopped_early"] = True
            break
        t0 = time.perf_counter()
        folder, truth = incident(fmt, ranks, ops, args.data, workers=os.cpu_count(), quiet=True)
        generated = time.perf_counter() - t0
        _warm(folder)
        series = {"format": fmt, "ranks": ranks, "ops": ops, "collectives": truth.collectives, "bytes": truth.bytes,
                  "generate_s": generated, "points": []}
        (results["memory"] if kind == "memory" else results["series"]).append(series)
        counts = [int(w) for w in args.memory_workers.split(",")] if kind == "memory" else workers
        print(f"== {fmt} {ranks} ranks x {ops:,}: {truth.bytes / 1e9:.2f} GB, generated in {generated:.0f} s",
              flush=True)
        for w in counts:
            if time.perf_counter() - started > args.budget_s:
                results["stopped_early"] = True
                break
            p = point(folder, truth, w)
            series["points"].append(p)
            print(f"  {w:3d} workers: {p['wall_s']:7.2f} s (parse {p.get('parse_s', 0):6.2f}, diagnose "
                  f"{p.get('diagnose_s', 0):6.2f})  peak {p['maxrss_mib']:6.0f} MiB (tree {p['tree_peak_mib']:.0f})"
                  f"  {'right' if p['ok'] else 'WRONG ' + '; '.join(p['problems'])}", flush=True)
            save.write_text(json.dumps(results, indent=1) + "\n")
    results["elapsed_s"] = time.perf_counter() - started
    save.write_text(json.dumps(results, indent=1) + "\n")
    write_report(results, args.out)


def _speedups(series: dict, key: str) -> list[float | None]:
    base = next((p.get(key) for p in series["points"] if p["workers"] == 1), None)
    return [base / p[key] if base and p.get(key) else None for p in series["points"]]


def write_report(results: dict, out: Path) -> None:
    lines = [f"Measured {results['when']} on {results['machine']}. One run per point; wall time of the child "
             f"process, its parse (map, in worker processes) and diagnosis (reduce, one process) phases, peak RSS "
             f"of the main process (os.wait4) and, in brackets, of the whole process tree (sampled every 50 ms).",
             "", "| incident | workers | wall | speedup | parse | parse speedup | diagnose | peak RSS (tree) | answer |",
             "|---|---|---|---|---|---|---|---|---|"]
    for s in results["series"] + results["memory"]:
        name = f"{s['ranks']} x {s['ops']:,} {'FR entries' if s['format'] == 'fr' else 'COLL lines'}"
        for p, sp, pp in zip(s["points"], _speedups(s, "wall_s"), _speedups(s, "parse_s")):
            lines.append(f"| {name} | {p['workers']} | {p['wall_s']:.1f} s | {_x(sp)} | {p.get('parse_s', 0):.1f} s | "
                         f"{_x(pp)} | {p.get('diagnose_s', 0):.1f} s | {p['maxrss_mib'] / 1024:.2f} GiB "
                         f"({p['tree_peak_mib'] / 1024:.2f}) | {'right' if p['ok'] else 'WRONG'} |")
    if results.get("stopped_early"):
        lines += ["", "The run stopped early (its time budget); the points above are all it measured."]
    lines += ["", f"Reproduce: `{results['command']}`"]
    (out / "scale-workers.md").write_text("\n".join(lines) + "\n")
    plot(results, out / "scale-workers.png")
    print("\n".join(lines))


def _x(value: float | None) -> str:
    return f"{value:.1f}x" if value else "-"


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (speed, mem) = plt.subplots(1, 2, figsize=(11, 4.2))
    top = max((p["workers"] for s in results["series"] for p in s["points"]), default=16)
    speed.plot([1, top], [1, top], ":", color="grey", label="linear")
    for s in results["series"]:
        label = f"{NAMES[s['format']]}, {s['ranks']} ranks x {s['ops']:,}"
        xs = [p["workers"] for p in s["points"]]
        line = speed.plot(xs, _speedups(s, "wall_s"), "o-", label=label)[0]
        speed.plot(xs, _speedups(s, "parse_s"), "x--", color=line.get_color(), label="  its parse phase")
        mem.plot(xs, [p["tree_peak_mib"] / 1024 for p in s["points"]], "o-", color=line.get_color(), label=label)
        mem.plot(xs, [p["maxrss_mib"] / 1024 for p in s["points"]], "x--", color=line.get_color(),
                 label="  main process")
    for axis, ylabel, title in ((speed, "speedup over 1 worker", "diff wall time (solid) and parse (dashed)"),
                                (mem, "peak RSS (GiB)", "process tree (solid), main process (dashed)")):
        axis.set_xlabel("workers")
        axis.set_ylabel(ylabel)
        axis.set_xscale("log", base=2)
        axis.set_xticks([1, 2, 4, 8, 16])
        axis.set_xticklabels(["1", "2", "4", "8", "16"])
        axis.set_ylim(bottom=0)
        axis.legend(fontsize=6)
        axis.set_title(title, fontsize=9)
    fig.suptitle(f"ncclforensics diff with worker processes ({results['machine']})", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
