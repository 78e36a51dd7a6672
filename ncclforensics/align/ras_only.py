"""What RAS replies alone say about a communicator no stream covers: which ranks launched more or fewer
(a root with a range, never a seq), and who waits on whom (a wedge). Also the map from RAS's comm ranks to
global ranks."""

from __future__ import annotations

import polars as pl

from ..model import Evidence, Location, WedgeKind
from .divergence import DIFFERENT_OPS, EXTRA, MISSING, STOPPED, RangeReason, Root
from .ras import RasHistory
from .streams import Streams
from .wedge import Wedge


def ras_rank_map(streams: Streams, evidence: list[Evidence], ras: dict[str, RasHistory]) -> dict[tuple[str, int], int]:
    """(comm hash, comm rank) -> global rank, from the streams' comm_rank column and process identities."""
    mapping: dict[tuple[str, int], int] = {}
    for (comm, rank), part in streams.parts.items():
        for comm_rank in part.select(pl.col("comm_rank").drop_nulls().unique(maintain_order=True)).to_series():
            mapping[(comm, comm_rank)] = rank
    pid_rank: dict[int, int] = {}
    for item in evidence:
        for identity in item.identities:
            if identity.pid is not None and identity.rank is not None:
                pid_rank[identity.pid] = identity.rank
    for comm, history in ras.items():
        for _, block in history.states:
            for r in block.ranks:
                if (comm, r.rank) not in mapping and r.pid in pid_rank:
                    mapping[(comm, r.rank)] = pid_rank[r.pid]
    # A communicator spanning the whole job (the world) has comm ranks equal to global ranks.
    world = max((len(m) for m in streams.members.values()), default=0)
    for comm, history in ras.items():
        size = history.states[-1][1].size
        if size and size >= world:
            for rank in range(size):
                mapping.setdefault((comm, rank), rank)
    return mapping


def ras_only_root(ras: dict[str, RasHistory], rank_map: dict, streams: Streams,
                   stops: dict[str, list[str]]) -> Root | None:
    """Without streams, RAS counts still show which ranks launched more or fewer, but not where. NCCL 2.26+ counts
    each collective type apart, so its counts place nothing in the communicator's launch order: the root names
    the ranks and the types, with no seq. A single counter (2.24, 2.25) counts every collective: a range of seqs."""
    for comm, history in sorted(ras.items()):
        if comm in streams.members:
            continue
        lost = sorted(set(history.missing_ranks) | set(history.dead_ranks))
        counts = history.launched()
        typed = history.by_type()
        if lost and counts:
            last = max(counts.values())
            single = all(set(c) <= {"ops"} for c in typed.values())
            return Root(
                comm=comm, seq=1 if single else None, seq_range=(1, last) if single else None,
                outlier_ranks=sorted(rank_map.get((comm, r), r) for r in lost),
                reference_ranks=sorted(rank_map.get((comm, r), r) for r in counts), kind=STOPPED, size=0,
                pinned_by="RAS counts", reason=RangeReason.NO_DATA, ops={},
                counts_by_type=_global(typed, comm, rank_map),
            )
        if not history.disagree or not (history.stuck or stops.get(comm)) or len(typed) < 2:
            continue
        if all(set(c) <= {"ops"} for c in typed.values()):
            root = root_from_counts(comm, {rank_map.get((comm, r), r): c.get("ops", 0) for r, c in typed.items()},
                                    "RAS counts")
            if root is not None:
                return root
            continue
        root = _root_from_type_counts(comm, _global(typed, comm, rank_map), complete=bool(history.tabled()))
        if root is not None:
            return root
    return None


def _global(typed: dict[int, dict[str, int]], comm: str, rank_map: dict) -> dict[str, dict[int, int]]:
    """comm rank -> type -> count, as type -> global rank -> count (every type any rank launched)."""
    types = sorted({t for c in typed.values() for t in c})
    return {t: {rank_map.get((comm, r), r): typed[r].get(t, 0) for r in sorted(typed)} for t in types}


