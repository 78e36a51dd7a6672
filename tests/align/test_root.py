"""The root solver on its own: placements the records allow, and how other evidence narrows them."""

import numpy as np
import pytest

from ncclforensics.align.edits import MAX_EDIT, Codes, EditKind, Placement, place_edits
from ncclforensics.align.hidden_edits import edits_before_stop
from ncclforensics.align.narrowing import GateStep, ResultChecks
from ncclforensics.align.propose import propose
from ncclforensics.align.root import solve
from ncclforensics.align.solution import Solution
from ncclforensics.model import Location


def stream(*fields: list[int]) -> Codes:
    """Codes of one stream: each argument a field's values per position (0: not recorded)."""
    names = ["op", "tag", "step"][:len(fields)]
    return Codes({n: np.array(v, dtype=np.uint64) for n, v in zip(names, fields)}, len(fields[0]))


def span(placements) -> tuple[int, int]:
    return min(p.low for p in placements), max(p.high for p in placements)


def test_one_lookalike_extra_is_a_range_over_its_lookalike_neighbours():
    reference = stream([1] * 10 + [2] * 5)
    outlier = stream([1] * 11 + [2] * 5)  # an extra 1 somewhere among the first ten
    found, whole = place_edits(3, outlier, reference, start=1)
    assert whole and span(found) == (1, 11)
    assert {p.kind for p in found} >= {EditKind.EXTRA}


def test_tags_narrow_and_steps_pin_what_signatures_leave_as_a_range():
    ops_ref, ops_out = [1] * 12, [1] * 13
    tags_ref = [10, 11, 12] * 4
    tags_out = [10, 11, 12, 10, 99, 11, 12] + [10, 11, 12] * 2
    steps_ref = [1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4]
    steps_out = [1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 4, 4, 4]
    assert span(place_edits(1, stream(ops_out), stream(ops_ref), start=1)[0]) == (1, 13)
    # Layers in a loop repeat their tags every step: a block of one whole step plus the odd one still fits.
    assert span(place_edits(1, stream(ops_out, tags_out), stream(ops_ref, tags_ref), start=1)[0]) == (2, 5)
    found, _ = place_edits(1, stream(ops_out, tags_out, steps_out), stream(ops_ref, tags_ref, steps_ref), start=1)
    assert span(found) == (5, 5) and {p.kind for p in found} == {EditKind.EXTRA}


def test_extras_just_before_the_end_of_the_records_are_not_pinned_on_the_last_one():
    # The issue's trap: k extra collectives right before the wedge, the last of another type; both ranks have the
    # same number of records. By signatures alone the odd collective may end a block of lookalikes.
    reference = stream([1] * 20)
    outlier = stream([1] * 19 + [7])
    found, _ = place_edits(1, outlier, reference, start=1)
    low, high = span(found)
    assert high == 20 and low == 20 - MAX_EDIT + 1
    assert EditKind.DIFFERENT in {p.kind for p in found}


def test_a_record_after_the_odd_collective_confirms_the_short_explanations_only():
    reference = stream([1] * 10 + [2] + [1] * 3)
    outlier = stream([1] * 10 + [3] + [1] * 3)
    found, _ = place_edits(1, outlier, reference, start=1)
    # The reference's odd collective must pair with one of the outlier's: only a swap of that one fits.
    assert span(found) == (11, 11) and {p.kind for p in found} == {EditKind.DIFFERENT}


def test_a_block_to_the_end_of_a_shorter_stream_is_kept_where_no_confirmed_edit_accounts_for_the_lengths():
    # Seed 158151: rank 2 ran a drafter pass of three all-reduces at seq 3 and got stuck after it; its peer ran on
    # (all-reduce, all-gather, each step). A different collective at seq 4, confirmed by the one lookalike
    # all-reduce after it, explains the records; so does the block of three from seq 3 to the end of the shorter
    # stream, and the lengths part either way (a rank that got stuck ends its records where it does).
    reference = stream([1, 2, 1, 2, 1, 2])
    outlier = stream([1, 2, 1, 1, 1])
    found, _ = place_edits(2, outlier, reference, start=1)
    assert span(found) == (3, 4)
    best = max(found, key=lambda p: p.score)
    assert (best.kind, best.low, best.high) == (EditKind.DIFFERENT, 4, 4)
    # Streams of one length: the different collective accounts for them, and no block swallows its confirmation.
    found, _ = place_edits(2, outlier, stream([1, 2, 1, 2, 1]), start=1)
    assert span(found) == (4, 4)


def test_unrecorded_fields_constrain_nothing():
    reference = stream([1, 1, 1, 1], [5, 6, 7, 8])
    outlier = stream([1, 1, 1, 1], [0, 0, 0, 0])  # its trace is missing: agrees with anything
    assert place_edits(1, outlier, reference, start=1) == ([], True)


def test_a_gap_pushed_past_the_other_side_explains_nothing():
    reference = stream([1] * 18)
    outlier = stream([1] * 16 + [2, 1])
    found, _ = place_edits(1, outlier, reference, start=1)
    assert EditKind.MISSING not in {p.kind for p in found} and span(found) == (17, 17)


def test_records_that_begin_late_reach_back_to_seq_1():
    reference = stream([1] * 30)
    outlier = stream([1] * 31)
    found, _ = place_edits(1, outlier, reference, start=62)
    assert span(found) == (1, 92)


def test_majority_names_the_outlier_and_two_ranks_name_both():
    codes = {r: stream([1] * 8) for r in (0, 1, 2)}
    codes[3] = stream([1] * 4 + [2] + [1] * 4)
    proposal = propose(codes, 1)
    assert proposal.outliers == [3] and proposal.majority
    pair = {0: stream([1] * 4 + [2] + [1] * 4), 1: stream([1] * 8)}
    tie = propose(pair, 1)
    assert tie.outliers == [0, 1] and not tie.majority
    told = propose(pair, 1, deviants={0})
    assert told.outliers == [0] and told.majority


def test_stopped_rank_is_not_an_edit():
    codes = {r: stream([1] * 10) for r in (0, 2, 3)}
    codes[1] = stream([1] * 9)
    proposal = propose(codes, 1)
    assert proposal.stopped == [1] and proposal.placements[0].kind is EditKind.STOPPED


def test_a_stream_cut_short_is_never_the_one_that_stopped():
    # Rank 3's file was cut at position 4, where ranks 0 and 2 go on to 9 and rank 1 to 8: rank 1 stopped (or
    # skipped), rank 3's records merely end. Read as whole, rank 3 would be the one that stopped first.
    codes = {0: stream([1] * 9), 2: stream([1] * 9), 1: stream([1] * 8), 3: stream([1] * 4)}
    assert propose(codes, 1).outliers == [3]
    proposal = propose(codes, 1, cut={3})
    assert proposal.outliers == [1] and proposal.stopped == [1]
    # Only the cut stream is shorter: nothing differs on record.
    assert propose({0: stream([1] * 9), 1: stream([1] * 9), 2: stream([1] * 4)}, 1, cut={2}) is None


def test_a_stream_cut_before_the_others_stop_is_neither_reference_nor_outlier():
    # Ranks 3 and 7 stop one short of the others; rank 1's file was cut two short. What rank 1 launched past its
    # cut is unknown: it may have stopped where ranks 3 and 7 did (per-step checksums may say so), so it is of
    # neither side, and checksums that part it with the outliers can place it.
    codes = {r: stream([1] * 6) for r in (0, 2, 4, 5, 6)}
    codes.update({3: stream([1] * 5), 7: stream([1] * 5), 1: stream([1] * 4)})
    proposal = propose(codes, 1, cut={1})
    assert proposal.outliers == [3, 7] and proposal.majority
    assert proposal.unplaced == [1] and 1 not in proposal.reference
    behind = propose(codes, 1, behind={3, 7}, cut={1})
    assert behind.outliers == [3, 7] and behind.unplaced == [1] and 1 not in behind.reference


def test_a_rank_behind_beside_a_stream_cut_no_later_names_no_majority():
    # Ranks 0 and 3 launched 9, rank 2 (behind: the comm stopped) 8, rank 1's file was cut after 8. What rank 1
    # launched past its cut is unknown: it may be behind with rank 2, two against two, and no majority says which
    # side departed (ranks 0 and 3 may have run one more each).
    codes = {0: stream([1] * 9), 3: stream([1] * 9), 2: stream([1] * 8), 1: stream([1] * 8)}
    proposal = propose(codes, 1, behind={2}, cut={1})
    assert not proposal.majority and proposal.outliers == [0, 1, 2, 3]
    # With more ranks ahead, the one behind stays the minority whichever side the cut one is on.
    codes.update({4: stream([1] * 9), 5: stream([1] * 9)})
    proposal = propose(codes, 1, behind={2}, cut={1})
    assert proposal.majority and proposal.outliers == [2]


def test_as_many_ranks_ending_sooner_as_going_on_name_both_sides():
    # Seed 1032617: ranks 1 and 2 launched 9 lookalikes, ranks 0 and 3 launched 8 (NCCL logs alone, none cut):
    # ranks 0 and 3 left one out or stopped, or ranks 1 and 2 ran one more; two against two, no majority says
    # which side departed, so both are named, with the edits of each (the extra one anywhere in seq 1..9).
    codes = {0: stream([1] * 8), 1: stream([1] * 9), 2: stream([1] * 9), 3: stream([1] * 8)}
    proposal = propose(codes, 1)
    assert not proposal.majority and proposal.outliers == [0, 1, 2, 3]
    assert {p.rank for p in proposal.placements} == {0, 1, 2, 3}
    # Beside three ranks that go on, the two that end sooner are the minority, and named alone.
    codes[4] = stream([1] * 9)
    proposal = propose(codes, 1)
    assert proposal.majority and proposal.outliers == [0, 3]


def test_streams_cut_short_count_for_neither_side_of_a_length_difference():
    # Rank 0 goes on one past rank 1; ranks 2 and 3 end early where their files were cut. One against one: rank
    # 0 launched more or rank 1 stopped short, and no majority says which.
    codes = {0: stream([1] * 9), 1: stream([1] * 8), 2: stream([1] * 4), 3: stream([1] * 4)}
    proposal = propose(codes, 1, cut={2, 3})
    assert not proposal.majority and proposal.outliers == [0, 1, 2, 3]
    # A second rank where rank 1 stops: two against one on record, yet ranks 2 and 3 may have gone on as far as
    # rank 0 (three against two), so still no majority says which side departed.
    codes[4] = stream([1] * 8)
    proposal = propose(codes, 1, cut={2, 3})
    assert not proposal.majority and proposal.outliers == [0, 1, 2, 3, 4]
    codes[5] = codes[6] = stream([1] * 8)  # four where rank 1 stops: with both cut ones, rank 0's side is three
    proposal = propose(codes, 1, cut={2, 3})
    assert proposal.majority and proposal.outliers == [0]


def test_a_stream_cut_short_may_be_on_the_side_ahead():
    # Ranks 0 and 1 launched 14, rank 3 15, and rank 2's file was cut at 14: it may have launched the 15th too, and
    # two against two has no majority; read as one of those behind, rank 3 alone would look like the outlier.
    codes = {0: stream([1] * 14), 1: stream([1] * 14), 2: stream([1] * 14), 3: stream([1] * 15)}
    assert propose(codes, 1).outliers == [3]
    proposal = propose(codes, 1, cut={2})
    assert not proposal.majority and proposal.outliers == [0, 1, 2, 3]
    # Ranks 0 and 1 launched 15, rank 3 14, rank 2 cut at 12: it may have stopped where rank 3 did.
    codes = {0: stream([1] * 15), 1: stream([1] * 15), 2: stream([1] * 12), 3: stream([1] * 14)}
    assert propose(codes, 1, cut=set()).majority
    proposal = propose(codes, 1, cut={2})
    assert not proposal.majority and proposal.stopped == [3]


