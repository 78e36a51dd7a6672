"""Looking at part of a job: `diff --rank/--comm`, a pasted log on stdin, and the aligned `--around` view."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from cli_helpers import REAL, diff_json, real, run_cli
from click.testing import CliRunner

from ncclforensics.cli import cli

# --- --rank, --comm -------------------------------------------------------------------------------------------


def test_rank_view_keeps_the_outlier_and_a_reference():
    code, d = diff_json("--rank", "0", "--rank", "2", real("extra-op-4rank"))
    assert code == 1 and d["view"] == {"ranks": [0, 2], "comm": None}
    assert d["ranks"] == [0, 2] and [c["ranks"] for c in d["comms"]] == [[0, 2]]
    assert d["root"]["seq"] == 25 and d["root"]["outlier_ranks"] == [0] and d["root"]["reference_ranks"] == [2]
    assert set(d["root"]["ops"]) == {"0", "2"} and d["wedge"]["absent_ranks"] == [2]
    assert d["gate"]["passed"] == [0] and d["gate"]["skipped"] == [2]
    assert any("ranks 0, 2 only" in c for c in d["caveats"]) and any("RAS replies were left out" in c
                                                                      for c in d["caveats"])
    assert not any("ranks 1 and 3" in c for c in d["caveats"])  # not looked at is not missing
    assert all("nccl.vm.443" not in e["at"] and "nccl.vm.445" not in e["at"] for e in d["evidence"])


def test_a_view_of_reference_ranks_alone_finds_them_agreeing():
    code, d = diff_json("--rank", "1", "--rank", "3", real("extra-op-4rank"))
    assert d["root"] is None and d["verdict"] != "diverged" and code == 0
    assert [c["launched"] for c in d["comms"]] == [{"1": 49, "3": 49}]


def test_comm_view_by_hash_in_any_case_or_process_group_name():
    code, whole = diff_json(real("subcomm-divergence"))
    root_comm = whole["root"]["comm"]
    for given in (root_comm, root_comm.upper().replace("0X", "0x")):
        code, d = diff_json("--comm", given, real("subcomm-divergence"))
        assert code == 1 and [c["comm"] for c in d["comms"]] == [root_comm]
        # Less evidence, never a contradiction: the whole job's root lies in the view's range, same outlier.
        low, high = d["root"]["seq_range"]
        assert low <= whole["root"]["seq"] <= high and d["root"]["outlier_ranks"] == whole["root"]["outlier_ranks"]
        assert any("less precisely" in c for c in d["caveats"])
    other = next(c["comm"] for c in whole["comms"] if c["comm"] != root_comm and 0 in c["ranks"])
    code, d = diff_json("--comm", other, real("subcomm-divergence"))
    assert [c["comm"] for c in d["comms"]] == [other] and (d["root"] is None or d["root"]["comm"] == other)
    # Flight Recorder dumps alone name the group "0"; the analysis ties nothing to a hash, so the name is the comm.
    dumps = sorted(real("extra-op-4rank").glob("fr_rank*"))
    code, d = diff_json("--comm", "0", *dumps)
    assert code == 1 and d["root"]["seq"] == 25 and d["view"]["comm"] == "0"


def test_an_unknown_rank_or_comm_is_one_line_and_exit_2():
    code, _, err = run_cli("diff", "--rank", "9", real("extra-op-4rank"))
    assert code == 2 and err == "error: --rank 9: no evidence of that rank (ranks: 0, 1, 2, 3)\n"
    code, _, err = run_cli("diff", "--comm", "0xdead", real("extra-op-4rank"))
    assert code == 2 and err.startswith("error: --comm 0xdead: no collectives of that communicator") and \
        err.count("\n") == 1 and "0x1715b7bd1b8fda9e" in err


# --- standard input -------------------------------------------------------------------------------------------


def test_a_log_on_stdin_is_read_like_its_file():
    folder = real("type-mismatch")
    logs = sorted(folder.glob("nccl.vm.*.log"))
    pasted, others = logs[1], [str(p) for p in logs if p != logs[1]]
    result = CliRunner().invoke(cli, ["diff", "--json", *others, "-"], input=pasted.read_bytes())
    d = json.loads(result.stdout)
    code, files = diff_json(*logs)
    assert result.exit_code == code == 1
    assert d["root"]["seq"] == files["root"]["seq"] == 17 and d["root"]["outlier_ranks"] == [1]
    assert d["root"]["ops"]["1"]["evidence"] == "<stdin>:50"
    assert files["root"]["ops"]["1"]["evidence"] == f"{pasted}:50"


def test_dev_stdin_through_a_real_pipe_is_sniffed_like_a_file():
    pasted = real("extra-op-4rank") / "ras_verbose_q1.txt"
    proc = subprocess.run([sys.executable, "-m", "ncclforensics.cli", "parse", "--json", "/dev/stdin"],
                          input=pasted.read_bytes(), capture_output=True, timeout=120, check=False)
    (entry,) = json.loads(proc.stdout)
    assert proc.returncode == 0 and entry["file"] == "<stdin>" and entry["format"] == "ras-text"
    assert entry["comms"] == ["0x1715b7bd1b8fda9e"]


def test_stdin_is_bounded_like_a_file(monkeypatch):
    from ncclforensics.sources import stdin

    monkeypatch.setattr(stdin, "MAX_STDIN_BYTES", 1000)
    result = CliRunner().invoke(cli, ["diff", "--json", str(real("type-mismatch")), "-"], input=b"x" * 5000)
    assert result.exit_code == 2
    assert "error: <stdin>: more than 0 MiB on standard input; refused" in result.stderr
    assert json.loads(result.stdout)["root"]["seq"] == 17  # the files are still analysed


# --- the aligned view -----------------------------------------------------------------------------------------


def test_around_aligns_the_extra_collective_as_a_gap_on_the_others():
    _, d = diff_json("--around", "3", real("extra-op-4rank"))
    side = d["side_by_side"]
    lines = side["near_root"]
    assert [line["seq"] for line in lines] == [22, 23, 24, None, 25, 26, 27]
    extra = lines[3]
    assert extra["marks"] == ["root"] and set(extra["ops"]) == {"0"} and extra["ops"]["0"]["seq"] == 25
    after = lines[4]
    assert after["ops"]["0"]["seq"] == 26 and {after["ops"][r]["seq"] for r in "123"} == {25}
    visible = next(line for line in side["near_visible"] if "first visible mismatch" in line["marks"])
    # By position seq 41 differs (4096 against 8192); aligned, rank 0's 42 pairs with the others' 41.
    assert visible["seq"] == 41 and visible["ops"]["0"]["seq"] == 42
    assert {op["count"] for op in visible["ops"].values()} == {8192}


def test_around_a_missing_collective_leaves_the_gap_on_the_outlier():
    _, out, _ = run_cli("diff", "--around", "2", real("serving-skipped-allreduce"))
    text = out[out.index("Aligned streams"):]
    row = next(line for line in text.splitlines() if "root: missing on rank 0" in line)
    assert row.split()[:2] == ["17", "--"] and "17 AllReduce 1024 x float32" in row
    assert "rank 0 (outlier)" in text and "ranks 1-3" in text
    assert all(" │" not in line and "┃" not in line for line in text.splitlines())  # plain text, pasteable


@pytest.mark.parametrize("scenario", sorted(p.name for p in REAL.iterdir() if p.is_dir()))
def test_aligned_as_the_root_says_the_streams_agree_around_the_root(scenario):
    _, d = diff_json("--around", "6", real(scenario))
    side, root = d.get("side_by_side"), d["root"]
    if root is None or root["seq_range"] is None:
        assert side is None
        return
    assert side is not None and side["root_seq"] == root["seq"]
    for line in side["near_root"] + side["near_visible"]:
        if not root["departs_again"]:
            assert "differs" not in line["marks"], (scenario, line)
        if line["seq"] is None:
            assert set(line["ops"]) <= {str(r) for r in root["outlier_ranks"]}


@pytest.mark.parametrize("scenario", ["subcomm-divergence", "serving-tp-in-dp-8rank", "serving-two-drafters-8rank",
                                      "long-window", "wrapped-ring"])
def test_a_part_of_the_job_never_contradicts_the_whole(scenario):
    """Less evidence may widen the root's range; it must never move the root out of the whole job's answer."""
    _, whole = diff_json(real(scenario))
    root = whole["root"]
    views = [("--comm", c["comm"]) for c in whole["comms"] if c["root_seq_range"]]
    # The outliers and enough reference ranks that the outliers stay the minority (a view's outliers are its own).
    references = [r for r in root["reference_ranks"] if r not in root["outlier_ranks"]][:len(root["outlier_ranks"]) + 1]
    views.append(tuple(arg for r in [*root["outlier_ranks"], *references] for arg in ("--rank", str(r))))
    for view in views:
        code, part = diff_json(*view, real(scenario))
        assert code == 1 and part["root"] is not None, (view, part["summary"])
        if part["root"]["comm"] == root["comm"]:
            low, high = part["root"]["seq_range"]
            assert low <= root["seq"] <= high and part["root"]["outlier_ranks"] == root["outlier_ranks"], view


def test_a_postmortem_of_stdin_may_write_into_the_current_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # `-` is standard input, not a file ./- whose folder would be evidence
    logs = sorted(real("type-mismatch").glob("nccl.vm.*.log"))
    result = CliRunner().invoke(cli, ["postmortem", *map(str, logs[1:]), "-", "--out", "pm"],
                                input=logs[0].read_bytes())
    assert result.exit_code == 1, result.output
    assert "<stdin>" in (tmp_path / "pm" / "report.md").read_text()
