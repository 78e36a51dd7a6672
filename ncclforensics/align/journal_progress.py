"""Launch counts read against how far each rank's gate journal got.

The host enqueues a read-back segment's collectives without waiting and blocks in the read-back until they
completed; it journals a step's gate decision as it enqueues that step. A rank whose journal goes on past step s
therefore got through every read-back before the gate of step s + 1: each collective it launched before the last
of them completed, and NCCL completes one only once every rank of its communicator launched it. So, where that rank
ran the program, up to that read-back the program has no more collectives of a communicator than the fewest any
rank launched there. A rank whose journal ends at step s never got past that read-back (its host blocks only in
read-backs, and it would have journaled step s + 1): where it launched more than the fewest, it launched
collectives the program does not have, while ranks further on launched more than the fewest because they are
further on. Nor can a rank whose journal ends at step s and that launched the fewest of every type be short of
any: it launched none past that read-back, so it launched every collective the program has there (or collectives
of its own beside them), and it is behind the others only by the steps it did not reach (held back at step s,
elsewhere), not by a skip here.

Both readings rest on a rank that got furthest having run the program. Where every rank that got furthest departed
by its own counts, what it completed bounds its own collectives only: ranks furthest on that skipped one launch as
few as the program's fewest before the read-back, and a rank behind that skipped the same one launched the fewest
too (world counts 2, 2, 2, 2, 3, 3, 1, 2, journals of ranks 4 and 5 on to step 1: ranks 4, 5 and 6 each skipped
one of step 0 and ranks 4 and 5 went on; rank 6 is short of one, not held back).
"""

from __future__ import annotations

from dataclasses import replace

from ..model import GateDecision
from .answers import DIFFERENT_OPS, EXTRA, MISSING, RangeReason, Root


def with_journal_progress(root: Root, gates: list[GateDecision], global_ranks: set[int]) -> Root | None:
    """`root` (from RAS counts per collective type) with its outliers the ranks the journals show to have launched
    more than the program allows where they are; or, where the counts name others that departed, without the ranks
    behind that the journals show to have launched all it has there (`blocked_elsewhere`; see the module
    docstring). None where the counts are not of global ranks (`global_ranks`: those the comm's ranks are known to
    be; a journal names global ranks), the journals do not cover every rank counted, they say nothing of the
    outliers, or only ranks that departed got furthest."""
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
    fewest = {t: min(by_rank.values()) for t, by_rank in counts.items()}
    behind = sorted(r for r in ranks if last[r] < furthest and all(counts[t].get(r, 0) == n for t, n in fewest.items())
                    and any(counts[t].get(r, 0) < max(by_rank.values()) for t, by_rank in counts.items()))
    steps = {r: last[r] for r in sorted(ranks)}
    extra = sorted({r for by_rank in counts.values() for r, n in by_rank.items()
                    if n > min(by_rank.values()) and last[r] < furthest})
    if extra and len(extra) * 2 < len(ranks):
        # the collectives of every type a rank launched past the fewest
        size = max(sum(by_rank.get(r, 0) - min(by_rank.values()) for by_rank in counts.values()) for r in extra)
        return replace(root, outlier_ranks=extra, reference_ranks=sorted(ranks - set(extra)), kind=EXTRA, size=size,
                       majority=True, kinds=(EXTRA,), reason=root.reason or RangeReason.TYPE_COUNTS,
                       journal_steps=steps, behind_may_be_held=False)
    held = [r for r in behind if r in root.outlier_ranks]
    departed = [r for r in root.outlier_ranks if r not in held]
    if not root.majority or not held or not departed or not root.reference_ranks:
        return None
    if not any(last[r] == furthest for r in root.reference_ranks):
        return None  # only departed ranks got furthest: what they completed is no bound on the program
    # The ranks left departed by their counts alone: what they launched says their kind and size.
    mine = sum(by_rank.get(departed[0], 0) for by_rank in counts.values())
    theirs = sum(by_rank.get(root.reference_ranks[0], 0) for by_rank in counts.values())
    kind = EXTRA if mine > theirs else MISSING if mine < theirs else DIFFERENT_OPS
    return replace(root, outlier_ranks=departed, kind=kind, size=abs(mine - theirs), journal_steps=steps,
                   blocked_elsewhere=tuple(held))
