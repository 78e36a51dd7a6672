"""A proposal: the ranks of one communicator grouped by their streams, and the edits their records allow.

propose.py makes them from the records; root.py narrows them by every other piece of evidence.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .edits import Placement


@dataclass
class Proposal:
    """The ranks grouped by their streams, and the placements the records allow."""

    placements: list[Placement]
    outliers: list[int]
    reference: list[int]
    majority: bool
    whole: bool
    stopped: list[int] = field(default_factory=list)  # ranks that agree but end where the majority goes on
    either_side: bool = False
    shown: bool = True  # some record differs; False where the streams differ in length only
    told: bool = False  # an edit placed only because the gate journal names the rank (its records agree)
    members: dict[int, list[int]] = field(default_factory=dict)  # a placement's rank -> the ranks it stands for
    unplaced: list[int] = field(default_factory=list)  # incomplete records that end before the groups part
    placed: list[int] = field(default_factory=list)  # ranks their issue places sided, where the majority counts them


def span_of(placements: list[Placement]) -> tuple[int, int]:
    """The lowest and highest seq any of the placements may start at."""
    return min(p.low for p in placements), max(p.high for p in placements)


def within(inner: Proposal, outer: Proposal) -> bool:
    """Whether every seq the inner proposal allows the outer one allows too."""
    (a, b), (c, d) = span_of(inner.placements), span_of(outer.placements)
    return c <= a and b <= d
