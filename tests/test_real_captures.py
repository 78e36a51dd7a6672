"""`diff` on every real capture (tests/fixtures/real/README.md gives what really happened), and on subsets."""

from __future__ import annotations

import pytest

from cli_helpers import diff_json, real

EXTRA = "0x1715b7bd1b8fda9e"


def files(scenario: str, *prefixes: str) -> list[str]:
    folder = real(scenario)
    return sorted(str(p) for p in folder.iterdir() if p.name.startswith(prefixes))


def test_extra_op_full_evidence_names_the_root_window_and_wedge():
    code, d = diff_json(real("extra-op-4rank"))
    assert code == 1 and d["verdict"] == "diverged"
    root = d["root"]
    assert (root["comm"], root["seq"], root["seq_range"], root["outlier_ranks"], root["step"]) == (
        EXTRA, 25, [25, 25], [0], 5)
    assert root["kind"] == "extra"
    assert d["first_visible_mismatch"]["seq"] == 41  # what a position-by-position check reports
    window = d["window"]
    assert (window["collectives"], window["first_seq"], window["last_seq"]) == (25, 25, 49)
    kinds = {(p["first_seq"], p["last_seq"]): p["kind"] for p in window["pairings"]}
    assert kinds[(41, 42)] == "count_mismatch"  # 4096 paired with 8192, completed anyway
    assert kinds[(25, 40)] == "shape_equal"
    wedge = d["wedge"]
    assert (wedge["comm"], wedge["seq"], wedge["kind"]) == (EXTRA, 50, "no_partner")
    assert wedge["launched"] == {"0": 50, "1": 49, "2": 49, "3": 49}
    assert wedge["completed"] == {"0": 49, "1": 49, "2": 49, "3": 49}
    assert wedge["confirmed_by"]
    assert d["gate"]["step"] == 5 and d["gate"]["passed"] == [0]
    assert d["checksum_splits"][0]["step"] == 9  # the silent corruption shows in the step-9 checksums
    # receipts cite file:line and dump records
    ats = [e["at"] for e in d["evidence"]]
    assert any(a.endswith("fr_rank0#entries[24]") for a in ats)
    assert any("gate_journal_rank0.log:6" in a for a in ats)


def test_extra_op_logs_only_gives_an_honest_range():
    code, d = diff_json(*files("extra-op-4rank", "nccl."))
    assert code == 1 and d["verdict"] == "diverged"
    root = d["root"]
    assert root["outlier_ranks"] == [0]
    lo, hi = root["seq_range"]
    assert lo <= 25 <= hi and hi == 41 and lo < hi and root["ambiguity"]
    assert d["first_visible_mismatch"]["seq"] == 41
    # Logs record launches only: seq 50 is the first collective rank 1..3 did not launch, the latest the stop can be.
    assert d["wedge"]["seq"] is None and d["wedge"]["seq_range"] == [1, 50] and d["wedge"]["kind"] == "no_partner"


def test_extra_op_logs_and_journals_take_the_step_from_the_journal():
    code, d = diff_json(*files("extra-op-4rank", "nccl.", "gate_journal"))
    assert code == 1
    assert d["root"]["step"] == 5 and d["root"]["outlier_ranks"] == [0]
    assert d["root"]["seq_range"][0] <= 25 <= d["root"]["seq_range"][1]


def test_extra_op_flight_recorder_only_pins_by_call_site():
    code, d = diff_json(*files("extra-op-4rank", "fr_rank"))
    assert code == 1
    root = d["root"]
    assert root["seq"] == 25 and root["seq_range"] == [25, 25] and root["outlier_ranks"] == [0]
    assert root["pinned_by"] == "call sites"
    assert d["window"]["collectives"] == 25 and d["window"]["completion_known"]
    assert d["wedge"]["seq"] == 50 and d["wedge"]["kind"] == "no_partner"


