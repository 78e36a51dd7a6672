"""vLLM spec-decode metrics lines (sources/vllm_metrics.py), every format of peers_and_vllm.md §1.4."""

from __future__ import annotations

import math
import random
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ncclforensics.model import Location, Severity, SourceFormat, SpecDecodeMetrics
from ncclforensics.sources import InputFile, detect, parse_file
from ncclforensics.sources.vllm_metrics import VllmMetricsSource
from fixture_paths import FIXTURES

PUBLIC = FIXTURES / "public" / "vllm_specdecode"
CONSTRUCTED = FIXTURES / "constructed" / "vllm"
SOURCE = VllmMetricsSource()

# The format strings of §1.4, as vLLM's code has them.
V0 = ("Speculative metrics: Draft acceptance rate: {:.3f}, System efficiency: {:.3f}, "
      "Number of speculative tokens: {}, Number of accepted tokens: {}, Number of draft tokens: {}, "
      "Number of emitted tokens: {}.")
V1_083 = "SpecDecoding metrics: Draft acceptance rate: %.1f%%, Accepted: %d tokens, Drafted: %d tokens"
V1_085 = ("SpecDecoding metrics: Draft acceptance rate: %.1f%%, Mean acceptance length: %.2f, Accepted: %d tokens, "
          "Drafted: %d tokens, Per-position acceptance rate: %s")
V1_0102 = ("SpecDecoding metrics: Mean acceptance length: %.2f, Accepted throughput: %.2f tokens/s, "
           "Drafted throughput: %.2f tokens/s, Accepted: %d tokens, Drafted: %d tokens, "
           "Per-position acceptance rate: %s, Avg Draft acceptance rate: %.1f%%")
PREFIXES = [
    "",
    "INFO 02-06 03:05:53 metrics.py:475] ",
    "INFO 05-27 12:34:56 [metrics.py:86] ",
    "(APIServer pid=95669) INFO 07-27 22:00:12 [metrics.py:121] ",
    "(EngineCore_DP0 pid=95669) INFO 07-27 22:00:12 [metrics.py:121] ",
    "\x1b[1;36m(APIServer pid=95669)\x1b[0;0m \x1b[32mINFO\x1b[0m \x1b[90m07-27 22:00:12\x1b[0m "
    "[\x1b[36mmetrics.py:121\x1b[0m] ",
    "(RayWorkerWrapper pid=95669, ip=10.0.0.7) INFO 07-27 22:00:12 [metrics.py:121] ",
]


def load(path: Path) -> InputFile:
    return InputFile(path=path, name=path.name)


def parse_text(tmp_path: Path, text: str, name: str = "vllm.log"):
    path = tmp_path / name
    path.write_text(text)
    return SOURCE.parse(load(path))


def rates(values) -> str:
    return ", ".join(f"{p:.3f}" for p in values)


# --- public pastes (facts from tests/fixtures/public/INDEX.md) ------------------------------------------------------


def test_vllm_ascend_two_engines_by_pid():
    evidence = SOURCE.parse(load(PUBLIC / "vllm-ascend-12521-1.txt"))
    assert evidence.problems == [] and evidence.ranks == []
    assert evidence.metrics == [
        SpecDecodeMetrics(loc=Location("vllm-ascend-12521-1.txt", 2), process="95669", mean_acceptance_length=2.87,
                          accepted=282, drafted=453, per_position=(0.821, 0.609, 0.437), avg_acceptance_rate=0.623),
        SpecDecodeMetrics(loc=Location("vllm-ascend-12521-1.txt", 4), process="95673", mean_acceptance_length=2.98,
                          accepted=299, drafted=453, per_position=(0.821, 0.675, 0.483), avg_acceptance_rate=0.66),
    ]
    for m in evidence.metrics:  # the INDEX's checks: 1 + sum = mean length, accepted / drafted = avg rate (k = 3)
        assert len(m.per_position) == 3
        assert 1 + sum(m.per_position) == pytest.approx(m.mean_acceptance_length, abs=0.01)
        assert m.accepted / m.drafted == pytest.approx(m.avg_acceptance_rate, abs=0.001)


