"""Which ranks are replicas, whose per-step checksums a correct run makes equal; and who of two even sides of
replicas departed, by how their unchecked sums stand to another class's.

A per-step checksum sums what a rank read back from every comm it is in: ranks of two classes (two TP groups of a
DP job) sum apart by design, each class alike within. Records say which ranks share all their comms; where none
do, sums equal in some step say so.

Two replicas that part name no side by their own sums. But where another class still sums alike within, what each
of the two shares with it (the DP collectives) shows in how far apart from it each one is: one that read back what
that class did in every comm they share stands off from it by what it stood off in a step where both classes agreed
within; one that read back something else does not. An exact match of that offset is no chance of floating sums:
the ranks that keep it read back alike with the other class, and the ranks that lose it are the fewest departing.

Worked example (two TP pairs 0-1 and 2-3 under a world comm): at step 0 ranks 0 and 1 sum 93122, ranks 2 and 3
209858 (116736 apart); at step 1 ranks 2 and 3 sum 623051, rank 1 506315 (116736 apart again) and rank 0 506259:
ranks 1, 2 and 3 read back alike, rank 0 alone otherwise (it swapped two world collectives).
"""

from __future__ import annotations

import math

from ..model import FingerprintRow
from .fingerprints import checked_right

StepSums = dict[int, dict[int, FingerprintRow]]

# How far, relative to the larger of 1 and the sums, two offsets between sums read back may be apart and still be one
# offset. Far tighter than the tolerance a sum is checked to its expected value (fingerprints.SUM_TOLERANCE): ranks
# that read back alike sum bit for bit alike, so an offset they keep is exact but for the rounding of one float64
# subtraction, and a looser match would let offsets that part by chance pass for one kept.
OFFSET_TOLERANCE = 1e-12


def replica_classes(ranks: set[int], known: dict[str, set[int]], on_record: frozenset[int]) -> list[set[int]]:
    """The ranks whose unchecked checksums a correct run makes equal, in classes: a step's checksum sums what a
    rank read back from every comm it is in, so two ranks one of them shares a comm with and the other not (two TP
    groups of a DP job) read back different results by design. A rank whose comms are not known joins the one
    class of known ranks, or none where the known ranks part into several (it could be in any of them)."""
    def apart(a: int, b: int) -> bool:
        return any((a in members) != (b in members) and (a if b in members else b) in on_record
                   for members in known.values())

    classes: list[set[int]] = []
    for rank in sorted(ranks & on_record):
        home = next((c for c in classes if not apart(rank, next(iter(c)))), None)
        if home is None:
            classes.append({rank})
        else:
            home.add(rank)
    unplaced = ranks - on_record
    if len(classes) <= 1:
        return [set(ranks)]
    for rank in sorted(unplaced):
        homes = [c for c in classes if not any(apart(rank, other) for other in c)]
        if len(homes) == 1:
            homes[0].add(rank)
    return classes


def classes_of_sums(by_step: StepSums, traced: set[int], cut: frozenset[int] = frozenset()) -> list[set[int]] | None:
    """Where nothing says which ranks are replicas: the ranks of equal unchecked sums at the first step that every
    traced rank summed, where those part into several classes of which none is a strict majority (TP groups of a
    DP job read back different results by design, each group's alike); else None (one class of every rank, one
    class with a few apart, or a class of one rank: those may already have departed, and two ranks that part at
    the first step read the same as two replica groups of one rank each). Where the first step's sums part into
    classes some of one rank, a later step's classes serve, where every step's equal sums lie within them (ranks of
    two classes sum apart in every step): classes that parted in the first step and healed. Worked example: TP
    pairs of 8 ranks; at step 0 ranks 0, 1, 6 and 7 each sum alone (one rank of each of two pairs swapped two
    collectives), at step 1 every pair sums alike: the pairs are the classes, and two of them part at step 0. Where
    the first step's classes are two even halves whose sums are equal in every later step, there is one class: two
    ranks of four swapped two collectives in step 0, and the results healed.

    A rank whose trace was cut short (`cut`) has no sum of the steps past its cut, which says nothing of what it read
    back there: such a step still serves, with the rank in the one class its equal sums in the steps it has join it
    to. Worked example: TP pairs of 8 ranks; at step 0 ranks 4 and 5 sum apart, every other pair alike; at step 1
    every pair sums alike but rank 3, whose trace was cut inside that line, and rank 3 summed alike with rank 2 at
    step 0: the pairs are the classes."""
    whole = [rows for _, rows in sorted(by_step.items()) if traced - cut <= set(rows)]
    if not whole or any(checked_right(row) is not None for rows in whole for row in rows.values()):
        return None
    # (every step's equal sums within the classes, steps some rank has no sum of too: sums equal across two of them
    # in any step, first or later, make them one class whose results parted and healed, not two that read back
    # apart by design)
    every = [_equal_sums(rows) for rows in by_step.values()]
    for rows in whole:
        classes = _with_unsummed(_equal_sums(rows), traced - set(rows), every)
        if classes is not None and _several_classes(classes, traced) and all(
                any(group <= c for c in classes) for partition in every for group in partition):
            return classes
    return None