@pytest.mark.parametrize("missing", [1, 3])
def test_extra_op_a_reference_rank_without_its_dump_still_pins_by_the_others_call_sites(missing):
    others = [str(p) for p in real("extra-op-4rank").iterdir() if p.name != f"fr_rank{missing}"]
    code, d = diff_json(*others)
    assert code == 1
    root = d["root"]
    assert root["seq_range"] == [25, 25] and root["outlier_ranks"] == [0]
    assert root["pinned_by"].startswith("call sites of ranks ") and f"rank {missing} without" in root["pinned_by"]


def test_extra_op_the_outliers_dump_missing_leaves_an_honest_range():
    code, d = diff_json(*[str(p) for p in real("extra-op-4rank").iterdir() if p.name != "fr_rank0"])
    assert code == 1
    root = d["root"]
    assert root["outlier_ranks"] == [0] and root["pinned_by"] == "signatures" and root["ambiguity"]
    assert root["seq_range"][0] < 25 <= root["seq_range"][1]


def test_extra_op_ras_only_says_who_and_that_it_is_stuck_but_not_where():
    code, d = diff_json(*files("extra-op-4rank", "ras_"))
    assert code == 1 and d["verdict"] == "diverged"
    root = d["root"]
    assert root["comm"] == EXTRA and root["outlier_ranks"] == [0] and root["kind"] == "extra"
    # NCCL 2.28 counts each collective type apart: the counts say who launched one more AllReduce, not where;
    # the VERBOSE and JSON replies' tables of every type add up to how many each rank launched, a bound.
    assert root["counts_by_type"] == {"AllReduce": {"0": 50, "1": 49, "2": 49, "3": 49}}
    assert root["seq_range"] == [1, 50] and "not which" in root["ambiguity"]
    code, d = diff_json(*files("extra-op-4rank", "ras_status"))  # the plain replies' MISMATCH lines alone
    assert code == 1 and d["root"]["outlier_ranks"] == [0] and d["root"]["seq_range"] is None
    assert "each collective type apart" in d["root"]["ambiguity"]
    # RAS counts launches only, and MISMATCH lines only the types that differ: each rank's count is a floor of what
    # it launched (this job ran all-reduces alone, which only the tables show), so nothing bounds the wedge
    assert d["wedge"]["seq_range"] == [1, None] and d["wedge"]["kind"] == "no_partner"
    assert d["wedge"]["bounded_by"] == "launch floors" and d["wedge"]["launched_floors"] == [0, 1, 2, 3]
    assert d["ras"][0]["stuck"] is True


def test_killed_rank_is_a_dead_rank_after_124_collectives():
    code, d = diff_json(real("killed-rank"))
    assert code == 1
    wedge = d["wedge"]
    assert wedge["comm"] == "0xd5dc471d2873616f" and wedge["kind"] == "rank_gone"
    assert wedge["launched"]["1"] == 124 and 1 in wedge["absent_ranks"]
    assert d["root"]["outlier_ranks"] == [1] and d["root"]["kind"] == "stopped" and d["root"]["seq"] == 125


def test_transient_skew_is_not_a_wedge():
    code, d = diff_json(real("transient-skew"))
    assert code == 0 and d["verdict"] in ("transient", "consistent")
    assert d["wedge"] is None and d["root"] is None
    assert {c["comm"]: c["launched"] for c in d["comms"]}["0x5eab805e14595f52"] == {str(r): 1600 for r in range(4)}


def test_transient_skew_ras_only_is_transient():
    code, d = diff_json(*files("transient-skew", "ras_"))
    assert code == 0 and d["verdict"] == "transient" and d["wedge"] is None


def test_healthy_single_rank_is_consistent():
    code, d = diff_json(real("healthy-1rank"))
    assert code == 0 and d["verdict"] == "consistent" and d["root"] is None and d["wedge"] is None


