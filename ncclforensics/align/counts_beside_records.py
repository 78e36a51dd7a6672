"""The ranks launch counts add to a root that records place: counts that name ranks the records do not, before
the records begin or past where they compare the ranks.

Records say who differs where they compare ranks; launch counts (RAS, PyTorch's marks) say who launched more or
fewer, and place nothing. Where the records begin after the ranks already disagree, or end alike for ranks the
counts part, the counts' difference lies where no record compares those ranks: they departed too, and nothing
says whose departure came first, so the root names them beside its own. These rules read both kinds of evidence
at once, apart from the per-step checksums of sums_beside.py, whose way of naming a merged root they share
(`named_among`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import replace

from .answers import RangeReason, Root
from .held_back import may_hold_back
from .notes import CountedBeforeRecords, CountedPastRecords, CountsNameSide, CountsTieBeforeRecords, DepartedLater, Note
from .sums_beside import named_among


def short_of_records(root: Root, launched: dict[int, int], recorded: set[int],
                     groups: dict[str, tuple[set[int], int]]) -> set[int]:
    """The ranks PyTorch's counts give (`launched`: rank -> count) that have no records of the root's comm
    (`recorded`: the ranks that have), launched none of the collectives where every rank's records begin (they
    never reached where the records part the ranks), and may be held back in another communicator by an outlier
    of the root. Such a rank left a collective out before the records and ran its program to its end, one short of
    the collective the others wait in, or it stopped short, waiting in another communicator for an outlier that
    departed here: one departure, the outlier's, explains it then, and nothing says which, so it is on neither side
    (as a rank whose whole records end before the groups part votes for neither, root.propose). It may be held so
    where no communicator but the root's names it as a member (its memberships are not on record) or one may hold
    it with an outlier (held_back.may_hold_back; `groups`: comm -> its members on record and its size). In a job
    with no other communicator on record, nothing holds a rank back, and one short launched fewer of its own.
    Worked example: ranks 0, 1 and 3 time out in the world's seq 2, rank 3's call stack parting from the others';
    a desync report says rank 2 (no file) finished seq 1 and joined no seq 2. Rank 3's extra collective may keep
    its TP peer rank 2 waiting: rank 2 is on neither side. Had rank 2's lines put it in a TP pair with rank 1, only
    a second departure (rank 1's) could hold it back: it left one out of its own, and is named."""
    others = {comm: group for comm, group in groups.items() if comm != root.comm}
    if not others or not root.outlier_ranks:
        return set()

    def may_be_held(rank: int) -> bool:
        if not any(rank in known for known, _ in others.values()):
            return True  # (no communicator on record names it: which it shares with an outlier is not known)
        alone = replace(root, outlier_ranks=[rank], reference_ranks=list(root.outlier_ranks), unplaced_ranks=[],
                        outlier_candidates={})
        return bool(may_hold_back(alone, groups))

    return {rank for rank, n in launched.items() if rank not in recorded and n < root.records_start
            and rank not in root.outlier_ranks and may_be_held(rank)}


def with_counted_outliers(root: Root, counted: Root, held: set[int] = frozenset(),
                          short: set[int] = frozenset(), launched: Mapping[int, int] | None = None
                          ) -> tuple[Root, list[Note]]:
    """A root whose records begin after the ranks already disagree, with the ranks that launch counts show
    launching more or fewer added: they departed before the records begin, or the records would show it. `held`:
    ranks behind that are stuck elsewhere before the records begin (not added: held back reads the same); `short`:
    ranks behind that never reached where the records begin (short_of_records): named on neither side;
    `launched`: the counts themselves (rank -> count), where the caller has them (_with_counted_tie reads them).
    Where the records part the ranks in two sides with no majority and the counts, with one, name ranks of one side
    only, that side departed (the counts rank every rank the records compare): the whole side, not the counted ranks
    alone, as the others of that side recorded the same departure.
    Worked example: at seq 15, where the records begin, ranks 1 and 3 wait in an all-gather and ranks 0 and 2 in
    an all-reduce; rank 1 enqueued 15, the others 16. Rank 1's side departed: ranks 1 and 3 are named (rank 3
    reordered its collectives, rank 1 left one out; naming rank 1 alone would say rank 3 ran the program)."""
    merged, notes = _with_counted_outliers(root, counted, set(held) | set(short), launched or {})
    short = set(short) & (set(counted.outlier_ranks) | set(counted.reference_ranks))
    if not short:
        return merged, notes
    outliers = [r for r in merged.outlier_ranks if r not in short]
    if not outliers:
        # (the records name no departure of their own: the counts alone do, and those ranks are it)
        return _with_counted_outliers(root, counted, set(held), launched or {})
    reference = [r for r in merged.reference_ranks if r not in short]
    # (a rank on neither side votes for neither: the majority is of the others, as the records' own is)
    majority = len(outliers) * 2 < len(set(outliers) | set(reference)) if notes else merged.majority
    return replace(merged, outlier_ranks=outliers, reference_ranks=reference, majority=majority,
                   unplaced_ranks=sorted({*merged.unplaced_ranks, *short})), notes


def _with_counted_outliers(root: Root, counted: Root, held: set[int],
                           launched: Mapping[int, int]) -> tuple[Root, list[Note]]:
    """with_counted_outliers, every rank of `held` left out."""
    ours = set(root.outlier_ranks) | set(root.reference_ranks)
    members = set(counted.outlier_ranks) | set(counted.reference_ranks)
    if not ours <= members:
        return root, []
    if not counted.majority:
        return _with_counted_tie(root, counted, members - ours - held, launched)
    named = set(counted.outlier_ranks) & ours
    if not root.majority and named and named < set(root.outlier_ranks):
        side = _side_of(root, named)
        if side is None:
            return root, []  # (the counted ranks are on both sides, or the records' sides are not known)
        outliers = sorted((side | set(counted.outlier_ranks)) - held)
        if not outliers:
            return root, []
        merged = named_among(root, outliers, members)
        return merged, [CountsNameSide(tuple(sorted(named)), _launched(counted), counted.pinned_by,
                                       tuple(sorted(side)))]
    added = sorted(set(counted.outlier_ranks) - set(root.outlier_ranks) - held)
    if not added:
        return root, []
    # Where the records part the ranks they compare with no majority, a rank they do not compare (known by its
    # count alone) may be on either side of that split: it is named too, as the records' own no-majority answer
    # names every rank that sides with either (naming it among the reference would say it ran the program).
    either = sorted(members - ours - set(counted.outlier_ranks) - held) if not root.majority else []
    outliers = sorted(set(root.outlier_ranks) | set(added) | set(either))
    merged = named_among(root, outliers, members)
    return merged, [CountedBeforeRecords(tuple(added), _launched(counted), counted.pinned_by, tuple(outliers),
                                         tuple(either))]


def _with_counted_tie(root: Root, counted: Root, uncompared: set[int],
                      launched: Mapping[int, int]) -> tuple[Root, list[Note]]:
    """A root whose records part the ranks they compare with no majority, beside counts (`launched`) of two levels
    in even halves, the ranks the records compare on both (`uncompared`: the counted ranks no record compares, none
    held back elsewhere). Each such rank sides with one of the records' sides; which side departed, no majority says:
    it is named too, as the records' own no-majority answer names every rank that sides with either (naming it on
    neither side would say it ran the program, which nothing says of either side). So too with counts of three
    levels or more, none a strict majority's, where the records' sides count apart and the rank counts fewer than
    every rank they compare: it left out what both sides launched, or both sides ran more, a side of its own, and
    no majority says which departed (seed 1224518: counts 7, 8, 9, the records parting the ranks at 8 and 9).
    Worked example: the records begin at seq 2, where rank 1 waits in an all-gather and rank 3 in an all-reduce; a
    desync report says ranks 0 and 1 enqueued 2, ranks 2 and 3 enqueued 3. Two against two: the root names ranks
    0 to 3, no majority, where naming ranks 1 and 3 alone would say ranks 0 and 2 ran the program."""
    if root.majority or not uncompared or set(root.outlier_ranks) != set(root.reference_ranks):
        return root, []  # (a split that names one side is not the tie this adds to)
    levels = Counter(launched.values())
    compared = {launched.get(rank) for rank in root.outlier_ranks}
    if len(levels) < 2:
        return root, []
    if len(levels) == 2 and (len(set(levels.values())) != 1 or compared != set(levels)):
        return root, []  # (uneven halves, or a tie the counts do not part, order departures the records' tie does not)
    if len(levels) > 2 and (None in compared or len(compared) < 2 or max(levels.values()) * 2 > len(launched)
                            or any(launched.get(rank, min(compared)) >= min(compared) for rank in uncompared)):
        # (three levels or more: only ranks below every side of the tie, where the sides count apart and no level is
        # a strict majority's, are a side of their own; ranks between may be steps of a chain of holds, which
        # orders departures the records' tie does not)
        return root, []
    named = sorted(set(root.outlier_ranks) | set(root.reference_ranks) | uncompared)
    merged = replace(root, outlier_ranks=named, reference_ranks=named)
    return merged, [CountsTieBeforeRecords(tuple(sorted(uncompared)), counted.pinned_by, tuple(named))]


def _side_of(root: Root, named: set[int]) -> set[int] | None:
    """The ranks whose records at the seq the root's ranks part (`root.ops`) are of the side of `named`, where all
    of `named` are of one side and every rank's side is known; else None. Sides are of the ranks that recorded every
    field some rank recorded (records equal in all of them); a rank that left a field unrecorded joins the one side
    whose records it pairs with (no field both recorded differs). One that pairs with several sides may be of
    either, and the side of `named` is then not known (naming it without that rank would say the rank ran the
    program, naming it with the rank would say it did not): None, whatever the order of the ranks. So too where a
    rank of `named` is on no side of ranks that recorded every field, and where the records part the ranks in more
    than two sides (rank 0 an all-reduce of 1000, rank 1 one of 4096, ranks 2 and 3 an all-gather: counts that
    name rank 1 leave rank 0 and ranks 2 and 3 apart, one of which departed too)."""
    signature = ("op", "count", "dtype", "redop", "root", "callsite", "stack")
    records = {rank: tuple(getattr(op, name) for name in signature) for rank, op in root.ops.items()}
    if not named <= set(records):
        return None
    compared = [at for at in range(len(signature)) if any(record[at] is not None for record in records.values())]
    whole = {rank for rank, record in records.items() if all(record[at] is not None for at in compared)}
    sides: dict[tuple, set[int]] = {}
    for rank in sorted(whole):
        sides.setdefault(records[rank], set()).add(rank)
    joined = [set(side) for side in sides.values()]
    for rank in sorted(set(records) - whole):
        alike = [side for record, side in zip(sides, joined) if records_pair(records[rank], record)]
        if len(alike) > 1:
            return None  # (a rank that pairs with two sides leaves the side of `named` unknown)
        if alike:
            alike[0].add(rank)
        else:
            joined.append({rank})  # (a side apart from every one known: `named` is placed only on one of those)
    holding = [side for side in joined if side & named]
    # (three sides or more: the counts' side departed, yet the rest still part among themselves, and naming that
    # side alone would say every other one ran the program; the records' tie stands)
    return holding[0] if len(joined) == 2 and len(holding) == 1 and holding[0] & whole else None


def records_pair(a: tuple, b: tuple) -> bool:
    """Whether two records (tuples of the same fields, None where unrecorded) may be one collective: no field both
    recorded differs."""
    return all(x is None or y is None or x == y for x, y in zip(a, b))


def with_counted_past_records(root: Root, counted: Root, recorded: dict[int, int], held: set[int] = frozenset(),
                              departs_from: dict[int, int] | None = None,
                              carried: Mapping[int, int] | None = None) -> tuple[Root, list[Note]]:
    """A root the records place, beside launch counts that go on past some ranks' records (work they enqueued behind
    the collective they wait in is recorded nowhere) and name, with a majority, ranks launching more or fewer than
    the others that the root does not name: where the records end alike for those ranks (`recorded`: rank -> the
    last seq its records hold; theirs end no sooner, or no later, than every other rank's), the records part them
    from no one by length, and the counts' difference lies past where the records compare them. They departed too,
    and nothing says whose departure came first: the root names them beside its own. `held`: ranks behind that are
    stuck elsewhere (not added: held back reads the same). `departs_from`: rank -> the first seq at which its
    records, alike with the reference's up to there, allow its departure (compared_alike.departs_no_sooner): a rank
    whose records put its departure past the root's range departed after the root, and is not named beside it (a
    note says it departed, later). Counts that agree, where a desync report's snapshot parts ranks by the type of
    their last collective of one number (`RangeReason.LAST_OPS`), name those ranks only where their records end before
    that number: records that hold it hold the very collective the report shows, which the root compared there.
    `carried`: rank -> the last seq a count carried its stream to past its records (`CommAnalysis.counted`: a file
    cut short, a trace that records only what completed): the records were compared that far, blank past their
    end, so it is there that its stream ends beside the others' (its records' own end, cut, had no say).

    Worked example: ranks 0-3 and 5-7 wait in seq 15 (their watchdogs' timeout) with seq 16 enqueued behind it;
    rank 4 completed its seq 15 and joined no seq 16 (a peer's desync report), and its trace holds all 15. Every
    rank's records end at seq 15, and the tags part rank 6 from the others in seq 2..15: rank 4, one short by the
    counts, left out a collective somewhere its records do not compare with the others', and the root names ranks 4
    and 6. Had rank 4's records held seq 9..15 alike with the others' (tags that change at every seq), and the tags
    parted rank 6 at seq 2 alone, rank 4 would have left out its collective after seq 14, past the root: the root
    names rank 6 alone. Had rank 4's trace been cut after seq 1, its count of 15 carrying its stream on past the cut
    to seq 15, blank, its stream would still end where the others' records do: it is named beside rank 6 all the
    same (its records, cut, never parted it from anyone by length)."""
    ours = set(root.outlier_ranks) | set(root.reference_ranks)
    members = set(counted.outlier_ranks) | set(counted.reference_ranks)
    if not root.majority or not counted.majority or not ours <= members or counted.unstopped \
            or counted.held_back is not None:
        return root, []  # (counts of a job that may only lag, or that read as a peer holding others back, add no one)
    # (where each stream ends as the records compared it: a count carries a rank cut short on past its records)
    ends = {r: max(n, (carried or {}).get(r, n)) for r, n in recorded.items()}
    reference = [ends[r] for r in counted.reference_ranks if r in ends and r not in root.outlier_ranks]
    if not reference:
        return root, []
    fewer = _launched(counted) == "fewer"
    last = root.seq_range[1]
    departs_from = departs_from or {}
    # (the number of a snapshot's last collectives: what it says of a rank whose records reach it is on record)
    snapshot = counted.seq_range[1] if counted.reason is RangeReason.LAST_OPS and counted.seq_range else None
    ending_alike = sorted(r for r in set(counted.outlier_ranks) - set(root.outlier_ranks) - set(held)
                          if r in ends and (ends[r] >= max(reference) if fewer else ends[r] <= min(reference))
                          and (snapshot is None or recorded[r] < snapshot))
    added = [r for r in ending_alike if last is None or departs_from.get(r, last) <= last]
    later = [r for r in ending_alike if r not in added]
    # (a rank left out for departing later departed still: said, so that no one reads it as running the program)
    notes: list[Note] = [DepartedLater(tuple(later), (min(departs_from[r] for r in later), None), root.comm,
                                       counted.pinned_by)] if later else []
    if not added:
        return root, notes
    outliers = sorted(set(root.outlier_ranks) | set(added))
    merged = named_among(root, outliers, members)
    return merged, [CountedPastRecords(tuple(added), _launched(counted), counted.pinned_by, tuple(outliers)), *notes]


def _launched(counted: Root) -> str:
    """How the ranks a count names differ: they launched "fewer" or "more"."""
    return "fewer" if counted.kind == "missing" else "more"
