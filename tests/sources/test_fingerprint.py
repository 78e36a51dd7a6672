"""Fingerprint traces (sources/fingerprint.py): per-step checksums and per-collective digests."""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ncclforensics.model import FingerprintRow, Location, Severity, SourceFormat
from ncclforensics.sources import InputFile, detect, parse_file
from ncclforensics.sources.fingerprint import FingerprintSource
from fixture_paths import FIXTURES, REAL, EXTRA_OP, KILLED

CONSTRUCTED = FIXTURES / "constructed" / "fingerprint"
SOURCE = FingerprintSource()


def load(path: Path) -> InputFile:
    return InputFile(path=path, name=path.name)


def parse_text(tmp_path: Path, text: str, name: str = "fp.log"):
    path = tmp_path / name
    path.write_text(text)
    return SOURCE.parse(load(path))


# --- real per-step checksums: extra-op-4rank ------------------------------------------------------------------------


def checksums(rank: int) -> dict[int, float]:
    evidence = SOURCE.parse(load(EXTRA_OP / f"fingerprint_rank{rank}.log"))
    assert evidence.problems == [] and evidence.ranks == [rank]
    return {row.step: row.sum for row in evidence.fingerprints}


def test_extra_op_checksums_per_rank():
    # Rank 0 wedged in step 11 and wrote no checksum for it; ranks 1-3 wrote steps 0..11.
    assert sorted(checksums(0)) == list(range(11))
    for rank in (1, 2, 3):
        assert sorted(checksums(rank)) == list(range(12))
    for rank in range(4):
        values = checksums(rank)
        assert all(values[step] == 10240.0 for step in range(9))
        assert values[10] == 9472.0
    # Step 9: rank 0's extra collective paired 4096 with 8192 floats and corrupted its sum.
    assert checksums(0)[9] == 11776.0
    assert [checksums(rank)[9] for rank in (1, 2, 3)] == [10240.0, 10240.0, 10240.0]


def test_extra_op_row_shape():
    evidence = SOURCE.parse(load(EXTRA_OP / "fingerprint_rank0.log"))
    assert evidence.format is SourceFormat.FINGERPRINT
    assert evidence.fingerprints[9] == FingerprintRow(loc=Location("fingerprint_rank0.log", 10), rank=0, step=9,
                                                      sum=11776.0)


# --- real per-collective digests: killed-rank (rank 1 killed itself after step 30) ----------------------------------


