"""PyTorch ProcessGroupNCCL messages in a rank's stdout/stderr (or several ranks' output, interleaved).

Every message that says something about a hang becomes a WatchdogEvent, e.g.

    [rank0]:[E1129 08:55:30.548704750 ProcessGroupNCCL.cpp:689] [Rank 0] Watchdog caught collective operation
    timeout: WorkNCCL(SeqNum=50, OpType=ALLREDUCE, NumelIn=4096, NumelOut=4096, Timeout(ms)=30000) ran for 30002
    milliseconds before timing out.
    -> WatchdogEvent(kind="timeout", rank=0, seq=50, op="AllReduce", numel_in=4096, timeout_ms=30000, ran_ms=30002)

Kinds: timeout, blocking_wait_timeout, async_error, watchdog_terminated, pg_status, desync_report,
desync_report_unavailable, dump_signal, dump_signal_sent, dump, abort, ops_failed, process_down, heartbeat_timeout,
watchdog_stuck, comm_error, nccl_error, stack_trace, stack_trace_unavailable, nccl_warn (NCCL's own WARN lines).
`abort` is PyTorch's "communicator was aborted on rank N" and NCCL's `Abort COMPLETE` line (as the NCCL-log source
names it; no rank, since NCCL's rank there is the communicator's).

The rank of a line is the global rank of its `[rankN]:` prefix; a line without one in a file whose prefixes name one
process is that process's (an exception's `what():` echo); else the `[Rank N]` / `[PG ... Rank N]` tag, which is
the rank inside that process group (so a `[PG ...]` tag of a group other than the default one gives no rank). A
desync report numbers the ranks it names within its group.
Source line numbers never matter for matching (they change with every release); lines may be indented or sit
inside a traceback. The same message repeated (PyTorch echoes a timeout in the exception that
ends the watchdog, and again in `what():`) is one event, at its first line.
"""

from __future__ import annotations

import re
from dataclasses import replace

from ..errors import SourceError
from ..model import (
    Diagnostic, Evidence, FormatFacts, Location, ProcessIdentity, ProgressReport, Severity, SourceFormat,
    WatchdogEvent,
)
from ..model.kinds import normalize_op
from .base import InputFile, looks_binary, unreadable
from .fr_entries import inside_torch

N = r"[0-9]{1,18}(?![0-9])"  # numbers that fit in int64 (longer ones do not match at all)
# One cheap test decides whether a line can hold anything of interest.
_TRIGGER = re.compile(
    r"WorkNCCL|[Ww]atchdog|DESYNC|Timeout at|[Ll]ast enqueued|dump|aborted|NCCL error|NCCL WARN|COMPLETE|"
    r"Stack trace of the failed|Heartbeat|process down|Some NCCL operations|encountered error"
)
_GLOBAL_RANK = re.compile(r"\[rank(" + N + r")\]:")
# Bounded groups: an unbounded `[^)]*` scans to the end of the line from every `[PG `, quadratic on a hostile line.
_PG = re.compile(r"\[PG (?:ID )?(" + N + r")(?: PG GUID ([^\s(\]]{1,200}))?\s*(?:\(([^)]{0,200})\))? Rank ("
                 + N + r")\]")
_RANK_TAG = re.compile(r"\[Rank (" + N + r")\]")
_WORK = r"WorkNCCL\((?P<work>[^()]*(?:\([^()]*\)[^()]*)*)\)"
_WORK_FIELDS = {name: re.compile(pattern) for name, pattern in {
    "seq": r"SeqNum=(" + N + ")", "op": r"OpType=(\w+)", "numel_in": r"NumelIn=(" + N + ")",
    "numel_out": r"NumelOut=(" + N + ")", "timeout_ms": r"Timeout\(ms\)=(" + N + ")",
}.items()}
_TIMEOUT = re.compile(r"(?:\[Rank (?P<rank>" + N + r")\]\s*)?Watchdog caught collective operation timeout: "
                      + _WORK + r" ran for (?P<ran>" + N + r") milliseconds before timing out")
