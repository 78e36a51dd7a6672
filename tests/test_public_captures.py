"""`diff` on outputs pasted in public issues (tests/fixtures/public/INDEX.md says what each shows)."""

from __future__ import annotations

import json

from cli_helpers import FIXTURES, diff_json, run_cli

PUBLIC = FIXTURES / "public"


def test_watchdog_lines_alone_show_a_desync_at_one_seqnum():
    """pytorch#20630: ranks 1 and 2 time out in ALLREDUCE, rank 3 in BROADCAST, all at SeqNum 4084."""
    code, d = diff_json(PUBLIC / "torch_watchdog" / "pytorch-20630-1.txt")
    assert code == 1 and d["verdict"] == "diverged"
    root = d["root"]
    assert root["outlier_ranks"] == [3] and root["reference_ranks"] == [1, 2] and root["kind"] == "different"
    # The lines say nothing of what came before SeqNum 4084: the root is not pinned there.
    assert root["seq_range"] == [1, 4084] and "only start at seq 4084" in root["ambiguity"]
    assert root["ops"]["3"]["op"] == "Broadcast" and root["ops"]["1"]["op"] == "AllReduce"
    assert root["ops"]["3"]["evidence"].endswith("pytorch-20630-1.txt:3")
    assert d["first_visible_mismatch"]["seq"] == 4084
    wedge = d["wedge"]
    assert (wedge["seq"], wedge["kind"]) == (4084, "type_mismatch") and len(wedge["confirmed_by"]) == 3
    assert wedge["completed"] == {"1": 4083, "2": 4083, "3": 4083}  # the timed-out work is the oldest unfinished
    assert d["window"]["collectives_min"] == 0 and d["window"]["collectives"] == 4083


def test_ranks_timing_out_in_the_same_collective_are_a_hang_not_a_divergence():
    """BasicSR#737: ranks 0, 1, 2 all time out in AllReduce SeqNum 808."""
    code, d = diff_json(PUBLIC / "torch_watchdog" / "BasicSR-737-1.txt")
    assert code == 0 and d["verdict"] == "inconclusive" and d["root"] is None
    assert d["wedge"]["seq"] == 808 and d["wedge"]["waiting_ranks"] == [0, 1, 2]
    assert "all wait in the same collective" in d["summary"] and "seq 808" in d["summary"]
    # Ranks 0 and 1 enqueued 811 by PyTorch's count: a timeout at SeqNum 808 is a floor of that, no contradiction.
    # Rank 2's PG status line was not pasted: its timeout is all there is.
    assert d["wedge"]["launched"] == {"0": 811, "1": 811, "2": 808} and d["contradictions"] == []
    # Rank 2's count line was not pasted: its 808 is only its timeout's SeqNum, a floor, and printed as one.
    assert d["wedge"]["launched_floors"] == [2]
    _, out, _ = run_cli("diff", PUBLIC / "torch_watchdog" / "BasicSR-737-1.txt")
    assert "rank 2: last launched 808 or more," in out and "rank 0: last launched 811," in out
    # The Communicators line and its JSON say the same of rank 2 as the wedge does.
    assert "launched 0:811, 1:811, 2:808 or more;" in out and d["comms"][0]["launched_floors"] == [2]
    counted = sorted(e["at"].rsplit(":", 1)[1] for e in d["evidence"] if e["kind"] == "counted_launches")
    assert counted == ["2", "4"]


def test_a_failed_desync_report_names_no_culprit():
    """pytorch#109611: `Failed to retrieve NCCL_DESYNC_DEBUG report`, an internal assert: nothing to blame."""
    code, out, _ = run_cli("diff", PUBLIC / "desync_report" / "pytorch-109611-1.txt")
    assert code == 0 and "INCONCLUSIVE" in out
    assert "could not build its desync report" in out and "outlier" not in out


def test_one_ras_reply_with_a_straggler_says_what_it_shows_and_what_would_tell():
    """NCCL's RAS docs: one reply, rank 7 at operation 60 while 7 ranks are at 64."""
    code, d = diff_json(PUBLIC / "ras_text" / "nccl-docs08ras-4.txt")
    assert code == 0 and d["verdict"] == "inconclusive"
    assert "1 rank (7) at 60" in d["summary"] and "7 ranks (0, 1, 2, 3, 4, 5, 6) at 64" in d["summary"]
    assert "query RAS again" in d["summary"]


def test_a_dead_process_with_no_communicator_data_is_still_reported():
    """NCCL's RAS docs: `No communicator data collected!`, then a DEAD process."""
    code, d = diff_json(PUBLIC / "ras_text" / "nccl-docs08ras-3.txt")
    assert code == 0 and d["verdict"] == "inconclusive"
    (finding,) = [e for e in d["evidence"] if e["says"].startswith("RAS DEAD")]
    assert "pid 3748990" in finding["says"] and finding["at"].endswith("nccl-docs08ras-3.txt:9")


