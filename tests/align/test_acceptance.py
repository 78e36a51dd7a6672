"""Spec-decode acceptance per run, on vLLM log lines of every format (peers_and_vllm.md §1.4).

Lines are built with vLLM's own format strings (and its logger prefix), written to files and read back through
the real parser; the public pastes under tests/fixtures/public/vllm_specdecode are read as they are.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from ncclforensics import api
from ncclforensics.align.acceptance import AcceptanceOptions, conditional
from ncclforensics.cli import cli
from ncclforensics.report import plots
from fixture_paths import FIXTURES

PUBLIC = FIXTURES / "public" / "vllm_specdecode"
PREFIX = "(EngineCore_DP0 pid=4242) INFO 07-27 22:00:12 [metrics.py:121] "


def v0(rate: float, accepted: int, drafted: int) -> str:
    """≤0.9.2 V0 engine, `vllm/engine/metrics.py`."""
    return (f"INFO 02-06 03:05:53 metrics.py:457] Speculative metrics: Draft acceptance rate: {rate:.3f}, System "
            f"efficiency: {0.5:.3f}, Number of speculative tokens: {3}, Number of accepted tokens: {accepted}, Number of draft "
            f"tokens: {drafted}, Number of emitted tokens: {accepted + 10}.")


def v083(accepted: int, drafted: int) -> str:
    """0.8.3-0.8.4."""
    return PREFIX + "SpecDecoding metrics: Draft acceptance rate: %.1f%%, Accepted: %d tokens, Drafted: %d tokens" % (
        100 * accepted / drafted, accepted, drafted)


def v085(rates: list[float], drafts: int) -> str:
    """0.8.5-0.10.1."""
    accepted = round(sum(rates) * drafts)
    drafted = drafts * len(rates)
    return PREFIX + ("SpecDecoding metrics: Draft acceptance rate: %.1f%%, Mean acceptance length: %.2f, Accepted: "
                     "%d tokens, Drafted: %d tokens, Per-position acceptance rate: %s") % (
        100 * accepted / drafted, 1 + accepted / drafts, accepted, drafted, ", ".join(f"{r:.3f}" for r in rates))


def v0102(rates: list[float], drafts: int, pid: int = 4242) -> str:
    """0.10.2-0.33.0."""
    accepted = round(sum(rates) * drafts)
    drafted = drafts * len(rates)
    prefix = PREFIX.replace("4242", str(pid))
    return prefix + ("SpecDecoding metrics: Mean acceptance length: %.2f, Accepted throughput: %.2f tokens/s, "
                     "Drafted throughput: %.2f tokens/s, Accepted: %d tokens, Drafted: %d tokens, Per-position "
                     "acceptance rate: %s, Avg Draft acceptance rate: %.1f%%") % (
        1 + accepted / drafts, accepted / 10, drafted / 10, accepted, drafted,
        ", ".join(f"{r:.3f}" for r in rates), 100 * accepted / drafted)


def bench(rates: list[float], drafts: int) -> str:
    """`vllm bench serve` block, `"{:<40} {:<10.2f}"`."""
    accepted = round(sum(rates) * drafts)
    rows = ["{s:{c}^{n}}".format(s="Speculative Decoding", n=50, c="-"),
            "{:<40} {:<10.2f}".format("Acceptance rate (%):", 100 * accepted / (drafts * len(rates))),
            "{:<40} {:<10.2f}".format("Acceptance length:", 1 + accepted / drafts),
            "{:<40} {:<10}".format("Drafts:", drafts),
            "{:<40} {:<10}".format("Draft tokens:", drafts * len(rates)),
            "{:<40} {:<10}".format("Accepted tokens:", accepted),
            "Per-position acceptance (%):"]
    rows += ["{:<40} {:<10.2f}".format(f"  Position {i}:", 100 * r) for i, r in enumerate(rates)]
    return "\n".join(rows + ["=" * 50])


HEALTHY = [0.90, 0.79, 0.67]
COLLAPSED = [0.72, 0.30, 0.07]  # a draft model run with the wrong decode-context-parallel size


def write(tmp_path: Path, name: str, lines: list[str]) -> str:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def run_of(report, path: str):
    (run,) = [r for r in report.runs if r.file == path]
    return run


def test_real_example_collapse_and_fix(tmp_path):
    before = write(tmp_path, "dcp-wrong.log", [v0102(COLLAPSED, 100)] * 3)
    after = write(tmp_path, "dcp-fixed.log", [v0102(HEALTHY, 100)] * 3)
    parsed, report = api.acceptance_paths([before, after])
    assert not parsed.all_problems
    bad, good = run_of(report, before), run_of(report, after)
    assert bad.lines == good.lines == 3
    assert bad.per_position == pytest.approx(COLLAPSED)
    assert good.per_position == pytest.approx(HEALTHY)
    assert bad.conditional == pytest.approx([0.72, 0.30 / 0.72, 0.07 / 0.30])
    assert good.conditional == pytest.approx([0.90, 0.79 / 0.90, 0.67 / 0.79])
    assert bad.collapsed and not good.collapsed
    assert any("position 1" in r and "below the threshold 0.5" in r for r in bad.reasons)
    assert bad.mean_acceptance_length == pytest.approx(1 + sum(COLLAPSED))
    assert good.mean_acceptance_length == pytest.approx(1 + sum(HEALTHY))
    assert bad.processes == ["4242"]
    assert len(bad.collapsed_lines) == 3 and not good.collapsed_lines


def test_threshold_and_baseline_margin(tmp_path):
    middling = write(tmp_path, "middling.log", [v0102([0.9, 0.7, 0.5], 200)])
    base = write(tmp_path, "base.log", [v0102([0.9, 0.85, 0.8], 200)])
    _, report = api.acceptance_paths([middling])
    assert not report.runs[0].collapsed  # conditional 0.9, 0.78, 0.71: all above 0.5
    _, report = api.acceptance_paths([middling], baseline=base)
    run = report.runs[0]
    assert report.baseline.conditional == pytest.approx([0.9, 0.85 / 0.9, 0.8 / 0.85])
    assert run.collapsed
    assert any("more than 0.1 below the baseline's 0.944" in r for r in run.reasons)
    _, report = api.acceptance_paths([middling], baseline=base, options=AcceptanceOptions(baseline_margin=0.3))
    assert not report.runs[0].collapsed
    _, report = api.acceptance_paths([middling], options=AcceptanceOptions(threshold=0.75))
    assert report.runs[0].collapsed  # 0.714 at position 2 is below 0.75


def test_weighted_by_drafted_tokens(tmp_path):
    # 300 drafts at 0.9/0.6 and 100 drafts at 0.5/0.2: weighted 0.8/0.5 (unweighted would be 0.7/0.4).
    path = write(tmp_path, "mixed.log", [v085([0.9, 0.6], 300), v085([0.5, 0.2], 100)])
    _, report = api.acceptance_paths([path])
    run = report.runs[0]
    assert run.weighted
    assert run.per_position == pytest.approx([0.8, 0.5])
    assert run.conditional == pytest.approx([0.8, 0.625])
    assert run.drafted == 800 and run.accepted == round(1.5 * 300) + round(0.7 * 100)
    assert not run.collapsed
    assert [str(loc) for loc in run.collapsed_lines] == [f"{path}:2"]  # 0.2 / 0.5 = 0.4 on its own


def test_formats_without_per_position_and_bench(tmp_path):
    old = write(tmp_path, "v0.log", [v0(0.75, 300, 400)])
    early = write(tmp_path, "v083.log", [v083(250, 400), v083(150, 400)])
    serve = write(tmp_path, "bench.txt", ["============ Serving Benchmark Result ============", bench(HEALTHY, 1000)])
    _, report = api.acceptance_paths([old, early, serve])
    v0_run, v083_run, bench_run = (run_of(report, p) for p in (old, early, serve))
    assert v0_run.per_position == [] and v0_run.conditional == [] and not v0_run.collapsed
    assert v0_run.acceptance_rate == pytest.approx(0.75)
    assert v083_run.lines == 2 and v083_run.acceptance_rate == pytest.approx(400 / 800)
    assert v083_run.mean_acceptance_length is None
    assert bench_run.per_position == pytest.approx(HEALTHY)
    assert bench_run.mean_acceptance_length == pytest.approx(1 + sum(HEALTHY))
    assert bench_run.drafted == 3000


def test_gate_zeroed_drafts_collapse(tmp_path):
    path = write(tmp_path, "zeroed.log", [v0102([0.0, 0.0, 0.0], 100)])
    _, report = api.acceptance_paths([path])
    run = report.runs[0]
    assert run.conditional == [0.0, None, None]
    assert run.collapsed and "vllm#58080" in run.reasons[0]
    assert conditional([0.5, None, 0.2]) == [0.5, None, None]


def test_json_logging_and_public_pastes(tmp_path):
    record = {"message": v0102(HEALTHY, 50).split("] ", 1)[1], "process": 777, "levelname": "INFO"}
    logged = write(tmp_path, "json.log", [json.dumps(record)])
    ascend = str(PUBLIC / "vllm-ascend-12521-1.txt")
    _, report = api.acceptance_paths([logged, ascend])
    assert run_of(report, logged).processes == ["777"]
    assert run_of(report, logged).per_position == pytest.approx(HEALTHY)
    public = run_of(report, ascend)
    # Two engines (pids 95669, 95673), 453 drafted tokens each: 0.821/0.609/0.437 and 0.821/0.675/0.483.
    assert public.processes == ["95669", "95673"]
    assert public.per_position == pytest.approx([0.821, 0.642, 0.46])
    assert public.mean_acceptance_length == pytest.approx(1 + 0.821 + 0.642 + 0.46)
    assert not public.collapsed
    for name in ("vllm-15902-1.txt", "vllm-7301-1.txt"):
        _, report = api.acceptance_paths([str(PUBLIC / name)])
        assert report.runs and all(not math.isnan(r.acceptance_rate or 0) for r in report.runs)


def test_cli_json_plot_and_exit_codes(tmp_path, tmp_path_factory):
    bad = write(tmp_path, "bad.log", [v0102(COLLAPSED, 100)])
    good = write(tmp_path, "good.log", [v0102(HEALTHY, 100)])
    png = tmp_path_factory.mktemp("plots") / "acceptance.png"  # outside the evidence
    result = CliRunner().invoke(cli, ["acceptance", "--json", "--plot", str(png), bad, good])
    assert result.exit_code == 1, result.output
    out = json.loads(result.stdout)
    assert [set(r) >= {"file", "lines", "per_position", "mean_acceptance_length", "conditional", "collapsed"}
            for r in out["runs"]] == [True, True]
    assert [(r["file"], r["collapsed"]) for r in out["runs"]] == [(bad, True), (good, False)]
    assert out["runs"][0]["per_position"] == [0.72, 0.3, 0.07]
    assert out["runs"][1]["per_position"] == [0.9, 0.79, 0.67]
    assert out["runs"][0]["mean_acceptance_length"] == pytest.approx(2.09)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    assert CliRunner().invoke(cli, ["acceptance", good]).exit_code == 0
    result = CliRunner().invoke(cli, ["acceptance", "--baseline", good, "--collapse-threshold", "0.2", bad])
    assert result.exit_code == 1 and "COLLAPSED" in result.stdout
    other = write(tmp_path, "notes.txt", ["nothing to see"])
    assert CliRunner().invoke(cli, ["acceptance", other]).exit_code == 2


def test_plot_draws_every_curve_and_the_threshold(tmp_path):
    bad = write(tmp_path, "bad.log", [v0102(COLLAPSED, 100)])
    good = write(tmp_path, "good.log", [v0102(HEALTHY, 100)])
    _, report = api.acceptance_paths([bad, good], baseline=good)
    fig = plots.plot_acceptance(report)
    left, right = fig.axes[:2]
    curves = {line.get_gid(): list(line.get_ydata()) for line in left.lines}
    assert curves[f"run:{bad}"] == pytest.approx(COLLAPSED)
    assert curves[f"run:{good}"] == pytest.approx(HEALTHY)
    (threshold,) = [line for line in right.lines if line.get_gid() == "threshold"]
    assert set(threshold.get_ydata()) == {0.5}
    assert len([line for line in right.lines if (line.get_gid() or "").startswith("conditional:")]) == 3  # with baseline
