"""align/watchdog.py: timeout lines as stream rows, and PyTorch's enqueued counts as a root and a wedge where no
rank's collectives are on record."""

from __future__ import annotations

from dataclasses import replace

import polars as pl

from ncclforensics.report.words import caveats
from ncclforensics.align.streams import Streams, build_streams
from ncclforensics.align.enqueue_marks import _through_places, EnqueueMarks, enqueue_marks
from ncclforensics.align.enqueued_past_records import counted_past_cuts, enqueued_in
from ncclforensics.align.marks_only import marks_only_root, marks_only_wedge
from ncclforensics.align.watchdog import STOP_EVENTS, UNNAMED_GROUP, with_watchdog_rows
from ncclforensics.model import (
    CollectiveEvent, CommInfo, EventState, Evidence, Location, ProgressReport, SourceFormat, WatchdogEvent,
    WatchdogKind, WedgeKind, collectives_to_frame,
)


def _timeout(path: str, line: int, rank: int, seq: int, op: str, comm: str | None = "0") -> WatchdogEvent:
    # [rank1]:[E1129 ...] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=50, OpType=ALLREDUCE, ...)
    return WatchdogEvent(loc=Location(path, line), kind=WatchdogKind.TIMEOUT.value, rank=rank, comm=comm, seq=seq,
                         op=op, numel_in=4096, timeout_ms=30000, ran_ms=30002)


def _log(path: str, *events: WatchdogEvent, progress: tuple[ProgressReport, ...] = ()) -> Evidence:
    return Evidence(path=path, format=SourceFormat.TORCH_LOG, watchdog=list(events), progress=list(progress))


def test_every_stop_event_is_a_watchdog_kind():
    assert STOP_EVENTS.issubset(kind.value for kind in WatchdogKind)


def test_timeout_lines_become_started_rows_where_no_file_has_collectives():
    logs = [_log("torch_rank0.log", _timeout("torch_rank0.log", 7, 0, 51, "AllReduce")),
            _log("torch_rank1.log", _timeout("torch_rank1.log", 9, 1, 50, "AllGather", comm=None))]
    rows = with_watchdog_rows(logs)
    first, second = (item.collectives.rows(named=True)[0] for item in rows)
    assert (first["rank"], first["comm"], first["seq"], first["op"], first["count"]) == (0, "0", 51, "AllReduce", 4096)
    assert first["state"] == EventState.STARTED.value and (first["file"], first["line"]) == ("torch_rank0.log", 7)
    # The second line names no group: the only group the other lines name is taken.
    assert (second["rank"], second["comm"], second["seq"]) == (1, "0", 50)
    streams = build_streams(rows)
    assert streams.members == {"0": [0, 1]}


def test_timeout_lines_add_no_rows_beside_real_collectives():
    with_rows = with_watchdog_rows([_log("a.log", _timeout("a.log", 1, 0, 5, "AllReduce"))])
    assert with_watchdog_rows(with_rows) is with_rows
    unnamed = with_watchdog_rows([_log("a.log", _timeout("a.log", 1, 0, 5, "AllReduce", comm=None)),
                                  _log("b.log", _timeout("b.log", 1, 1, 5, "AllReduce", comm="1"),
                                       _timeout("b.log", 2, 1, 6, "AllReduce", comm="2"))])
    assert unnamed[0].collectives["comm"].to_list() == [UNNAMED_GROUP]


def _progress(rank: int, enqueued: int, completed: int, line: int) -> ProgressReport:
    # [PG ID 0 PG GUID 0 Rank 1] ... last enqueued NCCL work: 50, last completed NCCL work: 49.
    return ProgressReport(loc=Location(f"torch_rank{rank}.log", line), rank=rank, comm="0", last_enqueued=enqueued,
                          last_completed=completed)


def test_enqueued_counts_name_the_rank_that_launched_more_and_who_waits():
    marks = enqueue_marks([_progress(0, 50, 49, 3), _progress(1, 49, 49, 3), _progress(2, 49, 49, 3),
                           _progress(0, 48, 47, 1)],  # an earlier, lower line of rank 0 changes nothing
                          [_timeout("torch_rank1.log", 2, 1, 50, "AllReduce")])
    group = marks["0"]
    assert group.launched == {0: 50, 1: 49, 2: 49} and group.completed == {0: 49, 1: 49, 2: 49}
    assert group.stops == ["watchdog timeout (torch_rank1.log:2)"]
    root = marks_only_root(marks, Streams())
    assert (root.outlier_ranks, root.reference_ranks, root.kind, root.seq_range, root.size) == (
        [0], [1, 2], "extra", (1, 50), 1)
    wedge = marks_only_wedge(marks, Streams(), dead=set())
    assert (wedge.seq, wedge.waiting_ranks, wedge.absent_ranks, wedge.kind) == (50, [0], [1, 2], WedgeKind.NO_PARTNER)
    assert marks_only_wedge(marks, Streams(), dead={2}).kind is WedgeKind.RANK_GONE


def test_a_group_that_never_stopped_gives_no_root():
    marks = enqueue_marks([_progress(0, 50, 49, 3), _progress(1, 49, 49, 3)], [])
    assert marks["0"].stops == [] and marks_only_root(marks, Streams()) is None


def test_a_desync_report_gives_counts_where_no_enqueued_line_does():
    # [rank0]: ... [6] finished collective #19, but didn't join collective #20
    report = WatchdogEvent(loc=Location("torch_rank0.log", 12), kind=WatchdogKind.DESYNC_REPORT.value, rank=0,
                           comm="0", lagging=(((6,), 19, False),))
    stop = _timeout("torch_rank0.log", 10, 0, 20, "AllReduce")
    group = enqueue_marks([], [report, stop])["0"]
    assert group.launched == {6: 19, 0: 20} and group.source == "PyTorch's desync report"
    root = marks_only_root({"0": group}, Streams())
    # Two groups of one rank each: the one behind is the outlier.
    assert (root.outlier_ranks, root.kind, root.pinned_by) == ([6], "missing", "PyTorch's desync report")


def _desync_logs(tmp_path, laggard: int, ranks: int = 4) -> list[str]:
    """Watchdog logs as PyTorch writes them: every rank but `laggard` times out in its TP group at work 10 with a
    desync report naming the laggard, and says `last enqueued work: 10`; the laggard's log names no work of it."""
    paths = []
    for rank in range(ranks):
        prefix = f"[rank{rank}]:[E1129 09:55:01.735106066 ProcessGroupNCCL.cpp"
        if rank == laggard:
            lines = [f"{prefix}:1849] [PG ID 0 PG GUID 0 Rank {rank}] Observed flight recorder dump signal from "
                     "another rank via TCPStore."]
        else:
            others = ", ".join(str(r) for r in range(ranks) if r != laggard)
            lines = [
                f"{prefix}:689] [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=10, "
                "OpType=ALLREDUCE, NumelIn=16384, NumelOut=16384, Timeout(ms)=20000) ran for 20017 milliseconds "
                "before timing out.",
                f"{prefix}:2495] Rank {rank}",
                "\t - [1] Timeout at collective: ALLREDUCE, #10",
                "\t - To our best knowledge, the lagging/dead/mismatched ranks that caused the desync are:",
                f"\t     [{laggard}] finished collective #9, but didn't join collective #10 (count from 1)",
                "\t - Snapshot of ranks' latest states:",
                "\t   #9 finished ranks:",
                f"\t     [{laggard}] finished ALLREDUCE",
                "\t   #10 started ranks:",
                f"\t     [{others}] started ALLREDUCE",
                f"{prefix}:2303] [PG ID 1 PG GUID 1(tp) Rank {rank}]  failure detected by watchdog at work sequence "
                "id: 10 PG status: last enqueued work: 10, last completed work: 9",
            ]
        path = tmp_path / f"torch_rank{rank}.log"
        path.write_text("\n".join(lines) + "\n")
        paths.append(str(path))
    return paths