_BLOCKING = re.compile(r"Work " + _WORK + r" timed out in blocking wait")
_ASYNC = re.compile(r"Collective " + _WORK + r" raised the following async exception: (?P<what>.*)"
                    r"|found async exception when checking for NCCL errors: (?P<old>.*)")
_FAILED_AT = re.compile(r"(?:failure detected by watchdog at work sequence id:|"
                        r"(?:Exception \(either an error or timeout\) )?detected by watchdog at work:|"
                        r"Timeout at NCCL work:)\s*(" + N + ")")
_PROGRESS = re.compile(r"[Ll]ast enqueued (?:NCCL )?work: (-?" + N + r"),\s*last completed (?:NCCL )?work: (-?"
                       + N + ")")
_DUMP_RECEIVED = re.compile(r"Received a dump signal due to a collective timeout from\s+(?:this local rank|rank ("
                            + N + "))")
_SIMPLE = [  # (kind, pattern): messages that carry no numbers beyond the line's rank
    ("dump_signal", re.compile(r"Observed flight recorder dump signal from another rank")),
    ("dump_signal_sent", re.compile(r"First PG on this rank to signal dumping")),
    ("dump", re.compile(r"preparing to dump debug info")),
    ("ops_failed", re.compile(r"Some NCCL operations have failed or timed out")),
    ("process_down", re.compile(r"we are taking the entire process down")),
    ("heartbeat_timeout", re.compile(r"Heartbeat monitor timed out!.*")),
    ("watchdog_stuck", re.compile(r"watchdog got stuck for \d+ seconds.*")),
    ("comm_error", re.compile(r"NCCL communicator encountered error set by ProcessGroupNCCL: .*")),
    ("nccl_error", re.compile(r"NCCL error in: .*")),
    ("nccl_warn", re.compile(r"NCCL WARN .*")),
    ("stack_trace_unavailable", re.compile(r"Stack trace of the failed collective not found.*")),
]
_TERMINATED = re.compile(r"(?:Process group|NCCL) watchdog thread terminated with exception: (?P<what>.*)")
_ABORTED = re.compile(r"NCCL communicator was aborted on rank (" + N + r")\.?(?P<rest>.*)")
# The host starts a word (the lookbehind): tried at every offset of a long word, the search would be quadratic.
_NCCL_PREFIX = re.compile(r"(?<![^\s:\]\[])(?P<host>[^\s:\]\[]+):(?P<pid>[0-9]{1,9}):\d+ \[\d+\] NCCL INFO ")
_NCCL_COMM = re.compile(r"comm (?P<ptr>0x[0-9a-f]+) "
                        r"rank (?P<rank>[0-9]{1,9}) nranks (?P<size>[0-9]{1,9}) cudaDev (?P<dev>[0-9]{1,9}) "
                        r"(?:nvmlDev \d+ )?"
                        r"busId (?P<bus>[0-9a-f]+)(?: commId (?P<hash>0x[0-9a-f]+))? - (?P<what>Init|Abort) COMPLETE")
