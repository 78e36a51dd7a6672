"""Roots from checked results alone (align/step_sums.py): who may have departed, by what each rank read back."""

import math
from dataclasses import replace

from ncclforensics.align.answers import DIFFERENT_OPS, RangeReason, Root
from ncclforensics.align.notes import SumsPartReference, SumsPlaceCutRanks
from ncclforensics.align.own_records import departed_by_own_records
from ncclforensics.align.step_sums import step_sums_root
from ncclforensics.align.sums_beside import with_sums_placing_cut_ranks
from ncclforensics.model import FingerprintRow, Location


def checked(rank: int, step: int, op: int, right: bool) -> FingerprintRow:
    """One per-collective record whose result was right or wrong."""
    return FingerprintRow(Location(f"fp{rank}", step * 10 + op), rank, step, op, sum=1.0 if right else 2.0,
                          expected_sum=1.0)


def trace(rank: int, steps: list[list[bool]]) -> list[FingerprintRow]:
    return [checked(rank, s, op, right) for s, ops in enumerate(steps) for op, right in enumerate(ops)]


def test_one_rank_alone_wrong_where_every_rank_checked_the_step_is_the_outlier():
    # Rank 1 read back a wrong result in step 0; ranks 0, 2 and 3 read back step 0 right, and step 1 wrong: rank
    # 1's extra collective paired with their next one.
    rows = trace(1, [[True, False, True], [False] * 3])
    rows += [r for rank in (0, 2, 3) for r in trace(rank, [[True] * 3, [False, True, True]])]
    root, step = step_sums_root(rows, {})
    assert root.outlier_ranks == [1] and root.majority and step == 0


def test_one_rank_alone_wrong_and_one_other_wrong_only_next_may_be_a_pair_either_of_which_departed():
    # Rank 1 wrong in step 0, rank 3 right in step 0 and wrong in step 1, ranks 0 and 2 right all through: rank 1
    # ran an extra collective on a comm of ranks 1 and 3, or rank 3 left out its step's last one there.
    rows = trace(0, [[True] * 3, [True] * 3]) + trace(1, [[True, False, True], [False] * 3])
    rows += trace(2, [[True] * 3, [True] * 3]) + trace(3, [[True] * 3, [False, True, True]])
    root, step = step_sums_root(rows, {})
    assert root.outlier_ranks == [1, 3] and not root.majority and step == 0 and root.comm == "[ranks=1,3]"


def test_a_wrong_result_beside_a_trace_that_stops_before_the_step_names_both_ranks():
    # Rank 2 read back step 1 wrong; rank 3's trace ends after step 0 (it hung); ranks 0 and 1 read back step 1
    # right, so they shared no misaligned collective: the departure is rank 2's or rank 3's.
    rows = trace(0, [[True] * 3] * 2) + trace(1, [[True] * 3] * 2)
    rows += trace(2, [[True] * 3, [True, True, False]]) + trace(3, [[True] * 3])
    root, _ = step_sums_root(rows, {})
    assert root.outlier_ranks == [2, 3] and not root.majority and root.comm == "[ranks=2,3]"


def test_a_trace_that_stops_before_the_step_names_no_side_where_whole_logs_show_it_sharing_no_comm():
    # As above, but whole logs show rank 3 in comms of its own (it waits in a divergence there) and rank 2 in comm
    # "a" with a rank that left no trace: rank 3 shared no collective with rank 2, and the root names rank 2 alone.
    rows = trace(0, [[True] * 3] * 2) + trace(1, [[True] * 3] * 2)
    rows += trace(2, [[True] * 3, [True, True, False]]) + trace(3, [[True] * 3])
    comms_of = {0: frozenset("c"), 1: frozenset("d"), 2: frozenset("ac"), 3: frozenset("bd")}
    root, step = step_sums_root(rows, {}, comms_of=comms_of)
    assert root.outlier_ranks == [2] and not root.majority and step == 1 and root.comm == "[ranks=2]"
    # (a rank with no whole log may share a comm with it that no record shows: it is still named)
    root, _ = step_sums_root(rows, {}, comms_of={r: c for r, c in comms_of.items() if r != 3})
    assert root.outlier_ranks == [2, 3]


def test_a_rank_left_waiting_in_a_comm_of_its_own_is_no_side_of_the_ranks_that_read_back_wrong():
    # Ranks 0 and 1 read back step 1 wrong, ranks 2-6 right; rank 7's whole trace ends at step 0. Read as one
    # comm's two sides, rank 7 is the fewest departing; but whole logs show it sharing no comm with ranks 0 and 1
    # (it waits in a divergence of its own): ranks 0 and 1 are named, and no majority.
    rows = [r for rank in range(7) for r in trace(rank, [[True] * 2, [rank > 1] * 2])] + trace(7, [[True] * 2])
    comms_of = {rank: frozenset({"a", "w"}) for rank in range(7)} | {7: frozenset("b")}
    root, _ = step_sums_root(rows, {})
    assert root.outlier_ranks == [7] and root.majority
    root, _ = step_sums_root(rows, {}, comms_of=comms_of)
    assert root.outlier_ranks == [0, 1] and not root.majority


def test_ranks_wrong_together_name_themselves_and_a_rank_right_in_the_step_but_not_the_next():
    # Ranks 0, 2 and 3 read back step 1 wrong; rank 1 read it back right and step 2 wrong (it left out the
    # step's last collective, pairing its next one with theirs); ranks 4..7 right all through.
    rows = [r for rank in (0, 2, 3) for r in trace(rank, [[True] * 2, [True, False], [False] * 2])]
    rows += trace(1, [[True] * 2, [True] * 2, [False] * 2])
    rows += [r for rank in range(4, 8) for r in trace(rank, [[True] * 2] * 3)]
    root, step = step_sums_root(rows, {})
    assert root.outlier_ranks == [0, 1, 2, 3] and not root.majority and step == 1


def test_ranks_wrong_together_that_never_complete_the_next_step_name_the_one_right_in_it_that_went_on_wrong():
    # Seed 102067: rank 0 left out the last collective of step 0 in its group 0..3; ranks 1..3 read step 0 back
    # wrong and wait in step 1 with one left over, while rank 0 went on and read step 1 back wrong. Ranks 4 and 5
    # hung in step 1 beside them (another group's departure), ranks 6 and 7 are right all through. Those ahead ran
    # fewer collectives, or those waiting one more each: the fewest departing is rank 0.
    rows = [step_sum(r, 0, r not in (1, 2, 3)) for r in range(8)]
    rows += [step_sum(0, 1, False)] + [step_sum(r, 1, True) for r in (6, 7)]
    root, step = step_sums_root(rows, {})
    assert (root.outlier_ranks, root.reference_ranks, root.majority, step) == ([0], [1, 2, 3, 4, 5], True, 0)
    # The ranks wrong in step 0 completing step 1 too: nothing says who is ahead, and no side is named alone.
    rows += [step_sum(r, 1, False) for r in (1, 2, 3)]
    assert step_sums_root(rows, {})[0].outlier_ranks == [0, 1, 2, 3, 4, 5]


def test_one_rank_with_a_trace_that_read_back_wrong_is_a_divergence_of_its_comm():
    rows = trace(1, [[True] * 2, [True, False]])
    root, step = step_sums_root(rows, {"0xabc": {0, 1}})
    assert root.outlier_ranks == [1] and not root.majority and step == 1 and root.comm == "0xabc"
    assert step_sums_root(trace(1, [[True] * 2] * 2), {"0xabc": {0, 1}}) is None


def test_two_even_sides_of_wrong_results_name_both_with_no_majority():
    # Ranks 0 and 3 read back one wrong sum at step 0, ranks 1 and 2 another: one pair departed, nothing says which.
    def row(rank: int, got: float) -> FingerprintRow:
        return FingerprintRow(Location(f"fp{rank}", 1), rank, 0, None, sum=got, expected_sum=10.0)

    rows = [row(0, 12.0), row(1, 9.0), row(2, 9.0), row(3, 12.0)]
    root, step = step_sums_root(rows, {})
    assert root.outlier_ranks == [0, 1, 2, 3] and not root.majority and step == 0
    # Unchecked sums of two even sides may be two replicas by design: no root.
    unchecked = [FingerprintRow(r.loc, r.rank, r.step, None, sum=r.sum) for r in rows]
    assert step_sums_root(unchecked, {}) is None


def step_sum(rank: int, step: int, right: bool, path: str | None = None) -> FingerprintRow:
    """One per-step checksum, right or wrong."""
    return FingerprintRow(Location(path or f"fp{rank}", step + 1), rank, step, None, sum=1.0 if right else 2.0,
                          expected_sum=1.0)


def test_the_one_rank_that_completed_a_step_wrong_while_the_others_wait_in_it_is_the_outlier():
    # Rank 2 left out a collective of step 1 and completed the step with mixed results; ranks 0, 1 and 3 have
    # whole traces up to step 0: their last collective of step 1 has nothing to pair with.
    rows = [step_sum(r, 0, True) for r in range(4)] + [step_sum(2, 1, False)]
    root, step = step_sums_root(rows, {})
    assert (root.outlier_ranks, root.reference_ranks, root.majority, step) == ([2], [0, 1, 3], True, 1)
    # Rank 2 alone waiting in step 1, the others done with it wrong: rank 2 ran one more there.
    rows = [step_sum(r, 0, True) for r in range(4)] + [step_sum(r, 1, False) for r in (0, 1, 3)]
    assert step_sums_root(rows, {})[0].outlier_ranks == [2]


def test_the_one_rank_that_completed_a_step_right_and_the_next_wrong_while_the_others_wait_in_it_is_the_outlier():
    # Seed 590106: rank 2's gate skipped the drafter pass that ends step 1; it read step 1 back right and step 2 wrong
    # (its next collectives paired with the others' drafter pass), while ranks 0, 1 and 3 have whole traces up to
    # step 0 alone: they wait in step 1. The ranks part in step 1, and the fewest departing is rank 2.
    rows = [step_sum(r, 0, True) for r in range(4)] + [step_sum(2, 1, True), step_sum(2, 2, False)]
    root, step = step_sums_root(rows, {})
    assert (root.outlier_ranks, root.reference_ranks, root.majority, step) == ([2], [0, 1, 3], True, 1)
    assert root.step_bound == 1
    # Ranks right through both steps shared no misaligned collective: bystanders beside those that part.
    rows += [step_sum(r, s, True) for r in range(4, 8) for s in (0, 1, 2)]
    assert step_sums_root(rows, {})[0].outlier_ranks == [2]
    # Traces cut short say nothing of where their ranks stopped: no side is named.
    cut = [step_sum(r, 0, True) for r in range(4)] + [step_sum(2, 1, True), step_sum(2, 2, False)]
    assert not step_sums_root(cut, {}, cut=frozenset({0, 1}))[0].majority


def test_the_one_rank_that_completed_a_step_wrong_while_its_group_waits_beside_another_group_right_is_the_outlier():
    # TP groups 0..3 and 4..7: rank 0 left out a collective of step 1 and completed it wrong; ranks 1..3 wait in it;
    # ranks 4..7 read it back right, the job's last step. They shared no misaligned collective: bystanders, and
    # beside them rank 0 is the one of four that completed the step (it named every rank of 0..3, no majority).
    rows = [step_sum(r, 0, True) for r in range(8)] + [step_sum(0, 1, False)]
    rows += [step_sum(r, 1, True) for r in range(4, 8)]
    root, step = step_sums_root(rows, {})
    assert (root.outlier_ranks, root.reference_ranks, root.majority, step) == ([0], [1, 2, 3], True, 1)
    assert root.comm == "[ranks=0,1,2,3]"
    # Ranks right in the step but with no record of the next one while others have it are no bystanders.
    rows += [step_sum(r, 2, True) for r in range(5, 8)]
    assert step_sums_root(rows, {})[0].outlier_ranks == [0, 1, 2, 3, 4]


def test_the_one_rank_right_in_the_last_step_on_record_expecting_apart_from_the_rest_is_the_outlier():
    # Seed 992605: rank 1's gate skipped the drafter pass that ends step 0 on the others. Ranks 0, 2 and 3 read step 0
    # back wrong alike (their last collectives paired with rank 1's of step 1), rank 1 read it back right, expecting
    # less; nobody read step 1 back (the job hung in it). Rank 1 ran other collectives in the step than the rest.
    def sums(rank: int, got: float, expected: float, path: str | None = None) -> FingerprintRow:
        return FingerprintRow(Location(path or f"fp{rank}", 1), rank, 0, None, sum=got, expected_sum=expected)

    rows = [sums(r, 660224.0, 657920.0) for r in (0, 2, 3)] + [sums(1, 130560.0, 130560.0)]
    root, step = step_sums_root(rows, {})
    assert (root.outlier_ranks, root.reference_ranks, root.majority, step) == ([1], [0, 2, 3], True, 0)
    # Expecting alike with the rest, it ran their collectives, and shared no misaligned one with them: a bystander.
    alike = [sums(r, 660224.0, 657920.0) for r in (0, 2, 3)] + [sums(1, 657920.0, 657920.0)]
    assert step_sums_root(alike, {})[0].outlier_ranks == [0, 2, 3]
    # A trace cut short may end before its rank's next step for the cut alone: nothing is said of the step after.
    cut = [sums(r, 660224.0, 657920.0, path=f"cut{r}" if r == 0 else None) for r in (0, 2, 3)] + rows[3:]
    assert step_sums_root(cut, {}, cut=frozenset({0}))[0].outlier_ranks != [1]


