"""Ranks right in a step and wrong in the next, beside ranks wrong in it whose checked sums part: whether the
offsets still name who departed.

A rank that left out its step's last collective reads the step back right and the next one wrong (its next
collective paired with the others' last, which they file under the step), and the ranks it shared that collective
with read the step back wrong. So ranks right in the step and wrong in the next (the crossing ranks) may be what
mixed the ranks wrong in it, and then the offsets of those say nothing of who departed: each comm's ranks are off by
what that comm mixed (step_sums.py hands such a step to every rank's verdicts, checked_wrong.py). That reading
departs the whole of one side: every crossing rank left out its last collective, or every rank wrong in the step
ran one more.

The other reading departs each side apart: the ranks wrong in the step shared one misaligned collective of their
own, the fewest of them departing (those whose offsets part from a strict majority), and the crossing ranks one of
theirs in the next step, read the same way. Where the ranks wrong in the step are the members of one comm on record
that holds no crossing rank, nothing but other comms could carry the crossing ranks' departures to them, while a
misalignment in the comm they share mixes them all at once; and where the second reading departs strictly fewer
ranks than either whole side, it is the one the fewest departing give: the offsets name the step's outliers. (A
mix of the two, a crossing rank leaving out the last collective of one comm and a rank wrong in the step running
one more in another, may depart as few; but it needs comms that hold part of the comm on record beside crossing
ranks, which a job's comms, nested or crossing in one rank, do not; in the example below it departs ranks 3 and 4
too.)

Worked example (1103895): TP groups 0-3 and 4-7 (the records show 0-3 as one comm). At step 0 ranks 0-3 read back
wrong, ranks 0-2 off by 2048 and rank 3 by 512; ranks 4-7 read back right. At step 1 ranks 4-7 read back wrong, rank
4 off by 512 and ranks 5-7 by 2048; ranks 0-3 hung in step 1. Ranks 4-7 leaving out step 0's last collective (or
ranks 0-3 running one more) departs four ranks; rank 3 departing in step 0 and rank 4 in step 1 departs two: rank 3
is the outlier, at step 0.
"""

from __future__ import annotations

from ..model import FingerprintRow
from .checksum_roots import result_keys
from .fingerprints import checked_right


def departed_apart_more_cheaply(by_step: dict[int, dict[int, FingerprintRow]], step: int, wrong_groups: list[list[int]],
                                named: int, known: dict[str, set[int]]) -> bool:
    """Whether the ranks wrong in `step`, in `wrong_groups` by how far off each is, and the ranks right in it and
    wrong in the next read as departing each in their own step, more cheaply than either side departing whole.
    `named`: how many ranks the offsets of `step` name (their fewest departing); `known`: comm -> members on record.
    False where some traced rank has no sum of the step (it hung before it: its side is unknown), or where the
    crossing ranks' sums of the next step name no fewest departing."""
    every, after = by_step[step], by_step.get(step + 1, {})
    wrong = {rank for ranks in wrong_groups for rank in ranks}
    crossing = {rank for rank, row in every.items() if checked_right(row) and rank in after
                and checked_right(after[rank]) is False}
    if not crossing or not wrong or any(rank not in every for rows in by_step.values() for rank in rows):
        return False
    # (one comm on record holds every rank wrong in the step and no crossing rank)
    if not any(wrong <= members and not members & crossing for members in known.values()):
        return False
    later = _fewest_departing({rank: after[rank] for rank in crossing})
    if later is None:
        return False
    return named + later < min(len(wrong), len(crossing))


def _fewest_departing(rows: dict[int, FingerprintRow]) -> int | None:
    """How many ranks the checked sums of one step name as departing: none apart but one misaligned collective
    (every rank off alike: one departure, on or off record), or those apart from a strict majority off alike; None
    where no majority is off alike or some sum is unchecked."""
    if any(checked_right(row) is None for row in rows.values()):
        return None
    groups: dict[str, int] = {}
    for key in result_keys(rows, True).values():
        groups[key] = groups.get(key, 0) + 1
    largest = max(groups.values())
    if len(groups) == 1:
        return 1
    return len(rows) - largest if largest * 2 > len(rows) else None
