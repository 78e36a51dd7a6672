"""The enqueued counts: each process group's ranks by PyTorch's own count of their work (`EnqueueMarks`), read from
`last enqueued NCCL work: 50` lines, Flight Recorder pg_status and desync reports (whose group ranks are moved onto
global ranks here).

What the counts say is read in marks_only.py (roots where no streams compare a group's ranks) and
enqueued_past_records.py (what ranks launched past their records); reading them off the lines is apart from both.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..model import CommInfo, Location, ProgressReport, WatchdogEvent
from .answers import ENQUEUED_COUNTS
from .watchdog import DEFAULT_GROUP, DESYNC_REPORT, STOP_EVENTS, TIMEOUT_KINDS, UNNAMED_GROUP


@dataclass
class EnqueueMarks:
    """One process group's ranks by PyTorch's own count of their work."""

    launched: dict[int, int] = field(default_factory=dict)  # rank -> last work enqueued
    completed: dict[int, int | None] = field(default_factory=dict)  # rank -> last work completed
    evidence: list[Location] = field(default_factory=list)
    counted_at: dict[int, Location] = field(default_factory=dict)  # rank -> the line of its `last enqueued` count
    stops: list[str] = field(default_factory=list)  # timeouts and errors in the group
    source: str = ENQUEUED_COUNTS  # or "PyTorch's desync report", where the counts come from one
    # ranks whose count is a floor: a desync report's laggard, counted by the last collective its watchdog saw
    # start (what it wrote to the store); it may have enqueued more (the others' own reports lag their enqueued
    # counts the same way), and the report has no word on a rank that died after it
    floors: set[int] = field(default_factory=set)
    # ranks whose count is all they launched by a desync report: its laggards that finished their last collective
    # and joined no next one
    exact: set[int] = field(default_factory=set)
    reported_at: dict[int, tuple[Location, ...]] = field(default_factory=dict)  # rank of `exact` -> the reports' lines
    dumped: bool = False  # some count is a Flight Recorder dump's pg_status (a snapshot of every rank's progress)
    # rank -> (number on the marks' numbering, op) of the last collective a desync report's snapshot gives it
    last_ops: dict[int, tuple[int, str]] = field(default_factory=dict)
    # ranks a desync report shows in a collective of the group that they joined and never finished (`[0] joined but
    # didn't finish collective #4`, `#6 started ranks: [0, 3]`): held there, whatever their own files hold
    waiting: set[int] = field(default_factory=set)
    # how many places in the group its lines number (the highest, plus one): a floor of its size, whichever of its
    # members left a file (a desync report of a TP pair names places 0 and 1 where only one of the two left a log)
    places: int = 0
    # count -> how many members a desync report gives at it by their place in the group alone, with no line that
    # gives their global ranks: never named, they still weigh in which count most members share
    unnamed: dict[int, int] = field(default_factory=dict)


def enqueue_marks(progress: list[ProgressReport], watchdog: list[WatchdogEvent],
                  comm_infos: list[CommInfo] = (), looked_at: frozenset[int] | None = None) -> dict[str, EnqueueMarks]:
    """group -> its ranks' marks from `last enqueued NCCL work: 50, last completed NCCL work: 49` lines (the
    highest of a rank's). A timeout at SeqNum N is no count (more work may be enqueued behind it); it marks the
    group as stopped. `comm_infos` (Flight Recorder `pg_config`) list groups' members, which place the ranks of a
    desync report. `looked_at`: the ranks of a --rank view; the others a report places are left out."""
    marks_of: list[tuple[str | None, int, int, int | None, Location]] = [
        (p.comm, p.rank, p.last_enqueued, p.last_completed, p.loc) for p in progress
        if p.rank is not None and p.last_enqueued is not None]
    named = {comm for comm, *_ in marks_of if comm} | {w.comm for w in watchdog if w.comm and w.kind in STOP_EVENTS}
    default = next(iter(named)) if len(named) == 1 else UNNAMED_GROUP
    groups: dict[str, EnqueueMarks] = {}
    for comm, rank, enqueued, completed, loc in marks_of:
        marks = groups.setdefault(comm or default, EnqueueMarks())
        if enqueued >= marks.launched.get(rank, -1):
            marks.launched[rank] = enqueued
            marks.evidence.append(loc)
            marks.counted_at[rank] = loc
            marks.dumped |= loc.field == "pg_status"
        if completed is not None and completed >= (marks.completed.get(rank) or -1):
            marks.completed[rank] = completed
    roster = _roster(watchdog, comm_infos)  # (once: finding a report's group scans the lines)
    _desync_marks(groups, watchdog, default, roster)
    _snapshot_ops(groups, watchdog, default, roster)
    _reported_waits(groups, watchdog, default, roster)
    _places_numbered(groups, watchdog, default)
    for event in watchdog:
        group = groups.get(event.comm or default)
        if group is not None and event.kind in STOP_EVENTS:
            group.stops.append(f"watchdog {event.kind.replace('_', ' ')} ({event.loc})")
    if looked_at is not None:
        for marks in groups.values():
            _keep_only(marks, looked_at)
    return groups


def _keep_only(marks: EnqueueMarks, ranks: frozenset[int]) -> None:
    """`marks` of `ranks` only: a view's other ranks are not missing, only not looked at, yet a desync report of a
    rank in the view places them too (`#31 started ranks: [0, 1, 3, 4]`); kept, they would read as ranks that left
    no file and swing the view's majority."""
    for by_rank in (marks.launched, marks.completed, marks.counted_at, marks.reported_at, marks.last_ops):
        for rank in set(by_rank) - ranks:
            del by_rank[rank]
    marks.floors &= ranks
    marks.exact &= ranks
    marks.waiting &= ranks
    marks.unnamed = {}  # (members unnamed may be outside the view)