def test_pasted_nccl_lines_without_init_lines_still_show_the_odd_rank():
    """nccl#147, grep over per-rank logs: at opCount 0, rank 0 broadcasts 25503912 float16, ranks 1-4 53 int64."""
    code, d = diff_json(PUBLIC / "nccl_log" / "nccl-147-2.txt")
    assert code == 1 and d["verdict"] == "diverged"
    root = d["root"]
    assert root["comm"] == "[nranks=8]" and root["outlier_ranks"] == [0] and root["kind"] == "different"
    assert root["seq_range"] == [1, 1]  # opCount 0: the communicator's first collective, nothing before it
    assert (root["ops"]["0"]["count"], root["ops"]["0"]["dtype"]) == (25503912, "float16")
    assert {(o["count"], o["dtype"]) for r, o in root["ops"].items() if r != "0"} == {(53, "int64")}
    assert root["ops"]["0"]["evidence"].endswith("nccl-147-2.txt:1")
    assert "stand-ins" in d["caveats"][0] and "rank 0 = learnfair062:32615" in d["caveats"][0]


def test_pasted_lines_that_merely_stop_at_different_places_are_not_called_a_divergence():
    """torchtitan#1369: two TP ranks interleaved; one's lines end two opCounts before the other's."""
    code, d = diff_json(PUBLIC / "nccl_log" / "torchtitan-1369-1.txt")
    assert code == 0 and d["verdict"] == "inconclusive"
    assert "no majority says which side deviated" in d["summary"] and "nothing confirms a hang" in d["summary"]


def test_a_one_rank_communicator_keeping_opcount_0_is_no_mismatch():
    """nccl#1238: nccl-tests with nranks=1 log opCount 0 on every call."""
    code, d = diff_json(PUBLIC / "nccl_log" / "nccl-1238-1.txt")
    assert code == 0 and d["root"] is None and d["verdict"] == "inconclusive"


def test_a_server_log_holding_several_formats_is_read_by_each_parser(tmp_path):
    """A server's log interleaves NCCL debug lines, watchdog messages and spec-decode metrics: the file is detected
    as one format and read by the others' parsers too, so `diff` and `acceptance` both find what they need."""
    parts = [PUBLIC / "vllm_specdecode" / "vllm-7301-1.txt", PUBLIC / "nccl_log" / "nccl-147-2.txt",
             PUBLIC / "torch_watchdog" / "BasicSR-737-1.txt"]
    server = tmp_path / "server.log"
    server.write_text("".join(p.read_text() for p in parts))
    code, out, _ = run_cli("parse", "--json", server)
    (row,) = json.loads(out)
    assert code == 0 and {row["format"], *row["also"]} == {"vllm-metrics", "nccl-log", "torch-log"}
    code, d = diff_json(server)
    assert code == 1 and d["root"]["comm"] == "[nranks=8]" and d["root"]["outlier_ranks"] == [0]
    assert any("timeout at seq 808" in e["says"] for e in d["evidence"])  # the watchdog lines were read too
    code, out, _ = run_cli("acceptance", "--json", server)
    (run,) = json.loads(out)["runs"]
    assert code == 1 and run["lines"] == 2 and run["low"]  # vLLM V0 counts since start: 1 of 15 drafts accepted


def test_a_paste_of_a_few_ranks_says_the_others_have_no_lines():
    """nccl#531: 7 local ranks of a 16-rank communicator, all at AllGather opCount f7."""
    code, d = diff_json(PUBLIC / "nccl_log" / "nccl-531-1.txt")
    assert code == 0 and d["verdict"] == "consistent" and "of 7 ranks agree" in d["summary"]
    assert "[nranks=16]: 7 on record" in d["caveats"][0]


def test_a_rank_ras_cannot_reach_is_called_unreachable_not_dead():
    """ray#64928's reply (NCCL 2.28.9, its JSON repaired): rank 1 is missing with `unresponsive: true,
    considered_dead: false`. It is gone from the comm, but nothing says it died: the answer must not say so."""
    path = PUBLIC / "ras_json" / "ray-64928-2.txt"
    code, d = diff_json(path)
    assert d["ras"][0]["missing_ranks"] == [1] and d["ras"][0]["unresponsive_ranks"] == [1]
    assert d["ras"][0]["dead_ranks"] == []
    _, out, _ = run_cli("diff", path)
    assert "rank 1 unreachable by RAS (not called dead)" in out and "ray-64928-2.txt:9" in out
    assert "died" not in out and "dead in RAS" not in out
