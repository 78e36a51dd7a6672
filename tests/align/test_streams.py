"""align/streams.py: every file's collectives merged into per-(comm, rank) streams, contradictions reported."""

from __future__ import annotations

from dataclasses import replace

from ncclforensics.align.streams import build_streams
from ncclforensics.model import (
    CollectiveEvent,
    CommInfo,
    Evidence,
    Location,
    ProcessIdentity,
    Severity,
    SourceFormat,
    collectives_to_frame,
)
from ncclforensics.sources import formats

COMM = "0x1715b7bd1b8fda9e"
FACTS = formats()


def _rows(path: str, fmt: SourceFormat, rank: int, ops: list[tuple[str, int]], comm: str = COMM,
          state: str | None = None, record: bool = False) -> Evidence:
    """One file of `fmt` with rank `rank`'s collectives `ops` in `comm`: lines of a log, entries of a dump."""
    events = [CollectiveEvent(loc=Location(path, None if record else seq, record=seq - 1 if record else None),
                              comm=comm, seq=seq, op=op, count=count, rank=rank, dtype="float32", redop="sum",
                              root=0, state=state)
              for seq, (op, count) in enumerate(ops, start=1)]
    return Evidence(path=path, format=fmt, collectives=collectives_to_frame(events), facts=FACTS[fmt])


OPS = [("AllReduce", 4096), ("AllReduce", 4096), ("Broadcast", 53)]


def test_a_log_and_a_dump_of_one_rank_merge_row_by_row():
    log = _rows("nccl.vm.442.log", SourceFormat.NCCL_LOG, 0, OPS)
    dump = _rows("fr_rank0", SourceFormat.FLIGHT_RECORDER, 0, OPS, state="completed", record=True)
    streams = build_streams([log, dump])
    assert streams.members == {COMM: [0]} and not streams.problems
    rows = streams.stream(COMM, 0)
    assert rows["seq"].to_list() == [1, 2, 3]
    # The log's line is cited; the recorder's word wins for completion; both sources are named.
    assert rows["file"].to_list() == ["nccl.vm.442.log"] * 3 and rows["line"].to_list() == [1, 2, 3]
    assert rows["state"].to_list() == ["completed"] * 3
    assert rows["fr_file"].to_list() == ["fr_rank0"] * 3 and rows["fr_record"].to_list() == [0, 1, 2]
    assert sorted(rows["sources"][0]) == ["flight-recorder", "nccl-log"]


def test_sources_that_disagree_are_reported_and_the_log_wins_the_op():
    log = _rows("nccl.vm.442.log", SourceFormat.NCCL_LOG, 0, OPS)
    dump = _rows("fr_rank0", SourceFormat.FLIGHT_RECORDER, 0, [*OPS[:2], ("AllGather", 53)], record=True)
    streams = build_streams([dump, log])
    assert streams.stream(COMM, 0)["op"].to_list() == ["AllReduce", "AllReduce", "Broadcast"]
    (problem,) = streams.problems
    assert problem.severity is Severity.WARNING and str(problem.loc) == "nccl.vm.442.log:3"
    assert "sources disagree about 1 collectives" in problem.message and "fr_rank0#entries[2]" in problem.message


def test_two_files_of_one_format_for_one_rank_keep_the_first():
    first = _rows("a/nccl.log", SourceFormat.NCCL_LOG, 1, OPS)
    same = _rows("b/nccl.log", SourceFormat.NCCL_LOG, 1, OPS)
    other = _rows("c/nccl.log", SourceFormat.NCCL_LOG, 1, OPS[:2])
    streams = build_streams([first, same, other])
    assert streams.excluded_files == ["b/nccl.log", "c/nccl.log"]
    severities = {p.loc.path: p.severity for p in streams.problems}
    assert severities == {"b/nccl.log": Severity.WARNING, "c/nccl.log": Severity.ERROR}  # duplicate; conflict


def test_rows_without_a_rank_are_left_out_and_said():
    unranked = Evidence(path="paste.log", format=SourceFormat.NCCL_LOG, facts=FACTS[SourceFormat.NCCL_LOG],
                        collectives=collectives_to_frame([CollectiveEvent(loc=Location("paste.log", 1), comm=COMM,
                                                                          seq=1, op="AllReduce", count=8)]))
    streams = build_streams([unranked, _rows("r0.log", SourceFormat.NCCL_LOG, 0, OPS)])
    assert streams.members == {COMM: [0]}
    assert [str(p) for p in streams.problems] == [
        "paste.log: 1 collectives name no rank (no INIT line or rank in the file); left out"]


def test_a_process_group_name_resolves_to_the_comm_with_its_ranks_and_ops():
    logs = [_rows(f"nccl{r}.log", SourceFormat.NCCL_LOG, r, OPS) for r in (0, 1)]
    dumps = [_rows(f"fr_rank{r}", SourceFormat.FLIGHT_RECORDER, r, OPS, comm="0", record=True) for r in (0, 1)]
    info = CommInfo(loc=Location("fr_rank0", record=0, field="pg_config"), comm="0", ranks=(0, 1))
    dumps[0].comm_infos.append(info)
    streams = build_streams([*logs, *dumps])
    assert streams.aliases == {"0": COMM} and streams.members == {COMM: [0, 1]}
    assert streams.expected_members == {COMM: [0, 1]}