def _with_unsummed(classes: list[set[int]], unsummed: set[int], every: list[list[set[int]]]) -> list[set[int]] | None:
    """A step's classes of equal sums with each rank that has no sum of the step (`unsummed`) in the one class that
    its equal sums in some other step (`every`: each step's groups of equal sums) join it to; None where some such
    rank is joined to none of them, or to several."""
    classes = [set(c) for c in classes]
    for rank in sorted(unsummed):
        homes = [c for c in classes if any(rank in group and group & c for groups in every for group in groups)]
        if len(homes) != 1:
            return None
        homes[0].add(rank)
    return classes


def _equal_sums(rows: dict[int, FingerprintRow]) -> list[set[int]]:
    """The ranks in groups of equal sums, in rank order; a rank whose sum is not finite alone (a NaN equals
    nothing: two ranks that both read back NaN are not thereby alike)."""
    groups: dict[object, set[int]] = {}
    for rank, row in rows.items():
        groups.setdefault(row.sum if math.isfinite(row.sum) else ("not finite", rank), set()).add(rank)
    return sorted(groups.values(), key=min)


def _several_classes(classes: list[set[int]], traced: set[int]) -> bool:
    sizes = [len(ranks) for ranks in classes]
    return len(sizes) > 1 and min(sizes) > 1 and max(sizes) * 2 <= len(traced)


def one_class(by_step: dict[int, dict[int, FingerprintRow]], ranks: set[int], known: dict[str, set[int]],
              known_replicas: list[set[int]]) -> bool:
    """Whether the ranks are replicas, whose sums a correct run makes equal: equal sums chain them all together,
    step by step (sums of two classes, what different comms read back, part in every step: equal sums in step 2
    after parting in step 0 say one class whose results healed; ranks 0 and 1 alike in step 1 and ranks 1 and 2 in
    step 2 are one class, and so is a rank whose trace holds one step alone with the ranks it sums alike with
    there), or records show every one of them sharing all their comms (a comm over them all, and no comm of one
    that holds the other). A sum that is not finite links nothing (`repr(nan) == 'nan'` on every rank, whatever
    each read back)."""
    return _linked_by_equal_sums(by_step, ranks) or (any(ranks <= members for members in known.values())
                                                     and any(ranks <= members for members in known_replicas))


def _linked_by_equal_sums(by_step: StepSums, ranks: set[int]) -> bool:
    """Whether equal finite sums, in any step, chain every one of the ranks to the others (classes apart by design
    sum apart in every step, so each link joins two ranks of one class)."""
    component = {rank: rank for rows in by_step.values() for rank in rows}

    def root_of(rank: int) -> int:
        while component[rank] != rank:
            rank = component[rank]
        return rank

    for rows in by_step.values():
        for group in _equal_sums(rows):  # (a rank whose sum is not finite is a group of its own)
            first = root_of(min(group))
            for rank in group:
                component[root_of(rank)] = first
    return ranks <= set(component) and len({root_of(rank) for rank in ranks}) == 1


def parted_by_offsets(by_step: StepSums, step: int, parted: set[int],
                      classes: list[set[int]]) -> tuple[list[int], list[int]] | None:
    """(outliers, reference) where the ranks of `parted` (one replica class whose sums part at `step`) split into
    those that stand off from another class (alike within at `step`) as the class did at the last earlier step
    where both were alike within, and the rest, a strict minority of every rank compared; else None."""
    now = by_step[step]
    if not all(math.isfinite(now[r].sum) for r in parted):
        return None  # (a NaN keeps no offset, nor loses one: it says nothing of what the rank shares)
    for other in classes:
        if other & parted or not other <= set(now) or not _alike(now, other):
            continue
        before = _last_alike_before(by_step, step, parted | other, [parted, other])
        if before is None:
            continue
        then = by_step[before]
        offset = _sum_of(then, other) - _sum_of(then, parted)
        kept = sorted(r for r in parted if _same(_sum_of(now, other) - now[r].sum, offset, now, then))
        lost = sorted(parted - set(kept))
        if kept and lost and len(lost) * 2 < len(parted | other):
            return lost, sorted(set(kept) | other)
    return None


def _alike(rows: dict[int, FingerprintRow], ranks: set[int]) -> bool:
    """Whether the ranks summed one finite value (NaN sums are alike with nothing)."""
    sums = {rows[r].sum for r in ranks}
    return len(sums) == 1 and all(math.isfinite(total) for total in sums)


def _sum_of(rows: dict[int, FingerprintRow], ranks: set[int]) -> float:
    """The one sum of ranks alike within."""
    return rows[min(ranks)].sum


def _last_alike_before(by_step: StepSums, step: int, ranks: set[int], classes: list[set[int]]) -> int | None:
    """The last step before `step` where every rank summed and each class was alike within."""
    return max((s for s, rows in by_step.items()
                if s < step and ranks <= set(rows) and all(_alike(rows, c) for c in classes)), default=None)


def _same(a: float, b: float, *steps: dict[int, FingerprintRow]) -> bool:
    """Offsets equal up to the rounding of sums as large as these steps' (floating sums of one design)."""
    scale = max(1.0, *(abs(row.sum) for rows in steps for row in rows.values()))
    return abs(a - b) <= OFFSET_TOLERANCE * scale
