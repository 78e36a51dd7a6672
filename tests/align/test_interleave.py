"""The ranks' issue order across communicators: who launched an extra collective in a communicator whose counts
alone make it look like the majority, and who is held back elsewhere."""

from dataclasses import replace

import polars as pl

from ras_replies import ras_status_reply

from ncclforensics.align.diagnosis import diagnose
from ncclforensics.align.answers import IssueSides, RangeReason
from ncclforensics.align.interleave import ISSUE_ORDER, issue_order_root, issue_order_split
from ncclforensics.align.issue_order_ties import issue_order_tie, issue_order_tie_root
from ncclforensics.align.notes import DepartedLater, IssuedEarlyInTie
from ncclforensics.align.streams import build_streams
from ncclforensics.model import (CollectiveEvent, Evidence, FingerprintRow, Location, SourceFormat,
                                 collectives_to_frame)
from ncclforensics.model.event import ProcessIdentity
from ncclforensics.report import words
from ncclforensics.report import ambiguity
from ncclforensics.sources import formats

W, T1, T2 = "0xwor1d", "0x7e1", "0x7e2"
ONE, LAYER = ("AllReduce", 1), ("AllReduce", 4096)


def rank_log(rank, order, sizes=None):
    """An NCCL log of one rank: (comm, (op, count)) in the order it issued them (one line each); `sizes`: comm ->
    the nranks its lines give (a group whose ranks did not all leave a log is still that large)."""
    name = f"rank{rank}.log"
    seqs, events = {}, []
    for line, (comm, (op, count)) in enumerate(order, start=1):
        seqs[comm] = seqs.get(comm, 0) + 1
        events.append(CollectiveEvent(loc=Location(name, line), comm=comm, seq=seqs[comm], op=op, rank=rank,
                                      count=count, dtype="float32", redop="sum", root=0,
                                      comm_size=(sizes or {}).get(comm)))
    return Evidence(path=name, format=SourceFormat.NCCL_LOG, collectives=collectives_to_frame(events))


def step(tp, world=1, layers=3):
    return [(W, ONE)] * world + [(tp, LAYER)] * layers


def test_extra_world_collective_is_placed_by_issue_order_and_its_peer_is_held_back():
    # Rank 3 issues one more world collective in step 0; its TP peer (rank 2) waits in TP for it, while ranks 0
    # and 1 finish step 0 and launch step 1's, which pairs with rank 3's extra one: by counts, rank 2 is behind.
    logs = [rank_log(0, step(T1) + step(T1)), rank_log(1, step(T1) + step(T1)),
            rank_log(2, step(T2)), rank_log(3, step(T2, world=2))]
    d = diagnose(logs)
    assert d.root.comm == W and d.root.pinned_by == ISSUE_ORDER
    assert d.root.outlier_ranks == [3] and d.root.kind == "extra" and d.root.majority
    assert d.root.seq_range == (1, 2)  # its two world collectives in a row look alike: either is the extra one
    assert d.root.blocked_elsewhere == (2,) and d.root.issue_places == {0: 3, 1: 3, 3: 0}
    said = words.cause(d)
    assert "rank 3 after 0 collectives" in said and "held back there" in said


def test_a_rank_whose_records_part_where_the_issue_orders_agree_departed_too():
    # A step is three TP collectives, then two world ones (1 and 8 elements). Rank 3 issues an extra world one of 8
    # right after step 0; rank 2 skips step 1's world one of 1 element, so its third world collective (8) sits where
    # the others' third (1) does: the issue orders name rank 3, and rank 2's records part from the others' there.
    eight = ("AllReduce", 8)

    def step_end(tp, skip=False):
        return [(tp, LAYER)] * 3 + ([] if skip else [(W, ONE)]) + [(W, eight)]

    logs = [rank_log(0, step_end(T1) + step_end(T1)), rank_log(1, step_end(T1) + step_end(T1)),
            rank_log(2, step_end(T2) + step_end(T2, skip=True)),
            rank_log(3, step_end(T2) + [(W, eight)] + step_end(T2))]
    d = diagnose(logs)
    assert d.root.comm == W and d.root.pinned_by == ISSUE_ORDER
    assert d.root.outlier_ranks == [2, 3] and d.root.reference_ranks == [0, 1] and d.root.seq_range[1] == 3
    said = words.cause(d)
    assert "rank 3 issued one there early" in said and "Rank 2 issued its where the others did" in said


def test_a_rank_that_skipped_a_world_collective_stays_the_outlier():
    # Rank 2 skipped step 1's world collective: its records go on in TP past where the program has the next one,
    # so it left that one out (its first sits where the program's first does), rather than stopped after it.
    logs = [rank_log(0, step(T1) + step(T1)), rank_log(1, step(T1) + step(T1)),
            rank_log(2, step(T2) + step(T2, world=0)), rank_log(3, step(T2) + step(T2))]
    d = diagnose(logs)
    assert d.root.comm == W and d.root.outlier_ranks == [2]
    assert d.root.kind == "missing" and d.root.seq_range == (2, 2) and d.root.pinned_by == ISSUE_ORDER


def test_a_rank_that_went_on_elsewhere_past_its_last_collective_here_may_have_run_extra_ones_there():
    # Rank 0 ran its TP group's drafter pass (three extra TP collectives) and stopped before step 1's world one; its
    # TP peer, rank 1, issued TP 4..6 after world 2. Rank 0's logs are those of a rank that left out world 2 and went
    # on: the world root stays, and its TP comm is a candidate beside it.
    logs = [rank_log(0, step(T1) + [(T1, LAYER)] * 3), rank_log(1, step(T1) + step(T1)),
            rank_log(2, step(T2) + step(T2)), rank_log(3, step(T2) + step(T2))]
    d = diagnose(logs)
    assert d.root.comm == W and d.root.outlier_ranks == [0] and d.root.kind == "missing"
    assert d.root.early_in == {T1: (0,)} and T1 in d.root.undecided_comms
    assert f"Or rank 0 in comm {T1} ran extra collectives and stopped there" in words.cause(d)


def test_a_rank_that_left_out_a_lookalike_collective_and_went_on_elsewhere_did_not_stop():
    # Rank 4 left out one of step 1's three TP collectives (all alike) and issued step 2's world collective after
    # two of them, where the program has three: its TP records stop short, yet it went on past them.
    logs = [rank_log(r, step(T1) * 3) for r in (0, 1, 2)]
    logs += [rank_log(r, step(T2) + step(T2, layers=2 if r == 4 else 3) + [(W, ONE), (T2, LAYER)])
             for r in (3, 4, 5)]
    d = diagnose(logs)
    tp = d.comms[T2].root
    assert tp.outlier_ranks == [4] and tp.kind == "missing" and tp.seq_range == (4, 6)
    assert tp.pinned_by == ISSUE_ORDER


def test_a_collective_skipped_in_another_communicator_is_no_extra_one_here():
    # Rank 0 skipped a TP collective, so its next world collective comes after fewer TP ones: that is TP's
    # divergence (which shows there), not an extra world collective.
    logs = [rank_log(0, step(T1) + step(T1, layers=2)), rank_log(1, step(T1) + step(T1)),
            rank_log(2, step(T2) + step(T2)), rank_log(3, step(T2) + step(T2))]
    d = diagnose(logs)
    assert d.root is None or d.root.pinned_by != ISSUE_ORDER


RAS_REPLY = ras_status_reply("""#0-0 (baee1c551abaee7b) MISMATCH
  Communicator ranks have different AllReduce operation counts
  3 ranks have launched up to operation 2
  Rank 1 has launched up to operation 1 -- GPU 1 managed by process 21407 on node 10.1.0.2
""", "      OK")


def _ras_replies(tmp_path):
    """Two queries' replies of RAS_REPLY (the counts stay: a stuck job), parsed."""
    from ncclforensics.sources import InputFile, parse_file

    evidence = []
    for q in (0, 1):
        path = tmp_path / f"ras_status_q{q}.txt"
        path.write_text(RAS_REPLY)
        evidence.append(parse_file(InputFile(path, path.name)))
    return evidence


