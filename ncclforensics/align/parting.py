"""Where groups of streams that split several ways first part, and which of them the ranks there side with.

propose (root.py) groups the ranks by streams that agree; where no group is a majority over the whole streams, the
ranks may still agree where the groups first part, and who departed first is the minority there.
"""

from __future__ import annotations

import numpy as np

from .edits import Codes, Placement, agree, compatible, merged, place_edits


def first_parting(streams: list[Codes]) -> int | None:
    """The first position where any two of the streams' records differ, or None."""
    at = None
    for i, a in enumerate(streams):
        for b in streams[i + 1:]:
            bad = np.flatnonzero(~compatible(a, 0, b, 0, min(a.length, b.length)))
            if bad.size:
                at = int(bad[0]) if at is None else min(at, int(bad[0]))
    return at


def pairs_at(a: Codes, b: Codes, at: int) -> bool:
    """Whether the two streams' records at position `at` may pair (a blank or a field one lacks pairs with any)."""
    return bool(compatible(a, at, b, at, 1)[0])


def first_parting_majority(streams: list[Codes], codes: dict[int, Codes], at: int) -> int | None:
    """The group (index into `streams`) whose record at `at`, the first position where any two groups' records
    differ, a strict majority of the ranks that tell the groups apart there share, or None. As where the whole
    streams are weighed (propose), a rank whose record there pairs with that group's and with one it parts from (it
    lacks the field that parts them, or its ring began later) tells nothing, and is not counted; one whose stream
    ends sooner may have gone on as either, and counts against it. A group with no record there (a ring that kept
    only later entries), which every rank pairs with and none takes the side of, is no majority.

    Worked example: ranks 0, 2 and 3 issue an all-reduce of 1 element at seq 1 and rank 1 one of 8; ranks 2 and 3
    part later, and rank 0's records end before they do: three groups, none a majority, yet at seq 1 three ranks
    against one say that rank 1 departed first. So do two against one, beside ranks whose NCCL logs carry no call
    stacks where only the call stacks part them."""
    for i, stream in enumerate(streams):
        if stream.length <= at:
            continue
        apart = [other for other in streams if other.length > at and not pairs_at(other, stream, at)]
        if not apart:
            continue  # (no record there that parts it from any other group: it takes no side where they part)
        held = [r for r, c in codes.items() if c.length > at and pairs_at(c, stream, at)
                and not any(pairs_at(c, other, at) for other in apart)]
        opposed = [r for r, c in codes.items() if c.length > at and not pairs_at(c, stream, at)]
        short = [r for r, c in codes.items() if c.length <= at]
        if len(held) * 2 > len(held) + len(opposed) + len(short):
            return i
    return None


def loose_joined(groups: list[tuple[list[int], Codes]], index: int, at: int, loose: set[int],
                  codes: dict[int, Codes]) -> list[tuple[list[int], Codes]]:
    """The groups with every stream that agrees with several of them moved where it claims least: into group
    `index`, the reference (the majority where the groups first part, at `at`), where it agrees with it, as it goes
    with the reference where that is the largest group; else into a group that sides with the reference at `at`
    (it departs later, if at all). Each was put with the largest group it agrees with; named with the group that
    parts from the reference at `at`, it would be said to have departed first, which its records do not show (a
    ring that began after `at`, a log without the field that parts them).

    Worked example: ranks 4 and 7 issue attention then MLP at seq 1, rank 3 the two swapped; ranks 4 and 7 part
    at seq 5. Rank 5's ring begins at seq 3 and agrees with ranks 7 and 3: it is no outlier of seq 1."""
    founders = [[r for r in members if r not in loose] or members for members, _ in groups]
    streams = [merged(codes[r] for r in ranks) for ranks in founders]
    later = [i for i in range(len(groups)) if i != index and pairs_at(streams[i], streams[index], at)]
    target: dict[int, int] = {}
    for i, (members, _) in enumerate(groups):
        for r in members:
            if r not in loose or i == index or set(members) <= loose:
                continue  # (a group of loose streams alone keeps them: it is founded on none)
            into = next((j for j in [index, *later] if agree(codes[r], streams[j])), None)
            if into is not None and into != i:
                target[r] = into
    if not target:
        return groups
    regrouped = []
    for i, (members, _) in enumerate(groups):
        kept = sorted({r for r in members if r not in target} | {r for r, j in target.items() if j == i})
        regrouped.append((kept, merged(codes[r] for r in kept)))
    return regrouped