def _root_from_type_counts(comm: str, by_type: dict[str, dict[int, int]], complete: bool) -> Root | None:
    """The ranks whose counts per collective type differ from the most common ones (of two equal groups, both):
    they launched more, fewer or other collectives, somewhere. Counts of the types that differ alone place
    nothing; a table of every type (`complete`) adds up to how many collectives each rank launched, which bounds
    the seq as launch counts do."""
    ranks = sorted({r for counts in by_type.values() for r in counts})
    vector = {r: tuple(by_type[t].get(r, 0) for t in sorted(by_type)) for r in ranks}
    groups: dict[tuple, list[int]] = {}
    for r in ranks:
        groups.setdefault(vector[r], []).append(r)
    if len(groups) < 2:
        return None
    ordered = sorted(groups.items(), key=lambda g: (-len(g[1]), g[1]))
    majority = len(ordered[0][1]) * 2 > len(ranks)
    reference = ordered[0][1] if majority else []
    outliers = sorted(r for v, members in ordered[1:] for r in members) if majority else ranks
    mine, theirs = sum(vector[outliers[0]]), sum(ordered[0][0])
    kind = EXTRA if mine > theirs else MISSING if mine < theirs else DIFFERENT_OPS
    differing = {t: counts for t, counts in by_type.items() if len(set(counts.values())) > 1}
    last = None
    if complete:
        totals = [sum(vector[r]) for r in outliers]
        last = max(totals) + (1 if kind == MISSING else 0)
    return Root(
        comm=comm, seq=1 if last else None, seq_range=(1, last) if last else None, outlier_ranks=outliers,
        reference_ranks=reference, kind=kind, size=abs(mine - theirs), pinned_by="RAS counts", majority=majority,
        counts_by_type=differing, reason=RangeReason.COUNTS if last else RangeReason.TYPE_COUNTS, ops={},
    )


def ras_only_wedge(ras: dict[str, RasHistory], rank_map: dict, stops: dict[str, list[str]],
                    dead: set[int], streams: Streams) -> Wedge | None:
    """Without streams for a comm, RAS counts still show who waits on whom."""
    for comm, history in sorted(ras.items()):
        counts = history.launched()
        if comm in streams.members or not counts or not (history.stuck or stops.get(comm)):
            continue
        global_counts = {rank_map.get((comm, r), r): c for r, c in counts.items()}
        missing = [rank_map.get((comm, r), r) for r in history.missing_ranks + history.dead_ranks]
        if not history.disagree and not missing:
            continue
        missing = sorted(set(missing))
        present = {r: c for r, c in global_counts.items() if r not in missing}
        if missing and present:
            # The present ranks wait, at the latest, in the last collective all of them launched.
            seq = min(present.values())
            inside, absent = sorted(present), missing
        else:
            return wedge_from_counts(comm, global_counts, {}, dead | set(missing), list(stops.get(comm, [])),
                                     history.locations)
        kind = WedgeKind.DEAD_RANK if (set(missing) | (dead & set(absent))) else WedgeKind.NO_PARTNER
        return Wedge(comm=comm, seq=seq, kind=kind, launched=global_counts, completed={},
                     waiting_ranks=inside, absent_ranks=absent, confirmed_by=list(stops.get(comm, [])),
                     evidence=history.locations)
    return None


def root_from_counts(comm: str, counts: dict[int, int], pinned_by: str) -> Root | None:
    """From how many collectives each rank launched (global rank -> count), the ranks that launched more or
    fewer than the others: the smallest group of equal counts (of two equal groups, the one behind). Where the
    odd collective is, counts cannot tell: the range is every seq up to the most the outliers launched."""
    values = sorted(set(counts.values()))
    if len(values) < 2:
        return None
    by_value = {v: [r for r, c in counts.items() if c == v] for v in values}
    minority = min(by_value, key=lambda v: len(by_value[v]))
    others = max(v for v in values if v != minority)
    ahead = minority > others
    last = minority if ahead else minority + 1
    return Root(
        comm=comm, seq=1, seq_range=(1, last), outlier_ranks=sorted(by_value[minority]),
        reference_ranks=sorted(r for r in counts if counts[r] != minority), kind=EXTRA if ahead else MISSING,
        size=abs(minority - others), pinned_by=pinned_by, reason=RangeReason.COUNTS, ops={},
    )


def wedge_from_counts(comm: str, counts: dict[int, int], completed: dict[int, int | None], dead: set[int],
                      confirmed_by: list[str], evidence: list[Location], ops: dict | None = None) -> Wedge:
    """The first collective not every rank launched (global rank -> launched count): who waits in it, who is
    absent."""
    seq = min(counts.values()) + 1
    inside = sorted(r for r, c in counts.items() if c >= seq)
    absent = sorted(r for r, c in counts.items() if c < seq)
    kind = WedgeKind.DEAD_RANK if dead & set(absent) else WedgeKind.NO_PARTNER
    return Wedge(comm=comm, seq=seq, kind=kind, launched=dict(counts), completed=dict(completed),
                 waiting_ranks=inside, absent_ranks=absent, confirmed_by=confirmed_by, evidence=evidence,
                 ops=dict(ops or {}))
