"""NCCL RAS JSON STATUS replies (2.28.7+) and MONITOR event streams (2.29.2+), and `read_ras`, the file walker.

`read_ras` reads any RAS transcript: JSON objects (STATUS documents or MONITOR events, concatenated, neither NDJSON
nor an array, so `json.JSONDecoder.raw_decode` in a loop), text STATUS replies (handed to
`ras_text.StatusTextParser`), MONITOR text lines, and the handshake around them (`CLIENT PROTOCOL 2`,
`SERVER PROTOCOL 2`, `OK`, `TIMEOUT 5`, `SET FORMAT json`, shell prompts). All three RAS sources (ras.py) use it;
the sniffed format only labels the Evidence. Reference: nccl_formats.md sections 1, 3.1 to 3.3 and 6 (Sample E).
"""

from __future__ import annotations

import itertools
import json
import re
import zlib
from bisect import bisect_right
from collections import Counter

from ..errors import SourceError
from ..model import (
    Diagnostic, Evidence, FormatFacts, Location, ProcessIdentity, RasComm, RasIssue, RasRank, RasSnapshot,
    Severity,
)
from . import ras_common as rc
from .base import InputFile, unreadable
from .ras_reply import MAX_RANK
from .ras_text import StatusTextParser

# NCCL 2.28.7/2.28.9 `jsonWriteMissingRank` printed `"nvml_dev": %d\n` with no comma before `"status"`, so every
# JSON reply with a missing rank is invalid (fixed in 2.29.2). The repair adds the comma; it adds no line.
_MISSING_COMMA = re.compile(r'("nvml_dev"[ \t]*:[ \t]*-?\d+)([ \t]*\r?\n[ \t]*"status")')
_MONITOR_LINE = re.compile(r"\[(?P<time>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\] (?P<event>[A-Z][A-Z0-9_]*): ?(?P<rest>.*)")
_PEER = re.compile(r"Process (?P<pid>\d+) on node (?P<host>\S+) managing GPUs? (?P<gpus>\d+(?:,\d+)*)?"
                   r"(?: \(NVML [\d,]+\))?(?: (?P<details>.*))?")
_PEER_ADDR = re.compile(r"(?P<addr>\S+<\d+>)(?: (?P<details>.*))?")
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_SPACE = re.compile(r"\s*")
# RAS text lines are under 200 characters; a longer line is no part of a reply, and is not worth the regexes.
_MAX_TEXT_LINE = 1 << 16
# NCCL prints counts, ranks and pids as uint64 at most (20 digits); a longer run of digits is no NCCL output,
# and past 4300 digits int() refuses it.
_OVERLONG_NUMBER = re.compile(r"\d{21}")


def read_ras(file: InputFile, facts: FormatFacts) -> Evidence:
    """Every RAS reply and event in `file` as Evidence of the format `facts` describe; bad content becomes
    diagnostics."""
    try:
        text, problems = file.read_text()
    except (SourceError, OSError, EOFError, ValueError, zlib.error) as e:  # corrupt gzip, bomb, unreadable file
        return unreadable(file, facts, e)
    evidence = Evidence(path=file.name, format=facts.format, problems=problems, facts=facts)
    _Walker(evidence, text).run()
    return evidence