def test_a_desync_report_adds_the_laggard_its_marks_lack(tmp_path):
    from ncclforensics.api import diff_paths

    _, diagnosis = diff_paths(_desync_logs(tmp_path, laggard=0))
    root = diagnosis.root
    assert root is not None and root.outlier_ranks == [0] and root.kind == "missing"
    assert root.seq_range == (1, 10)
    # The report numbers the ranks of its group; which global rank `[2]` is follows only where the group is known.
    _, diagnosis = diff_paths(_desync_logs(tmp_path, laggard=2))
    assert diagnosis.root is not None and diagnosis.root.outlier_ranks == [2]


def test_a_laggard_is_counted_like_the_laggards_both_numberings_count():
    # Rank 0 is ahead (34) and reports `[1, 2, 3] finished collective #32, but didn't join collective #33`; ranks 1
    # and 2 say `last enqueued work: 32` themselves, rank 3 says nothing: it launched 32 too, not 33.
    progress = [ProgressReport(loc=Location(f"torch_rank{r}.log", 3), rank=r, comm="0", last_enqueued=n,
                               last_completed=31) for r, n in ((0, 34), (1, 32), (2, 32))]
    report = WatchdogEvent(loc=Location("torch_rank0.log", 5), kind=WatchdogKind.DESYNC_REPORT.value, rank=0,
                           comm="0", seq=34, op="AllGather", lagging=(((1, 2, 3), 32, False),),
                           group_ranks=(0, 1, 2, 3))
    marks = enqueue_marks(progress, [_timeout("torch_rank0.log", 2, 0, 34, "AllGather"), report])
    assert marks["0"].launched == {0: 34, 1: 32, 2: 32, 3: 32}
    assert Location("torch_rank0.log", 5) in marks["0"].evidence


def test_a_rank_only_the_snapshot_counts_sides_with_those_it_launched_as_many_as():
    # Ranks 0 and 3 left marks (16 and 15); rank 0's report says `[1, 3] finished collective #15, but didn't join
    # collective #16` and, in its snapshot, `#16 started ranks: [0, 2]`: two ranks behind two, not one rank ahead.
    progress = [ProgressReport(loc=Location(f"torch_rank{r}.log", 3), rank=r, comm="1", last_enqueued=n,
                               last_completed=15) for r, n in ((0, 16), (3, 15))]
    report = WatchdogEvent(loc=Location("torch_rank0.log", 5), kind=WatchdogKind.DESYNC_REPORT.value, rank=0,
                           comm="1", seq=16, op="AllReduce", lagging=(((1, 3), 15, False),),
                           latest=(((1, 3), 15, True, "AllReduce"), ((0, 2), 16, False, "AllReduce")),
                           group_ranks=(0, 1, 2, 3))
    # (`[PG ID 1 PG GUID 1(tp) Rank 3]` on rank 3's line: places 0 and 3 are ranks 0 and 3, so 1 and 2 are 1 and 2)
    places = [WatchdogEvent(loc=Location(f"torch_rank{r}.log", 4), kind="pg_status", rank=r, comm="1", seq=16,
                            group_rank=r) for r in (0, 3)]
    marks = enqueue_marks(progress, [_timeout("torch_rank0.log", 2, 0, 16, "AllReduce", comm="1"), report, *places])
    assert marks["1"].launched == {0: 16, 3: 15, 1: 15, 2: 16}
    # (a laggard that finished its last and joined no next launched no more; the snapshot's others are floors)
    assert marks["1"].floors == {2}


def test_a_snapshot_whose_last_collectives_differ_in_type_gives_a_root_where_the_counts_agree():
    # Every rank enqueued 4; rank 2 waits in an AllReduce, and its report's snapshot says the others finished an
    # AllGather as their #4 (`#4 finished ranks: [0, 1, 3] finished _ALLGATHER_BASE`).
    progress = [ProgressReport(loc=Location(f"torch_rank{r}.log", 3), rank=r, comm="0", last_enqueued=4,
                               last_completed=3 if r == 2 else 4) for r in range(4)]
    report = WatchdogEvent(loc=Location("torch_rank2.log", 5), kind=WatchdogKind.DESYNC_REPORT.value, rank=2,
                           comm="0", seq=4, op="AllReduce", lagging=(((2,), 4, True),),
                           latest=(((2,), 4, False, "AllReduce"), ((0, 1, 3), 4, True, "AllGather")),
                           group_ranks=(0, 1, 2, 3))
    marks = enqueue_marks(progress, [_timeout("torch_rank2.log", 2, 2, 4, "AllReduce"), report])
    root = marks_only_root(marks, Streams())
    assert (root.outlier_ranks, root.kind, root.seq_range, root.majority) == ([2], "different", (1, 4), True)
    assert root.pinned_by == "PyTorch's desync report" and root.shown
    # Two ranks, one type each: no majority, both named.
    two = enqueue_marks(progress[:2], [_timeout("torch_rank0.log", 2, 0, 4, "AllReduce"), WatchdogEvent(
        loc=Location("torch_rank0.log", 5), kind=WatchdogKind.DESYNC_REPORT.value, rank=0, comm="0", seq=4,
        latest=(((0,), 4, False, "AllReduce"), ((1,), 4, True, "AllGather")), group_ranks=(0, 1))])
    root = marks_only_root(two, Streams())
    assert (root.outlier_ranks, root.reference_ranks, root.majority) == ([0, 1], [0, 1], False)


def test_ranks_the_counts_show_join_a_root_whose_records_begin_late(tmp_path):
    # Timeout lines alone: rank 3 waits in an AllGather at work 10 where ranks 1 and 2 wait in an AllReduce (a
    # root at or before 10, records beginning there); the desync report says rank 0 never joined work 10.
    from ncclforensics.api import diff_paths

    paths = _desync_logs(tmp_path, laggard=0)
    log = tmp_path / "torch_rank3.log"
    log.write_text(log.read_text().replace("OpType=ALLREDUCE", "OpType=ALLGATHER"))
    _, diagnosis = diff_paths(paths)
    assert diagnosis.root is not None and diagnosis.root.outlier_ranks == [0, 3]
    assert any("rank 0 launched fewer collectives" in words for words in caveats(diagnosis))


def _streams(lasts: dict[tuple[str, int], int], cut: set[tuple[str, int]]) -> Streams:
    parts = {key: pl.DataFrame({"seq": list(range(1, last + 1))}) for key, last in lasts.items()}
    members: dict[str, list[int]] = {}
    for comm, rank in parts:
        members.setdefault(comm, []).append(rank)
    return Streams(parts=parts, members=members, cut={key: Location("nccl.log", 9) for key in cut})