def test_long_window_runs_83_misaligned_collectives():
    code, d = diff_json(real("long-window"))
    assert code == 1
    root = d["root"]
    assert (root["comm"], root["seq"], root["seq_range"], root["outlier_ranks"], root["step"]) == (
        "0xea56324e5821c702", 8, [8, 8], [1], 2)
    assert (d["window"]["collectives"], d["window"]["first_seq"], d["window"]["last_seq"]) == (83, 8, 90)
    assert (d["wedge"]["seq"], d["wedge"]["kind"]) == (91, "no_partner")
    assert len(d["corrupted_fingerprints"]) > 80


def test_subcomm_divergence_roots_in_the_tp_comm_and_deadlocks_across_comms():
    code, d = diff_json(real("subcomm-divergence"))
    assert code == 1
    root = d["root"]
    assert (root["comm"], root["seq"], root["outlier_ranks"], root["step"]) == ("0xe23e5d9f32e900a3", 10, [3], 4)
    assert d["window"]["collectives"] == 1
    assert d["wedge"]["kind"] == "cross_comm_deadlock"


def test_type_mismatch_wedges_on_the_swapped_collective():
    code, d = diff_json(real("type-mismatch"))
    assert code == 1
    root = d["root"]
    assert (root["comm"], root["seq"], root["outlier_ranks"], root["kind"]) == (
        "0x585b471078c86eca", 17, [1], "different")
    assert (d["wedge"]["seq"], d["wedge"]["kind"]) == (17, "type_mismatch")
    assert d["window"] is None or d["window"]["collectives"] == 0


@pytest.mark.parametrize("scenario", ["extra-op-4rank", "killed-rank", "long-window", "subcomm-divergence",
                                      "type-mismatch"])
def test_every_finding_cites_evidence(scenario):
    _, d = diff_json(real(scenario))
    assert d["evidence"]
    for item in d["evidence"]:
        assert item["file"] and (item["line"] is not None or item["record"] is not None or "ras" in item["file"])


def test_killed_rank_subsets():
    code, d = diff_json(*files("killed-rank", "nccl."))
    assert code == 1 and d["root"]["outlier_ranks"] == [1] and d["root"]["seq"] == 125
    assert d["wedge"]["kind"] == "rank_gone"  # peers' "remote peer closed" lines say the stopped rank is gone
    # ... but not that it died: a closed connection or `remote process exited or there was a network error` is
    # also what a network fault gives, and RAS only says it cannot reach rank 1 (`considered_dead: false`).
    code, d = diff_json(real("killed-rank"))
    assert "Evidence that it is gone: rank 1 unreachable by RAS (not called dead)" in d["root"]["cause"]
    assert "died" not in d["root"]["cause"]
    assert "rank 1 gone (missing, unreachable or dead in RAS, or cut off from a peer)" in d["wedge"]["confirmed_by"]
    code, d = diff_json(*files("killed-rank", "ras_"))
    assert code == 1 and d["root"]["outlier_ranks"] == [1] and d["root"]["kind"] == "stopped"
    assert d["root"]["seq_range"] is None and "no data from the missing rank" in d["root"]["ambiguity"]
    assert d["wedge"]["kind"] == "rank_gone" and d["wedge"]["absent_ranks"] == [1]
    code, d = diff_json(*files("killed-rank", "fr_"))
    assert code == 1 and d["wedge"]["absent_ranks"] == [1] and d["wedge"]["kind"] == "unknown"
    assert any("No file gives the collectives of rank 1 in comm" in c for c in d["caveats"])


def test_type_mismatch_subsets():
    code, d = diff_json(*files("type-mismatch", "fr_"))
    assert code == 1 and (d["wedge"]["seq"], d["wedge"]["kind"]) == (17, "type_mismatch")
    code, d = diff_json(*files("type-mismatch", "nccl."))
    assert code == 1 and d["root"]["seq"] == 17 and d["root"]["outlier_ranks"] == [1]
    assert d["window"]["completion_known"] is False  # logs cannot say whether seq 17 completed