def test_traces_cut_short_before_the_step_may_be_of_either_side():
    rows = [step_sum(r, 0, True, path=f"cut{r}" if r != 2 else None) for r in range(4)] + [step_sum(2, 1, False)]
    root, _ = step_sums_root(rows, {}, cut=frozenset({0, 1, 3}))
    assert root.outlier_ranks == [0, 1, 2, 3] and not root.majority


def per_step(rank: int, sums: list[tuple[float, float]]) -> list[FingerprintRow]:
    """Per-step checksums of one rank: (read back, expected) per step."""
    return [FingerprintRow(Location(f"fp{rank}", s), rank, s, None, sum=got, expected_sum=want)
            for s, (got, want) in enumerate(sums)]


def test_offsets_that_part_beside_ranks_without_the_step_name_no_minority():
    # Two TP groups, 0..3 and 4..7. Rank 2 left out a collective of its group, ranks 4 and 5 one of theirs: those
    # three ran through step 1 and read it back wrong, each group off by its own amount, while the others hung
    # before writing step 1. The three's offsets part by group, not into a majority and an outlier; they are the
    # ranks that completed the step, every one wrong, while every other whole trace waits in it.
    rows = [r for rank in (0, 1, 3, 6, 7) for r in per_step(rank, [(10.0, 10.0)])]
    rows += per_step(2, [(10.0, 10.0), (30.0, 50.0)])
    rows += [r for rank in (4, 5) for r in per_step(rank, [(10.0, 10.0), (20.0, 90.0)])]
    root, step = step_sums_root(rows, {})
    assert (root.outlier_ranks, root.majority, step) == ([2, 4, 5], True, 1)
    # Ranks 2, 5 and 6 left out their step's last collective: right in step 1, wrong in step 2; the others of
    # their groups wrong in step 1, off by their group's amount. The offsets part by group; the ranks right in the
    # step and wrong all through the next ran fewer collectives there, the fewest departing (seed 30266).
    rows = [r for rank in (0, 1, 3) for r in per_step(rank, [(10.0, 10.0), (40.0, 30.0), (5.0, 1.0)])]
    rows += [r for rank in (4, 7) for r in per_step(rank, [(10.0, 10.0), (80.0, 30.0), (5.0, 1.0)])]
    rows += [r for rank in (2, 5, 6) for r in per_step(rank, [(10.0, 10.0), (30.0, 30.0), (7.0, 1.0)])]
    root, step = step_sums_root(rows, {})
    assert (root.outlier_ranks, root.reference_ranks, root.majority, step) == ([2, 5, 6], [0, 1, 3, 4, 7], True, 1)
    # One of them with no sum of the next step (it hung): whether it left out a collective is on no record.
    rows = [r for r in rows if not (r.rank == 6 and r.step == 2)]
    root, step = step_sums_root(rows, {})
    assert root.outlier_ranks == list(range(8)) and not root.majority and step == 1
    # Four of eight right in the step: no side is the fewer.
    rows = [r for rank in (0, 1, 3, 4) for r in per_step(rank, [(10.0, 10.0), (40.0, 30.0), (5.0, 1.0)])]
    rows += [r for rank in (2, 5, 6, 7) for r in per_step(rank, [(10.0, 10.0), (30.0, 30.0), (7.0, 1.0)])]
    root, step = step_sums_root(rows, {})
    assert root.outlier_ranks == list(range(8)) and not root.majority


def test_nan_checksums_beside_one_rank_right_name_no_lone_rank_and_do_not_raise():
    # Rank 0 reads back step 0 right and step 1 wrong; ranks 1 and 2 read back NaN in step 0: a NaN is off by no
    # one amount, so rank 0 is not taken for the one rank that left out its step's last collective.
    def step_sum(rank: int, step: int, value: float) -> FingerprintRow:
        return FingerprintRow(Location(f"fp{rank}", step + 1), rank, step, None, sum=value, expected_sum=4.0)

    rows = [step_sum(0, 0, 4.0), step_sum(0, 1, 5.0)]
    rows += [step_sum(rank, 0, float("nan")) for rank in (1, 2)] + [step_sum(rank, 1, 5.0) for rank in (1, 2)]
    found = step_sums_root(rows, {})
    assert found is None or found[0].outlier_ranks != [0]


def test_ranks_each_alone_in_their_offset_beside_groups_off_alike_are_the_outliers():
    # Two TP groups, 0..3 and 4..7, nothing naming them; rank 0 ran one more collective in its group and rank 4 one
    # more in its. Every rank reads back step 0 wrong: ranks 1-3 off alike, ranks 5-7 off alike by another amount
    # (their group's inputs), ranks 0 and 4 each off by an amount of their own. No side is a majority, but each group
    # of alike offsets is one comm's ranks that shared its misaligned collective: ranks 0 and 4, each alone, departed.
    rows = per_step(0, [(69.0, 86.0)]) + per_step(4, [(148.0, 224.0)])
    rows += [r for rank in (1, 2, 3) for r in per_step(rank, [(27.0 + rank, 22.0 + rank)])]
    rows += [r for rank in (5, 6, 7) for r in per_step(rank, [(84.0 + rank, 58.0 + rank)])]
    root, step = step_sums_root(rows, {})
    assert (root.outlier_ranks, root.reference_ranks, root.majority, step) == ([0, 4], [1, 2, 3, 5, 6, 7], True, 0)
    # Lone ranks as many as the others name no one: any of them may be a comm's lone follower.
    rows = [r for rank in (0, 4, 8, 9) for r in per_step(rank, [(100.0 + rank, 10.0)])]
    rows += [r for rank in (1, 2) for r in per_step(rank, [(27.0, 22.0)])]
    rows += [r for rank in (5, 6) for r in per_step(rank, [(84.0, 58.0)])]
    assert step_sums_root(rows, {}) is None or step_sums_root(rows, {})[0].outlier_ranks != [0, 4, 8, 9]


def test_a_groups_outlier_off_by_what_the_other_groups_ranks_are_off_by_alike_is_still_its_outlier():
    # Two TP groups, 0..3 and 4..7, nothing naming them: each group's ranks expect alike in every step, apart from
    # the other's. At step 1 rank 2 reordered two collectives of its group and rank 6 two of its: ranks 0, 1 and 3
    # are off by 6, rank 2 by 14, ranks 4, 5 and 7 by 14 too, and rank 6 by 37. Rank 2's offset is that of the
    # other group's ranks, whose sums it shares nothing of: within its own group it is the one apart (1133456).
    rows = [r for rank in (0, 1, 3) for r in per_step(rank, [(10.0, 10.0), (44.0, 50.0), (60.0, 70.0)])]
    rows += per_step(2, [(10.0, 10.0), (36.0, 50.0), (60.0, 70.0)])
    rows += [r for rank in (4, 5, 7) for r in per_step(rank, [(30.0, 30.0), (76.0, 90.0), (95.0, 110.0)])]
    rows += per_step(6, [(30.0, 30.0), (53.0, 90.0), (95.0, 110.0)])
    root, step = step_sums_root(rows, {})
    assert (root.outlier_ranks, root.reference_ranks, root.majority, step) == ([2, 6], [0, 1, 3, 4, 5, 7], True, 1)
    # Both groups off alike within, each by the same amount (a world collective mixed): no group parts within, and
    # no rank is named apart from the rest.
    rows = [r for rank in range(4) for r in per_step(rank, [(10.0, 10.0), (36.0, 50.0)])]
    rows += [r for rank in range(4, 8) for r in per_step(rank, [(30.0, 30.0), (76.0, 90.0)])]
    root, _ = step_sums_root(rows, {})
    assert root.outlier_ranks == list(range(8)) and not root.majority


def records_root(outliers: list[int], reference: list[int], unplaced: list[int]) -> Root:
    """A root the records show over seq 15..20, with ranks whose records were cut before the sides part."""
    return Root(comm="0xabc", seq=15, seq_range=(15, 20), outlier_ranks=outliers, reference_ranks=reference,
                kind=DIFFERENT_OPS, size=2, pinned_by="signatures", reason=RangeReason.LOOKALIKE, majority=True,
                ops={}, kinds=(DIFFERENT_OPS,), shown=True, unplaced_ranks=unplaced)


def test_ranks_cut_before_the_sides_part_are_placed_by_what_their_checksums_read_back():
    # Seed 31146: ranks 1 and 7 issued two collectives of step 2 the other way round; rank 7's NCCL log was cut
    # after seq 1 and rank 2's after seq 14, before the records part at 15. Per-step checksums (no expected values)
    # part ranks 1 and 7 from the rest at step 2: rank 7 departed too, anywhere after its last record; rank 2
    # sides with the reference.
    sums = [FingerprintRow(Location(f"fp{rank}", step + 1), rank, step, None,
                           sum=5.0 if step == 2 and rank in (1, 7) else 7.0 + step)
            for rank in range(8) for step in range(4)]
    found, _ = step_sums_root(sums, {})
    root = records_root([1], [0, 3, 4, 5, 6], [2, 7])
    placed, said = with_sums_placing_cut_ranks(root, found, {1: 20, 2: 14, 7: 1})
    assert (placed.outlier_ranks, placed.reference_ranks, placed.unplaced_ranks) == ([1, 7], [0, 2, 3, 4, 5, 6], [])
    assert placed.seq_range == (2, 20) and placed.majority
    assert said == [SumsPlaceCutRanks(joined=(7,), step=found.step_bound, outliers=(1, 7), seq_range=(2, 20))]
    # Checksums that part another set of ranks than the records do (rank 3, a reference there) place no one.
    other = replace(found, outlier_ranks=[1, 3, 7], reference_ranks=[0, 2, 4, 5, 6])
    assert with_sums_placing_cut_ranks(root, other, {7: 1}) == (root, [])
    # With the cut ranks on the reference's side, the range stays where the records put it.
    placed, said = with_sums_placing_cut_ranks(root, replace(found, outlier_ranks=[1],
                                                               reference_ranks=[0, 2, 3, 4, 5, 6, 7]), {7: 1})
    assert placed.outlier_ranks == [1] and placed.reference_ranks == [0, 2, 3, 4, 5, 6, 7] and not said
    assert placed.seq_range == (15, 20)


def test_ranks_the_counts_leave_together_whose_checksums_part_from_the_rest_of_them_are_named_too():
    # PyTorch's counts: rank 3 launched one fewer than ranks 0-2, which places nothing. At step 0 ranks 0 and 1 sum
    # alike and rank 2 otherwise (rank 3 otherwise again): rank 3's departure mixes what 0-2 read back alike, so
    # rank 2 ran other collectives itself. Nothing says whose departure came first: both named, no majority.
    from ncclforensics.align.sums_beside import with_parted_reference

    counted = Root(comm="1", seq=1, seq_range=(1, 12), outlier_ranks=[3], reference_ranks=[0, 1, 2], kind="missing",
                   size=1, pinned_by="PyTorch's enqueued counts", reason=RangeReason.COUNTS, majority=True)

    def summed(sums: dict[int, float]) -> list[FingerprintRow]:
        return [FingerprintRow(Location(f"fp{rank}", 1), rank, 0, sum=value) for rank, value in sums.items()]
    root, said = with_parted_reference(counted, summed({0: 2923520.0, 1: 2923520.0, 2: 3138560.0, 3: 2257920.0}),
                                       {"1": {0, 1, 2, 3}}, frozenset(range(4)))
    assert root.outlier_ranks == [2, 3] and not root.majority
    assert said == [SumsPartReference(added=(2,), largest=(0, 1), step=0, outliers=(2, 3))]
    # the rest of the reference no strict majority (0 | 1 | 2 apart): who in it departed is not said
    root, said = with_parted_reference(counted, summed({0: 1.0, 1: 2.0, 2: 3.0, 3: 4.0}), {"1": {0, 1, 2, 3}},
                                       frozenset(range(4)))
    assert root == counted and not said
    # ranks whose checksums differ by design (two TP groups) are not compared
    root, said = with_parted_reference(counted, summed({0: 1.0, 1: 1.0, 2: 3.0, 3: 4.0}),
                                       {"1": {0, 1, 2, 3}, "tp0": {0, 1}, "tp1": {2, 3}}, frozenset(range(4)))
    assert root == counted and not said
    # ... nor ranks whose comms no record gives (rank 2 of the reference may be in another TP group than rank 1)
    root, said = with_parted_reference(counted, summed({0: 2923520.0, 1: 2923520.0, 2: 3138560.0, 3: 2257920.0}),
                                       {"1": {0, 1, 2, 3}, "tp0": {0, 1}}, frozenset({0, 1}))
    assert root == counted and not said


