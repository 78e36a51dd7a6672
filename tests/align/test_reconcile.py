"""Cross-checking sources: a stuck RAS count below the logs is a contradiction with the CUDA-graph note;
a reply from a running job or a single-rank communicator is not."""

from cli_helpers import diff_json, real

from ncclforensics.align.diagnosis import diagnose
from ncclforensics.align.reconcile import CUDA_GRAPH_NOTE
from ncclforensics.model import (
    CollectiveEvent, Evidence, Location, RasComm, RasRank, RasSnapshot, SourceFormat, collectives_to_frame,
)


def log(rank, n):
    events = [CollectiveEvent(loc=Location(f"r{rank}.log", i + 1), comm="0x00000000000000aa", seq=i + 1,
                              op="AllReduce", rank=rank, comm_rank=rank, count=8, dtype="float32")
              for i in range(n)]
    return Evidence(path=f"r{rank}.log", format=SourceFormat.NCCL_LOG, collectives=collectives_to_frame(events))


def ras(name, counts):
    comm = RasComm(loc=Location(name, 3), comm="0x00000000000000aa", size=2, status="RUNNING",
                   ranks=tuple(RasRank(rank=r, counts={"AllReduce": c}) for r, c in counts.items()))
    return Evidence(path=name, format=SourceFormat.RAS_JSON,
                    ras=[RasSnapshot(loc=Location(name, 1), time=name, comms=(comm,))])


def test_stuck_ras_below_the_logs_is_a_contradiction_with_the_cuda_graph_note():
    evidence = [log(0, 10), log(1, 11), ras("q0", {0: 4, 1: 5}), ras("q1", {0: 4, 1: 5})]
    d = diagnose(evidence)
    found = {(c.rank, tuple(sorted(v for v, _ in c.values.values()))) for c in d.reconciliation.contradictions}
    assert found == {(0, (4, 10)), (1, (5, 11))}
    assert all(c.note == CUDA_GRAPH_NOTE for c in d.reconciliation.contradictions)


def test_running_job_and_single_rank_comm_are_not_contradictions():
    _, d = diff_json(real("transient-skew"))
    assert d["contradictions"] == []
    _, d = diff_json(real("healthy-1rank"))
    assert d["contradictions"] == []


def test_a_timeout_seqnum_contradicts_an_enqueued_count_only_from_above(tmp_path):
    """A timeout at SeqNum s says the rank launched at least s: below PyTorch's enqueued count it is no
    contradiction (it enqueued more behind it), above it it is."""
    timeout = ("[rank0]:[E1104 09:12:03.417220133 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective "
               "operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) "
               "ran for 600041 milliseconds before timing out.\n")
    status = ("[rank0]:[E1104 09:12:03.417560901 ProcessGroupNCCL.cpp:2271] [PG ID 0 PG GUID 0(default_pg) Rank 0]  "
              "failure detected by watchdog at work sequence id: {seq} PG status: last enqueued work: 40, last "
              "completed work: {done}\n")
    path = tmp_path / "rank0.txt"
    for seq, contradicted in ((31, False), (40, False), (42, True)):
        path.write_text(timeout.format(seq=seq) + status.format(seq=seq, done=seq - 1))
        _, d = diff_json(path)
        assert bool(d["contradictions"]) == contradicted, seq