_STACK = re.compile(r"Stack trace of the failed collective:\s*$")
_LAUNCHER = r"^(?:\[\w+\]:)?"  # torchrun --tee's `[default0]:` before continuation lines
_FRAME_LINE = re.compile(_LAUNCHER + r"\s*#\d+ (.+?) from (\S+)\s*$")
_DESYNC_HEADER = re.compile(r"\] Rank (" + N + r")\s*$")
_DESYNC_START = re.compile(r"-\s*\[(" + N + r")\] Timeout at collective: (\w+), #(" + N + ")")
_DESYNC_BODY = [
    ("never", re.compile(r"ranks \[([\d, ]*)\] are the lagging ranks that caused this timeout")),
    ("lagging", re.compile(r"the lagging/dead/mismatched ranks that caused the desync are")),
    ("unfinished", re.compile(_LAUNCHER + r"\s*-?\s*\[([\d, ]*)\] joined but didn't finish collective #(" + N
                              + ")")),
    ("unjoined", re.compile(_LAUNCHER + r"\s*-?\s*\[([\d, ]*)\] finished collective #(" + N + r"), but didn't "
                            r"join collective #(" + N + ")")),
    ("snapshot", re.compile(r"Snapshot of ranks' latest states")),
    ("group", re.compile(_LAUNCHER + r"\s*#(" + N + r") (started|finished) ranks:")),
    ("member", re.compile(_LAUNCHER + r"\s*\[([\d, ]*)\] (started|finished) (\w+)")),
]
_DESYNC_FAILED = re.compile(r"Failed to re?t?rieve \w*DESYNC_DEBUG report.*")
# A line that starts a new log record (so it does not continue the previous message).
_RECORD_START = re.compile(r"^\s*(?:\[\w+\]:)*\[[EWIF]\d*[ \]]|^\S+:\d+:\d+ \[\d+\] NCCL |^\s*\[rank\d+\]:")
_NCCL_VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+)")
_MAX_CONTINUATION = 12
# PyTorch's messages are a few KB at most; the dozen regexes over a line of megabytes take seconds (a 64 MiB line:
# 11 s), so longer lines are skipped, as nccl_log does.
_MAX_LINE = 1 << 20
_WORK_KINDS = {"timeout", "blocking_wait_timeout", "async_error"}


def _ranks(text: str) -> tuple[int, ...]:
    """`"1, 2, 3"` -> (1, 2, 3)."""
    return tuple(int(r) for r in re.findall(r"(?<![0-9])[0-9]{1,9}(?![0-9])", text))


def _work(text: str) -> dict:
    """The fields of a `WorkNCCL(SeqNum=.., OpType=.., NumelIn=.., NumelOut=.., Timeout(ms)=..)` body."""
    fields = {}
    for name, pattern in _WORK_FIELDS.items():
        found = pattern.search(text)
        if found:
            fields[name] = normalize_op(found.group(1)) if name == "op" else int(found.group(1))
    return fields


def _continuation(lines: list[str], index: int) -> list[str]:
    """The lines after `index` that continue its message (no new log record, no C++ frame list)."""
    out = []
    for line in lines[index + 1:index + 1 + _MAX_CONTINUATION]:
        if (not line.strip() or _RECORD_START.match(line) or _TRIGGER.search(line) or "what():" in line
                or line.startswith(("Exception raised from", "frame #", "terminate called"))):
            break
        out.append(line.rstrip())
    return out


def _clip(text: str, limit: int = 500) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + "..."


