"""Where one outlier's stream departs from the reference: every edit the records allow (see root.py).

Streams are `Codes`: one integer per field and position, 0 where the field was not recorded. Two positions may
pair when every field both recorded is equal. An edit is a block of extra collectives (`extra`), program
collectives left out (`missing`) or different ones in their place (`different`); its `Placement` is the range of
seqs where its first collective can be, given that both ends of every stream are cuts.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from enum import Enum

import numpy as np

MAX_EDIT = 16  # the longest block of extra, missing or different collectives one edit may hold (an assumption: a drafter
# pass issues a handful; a longer block with only a few records after it would explain almost any stream)


class EditKind(str, Enum):
    """How an outlier's stream departs from the program."""

    EXTRA = "extra"
    MISSING = "missing"
    DIFFERENT = "different"
    STOPPED = "stopped"  # not an edit: the stream ends where the others go on


@dataclass(frozen=True)
class Codes:
    """One stream's records from the communicator's common first seq, as one integer code per field and position;
    0 means the field was not recorded there (a gap in the seqs, a source without that field)."""

    fields: dict[str, np.ndarray]
    length: int


@dataclass(frozen=True)
class Placement:
    """An edit of `kind` and `size` on `rank` whose first collective is at some seq in [low, high].

    `low` is 1 where the records cannot bound it from below (the explanation holds from their first seq).
    `score` ranks explanations for naming the likeliest kind: collectives confirmed after the edit, less its size
    and the records it leaves unexplained.
    """

    rank: int
    kind: EditKind
    size: int
    low: int
    high: int
    score: int = 0
    # An edit that runs off the end of the records, held to `high` because records elsewhere confirm an edit: the
    # low it has where evidence rules those out (None: nothing held it)
    widest: int | None = None
    # The member of the outlier's group this edit is of where that member has no records here at all (a rank known
    # only by PyTorch's count of what it launched): nothing but its count places it (hidden_edits.hidden_departures)
    unrecorded: int | None = None
    # The member of the outlier's group whose own records alone place this edit, where they lack a field the group's
    # hold or show nothing of its departure but their length: the others' records place the group's edit, and say
    # nothing of where this member departed (propose, hidden_edits.hidden_departures)
    member: int | None = None


def compatible(a: Codes, a_from: int, b: Codes, b_from: int, length: int) -> np.ndarray:
    """Per position i < length: may a's record at a_from+i pair with b's at b_from+i (no field both recorded
    differs)?"""
    ok = np.ones(max(length, 0), dtype=bool)
    if length <= 0:
        return ok
    for name, left in a.fields.items():
        right = b.fields.get(name)
        if right is None:
            continue
        x, y = left[a_from:a_from + length], right[b_from:b_from + length]
        ok &= (x == y) | (x == 0) | (y == 0)
    return ok


def _first_false(ok: np.ndarray) -> int | None:
    bad = np.flatnonzero(~ok)
    return int(bad[0]) if bad.size else None


def _last_false(a: Codes, a_from: int, b: Codes, b_from: int, length: int) -> int | None:
    """The last position where the two may not pair, scanning back from the end in growing chunks: a wrong shift
    of a periodic stream fails within its last period, the right one is read once."""
    end, chunk = length, 4096
    while end > 0:
        begin = max(0, end - chunk)
        ok = compatible(a, a_from + begin, b, b_from + begin, end - begin)
        bad = np.flatnonzero(~ok)
        if bad.size:
            return begin + int(bad[-1])
        end, chunk = begin, chunk * 2
    return None


def agree(a: Codes, b: Codes) -> bool:
    """The two streams may be one program, each cut where it ends."""
    n = min(a.length, b.length)
    return _last_false(a, 0, b, 0, n) is None


def merged(streams: Iterable[Codes]) -> Codes:
    """One stream from several that agree: every field as far as any of them recorded it."""
    streams = list(streams)
    length = max(s.length for s in streams)
    fields: dict[str, np.ndarray] = {}
    for stream in streams:
        for name, values in stream.fields.items():
            into = fields.setdefault(name, np.zeros(length, dtype=values.dtype))
            head = into[:stream.length]
            np.copyto(head, values, where=head == 0)
    return Codes(fields, length)


