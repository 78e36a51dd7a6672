"""A file cut short ends its rank's records where the file ends: that is no event (a stop, a wedge, a rank behind).
Real captures, one file cut, against the answer of the whole evidence."""

from pathlib import Path

from tests.cli_helpers import diff_json

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "nccl-2.28.9"


def copy(tmp_path: Path, scenario: str, *prefixes: str) -> Path:
    for path in (REAL / scenario).iterdir():
        if path.name.startswith(prefixes):
            (tmp_path / path.name).write_bytes(path.read_bytes())
    return tmp_path


def answer(d: dict) -> tuple:
    root, wedge = d["root"], d["wedge"]
    return (d["verdict"], root and root["seq_range"], root and root["outlier_ranks"], wedge and wedge["seq"])


def test_a_dump_cut_short_moves_neither_root_nor_wedge(tmp_path):
    """extra-op-4rank's dumps, rank 1's cut inside its 25th entry: whole, rank 0's extra collective at 25 and the
    wedge at 50; cut, rank 1's records end at 24, which once put the wedge there. Its records end before the ranks
    part, so they side with neither; but the dump's `pg_status`, written before its entries, survives the cut and
    says rank 1 launched 49, as ranks 2 and 3 did: it ends with their group, and rank 0 is the one outlier."""
    whole = diff_json(*sorted(str(p) for p in REAL.joinpath("extra-op-4rank").glob("fr_rank*")))[1]
    folder = copy(tmp_path, "extra-op-4rank", "fr_rank")
    data = (folder / "fr_rank1").read_bytes()
    (folder / "fr_rank1").write_bytes(data[:10552])
    code, d = diff_json(str(folder))
    assert answer(whole) == ("diverged", [25, 25], [0], 50)
    verdict, seqs, outliers, wedge = answer(d)
    assert code == 2 and (verdict, seqs, wedge) == ("diverged", [25, 25], 50)
    assert outliers == [0] and d["root"]["majority"]
    assert any(p["file"].endswith("fr_rank1") and "truncated" in p["message"] for p in d["problems"])


