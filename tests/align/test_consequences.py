"""align/consequences.py: a rank stuck in one communicator stops launching in its others; the root is where it
diverged, not where that shows. On the rules' own values, on PyTorch's enqueued counts and on a real-format RAS
reply of a tensor-parallel group inside a world group."""

from __future__ import annotations

from dataclasses import replace

from ras_replies import ras_status_reply

from ncclforensics.align.causes import pick_counted, unseen_causes
from ncclforensics.align.consequences import (Disagreement, candidates, consequences, departing_elsewhere,
                                              odd_behind, odd_ones, other_side)
from ncclforensics.align.answers import MISSING, RangeReason, Root
from ncclforensics.align.ras import job_processes, ras_histories
from ncclforensics.align.ras_only import ras_only_root, ras_only_roots, ras_rank_map, unnamed_ranks
from ncclforensics.align.notes import RasRankUnnamed, UndecidedComm, UnseenComm
from ncclforensics.align.streams import Streams
from ncclforensics.align.enqueue_marks import EnqueueMarks
from ncclforensics.align.marks_only import marks_only_root
from ncclforensics.model import Location
from ncclforensics.report.notes import note_words
from ncclforensics.sources import InputFile, parse_file


def _d(comm: str, members, held, unknown: int = 0) -> Disagreement:
    return Disagreement(comm, frozenset(members), frozenset(held), unknown)


def test_the_odd_ranks_are_a_majoritys_outliers_else_those_behind():
    assert odd_ones({0: 3, 1: 2, 2: 3, 3: 3}, {1}, majority=True) == {1}
    assert odd_ones({0: 3, 2: 3, 4: 4, 6: 3}, {4}, majority=True) == {4}  # ahead of the others: waits for them
    assert odd_ones({0: 10, 1: 12}, {0, 1}, majority=False) == {0}  # a tie: the side behind
    assert odd_ones({0: 2, 1: 2}, {0, 1}, majority=False) == {0, 1}  # records that differ, not lengths


def test_a_world_group_behind_only_where_its_tp_group_diverged_is_a_consequence():
    world = _d("world", range(4), {1})  # rank 1 launched one world collective fewer
    tp = _d("tp", [0, 1], {0})  # rank 0 launched fewer in the TP group of ranks 0 and 1
    assert consequences([world, tp]) == {"world": ["tp"]}
    assert candidates([world, tp]) == ["tp"]


def test_ranks_behind_in_the_world_and_in_their_tp_group_may_have_stopped_in_either():
    """366841: rank 5 is behind in the world (5 against 6) and in its TP group (18 against 27). It may have skipped
    TP collectives and stopped in the world behind them, or added a world collective whose result it waits for on
    the host: it then enqueues nothing more in its TP group, whose peers go on there. Both stay candidates, the TP
    group first (as the nesting rule alone would name it)."""
    assert odd_behind({0: 6, 4: 6, 5: 5, 7: 6}, frozenset({5})) and not odd_behind({0: 6, 5: 7}, frozenset({5}))
    world = Disagreement("world", frozenset(range(8)), frozenset({5}), behind=True)
    tp = Disagreement("tp", frozenset({4, 5, 6, 7}), frozenset({5}), behind=True)
    assert consequences([world, tp]) == {} and candidates([world, tp]) == ["tp", "world"]
    # ranks ahead in the world ran on into it; a TP group whose own records show that it diverged is the cause
    assert consequences([replace(world, behind=False), tp]) == {"world": ["tp"]}
    assert consequences([world, replace(tp, shown=True)]) == {"world": ["tp"]}
    # Kept only so, the world comes last, even where it alone may hold every odd rank (its other members are
    # counts in a RAS reply: 500899): the others keep the order they had with it a consequence.
    unnamed = frozenset({3, *(("unknown", "world", r) for r in range(7))})
    world = Disagreement("world", unnamed, frozenset({3}), unknown=7, behind=True)
    pair = Disagreement("pair", frozenset({0, 1}), frozenset({0, 1}), shown=True)
    tp = Disagreement("tp", frozenset({2, 3}), frozenset({3}), behind=True)
    assert candidates([world, pair, tp]) == ["pair", "tp", "world"]


def test_a_pair_and_the_world_waiting_on_each_other_both_stay_candidates():
    """741188: ranks 0 and 1 launched 10 and 9 in their pair (no majority), the world 2, 3, 3 (rank 0 behind).
    Rank 1 may have added a world collective and waited for it on the host, leaving rank 0 to go on in the pair
    and wait there for it; or rank 0 added one in the pair, and rank 1 waits in the world's next for it. The
    counts read the same either way: both stay candidates, the pair first (as the nesting rule alone names it)."""
    pair_counts, world_counts = {0: 10, 1: 9}, {0: 2, 1: 3, 2: 3}
    odd = odd_ones(pair_counts, {0, 1}, majority=False)
    pair = Disagreement("pair", frozenset({0, 1}), odd, other=other_side(pair_counts, odd, majority=False))
    behind = odd_ones(world_counts, {0}, majority=True)
    world = Disagreement("world", frozenset(range(4)), behind, behind=odd_behind(world_counts, behind))
    assert consequences([world, pair]) == {} and candidates([world, pair]) == ["pair", "world"]
    # the rank behind in the pair behind in the world too: nothing waits on it there, so the pair is the cause
    assert consequences([replace(world, odd=frozenset({0, 1})), pair]) == {"world": ["pair"]}
    # a pair whose own records show that it diverged is the cause
    assert consequences([world, replace(pair, shown=True)]) == {"world": ["pair"]}


