"""The ranks per-step checksums add to a root that other evidence gives: launch counts, or records that begin late.

Beside a root from launch counts (RAS, PyTorch's marks), which place nothing, the ranks whose checksums part from
the others' departed too: the root names them as well (one the counts place on neither side too, where its sums were
alike with theirs in another step, or PyTorch's lines place it in the counted group: group_places.py); so do the ranks the counts leave together (launching as many) whose checksums
part from the rest of them. The same holds the other way round for a root whose records begin after the ranks
already disagree: the ranks launch counts show launching more or fewer join it (counts_beside_records.py). And a root
the records place otherwise gains the ranks whose checksums part where their records show no departure (a collective
left out among lookalikes), over a range that reaches back to the comm's first seq.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from ..model import FingerprintRow
from .answers import DIFFERENT_OPS, EXTRA, MISSING, Root
from .checksum_roots import checksums_by_step, result_keys
from .fingerprints import checked_right
from .notes import Note, SumsAddOutliers, SumsPartReference, SumsPlaceCutRanks
from .replicas import one_class, replica_classes


def with_checksum_outliers(root: Root, sums: Root, fingerprints: Iterable[FingerprintRow] = (),
                           on_record: frozenset[int] = frozenset(),
                           placed: frozenset[int] = frozenset()) -> tuple[Root, list[Note]]:
    """A root from launch counts (which say who launched more or fewer, and place nothing) with the ranks whose
    per-step checksums part from the others' added: they departed too, and nothing says which came first. So too a
    rank the counts put on neither side (no count of it on record) that PyTorch's lines place in the counted group
    (`placed`: group_places.py), or whose checksums are of the counted ranks' class (`_summed_beside`): it shares
    their comms, this one too. `on_record`: the ranks whose every comm records give."""
    members = set(root.outlier_ranks) | set(root.reference_ranks)
    uncounted = set(sums.outlier_ranks) - members
    unplaced = uncounted - placed
    if unplaced and not _summed_beside(unplaced, members, sums, fingerprints, on_record):
        return root, []
    return _with_sums_outliers(root, sums, members | uncounted, "counts")


def _summed_beside(uncounted: set[int], counted: set[int], sums: Root, fingerprints: Iterable[FingerprintRow],
                   on_record: frozenset[int]) -> bool:
    """Whether ranks no count places are replicas of the counted ones: no record gives their comms (a rank whose
    comms are all known, none of them the counted one, is elsewhere), the checksums compare them with every counted
    rank, and equal sums chain all of them together (replicas share every comm; ranks of two classes sum apart in
    every step: replicas.one_class). Worked example: counts of comm 1 give ranks 0 and 2 eight launches and rank 1
    seven, and rank 3's log none there; ranks 0-3 sum alike at step 0 and rank 3 apart at step 1: rank 3 is in
    comm 1 and departed too."""
    compared = set(sums.outlier_ranks) | set(sums.reference_ranks)
    if uncounted & on_record or not counted <= compared or sums.step_bound is None:
        return False
    return one_class(checksums_by_step(fingerprints), counted | uncounted, {}, [])


def with_sums_placing_cut_ranks(root: Root, sums: Root, last_on_record: dict[int, int],
                                fingerprints: Iterable[FingerprintRow] = ()) -> tuple[Root, list[Note]]:
    """A root the records show, with the ranks whose records were cut before the sides part (`root.unplaced_ranks`)
    placed by per-step checksums, where those part the same ranks the records do: one whose checksum parts with
    the outliers' read back what they did (it ran what they ran: an outlier too), one whose checksum reads as the
    reference's sides with it. Sums that name no majority of their own (sides as many as the ranks with no sum of
    the step could tip) are still read as the records part them (`_sides_the_records_orient`, from `fingerprints`).
    An outlier placed so may have departed anywhere after its last record (`last_on_record`: rank -> last seq its
    records hold), so the range reaches back there."""
    unplaced = set(root.unplaced_ranks)
    if not unplaced or not root.majority or root.seq_range is None or sums.may_sum_apart_by_design:
        return root, []  # (a lone sum that may part by design places no one)
    members = set(root.outlier_ranks) | set(root.reference_ranks) | unplaced
    sides = (set(sums.outlier_ranks), set(sums.reference_ranks)) if sums.majority \
        else _sides_the_records_orient(root, sums.step_bound, fingerprints)
    unsummed: set[int] = set()
    if sides is None and not sums.majority:
        sides = _read_back_wrong_alike(root, sums.step_bound, fingerprints)
        # (an unplaced rank with no sum of the step, when none of the reference has one either, stays unplaced)
        unsummed = unplaced - (sides[0] | sides[1]) if sides is not None else set()
    if sides is None:
        return root, []
    summed_out, summed_ref = sides
    # (a rank of the reference with no sum of the step, its trace cut short before it, is placed by its records)
    if not members - set(root.reference_ranks) - unsummed <= summed_out | summed_ref or not summed_out <= members \
            or not set(root.outlier_ranks) <= summed_out or set(root.reference_ranks) & summed_out:
        return root, []  # the checksums part other ranks than the records do (another comm's divergence, say)
    joined = sorted(unplaced & summed_out)
    sided = sorted(unplaced & summed_ref)
    low, high = root.seq_range
    if joined:
        low = min(low, *(last_on_record.get(rank, 0) + 1 for rank in joined))
    outliers = sorted(set(root.outlier_ranks) | set(joined))
    reference = sorted(set(root.reference_ranks) | set(sided))
    placed = replace(root, outlier_ranks=outliers, reference_ranks=reference, unplaced_ranks=sorted(unsummed), seq=low,
                     seq_range=(low, high), majority=len(outliers) * 2 < len(outliers) + len(reference))
    if not joined:
        return placed, []
    return placed, [SumsPlaceCutRanks(tuple(joined), sums.step_bound, tuple(outliers), (low, high))]


def _sides_the_records_orient(root: Root, step: int | None,
                              fingerprints: Iterable[FingerprintRow]) -> tuple[set[int], set[int]] | None:
    """The ranks whose checksums at `step` read back what the records' outliers did, and those that read back what
    their reference did, where the sums alone name no majority: every outlier on record with a sum of the step reads
    back one result, every reference rank with one another. The sums cannot say which side departed (a rank with no
    sum of the step may have been on either), but the records do, and a rank that read back what the outliers did
    ran what they ran. Unchecked sums say so only of replicas (equal sums chain the ranks in some step): ranks of
    two classes read back apart by design. None where the sums part other ranks than the records do. Worked
    example (1095431): ranks 5 and 6 launched fewer, ranks 0, 2, 3, 4 and 7 more, rank 1's log was cut before;
    at step 1 ranks 1, 5 and 6 sum alike and ranks 0, 2, 4 and 7 otherwise, rank 3's trace cut before it: rank 1
    is an outlier too."""
    by_step = checksums_by_step(fingerprints)
    rows = by_step.get(step, {}) if step is not None else {}
    checked = bool(rows) and all(checked_right(row) is not None for row in rows.values())
    if not rows or not checked and not one_class(by_step, set(rows), {}, []):
        return None
    keys = result_keys(rows, checked)
    out_keys = {keys.get(rank) for rank in root.outlier_ranks}
    ref_keys = {keys[rank] for rank in root.reference_ranks if rank in keys}
    if len(out_keys) != 1 or None in out_keys or len(ref_keys) != 1 or out_keys == ref_keys:
        return None
    (out_key,), (ref_key,) = out_keys, ref_keys
    return ({rank for rank, key in keys.items() if key == out_key},
            {rank for rank, key in keys.items() if key == ref_key})


def _read_back_wrong_alike(root: Root, step: int | None,
                           fingerprints: Iterable[FingerprintRow]) -> tuple[set[int], set[int]] | None:
    """Where no rank of the reference has a checksum of `step` (none completed it: the job hung in it), yet every
    records' outlier has one, checked against its expected sum and reading back wrong, all off alike: the ranks
    whose checksums of the step read back that same wrong result ran what the outliers ran (outliers too), and
    those whose checksums read back right sided with the reference. Worked example (1238118): of 8 ranks, 7 launched
    fewer, 2-6 more and hang at step 2, and the logs of 0 and 1 were cut before the sides part; ranks 0 and 7 read
    step 2 back off by the same amount from their expected sums, and rank 1's trace ends at step 1: rank 0 is an
    outlier too, and rank 1 stays unplaced."""
    rows = checksums_by_step(fingerprints).get(step, {}) if step is not None else {}
    if not rows or any(rank in rows for rank in root.reference_ranks) \
            or not all(rank in rows for rank in root.outlier_ranks) \
            or any(checked_right(row) is None for row in rows.values()) \
            or any(checked_right(rows[rank]) for rank in root.outlier_ranks):
        return None
    keys = result_keys(rows, True)
    out_keys = {keys[rank] for rank in root.outlier_ranks}
    if len(out_keys) != 1:
        return None
    (out_key,) = out_keys
    return ({rank for rank, key in keys.items() if key == out_key},
            {rank for rank, row in rows.items() if checked_right(row)})


def with_sums_before_records(root: Root, sums: Root,
                             fingerprints: Iterable[FingerprintRow] = ()) -> tuple[Root, list[Note]]:
    """A root whose records begin after the ranks already disagree, with the ranks whose per-step checksums part
    from the others' added, where those checksums compare every rank the records do: they departed too, before
    the records begin or in them (the records say who differs where they begin, not who departed first).

    A waiting candidate (`Root.waiting_candidates`: counted short, waiting in another comm) that the sums part only
    as a rank with no sum of their step (its trace stops before it) stays a candidate: one held back there by a peer
    never completes the step either, and the sums read the same as the counts do. Worked example (1181965): rank 5
    ran one more world collective in step 2; ranks 0-3, 6 and 7 read step 2 back wrong, ranks 4 and 5 have no sum
    of it; rank 4, counted short, waits in its TP pair with rank 5: it stays a candidate, not named beside rank 5."""
    hung = _no_sum_from(sums.step_bound, fingerprints, set(root.waiting_candidates))
    members = set(sums.outlier_ranks) | set(sums.reference_ranks)
    if not set(root.outlier_ranks) | set(root.reference_ranks) <= members:
        return root, []
    if hung:
        outliers = [r for r in sums.outlier_ranks if r not in hung]
        reference = [r for r in sums.reference_ranks if r not in hung]
        # (a candidate votes for neither side: the majority is of the ranks left on them)
        sums = replace(sums, outlier_ranks=outliers, reference_ranks=reference,
                       majority=sums.majority and len(outliers) * 2 < len(set(outliers) | set(reference)))
    merged, said = _with_sums_outliers(root, sums, members - hung, "late_records")
    if not said or not root.waiting_candidates:
        return merged, said
    # (a candidate the sums part by what it read back is named; the others stay candidates, on neither side)
    waiting = {r: comms for r, comms in root.waiting_candidates.items() if r not in merged.outlier_ranks}
    return named_among(replace(merged, waiting_candidates=waiting), merged.outlier_ranks,
                       set(merged.outlier_ranks) | set(merged.reference_ranks) - set(waiting)), said


def _no_sum_from(step: int | None, fingerprints: Iterable[FingerprintRow], ranks: set[int]) -> set[int]:
    """The ranks of `ranks` whose checksums hold no sum of `step` or later (none where the step is not known)."""
    if step is None:
        return set()
    summed = {row.rank for row in fingerprints if row.step >= step}
    return ranks - summed


def with_sums_beside_records(root: Root, sums: Root, recorded_ends: dict[int, int],
                             on_record: frozenset[int] = frozenset()) -> tuple[Root, list[Note]]:
    """A root the records place, with the ranks added whose per-step checksums part from the others' at some step
    where their records show no departure: they departed too, somewhere no record shows (a collective left out among
    lookalikes leaves every later record alike), and nothing orders the two departures. A checksum places no
    collective, so the range reaches back to the comm's first seq, and on to the last record of each added rank
    (`recorded_ends`: rank -> the last seq its records of the comm hold): a rank that wrote the sum of a step had
    launched what it ran there. Only where the sums are of the root's comm alone (every rank compared on record,
    `on_record`, in no other known comm) and compare every rank the root names: a rank that departed in another
    comm sums apart too. Worked example (1157373): rank 3 issued an all-gather at seq 2 where the others issued an
    all-reduce, and the records of seq 1, all-reduces, look alike; at step 0 rank 5 reads back 0 and ranks 0-4, 6
    and 7 278528 (it left its all-reduce out, its next one filed under step 1): rank 5 departed too, and the root
    names ranks 3 and 5 over seq 1..2."""
    if not root.majority or root.seq_range is None or root.seq_range[1] is None or sums.comm != root.comm:
        return root, []
    members = set(root.outlier_ranks) | set(root.reference_ranks)
    added = set(sums.outlier_ranks) - set(root.outlier_ranks)
    compared = set(sums.outlier_ranks) | set(sums.reference_ranks)
    if not added or not added <= members & on_record or not members <= compared \
            or not all(rank in recorded_ends for rank in added):
        return root, []
    merged, said = _with_sums_outliers(root, sums, members, "records")
    if not said:
        return root, []
    high = max(root.seq_range[1], *(recorded_ends[rank] for rank in added))
    # (a checksum says that a rank departed, not how: a collective left out, added or another one)
    kinds = tuple(dict.fromkeys([*root.kinds, MISSING, EXTRA, DIFFERENT_OPS]))
    return replace(merged, seq=1, seq_range=(1, high), kinds=kinds), said


def named_among(root: Root, outliers: list[int], members: set[int]) -> Root:
    """`root` naming `outliers` among `members` (the rest its reference), a majority where they are fewer."""
    return replace(root, outlier_ranks=outliers, reference_ranks=sorted(members - set(outliers)),
                   majority=len(outliers) * 2 < len(members))


def _with_sums_outliers(root: Root, sums: Root, members: set[int], basis: str) -> tuple[Root, list[Note]]:
    """`root` with the outliers of `sums` added among `members`, and the note that says so (`basis`: what does
    not say whose departure came first: "counts", "late_records", records that begin after the ranks already
    disagree, or "records", records that show no departure of the added ranks)."""
    added = sorted(set(sums.outlier_ranks) - set(root.outlier_ranks))
    if not sums.majority or not root.majority or not added or sums.may_sum_apart_by_design:
        return root, []  # (a lone sum that may part by design adds no one)
    outliers = sorted(set(root.outlier_ranks) | set(added))
    merged = named_among(root, outliers, members)
    return merged, [SumsAddOutliers(tuple(added), sums.step_bound, basis, tuple(outliers))]


def with_parted_reference(root: Root, fingerprints: list[FingerprintRow], known: dict[str, set[int]],
                          on_record: frozenset[int] = frozenset()) -> tuple[Root, list[Note]]:
    """A root from launch counts (a strict majority launched as many) with the ranks of that majority added whose
    per-step checksums part from the rest of it at the first step where its checksums differ, where the rest is a
    strict majority of it and all of it are ranks whose checksums a correct run makes equal (replicas): every rank
    of a collective reads back the same result, misaligned or not, so a departure of the counted outliers mixes
    what the others read back alike, and one of them that read back otherwise ran other collectives itself (or
    the rest did, which is more ranks). Worked example: rank 3 launched one collective fewer; at step 0 ranks 0
    and 1 sum 2923520, rank 2 3138560 and rank 3 2257920: rank 2 departed too, and the counts do not say whose
    departure came first, so the root names ranks 2 and 3, and no majority."""
    reference = set(root.reference_ranks)
    if not root.majority or len(reference) < 3:
        return root, []
    by_step = checksums_by_step(f for f in fingerprints if f.rank in reference)
    traced = {rank for rows in by_step.values() for rank in rows}
    # (every rank of it on record: one whose comms are not known may be in another TP group, whose sums part by
    # design)
    if traced != reference or not reference <= on_record \
            or not any(reference <= c for c in replica_classes(traced, known, on_record)):
        return root, []
    for step, rows in sorted(by_step.items()):
        if set(rows) != reference:
            continue
        checked = all(checked_right(row) is not None for row in rows.values())
        groups: dict[str, set[int]] = {}
        for rank, key in result_keys(rows, checked).items():
            groups.setdefault(key, set()).add(rank)
        if len(groups) < 2:
            continue
        largest = max(groups.values(), key=len)
        if len(largest) * 2 <= len(reference):
            return root, []  # the reference parts with no majority: who in it departed is not said
        added = sorted(reference - largest)
        members = set(root.outlier_ranks) | reference
        outliers = sorted(set(root.outlier_ranks) | set(added))
        note = SumsPartReference(tuple(added), tuple(sorted(largest)), step, tuple(outliers))
        return named_among(root, outliers, members), [note]
    return root, []
