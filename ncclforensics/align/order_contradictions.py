"""Two ranks whose whole records give their two shared communicators' collectives in orders no one program gives.

One program issues the collectives of its communicators in one order, and NCCL needs every rank to issue them in
that order (operations on different communicators submitted in different orders across ranks may deadlock). A
rank's records of one file (an NCCL log's lines, a Flight Recorder dump's entries) are written as it enqueues
each collective, in its issue order, so they are a prefix of that order wherever they end. Where rank A's records
hold collective X of one communicator, and either Y of another after it or, whole, no Y at all, A issued X before Y;
where rank B's put Y before X the same way, no one program gives both, and some rank departed. Records taken at
different moments (skew) give prefixes of one order, which never part so: this needs no stop and no majority.

Worked example (seed 1078644): rank 0's whole log holds TP seqs 8..10 after world seq 2, and no world seq 3; rank 1,
whose drafter skipped a TP collective alone, holds world seq 3 before its TP seq 8 and ends TP at seq 9. In rank
0's order TP 8 comes before world 3, in rank 1's after.

A file cut short says nothing of what it did not record, so a rank "never" issues a collective only where its
records of that communicator end in a whole file that records launches; the two collectives must sit in one file
(two files may have been taken at different moments). Send/Recv comms are left out: a send pairs with its peer's
receive, not with a place in one program. (Collectives of two communicators inside one NCCL group call are
enqueued together, in any order; PyTorch coalesces one process group's collectives at a time, so its ranks' lines
do not part so.)
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import permutations

import numpy as np
import polars as pl

from ..model import Location
from ..model.kinds import is_p2p_comm
from .answers import Root
from .streams import Streams
from .wedge import Wedge


@dataclass(frozen=True)
class OrderContradiction:
    """`first_rank` issued `first` before `second` (or never `second`); `second_rank` issued `second` before
    `first` (or never `first`). Each is a (comm, seq) of a different communicator both ranks are members of."""

    first_rank: int
    second_rank: int
    first: tuple[str, int]
    second: tuple[str, int]
    first_at: Location  # where first_rank issued `first`
    second_at: Location  # where second_rank issued `second`
    first_rank_issued_second: bool  # False: its whole records of that communicator end before `second`
    second_rank_issued_first: bool

    @property
    def comms(self) -> tuple[str, str]:
        """The two communicators."""
        return self.first[0], self.second[0]


@dataclass(frozen=True)
class _Order:
    """One rank's collectives of two communicators in the order one file gives them."""

    seqs: dict[str, np.ndarray]  # comm -> its seqs, rising
    placed: dict[str, np.ndarray]  # comm -> for each of its seqs, the other comm's last seq before it (-1: unknown)
    issued: dict[str, dict[int, Location]]  # comm -> seq -> where
    whole: dict[str, bool]  # comm -> whether a seq past its last one here was never issued (before the file ends)


def order_contradictions(streams: Streams, comms: set[str] | None = None) -> list[OrderContradiction]:
    """Every pair of ranks and pair of communicators (one of them in `comms`, where given) whose records give issue
    orders no one program gives (module docstring): the earliest such pair of collectives of each."""
    names = sorted(c for c in streams.members if not is_p2p_comm(c))
    found: list[OrderContradiction] = []
    for i, one in enumerate(names):
        for other in names[i + 1:]:
            if comms is not None and not {one, other} & comms:
                continue
            shared = sorted(set(streams.members[one]) & set(streams.members[other]))
            orders = {r: o for r in shared if (o := _order(streams, r, one, other)) is not None}
            # (ranks whose records are alike cannot contradict each other: compare one of each)
            alike: dict[tuple, int] = {}
            for rank, order in orders.items():
                alike.setdefault(_signature(order), rank)
            for a, b in permutations(sorted(alike.values()), 2):
                for first, second in ((one, other), (other, one)):
                    hit = _contradiction(a, orders[a], b, orders[b], first, second)
                    if hit is not None:
                        found.append(hit)
                        break
    unique = {tuple(sorted((c.first_rank, c.second_rank))) + tuple(sorted(c.comms)): c for c in reversed(found)}
    return sorted(unique.values(), key=lambda c: (sorted(c.comms), c.first_rank, c.second_rank))


