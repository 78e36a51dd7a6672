"""Ranks that launched more than the issue orders' reference, whose own issue orders place their extra collective.

The issue orders may read a communicator's ranks behind as held back elsewhere by a peer that issued a collective
early (interleave.issue_order_root). A root of lengths alone names every rank off the most shared count, though,
the ranks ahead too; where the issue orders place such a rank with the reference (it issued the split's seq where
the program does), it is no part of that reading, and it did not run the program either. A rank runs its
collectives in issue order across its communicators: where its peers of another communicator that runs one
program, whose whole records here end at seq N, went on there past where it issued seq N + 1, the program issues
no seq N + 1 there. It ran an extra collective of its own, at N + 1 or at a seq before it that it issued in a row
at the same place (they look alike); early_in_tie.py reads a tie so. So too where it issued an earlier seq after
fewer of that communicator's collectives than each of those peers issued before theirs: its extra one is there,
or among those it issued in a row before it.

Worked example (1063263): rank 39 issues world seqs 2 and 3 right after four tensor-parallel collectives; its
peers of that group end the world at seq 2 and go on to four more without seq 3. Its extra one is seq 2 or 3,
while rank 51's early seq 1..2 holds back its own group's ranks: the root names both, since nothing orders two
departures that may share seq 2.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from ..model.kinds import is_p2p_comm
from .answers import EXTRA, RangeReason, Root
from .issue_orders import issued_before
from .narrowing import ISSUE_ORDER
from .notes import DepartedLater
from .streams import Streams


def extras_ahead(streams: Streams, found: Root, launched: dict[int, int], rooted: set[str]) -> dict[int, tuple[int, int]]:
    """Of the issue orders' reference in `found`, the ranks that launched more than a strict majority of it
    (`launched`: rank -> its count here), whose issue orders place an extra collective (module docstring): rank ->
    the seqs (low, high) where it may be. `rooted`: the communicators with a root of their own (their places may
    be off by a departure there)."""
    counts = Counter(launched[r] for r in found.reference_ranks if r in launched)
    if not counts:
        return {}
    end, n = counts.most_common(1)[0]
    if n * 2 <= sum(counts.values()):
        return {}
    cut = {r for (_, r) in streams.cut}
    # the reference's ranks whose whole records here end at `end`: they went on elsewhere, or stopped, there
    ended = {r for r in found.reference_ranks if launched.get(r) == end and (found.comm, r) in streams.launch_ends
             and r not in cut}
    placed: dict[int, tuple[int, int]] = {}
    for rank in sorted(r for r in found.reference_ranks if launched.get(r, 0) > end and r not in cut):
        for other, members in sorted(streams.members.items()):
            peers = [p for p in members if p in ended]
            if other == found.comm or rank not in members or other in rooted or is_p2p_comm(other) or not peers:
                continue
            early = next((seq for seq in range(1, end + 2)
                          if _issued_early(streams, found.comm, seq, rank, other, peers)), None)
            if early is not None:
                mine = issued_before(streams, rank, found.comm, early)
                low = early
                while low > 1 and issued_before(streams, rank, found.comm, low - 1) == mine:
                    low -= 1  # (collectives it issued in a row at that place look alike: the extra one may be any)
                placed[rank] = (low, early)
                break
    return placed


def _issued_early(streams: Streams, comm: str, seq: int, rank: int, other: str, peers: list[int]) -> bool:
    """Whether `rank` issued `seq` of `comm` after fewer collectives of `other` than every one of `peers` issued
    before theirs (before the end of their records, where they never issued it)."""
    mine = issued_before(streams, rank, comm, seq)
    theirs = [issued_before(streams, peer, comm, seq) for peer in peers]
    return mine is not None and all(t is not None and t.get(other, 0) > mine.get(other, 0) for t in theirs)


def with_extras_ahead(found: Root, ahead: dict[int, tuple[int, int]]) -> tuple[Root, list[DepartedLater]]:
    """The issue orders' root with the ranks `ahead` (extras_ahead) off its reference: named beside its outliers
    where their extra collective may come at or before its last seq (nothing orders the two departures there), the
    range reaching to theirs; else departed later, as the note returned says."""
    if not ahead or found.seq_range is None or found.seq_range[1] is None:
        return found, []
    low, high = found.seq_range
    beside = {r: span for r, span in ahead.items() if span[0] <= high}
    later = {r: span for r, span in ahead.items() if r not in beside}
    notes = [DepartedLater(tuple(sorted(later)), (min(s[0] for s in later.values()), max(s[1] for s in later.values())),
                           found.comm, ISSUE_ORDER)] if later else []
    reference = [r for r in found.reference_ranks if r not in ahead]
    if not beside:
        return replace(found, reference_ranks=reference), notes
    outliers = sorted({*found.outlier_ranks, *beside})
    last = max(high, *(span[1] for span in beside.values()))
    return replace(found, seq_range=(low, last), outlier_ranks=outliers, reference_ranks=reference,
                   ran_ahead=beside, issue_seq=high, majority=len(outliers) * 2 < len(outliers) + len(reference),
                   kinds=(*found.kinds, *((EXTRA,) if EXTRA not in found.kinds else ())),
                   reason=found.reason or (RangeReason.LOOKALIKE if low < last else None)), notes
