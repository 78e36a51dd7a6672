"""Gate journals (sources/gate_journal.py) and the shared key=value / JSON-lines reading (sources/keyvalue.py)."""

from __future__ import annotations

import gzip
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ncclforensics.model import GateDecision, Location, Severity, SourceFormat
from ncclforensics.sources import InputFile, detect, parse_file
from ncclforensics.sources.gate_journal import GateJournalSource
from ncclforensics.sources.keyvalue import jsonl_mode, key_values
from fixture_paths import FIXTURES, REAL, EXTRA_OP

CONSTRUCTED = FIXTURES / "constructed" / "journal"
SOURCE = GateJournalSource()


def load(path: Path) -> InputFile:
    return InputFile(path=path, name=path.name)


def parse_text(tmp_path: Path, text: str, name: str = "journal.log"):
    path = tmp_path / name
    path.write_text(text)
    return SOURCE.parse(load(path))


def problems_by_line(evidence) -> dict[int, str]:
    return {p.loc.line: p.message for p in evidence.problems}


# --- real journals: extra-op-4rank (rank 0 alone passed at step 5) -------------------------------------------------


@pytest.mark.parametrize("rank", [0, 1, 2, 3])
def test_real_journal_has_twelve_steps_of_one_rank(rank):
    file = load(EXTRA_OP / f"gate_journal_rank{rank}.log")
    evidence = SOURCE.parse(file)

    assert evidence.format is SourceFormat.GATE_JOURNAL
    assert evidence.problems == []
    assert evidence.ranks == [rank]
    assert evidence.record_count == 12
    assert [g.step for g in evidence.gates] == list(range(12))
    assert [g.seq for g in evidence.gates] == list(range(199990, 200002))
    assert [g.loc for g in evidence.gates] == [Location(file.name, step + 1) for step in range(12)]


@pytest.mark.parametrize("rank", [0, 1, 2, 3])
def test_real_journal_decisions(rank):
    gates = SOURCE.parse(load(EXTRA_OP / f"gate_journal_rank{rank}.log")).gates
    for gate in gates:
        passed = rank == 0 and gate.step == 5
        assert gate.decision == ("pass" if passed else "skip")
        assert gate.fits is passed
        assert gate.md_none is None and gate.mode is None and gate.time is None


def test_real_journals_disagree_only_at_rank0_step5():
    gates = [g for r in range(4) for g in SOURCE.parse(load(EXTRA_OP / f"gate_journal_rank{r}.log")).gates]
    assert len(gates) == 48
    assert [(g.rank, g.step) for g in gates if g.decision == "pass"] == [(0, 5)]
    rank0_step5 = next(g for g in gates if (g.rank, g.step) == (0, 5))
    assert rank0_step5 == GateDecision(loc=Location("gate_journal_rank0.log", 6), rank=0, step=5, decision="pass",
                                       seq=199995, fits=True)


# The one rank whose gate passed alone, per capture (tests/fixtures/real/README.md); every other decision is skip.
LONE_PASS = {"extra-op-4rank": (0, 5), "long-window": (1, 2), "subcomm-divergence": (3, 4), "type-mismatch": (1, 5)}


@pytest.mark.parametrize("scenario", sorted(LONE_PASS))
def test_every_real_capture_has_one_lone_pass(scenario):
    gates = []
    for path in sorted((REAL / scenario).glob("gate_journal_rank*.log")):
        evidence = SOURCE.parse(load(path))
        assert evidence.problems == [] and len(evidence.ranks) == 1
        gates += evidence.gates
    assert {g.rank for g in gates} == {0, 1, 2, 3}
    assert [(g.rank, g.step) for g in gates if g.decision == "pass"] == [LONE_PASS[scenario]]
    assert all(g.fits is (g.decision == "pass") and g.seq == 199990 + g.step for g in gates)