def unchecked(rank: int, step: int, total: float) -> FingerprintRow:
    """One per-step checksum with no expected value (`step=9 rank=0 checksum=...`)."""
    return FingerprintRow(Location(f"fp{rank}", step + 1), rank, step, None, sum=total)


def test_unchecked_sums_in_two_even_sides_where_one_sides_traces_stop_sooner_name_every_rank():
    # Ranks 0 and 2 read back one sum each step, ranks 1 and 3 another (two replica classes by design, or two
    # even sides of a divergence); ranks 1 and 3's whole traces stop after step 2, the others' go on to step 3:
    # ranks 1 and 3 never completed step 3, so a collective diverged by then, and nothing says whose.
    rows = [unchecked(r, s, 10.0 * s + r % 2) for r in range(4) for s in range(4 if r % 2 == 0 else 3)]
    root, step = step_sums_root(rows, {})
    assert root.outlier_ranks == [0, 1, 2, 3] and not root.majority and root.step_bound == 3 and step is None
    # The same sums with every trace whole to step 3 say nothing (replicas' sums part by design) ...
    assert step_sums_root([unchecked(r, s, 10.0 * s + r % 2) for r in range(4) for s in range(4)], {}) is None
    # ... nor do traces that end sooner where their files were cut short.
    assert step_sums_root(rows, {}, cut=frozenset({1, 3})) is None


def test_two_ranks_whose_unchecked_sums_part_at_the_first_step_name_no_one():
    # Ranks 2 and 3 summed step 0 alone and their sums differ: two replicas of one rank each (other DP groups)
    # read back different results by design, so nothing says they diverged. Where they agreed in an earlier step,
    # parting later says one of the two departed.
    def unchecked(rank: int, step: int, got: float) -> FingerprintRow:
        return FingerprintRow(Location(f"fp{rank}", step + 1), rank, step, None, sum=got)

    assert step_sums_root([unchecked(2, 0, 932084.0), unchecked(3, 0, 932206.0)], {}) is None
    rows = [unchecked(2, 0, 5.0), unchecked(3, 0, 5.0), unchecked(2, 1, 932084.0), unchecked(3, 1, 932206.0)]
    root, _ = step_sums_root(rows, {})
    assert root.outlier_ranks == [2, 3] and not root.majority


def test_two_ranks_whose_unchecked_sums_part_at_the_first_step_and_agree_later_or_share_their_comm_name_both():
    # Seed 360493: ranks 0 and 1 part at step 0 (rank 0 issued an all-gather where rank 1 all-reduced) and sum
    # alike in steps 1 and 2: ranks of two classes (other DP groups) part in every step, so they are replicas,
    # and one of them departed by step 0.
    rows = [unchecked(r, 0, [94720.0, 101888.0][r]) for r in (0, 1)]
    rows += [unchecked(r, s, 1840640.0 * s) for r in (0, 1) for s in (1, 2)]
    root, step = step_sums_root(rows, {})
    assert (root.outlier_ranks, root.majority, root.step_bound, step) == ([0, 1], False, 0, 0)
    # Seed 380238: step 0 alone, but NCCL logs put both ranks in one comm and no other: replicas too.
    alone = [unchecked(r, 0, [1590784.0, 321024.0][r]) for r in (0, 1)]
    root, _ = step_sums_root(alone, {"0x9ebf": {0, 1}}, frozenset({0, 1}))
    assert (root.outlier_ranks, root.majority, root.step_bound, root.comm) == ([0, 1], False, 0, "0x9ebf")
    # Known in one comm that holds a third rank apart from one of them: not known to be replicas.
    assert step_sums_root(alone, {"0x9ebf": {0, 1, 2}, "0x1": {0, 2}}, frozenset({0, 1, 2})) is None


def test_a_lone_rank_right_in_the_step_is_no_outlier_where_the_others_are_off_by_more_amounts_than_it_mixes():
    # TP pairs (0,1) (2,3), DP pairs (0,2) (1,3). Rank 3 read back step 2 right and step 3 wrong; ranks 0, 1 and 2
    # read back step 2 off by three amounts. Rank 3 leaving out its step's last collective mixes one comm, whose
    # ranks read back wrong alike: three amounts take two departures (rank 2's in one DP pair, rank 1's in the
    # other), and every rank is named, no majority (seed 934231).
    rows = per_step(0, [(10.0, 10.0), (20.0, 20.0), (1089.0, 310.0)])
    rows += per_step(1, [(10.0, 10.0), (20.0, 20.0), (790.0, 310.0)])
    rows += per_step(2, [(30.0, 30.0), (40.0, 40.0), (302.0, 310.0), (4.0, 111.0)])
    rows += per_step(3, [(30.0, 30.0), (40.0, 40.0), (310.0, 310.0), (14.0, 110.0)])
    root, step = step_sums_root(rows, {})
    assert (root.outlier_ranks, root.majority, step) == ([0, 1, 2, 3], False, 2)
    # The three off alike (one comm of ranks 0-2 that rank 3 mixed): rank 3 alone left out its step's last one.
    rows = [r for r in rows if r.step != 2] + [r for rank in (0, 1, 2) for r in per_step(rank, [(0.0, 0.0)] * 2 + [(
        318.0, 310.0)])[2:]] + per_step(3, [(0.0, 0.0)] * 2 + [(310.0, 310.0)])[2:]
    root, step = step_sums_root(rows, {})
    assert (root.outlier_ranks, root.majority, step) == ([3], True, 2)
    # A step earlier: ranks 0, 1 and 2 read step 1 back right and step 2 wrong, rank 3's whole trace ends at step 0.
    # Rank 3 ran one more at step 1's end, mixing one comm, or the three left out its last collective: off alike,
    # rank 3 is the fewest departing; off by two amounts, one departure of its own cannot have mixed them.
    rows = [r for rank in (0, 1) for r in per_step(rank, [(1.0, 1.0), (1.0, 1.0), (3.0, 1.0)])]
    rows += per_step(3, [(1.0, 1.0)])
    root, step = step_sums_root(rows + per_step(2, [(1.0, 1.0), (1.0, 1.0), (3.0, 1.0)]), {})
    assert (root.outlier_ranks, root.majority, step) == ([3], True, 1)
    root, _ = step_sums_root(rows + per_step(2, [(1.0, 1.0), (1.0, 1.0), (5.0, 1.0)]), {})
    assert not root.majority and 3 in root.outlier_ranks


def test_ranks_wrong_alike_beside_ranks_right_in_the_step_and_wrong_all_through_the_next_name_both_sides():
    # TP pairs (0,1) (2,3), DP pairs (0,2) (1,3): ranks 0 and 1 each left out their DP pair's last collective of
    # step 0, so ranks 2 and 3 read it back wrong, off alike, and ranks 0 and 1 read it back right and step 1
    # wrong. Two even sides, either of which departed: not the two wrong ones alone.
    rows = [r for rank in (0, 1) for r in per_step(rank, [(10.0, 10.0), (9.0, 10.0), (9.0, 10.0)])]
    rows += [r for rank in (2, 3) for r in per_step(rank, [(11.0, 10.0), (11.0, 10.0)])]
    root, step = step_sums_root(rows, {})
    assert (root.outlier_ranks, root.majority, step) == ([0, 1, 2, 3], False, 0)


def test_unchecked_sums_equal_in_an_earlier_step_that_part_into_two_even_sides_name_every_rank():
    # Ranks 0-3 read back equal sums in steps 0, 1 and 3 (one class: a correct run makes them equal) and two even
    # sides in step 2 (ranks 0 and 2 swapped two collectives of another size there): one side departed, nothing says
    # which. Two replicas' sums that part from the first step on say nothing (the test above).
    def unchecked(rank: int, step: int, got: float) -> FingerprintRow:
        return FingerprintRow(Location(f"fp{rank}", step + 1), rank, step, None, sum=got)

    rows = [unchecked(r, s, 100.0 * s) for r in range(4) for s in (0, 1, 3)]
    rows += [unchecked(r, 2, 3875328.0 if r in (0, 2) else 3820032.0) for r in range(4)]
    root, _ = step_sums_root(rows, {})
    assert root.outlier_ranks == [0, 1, 2, 3] and not root.majority and root.step_bound == 2


def test_sums_checked_wrong_that_part_into_several_sides_still_say_the_step_names_every_rank():
    # Steps 0-2 read back right on ranks 0-3; at step 3 every rank reads back wrong, each by its own amount (ranks 0
    # and 1 share one comm, 2 and 3 another, and one rank of each reordered): no side is a majority, yet a
    # collective was misaligned in step 3: every rank may have departed, and no majority says which.
    rows = [r for rank in range(4) for r in per_step(rank, [(10.0, 10.0)] * 3 + [(9.0 - rank, 10.0)])]
    root, step = step_sums_root(rows, {})
    assert root.outlier_ranks == [0, 1, 2, 3] and not root.majority and step == 3
    assert root.pinned_by == "per-step checksums" and root.comm == "[ranks=0,1,2,3]"


def test_a_trace_cut_short_before_the_step_is_no_rank_that_hung_and_the_sums_still_name_a_minority():
    # Ranks 3 and 5 ran two extra collectives in step 2: every rank reads step 2 back wrong, ranks 3 and 5 off by one
    # amount and the other five by another. Rank 2's trace was cut short after step 1: it did not hang before step 2
    # (where it would leave every rank that may have departed named), its file merely ends.
    rows = [r for rank in (0, 1, 4, 6, 7) for r in per_step(rank, [(1.0, 1.0), (2.0, 2.0), (7958528.0, 6995968.0)])]
    rows += [r for rank in (3, 5) for r in per_step(rank, [(1.0, 1.0), (2.0, 2.0), (12636160.0, 14069760.0)])]
    rows += per_step(2, [(1.0, 1.0), (2.0, 2.0)])
    assert step_sums_root(rows, {})[0].outlier_ranks != [3, 5]  # (read as hung before the step)
    root, step = step_sums_root(rows, {}, cut=frozenset({2}))
    assert (root.outlier_ranks, root.majority, step) == ([3, 5], True, 2)
    # The records name rank 3 and leave rank 5, cut before the sides part, unplaced; rank 2, of the records'
    # reference, has no sum of the step: the sums still place rank 5 beside rank 3.
    records = records_root([3], [0, 1, 2, 4, 6, 7], [5])
    placed, said = with_sums_placing_cut_ranks(records, root, {5: 18})
    assert placed.outlier_ranks == [3, 5] and placed.reference_ranks == [0, 1, 2, 4, 6, 7] and said


def test_a_rank_cut_before_the_sides_part_is_placed_where_the_sums_alone_name_no_majority():
    # Seed 1095431: ranks 1, 5 and 6 each skipped a collective at step 1. The records name ranks 5 and 6 (they
    # launched fewer) against ranks 0, 2, 3, 4 and 7, and leave rank 1, cut before they part, unplaced. At step 1
    # ranks 1, 5 and 6 sum alike and ranks 0, 2, 4 and 7 otherwise; rank 3's trace was cut before the step, so its
    # sum could tip either side and the sums alone name no majority. The records say which side departed, and
    # rank 1 read back what the outliers did: it is an outlier too.
    def summed(sums: dict[int, list[float]]) -> list[FingerprintRow]:
        return [FingerprintRow(Location(f"fp{rank}", step + 1), rank, step, None, sum=value)
                for rank, values in sums.items() for step, value in enumerate(values)]
    rows = summed({rank: [497664.0, 2421248.0 if rank in (1, 5, 6) else 3078144.0] for rank in range(8) if rank != 3})
    rows += summed({3: [497664.0]})
    found, _ = step_sums_root(rows, {}, cut=frozenset({3}))
    assert not found.majority and found.step_bound == 1
    records = records_root([5, 6], [0, 2, 3, 4, 7], [1])
    placed, said = with_sums_placing_cut_ranks(records, found, {1: 8, 5: 17, 6: 17}, rows)
    assert (placed.outlier_ranks, placed.reference_ranks, placed.unplaced_ranks) == ([1, 5, 6], [0, 2, 3, 4, 7], [])
    assert placed.seq_range == (9, 20) and placed.majority
    assert said == [SumsPlaceCutRanks(joined=(1,), step=1, outliers=(1, 5, 6), seq_range=(9, 20))]
    # Without the rows, sums that name no majority place no one.
    assert with_sums_placing_cut_ranks(records, found, {1: 8}) == (records, [])
    # A reference rank on record that sums with the outliers: the sums part other ranks than the records do.
    crossed = [replace(r, sum=2421248.0) if (r.rank, r.step) == (4, 1) else r for r in rows]
    assert with_sums_placing_cut_ranks(records, found, {1: 8}, crossed) == (records, [])
    # Unchecked sums never equal in any step are of ranks apart by design: they say nothing of who ran what.
    apart = [replace(r, sum=r.sum + r.rank) if r.step == 0 else r for r in rows]
    assert with_sums_placing_cut_ranks(records, found, {1: 8}, apart) == (records, [])


