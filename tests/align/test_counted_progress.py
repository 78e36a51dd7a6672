"""align/counted_progress.py: PyTorch's counts carry a rank's launched and completed past the end of its records,
and place the wedge and the window; a desync report's own collective numbers are not read as seqs."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from cli_helpers import diff_json, run_cli
from incidents import draw
from incidents.evidence import draw_subset
from incidents.runner import evidence_rng

from ncclforensics.model import Location

TIMEOUT = ("[rank{rank}]:[E1129 09:55:01.7317260{rank:02d} ProcessGroupNCCL.cpp:689] [Rank {rank}] Watchdog caught "
           "collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=512, NumelOut=512, "
           "Timeout(ms)=20000) ran for 20016 milliseconds before timing out.")
STATUS = ("[rank{rank}]:[E1129 09:55:01.7328260{rank:02d} ProcessGroupNCCL.cpp:2303] [PG ID 1 PG GUID 1(tp) Rank "
          "{rank}]  failure detected by watchdog at work sequence id: {seq} PG status: last enqueued work: "
          "{enqueued}, last completed work: {done}")


def _traces_and_logs(folder: Path, steps: dict[int, int], held: dict[int, tuple[int, int, int]]) -> Path:
    """Each rank's fingerprint trace (rank -> steps written, 3 all-reduces a step) and watchdog log (rank ->
    (SeqNum it times out at, last enqueued, last completed))."""
    folder.mkdir()
    for rank, written in steps.items():
        rows = [{"step": s, "op": 3 * s + i, "rank": rank, "tag": f"layer{i}", "kind": "AllReduce", "numel": 512,
                 "sum": float(1000 * s + i), "digest": f"{s:08x}{i:08x}"} for s in range(written) for i in range(3)]
        (folder / f"fingerprint_rank{rank}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    for rank, (seq, enqueued, done) in held.items():
        (folder / f"torch_rank{rank}.log").write_text(
            TIMEOUT.format(rank=rank, seq=seq) + "\n" + STATUS.format(rank=rank, seq=seq, enqueued=enqueued, done=done)
            + "\n")
    return folder


def test_counts_past_traces_place_the_wedge_where_the_ranks_wait(tmp_path):
    # Four ranks' traces, flushed per step, end with step 0 (seq 3); their watchdogs time out at SeqNum 5, ranks
    # 0-2 with 6 enqueued, rank 3 with 5, all with 4 completed. They wait in seq 5: by the records alone every
    # rank launched and completed 3, and nothing placed a stop.
    folder = _traces_and_logs(tmp_path / "held", {r: 1 for r in range(4)},
                              {0: (5, 6, 4), 1: (5, 6, 4), 2: (5, 6, 4), 3: (5, 5, 4)})
    _, found = diff_json(folder)
    wedge = found["wedge"]
    assert (wedge["seq"], wedge["seq_range"]) == (5, [5, 5])
    assert wedge["launched"] == {"0": 6, "1": 6, "2": 6, "3": 5}
    assert wedge["completed"] == {"0": 4, "1": 4, "2": 4, "3": 4}
    assert wedge["launched_floors"] == []
    counted = wedge["counted"]["0"]
    assert counted["evidence"] == [f"{folder}/torch_rank0.log:2", f"{folder}/torch_rank0.log:1"]
    assert (counted["records_launched"], counted["records_completed"]) == (5, 3)  # (the timeout line's row)
    assert counted["records_evidence"] == f"{folder}/fingerprint_rank0.jsonl:3"
    code, out, _ = run_cli("diff", folder)
    line = next(x for x in out.splitlines() if x.startswith("  rank 3: last launched"))
    assert "last launched 5, last completed 4" in line and f"{folder}/torch_rank3.log:2" in line
    assert f"its records end at seq 3 completed ({folder}/fingerprint_rank3.jsonl:3), seq 5 launched" in line


def test_a_timeout_alone_is_a_floor_of_what_the_rank_launched(tmp_path):
    # As above, but rank 3's log has its timeout line only: it launched seq 5 at least, and completed 4.
    folder = _traces_and_logs(tmp_path / "floor", {r: 1 for r in range(4)},
                              {0: (5, 6, 4), 1: (5, 6, 4), 2: (5, 6, 4), 3: (5, 5, 4)})
    (folder / "torch_rank3.log").write_text(TIMEOUT.format(rank=3, seq=5) + "\n")
    _, found = diff_json(folder)
    wedge = found["wedge"]
    assert (wedge["seq"], wedge["launched"]["3"], wedge["completed"]["3"]) == (5, 5, 4)
    assert wedge["launched_floors"] == [3]


def test_a_desync_report_and_traces_cut_short_leave_the_wedge_at_the_timeouts(tmp_path):
    # Seed 1158222 (8 ranks, fingerprint traces and watchdog logs; ranks 2 and 6's traces cut short): ranks 2 and 5
    # skipped step 1's first collective, so seq 7 paired their all-gather with the others' all-reduce of equal
    # bytes; the gather side completed, the others wait in seq 7 with seq 8 enqueued (`last enqueued work: 8, last
    # completed work: 6`); the desync report counts ranks 2 and 5 finishing #7 and joining no #8. The traces end at
    # seq 4 (rank 5's at 7). By the records alone the wedge was seq 8, every rank launching 7 and most completing 4.
    incident = draw(1158222)
    rng = evidence_rng(1158222)
    _, kinds = draw_subset(rng, incident.program.world)
    folder = tmp_path / "incident"
    incident.write(folder, kinds, rng)
    _, found = diff_json(folder)
    wedge = found["wedge"]
    assert (wedge["seq"], wedge["seq_range"], wedge["kind"]) == (7, [7, 7], "type_mismatch")
    truth = incident.truth
    assert wedge["launched"] == {str(r): n for r, n in truth.launched["1"].items()}
    assert wedge["completed"] == {str(r): n for r, n in truth.completed["1"].items()}
    assert wedge["waiting_ranks"] == list(range(8)) and wedge["absent_ranks"] == []
    assert wedge["counted"]["0"]["evidence"] == [f"{folder}/torch_rank0.log:12", f"{folder}/torch_rank0.log:2"]
    assert wedge["counted"]["2"]["evidence"] == [f"{folder}/torch_rank0.log:3"]
    window = found["window"]
    assert (window["first_seq"], window["last_seq"], window["collectives"]) == (5, 6, 2)
    # (seq 7 completed on the all-gather side only; the others' timeouts say they wait in it)
    assert window["completed_by_some"] == {"seq": 7, "ranks": [2, 5]}
    # (the report's `Timeout at collective: _ALLGATHER_BASE, #8` is its own count, no seq)
    says = [e["says"] for e in found["evidence"] if e["kind"] == "watchdog_stop" and e["at"].endswith("rank0.log:3")]
    assert says == ["rank 0: desync report, timeout at its collective #8 (AllGather), by the report's own count"]


def test_each_comm_cites_the_counts_that_raise_it_and_none_is_raised_in_place(tmp_path):
    # As the first test: every comm the counts raise gives them with their lines in `comms[].counted`, as the
    # wedge does (only the wedge cited them), and the analysis given to with_counted_progress is left as it was.
    from ncclforensics.align.answers import CommAnalysis
    from ncclforensics.align.counted_progress import CountedProgress, with_counted_progress

    folder = _traces_and_logs(tmp_path / "held", {r: 1 for r in range(4)},
                              {0: (5, 6, 4), 1: (5, 6, 4), 2: (5, 6, 4), 3: (5, 5, 4)})
    _, found = diff_json(folder)
    comm = next(c for c in found["comms"] if c["comm"] == found["wedge"]["comm"])
    assert comm["launched"] == {"0": 6, "1": 6, "2": 6, "3": 5} and comm["counted"] == found["wedge"]["counted"]
    assert comm["counted"]["3"]["evidence"] == [f"{folder}/torch_rank3.log:2", f"{folder}/torch_rank3.log:1"]
    analysis = CommAnalysis("0xa", [0, 1], {0: 10, 1: 10}, {0: 8, 1: 9}, {0: 1, 1: 1})
    progress = CountedProgress(rank=0, comm="0xa", launched=12, completed=11, waits_next=False, launched_no_more=False, launched_floor=False,
                               at=(Location("torch_rank0.log", 2),), records_launched=10, records_completed=8,
                               records_at=Location("fr_rank0.pkl", None, 9))
    raised = with_counted_progress(analysis, {0: progress})
    assert (raised.launched, raised.completed, raised.raised) == ({0: 12, 1: 10}, {0: 11, 1: 9}, {0: progress})
    assert (analysis.launched, analysis.completed, analysis.raised) == ({0: 10, 1: 10}, {0: 8, 1: 9}, {})


def test_records_that_launched_more_than_they_completed_end_at_both():
    # A dump that launched 10 and completed 8: its records end at neither alone (the words said "seq 8").
    from ncclforensics.align.counted_progress import CountedProgress
    from ncclforensics.align.wedge import Wedge
    from ncclforensics.model import WedgeKind
    from ncclforensics.report.wedge_words import counted_words

    progress = CountedProgress(rank=0, comm="0xa", launched=12, completed=11, waits_next=False, launched_no_more=False, launched_floor=False,
                               at=(Location("torch_rank0.log", 2),), records_launched=10, records_completed=8,
                               records_at=Location("fr_rank0.pkl", None, 9))
    wedge = Wedge(comm="0xa", seq=12, kind=WedgeKind.UNKNOWN, launched={0: 12}, completed={0: 11},
                  waiting_ranks=[0], absent_ranks=[], counted={0: progress})
    assert "its records end at seq 8 completed (fr_rank0.pkl#entries[9]), seq 10 launched" in counted_words(wedge, 0)


def test_a_rank_that_launched_no_more_behind_ranks_that_completed_the_next_is_a_contradiction():
    # A peer's desync report shows rank 1 finished seq 7 and joined no next one; rank 0's counts say it completed
    # seq 8, which needs rank 1 too. Rank 1 does not wait in seq 8 (no timeout of its own says so): its stop is
    # not read as waiting there, and the two lines are reported as a contradiction, each with its file:line.
    from ncclforensics.align.answers import CommAnalysis
    from ncclforensics.align.counted_progress import CountedProgress, launched_no_more_contradictions

    report, done = Location("torch_rank0.log", 3), Location("torch_rank0.log", 12)
    no_more = CountedProgress(rank=1, comm="0xa", launched=7, completed=7, waits_next=False, launched_no_more=True,
                              launched_floor=False, at=(report,), records_launched=4, records_completed=4,
                              records_at=None)
    ahead = CountedProgress(rank=0, comm="0xa", launched=9, completed=8, waits_next=False, launched_no_more=False,
                            launched_floor=False, at=(done,), records_launched=4, records_completed=4, records_at=None)
    assert no_more.final and not no_more.waits_next
    analysis = CommAnalysis("0xa", [0, 1], {0: 9, 1: 7}, {0: 8, 1: 7}, {0: 1, 1: 1})
    [found] = launched_no_more_contradictions(None, analysis, {0: ahead, 1: no_more})
    assert (found.comm, found.rank) == ("0xa", 1)
    assert sorted(found.values.values()) == [(7, report), (8, done)]
    assert "rank 1 launched nothing after seq 7, yet rank 0 completed seq 8" in found.note
    waits = replace(no_more, waits_next=True, launched_no_more=False)
    assert launched_no_more_contradictions(None, analysis, {0: ahead, 1: waits}) == []
