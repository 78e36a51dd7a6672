"""Ranks each alone in their unchecked per-step checksum where no other step says whether they departed.

A rank alone in its sum beside groups of ranks that sum alike (replicas: a TP group's ranks read back alike) ran
other collectives than its group in the step, or sums apart by design (a gather to it, a loss logged through
gather_object). Another step tells the two apart: one where it sums alike with a group makes it that group's rank
that read back otherwise (step_sums.py names it), one where it sums alone again reads as the design, and names no
one. Where its trace holds no other step beside any rank of those groups (the job hung in its first step, or the
rank's group wrote nothing after it), nothing tells them apart; yet the step still bounds where it departed, if it
did, and who: the root names the lone ranks, in that step or before, and says it may be the design
(`Root.may_sum_apart_by_design`, which leaves the verdict inconclusive).

One lone rank beside groups of two or more alike is the fewest departing of whichever group it is of: a majority.
Several lone ranks may be one class of their own split apart (a TP pair whose two ranks each sum alone): one of
them departed, or each in a class of its own, and nothing says which: every one is named, no majority.

Worked example: TP groups 0-3 and 4-7 and step 0 alone on record: ranks 1-3 sum 2439316, ranks 4-7 6192276 and rank
0 2173076: rank 0 departed by step 0, or sums apart by design. TP pairs 0-1 to 6-7, step 0 alone: pairs 0-1, 2-3 and
4-5 each sum alike, ranks 6 and 7 each alone: one of them departed by step 0 (or both, or neither by design), and
nothing says which.
"""

from __future__ import annotations

from ..model import FingerprintRow


def untold_lone_ranks(by_step: dict[int, dict[int, FingerprintRow]], step: int, lone: list[int],
                      groups: list[list[int]]) -> list[int]:
    """The ranks of `lone` (each alone in its sum at `step`, beside `groups` of ranks that sum alike) whose traces
    hold no other step beside any rank of those groups: no step shows them summing alike with a group, nor apart
    from every group again."""
    beside = {rank for group in groups for rank in group}
    return [rank for rank in lone
            if not any(rank in rows and beside & set(rows) for other, rows in by_step.items() if other != step)]


def untold_sides(untold: list[int], alike: list[int]) -> tuple[list[int], list[int], bool]:
    """(outliers, reference, majority) of ranks each alone in their sum that no other step tells (`alike`: the
    ranks that sum alike with others): one lone rank departed from the ranks alike, the fewest departing; several
    may be one class split apart, each named, and no majority says which departed."""
    if len(untold) == 1:
        return list(untold), sorted(alike), True
    return sorted(untold), sorted(untold), False
