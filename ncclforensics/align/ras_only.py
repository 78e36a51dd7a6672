"""What RAS replies alone say about a communicator no stream covers: which ranks launched more or fewer
(a root with a range, never a seq), and who waits on whom (a wedge). Also the map from RAS's comm ranks to
global ranks."""

from __future__ import annotations

import polars as pl

from ..model import Evidence, WedgeKind
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
            values = sorted(set(counts.values()))
            by_value = {v: [r for r, c in counts.items() if c == v] for v in values}
            minority_value = min(by_value, key=lambda v: len(by_value[v]))
            outliers = [rank_map.get((comm, r), r) for r in by_value[minority_value]]
            low_count = minority_value
            high_count = max((v for v in values if v != minority_value), default=minority_value)
        else:
            continue
        ahead = low_count > high_count
        last = max(low_count, high_count) if ahead else low_count + 1
        kind = EXTRA if ahead else MISSING
        return Root(
            comm=comm, seq=1, seq_range=(1, last), outlier_ranks=sorted(outliers), reference_ranks=[],
            kind=kind, size=abs(low_count - high_count), pinned_by="RAS counts",
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
            seq = min(global_counts.values()) + 1
            inside = sorted(r for r, c in global_counts.items() if c >= seq)
            absent = sorted(r for r, c in global_counts.items() if c < seq)
        kind = WedgeKind.DEAD_RANK if (set(missing) | (dead & set(absent))) else WedgeKind.NO_PARTNER
        return Wedge(comm=comm, seq=seq, kind=kind, launched=global_counts, completed={},
                     waiting_ranks=inside, absent_ranks=absent, confirmed_by=list(stops.get(comm, [])),
                     evidence=history.locations)
    return None
