"""The package's layers: formats in sources/, analysis in align/, rendering in report/, live/ apart.

Each layer may import only the layers listed for it, so that a parser never reaches for an analysis, an analysis
never reads a file, and the offline commands never import torch through live/.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "ncclforensics"
ALLOWED = {
    "model": {"model", "errors"},
    "sources": {"sources", "model", "errors"},
    "align": {"align", "model", "errors"},
    "report": {"report", "align", "model", "errors"},
    "live": {"live", "model", "errors", "sources", "commands"},  # commands: what both command groups share
}


def imported_layers(path: Path) -> set[str]:
    """The top-level parts of the package a module imports (relative or absolute), at any depth of the module."""
    package = path.parent.relative_to(PACKAGE.parent).parts  # ("ncclforensics", "sources", "nccl_log")
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            parts = (node.module or "").split(".") if node.module else []
            if node.level:
                parts = [*package[: len(package) - node.level + 1], *parts]
            if parts[:1] != ["ncclforensics"]:
                continue
            if len(parts) > 1:
                found.add(parts[1])
            else:  # `from .. import x`: a module of the package, or a name its __init__ defines
                found.update(alias.name if _is_module(alias.name) else "package" for alias in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "ncclforensics" and len(parts) > 1:
                    found.add(parts[1])
    return found


def _is_module(name: str) -> bool:
    return (PACKAGE / name).is_dir() or (PACKAGE / f"{name}.py").is_file()


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_a_layer_imports_only_the_layers_below_it(layer):
    modules = sorted((PACKAGE / layer).rglob("*.py"))
    assert modules
    for module in modules:
        strays = imported_layers(module) - ALLOWED[layer] - {"package"}
        assert not strays, f"{module.relative_to(PACKAGE)} imports {sorted(strays)}"


def test_nothing_imports_the_command_line():
    for module in PACKAGE.rglob("*.py"):
        if module not in (PACKAGE / "cli.py", PACKAGE / "__main__.py"):  # (`python -m ncclforensics` is the CLI too)
            assert "cli" not in imported_layers(module) - {"live"}, module