@pytest.mark.parametrize("rank", [0, 1, 2, 3])
def test_killed_rank_rows_match_the_file(rank):
    path = KILLED / f"fingerprint_rank{rank}.jsonl"
    lines = path.read_text().splitlines()
    evidence = SOURCE.parse(load(path))

    assert evidence.problems == []
    assert evidence.ranks == [rank]
    assert evidence.record_count == len(lines) == 124
    for row in evidence.fingerprints:
        raw = json.loads(lines[row.loc.line - 1])
        assert (row.step, row.op, row.rank, row.tag, row.kind, row.numel) == (
            raw["step"], raw["op"], raw["rank"], raw["tag"], raw["kind"], raw["numel"])
        assert (row.sum, row.expected_sum, row.digest) == (raw["sum"], raw["expected_sum"], raw["digest"])
    # Four AllReduce of 512 floats per step, steps 0..30; `op` counts collectives across steps.
    assert [row.step for row in evidence.fingerprints] == [op // 4 for op in range(124)]
    assert [row.op for row in evidence.fingerprints] == list(range(124))
    assert {row.tag for row in evidence.fingerprints} == {"layer0", "layer1", "layer2", "layer3"}
    assert {(row.kind, row.numel) for row in evidence.fingerprints} == {("AllReduce", 512)}
    assert all(row.sum == row.expected_sum for row in evidence.fingerprints)


def test_killed_rank_first_row_and_digests_agree_across_ranks():
    per_rank = [SOURCE.parse(load(KILLED / f"fingerprint_rank{r}.jsonl")).fingerprints for r in range(4)]
    assert per_rank[0][0] == FingerprintRow(
        loc=Location("fingerprint_rank0.jsonl", 1), rank=0, step=0, op=0, tag="layer0", kind="AllReduce", numel=512,
        digest="bbf2b25758600fd3", sum=-1124.0, expected_sum=-1124.0)
    for op in range(124):
        assert len({rows[op].digest for rows in per_rank}) == 1
        assert len({rows[op].sum for rows in per_rank}) == 1


@pytest.mark.parametrize("rank, rows, wrong, last_wrong", [(0, 90, 83, (29, 2)), (1, 88, 81, (28, 2)),
                                                       (2, 90, 83, (29, 2)), (3, 90, 83, (29, 2))])
def test_long_window_wrong_sums(rank, rows, wrong, last_wrong):
    """tests/fixtures/real/README.md: rank 1's extra op at step 2 misaligned every later collective; the sums read
    back differ from `expected_sum` from step 2 op 1 on (rank 1 never read back its step 29)."""
    evidence = SOURCE.parse(load(REAL / "long-window" / f"fingerprint_rank{rank}.jsonl"))
    assert evidence.problems == [] and evidence.record_count == rows
    bad = [(row.step, row.op) for row in evidence.fingerprints if row.sum != row.expected_sum]
    assert (len(bad), bad[0], bad[-1]) == (wrong, (2, 1), last_wrong)


@pytest.mark.parametrize("path", sorted(REAL.glob("*/fingerprint_rank*")) + sorted(CONSTRUCTED.glob("*")),
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_detect_picks_fingerprint(path):
    file = load(path)
    assert detect(file) is not None and detect(file).format is SourceFormat.FINGERPRINT
    assert parse_file(file).format is SourceFormat.FINGERPRINT


@pytest.mark.parametrize("path", sorted(REAL.glob("*/gate_journal_rank*"))
                         + sorted((FIXTURES / "public" / "vllm_specdecode").glob("*")),
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_sniff_is_zero_on_journals_and_vllm_logs(path):
    file = load(path)
    assert SOURCE.sniff(file.head(), file.head().decode()) == 0.0


# --- constructed traces ---------------------------------------------------------------------------------------------


def test_prefixed_key_value_trace():
    evidence = SOURCE.parse(load(CONSTRUCTED / "fingerprint_rank2.log"))
    assert evidence.ranks == [2]
    full, nan_sum, bad_numel, both = evidence.fingerprints
    assert full == FingerprintRow(loc=Location("fingerprint_rank2.log", 2), rank=2, step=0, op=0, tag="layer0",
                                  kind="AllReduce", numel=4096, digest="00ff00ff00ff00ff", sum=10240.0,
                                  expected_sum=10240.0)
    assert nan_sum.loc.line == 3 and nan_sum.kind == "AllReduce" and math.isnan(nan_sum.sum)
    assert (bad_numel.loc.line, bad_numel.sum, bad_numel.numel) == (6, 9472.0, None)
    assert (both.loc.line, both.sum) == (8, 1.5)  # `sum` wins over `checksum`
    problems = {p.loc.line: p.message for p in evidence.problems}
    assert problems == {
        4: "broken fingerprint record: step 'x' is not an integer",
        5: "broken fingerprint record: checksum 'abc' is not a number",
        6: "fingerprint record with bad fields (read without them): numel 'many' is not an integer",
    }


def test_broken_jsonl_trace():
    evidence = SOURCE.parse(load(CONSTRUCTED / "fingerprint_broken.jsonl"))
    assert [row.loc.line for row in evidence.fingerprints] == [1, 2, 7]
    assert math.isnan(evidence.fingerprints[1].sum)
    assert evidence.fingerprints[2].digest == "718c0a59a286b50d" and evidence.fingerprints[2].sum is None
    problems = {p.loc.line: p.message for p in evidence.problems}
    assert sorted(problems) == [3, 4, 5, 6, 8]
    assert problems[3].startswith("invalid JSON: Unterminated string")
    assert problems[4] == "broken fingerprint record: rank 'three' is not an integer"
    assert problems[5] == "broken fingerprint record: no digest, sum or checksum"
    assert problems[6] == "neither a JSON object nor a key=value record in a JSON-lines file"
    assert problems[8] == "broken fingerprint record: sum True is not a number"
    assert all(p.severity is Severity.ERROR for p in evidence.problems)
    assert str(evidence.problems[1]) == (
        "fingerprint_broken.jsonl:4: broken fingerprint record: rank 'three' is not an integer")


@pytest.mark.parametrize("line, expected", [
    ("step=0 rank=0 checksum=10240.000000", dict(step=0, rank=0, sum=10240.0)),
    ("[rank1] step=4 rank=1 digest=abcdef kind=ALLGATHER", dict(step=4, rank=1, digest="abcdef", kind="AllGather")),
    ("step=4 rank=1 sum=-inf", dict(step=4, rank=1, sum=float("-inf"))),
    ('{"step": 2, "rank": 3, "digest": 255, "op": 9.0}', dict(step=2, rank=3, digest="255", op=9)),
    ('{"step": 2, "rank": 3, "checksum": "1.5e3", "numel": null}', dict(step=2, rank=3, sum=1500.0)),
])
def test_one_line(tmp_path, line, expected):
    evidence = parse_text(tmp_path, line + "\n")
    assert evidence.problems == []
    assert evidence.fingerprints == [FingerprintRow(loc=Location("fp.log", 1), **expected)]


@pytest.mark.parametrize("line", [
    "step=1 rank=0 decision=skip checksum=5",  # a gate record
    "checksum=5",  # no step or rank
    "step=1 checksum=5",  # a log line needs both
    "total_sum=3 step=1",
    "hello world",
])
def test_not_a_fingerprint(tmp_path, line):
    evidence = parse_text(tmp_path, "step=0 rank=0 checksum=1\n" + line + "\n")
    assert evidence.problems == [] and len(evidence.fingerprints) == 1


@pytest.mark.parametrize("line, message", [
    ("step=x rank=0 checksum=1", "broken fingerprint record: step 'x' is not an integer"),
    ("step=1 rank=0 checksum=", "broken fingerprint record: no digest, sum or checksum"),
    ("step=1 rank=0 expected_sum=4", "broken fingerprint record: no digest, sum or checksum"),
    ('{"step": 1, "sum": 4}', "broken fingerprint record: no rank"),
    ('{"step": 1, "rank": 0, "sum": 1%s}' % ("0" * 400),
     "broken fingerprint record: sum 1%s... is not a number" % ("0" * 36)),  # too large for a float
    ('{"step": 99999999999999999999, "rank": 0, "sum": 4}',
     "broken fingerprint record: step 99999999999999999999 is too large"),  # more than an Int64 column holds
    ('{"step": 1, "rank": 0, "sum": 4, "tag": ["a"]}',
     "fingerprint record with bad fields (read without them): tag ['a'] is not text"),
])
def test_broken_line(tmp_path, line, message):
    evidence = parse_text(tmp_path, "step=0 rank=0 checksum=1\n" + line + "\nstep=2 rank=0 checksum=1\n")
    assert [(p.loc, p.message) for p in evidence.problems] == [(Location("fp.log", 2), message)]
    assert {row.step for row in evidence.fingerprints} >= {0, 2}


def test_sniff_is_the_share_of_fingerprint_lines():
    text = "step=0 rank=0 checksum=1\nother\nother\nstep=1 rank=0 checksum=2\n"
    assert SOURCE.sniff(text.encode(), text) == pytest.approx(0.5)
    assert SOURCE.sniff(b"", "") == 0.0


# --- no input makes it raise ----------------------------------------------------------------------------------------

_FRAGMENTS = st.sampled_from([
    "step=", "rank=", "checksum=", "sum=", "digest=", "expected_sum=", "op=", "numel=", "kind=", "1", "0", "x", "nan",
    "-inf", " ", "\n", "{", "}", '"step": ', '"rank": ', '"sum": ', '"digest": ', "NaN", "1e999", ", ", "[", "]",
    "\"", "\r", "\x00", "decision=", "null", "true",
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
        assert all(isinstance(row.step, int) and isinstance(row.rank, int) for row in direct.fingerprints)
        assert all(row.digest is not None or row.sum is not None for row in direct.fingerprints)
        SOURCE.sniff(data[:65536], data[:65536].decode("utf-8", "replace"))


def test_corrupt_gzip_is_a_diagnostic_not_an_exception(tmp_path):
    path = tmp_path / "fp.gz"
    path.write_bytes(b"\x1f\x8b\x07garbage")
    evidence = SOURCE.parse(load(path))
    assert evidence.fingerprints == [] and evidence.has_errors


# --- a trace cut short ------------------------------------------------------------------------------------------------


def test_a_trace_cut_mid_number_reports_the_cut_and_fabricates_no_checksum(tmp_path):
    """Rank 1's trace cut inside its last checksum (`checksum=9472.000000` became `checksum=94`) gave "step 11
    checksums differ (mixed data) rank 1: 94.0". A last line without its newline is now a cut, reported at its
    file:line, not a value."""
    from cli_helpers import diff_json

    folder = tmp_path / "ev"
    folder.mkdir()
    for source in EXTRA_OP.iterdir():
        (folder / source.name).symlink_to(source)
    cut = folder / "fingerprint_rank1.log"
    cut.unlink()
    text = (EXTRA_OP / "fingerprint_rank1.log").read_text()
    assert text.endswith("checksum=9472.000000\n")
    cut.write_text(text[: -len("72.000000\n")])  # ends in `checksum=94`
    lines = text.count("\n")
    code, d = diff_json(folder)
    splits = {s["step"]: s["values"] for s in d["checksum_splits"]}
    assert splits.get(11, {}).get("1") != 94.0
    assert {(p["file"], p["line"], p["severity"]) for p in d["problems"] if "cut short" in p["message"]} == {
        (str(cut), lines, "warning")}
    evidence = SOURCE.parse(load(cut))
    assert [r.step for r in evidence.fingerprints if r.rank == 1][-1] == 10


@pytest.mark.parametrize("text, rows, cut", [
    ('{"step": 0, "rank": 0, "sum": 1.0}\n{"step": 1, "rank": 0, "sum": 2.5}', 2, False),  # whole JSON: read
    ('{"step": 0, "rank": 0, "sum": 1.0}\n{"step": 1, "rank": 0, "su', 1, True),  # JSON cut mid-way
    ("step=0 rank=0 checksum=1.5\nstep=1 rank=0 checksum=2", 1, True),  # key=value: may be cut
    ("step=0 rank=0 checksum=1.5\nstep=1 rank=0 check", 1, True),  # cut before its value
    ("step=0 rank=0 checksum=1.5\nst", 1, True),  # cut before its first `=`: still a cut, not the end
    ("step=0 rank=0 checksum=1.5", 1, False),  # one line, no newline at all: a file written so
    ("step=0 rank=0 checksum=1.5\nstep=1 rank=0 checksum=2\n", 2, False),
])
def test_the_last_line_without_its_newline(tmp_path, text, rows, cut):
    evidence = parse_text(tmp_path, text)
    assert len(evidence.fingerprints) == rows
    flagged = [p for p in evidence.problems if "cut short" in p.message]
    assert [(p.loc.line, p.severity) for p in flagged] == ([(2, Severity.WARNING)] if cut else [])
    assert not [p for p in evidence.problems if p.severity is Severity.ERROR]


def test_a_trace_cut_inside_a_record_keeps_the_step_it_had_begun_as_a_floor(tmp_path):
    from ncclforensics.sources.fingerprint import begun_step

    path = tmp_path / "fingerprint_rank1.log"
    path.write_text("step=0 rank=1 checksum=1002496.000000\nstep=1 r")
    evidence = SOURCE.parse(load(path))
    assert evidence.cut is not None and evidence.cut_step == 1 and [r.step for r in evidence.fingerprints] == [0]
    # (digits cut keep a floor; a cut before any digit of the step, or before the key, keeps nothing)
    assert begun_step('{"step": 12, "op": 3, "ra') == 12 and begun_step("step=") is None
    assert begun_step("rank=1 checksum=5 substep=3") is None
