"""Which side of a tie of call sites broke the order the program repeats.

A model's forward issues its call sites in one order every step, on every rank that runs it (own_records.py says
the same of fingerprint tags). Where the ranks whose dumps carry call stacks part evenly where the others' records
(NCCL logs, no stacks) side with either, the run of call sites each side issued there tells them apart where the
runs hold the same call sites in other orders (a swap): a run that recurs elsewhere in the records (the side's own
later steps, the other side's) is the program's order, and one that no other place holds departed from it. Runs
that differ by what they hold say nothing: a step that left out a drafter pass may be the program's as well (the
pass may run in that one step alone). The ranks without call stacks go with the side whose records theirs agree
with: NCCL logs of a skip part the ranks by their signatures as the dumps do, so a rank whose log shows the skip
departed with the dump that broke the order, though no call stack of its own says so (among lookalikes, by its
length where its log is whole; a rank whose records fit both sides is on neither, never the kept one by default).
Worked example: dumps of ranks 1 and 6, 9 collectives a step; at seqs 1-3 rank 1 issued call sites A B C, rank 6
A C B; every later step of both issues A B C: rank 6 swapped two lookalikes.
"""

from __future__ import annotations

import numpy as np

from .edits import Codes, agree, merged

# Other places a run must recur at to be the program's: one may be a second departure of its own.
_AGAINST = 2


def broke_recurring_order(stacks: dict[int, np.ndarray], ranks: list[int], low: int,
                          high: int) -> tuple[list[int], list[int], int] | None:
    """(departed, kept, times) where `ranks` (the two sides of a tie, `stacks`: rank -> its call-site codes by
    position, 0 where unrecorded) issued at positions `low`..`high` and one position either side runs of the same
    call sites in orders that part them into sides, and one side's run recurs at no other place of any rank's
    records while every other side's recurs at `_AGAINST` places or more (`times`: the fewest of those); else
    None."""
    first, last = max(0, low - 1), high + 2
    runs = {rank: stacks[rank][first:last] for rank in ranks if rank in stacks}
    recorders = [rank for rank, run in runs.items() if len(run) == last - first and run.all()]
    if len(recorders) < 2:
        return None
    sides: dict[bytes, list[int]] = {}
    for rank in recorders:
        sides.setdefault(runs[rank].tobytes(), []).append(rank)
    if len(sides) < 2 or len({tuple(sorted(runs[members[0]].tolist())) for members in sides.values()}) > 1:
        return None  # (runs of other call sites: a skip or an extra one, which no order tells apart)
    width = last - first
    views = [np.lib.stride_tricks.sliding_window_view(stack, width) for stack in stacks.values() if len(stack) >= width]
    elsewhere = {}
    for key, members in sides.items():
        run = runs[members[0]]
        elsewhere[key] = sum(int(np.all(view == run, axis=1).sum()) for view in views) - len(members)
    novel = [key for key, times in elsewhere.items() if times == 0]
    if len(novel) != 1 or any(times < _AGAINST for key, times in elsewhere.items() if key != novel[0]):
        return None
    departed = sorted(sides[novel[0]])
    kept = sorted(rank for key, members in sides.items() if key != novel[0] for rank in members)
    return departed, kept, min(times for key, times in elsewhere.items() if key != novel[0])


def with_their_sides(departed: list[int], kept: list[int], codes: dict[int, Codes], ranks: list[int],
                     ended: set[int] = frozenset()) -> tuple[list[int], list[int], list[int]] | None:
    """The two sides of the tie, (departed, kept, neither), with each other rank of `ranks` (one without call stacks
    there) on the side whose records (`codes`: every field compared, 0 where unrecorded) its own agree with. One
    that agrees with both (lookalikes: its records fit either order) goes with the one side whose streams all end
    where its own does, where its stream is known to end where its program did (`ended`: a skip or an extra
    collective shows in its length, as in the dumps' ranks'); else it is on neither side (nothing of its own says
    it departed, nor that it did not). None where one agrees with neither (it departed some other way, and the tie
    is not two sides)."""
    mine, theirs = merged(codes[r] for r in departed), merged(codes[r] for r in kept)
    sides: tuple[list[int], list[int], list[int]] = (list(departed), list(kept), [])
    for rank in ranks:
        if rank in departed or rank in kept or rank not in codes:
            continue
        with_departed, with_kept = agree(codes[rank], mine), agree(codes[rank], theirs)
        if not (with_departed or with_kept):
            return None
        if with_departed != with_kept:
            sides[0 if with_departed else 1].append(rank)
            continue
        length = codes[rank].length
        ends = [all(codes[r].length == length for r in side if r in codes) for side in (departed, kept)]
        sides[ends.index(True) if rank in ended and ends.count(True) == 1 else 2].append(rank)
    return sorted(sides[0]), sorted(sides[1]), sorted(sides[2])
