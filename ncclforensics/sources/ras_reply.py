"""A RAS text reply as its lines describe it, and what is concluded about it when it ends.

StatusTextParser (ras_text.py) fills these records line by line; `cut_short` and `infer_majority` read a finished
reply (nccl_formats.md sections 2.1 to 2.7).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..model import ProcessIdentity, RasIssue, RasRank
from . import ras_common as rc

_ROW = re.compile(
    r"\s*(?P<group>\d+)\s+(?P<comms>\d+)\s+(?P<nodes>\d+)\s+(?P<per_node>\d+(?:-\d+)?)\s+(?P<size>\d+)"
    r"\s+(?P<in_group>\d+)\s+(?P<status>NOCOMM|UNKNOWN|INIT|RUNNING|FINALIZE|ABORT)\s+(?P<errors>[A-Z,]+)\s*"
)
MAX_RANK = 1 << 24  # no real communicator has this many ranks; larger numbers are decoded garbage
# Comms and ranks a reply implies without listing them (a table row's comm count, the members of an unlisted
# majority group) are built one object each. One short line can claim millions, so a file gets at most this many.
MAX_IMPLIED = 1 << 16

# Stages of a reply, in the order NCCL prints them; a heading of a stage already passed starts a new reply.
HEADER, SUMMARY, COMMS, TABLE, ERRORS, WARNINGS = range(1, 7)
STAGE_NAMES = {HEADER: "its header", SUMMARY: "the job summary", COMMS: "the communicators heading",
                TABLE: "the communicators table", ERRORS: "the Errors section"}


@dataclass(frozen=True)
class GroupRow:
    """One row of the communicators table: a group of comms with the same size, nodes, status and errors."""

    group: int
    comms: int  # comms in the group
    nodes: int  # nodes per comm (responding ranks only)
    ranks_per_node: tuple[int, int]  # (min, max); `3-4` -> (3, 4), `4` -> (4, 4)
    size: int  # ranks per comm (declared size)
    ranks_in_group: int
    status: str
    errors: tuple[str, ...]  # () for OK
    line: int

    @property
    def implausible(self) -> bool:
        """A row no real comm yields (`0 nodes`, `0 ranks`): comm-walk garbage of 2.26-2.28.9 (NVIDIA/nccl#1762)."""
        return self.comms == 0 or self.nodes == 0 or self.size == 0 or self.size > MAX_RANK


def parse_group_row(line: str, lineno: int = 0) -> GroupRow | None:
    """Parse `    0         1         2       3-4         8         7   RUNNING  INCOMPLETE`; None if not a row."""
    m = _ROW.fullmatch(line)
    if not m:
        return None
    low, _, high = m["per_node"].partition("-")
    errors = tuple(e for e in m["errors"].split(",") if e and e != "OK")
    return GroupRow(int(m["group"]), int(m["comms"]), int(m["nodes"]), (int(low), int(high or low)), int(m["size"]),
                    int(m["in_group"]), m["status"], errors, lineno)


@dataclass
class ReplyRank:
    """A rank as the lines of one reply describe it, filled in line by line."""

    rank: int
    host: str | None = None
    pid: int | None = None
    cuda_dev: int | None = None
    counts: dict[str, int] = field(default_factory=dict)
    status: str | None = None
    async_error: str | None = None
    missing: bool = False
    unresponsive: bool = False

    def freeze(self, dead: set[tuple[int, str]]) -> RasRank:
        is_dead = self.missing and self.pid is not None and (self.pid, self.host) in dead
        return RasRank(self.rank, self.host, self.pid, self.cuda_dev, dict(self.counts), self.status,
                       self.async_error, self.missing, self.unresponsive, is_dead)


@dataclass
class CountLine:
    """A line of a MISMATCH block giving a count: `3 ranks have launched up to operation 49` (ranks filled in by
    the `Rank r` lines after it, or inferred), or `Rank 0 has launched up to operation 50` (one rank)."""

    op: str | None  # the collective type whose counts differ (rc.SINGLE_COUNTER: one counter, 2.24/2.25)
    count: int
    nranks: int
    ranks: list[int] = field(default_factory=list)


@dataclass
class ReplyComm:
    """A communicator of a reply: its table group, its block, and what the lines said of its ranks."""

    group: int
    index: int
    comm: str  # hash, or `#g-i` until a block names it
    line: int
    ranks: dict[int, ReplyRank] = field(default_factory=dict)
    groups: list[CountLine] = field(default_factory=list)
    status_differs: bool = False  # a "Communicator ranks have different status" part was printed
    corrupt: bool = False
    announced: list = field(default_factory=list)  # ops of "different <op> operation counts" parts
    missing_claimed: int = 0  # "Missing communicator data from <n> ranks"

    def rank(self, number: int) -> ReplyRank:
        return self.ranks.setdefault(number, ReplyRank(number))


@dataclass
class Block:
    """The block being read: its kind, its comm (None for job-level blocks) and what its lines said so far."""

    kind: str
    line: int
    comm: ReplyComm | None = None
    warning: bool = False
    messages: list[str] = field(default_factory=list)
    ranks: list[int] = field(default_factory=list)
    pids: list[int] = field(default_factory=list)
    identities: list[ProcessIdentity] = field(default_factory=list)
    context: tuple = ()  # what a bare `Rank r -- ...` line belongs to: ("missing",), ("count", group), ...
    init_errors: bool = False  # the error breakdown being read is of initialisation (not asynchronous) errors
    lines: int = 0  # lines read after the heading
    op: str | None = None  # collective type of the current "different ... operation counts" part


@dataclass
class Reply:
    """One text reply being read: its stage, table rows, comms, issues and what was left unread."""

    line: int
    stage: int = 0
    version: str | None = None
    rows: dict[int, GroupRow] = field(default_factory=dict)
    comms: dict[tuple[int, int], ReplyComm] = field(default_factory=dict)
    issues: list[RasIssue] = field(default_factory=list)
    dead: set[tuple[int, str]] = field(default_factory=set)
    block: Block | None = None
    unrecognised: list[int] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)  # comms dropped as decoded garbage
    saw_missing: bool = False
    last_line: int = 0  # the last line that was part of this reply
    underlined: bool = False  # the Warnings heading's underline was read
    empty_blocks: list[int] = field(default_factory=list)  # lines of block headings with no line after them
    processes: int | None = None  # the job summary's `Processes (total)`: every process of the job, dead ones too
    totals_at: int | None = None  # the column of that total in the job summary's next row of numbers


