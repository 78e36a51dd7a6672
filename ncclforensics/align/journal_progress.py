"""Launch counts read against how far each rank's gate journal got.

The host enqueues a read-back segment's collectives without waiting and blocks in the read-back until they
completed; it journals a step's gate decision as it enqueues that step. A rank whose journal goes on past step s
therefore got through every read-back before the gate of step s + 1: each collective it launched before that
completed, and NCCL completes one only once every rank of its communicator launched it. So before that point the
program has no more collectives of a communicator than the fewest any rank launched there. A rank whose journal
ends at step s never got past that point (it would have journaled step s + 1): where it launched more than the
fewest, it launched collectives the program does not have, while ranks further on launched more than the fewest
because they are further on.
"""

from __future__ import annotations

from dataclasses import replace

from ..model import GateDecision
from .divergence import EXTRA, RangeReason, Root


def with_journal_progress(root: Root, gates: list[GateDecision], global_ranks: set[int]) -> Root | None:
    """`root` (from RAS counts per collective type) with its outliers the ranks the journals show to have launched
    more than the program allows where they are (see the module docstring); None where the counts are not of
    global ranks (`global_ranks`: those the comm's ranks are known to be; a journal names global ranks), the
    journals do not cover every rank counted, or no rank that launched more is behind another's journal."""
    counts = root.counts_by_type
    ranks = {r for by_rank in counts.values() for r in by_rank}
    if not ranks <= global_ranks:
        return None
    last: dict[int, int] = {}
    for g in gates:
        last[g.rank] = max(last.get(g.rank, g.step), g.step)
    if not counts or len(ranks) < 3 or not ranks <= set(last):
        return None
    furthest = max(last[r] for r in ranks)
    extra = sorted({r for by_rank in counts.values() for r, n in by_rank.items()
                    if n > min(by_rank.values()) and last[r] < furthest})
    if not extra or len(extra) * 2 >= len(ranks):
        return None
    # the collectives of every type a rank launched past the fewest
    size = max(sum(by_rank.get(r, 0) - min(by_rank.values()) for by_rank in counts.values()) for r in extra)
    return replace(root, outlier_ranks=extra, reference_ranks=sorted(ranks - set(extra)), kind=EXTRA, size=size,
                   majority=True, kinds=(EXTRA,), reason=root.reason or RangeReason.TYPE_COUNTS,
                   journal_steps={r: last[r] for r in sorted(ranks)}, behind_may_be_held=False)