def test_counts_alone_say_the_rank_behind_may_be_held_back_elsewhere(tmp_path):
    # The same replies come of rank 1 skipping a world collective, and of its TP peer launching one more while the
    # other TP group's ranks ran ahead to the next step's: the answer names rank 1 and says it may be either.
    evidence = _ras_replies(tmp_path)
    d = diagnose(evidence)
    assert d.root.outlier_ranks == [1] and d.root.kind == "missing" and d.root.behind_may_be_held
    assert "held back in another communicator" in words.cause(d)
    assert "may be held back elsewhere" in ambiguity.ambiguity(d.root)


def test_gate_journals_say_who_launched_more_than_the_program_has_where_it_is(tmp_path):
    # The same replies, with journals: ranks 2 and 3 journaled step 1, so they got through step 0's read-back and
    # every collective they launched before it completed (each needs every rank: at most 1 world collective, the
    # fewest any rank launched); rank 0 never got past step 0 and launched 2.
    from ncclforensics.model import GateDecision
    evidence = _ras_replies(tmp_path)
    for rank, steps in ((0, 1), (1, 1), (2, 2), (3, 2)):
        name = f"gate{rank}.log"
        evidence.append(Evidence(path=name, format=SourceFormat.GATE_JOURNAL, gates=[
            GateDecision(loc=Location(name, s + 1), rank=rank, step=s, decision="skip") for s in range(steps)]))
    d = diagnose(evidence)
    assert d.root.outlier_ranks == [0] and d.root.kind == "extra" and not d.root.behind_may_be_held
    assert d.root.journal_steps == {0: 0, 1: 0, 2: 1, 3: 1}
    assert "Rank 0's gate journal ends at step 0" in words.cause(d)
    # Journals that all end at the same step say nothing of it.
    same = [e for e in evidence if e.format is not SourceFormat.GATE_JOURNAL] + [
        Evidence(path=f"gate{r}.log", format=SourceFormat.GATE_JOURNAL,
                 gates=[GateDecision(loc=Location(f"gate{r}.log", 1), rank=r, step=0, decision="skip")])
        for r in range(4)]
    assert diagnose(same).root.outlier_ranks == [1]


def test_a_log_cut_short_after_the_early_collective_still_places_it():
    # As above, with rank 3's log cut short one TP collective in: what it issued before its cut sits where it did
    # (its two world collectives before any TP one), though how far it got is unknown.
    from dataclasses import replace
    logs = [rank_log(0, step(T1) + step(T1)), rank_log(1, step(T1) + step(T1)),
            rank_log(2, step(T2)), rank_log(3, [(W, ONE), (W, ONE), (T2, LAYER)])]
    logs[3] = replace(logs[3], cut=Location("rank3.log", 3))
    d = diagnose(logs)
    assert d.root.comm == W and d.root.pinned_by == ISSUE_ORDER
    assert d.root.outlier_ranks == [3] and d.root.kind == "extra" and d.root.blocked_elsewhere == (2,)


def test_a_tp_group_that_runs_its_own_program_names_none_of_its_ranks():
    # Three TP groups of a data-parallel job: T2 and T3 run a drafter pass (one more TP collective) in step 0, T1
    # does not, and rank 5 stops after step 0. T1's ranks issue world seq 2 after fewer TP collectives than the
    # others, both of them alike: their group's own program, no early world collective.
    t3 = "0x7e3"
    logs = [rank_log(0, step(T1) + step(T1)), rank_log(1, step(T1) + step(T1)),
            rank_log(2, step(T2, layers=4) + step(T2)), rank_log(3, step(T2, layers=4) + step(T2)),
            rank_log(4, step(t3, layers=4) + step(t3)), rank_log(5, step(t3, layers=4))]
    d = diagnose(logs)
    assert d.root is None or d.root.pinned_by != ISSUE_ORDER
    assert d.root is None or not {0, 1} & set(d.root.outlier_ranks)


def test_a_rank_cut_before_the_split_may_side_with_the_one_placed_early():
    # T1 runs a drafter pass in step 0 and T2 does not; rank 3's log is cut one TP collective in.
    # Placed alone, rank 2 issues world seq 2 after fewer TP collectives than ranks 0 and 1, but rank 3, its TP
    # peer, may have issued it where rank 2 did: two against two, no majority.
    from dataclasses import replace
    logs = [rank_log(0, step(T1, layers=4) + step(T1)), rank_log(1, step(T1, layers=4) + step(T1)),
            rank_log(2, step(T2) + step(T2)), rank_log(3, [(W, ONE), (T2, LAYER)])]
    logs[3] = replace(logs[3], cut=Location("rank3.log", 2))
    d = diagnose(logs)
    assert d.root is None or d.root.pinned_by != ISSUE_ORDER


def test_a_rank_that_left_out_a_collective_of_its_other_communicator_issued_no_extra_one_here():
    # A step is one collective of a data-parallel pair (r, r + 4), then three alike of the rank's TP group. Rank 3
    # left out step 0's data-parallel one: it issues TP seq 1 after no collective of its pair, where the program
    # has one, as a rank that issued an extra TP collective early would; but it issues seq 2 after none too, where
    # an extra seq 1 would put it after one (the program's seq 1): each of its TP collectives sits one collective
    # of its pair short of the program's, which is the pair's divergence, not one here. Rank 2 left out step 1's
    # last TP collective: that is the TP group's divergence (its records end there, and the TP collectives before it
    # look alike: it may as well have left out an earlier one, or run some of its own, and then stopped).
    def dp_step(rank):
        return [(f"0xd{rank % 4}", ONE)] + [(T1 if rank < 4 else T2, LAYER)] * 3

    logs = [rank_log(r, dp_step(r) * 2) for r in range(8) if r not in (2, 3)]
    logs += [rank_log(2, dp_step(2) + dp_step(2)[:-1]), rank_log(3, dp_step(3)[1:] + dp_step(3))]
    d = diagnose(logs)
    tp = d.comms[T1].root
    assert tp.pinned_by != ISSUE_ORDER and tp.outlier_ranks == [2] and tp.seq_range[0] < tp.seq_range[1] == 6
    assert d.comms["0xd3"].root.outlier_ranks == [3, 7]  # the pair's two ranks: no majority of two


def test_a_reference_whose_records_part_with_no_majority_leaves_the_issue_orders_no_root():
    # A step is two world collectives (1 and 8 elements), then three of the rank's TP group. Rank 1 issued an
    # extra world one of 8 inside step 0 (after two TP ones, where ranks 2 and 3 issue seq 3 after three); rank 0
    # is held back; rank 3 issued step 1's two world ones the other way round. Ranks 2 and 3, the reference, part
    # at seq 3 (1 against 8 elements): one of them departed too, and with no majority of the two, not which.
    eight = ("AllReduce", 8)

    def step_of(tp, world=((W, ONE), (W, eight))):
        return list(world) + [(tp, LAYER)] * 3

    logs = [rank_log(0, step_of(T1)), rank_log(1, step_of(T1)[:4] + [(W, eight)] + step_of(T1)[4:]),
            rank_log(2, step_of(T2) * 2), rank_log(3, step_of(T2) + step_of(T2, world=((W, eight), (W, ONE))))]
    streams = build_streams(logs)
    assert issue_order_split(streams, W).outliers == [1]  # where the issue orders part the ranks
    assert issue_order_root(streams, W) is None


