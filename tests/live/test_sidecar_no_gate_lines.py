"""A sidecar pointed at a file with no gate decision lines says so: a warning, not a silent "0 steps compared"."""

from __future__ import annotations

import pytest
from live_helpers import REAL, free_port

pytestmark = pytest.mark.live
pytest.importorskip("torch")


def test_a_journal_without_gate_lines_is_a_warning(tmp_path, cli_fork):
    port = free_port()
    # Real NCCL debug logs of two ranks given as their journals (the wrong file, as a user might).
    logs = [REAL / "extra-op-4rank" / "nccl.vm.442.log", REAL / "extra-op-4rank" / "nccl.vm.443.log"]
    runs = [cli_fork(["sidecar", "--rank", str(rank), "--world-size", "2", "--store", f"127.0.0.1:{port}",
                      "--journal", str(log), "--no-follow", "--timeout", "10"], f"rank{rank}")
            for rank, log in enumerate(logs)]
    codes = [run.wait(30) for run in runs]
    assert codes == [0, 0], [run.text for run in runs]
    for run, log in zip(runs, logs):
        assert "0 steps compared" in run.text
        assert f"warning: {log}: no step was compared" in run.text, run.text


def test_a_real_journal_gives_no_such_warning(tmp_path, cli_fork):
    port = free_port()
    journals = [REAL / "extra-op-4rank" / f"gate_journal_rank{rank}.log" for rank in (0, 1)]
    runs = [cli_fork(["sidecar", "--rank", str(rank), "--world-size", "2", "--store", f"127.0.0.1:{port}",
                      "--journal", str(journal), "--no-follow", "--timeout", "10"], f"rank{rank}")
            for rank, journal in enumerate(journals)]
    codes = [run.wait(30) for run in runs]
    assert codes == [1, 1], [run.text for run in runs]  # rank 0's gate passed at step 5, rank 1's skipped
    assert all("warning:" not in run.text and "12 steps compared" in run.text for run in runs), runs[0].text