def _global_lagging(report: WatchdogEvent, group: str, members: set[int], job: set[int],
                    entries: tuple | None = None, places: dict[int, int] | None = None,
                    listed: tuple[int, ...] | None = None) -> tuple | None:
    """The report's laggards (or other `entries` of it, its snapshot's) with global ranks. It numbers ranks within
    the group (`[2]` of a group of global ranks 4-7 is rank 6): where a dump lists the group's members in order
    (`listed`, pg_config), group rank i is the i-th of them; in the default group (the world) they are global
    already, as they are where the report names as many ranks as the job has (`job`: every rank any line is from;
    the group is the world); else through the places in the group that lines give their ranks (`places`, see
    _through_places), and members 0..k-1 on record are the group's places 0..k-1 (no member is below them; a rank
    past them may be any member above); else, with every member on record, group rank i is the i-th lowest; else
    None (which rank is meant is not known). (A rank that died leaves no line about the group: the default group
    still numbers it, and `members`, the ranks with lines about the group, may lack it.)"""
    entries = report.lagging if entries is None else entries
    if listed:
        if any(r >= len(listed) for ranks, *_ in entries for r in ranks):
            return None  # (a place past the list's end: the report is of another group of that name)
        return tuple((tuple(listed[r] for r in ranks), *rest) for ranks, *rest in entries)
    if group == DEFAULT_GROUP:
        return entries
    named_all = set(report.group_ranks)
    if named_all and named_all == set(range(len(named_all))) == job:
        return entries
    lowest = next(k for k in range(len(members) + 1) if k not in members)  # members 0..lowest-1 are on record
    placed = _through_places(entries, {**{rank: rank for rank in range(lowest)}, **(places or {})})
    if placed is not None:
        return placed
    order = sorted(members)
    named = {r for entry in entries for r in entry[0]}
    if not named or max(named) >= len(order) or named_all and len(named_all) != len(order):
        return None  # (a member with no line of its own would shift every rank after it)
    return tuple((tuple(order[r] for r in entry[0]), *entry[1:]) for entry in entries)


