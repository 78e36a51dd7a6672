"""What every root from per-step checksums is built of: the checksum rows by step, what each says its rank read
back, and the Root a step's checksums give, on the comm of the ranks compared.

step_sums.py, checked_wrong.py and sums_beside.py each read the sums their own way; the rows and the roots they
name are apart so that all three share them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from ..model import FingerprintRow
from .answers import DIFFERENT_OPS, RangeReason, Root
from .fingerprints import SUM_TOLERANCE
from .traces import comm_named_by


def checksums_by_step(fingerprints: Iterable[FingerprintRow]) -> dict[int, dict[int, FingerprintRow]]:
    """step -> rank -> its per-step checksum row (the first of each), from the rows that are checksums, not
    per-collective records."""
    by_step: dict[int, dict[int, FingerprintRow]] = {}
    for row in fingerprints:
        if row.op is None and row.sum is not None:
            by_step.setdefault(row.step, {}).setdefault(row.rank, row)
    return by_step


def result_keys(rows: dict[int, FingerprintRow], checked: bool) -> dict[int, str]:
    """rank -> what its checksum says it read back: equal keys, the same results. Checked sums part by how far each
    is off: what a rank adds of its own (replicas' inputs) is in its expected value too, and ranks that read back
    the same mixed results are off by the same amount."""
    # (offs equal up to the tolerance a sum is checked to: floating sums of one result may differ in the last bits)
    scale = SUM_TOLERANCE * max([1.0, *(abs(row.expected_sum) for row in rows.values() if checked)])
    keys = {}
    for rank, row in rows.items():
        off = row.sum - row.expected_sum if checked else None
        # (a NaN or infinite offset is a group of its own kind: NaN sums alike are alike)
        key = row.sum if not checked else round(off / scale) if math.isfinite(off) else repr(off)
        keys[rank] = repr(key)
    return keys


def sum_root(outliers: list[int], reference: list[int], majority: bool, step: int, known: dict[str, set[int]],
             compared: Iterable[int] | None = None) -> Root:
    """A root from per-step checksums at `step`, on the comm of the ranks compared (`compared`: those ranks, or a
    mapping keyed by them; all named where not given)."""
    ranks = frozenset(compared) if compared is not None else frozenset(outliers) | frozenset(reference)
    return Root(
        comm=comm_summed(ranks, known), seq=None, seq_range=None, outlier_ranks=sorted(outliers),
        reference_ranks=sorted(reference), kind=DIFFERENT_OPS, size=0, pinned_by="per-step checksums",
        reason=RangeReason.STEP_SUMS, majority=majority, ops={}, kinds=(DIFFERENT_OPS,), shown=True,
        step_bound=step,
    )


def alone_wrong(wrong: int, ranks: list[int], after: dict[int, bool | None], step: int,
                known: dict[str, set[int]]) -> Root:
    """The root where one rank alone read back a wrong result in `step` and every other rank on record read it
    back right: its collective paired with others' of the next step, which read back wrong there (`after`: each
    rank's verdict in the next step). It ran one more, or they one fewer: the fewest departing is the one, unless
    one rank alone is wrong next: then the two may be a pair of their own whose other one left out its step's last
    collective (pairing its next with this one's last), and either departed. With one other rank on record, the one
    it paired with may have no trace here: no majority says which."""
    crossed = [rank for rank in ranks if rank != wrong and after.get(rank) is False]
    if len(crossed) == 1:
        pair = sorted([wrong, *crossed])
        return sum_root(pair, pair, False, step, known)
    return sum_root([wrong], [r for r in ranks if r != wrong], len(ranks) > 2, step, known)


def comm_summed(ranks: frozenset[int], known: dict[str, set[int]]) -> str:
    """The comm a step's checksums are of: a rank's checksum sums what it read back from every comm it is in, so
    it names a comm only where that is the one known comm of these ranks; else the ranks (`[ranks=0,1]`)."""
    touching = {comm: members for comm, members in known.items() if members & ranks}
    member_sets = {frozenset(members) for members in touching.values()}  # (one comm may be known by two names)
    if len(member_sets) == 1 and ranks <= (members := next(iter(member_sets))):
        return comm_named_by(members, touching)
    return comm_named_by(ranks, {})