def test_two_tp_groups_that_diverged_both_stay_candidates_and_the_world_does_not():
    world = _d("world", range(4), {1, 2})
    assert candidates([world, _d("tp0", [0, 1], {1}), _d("tp1", [2, 3], {2})]) == ["tp0", "tp1"]


def test_of_groups_side_by_side_the_one_that_holds_every_held_up_rank_is_the_cause():
    # Serving layout: TP groups (0,1) (2,3), DP groups (0,2) (1,3). The TP group's ranks 0 and 1 are each behind in
    # their DP group; only the TP group holds both.
    found = [_d("tp0", [0, 1], {0}), _d("dp0", [0, 2], {0}), _d("dp1", [1, 3], {1})]
    assert consequences(found) == {"dp0": ["tp0"], "dp1": ["tp0"]}


def test_a_two_rank_group_may_have_departed_on_either_side():
    # TP group (2,3): rank 2 launched 10, rank 3 9; DP group (1,3): rank 3 launched 3, rank 1 2. Read by the ranks
    # behind, the DP group holds both (1 and 3); but rank 2 may be the one that departed in the TP group (it ran
    # collectives of its own, and rank 3 ran on into the DP group), and then the TP group holds rank 3, the DP
    # group's other side. Neither is a consequence of the other.
    tp = Disagreement("tp", frozenset({2, 3}), frozenset({3}), other=frozenset({2}))
    dp = Disagreement("dp", frozenset({1, 3}), frozenset({1}), other=frozenset({3}))
    assert consequences([tp, dp]) == {} and candidates([tp, dp]) == ["tp", "dp"]
    # Where a majority of a TP group (2,3,4) singles out rank 4, only that group holds every odd rank, reading the
    # DP group's split by rank 3's side.
    assert consequences([_d("tp", [2, 3, 4], {4}), dp]) == {"dp": ["tp"]}
    assert other_side({0: 10, 1: 9}, frozenset({1}), majority=False) == {0}
    assert other_side({0: 9, 1: 10, 2: 10}, frozenset({0}), majority=True) == frozenset()


def test_groups_no_rule_separates_are_both_candidates():
    found = [_d("a", [0, 1], {0}), _d("b", [0, 2], {0})]
    assert consequences(found) == {} and candidates(found) == ["a", "b"]


def test_a_group_of_unknown_processes_may_hold_a_smaller_one():
    # RAS lists the world's ranks 0, 1, 3 only as "3 ranks have launched up to operation 3": the TP group's
    # process 637 may be one of them.
    world = _d("world", [("h", 636), *(("unknown", "world", r) for r in (0, 1, 3))], {("h", 636)}, unknown=3)
    tp = _d("tp", [("h", 636), ("h", 637)], {("h", 636)})
    assert consequences([world, tp]) == {"world": ["tp"]}
    assert not world.may_contain(_d("big", [("h", 1), ("h", 2), ("h", 3), ("h", 4)], set()), processes=4)


def test_a_group_that_does_not_span_the_job_holds_by_name_only_and_may_hold_every_held_up_rank():
    # RAS of TP groups of 4 inside 8 ranks, DP pairs across them: the TP group (4..7) where rank 6 launched one
    # fewer lists only process 6 ("3 ranks have launched up to operation 12"); each DP pair lists both of its
    # processes, the one of 4..7 behind. A DP pair is not inside the TP group by any name, while the TP group's
    # three unnamed members may be the other three held back: one divergence there explains every pair.
    unnamed = [("unknown", "tp1", r) for r in (0, 1, 3)]
    tp1 = _d("tp1", [("h", 6), *unnamed], {("h", 6)}, unknown=3)
    pairs = [_d(f"dp{r}", [("h", r), ("h", r + 4)], {("h", r + 4)}) for r in range(4)]
    assert "tp1" not in consequences([*pairs, tp1])
    assert candidates([*pairs, tp1])[0] == "tp1"