def test_an_early_block_that_fits_a_collective_left_out_elsewhere_too_is_no_mere_stop():
    # A step is one world collective, then three alike of the rank's TP group. Rank 1 ran a drafter block of two
    # TP collectives at the end of step 2 and stopped there; the others went on into step 3. Its TP records end
    # one short, which alone reads as a stop after its last; but it issued TP seqs 10 and 11 after two world
    # collectives where the others issue them after three. An extra block here puts them so, and so does a world
    # collective left out before them (its records end before the block would show its size, and it launched
    # fewer world ones): the root is no stop, but extra collectives from the first of the alike run on, with the
    # world comm a candidate beside it.
    logs = [rank_log(r, step(T1) * 4 if r != 1 else step(T1) * 3 + [(T1, LAYER)] * 2) for r in range(4)]
    logs += [rank_log(r, step(T2) * 4) for r in range(4, 8)]
    d = diagnose(logs)
    tp = d.comms[T1].root
    assert tp.pinned_by == ISSUE_ORDER and tp.kind == "extra" and tp.outlier_ranks == [1]
    assert tp.seq_range == (7, 10) and tp.size == 0 and tp.left_out_in == (W,)
    assert d.root.comm == T1 and W in d.root.undecided_comms
    assert f"left out collectives of comm {W}" in words.cause(d)


def test_a_stop_whose_issue_orders_leave_no_majority_names_the_peer_that_may_hold_it_back():
    # Rank 0 issues one more world collective right after its first TP one; its TP peer (rank 1) waits in TP behind
    # it and stops launching; rank 3 launches step 1's, which pairs with rank 0's extra one; rank 2's log was cut
    # after its first. The issue orders part ranks 0 and 3 with no majority, and the world records differ in length
    # only: rank 1 stopped, or rank 0 launched one more and holds it back; the root names rank 0 as well.
    logs = [rank_log(0, [(W, ONE), (T1, LAYER), (W, ONE), (T1, LAYER), (T1, LAYER)]), rank_log(1, step(T1)),
            rank_log(2, [(W, ONE)]), rank_log(3, step(T2) + step(T2))]
    logs[2] = replace(logs[2], cut=Location("rank2.log", 1))
    d = diagnose(logs)
    assert d.root.comm == W and d.root.outlier_ranks == [1] and d.root.kind == "stopped"
    assert d.root.behind_may_be_held and d.root.may_be_held_back_by == (0,)
    assert "held back in another communicator by a rank ahead here that launched one more (rank 0, as far as" in words.cause(d)
    assert "may be held back elsewhere" in ambiguity.ambiguity(d.root)


def test_ranks_behind_that_records_show_missing_one_are_held_back_where_the_issue_orders_say_so():
    # Rank 3 issues two world collectives in a row in step 1; its TP peer (rank 2) waits in TP behind them. Other
    # records (per-collective results misaligned on the ranks that went on, say) that show rank 2 missing the
    # world collective at seq 3 read the same as the extra one: the issue orders name rank 3, rank 2 held back.
    from ncclforensics.align.reanalysis import held_back_by_issue_order
    from ncclforensics.align.answers import Root
    logs = [rank_log(0, step(T1) * 3), rank_log(1, step(T1) * 3), rank_log(2, step(T2) * 2),
            rank_log(3, step(T2) + [(W, ONE), (W, ONE)] + [(T2, LAYER)] * 3)]
    streams = build_streams(logs)

    def shown_missing(outliers, seq):
        return Root(comm=W, seq=seq, seq_range=(seq, seq), outlier_ranks=outliers,
                    reference_ranks=[r for r in range(4) if r not in outliers], kind="missing", size=1,
                    pinned_by="fingerprints", reason=None, shown=True)

    assert held_back_by_issue_order(streams, W, shown_missing([2], 3))
    # (not where the ranks behind are others than those the issue orders hold back, nor a root before the split)
    assert not held_back_by_issue_order(streams, W, shown_missing([1], 3))
    assert not held_back_by_issue_order(streams, W, shown_missing([2], 1))


def test_a_rank_that_issued_one_early_departed_beside_one_that_left_one_out():
    # Rank 1 left out step 1's world collective and went on in TP; rank 5 issued a world collective before its TP
    # layers, where the program has them first, and then waited (it launched as many as most). Both departed, and
    # nothing orders the two: the root names both, over every seq where either may have departed.
    T3 = "0x7e3"
    logs = [rank_log(r, step(tp) + [(W, ONE)] + [(tp, LAYER)] * 3) for r, tp in ((0, T1), (2, T2), (3, T2))]
    logs += [rank_log(4, step(T3) + [(W, ONE)])]
    logs += [rank_log(1, step(T1) + [(T1, LAYER)] * 3), rank_log(5, step(T3, world=2))]
    d = diagnose(logs)
    assert d.root.comm == W and d.root.pinned_by == ISSUE_ORDER
    assert d.root.outlier_ranks == [1, 5] and d.root.reference_ranks == [0, 2, 3, 4]
    assert d.root.seq_range == (1, 2)  # (rank 5's two world collectives in a row look alike: either is its own)


def _with_init(log, rank, comms):
    """The log with an INIT line of each of `comms` (the process initialized them, whatever it then issued)."""
    log.identities = [ProcessIdentity(loc=Location(log.path, 0), rank=rank, comm=c) for c in comms]
    return log


def test_a_rank_that_issued_nothing_here_yet_went_on_elsewhere_left_one_out_beside_an_extra_one():
    # Rank 0 issued one more world collective in step 0 (lookalikes: its records place it at seq 1..2); rank 1, its
    # TP peer, left out the world's first and went on in TP, where the others waited for it. Rank 1's log holds no
    # world collective at all: it went on past where the program issues seq 1, so it left seq 1 out, and it may
    # have departed first: both are named, at seq 1.
    logs = [_with_init(rank_log(0, step(T1, world=2) + step(T1, world=0)), 0, (W, T1)),
            _with_init(rank_log(1, step(T1, world=0) + step(T1, world=0)), 1, (W, T1)),
            _with_init(rank_log(2, step(T2) + step(T2, world=0)), 2, (W, T2)),
            _with_init(rank_log(3, step(T2) + step(T2, world=0)), 3, (W, T2))]
    d = diagnose(logs)
    world = d.comms[W].root
    assert world.outlier_ranks == [0, 1] and world.seq_range[0] == 1 and world.majority


def test_a_rank_that_left_one_out_before_a_peer_issued_an_extra_one_is_the_root_alone():
    # A step is two world collectives (1 and 8 elements), then three TP ones. In step 1 rank 0 left out the world's
    # 8 (seq 4) and went on in TP; rank 1 issued one more world 1 after its first TP layer (seq 5). The records
    # place rank 1's extra one at seq 5, the issue orders place rank 0's skip at seq 4: the first departure is
    # rank 0's, and rank 1, which departed after it, is not named (nor taken for the program).
    eight = ("AllReduce", 8)

    def two_world(tp, world=(ONE, eight), layers=3):
        return [(W, w) for w in world] + [(tp, LAYER)] * layers

    logs = [rank_log(0, two_world(T1) + two_world(T1, world=(ONE,))),
            rank_log(1, two_world(T1) + two_world(T1, layers=1) + [(W, ONE)] + [(T1, LAYER)] * 2),
            rank_log(2, two_world(T2) * 2), rank_log(3, two_world(T2) * 2)]
    d = diagnose(logs)
    assert d.root.comm == W and d.root.outlier_ranks == [0] and d.root.reference_ranks == [2, 3]
    assert d.root.seq_range[0] <= 4 <= d.root.seq_range[1]
    # Rank 1 departed still, later: a note says so (it is in neither the outliers nor the reference).
    later = [note for note in d.notes if isinstance(note, DepartedLater)]
    assert [(note.ranks, note.seq_range, note.comm) for note in later] == [((1,), (1, 5), W)]
    assert any(c.startswith(f"rank 1 departed too in comm {W}") for c in words.caveats(d))


