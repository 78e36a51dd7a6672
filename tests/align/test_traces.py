"""Fingerprint traces alone: per-collective traces become streams in the comm their results name; per-step
checksums give the step and the outlier, never a seq. All on the real captures' traces."""

import json
from pathlib import Path

import pytest

from ncclforensics.align.edits import EditKind, place_edits
from tests.align.test_root import stream
from tests.cli_helpers import diff_json
from fixture_paths import REAL


def answer(*paths: Path) -> dict:
    return diff_json(*map(str, paths))[1]


def traces(scenario: str, suffix: str) -> list[Path]:
    return sorted((REAL / scenario).glob(f"fingerprint_rank*{suffix}"))


def test_per_collective_traces_of_three_comms_are_split_by_the_results_their_ranks_share():
    """subcomm-divergence: world, tp{0,1} and tp{2,3}; rank 3 ran tp_draft at tp{2,3} seq 10 (step 4). Rank 3
    never read back step 4, so its trace stops at seq 8 of tp{2,3}; rank 2's world record of step 4 is shared by
    ranks 0-2 only and must still go to the world stream, not shift rank 2's tp stream."""
    d = answer(*traces("subcomm-divergence", ".jsonl"))
    root = d["root"]
    assert d["verdict"] == "diverged"
    assert root["comm"] == "[ranks=2,3]" and root["seq_range"] == [10, 10] and 3 in root["outlier_ranks"]
    assert {"[ranks=0,1,2,3]", "[ranks=0,1]", "[ranks=2,3]"} <= {c["comm"] for c in d["comms"]}
    assert "no communicator" in " ".join(d["caveats"])


@pytest.mark.parametrize("scenario, seq, outlier", [("long-window", 8, 1), ("wrapped-ring", 8, 1)])
def test_per_collective_traces_of_one_comm_pin_the_extra_collective(scenario, seq, outlier):
    root = answer(*traces(scenario, ".jsonl"))["root"]
    assert root["seq_range"] == [seq, seq] and root["outlier_ranks"] == [outlier] and root["kind"] == "extra"


def test_traces_beside_the_logs_do_not_become_a_second_stream():
    d = answer(REAL / "subcomm-divergence")
    assert not [c for c in d["comms"] if c["comm"].startswith("[ranks=")]
    assert d["root"]["comm"] == "0xe23e5d9f32e900a3" and d["root"]["seq_range"] == [10, 10]


def test_a_trace_whose_comm_nothing_names_is_left_out_and_said():
    """Rank 2's NCCL log (three comms) beside rank 3's trace: no result is shared and rank 3 is in two comms, so
    its records go to neither rather than to a guessed one."""
    source = REAL / "subcomm-divergence"
    d = answer(source / "nccl.vm.437.log", source / "fingerprint_rank3.jsonl")
    assert d["root"] is None and d["verdict"] != "diverged"
    assert any("fingerprint traces of rank 3 " in c and "left out" in c for c in d["caveats"])


def test_a_block_past_the_end_of_the_references_records_may_start_anywhere_after_it():
    """Two ranks agree over rank 1's 5 records; rank 0 has 3 more. Rank 1's records are cut: its next ones may
    pair with rank 0's, so one extra collective fits at any of rank 0's seqs 6..8."""
    outlier, reference = stream([1] * 8), stream([1] * 5)
    found, held = place_edits(0, outlier, reference, 1)
    extra = [p for p in found if p.kind is EditKind.EXTRA]
    assert held and min(p.low for p in extra) <= 6 and max(p.high for p in extra) == 8


def test_per_step_checksums_alone_name_the_outlier_and_bound_the_step():
    """extra-op-4rank: rank 0 ran an extra AllReduce at step 5; the per-step checksums are equal on every rank
    until step 9 (the inputs are alike), so they say rank 0, at step 9 or before, and no seq."""
    d = answer(*traces("extra-op-4rank", ".log"))
    root = d["root"]
    assert d["verdict"] == "diverged" and root["outlier_ranks"] == [0]
    assert root["seq_range"] is None and root["step"] is None and root["pinned_by"] == "per-step checksums"
    assert "step 9" in root["ambiguity"] and "or before" in root["ambiguity"]


def per_step_sums(path: Path) -> tuple[int, dict[int, list[float]]]:
    """A per-collective trace's rank and, per step, [sum of its results, sum of their expected values]."""
    records = [json.loads(line) for line in path.read_text().splitlines()]
    steps: dict[int, list[float]] = {}
    for record in records:
        total = steps.setdefault(record["step"], [0.0, 0.0])
        total[0] += record["sum"]
        total[1] += record["expected_sum"]
    return records[0]["rank"], steps


def test_per_step_checksums_checked_right_before_the_split_pin_the_step(tmp_path):
    """long-window's per-collective traces summed per step, with the expected sums: steps 0 and 1 are right on
    every rank, so the root is in step 2 (rank 1's extra collective)."""
    for path in traces("long-window", ".jsonl"):
        rank, steps = per_step_sums(path)
        (tmp_path / path.name).write_text("".join(
            json.dumps({"step": step, "rank": rank, "sum": got, "expected_sum": want}) + "\n"
            for step, (got, want) in sorted(steps.items())))
    d = answer(tmp_path)
    root = d["root"]
    assert d["verdict"] == "diverged" and root["outlier_ranks"] == [1]
    assert root["step"] == 2 and root["seq_range"] is None


def test_checksums_that_differ_by_design_are_not_mixed_data():
    """serving-tp-in-dp-8rank: each replica's per-step sums differ, and each equals its expected value."""
    d = answer(*traces("serving-tp-in-dp-8rank", ".jsonl"))
    assert d["verdict"] != "diverged" and d["root"] is None
    assert not d.get("checksum_splits")


def test_a_trace_carries_on_a_log_cut_short(tmp_path):
    """long-window with rank 1's NCCL log cut after its 5th COLL line: its trace holds the 88 collectives it read
    back, which carry its stream on, so the extra collective at seq 8 is still pinned on rank 1."""
    source = REAL / "long-window"
    for path in [*source.glob("nccl.*.log"), *traces("long-window", ".jsonl")]:
        (tmp_path / path.name).write_bytes(path.read_bytes())
    log = tmp_path / "nccl.vm.617.log"
    lines = log.read_text().splitlines(keepends=True)
    fifth = [i for i, line in enumerate(lines) if "opCount" in line][4]
    log.write_text("".join(lines[:fifth + 1]))
    d = answer(tmp_path)
    launched = {c["comm"]: c["launched"] for c in d["comms"]}[d["root"]["comm"]]
    assert launched["1"] == 88 and d["root"]["seq_range"] == [8, 8] and d["root"]["outlier_ranks"] == [1]


def test_one_ranks_wrong_checksum_in_a_pair_names_both_and_the_step(tmp_path):
    """long-window's per-step sums of ranks 0 and 1 only, rank 0's trace ending after step 1: at step 2 only rank
    1 wrote a sum, and it is wrong. In a pair either rank may have departed: both, at step 2, no seq."""
    for path in traces("long-window", ".jsonl"):
        rank, steps = per_step_sums(path)
        if rank > 1:
            continue
        kept = {step: sums for step, sums in steps.items() if rank == 1 or step < 2}
        (tmp_path / path.name).write_text("".join(
            json.dumps({"step": step, "rank": rank, "sum": got, "expected_sum": want}) + "\n"
            for step, (got, want) in sorted(kept.items())))
    d = answer(tmp_path)
    root = d["root"]
    assert d["verdict"] == "diverged" and root["outlier_ranks"] == [0, 1] and not root["majority"]
    assert root["step"] == 2 and root["seq_range"] is None


def test_per_step_checksums_of_replicas_part_only_among_the_ranks_that_read_back_wrong(tmp_path):
    """serving-tp-in-dp-8rank's per-step sums differ by design between replicas, each equal to its expected
    value; ranks 2 and 3 made to read back wrong values at step 1 are the ones named, at step 1."""
    for path in traces("serving-tp-in-dp-8rank", ".jsonl"):
        records = [json.loads(line) for line in path.read_text().splitlines()]
        for record in records:
            if record["rank"] in (2, 3) and record["step"] == 1:
                record["sum"] += 100.0 * (record["rank"] - 1)
        (tmp_path / path.name).write_text("".join(json.dumps(r) + "\n" for r in records))
    d = answer(tmp_path)
    root = d["root"]
    assert d["verdict"] == "diverged" and root["outlier_ranks"] == [2, 3] and not root["majority"]
    assert root["step"] == 1 and root["seq_range"] is None and root["comm"] == "[ranks=2,3]"


def _replica_sums_off(tmp_path: Path, off: dict[int, float], step: int = 1) -> dict:
    """serving-tp-in-dp-8rank's per-step sums (each replica's differ by design, each equal to its expected value)
    with the given ranks' sum at `step` off by the given amounts; the answer of diff."""
    for path in traces("serving-tp-in-dp-8rank", ".jsonl"):
        records = [json.loads(line) for line in path.read_text().splitlines()]
        for record in records:
            if record["step"] == step:
                record["sum"] += off.get(record["rank"], 0.0)
        (tmp_path / path.name).write_text("".join(json.dumps(r) + "\n" for r in records))
    return answer(tmp_path)


def test_checked_checksums_part_by_how_far_each_is_off():
    """Ranks 4-7 read back wrong values at step 1: 4, 5 and 7 are off by the same amount (the same mixed results
    on top of inputs of their own), 6 by another: rank 6 departed, though every sum differs from every other."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        root = _replica_sums_off(Path(folder), {4: -512.0, 5: -512.0, 6: 1536.0, 7: -512.0})["root"]
    assert root["outlier_ranks"] == [6] and root["majority"] and root["step"] == 1


def test_one_rank_alone_reading_back_a_wrong_checksum_among_ranks_checked_right_is_the_outlier(tmp_path):
    """Rank 5 alone is off at step 1, every other rank checked right there: its collective paired with the
    others' of another step; it is named, at step 1."""
    d = _replica_sums_off(tmp_path, {5: 2048.0})
    assert d["verdict"] == "diverged" and d["root"]["outlier_ranks"] == [5] and d["root"]["step"] == 1


def test_checksums_add_the_ranks_they_part_on_to_a_root_from_launch_counts(tmp_path):
    """PyTorch's watchdog says rank 0 launched one collective fewer (its marks and a desync report), which places
    nothing; the per-step checksums part at step 1 on rank 2: it departed too, and the root names both."""
    from tests.align.test_watchdog import _desync_logs

    paths = _desync_logs(tmp_path, laggard=0)
    for rank in range(4):
        sums = [(0, 100.0, 100.0), (1, 250.0 if rank == 2 else 200.0, 210.0)]
        path = tmp_path / f"fingerprint_rank{rank}.jsonl"
        path.write_text("".join(json.dumps({"step": s, "rank": rank, "sum": got, "expected_sum": want}) + "\n"
                                for s, got, want in sums))
        paths.append(str(path))
    d = answer(*paths)
    root = d["root"]
    assert d["verdict"] == "diverged" and root["outlier_ranks"] == [0, 2] and root["kind"] == "missing"
    assert any("rank 2 read back per-step checksums that part" in c for c in d["caveats"])


def test_per_step_checksums_name_a_comm_only_where_it_is_the_one_comm_of_their_ranks():
    from ncclforensics.align.checksum_roots import comm_summed

    tp_in_world = {"0xworld": {0, 1, 2, 3}, "0xtp0": {0, 1}, "0xtp1": {2, 3}}
    # A step's sum on ranks 0 and 1 mixes what they read back from the world comm and from their TP comm.
    assert comm_summed(frozenset({0, 1}), tp_in_world) == "[ranks=0,1]"
    assert comm_summed(frozenset({0, 1}), {"0xtp0": {0, 1}, "tp": {0, 1}, "0xtp1": {2, 3}}) == "0xtp0"
    assert comm_summed(frozenset({2}), {"0xworld": {0, 1, 2, 3}}) == "0xworld"


def test_traces_of_completed_collectives_alone_are_never_consistent():
    """killed-rank's traces: all four end at the same record (rank 1 died in the 125th collective, which no
    rank completed, so no trace holds it): agreement is all they can show, and it is not consistency."""
    d = answer(*traces("killed-rank", ".jsonl"))
    assert d["verdict"] == "inconclusive" and d["root"] is None
    assert any("record a collective once it completed" in c for c in d["caveats"])


