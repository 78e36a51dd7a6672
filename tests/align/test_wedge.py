"""align/wedge.py: how NCCL paired misaligned collectives, which pairings hang, and where a real job stopped."""

from __future__ import annotations

import polars as pl
import pytest
from fixture_paths import EXTRA_OP

from ncclforensics import api
from ncclforensics.align.comm_streams import comm_streams
from ncclforensics.align.answers import DIFFERENT_OPS, CommAnalysis, OpAt, Root
from ncclforensics.align.streams import Streams
from ncclforensics.align.nccl_pairing import first_hanging_pairing, pairing_hangs
from ncclforensics.align.wedge import PairingRun, classify_pairings, misaligned_window
from ncclforensics.model import Location, PairingKind, WedgeKind

SHAPE, COUNT, TYPE = PairingKind.SHAPE_EQUAL, PairingKind.COUNT_MISMATCH, PairingKind.TYPE_MISMATCH


def _part(rank: int, ops: list[tuple[str, int]], seqs: list[int] | None = None) -> pl.DataFrame:
    seqs = seqs or list(range(1, len(ops) + 1))
    return pl.DataFrame({"rank": [rank] * len(ops), "seq": seqs, "op": [o for o, _ in ops],
                         "count": [c for _, c in ops], "dtype": ["float32"] * len(ops), "redop": ["sum"] * len(ops),
                         "root": [0] * len(ops)}, schema_overrides={"seq": pl.Int64, "count": pl.Int64})


REFERENCE = [("AllReduce", 4096)] * 3 + [("AllReduce", 8), ("AllGather", 8), ("AllReduce", 4096)]
OUTLIER = [("AllReduce", 4096)] * 2 + [("AllReduce", 1024), ("AllReduce", 8), ("AllReduce", 8), ("AllReduce", 4096)]
RUNS = [PairingRun(1, 2, SHAPE), PairingRun(3, 3, COUNT), PairingRun(4, 4, SHAPE), PairingRun(5, 5, TYPE),
        PairingRun(6, 6, SHAPE)]


def test_pairings_are_runs_of_one_kind():
    rows = comm_streams({0: _part(0, REFERENCE), 1: _part(1, REFERENCE), 2: _part(2, OUTLIER)})
    assert classify_pairings(rows, 1, 6) == RUNS
    assert classify_pairings(rows, 4, 5) == [PairingRun(4, 4, SHAPE), PairingRun(5, 5, TYPE)]
    assert [run.collectives for run in RUNS] == [2, 1, 1, 1, 1]


def test_streams_with_gaps_pair_alike():
    gapped = comm_streams({0: _part(0, REFERENCE[:1] + REFERENCE[2:], [1, 3, 4, 5, 6]),
                           2: _part(2, OUTLIER[:1] + OUTLIER[2:], [1, 3, 4, 5, 6])})
    assert classify_pairings(gapped, 3, 6) == RUNS[1:]


def _op(rank: int, op: str | None, count: int | None) -> OpAt:
    return OpAt(rank=rank, seq=50, op=op, count=count, dtype="float32", redop="sum", root=0, state="started",
                callsite=None, step=None, loc=Location(f"fr_rank{rank}", record=49))


@pytest.mark.parametrize(("ops", "size", "hangs"), [
    ([("AllReduce", 4096), ("AllReduce", 1024)], 2, False),  # one type pairs whatever the counts
    ([("AllGather", 2048), ("AllReduce", 4096)], 2, False),  # gathered count equals the reduced one
    ([("AllGather", 2048), ("AllReduce", 4096)], 4, True),
    ([("Broadcast", 53), ("AllReduce", 53)], 2, True),
    ([("AllReduce", 8), (None, None)], 2, False),  # an unknown op decides nothing
])
def test_which_pairings_nccl_leaves_hanging(ops, size, hangs):
    assert pairing_hangs([_op(rank, op, count) for rank, (op, count) in enumerate(ops)], size) is hangs


def _logged(rank: int, ops: list[tuple[str, int]]) -> pl.DataFrame:
    """A rank's NCCL log lines of one comm of four: launches, no completion on record."""
    n = len(ops)
    return _part(rank, ops).with_columns(
        pl.lit(None, pl.String).alias("state"), pl.lit(None, pl.String).alias("callsite"),
        pl.lit(None, pl.Int64).alias("step"), pl.lit(f"nccl{rank}.log").alias("file"),
        pl.Series("line", list(range(1, n + 1)), pl.Int64), pl.lit(None, pl.Int64).alias("record"),
        pl.lit(4, pl.Int64).alias("comm_size"))


