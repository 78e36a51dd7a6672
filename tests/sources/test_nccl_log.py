"""NCCL_DEBUG log parser: real 2.28.9 captures, public pastes (fixtures/public/INDEX.md) and constructed logs."""

from __future__ import annotations

import calendar
import codecs
import gzip
import resource
import time
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ncclforensics.model import COLLECTIVE_SCHEMA, Severity, SourceFormat
from ncclforensics.sources import InputFile, detect, parse_file
from ncclforensics.sources.base import head_text
from ncclforensics.sources.nccl_log import NcclLogSource, child_comm_hash
from fixture_paths import FIXTURES, REAL

PUBLIC = FIXTURES / "public" / "nccl_log"
CONSTRUCTED = FIXTURES / "constructed" / "nccl_log"


def parse(path: Path, name: str | None = None):
    return NcclLogSource().parse(InputFile(path, name or path.name))


def rows(evidence, *columns: str) -> list[tuple]:
    return evidence.collectives.select(columns).rows()


def by_pid(evidence, pid: int) -> pl.DataFrame:
    return evidence.collectives.filter(pl.col("pid") == pid)


def messages(evidence, severity: Severity) -> list[str]:
    return [str(p) for p in evidence.problems if p.severity is severity]


def real_logs(scenario: str) -> dict[int, Path]:
    """pid -> nccl.vm.<pid>.log of a real capture."""
    return {int(p.name.split(".")[2]): p for p in sorted((REAL / scenario).glob("nccl.*.log"))}


def utc(text: str) -> float:
    """Epoch seconds of `YYYY-MM-DD HH:MM:SS` taken as UTC."""
    return float(calendar.timegm(time.strptime(text, "%Y-%m-%d %H:%M:%S")))


# --- real captures (NCCL 2.28.9, fixtures/real/README.md) -----------------------------------------------------


def test_extra_op_4rank():
    logs = real_logs("extra-op-4rank")
    assert sorted(logs) == [442, 443, 444, 445]
    for rank, (pid, path) in enumerate(sorted(logs.items())):
        evidence = parse(path)
        frame = evidence.collectives
        assert evidence.format is SourceFormat.NCCL_LOG
        assert evidence.version == "2.28.9"
        assert evidence.problems == []
        assert frame.schema == pl.Schema(COLLECTIVE_SCHEMA)
        assert frame.height == (50 if rank == 0 else 49)
        assert frame["seq"].to_list() == list(range(1, frame.height + 1))
        assert set(frame["comm"]) == {"0x1715b7bd1b8fda9e"}
        assert set(frame["rank"]) == {rank} and set(frame["comm_rank"]) == {rank}
        assert set(frame["pid"]) == {pid} and set(frame["host"]) == {"vm"}
        assert set(frame["file"]) == {path.name}
        assert set(frame["comm_size"]) == {4}
        assert set(frame["state"]) == {"launched"}
        assert frame["time"].null_count() == frame.height  # INFO lines carry no timestamp by default
        big = frame.filter(pl.col("count") == 8192)
        assert big["seq"].to_list() == [42 if rank == 0 else 41]
        assert set(frame["count"]) == {4096, 8192}
        shapes = set(zip(frame["op"], frame["dtype"], frame["redop"], frame["root"]))
        assert shapes == {("AllReduce", "float32", "sum", 0)}
        assert evidence.ranks == [rank]
        assert evidence.comms == ["0x1715b7bd1b8fda9e"]
        [identity] = evidence.identities
        assert (identity.host, identity.pid, identity.rank) == ("vm", pid, rank)
        assert (identity.comm_rank, identity.comm_size) == (rank, 4)
        assert (identity.cuda_dev, identity.bus_id, identity.comm) == (0, "60", "0x1715b7bd1b8fda9e")


def test_extra_op_4rank_lines_and_events():
    logs = real_logs("extra-op-4rank")
    rank0 = parse(logs[442])
    assert rows(rank0, "line", "seq", "op", "count")[0] == (41, 1, "AllReduce", 4096)
    assert rank0.identities[0].loc.line == 39 and rank0.identities[0].comm_ptr == "0x2571a990"
    [warn] = rank0.watchdog
    assert (warn.kind, warn.rank, warn.loc.line) == ("async_error", 0, 98)
    assert warn.message == "socketProgress: Connection closed by remote peer"
    rank1 = parse(logs[443])
    [abort] = rank1.watchdog
    assert (abort.kind, abort.rank, abort.comm, abort.loc.line) == ("abort", 1, "0x1715b7bd1b8fda9e", 105)
    assert "Abort COMPLETE" in abort.message