def test_vllm_15902_pre_rename_v1_with_trailing_comma():
    evidence = SOURCE.parse(load(PUBLIC / "vllm-15902-1.txt"))
    assert evidence.problems == []
    assert evidence.metrics == [SpecDecodeMetrics(loc=Location("vllm-15902-1.txt", 1), accepted=66, drafted=66,
                                                  avg_acceptance_rate=1.0)]


def test_vllm_7301_legacy_v0_lines():
    evidence = SOURCE.parse(load(PUBLIC / "vllm-7301-1.txt"))
    assert evidence.problems == []
    assert [(m.loc.line, m.avg_acceptance_rate, m.accepted, m.drafted, m.process, m.per_position)
            for m in evidence.metrics] == [(1, 0.2, 1, 5, None, ()), (2, 0.067, 1, 15, None, ())]


@pytest.mark.parametrize("path", sorted(PUBLIC.glob("*")) + sorted(CONSTRUCTED.glob("*")), ids=lambda p: p.name)
def test_detect_picks_vllm_metrics(path):
    file = load(path)
    assert detect(file) is not None and detect(file).format is SourceFormat.VLLM_METRICS
    assert parse_file(file).format is SourceFormat.VLLM_METRICS


@pytest.mark.parametrize("path", sorted((FIXTURES / "real" / "nccl-2.28.9").glob("*/*_rank*.*")),
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_sniff_is_zero_on_journals_fingerprints_and_torch_logs(path):
    file = load(path)
    assert SOURCE.sniff(file.head(), file.head().decode("utf-8", "replace")) == 0.0


# --- every format of §1.4, built from its format string -------------------------------------------------------------


@pytest.mark.parametrize("prefix", PREFIXES)
def test_v0_format(tmp_path, prefix):
    evidence = parse_text(tmp_path, prefix + V0.format(0.2, 0.167, 5, 1, 5, 1) + "\n")
    assert evidence.problems == []
    (m,) = evidence.metrics
    assert (m.avg_acceptance_rate, m.accepted, m.drafted, m.mean_acceptance_length, m.per_position) == (
        0.2, 1, 5, None, ())
    assert m.process == ("95669" if "pid=" in prefix else None)


@pytest.mark.parametrize("prefix", PREFIXES)
def test_v1_0_8_3_format(tmp_path, prefix):
    (m,) = parse_text(tmp_path, prefix + (V1_083 % (62.5, 250, 400)) + "\n").metrics
    assert (m.avg_acceptance_rate, m.accepted, m.drafted, m.mean_acceptance_length) == (0.625, 250, 400, None)
    assert m.process == ("95669" if "pid=" in prefix else None)


@pytest.mark.parametrize("prefix", PREFIXES)
def test_v1_0_8_5_format(tmp_path, prefix):
    (m,) = parse_text(tmp_path, prefix + (V1_085 % (63.7, 2.91, 191, 300, rates([0.82, 0.62, 0.47]))) + "\n").metrics
    assert m == SpecDecodeMetrics(loc=Location("vllm.log", 1), process="95669" if "pid=" in prefix else None,
                                  mean_acceptance_length=2.91, accepted=191, drafted=300,
                                  per_position=(0.82, 0.62, 0.47), avg_acceptance_rate=0.637)


@pytest.mark.parametrize("prefix", PREFIXES)
def test_v1_0_10_2_format(tmp_path, prefix):
    line = V1_0102 % (2.87, 9.40, 15.10, 282, 453, rates([0.821, 0.609, 0.437]), 62.3)
    (m,) = parse_text(tmp_path, prefix + line + "\n").metrics
    assert m == SpecDecodeMetrics(loc=Location("vllm.log", 1), process="95669" if "pid=" in prefix else None,
                                  mean_acceptance_length=2.87, accepted=282, drafted=453,
                                  per_position=(0.821, 0.609, 0.437), avg_acceptance_rate=0.623)


def test_acceptance_collapse_example():
    """§1.4: the per-position vector is the only signal of the DCP draft bug (0.72/0.30/0.07 vs 0.90/0.79/0.67)."""
    evidence = SOURCE.parse(load(CONSTRUCTED / "v1_0.10.2_ansi_collapse.log"))
    assert evidence.problems == []
    assert [m.per_position for m in evidence.metrics] == [(0.9, 0.79, 0.67), (0.72, 0.3, 0.07), (0.0, 0.0, 0.0)]
    assert [m.avg_acceptance_rate for m in evidence.metrics] == [0.787, 0.363, 0.0]
    assert [m.mean_acceptance_length for m in evidence.metrics] == [3.36, 2.09, 1.0]
    assert {m.process for m in evidence.metrics} == {"4242"}


def test_dp_engines_without_pid_take_the_engine_of_the_stats_line_before():
    evidence = SOURCE.parse(load(CONSTRUCTED / "v1_dp_engines.log"))
    assert [(m.loc.line, m.process, m.accepted) for m in evidence.metrics] == [(2, "Engine 000", 150),
                                                                            (4, "Engine 001", 0)]


@pytest.mark.parametrize("name, expected", [
    ("v0_engine.log", [(3, None, 300, 400, 0.75)]),
    ("v1_0.8.3.log", [(1, None, 250, 400, 0.625)]),
    ("v1_0.8.5.log", [(2, "Engine 000", 191, 300, 0.637)]),
    ("v1_json_logging.log", [(1, "777", 120, 300, 0.4)]),
])
def test_constructed_files(name, expected):
    evidence = SOURCE.parse(load(CONSTRUCTED / name))
    assert evidence.problems == []
    assert [(m.loc.line, m.process, m.accepted, m.drafted, m.avg_acceptance_rate) for m in evidence.metrics] == expected


def test_vllm_bench_serve_block():
    evidence = SOURCE.parse(load(CONSTRUCTED / "bench_serve.txt"))
    assert evidence.problems == []
    assert evidence.metrics == [SpecDecodeMetrics(
        loc=Location("bench_serve.txt", 5), mean_acceptance_length=3.2, accepted=14090, drafted=19179,
        per_position=(0.8342, 0.7291, 0.6407), avg_acceptance_rate=0.7347)]


def test_vllm_bench_block_pasted_without_padding_and_with_a_bad_value(tmp_path):
    text = ("---------------Speculative Decoding---------------\n"
            "Acceptance rate (%): 68.81\nAcceptance length: 3.06\nAccepted tokens: lots\n"
            "Per-position acceptance (%):\nPosition 0: 76.56\nPosition 1: 68.76\n\nMean TTFT (ms): 1.0\n")
    evidence = parse_text(tmp_path, text)
    (m,) = evidence.metrics
    assert (m.avg_acceptance_rate, m.mean_acceptance_length, m.accepted, m.per_position) == (
        0.6881, 3.06, None, (0.7656, 0.6876))
    assert [str(p) for p in evidence.problems] == [
        "vllm.log:1: vllm bench Speculative Decoding block: Accepted tokens 'lots' is not a count"]


def test_broken_lines_are_located_errors_and_parsing_goes_on():
    evidence = SOURCE.parse(load(CONSTRUCTED / "v1_broken.log"))
    assert [m.loc.line for m in evidence.metrics] == [1, 2, 4, 5]
    partial, nothing_drafted, fork = evidence.metrics[1:]
    assert (partial.accepted, partial.drafted, partial.per_position, partial.mean_acceptance_length,
            partial.avg_acceptance_rate) == (None, 300, (), 2.1, 0.367)
    assert (nothing_drafted.accepted, nothing_drafted.drafted, nothing_drafted.avg_acceptance_rate) == (0, 0, None)
    assert (fork.accepted, fork.drafted, fork.per_position, fork.avg_acceptance_rate) == (90, 300, (0.5, 0.3, 0.1), 0.3)
    assert [str(p) for p in evidence.problems] == [
        "v1_broken.log:2: SpecDecoding metrics line: Accepted 'many tokens' is not a count; "
        "Per-position acceptance rate '0.700, oops' is not a list of rates",
        "v1_broken.log:3: SpecDecoding metrics line: no known field (Mean acceptance length, Accepted, Drafted, "
        "Draft acceptance rate ...)",
    ]
    assert all(p.severity is Severity.ERROR for p in evidence.problems)


@pytest.mark.parametrize("line, expected", [
    ("SpecDecoding metrics: Draft acceptance rate: 0.625, Accepted: 5 tokens, Drafted: 8 tokens", 0.625),  # fraction
    ("SpecDecoding metrics: Avg Draft acceptance rate: 62.5", 0.625),  # above 1 without %: a percent
    ("SpecDecoding metrics: Avg Draft acceptance rate: nan%, Accepted: 0 tokens, Drafted: 0 tokens", None),
])
def test_rate_scaling(tmp_path, line, expected):
    (m,) = parse_text(tmp_path, line + "\n").metrics
    assert m.avg_acceptance_rate == expected


@pytest.mark.parametrize("run, expected", [
    ("[0.821, 0.609, 0.437]", (0.821, 0.609, 0.437)),
    ("82.1%, 60.9%", (0.821, 0.609)),
    ("0.500", (0.5,)),
])
def test_per_position_variants(tmp_path, run, expected):
    text = (f"SpecDecoding metrics: Accepted: 1 tokens, Per-position acceptance rate: {run}, "
            "Avg Draft acceptance rate: 1.0%")
    (m,) = parse_text(tmp_path, text + "\n").metrics
    assert m.per_position == expected and m.avg_acceptance_rate == 0.01


def test_per_position_nan_is_kept(tmp_path):
    (m,) = parse_text(tmp_path, "SpecDecoding metrics: Accepted: 0 tokens, Per-position acceptance rate: nan, nan\n"
                      ).metrics
    assert len(m.per_position) == 2 and all(math.isnan(p) for p in m.per_position)


@pytest.mark.parametrize("line", [
    "(APIServer pid=1) INFO 07-27 22:00:12 [loggers.py:248] Engine 000: Avg prompt throughput: 1.0 tokens/s",
    "DiffusionDecoding metrics: Committed token throughput: 1.00 tokens/s, Committed: 3 tokens",
    "---------------Speculative Decoding---------------",
    "Acceptance rate (%):                     83.39",
    "INFO 07-27 22:00:12 [api_server.py:1] vLLM API server version 0.10.2",
])
def test_other_log_output_is_ignored_silently(tmp_path, line):
    evidence = parse_text(tmp_path, line + "\n")
    assert evidence.metrics == [] and evidence.problems == []


def test_sniff_counts_metrics_lines_and_half_the_stats_lines():
    text = "x\n" + (V1_083 % (50.0, 1, 2)) + "\nEngine 000: Avg prompt throughput: 1.0 tokens/s\ny\n"
    assert SOURCE.sniff(text.encode(), text) == pytest.approx(1.5 / 4)
    assert SOURCE.sniff(b"", "") == 0.0


# --- properties -----------------------------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(
    per_position=st.lists(st.integers(0, 1000), min_size=1, max_size=8),
    drafted=st.integers(0, 10**9),
    accepted=st.integers(0, 10**9),
    pid=st.integers(1, 4_000_000),
    seed=st.integers(0, 2**32 - 1),
)
def test_fields_are_read_by_name_in_any_order(per_position, drafted, accepted, pid, seed):
    """Shuffle the fields of the 0.10.2+ line: the same values come out (the order changed across releases)."""
    values = tuple(p / 1000 for p in per_position)
    fields = [
        "Mean acceptance length: %.2f" % (1 + sum(values)),
        "Accepted throughput: 9.40 tokens/s",
        "Drafted throughput: 15.10 tokens/s",
        "Accepted: %d tokens" % accepted,
        "Drafted: %d tokens" % drafted,
        "Per-position acceptance rate: %s" % rates(values),
        "Avg Draft acceptance rate: %.1f%%" % 62.3,
    ]
    random.Random(seed).shuffle(fields)
    line = f"(APIServer pid={pid}) INFO 07-27 22:00:12 [metrics.py:121] SpecDecoding metrics: " + ", ".join(fields)
    with tempfile.TemporaryDirectory() as folder:
        (m,) = parse_text(Path(folder), line + "\n").metrics
    assert m.per_position == values
    assert (m.accepted, m.drafted, m.process, m.avg_acceptance_rate) == (accepted, drafted, str(pid), 0.623)
    assert m.mean_acceptance_length == round(1 + sum(values), 2)