def test_a_pairing_that_hangs_among_the_ranks_on_record_hangs_whatever_a_log_cut_before_it_holds():
    # Seed 612974: rank 2 launched an AllGather where ranks 0 and 1 launched an AllReduce of the same count, at seq
    # 3; rank 3's log was cut after its first line. The collective completes on every rank or on none: the
    # pairing of the ranks on record hangs there, whatever rank 3 launched.
    program = [("AllReduce", 1024)] * 5
    gathered = program[:2] + [("AllGather", 1024)] + program[3:]
    parts = {0: _logged(0, program), 1: _logged(1, program), 2: _logged(2, gathered), 3: _logged(3, program[:1])}
    assert first_hanging_pairing(comm_streams(parts), 1, 5) == 3
    # An AllGather whose gathered count is the AllReduce's pairs: nothing hangs.
    parts[2] = _logged(2, program[:2] + [("AllGather", 256)] + program[3:])
    assert first_hanging_pairing(comm_streams(parts), 1, 5) is None


def test_a_root_open_above_makes_a_window_with_no_collective_surely_misaligned():
    # Seed 740657: traces not written as far as their ranks got leave the root at seq 3 or later (no seq above):
    # the window runs from there to the last collective every rank completed, and none of it is surely misaligned.
    program = [("AllReduce", 1024)] * 5
    streams = Streams(parts={("c", r): _logged(r, program) for r in range(3)}, members={"c": [0, 1, 2]})
    analysis = CommAnalysis(comm="c", ranks=[0, 1, 2], launched=dict.fromkeys(range(3), 5),
                            completed=dict.fromkeys(range(3), 5), first_seq=dict.fromkeys(range(3), 1))
    root = Root(comm="c", seq=3, seq_range=(3, None), outlier_ranks=[0, 1, 2], reference_ranks=[0, 1, 2],
                kind=DIFFERENT_OPS, size=1, pinned_by="signatures", reason=None, majority=False)
    window = misaligned_window(streams, analysis, root)
    assert (window.first_seq, window.last_seq, window.collectives, window.collectives_min) == (3, 5, 3, 0)


def test_a_real_extra_collective_wedges_the_comm_where_the_others_never_arrive():
    _, diagnosis = api.diff_paths([str(EXTRA_OP)])
    wedge = diagnosis.wedge
    assert (wedge.comm, wedge.seq, wedge.kind) == ("0x1715b7bd1b8fda9e", 50, WedgeKind.NO_PARTNER)
    assert (wedge.waiting_ranks, wedge.absent_ranks, wedge.launched) == ([0], [1, 2, 3], {0: 50, 1: 49, 2: 49, 3: 49})
    assert wedge.confirmed_by  # the NCCL lines that show it stopped, not merely lagged
    window = diagnosis.window
    assert (window.first_seq, window.last_seq, window.collectives) == (25, 49, 25)
    assert [(r.first_seq, r.last_seq, r.kind) for r in window.pairings] == [(25, 40, SHAPE), (41, 42, COUNT),
                                                                            (43, 49, SHAPE)]


def _traced(rank: int, ops: list[tuple[str | None, int]]) -> pl.DataFrame:
    """A rank's fingerprint trace of one comm of four: every collective it wrote completed (written once it did)."""
    return _logged(rank, ops).with_columns(pl.lit("completed").alias("state"), pl.lit(None, pl.String).alias("fr_file"),
                                           pl.lit(f"fingerprint_rank{rank}.jsonl").alias("file"))


@pytest.mark.parametrize(("last", "low"), [("AllGather", 4), (None, 4), ("AllReduce", 5)])
def test_a_collective_one_rank_completed_as_an_all_gather_bounds_no_other_rank_past_it(last, low):
    # Seed 1181490: rank 1 skipped an all-reduce, so its seq 4 is the step's all-gather, paired with the others'
    # all-reduce of equal bytes: NCCL 2.28.9 completes it on the gather side only, and the others wait in it. Their
    # traces end at seq 2 (a step they never wrote); rank 1's trace has seq 4 completed. The stop is at or after seq
    # 4, not past it (it was (5, None), which left the stall out). Where rank 1 completed an all-reduce there, every
    # rank did; a trace of no op type may be the all-gather.
    from ncclforensics.align.wedge import COMPLETIONS_END, find_wedge

    program = [("AllReduce", 1024)] * 3
    parts = {r: _traced(r, program[:2]) for r in (0, 2, 3)}
    parts[1] = _traced(1, program + [(last, 256)])
    streams = Streams(parts={("c", r): part for r, part in parts.items()}, members={"c": [0, 1, 2, 3]})
    ends = {0: 2, 1: 4, 2: 2, 3: 2}
    analysis = CommAnalysis(comm="c", ranks=[0, 1, 2, 3], launched=dict(ends), completed=dict(ends),
                            first_seq=dict.fromkeys(range(4), 1))
    wedge = find_wedge(streams, {"c": analysis}, set(), {})
    assert (wedge.seq_range, wedge.bounded_by) == ((low, None), COMPLETIONS_END)
    assert wedge.completed_alone == ([1] if low == 4 else [])