def reference_among_alike(streams: list[Codes], codes: dict[int, Codes], at: int, first: int) -> int | None:
    """The group (index into `streams`) that is the reference among those whose records at `at`, the first position
    where any two groups part, pair with the majority's (group `first`): where they part later, the one whose record
    there a strict majority of every rank's records holds (the minority there departed later, if at all; a rank that
    departed at `at` still votes where its stream pairs again); `first` where nothing says more, and None where
    nothing says which of groups that tie where they part again ran the program while one's edit against the other
    may come as early as `at` (it may be the first departure). Worked example: ranks 1 and 2 issue `layers.1` at
    seq 2 and rank 3 `layers.2` (a swap); at seq 10 ranks 1 and 3 issue an all-gather and rank 2 an all-reduce: rank
    3 departed first, rank 2 later, and rank 1 is the reference. Where instead ranks 1 and 2 tie where they part
    again, and rank 2 launched one more lookalike than rank 1, which may be as early as seq 2, no reference is named:
    rank 1 or 2 may have departed there as rank 3 did."""
    alike = [first, *(i for i in range(len(streams)) if i != first and streams[i].length > at
                      and streams[first].length > at and pairs_at(streams[i], streams[first], at))]
    while len(alike) > 1:
        later = first_parting([streams[i] for i in alike])
        found = first_parting_majority([streams[i] for i in alike], codes, later) if later is not None else None
        if found is None and later is not None and _may_depart_by(streams, alike, at):
            # No majority where they part again, and either may have departed as early as the first parting (among
            # lookalikes before it): who departed first is not known.
            return None
        if found is None:
            break
        held = alike[found]
        alike = [held, *(i for i in alike if i != held and streams[i].length > later
                          and pairs_at(streams[i], streams[held], later))]
        first = held
    return first


def _may_depart_by(streams: list[Codes], alike: list[int], at: int) -> bool:
    """Whether, of the groups `alike` (indexes into `streams`), one's likeliest edits against another's stream may
    start at or before position `at`."""
    for i in alike:
        for j in alike:
            if i == j:
                continue
            found, _ = place_edits(0, streams[j], streams[i], 0)
            top = max((p.score for p in found), default=None)
            if any(p.low <= at for p in found if p.score == top):
                return True
    return False


def rival_reference(groups: list[tuple[list[int], Codes]], codes: dict[int, Codes], at: int, first: int,
                    loose: set[int]) -> int | None:
    """A group (index into `groups`) that parts from group `first`, the majority where the groups first part (at
    `at`), and that explains the ranks' streams as well as it does as the program: no more ranks depart from it,
    and each group that does departs by one edit, no larger in all than those `first` needs; else None. The
    majority there then says nothing of who departed first: ranks that each departed at `at` may hold one record
    alike there (a rank that left out a collective and one that issued the next one early both issue that next
    one at `at`) and part from each other right after, while the minority ran the program. `loose`: ranks that
    agree with several groups, whose streams found none (as in loose_joined).

    Worked example (950319): ranks 2 and 3 issue `layers.1` then `layers.2`; rank 0 left out `layers.1`, rank 1
    issued the two swapped. At the first parting ranks 0 and 1 issue `layers.2`, rank 2 `layers.1`, and rank 3's
    records there carry no tag. With rank 1 as the program, rank 2 swapped two and rank 0 left one out; with rank
    2, rank 1 swapped two and rank 0 left one out: two ranks and three collectives either way, so nothing says
    which of ranks 1 and 2 departed. Where the ranks alike at the parting part again later by a second edit of
    one of them (a swap there and another one later), the minority there needs more and is no rival."""
    founders = [merged(codes[r] for r in ([r for r in members if r not in loose] or members)) for members, _ in groups]
    cost = {first: _cost_as_program(founders, codes, first)}
    for i, stream in enumerate(founders):
        if i == first or stream.length <= at or founders[first].length <= at or pairs_at(stream, founders[first], at):
            continue
        mine = _cost_as_program(founders, codes, i)
        if mine is not None and cost[first] is not None and mine <= cost[first]:
            return i
    return None


def _cost_as_program(streams: list[Codes], codes: dict[int, Codes], index: int) -> tuple[int, int] | None:
    """With group `index` as the program: how many ranks depart from it, and the fewest collectives that one
    edit per departing group changes (None where one edit explains no such group's whole stream)."""
    program = streams[index]
    departing = sum(1 for stream in codes.values() if not agree(stream, program))
    size = 0
    for i, stream in enumerate(streams):
        if i == index or agree(stream, program):
            continue
        found, whole = place_edits(0, stream, program, 0)
        if not found or not whole:
            return None
        size += min(p.size for p in found)
    return departing, size


def departed_alike(streams: list[Codes], sizes: list[int], margin: int) -> bool:
    """Whether groups other than the first (the largest, `streams[0]`), whose likeliest edits against it may be one
    edit (one kind and size, at a seq they have in common), are together no fewer than it (`sizes`: the ranks each
    group counts; `margin`: ranks that side with either): they may have departed alike there, differing only in
    what they issued, and the first group is then no larger than the side that departed. Worked example (1011587):
    ranks 0 and 2 launched 19 all-reduces alike, ranks 5 and 7 one more each, and rank 7 an all-gather at seq 16:
    ranks 5 and 7 each ran one extra at seq 16, or ranks 0 and 2 each left one out there (and rank 7's differs)."""
    reference = streams[0]
    likeliest: list[list[Placement]] = []
    for stream in streams[1:]:
        found, _ = place_edits(0, stream, reference, 0)
        top = max((p.score for p in found), default=None)
        likeliest.append([p for p in found if p.score == top])
    for i, mine in enumerate(likeliest):
        for edit in mine:
            low, high, together = edit.low, edit.high, sizes[1 + i]
            for j, theirs in enumerate(likeliest):
                if j == i:
                    continue
                common = [(max(low, p.low), min(high, p.high)) for p in theirs if p.kind is edit.kind
                          and p.size == edit.size and max(low, p.low) <= min(high, p.high)]
                if common:
                    (low, high), together = common[0], together + sizes[1 + j]
            if together + margin >= sizes[0]:
                return True
    return False
