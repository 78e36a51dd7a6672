"""align/past_hang.py: a rank whose records run on past a collective that hangs on every rank, where most ranks'
records stop, departed too. On small NCCL-log-like streams of a TP group of four and its ranks' DP pairs."""

from __future__ import annotations

import polars as pl

from ncclforensics.align.answers import DIFFERENT_OPS, CommAnalysis, Root
from ncclforensics.align.notes import RanPastHang
from ncclforensics.align.past_hang import with_ranks_past_hang
from ncclforensics.align.streams import Streams


def _logged(rank: int, ops: list[tuple[str, int]], size: int) -> pl.DataFrame:
    """A rank's NCCL log lines of one comm: launches, no completion on record."""
    n = len(ops)
    return pl.DataFrame({"rank": [rank] * n, "seq": list(range(1, n + 1)), "op": [o for o, _ in ops],
                         "count": [c for _, c in ops], "dtype": ["float32"] * n, "redop": ["sum"] * n,
                         "root": [0] * n, "state": [None] * n, "callsite": [None] * n, "step": [None] * n,
                         "file": [f"nccl{rank}.log"] * n, "line": list(range(1, n + 1)), "record": [None] * n,
                         "comm_size": [size] * n},
                        schema_overrides={"seq": pl.Int64, "count": pl.Int64, "state": pl.String,
                                          "callsite": pl.String, "step": pl.Int64, "record": pl.Int64})


REDUCE = ("AllReduce", 4096)


def _incident(rank_0_dp: int, rank_1_dp: int) -> tuple[Streams, CommAnalysis, Root]:
    """Seed 740618: rank 3 launched an AllGather at seq 7 of TP group 0..3, where the others launched an
    AllReduce of the same count (it hangs on every rank); ranks 1 to 3 stop there, rank 0 launched on to seq 13.
    Ranks 0 and 1 are in DP pairs with ranks 4 and 5, which launched 2 there."""
    tp = {0: [REDUCE] * 13, 1: [REDUCE] * 7, 2: [REDUCE] * 7, 3: [REDUCE] * 6 + [("AllGather", 4096)]}
    parts = {("tp", r): _logged(r, ops, 4) for r, ops in tp.items()}
    for rank, peer, launched in ((0, 4, rank_0_dp), (1, 5, rank_1_dp)):
        parts[(f"dp{rank}", rank)] = _logged(rank, [("AllReduce", 1)] * launched, 2)
        parts[(f"dp{rank}", peer)] = _logged(peer, [("AllReduce", 1)] * 2, 2)
    streams = Streams(parts=parts, members={"tp": [0, 1, 2, 3], "dp0": [0, 4], "dp1": [1, 5]},
                      launch_ends=set(parts))
    analysis = CommAnalysis(comm="tp", ranks=[0, 1, 2, 3], launched={r: len(ops) for r, ops in tp.items()},
                            completed=dict.fromkeys(tp), first_seq=dict.fromkeys(tp, 1))
    root = Root(comm="tp", seq=1, seq_range=(1, 7), outlier_ranks=[3], reference_ranks=[0, 1, 2],
                kind=DIFFERENT_OPS, size=1, pinned_by="signatures", reason=None, majority=True, shown=True)
    return streams, analysis, root


def test_a_rank_that_ran_past_a_collective_hanging_on_every_rank_departed_too():
    # Rank 0's GPU hangs at seq 7 as the others' do; run by the same program, its host would stop launching where
    # theirs do. It left a collective out before (or went on past the stop, at seq 8): named beside rank 3.
    streams, analysis, root = _incident(rank_0_dp=2, rank_1_dp=1)
    named, notes = with_ranks_past_hang(root, analysis, streams)
    assert (named.outlier_ranks, named.reference_ranks, named.seq_range, named.majority) == ([0, 3], [1, 2],
                                                                                              (1, 8), False)
    assert notes == [RanPastHang((0,), "tp", 7, 7, (0, 3))]


def test_ranks_that_stop_where_they_may_wait_for_a_peer_elsewhere_add_no_one():
    # Rank 1 launched more in its DP pair than its peer: it may wait there for it, which stops it as well.
    streams, analysis, root = _incident(rank_0_dp=2, rank_1_dp=3)
    assert with_ranks_past_hang(root, analysis, streams) == (root, [])
    # Records written once a collective completed say nothing of what a rank launched after its last one.
    streams, analysis, root = _incident(rank_0_dp=2, rank_1_dp=1)
    streams.launch_ends.discard(("tp", 2))
    assert with_ranks_past_hang(root, analysis, streams) == (root, [])
