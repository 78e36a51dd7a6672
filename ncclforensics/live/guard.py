"""An in-process consensus on the drafter gate, called by a serving loop before any drafter collective.

Why: each tensor-parallel rank decides on its own whether the drafter runs this step
(`input_fits_in_drafter`, vLLM `gpu_model_runner.py`). Near `max_model_len` a one-token difference makes one rank
launch the drafter's collectives while the others skip them; NCCL then pairs collectives that do not belong
together and the group wedges or silently corrupts. The guard all-gathers one small int64 vector per rank,
`(step, proposed_pass_count, sched_count, fits, md_none)`, and every rank applies the same rule to the same data:

- adopt the MAX proposed pass count: a {0, N} split becomes N, every rank runs the drafter (safe, because the
  drafter clamps positions past the window);
- degenerate states converge to every rank skipping: a rank without attention metadata (`md_none`), a split in
  the scheduled count, or ranks at different steps (a step mismatch is itself a disagreement).

It runs on its **own** gloo group (`dist.new_group(ranks, backend="gloo")`), never the framework's CPU group: a
second user of a group can interleave mismatched ops (vllm#48720). One all-gather per step, on preallocated
tensors, no barrier. It never blocks past `timeout`: gloo enforces the group timeout on every op. Modes:

- `off`: no communication; the local decision (journaled if a journal is given);
- `observe`: communicate and journal every rank's tuple and what enforce would do, keep the local decision; on a
  timeout, journal it and stop communicating (serving goes on with local decisions);
- `enforce`: adopt the consensus; on a timeout raise LiveError (the drafter must not run unagreed).

Every rank of the default group must construct the guard at the same point (`new_group` is collective), with
the same mode.
"""

from __future__ import annotations

import logging
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from datetime import timedelta
from enum import Enum
from typing import Any
from collections.abc import Sequence

from ..errors import LiveError, require
from .journal_writer import JournalWriter, gate_record

log = logging.getLogger("ncclforensics.live")

LOG_EVERY_S = 10.0  # at most one disagreement warning per this many seconds (all are journaled and counted)
FIELDS = ("step", "proposed_pass_count", "sched_count", "fits", "md_none")
_STEP, _PPC, _SCHED, _FITS, _MD_NONE = range(len(FIELDS))


class GuardMode(str, Enum):
    """How much the guard does."""

    OFF = "off"
    OBSERVE = "observe"
    ENFORCE = "enforce"


class Degenerate(str, Enum):
    """Why the consensus is `skip` whatever the votes say."""

    STEP_MISMATCH = "step_mismatch"
    MD_NONE = "md_none"
    SCHED_SPLIT = "sched_split"


@dataclass(frozen=True, slots=True)
class Consensus:
    """What the rule makes of every rank's vote: the adopted pass count, and why it is 0 when degenerate."""

    pass_count: int
    degenerate: Degenerate | None = None

    @property
    def decision(self) -> str:
        """`pass` when the drafter runs on every rank, else `skip`."""
        return "pass" if self.pass_count > 0 else "skip"


@dataclass(frozen=True, slots=True)
class GuardDecision:
    """The guard's answer for one step on this rank."""

    step: int
    decision: str  # what this rank does: "pass" (run the drafter) or "skip"
    local_decision: str  # what this rank's own gate said
    consensus: str | None = None  # what the rule says (None: no exchange, mode off or stopped)
    would_pass_total: int | None = None  # the pass count enforce adopts
    agreed: bool | None = None  # every rank at this step with the same local decision (None: unknown)
    outlier_ranks: tuple[int, ...] = ()  # the minority (all differing ranks when there is no majority)
    degenerate: str | None = None  # Degenerate value when the consensus was forced to skip
    peers: dict[int, tuple[int, ...]] = field(default_factory=dict)  # global rank -> its vote (FIELDS order)
    error: str | None = None  # the exchange failed (observe went on locally)

    @property
    def run_drafter(self) -> bool:
        """True when this rank must launch the drafter's collectives."""
        return self.decision == "pass"


def local_pass(fits: bool, md_none: bool, proposed_pass_count: int) -> bool:
    """The gate as one rank sees it: metadata present, the input fits, and something to propose."""
    return bool(fits) and not md_none and proposed_pass_count > 0


