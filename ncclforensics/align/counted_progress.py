"""Where PyTorch's own counts put a rank in a comm, past the end of its records there.

A rank's records of a comm may end before the rank stopped: a fingerprint trace is written once a step's results
were read back, a file is cut short. PyTorch's watchdog lines still say where it got. `last enqueued work: 8, last
completed work: 6` (its process group's counts, as the watchdog caught the failure) say what it launched and
completed; a timeout at SeqNum 7 says it completed everything before 7 and waits in 7; a desync report's laggard that
`finished collective #7, but didn't join collective #8` launched and completed its last one and nothing after it
(the report's own numbering moved onto the counts' through a rank both number, enqueue_marks.py: its `#8` alone is
no SeqNum). Where these go past the records, the rank's launched and completed are theirs, and the wedge and the
window are placed by them, citing the lines.

Worked example (fingerprint traces flushed per step, watchdog logs): ranks 0, 1, 3, 4, 6 and 7's traces end at seq
4 (step 0), rank 5's at seq 7 (an all-gather, completed); their logs time out at SeqNum 7 (an all-reduce) with
`last enqueued work: 8, last completed work: 6`, and a desync report says ranks 2 and 5 finished #7 and joined no
#8. The group stopped at seq 7: six ranks launched 8 and completed 6, waiting in 7; ranks 2 and 5 launched and
completed 7. By the records alone it was seq 8, with every rank launching 7 and most completing 4.
"""

from __future__ import annotations

from dataclasses import replace

from ..model import Location, WatchdogEvent
from ..model.phrases import ranks_words
from .answers import ENQUEUED_COUNTS, CommAnalysis, CountedProgress
from .enqueue_marks import EnqueueMarks
from .streams import Streams
from .reconcile import Contradiction
from .watchdog import DESYNC_REPORT, TIMEOUT_KINDS, default_group


def counted_progress(analyses: dict[str, CommAnalysis], streams: Streams, groups: dict[str, EnqueueMarks],
                     watchdog: list[WatchdogEvent]) -> dict[str, dict[int, CountedProgress]]:
    """comm -> rank -> CountedProgress, for each rank whose PyTorch lines about the process group that is the comm
    (by name, or tied to it: `Streams.aliases`) say it launched or completed more there than its records hold, or
    that it completed no more than they hold (a timeout line: where it waits)."""
    default = default_group(watchdog)  # (the group of a timeout line that names none, as watchdog.py reads it)
    timeouts: dict[tuple[str, int], WatchdogEvent] = {}
    for event in watchdog:
        group = event.comm or default
        if event.kind in TIMEOUT_KINDS and event.rank is not None and group is not None and event.seq is not None:
            key = (streams.aliases.get(group, group), event.rank)
            if key not in timeouts or event.seq < timeouts[key].seq:  # (its oldest work that timed out is where it waits)
                timeouts[key] = event
    found: dict[str, dict[int, CountedProgress]] = {}
    for comm, analysis in analyses.items():
        marks = next((m for name, m in groups.items() if m.source == ENQUEUED_COUNTS
                      and streams.aliases.get(name, name) == comm), None)
        for rank in analysis.ranks:
            progress = _rank_progress(comm, rank, analysis, streams, marks, timeouts.get((comm, rank)))
            if progress is not None:
                found.setdefault(comm, {})[rank] = progress
    return found


