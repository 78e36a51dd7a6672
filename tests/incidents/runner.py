"""Draw, write, diagnose and check one incident per seed; in parallel over many seeds.

    outcome = run_seed(1234, Path("/tmp/work"))          # one incident, its folder removed afterwards
    outcomes = run_seeds(range(500), Path("/tmp/work"), workers=2)

Replay a seed and keep its folder: `python benchmarks/bench_simulated.py --replay 1234 --out DIR`.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import random
import shutil
import traceback
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from .evidence import draw_subset
from .incident import draw
from .oracle import Outcome, Violation, check
from .wedge_check import check_wedge, wedge_dict

REPLAY = "python benchmarks/bench_simulated.py --replay {seed} --out DIR"


def evidence_rng(seed: int) -> random.Random:
    """The random stream that picks and shapes an incident's evidence (apart from the incident's own)."""
    return random.Random(f"evidence:{seed}")


def run_seed(seed: int, workdir: Path, keep: bool = False) -> Outcome:
    """The property for the incident of `seed` (its folder under `workdir`, removed unless `keep`)."""
    from ncclforensics.api import diff_paths
    from ncclforensics.report.data import diff_dict, problem_dict

    incident = draw(seed)
    rng = evidence_rng(seed)
    subset, kinds = draw_subset(rng, incident.program.world)
    folder = Path(workdir) / f"incident-{seed}"
    if folder.exists():
        shutil.rmtree(folder)
    written = incident.write(folder, kinds, rng)
    written.subset = subset
    try:
        parsed, diagnosis = diff_paths([str(folder)])
        answer = diff_dict(diagnosis)
        problems = [{**problem_dict(p), "file": Path(p.loc.path).name} for p in parsed.all_problems]
    except Exception:  # noqa: BLE001 - a crash is a finding, reported with its traceback
        outcome = Outcome(seed, incident.fault.name, subset, written.label,
                          [Violation("crash", traceback.format_exc(limit=6))])
        answer = {}
    else:
        try:
            outcome = check(incident, written, answer, problems)
            outcome.wedge = wedge_dict(check_wedge(incident, written, answer))
        except Exception:  # noqa: BLE001 - an answer the contract does not describe
            outcome = Outcome(seed, incident.fault.name, subset, written.label,
                              [Violation("crash", "the answer does not follow the JSON contract:\n"
                                                  + traceback.format_exc(limit=4))])
    if not outcome.ok:
        outcome.message = failure_message(incident, written, answer, outcome)
    if not keep:
        shutil.rmtree(folder, ignore_errors=True)
    return outcome


def failure_message(incident, written, answer: dict, outcome: Outcome) -> str:
    """Everything needed to understand and replay a violation."""
    shown = {k: answer.get(k) for k in ("verdict", "summary", "root", "wedge", "window")}
    if shown.get("root"):
        shown["root"] = {k: v for k, v in shown["root"].items() if k != "ops"}
    if shown.get("wedge"):
        shown["wedge"] = {k: v for k, v in shown["wedge"].items() if k != "ops"}
    lines = [
        f"seed {incident.seed}: " + "; ".join(f"{v.kind}: {v.detail}" for v in outcome.violations),
        f"evidence: {json.dumps(written.as_dict())}",
        f"visible: {outcome.visible}",
        incident.describe(),
        f"answer: {json.dumps(shown, default=str)[:3000]}",
        f"replay: {REPLAY.format(seed=incident.seed)}",
    ]
    return "\n".join(lines)


def _worker(args: tuple[list[int], str]) -> list[Outcome]:
    seeds, workdir = args
    return [run_seed(seed, Path(workdir)) for seed in seeds]


def run_seeds(seeds: Iterable[int], workdir: Path, workers: int = 1, chunk: int = 25) -> list[Outcome]:
    """run_seed over `seeds`, in `workers` processes (spawned: the parent may already run polars threads)."""
    seeds = list(seeds)
    Path(workdir).mkdir(parents=True, exist_ok=True)
    if workers <= 1:
        return [run_seed(seed, Path(workdir)) for seed in seeds]
    chunks = [(seeds[i:i + chunk], str(workdir)) for i in range(0, len(seeds), chunk)]
    # not multiprocessing.Pool: its workers are daemonic, and diff_paths may start worker processes of its own
    with ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn")) as pool:
        return [o for part in pool.map(_worker, chunks) for o in part]