def test_a_drafter_block_left_out_elsewhere_reads_like_an_extra_one_here_when_nothing_later_tells():
    # A step is one world collective, then six alike of the rank's TP group (three layers, three of a drafter).
    # Rank 3 left its drafter's three out of step 0 and issued step 1's world collective after three TP ones, where
    # ranks 0 and 1 issue it after six; its TP peer, rank 2, waits in TP and never issues it. Rank 3's records hold
    # no later world collective that an extra one would move on, and end where an extra one would leave them: one
    # extra world collective and three TP ones left out read the same, so the TP comm is a candidate beside it.
    logs = [rank_log(r, step(T1, layers=6) + step(T1)) for r in (0, 1)]
    logs += [rank_log(2, step(T2, layers=6)), rank_log(3, step(T2) + step(T2))]
    d = diagnose(logs)
    assert d.root.comm == W and d.root.pinned_by == ISSUE_ORDER and d.root.outlier_ranks == [3]
    assert d.root.left_out_in == (T2,) and T2 in d.root.undecided_comms
    assert f"Or it left out collectives of comm {T2} before it" in words.cause(d)


def test_a_rank_that_went_on_past_the_program_s_next_collective_here_issued_no_extra_one():
    # A step is one world collective, then four alike of the rank's TP group. Rank 3 left out one TP collective of
    # step 0, issued step 1's world collective after three TP ones (the others after four), then four more TP ones
    # and no world one; rank 0, its TP peer, waits in TP. An extra world collective would have rank 3 issue the
    # program's second after four TP ones, which it went on past without issuing it: it left the TP one out, and
    # the root is there, somewhere in TP seqs 1..4, not an extra world collective.
    logs = [rank_log(0, step(T1, layers=4)), rank_log(3, step(T1, layers=3) + step(T1, layers=4))]
    logs += [rank_log(r, step(T2, layers=4) * 2) for r in (6, 7)]  # (TP groups of two on record, alike)
    streams = build_streams(logs)
    split = issue_order_split(streams, W)
    assert split.outliers == [3] and split.left_out_only and split.left_out_in == (T1,)
    assert issue_order_root(streams, W) is None
    d = diagnose(logs)
    assert d.root.comm == T1 and d.root.outlier_ranks == [3] and d.root.kind == "missing"
    assert d.root.seq_range == (1, 4) and d.root.pinned_by == ISSUE_ORDER
    assert d.root.left_out_before == (W, 2) and d.root.blocked_elsewhere == (0,)
    assert f"it left out collectives of comm {T1} before it" in words.cause(d)


def test_a_tie_of_call_stacks_on_two_ranks_goes_to_the_side_the_issue_orders_give_every_rank():
    # As above (rank 1's drafter block of two TP collectives at the end of step 2), with call stacks on ranks 1
    # and 3 alone: they part at TP seq 10 (the drafter's against step 3's first layer), one against one, and ranks
    # 0 and 2 have none. The issue orders side ranks 0, 2 and 3 (TP seq 10 after three world collectives, rank
    # 1's after two): rank 1 departed, against three, not "no majority".
    def with_sites(log, sites):
        """The log's TP rows with these call sites, in order (its world rows with one of their own)."""
        tp = log.collectives.get_column("comm") == T1
        rows = log.collectives.with_columns(callsite=pl.Series([
            sites[n] if here else "model.py:9" for n, here in zip(tp.cum_sum() - 1, tp)], dtype=pl.String))
        return replace(log, collectives=rows)

    layers = ["model.py:1", "model.py:2", "model.py:3"]
    logs = [rank_log(r, step(T1) * 4 if r != 1 else step(T1) * 3 + [(T1, LAYER)] * 2) for r in range(4)]
    logs[1] = with_sites(logs[1], layers * 3 + ["drafter.py:5"] * 2)
    logs[3] = with_sites(logs[3], layers * 4)
    logs += [rank_log(r, step(T2) * 4) for r in range(4, 8)]
    d = diagnose(logs)
    tp = d.comms[T1].root
    assert tp.outlier_ranks == [1] and tp.reference_ranks == [0, 2, 3] and tp.majority
    assert tp.pinned_by == ISSUE_ORDER and tp.kind == "extra" and tp.seq_range == (7, 10)


def test_a_tie_of_call_stacks_on_two_ranks_goes_to_the_side_whose_issue_places_the_others_share():
    # 1128224: a step runs a drafter pass of three TP all-reduces, the world's all-reduce, then six layers' TP ones,
    # all alike in signature. Rank 0 left the pass out; only ranks 0 and 2 kept call stacks, which part at TP seq 1
    # (a layer's against the drafter's), one against one, and ranks 1 and 3's records pair with either. Rank 0's
    # records end where it may be held in the world (nothing says its world collective completed), so their
    # lengths side no one. But rank 0 issued its TP seq 1 after the world's collective, and ranks 1, 2 and 3 theirs
    # before it: ranks 1 and 3 ran rank 2's program, and rank 0 left the pass out, against three, not "no majority".
    def with_sites(log, sites):
        """The log's TP rows with these call sites, in order (its world rows with one of their own)."""
        tp = log.collectives.get_column("comm") == T1
        rows = log.collectives.with_columns(callsite=pl.Series([
            sites[n] if here else "model.py:9" for n, here in zip(tp.cum_sum() - 1, tp)], dtype=pl.String))
        return replace(log, collectives=rows)

    def logs_of(program):
        """Ranks 0..3 issuing `program` ("d": a drafter's TP all-reduce, "w": the world's, "l": a layer's), rank 0
        without the drafter's; call sites on ranks 0 and 2 alone."""
        sites = {"d": iter(["drafter.py:5"] * 3), "l": iter([f"model.py:{n}" for n in range(1, 7)])}
        named = [(call, next(sites[call])) for call in program if call != "w"]
        logs = [rank_log(r, [(W, ONE) if call == "w" else (T1, LAYER) for call in program if r or call != "d"])
                for r in range(4)]
        logs[0] = with_sites(logs[0], [site for call, site in named if call == "l"])
        logs[2] = with_sites(logs[2], [site for _, site in named])
        return logs

    d = diagnose(logs_of("ddd" + "w" + "l" * 6))
    tp = d.comms[T1].root
    assert tp.outlier_ranks == [0] and tp.reference_ranks == [1, 2, 3] and tp.majority
    assert tp.kind == "missing" and tp.seq_range == (1, 1) and ISSUE_ORDER in tp.narrowed_by
    # Where the world's collective comes after every TP one, each rank issued them all after none: the places side
    # no one, and the tie stands.
    d = diagnose(logs_of("ddd" + "l" * 6 + "w"))
    tp = d.comms[T1].root
    assert not tp.majority and tp.outlier_ranks == [0, 1, 2, 3]


def test_a_reference_rank_that_issued_one_early_departed_beside_the_outlier_its_records_show():
    # A step is two world collectives (1, then 8 elements) and two TP ones. Rank 0 left out step 2's world one of 1
    # element (its records show it: an 8 where the others have a 1). Rank 3's world records look like a prefix of
    # the others', yet its fifth sits in step 1, before its TP pair, where ranks 0 and 1 issue theirs after it: it
    # ran one more world collective there, and may have departed first. Without rank 3, rank 1 alone records seq 5
    # against rank 0 (rank 1 may have run one more 1-element one there as rank 3 did, later): every rank is named.
    eight = ("AllReduce", 8)

    def step2(tp, first=True, extra=False):
        return ([(W, ONE)] if first else []) + [(W, eight)] + ([(W, ONE)] if extra else []) + [(tp, LAYER)] * 2

    logs = [rank_log(0, step2(T1) + step2(T1) + step2(T1, first=False)),
            rank_log(1, step2(T1) + step2(T1) + step2(T1)),
            rank_log(2, step2(T2) + step2(T2)),
            rank_log(3, step2(T2) + step2(T2, extra=True))]
    d = diagnose(logs)
    assert d.root.comm == W and d.root.outlier_ranks == [0, 1, 2, 3]
    assert not d.root.majority and d.root.seq_range[0] <= 5 <= d.root.seq_range[1]


