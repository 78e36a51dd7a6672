"""The members of a process group that PyTorch's lines show, those with no line about it included.

A line about a group gives the rank's place in it (`[rank3]:[E...] [PG ID 1 PG GUID 1(tp) Rank 3]`), and a group
numbers its members in ascending global order (`new_group` and `split_group` sort the ranks they are given). So
global rank g at place k has k members below it, and where two members' places are as far apart as their global
ranks, every global rank between them is a member: ranks 1 and 3 at places 1 and 3 leave place 2 to rank 2 alone,
whether or not rank 2 wrote a line about the group (its log may hold only the default group's dump signal); so too
rank 3 at place 3 leaves places 0-2 to ranks 0-2. A rank past the highest place on record may or may not be one:
the lines say nothing of the group's size.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..model import WatchdogEvent


def members_by_places(watchdog: Iterable[WatchdogEvent], group: str) -> set[int]:
    """The global ranks PyTorch's lines show in `group`: those with a line about it, and those its places leave
    between two of them (module docstring). Where lines disagree on a rank's place, or place two ranks out of
    global order, the places say nothing, and only the ranks with lines are given."""
    lined: set[int] = set()
    places: dict[int, set[int]] = {}
    for event in watchdog:
        if event.comm != group or event.rank is None:
            continue
        lined.add(event.rank)
        if event.group_rank is not None:
            places.setdefault(event.rank, set()).add(event.group_rank)
    if any(len(found) > 1 for found in places.values()):
        return lined
    # (place -1 at global rank -1 stands for the start: a rank at place k, its global rank k, has every lower
    # global rank below it in the group)
    placed = sorted({(-1, -1), *((next(iter(found)), rank) for rank, found in places.items())})
    if any(b[0] == a[0] or b[1] <= a[1] for a, b in zip(placed, placed[1:])):
        return lined
    between = {rank for (low, at_low), (high, at_high) in zip(placed, placed[1:])
               if at_high - at_low == high - low for rank in range(at_low + 1, at_high)}
    return lined | between
