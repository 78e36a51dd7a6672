"""Gate coverage over many sessions: was the drafter gate's jurisdiction (the ceiling window) exercised at all?

A soak run is hundreds of sessions. A **session** is one set of per-rank journal streams that belong together:

- the decisions of one folder (the folder that holds the journal file) belong to one session;
- within a folder, each rank's decisions are read in file-name order and then line order; where that rank's
  step counter goes *down* (step < the step before it) a new session begins. So a folder whose files each hold
  three runs appended one after another (the journal writer appends) holds three sessions, and the k-th run of
  rank 0 is paired with the k-th run of every other rank of that folder. A step journaled twice in a row (the
  same step again) is a duplicate, not a restart: the later line wins, as in `gates.by_step`.

Worked example: `soak/s007/gate_rank0.jsonl` with steps 0..63 then 0..40 and `soak/s007/gate_rank1.jsonl` with
the same shape give two sessions, `soak/s007 #1` (steps 0..63, ranks 0 and 1) and `soak/s007 #2` (steps 0..40).

The **ceiling window** is where vLLM's `_input_fits_in_drafter` turns false: the sequence length a rank saw is
at least `max_model_len - spec_tokens + 1` (`max_seq_len + num_spec_tokens <= max_model_len` fails). Ranks can
only disagree there, so a soak run whose steps never reach it has not tested the gate at all. A step is inside
the window when any rank saw a sequence length inside it. A session whose journal lacks `max_model_len` or
`spec_tokens` (or every `seq`) has an unknown window, and is said to be so rather than counted as not exercised.
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass, field
from enum import Enum

from ..model import GateChoice, GateDecision, Location
from .gates import GateDisagreement, by_step, ceiling_start, first_gate_disagreement


_PASS = GateChoice.PASS.value


class Jurisdiction(str, Enum):
    """Whether a soak run exercised the gate's jurisdiction (the ceiling window)."""

    EXERCISED = "exercised"  # at least one step reached the ceiling window
    NOT_EXERCISED = "not_exercised"  # the window is known and no step reached it
    WINDOW_UNKNOWN = "window_unknown"  # no session journals max_model_len, spec_tokens and seq
    NO_JOURNALS = "no_journals"  # no gate decision in the inputs

    @property
    def label(self) -> str:
        """`NOT EXERCISED` style, for reports."""
        return self.value.replace("_", " ").upper()


@dataclass
class RankTally:
    """One rank's decisions in one session (or over all sessions)."""

    steps: int = 0
    passes: int = 0
    skips: int = 0
    in_window: int = 0  # steps at which this rank saw a sequence length inside the ceiling window
    proposed_pass_total: int | None = None  # sum of proposed_pass_count, where journaled

    @property
    def would_pass(self) -> int:
        """Steps at which this rank's gate said `pass` (would run the drafter and its collectives)."""
        return self.passes

    def add(self, other: RankTally) -> None:
        """Accumulate another tally into this one."""
        self.steps += other.steps
        self.passes += other.passes
        self.skips += other.skips
        self.in_window += other.in_window
        if other.proposed_pass_total is not None:
            self.proposed_pass_total = (self.proposed_pass_total or 0) + other.proposed_pass_total


@dataclass
class SessionCoverage:
    """What one session's journals say about the gate."""

    name: str  # `folder` or `folder #k` when the folder holds several sessions
    folder: str
    index: int  # 0-based session number within the folder
    ranks: list[int]
    steps: int  # distinct steps any rank journaled
    first_step: int
    last_step: int
    ceiling_start: int | None  # max_model_len - spec_tokens + 1, where journaled
    max_seq: int | None  # largest sequence length any rank saw
    steps_in_window: int | None  # None: the window is unknown for this session
    first_step_in_window: int | None
    tallies: dict[int, RankTally]
    disagreeing_steps: int  # steps at which the ranks that journaled them decided differently
    missing_steps: dict[int, int]  # rank -> steps some other rank journaled and it did not (only ranks with any)
    disagreement: GateDisagreement | None = None  # the first one
    first_location: Location | None = None

    @property
    def exercised(self) -> bool | None:
        """True when a step reached the ceiling window; None when the window is unknown."""
        return None if self.steps_in_window is None else self.steps_in_window > 0

    @property
    def headroom(self) -> int | None:
        """How far below the window the largest sequence length stayed (negative or zero: it got inside)."""
        if self.ceiling_start is None or self.max_seq is None:
            return None
        return self.ceiling_start - self.max_seq

    @property
    def lockstep(self) -> bool:
        """Every rank journaled the same steps and decided the same at each (skip counts equal, step by step)."""
        return self.disagreeing_steps == 0 and not self.missing_steps


@dataclass
class GateCoverage:
    """Gate coverage over every session of a soak run."""

    verdict: Jurisdiction
    sessions: list[SessionCoverage] = field(default_factory=list)
    ranks: list[int] = field(default_factory=list)
    totals: dict[int, RankTally] = field(default_factory=dict)  # per rank, over all sessions

    @property
    def steps(self) -> int:
        """Distinct (session, step) pairs."""
        return sum(s.steps for s in self.sessions)

    @property
    def steps_in_window(self) -> int:
        """Steps inside the ceiling window, over sessions whose window is known."""
        return sum(s.steps_in_window or 0 for s in self.sessions)

    @property
    def exercised_sessions(self) -> list[SessionCoverage]:
        """Sessions with at least one step inside the ceiling window."""
        return [s for s in self.sessions if s.exercised]

    @property
    def unknown_sessions(self) -> list[SessionCoverage]:
        """Sessions whose ceiling window is unknown."""
        return [s for s in self.sessions if s.exercised is None]

    @property
    def disagreeing_sessions(self) -> list[SessionCoverage]:
        """Sessions in which the ranks' gates disagreed at some step."""
        return [s for s in self.sessions if s.disagreement is not None]

    @property
    def lockstep_sessions(self) -> list[SessionCoverage]:
        """Sessions whose ranks decided in lockstep throughout."""
        return [s for s in self.sessions if s.lockstep]


