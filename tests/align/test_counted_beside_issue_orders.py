"""align/reanalysis.py `with_counted_outliers`: a rank the issue orders leave unplaced (its records cut before
them) that the communicator's own counts name beside the issue orders' outliers departed with them."""

from __future__ import annotations

from ncclforensics.align.answers import MISSING, STOPPED, Root
from ncclforensics.align.reanalysis import with_counted_outliers

REFERENCE = [56, 59, 60, 61, 63]


def _issue_orders() -> Root:
    """Rank 57 issued the next world collective early: it left out collectives of TP seq 1..6; rank 58's log is cut
    before its TP collectives, rank 62's too: neither is placed."""
    return Root(comm="tp", seq=1, seq_range=(1, 6), outlier_ranks=[57], reference_ranks=REFERENCE, kind=MISSING,
                size=2, pinned_by="issue order across communicators", reason=None, majority=True,
                unplaced_ranks=[58, 62])


def _counts(outliers: list[int], majority: bool = True) -> Root:
    """PyTorch's counts: the outliers launched 10 in the TP group, the rest stopped at 7."""
    return Root(comm="tp", seq=1, seq_range=(1, 10), outlier_ranks=outliers,
                reference_ranks=sorted({*REFERENCE, 57, 58, 62} - set(outliers)), kind=STOPPED, size=3,
                pinned_by="PyTorch's enqueued counts", reason=None, majority=majority)


def test_a_rank_counted_on_the_outliers_side_that_the_issue_orders_leave_unplaced_departed_with_them():
    root = with_counted_outliers(_issue_orders(), _counts([57, 58]))
    assert root.outlier_ranks == [57, 58] and root.unplaced_ranks == [62] and root.seq_range == (1, 6)


def test_counts_that_disagree_with_the_issue_orders_or_name_no_majority_add_no_one():
    found = _issue_orders()
    assert with_counted_outliers(found, _counts([57, 58], majority=False)) == found
    assert with_counted_outliers(found, _counts([57, 58, 59])) == found  # (59: the issue orders' reference)
    assert with_counted_outliers(found, _counts([57])) == found
    assert with_counted_outliers(found, None) == found
