"""align/jobs.py: the files of one job kept together, another job's left out, whatever ties or parts them."""

from __future__ import annotations

from ncclforensics.align.jobs import split_jobs
from ncclforensics.align.notes import JoinedByDumps
from ncclforensics.model import CollectiveEvent, CommInfo, Evidence, Location, ProcessIdentity, SourceFormat
from ncclforensics.model import collectives_to_frame
from ncclforensics.sources import formats

FACTS = formats()
# Four ranks: TP groups (0, 1) and (2, 3), DP groups (0, 2) and (1, 3). Rank 1 skipped DP's first collective and
# rank 2 the other DP's, so neither made that communicator (PyTorch makes them lazily): ranks 0 and 1 share only
# their TP comm, ranks 2 and 3 only theirs.
GROUPS = {"1": (0, 1), "2": (2, 3), "3": (0, 2), "4": (1, 3)}
TP = [("AllReduce", 2048)] * 3
NUM_TOKENS = [("AllReduce", 1)]


def _log(pid: int, comms: dict[str, tuple[int, list[tuple[str, int]]]]) -> Evidence:
    """One process's NCCL log: per comm hash, its comm rank (of 2) and its collectives."""
    path = f"logs/nccl.node.{pid}.log"
    identities = [ProcessIdentity(loc=Location(path, 1), host="node", pid=pid, rank=comm_rank, comm=comm,
                                  comm_rank=comm_rank, comm_size=2) for comm, (comm_rank, _) in comms.items()]
    events = [CollectiveEvent(loc=Location(path, seq + 1), comm=comm, seq=seq, op=op, count=count, rank=comm_rank,
                              comm_rank=comm_rank, comm_size=2, dtype="float32", host="node", pid=pid)
              for comm, (comm_rank, ops) in comms.items() for seq, (op, count) in enumerate(ops, start=1)]
    return Evidence(path=path, format=SourceFormat.NCCL_LOG, collectives=collectives_to_frame(events),
                    identities=identities, facts=FACTS[SourceFormat.NCCL_LOG])


def _dump(rank: int, ops: dict[str, list[tuple[str, int]]]) -> Evidence:
    """Rank `rank`'s Flight Recorder dump: its groups (pg_config) and, per group name, its collectives."""
    path = f"logs/fr_rank{rank}"
    infos = [CommInfo(loc=Location(path, field="pg_config"), comm=name, name=name, ranks=ranks)
             for name, ranks in GROUPS.items() if rank in ranks]
    events = [CollectiveEvent(loc=Location(path, record=index), comm=name, seq=seq, op=op, count=count, rank=rank,
                              dtype="float32", state="launched")
              for index, (name, seq, (op, count)) in enumerate(
                  (name, seq, op) for name, listed in ops.items() for seq, op in enumerate(listed, start=1))]
    return Evidence(path=path, format=SourceFormat.FLIGHT_RECORDER, collectives=collectives_to_frame(events),
                    comm_infos=infos, facts=FACTS[SourceFormat.FLIGHT_RECORDER])


def _run(hashes: str, first_pid: int) -> list[Evidence]:
    """One run's four logs; `hashes` tells runs apart (NCCL draws a new commId each run)."""
    tp01, tp23, dp02, dp13 = (f"0x{hashes}{n}" for n in ("01", "23", "02", "13"))
    return [_log(first_pid, {dp02: (0, NUM_TOKENS), tp01: (0, TP)}), _log(first_pid + 1, {tp01: (1, TP)}),
            _log(first_pid + 2, {tp23: (0, TP)}), _log(first_pid + 3, {dp13: (1, NUM_TOKENS), tp23: (1, TP)})]


DUMPS = [_dump(1, {"1": TP}), _dump(2, {"2": TP}), _dump(3, {"4": NUM_TOKENS, "2": TP})]


def test_logs_sharing_no_comm_are_one_job_where_the_dumps_place_them_in_one():
    """The dumps of ranks 1, 2 and 3 fit the processes of both pairs (rank 3's dump has the DP AllReduce x1 and
    the TP AllReduces of the second pair's process 103; rank 2's the TP AllReduces of its comm rank 0, 102), each
    process a dump of its own, and four processes are no more than the job's four ranks: one job, nothing left
    out (the second pair was "from a different job")."""
    evidence = _run("aa", 100) + DUMPS
    kept, problems, _ = split_jobs(evidence)
    assert [e.path for e in kept] == [e.path for e in evidence]
    assert not [p for p in problems if "different job" in p.message]


def _without_rank_2(run: list[Evidence]) -> list[Evidence]:
    return [log for log in run if not log.path.endswith("2.log")]


def test_logs_of_ranks_without_dumps_are_the_job_where_the_dumps_groups_place_them():
    """Dumps of ranks 0 and 1 alone, logs of ranks 0, 1 and 3: process 103 fits no dump, but its DP comm (comm
    rank 1, AllReduce x1) is a DP group's member at a rank with no dump, (0, 2)'s rank 2 or (1, 3)'s rank 3, and its
    TP comm (comm rank 1) is (1, 3)'s: rank 3. Three processes at three ranks of the dumps' job: one job (its log
    was "from a different job", and whatever diverged in it was never read)."""
    dumps = [_dump(0, {"3": NUM_TOKENS, "1": TP}), _dump(1, {"1": TP})]
    evidence = _without_rank_2(_run("aa", 100)) + dumps
    kept, problems, notes = split_jobs(evidence)
    assert [e.path for e in kept] == [e.path for e in evidence]
    assert not [p for p in problems if "different job" in p.message]
    assert notes == [JoinedByDumps(("logs/nccl.node.103.log",))]  # (the answer says what joined it)


def test_two_runs_of_one_job_stay_apart_though_the_dumps_groups_place_both():
    """The same, with a second run's logs beside: each run's rank 3 is placed alike, and six processes are more
    than the four ranks of the dumps' job."""
    dumps = [_dump(0, {"3": NUM_TOKENS, "1": TP}), _dump(1, {"1": TP})]
    first, second = _without_rank_2(_run("aa", 100)), _without_rank_2(_run("bb", 200))
    kept, problems, _ = split_jobs(first + second + dumps)
    assert [p for p in problems if "different job" in p.message]
    assert {e.path for e in first} - {e.path for e in kept} or {e.path for e in second} - {e.path for e in kept}


def test_two_runs_of_one_job_stay_apart_though_the_dumps_fit_both():
    """Two runs side by side, same program, their own hashes: each run's processes fit the dumps alike, but eight
    processes are more than the four ranks the dumps' job has."""
    first, second = _run("aa", 100), _run("bb", 200)
    kept, problems, _ = split_jobs(first + second + DUMPS)
    left_out = {p.loc.path for p in problems if "different job" in p.message}
    assert left_out and not left_out & {e.path for e in kept}
    assert {e.path for e in first} - {e.path for e in kept} or {e.path for e in second} - {e.path for e in kept}


def test_dumps_of_two_jobs_tie_nothing():
    """Two dumps of one rank (or of one group with other ranks) are not one job's: they place nobody."""
    other = _dump(3, {"4": NUM_TOKENS, "2": TP})
    other = Evidence(path="logs/other/fr_rank3", format=other.format, collectives=other.collectives,
                     comm_infos=other.comm_infos, facts=other.facts)
    _, problems, _ = split_jobs(_run("aa", 100) + DUMPS + [other])
    assert [p for p in problems if "different job" in p.message]