def test_killed_rank():
    logs = real_logs("killed-rank")
    counts = {pid: parse(path).collectives.height for pid, path in logs.items()}
    assert counts == {710: 125, 711: 124, 712: 125, 713: 125}
    for rank, (_pid, path) in enumerate(sorted(logs.items())):
        evidence = parse(path)
        frame = evidence.collectives
        assert set(frame["comm"]) == {"0xd5dc471d2873616f"}
        assert set(frame["rank"]) == {rank}
        assert frame["seq"].to_list() == list(range(1, frame.height + 1))
        assert set(frame["count"]) == {512}
        assert evidence.problems == []
    assert parse(logs[711]).watchdog == []  # SIGKILLed: no last words
    assert [w.kind for w in parse(logs[713]).watchdog] == ["async_error"]


def test_healthy_1rank_opcount_stays_zero_but_seq_counts():
    [path] = real_logs("healthy-1rank").values()
    assert all(" opCount 0 " in line for line in path.read_text().splitlines() if "opCount" in line)
    evidence = parse(path)
    frame = evidence.collectives
    assert frame.height == 41
    assert frame["seq"].to_list() == list(range(1, 42))
    assert set(frame["comm_size"]) == {1}
    assert frame.group_by("op").len().sort("op").rows() == [("AllGather", 1), ("AllReduce", 40)]
    assert set(frame["rank"]) == {0}


def test_transient_skew_1600_per_rank():
    logs = real_logs("transient-skew")
    for rank, (_pid, path) in enumerate(sorted(logs.items())):
        frame = parse(path).collectives
        assert frame.height == 1600
        assert frame["seq"].max() == 1600
        assert set(frame["comm"]) == {"0x5eab805e14595f52"}
        assert set(frame["rank"]) == {rank}


def test_real_logs_are_detected_as_nccl_logs():
    for path in sorted(REAL.glob("*/nccl.*.log")):
        evidence = parse_file(InputFile(path, path.name))
        assert evidence.format is SourceFormat.NCCL_LOG, path
        assert not evidence.has_errors, path


# --- public pastes (fixtures/public/INDEX.md, nccl_log table) -------------------------------------------------


def test_public_rccl_429():
    evidence = parse(PUBLIC / "rccl-429-1.txt")
    assert rows(evidence, "host", "pid", "op", "count", "dtype", "comm_size", "seq") == [
        ("h03r3n06", 45006, "AllReduce", 9984512, "float32", 4, 1),
        ("h03r3n06", 45006, "AllReduce", 8149504, "float32", 4, 2),
    ]
    assert set(evidence.collectives["comm"]) == {"h03r3n06:45006:0x55bef0201370"}
    assert evidence.collectives["rank"].null_count() == 2
    assert evidence.collectives["comm_rank"].null_count() == 2
    [missing] = messages(evidence, Severity.WARNING)
    assert missing.startswith("rccl-429-1.txt:1: 2 COLL lines of comm 0x55bef0201370")
    assert "cannot be tied to a communicator hash" in missing
    assert not evidence.has_errors


def test_public_nccl_531_seven_local_ranks():
    evidence = parse(PUBLIC / "nccl-531-1.txt")
    frame = evidence.collectives
    assert frame["pid"].to_list() == [201800, 201799, 201802, 201811, 201805, 201808, 201798]
    assert set(frame["host"]) == {"n136-081-017"}
    assert set(zip(frame["op"], frame["count"], frame["dtype"], frame["comm_size"], frame["seq"])) == {
        ("AllGather", 512, "int8", 16, 1)
    }
    assert frame["comm"].n_unique() == 7  # each rank its own pointer, no INIT lines: nothing ties them together
    assert len(messages(evidence, Severity.WARNING)) == 7


def test_public_nccl_1193_ray_prefix():
    evidence = parse(PUBLIC / "nccl-1193-1.txt")
    assert rows(evidence, "pid", "count", "comm_size") == [
        (615, 7382228, 128), (22754, 7382228, 128), (619, 7066572, 128), (22754, 7066572, 128),
    ]
    worker = by_pid(evidence, 22754)
    assert worker["seq"].to_list() == [1, 2]
    assert set(worker["comm"]) == {"r24-02-22-23-29-0066-raycluster-lv52c-worker-l4-8-srrss:22754:0x7fb4b3e6ee80"}
    assert set(evidence.collectives["dtype"]) == {"float32"}