def _without_digests(scenario: str, to: Path, change=None) -> None:
    for path in traces(scenario, ".jsonl"):
        records = [json.loads(line) for line in path.read_text().splitlines()]
        for record in records:
            record.pop("digest", None)
            if change:
                change(record)
        (to / path.name).write_text("".join(json.dumps(r) + "\n" for r in records))


def test_traces_of_several_comms_with_sums_only_are_split_where_each_tag_is_shared_by_one_set_of_ranks(tmp_path):
    """subcomm-divergence's traces without digests: the world records (embed, ...) share their sums with ranks
    0-3 and the tp records with the rank's tp group, tag for tag, so the sums split them as the digests do, and
    rank 3's tp_draft places the root at tp{2,3} seq 10 (a comm of two: both ranks named)."""
    _without_digests("subcomm-divergence", tmp_path)
    root = answer(tmp_path)["root"]
    assert root["comm"] == "[ranks=2,3]" and root["seq_range"] == [10, 10] and 3 in root["outlier_ranks"]


def test_a_sum_that_two_comms_share_by_coincidence_follows_its_tag(tmp_path):
    """The same, with rank 2 and 3's tp_attn sum of step 1 made equal to ranks 0 and 1's tp_mlp sum: a result
    shared by all four under two tags is no world collective; its tag keeps it in the tp stream, and the root
    stays."""
    records = [json.loads(line) for line in (traces("subcomm-divergence", ".jsonl")[0]).read_text().splitlines()]
    theirs = next(r["sum"] for r in records if r["step"] == 1 and r["tag"] == "tp_mlp")

    def coincide(record):
        if record["rank"] in (2, 3) and record["step"] == 1 and record["tag"] == "tp_attn":
            record["sum"] = record["expected_sum"] = theirs
    _without_digests("subcomm-divergence", tmp_path, coincide)
    root = answer(tmp_path)["root"]
    assert root["comm"] == "[ranks=2,3]" and root["seq_range"] == [10, 10] and 3 in root["outlier_ranks"]


