"""align/fingerprints.py: per-collective traces tied to the streams they describe."""

from __future__ import annotations

from dataclasses import replace

from ncclforensics.align.fingerprints import attach_fingerprints
from ncclforensics.align.streams import build_streams
from ncclforensics.model import (CollectiveEvent, Evidence, FingerprintRow, Location, ProcessIdentity, SourceFormat,
                                 collectives_to_frame)
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


def _event(path: str, rank: int, comm: str, seq: int, count: int, *, line: int | None = None,
           record: int | None = None) -> CollectiveEvent:
    return CollectiveEvent(loc=Location(path, line, record=record), comm=comm, seq=seq, op="AllReduce", count=count,
                           rank=rank, dtype="float32", redop="sum", root=0,
                           state="completed" if record is not None else None)


def test_a_trace_of_a_rank_in_two_comms_follows_a_log_cut_short_and_the_dump_that_goes_on_past_it():
    """Rank 0's NCCL log holds its dp all-reduce and tp seqs 1-2, then is cut; its dump's ring holds tp seqs 2-3.
    The row both hold (tp seq 2) ties the dump's order to the log's, so tp seq 3 goes after it: the rank's issue
    order is dp 1, tp 1, tp 2, tp 3, and its trace of four records gives each its tag."""
    log = [_event("nccl.0.log", 0, DP, 1, 1, line=10), _event("nccl.0.log", 0, TP, 1, 2048, line=11),
           _event("nccl.0.log", 0, TP, 2, 2048, line=12)]
    dump = [_event("fr_rank0", 0, TP, 2, 2048, record=0), _event("fr_rank0", 0, TP, 3, 2048, record=1)]
    evidence = [Evidence(path="nccl.0.log", format=SourceFormat.NCCL_LOG, collectives=collectives_to_frame(log),
                         facts=FACTS[SourceFormat.NCCL_LOG]),
                Evidence(path="fr_rank0", format=SourceFormat.FLIGHT_RECORDER, collectives=collectives_to_frame(dump),
                         facts=FACTS[SourceFormat.FLIGHT_RECORDER])]
    trace = [FingerprintRow(loc=Location("fingerprint_rank0.jsonl", i + 1), rank=0, step=0, op=i, tag=tag,
                            kind="AllReduce", numel=numel, digest=f"{i:016x}")
             for i, (tag, numel) in enumerate([("dp", 1), ("layers.0", 2048), ("layers.1", 2048), ("lm", 2048)])]
    streams = attach_fingerprints(build_streams(evidence), trace)
    assert streams.stream(TP, 0).get_column("tag").to_list() == ["layers.0", "layers.1", "lm"]
    assert streams.stream(DP, 0).get_column("tag").to_list() == ["dp"]


def test_a_trace_past_a_log_cut_before_the_ranks_other_comm_goes_where_its_digests_are_shared():
    """Rank 0's NCCL log is cut after its first collective, of its DP pair {0, 2}: nothing else names its TP pair
    {0, 1}. Its trace goes on with two records whose digests rank 1, whose log names the TP comm, shares, then one
    rank 2 shares. A digest is one physical collective's: the two are rank 0's TP seqs 1 and 2, not its DP pair's
    seqs 2 and 3 (carried on the DP stream, every record after the cut would be the pair's)."""
    evidence = [_rows("nccl.0.log", SourceFormat.NCCL_LOG, 0, DP, [("AllReduce", 1)]),
                _rows("nccl.1.log", SourceFormat.NCCL_LOG, 1, TP, [("AllReduce", 64)] * 2),
                _rows("nccl.2.log", SourceFormat.NCCL_LOG, 2, DP, [("AllReduce", 1)] * 2)]
    records = {0: [("dp", 1, "d1"), ("attn", 64, "t1"), ("mlp", 64, "t2"), ("dp", 1, "d2")],
               1: [("attn", 64, "t1"), ("mlp", 64, "t2")], 2: [("dp", 1, "d1"), ("dp", 1, "d2")]}
    trace = [FingerprintRow(loc=Location(f"fingerprint_rank{rank}.jsonl", i + 1), rank=rank, step=0, op=i, tag=tag,
                            kind="AllReduce", numel=numel, digest=digest)
             for rank, rows in records.items() for i, (tag, numel, digest) in enumerate(rows)]
    streams = attach_fingerprints(build_streams(evidence), trace)
    assert streams.stream(DP, 0).get_column("tag").to_list() == ["dp", "dp"]
    assert streams.stream(TP, 0).get_column("tag").to_list() == ["attn", "mlp"]
    assert streams.stream(TP, 0).get_column("seq").to_list() == [1, 2] and streams.members[TP] == [0, 1]