def test_ranks_ahead_of_most_and_ranks_behind_them_both_departed():
    # Most ranks launched 3 lookalikes; rank 1 launched 4 and rank 6 only 2. Ranks that ran one program stop at one
    # place: rank 6 left one out (or stopped short) as surely as rank 1 added one, and nothing orders the two
    # departures, so both are named and the range reaches every seq where either may have departed first.
    codes = {r: stream([1] * 3) for r in (0, 2, 3, 4, 5)}
    codes.update({1: stream([1] * 4), 6: stream([1] * 2)})
    proposal = propose(codes, 1)
    assert proposal.outliers == [1, 6] and proposal.reference == [0, 2, 3, 4, 5] and proposal.majority
    solution = _solve(codes)
    assert solution.leading == [1, 6]
    low, high = solution.named_range
    assert low == 1 and high >= 3  # (rank 6 left out its third, or stopped before it)
    # A rank cut short is no rank behind: it is on neither side.
    proposal = propose(codes, 1, cut={6})
    assert proposal.outliers == [1] and 6 not in proposal.reference


def test_streams_split_several_ways_name_the_minority_where_they_first_part():
    # Rank 1 issues an 8 where the others issue a 1 (seq 1); ranks 2 and 3 part later (seq 3), and rank 0's records
    # end before they do. Three groups, none a majority over the whole streams, yet at seq 1 three ranks against
    # one say who departed first: rank 1; rank 2's departure from rank 3 (or rank 3's) comes after it.
    codes = {0: stream([1, 8]), 1: stream([8, 1, 8]), 2: stream([1, 8, 8]), 3: stream([1, 8, 1, 8])}
    proposal = propose(codes, 1)
    assert proposal.majority and 1 in proposal.outliers and 0 in proposal.reference
    solution = _solve(codes)
    assert solution.leading == [1] and solution.seq_range[0] == 1
    # Where the ranks split at their first parting too (two against two), nothing says who departed first.
    codes = {0: stream([8, 8]), 1: stream([8, 1, 8]), 2: stream([1, 8, 8]), 3: stream([1, 8, 1, 8])}
    assert not propose(codes, 1).majority


def test_a_member_whose_ring_begins_at_the_groups_departure_may_have_departed_before_it():
    # Ranks 1 and 3 are one collective short from seq 4 on; rank 1's records reach back to seq 1 and pin its skip at
    # seq 4, rank 3's ring begins at seq 4. Rank 3 may have skipped any of seq 1..4: the answer is that range.
    reference = list(range(1, 11))
    codes = {r: stream([1] * 10, reference) for r in (0, 2, 4)}
    codes[1] = stream([1] * 9, [1, 2, 3, 5, 6, 7, 8, 9, 10])
    codes[3] = stream([0] * 3 + [1] * 6, [0, 0, 0, 5, 6, 7, 8, 9, 10])
    solution = _solve(codes)
    assert solution.outliers == [1, 3] and solution.seq_range == (1, 4)
    assert solution.best.low == 4  # (rank 1's pinned skip stays the likeliest)


def test_where_groups_first_part_only_the_ranks_that_tell_them_apart_there_are_counted():
    # Call stacks: rank 3 swaps seq 1 and 2, rank 4 swaps seq 5 and 6; rank 7 agrees with both elsewhere, rank 5's
    # ring begins at seq 3 (it agrees with ranks 3 and 7), ranks 0..2 kept NCCL logs without call stacks. Three
    # groups, none a majority, yet at seq 1 ranks 4 and 7 against rank 3 say who departed first (the others tell
    # nothing there), as two against one do where the whole streams are weighed.
    sig = [1] * 8
    codes = {4: stream(sig, [5, 6, 5, 6, 6, 5, 5, 6]), 7: stream(sig, [5, 6, 5, 6, 5, 6, 5, 6]),
             3: stream(sig, [6, 5, 5, 6, 5, 6, 5, 6]), 5: stream(sig, [0, 0, 5, 6, 5, 6, 5, 6])}
    codes.update({r: stream(sig, [0] * 8) for r in (0, 1, 2)})
    assert propose(codes, 1).majority
    solution = _solve(codes)
    assert solution.leading == [3] and solution.named_range[0] <= 1 <= solution.named_range[1]


def test_a_group_with_no_record_where_the_others_first_part_is_no_majority_there():
    # Ranks 0 and 2 part at seq 2 (call stacks 3 and 2); rank 3's ring begins after that and agrees with both; rank
    # 1's ring begins later still, and it parts from everyone at seq 4. Rank 1 recorded nothing at seq 2: every rank
    # pairs with its blank there, yet none takes its side. Nothing is a majority where they first part.
    sig = [1] * 6
    codes = {2: stream(sig, [1, 2, 3, 1, 2, 3]), 0: stream(sig, [0, 3, 3, 1, 2, 3]),
             3: stream(sig, [0, 0, 0, 1, 2, 3]), 1: stream(sig, [0, 0, 0, 2, 3, 1])}
    proposal = propose(codes, 1)
    assert not proposal.majority and proposal.outliers == [0, 1, 2, 3]
    assert _solve(codes).seq_range[1] <= 2  # (ranks 0 and 2 have parted by seq 2: the first departure is no later)


def test_a_group_with_no_record_of_the_field_that_parts_the_others_first_is_no_majority_there():
    # All-reduces alike in signature, one step (call stacks 5, 6, 7) after another. Ranks 0 and 2 kept call stacks
    # from seq 1, ranks 1 and 3 only from seq 6 (rings that wrapped); the stacks of ranks 0 and 2 part at seq 4
    # (rank 0 issued the step's 6 before its 5), and rank 1 issued a 9 in its signatures at seq 8. At seq 4 rank 1's
    # group recorded nothing that parts it from either side: it is no majority of that parting, and one against
    # one, with ranks 1 and 3 siding with either, names no side.
    sig = [1] * 9
    steps = [5, 6, 7] * 3
    swapped = steps[:3] + [6, 5] + steps[5:]
    late = [0] * 5 + steps[5:]
    codes = {0: stream(sig, swapped), 2: stream(sig, steps), 3: stream(sig, late),
             1: stream(sig[:7] + [9, 1], late[:7] + [8, 6])}
    proposal = propose(codes, 1)
    assert not proposal.majority and {0, 2} <= set(proposal.outliers)
    assert span(proposal.placements)[0] <= 4


def test_a_stream_without_the_parting_field_joins_the_group_that_recorded_most():
    # Ranks 0 and 1 recorded no call stacks (0): they agree with both sides and go with the larger one; they must
    # not found a group that every other stream then joins.
    sig = [1] * 6
    codes = {r: stream(sig, [0] * 6) for r in (0, 1)}
    codes.update({r: stream(sig, [5, 6, 7, 8, 9, 10]) for r in (2, 3, 4)})
    codes.update({r: stream(sig, [5, 6, 7, 9, 8, 10]) for r in (6, 7)})
    proposal = propose(codes, 1)
    assert proposal.outliers == [6, 7] and proposal.majority
    assert span(proposal.placements)[1] == 4


def test_streams_that_side_with_either_group_make_no_majority_of_an_even_split():
    # Ranks 0 and 1 part at seq 4 (call stacks 8 and 9); ranks 2 and 3 recorded no call stacks. One against one is
    # a tie, whichever side the two would join: both sides are named, and no majority is claimed.
    sig = [1] * 6
    codes = {0: stream(sig, [5, 6, 7, 8, 9, 10]), 1: stream(sig, [5, 6, 7, 9, 8, 10])}
    codes.update({r: stream(sig, [0] * 6) for r in (2, 3)})
    proposal = propose(codes, 1)
    assert not proposal.majority and proposal.either_side and proposal.outliers == [0, 1, 2, 3]
    # With a third rank recording rank 0's stacks, rank 1 is the minority of the ranks that tell them apart.
    codes[4] = stream(sig, [5, 6, 7, 8, 9, 10])
    proposal = propose(codes, 1)
    assert proposal.majority and proposal.outliers == [1]


def test_a_stream_that_ends_before_the_groups_part_may_belong_to_either():
    # Rank 1 parts from ranks 0 and 2 at seq 5; rank 3's records end at seq 3, before anything parts: it may be
    # either side's (its end is a cut), so two against one is no majority.
    codes = {r: stream([1] * 9) for r in (0, 2)}
    codes[1] = stream([1] * 4 + [2] + [1] * 4)
    codes[3] = stream([1] * 3)
    proposal = propose(codes, 1)
    assert not proposal.majority and proposal.outliers == [0, 1, 2, 3]
    codes[4] = stream([1] * 9)  # three against one, whichever side rank 3 is on
    proposal = propose(codes, 1)
    assert proposal.majority and proposal.outliers == [1]


def test_a_stream_known_to_end_where_one_group_ends_goes_with_that_group():
    # Ranks 0 and 1 went on to seq 8; rank 2 parts from them at seq 7 and ends there. Ranks 3 and 4 recorded up to
    # seq 3 only, but a count says rank 3 launched 7 and rank 4 launched 8 (unrecorded past their records).
    codes = {r: stream([1] * 8) for r in (0, 1)}
    codes[2] = stream([1] * 6 + [2])
    codes[3] = stream([1] * 3 + [0] * 4)
    codes[4] = stream([1] * 3 + [0] * 5)
    assert propose(codes, 1).outliers == [2]  # unrecorded alike, without the counts they go with the largest
    proposal = propose(codes, 1, ended={3, 4})
    assert proposal.majority and proposal.outliers == [2, 3]


def test_an_outlier_that_departs_after_another_is_no_outlier_of_the_root():
    # Rank 1's edit is at seq 5; rank 0's stop can only be at seq 9: it departed later, the root is rank 1's.
    placements = [Placement(1, EditKind.MISSING, 1, 5, 5), Placement(0, EditKind.STOPPED, 1, 9, 9)]
    solution = Solution(placements, [0, 1], [2, 3], True, "call sites")
    assert solution.seq_range == (5, 5) and solution.leading == [1]
    # A group's placement stands for every rank of the group.
    solution.members = {1: [1, 4]}
    assert solution.leading == [1]
    solution.outliers = [0, 1, 4]
    assert solution.leading == [1, 4]
    # An edit that may come first keeps its rank named; so does every rank where no majority says who departed.
    solution.placements = [*placements, Placement(0, EditKind.MISSING, 1, 2, 9)]
    assert solution.leading == [0, 1, 4]
    solution.placements, solution.majority = placements, False
    assert solution.leading == [0, 1, 4]
    # Rank 1's first edit may be as late as seq 8, past where rank 0's may begin: which came first is not known.
    solution.majority = True
    solution.placements = [Placement(1, EditKind.MISSING, 1, 5, 5), Placement(1, EditKind.EXTRA, 3, 8, 8),
                           Placement(2, EditKind.DIFFERENT, 1, 3, 6), Placement(0, EditKind.STOPPED, 1, 7, 9)]
    solution.outliers, solution.members = [0, 1, 2], {}
    assert solution.seq_range == (3, 6) and solution.leading == [0, 1, 2]


def test_an_outlier_that_only_runs_on_past_the_reference_may_have_left_out_its_last_collective():
    # 1205678: the reference's whole records end at seq 4, where rank 0 issued another type, and nothing elsewhere
    # held any rank. Rank 5 agrees with them through seq 4 and ran three on; its likeliest edit is one more
    # collective past their end, yet ranks of one program stop at one place, and it may as well have skipped the
    # lookalike at seq 4 (what it launched next meets nothing): it is named beside rank 0, the range reaching its
    # own edits, and is no rank that ran the program.
    placements = [Placement(0, EditKind.DIFFERENT, 1, 4, 4, score=-2), Placement(5, EditKind.EXTRA, 1, 5, 7, score=-5),
                  Placement(5, EditKind.EXTRA, 3, 1, 4, score=-6)]
    solution = Solution(placements, [0, 5], [2, 3, 6, 7], True, "signatures", reference_end=4,
                        settled=frozenset({0, 5}))
    assert solution.leading == [0, 5] and solution.named_range == (1, 7)
    # One that another comm may have held stops anywhere: its run past the end is its own later departure.
    solution.settled = frozenset({0})
    assert solution.leading == [0] and solution.named_range == (1, 4)
    # Past records the reference holds, an edit there still departs later.
    solution.settled, solution.reference_end = frozenset({0, 5}), 7
    assert solution.leading == [0] and solution.named_range == (1, 4)