def test_sums_checked_right_that_two_tp_groups_share_by_coincidence_name_no_comm_of_both(tmp_path):
    """DP groups (0,2) (1,3) and TP groups (0,1) (2,3), sums with expected values, no digests, nothing wrong. In
    every step the TP groups' sums coincide once, (0,1)'s `l1` with (2,3)'s `l3` (sums that are multiples of each
    other's do so again and again): all four share two results under two tags, `l1` never aligned, which looked
    like misaligned pairings of a comm wider than (0,1), and the traces of every rank were left out as several
    comms the sums cannot split. Each of those results is checked right, what its own collective gives (a
    pairing mixes two collectives' data, which checks wrong): no pairing, and each follows its tag."""
    for rank in range(4):
        lines = []
        for step in range(3):
            dp = 100.0 + 10 * step + rank % 2
            lines.append({"step": step, "op": 0, "rank": rank, "tag": "dp", "kind": "AllReduce", "numel": 1,
                          "sum": dp, "expected_sum": dp})
            for op in range(5):
                total = 3072.0 * (10 * step + op + 1)
                if rank >= 2:
                    total = 3072.0 * (10 * step + 2) if op == 3 else 7168.0 * (10 * step + op + 1)
                lines.append({"step": step, "op": op + 1, "rank": rank, "tag": f"l{op}", "kind": "AllReduce",
                              "numel": 4096, "sum": total, "expected_sum": total})
        (tmp_path / f"fingerprint_rank{rank}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    d = answer(tmp_path)
    assert not any("cannot be told" in c for c in d["caveats"])
    assert {"[ranks=0,1]", "[ranks=0,2]", "[ranks=1,3]", "[ranks=2,3]"} == {c["comm"] for c in d["comms"]}


def test_a_trace_lines_up_with_a_ring_that_lost_its_beginning_by_seq(tmp_path):
    """wrapped-ring with rank 0's NCCL log empty: its stream is its ring (seqs 61..90) and its trace (seqs 1..90,
    from step 0). The trace's record of seq 61 goes with the ring's first entry, not its first record: rank 0
    launched 90 (not 150) and is no outlier."""
    source = REAL / "wrapped-ring"
    for path in source.iterdir():
        (tmp_path / path.name).write_bytes(b"" if path.name == "nccl.vm.448.log" else path.read_bytes())
    d = answer(tmp_path)
    launched = {c["comm"]: c["launched"] for c in d["comms"]}["0x3356658ba8c836ef"]
    assert launched["0"] == 90 and d["root"]["outlier_ranks"] == [1] and d["root"]["seq_range"] == [8, 8]


def test_a_trace_fills_the_seqs_between_a_log_cut_short_and_a_ring_that_begins_later(tmp_path):
    """wrapped-ring with rank 1's NCCL log cut after its 3rd COLL line: its stream is seqs 1..3 and its ring's
    62..91, and the extra collective (seq 8, one AllReduce like the others) lies between. Its trace lists every
    collective it read back: records 4..61 are those seqs, and their tags pin the extra one on rank 1 (the traces
    keep only tags and digests here: no sum checks a result, and without them the range is 4..62)."""
    source = REAL / "wrapped-ring"
    for path in [*source.glob("nccl.*.log"), *source.glob("fr_rank*")]:
        (tmp_path / path.name).write_bytes(path.read_bytes())
    for path in traces("wrapped-ring", ".jsonl"):
        records = [json.loads(line) for line in path.read_text().splitlines()]
        (tmp_path / path.name).write_text("".join(json.dumps({k: r[k] for k in ("step", "op", "rank", "tag", "digest")})
                                                  + "\n" for r in records))
    log = tmp_path / "nccl.vm.449.log"
    lines = log.read_text().splitlines(keepends=True)
    third = [i for i, line in enumerate(lines) if "opCount" in line][2]
    log.write_text("".join(lines[:third + 1]))
    root = answer(tmp_path)["root"]
    assert root["seq_range"] == [8, 8] and root["outlier_ranks"] == [1]


def _step_sums(sums: dict[int, float], step: int = 0) -> list:
    from ncclforensics.model import FingerprintRow
    from ncclforensics.model.location import Location

    return [FingerprintRow(loc=Location(f"fingerprint_rank{rank}.log", 1), rank=rank, step=step, sum=value)
            for rank, value in sums.items()]


def test_unchecked_checksums_are_compared_only_among_ranks_that_share_every_comm():
    """A step's checksum sums what a rank read back from every comm it is in: ranks of two TP groups of a DP job
    read back different results by design, and only a comm the records place a rank in (or out of) says so."""
    from ncclforensics.align.step_sums import step_sums_root

    tp_in_dp = {"0xworld": {0, 1, 2, 3}, "0xtp0": {0, 1}, "0xtp1": {2, 3}}
    on_record = frozenset({0, 1, 2, 3})
    # ranks 0 and 1 agree, rank 2 of the other TP group differs: no divergence
    assert step_sums_root(_step_sums({0: 5.0, 1: 5.0, 2: 7.0}), tp_in_dp, on_record) is None
    # within one TP group the sums must agree: three of one group, one departs
    tp4 = {"0xworld": set(range(8)), "0xtp0": {0, 1, 2, 3}, "0xtp1": {4, 5, 6, 7}}
    root, _ = step_sums_root(_step_sums({0: 5.0, 1: 5.0, 2: 6.0, 3: 5.0, 4: 7.0}), tp4, frozenset(range(8)))
    assert root.outlier_ranks == [2] and root.reference_ranks == [0, 1, 3] and root.majority
    # a rank whose comms nothing records cannot be placed among two TP groups, and is compared with neither
    logged = {"0xworld": {0, 1, 4}, "0xtp0": {0, 1}, "0xtp1": {4}}  # the comms of the ranks with NCCL logs
    assert step_sums_root(_step_sums({0: 5.0, 1: 5.0, 2: 9.0, 4: 7.0}), logged, frozenset({0, 1, 4})) is None
    # where a comm's config names it, it is placed
    root, _ = step_sums_root(_step_sums({0: 5.0, 1: 5.0, 2: 9.0, 4: 7.0}), tp4, frozenset({0, 1, 4}))
    assert root.outlier_ranks == [2] and root.reference_ranks == [0, 1]
    # with nothing known of the comms, every traced rank is a replica of every other
    root, _ = step_sums_root(_step_sums({0: 5.0, 1: 5.0, 2: 7.0}), {}, frozenset())
    assert root.outlier_ranks == [2]


def _write_trace(folder: Path, rank: int, records: list[tuple[int, str, int, float]]) -> Path:
    """A per-collective trace: (step, tag, numel, sum) per record, in issue order."""
    path = folder / f"fingerprint_rank{rank}.jsonl"
    ops: dict[int, int] = {}
    lines = []
    for step, tag, numel, total in records:
        ops[step] = ops.get(step, -1) + 1
        lines.append(json.dumps({"step": step, "op": ops[step], "rank": rank, "tag": tag, "kind": "AllReduce",
                                 "numel": numel, "sum": total}))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_results_no_trace_shares_go_to_the_group_of_the_ranks_that_left_none(tmp_path):
    """World (0-3) and TP groups (0,1) (2,3); rank 1 left no trace, so rank 0's TP results are shared by no one.
    They belong with rank 1 (the one rank no TP group of the others holds), not in the world stream, where they
    would read as collectives rank 0 alone launched."""
    def records(rank: int, tp: float) -> list[tuple[int, str, int, float]]:
        return [r for step in (0, 1) for r in [(step, "dp", 1, 100.0 + step), (step, "attn", 64, tp + 10 * step),
                                               (step, "mlp", 64, tp + 10 * step + 1)]]
    paths = [_write_trace(tmp_path, 0, records(0, 3000.0)),
             *(_write_trace(tmp_path, r, records(r, 7000.0)) for r in (2, 3))]
    d = answer(*paths)
    assert d["root"] is None
    assert {"[ranks=0,1]", "[ranks=0,2,3]", "[ranks=2,3]"} == {c["comm"] for c in d["comms"]}


def test_a_split_right_after_a_misaligned_result_stays_in_the_whole_comm(tmp_path):
    """Rank 3 of four skips `l1.mlp` in step 0 (sums only, no digests). Its `l1.moe` pairs with the others'
    `l1.mlp` (one result, two tags), and then its `lm_head` of 16384 with their `l1.moe` of 4096: from there on
    ranks 0-2 share sums rank 3 does not. That set appears only after the pairing went misaligned, and carries a tag
    the misaligned result carries: it is the world's collective split by the counts, not a comm of ranks 0-2."""
    def record(rank, op, tag, numel, got, expected, step=0):
        return {"step": step, "op": op, "rank": rank, "tag": tag, "kind": "AllReduce", "numel": numel, "sum": got,
                "expected_sum": expected}
    for rank in range(3):
        rows = [record(rank, 0, "l0.mlp", 4096, 40960.0, 40960.0), record(rank, 1, "l0.moe", 4096, 81920.0, 81920.0),
                record(rank, 2, "l1.mlp", 4096, 180224.0, 163840.0), record(rank, 3, "l1.moe", 4096, 794624.0, 204800.0),
                record(rank, 4, "lm_head", 16384, 5734400.0, 6717440.0)]
        (tmp_path / f"fingerprint_rank{rank}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    rows = [record(3, 0, "l0.mlp", 4096, 40960.0, 40960.0), record(3, 1, "l0.moe", 4096, 81920.0, 81920.0),
            record(3, 2, "l1.moe", 4096, 180224.0, 204800.0), record(3, 3, "lm_head", 16384, 3178496.0, 6717440.0),
            record(3, 4, "l0.mlp", 4096, 1433600.0, 1679360.0, step=1)]
    (tmp_path / "fingerprint_rank3.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    root = answer(tmp_path)["root"]
    assert (root["comm"], root["outlier_ranks"], root["seq_range"], root["kind"]) == (
        "[ranks=0,1,2,3]", [3], [3, 3], "missing")


def test_misaligned_pairings_that_recur_name_a_comm_no_aligned_result_names(tmp_path):
    """DP groups (0,2) (1,3) and TP groups (0,1) (2,3), sums with expected values, no digests. Rank 0 skips the
    drafter's two collectives of step 0 in its TP group: from its first TP collective on, every result it reads
    back there is wrong, so no aligned result names (0,1). Its `mlp` and `moe` pair with rank 1's `mtp.0` and
    `mtp.1`, two wrong results each shared by ranks 0 and 1 under two tags: (0,1) is a comm, where the tags part
    the two ranks at seq 1 (a tie), not a DP stream that rank 0's TP records would join."""
    dp = {0: [244.0, 1984.0, 444.0, 3584.0], 1: [366.0, 2976.0, 566.0, 4576.0]}
    right = [1462272.0, 1490944.0, 28672.0, 57344.0, 4702208.0, 847872.0, 876544.0, 7979008.0]
    tp = {0: [("mlp", 421888.0, 12288.0), ("moe", 434176.0, 24576.0), ("lm_head", 704512.0, 2015232.0),
              ("mlp", 430080.0, 831488.0), ("moe", 753664.0, 843776.0), ("lm_head", 3981312.0, 5292032.0)],
          1: [("mtp.0", 421888.0, 626688.0), ("mtp.1", 434176.0, 638976.0), ("mlp", 176128.0, 12288.0),
              ("moe", 430080.0, 24576.0), ("lm_head", 3014656.0, 2015232.0), ("mlp", 995328.0, 831488.0),
              ("moe", 1249280.0, 843776.0), ("lm_head", 6291456.0, 5292032.0)]}
    for r in (2, 3):
        tags = ["mtp.0", "mtp.1", "mlp", "moe", "lm_head", "mlp", "moe", "lm_head"]
        tp[r] = [(tag, total, total) for tag, total in zip(tags, right)]
    for rank in range(4):
        step_of = [0] * (len(tp[rank]) - 3) + [1] * 3
        rows = [(0, "dp.0", 1, dp[rank % 2][0], dp[rank % 2][0]), (0, "dp.1", 8, dp[rank % 2][1], dp[rank % 2][1])]
        rows += [(0, tag, 16384 if tag == "lm_head" else 4096, got, want)
                 for (tag, got, want), step in zip(tp[rank], step_of) if step == 0]
        rows += [(1, "dp.0", 1, dp[rank % 2][2], dp[rank % 2][2]), (1, "dp.1", 8, dp[rank % 2][3], dp[rank % 2][3])]
        rows += [(1, tag, 16384 if tag == "lm_head" else 4096, got, want)
                 for (tag, got, want), step in zip(tp[rank], step_of) if step == 1]
        ops: dict[int, int] = {}
        lines = []
        for step, tag, numel, got, want in rows:
            ops[step] = ops.get(step, -1) + 1
            lines.append(json.dumps({"step": step, "op": ops[step], "rank": rank, "tag": tag, "kind": "AllReduce",
                                     "numel": numel, "sum": got, "expected_sum": want}))
        (tmp_path / f"fingerprint_rank{rank}.jsonl").write_text("\n".join(lines) + "\n")
    d = answer(tmp_path)
    root = d["root"]
    assert (root["comm"], root["seq_range"], root["outlier_ranks"], root["majority"]) == (
        "[ranks=0,1]", [1, 1], [0, 1], False)
    assert {"[ranks=0,1]", "[ranks=0,2]", "[ranks=1,3]", "[ranks=2,3]"} == {c["comm"] for c in d["comms"]}


def test_results_of_a_comm_whose_other_members_left_no_trace_stay_out_of_the_world_stream():
    """subcomm-divergence without rank 3's trace: rank 2's tp{2,3} results are shared with no trace, and their
    tags are shared by ranks 0,1 alone, so they are of a comm whose other member left nothing. They are left out,
    not put in the world stream of the record before them (where they made a false root at seq 2)."""
    d = answer(*traces("subcomm-divergence", ".jsonl")[:3])
    world = next(c for c in d["comms"] if c["comm"] == "[ranks=0,1,2]")
    assert world["launched"] == {"0": 5, "1": 5, "2": 5}
    assert d["root"] is None or d["root"]["seq_range"] is None
    assert any("rank 2 " in c and "other members left no trace" in c for c in d["caveats"])


def test_a_trace_cut_short_is_cut(tmp_path):
    from ncclforensics.api import parse_paths
    text = traces("subcomm-divergence", ".jsonl")[3].read_text()
    cut = tmp_path / "fingerprint_rank3.jsonl"
    cut.write_text(text[: text.index("\n", len(text) // 2) + 20])
    (item,) = parse_paths([str(cut)]).evidence
    assert item.cut is not None and item.cut.line == len(item.fingerprints) + 1


def test_a_world_collective_shared_once_by_all_and_once_by_those_that_went_on_is_a_comm(tmp_path):
    """Two steps, sums only: a world `dp` (ranks 0-3) and TP groups (0,1) (2,3). Rank 3 skips `moe` in step 1,
    its `head` pairs with rank 2's `moe`, and rank 2 hangs in its `head`, so its trace ends with step 0. Each
    world result is shared once: by all four in step 0, by ranks 0, 1, 3 in step 1. The second is the tail of the
    first (rank 2 stopped before it), so the four are a comm and `dp` stays out of the TP streams (there it shifted
    rank 3's seqs by one a step)."""
    def record(rank, step, op, tag, got, expected=None):
        return {"step": step, "op": op, "rank": rank, "tag": tag, "kind": "AllReduce", "numel": 1 if tag == "dp"
                else 64, "sum": got, "expected_sum": got if expected is None else expected}

    def step_of(rank, step, base):
        return [record(rank, step, i, tag, base + 100 * step + i) for i, tag in
                enumerate(["attn", "mlp", "moe", "head"], start=1)]
    for rank in (0, 1):
        rows = [record(rank, 0, 0, "dp", 10.0), *step_of(rank, 0, 1000.0),
                record(rank, 1, 0, "dp", 11.0), *step_of(rank, 1, 1000.0)]
        (tmp_path / f"fingerprint_rank{rank}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    rows = [record(2, 0, 0, "dp", 10.0), *step_of(2, 0, 5000.0)]
    (tmp_path / "fingerprint_rank2.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    rows = [record(3, 0, 0, "dp", 10.0), *step_of(3, 0, 5000.0), record(3, 1, 0, "dp", 11.0),
            record(3, 1, 1, "attn", 5101.0), record(3, 1, 2, "mlp", 5102.0), record(3, 1, 3, "head", 7777.0, 5104.0)]
    (tmp_path / "fingerprint_rank3.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    d = answer(tmp_path)
    world = next(c for c in d["comms"] if c["comm"] == "[ranks=0,1,2,3]")
    assert world["launched"] == {"0": 2, "1": 2, "2": 1, "3": 2}
    root = d["root"]
    assert root["comm"] == "[ranks=2,3]" and 3 in root["outlier_ranks"] and root["seq_range"][0] <= 7


def test_a_result_shared_beyond_every_comm_of_the_trace_goes_with_its_holders_and_is_a_guess():
    """Rank 0's TP results (with rank 1) recur; its world result is shared once by ranks 0-2 (rank 3's trace was
    cut) and once by ranks 0, 1, 3: no comm the trace names holds either set, and no tag places them. They go
    with the ranks that read them back, not into the TP stream beside them (every TP seq after them would be one
    too high), and they are guesses: `seq_slack` widens the TP seqs after them by one each."""
    from ncclforensics.align.trace_groups import record_groups, result_holders
    from ncclforensics.align.traces import Placed, seq_slack
    from ncclforensics.model import FingerprintRow, Location

    def row(rank, step, op, tag, value):
        return FingerprintRow(Location(f"fp{rank}", step * 10 + op), rank, step, op, tag=tag, kind="AllReduce",
                              sum=value)
    rows = [row(r, s, 1 + i, tag, 100.0 * s + i) for r in (0, 1) for s in (0, 1) for i, tag in enumerate(("a", "b"))]
    rows += [row(r, 0, 0, "dp", 7.0) for r in (0, 1, 2)] + [row(r, 1, 0, "dp", 9.0) for r in (0, 1, 3)]
    holders, tags_of = result_holders(rows)
    trace = sorted((r for r in rows if r.rank == 0), key=lambda r: (r.step, r.op))
    last = {r.rank: max((x for x in rows if x.rank == r.rank), key=lambda x: (x.step, x.op)) for r in rows}
    groups, guessed = record_groups(trace, holders, tags_of, 0, last)
    assert groups == [frozenset({0, 1, 2}), *[frozenset({0, 1})] * 2, frozenset({0, 1, 3}), *[frozenset({0, 1})] * 2]
    assert guessed == {0, 3}
    placed = (Placed("w", 1, True), Placed("tp", 1, False), Placed("tp", 2, False), Placed("w2", 1, True),
              Placed("tp", 3, False), Placed("tp", 4, False))
    assert seq_slack("tp", 3, {0: placed}) == (0, 2) and seq_slack("tp", 1, {0: placed}) == (0, 1)
    # guessed into the comm itself: each one before the seq may be another comm's
    assert seq_slack("w", 1, {0: (Placed("w", 1, True), Placed("w", 2, False))}) == (0, 0)
    assert seq_slack("w", 2, {0: (Placed("w", 1, True), Placed("w", 2, False))}) == (1, 0)


def test_a_trace_sharing_nothing_goes_to_the_one_set_of_ranks_its_comms_have_and_names_the_others_comm(tmp_path):
    """PyTorch's logs put ranks 0-3 in the default group and in group 1, one set of ranks under two names. Rank 0's
    trace, cut after its first record, shares no result (it ran an all-gather where the others ran an all-reduce):
    it goes to the ranks' one set, and the others' results, shared by ranks 1-3 alone, name that set too (what
    rank 0 read back, it read back apart), so rank 0's first record parts from theirs at seq 1."""
    paths = []
    for rank in range(4):
        prefix = f"[rank{rank}]:[E1129 09:55:07.735106066 ProcessGroupNCCL.cpp"
        log = tmp_path / f"torch_rank{rank}.log"
        log.write_text(f"{prefix}:1849] [PG ID 0 PG GUID 0 Rank {rank}] Observed flight recorder dump signal from "
                       f"another rank via TCPStore.\n{prefix}:2636] [PG ID 1 PG GUID 1(tp) Rank {rank}] First PG on "
                       "this rank to signal dumping.\n")
        paths.append(str(log))
        rows = [{"step": 0, "op": i, "rank": rank, "tag": f"t{i}", "kind": "AllReduce", "numel": 8,
                 "sum": 10.0 + i, "expected_sum": 10.0 + i} for i in range(3)]
        if rank == 0:
            rows = [{**rows[0], "kind": "AllGather", "numel": 2, "sum": 3.0, "expected_sum": 4.0}]
        path = tmp_path / f"fingerprint_rank{rank}.jsonl"
        text = "".join(json.dumps(r) + "\n" for r in rows)
        path.write_text(text + ('{"step": 0, "op": 1' if rank == 0 else ""))
        paths.append(str(path))
    root = answer(*paths)["root"]
    assert root["outlier_ranks"] == [0] and root["seq_range"] == [1, 1] and root["pinned_by"] == "signatures"


def test_a_trace_sharing_no_result_widens_the_set_the_others_share_to_the_one_comm_of_every_trace(tmp_path):
    """One comm of ranks 0-3, sums with expected values, nothing else names it. Rank 1 skipped `attn` in step 0:
    its every record pairs misaligned and shares no result, and ranks 0, 2, 3 share theirs (wrong). Rank 1 goes
    to the one comm of every traced rank, and so do the three's records (the comm less the rank that departed, no
    comm of their own): the tags then part rank 1 from them at seq 1, where two comms that no record compared left
    only the per-step checksums, which named all four with no majority."""
    others = [(0, "attn", 64, 500.0, 100.0), (0, "head", 8, 90.0, 80.0)]
    d = _sums_only(tmp_path, {0: others, 2: others, 3: others,
                              1: [(0, "head", 8, 30.0, 80.0), (1, "attn", 64, 700.0, 200.0), (1, "head", 8, 60.0, 90.0)]})
    assert [c["comm"] for c in d["comms"]] == ["[ranks=0,1,2,3]"]
    root = d["root"]
    assert root["seq_range"] == [1, 1] and root["outlier_ranks"] == [1] and root["majority"]


def test_a_trace_sharing_only_its_first_result_misaligned_joins_the_comm_the_others_share_the_rest_of(tmp_path):
    """One comm of ranks 0-3, sums with expected values, nothing else names it. Rank 0 alone ran a drafter `mtp`
    all-reduce in step 0, which paired with the others' `attn` (one sum, two tags); from then on each of its results
    is its own, and ranks 1-3 share theirs (wrong). The three are the comm less the rank that departed: all four go
    to one comm, where the tags part rank 0 from them at seq 1. Left apart (a comm of ranks 1-3, rank 0's later
    records of no comm), no record compared them, and only the per-step checksums named all four, no majority."""
    others = [(0, "attn", 64, 240.0, 40.0), (0, "head", 256, 5920.0, 6560.0), (1, "attn", 64, 1400.0, 1640.0),
              (1, "head", 256, 12320.0, 12960.0)]
    d = _sums_only(tmp_path, {1: others, 2: others, 3: others, 0: [
        (0, "mtp", 64, 240.0, 2040.0), (0, "attn", 64, 1480.0, 40.0), (0, "head", 256, 5600.0, 6560.0),
        (1, "attn", 64, 3080.0, 1640.0)]})
    assert [c["comm"] for c in d["comms"]] == ["[ranks=0,1,2,3]"]
    root = d["root"]
    assert (root["seq_range"], root["outlier_ranks"], root["kind"], root["majority"]) == ([1, 1], [0], "extra", True)


def test_a_trace_sharing_no_result_joins_the_one_group_the_logs_name_by_its_other_members_own_word(tmp_path):
    """Group 1 of ranks 0-3; rank 0 skipped `mlp` in step 0, so its every record pairs misaligned and shares no
    result, and ranks 1-3 share theirs, read back wrong. Their watchdogs fired in group 1; rank 0's log names only
    the default group, where it enqueued nothing. Group 1 is known by its members' own word alone, which names none
    that said nothing, and it holds every rank but rank 0: rank 0 is its fourth member, where its tags part from
    the others' at seq 1. Left out, it left ranks 1-3 parting from no one, each named on both sides."""
    for rank in range(4):
        head = f"[rank{rank}]:[E1129 09:55:07.731921066 ProcessGroupNCCL.cpp:1914] [PG ID 0 PG GUID 0 Rank {rank}]"
        lines = [f"{head} Received a dump signal due to a collective timeout from  rank 1 and we will try our best to "
                 "dump the debug info. Last enqueued NCCL work: -1, last completed NCCL work: -1."]
        if rank:
            lines = [f"[rank{rank}]:[E1129 09:55:01.733921066 ProcessGroupNCCL.cpp:689] [Rank {rank}] Watchdog caught "
                     "collective operation timeout: WorkNCCL(SeqNum=4, OpType=ALLREDUCE, NumelIn=8192, "
                     "NumelOut=8192, Timeout(ms)=20000) ran for 20017 milliseconds before timing out.",
                     f"[rank{rank}]:[E1129 09:55:01.735021066 ProcessGroupNCCL.cpp:2303] [PG ID 1 PG GUID 1(tp) Rank "
                     f"{rank}]  failure detected by watchdog at work sequence id: 4 PG status: last enqueued work: 4, "
                     "last completed work: 3", *lines]
        (tmp_path / f"torch_rank{rank}.log").write_text("\n".join(lines) + "\n")
    others = [(0, "mlp", 2048, 102400.0, 20480.0), (0, "lm_head", 8192, 3850240.0, 3358720.0)]
    d = _sums_only(tmp_path, {1: others, 2: others, 3: others, 0: [
        (0, "lm_head", 8192, 409600.0, 3358720.0), (1, "mlp", 2048, 962560.0, 839680.0),
        (1, "lm_head", 8192, 3686400.0, 6635520.0)]})
    root = d["root"]
    assert (root["comm"], root["seq_range"], root["outlier_ranks"], root["majority"]) == ("1", [1, 1], [0], True)


def test_a_world_result_only_the_ranks_that_went_on_share_is_the_worlds_tail_not_a_tp_tag(tmp_path):
    """Sums only: a world `dp` (ranks 0-3) each step, TP groups (0,1) (2,3) with sums of their own. Ranks 0 and 1
    stop after step 1; ranks 2 and 3 go on through step 2, whose `dp` they alone share. That record is the world's
    tail, so the TP group (2,3) carries no world tag, is a comm of its own, and its records stay out of the world
    stream (they all went to the world, which then had 12 records a rank where ranks 0 and 1 have 4)."""
    def record(rank, step, op, tag, got):
        return {"step": step, "op": op, "rank": rank, "tag": tag, "kind": "AllReduce", "numel": 1 if tag == "dp"
                else 64, "sum": got, "expected_sum": got}

    def steps(rank, count, base):
        return [r for step in range(count) for r in [record(rank, step, 0, "dp", 10.0 + step), *[
            record(rank, step, i, tag, base + 100 * step + i) for i, tag in enumerate(["attn", "mlp"], start=1)]]]
    for rank, count, base in ((0, 2, 1000.0), (1, 2, 1000.0), (2, 3, 5000.0), (3, 3, 5000.0)):
        (tmp_path / f"fingerprint_rank{rank}.jsonl").write_text("".join(json.dumps(r) + "\n"
                                                                        for r in steps(rank, count, base)))
    comms = {c["comm"]: c["launched"] for c in answer(tmp_path)["comms"]}
    assert comms["[ranks=0,1,2,3]"] == {"0": 2, "1": 2, "2": 3, "3": 3}
    assert comms["[ranks=2,3]"] == {"2": 6, "3": 6}


def test_a_trace_that_lacks_a_collective_its_rank_completed_ends_where_it_was_written(tmp_path):
    """World (0-3) and TP groups (0,1) (2,3), digests, written once a step. Rank 2 completed world collective 3
    (step 2's first; its watchdog's `last completed work: 3`), then launched a 4th there alone and hung, so its
    trace holds steps 0 and 1 only; its peer's holds step 2 too. The TP group's shorter stream is where the trace
    stopped being written, no departure: the root is rank 2's extra world collective."""
    for rank in range(4):
        steps = range(2 if rank == 2 else 3)
        rows = [{"step": s, "op": op, "rank": rank, "tag": tag, "digest": f"{s}{op}{'w' if op == 0 else rank // 2}"}
                for s in steps for op, tag in enumerate(("dp", "mlp", "lm_head"))]
        (tmp_path / f"fingerprint_rank{rank}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        pg = f"[rank{rank}]:[E1129 09:55:07.757101066 ProcessGroupNCCL.cpp:1914] [PG ID 0 PG GUID 0(default_pg) " \
             f"Rank {rank}]"
        lines = (["[rank2]:[E1129 09:55:01.763101066 ProcessGroupNCCL.cpp:689] [Rank 2] Watchdog caught collective "
                  "operation timeout: WorkNCCL(SeqNum=4, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=20000) "
                  "ran for 20018 milliseconds before timing out.",
                  "[rank2]:[E1129 09:55:01.764201066 ProcessGroupNCCL.cpp:2303] [PG ID 0 PG GUID 0(default_pg) Rank 2]"
                  "  failure detected by watchdog at work sequence id: 4 PG status: last enqueued work: 4, last "
                  "completed work: 3"] if rank == 2 else
                 [f"{pg} Received a dump signal due to a collective timeout from  rank 2 and we will try our best to "
                  "dump the debug info. Last enqueued NCCL work: 3, last completed NCCL work: 3."])
        (tmp_path / f"torch_rank{rank}.log").write_text("\n".join(lines) + "\n")
    root = answer(tmp_path)["root"]
    assert (root["comm"], root["outlier_ranks"], root["kind"]) == ("0", [2], "extra")
    assert root["seq_range"][0] <= 4 <= root["seq_range"][1]


def test_a_result_no_one_shares_follows_its_tag_to_the_ranks_it_went_with_before(tmp_path):
    """TP groups (0,1) (2,3), DP groups (0,2) (1,3), sums only. Ranks 0 and 3 hung in step 1 and their traces end
    with step 0, so rank 1's step-1 `dp` result is shared with no one; its tag went with rank 3 (beyond every comm
    its trace's aligned results name) in step 0. It follows that tag, not the TP group, the one comm holding rank 1:
    there it would put every later TP seq one too high."""
    from ncclforensics.align.traces import with_trace_rows
    from ncclforensics.sources import InputFile, parse_file

    def record(rank, step, op, tag, value):
        return {"step": step, "op": op, "rank": rank, "tag": tag, "kind": "AllReduce", "numel": 64, "sum": value,
                "expected_sum": value}
    for rank in range(4):
        tp, dp = 1000.0 * (1 + rank // 2), 10.0 * (1 + rank % 2)
        rows = [record(rank, s, op, tag, (tp if tag != "dp" else dp) + 100 * s + op)
                for s in (range(2) if rank in (1, 2) else range(1))
                for op, tag in enumerate(("dp", "attn", "mlp", "lm_head"))]
        (tmp_path / f"fingerprint_rank{rank}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    evidence = [parse_file(InputFile(p, p.name)) for p in sorted(tmp_path.iterdir())]
    out, _, guesses = with_trace_rows(evidence)
    rows = next(e for e in out if e.path.endswith("rank1.jsonl")).collectives
    placed = {(r["step"], r["tag"]): (r["comm"], r["seq"]) for r in rows.iter_rows(named=True)}
    assert placed[(1, "dp")] == ("[ranks=1,3]", 2)
    assert placed[(1, "attn")] == ("[ranks=0,1]", 4)
    assert any(p.by_neighbours and p.comm == "[ranks=1,3]" and p.seq == 2 for p in guesses[1])


def _sums_only(tmp_path, rows_of, kinds: dict[str, str] | None = None) -> dict:
    """Write each rank's records (rank -> [(step, tag, numel, sum, expected)]) as a trace of sums only; the answer.
    `kinds`: tag -> its op, where not an all-reduce."""
    for rank, rows in rows_of.items():
        ops: dict[int, int] = {}
        lines = []
        for step, tag, numel, got, want in rows:
            ops[step] = ops.get(step, -1) + 1
            lines.append(json.dumps({"step": step, "op": ops[step], "rank": rank, "tag": tag,
                                     "kind": (kinds or {}).get(tag, "AllReduce"),
                                     "numel": numel, "sum": got, "expected_sum": want}))
        (tmp_path / f"fingerprint_rank{rank}.jsonl").write_text("\n".join(lines) + "\n")
    return answer(tmp_path)


def _split_root(tmp_path, rows_of) -> tuple:
    """The root's comm, range and outliers of traces of sums only that the sums split into their comms (no caveat
    that the comms cannot be told)."""
    d = _sums_only(tmp_path, rows_of)
    assert not any("cannot be told" in c for c in d["caveats"])
    return d["root"]["comm"], d["root"]["seq_range"], d["root"]["outlier_ranks"]


def test_a_split_of_one_comm_beside_another_comm_of_the_rank_goes_to_the_comm_whose_tags_it_carries(tmp_path):
    """TP groups (0-3) (4-7) and DP pairs (i, i+4), sums only. Rank 1 issues `head` before `mlp` in step 0: ranks 0,
    2 and 3 share two wrong sums rank 1 does not. Rank 0's trace then holds three sets, its DP pair, the TP group
    (step 1, aligned) and the three, whose tags are the TP group's: the three are the TP group split, beside the DP
    pair (two widest sets, which left every trace but rank 1's out as comms its sums cannot split, and the answer
    fell back on per-step checksums naming all four); the tags part rank 1 from the three at seq 1."""
    rows_of = {}
    for rank in range(8):
        group, pair = rank // 4, rank % 4
        rows = []
        for step in range(2):
            dp = 10.0 + pair + 100 * step
            mlp, head = 1000.0 * (group + 1) + 10 * step, 50000.0 * (group + 1) + 10 * step
            tp = [("mlp", 64, mlp, mlp), ("head", 256, head, head)]
            if group == 0 and step == 0:
                tp = ([("head", 256, 777.0, head), ("mlp", 64, 999.0, mlp)] if rank == 1
                      else [("mlp", 64, 333.0, mlp), ("head", 256, 555.0, head)])
            rows += [(step, "dp", 1, dp, dp), *((step, *x) for x in tp)]
        rows_of[rank] = rows
    assert _split_root(tmp_path, rows_of) == ("[ranks=0,1,2,3]", [1, 1], [1])


def test_a_split_of_the_world_beside_a_tp_group_inside_it_goes_to_the_world(tmp_path):
    """A world (0-3) with `dp.0` and `dp.1` a step, TP groups (0,1) (2,3) inside it, sums only. Rank 3 issues
    `dp.1` before `dp.0` in step 1: ranks 0-2 share two wrong sums under the world's tags. Rank 0's trace holds the
    world, its TP group (tags of its own: a comm, not a split of the world though the world holds it) and the
    three, which carry the world's tags: its split (the one widest set held both, which left the traces out as
    comms the sums cannot split); the tags part rank 3 from the three at seq 3."""
    assert _split_root(tmp_path, _world_of_tp_pairs(swapping={3})) == ("[ranks=0,1,2,3]", [3, 3], [3])


def _world_of_tp_pairs(swapping: set[int], head: bool = False) -> dict[int, list[tuple]]:
    """rank -> [(step, tag, numel, sum, expected)]: the world (0-3) with `dp.0` and `dp.1` (of unlike sizes) a step,
    TP groups (0,1) (2,3) inside it with `mlp` (and `head`) of their own. The ranks `swapping` issue `dp.1` before
    `dp.0` in step 1, and read back two wrong sums of their own; the rest two others."""
    rows_of = {}
    for rank in range(4):
        group = rank // 2
        rows = []
        for step in range(2):
            dp = [("dp.0", 1, 20.0 + step, 20.0 + step), ("dp.1", 8, 300.0 + step, 300.0 + step)]
            if step == 1:
                dp = ([("dp.1", 8, 44.0, 301.0), ("dp.0", 1, 66.0, 21.0)] if rank in swapping
                      else [("dp.0", 1, 22.0, 21.0), ("dp.1", 8, 88.0, 301.0)])
            mlp = 1000.0 * (group + 1) + 10 * step
            rows += [*((step, *x) for x in dp), (step, "mlp", 64, mlp, mlp)]
            rows += [(step, "head", 256, mlp + 5, mlp + 5)] if head else []
        rows_of[rank] = rows
    return rows_of


def _world_swapped_by_both_pairs() -> dict[int, list[tuple]]:
    """Ranks 2 and 3 both swap: ranks 0, 1 read back two wrong sums under the world's tags, and ranks 2, 3 two
    others, so each split of the world is a TP group's ranks exactly."""
    return _world_of_tp_pairs(swapping={2, 3}, head=True)


def test_a_split_of_the_world_that_is_a_tp_group_goes_to_the_world_where_it_read_back_wrong(tmp_path):
    """_world_swapped_by_both_pairs, sums with expected values. A wrong result under a tag of the world's aligned
    results is the world's collective, misaligned: it stays in the world's stream (the TP group, a comm with tags of
    its own, took the world's records and every trace was one stream, the root pinned at a seq of its counter); the
    tags part the two pairs at seq 3, no majority either way."""
    d = _sums_only(tmp_path, _world_swapped_by_both_pairs())
    assert not any("cannot be told" in c for c in d["caveats"])
    root = d["root"]
    assert root["comm"] == "[ranks=0,1,2,3]" and root["seq_range"] == [3, 3] and not root["majority"]
    assert {"[ranks=0,1]", "[ranks=2,3]"} <= {c["comm"] for c in d["comms"]}


def test_a_split_of_the_world_that_is_a_tp_group_with_sums_unchecked_cannot_be_told_apart(tmp_path):
    """_world_swapped_by_both_pairs, sums alone: nothing says the TP groups' results under the world's tags are the
    world's split rather than their own collectives, or the world's results under them coincidences of sums across
    the groups. The traces are left out as comms their sums cannot split (every trace was one stream, and the root
    was pinned at a seq of its counter)."""
    for rank, rows in _world_swapped_by_both_pairs().items():
        _write_trace(tmp_path, rank, [(step, tag, numel, got) for step, tag, numel, got, _ in rows])
    d = answer(tmp_path)
    assert any("cannot be told" in c for c in d["caveats"]) and d["root"] is None


def test_a_split_from_the_first_misaligned_collective_carries_a_tag_the_whole_comm_read_back_misaligned(tmp_path):
    """One comm of four, sums only. Rank 3 leaves out `moe` in step 0: its `head` (an all-gather of another size)
    pairs with the others' `moe`, its next `mlp` with their `head`, each side reading back its own sum, so ranks 0-2
    share wrong sums under `moe` and `head` that no aligned result of the four carries. Then rank 3's `moe` pairs
    with their `mlp` of the same size: one wrong result all four read back under `mlp` and `moe`, so `moe` was
    issued on the four's comm, and the three are the four split (their sums left out as several comms the sums
    cannot split, and per-step checksums named all four); the tags part rank 3 from the three at seq 4."""
    rows_of = {r: [(0, "a", 512, 10.0, 10.0), (0, "b", 512, 20.0, 20.0), (0, "mlp", 512, 30.0, 30.0)]
               for r in range(4)}
    for r in range(3):
        rows_of[r] += [(0, "moe", 512, 41.0, 40.0), (0, "head", 128, 51.0, 50.0), (1, "a", 512, 61.0, 60.0),
                       (1, "b", 512, 71.0, 70.0), (1, "mlp", 512, 81.0, 80.0), (1, "moe", 512, 91.0, 90.0),
                       (1, "head", 128, 101.0, 100.0)]
    rows_of[3] += [(0, "head", 128, 999.0, 50.0), (1, "a", 512, 888.0, 60.0), (1, "b", 512, 61.0, 70.0),
                   (1, "mlp", 512, 71.0, 80.0), (1, "moe", 512, 81.0, 90.0), (1, "head", 128, 444.0, 100.0),
                   (2, "a", 512, 777.0, 110.0)]
    assert _split_root(tmp_path, rows_of) == ("[ranks=0,1,2,3]", [4, 4], [3])


def test_an_extra_collective_paired_misaligned_under_a_tag_of_its_own_goes_to_the_comm_its_partners_tag_names(tmp_path):
    """A world (0-5) with `dp` a step and TP pairs (0,1) (2,3) (4,5), sums only. Rank 1 runs an extra world
    `dp.retry` at the end of step 1, which pairs with the step-2 `dp` of ranks 2-5: one wrong result they read back
    under two tags, one of them the world's. Rank 0 is held elsewhere (its trace ends with step 1). The pairing is
    the world's collective, whatever tag rank 1 gave its side: rank 1's trace splits into the world and its TP pair
    (its `dp.retry`, a tag no aligned result confirms, left the trace out as comms its sums cannot split, and rank
    0, one collective short in the world, was named); the tags part rank 1 from ranks 2-5 at seq 3."""
    rows_of = {}
    for rank in range(6):
        tp = 1000.0 * (rank // 2 + 1)
        rows = [(step, *x) for step in range(2) for x in (
            ("dp", 1, 100.0 + step, 100.0 + step), ("mlp", 64, tp + step, tp + step),
            ("head", 256, tp + 5 + step, tp + 5 + step))]
        if rank == 1:
            rows.append((1, "dp.retry", 1, 777.0, 150.0))
        if rank >= 2:
            rows += [(2, "dp", 1, 777.0, 110.0), (2, "mlp", 64, tp + 10, tp + 10), (2, "head", 256, tp + 15, tp + 15)]
        rows_of[rank] = rows
    assert _split_root(tmp_path, rows_of) == ("[ranks=0,1,2,3,4,5]", [3, 3], [1])


def test_a_pairing_under_tags_only_other_groups_confirm_goes_to_the_group_those_groups_make_of_its_holders(tmp_path):
    """A world (0-5) with `dp.0` and `dp.1` and TP pairs (0,1) (2,3) (4,5) with two layers each, sums only. Rank 1
    leaves out `l1.attn`: its `l1.mlp` pairs with rank 0's `l1.attn`, one wrong result under two tags, and both
    traces end there (rank 0 waits at `l1.mlp`), so no aligned result of theirs confirms either tag. The other
    pairs' do, in groups that leave ranks 0 and 1 out: their group for both tags is (0,1), a comm their layer-0
    results name, so the pairing is (0,1)'s (the traces were left out as comms their sums cannot split, and the
    root named none of their ranks); the tags part the two at seq 3, a tie."""
    rows_of = {}
    for rank in range(6):
        tp = 100.0 * (rank // 2 + 1)
        layers = [("l0.attn", 64, tp, tp), ("l0.mlp", 64, tp + 1, tp + 1)]
        layers += {0: [("l1.attn", 64, 777.0, tp + 2)], 1: [("l1.mlp", 64, 777.0, tp + 3)]}.get(
            rank, [("l1.attn", 64, tp + 2, tp + 2), ("l1.mlp", 64, tp + 3, tp + 3)])
        rows_of[rank] = [(0, *x) for x in [("dp.0", 1, 10.0, 10.0), ("dp.1", 8, 20.0, 20.0), *layers]]
    d = _sums_only(tmp_path, rows_of)
    assert not any("cannot be told" in c for c in d["caveats"])
    root = d["root"]
    assert (root["comm"], root["seq_range"], root["outlier_ranks"], root["majority"]) == (
        "[ranks=0,1]", [3, 3], [0, 1], False)


def test_traces_of_every_rank_go_to_the_group_a_desync_report_lists_them_in_not_to_an_idle_default_group(tmp_path):
    """One group `1` over ranks 0-4; ranks 0 and 3 left out step 1's second collective, so their traces (flushed
    per step) hold step 1's first; ranks 1, 2 and 4 hung in step 1 and their traces end with step 0. Only they name
    group 1 (their watchdogs fired there; the report lists ranks 0 and 3 as its members too); every rank's
    dump line names the default group 0, where each enqueued nothing (`-1`). The traces are group 1's, where the
    watchdogs count what ranks 1, 2 and 4 completed past their traces' end: ranks 0 and 3 launched fewer, not more."""
    for rank in range(5):
        steps = 2 if rank in (0, 3) else 1
        rows = [{"step": s, "op": op, "rank": rank, "tag": f"layer{op}", "kind": "AllReduce", "numel": 64,
                 "sum": 10.0 * s + op, "digest": f"{s}{op}"} for s in range(steps) for op in range(2 if s == 0 else 1)]
        (tmp_path / f"fingerprint_rank{rank}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        head = f"[rank{rank}]:[E1129 09:55:07.731921066 ProcessGroupNCCL.cpp:1914] [PG ID 0 PG GUID 0 Rank {rank}]"
        lines = [f"{head} Received a dump signal due to a collective timeout from  rank 1 and we will try our best to "
                 "dump the debug info. Last enqueued NCCL work: -1, last completed NCCL work: -1."]
        if rank in (1, 2, 4):
            lines = [f"[rank{rank}]:[E1129 09:55:01.733921066 ProcessGroupNCCL.cpp:689] [Rank {rank}] Watchdog caught "
                     "collective operation timeout: WorkNCCL(SeqNum=4, OpType=ALLREDUCE, NumelIn=64, NumelOut=64, "
                     "Timeout(ms)=20000) ran for 20017 milliseconds before timing out.",
                     f"[rank{rank}]:[E1129 09:55:01.734921066 ProcessGroupNCCL.cpp:2495] Rank {rank}",
                     f"\t - [{rank}] Timeout at collective: ALLREDUCE, #4",
                     "\t - To our best knowledge, the lagging/dead/mismatched ranks that caused the desync are:",
                     "\t     [0, 3] finished collective #3, but didn't join collective #4 (count from 1)",
                     "\t - Snapshot of ranks' latest states:", "\t   #3 finished ranks:",
                     "\t     [0, 3] finished ALLREDUCE", "\t   #4 started ranks:", "\t     [1, 2, 4] started ALLREDUCE",
                     f"[rank{rank}]:[E1129 09:55:01.735021066 ProcessGroupNCCL.cpp:2303] [PG ID 1 PG GUID 1(tp) Rank "
                     f"{rank}]  failure detected by watchdog at work sequence id: 4 PG status: last enqueued work: 4, "
                     "last completed work: 3", *lines]
        (tmp_path / f"torch_rank{rank}.log").write_text("\n".join(lines) + "\n")
    root = answer(tmp_path)["root"]
    assert root["comm"] == "1" and root["outlier_ranks"] == [0, 3] and root["kind"] in ("stopped", "missing")
    assert root["seq_range"][0] <= 4 <= root["seq_range"][1]


def _swap_beside_one_fewer(tmp_path: Path, cut: bool = False) -> None:
    """The files of the incident below: rank 1's swap in step 0, rank 0's skip in step 1 (`cut`: rank 0's trace
    cut short inside its second record)."""
    for rank in range(5):
        tags = ["a", "c", "b"] if rank == 1 else ["a", "b", "c"]
        rows = [{"step": 0, "op": op, "rank": rank, "tag": tag, "kind": "AllReduce", "numel": 64,
                 "digest": f"0{op}"} for op, tag in enumerate(tags)]
        if rank == 0:
            rows += [{"step": 1, "op": op, "rank": 0, "tag": tag, "kind": "AllReduce", "numel": 64,
                      "digest": f"1{op}"} for op, tag in enumerate(["a", "c"])]
        text = "".join(json.dumps(r) + "\n" for r in rows)
        if rank == 0 and cut:
            text = text[:text.index("\n") + 30]  # (cut mid-line, inside its second record)
        (tmp_path / f"fingerprint_rank{rank}.jsonl").write_text(text)
        head = f"[rank{rank}]:[E1129 09:55:07.731921066 ProcessGroupNCCL.cpp:1914] [PG ID 0 PG GUID 0 Rank {rank}]"
        lines = [f"{head} Received a dump signal due to a collective timeout from  rank 1 and we will try our best to "
                 "dump the debug info. Last enqueued NCCL work: -1, last completed NCCL work: -1."]
        if rank:
            lines = [f"[rank{rank}]:[E1129 09:55:01.733921066 ProcessGroupNCCL.cpp:689] [Rank {rank}] Watchdog caught "
                     "collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=64, NumelOut=64, "
                     "Timeout(ms)=20000) ran for 20017 milliseconds before timing out.",
                     f"[rank{rank}]:[E1129 09:55:01.734921066 ProcessGroupNCCL.cpp:2495] Rank {rank}",
                     f"\t - [{rank}] Timeout at collective: ALLREDUCE, #6",
                     "\t - To our best knowledge, the lagging/dead/mismatched ranks that caused the desync are:",
                     "\t     [0] finished collective #5, but didn't join collective #6 (count from 1)",
                     "\t - Snapshot of ranks' latest states:", "\t   #5 finished ranks:",
                     "\t     [0] finished ALLREDUCE", "\t   #6 started ranks:", "\t     [1, 2, 3, 4] started ALLREDUCE",
                     f"[rank{rank}]:[E1129 09:55:01.735021066 ProcessGroupNCCL.cpp:2303] [PG ID 1 PG GUID 1(tp) Rank "
                     f"{rank}]  failure detected by watchdog at work sequence id: 5 PG status: last enqueued work: 6, "
                     "last completed work: 4", *lines]
        (tmp_path / f"torch_rank{rank}.log").write_text("\n".join(lines) + "\n")


def test_a_rank_counted_one_fewer_past_records_that_end_alike_is_not_named_where_they_put_it_past_the_root(
        tmp_path):
    """One group `1` over ranks 0-4, three all-reduces a step (tags a, b, c). Rank 1 issued step 0's b and c in each
    other's place (its tags part from the others' at seq 2); rank 0 left out step 1's b. Ranks 1-4 wait in seq 5
    with seq 6 enqueued behind it (`last enqueued work: 6`), and their traces, flushed per step, end with step 0;
    rank 0 completed its seq 5, joined no seq 6 (the desync report), and its trace holds all five. Every rank's
    records end at seq 5: only the counts, which go on past the others' records, show rank 0 one short. It departed
    too, but its tags, alike with the others' through seq 3, put its departure after seq 2, where the tags part rank
    1: rank 1 departed first, and the root names it alone (153405 keeps a rank whose records leave its departure
    inside the root's range; test_step_sums has the rule on its own)."""
    _swap_beside_one_fewer(tmp_path)
    d = answer(tmp_path)
    root = d["root"]
    assert root["comm"] == "1" and root["outlier_ranks"] == [1] and root["majority"]
    assert root["seq_range"][0] <= 2 <= root["seq_range"][1]
    assert not [n for n in d["notes"] if n["kind"] == "counted_past_records"]


def test_a_rank_cut_short_that_counts_carry_as_far_as_the_others_records_and_count_one_fewer_is_named(tmp_path):
    """The incident above, rank 0's trace cut inside its second record. Rank 0's count (the desync report's: it
    finished #5 and joined no #6) carries its stream on past the cut to seq 5, blank, where the others' records
    end: compared so, it ends alike with them, and only the counts, which go on past their records, show it one
    short. Its one record, alike with the others', puts its departure at seq 2 or later, which the root's range
    holds: the root names it beside rank 1, not among the reference ranks that ran the program (1158222)."""
    _swap_beside_one_fewer(tmp_path, cut=True)
    d = answer(tmp_path)
    root = d["root"]
    assert root["comm"] == "1" and root["outlier_ranks"] == [0, 1] and 0 not in root["reference_ranks"]
    assert root["seq_range"][0] <= 2 <= root["seq_range"][1]
    assert [n for n in d["notes"] if n["kind"] == "counted_past_records"]


def test_a_misaligned_result_shared_once_by_all_whose_other_ranks_stopped_before_the_rest_is_the_comm(tmp_path):
    """One comm of four, sums only, one `mlp` all-reduce a step. Ranks 1 and 2 each ran a drafter `mtp` all-reduce
    at seq 1, which paired with the `mlp` of ranks 0 and 3 (one sum, two tags); rank 1's trace was cut after it.
    From seq 2 on ranks 0, 2 and 3 alone share the sums: the tail of the four (rank 1's trace ended before them),
    not a comm of three. All four are the comm, and they part at seq 1, two against two."""
    def record(rank, step, op, tag, got, expected):
        return {"step": step, "op": op, "rank": rank, "tag": tag, "kind": "AllReduce", "numel": 1024, "sum": got,
                "expected_sum": expected}
    sums, expected = [266240.0, 215040.0, 624640.0, 1034240.0], [10240.0, 419840.0, 829440.0, 1239040.0]
    for rank in (0, 3):
        rows = [record(rank, step, step, "mlp", sums[step], expected[step]) for step in range(4)]
        (tmp_path / f"fingerprint_rank{rank}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    drafter = [record(2, 0, 0, "mtp", sums[0], 522240.0)]
    rows = drafter + [record(2, step - 1, step, "mlp", sums[step], expected[step - 1]) for step in range(1, 4)]
    (tmp_path / "fingerprint_rank2.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    cut = json.dumps(record(1, 0, 1, "mlp", sums[1], expected[0]))[:40]
    (tmp_path / "fingerprint_rank1.jsonl").write_text(json.dumps({**drafter[0], "rank": 1}) + "\n" + cut)
    root = answer(tmp_path)["root"]
    assert root["comm"] == "[ranks=0,1,2,3]" and root["seq_range"][0] == 1
    assert {1, 2} <= set(root["outlier_ranks"])


def test_a_result_the_traced_ranks_share_may_be_of_a_wider_comm_where_ranks_of_the_job_left_no_trace(tmp_path):
    """Ranks 0-3 left no trace; ranks 4-7 each read back `dp` and then two TP collectives, every result shared by
    the four. Rank 5 left out `mlp`: its `moe` pairs with the others' `mlp`. That is seq 2 of the four's comm only
    if `dp` is theirs too; `dp` may as well be a world collective of all eight ranks (nothing the traces hold tells
    the two apart), which makes it seq 1: the root's range holds both, and a caveat says why."""
    rows_of = {}
    for rank in range(4, 8):
        rows = [(0, "dp", 1, 2196.0, 2196.0)]
        rows += ([(0, "moe", 512, 16384.0, 26624.0), (0, "mtp", 512, 177152.0, 678912.0)] if rank == 5 else
                 [(0, "mlp", 512, 16384.0, 13312.0), (0, "moe", 512, 177152.0, 26624.0)])
        rows_of[rank] = rows
    d = _sums_only(tmp_path, rows_of)
    root = d["root"]
    assert (root["comm"], root["outlier_ranks"], root["seq_range"]) == ("[ranks=4,5,6,7]", [5], [1, 2])
    assert any("left no trace" in c for c in d["caveats"])


def test_a_cut_trace_whose_every_result_is_a_comms_joins_that_comm(tmp_path):
    """One 4-rank comm, sums only. Ranks 0 and 2 issued `head` before `attn` in step 0: ranks 0, 2 read back one
    wrong sum, ranks 1, 3 another. Rank 0's trace is cut after its first record, so every later result is shared by
    ranks 1-3 alone. Rank 0 ran the comm's collectives with them until its file stops: its one record goes to the
    comm of all four, not to a comm of ranks 0 and 2, and the comm's later records are the four's too; the root then
    parts ranks 0, 2 from ranks 1, 3, no majority, where it named rank 2 alone among ranks 1-3."""
    from ncclforensics.align.traces import with_trace_rows
    from ncclforensics.sources import InputFile, parse_file

    def line(rank, step, op, tag, numel, value, expected):
        return json.dumps({"step": step, "op": op, "rank": rank, "tag": tag, "kind": "AllReduce", "numel": numel,
                           "sum": value, "expected_sum": expected}) + "\n"
    for rank in range(4):
        first = ([("head", 256, 43520.0, 104960.0), ("attn", 1024, 256000.0, 10240.0)] if rank in (0, 2) else
                 [("attn", 1024, 174080.0, 10240.0), ("head", 256, 64000.0, 104960.0)])
        rows = [(0, *first[0]), (0, *first[1]), *((s, t, n, v, v) for s in (1, 2)
                                                  for t, n, v in (("attn", 1024, 4e5 + s), ("head", 256, 2e5 + s)))]
        text = "".join(line(rank, step, op, *rest) for op, (step, *rest) in enumerate(rows))
        (tmp_path / f"fingerprint_rank{rank}.jsonl").write_text(text.split("\n")[0] + '\n{"step": 0, "o'
                                                                if rank == 0 else text)
    evidence = [parse_file(InputFile(p, p.name)) for p in sorted(tmp_path.iterdir())]
    out, _, _ = with_trace_rows(evidence)
    comms = {r["comm"] for e in out for r in e.collectives.iter_rows(named=True)}
    assert comms == {"[ranks=0,1,2,3]"}
    root = answer(tmp_path)["root"]
    assert root["seq_range"] == [1, 1] and not root["majority"] and {0, 2} <= set(root["outlier_ranks"])


def test_a_root_on_a_record_only_its_neighbours_placed_names_the_comm_of_its_other_neighbours(tmp_path):
    """TP pairs (0,1) (2,3), DP pairs (0,2) (1,3), sums only. In step 1 rank 0 issues `dp.retry` on its DP pair
    before `dp.0`: no rank reads back its result (its size differs from rank 2's `dp.0`) and no comm's results carry
    its tag, so it goes with its neighbour before it, `moe.1` of the TP pair, where it parts rank 0 from rank 1.
    Its neighbour after it, `dp.0`, is of the DP pair, where the departure truly is: the root names that pair as a
    candidate beside its own comm. Ranks 0 and 1 hang in step 2, so their traces end with step 1."""
    rows_of = {}
    for rank in range(4):
        dp, tp = 100.0 * (1 + rank % 2), 1000.0 * (1 + rank // 2)
        rows = []
        for step in range(2 if rank < 2 else 3):
            block = [("dp.0", 1, dp + step), ("dp.1", 8, 8 * dp + step), ("moe.0", 1024, tp + step),
                     ("moe.1", 1024, 4 * tp + step)]
            rows += [(step, tag, numel, v, v) for tag, numel, v in block]
        if rank in (0, 2):  # step 1's DP pair misaligned: each reads back its own wrong sums
            wrong = [(1, "dp.0", 1, 447.0 + rank, dp + 1), (1, "dp.1", 8, 4360.0 + rank, 8 * dp + 1)]
            rows[4:6] = [(1, "dp.retry", 8, 3632.0, 3872.0), *wrong] if rank == 0 else wrong
        rows_of[rank] = rows
    d = _sums_only(tmp_path, rows_of)
    root = d["root"]
    assert root["comm"] == "[ranks=0,1]" and "[ranks=0,2]" in root["comm_candidates"]
    assert any("only its neighbours put in comm" in c for c in d["caveats"])


def test_a_split_carrying_the_tags_of_a_tail_of_the_world_is_the_worlds(tmp_path):
    """One 5-rank comm, sums checked (470048). Rank 3's trace ends after `a`, `b`, so the others alone share `c`,
    `d`: the world's tail. Rank 1 runs two drafter collectives before `e`: they pair with `e`, `f` (one wrong sum
    each, given two tags), and rank 1's trace ends with step 0 (its step 1 never completed), so ranks 0, 2, 4 alone
    share every later result. Those carry the tail's tags and pairings: the world's records, not a comm of ranks 0,
    2, 4, where the world's records would part rank 1 from them at seq 3 and name 7 extra collectives."""
    from ncclforensics.align.traces import with_trace_rows
    from ncclforensics.sources import InputFile, parse_file

    def line(rank, step, op, tag, value, right):
        return json.dumps({"step": step, "op": op, "rank": rank, "tag": tag, "kind": "AllReduce", "numel": 64,
                           "sum": value, "expected_sum": value if right else value + 1}) + "\n"
    steps = ["a", "b", "c", "d", "e", "f", "head"]
    ran = {r: [(0, t) for t in steps] + [(1, t) for t in steps] for r in (0, 2, 4)}
    ran[1] = [(0, t) for t in ("a", "b", "c", "d", "mtp.0", "mtp.1", "e", "f", "head")]
    ran[3] = [(0, "a"), (0, "b")]
    for rank, issued in ran.items():
        ops: dict[int, int] = {}
        text = ""
        for seq, (step, tag) in enumerate(issued, start=1):
            ops[step] = ops.get(step, -1) + 1
            # a pairing of one collective on each side reads back one result; rank 1's own past seq 6 differ
            alone = rank == 1 and seq in (7, 9)
            text += line(rank, step, ops[step], tag, 1000.0 * seq + (rank if alone else 0), seq <= 4)
        (tmp_path / f"fingerprint_rank{rank}.jsonl").write_text(text)
    evidence = [parse_file(InputFile(p, p.name)) for p in sorted(tmp_path.iterdir())]
    out, _, _ = with_trace_rows(evidence)
    assert {r["comm"] for e in out for r in e.collectives.iter_rows(named=True)} == {"[ranks=0,1,2,3,4]"}
    root = answer(tmp_path)["root"]
    assert root["outlier_ranks"] == [1] and root["seq_range"][0] <= 5 <= root["seq_range"][1]


def test_a_record_placed_by_neighbours_of_one_comm_may_be_of_any_comm_of_its_rank():
    """Rank 6 is in a TP group and a DP pair. Its trace holds `dp.0` of the DP pair, then the TP group's `moe`,
    `dp.retry` (no one read it back, no comm's results carry its tag) and `lm_head`: both neighbours of `dp.retry`
    are the TP group's, so it went there, but a rank issues its comms' collectives in any order, and it may as well
    be the DP pair's. A root resting on it names the DP pair too (570042: a DP pair's extra world collective)."""
    from ncclforensics.align.traces import Placed, guessed_comms
    placed = (Placed("dp", 1, False, tag="dp.0"), Placed("tp", 1, False, tag="moe"),
              Placed("tp", 2, True, tag="dp.retry"), Placed("tp", 3, False, tag="lm_head"),
              Placed("dp", 2, False, tag="dp.0"))
    assert guessed_comms("tp", (2, 2), {6: placed}) == ("dp",)
    assert guessed_comms("tp", (3, None), {6: placed}) == ()  # (the guess is before the range: `seq_slack`'s)
    assert guessed_comms("dp", (1, 2), {6: placed}) == ()  # (no guess in the DP pair)


def test_a_result_no_one_shares_is_a_guess_where_results_went_beyond_the_one_comm_holding_the_rank():
    """TP pairs (0,1) (2,3), DP pairs (0,2) (1,3), sums only; rank 0 read back `dp.0` of step 0 with rank 2, and
    the rest of its DP pair's results with no one (misaligned: rank 2 skipped `dp.1`). Its TP results recur, so the
    one comm its trace names is the TP pair; but the result shared with rank 2 went beyond it, so the TP pair is
    not the rank's only comm, and `dp.1`, shared with no one, whose tag went nowhere, is placed there by a guess
    (590265: the root on the TP pair rested on it as a firm record)."""
    from ncclforensics.align.trace_groups import record_groups, result_holders
    from ncclforensics.align.traces import Placed, guessed_comms
    from ncclforensics.model import FingerprintRow, Location

    def row(rank, step, op, tag, value):
        return FingerprintRow(Location(f"fp{rank}", step * 10 + op), rank, step, op, tag=tag, kind="AllReduce",
                              sum=value)
    tp = {0: 100.0, 1: 100.0, 2: 1100.0, 3: 1100.0}
    rows = [row(r, s, 2 + i, tag, tp[r] + 100.0 * s + i) for r in range(4) for s in (0, 1)
            for i, tag in enumerate(("a", "b"))]
    rows += [row(r, s, i, tag, 17.0 + 10 * s + i) for r in (1, 3) for s in (0, 1)
             for i, tag in enumerate(("dp.0", "dp.1"))]
    rows += [row(0, 0, 0, "dp.0", 7.0), row(2, 0, 0, "dp.0", 7.0), row(0, 0, 1, "dp.1", 55.0),
             row(0, 1, 0, "dp.0", 8.0), row(0, 1, 1, "dp.1", 66.0), row(2, 1, 0, "dp.0", 9.0),
             row(2, 1, 1, "dp.1", 10.0)]
    holders, tags_of = result_holders(rows)
    trace = sorted((r for r in rows if r.rank == 0), key=lambda r: (r.step, r.op))
    last = {r.rank: max((x for x in rows if x.rank == r.rank), key=lambda x: (x.step, x.op)) for r in rows}
    groups, guessed = record_groups(trace, holders, tags_of, 0, last)
    dp, own_tp = frozenset({0, 2}), frozenset({0, 1})
    assert groups == [dp, own_tp, own_tp, own_tp, dp, own_tp, own_tp, own_tp]
    assert guessed == {0, 1, 4, 5}
    # a root resting on `dp.1` names the DP pair as a candidate, though every record placed there was a guess too
    placed = (Placed("dp", 1, True), Placed("tp", 1, True), Placed("tp", 2, False), Placed("tp", 3, False))
    assert guessed_comms("tp", (1, 2), {0: placed}) == ("dp",)


def test_a_root_that_may_rest_on_a_record_placed_by_neighbours_yields_to_one_its_records_place():
    """721193: rank 6's `dp.retry` went with its neighbours to its TP group, where it reads as an extra collective
    of rank 6 (a root by call sites, somewhere in seq 1..10); rank 0's TP group has a different collective, its
    records placed by the results they share. Were `dp.retry` of rank 6's DP pair, the TP group's records would
    show no departure: the root is rank 0's comm, and rank 6's stays a candidate beside it."""
    from dataclasses import replace

    from ncclforensics.align.choose import _pick_root
    from ncclforensics.align.answers import CommAnalysis, RangeReason, Root
    from ncclforensics.align.answers import DIFFERENT_OPS, EXTRA
    from ncclforensics.align.streams import Streams
    from ncclforensics.align.traces import Placed, resting_on_guesses

    extra = Root(comm="2", seq=1, seq_range=(1, 10), outlier_ranks=[6], reference_ranks=[4, 5, 7], kind=EXTRA,
                 size=1, pinned_by="call sites", reason=RangeReason.LOOKALIKE, shown=True)
    different = Root(comm="1", seq=7, seq_range=(7, 14), outlier_ranks=[0], reference_ranks=[1, 2, 3],
                     kind=DIFFERENT_OPS, size=1, pinned_by="signatures", reason=RangeReason.LOOKALIKE, shown=True)
    analyses = {
        "1": CommAnalysis("1", [0, 1, 2, 3], dict.fromkeys(range(4), 14), dict.fromkeys(range(4)),
                          dict.fromkeys(range(4), 1), root=different),
        "2": CommAnalysis("2", [4, 5, 6, 7], {4: 11, 5: 11, 6: 12, 7: 11}, dict.fromkeys(range(4, 8)),
                          dict.fromkeys(range(4, 8), 1), root=extra),
    }
    placed = (Placed("[ranks=2,6]", 1, False, tag="dp.0"), Placed("2", 9, False, tag="moe"),
              Placed("2", 10, True, tag="dp.retry"), Placed("2", 11, False, tag="lm_head"))
    guessed = resting_on_guesses([extra, different], {6: placed})
    assert guessed == {"2"}
    root, _ = _pick_root(analyses, None, Streams(), guessed)
    assert root.comm == "1" and root.undecided_comms == ("2",)
    # A guess past the root's range, or on a rank it does not name, leaves the root as its records give it.
    assert resting_on_guesses([replace(extra, seq_range=(1, 9))], {6: placed}) == frozenset()
    assert resting_on_guesses([extra], {5: placed}) == frozenset()
    assert _pick_root(analyses, None, Streams())[0].comm == "2"


def test_sums_no_trace_shares_of_tags_others_share_apart_stay_out_of_the_one_set_the_rank_shares(tmp_path):
    """World (0-3), TP groups (0,1) (2,3), sums with expected values only; rank 3 left no trace and rank 2 skipped
    `l1.attn`, so its `l1.mlp` paired with rank 3's `l1.attn` (checks wrong). Rank 2 shares one result, the world's
    `dp`, with ranks 0 and 1; its TP results are shared with no trace, and ranks 0 and 1 share their tags apart:
    they are of a comm whose other member left nothing, not extra collectives of rank 2 among ranks 0-2."""
    tp = [(0, "l0.attn", 64, 300.0, 300.0), (0, "l0.mlp", 64, 600.0, 600.0), (0, "l1.attn", 64, 900.0, 900.0),
          (0, "l1.mlp", 64, 1200.0, 1200.0)]
    mine = [(0, "l0.attn", 64, 700.0, 700.0), (0, "l0.mlp", 64, 1400.0, 1400.0), (0, "l1.mlp", 64, 2300.0, 2800.0)]
    d = _sums_only(tmp_path, {0: [(0, "dp", 1, 10.0, 10.0), *tp], 1: [(0, "dp", 1, 10.0, 10.0), *tp],
                              2: [(0, "dp", 1, 10.0, 10.0), *mine]})
    world = next(c for c in d["comms"] if c["comm"] == "[ranks=0,1,2]")
    assert world["launched"] == {"0": 1, "1": 1, "2": 1}
    assert d["root"]["seq_range"] is None and d["root"]["outlier_ranks"] == [2]
    assert any("rank 2 " in c and "other members left no trace" in c for c in d["caveats"])


def test_ranks_that_share_only_wrong_results_inside_their_comm_ran_extra_collectives_there(tmp_path):
    """941100: ranks 0 and 2 of four each ran the drafter's two all-reduces (`mtp.*`) that ranks 1 and 3 skipped,
    in step 0. Those pair misaligned with the others' step 1 layers, and ranks 0 and 2 read back the same wrong sums
    twice, under tags no other rank gave: the set (0, 2) shares no result read back right, so it is no comm of its
    own inside the world. Taken as one, it took the watchdog's group of ranks 0 and 2, whose lone drafter stream
    read as misaligned lookalikes pinned at seq 1. Its records are the world's: the streams part at seq 5."""
    layers = ["model.layers.0.mlp", "model.layers.0.moe", "model.layers.1.mlp", "model.layers.1.moe"]
    step0 = [(0, tag, total, total) for tag, total in zip(layers, (5120.0, 10240.0, 20480.0, 25600.0))]
    extra = [(0, "mtp.layers.0", 209920.0, 261120.0), (0, "mtp.layers.1", 215040.0, 266240.0)]
    step1 = [(1, tag, got, want) for tag, got, want in zip(layers, (210176.0, 215296.0, 219136.0, 224256.0),
                                                          (209920.0, 215040.0, 225280.0, 230400.0))]
    for rank in range(4):
        records = step0 + (extra if rank in (0, 2) else step1)
        ops: dict[int, int] = {}
        lines = []
        for step, tag, got, want in records:
            ops[step] = ops.get(step, -1) + 1
            lines.append(json.dumps({"step": step, "op": ops[step], "rank": rank, "tag": tag, "kind": "AllReduce",
                                     "numel": 512, "sum": got, "expected_sum": want}))
        (tmp_path / f"fingerprint_rank{rank}.jsonl").write_text("\n".join(lines) + "\n")
        # PyTorch's watchdog: ranks 0 and 2 time out at seq 9 of the group, the others only observe the dump
        prefix = f"[rank{rank}]:[E1129 09:55:01.757101066 ProcessGroupNCCL.cpp"
        log = (f"{prefix}:689] [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, "
               "OpType=ALLREDUCE, NumelIn=512, NumelOut=512, Timeout(ms)=20000) ran for 20016 milliseconds before "
               f"timing out.\n{prefix}:2303] [PG ID 1 PG GUID 1(tp) Rank {rank}]  failure detected by watchdog at "
               "work sequence id: 9 PG status: last enqueued work: 10, last completed work: 8\n") if rank in (0, 2) \
            else ""
        log += (f"{prefix}:1849] [PG ID 0 PG GUID 0 Rank {rank}] Observed flight recorder dump signal from another "
                "rank via TCPStore.\n") if rank else ""
        (tmp_path / f"torch_rank{rank}.log").write_text(log)
    root = answer(tmp_path)["root"]
    low, high = root["seq_range"]
    assert low <= 5 <= high and {0, 2} <= set(root["outlier_ranks"]) and not root["majority"]


def test_results_two_ranks_each_read_back_alone_are_of_no_comm_the_two_share(tmp_path):
    """Ranks 0 and 1 alone left traces (digests): they share two world all-reduces, and then each reads back TP
    all-reduces whose digests no one shares (rank 1 skipped `attn`). Had both read back collectives of their one
    shared comm that the other did not, the lower seq of them would be in both traces (one comm's collectives are
    issued in one order, and a trace is a prefix of what its rank issued): the lone records are the TP groups',
    whose other ranks left no trace. They are left out, not compared as one stream of the world parting on tags;
    where only one rank reads back alone (the other stopped), its records stay in the comm."""
    from ncclforensics.align.notes import TracesApart
    from ncclforensics.align.traces import with_trace_rows
    from ncclforensics.sources import InputFile, parse_file

    def write(rank, tags):
        rows = [{"step": 0, "op": op, "rank": rank, "tag": tag, "kind": "AllReduce", "numel": 8, "sum": 8.0,
                 "expected_sum": 8.0, "digest": digest or f"{rank}{op:015x}"}
                for op, (tag, digest) in enumerate([("dp.0", "a" * 16), ("dp.1", "b" * 16), *((t, None) for t in tags)])]
        (tmp_path / f"fingerprint_rank{rank}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    def placed():
        evidence = [parse_file(InputFile(p, p.name)) for p in sorted(tmp_path.iterdir())]
        out, notes, _ = with_trace_rows(evidence)
        rows = [r for e in out for r in e.collectives.iter_rows(named=True)]
        return {(r["rank"], r["tag"]): (r["comm"], r["seq"]) for r in rows}, notes
    write(0, ("attn", "mlp", "head"))
    write(1, ("mlp", "head", "mtp"))
    rows, notes = placed()
    assert rows == {(r, f"dp.{i}"): ("[ranks=0,1]", i + 1) for r in (0, 1) for i in (0, 1)}
    assert TracesApart((0, 1)) in notes
    assert answer(tmp_path)["root"] is None  # (every sum checks right: nothing on record parts the two)
    write(1, ())
    rows, _ = placed()
    assert rows[(0, "head")] == ("[ranks=0,1]", 5)


def test_ranks_that_share_only_wrong_digests_inside_a_wider_comm_are_a_comm_of_their_own(tmp_path):
    """1094520: a world all-reduce, then TP groups (0, 1) and (2, 3); rank 0 skipped `layers.0` in its group and
    rank 3 in its, so every TP result reads back wrong and each pair shares its digests under two tags. Sums of a
    misaligned pairing split where the ranks' counts differ, so a set sharing only wrong sums may be a wider comm's
    split; a digest is one physical collective's, read back by every member whatever they paired: the pairs are
    comms of their own, not the world parting on tags between ranks 0, 3 and 1, 2."""
    records = {0: [("layers.1", "t01a"), ("mtp.0", "t01b"), ("mtp.1", "lone0")],
               1: [("layers.0", "t01a"), ("layers.1", "t01b")],
               2: [("layers.0", "t23a"), ("layers.1", "t23b")],
               3: [("layers.1", "t23a"), ("mtp.0", "t23b"), ("mtp.1", "lone3")]}
    for rank, tp in records.items():
        rows = [{"step": 0, "op": 0, "rank": rank, "tag": "dp.num_tokens", "kind": "AllReduce", "numel": 1,
                 "sum": 610.0, "expected_sum": 610.0, "digest": "world"}]
        rows += [{"step": 0, "op": op, "rank": rank, "tag": tag, "kind": "AllReduce", "numel": 512,
                  "sum": 100.0 * op + rank // 2, "expected_sum": 7.0, "digest": digest}
                 for op, (tag, digest) in enumerate(tp, start=1)]
        (tmp_path / f"fingerprint_rank{rank}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    d = answer(tmp_path)
    root = d["root"]
    assert root["comm"] in ("[ranks=0,1]", "[ranks=2,3]") and root["seq_range"] == [1, 1]
    assert {c["comm"] for c in d["comms"]} == {"[ranks=0,1,2,3]", "[ranks=0,1]", "[ranks=2,3]"}


def test_a_set_whose_every_shared_result_went_to_its_wider_comm_leaves_no_second_comm_in_the_trace(tmp_path):
    """1074164: TP groups (0-3) (4-7) and DP pairs (i, i+4), one step, sums with expected values. Rank 2 leaves out
    `l2`: its `head` pairs with the others' `l2` and ranks 0, 1 and 3 share two wrong sums rank 2 does not. Those
    are the TP group's misaligned pairings (the three share no result read back right), so the three are no comm;
    kept among rank 0's comms beside the TP group, with its DP pair's result shared once, they made the trace look
    like several comms its sums cannot split, every trace but rank 2's was left out, and per-step checksums named
    all four. The tags part rank 2 from the three at seq 3."""
    rows_of = {}
    for rank in range(8):
        group = rank // 4
        dp = 100.0 + 10 * (rank % 4)
        layers = [(0, tag, 512, 1000.0 * (group + 1) + 100 * i) for i, tag in enumerate(("l0", "l1", "l2"))]
        rows_of[rank] = [(0, "dp", 1, dp, dp), *((s, t, n, x, x) for s, t, n, x in layers),
                         (0, "head", 2048, 50000.0 * (group + 1), 50000.0 * (group + 1))]
    for rank in (0, 1, 3):
        rows_of[rank][3:] = [(0, "l2", 512, 7777.0, 1200.0), (0, "head", 2048, 8888.0, 50000.0)]
    rows_of[2][3:] = [(0, "head", 2048, 9999.0, 50000.0)]
    d = _sums_only(tmp_path, rows_of)
    assert not any("cannot be told" in c for c in d["caveats"])
    root = d["root"]
    low, high = root["seq_range"]
    assert root["comm"] == "[ranks=0,1,2,3]" and low <= 3 <= high and root["outlier_ranks"] == [2]


def test_a_shared_result_may_be_of_a_wider_comm_other_evidence_names_as_often_as_the_rank_completed_there(tmp_path):
    """1116063: PyTorch's logs put ranks 0-7 in the world comm and ranks 4-7 in a TP comm, and say each of the four
    completed one world collective; ranks 4-7 alone left traces (sums only), each reading back `dp` and then four
    results, every one shared by the four but rank 5's `moe`, an all-gather where the others all-reduced. The TP
    comm is named by the logs, not by the traces alone, yet `dp` may as well be the world's (ranks 0-3 left no
    trace): `moe` is TP seq 3 or 4. One world collective completed, so one record at most is the world's, not all."""
    def status(rank, pg, guid, comm_rank, timed_out, enqueued, completed):
        return (f"[rank{rank}]:[E1129 09:55:01.746526066 ProcessGroupNCCL.cpp:689] [Rank {comm_rank}] Watchdog caught "
                f"collective operation timeout: WorkNCCL(SeqNum={timed_out}, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
                f"Timeout(ms)=20000) ran for 20020 milliseconds before timing out.\n"
                f"[rank{rank}]:[E1129 09:55:01.747626066 ProcessGroupNCCL.cpp:2303] [PG ID {pg} PG GUID {guid} Rank "
                f"{comm_rank}]  failure detected by watchdog at work sequence id: {timed_out} PG status: last enqueued "
                f"work: {enqueued}, last completed work: {completed}\n")
    for rank in range(8):
        text = status(rank, 0, "0(default_pg)", rank, 2, 2, 1)
        if rank >= 4:
            text += status(rank, 1, 2, rank - 4, 5, 8, 4)
        (tmp_path / f"torch_rank{rank}.log").write_text(text)
    rows_of = {}
    for rank in range(4, 8):
        rows = [(0, "dp", 1, 2196.0, 2196.0), (0, "attn", 2048, 53248.0, 53248.0), (0, "mlp", 2048, 106496.0, 106496.0)]
        rows += [(0, "moe", 512, 120064.0, 119808.0)] if rank == 5 else [(0, "moe", 2048, 480256.0, 479232.0)]
        rows += [(0, "head", 512, 545792.0, 545792.0)]
        rows_of[rank] = rows
    d = _sums_only(tmp_path, rows_of)
    root = d["root"]
    assert (root["comm"], root["outlier_ranks"], root["seq_range"]) == ("2", [5], [3, 4])


def test_a_result_checked_right_apart_from_others_of_its_tag_in_its_step_is_of_no_comm_holding_them(tmp_path):
    """TP groups (0-3) (4-7) inside a world of 8, sums with expected values, nothing wrong; ranks 5-7 left no trace.
    Ranks 0-4 share the world's `dp` in two steps (a comm), and rank 4 shares none of its TP results: ranks 0-3
    read back other right results of `attn` and `mlp` in the same steps, so rank 4 ran other collectives of those
    tags, on a comm holding none of them (a program issues each tagged collective on one comm), not the world's
    (1301133: they went there as rank 4's extra world collectives, and the world's wedge past them)."""
    tp = {"attn": 400.0, "mlp": 800.0}

    def steps(scale):
        return [row for step in (0, 1) for row in [(step, "dp", 1, 10.0 + step, 10.0 + step)]
                + [(step, tag, 64, scale * (v + step), scale * (v + step)) for tag, v in tp.items()]]
    d = _sums_only(tmp_path, {**{r: steps(1.0) for r in range(4)}, 4: steps(10.0)})
    world = next(c for c in d["comms"] if c["comm"] == "[ranks=0,1,2,3,4]")
    assert world["launched"] == dict.fromkeys(map(str, range(5)), 2)
    assert d["verdict"] != "diverged" and d["root"] is None
    assert any("rank 4 " in c and "other members left no trace" in c for c in d["caveats"])
    # Reduce-scatters instead: each rank's shard is its own, so results apart are no sign of collectives apart.
    scattered = _sums_only(tmp_path, {**{r: steps(1.0) for r in range(4)}, 4: steps(10.0)},
                           kinds=dict.fromkeys(tp, "ReduceScatter"))
    assert not any("other members left no trace" in c for c in scattered["caveats"])


def test_a_result_two_ranks_share_checked_right_apart_from_others_of_its_tag_is_not_the_worlds(tmp_path):
    """World (0-3), TP pairs (0,1) (2,3), sums with expected values, nothing wrong; rank 3's trace ends after its
    first TP record, so ranks 2 and 3 share one TP result, once. Ranks 0 and 1 read back another right result of
    that tag in that step: the pair's collective is no world one, and rank 2's later TP records stay with the pair
    (1217331: they went to the world, whose stream and wedge then held rank 2's TP collectives)."""
    def steps(scale, last=None):
        rows = [row for step in (0, 1) for row in [(step, "dp", 1, 10.0 + step, 10.0 + step)]
                + [(step, tag, 64, scale * (v + step), scale * (v + step)) for tag, v in (("a", 4.0), ("b", 8.0))]]
        return rows[:last]
    d = _sums_only(tmp_path, {0: steps(1.0), 1: steps(1.0), 2: steps(10.0), 3: steps(10.0, last=2)})
    launched = {c["comm"]: c["launched"] for c in d["comms"]}
    assert launched["[ranks=0,1,2,3]"] == {"0": 2, "1": 2, "2": 2, "3": 1}
    assert launched["[ranks=2,3]"] == {"2": 4, "3": 1}
