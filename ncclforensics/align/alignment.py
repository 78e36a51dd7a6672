"""Sequence alignment of two ranks' collective streams: where one gains or loses collectives.

Streams are arrays of integer tokens (one per collective, equal tokens = indistinguishable collectives).
Position-by-position comparison finds only the first *visible* mismatch; an extra collective that looks like
its neighbours shifts everything after it without showing. Alignment explains the shift, and the run of equal
tokens before the visible mismatch says how far back the extra collective may really sit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

INSERTION, DELETION, SUBSTITUTION, DIFFERENT = "insertion", "deletion", "substitution", "different"
MAX_EDIT = 64  # longest block of extra or missing collectives tried
_PROBE = 256  # tokens compared first, so that most candidates are rejected cheaply


@dataclass(frozen=True)
class Edit:
    """How stream `a` departs from stream `b` at index `at` (0-based, both streams share a[:at] == b[:at]).

    - insertion: a has `size` collectives b does not; they start somewhere in [earliest, at]
    - deletion: a lacks `size` collectives of b; the gap starts somewhere in [earliest, at]
    - substitution: a has `size` different collectives in place of b's, at exactly `at`
    - different: no small edit explains the rest; the streams part at `at`
    `confirmed` is how many collectives after the edit line up again (0: nothing after it to check).
    """

    kind: str
    at: int
    size: int
    earliest: int
    confirmed: int


def first_difference(a: np.ndarray, b: np.ndarray) -> int | None:
    """Index of the first position where a and b differ, counting a length difference; None if equal."""
    n = min(len(a), len(b))
    diff = np.flatnonzero(a[:n] != b[:n])
    if diff.size:
        return int(diff[0])
    return None if len(a) == len(b) else n


def _matches(a: np.ndarray, b: np.ndarray) -> int | None:
    """len(overlap) when a and b agree over their common length, else None."""
    n = min(len(a), len(b))
    if n > _PROBE and not np.array_equal(a[:_PROBE], b[:_PROBE]):
        return None
    return n if np.array_equal(a[:n], b[:n]) else None


def _trailing_run(equal: np.ndarray) -> int:
    """Number of True values at the end of a boolean array."""
    false = np.flatnonzero(~equal)
    return len(equal) if false.size == 0 else len(equal) - 1 - int(false[-1])


def _smallest_edit(a: np.ndarray, b: np.ndarray, at: int) -> tuple[str, int] | None:
    """The edit at `at` after which the streams line up again for the longest stretch, small edits first.

    An edit counts only when at least one collective after it lines up again (otherwise anything would do).
    """
    candidates: list[tuple[int, int, str, int]] = []  # (score, -order, kind, size) -> pick max
    order = {INSERTION: 0, DELETION: 1, SUBSTITUTION: 2}
    for size in range(1, MAX_EDIT + 1):
        tries = (
            (INSERTION, a[at + size:], b[at:]),
            (DELETION, a[at:], b[at + size:]),
            (SUBSTITUTION, a[at + size:], b[at + size:]),
        )
        for kind, left, right in tries:
            if len(left) == 0 or len(right) == 0:
                continue
            confirmed = _matches(left, right)
            if confirmed:
                # Tails left unexplained count against an edit: when both streams end at the wedge, a swapped
                # collective leaves none, an insertion would leave one on the other side.
                leftover = abs(len(left) - len(right))
                candidates.append((confirmed - 2 * size - leftover, -order[kind], kind, size))
        if candidates and size >= 4:
            break  # a longer edit would only score lower than what is already found
    if not candidates:
        return None
    _score, _order, kind, size = max(candidates)
    return kind, size


def explain(a: np.ndarray, b: np.ndarray, at: int | None = None) -> Edit | None:
    """The smallest edit that turns b into a at their first difference, with how early it may have begun."""
    if at is None:
        at = first_difference(a, b)
    if at is None:
        return None
    if at == len(b):  # b ended where a goes on: a's tail is extra
        kind, size = INSERTION, len(a) - at
    elif at == len(a):  # a ended where b goes on: a lacks b's tail
        kind, size = DELETION, len(b) - at
    else:
        found = _smallest_edit(a, b, at)
        if found is None:
            return Edit(DIFFERENT, at, 0, at, 0)
        kind, size = found
    confirmed = {
        INSERTION: lambda: min(len(a) - at - size, len(b) - at),
        DELETION: lambda: min(len(a) - at, len(b) - at - size),
        SUBSTITUTION: lambda: min(len(a), len(b)) - at - size,
    }[kind]()
    earliest = at
    if kind == INSERTION:
        # a = b[:p] + extra + b[p:] for every p whose shifted prefix still agrees: a[j+size] == b[j], j in [p, at)
        earliest = at - _trailing_run(a[size:at + size] == b[:at])
    elif kind == DELETION:
        earliest = at - _trailing_run(a[:at] == b[size:at + size])
    return Edit(kind, at, size, earliest, max(confirmed, 0))