def test_counts_carry_a_cut_rank_past_its_cut_where_the_group_is_the_comm():
    # Rank 3's log was cut at seq 7 in comm 0xa; group "0" counts every whole rank as its records end, so it is
    # that comm, and rank 3 launched up to 15 there.
    lasts = {("0xa", 0): 14, ("0xa", 1): 15, ("0xa", 2): 14, ("0xa", 3): 7, ("0xb", 0): 30, ("0xb", 1): 30}
    streams = _streams(lasts, {("0xa", 3)})
    marks = {"0": EnqueueMarks(launched={0: 14, 1: 15, 2: 14, 3: 15}), "1": EnqueueMarks(launched={0: 30, 1: 30})}
    assert counted_past_cuts(streams, marks) == {"0xa": {3: 15}}
    # A count of a whole rank that is not where its records end: not that comm's group.
    marks["0"].launched[1] = 16
    assert counted_past_cuts(streams, marks) == {}
    # Two comms the group fits alike: nothing ties it to either.
    marks["0"].launched[1] = 15
    twin = _streams({**lasts, **{("0xc", r): n for (c, r), n in lasts.items() if c == "0xa"}}, {("0xa", 3), ("0xc", 3)})
    assert counted_past_cuts(twin, marks) == {}
    # Counts from a desync report number collectives their own way: not used.
    marks["0"].source = "PyTorch's desync report"
    assert counted_past_cuts(streams, marks) == {}


def test_counts_carry_a_member_whose_log_was_cut_after_its_init_line_and_before_any_collective_of_the_comm():
    # Rank 2's log holds the INIT line of comm 0xa and no collective there: no record, no configuration names it,
    # only its INIT line. Group "1" counts ranks 0..3 as the records of 0, 1 and 3 end: it is that comm, and rank 2
    # launched 7 there, as many as rank 1 (who may not be alone in departing then). Without the INIT line (and
    # with its log whole) rank 2 is no member of 0xa, and the group fits no comm.
    lasts = {("0xa", 0): 10, ("0xa", 1): 7, ("0xa", 3): 10, ("0xw", 0): 2, ("0xw", 1): 1, ("0xw", 2): 1}
    streams = _streams(lasts, set())
    marks = {"1": EnqueueMarks(launched={0: 10, 1: 7, 2: 7, 3: 10})}
    assert counted_past_cuts(streams, marks) == {}
    streams.joined = {"0xa": [0, 1, 2, 3], "0xw": [0, 1, 2]}
    assert counted_past_cuts(streams, marks) == {"0xa": {2: 7}}


def test_counts_carry_a_member_whose_file_was_cut_before_it_logged_the_comm():
    # Rank 0's NCCL log ends in the world's first collectives, before it joined comm 0xa; ranks 1-3 log 18, 16, 16
    # there. PyTorch's group "1" counts ranks 0-3 as 18, 18, 16, 16: it is comm 0xa, and rank 0 launched 18 there.
    lasts = {("0xw", 0): 1, ("0xw", 1): 3, ("0xw", 2): 2, ("0xw", 3): 2, ("0xa", 1): 18, ("0xa", 2): 16,
             ("0xa", 3): 16}
    streams = _streams(lasts, {("0xw", 0)})
    marks = {"1": EnqueueMarks(launched={0: 18, 1: 18, 2: 16, 3: 16})}
    assert counted_past_cuts(streams, marks) == {"0xa": {0: 18}}
    # A rank whose file is whole is no hidden member: the group is not that comm.
    assert counted_past_cuts(_streams(lasts, set()), marks) == {}


def test_counts_of_a_group_records_tie_to_the_comm_carry_a_member_whose_dump_counts_it_alone():
    # Seed 924841: NCCL logs of ranks 0-2 and dumps of ranks 1 and 3; rank 3's ring kept its TP group's entries only.
    # The world's pg_status counts rank 1 as 3 (where its log ends) and rank 3 as 2; rank 1's dump entries tie group
    # "0" to comm 0xw. Rank 3 launched 2 there, one short of ranks 0 and 1 as rank 2 is.
    lasts = {("0xw", 0): 3, ("0xw", 1): 3, ("0xw", 2): 2, ("0xa", 0): 15, ("0xa", 1): 15, ("0xb", 2): 15}
    streams = _streams(lasts, set())
    streams.expected_members = {"0xw": [0, 1, 2, 3], "0xa": [0, 1], "0xb": [2, 3]}
    marks = {"0": EnqueueMarks(launched={1: 3, 3: 2})}
    assert counted_past_cuts(streams, marks) == {}  # (nothing but the counts would tie the group to the comm)
    streams.aliases = {"0": "0xw"}
    assert counted_past_cuts(streams, marks) == {"0xw": {3: 2}}
    # A count of a whole rank that is not where its records end: the tie does not hold for the counts.
    marks["0"].launched[1] = 4
    assert counted_past_cuts(streams, marks) == {}


def test_the_enqueued_counts_of_a_comm_are_those_of_the_group_it_is_by_name():
    streams = _streams({("0", 0): 4, ("0", 1): 7, ("1", 0): 20}, set())
    marks = {"0": EnqueueMarks(launched={0: 6, 1: 8}), "1": EnqueueMarks(launched={0: 21})}
    assert enqueued_in(marks, streams, "0") == {0: 6, 1: 8}
    assert enqueued_in(marks, streams, "0xa") == {}
    # Counts from a desync report number collectives their own way: not used.
    marks["0"].source = "PyTorch's desync report"
    assert enqueued_in(marks, streams, "0") == {}


def _dumped(rank: int, comm: str, enqueued: int) -> ProgressReport:
    return ProgressReport(loc=Location(f"fr_rank{rank}", record=int(comm), field="pg_status"), rank=rank, comm=comm,
                          last_enqueued=enqueued, last_completed=0)


def _rows(comm: str, rank: int, seqs: range) -> pl.DataFrame:
    return pl.DataFrame({"comm": comm, "rank": rank, "seq": list(seqs)})


def test_dump_counts_speak_for_a_group_no_stream_compares():
    # Every dump's ring lost the one world collective (group "0"); the tensor-parallel groups' streams compare
    # ranks. pg_status says rank 3 enqueued none of it.
    marks = enqueue_marks([_dumped(0, "0", 1), _dumped(1, "0", 1), _dumped(2, "0", 1), _dumped(3, "0", 0)], [])
    parts = {(c, r): _rows(c, r, range(5, 11)) for c, ranks in (("1", (0, 1)), ("2", (2, 3))) for r in ranks}
    streams = Streams(parts=parts, members={"1": [0, 1], "2": [2, 3]})
    root = marks_only_root(marks, streams)
    # Nothing says the job had stopped: rank 3 may only lag, and the root says so.
    assert (root.comm, root.outlier_ranks, root.kind, root.unstopped) == ("0", [3], "missing", True)
    assert not marks_only_root(marks, streams, stopped=True).unstopped
    # A comm whose streams hold the group's ranks as far as their counts already compares what the counts say.
    world = {("w", r): _rows("w", r, range(1, 3)) for r in range(4)}
    covered = Streams(parts={**parts, **world}, members={"1": [0, 1], "2": [2, 3], "w": [0, 1, 2, 3]})
    assert marks_only_root(marks, covered) is None
    # Counts that go past every such comm's records say what no stream compares.
    torch = enqueue_marks([_progress(2, 12, 0, 3), _progress(3, 4, 0, 3)], [_timeout("torch_rank2.log", 2, 2, 1, "A")])
    assert marks_only_root(torch, covered).outlier_ranks == [3]
    # Counts of a running job that no dump wrote are no root.
    assert marks_only_root(enqueue_marks([_progress(0, 1, 0, 3), _progress(3, 0, 0, 3)], []), streams) is None