class _Walker:
    """One pass over a file's text: JSON objects where a line starts with `{`, text lines everywhere else."""

    def __init__(self, evidence: Evidence, text: str) -> None:
        self.evidence = evidence
        self.path = evidence.path
        self.text, repairs = _MISSING_COMMA.subn(r"\1,\2", text)
        self.starts = [0] + [m.end() for m in _LINE_BREAK.finditer(self.text)]
        if self.starts[-1] == len(self.text) and len(self.starts) > 1:
            self.starts.pop()  # the text ends with a line break: no empty last line
        # The i-th repair sits i characters further on in the repaired text (each earlier one added a comma).
        self.repairs = [self.line_of(m.start() + i) for i, m in enumerate(_MISSING_COMMA.finditer(text))] \
            if repairs else []
        self.status = StatusTextParser(evidence)
        self.decoder = json.JSONDecoder()
        self.stray: list[int] = []

    def line_of(self, pos: int) -> int:
        """1-based line of a character offset (the repair adds no line breaks, so offsets map either way)."""
        return bisect_right(self.starts, pos)

    def line(self, index: int) -> str:
        end = self.starts[index + 1] if index + 1 < len(self.starts) else len(self.text)
        return self.text[self.starts[index]:end].rstrip("\r\n")

    def run(self) -> None:
        index, count = 0, len(self.starts) if self.text else 0
        while index < count:
            line = self.line(index)
            stripped = line.lstrip()
            if stripped.startswith("{"):
                self.status.close()
                index = self.objects(self.starts[index] + len(line) - len(stripped), count)
                continue
            self.text_line(index + 1, line)
            index += 1
        self.status.close(cut=self.text[-1:] not in ("", "\n", "\r"))
        if self.stray:
            self.problem(self.stray[0], f"{len(self.stray)} line(s) that are no part of a RAS reply or event; skipped")

    def text_line(self, lineno: int, line: str) -> None:
        if len(line) > _MAX_TEXT_LINE or _OVERLONG_NUMBER.search(line):
            self.status.close()
            self.stray.append(lineno)
            return
        monitor = _MONITOR_LINE.fullmatch(line)
        if monitor:
            self.status.close()
            self.evidence.ras.append(_event_from_line(Location(self.path, lineno), monitor))
            return
        if rc.is_transcript_noise(line):
            self.status.close()  # a new command or connection: the reply before it is complete
            return
        error = rc.SERVER_ERROR.fullmatch(line.strip())
        if error:
            self.status.close()
            self.problem(lineno, f"the RAS server replied: {line.strip()}")
            return
        if not self.status.feed(lineno, line) and line.strip() and set(line.strip()) != {"="}:
            self.stray.append(lineno)

    def objects(self, pos: int, count: int) -> int:
        """Decode the objects that start at `pos` (several may share lines); return the next line to read."""
        while True:
            start = self.line_of(pos)
            try:
                value, end = self.decoder.raw_decode(self.text, pos)
            except json.JSONDecodeError as e:
                self.problem(self.line_of(e.pos), f"invalid JSON: {e.msg} (object starting at line {start})",
                             Severity.ERROR)
                return self.skip_json(start, count)
            except RecursionError:
                self.problem(start, "JSON nested too deeply; skipped", Severity.ERROR)
                return self.skip_json(start, count)
            except ValueError as e:  # not a JSONDecodeError: an integer of more than 4300 digits
                self.problem(start, f"invalid JSON: {e}", Severity.ERROR)
                return self.skip_json(start, count)
            self.value(value, start, pos, end)
            rest = _SPACE.match(self.text, end).end()
            if rest < len(self.text) and self.text[rest] == "{":
                pos = rest
                continue
            return self.line_of(end - 1)  # the 0-based index of the line after the object's last line

    def skip_json(self, start: int, count: int) -> int:
        """After a decode error: skip the object's remaining lines (indented, `}`, `]`, `"`, or blank)."""
        index = start  # 0-based index of the line after the first line of the broken object
        while index < count:
            line = self.line(index)
            if line.strip() and not line[:1].isspace() and line[:1] not in '}]"':
                break
            index += 1
        return index

    def value(self, value: object, line: int, pos: int, end: int) -> None:
        loc = Location(self.path, line)
        last = self.line_of(end - 1)
        if isinstance(value, dict) and ("communicators" in value or "nccl_version" in value):
            repaired = [r for r in self.repairs if line <= r <= last]
            if repaired:
                self.problem(repaired[0], f"invalid JSON from NCCL 2.28.7/2.28.9 (no comma before \"status\" in "
                             f"missing_ranks) repaired in {len(repaired)} place(s); fixed in NCCL 2.29.2")
            lines = {key: [self.line_of(pos + m.start()) for m in re.finditer(rf'"{key}"\s*:', self.text[pos:end])]
                     for key in ("hash", "rank")}
            _StatusBuilder(self, value, loc, lines).build()
        elif isinstance(value, dict) and "event" in value:
            self.evidence.ras.append(_event_from_json(loc, value))
        else:
            self.problem(line, "JSON object that is neither a RAS STATUS reply nor a MONITOR event; skipped")

    def problem(self, line: int, message: str, severity: Severity = Severity.WARNING) -> None:
        self.evidence.problems.append(Diagnostic(Location(self.path, line), message, severity))


def shown_number(n: int) -> str:
    """A number as a message shows it; a long one by its size only (a mutated field may hold thousands of digits)."""
    return str(n) if abs(n) < 10**30 else f"of {n.bit_length()} bits"


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _dict(value: object) -> dict:
    return value if isinstance(value, dict) else {}


def _list(value: object) -> list:
    return value if isinstance(value, list) else []


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