def test_long_window_logs_only_is_an_honest_range():
    code, d = diff_json(*files("long-window", "nccl."))
    assert code == 1 and d["root"]["outlier_ranks"] == [1]
    lo, hi = d["root"]["seq_range"]
    assert lo <= 8 <= hi and lo < hi and d["root"]["pinned_by"] == "signatures"


@pytest.mark.parametrize("scenario, outlier, wedge_seq", [("extra-op-4rank", 0, 50), ("long-window", 1, 91)])
def test_torch_logs_alone_say_who_launched_more_by_their_enqueued_counts(scenario, outlier, wedge_seq):
    """Only the ranks' stderr: the timed-out rank enqueued one work more than the others (`last enqueued NCCL
    work`). Which collective was extra they cannot say: a range up to the wedge, no false precision."""
    code, d = diff_json(*files(scenario, "torch_rank"))
    assert code == 1 and d["verdict"] == "diverged"
    root = d["root"]
    assert root["outlier_ranks"] == [outlier] and root["kind"] == "extra" and root["size"] == 1
    assert root["seq_range"] == [1, wedge_seq] and root["pinned_by"] == "PyTorch's enqueued counts"
    wedge = d["wedge"]
    assert (wedge["seq"], wedge["kind"]) == (wedge_seq, "no_partner")
    assert wedge["waiting_ranks"] == [outlier] and outlier not in wedge["absent_ranks"]
    assert wedge["confirmed_by"] and wedge["ops"][str(outlier)]["op"] == "AllReduce"


def test_torch_logs_alone_of_a_killed_rank_are_not_called_consistent():
    """Rank 1 left no line; rank 3's desync report names it, by the last collective its watchdog saw start (#122),
    a floor of what it launched: it departed somewhere up to the others' count (125), not after 122 alone."""
    code, d = diff_json(*files("killed-rank", "torch_rank"))
    assert code == 1 and d["verdict"] == "diverged"
    root = d["root"]
    assert root["outlier_ranks"] == [1] and root["seq_range"][0] <= 125 <= root["seq_range"][1]
    assert d["wedge"]["seq_range"][0] <= 125 <= d["wedge"]["seq_range"][1]
    assert any("async error at seq 123" in e["says"] for e in d["evidence"])


def test_wrapped_ring_dumps_alone_do_not_pin_the_root_where_their_records_begin():
    """The Flight Recorder kept only the last 30 entries (seq 62..91 on rank 1, 61..90 on the others); the
    extra collective was seq 8. The dumps alone must give a range that holds it, not one that starts at 62."""
    code, d = diff_json(*files("wrapped-ring", "fr_rank"))
    assert code == 1 and d["verdict"] == "diverged"
    root = d["root"]
    assert root["outlier_ranks"] == [1] and root["kind"] == "extra"
    assert root["seq_range"][0] <= 8 <= root["seq_range"][1] and "only start at seq 61" in root["ambiguity"]
    assert (d["wedge"]["seq"], d["wedge"]["kind"]) == (91, "no_partner")


def test_wrapped_ring_with_all_evidence_pins_seq_8():
    code, d = diff_json(real("wrapped-ring"))
    assert code == 1
    assert d["root"]["seq_range"] == [8, 8] and d["root"]["outlier_ranks"] == [1] and d["root"]["step"] == 2
    assert d["window"]["collectives"] == 83 and (d["wedge"]["seq"], d["wedge"]["kind"]) == (91, "no_partner")


@pytest.mark.parametrize("prefixes", [("nccl.",), ("fr_rank",), ("nccl.", "fr_rank")])
def test_a_healthy_pipeline_is_not_called_diverged_for_its_send_and_recv(prefixes):
    """Rank 0 only sends, rank 2 only receives, rank 1 does both: the p2p ops pair with their peers, not by
    position, and are kept apart from the collectives, which agree."""
    code, d = diff_json(*files("pipeline-healthy", *prefixes))
    assert code == 0 and d["verdict"] == "consistent" and d["root"] is None
    p2p = [c for c in d["comms"] if c["comm"].endswith(":p2p")]
    assert len(p2p) == 1 and p2p[0]["launched"] == {"0": 6, "1": 12, "2": 6}
    assert any("Send/Recv are kept apart" in c for c in d["caveats"])