def place_edits(rank: int, outlier: Codes, reference: Codes, start: int, known: bool = False,
                reference_ends: int | None = None) -> tuple[list[Placement], bool]:
    """Every edit of `outlier` against `reference` that the records allow, in seqs (the streams begin at `start`).

    `known`: other evidence (the gate journal) says this rank deviated, so a stream that merely agrees with the
    reference and ends sooner still holds an edit, anywhere up to its last record.
    `reference_ends`: where the shortest stream of the reference's ranks ends (the merged `reference` runs as far
    as its longest), where the reference stands for several ranks.
    Returns the placements and whether the records did hold one edit: when no edit explains the whole stream (the
    outlier departs again later), the edits that explain it furthest are returned instead.
    """
    n_out, n_ref = outlier.length, reference.length
    overlap = min(n_out, n_ref)
    at = _first_false(compatible(outlier, 0, reference, 0, overlap))
    if at is None:
        if n_out <= n_ref and not known:
            return [], True  # the same program, cut sooner
        at = overlap  # ahead of the reference, or told so: nothing differs, so no block of different ones
    floor = _identified_floor(outlier, reference, at)
    # Where the outlier's records begin after the reference's (a ring that lost its oldest entries), what it did
    # before its first record is unknown: a gap there shifts its records past the reference's last one, where they
    # contradict nothing; that the outlier's records depart where the reference's end, or run on past them, is then
    # the program further on (a rank that skipped collectives runs ahead), as well as an edit that shows.
    lost = _first_record(outlier)
    confirmed: list[Placement] = []  # edits that records after them pair with
    off_end: list[Placement] = []  # edits whose block runs to the end of the records: nothing after them to check
    unseen: list[Placement] = []  # edits past the end of the reference's records: nothing on record to check
    failing: list[tuple[Placement, int]] = []  # (edit, where it fails again), for streams no single edit explains
    later: dict[tuple[EditKind, int], int] = {}  # (kind, size) of a confirmed edit -> the last seq it may start at
    # (whether the outlier's stream ends no sooner than every reference rank's, or a confirmed edit accounts for the
    # lengths)
    settled = n_out >= (n_ref if reference_ends is None else reference_ends)
    for size in range(1, MAX_EDIT + 1):
        for kind, shift_out, shift_ref in ((EditKind.EXTRA, size, 0), (EditKind.MISSING, 0, size)):
            length = min(n_out - shift_out, n_ref - shift_ref)
            last_bad = _last_false(outlier, shift_out, reference, shift_ref, length) if length > 0 else None
            earliest = 0 if last_bad is None else last_bad + 1
            # The first departure must be explained: inside the extra block, or paired again with a reference record
            # after the gap (a gap that pushes it past the reference's last record explains nothing), unless the
            # gap lies where the outlier's records were lost (see `lost`).
            unexplained = abs((n_out - n_ref) - (size if kind is EditKind.EXTRA else -size))
            score = max(length - at, 0) - 2 * size - unexplained
            if kind is EditKind.MISSING and at + size >= n_ref and not known:
                if lost and earliest <= min(at, lost):
                    unseen.append(_placement(rank, kind, size, earliest, min(at, lost), start, score - size))
                continue
            if earliest <= at:
                low, high = earliest, min(at, length - size)  # at least `size` records after the block pair
                if low <= high:
                    confirmed.append(_placement(rank, kind, size, low, high, start, score))
                    # (where they do, the block may start later too, up to the first departure, with records
                    # after it pairing still, fewer of them there: the same edit, every record explained alike)
                    later[(kind, size)] = start + min(at, length - 1)
                    settled |= unexplained == 0
                low = max(earliest, n_out - size)
                if kind is EditKind.EXTRA and low <= at:
                    off_end.append(_placement(rank, kind, size, low, at, start, score - size))
                if kind is EditKind.EXTRA and at == n_ref and max(earliest, n_ref) <= n_out - size:
                    # Nothing departs before the reference's records end: its next, unrecorded collectives may
                    # pair with the outlier's after the block, so the block may start anywhere in the rest.
                    unseen.append(_placement(rank, kind, size, max(earliest, n_ref), n_out - size, start,
                                             score - size))
            elif length > 0:
                ok = compatible(outlier, shift_out + at, reference, shift_ref + at, length - at)
                stop = _first_false(ok)
                reach = at + (stop if stop is not None else length - at)
                failing.append((_placement(rank, kind, size, at, at, start, reach - at - 2 * size), reach))
    if at < overlap:
        # A block of different collectives at `at` itself (a swap, a collective of another type): the streams pair
        # again after it. A lookalike block before `at` would show nowhere, so blocks start where they show, or
        # where one side recorded nothing just before it (a ring that lost the outlier's first records, a gap):
        # the block's first collectives may be those unrecorded ones (a swap whose first half the ring lost).
        hidden = _unrecorded_before(outlier, reference, at)
        for size in range(1, MAX_EDIT + 1):
            length = overlap - at - size
            score = max(length, 0) - 2 * size - abs(n_out - n_ref)
            first = at - min(hidden, MAX_EDIT - size)
            if length <= 0:
                off_end.append(_placement(rank, EditKind.DIFFERENT, size, first, at, start, score))
                break
            if length >= size and _last_false(outlier, at + size, reference, at + size, length) is None:
                confirmed.append(_placement(rank, EditKind.DIFFERENT, size, first, at, start, score))
                if size == 1:
                    confirmed += [_placement(rank, EditKind.DIFFERENT, at - begin + 1, begin, begin, start,
                                             score - 2 * (at - begin))
                                  for begin in _hidden_block_starts(outlier, reference, at)]
                break
    # No edit starts at or before a record that is the reference's own collective at the same seq: equal in every
    # field, with a value (call stack, tag and step, say) that no other record of either stream has.
    if floor:
        confirmed, off_end, unseen = ([replace(p, low=max(p.low, start + floor)) for p in found
                                       if p.high >= start + floor] for found in (confirmed, off_end, unseen))
    if confirmed:
        # Edits that run off the records count only at the first visible departure itself: where records after
        # it confirm an edit, a long block that swallows them is not taken (see MAX_EDIT). But where the outlier's
        # stream ends sooner than every reference rank's and no confirmed edit accounts for the lengths (its rank got stuck, and where it
        # stopped says nothing of which edit holds), the records confirming one may be lookalikes inside a block
        # that runs to the end of its stream (a drafter pass that hung it): the shortest such block that starts
        # before every confirmed edit is kept too, scored below them.
        top = max(p.high for p in confirmed)
        below, lowest = min(p.score for p in confirmed) - 1, min(p.low for p in confirmed)
        earlier = [p for p in off_end if p.high <= top and p.low < lowest] if not settled else []
        shortest = sorted(earlier, key=lambda p: (p.size, -p.score, p.low))[:1]
        swallowing = [replace(p, score=min(p.score, below)) for p in shortest]
        confirmed = [replace(p, high=max(p.high, later.get((p.kind, p.size), p.high))) for p in confirmed]
        return (confirmed + [replace(p, low=p.high, widest=p.low) for p in off_end if p.high > top] + swallowing
                + unseen), True
    if off_end or unseen:
        return off_end + unseen, True
    if not failing:
        return [], True  # nothing to place (a stream of no records)
    furthest = max(reach for _, reach in failing)
    return [p for p, reach in failing if reach == furthest], False