def test_a_whole_log_that_initialized_a_comm_and_logged_none_of_its_collectives_launched_none_there(tmp_path):
    """subcomm-divergence's NCCL logs with rank 3's world COLL lines taken out: its log still has the world comm's
    INIT line and its tp comm's collectives, so it launched none in the world comm (0 where the others have 6),
    rather than being left out of it and the world called consistent."""
    from tests.cli_helpers import diff_json
    from fixture_paths import REAL

    source = REAL / "subcomm-divergence"
    for log in sorted(source.glob("nccl.vm.43*.log")):
        lines = log.read_text().splitlines(keepends=True)
        if log.name == "nccl.vm.438.log":  # rank 3; 0x1f332fc0 is its world comm 0x78ab2c529d3bb1d0
            lines = [line for line in lines if "comm 0x1f332fc0 [nranks" not in line]
        (tmp_path / log.name).write_text("".join(lines))
    world = next(c for c in diff_json(str(tmp_path))[1]["comms"] if c["comm"] == "0x78ab2c529d3bb1d0")
    assert world["ranks"] == [0, 1, 2, 3] and world["launched"] == {"0": 6, "1": 6, "2": 6, "3": 0}
    assert world["root_seq_range"] == [1, 1]


def test_a_log_cut_short_beside_a_whole_dump_that_ends_before_the_other_dumps_is_no_cut():
    """Rank 0's log is cut at seq 1; its whole dump goes on to seq 2, where rank 1's dump goes to 3: compared with
    its own kind, the dump says rank 0 launched fewer, as it would with no log beside it. Where rank 0's dump goes as
    far as the other dumps, and only a log goes further, the dump may have been taken while the rank ran: the cut
    stands (pipeline-healthy's rank 0, a log cut at 11 beside a dump of 12, the others' logs at 13)."""
    ops = [("AllReduce", 4096)] * 4
    log = replace(_rows("nccl.vm.442.log", SourceFormat.NCCL_LOG, 0, ops[:1]), cut=Location("nccl.vm.442.log", 2))
    mine = _rows("fr_rank0", SourceFormat.FLIGHT_RECORDER, 0, ops[:2], state="completed", record=True)
    theirs = _rows("fr_rank1", SourceFormat.FLIGHT_RECORDER, 1, ops[:3], state="completed", record=True)
    streams = build_streams([log, mine, theirs])
    assert (COMM, 0) not in streams.cut and (COMM, 0) in streams.launch_ends
    even = _rows("fr_rank1", SourceFormat.FLIGHT_RECORDER, 1, ops[:2], state="completed", record=True)
    further = _rows("nccl.vm.443.log", SourceFormat.NCCL_LOG, 1, ops[:3])
    streams = build_streams([log, mine, even, further])
    assert (COMM, 0) in streams.cut and (COMM, 0) not in streams.launch_ends
    # A trace (or a log) that reads whole may be cut at a line's end: beside a cut log it lifts nothing (every file
    # of serving-reorder-heals' rank 0 cut at once read as a rank that stopped, and a wedge).
    trace_of = _rows("fingerprint_rank0.jsonl", SourceFormat.FINGERPRINT, 0, ops[:2], state="completed")
    traced = _rows("fingerprint_rank1.jsonl", SourceFormat.FINGERPRINT, 1, ops[:3], state="completed")
    streams = build_streams([log, trace_of, traced])
    assert (COMM, 0) in streams.cut


def test_a_process_group_on_record_for_some_of_its_ranks_resolves_to_the_wider_comm_its_ops_agree_with():
    """Watchdog lines name group "0" for ranks 0 and 2 only (rank 1 timed out in another group): the world comm of
    ranks 0, 1, 2 whose logs launch the same ops at those seqs is that group, not a comm of its own."""
    world = [("AllReduce", 1), ("AllReduce", 8), ("AllReduce", 1)]
    logs = [_rows(f"nccl{r}.log", SourceFormat.NCCL_LOG, r, world) for r in (0, 1, 2)]
    logs += [_rows(f"tp{r}.log", SourceFormat.NCCL_LOG, r, [("AllReduce", 2048)] * 3, comm="0x2") for r in (0, 1)]
    timeouts = [_rows(f"torch_rank{r}.log", SourceFormat.TORCH_LOG, r, world, comm="0") for r in (0, 2)]
    streams = build_streams([*logs, *timeouts])
    assert streams.aliases == {"0": COMM} and set(streams.members) == {COMM, "0x2"}
    # (ops that agree with two such comms alike tie the group to neither)
    logs += [_rows(f"ep{r}.log", SourceFormat.NCCL_LOG, r, world, comm="0x3") for r in (0, 1, 2)]
    assert build_streams([*logs, *timeouts]).aliases == {}


def test_a_group_is_no_comm_whose_init_lines_put_a_member_at_another_comm_rank():
    """Rank 2's log puts it at comm rank 1 of COMM; group "2" lists (2, 3), where comm rank 1 is rank 3: whatever
    their ops, COMM is not that group (a comm rank read as the rank's place in another group ties the wrong one).
    """
    log = _rows("nccl2.log", SourceFormat.NCCL_LOG, 2, OPS)
    log.identities.append(ProcessIdentity(loc=Location("nccl2.log", 1), host="vm", pid=7, rank=2, comm=COMM,
                                          comm_rank=1, comm_size=2))
    dump = _rows("fr_rank3", SourceFormat.FLIGHT_RECORDER, 3, OPS, comm="2", record=True)
    dump.comm_infos.append(CommInfo(loc=Location("fr_rank3", record=0, field="pg_config"), comm="2", ranks=(2, 3)))
    assert build_streams([log, dump]).aliases == {}
    # (where it stands at its comm rank, the group is the comm)
    dump.comm_infos[0] = replace(dump.comm_infos[0], ranks=(3, 2))
    assert build_streams([log, dump]).aliases == {"2": COMM}