def test_a_group_spans_the_job_only_where_it_has_as_many_processes_as_the_job_summary_gives():
    # RAS of 8 processes: TP groups (0..3) (4..7), DP pairs (0,4) (3,7). Process 100 ran ahead in TP group 0 and
    # process 107 in TP group 1 (each reply names only its odd one, the three others as a count); both DP pairs
    # split. Only 4 processes are named, as many as a TP group has members, yet the job has 8: a TP group does
    # not span it, so its three unnamed members hold no DP pair (process 104 of pair (0,4) is in no reply of TP
    # group 0 by name). Read as spanning, each TP group would hold its pair and be read as its consequence.
    tp0 = _d("tp0", [("h", 100), *(("unknown", "tp0", r) for r in (1, 2, 3))], {("h", 100)}, unknown=3)
    tp1 = _d("tp1", [("h", 107), *(("unknown", "tp1", r) for r in (0, 1, 2))], {("h", 107)}, unknown=3)
    dp0 = Disagreement("dp0", frozenset({("h", 100), ("h", 104)}), frozenset({("h", 104)}),
                       other=frozenset({("h", 100)}))
    dp3 = Disagreement("dp3", frozenset({("h", 103), ("h", 107)}), frozenset({("h", 103)}),
                       other=frozenset({("h", 107)}))
    found = [tp0, tp1, dp0, dp3]
    assert set(consequences(found)) == {"tp0", "tp1"}  # what the named processes alone make of it
    assert consequences(found, processes=8) == {}
    assert set(candidates(found, processes=8)) == {"tp0", "tp1", "dp0", "dp3"}


def test_enqueued_counts_name_the_tp_group_not_the_world_it_stalls():
    marks = {
        "0": EnqueueMarks(launched={0: 3, 1: 2, 2: 3, 3: 3}, stops=["watchdog timeout (torch_rank0.log:2)"]),
        "1": EnqueueMarks(launched={0: 9, 1: 10}, stops=["watchdog timeout (torch_rank0.log:20)"]),
        "2": EnqueueMarks(launched={2: 12, 3: 12}, stops=["watchdog timeout (torch_rank2.log:20)"]),
    }
    root = marks_only_root(marks, Streams())
    assert (root.comm, root.outlier_ranks, root.seq_range) == ("1", [0], (1, 10))


WORLD, TP = "93baa577cadc15c4", "b5733b135e4f7f71"
REPLY = ras_status_reply(f"""#0-0 ({WORLD}) MISMATCH
  Communicator ranks have different AllReduce operation counts
  3 ranks have launched up to operation 3
  Rank 2 has launched up to operation 2 -- GPU 2 managed by process 636 on node 192.0.2.2

#1-0 ({TP}) MISMATCH
  Communicator ranks have different AllReduce operation counts
  Rank 0 has launched up to operation 8 -- GPU 2 managed by process 636 on node 192.0.2.2
  Rank 1 has launched up to operation 10 -- GPU 3 managed by process 637 on node 192.0.2.2
""", "  MISMATCH")


def test_ras_counts_name_the_tp_group_and_its_ranks_by_the_world_groups_processes(tmp_path):
    evidence = []
    for name in ("ras_status_q0.txt", "ras_status_q1.txt"):  # two replies with the same counts: stuck
        (tmp_path / name).write_text(REPLY)
        item = parse_file(InputFile(tmp_path / name, name))
        assert not item.has_errors, item.problems
        evidence.append(item)
    histories = ras_histories([(e.format.value, s) for e in evidence for s in e.ras])
    rank_map = ras_rank_map(Streams(), evidence, histories)
    # Process 636 is the world group's rank 2, so it is rank 2 in the TP group too; process 637 is of no rank on
    # record, and is left out rather than named by its comm rank 1.
    assert rank_map[("0x" + TP, 0)] == 2 and ("0x" + TP, 1) not in rank_map
    # Both disagree; the world group comes first by its hash, and is the consequence.
    assert [root.comm for root, _ in ras_only_roots(histories, rank_map, Streams(), stops={})] == ["0x" + WORLD,
                                                                                                  "0x" + TP]
    root = ras_only_root(histories, rank_map, Streams(), stops={})
    assert (root.comm, root.outlier_ranks, root.majority) == ("0x" + TP, [2], False)
    (unnamed,) = unnamed_ranks(root.comm, histories, rank_map)
    assert unnamed == RasRankUnnamed(f"0x{TP}", 1, ("192.0.2.2", 637), (("AllReduce", 10),))
    assert note_words(unnamed) == (f"comm 0x{TP}'s rank 1 (process 637 on 192.0.2.2) launched AllReduce 10; no "
                                   "record gives its global rank, so the ranks named leave it out")


def test_a_root_of_lengths_names_the_other_comm_of_its_ranks_that_nothing_compares():
    root = Root(comm="world", seq=1, seq_range=(1, 3), outlier_ranks=[1], reference_ranks=[0, 2, 3], kind=MISSING,
                size=1, pinned_by="signatures", reason=RangeReason.LOOKALIKE)
    # Rank 1's TP group: rank 0's log was cut short, so nothing compares the two there.
    streams = Streams(members={"world": [0, 1, 2, 3], "tp0": [0, 1], "tp1": [2, 3]},
                      cut={("tp0", 0): Location("nccl_rank0.log", 812)})
    (unseen,) = unseen_causes(root, frozenset({1}), streams)
    assert unseen == UnseenComm("tp0", (1,), "world")
    assert note_words(unseen) == ("rank 1 also runs in comm tp0, where no other rank's records are whole to compare "
                                  "with: a divergence there would show in comm world just so")
    assert unseen_causes(root, frozenset({1}), Streams(members=streams.members)) == []