def session_streams(decisions: list[GateDecision]) -> dict[tuple[str, int], list[GateDecision]]:
    """(folder, session index) -> the session's decisions, split as the module docstring defines."""
    per_rank: dict[tuple[str, int], list[GateDecision]] = defaultdict(list)
    folders: dict[str, str] = {}
    for d in sorted(decisions, key=lambda d: (d.loc.path, d.loc.line or 0, d.loc.record or 0)):
        folder = folders.get(d.loc.path)
        if folder is None:
            folder = folders[d.loc.path] = os.path.dirname(d.loc.path) or "."
        per_rank[(folder, d.rank)].append(d)
    sessions: dict[tuple[str, int], list[GateDecision]] = defaultdict(list)
    for (folder, _rank), stream in per_rank.items():
        index, previous = 0, None
        for d in stream:
            if previous is not None and d.step < previous:
                index += 1
            previous = d.step
            sessions[(folder, index)].append(d)
    return dict(sorted(sessions.items()))


def session_coverage(folder: str, index: int, decisions: list[GateDecision], name: str) -> SessionCoverage:
    """Coverage of one session's decisions."""
    table = by_step(decisions)
    ranks = sorted({d.rank for d in decisions})
    start = ceiling_start(decisions)
    seqs = [d.seq for d in decisions if d.seq is not None]
    tallies = {r: RankTally() for r in ranks}
    in_window_steps: list[int] = []
    disagreeing = 0
    missing: dict[int, int] = {}
    for step in sorted(table):
        row = table[step]
        if len({d.decision for d in row.values()}) > 1:
            disagreeing += 1
        for rank in ranks:
            if rank not in row:
                missing[rank] = missing.get(rank, 0) + 1
        inside_any = False
        for rank, d in row.items():
            tally = tallies[rank]
            tally.steps += 1
            if d.decision == _PASS:
                tally.passes += 1
            else:
                tally.skips += 1
            if d.proposed_pass_count is not None:
                tally.proposed_pass_total = (tally.proposed_pass_total or 0) + d.proposed_pass_count
            limit = _own_ceiling(d, start)
            if limit is not None and d.seq is not None and d.seq >= limit:
                tally.in_window += 1
                inside_any = True
        if inside_any:
            in_window_steps.append(step)
    known = start is not None and bool(seqs)
    first = min(decisions, key=lambda d: (d.loc.path, d.loc.line or 0))
    return SessionCoverage(
        name=name, folder=folder, index=index, ranks=ranks, steps=len(table),
        first_step=min(table), last_step=max(table), ceiling_start=start, max_seq=max(seqs) if seqs else None,
        steps_in_window=len(in_window_steps) if known else None,
        first_step_in_window=in_window_steps[0] if in_window_steps else None,
        tallies=tallies, disagreeing_steps=disagreeing, missing_steps=missing,
        disagreement=first_gate_disagreement(decisions) if disagreeing else None, first_location=first.loc,
    )


def _own_ceiling(d: GateDecision, session_start: int | None) -> int | None:
    if d.max_model_len is not None and d.spec_tokens is not None:
        return d.max_model_len - d.spec_tokens + 1
    return session_start


def gate_coverage(decisions: list[GateDecision]) -> GateCoverage:
    """Split the decisions into sessions and say, per session and overall, whether the gate was exercised."""
    streams = session_streams(decisions)
    per_folder = defaultdict(int)
    for folder, _ in streams:
        per_folder[folder] += 1
    sessions = [
        session_coverage(folder, index, items, folder if per_folder[folder] == 1 else f"{folder} #{index + 1}")
        for (folder, index), items in streams.items()
    ]
    ranks = sorted({d.rank for d in decisions})
    totals = {r: RankTally() for r in ranks}
    for session in sessions:
        for rank, tally in session.tallies.items():
            totals[rank].add(tally)
    if not sessions:
        verdict = Jurisdiction.NO_JOURNALS
    elif any(s.exercised for s in sessions):
        verdict = Jurisdiction.EXERCISED
    elif all(s.exercised is None for s in sessions):
        verdict = Jurisdiction.WINDOW_UNKNOWN
    else:
        verdict = Jurisdiction.NOT_EXERCISED
    return GateCoverage(verdict=verdict, sessions=sessions, ranks=ranks, totals=totals)


def steps_near_ceiling(decisions: list[GateDecision], around: int | None, limit: int = 120) -> list[GateDecision]:
    """At most `limit` consecutive steps of the journal, for a plot: those around step `around` (the
    disagreement), else those leading into the ceiling window, else the last ones."""
    steps = sorted({d.step for d in decisions})
    if len(steps) <= limit:
        return list(decisions)
    if around is None:
        start = ceiling_start(decisions)
        inside = sorted(d.step for d in decisions if start is not None and d.seq is not None and d.seq >= start)
        around = inside[0] if inside else steps[-1]
    position = min(range(len(steps)), key=lambda i: abs(steps[i] - around))
    low = max(0, min(position - limit * 2 // 3, len(steps) - limit))
    keep = set(steps[low:low + limit])
    return [d for d in decisions if d.step in keep]
