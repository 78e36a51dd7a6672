"""The receipts of a diagnosis (align/receipts.py) in words: what each `file:line` holds, the same for every
renderer."""

from __future__ import annotations

from ..align import receipts as r
from ..model.phrases import ranks_words


def receipt_words(fact: r.Receipt, wedge_shown: bool = True) -> str:
    """What one receipt holds; with `wedge_shown` false (a run that stopped nowhere in particular), a rank's last
    collective is its last on record, not a wedge."""
    match fact:
        case r.RootOp(rank, op, outlier):
            return f"{'outlier' if outlier else 'rank'} {rank} seq {op.seq}: {op.describe()}"
        case r.RecorderState(rank, seq, state):
            return f"rank {rank} seq {seq} in the Flight Recorder: {state or 'state unknown'}"
        case r.JournaledDecision(rank, step, decision):
            return f"rank {rank} gate at step {step}: {decision}"
        case r.FirstVisible(rank, seq, op):
            return f"first visible mismatch, rank {rank} seq {seq}: {op.describe()}"
        case r.WedgeOp(rank, op):
            return f"{'wedge' if wedge_shown else 'last on record'}: rank {rank} launched seq {op.seq}: {op.describe()}"
        case r.CountedLaunches(rank, comm, count):
            return f"rank {rank}: PyTorch counts {count} collectives enqueued in comm {comm}"
        case r.CountsPastRecords(rank, comm, launched, completed, records_end, records_at):
            done = "" if completed is None else f", completed {completed}"
            end = f", which end at seq {records_end} ({records_at})" if records_at else " (none of its own there)"
            return f"rank {rank}: by PyTorch's counts launched {launched}{done} in comm {comm}, past its records{end}"
        case r.WedgeMark(comm):
            return f"wedge in comm {comm}"
        case r.NoDesyncReport(rank, message):
            return (f"{_who(rank)}: PyTorch could not build its desync report, so it names no culprit "
                    f"({message[:60]}...)")
        case r.WatchdogStop(rank, "desync_report", seq, op, message):
            # (the report numbers collectives its own way: its `#8` is no SeqNum, enqueue_marks.py)
            at = f" at its collective #{seq}" if seq is not None else ""
            return f"{_who(rank)}: desync report, timeout{at}" + (f" ({op})" if op else "") + ", by the report's own count"
        case r.WatchdogStop(rank, event, seq, op, message):
            what = event.replace("_", " ") + (f" at seq {seq}" if seq is not None else "") + (f" ({op})" if op else "")
            # a line no rank is named in is quoted, so that it can be found
            return f"{_who(rank)}: {what}" + (f": {message[:80]}" if rank is None else "")
        case r.StepChecksumsSplit(step, values):
            shown = ", ".join(f"rank {rank}: {value}" for rank, value in values)
            return f"step {step} checksums differ across ranks (mixed data): {shown}"
        case r.WrongChecksum(rank, step, got, expected):
            return f"rank {rank} step {step}: checksum {got} != expected {expected}"
        case r.RasCommState(comm, state):
            return f"RAS comm {comm}: {state}"
        case r.RasJobIssue(error, message, pids, repeats):
            more = f"; the same in {repeats} more repl{'y' if repeats == 1 else 'ies'}" if repeats else ""
            return f"RAS {error}: {message}" + (f" (pid {', '.join(map(str, pids))})" if pids else "") + more
        case r.RasRanksGone(comm, ranks, status):
            said = {"dead": "considered dead by RAS", "unresponsive": "unreachable by RAS (not called dead)",
                    "missing": "missing from RAS (the process answers but no longer reports the comm)"}[status]
            return f"{ranks_words(ranks)} {said} for comm {comm}"
        case r.PeerDied(rank, message):
            return f"{_who(rank)}: {message[:90]}"
    raise TypeError(f"no words for {type(fact).__name__}")  # a new receipt needs its words here


def _who(rank: int | None) -> str:
    return f"rank {rank}" if rank is not None else "a process"