def test_of_groups_that_may_hold_every_held_up_rank_the_smallest_comes_first():
    # RAS of TP groups of 4 in a world of 8: the world's reply names the four ahead and counts the four behind;
    # the TP group where process 443 ran one more names only it. Both may hold every rank singled out; one
    # divergence in the TP group explains the world's split, none in the world explains the TP group's.
    world = _d("world", [*(("h", p) for p in range(446, 450)), *(("unknown", "world", r) for r in range(4))],
               {("unknown", "world", r) for r in range(4)}, unknown=4)
    tp = _d("tp0", [("h", 443), *(("unknown", "tp0", r) for r in (0, 2, 3))], {("h", 443)}, unknown=3)
    assert candidates([world, tp])[0] == "tp0" and candidates([tp, world])[0] == "tp0"


def test_ranks_odd_here_and_in_another_group_are_candidates_beside_those_odd_here_alone():
    # World of 8, TP groups (0..3) (4..7). Ranks 2 and 7 each launched one more world collective; rank 7 also ran
    # ahead in its TP group. Rank 2's lead is explained by nothing else; rank 7's may follow from its TP group.
    world = _d("world", range(8), {2, 7})
    tp1 = _d("tp1", range(4, 8), {7})
    assert departing_elsewhere(world, [world, tp1]) == {7: ["tp1"]}
    # every odd rank odd elsewhere too: the rules weigh the groups as wholes (nesting: the world is the consequence)
    assert departing_elsewhere(_d("world", range(8), {7}), [tp1]) == {}
    # a group that holds this one inside it is left out: a world divergence does not split a TP group
    tp0 = _d("tp0", range(4), {1, 2})
    assert departing_elsewhere(tp0, [tp0, _d("world", range(8), {2})]) == {}


def _reply(world_lines: str, tp_lines: str) -> str:
    head = REPLY.split("Group     Comms")[0].replace("          4            1          4        4",
                                                       "          8            1          8        8")
    return (head + "Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors\n"
            "    #  in group  per comm  per node  per comm  in group\n"
            "    0         1         1         8         8         8   RUNNING  MISMATCH\n"
            "    1         2         1         4         4         8   RUNNING  MISMATCH\n\nErrors\n======\n\n"
            f"Warnings\n========\n\n#0-0 ({WORLD}) MISMATCH\n{world_lines}\n#1-0 ({TP}) MISMATCH\n{tp_lines}")


def test_ras_counts_name_the_rank_ahead_here_alone_and_the_one_ahead_elsewhere_too_as_a_candidate(tmp_path):
    """A world of 8 (processes 100..107) and a TP group of ranks 4..7: ranks 2 and 7 launched one more world
    collective, and rank 7 two more in the TP group (it skipped one there and ran on). Rank 2's lead has no other
    cause on record; rank 7's may follow from the TP group, or be an extra world collective of its own. Naming
    both as the world's outliers says more than the counts do."""
    world = ("  Communicator ranks have different AllReduce operation counts\n"
             "  6 ranks have launched up to operation 2\n"
             "  Rank 2 has launched up to operation 3 -- GPU 2 managed by process 102 on node 10.1.0.2\n"
             "  Rank 7 has launched up to operation 3 -- GPU 7 managed by process 107 on node 10.1.0.2\n")
    tp = ("  Communicator ranks have different AllReduce operation counts\n"
          "  3 ranks have launched up to operation 4\n"
          "  Rank 3 has launched up to operation 6 -- GPU 7 managed by process 107 on node 10.1.0.2\n")
    evidence = []
    for name in ("ras_status_q0.txt", "ras_status_q1.txt"):  # two replies with the same counts: stuck
        (tmp_path / name).write_text(_reply(world, tp))
        item = parse_file(InputFile(tmp_path / name, name))
        assert not item.has_errors, item.problems
        evidence.append(item)
    histories = ras_histories([(e.format.value, s) for e in evidence for s in e.ras])
    rank_map = ras_rank_map(Streams(), evidence, histories)
    root, notes = pick_counted(ras_only_roots(histories, rank_map, Streams(), stops={}), job_processes(histories))
    assert (root.comm, root.outlier_ranks, root.outlier_candidates) == ("0x" + WORLD, [2], {7: ("0x" + TP,)})
    assert root.majority and root.undecided_comms == ("0x" + TP,)
    assert UndecidedComm("0x" + TP, (7,), root.kind, "0x" + WORLD) in notes