def test_two_departures_whose_majorities_each_count_the_other_s_outliers_name_no_sides():
    # A step is a world collective of 1 element, then three TP ones. Ranks 0 and 3 each ran one more world one (8
    # elements): rank 0 after its first TP collective, rank 3 after its third. Rank 2 went on to step 1, whose world
    # one (1 element) is its seq 2; rank 1 waits in TP for rank 0. At world seq 2 the records put rank 2 apart from
    # ranks 0 and 3, and the issue orders put rank 0 apart from ranks 2 and 3: each majority counts a rank the
    # other names, and without it rank 3 alone stands against rank 2. Nothing says which ranks departed.
    eight = ("AllReduce", 8)
    logs = [rank_log(0, [(W, ONE), (T1, LAYER), (W, eight), (T1, LAYER), (T1, LAYER)]),
            rank_log(1, step(T1)),
            rank_log(2, step(T2) + step(T2)),
            rank_log(3, step(T2) + [(W, eight)])]
    d = diagnose(logs)
    assert d.root.comm == W and not d.root.majority
    assert d.root.outlier_ranks == [0, 1, 2, 3] and d.root.seq_range[0] <= 2 <= d.root.seq_range[1]


def test_a_rank_that_stopped_right_after_a_collective_the_program_does_not_wait_on_departed_too():
    # Rank 5 left out step 1's world collective and went on in TP, so world seq 2 never completed. Rank 1 issued
    # its second world collective where the others issue step 1's, and then nothing; its TP peers issued that seq
    # there too and went on in TP, though it never completed: the program does not wait on it, so rank 1's was
    # another (one more world collective of step 0, which it waits on). Its records read as the others', yet it
    # departed: the root names it beside rank 5, over the seqs where either may have.
    T3 = "0x7e3"
    tps = {r: tp for tp, ranks in ((T1, (0, 1, 2)), (T2, (3, 4, 5)), (T3, (6, 7, 8))) for r in ranks}
    full = [0, 2, 3, 4, 6, 7, 8]
    logs = [rank_log(r, step(tps[r], layers=2) * 2) for r in full]
    logs += [rank_log(1, step(T1, layers=2) + [(W, ONE)]),
             rank_log(5, step(T2, layers=2) + step(T2, world=0, layers=2))]
    d = diagnose(logs)
    world = d.comms[W].root
    assert world.outlier_ranks == [1, 5] and world.reference_ranks == full and world.majority
    assert world.seq_range[0] <= 2 <= world.seq_range[1] and "extra" in world.kinds


def test_a_rank_that_stopped_right_after_its_seq_placed_alike_beside_an_early_one_departed_too():
    # Two TP groups of four. Rank 0 issues one more world collective in step 0 after two of its TP ones (early:
    # ranks 1, 2 and 3 wait in T1 behind it and never launch world seq 2). Rank 5 issues one more at the end of step
    # 0, where its TP peers issue step 1's, and then nothing: they went on in T2 past world seq 2, which never
    # completed, so the program does not wait on it; rank 5 waits on its own. The issue orders name rank 0 early,
    # and rank 5 beside it, though it issued its own where the others did.
    early = [(W, ONE), (T1, LAYER), (T1, LAYER), (W, ONE), (T1, LAYER)]
    logs = [rank_log(0, early)] + [rank_log(r, step(T1)) for r in (1, 2, 3)]
    logs += [rank_log(r, step(T2) * 2) for r in (4, 6, 7)] + [rank_log(5, step(T2) + [(W, ONE)])]
    d = diagnose(logs)
    assert d.root.comm == W and d.root.pinned_by == ISSUE_ORDER and d.root.majority
    assert d.root.outlier_ranks == [0, 5] and d.root.seq_range == (2, 2) and d.root.stopped_past == (5,)
    assert d.root.blocked_elsewhere == (1, 2, 3) and 5 not in d.root.reference_ranks
    assert "Rank 5 issued its where the others did, and then nothing more in any communicator" in words.cause(d)


def test_a_rank_that_stopped_right_after_a_collective_the_program_does_not_wait_on_names_the_stop_of_no_majority():
    # Two TP groups of four; a step is one world collective and two TP ones. Rank 2 issues step 1's two TP ones and
    # then nothing (it waits there); the logs of ranks 0, 1 and 3 are cut after world seq 1. Ranks 4 to 7 issue
    # world seq 3 after four TP collectives, where the program does; ranks 4, 5 and 6 go on to step 2's TP ones,
    # though seq 3 never completed (rank 2 never launched it), and rank 7 issues nothing more: the program does not
    # wait on seq 3, so rank 7's was another collective, one it waits on. By counts alone rank 2 stopped, with no
    # majority (ranks 0, 1 and 3 may side with it); its records end where the program issues seq 3, so it is held
    # back elsewhere, and rank 7 is named.
    cut = [(W, ONE), (T1, LAYER)]
    logs = [rank_log(r, cut) for r in (0, 1, 3)] + [rank_log(2, step(T1, layers=2) * 2)]
    logs = [replace(log, cut=Location(log.path, 2)) if r != 2 else log for r, log in zip((0, 1, 3, 2), logs)]
    logs += [rank_log(r, step(T2, layers=2) * 3) for r in (4, 5, 6)]
    logs += [rank_log(7, step(T2, layers=2) * 2 + [(W, ONE)])]
    d = diagnose(logs)
    assert d.root.comm == W and d.root.pinned_by == ISSUE_ORDER and d.root.kind == "extra"
    assert d.root.outlier_ranks == [7] and d.root.reference_ranks == [4, 5, 6] and d.root.seq_range == (3, 3)
    assert d.root.blocked_elsewhere == (2,) and 2 in d.root.unplaced_ranks and d.root.stopped_past == (7,)
    said = words.cause(d)
    assert "Rank 7 issued its seq 3 where the others did, and then nothing more in any communicator" in said
    assert "Rank 2 launched fewer here" in said and "not short of one here" in said


def rank_dump(rank, order, done):
    """A Flight Recorder dump of one rank: (comm, (op, count)) in the order it issued them; the first `done`
    completed, the next one started and never completed, the rest launched behind it."""
    name = f"fr_rank{rank}"
    seqs, events = {}, []
    for n, (comm, (op, count)) in enumerate(order):
        seqs[comm] = seqs.get(comm, 0) + 1
        state = "completed" if n < done else "started" if n == done else "launched"
        events.append(CollectiveEvent(loc=Location(name, None, record=n), comm=comm, seq=seqs[comm], op=op, rank=rank,
                                      count=count, dtype="float32", state=state))
    return Evidence(path=name, format=SourceFormat.FLIGHT_RECORDER, collectives=collectives_to_frame(events),
                    facts=formats()[SourceFormat.FLIGHT_RECORDER])


def _early_beside_left_out(peer_done):
    # Seed 1221596: rank 0 issues one more world collective after its first TP one, where the program has three;
    # rank 2 left out step 1's world collective and went on in TP. Rank 1, rank 0's TP peer, dumped its records:
    # it completed the first `peer_done` of them; rank 5's dump shows world seq 2 started, never completed.
    T3 = "0x7e3"
    logs = [rank_log(0, [(W, ONE), (T1, LAYER), (W, ONE), (T1, LAYER), (T1, LAYER)]), rank_dump(1, step(T1), peer_done),
            rank_log(2, step(T2) + step(T2, world=0)), rank_log(3, step(T2) * 2), rank_log(4, step(T3) * 2),
            rank_dump(5, step(T3) * 2, 4)]
    return diagnose(logs).comms[W].root


def test_a_rank_that_waits_on_a_collective_its_peer_enqueued_behind_an_early_one_is_held_back_not_stopped():
    # Rank 1 completed TP seq 1 and waits in TP seq 2, which rank 0 enqueued behind its early world collective: it
    # launched no world seq 2 because rank 0 holds it, not because it departed. The root names ranks 0 and 2.
    world = _early_beside_left_out(peer_done=2)
    assert world.outlier_ranks == [0, 2] and world.reference_ranks == [3, 4, 5] and world.majority
    assert world.unplaced_ranks == [1] and world.seq_range == (2, 2) and "stopped" not in world.kinds
    # (one whose records there all completed waits on nothing there: its stop is its own, and it is named)
    world = _early_beside_left_out(peer_done=4)
    assert world.outlier_ranks == [0, 1, 2] and "stopped" in world.kinds


