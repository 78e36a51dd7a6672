"""RAS text STATUS replies: real NCCL 2.28.9 captures, public outputs (INDEX.md) and constructed samples."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ncclforensics.model import Evidence, RasCountGroup, RasSnapshot, Severity, SourceFormat
from ncclforensics.sources import InputFile, detect, parse_file
from ncclforensics.sources.ras_common import is_transcript_noise, normalize_hash, version_tuple
from ncclforensics.sources.ras import RasJsonSource, RasMonitorSource, RasTextSource
from ncclforensics.sources.ras_text import parse_group_row
from fixture_paths import FIXTURES, REAL

PUBLIC = FIXTURES / "public" / "ras_text"
CONSTRUCTED = FIXTURES / "constructed" / "ras"

TEXT_FILES = sorted(REAL.glob("*/ras_status*.txt")) + sorted(REAL.glob("*/ras_verbose*.txt")) + sorted(
    PUBLIC.glob("*.txt")) + [CONSTRUCTED / name for name in (
        "sample-a-healthy-2.29.7.txt", "sample-b-mismatch-2.29.7.txt", "sample-c1-incomplete-2.29.7.txt",
        "sample-c2-dead-2.29.7.txt", "prompt-two-text-replies-2.29.7.txt", "old-2.25.1-incomplete-mismatch.txt",
        "old-2.24.3-unknown-then-nocomm.txt", "commwalk-garbage-2.27.3.txt", "text-unrecognised-line-2.29.7.txt")]


def parse(path: Path) -> Evidence:
    return parse_file(InputFile(path=path, name=str(path)))


def errors(evidence: Evidence) -> list[str]:
    return [str(p) for p in evidence.problems if p.severity is Severity.ERROR]


def one_snapshot(evidence: Evidence) -> RasSnapshot:
    assert len(evidence.ras) == 1, evidence.ras
    return evidence.ras[0]


def test_every_file_exists():
    assert len(TEXT_FILES) >= 14 + 4 + 9  # the real captures grow as scenarios are added
    assert all(p.is_file() for p in TEXT_FILES)


@pytest.mark.parametrize("path", TEXT_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_detected_as_ras_text(path):
    source = detect(InputFile(path=path, name=str(path)))
    assert source is not None and source.format is SourceFormat.RAS_TEXT


# -- real NCCL 2.28.9 captures (tests/fixtures/real/README.md)

@pytest.mark.parametrize("name", ["ras_status_q0.txt", "ras_status_q1.txt", "ras_verbose_q0.txt", "ras_verbose_q1.txt"])
def test_real_extra_op_4rank(name):
    path = REAL / "extra-op-4rank" / name
    evidence = parse(path)
    assert evidence.format is SourceFormat.RAS_TEXT
    assert evidence.problems == []
    assert evidence.version == "2.28.9"
    snap = one_snapshot(evidence)
    assert snap.nccl_version == "2.28.9" and snap.event is None and not snap.truncated
    assert snap.loc.line == 1
    (comm,) = snap.comms
    assert comm.comm == "0x1715b7bd1b8fda9e"
    assert (comm.size, comm.status, comm.errors) == (4, "RUNNING", ("MISMATCH",))
    assert comm.count_groups == (
        RasCountGroup("AllReduce", 49, 3, (1, 2, 3)),  # members inferred: the only ranks left in a 4-rank comm
        RasCountGroup("AllReduce", 50, 1, (0,)),
    )
    ranks = {r.rank: r for r in comm.ranks}
    assert ranks[0].counts == {"AllReduce": 50} and ranks[0].pid == 442 and ranks[0].host == "192.0.2.2"
    assert ranks[0].cuda_dev == 0 and ranks[0].status == "RUNNING"
    assert {r: ranks[r].counts["AllReduce"] for r in (1, 2, 3)} == {1: 49, 2: 49, 3: 49}
    assert comm.missing_ranks == () and comm.dead_ranks == ()
    (issue,) = snap.issues
    assert (issue.kind, issue.comm, issue.ranks, issue.pids, issue.warning) == (
        "MISMATCH", "0x1715b7bd1b8fda9e", (0,), (442,), True)
    assert issue.loc.line == 24 and "different AllReduce operation counts" in issue.message
    (identity,) = evidence.identities
    assert (identity.host, identity.pid, identity.comm, identity.comm_rank, identity.comm_size, identity.cuda_dev) == (
        "192.0.2.2", 442, "0x1715b7bd1b8fda9e", 0, 4, 0)
    assert str(identity.loc) == f"{path}:27"
    assert evidence.comms == ["0x1715b7bd1b8fda9e"]


@pytest.mark.parametrize("name", ["ras_status_q0.txt", "ras_status_q1.txt", "ras_verbose_q0.txt", "ras_verbose_q1.txt"])
def test_real_killed_rank(name):
    evidence = parse(REAL / "killed-rank" / name)
    assert evidence.problems == []
    snap = one_snapshot(evidence)
    (comm,) = snap.comms
    assert comm.comm == "0xd5dc471d2873616f"
    assert (comm.size, comm.status, comm.errors) == (4, "RUNNING", ("INCOMPLETE", "ERROR"))
    assert comm.missing_ranks == (1,) and comm.dead_ranks == ()
    ranks = {r.rank: r for r in comm.ranks}
    assert ranks[1].missing and ranks[1].unresponsive and not ranks[1].dead and ranks[1].pid == 711
    assert ranks[0].async_error == ranks[2].async_error == "Remote process error"
    assert (ranks[0].pid, ranks[2].pid) == (710, 712)
    kinds = [(i.kind, i.comm, i.ranks, i.pids, i.warning) for i in snap.issues]
    assert kinds == [
        ("INCOMPLETE", None, (), (711,), False),
        ("INCOMPLETE", "0xd5dc471d2873616f", (1,), (711,), False),
        ("ERROR", "0xd5dc471d2873616f", (0, 2), (710, 712), False),
    ]
    assert "Remote process error" in snap.issues[2].message
    assert [(i.pid, i.comm_rank) for i in evidence.identities] == [(711, 1), (710, 0), (712, 2)]


@pytest.mark.parametrize("name", ["ras_status_q0.txt", "ras_verbose_q0.txt"])
def test_real_transient_skew_q0_mismatch(name):
    snap = one_snapshot(parse(REAL / "transient-skew" / name))
    (comm,) = snap.comms
    assert comm.comm == "0x5eab805e14595f52" and comm.errors == ("MISMATCH",)
    assert comm.count_groups == (RasCountGroup("AllReduce", 273, 3, (0, 1, 2)),
                                 RasCountGroup("AllReduce", 272, 1, (3,)))
    rank3 = next(r for r in comm.ranks if r.rank == 3)
    assert rank3.counts == {"AllReduce": 272} and rank3.pid == 595


@pytest.mark.parametrize("path", [REAL / "transient-skew" / "ras_status_q1.txt",
                                  REAL / "transient-skew" / "ras_verbose_q1.txt",
                                  REAL / "healthy-1rank" / "ras_status.txt",
                                  REAL / "healthy-1rank" / "ras_verbose.txt"])
def test_real_ok_replies(path):
    evidence = parse(path)
    assert evidence.problems == [] and evidence.identities == []
    snap = one_snapshot(evidence)
    (comm,) = snap.comms
    # An OK comm has no block, so its hash is never printed: it is named by its table position.
    assert comm.comm == "#0-0" and comm.errors == () and comm.status == "RUNNING"
    assert comm.size == (1 if "healthy" in str(path) else 4)
    assert snap.issues == () and evidence.comms == []


@pytest.mark.parametrize("path", sorted(REAL.glob("*/ras_*.txt")), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_real_capture_parses_cleanly(path):
    evidence = parse(path)
    assert evidence.version == "2.28.9" and len(evidence.ras) == 1
    # the only diagnostic any 2.28.9 capture earns is the repaired JSON comma (missing ranks, killed-rank)
    assert all(p.severity is Severity.WARNING and "repaired" in p.message for p in evidence.problems)


@pytest.mark.parametrize("kind", ["status", "verbose"])
@pytest.mark.parametrize("query", ["q0", "q1"])
def test_real_subcomm_divergence(kind, query):
    snap = one_snapshot(parse(REAL / "subcomm-divergence" / f"ras_{kind}_{query}.txt"))
    world, tp23, tp01 = snap.comms
    assert (world.comm, world.size, world.errors) == ("0x78ab2c529d3bb1d0", 4, ("MISMATCH",))
    assert world.count_groups == (RasCountGroup("AllReduce", 6, 3, (0, 1, 2)), RasCountGroup("AllReduce", 5, 1, (3,)))
    assert (tp23.comm, tp23.size) == ("0xe23e5d9f32e900a3", 2)
    assert [(r.rank, r.pid, dict(r.counts)) for r in tp23.ranks] == [(0, 437, {"AllReduce": 12}),
                                                                     (1, 438, {"AllReduce": 11})]
    assert (tp01.comm, tp01.size, tp01.errors) == ("#2-0", 2, ())  # OK: its hash 0x74d3a424abb07664 is JSON-only
    # the same process (pid 438, global rank 3) is rank 3 of the world comm and rank 1 of tp{2,3}
    assert {(i.comm, i.comm_rank) for i in parse(REAL / "subcomm-divergence" / f"ras_{kind}_{query}.txt").identities
            if i.pid == 438} == {("0x78ab2c529d3bb1d0", 3), ("0xe23e5d9f32e900a3", 1)}


@pytest.mark.parametrize("name", ["ras_status_q0.txt", "ras_status_q1.txt", "ras_verbose_q0.txt", "ras_verbose_q1.txt"])
def test_real_long_window(name):
    (comm,) = one_snapshot(parse(REAL / "long-window" / name)).comms
    assert comm.comm == "0xea56324e5821c702"
    assert comm.count_groups == (RasCountGroup("AllReduce", 90, 3, (0, 2, 3)), RasCountGroup("AllReduce", 91, 1, (1,)))
    assert next(r for r in comm.ranks if r.rank == 1).pid == 617


@pytest.mark.parametrize("name", ["ras_status_q0.txt", "ras_status_q1.txt", "ras_verbose_q0.txt", "ras_verbose_q1.txt"])
def test_real_type_mismatch(name):
    (comm,) = one_snapshot(parse(REAL / "type-mismatch" / name)).comms
    assert comm.comm == "0x585b471078c86eca"
    assert comm.count_groups == (
        RasCountGroup("AllGather", None, 3, (0, 2, 3)),  # "3 ranks have not launched any operations"
        RasCountGroup("AllGather", 1, 1, (1,)),
        RasCountGroup("AllReduce", 18, 3, (0, 2, 3)),
        RasCountGroup("AllReduce", 17, 1, (1,)),
    )
    ranks = {r.rank: dict(r.counts) for r in comm.ranks}
    assert ranks == {0: {"AllGather": 0, "AllReduce": 18}, 1: {"AllGather": 1, "AllReduce": 17},
                     2: {"AllGather": 0, "AllReduce": 18}, 3: {"AllGather": 0, "AllReduce": 18}}


# -- public outputs (tests/fixtures/public/INDEX.md)

def test_docs08ras_1_healthy_with_prompt():
    evidence = parse(PUBLIC / "nccl-docs08ras-1.txt")
    assert evidence.problems == []
    assert evidence.version == "2.30.7"
    snap = one_snapshot(evidence)
    assert snap.loc.line == 2  # line 1 is the shell prompt `$ ncclras -v`
    (comm,) = snap.comms
    assert (comm.comm, comm.size, comm.status, comm.errors) == ("#0-0", 8, "RUNNING", ())
    assert snap.issues == () and not snap.truncated
    row = parse_group_row("    0         1          2         4         8         8  RUNNING      OK")
    assert (row.group, row.comms, row.nodes, row.ranks_per_node, row.size, row.ranks_in_group) == (
        0, 1, 2, (4, 4), 8, 8)
    assert (row.status, row.errors) == ("RUNNING", ())


def test_docs08ras_2_incomplete_with_range():
    evidence = parse(PUBLIC / "nccl-docs08ras-2.txt")
    assert evidence.problems == [] and evidence.version is None
    snap = one_snapshot(evidence)
    assert snap.nccl_version is None
    (comm,) = snap.comms
    assert (comm.comm, comm.size, comm.status, comm.errors) == ("0x1bdb83b038775869", 8, "RUNNING", ("INCOMPLETE",))
    assert comm.missing_ranks == (7,)
    (rank7,) = comm.ranks
    assert (rank7.rank, rank7.cuda_dev, rank7.pid, rank7.host, rank7.missing) == (7, 3, 3748990, "node1", True)
    job, per_comm = snap.issues
    assert (job.kind, job.comm, job.pids) == ("INCOMPLETE", None, (3748990,))
    assert (per_comm.kind, per_comm.comm, per_comm.ranks) == ("INCOMPLETE", "0x1bdb83b038775869", (7,))
    row = parse_group_row("    0         1          2       3-4         8         7  RUNNING  INCOMPLETE")
    assert row.ranks_per_node == (3, 4) and row.ranks_in_group == 7 and row.errors == ("INCOMPLETE",)


def test_docs08ras_3_dead_without_communicators():
    evidence = parse(PUBLIC / "nccl-docs08ras-3.txt")
    assert evidence.problems == []
    snap = one_snapshot(evidence)
    assert snap.comms == ()
    (dead,) = snap.issues
    assert (dead.kind, dead.pids, dead.warning) == ("DEAD", (3748990,), False)
    assert dead.message.startswith("1 job process is considered dead")


def test_docs08ras_4_straggler():
    evidence = parse(PUBLIC / "nccl-docs08ras-4.txt")
    assert evidence.problems == []
    snap = one_snapshot(evidence)
    (comm,) = snap.comms
    assert (comm.comm, comm.size, comm.errors) == ("0x78db921d1c117b4a", 8, ("MISMATCH",))
    assert comm.count_groups == (RasCountGroup("AllReduce", 64, 7, tuple(range(7))),
                                 RasCountGroup("AllReduce", 60, 1, (7,)))
    rank7 = next(r for r in comm.ranks if r.rank == 7)
    assert (rank7.counts, rank7.cuda_dev, rank7.pid, rank7.host) == ({"AllReduce": 60}, 3, 1650386, "node1")


# -- constructed samples (nccl_formats.md section 6 and tests/fixtures/constructed/ras/README.md)

def test_sample_a_healthy():
    evidence = parse(CONSTRUCTED / "sample-a-healthy-2.29.7.txt")
    snap = one_snapshot(evidence)
    assert evidence.problems == [] and snap.issues == ()
    assert [(c.comm, c.size, c.status, c.errors) for c in snap.comms] == [("#0-0", 4, "RUNNING", ())]


def test_sample_b_per_type_mismatch():
    evidence = parse(CONSTRUCTED / "sample-b-mismatch-2.29.7.txt")
    assert evidence.problems == []
    (comm,) = one_snapshot(evidence).comms
    assert comm.count_groups == (
        RasCountGroup("AllGather", 412, 3, (0, 1, 3)), RasCountGroup("AllGather", 413, 1, (2,)),
        RasCountGroup("AllReduce", 1207, 3, (0, 1, 3)), RasCountGroup("AllReduce", 1206, 1, (2,)),
    )
    ranks = {r.rank: r for r in comm.ranks}
    assert ranks[2].counts == {"AllGather": 413, "AllReduce": 1206} and ranks[2].pid == 51007
    assert ranks[0].counts == {"AllGather": 412, "AllReduce": 1207}


def test_sample_c1_incomplete_and_timeout():
    snap = one_snapshot(parse(CONSTRUCTED / "sample-c1-incomplete-2.29.7.txt"))
    (comm,) = snap.comms
    assert comm.missing_ranks == (3,) and comm.dead_ranks == ()
    assert [(i.kind, i.warning) for i in snap.issues] == [("INCOMPLETE", False), ("INCOMPLETE", False),
                                                           ("TIMEOUT", True)]


def test_sample_c2_dead_marks_the_missing_rank_dead():
    snap = one_snapshot(parse(CONSTRUCTED / "sample-c2-dead-2.29.7.txt"))
    (comm,) = snap.comms
    assert comm.missing_ranks == (3,) and comm.dead_ranks == (3,)
    (rank3,) = comm.ranks
    assert rank3.missing and rank3.unresponsive and rank3.dead and rank3.pid == 51008
    assert [i.kind for i in snap.issues] == ["DEAD", "INCOMPLETE"]


def test_prompts_and_two_replies():
    evidence = parse(CONSTRUCTED / "prompt-two-text-replies-2.29.7.txt")
    assert evidence.problems == []
    first, second = evidence.ras
    assert first.loc.line == 2 and first.comms[0].errors == ("MISMATCH",)
    assert second.comms[0].comm == "#0-0" and second.issues == ()


def test_old_2_25_single_counter_and_missing_list():
    evidence = parse(CONSTRUCTED / "old-2.25.1-incomplete-mismatch.txt")
    assert evidence.problems == []
    incomplete, mismatch = one_snapshot(evidence).comms
    assert incomplete.missing_ranks == (3,)
    assert mismatch.count_groups == (RasCountGroup(None, 812, 1, (0,)), RasCountGroup(None, 811, 1, (1,)))
    assert {r.rank: dict(r.counts) for r in mismatch.ranks} == {0: {"ops": 812}, 1: {"ops": 811}}
    issue = one_snapshot(evidence).issues[1]
    assert (issue.kind, issue.ranks) == ("INCOMPLETE", (3,))


def test_old_2_24_unknown_ranks_and_empty_table():
    evidence = parse(CONSTRUCTED / "old-2.24.3-unknown-then-nocomm.txt")
    assert evidence.problems == []
    first, second = evidence.ras
    (comm,) = first.comms
    rank2 = next(r for r in comm.ranks if r.rank == 2)
    assert rank2.status == "UNKNOWN" and rank2.missing and not rank2.unresponsive
    assert comm.missing_ranks == (2,)
    assert comm.count_groups == (RasCountGroup(None, 1622, 2, (0, 1)), RasCountGroup(None, 1621, 1, (3,)))
    assert second.comms == () and second.issues == () and not second.truncated


def test_comm_walk_garbage_is_tolerated_and_reported():
    evidence = parse(CONSTRUCTED / "commwalk-garbage-2.27.3.txt")
    assert errors(evidence) == []
    warnings = [str(p) for p in evidence.problems]
    assert any(":27: communicators table row 2 is implausible" in w for w in warnings)
    assert any(":40: comm #2-0 (0x93d7000200000001) looks like decoded garbage" in w and "#1762" in w
               for w in warnings)
    assert any(":1: 1 line(s) that are no part of a RAS reply" in w for w in warnings)
    snap = one_snapshot(evidence)
    assert not snap.truncated  # comms dropped as garbage are reported as such; the reply is not cut short
    assert [c.comm for c in snap.comms] == ["0xb3398875b8b2a063", "0x6a1f3e0c5b7d9e21"]
    assert all(i.comm != "0x93d7000200000001" for i in snap.issues)
    assert all(i.comm_rank is not None and i.comm_rank < 2 for i in evidence.identities)


def test_unrecognised_line_is_an_error_with_its_line_and_the_rest_is_read():
    path = CONSTRUCTED / "text-unrecognised-line-2.29.7.txt"
    evidence = parse(path)
    assert errors(evidence) == [f"{path}:27: 1 unrecognised line(s) in this RAS reply; skipped"]
    (comm,) = one_snapshot(evidence).comms
    assert len(comm.count_groups) == 4


def test_reply_cut_short_is_marked_truncated(tmp_path):
    text = (CONSTRUCTED / "sample-b-mismatch-2.29.7.txt").read_text().split("\nErrors\n")[0]
    path = tmp_path / "cut.txt"
    path.write_text(text)
    snap = one_snapshot(parse(path))
    assert snap.truncated and snap.comms[0].errors == ("MISMATCH",)


# -- helpers

def test_normalize_hash():
    assert normalize_hash("1715b7bd1b8fda9e") == "0x1715b7bd1b8fda9e"
    assert normalize_hash("0x222ADD84E116D10") == "0x0222add84e116d10"
    assert normalize_hash(0x3F2A9C1B7D4E8A06) == "0x3f2a9c1b7d4e8a06"
    assert normalize_hash("0x") is None and normalize_hash("zz") is None and normalize_hash(True) is None
    assert normalize_hash("0x12345678901234567") is None


def test_version_and_noise_helpers():
    assert version_tuple("2.28.9+cuda13.0") == (2, 28, 9) and version_tuple("n/a") is None
    for line in ("CLIENT PROTOCOL 2", "SERVER PROTOCOL 2", "OK", "TIMEOUT 5", "SET FORMAT json", "status",
                 "VERBOSE STATUS", "$ ncclras -v", "root@node:~# echo status | nc localhost 28028"):
        assert is_transcript_noise(line), line
    for line in ("TIMEOUT", "#0-0 (1715b7bd1b8fda9e) MISMATCH", "Errors", "  Rank 0 -- GPU 0 managed by process"):
        assert not is_transcript_noise(line), line


# -- no parser raises, whatever the bytes

SOURCES = (RasTextSource(), RasJsonSource(), RasMonitorSource())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.one_of(st.binary(max_size=2000), st.text(max_size=2000).map(lambda t: t.encode("utf-8"))))
def test_no_parser_raises_on_arbitrary_content(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("fuzz") / "input.txt"
    path.write_bytes(data)
    for source in SOURCES:
        evidence = source.parse(InputFile(path=path, name=str(path)))
        assert evidence.format is source.format
    parse_file(InputFile(path=path, name=str(path)))


_TEXT_LINES = st.sampled_from([
    "NCCL version 2.28.9 compiled with CUDA 13.0", "CUDA runtime version 13000, driver version 13000", "",
    "Job summary", "===========", "Communicators... (0.001s)", "=============",
    "Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors",
    "    #  in group  per comm  per node  per comm  in group",
    "    0         1         1         4         4         4   RUNNING  MISMATCH",
    "    1         2         0         0         0         0    NOCOMM  INCOMPLETE,MISMATCH",
    "No communicator data collected!", "Errors", "======", "Warnings", "========", "INCOMPLETE", "DEAD", "TIMEOUT",
    "#0-0 (1715b7bd1b8fda9e) MISMATCH", "#1-1 (93d7000200000001) INCOMPLETE", "#0-0 (d5dc471d2873616f) ERROR",
    "  Communicator ranks have different AllReduce operation counts",
    "  Communicator ranks have different collective operation counts", "  Communicator ranks have different status",
    "  3 ranks have launched up to operation 49", "  2 ranks have not launched any operations",
    "  2 ranks have status NOCOMM", "  The missing ranks: 1,2", "  The unknown ranks: 3",
    "  Rank 0 has launched up to operation 50 -- GPU 0 managed by process 442 on node 192.0.2.2",
    "  Rank 1 -- GPU 0 managed by process 711 on node 192.0.2.2", "  Rank 99999999 -- [process information not found]",
    "  Rank 2 has status NOCOMM -- [process information not found]", "  Rank 3 reported Internal error",
    "  Missing communicator data from 1 rank", "  Missing communicator data from 1 job process",
    "  Process 711 on node 192.0.2.2 managing GPU 0",
    "  1 job process is considered dead (unreachable via the RAS network)",
    "  Asynchronous errors on 2 ranks", "  Initialization error on 1 rank", "  2 ranks reported Remote process error",
    "  Encountered 1 communication timeout while gathering communicator data", "$ ncclras", "OK", "{", "}",
    "[2026-07-14 09:32:10] PEER_DEAD: Process 51008 on node 10.0.0.12 managing GPU 1 ", "ERROR: Unknown command X",
])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(_TEXT_LINES, max_size=60))
def test_text_grammar_in_any_order_never_raises(tmp_path_factory, lines):
    path = tmp_path_factory.mktemp("grammar") / "ras.txt"
    path.write_text("\n".join(lines))
    evidence = RasTextSource().parse(InputFile(path=path, name=str(path)))
    for snap in evidence.ras:
        for comm in snap.comms:
            assert comm.comm.startswith(("0x", "#"))
            assert all(r.rank < (comm.size or 1 << 24) for r in comm.ranks)


def test_broken_gzip_is_a_diagnostic_not_an_exception(tmp_path):
    path = tmp_path / "broken.gz"
    path.write_bytes(b"\x1f\x8bnot really gzip")
    assert parse_file(InputFile(path=path, name=str(path))).problems
    for source in SOURCES:
        evidence = source.parse(InputFile(path=path, name=str(path)))
        assert [p.severity for p in evidence.problems] == [Severity.ERROR] and evidence.ras == []


def test_comm_walk_caveat_on_affected_versions(tmp_path):
    """2.26.2-2.28.9 with missing ranks and more comms: warn even when nothing looks implausible."""
    text = (CONSTRUCTED / "sample-c1-incomplete-2.29.7.txt").read_text().replace("2.29.7", "2.28.9").replace(
        "    0         1         2       1-2         4         3   RUNNING  INCOMPLETE\n",
        "    0         1         2       1-2         4         3   RUNNING  INCOMPLETE\n"
        "    1         1         1         2         2         2   RUNNING      OK\n")
    path = tmp_path / "c1.txt"
    path.write_text(text)
    evidence = parse(path)
    (problem,) = evidence.problems
    assert problem.severity is Severity.WARNING and problem.loc.line == 1 and "#1762" in problem.message
    assert [c.comm for c in one_snapshot(evidence).comms] == ["0x3f2a9c1b7d4e8a06", "#1-0"]
    fixed = parse(CONSTRUCTED / "sample-c1-incomplete-2.29.7.txt")  # 2.29.7 has the fix
    assert fixed.problems == []


# --- replies cut short ------------------------------------------------------------------------------------------


def _cut_points(text: str):
    """Every place a reply can be cut before its end (by character), with the part after it not blank."""
    for n in range(1, len(text)):
        if text[:n].strip() != text.strip() and text[n:].strip():
            yield n


@pytest.mark.parametrize("name", ["extra-op-4rank/ras_status_q1.txt", "killed-rank/ras_verbose_q0.txt",
                                  "subcomm-divergence/ras_status_q0.txt",
                                  "serving-two-drafters-8rank/ras_status_q0.txt"])
def test_a_reply_cut_anywhere_is_marked_truncated_with_a_warning_at_its_line(tmp_path, name):
    """`RasSnapshot.truncated` was computed and never reported, and a reply cut after `Errors` or inside the
    Warnings section was not even marked: it read as complete (diff said CONSISTENT from it). Every cut of these
    real replies is now marked and reported as a warning at the reply's last line."""
    text = (REAL / name).read_text()
    path = tmp_path / "ras_status.txt"
    path.write_text(text)
    whole = parse_file(InputFile(path, "ras_status.txt"))
    assert [s.truncated for s in whole.ras] == [False] and not [p for p in whole.problems if "cut" in p.message]
    for n in list(_cut_points(text))[::7]:
        path.write_text(text[:n])
        evidence = parse_file(InputFile(path, "ras_status.txt"))
        if not evidence.ras:
            continue  # cut inside the version line: not a reply at all
        assert [s.truncated for s in evidence.ras] == [True], (n, text[max(0, n - 60):n])
        (problem,) = [p for p in evidence.problems if " is cut short: " in p.message]
        assert problem.severity is Severity.WARNING and 1 <= problem.loc.line <= text[:n].count("\n") + 1


