"""Ranks with no file of their own that a root with a majority leaves out, sided by a peer's desync report.

A desync report's snapshot gives every member's last collective (`#4 started ranks: [0, 2] started ALLREDUCE`),
those of ranks that left no file too. Where the records part the ranks they compare with a majority, such a rank
is on the side whose ops it shares at the snapshot's number (where the snapshot parts the two sides there), or,
where each side stands at one place of its own (`#4 started ranks: [0, 3, 4, 5] started ALLREDUCE` beside
`#5 started ranks: [1]`), on the side whose place it shares; one the snapshot cannot side may be on either.
Either way it may turn the outliers' side into half the ranks: then no majority says which side departed, and the
root names every rank, as a tie of the records does.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import replace

from .answers import Root
from .notes import Note, SnapshotSides


def with_snapshot_sides(root: Root, launched: Mapping[int, int], last_ops: Mapping[int, tuple[int, str]],
                        unfiled: Set[int], aside: Set[int] = frozenset()) -> tuple[Root, list[Note]]:
    """`root`, a majority the records name, with the ranks of its comm that left no file (`unfiled`) and that it
    names nowhere: those the counts (`launched`: rank -> count) or a desync report's snapshot (`last_ops`: rank ->
    (number, op) of its last collective) put in the comm. Each joins the records' side whose ops it shares at its
    snapshot number, or, where each side stands at one place of its own in the snapshot (every rank of it at one
    number and op, the two numbers apart), the side whose place it shares; one the snapshot cannot side (no op
    given, the sides not parted, an op or a place of neither side) may be on either. Where the outliers, with the
    ranks sided with them and those that may be on either, are no strict minority, every rank is named with no
    majority; else the sided ranks join their sides.
    `aside`: ranks already read otherwise (held back elsewhere, never reached the records), left out.
    Worked example: at seq 3, where the records begin, rank 2 waits in an all-gather and ranks 1 and 3 in an
    all-reduce; rank 0 left no file, and the snapshot says `#4 started ranks: [0, 2] started ALLREDUCE` beside
    `[1, 3] started _ALLGATHER_BASE`. Rank 0 is on rank 2's side: two against two, every rank named, no majority."""
    if not root.majority:
        return root, []
    outliers, reference = set(root.outlier_ranks), set(root.reference_ranks)
    named = (outliers | reference | set(root.unplaced_ranks) | set(root.outlier_candidates)
             | set(root.waiting_candidates) | set(aside))
    unnamed = sorted((set(launched) | set(last_ops)) & set(unfiled) - named)
    if not unnamed or not outliers or not reference:
        return root, []
    sides = {rank: _side(last_ops.get(rank), last_ops, outliers, reference) for rank in unnamed}
    with_outliers = {r for r, side in sides.items() if side == "outliers"}
    with_reference = {r for r, side in sides.items() if side == "reference"}
    either = set(unnamed) - with_outliers - with_reference
    everyone = outliers | reference | set(unnamed)
    if len(outliers | with_outliers | either) * 2 >= len(everyone):
        # (the rank left out may make the outliers half the ranks: no majority says which side departed)
        named_all = sorted(everyone)
        return (replace(root, outlier_ranks=named_all, reference_ranks=named_all, majority=False),
                [SnapshotSides(tuple(sorted(with_outliers)), tuple(sorted(either)), tuple(named_all), False)])
    if not with_outliers and not with_reference:
        return root, []  # (ranks that may be on either side and cannot break the majority change nothing)
    merged = replace(root, outlier_ranks=sorted(outliers | with_outliers),
                     reference_ranks=sorted(reference | with_reference))
    return merged, [SnapshotSides(tuple(sorted(with_outliers)), (), tuple(merged.outlier_ranks), True)] \
        if with_outliers else []


def _side(last: tuple[int, str] | None, last_ops: Mapping[int, tuple[int, str]], outliers: set[int],
          reference: set[int]) -> str | None:
    """"outliers" or "reference": the records' side whose ops at the snapshot's number `last` shares, or, where
    each side stands at one place of its own in the snapshot (every rank of it at one number and op, the two
    numbers apart), the side whose place `last` is (None where the snapshot does not part the two sides, or `last`
    is a place of neither)."""
    if last is None:
        return None
    number, op = last
    out_ops = {last_ops[r][1] for r in outliers if r in last_ops and last_ops[r][0] == number}
    ref_ops = {last_ops[r][1] for r in reference if r in last_ops and last_ops[r][0] == number}
    if out_ops and ref_ops:
        return None if out_ops & ref_ops else "outliers" if op in out_ops else "reference" if op in ref_ops else None
    out_places, ref_places = ({last_ops.get(r) for r in side} for side in (outliers, reference))
    if len(out_places) != 1 or len(ref_places) != 1 or None in out_places | ref_places:
        return None
    (out_place,), (ref_place,) = out_places, ref_places
    if out_place[0] == ref_place[0]:
        return None  # (one number: the ops there, above, are all the snapshot says)
    return "outliers" if last == out_place else "reference" if last == ref_place else None