def consensus(votes: Sequence[Sequence[int]]) -> Consensus:
    """The rule every rank applies to the same gathered votes (rows in FIELDS order).

    >>> consensus([(7, 0, 4, 0, 0), (7, 4, 4, 1, 0)]).decision   # {0, N}: adopt the max, everyone runs
    'pass'
    >>> consensus([(7, 4, 4, 1, 0), (7, 4, 3, 1, 0)]).degenerate   # scheduled counts split: everyone skips
    <Degenerate.SCHED_SPLIT: 'sched_split'>
    """
    if len({v[_STEP] for v in votes}) > 1:
        return Consensus(0, Degenerate.STEP_MISMATCH)
    if any(v[_MD_NONE] for v in votes):
        return Consensus(0, Degenerate.MD_NONE)
    if len({v[_SCHED] for v in votes}) > 1:
        return Consensus(0, Degenerate.SCHED_SPLIT)
    return Consensus(max(v[_PPC] for v in votes))


def minority(labels: dict[int, Any]) -> tuple[int, ...]:
    """Ranks whose label is not the most common one; every rank when no label has a strict plurality.

    No rank is the reference: with a 2/2 split nobody can say who is right, so all four are named.
    """
    counts: dict[Any, int] = {}
    for label in labels.values():
        counts[label] = counts.get(label, 0) + 1
    if len(counts) <= 1:
        return ()
    ranked = sorted(counts.values(), reverse=True)
    if ranked[0] == ranked[1]:
        return tuple(sorted(labels))
    top = max(counts, key=counts.__getitem__)
    return tuple(sorted(r for r, label in labels.items() if label != top))