def test_desync_report_alone_names_who_launched_more(tmp_path):
    """long-window's torch logs without PyTorch's `last enqueued` marks: the desync reports ("[0, 2, 3] finished
    collective #90, but didn't join collective #91") still say that rank 1 launched what the others did not."""
    for path in files("long-window", "torch_"):
        with open(path, encoding="utf-8") as f:
            lines = [line for line in f if "enqueued" not in line.lower()]
        (tmp_path / path.rsplit("/", 1)[-1]).write_text("".join(lines), encoding="utf-8")
    code, d = diff_json(str(tmp_path))
    assert code == 1 and d["root"]["outlier_ranks"] == [1] and d["root"]["kind"] == "extra"
    assert d["root"]["pinned_by"] == "PyTorch's desync report"
    assert d["root"]["seq_range"][0] <= 8 <= d["root"]["seq_range"][1]


@pytest.mark.parametrize("scenario, comm, seq, outliers, window, wedge", [
    ("serving-drafter-typeboundary", "0x2f610d321b4a85cd", 30, [1], 2, (32, "type_mismatch")),
    ("serving-skipped-allreduce", "0x4c19e46a7c2e9756", 17, [0], 3, (20, "type_mismatch")),
    ("serving-two-drafters-8rank", "0xec2dabdf1737e201", 27, [2, 5], 1, (28, "type_mismatch")),
    ("serving-tp-in-dp-8rank", "0x7e967d1df7760487", 30, [6], 2, (32, "type_mismatch")),
    ("serving-reorder-heals", "0x3c50eedf754e590e", 17, [0, 1, 2, 3], 2, None),  # 2 against 2: both sides named
    ("serving-tp3-in-dp-6rank", "0x1454bb1343f63399", 38, [4], 2, (40, "type_mismatch")),
    ("serving-skipped-16rank", "0xb09c3a6eb733723b", 21, [11], 3, (24, "type_mismatch")),
])
def test_serving_captures_pin_the_root_with_all_their_evidence(scenario, comm, seq, outliers, window, wedge):
    """A serving-shaped program (wrappers, layers in a loop, a drafter through the same wrappers): the first
    divergent collective, the window and the wedge as the program's own launch log says (truth/<scenario>.json)."""
    code, d = diff_json(real(scenario))
    root = d["root"]
    assert code == 1 and d["verdict"] == "diverged"
    assert (root["comm"], root["seq_range"], root["outlier_ranks"]) == (comm, [seq, seq], outliers)
    assert d["window"]["collectives"] == window
    assert (d["wedge"] and (d["wedge"]["seq"], d["wedge"]["kind"])) == wedge


def test_serving_tp_in_dp_logs_alone_give_the_range_with_stand_in_ranks():
    """No NCCL communicator holds every process: the logs' ranks are comm ranks, numbered as stand-ins."""
    code, d = diff_json(*files("serving-tp-in-dp-8rank", "nccl."))
    assert code == 1 and d["root"]["comm"] == "0x7e967d1df7760487" and d["root"]["outlier_ranks"] == [6]
    assert d["root"]["seq_range"][0] <= 30 <= d["root"]["seq_range"][1]
    assert any("stand-ins" in c for c in d["caveats"])
    # each stand-in rank names its process, as the caveat does, for tools that read the JSON
    assert d["stand_in_ranks"] and all(p.startswith("vm:") for p in d["stand_in_ranks"].values())
    assert all(f"rank {r} = {p}" in " ".join(d["caveats"]) for r, p in list(d["stand_in_ranks"].items())[:8])


