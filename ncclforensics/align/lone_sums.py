"""Ranks each alone in their unchecked per-step checksum: who of them departed, and beside which ranks.

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

Where another step does show a lone rank summing alike with a group, that group's class is what it is weighed
against: ranks of another class sum apart by design, and say nothing of it. A lone rank is its class's fewest
departing only where the lone ranks of the class are a strict minority of it; two lone ranks beside one group of
two are none, and every rank of that class is named, no majority. Worked example: TP groups 0-3 and 4-7; at step 0
ranks 0-3 sum alike, ranks 5 and 6 alike, ranks 4 and 7 each alone; at step 1 ranks 4-7 sum alike. Ranks 4-7 are
one class, two of whose four part from the other two, each its own way: some of them departed, and nothing says
which. Ranks 0-3 are no reference of theirs.
"""

from __future__ import annotations

from collections.abc import Callable

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


def classes_of_lone(lone: list[int], groups: list[list[int]],
                    linked: Callable[[int, list[int]], bool]) -> list[set[int]]:
    """The classes of the lone ranks: each group of ranks that sum alike with the lone ranks `linked` to it (equal
    sums in another step chain them), two groups one lone rank links to joined; groups no lone rank links to are
    left out (another class, which says nothing of them)."""
    classes: list[set[int]] = []
    for group in groups:
        mates = {rank for rank in lone if linked(rank, group)}
        if not mates:
            continue
        joined = {*group, *mates}
        for other in [c for c in classes if c & joined]:
            joined |= other
            classes.remove(other)
        classes.append(joined)
    return classes


def lone_sides(lone: list[int], classes: list[set[int]]) -> tuple[list[int], list[int], bool]:
    """(outliers, reference, majority) of lone ranks weighed against their classes: where in every class the lone
    ranks are a strict minority, they are the outliers (each its class's fewest departing) and the rest of the
    classes the reference; else every rank of a class where they are none is named beside the lone ranks of the
    others, no majority (some of that class departed, and nothing says which)."""
    minority = [c for c in classes if len(c & set(lone)) * 2 < len(c)]
    if len(minority) == len(classes):
        return sorted(lone), sorted(set().union(*classes) - set(lone)), True
    named = set().union(*(c & set(lone) if c in minority else c for c in classes))
    return sorted(named), sorted(named), False