def test_a_trace_past_a_log_cut_goes_where_others_records_of_its_digest_are_though_a_members_trace_stops_sooner():
    """Rank 2 is in TP {0, 1, 2, 3} and DP {2, 4}; its NCCL log holds DP seq 1 and TP seq 1, then is cut. Its trace
    goes on with lm (256) before mlp (64), the others' TP seqs 2 and 3 swapped. Rank 3's trace stops after TP seq 1,
    so the ranks sharing each later digest are 0, 1 and 2, no comm's members exactly; but ranks 0 and 1, whose logs
    name the comm, hold those digests at TP seqs 2 and 3. A digest is one physical collective's: rank 2's records
    are its TP seqs 2 and 3, where its sizes part from the others' (dropped, the reorder is on no record)."""
    cut_log = Evidence(path="nccl.2.log", format=SourceFormat.NCCL_LOG, facts=FACTS[SourceFormat.NCCL_LOG],
                       collectives=collectives_to_frame([_event("nccl.2.log", 2, DP, 1, 1, line=1),
                                                         _event("nccl.2.log", 2, TP, 1, 64, line=2)]),
                       cut=Location("nccl.2.log", 3))
    evidence = [*(_rows(f"nccl.{r}.log", SourceFormat.NCCL_LOG, r, TP, [("AllReduce", 64)] * 2 + [("AllReduce", 256)])
                  for r in (0, 1, 3)), cut_log, _rows("nccl.4.log", SourceFormat.NCCL_LOG, 4, DP, [("AllReduce", 1)])]
    tp = [("attn", 64, "t1"), ("mlp", 64, "t2"), ("lm", 256, "t3")]
    records = {0: tp, 1: tp, 3: tp[:1], 2: [("dp", 1, "d1"), ("attn", 64, "t1"), ("lm", 256, "t2"), ("mlp", 64, "t3")],
               4: [("dp", 1, "d1")]}
    trace = [FingerprintRow(loc=Location(f"fingerprint_rank{rank}.jsonl", i + 1), rank=rank, step=0, op=i, tag=tag,
                            kind="AllReduce", numel=numel, digest=digest)
             for rank, rows in records.items() for i, (tag, numel, digest) in enumerate(rows)]
    streams = attach_fingerprints(build_streams(evidence), trace)
    assert streams.stream(TP, 2).get_column("tag").to_list() == ["attn", "lm", "mlp"]
    assert streams.stream(TP, 2).get_column("count").to_list() == [64, 256, 64]
    assert streams.stream(TP, 2).get_column("seq").to_list() == [1, 2, 3]
    assert streams.stream(DP, 2).get_column("tag").to_list() == ["dp"]