def test_a_member_without_the_field_that_places_its_groups_later_departure_may_have_departed_first():
    # All-reduces alike in signature, call stacks 5, 6, 7 a step, then a gather (2). By their stacks rank 1 skipped
    # seq 4 and rank 0 seq 5; rank 5, one short as well, kept no call stacks, agrees with both and joins rank 0's
    # group. Its own records place its skip anywhere in seq 4..6: it may have skipped seq 4 with rank 1, and stays
    # named beside it (the range reaching as far as its own skip may).
    sig, program = [1] * 6 + [2], [5, 6, 7, 5, 6, 7, 8]
    codes = {r: stream(sig, program) for r in (2, 3, 4, 6)}
    codes[1] = stream(sig[1:], program[:3] + program[4:])
    codes[0] = stream(sig[1:], program[:4] + program[5:])
    codes[5] = stream(sig[1:], [0] * 6)
    solution = _solve(codes)
    assert solution.members.get(0) == [0, 5]
    assert solution.leading == [1, 5]
    low, high = solution.named_range
    assert low <= 4 and high >= 6


def test_of_groups_alike_where_three_first_part_the_reference_is_the_one_a_majority_holds_where_they_part_next():
    # Seed 740263: rank 3 swapped seq 2 and 3 (its tags), rank 2 left out the all-gather at seq 10 (its NCCL log), rank
    # 1 ran the program; three streams, none a majority. At seq 2 ranks 1 and 2 agree; at seq 10 ranks 1 and 3 do.
    ops = {1: [1] * 9 + [2], 2: [1] * 11, 3: [1] * 9 + [2]}
    tags = {1: [1, 2, 3, 4, 5, 6] + [0] * 4, 2: [1, 2, 3, 4, 5, 6, 1, 2, 3, 0, 0], 3: [1, 3, 2, 4, 5, 6] + [0] * 4}
    codes = {r: stream(ops[r], tags[r]) for r in ops}
    found = propose(codes, 1)
    assert (found.outliers, found.reference, found.majority) == ([2, 3], [1], True)
    solution = solve([("signatures", lambda: {r: stream(ops[r]) for r in ops}), ("tags", lambda: codes)], 1, [],
                     lambda seq: (Location("log", seq),))
    assert solution.leading == [3] and solution.seq_range == (2, 2) and solution.pinned_by == "tags"


def test_a_minority_where_three_groups_first_part_that_explains_the_streams_as_well_names_no_majority():
    # Seed 950319: a step of five collectives (tags 1..5, the fourth an all-gather), twice. Rank 2 ran the program;
    # rank 0 left out tag 2 of the second step, rank 1 issued tags 2 and 3 there swapped; rank 3's trace was cut
    # after four records (no tags there). At seq 7 ranks 0 and 1 issue tag 3 and rank 2 tag 2, yet with rank 2 as
    # the program ranks 0 and 1 each departed there by one edit, as few ranks and collectives as with rank 1 as
    # the program (rank 2 swapped, rank 0 left one out later): nothing says who departed.
    ops, tags = [1, 1, 1, 2, 1] * 2, [1, 2, 3, 4, 5] * 2
    codes = {2: stream(ops, tags), 1: stream(ops, tags[:6] + [3, 2] + tags[8:]),
             0: stream(ops[:6] + ops[7:], tags[:6] + tags[7:]), 3: stream(ops, tags[:4] + [0] * 6)}
    proposal = propose(codes, 1)
    assert not proposal.majority and proposal.outliers == [0, 1, 2, 3]
    solution = solve([("signatures", lambda: {r: stream(c.fields["op"]) for r, c in codes.items()}),
                      ("tags", lambda: codes)], 1, [], lambda seq: (Location("log", seq),))
    assert not solution.majority and solution.seq_range[0] <= 7 <= solution.seq_range[1]
    # (where the minority there needs more edits, the majority there stands: see the test of ranks that tell the
    # groups apart where they first part)


def test_an_outlier_that_comes_first_only_by_a_whole_period_shifted_is_no_outlier_of_the_root():
    # A program of seven collectives a step, all alike but the last. Rank 6 left out seq 7 (the step's last), rank 0
    # the seq 13 (the next step's sixth): its records also pair with the reference's shifted by 13 extra
    # collectives from seq 1, an explanation that leaves most of its records unexplained.
    step = [1] * 6 + [2]
    reference = stream(step * 4)
    codes = {r: reference for r in (1, 3, 4, 5, 7)}
    codes[6] = stream(step[:6] + step * 3)
    codes[0] = stream(step * 2 + step[:5] + [2] + step)
    solution = solve([("signatures", lambda: codes)], 1, [], lambda seq: ())
    assert solution.seq_range[1] == 7 and any(p.rank == 0 and p.low < 7 for p in solution.placements)
    assert solution.leading == [6]
    # Where the two outliers' likeliest edits may each come first (rank 0 ran one lookalike more, anywhere in seq
    # 1..7), both stay named.
    codes[0] = stream([1] * 7 + [2] + step * 3)
    solution = solve([("signatures", lambda: codes)], 1, [], lambda seq: ())
    assert solution.leading == [0, 6]


def test_a_rank_behind_whose_records_fit_no_skip_but_a_whole_periods_stopped_and_is_no_outlier_of_the_root():
    # Four collectives a step, the last of another type. Rank 1 left out seq 5 (shown at seq 7); rank 0, behind
    # (the group stopped), agrees with the reference as far as its records go: they fit no skip but a whole step
    # left out at seq 1, against a stop after its last record, which came later than rank 1's departure.
    step = [1, 1, 1, 2]
    reference = stream(step * 2)
    codes = {r: reference for r in range(2, 8)}
    codes[1] = stream(step + [1, 1, 2])
    codes[0] = stream((step * 2)[:7])
    solution = solve([("signatures", lambda: codes)], 1, [], lambda seq: (), behind={0, 1})
    assert any(p.rank == 0 and p.kind is EditKind.MISSING and p.low == 1 for p in solution.placements)
    assert solution.leading == [1]
    # A rank behind whose records are lookalikes throughout may have left one out anywhere: it stays named.
    codes = {r: stream([1] * 8) for r in range(2, 8)}
    codes[1] = stream([1] * 4 + [2, 1, 1])
    codes[0] = stream([1] * 7)
    solution = solve([("signatures", lambda: codes)], 1, [], lambda seq: (), behind={0, 1})
    assert solution.leading == [0, 1]


def test_an_even_split_by_a_richer_field_narrows_the_minority_a_poorer_one_named():
    # By signatures rank 2 launched two more lookalikes than ranks 0, 1 and 3. Only ranks 2 and 3 recorded call
    # stacks, and they part at seq 3: one against one names no side, but the side is rank 2's, which the
    # signatures already named; the stacks say where.
    program = list(range(10, 19))
    signatures = {r: stream([1] * 9) for r in (0, 1, 3)}
    signatures[2] = stream([1] * 11)
    stacks = {r: stream([1] * 9, [0] * 9) for r in (0, 1)}
    stacks[3] = stream([1] * 9, program)
    stacks[2] = stream([1] * 11, program[:2] + [90, 91] + program[2:])
    assert not propose(stacks, 1).majority
    solution = solve([("signatures", lambda: signatures), ("call sites", lambda: stacks)], 1, [],
                     lambda seq: (Location("log", seq),))
    assert solution.outliers == [2] and solution.majority and solution.seq_range == (3, 3)
    assert solution.pinned_by == "call sites" and solution.best.kind is EditKind.EXTRA
    # Where another rank of that side recorded stacks that part it from the other side too (rank 1, whose
    # lookalike signatures did not show it), the split is two against two: no majority, every rank named.
    signatures[4], stacks[4] = stream([1] * 9), stream([1] * 9, program)
    stacks[1] = stream([1] * 9, (program[:2] + [90, 91] + program[2:])[:9])
    solution = solve([("signatures", lambda: signatures), ("call sites", lambda: stacks)], 1, [],
                     lambda seq: (Location("log", seq),))
    assert not solution.majority and solution.outliers == [0, 1, 2, 3, 4]


def test_a_richer_field_names_one_side_of_a_split_the_poorer_one_drew_between_two_recorders():
    # Seed 740944: eight ranks. Ranks 2 and 6 issued seq 2 and 3 in each other's place. Call stacks reach back
    # there on ranks 0 and 6 alone (the others' rings begin at seq 5): one against one, no majority, and the split
    # lumps the six that side with either with rank 0. Every rank traced tags, which part ranks 2 and 6 from the
    # six others: rank 6's side of the split departed, rank 2 (no stack there) with it.
    ops, program = [1] * 12, [10, 11, 12, 13, 14, 15] * 2
    swapped = [10, 12, 11] + program[3:]
    ring = [0] * 4 + program[4:]

    def codes(**fields) -> Codes:
        return Codes({n: np.array(v, dtype=np.uint64) for n, v in fields.items()}, len(ops))

    stacks = {r: codes(op=ops, stack=ring) for r in range(8)}
    stacks[0], stacks[6] = codes(op=ops, stack=program), codes(op=ops, stack=swapped)
    tags = {r: codes(op=ops, stack=stacks[r].fields["stack"], tag=swapped if r in (2, 6) else program)
            for r in range(8)}
    assert not propose(stacks, 1).majority
    solution = solve([("call sites", lambda: stacks), ("tags", lambda: tags)], 1, [], lambda seq: ())
    assert solution.outliers == [2, 6] and solution.majority and solution.pinned_by == "tags"
    assert solution.reference == [0, 1, 3, 4, 5, 7]
    # Where the tags part ranks 0 and 2 instead, rank 0's side departed (rank 6's stacks are the program's).
    tags = {r: codes(op=ops, stack=stacks[r].fields["stack"], tag=swapped if r in (0, 2) else program)
            for r in range(8)}
    solution = solve([("call sites", lambda: stacks), ("tags", lambda: tags)], 1, [], lambda seq: ())
    assert solution.outliers == [0, 2] and solution.majority
    # Where they part rank 2 alone, neither side of the stacks' split is theirs: the one against one stands.
    tags = {r: codes(op=ops, stack=stacks[r].fields["stack"], tag=swapped if r == 2 else program) for r in range(8)}
    solution = solve([("call sites", lambda: stacks), ("tags", lambda: tags)], 1, [], lambda seq: ())
    assert not solution.majority and solution.outliers == list(range(8))