def test_a_group_dumped_by_one_rank_is_tied_to_the_logged_comm_of_its_size():
    """subcomm-divergence: the dumps of ranks 0-2 and rank 3's NCCL log. Rank 3 is the one logged member of the
    world (4 ranks) and of tp{2,3} (2 ranks), and both look alike op by op; rank 2's dumped group '2' lists two
    ranks, so it is tp{2,3}, not the world it was merged into."""
    code, d = diff_json(*files("subcomm-divergence", "fr_rank0", "fr_rank1", "fr_rank2", "nccl.vm.438"))
    members = {c["comm"]: c["ranks"] for c in d["comms"]}
    assert members["0xe23e5d9f32e900a3"] == [2, 3] and members["0x78ab2c529d3bb1d0"] == [0, 1, 2, 3]


def test_stand_in_ranks_take_no_number_that_other_evidence_gives_a_rank():
    """serving-tp3-in-dp-6rank: rank 0's dump, the NCCL logs of ranks 1, 2, 4 and 5 (no log holds every process,
    the dump matches none) and every rank's gate journal. The stand-ins are numbered past the journals' ranks 0-5:
    stand-in 4 taken for the journals' rank 4 (who passed the gate) made a majority of a two-process tie."""
    logs = [p for p in files("serving-tp3-in-dp-6rank", "nccl.") if not p.endswith(("478.log", "481.log"))]
    code, d = diff_json(*logs, *files("serving-tp3-in-dp-6rank", "fr_rank0"),
                        *files("serving-tp3-in-dp-6rank", "gate_journal"))
    assert code == 1 and d["stand_in_ranks"] and min(map(int, d["stand_in_ranks"])) >= 6
    root = d["root"]
    assert root["comm"] == "0x1454bb1343f63399" and not root["majority"]
    assert {d["stand_in_ranks"][str(r)] for r in root["outlier_ranks"]} == {"vm:482", "vm:483"}


def test_logs_of_one_replica_beside_dumps_of_the_others_get_the_jobs_ranks():
    """The NCCL logs of ranks 4-7 alone claim ranks 0-3 (their TP group's), the very ranks the dumps of 0-3 name;
    the dumps show an 8-rank job, so the logs' ranks are comm ranks: 5, 6 and 7 match their dumps, and 4 (no dump)
    is placed through the TP group's members that rank 5's dump lists."""
    logs = [p for p in files("serving-tp-in-dp-8rank", "nccl.") if p.endswith(("1167.log", "1168.log", "1169.log",
                                                                              "1170.log"))]
    dumps = [p for p in files("serving-tp-in-dp-8rank", "fr_rank") if not p.endswith(("fr_rank4", "fr_rank6"))]
    code, d = diff_json(*logs, *dumps)
    members = {c["comm"]: c["ranks"] for c in d["comms"]}
    assert members["0x7e967d1df7760487"] == [4, 5, 6, 7] and members["0x772983640d2431f5"] == [0, 4]
    assert code == 1 and d["root"]["comm"] == "0x7e967d1df7760487" and d["root"]["outlier_ranks"] == [6]
    assert d["root"]["seq_range"][0] <= 30 <= d["root"]["seq_range"][1]
    assert not any("stand-ins" in c for c in d["caveats"])


