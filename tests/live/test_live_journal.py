"""The gate journal, written and followed (no torch needed)."""

from __future__ import annotations

import os

import pytest
from live_helpers import REAL

from ncclforensics.errors import LiveError
from ncclforensics.live.journal_tail import GateLine, GateLineParser, JournalTail, parse_gate_line
from ncclforensics.live.journal_writer import JournalWriter, gate_record

pytestmark = pytest.mark.live


def test_writer_appends_whole_lines_and_flushes_each(tmp_path):
    path = tmp_path / "deep" / "gate_rank0.jsonl"
    writer = JournalWriter(path)
    writer.write(gate_record(0, 0, "skip", seq=10, fits=False, mode="observe", peers={"0": [0, 0, 1, 0, 0]}))
    assert path.read_text().count("\n") == 1  # visible before close: flushed per line
    writer.close()
    with JournalWriter(path) as again:
        again.write(gate_record(1, 0, "pass"))
    lines = path.read_text().splitlines()
    assert len(lines) == 2 and lines[0].startswith('{"step": 0, "rank": 0, "seq": 10, "decision": "skip"')
    assert "md_none" not in lines[0]  # None values are left out


@pytest.mark.parametrize(("text", "expected"), [
    ('{"step": 5, "rank": 0, "seq": 995, "decision": "pass", "fits": true, "extra": [1]}',
     GateLine(5, "pass", 0, 995, fits=True)),
    ("step=5 rank=0 seq=199995 fits=1 decision=pass", GateLine(5, "pass", 0, 199995, fits=True)),
    ("[rank0] I1129 gate: step=7 rank=0 fits=0 decision=SKIP sched_count=4", GateLine(7, "skip", 0, sched_count=4,
                                                                                     fits=False)),
    ("", None),
    ("# a comment", None),
    ("INFO unrelated log line with nranks=4", None),
    ('{"kind": "header", "version": 1}', None),  # a JSON record of another kind
])
def test_parse_lines(text, expected):
    assert parse_gate_line(text) == expected


@pytest.mark.parametrize(("text", "message"), [
    ('{"step": 1, bad', "invalid JSON"),
    ('{"step": "x", "rank": 0, "decision": "pass"}', "`step` is not an integer"),
    ('{"rank": 0, "decision": "pass"}', "no `step`"),
    ('{"step": 1, "rank": 0, "decision": "maybe"}', "`decision` must be pass or skip"),
    ("[1, 2]", None),  # not an object: handled below
    ("step=1 rank=0 decision=pass fits=perhaps", "`fits` is not a boolean"),
])
def test_parse_errors(text, message):
    if message is None:
        assert parse_gate_line(text) is None  # does not start with `{`: other log output
        return
    with pytest.raises(ValueError, match=message):
        parse_gate_line(text)


def test_json_lines_journal_is_strict():
    parser = GateLineParser()
    assert parser.parse('{"step": 0, "rank": 0, "decision": "skip"}') is not None
    with pytest.raises(ValueError, match="JSON-lines journal"):
        parser.parse("garbage in a JSON-lines file")
    parser.reset()
    assert parser.parse("garbage in a log file") is None


def test_real_key_value_journal_reads_like_the_offline_reader():
    from ncclforensics.sources import InputFile, parse_file

    path = REAL / "extra-op-4rank" / "gate_journal_rank0.log"
    tail = JournalTail(path, follow=False)
    parser = GateLineParser()
    mine = [parser.parse(raw.decode()) for _, _, raw in tail.read(100)]
    offline = parse_file(InputFile(path=path, name=path.name)).gates
    assert [(g.step, g.rank, g.decision, g.seq, g.fits) for g in offline] == \
        [(g.step, g.rank, g.decision, g.seq, g.fits) for g in mine]
    assert tail.eof


def test_tail_follows_partial_lines_rotation_and_truncation(tmp_path):
    path = tmp_path / "j.log"
    tail = JournalTail(path, follow=True)
    assert tail.read(10) == []  # not there yet: waits, like tail -F
    path.write_bytes(b"one\ntw")
    assert [(n, raw) for _, n, raw in tail.read(10)] == [(1, b"one")]
    with open(path, "ab") as f:
        f.write(b"o\nthree\n")
    assert [raw for _, _, raw in tail.read(10)] == [b"two", b"three"]
    with open(path, "ab") as f:
        f.write(b"last of the old file")  # no newline: completed by the rotation
    os.rename(path, tmp_path / "j.log.1")
    path.write_bytes(b"new 1\n")
    got = tail.read(10)
    assert [raw for _, _, raw in got] == [b"last of the old file", b"new 1"]
    assert got[0][0] != got[1][0] and got[1][1] == 1  # a new generation, line numbers restart
    assert tail.rotations == 1
    with open(path, "ab") as f:
        f.write(b"new 2\n")
    assert [raw for _, _, raw in tail.read(10)] == [b"new 2"]
    path.write_bytes(b"after truncate\n")  # shorter than what was read: truncated in place
    assert [(n, raw) for _, n, raw in tail.read(10)] == [(1, b"after truncate")]
    assert tail.truncations == 1
    tail.close()


def test_tail_without_follow(tmp_path):
    path = tmp_path / "j.log"
    path.write_bytes(b"a\nb\nc")
    tail = JournalTail(path, follow=False)
    assert [raw for _, _, raw in tail.read(2)] == [b"a", b"b"]
    assert [raw for _, _, raw in tail.read(2)] == [b"c"] and tail.eof
    with pytest.raises(LiveError, match="no such journal"):
        JournalTail(tmp_path / "missing", follow=False).read(1)


def test_tail_refuses_endless_lines(tmp_path):
    path = tmp_path / "blob"
    path.write_bytes(b"x" * (2 << 20))
    with pytest.raises(LiveError, match=r"blob:1: line longer than"):
        JournalTail(path, follow=True).read(1)