def test_a_rank_cut_before_the_sides_part_that_read_the_step_back_wrong_as_the_outliers_did_is_placed_with_them():
    # Seed 1238118: ranks 0 and 7 each skipped a collective at step 2. The records name rank 7 (it launched fewer)
    # against ranks 2-6, which hang in step 2 (no sum of it), and leave ranks 0 and 1, cut before they part,
    # unplaced. Ranks 0 and 7 read step 2 back off their expected sums alike; rank 1's trace ends at step 1, rank 3's
    # was cut at step 0, so the sums alone name no majority. Rank 0 ran what rank 7 ran: an outlier too; rank 1
    # stays unplaced.
    rows = [r for rank in (0, 7) for r in per_step(rank, [(30.0, 30.0), (70.0, 70.0), (98.0, 99.0)])]
    rows += [r for rank in (1, 2, 4, 5, 6) for r in per_step(rank, [(30.0, 30.0), (70.0, 70.0)])]
    rows += per_step(3, [(30.0, 30.0)])
    found, _ = step_sums_root(rows, {}, cut=frozenset({3}))
    assert not found.majority and found.step_bound == 2
    records = records_root([7], [2, 3, 4, 5, 6], [0, 1])
    placed, said = with_sums_placing_cut_ranks(records, found, {0: 12, 1: 9, 7: 17}, rows)
    assert (placed.outlier_ranks, placed.reference_ranks, placed.unplaced_ranks) == ([0, 7], [2, 3, 4, 5, 6], [1])
    assert placed.seq_range == (13, 20) and placed.majority
    assert said == [SumsPlaceCutRanks(joined=(0,), step=2, outliers=(0, 7), seq_range=(13, 20))]
    # Rank 0 off by another amount than rank 7: nothing says it ran what rank 7 ran.
    apart = [replace(r, sum=97.0) if (r.rank, r.step) == (0, 2) else r for r in rows]
    assert with_sums_placing_cut_ranks(records, found, {7: 17}, apart) == (records, [])
    # A reference rank with a sum of the step: the sums themselves must side it, and here they do not.
    beside = rows + per_step(2, [(30.0, 30.0), (70.0, 70.0), (98.0, 99.0)])[2:]
    assert with_sums_placing_cut_ranks(records, found, {7: 17}, beside) == (records, [])


def test_counted_outliers_beside_records_that_tie_name_the_ranks_no_record_compares_too():
    # Watchdog logs of ranks 2 and 3 only, whose last collectives (seq 7, where their records begin) differ: a tie.
    # PyTorch's counts: rank 0 launched one fewer than ranks 1..3. Rank 0 departed before the records begin; rank 1,
    # known by its count alone, may be on either side of the tie: every rank is named, no majority.
    from ncclforensics.align.counts_beside_records import with_counted_outliers

    records = Root(comm="0", seq=1, seq_range=(1, 7), outlier_ranks=[2, 3], reference_ranks=[2, 3],
                   kind=DIFFERENT_OPS, size=1, pinned_by="signatures", reason=RangeReason.BEFORE_RECORDS,
                   majority=False, ops={}, kinds=(DIFFERENT_OPS,), shown=True)
    counted = Root(comm="0", seq=1, seq_range=(1, 8), outlier_ranks=[0], reference_ranks=[1, 2, 3], kind="missing",
                   size=1, pinned_by="PyTorch's enqueued counts", reason=RangeReason.COUNTS, majority=True)
    root, said = with_counted_outliers(records, counted)
    assert root.outlier_ranks == [0, 1, 2, 3] and not root.majority and said[0].either == (1,)
    # Where the records name a majority, the ranks they do not compare stay where the counts put them.
    root, _ = with_counted_outliers(replace(records, outlier_ranks=[3], reference_ranks=[2], majority=True), counted)
    assert root.outlier_ranks == [0, 3]


def test_counts_that_tie_too_name_the_ranks_no_record_compares_beside_the_records_tie():
    # Seed 932125, watchdog logs of ranks 1 and 3 only: at seq 2, where their records begin, rank 1 waits in an
    # all-gather and rank 3 in an all-reduce (a tie). Their desync reports say ranks 0 and 1 enqueued 2, ranks 2 and
    # 3 enqueued 3: two against two. Ranks 0 and 2 each side with one side of the tie: every rank is named, no
    # majority (naming ranks 1 and 3 alone would say ranks 0 and 2 ran the program, and rank 2 did not).
    from ncclforensics.align.counts_beside_records import with_counted_outliers
    from ncclforensics.align.notes import CountsTieBeforeRecords
    from ncclforensics.align.ras_only import root_from_counts

    records = Root(comm="0", seq=1, seq_range=(1, 2), outlier_ranks=[1, 3], reference_ranks=[1, 3],
                   kind=DIFFERENT_OPS, size=1, pinned_by="signatures", reason=RangeReason.BEFORE_RECORDS,
                   majority=False, ops={}, kinds=(DIFFERENT_OPS,), shown=True, records_start=2)
    launched = {0: 2, 1: 2, 2: 3, 3: 3}
    counted = root_from_counts("0", launched, "PyTorch's enqueued counts")
    assert not counted.majority
    root, said = with_counted_outliers(records, counted, launched=launched)
    assert (root.outlier_ranks, root.reference_ranks, root.majority) == ([0, 1, 2, 3], [0, 1, 2, 3], False)
    assert said == [CountsTieBeforeRecords((0, 2), "PyTorch's enqueued counts", (0, 1, 2, 3))]
    # A rank held back elsewhere stays out; records that name a majority are not a tie to add to.
    assert with_counted_outliers(records, counted, held={0, 2}, launched=launched) == (records, [])
    named = replace(records, outlier_ranks=[3], reference_ranks=[1], majority=True)
    assert with_counted_outliers(named, counted, launched=launched) == (named, [])
    # Seed 37210: counts of three levels (6, 6, 5, 4) order departures, and the records compare ranks 1 and 3 at
    # levels 6 and 4: the ranks between are no side of a tie. Nor are ranks where both compared ranks count alike.
    for other in ({0: 6, 1: 6, 2: 5, 3: 4}, {0: 2, 1: 3, 2: 2, 3: 3}):
        assert with_counted_outliers(records, root_from_counts("0", other, "c"), launched=other)[0] == records


def test_a_rank_counted_below_every_side_of_a_tie_in_three_levels_is_a_side_of_its_own():
    # Seed 1224518, watchdog logs of ranks 0, 2 and 3: at seq 8, where the records begin, ranks 2 and 3 wait in
    # all-reduces of 8 and 1 (a tie). PyTorch's counts: rank 0 launched 7, rank 2 8, rank 3 9. Rank 0 left out what
    # both sides launched, or both ran more: a side of its own, and no level is a majority's. Every rank is named
    # (naming ranks 2 and 3 alone would say rank 0 ran the program, and it left one out).
    from ncclforensics.align.counts_beside_records import with_counted_outliers
    from ncclforensics.align.notes import CountsTieBeforeRecords
    from ncclforensics.align.ras_only import root_from_counts

    records = Root(comm="0", seq=1, seq_range=(1, 8), outlier_ranks=[2, 3], reference_ranks=[2, 3],
                   kind=DIFFERENT_OPS, size=1, pinned_by="signatures", reason=RangeReason.BEFORE_RECORDS,
                   majority=False, ops={}, kinds=(DIFFERENT_OPS,), shown=True, records_start=8)
    launched = {0: 7, 2: 8, 3: 9}
    counted = root_from_counts("0", launched, "PyTorch's enqueued counts")
    assert not counted.majority
    root, said = with_counted_outliers(records, counted, launched=launched)
    assert (root.outlier_ranks, root.reference_ranks, root.majority) == ([0, 2, 3], [0, 2, 3], False)
    assert said == [CountsTieBeforeRecords((0,), "PyTorch's enqueued counts", (0, 2, 3))]
    # Held back elsewhere, it stays out; so does a rank counted between the sides (a step of a chain of holds).
    assert with_counted_outliers(records, counted, held={0}, launched=launched) == (records, [])
    between = {0: 8, 2: 7, 3: 9}
    assert with_counted_outliers(records, root_from_counts("0", between, "c"), launched=between) == (records, [])


def test_a_rank_counted_short_of_where_the_records_begin_is_on_neither_side():
    # Seed 929113, watchdog logs of ranks 0, 1 and 3: they time out in the world's seq 2, where their records
    # begin, rank 3's call stack parting from the others'. A desync report says rank 2 (no file) finished seq 1 and
    # joined no seq 2. Rank 2 never reached where the ranks part: held back by rank 3's extra collective in their TP
    # pair, or stopped; it departed before the records no more than it sided with either.
    from ncclforensics.align.counts_beside_records import short_of_records, with_counted_outliers
    from ncclforensics.align.ras_only import root_from_counts

    records = Root(comm="0", seq=1, seq_range=(1, 2), outlier_ranks=[3], reference_ranks=[0, 1], kind=DIFFERENT_OPS,
                   size=1, pinned_by="call sites", reason=RangeReason.BEFORE_RECORDS, majority=True, ops={},
                   kinds=(DIFFERENT_OPS,), shown=True, records_start=2)
    launched = {0: 2, 1: 2, 2: 1, 3: 2}
    counted = root_from_counts("0", launched, "PyTorch's enqueued counts")
    # (ranks 0 and 1 name their TP pair in their lines; rank 2 left none, so its other communicators are unknown)
    groups = {"0": ({0, 1, 2, 3}, 4), "1": ({0, 1}, 2)}
    short = short_of_records(records, launched, {0, 1, 3}, groups)
    assert short == {2}
    root, _ = with_counted_outliers(records, counted, short=short)
    assert (root.outlier_ranks, root.reference_ranks, root.unplaced_ranks, root.majority) == ([3], [0, 1], [2], True)
    # A rank counted one short that reached where the records begin (it waits there too) departed before them.
    assert short_of_records(records, {**launched, 2: 2, 0: 3, 1: 3, 3: 3}, {0, 1, 3}, groups) == set()
    # Seed 97825's twin: rank 2's lines put it in a TP pair with rank 1, which rank 3 is not in: only a departure of
    # rank 1 could hold it back, and rank 2 left one out of its own. In a job of one communicator, nothing holds it.
    assert short_of_records(records, launched, {0, 1, 3}, {"0": ({0, 1, 2, 3}, 4), "1": ({1, 2}, 2)}) == set()
    assert short_of_records(records, launched, {0, 1, 3}, {"0": ({0, 1, 2, 3}, 4)}) == set()


def test_counts_that_name_one_rank_of_a_side_the_records_tie_name_its_whole_side():
    # Watchdog logs: at seq 15, where the records begin, ranks 1 and 3 wait in an all-gather and ranks 0 and 2 in an
    # all-reduce (no majority). PyTorch's counts: rank 1 enqueued 15, the others 16. Rank 1's side departed: rank 3,
    # whose record pairs with rank 1's, is named with it (naming rank 1 alone would say rank 3 ran the program).
    from ncclforensics.align.answers import OpAt
    from ncclforensics.align.notes import CountsNameSide
    from ncclforensics.align.counts_beside_records import with_counted_outliers

    def op(rank, kind, count):
        return OpAt(rank=rank, seq=15, op=kind, count=count, dtype="bfloat16", redop=None, root=None, state="started",
                    callsite=None, step=None, loc=Location(f"torch_rank{rank}.log", 2))

    ops = {0: op(0, "AllReduce", 4096), 1: op(1, "AllGather", 512), 2: op(2, "AllReduce", 4096),
           3: op(3, "AllGather", 512)}
    records = Root(comm="1", seq=1, seq_range=(1, 15), outlier_ranks=[0, 1, 2, 3], reference_ranks=[0, 1, 2, 3],
                   kind=DIFFERENT_OPS, size=1, pinned_by="signatures", reason=RangeReason.BEFORE_RECORDS,
                   majority=False, ops=ops, kinds=(DIFFERENT_OPS,), shown=True)
    counted = Root(comm="1", seq=1, seq_range=(1, 16), outlier_ranks=[1], reference_ranks=[0, 2, 3], kind="missing",
                   size=1, pinned_by="PyTorch's enqueued counts", reason=RangeReason.COUNTS, majority=True)
    root, said = with_counted_outliers(records, counted)
    assert (root.outlier_ranks, root.reference_ranks, root.majority) == ([1, 3], [0, 2], False)
    assert said == [CountsNameSide((1,), "fewer", "PyTorch's enqueued counts", (1, 3))]
    # A record that pairs with both sides (a field unrecorded) leaves the sides unparted: the counts pick none.
    ops[2] = replace(ops[2], op=None, count=None)
    assert with_counted_outliers(replace(records, ops=ops), counted) == (records, [])


