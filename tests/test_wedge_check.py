"""incidents/wedge_check.py and the benchmark's wedge counts: a wedge that leaves the true stall out, or gives a
rank more launches than it made, is counted (beside the property, not as a violation)."""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import pytest
from incidents import Outcome, draw
from incidents.evidence import Written
from incidents.runner import run_seed
from incidents.wedge_check import check_wedge, wedge_dict

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_simulated.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_simulated", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


DUMPS = Written("fr", {"fr": [0, 1, 2, 3]})  # Flight Recorder dumps name each rank's global rank


def _answer(incident, seq_range, launched, comm="0"):
    comm = incident.program.comms[comm].comm_id
    return {"wedge": {"comm": comm, "seq_range": seq_range, "launched": launched}, "stand_in_ranks": {}}


def test_a_wedge_built_to_miss_the_stall_is_counted():
    # Seed 1181020: comm 0 stalled at seq 9; the ranks launched 10, 9, 9 and 9 collectives there.
    incident = draw(1181020)
    assert incident.truth.stalls["0"][0] == 9 and incident.truth.launched["0"] == {0: 10, 1: 9, 2: 9, 3: 9}
    missed = check_wedge(incident, DUMPS, _answer(incident, [1, 8], {"0": 8, "1": 7, "2": 7, "3": 7}))
    assert missed.miss and not missed.launched_over
    over = check_wedge(incident, DUMPS, _answer(incident, [9, 9], {"0": 11, "1": 9, "2": 9, "3": 9}))
    assert not over.miss and over.launched_over == {0: (11, 10)}
    assert not check_wedge(incident, DUMPS, _answer(incident, [1, None], {"0": 8})).miss  # a range open above holds it
    assert check_wedge(incident, DUMPS, _answer(incident, [10, None], {})).miss
    bench = _bench()
    outcomes = [Outcome(seed, "f", "s", "s", wedge=wedge_dict(check))
                for seed, check in ((1, missed), (2, over), (3, None))]
    counted = bench.summarize_wedges(outcomes)
    assert (counted["checked"], counted["wedge_misses"], counted["wedge_miss_seeds"]) == (2, 1, [1])
    assert (counted["launched_over"], counted["launched_over_seeds"]) == (1, [2])
    summary = bench.summarize(outcomes)
    assert summary["with_violations"] == 0  # counted, not violations
    args = argparse.Namespace(start=1, incidents=3, workers=1)
    assert "| 2 | 2 | 0 | 0 | 1 | 1 | 1 (1) | 2 |" in bench.render(summary, args, 1.0)


def test_a_wedge_on_ras_replies_alone_may_give_the_comms_ranks():
    # Seed 1202812: comm 4 is ranks {1, 3}, which launched 1 and 2 collectives there. RAS replies give the pair's
    # ranks only (`Rank 0`, `Rank 1`, each with a process): a wedge giving rank 1 two launches gives rank 3's
    # count. Where dumps name global ranks, the same wedge gives global rank 1 one more than it launched.
    incident = draw(1202812)
    assert incident.program.comms["4"].ranks == (1, 3) and incident.truth.launched["4"] == {1: 1, 3: 2}
    answer = _answer(incident, [1, None], {"0": 1, "1": 2}, comm="4")
    assert not check_wedge(incident, Written("ras", {"ras": [0, 1, 2, 3]}), answer).launched_over
    assert check_wedge(incident, DUMPS, answer).launched_over == {1: (2, 1)}
    # Over read either way (comm rank 0 is rank 1; the job's rank 1 launched 1): counted, as the job's ranks.
    over = _answer(incident, [1, None], {"0": 2, "1": 2}, comm="4")
    assert check_wedge(incident, Written("ras", {"ras": [0, 1, 2, 3]}), over).launched_over == {1: (2, 1)}


def test_a_wedge_on_traces_of_several_comms_is_read_in_trace_positions():
    # Seed 1219789: world 0-3, TP pairs (0,1) (2,3); rank 3 skipped its TP all-reduce of step 0. Ranks 0 and 1
    # traced the world all-reduce and their pair's, rank 3 the world one alone, and rank 2 nothing; the world
    # stalls at its seq 2, which ranks 0 and 1 issued third and rank 3 second. Fingerprint traces name no comm: a
    # stream named by its members holds their collectives of every comm, numbered by trace positions.
    incident = draw(1219789)
    assert incident.truth.stalls["0"][0] == 2 and incident.truth.launched["0"] == {0: 2, 1: 2, 2: 1, 3: 2}
    traces = Written("fp", {"fp": [0, 1, 2, 3]}, fp_scheme="sum_expected")

    def wedge(name, seq_range, launched, comms=()):
        return {"wedge": {"comm": name, "seq_range": seq_range, "launched": launched}, "stand_in_ranks": {},
                "comms": [{"comm": c, "ranks": sorted(n), "launched": n} for c, n in comms]}
    # The stalled collective at positions 3, 3 and 2: the range is no one trace position, left unchecked.
    apart = check_wedge(incident, traces, wedge("[ranks=0,1,3]", [3, None], {"0": 2, "1": 2, "3": 1}))
    assert (apart.numbering, apart.compared, apart.miss) == ("trace", False, False)
    # Ranks 1 and 2 name the world too; rank 2 never issued its seq 2, so the stall is at rank 1's position 3.
    stream = [("[ranks=1,2]", {"1": 2})]
    assert check_wedge(incident, traces, wedge("[ranks=1,2]", [2, 2], {"1": 2}, stream)).miss
    held = check_wedge(incident, traces, wedge("[ranks=1,2]", [3, None], {"1": 3}, stream))
    assert (held.stall, held.miss, held.launched_over) == (3, False, {})  # rank 1 issued 4 collectives in all
    # Where the answer split the traces among comms, its seqs are the comm's.
    split = [("[ranks=0,1,3]", {"0": 1, "1": 1, "3": 1}), ("[ranks=0,1]", {"0": 1, "1": 1})]
    by_comm = check_wedge(incident, traces, wedge("[ranks=0,1,3]", [2, None], {"0": 1, "1": 1, "3": 1}, split))
    assert (by_comm.numbering, by_comm.stall, by_comm.miss) == ("comm", 2, False)
    bench = _bench()
    outcomes = [Outcome(seed, "f", "s", "s", wedge=wedge_dict(check)) for seed, check in ((1, apart), (2, held))]
    assert bench.summarize_wedges(outcomes)["not_comparable_seeds"] == [1]


@pytest.mark.parametrize("seed", [
    1209219,  # every file cut short, one rank's trace past the others' logs: no stop at the trace's end
    1202812, 1206541, 1208908,  # RAS replies alone, NCCL logs of pairs: the comms' ranks
    # fingerprint traces alone: the stalled collective at other trace positions on the named ranks (1219789), TP
    # results read back right apart from the other pair's, which went to the world (1217331, 1301133), and NCCL
    # logs beside the traces (1216836)
    1219789, 1217331, 1301133, 1216836,
])
def test_wedges_once_counted_hold_the_stall_and_no_rank_over(seed, tmp_path):
    wedge = run_seed(seed, tmp_path).wedge
    assert wedge is None or (not wedge["miss"] and not wedge["launched_over"])
