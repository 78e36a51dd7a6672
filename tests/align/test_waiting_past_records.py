"""align/waiting_past_records.py: a reference rank whose records end before the sides part, counted short of the
reference and waiting in another communicator, is a candidate, not the reference."""

from __future__ import annotations

from dataclasses import replace

from ncclforensics.align.answers import RangeReason, Root
from ncclforensics.align.waiting_past_records import with_waiting_past_records
from ncclforensics.report.root_words import waiting_candidates_words


def _root() -> Root:
    """Seed 1086325: the records part rank 3 from ranks 0 and 1 somewhere in world seq 2..7 (its timeout at seq 7
    is in an all-reduce of 8 elements, theirs of 1); rank 2's trace ends at seq 4 alike with theirs."""
    return Root(comm="0", seq=2, seq_range=(2, 7), outlier_ranks=[3], reference_ranks=[0, 1, 2], kind="different",
                size=1, pinned_by="steps", reason=RangeReason.LOOKALIKE, majority=True, shown=True)


RECORDED = {0: 7, 1: 7, 2: 4, 3: 7}
STUCK = {0: {"1"}, 1: {"1"}, 2: {"2"}, 3: {"2"}}


def test_a_reference_rank_counted_short_past_its_records_that_waits_elsewhere_is_a_candidate():
    # Rank 2 launched 6 against ranks 0 and 1's 8 and waits in its TP pair with rank 3: held back there by rank 3's
    # extra world collective, or it swapped its own seqs 5 and 6 (which completed) before waiting; the counts and
    # records read the same either way, so it is on neither side.
    root = with_waiting_past_records(_root(), {0: 8, 1: 8, 2: 6, 3: 7}, RECORDED, STUCK)
    assert root.outlier_ranks == [3] and root.reference_ranks == [0, 1] and root.majority
    assert root.waiting_candidates == {2: ("2",)}
    assert "departed here past where its records end and then stopped" in waiting_candidates_words(root)
    # (records that begin late keep their own words)
    late = replace(root, reason=RangeReason.BEFORE_RECORDS)
    assert "departed here before the records begin and then stopped" in waiting_candidates_words(late)


def test_a_rank_the_counts_do_not_part_or_that_waits_nowhere_stays_the_reference():
    # Counted as far as the reference: nothing says it launched otherwise.
    assert with_waiting_past_records(_root(), {0: 8, 1: 8, 2: 8, 3: 7}, RECORDED, STUCK) == _root()
    # Counted no further than its records: where it stopped, its records already say.
    assert with_waiting_past_records(_root(), {0: 8, 1: 8, 2: 4, 3: 7}, RECORDED, STUCK) == _root()
    # Waiting nowhere else: nothing holds it back, so launching fewer is no reading of a wait.
    assert with_waiting_past_records(_root(), {0: 8, 1: 8, 2: 6, 3: 7}, RECORDED, {0: {"1"}, 1: {"1"}}) == _root()
    # Records that reach where the sides part compare it there.
    assert with_waiting_past_records(_root(), {0: 8, 1: 8, 2: 6, 3: 7}, {**RECORDED, 2: 7}, STUCK) == _root()


def test_a_candidate_taken_off_the_reference_leaves_no_majority_where_the_rest_are_even():
    root = replace(_root(), reference_ranks=[0, 2])
    found = with_waiting_past_records(root, {0: 8, 2: 6, 3: 7}, RECORDED, STUCK)
    assert found.reference_ranks == [0] and found.waiting_candidates == {2: ("2",)} and not found.majority
