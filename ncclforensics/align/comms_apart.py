"""Which ranks share no comm, as far as whole logs say.

A misaligned collective mixes the results of its comm's ranks alone, so a rank that shares no comm with any rank
that read back a mixed result cannot have departed in it: it may have hung in a divergence of its own (another
comm's), but it names no side of this one. Only whole logs say every comm a rank is in: a log cut short may have
lost the INIT line of a comm the rank shares with another.
"""

from __future__ import annotations

from collections.abc import Iterable


def comms_by_rank(initialized: dict[str, list[int]]) -> dict[int, frozenset[str]]:
    """rank -> every comm it is in, for the ranks whose own whole log initialized its comms (`initialized`: comm ->
    those ranks, Streams.initialized)."""
    comms: dict[int, set[str]] = {}
    for comm, ranks in initialized.items():
        for rank in ranks:
            comms.setdefault(rank, set()).add(comm)
    return {rank: frozenset(names) for rank, names in comms.items()}


def apart_from(rank: int, ranks: Iterable[int], comms_of: dict[int, frozenset[str]]) -> bool:
    """Whether whole logs show `rank` sharing no comm with any of `ranks` (False where any of them, or it, has no
    whole log: a comm they share may be on no record)."""
    ranks = list(ranks)
    if rank not in comms_of or not all(other in comms_of for other in ranks):
        return False
    return not any(comms_of[rank] & comms_of[other] for other in ranks)