def test_public_torchtitan_1369_interleaved_tp_ranks():
    evidence = parse(PUBLIC / "torchtitan-1369-1.txt")
    rank0 = by_pid(evidence, 191369)
    rank1 = by_pid(evidence, 191370)
    assert rows_of(rank0) == [
        (2, 1, "ReduceScatter", 2097152), (3, 2, "AllGather", 2097152), (6, 3, "AllReduce", 1), (7, 4, "AllReduce", 1),
    ]
    assert rows_of(rank1) == [
        (1, 1, "AllGather", 2097152), (4, 2, "ReduceScatter", 2097152), (5, 3, "AllGather", 2097152),
    ]
    assert set(rank0["comm"]) == {"hopper01:191369:0x55e290bd32d0"}
    assert set(rank1["comm"]) == {"hopper01:191370:0x55fca23fc0f0"}
    assert set(evidence.collectives["comm_size"]) == {2}


def rows_of(frame: pl.DataFrame) -> list[tuple]:
    return frame.select("line", "seq", "op", "count").rows()


def test_public_nccl_1238_quoted_trailing_blanks_one_rank():
    evidence = parse(PUBLIC / "nccl-1238-1.txt")
    frame = evidence.collectives
    assert frame["seq"].to_list() == [1, 2, 3, 4]  # opCount is 0 on all four
    assert set(zip(frame["op"], frame["count"], frame["dtype"], frame["root"], frame["comm_size"])) == {
        ("AllReduce", 33554432, "float32", 0, 1)
    }
    assert set(frame["comm"]) == {"ip-172-31-54-74:30125:0x5631f0816b40"}
    assert not evidence.has_errors


def test_public_nccl_147_corrupted_interleaving():
    evidence = parse(PUBLIC / "nccl-147-1.txt")
    frame = evidence.collectives
    assert frame["line"].to_list() == [1, 2, 3, 5, 6, 7]  # line 4 is `Launch mode Parallel`
    # Line 1 holds two headers: the one right before the COLL body (pid 32629, dev 7) wins.
    assert rows(evidence, "line", "pid", "count", "dtype")[0] == (1, 32629, 53, "int64")
    assert by_pid(evidence, 32615).select("count", "dtype").rows() == [(25503912, "float16")]
    assert by_pid(evidence, 32617).select("seq", "count").rows() == [(1, 53), (2, 25503912)]
    headerless = frame.filter(pl.col("line") == 6)
    assert headerless.select("host", "pid", "comm", "seq", "count").rows() == [
        (None, None, "?:?:0x7f584405a260", 1, 25503912)
    ]
    assert set(frame["comm_size"]) == {8}
    warnings = messages(evidence, Severity.WARNING)
    assert any(w.startswith("nccl-147-1.txt:6: 1 COLL line of comm 0x7f584405a260 without a host:pid:tid header")
               and "the process is unknown" in w for w in warnings)
    assert not evidence.has_errors


def test_public_nccl_147_grep_prefix():
    evidence = parse(PUBLIC / "nccl-147-2.txt")
    assert rows(evidence, "pid", "op", "count", "dtype", "seq") == [
        (32615, "Broadcast", 25503912, "float16", 1),
        (32617, "Broadcast", 53, "int64", 1),
        (32619, "Broadcast", 53, "int64", 1),
        (32621, "Broadcast", 53, "int64", 1),
        (32623, "Broadcast", 53, "int64", 1),
    ]
    assert set(evidence.collectives["host"]) == {"learnfair062"}


@pytest.mark.parametrize("path", sorted(PUBLIC.glob("*.txt")), ids=lambda p: p.name)
def test_public_pastes_are_detected_and_parse_without_errors(path):
    evidence = parse_file(InputFile(path, path.name))
    assert evidence.format is SourceFormat.NCCL_LOG
    assert evidence.collectives.height > 0
    assert not evidence.has_errors


# --- constructed logs (fixtures/constructed/nccl_log/README.md) ------------------------------------------------


