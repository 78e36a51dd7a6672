"""RAS JSON STATUS replies (2.28.7+) and MONITOR streams (2.29.2+): real, public and constructed files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ncclforensics.model import Evidence, RasCountGroup, RasSnapshot, Severity, SourceFormat
from ncclforensics.sources import InputFile, detect, parse_file
from ncclforensics.sources.ras_common import count_groups
from ncclforensics.sources.ras import RasJsonSource, RasMonitorSource
from fixture_paths import FIXTURES, REAL

PUBLIC = FIXTURES / "public" / "ras_json"
CONSTRUCTED = FIXTURES / "constructed" / "ras"

JSON_FILES = sorted(REAL.glob("*/ras_json*.txt")) + sorted(PUBLIC.glob("*.txt")) + [CONSTRUCTED / name for name in (
    "sample-e-status-2.29.7.json", "two-json-replies-2.29.7.txt", "json-cut-then-valid-2.29.7.txt",
    "transcript-json-then-text-2.28.9.txt")]
MONITOR_FILES = [CONSTRUCTED / name for name in (
    "sample-e-monitor-2.29.7.txt", "sample-e-monitor-2.29.7-json.txt", "monitor-json-stream-2.29.7.txt")]


def parse(path: Path) -> Evidence:
    return parse_file(InputFile(path=path, name=str(path)))


def one_snapshot(evidence: Evidence) -> RasSnapshot:
    assert len(evidence.ras) == 1, evidence.ras
    return evidence.ras[0]


def test_every_file_exists():
    assert len(JSON_FILES) >= 7 + 3 + 4  # the real captures grow as scenarios are added
    assert all(p.is_file() for p in JSON_FILES + MONITOR_FILES)


@pytest.mark.parametrize("path", JSON_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_detected_as_ras_json(path):
    source = detect(InputFile(path=path, name=str(path)))
    assert source is not None and source.format is SourceFormat.RAS_JSON


@pytest.mark.parametrize("path", MONITOR_FILES, ids=lambda p: p.name)
def test_detected_as_ras_monitor(path):
    source = detect(InputFile(path=path, name=str(path)))
    assert source is not None and source.format is SourceFormat.RAS_MONITOR


# -- real NCCL 2.28.9 captures

@pytest.mark.parametrize("name", ["ras_json_q0.txt", "ras_json_q1.txt"])
def test_real_extra_op_4rank(name):
    evidence = parse(REAL / "extra-op-4rank" / name)
    assert evidence.format is SourceFormat.RAS_JSON and evidence.problems == []
    assert evidence.version == "2.28.9"
    snap = one_snapshot(evidence)
    assert snap.time.startswith("2026-11-29 08:55:") and snap.nccl_version == "2.28.9"
    (comm,) = snap.comms
    assert (comm.comm, comm.size, comm.status, comm.errors) == ("0x1715b7bd1b8fda9e", 4, "RUNNING", ("MISMATCH",))
    assert comm.count_groups == (RasCountGroup("AllReduce", 49, 3, (1, 2, 3)), RasCountGroup("AllReduce", 50, 1, (0,)))
    assert [(r.rank, r.pid, r.counts["AllReduce"]) for r in comm.ranks] == [(0, 442, 50), (1, 443, 49), (2, 444, 49),
                                                                            (3, 445, 49)]
    assert set(comm.ranks[0].counts) == {"Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce"}
    (issue,) = snap.issues
    assert (issue.kind, issue.ranks, issue.pids, issue.warning) == ("MISMATCH", (0,), (442,), True)
    assert [(i.pid, i.comm_rank, i.comm_size, i.cuda_dev, i.loc.line) for i in evidence.identities] == [
        (442, 0, 4, 0, 16), (443, 1, 4, 0, 37), (444, 2, 4, 0, 58), (445, 3, 4, 0, 79)]


@pytest.mark.parametrize("name", ["ras_json_q0.txt", "ras_json_q1.txt"])
def test_real_killed_rank_invalid_json_is_repaired(name):
    path = REAL / "killed-rank" / name
    evidence = parse(path)
    (problem,) = evidence.problems
    assert problem.severity is Severity.WARNING and problem.loc.line == 85  # the line missing its comma
    assert "repaired" in problem.message and "2.29.2" in problem.message
    snap = one_snapshot(evidence)
    (comm,) = snap.comms
    assert (comm.comm, comm.size, comm.errors) == ("0xd5dc471d2873616f", 4, ("INCOMPLETE", "ERROR"))
    assert comm.missing_ranks == (1,) and comm.dead_ranks == ()
    ranks = {r.rank: r for r in comm.ranks}
    assert ranks[1].missing and ranks[1].unresponsive and not ranks[1].dead and ranks[1].pid == 711
    assert ranks[1].counts == {}
    assert ranks[0].async_error == ranks[2].async_error == "Remote process error" and ranks[3].async_error is None
    assert {r: ranks[r].counts["AllReduce"] for r in (0, 2, 3)} == {0: 125, 2: 125, 3: 125}
    assert [(i.kind, i.ranks, i.pids) for i in snap.issues] == [("INCOMPLETE", (1,), (711,)),
                                                               ("ERROR", (0, 2), (710, 712))]


def test_real_transient_skew():
    q0 = one_snapshot(parse(REAL / "transient-skew" / "ras_json_q0.txt"))
    assert q0.comms[0].count_groups == (RasCountGroup("AllReduce", 273, 3, (0, 1, 2)),
                                        RasCountGroup("AllReduce", 272, 1, (3,)))
    q1 = one_snapshot(parse(REAL / "transient-skew" / "ras_json_q1.txt"))
    assert q1.comms[0].errors == () and q1.comms[0].count_groups == () and q1.issues == ()
    assert {r.counts["AllReduce"] for r in q1.comms[0].ranks} == {341}


def test_real_healthy_1rank():
    evidence = parse(REAL / "healthy-1rank" / "ras_json.txt")
    assert evidence.problems == []
    (comm,) = one_snapshot(evidence).comms
    assert (comm.comm, comm.size, comm.errors, len(comm.ranks)) == ("0xf587a568d4113ddf", 1, (), 1)
    assert all(v == 0 for v in comm.ranks[0].counts.values())


@pytest.mark.parametrize("text_path", sorted(REAL.glob("*/ras_status_q*.txt")) + sorted(
    REAL.glob("*/ras_verbose_q*.txt")), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_text_and_json_replies_agree(text_path):
    """The same query as text and as JSON says the same; the hashes of OK comms appear only in JSON."""
    doc = one_snapshot(parse(text_path.parent / text_path.name.replace("status", "json").replace("verbose", "json")))
    text = one_snapshot(parse(text_path))
    by_hash = {c.comm: c for c in doc.comms}
    assert len(text.comms) == len(doc.comms)
    for t in text.comms:
        if not t.comm.startswith("0x"):
            assert t.errors == () and any(c.errors == () and c.size == t.size for c in doc.comms)
            continue
        j = by_hash[t.comm]
        assert (t.size, t.status, t.errors, t.count_groups, t.missing_ranks) == (
            j.size, j.status, j.errors, j.count_groups, j.missing_ranks)
        assert {r.rank: r.async_error for r in t.ranks if r.async_error} == {
            r.rank: r.async_error for r in j.ranks if r.async_error}
        for rank in t.ranks:  # what the text says of a rank, the JSON says too
            other = next(r for r in j.ranks if r.rank == rank.rank)
            assert all(other.counts[op] == n for op, n in rank.counts.items())
            assert (rank.pid or other.pid, rank.missing, rank.status) == (other.pid, other.missing, other.status)
    key = lambda i: (i.kind, i.comm, i.ranks)  # noqa: E731
    assert sorted(map(key, (i for i in text.issues if i.comm))) == sorted(map(key, (i for i in doc.issues if i.comm)))


# -- public outputs (tests/fixtures/public/INDEX.md)

def test_ray_1_healthy():
    evidence = parse(PUBLIC / "ray-64928-1.txt")
    assert evidence.problems == []
    snap = one_snapshot(evidence)
    assert snap.time == "2026-06-19 06:51:56"
    (comm,) = snap.comms
    assert (comm.comm, comm.size, comm.errors) == ("0x514e98cf4e44862b", 2, ())
    assert [(r.rank, r.host, r.pid, r.cuda_dev, r.counts["AllReduce"]) for r in comm.ranks] == [
        (0, "10.0.77.184", 8813, 0, 2), (1, "10.0.77.184", 8814, 1, 2)]
    assert snap.issues == ()


def test_ray_2_missing_comma_repaired_and_rank_unresponsive_not_dead():
    evidence = parse(PUBLIC / "ray-64928-2.txt")
    (problem,) = evidence.problems
    assert problem.severity is Severity.WARNING and problem.loc.line == 43 and "repaired" in problem.message
    snap = one_snapshot(evidence)
    assert snap.time == "2026-06-19 06:55:57"
    (comm,) = snap.comms
    assert (comm.comm, comm.size, comm.missing_ranks, comm.dead_ranks) == ("0xa1349768e9517ed7", 2, (1,), ())
    rank0, rank1 = comm.ranks
    assert (rank0.pid, rank0.cuda_dev, rank0.counts["AllReduce"]) == (10018, 0, 4)
    assert (rank1.host, rank1.pid, rank1.cuda_dev) == ("10.0.77.184", 10017, 1)
    assert rank1.missing and rank1.unresponsive and not rank1.dead and rank1.counts == {}
    assert comm.errors == ("INCOMPLETE",)


def test_ray_3_three_comms_one_mismatch():
    evidence = parse(PUBLIC / "ray-64928-3.txt")
    assert evidence.problems == []
    snap = one_snapshot(evidence)
    a, b, c = snap.comms
    assert [x.comm for x in (a, b, c)] == ["0x4e0104c2022fa2f9", "0xbeebea5449e0a7e7", "0xd0d47b5885b3b54b"]
    assert [x.size for x in (a, b, c)] == [2, 2, 4]
    assert {x.comm for x in snap.comms if "MISMATCH" in x.errors} == {"0x4e0104c2022fa2f9"}
    assert a.count_groups == (RasCountGroup("AllReduce", 10, 1, (0,)), RasCountGroup("AllReduce", 3, 1, (1,)))
    assert [(r.pid, r.cuda_dev) for r in a.ranks] == [(10205, 2), (10207, 3)]
    assert [(r.pid, r.cuda_dev) for r in c.ranks] == [(10206, 0), (10204, 1), (10205, 2), (10207, 3)]
    (issue,) = snap.issues
    # a 1/1 split: a text reply would list both ranks, so the derived issue names both; the laggard is rank 1
    assert (issue.kind, issue.comm, issue.ranks) == ("MISMATCH", "0x4e0104c2022fa2f9", (0, 1))
    assert min(a.count_groups, key=lambda g: g.count).ranks == (1,)
    assert a.count_groups[0].count - a.count_groups[1].count == 7  # skew
    # the same pid has different comm ranks in different comms
    assert {(i.comm, i.comm_rank) for i in evidence.identities if i.pid == 10205} == {
        ("0x4e0104c2022fa2f9", 0), ("0xd0d47b5885b3b54b", 2)}


# -- constructed samples

def test_sample_e_status_dead_rank():
    evidence = parse(CONSTRUCTED / "sample-e-status-2.29.7.json")
    assert evidence.problems == []
    snap = one_snapshot(evidence)
    (comm,) = snap.comms
    assert comm.missing_ranks == (3,) and comm.dead_ranks == (3,)
    assert comm.count_groups == ()  # all three present ranks agree
    assert [(i.kind, i.comm, i.pids) for i in snap.issues] == [("DEAD", None, (51008,)),
                                                              ("INCOMPLETE", "0x3f2a9c1b7d4e8a06", (51008,))]


def test_two_json_replies_back_to_back():
    evidence = parse(CONSTRUCTED / "two-json-replies-2.29.7.txt")
    assert evidence.problems == []
    assert [s.time for s in evidence.ras] == ["2026-07-14 09:32:15", "2026-07-14 09:32:45"]
    assert evidence.ras[1].loc.line == 99


def test_transcript_with_handshake_json_and_text():
    evidence = parse(CONSTRUCTED / "transcript-json-then-text-2.28.9.txt")
    assert evidence.format is SourceFormat.RAS_JSON
    assert [p.severity for p in evidence.problems] == [Severity.WARNING]  # the 2.28.9 comma, repaired
    json_reply, text_reply = evidence.ras
    assert json_reply.loc.line == 8 and json_reply.comms[0].dead_ranks == (3,)
    assert text_reply.comms[0].errors == ("MISMATCH",) and text_reply.nccl_version == "2.28.9"


def test_invalid_json_is_one_error_at_the_decode_line_and_the_rest_is_read():
    path = CONSTRUCTED / "json-cut-then-valid-2.29.7.txt"
    evidence = parse(path)
    (problem,) = evidence.problems
    assert problem.severity is Severity.ERROR
    assert str(problem) == f"{path}:40: invalid JSON: Expecting ',' delimiter (object starting at line 1)"
    snap = one_snapshot(evidence)
    assert snap.loc.line == 40 and snap.time == "2026-07-14 09:32:45"


def test_invalid_json_line_in_a_small_file(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{\n  "nccl_version": "2.29.7",\n  "communicators": [ oops ]\n}\n')
    evidence = RasJsonSource().parse(InputFile(path=path, name="bad.json"))
    assert [str(p) for p in evidence.problems] == [
        "bad.json:3: invalid JSON: Expecting value (object starting at line 1)"]
    assert evidence.ras == []


def test_json_of_another_shape_is_skipped_with_a_warning(tmp_path):
    path = tmp_path / "other.json"
    path.write_text('{"foo": 1}\n')
    evidence = RasJsonSource().parse(InputFile(path=path, name="other.json"))
    assert [p.severity for p in evidence.problems] == [Severity.WARNING] and evidence.ras == []


def test_status_flags_and_error_codes(tmp_path):
    doc = {"nccl_version": "2.30.3", "timestamp": "t", "communicators": [{
        "hash": "0xabc", "secondary_hash": "0x1:0x2", "size": 3, "ranks": [
            {"rank": 0, "host": "h", "pid": 1, "cuda_dev": 0, "nvml_dev": 0,
             "status": {"init_state": 0, "async_error": 8, "finalize_called": False, "destroy_flag": False,
                        "abort_flag": True}, "collective_counts": {"AllGather": 0, "AllReduce": 5}},
            {"rank": 1, "host": "unknown", "pid": -1, "cuda_dev": 1, "nvml_dev": 1,
             "status": {"init_state": 3, "async_error": 0, "finalize_called": False, "destroy_flag": False,
                        "abort_flag": False}, "collective_counts": {"AllGather": 2, "AllReduce": 5}}],
        "missing_ranks": [{"rank": 2, "host": "h", "pid": 3, "cuda_dev": 2, "nvml_dev": 2,
                           "status": {"unresponsive": False, "considered_dead": False}}]}],
        "ras": {"collection_time_sec": 5.1, "timeouts_count": 2}}
    path = tmp_path / "flags.json"
    path.write_text(json.dumps(doc, indent=2))
    evidence = RasJsonSource().parse(InputFile(path=path, name="flags.json"))
    assert evidence.problems == []
    snap = one_snapshot(evidence)
    (comm,) = snap.comms
    assert comm.comm == "0x0000000000000abc"
    r0, r1, r2 = comm.ranks
    assert (r0.status, r0.async_error) == ("ABORT", "Timeout")
    assert (r1.status, r1.host, r1.pid) == ("INIT", None, None)
    assert (r2.status, r2.missing, r2.unresponsive) == ("NOCOMM", True, False)
    assert comm.status == "ABORT" and comm.errors == ("ERROR", "MISMATCH")
    # ties in size: the higher count first, as NCCL sorts them; a count of 0 is None ("not launched any")
    assert comm.count_groups == (RasCountGroup("AllGather", 2, 1, (1,)), RasCountGroup("AllGather", None, 1, (0,)))
    assert [i.kind for i in snap.issues] == ["ERROR", "MISMATCH", "TIMEOUT"]
    assert "Initialization errors on 1 ranks" in snap.issues[0].message
    assert len(evidence.identities) == 2  # pid -1 names no process


# -- MONITOR

def test_monitor_text_stream():
    evidence = parse(CONSTRUCTED / "sample-e-monitor-2.29.7.txt")
    assert evidence.format is SourceFormat.RAS_MONITOR and evidence.problems == []
    assert [(s.event, s.time, s.loc.line) for s in evidence.ras] == [
        ("PEER_UNRESPONSIVE", "2026-07-14 09:30:55", 2), ("PEER_KEEPALIVE_TIMEOUT", "2026-07-14 09:31:10", 3),
        ("PEER_TIMEOUT_DEAD", "2026-07-14 09:32:10", 4), ("PEER_DEAD", "2026-07-14 09:32:10", 5)]
    for snap in evidence.ras:
        (issue,) = snap.issues
        assert issue.kind == snap.event and issue.pids == (51008,) and "10.0.0.12" in issue.message
        assert issue.warning is (snap.event not in ("PEER_DEAD", "PEER_TIMEOUT_DEAD"))
    assert "keepalive warning" in evidence.ras[0].issues[0].message


def test_monitor_json_stream():
    evidence = parse(CONSTRUCTED / "monitor-json-stream-2.29.7.txt")
    assert evidence.problems == []
    assert [(s.event, s.issues[0].pids) for s in evidence.ras] == [
        ("PEER_UNRESPONSIVE", (51008,)), ("PEER_RETRY", ()), ("PEER_DEAD", (51008,))]
    assert "10.0.0.12<43127>" in evidence.ras[1].issues[0].message
    assert [s.loc.line for s in evidence.ras] == [2, 14, 23]


def test_monitor_peer_address_and_no_peer(tmp_path):
    path = tmp_path / "mon.txt"
    path.write_text("[2026-07-14 09:31:30] PEER_RETRY: 10.0.0.12<43127> connection attempt timed out after 1s, "
                    "attempting reconnect\n[2026-07-14 09:31:31] PEER_NEW: \nMONITOR all\n"
                    "ERROR: Invalid event group 'x'\n")
    evidence = RasMonitorSource().parse(InputFile(path=path, name="mon.txt"))
    assert [s.event for s in evidence.ras] == ["PEER_RETRY", "PEER_NEW"]
    assert [str(p) for p in evidence.problems] == ["mon.txt:4: the RAS server replied: ERROR: Invalid event group 'x'"]


# -- helpers and robustness

def test_count_groups_order_and_zero():
    groups = count_groups({0: {"AllReduce": 5, "Broadcast": 0}, 1: {"AllReduce": 4, "Broadcast": 0},
                           2: {"AllReduce": 5, "Broadcast": 1}})
    assert groups == (RasCountGroup("Broadcast", None, 2, (0, 1)), RasCountGroup("Broadcast", 1, 1, (2,)),
                      RasCountGroup("AllReduce", 5, 2, (0, 2)), RasCountGroup("AllReduce", 4, 1, (1,)))


_JSONISH = st.recursive(st.none() | st.booleans() | st.integers(-5, 1 << 70) | st.text(max_size=8),
                        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(
                            ["rank", "host", "pid", "cuda_dev", "status", "collective_counts", "init_state",
                             "async_error", "abort_flag", "unresponsive", "considered_dead", "AllReduce"]),
                            inner, max_size=5), max_leaves=20)
_COMM = st.fixed_dictionaries({}, optional={"hash": st.one_of(st.text(max_size=20), st.integers(), st.just("0x1f")),
                                            "size": _JSONISH, "ranks": st.lists(_JSONISH, max_size=3) | _JSONISH,
                                            "missing_ranks": st.lists(_JSONISH, max_size=3) | _JSONISH})
_DOC = st.fixed_dictionaries({"nccl_version": st.text(max_size=8) | st.integers()}, optional={
    "communicators": st.lists(_COMM | _JSONISH, max_size=3) | _JSONISH, "timestamp": _JSONISH,
    "ras": _JSONISH, "errors": _JSONISH, "warnings": _JSONISH, "event": _JSONISH, "peer": _JSONISH})


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(docs=st.lists(_DOC, min_size=1, max_size=3), cut=st.integers(0, 5000), indent=st.sampled_from([None, 2]))
def test_json_of_any_shape_never_raises(tmp_path_factory, docs, cut, indent):
    text = "".join(json.dumps(d, indent=indent) + "\n" for d in docs)
    path = tmp_path_factory.mktemp("json") / "ras.json"
    for content in (text, text[:cut]):
        path.write_text(content)
        for source in (RasJsonSource(), RasMonitorSource()):
            evidence = source.parse(InputFile(path=path, name=str(path)))
            for snap in evidence.ras:
                assert all(c.comm.startswith("0x") and len(c.comm) == 18 for c in snap.comms)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=st.sampled_from(JSON_FILES + MONITOR_FILES), cut=st.integers(0, 10_000), junk=st.binary(max_size=20))
def test_cut_or_spliced_real_files_never_raise(tmp_path_factory, path, cut, junk):
    data = path.read_bytes()
    target = tmp_path_factory.mktemp("cut") / "ras.txt"
    target.write_bytes(data[:cut] + junk + data[cut:])
    evidence = parse_file(InputFile(path=target, name=str(target)))
    assert evidence.format is not None or evidence.problems


@pytest.mark.parametrize("path", [REAL / "killed-rank" / "ras_status_q0.txt", REAL / "killed-rank" / "ras_json_q0.txt",
                                  CONSTRUCTED / "sample-e-monitor-2.29.7.txt"], ids=lambda p: p.name)
@pytest.mark.parametrize("encode", ["crlf", "utf16", "gzip"])
def test_line_endings_and_encodings_do_not_change_the_result(tmp_path, path, encode):
    import gzip

    data = path.read_bytes()
    data = {"crlf": lambda d: d.replace(b"\n", b"\r\n"), "utf16": lambda d: d.decode().encode("utf-16"),
            "gzip": gzip.compress}[encode](data)
    target = tmp_path / "encoded"
    target.write_bytes(data)
    plain = parse_file(InputFile(path=path, name="f"))
    encoded = parse_file(InputFile(path=target, name="f"))
    problems = encoded.problems
    assert (encoded.format, encoded.ras, encoded.identities, problems) == (
        plain.format, plain.ras, plain.identities, plain.problems)


def test_complete_gzip_is_not_reported_truncated(tmp_path):
    import gzip

    target = tmp_path / "reply.gz"
    target.write_bytes(gzip.compress((CONSTRUCTED / "sample-a-healthy-2.29.7.txt").read_bytes()))
    assert parse_file(InputFile(path=target, name="reply.gz")).problems == []