def test_a_richer_field_names_one_side_of_a_split_of_several_groups_where_later_departures_stand_apart():
    # Seed 921090: eight ranks, all-reduces alike, two layers' call stacks alike (a loop). Rank 7 issued seq 1 and
    # 2 in each other's place, rank 1 seq 3 and 4, and rank 4 left out seq 12, a step on. Call stacks reach back to
    # the first swap on no rank, to the second on ranks 1 and 5 alone: rank 1 against rank 5, and rank 4 apart by
    # its later skip, three groups and no majority. Every rank traced tags, which part rank 7 at seq 1 from the
    # others: its departure is the first, and rank 4's, past the split, says nothing of the split's sides.
    step_stacks, step_tags = [10, 11, 10, 11, 20], [100, 101, 102, 103, 104]

    def swapped(values, at):
        values = list(values)
        values[at], values[at + 1] = values[at + 1], values[at]
        return values

    program = {"stack": step_stacks * 3, "tag": step_tags * 3}
    runs = {r: program for r in range(8)}
    runs[7] = {name: swapped(values, 0) for name, values in program.items()}
    runs[1] = {name: swapped(values, 2) for name, values in program.items()}
    runs[4] = {name: values[:11] + values[12:] for name, values in program.items()}
    ring_from = {**{r: 7 for r in range(8)}, 1: 3, 5: 2}  # (the first position each rank's ring kept)

    def codes(rank: int, tagged: bool) -> Codes:
        run, kept = runs[rank], ring_from[rank]
        fields = {"op": [1] * len(run["stack"]), "stack": [0] * kept + run["stack"][kept:]}
        if tagged:
            fields["tag"] = run["tag"]
        return Codes({n: np.array(v, dtype=np.uint64) for n, v in fields.items()}, len(run["stack"]))

    stacks = {r: codes(r, False) for r in range(8)}
    tags = {r: codes(r, True) for r in range(8)}
    split = propose(stacks, 1)
    assert not split.majority and sorted(map(sorted, split.members.values())) == [[0, 2, 3, 5, 6, 7], [1], [4]]
    solution = solve([("call sites", lambda: stacks), ("tags", lambda: tags)], 1, [], lambda seq: ())
    assert solution.majority and solution.pinned_by == "tags" and solution.seq_range == (1, 1)
    assert solution.leading == [7] and solution.reference == [0, 2, 3, 5, 6]
    # Tags that part rank 5 as well (a tag of its own at seq 3, its stacks the program's) name both sides of the
    # stacks' split: they say no more of who departed there, and the split stands.
    runs[5] = {"stack": program["stack"], "tag": program["tag"][:2] + [999] + program["tag"][3:]}
    tags = {r: codes(r, True) for r in range(8)}
    solution = solve([("call sites", lambda: stacks), ("tags", lambda: tags)], 1, [], lambda seq: ())
    assert not solution.majority


def test_a_departure_a_richer_field_shows_comes_before_lengths_it_leaves_no_earlier_edit():
    # Traces flushed per step: rank 1 read back a step more than the others (they hung in it, their results of it
    # never read back). By signatures alone (lookalikes but the last of each step) that is rank 1 running a whole
    # step extra from seq 2 on. The tags show rank 0 issuing seq 3 and 4 in each other's place, and leave rank 1
    # no edit before seq 7 (its records pair with the others' tag for tag): rank 0 departed first, at seq 3.
    ops, tags = [1, 1, 1, 1, 1, 2], [10, 11, 12, 13, 14, 15]
    signatures = {r: stream(ops) for r in (0, 2, 3)}
    signatures[1] = stream(ops + [1, 1, 1, 1, 2])
    fields = {r: stream(ops, tags) for r in (2, 3)}
    fields[0] = stream(ops, [10, 11, 13, 12, 14, 15])
    fields[1] = stream(ops + [1, 1, 1, 1, 2], tags + [10, 11, 13, 14, 15])
    assert span(solve([("signatures", lambda: signatures)], 1, [], lambda seq: ()).placements)[0] == 2
    solution = solve([("signatures", lambda: signatures), ("tags", lambda: fields)], 1, [], lambda seq: ())
    assert solution.outliers == [0] and solution.seq_range == (3, 3) and solution.pinned_by == "tags"
    # Where the tags leave rank 1 an edit before rank 0's departure (its next step's tags pair with the others'
    # shifted from seq 2 on), the lengths may depart first: the signatures' answer stands.
    fields[1] = stream(ops + [1, 1, 1, 1, 2], tags + [11, 12, 13, 14, 15])
    solution = solve([("signatures", lambda: signatures), ("tags", lambda: fields)], 1, [], lambda seq: ())
    assert solution.outliers == [1]


def test_a_stream_known_incomplete_that_ends_before_the_sides_part_sides_with_nobody():
    # Ranks 0 and 2 against rank 1 at seq 5; rank 3's records end at seq 3 and are known incomplete (a file cut
    # short): with it on rank 1's side the split would be even, so no majority is claimed.
    codes = {0: stream([1] * 8), 2: stream([1] * 8), 1: stream([1] * 4 + [2] + [1] * 3), 3: stream([1] * 3)}
    proposal = propose(codes, 1, incomplete={3})
    assert not proposal.majority and proposal.outliers == [0, 1, 2, 3]
    # With two more ranks on the reference's side it is a majority whatever rank 3 did: the outlier is named,
    # rank 3 on neither side.
    codes.update({4: stream([1] * 8), 5: stream([1] * 8)})
    proposal = propose(codes, 1, incomplete={3})
    assert proposal.majority and proposal.outliers == [1] and proposal.unplaced == [3]
    assert 3 not in proposal.reference


def _solve(codes, constraints=()):
    return solve([("signatures", lambda: codes)], 1, list(constraints), lambda seq: (Location("log", seq),))


def test_right_and_wrong_results_narrow_a_shift():
    codes = {r: stream([1] * 20) for r in (0, 1, 2)}
    codes[3] = stream([1] * 21)
    assert _solve(codes).seq_range == (1, 21)
    checks = ResultChecks(frozenset(range(1, 8)), frozenset({9, 10}), (Location("fp", 1),))
    solution = _solve(codes, [checks])
    assert solution.seq_range == (8, 9) and solution.pinned_by == "fingerprints"


def test_a_longer_stream_whose_results_all_check_right_is_no_edit():
    # Rank 3's trace goes on to 9 where the others' stop at 5 (flushed per step), and every result it read back
    # is right: no extra collective fits, and the others' records merely stop short.
    codes = {r: stream([1] * 5) for r in (0, 1, 2)}
    codes[3] = stream([1] * 9)
    assert _solve(codes).seq_range == (1, 9)
    assert _solve(codes, [ResultChecks(frozenset(range(1, 10)), frozenset(), (Location("fp", 1),))]) is None
    # A wrong one among them keeps the records' answer, with the contradiction said.
    wrong = ResultChecks(frozenset(range(1, 9)), frozenset({9}), (Location("fp", 1),))
    assert _solve(codes, [wrong]).seq_range == (9, 9)


def test_a_stream_cut_short_whose_records_reach_where_results_part_the_ranks_is_on_either_side():
    # Ranks 1 and 3 launched 12, rank 2 11 (whole logs); rank 0's log was cut, and its trace reads back 11. By
    # lengths, rank 0 ends before the streams part (at 12) and may have stopped with rank 2: no majority. Results
    # read back wrong from seq 9 on part the ranks there, inside rank 0's records, which agree with either side: it
    # is named with every rank, not left unplaced beside rank 2 named alone.
    codes = {1: stream([1] * 12), 3: stream([1] * 12), 2: stream([1] * 11), 0: stream([1] * 11)}
    wrong = ResultChecks(frozenset(range(1, 9)), frozenset({9, 10, 11}), (Location("fp_rank0.jsonl", 9),))

    def solved(checks):
        return solve([("signatures", lambda: codes)], 1, checks, lambda seq: (Location("log", seq),), cut={0},
                     incomplete={0}, closed={1, 2, 3}, settled={1, 2, 3})

    solution = solved([wrong])
    assert solution.seq_range == (9, 9) and not solution.majority
    assert solution.leading == [0, 1, 2, 3] and solution.unplaced == []
    # With lengths alone, nothing places the parting inside rank 0's records: it stays unplaced.
    solution = solved([])
    assert solution.leading == [2] and solution.unplaced == [0]


def test_gate_step_narrows_to_the_deviant_records_of_that_step():
    codes = {r: stream([1] * 20) for r in (0, 1, 2)}
    codes[3] = stream([1] * 21)
    gate = GateStep({3: (9, 12)}, (9, 11), True, (Location("gate", 4),))
    solution = _solve(codes, [gate])
    assert solution.seq_range == (9, 12)
    # Its gate passed: it ran collectives the others did not, so no placement has it missing some.
    assert EditKind.MISSING not in solution.kinds


def test_constraints_that_allow_nothing_are_a_contradiction_not_a_choice():
    codes = {r: stream([1] * 10 + [2] * 10) for r in (0, 1, 2)}
    codes[3] = stream([1] * 10 + [3] + [2] * 10)  # plainly an extra at seq 11
    wrong_early = ResultChecks(frozenset(), frozenset({4}), (Location("fp_rank3.jsonl", 7),))
    solution = _solve(codes, [wrong_early])
    assert solution.seq_range[1] == 11 and solution.seq_range[0] <= 11
    assert len(solution.contradictions) == 1
    locs = [str(loc) for loc in solution.contradictions[0].locs]
    assert "fp_rank3.jsonl:7" in locs and any(loc.startswith("log:") for loc in locs)
    contradiction = solution.contradictions[0]
    assert contradiction.constraint == wrong_early.label and contradiction.seq_range == (11, 11)
    from ncclforensics.report.words import contradiction_words
    assert contradiction_words(contradiction) == f"{wrong_early.label} allow no root the records allow (seq 11)"


def test_results_wrong_from_one_outliers_skip_on_leave_a_later_outliers_swap_where_its_records_put_it():
    # Rank 6 left out seq 1 (tag 11), rank 1 swapped seq 2 and 3, ranks 0, 2..5 ran the program; every result from
    # seq 1 on read back wrong. Rank 6's skip misaligns them all: rank 1's swap need not, and departed later.
    program = [11, 12, 13, 14, 15] * 2
    codes = {r: stream([1] * 10, program) for r in (0, 2, 3, 4, 5)}
    codes[6] = stream([1] * 9, program[1:])
    codes[1] = stream([1] * 10, [11, 13, 12] + program[3:])
    wrong = ResultChecks(frozenset(), frozenset(range(1, 10)), (Location("fp_rank0.jsonl", 1),))
    solution = solve([("signatures", lambda: {r: stream([1] * c.length) for r, c in codes.items()}),
                      ("tags", lambda: codes)], 1, [wrong], lambda seq: (Location("log", seq),))
    assert solution.seq_range == (1, 1) and solution.leading == [6] and not solution.contradictions
    assert solution.kinds[0] is EditKind.MISSING and EditKind.DIFFERENT not in solution.kinds  # (rank 1's swap)
    # A split with no majority is no pair of departures: a side the results rule out is a contradiction still.
    solution = _solve({0: stream([1] * 10 + [2] * 10), 1: stream([1] * 10 + [3] + [2] * 10)},
                      [ResultChecks(frozenset(), frozenset({4}), (Location("fp", 1),))])
    assert solution.contradictions


def test_results_wrong_where_two_outliers_departures_each_misalign_some_name_the_first_where_its_records_put_it():
    # 982848: rank 4 swapped seq 3 and 4 (its tags), rank 7 left out seq 5, rank 0 ran a different collective at
    # seq 12; the tags are of the first step only. Results read back right at seq 1 and 2, wrong from 3 on: the swap
    # misaligns 3 and 4, the skip 5 on, neither all of them. Together they do: neither is forced onto a whole step
    # of extra collectives at seq 3 (which fits each alone), and rank 7, which departed later, is not named there.
    ops = ([1] * 7 + [2]) * 2
    tags = list(range(11, 19)) + [0] * 8
    codes = {r: stream(ops, tags) for r in (1, 2, 3, 5, 6)}
    codes[4] = stream(ops, tags[:2] + [tags[3], tags[2]] + tags[4:])
    codes[7] = stream(ops[:4] + ops[5:], tags[:4] + tags[5:])
    codes[0] = stream(ops[:11] + [2] + ops[12:], tags)
    checks = ResultChecks(frozenset({1, 2}), frozenset(range(3, 9)), (Location("fingerprint_rank0.jsonl", 3),))
    solution = solve([("signatures", lambda: {r: stream(c.fields["op"]) for r, c in codes.items()}),
                      ("tags", lambda: codes)], 1, [checks], lambda seq: (Location("log", seq),))
    assert solution.seq_range == (3, 3) and solution.leading == [4] and not solution.contradictions
    assert solution.kinds[0] is EditKind.DIFFERENT and solution.best.size == 2
    # A result right after the skip, which misaligns everything from it on: together they explain nothing, and the
    # results contradict the records, as they do where no edit explains them.
    checks = ResultChecks(frozenset({1, 2, 7}), frozenset({3, 4, 5, 6}), checks.locs)
    solution = solve([("signatures", lambda: {r: stream(c.fields["op"]) for r, c in codes.items()}),
                      ("tags", lambda: codes)], 1, [checks], lambda seq: (Location("log", seq),))
    assert solution.contradictions