def _split_rank_evidence(dumped_count: int) -> list[Evidence]:
    """Rank 0's NCCL log holds DP seq 1 and TP seqs 1-3; rank 1's log holds DP seq 1 and is cut, and its dump's ring
    keeps TP seq 3 alone (`dumped_count` its size): no row both hold, so no source orders its two comms."""
    log0 = [_event("nccl.0.log", 0, DP, 1, 1, line=1), *(_event("nccl.0.log", 0, TP, s, 64, line=1 + s)
                                                         for s in (1, 2, 3))]
    evidence = [Evidence(path="nccl.0.log", format=SourceFormat.NCCL_LOG, facts=FACTS[SourceFormat.NCCL_LOG],
                         collectives=collectives_to_frame(log0)),
                Evidence(path="nccl.1.log", format=SourceFormat.NCCL_LOG, facts=FACTS[SourceFormat.NCCL_LOG],
                         collectives=collectives_to_frame([_event("nccl.1.log", 1, DP, 1, 1, line=1)]),
                         cut=Location("nccl.1.log", 2)),
                Evidence(path="fr_rank1", format=SourceFormat.FLIGHT_RECORDER,
                         facts=FACTS[SourceFormat.FLIGHT_RECORDER],
                         collectives=collectives_to_frame([_event("fr_rank1", 1, TP, 3, dumped_count, record=0)]))]
    return evidence


def _swapped_traces() -> list[FingerprintRow]:
    records = {0: [("dp", 1, "d1"), ("attn", 64, "t1"), ("mlp", 64, "t2"), ("lm", 64, "t3")],
               1: [("dp", 1, "d1"), ("mlp", 64, "t1"), ("attn", 64, "t2")]}  # (rank 1's trace cut after two)
    return [FingerprintRow(loc=Location(f"fingerprint_rank{rank}.jsonl", i + 1), rank=rank, step=0, op=i, tag=tag,
                           kind="AllReduce", numel=numel, digest=digest)
            for rank, rows in records.items() for i, (tag, numel, digest) in enumerate(rows)]


def test_a_trace_no_issue_order_ties_goes_where_others_records_of_its_digests_are():
    """Rank 1's comms are in no order a source gives (a log cut after DP seq 1, a ring from TP seq 3 on), so its
    trace lines up with none of its streams. Its records share digests with rank 0's, whose trace is tied: a digest
    is one physical collective's, at one seq of its comm on every member, so rank 1's records are its DP seq 1 and
    TP seqs 1 and 2, under tags swapped from rank 0's there (misaligned: the evidence of the divergence)."""
    streams = attach_fingerprints(build_streams(_split_rank_evidence(64)), _swapped_traces())
    assert streams.stream(TP, 1).get_column("seq").to_list() == [1, 2, 3]
    assert streams.stream(TP, 1).get_column("tag").to_list() == ["mlp", "attn", None]
    assert streams.stream(TP, 0).get_column("tag").to_list() == ["attn", "mlp", "lm"]
    assert streams.stream(DP, 1).get_column("tag").to_list() == ["dp"]


def test_digests_that_part_from_the_ranks_own_row_place_nothing():
    """As above, but rank 0's digest of TP seq 3 is the one rank 1 read back second (a result two collectives share
    by chance), and rank 1's ring holds its own TP seq 3 at another size than that record: the digests are no tie,
    so none of the trace's records is placed."""
    traces = [replace(f, digest="t3") if (f.rank, f.tag) == (0, "mlp") else
              replace(f, digest="t2") if (f.rank, f.tag) == (0, "lm") else f for f in _swapped_traces()]
    streams = attach_fingerprints(build_streams(_split_rank_evidence(256)), traces)
    assert streams.stream(TP, 1).get_column("seq").to_list() == [3]
    assert streams.stream(TP, 1).get_column("tag").to_list() == [None]