def blocks_through(rank: int, outlier: Codes, reference: Codes, start: int, seq: int) -> list[Placement]:
    """Blocks of different collectives that take in `seq`, where the two streams agree in everything recorded but
    other evidence says their collectives at `seq` differed (one side completed it, the other never did): a swap
    or a substitution whose pair completed on one side only, after which the side stuck in it launched nothing
    more (a stop that follows from the block, no edit of its own). As for a block that shows (see `place_edits`),
    its first collectives may be ones that one side left unrecorded just before `seq`, never lookalikes both
    recorded; a block of `size` starts within `size` of `seq` so that it takes it in."""
    at = seq - start
    overlap = min(outlier.length, reference.length)
    if not 0 <= at < overlap or not agree(outlier, reference):
        return []  # (a difference that shows is placed by place_edits)
    hidden = _unrecorded_before(outlier, reference, at)
    floor = _identified_floor(outlier, reference, at)
    found = []
    for size in range(1, MAX_EDIT + 1):
        first = max(at - size + 1, at - hidden, floor)
        # records past the block, on both sides, confirm it; the stream that went on alone past them is unexplained
        score = max(overlap - at - 1, 0) - 2 * size - abs(outlier.length - reference.length)
        found.append(_placement(rank, EditKind.DIFFERENT, size, first, at, start, score))
        if first <= at - hidden or first <= floor:
            break  # a longer block starts no earlier
    return found


def _hidden_block_starts(outlier: Codes, reference: Codes, at: int) -> list[int]:
    """Positions before `at` where a block of collectives taken out of order may start and show nowhere before
    `at`: the outlier swapped its collectives there and at `at`, or issued the reference's collective there only
    at `at` (the rest one later), or the reference's collective at `at` already there (the rest one earlier), and
    every record of the block pairs with the one it stands for wherever both recorded a field. Where every field is
    recorded everywhere no such block pairs (the records before `at` would part too); where the field that parts
    the streams at `at` was not recorded before it (a watchdog's timeout line gives the call stack of one
    collective, beside NCCL logs of signatures only), a swap of lookalikes shows only at its second half.

    Worked example: rank 2 issued a layer's MoE all-reduce before its MLP one, alike in signature; only the
    timeout lines at seq 10 give call stacks. The stacks part rank 2 at seq 10, but the swap began at seq 9."""
    found = []
    for begin in range(max(0, at - MAX_EDIT + 1), at):
        inside = at - begin
        swapped = compatible(outlier, at, reference, begin, 1)[0] and compatible(outlier, begin, reference, at, 1)[0]
        late = compatible(outlier, at, reference, begin, 1)[0] \
            and compatible(outlier, begin, reference, begin + 1, inside).all()
        early = compatible(outlier, begin, reference, at, 1)[0] \
            and compatible(outlier, begin + 1, reference, begin, inside).all()
        if swapped or late or early:
            found.append(begin)
    return found


