"""What PyTorch's watchdog lines say about collectives: timeouts as stream rows, and the enqueued counts.

A rank that left no Flight Recorder dump and no NCCL log still says, in its timeout line, which collective it
was waiting in: `WorkNCCL(SeqNum=4084, OpType=BROADCAST, NumelIn=56623104, ...)`. Lines pasted from several
ranks are often all there is; ranks stuck at one SeqNum in different collectives are a desync, and ranks stuck
at different SeqNums are waiting for each other. Where no rank's collectives are on record, the counts of
work each rank enqueued (`last enqueued NCCL work: 50`) still say which ranks launched more or fewer, like RAS
counts do.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import polars as pl

from ..model import (
    CommInfo,
    EventState,
    Evidence,
    Location,
    ProgressReport,
    WatchdogEvent,
    conform,
)
from .comm_streams import comm_streams
from .consequences import Disagreement, candidates, odd_ones, ran_ahead
from .answers import DIFFERENT_OPS, ENQUEUED_COUNTS, CommAnalysis, RangeReason, Root, ops_at
from .held_back import held_back_root
from .ras_only import root_from_counts, wedge_from_counts
from .streams import Streams, traced
from .wedge import Wedge

TIMEOUT_KINDS = ("timeout", "blocking_wait_timeout")
STOP_EVENTS = {"timeout", "blocking_wait_timeout", "async_error", "abort", "desync_report"}  # a group stopped
UNNAMED_GROUP = "unnamed"  # the process group of timeout lines that name none, where no line names one either
DESYNC_REPORT = "PyTorch's desync report"  # the label of an answer resting on one (its counts, or its snapshot)
DEFAULT_GROUP = "0"  # PyTorch's default process group (`PG ID 0`, `PG GUID 0(default_pg)`): the world, in rank order


def with_watchdog_rows(evidence: list[Evidence]) -> list[Evidence]:
    """`evidence`, with a collective row for each (rank, group, SeqNum) a timeout line names, where no file gives
    any collectives, or every one that does was cut short (their records end where the files do, before the
    timeouts). (Beside a whole dump or log, one row at the SeqNum of a timeout would make a rank's records start
    there and hide the others' earlier history from the comparison; the timeout still marks what completed.)
    Beside such files, a group whose ranks time out at one SeqNum in different collectives still gets its rows,
    where no file's collectives bear its name: a desync the timeouts show that the files may not (a log cut short
    before it, or one that names the comm by its hash).
    The rows go into a copy of the Evidence of the file that holds the line; the state is `started`: it ran,
    and never finished. A row's call stack is the one PyTorch printed for the work (its frames outside torch, as
    a dump's entry gives them): ranks stuck at one SeqNum in collectives of one type and size may still have
    issued them from different code."""
    timeouts = [(item.path, event) for item in evidence for event in item.watchdog
                if event.kind in TIMEOUT_KINDS and event.seq is not None and event.rank is not None]
    stacks = {(rank, group, seq): event.stack for (group, rank, seq), event in
              _stack_events([w for item in evidence for w in item.watchdog]).items() if event.stack}
    if any(item.collectives.height and item.cut is None for item in evidence):
        recorded = {c for item in evidence if item.collectives.height
                    for c in item.collectives.get_column("comm").drop_nulls().unique().to_list()}
        desynced = _desynced_groups([event for _, event in timeouts], stacks)
        timeouts = [(path, event) for path, event in timeouts if event.comm in desynced - recorded]
    if not timeouts:
        return evidence
    # Older PyTorch prints no group on the timeout line; where the other lines name exactly one, it is that one.
    named = {event.comm for _, event in timeouts if event.comm}
    default = next(iter(named)) if len(named) == 1 else UNNAMED_GROUP
    rows: dict[str, dict[tuple[int, str, int], WatchdogEvent]] = {}
    for path, event in timeouts:
        key = (event.rank, event.comm or default, event.seq)
        if not any(key in by_file for by_file in rows.values()):  # the first line about a work wins
            rows.setdefault(path, {})[key] = event
    return [replace(item, collectives=_frame(rows[item.path], stacks)) if item.path in rows else item
            for item in evidence]


def _desynced_groups(timeouts: list[WatchdogEvent], stacks: dict[tuple[int, str, int], str]) -> set[str]:
    """The named groups some two of whose ranks time out at one SeqNum in different collectives: of another type
    or size, or alike in both and issued from different code (the call stacks PyTorch printed for them differ,
    `stacks`: (rank, group, SeqNum) -> stack), which no log of their signatures shows."""
    seen: dict[tuple[str, int], set[tuple]] = {}
    sites: dict[tuple[str, int], set[str]] = {}
    for event in timeouts:
        if event.comm:
            seen.setdefault((event.comm, event.seq), set()).add((event.op, event.numel_in))
            stack = stacks.get((event.rank, event.comm, event.seq))
            if stack is not None:
                sites.setdefault((event.comm, event.seq), set()).add(stack)
    return ({comm for (comm, _), ops in seen.items() if len(ops) > 1}
            | {comm for (comm, _), found in sites.items() if len(found) > 1})


def _frame(rows: dict[tuple[int, str, int], WatchdogEvent], stacks: dict[tuple[int, str, int], str]
           ) -> pl.DataFrame:
    records = [
        {"file": event.loc.path, "line": event.loc.line, "rank": rank, "comm": comm, "seq": seq, "op": event.op,
         "count": event.numel_in, "state": EventState.STARTED.value, "stack": stacks.get((rank, comm, seq)),
         "callsite": stacks[(rank, comm, seq)].split(" < ")[0] if (rank, comm, seq) in stacks else None}
        for (rank, comm, seq), event in sorted(rows.items(), key=lambda item: item[0])
    ]
    return conform(pl.DataFrame(records, schema_overrides={"line": pl.Int64, "count": pl.Int64}))


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
    dumped: bool = False  # some count is a Flight Recorder dump's pg_status (a snapshot of every rank's progress)
    # rank -> (number on the marks' numbering, op) of the last collective a desync report's snapshot gives it
    last_ops: dict[int, tuple[int, str]] = field(default_factory=dict)
    # ranks a desync report shows in a collective of the group that they joined and never finished (`[0] joined but
    # didn't finish collective #4`, `#6 started ranks: [0, 3]`): held there, whatever their own files hold
    waiting: set[int] = field(default_factory=set)


def enqueue_marks(progress: list[ProgressReport], watchdog: list[WatchdogEvent],
                  comm_infos: list[CommInfo] = ()) -> dict[str, EnqueueMarks]:
    """group -> its ranks' marks from `last enqueued NCCL work: 50, last completed NCCL work: 49` lines (the
    highest of a rank's). A timeout at SeqNum N is no count (more work may be enqueued behind it); it marks the
    group as stopped. `comm_infos` (Flight Recorder `pg_config`) list groups' members, which place the ranks of a
    desync report."""
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
    for event in watchdog:
        group = groups.get(event.comm or default)
        if group is not None and event.kind in STOP_EVENTS:
            group.stops.append(f"watchdog {event.kind.replace('_', ' ')} ({event.loc})")
    return groups


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


def _through_places(entries: tuple, places: dict[int, int]) -> tuple | None:
    """`entries` with their group ranks as global ranks, through the ranks whose place in the group a line gives
    (`places`: global rank -> group rank, `[rank7]: ... [PG ID 1 PG GUID 2(tp) Rank 3]`); None where some rank is
    not placed so. A group numbers its members in ascending global order, so global rank g at place k has k
    members below it: where two known places (or the start, place -1 at global -1) are as far apart in both
    numberings, the members between them are every global rank between them, in order."""
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
        if None in found:
            return None
        out.append((tuple(found), *rest))
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


def root_from_last_ops(comm: str, marks: EnqueueMarks) -> Root | None:
    """Where the ranks' counts agree, the snapshot of a desync report may still show ranks whose last collectives,
    of one number, are of different types (`#4 started ranks: [2] started ALLREDUCE` beside `#4 finished ranks:
    [0, 1, 3] finished _ALLGATHER_BASE`): they issued different collectives there, or one side left one out and
    added one before it (the next of the others', or a reorder), so the root is at that number or before. The
    outliers are the ranks of the types fewer ranks issued; with no type issued by a strict majority, every rank
    there, with no majority."""
    by_number: dict[int, dict[str, list[int]]] = {}
    for rank, (number, op) in sorted(marks.last_ops.items()):
        by_number.setdefault(number, {}).setdefault(op, []).append(rank)
    mixed = sorted(number for number, ops in by_number.items() if len(ops) > 1)
    if not mixed:
        return None
    number = mixed[0]
    groups = sorted(by_number[number].values(), key=lambda ranks: (-len(ranks), ranks))
    there = sorted(r for ranks in groups for r in ranks)
    majority = len(groups[0]) * 2 > len(there)
    # (with no majority, every rank there is named on both sides, as streams that split evenly are)
    outliers = sorted(r for ranks in groups[1:] for r in ranks) if majority else there
    return Root(comm=comm, seq=1, seq_range=(1, number), outlier_ranks=outliers,
                reference_ranks=[r for r in there if r not in outliers] if majority else there, kind=DIFFERENT_OPS,
                size=1, pinned_by=DESYNC_REPORT, reason=RangeReason.LAST_OPS, ops={}, majority=majority,
                shown=True)  # (a record differs, not only a count)


def _desync_marks(groups: dict[str, EnqueueMarks], watchdog: list[WatchdogEvent], default: str,
                  roster: _Roster) -> None:
    """Counts from PyTorch's desync reports, for groups with no `last enqueued` marks: `[6] finished collective
    #19, but didn't join collective #20` says rank 6 launched 19 and the reporting rank (and every rank the report
    does not name) joined #20. The report counts collectives its own way (it may differ from the SeqNum by one),
    so its numbers are not mixed with other marks."""
    by_group: dict[str, dict[int, int]] = {}
    evidence: dict[str, list[Location]] = {}
    for event in watchdog:
        if event.kind != "desync_report" or not event.lagging:
            continue
        group = event.comm or _reporting_group(event, watchdog) or default
        lagging = roster.global_entries(event, group)
        if lagging is None:
            continue
        if group in groups and len(groups[group].launched) > 1:
            latest = roster.global_entries(event, group, event.latest) if event.latest else ()
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
    for group, counts in by_group.items():
        if len(set(counts.values())) > 1:
            # One rank's `last enqueued` mark compares with nothing; the report's counts replace it.
            marks = groups[group] = EnqueueMarks(stops=groups[group].stops if group in groups else [])
            marks.launched.update(counts)
            marks.evidence.extend(evidence[group])
            marks.source = DESYNC_REPORT


def _compared(streams: Streams) -> bool:
    """Whether the streams let two ranks of some communicator be compared. Then they speak, not the counts: a
    group's PyTorch name and the communicator's hash cannot be told to be one, and the counts would only echo
    (or, where PyTorch counts work NCCL's lines do not, muddle) what the streams say."""
    # Rows made from timeout lines alone (one per rank) compare nothing but the op each rank waits in; streams
    # that end where a file was cut short speak only up to the cut, and past it the counts do. So do streams of
    # fingerprint traces alone: a trace records a collective once its result was read back (and is written out
    # per step), so it ends before whatever was in flight.
    return not streams.cut and any(len(members) > 1 for members in streams.members.values()) and any(
        part.height > 1 and not traced(part) for part in streams.parts.values())


def marks_only_root(groups: dict[str, EnqueueMarks], streams: Streams, stopped: bool = False) -> Root | None:
    """Where no streams compare a group's ranks, for a group that stopped: the ranks that enqueued more or fewer
    work than the others; of several groups, the first that is no consequence of another (see marks_only_roots)."""
    found = marks_only_roots(groups, streams, stopped=stopped)
    chosen = candidates([d for _, d in found])
    return next((root for root, d in found if d.comm in chosen), None)


def timeout_stacks(watchdog: list[WatchdogEvent]) -> dict[tuple[str, int, int], str]:
    """(group, rank, SeqNum) -> the call stack PyTorch printed for a work that timed out: the `Stack trace of the
    failed collective` that follows its timeout line in the same file, before any other timeout there (the
    watchdog that caught the timeout prints it, naming no group)."""
    return {key: event.message for key, event in _stack_events(watchdog).items()}


def _stack_events(watchdog: list[WatchdogEvent]) -> dict[tuple[str, int, int], WatchdogEvent]:
    """(group, rank, SeqNum) -> the `stack_trace` event of a work that timed out (see timeout_stacks)."""
    named = {w.comm for w in watchdog if w.comm and w.kind in TIMEOUT_KINDS}
    default = next(iter(named)) if len(named) == 1 else UNNAMED_GROUP
    stacks: dict[tuple[str, int, int], WatchdogEvent] = {}
    last: dict[tuple[str, int | None], WatchdogEvent] = {}  # (file, rank) -> its latest timeout (ranks may share one)
    for event in sorted(watchdog, key=lambda w: (w.loc.path, w.loc.line or 0)):
        key = (event.loc.path, event.rank)
        if event.kind in TIMEOUT_KINDS:
            last[key] = event
        elif event.kind == "stack_trace" and event.message and key in last:
            timeout = last.pop(key)
            if timeout.rank is not None and timeout.seq is not None:
                stacks.setdefault((timeout.comm or default, timeout.rank, timeout.seq), event)
    return stacks


def marks_only_roots(groups: dict[str, EnqueueMarks], streams: Streams, watchdog: list[WatchdogEvent] | None = None,
                     stopped: bool = False) -> list[tuple[Root, Disagreement]]:
    """Per group that no streams compare (none compare any ranks, or none holds the ranks that report on the
    group: the ring of every dump lost its entries, say), that stopped and whose ranks enqueued different counts
    of work, its root and who its disagreement involves (the ranks that reported on the group: its members on
    record). `watchdog`: the events, for the call stacks of the works that timed out; `stopped`: other evidence
    says the job stopped (a timeout, entries that never completed).

    The pg_status of dumps is a snapshot of every rank's progress, so its counts speak where nothing says the job
    stopped too; then the ranks behind may only lag (the dumps were taken while it ran), and the root says so
    (`Root.unstopped`)."""
    compared = _compared(streams)
    stacks = timeout_stacks(watchdog or [])
    found = []
    for comm, marks in sorted(groups.items()):
        if compared and _covered(marks, streams):
            continue
        if not (marks.stops or marks.dumped):
            continue
        # (a group that records tie to an NCCL comm hash goes by the hash, as its streams do)
        root = root_from_counts(streams.aliases.get(comm, comm), marks.launched, marks.source, marks.floors)
        if root is None and marks.stops and len(set(marks.launched.values())) == 1:
            root = root_from_last_ops(streams.aliases.get(comm, comm), marks)
        if root is not None and marks.stops and marks.source == ENQUEUED_COUNTS:
            # Ranks behind may be held back in another group by an extra collective here: the groups'
            # completion marks may say so (a desync report's own numbering does not mix with them).
            counted = {name: g for name, g in groups.items() if g.source == ENQUEUED_COUNTS}
            root = held_back_root(root, {name: g.launched for name, g in counted.items()},
                                  {name: g.completed for name, g in counted.items()}, stacks) or root
        if root is not None:
            if not (marks.stops or stopped):
                root = replace(root, unstopped=True)
            odd = odd_ones(marks.launched, set(root.outlier_ranks), root.majority)
            found.append((root, Disagreement(root.comm, frozenset(marks.launched), odd,
                                             ahead=ran_ahead(marks.launched, odd))))
    return found


def _covered(marks: EnqueueMarks, streams: Streams) -> bool:
    """Whether some comm's streams already compare what the group's counts say: two or more ranks' records of a
    comm that holds every rank the counts are of, each going as far as its count (a group's name and a comm's
    hash are tied by nothing else). Counts past every such comm's records say what no stream compares."""
    def reaches(comm: str, rank: int, count: int) -> bool:
        part = streams.parts.get((comm, rank))
        return part is not None and part.height > 0 and int(part.get_column("seq").max()) >= count

    return any(len(members) > 1 and set(marks.launched) <= set(members)
               and all(reaches(comm, rank, n) for rank, n in marks.launched.items())
               for comm, members in streams.members.items())


def marks_only_wedge(groups: dict[str, EnqueueMarks], streams: Streams, dead: set[int]) -> Wedge | None:
    """Who waits on whom, by the same counts, where no streams compare ranks and a group stopped."""
    if _compared(streams):
        return None
    for comm, marks in sorted(groups.items()):
        if not marks.stops or len(set(marks.launched.values())) < 2:
            continue
        wedge = wedge_from_counts(comm, marks.launched, marks.completed, dead, list(marks.stops), marks.evidence,
                                  floors=marks.floors)
        wedge.ops = ops_at(comm_streams(streams.comm_parts(comm)), wedge.seq)  # a timed-out rank's own line
        return wedge
    return None


def enqueued_in(groups: dict[str, EnqueueMarks], streams: Streams, comm: str) -> dict[int, int]:
    """rank -> the last work PyTorch counts it enqueued in the process group that is `comm` by name (empty where no
    group is)."""
    return next((dict(marks.launched) for name, marks in groups.items()
                 if marks.source == ENQUEUED_COUNTS and streams.aliases.get(name, name) == comm), {})


def uncounted_timeouts(streams: Streams, groups: dict[str, EnqueueMarks], comm: str) -> list[int]:
    """The ranks of `comm` whose records there are timeout lines alone and that no PyTorch count of enqueued work
    covers: what they launched is only known to reach their timeout's SeqNum."""
    return sorted(streams.timeout_only(comm) - set(enqueued_in(groups, streams, comm)))


def count_past_timeouts(analyses: dict[str, CommAnalysis], streams: Streams, groups: dict[str, EnqueueMarks]
                        ) -> dict[tuple[str, int], tuple[int, Location]]:
    """Where a rank's records of a comm are timeout lines alone, its last launched there is PyTorch's count of
    the work it enqueued, where a line gives one that goes further: the timeout's SeqNum is only a floor of it
    (`last enqueued work: 6464` beside a timeout at SeqNum 5730). Done once the roots are found (counts that
    differ are read as counts, by marks_only_root); returns (comm, rank) -> each count taken, and its line."""
    taken: dict[tuple[str, int], tuple[int, Location]] = {}
    for comm, analysis in analyses.items():
        marks = next((m for name, m in groups.items() if m.source == ENQUEUED_COUNTS
                      and streams.aliases.get(name, name) == comm), None)
        if marks is None:
            continue
        for rank in sorted(streams.timeout_only(comm) & set(marks.launched)):
            if rank in analysis.launched and marks.launched[rank] > analysis.launched[rank]:
                analysis.launched[rank] = marks.launched[rank]
                if rank in marks.counted_at:
                    taken[(comm, rank)] = (marks.launched[rank], marks.counted_at[rank])
    return taken


def counted_past_cuts(streams: Streams, groups: dict[str, EnqueueMarks],
                      tied: dict[str, str] | None = None) -> dict[str, dict[int, int]]:
    """comm -> {rank: last seq it enqueued} for ranks whose records of the comm end where a file was cut short,
    or that a configuration (or their own INIT line) names as members with none of their records kept (a dump's
    ring lost them, a log was cut before them), and whose PyTorch count of enqueued work goes further: what the
    rank launched past its records, by count only; or, for a rank cut short, as far as its records hold: it launched
    nothing past them.

    A process group is taken for the communicator only where it is the one group whose ranks are the comm's
    members (those on record, and those the configuration names) and whose count for every rank with whole
    records is the last seq those records hold, and it fits no other comm so (a group's name and a comm's hash
    are tied by nothing else). A rank whose file was cut short before it logged anything of the comm (not even
    its INIT line) may be a member too: where the group counts it, and no rank of the comm on record beside it,
    it is the member the cut hid (worked example: rank 0's NCCL log ends in the world's first all-reduce, before
    it joined its TP group; PyTorch's group over ranks 0-3 counts 18, 18, 16, 16, as the records of ranks 1-3
    end: rank 0 launched 18 there). A group that records already tie to the comm (`Streams.aliases`: its dump
    entries pair with the comm's logged collectives) is taken for it where it counts only some members: dumps'
    pg_status counts only the ranks that dumped, and a rank whose ring kept none of the comm's entries is on record
    there by its count alone (worked example: ranks 1 and 3 dumped, rank 3's ring holding its TP group's entries
    only; the world's pg_status counts 3 and 2, and the logs of ranks 0-2 end at 3, 3, 2: rank 3 launched 2 there).
    `tied`, where given, gets comm -> the group taken for it."""
    def last(comm: str, rank: int) -> int | None:
        part = streams.parts.get((comm, rank))
        return int(part.get_column("seq").max()) if part is not None and part.height else None

    counts = {name: marks.launched for name, marks in groups.items()
              if marks.source == ENQUEUED_COUNTS and len(marks.launched) > 1}
    fits: dict[str, list[str]] = {}
    cut_short = {r for (_, r) in streams.cut}
    for comm, members in streams.members.items():
        cut = {r for (c, r) in streams.cut if c == comm}
        whole = set(members) - cut
        # (a rank whose INIT line names it a member, its log cut before it logged any of the comm's collectives, is
        # a member the configuration does not name: the group that counts it may still be the comm)
        named = (set(members) | set(streams.expected_members.get(comm, ())) | set(streams.joined.get(comm, ()))
                 | (cut_short - set(members)))
        for name, launched in counts.items():
            aliased = streams.aliases.get(name) == comm and bool(whole & set(launched))
            if whole and (set(members) <= set(launched) or aliased) and set(launched) <= named \
                    and all(launched[r] == last(comm, r) for r in whole & set(launched)):
                fits.setdefault(name, []).append(comm)
    found: dict[str, dict[int, int]] = {}
    for name, comms in fits.items():
        if len(comms) != 1 or sum(comms[0] in c for c in fits.values()) != 1:
            continue
        comm = comms[0]
        if tied is not None:
            tied[comm] = name
        unseen = {r for r in counts[name] if r not in streams.members[comm]}
        # (a rank cut short whose count is the last seq its records hold is counted too: its records hold all it
        # launched there, the cut hid none of it)
        ahead = {r: n for r, n in counts[name].items() if (comm, r) in streams.cut and n >= (last(comm, r) or 0)
                 or r in unseen and n > 0}
        if ahead:
            found[comm] = ahead
    return found


def reported_ops_past_cuts(streams: Streams, groups: dict[str, EnqueueMarks],
                           counted: dict[str, dict[int, int]]) -> dict[str, dict[int, tuple[int, str]]]:
    """comm -> {rank: (seq, op)} for the ranks counted past their records there (`counted`, counted_past_cuts)
    with none of their records of the comm kept: the op of the last collective a peer's desync report gives each
    (`#12 started ranks: [9, 46] started ALLREDUCE`), at its seq (the group taken for the comm counts on the
    comm's seqs). A rank that left no file is still on record there: what it issued at that seq."""
    tied: dict[str, str] = {}
    counted_past_cuts(streams, groups, tied)
    out: dict[str, dict[int, tuple[int, str]]] = {}
    for comm, name in tied.items():
        ops = {r: groups[name].last_ops[r] for r in counted.get(comm, {}) if r in groups[name].last_ops
               and (comm, r) not in streams.parts}
        if ops:
            out[comm] = ops
    return out