def _through_places(entries: tuple, places: dict[int, int], partly: bool = False) -> tuple | None:
    """`entries` with their group ranks as global ranks, through the ranks whose place in the group a line gives
    (`places`: global rank -> group rank, `[rank7]: ... [PG ID 1 PG GUID 2(tp) Rank 3]`); None where some rank is
    not placed so (`partly`: those ranks left out, and entries left with none). A group numbers its members in
    ascending global order, so global rank g at place k has k members below it: where two known places (or the
    start, place -1 at global -1) are as far apart in both numberings, the members between them are every global
    rank between them, in order."""
    known = sorted({(-1, -1), *((place, rank) for rank, place in places.items())})
    if any(b[1] <= a[1] or b[0] == a[0] for a, b in zip(known, known[1:])):
        return None  # two lines that disagree on the order
    spans = list(zip(known, known[1:]))

    def global_rank(place: int) -> int | None:
        for (low, at_low), (high, at_high) in spans:
            if place in (low, high):
                return at_low if place == low else at_high
            if low < place < high:  # (between two known places as far apart in both numberings: consecutive)
                return at_low + place - low if at_high - at_low == high - low else None
        return None  # past every known place

    out = []
    for ranks, *rest in entries:
        found = [global_rank(r) for r in ranks]
        if None in found and not partly:
            return None
        if any(r is not None for r in found):
            out.append((tuple(r for r in found if r is not None), *rest))
    return tuple(out)


def _reporting_group(report: WatchdogEvent, watchdog: list[WatchdogEvent]) -> str | None:
    """The group of the timeout a desync report follows in the same file: the watchdog that caught it prints the
    report, which names no group of its own."""
    before = [w for w in watchdog if w.kind in TIMEOUT_KINDS and w.comm and w.loc.path == report.loc.path
              and (w.loc.line or 0) <= (report.loc.line or 0)]
    return max(before, key=lambda w: w.loc.line or 0).comm if before else None


def _add_laggards(marks: EnqueueMarks, report: WatchdogEvent, lagging: tuple, latest: tuple = ()) -> None:
    """Laggards the `last enqueued` marks lack, and other ranks the report's snapshot gives (`latest`: `#16 started
    ranks: [0, 2]`), counted as the report counts them and moved onto the marks' numbering (the two counters may
    differ by one): through a laggard that both count, else through the reporting rank, whose mark and the report's
    own collective number (`Timeout at collective #10`) are one collective. A rank the marks lack that is no
    laggard still counts: left out, the laggards would face only the ranks that left marks (ranks 1 and 3 behind
    ranks 0 and 2 look like rank 0 ahead where only ranks 0 and 3 left marks)."""
    offsets = {marks.launched[r] - number for ranks, number, _ in lagging for r in ranks if r in marks.launched}
    mine = marks.launched.get(report.rank) if report.rank is not None else None
    if not offsets and mine is not None and report.seq is not None:
        offsets = {mine - report.seq}
    if len(offsets) != 1:
        return  # nothing ties the two numberings, or they do not agree
    offset = offsets.pop()
    # A laggard that finished its last collective and joined no next one launched no more (its watchdog would
    # have seen the next start), unless another group's held its GPU; one that joined and did not finish, and
    # the others the snapshot gives, may have more enqueued behind: floors.
    exact = {r for ranks, _, joined in lagging if not joined for r in ranks}
    for ranks, number, *_ in lagging + latest:
        added = [r for r in ranks if r not in marks.launched]
        for rank in added:
            marks.launched[rank] = number + offset
            if rank in exact:
                marks.exact.add(rank)
                marks.reported_at[rank] = (*marks.reported_at.get(rank, ()), report.loc)
            else:
                marks.floors.add(rank)
        if added:
            marks.evidence.append(report.loc)