def test_a_tie_of_one_rank_against_one_names_the_one_that_issued_its_next_world_collective_early():
    # A step is two world all-reduces (1 and 8 elements), then three TP ones. Rank 0 ran one more world all-reduce
    # of 8 in step 0; rank 2 left out a TP collective of its group and ran on into step 1's world ones. The world
    # records part ranks 0 and 2 at seq 3 (8 against 1), one against one; ranks 1 and 3 end the world at seq 2,
    # before they part. Rank 0 issued world seq 3 before any TP collective, where its TP peer rank 1, whose TP
    # records agree with its own, went on to three without it: rank 0 issued it early. Rank 2's TP group has a
    # root of its own, so its place there says nothing.
    eight = ("AllReduce", 8)
    world = [(W, ONE), (W, eight)]
    logs = [rank_log(0, world + [(W, eight)] + [(T1, LAYER)] * 3), rank_log(1, world + [(T1, LAYER)] * 3),
            rank_log(2, world + [(T2, LAYER)] * 2 + world + [(T2, LAYER)] * 2), rank_log(3, world + [(T2, LAYER)] * 3)]
    d = diagnose(logs)
    assert d.root.comm == W and d.root.outlier_ranks == [0] and d.root.reference_ranks == [2]
    assert d.root.unplaced_ranks == [1, 3] and d.root.kind == "extra" and d.root.seq_range == (1, 3)
    assert IssuedEarlyInTie((0,), W, 3, T1, (1,), "rank0.log:3") in d.notes
    # Where rank 2 too issued its world seq 3 early among its TP peer's collectives (a TP group that agrees), both
    # sides did: the tie stands.
    logs[2] = rank_log(2, world + [(T2, LAYER)] * 2 + world + [(T2, LAYER)])
    d = diagnose(logs)
    assert d.root.outlier_ranks == [0, 2] and not d.root.majority


def kept_log(rank, order, kept):
    """`rank_log` of a rank whose records kept only the last `kept` collectives (a Flight Recorder ring that dropped
    its oldest entries): the seqs are those of the whole order."""
    whole = rank_log(rank, order)
    return replace(whole, collectives=whole.collectives.tail(kept))


def test_an_outlier_whose_records_begin_past_the_split_may_have_issued_its_extra_one_before_them():
    # Seed 959487: a step is one DP collective (pairs 0-2 and 1-3) and then one of W (ranks 0-3). Rank 0 ran an
    # extra W collective in step 0 (its W 2); its records kept only its last four collectives, from DP 3 on, so its
    # first W record on hand (W 4) already sits after one DP collective fewer than the program's. The extra one may
    # be any W collective up to 4, those its records lost too: the range reaches back over them, not only to the
    # first seq it has on record.
    dp = {0: "0xd0", 1: "0xd1", 2: "0xd0", 3: "0xd1"}

    def steps(rank, n, extra_at=None):
        order = []
        for s in range(n):
            order += [(dp[rank], ONE), (W, LAYER)] + ([(W, LAYER)] if s == extra_at else [])
        return order

    logs = [kept_log(0, steps(0, 4, extra_at=0), kept=4)] + [rank_log(r, steps(r, 4)) for r in (1, 2, 3)]
    streams = build_streams(logs)
    split = issue_order_split(streams, W)
    assert split.outliers == [0] and split.seq == 4 and split.low == 1
    root = issue_order_root(streams, W)
    assert root.seq_range == (1, 4) and root.outlier_ranks == [0]
    assert root.reason is RangeReason.BEFORE_RECORDS and root.records_start == 4



def _early_world_one_beside_a_later_tp_departure(read_back=()):
    """Four TP pairs. Rank 7 issues one more world collective in step 0 (from another call site: its stacks part
    it from rank 6's at world seq 1, one against one, and the other ranks left none), so rank 6 waits in their TP
    group. Rank 3 then issues an AllGather in step 1 of its TP group, a departure of its own there that leaves ranks
    2 and 3 no majority. `read_back`: ranks whose per-collective traces of step 0 are given (world seq 1 paired with
    rank 7's extra one, so it reads back wrong)."""
    T3, T4 = "0x7e3", "0x7e4"

    def with_world_sites(log, sites):
        world = log.collectives.get_column("comm") == W
        rows = log.collectives.with_columns(callsite=pl.Series([
            sites[n] if here else "model.py:1" for n, here in zip(world.cum_sum() - 1, world)], dtype=pl.String))
        return replace(log, collectives=rows)

    def trace(rank):
        sums = [("dp", 1, 9.0, 6.0)] + [(f"layer.{i}", 4096, 4096.0, 4096.0) for i in range(3)]
        rows = [FingerprintRow(loc=Location(f"fingerprint_rank{rank}.jsonl", i + 1), rank=rank, step=0, op=i,
                               tag=tag, kind="AllReduce", numel=numel, sum=got, expected_sum=expected)
                for i, (tag, numel, got, expected) in enumerate(sums)]
        return Evidence(path=f"fingerprint_rank{rank}.jsonl", format=SourceFormat.FINGERPRINT, fingerprints=rows)

    gathered = [(W, ONE), (T2, LAYER), (T2, ("AllGather", 2048)), (T2, LAYER)]
    logs = [rank_log(r, step(tp) * 2) for r, tp in ((0, T1), (1, T1), (2, T2), (4, T3), (5, T3))]
    logs += [rank_log(3, step(T2) + gathered),
             with_world_sites(rank_log(6, step(T4)), ["forward.py:90"]),
             with_world_sites(rank_log(7, step(T4, world=2)), ["forward.py:126", "forward.py:90"])]
    return logs + [trace(r) for r in read_back]


def test_ranks_that_depart_later_in_their_own_tp_group_leave_the_others_places_to_tell_the_early_one():
    # Ranks 2 and 3's places of the world collectives before their TP departure say nothing, yet ranks 0, 1, 4 and 5
    # still issue world seq 2 after three TP collectives, where rank 7 issued it after none.
    d = diagnose(_early_world_one_beside_a_later_tp_departure())
    assert d.comms[T2].root.outlier_ranks == [2, 3] and not d.comms[T2].root.majority
    assert d.root.comm == W and d.root.pinned_by == ISSUE_ORDER and d.root.majority
    assert d.root.outlier_ranks == [7] and d.root.unplaced_ranks == [2, 3] and d.root.blocked_elsewhere == (6,)
    assert d.root.seq_range == (1, 2) and d.root.departed_in == {2: (T2,), 3: (T2,)}
    assert f"Ranks 2 and 3 depart in comm {T2} too" in " ".join(words.caveats(d))


def test_results_read_back_wrong_at_the_first_of_the_alike_world_collectives_pin_the_early_one_there():
    # As above, with traces of ranks 0, 1, 4 and 5: world seq 1 reads back wrong, so the extra one is there, not
    # at seq 2 (an extra one at seq 2 leaves seq 1 aligned).
    d = diagnose(_early_world_one_beside_a_later_tp_departure(read_back=(0, 1, 4, 5)))
    assert d.root.comm == W and d.root.pinned_by == ISSUE_ORDER and d.root.outlier_ranks == [7]
    assert d.root.seq_range == (1, 1) and d.root.narrowed_by == ("fingerprints",) and d.root.reason is None


