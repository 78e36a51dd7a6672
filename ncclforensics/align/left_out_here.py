"""Ranks whose issue orders show that they left out a collective of a communicator rather than stopped
(`skipped_here`), and the other communicators where they may instead have run extra collectives and then stopped
(`early_elsewhere`).

A rank that stopped, held back elsewhere or on the host, goes no further anywhere; one that went on elsewhere past
where the program issues a collective here, without issuing it, left it out. Apart from interleave.py, which reads
an extra collective issued early from the same orders.
"""

from __future__ import annotations

import polars as pl

from ..model.kinds import is_p2p_comm
from .issue_orders import comm_orders, program_places
from .streams import Streams


def skipped_here(streams: Streams, comm: str, ranks: list[int]) -> dict[int, tuple[int, int]]:
    """Of `ranks` (ranks of `comm` that launched fewer than the others), those whose issue orders show that they
    left out a collective of `comm` rather than stopped: rank -> the seqs it may have left out (low, high). Such a
    rank issued a collective here, or its last collectives elsewhere, after more of its other communicators'
    collectives than the program has before that seq (`high`): it went on past where the program issues that seq
    (a rank that stopped, held back elsewhere or on the host, goes no further anywhere). A collective it issued
    where the program issues the same seq, and not where the program issues the next, comes before the one it
    left out (`low`). A rank with no record here at all is placed by all it issued elsewhere (`_issued_elsewhere`)."""
    found = program_places(streams, comm)
    if found is None:
        return {}
    places, launched, program = found
    skipped = {}
    for r in ranks:
        if r not in places and 1 in program and (elsewhere := _issued_elsewhere(streams, comm, r)) is not None:
            # No record here at all, yet its whole records elsewhere go on past where the program issues seq 1:
            # it left seq 1 out
            if elsewhere > program[1]:
                skipped[r] = (1, 1)
            continue
        if r not in places:
            continue
        past = [seq for seq in sorted(places[r]) if seq <= launched[r] + 1 and seq in program
                and places[r][seq] > program[seq]]
        if not past:
            continue
        aligned = [seq for seq in places[r] if seq < past[0] and seq in program and places[r][seq] == program[seq]
                   and program.get(seq + 1, program[seq]) != program[seq]]
        skipped[r] = (max(aligned, default=0) + 1, past[0])
    return skipped


def _issued_elsewhere(streams: Streams, comm: str, rank: int) -> int | None:
    """How many collectives a rank with no records in `comm` issued in its other communicators, where its records
    of each begin at seq 1 and none was cut short (None otherwise): all it issued before `comm`'s first seq, had
    it issued that."""
    parts = [(c, part) for (c, r), part in streams.parts.items() if r == rank and c != comm
             and not is_p2p_comm(c) and part.height]
    if not parts or (comm, rank) in streams.parts and streams.parts[(comm, rank)].height:
        return None
    if any((c, rank) in streams.cut or int(part.get_column("seq").min()) != 1 for c, part in parts):
        return None
    return sum(int(part.get_column("seq").max()) for _, part in parts)


def early_elsewhere(streams: Streams, comm: str, left_out: dict[int, tuple[int, int]]) -> dict[str, tuple[int, ...]]:
    """The other communicators where ranks `skipped_here` found to have left out a collective here, on the end of
    their records here alone, may instead have issued extra collectives and then stopped: each collective such a
    rank issued there after its last one here sits, for a peer of both communicators, after more collectives of
    this one (its issue orders there part from the peer's). A rank that stopped after an extra block there goes on
    past where the program issues its next collective here just as one that left that one out and went on does;
    only the end of its records here tells them apart, and it tells nothing. Worked example: rank 0 issues
    tensor-parallel all-reduces 7 and 8 after world collective 4, rank 1 after world collective 6, and rank 0's
    records of the world end at 4: it left out world collectives 5 and 6, or it ran two extra ones of its
    tensor-parallel group (a drafter's pass) and stopped there, held back; the records read the same. Returns each
    such communicator with the ranks that may have run early there (a rank is a member of its own communicators
    only)."""
    found: dict[str, set[int]] = {}
    for rank, (_, high) in left_out.items():
        mine = streams.parts.get((comm, rank))
        if mine is None or not mine.height or high != int(mine.get_column("seq").max()) + 1:
            continue  # it issued a collective here past the one it left out: it went on here too
        own = comm_orders(streams, rank)
        if own is None or any((c, rank) in streams.cut for c in own[1]):
            continue
        ahead = _last_here_before(own[0], comm)
        tail = ahead.filter((pl.col("comm") != comm) & (pl.col("here") == ahead.get_column("here").max()))
        for other in tail.get_column("comm").unique().to_list():
            seqs = set(tail.filter(pl.col("comm") == other).get_column("seq").to_list())
            peers = [p for p in streams.members.get(other, []) if p != rank and p in streams.members.get(comm, [])]
            for peer in peers:
                theirs = comm_orders(streams, peer)
                if theirs is None:
                    continue
                placed = _last_here_before(theirs[0], comm).filter((pl.col("comm") == other)
                                                                   & pl.col("seq").is_in(list(seqs)))
                if placed.height and placed.get_column("here").max() > ahead.get_column("here").max():
                    found.setdefault(other, set()).add(rank)
                    break
    return {other: tuple(sorted(ranks)) for other, ranks in sorted(found.items())}


def _last_here_before(order: pl.DataFrame, comm: str) -> pl.DataFrame:
    """The issue order with `here`: the last seq of `comm` issued at or before each row (0 before its first)."""
    return order.with_columns(pl.when(pl.col("comm") == comm).then(pl.col("seq")).otherwise(None)
                              .forward_fill().fill_null(0).alias("here"))
