"""NCCL debug lines without INIT lines: fragments pasted into an issue, or logs of `NCCL_DEBUG_SUBSYS=COLL` alone.

Without INIT lines a COLL line names its process (`host:pid`) and its comm pointer (an address in that process),
but neither the communicator's hash nor the rank, so no two processes' lines can be tied to one communicator.
Where no file gives a rank at all, the lines of one communicator size (`[nranks=8]`) are taken as one
communicator, each process as one rank, numbered by host, then pid (launchers usually start ranks in order, but
the report says it is a stand-in), and the opCount as the position: seq = opCount + 1. The usual comparison
then applies: at opCount 0, one process broadcasting 25503912 halves while the others broadcast 53 longs is a
mismatch at the first collective of the communicator.
"""

from __future__ import annotations

from dataclasses import replace

import polars as pl

from ..model import Evidence, conform
from .notes import NoInitLines, Note

SHOWN = 8  # stand-in ranks the note names


def unranked_streams(evidence: list[Evidence]) -> tuple[list[Evidence], list[Note]]:
    """`evidence` with rankless NCCL log rows given stand-in ranks, a communicator per size and seq from opCount,
    where no file names any rank; and the note that says so. Otherwise `evidence` as it was."""
    logs = [item for item in evidence if item.declares("opcount_positions", also=True) and item.collectives.height]
    if not logs or any(item.collectives.select(pl.col("rank").is_not_null().any()).item() for item in evidence):
        return evidence, []
    rows = pl.concat([item.collectives.with_columns(pl.lit(index).alias("_file"))
                      for index, item in enumerate(logs)])
    rows = rows.filter(pl.col("host").is_not_null() & pl.col("pid").is_not_null()
                       & pl.col("opcount").is_not_null() & (pl.col("comm_size") > 1))
    # A process in two communicators of one size cannot say which of its lines belong together: leave that size.
    ambiguous = rows.group_by("comm_size").agg(pl.col("comm").n_unique().alias("comms"),
                                               pl.struct("host", "pid").n_unique().alias("processes"))
    sizes = ambiguous.filter(pl.col("comms") == pl.col("processes"))["comm_size"]
    rows = rows.filter(pl.col("comm_size").is_in(sizes.implode()))
    if rows.height == 0:
        return evidence, []
    # Grouped ops share an opCount: the first line of each (process, opCount) stands for it.
    rows = rows.unique(["comm_size", "host", "pid", "opcount"], keep="first", maintain_order=True)
    processes = rows.select("host", "pid").unique().sort("host", "pid").with_row_index("_rank")
    rows = rows.join(processes, on=["host", "pid"], how="left", maintain_order="left").with_columns(
        pl.col("_rank").cast(pl.Int64).alias("rank"),
        pl.format("[nranks={}]", pl.col("comm_size")).alias("comm"),  # NCCL's own notation on the line
        (pl.col("opcount") + 1).alias("seq"),
    )
    by_file = {index: conform(part) for (index,), part in rows.partition_by("_file", as_dict=True).items()}
    changed = [replace(item, collectives=by_file[index]) if index in by_file else item
               for index, item in enumerate(logs)]
    replaced = {id(old): new for old, new in zip(logs, changed)}
    counts = rows.group_by("comm_size").agg(pl.struct("host", "pid").n_unique().alias("seen")).sort("comm_size")
    # (a paste of a few ranks' lines: the others may be anywhere)
    note = NoInitLines(stand_ins=tuple(processes.head(SHOWN).iter_rows()), more=max(0, processes.height - SHOWN),
                       partial=tuple((size, seen) for size, seen in counts.iter_rows() if seen < size))
    return [replaced.get(id(item), item) for item in evidence], [note]