def test_timeouts_that_disagree_at_one_seqnum_give_rows_beside_whole_files():
    whole = Evidence(path="nccl.log", format=SourceFormat.NCCL_LOG, collectives=_rows("0xab", 0, range(1, 4)))
    agree = [_log(f"t{r}.log", _timeout(f"t{r}.log", 1, r, 4, "AllGather", comm="1")) for r in range(3)]
    assert with_watchdog_rows([whole, *agree])[1:] == agree
    differ = [*agree[:2], _log("t2.log", _timeout("t2.log", 1, 2, 4, "AllReduce", comm="1"))]
    rows = with_watchdog_rows([whole, *differ])
    assert [item.collectives.height for item in rows] == [3, 1, 1, 1]
    assert rows[3].collectives.row(0, named=True)["op"] == "AllReduce"
    # A group a file's collectives already name gets none (its records speak).
    named = Evidence(path="nccl.log", format=SourceFormat.NCCL_LOG, collectives=_rows("1", 0, range(1, 4)))
    assert with_watchdog_rows([named, *differ])[1:] == differ


_TIMEOUT_WITH_STACK = """\
[rank{r}]:[E1129 09:55:01.739306066 ProcessGroupNCCL.cpp:689] [Rank {c}] Watchdog caught collective operation timeout: \
WorkNCCL(SeqNum=8, OpType=ALLREDUCE, NumelIn=2048, NumelOut=2048, Timeout(ms)=20000) ran for 20018 milliseconds before \
timing out.
[rank{r}]:[E1129 09:55:01.740406066 ProcessGroupNCCL.cpp:2303] [PG ID 1 PG GUID 2 Rank {c}]  failure detected by \
watchdog at work sequence id: 8 PG status: last enqueued work: 9, last completed work: 7
[rank{r}]:[E1129 09:55:06.739306066 ProcessGroupNCCL.cpp:733] Stack trace of the failed collective:
#0 all_reduce from site-packages/torch/distributed/distributed_c10d.py:3068
#1 all_reduce from vllm/distributed/parallel_state.py:93
#2 forward from site-packages/torch/nn/modules/module.py:1790
#3 {caller}
"""


def test_timeout_rows_carry_the_stack_pytorch_printed_so_one_op_and_size_from_different_code_part(tmp_path):
    # Ranks 2 and 3 wait at SeqNum 8 of one group in an AllReduce of 2048 each, issued from different code (a drafter
    # pass on rank 2): the stacks, frames outside torch only as a dump's entry gives them, tell the two apart.
    from ncclforensics.align.divergence import analyze_comm
    from ncclforensics.sources import InputFile, parse_file
    callers = {2: "propose from vllm/v1/spec_decode/eagle.py:233", 3: "forward from vllm/model_executor/models/llama.py:61"}
    logs = []
    for c, (rank, caller) in enumerate(callers.items()):
        path = tmp_path / f"torch_rank{rank}.log"
        path.write_text(_TIMEOUT_WITH_STACK.format(r=rank, c=c, caller=caller))
        logs.append(parse_file(InputFile(path=path, name=path.name)))
    rows = with_watchdog_rows(logs)
    stacks = {item.collectives["rank"][0]: item.collectives["stack"][0] for item in rows}
    assert stacks == {2: "vllm/distributed/parallel_state.py:93 < vllm/v1/spec_decode/eagle.py:233",
                      3: "vllm/distributed/parallel_state.py:93 < vllm/model_executor/models/llama.py:61"}
    streams = build_streams(rows)
    analysis = analyze_comm(streams, "2")
    # (nothing before seq 8 is on record: the range runs from seq 1; two ranks: either side)
    root = analysis.root
    assert root is not None and root.seq_range == (1, 8) and root.pinned_by == "call sites"
    assert root.outlier_ranks == [2, 3] and not root.majority


def test_timeouts_alike_in_op_and_size_from_different_code_give_rows_beside_whole_files(tmp_path):
    # Seed 954867: whole NCCL logs of lookalike all-reduces, and ranks 2 and 3 timing out at SeqNum 8 of one group
    # in an AllReduce of 2048 each, from different code. The logs cannot show that desync; the stacks do, so the
    # timeouts give their rows beside the logs, as timeouts of different types or sizes do.
    from ncclforensics.sources import InputFile, parse_file
    callers = {2: "propose from vllm/v1/spec_decode/eagle.py:233", 3: "forward from vllm/model_executor/models/llama.py:61"}
    whole = Evidence(path="nccl.log", format=SourceFormat.NCCL_LOG, collectives=_rows("0xab", 2, range(1, 9)))
    logs = []
    for c, (rank, caller) in enumerate(callers.items()):
        path = tmp_path / f"torch_rank{rank}.log"
        path.write_text(_TIMEOUT_WITH_STACK.format(r=rank, c=c, caller=caller))
        logs.append(parse_file(InputFile(path=path, name=path.name)))
    rows = with_watchdog_rows([whole, *logs])
    assert [item.collectives.height for item in rows] == [8, 1, 1]
    assert {item.collectives["stack"][0] for item in rows[1:]} == {
        "vllm/distributed/parallel_state.py:93 < vllm/v1/spec_decode/eagle.py:233",
        "vllm/distributed/parallel_state.py:93 < vllm/model_executor/models/llama.py:61"}
    # Stacks alike say nothing the logs do not: no rows.
    alike = []
    for c, rank in enumerate(callers):
        path = tmp_path / f"alike_rank{rank}.log"
        path.write_text(_TIMEOUT_WITH_STACK.format(r=rank, c=c, caller=callers[3]))
        alike.append(parse_file(InputFile(path=path, name=path.name)))
    assert [item.collectives.height for item in with_watchdog_rows([whole, *alike])] == [8, 0, 0]


def test_a_desync_report_s_group_ranks_are_placed_through_the_places_lines_give():
    # A group numbers its members in ascending global order: global rank 2 at place 2 has ranks 0 and 1 below it,
    # so group rank 1 is global rank 1, though neither rank 0 nor rank 1 left a line.
    lagging = (((1,), 15, False),)
    assert _through_places(lagging, {2: 2, 3: 3}) == (((1,), 15, False),)
    # Global rank 6 at place 2 (a TP group of ranks 4-7): places 0 and 1 are somewhere below 6, not known where.
    assert _through_places(lagging, {6: 2}) is None
    # Ranks 5 and 7 at places 1 and 3 are two apart in both numberings: place 2 is rank 6; place 4 is past them.
    assert _through_places((((2,), 9, True),), {5: 1, 7: 3}) == (((6,), 9, True),)
    assert _through_places((((4,), 9, True),), {5: 1, 7: 3}) is None
    # Lines that disagree on the order place nothing.
    assert _through_places(lagging, {2: 2, 1: 3}) is None


def _tp_report(lagging: tuple, latest: tuple) -> WatchdogEvent:
    # [rank4]: ... Rank 0 / - [0] Timeout at collective: ALLREDUCE, #16 / ... in a group of its own (`PG GUID 1`)
    return WatchdogEvent(loc=Location("torch_rank4.log", 5), kind=WatchdogKind.DESYNC_REPORT.value, rank=4,
                         comm="1", seq=16, op="AllReduce", lagging=lagging, latest=latest, group_ranks=(0, 1, 2, 3))


def _pg_config(ranks: tuple[int, ...], path: str = "fr_rank4") -> CommInfo:
    return CommInfo(loc=Location(path, field="pg_config"), comm="1", name="1", desc="tp", ranks=ranks,
                    size=len(ranks))