_FRAGMENTS = st.sampled_from([
    "SpecDecoding metrics: ", "Speculative metrics: ", "Accepted: ", "Drafted: ", "Per-position acceptance rate: ",
    "Avg Draft acceptance rate: ", "Draft acceptance rate: ", "Mean acceptance length: ", "Engine 000: ",
    "Avg prompt throughput: ", "(APIServer pid=", ")", "nan", "%", "1", "0.5", ", ", ",", " ", "\n", "tokens",
    "\x1b[0m", "{", '"message": ', "[", "]", ":", "-", "1e999", "\r", "\x00",
])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=3000) | st.lists(_FRAGMENTS | st.text(max_size=8), max_size=80).map(
    lambda parts: "".join(parts).encode("utf-8", "surrogatepass")))
def test_nothing_raises(data):
    assume(not data.startswith(b"\x1f\x8b"))  # corrupt gzip: see test_gate_journal's xfail
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "input"
        path.write_bytes(data)
        assert parse_file(InputFile(path=path, name=str(path))).path == str(path)
        direct = SOURCE.parse(InputFile(path=path, name="input"))
        for m in direct.metrics:
            assert m.avg_acceptance_rate is None or m.avg_acceptance_rate >= 0
            assert m.accepted is None or m.accepted >= 0
        SOURCE.sniff(data[:65536], data[:65536].decode("utf-8", "replace"))


