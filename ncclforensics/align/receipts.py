"""Receipts: where each piece of evidence behind an answer is, and what it holds, as facts (report/receipts.py words
them). One small frozen dataclass per kind of receipt; a `Finding` pairs one with its `file:line`."""

from __future__ import annotations

from dataclasses import dataclass

from ..model import Evidence, FingerprintRow, Location, WatchdogEvent
from .answers import OpAt
from .notes import Fact
from .ras import RasGone, RasHistory
from .watchdog import STOP_EVENTS

DEATH_WORDS = ("remote process exited", "remote process error", "connection closed by remote peer",
               "process exited", "remoteerror")


@dataclass(frozen=True)
class Receipt(Fact):
    """What one file:line holds; `kind` names the kind in `--json` (`root_op`, `wrong_checksum`, ...)."""


@dataclass(frozen=True)
class RootOp(Receipt):
    """A rank's collective at the root (`outlier` marks the ranks that departed)."""

    rank: int
    op: OpAt
    outlier: bool


@dataclass(frozen=True)
class RecorderState(Receipt):
    """The state a Flight Recorder dump gives a rank's collective at the root."""

    rank: int
    seq: int
    state: str | None


@dataclass(frozen=True)
class JournaledDecision(Receipt):
    """A rank's gate decision at the first step the journals disagree."""

    rank: int
    step: int
    decision: str


@dataclass(frozen=True)
class FirstVisible(Receipt):
    """A rank's collective at the first seq where the records visibly differ."""

    rank: int
    seq: int
    op: OpAt


@dataclass(frozen=True)
class WedgeOp(Receipt):
    """The last collective a rank launched in the wedged comm."""

    rank: int
    op: OpAt


@dataclass(frozen=True)
class CountedLaunches(Receipt):
    """PyTorch's count of the work a rank enqueued in the wedged comm, where its only records there are timeout
    lines (their SeqNums are floors of it)."""

    rank: int
    comm: str
    count: int


@dataclass(frozen=True)
class CountsPastRecords(Receipt):
    """PyTorch's counts of what a rank launched and completed in the wedged comm, past where its records there end
    (`records_at`, None where it has none)."""

    rank: int
    comm: str
    launched: int
    completed: int | None
    records_end: int
    records_at: Location | None


@dataclass(frozen=True)
class WedgeMark(Receipt):
    """A line that places the wedge in a comm without naming a collective of it (a timeout, RAS counts)."""

    comm: str


@dataclass(frozen=True)
class NoDesyncReport(Receipt):
    """A rank whose PyTorch could not build its desync report, so it names no culprit."""

    rank: int | None
    message: str


@dataclass(frozen=True)
class WatchdogStop(Receipt):
    """A watchdog line that a rank (or an unnamed process) stopped: a timeout, an abort, an exception."""

    rank: int | None
    event: str  # the watchdog event's kind: timeout, abort, ...
    seq: int | None
    op: str | None
    message: str


@dataclass(frozen=True)
class StepChecksumsSplit(Receipt):
    """The ranks' per-step checksums of one step differ (results mixed across ranks)."""

    step: int
    values: tuple[tuple[int, int | str | None], ...]  # (rank, checksum or digest)


@dataclass(frozen=True)
class WrongChecksum(Receipt):
    """A rank read back a result other than the one expected."""

    rank: int
    step: int | None
    got: int | float | None
    expected: int | float | None


@dataclass(frozen=True)
class RasCommState(Receipt):
    """One RAS reply's state of a comm (its errors, or its status)."""

    comm: str
    state: str


@dataclass(frozen=True)
class RasJobIssue(Receipt):
    """A RAS error about processes rather than comms, with how many more replies repeat it."""

    error: str  # RAS's name for it: DEAD, ...
    message: str
    pids: tuple[int, ...]
    repeats: int


@dataclass(frozen=True)
class RasRanksGone(Receipt):
    """Ranks RAS finds gone from a comm, each under the strongest word a reply gives: `dead` (RAS considers its
    process dead), `unresponsive` (unreachable, not called dead) or `missing` (its process answers but no longer
    reports the comm)."""

    comm: str
    ranks: tuple[int, ...]  # global ranks where known, else the comm ranks RAS gives
    status: RasGone


@dataclass(frozen=True)
class PeerDied(Receipt):
    """A rank's error that its peer process exited or closed the connection."""

    rank: int | None
    message: str


@dataclass(frozen=True)
class Finding:
    """One receipt: where a piece of evidence is, and what it holds."""

    loc: Location
    fact: Receipt


