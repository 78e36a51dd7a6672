"""A root from results checked wrong where no per-step sums part into sides: who may have departed, by every
rank's verdicts in the first step any rank read back wrong, and the one after it (see wrong_pair).

step_sums.py falls back on it where the sums themselves name no one; it is apart because it reads verdicts, not
sums.
"""

from __future__ import annotations

from ..model import FingerprintRow
from .answers import Root
from .checksum_roots import alone_wrong, sum_root
from .comms_apart import apart_from
from .fingerprints import checked_right
from .mixed_offsets import mixed_by, offset_amounts
from .own_records import departed_by_own_records


def wrong_pair(fingerprints: list[FingerprintRow], known: dict[str, set[int]], cut: frozenset[int] = frozenset(),
               comms_of: dict[int, frozenset[str]] | None = None) -> tuple[Root, int | None] | None:
    """Results checked wrong where no sums part into sides, at the first step any rank read back a wrong value.

    Every rank of a misaligned collective reads back a mixed result, the one that departed too where the trace checks
    each collective. So the ranks that may have departed are those that read back a wrong value in that step, those
    with no check of it (their traces stop before it: a hang, a cut), and those checked right in it that are not
    right all through the next step (a rank that left out the step's last collective pairs its next one with the
    others' last: it reads back right in the step, wrong in the next). Where one rank alone read back a wrong value
    and every other rank was checked right in that step, its collective paired with the others' of the step before
    or after: it is the outlier (the fewest departing), as with per-step sums. Otherwise the root names every rank
    that may have departed, and no majority: the ranks checked right all through both steps shared no misaligned
    collective, so nothing places the departure on them; a rank right in the step whose trace was cut before the
    next one is not: what would show it left out the step's last collective was cut away, and it is named too.
    But a rank that whole logs show sharing no comm with any rank that read back wrong (`comms_of`) shared no
    collective with them: it may have hung in a divergence of its own, and names no side of this one. Where that
    leaves one rank that read back wrong, its comm diverged and who in it departed is on no record (its peers there
    left no trace): it alone is named, no majority. Worked example: rank 0 reads back step 3 wrong, ranks 2-5
    right, rank 7's whole trace ends at step 2; rank 0 is in comms [0,1] and [0,2,4,6], rank 7 in [6,7] and
    [1,3,5,7]: rank 7 waits in a comm of its own, and the root names rank 0 alone.

    Where every rank that completed that step read back wrong (but bystanders: ranks right all through it and the
    next, or in the job's last step, which shared no misaligned collective; another TP group) and each other rank's
    whole trace (no file cut short) goes up to the step before it, those never completed it: the ranks part into
    those whose collectives of the step were all paired and those left waiting. One program on every rank but the
    outliers, the two sides ran different numbers of collectives there (fewer: done first; more: left waiting with
    nothing to pair their last with), so a strict minority of either side is the outliers. So too where every rank
    read the step back, and those that read it back right read back the next one wrong, every one: they left out the
    step's last collective, or the others ran one more there, however many comms the wrong ones' offsets part by.
    So too where every rank read the step back, the ranks wrong in it never completed the next one (whole traces
    that stop there) and those right in it that did complete the next one read it back wrong: the ones ahead left
    out the step's last collective and went on, the others wait with one left over (or each ran one more).
    So too a step earlier: where the ranks that read the first wrong step back all read the step before it back
    right, and every other rank's whole trace ends before that one, they part there (_ahead_of_waiting).
    Each time, a fewer side named beside the ranks that read back wrong mixed what those read back, one comm per
    rank of it: where those are off by more amounts than its departures make (mixed_offsets.py), others departed
    too, and every rank that may have departed is named, as above.
    """
    verdicts: dict[int, dict[int, bool]] = {}
    for row in fingerprints:
        right = checked_right(row)
        if right is not None:
            per_rank = verdicts.setdefault(row.step, {})
            per_rank[row.rank] = per_rank.get(row.rank, True) and right
    wrong_steps = [step for step, ranks in verdicts.items() if not all(ranks.values())]
    if not wrong_steps:
        return None
    step = min(wrong_steps)
    checked = verdicts[step]
    wrong = {rank for rank, right in checked.items() if not right}
    traced = {row.rank for row in fingerprints}
    earlier_right = all(all(ranks.values()) for s, ranks in verdicts.items() if s < step)
    bound = step if earlier_right else None
    own = departed_by_own_records(fingerprints, step, wrong)
    if own and len(wrong) > 1:
        # Ranks whose own records of the step depart from the program every other record shows (two tags issued
        # the other way round, a tag issued with another kind or size) departed; the others that read back wrong
        # read back what a departure mixed, theirs or a peer's on no record.
        # (the root's comm is one of the departed ranks': the others read back wrong in comms of their own)
        return sum_root(sorted(own), sorted(traced - own), True, step, known, own), bound
    if traced == wrong:
        # One rank's trace alone: its results were mixed, so its communicator diverged; who in it departed is on
        # no record (its partners left no trace).
        return sum_root(sorted(wrong), sorted(wrong), False, step, known), bound
    after = verdicts.get(step + 1, {})
    if len(wrong) == 1 and set(checked) == traced:
        return alone_wrong(next(iter(wrong)), sorted(traced), after, step, known), bound
    # (ranks that whole logs show sharing no comm with those that read back wrong shared no collective with them)
    apart = {rank for rank in traced - wrong if apart_from(rank, wrong, comms_of or {})}
    waiting = traced - set(checked) - apart
    before = verdicts.get(step - 1, {})
    # Ranks right all through the step and the next (or the job's last step) shared no misaligned collective and
    # departed nowhere that shows: bystanders (another TP group), beside which the rest part as below.
    # A rank right in the step whose trace was cut with no verdict of the next one is none: it may have left out the
    # step's last collective, which the next step it was cut before would show.
    unseen = {rank for rank, right in checked.items() if right and rank in cut and rank not in after}
    bystanders = {rank for rank, right in checked.items()
                  if right and (not after or after.get(rank) is True)} - unseen
    involved = traced - bystanders - apart

    def mixes(fewer: set[int], mixed: set[int] = wrong) -> bool:
        # Outliers named beside ranks that read back the step wrong (`mixed`) mixed what those read back, one comm
        # each: more amounts off than their departures make say that others departed too (mixed_offsets.py).
        return fewer is mixed or mixed_by(len(fewer), offset_amounts(fingerprints, step, mixed - cut))

    if wrong == set(checked) - bystanders and waiting and not waiting & cut and waiting <= set(before):
        fewer = min((wrong, waiting), key=len)
        if len(fewer) * 2 < len(involved) and mixes(fewer):
            return sum_root(sorted(fewer), sorted(involved - fewer), True, step, known), bound
    if (parted := _ahead_of_waiting(verdicts, step, traced, cut)) is not None:
        ahead, waiting_before = parted
        involved_before = ahead | waiting_before
        fewer = min((ahead, waiting_before), key=len)
        if len(fewer) * 2 < len(involved_before) and mixes(fewer, ahead):
            return sum_root(sorted(fewer), sorted(involved_before - fewer), True, step - 1, known), step - 1
    crossed = {rank for rank, right in checked.items() if right and after and not after.get(rank, False)}
    ahead = {rank for rank in crossed if after.get(rank) is False}
    if set(checked) == traced and ahead and not wrong & set(after) and not (wrong | crossed - ahead) & cut:
        # The ranks wrong in the step never completed the next one (whole traces that stop at it), and those right
        # in it that did complete the next one read it back wrong: the ones ahead ran fewer collectives in the
        # step (each left out its last, pairing its next one with the others' last, and went on while the others
        # wait with one left over), or the ones left waiting one more each; as with ranks left waiting in a step,
        # a strict minority of either side is the outliers (the fewest departing). Ranks right in the step with
        # no sum of the next hung beside those waiting and read back nothing mixed: they side with the waiting.
        fewer = min((wrong, ahead), key=len)
        if len(fewer) * 2 < len(involved) and mixes(fewer):
            return sum_root(sorted(fewer), sorted(involved - fewer), True, step, known), bound
    if set(checked) == traced and crossed == traced - wrong and all(after.get(rank) is False for rank in crossed):
        # Every rank read the step back, the ones right in it wrong all through the next: they ran fewer
        # collectives in it than the others (each left out its last, pairing its next one with the others' last),
        # or the others more; a strict minority of either side is the outliers (the fewest departing), as with
        # ranks left waiting in a step, where the wrong ones' offsets part by no more comms than those departures
        # mix (each rank that departed one comm's: a lone one leaves them off alike).
        fewer = min((wrong, crossed), key=len)
        if len(fewer) * 2 < len(traced) and mixes(fewer):
            return sum_root(sorted(fewer), sorted(traced - fewer), True, step, known), bound
    ranks = wrong | ((waiting | crossed | unseen) - apart)
    if apart and len(ranks) == 1:
        return sum_root(sorted(ranks), sorted(ranks), False, step, known), bound
    if len(ranks) < 2:
        ranks = traced
        if len(ranks) < 2:
            return None
    return sum_root(sorted(ranks), sorted(ranks), False, step, known), bound