def test_a_log_cut_inside_its_last_line_is_said_and_claims_nothing_past_it(tmp_path):
    """pipeline-healthy with rank 0's NCCL log cut in the middle of a COLL line, before the others' logs end: no
    divergence and no stop is made of it, and agreement is not claimed for what the cut hides (inconclusive, the
    cut named at its line and in a caveat)."""
    folder = copy(tmp_path, "pipeline-healthy", "nccl.", "fr_rank")
    log = folder / "nccl.vm.431.log"
    lines = log.read_bytes().split(b"\n")
    at = [i for i, line in enumerate(lines) if b"opCount" in line][-3]
    log.write_bytes(b"\n".join(lines[:at]) + b"\n" + lines[at][:len(lines[at]) // 2])
    whole = diff_json(str(REAL / "pipeline-healthy"))[1]
    _, d = diff_json(str(folder))
    assert whole["verdict"] == "consistent" and d["verdict"] == "inconclusive" and d["root"] is None
    assert d["wedge"] is None or not d["wedge"]["confirmed_by"]
    assert any("nccl.vm.431.log" in c and "cut short" in c for c in d["caveats"])
    assert any(p["file"].endswith("nccl.vm.431.log") and p["line"] == at + 1 and "cut short" in p["message"]
               for p in d["problems"])


def test_where_the_logs_are_cut_short_pytorchs_counts_speak_past_the_cut(tmp_path):
    """extra-op-4rank's NCCL logs and watchdog logs, rank 0's log cut inside its 14th collective (the extra one is
    25): the logs agree up to the cut, and PyTorch's `last enqueued work` marks say rank 0 launched 50 where the
    others launched 49."""
    folder = copy(tmp_path, "extra-op-4rank", "nccl.", "torch_rank")
    log = folder / "nccl.vm.442.log"
    lines = log.read_text().split("\n")
    log.write_text("\n".join(lines[:66]) + "\n" + lines[66][:40])
    code, d = diff_json(str(folder))
    root = d["root"]
    assert code == 1 and d["verdict"] == "diverged"
    assert root["outlier_ranks"] == [0] and root["kind"] == "extra" and root["seq_range"][0] <= 25 <= root["seq_range"][1]
    assert root["pinned_by"] == "PyTorch's enqueued counts"


def test_a_dump_that_kept_everything_and_holds_nothing_of_a_group_it_is_in_launched_none_there(tmp_path):
    """serving-tp-in-dp-8rank's dumps of ranks 0 and 4 (DP group '3' is the two of them), rank 4's five DP
    collectives taken out of its dump: its TP records begin at seq 1, so its ring lost nothing, and it launched
    nothing in the DP group where rank 0 launched five. Once, rank 4 was simply not in the group's comparison."""
    import pickle

    source = REAL / "serving-tp-in-dp-8rank"
    (tmp_path / "fr_rank0").write_bytes((source / "fr_rank0").read_bytes())
    dump = pickle.loads((source / "fr_rank4").read_bytes())  # our own capture, not an input under analysis
    dump["entries"] = [e for e in dump["entries"] if e["process_group"][0] != "3"]
    dump["pg_status"] = {key: status for key, status in dump["pg_status"].items()
                         if status["last_enqueued_collective"] != 5}  # (the DP group's: 5 collectives)
    (tmp_path / "fr_rank4").write_bytes(pickle.dumps(dump))
    _, d = diff_json(str(tmp_path))
    root = d["root"]
    # (Rank 0's five completed there say its partner launched them: the verdict is the tool's to weigh.)
    assert root["comm"] == "3" and 4 in root["outlier_ranks"]
    assert root["seq_range"][0] <= 1 <= root["seq_range"][1]
    assert {c["comm"]: c["ranks"] for c in d["comms"]}["3"] == [0, 4]


def test_dumps_beside_logs_say_which_fields_only_one_side_carries(tmp_path):
    """extra-op-4rank, dumps of ranks 0 and 1 and NCCL logs of 2 and 3: the dumps carry no reduction or root,
    the logs no call stacks; each is compared only where both sides recorded it, and the caveats say so."""
    folder = copy(tmp_path, "extra-op-4rank", "fr_rank0", "fr_rank1", "nccl.vm.444", "nccl.vm.445")
    _, d = diff_json(str(folder))
    assert answer(d)[:3] == ("diverged", [25, 25], [0])
    assert any("ranks 0 and 1's evidence carries no reduction or root rank" in c for c in d["caveats"])
    assert any("ranks 2 and 3's evidence carries no call stack" in c for c in d["caveats"])


def test_a_member_cut_before_a_comms_records_is_named_where_no_majority_decides():
    # Comm "tp" of ranks 0..3: ranks 0 and 1 part (call stacks), rank 3 sides with either; rank 2's log was cut
    # before any collective of "tp" (its "dp" records go on). Nothing decides the split, and rank 2 may have gone
    # either way: it is named with the rest. With a majority, or with rank 2 known to have launched none (no cut),
    # it is not.
    from types import SimpleNamespace

    import polars as pl

    from ncclforensics.align.answers import Root
    from ncclforensics.align.answers import DIFFERENT_OPS
    from ncclforensics.align.divergence import _with_unrecorded_members

    part = pl.DataFrame({"seq": [1, 2]})
    streams = SimpleNamespace(cut={("dp", 2): None}, cut_ranks=set(), expected_members={"tp": [0, 1, 2, 3]},
                              parts={("tp", 0): part, ("tp", 1): part, ("tp", 3): part, ("dp", 2): part})
    tie = Root(comm="tp", seq=1, seq_range=(1, 30), outlier_ranks=[0, 1, 3], reference_ranks=[0, 1, 3],
               kind=DIFFERENT_OPS, size=1, pinned_by="call sites", reason=None, majority=False)
    assert _with_unrecorded_members(tie, streams, "tp").outlier_ranks == [0, 1, 2, 3]
    one = Root(comm="tp", seq=1, seq_range=(1, 30), outlier_ranks=[0], reference_ranks=[1, 3],
               kind=DIFFERENT_OPS, size=1, pinned_by="call sites", reason=None, majority=True)
    assert _with_unrecorded_members(one, streams, "tp") == one
    whole = SimpleNamespace(cut={}, cut_ranks=set(), expected_members=streams.expected_members, parts=streams.parts)
    assert _with_unrecorded_members(tie, whole, "tp") == tie


def test_a_member_whose_every_file_was_cut_is_named_where_no_majority_decides_though_its_peers_were_cut_alike():
    # Comm "tp" of ranks 0..3 (as a config lists them), records of ranks 0, 1 and 3 only, no majority. Rank 2's one
    # log was cut just after its first collective of "dp", where its dp peer's log was cut too: its dp records end
    # no sooner than any, so no stream of it is short of its comm's, yet nothing whole says what rank 2 launched
    # after the cut, in "tp" or anywhere (980582: two ranks' logs cut during the first DP collective). It may have
    # gone either way in "tp", and is named with the rest; where its log is whole, it launched none there, and is not.
    from ncclforensics.align.answers import Root
    from ncclforensics.align.answers import DIFFERENT_OPS
    from ncclforensics.align.divergence import _with_unrecorded_members
    from ncclforensics.align.streams import build_streams
    from ncclforensics.model import CollectiveEvent, CommInfo, Evidence, Location, SourceFormat, collectives_to_frame
    from ncclforensics.sources import formats

    def log(path: str, rank: int, comm: str, collectives: int, **more) -> Evidence:
        events = [CollectiveEvent(loc=Location(path, 17 + seq), comm=comm, seq=seq, op="AllReduce", count=1024,
                                  rank=rank, dtype="float32", redop="sum", root=0) for seq in range(1, collectives + 1)]
        return Evidence(path=path, format=SourceFormat.NCCL_LOG, collectives=collectives_to_frame(events),
                        facts=formats()[SourceFormat.NCCL_LOG], **more)

    config = CommInfo(loc=Location("nccl.0.log", 9), comm="tp", ranks=(0, 1, 2, 3))
    recorded = [log(f"nccl.{r}.log", r, "tp", 3, comm_infos=[config] if r == 0 else []) for r in (0, 1, 3)]
    cut_dp = [log(f"nccl.{r}.log", r, "dp", 1, cut=Location(f"nccl.{r}.log", 19)) for r in (2, 6)]
    tie = Root(comm="tp", seq=1, seq_range=(1, 2), outlier_ranks=[0, 1, 3], reference_ranks=[0, 1, 3],
               kind=DIFFERENT_OPS, size=1, pinned_by="signatures", reason=None, majority=False)
    streams = build_streams([*recorded, *cut_dp])
    assert not streams.cut  # (the dp peers' records end together)
    assert _with_unrecorded_members(tie, streams, "tp").outlier_ranks == [0, 1, 2, 3]
    whole = log("nccl.2.log", 2, "dp", 1)
    assert _with_unrecorded_members(tie, build_streams([*recorded, whole, cut_dp[1]]), "tp") == tie
