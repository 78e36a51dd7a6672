"""What PyTorch's watchdog lines say about collectives: timeouts as stream rows, and the call stacks of the works
that timed out (the enqueued counts: enqueue_marks.py).

A rank that left no Flight Recorder dump and no NCCL log still says, in its timeout line, which collective it
was waiting in: `WorkNCCL(SeqNum=4084, OpType=BROADCAST, NumelIn=56623104, ...)`. Lines pasted from several
ranks are often all there is; ranks stuck at one SeqNum in different collectives are a desync, and ranks stuck
at different SeqNums are waiting for each other.
"""

from __future__ import annotations

from dataclasses import replace

import polars as pl

from ..model import EventState, Evidence, WatchdogEvent, conform

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
    default = default_group([event for _, event in timeouts]) or UNNAMED_GROUP
    rows: dict[str, dict[tuple[int, str, int], WatchdogEvent]] = {}
    for path, event in timeouts:
        key = (event.rank, event.comm or default, event.seq)
        if not any(key in by_file for by_file in rows.values()):  # the first line about a work wins
            rows.setdefault(path, {})[key] = event
    return [replace(item, collectives=_frame(rows[item.path], stacks)) if item.path in rows else item
            for item in evidence]


def default_group(watchdog: list[WatchdogEvent]) -> str | None:
    """The process group of a timeout line that names none (older PyTorch prints none there, and no `failure
    detected` line of its rank and seq named it: sources/torch_log.py): the one group the timeout lines that name one
    name; None where they name none or several. Only timeout lines count: a line of another kind may be about
    another group (a rank's status of a group that did not time out), whose SeqNums are not the timeout's."""
    named = {event.comm for event in watchdog if event.comm and event.kind in TIMEOUT_KINDS}
    return next(iter(named)) if len(named) == 1 else None


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


def timeout_stacks(watchdog: list[WatchdogEvent]) -> dict[tuple[str, int, int], str]:
    """(group, rank, SeqNum) -> the call stack PyTorch printed for a work that timed out: the `Stack trace of the
    failed collective` that follows its timeout line in the same file, before any other timeout there (the
    watchdog that caught the timeout prints it, naming no group)."""
    return {key: event.message for key, event in _stack_events(watchdog).items()}


def _stack_events(watchdog: list[WatchdogEvent]) -> dict[tuple[str, int, int], WatchdogEvent]:
    """(group, rank, SeqNum) -> the `stack_trace` event of a work that timed out (see timeout_stacks)."""
    default = default_group(watchdog) or UNNAMED_GROUP
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
