"""Roots that name every rank on either side, records alike in everything recorded: who the counts, and the
records of the rest, say departed among them.

Where no record says who departed (a range of lookalikes, or results checked wrong where no rank's records part),
the root names both sides; PyTorch's counts of a minority that launched more or fewer name its outliers, and the
ranks of the rest whose records part from the larger part of it departed too.
"""

from __future__ import annotations

from dataclasses import replace

import polars as pl

from .answers import MISSING, RangeReason, Root
from .counts_beside_records import records_pair
from .notes import CountedAmongLookalikes, Note
from .streams import SIGNATURE, Streams


def alike_on_record(root: Root, streams: Streams) -> bool:
    """Whether the root's records are alike in everything recorded over its range, so that no record says who
    departed: a range of lookalikes, or one seq that results checked right before it and wrong at it pin, where no
    rank's records part from the rest's (the ranks with no record there side with either)."""
    if root.reason is RangeReason.LOOKALIKE:
        return True
    return root.reason is None and root.seq_range is not None and parted_reference(
        root, set(root.outlier_ranks), streams) == {}


# The fields of each richer stage of comparison (divergence.STAGES), as the streams hold them: a call stack, or
# the one frame a source gives.
_RICHER_FIELDS = {"call sites": ("stack", "callsite"), "tags": ("tag",), "steps": ("step",)}


def parted_reference(root: Root, reference: set[int], streams: Streams) -> dict[int, int] | None:
    """The ranks of `reference` whose records in the root's range part from the larger part of it: at some seq
    there, a collective of another signature (op, count, ...) than the most of the others recorded, or of another
    call stack, tag or step where the root compared those (`Root.compared`, or only between the ranks that recorded
    them, `Root.compared_where_recorded`: records alike in signature that those part were told apart by the root
    itself, and are not alike), rank -> the first such seq. Ranks without a record there, or without the field that
    parts them, part from no one. None where no part is the largest at such a seq (an even split: which part
    departed is not told)."""
    parts = streams.comm_parts(root.comm)
    low, high = root.seq_range or (root.seq, root.seq)
    labels = (*root.compared, *root.compared_where_recorded)
    compared = [*SIGNATURE, *(f for label in labels for f in _RICHER_FIELDS.get(label, ()))]
    by_seq: dict[int, dict[int, tuple]] = {}
    for rank in sorted(reference):
        part = parts.get(rank)
        if part is None or not part.height:
            continue
        # (one tuple layout for every rank: a field a rank's records lack is unrecorded there)
        fields = [pl.col(c) if c in part.columns else pl.lit(None).alias(c) for c in compared]
        rows = part.filter(pl.col("seq") >= low) if high is None else part.filter(pl.col("seq").is_between(low, high))
        for row in rows.select("seq", *fields).iter_rows():
            if any(v is not None for v in row[1:]):
                by_seq.setdefault(row[0], {})[rank] = row[1:]
    parted: dict[int, int] = {}
    for seq, records in sorted(by_seq.items()):
        groups: list[list[int]] = []
        for rank, record in records.items():
            alike = [g for g in groups if all(records_pair(record, records[r]) for r in g)]
            if alike:
                alike[0].append(rank)
            else:
                groups.append([rank])
        if len(groups) < 2:
            continue
        sizes = sorted((len(g) for g in groups), reverse=True)
        if sizes[0] == sizes[1]:
            return None
        largest = max(groups, key=len)
        for rank in records:
            if rank not in largest and all(records_pair(records[rank], records[r]) for r in largest):
                continue  # (it pairs with the largest part too: unrecorded where they differ)
            if rank not in largest:
                parted.setdefault(rank, seq)
    return parted


def counted_among_lookalikes(root: Root, counted: Root, held: set[int],
                              parted: dict[int, int] | None = None) -> tuple[Root, list[Note]]:
    """A root that names every rank on either side (records alike in everything recorded, results misaligned, or
    records parting the ranks evenly) with the ranks PyTorch's counts show launching more or fewer, a minority, as
    its outliers, and the counts' kind where the records allow it: no record says who departed, and the fewest
    departing are the ones the counts name (`held`: ranks behind that are stuck elsewhere, which held back reads
    the same, are not named). `parted`: ranks of the rest whose records in the root's range part from the larger
    part of the rest (`parted_reference`), rank -> the seq where they do: they departed too, beside those the
    counts name, as the fewest departing (the other part, with those counted, would be more)."""
    ours = set(root.outlier_ranks)
    outliers = sorted(set(counted.outlier_ranks) - held)
    if not counted.majority or not outliers or not set(outliers) < ours \
            or not ours <= set(counted.outlier_ranks) | set(counted.reference_ranks):
        return root, []
    parted = {r: seq for r, seq in (parted or {}).items() if r in ours and r not in outliers}
    counted_ranks = outliers
    outliers = sorted({*outliers, *parted})
    if not set(outliers) < ours:
        return root, []
    kinds = (counted.kind, *(k for k in root.kinds if k != counted.kind)) if counted.kind in root.kinds else root.kinds
    named = replace(root, outlier_ranks=outliers, reference_ranks=sorted(ours - set(outliers)), majority=True,
                    kind=kinds[0] if kinds else root.kind, kinds=kinds)
    launched = "fewer" if counted.kind == MISSING else "more"
    return named, [CountedAmongLookalikes(tuple(outliers), tuple(counted_ranks), launched, counted.pinned_by,
                                          tuple(sorted(parted)), min(parted.values()) if parted else None)]