def test_a_root_the_gate_journal_places_among_records_that_agree_names_the_deviants_unseen_comms_candidates():
    """Seed 129507: TP pairs (0,1) .. (6,7) inside DP groups (0,2,4,6) and (1,3,5,7); rank 6's gate passed alone, so
    it ran the drafter's all-reduces on its TP pair, where rank 7 left no evidence. In the DP group rank 6's records
    agree with its peers'; the journal alone places it there. Its TP pair, where no peer's records compare, may be
    where it ran what the others did not: a candidate beside the DP group."""
    from ncclforensics.align.choose import _pick_root
    from ncclforensics.align.answers import CommAnalysis
    from ncclforensics.align.answers import EXTRA

    told = Root(comm="dp0", seq=1, seq_range=(1, 3), outlier_ranks=[6], reference_ranks=[0, 2, 4], kind=EXTRA,
                size=1, pinned_by="signatures", reason=RangeReason.LOOKALIKE, shown=False, told=True)
    analyses = {
        "dp0": CommAnalysis("dp0", [0, 2, 4, 6], {r: 2 for r in (0, 2, 4, 6)}, {r: 2 for r in (0, 2, 4, 6)},
                            {r: 1 for r in (0, 2, 4, 6)}, root=told),
        "tp3": CommAnalysis("tp3", [6], {6: 20}, {6: 18}, {6: 1}),
        "tp0": CommAnalysis("tp0", [0, 1], {0: 18, 1: 18}, {0: 18, 1: 18}, {0: 1, 1: 1}),
    }
    streams = Streams(members={"dp0": [0, 2, 4, 6], "tp3": [6], "tp0": [0, 1]})
    root, notes = _pick_root(analyses, None, streams)
    assert root.comm == "dp0" and root.undecided_comms == ("tp3",)
    assert UnseenComm("tp3", (6,), "dp0") in notes
    # Where the records themselves part rank 6 from its peers (not the journal alone), they place it here.
    analyses["dp0"].root = replace(told, told=False)
    root, _ = _pick_root(analyses, None, streams)
    assert root.undecided_comms == ()



def test_a_root_on_lengths_names_its_odd_ranks_comms_that_nothing_compares_candidates():
    """Seed 357551: TP pairs (0,1) (2,3) in a world comm; rank 3 skipped its gate's drafter pass in TP pair (2,3),
    where rank 2 then stuck and launched one collective fewer in the world. Rank 3's log was cut before its TP
    comm: only rank 2 is on record there, so nothing compares that comm, and a rank stuck there leaves the world's
    lengths just so. It is a candidate beside the world."""
    from ncclforensics.align.choose import _pick_root
    from ncclforensics.align.answers import CommAnalysis
    from ncclforensics.align.answers import STOPPED

    stopped = Root(comm="world", seq=1, seq_range=(1, 2), outlier_ranks=[2], reference_ranks=[0, 1], kind=STOPPED,
                   size=1, pinned_by="signatures", reason=RangeReason.LOOKALIKE, shown=False)
    analyses = {
        "world": CommAnalysis("world", [0, 1, 2, 3], {0: 2, 1: 2, 2: 1, 3: 1}, {r: None for r in range(4)},
                              {r: 1 for r in range(4)}, root=stopped),
        "tp1": CommAnalysis("tp1", [2], {2: 4}, {2: None}, {2: 1}),
        "tp0": CommAnalysis("tp0", [0, 1], {0: 6, 1: 6}, {0: None, 1: None}, {0: 1, 1: 1}),
    }
    streams = Streams(members={"world": [0, 1, 2, 3], "tp1": [2], "tp0": [0, 1]},
                      cut={("world", 3): Location("nccl.vm.679.log", 19)})
    root, notes = _pick_root(analyses, None, streams)
    assert root.comm == "world" and root.undecided_comms == ("tp1",)
    assert UnseenComm("tp1", (2,), "world") in notes

def test_a_comm_whose_records_show_it_diverged_is_read_as_no_consequence_of_one_holding_a_side_of_each():
    """Seed 954867: TP pairs (0,1) and (2,3), DP pairs (0,2) and (1,3); rank 1 skipped a collective of its TP pair
    and rank 2 one of its own. Both TP pairs' call stacks part their ranks, while DP pair (0,2) differs in length
    only and holds one side of each: its one divergence could explain both pairs' counts, but not their records.
    The root is on a TP pair, the other beside it, and neither is called a consequence of the DP pair."""
    from ncclforensics.align.choose import _pick_root
    from ncclforensics.align.answers import CommAnalysis
    from ncclforensics.align.answers import EXTRA
    from ncclforensics.align.notes import ConsequenceComm

    def root(comm: str, ranks: list[int], shown: bool) -> Root:
        return Root(comm=comm, seq=1, seq_range=(1, 6), outlier_ranks=ranks, reference_ranks=ranks, kind=EXTRA,
                    size=1, pinned_by="call sites" if shown else "signatures", reason=RangeReason.LOOKALIKE,
                    shown=shown, majority=False)

    analyses = {
        "tp0": CommAnalysis("tp0", [0, 1], {0: 6, 1: 11}, {0: 5, 1: 5}, {0: 1, 1: 1}, root=root("tp0", [0, 1], True)),
        "tp1": CommAnalysis("tp1", [2, 3], {2: 11, 3: 6}, {2: 5, 3: 5}, {2: 1, 3: 1}, root=root("tp1", [2, 3], True)),
        "dp0": CommAnalysis("dp0", [0, 2], {0: 1, 2: 2}, {0: None, 2: None}, {0: 1, 2: 1},
                            root=root("dp0", [0, 2], False)),
    }
    streams = Streams(members={"tp0": [0, 1], "tp1": [2, 3], "dp0": [0, 2]})
    found, notes = _pick_root(analyses, None, streams)
    assert found.comm == "tp0" and found.undecided_comms == ("tp1",)
    assert not [note for note in notes if isinstance(note, ConsequenceComm)]