def test_the_cut_reasons_are_named(tmp_path):
    text = (REAL / "extra-op-4rank" / "ras_status_q1.txt").read_text()
    path = tmp_path / "ras.txt"
    for keep, reason in [("    0         1         1", "it ends in the communicators table"),
                         ("Errors\n======\n", "it ends in the Errors section"),
                         ("Warnings\n", "it ends at the Warnings heading"),
                         ("Warnings\n========\n\n", "no Errors or Warnings block describes"),
                         ("fda9e) MISMATCH\n", "has no line after its heading"),
                         ("operation 49\n", "gives the AllReduce counts of its 4 ranks only in part"),
                         ("operation 5", "its last line has no line break after it")]:
        path.write_text(text[: text.index(keep, text.index("Group")) + len(keep)])
        messages = [p.message for p in parse_file(InputFile(path, "ras.txt")).problems]
        assert any(reason in m for m in messages), (keep, messages)


@pytest.mark.parametrize(("path", "processes"), [
    (CONSTRUCTED / "sample-a-healthy-2.29.7.txt", 4),  # layout (A): the fourth column of its one row
    (PUBLIC / "nccl-docs08ras-1.txt", 8),  # layout (A), its second heading line indented
    (CONSTRUCTED / "commwalk-garbage-2.27.3.txt", 10),  # layout (B): the totals row after the rows per node
])
def test_the_job_summary_gives_the_jobs_process_count(path, processes):
    assert [s.processes for s in parse(path).ras] == [processes]