def test_sample_d_interleaved_processes():
    evidence = parse(CONSTRUCTED / "sample_d_interleaved.log")
    frame = evidence.collectives
    assert evidence.version == "2.29.7"
    assert evidence.problems == []
    assert set(frame["comm"]) == {"0x3f2a9c1b7d4e8a06"}
    ranks = {pid: rank for pid, rank in frame.select("pid", "rank").unique().rows()}
    assert ranks == {48211: 0, 48212: 1, 51007: 2, 51008: 3}
    assert (frame["rank"] == frame["comm_rank"]).all()
    third = frame.filter(pl.col("seq") == 3).sort("rank")
    assert third.select("rank", "op", "count", "line").rows() == [
        (0, "AllReduce", 1048576, 21), (1, "AllReduce", 1048576, 23), (2, "AllGather", 262144, 20),
        (3, "AllReduce", 1048576, 22),
    ]
    assert {(i.pid, i.rank, i.loc.line, i.cuda_dev, i.bus_id) for i in evidence.identities} == {
        (48211, 0, 9, 0, "18000"), (48212, 1, 8, 1, "2a000"), (51008, 3, 10, 1, "2a000"), (51007, 2, 11, 0, "18000"),
    }
    warn, abort = evidence.watchdog
    assert (warn.kind, warn.rank, warn.loc.line, warn.comm) == ("async_error", 3, 25, None)
    assert warn.message == "socketProgress: Connection closed by remote peer node-a<43127>"
    assert (abort.kind, abort.rank, abort.loc.line, abort.comm) == ("abort", 0, 27, "0x3f2a9c1b7d4e8a06")


def test_launcher_prefixes_and_timestamps():
    evidence = parse(CONSTRUCTED / "launchers.log")
    pid100 = by_pid(evidence, 100)
    assert pid100["line"].to_list() == list(range(4, 6)) + list(range(7, 15))
    assert pid100["seq"].to_list() == list(range(1, 11))
    assert pid100["count"].to_list() == list(range(1, 11))
    assert set(pid100["host"]) == {"node1"}
    # commId printed with and without leading zeros is one communicator.
    assert set(evidence.collectives["comm"]) == {"0x00000000000000ab"}
    assert by_pid(evidence, 101).select("line", "seq", "rank", "comm_rank").rows() == [(6, 1, 1, 1), (15, 2, 1, 1)]
    times = dict(zip(pid100["line"], pid100["time"]))
    assert times[13] == utc("2026-11-29 08:56:01")
    assert times[14] == pytest.approx(utc("2026-11-29 08:56:02") + 0.25)
    assert all(times[line] is None for line in range(4, 13) if line != 6)
    assert evidence.problems == []


def test_split_comm_hash_is_derived_from_parent():
    assert child_comm_hash(0x3F2A9C1B7D4E8A06, 1, 0) == 0x823C12E5E79AD0FE
    assert child_comm_hash(0x3F2A9C1B7D4E8A06, 2, 5) == 0x4D7A26A23331AA9D
    evidence = parse(CONSTRUCTED / "split_2.29.log")
    assert rows(evidence, "line", "comm", "comm_rank", "comm_size", "seq", "rank") == [
        (6, "0x3f2a9c1b7d4e8a06", 0, 4, 1, 0),
        (7, "0x823c12e5e79ad0fe", 0, 2, 1, 0),
        (8, "0x4d7a26a23331aa9d", 1, 3, 1, 0),  # the process's rank is its rank in the 4-rank world
        (9, "0x823c12e5e79ad0fe", 0, 2, 2, 0),
    ]
    assert rows(evidence, "dtype", "root")[2] == ("bfloat16", 2)
    assert len(evidence.identities) == 3  # the split's Init START and COMPLETE are one communicator
    assert evidence.problems == []


def test_split_before_2_26_has_no_hash():
    evidence = parse(CONSTRUCTED / "split_2.25.log")
    assert rows(evidence, "comm", "comm_rank", "rank") == [("h:9:0x2000", 0, 0)]
    [warning] = messages(evidence, Severity.WARNING)
    assert warning.startswith("split_2.25.log:4: ") and "2.26.2" in warning


