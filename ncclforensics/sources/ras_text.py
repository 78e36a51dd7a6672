"""NCCL RAS text STATUS replies (NCCL 2.24 to 2.30): `echo status | nc localhost 28028`, `ncclras [-v]`.

A reply is: version header, job summary, `Communicators... (0.001s)`, the communicators table, then the
Errors and Warnings sections made of blocks (`INCOMPLETE`, `DEAD`, `TIMEOUT`, `#<group>-<index> (<hash>) KIND`).
Parsing keys on headings and line prefixes, never on blank lines (nccl_formats.md sections 2.1 to 2.7). A file may
hold several replies back to back, inside a transcript; `ras_json.read_ras` walks the file and hands the text
lines of replies to `StatusTextParser`, so every RAS source (ras.py) reads mixed transcripts the same way. The
records a reply is read into, and what is concluded when it ends, are in ras_reply.py.

Mapping onto the model, per reply: one RasSnapshot; one RasComm per comm of the table, in table order, named by its
hash where a block prints it and `#<group>-<index>` otherwise (healthy comms have no block, so no hash); one
RasIssue per block; RasRank for every rank a line names (text lists only outliers, see section 2.6); a
ProcessIdentity for every rank line that names a process.
"""

from __future__ import annotations

import re

from ..model import (
    Diagnostic, Evidence, Location, ProcessIdentity, RasComm, RasCountGroup, RasIssue, RasSnapshot, Severity,
)
from . import ras_common as rc
from .base import looks_binary
from .ras_reply import (
    COMMS, ERRORS, HEADER, MAX_IMPLIED, MAX_RANK, SUMMARY, TABLE, WARNINGS, Block, CountLine, Reply, ReplyComm,
    ReplyRank, cut_short, infer_majority, parse_group_row,
)

_VERSION = re.compile(r"NCCL version (?P<version>\S+) compiled with CUDA (?P<cuda>\S+)")
_CUDA = re.compile(r"CUDA runtime version \d+, driver version \d+")
_COMMUNICATORS = re.compile(r"Communicators\.\.\.(?: \((?P<secs>[\d.]+)s\))?")
_TABLE_HEAD = re.compile(r"Group\s+Comms\s+Nodes\s+Ranks\s+Ranks\s+Ranks\s+Status\s+Errors")
_TABLE_HEAD2 = re.compile(r"#\s+in group\s+per comm\s+per node\s+per comm\s+in group")
_COMM_BLOCK = re.compile(r"#(?P<group>\d+)-(?P<index>\d+) \((?P<hash>[0-9a-fA-F]{1,16})\) (?P<kind>[A-Z,]+)\s*")
_JOB_BLOCKS = frozenset({"INCOMPLETE", "DEAD", "TIMEOUT"})
_RANK = re.compile(
    r"\s*Rank (?P<rank>\d+)(?: (?:has launched up to operation (?P<count>\d+)|(?P<none>has not launched any operations)"
    r"|has status (?P<status>\w+)|reported (?P<error>.+?)))?"
    r"(?: -- (?:GPU (?P<gpu>\d+)(?: \(NVML (?P<nvml>\d+)\))? managed by process (?P<pid>\d+) on node (?P<host>\S+)"
    r"|(?P<noinfo>\[process information not found\])))?\s*"
)
_PROCESS = re.compile(r"\s*Process (?P<pid>\d+) on node (?P<host>\S+) managing GPUs? (?P<gpus>.*?)\s*")
_LINES = [  # (name, regex) of the other lines a block may hold
    ("job_missing", re.compile(r"\s*Missing communicator data from (?P<n>\d+) job process(?:es)?\s*")),
    ("no_info", re.compile(r"\s*\[could not find information on (?P<n>\d+) process(?:es)?\]\s*")),
    ("dead", re.compile(r"\s*(?P<n>\d+) job process(?: is|es are) considered dead "
                        r"\(unreachable via the RAS network\)\s*")),
    ("timeouts", re.compile(r"\s*Encountered (?P<n>\d+) communication timeouts? while gathering "
                            r"communicator data\s*")),
    ("missing", re.compile(r"\s*Missing communicator data from (?P<n>\d+) ranks?\s*")),
    ("missing_list", re.compile(r"\s*The missing ranks?: (?P<ranks>[\d, ]+)\s*")),
    ("unknown_list", re.compile(r"\s*The unknown ranks?: (?P<ranks>[\d, ]+)\s*")),
    ("init_errors", re.compile(r"\s*Initialization errors? on (?P<n>\d+) ranks?\s*")),
    ("async_errors", re.compile(r"\s*Asynchronous errors? on (?P<n>\d+) ranks?\s*")),
    ("reported", re.compile(r"\s*(?P<n>\d+) ranks reported (?P<error>.+?)\s*")),
    ("diff_status", re.compile(r"\s*Communicator ranks have different status\s*")),
    ("status_group", re.compile(r"\s*(?P<n>\d+) ranks have status (?P<status>\w+)\s*")),
    ("diff_counts", re.compile(r"\s*Communicator ranks have different (?P<op>\w+) operation counts\s*")),
    ("count_group", re.compile(r"\s*(?P<n>\d+) ranks have launched up to operation (?P<count>\d+)\s*")),
    ("zero_group", re.compile(r"\s*(?P<n>\d+) ranks have not launched any operations\s*")),
]
_SUMMARY_LINE = re.compile(r"\s.*|\(total\).*|The outlier nodes?:.*|=+")