def test_ranks_ahead_by_lengths_alone_are_no_outliers_where_the_issue_orders_name_the_early_one():
    # A step is two world collectives (1 and 8 elements), then four of the rank's TP group; rank 6 left no log.
    # Rank 3 issued one more world collective of 1 element after two TP ones of step 1, then the step's last two; its
    # TP peers wait in TP behind it. Ranks 4, 5 and 7 went on into step 2, whose first world collective pairs with
    # rank 3's extra one: by lengths alone ranks 0 to 3 (4, 4, 4 and 5 world collectives) are the reference, and
    # ranks 4, 5 and 7 (6) ran one more, at seq 6. But rank 3 issued world seq 5 after six TP collectives where ranks
    # 4, 5 and 7 issue it after eight: it issued one early (or left two TP ones out before it: the places fit both).
    sizes = {W: 8, T1: 4, T2: 4}
    eight = ("AllReduce", 8)

    def step_of(tp):
        return [(W, ONE), (W, eight)] + [(tp, LAYER)] * 4

    logs = [rank_log(r, step_of(T1) * 2, sizes) for r in (0, 1, 2)]
    logs += [rank_log(3, step_of(T1) + step_of(T1)[:4] + [(W, ONE)] + [(T1, LAYER)] * 2, sizes)]
    logs += [rank_log(r, step_of(T2) * 3, sizes) for r in (4, 5, 7)]
    d = diagnose(logs)
    assert d.root.comm == W and d.root.pinned_by == ISSUE_ORDER and d.root.kind == "extra"
    assert d.root.outlier_ranks == [3] and d.root.reference_ranks == [0, 1, 2, 4, 5, 7]
    assert d.root.seq_range == (5, 5) and d.root.blocked_elsewhere == (0, 1, 2) and d.root.left_out_in == (T1,)


def _drafter_steps(extra=False, stop_short=0):
    """Four steps of one world all-reduce and three TP collectives; `extra`: two TP collectives more at the end of
    step 1 (a drafter pass run alone); `stop_short`: the last TP collectives not launched."""
    order = []
    for s in range(4):
        order += [(W, ONE)] + [(T1, LAYER)] * (3 + 2 * (extra and s == 1))
    return order[:len(order) - stop_short]


def test_a_rank_whose_ring_begins_past_the_split_sides_by_its_count_and_later_places():
    # Seed 1173206: ranks 0 and 3 ran a drafter pass alone (two TP collectives more in step 1), and rank 3 issues TP
    # seq 7 after two world collectives where the others issue it after three. Rank 0's ring kept only its last world
    # all-reduce and the TP collectives after it, from TP seq 12 on, each where rank 3 and the rest have it alike;
    # its 14 launches are rank 3's, two more than the others': it ran the drafter pass too. Kept from the reference's
    # program, it sides with the reference; stopped where no rank did, it sides with neither.
    def diagnosed(rank0):
        logs = [rank0] + [rank_log(r, _drafter_steps(extra=r == 3)) for r in (1, 2, 3, 4)]
        return issue_order_split(build_streams(logs), T1), diagnose(logs)

    split, d = diagnosed(kept_log(0, _drafter_steps(extra=True), kept=4))
    assert split.seq == 7 and split.outliers == [0, 3] and split.reference == [1, 2, 4] and not split.unplaced
    assert d.root.outlier_ranks == [0, 3] and d.root.pinned_by == ISSUE_ORDER and d.root.seq_range[1] == 7
    assert "it launched as many here as rank 3 and issued each one kept where rank 3 did" in words.cause(d)
    split, d = diagnosed(kept_log(0, _drafter_steps(), kept=4))
    assert split.outliers == [3] and split.reference == [0, 1, 2, 4]
    assert d.root.outlier_ranks == [3] and d.root.reference_ranks == [0, 1, 2, 4]
    split, d = diagnosed(kept_log(0, _drafter_steps(extra=True, stop_short=1), kept=3))
    assert split.outliers == [3] and split.reference == [1, 2, 4] and split.unplaced == [0]
    assert d.root.outlier_ranks == [3] and d.root.unplaced_ranks == [0] and d.root.placed_late == {0: 12}
    assert any("only from seq 12 on" in said and "named on neither side" in said for said in words.caveats(d))


def test_a_rank_whose_ring_begins_past_the_split_is_no_silent_reference():
    # The same with four ranks: rank 0, sided with rank 3 by what its ring kept, leaves two against two, and the
    # issue orders no majority to name rank 3 alone against ranks 0, 1 and 2.
    logs = [kept_log(0, _drafter_steps(extra=True), kept=4)] + [rank_log(r, _drafter_steps(extra=r == 3))
                                                                  for r in (1, 2, 3)]
    assert issue_order_split(build_streams(logs), T1) is None
    d = diagnose(logs)
    assert d.root is not None and d.root.outlier_ranks != [3]


def _drafter_tie(kept=None, group=(0, 1, 2, 3), extra=(0, 3), sizes=None):
    """`_drafter_steps` of the ranks of T1 (`group`), those of `extra` with the drafter pass; with the world over
    eight ranks, the rest in T2 on the plain program. `kept`: rank -> the last collectives its ring kept."""
    logs = []
    for r in range(8):
        order = _drafter_steps(extra=r in extra)
        if r not in group:
            order = [(T2 if comm == T1 else comm, op) for comm, op in order]
        logs.append(kept_log(r, order, kept[r]) if kept and r in kept else rank_log(r, order, sizes))
    return logs


def test_issue_orders_that_part_the_ranks_evenly_narrow_the_tie_and_side_its_ranks():
    # Seed 1173206: ranks 0 and 3 ran a drafter pass alone (two TP collectives more in step 1): rank 3 issues TP
    # seq 7 after two world collectives, ranks 1 and 2 after three; rank 0's ring begins past it, and sides it with
    # rank 3 by its count and later places. Two against two: ranks 0 and 3 ran two more among TP seqs 4..7 (all
    # issued after two world ones), or ranks 1 and 2 left two out there; the records alone only part the lengths.
    logs = _drafter_tie(kept={0: 4})
    tie = issue_order_tie(build_streams(logs), T1)
    assert tie.early == [0, 3] and tie.later == [1, 2] and not tie.either
    assert (tie.low, tie.split.seq, tie.split.size) == (4, 7, 2) and not tie.split.majority
    d = diagnose(logs)
    assert d.root.comm == T1 and d.root.pinned_by == ISSUE_ORDER and not d.root.majority
    assert d.root.outlier_ranks == [0, 1, 2, 3] and d.root.seq_range == (4, 7)
    assert d.root.issue_sides == IssueSides((0, 3), (1, 2)) and set(d.root.kinds) == {"extra", "missing"}
    said = words.cause(d)
    assert "no majority says which side deviated" in said
    assert "Either ranks 0 and 3 ran 2 collectives more here, somewhere in seq 4..7, or ranks 1 and 2 left as " \
           "many out there" in said and "it is on that side" in said


def test_an_even_split_of_whole_records_has_no_program_of_the_majority_yet_still_parts_the_sides():
    # As above with rank 0's records whole: at TP seq 7 two ranks place it against two, so no strict majority gives
    # the program there; each side read as the program in turn gives the same seq and range.
    logs = _drafter_tie()
    streams = build_streams(logs)
    assert issue_order_split(streams, T1) is None
    tie = issue_order_tie(streams, T1)
    assert tie.early == [0, 3] and tie.later == [1, 2] and (tie.low, tie.split.seq) == (4, 7)
    d = diagnose(logs)
    assert d.root.pinned_by == ISSUE_ORDER and d.root.seq_range == (4, 7) and not d.root.majority
    assert d.root.outlier_ranks == [0, 1, 2, 3] and d.root.issue_sides == IssueSides((0, 3), (1, 2))


