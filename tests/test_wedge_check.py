"""incidents/wedge_check.py and the benchmark's wedge counts: a wedge that leaves the true stall out, or gives a
rank more launches than it made, is counted (beside the property, not as a violation)."""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

from incidents import Outcome, draw
from incidents.wedge_check import check_wedge, wedge_dict

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_simulated.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_simulated", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _answer(incident, seq_range, launched):
    comm = incident.program.comms["0"].comm_id
    return {"wedge": {"comm": comm, "seq_range": seq_range, "launched": launched}, "stand_in_ranks": {}}


def test_a_wedge_built_to_miss_the_stall_is_counted():
    # Seed 1181020: comm 0 stalled at seq 9; the ranks launched 10, 9, 9 and 9 collectives there.
    incident = draw(1181020)
    assert incident.truth.stalls["0"][0] == 9 and incident.truth.launched["0"] == {0: 10, 1: 9, 2: 9, 3: 9}
    missed = check_wedge(incident, _answer(incident, [1, 8], {"0": 8, "1": 7, "2": 7, "3": 7}))
    assert missed.miss and not missed.launched_over
    over = check_wedge(incident, _answer(incident, [9, 9], {"0": 11, "1": 9, "2": 9, "3": 9}))
    assert not over.miss and over.launched_over == {0: (11, 10)}
    assert not check_wedge(incident, _answer(incident, [1, None], {"0": 8})).miss  # a range open above holds it
    assert check_wedge(incident, _answer(incident, [10, None], {})).miss
    bench = _bench()
    outcomes = [Outcome(seed, "f", "s", "s", wedge=wedge_dict(check))
                for seed, check in ((1, missed), (2, over), (3, None))]
    counted = bench.summarize_wedges(outcomes)
    assert (counted["checked"], counted["wedge_misses"], counted["wedge_miss_seeds"]) == (2, 1, [1])
    assert (counted["launched_over"], counted["launched_over_seeds"]) == (1, [2])
    summary = bench.summarize(outcomes)
    assert summary["with_violations"] == 0  # counted, not violations
    args = argparse.Namespace(start=1, incidents=3, workers=1)
    assert "| 2 | 2 | 1 | 1 | 1 (1) | 2 |" in bench.render(summary, args, 1.0)