@pytest.mark.parametrize("path", sorted(REAL.glob("*/gate_journal_rank*")) + sorted(CONSTRUCTED.glob("gate_*")),
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_detect_picks_gate_journal(path):
    file = load(path)
    assert detect(file) is not None and detect(file).format is SourceFormat.GATE_JOURNAL
    assert parse_file(file).format is SourceFormat.GATE_JOURNAL


@pytest.mark.parametrize("path", sorted(REAL.glob("*/fingerprint_rank*"))
                         + sorted((FIXTURES / "public" / "vllm_specdecode").glob("*")),
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_sniff_is_zero_on_fingerprints_and_vllm_logs(path):
    file = load(path)
    assert SOURCE.sniff(file.head(), file.head().decode()) == 0.0


def test_gzipped_journal_reads_like_the_plain_one(tmp_path):
    plain = EXTRA_OP / "gate_journal_rank0.log"
    packed = tmp_path / "gate_journal_rank0.log.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert detect(load(packed)).format is SourceFormat.GATE_JOURNAL
    assert SOURCE.parse(InputFile(path=packed, name=plain.name)).gates == SOURCE.parse(load(plain)).gates


def test_corrupt_gzip_is_a_diagnostic_not_an_exception(tmp_path):
    path = tmp_path / "gate.log.gz"
    path.write_bytes(b"\x1f\x8bnot deflate at all")
    evidence = SOURCE.parse(load(path))
    assert evidence.gates == [] and evidence.has_errors


# --- constructed journals -------------------------------------------------------------------------------------------


def test_jsonl_with_every_field_and_consensus_keys():
    evidence = SOURCE.parse(load(CONSTRUCTED / "gate_rank1.jsonl"))
    assert evidence.problems == []
    assert evidence.ranks == [1]
    assert [g.decision for g in evidence.gates] == ["pass", "pass", "skip", "pass"]
    assert evidence.gates[0] == GateDecision(
        loc=Location("gate_rank1.jsonl", 1), rank=1, step=0, decision="pass", seq=130000, proposed_pass_count=8,
        sched_count=8, fits=True, md_none=False, max_model_len=131072, spec_tokens=3, mode="observe",
        time=1716812345.25,
    )
    last = evidence.gates[3]  # carries consensus, local_decision, would_pass_total: ignored
    assert (last.step, last.fits, last.proposed_pass_count, last.time) == (3, True, 5, 1716812348.25)


def test_broken_jsonl_lines_are_located_errors_and_parsing_goes_on():
    evidence = SOURCE.parse(load(CONSTRUCTED / "gate_broken.jsonl"))
    assert [(g.loc.line, g.step, g.decision) for g in evidence.gates] == [
        (2, 0, "skip"), (4, 2, "pass"), (5, 3, "pass"), (9, 5, "skip")]
    assert evidence.gates[1].fits is None  # `"fits": "perhaps"` dropped, the decision kept
    assert evidence.gates[2].sched_count is None and evidence.gates[2].time == 1716812345.5
    assert evidence.gates[3].md_none is True
    problems = problems_by_line(evidence)
    assert sorted(problems) == [3, 4, 5, 6, 7, 8]  # line 1 (a metadata object) is not a gate record
    assert "decision 'maybe' is neither pass nor skip" in problems[3]
    assert "fits 'perhaps' is not a flag" in problems[4]
    assert "sched_count -1 is below 0" in problems[5]
    assert problems[6].startswith("invalid JSON: Expecting ',' delimiter")
    assert "no step" in problems[7]
    assert problems[8] == "neither a JSON object nor a key=value record in a JSON-lines file"
    assert all(p.severity is Severity.ERROR for p in evidence.problems)
    assert str(evidence.problems[0]) == (
        "gate_broken.jsonl:3: broken gate record: decision 'maybe' is neither pass nor skip")


def test_prefixed_log_lines():
    evidence = SOURCE.parse(load(CONSTRUCTED / "gate_prefixed.log"))
    assert evidence.ranks == [3]
    first, commas, bad_time, prefixed_json = evidence.gates
    assert first == GateDecision(loc=Location("gate_prefixed.log", 2), rank=3, step=0, decision="pass", seq=4090,
                                 fits=True, md_none=False, mode="enforce")
    assert (commas.loc.line, commas.step, commas.seq, commas.fits, commas.decision) == (5, 1, 4091, True, "skip")
    assert (bad_time.loc.line, bad_time.step, bad_time.time) == (7, 3, None)
    assert (prefixed_json.loc.line, prefixed_json.step, prefixed_json.seq) == (8, 4, 4094)
    problems = problems_by_line(evidence)
    assert sorted(problems) == [4, 6, 7]  # lines 1, 3 and 9 are other log output
    assert problems[4] == "broken gate record: step 'x' is not an integer"
    assert problems[6] == "broken gate record: no decision"
    assert "time 'yesterday' is not a number" in problems[7]


@pytest.mark.parametrize("line, expected", [
    ("step=0 rank=0 seq=199990 fits=0 decision=skip", dict(step=0, rank=0, decision="skip", seq=199990, fits=False)),
    ("I0527 12:00:00.1 123 gate.py:9] step=7 rank=2 decision=Pass md_none=true", dict(step=7, rank=2, decision="pass",
                                                                                    md_none=True)),
    ("[rank=1]: step=3 rank=1 decision=skip", dict(step=3, rank=1, decision="skip")),
    ('step=3 rank=1 decision="skip" mode="observe only"', dict(step=3, rank=1, decision="skip", mode="observe only")),
    ('{"step": 1, "rank": 0, "decision": "skip", "fits": 0, "md_none": 1, "time": 12.5}',
     dict(step=1, rank=0, decision="skip", fits=False, md_none=True, time=12.5)),
    ('{"step": 1.0, "rank": "0", "decision": "skip", "seq": null}', dict(step=1, rank=0, decision="skip")),
])
def test_one_line(tmp_path, line, expected):
    evidence = parse_text(tmp_path, line + "\n")
    assert evidence.problems == []
    assert evidence.gates == [GateDecision(loc=Location("journal.log", 1), **expected)]


@pytest.mark.parametrize("line, message", [
    ("step=x rank=0 decision=pass", "broken gate record: step 'x' is not an integer"),
    ("step=1 rank=-1 decision=pass", "broken gate record: rank -1 is below 0"),
    ("step=1 rank=0 decision=maybe", "broken gate record: decision 'maybe' is neither pass nor skip"),
    ("step= rank= decision=pass", "broken gate record: no step; no rank"),
    ('{"step": true, "rank": 0, "decision": "pass"}', "broken gate record: step True is not an integer"),
    ('{"step": 1, "rank": 0, "decision": 1}', "broken gate record: decision 1 is neither pass nor skip"),
    ('{"step": 1, "rank": 0, "decision": "pass"', "invalid JSON: Expecting ',' delimiter (column 42)"),
    ('{"step": 1, "rank": 0, "decision": "pass", "fits": 2}',
     "gate record with bad fields (read without them): fits 2 is not a flag (true/false or 1/0)"),
])
def test_broken_line(tmp_path, line, message):
    evidence = parse_text(tmp_path, "step=0 rank=0 decision=skip\n" + line + "\nstep=2 rank=0 decision=skip\n")
    assert [p.message for p in evidence.problems] == [message]
    assert evidence.problems[0].loc == Location("journal.log", 2)
    assert {g.step for g in evidence.gates} >= {0, 2}  # the lines around it are read


@pytest.mark.parametrize("line", [
    "step=3 rank=0 loss=1.25",  # no decision
    "decision=pass",  # no step or rank: some other log's decision
    "NCCL INFO comm 0x55d rank 0 nranks=4 cudaDev 0 busId 1a000 - Init COMPLETE",
    "{'step': 1, 'rank': 0}",  # a Python dict printed in a log
    "",
])
def test_other_log_output_is_ignored_silently(tmp_path, line):
    evidence = parse_text(tmp_path, "step=0 rank=0 decision=skip\nstep=1 rank=0 decision=skip\n" + line + "\n")
    assert evidence.problems == [] and len(evidence.gates) == 2


def test_in_a_jsonl_file_every_line_counts(tmp_path):
    text = '{"step": 0, "rank": 0, "decision": "skip"}\n{"step": 1, "rank": 0, "decision": "skip"}\ngarbage\n'
    evidence = parse_text(tmp_path, text, "gate.jsonl")
    assert [p.loc.line for p in evidence.problems] == [3]
    assert len(evidence.gates) == 2


def test_sniff_is_the_share_of_gate_lines():
    text = "step=0 rank=0 decision=skip\nhello\nstep=1 rank=0 decision=pass\nworld\n"
    assert SOURCE.sniff(text.encode(), text) == pytest.approx(0.5)
    assert SOURCE.sniff(b"", "") == 0.0
    assert SOURCE.sniff(b"\x00\x01step=0 rank=0 decision=skip", "\x00\x01step=0 rank=0 decision=skip") == 0.0


# --- the shared tokenizer -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("line, expected", [
    ("step=0 rank=0 checksum=10240.000000", {"step": "0", "rank": "0", "checksum": "10240.000000"}),
    ("nranks=4 rank=1", {"nranks": "4", "rank": "1"}),  # `nranks` is not `rank`
    ("--step=3 step=4", {"step": "4"}),  # a command-line flag is not a token
    ("[rank=2]: a=1, b=2; c=(x)", {"rank": "2", "a": "1", "b": "2", "c": "(x"}),
    ('mode="a b" mode=c k="say \\"hi\\""', {"mode": "a b", "k": 'say "hi"'}),
    ("x= y=1", {"x": "", "y": "1"}),
    ("no tokens here", {}),
])
def test_key_values(line, expected):
    assert key_values(line) == expected