@dataclass
class _Roster:
    """What the watchdog lines say of the groups' ranks: group -> the global ranks whose lines are about it
    (`members`), every rank any line is from (`job`), and group -> {global rank: its place in the group} where a
    line gives both (`places`); and group -> its members in order where dumps list them and agree (`listed`)."""

    members: dict[str, set[int]]
    job: set[int]
    places: dict[str, dict[int, int]]
    listed: dict[str, tuple[int, ...]] = field(default_factory=dict)

    def global_entries(self, report: WatchdogEvent, group: str, entries: tuple | None = None) -> tuple | None:
        """The report's laggards (or other `entries`) with global ranks (_global_lagging)."""
        return _global_lagging(report, group, self.members.get(group, set()), self.job, entries,
                               self.places.get(group), self.listed.get(group))

    def sided_entries(self, report: WatchdogEvent, group: str, entries: tuple) -> tuple | None:
        """The snapshot `entries` with global ranks where lines place only some of its ranks (_through_places),
        the others left out, if every one left out shares the count that most of the placed ranks share: then
        leaving them out swings no majority and hides no outlier. Else None (`[0, 1]` at #7 and `[2, 3]` at #9
        with place 3 unplaced: left out, it would turn a tie into ranks 0 and 1 ahead)."""
        places = self._known_places(group)
        if places is None:
            return None
        each = [_through_places((entry,), places, partly=True) for entry in entries]
        if any(found is None for found in each):
            return None  # (lines that disagree on the order)
        counts: dict[int, int] = {}
        left_out: set[int] = set()
        for (ranks, number, *_), found in zip(entries, each):
            kept = len(found[0][0]) if found else 0
            counts[number] = counts.get(number, 0) + kept
            if kept < len(ranks):
                left_out.add(number)
        top = sorted(counts.values(), reverse=True)
        if not top or len(top) > 1 and top[0] == top[1]:
            return None  # no count most placed ranks share
        lead = max(counts, key=counts.get)
        return tuple(e for found in each for e in found) if left_out <= {lead} else None

    def sided_laggards(self, report: WatchdogEvent, group: str) -> tuple | None:
        """The report's laggards with global ranks where lines place only some of them, the others left out, if
        its snapshot (which lists every member) is so sided (sided_entries): the laggards left out then share the
        count most placed ranks share. Else None. Worked example: rank 6 of a group of eight is at place 6 and
        reports `[0, 1, 2, 3, 4, 5, 7] finished collective #20, but didn't join collective #21`; places 0-5 are
        ranks 0-5, place 7 is some rank past 6, but it finished #20 with every placed rank but the reporting one,
        so ranks 0-5 lag at #20 and rank 6 alone ran on."""
        places = self._known_places(group)
        if places is None or not report.latest or self.sided_entries(report, group, report.latest) is None:
            return None
        return _through_places(report.lagging, places, partly=True) or None

    def partly_placed(self, report: WatchdogEvent, group: str) -> tuple[tuple | None, dict[int, int]]:
        """The report's laggards with global ranks where lines place only some of them (_through_places), and
        count -> how many members at it no line places or the counts leave unnamed: the laggards left out, and
        the members of its snapshot (which lists every one) that are no laggard and not the reporting rank, one
        past the laggards' count as it is (`[0, 2, 3] finished collective #10, but didn't join collective #11`
        where only places 0 and 1 are on record: rank 0 and two unnamed members at #10, the reporting rank at
        #11). (None, {}) where the lines disagree on the order, the report numbers ranks otherwise, or its
        laggards are not all of one count that joined no next collective."""
        places = self._known_places(group)
        numbers = {(number, joined) for _, number, joined in report.lagging}
        if not places or not report.latest or len(numbers) != 1 or next(iter(numbers))[1] or report.rank is None:
            return None, {}
        each = [_through_places((entry,), places, partly=True) for entry in report.lagging]
        lagging = {r for ranks, *_ in report.lagging for r in ranks}
        others = {r for ranks, *_ in report.latest for r in ranks} - lagging
        if any(found is None for found in each) or report.rank in {r for f in each for e in f for r in e[0]} \
                or not others:
            return None, {}
        number = next(iter(numbers))[0]
        kept = sum(len(e[0]) for found in each for e in found)
        unnamed = {number: len(lagging) - kept, number + 1: len(others) - 1}  # (one of the others reports)
        return tuple(e for found in each for e in found), unnamed

    def _known_places(self, group: str) -> dict[int, int] | None:
        """global rank -> its place in `group`, where lines give it and for the members 0..k-1 on record (no
        member is below them); None where the report numbers ranks as given (the default group) or a dump lists
        the members (a report of another group of that name)."""
        if group == DEFAULT_GROUP or group in self.listed:
            return None
        members = self.members.get(group, set())
        lowest = next(k for k in range(len(members) + 1) if k not in members)
        return {**{rank: rank for rank in range(lowest)}, **self.places.get(group, {})}