def test_broken_lines_are_diagnosed_at_their_line():
    evidence = parse(CONSTRUCTED / "broken.log")
    errors = messages(evidence, Severity.ERROR)
    assert [e.split(": ", 1)[0] for e in errors] == ["broken.log:4", "broken.log:6"]
    assert errors[0].endswith(": count 'lots'") and errors[1].endswith(": opCount 'zz'")
    assert evidence.has_errors
    assert rows(evidence, "line", "host", "pid", "seq", "comm", "count", "opcount") == [
        (3, "host", 1, 1, "0x0000000000001234", 8, 0),
        (4, "host", 1, 2, "0x0000000000001234", None, 1),  # unreadable fields: unknown, the line keeps its seq
        (5, "host", 1, 3, "0x0000000000001234", 8, 1),
        (6, "host", 1, 4, "0x0000000000001234", 8, None),
        (7, "host", 2, 1, "host:2:0x20", 8, 0),
        (8, "host", 1, 5, "0x0000000000001234", 8, 2),  # headerless, but only pid 1 uses pointer 0x10
        (9, None, None, 1, "?:?:0x99", 8, 0),
    ]
    warnings = messages(evidence, Severity.WARNING)
    assert any(w.startswith("broken.log:11: last line is cut short") for w in warnings)
    assert any(w.startswith("broken.log:8: ") and "attributed to host:1" in w for w in warnings)
    assert any(w.startswith("broken.log:9: ") and "the process is unknown" in w for w in warnings)
    assert any(w.startswith("broken.log:7: 1 COLL line of comm 0x20 of host:2 cannot be tied") for w in warnings)


def test_two_coll_lines_run_together_are_an_error(tmp_path):
    good = (CONSTRUCTED / "launchers.log").read_text().splitlines()[3]
    path = tmp_path / "merged.log"
    path.write_text(f"{good}\n{good}{good}\n{good}\n")
    evidence = parse(path)
    assert evidence.collectives["line"].to_list() == [1, 3]
    [error] = messages(evidence, Severity.ERROR)
    assert error.startswith("merged.log:2: COLL lines run together: ")


def test_reused_pointer_warn_kinds_and_hung_abort():
    evidence = parse(CONSTRUCTED / "reused_pointer_2.30.log")
    assert evidence.version == "2.30.7"
    assert rows(evidence, "line", "comm", "comm_rank", "seq", "op", "dtype", "redop", "root") == [
        (3, "0x0000000000001111", 1, 1, "AllReduce", "int32", "max", 0),
        (4, "0x0000000000001111", 1, 2, "Reduce", "float8_e5m2", "7", 1),
        (7, "0x0000000000002222:p2p", 0, 1, "Send", "float32", "sum", 1),  # Send/Recv: a stream of their own
    ]
    assert [(i.comm, i.comm_rank, i.loc.line) for i in evidence.identities] == [
        ("0x0000000000001111", 1, 2), ("0x0000000000002222", 0, 6),
    ]
    kinds = [(w.loc.line, w.kind, w.comm) for w in evidence.watchdog]
    assert kinds == [
        (9, "async_error", None),
        (11, "abort", "0x0000000000002222"),
        (13, "timeout", None),
        (15, "nccl_warn", None),
        (16, "abort", "0x0000000000002222"),
    ]
    assert evidence.watchdog[0].message.startswith("NET/IB: Got completion from peer 10.0.0.2<34567>")
    assert "may have hung" in evidence.watchdog[-1].message


def test_send_and_recv_lines_get_a_stream_of_their_own(tmp_path):
    """A pipeline stage's Send/Recv sit between its collectives; counted with them, they would shift every later
    collective's seq on the ranks that do p2p against those that do not."""
    lines = ["h:1:1 [0] NCCL INFO ncclCommInitRankConfig comm 0x10 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 "
             "commId 0xabcdef0123456789 - Init COMPLETE"]
    for count, op in ((1, "AllReduce"), (2, "Send"), (3, "AllReduce"), (4, "Recv"), (5, "Send"), (6, "AllReduce")):
        lines.append(f"h:1:1 [0] NCCL INFO {op}: opCount {count} sendbuff 0x1 recvbuff 0x1 count {count} datatype 7 "
                     f"op 0 root 1 comm 0x10 [nranks=2] stream (nil)")
    path = tmp_path / "nccl.log"
    path.write_text("\n".join(lines) + "\n")
    assert rows(parse(path), "comm", "seq", "op", "count") == [
        ("0xabcdef0123456789", 1, "AllReduce", 1), ("0xabcdef0123456789:p2p", 1, "Send", 2),
        ("0xabcdef0123456789", 2, "AllReduce", 3), ("0xabcdef0123456789:p2p", 2, "Recv", 4),
        ("0xabcdef0123456789:p2p", 3, "Send", 5), ("0xabcdef0123456789", 3, "AllReduce", 6),
    ]


