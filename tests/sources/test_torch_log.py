"""PyTorch ProcessGroupNCCL messages (sources/torch_log.py): real captures, public issue pastes, constructed lines."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ncclforensics.model import SourceFormat
from ncclforensics.sources import InputFile, detect, parse_file
from ncclforensics.sources.torch_log import TorchLogSource
from fixture_paths import FIXTURES, REAL, EXTRA_OP, KILLED

PUBLIC = FIXTURES / "public"
SOURCE = TorchLogSource()


def load(path: Path) -> InputFile:
    return InputFile(path=path, name=path.name)


def parse(path: Path):
    evidence = SOURCE.parse(load(path))
    assert evidence.problems == []
    return evidence


def parse_text(tmp_path: Path, text: str, name: str = "stderr.log"):
    path = tmp_path / name
    path.write_text(text)
    return SOURCE.parse(load(path))


def of_kind(evidence, kind: str) -> list:
    return [w for w in evidence.watchdog if w.kind == kind]


def work(event) -> tuple:
    return event.rank, event.seq, event.op, event.numel_in, event.numel_out, event.timeout_ms, event.ran_ms


# --- real captures ----------------------------------------------------------------------------------------------------


def test_extra_op_rank0_timeout_desync_and_status():
    evidence = parse(EXTRA_OP / "torch_rank0.log")
    assert evidence.format is SourceFormat.TORCH_LOG and evidence.ranks == [0]
    [timeout] = of_kind(evidence, "timeout")
    assert work(timeout) == (0, 50, "AllReduce", 4096, 4096, 30000, 30002)
    assert str(timeout.loc) == "torch_rank0.log:2"
    assert timeout.comm == "0"  # from the `failure detected ... sequence id: 50` line of the same rank
    [desync] = of_kind(evidence, "desync_report")
    assert (desync.rank, desync.seq, desync.op, desync.ranks) == (0, 50, "AllReduce", (1, 2, 3))
    assert desync.loc.line == 3  # the `Rank 0` line that opens the report
    assert "[1, 2, 3] finished collective #49, but didn't join collective #50" in desync.message
    assert "#50 started: [0] ALLREDUCE" in desync.message
    # (the snapshot: each rank's last collective, numbered as the laggards are, and whether it finished)
    assert desync.latest == (((1, 2, 3), 49, True, "AllReduce"), ((0,), 50, False, "AllReduce"))
    [status] = of_kind(evidence, "pg_status")
    assert (status.rank, status.comm, status.seq, status.last_enqueued, status.last_completed) == (0, "0", 50, 50, 49)
    assert [(p.comm, p.rank, p.last_enqueued, p.last_started, p.last_completed) for p in evidence.progress] == [
        ("0", 0, 50, None, 49)]
    [stack] = of_kind(evidence, "stack_trace")
    assert "worker capture/probe.py:85" in stack.message
    assert [w.kind for w in evidence.watchdog] == [
        "timeout", "desync_report", "pg_status", "stack_trace", "dump_signal_sent", "dump_signal", "dump"]


@pytest.mark.parametrize("rank", [1, 2, 3])
def test_extra_op_other_ranks_got_the_dump_signal(rank):
    evidence = parse(EXTRA_OP / f"torch_rank{rank}.log")
    assert evidence.ranks == [rank]
    observed, received = of_kind(evidence, "dump_signal")
    assert observed.message == "Observed flight recorder dump signal from another rank"
    assert (received.ranks, received.last_enqueued, received.last_completed) == ((0,), 49, 49)
    assert [(p.comm, p.last_enqueued, p.last_completed) for p in evidence.progress] == [("0", 49, 49)]
    assert of_kind(evidence, "timeout") == []


def test_killed_rank_async_error_names_the_remote_failure():
    evidence = parse(KILLED / "torch_rank0.log")
    assert evidence.version == "2.28.9"
    [error] = of_kind(evidence, "async_error")
    assert work(error)[:6] == (0, 123, "AllReduce", 512, 512, 15000)
    assert error.message.startswith("NCCL error: remote process exited or there was a network error")
    assert "socketProgress: Connection closed by remote peer" in error.message
    [terminated] = of_kind(evidence, "watchdog_terminated")  # and its echo in `what():` is the same event
    assert terminated.loc.line == 29
    assert [(p.last_enqueued, p.last_completed) for p in evidence.progress] == [(125, 122)]
    assert {w.kind for w in evidence.watchdog} >= {"ops_failed", "process_down", "pg_status", "dump"}


def test_a_status_line_gives_the_rank_s_place_in_its_group():
    # `[rank7]: ... [PG ID 1 PG GUID 2(tp) Rank 3] failure detected ...`: global rank 7 is the fourth of its TP group,
    # which is what ties a desync report's group ranks to global ones.
    evidence = parse(REAL / "serving-tp-in-dp-8rank" / "torch_rank7.log")
    statuses = {(w.comm, w.rank, w.group_rank) for w in of_kind(evidence, "pg_status")}
    assert ("2", 7, 3) in statuses


def test_killed_rank_desync_report_names_the_dead_rank():
    evidence = parse(KILLED / "torch_rank3.log")
    [desync] = of_kind(evidence, "desync_report")
    assert (desync.rank, desync.seq, desync.ranks) == (3, 125, (1,))
    assert "[1] joined but didn't finish collective #122" in desync.message
    [timeout] = of_kind(evidence, "timeout")
    assert work(timeout) == (3, 125, "AllReduce", 512, 512, 15000, 15022)


def test_quiet_logs_have_no_events():
    for path in (REAL / "healthy-1rank" / "torch_rank0.log", KILLED / "torch_rank1.log"):
        evidence = parse(path)
        assert evidence.watchdog == [] and evidence.progress == []


def every_torch_file():
    return sorted(REAL.glob("*/torch_rank*.log")) + sorted((PUBLIC / "torch_watchdog").glob("*")) + sorted(
        (PUBLIC / "desync_report").glob("*"))


@pytest.mark.parametrize("path", every_torch_file(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_torch_file_is_detected_and_reads_cleanly(path):
    file = InputFile(path=path, name=str(path))
    assert isinstance(detect(file), TorchLogSource)
    evidence = parse_file(file)
    assert evidence.format is SourceFormat.TORCH_LOG and evidence.problems == []


# --- public pastes (facts from tests/fixtures/public/INDEX.md) ------------------------------------------------------


def test_basicsr_three_ranks_time_out_out_of_order():
    evidence = parse(PUBLIC / "torch_watchdog" / "BasicSR-737-1.txt")
    assert [work(t) for t in of_kind(evidence, "timeout")] == [
        (1, 808, "AllReduce", 9801523, 9801523, 600000, 600020),
        (0, 808, "AllReduce", 9801523, 9801523, 600000, 600030),
        (2, 808, "AllReduce", 9801523, 9801523, 600000, 600061),
    ]
    statuses = of_kind(evidence, "pg_status")
    assert [(s.rank, s.comm, s.seq, s.last_enqueued, s.last_completed) for s in statuses] == [
        (1, "0", 808, 811, 807), (0, "0", 808, 811, 807)]
    assert [(p.rank, p.comm, p.last_enqueued, p.last_completed) for p in evidence.progress] == [
        (1, "0", 811, 807), (0, "0", 811, 807)]


def test_pytorch_20630_same_seq_different_op():
    evidence = parse(PUBLIC / "torch_watchdog" / "pytorch-20630-1.txt")
    assert [work(t) for t in of_kind(evidence, "timeout")] == [
        (2, 4084, "AllReduce", 4821568, 4821568, 600000, 600077),
        (1, 4084, "AllReduce", 4821568, 4821568, 600000, 600095),
        (3, 4084, "Broadcast", 56623104, 56623104, 600000, 600059),
    ]
    [status] = of_kind(evidence, "pg_status")
    assert (status.rank, status.comm, status.seq, status.last_enqueued, status.last_completed) == (
        3, "0", 4084, 4084, 4083)
    [identity] = evidence.identities
    assert (identity.comm_ptr, identity.comm_rank, identity.comm_size, identity.cuda_dev, identity.bus_id) == (
        "0x12fd4c240", 3, 4, 3, "70")
    assert (identity.host, identity.pid, identity.rank) == ("dlciwpwqw7kd1h3y-master-0", 301, None)
    [abort] = of_kind(evidence, "abort")  # NCCL's Abort COMPLETE line: no global rank in it
    assert (abort.loc.line, abort.rank) == (5, None) and "0x12fd4c240" in abort.message
    assert [w.rank for w in of_kind(evidence, "ops_failed")] == [3]


def test_accelerate_oldest_format_inside_a_traceback():
    evidence = parse(PUBLIC / "torch_watchdog" / "accelerate-1209-1.txt")
    timeouts = of_kind(evidence, "timeout")
    assert [work(t) for t in timeouts] == [
        (3, 1, "AllGather", None, None, 1800000, 1808213),
        (2, 1, "AllGather", None, None, 1800000, 1808127),  # inside the RuntimeError
        (1, 1, "AllGather", None, None, 1800000, 1808221),
    ]
    assert [t.loc.line for t in timeouts] == [7, 9, 10]  # line 7 is indented
    [abort] = of_kind(evidence, "abort")
    assert (abort.rank, abort.loc.line) == (2, 9)


def test_diffusers_blocking_wait():
    evidence = parse(PUBLIC / "torch_watchdog" / "diffusers-12422-1.txt")
    assert [work(t) for t in of_kind(evidence, "timeout")] == [
        (rank, 2521, "AllReduce", 160672064, 160672064, 600000, 600000) for rank in (1, 7, 5)]
    assert [work(t) for t in of_kind(evidence, "blocking_wait_timeout")] == [
        (rank, 2521, "AllReduce", 160672064, 160672064, 600000, None) for rank in (1, 7)]


def test_failed_desync_report_invents_no_culprits():
    evidence = parse(PUBLIC / "desync_report" / "pytorch-109611-1.txt")
    assert of_kind(evidence, "desync_report") == []
    [failed] = evidence.watchdog
    assert failed.kind == "desync_report_unavailable"
    assert (failed.rank, failed.seq, failed.op, failed.ranks) == (0, 0, "Recv", ())
    # The hard wraps (`ASS`/`ERT`, `:2`/`44`) are joined back.
    assert 'INTERNAL ASSERT FAILED at "/data/users/whc/pytorch/torch/csrc/distributed/c10d/TraceUtils.h":244' in \
        failed.message
    assert "must be kEventStart" in failed.message


# --- constructed lines (built from the format strings in nccl_formats.md 5.2 and peers_and_vllm.md 2.1) ----------


INTERLEAVED = """\
[default0]:[rank0]:[E1129 08:55:30.548704750 ProcessGroupNCCL.cpp:689] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=_REDUCE_SCATTER_BASE, NumelIn=64, NumelOut=16, Timeout(ms)=1000) ran for 1003 milliseconds before timing out.
[default1]:[rank1]:[E1129 08:55:30.548704751 ProcessGroupNCCL.cpp:689] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=6, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=1000) ran for 1001 milliseconds before timing out.
[default0]:[rank0]:[E1129 08:55:30.560159183 ProcessGroupNCCL.cpp:2495] Rank 0
[default0]:	 - [0] Timeout at collective: _REDUCE_SCATTER_BASE, #7
[default1]:[rank1]:[E1129 08:55:30.560159184 ProcessGroupNCCL.cpp:2495] Rank 1
	 - [1] Timeout at collective: ALLREDUCE, #6
	 - To our best knowledge, ranks [2, 3] are the lagging ranks that caused this timeout. They never joined any collectives