def _listed_members(comm_infos: list[CommInfo], places: dict[str, dict[int, int]]) -> dict[str, tuple[int, ...]]:
    """group -> its global ranks in order, where pg_config lists them (keyed by the group's name, which is the
    `PG GUID` of PyTorch's lines), every list of that name is the same, and no line places a rank elsewhere."""
    lists: dict[str, set[tuple[int, ...]]] = {}
    for info in comm_infos:
        if info.loc.field == "pg_config" and info.ranks:
            lists.setdefault(info.comm, set()).add(tuple(info.ranks))
    listed = {}
    for group, found in lists.items():
        if len(found) > 1:
            continue  # dumps that disagree on the group's members
        ranks = next(iter(found))
        if all(place < len(ranks) and ranks[place] == rank for rank, place in places.get(group, {}).items()):
            listed[group] = ranks
    return listed


def _roster(watchdog: list[WatchdogEvent], comm_infos: list[CommInfo] = ()) -> _Roster:
    members: dict[str, set[int]] = {}
    places: dict[str, dict[int, int]] = {}
    for event in watchdog:
        group = event.comm or (_reporting_group(event, watchdog) if event.kind == "desync_report" else None)
        if group is not None and event.rank is not None:
            members.setdefault(group, set()).add(event.rank)
            if event.group_rank is not None:
                places.setdefault(group, {})[event.rank] = event.group_rank
    return _Roster(members, {event.rank for event in watchdog if event.rank is not None}, places,
                   _listed_members(comm_infos, places))


def _snapshot_ops(groups: dict[str, EnqueueMarks], watchdog: list[WatchdogEvent], default: str,
                  roster: _Roster) -> None:
    """Each group's `last_ops`: the op of every rank's last collective, as desync reports' snapshots give it
    (`#4 started ranks: [2] started ALLREDUCE`), moved onto the marks' numbering through the reporting rank (its
    mark and the report's own collective number are one collective). Where the reporting rank has no mark, or
    reports disagree, nothing ties them, and the group gets none."""
    disagree: set[str] = set()
    for event in watchdog:
        if event.kind != "desync_report" or not event.latest or event.rank is None or event.seq is None:
            continue
        group = event.comm or _reporting_group(event, watchdog) or default
        marks = groups.get(group)
        latest = roster.global_entries(event, group, event.latest)
        if marks is None or latest is None or event.rank not in marks.launched:
            continue
        offset = marks.launched[event.rank] - event.seq
        for ranks, number, _, op in latest:
            for rank in ranks:
                if op is not None and marks.last_ops.setdefault(rank, (number + offset, op)) != (number + offset, op):
                    disagree.add(group)
    for group in disagree:
        groups[group].last_ops = {}