def test_enqueued_counts_past_records_that_end_alike_name_the_comm_a_root_on_lengths_is_a_consequence_of():
    # 345950: in the world comm 0 rank 3 launched 2 against the others' 3 (a root on lengths); in the two-rank
    # comm 2 both ranks' records end in seq 4, where their watchdogs time out, and PyTorch's counts give rank 2 5
    # against rank 3's 4. Rank 3 is stuck in comm 2: the root is there, not in comm 0.
    from ncclforensics.align.causes import enqueued_cause
    from ncclforensics.align.answers import CommAnalysis
    from ncclforensics.align.answers import STOPPED

    world = CommAnalysis(comm="0", ranks=[0, 1, 2, 3], launched={0: 3, 1: 3, 2: 3, 3: 2},
                         completed={0: 2, 1: 2, 2: 2, 3: 1}, first_seq=dict.fromkeys(range(4), 1))
    world.root = Root(comm="0", seq=2, seq_range=(2, 3), outlier_ranks=[3], reference_ranks=[0, 1, 2], kind=STOPPED,
                      size=1, pinned_by="PyTorch's enqueued counts", reason=RangeReason.LOOKALIKE, majority=True)
    pair = CommAnalysis(comm="2", ranks=[2, 3], launched={2: 4, 3: 4}, completed={2: 3, 3: 2},
                        first_seq={2: 1, 3: 1})
    analyses = {"0": world, "2": pair}
    stops = ["watchdog timeout (torch_rank0.log:2)"]
    marks = {"0": EnqueueMarks(launched={0: 3, 1: 3, 2: 3, 3: 2}, stops=stops),
             "2": EnqueueMarks(launched={2: 5, 3: 4}, stops=stops)}
    root, notes = enqueued_cause(world.root, analyses, Streams(), marks, [], {"0": stops})
    assert root.comm == "2" and not root.majority and 4 in range(root.seq_range[0], root.seq_range[1] + 1)
    assert any(getattr(note, "comm", None) == "0" for note in notes)
    # Counts alike in comm 2 explain nothing.
    marks["2"] = EnqueueMarks(launched={2: 4, 3: 4}, stops=stops)
    assert enqueued_cause(world.root, analyses, Streams(), marks, [], {"0": stops}) is None


def test_enqueued_counts_of_an_outer_comm_are_no_cause_where_its_odd_ranks_part_in_several_comms_inside():
    # 721158: TP groups 1 (ranks 0 to 3) and 2 (ranks 4 to 7) each part one rank by call sites (3 and 7: each ran
    # its drafter alone), and the world's counts give ranks 3 and 7 one collective fewer: each is held in its own TP
    # group. The world is their consequence, not the cause of either; weighed against comm 1 alone it would be the
    # one comm that holds both odd ranks.
    from ncclforensics.align.causes import enqueued_cause
    from ncclforensics.align.answers import CommAnalysis
    from ncclforensics.align.answers import STOPPED

    def tp(comm: str, ranks: list[int], odd: int) -> CommAnalysis:
        analysis = CommAnalysis(comm=comm, ranks=ranks, launched={r: 7 if r == odd else 8 for r in ranks},
                                completed={r: 6 if r == odd else 7 for r in ranks}, first_seq=dict.fromkeys(ranks, 7))
        analysis.root = Root(comm=comm, seq=1, seq_range=(1, 8), outlier_ranks=[odd],
                             reference_ranks=[r for r in ranks if r != odd], kind=STOPPED, size=1,
                             pinned_by="call sites", reason=RangeReason.BEFORE_RECORDS, majority=True)
        return analysis

    world_ranks = [0, 1, 2, 4, 5, 6]
    world = CommAnalysis(comm="0", ranks=world_ranks, launched=dict.fromkeys(world_ranks, 2),
                         completed=dict.fromkeys(world_ranks, 1), first_seq=dict.fromkeys(world_ranks, 2))
    analyses = {"0": world, "1": tp("1", [0, 1, 2, 3], 3), "2": tp("2", [4, 5, 6, 7], 7)}
    stops = ["watchdog timeout (torch_rank0.log:2)"]
    marks = {"0": EnqueueMarks(launched={r: 1 if r in (3, 7) else 2 for r in range(8)}, stops=stops),
             "1": EnqueueMarks(launched={0: 14, 1: 14, 2: 14, 3: 10}, stops=stops),
             "2": EnqueueMarks(launched={4: 14, 5: 14, 6: 14, 7: 10}, stops=stops)}
    assert enqueued_cause(analyses["1"].root, analyses, Streams(), marks, [], {"0": stops}) is None


