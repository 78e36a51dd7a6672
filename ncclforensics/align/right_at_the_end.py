"""The one rank that read back right in the last step on record, where every other one read it back wrong.

A per-step checksum with its expected value says whether a rank's results of the step were mixed; the expected value
sums what its own collectives of the step give in a consistent world, the same on every rank that ran the same
collectives (each member of a collective expects what every member put in). Where every rank but one read a step
back wrong, all off by one amount (one misaligned collective they shared), and expecting alike, while the one left
reads it back right and expects apart from them, it ran other collectives in the step than they did: it left out
the step's last ones (its next ones paired with the others' last, which they read back mixed; it files them under the
next step), or every other rank ran more, which is more ranks departing. Where some rank read the next step back,
its verdict there says so (step_sums._alone_right); where none did (the job hung in it: the one left waits with a
collective the others never launch, and no read-back of it completed), the expected values alone say it.

A rank that shares no collective with the ones that read back wrong (another TP group, right in the job's last step)
may expect apart by design too. But every other traced rank read back wrong alike, so one misaligned comm holds all
of them and not it: a comm of every rank but one, which no layout of TP and DP groups over the traced ranks has (a
rank alone in its group beside one group of the rest). The traces are taken as the job's ranks here, as where one
rank alone reads back wrong (checksum_roots.alone_wrong); ranks that left no trace may make another layout, and the
caveat that traces name no communicator says the comm is the traced ranks'. A trace cut short may end before its
rank's next step for the cut alone: none is.

Worked example (992605): ranks 0, 2 and 3 read step 0 back as 660224 where they expect 657920; rank 1 reads back and
expects 130560; nobody has a sum of step 1. Rank 1 left out the drafter pass that ends step 0 on the others: it is
the outlier, at step 0.
"""

from __future__ import annotations

import math

from ..model import FingerprintRow
from .fingerprints import SUM_TOLERANCE


def alone_right_at_the_end(by_step: dict[int, dict[int, FingerprintRow]], step: int, rows: dict[int, FingerprintRow],
                           wrong: list[int], cut: frozenset[int]) -> int | None:
    """The one rank of `rows` (every traced rank's checked sum of `step`) that read back right, where at least two
    others read back wrong, all off by one amount and expecting alike while it expects apart, no rank has a sum of a
    later step and no trace was cut short (module docstring); else None."""
    right = [rank for rank in rows if rank not in wrong]
    if len(right) != 1 or len(wrong) < 2 or any(s > step for s in by_step) or cut & set(rows):
        return None
    mixed = [rows[rank] for rank in wrong]
    values = [row.sum - row.expected_sum for row in mixed] + [row.expected_sum for row in mixed]
    if not all(math.isfinite(v) for v in [*values, rows[right[0]].expected_sum]):
        return None  # (a NaN or infinite sum is off by no one amount)
    scale = SUM_TOLERANCE * max([1.0, *(abs(row.expected_sum) for row in rows.values())])
    offsets = {round((row.sum - row.expected_sum) / scale) for row in mixed}
    expected = {round(row.expected_sum / scale) for row in mixed}
    if len(offsets) != 1 or len(expected) != 1 or round(rows[right[0]].expected_sum / scale) in expected:
        return None
    return right[0]
