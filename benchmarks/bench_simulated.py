"""The simulated-incident property over many seeds (tests/incidents; tests/test_simulated_incidents.py runs a sample).

    python benchmarks/bench_simulated.py --incidents 10000 --workers 2
    python benchmarks/bench_simulated.py --replay 1234 --out /tmp/incident-1234

Each seed draws a tensor-parallel decode program, a fault (or none), what NCCL 2.28.9 makes of it, a subset of the
evidence (NCCL logs, Flight Recorder dumps, watchdog logs, gate journals, fingerprint traces, for all or some ranks),
writes it in the real formats, runs `diff` on it and checks the answer against the truth. Writes
`benchmarks/results/simulated.md` and `.json`: violations by kind with example seeds, the pin rate (the root's
seq_range is the one true seq) per evidence subset and per fault kind, and beside the property the wedge against the
truth's stalls (tests/incidents/wedge_check.py): `wedge_misses` (a wedge on a stalled comm whose seq_range leaves the
stall out) and `launched_over` (a rank's launched in the wedge above the truth's), counted, not violations; a comm
named by its members whose fingerprint traces record several comms is read in trace positions, or, where its seqs
are no numbering the truth can be read in, counted apart as `not_comparable`.

`--replay SEED --out DIR` writes that seed's evidence to DIR (kept), prints the truth, the answer and the verdict.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from incidents import VIOLATIONS, run_seed, run_seeds
from incidents.oracle import Outcome

RESULTS = ROOT / "benchmarks" / "results"
EXAMPLES = 5


def _rate(hits: int, total: int) -> str:
    return f"{hits}/{total} ({100 * hits / total:.0f}%)" if total else "-"


def _compact(o: Outcome) -> dict:
    """One violating incident in a line: enough to group them and to pick seeds to replay."""
    root = {k: (o.root or {}).get(k) for k in ("comm", "seq_range", "outlier_ranks", "kind", "pinned_by")}
    return {"seed": o.seed, "fault": o.fault, "subset": o.label, "kinds": sorted({v.kind for v in o.violations}),
            "verdict": o.verdict, "root": root if o.root else None}


def summarize(outcomes: list[Outcome]) -> dict:
    """Counts, violations with example seeds, pin rates per subset and per fault kind."""
    by_kind: dict[str, list[int]] = defaultdict(list)
    by_kind_fault: dict[str, Counter] = defaultdict(Counter)
    for o in outcomes:
        for kind in sorted({v.kind for v in o.violations}):
            by_kind[kind].append(o.seed)
            by_kind_fault[kind][o.fault] += 1

    def table(key) -> dict[str, dict]:
        rows: dict[str, dict] = defaultdict(lambda: {"incidents": 0, "violations": 0, "expected_root": 0, "pinned": 0,
                                                      "cut_explained": 0})
        for o in outcomes:
            row = rows[key(o)]
            row["incidents"] += 1
            row["violations"] += not o.ok
            row["expected_root"] += o.expected_root
            row["pinned"] += o.pinned and o.expected_root
            row["cut_explained"] += o.cut_explained
        return dict(sorted(rows.items()))

    patterns: dict[tuple, list[int]] = defaultdict(list)
    for o in outcomes:
        for kind in sorted({v.kind for v in o.violations}):
            answer = (o.root or {}).get("kind") or f"no root ({o.verdict})"
            patterns[(kind, o.fault, str(answer))].append(o.seed)
    return {
        "incidents": len(outcomes),
        "wedge": summarize_wedges(outcomes),
        "patterns": [{"violation": k, "fault": f, "answer": a, "incidents": len(s), "seeds": s[:EXAMPLES * 2]}
                     for (k, f, a), s in sorted(patterns.items(), key=lambda x: -len(x[1]))],
        "violating": [_compact(o) for o in outcomes if not o.ok],
        "with_violations": sum(not o.ok for o in outcomes),
        "faults": dict(sorted(Counter(o.fault for o in outcomes).items())),
        "violations": {k: {"incidents": len(by_kind[k]), "seeds": by_kind[k][:EXAMPLES * 4],
                           "by_fault": dict(by_kind_fault[k])} for k in VIOLATIONS if by_kind.get(k)},
        "per_subset": table(lambda o: o.subset),
        "per_label": table(lambda o: o.label),
        "per_fault": table(lambda o: o.fault),
    }


def summarize_wedges(outcomes: list[Outcome]) -> dict:
    """The wedge against the stalls over the incidents with a stalled comm and a wedge (not violations)."""
    checked = [o for o in outcomes if o.wedge is not None]
    misses = [o.seed for o in checked if o.wedge["miss"]]
    over = [o.seed for o in checked if o.wedge["launched_over"]]
    apart = [o.seed for o in checked if not o.wedge.get("compared", True)]
    return {
        "checked": len(checked),
        "on_stalled_comm": sum(o.wedge["stall"] is not None for o in checked if o.wedge.get("compared", True)),
        "not_comparable": len(apart),
        "not_comparable_seeds": apart[:EXAMPLES * 4],
        "in_trace_positions": sum(o.wedge.get("numbering") == "trace" and o.wedge.get("compared", True)
                                  for o in checked),
        "wedge_misses": len(misses),
        "wedge_miss_seeds": misses[:EXAMPLES * 4],
        "launched_over": len(over),
        "launched_over_ranks": sum(len(o.wedge["launched_over"]) for o in checked),
        "launched_over_seeds": over[:EXAMPLES * 4],
    }


def solver_version() -> str:
    """Which ncclforensics answered: its folder, and the commit (with or without uncommitted changes)."""
    import subprocess

    import ncclforensics

    where = Path(ncclforensics.__file__).resolve().parent
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=where, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "."], cwd=where, capture_output=True,
                               text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return f"`{where}` (not a git checkout)"
    return f"`{where}` at {head}" + (" with uncommitted changes" if dirty else "")


def render(summary: dict, args: argparse.Namespace, seconds: float) -> str:
    """The Markdown report."""
    lines = [
        "# Simulated incidents",
        "",
        f"Measured {time.strftime('%Y-%m-%d %H:%M:%S')} on {platform.machine()}, Python {platform.python_version()}: "
        f"seeds {args.start}..{args.start + args.incidents - 1}, {args.workers} workers, {seconds:.0f} s "
        f"({1000 * seconds / max(1, summary['incidents']):.0f} ms an incident). Generated by "
        "`python benchmarks/bench_simulated.py`; the property and the simulator are in `tests/incidents/`.",
        "",
        f"Solver: {summary.get('solver', '?')}.",
        "",
        f"**{summary['with_violations']} of {summary['incidents']} incidents break the property.**",
        "",
        "## Violations",
        "",
        "| kind | incidents | by fault | example seeds |",
        "|---|---:|---|---|",
    ]
    for kind, v in summary["violations"].items():
        faults = ", ".join(f"{f} {n}" for f, n in sorted(v["by_fault"].items(), key=lambda x: -x[1]))
        lines.append(f"| `{kind}` | {v['incidents']} | {faults} | {', '.join(map(str, v['seeds'][:EXAMPLES]))} |")
    if not summary["violations"]:
        lines.append("| (none) | 0 | | |")
    w = summary["wedge"]
    lines += ["", "## Wedge (beside the property, not violations)", "",
              "Incidents whose truth has a stalled comm and whose answer has a wedge: wedge_misses, the wedge names "
              "a stalled comm and its seq_range leaves the stall seq out; launched_over, a rank's launched in the "
              "wedge is above the truth's. A comm named by its members whose traces record several comms is read in "
              "trace positions (in traces: how many); not comparable, where its seqs are no numbering the truth can "
              "be read in (the stalled collective at different positions in the named ranks' traces), left "
              "unchecked.", "",
              "| checked | on a stalled comm | in traces | not comparable | wedge_misses | example seeds "
              "| launched_over (ranks) | example seeds |",
              "|---:|---:|---:|---:|---:|---|---:|---|",
              f"| {w['checked']} | {w['on_stalled_comm']} | {w.get('in_trace_positions', 0)} | "
              f"{w.get('not_comparable', 0)} | {w['wedge_misses']} | "
              f"{', '.join(map(str, w['wedge_miss_seeds'][:EXAMPLES]))} | {w['launched_over']} "
              f"({w['launched_over_ranks']}) | {', '.join(map(str, w['launched_over_seeds'][:EXAMPLES]))} |"]
    lines += ["", "Replay one: `python benchmarks/bench_simulated.py --replay SEED --out DIR`.", "",
              "## Patterns (violation, fault, the answer's root kind)", "",
              "| violation | fault | answer | incidents | example seeds |", "|---|---|---|---:|---|"]
    for p in summary["patterns"][:40]:
        lines.append(f"| `{p['violation']}` | {p['fault']} | {p['answer']} | {p['incidents']} | "
                     f"{', '.join(map(str, p['seeds'][:EXAMPLES]))} |")
    lines.append("")
    for title, key in (("Per evidence subset", "per_subset"), ("Per fault kind", "per_fault"),
                       ("Per evidence subset and fingerprint scheme", "per_label")):
        lines += [f"## {title}", "",
                  "pinned: the root's seq_range is the one true seq, among incidents whose evidence shows the "
                  "divergence; cut: answers that rest on a file cut short (not counted as violations).", "",
                  "| | incidents | violations | root visible | pinned | cut |", "|---|---:|---:|---:|---:|---:|"]
        for name, row in summary[key].items():
            lines.append(f"| {name} | {row['incidents']} | {row['violations']} | {row['expected_root']} | "
                         f"{_rate(row['pinned'], row['expected_root'])} | {row['cut_explained']} |")
        lines.append("")
    return "\n".join(lines)


def replay(seed: int, out: Path) -> int:
    """Write one seed's evidence to `out` and explain the verdict."""
    from incidents import draw

    outcome = run_seed(seed, out, keep=True)
    folder = out / f"incident-{seed}"
    print(f"evidence in {folder}")
    print(draw(seed).describe())
    print(f"subset: {outcome.label}; visible: {outcome.visible}")
    root = {k: v for k, v in (outcome.root or {}).items() if k != "ops"}
    print(f"answer: verdict {outcome.verdict}, root {json.dumps(root)}")
    print(outcome.message if outcome.message else "the answer has the property")
    if outcome.wedge is not None:
        w = outcome.wedge
        print(f"wedge: comm {w['comm']} seq_range {w['seq_range']}, stall {w['stall']}"
              + (" (in trace positions)" if w.get("numbering") == "trace" and w.get("compared", True) else "")
              + ("; not comparable (the named ranks' traces put the stalled collective at different positions, "
                 "or the answer split some of them among comms)" if not w.get("compared", True) else "")
              + ("; misses the stall" if w["miss"] else "")
              + (f"; launched over the truth's {w['launched_over']}" if w["launched_over"] else ""))
    return 0 if outcome.ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--incidents", type=int, default=10000)
    parser.add_argument("--start", type=int, default=0, help="first seed")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--replay", type=int, default=None, metavar="SEED")
    parser.add_argument("--out", type=Path, default=None, help="with --replay: the folder to write to")
    parser.add_argument("--results", type=Path, default=RESULTS, help="where simulated.md/.json go")
    parser.add_argument("--solver-label", default=None,
                        help="how the report names the solver (default: its folder and git commit)")
    args = parser.parse_args()
    if args.replay is not None:
        return replay(args.replay, args.out or Path(tempfile.mkdtemp(prefix="incident-")))
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="simulated-") as work:
        outcomes = run_seeds(range(args.start, args.start + args.incidents), Path(work), workers=args.workers)
    seconds = time.perf_counter() - started
    summary = summarize(outcomes)
    summary["solver"] = args.solver_label or solver_version()
    examples = {seed for v in summary["violations"].values() for seed in v["seeds"]}
    summary["messages"] = {str(o.seed): o.message for o in outcomes if o.seed in examples}
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "simulated.json").write_text(json.dumps(summary, indent=1) + "\n")
    (args.results / "simulated.md").write_text(render(summary, args, seconds) + "\n")
    print(render(summary, args, seconds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