def test_one_process_driving_two_gpus():
    evidence = parse(CONSTRUCTED / "multi_gpu.log")
    assert rows(evidence, "line", "rank", "comm_rank", "seq") == [(3, 0, 0, 1), (4, 1, 1, 1), (5, 0, 0, 2)]
    assert sorted(i.rank for i in evidence.identities) == [0, 1]


def test_old_formats():
    evidence = parse(CONSTRUCTED / "old_2.18.log")
    assert evidence.version == "2.18.3"
    assert rows(evidence, "line", "op", "root", "comm_size", "comm", "seq") == [
        (4, "AllReduce", None, 2, "0x9a8b7c6d5e4f3021", 1),
        (5, "Broadcast", 1, 2, "0x9a8b7c6d5e4f3021", 2),
    ]
    [identity] = evidence.identities
    assert (identity.loc.line, identity.cuda_dev, identity.bus_id) == (3, 0, "1b000")
    [warn] = evidence.watchdog
    assert (warn.kind, warn.rank, warn.loc.line) == ("async_error", 0, 7)
    assert evidence.problems == []


# --- encodings, compression and hostile input -------------------------------------------------------------------


def same_collectives(a, b) -> bool:
    columns = [c for c in COLLECTIVE_SCHEMA if c != "file"]
    return a.collectives.select(columns).equals(b.collectives.select(columns))


def test_gzip_input(tmp_path):
    source = CONSTRUCTED / "sample_d_interleaved.log"
    packed = tmp_path / "sample.log.gz"
    packed.write_bytes(gzip.compress(source.read_bytes()))
    evidence = parse_file(InputFile(packed, "sample.log.gz"))
    assert evidence.format is SourceFormat.NCCL_LOG
    assert same_collectives(evidence, parse(source))
    assert set(evidence.collectives["file"]) == {"sample.log.gz"}
    assert len(evidence.watchdog) == 2


def test_crlf_and_lone_cr(tmp_path):
    source = CONSTRUCTED / "launchers.log"
    expected = parse(source)
    crlf = tmp_path / "crlf.log"
    crlf.write_bytes(source.read_bytes().replace(b"\n", b"\r\n"))
    assert same_collectives(parse(crlf), expected)
    cr = tmp_path / "cr.log"
    cr.write_bytes(source.read_bytes().replace(b"\n", b"\r"))
    assert same_collectives(parse(cr), expected)


def test_utf16_and_bad_utf8(tmp_path):
    source = CONSTRUCTED / "sample_d_interleaved.log"
    expected = parse(source)
    utf16 = tmp_path / "utf16.log"
    utf16.write_bytes(codecs.BOM_UTF16_LE + source.read_text().encode("utf-16-le"))
    assert same_collectives(parse(utf16), expected)
    lines = source.read_bytes().split(b"\n")
    lines[6] += b" \xff\xfe"  # line 7
    bad = tmp_path / "bad.log"
    bad.write_bytes(b"\n".join(lines))
    evidence = parse(bad)
    assert same_collectives(evidence, expected)
    assert messages(evidence, Severity.WARNING) == ["bad.log:7: not valid UTF-8; undecodable bytes replaced"]


def test_empty_and_blank_files(tmp_path):
    for content in (b"", b"\n\n\n", b"\r\n"):
        path = tmp_path / "empty.log"
        path.write_bytes(content)
        evidence = parse(path)
        assert evidence.collectives.height == 0 and evidence.problems == []
        assert evidence.collectives.schema == pl.Schema(COLLECTIVE_SCHEMA)