def order_contradiction_at(streams: Streams, root: Root | None, wedge: Wedge | None) -> OrderContradiction | None:
    """An order contradiction in the root's comm or the wedge's (or its wait-for cycle's), one in the root's own
    comm first (it says most of the root); None where there is none: some rank departed there, whatever the moment
    each record ends."""
    touched = ({root.comm} if root is not None else set()) | (
        {wedge.comm, *(c for _, c, _ in wedge.cycle)} if wedge is not None else set())
    found = order_contradictions(streams, touched) if touched else []
    return min(found, key=lambda c: root is None or root.comm not in c.comms, default=None)


def _contradiction(a: int, mine: _Order, b: int, theirs: _Order, first: str, second: str
                   ) -> OrderContradiction | None:
    """The earliest `first` collective that rank a issued before a `second` one that rank b issued before it.

    Rank a puts its `first` seq s before `second` seq t = (its last `second` seq before s) + 1, the earliest t it
    can; a later t only asks more of rank b, which must have issued t, and s after it or, whole, not at all. (Over
    every s at once: a pair of long records is compared in a few array operations.)"""
    seqs, later = mine.seqs[first], mine.placed[first] + 1
    issued_later = _holds(mine.seqs[second], later)
    mine_orders = (later > 0) & (issued_later | (mine.whole[second] & (later > mine.seqs[second][-1])))
    at = np.minimum(np.searchsorted(theirs.seqs[first], seqs), len(theirs.seqs[first]) - 1)
    issued_there = theirs.seqs[first][at] == seqs
    # (a place unknown there is -1, below every t)
    theirs_orders = np.where(issued_there, theirs.placed[first][at] >= later,
                             theirs.whole[first] & (seqs > theirs.seqs[first][-1]))
    hits = np.flatnonzero(mine_orders & _holds(theirs.seqs[second], later) & theirs_orders)
    if not hits.size:
        return None
    seq, t = int(seqs[hits[0]]), int(later[hits[0]])
    return OrderContradiction(a, b, (first, seq), (second, t), mine.issued[first][seq], theirs.issued[second][t],
                              bool(issued_later[hits[0]]), bool(issued_there[hits[0]]))


def _holds(seqs: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """For each wanted seq, whether the rising `seqs` hold it."""
    at = np.minimum(np.searchsorted(seqs, wanted), len(seqs) - 1)
    return seqs[at] == wanted


def _order(streams: Streams, rank: int, one: str, other: str) -> _Order | None:
    """The rank's collectives of the two communicators as one file orders them; None where no one file holds them
    all with a line (or dump entry) each, or a communicator's seqs do not rise along it."""
    parts = {c: streams.parts.get((c, rank)) for c in (one, other)}
    if any(part is None or not part.height or "file" not in part.columns for part in parts.values()):
        return None
    rows = pl.concat([part.select(pl.lit(c).alias("comm"), pl.col("seq").cast(pl.Int64),
                                  pl.col("file").cast(pl.Utf8), pl.col("line").cast(pl.Int64),
                                  pl.col("record").cast(pl.Int64))
                      for c, part in parts.items()])
    at = pl.coalesce("line", "record")
    if rows.get_column("file").null_count() or rows.get_column("file").n_unique() != 1 \
            or rows.select(at.null_count()).item() or rows.select(at.n_unique()).item() != rows.height:
        return None
    issued: dict[str, dict[int, Location]] = {one: {}, other: {}}
    before: dict[str, list[int]] = {one: [], other: []}
    last: dict[str, int | None] = {one: None, other: None}
    firsts = {c: int(part.get_column("seq").min()) for c, part in parts.items()}
    for comm, seq, file, line, record in rows.sort(at).iter_rows():
        if last[comm] is not None and seq <= last[comm]:
            return None
        peer = other if comm == one else one
        # (before the other comm's first record, what it issued there is known only where that record is its seq 1)
        before[comm].append(last[peer] if last[peer] is not None else (0 if firsts[peer] == 1 else -1))
        issued[comm][seq] = Location(file, line, record)
        last[comm] = seq
    whole = {c: (c, rank) in streams.launch_ends and (c, rank) not in streams.cut and rank not in streams.cut_ranks
             for c in (one, other)}
    return _Order({c: np.fromiter(issued[c], np.int64) for c in issued},
                  {c: np.array(before[c], np.int64) for c in before}, issued, whole)


def _signature(order: _Order) -> tuple:
    """What the contradiction reads of a rank's order: its places and where its records are whole."""
    return tuple((c, order.seqs[c].tobytes(), order.placed[c].tobytes(), order.whole[c]) for c in sorted(order.seqs))