class _Reader:
    """State of one pass over a file: the events so far, without the repeats."""

    def __init__(self, name: str, lines: list[str], evidence: Evidence) -> None:
        self.name = name
        self.lines = lines
        self.evidence = evidence
        self.seen: dict[tuple, int] = {}  # event key -> index in evidence.watchdog
        self.seen_progress: set[tuple] = set()
        # The global rank of the file's `[rankN]:` prefixes while they name one process (a rank's own log), for
        # its lines without one (an exception's `what():` echo names only the rank inside its group).
        self.process_rank: int | None = None
        self.processes: set[int] = set()

    def event(self, number: int, kind: str, rank: int | None, comm: str | None = None, **fields) -> None:
        """Record one WatchdogEvent at line `number` (1-based), unless the same event was seen before.

        A work item's events are the same event whatever the wording around them: the timeout that the watchdog
        logs is echoed in the exception that ends it (under a `[PG ...]` prefix that then tells its group).
        """
        message = _clip(fields.pop("message", ""))
        work = kind in _WORK_KINDS and "seq" in fields
        key = (kind, rank, tuple(sorted(fields.items()))) + (() if work else (comm, message))
        seen = self.seen.get(key)
        if seen is not None:
            if comm is not None and self.evidence.watchdog[seen].comm is None:
                self.evidence.watchdog[seen] = replace(self.evidence.watchdog[seen], comm=comm)
            return
        self.seen[key] = len(self.evidence.watchdog)
        self.evidence.watchdog.append(WatchdogEvent(loc=Location(self.name, number), kind=kind, rank=rank,
                                                    comm=comm, message=message, **fields))

    def progress(self, number: int, comm: str | None, rank: int | None, enqueued: int, completed: int) -> None:
        """A ProgressReport for a `last enqueued ..., last completed ...` statement about a named group."""
        if comm is None:
            return
        key = (comm, rank, enqueued, completed)
        if key in self.seen_progress:
            return
        self.seen_progress.add(key)
        self.evidence.progress.append(ProgressReport(
            loc=Location(self.name, number), comm=comm, rank=rank,
            last_enqueued=enqueued if enqueued >= 0 else None, last_completed=completed if completed >= 0 else None,
        ))

    def line(self, index: int) -> int:
        """Read line `index` (0-based); returns the index of the next line to read."""
        text = self.lines[index]
        number = index + 1
        start = _DESYNC_START.search(text) if "Timeout at collective" in text else None
        if start:
            return self.desync(index, start)
        if not _TRIGGER.search(text):
            return index + 1
        if self.evidence.version is None:
            version = _NCCL_VERSION.search(text)
            if version:
                self.evidence.version = version.group(1)
        found = _GLOBAL_RANK.search(text)
        pg = _PG.search(text)
        tag = _RANK_TAG.search(text)
        comm = (pg.group(2) or pg.group(1)) if pg else None
        if found:
            rank = int(found.group(1))
            self.processes.add(rank)
            self.process_rank = rank if len(self.processes) == 1 else None
        elif self.process_rank is not None:
            rank, found = self.process_rank, True
        elif pg:  # the rank inside that group: the global rank only in the default group
            rank = int(pg.group(4)) if comm == "0" or pg.group(3) == "default_pg" else None
        else:
            rank = int(tag.group(1)) if tag else None

        for match in _TIMEOUT.finditer(text):
            who = rank if found or match.group("rank") is None else int(match.group("rank"))
            self.event(number, "timeout", who, comm, ran_ms=int(match.group("ran")), **_work(match.group("work")),
                       message=match.group(0))
        blocking = _BLOCKING.search(text)
        if blocking:
            self.event(number, "blocking_wait_timeout", rank, comm, **_work(blocking.group("work")),
                       message=blocking.group(0))
        error = _ASYNC.search(text)
        if error:
            what = error.group("what") if error.group("what") is not None else error.group("old")
            work = _work(error.group("work")) if error.group("work") else {}
            message = " / ".join([what.strip()] + [c.strip() for c in _continuation(self.lines, index)])
            self.event(number, "async_error", rank, comm, **work, message=message)
        terminated = _TERMINATED.search(text)
        if terminated:
            message = " / ".join([terminated.group("what").strip()]
                                 + [c.strip() for c in _continuation(self.lines, index)])
            inner = re.search(_WORK, terminated.group("what"))
            self.event(number, "watchdog_terminated", rank, comm, **(_work(inner.group("work")) if inner else {}),
                       message=message)
        aborted = _ABORTED.search(text)
        if aborted:
            self.event(number, "abort", int(aborted.group(1)), comm, message=aborted.group(0))
        self.status(index, text, rank, comm)
        for kind, pattern in _SIMPLE:
            simple = pattern.search(text)
            if simple:
                self.event(number, kind, rank, comm, message=simple.group(0))
        failed = _DESYNC_FAILED.search(text)
        if failed:
            return self.desync_failed(index, failed.group(0), rank)
        nccl = _NCCL_COMM.search(text) if "COMPLETE" in text else None
        if nccl:
            self.nccl_comm(number, nccl, _NCCL_PREFIX.search(text))
        if _STACK.search(text):
            return self.stack(index, rank, comm)
        return index + 1

    def status(self, index: int, text: str, rank: int | None, comm: str | None) -> None:
        """`failure detected by watchdog at work sequence id: 50 PG status: last enqueued work: 50, ...` and kin."""
        progress = _PROGRESS.search(text)
        failed = _FAILED_AT.search(text)
        received = _DUMP_RECEIVED.search(text)
        if not (progress or failed or received):
            return
        fields = {}
        if failed:
            fields["seq"] = int(failed.group(1))
        if progress:
            fields["last_enqueued"], fields["last_completed"] = int(progress.group(1)), int(progress.group(2))
            self.progress(index + 1, comm, rank, fields["last_enqueued"], fields["last_completed"])
        if received:
            sender = int(received.group(1)) if received.group(1) else rank
            self.event(index + 1, "dump_signal", rank, comm, ranks=() if sender is None else (sender,),
                       message=received.group(0), **fields)
        else:
            # (`[PG ID 1 PG GUID 2(tp) Rank 3]`: the rank's place in its group, which ties the group's numbering,
            # as a desync report uses it, to global ranks)
            pg = _PG.search(text)
            self.event(index + 1, "pg_status", rank, comm, message=text[(failed or progress).start():],
                       group_rank=int(pg.group(4)) if pg else None, **fields)

    def desync(self, index: int, start: re.Match) -> int:
        """A TORCH_NCCL_DESYNC_DEBUG report: `- [0] Timeout at collective: ALLREDUCE, #50` and the lines after it."""
        number, rank = index + 1, int(start.group(1))
        if index > 0:
            header = _DESYNC_HEADER.search(self.lines[index - 1])
            if header:
                number, rank = index, int(header.group(1))
        # The report's own numbers are ranks in its group; the line's `[rankN]:` prefix is the global rank.
        found = _GLOBAL_RANK.search(self.lines[number - 1])
        if found:
            rank = int(found.group(1))
        elif self.process_rank is not None:
            rank = self.process_rank
        culprits: list[int] = []
        lagging: list[tuple[tuple[int, ...], int, bool]] = []
        said: list[str] = []
        snapshot: list[str] = []
        members: set[int] = set()
        latest: list[tuple[tuple[int, ...], int, bool, str | None]] = []
        group = ""
        group_number: int | None = None
        position = index + 1
        while position < len(self.lines):
            text = self.lines[position]
            kind, match = next(((k, m) for k, p in _DESYNC_BODY if (m := p.search(text))), (None, None))
            if kind is None:
                break
            if kind in ("never", "unfinished", "unjoined"):
                named = _ranks(match.group(1))
                culprits.extend(r for r in named if r not in culprits)
                said.append(text.strip().lstrip("- "))
                if kind == "unjoined":
                    lagging.append((tuple(named), int(match.group(2)), False))
                elif kind == "unfinished":
                    lagging.append((tuple(named), int(match.group(2)), True))
            elif kind == "group":
                group = f"#{match.group(1)} {match.group(2)}"
                group_number = int(match.group(1))
            elif kind == "member":
                snapshot.append(f"{group}: [{match.group(1)}] {match.group(3)}" if group else text.strip())
                members.update(_ranks(match.group(1)))
                if group_number is not None:
                    latest.append((_ranks(match.group(1)), group_number, match.group(2) == "finished",
                                   normalize_op(match.group(3))))
            position += 1
        message = "; ".join(said) or "the report names no lagging ranks"
        if snapshot:
            message += " | snapshot: " + "; ".join(snapshot)
        self.event(number, "desync_report", rank, None, seq=int(start.group(3)), op=normalize_op(start.group(2)),
                   ranks=tuple(culprits), message=message, lagging=tuple(lagging), latest=tuple(latest),
                   group_ranks=tuple(sorted(members | set(culprits))))
        return position

    def desync_failed(self, index: int, first: str, rank: int | None) -> int:
        """`Failed to retrieve NCCL_DESYNC_DEBUG report. ...`: no report, so no culprits; keep what it says."""
        rest = _continuation(self.lines, index)
        text = first + "".join(rest)  # hard-wrapped text: the pieces join without a separator
        timed_out = re.search(r"Timeout rank \[(" + N + r")\]", text)
        seq = re.search(r"thisSeq = (" + N + ")", text)
        op = re.search(r"col = (\w+)", text)
        fields = {}
        if seq:
            fields["seq"] = int(seq.group(1))
        if op:
            fields["op"] = normalize_op(op.group(1))
        who = rank if rank is not None else int(timed_out.group(1)) if timed_out else None
        self.event(index + 1, "desync_report_unavailable", who, None, message=text, **fields)
        return index + 1 + len(rest)

    def stack(self, index: int, rank: int | None, comm: str | None) -> int:
        """`Stack trace of the failed collective:` and its `#0 all_reduce from file:line` lines."""
        frames, outside = [], []
        position = index + 1
        while position < len(self.lines):
            frame = _FRAME_LINE.match(self.lines[position])
            if not frame:
                break
            frames.append(f"{frame.group(1)} {frame.group(2)}")
            if not inside_torch(frame.group(2).rpartition(":")[0] or frame.group(2)):
                outside.append(frame.group(2))
            position += 1
        # (the frames outside torch as a Flight Recorder entry's stack gives them: the two compare)
        self.event(index + 1, "stack_trace", rank, comm, message=" <- ".join(frames),
                   stack=" < ".join(outside) or None)
        return position

    def nccl_comm(self, number: int, match: re.Match, prefix: re.Match | None) -> None:
        """NCCL's `comm 0x.. rank R nranks N cudaDev D busId B [commId 0x..] - Init|Abort COMPLETE` line."""
        self.evidence.identities.append(ProcessIdentity(
            loc=Location(self.name, number), host=prefix.group("host") if prefix else None,
            pid=int(prefix.group("pid")) if prefix else None, comm=match.group("hash"),
            comm_rank=int(match.group("rank")), comm_size=int(match.group("size")),
            cuda_dev=int(match.group("dev")), bus_id=match.group("bus"), comm_ptr=match.group("ptr"),
        ))
        if match.group("what") == "Abort":
            self.event(number, "abort", None, match.group("hash"),
                       message=f"comm {match.group('ptr')} rank {match.group('rank')} nranks {match.group('size')} "
                               f"- Abort COMPLETE")


