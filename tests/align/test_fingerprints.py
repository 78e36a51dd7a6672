"""align/fingerprints.py: per-collective traces tied to the streams they describe."""

from __future__ import annotations

from ncclforensics.align.fingerprints import attach_fingerprints
from ncclforensics.align.streams import build_streams
from ncclforensics.model import CollectiveEvent, Evidence, FingerprintRow, Location, SourceFormat, collectives_to_frame
from ncclforensics.sources import formats

FACTS = formats()
TP, DP = "0x1715b7bd1b8fda9e", "0x2bd1ce0a0a1b2c3d"


def _rows(path: str, fmt: SourceFormat, rank: int, comm: str, ops: list[tuple[str, int]]) -> Evidence:
    record = fmt is SourceFormat.FLIGHT_RECORDER
    events = [CollectiveEvent(loc=Location(path, None if record else seq, record=seq - 1 if record else None),
                              comm=comm, seq=seq, op=op, count=count, rank=rank, dtype="float32", redop="sum",
                              root=0, state="completed" if record else None)
              for seq, (op, count) in enumerate(ops, start=1)]
    return Evidence(path=path, format=fmt, collectives=collectives_to_frame(events), facts=FACTS[fmt])


def test_a_trace_of_a_rank_in_two_comms_does_not_go_to_one_comm_alone():
    """Rank 0's tp collectives are in its dump, its dp one in its NCCL log only: nothing orders the two comms, so
    nothing says where its trace's dp record sits. Its trace (digests only: no op or count to check) is as long as
    its tp stream, which it would fit record by record, with every tag one off (its first record is of dp)."""
    evidence = [_rows("fr_rank0", SourceFormat.FLIGHT_RECORDER, 0, TP, [("AllReduce", 2048)] * 3),
                _rows("nccl.0.log", SourceFormat.NCCL_LOG, 0, DP, [("AllReduce", 1)])]
    trace = [FingerprintRow(loc=Location("fingerprint_rank0.jsonl", i + 1), rank=0, step=0, op=i, tag=tag,
                            digest=f"{i:016x}") for i, tag in enumerate(["dp", "layers.0", "layers.1"])]
    streams = attach_fingerprints(build_streams(evidence), trace)
    assert streams.stream(TP, 0).get_column("tag").to_list() == [None, None, None]
