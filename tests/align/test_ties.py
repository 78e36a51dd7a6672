"""align/choose.py: which side of an even split the gate journal may name."""

from __future__ import annotations

from ncclforensics.align.choose import _resolve_tie
from ncclforensics.align.divergence import Root
from ncclforensics.align.gates import GateDisagreement
from ncclforensics.model import GateDecision, Location


def _tie(ranks: list[int]) -> Root:
    return Root(comm="0xa", seq=14, seq_range=(14, 14), outlier_ranks=ranks, reference_ranks=ranks, kind="extra",
                size=1, pinned_by="steps", reason=None, majority=False)


def _gate(passed: list[int], skipped: list[int]) -> GateDisagreement:
    decisions = {r: GateDecision(loc=Location(f"gate_journal_rank{r}.jsonl", 3), rank=r, step=2,
                                 decision="pass" if r in passed else "skip") for r in passed + skipped}
    return GateDisagreement(step=2, decisions=decisions, passed=passed, skipped=skipped, outlier_ranks=[],
                            ceiling_start=None, in_ceiling_window=None, pass_totals={}, proposed_totals={})


def test_the_gate_names_the_side_that_ran_the_drafter_where_it_journaled_every_rank_of_the_tie():
    assert _resolve_tie(_tie([0, 1]), _gate([0], [1])).outlier_ranks == [0]


def test_a_tie_with_ranks_the_gate_did_not_journal_keeps_both_sides():
    # Counts split ranks 0 and 3 from ranks 1 and 2; only ranks 0 and 1 journaled their gates. Rank 0 passed alone
    # among those, but rank 3 may have passed with it or skipped: the gate says nothing of which side is fewer.
    tie = _tie([0, 1, 2, 3])
    assert _resolve_tie(tie, _gate([0], [1])) == tie


def test_ranks_the_counts_name_among_records_alike_everywhere_are_the_outliers():
    # Every rank's records look alike and a result was misaligned: the records name every rank on either side.
    # PyTorch's counts say rank 3 launched one fewer than the seven others: it is the fewest departing, missing one.
    from dataclasses import replace

    from ncclforensics.align.choose import _counted_among_lookalikes
    from ncclforensics.align.divergence import RangeReason

    every = replace(_tie(list(range(8))), seq=1, seq_range=(1, 19), reason=RangeReason.LOOKALIKE,
                    kinds=("extra", "missing", "different"))
    counted = Root(comm="0xa", seq=1, seq_range=(1, 19), outlier_ranks=[3], reference_ranks=[0, 1, 2, 4, 5, 6, 7],
                   kind="missing", size=1, pinned_by="PyTorch's enqueued counts", reason=RangeReason.COUNTS)
    root, said = _counted_among_lookalikes(every, counted, set())
    assert root.outlier_ranks == [3] and root.majority and root.kind == "missing" and root.seq_range == (1, 19)
    assert "rank 3 launched fewer" in said[0]
    # a rank behind that is stuck elsewhere may be held back: the counts then name no one
    assert _counted_among_lookalikes(every, counted, {3}) == (every, [])
    # counts with no majority say nothing of who departed
    assert _counted_among_lookalikes(every, replace(counted, majority=False), set()) == (every, [])