def death_receipts(ras: dict[str, RasHistory], rank_map: dict, watchdog: list[WatchdogEvent]) -> list[Finding]:
    """Receipts that a process is gone: RAS missing, unresponsive or dead ranks, peers' remote-process errors."""
    found: list[Finding] = []
    for comm, history in sorted(ras.items()):
        for status, ranks in history.gone_by_status():
            shown = tuple(rank_map.get((comm, r), r) for r in ranks)
            found.append(Finding(history.states[-1][1].loc, RasRanksGone(comm, shown, status)))
    for event in watchdog:
        if event.kind == "async_error" and any(w in event.message.lower() for w in DEATH_WORDS):
            found.append(Finding(event.loc, PeerDied(event.rank, event.message.strip())))
    return found


def answer_receipts(root, gate, first_visible: tuple[str, int] | None, first_visible_ops: dict[int, OpAt],
                    wedge, watchdog: list[WatchdogEvent], checksum_splits: dict[int, dict[int, FingerprintRow]],
                    corrupted_fingerprints: list[FingerprintRow], ras: dict[str, RasHistory],
                    counted: dict[tuple[str, int], tuple[int, Location]] | None = None) -> list[Finding]:
    """The receipts of an answer: the root's collectives, the gate's decisions, the first visible mismatch, the
    wedge (with the counts that give its ranks' launches past their timeout lines, `counted`: (comm, rank) ->
    (count, line)), the watchdog's stops, the checksums that part, and the RAS states."""
    found: list[Finding] = []
    if root is not None:
        for rank, op in sorted(root.ops.items()):
            found.append(Finding(op.loc, RootOp(rank, op, rank in root.outlier_ranks)))
            if op.fr_loc and op.fr_loc != op.loc:
                found.append(Finding(op.fr_loc, RecorderState(rank, op.seq, op.state)))
    if gate is not None:
        found += [Finding(d.loc, JournaledDecision(rank, d.step, d.decision)) for rank, d in gate.decisions.items()]
    if first_visible is not None:
        found += [Finding(op.loc, FirstVisible(rank, first_visible[1], op))
                  for rank, op in sorted(first_visible_ops.items())]
    if wedge is not None:
        found += [Finding(op.loc, WedgeOp(rank, op)) for rank, op in sorted({**wedge.ops, **wedge.waiting_past}.items())]
        found += [Finding(loc, CountedLaunches(rank, comm, count)) for (comm, rank), (count, loc)
                  in sorted((counted or {}).items()) if comm == wedge.comm]
        found += [Finding(c.at[0], CountsPastRecords(rank, wedge.comm, wedge.launched[rank], wedge.completed.get(rank),
                                                      c.records_launched if c.records_completed is None
                                                      else c.records_completed, c.records_at))
                  for rank, c in sorted(wedge.counted.items()) if c.at and (wedge.comm, rank) not in (counted or {})
                  and (wedge.launched.get(rank), wedge.completed.get(rank)) != (c.records_launched, c.records_completed)]
        shown = {f.loc for f in found}
        found += [Finding(loc, WedgeMark(wedge.comm)) for loc in wedge.evidence if loc not in shown]
    for event in watchdog:
        if event.kind == "desync_report_unavailable":
            found.append(Finding(event.loc, NoDesyncReport(event.rank, event.message.strip())))
        if event.kind in STOP_EVENTS:
            found.append(Finding(event.loc, WatchdogStop(event.rank, event.kind, event.seq, event.op,
                                                         event.message.strip())))
    for step, rows in list(checksum_splits.items())[:3]:
        values = tuple((r, row.sum if row.sum is not None else row.digest) for r, row in rows.items())
        found.append(Finding(next(iter(rows.values())).loc, StepChecksumsSplit(step, values)))
    found += [Finding(row.loc, WrongChecksum(row.rank, row.step, row.sum, row.expected_sum))
              for row in corrupted_fingerprints[:5]]
    for comm, history in ras.items():
        found += [Finding(block.loc, RasCommState(comm, ",".join(block.errors) or block.status or "OK"))
                  for _, block in history.states[:4]]
    return found


def job_ras_receipts(evidence: list[Evidence]) -> list[Finding]:
    """RAS errors about processes rather than communicators (`DEAD`: a process unreachable via RAS), which
    remain when a torn-down job leaves no communicator data; each once, with how many more replies repeat it."""
    first: dict[tuple, Location] = {}
    repeats: dict[tuple, int] = {}
    for item in evidence:
        for snapshot in item.ras:
            for issue in snapshot.issues:
                if issue.comm is None and not issue.warning:
                    key = (issue.kind, issue.message, tuple(issue.pids or ()))
                    first.setdefault(key, issue.loc)
                    repeats[key] = repeats.get(key, -1) + 1
    return [Finding(loc, RasJobIssue(kind, message, pids, repeats[(kind, message, pids)]))
            for (kind, message, pids), loc in first.items()]