_STRONG = re.compile(r"WorkNCCL\(|Watchdog caught collective operation timeout|DESYNC_DEBUG report|"
                     r"Timeout at collective: |flight recorder dump signal|NCCL communicator was aborted|"
                     r"DistBackendError|detected by watchdog|[Ll]ast enqueued (?:NCCL )?work|Heartbeat monitor|"
                     r"(?:^|\[)E(?:\d{4} [\d:.]+)? ProcessGroupNCCL\.cpp:")
_WEAK = re.compile(r"^(?:\[\w+\]:)*\[rank\d+\]:\[[EWIF]\d{4} |ProcessGroupNCCL\.cpp:\d+\]", re.M)
_NCCL_LINE = re.compile(r" NCCL (?:INFO|WARN) ")


class TorchLogSource:
    """A rank's stdout/stderr with PyTorch ProcessGroupNCCL watchdog, desync and flight-recorder messages."""

    facts = FormatFacts(SourceFormat.TORCH_LOG, "PyTorch log", records="watchdog", per_rank=True, job_ranks=True,
                          markers=(b"ProcessGroupNCCL", b"WorkNCCL(", b"Watchdog caught"))
    format = facts.format

    def sniff(self, head: bytes, text: str) -> float:
        """0.6-0.9 with ProcessGroupNCCL error messages (less the more NCCL debug lines share the head), 0.3 for
        PyTorch's `[rankN]:[W1129 ...` log lines or ProcessGroupNCCL warnings alone, else 0."""
        if looks_binary(head):
            return 0.0
        lines = text.splitlines()
        torch = sum(1 for line in lines if _STRONG.search(line))
        if torch:
            nccl = sum(1 for line in lines if _NCCL_LINE.search(line))
            return 0.6 + 0.3 * torch / (torch + nccl)
        return 0.3 if _WEAK.search(text) else 0.0

    def parse(self, file: InputFile) -> Evidence:
        """Every watchdog, desync and dump message of the file, ranks told apart line by line."""
        evidence = Evidence(path=file.name, format=self.format, facts=self.facts)
        try:
            lines, problems = file.lines()
        except (SourceError, OSError) as e:  # a decompression bomb, a vanished file
            return unreadable(file, self.facts, e)
        evidence.problems.extend(problems)
        reader = _Reader(file.name, lines, evidence)
        index = 0
        long_lines = []
        while index < len(lines):
            if len(lines[index]) > _MAX_LINE:
                long_lines.append(index + 1)
                index += 1
                continue
            index = reader.line(index)
        if long_lines:
            evidence.problems.append(Diagnostic(Location(file.name, long_lines[0]), (
                f"{len(long_lines)} line(s) over {_MAX_LINE} characters are no PyTorch message; skipped"),
                Severity.WARNING))
        _name_groups(evidence)
        return evidence