class _StatusBuilder:
    """One JSON STATUS document -> one RasSnapshot, with the issues a text reply would list derived from it."""

    def __init__(self, walker: _Walker, doc: dict, loc: Location, lines: dict[str, list[int]]) -> None:
        self.walker, self.doc, self.loc, self.lines = walker, doc, loc, lines
        self.issues: list[RasIssue] = []
        self.dead_pids: dict[int, str | None] = {}
        self.rank_line = iter(lines["rank"])
        self.odd = False  # some field had an unexpected type
        self.init_errors: set[int] = set()  # ranks of the comm being read whose init_state is an error
        self.size: int | None = None  # declared size of the comm being read

    def at(self, line: int | None) -> Location:
        return Location(self.loc.path, line if line is not None else self.loc.line)

    def build(self) -> None:
        doc, evidence = self.doc, self.walker.evidence
        version = _str(doc.get("nccl_version"))
        if version and evidence.version is None:
            evidence.version = version
        comms_raw = doc.get("communicators", [])
        if not isinstance(comms_raw, list):
            self.odd, comms_raw = True, []
        # Locations: the k-th `"hash":` of the document is the k-th comm (printf writes them in order).
        hash_lines = self.lines["hash"] if len(self.lines["hash"]) == len(comms_raw) else [None] * len(comms_raw)
        if len(self.lines["rank"]) != sum(len(_list(_dict(c).get(k))) for c in comms_raw
                                          for k in ("ranks", "missing_ranks")):
            self.rank_line = iter(())
        comms = [c for c in (self.comm(raw, line) for raw, line in zip(comms_raw, hash_lines)) if c]
        if self.dead_pids:
            pids = tuple(self.dead_pids)
            n = len(pids)
            self.issues.insert(0, RasIssue(self.loc, "DEAD", message=f"{n} job process{' is' if n == 1 else 'es are'} "
                                           "considered dead (unreachable via the RAS network)", pids=pids))
        ras = _dict(doc.get("ras"))
        timeouts = _int(ras.get("timeouts_count"))
        if timeouts:
            self.issues.append(RasIssue(self.loc, "TIMEOUT", message=f"Encountered {timeouts} communication "
                                        f"timeout{'s' if timeouts > 1 else ''} while gathering communicator data",
                                        warning=True))
        for key in ("errors", "warnings"):  # not written by any NCCL release so far; read them if one does
            for entry in _list(doc.get(key)):
                self.issues.append(self.listed_issue(entry, warning=key == "warnings"))
        if self.odd:
            self.walker.problem(self.loc.line, "RAS JSON reply has fields of unexpected types; they were skipped")
        evidence.ras.append(RasSnapshot(self.loc, time=_str(doc.get("timestamp")), nccl_version=version,
                                        comms=tuple(comms), issues=tuple(self.issues)))

    def listed_issue(self, entry: object, warning: bool) -> RasIssue:
        if not isinstance(entry, dict):
            return RasIssue(self.loc, "ERROR" if not warning else "WARNING", message=str(entry), warning=warning)
        kind = _str(entry.get("kind")) or _str(entry.get("type")) or ("WARNING" if warning else "ERROR")
        ranks = tuple(r for r in map(_int, _list(entry.get("ranks"))) if r is not None)
        pids = tuple(p for p in map(_int, _list(entry.get("pids"))) if p is not None)
        comm = rc.normalize_hash(entry.get("comm") or entry.get("hash"))
        return RasIssue(self.loc, kind, comm, _str(entry.get("message")) or json.dumps(entry), ranks, pids, warning)

    def comm(self, raw: object, line: int | None) -> RasComm | None:
        if not isinstance(raw, dict):
            self.odd = True
            return None
        comm = rc.normalize_hash(raw.get("hash"))
        loc = self.at(line)
        if comm is None:
            self.walker.problem(loc.line, f"communicator hash {raw.get('hash')!r} is not a hex hash; comm skipped")
            return None
        size = _int(raw.get("size"))
        if size is not None and not 0 < size <= MAX_RANK:
            self.walker.problem(loc.line, f"RAS JSON communicator {comm}: size {shown_number(size)} is no "
                                f"communicator's (1..{MAX_RANK}); read as unknown")
            size = None
        self.size = size
        self.init_errors = set()
        present = [r for r in (self.rank(e, comm, size, missing=False) for e in _list(raw.get("ranks"))) if r]
        absent = [r for r in (self.rank(e, comm, size, missing=True) for e in _list(raw.get("missing_ranks"))) if r]
        self.check_listed(loc, raw, size, present, absent)
        counts = {r.rank: dict(r.counts) for r in present}
        groups = rc.count_groups(counts)
        statuses = [r.status for r in present if r.status] + ["NOCOMM" for r in absent if not r.unresponsive]
        errored = [r for r in present if r.async_error or r.rank in self.init_errors]
        mismatch = bool(groups) or len(set(statuses)) > 1
        incomplete = [r for r in absent if r.unresponsive]
        errors = tuple(e for e, on in zip(rc.ERROR_ORDER, (incomplete, errored, mismatch)) if on)
        ranks = tuple(sorted(present + absent, key=lambda r: r.rank))
        self.comm_issues(loc, comm, incomplete, errored, groups, present, absent)
        return RasComm(loc, comm, size=size, status=rc.comm_status(statuses), errors=errors, ranks=ranks,
                       count_groups=groups, missing_ranks=tuple(sorted(r.rank for r in absent)),
                       dead_ranks=tuple(sorted(r.rank for r in absent if r.dead)))

    def check_listed(self, loc: Location, raw: dict, size: int | None, present: list[RasRank],
                     absent: list[RasRank]) -> None:
        """A warning where the comm's ranks do not add up: its size against the ranks listed (present and
        missing), the counts the reply states against its lists, a rank number outside the size or listed twice.
        A rank in no list has unknown counts; nothing may be read as agreeing for it."""
        numbers = [r.rank for r in present + absent]
        said = []
        for key, listed in (("ranks_count", present), ("missing_ranks_count", absent)):
            stated = _int(raw.get(key))
            if stated is not None and stated != len(listed):
                said.append(f"{key} {stated} but {len(listed)} listed")
        if size is not None:
            outside = sorted({n for n in numbers if not 0 <= n < size})
            if outside:
                said.append(f"rank(s) {', '.join(map(str, outside[:4]))} outside its size {size}")
            if len(numbers) < size:  # the first unlisted ranks only: `size` is the file's word, maybe 10**12
                listed = set(numbers)
                unlisted = list(itertools.islice((n for n in range(size) if n not in listed), 9))
                shown = ", ".join(map(str, unlisted[:8])) + (", ..." if len(unlisted) > 8 else "")
                said.append(f"size {size} but {len(numbers)} rank(s) listed: rank(s) {shown} in no list, "
                            f"their counts unknown")
        twice = sorted(n for n, times in Counter(numbers).items() if times > 1)
        if twice:
            said.append(f"rank(s) {', '.join(map(str, twice[:4]))} listed twice")
        if said:
            self.walker.problem(loc.line, f"RAS JSON communicator {rc.normalize_hash(raw.get('hash'))}: "
                                + "; ".join(said))

    def rank(self, entry: object, comm: str, size: int | None, missing: bool) -> RasRank | None:
        line = next(self.rank_line, None)
        number = _int(_dict(entry).get("rank"))
        if number is None:
            self.odd = True
            return None
        host = _str(entry.get("host"))
        host = None if host in (None, "unknown") else host
        pid = _int(entry.get("pid"))
        pid = None if pid is None or pid < 0 else pid
        cuda_dev = _int(entry.get("cuda_dev"))
        status = _dict(entry.get("status"))
        if pid is not None:
            self.walker.evidence.identities.append(ProcessIdentity(self.at(line), host=host, pid=pid, comm=comm,
                                                                   comm_rank=number, comm_size=size,
                                                                   cuda_dev=cuda_dev))
        if missing:
            unresponsive, dead = status.get("unresponsive") is True, status.get("considered_dead") is True
            if dead and pid is not None:
                self.dead_pids.setdefault(pid, host)
            return RasRank(number, host, pid, cuda_dev, status=None if unresponsive else "NOCOMM", missing=True,
                           unresponsive=unresponsive, dead=dead)
        counts = {k: v for k, v in _dict(entry.get("collective_counts")).items() if _int(v) is not None}
        init_state, async_code = _int(status.get("init_state")), _int(status.get("async_error"))
        if status.get("abort_flag") is True:
            state = "ABORT"
        elif status.get("finalize_called") is True or status.get("destroy_flag") is True:
            state = "FINALIZE"
        elif init_state is None:
            state = None
        else:
            state = "RUNNING" if init_state == 0 else "INIT"
        if init_state is not None and init_state not in rc.NOT_AN_ERROR:
            self.init_errors.add(number)
        async_error = rc.result_text(async_code) if async_code is not None and async_code not in rc.NOT_AN_ERROR \
            else None
        return RasRank(number, host, pid, cuda_dev, counts, state, async_error)

    def comm_issues(self, loc: Location, comm: str, incomplete: list[RasRank], errored: list[RasRank],
                    groups: tuple, present: list[RasRank], absent: list[RasRank]) -> None:
        """The INCOMPLETE, ERROR and MISMATCH blocks a text reply would print for this comm."""
        def issue(kind: str, message: str, ranks: list[RasRank], warning: bool = False) -> None:
            self.issues.append(RasIssue(loc, kind, comm, message, tuple(r.rank for r in ranks),
                                        tuple(dict.fromkeys(r.pid for r in ranks if r.pid is not None)), warning))

        if incomplete:
            issue("INCOMPLETE", f"Missing communicator data from {len(incomplete)} rank{'s' * (len(incomplete) > 1)}",
                  incomplete)
        if errored:
            parts = []
            init = [r for r in errored if r.rank in self.init_errors]
            if init:
                parts.append(f"Initialization errors on {len(init)} ranks")
            by_error: dict[str, list[int]] = {}
            for r in errored:
                if r.async_error:
                    by_error.setdefault(r.async_error, []).append(r.rank)
            if by_error:
                parts.append(f"Asynchronous errors on {sum(map(len, by_error.values()))} ranks")
                parts += [f"ranks {','.join(map(str, ranks))} reported {error}" for error, ranks in by_error.items()]
            issue("ERROR", "; ".join(parts), errored)
        statuses = {r.rank: r.status for r in present if r.status}
        statuses.update({r.rank: "NOCOMM" for r in absent if not r.unresponsive})
        if groups or len(set(statuses.values())) > 1:
            # Name the ranks a default text STATUS would list (outlier groups), so text and JSON issues agree.
            total = self.size if self.size is not None else len(present) + len(absent)
            parts, named = [], set()
            if len(set(statuses.values())) > 1:
                parts.append("Communicator ranks have different status")
                by_status: dict[str, list[int]] = {}
                for rank, status in statuses.items():
                    by_status.setdefault(status, []).append(rank)
                named |= {r for ranks in by_status.values() if rc.is_outlier(len(ranks), total) for r in ranks}
            for op in dict.fromkeys(g.op for g in groups):
                mine = [g for g in groups if g.op == op]
                parts.append(f"Communicator ranks have different {op or 'collective'} operation counts: " + ", ".join(
                    f"{g.nranks} at {g.count or 0} (ranks {','.join(map(str, g.ranks))})" for g in mine))
                named |= {r for g in mine if rc.is_outlier(g.nranks, total) for r in g.ranks}
            issue("MISMATCH", "; ".join(parts), [r for r in present + absent if r.rank in named], warning=True)


