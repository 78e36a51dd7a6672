"""Shared test helpers: a CLI runner and the real captures by name (the fixture paths are in fixture_paths.py)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from fixture_paths import FIXTURES, REAL

from ncclforensics.cli import cli

__all__ = ["FIXTURES", "REAL", "diff_json", "real", "run_cli"]


def real(scenario: str) -> Path:
    """Path of a real capture folder (asserts it exists)."""
    path = REAL / scenario
    assert path.is_dir(), path
    return path


def run_cli(*args: str):
    """Invoke the CLI in-process; returns (exit code, stdout, stderr)."""
    result = CliRunner().invoke(cli, [str(a) for a in args], env={"COLUMNS": "240"})
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def diff_json(*paths) -> tuple[int, dict]:
    """`diff --json` on paths: (exit code, parsed JSON)."""
    code, out, _ = run_cli("diff", "--json", *paths)
    return code, json.loads(out)