def _name_groups(evidence: Evidence) -> None:
    """Give a timeout (or desync report) whose line names no process group the group of the `failure detected by
    watchdog at work sequence id: N` line that the same rank wrote for the same seq: the one that follows it before
    the next timeout (a rank whose groups all timed out at SeqNum 1 writes one such line after each timeout), else
    the only one. A desync report takes the group of the timeout it follows, once that one is named: the watchdog
    that caught the timeout prints it, and the report counts collectives its own way (`Timeout at collective:
    ALLREDUCE, #4` after the world's `SeqNum=3`), so its number may be another group's failed seq."""
    groups: dict[tuple, set[str]] = {}
    for event in evidence.watchdog:
        if event.kind == "pg_status" and event.comm is not None and event.seq is not None:
            groups.setdefault((event.rank, event.seq), set()).add(event.comm)
    for index, event in enumerate(evidence.watchdog):
        if event.comm is None and event.kind == "desync_report" and (caught := _caught_timeout(evidence.watchdog,
                                                                                              index)) is not None:
            evidence.watchdog[index] = replace(event, comm=caught)
        elif event.comm is None and event.kind in _WORK_KINDS | {"desync_report"}:
            found = groups.get((event.rank, event.seq), set())
            if len(found) > 1:
                found = {_following_status(evidence.watchdog, index)} & found
            if len(found) == 1:
                evidence.watchdog[index] = replace(event, comm=next(iter(found)))


def _caught_timeout(events: list[WatchdogEvent], index: int) -> str | None:
    """The group of the timeout that the desync report events[index] follows in its file: the last one of the same
    rank before it, with no other report between (None where there is none, or it names no group)."""
    report = events[index]
    for earlier in reversed(events[:index]):
        if earlier.rank != report.rank:
            continue
        if earlier.kind == "desync_report":
            return None
        if earlier.kind in _WORK_KINDS:
            return earlier.comm
    return None


def _following_status(events: list[WatchdogEvent], index: int) -> str | None:
    """The group of the first `failure detected` line after events[index] about the same rank and seq, before
    the next event about a work item."""
    event = events[index]
    for later in events[index + 1:]:
        if later.kind == "pg_status" and (later.rank, later.seq) == (event.rank, event.seq):
            return later.comm
        if later.kind in _WORK_KINDS:
            return None
    return None

