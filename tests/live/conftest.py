"""Fixtures for the live tests: CLI runs in forked processes (torch imported once, in the test process)."""

from __future__ import annotations

import multiprocessing as mp
import time

import pytest
from live_helpers import CliProcess, run_cli_child


@pytest.fixture
def cli_fork(tmp_path):
    """Start `ncclforensics live ARGS` in a forked process; returns a CliProcess."""
    pytest.importorskip("torch")
    import torch.distributed  # noqa: F401 - imported before forking, so each child starts in milliseconds

    ctx = mp.get_context("fork")
    started: list[CliProcess] = []

    def start(args: list[str], name: str) -> CliProcess:
        output = tmp_path / f"{name}.out"
        process = ctx.Process(target=run_cli_child, args=(args, str(output)), daemon=True)
        process.start()
        run = CliProcess(process, output, time.monotonic())
        started.append(run)
        return run

    yield start
    for run in started:
        if run.process.exitcode is None:
            run.process.kill()
            run.process.join(5)