def test_a_trace_past_a_log_cut_goes_where_others_records_of_its_digests_are_not_on_the_ones_stream():
    """World {0, 1, 2, 3} and TP {2, 3}; rank 3's NCCL log is cut after its first world all-reduce, before its TP
    comm's init. Its trace goes on with TP records (digests rank 2's log puts at TP seqs 1 and 2), a world one (rank
    2's world seq 2) and one no rank shares. Rank 3 is a world member and the digests' holders (ranks 2 and 3) are
    too, but a digest is one physical collective's: the TP records are rank 3's TP seqs 1 and 2, though the holders
    are TP's members exactly, the world record is world seq 2, and the record nothing places goes nowhere (carried
    on the world stream, rank 3 would have launched four more there than it did)."""
    rank2 = [_event("nccl.2.log", 2, DP, 1, 1, line=1), _event("nccl.2.log", 2, TP, 1, 64, line=2),
             _event("nccl.2.log", 2, TP, 2, 64, line=3), _event("nccl.2.log", 2, DP, 2, 1, line=4)]
    cut_log = Evidence(path="nccl.3.log", format=SourceFormat.NCCL_LOG, facts=FACTS[SourceFormat.NCCL_LOG],
                       collectives=collectives_to_frame([_event("nccl.3.log", 3, DP, 1, 1, line=1)]),
                       cut=Location("nccl.3.log", 2))
    evidence = [*(_rows(f"nccl.{r}.log", SourceFormat.NCCL_LOG, r, DP, [("AllReduce", 1)] * 2) for r in (0, 1)),
                Evidence(path="nccl.2.log", format=SourceFormat.NCCL_LOG, collectives=collectives_to_frame(rank2),
                         facts=FACTS[SourceFormat.NCCL_LOG]), cut_log]
    mine = [("dp", 1, "d1"), ("attn", 64, "t1"), ("mlp", 64, "t2"), ("dp", 1, "d2")]
    records = {2: mine, 3: [*mine, ("lm", 64, "x")]}
    trace = [FingerprintRow(loc=Location(f"fingerprint_rank{rank}.jsonl", i + 1), rank=rank, step=0, op=i, tag=tag,
                            kind="AllReduce", numel=numel, digest=digest)
             for rank, rows in records.items() for i, (tag, numel, digest) in enumerate(rows)]
    streams = attach_fingerprints(build_streams(evidence), trace)
    assert streams.stream(DP, 3).get_column("tag").to_list() == ["dp", "dp"]
    assert streams.stream(DP, 3).get_column("seq").to_list() == [1, 2]
    assert streams.stream(TP, 3).get_column("tag").to_list() == ["attn", "mlp"]
    assert streams.stream(TP, 3).get_column("seq").to_list() == [1, 2]


def _cut_after_tp_init(world_ops: list[tuple[str, int]]) -> list[Evidence]:
    """World {0, 1, 2, 3} and TP {2, 3}. Rank 2's whole log holds world seq 1, TP seqs 1-3 (two all-reduces of 4096,
    an all-gather of 1000) and world seq 2; ranks 0 and 1 launched `world_ops` in the world comm; rank 3's log holds
    its world seq 1, then its TP comm's INIT, and is cut there."""
    rank2 = [_event("nccl.2.log", 2, DP, 1, 1, line=1), _event("nccl.2.log", 2, TP, 1, 4096, line=2),
             _event("nccl.2.log", 2, TP, 2, 4096, line=3),
             replace(_event("nccl.2.log", 2, TP, 3, 1000, line=4), op="AllGather"),
             _event("nccl.2.log", 2, DP, 2, 1, line=5)]
    cut_log = Evidence(path="nccl.3.log", format=SourceFormat.NCCL_LOG, facts=FACTS[SourceFormat.NCCL_LOG],
                       collectives=collectives_to_frame([_event("nccl.3.log", 3, DP, 1, 1, line=1)]),
                       identities=[ProcessIdentity(Location("nccl.3.log", 2), rank=3, comm=TP, comm_rank=1,
                                                   comm_size=2)],
                       cut=Location("nccl.3.log", 3))
    return [*(_rows(f"nccl.{r}.log", SourceFormat.NCCL_LOG, r, DP, world_ops) for r in (0, 1)),
            Evidence(path="nccl.2.log", format=SourceFormat.NCCL_LOG, collectives=collectives_to_frame(rank2),
                     facts=FACTS[SourceFormat.NCCL_LOG]), cut_log]


def _rank3_trace() -> list[FingerprintRow]:
    """Rank 3's trace, sums only (nothing shared by digest): world seq 1, then its three TP collectives."""
    records = [("dp", "AllReduce", 1), ("attn", "AllReduce", 4096), ("mlp", "AllReduce", 4096),
               ("lm", "AllGather", 1000)]
    return [FingerprintRow(loc=Location("fingerprint_rank3.jsonl", i + 1), rank=3, step=0, op=i, tag=tag, kind=kind,
                           numel=numel, sum=float(100 * i + 7)) for i, (tag, kind, numel) in enumerate(records)]