def test_logs_no_dump_matches_are_placed_by_the_group_layout_the_dumps_list():
    """The NCCL logs of ranks 0, 2 and 4, the dumps of 1, 3, 5, 6 and 7: no log is of a dumped process and none
    shares a comm with a matched one. Rank 2's process is comm rank 2 of a 4-rank comm: the dumps list both TP
    groups (0-3, 4-7), which allow ranks 2 and 6, and rank 6 has a dump of its own; rank 2 joins rank 6 in their DP
    group. Its TP comm is then the group with rank 2 at comm rank 2 (0-3), so that comm's rank 0 is rank 0; and the
    process of comm rank 0 of the other TP group, the rank left of (0, 4), is rank 4."""
    logs = [p for p in files("serving-tp-in-dp-8rank", "nccl.") if p.endswith(("1163.log", "1165.log", "1167.log"))]
    dumps = [p for p in files("serving-tp-in-dp-8rank", "fr_rank") if p[-1] in "13567"]
    _, d = diff_json(*logs, *dumps)
    members = {c["comm"]: c["ranks"] for c in d["comms"]}
    assert members["0x8a8af8b7710763c1"] == [0, 1, 2, 3] and members["0x97c7ff6c9b695166"] == [2, 6]
    assert members["0x7e967d1df7760487"] == [4, 5, 6, 7] and members["0x772983640d2431f5"] == [0, 4]
    assert any("3 processes were given the job's rank" in c for c in d["caveats"]) and not d["stand_in_ranks"]


def test_torch_logs_of_one_tp_group_name_its_global_ranks():
    """serving-tp-in-dp-8rank, the torch logs of ranks 4-7 (TP group '2'): PyTorch's exception echo (`what():`,
    no `[rankN]:` prefix) and its desync report number ranks within the group ("[Rank 0]", "[2] joined but didn't
    finish"); the tool reports them as the global ranks 4-7, and rank 6, waiting in an AllGather where the others
    wait in an AllReduce, as the outlier."""
    code, d = diff_json(*[p for p in files("serving-tp-in-dp-8rank", "torch_rank") if p[-5] in "4567"])
    assert code == 1 and d["root"]["comm"] == "2" and d["root"]["outlier_ranks"] == [6]
    assert d["root"]["seq_range"][0] <= 30 <= d["root"]["seq_range"][1]
    assert {c["comm"]: c["ranks"] for c in d["comms"]}["2"] == [4, 5, 6, 7]


@pytest.mark.parametrize("scenario, seq, outlier", [("serving-tp3-in-dp-6rank", 38, 4),
                                                    ("serving-skipped-16rank", 21, 11)])
@pytest.mark.parametrize("prefix", ["nccl.", "fr_rank", "torch_rank"])
def test_serving_captures_one_kind_of_evidence_alone_gives_a_range_that_holds_the_root(scenario, seq, outlier,
                                                                                       prefix):
    """One kind of evidence alone may not pin the root (lookalike layers, a whole decode step that could have run
    extra), but the range it gives holds the first divergent collective and names the rank that departed."""
    code, d = diff_json(*files(scenario, prefix))
    root = d["root"]
    assert code == 1 and root is not None
    low, high = root["seq_range"]
    assert low <= seq <= high and outlier in root["outlier_ranks"]
    assert (low == high) == (root["ambiguity"] is None)


def test_sharded_training_step_gives_the_range_equal_call_stacks_allow():
    """sharded-frozen-layer-3rank: an FSDP-style step (per-layer AllGather, per-layer ReduceScatter in a loop, an
    AllReduce of the norm); rank 2 left out one ReduceScatter (seq 33). The four ReduceScatters of a step have
    equal call stacks, so every seq from the first of them (32) to the wedge (35) is as likely: the root is that
    range, the window up to 3 collectives, and the caveat does not ask for the call stacks it was given."""
    code, d = diff_json(real("sharded-frozen-layer-3rank"))
    root = d["root"]
    assert code == 1 and d["verdict"] == "diverged"
    assert (root["comm"], root["seq_range"], root["outlier_ranks"], root["kind"]) == (
        "0x953f890e68797e2a", [32, 35], [2], "missing")
    assert (d["window"]["collectives_min"], d["window"]["collectives"]) == (0, 3)
    assert (d["wedge"]["seq"], d["wedge"]["kind"]) == (35, "type_mismatch")
    assert "call sites" in root["ambiguity"] and "dumps with call stacks" not in root["ambiguity"]


