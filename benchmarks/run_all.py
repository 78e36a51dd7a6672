"""Every benchmark in one command: generate the incidents (cached), run each comparison against its baseline,
check the answers, print the table, and write benchmarks/results/latest.md, latest.json and scaling.png.

    python benchmarks/run_all.py [--repeat 3] [--ranks 128,256,512,1024] [--no-scaling] [--no-guard]

| work | baseline | target |
|---|---|---|
| `diff` over 8 NCCL debug logs of 1,000,000 COLL lines each | `grep -c ' opCount '` over the same files | <= 3x its wall time, peak RSS <= 1 GiB |
| `diff` over 64 Flight Recorder dumps of 20,000 entries each | PyTorch's `fr_trace` on the same dumps | >= 5x faster; right root where it reports only the first visible mismatch |
| `diff` over R ranks x 20,000 FR entries and R ranks x 10,000 COLL lines | none | finishes; cost linear in collectives |
| the live guard against a bare gloo all_gather | `benchmarks/bench_guard.py` (its own table) | guard <= 1.3x bare |

Every command runs as a child process; its wall time is measured here, its peak RSS comes from os.wait4 (the
largest of the process and the children it waited for) and, sampled every 50 ms, the sum over its process tree
(what `diff` with worker processes holds at once). Baseline and `diff` runs alternate, so that machine noise hits
both alike; the table shows medians. Absolute times are for this machine and this run only: compare the ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from generate import DATA, Truth, expected_window, incident  # noqa: E402

RESULTS = HERE / "results"
DIFF = [sys.executable, "-m", "ncclforensics.cli", "diff", "--json"]
FR_TRACE = [sys.executable, "-m", "torch.distributed.flight_recorder.fr_trace"]
GIB = 1 << 30


# --- running and measuring a child -------------------------------------------------------------------------------


def _tree_rss_kb(pid: int) -> int:
    """Resident memory of `pid` and all its descendants, in KiB (Linux /proc)."""
    total, todo, seen = 0, [pid], set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
                        break
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except (OSError, ValueError):
            continue
    return total


def measure(cmd: list[str], label: str, timeout: float = 3600.0) -> dict:
    """Run `cmd`; wall time, peak RSS (wait4, and the sampled process-tree sum), exit code, output."""
    out_path, err_path = RESULTS / ".stdout", RESULTS / ".stderr"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, cwd=ROOT)
        tree_peak = 0
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() - started > timeout:
                proc.kill()
            tree_peak = max(tree_peak, _tree_rss_kb(proc.pid))
            time.sleep(0.05)
        wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    return {
        "label": label, "cmd": cmd, "wall_s": wall, "rc": proc.returncode,
        "maxrss_mib": usage.ru_maxrss / 1024, "tree_peak_mib": max(tree_peak, usage.ru_maxrss) / 1024,
        "user_s": usage.ru_utime, "sys_s": usage.ru_stime,
        "stdout": out_path.read_text(errors="replace"), "stderr": err_path.read_text(errors="replace"),
    }


def _median(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def _summary(runs: list[dict]) -> dict:
    return {"runs": len(runs), "wall_s": _median(runs, "wall_s"), "wall_all_s": [round(r["wall_s"], 3) for r in runs],
            "maxrss_mib": max(r["maxrss_mib"] for r in runs), "tree_peak_mib": max(r["tree_peak_mib"] for r in runs),
            "rc": sorted({r["rc"] for r in runs})}


# --- checking the answers ----------------------------------------------------------------------------------------


def check_diff(run: dict, truth: Truth) -> dict:
    """Whether `diff --json` names the injected root (the outlier rank, an extra collective, a range holding the
    injected seq, exactly that seq where call sites pin it), the first visible mismatch, the window (from the
    root to the majority's last seq, with every step end after the root count-mismatched) and the wedge (the
    outlier's last collective, which nobody else launched: exactly where dumps record completions, the end of a
    range where logs record launches only)."""
    problems = []
    try:
        result = json.loads(run["stdout"])
    except json.JSONDecodeError as e:
        return {"ok": False, "problems": [f"no JSON output ({e}); rc {run['rc']}: {run['stderr'][-300:]}"]}
    root = result.get("root") or {}
    low, high = root.get("seq_range") or (None, None)
    if result.get("verdict") != "diverged":
        problems.append(f"verdict {result.get('verdict')}")
    if root.get("outlier_ranks") != [truth.outlier]:
        problems.append(f"outliers {root.get('outlier_ranks')} != [{truth.outlier}]")
    if root.get("kind") != "extra":
        problems.append(f"kind {root.get('kind')}")
    if root.get("comm") != truth.comm:
        problems.append(f"comm {root.get('comm')} != {truth.comm}")
    if low is None or not low <= truth.root_seq <= (truth.root_seq if high is None else high):  # (null: or later)
        problems.append(f"root range {low}..{high} misses seq {truth.root_seq}")
    pinned = truth.format == "flight-recorder"
    if pinned and (low, high) != (truth.root_seq, truth.root_seq):
        problems.append(f"root not pinned to seq {truth.root_seq} by call sites: {low}..{high} ({root.get('pinned_by')})")
    visible = (result.get("first_visible_mismatch") or {}).get("seq")
    if visible != truth.first_visible_seq:
        problems.append(f"first visible mismatch {visible} != {truth.first_visible_seq}")
    expected = expected_window(truth)
    window = result.get("window") or {}
    mismatched = ((window.get("pairing_totals") or {}).get("count_mismatch") or {}).get("collectives")
    start = window.get("first_seq")
    if window.get("last_seq") != expected["last_seq"] or mismatched != expected["count_mismatch"] or start is None \
            or not (low or 0) <= start <= truth.root_seq or (pinned and start != truth.root_seq):
        problems.append(f"window {start}..{window.get('last_seq')} with {mismatched} count-mismatched collectives; "
                        f"expected from {truth.root_seq} to {expected['last_seq']} with {expected['count_mismatch']}")
    # Dumps record completions, so they pin the wedge; logs record launches only, so the wedge is a range that
    # ends at the outlier's last collective (at or before it: one every rank launched may be where it hung).
    wedge = result.get("wedge") or {}
    wedge_low, wedge_high = wedge.get("seq_range") or (None, None)
    wedge_ok = (wedge.get("seq") == expected["wedge_seq"] if pinned else
                wedge_high == expected["wedge_seq"] and wedge.get("bounded_by") in (None, "launches only"))
    if not wedge_ok or wedge.get("comm") != truth.comm:
        problems.append(f"wedge {wedge.get('comm')} seq {wedge.get('seq')} (range {wedge_low}..{wedge_high}) != "
                        f"{truth.comm} seq {expected['wedge_seq']}")
    return {"ok": not problems, "problems": problems, "root_seq": root.get("seq"), "seq_range": [low, high],
            "outlier_ranks": root.get("outlier_ranks"), "pinned_by": root.get("pinned_by"), "first_visible": visible,
            "window": [window.get("first_seq"), window.get("last_seq"), mismatched], "wedge": wedge.get("seq"),
            "wedge_range": [wedge_low, wedge_high]}


def check_fr_trace(run: dict, truth: Truth) -> dict:
    """What fr_trace reports: the seqs of its mismatch blocks; right when the first is the first visible mismatch
    and none is the root (it cannot see the extra collective: its shape equals its neighbours')."""
    text = run["stdout"] + run["stderr"]
    seqs = [int(s) for s in re.findall(r"sequence number: (\d+)", text)]
    first = seqs[0] if seqs else None
    ok = first == truth.first_visible_seq and truth.root_seq not in seqs
    return {"ok": ok, "first_reported": first, "reported": seqs[:12], "names_root": truth.root_seq in seqs,
            "aborted": "Too many mismatches" in text}


# --- the comparisons ---------------------------------------------------------------------------------------------


def compare(baseline_cmd: list[str], label: str, folder: Path, truth: Truth, repeat: int,
            check_baseline) -> dict:
    print(f"\n== {label}: {truth.files} files, {truth.bytes / 1e9:.2f} GB, {truth.collectives:,} collectives", flush=True)
    _warm(folder)
    base_runs, diff_runs = [], []
    for i in range(repeat):
        for runs, cmd, name in ((base_runs, baseline_cmd, "baseline"), (diff_runs, DIFF + [str(folder)], "diff")):
            run = measure(cmd, name)
            runs.append(run)
            print(f"  {name:8s} run {i + 1}: {run['wall_s']:7.2f} s  peak RSS {run['maxrss_mib']:7.0f} MiB "
                  f"(tree {run['tree_peak_mib']:.0f})  rc {run['rc']}", flush=True)
    checks = [check_diff(r, truth) for r in diff_runs]
    base_checks = [check_baseline(r, truth) for r in base_runs] if check_baseline else []
    return {"label": label, "truth": asdict(truth), "baseline": _summary(base_runs), "diff": _summary(diff_runs),
            "diff_check": checks[0] | {"all_ok": all(c["ok"] for c in checks)},
            "baseline_check": (base_checks[0] | {"all_ok": all(c["ok"] for c in base_checks)}) if base_checks else None}


def _warm(folder: Path) -> None:
    """Both sides start with the files in the page cache (and compiled byte code): read them once, run --help."""
    for path in sorted(folder.iterdir()):
        with open(path, "rb") as f:
            while f.read(1 << 24):
                pass
    subprocess.run(DIFF[:-1] + ["--help"], cwd=ROOT, capture_output=True, check=False)


def console_run(folder: Path, truth: Truth) -> dict:
    """One plain `diff` (terminal report, not JSON), for reference: what a user waits for."""
    run = measure(DIFF[:-1] + [str(folder)], "diff (terminal report)")
    print(f"  diff (terminal report) {run['wall_s']:.2f} s  rc {run['rc']}", flush=True)
    return {"wall_s": run["wall_s"], "maxrss_mib": run["maxrss_mib"], "rc": run["rc"]}


def scaling(ranks: list[int], repeat: int) -> dict:
    series = {}
    for fmt, ops in (("nccl", 10_000), ("fr", 20_000)):
        points = []
        for r in ranks:
            folder, truth = incident(fmt, r, ops)
            _warm(folder)
            runs = [measure(DIFF + [str(folder)], f"{fmt} {r} ranks") for _ in range(repeat)]
            check = check_diff(runs[0], truth)
            point = {"ranks": r, "collectives": truth.collectives, "bytes": truth.bytes, **_summary(runs),
                     "ok": check["ok"], "problems": check["problems"]}
            points.append(point)
            print(f"  scaling {fmt:4s} {r:5d} ranks {truth.collectives:>11,} collectives: {point['wall_s']:7.2f} s  "
                  f"peak RSS {point['maxrss_mib']:6.0f} MiB (tree {point['tree_peak_mib']:.0f})  "
                  f"{'right' if check['ok'] else 'WRONG ' + '; '.join(check['problems'])}", flush=True)
        series[fmt] = {"points": points, "fit": linear_fit(points)}
    return series


def linear_fit(points: list[dict]) -> dict:
    """Least squares wall = a + b * collectives; R^2, and each point's deviation from the line."""
    xs = [p["collectives"] for p in points]
    ys = [p["wall_s"] for p in points]
    n = len(xs)
    if n < 2:
        return {}
    mx, my = sum(xs) / n, sum(ys) / n
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    a = my - b * mx
    ss_res = sum((y - (a + b * x)) ** 2 for x, y in zip(xs, ys))
    ss_tot = sum((y - my) ** 2 for y in ys)
    r2 = 1 - ss_res / ss_tot if ss_tot else 1.0
    deviation = [(y - (a + b * x)) / y for x, y in zip(xs, ys)]
    per = [y / x * 1e6 for x, y in zip(xs, ys)]
    return {"intercept_s": a, "slope_us_per_collective": b * 1e6, "r2": r2,
            "max_deviation": max(abs(d) for d in deviation), "us_per_collective": per,
            "linear": r2 >= 0.98 and max(abs(d) for d in deviation) <= 0.15}


def plot(series: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, mem) = plt.subplots(1, 2, figsize=(11, 4.2))
    names = {"fr": "Flight Recorder dumps (x 20,000 entries)", "nccl": "NCCL debug logs (x 10,000 COLL lines)"}
    for fmt, data in series.items():
        xs = [p["collectives"] / 1e6 for p in data["points"]]
        ys = [p["wall_s"] for p in data["points"]]
        line = ax.plot(xs, ys, "o", label=names[fmt])[0]
        fit = data["fit"]
        if fit:
            ends = [0, max(xs)]
            ax.plot(ends, [fit["intercept_s"] + fit["slope_us_per_collective"] * x for x in ends], "--",
                    color=line.get_color(), label=f"fit: {fit['slope_us_per_collective']:.2f} us/collective, "
                                                  f"R2 {fit['r2']:.3f}")
        for p, x, y in zip(data["points"], xs, ys):
            ax.annotate(f"{p['ranks']}", (x, y), textcoords="offset points", xytext=(4, -10), fontsize=7)
        mem.plot(xs, [p["tree_peak_mib"] / 1024 for p in data["points"]], "o-", color=line.get_color(),
                 label=names[fmt])
    for axis, xlabel, ylabel, title in (
            (ax, "collectives in the incident (millions; labels: ranks)", "ncclforensics diff wall time (s)",
             "time vs collectives"),
            (mem, "collectives in the incident (millions)", "peak RSS, process tree (GiB)", "memory vs collectives")):
        axis.set_xlabel(xlabel)
        axis.set_ylabel(ylabel)
        axis.set_xlim(left=0)
        axis.set_ylim(bottom=0)
        axis.legend(fontsize=7)
        axis.set_title(title, fontsize=10)
    fig.suptitle(f"ncclforensics diff scaling ({os.cpu_count()} CPUs; this run only)", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def guard(repeat: int) -> dict | None:
    script = HERE / "bench_guard.py"
    if not script.exists():
        return None
    run = measure([sys.executable, str(script), "--json"], "bench_guard", timeout=1800)
    try:
        result = json.loads(run["stdout"].strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        return {"error": f"rc {run['rc']}: {run['stderr'][-500:]}"}
    result["wall_s"] = run["wall_s"]
    return result


# --- the report --------------------------------------------------------------------------------------------------


def _gib(mib: float) -> str:
    return f"{mib / 1024:.2f} GiB"


def markdown(results: dict) -> str:
    nccl, fr = results["nccl"], results["fr"]
    lines = [
        f"Measured {results['when']} on {results['machine']} (absolute times are this run's only; the ratios are the "
        f"result). Medians of {results['repeat']} alternating runs; peak RSS is the largest process (os.wait4) and, "
        f"in brackets, the sampled sum over the process tree.",
        "",
        "| work | baseline (median) | `ncclforensics diff --json` (median) | ratio | target | met | answer |",
        "|---|---|---|---|---|---|---|",
    ]
    if nccl:
        ratio = nccl["diff"]["wall_s"] / nccl["baseline"]["wall_s"]
        rss = nccl["diff"]["tree_peak_mib"]
        met = ratio <= 3 and rss <= 1024
        lines.append(
            f"| 8 NCCL logs x 1,000,000 COLL lines ({nccl['truth']['bytes'] / 1e9:.2f} GB) | `grep -c ' opCount '` "
            f"{nccl['baseline']['wall_s']:.2f} s | {nccl['diff']['wall_s']:.2f} s, peak RSS "
            f"{_gib(nccl['diff']['maxrss_mib'])} ({_gib(rss)}) | {ratio:.1f}x grep | <= 3x, <= 1 GiB | "
            f"{'yes' if met else 'no' + (' (time)' if ratio > 3 else '') + (' (memory)' if rss > 1024 else '')} | "
            f"{_answer(nccl)} |")
    if fr:
        ratio = fr["baseline"]["wall_s"] / fr["diff"]["wall_s"]
        bc = fr["baseline_check"] or {}
        lines.append(
            f"| 64 FR dumps x 20,000 entries ({fr['truth']['bytes'] / 1e9:.2f} GB) | `fr_trace` "
            f"{fr['baseline']['wall_s']:.2f} s, peak RSS {_gib(fr['baseline']['maxrss_mib'])}; first report: seq "
            f"{bc.get('first_reported')} (the first visible mismatch; names the root: {bc.get('names_root')}) | "
            f"{fr['diff']['wall_s']:.2f} s, peak RSS {_gib(fr['diff']['maxrss_mib'])} "
            f"({_gib(fr['diff']['tree_peak_mib'])}) | {ratio:.1f}x faster | >= 5x | {'yes' if ratio >= 5 else 'no'} | "
            f"{_answer(fr)} |")
    for fmt, name in (("fr", "FR entries"), ("nccl", "COLL lines")):
        data = (results.get("scaling") or {}).get(fmt)
        if not data:
            continue
        points, fit = data["points"], data["fit"]
        top = points[-1]
        lines.append(
            f"| {top['ranks']} ranks x {top['collectives'] // top['ranks']:,} {name} | none | {top['wall_s']:.1f} s, "
            f"peak RSS {_gib(top['maxrss_mib'])} ({_gib(top['tree_peak_mib'])}) | "
            f"{fit.get('slope_us_per_collective', 0):.2f} us/collective, R2 {fit.get('r2', 0):.3f} | finishes, linear "
            f"| {'yes' if all(p['ok'] for p in points) and fit.get('linear') else 'no'} | "
            f"{'right' if all(p['ok'] for p in points) else 'WRONG'} |")
    guard_result = results.get("guard")
    if guard_result and "rows" in guard_result:
        worst = max(r["p50_ratio"] for r in guard_result["rows"][1:])
        lines.append(f"| live guard ({guard_result['ranks']} ranks, {guard_result['steps']} steps) | bare gloo "
                     f"all_gather | see below | p50 up to {worst:.2f}x bare | <= 1.3x | {'yes' if worst <= 1.3 else 'no'} "
                     f"| - |")
    scaling_data = results.get("scaling") or {}
    if scaling_data:
        lines += ["", "Scaling (benchmarks/results/scaling.png):", "",
                  "| format | ranks | collectives | wall | us/collective | peak RSS (tree) | answer |", "|---|---|---|---|---|---|---|"]
        for fmt, data in scaling_data.items():
            for p, per in zip(data["points"], data["fit"].get("us_per_collective", [])):
                lines.append(f"| {fmt} | {p['ranks']} | {p['collectives']:,} | {p['wall_s']:.2f} s | {per:.2f} | "
                             f"{_gib(p['tree_peak_mib'])} | {'right' if p['ok'] else 'WRONG'} |")
    if guard_result and "rows" in guard_result:
        lines += ["", f"bench_guard.py ({guard_result['ranks']} ranks on loopback, {guard_result['steps']} steps per "
                      f"variant, {guard_result['cpus']} CPUs):", "",
                  "| variant | p50 us | p99 us | mean us | p50 x | p99 x |", "|---|---|---|---|---|---|"]
        for r in guard_result["rows"]:
            lines.append(f"| {r['variant']} | {r['p50_us']:.1f} | {r['p99_us']:.1f} | {r['mean_us']:.1f} | "
                         f"{r['p50_ratio']:.2f} | {r['p99_ratio']:.2f} |")
    console = results.get("console") or {}
    if console:
        lines += ["", "For reference, one plain `diff` (the terminal report instead of JSON): " + "; ".join(
            f"{k}: {v['wall_s']:.1f} s" for k, v in console.items()) + "."]
    lines += ["", f"Reproduce: `{results['command']}`"]
    return "\n".join(lines) + "\n"


def _answer(item: dict) -> str:
    check = item["diff_check"]
    if not check["all_ok"]:
        return "WRONG: " + "; ".join(check["problems"])
    low, high = check["seq_range"]
    where = f"seq {low}" if low == high else f"seq {low} or later" if high is None else f"seq {low}..{high}"
    return (f"right: rank {check['outlier_ranks']} extra at {where} (injected {item['truth']['root_seq']}), "
            f"first visible {check['first_visible']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs of each side of a comparison (median)")
    parser.add_argument("--ranks", default="128,256,512,1024", help="rank counts of the scaling runs")
    parser.add_argument("--scaling-repeat", type=int, default=1)
    parser.add_argument("--no-scaling", action="store_true")
    parser.add_argument("--no-guard", action="store_true")
    parser.add_argument("--no-console", action="store_true", help="skip the plain `diff` reference runs")
    parser.add_argument("--only", choices=["nccl", "fr"], help="run one comparison only")
    args = parser.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    results: dict = {
        "when": time.strftime("%Y-%m-%d %H:%M:%S"), "repeat": args.repeat,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "command": "python " + " ".join([str(Path(sys.argv[0]).resolve().relative_to(ROOT)), *sys.argv[1:]]),
        "nccl": None, "fr": None, "scaling": None, "guard": None, "console": {},
    }
    print(f"data: {DATA}", flush=True)
    if args.only in (None, "nccl"):
        folder, truth = incident("nccl", 8, 1_000_000)
        files = sorted(str(p) for p in folder.iterdir())
        results["nccl"] = compare(["grep", "-c", " opCount ", *files], "NCCL logs vs grep", folder, truth,
                                  args.repeat, None)
        if not args.no_console:
            results["console"]["8 NCCL logs"] = console_run(folder, truth)
    if args.only in (None, "fr"):
        folder, truth = incident("fr", 64, 20_000)
        results["fr"] = compare(FR_TRACE + [str(folder), "-p", "fr_rank"], "FR dumps vs fr_trace", folder, truth,
                                args.repeat, check_fr_trace)
        if not args.no_console:
            results["console"]["64 FR dumps"] = console_run(folder, truth)
    if not args.no_scaling and args.only is None:
        print("\n== scaling", flush=True)
        results["scaling"] = scaling([int(r) for r in args.ranks.split(",")], args.scaling_repeat)
        plot(results["scaling"], RESULTS / "scaling.png")
    if not args.no_guard and args.only is None:
        print("\n== live guard (benchmarks/bench_guard.py)", flush=True)
        results["guard"] = guard(args.repeat)
    text = markdown(results)
    (RESULTS / "latest.md").write_text(text)
    (RESULTS / "latest.json").write_text(json.dumps(results, indent=1, default=str) + "\n")
    for leftover in (RESULTS / ".stdout", RESULTS / ".stderr"):
        leftover.unlink(missing_ok=True)
    print("\n" + text)
    print(f"written: {RESULTS / 'latest.md'}, {RESULTS / 'latest.json'}"
          + (f", {RESULTS / 'scaling.png'}" if results["scaling"] else ""))


if __name__ == "__main__":
    main()