def _rank_progress(comm: str, rank: int, analysis: CommAnalysis, streams: Streams, marks: EnqueueMarks | None,
                   timeout: WatchdogEvent | None) -> CountedProgress | None:
    """One rank's CountedProgress from its group's marks and its oldest timeout there; None where they add nothing
    to its records."""
    recorded, done = analysis.launched[rank], analysis.completed.get(rank)
    launched, completed, floor, waits, no_more = recorded, done, False, False, False
    at: list[Location] = []
    if marks is not None and rank in marks.launched:
        count = marks.launched[rank]
        if count > launched:
            launched, floor = count, rank in marks.floors
            at.append(marks.counted_at.get(rank) or marks.evidence[-1])
        if marks.completed.get(rank) is not None and (completed is None or marks.completed[rank] > completed):
            completed = marks.completed[rank]
            if marks.counted_at.get(rank) not in at and rank in marks.counted_at:
                at.append(marks.counted_at[rank])
        if rank in marks.exact and (completed is None or count > completed):
            # (a laggard that finished its last collective and joined no next one: it completed all it launched)
            completed, no_more = count, True
            at += [loc for loc in marks.reported_at.get(rank, ()) if loc not in at]
        no_more |= rank in marks.exact and completed == count == launched
    if timeout is not None:
        # (a rank waiting in SeqNum N launched it and completed everything before it, and nothing after)
        launched = max(launched, timeout.seq)
        if completed is None or timeout.seq - 1 > completed:
            completed = timeout.seq - 1
        if completed == timeout.seq - 1:
            waits = True
            if timeout.loc not in at:
                at.append(timeout.loc)
    launched = max(launched, completed or 0)
    # (a launched that is a timeout's SeqNum, where no count and no whole log of launches goes on past it, is a floor:
    # more may be enqueued behind the work that timed out)
    floor |= (timeout is not None and launched == timeout.seq and (marks is None or rank not in marks.launched)
              and (comm, rank) not in streams.launch_ends)
    if launched == recorded and completed == done and not (waits or no_more):
        return None
    return CountedProgress(rank=rank, comm=comm, launched=launched, completed=completed, waits_next=waits,
                           launched_no_more=no_more,
                           launched_floor=floor, at=tuple(at), records_launched=recorded, records_completed=done,
                           records_at=_record_end(streams, comm, rank, recorded if done is None else done))


def _record_end(streams: Streams, comm: str, rank: int, seq: int) -> Location | None:
    """The rank's last record of the comm at or before `seq` (its file:line)."""
    part = streams.parts.get((comm, rank))
    if part is None or not part.height:
        return None
    rows = part.filter(part.get_column("seq") <= seq)
    if not rows.height:
        return None
    row = rows.row(rows.height - 1, named=True)
    return Location(row["file"], row.get("line"), row.get("record"))


def with_counted_progress(analysis: CommAnalysis, counted: dict[int, CountedProgress]) -> CommAnalysis:
    """`analysis` with launched and completed raised to the counts (they never lower what the records hold), and
    each raised rank's counts, with their lines, in `raised`: a new value, `analysis` left as it is."""
    launched, completed = dict(analysis.launched), dict(analysis.completed)
    for rank, progress in counted.items():
        launched[rank] = max(launched[rank], progress.launched)
        if progress.completed is not None:
            completed[rank] = max(completed.get(rank) or 0, progress.completed)
    raised = {r: p for r, p in counted.items()
              if (launched[r], completed.get(r)) != (analysis.launched[r], analysis.completed.get(r))}
    return replace(analysis, launched=launched, completed=completed, raised={**analysis.raised, **raised})


def launched_no_more_contradictions(streams: Streams, analysis: CommAnalysis,
                                    counted: dict[int, CountedProgress]) -> list[Contradiction]:
    """A rank a peer's desync report shows launched nothing after `completed`, where other ranks completed the
    next collective of the comm, which needs every rank: the report and their completion cannot both hold (a
    report read off one moment, a count of another group). Each such rank's contradiction, with the report's lines
    and the first such rank's line for its completion; nothing is read as waiting in that next one."""
    found = []
    for rank, progress in sorted(counted.items()):
        end = progress.completed
        if not progress.launched_no_more or progress.waits_next or end is None:
            continue
        ahead = sorted(r for r, c in analysis.completed.items() if c is not None and c > end and r != rank)
        if not ahead:
            continue
        other = counted.get(ahead[0])
        done_at = (other.at[0] if other is not None and other.at and (other.records_completed or 0) <= end else
                   _record_end(streams, analysis.comm, ahead[0], end + 1))
        if done_at is None or not progress.at:
            continue
        found.append(Contradiction(
            comm=analysis.comm, rank=rank,
            values={DESYNC_REPORT: (end, progress.at[-1]), f"rank {ahead[0]} completed seq {end + 1}": (end + 1,
                                                                                                       done_at)},
            note=(f"PyTorch's desync report shows rank {rank} launched nothing after seq {end}, yet "
                  f"{ranks_words(ahead)} completed seq {end + 1}, which needs every rank")))
    return found