def cut_short(reply: Reply, cut: bool) -> list[str]:
    """Why a reply is incomplete: NCCL prints every section (Warnings last, even when empty), a block for every
    comm the table lists with errors, and for every collective type whose counts differ the counts of all
    ranks. A reply that lacks any of these was cut short (the server or the copy stopped)."""
    reasons = []
    if reply.stage < WARNINGS:
        reasons.append(f"it ends in {STAGE_NAMES.get(reply.stage, 'its header')}, before the Warnings section")
    elif not reply.underlined:
        reasons.append("it ends at the Warnings heading")
    if reply.empty_blocks:
        reasons.append(f"the block of line {reply.empty_blocks[0]} has no line after its heading")

    if reply.stage >= ERRORS:
        named = {c.group for c in reply.comms.values()}
        unnamed = sorted(g for g, row in reply.rows.items() if row.errors and g not in named)
        if unnamed:
            reasons.append(f"the communicators table lists errors for group(s) {', '.join(map(str, unnamed))} "
                           f"that no Errors or Warnings block describes")
    for comm in reply.comms.values():
        row = reply.rows.get(comm.group)
        if comm.corrupt or row is None:
            continue
        missing = sum(1 for r in comm.ranks.values() if r.missing)
        if missing < comm.missing_claimed:
            reasons.append(f"#{comm.group}-{comm.index} names {missing} of its {comm.missing_claimed} missing "
                           f"ranks")
        for op in dict.fromkeys([*comm.announced, *(g.op for g in comm.groups)]):
            groups = [g for g in comm.groups if g.op == op]
            counted = sum(g.nranks for g in groups) + missing
            partial = [g for g in groups if 0 < len(g.ranks) < g.nranks]  # `2 ranks have ...` and fewer Rank lines
            if counted < row.size or partial or sum(1 for g in groups if not g.ranks and g.nranks > 1) > 1:
                reasons.append(f"#{comm.group}-{comm.index} gives the {op or 'operation'} counts of its "
                               f"{row.size} ranks only in part")
                break
    if cut:
        reasons.append("its last line has no line break after it")
    return reasons


def infer_majority(comm: ReplyComm, size: int | None, missing: set[int], budget: int) -> int:
    """Fill in the members of the one unlisted count group of a collective type, when only one fits.

    NCCL lists the members of a group only when it is an outlier (section 2.6), so the majority line reads
    `3 ranks have launched up to operation 49`. With a 4-rank comm and rank 0 listed at 50, the 3 are 1, 2, 3.
    Ranks are built only within `budget` (see MAX_IMPLIED); returns how many were.
    """
    used = 0
    if size is None:
        return used
    for op in dict.fromkeys(g.op for g in comm.groups):
        groups = [g for g in comm.groups if g.op == op]
        unlisted = [g for g in groups if not g.ranks]
        if len(unlisted) != 1:
            continue
        known = {r for g in groups for r in g.ranks} | missing
        fits = size - sum(1 for r in known if 0 <= r < size)
        # Counted before the ranks are built: `size` may be in the millions (see MAX_IMPLIED).
        if fits == unlisted[0].nranks and fits <= budget - used:
            used += fits
            candidates = [r for r in range(size) if r not in known]
            unlisted[0].ranks.extend(candidates)
            for number in candidates:
                comm.rank(number).counts.setdefault(op or rc.SINGLE_COUNTER, unlisted[0].count)
    return used