def test_long_hostile_line_is_fast(tmp_path):
    line = "SpecDecoding metrics: A" + " " * 200_000 + "," * 50_000 + " b" * 50_000 + "\n"
    evidence = parse_text(tmp_path, line)
    assert evidence.metrics == [] and evidence.has_errors


@pytest.mark.parametrize("text, warned", [
    ("Draft acceptance rate: 1.9, Accepted: 10 tokens, Drafted: 12 tokens", "is above 1 without a %"),
    ("Draft acceptance rate: 190%, Accepted: 10 tokens, Drafted: 12 tokens", "is above 100%"),
    ("Mean acceptance length: 2.1, Per-position acceptance rate: 0.9, 1.9, 0.4", "holds a rate above 1"),
    ("Draft acceptance rate: 62.3%, Accepted: 10 tokens, Drafted: 12 tokens", None),
])
def test_an_implausible_rate_is_a_warning_at_its_line(tmp_path, text, warned):
    """An acceptance rate of 1.9 was read (as 1.9%) without a word."""
    from ncclforensics.model import Severity
    from ncclforensics.sources import InputFile, parse_file

    path = tmp_path / "server.log"
    path.write_text(f"INFO 05-01 10:00:00 [metrics.py:1] SpecDecoding metrics: {text}\n")
    evidence = parse_file(InputFile(path, "server.log"))
    assert len(evidence.metrics) == 1
    doubts = [p for p in evidence.problems if "implausible" in p.message]
    if warned is None:
        assert doubts == []
    else:
        (doubt,) = doubts
        assert doubt.severity is Severity.WARNING and doubt.loc.line == 1 and warned in doubt.message