def test_a_dump_s_member_list_places_a_report_s_group_ranks():
    # TP group "1" is global ranks 4-7 (pg_config); only rank 4 left lines. The report's `[3]` is global rank 7,
    # which no line places.
    progress = [ProgressReport(loc=Location("torch_rank4.log", 3), rank=4, comm="1", last_enqueued=16,
                               last_completed=15)]
    report = _tp_report((((3,), 15, False),), (((3,), 15, True, "AllReduce"), ((0, 1, 2), 16, False, "AllReduce")))
    timeout = _timeout("torch_rank4.log", 2, 4, 16, "AllReduce", comm="1")
    marks = enqueue_marks(progress, [timeout, report], [_pg_config((4, 5, 6, 7))])
    assert marks["1"].source == "PyTorch's desync report" and marks["1"].launched == {7: 15, 4: 16}
    # Without the list the report's places are not global ranks, and place nothing.
    assert enqueue_marks(progress, [timeout, report])["1"].launched == {4: 16}
    # Dumps whose lists differ, or a list that puts a rank where its own line does not: no list is taken.
    two = [_pg_config((4, 5, 6, 7)), _pg_config((0, 1, 2, 3), "fr_rank0")]
    assert enqueue_marks(progress, [timeout, report], two)["1"].launched == {4: 16}
    placed = replace(timeout, kind="pg_status", group_rank=1)  # `[PG ID 1 PG GUID 1(tp) Rank 1]` on rank 4's line
    assert enqueue_marks(progress, [placed, report], [_pg_config((4, 5, 6, 7))])["1"].launched == {4: 16}


def test_a_report_whose_snapshot_names_a_rank_no_line_places_adds_no_laggard():
    # Ranks 0 and 2 left marks (7 and 9); the report says `[0, 1]` lag at #7 and, in its snapshot, `[2, 3]`
    # started #9. Places 0 and 2 are global ranks 0 and 2, so place 1 is rank 1, but place 3 is some rank past 2:
    # rank 1 added beside rank 0 without it would make rank 2 a lone outlier of what is two ranks behind two.
    progress = [ProgressReport(loc=Location(f"torch_rank{r}.log", 3), rank=r, comm="1", last_enqueued=n,
                               last_completed=6) for r, n in ((0, 7), (2, 9))]
    status = [WatchdogEvent(loc=Location(f"torch_rank{r}.log", 3), kind="pg_status", rank=r, comm="1", seq=7,
                            group_rank=r) for r in (0, 2)]
    report = WatchdogEvent(loc=Location("torch_rank2.log", 5), kind=WatchdogKind.DESYNC_REPORT.value, rank=2,
                           comm="1", seq=9, op="AllGather", lagging=(((0, 1), 7, True),),
                           latest=(((0, 1), 7, False, "AllGather"), ((2, 3), 9, False, "AllGather")),
                           group_ranks=(0, 1, 2, 3))
    assert enqueue_marks(progress, [*status, report])["1"].launched == {0: 7, 2: 9}
    # With place 3 known (rank 3's own line), the whole snapshot is placed.
    three = replace(status[1], loc=Location("torch_rank3.log", 3), rank=3, group_rank=3)
    assert enqueue_marks(progress, [*status, three, report])["1"].launched == {0: 7, 2: 9, 1: 7, 3: 9}


def test_a_report_s_placed_ranks_count_where_the_ranks_no_line_places_side_with_most_of_them():
    # Ranks 1, 2, 3 and 5 of a group of eight left marks (16) and their places; the report says `[0]` finished #15
    # and joined no #16, and its snapshot has `[1-7]` at #16. Place 0 is rank 0 and place 4 rank 4 (between places
    # 3 and 5); places 6 and 7 are past every place a line gives, but they started #16 with most of the placed
    # ranks: left out, they swing no majority and hide no outlier, so rank 0 (exactly) and rank 4 count.
    progress = [ProgressReport(loc=Location(f"torch_rank{r}.log", 3), rank=r, comm="1", last_enqueued=16,
                               last_completed=14) for r in (1, 2, 3, 5)]
    status = [WatchdogEvent(loc=Location(f"torch_rank{r}.log", 3), kind="pg_status", rank=r, comm="1", seq=15,
                            group_rank=r) for r in (1, 2, 3, 5)]

    def report(latest: tuple) -> WatchdogEvent:
        return WatchdogEvent(loc=Location("torch_rank1.log", 5), kind=WatchdogKind.DESYNC_REPORT.value, rank=1,
                             comm="1", seq=16, op="AllGather", lagging=(((0,), 15, False),), latest=latest,
                             group_ranks=tuple(range(8)))

    marks = enqueue_marks(progress, [*status, report((((0,), 15, True, "AllGather"),
                                                       ((1, 2, 3, 4, 5, 6, 7), 16, False, "AllGather")))])["1"]
    assert marks.launched == {1: 16, 2: 16, 3: 16, 5: 16, 0: 15, 4: 16}
    assert marks.exact == {0} and marks.floors == {4}
    # A --rank view of ranks 0, 1, 2, 3 and 5: rank 4 is not missing, only not looked at, so it counts nowhere.
    view = enqueue_marks(progress, [*status, report((((0,), 15, True, "AllGather"),
                                                     ((1, 2, 3, 4, 5, 6, 7), 16, False, "AllGather")))],
                         looked_at=frozenset({0, 1, 2, 3, 5}))["1"]
    assert view.launched == {1: 16, 2: 16, 3: 16, 5: 16, 0: 15} and view.floors == set()
    # Place 7 behind with rank 0 instead: left out, it would hide an outlier, so the report adds none of its ranks.
    apart = report((((0, 7), 15, True, "AllGather"), ((1, 2, 3, 4, 5, 6), 16, False, "AllGather")))
    assert enqueue_marks(progress, [*status, apart])["1"].launched == {1: 16, 2: 16, 3: 16, 5: 16}


def test_a_laggard_between_two_placed_ranks_counts_where_the_places_past_every_line_side_with_most():
    # Ranks 1, 3 and 4 of a TP group of eight timed out at SeqNum 19 with 20 enqueued, and their lines give their
    # places; rank 2 left a log with no line of the group. The report says `[2] finished collective #18, but didn't
    # join collective #19`, and its snapshot has `[0, 1, 3, 4, 5, 6, 7]` at #20. Place 2 lies between places 1 and
    # 3, so it is rank 2, which launched 18 and no more; place 0 lies below place 1 (rank 0); places 5-7 lie past
    # every place a line gives, but started #20 with every placed rank there: rank 2 is one behind by two.
    progress = [ProgressReport(loc=Location(f"torch_rank{r}.log", 4), rank=r, comm="1", last_enqueued=20,
                               last_completed=18) for r in (1, 3, 4)]
    status = [WatchdogEvent(loc=Location(f"torch_rank{r}.log", 4), kind="pg_status", rank=r, comm="1", seq=19,
                            group_rank=r) for r in (1, 3, 4)]
    report = WatchdogEvent(loc=Location("torch_rank1.log", 3), kind=WatchdogKind.DESYNC_REPORT.value, rank=1,
                           comm="1", seq=20, op="AllReduce", lagging=(((2,), 18, False),),
                           latest=(((2,), 18, True, "AllReduce"), ((0, 1, 3, 4, 5, 6, 7), 20, False, "AllReduce")),
                           group_ranks=tuple(range(8)))
    marks = enqueue_marks(progress, [*status, report])
    assert marks["1"].launched == {1: 20, 3: 20, 4: 20, 2: 18, 0: 20}
    assert marks["1"].exact == {2} and marks["1"].floors == {0}
    root = marks_only_root(marks, Streams())
    assert root is not None and root.outlier_ranks == [2] and root.seq_range[0] <= 17 <= root.seq_range[1]


