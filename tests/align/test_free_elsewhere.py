"""align/divergence.py: a rank whose records in its other communicators are whole and all completed was held there
by nothing, so its stream ends where its program stopped, as one in no other communicator does."""

from __future__ import annotations

import polars as pl

from ncclforensics.align.divergence import _free_there, analyze_comm
from ncclforensics.align.streams import Streams, build_streams
from ncclforensics.model import CollectiveEvent, Evidence, Location, SourceFormat, collectives_to_frame
from ncclforensics.sources import formats

TP, DP = "0xb4015cfb493a78a4", "0xd86dc260974255b2"
FACTS = formats()
MODEL = "vllm/model_executor/models/llama.py:61"
DRAFTER = "vllm/v1/spec_decode/eagle.py:233"


def _file(path: str, fmt: SourceFormat, rank: int, comms: dict[str, list[str | None]], state: str | None,
          waits: str | None = None) -> Evidence:
    """One rank's file: per comm, one AllReduce of 2048 per entry, from that call site (None: no call stack); in
    comm `waits`, the last one launched and never completed."""
    record = fmt is SourceFormat.FLIGHT_RECORDER
    events, n = [], 0
    for comm, sites in comms.items():
        for seq, site in enumerate(sites, start=1):
            events.append(CollectiveEvent(loc=Location(path, None if record else n + 1, record=n if record else None),
                                          comm=comm, seq=seq, op="AllReduce", count=2048, rank=rank, dtype="float32",
                                          redop="sum", state="started" if comm == waits and seq == len(sites) else state, callsite=site, stack=site))
            n += 1
    return Evidence(path=path, format=fmt, collectives=collectives_to_frame(events), facts=FACTS[fmt])


def test_a_rank_that_completed_all_it_launched_elsewhere_ends_where_its_program_stopped():
    """502139: rank 0 skipped a drafter pass (seq 2) alone in a tp comm of lookalikes and launched 12 where the
    others launched 13; the dumps of ranks 0 and 2 (call stacks) part at seq 2, ranks 1 and 3 have NCCL logs only (no
    stack). Rank 0's dp collectives all completed (a whole dump): nothing held it there, so ranks 1 and 3, going on to
    13, ran past where its program stopped and side with rank 2: rank 0 departed, not either side of a tie."""
    program = [MODEL, DRAFTER, *[MODEL] * 11]
    skipped = [MODEL, *[MODEL] * 11]
    files = [_file("fr_rank0", SourceFormat.FLIGHT_RECORDER, 0, {TP: skipped, DP: [MODEL] * 3}, "completed"),
             _file("fr_rank2", SourceFormat.FLIGHT_RECORDER, 2, {TP: program, DP: [MODEL] * 3}, "completed", TP),
             _file("nccl.1.log", SourceFormat.NCCL_LOG, 1, {TP: [None] * 13, "0x5845af8cb133ed61": [None] * 3}, None),
             _file("nccl.3.log", SourceFormat.NCCL_LOG, 3, {TP: [None] * 13, "0x9f000eefe33e95e6": [None] * 3}, None)]
    root = analyze_comm(build_streams(files), TP).root
    assert root is not None and root.outlier_ranks == [0] and root.majority
    assert root.seq_range[0] <= 2 <= root.seq_range[1]


def _records(rank: int, ops: list[str], state: str | None) -> pl.DataFrame:
    """A rank's records of one DP pair's collectives, each of one element, all in `state` (None: an NCCL log)."""
    n = len(ops)
    return pl.DataFrame({"rank": [rank] * n, "seq": list(range(1, n + 1)), "op": ops, "count": [1] * n,
                         "state": [state] * n}, schema_overrides={"seq": pl.Int64, "state": pl.String})


def _pair(peer_state: str | None, op: str = "AllReduce") -> Streams:
    # Rank 1 kept an NCCL log of its three collectives in the pair (launches only), rank 5 a dump of the same three.
    parts = {("dp", 1): _records(1, [op] * 3, None), ("dp", 5): _records(5, [op] * 3, peer_state)}
    return Streams(parts=parts, members={"dp": [1, 5]}, launch_ends=set(parts))


def test_a_log_whose_last_all_reduce_a_peer_completed_was_held_by_nothing_there():
    # An all-reduce that completed on rank 5 was joined by rank 1: rank 1 was not blocked in it.
    assert _free_there(_pair("completed"), "dp", 1)
    # A peer that launched it but never completed it says nothing; nor does a broadcast a root may finish alone.
    assert not _free_there(_pair("launched"), "dp", 1)
    assert not _free_there(_pair(None), "dp", 1)
    assert not _free_there(_pair("completed", op="Broadcast"), "dp", 1)
