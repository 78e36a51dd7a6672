"""Each rank's collectives in its own issue order across its communicators, and where the program places each
collective of one communicator among the others' collectives (`program_places`; each rank's own, `issue_places`).

What interleave.py and left_out_here.py read the ranks' departures from (and left_out_before.py, ran_ahead.py and
early_in_tie.py, `issued_before`); apart so that all of them share one reading of the orders.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import polars as pl

from ..model.kinds import is_p2p_comm
from .edits import Codes
from .streams import Streams


_ORDER_KEYS = (("file", "line"), ("fr_file", "fr_record"), (None, "time"))


def _issue_order(parts: dict[str, pl.DataFrame]) -> pl.DataFrame | None:
    """One rank's collectives of every communicator (parts: comm -> rows) as (comm, seq) in the order it issued
    them, or None where no one source orders all of them (rows from different files have no common order)."""
    for source, position in _ORDER_KEYS:
        columns = [position] if source is None else [source, position]
        if any(c not in part.columns or part.get_column(c).null_count() for part in parts.values() for c in columns):
            continue
        rows = pl.concat([part.select(pl.lit(comm).alias("comm"), pl.col("seq"),
                                      pl.col(position).cast(pl.Float64).alias("at"),
                                      *([pl.col(source).alias("source")] if source else []))
                          for comm, part in parts.items()], how="vertical_relaxed")
        if source is not None and rows.get_column("source").n_unique() > 1:
            continue
        if rows.get_column("at").n_unique() != rows.height:
            continue  # ties: no order
        return rows.sort("at").select("comm", "seq")
    return None


def _places(order: pl.DataFrame, comm: str, firsts: dict[str, int]) -> dict[int, int]:
    """seq in `comm` -> how many collectives of the rank's other communicators it issued before it (by their
    seqs, so a ring that dropped its oldest entries still counts them); a seq before which some other
    communicator's records have not begun is left out (what it issued there is unknown). The seq after its last
    one here gives how many it issued in all."""
    last = [pl.when(pl.col("comm") == c).then(pl.col("seq")).otherwise(None).forward_fill().fill_null(first - 1)
            .alias(f"last{i}") for i, (c, first) in enumerate(sorted(firsts.items()))]
    known = [(pl.col(f"last{i}") >= first) | pl.lit(first == 1) for i, (_, first) in enumerate(sorted(firsts.items()))]
    marked = order.with_columns(last).with_columns(pl.sum_horizontal(*(pl.col(f"last{i}") for i in range(len(last))))
                                                   .alias("place"), pl.all_horizontal(known).alias("known"))
    mine = marked.filter((pl.col("comm") == comm) & pl.col("known"))
    places = dict(zip(mine.get_column("seq").to_list(), mine.get_column("place").to_list()))
    ends = order.filter(pl.col("comm") == comm).get_column("seq")
    places[int(ends.max()) + 1] = int(marked.get_column("place").tail(1).item())
    return places


def issue_size(streams: Streams, comm: str) -> int:
    """How many ranks `comm` has: the size its records give (an NCCL log's nranks), else the ranks on record."""
    sizes = [part.get_column("comm_size").max() for (c, _), part in streams.parts.items()
             if c == comm and "comm_size" in part.columns]
    recorded = max((int(n) for n in sizes if n is not None), default=0)
    return max(recorded, len(set(streams.members.get(comm, [])) | set(streams.expected_members.get(comm, []))))


def issue_places(streams: Streams, comm: str) -> tuple[dict[int, dict[int, int]], dict[int, int]] | None:
    """Per rank of `comm`, seq -> collectives of its other communicators it issued before it (see _places; the seq
    after its last one here gives how many it issued in all), and per rank how many it launched here. A rank whose
    file was cut short keeps the places of what it issued before the cut, and no end. None where the records do
    not order each rank's collectives, or the ranks are in other communicators of different shapes (other programs,
    whose counts do not compare)."""
    if is_p2p_comm(comm):
        return None
    ranks = streams.members.get(comm, [])
    if len(ranks) < 3:
        return None
    places: dict[int, dict[int, int]] = {}
    launched: dict[int, int] = {}
    shapes: dict[int, tuple[int, ...]] = {}
    cut: set[int] = set()
    for rank in ranks:
        parts = {c: part for (c, r), part in streams.parts.items() if r == rank and not is_p2p_comm(c)
                 and part.height}
        if comm not in parts:
            return None
        others = [c for c in parts if c != comm]
        order = _issue_order(parts) if others else None
        if any((c, rank) in streams.cut for c in parts):
            # A file cut short: what it issued before its cut sits where it did, but how far it got is unknown
            # (and a communicator whose records its cut left out entirely would make it look early).
            cut.add(rank)
            launched[rank] = int(parts[comm].get_column("seq").max())
            places[rank] = {}
            if order is None:
                continue
        elif order is None:
            return None
        shapes[rank] = tuple(sorted(issue_size(streams, c) for c in others))
        firsts = {c: int(parts[c].get_column("seq").min()) for c in others}
        places[rank] = _places(order, comm, firsts)
        if rank in cut:
            del places[rank][max(places[rank])]
    if len({shapes[r] for r in shapes if r not in cut}) != 1:
        return None  # other communicators of other shapes run other programs: their counts do not compare
    shape = next(shapes[r] for r in shapes if r not in cut)
    for rank in cut:
        if shapes.get(rank) != shape:
            places[rank] = {}
    launched.update({r: max(p) - 1 for r, p in places.items() if r not in cut})
    return places, launched


def program_places(streams: Streams, comm: str, apart: frozenset[int] = frozenset(),
                   voters: frozenset[int] | None = None
                   ) -> tuple[dict[int, dict[int, int]], dict[int, int], dict[int, int]] | None:
    """Per rank of `comm`, seq -> collectives of its other communicators it issued before it, and how many it
    launched here (issue_places); and the program's place of each seq (the strict majority of the ranks that
    launched it; of those among `voters` alone, where given: one side of an even split read as the program, the
    other ranks keep their places). Ranks `apart` (they departed in another communicator) keep their counts but no
    places: theirs may be off the program's by that departure. None where issue_places gives none, or no strict
    majority places every seq."""
    found = issue_places(streams, comm)
    if found is None:
        return None
    places, launched = found
    places = {**places, **{r: {} for r in apart if r in places}}
    program: dict[int, int] = {}
    for seq in range(1, max(launched.values()) + 2):
        seen = Counter(p[seq] for r, p in places.items()
                       if seq in p and seq <= launched[r] and (voters is None or r in voters))
        if seen:
            value, n = seen.most_common(1)[0]
            if n * 2 <= sum(seen.values()):
                return None
            program[seq] = value
    return places, launched, program


def comm_orders(streams: Streams, rank: int) -> tuple[pl.DataFrame, list[str]] | None:
    """A rank's collectives of all its communicators in the order it issued them, and those communicators (None
    where no one source orders them)."""
    parts = {c: part for (c, r), part in streams.parts.items() if r == rank and not is_p2p_comm(c) and part.height}
    order = _issue_order(parts) if len(parts) > 1 else None
    return None if order is None else (order, list(parts))


def issued_before(streams: Streams, rank: int, comm: str, seq: int) -> dict[str, int] | None:
    """The last seq of each other communicator a rank issued before its `seq` of `comm` (before the end of its
    records where it never issued that seq), or None where nothing orders its collectives."""
    own = comm_orders(streams, rank)
    if own is None:
        return None
    order = own[0].with_row_index("at")
    at = order.filter((pl.col("comm") == comm) & (pl.col("seq") == seq)).get_column("at")
    before = order if at.is_empty() else order.filter(pl.col("at") < at.item())
    last = before.filter(pl.col("comm") != comm).group_by("comm").agg(pl.col("seq").max())
    return dict(zip(last.get_column("comm").to_list(), last.get_column("seq").to_list()))


def place_codes(streams: Streams, comm: str, start: int, apart: frozenset[int] = frozenset()) -> dict[int, Codes]:
    """Per rank of `comm` with places (issue_places), its places as codes from seq `start` on: at each position,
    how many collectives of its other communicators it issued before that collective here, plus one (0: not known,
    as for any field a record lacks). Ranks `apart` (they departed in another communicator) have none: theirs may
    be off the program's by that departure. Empty where issue_places gives none."""
    found = issue_places(streams, comm)
    if found is None:
        return {}
    places, launched = found
    codes: dict[int, Codes] = {}
    for rank, mine in places.items():
        if rank in apart:
            continue
        known = {seq: place for seq, place in mine.items() if start <= seq <= launched[rank]}
        if not known:
            continue
        values = np.zeros(max(known) - start + 1, dtype=np.uint64)
        for seq, place in known.items():
            values[seq - start] = place + 1
        codes[rank] = Codes({"place": values}, len(values))
    return codes
