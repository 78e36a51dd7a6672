"""Ranks whose own per-collective records of a step depart from the program every other record shows.

A per-collective fingerprint record carries what the rank itself issued: the tag (the call site), the kind and
size, in its own issue order. A model's forward issues its call sites in one order every step, on every rank that
runs it (the TP groups of a job run the same layers on comms of their own). So where a rank's records of a step
issue two tags in the order opposite to every other record that holds both once in a step (its own other steps,
other ranks' steps), or issue a tag with a kind or size no other record of the tag has, that rank departed there,
whatever comm it was on; a rank that read back mixed results while its own records are the program's read back
what a peer's departure mixed.

Worked example: ranks 1 and 2 (TP pairs {0, 1} and {2, 3}, ranks 0 and 3 left no trace) both read back wrong
results at step 1. Rank 1 issued `layers.1.mlp` before `layers.1.self_attn` there; its steps 0 and 2, and rank 2's
steps 0-2, issue them the other way round: rank 1 departed. Rank 2's records are the program's: its partner, on no
record, departed in the other pair.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..model import FingerprintRow

# (rank, step) -> that step's records in the rank's issue order
Steps = dict[tuple[int, int], list[FingerprintRow]]

# Other records against a departure needed to call it one: a tag order or a size that two other records show is the
# program's, where one record alone may be a second departure.
_AGAINST = 2


def departed_by_own_records(fingerprints: Iterable[FingerprintRow], step: int, ranks: Iterable[int]) -> set[int]:
    """The ranks of `ranks` whose own records of `step` issue two tags in an order, or a tag with a kind or size,
    that no other record shows and at least two other records show otherwise (module docstring)."""
    steps: Steps = {}
    for row in sorted((f for f in fingerprints if f.op is not None and f.tag), key=lambda f: (f.rank, f.step, f.op)):
        steps.setdefault((row.rank, row.step), []).append(row)
    orders = {key: _once(records) for key, records in steps.items()}
    return {rank for rank in ranks if (rank, step) in steps
            and (_inverted(orders, (rank, step)) or _reshaped(steps, (rank, step)))}


def _once(records: list[FingerprintRow]) -> dict[str, int]:
    """tag -> its position, for the tags the step's records hold once."""
    seen: dict[str, list[int]] = {}
    for at, row in enumerate(records):
        seen.setdefault(row.tag, []).append(at)
    return {tag: ats[0] for tag, ats in seen.items() if len(ats) == 1}


def _inverted(orders: dict[tuple[int, int], dict[str, int]], key: tuple[int, int]) -> bool:
    """Whether the step's records issue two tags one after the other in the order no other step's records do, and
    two others the other way round. (Pairs one after the other suffice: an order that inverts the program's
    somewhere inverts it in some such pair.)"""
    mine = sorted(orders[key], key=orders[key].get)
    for a, b in zip(mine, mine[1:]):
        both = [order for other, order in orders.items() if other != key and a in order and b in order]
        against = sum(order[b] < order[a] for order in both)
        if against >= _AGAINST and against == len(both):
            return True
    return False


def _reshaped(steps: Steps, key: tuple[int, int]) -> bool:
    """Whether the step's records issue a tag with a kind or size that no other record of the tag has, and two
    others do alike."""
    for row in steps[key]:
        if row.kind is None and row.numel is None:
            continue
        shapes = [(other.kind, other.numel) for k, records in steps.items() if k != key for other in records
                  if other.tag == row.tag]
        if len(shapes) >= _AGAINST and len(set(shapes)) == 1 and shapes[0] != (row.kind, row.numel):
            return True
    return False