def _report_logs(tmp_path, reporter: int, seq: int, enqueued: int, lagging: str, snapshot: tuple[str, ...],
                 dumped: tuple[int, ...]) -> list[str]:
    """Watchdog logs of a rank `reporter` that times out at SeqNum `seq` of its group (`[PG ID 1 PG GUID 1(tp) Rank
    R]`, `enqueued` enqueued) with a desync report naming `lagging` and `snapshot`, and of the ranks `dumped`, whose
    logs end with the dump signal of the default group only (the reporter's too, where it is among them)."""
    prefix = f"[rank{reporter}]:[E1129 09:55:01.802321066 ProcessGroupNCCL.cpp"
    report = [
        f"{prefix}:689] [Rank {reporter}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, "
        "OpType=ALLREDUCE, NumelIn=512, NumelOut=512, Timeout(ms)=20000) ran for 20022 milliseconds before timing out.",
        f"{prefix}:2495] Rank {reporter}",
        f"\t - [{reporter}] Timeout at collective: _ALLGATHER_BASE, #{enqueued}",
        "\t - To our best knowledge, the lagging/dead/mismatched ranks that caused the desync are:",
        f"\t     {lagging}",
        "\t - Snapshot of ranks' latest states:",
        *(f"\t   {line}" for line in snapshot),
        f"{prefix}:2303] [PG ID 1 PG GUID 1(tp) Rank {reporter}]  failure detected by watchdog at work sequence id: "
        f"{seq} PG status: last enqueued work: {enqueued}, last completed work: {seq - 1}",
    ]
    paths = []
    for rank in sorted({reporter, *dumped}):
        lines = report if rank == reporter else []
        if rank in dumped:
            lines = [*lines, f"[rank{rank}]:[E1129 09:55:07.791121066 ProcessGroupNCCL.cpp:1849] [PG ID 0 PG GUID 0 "
                             f"Rank {rank}] Observed flight recorder dump signal from another rank via TCPStore."]
        path = tmp_path / f"torch_rank{rank}.log"
        path.write_text("\n".join(lines) + "\n")
        paths.append(str(path))
    return paths


def _lone_report_logs(tmp_path, lagging: str, snapshot: tuple[str, ...]) -> list[str]:
    """As seed 1230428's: rank 6 of a job of eight times out at SeqNum 20 (21 enqueued); rank 7's log names no line
    of the group, only the dump signal of the default one."""
    return _report_logs(tmp_path, 6, 20, 21, lagging, snapshot, dumped=(7,))


def test_a_lone_report_s_laggards_count_where_the_places_past_every_line_side_with_most(tmp_path):
    # Seed 1230428: rank 6's drafter ran one collective the others skipped; only rank 6's log names the group. Its
    # report says `[0, 1, 2, 3, 4, 5, 7] finished collective #20, but didn't join collective #21`. Place 6 is rank
    # 6, so places 0-5 are ranks 0-5; place 7 is some rank past 6, but it finished #20 with every placed rank but
    # the reporting one: left out, it swings no majority, and rank 6 alone ran one more.
    from ncclforensics.api import diff_paths

    _, diagnosis = diff_paths(_lone_report_logs(
        tmp_path, "[0, 1, 2, 3, 4, 5, 7] finished collective #20, but didn't join collective #21 (count from 1)",
        ("#20 finished ranks:", "  [0, 1, 2, 3, 4, 5, 7] finished _ALLGATHER_BASE", "#21 started ranks:",
         "  [6] started _ALLGATHER_BASE")))
    root = diagnosis.root
    assert root is not None and (root.outlier_ranks, root.kind) == ([6], "extra")
    assert root.reference_ranks == [0, 1, 2, 3, 4, 5] and root.seq_range[0] == 1
    # Place 7 behind with rank 1 while the other placed ranks ran on with rank 6: left out, it would make rank 1 a
    # lone outlier of what may be two ranks behind, so the report counts none of its ranks.
    _, diagnosis = diff_paths(_lone_report_logs(
        tmp_path, "[1, 7] finished collective #20, but didn't join collective #21 (count from 1)",
        ("#20 finished ranks:", "  [1, 7] finished _ALLGATHER_BASE", "#21 started ranks:",
         "  [0, 2, 3, 4, 5, 6] started _ALLGATHER_BASE")))
    assert diagnosis.root is None


def _report_of_rank_1(tmp_path, lagging: str, snapshot: tuple[str, ...]) -> list[str]:
    """As seed 1237817's: ranks 0, 1 and 3 of a job of four; rank 1 (place 1 of group 1) times out at SeqNum 10 (13
    enqueued); every log ends with the dump signal of the default group."""
    return _report_logs(tmp_path, 1, 10, 13, lagging, snapshot, dumped=(0, 1, 3))


def test_members_a_report_gives_by_place_alone_count_toward_the_majority_unnamed(tmp_path):
    # Seed 1237817: rank 1's drafter ran collectives the others skipped; only its log names group 1, at place 1, so
    # place 0 is rank 0 and places 2 and 3 are no global rank on record. Its report says `[0, 2, 3] finished
    # collective #10, but didn't join collective #11`: rank 0 against rank 1 is a tie, but three members stand at
    # #10 and rank 1 alone ran on. The two unplaced members weigh in and are named nowhere.
    from ncclforensics.api import diff_paths

    _, diagnosis = diff_paths(_report_of_rank_1(
        tmp_path, "[0, 2, 3] finished collective #10, but didn't join collective #11 (count from 1)",
        ("#10 finished ranks:", "  [0, 2, 3] finished _ALLGATHER_BASE", "#13 started ranks:",
         "  [1] started _ALLGATHER_BASE")))
    root = diagnosis.root
    assert root is not None and (root.outlier_ranks, root.reference_ranks, root.majority) == ([1], [0], True)
    assert root.seq_range[0] == 1 and root.seq_range[1] >= 10
    # An unplaced member among the laggards beside a placed one, the rest ahead with rank 1: the outliers could
    # not all be named, so the counts name none.
    _, diagnosis = diff_paths(_report_of_rank_1(
        tmp_path, "[0, 3] finished collective #10, but didn't join collective #11 (count from 1)",
        ("#10 finished ranks:", "  [0, 3] finished _ALLGATHER_BASE", "#13 started ranks:",
         "  [1, 2] started _ALLGATHER_BASE")))
    assert diagnosis.root is None
    # One unplaced member ahead with rank 1: two against two, no majority.
    _, diagnosis = diff_paths(_report_of_rank_1(
        tmp_path, "[0, 2] finished collective #10, but didn't join collective #11 (count from 1)",
        ("#10 finished ranks:", "  [0, 2] finished _ALLGATHER_BASE", "#13 started ranks:",
         "  [1, 3] started _ALLGATHER_BASE")))
    assert diagnosis.root is None or not diagnosis.root.majority


