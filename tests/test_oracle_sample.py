"""A fast sample of benchmarks/oracle_cuts.py: a handful of cut, uneven and mixed cases of real captures, each
diagnosed whole and judged against the capture's whole evidence (the full run: benchmarks/results/oracle_cuts.md)."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest
from cli_helpers import diff_json, real

_SPEC = importlib.util.spec_from_file_location(
    "oracle_cuts", Path(__file__).resolve().parent.parent / "benchmarks" / "oracle_cuts.py")
oracle = sys.modules.setdefault("oracle_cuts", importlib.util.module_from_spec(_SPEC))
_SPEC.loader.exec_module(oracle)

# Cases the diagnosis still gets wrong, from benchmarks/results/oracle_cuts.md. Strict: when one is fixed, it fails
# here until it is moved into SAMPLE.
KNOWN: dict[tuple, str] = {
}
SAMPLE = [
    ("killed-rank", ("kinds", "fingerprint")),
    ("extra-op-4rank", ("cut", "gate_journal_rank0.log", "mid", 11)),
    ("extra-op-4rank", ("cut", "fingerprint_rank1.log", "mid", 5)),
    ("extra-op-4rank", ("cut", "nccl.vm.443.log", "line", 80)),
    ("extra-op-4rank", ("cut", "ras_status_q1.txt", "mid", 20)),
    ("extra-op-4rank", ("job", "long-window")),
    ("extra-op-4rank", ("split", "0,1")),
    ("extra-op-4rank", ("kinds", "gate-journal+nccl-log+ras-json+ras-text")),
    ("transient-skew", ("cut", "nccl.vm.592.log", "line", 900)),
    ("transient-skew", ("rank", 2, 10)),
    ("extra-op-4rank", ("cut", "fr_rank2", "byte", 10552)),  # a dump cut short: no wedge where it ends
    ("extra-op-4rank", ("rank", 1, 10)),  # every file of rank 1 cut at half
    ("pipeline-healthy", ("cut", "nccl.vm.431.log", "mid", 31)),  # an NCCL log cut inside its last line
    ("extra-op-4rank", ("rank", 0, 5)),  # every file of rank 0 cut before the root: no agreement claimed
    ("long-window", ("kinds", "fingerprint")),  # traces end before the stop: at or after seq 91
    ("subcomm-divergence", ("kinds", "nccl-log")),  # launches only: at or before seq 12 (the wedge is 11)
    ("type-mismatch", ("kinds", "ras-json+ras-text")),  # RAS counts: at or before seq 18 (the wedge is 17)
    ("serving-tp-in-dp-8rank", ("kinds", "nccl-log")),  # the DP comm that waits on the TP comm is no wedge
    ("serving-tp-in-dp-8rank", ("kinds", "ras-json+ras-text")),  # TP comm ranks, compared as their processes
    ("wrapped-ring", ("rank", 0, 14)),  # a trace beside a log cut short and a later ring lines up by seq
    ("serving-reorder-heals", ("rank", 0, 5)),  # a rank cut before an even split cannot make it a majority
    ("serving-two-drafters-8rank", ("rank", 2, 5)),  # an outlier cut before the root is on neither side
    ("long-window", ("rank", 1, 1)),  # records short of the others' completions: the root is anywhere after
    ("extra-op-4rank", ("rank", 0, 1)),  # no record of rank 0 in its comm: its RAS count still disagrees
    ("serving-drafter-typeboundary", ("kinds", "fingerprint+gate-journal+nccl-log+torch-log")),  # extras off the end
    ("serving-drafter-typeboundary", ("rank", 1, 5)),  # counted past its records: departed anywhere past them
    ("serving-skipped-allreduce", ("rank", 0, 10)),  # the same, for a rank that skipped one
    ("serving-reorder-heals", ("kinds", "nccl-log")),  # launches alike on every rank: nothing to show
    ("sharded-frozen-layer-3rank", ("rank", 2, 19)),  # counted past records that end in lookalikes: from their head
    ("subcomm-divergence", ("split", "0,1,2")),  # a group of one logged rank is tied to the comm of its size
    ("subcomm-divergence", ("rank", 2, 19)),  # a peer cut short: its comm is not known to agree, so it may be first
    ("subcomm-divergence", ("kinds", "ras-json+ras-text+torch-log")),  # RAS's comm hash is the group of its ranks
    ("killed-rank", ("kinds", "fingerprint+torch-log")),  # a desync report's laggard count is a floor, not agreement
    ("serving-skipped-allreduce", ("rank", 0, 1)),  # counted past records it has none of: departed from seq 1 on
    ("serving-skipped-16rank", ("rank", 11, 17)),  # its last record lacks the stack: it fits the others' one on
    ("subcomm-divergence", ("rank", 3, 1)),  # lengths-only world root is the consequence of tp{2,3}'s RAS counts
    ("subcomm-divergence", ("rank", 0, 7)),  # a trace of a rank in two comms does not carry on its cut world stream
    ("subcomm-divergence", ("kinds", "fingerprint+gate-journal")),  # a deviant's trace ends before the gate step
    ("subcomm-divergence", ("kinds", "fingerprint+torch-log")),  # results wrong where records agree: a root there
    ("type-mismatch", ("kinds", "fingerprint+gate-journal")),  # traces end before the gate's step: at 16 or later
    ("type-mismatch", ("kinds", "fingerprint+gate-journal+ras-json+ras-text")),  # RAS of a comm not tied to them
    *KNOWN,
]
_PROFILES: dict[str, tuple] = {}


def run(capture: str, case: tuple, tmp_path: Path) -> tuple[str, str]:
    folder = real(capture)
    if capture not in _PROFILES:
        _PROFILES[capture] = oracle.profile(folder)
    kinds, ranks, whole = _PROFILES[capture]
    others = {p.name: p for p in folder.parent.iterdir()}
    outcome, why, _ = oracle.run_case(folder, case, kinds, ranks, whole, others, tmp_path / "case")
    return outcome, why


@pytest.mark.parametrize("capture, case", [
    pytest.param(c, k, marks=pytest.mark.xfail(strict=True, reason=KNOWN[(c, k)])) if (c, k) in KNOWN else (c, k)
    for c, k in SAMPLE])
def test_a_cut_never_changes_the_answer(capture, case, tmp_path):
    outcome, why = run(capture, case, tmp_path)
    assert outcome != "violation", why


def test_the_oracle_tells_a_changed_answer_from_an_honest_range():
    whole = oracle.Answer("DIVERGED", "0xabc", 25, 25, frozenset({0}), False, "0xabc", 50)
    wider = oracle.Answer("DIVERGED", "0xabc", 1, 41, frozenset({0}), False, "0xabc", 50)
    moved = oracle.Answer("DIVERGED", "0xabc", 1, 1, frozenset({0}), False, "0xabc", 50)
    blamed = oracle.Answer("DIVERGED", "0xabc", 25, 25, frozenset({1}), False, "0xabc", 50)
    unknown = oracle.Answer("DIVERGED", "0xabc", -math.inf, math.inf, frozenset({0}), False, None, None)
    assert oracle.judge(whole, whole, reported=False, cut=True)[0] == "same"
    assert oracle.judge(wider, whole, reported=True, cut=True)[0] == "widened"
    assert oracle.judge(wider, whole, reported=False, cut=True)[0] == "violation"  # widened by a cut not said
    assert oracle.judge(unknown, whole, reported=True, cut=True)[0] == "widened"
    for wrong in (moved, blamed, oracle.Answer("CONSISTENT")):
        assert oracle.judge(wrong, whole, reported=True, cut=True)[0] == "violation"
    assert oracle.judge(whole, oracle.Answer("CONSISTENT"), reported=True, cut=True)[0] == "violation"


def test_agreement_is_excused_only_where_the_launch_log_shows_nothing_those_kinds_record():
    """A reorder that healed launched the same types and sizes on every rank; a skipped collective and a type
    boundary did not, and a capture without a launch log proves nothing."""
    assert oracle.launches_alike(real("serving-reorder-heals"))
    for capture in ("serving-skipped-allreduce", "serving-drafter-typeboundary", "extra-op-4rank"):
        assert not oracle.launches_alike(real(capture))


def test_an_outlier_the_cut_left_unplaced_may_be_left_out_only_where_the_answer_says_so():
    whole = oracle.Answer("DIVERGED", "0xabc", 27, 27, frozenset({2, 5}), False, "0xabc", 28)
    said = oracle.Answer("DIVERGED", "0xabc", 27, 27, frozenset({5}), False, "0xabc", 28, unplaced=frozenset({2}))
    unsaid = oracle.Answer("DIVERGED", "0xabc", 27, 27, frozenset({5}), False, "0xabc", 28)
    assert oracle.judge(said, whole, reported=False, cut=False, cut_ranks=frozenset({2}))[0] == "widened"
    assert oracle.judge(unsaid, whole, reported=False, cut=False, cut_ranks=frozenset({2}))[0] == "violation"
    # Unplaced where the case cut nothing of it is no excuse; nor is naming a rank the whole does not.
    assert oracle.judge(said, whole, reported=False, cut=False, cut_ranks=frozenset({3}))[0] == "violation"
    extra = oracle.Answer("DIVERGED", "0xabc", 27, 27, frozenset({1, 5}), False, "0xabc", 28,
                          unplaced=frozenset({2}))
    assert oracle.judge(extra, whole, reported=False, cut=False, cut_ranks=frozenset({2}))[0] == "violation"


def test_a_wedge_bound_holds_where_it_contains_the_whole_evidences_wedge():
    whole = oracle.Answer("DIVERGED", "0xabc", 25, 25, frozenset({0}), False, "0xabc", 50)
    def bound(low, high):
        return oracle.Answer("DIVERGED", "0xabc", 25, 25, frozenset({0}), False, "0xabc", low, high)
    assert oracle.judge(bound(48, math.inf), whole, reported=True, cut=False)[0] == "widened"  # at or after 48
    assert oracle.judge(bound(1, 50), whole, reported=True, cut=False)[0] == "widened"  # at or before 50
    assert oracle.judge(bound(51, math.inf), whole, reported=True, cut=False)[0] == "violation"
    assert oracle.judge(bound(1, 49), whole, reported=True, cut=False)[0] == "violation"
    other = oracle.Answer("DIVERGED", "0xabc", 25, 25, frozenset({0}), False, "0xdef", 1, 60)
    assert oracle.judge(other, whole, reported=True, cut=False)[0] == "violation"  # another communicator
    assert oracle.judge(whole, bound(1, 50), reported=True, cut=False)[0] == "violation"  # narrower than the whole's


def test_outliers_named_by_comm_rank_are_compared_as_their_processes():
    """RAS replies alone name a TP group's ranks by their rank in it (a caveat says so): comm rank 2 is process
    1169, which the whole evidence gives global rank 6."""
    whole = oracle.Answer("DIVERGED", "0xabc", 30, 30, frozenset({6}), False, pid_ranks=((1167, 4), (1169, 6)))
    named = oracle.Answer("DIVERGED", "0xabc", 1, 33, frozenset({2}), False, outlier_pids=frozenset({1169}))
    other = oracle.Answer("DIVERGED", "0xabc", 1, 33, frozenset({0}), False, outlier_pids=frozenset({1167}))
    assert oracle.judge(named, whole, reported=True, cut=False)[0] == "widened"
    assert oracle.judge(other, whole, reported=True, cut=False)[0] == "violation"
    assert oracle.judge(oracle.Answer("DIVERGED", "0xabc", 1, 33, frozenset({2}), False), whole, reported=True,
                        cut=False)[0] == "violation"  # the same number, said to be the job's rank


def test_a_trace_that_ends_while_the_others_go_on_is_never_consistent(tmp_path):
    """killed-rank's fingerprint traces alone all end at the same record (the strict xfail above: nothing in them
    shows rank 1's death). Where one rank's trace does end early, the answer names that rank and is no agreement."""
    folder = tmp_path / "traces"
    folder.mkdir()
    for path in sorted(real("killed-rank").glob("fingerprint_rank*.jsonl")):
        lines = path.read_text().splitlines(keepends=True)
        (folder / path.name).write_text("".join(lines[:100] if path.name == "fingerprint_rank1.jsonl" else lines))
    code, found = diff_json(folder)
    assert found["verdict"] != "consistent" and code in (0, 1)
    assert found["root"]["outlier_ranks"] == [1] and found["summary"].startswith("Rank 1 ")
    assert found["wedge"]["launched"] == {"0": 124, "1": 100, "2": 124, "3": 124}
