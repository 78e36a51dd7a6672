"""How far a rank's records, compared with a reference rank's and found alike, show that it followed the program.

Counts may say that a rank launched fewer (or more) collectives than the others while its records agree with
theirs wherever both hold one: its departure then lies where the records do not tell it, and the records bound
that from below. A rank that left out one collective at seq p holds the program's seq k+1 at every seq k >= p; a
record of it at seq k that matches the reference's seq k, where the reference's seq k+1 differs from its seq k in
the fields compared, puts the departure after seq k (an extra one, before seq k where the reference's seq k-1
differs). Records alike in everything recorded (lookalike collectives, or fields one side lacks) bound nothing.

Worked example: ranks 0 and 7 hold tags of a step each (mtp.layers.0, mtp.layers.1, model.layers.0.mlp, lm_head)
for seq 1..12, alike; PyTorch's counts give rank 7 15 against rank 0's 16. Had rank 7 left out a collective at
seq 12 or before, its seq 12 would hold rank 0's seq 13, which no record shows; its seq 11 would hold lm_head, not
model.layers.0.mlp. It departed in seq 12 or later (seq 12 is the last that may still hold what follows it).
"""

from __future__ import annotations

from collections import Counter

import polars as pl

from .streams import SIGNATURE, Streams

# Fields that tell one collective from the next (a time or a completion state says nothing of which one it was).
COMPARED = [*SIGNATURE, "tag", "callsite", "step"]


def departs_no_sooner(rank_rows: pl.DataFrame, reference_rows: pl.DataFrame, shift: int) -> int | None:
    """The first seq at which the rank's departure may lie, as far as its records agree with the reference rank's
    (None where they bound nothing). `shift`: how many more (> 0) or fewer (< 0) collectives the counts give the
    rank; the records are read as that many left out (or added) at one place."""
    if shift == 0:
        return None
    fields = [f for f in COMPARED if f in rank_rows.columns and f in reference_rows.columns]
    mine = rank_rows.select("seq", *fields)
    theirs = reference_rows.select("seq", *[pl.col(f).alias(f"{f}_ref") for f in fields])
    # (the reference's record `shift` seqs back: what the rank's record would be, had it departed before it)
    shifted = reference_rows.select((pl.col("seq") + shift).alias("seq"), *[pl.col(f).alias(f"{f}_sh") for f in fields])
    both = [pl.col(f).is_not_null() & pl.col(f"{f}_ref").is_not_null() for f in fields]
    rows = (mine.join(theirs, on="seq").join(shifted, on="seq", how="left")
            .filter(pl.any_horizontal(both)).sort("seq")
            .select("seq",
                    parts=pl.any_horizontal([b & (pl.col(f) != pl.col(f"{f}_ref")) for f, b in zip(fields, both)]),
                    bounds=pl.any_horizontal([b & pl.col(f"{f}_sh").is_not_null()
                                              & (pl.col(f"{f}_sh") != pl.col(f"{f}_ref"))
                                              for f, b in zip(fields, both)]))
            .with_columns(pl.col("parts").fill_null(False), pl.col("bounds").fill_null(False)))
    # (where the records part, what follows compares nothing)
    alike = rows.filter(pl.col("parts").cum_sum() == 0)
    past = alike.filter("bounds").get_column("seq")
    if past.is_empty():
        return None
    return int(past.max()) + 1 if shift < 0 else int(past.max()) - shift + 1


def records_part(streams: Streams, comm: str, ranks: list[int], through: int) -> bool:
    """Whether the records of `ranks` in `comm` hold different values of a compared field at one seq up to `through`:
    ranks that all ran the program there would have recorded it alike (a field one rank lacks compares nothing)."""
    parts = [streams.parts[(comm, r)] for r in ranks if (comm, r) in streams.parts]
    fields = [f for f in COMPARED if parts and all(f in part.columns for part in parts)]
    if len(parts) < 2 or not fields:
        return False
    rows = pl.concat([part.filter(pl.col("seq") <= through).select("seq", *fields) for part in parts],
                     how="vertical_relaxed")
    differ = rows.group_by("seq").agg(pl.any_horizontal(pl.col(f).drop_nulls().n_unique() > 1 for f in fields)
                                      .alias("differ"))
    return bool(differ.get_column("differ").any())


def departures_bounded(comm: str, ranks: set[int], reference: list[int], launched: dict[int, int],
                       streams: Streams) -> dict[int, int]:
    """rank -> the first seq at which its departure may lie in `comm`, by its records against each reference rank's
    (the latest bound any gives: each reference rank compared is taken to follow the program there), for the ranks
    whose counts (`launched`) part from the reference's most common count and whose records bound it."""
    counts = Counter(launched[q] for q in reference if q in launched)
    if not counts:
        return {}
    usual = counts.most_common(1)[0][0]
    bounds: dict[int, int] = {}
    for rank in sorted(ranks):
        if rank not in launched or (comm, rank) not in streams.parts:
            continue
        found = [departs_no_sooner(streams.parts[(comm, rank)], streams.parts[(comm, q)], launched[rank] - usual)
                 for q in reference if (comm, q) in streams.parts]
        found = [b for b in found if b is not None]
        if found:
            bounds[rank] = max(found)
    return bounds
