"""What a person copies out of the terminal, or out of a pipe, into a ticket.

On a real terminal (a tmux pane of 80 and of 200 columns) no path, `file:line` or comm hash is split across rows
and no row runs past the edge; piped, the report is plain lines: no box drawing, one finding a line, every
receipt on a line of its own, short enough to paste. Also: the group's --help keeps every summary whole, and
shell completion works in a real bash.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_helpers import REAL, diff_json, real, run_cli
from tmux_pane import TMUX, broken_tokens, needs_tmux, overflowing_rows, run_in_pane

from ncclforensics.report import advice

ROOT = Path(__file__).parents[2]
BOX = re.compile("[\u2500-\u257f]")  # box drawing: ─ │ ┃ ━ ╭ ...
CLI = [sys.executable, "-m", "ncclforensics.cli"]
SCRIPT = shutil.which("ncclforensics")


def tokens_of(d: dict) -> set[str]:
    """Every receipt, comm hash and evidence location a `diff --json` answer names: what must stay whole."""
    found = {e["at"] for e in d["evidence"]} | {c["comm"] for c in d["comms"]}
    for section in (d["root"], d["wedge"]):
        for op in (section or {}).get("ops", {}).values():
            found |= {op["evidence"], *([op["flight_recorder"]] if "flight_recorder" in op else [])}
    return found


@needs_tmux
# Each capture at one width (a terminal costs seconds): narrow for most, where wrapping bites, one wide.
@pytest.mark.parametrize("capture, width", [("extra-op-4rank", 80), ("pipeline-healthy", 200),
                                            ("subcomm-divergence", 80), ("killed-rank", 80)])
def test_diff_on_a_terminal_never_splits_a_receipt(tmp_path, width, capture):
    folder = (REAL / capture).relative_to(ROOT)  # as a user types it, from the repository
    d = json.loads(subprocess.run([*CLI, "diff", "--json", str(folder)], capture_output=True, text=True, cwd=ROOT,
                                  timeout=120, check=False).stdout)
    piped = subprocess.run([*CLI, "diff", str(folder)], capture_output=True, text=True, cwd=ROOT, timeout=120,
                           check=False).stdout
    tokens = {t for t in tokens_of(d) if t in piped}  # what the report prints, it prints whole
    assert len(tokens) >= 3 and max(map(len, tokens)) <= width
    pane = run_in_pane(tmp_path, [*CLI, "diff", str(folder)], width, cwd=ROOT)
    assert pane.code == (1 if d["verdict"] == "diverged" else 0), pane.text()
    assert BOX.search(pane.text())  # a terminal gets the boxes and tables
    assert not broken_tokens(pane, tokens), (broken_tokens(pane, tokens), pane.text())
    assert not overflowing_rows(pane, width), overflowing_rows(pane, width)


@needs_tmux
def test_gates_and_acceptance_on_a_narrow_terminal(tmp_path):
    from align.test_coverage import Session, write_folders

    soak = tmp_path / "soak"
    write_folders(soak, [Session(40, 4080), Session(40, 1000, flip=(35, 0)), Session(40, 1000)])
    pane = run_in_pane(tmp_path, [*CLI, "gates", "soak"], 80, cwd=tmp_path)
    assert pane.code == 1 and "EXERCISED" in pane.text()
    assert not broken_tokens(pane, {f"soak/s001/gate_rank{r}.jsonl:36" for r in range(4)}), pane.text()
    assert not overflowing_rows(pane, 80), overflowing_rows(pane, 80)
    logs = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests/fixtures/public/vllm_specdecode").glob("*.txt"))
    pane = run_in_pane(tmp_path, [*CLI, "acceptance", *logs], 80, cwd=ROOT)
    assert not overflowing_rows(pane, 80), overflowing_rows(pane, 80)
    assert not broken_tokens(pane, set(logs)), pane.text()
    text = " ".join(pane.text().split())
    assert pane.code == 1 and "LOW ACCEPTANCE" in text and "0.067" in text


def test_piped_diff_is_plain_lines_one_receipt_each():
    result = subprocess.run([*CLI, "diff", str(real("extra-op-4rank"))], capture_output=True, text=True,
                            cwd=ROOT, timeout=120, check=False)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert not BOX.search(result.stdout)
    assert 20 < len(lines) < 90  # short enough to paste; was ~150
    assert lines[0].startswith("DIVERGED: Rank 0 launched 1 collective in comm 0x1715b7bd1b8fda9e")
    _, d = diff_json(real("extra-op-4rank"))
    at_root = set()
    for op in d["root"]["ops"].values():  # the root's receipts, each alone on its line
        assert f"    {op['evidence']}" in lines and f"    {op['flight_recorder']}" in lines
        at_root |= {op["evidence"], op["flight_recorder"]}
    for e in d["evidence"]:  # the others compiler-style, `file:line: what it says`: grep finds the whole finding
        if e["at"] not in at_root:
            assert f"  {e['at']}: {e['says']}" in lines, e
    assert "Root: comm 0x1715b7bd1b8fda9e, at seq 25: 1 extra collective; placed by call sites; outlier rank 0" \
           in result.stdout


def test_piped_report_on_one_rank_says_nothing_was_compared():
    code, out, _ = run_cli("diff", real("healthy-1rank"))
    first = out.splitlines()[0]
    assert code == 0 and first.startswith("NOTHING COMPARED: ") and "agree" not in first.split(":", 1)[1][:40]
    assert advice.LOG_SETTINGS in first and advice.FR_SETTINGS in first


def test_piped_report_of_a_consistent_run_has_no_wedge():
    code, out, _ = run_cli("diff", real("pipeline-healthy"))
    assert code == 0 and "Wedge" not in out and "wedge:" not in out and "unknown" not in out
    assert "The records of comm 0x2bf688c05758c02b end at seq 13" in out and "so there is no wedge" in out


def _no_list_or_plural_slips(text: str) -> None:
    assert not re.search(r"\b1 (collectives|polls|disagreements|sessions|steps|lines)\b", text)
    assert not re.search(r"rank\(s\)|(?<!entries)\[\d+(, \d+)*\]|b'\\x", text)
    assert "kind:" not in text and "(0)" not in text


@pytest.mark.parametrize("capture", ["extra-op-4rank", "healthy-1rank", "transient-skew", "subcomm-divergence"])
def test_words_agree_in_number_and_show_no_python_lists(capture):
    _, out, _ = run_cli("diff", real(capture))
    _no_list_or_plural_slips(out)


def test_dead_rank_words_show_no_python_lists():
    _, out, _ = run_cli("diff", real("killed-rank"))
    _no_list_or_plural_slips(out)


def test_group_help_keeps_every_summary_whole():
    code, out, _ = run_cli("--help")
    commands = out.split("Commands:", 1)[1].strip().splitlines()
    assert code == 0 and len(commands) >= 6
    assert not [row for row in commands if row.rstrip().endswith("...")], out
    code, out, _ = run_cli("live", "--help")
    assert not [row for row in out.split("Commands:", 1)[1].splitlines() if row.rstrip().endswith("...")], out


@pytest.mark.skipif(SCRIPT is None, reason="the ncclforensics console script is not on PATH")
def test_bash_completion_script_completes_commands():
    """What the README says to put in ~/.bashrc: the script, and the completions it asks for."""
    env = {**os.environ, "_NCCLFORENSICS_COMPLETE": "bash_source"}
    source = subprocess.run([SCRIPT], capture_output=True, text=True, env=env, timeout=60, check=False)
    assert "complete -o nosort -F _ncclforensics_completion ncclforensics" in source.stdout
    env = {**os.environ, "_NCCLFORENSICS_COMPLETE": "bash_complete", "COMP_WORDS": "ncclforensics live r",
           "COMP_CWORD": "2"}
    result = subprocess.run([SCRIPT], capture_output=True, text=True, env=env, timeout=60, check=False)
    assert result.stdout.split() == ["plain,ras"]


@needs_tmux
@pytest.mark.skipif(SCRIPT is None, reason="the ncclforensics console script is not on PATH")
def test_bash_completion_in_a_real_shell(tmp_path):
    """The README's line, in an interactive bash in a tmux pane: Tab completes `ncclforensics ac` to acceptance."""
    socket = tmp_path / "bash.sock"

    def tmux(*args: str) -> str:
        return subprocess.run([TMUX, "-S", str(socket), *args], capture_output=True, text=True, check=True,
                              timeout=30).stdout

    tmux("new-session", "-d", "-s", "b", "-x", "100", "-y", "20", "bash --norc --noprofile -i")
    try:
        tmux("send-keys", "-t", "b", 'eval "$(_NCCLFORENSICS_COMPLETE=bash_source ncclforensics)"', "Enter")
        tmux("send-keys", "-t", "b", "ncclforensics ac", "Tab")
        deadline = time.monotonic() + 30
        while "ncclforensics acceptance" not in (pane := tmux("capture-pane", "-p", "-t", "b")):
            assert time.monotonic() < deadline, pane
            time.sleep(0.2)
    finally:
        subprocess.run([TMUX, "-S", str(socket), "kill-server"], capture_output=True, timeout=30, check=False)