def test_odd_ranks_ahead_of_ranks_nothing_holds_are_no_consequence_of_a_group_inside():
    # 390036: rank 6 launched 5 world collectives against the others' 4, and 18 in its TP group (ranks 4 to 7)
    # against 20. Ranks 0 to 3 share no disagreeing group: nothing holds them back, so rank 6 did not merely run on
    # past peers stuck in the TP group; it may have departed in the world first (an extra one it waits in there).
    world = Disagreement("world", frozenset(range(8)), frozenset({6}), ahead=True)
    tp = _d("tp", {4, 5, 6, 7}, {6})
    assert consequences([world, tp]) == {}
    assert candidates([world, tp]) == ["world", "tp"]
    # Ranks behind it that all wait in groups that disagree too may be held there: the nesting rule stands.
    assert consequences([replace(world, members=frozenset({4, 5, 6, 7, 8})), tp, _d("tp2", {8, 9}, {9})]) == {
        "world": ["tp"]}
    # Odd ranks behind are those a group inside holds: the nesting rule stands.
    assert consequences([replace(world, ahead=False), tp]) == {"world": ["tp"]}


def test_odd_ranks_ahead_are_read_alike_by_every_kind_of_evidence():
    # 390036's shape with the TP group on PyTorch's counts alone: rank 6 launched 5 world collectives against the
    # others' 4 (a root on lengths), and enqueued 18 in its TP group (ranks 4 to 7) against 20. Ranks 0 to 3 share
    # no disagreeing group: the world is no consequence of the TP group, whose counts do not take its place.
    from ncclforensics.align.causes import enqueued_cause
    from ncclforensics.align.consequences import ran_ahead
    from ncclforensics.align.answers import CommAnalysis
    from ncclforensics.align.answers import EXTRA
    from ncclforensics.align.marks_only import marks_only_roots

    world_counts = {r: 5 if r == 6 else 4 for r in range(8)}
    world = CommAnalysis(comm="0", ranks=list(range(8)), launched=world_counts, completed=dict.fromkeys(range(8), 4),
                         first_seq=dict.fromkeys(range(8), 1))
    world.root = Root(comm="0", seq=5, seq_range=(5, 5), outlier_ranks=[6], reference_ranks=[0, 1, 2, 3, 4, 5, 7],
                      kind=EXTRA, size=1, pinned_by="signatures", reason=None, majority=True)
    stops = ["watchdog timeout (torch_rank6.log:2)"]
    marks = {"tp": EnqueueMarks(launched={4: 20, 5: 20, 6: 18, 7: 20}, stops=stops)}
    assert enqueued_cause(world.root, {"0": world}, Streams(), marks, [], {"0": stops}) is None
    # Counts alone read the world's rank 6 as ahead too (as the streams do), and a group's ranks behind as not.
    marks["0"] = EnqueueMarks(launched=world_counts, stops=stops)
    found = {d.comm: d for _, d in marks_only_roots(marks, Streams())}
    assert found["0"].ahead and not found["tp"].ahead
    assert consequences(list(found.values())) == {}
    assert ran_ahead({0: 4, 1: 5}, frozenset({1})) and not ran_ahead({0: 5, 1: 5}, frozenset({0, 1}))


TP2 = "c41e07b2d95a3f60"


def test_ranks_ahead_in_the_world_may_have_left_out_collectives_of_tp_groups_whose_counts_differ_too(tmp_path):
    """750620: a world of 8 (processes 500..507) and TP groups {0..3} and {4..7}. Ranks 2, 4 and 6 each skipped a
    TP collective and issued their next world collective early: one world collective ahead, and 13 against 7 in
    their TP groups. A reply counts the world's other ranks without naming them, and the world holds every odd
    rank: by the counts' rules the TP groups are its consequences. Yet a rank ahead here may have left collectives
    of another of its groups out: each TP group whose counts differ too stays a candidate beside the world."""
    world = ("  Communicator ranks have different AllReduce operation counts\n"
             "  5 ranks have launched up to operation 1\n"
             "  Rank 2 has launched up to operation 2 -- GPU 2 managed by process 502 on node 10.1.0.2\n"
             "  Rank 4 has launched up to operation 2 -- GPU 4 managed by process 504 on node 10.1.0.2\n"
             "  Rank 6 has launched up to operation 2 -- GPU 6 managed by process 506 on node 10.1.0.2\n")
    tp = ("  Communicator ranks have different AllReduce operation counts\n"
          "  3 ranks have launched up to operation 7\n"
          "  Rank 2 has launched up to operation 13 -- GPU 2 managed by process 502 on node 10.1.0.2\n")
    tp2 = (f"\n#1-1 ({TP2}) MISMATCH\n"
           "  Communicator ranks have different AllReduce operation counts\n"
           "  2 ranks have launched up to operation 7\n"
           "  Rank 0 has launched up to operation 13 -- GPU 4 managed by process 504 on node 10.1.0.2\n"
           "  Rank 2 has launched up to operation 13 -- GPU 6 managed by process 506 on node 10.1.0.2\n")
    evidence = []
    for name in ("ras_status_q0.txt", "ras_status_q1.txt"):  # two replies with the same counts: stuck
        (tmp_path / name).write_text(_reply(world, tp + tp2))
        item = parse_file(InputFile(tmp_path / name, name))
        assert not item.has_errors, item.problems
        evidence.append(item)
    histories = ras_histories([(e.format.value, s) for e in evidence for s in e.ras])
    assert len(histories) == 3
    rank_map = ras_rank_map(Streams(), evidence, histories)
    root, notes = pick_counted(ras_only_roots(histories, rank_map, Streams(), stops={}), job_processes(histories))
    tps = {"0x" + TP, "0x" + TP2}
    assert tps <= {root.comm, *root.undecided_comms}
    assert not [n for n in notes if getattr(n, "comm", None) in tps and not isinstance(n, UndecidedComm)]


