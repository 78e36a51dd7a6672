"""How many departures the results a step read back mixed take, by how far off each rank's checked sums are.

Every rank of a misaligned collective reads back one mixed result, so the ranks that shared it are off by one
amount in the step (what a rank adds of its own is in its expected value too); a rank in two comms that were
mixed is off by the sum of the two. A rank that left out its step's last collective (or ran one more there) mixes
the one comm it did so in: n such departures part the ranks that read back wrong into at most 2**n - 1 amounts,
one for each set of those comms a rank is in. More amounts than that say that more ranks departed than the ones
named.

Worked example: TP pairs (0,1) (2,3), DP pairs (0,2) (1,3). Rank 3 read back step 2 right and step 3 wrong, and
ranks 0, 1 and 2 read step 2 back off by 779, 480 and -8. Rank 3 leaving out its step's last collective mixes one
comm: the ranks of it would be off alike. Three amounts take two departures at least (rank 2's in the DP pair of
ranks 0 and 2, rank 1's in the other, say): rank 3 alone is no answer.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from ..model import FingerprintRow
from .fingerprints import SUM_TOLERANCE


def offset_amounts(fingerprints: Iterable[FingerprintRow], step: int, ranks: set[int]) -> int | None:
    """How many amounts the ranks' checked sums of `step` are off by (each rank's summed over its records of the
    step: one per-step checksum, or one per collective), equal up to the tolerance a sum is checked to; None where
    some rank has no record of the step, or one with no expected value or a sum that is not finite."""
    per_step: dict[int, FingerprintRow] = {}
    per_collective: dict[int, list[FingerprintRow]] = {}
    for row in fingerprints:
        if row.rank in ranks and row.step == step:
            if row.op is None:
                per_step.setdefault(row.rank, row)  # (the first of each, as the checksums are read)
            else:
                per_collective.setdefault(row.rank, []).append(row)
    rows = {rank: [per_step[rank]] if rank in per_step else per_collective.get(rank, []) for rank in ranks}
    offsets: dict[int, float] = {}
    scale = 1.0
    for rank, mine in rows.items():
        if not mine or any(r.sum is None or r.expected_sum is None or not math.isfinite(r.sum - r.expected_sum)
                           for r in mine):
            return None
        offsets[rank] = sum(r.sum - r.expected_sum for r in mine)
        scale = max(scale, *(abs(r.expected_sum) for r in mine))
    return len({round(off / (SUM_TOLERANCE * scale)) for off in offsets.values()})


def mixed_by(departures: int, amounts: int | None) -> bool:
    """Whether `departures` ranks, each mixing one comm, can leave the ranks that read back wrong off by `amounts`
    amounts (None: not known, which rules nothing out)."""
    return amounts is None or amounts <= 2 ** departures - 1