def test_counts_that_name_one_of_three_sides_the_records_part_leave_the_records_tie():
    # Seed 1117934: at seq 6, where the watchdog records begin, rank 0 waits in an all-reduce of 1000, rank 1 in one
    # of 4096 and ranks 2 and 3 in an all-gather of 1000; rank 1 enqueued 11, the others 6. Rank 1 departed, yet
    # rank 0 and ranks 2 and 3 still part: one of them departed too, and naming rank 1 alone would say both ran the
    # program. The records' tie stands.
    from ncclforensics.align.answers import OpAt
    from ncclforensics.align.counts_beside_records import with_counted_outliers

    def op(rank, kind, count):
        return OpAt(rank=rank, seq=6, op=kind, count=count, dtype="bfloat16", redop=None, root=None, state="started",
                    callsite=None, step=None, loc=Location(f"torch_rank{rank}.log", 2))

    ops = {0: op(0, "AllReduce", 1000), 1: op(1, "AllReduce", 4096), 2: op(2, "AllGather", 1000),
           3: op(3, "AllGather", 1000)}
    records = Root(comm="1", seq=1, seq_range=(1, 6), outlier_ranks=[0, 1, 2, 3], reference_ranks=[0, 1, 2, 3],
                   kind=DIFFERENT_OPS, size=1, pinned_by="signatures", reason=RangeReason.BEFORE_RECORDS,
                   majority=False, ops=ops, kinds=(DIFFERENT_OPS,), shown=True)
    counted = Root(comm="1", seq=1, seq_range=(1, 11), outlier_ranks=[1], reference_ranks=[0, 2, 3], kind="extra",
                   size=5, pinned_by="PyTorch's enqueued counts", reason=RangeReason.COUNTS, majority=True)
    assert with_counted_outliers(records, counted) == (records, [])


def test_counted_outliers_past_the_records_are_added_only_where_the_records_end_alike():
    # Tags part rank 6 from the others in seq 2..15; every rank's records end at seq 15, and PyTorch's counts give
    # rank 4 15 against the others' 16 (theirs go on past their records). Rank 4 departed too.
    from ncclforensics.align.notes import CountedPastRecords
    from ncclforensics.align.counts_beside_records import with_counted_past_records

    records = Root(comm="1", seq=2, seq_range=(2, 15), outlier_ranks=[6], reference_ranks=[0, 1, 2, 3, 4, 5, 7],
                   kind=DIFFERENT_OPS, size=1, pinned_by="tags", reason=RangeReason.LOOKALIKE, majority=True,
                   ops={}, kinds=(DIFFERENT_OPS,), shown=True)
    counted = Root(comm="1", seq=1, seq_range=(1, 16), outlier_ranks=[4], reference_ranks=[0, 1, 2, 3, 5, 6, 7],
                   kind="missing", size=1, pinned_by="PyTorch's enqueued counts", reason=RangeReason.COUNTS,
                   majority=True)
    ends = {r: 15 for r in range(8)}
    root, said = with_counted_past_records(records, counted, ends)
    assert root.outlier_ranks == [4, 6] and root.majority and root.seq_range == (2, 15)
    assert said == [CountedPastRecords((4,), "fewer", "PyTorch's enqueued counts", (4, 6))]
    # Records that already end sooner for rank 4 had their say (it is behind by them: analysed there, not here);
    # so do counts of a rank stuck elsewhere, and counts of dumps of a job that may only lag.
    assert with_counted_past_records(records, counted, {**ends, 4: 14})[0] is records
    # Not so records cut short, where rank 4's count carried its stream on past the cut to seq 15 (blank there): it
    # was compared that far, and ends alike with the others all the same (1158222).
    assert with_counted_past_records(records, counted, {**ends, 4: 1}, carried={4: 15})[0].outlier_ranks == [4, 6]
    assert with_counted_past_records(records, counted, ends, held={4})[0] is records
    assert with_counted_past_records(records, replace(counted, unstopped=True), ends)[0] is records


def test_counted_outliers_past_the_records_are_not_added_where_their_records_put_the_departure_past_the_root():
    # Steps part rank 2 at seq 2 alone; rank 7, one short by PyTorch's counts, holds tags alike with the others'
    # through seq 12 (they change at every seq): it left out its collective in seq 12 or later, after the root.
    from ncclforensics.align.notes import DepartedLater
    from ncclforensics.align.counts_beside_records import with_counted_past_records

    records = Root(comm="1", seq=2, seq_range=(2, 2), outlier_ranks=[2], reference_ranks=[0, 1, 3, 4, 5, 6, 7],
                   kind=DIFFERENT_OPS, size=2, pinned_by="steps", reason=None, majority=True, ops={},
                   kinds=(DIFFERENT_OPS,), shown=True)
    counted = Root(comm="1", seq=1, seq_range=(1, 16), outlier_ranks=[7], reference_ranks=[0, 1, 2, 3, 4, 5, 6],
                   kind="missing", size=1, pinned_by="PyTorch's enqueued counts", reason=RangeReason.COUNTS,
                   majority=True)
    ends = {r: 15 for r in range(8)}
    root, said = with_counted_past_records(records, counted, ends, departs_from={7: 12})
    assert root is records
    # (it departed still, later: a note says so, lest it be read as running the program)
    assert said == [DepartedLater((7,), (12, None), "1", "PyTorch's enqueued counts")]
    # A bound inside the root's range (or records that bound nothing) leave it beside the root.
    assert with_counted_past_records(records, counted, ends, departs_from={7: 2})[0].outlier_ranks == [2, 7]
    assert with_counted_past_records(records, counted, ends)[0].outlier_ranks == [2, 7]


def test_a_desync_snapshot_names_no_rank_past_the_root_whose_records_hold_the_collective_it_shows():
    # Seed 972212: tags pin rank 1's swap of two lookalikes at seq 1; every rank's records hold seq 1..6, and rank 0's
    # part from the others' at seq 5 (a later reorder of its own). The counts agree (6 each), but the desync report's
    # snapshot shows rank 0 in an AllReduce at #6 where the others run an AllGather: the very collective rank 0's
    # records hold at seq 6, which the root compared there. Rank 0 is not named beside rank 1.
    from ncclforensics.align.counts_beside_records import with_counted_past_records

    records = Root(comm="0", seq=1, seq_range=(1, 1), outlier_ranks=[1], reference_ranks=[2, 3, 5, 6, 7],
                   kind=DIFFERENT_OPS, size=2, pinned_by="tags", reason=None, majority=True, ops={},
                   kinds=(DIFFERENT_OPS,), shown=True)
    snapshot = Root(comm="0", seq=1, seq_range=(1, 6), outlier_ranks=[0], reference_ranks=[1, 2, 3, 4, 5, 6, 7],
                    kind=DIFFERENT_OPS, size=1, pinned_by="PyTorch's desync report", reason=RangeReason.LAST_OPS,
                    majority=True, shown=True)
    ends = {r: 6 for r in (0, 1, 2, 4, 5, 7)}
    assert with_counted_past_records(records, snapshot, ends) == (records, [])
    # Records of rank 0 that end before #6 say nothing of what the snapshot shows there: it departed too.
    assert with_counted_past_records(records, snapshot, {**ends, 0: 5})[0].outlier_ranks == [0, 1]


def test_a_rank_alone_in_its_unchecked_sum_beside_several_groups_of_replicas_is_the_outlier():
    # Seed 261208: TP groups 0-3 and 4-7 of a world comm; rank 5 issued an all-gather where its group all-reduced.
    # At step 0 ranks 0-3 sum alike, ranks 4, 6 and 7 alike, rank 5 alone: the replica groups of one job are alike
    # in size, so rank 5 is no group of its own but group 4-7's rank that ran other collectives.
    rows = [unchecked(r, 0, 125076.0) for r in range(4)] + [unchecked(r, 0, 322196.0) for r in (4, 6, 7)]
    rows += [unchecked(5, 0, 301844.0)] + [unchecked(r, 1, 1764276.0 if r < 4 else 1960884.0) for r in range(8)]
    root, step = step_sums_root(rows, {})
    assert (root.outlier_ranks, root.majority, step) == ([5], True, 0)
    # Groups of replicas alone, each of several ranks, name no one; nor two lone ranks beside one group.
    alike = [row for row in rows if (row.rank, row.step) != (5, 0)] + [unchecked(5, 0, 322196.0)]
    assert step_sums_root(alike, {}) is None
    assert step_sums_root([unchecked(r, 0, [1.0, 2.0, 3.0, 3.0][r]) for r in range(4)], {}) is None


def test_expected_sums_that_part_ranks_known_to_be_replicas_name_the_fewer_even_where_they_read_back_right():
    # One comm of ranks 0-7, all alike at step 0; rank 7 left out the last collective of step 1. Ranks 0-6 read step
    # 1 back wrong, rank 7 right (its next one paired with their last, and its trace is cut before step 2). Rank 7's
    # expected sum lacks the collective it left out: what the replicas launched (alike at step 0) parts it.
    def row(r: int, step: int, got: float, want: float) -> FingerprintRow:
        return FingerprintRow(Location(f"fp{r}", step + 1), r, step, None, sum=got, expected_sum=want)

    first = [row(r, 0, 110592.0, 110592.0) for r in range(8)]
    parted = [row(r, 1, 256000.0, 221184.0) for r in range(7)] + [row(7, 1, 129024.0, 129024.0)]
    every = frozenset(range(8))
    root, step = step_sums_root(first + parted, {"0xabc": set(every)}, every, cut=frozenset({7}))
    assert (root.outlier_ranks, root.reference_ranks, root.majority, step) == ([7], list(range(7)), True, 1)
    # Ranks not known to be replicas (another TP group expects other sums by design) are not compared so.
    found = step_sums_root(first + parted, {"0xabc": set(range(7)), "0xdef": {7}}, every, cut=frozenset({7}))
    assert found is None or found[0].outlier_ranks != [7]
    # Seed 260338: the parting step is the only one, so nothing shows the eight expecting alike (replicas may
    # expect apart by design: an uneven last shard). Rank 7, right in it and cut before the next, may have left out
    # its last collective, which the step it was cut before would show: every rank is named, and no majority.
    parted = [row(r, 0, got.sum, got.expected_sum) for r, got in enumerate(parted)]
    root, step = step_sums_root(parted, {"0xabc": set(every)}, every, cut=frozenset({7}))
    assert (root.outlier_ranks, root.majority, step) == (list(range(8)), False, 0)


def test_of_ranks_wrong_in_a_step_the_one_whose_own_records_invert_the_program_order_is_the_outlier():
    # Seed 344508: ranks 1 and 2 (TP pairs {0, 1} and {2, 3}; ranks 0 and 3 left no trace) read back step 1 wrong.
    # Rank 1 issued `mlp` before `attn` there, against its own steps 0 and 2 and rank 2's steps 0-2: it departed.
    # Rank 2's records are the program's: what it read back wrong a peer on no record mixed.
    def records(rank: int, step: int, tags: list[str], wrong: bool) -> list[FingerprintRow]:
        return [FingerprintRow(Location(f"fp{rank}", step * 3 + op), rank, step, op, tag=tag, kind="AllReduce",
                               numel=8, sum=2.0 if wrong and op else 1.0, expected_sum=1.0)
                for op, tag in enumerate(tags)]

    program, swapped = ["dp", "attn", "mlp"], ["dp", "mlp", "attn"]
    rows = [row for rank in (1, 2) for step in (0, 2) for row in records(rank, step, program, False)]
    rows += records(1, 1, swapped, True) + records(2, 1, program, True)
    root, step = step_sums_root(rows, {"0xw": {1, 2}, "0xa": {1}, "0xb": {2}})
    assert (root.outlier_ranks, root.reference_ranks, root.majority, step) == ([1], [2], True, 1)
    # Rank 1 issuing them in the program's order too, nothing on record says who departed: both are named.
    rows = [row for row in rows if (row.rank, row.step) != (1, 1)] + records(1, 1, program, True)
    assert step_sums_root(rows, {"0xw": {1, 2}, "0xa": {1}, "0xb": {2}})[0].outlier_ranks == [1, 2]


def test_a_tag_issued_with_a_size_no_other_record_of_it_has_departs_from_the_program():
    def record(rank: int, step: int, numel: int) -> FingerprintRow:
        return FingerprintRow(Location(f"fp{rank}", step), rank, step, 0, tag="mlp", kind="AllReduce", numel=numel)

    rows = [record(r, s, 8) for r in (0, 1) for s in (0, 1)] + [record(2, 0, 8), record(2, 1, 2)]
    assert departed_by_own_records(rows, 1, [0, 1, 2]) == {2}
    assert departed_by_own_records(rows[:1] + rows[-1:], 1, [0, 2]) == set()  # (one record against it: no program)


