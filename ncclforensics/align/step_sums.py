"""A root from per-step checksums, where no collective stream gives one (the ranks they add to a root from launch
counts or records: sums_beside.py).

A per-step checksum (`step=9 rank=0 checksum=11776.0`) sums what a rank read back in one step. Where the trace also
writes the value a consistent world gives, a wrong one says the rank's results were mixed in that step; where it
does not, ranks whose checksums a correct run makes equal differing say the same. Every rank of a misaligned
collective reads back the same mixed result, so the ranks that part from the others' checksum at the first bad
step are the outliers (with expected values, the others' by how far each is off: a rank's own inputs are in its
expected value too). Where one rank alone read back a wrong value and every other one's checked right, its
collective paired with the others' of the step before or after: it is the outlier. Where one rank alone read back
right, every other one wrong by one amount, and it is wrong in the next step, it left out the step's last
collective (its next one paired with the others' last): it is the outlier, the fewest departing. The collective itself is on
no record: the root has a step, and no seq. Offsets that part where other ranks have no sum of the step (they
hung before it) or read it back right and the next one wrong (they left out its last collective) name no side:
each comm's ranks are off by what that comm mixed, and the ranks that departed may be either those that read
back wrong or those beside them; every rank that may have departed is named, and no majority. So too where checked
sums part into several sides, none a majority (two comms that each diverged, each rank off by its own amount): a
wrong sum still says its rank's results were mixed by that step, so the step is said, never nothing. Unchecked sums
likewise: a replica with no sum of the step (its trace cut short or stopped before it) may have read back what either
side did, so a side is the majority only were all such ranks beside the fewer; else every rank is named. So too
where unchecked sums of one class of replicas (equal sums chain them, replicas.one_class) part into several sides,
none a majority: the ranks that ran the program read back alike, so some side departed, and nothing says which.

Worked example: ranks 0-7 read back the right sum at step 0; at step 1 all eight are wrong, ranks 0, 1, 3-7 agree
on 4604928 and rank 2 alone has 33331200 (it launched a drafter pass the others did not): rank 2 is the outlier,
at step 1, seq unknown. Step 0's sums were checked right, so the root is in step 1; where earlier sums merely
agree (inputs alike on every rank make them agree even misaligned), it is in step 1 or before.

Equal offsets say equal results within a class of ranks that expect alike in every other step (a TP group's); across
classes they may be chance. A class that parts within into a majority and the rest has its own outlier, whatever
other classes are off by: TP groups 0-3 and 4-7, at step 2 ranks 0, 1 and 3 off by one amount, rank 2 and ranks 4, 5
and 7 by another and rank 6 by a third name ranks 2 and 6 (each departed in its own group).

Where the ranks that read back wrong values are two (a pair of a TP group, or the only two ranks of the job),
either may have departed, and the root names both. So too for two replicas whose unchecked sums part, unless what
each shares with another class of replicas tells them apart (replicas.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

from ..model import FingerprintRow
from .answers import Root
from .checked_wrong import wrong_pair
from .checksum_roots import alone_wrong, checksums_by_step, result_keys, sum_root
from .crossed_sums import departed_apart_more_cheaply
from .fingerprints import SUM_TOLERANCE, checked_right
from .lone_sums import classes_of_lone, lone_sides, untold_lone_ranks, untold_sides
from .replicas import classes_of_sums, one_class, parted_by_offsets, replica_classes
from .right_at_the_end import alone_right_at_the_end


def step_sums_root(fingerprints: list[FingerprintRow], known: dict[str, set[int]],
                   on_record: frozenset[int] = frozenset(),
                   cut: frozenset[int] = frozenset(),
                   comms_of: dict[int, frozenset[str]] | None = None,
                   begun: dict[int, int] | None = None) -> tuple[Root, int | None] | None:
    """The root and its step (where the steps before were checked right): the ranks whose per-step checksum parts
    from the others' at the first step that shows mixed data, in the comm of the ranks compared (named as `known`
    members allow); None where no step shows it or no side is the minority of more than two ranks. `on_record`:
    the ranks whose every comm is known (their own records list the comms they are in); `cut`: ranks whose trace
    files were cut short; `comms_of`: rank -> every comm it is in, for ranks whose whole logs say (comms_apart.py);
    `begun`: rank -> the step its trace, cut short, had begun a record of (a floor of how far it got)."""
    comms_of, begun = comms_of or {}, begun or {}
    by_step = checksums_by_step(fingerprints)
    traced = {rank for rows in by_step.values() for rank in rows}
    replicas = replica_classes(traced, known, on_record)
    if replicas == [traced]:
        replicas = classes_of_sums(by_step, traced, cut) or replicas
    known_replicas = replica_classes(traced & on_record, known, on_record)
    # (where no record gives any traced rank's comms, every traced rank: their expected sums must then show them
    # alike in another step, as they must for ranks records show sharing their comms)
    expected_classes = known_replicas if traced & on_record else [traced]
    for step in sorted(by_step):
        apart = _expected_apart(by_step, step, expected_classes, cut)
        if apart is not None:
            outliers, reference = apart
            compared = {rank: by_step[step][rank] for rank in outliers + reference}
            root = sum_root(outliers, reference, True, step, known, compared)
            if not traced & on_record and all(checked_right(row) for row in compared.values()):
                # No result mixed, and no record of their comms: ranks of another class, reading back other data
                # by design (replicas serving other requests), expect apart as well where they once expected alike.
                root = replace(root, may_sum_apart_by_design=True, expected_apart_reading_right=True)
            return root, step if _earlier_right(by_step, step) else None
        for found in _step_roots(by_step, step, traced, replicas, known, cut, known_replicas):
            if found is None:
                return _hung_apart(by_step, traced, cut, known, begun)
            if found is _BY_VERDICTS:
                return wrong_pair(fingerprints, known, cut, comms_of)
            return _with_other_classes(found, replicas, known, lambda members, step=step: next(
                _step_roots(by_step, step, traced, [members], known, cut, known_replicas), None))
    return wrong_pair(fingerprints, known, cut, comms_of) or _hung_apart(by_step, traced, cut, known, begun)


def _expected_apart(by_step: dict[int, dict[int, FingerprintRow]], step: int, replicas: list[set[int]],
                    cut: frozenset[int] = frozenset()) -> tuple[list[int], list[int]] | None:
    """(outliers, reference) where, in a class of ranks that may be replicas (`replicas`: ranks whose every comm is
    known, in classes that share all their comms; every traced rank where no record gives any one's comms), the
    expected sums of `step` part a strict majority from the rest, where every one of them expected alike in another
    step; else None. A rank's expected sum is what its own launches of the step give in a consistent world, and
    replicas that launch alike expect alike: those apart launched other collectives in the step (or the majority
    did, which is more ranks). But replicas may expect apart by design (the shards of a reduce-scatter, an uneven
    last shard), and sharing every comm says nothing of that: only expected sums equal in another step show the
    ranks launching alike (and ranks of two classes, which no record tells apart, expect apart in every step). This
    holds whatever they read back: one that left out the step's last collective reads back right (its next one
    paired with the others' last, filed under the next step, which a trace cut short may not hold) while the others
    read back wrong; and every one reads back right where what the misaligned collectives mixed is within the
    tolerance a sum is checked to (a small all-gather paired with a large all-reduce). Replicas whose traces were
    cut short before the step may have launched what either side did: a side is the majority only were they all
    beside the fewer. One whose whole trace stops before it hung there, and may have departed first: what the
    others launched says nothing of that, and the class names no one here (`cut`: ranks whose trace files were cut
    short). Worked example: one comm of ranks 0-7; at step 0 all eight expect 110592; at step 1 ranks 0-6 read back
    256000 and expect 221184, rank 7 reads back and expects 129024: rank 7 departed."""
    rows = by_step[step]
    summed_earlier = {rank for s, other in by_step.items() if s < step for rank in other}
    for members in replicas:
        mine = {rank: row for rank, row in rows.items() if rank in members}
        verdicts = [checked_right(row) for row in mine.values()]
        if len(mine) < 3 or None in verdicts:
            continue
        groups = _expected_groups(mine)
        if groups is None:
            continue
        unsummed = members & summed_earlier - set(mine)
        if unsummed - cut:
            continue
        largest = max(groups, key=len)
        if len(groups) > 1 and len(largest) * 2 > len(mine) + len(unsummed) and any(
                set(mine) <= set(other) and _expected_groups({r: other[r] for r in mine}) == [sorted(mine)]
                for s, other in by_step.items() if s != step):
            return sorted(set(mine) - set(largest)), largest
    return None


def _expected_groups(rows: dict[int, FingerprintRow]) -> list[list[int]] | None:
    """The ranks in groups of equal expected sums (up to the tolerance a sum is checked to: floating sums of one
    design), in rank order; None where some expected sum is not given or not finite."""
    if not all(row.expected_sum is not None and math.isfinite(row.expected_sum) for row in rows.values()):
        return None
    scale = SUM_TOLERANCE * max(1.0, *(abs(row.expected_sum) for row in rows.values()))
    groups: dict[int, list[int]] = {}
    for rank, row in sorted(rows.items()):
        groups.setdefault(round(row.expected_sum / scale), []).append(rank)
    return list(groups.values())


def _expected_classes(by_step: dict[int, dict[int, FingerprintRow]], step: int,
                      ranks: set[int]) -> list[set[int]] | None:
    """The ranks in classes of equal expected sums, where every other step that they all summed parts them alike
    (and at least one does): ranks of one TP group launch alike and read back what that group reduced, so they
    expect alike in every step, and apart from another group's. None where they are one class, or some other step
    parts them otherwise, or gives no expected sum of some of them (the step itself is left out: a rank that
    departed in it may expect apart there, launching other collectives)."""
    partitions = set()
    for s, other in by_step.items():
        if s == step or not ranks <= set(other):
            continue
        groups = _expected_groups({rank: other[rank] for rank in ranks})
        if groups is None:
            return None
        partitions.add(frozenset(frozenset(group) for group in groups))
    if len(partitions) != 1 or len(classes := next(iter(partitions))) < 2:
        return None
    return [set(members) for members in classes]


def _keys_within_classes(keys: dict[int, str], classes: list[set[int]] | None) -> dict[int, object]:
    """`keys` (rank -> what its checked sum says it read back: how far off it is), with the ranks of each class
    (`classes`: replicas that expect alike) that parts within into a strict majority and the rest keyed by their
    class too. Equal offsets say equal results within a class; across classes, whose expected sums differ, they
    may be chance, and a class's outlier off by what another class's ranks are off by alike is still its outlier.
    A class alike within keeps its key: beside another class off alike (what a world comm mixed), it is one side.
    Worked example (1133456): TP groups 0-3 and 4-7 each expect alike in every step; at step 2 ranks 0, 1 and 3
    are off by 589824, rank 2 by 1376256, ranks 4, 5 and 7 by 1376256 and rank 6 by 3735552 (ranks 2 and 6 each
    reordered two collectives of their TP group): rank 2 is its group's outlier, as rank 6 is the other's."""
    if classes is None:
        return dict(keys)
    refined: dict[int, object] = dict(keys)
    for index, members in enumerate(classes):
        mine = [rank for rank in keys if rank in members]
        counts = [sum(1 for r in mine if keys[r] == keys[rank]) for rank in mine]
        if len(set(keys[r] for r in mine)) > 1 and max(counts) * 2 > len(mine):
            refined.update({rank: (index, keys[rank]) for rank in mine})
    return refined


def _hung_apart(by_step: dict[int, dict[int, FingerprintRow]], traced: set[int], cut: frozenset[int],
                known: dict[str, set[int]], begun: dict[int, int] | None = None) -> tuple[Root, None] | None:
    """Where no expected value checks the sums and they part in some step, but no side of them names anyone (two
    even sides, or classes that may be replicas by design), and some ranks' whole traces end at an earlier step than
    others': those ranks never completed the next step that the others did, so the job hung, and a collective
    diverged by that step. Sums that part say nothing of who departed, nor of where (replicas' sums part by design):
    every traced rank is named, no majority, and the root is by the step the first ones never completed. Worked
    example: ranks 0 and 2 read back one sum at step 0 and ranks 1 and 3 another; ranks 1 and 3 wrote sums of steps
    0-2, ranks 0 and 2 of steps 0-3: ranks 1 and 3 hung in step 3, and two even sides may each have departed. A
    trace cut short inside a record it had begun (`begun`) shows its rank got at least to that record's step: rank 1
    of two, its sums apart from rank 0's at step 0, cut inside `step=1`, and rank 0's whole trace ending at step 0,
    say rank 0 never completed step 1."""
    rows = [row for step_rows in by_step.values() for row in step_rows.values()]
    if any(checked_right(row) is not None for row in rows):
        return None  # (checked sums say who read back wrong: the verdicts speak)
    if not any(len({repr(row.sum) for row in step_rows.values()}) > 1 for step_rows in by_step.values()):
        return None
    last = {rank: max(step for step, step_rows in by_step.items() if rank in step_rows) for rank in traced}
    # (a trace cut short ends where its file does, not where its rank stopped; past the record it had begun there)
    furthest = max([*last.values(), *(step for rank, step in (begun or {}).items() if rank in cut & traced)])
    stopped = [rank for rank in traced if rank not in cut and last[rank] < furthest]
    if not stopped or len(traced) < 2:
        return None
    bound = min(last[rank] for rank in stopped) + 1
    return sum_root(sorted(traced), sorted(traced), False, bound, known), None


_BY_VERDICTS = object()  # a step whose sums name no one, where every rank's verdicts say who may have departed


def _step_roots(by_step: dict[int, dict[int, FingerprintRow]], step: int, traced: set[int],
                replicas: list[set[int]], known: dict[str, set[int]], cut: frozenset[int] = frozenset(),
                known_replicas: list[set[int]] = ()):
    """The root the checksums of `step` give, if any (yielded: the first is the answer). `known_replicas`: classes
    of ranks that records show sharing all their comms."""
    every = by_step[step]
    if len(every) < 2:
        return
    checked = all(checked_right(row) is not None for row in every.values())
    # Expected values take in each rank's own design; without them only replicas' sums can be compared.
    for members in [set(every)] if checked else replicas:
        rows = {rank: row for rank, row in every.items() if rank in members}
        if len(rows) < 2:
            continue
        wrong = [r for r, row in rows.items() if checked_right(row) is False]
        if checked and not wrong:
            continue  # right sums are aligned, whatever they are
        if checked and len(wrong) == 1 and len(rows) == len(traced):
            # One rank alone read back a mixed result, every other one's checked right: its collective paired
            # with the others' of the next step (or the one before), which they file under that step. It ran
            # one more, or every other rank one fewer: the fewest departing is the one. With one other rank on
            # record, the one it paired with may have no trace here: no majority says which.
            after = {rank: checked_right(row) for rank, row in by_step.get(step + 1, {}).items()}
            root = alone_wrong(wrong[0], sorted(rows), after, step, known)
            yield root, step if _earlier_right(by_step, step) else None
            return
        lone = _alone_right(rows, wrong, by_step.get(step + 1, {})) if checked and len(rows) == len(traced) else None
        if lone is None and checked and len(rows) == len(traced):
            # (no rank read the next step back: the one right expecting apart from the rest, right_at_the_end.py)
            lone = alone_right_at_the_end(by_step, step, rows, wrong, cut)
        if lone is not None:
            # Every rank but one read back the same mixed result, and that one read back right and is wrong in
            # the next step: it left out its step's last collective (its next one paired with the others' last,
            # which it files under the next step), or every other rank ran one more: the fewest departing is it.
            yield sum_root([lone], wrong, True, step, known), step if _earlier_right(by_step, step) else None
            return
        if checked and len(wrong) < len(rows):
            # The ranks that read back wrong values shared the misaligned collective; the others' right sums
            # (which may differ by design: replicas) say nothing of who in it departed.
            rows = {rank: rows[rank] for rank in wrong}
            if len(rows) < 2:
                continue
        keys = result_keys(rows, checked)
        if checked:
            # (equal offsets join ranks of one class only where that class parts within: its own outlier)
            keys = _keys_within_classes(keys, _expected_classes(by_step, step, set(rows)))
        groups: dict[object, list[int]] = {}
        for rank, key in sorted(keys.items()):
            groups.setdefault(key, []).append(rank)
        if len(groups) < 2 and not (checked and len(rows) == 2):
            continue  # equal sums say nothing (two ranks that both read back wrong: either departed)
        ordered = sorted(groups.values(), key=lambda ranks: (-len(ranks), ranks))
        # Replicas with no sum of the step (a trace cut short or stopped before it) may have read back what either
        # side did: a side is the majority only were they all beside the fewer (checked sums: _unplaced_by_sums).
        unsummed = set() if checked else members & traced - set(rows)
        majority = len(ordered) > 1 and len(ordered[0]) * 2 > len(rows) + len(unsummed)
        alike = len(ordered) == 1 and all(math.isfinite(row.sum - row.expected_sum) for row in rows.values())
        if checked and (majority or alike) and _unplaced_by_sums(by_step, step, traced - cut) and not (
                majority and departed_apart_more_cheaply(by_step, step, ordered, len(rows) - len(ordered[0]), known)):
            # Offsets that part where some ranks have no sum of the step (their traces stop before it: hung) or
            # read it back right and the next one wrong (they left out the step's last collective): the ranks
            # off by one amount and by another may each be a comm's ranks that the departure of another mixed,
            # so no side is the minority; who may have departed is said from every rank's verdicts. So too where
            # the ranks that read back wrong are all off by one amount: beside them, those that hung or read the
            # next step back wrong may have departed as well (each pair of DP groups of a job of two TP pairs).
            # Not where the ranks wrong in the step share a comm on record with no crossing rank in it and each
            # side departing in its own step departs fewer ranks than either side whole (crossed_sums.py).
            yield _BY_VERDICTS
            return
        # (a lone rank of sums no expected value checks is named only where another step shows it summing alike
        # with a group: one that sums apart in every step may do so by design, a gather to it, say)
        beside_alike = _lone_beside_alike(ordered)
        lone = [r for r in beside_alike if checked or any(
            one_class(by_step, {r, *ranks}, known, known_replicas) for ranks in ordered if len(ranks) > 1)]
        if lone and not _unplaced_by_sums(by_step, step, traced - cut):
            # Ranks each alone in how far off they read back, beside groups of ranks off alike (each group the
            # ranks of one comm that shared its misaligned collective): each lone one departed, in a comm these
            # sums do not name (the fewest departing: it ran one more, or its peers one fewer). So too for sums
            # no expected value checks, beside groups of equal sums (replicas: a TP group's ranks read back alike),
            # where another step shows the lone rank summing alike with one of those groups: it is that group's rank
            # that read back otherwise (it ran other collectives in the step). A rank alone in every step it summed
            # may sum apart by design (a gather to TP rank 0, a loss logged through gather_object): it names no one.
            # Worked example: TP groups 0-3 and 4-7; at step 0 ranks 0-3 sum alike, ranks 4, 6 and 7 alike and rank
            # 5 alone; at step 1 ranks 4-7 sum alike: rank 5 departed. Each lone one is weighed against its own
            # class there, the group it sums alike with and the lone ranks beside it, not against other classes,
            # whose sums say nothing of it (lone_sums.py); the root names the ranks of those classes.
            bound = step if _earlier_right(by_step, step) else None
            if checked:
                alike = sorted(r for ranks in ordered if len(ranks) > 1 for r in ranks)
                yield sum_root(lone, alike, True, step, known, rows), bound
                return
            classes = classes_of_lone(lone, [ranks for ranks in ordered if len(ranks) > 1],
                                      lambda rank, ranks: one_class(by_step, {rank, *ranks}, known, known_replicas))
            outliers, reference, majority = lone_sides(lone, classes)
            yield sum_root(outliers, reference, majority, step, known, set().union(*classes)), bound
            return
        several = [ranks for ranks in ordered if len(ranks) > 1]
        untold = [] if checked or lone else untold_lone_ranks(by_step, step, beside_alike, several)
        if untold and not _unplaced_by_sums(by_step, step, traced - cut):
            # Lone ranks whose traces hold no other step beside the groups: nothing tells a departure from a rank
            # that sums apart by design, yet the step bounds where it departed, if it did, and who (lone_sums.py).
            outliers, reference, majority = untold_sides(untold, [r for ranks in several for r in ranks])
            root = sum_root(outliers, reference, majority, step, known, rows if majority else outliers)
            yield replace(root, may_sum_apart_by_design=True), step if _earlier_right(by_step, step) else None
            return
        if not majority and (checked and len(rows) > 2 and len(ordered) > 2
                             or not checked and not one_class(by_step, set(rows), known, known_replicas)):
            # Sides, none a majority, of sums no expected value checks (two replicas' sums may differ by design; two
            # ranks whose sums part at the first step both summed read the same as two replicas of one rank each):
            # the checksums name no one. Sums that were equal on every one of them in another step (before or
            # after: ranks of two classes sum apart in every step), or ranks records show sharing every comm, are of
            # one class: sides of them, two even ones or several, say some departed, and nothing says which (the
            # ranks that ran the program read back alike, and no side of them is a majority), so every one is named
            # below. Several sides of sums checked wrong still say a collective was misaligned by this step: every
            # rank's verdicts say who may have departed (each comm's ranks off by what that comm mixed), and no
            # majority.
            yield _BY_VERDICTS if checked else None
            return
        apart = parted_by_offsets(by_step, step, set(rows), replicas) if not checked and not majority else None
        if apart is not None and len(apart[0]) + len(unsummed) < len(apart[1]):
            # Two even sides of replicas, told apart by what each shares with another class (replicas.py); still the
            # fewer were the replicas with no sum of the step beside them.
            outliers, reference = apart
            yield sum_root(outliers, reference, True, step, known, {r: every[r] for r in outliers + reference}), None
            return
        # Two even sides of results checked wrong, or sides of one class of replicas none of which is a majority:
        # some side departed, and nothing says which; the root names every side, and the replicas with no sum of the
        # step, which may be on any.
        named = sorted(set(rows) | unsummed)
        outliers = sorted(r for ranks in ordered[1:] for r in ranks) if majority else named
        root = sum_root(outliers, ordered[0] if majority else named, majority, step, known, rows if majority else named)
        yield root, step if _earlier_right(by_step, step) else None
        return


def _with_other_classes(found: tuple[Root, int | None], replicas: list[set[int]], known: dict[str, set[int]],
                        root_of: Callable[[set[int]], object]) -> tuple[Root, int | None]:
    """`found`, a minority of one class of replicas parted from the rest of it at a step, with the minorities of the
    other classes that part at that step too (`root_of(members)`: what one class's sums of the step give): each
    class's ranks read back alike but those that departed (as lone ranks beside groups off alike do), so each such
    minority departed, and the first departure may be any of theirs. Worked example (1033912): TP groups 0-3 and
    4-7; at step 0 rank 2 sums apart from ranks 0, 1 and 3, and rank 4 from ranks 5, 6 and 7 (each issued two world
    collectives in the other order): both are named."""
    root, step = found
    if not root.majority or root.may_sum_apart_by_design:
        return found
    outliers, reference = set(root.outlier_ranks), set(root.reference_ranks)
    for members in replicas:
        other = root_of(members) if not members & (outliers | reference) else None
        if not isinstance(other, tuple):
            continue
        theirs = other[0]
        if theirs.majority and not theirs.may_sum_apart_by_design and theirs.step_bound == root.step_bound:
            outliers |= set(theirs.outlier_ranks)
            reference |= set(theirs.reference_ranks)
    if outliers == set(root.outlier_ranks):
        return found
    return sum_root(sorted(outliers), sorted(reference), True, root.step_bound, known), step


def _lone_beside_alike(groups: list[list[int]]) -> list[int]:
    """The ranks alone in their group where at least two groups hold several ranks and the lone ones are a strict
    minority of all (one comm's followers read back alike, and several comms that each diverged once part into a
    group of followers and a lone outlier each); else none."""
    lone = sorted(ranks[0] for ranks in groups if len(ranks) == 1)
    several = [ranks for ranks in groups if len(ranks) > 1]
    return lone if len(several) > 1 and len(lone) * 2 < sum(map(len, groups)) else []


def _alone_right(rows: dict[int, FingerprintRow], wrong: list[int], after: dict[int, FingerprintRow]) -> int | None:
    """The one rank of `rows` that read back right where at least two others read back wrong, all off by one
    amount (one misaligned collective they shared), and that read back wrong in the next step; else None."""
    right = [rank for rank in rows if rank not in wrong]
    if len(right) != 1 or len(wrong) < 2 or right[0] not in after or checked_right(after[right[0]]) is not False:
        return None
    offsets = [rows[r].sum - rows[r].expected_sum for r in wrong]
    if not all(math.isfinite(off) for off in offsets):
        return None  # (a NaN or infinite sum is off by no one amount)
    scale = SUM_TOLERANCE * max([1.0, *(abs(rows[r].expected_sum) for r in wrong)])
    if len({round(off / scale) for off in offsets}) != 1:
        return None
    return right[0]


def _unplaced_by_sums(by_step: dict[int, dict[int, FingerprintRow]], step: int, traced: set[int]) -> bool:
    """Whether some traced rank wrote sums of earlier steps and none of `step` (its trace stops before it), or read
    `step` back right and the next one wrong."""
    every, after = by_step[step], by_step.get(step + 1, {})
    stopped = any(rank not in every and any(rank in rows for s, rows in by_step.items() if s < step)
                  for rank in traced)
    crossed = any(checked_right(row) and rank in after and checked_right(after[rank]) is False
                  for rank, row in every.items())
    return stopped or crossed


def _earlier_right(by_step: dict[int, dict[int, FingerprintRow]], step: int) -> bool:
    """Right results in every earlier step mean aligned up to this one; merely equal ones do not."""
    return all(checked_right(row) for s, ranks in by_step.items() if s < step for row in ranks.values())