def _dumped(rank: int, ops: list[tuple[str, int]]) -> pl.DataFrame:
    """A rank's Flight Recorder dump of one comm: every collective it launched completed (its completions are
    final: it launched nothing after them)."""
    return _logged(rank, ops).with_columns(pl.lit("completed").alias("state"), pl.lit(f"fr_rank{rank}").alias("fr_file"),
                                           pl.lit(f"fr_rank{rank}").alias("file"))


@pytest.mark.parametrize(("last", "seq_range", "alone"), [("AllGather", (4, 5), [1]), ("AllReduce", (5, 5), [])])
def test_a_dump_that_completed_an_all_gather_bounds_no_rank_whose_log_counts_launches_only(last, seq_range, alone):
    # Seeds 1189943, 1190025, 1190316, 1190505, 1190992: rank 1's dump has every collective it launched completed,
    # the last an all-gather paired with rank 0's all-reduce of equal bytes (a drafter collective one side skipped).
    # NCCL 2.28.9 completes it on the gather side only: rank 0, whose NCCL log records launches only, waits in seq 4
    # and enqueued seq 5 behind it. The dump's completions are final for rank 1 alone; the stop is seq 4 or 5 (it was
    # pinned at 5, past the stall). Where rank 1 completed an all-reduce there, rank 0 completed it too.
    from ncclforensics.align.wedge import LAUNCHES_ONLY, find_wedge

    program = [("AllReduce", 4096)] * 3
    two = [pl.lit(2, pl.Int64).alias("comm_size"), pl.lit("c").alias("comm"), pl.lit(None, pl.Int64).alias("fr_record"),
           pl.lit(None, pl.Int64).alias("time")]
    parts = {0: _logged(0, program + [("AllReduce", 4096), ("AllGather", 2048)]).with_columns(
                 *two, pl.lit(None, pl.String).alias("fr_file")),
             1: _dumped(1, program + [(last, 2048 if last == "AllGather" else 4096)]).with_columns(*two)}
    streams = Streams(parts={("c", r): part for r, part in parts.items()}, members={"c": [0, 1]})
    analysis = CommAnalysis(comm="c", ranks=[0, 1], launched={0: 5, 1: 4}, completed={0: None, 1: 4},
                            first_seq={0: 1, 1: 1})
    wedge = find_wedge(streams, {"c": analysis}, set(), {})
    assert (wedge.seq_range, wedge.completed_alone) == (seq_range, alone)
    assert wedge.bounded_by == (LAUNCHES_ONLY if alone else None)
    if alone:  # (the words say why: not "no source records completions", which rank 1's dump does)
        from ncclforensics.report.wedge_words import wedge_range_words

        words = wedge_range_words(wedge)
        assert "rank 1 completed seq 4 with an all-gather" in words and "somewhere in seq 4..5" in words


def test_a_dump_that_completed_an_all_gather_every_log_launched_too_pins_the_stop_past_it():
    # Beside the seeds above: where rank 0's log launched an all-gather at seq 4 as well, no all-reduce paired with
    # it, so it completed on both ranks and the stop is past it.
    from ncclforensics.align.wedge import find_wedge

    program = [("AllReduce", 4096)] * 3
    two = [pl.lit(2, pl.Int64).alias("comm_size"), pl.lit("c").alias("comm"), pl.lit(None, pl.Int64).alias("fr_record"),
           pl.lit(None, pl.Int64).alias("time")]
    parts = {0: _logged(0, program + [("AllGather", 2048), ("AllReduce", 4096)]).with_columns(
                 *two, pl.lit(None, pl.String).alias("fr_file")),
             1: _dumped(1, program + [("AllGather", 2048)]).with_columns(*two)}
    streams = Streams(parts={("c", r): part for r, part in parts.items()}, members={"c": [0, 1]})
    analysis = CommAnalysis(comm="c", ranks=[0, 1], launched={0: 5, 1: 4}, completed={0: None, 1: 4},
                            first_seq={0: 1, 1: 1})
    wedge = find_wedge(streams, {"c": analysis}, set(), {})
    assert (wedge.seq_range, wedge.completed_alone) == ((5, 5), [])