def test_a_lookalike_range_where_some_ranks_have_no_call_stacks_still_asks_for_the_dumps():
    """extra-op-4rank, every log but the dumps of ranks 1 and 2 only: call stacks were compared for two ranks, not
    for all, so the words neither say the stacks repeat nor stop asking for dumps with call stacks."""
    code, d = diff_json(*files("extra-op-4rank", "nccl."), str(real("extra-op-4rank") / "fr_rank1"),
                        str(real("extra-op-4rank") / "fr_rank2"))
    text = d["root"]["ambiguity"]
    assert code == 1 and "dumps with call stacks" in text and "repeat" not in text


@pytest.mark.parametrize("kept", [0.25, 0.6])
def test_a_rank_whose_files_all_end_early_at_a_line_end_did_not_stop_there(tmp_path, kept):
    """killed-rank with every file of rank 1 (the one that died after seq 124) cut at a line's end, as a rank killed
    mid-write leaves them: its records stop long before 124, but the others' dumps completed every collective
    through 124, which NCCL completes only with every rank, so the stop is after them, not where the files end."""
    import shutil

    folder = tmp_path / "killed-rank"
    shutil.copytree(real("killed-rank"), folder)
    for name in ("nccl.vm.711.log", "torch_rank1.log", "fingerprint_rank1.jsonl"):
        lines = (folder / name).read_bytes().splitlines(keepends=True)
        (folder / name).write_bytes(b"".join(lines[:max(1, int(len(lines) * kept))]))
    code, d = diff_json(str(folder))
    root = d["root"]
    low, high = root["seq_range"]
    assert code == 1 and root["outlier_ranks"] == [1] and root["kind"] == "stopped" and low <= 125 <= high
    assert "records are incomplete" in root["ambiguity"]


def test_results_read_back_wrong_where_records_agree_place_the_root_in_that_comm():
    # Traces and PyTorch logs of subcomm-divergence: tp{2,3}'s records (group 2) agree, but rank 2's step-4 tp_mlp
    # (seq 10) reads back wrong and every earlier result there right. The root is there; which of the two ranks
    # departed no record says. The world group's stop of rank 3 is its consequence.
    code, d = diff_json(*files("subcomm-divergence", "fingerprint_", "torch_"))
    root = d["root"]
    assert code == 1 and (root["comm"], root["seq_range"]) == ("2", [10, 10])
    assert sorted(root["outlier_ranks"]) == [2, 3] and root["majority"] is False
    assert root["pinned_by"] == "fingerprints" and d["wedge"]["comm"] == "2" and d["wedge"]["seq"] == 11
    assert not any("fingerprint_" in json_value for c in d["contradictions"] for json_value in
                   (v["evidence"] for v in c["values"].values()))  # a trace counts no launches


def test_a_root_in_a_step_the_traces_never_read_back_is_open_above():
    # Traces and gate journals of type-mismatch: every trace ends at step 4; rank 1 passed the gate at step 5,
    # whose collectives no trace holds and no count bounds: the root is at seq 16 or later.
    code, d = diff_json(*files("type-mismatch", "fingerprint_", "gate_journal_"))
    root = d["root"]
    assert root["seq_range"] == [16, None] and root["seq"] == 16 and root["outlier_ranks"] == [1]
    assert root["kind"] == "extra" and root["step"] == 5 and d["schema_version"] == 8
    assert "seq 16 or later" in d["summary"] and "never read that step back" in root["ambiguity"]


def test_a_wedge_the_evidence_only_bounds_is_on_the_timeline_with_every_seq_it_can_be_at():
    from ncclforensics import api
    from ncclforensics.align.timeline import timeline

    _, diagnosis = api.diff_paths(files("extra-op-4rank", "ras_status"))
    assert diagnosis.wedge is not None and not diagnosis.wedge.pinned
    labels = [entry.when for entry in timeline(diagnosis, []) if "wedge in comm" in entry.what]
    assert labels == ["seq 1 or later"]