def test_a_rank_with_no_records_sides_with_those_whose_op_a_peer_s_report_gives_it_at_one_seq():
    # Ranks 0, 1, 2, 4 and 5 left NCCL logs of comm 0xa: rank 1 issued an AllGather before an AllReduce at seqs 3
    # and 4, where the others issued them the other way round. Rank 3 left no file; a peer's desync report gives
    # its last collective, #4, an AllReduce, as rank 1's (`#4 started ranks: [1, 3] started ALLREDUCE`): it
    # departed by seq 4 too, so the root names it beside rank 1.
    from ncclforensics.align.divergence import analyze_comm
    from ncclforensics.align.enqueued_past_records import reported_ops_past_cuts

    ops = {r: ["AllReduce", "AllReduce", "AllReduce", "AllGather"] for r in (0, 2, 4, 5)}
    ops[1] = ["AllReduce", "AllReduce", "AllGather", "AllReduce"]
    rows = [Evidence(path=f"nccl{r}.log", format=SourceFormat.NCCL_LOG, collectives=collectives_to_frame([
        CollectiveEvent(loc=Location(f"nccl{r}.log", seq), comm="0xa", seq=seq, op=op, rank=r, count=2048,
                        dtype="bfloat16", redop="sum", root=0) for seq, op in enumerate(seq_ops, start=1)]))
        for r, seq_ops in ops.items()]
    streams = build_streams(rows)
    streams.expected_members["0xa"] = list(range(6))
    progress = [ProgressReport(loc=Location(f"torch_rank{r}.log", 3), rank=r, comm="0", last_enqueued=4,
                               last_completed=2) for r in ops]
    report = WatchdogEvent(loc=Location("torch_rank0.log", 5), kind=WatchdogKind.DESYNC_REPORT.value, rank=0,
                           comm="0", seq=4, lagging=(((0, 1, 2, 3, 4, 5), 4, False),),
                           latest=(((1, 3), 4, False, "AllReduce"), ((0, 2, 4, 5), 4, False, "AllGather")),
                           group_ranks=tuple(range(6)))
    marks = enqueue_marks(progress, [_timeout("torch_rank0.log", 2, 0, 3, "AllReduce"), report])
    counted = counted_past_cuts(streams, marks)
    assert counted == {"0xa": {3: 4}}
    reported = reported_ops_past_cuts(streams, marks, counted)
    assert reported == {"0xa": {3: (4, "AllReduce")}}
    root = analyze_comm(streams, "0xa", counted=counted["0xa"], reported=reported["0xa"]).root
    assert root is not None and root.outlier_ranks == [1, 3] and root.majority
    assert root.seq_range[0] <= 3 <= root.seq_range[1] and root.seq_range[1] <= 4
    # Without the report's op, rank 3's stream is blank and pairs with anything: rank 1 alone.
    alone = analyze_comm(streams, "0xa", counted=counted["0xa"]).root
    assert alone is not None and alone.outlier_ranks == [1]


def test_a_rank_cut_short_whose_count_ends_where_its_records_do_is_whole_there():
    # Six ranks of one comm; ranks 0 and 3 launched one all-reduce, the others two. Rank 0's NCCL log was cut just
    # after its first, but PyTorch counts it enqueueing 1, as its records hold: the cut hid nothing there, and it
    # is behind beside rank 3, not a rank of unknown length.
    from ncclforensics.align.diagnosis import diagnose

    def nccl(rank: int, n: int) -> Evidence:
        name = f"nccl_rank{rank}.log"
        events = [CollectiveEvent(loc=Location(name, seq), comm="0xw", seq=seq, op="AllReduce", rank=rank,
                                  count=2048, dtype="float32", redop="sum", root=0) for seq in range(1, n + 1)]
        return Evidence(path=name, format=SourceFormat.NCCL_LOG, collectives=collectives_to_frame(events),
                        cut=Location(name, n + 1) if rank == 0 else None)

    launched = {0: 1, 1: 2, 2: 2, 3: 1, 4: 2, 5: 2}
    logs = [nccl(r, n) for r, n in launched.items()]
    logs += [_log(f"torch_rank{r}.log", progress=(ProgressReport(loc=Location(f"torch_rank{r}.log", 3), rank=r,
                                                                 comm="0", last_enqueued=n, last_completed=1),))
             for r, n in launched.items()]
    root = diagnose(logs).root
    assert root.outlier_ranks == [0, 3] and root.unplaced_ranks == [] and root.seq_range[0] <= 2 <= root.seq_range[1]


def test_a_report_s_group_rank_past_the_lowest_members_on_record_is_no_global_rank():
    # Group "3" is global ranks 0 and 2; only rank 0 left lines about it (`[PG ID 2 PG GUID 3(dp) Rank 0]`). Its
    # report's `[1] finished collective #6, but didn't join collective #7` names the group's second member: some
    # rank above 0, not global rank 1 (a member of other groups only).
    progress = [ProgressReport(loc=Location("torch_rank0.log", 9), rank=0, comm="3", last_enqueued=7,
                               last_completed=6)]
    status = WatchdogEvent(loc=Location("torch_rank0.log", 9), kind="pg_status", rank=0, comm="3", seq=7,
                           group_rank=0)
    report = WatchdogEvent(loc=Location("torch_rank0.log", 3), kind=WatchdogKind.DESYNC_REPORT.value, rank=0,
                           comm="3", seq=7, op="AllReduce", lagging=(((1,), 6, False),),
                           latest=(((1,), 6, True, "AllReduce"), ((0,), 7, False, "AllReduce")), group_ranks=(0, 1))
    timeout = _timeout("torch_rank0.log", 2, 0, 7, "AllReduce", comm="3")
    assert enqueue_marks(progress, [timeout, report, status])["3"].launched == {0: 7}
    # A line of global rank 2 at place 1 in the group ties the report's `[1]` to it.
    placed = replace(status, loc=Location("torch_rank2.log", 4), rank=2, group_rank=1)
    assert enqueue_marks(progress, [timeout, report, status, placed])["3"].launched == {0: 7, 2: 6}
    # Ranks 0 and 1 both on record in the group are its places 0 and 1: the report's `[1]` is rank 1.
    second = replace(status, loc=Location("torch_rank1.log", 4), rank=1, group_rank=None)
    assert enqueue_marks(progress, [timeout, report, status, second])["3"].launched == {0: 7, 1: 6}


def _reorder_logs(tmp_path, snapshot: tuple[str, str]) -> list[str]:
    """Watchdog logs of ranks 1-3 (rank 0 left none), as seed 1188167's: at SeqNum 3 rank 2 waits in an all-gather
    and ranks 1 and 3 in an all-reduce; every report's snapshot gives #4 as `snapshot` (two lines of ranks)."""
    paths = []
    for rank in (1, 2, 3):
        op, numel = ("_ALLGATHER_BASE", 1000) if rank == 2 else ("ALLREDUCE", 1024)
        prefix = f"[rank{rank}]:[E1129 09:55:01.73{rank}906066 ProcessGroupNCCL.cpp"
        lines = [
            f"{prefix}:689] [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, "
            f"OpType={op}, NumelIn={numel}, NumelOut={numel}, Timeout(ms)=20000) ran for 20017 milliseconds before "
            "timing out.",
            f"{prefix}:2495] Rank {rank}",
            f"\t - [{rank}] Timeout at collective: {op}, #4",
            "\t - To our best knowledge, the lagging/dead/mismatched ranks that caused the desync are:",
            "\t   - [0, 1, 2, 3] joined but didn't finish collective #4 (count from 1)",
            "\t - Snapshot of ranks' latest states:",
            "\t   #4 started ranks:",
            *(f"\t     {line}" for line in snapshot),
            f"{prefix}:2303] [PG ID 0 PG GUID 0(default_pg) Rank {rank}]  failure detected by watchdog at work "
            "sequence id: 3 PG status: last enqueued work: 4, last completed work: 2",
        ]
        path = tmp_path / f"torch_rank{rank}.log"
        path.write_text("\n".join(lines) + "\n")
        paths.append(str(path))
    return paths


