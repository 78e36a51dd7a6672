"""A tie told apart by the tags each step repeats: ranks whose own records of a step leave out a tag departed."""

import numpy as np

from ncclforensics.align.edits import Codes, EditKind, Placement
from ncclforensics.align.left_out_tags import left_out_tags, told_by_left_out_tags
from ncclforensics.align.narrowing import ResultChecks
from ncclforensics.align.proposal import Proposal
from ncclforensics.align.root import _unplaced_left_out, solve
from ncclforensics.align.solution import Solution

PROGRAM = [1, 2, 3, 4, 5, 6, 7]  # tags of one step: layers 0 and 1 (three all-reduces each), then lm_head


def traces(ranks: int = 6):
    """Streams of `op`, `tag` and `step` codes: every rank read back step 0 of the program; ranks 4 and 5 alone read
    back step 1 (the others wait on their last collective there), rank 5 having left out tag 3, rank 4 tag 4."""
    def stream(tags, steps):
        return Codes({"op": np.ones(len(tags), dtype=np.uint64), "tag": np.array(tags, dtype=np.uint64),
                      "step": np.array(steps, dtype=np.uint64)}, len(tags))

    codes = {r: stream(PROGRAM, [10] * 7) for r in range(ranks - 2)}
    codes[ranks - 2] = stream(PROGRAM + [1, 2, 3, 5, 6, 7], [10] * 7 + [11] * 6)
    codes[ranks - 1] = stream(PROGRAM + [1, 2, 4, 5, 6, 7], [10] * 7 + [11] * 6)
    return codes


def test_a_step_that_leaves_out_a_tag_every_other_step_issues_there_departs_at_its_next_record():
    assert left_out_tags(traces(), start=1) == {4: 11, 5: 10}


def test_a_tag_no_other_rank_issued_in_that_step_says_nothing():
    codes = traces()
    del codes[4]  # rank 5 alone read back step 1: every rank may have left tag 3 out there
    assert left_out_tags(codes, start=1) == {}


def test_a_tie_past_where_the_others_records_end_goes_to_the_ranks_that_left_out_a_tag():
    codes = traces()
    checks = ResultChecks(right=frozenset(range(1, 10)), wrong=frozenset(range(10, 14)), locs=())
    solution = solve([("tags", lambda: codes)], 1, [checks], lambda seq: ())
    # rank 5 left out tag 3 at seq 10, where the results first read back wrong; rank 4 tag 4 later, at seq 11
    assert solution.majority and solution.leading == [5] and solution.named_range == (10, 10)
    assert sorted(solution.outliers) == [4, 5] and solution.reference == [0, 1, 2, 3]


def test_a_member_whose_records_reach_the_departure_without_tags_departs_with_its_group():
    codes = traces(8)  # ranks 0-5 read back step 0; rank 7 left out tag 3 in step 1, rank 6 tag 4
    codes[3] = Codes({"op": np.ones(13, dtype=np.uint64)}, 13)  # an NCCL log alone, as long as rank 7's records
    tie = Proposal([Placement(7, EditKind.DIFFERENT, 1, 10, 10), Placement(0, EditKind.DIFFERENT, 1, 10, 10)],
                   list(range(8)), list(range(8)), False, True, members={7: [3, 7], 0: [0, 1, 2, 4, 5, 6]})
    told = told_by_left_out_tags(tie, codes, start=1)
    # rank 3's log reaches seq 10 and goes with rank 7; ranks 0-2, 4 and 5 end at seq 7, before rank 6's departure
    assert told.outliers == [3, 6, 7] and told.majority and told.reference == [0, 1, 2, 4, 5]
    assert sorted((p.rank, p.low) for p in told.placements) == [(6, 11), (7, 10)]
    # where the group's departure makes it no strict minority, the tie stands
    assert told_by_left_out_tags(tie, {r: c for r, c in codes.items() if r not in (0, 1)}, start=1) is None


def test_a_step_that_leaves_out_its_first_tag_departs_where_its_records_of_the_step_begin():
    # ranks 0-3 read back steps 0 and 1; ranks 4 and 5 step 2 too, rank 5 having left out the step's first tag,
    # rank 4 a middle one: the start of each step after the first on record is an edge every other step puts tag 1 at
    codes = traces()
    steps = [10] * 7 + [11] * 7
    for rank in range(4):
        codes[rank] = Codes({"op": np.ones(14, dtype=np.uint64), "tag": np.array(PROGRAM * 2, dtype=np.uint64),
                             "step": np.array(steps, dtype=np.uint64)}, 14)
    for rank, tags in ((4, PROGRAM + PROGRAM + [1, 2, 3, 5, 6, 7]), (5, PROGRAM + PROGRAM + [2, 3, 4, 5, 6, 7])):
        codes[rank] = Codes({"op": np.ones(20, dtype=np.uint64), "tag": np.array(tags, dtype=np.uint64),
                             "step": np.array(steps + [12] * 6, dtype=np.uint64)}, 20)
    assert left_out_tags(codes, start=1) == {4: 18, 5: 15}


