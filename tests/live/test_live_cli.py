"""The `live` click group: importable without torch, documented, and clear when torch is missing."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from click.testing import CliRunner
from live_helpers import REPO

from ncclforensics.live.cli import live

pytestmark = pytest.mark.live

NO_TORCH = "import sys; sys.modules['torch'] = None; "  # `import torch` now raises ImportError


def run_python(code: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)


def test_group_imports_and_helps_without_torch():
    proc = run_python(NO_TORCH + "from ncclforensics.live.cli import live; "
                      "import ncclforensics.live.ras_watch, ncclforensics.live.guard, ncclforensics.live.sidecar; "
                      "live.main(['--help'], standalone_mode=False); print('torch' in sys.modules and "
                      "sys.modules['torch'] is not None)")
    assert proc.returncode == 0, proc.stderr
    assert "sidecar" in proc.stdout and "ras" in proc.stdout
    assert proc.stdout.strip().endswith("False")


def test_sidecar_without_torch_says_what_to_install(tmp_path):
    journal = tmp_path / "j.jsonl"
    journal.write_text("")
    proc = run_python(NO_TORCH + "from ncclforensics.live.cli import live; "
                      f"live.main(['sidecar', '--rank', '0', '--world-size', '1', '--journal', '{journal}'])")
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: torch is needed for this (hint: pip install 'ncclforensics[live]')"


@pytest.mark.parametrize("command", ["sidecar", "ras"])
def test_help_ends_with_an_example(command):
    result = CliRunner().invoke(live, [command, "--help"])
    assert result.exit_code == 0
    help_text = result.output
    assert "Example:" in help_text and f"ncclforensics live {command}" in help_text.split("Example:")[1]


def test_bad_store_is_a_usage_error():
    result = CliRunner().invoke(live, ["sidecar", "--rank", "0", "--world-size", "2", "--journal", "x",
                                       "--store", "nohostport"])
    assert result.exit_code == 2 and "expected HOST:PORT" in result.stderr
