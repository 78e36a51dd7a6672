"""The code passes the project's lint rules (pyproject.toml, [tool.ruff]) and has no import cycle."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "ncclforensics"


def test_ruff_finds_nothing():
    ruff = [sys.executable, "-m", "ruff"] if _has_ruff_module() else [shutil.which("ruff") or "ruff"]
    result = subprocess.run([*ruff, "check", "--no-cache", "ncclforensics", "tests", "benchmarks"], cwd=REPO,
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def _has_ruff_module() -> bool:
    import importlib.util

    return importlib.util.find_spec("ruff") is not None


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The package's modules that `path` imports, anywhere in it: an import deferred into a function to dodge a
    cycle is still a cycle (two modules that each need the other)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, *([base] if base else [])])
            for alias in node.names:
                target = f"{base}.{alias.name}"
                found.add(target if target in modules else base)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m in modules and m != name}


def test_no_import_cycle():
    paths = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = {name: _imports(path, set(paths)) for name, path in paths.items()}
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(name: str, trail: list[str]) -> None:
        state[name] = 1
        for other in sorted(graph[name]):
            if state.get(other) == 1:
                cycle = trail[trail.index(other):] + [other] if other in trail else [name, other]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if other not in state:
                visit(other, [*trail, other])
        state[name] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
