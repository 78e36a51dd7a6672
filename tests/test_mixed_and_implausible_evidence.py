"""Evidence mixed with another job's, journals claiming ranks the job cannot have, RAS replies that cannot all be
true: each is reported at its file:line, and none moves the answer without saying so."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from cli_helpers import diff_json, real, run_cli

from ncclforensics.sources import InputFile, parse_file

FIXTURES = Path(__file__).parent / "fixtures"

EXTRA_OP = real("extra-op-4rank")  # root seq 25 (rank 0, step 5), wedge seq 50
LONG_WINDOW = real("long-window")  # another job: root seq 8 (rank 1, step 2)


def copy_capture(tmp_path: Path, name: str = "ev") -> Path:
    folder = tmp_path / name
    shutil.copytree(EXTRA_OP, folder)
    return folder


def problems_of(d: dict, path: Path) -> list[str]:
    return [p["message"] for p in d["problems"] if p["file"] == str(path)]


def test_another_jobs_folder_is_left_out_whole_its_journals_too():
    _, alone = diff_json(EXTRA_OP)
    code, d = diff_json(EXTRA_OP, LONG_WINDOW)
    assert code == 2  # files left out are trouble, the answer is still given
    for path in sorted(LONG_WINDOW.iterdir()):
        assert any("different job" in m for m in problems_of(d, path)), path
    assert d["root"]["seq"] == alone["root"]["seq"] == 25 and d["root"]["step"] == alone["root"]["step"] == 5
    assert d["gate"]["step"] == 5 and d["wedge"]["seq"] == 50
    cited = json.dumps({k: d[k] for k in ("root", "gate", "wedge", "window", "evidence")})
    assert str(LONG_WINDOW) not in cited


def test_files_without_communicators_stay_when_their_folder_names_none(tmp_path):
    # Journals and dumps in a folder of their own (a common layout: logs/, fr/, journals/) are the job's.
    logs, journals = tmp_path / "logs", tmp_path / "journals"
    logs.mkdir()
    journals.mkdir()
    for path in EXTRA_OP.iterdir():
        shutil.copy(path, (journals if path.name.startswith("gate_journal") else logs) / path.name)
    code, d = diff_json(logs, journals)
    assert code == 1 and d["root"]["step"] == 5 and not any("different job" in p["message"] for p in d["problems"])


def test_a_gate_journal_of_a_rank_beyond_the_job_is_a_warning_at_its_line(tmp_path):
    folder = copy_capture(tmp_path)
    journal = folder / "gate_journal_rank3.log"
    journal.write_text(journal.read_text().replace("rank=3", "rank=99"))
    code, d = diff_json(folder)
    [message] = [p for p in d["problems"] if "rank 99" in p["message"]]
    assert message["file"] == str(journal) and message["line"] == 1 and message["severity"] == "warning"
    assert "0..3" in message["message"] and code == 1 and d["root"]["seq"] == 25


def test_two_gate_journals_claiming_one_rank_are_a_warning_naming_both(tmp_path):
    folder = copy_capture(tmp_path)
    journal = folder / "gate_journal_rank3.log"
    lines = journal.read_text().replace("rank=3", "rank=2").splitlines(keepends=True)
    lines[7] = lines[7].replace("decision=skip", "decision=pass")  # step 7: the two files differ
    journal.write_text("".join(lines))
    code, d = diff_json(folder)
    [warning] = [p for p in d["problems"] if "two files claim one rank" in p["message"]]
    assert warning["file"] == str(journal) and warning["line"] == 1
    assert str(folder / "gate_journal_rank2.log") + ":1" in warning["message"]
    assert f"{journal}:8 says pass" in warning["message"] and "step 7" in warning["message"]
    # The first file's decisions are used, so step 7 is no disagreement: the cause stays at step 5.
    assert code == 1 and d["gate"]["step"] == 5 and d["root"]["step"] == 5


def ras_reply_pair(tmp_path: Path, later_text: str) -> Path:
    folder = tmp_path / "ras"
    shutil.copytree(EXTRA_OP, folder, ignore=shutil.ignore_patterns("ras_*"))
    (folder / "ras_status_q0.txt").write_text((EXTRA_OP / "ras_status_q0.txt").read_text())
    (folder / "ras_status_q1.txt").write_text(later_text)
    return folder


def test_ras_counts_going_backwards_are_a_warning_naming_both_replies(tmp_path):
    text = (EXTRA_OP / "ras_status_q1.txt").read_text()
    folder = ras_reply_pair(tmp_path, text.replace("operation 49", "operation 40").replace("operation 50", "operation 41"))
    code, d = diff_json(folder)
    [warning] = [p for p in d["problems"] if "go backwards" in p["message"]]
    assert warning["file"] == str(folder / "ras_status_q1.txt") and warning["line"] == 24
    assert f"{folder / 'ras_status_q0.txt'}:24" in warning["message"] and "50" in warning["message"]
    assert code == 1 and d["root"]["seq"] == 25


def test_a_json_reply_contradicting_a_text_reply_is_a_warning_naming_both(tmp_path):
    folder = tmp_path / "ras"
    folder.mkdir()
    shutil.copy(EXTRA_OP / "ras_status_q0.txt", folder)  # rank 0 at 50, the others at 49
    doc = json.loads((EXTRA_OP / "ras_json_q0.txt").read_text())
    for rank in doc["communicators"][0]["ranks"]:
        rank["collective_counts"]["AllReduce"] = 50 if rank["rank"] == 2 else 49  # rank 2 ahead instead
    (folder / "ras_json_q0.txt").write_text(json.dumps(doc, indent=2))
    _, d = diff_json(folder)
    [warning] = [p for p in d["problems"] if "contradict" in p["message"]]
    assert str(folder / "ras_status_q0.txt") + ":24" in warning["message"]
    assert warning["file"] == str(folder / "ras_json_q0.txt") and "no order of the two fits both" in warning["message"]


def test_a_ras_json_reply_of_size_4_listing_3_ranks_is_a_warning(tmp_path):
    doc = json.loads((EXTRA_OP / "ras_json_q0.txt").read_text())
    comm = doc["communicators"][0]
    comm["ranks"] = [r for r in comm["ranks"] if r["rank"] != 0]  # the one rank ahead is not listed
    reply = tmp_path / "ras_json_q0.txt"
    reply.write_text(json.dumps(doc, indent=2))
    code, d = diff_json(reply)
    [warning] = [p for p in d["problems"] if "in no list" in p["message"]]
    assert warning["file"] == str(reply) and warning["line"] == 9
    assert "size 4 but 3 rank(s) listed: rank(s) 0" in warning["message"] and "ranks_count 4" in warning["message"]
    assert code == 0  # a warning, not trouble; and what the reply does not list is not called agreement:
    _, out, _ = run_cli("diff", reply)
    assert "CONSISTENT" not in out


def test_a_complete_incomplete_reply_is_not_agreement():
    reply = FIXTURES / "public" / "ras_text" / "nccl-docs08ras-2.txt"  # rank 7 gone, nothing else
    _, out, _ = run_cli("diff", reply)
    assert out.startswith("INCONCLUSIVE") and "ranks) agree" not in out and "INCOMPLETE" in out
    _, data = diff_json(reply)
    assert data["verdict"] == "inconclusive"


# --- big gate journals, read column-wise ---------------------------------------------------------------------

ODD_GATE_LINES = [
    "step={i} rank=0 seq=199990 fits=0 decision=skip",
    '{{"step": {i}, "rank": 1, "seq": 5, "decision": "PASS", "fits": true, "time": 1795942499.43, "mode": "observe"}}',
    "[rank2] INFO gate: step={i} rank=2 fits=yes decision=pass mode=enforce",
    "# step={i} rank=0 decision=pass (a comment)",
    "step={i} rank=0 decision=maybe",  # broken: neither pass nor skip
    "step={i} rank=-1 decision=skip",  # broken: below 0
    "step={i} rank=3 seq=99999999999999999999 decision=skip",  # seq too large: read without it
    '{{"step": {i}, "rank": 1, "decision": "skip", "mode": true}}',  # mode is not text
    '{{"step": {i}.0, "rank": 1, "decision": "skip"}}',
    '{{"step": "{i}", "rank": 1, "decision": "skip", "fits": 1}}',
    'step={i} rank=0 decision=pass mode="two words"',
    "xstep={i} rank=0 decision=pass",  # no step key: other log output
    "step={i} rank=0 nranks=4 decision=pass fits=0 fits=1",
    '{{"decision": "pass", "rank": 0}}',  # no step
    "",
]


def test_a_big_journal_reads_column_wise_to_the_same_records_and_problems(tmp_path, monkeypatch):
    from ncclforensics.sources import keyvalue

    lines = [ODD_GATE_LINES[i % len(ODD_GATE_LINES)].format(i=i) for i in range(3 * keyvalue.COLUMNAR_MIN_LINES)]
    journal = tmp_path / "gate_journal_rank0.log"
    journal.write_text("\n".join(lines) + "\nstep=9 rank=0 decis")  # and a last line cut short
    columnar = parse_file(InputFile(journal, journal.name))
    monkeypatch.setattr(keyvalue, "COLUMNAR_MIN_LINES", 10**9)
    by_line = parse_file(InputFile(journal, journal.name))
    assert columnar.gates == by_line.gates and columnar.problems == by_line.problems
    assert len(by_line.gates) > len(lines) // 2 and any("cut short" in p.message for p in by_line.problems)
    from ncclforensics.sources.gate_journal import _COLUMNS
    assert len(_COLUMNS.read(lines, journal.name)) >= len(lines) // 4  # the plain lines took the column-wise path


def test_a_ras_json_reply_claiming_a_huge_size_is_a_warning_in_bounded_memory(tmp_path):
    doc = json.loads((EXTRA_OP / "ras_json_q0.txt").read_text())
    doc["communicators"][0]["size"] = 10**12
    reply = tmp_path / "ras_json_q0.txt"
    reply.write_text(json.dumps(doc, indent=2))
    shutil.copy(reply, tmp_path / "ras_json_q1.txt")
    _, d = diff_json(tmp_path)
    warnings = [p for p in d["problems"] if "size 1000000000000 is no communicator's" in p["message"]]
    assert len(warnings) == 2 and warnings[0]["line"] == 9 and "read as unknown" in warnings[0]["message"]
    assert d["root"]["outlier_ranks"] == [0]  # the replies still say rank 0 launched one more


def test_a_ras_json_reply_of_size_20_listing_4_ranks_names_the_first_unlisted(tmp_path):
    doc = json.loads((EXTRA_OP / "ras_json_q0.txt").read_text())
    doc["communicators"][0]["size"] = 20
    reply = tmp_path / "ras_json_q0.txt"
    reply.write_text(json.dumps(doc, indent=2))
    _, d = diff_json(reply)
    [warning] = [p for p in d["problems"] if "in no list" in p["message"]]
    assert "size 20 but 4 rank(s) listed: rank(s) 4, 5, 6, 7, 8, 9, 10, 11, ... in no list" in warning["message"]