def _reported_waits(groups: dict[str, EnqueueMarks], watchdog: list[WatchdogEvent], default: str,
                    roster: _Roster) -> None:
    """Each group's `waiting`: the ranks a desync report's laggards or snapshot show as having joined a collective
    and not finished it (a rank with no file of its own too: `[0] joined but didn't finish collective #4` in the
    report of its TP peer)."""
    for event in watchdog:
        if event.kind != "desync_report":
            continue
        group = event.comm or _reporting_group(event, watchdog) or default
        if group not in groups:
            continue
        lagging = roster.global_entries(event, group) if event.lagging else ()
        latest = roster.global_entries(event, group, event.latest) if event.latest else ()
        groups[group].waiting.update(r for ranks, _, joined in lagging or () if joined for r in ranks)
        groups[group].waiting.update(r for ranks, _, finished, _ in latest or () if not finished for r in ranks)


def _places_numbered(groups: dict[str, EnqueueMarks], watchdog: list[WatchdogEvent], default: str) -> None:
    """Each group's `places`: one past the highest place in the group a line gives (`[PG ID 1 PG GUID 2 Rank 1]`,
    or a desync report's ranks, which it numbers within the group): the group has at least that many members."""
    for event in watchdog:
        named = [*event.group_ranks, *(() if event.group_rank is None else (event.group_rank,))]
        group = event.comm or (_reporting_group(event, watchdog) if event.kind == "desync_report" else None) or default
        if named and group in groups:
            groups[group].places = max(groups[group].places, max(named) + 1)


def _desync_marks(groups: dict[str, EnqueueMarks], watchdog: list[WatchdogEvent], default: str,
                  roster: _Roster) -> None:
    """Counts from PyTorch's desync reports, for groups with no `last enqueued` marks: `[6] finished collective
    #19, but didn't join collective #20` says rank 6 launched 19 and the reporting rank (and every rank the report
    does not name) joined #20. The report counts collectives its own way (it may differ from the SeqNum by one),
    so its numbers are not mixed with other marks. Laggards no line places are left out where the snapshot shows
    that leaving them out swings no majority (sided_laggards); else, where the report's numbers are the group's
    counts, they count by number alone (`unnamed`, partly_placed)."""
    by_group: dict[str, dict[int, int]] = {}
    unnamed_of: dict[str, dict[int, int]] = {}
    evidence: dict[str, list[Location]] = {}
    for event in watchdog:
        if event.kind != "desync_report" or not event.lagging:
            continue
        group = event.comm or _reporting_group(event, watchdog) or default
        lagging = roster.global_entries(event, group)
        if lagging is None:
            lagging = roster.sided_laggards(event, group)
        unnamed: dict[int, int] = {}
        if lagging is None and not (group in groups and len(groups[group].launched) > 1):
            lagging, unnamed = roster.partly_placed(event, group)
        if lagging is None:
            continue
        if group in groups and len(groups[group].launched) > 1:
            latest = roster.global_entries(event, group, event.latest) if event.latest else ()
            if latest is None:
                latest = roster.sided_entries(event, group, event.latest)
            if latest is not None:  # (laggards added without the snapshot's other ranks would swing a majority)
                _add_laggards(groups[group], event, lagging, latest)
            continue  # marks of two or more ranks: the report's own numbers are not mixed in
        counts = by_group.setdefault(group, {})
        named = {r for ranks, *_ in lagging for r in ranks}
        for ranks, number, joined in lagging:
            for rank in ranks:
                counts[rank] = min(counts.get(rank, number), number)
            if not joined and event.rank is not None and event.rank not in named:
                counts[event.rank] = max(counts.get(event.rank, 0), number + 1)
        evidence.setdefault(group, []).append(event.loc)
        seen = unnamed_of.setdefault(group, {})  # (reports of one laggard: the most any one gives)
        seen.update({number: max(n, seen.get(number, 0)) for number, n in unnamed.items()})
    for group, counts in by_group.items():
        if len(set(counts.values()) | set(unnamed_of[group])) > 1 and counts:
            # One rank's `last enqueued` mark compares with nothing; the report's counts replace it.
            marks = groups[group] = EnqueueMarks(stops=groups[group].stops if group in groups else [])
            marks.launched.update(counts)
            marks.unnamed = unnamed_of[group]
            marks.evidence.extend(evidence[group])
            marks.source = DESYNC_REPORT
