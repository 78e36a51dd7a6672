"""How NCCL pairs the collectives of one seq when ranks launched different ones, as measured on NCCL 2.28.9: which
pairings hang, and which complete on some ranks only (so that one rank's completion bounds no other's)."""

from __future__ import annotations

import numpy as np
import polars as pl

from .answers import OpAt, ops_at
from .comm_streams import CommStreams


# NCCL 2.28.9 on an H200, as measured: collectives of one type pair and complete whatever their counts; an
# AllGather pairs with an AllReduce and completes where the gathered count equals the reduced one; any other
# mix of types hangs, every side `started`.
def pairing_hangs(ops: list[OpAt], comm_size: int | None) -> bool:
    """Whether NCCL leaves this pairing of collectives (one per rank, at one seq) hanging."""
    types = {op.op for op in ops}
    if len(types) < 2 or None in types:
        return False
    if types == {"AllGather", "AllReduce"} and comm_size:
        gathered = {op.count * comm_size for op in ops if op.op == "AllGather" and op.count is not None}
        reduced = {op.count for op in ops if op.op == "AllReduce" and op.count is not None}
        return not (len(gathered) == 1 and gathered == reduced)
    return True


def first_hanging_pairing(rows: CommStreams, low: int, high: int) -> int | None:
    """The first seq in [low, high] whose collectives, as every rank that recorded one there launched them, pair
    in a way NCCL never completes (where no rank records completing it). Two ranks on record there suffice: such a
    pairing completes on no rank of it, so whatever a rank with no record of it launched (its log cut short before
    it, or one it never reached) leaves it hanging."""
    if high < low or not rows.parts:
        return None
    size = len(rows.parts)
    low = max(low, rows.start) if rows.start is not None else low
    if high < low:
        return None
    # Rank by rank: per seq, whether the ops of the ranks that launched it differ (arrays of the seqs only).
    codes: dict[str, int] = {}
    reference = np.full(high - low + 1, -1, dtype=np.int64)
    differs = np.zeros(high - low + 1, dtype=bool)
    for part in rows.parts.values():
        mine = part.filter(pl.col("seq").is_between(low, high)).select("seq", "op")
        names = mine.get_column("op").fill_null("")  # no op recorded: a code of its own, as a name no op has
        for name in names.unique().to_list():  # a handful of names: coded in Python, the rows by polars
            codes.setdefault(name, len(codes))
        at = mine.get_column("seq").to_numpy() - low
        op = names.replace_strict(codes, return_dtype=pl.Int64).to_numpy()
        first = reference[at] == -1
        reference[at[first]] = op[first]
        differs[at] |= reference[at] != op
    mixed_seqs = (np.flatnonzero(differs) + low).tolist()
    for seq in mixed_seqs[:64]:
        ops = list(ops_at(rows, seq).values())
        if any(op.state == "completed" for op in ops):
            continue
        sizes = {op_size for op in ops if (op_size := _comm_size(rows, op.rank)) is not None}
        if pairing_hangs(ops, sizes.pop() if len(sizes) == 1 else size):
            return seq
    return None


def _comm_size(rows: CommStreams, rank: int) -> int | None:
    sizes = rows.parts[rank].select(pl.col("comm_size").drop_nulls().first()).item()
    return int(sizes) if sizes is not None else None


# NCCL 2.28.9, as measured: the one pairing that completes on some ranks and not others is an AllGather with an
# AllReduce of equal bytes, which completes on the gather side only.
COMPLETES_ALONE = frozenset({"AllGather"})


def completed_everywhere_from(rows: CommStreams, completed: dict[int, int | None]) -> tuple[int, list[int]]:
    """(the first seq some rank may not have completed, the ranks whose completion of it may be theirs alone), by
    the last collective any rank is on record as completing. Each rank took part in it (NCCL completes none without
    every rank's part), so every rank completed the one before it; the others completed it too where a rank
    completed it with a collective that completes on every side or none (any but an AllGather), or every rank is on
    record completing it, or launching an AllGather there (none to pair with an AllReduce): the stop is past it.
    Where each rank on record completing it did so with an AllGather (or a collective of no recorded type), it may
    have paired with an AllReduce of equal bytes that never completes: the stop may be it. Worked example: ranks 0, 2 and 3 trace seq 6 completed, an all-gather; rank 1's trace ends
    at 5; rank 1 launched an all-reduce there that hangs: the stop is at or after seq 6, not 7."""
    last = max(done for done in completed.values() if done is not None)
    alone = []
    for rank, done in sorted(completed.items()):
        if done != last:
            continue
        row = rows.row_at(rank, last) if rank in rows.parts else None
        if row is not None and row.get("op") is not None and row["op"] not in COMPLETES_ALONE:
            return last + 1, []
        alone.append(rank)
    if len(alone) == len(completed) or _all_gathers_everywhere(rows, completed, last):
        return last + 1, []
    return last, alone


def _all_gathers_everywhere(rows: CommStreams, completed: dict[int, int | None], seq: int) -> bool:
    """Whether every rank is on record launching an all-gather at `seq` (an NCCL log line will do): with no
    all-reduce to pair with, it completes on every rank or none."""
    ops = [row.get("op") if rank in rows.parts and (row := rows.row_at(rank, seq)) is not None else None
           for rank in completed]
    return all(op is not None and op in COMPLETES_ALONE for op in ops)