def test_jsonl_mode():
    assert jsonl_mode(['{"a": 1}', "", '{"b": 2}', "x=1"])
    assert not jsonl_mode(["x=1", "y=2", '{"a": 1}'])
    assert not jsonl_mode(["", "  "])


# --- no input makes it raise ----------------------------------------------------------------------------------------

_FRAGMENTS = st.sampled_from([
    "step=", "rank=", "decision=", "pass", "skip", "fits=", "1", "0", "x", " ", "\n", "{", "}", '"step": ', '"rank": ',
    '"decision": ', '"pass"', ", ", "[", "]", "null", "true", "1e999", "-5", "\"", "\\", "time=", "nan", "\r",
    "\u2028", "\x00", "{\"decision\": ", "[" * 50,
])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=3000) | st.lists(_FRAGMENTS | st.text(max_size=8), max_size=80).map(
    lambda parts: "".join(parts).encode("utf-8", "surrogatepass")))
def test_nothing_raises(data):
    assume(not data.startswith(b"\x1f\x8b"))  # corrupt gzip: base.py's reading (see the xfail below)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "input"
        path.write_bytes(data)
        evidence = parse_file(InputFile(path=path, name=str(path)))
        assert evidence.path == str(path)
        direct = SOURCE.parse(InputFile(path=path, name="input"))
        assert all(g.decision in ("pass", "skip") for g in direct.gates)
        assert all(p.loc.path == "input" for p in direct.problems)
        SOURCE.sniff(data[:65536], data[:65536].decode("utf-8", "replace"))


