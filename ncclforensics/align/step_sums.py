"""A root from per-step checksums, where no collective stream gives one; and the ranks they add to a root from
launch counts.

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

Where the ranks that read back wrong values are two (a pair of a TP group, or the only two ranks of the job),
either may have departed, and the root names both. So too for two replicas whose unchecked sums part, unless what
each shares with another class of replicas tells them apart (replicas.py). Beside a root from launch counts (RAS,
PyTorch's marks), which place nothing, the ranks whose checksums part from the others' departed too: the root names
them as well (one the counts place on neither side too, where its sums were alike with theirs in another step or
PyTorch's lines place it in the counted group, group_places.py); so
do the ranks the counts leave together (launching as many) whose checksums part from the rest of them. The same holds the other way round for a root whose records begin after the ranks already disagree: the ranks
launch counts show launching more or fewer join it (counts_beside_records.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import replace

from ..model import FingerprintRow
from .answers import DIFFERENT_OPS, RangeReason, Root
from .comms_apart import apart_from
from .fingerprints import SUM_TOLERANCE, checked_right
from .lone_sums import classes_of_lone, lone_sides, untold_lone_ranks, untold_sides
from .mixed_offsets import mixed_by, offset_amounts
from .notes import Note, SumsAddOutliers, SumsPartReference, SumsPlaceCutRanks
from .own_records import departed_by_own_records
from .replicas import classes_of_sums, one_class, parted_by_offsets, replica_classes
from .right_at_the_end import alone_right_at_the_end
from .traces import comm_named_by


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
    by_step = _checksums_by_step(fingerprints)
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
            root = _root(outliers, reference, True, step, known, compared)
            if not traced & on_record and all(checked_right(row) for row in compared.values()):
                # No result mixed, and no record of their comms: ranks of another class, reading back other data
                # by design (replicas serving other requests), expect apart as well where they once expected alike.
                root = replace(root, may_sum_apart_by_design=True, expected_apart_reading_right=True)
            return root, step if _earlier_right(by_step, step) else None
        for found in _step_roots(by_step, step, traced, replicas, known, cut, known_replicas):
            if found is None:
                return _hung_apart(by_step, traced, cut, known, begun)
            if found is _BY_VERDICTS:
                return _wrong_pair(fingerprints, known, cut, comms_of)
            return _with_other_classes(found, replicas, known, lambda members, step=step: next(
                _step_roots(by_step, step, traced, [members], known, cut, known_replicas), None))
    return _wrong_pair(fingerprints, known, cut, comms_of) or _hung_apart(by_step, traced, cut, known, begun)


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


def _checksums_by_step(fingerprints: Iterable[FingerprintRow]) -> dict[int, dict[int, FingerprintRow]]:
    """step -> rank -> its per-step checksum row (the first of each), from the rows that are checksums, not
    per-collective records."""
    by_step: dict[int, dict[int, FingerprintRow]] = {}
    for row in fingerprints:
        if row.op is None and row.sum is not None:
            by_step.setdefault(row.step, {}).setdefault(row.rank, row)
    return by_step


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
    return _root(sorted(traced), sorted(traced), False, bound, known), None


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
            root = _alone(wrong[0], sorted(rows), after, step, known)
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
            yield _root([lone], wrong, True, step, known), step if _earlier_right(by_step, step) else None
            return
        if checked and len(wrong) < len(rows):
            # The ranks that read back wrong values shared the misaligned collective; the others' right sums
            # (which may differ by design: replicas) say nothing of who in it departed.
            rows = {rank: rows[rank] for rank in wrong}
            if len(rows) < 2:
                continue
        groups: dict[str, list[int]] = {}
        for rank, key in sorted(_result_keys(rows, checked).items()):
            groups.setdefault(key, []).append(rank)
        if len(groups) < 2 and not (checked and len(rows) == 2):
            continue  # equal sums say nothing (two ranks that both read back wrong: either departed)
        ordered = sorted(groups.values(), key=lambda ranks: (-len(ranks), ranks))
        # Replicas with no sum of the step (a trace cut short or stopped before it) may have read back what either
        # side did: a side is the majority only were they all beside the fewer (checked sums: _unplaced_by_sums).
        unsummed = set() if checked else members & traced - set(rows)
        majority = len(ordered) > 1 and len(ordered[0]) * 2 > len(rows) + len(unsummed)
        alike = len(ordered) == 1 and all(math.isfinite(row.sum - row.expected_sum) for row in rows.values())
        if checked and (majority or alike) and _unplaced_by_sums(by_step, step, traced - cut):
            # Offsets that part where some ranks have no sum of the step (their traces stop before it: hung) or
            # read it back right and the next one wrong (they left out the step's last collective): the ranks
            # off by one amount and by another may each be a comm's ranks that the departure of another mixed,
            # so no side is the minority; who may have departed is said from every rank's verdicts. So too where
            # the ranks that read back wrong are all off by one amount: beside them, those that hung or read the
            # next step back wrong may have departed as well (each pair of DP groups of a job of two TP pairs).
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
                yield _root(lone, alike, True, step, known, rows), bound
                return
            classes = classes_of_lone(lone, [ranks for ranks in ordered if len(ranks) > 1],
                                      lambda rank, ranks: one_class(by_step, {rank, *ranks}, known, known_replicas))
            outliers, reference, majority = lone_sides(lone, classes)
            yield _root(outliers, reference, majority, step, known, set().union(*classes)), bound
            return
        several = [ranks for ranks in ordered if len(ranks) > 1]
        untold = [] if checked or lone else untold_lone_ranks(by_step, step, beside_alike, several)
        if untold and not _unplaced_by_sums(by_step, step, traced - cut):
            # Lone ranks whose traces hold no other step beside the groups: nothing tells a departure from a rank
            # that sums apart by design, yet the step bounds where it departed, if it did, and who (lone_sums.py).
            outliers, reference, majority = untold_sides(untold, [r for ranks in several for r in ranks])
            root = _root(outliers, reference, majority, step, known, rows if majority else outliers)
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
            yield _root(outliers, reference, True, step, known, {r: every[r] for r in outliers + reference}), None
            return
        # Two even sides of results checked wrong, or sides of one class of replicas none of which is a majority:
        # some side departed, and nothing says which; the root names every side, and the replicas with no sum of the
        # step, which may be on any.
        named = sorted(set(rows) | unsummed)
        outliers = sorted(r for ranks in ordered[1:] for r in ranks) if majority else named
        root = _root(outliers, ordered[0] if majority else named, majority, step, known, rows if majority else named)
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
    return _root(sorted(outliers), sorted(reference), True, root.step_bound, known), step


def _lone_beside_alike(groups: list[list[int]]) -> list[int]:
    """The ranks alone in their group where at least two groups hold several ranks and the lone ones are a strict
    minority of all (one comm's followers read back alike, and several comms that each diverged once part into a
    group of followers and a lone outlier each); else none."""
    lone = sorted(ranks[0] for ranks in groups if len(ranks) == 1)
    several = [ranks for ranks in groups if len(ranks) > 1]
    return lone if len(several) > 1 and len(lone) * 2 < sum(map(len, groups)) else []


def _result_keys(rows: dict[int, FingerprintRow], checked: bool) -> dict[int, str]:
    """rank -> what its checksum says it read back: equal keys, the same results. Checked sums part by how far each
    is off: what a rank adds of its own (replicas' inputs) is in its expected value too, and ranks that read back
    the same mixed results are off by the same amount."""
    # (offs equal up to the tolerance a sum is checked to: floating sums of one result may differ in the last bits)
    scale = SUM_TOLERANCE * max([1.0, *(abs(row.expected_sum) for row in rows.values() if checked)])
    keys = {}
    for rank, row in rows.items():
        off = row.sum - row.expected_sum if checked else None
        # (a NaN or infinite offset is a group of its own kind: NaN sums alike are alike)
        key = row.sum if not checked else round(off / scale) if math.isfinite(off) else repr(off)
        keys[rank] = repr(key)
    return keys


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


def _root(outliers: list[int], reference: list[int], majority: bool, step: int, known: dict[str, set[int]],
          compared: Iterable[int] | None = None) -> Root:
    """A root from per-step checksums at `step`, on the comm of the ranks compared (`compared`: those ranks, or a
    mapping keyed by them; all named where not given)."""
    ranks = frozenset(compared) if compared is not None else frozenset(outliers) | frozenset(reference)
    return Root(
        comm=_comm_summed(ranks, known), seq=None, seq_range=None, outlier_ranks=sorted(outliers),
        reference_ranks=sorted(reference), kind=DIFFERENT_OPS, size=0, pinned_by="per-step checksums",
        reason=RangeReason.STEP_SUMS, majority=majority, ops={}, kinds=(DIFFERENT_OPS,), shown=True,
        step_bound=step,
    )


def _alone(wrong: int, ranks: list[int], after: dict[int, bool | None], step: int, known: dict[str, set[int]]) -> Root:
    """The root where one rank alone read back a wrong result in `step` and every other rank on record read it
    back right: its collective paired with others' of the next step, which read back wrong there (`after`: each
    rank's verdict in the next step). It ran one more, or they one fewer: the fewest departing is the one, unless
    one rank alone is wrong next: then the two may be a pair of their own whose other one left out its step's last
    collective (pairing its next with this one's last), and either departed. With one other rank on record, the one
    it paired with may have no trace here: no majority says which."""
    crossed = [rank for rank in ranks if rank != wrong and after.get(rank) is False]
    if len(crossed) == 1:
        pair = sorted([wrong, *crossed])
        return _root(pair, pair, False, step, known)
    return _root([wrong], [r for r in ranks if r != wrong], len(ranks) > 2, step, known)


def _earlier_right(by_step: dict[int, dict[int, FingerprintRow]], step: int) -> bool:
    """Right results in every earlier step mean aligned up to this one; merely equal ones do not."""
    return all(checked_right(row) for s, ranks in by_step.items() if s < step for row in ranks.values())


def _comm_summed(ranks: frozenset[int], known: dict[str, set[int]]) -> str:
    """The comm a step's checksums are of: a rank's checksum sums what it read back from every comm it is in, so
    it names a comm only where that is the one known comm of these ranks; else the ranks (`[ranks=0,1]`)."""
    touching = {comm: members for comm, members in known.items() if members & ranks}
    member_sets = {frozenset(members) for members in touching.values()}  # (one comm may be known by two names)
    if len(member_sets) == 1 and ranks <= (members := next(iter(member_sets))):
        return comm_named_by(members, touching)
    return comm_named_by(ranks, {})


def _wrong_pair(fingerprints: list[FingerprintRow], known: dict[str, set[int]], cut: frozenset[int] = frozenset(),
                comms_of: dict[int, frozenset[str]] | None = None) -> tuple[Root, int | None] | None:
    """Results checked wrong where no sums part into sides, at the first step any rank read back a wrong value.

    Every rank of a misaligned collective reads back a mixed result, the one that departed too where the trace checks
    each collective. So the ranks that may have departed are those that read back a wrong value in that step, those
    with no check of it (their traces stop before it: a hang, a cut), and those checked right in it that are not
    right all through the next step (a rank that left out the step's last collective pairs its next one with the
    others' last: it reads back right in the step, wrong in the next). Where one rank alone read back a wrong value
    and every other rank was checked right in that step, its collective paired with the others' of the step before
    or after: it is the outlier (the fewest departing), as with per-step sums. Otherwise the root names every rank
    that may have departed, and no majority: the ranks checked right all through both steps shared no misaligned
    collective, so nothing places the departure on them; a rank right in the step whose trace was cut before the
    next one is not: what would show it left out the step's last collective was cut away, and it is named too.
    But a rank that whole logs show sharing no comm with any rank that read back wrong (`comms_of`) shared no
    collective with them: it may have hung in a divergence of its own, and names no side of this one. Where that
    leaves one rank that read back wrong, its comm diverged and who in it departed is on no record (its peers there
    left no trace): it alone is named, no majority. Worked example: rank 0 reads back step 3 wrong, ranks 2-5
    right, rank 7's whole trace ends at step 2; rank 0 is in comms [0,1] and [0,2,4,6], rank 7 in [6,7] and
    [1,3,5,7]: rank 7 waits in a comm of its own, and the root names rank 0 alone.

    Where every rank that completed that step read back wrong (but bystanders: ranks right all through it and the
    next, or in the job's last step, which shared no misaligned collective; another TP group) and each other rank's
    whole trace (no file cut short) goes up to the step before it, those never completed it: the ranks part into
    those whose collectives of the step were all paired and those left waiting. One program on every rank but the
    outliers, the two sides ran different numbers of collectives there (fewer: done first; more: left waiting with
    nothing to pair their last with), so a strict minority of either side is the outliers. So too where every rank
    read the step back, and those that read it back right read back the next one wrong, every one: they left out the
    step's last collective, or the others ran one more there, however many comms the wrong ones' offsets part by.
    So too where every rank read the step back, the ranks wrong in it never completed the next one (whole traces
    that stop there) and those right in it that did complete the next one read it back wrong: the ones ahead left
    out the step's last collective and went on, the others wait with one left over (or each ran one more).
    So too a step earlier: where the ranks that read the first wrong step back all read the step before it back
    right, and every other rank's whole trace ends before that one, they part there (_ahead_of_waiting).
    Each time, a fewer side named beside the ranks that read back wrong mixed what those read back, one comm per
    rank of it: where those are off by more amounts than its departures make (mixed_offsets.py), others departed
    too, and every rank that may have departed is named, as above.
    """
    verdicts: dict[int, dict[int, bool]] = {}
    for row in fingerprints:
        right = checked_right(row)
        if right is not None:
            per_rank = verdicts.setdefault(row.step, {})
            per_rank[row.rank] = per_rank.get(row.rank, True) and right
    wrong_steps = [step for step, ranks in verdicts.items() if not all(ranks.values())]
    if not wrong_steps:
        return None
    step = min(wrong_steps)
    checked = verdicts[step]
    wrong = {rank for rank, right in checked.items() if not right}
    traced = {row.rank for row in fingerprints}
    earlier_right = all(all(ranks.values()) for s, ranks in verdicts.items() if s < step)
    bound = step if earlier_right else None
    own = departed_by_own_records(fingerprints, step, wrong)
    if own and len(wrong) > 1:
        # Ranks whose own records of the step depart from the program every other record shows (two tags issued
        # the other way round, a tag issued with another kind or size) departed; the others that read back wrong
        # read back what a departure mixed, theirs or a peer's on no record.
        # (the root's comm is one of the departed ranks': the others read back wrong in comms of their own)
        return _root(sorted(own), sorted(traced - own), True, step, known, own), bound
    if traced == wrong:
        # One rank's trace alone: its results were mixed, so its communicator diverged; who in it departed is on
        # no record (its partners left no trace).
        return _root(sorted(wrong), sorted(wrong), False, step, known), bound
    after = verdicts.get(step + 1, {})
    if len(wrong) == 1 and set(checked) == traced:
        return _alone(next(iter(wrong)), sorted(traced), after, step, known), bound
    # (ranks that whole logs show sharing no comm with those that read back wrong shared no collective with them)
    apart = {rank for rank in traced - wrong if apart_from(rank, wrong, comms_of or {})}
    waiting = traced - set(checked) - apart
    before = verdicts.get(step - 1, {})
    # Ranks right all through the step and the next (or the job's last step) shared no misaligned collective and
    # departed nowhere that shows: bystanders (another TP group), beside which the rest part as below.
    # A rank right in the step whose trace was cut with no verdict of the next one is none: it may have left out the
    # step's last collective, which the next step it was cut before would show.
    unseen = {rank for rank, right in checked.items() if right and rank in cut and rank not in after}
    bystanders = {rank for rank, right in checked.items()
                  if right and (not after or after.get(rank) is True)} - unseen
    involved = traced - bystanders - apart

    def mixes(fewer: set[int], mixed: set[int] = wrong) -> bool:
        # Outliers named beside ranks that read back the step wrong (`mixed`) mixed what those read back, one comm
        # each: more amounts off than their departures make say that others departed too (mixed_offsets.py).
        return fewer is mixed or mixed_by(len(fewer), offset_amounts(fingerprints, step, mixed - cut))

    if wrong == set(checked) - bystanders and waiting and not waiting & cut and waiting <= set(before):
        fewer = min((wrong, waiting), key=len)
        if len(fewer) * 2 < len(involved) and mixes(fewer):
            return _root(sorted(fewer), sorted(involved - fewer), True, step, known), bound
    if (parted := _ahead_of_waiting(verdicts, step, traced, cut)) is not None:
        ahead, waiting_before = parted
        involved_before = ahead | waiting_before
        fewer = min((ahead, waiting_before), key=len)
        if len(fewer) * 2 < len(involved_before) and mixes(fewer, ahead):
            return _root(sorted(fewer), sorted(involved_before - fewer), True, step - 1, known), step - 1
    crossed = {rank for rank, right in checked.items() if right and after and not after.get(rank, False)}
    ahead = {rank for rank in crossed if after.get(rank) is False}
    if set(checked) == traced and ahead and not wrong & set(after) and not (wrong | crossed - ahead) & cut:
        # The ranks wrong in the step never completed the next one (whole traces that stop at it), and those right
        # in it that did complete the next one read it back wrong: the ones ahead ran fewer collectives in the
        # step (each left out its last, pairing its next one with the others' last, and went on while the others
        # wait with one left over), or the ones left waiting one more each; as with ranks left waiting in a step,
        # a strict minority of either side is the outliers (the fewest departing). Ranks right in the step with
        # no sum of the next hung beside those waiting and read back nothing mixed: they side with the waiting.
        fewer = min((wrong, ahead), key=len)
        if len(fewer) * 2 < len(involved) and mixes(fewer):
            return _root(sorted(fewer), sorted(involved - fewer), True, step, known), bound
    if set(checked) == traced and crossed == traced - wrong and all(after.get(rank) is False for rank in crossed):
        # Every rank read the step back, the ones right in it wrong all through the next: they ran fewer
        # collectives in it than the others (each left out its last, pairing its next one with the others' last),
        # or the others more; a strict minority of either side is the outliers (the fewest departing), as with
        # ranks left waiting in a step, where the wrong ones' offsets part by no more comms than those departures
        # mix (each rank that departed one comm's: a lone one leaves them off alike).
        fewer = min((wrong, crossed), key=len)
        if len(fewer) * 2 < len(traced) and mixes(fewer):
            return _root(sorted(fewer), sorted(traced - fewer), True, step, known), bound
    ranks = wrong | ((waiting | crossed | unseen) - apart)
    if apart and len(ranks) == 1:
        return _root(sorted(ranks), sorted(ranks), False, step, known), bound
    if len(ranks) < 2:
        ranks = traced
        if len(ranks) < 2:
            return None
    return _root(sorted(ranks), sorted(ranks), False, step, known), bound


def _ahead_of_waiting(verdicts: dict[int, dict[int, bool]], step: int, traced: set[int],
                      cut: frozenset[int]) -> tuple[set[int], set[int]] | None:
    """(ahead, waiting) where the ranks part in the step before `step`, the first one any rank read back wrong:
    every rank of `ahead` read that step back right and `step` wrong, and every rank of `waiting` has a whole trace
    (no file cut short) that ends with the step before that one, so it never completed the step they part in. The
    ones ahead left out that step's last collective (their next one paired with the others' last, which they file
    under `step`) and went on, while the others wait with nothing to pair their last one with; or those waiting
    ran more there. Ranks right in both steps shared no misaligned collective (bystanders: another TP group). None
    where any other rank is on record there. Worked example: ranks 0, 1 and 3 have sums of step 0 alone; rank 2
    read back step 1 right and step 2 wrong: rank 2 left out the end of step 1 (the others' drafter pass) and ran
    on, or ranks 0, 1 and 3 ran more collectives in step 1 than it."""
    parting = step - 1
    at, then, before = verdicts.get(parting, {}), verdicts.get(step, {}), verdicts.get(parting - 1, {})
    ahead = {rank for rank, right in then.items() if not right}
    waiting = traced - set(at)
    bystanders = {rank for rank, right in at.items() if right and then.get(rank) is True}
    if not ahead or not waiting or waiting & cut or not waiting <= set(before) or waiting & set(then):
        return None
    if set(at) - bystanders != ahead or not all(at[rank] for rank in ahead):
        return None
    return ahead, waiting


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
    return one_class(_checksums_by_step(fingerprints), counted | uncounted, {}, [])


def with_sums_placing_cut_ranks(root: Root, sums: Root, last_on_record: dict[int, int]) -> tuple[Root, list[Note]]:
    """A root the records show, with the ranks whose records were cut before the sides part (`root.unplaced_ranks`)
    placed by per-step checksums, where those part the same ranks the records do: one whose checksum parts with
    the outliers' read back what they did (it ran what they ran: an outlier too), one whose checksum reads as the
    reference's sides with it. An outlier placed so may have departed anywhere after its last record
    (`last_on_record`: rank -> last seq its records hold), so the range reaches back there."""
    unplaced = set(root.unplaced_ranks)
    if not unplaced or not root.majority or not sums.majority or root.seq_range is None \
            or sums.may_sum_apart_by_design:
        return root, []  # (a lone sum that may part by design places no one)
    members = set(root.outlier_ranks) | set(root.reference_ranks) | unplaced
    summed_out, summed_ref = set(sums.outlier_ranks), set(sums.reference_ranks)
    # (a rank of the reference with no sum of the step, its trace cut short before it, is placed by its records)
    if not members - set(root.reference_ranks) <= summed_out | summed_ref or not summed_out <= members \
            or not set(root.outlier_ranks) <= summed_out or set(root.reference_ranks) & summed_out:
        return root, []  # the checksums part other ranks than the records do (another comm's divergence, say)
    joined = sorted(unplaced & summed_out)
    sided = sorted(unplaced & summed_ref)
    low, high = root.seq_range
    if joined:
        low = min(low, *(last_on_record.get(rank, 0) + 1 for rank in joined))
    outliers = sorted(set(root.outlier_ranks) | set(joined))
    reference = sorted(set(root.reference_ranks) | set(sided))
    placed = replace(root, outlier_ranks=outliers, reference_ranks=reference, unplaced_ranks=[], seq=low,
                     seq_range=(low, high), majority=len(outliers) * 2 < len(outliers) + len(reference))
    if not joined:
        return placed, []
    return placed, [SumsPlaceCutRanks(tuple(joined), sums.step_bound, tuple(outliers), (low, high))]


def with_sums_before_records(root: Root, sums: Root) -> tuple[Root, list[Note]]:
    """A root whose records begin after the ranks already disagree, with the ranks whose per-step checksums part
    from the others' added, where those checksums compare every rank the records do: they departed too, before
    the records begin or in them (the records say who differs where they begin, not who departed first)."""
    members = set(sums.outlier_ranks) | set(sums.reference_ranks)
    if not set(root.outlier_ranks) | set(root.reference_ranks) <= members:
        return root, []
    return _with_sums_outliers(root, sums, members, "late_records")


def named_among(root: Root, outliers: list[int], members: set[int]) -> Root:
    """`root` naming `outliers` among `members` (the rest its reference), a majority where they are fewer."""
    return replace(root, outlier_ranks=outliers, reference_ranks=sorted(members - set(outliers)),
                   majority=len(outliers) * 2 < len(members))


def _with_sums_outliers(root: Root, sums: Root, members: set[int], basis: str) -> tuple[Root, list[Note]]:
    """`root` with the outliers of `sums` added among `members`, and the note that says so (`basis`: what does
    not say whose departure came first: "counts", or "late_records", records that begin after the ranks already
    disagree)."""
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
    by_step = _checksums_by_step(f for f in fingerprints if f.rank in reference)
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
        for rank, key in _result_keys(rows, checked).items():
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
