"""The two kinds of a communicator's streams answer every question alike, on a real capture's rows."""


import polars as pl
import pytest

from ncclforensics.align.comm_streams import ContiguousStreams, GappedStreams, comm_streams
from ncclforensics.align.streams import build_streams
from ncclforensics.align.wedge import classify_pairings
from ncclforensics.api import parse_paths
from fixture_paths import REAL


@pytest.fixture(scope="module")
def parts() -> dict[int, pl.DataFrame]:
    """extra-op-4rank's NCCL logs: one comm, four ranks, seqs 1..50 without a gap."""
    streams = build_streams(parse_paths([str(p) for p in sorted((REAL / "extra-op-4rank").glob("nccl.*.log"))]).evidence)
    (comm,) = streams.members
    return streams.comm_parts(comm)


def both(parts: dict[int, pl.DataFrame]):
    seqs = {rank: part.get_column("seq") for rank, part in parts.items()}
    return ContiguousStreams(parts, seqs), GappedStreams(parts, seqs)


def test_contiguous_rows_are_told_from_gapped_ones(parts):
    assert isinstance(comm_streams(parts), ContiguousStreams)
    gapped = {rank: part.filter(pl.col("seq") != 30) if rank == 2 else part for rank, part in parts.items()}
    assert isinstance(comm_streams(gapped), GappedStreams)


@pytest.mark.parametrize("start", [None, 10])
def test_both_kinds_give_the_same_rows(parts, start):
    contiguous, gapped = both(parts)
    contiguous.start = gapped.start = start
    for seq in (1, 9, 10, 25, 50, 51):
        assert contiguous.rows_at(seq) == gapped.rows_at(seq)
    for low, high in ((None, None), (5, 20), (45, 80), (None, 3)):
        assert contiguous.frame(low, high).equals(gapped.frame(low, high))
    for rank in parts:
        assert contiguous.span(rank, 20, 30).equals(gapped.span(rank, 20, 30))
        assert contiguous.span(rank, 40, 60) is None and gapped.span(rank, 40, 60) is None


def test_a_gap_inside_the_span_leaves_the_rank_out_of_it(parts):
    gapped = {rank: part.filter(pl.col("seq") != 30) if rank == 2 else part for rank, part in parts.items()}
    rows = comm_streams(gapped)
    assert rows.span(2, 20, 40) is None and rows.span(2, 31, 40).height == 10
    assert rows.rows_at(30) and 2 not in {row["rank"] for row in rows.rows_at(30)}


def test_pairings_are_the_same_through_either_kind(parts):
    """Rank 0's extra AllReduce at seq 25 pairs 4096 with 8192 floats at seqs 41 and 42 (the capture's README)."""
    contiguous, gapped = both(parts)
    runs = classify_pairings(contiguous, 25, 49)
    assert runs == classify_pairings(gapped, 25, 49)
    assert [(r.first_seq, r.last_seq, r.kind.value) for r in runs if r.kind.value != "shape_equal"] == [
        (41, 42, "count_mismatch")]