def test_a_trace_that_begins_inside_a_step_places_no_edge_there():
    steps = np.array([10] * 7 + [11] * 7 + [12] * 7, dtype=np.uint64)
    codes = {rank: Codes({"op": np.ones(21, dtype=np.uint64), "tag": np.array(PROGRAM * 3, dtype=np.uint64),
                          "step": steps}, 21) for rank in range(6)}
    lost = codes[5].fields["tag"].copy()
    lost[0] = 0  # rank 5's ring lost its first record: its records of step 10 begin with tag 2
    codes[5] = Codes({**codes[5].fields, "tag": lost}, 21)
    assert left_out_tags(codes, start=1) == {}


def test_a_step_that_leaves_out_its_last_tag_departs_where_the_next_step_begins():
    steps = [10] * 7 + [11] * 7 + [12] * 7
    codes = {rank: Codes({"op": np.ones(21, dtype=np.uint64), "tag": np.array(PROGRAM * 3, dtype=np.uint64),
                          "step": np.array(steps, dtype=np.uint64)}, 21) for rank in range(4)}
    # rank 4 left lm_head (tag 7) out of step 11 and went on into step 12; rank 5 left out tag 3 there
    tags = {4: PROGRAM + PROGRAM[:-1] + PROGRAM, 5: PROGRAM + [1, 2, 4, 5, 6, 7] + PROGRAM}
    for rank, mine in tags.items():
        codes[rank] = Codes({"op": np.ones(20, dtype=np.uint64), "tag": np.array(mine, dtype=np.uint64),
                             "step": np.array([10] * 7 + [11] * 6 + [12] * 7, dtype=np.uint64)}, 20)
    assert left_out_tags(codes, start=1) == {4: 14, 5: 10}


def test_records_that_begin_at_the_comms_first_collective_hold_their_first_steps_start():
    # ranks 0-3 read back step 10 alone, from seq 1 on; ranks 4 and 5 step 11 too, rank 5 having left out its first
    # tag and rank 4 its last (its records end there: no edge says so). The start of step 11 is on record twice
    # alone, but every rank's records of step 10 begin at seq 1, where nothing of the step came before them.
    codes = traces()
    for rank, tags in ((4, PROGRAM + PROGRAM[:-1]), (5, PROGRAM + PROGRAM[1:])):
        codes[rank] = Codes({"op": np.ones(13, dtype=np.uint64), "tag": np.array(tags, dtype=np.uint64),
                             "step": np.array([10] * 7 + [11] * 6, dtype=np.uint64)}, 13)
    assert left_out_tags(codes, start=1) == {5: 8}
    solution = solve([("tags", lambda: codes)], 1, [], lambda seq: ())
    assert solution.majority and solution.leading == [5] and solution.named_range == (8, 8)
    # records that begin past the comm's first collective may begin inside a step: no edge there, and no one named
    assert left_out_tags(codes, start=2) == {}


def test_a_cut_rank_whose_step_leaves_out_the_tag_the_outliers_left_out_departs_with_them():
    # ranks 0-4 read back step 0 alone (they wait on their last collective of step 1); ranks 5, 6 and 7 read back
    # step 1 with tag 3 left out. Ranks 6 and 7 launched one fewer (the solution names them); rank 5's log was cut.
    codes = traces(8)
    codes[5] = codes[6] = codes[7]
    assert left_out_tags(codes, start=1) == {}  # no rank recorded tag 3 in step 1
    assert left_out_tags(codes, start=1, seen=False) == {5: 10, 6: 10, 7: 10}
    solution = Solution([Placement(r, EditKind.MISSING, 1, 10, 10) for r in (6, 7)], [6, 7], [0, 1, 2, 3, 4], True,
                        "fingerprints", [], unplaced=[5])
    joined = _unplaced_left_out(solution, codes, start=1)
    assert joined.outliers == [5, 6, 7] and joined.unplaced == [] and joined.seq_range == (10, 10)
    # one whose records of step 1 hold every tag stays unplaced (its log, cut, may go on as the others' did)
    codes[5] = Codes({**codes[0].fields, "step": np.array([10] * 7, dtype=np.uint64)}, 7)
    solution = Solution([Placement(r, EditKind.MISSING, 1, 10, 10) for r in (6, 7)], [6, 7], [0, 1, 2, 3, 4], True,
                        "fingerprints", [], unplaced=[5])
    assert _unplaced_left_out(solution, codes, start=1).outliers == [6, 7]
