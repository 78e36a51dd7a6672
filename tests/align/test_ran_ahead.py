"""Ranks that launched more than the issue orders' reference, whose own issue orders place their extra collective
(align/ran_ahead.py), beside a peer that issued one early and the ranks it holds back."""

from ncclforensics.align.diagnosis import diagnose
from ncclforensics.align.interleave import ISSUE_ORDER
from ncclforensics.align.notes import DepartedLater
from ncclforensics.report import words
from tests.align.test_interleave import LAYER, ONE, W, rank_log

T1, T2, T3, T4 = "0x7e1", "0x7e2", "0x7e3", "0x7e4"


def step(tp, world=1):
    return [(W, ONE)] * world + [(tp, LAYER)] * 2


def test_a_rank_ahead_beside_an_early_issuer_and_the_peer_it_holds_back():
    # Rank 5 issues an extra world collective right after step 0's and so holds its TP peer, rank 4, before step
    # 0's TP collectives; rank 3 issues one more at step 1. By lengths alone the outliers are ranks 3 (ahead) and 4
    # (behind), a stop; the issue orders place rank 5's early one, and rank 3's peer of TP, rank 2, whose world
    # records end at seq 2, went on in TP past where rank 3 issued seq 3: rank 3 ran one of its own, at seq 2..3.
    logs = [rank_log(r, step(tp) + step(tp)) for r, tp in ((0, T1), (1, T1), (2, T2), (6, T4), (7, T4))]
    logs += [rank_log(3, step(T2) + [(W, ONE)] + step(T2)), rank_log(4, step(T3)),
             rank_log(5, [(W, ONE)] + step(T3))]
    d = diagnose(logs)
    assert d.root.comm == W and d.root.pinned_by == ISSUE_ORDER and d.root.kind == "extra"
    assert d.root.outlier_ranks == [3, 5] and d.root.seq_range == (1, 3) and d.root.majority
    assert d.root.blocked_elsewhere == (4,) and 3 not in d.root.reference_ranks
    assert d.root.ran_ahead == {3: (2, 3)} and d.root.issue_seq == 2
    said = words.cause(d)
    assert "seq 2 of comm 0xwor1d comes after" in said and "rank 5 issued one there early" in said
    assert "Rank 3 launched more here than the others, and issued seq 3" in said and "somewhere in seq 2..3" in said


def test_a_rank_ahead_whose_extra_collective_comes_after_the_early_one_departed_later():
    # The same, but rank 3 runs its extra world collective in step 2, at seq 3..4, past the early one's seq 1..2:
    # the root names rank 5 alone, and rank 3, off its reference, departed later.
    logs = [rank_log(r, step(tp) * 3) for r, tp in ((0, T1), (1, T1), (2, T2), (6, T4), (7, T4))]
    logs += [rank_log(3, step(T2) * 2 + [(W, ONE)] + step(T2)), rank_log(4, step(T3)),
             rank_log(5, [(W, ONE)] + step(T3))]
    d = diagnose(logs)
    assert d.root.pinned_by == ISSUE_ORDER and d.root.outlier_ranks == [5] and d.root.seq_range == (1, 2)
    assert d.root.blocked_elsewhere == (4,) and 3 not in d.root.reference_ranks and not d.root.ran_ahead
    assert DepartedLater((3,), (3, 4), W, ISSUE_ORDER) in d.notes


def test_a_rank_ahead_whose_extra_collective_shifts_its_later_ones_is_placed_where_it_first_issued_early():
    # Rank 3 runs its extra world collective at the start of step 1, right after step 1's own: its seq 3 sits two
    # TP collectives before its peer's (rank 2's), so its extra one is seq 2 or 3, not at the end of its records.
    logs = [rank_log(r, step(tp) * 3) for r, tp in ((0, T1), (1, T1), (2, T2), (6, T4), (7, T4))]
    logs += [rank_log(3, step(T2) + [(W, ONE)] + step(T2) * 2), rank_log(4, step(T3)),
             rank_log(5, [(W, ONE)] + step(T3))]
    d = diagnose(logs)
    assert d.root.pinned_by == ISSUE_ORDER and d.root.outlier_ranks == [3, 5] and d.root.seq_range == (1, 3)
    assert d.root.ran_ahead == {3: (2, 3)}
