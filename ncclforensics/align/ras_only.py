"""What RAS replies alone say about a communicator no stream covers: which ranks launched more or fewer
(a root with a range, never a seq), and who waits on whom (a wedge). Also the map from RAS's comm ranks to
global ranks."""

from __future__ import annotations

import polars as pl

from ..model import Evidence, Location, WedgeKind
from .divergence import EXTRA, MISSING, STOPPED, Root
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
    """Without streams, RAS counts still show which ranks launched more or fewer, but not where."""
    for comm, history in sorted(ras.items()):
        if comm in streams.members:
            continue
        lost = sorted(set(history.missing_ranks) | set(history.dead_ranks))
        counts = history.launched()
        if lost and counts:
            last = max(counts.values())
            return Root(
                comm=comm, seq=1, seq_range=(1, last), outlier_ranks=sorted(rank_map.get((comm, r), r) for r in lost),
                reference_ranks=sorted(rank_map.get((comm, r), r) for r in counts), kind=STOPPED, size=0,
                pinned_by="RAS counts",
                ambiguity=f"RAS has no data from the missing rank(s), so where they stopped is unknown: at or "
                          f"before seq {last}, the most any other rank launched", ops={},
            )
        if not history.disagree or not (history.stuck or stops.get(comm)):
            continue
        block = history.states[-1][1]
        groups = block.count_groups
        if groups:
            sizes = sorted(groups, key=lambda g: g.nranks)
            minority, majority = sizes[0], sizes[-1]
            if not minority.ranks or minority.count is None or majority.count is None:
                continue
            outliers = [rank_map.get((comm, r), r) for r in minority.ranks]
            low_count, high_count = minority.count, majority.count
        elif counts:
            root = root_from_counts(comm, {rank_map.get((comm, r), r): c for r, c in counts.items()}, "RAS counts",
                                    "RAS gives")
            if root is not None:
                return root
            continue
        else:
            continue
        ahead = low_count > high_count
        last = max(low_count, high_count) if ahead else low_count + 1
        return Root(
            comm=comm, seq=1, seq_range=(1, last), outlier_ranks=sorted(outliers), reference_ranks=[],
            kind=EXTRA if ahead else MISSING, size=abs(low_count - high_count), pinned_by="RAS counts",
            ambiguity="RAS gives only how many collectives each rank launched, not which; any seq up to "
                      f"{last} fits", ops={},
        )
    return None


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


def root_from_counts(comm: str, counts: dict[int, int], pinned_by: str, source: str) -> Root | None:
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
        size=abs(minority - others), pinned_by=pinned_by,
        ambiguity=f"{source} only how many collectives each rank launched, not which; any seq up to {last} fits",
        ops={},
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
