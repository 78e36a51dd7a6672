"""The command line: one test per exit code, `parse --json` on every real capture, bad input handling."""

from __future__ import annotations

import gzip
import json
import os
import pty
import subprocess
import sys

import pytest

from cli_helpers import REAL, diff_json, real, run_cli

FORMAT_BY_PREFIX = {
    "nccl.": "nccl-log", "torch_rank": "torch-log", "fr_json_rank": "flight-recorder", "fr_rank": "flight-recorder",
    "ras_status": "ras-text", "ras_verbose": "ras-text", "ras_json": "ras-json", "gate_journal": "gate-journal",
    "fingerprint": "fingerprint",
}


def expected_format(name: str) -> str:
    return next(fmt for prefix, fmt in FORMAT_BY_PREFIX.items() if name.startswith(prefix))


@pytest.mark.parametrize("scenario", sorted(p.name for p in REAL.iterdir()))
def test_parse_json_detects_every_real_file(scenario):
    code, out, err = run_cli("parse", "--json", real(scenario))
    assert code == 0, err
    rows = json.loads(out)
    assert rows and all(e["severity"] == "warning" for r in rows for e in r["errors"])
    for row in rows:
        name = row["file"].rsplit("/", 1)[-1]
        assert row["format"] == expected_format(name), name
        assert row["records"] > 0 or row["format"] == "torch-log", name


def test_parse_json_counts_on_extra_op():
    _, out, _ = run_cli("parse", "--json", real("extra-op-4rank"))
    by_name = {r["file"].rsplit("/", 1)[-1]: r for r in json.loads(out)}
    assert by_name["nccl.vm.442.log"]["records"] == 50 and by_name["nccl.vm.442.log"]["ranks"] == [0]
    assert by_name["nccl.vm.443.log"]["records"] == 49
    assert by_name["nccl.vm.442.log"]["comms"] == ["0x1715b7bd1b8fda9e"]
    assert by_name["fr_rank0"]["records"] == 50 and by_name["fr_rank0"]["ranks"] == [0]
    assert by_name["fr_rank3"]["records"] == 49 and by_name["fr_rank3"]["ranks"] == [3]
    assert by_name["gate_journal_rank2.log"]["records"] == 12 and by_name["gate_journal_rank2.log"]["ranks"] == [2]
    assert by_name["fingerprint_rank0.log"]["records"] == 11 and by_name["fingerprint_rank1.log"]["records"] == 12
    assert by_name["ras_json_q0.txt"]["comms"] == ["0x1715b7bd1b8fda9e"]
    assert by_name["torch_rank0.log"]["ranks"] == [0]


def test_exit_0_on_a_consistent_job():
    code, out, _ = run_cli("diff", real("pipeline-healthy"))
    assert code == 0 and out.startswith("CONSISTENT: ")


def test_one_rank_is_nothing_compared_not_consistent():
    code, out, _ = run_cli("diff", real("healthy-1rank"))
    assert code == 0 and out.startswith("NOTHING COMPARED: ") and "CONSISTENT" not in out
    assert "NCCL_DEBUG=INFO" in out and "TORCH_NCCL_TRACE_BUFFER_SIZE" in out  # which evidence would tell


def test_exit_1_on_a_divergence_and_the_report_reads_like_a_postmortem():
    code, out, _ = run_cli("diff", real("extra-op-4rank"))
    assert code == 1
    for text in ("DIVERGED", "0x1715b7bd1b8fda9e", "seq 25", "Cause", "step 5", "Wedge", "no partner",
                 "fr_rank0#entries[24]"):
        assert text in out, text


def test_terminal_report_lists_the_first_window_runs_and_sums_up_the_rest(monkeypatch):
    from ncclforensics.report import plain

    monkeypatch.setattr(plain, "PAIRING_LINES", 1)
    _, out, _ = run_cli("diff", real("extra-op-4rank"))
    assert "25..40" in out and "41..42" not in out  # the first run listed, the next two summed up
    summary = next(line for line in out.splitlines() if "more runs" in line)
    assert "41..49" in summary and "2 more runs" in summary and "9 collectives" in summary
    assert "count mismatch 2" in summary and "(shape-equal) 7" in summary


