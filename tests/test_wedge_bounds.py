"""The wedge where the records cannot pin it: a bound, in text and JSON, that holds the wedge of the whole evidence.

Each case keeps one kind of evidence of a real capture: fingerprint traces (written once a collective completed,
flushed per step, so they end before the stop), NCCL logs (launches, no completion) or RAS replies (launch counts).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from cli_helpers import diff_json, real, run_cli


def kept(capture: str, tmp_path: Path, *patterns: str) -> Path:
    """A folder with only the files of `capture` that match `patterns`."""
    folder = tmp_path / capture
    folder.mkdir()
    for pattern in patterns:
        for path in sorted(real(capture).glob(pattern)):
            shutil.copy(path, folder / path.name)
    return folder


def test_the_whole_evidence_pins_the_wedge():
    _, whole = diff_json(real("long-window"))
    assert (whole["wedge"]["seq"], whole["wedge"]["seq_range"], whole["wedge"]["bounded_by"]) == (91, [91, 91], None)


@pytest.mark.parametrize("capture", ["long-window", "wrapped-ring"])
def test_traces_that_end_bound_the_wedge_from_below(capture, tmp_path):
    """Rank 1's trace ends at seq 88, the others' at 90; the ranks stopped at 91 (the whole evidence's wedge). The
    end of a trace is no stop: rank 1 took part in seqs 89 and 90, which the others completed, so the wedge is at or
    after seq 91, with no seq of its own and nobody called absent (it was "seq 89, no partner")."""
    folder = kept(capture, tmp_path, "fingerprint_rank*")
    _, found = diff_json(folder)
    wedge = found["wedge"]
    assert wedge["seq"] is None and wedge["seq_range"] == [91, None] and wedge["bounded_by"] == "completions end"
    assert wedge["kind"] == "unknown" and wedge["absent_ranks"] == [] and wedge["waiting_ranks"] == []
    assert "at or after seq 91" in found["summary"]
    assert any("at or after seq 91" in c and "not on record" in c for c in found["caveats"])
    code, out, _ = run_cli("diff", folder)
    assert code == 1 and "Wedge: comm [ranks=0,1,2,3] at or after seq 91: cause unknown" in out
    assert "never launched" not in out.split("Wedge:")[1].split("\n\n")[0]


def test_launches_alone_bound_the_wedge_from_above(tmp_path):
    """NCCL logs record launches only: rank 2 launched seq 12 of comm 0xe23e..., rank 3 seq 11. The group hung at
    seq 11, which both launched (a deadlock across communicators, as the dumps show): seq 12 is only the latest it
    can be."""
    folder = kept("subcomm-divergence", tmp_path, "nccl.vm.*")
    _, found = diff_json(folder)
    wedge = found["wedge"]
    assert (wedge["comm"], wedge["seq"], wedge["seq_range"]) == ("0xe23e5d9f32e900a3", None, [1, 12])
    assert wedge["bounded_by"] == "launches only"
    assert "It wedged at or before seq 12 in comm 0xe23e5d9f32e900a3" in found["summary"]
    _, whole = diff_json(real("subcomm-divergence"))
    assert whole["wedge"]["seq"] == 11 and whole["wedge"]["seq_range"] == [11, 11]


@pytest.mark.parametrize("capture, whole_seq, latest", [("type-mismatch", 17, 18), ("serving-skipped-allreduce", 20, 21)])
def test_ras_counts_bound_the_wedge_from_above(capture, whole_seq, latest, tmp_path):
    """RAS counts launches per collective type. type-mismatch: every rank launched 18 (rank 1 an AllGather for an
    AllReduce), and they hung in seq 17: with equal counts no rank launched seq 19, so the latest is 18.
    serving-skipped-allreduce: rank 0 launched 20, the others 21; they hung at 20."""
    folder = kept(capture, tmp_path, "ras_*")
    _, found = diff_json(folder)
    wedge = found["wedge"]
    assert wedge["seq"] is None and wedge["seq_range"] == [1, latest] and wedge["bounded_by"] == "launches only"
    assert 1 <= whole_seq <= latest
    code, out, _ = run_cli("diff", folder)
    assert f"at or before seq {latest}" in out
    assert f"launched seq {latest} (by its count; no record says which collective)" in out


def test_ras_counts_name_the_wedge_in_the_roots_communicator(tmp_path):
    """subcomm-divergence's RAS replies: comm 0xe23e... (ranks 2 and 3) and the world comm 0x78ab... both stopped;
    the world's is a consequence (rank 3, stuck in 0xe23e..., stopped launching there). The wedge is in the root's."""
    folder = kept("subcomm-divergence", tmp_path, "ras_*")
    _, found = diff_json(folder)
    assert found["root"]["comm"] == found["wedge"]["comm"] == "0xe23e5d9f32e900a3"
    assert found["wedge"]["seq_range"][0] <= 11 <= found["wedge"]["seq_range"][1]


def test_a_communicator_that_waits_on_the_roots_is_not_the_wedge(tmp_path):
    """serving-tp-in-dp-8rank's NCCL logs: rank 6 hangs in TP comm 0x7e96... at seq 32 (an AllGather against the
    others' AllReduce), so it never launches seq 5 of DP comm 0x97c7..., where rank 2 then times out. The DP comm's
    stop is confirmed (rank 2's watchdog), but the DP comm's only absent rank waits in the TP comm: the wedge is the
    TP comm's, and the DP comm's timeout says that the job stopped, as do the closed connections that TP ranks'
    processes (1167, 1168) logged."""
    folder = kept("serving-tp-in-dp-8rank", tmp_path, "nccl.vm.*")
    _, found = diff_json(folder)
    wedge = found["wedge"]
    assert found["root"]["comm"] == wedge["comm"] == "0x7e967d1df7760487"
    assert wedge["seq_range"] == [1, 32] and wedge["kind"] == "type_mismatch" and 6 in wedge["waiting_ranks"]
    waits = [c for c in wedge["confirmed_by"] if "in comm 0x97c7ff6c9b695166, which waits on it" in c]
    assert waits and all(c in waits or "nccl.vm.1167.log" in c or "nccl.vm.1168.log" in c
                         for c in wedge["confirmed_by"])
    _, whole = diff_json(real("serving-tp-in-dp-8rank"))
    assert (whole["wedge"]["comm"], whole["wedge"]["seq"]) == ("0x7e967d1df7760487", 32)
