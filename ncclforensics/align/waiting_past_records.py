"""Ranks of a root's reference whose records end before the sides part, counted short, that wait elsewhere.

A root that records place names as its reference every rank whose records agree with the majority's. A rank whose
records end before the root's range does agrees only as far as they go: where the sides part, no record compares
it. PyTorch's counts may say it launched past its records, and fewer than the reference ranks the records compare
there; where it waits in another communicator (waiting.py), that reads two ways. Held back there by a peer (an
outlier's extra collective here keeps that peer from the collective they share there), it ran the program and
launched as few as the wait let it; or it departed here, in collectives it launched past its records, and then
stopped, waiting there. A twin incident with its departure undone writes the same counts and the same records, so
it is on neither side: a candidate (`Root.waiting_candidates`), as such a rank is beside records that begin late.

Worked example (1086325): ranks 0, 1 and 3 time out in world seq 7, rank 3 in an all-reduce of 8 elements, ranks
0 and 1 in one of 1; rank 2's trace ends at seq 4, its counts give 6 launched and completed against their 8, and it
waits in its TP pair with rank 3. Rank 3 departs somewhere in seq 2..7. Rank 2 may be held by rank 3, or have
swapped its seqs 5 and 6 (all-reduces of unequal counts that complete) before waiting: it is a candidate, not the
reference.
"""

from __future__ import annotations

from dataclasses import replace

from .answers import Root


def waiting_past_records(root: Root, launched: dict[int, int], recorded: dict[int, int],
                         stuck: dict[int, set[str]]) -> dict[int, tuple[str, ...]]:
    """rank -> the communicators it waits in, for the root's reference ranks of the module docstring. `launched`:
    rank -> PyTorch's count of what it enqueued in the root's comm; `recorded`: rank -> the last seq its records of
    the comm hold; `stuck`: rank -> the other communicators it waits in (waiting.waiting_elsewhere). (Its records,
    alike with the reference's, bound its departure from below no later than one past their end, which is inside
    the root's range: they never put it after the root.)"""
    last = root.seq_range[1] if root.seq_range else None
    if not root.majority or not root.shown or last is None:
        return {}
    reference = [r for r in root.reference_ranks if r not in root.outlier_ranks]
    # (the reference ranks the records compare as far as the sides part: what the program launched is theirs)
    compared = [launched[r] for r in reference if recorded.get(r, 0) >= last and r in launched]
    if not compared:
        return {}
    return {r: tuple(sorted(stuck[r])) for r in reference
            if r in launched and r in recorded and r in stuck and recorded[r] < last
            and recorded[r] < launched[r] < min(compared)}


def with_waiting_past_records(root: Root, launched: dict[int, int], recorded: dict[int, int],
                              stuck: dict[int, set[str]]) -> Root:
    """`root` with the ranks waiting_past_records finds taken off its reference and named as waiting candidates."""
    waiting = waiting_past_records(root, launched, recorded, stuck)
    if not waiting:
        return root
    reference = [r for r in root.reference_ranks if r not in waiting]
    # (a candidate votes for neither side: the majority is of the ranks left on them)
    majority = len(root.outlier_ranks) * 2 < len(set(root.outlier_ranks) | set(reference))
    return replace(root, reference_ranks=reference, majority=majority,
                   waiting_candidates={**root.waiting_candidates, **waiting})