def _event_snapshot(loc: Location, time: str | None, event: str, pid: int | None, where: str,
                    details: str) -> RasSnapshot:
    message = f"{where} {details}".strip() if where and details else where or details
    issue = RasIssue(loc, event, message=message, pids=(pid,) if pid is not None else (),
                     warning=event not in rc.FATAL_EVENTS)
    return RasSnapshot(loc, time=time, event=event, issues=(issue,))


def _event_from_line(loc: Location, m: re.Match) -> RasSnapshot:
    """`[2026-07-14 09:32:10] PEER_DEAD: Process 51008 on node 10.0.0.12 managing GPU 1 ` -> one snapshot."""
    rest = m["rest"].rstrip()
    peer = _PEER.fullmatch(rest)
    if peer:
        where = f"process {peer['pid']} on node {peer['host']} (GPU {peer['gpus'] or '?'})"
        return _event_snapshot(loc, m["time"], m["event"], int(peer["pid"]), where, peer["details"] or "")
    addr = _PEER_ADDR.fullmatch(rest)
    if addr:
        return _event_snapshot(loc, m["time"], m["event"], None, f"peer {addr['addr']}", addr["details"] or "")
    return _event_snapshot(loc, m["time"], m["event"], None, "", rest)


def _event_from_json(loc: Location, doc: dict) -> RasSnapshot:
    """`{"timestamp": ..., "group": ..., "event": "PEER_DEAD", "peer": {...}, "details": ""}` -> one snapshot."""
    event = _str(doc.get("event")) or "UNKNOWN_EVENT"
    peer = _dict(doc.get("peer"))
    pid = _int(peer.get("pid"))
    if "addr" in peer:
        where = f"peer {peer.get('addr')}"
    elif peer:
        gpus = ",".join(str(g) for g in _list(peer.get("cuda_devs")))
        where = f"process {pid} on node {peer.get('host')} (GPU {gpus or '?'})"
    else:
        where = ""
    return _event_snapshot(loc, _str(doc.get("timestamp")), event, pid, where, _str(doc.get("details")) or "")
