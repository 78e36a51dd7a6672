"""Communicators whose results were read back mixed, beside a root on lengths alone (align/mixed_elsewhere.py)."""

from dataclasses import replace

import polars as pl

from ncclforensics.align.answers import MISSING, STOPPED, RangeReason, Root
from ncclforensics.align.mixed_elsewhere import mixed_elsewhere
from ncclforensics.align.streams import Streams
from ncclforensics.model import FingerprintRow, Location
from ncclforensics.report.notes import note_words

WORLD, TP01, TP23 = "0xworld", "0xtp01", "0xtp23"


def _stop(rank: int = 2) -> Root:
    """Rank `rank` stopped launching in the world comm after seq 2, its records alike with the others'."""
    return Root(comm=WORLD, seq=1, seq_range=(1, 3), outlier_ranks=[rank], reference_ranks=sorted({0, 1, 2, 3} - {rank}),
                kind=STOPPED, size=2, pinned_by="signatures", reason=RangeReason.LOOKALIKE, kinds=(STOPPED, MISSING))


def _streams(parts: dict | None = None) -> Streams:
    return Streams(parts=parts or {}, members={WORLD: [0, 1, 2, 3], TP01: [0, 1], TP23: [2, 3]})


def _step_sum(rank: int, right: bool) -> FingerprintRow:
    return FingerprintRow(Location(f"fingerprint_rank{rank}.jsonl", 1), rank, 0, sum=1.0 if right else 7.0,
                          expected_sum=1.0)


def test_a_wrong_step_checksum_names_the_ranks_other_communicators_beside_a_stop():
    # Rank 3 read back step 0 wrong, ranks 0 and 1 right; rank 2 (stopped in the world comm) left no trace. Rank
    # 3's wrong sum was mixed in the world comm or in its TP pair: the pair is a candidate beside the world comm.
    rows = [_step_sum(0, True), _step_sum(1, True), _step_sum(3, False)]
    root, said = mixed_elsewhere(_stop(), _streams(), rows)
    assert root.undecided_comms == (TP23,)
    words = note_words(said[0])
    assert "rank 3's checksum of step 0 is wrong" in words and "fingerprint_rank3.jsonl:1" in words


def test_wrong_results_tied_to_another_communicators_stream_name_it_beside_a_stop():
    # Rank 0's per-collective trace, tied to its TP pair's stream, read back seq 2 wrong: the pair diverged.
    part = pl.DataFrame({"comm": [TP01] * 2, "rank": [0, 0], "seq": [1, 2], "checked": [True, False],
                         "checked_at": ["fingerprint_rank0.jsonl:1", "fingerprint_rank0.jsonl:2"]})
    root, said = mixed_elsewhere(_stop(0), _streams({(TP01, 0): part}), [])
    assert root.undecided_comms == (TP01,)
    assert note_words(said[0]).startswith("rank 0 read back wrong results in comm 0xtp01 (fingerprint_rank0.jsonl:2)")


def test_a_wrong_per_collective_result_no_stream_holds_names_the_ranks_other_communicators_beside_a_stop():
    # Seed 970548: rank 3's NCCL log was cut after its seq 1 of the TP pair; its per-collective trace goes on, and
    # reads back its next collective (tag layers.2.moe) wrong. No peer of it left a trace, so no shared result ties
    # that record to a stream: it was mixed in the world comm or in the TP pair, as a wrong per-step checksum would
    # be. The pair is a candidate beside the world comm, where rank 2 stopped (held there by the pair, or not).
    tied = pl.DataFrame({"comm": [TP23], "rank": [3], "seq": [1], "checked": [True],
                         "checked_at": ["fingerprint_rank3.jsonl:1"]})

    def record(line: int, op: int, tag: str, got: float) -> FingerprintRow:
        return FingerprintRow(Location("fingerprint_rank3.jsonl", line), 3, 0, op=op, tag=tag, kind="AllReduce",
                              numel=1024, sum=got, expected_sum=1.0)
    rows = [record(1, 0, "layers.0.moe", 1.0), record(2, 1, "layers.2.moe", 7.0), record(3, 2, "lm_head", 9.0)]
    root, said = mixed_elsewhere(_stop(), _streams({(TP23, 3): tied}), rows)
    assert root.undecided_comms == (TP23,)
    words = note_words(said[0])
    assert "rank 3 read back a wrong result of the collective tagged layers.2.moe in step 0" in words
    assert "fingerprint_rank3.jsonl:2" in words
    # The same record held by the pair's stream speaks there, and only there.
    held = pl.concat([tied, pl.DataFrame({"comm": [TP23], "rank": [3], "seq": [2], "checked": [False],
                                          "checked_at": ["fingerprint_rank3.jsonl:2"]})])
    root, said = mixed_elsewhere(_stop(), _streams({(TP23, 3): held}), rows[:2])
    assert root.undecided_comms == (TP23,) and len(said) == 1
    assert note_words(said[0]).startswith("rank 3 read back wrong results in comm 0xtp23")


def test_a_root_whose_records_differ_or_checksums_all_right_stays_as_it_is():
    rows = [_step_sum(0, True), _step_sum(1, True), _step_sum(3, False)]
    shown = replace(_stop(), shown=True)
    assert mixed_elsewhere(shown, _streams(), rows) == (shown, [])
    assert mixed_elsewhere(_stop(), _streams(), [_step_sum(r, True) for r in range(4)]) == (_stop(), [])
