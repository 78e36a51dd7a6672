"""Speculative-decoding acceptance per run: per-position rates, conditional acceptance, and collapse.

A **run** is one input file (one server log, one `vllm bench serve` output). Its `SpecDecoding metrics` lines
each give a per-position acceptance vector `r[k] = accepted at position k / drafts` over a logging interval.

- `per_position[k]` is the mean of the lines' `r[k]`, weighted by the line's drafted tokens (lines with nothing
  drafted weigh nothing); when some line lacks `Drafted:` the mean is unweighted, and `weighted` says so.
- `mean_acceptance_length` is `1 + sum(per_position)` (vLLM's definition: one bonus token plus the accepted
  drafts per draft); for formats without per-position rates it is the weighted mean of the lines' own value.
- `conditional[0] = per_position[0]`; `conditional[k] = per_position[k] / per_position[k-1]` for k >= 1: the
  chance that draft token k is accepted given that token k-1 was (None when `per_position[k-1]` is 0).

A run is **collapsed** when

1. some later position (k >= 1) has `conditional[k] < threshold` (default 0.5): healthy drafters lose a little
   per position (0.90/0.79/0.67 is 0.90, 0.88, 0.85), a draft model fed the wrong context collapses
   (0.72/0.30/0.07 is 0.72, 0.42, 0.23: a draft run with the wrong decode-context-parallel size);
2. or, with a baseline run, some later position's conditional acceptance falls short of the baseline's by more
   than `baseline_margin` (default 0.10, absolute): 0.80 against a baseline of 0.88 is fine, 0.70 is not;
3. or nothing is accepted at all (`per_position[0] == 0` while tokens were drafted): the gate-zeroed drafts of
   vllm#58080 (0.000/0.000/0.000), where no conditional acceptance is defined.

A run is **low** when its overall acceptance rate (accepted / drafted tokens over the run, else the lines' own
acceptance rates) is below `low_rate` (default 0.3): the drafts mostly go to waste, whatever the positions do.
It is the one judgement for formats that give no per-position rates (vLLM V0's `Draft acceptance rate: 0.067`).
vLLM V0 counts since the server started (`cumulative` lines), so its overall rate is each process's last line,
not a sum over lines.

Averages can hide a collapse that started late in a long run, so each line is also judged alone by rules 1 and
3; `collapsed_lines` lists those lines (reported, not part of the verdict).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..model import Location, SpecDecodeMetrics


@dataclass(frozen=True)
class AcceptanceOptions:
    """How collapse is judged."""

    threshold: float = 0.5  # conditional acceptance below this at a later position is a collapse
    baseline_margin: float = 0.10  # shortfall against the baseline's conditional acceptance that is a collapse
    low_rate: float = 0.3  # overall acceptance below this is low


@dataclass
class RunAcceptance:
    """One run's acceptance, averaged over its metrics lines."""

    file: str
    lines: int
    processes: list[str]
    per_position: list[float | None]
    conditional: list[float | None]
    mean_acceptance_length: float | None
    accepted: int | None  # summed over lines (the last line per process where they count since start)
    drafted: int | None
    weighted: bool
    acceptance_rate: float | None = None  # accepted / drafted over the run, else the lines' own rates
    collapsed: bool = False
    reasons: list[str] = field(default_factory=list)
    low: bool = False
    notes: list[str] = field(default_factory=list)  # why the run is low
    collapsed_lines: list[Location] = field(default_factory=list)
    first: Location | None = None


@dataclass
class AcceptanceReport:
    """Every run, the baseline (if any) and the options they were judged with."""

    runs: list[RunAcceptance]
    options: AcceptanceOptions
    baseline: RunAcceptance | None = None

    @property
    def collapsed(self) -> list[RunAcceptance]:
        """The runs judged collapsed."""
        return [r for r in self.runs if r.collapsed]

    @property
    def flagged(self) -> list[RunAcceptance]:
        """The runs judged collapsed or low."""
        return [r for r in self.runs if r.collapsed or r.low]


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def run_acceptance(file: str, metrics: list[SpecDecodeMetrics]) -> RunAcceptance:
    """Average one run's lines (not yet judged: see `judge`)."""
    vectors = [m for m in metrics if m.per_position]
    weighted = bool(vectors) and all(m.drafted is not None for m in vectors)
    width = max((len(m.per_position) for m in vectors), default=0)
    per_position: list[float | None] = []
    for k in range(width):
        total = weight = 0.0
        for m in vectors:
            if k >= len(m.per_position) or not _finite(m.per_position[k]):
                continue
            w = float(m.drafted) if weighted else 1.0
            total += w * m.per_position[k]
            weight += w
        per_position.append(total / weight if weight > 0 else None)
    if per_position and all(p is not None for p in per_position):
        mean_length = 1.0 + sum(per_position)
    else:
        lengths = [(m.mean_acceptance_length, m.drafted) for m in metrics if _finite(m.mean_acceptance_length)]
        use_weights = lengths and all(d is not None for _, d in lengths) and sum(d for _, d in lengths) > 0
        if use_weights:
            mean_length = sum(v * d for v, d in lengths) / sum(d for _, d in lengths)
        else:
            mean_length = sum(v for v, _ in lengths) / len(lengths) if lengths else None
    counted = _counted(metrics)
    accepted = sum(m.accepted for m in counted) if counted and all(m.accepted is not None for m in counted) else None
    drafted = sum(m.drafted for m in counted) if counted and all(m.drafted is not None for m in counted) else None
    processes = sorted({m.process for m in metrics if m.process is not None})
    return RunAcceptance(
        file=file, lines=len(metrics), processes=processes, per_position=per_position,
        conditional=conditional(per_position), mean_acceptance_length=mean_length, accepted=accepted,
        drafted=drafted, weighted=weighted, acceptance_rate=_overall_rate(counted, accepted, drafted),
        first=metrics[0].loc if metrics else None,
    )