def _ahead_of_waiting(verdicts: dict[int, dict[int, bool]], step: int, traced: set[int],
                      cut: frozenset[int]) -> tuple[set[int], set[int]] | None:
    """(ahead, waiting) where the ranks part in the step before `step`, the first one any rank read back wrong:
    every rank of `ahead` read that step back right and `step` wrong, and every rank of `waiting` has a whole trace
    (no file cut short) that ends with the step before that one, so it never completed the step they part in. The
    ones ahead left out that step's last collective (their next one paired with the others' last, which they file
    under `step`) and went on, while the others wait with nothing to pair their last one with; or those waiting
    ran more there. Ranks right in both steps shared no misaligned collective (bystanders: another TP group). None
    where any other rank is on record there. Worked example: ranks 0, 1 and 3 have sums of step 0 alone; rank 2
    read back step 1 right and step 2 wrong: rank 2 left out the end of step 1 (the others' drafter pass) and ran
    on, or ranks 0, 1 and 3 ran more collectives in step 1 than it."""
    parting = step - 1
    at, then, before = verdicts.get(parting, {}), verdicts.get(step, {}), verdicts.get(parting - 1, {})
    ahead = {rank for rank, right in then.items() if not right}
    waiting = traced - set(at)
    bystanders = {rank for rank, right in at.items() if right and then.get(rank) is True}
    if not ahead or not waiting or waiting & cut or not waiting <= set(before) or waiting & set(then):
        return None
    if set(at) - bystanders != ahead or not all(at[rank] for rank in ahead):
        return None
    return ahead, waiting