def test_python_dash_m_runs_the_same_commands_as_the_console_script():
    proc = subprocess.run([sys.executable, "-m", "ncclforensics", "diff", "--json", real("extra-op-4rank")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr  # a divergence found
    assert json.loads(proc.stdout)["root"]["seq"] == 25
    usage = subprocess.run([sys.executable, "-m", "ncclforensics", "--help"], capture_output=True, text=True,
                           timeout=60)
    assert usage.returncode == 0 and usage.stdout.startswith("Usage: ncclforensics ")


def test_json_is_indented_at_a_terminal_and_compact_in_a_pipe():
    _, out, _ = run_cli("diff", "--json", real("extra-op-4rank"))
    assert out.count("\n") == 1 and json.loads(out)["verdict"] == "diverged"  # CliRunner's stdout is no terminal
    primary, secondary = pty.openpty()
    with os.fdopen(primary, "rb", buffering=0) as terminal:
        proc = subprocess.Popen([sys.executable, "-m", "ncclforensics.cli", "diff", "--json", real("extra-op-4rank")],
                                stdout=secondary, stderr=subprocess.DEVNULL)
        os.close(secondary)
        shown = b""
        while True:
            try:
                chunk = terminal.read(1 << 16)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            shown += chunk
        proc.wait(timeout=60)
    text = shown.decode().replace("\r\n", "\n")
    assert '\n  "verdict": "diverged"' in text and json.loads(text) == json.loads(out)


def test_exit_2_on_bad_input_but_the_good_files_are_still_analysed(tmp_path):
    bad = tmp_path / "garbage.bin"
    bad.write_bytes(b"\x00\x01\x02" * 100)
    broken = tmp_path / "journal.log"
    broken.write_text("step=1 rank=0 decision=maybe\n")
    code, d = diff_json(real("extra-op-4rank"), bad, broken)
    assert code == 2
    assert d["verdict"] == "diverged" and d["root"]["seq"] == 25
    messages = {(p["file"], p["line"]) for p in d["problems"] if p["severity"] == "error"}
    assert (str(bad), None) in messages and (str(broken), 1) in messages
    code, out, err = run_cli("diff", real("extra-op-4rank"), bad)
    assert code == 2 and "Traceback" not in err
    assert f"error: {bad}: " in err and len([line for line in err.splitlines() if str(bad) in line]) == 1


def test_a_fault_of_the_analysis_is_one_line_and_exit_2_never_a_traceback(monkeypatch):
    # No input reaches such a fault on purpose (each one found is a bug, fixed with a test of its own), so one is
    # raised where the analysis starts: the user gets one line naming it and exit 2; --debug shows the traceback.
    from ncclforensics import api

    def broken(*args, **kwargs):
        raise ValueError("frozenset({0, 1}) is not in list")
    monkeypatch.setattr(api, "diagnose", broken)
    code, out, err = run_cli("diff", real("extra-op-4rank"))
    assert code == 2 and "Traceback" not in err and len(err.splitlines()) == 1
    assert err.startswith("error: internal error (ValueError: frozenset({0, 1}) is not in list)")
    with pytest.raises(ValueError):
        run_cli("--debug", "diff", real("extra-op-4rank"))


def test_exit_2_on_missing_path_and_empty_file(tmp_path):
    empty = tmp_path / "empty.log"
    empty.write_text("")
    code, out, err = run_cli("parse", "--json", tmp_path / "nope", empty)
    assert code == 2
    assert f"{tmp_path / 'nope'}: no such file or directory" in err and f"{empty}: empty file" in err


def test_gzip_inputs_are_read_transparently(tmp_path):
    for source in real("extra-op-4rank").iterdir():
        (tmp_path / (source.name + ".gz")).write_bytes(gzip.compress(source.read_bytes()))
    code, d = diff_json(tmp_path)
    assert code == 1 and d["root"]["seq"] == 25 and d["window"]["collectives"] == 25


def test_help_has_examples():
    for command in ("parse", "diff"):
        code, out, _ = run_cli(command, "--help")
        assert code == 0 and "Example:" in out


def test_files_from_another_job_are_reported_not_merged():
    other = real("transient-skew") / "nccl.vm.592.log"
    code, d = diff_json(real("extra-op-4rank"), other)
    assert code == 2
    assert any(p["file"] == str(other) and "different job" in p["message"] for p in d["problems"])
    assert d["root"]["seq"] == 25 and all(c["comm"] != "0x5eab805e14595f52" for c in d["comms"])