def test_64_mib_line_is_skipped_with_bounded_memory(tmp_path):
    path = tmp_path / "huge.log"
    line = (CONSTRUCTED / "launchers.log").read_text().splitlines()[3]  # a COLL line of pid 100
    with open(path, "wb") as out:
        out.write(line.encode() + b"\n")
        out.write(b"x opCount " * (64 * 1024 * 1024 // 10) + b"\n")
        out.write(line.encode() + b"\n")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    evidence = parse(path)
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mib < 768
    assert evidence.collectives["line"].to_list() == [1, 3]
    assert evidence.collectives["seq"].to_list() == [1, 2]
    [warning] = messages(evidence, Severity.WARNING)[:1]
    assert warning.startswith("huge.log:2: line of 67108860 bytes is not NCCL debug output")


def test_many_bad_lines_are_summarised(tmp_path):
    path = tmp_path / "bad.log"
    path.write_text("h:1:1 [0] NCCL INFO AllReduce: opCount 1 sendbuff 0x1 junk\n" * 500)
    evidence = parse(path)
    errors = messages(evidence, Severity.ERROR)
    assert len(errors) == 51
    assert errors[0].startswith("bad.log:1: unrecognised COLL line")
    assert errors[-1] == "bad.log: 450 more unrecognised COLL lines not listed"


FRAGMENTS = [
    "h:1:2 [0] NCCL INFO ", "node-b:51008:51133 [1] misc/socket.cc:35 NCCL WARN ", "AllReduce: opCount ", "1f",
    " sendbuff 0x7f recvbuff (nil)", " count 8", " datatype 7", " op 0", " root 0", " comm 0x10", " [nranks=2]",
    " stream (nil)", "|", "\r", "\n", "\n\n", "[2026-01-01 00:00:00] ", "[9999-99-99 99:99:99.9] ", " - Init COMPLETE",
    "ncclCommInitRank comm 0x10 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1 ", "commId 0x1234 ",
    "ncclCommSplit comm 0x20 rank 0 nranks 1 cudaDev 0 nvmlDev 0 busId 1 parent 0x10 childCount 1 color 0 key 0 ",
    "comm 0x10 rank 0 nRanks 2 nNodes 1", " - Abort START",
    "comm 0x10 rank 0 nranks 2 cudaDev 0 busId 1 - Abort COMPLETE",
    "NCCL version 2.28.9+cuda13.0", "NCCL version 2.26.1", "ncclCommSetAsyncError: error comm 0x10 sets state 6",
    "99999999999999999999999", "\x00", "\xff", "é", " ", ":", "0x", "> ", "[rank0]:",
]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content=st.binary(max_size=2000))
def test_parse_never_raises_on_arbitrary_bytes(tmp_path, content):
    path = tmp_path / "fuzz.log"
    path.write_bytes(content)
    file = InputFile(path, "fuzz.log")
    for evidence in (parse_file(file), NcclLogSource().parse(InputFile(path, "fuzz.log"))):
        assert evidence.path == "fuzz.log"
        assert evidence.collectives.schema == pl.Schema(COLLECTIVE_SCHEMA)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pieces=st.lists(st.sampled_from(FRAGMENTS), max_size=60), encoding=st.sampled_from(["utf-8", "latin-1"]))
def test_parse_never_raises_on_near_nccl_text(tmp_path, pieces, encoding):
    path = tmp_path / "near.log"
    path.write_bytes("".join(pieces).encode(encoding, errors="replace"))
    evidence = NcclLogSource().parse(InputFile(path, "near.log"))
    frame = evidence.collectives
    assert frame.schema == pl.Schema(COLLECTIVE_SCHEMA)
    assert frame["seq"].null_count() == 0 and (frame["seq"] >= 1).all()
    assert frame["line"].is_sorted()
    assert all(p.loc.path == "near.log" for p in evidence.problems)


# --- sniffing --------------------------------------------------------------------------------------------------


def sniff(path: Path) -> float:
    head = InputFile(path, path.name).head()
    return NcclLogSource().sniff(head, head_text(head))


def test_sniff_scores_nccl_logs_and_not_others():
    assert sniff(real_logs("killed-rank")[710]) == pytest.approx(1.0)
    assert sniff(PUBLIC / "nccl-1193-1.txt") == pytest.approx(1.0)
    assert 0 < sniff(PUBLIC / "nccl-147-1.txt") < 1  # one headerless line
    assert sniff(REAL / "killed-rank" / "torch_rank0.log") == 0
    assert sniff(REAL / "killed-rank" / "ras_status_q0.txt") == 0
    assert NcclLogSource().sniff(b"", "") == 0


def test_sniff_is_proportional_to_nccl_lines(tmp_path):
    torch_line = (
        "[rank0]:[E1129 09:01:14.871017122 ProcessGroupNCCL.cpp:689] [Rank 0] Watchdog caught collective operation "
        "timeout"
    )
    nccl_line = "vm:442:442 [0] NCCL INFO NCCL version 2.28.9+cuda13.0"
    mostly_torch = tmp_path / "torch.log"
    mostly_torch.write_text("\n".join([torch_line] * 99 + [nccl_line]) + "\n")
    half = tmp_path / "half.log"
    half.write_text("\n".join([torch_line, nccl_line] * 50) + "\n")
    assert sniff(mostly_torch) == pytest.approx(0.01)
    assert sniff(half) == pytest.approx(0.5)