def _unrecorded_before(outlier: Codes, reference: Codes, at: int) -> int:
    """How many positions right before `at` hold no record on one side or the other (every field 0 there)."""
    both = _held(outlier)[:at] & _held(reference)[:at]
    found = np.flatnonzero(both)
    return at - (int(found[-1]) + 1 if found.size else 0)


def _first_record(stream: Codes) -> int:
    """The first position where the stream holds a record (its length where it holds none)."""
    found = np.flatnonzero(_held(stream))
    return int(found[0]) if found.size else stream.length


def _held(stream: Codes) -> np.ndarray:
    """Per position: does the stream hold a record there (some field recorded)?"""
    held = np.zeros(stream.length, dtype=bool)
    for values in stream.fields.values():
        held |= values[:stream.length] != 0
    return held


def _identified_floor(outlier: Codes, reference: Codes, at: int) -> int:
    """1 + the last position before `at` whose record is provably the reference's own collective there (0 if
    none): both streams recorded every field, the values are equal, the value occurs once in each stream, and no
    record of either stream that lacks a field may be it too (its recorded fields all equal).
    Lookalike signatures identify nothing; a call stack with a tag and a step usually does. A value that is the
    only one of its kind because no other record holds the field identifies nothing either: a watchdog's timeout
    line gives the call stack of the one collective a rank waits in, beside NCCL logs that give none, and a
    loop's other collectives of that signature may share it (worked example: every layer's all-reduce comes from
    one `forward` line)."""
    if at <= 0 or not outlier.fields:
        return 0
    n = min(at, outlier.length, reference.length)
    known = np.ones(n, dtype=bool)
    mine = np.zeros(outlier.length, dtype=np.uint64)
    theirs = np.zeros(reference.length, dtype=np.uint64)
    for name, values in outlier.fields.items():
        other = reference.fields.get(name)
        if other is None:
            return 0
        known &= (values[:n] != 0) & (other[:n] != 0)
        mine = mine * np.uint64(1000003) ^ values  # a combined value per record; overflow wraps, which is fine
        theirs = theirs * np.uint64(1000003) ^ other
    candidates = np.flatnonzero(known & (mine[:n] == theirs[:n]))
    if not candidates.size:
        return 0
    values, counts = np.unique(np.concatenate([mine, theirs]), return_counts=True)
    twice = values[counts == 2]  # once in each stream
    partial_mine, partial_theirs = _partial(outlier), _partial(reference)
    # (only the last one identified bounds the edits: the first that passes, from the end)
    for c in candidates[np.isin(mine[candidates], twice)][::-1]:
        if not _lookalike_unrecorded(outlier, int(c), partial_mine) \
                and not _lookalike_unrecorded(reference, int(c), partial_theirs):
            return int(c) + 1
    return 0


def _partial(stream: Codes) -> np.ndarray:
    """The positions of `stream` that hold a record lacking some field: some field recorded, another not. A
    position with no field recorded holds no record at all (a gap in the seqs, a ring's lost head): nothing of it
    is known to look like anything, so it makes no record a lookalike."""
    recorded = np.zeros(stream.length, dtype=bool)
    lacking = np.zeros(stream.length, dtype=bool)
    for values in stream.fields.values():
        recorded |= values[:stream.length] != 0
        lacking |= values[:stream.length] == 0
    return np.flatnonzero(recorded & lacking)


def _lookalike_unrecorded(stream: Codes, position: int, partial: np.ndarray) -> bool:
    """Whether a record of `stream` other than the one at `position` lacks some field and pairs with it in every
    field it did record (it may be the same collective of the program, for all its records say). `partial`: the
    positions of the records that lack some field (see _partial)."""
    others = partial[partial != position]
    if not others.size:
        return False
    alike = np.ones(others.size, dtype=bool)
    for values in stream.fields.values():
        there = values[others]
        alike &= (there == 0) | (there == values[position])
    return bool(alike.any())


def _placement(rank: int, kind: EditKind, size: int, earliest: int, at: int, start: int, score: int) -> Placement:
    # An explanation that holds from the first record may have begun before the records (a wrapped ring).
    low = 1 if earliest == 0 and start > 1 else start + earliest
    return Placement(rank, kind, size, low, start + at, score)