def test_odd_ranks_ahead_of_a_rank_whose_log_was_cut_ran_past_no_free_rank():
    """Seed 982294: TP groups 1 (ranks 0 to 3) and 2 (ranks 4 to 7) in the world; ranks 2 and 5 each skipped their
    drafter and ran ahead: 29 against 22 in their TP groups, 3 against 2 in the world. Rank 4's log was cut after
    its first world collective, before its TP group's init lines: it is on record in no other group, and its world
    count is unknown. Nothing says the odd ranks ran past it, so the world is a consequence of the TP groups inside
    (the nesting rule), not the one cause of both."""
    from ncclforensics.align.choose import _pick_root
    from ncclforensics.align.answers import CommAnalysis

    def analysis(comm: str, launched: dict[int, int], odd: list[int]) -> CommAnalysis:
        ranks = sorted(launched)
        root = Root(comm=comm, seq=1, seq_range=(1, max(launched.values())), outlier_ranks=odd,
                    reference_ranks=[r for r in ranks if r not in odd], kind=MISSING, size=1, pinned_by="signatures",
                    reason=RangeReason.LOOKALIKE, shown=False, majority=True)
        return CommAnalysis(comm, ranks, launched, dict.fromkeys(ranks), dict.fromkeys(ranks, 1), root=root)

    analyses = {"world": analysis("world", {0: 2, 1: 2, 2: 3, 3: 2, 4: 1, 5: 3, 6: 2, 7: 2}, [2, 5]),
                "tp1": analysis("tp1", {0: 22, 1: 22, 2: 29, 3: 22}, [2]),
                "tp2": analysis("tp2", {5: 29, 6: 22, 7: 22}, [5])}
    streams = Streams(members={"world": list(range(8)), "tp1": [0, 1, 2, 3], "tp2": [5, 6, 7]},
                      cut={("world", 4): Location("nccl.node000.21428.log", 18)})
    root, _ = _pick_root(analyses, None, streams)
    assert root.comm in ("tp1", "tp2") and set(root.undecided_comms) >= {"tp1", "tp2"} - {root.comm}
    # Where rank 4's world count is on record (behind the odd ranks), they ran past a rank nothing holds.
    streams = replace(streams, cut={})
    assert _pick_root(analyses, None, streams)[0].comm == "world"


def test_two_pairs_and_the_world_waiting_on_each_other_all_stay_candidates():
    """1078644: TP pairs {0, 1} and {2, 3} launched 10 and 9 each, the world 2, 3, 2, 3 (no majority; ranks 0 and
    2 behind). Ranks 1 and 3 may each have added a world collective and waited for it on the host, leaving their
    pair peers to wait in the pair; or ranks 0 and 2 each ran collectives of their pair the others did not (a
    drafter pass ranks 1 and 3 skipped alike), and ranks 1 and 3 wait in the world's next for them. The world alone
    holds every odd rank, yet the rule of one cause for all does not make the pairs its consequences: the nesting
    rule kept it only beside them. All three stay candidates, the pairs first."""
    world_counts = {0: 2, 1: 3, 2: 2, 3: 3}
    odd = odd_ones(world_counts, {0, 1, 2, 3}, majority=False)
    world = Disagreement("world", frozenset(range(4)), odd, other=other_side(world_counts, odd, majority=False),
                         behind=odd_behind(world_counts, odd))
    pairs = []
    for name, counts in (("tp0", {0: 10, 1: 9}), ("tp1", {2: 10, 3: 9})):
        behind = odd_ones(counts, set(counts), majority=False)
        pairs.append(Disagreement(name, frozenset(counts), behind, other=other_side(counts, behind, majority=False)))
    assert consequences([world, *pairs]) == {} and candidates([world, *pairs]) == ["tp0", "tp1", "world"]
    # one pair split, the other level (no disagreement): rank 2, behind in the world, waits on no pair of its own,
    # so the world is the cause
    assert consequences([world, pairs[0]]) == {"tp0": ["world"]}