class GateConsensusGuard:
    """Call `decide(step, fits=...)` on every rank before the drafter's collectives; obey `.run_drafter`.

    Example (inside a decode loop, after `dist.init_process_group`):

        guard = GateConsensusGuard(ranks=tp_ranks, mode="enforce", timeout=10, journal_path=f"gate_rank{rank}.jsonl")
        verdict = guard.decide(step, fits=input_fits_in_drafter, sched_count=num_reqs, md_none=md is None, seq=seq)
        if verdict.run_drafter:
            propose_draft_token_ids(...)
    """

    def __init__(
        self,
        ranks: Sequence[int] | None = None,
        mode: GuardMode | str = GuardMode.OBSERVE,
        timeout: float = 10.0,
        journal_path: str | None = None,
        *,
        group: Any = None,
        max_model_len: int | None = None,
        spec_tokens: int | None = None,
        keep_disagreements: int = 100,
    ) -> None:
        self.mode = GuardMode(mode)
        self.timeout = float(timeout)
        self.max_model_len = max_model_len
        self.spec_tokens = spec_tokens
        self.journal = JournalWriter(journal_path) if journal_path else None
        self.disagreement_count = 0
        self.disagreements: deque[GuardDecision] = deque(maxlen=keep_disagreements)
        self.stopped: str | None = None  # why communication stopped (observe after a timeout)
        self._last_log = -LOG_EVERY_S
        self._group = None
        self.rank = 0
        self.ranks: tuple[int, ...] = tuple(ranks) if ranks is not None else ()
        if self.mode is GuardMode.OFF:
            self._set_rank_without_group()
            return
        torch = require("torch", "live")
        dist = torch.distributed
        if not dist.is_available() or not dist.is_initialized():
            raise LiveError("the gate guard needs torch.distributed initialised (dist.init_process_group) first")
        if not self.ranks:
            self.ranks = tuple(range(dist.get_world_size()))
        # A dedicated gloo group: never the framework's cpu_group (a second user could interleave ops on it).
        self._group = group if group is not None else dist.new_group(
            list(self.ranks), backend="gloo", timeout=timedelta(seconds=self.timeout))
        self.rank = dist.get_rank()
        world = len(self.ranks)
        self._in = torch.zeros(len(FIELDS), dtype=torch.int64)
        self._out = torch.zeros(world * len(FIELDS), dtype=torch.int64)
        # all_gather_single (torch 2.12+) is all_gather_into_tensor renamed; one call, no per-rank output list.
        self._all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        self._in_np = self._in.numpy()  # shares memory: filling it fills the tensor without per-element dispatch
        self._out_np = self._out.numpy().reshape(world, len(FIELDS))

    def _set_rank_without_group(self) -> None:
        dist = sys.modules.get("torch.distributed")  # the rank, when torch is already there; never import it
        if dist is not None and dist.is_available() and dist.is_initialized():
            self.rank = dist.get_rank()
            if not self.ranks:
                self.ranks = tuple(range(dist.get_world_size()))

    def decide(
        self,
        step: int,
        *,
        fits: bool,
        sched_count: int = 1,
        proposed_pass_count: int | None = None,
        md_none: bool = False,
        seq: int | None = None,
    ) -> GuardDecision:
        """This rank's gate for `step` in, the decision every rank will take out (or the local one, by mode)."""
        if proposed_pass_count is None:
            proposed_pass_count = sched_count if fits and not md_none else 0
        mine = local_pass(fits, md_none, proposed_pass_count)
        local = "pass" if mine else "skip"
        if self.stopped and self.mode is GuardMode.ENFORCE:
            raise LiveError(f"gate consensus guard (rank {self.rank}), step {step}: stopped after an earlier failure "
                            f"({self.stopped})", hint="enforce never launches the drafter unagreed")
        if self.mode is GuardMode.OFF or self.stopped:
            verdict = GuardDecision(step, local, local, error=self.stopped)
        else:
            try:
                verdict = self._exchange(step, local, (step, proposed_pass_count, sched_count, int(bool(fits)),
                                                      int(bool(md_none))))
            except LiveError:
                if self.journal is not None:  # the evidence: this rank skipped the drafter, and why
                    failed = GuardDecision(step, "skip", local, error=self.stopped)
                    self._journal(self.journal, failed, seq, proposed_pass_count, sched_count, fits, md_none)
                raise
        if self.journal is not None:
            self._journal(self.journal, verdict, seq, proposed_pass_count, sched_count, fits, md_none)
        return verdict

    def _exchange(self, step: int, local: str, vote: tuple[int, ...]) -> GuardDecision:
        self._in_np[:] = vote
        try:
            self._all_gather(self._out, self._in, group=self._group)
        except RuntimeError as e:  # gloo: timeout, or a peer's connection closed
            reason = f"step {step}: the gate exchange failed within {self.timeout:g}s: {_first_line(e)}"
            if self.mode is GuardMode.ENFORCE:
                self.stopped = reason
                raise LiveError(f"gate consensus guard (rank {self.rank}), {reason}",
                                hint="a rank is stuck, dead or not calling the guard; the drafter was not launched "
                                     "on this rank") from e
            self.stopped = reason
            log.warning("gate guard (rank %d): %s; going on with local decisions, no more exchanges",
                        self.rank, reason)
            return GuardDecision(step, local, local, error=reason)
        rows = self._out_np.tolist()
        votes = {rank: tuple(row) for rank, row in zip(self.ranks, rows)}
        rule = consensus(rows)
        steps = {r: v[_STEP] for r, v in votes.items()}
        locals_ = {r: local_pass(bool(v[_FITS]), bool(v[_MD_NONE]), v[_PPC]) for r, v in votes.items()}
        agreed = len(set(steps.values())) == 1 and len(set(locals_.values())) == 1
        outliers: tuple[int, ...] = ()
        if not agreed:
            outliers = minority(steps) if len(set(steps.values())) > 1 else minority(locals_)
        decision = rule.decision if self.mode is GuardMode.ENFORCE else local
        verdict = GuardDecision(
            step, decision, local, consensus=rule.decision, would_pass_total=rule.pass_count, agreed=agreed,
            outlier_ranks=outliers, degenerate=rule.degenerate.value if rule.degenerate else None, peers=votes)
        if not agreed:
            self.disagreement_count += 1
            self.disagreements.append(verdict)
            now = time.monotonic()
            if now - self._last_log >= LOG_EVERY_S:  # a flapping gate must not flood the serving log
                log.warning("gate guard (rank %d): step %d: ranks disagree (outliers %s); consensus %s, this rank "
                            "%s (%d disagreements so far)", self.rank, step, list(outliers), rule.decision, decision,
                            self.disagreement_count)
                self._last_log = now
        return verdict

    def _journal(self, journal: JournalWriter, verdict: GuardDecision, seq: int | None, ppc: int, sched: int,
                 fits: bool, md_none: bool) -> None:
        extra: dict[str, Any] = {"local_decision": verdict.local_decision}
        if verdict.consensus is not None:
            extra["consensus"] = verdict.consensus
            extra["peers"] = {str(r): list(v) for r, v in verdict.peers.items()}
            extra["would_pass_total"] = verdict.would_pass_total
            extra["agreed"] = verdict.agreed
            if verdict.outlier_ranks:
                extra["outlier_ranks"] = list(verdict.outlier_ranks)
            if verdict.degenerate:
                extra["degenerate"] = verdict.degenerate
        if verdict.error:
            extra["guard_error"] = verdict.error
        journal.write(gate_record(
            verdict.step, self.rank, verdict.decision, seq=seq, proposed_pass_count=ppc, sched_count=sched,
            fits=bool(fits), md_none=bool(md_none), max_model_len=self.max_model_len, spec_tokens=self.spec_tokens,
            mode=self.mode.value, time=time.time(), **extra))

    def close(self) -> None:
        """Close the journal. The gloo group is left to the process group teardown."""
        if self.journal is not None:
            self.journal.close()


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0][:300] if text else type(error).__name__
