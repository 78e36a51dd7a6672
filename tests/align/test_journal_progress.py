"""Launch counts read against how far each rank's gate journal got."""

from ncclforensics.align.answers import EXTRA, MISSING, RangeReason, Root
from ncclforensics.align.journal_progress import with_journal_progress
from ncclforensics.model import GateDecision, Location


def journals(last: dict[int, int]) -> list[GateDecision]:
    return [GateDecision(Location(f"gate_journal_rank{r}.log", s + 1), r, s, "pass")
            for r, n in last.items() for s in range(n + 1)]


def counts_root(counts: dict[int, int], outliers: list[int]) -> Root:
    return Root(comm="world", seq=None, seq_range=None, outlier_ranks=outliers,
                reference_ranks=sorted(set(counts) - set(outliers)), kind=EXTRA, size=1, pinned_by="RAS counts",
                reason=RangeReason.TYPE_COUNTS, counts_by_type={"AllReduce": counts})


def test_a_rank_behind_whose_journal_ends_early_with_the_fewest_launched_is_held_not_short():
    # Rank 0 launched one more than the six at step 2; rank 2, whose journal ends at step 1, launched the fewest:
    # all the program has before step 2's gate, so it is behind by the step it did not reach.
    counts = {0: 7, 1: 6, 2: 4, 3: 6, 4: 6, 5: 6, 6: 6, 7: 6}
    root = with_journal_progress(counts_root(counts, [0, 2]), journals({r: 1 if r == 2 else 2 for r in counts}),
                                 set(counts))
    assert root.outlier_ranks == [0] and root.kind == EXTRA and root.size == 1
    assert root.blocked_elsewhere == (2,)
    # Where the rank behind is the only one named, the journals leave the counts' word as it was.
    counts[0] = 6
    assert with_journal_progress(counts_root(counts, [2]), journals({r: 1 if r == 2 else 2 for r in counts}),
                                 set(counts)) is None


def test_a_rank_behind_whose_journal_goes_as_far_as_the_others_stays_named():
    counts = {0: 7, 1: 6, 2: 4, 3: 6, 4: 6, 5: 6, 6: 6, 7: 6}
    root = with_journal_progress(counts_root(counts, [0, 2]), journals(dict.fromkeys(counts, 2)), set(counts))
    assert root is None or root.outlier_ranks == [0, 2]
    # The kind follows the ranks left named.
    counts = {0: 6, 1: 5, 2: 4, 3: 6, 4: 6, 5: 6, 6: 6, 7: 6}
    root = with_journal_progress(counts_root(counts, [1, 2]), journals({r: 1 if r == 2 else 2 for r in counts}),
                                 set(counts))
    assert root.outlier_ranks == [1] and root.kind == MISSING


def test_a_rank_behind_stays_named_where_only_departed_ranks_got_furthest():
    # Ranks 4, 5 and 6 each skipped one world collective of step 0; ranks 4 and 5 went on into step 1 (3 launched,
    # their journals at step 1) and rank 6 stopped at 1. What ranks 4 and 5 completed bounds only their own
    # collectives: rank 6 is as short of one as they are, not held back.
    counts = {0: 2, 1: 2, 2: 2, 3: 2, 4: 3, 5: 3, 6: 1, 7: 2}
    steps = {r: 1 if r in (4, 5) else 0 for r in counts}
    assert with_journal_progress(counts_root(counts, [4, 5, 6]), journals(steps), set(counts)) is None