@pytest.mark.parametrize("seed", range(40))
def test_random_single_edits_are_always_inside_the_range(seed):
    rng = np.random.default_rng(seed)
    program = rng.integers(1, 4, size=60).tolist()
    where = int(rng.integers(0, 50))
    size = int(rng.integers(1, 4))
    kind = rng.choice(["extra", "missing", "swap"])
    if kind == "extra":
        edited = program[:where] + rng.integers(1, 4, size=size).tolist() + program[where:]
    elif kind == "missing":
        edited = program[:where] + program[where + size:]
    else:
        edited = program[:where] + [program[where + 1], program[where]] + program[where + 2:]
    cut_ref, cut_out = int(rng.integers(where + 1, 61)), int(rng.integers(where + 1, len(edited) + 1))
    codes = {r: stream(program[:cut_ref]) for r in (0, 1, 2)}
    codes[3] = stream(edited[:cut_out])
    solution = _solve(codes)
    if solution is None or not solution.placements or solution.placements[0].kind is EditKind.STOPPED:
        # Nothing visible: the edit left the records looking like one program, cut at different places.
        assert all(edited[i] == program[i] for i in range(min(cut_out, cut_ref)))
        return
    low, high = solution.seq_range
    assert solution.outliers == [3]
    assert low <= where + 1 <= high, (kind, where, size, solution.placements)


def test_edits_off_the_end_of_the_records_regain_their_range_when_evidence_rules_out_the_confirmed_ones():
    # Rank 3 ends [3, 2, 2, 3] where the others run [3, 2, 2, 2, 2, 3]: two missing collectives (the record after
    # them confirms it) or extra ones running off the end of its records, from seq 8 on. Its gate passed (it ran
    # collectives the others did not): none is missing, and the extra block may start anywhere it fits.
    codes = {r: stream([1, 2] * 3 + [3, 2, 2, 2, 2, 3]) for r in (0, 1, 2)}
    codes[3] = stream([1, 2] * 3 + [3, 2, 2, 3])
    gate = GateStep({3: (8, 12)}, (8, 12), True, (Location("gate", 4),))
    solution = _solve(codes, [gate])
    assert EditKind.MISSING not in solution.kinds and solution.seq_range == (8, 10)
def test_a_wrong_result_before_a_stop_is_a_departure_at_or_before_it_not_the_stop():
    # Rank 3 launched 8 where the others launched 10, its records one for one with theirs; by lengths alone it
    # stopped after seq 8. But the others read back seq 5 wrong and seq 1..4 right: the group ran misaligned from
    # seq 5, which no stop explains (a stop leaves everything before it aligned). Rank 3 left collectives out, or
    # ran ones of its own and then blocked elsewhere, at seq 5.
    codes = {r: stream([1] * 10) for r in (0, 1, 2)}
    codes[3] = stream([1] * 8)
    assert _solve(codes).placements[0].kind is EditKind.STOPPED
    checks = ResultChecks(frozenset(range(1, 5)), frozenset({5, 6, 7}), (Location("fp", 9),))
    solution = _solve(codes, [checks])
    assert solution.outliers == [3] and solution.seq_range == (5, 5)
    assert EditKind.STOPPED not in solution.kinds and set(solution.kinds) == {EditKind.MISSING, EditKind.EXTRA}
    # Results checked right only leave the stop as it was.
    right = ResultChecks(frozenset(range(1, 9)), frozenset(), (Location("fp", 9),))
    assert _solve(codes, [right]).placements[0].kind is EditKind.STOPPED


def test_a_stop_reaches_back_over_the_lookalikes_where_an_edit_before_it_could_hide():
    # Ranks 0..2 logged ten all-reduces alike, rank 3 eight: by lengths alone it stopped after seq 8. Its records
    # end at a cut, though: it may have run two of its own at seq 2 (paired with the others' regular ones) and then
    # blocked elsewhere, or left some out. Every such edit its records allow joins the stop, which stays likeliest.
    codes = {r: stream([1] * 10) for r in (0, 1, 2)}
    codes[3] = stream([1] * 8)
    solution = _solve(codes)
    assert solution.seq_range == (9, 9)
    assert edits_before_stop(solution, codes, 1, [])
    assert solution.outliers == [3] and solution.seq_range == (1, 9) and solution.best.kind is EditKind.STOPPED
    assert {EditKind.EXTRA, EditKind.MISSING} <= set(solution.kinds)
    # Results checked right up to seq 6 were aligned: no edit starts there.
    solution = _solve(codes)
    edits_before_stop(solution, codes, 1, [ResultChecks(frozenset(range(1, 7)), frozenset(), (Location("fp", 1),))])
    assert solution.seq_range == (7, 9)


def test_in_a_two_rank_tie_the_shorter_side_may_have_hidden_an_edit_before_its_end():
    # Rank 5 ran a drafter all-reduce of its own at seq 3, alike in shape to rank 4's layer there, and then blocked
    # elsewhere; rank 4 went on to an all-gather at seq 4. Results checked right at seq 1 and 2. By lengths, rank 4
    # ran one extra at seq 4, or rank 5 stopped there, or ran one of its own at seq 3 first: the range is 3..4, and
    # the checked results rule out only rank 4's edits at seq 1..2.
    all_reduce, all_gather = 1, 2
    codes = {4: stream([all_reduce, all_gather, all_reduce, all_gather], [10, 11, 0, 0]),
             5: stream([all_reduce, all_gather, all_reduce], [10, 11, 0])}
    right = ResultChecks(frozenset({1, 2}), frozenset(), (Location("fp", 3),))
    solution = _solve(codes, [right])
    assert not solution.majority and solution.seq_range == (4, 4)
    assert edits_before_stop(solution, codes, 1, [right])
    assert solution.seq_range == (3, 4) and solution.best.kind is EditKind.EXTRA and solution.best.rank == 4


