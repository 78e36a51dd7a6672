"""Collectives left out in one communicator, shown by where a rank issued its next collective of another.

A rank that leaves out collectives of one communicator (a tensor-parallel layer, a drafter pass) issues its next
collective of another communicator early: after fewer of the first one's than the program has before it. Its
issue order then reads like an extra collective of that other communicator, save at the end of its records: an
extra one moves the rank's later collectives there on by one, never the ones it issues elsewhere, so a rank that
went on elsewhere past where the program issues its next collective there, without issuing it, issued none early
(interleave.issue_order_split: `left_out_only`). Its departure is then in the communicator whose collectives it
issued fewer of before that one than its peers did: the root is there, at a seq after those it issued before its
previous collective of the other communicator and no later than the first after its early one. Worked example:
world collectives after 0 and 4 tensor-parallel ones; rank 3 issues its second world collective after 3 of them,
then 4 more and no world one: it left out one of tensor-parallel seqs 1..4.
"""

from __future__ import annotations

from .comm_streams import comm_streams
from .answers import MISSING, RangeReason, Root, ops_at
from .interleave import issue_order_split
from .issue_orders import issued_before
from .narrowing import ISSUE_ORDER
from .streams import Streams


def left_out_root(streams: Streams, comm: str) -> Root | None:
    """The root in another communicator that `comm`'s issue orders show its outliers left collectives out of,
    where only that fits their places and it is one communicator (None otherwise)."""
    split = issue_order_split(streams, comm)
    if split is None or not split.left_out_only or len(split.left_out_in) != 1:
        return None
    if set(split.outliers) & set(split.placed_late):
        return None  # (an outlier sided by records that begin past the split bounds nothing of where it left out)
    (other,) = split.left_out_in
    lows, highs = [], []
    for rank in split.outliers:
        before = issued_before(streams, rank, comm, split.seq)
        # (what it issued before its previous collective here, where its records hold that one: a ring that lost
        # it bounds nothing below)
        mine = streams.parts.get((comm, rank))
        held = mine is not None and bool((mine.get_column("seq") == split.seq - 1).any())
        prior = issued_before(streams, rank, comm, split.seq - 1) if held else {}
        if before is None or prior is None:
            return None
        lows.append(prior.get(other, 0) + 1)
        highs.append(before.get(other, 0) + 1)
    low, high = min(lows), max(highs)
    members = {r for (c, r), part in streams.parts.items() if c == other and part.height}
    rows = comm_streams(streams.comm_parts(other))
    sizes = set(split.left_out_sizes.values())
    return Root(
        comm=other, seq=low, seq_range=(low, high), outlier_ranks=list(split.outliers),
        reference_ranks=sorted(members - set(split.outliers)), kind=MISSING,
        size=sizes.pop() if len(sizes) == 1 else 0, pinned_by=ISSUE_ORDER,
        reason=RangeReason.LOOKALIKE if low < high else None, ops=ops_at(rows, low), majority=True,
        kinds=(MISSING,), shown=True, issue_places=dict(split.before), blocked_elsewhere=tuple(split.blocked),
        unplaced_ranks=list(split.unplaced), left_out_before=(comm, split.seq),
    )