# Lines only a text reply has (0.95), its headings (0.9), and section underlines that others could share (0.6).
_SNIFF = (
    (0.95, re.compile(r"^Group\s+Comms\s+Nodes\s+Ranks|^#\d+-\d+ \([0-9a-f]{16}\) (?:INCOMPLETE|ERROR|MISMATCH)\s*$"
                      r"|^No communicator data collected!|considered dead \(unreachable via the RAS network\)"
                      r"|^\s*Missing communicator data from \d+ (?:job process|rank)", re.M)),
    (0.9, re.compile(r"^NCCL version \S+ compiled with CUDA|^Communicators\.\.\.", re.M)),
    (0.6, re.compile(r"^(?:Job summary|Warnings)\s*\n=+", re.M)),
)


def sniff_text(head: bytes, text: str) -> float:
    """Score for a RAS text STATUS reply."""
    if looks_binary(head):
        return 0.0
    return next((score for score, pattern in _SNIFF if pattern.search(text)), 0.0)


def _rank_list(text: str) -> list[int]:
    return [int(t) for t in re.split(r"[,\s]+", text.strip()) if t.isdigit()]


class StatusTextParser:
    """Reads the lines of text replies one at a time into `evidence` (ras, identities, problems, version)."""

    def __init__(self, evidence: Evidence) -> None:
        self.evidence = evidence
        self.path = evidence.path
        self.reply: Reply | None = None
        self.implied_left = MAX_IMPLIED  # budget for implied comms and ranks, shared by the file's replies

    def feed(self, lineno: int, line: str) -> bool:
        """Take one line; False when it is not part of a text reply (the caller decides what it is)."""
        taken = self._feed(lineno, line)
        reply = self.reply
        if taken and reply is not None:
            reply.last_line = lineno
            if reply.stage == WARNINGS and line.strip() and set(line.strip()) == {"="}:
                reply.underlined = True
        return taken

    def _feed(self, lineno: int, line: str) -> bool:
        stage = self._heading(line)
        if stage:
            if self.reply is None or self.reply.stage >= stage:
                self.close()
                self.reply = Reply(line=lineno)
            self._close_block()
            self.reply.stage = stage
            if stage == HEADER:
                self.reply.version = _VERSION.fullmatch(line.strip())["version"]
            return True
        reply = self.reply
        if reply is None:
            return False
        if not line.strip():
            return True
        if reply.stage == HEADER:
            return bool(_CUDA.fullmatch(line.strip())) or self._stray(lineno, line)
        if reply.stage == SUMMARY:
            if not _SUMMARY_LINE.fullmatch(line):
                return self._stray(lineno, line)
            self._job_summary_line(line)
            return True
        if reply.stage == COMMS:
            return self._comms_line(lineno, line)
        if reply.stage == TABLE:
            return self._table_line(lineno, line)
        return self._section_line(lineno, line)

    def close(self, cut: bool = False) -> None:
        """Finish the reply being read (end of file, a new reply, a JSON reply or a transcript line). `cut`: the
        file ends here without a line break, inside the reply's last line."""
        reply = self.reply
        if reply is None:
            return
        self._close_block()
        self.reply = None
        self.evidence.ras.append(self._snapshot(reply, cut))

    # -- headings and the parts before the sections

    def _heading(self, line: str) -> int:
        text = line.rstrip()
        if _VERSION.fullmatch(text):
            return HEADER
        if text == "Job summary":
            return SUMMARY
        if _COMMUNICATORS.fullmatch(text):
            return COMMS
        if _TABLE_HEAD.fullmatch(text.strip()) and not text.startswith(" "):
            return TABLE
        if text == "No communicator data collected!":
            # After `Communicators...` (2.26+) or after the table header (2.24/2.25 print it even with no comms).
            reply = self.reply
            return 0 if reply is not None and reply.stage in (COMMS, TABLE) and not reply.rows else TABLE
        if text == "Errors":
            return ERRORS
        if text == "Warnings":
            return WARNINGS
        return 0

    def _stray(self, lineno: int, line: str) -> bool:
        """A line that fits no reply: indented ones are unrecognised content, others end the reply."""
        if line[:1].isspace():
            self.reply.unrecognised.append(lineno)
            return True
        self.close()
        return False

    def _job_summary_line(self, line: str) -> None:
        """Read the job's process count off the summary (nccl_formats.md section 2.2). Layout (A) heads its one row
        `(total)   per node  per process    (total)  (total)`: Nodes, Processes per node, GPUs per process,
        Processes (total), GPUs (total); layouts (B) and (C) end with a row headed `(total)    (total)      (total)`:
        Nodes, Processes, GPUs."""
        reply = self.reply
        words = line.split()
        if words[:1] == ["(total)"]:
            reply.totals_at = 3 if "per" in words else 1
            return
        if reply.totals_at is not None and words and all(w.isdigit() for w in words):
            if len(words) > reply.totals_at:
                reply.processes = int(words[reply.totals_at])
            reply.totals_at = None

    def _comms_line(self, lineno: int, line: str) -> bool:
        # "=============" and the (never printed) RAS-network strings of section 2.3.
        if set(line.strip()) == {"="} or line.startswith(" ") or line.startswith("Gathering data"):
            return True
        return self._table_line(lineno, line)

    def _table_line(self, lineno: int, line: str) -> bool:
        reply = self.reply
        if line.strip() == "No communicator data collected!":
            reply.stage = TABLE
            return True
        if _TABLE_HEAD2.fullmatch(line.strip()):
            reply.stage = TABLE
            return True
        row = parse_group_row(line, lineno)
        if row is None:
            return self._stray(lineno, line)
        reply.stage = TABLE
        if row.implausible or row.group in reply.rows:
            self._problem(lineno, f"communicators table row {row.group} is implausible ({row.comms} comms, "
                          f"{row.nodes} nodes, {row.size} ranks): {self._garbage_hint()}; ignored")
            reply.dropped.append(f"group {row.group}")
            return True
        reply.rows[row.group] = row
        reply.saw_missing |= "INCOMPLETE" in row.errors or row.ranks_in_group < row.size
        return True

    # -- the Errors and Warnings sections

    def _section_line(self, lineno: int, line: str) -> bool:
        reply = self.reply
        text = line.rstrip()
        if set(text) == {"="}:
            return True
        m = _COMM_BLOCK.fullmatch(text)
        if m:
            self._close_block()
            self._open_comm_block(lineno, m)
            return True
        if text in _JOB_BLOCKS:
            self._close_block()
            reply.block = Block(text, lineno, warning=reply.stage == WARNINGS)
            return True
        if not line[:1].isspace():
            self.close()
            return False
        block = reply.block
        if block is None:
            reply.unrecognised.append(lineno)
        else:
            block.lines += 1
            if not (block.comm and block.comm.corrupt):
                self._block_line(block, lineno, line)
        return True

    def _open_comm_block(self, lineno: int, m: re.Match) -> None:
        reply = self.reply
        group, index = int(m["group"]), int(m["index"])
        comm_hash = rc.normalize_hash(m["hash"])
        comm = reply.comms.get((group, index))
        if comm is None:
            comm = reply.comms[(group, index)] = ReplyComm(group, index, comm_hash, lineno)
        elif comm.comm != comm_hash:
            comm.corrupt = True  # one comm, two hashes: the reply's comm list was misread
        row = reply.rows.get(group)
        reason = None
        if reply.rows and (row is None or index >= row.comms):
            reason = f"#{group}-{index} is not in the communicators table"
        elif rc.implausible_hash(comm_hash):
            reason = f"hash {m['hash']} is implausible"
        elif comm.corrupt:
            reason = f"#{group}-{index} is printed with two different hashes"
        if reason:
            self._corrupt(comm, lineno, reason)
        kind = m["kind"]
        reply.block = Block(kind, lineno, comm=comm, warning=reply.stage == WARNINGS)
        if "INCOMPLETE" in kind:
            reply.saw_missing = True

    def _block_line(self, block: Block, lineno: int, line: str) -> None:
        m = _RANK.fullmatch(line)
        if m:
            self._rank_line(block, lineno, m)
            return
        m = _PROCESS.fullmatch(line)
        if m:
            block.pids.append(int(m["pid"]))
            if block.kind == "DEAD":
                self.reply.dead.add((int(m["pid"]), m["host"]))
            return
        for name, pattern in _LINES:
            m = pattern.fullmatch(line)
            if m:
                block.messages.append(line.strip())
                self._summary_line(block, lineno, name, m)
                return
        self.reply.unrecognised.append(lineno)

    def _summary_line(self, block: Block, lineno: int, name: str, m: re.Match) -> None:
        comm = block.comm
        size = self.reply.rows[comm.group].size if comm and comm.group in self.reply.rows else None
        counted = name in ("missing", "count_group", "zero_group", "status_group", "reported")
        if counted and comm is not None and size is not None and int(m["n"]) > size:
            self._corrupt(comm, lineno, f"{m['n']} ranks in a comm of {size}")
            return
        if name in ("diff_status", "status_group", "unknown_list") and comm is not None:
            comm.status_differs = True
        if name == "missing":
            block.context = ("missing",)
            if comm is not None:
                comm.missing_claimed = max(comm.missing_claimed, int(m["n"]))
        elif name in ("missing_list", "unknown_list") and comm is not None:
            for number in _rank_list(m["ranks"]):
                rank = self._block_rank(block, lineno, number)
                if rank is None:
                    return
                block.ranks.append(number)
                rank.missing = True
                rank.unresponsive = name == "missing_list"
                rank.status = "UNKNOWN" if name == "unknown_list" else rank.status
        elif name in ("init_errors", "async_errors"):
            block.init_errors = name == "init_errors"
            block.context = ()
        elif name == "reported":
            block.context = ("error", m["error"])
        elif name == "status_group":
            block.context = ("status", m["status"])
        elif name == "diff_counts":
            block.op = rc.SINGLE_COUNTER if m["op"] == "collective" else m["op"]
            if comm is not None:
                comm.announced.append(block.op)
        elif name in ("count_group", "zero_group") and comm is not None:
            count = int(m["count"]) if name == "count_group" else 0
            group = CountLine(block.op, count, int(m["n"]))
            comm.groups.append(group)
            block.context = ("count", group)

    def _rank_line(self, block: Block, lineno: int, m: re.Match) -> None:
        number = int(m["rank"])
        rank = self._block_rank(block, lineno, number)
        if rank is None:
            return
        block.ranks.append(number)
        verb = next((g for g in ("count", "none", "status", "error") if m[g] is not None), None)
        if verb is not None:
            block.messages.append(m.group(0).split(" -- ", 1)[0].strip())
        if verb in ("count", "none"):
            count = int(m["count"]) if verb == "count" else 0
            block.comm.groups.append(CountLine(block.op, count, 1, [number]))
            rank.counts[block.op or rc.SINGLE_COUNTER] = count
        elif verb == "status":
            block.comm.status_differs = True
            self._set_status(rank, m["status"])
        elif verb == "error":
            self._set_error(rank, m["error"], block.init_errors)
        elif block.context[:1] == ("missing",):
            rank.missing = rank.unresponsive = True
        elif block.context[:1] == ("count",):
            group = block.context[1]
            group.ranks.append(number)
            rank.counts[group.op or rc.SINGLE_COUNTER] = group.count
        elif block.context[:1] == ("status",):
            self._set_status(rank, block.context[1])
        elif block.context[:1] == ("error",):
            self._set_error(rank, block.context[1], block.init_errors)
        if m["pid"] is not None:
            rank.host, rank.pid, rank.cuda_dev = m["host"], int(m["pid"]), int(m["gpu"])
            block.pids.append(rank.pid)
            size = self.reply.rows[block.comm.group].size if block.comm.group in self.reply.rows else None
            comm = block.comm.comm if block.comm.comm.startswith("0x") else None
            block.identities.append(ProcessIdentity(Location(self.path, lineno), host=rank.host, pid=rank.pid,
                                                    comm=comm, comm_rank=number, comm_size=size,
                                                    cuda_dev=rank.cuda_dev))

    def _block_rank(self, block: Block, lineno: int, number: int) -> ReplyRank | None:
        """The comm's rank `number`, or None (and the comm marked corrupt) when no real comm has it."""
        comm = block.comm
        if comm is None:
            self.reply.unrecognised.append(lineno)
            return None
        row = self.reply.rows.get(comm.group)
        if number >= MAX_RANK or (row is not None and number >= row.size):
            self._corrupt(comm, lineno, f"rank {number} in a comm of {row.size if row else 'unknown'} ranks")
            return None
        return comm.rank(number)

    @staticmethod
    def _set_status(rank: ReplyRank, status: str) -> None:
        rank.status = status
        if status in rc.NO_COMM_STATUSES:
            rank.missing = True

    @staticmethod
    def _set_error(rank: ReplyRank, error: str, init: bool) -> None:
        if init:
            rank.status = rank.status or "INIT"  # an initialisation error leaves the rank in INIT
        else:
            rank.async_error = error

    def _corrupt(self, comm: ReplyComm, lineno: int, reason: str) -> None:
        if comm.corrupt and comm.comm in self.reply.dropped:
            return
        comm.corrupt = True
        self.reply.dropped.append(comm.comm)
        self._problem(lineno, f"comm #{comm.group}-{comm.index} ({comm.comm}) looks like decoded garbage ({reason}): "
                      f"{self._garbage_hint()}; its data is ignored")

    def _garbage_hint(self) -> str:
        if self.reply.saw_missing:
            return ("NCCL 2.26.2-2.28.9 misread the comms that follow a comm with missing ranks "
                    "(NVIDIA/nccl#1762, fixed in 2.29.2); use the JSON reply for these comms")
        return "the reply looks corrupted"

    def _close_block(self) -> None:
        reply = self.reply
        block = reply.block if reply else None
        if block is None:
            return
        reply.block = None
        if not block.lines:
            reply.empty_blocks.append(block.line)
        if block.comm is not None and block.comm.corrupt:
            return
        self.evidence.identities.extend(block.identities)
        comm = block.comm.comm if block.comm is not None else None
        reply.issues.append(RasIssue(Location(self.path, block.line), block.kind, comm, "; ".join(block.messages),
                                     tuple(dict.fromkeys(block.ranks)), tuple(dict.fromkeys(block.pids)),
                                     block.warning))

    def _problem(self, lineno: int, message: str, severity: Severity = Severity.WARNING) -> None:
        self.evidence.problems.append(Diagnostic(Location(self.path, lineno), message, severity))

    # -- the snapshot

    def _snapshot(self, reply: Reply, cut: bool = False) -> RasSnapshot:
        if reply.version and self.evidence.version is None:
            self.evidence.version = reply.version
        if reply.unrecognised:
            first = reply.unrecognised[0]
            self._problem(first, f"{len(reply.unrecognised)} unrecognised line(s) in this RAS reply; skipped",
                          Severity.ERROR)
        version = rc.version_tuple(reply.version)
        total = sum(r.comms for r in reply.rows.values()) or len(reply.comms)
        if rc.has_comm_walk_bug(version) and reply.saw_missing and total > 1 and not reply.dropped:
            self._problem(reply.line, "NCCL 2.26.2-2.28.9 text replies may misreport the comms that follow a comm "
                          "with missing ranks (NVIDIA/nccl#1762); cross-check with a JSON reply")
        keys = {k for k, c in reply.comms.items() if not c.corrupt}
        unlisted = 0
        for group, row in reply.rows.items():  # healthy comms have no block: one placeholder each
            listed = min(row.comms, self.implied_left)
            keys.update((group, i) for i in range(listed))
            self.implied_left -= listed
            unlisted += row.comms - listed
        if unlisted:
            self._problem(reply.line, f"the communicators table claims {unlisted} more comms than this file may "
                          f"imply ({MAX_IMPLIED}); they are not listed")
        comms = []
        for group, index in sorted(keys):
            comm = reply.comms.get((group, index)) or ReplyComm(group, index, f"#{group}-{index}", 0)
            if comm.corrupt:
                continue
            comms.append(self._freeze_comm(reply, comm))
        reasons = cut_short(reply, cut)
        if reasons:
            self._problem(reply.last_line or reply.line, f"RAS reply of line {reply.line} is cut short: "
                          f"{'; '.join(reasons)}. What it does not show is unknown, not healthy")
        return RasSnapshot(Location(self.path, reply.line), nccl_version=reply.version, comms=tuple(comms),
                           issues=tuple(reply.issues), truncated=bool(reasons), processes=reply.processes)

    def _freeze_comm(self, reply: Reply, comm: ReplyComm) -> RasComm:
        row = reply.rows.get(comm.group)
        missing = sorted(r.rank for r in comm.ranks.values() if r.missing)
        self.implied_left -= infer_majority(comm, row.size if row else None, set(missing), self.implied_left)
        if row is not None and not comm.status_differs:
            for rank in comm.ranks.values():  # one status bit set: every responding rank has the comm's status
                if not rank.missing:
                    rank.status = rank.status or row.status
        groups = tuple(RasCountGroup(None if g.op == rc.SINGLE_COUNTER else g.op, g.count or None, g.nranks,
                                     tuple(sorted(g.ranks))) for g in comm.groups)
        ranks = tuple(comm.ranks[r].freeze(reply.dead) for r in sorted(comm.ranks))
        line = comm.line or (row.line if row else reply.line)
        return RasComm(Location(self.path, line), comm.comm, size=row.size if row else None,
                       status=row.status if row else None, errors=row.errors if row else (), ranks=ranks,
                       count_groups=groups, missing_ranks=tuple(missing),
                       dead_ranks=tuple(r.rank for r in ranks if r.dead))