def test_a_rank_with_no_file_that_the_snapshot_sides_with_the_outliers_leaves_no_majority(tmp_path):
    # Seed 1188167: ranks 0 and 2 each issued lm_head's all-gather before the MoE all-reduce. Rank 2's record parts
    # it from ranks 1 and 3 at seq 3; rank 0 left no file, and the snapshot puts it beside rank 2 (`[0, 2] started
    # ALLREDUCE` at #4, `[1, 3] started _ALLGATHER_BASE`): two against two, every rank named, no majority.
    from ncclforensics.api import diff_paths

    _, diagnosis = diff_paths(_reorder_logs(tmp_path, ("[0, 2] started ALLREDUCE", "[1, 3] started _ALLGATHER_BASE")))
    root = diagnosis.root
    assert (root.outlier_ranks, root.reference_ranks, root.majority) == ([0, 1, 2, 3], [0, 1, 2, 3], False)
    assert root.seq_range == (1, 3)
    # The snapshot beside ranks 1 and 3: rank 2 alone departed, a majority.
    _, diagnosis = diff_paths(_reorder_logs(tmp_path, ("[2] started ALLREDUCE", "[0, 1, 3] started _ALLGATHER_BASE")))
    root = diagnosis.root
    assert (root.outlier_ranks, root.reference_ranks, root.majority) == ([2], [0, 1, 3], True)


def test_a_rank_with_no_file_is_sided_by_the_snapshot_or_may_break_the_majority():
    from ncclforensics.align.answers import DIFFERENT_OPS, RangeReason, Root
    from ncclforensics.align.notes import SnapshotSides
    from ncclforensics.align.snapshot_sides import with_snapshot_sides

    records = Root(comm="0", seq=1, seq_range=(1, 3), outlier_ranks=[2], reference_ranks=[1, 3, 4],
                   kind=DIFFERENT_OPS, size=1, pinned_by="signatures", reason=RangeReason.BEFORE_RECORDS,
                   majority=True, ops={}, shown=True, records_start=3)
    ops = {0: (4, "AllReduce"), 2: (4, "AllReduce"), 1: (4, "AllGather"), 3: (4, "AllGather"), 4: (4, "AllGather")}
    counts = {r: 4 for r in range(5)}
    # Five ranks: rank 0 joins rank 2's side, which stays a minority.
    root, said = with_snapshot_sides(records, counts, ops, {0})
    assert (root.outlier_ranks, root.reference_ranks, root.majority) == ([0, 2], [1, 3, 4], True)
    assert said == [SnapshotSides((0,), (), (0, 2), True)]
    # Four ranks (no rank 4): two against two.
    four = replace(records, reference_ranks=[1, 3])
    root, _ = with_snapshot_sides(four, {r: 4 for r in range(4)}, {r: ops[r] for r in range(4)}, {0})
    assert (root.outlier_ranks, root.majority) == ([0, 1, 2, 3], False)
    # Nothing sides rank 0 (the snapshot lacks it, or gives an op of neither side): it may still make it two against
    # two; beside three ranks of the reference, it cannot.
    for unsided in ({r: ops[r] for r in (1, 2, 3)}, {**ops, 0: (4, "Broadcast")}):
        root, said = with_snapshot_sides(four, {r: 4 for r in range(4)}, unsided, {0})
        assert (root.outlier_ranks, root.majority, said[0].either) == ([0, 1, 2, 3], False, (0,))
    assert with_snapshot_sides(records, counts, {r: ops[r] for r in (1, 2, 3, 4)}, {0}) == (records, [])
    # A rank with a file of its own, or one read otherwise (held back elsewhere), is not the snapshot's to side.
    assert with_snapshot_sides(four, {r: 4 for r in range(4)}, ops, set()) == (four, [])
    assert with_snapshot_sides(four, {r: 4 for r in range(4)}, ops, {0}, aside={0}) == (four, [])


def test_a_rank_with_no_file_at_one_side_s_own_place_in_the_snapshot_joins_that_side():
    # Seed 1301442, watchdog logs of ranks 0-4 of eight: rank 1 ran one more world collective (its seq 4 is issued
    # from another call site) and rank 2 skipped one. The snapshot puts rank 1 alone at `#5 started ALLREDUCE` and
    # the reference ranks 0, 3 and 4 at `#4 started ALLREDUCE`, with ranks 5-7, which left no file, beside them: the
    # two sides stand at places of their own, apart in number, and ranks 5-7 share the reference's. They were left
    # on either side, three beside the one outlier, and every rank was named with no majority.
    from ncclforensics.align.answers import DIFFERENT_OPS, RangeReason, Root
    from ncclforensics.align.notes import SnapshotSides
    from ncclforensics.align.snapshot_sides import with_snapshot_sides

    records = Root(comm="0", seq=1, seq_range=(1, 4), outlier_ranks=[1], reference_ranks=[0, 3, 4],
                   kind=DIFFERENT_OPS, size=1, pinned_by="call sites", reason=RangeReason.BEFORE_RECORDS,
                   majority=True, ops={}, shown=True, records_start=4)
    ops = {r: (4, "AllReduce") for r in (0, 3, 4, 5, 6, 7)} | {1: (5, "AllReduce"), 2: (3, "AllReduce")}
    counts = {r: number for r, (number, _) in ops.items()}
    root, said = with_snapshot_sides(records, counts, ops, {5, 6, 7}, aside={2})
    assert (root.outlier_ranks, root.reference_ranks, root.majority, said) == ([1], [0, 3, 4, 5, 6, 7], True, [])
    # A rank at the outliers' place joins them.
    root, said = with_snapshot_sides(records, counts, {**ops, 5: (5, "AllReduce")}, {5, 6, 7}, aside={2})
    assert (root.outlier_ranks, root.reference_ranks, root.majority) == ([1, 5], [0, 3, 4, 6, 7], True)
    assert said == [SnapshotSides((5,), (), (1, 5), True)]
    # A place of neither side, or sides not each at one place, side no one: three beside one outlier are half.
    for unsided in ({**ops, 5: (6, "AllReduce"), 6: (6, "AllReduce"), 7: (6, "AllReduce")},
                    {**ops, 3: (5, "AllReduce")}):
        root, said = with_snapshot_sides(records, counts, unsided, {5, 6, 7}, aside={2})
        assert (root.majority, said[0].either) == (False, (5, 6, 7))


def test_an_unnamed_timeout_takes_the_one_group_the_timeout_lines_name_and_no_other_lines_group():
    # Rank 1's timeout line names no group; rank 0's names "tp", and a status line names "pp" (a group that did not
    # time out). The timeout rows and PyTorch's counts read the unnamed line alike, as tp's: counted_progress took
    # the group from any line, so "pp" beside "tp" left it unplaced while the rows put it in tp, and a status line
    # of "pp" alone put a timeout the rows call unnamed in pp, with pp's SeqNums pinning its wedge.
    from ncclforensics.align.watchdog import default_group

    def event(kind, rank, comm, seq):
        return WatchdogEvent(Location(f"torch_rank{rank}.log", 1), kind, rank=rank, comm=comm, seq=seq)

    unnamed = event("timeout", 1, None, 5)
    assert default_group([unnamed, event("timeout", 0, "tp", 5), event("pg_status", 2, "pp", 9)]) == "tp"
    assert default_group([unnamed, event("pg_status", 2, "pp", 9)]) is None
    assert default_group([unnamed, event("timeout", 0, "tp", 5), event("timeout", 2, "pp", 9)]) is None