def test_an_even_split_of_six_ranks_names_every_rank_with_its_side():
    # A TP group of six, three of which ran the drafter pass (ranks 1, 2 and 4), and the ring of rank 5 (of the
    # other side) kept only its last collectives: it sides with ranks 0 and 3 by its count and later places.
    logs = _drafter_tie(kept={5: 5}, group=(0, 1, 2, 3, 4, 5), extra=(1, 2, 4), sizes={W: 8, T1: 6, T2: 2})
    streams = build_streams(logs)
    tie = issue_order_tie(streams, T1)
    assert tie.early == [1, 2, 4] and tie.later == [0, 3, 5] and (tie.low, tie.split.seq) == (4, 7)
    root = issue_order_tie_root(streams, T1)
    assert root.outlier_ranks == root.reference_ranks == [0, 1, 2, 3, 4, 5] and not root.majority
    assert root.issue_sides == IssueSides((1, 2, 4), (0, 3, 5)) and root.seq_range == (4, 7)


def test_a_later_side_whose_records_end_at_the_split_may_have_run_more_elsewhere_instead():
    # Ranks 1 and 2 issue TP seq 7 after three world collectives, then nothing: as many world collectives run early
    # and none left out here put it there too, and no later TP collective of theirs tells the two apart, so the
    # world stays a candidate beside the tie. Where their later TP collectives sit as a block left out here puts
    # them (records that go on), it does not.
    logs = [rank_log(r, _drafter_steps(extra=True)) for r in (0, 3)]
    logs += [rank_log(r, _drafter_steps(stop_short=6)) for r in (1, 2)]
    logs += [rank_log(r, [(T2 if c == T1 else c, op) for c, op in _drafter_steps()]) for r in (4, 5, 6, 7)]
    tie = issue_order_tie(build_streams(logs), T1)
    assert tie.early == [0, 3] and tie.later == [1, 2] and tie.split.seq == 7 and tie.elsewhere == (W,)
    root = issue_order_tie_root(build_streams(logs), T1)
    assert root.undecided_comms == (W,) and root.issue_sides.elsewhere == (W,)
    assert issue_order_tie(build_streams(_drafter_tie()), T1).elsewhere == ()


def test_issue_orders_with_a_majority_are_no_tie():
    # One rank of four ran the drafter pass: three issue TP seq 7 where the program does, and the split names it.
    streams = build_streams(_drafter_tie(extra=(3,)))
    assert issue_order_split(streams, T1).outliers == [3]
    assert issue_order_tie(streams, T1) is None


def test_a_rank_cut_before_its_records_here_leaves_one_against_two_no_majority():
    # Seed 1195401: rank 0 ran the drafter pass alone in T1, ranks 1 and 2 did not; rank 3's log is cut after its
    # first world collective, before any T1 record, yet the others' lines give T1 four ranks. Rank 3 may have
    # issued TP seq 7 where rank 0 did: one against two with one unknown is no majority for the issue orders.
    sizes = {W: 8, T1: 4, T2: 4}
    logs = _drafter_tie(extra=(0,), sizes=sizes)
    logs[3] = replace(rank_log(3, [(W, ONE)], sizes), cut=Location("rank3.log", 1))
    streams = build_streams(logs)
    assert 3 not in streams.members[T1]
    assert issue_order_split(streams, T1) is None
    # read both ways instead: rank 0 issued early, or ranks 1 and 2 left two out; every rank it places is named
    tie = issue_order_tie(streams, T1)
    assert tie.early == [0] and tie.later == [1, 2] and not tie.split.majority
    root = issue_order_tie_root(streams, T1)
    assert root.outlier_ranks == [0, 1, 2] and not root.majority and root.issue_sides == IssueSides((0,), (1, 2))


def _gated_steps(tp, skip_at=None, steps=2, next_step=True):
    """A rank's order: each step one world collective, a drafter pass of two TP ones (none at `skip_at`) and two
    TP layers; with `next_step`, the next step's world collective and drafter pass too (where it waits)."""
    order = []
    for s in range(steps):
        order += [(W, ONE)] + ([] if s == skip_at else [(tp, LAYER)] * 2) + [(tp, LAYER)] * 2
    return order + ([(W, ONE), (tp, LAYER), (tp, LAYER)] if next_step else [])


def _gated_trace(rank, steps, skip_at=None):
    """Per-collective sums of a rank's first `steps` steps (running op numbers); those past the drafter pass it
    left out read back mixed."""
    rows, op = [], 0
    for s in range(steps):
        tags = ["dp"] + ([] if s == skip_at else ["mtp.0", "mtp.1"]) + ["layer.0", "layer.1"]
        for i, tag in enumerate(tags):
            expected = 100.0 * (s + 1) + i
            mixed = 7.0 if s == skip_at and i > 0 else 0.0
            rows.append(FingerprintRow(loc=Location(f"fingerprint_rank{rank}.jsonl", op + 1), rank=rank, step=s,
                                       op=op, tag=tag, kind="AllReduce", numel=1 if tag == "dp" else 4096,
                                       sum=expected + mixed, expected_sum=expected))
            op += 1
    return Evidence(path=f"fingerprint_rank{rank}.jsonl", format=SourceFormat.FINGERPRINT, fingerprints=rows)


def _gate_skipped(skipped):
    # Ranks 0-3 are T1, 4-7 T2. The ranks of T1 `skipped` left out step 1's drafter pass and went on into step 2,
    # so every rank of T1 launched 8 TP collectives; the others wait in step 1, their traces written up to step 0.
    logs = [rank_log(r, _gated_steps(T1, skip_at=1) if r in skipped else _gated_steps(T1, next_step=False))
            for r in range(4)] + [rank_log(r, _gated_steps(T2)) for r in range(4, 8)]
    traces = [_gated_trace(r, 2, skip_at=1) if r in skipped else _gated_trace(r, 1) for r in range(4)]
    return logs + traces + [_gated_trace(r, 2) for r in range(4, 8)]


def test_a_rank_placed_late_by_the_issue_orders_breaks_a_tie_its_equal_count_leaves():
    # Seed 1209067: only the ranks that skipped the drafter have sums past step 0, wrong from TP seq 5 on: the
    # records tie them against the rest. The skippers issue TP seq 7 after three world collectives, the rest after
    # two: they went on past where the program issues it, so they left collectives out among seqs 5..7.
    for skipped in ((3,), (1,)):
        d = diagnose(_gate_skipped(skipped))
        assert d.root.comm == T1 and d.root.majority and d.root.outlier_ranks == list(skipped)
        assert d.root.reference_ranks == [r for r in range(4) if r not in skipped]
        assert d.root.seq_range == (5, 5) and d.root.kind == "missing" and ISSUE_ORDER in d.root.narrowed_by
    # Two late against two: the issue orders give no program, and the tie stands.
    d = diagnose(_gate_skipped((2, 3)))
    assert d.root.comm == T1 and not d.root.majority and {2, 3} <= set(d.root.outlier_ranks)


def test_a_rank_cut_short_whose_records_side_with_the_late_rank_keeps_the_tie():
    # Seed 1222342: a step is a world collective of 1 element, one of 8, then three of each rank's TP pair. Ranks 0
    # and 3 skip step 1's world one of 1. Rank 3's whole log places it late (it ran step 1's TP collectives where
    # the program issues world seq 4); rank 0's log is cut, so its places end before they could show it late. Its
    # records still side with rank 3 (8 elements at world seq 3, where ranks 1 and 2 have 1): two against two, no
    # majority, and rank 0 is never named the reference beside ranks 1 and 2.
    eight = ("AllReduce", 8)
    whole = [(W, ONE), (W, eight)]
    skipped = [(W, eight)]
    pair = {0: T1, 1: T1, 2: T2, 3: T2}

    def order(rank, second):
        return whole + [(pair[rank], LAYER)] * 3 + second + [(pair[rank], LAYER)] * 3

    logs = [rank_log(r, order(r, skipped if r in (0, 3) else whole)) for r in range(4)]
    logs[0] = replace(logs[0], cut=Location("rank0.log", 10))
    d = diagnose(logs)
    assert d.root.comm == W and not d.root.majority and d.root.outlier_ranks == [0, 1, 2, 3]
    assert d.root.seq_range[0] <= 3 <= d.root.seq_range[1]
