"""A fast, deterministic sample of benchmarks/fuzz_parsers.py: the same mutations of the real captures, a few dozen
per parser, plus hypothesis over parse_file. No parser may raise, and every problem must name its file.

A failing case is rebuilt with `python benchmarks/fuzz_parsers.py --replay PARSER:INDEX --seed 20261129 --cases 0`.
"""

from __future__ import annotations

import gzip
import importlib.util
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli_helpers import real, run_cli
from ncclforensics.sources import InputFile, parse_file

ROOT = Path(__file__).resolve().parent.parent
SEED = 20261129
CASES = 40  # per parser: about 6 s for all ten


def _load_benchmark():
    spec = importlib.util.spec_from_file_location("fuzz_parsers", ROOT / "benchmarks" / "fuzz_parsers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


fuzz = _load_benchmark()


@pytest.fixture(scope="module")
def seeds():
    return fuzz.load_seeds()


@pytest.fixture(scope="module")
def case_path(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz") / "case"


@pytest.mark.parametrize("parser", fuzz.parser_names())
def test_mutated_real_captures_never_raise_and_problems_name_the_file(parser, seeds, case_path):
    failures = []
    for index in range(CASES):
        label, name, data = fuzz.make_case(parser, index, SEED, seeds, big=set())
        case_path.write_bytes(data)
        try:
            problem = fuzz.check_evidence(fuzz.run_parser(parser, case_path, name), name)
        except Exception as e:  # noqa: BLE001 - any escape is the failure being tested for
            problem = f"{type(e).__name__}: {e}"
        if problem:
            failures.append(f"case {index} ({label}): {problem[:300]}")
    assert not failures, "\n".join(failures)


def test_every_mutation_is_sampled(seeds):
    labels = {fuzz.make_case(p, i, SEED, seeds, big=set())[0].split("+")[0]
              for p in fuzz.parser_names() for i in range(CASES)}
    assert labels == set(fuzz._PLAIN) | {"gzip_truncated", "gzip_mutated"}


# --- hypothesis over parse_file -------------------------------------------------------------------------------


def _parse_bytes(folder: Path, data: bytes, name: str = "rank0.log"):
    path = folder / "hypothesis.case"
    path.write_bytes(data)
    evidence = parse_file(InputFile(path, name))
    assert fuzz.check_evidence(evidence, name) is None
    return evidence


SETTINGS = settings(derandomize=True, max_examples=80, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])
_TOKENS = st.sampled_from([
    "vm:442:442 [0] NCCL INFO ", "AllReduce: opCount ", "comm 0x5574e0ae8e20 ", "rank 0 nranks 4 ", "- Init COMPLETE",
    "commId 0x1715b7bd1b8fda9e ", "count 4096 datatype 7 op 0 root 0 ", "[nranks=4] stream 0x55", "NCCL WARN ",
    "[rank0]:[E1129 08:55:30.5 ProcessGroupNCCL.cpp:1] ", "WorkNCCL(SeqNum=50, OpType=ALLREDUCE)", "[PG 0 Rank 0] ",
    "step=5 rank=0 decision=pass ", '{"step": 5, "rank": 0, "decision": "pass"}', "checksum=1.5 ", "digest=ab ",
    '{"communicators": [', '"nccl_version": "2.28.9"', "Group     Comms     Nodes     Ranks", "#0-0 (1715b7bd1b8fda9e) ",
    "SpecDecoding metrics: ", "Accepted: 3 tokens, ", "Per-position acceptance rate: 0.5, ", "\n", "\r\n", " ", "\x00",
    "9" * 30, "-1", "{", "}", "[", "]", '"', "=", ":", ",",
])


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("hypothesis")


@SETTINGS
@given(data=st.binary(max_size=2048))
def test_parse_file_never_raises_on_bytes(folder, data):
    _parse_bytes(folder, data)


@SETTINGS
@given(text=st.text(max_size=512), encoding=st.sampled_from(["utf-8", "utf-16", "utf-16-be", "latin-1"]))
def test_parse_file_never_raises_on_text(folder, text, encoding):
    _parse_bytes(folder, text.encode(encoding, errors="replace"))


@SETTINGS
@given(pieces=st.lists(_TOKENS, max_size=60), compress=st.booleans(), cut=st.integers(min_value=0, max_value=200))
def test_parse_file_never_raises_on_format_shaped_lines(folder, pieces, compress, cut):
    data = "".join(pieces).encode()
    if compress:
        data = gzip.compress(data)
        data = data[: len(data) - cut % max(len(data), 1)]  # sometimes a gzip that stops early
    _parse_bytes(folder, data)


# --- whole captures, mutated, through `diff` ----------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_diff_of_a_mutated_capture_prints_no_traceback(tmp_path, seed):
    """Half of a real capture's files mutated: every problem is one stderr line, and the exit code is 0, 1 or 2."""
    rng = random.Random(seed)
    source = real(["extra-op-4rank", "long-window", "type-mismatch"][seed])
    for path in sorted(source.iterdir()):
        data = path.read_bytes()
        if rng.random() < 0.5:
            data = fuzz._apply(rng, rng.choice(fuzz._PLAIN), data, [(path.name, data)])
        (tmp_path / path.name).write_bytes(data)
    code, out, err = run_cli("diff", tmp_path)
    assert code in (0, 1, 2) and "Traceback" not in err
    assert all(line.startswith(("error: ", "warning: ")) for line in err.splitlines())


def test_diff_without_one_ranks_dump():
    files = [p for p in sorted(real("extra-op-4rank").iterdir()) if p.name != "fr_rank1"]
    code, out, err = run_cli("diff", *files)
    assert code == 1 and "DIVERGED" in out