def test_detect_picks_this_source_for_constructed_logs():
    for path in sorted(CONSTRUCTED.glob("*.log")):
        source = detect(InputFile(path, path.name))
        assert source is not None and source.format is SourceFormat.NCCL_LOG, path


# --- values no real log has ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("big", [False, True], ids=["line-reader", "keyed-reader"])
def test_implausible_values_are_warnings_at_their_line(tmp_path, big):
    """An INIT line `rank 7 nranks 4`, a COLL line with `count 2**64` (read as unknown, without a word) and NCCL
    version 3.1.0 were accepted silently; each is now a warning at its file:line, and the value is read as
    before."""
    text = (REAL / "extra-op-4rank" / "nccl.vm.442.log").read_text()
    lines = text.splitlines()
    lines[2] = lines[2].replace("2.28.9", "3.1.0")
    lines[11] = lines[11].replace("rank 0 nranks 4", "rank 7 nranks 4")
    lines[40] = lines[40].replace("count 4096", f"count {2**64}")
    body = "\n".join(lines) + "\n"
    if big:  # past KEYED_MIN_BYTES: the keyed reader (1 MiB of blank lines after the end keeps the lines' numbers)
        body += "\n" * (1 << 20)
    path = tmp_path / "nccl.vm.442.log"
    path.write_text(body)
    evidence = parse(path)
    found = {p.loc.line: p.message for p in evidence.problems if p.severity is Severity.WARNING}
    assert "NCCL version 3.1.0 is not a 2.x release" in found[3]
    assert "rank 7 in a communicator of 4 ranks" in found[12]
    assert "count is beyond 2**63" in found[41]
    assert rows(evidence, "line", "count")[0] == (41, None)


UNREADABLE = {  # line 41 of nccl.vm.442.log (its first AllReduce) edited: (old, new, what the error names)
    "negative-count": ("count 4096", "count -4096", "count '-4096'"),
    "hex-count": ("count 4096", "count 0x1000", "count '0x1000'"),
    "opcount": ("opCount 0 ", "opCount -1 ", "opCount '-1'"),
    "datatype": ("datatype 7", "datatype float", "datatype 'float'"),
    "redop": (" op 0 ", " op -3 ", "op '-3'"),
    "root": ("root 0", "root 0x0", "root '0x0'"),
    "nranks": ("[nranks=4]", "[nranks=four]", "nranks 'four'"),
    "two": ("count 4096 datatype 7", "count ? datatype ?", "count '?', datatype '?'"),
}


@pytest.mark.parametrize("big", [False, True], ids=["line-reader", "keyed-reader"])
@pytest.mark.parametrize("case", sorted(UNREADABLE))
def test_a_coll_line_with_an_unreadable_field_keeps_its_place_in_the_sequence(tmp_path, case, big):
    """`count -4096` made the whole line unrecognised: dropped, it left a hole in the rank's seqs, and every later
    collective of that rank was compared with the wrong one of the others' (the root moved). The line is now a
    collective with that field unknown, and an error at its line names the field and what it held."""
    original = REAL / "extra-op-4rank" / "nccl.vm.442.log"
    old, new, what = UNREADABLE[case]
    lines = original.read_text().splitlines()
    assert old in lines[40]
    lines[40] = lines[40].replace(old, new)
    path = tmp_path / "nccl.vm.442.log"
    path.write_text("\n".join(lines) + "\n" + ("\n" * (1 << 20) if big else ""))
    evidence = parse(path)
    whole = parse(original).collectives
    frame = evidence.collectives
    assert frame.select("line", "seq").rows() == whole.select("line", "seq").rows()
    [error] = messages(evidence, Severity.ERROR)
    assert error.startswith("nccl.vm.442.log:41: COLL line with unreadable fields") and error.endswith(": " + what)
    field = {"negative-count": "count", "hex-count": "count", "opcount": "opcount", "datatype": "dtype",
             "redop": "redop", "root": "root", "nranks": "comm_size", "two": "count"}[case]
    if field == "opcount" and big:  # the keyed reader reads no opCount
        assert frame["opcount"].null_count() == frame.height
    elif field == "comm_size":  # no [nranks=] to read: the size of the INIT line
        assert frame.row(0, named=True)["comm_size"] == 4
    else:
        assert frame.row(0, named=True)[field] is None
    unchanged = [c for c in frame.columns if c not in (field, "dtype", "opcount")]
    assert frame.slice(1).select(unchanged).equals(whole.slice(1).select(unchanged))
