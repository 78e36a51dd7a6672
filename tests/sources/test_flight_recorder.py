"""Flight Recorder dumps (sources/flight_recorder.py): pickle and JSON, real and constructed, hostile and broken."""

from __future__ import annotations

import gzip
import importlib.util
import io
import json
import os
import pickle
import time
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ncclforensics.model import Location, Severity, SourceFormat
from ncclforensics.sources import InputFile, detect, parse_file
from ncclforensics.sources.flight_recorder import FlightRecorderSource, parse_ranks, rank_from_name
from fixture_paths import FIXTURES, REAL, EXTRA_OP, KILLED, HEALTHY

CONSTRUCTED = FIXTURES / "constructed" / "flight_recorder"
SOURCE = FlightRecorderSource()


def _generator():
    spec = importlib.util.spec_from_file_location("make_fr_fixtures", CONSTRUCTED / "make_fixtures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = _generator()


def load(path: Path, name: str | None = None) -> InputFile:
    return InputFile(path=path, name=name or path.name)


def parse(path: Path, name: str | None = None):
    return SOURCE.parse(load(path, name))


def errors(evidence) -> list[str]:
    return [p.message for p in evidence.problems if p.severity is Severity.ERROR]


def warnings(evidence) -> list[str]:
    return [p.message for p in evidence.problems if p.severity is Severity.WARNING]


def column(evidence, name: str) -> list:
    return evidence.collectives.get_column(name).to_list()


# --- real dumps: extra-op-4rank ---------------------------------------------------------------------------------------


def test_extra_op_rank0_is_the_wedged_rank():
    evidence = parse(EXTRA_OP / "fr_rank0")
    assert evidence.problems == []
    assert evidence.format is SourceFormat.FLIGHT_RECORDER and evidence.version == "2.10"
    frame = evidence.collectives
    assert frame.height == 50 and evidence.record_count == 50
    assert column(evidence, "seq") == list(range(1, 51))
    assert column(evidence, "record") == list(range(50))
    assert set(column(evidence, "comm")) == {"0"} and set(column(evidence, "rank")) == {0}
    assert set(column(evidence, "comm_rank")) == {0} and set(column(evidence, "comm_size")) == {4}
    assert set(column(evidence, "op")) == {"AllReduce"} and set(column(evidence, "dtype")) == {"float32"}
    assert column(evidence, "line") == [None] * 50
    last = frame.row(49, named=True)
    assert (last["seq"], last["state"]) == (50, "started")
    assert column(evidence, "state")[:49] == ["completed"] * 49
    [progress] = evidence.progress
    assert (progress.comm, progress.rank) == ("0", 0)
    assert (progress.last_enqueued, progress.last_started, progress.last_completed) == (50, 50, 49)
    assert str(progress.loc) == "fr_rank0#pg_status[0]"
    [info] = evidence.comm_infos
    assert (info.comm, info.name, info.desc, info.ranks, info.size) == ("0", "0", "default_pg", (0, 1, 2, 3), 4)
    assert evidence.ranks == [0]


def test_extra_op_call_sites_tell_the_code_paths_apart():
    rows = {row["seq"]: row for row in parse(EXTRA_OP / "fr_rank0").collectives.iter_rows(named=True)}
    assert rows[25]["callsite"] == "capture/probe.py:91"  # the extra op of step 5
    assert (rows[42]["count"], rows[42]["callsite"]) == (8192, "capture/probe.py:94")  # step 9's big AllReduce
    others = [row for seq, row in rows.items() if seq not in (25, 42)]
    assert {row["callsite"] for row in others} == {"capture/probe.py:85"}
    assert {row["count"] for row in others} == {4096}


def test_extra_op_locations_cite_the_entry():
    frame = parse(EXTRA_OP / "fr_rank0").collectives
    row = frame.filter(pl.col("seq") == 25).row(0, named=True)
    assert str(Location(row["file"], row["line"], row["record"])) == "fr_rank0#entries[24]"


def test_extra_op_time_is_seconds_since_epoch():
    frame = parse(EXTRA_OP / "fr_rank0").collectives
    assert frame.get_column("time")[0] == pytest.approx(1795942499.244720350)


@pytest.mark.parametrize("rank", [1, 2, 3])
def test_extra_op_other_ranks_stop_at_49(rank):
    evidence = parse(EXTRA_OP / f"fr_rank{rank}")
    assert evidence.problems == [] and evidence.ranks == [rank]
    assert column(evidence, "seq") == list(range(1, 50))
    assert set(column(evidence, "state")) == {"completed"}
    assert set(column(evidence, "comm_rank")) == {rank}
    [progress] = evidence.progress
    assert (progress.last_enqueued, progress.last_completed) == (49, 49)


# --- real dumps: killed-rank, healthy-1rank and every other capture ---------------------------------------------------


def test_killed_rank_has_no_dump_from_rank_1():
    assert sorted(p.name for p in KILLED.glob("fr_*")) == ["fr_rank0", "fr_rank2", "fr_rank3"]
    progress = {rank: parse(KILLED / f"fr_rank{rank}").progress[0] for rank in (0, 2, 3)}
    assert (progress[0].last_enqueued, progress[0].last_started, progress[0].last_completed) == (125, 123, 122)
    assert (progress[3].last_enqueued, progress[3].last_completed) == (125, 124)
    for rank in (0, 2, 3):
        evidence = parse(KILLED / f"fr_rank{rank}")
        assert evidence.problems == [] and evidence.ranks == [rank] and evidence.collectives.height == 125


def test_healthy_json_and_pickle_agree():
    from_pickle = parse(HEALTHY / "fr_rank0", "dump")
    from_json = parse(HEALTHY / "fr_json_rank0.json", "dump")
    assert from_pickle.problems == [] and from_json.problems == []
    assert from_pickle.collectives.height == 41
    # JSON dumps never carry stack frames, so call sites are only in the pickle.
    assert from_json.collectives.drop("callsite", "stack").equals(from_pickle.collectives.drop("callsite", "stack"))
    assert set(column(from_json, "callsite")) == {None}
    assert column(from_pickle, "callsite") == ["capture/probe.py:68"] * 40 + ["capture/probe.py:70"]
    assert from_json.version == from_pickle.version == "2.10"
    assert from_json.progress == from_pickle.progress
    assert from_json.comm_infos == from_pickle.comm_infos
    last = from_pickle.collectives.row(40, named=True)
    assert (last["op"], last["count"]) == ("AllGather", 4096)  # input numel: the per-rank send count


def test_healthy_rank_comes_from_the_one_rank_group():
    # pg_config ["0"] = "[0]": the dump itself says it is rank 0, whatever the file is called.
    evidence = parse(HEALTHY / "fr_rank0", "renamed_dump")
    assert evidence.ranks == [0] and evidence.problems == []


def every_real_dump():
    return sorted(REAL.glob("*/fr_*"))


@pytest.mark.parametrize("path", every_real_dump(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_real_dump_reads_cleanly_and_is_detected(path):
    file = load(path, str(path))
    assert isinstance(detect(file), FlightRecorderSource)
    evidence = parse_file(file)
    assert evidence.problems == []
    assert evidence.ranks == [rank_from_name(path.name)]
    assert evidence.collectives.height > 0 and evidence.version == "2.10"
    for info in evidence.comm_infos:
        assert evidence.ranks[0] in info.ranks
    assert {p.comm for p in evidence.progress} <= {c.comm for c in evidence.comm_infos}


def test_sub_communicators_get_their_own_comm_and_place():
    folder = REAL / "subcomm-divergence"
    if not folder.exists():
        pytest.skip("capture not present")
    rank2 = parse(folder / "fr_rank2")
    places = {(r["comm"], r["comm_rank"], r["comm_size"]) for r in rank2.collectives.iter_rows(named=True)}
    ranks = {c.comm: c.ranks for c in rank2.comm_infos}
    for comm, comm_rank, comm_size in places:
        assert ranks[comm][comm_rank] == 2 and len(ranks[comm]) == comm_size
    assert len({comm for comm, _, _ in places}) == 2


# --- constructed dumps (make_fixtures.py) --------------------------------------------------------------------------


def test_generator_output_is_committed_and_current(tmp_path):
    for written in GEN.write_all(tmp_path):
        assert written.read_bytes() == (CONSTRUCTED / written.name).read_bytes(), written.name


def test_example_p2p_goes_to_its_own_stream():
    evidence = parse(CONSTRUCTED / "v2.10_example_rank1")
    assert evidence.problems == [] and evidence.ranks == [1]
    rows = list(evidence.collectives.iter_rows(named=True))
    assert [(r["comm"], r["seq"], r["op"], r["root"], r["count"], r["state"]) for r in rows] == [
        ("0", 1, "AllReduce", None, 1024, "completed"),
        ("1:p2p", 1, "Recv", 0, 4096, "launched"),
        ("1:p2p", 1, "Send", 0, 4096, "launched"),
        ("1:p2p", 1, "Coalesced", None, None, "completed"),
        ("0", 2, "AllReduce", None, 1024, "launched"),
    ]
    assert {r["dtype"] for r in rows[:3]} == {"bfloat16"}
    assert {(r["comm_rank"], r["comm_size"]) for r in rows} == {(1, 2)}
    assert rows[0]["callsite"] == "/home/user/train.py:88" and rows[1]["callsite"] == "/home/user/train.py:120"
    assert rows[0]["time"] == GEN.T0 / 1e9
    progress = {p.comm: p for p in evidence.progress}
    assert progress["0"].last_started is None  # -1: timing was off
    assert (progress["0"].last_enqueued, progress["0"].last_completed) == (2, 1)
    assert str(progress["1"].loc) == "v2.10_example_rank1#pg_status[1]"


def test_example_pickle_protocols_and_json_agree():
    by_2 = parse(CONSTRUCTED / "v2.10_example_rank1", "dump_1")
    by_5 = parse(CONSTRUCTED / "v2.10_example_proto5_rank1", "dump_1")
    by_json = parse(CONSTRUCTED / "v2.10_example_rank1.json", "dump_1")
    assert by_2.collectives.equals(by_5.collectives)
    assert by_json.collectives.drop("callsite", "stack").equals(by_2.collectives.drop("callsite", "stack"))
    assert by_json.progress == by_2.progress and by_json.comm_infos == by_2.comm_infos
    assert by_json.problems == [] and by_json.version == "2.10"


def test_ops_counts_and_dtypes_follow_nccl():
    evidence = parse(CONSTRUCTED / "v2.10_ops_rank0")
    assert evidence.problems == []
    got = [(r["op"], r["count"], r["dtype"]) for r in evidence.collectives.iter_rows(named=True)]
    assert got[:14] == [
        ("AllReduce", 1, "float32"),  # barrier() is an AllReduce of one element
        ("AllGather", 32, "bfloat16"),  # _all_gather_base: the per-rank input
        ("AllGather", 4096, "float16"),
        ("ReduceScatter", 4, "float32"),  # reduce_scatter: the per-rank output
        ("ReduceScatter", 16, "float32"),
        ("AllReduce", 12, "float32"),  # coalesced: the first tensor
        ("ReduceScatter", 2, "float32"),
        ("AllToAll", 64, "int64"),
        ("Broadcast", 21, "float64"),
        ("Reduce", 9, "int32"),
        ("Gather", 5, "float32"),
        ("Scatter", 5, "float32"),
        ("AllReduce", 1000, "float8_e4m3"),
        ("AllReduce", 10, "bool"),  # c10d:allreduce of the FlightRecorderHook
    ]
    uneven = evidence.collectives.filter(pl.col("seq") == 15)
    assert uneven.get_column("op").to_list() == ["Broadcast"] * 4 + ["AllGather"]
    assert uneven.get_column("count").to_list() == [2, 4, 6, 8, None]
    recv = evidence.collectives.filter(pl.col("comm") == "0:p2p").row(0, named=True)
    assert (recv["op"], recv["root"], recv["seq"], recv["state"]) == ("Recv", None, 1, "started")  # recv from any


def test_call_site_skips_torch_and_cpp_frames():
    sites = column(parse(CONSTRUCTED / "v2.10_ops_rank0"), "callsite")
    assert sites[0] == "/home/user/train.py:10"  # C++ frame and two torch frames skipped
    assert sites[12] is None  # only torch frames: no user call site
    assert sites[13] is None  # no frames at all


def test_malformed_entries_are_skipped_with_a_warning_each():
    evidence = parse(CONSTRUCTED / "v2.10_malformed_rank2")
    assert errors(evidence) == []
    assert column(evidence, "record") == [0, 7] and column(evidence, "seq") == [1, 8]
    places = [str(p.loc) for p in evidence.problems if "entry skipped" in p.message]
    assert places == [f"v2.10_malformed_rank2#entries[{i}]" for i in range(1, 7)]
    text = "\n".join(warnings(evidence))
    for expected in ("no field 'profiling_name'", "sequence number is '3'", "state 'exploded'",
                     "a size list is str", "process_group is 7", "no field 'filename'"):
        assert expected in text
    # The ranks string is never evaluated: the group is ignored with a warning.
    assert "ranks \"__import__('os').system('true')\" is not a list" in text
    assert [c.comm for c in evidence.comm_infos] == ["0"]
    [progress] = evidence.progress
    assert (progress.last_enqueued, progress.last_started, progress.last_completed) == (8, None, 7)
    assert any("pg_status '5' is str, not a dict" in w for w in warnings(evidence))


def test_many_malformed_entries_are_summarised(tmp_path):
    dump = GEN.synthetic_dump(100)
    for e in dump["entries"]:
        del e["profiling_name"]
    path = tmp_path / "fr_rank0"
    path.write_bytes(pickle.dumps(dump, protocol=2))
    evidence = parse(path)
    assert evidence.collectives.height == 0 and errors(evidence) == []
    assert len(evidence.problems) == 21
    assert evidence.problems[-1].message == "80 more malformed entries skipped (100 in all)"


def test_older_schemas():
    v23 = parse(CONSTRUCTED / "v2.3_rank0")
    assert v23.problems == [] and v23.version == "2.3"
    assert column(v23, "state") == ["completed", "completed", "launched"]
    assert v23.progress[0].last_enqueued == 3
    v14 = parse(CONSTRUCTED / "v1.4_rank0")
    assert v14.problems == [] and v14.version == "1.4"
    assert column(v14, "comm") == ["0", "0"] and column(v14, "seq") == [1, 2]
    assert [(c.comm, c.ranks) for c in v14.comm_infos] == [("0", (0, 1))]
    assert column(v14, "comm_size") == [2, 2]


def test_rank_from_content_and_from_name():
    sub = parse(CONSTRUCTED / "v2.10_subgroup_dump")
    assert sub.ranks == [1] and sub.problems == []  # `sub_pg` [1] beside the world [0, 1]
    norank = parse(CONSTRUCTED / "v2.10_norank_dump")
    assert norank.ranks == [] and set(column(norank, "rank")) == {None}
    assert norank.progress[0].rank is None
    [problem] = norank.problems
    assert problem.severity is Severity.WARNING and "cannot tell which global rank" in problem.message
    contradicted = parse(CONSTRUCTED / "v2.10_subgroup_dump", "fr_rank7")
    assert contradicted.ranks == [1]
    assert "file name says rank 7" in contradicted.problems[0].message


@pytest.mark.parametrize("name, rank", [
    ("fr_rank0", 0), ("comm_lib_trace_rank_12", 12), ("dir/nccl_trace_rank_3", 3), ("fr_json_rank5.json", 5),
    ("fr_rank2.pkl.gz", 2), ("v2.10_subgroup_dump", None), ("dump", None), ("trace_12345678", None),
])
def test_rank_from_name(name, rank):
    assert rank_from_name(name) == rank


@pytest.mark.parametrize("text, ranks", [("[0, 1, 2, 3]", (0, 1, 2, 3)), ("[0,1]", (0, 1)), ("[]", ()),
                                         ([4, 5], (4, 5)), (" [7] ", (7,))])
def test_parse_ranks(text, ranks):
    assert parse_ranks(text) == ranks


# --- hostile and broken input ---------------------------------------------------------------------------------------


class _Call:
    """Pickles as a call of `func(*args)` (what an attacker's payload does)."""

    def __init__(self, func, *args):
        self.func, self.args = func, args

    def __reduce__(self):
        return self.func, self.args


def _fr_shaped(payload) -> dict:
    dump = GEN.example_rank1()
    dump["entries"][2]["frames"] = [payload]
    return dump


@pytest.mark.parametrize("protocol", [2, 4, 5])
@pytest.mark.parametrize("make", ["os.system", "eval", "nested"])
def test_hostile_pickle_is_refused_and_never_run(tmp_path, protocol, make):
    marker = tmp_path / "pwned"
    if make == "os.system":
        payload, imported = _Call(os.system, f"touch {marker}"), f"{os.system.__module__}.system"
    elif make == "eval":
        payload, imported = _Call(eval, f"open({str(marker)!r}, 'w').close()"), "builtins.eval"
    else:
        payload, imported = _fr_shaped(_Call(os.system, f"touch {marker}")), f"{os.system.__module__}.system"
    path = tmp_path / "fr_rank0"
    path.write_bytes(pickle.dumps(payload, protocol=protocol))
    file = load(path)
    assert isinstance(detect(file), FlightRecorderSource)  # claimed, so that it is reported
    for evidence in (parse_file(file), SOURCE.parse(file)):
        assert errors(evidence) == [f"refused: pickle tries to import {imported}; never executed"]
        assert evidence.has_errors and evidence.collectives.height == 0
    assert not marker.exists()


def test_protocol_0_hostile_pickle_is_refused(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "fr_rank0"
    path.write_bytes(f"cos\nsystem\n(S'touch {marker}'\ntR.".encode())
    evidence = parse_file(load(path))
    assert evidence.format is SourceFormat.FLIGHT_RECORDER
    assert errors(evidence) == ["refused: pickle tries to import os.system; never executed"]
    assert not marker.exists()


def test_persistent_ids_are_refused(tmp_path):
    class Pickler(pickle.Pickler):
        def persistent_id(self, obj):
            return "secret" if obj == "payload" else None

    buffer = io.BytesIO()
    Pickler(buffer, protocol=2).dump({"version": "2.10", "entries": ["payload"]})
    path = tmp_path / "fr_rank0"
    path.write_bytes(buffer.getvalue())
    assert errors(parse(path)) == ["refused: pickle asks for a persistent object; never executed"]


def test_memo_bomb_is_refused_without_allocating(tmp_path):
    # LONG_BINPUT 0xffffffff: the C unpickler would size its memo for 4 billion entries (64 GiB).
    path = tmp_path / "fr_rank0"
    path.write_bytes(b"\x80\x02}r\xff\xff\xff\xff.")
    started = time.perf_counter()
    evidence = parse_file(load(path))
    assert time.perf_counter() - started < 1
    [message] = errors(evidence)
    assert message.startswith("refused: pickle memo index 4294967295 at byte 3")


def test_large_memo_indices_inside_the_file_are_fine(tmp_path):
    # Indices of 2**22 and more are checked one by one: below the file size they are what a big dump has.
    index = 2**22 + 1
    body = b"}(" + b"K\x01N" * (index // 3 + 8) + b"K\x02Nr" + index.to_bytes(4, "little") + b"u."
    path = tmp_path / "fr_rank0"
    path.write_bytes(b"\x80\x02" + body)
    evidence = SOURCE.parse(load(path))
    assert any("a dict without `version`" in m for m in errors(evidence))  # loaded, then found not to be a dump


@pytest.mark.parametrize("path", sorted(CONSTRUCTED.glob("v*")), ids=lambda p: p.name)
def test_constructed_dumps_are_detected(path):
    assert isinstance(detect(load(path)), FlightRecorderSource)


def test_truncated_pickle_keeps_the_complete_entries(tmp_path):
    data = (EXTRA_OP / "fr_rank0").read_bytes()
    full = parse(EXTRA_OP / "fr_rank0", "fr_rank0").collectives
    seen = set()
    for cut in (len(data) - 1, len(data) // 2, len(data) // 5, 200, 40, 3):
        path = tmp_path / "fr_rank0"
        path.write_bytes(data[:cut])
        evidence = parse_file(load(path))
        [message] = errors(evidence)
        assert message.startswith(f"truncated pickle: the data ends at byte {cut} before the end of the dump")
        frame = evidence.collectives
        assert frame.equals(full.head(frame.height))  # what was read is exactly the start of the dump
        seen.add(frame.height)
    assert max(seen) == 50 and 0 in seen and len(seen) > 3  # cut before STOP only: every entry is complete


def test_gzipped_dump_reads_the_same(tmp_path):
    path = tmp_path / "fr_rank0.gz"
    path.write_bytes(gzip.compress((EXTRA_OP / "fr_rank0").read_bytes()))
    file = load(path, "fr_rank0")
    assert isinstance(detect(file), FlightRecorderSource)
    assert parse_file(file).collectives.equals(parse(EXTRA_OP / "fr_rank0").collectives)


@pytest.mark.parametrize("payload, message", [
    (pickle.dumps([1, 2, 3], protocol=2), "the top level is list"),
    (pickle.dumps({"a": 1}, protocol=2), "a dict without `version`"),
    (pickle.dumps({"version": "2.10", "entries": {"0": 1}}, protocol=2), "`entries` is dict, not a list"),
    (b'{"version": "2.10", "entries": [', "not valid JSON"),
    (b"\x80\x02}q\x00X\x07\x00\x00\x00versionI42\n.", "byte 17 is INT"),
])
def test_wrong_shapes_are_errors(tmp_path, payload, message):
    path = tmp_path / "fr_rank0"
    path.write_bytes(payload)
    evidence = SOURCE.parse(load(path))
    assert any(message in m for m in errors(evidence)), evidence.problems


def test_out_of_range_numbers_are_malformed_entries(tmp_path):
    dump = GEN.example_rank1()
    dump["entries"][0]["time_created_ns"] = 10**400
    dump["entries"][1]["profiling_name"] = "nccl:send 0->99999999999999999999999"
    dump["entries"][2]["input_sizes"] = [[2**40, 2**40]]
    dump["entries"][4]["collective_seq_id"] = 2**64
    path = tmp_path / "fr_rank1"
    path.write_bytes(pickle.dumps(dump, protocol=2))
    evidence = parse(path)
    assert column(evidence, "record") == [3] and errors(evidence) == []
    assert len(warnings(evidence)) == 4


def test_odd_digits_and_huge_shapes_are_malformed_not_fatal(tmp_path):
    dump = GEN.example_rank1()
    dump["pg_status"] = {"\u00b2": {"last_enqueued_collective": "--5"}, "0": {"last_enqueued_collective": "\u00b2"}}
    dump["pg_config"]["1"]["ranks"] = "[0, \u00b2]"
    dump["entries"][0]["input_sizes"] = [[2**62] * 100_000]
    path = tmp_path / "fr_rank1"
    path.write_bytes(pickle.dumps(dump, protocol=2))
    evidence = parse(path)
    assert errors(evidence) == [] and evidence.collectives.height == 4 and evidence.progress == []
    assert len(warnings(evidence)) == 5


def test_fields_of_a_newer_schema_are_reported_and_ignored(tmp_path):
    dump = GEN.example_rank1()
    for e in dump["entries"]:
        e["future_field"] = 1
    path = tmp_path / "fr_rank1"
    path.write_bytes(pickle.dumps(dump, protocol=2))
    evidence = parse(path)
    assert evidence.collectives.height == 5
    assert warnings(evidence) == ["entries carry fields no known schema version has, ignored: future_field"]


def test_a_file_name_that_is_not_utf8(tmp_path):
    name = b"fr_rank\xff1".decode("utf-8", "surrogateescape")
    evidence = SOURCE.parse(InputFile(path=CONSTRUCTED / "v2.10_example_rank1", name=name))
    assert evidence.collectives.height == 5 and set(column(evidence, "file")) == {"fr_rank?1"}


def test_trailing_bytes_are_a_warning(tmp_path):
    path = tmp_path / "fr_rank0"
    path.write_bytes((CONSTRUCTED / "v2.10_example_rank1").read_bytes() + b"junk")
    evidence = parse(path)
    assert evidence.collectives.height == 5
    assert warnings(evidence) == ["4 bytes after the end of the pickle ignored"]


def test_json_without_entries_is_fine(tmp_path):
    dump = json.loads(GEN.as_json(GEN.example_rank1()))
    del dump["entries"]
    path = tmp_path / "fr_rank1.json"
    path.write_text(json.dumps(dump))
    evidence = parse_file(load(path))
    assert evidence.format is SourceFormat.FLIGHT_RECORDER and evidence.problems == []
    assert evidence.collectives.height == 0 and len(evidence.progress) == 2


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=2000))
def test_arbitrary_bytes_never_raise(tmp_path, data):
    path = tmp_path / "fr_rank0"
    for content in (data, b"\x80\x02" + data, b"\x80\x02}(X\x07\x00\x00\x00version" + data):
        path.write_bytes(content)
        parse_file(InputFile(path=path, name=str(path)))
        SOURCE.parse(InputFile(path=path, name=str(path)))
        SOURCE.sniff(content[:65536], content.decode("utf-8", "replace"))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(position=st.integers(min_value=0), value=st.integers(min_value=0, max_value=255))
def test_corrupted_real_dump_never_raises(tmp_path, position, value):
    data = bytearray((EXTRA_OP / "fr_rank0").read_bytes())
    data[position % len(data)] = value
    path = tmp_path / "fr_rank0"
    path.write_bytes(bytes(data))
    SOURCE.parse(load(path))


_LEAVES = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
_VALUES = st.recursive(_LEAVES, lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
                       | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=20)
_ENTRY_KEYS = st.sampled_from(["process_group", "pg_id", "collective_seq_id", "p2p_seq_id", "seq_id", "is_p2p",
                               "profiling_name", "input_sizes", "output_sizes", "input_dtypes", "state",
                               "time_created_ns", "frames"])


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entries=st.lists(st.dictionaries(_ENTRY_KEYS, _VALUES, max_size=13), max_size=5),
       config=_VALUES, status=_VALUES, protocol=st.sampled_from([2, 5]))
def test_arbitrary_dump_structures_never_raise(tmp_path, entries, config, status, protocol):
    path = tmp_path / "fr_rank0"
    dump = {"version": "2.10", "pg_config": config, "pg_status": status, "entries": entries}
    path.write_bytes(pickle.dumps(dump, protocol=protocol))
    evidence = SOURCE.parse(load(path))
    assert evidence.collectives.columns == list(pl.DataFrame(schema=evidence.collectives.schema).columns)


def test_a_pg_id_whose_entries_the_ring_lost_is_the_one_group_no_other_pg_id_took(tmp_path):
    # Rank 3 of groups "1" (pg_id 1) and "6" (pg_id 2): the ring kept only entries of pg_id 1, so pg_status "2"
    # is group "6", not group "2" (another group, which rank 3 is not in).
    entry = {"process_group": ("1", "undefined"), "pg_id": 1, "collective_seq_id": 9, "profiling_name":
             "nccl:all_reduce", "input_sizes": [[4]], "input_dtypes": ["Float"], "state": "completed"}
    status = {"1": {"last_enqueued_collective": 9, "last_started_collective": -1, "last_completed_collective": 9},
              "2": {"last_enqueued_collective": 2, "last_started_collective": -1, "last_completed_collective": 2}}
    config = {"1": {"name": "1", "desc": "undefined", "ranks": "[0, 1, 2, 3]"},
              "6": {"name": "6", "desc": "undefined", "ranks": "[3, 7]"}}
    path = tmp_path / "fr_rank3"
    path.write_bytes(pickle.dumps({"version": "2.10", "pg_config": config, "pg_status": status,
                                   "entries": [entry]}, protocol=2))
    progress = {p.comm: p.last_enqueued for p in SOURCE.parse(load(path)).progress}
    assert progress == {"1": 9, "6": 2}


# --- speed ------------------------------------------------------------------------------------------------------------


def test_twenty_thousand_entries_parse_fast(tmp_path):
    path = tmp_path / "fr_rank3"
    path.write_bytes(pickle.dumps(GEN.synthetic_dump(20_000, rank=3), protocol=2))
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        evidence = parse_file(load(path))
        best = min(best, time.perf_counter() - started)
    assert evidence.problems == [] and evidence.collectives.height == 20_000
    assert column(evidence, "seq")[-1] == 20_000 and set(column(evidence, "rank")) == {3}
    assert set(column(evidence, "callsite")) == {"capture/probe.py:85", "capture/probe.py:88", "capture/probe.py:91"}
    print(f"\n20,000-entry pickle ({path.stat().st_size / 1e6:.1f} MB): parsed in {best * 1000:.0f} ms")
    assert best < 5.0


def test_a_duplicated_entry_or_a_gap_inside_the_ring_is_a_warning(tmp_path):
    """A duplicated entry and a gap of 2 entries in one dump were read without a word (the gap then read as
    "rank 1 did not launch 3 collectives")."""
    dump = pickle.loads((EXTRA_OP / "fr_rank1").read_bytes())
    entries = dump["entries"]
    dump["entries"] = entries[:10] + [dict(entries[9])] + entries[10:20] + entries[22:]
    path = tmp_path / "fr_rank1"
    path.write_bytes(pickle.dumps(dump, protocol=2))
    found = [(str(p.loc), p.message) for p in parse(path).problems if "implausible" in p.message]
    assert [where for where, _ in found] == ["fr_rank1#entries[10]", "fr_rank1#entries[21]"]
    assert "record_id 9 again (first at entries[9])" in found[0][1]
    assert "seq 23 right after 20: 2 missing inside the ring" in found[1][1]
    assert [p for p in parse(EXTRA_OP / "fr_rank1").problems if "implausible" in p.message] == []