[rank1]:[E1129 08:55:31.000000000 ProcessGroupNCCL.cpp:2303] [PG ID 1 PG GUID tp0(tensor_parallel) Rank 0]  failure detected by watchdog at work sequence id: 6 PG status: last enqueued work: 6, last completed work: 5
[rank0]:[E1129 08:55:31.000000001 ProcessGroupNCCL.cpp:2303] [PG ID 0 PG GUID 0 Rank 0]  failure detected by watchdog at work sequence id: 7 PG status: last enqueued work: 7, last completed work: -1
"""


def test_interleaved_ranks_are_told_apart(tmp_path):
    evidence = parse_text(tmp_path, INTERLEAVED)
    assert evidence.problems == [] and evidence.ranks == [0, 1]
    assert [work(t) for t in of_kind(evidence, "timeout")] == [
        (0, 7, "ReduceScatter", 64, 16, 1000, 1003), (1, 6, "AllReduce", 8, 8, 1000, 1001)]
    desync = of_kind(evidence, "desync_report")
    assert [(d.rank, d.seq, d.op, d.ranks, d.loc.line) for d in desync] == [
        (0, 7, "ReduceScatter", (), 3), (1, 6, "AllReduce", (2, 3), 5)]
    assert "never joined" in desync[1].message and desync[0].message == "the report names no lagging ranks"
    # [rankN]: is the global rank; the PG tag's `Rank 0` is the rank inside group tp0.
    assert [(p.comm, p.rank, p.last_enqueued, p.last_completed) for p in evidence.progress] == [
        ("tp0", 1, 6, 5), ("0", 0, 7, None)]


OLD_AND_RARE = """\
[E ProcessGroupNCCL.cpp:475] [Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=BROADCAST, TensorShape=[1024, 4], Timeout(ms)=60000) ran for 60071 milliseconds before timing out.
[E ProcessGroupNCCL.cpp:414] [Rank 2] found async exception when checking for NCCL errors: NCCL error: unhandled system error, NCCL version 2.10.3
ncclSystemError: System call (socket, malloc, munmap, etc) failed.
[E ProcessGroupNCCL.cpp:737] [Rank 2] Work WorkNCCL(SeqNum=9, OpType=BROADCAST, Timeout(ms)=60000) timed out in blocking wait (NCCL_BLOCKING_WAIT=1).
[E ProcessGroupNCCL.cpp:455] [Rank 2] NCCL watchdog thread terminated with exception: [Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=BROADCAST, TensorShape=[1024, 4], Timeout(ms)=60000) ran for 60071 milliseconds before timing out.
[E ProcessGroupNCCL.cpp:1537] [PG 3 (pipeline) Rank 2] Timeout at NCCL work: 9, last enqueued NCCL work: 10, last completed NCCL work: 8.
[rank2]:[F1129 09:00:00.000000000 ProcessGroupNCCL.cpp:1306] [PG ID 0 PG GUID 0(default_pg) Rank 2] Heartbeat monitor timed out! Process will be terminated after dumping debug info. workMetaList_.size()=3
[rank2]:[E1129 09:00:00.000000000 ProcessGroupNCCL.cpp:1555] Rank 2Failed to rerieve TORCH_NCCL_DESYNC_DEBUG report with unknown error.
[rank2]:[E1129 09:00:01.000000000 ProcessGroupNCCL.cpp:1200] [PG ID 0 PG GUID 0(default_pg) Rank 2] Stack trace of the failed collective not found, potentially because FlightRecorder is disabled. You can enable it by setting TORCH_NCCL_TRACE_BUFFER_SIZE to a non-zero value.
host-a:5001:5090 [2] NCCL INFO ncclCommInitRankConfig comm 0x55d1 rank 2 nranks 4 cudaDev 2 nvmlDev 2 busId 41000 commId 0x1715b7bd1b8fda9e - Init COMPLETE
[2026-11-29 09:00:02] host-a:5001:5091 [2] misc/socket.cc:72 NCCL WARN socketProgress: Connection closed by remote peer
"""


def test_older_and_rarer_messages(tmp_path):
    evidence = parse_text(tmp_path, OLD_AND_RARE)
    assert evidence.problems == [] and evidence.version == "2.10.3"
    [timeout] = of_kind(evidence, "timeout")  # the echo in the watchdog's exception is the same event
    assert work(timeout) == (2, 9, "Broadcast", None, None, 60000, 60071)
    [error] = of_kind(evidence, "async_error")
    assert error.seq is None and error.message == (
        "NCCL error: unhandled system error, NCCL version 2.10.3 / ncclSystemError: System call (socket, malloc, "
        "munmap, etc) failed.")
    [blocking] = of_kind(evidence, "blocking_wait_timeout")
    assert (blocking.rank, blocking.seq) == (2, 9)
    [terminated] = of_kind(evidence, "watchdog_terminated")
    assert (terminated.rank, terminated.seq, terminated.op) == (2, 9, "Broadcast")
    [status] = of_kind(evidence, "pg_status")
    assert (status.comm, status.seq, status.last_enqueued, status.last_completed) == ("3", 9, 10, 8)
    assert status.rank is None  # `Rank 2` of group 3 (pipeline) is not a global rank
    [heartbeat] = of_kind(evidence, "heartbeat_timeout")
    assert heartbeat.rank == 2 and heartbeat.message.endswith("workMetaList_.size()=3")
    [failed] = of_kind(evidence, "desync_report_unavailable")
    assert (failed.rank, failed.ranks, failed.seq) == (2, (), None)
    assert len(of_kind(evidence, "stack_trace_unavailable")) == 1
    [identity] = evidence.identities
    assert (identity.comm, identity.comm_ptr, identity.comm_rank, identity.comm_size, identity.host) == (
        "0x1715b7bd1b8fda9e", "0x55d1", 2, 4, "host-a")
    [warn] = of_kind(evidence, "nccl_warn")
    assert warn.message == "NCCL WARN socketProgress: Connection closed by remote peer"


def test_timeouts_get_the_group_of_their_status_line():
    folder = REAL / "subcomm-divergence"
    if not folder.exists():
        pytest.skip("capture not present")
    evidence = parse(folder / "torch_rank0.log")
    assert [(t.seq, t.comm) for t in of_kind(evidence, "timeout")] == [(6, "0"), (11, "1")]


def test_repeats_are_one_event_but_new_facts_are_kept(tmp_path):
    line = ("[rank0]:[E1129 08:55:30.5 ProcessGroupNCCL.cpp:689] [Rank 0] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=10) ran for 11 "
            "milliseconds before timing out.\n")
    echo = ("[rank0]:[E1129 08:55:40.5 ProcessGroupNCCL.cpp:2119] [PG ID 0 PG GUID 0(default_pg) Rank 0] Process "
            "group watchdog thread terminated with exception: [Rank 0] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=10) ran for 11 "
            "milliseconds before timing out.\n")
    evidence = parse_text(tmp_path, line + line + echo + "  what():  " + echo.split("]:", 1)[1])
    [timeout] = of_kind(evidence, "timeout")
    assert (timeout.loc.line, timeout.comm) == (1, "0")  # first place it was said; the group from its echo
    assert len(of_kind(evidence, "watchdog_terminated")) == 1


def test_sniff_prefers_nccl_logs_when_they_dominate():
    nccl = "host:1:2 [0] NCCL INFO AllReduce: opCount 1 sendbuff 0x1 recvbuff 0x2 count 8 datatype 7 op 0 root 0 " \
           "comm 0x3 [nranks=2] stream 0x4\n"
    torch = "[rank0]:[E1129 08:55:30.5 ProcessGroupNCCL.cpp:689] [Rank 0] Watchdog caught collective operation " \
            "timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, Timeout(ms)=10) ran for 11 milliseconds before timing out.\n"
    assert SOURCE.sniff(b"", torch) == pytest.approx(0.9)
    assert SOURCE.sniff(b"", torch + nccl * 50) < 0.61
    assert SOURCE.sniff(b"", "[rank3]:[W1129 08:54:59.698618775 Utils.hpp:137] Warning: deprecated\n") == 0.3
    assert SOURCE.sniff(b"", "hello\nworld\n") == 0.0
    assert SOURCE.sniff(b"\x00\x01binary", "\x00\x01binary") == 0.0


def test_long_lines_stay_linear(tmp_path):
    import time

    line = ("comm 0x1 rank 1 COMPLETE [Rank 1] WorkNCCL( [PG 0 Rank 1] last enqueued work: 1, " * 20000) + "\n"
    started = time.perf_counter()
    parse_text(tmp_path, line * 3 + "- [0] Timeout at collective: X, #1\n" + "[1] started X\n" * 1000)
    assert time.perf_counter() - started < 10  # quadratic regexes would take minutes here


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=2000))
def test_arbitrary_bytes_never_raise(tmp_path, data):
    path = tmp_path / "torch.log"
    path.write_bytes(data)
    parse_file(InputFile(path=path, name=str(path)))
    SOURCE.parse(InputFile(path=path, name=str(path)))


_PIECES = st.sampled_from([
    "[rank1]:", "[E1129 08:55:30.5 ProcessGroupNCCL.cpp:1] ", "[Rank 2] ", "[PG ID 0 PG GUID x(y) Rank 3] ",
    "Watchdog caught collective operation timeout: ", "WorkNCCL(SeqNum=1, OpType=ALLREDUCE, Timeout(ms)=5)",
    " ran for 99999999999999999999999 milliseconds before timing out", "\n", "\t - [0] Timeout at collective: X, #1",
    "\n\t - ", "[1, 2] joined but didn't finish collective #3", "#4 started ranks:", "Stack trace of the failed "
    "collective: \n#0 f from a.py:1", "Failed to retrieve NCCL_DESYNC_DEBUG report.", "last enqueued work: 1, "
    "last completed work: -2", "Received a dump signal due to a collective timeout from  rank ", "Rank 9\n",
    "comm 0x1 rank 1 nranks 2 cudaDev 0 busId 1 - Abort COMPLETE", "raised the following async exception: ",
    "Collective ", "(", ")", "NCCL communicator was aborted on rank 12345678901234567890.",
])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pieces=st.lists(_PIECES | st.text(max_size=10), max_size=30))
def test_shuffled_message_pieces_never_raise(tmp_path, pieces):
    evidence = parse_text(tmp_path, "".join(pieces))
    for event in evidence.watchdog:
        for value in (event.rank, event.seq, event.ran_ms, event.last_enqueued):
            assert value is None or -2**63 <= value < 2**63


def test_timeouts_of_several_groups_at_one_seq_take_the_group_line_that_follows_each(tmp_path):
    """A rank whose world group and TP group both time out at SeqNum 1 writes two timeout lines that name no
    group, each followed by its own `failure detected by watchdog` line: each timeout is of the group after it."""
    prefix = "[rank0]:[E1129 09:55:01.735106066 ProcessGroupNCCL.cpp"
    text = "\n".join([
        f"{prefix}:689] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, "
        "NumelIn=1, NumelOut=1, Timeout(ms)=20000) ran for 20017 milliseconds before timing out.",
        f"{prefix}:2303] [PG ID 0 PG GUID 0(default_pg) Rank 0]  failure detected by watchdog at work sequence id: 1 "
        "PG status: last enqueued work: 1, last completed work: 0",
        f"{prefix}:689] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, "
        "NumelIn=512, NumelOut=512, Timeout(ms)=20000) ran for 20017 milliseconds before timing out.",
        f"{prefix}:2303] [PG ID 1 PG GUID 1(tp) Rank 0]  failure detected by watchdog at work sequence id: 1 "
        "PG status: last enqueued work: 3, last completed work: 0",
    ]) + "\n"
    evidence = parse_text(tmp_path, text, "torch_rank0.log")
    timeouts = sorted(of_kind(evidence, "timeout"), key=lambda e: e.loc.line)
    groups = [e.comm for e in sorted(of_kind(evidence, "pg_status"), key=lambda e: e.loc.line)]
    assert [e.numel_in for e in timeouts] == [1, 512]
    assert [e.comm for e in timeouts] == groups and len(set(groups)) == 2


# Seed 350022: rank 0's world group (PG 0) times out at SeqNum 3 and its desync report, counting from 1, says #4; its
# TP group (PG 1) then times out at SeqNum 4. The report is the world's, whose watchdog printed it after its timeout,
# though its number is the TP group's failed seq.
TWO_GROUPS = """\
[rank0]:[E1129 09:55:01.732406066 ProcessGroupNCCL.cpp:689] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=20000) ran for 20016 milliseconds before timing out.
[rank0]:[E1129 09:55:01.733406066 ProcessGroupNCCL.cpp:2495] Rank 0
\t - [0] Timeout at collective: ALLREDUCE, #4
\t - To our best knowledge, the lagging/dead/mismatched ranks that caused the desync are:
\t     [3] finished collective #2, but didn't join collective #3 (count from 1)
[rank0]:[E1129 09:55:01.733506066 ProcessGroupNCCL.cpp:2303] [PG ID 0 PG GUID 0(default_pg) Rank 0]  failure detected by watchdog at work sequence id: 3 PG status: last enqueued work: 4, last completed work: 2
[rank0]:[E1129 09:55:01.732406066 ProcessGroupNCCL.cpp:689] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4, OpType=ALLREDUCE, NumelIn=512, NumelOut=512, Timeout(ms)=20000) ran for 20016 milliseconds before timing out.
[rank0]:[E1129 09:55:01.733506066 ProcessGroupNCCL.cpp:2303] [PG ID 1 PG GUID 1 Rank 0]  failure detected by watchdog at work sequence id: 4 PG status: last enqueued work: 6, last completed work: 3
"""


def test_a_desync_report_is_of_the_group_whose_timeout_it_follows(tmp_path):
    evidence = parse_text(tmp_path, TWO_GROUPS)
    assert [(t.seq, t.comm) for t in of_kind(evidence, "timeout")] == [(3, "0"), (4, "1")]
    [desync] = of_kind(evidence, "desync_report")
    assert (desync.seq, desync.comm) == (4, "0")
