"""Files that are not evidence beside the evidence: skipped with a warning; evidence that cannot be read: exit 2."""

from __future__ import annotations

import shutil

from cli_helpers import FIXTURES, real, run_cli

TRUTH = sorted((FIXTURES / "real" / "truth").glob("*.json"))  # what a launcher knew: JSON of no evidence format


def copy_of(scenario: str, tmp_path):
    folder = tmp_path / scenario
    shutil.copytree(real(scenario), folder)
    return folder


def test_a_config_file_in_the_incident_folder_keeps_exit_1(tmp_path):
    folder = copy_of("extra-op-4rank", tmp_path)
    (folder / "config.yaml").write_text("model: llama-3-70b\ntensor_parallel_size: 4\n")
    code, out, err = run_cli("diff", folder)
    assert code == 1 and "DIVERGED" in out
    assert err.strip() == f"warning: {folder / 'config.yaml'}: unrecognised format: not evidence; skipped"


def test_evidence_that_cannot_be_read_is_still_exit_2(tmp_path):
    folder = copy_of("extra-op-4rank", tmp_path)
    (folder / "fr_rank0").write_bytes((folder / "fr_rank0").read_bytes()[:60])  # a dump cut short
    (folder / "nccl.vm.999.log").write_bytes(b"")
    code, out, err = run_cli("diff", folder)
    assert code == 2 and "DIVERGED" in out
    assert f"error: {folder / 'nccl.vm.999.log'}: empty file" in err and f"{folder / 'fr_rank0'}" in err


def test_a_file_named_on_the_command_line_that_no_parser_knows_is_an_error(tmp_path):
    stray = tmp_path / "notes.txt"
    stray.write_text("the job hung after step 5\n")
    code, _, err = run_cli("diff", real("extra-op-4rank"), stray)
    assert code == 2 and f"error: {stray}: unrecognised format" in err


def test_gates_skips_what_is_not_a_journal_and_names_each_file_once():
    code, out, err = run_cli("gates", real("extra-op-4rank"), *TRUTH)
    assert code == 1 and "step 5" in out  # rank 0's gate passed where the others skipped
    lines = err.splitlines()
    assert all(line.startswith("warning: ") for line in lines) and lines
    for path in TRUTH:
        assert sum(str(path) in line for line in lines) <= 1
    code, out, err = run_cli("gates", *TRUTH)
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert code == 2 and errors == [f"error: {len(TRUTH)} inputs: no gate journal record in the inputs"]