def test_two_even_sides_of_replicas_are_told_apart_by_the_offset_each_keeps_to_another_class():
    # Seed 400271: TP pairs 0-1 and 2-3 under a world comm; rank 0 swapped two world collectives at step 1. Ranks
    # 2 and 3 sum alike, 116736 above ranks 0 and 1 at step 0; at step 1 rank 1 is 116736 below them again, rank 0
    # not: ranks 1, 2 and 3 read back alike what they share, rank 0 alone otherwise.
    sums = {0: [93122.0, 506259.0], 1: [93122.0, 506315.0], 2: [209858.0, 623051.0], 3: [209858.0, 623051.0]}
    rows = [unchecked(r, s, total) for r, totals in sums.items() for s, total in enumerate(totals)]
    root, _ = step_sums_root(rows, {})
    assert (root.outlier_ranks, root.reference_ranks, root.majority, root.step_bound) == ([0], [1, 2, 3], True, 1)
    assert root.comm == "[ranks=0,1,2,3]"
    # Where neither keeps the offset (the other class's part of the sums changed too), nothing tells them apart.
    sums[2][1] = sums[3][1] = 623000.0
    rows = [unchecked(r, s, total) for r, totals in sums.items() for s, total in enumerate(totals)]
    root, _ = step_sums_root(rows, {})
    assert (root.outlier_ranks, root.majority) == ([0, 1], False)