def test_parse_file_on_corrupt_gzip(tmp_path):
    path = tmp_path / "corrupt.gz"
    path.write_bytes(b"\x1f\x8bgarbage")
    assert parse_file(InputFile(path=path, name=str(path))).has_errors


def test_none_values_and_comments(tmp_path):
    text = ("# gate journal, rank 0\n"
            "step=0 rank=0 seq=None fits=null md_none=False decision=skip\n"
            '{"step": 1, "rank": 0, "decision": "pass", "fits": null}\n'
            '# {"step": 2, "rank": 0, "decision": "oops"}\n')
    evidence = parse_text(tmp_path, text, "gate.jsonl")
    assert evidence.problems == []
    assert evidence.gates == [
        GateDecision(loc=Location("gate.jsonl", 2), rank=0, step=0, decision="skip", md_none=False),
        GateDecision(loc=Location("gate.jsonl", 3), rank=0, step=1, decision="pass"),
    ]


def test_reads_what_the_live_journal_writer_writes(tmp_path):
    from ncclforensics.live.journal_writer import JournalWriter, gate_record

    path = tmp_path / "gate_rank0.jsonl"
    with JournalWriter(path) as writer:
        writer.write(gate_record(5, 0, "pass", seq=995, proposed_pass_count=1, sched_count=1, fits=True, md_none=False,
                                 max_model_len=1000, spec_tokens=3, mode="enforce", time=1764406506.12,
                                 local_decision="skip", consensus="pass", peers={"0": [5, 0, 1, 0, 0]},
                                 would_pass_total=1))
        writer.write(gate_record(6, 0, "skip"))
    evidence = SOURCE.parse(load(path))
    assert evidence.problems == []
    assert evidence.gates == [
        GateDecision(loc=Location("gate_rank0.jsonl", 1), rank=0, step=5, decision="pass", seq=995,
                     proposed_pass_count=1, sched_count=1, fits=True, md_none=False, max_model_len=1000, spec_tokens=3,
                     mode="enforce", time=1764406506.12),
        GateDecision(loc=Location("gate_rank0.jsonl", 2), rank=0, step=6, decision="skip"),
    ]


def test_a_journal_cut_inside_its_last_line_reports_the_cut_and_reads_no_decision(tmp_path):
    """`seq=199995` cut to `seq=1999` read as a decision at seq 1999 (outside the ceiling window); the last line
    of a journal cut short is now reported at its file:line and not read."""
    from ncclforensics.sources import InputFile, parse_file

    path = tmp_path / "gate_journal_rank0.log"
    path.write_text("step=4 rank=0 seq=199994 fits=0 decision=skip\nstep=5 rank=0 seq=1999")
    evidence = parse_file(InputFile(path, path.name))
    assert [g.step for g in evidence.gates] == [4]
    assert [(p.loc.line, p.severity.value) for p in evidence.problems] == [(2, "warning")]
    assert "cut short" in evidence.problems[0].message
    path.write_text('{"step": 4, "rank": 0, "decision": "skip"}\n{"step": 5, "rank": 0, "decision": "pa')
    evidence = parse_file(InputFile(path, path.name))
    assert [g.step for g in evidence.gates] == [4] and "cut short" in evidence.problems[0].message