def _counted(metrics: list[SpecDecodeMetrics]) -> list[SpecDecodeMetrics]:
    """The lines whose counts add up to the run's: all of them, but only each process's last where the counts
    are totals since the server started (V0)."""
    last: dict[str | None, SpecDecodeMetrics] = {}
    interval = []
    for m in metrics:
        if m.cumulative:
            last[m.process] = m
        else:
            interval.append(m)
    return interval + list(last.values())


def _overall_rate(counted: list[SpecDecodeMetrics], accepted: int | None, drafted: int | None) -> float | None:
    """accepted / drafted; where a line lacks the counts, the lines' own rates (weighted by drafted tokens where
    every line gives them)."""
    if accepted is not None and drafted:
        return accepted / drafted
    rates = [(m.avg_acceptance_rate, m.drafted) for m in counted if _finite(m.avg_acceptance_rate)]
    if not rates:
        return None
    if all(d is not None for _, d in rates) and sum(d for _, d in rates) > 0:
        return sum(r * d for r, d in rates) / sum(d for _, d in rates)
    return sum(r for r, _ in rates) / len(rates)


def conditional(per_position: list[float | None]) -> list[float | None]:
    """`[r0, r1/r0, r2/r1, ...]`; None where the position before accepted nothing or is unknown."""
    out: list[float | None] = []
    for k, rate in enumerate(per_position):
        if k == 0:
            out.append(rate)
        else:
            before = per_position[k - 1]
            out.append(rate / before if rate is not None and before else None)
    return out


def collapse_reasons(per_position: list[float | None], cond: list[float | None], options: AcceptanceOptions,
                     baseline: list[float | None] | None = None, drafted: int | None = None) -> list[str]:
    """Why a vector is collapsed (empty: it is not), by the rules of the module docstring."""
    reasons = []
    if per_position and per_position[0] == 0 and (drafted is None or drafted > 0):
        reasons.append("no draft token accepted at position 0 (drafts zeroed or rejected outright, e.g. "
                       "vllm#58080)")
    for k in range(1, len(cond)):
        value = cond[k]
        if value is None:
            continue
        if value < options.threshold:
            reasons.append(f"conditional acceptance at position {k} is {value:.3f}, below the threshold "
                           f"{options.threshold:g}")
        if baseline is not None and k < len(baseline) and baseline[k] is not None and \
                value < baseline[k] - options.baseline_margin:
            reasons.append(f"conditional acceptance at position {k} is {value:.3f}, more than "
                           f"{options.baseline_margin:g} below the baseline's {baseline[k]:.3f}")
    return reasons


def judge(run: RunAcceptance, metrics: list[SpecDecodeMetrics], options: AcceptanceOptions,
          baseline: RunAcceptance | None) -> RunAcceptance:
    """Set `collapsed`, `reasons` and `collapsed_lines` of a run (returns the same object)."""
    run.reasons = collapse_reasons(run.per_position, run.conditional, options,
                                   baseline.conditional if baseline else None, run.drafted)
    run.collapsed = bool(run.reasons)
    rate = run.acceptance_rate
    run.low = rate is not None and rate < options.low_rate
    if run.low:
        basis = f"{run.accepted} of {run.drafted} drafted tokens accepted" if run.accepted is not None and \
            run.drafted else "the lines' own acceptance rates"
        run.notes = [f"overall acceptance {rate:.3f} ({basis}) is below {options.low_rate:g}: most drafts are rejected"]
    run.collapsed_lines = [
        m.loc for m in metrics
        if m.per_position and collapse_reasons(list(m.per_position), conditional(list(m.per_position)), options,
                                               None, m.drafted)
    ]
    return run


def acceptance(runs: list[tuple[str, list[SpecDecodeMetrics]]], options: AcceptanceOptions = AcceptanceOptions(),
               baseline: tuple[str, list[SpecDecodeMetrics]] | None = None) -> AcceptanceReport:
    """Average and judge every run; `baseline` is (name, its metrics lines), judged by the threshold alone."""
    base = None
    if baseline is not None:
        base = judge(run_acceptance(*baseline), baseline[1], options, None)
    judged = [judge(run_acceptance(name, metrics), metrics, options, base) for name, metrics in runs]
    return AcceptanceReport(runs=judged, options=options, baseline=base)
