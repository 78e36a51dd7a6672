"""The receipts of a diagnosis: every kind the analysis can give has its words, and they say its facts."""

from __future__ import annotations

from ncclforensics.align import receipts as r
from ncclforensics.align.answers import OpAt
from ncclforensics.model import Location
from ncclforensics.report.receipts import receipt_words

OP = OpAt(rank=2, seq=25, op="AllReduce", count=4096, dtype="float32", redop="sum", root=None, state="started",
          callsite="mtp.layers.0", step=5, loc=Location("nccl_rank2.log", 40))

SAMPLES = [
    r.RootOp(2, OP, True),
    r.RecorderState(2, 25, None),
    r.JournaledDecision(2, 5, "run"),
    r.FirstVisible(2, 26, OP),
    r.WedgeOp(2, OP),
    r.WedgeMark("0xa"),
    r.CountedLaunches(0, "67", 6464),
    r.CountsPastRecords(0, "1", 8, 6, 4, Location("fingerprint_rank0.jsonl", 4)),
    r.WatchdogStop(0, "desync_report", 8, "AllGather", "[0] Timeout at collective: _ALLGATHER_BASE, #8"),
    r.NoDesyncReport(3, "Failed to retrieve TCPStore key"),
    r.WatchdogStop(None, "timeout", 26, "ALLREDUCE", "Watchdog caught collective operation timeout"),
    r.StepChecksumsSplit(5, ((0, 12.5), (2, 14.0))),
    r.WrongChecksum(2, 5, 14.0, 12.5),
    r.RasCommState("0xa", "MISMATCH"),
    r.RasJobIssue("DEAD", "process unreachable", (77,), 2),
    r.RasRanksGone("0xa", (1, 3), "dead"),
    r.PeerDied(0, "remote process exited or there was a network error"),
]


def _kinds(cls: type) -> set[type]:
    return {k for sub in cls.__subclasses__() for k in {sub, *_kinds(sub)}}


def test_every_kind_of_receipt_has_a_sample_and_words():
    assert _kinds(r.Receipt) == {type(fact) for fact in SAMPLES}
    for fact in SAMPLES:
        text = receipt_words(fact)
        assert text and "\n" not in text and "None" not in text, (fact, text)


def test_a_receipt_says_its_facts():
    assert receipt_words(r.RootOp(2, OP, True)) == "outlier 2 seq 25: AllReduce 4096 x float32 from mtp.layers.0"
    assert receipt_words(r.RasRanksGone("0xa", (1, 3), "dead")) == "ranks 1 and 3 considered dead by RAS for comm 0xa"
    assert receipt_words(r.RasRanksGone("0xa", (1,), "unresponsive")) == \
        "rank 1 unreachable by RAS (not called dead) for comm 0xa"
    assert receipt_words(r.RasJobIssue("DEAD", "process unreachable", (77,), 1)) == (
        "RAS DEAD: process unreachable (pid 77); the same in 1 more reply")
    assert receipt_words(r.WatchdogStop(1, "timeout", 26, "ALLREDUCE", "ignored")) == "rank 1: timeout at seq 26 (ALLREDUCE)"
    # a run that stopped nowhere in particular: a rank's last collective is its last on record, not a wedge
    assert receipt_words(r.WedgeOp(2, OP), wedge_shown=False).startswith("last on record: rank 2 launched seq 25")
    assert r.WrongChecksum(2, 5, 14.0, 12.5).kind == "wrong_checksum"
    assert receipt_words(r.CountsPastRecords(0, "1", 8, 6, 4, Location("fingerprint_rank0.jsonl", 4))) == (
        "rank 0: by PyTorch's counts launched 8, completed 6 in comm 1, past its records, which end at seq 4 "
        "(fingerprint_rank0.jsonl:4)")
    # a desync report numbers collectives its own way: its `#8` is no seq
    assert receipt_words(r.WatchdogStop(0, "desync_report", 8, "AllGather", "ignored")) == (
        "rank 0: desync report, timeout at its collective #8 (AllGather), by the report's own count")
