"""Drafter-gate journals: where the ranks' decisions first disagree, and why (the cause of a divergence)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, replace

from ..model import GateChoice, GateDecision, Location
from .answers import Root


@dataclass(frozen=True)
class GateDisagreement:
    """The first step at which the ranks' drafter gates decided differently."""

    step: int
    decisions: dict[int, GateDecision]  # rank -> its decision at this step
    passed: list[int]
    skipped: list[int]
    outlier_ranks: list[int]  # the minority; empty when there is no majority (e.g. two ranks)
    ceiling_start: int | None  # max_model_len - spec_tokens + 1, where the journal gives both
    in_ceiling_window: bool | None
    pass_totals: dict[int, int]  # steps each rank passed, over the whole journal
    proposed_totals: dict[int, int]  # sum of proposed pass counts per rank, where journaled
    missing_ranks: list[int] = field(default_factory=list)  # journaled elsewhere but not at this step

    @property
    def locations(self) -> list[Location]:
        """Where each rank's decision at this step was read."""
        return [self.decisions[r].loc for r in sorted(self.decisions)]


def decision_tuple(d: GateDecision) -> dict:
    """The inputs of one decision: sequence length seen, proposed pass count, sched count, fits, md_none."""
    return {
        "decision": d.decision,
        "seq": d.seq,
        "proposed_pass_count": d.proposed_pass_count,
        "sched_count": d.sched_count,
        "fits": d.fits,
        "md_none": d.md_none,
    }


def ceiling_start(decisions: list[GateDecision]) -> int | None:
    """First sequence length inside the ceiling window, `max_model_len - spec_tokens + 1`, if journaled."""
    for d in decisions:
        if d.max_model_len is not None and d.spec_tokens is not None:
            return d.max_model_len - d.spec_tokens + 1
    return None


def by_step(gates: list[GateDecision]) -> dict[int, dict[int, GateDecision]]:
    """step -> rank -> decision (the last one journaled, if a rank journaled a step twice)."""
    table: dict[int, dict[int, GateDecision]] = defaultdict(dict)
    for d in gates:
        table[d.step][d.rank] = d
    return table


def first_gate_disagreement(gates: list[GateDecision], ranks: list[int] | None = None) -> GateDisagreement | None:
    """The first step where the journaled ranks (optionally only `ranks`) decided differently."""
    if ranks is not None:
        gates = [g for g in gates if g.rank in ranks]
    if not gates:
        return None
    table = by_step(gates)
    all_ranks = sorted({g.rank for g in gates})
    pass_totals = {r: 0 for r in all_ranks}
    proposed: dict[int, int] = {}
    for d in gates:
        if d.decision == GateChoice.PASS.value:
            pass_totals[d.rank] += 1
        if d.proposed_pass_count is not None:
            proposed[d.rank] = proposed.get(d.rank, 0) + d.proposed_pass_count
    for step in sorted(table):
        decisions = table[step]
        choices = {d.decision for d in decisions.values()}
        if len(choices) < 2:
            continue
        passed = sorted(r for r, d in decisions.items() if d.decision == GateChoice.PASS.value)
        skipped = sorted(r for r, d in decisions.items() if d.decision != GateChoice.PASS.value)
        if len(passed) < len(skipped):
            outliers = passed
        elif len(skipped) < len(passed):
            outliers = skipped
        else:
            outliers = []
        start = ceiling_start(gates)
        seqs = [d.seq for d in decisions.values() if d.seq is not None]
        inside = None if start is None or not seqs else max(seqs) >= start
        return GateDisagreement(
            step=step, decisions=dict(sorted(decisions.items())), passed=passed, skipped=skipped,
            outlier_ranks=outliers, ceiling_start=start, in_ceiling_window=inside,
            pass_totals=pass_totals, proposed_totals=proposed,
            missing_ranks=[r for r in all_ranks if r not in decisions],
        )
    return None


def tie_resolved_by_gate(root: Root, gate: GateDisagreement | None) -> Root:
    """With no majority (a two-rank comm, an even split), the gate journal can say which side deviated: the minority of all
    journaled ranks, or, when the journal has no majority either, the side whose gate passed (it ran the
    drafter's collectives the other side skipped). Otherwise, and where some rank of the tie has no decision at
    that step (it may side with either, and make either the minority), both sides stay named."""
    if root.majority or gate is None or not set(root.outlier_ranks) <= set(gate.decisions):
        return root
    in_comm = set(root.outlier_ranks)
    deviants = set(gate.outlier_ranks) & in_comm
    if not deviants and set(gate.skipped) & in_comm:
        deviants = set(gate.passed) & in_comm
    if deviants and deviants != in_comm:
        # The gate names the side that deviated: the rest is the reference, and the issue orders' two readings give
        # way to it. A two-rank tie keeps no majority (one rank against one, whatever the journal says).
        return replace(root, outlier_ranks=sorted(deviants), reference_ranks=sorted(in_comm - deviants),
                       majority=len(in_comm) > 2, issue_sides=None)
    return root