def test_replica_classes_of_a_later_step_serve_where_the_first_steps_part_into_lone_ranks():
    # Seed 480271: TP pairs of 8 ranks; at step 0 ranks 0, 1, 6 and 7 each sum alone (ranks 1 and 7 swapped two
    # collectives of their pairs), at step 1 every pair sums alike: the pairs are the classes, and pair 0-1 parted.
    first = [436308.0, 490068.0, 1242196.0, 1242196.0, 1940564.0, 1940564.0, 2208852.0, 2262612.0]
    rows = [unchecked(r, 0, total) for r, total in enumerate(first)]
    rows += [unchecked(r, 1, 1882228.0 + 698368.0 * (r // 2)) for r in range(8)]
    root, _ = step_sums_root(rows, {})
    assert (root.outlier_ranks, root.majority, root.step_bound, root.comm) == ([0, 1], False, 0, "[ranks=0,1]")
    # Pairs at step 1 that split ranks 2 and 3, alike at step 0, are no classes of replicas.
    pair_of = {0: 0, 7: 0, 1: 1, 2: 1, 3: 2, 4: 2, 5: 3, 6: 3}
    crossed = [row for row in rows if row.step < 1] + [unchecked(r, 1, 100.0 * pair_of[r]) for r in range(8)]
    assert step_sums_root(crossed, {}) is None


def test_replica_classes_of_a_later_step_serve_where_a_trace_cut_short_has_no_sum_of_it():
    # Seed 1031866: TP pairs of 8 ranks; at step 0 ranks 4 and 5 sum apart (rank 5 issued an all-gather where its
    # pair all-reduced), every other pair alike; at step 1 every pair sums alike, but rank 3's trace was cut inside
    # that line. Rank 3 summed alike with rank 2 at step 0: the pairs are still the classes, and pair 4-5 parted.
    first = [1022868.0, 1022868.0, 2383764.0, 2383764.0, 3745684.0, 3733908.0, 5105556.0, 5105556.0]
    rows = [unchecked(r, 0, total) for r, total in enumerate(first)]
    rows += [unchecked(r, 1, 3122868.0 + 1360896.0 * (r // 2)) for r in range(8) if r != 3]
    root, _ = step_sums_root(rows, {}, cut=frozenset({3}))
    assert (root.outlier_ranks, root.majority, root.step_bound, root.comm) == ([4, 5], False, 0, "[ranks=4,5]")
    # A rank whose whole trace has no sum of step 1 stopped before it, hung: no class of that step holds it, and
    # every rank is named.
    root, _ = step_sums_root(rows, {})
    assert (root.outlier_ranks, root.majority) == (list(range(8)), False)


def test_a_minority_apart_in_each_of_several_classes_of_replicas_at_one_step_names_every_one():
    # Seed 1033912: TP groups 0-3 and 4-7; at step 0 rank 2 sums apart from ranks 0, 1 and 3, and rank 4 from ranks
    # 5, 6 and 7 (each issued two world collectives in the other order); from step 1 on each group sums alike. Each
    # departed, and the first departure may be either's: both are named, of the ranks of both groups.
    rows = [unchecked(r, 0, 491296.0 if r == 2 else 491436.0) for r in range(4)]
    rows += [unchecked(r, 0, 1245600.0 if r == 4 else 1245740.0) for r in range(4, 8)]
    rows += [unchecked(r, s, 1000.0 * s + 100.0 * (r // 4)) for r in range(8) for s in (1, 2)]
    root, _ = step_sums_root(rows, {})
    assert (root.outlier_ranks, root.majority, root.step_bound) == ([2, 4], True, 0)
    assert root.comm == "[ranks=0,1,2,3,4,5,6,7]"
    # Where the other group sums alike at that step, the one minority apart is named alone.
    alike = [row for row in rows if (row.rank, row.step) != (4, 0)] + [unchecked(4, 0, 1245740.0)]
    root, _ = step_sums_root(alike, {})
    assert (root.outlier_ranks, root.majority, root.comm) == ([2], True, "[ranks=0,1,2,3]")


def test_a_rank_alone_in_its_unchecked_sum_in_every_step_names_no_one():
    # A healthy DP=2 x TP=4 job: ranks 0 and 4 (TP rank 0 of each group) also read back a gather to them, so they sum
    # 77 more per step than their groups in every step, by design. Lone in every step, they are no departure.
    rows = [unchecked(r, s, (1000.0 if r < 4 else 5000.0) * (s + 1) + (77.0 * (s + 1) if r in (0, 4) else 0.0))
            for r in range(8) for s in range(3)]
    assert step_sums_root(rows, {}) is None
    # Seed 261479's shape: rank 22's group hung after its only step, so no step shows rank 22 summing alike with
    # it, nor alone again: it is named, with the caveat that it may sum apart by design (lone_sums.py).
    rows = [unchecked(r, 0, 100.0 * (r // 4)) for r in range(12) if r != 6] + [unchecked(6, 0, 150.0)]
    rows += [unchecked(r, 1, 1000.0 + 100.0 * (r // 4)) for r in range(12) if r // 4 != 1]
    root, step = step_sums_root(rows, {})
    assert (root.outlier_ranks, root.majority, root.step_bound, root.may_sum_apart_by_design) == ([6], True, 0, True)


def test_a_lone_unchecked_sum_in_the_only_step_on_record_bounds_the_root_and_may_part_by_design():
    # Seed 840255: TP groups 0-3 and 4-7, step 0 alone on record; rank 0 left out its group's all-gather. Ranks 1-3
    # sum alike, ranks 4-7 alike, rank 0 alone: no other step says whether it departed or sums apart by design, yet
    # the step bounds it, and of its group it is the fewest departing.
    rows = [unchecked(0, 0, 2173076.0)] + [unchecked(r, 0, 2439316.0) for r in (1, 2, 3)]
    rows += [unchecked(r, 0, 6192276.0) for r in range(4, 8)]
    root, step = step_sums_root(rows, {})
    assert (root.outlier_ranks, root.majority, root.step_bound, step) == ([0], True, 0, 0)
    assert root.may_sum_apart_by_design and root.reference_ranks == list(range(1, 8))
    # Seed 810359: TP pairs, step 0 alone; rank 6 left out its pair's all-reduce. Pairs 0-1, 2-3 and 4-5 sum alike,
    # ranks 6 and 7 each alone: they may be one pair split apart, and nothing says which departed.
    pairs = [unchecked(r, 0, [518292.0, 1206420.0, 1894548.0][r // 2]) for r in range(6)]
    pairs += [unchecked(6, 0, 2534548.0), unchecked(7, 0, 3043476.0)]
    root, _ = step_sums_root(pairs, {})
    assert (root.outlier_ranks, root.majority, root.comm, root.may_sum_apart_by_design) == ([6, 7], False,
                                                                                            "[ranks=6,7]", True)
    # Beside a root from launch counts, a lone sum that may part by design adds no outlier.
    from ncclforensics.align.sums_beside import with_checksum_outliers

    lone, _ = step_sums_root(rows, {})
    counts = replace(lone, outlier_ranks=[5], reference_ranks=[0, 1, 2, 3, 4, 6, 7], reason=RangeReason.COUNTS,
                     may_sum_apart_by_design=False)
    assert with_checksum_outliers(counts, lone) == (counts, [])
    assert with_checksum_outliers(counts, replace(lone, may_sum_apart_by_design=False))[0].outlier_ranks == [0, 5]
    # A lone rank confirmed by a later step (alike with its group there) is named with no such caveat.
    later = rows + [unchecked(r, 1, 100.0 if r < 4 else 200.0) for r in range(8)]
    root, _ = step_sums_root(later, {})
    assert (root.outlier_ranks, root.may_sum_apart_by_design) == ([0], False)


def test_nan_sums_make_no_two_ranks_one_class():
    from ncclforensics.align.replicas import one_class

    # Ranks 0 and 1 sum 100 and 250 by design at step 0; both read back NaN at step 1: NaN equals nothing.
    rows = [unchecked(0, 0, 100.0), unchecked(1, 0, 250.0), unchecked(0, 1, math.nan), unchecked(1, 1, math.nan)]
    by_step = {s: {r.rank: r for r in rows if r.step == s} for s in (0, 1)}
    assert not one_class(by_step, {0, 1}, {}, [])
    assert step_sums_root(rows, {}) is None
    # Equal finite sums in another step still make them one class.
    rows[2:] = [unchecked(0, 1, 5.0), unchecked(1, 1, 5.0)]
    by_step = {s: {r.rank: r for r in rows if r.step == s} for s in (0, 1)}
    assert one_class(by_step, {0, 1}, {}, [])


def test_expected_sums_that_part_in_the_only_step_may_part_by_design():
    # Ranks 0-7 share their one comm, but rank 7 expects less in its only step (an uneven last shard of a
    # reduce-scatter): no other step shows them expecting alike, so rank 7 is not named on its expected sum alone.
    every = frozenset(range(8))
    rows = [FingerprintRow(Location(f"fp{r}", 1), r, 0, None, sum=256000.0, expected_sum=221184.0) for r in range(7)]
    rows.append(FingerprintRow(Location("fp7", 1), 7, 0, None, sum=129024.0, expected_sum=129024.0))
    rows += [FingerprintRow(Location(f"fp{r}", 2), r, 1, None, sum=221184.0 if r < 7 else 129024.0,
                            expected_sum=221184.0 if r < 7 else 129024.0) for r in range(8)]
    found = step_sums_root(rows, {"0xabc": set(every)}, every)
    assert found is None or found[0].outlier_ranks != [7] or not found[0].majority


def test_the_side_of_named_ranks_does_not_hang_on_the_order_of_a_rank_with_a_field_unrecorded():
    from ncclforensics.align.answers import OpAt
    from ncclforensics.align.counts_beside_records import _side_of

    def side(callsites: dict[int, str | None], named: set[int]) -> set[int] | None:
        ops = {r: OpAt(rank=r, seq=15, op="AllReduce", count=8, dtype="bfloat16", redop=None, root=None,
                       state="started", callsite=site, step=None, loc=Location(f"torch_rank{r}.log", 2))
               for r, site in callsites.items()}
        records = Root(comm="1", seq=1, seq_range=(1, 15), outlier_ranks=sorted(ops), reference_ranks=sorted(ops),
                       kind=DIFFERENT_OPS, size=1, pinned_by="stacks", reason=RangeReason.BEFORE_RECORDS,
                       majority=False, ops=ops, kinds=(DIFFERENT_OPS,), shown=True)
        return _side_of(records, named)

    # Rank 0 recorded no call site: it pairs with rank 1's side and rank 2's alike, wherever it stands in rank order.
    assert side({0: None, 1: "x", 2: "y", 3: "x"}, {1}) is None
    assert side({0: "x", 1: "y", 2: None, 3: "x"}, {0}) is None
    # Every rank's field recorded, or the blank one pairing with one side alone, the side is known.
    assert side({0: "y", 1: "x", 2: "y", 3: "x"}, {1}) == {1, 3}
    assert side({0: None, 1: "x", 2: "x", 3: "x"}, {1}) is None  # (one side alone: nothing parts)


def test_unchecked_sums_of_a_step_some_rank_has_no_sum_of_are_a_majority_only_whatever_side_it_takes():
    # Seed 914345: ranks 0-3 sum alike in steps 0 and 1; rank 0's trace ends after step 0 (cut short); at step 2
    # rank 1 sums apart from ranks 2 and 3 (those two issued a step's collectives the other way round). Rank 0 may
    # have read back what rank 1 did: two even sides, either of which departed. Every rank is named, no majority.
    rows = [unchecked(r, s, 100.0 * (s + 1)) for r in range(4) for s in (0, 1) if (r, s) != (0, 1)]
    rows += [unchecked(1, 2, 2695680.0), unchecked(2, 2, 2572800.0), unchecked(3, 2, 2572800.0)]
    for cut in (frozenset(), frozenset({0})):
        root, _ = step_sums_root(rows, {}, cut=cut)
        assert (root.outlier_ranks, root.majority, root.step_bound) == ([0, 1, 2, 3], False, 2)
        assert root.comm == "[ranks=0,1,2,3]"
    # Of five ranks, one lone against three stays the outlier whichever side the fifth took.
    rows += [unchecked(4, s, 100.0 * (s + 1)) for s in (0, 1)] + [unchecked(4, 2, 2572800.0)]
    root, _ = step_sums_root(rows, {})
    assert (root.outlier_ranks, root.reference_ranks, root.majority) == ([1], [2, 3, 4], True)


def test_checksums_add_a_departure_of_a_rank_the_counts_name_on_neither_side_where_it_sums_with_them():
    # Seed 916148: PyTorch's counts of comm 1 give ranks 0 and 2 eight launches and rank 1 seven; rank 3's log has
    # no count there. Ranks 0-3 sum alike at step 0 (replicas: they share their comms), and rank 3 apart from the
    # other three from step 1 on: rank 3 departed too, and the counts do not say whose departure came first.
    from ncclforensics.align.notes import SumsAddOutliers
    from ncclforensics.align.sums_beside import with_checksum_outliers

    counted = Root(comm="1", seq=1, seq_range=(1, 8), outlier_ranks=[1], reference_ranks=[0, 2], kind="missing",
                   size=1, pinned_by="PyTorch's enqueued counts", reason=RangeReason.COUNTS, majority=True)
    rows = [unchecked(r, 0, 57600.0) for r in range(4)]
    rows += [unchecked(r, 1, 72960.0 if r == 3 else 387840.0) for r in range(4)]
    rows += [unchecked(r, 2, 508160.0 if r == 3 else 643840.0) for r in range(4)]
    on_record = frozenset({0, 1, 2})
    sums, _ = step_sums_root(rows, {"1": {0, 1, 2}}, on_record)
    assert (sums.outlier_ranks, sums.reference_ranks, sums.step_bound) == ([3], [0, 1, 2], 1)
    root, said = with_checksum_outliers(counted, sums, rows, on_record)
    assert (root.outlier_ranks, root.reference_ranks, root.majority) == ([1, 3], [0, 2], False)
    assert said == [SumsAddOutliers(added=(3,), step=1, basis="counts", outliers=(1, 3))]
    # Not where records give rank 3's comms (it is in none of the counted comm's) ...
    assert with_checksum_outliers(counted, sums, rows, on_record | {3}) == (counted, [])
    # ... nor where its sums never were alike with the counted ranks' (it may sum apart by design) ...
    apart = [replace(r, sum=1.0) if (r.rank, r.step) == (3, 0) else r for r in rows]
    assert with_checksum_outliers(counted, sums, apart, on_record) == (counted, [])
    # ... nor where the checksums do not compare every counted rank.
    assert with_checksum_outliers(counted, replace(sums, reference_ranks=[0, 2]), rows, on_record) == (counted, [])


def test_checksums_add_a_departure_of_a_rank_the_counts_name_on_neither_side_where_pytorch_places_it_in_the_group():
    # Seed 1085264: counts of group 1 give ranks 0 and 1 fourteen launches and rank 3 thirteen; rank 2 has no count
    # there. At step 0, the only step all four summed, rank 2 alone reads back and expects apart: its sums were never
    # alike with the counted ranks', which leaves it unplaced, but PyTorch's lines put it in the group (ranks 1 and 3
    # at places 1 and 3: group_places.py), so it departed there too.
    from ncclforensics.align.notes import SumsAddOutliers
    from ncclforensics.align.sums_beside import with_checksum_outliers

    counted = Root(comm="1", seq=1, seq_range=(1, 14), outlier_ranks=[3], reference_ranks=[0, 1], kind="missing",
                   size=1, pinned_by="PyTorch's enqueued counts", reason=RangeReason.COUNTS, majority=True)
    rows = [row for r in (0, 1, 3) for row in per_step(r, [(238848.0, 190720.0)])]
    rows += per_step(2, [(120192.0, 149760.0), (1405824.0, 1470720.0)])
    on_record = frozenset({0, 1, 3})
    sums, _ = step_sums_root(rows, {"1": {0, 1, 3}}, on_record)
    assert (sums.outlier_ranks, sums.reference_ranks, sums.step_bound) == ([2], [0, 1, 3], 0)
    assert with_checksum_outliers(counted, sums, rows, on_record) == (counted, [])
    root, said = with_checksum_outliers(counted, sums, rows, on_record, placed=frozenset({0, 1, 2, 3}))
    assert (root.outlier_ranks, root.reference_ranks, root.majority) == ([2, 3], [0, 1], False)
    assert said == [SumsAddOutliers(added=(2,), step=0, basis="counts", outliers=(2, 3))]


def test_two_even_halves_of_unchecked_sums_that_are_equal_in_every_later_step_are_one_class_that_parted():
    # Ranks 1 and 3 of four swapped two collectives in step 0 and the results healed: step 0 sums two against two,
    # steps 1 and 2 all alike. Halves summing apart by design (two TP groups' results) would part in every step,
    # so these are one class of replicas, and the split names every rank, no majority; were the halves apart in
    # every step, they would be two classes and name no one.
    def unchecked(rank: int, sums: list[float]) -> list[FingerprintRow]:
        return [FingerprintRow(Location(f"fp{rank}", s + 1), rank, s, None, sum=value) for s, value in enumerate(sums)]

    healed = [unchecked(r, [5.0 if r % 2 else 7.0, 11.0, 13.0]) for r in range(4)]
    root, step = step_sums_root([row for rows in healed for row in rows], {})
    assert root.outlier_ranks == [0, 1, 2, 3] and not root.majority and step == 0
    apart = [unchecked(r, [5.0 if r % 2 else 7.0, 11.0 if r % 2 else 17.0, 13.0 if r % 2 else 19.0])
             for r in range(4)]
    assert step_sums_root([row for rows in apart for row in rows], {}) is None


def test_unchecked_sums_of_one_class_that_part_into_several_sides_name_every_rank():
    # Seed 959072: ranks 0-3 of one comm sum alike in steps 1 and 2 (one class: a correct run makes them equal); at
    # step 0 rank 2 reordered two collectives and rank 3 issued another kind, so ranks 0 and 1 sum one value, rank 2
    # another and rank 3 a third. No side is a majority, yet replicas that part say a collective was misaligned by
    # step 0: every rank may have departed, and no majority says which.
    rows = [unchecked(r, 0, [682752.0, 682752.0, 738048.0, 622080.0][r]) for r in range(4)]
    rows += [unchecked(r, s, 1921280.0 * s) for r in range(4) for s in (1, 2)]
    root, step = step_sums_root(rows, {})
    assert (root.outlier_ranks, root.majority, root.step_bound, step) == ([0, 1, 2, 3], False, 0, 0)
    assert root.pinned_by == "per-step checksums" and root.comm == "[ranks=0,1,2,3]"
    # Several sides of ranks that sum apart in every step (no class of replicas) still name no one.
    apart = [unchecked(r, s, 1000.0 * r + s) for r in range(4) for s in range(3)]
    assert step_sums_root(apart, {}) is None


def test_unchecked_sums_alike_across_two_sides_in_a_step_some_rank_has_no_sum_of_make_them_one_class():
    # Seed 983205: ranks 0-3 of one comm; at step 0 ranks 0 and 1 sum 660480, ranks 2 and 3 414720 (ranks 2 and 3
    # issued the step's two collectives the other way round); rank 2's trace is cut after step 0, and in steps 1-3
    # ranks 0, 1 and 3 sum alike. Classes apart by design part in every step, so rank 3 is of one class with ranks 0
    # and 1, and rank 2, alike with rank 3, of it too: two even sides of one class, either of which departed.
    from ncclforensics.align.replicas import classes_of_sums, one_class

    rows = [unchecked(r, 0, 660480.0 if r < 2 else 414720.0) for r in range(4)]
    rows += [unchecked(r, s, 1254400.0 * s) for r in (0, 1, 3) for s in (1, 2, 3)]
    by_step = {s: {r.rank: r for r in rows if r.step == s} for s in range(4)}
    assert classes_of_sums(by_step, {0, 1, 2, 3}) is None and one_class(by_step, {0, 1, 2, 3}, {}, [])
    root, step = step_sums_root(rows, {}, cut=frozenset({2}))
    assert (root.outlier_ranks, root.majority, root.step_bound, step) == ([0, 1, 2, 3], False, 0, 0)
    assert not root.may_sum_apart_by_design
    # Where rank 3 sums apart from ranks 0 and 1 in every later step too, the halves are two classes by design.
    apart = [row if row.step == 0 or row.rank != 3 else replace(row, sum=row.sum + 1.0) for row in rows]
    by_step = {s: {r.rank: r for r in apart if r.step == s} for s in range(4)}
    assert classes_of_sums(by_step, {0, 1, 2, 3}) == [{0, 1}, {2, 3}]
    assert step_sums_root(apart, {}, cut=frozenset({2})) is None


def test_a_trace_cut_inside_a_later_steps_record_shows_the_whole_trace_that_ends_sooner_hung():
    # Seed 989647: ranks 0 and 1 of one comm sum apart at step 0 (rank 1 skipped a collective); rank 0's whole trace
    # ends there, rank 1's was cut inside `step=1 r`: rank 1 read step 1 back, rank 0 never completed it. The job
    # hung by step 1, and either rank may have departed.
    rows = [unchecked(0, 0, 1287168.0), unchecked(1, 0, 1002496.0)]
    root, step = step_sums_root(rows, {}, cut=frozenset({1}), begun={1: 1})
    assert (root.outlier_ranks, root.majority, root.step_bound, step) == ([0, 1], False, 1, None)
    # Cut where its record of step 0 began, or before a digit of the step, it says nothing past step 0.
    assert step_sums_root(rows, {}, cut=frozenset({1}), begun={1: 0}) is None
    assert step_sums_root(rows, {}, cut=frozenset({1})) is None
    # A rank whose own trace was cut is never the one that stopped.
    assert step_sums_root(rows, {}, cut=frozenset({0, 1}), begun={1: 1}) is None


def test_expected_sums_that_part_replicas_name_the_fewer_though_every_sum_checks_right_and_no_comm_is_known():
    # Seed 995899: one comm of ranks 0-7, which no record lists; rank 7 issued a small all-gather where the others
    # all-reduced at step 1. Every sum reads back within the tolerance of its own expected value (the mixed part is
    # too small to show), but the expected sums, alike on every rank at step 0, part rank 7 from the rest at step 1:
    # it launched other collectives there.
    def row(r: int, step: int, got: float, want: float) -> FingerprintRow:
        return FingerprintRow(Location(f"fp{r}", step + 1), r, step, None, sum=got, expected_sum=want)

    first = [row(r, 0, 1188495360.0, 1188495360.0) for r in range(8)]
    parted = [row(r, 1, 1319568384.0, 1319567360.0) for r in range(7)] + [row(7, 1, 1302471696.0, 1302471680.0)]
    root, step = step_sums_root(first + parted, {})
    assert (root.outlier_ranks, root.reference_ranks, root.majority, step) == ([7], list(range(7)), True, 1)
    # No result mixed and no record of their comms: rank 7 may be of another class serving other data by design,
    # which the root says (and the verdict is then inconclusive).
    assert root.may_sum_apart_by_design and root.expected_apart_reading_right
    # Records that put the eight in one comm and no other leave no such class.
    every = frozenset(range(8))
    root, _ = step_sums_root(first + parted, {"0xabc": set(every)}, every)
    assert root.outlier_ranks == [7] and not root.may_sum_apart_by_design
    # Two classes by design (ranks 0-3 expect one sum each step, ranks 4-7 another) give no majority of alike
    # expected sums: rank 7 parting from ranks 4-6 is not named on them.
    design = [row(r, s, want, want) for r in range(8) for s, want in enumerate(
        [100.0, 200.0] if r < 4 else [300.0, 400.0 if r < 7 else 350.0])]
    found = step_sums_root(design, {})
    assert found is None or found[0].outlier_ranks != [7] or not found[0].majority
    # Ranks whose traces were cut short before the step may have launched what either side did: two alike beside
    # one apart and two cut are no majority; where those two hung there instead (whole traces that stop), they may
    # have departed first, and the expected sums name no one either.
    few = [r for r in first if r.rank in (0, 1, 2, 3, 7)] + [r for r in parted if r.rank in (0, 1, 7)]
    for cut in (frozenset({2, 3}), frozenset()):
        found = step_sums_root(few, {}, cut=cut)
        assert found is None or found[0].outlier_ranks != [7] or not found[0].majority


def test_lone_unchecked_sums_are_weighed_against_their_own_class_alone():
    # Seed 990797: TP groups 0-3 and 4-7 under a world comm. At step 0 ranks 0-3 sum alike, ranks 5 and 6 alike,
    # ranks 4 and 7 each alone; at step 1 ranks 4-7 sum alike: ranks 4 and 7 are of the class of ranks 5 and 6, and
    # ranks 0-3, of another class, say nothing of them. Two lone ranks of four are no minority of their class: some
    # of ranks 4-7 departed, and nothing says which; the root names that class, no majority.
    step0 = {0: 460737.0, 1: 460737.0, 2: 460737.0, 3: 460737.0, 4: 1166219.0, 5: 1166401.0, 6: 1166401.0,
             7: 1126081.0}
    step1 = {0: 1687684.0, 1: 1372420.0, 2: 1687684.0, 3: 1687684.0, 4: 2392324.0, 5: 2392324.0, 6: 2392324.0,
             7: 2392324.0}
    rows = [unchecked(r, 0, total) for r, total in step0.items()] + [unchecked(r, 1, t) for r, t in step1.items()]
    root, step = step_sums_root(rows, {})
    assert (root.outlier_ranks, root.majority, root.comm, step) == ([4, 5, 6, 7], False, "[ranks=4,5,6,7]", 0)
    # One lone rank of the class is its fewest departing, compared with its class alone.
    rows = [unchecked(r, 0, step0[5] if r == 4 else total) for r, total in step0.items()]
    rows += [unchecked(r, 1, t) for r, t in step1.items()]
    root, _ = step_sums_root(rows, {})
    assert (root.outlier_ranks, root.reference_ranks, root.majority, root.comm) == ([7], [4, 5, 6], True,
                                                                                    "[ranks=4,5,6,7]")
    # A lone rank in each class (and rank 2 alone at step 1, so no step parts the ranks into classes alone): each
    # its class's fewest departing, compared with both classes.
    rows = [unchecked(r, 0, step0[0] + 5.0 if r == 1 else step0[5] if r == 4 else total) for r, total in step0.items()]
    rows += [unchecked(r, 1, step1[0] if r == 1 else t + 3.0 if r == 2 else t) for r, t in step1.items()]
    root, _ = step_sums_root(rows, {})
    assert (root.outlier_ranks, root.reference_ranks, root.majority, root.comm) == ([1, 7], [0, 2, 3, 4, 5, 6],
                                                                                    True, "[ranks=0,1,2,3,4,5,6,7]")


def test_a_lone_offset_in_one_comm_beside_ranks_crossing_to_the_next_step_is_the_outlier_where_fewer_depart():
    # TP groups 0-3 and 4-7, the records showing 0-3 as one comm. At step 0 ranks 0-3 read back wrong, 0-2 off
    # alike and rank 3 apart; ranks 4-7 read back right, and step 1 wrong, rank 4 apart from 5-7; ranks 0-3 hung in
    # step 1. Ranks 4-7 leaving out step 0's last collective (or 0-3 running one more) departs four ranks; rank 3
    # departing at step 0 and rank 4 at step 1 departs two: rank 3 is the outlier (1103895).
    rows = [r for rank in (0, 1, 2) for r in per_step(rank, [(2048.0 + rank, float(rank))])]
    rows += per_step(3, [(515.0, 3.0)])
    rows += per_step(4, [(4.0, 4.0), (516.0, 4.0)])
    rows += [r for rank in (5, 6, 7) for r in per_step(rank, [(rank, rank), (2048.0 + rank, float(rank))])]
    root, step = step_sums_root(rows, {"tp": {0, 1, 2, 3}}, frozenset({0, 1, 2, 3}))
    assert root.outlier_ranks == [3] and root.reference_ranks == [0, 1, 2] and root.majority and step == 0
    # (with no comm on record that the ranks wrong in the step share, their departures may be the crossing ranks'
    # doing in comms each of them shares with one: every rank, no majority)
    root, _ = step_sums_root(rows, {})
    assert root.outlier_ranks == list(range(8)) and not root.majority
    # (nor where the crossing ranks' own sums of the next step name no fewest departing)
    even = [replace(r, sum=512.0 + r.rank) if (r.rank, r.step) == (5, 1) else r for r in rows]
    root, _ = step_sums_root(even, {"tp": {0, 1, 2, 3}}, frozenset({0, 1, 2, 3}))
    assert root.outlier_ranks == list(range(8)) and not root.majority


def test_two_ranks_expecting_apart_beside_traces_cut_before_the_step_name_both_until_those_sums_decide():
    # Seed 1128721: four ranks of one comm sum alike at step 0; at step 1 rank 2 reads back 910336 expecting 931840
    # and rank 3 1192960 expecting 1141760 (rank 2 skipped an all-reduce); ranks 0 and 1 were cut after step 0. An
    # expected sum is what the rank's own launches give, and no line gives a collective's inputs: one fewer on rank
    # 2 and one more on rank 3 fit these two lines alike. Either departed: both are named (both sides), no majority.
    two = [(322560.0, 322560.0), (910336.0, 931840.0)]
    three = [(322560.0, 322560.0), (1192960.0, 1141760.0)]
    rows = per_step(2, [*two, (1807360.0, 1960960.0)]) + per_step(3, three)
    cut = per_step(0, three[:1]) + per_step(1, three[:1])
    root, step = step_sums_root(cut + rows, {}, cut=frozenset({0, 1}))
    assert (root.outlier_ranks, root.reference_ranks, root.majority, step) == ([2, 3], [2, 3], False, 1)
    # The step 1 sums of ranks 0 and 1 decide: read back as rank 3's, rank 2 departed; as rank 2's, rank 3 did.
    for side, outlier in ((three, 2), (two, 3)):
        root, _ = step_sums_root(per_step(0, side) + per_step(1, side) + rows, {})
        assert (root.outlier_ranks, root.majority) == ([outlier], True)


def _nccl_log(rank: int, ops: list[str], nranks: int = 4) -> str:
    """A whole NCCL log of one rank of one comm: its init, then one line per collective launched."""
    comm = f"0x{rank + 1:x}0b8780"
    lines = [f"vm:{rank}:{rank} [0] NCCL INFO ncclCommInitRankConfig comm {comm} rank {rank} nranks {nranks} cudaDev 0 "
             f"nvmlDev 0 busId 60 commId 0xf36789e58aa37a7c - Init COMPLETE"]
    lines += [f"vm:{rank}:{rank} [0] NCCL INFO {op}: opCount {n:x} sendbuff 0x7f4000 recvbuff 0x7f4000 count 2048 "
              f"datatype 7 op 0 root 0 comm {comm} [nranks={nranks}] stream (nil)" for n, op in enumerate(ops)]
    return "\n".join(lines) + "\n"


def test_checksums_add_a_rank_that_left_a_collective_out_among_lookalikes_beside_a_root_the_records_place(tmp_path):
    # Seed 1157373: one comm of ranks 0-3, one all-reduce a step. Rank 1 left out its step-0 all-reduce (its seq 1 is
    # its step-1 one, and pairs with the others' step-0 one: alike, every record of it alike) and rank 2 issued an
    # all-gather at step 1 (seq 2, where the records part). Rank 1's per-step checksums say what no record does: it
    # read back nothing at step 0, and the others 278528. It departed too, anywhere from seq 1 on, and nothing says
    # whose departure came first: the root names ranks 1 and 2, no majority, over seq 1..2.
    from cli_helpers import diff_json

    for rank in range(4):
        ops = ["AllReduce", "AllGather" if rank == 2 else "AllReduce"]
        (tmp_path / f"nccl.vm.{rank}.log").write_text(_nccl_log(rank, ops))
        sums = [(0, 0.0), (1, 278528.0)] if rank == 1 else [(0, 278528.0)]
        (tmp_path / f"fingerprint_rank{rank}.log").write_text(
            "".join(f"step={step} rank={rank} checksum={total:.6f}\n" for step, total in sums))
    _, d = diff_json(str(tmp_path))
    root = d["root"]
    assert (root["outlier_ranks"], root["seq_range"], root["majority"]) == ([1, 2], [1, 2], False)
    assert any(n["kind"] == "sums_add_outliers" and n["added"] == [1] and n["basis"] == "records" for n in d["notes"])
    # (rank 1's checksums say it departed, not how: the root leaves every kind open, and the words say so)
    assert set(root["kinds"]) == {"different", "extra", "missing"}
    assert "they differ by different collectives at one seq, or 1 extra collective, or 1 missing collective, the " \
        "records cannot tell which, and no majority says which side deviated" in d["summary"]


def test_checksums_beside_a_root_the_records_place_reach_its_range_back_and_add_no_rank_of_another_comm():
    from ncclforensics.align.notes import SumsAddOutliers
    from ncclforensics.align.sums_beside import with_sums_beside_records

    placed = Root(comm="0xa", seq=7, seq_range=(7, 7), outlier_ranks=[2], reference_ranks=[0, 1, 3, 4],
                  kind=DIFFERENT_OPS, size=1, pinned_by="signatures", reason=None, majority=True)
    rows = [unchecked(r, 0, 0.0 if r == 4 else 278528.0) for r in range(5)]
    sums, _ = step_sums_root(rows, {"0xa": set(range(5))}, frozenset(range(5)))
    assert (sums.comm, sums.outlier_ranks, sums.majority) == ("0xa", [4], True)
    ends = {r: 9 for r in range(5)}
    root, said = with_sums_beside_records(placed, sums, ends, frozenset(range(5)))
    # (rank 4's records hold nothing of its departure, which may be anywhere up to its last record)
    assert (root.outlier_ranks, root.reference_ranks, root.seq_range) == ([2, 4], [0, 1, 3], (1, 9))
    assert root.majority
    assert said == [SumsAddOutliers(added=(4,), step=0, basis="records", outliers=(2, 4))]
    # Not where the sums are of ranks no record puts in the root's comm alone (rank 4 may have departed elsewhere) ...
    assert with_sums_beside_records(placed, replace(sums, comm="[ranks=0,1,2,3,4]"), ends, frozenset(range(5))) \
        == (placed, [])
    assert with_sums_beside_records(placed, sums, ends, frozenset(range(4))) == (placed, [])
    # ... nor where the sums do not compare every rank the root names, nor where rank 4's records are cut short.
    assert with_sums_beside_records(placed, replace(sums, reference_ranks=[0, 1, 3]), ends, frozenset(range(5))) \
        == (placed, [])
    assert with_sums_beside_records(placed, sums, {r: 9 for r in range(4)}, frozenset(range(5))) == (placed, [])


def test_a_waiting_candidate_the_sums_part_only_by_its_missing_step_stays_a_candidate_beside_late_records():
    # Seed 1181965: TP pairs {0, 1} ... {6, 7} in a world of 8. Rank 5 ran one more world collective in step 2; the
    # world records begin at seq 7 and part rank 5 alone. Rank 4, counted short and waiting in its pair with rank 5,
    # is a waiting candidate (held back there, or departed here before the records and then stopped). Ranks 0-3, 6
    # and 7 read step 2 back wrong; ranks 4 and 5 have sums of steps 0 and 1 alone. A rank held back never
    # completes the step either: the sums name rank 4 only as the counts did, and it stays a candidate.
    from ncclforensics.align.notes import SumsAddOutliers
    from ncclforensics.align.sums_beside import with_sums_before_records

    rows = [step_sum(r, s, s < 2) for r in (0, 1, 2, 3, 6, 7) for s in range(3)]
    rows += [step_sum(r, s, True) for r in (4, 5) for s in range(2)]
    found, step = step_sums_root(rows, {})
    assert (found.outlier_ranks, found.majority, step) == ([4, 5], True, 2)
    late = Root(comm="0", seq=1, seq_range=(1, 7), outlier_ranks=[5], reference_ranks=[0, 1, 2, 3, 6, 7],
                kind=DIFFERENT_OPS, size=1, pinned_by="signatures", reason=RangeReason.BEFORE_RECORDS, majority=True,
                ops={}, kinds=(DIFFERENT_OPS,), shown=True, waiting_candidates={4: ("3",)})
    assert with_sums_before_records(late, found, rows) == (late, [])
    # A rank that is no candidate, parted alike, departed too (nothing orders the two departures).
    plain = replace(late, reference_ranks=[0, 1, 2, 3, 4, 6, 7], waiting_candidates={})
    root, said = with_sums_before_records(plain, found, rows)
    assert root.outlier_ranks == [4, 5] and said == [SumsAddOutliers((4,), 2, "late_records", (4, 5))]
    # A candidate that summed the step apart from the rest is parted by what it read back, not by its wait.
    apart = [*rows, FingerprintRow(Location("fp4", 3), 4, 2, None, sum=3.0, expected_sum=1.0)]
    root, _ = with_sums_before_records(late, found, apart)
    assert root.outlier_ranks == [4, 5] and root.reference_ranks == [0, 1, 2, 3, 6, 7] and not root.waiting_candidates
