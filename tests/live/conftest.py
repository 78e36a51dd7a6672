"""Fixtures for the live tests: CLI runs in processes forked from a server that imported torch once."""

from __future__ import annotations

import multiprocessing as mp
import time

import pytest
from live_helpers import CliProcess, run_cli_child


@pytest.fixture
def cli_fork(tmp_path):
    """Start `ncclforensics live ARGS` in a forked process; returns a CliProcess."""
    pytest.importorskip("torch")
    # Children fork from a server process that holds no threads (this one runs polars' thread pool, and a fork
    # taken while one of its threads holds a lock can hang the child before it prints anything); the server
    # imports torch once, so each child still starts in milliseconds.
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["torch.distributed", "ncclforensics.live.cli", "live_helpers"])
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
