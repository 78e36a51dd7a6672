"""Communicators whose results were read back mixed, beside a root that rests on lengths alone.

A fingerprint trace that writes, beside what a rank read back, the value a consistent world gives
(`expected_sum`) says where the two differ that the collective paired with another one on some peer: the ranks of
its communicator ran different programs there, whatever their launch records show. A root that rests on lengths
alone (ranks that stopped launching, or launched fewer, their records alike) is just what a rank stuck in another
communicator leaves behind (consequences.py), and a communicator whose results were mixed diverged; nothing in the
lengths says which came first, so each such communicator is a candidate beside the root's (`undecided_comms`).

A per-collective trace tied to a stream (fingerprints.py) names the communicator of each wrong result. A per-step
checksum names none: it sums what the rank read back from all its communicators in the step, so a wrong one was
mixed in one of them; where the rank runs in others than the root's, those are candidates too (the root's own may
have mixed it, and it is named already). So does a per-collective record that no stream holds: one past the end of
the rank's launch records (a log cut short), which nothing ties to a communicator (fingerprints.py places it only
where a peer read the same result back).

Worked example: ranks 0-3 in a world comm, TP pairs {0, 1} and {2, 3}. Rank 2 stopped launching in the world comm
after seq 2; its records there are alike with the others'. Rank 3's step-0 checksum reads 189890, expected 48578:
it read back mixed results in the world comm or in TP pair {2, 3}, and a rank stuck in the pair stops launching in
the world comm just so. The pair is named a candidate beside the world comm.
"""

from __future__ import annotations

from dataclasses import replace

import polars as pl

from ..model import FingerprintRow
from ..model.kinds import is_p2p_comm
from .answers import Root
from .fingerprints import checked_right
from .notes import MixedElsewhere, Note, StepSumMixedElsewhere, UnplacedResultMixedElsewhere
from .streams import Streams


def mixed_elsewhere(root: Root, streams: Streams, fingerprints: list[FingerprintRow]) -> tuple[Root, list[Note]]:
    """The root with the other communicators whose results were read back mixed as candidates beside it, where it
    rests on lengths alone (its records show no disagreement), and a note for each; the root as it is where none
    was or where its records show it."""
    if root.shown or root.pinned_by == "per-step checksums":
        return root, []
    named = {root.comm, *root.undecided_comms}
    said: list[Note] = []
    found: list[str] = []
    for comm, (ranks, loc) in sorted(_mixed_in_streams(streams).items()):
        if comm in named or is_p2p_comm(comm):
            continue
        found.append(comm)
        said.append(MixedElsewhere(comm, tuple(ranks), str(loc), root.comm))
    members = {c: set(m) for c, m in [*streams.expected_members.items(), *streams.members.items()]}
    for rank, row in _first_wrong_in_no_comm(fingerprints, streams).items():
        comms = sorted(c for c, m in members.items()
                       if rank in m and c not in named and c not in found and not is_p2p_comm(c))
        if not comms:
            continue
        found += comms
        if row.op is None:
            said.append(StepSumMixedElsewhere(tuple(comms), rank, row.step, str(row.loc), row.sum, row.expected_sum,
                                              root.comm))
        else:
            said.append(UnplacedResultMixedElsewhere(tuple(comms), rank, row.step, row.tag, str(row.loc), row.sum,
                                                     row.expected_sum, root.comm))
    if not found:
        return root, []
    return replace(root, undecided_comms=tuple(sorted({*root.undecided_comms, *found}))), said


def _mixed_in_streams(streams: Streams) -> dict[str, tuple[list[int], str]]:
    """comm -> (the ranks whose per-collective trace records tied to its streams read back a wrong result, where
    the first one says so), for each comm where any did."""
    found: dict[str, tuple[list[int], str]] = {}
    for (comm, rank), part in sorted(streams.parts.items()):
        if "checked" not in part.columns or not part.height:
            continue
        wrong = part.filter(pl.col("checked") == False)  # noqa: E712 - a polars expression, not a truth test
        if not wrong.height:
            continue
        ranks, loc = found.get(comm, ([], None))
        first = wrong.get_column("checked_at")[0] if "checked_at" in wrong.columns else None
        found[comm] = ([*ranks, rank], loc or first or "its fingerprint trace")
    return found


def _first_wrong_in_no_comm(fingerprints: list[FingerprintRow], streams: Streams) -> dict[int, FingerprintRow]:
    """rank -> its first record read back wrong that names no communicator: a per-step checksum, or a per-collective
    record no stream holds (a per-collective record tied to a stream speaks there, `_mixed_in_streams`). Per-step
    checksums come first (a rank's later per-collective records may be of any of its communicators just the same)."""
    wrong = [f for f in fingerprints if checked_right(f) is False]
    tied = _tied_records(streams, {str(f.loc) for f in wrong if f.op is not None})
    first: dict[int, FingerprintRow] = {}
    for row in sorted(wrong, key=lambda f: (f.rank, f.op is not None, f.step, f.op or 0)):
        if row.op is None or str(row.loc) not in tied:
            first.setdefault(row.rank, row)
    return first


def _tied_records(streams: Streams, wanted: set[str]) -> set[str]:
    """Of the trace records `wanted` (their `file:line`), those some stream's rows hold (`checked_at`)."""
    if not wanted:
        return set()
    held = [part.select("checked_at").filter(pl.col("checked_at").is_in(list(wanted)))
            for part in streams.parts.values() if "checked_at" in part.columns]
    return set(pl.concat(held).get_column("checked_at").to_list()) if held else set()