def test_a_stop_after_records_that_are_provably_the_programs_own_stays_a_stop():
    # Tags and steps name each collective once: rank 3's last record is the others' own collective there, so no
    # edit of its own hides before its end (a block of its own would carry its own tags).
    tags, steps = list(range(1, 11)), [1 + i // 5 for i in range(10)]
    codes = {r: stream([1] * 10, tags, steps) for r in (0, 1, 2)}
    codes[3] = stream([1] * 8, tags[:8], steps[:8])
    solution = _solve(codes)
    assert not edits_before_stop(solution, codes, 1, []) and solution.seq_range == (9, 9)


def test_records_that_differ_beat_a_length_difference_where_they_depart_no_later():
    # By signatures, rank 5's trace merely goes on past the others' (read back one step more): an extra at 4..5.
    # Tags show rank 6's first two collectives swapped: records that differ, from seq 1 on, and the root is theirs.
    ops = [1, 1, 2]
    tags = {r: [10, 11, 12] for r in range(5)}
    tags[6] = [11, 10, 12]
    codes_sig = {r: stream(ops) for r in (0, 1, 2, 3, 4, 6)}
    codes_sig[5] = stream(ops + [1, 1])
    codes_tags = {r: stream(ops, tags[r]) for r in (0, 1, 2, 3, 4, 6)}
    codes_tags[5] = stream(ops + [1, 1], [10, 11, 12, 10, 11])
    only_sig = solve([("signatures", lambda: codes_sig)], 1, [], lambda seq: ())
    assert only_sig.outliers == [5] and only_sig.seq_range == (4, 5)
    both = solve([("signatures", lambda: codes_sig), ("tags", lambda: codes_tags)], 1, [], lambda seq: ())
    assert both.outliers == [6] and both.seq_range[0] == 1 and both.pinned_by == "tags"


def test_a_longer_stream_without_the_parting_field_does_not_carry_a_founders_records_against_the_others():
    # Rank 0 recorded a call site at both seqs and went first; ranks 1..4 recorded none and went on as long; ranks
    # 5..7 recorded the program's site at seq 1 and stop there. The ranks without call sites side with either, so
    # they do not make rank 0's site the majority's: rank 0 is the outlier.
    codes = {0: stream([2, 1]), **{r: stream([0, 0]) for r in range(1, 5)}, **{r: stream([1]) for r in (5, 6, 7)}}
    proposal = propose(codes, 1)
    assert proposal.majority and proposal.outliers == [0]


def test_with_no_majority_a_rank_known_only_by_its_count_is_named_on_neither_side():
    codes = {0: stream([1, 1, 1]), 1: stream([1, 2, 1]), 2: stream([0, 0])}
    assert propose(codes, 1).outliers == [0, 1, 2]
    proposal = propose(codes, 1, unseen={2})
    assert proposal.outliers == [0, 1] and proposal.unplaced == [2]


def test_with_no_majority_a_rank_a_report_places_where_the_sides_part_is_named_beside_them():
    # Ranks 0 and 2 part at seq 3 by their call stacks (5 and 6). Ranks 1 and 3 left no records; a peer's desync
    # report gives their last collectives: rank 1 finished seq 2 and never joined seq 3, rank 3 started seq 3 (an
    # all-reduce, as both sides' are). Rank 3 launched there what one side did, alike with either: it sides with
    # either and is named; rank 1 never got there. Every rank is named, as where any rank sides with either.
    codes = {0: stream([0, 4, 5]), 2: stream([0, 0, 6]), 1: stream([0, 0]), 3: stream([0, 0, 0])}
    proposal = propose(codes, 1, ended={1, 3}, unseen={1, 3}, closed={0, 2}, reported={1, 3})
    assert not proposal.majority and proposal.outliers == [0, 1, 2, 3] and proposal.unplaced == []
    # Known by their counts alone, both are on neither side.
    proposal = propose(codes, 1, ended={1, 3}, unseen={1, 3}, closed={0, 2})
    assert not proposal.majority and proposal.outliers == [0, 2] and proposal.unplaced == [1, 3]
    # A report of a rank's last collective before the sides part places it on neither side either.
    proposal = propose({**codes, 3: stream([0, 0])}, 1, ended={1, 3}, unseen={1, 3}, closed={0, 2}, reported={1, 3})
    assert proposal.outliers == [0, 2] and proposal.unplaced == [1, 3]


def test_a_joiner_that_went_on_as_far_as_only_a_minority_did_stays_with_its_group():
    # Ranks 4 and 1 launched one more than the others; rank 4's ops show the extra at seq 2, rank 1 recorded no
    # op. Rank 1 agrees with the others' shorter streams, but went on past their end as only rank 4 did: it stays.
    codes = {4: stream([1, 2, 1, 1]), 1: stream([0, 0, 0, 0]), **{r: stream([1, 1, 1]) for r in (0, 2, 3, 5)},
             6: stream([0, 0, 0]), 7: stream([0, 0, 0])}
    proposal = propose(codes, 1)
    assert proposal.majority and proposal.outliers == [1, 4]


def test_where_the_ranks_that_record_the_parting_field_are_even_the_joiners_go_by_length():
    # Rank 2 left out seq 3 (its ops show it) and launched one fewer; ranks 0 and 3 recorded no op and launched
    # as many as rank 1: with one rank on each side recording the ops, the lengths side them with rank 1.
    codes = {1: stream([1, 2, 3, 4]), 0: stream([0, 0, 0, 0]), 3: stream([0, 0, 0, 0]), 2: stream([1, 2, 4])}
    proposal = propose(codes, 1)
    assert proposal.majority and proposal.outliers == [2]


def test_a_group_that_may_end_where_a_member_was_held_elsewhere_sides_no_joiner_by_length():
    # Rank 3's call stacks part from rank 2's at seq 1 (2 against 1 elsewhere); ranks 0 and 1 recorded no stack
    # there and end where rank 3 does. Were rank 2's end its program's, the lengths would side them with rank 3;
    # but its records, whole here, end where it may have been held in its other communicator: ranks 0 and 1 side
    # with either, and nothing says whether rank 2 left one out or rank 3 launched one more.
    codes = {3: stream([9, 2]), 0: stream([0, 2]), 1: stream([0, 2]), 2: stream([2])}
    assert propose(codes, 1).outliers == [2]
    proposal = propose(codes, 1, closed={2})
    assert not proposal.majority and {2, 3} <= set(proposal.outliers)
    # (where nothing held it elsewhere, its end is its program's, and the lengths tell)
    assert propose(codes, 1, closed={2}, settled={2}).outliers == [2]


def test_joiners_whose_issue_places_part_them_from_one_group_go_with_the_other():
    # As above, rank 2 held elsewhere where its records end; but each rank's order across its communicators says
    # where it issued its collectives here (places: 1 + the other communicators' collectives issued before each).
    # Rank 2 issued its seq 1 after one of them, ranks 0, 1 and 3 theirs after none: ranks 0 and 1 ran rank 3's
    # program, and rank 2 departed, against three.
    codes = {3: stream([9, 2]), 0: stream([0, 2]), 1: stream([0, 2]), 2: stream([2])}

    def places(*values: int) -> Codes:
        return Codes({"place": np.array(values, dtype=np.uint64)}, len(values))

    early = {r: places(1, 2) for r in (0, 1, 3)}
    proposal = propose(codes, 1, closed={2}, places={**early, 2: places(2)})
    assert proposal.majority and proposal.outliers == [2] and proposal.reference == [0, 1, 3]
    assert proposal.placed == [0, 1]  # (the majority counts them: it rests on their places)
    # (places alike on every rank side no one; nor do joiners' that part them from both groups)
    assert not propose(codes, 1, closed={2}, places={**early, 2: places(1)}).majority
    assert not propose(codes, 1, closed={2}, places={**early, 2: places(2), 0: places(3, 3), 1: places(3, 3)}).majority


def test_a_rank_named_beside_the_first_reaches_the_range_on_to_where_it_may_have_departed():
    # Rank 2 left out seq 6; rank 3's records fit one collective more at seq 6 or 7, or one left out at seq 7: it
    # may have departed at seq 6 as well, and stays named, so the range goes on to seq 7.
    placements = [Placement(2, EditKind.MISSING, 1, 6, 6), Placement(2, EditKind.EXTRA, 1, 5, 6, score=-3),
                  Placement(3, EditKind.EXTRA, 1, 6, 7, score=-2), Placement(3, EditKind.MISSING, 1, 7, 7, score=-2)]
    solution = Solution(placements, [2, 3], [0, 1, 4, 5], True, "signatures")
    assert solution.seq_range == (5, 6) and solution.leading == [2, 3]
    assert solution.named_range == (5, 7)
    # One named alone reaches no further than its own range.
    solution.placements, solution.outliers = placements[:2], [2]
    assert solution.named_range == solution.seq_range == (5, 6)


def test_a_rank_whose_count_ends_before_the_groups_part_swings_no_majority():
    # Seq 2 is where the records part (rank 2 ran another collective there than ranks 1, 5 and 6); ranks 0, 3 and 7
    # launched only seq 1 by their counts, rank 4 seq 2 with none of it kept: only rank 4 may be on either side.
    codes = {r: stream([1]) for r in (1, 5, 6)} | {2: stream([2]), 4: stream([0])}
    codes |= {r: stream([]) for r in (0, 3, 7)}
    proposal = propose(codes, 2, ended={0, 3, 4, 7}, unseen={0, 3, 4, 7}, closed={1, 2, 5, 6})
    assert proposal.majority and proposal.outliers == [2]
    # Launched up to seq 2, unrecorded, all four could be either side's.
    codes |= {r: stream([0]) for r in (0, 3, 7)}
    proposal = propose(codes, 2, ended={0, 3, 4, 7}, unseen={0, 3, 4, 7}, closed={1, 2, 5, 6})
    assert not proposal.majority


def test_a_different_block_may_begin_where_the_outlier_recorded_nothing():
    # Rank 7 swapped seq 3 and 4 (call stacks 3 and 4); its ring lost everything before seq 4, so only the swap's
    # second half shows. The swap may have begun at any seq the ring lost, never only where it shows.
    reference = stream([1, 2, 3, 4, 5, 6])
    outlier = stream([0, 0, 0, 3, 5, 6])
    found, _ = place_edits(7, outlier, reference, start=1)
    assert span(found) == (1, 4) and EditKind.DIFFERENT in {p.kind for p in found}
    # With the records before it whole, a block of different collectives begins where it shows.
    found, _ = place_edits(7, stream([1, 2, 4, 3, 5, 6]), reference, start=1)
    assert span(found) == (3, 3)


def test_a_gap_where_the_outlier_lost_its_records_may_push_them_past_the_other_side():
    # The others ran A D D B C G (a drafter D D at seq 2 and 3); rank 48 skipped the drafter and ran on (A B C G
    # A B C G), but its ring kept seq 5..8 only. Its records, shifted by the gap past the others' last one,
    # contradict nothing: the drafter left out at seq 2 explains them as well as two extra collectives do.
    a, d1, d2, b, c, g = 1, 7, 8, 2, 3, 4
    reference = stream([a, d1, d2, b, c, g])
    outlier = stream([0, 0, 0, 0, a, b, c, g])
    found, _ = place_edits(48, outlier, reference, start=1)
    assert any(p.kind is EditKind.MISSING and p.low <= 2 <= p.high for p in found)
    # Where they only go on past the others' records (A B at seq 5 and 6 agree), the same.
    outlier = stream([0, 0, 0, 0, a, b, a, b])
    found, _ = place_edits(0, outlier, stream([a, d1, d2, b, a, b]), start=1)
    assert any(p.kind is EditKind.MISSING and p.low <= 2 <= p.high for p in found)
    # With its records whole the gap shows, and is placed where it does.
    found, _ = place_edits(48, stream([a, b, c, g, a, b, c, g]), reference, start=1)
    assert [(p.kind, p.low, p.high) for p in found] == [(EditKind.MISSING, 2, 2)]


def test_a_member_without_the_field_that_places_its_group_may_depart_anywhere_its_records_allow():
    # Ranks 0 and 4 both left out one of the lookalike AllReduces of step 2 (signature 1), before the AllGather
    # (2). Rank 4's call stacks place its gap at seq 8; rank 0 recorded no call stacks, and its gap may be at seq
    # 6 as well: the group's range reaches back to where rank 0's own records allow.
    sig_ref, sig_out = [1, 1, 1, 1, 2, 1, 1, 1, 1, 2], [1, 1, 1, 1, 2, 1, 1, 1, 2]
    sites = [5, 6, 5, 6, 9]
    codes = {r: stream(sig_ref, sites * 2) for r in (1, 2, 3, 5)}
    codes[4] = stream(sig_out, sites + [5, 6, 6, 9])
    codes[0] = stream(sig_out, [0] * 9)
    proposal = propose(codes, 1)
    assert proposal.outliers == [0, 4] and proposal.majority
    assert span(proposal.placements)[0] <= 6 <= span(proposal.placements)[1]


def test_with_no_majority_the_sides_are_named_alone_only_where_every_other_rank_is_on_neither_side():
    # Ranks 0 and 3 part at seq 2 (call stacks 5 and 6). Rank 1 is known only by its count; rank 2's whole
    # records end at seq 1, before the groups part: it never launched there. Both are on neither side, so the two
    # sides alone are named.
    codes = {0: stream([0, 5]), 3: stream([5, 6]), 2: stream([5]), 1: stream([0, 0])}
    proposal = propose(codes, 1, unseen={1}, closed={0, 2, 3})
    assert not proposal.majority and proposal.outliers == [0, 3] and proposal.unplaced == [1, 2]
    # Where rank 2's end may be a cut, it may be on either side: naming the sides without it would say it is on
    # none, so every rank is named.
    proposal = propose(codes, 1, unseen={1}, closed={0, 3})
    assert not proposal.majority and proposal.outliers == [0, 1, 2, 3] and proposal.unplaced == []


def test_a_pair_parted_by_completions_in_streams_that_differ_in_length_only_may_be_a_block_of_different_ones():
    # A two-rank TP group: rank 2 read back both steps (tags 1..7 each; its seq 15 is the next step's first
    # collective, call stack 2, in flight), rank 3's trace stops after step 0 and its timeout names seq 14 (call
    # stack 1). Rank 2 completed seq 14 while rank 3 timed out there: a misaligned pair (a swap at 13..14 whose
    # all-gather side completed, say). Nothing recorded differs, so the lengths read as extra collectives on rank 2
    # (before seq 13); a block of different collectives through seq 14, starting anywhere rank 3 left unrecorded,
    # fits as well: the range reaches 14.
    from ncclforensics.align.narrowing import PARTED_COMPLETIONS

    tags = list(range(1, 8))
    codes = {2: stream([0] * 14 + [2], tags * 2 + [0], [1] * 7 + [2] * 7 + [0]),
             3: stream([0] * 13 + [1], tags + [0] * 7, [1] * 7 + [0] * 7)}
    parted = ResultChecks(frozenset(), frozenset({14}), (Location("torch_rank3.log", 2),), label=PARTED_COMPLETIONS)
    solution = _solve(codes, [parted])
    assert solution.seq_range == (8, 14) and not solution.majority
    assert EditKind.DIFFERENT in solution.kinds
    # every block runs through seq 14, and none starts before rank 3's records stop (seq 8)
    blocks = [p for p in solution.placements if p.kind is EditKind.DIFFERENT]
    assert all(p.low + p.size > 14 and p.low >= 8 and p.high == 14 for p in blocks)


def test_a_gate_that_skipped_allows_the_missing_collectives_right_after_the_step_records():
    """Rank 48's gate skipped the drafter at step 0, whose collectives end the step; its records of step 0 are seqs
    1..3, and no other rank's steps are known. What it left out lies after its last record of the step, at the seq
    its first record of step 1 then takes: a missing edit at seq 4 is of the step."""
    gate = GateStep({48: (1, 3)}, None, False, (Location("gate", 1),))
    missing = Placement(48, EditKind.MISSING, 2, 1, 4)
    assert gate.narrow(missing) == Placement(48, EditKind.MISSING, 2, 1, 4)
    # A different collective of the step is one of its records: at most seq 3.
    assert gate.narrow(Placement(48, EditKind.DIFFERENT, 1, 1, 4)).high == 3
    # Where the others' steps are known, theirs bound what it left out, as before.
    assert GateStep({48: (1, 3)}, (1, 5), False, ()).narrow(Placement(48, EditKind.MISSING, 2, 4, 6)).high == 5


def test_a_rank_that_went_on_past_where_the_rest_of_its_group_stopped_departed_too():
    """Ranks 0 and 1 launch 4 lookalikes and stop, rank 3 departs visibly at seq 4 (another type), and rank 2,
    agreeing with ranks 0 and 1 wherever they overlap, launched 7: ranks of one program stop at one place, so rank 2
    was elsewhere in it, perhaps first (a lookalike left out before seq 4). Every rank's records are whole and
    nothing elsewhere held them."""
    codes = {0: stream([1] * 4), 1: stream([1] * 4), 2: stream([1] * 7), 3: stream([1, 1, 1, 2])}
    found = propose(codes, 1, closed=set(codes), settled=set(codes))
    assert found.majority and found.outliers == [2, 3] and found.reference == [0, 1]
    assert min(p.low for p in found.placements if p.rank == 2) == 1
    # Ranks that another comm may have held (not settled) stop anywhere: their ends say nothing of rank 2.
    held = propose(codes, 1, closed=set(codes), settled={2, 3})
    assert held.outliers == [3]


def test_a_whole_stream_of_the_reference_that_goes_on_past_the_rest_of_it_departed_too():
    # 96352: rank 2 issued another collective at seq 6; rank 0 left out a lookalike and ran two past the others'
    # end. Its whole records agree with ranks 1 and 3 up to theirs, whole too and held nowhere else: it launched
    # what they never did.
    codes = {r: stream([1] * 6) for r in (1, 3)} | {0: stream([1] * 8), 2: stream([1] * 5 + [2])}
    proposal = propose(codes, 1, closed={0, 1, 2, 3}, settled={0, 1, 2, 3})
    assert proposal.majority and proposal.outliers == [0, 2] and proposal.reference == [1, 3]
    solution = Solution(proposal.placements, proposal.outliers, proposal.reference, True, "signatures")
    assert solution.seq_range[0] == 1 and solution.leading == [0, 2]
    # Shorter streams that may be cut short, or held back elsewhere, say nothing of where the longer one ends.
    assert propose(codes, 1).outliers == [2]
    assert propose(codes, 1, closed={0, 1, 2, 3}, settled={0, 2, 3}).outliers == [2]


def test_a_member_without_the_parting_field_may_have_departed_anywhere_its_own_records_allow():
    # Ranks 0, 1, 3 and 2 kept call stacks; rank 2's show it skipped the collective at seq 8. Rank 4, one short
    # too, kept an NCCL log only (lookalike signatures, no stacks): it agrees with the reference and with rank 2,
    # and goes with rank 2 by its length, but nothing it recorded says it skipped where rank 2 did. Its skip may
    # lie anywhere its own records allow: the first departure is somewhere in seq 1..8, not pinned at rank 2's.
    program = [10, 11, 12] * 4
    signatures = {r: stream([1] * 12) for r in (0, 1, 3)}
    signatures[2], signatures[4] = stream([1] * 11), stream([1] * 11)
    stacks = {r: stream([1] * 12, program) for r in (0, 1, 3)}
    stacks[2] = stream([1] * 11, program[:7] + program[8:])
    stacks[4] = stream([1] * 11, [0] * 11)
    solution = solve([("signatures", lambda: signatures), ("call sites", lambda: stacks)], 1, [],
                     lambda seq: (Location("log", seq),), closed={0, 1, 2, 3, 4}, settled={0, 1, 2, 3, 4})
    assert solution.outliers == [2, 4] and solution.majority
    assert solution.seq_range[0] == 1 and solution.seq_range[1] <= 8
    assert solution.best.low >= 6  # rank 2's own skip stays the likeliest


def test_a_member_without_the_parting_field_of_the_group_that_departed_first_may_have_departed_after_it():
    # Rank 2's call stacks show it skipped the collective at seq 1. Rank 4, one short too, kept an NCCL log only
    # (lookalike signatures, no stacks): it goes with rank 2 by its length, yet nothing it recorded says it skipped
    # where rank 2 did, and its skip may lie anywhere its own records allow (seq 1..11: a twin that skipped seq 11
    # writes the same log). The root stays at seq 1, rank 2's; a range naming rank 4 beside it reaches seq 11.
    program = [10, 11, 12] * 4
    signatures = {r: stream([1] * 12) for r in (0, 1, 3)}
    signatures[2], signatures[4] = stream([1] * 11), stream([1] * 11)
    stacks = {r: stream([1] * 12, program) for r in (0, 1, 3)}
    stacks[2] = stream([1] * 11, program[1:])
    stacks[4] = stream([1] * 11, [0] * 11)
    solution = solve([("signatures", lambda: signatures), ("call sites", lambda: stacks)], 1, [],
                     lambda seq: (Location("log", seq),), closed={0, 1, 2, 3, 4}, settled={0, 1, 2, 3, 4})
    assert solution.outliers == [2, 4] and solution.majority and solution.members == {2: [2, 4]}
    assert solution.seq_range == (1, 1) and solution.leading == [2, 4]
    assert solution.named_range == (1, 11) and solution.unpinned_named == ([4], 1)
    assert solution.best.low == 1  # rank 2's own skip stays the likeliest


def test_a_member_known_only_by_its_count_may_have_departed_anywhere_even_as_its_groups_lowest_rank():
    # Rank 3's call stacks show it skipped seq 8; rank 1 left no records, and a peer's desync report counts it one
    # short too, so it goes with rank 3 by its length. Rank 1 is the group's lowest rank, yet nothing of its own
    # places its skip where rank 3's is: it may have left out any of seq 1..8, and the root may be there.
    program = [10, 11, 12] * 4
    signatures = {r: stream([1] * 12) for r in (0, 2, 4)}
    signatures[3], signatures[1] = stream([1] * 11), stream([0] * 11)
    stacks = {r: stream([1] * 12, program) for r in (0, 2, 4)}
    stacks[3], stacks[1] = stream([1] * 11, program[:7] + program[8:]), stream([0] * 11, [0] * 11)
    solution = solve([("signatures", lambda: signatures), ("call sites", lambda: stacks)], 1, [],
                     lambda seq: (Location("log", seq),), ended={1}, unseen={1}, closed={0, 2, 3, 4},
                     settled={0, 2, 3, 4})
    assert solution.outliers == [1, 3] and solution.majority
    assert solution.seq_range == (1, 8)
    assert solution.best.low >= 6  # rank 3's own skip stays the likeliest
    # (what reaches before rank 3's skip is rank 1's, placed by nothing but its count)
    assert {p.unrecorded for p in solution.placements if p.low < 6} == {1}


def test_a_richer_field_that_parts_the_same_ranks_earlier_widens_the_range_back_to_it():
    # A pair: rank 1 issued seq 6 with another op (the signatures part the two there); the tags part the same two
    # at seq 2 already, where rank 0 issued two lookalikes in each other's place. Either may be the divergence:
    # the answer is seq 2..6, with both seqs on record, not 6 alone.
    signatures = {0: stream([1, 2, 2, 4, 5, 6, 7]), 1: stream([1, 2, 2, 4, 5, 9, 7])}
    tags = {0: stream([1, 2, 2, 4, 5, 6, 7], [10, 12, 11, 13, 14, 15, 16]),
            1: stream([1, 2, 2, 4, 5, 9, 7], [10, 11, 12, 13, 14, 15, 16])}
    alone = solve([("signatures", lambda: signatures)], 1, [], lambda seq: ())
    assert alone.seq_range == (6, 6)
    solution = solve([("signatures", lambda: signatures), ("tags", lambda: tags)], 1, [], lambda seq: ())
    assert solution.seq_range == (2, 6) and sorted(solution.outliers) == [0, 1]
    assert solution.parted_earlier == ("tags", 2, 6)
    assert solution.best.kind is EditKind.DIFFERENT and solution.best.low == 6  # the signatures' stays likeliest
    # Where the richer field parts other ranks than the poorer ones do (rank 0 from ranks 1 and 2), it is no
    # widening of theirs.
    trio = {r: stream([1, 2, 2, 4, 5, 6, 7]) for r in (0, 2)} | {1: stream([1, 2, 2, 4, 5, 9, 7])}
    fields = {0: stream([1, 2, 2, 4, 5, 6, 7], [10, 12, 11, 13, 14, 15, 16]),
              2: stream([1, 2, 2, 4, 5, 6, 7], [10, 11, 12, 13, 14, 15, 16]),
              1: stream([1, 2, 2, 4, 5, 9, 7], [10, 11, 12, 13, 14, 15, 16])}
    solution = solve([("signatures", lambda: trio), ("tags", lambda: fields)], 1, [], lambda seq: ())
    assert solution.parted_earlier is None


def test_a_richer_field_that_parts_no_rank_sooner_claims_no_earlier_parting():
    # Rank 0 issued seq 5 and 6 in each other's place (counts 8 and 1), which the signatures show; rank 3 ran a
    # collective of its own at seq 7, with a call stack no other record has, and stopped there. The call stacks part
    # nobody sooner: they only leave rank 3's last record unmatched, so a block of its own lookalikes running to its
    # end may reach back. The range may widen, as lookalikes do; nothing says the stacks part the ranks earlier.
    counts = [1, 8, 1, 8, 1, 8, 1, 8]
    sites = [10, 11, 10, 11, 10, 11, 10, 11]
    program = stream(counts, sites)
    swapped = stream(counts[:4] + [8, 1] + counts[6:], sites[:4] + [11, 10] + sites[6:])
    extra = stream(counts[:6] + [8], sites[:6] + [12])
    both = {0: swapped, 1: program, 2: stream(counts[:6], sites[:6]), 3: extra}
    signatures = {r: stream(list(c.fields["op"][:c.length])) for r, c in both.items()}
    solution = solve([("signatures", lambda: signatures), ("tags", lambda: both)], 1, [], lambda seq: ())
    assert solution.leading == [0] and solution.seq_range[1] == 5
    assert solution.parted_earlier is None


def test_joiners_go_by_length_where_a_different_block_leaves_the_length_unexplained():
    # Rank 0 left out a drafter pass of two collectives at seq 1 (two short, in a loop of two call stacks). Only
    # rank 2's stacks reach back to the pass's second collective, which parts it from rank 0 there; ranks 1 and 3
    # kept stacks from later on (rings that lost their oldest entries), as long as rank 2's. Rank 0 issuing another
    # collective at seq 2 explains that one record too, but not that it launched two fewer, which a collective left
    # out must explain beside it: the joiners go with rank 2 by their length, and rank 0 departed.
    loop = [7, 8] * 4
    codes = {0: stream([1] * 8, loop), 2: stream([1] * 10, [0, 9] + loop),
             1: stream([1] * 10, [0] * 6 + loop[:4]), 3: stream([1] * 10, [0, 0] + loop)}
    ranks = set(codes)
    proposal = propose(codes, 1, closed=ranks, settled=ranks)
    assert proposal.majority and proposal.outliers == [0] and proposal.reference == [1, 2, 3]
    assert {p.kind for p in proposal.placements} >= {EditKind.MISSING}


def test_several_groups_with_no_majority_are_each_placed_against_every_other():
    # Three ranks, three streams: rank 1 left out one of the lookalikes before seq 5, rank 0 issued another type
    # at seq 5, rank 2 ran the program. Against rank 0 alone, rank 1's skip reads as one at seq 5 (rank 0's odd
    # collective); against rank 2 it may be anywhere in seq 1..6. Ranks 1 and 2 alike at seq 5 do not name rank 0
    # there: with rank 0 as the program, rank 2 issued a lookalike in place of its odd one and rank 1 left that one
    # out, two ranks and two collectives, as many as with rank 2 as the program. Every group is placed against
    # every other. Ranks 0 and 2 have parted by seq 5, so the first divergent collective comes no later: seq 1..5,
    # where rank 1's skip may come first.
    codes = {0: stream([1, 1, 1, 1, 2, 1, 3]), 1: stream([1, 1, 1, 1, 1, 3]), 2: stream([1, 1, 1, 1, 1, 1, 3])}
    proposal = propose(codes, 1)
    assert not proposal.majority and proposal.outliers == [0, 1, 2]
    solution = Solution(proposal.placements, proposal.outliers, proposal.reference, False, "signatures",
                        either_side=proposal.either_side)
    assert solution.seq_range == (1, 5)
    assert {p.rank for p in proposal.placements if p.low == 1} >= {1}


def test_lookalikes_read_back_wrong_name_the_minority_with_no_record_of_the_first_wrong_result():
    # Ranks 4, 6 and 7 ran alike in everything recorded and read back seq 5 wrong; rank 5's records end at seq 4 (it
    # never read the rest back). The collective at seq 5 completed on every member, so rank 5 launched it too: the
    # three alike ran one program, and rank 5, the fewest departing, the other collective.
    from ncclforensics.align.root import _misaligned_lookalikes

    codes = {4: stream([1] * 8), 6: stream([1] * 8), 7: stream([1] * 8), 5: stream([1] * 4)}
    checks = [ResultChecks(frozenset(range(1, 5)), frozenset(range(5, 9)), ())]
    proposal = _misaligned_lookalikes(codes, 1, checks)
    assert proposal.outliers == [5] and proposal.reference == [4, 6, 7] and proposal.majority
    # Two of four without a record there are no minority: every rank is named.
    codes[6] = stream([1] * 4)
    proposal = _misaligned_lookalikes(codes, 1, checks)
    assert proposal.outliers == [4, 5, 6, 7] and not proposal.majority


def test_a_richer_field_only_one_reference_rank_recorded_is_no_evidence_against_the_outlier():
    # Seed 94490: seven collectives a step, all-reduces alike but the last. Ranks 0 and 1 kept NCCL logs (no call
    # stacks), rank 2 a dump, rank 3 both. Rank 2 issued step 0's second and third all-reduces in each other's place;
    # rank 3 left out step 1's second (one short: the signatures place it in seq 8..13). Of the reference only rank 2
    # recorded stacks, and against its stacks rank 3's need a whole step left out at seq 2, then depart again: rank 2
    # may have departed there itself. Both are named, no majority, over a range from the stacks' parting at seq 2.
    step_ops, step_stacks = [1] * 6 + [2], [10, 11, 12, 13, 14, 15, 16]
    ops = step_ops * 4
    program = step_stacks * 4
    swapped = [10, 12, 11, 13, 14, 15, 16] + step_stacks * 3
    skipped = program[:8] + program[9:]
    signatures = {0: stream(ops), 1: stream(ops), 2: stream(ops), 3: stream(ops[:8] + ops[9:])}
    stacks = {0: stream(ops, [0] * 28), 1: stream(ops, [0] * 28), 2: stream(ops, swapped),
              3: stream(ops[:8] + ops[9:], skipped)}
    stages = [("signatures", lambda: signatures), ("call sites", lambda: stacks)]
    alone = solve(stages[:1], 1, [], lambda seq: ())
    assert alone.outliers == [3] and alone.best.kind is EditKind.MISSING and alone.best.low >= 8
    solution = solve(stages, 1, [], lambda seq: ())
    assert solution.outliers == [2, 3] and not solution.majority and solution.reference == [0, 1]
    low, high = solution.seq_range
    assert low <= 2 and high >= 9 and solution.lone_field == ("call sites", 2, 2)
    # Where one edit explains rank 3's stacks against rank 2's (rank 2 ran the program), they place rank 3's skip.
    stacks[2] = stream(ops, program)
    solution = solve(stages, 1, [], lambda seq: ())
    assert solution.outliers == [3] and solution.majority and solution.best.low == solution.best.high == 9
    assert solution.lone_field is None


def test_a_call_stack_no_other_record_holds_identifies_nothing_among_records_without_one():
    """NCCL logs give 5 lookalike all-reduces for rank 0 and 3 for the others; each watchdog's timeout line adds
    the call stack (tag 7, in this helper's second field) of seq 3, where every rank waits. That stack is the only
    one either stream holds, not one a loop's other all-reduces lack: rank 0 may have left out a lookalike before
    it (and run on), so its edits are not all after seq 3."""
    reference = stream([1, 1, 1], [0, 0, 7])
    outlier = stream([1] * 5, [0, 0, 7, 0, 0])
    found, _ = place_edits(0, outlier, reference, start=1)
    assert min(p.low for p in found) == 1
    # Where every record holds the field, a value that occurs once in each stream still bounds every edit.
    reference = stream([1, 1, 1], [5, 6, 7])
    outlier = stream([1] * 5, [5, 6, 7, 8, 9])
    found, _ = place_edits(0, outlier, reference, start=1)
    assert min(p.low for p in found) == 4


def test_a_position_with_no_record_is_no_lookalike_of_an_identified_record():
    """Position 0 holds no record of rank 0 (a wrapped ring lost its head, a gap in the seqs): nothing of it is
    known, so it pairs with every record, yet it is no record that lacks a field. Call stacks that occur once in
    each stream at positions 1 to 4 still identify their collectives: the edits come after them."""
    from ncclforensics.align.edits import _identified_floor

    reference = stream([1] * 5, [5, 6, 7, 8, 9])
    whole = stream([1] * 7, [5, 6, 7, 8, 9, 10, 11])
    headless = stream([0] + [1] * 6, [0, 6, 7, 8, 9, 10, 11])
    assert _identified_floor(whole, reference, 5) == _identified_floor(headless, reference, 5) == 5
    found, _ = place_edits(0, headless, reference, start=1)
    assert min(p.low for p in found) == 6
    # A record that lacks the stack but holds the op may be any of them: it identifies nothing before it.
    lacking = stream([1] * 7, [0, 6, 7, 8, 9, 10, 11])
    assert _identified_floor(lacking, reference, 5) == 0


def test_whole_streams_held_nowhere_else_side_by_their_ends_whatever_collectives_part_the_groups():
    # 369260: rank 3 skipped a drafter pass of 3 and ran on to its program's end (8 collectives); rank 2 ran the
    # pass (9). Their call stacks (here tags) part them with different collectives and a length too; ranks 0 and 1
    # kept NCCL logs of lookalikes, 9 each. Every stream is whole and held nowhere else, so each ends where its
    # program did: one of rank 3's program would end at 8. Ranks 0 and 1 are rank 2's; rank 3 departed.
    codes = {2: stream([1] * 9, [1, 2, 3, 4, 5, 1, 2, 1, 2]), 3: stream([1] * 8, [1, 2] * 4),
             0: stream([1] * 9, [0] * 9), 1: stream([1] * 9, [0] * 9)}
    found = propose(codes, 1, closed=set(codes), settled=set(codes))
    assert found.majority and found.outliers == [3] and found.reference == [0, 1, 2]
    # (where another comm may have held rank 3, its end is not its program's: the lengths tell nothing)
    held = propose(codes, 1, closed=set(codes), settled={0, 1, 2})
    assert not held.majority and {2, 3} <= set(held.outliers)



def test_a_whole_stream_lacking_the_parting_field_that_ends_where_the_smaller_group_does_may_be_either_sides():
    # 351492: rank 3's call stack (here the op) parts from rank 2's at seq 2 (it launched one more world collective);
    # rank 1's records, whole, pair with either there and end at 3, where rank 3's do; rank 0 left only PyTorch's
    # count, 2, where rank 2's records end. Every rank runs in a TP comm too. Rank 1 may be rank 2's, gone on past
    # where rank 2 was held elsewhere, as the fewest departures say, or rank 3's, as its end says: no majority.
    codes = {1: stream([0, 0, 5]), 2: stream([0, 5]), 3: stream([0, 6, 5]), 0: stream([0, 0])}
    found = propose(codes, 1, ended={0}, unseen={0}, closed={1, 2, 3})
    assert not found.majority and found.outliers == [0, 1, 2, 3]
    # (one that ends where the largest group does goes with it, as the fewest departures say)
    codes[1] = stream([0, 0])
    assert propose(codes, 1, ended={0}, unseen={0}, closed={1, 2, 3}).outliers == [3]


def test_a_confirmed_block_may_start_as_late_as_the_first_departure_with_fewer_records_after_it():
    # Call stacks of one step [1, 2, 1, 2, 3] (a layer loop: its collectives repeat stacks). Rank 2 swapped two in
    # step 1 (seq 8), rank 3 left one out in step 2: by one edit, rank 2 ran a whole step more, its block starting
    # anywhere that takes in the swap, seq 5..8. Where it starts at seq 7 or 8, fewer than a block's worth of records
    # follow it, yet the same ones pair: it explains every record as well there, and the first departure is there.
    step = [1, 2, 1, 2, 3]
    outlier = stream(step + [1, 2, 2, 1, 3] + step)
    reference = stream(step + step + [1, 2, 2, 3])
    found, whole = place_edits(2, outlier, reference, start=1)
    blocks = [p for p in found if p.kind is EditKind.EXTRA and p.size == 5]
    assert whole and blocks and span(blocks) == (5, 8)


def test_a_swap_of_lookalikes_shown_only_by_a_field_unrecorded_before_reaches_back_to_its_first_half():
    # Signatures (op) everywhere, alike; a call stack (tag) only at seq 5, the collective a timeout line names.
    # The outlier's stack there is the reference's seq-4 one: it swapped seq 4 and 5, which shows only at seq 5.
    # Seq 1..3 are of other signatures, which no collective of seq 5's can stand for: the swap may begin at seq 4.
    # (The all-gather at seq 8 rules out a shift: an extra collective and a missing one pair nowhere past it.)
    reference = stream([3, 3, 2, 1, 1, 1, 1, 2], [0, 0, 0, 0, 22, 0, 0, 0])
    outlier = stream([3, 3, 2, 1, 1, 1, 1, 2], [0, 0, 0, 0, 11, 0, 0, 0])
    found, whole = place_edits(2, outlier, reference, start=1)
    assert whole and span(found) == (4, 5)
    assert max(found, key=lambda p: p.score).kind is EditKind.DIFFERENT


def test_no_swap_reaches_back_where_every_field_is_recorded():
    reference = stream([1, 1, 1, 1, 1], [11, 12, 13, 14, 15])
    outlier = stream([1, 1, 1, 1, 1], [11, 12, 13, 99, 15])
    found, _ = place_edits(2, outlier, reference, start=1)
    assert span(found) == (4, 4)


def test_groups_whose_edits_against_the_largest_may_be_one_edit_are_a_side_as_large_as_it():
    # Seed 1011587: all-reduces alike in signature, two layers' call stacks alternating. Ranks 0 and 2 each left
    # out an all-reduce (at seq 6 and 4), rank 7 issued an all-gather at seq 3, rank 5 ran the program. By
    # signatures ranks 0 and 2 are one stream, one short; ranks 5 and 7 part at seq 3, yet each launched one more
    # than ranks 0 and 2, and may have done so at seq 3 alike: two against two, with rank 5 as early as rank 7 (a
    # lookalike of its own before seq 3), so no majority says who departed first, and every rank is named.
    ops, stacks = [1, 1, 1, 1, 1, 1, 2], [10, 11, 10, 11, 10, 11, 20]

    def left_out(values, at):
        return values[:at] + values[at + 1:]

    runs = {5: (ops, stacks), 7: (ops[:2] + [3] + ops[3:], stacks), 2: (left_out(ops, 3), left_out(stacks, 3)),
            0: (left_out(ops, 5), left_out(stacks, 5))}
    signatures = {r: stream(op) for r, (op, _) in runs.items()}
    poorer = propose(signatures, 1)
    assert not poorer.majority and poorer.outliers == [0, 2, 5, 7]
    # The call stacks part ranks 0 and 2, and pin each departure: rank 7 departed first, at seq 3.
    call_sites = {r: Codes({"op": np.array(op, dtype=np.uint64), "stack": np.array(stack, dtype=np.uint64)},
                           len(op)) for r, (op, stack) in runs.items()}
    solution = solve([("signatures", lambda: signatures), ("call sites", lambda: call_sites)], 1, [],
                     lambda seq: (Location("log", seq),))
    assert solution.majority and solution.pinned_by == "call sites"
    assert solution.leading == [7] and solution.seq_range == (3, 3)


def test_a_journal_side_the_records_leave_partly_unplaced_breaks_no_tie():
    # Seed 1107252: four ranks, the drafter's all-reduces alike to the model's, the head's larger one ends a step.
    # Rank 1 launched 18 (two drafter ones more in step 1), rank 2 16; the logs of ranks 0 and 3 were cut at 5 and
    # 15, before the two part. The gate journal has ranks 1 and 3 passing where 0 and 2 skipped: rank 3 is on rank
    # 1's side, rank 0 on rank 2's, two against two. The journal says which side ran the drafter, not which one
    # departed: no majority, every rank named.
    step = [1] * 8 + [2]
    codes = {0: stream([1] * 5), 1: stream(step + step), 2: stream(step + [1] * 6 + [2]), 3: stream(step + [1] * 6)}
    whole = {1, 2}
    proposal = propose(codes, 1, deviants={1, 3}, cut={0, 3}, incomplete={0, 3}, closed=whole, settled=whole)
    assert not proposal.majority and proposal.outliers == [0, 1, 2, 3]
    # Where the journal's side is the group the records place (rank 3 skipped too), it says which side deviated.
    told = propose(codes, 1, deviants={1}, cut={0, 3}, incomplete={0, 3}, closed=whole, settled=whole)
    assert told.majority and told.outliers == [1]