def test_a_trace_past_a_log_cut_after_another_comms_init_goes_to_the_one_comm_whose_ops_it_matches():
    """Rank 3's records past its log's cut may be of either comm its INIT lines name (the world, TP): no digest
    places them, but their ops (4096 floats, an all-gather of 1000) are among those its TP peer launched and none
    the world's members did (1 x int32 only). They are rank 3's TP seqs 1-3, not world seqs 2-4 (carried on the
    world stream by default, rank 3 would have launched three more there, unlike every other member)."""
    streams = attach_fingerprints(build_streams(_cut_after_tp_init([("AllReduce", 1)] * 2)), _rank3_trace())
    assert streams.stream(DP, 3).get_column("seq").to_list() == [1]
    assert streams.stream(DP, 3).get_column("tag").to_list() == ["dp"]
    assert streams.stream(TP, 3).get_column("seq").to_list() == [1, 2, 3]
    assert streams.stream(TP, 3).get_column("tag").to_list() == ["attn", "mlp", "lm"]
    assert streams.members[TP] == [2, 3]


def test_a_trace_past_a_log_cut_whose_ops_two_comms_launched_stays_unplaced():
    """As above, but the world's members launched all-reduces of 4096 floats too: rank 3's next record fits both
    comms its log initialized, so nothing places it, or any record after it (it may have taken a seq of either)."""
    streams = attach_fingerprints(build_streams(_cut_after_tp_init([("AllReduce", 1), ("AllReduce", 4096)])),
                                  _rank3_trace())
    assert streams.stream(DP, 3).get_column("seq").to_list() == [1]
    assert (TP, 3) not in streams.parts


def test_a_log_cut_where_its_peers_is_cut_short_once_a_trace_carries_the_peer_past_it():
    """Ranks 0 and 1's NCCL logs are both cut after their first all-reduce, so neither stream ends before the
    other's; rank 1's trace goes on with seq 2, whose result needed rank 0's part in it. Rank 0's log ends at seq 1
    because the file does: its end is no launch end, and the stop is not put at seq 2, which both ranks got past
    (once it was, pinned, where the job ran on to seq 12)."""
    from ncclforensics.align.diagnosis import diagnose
    from ncclforensics.model import Verdict

    logs = [Evidence(path=f"nccl.{r}.log", format=SourceFormat.NCCL_LOG, facts=FACTS[SourceFormat.NCCL_LOG],
                     collectives=collectives_to_frame([_event(f"nccl.{r}.log", r, TP, 1, 512, line=1)]),
                     cut=Location(f"nccl.{r}.log", 2)) for r in (0, 1)]
    trace = [FingerprintRow(loc=Location(f"fingerprint_rank{rank}.jsonl", i + 1), rank=rank, step=0, op=i, tag=tag,
                            kind="AllReduce", numel=512, digest=f"{i:016x}")
             for rank, tags in ((0, ["attn"]), (1, ["attn", "moe"])) for i, tag in enumerate(tags)]
    streams = attach_fingerprints(build_streams(logs), trace)
    assert streams.stream(TP, 1).get_column("seq").to_list() == [1, 2]
    assert set(streams.cut) == {(TP, 0)} and (TP, 0) not in streams.launch_ends
    traces = [Evidence(path=f"fingerprint_rank{r}.jsonl", format=SourceFormat.FINGERPRINT,
                       facts=FACTS[SourceFormat.FINGERPRINT], fingerprints=[f for f in trace if f.rank == r])
              for r in (0, 1)]
    diagnosis = diagnose([*logs, *traces])
    assert diagnosis.verdict is Verdict.INCONCLUSIVE
    assert diagnosis.wedge is None or diagnosis.wedge.seq_range[1] is None
