"""Entry points composing the layers: what the CLI, notebooks and tests call."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from .align.diagnosis import Diagnosis, diagnose
from .model import Diagnostic, Evidence
from .sources import discover, parse_file

ProgressHook = Callable[[str, int, int], None]  # (file name, files done, files total)


@dataclass
class ParsedInputs:
    """Every input file parsed, plus the problems found before parsing (missing paths, symlink loops)."""

    evidence: list[Evidence] = field(default_factory=list)
    problems: list[Diagnostic] = field(default_factory=list)

    @property
    def all_problems(self) -> list[Diagnostic]:
        """Problems of the walk and of every file, in input order."""
        return self.problems + [p for e in self.evidence for p in e.problems]


def parse_paths(paths: list[str], progress: ProgressHook | None = None) -> ParsedInputs:
    """Discover the files under `paths` and parse each with the format its content shows."""
    files, problems = discover(paths)
    parsed = ParsedInputs(problems=problems)
    for index, file in enumerate(files):
        if progress:
            progress(file.name, index, len(files))
        parsed.evidence.append(parse_file(file))
    if progress:
        progress("", len(files), len(files))
    return parsed


def diff_paths(paths: list[str], progress: ProgressHook | None = None) -> tuple[ParsedInputs, Diagnosis]:
    """Parse the evidence under `paths` and diagnose it (what `ncclforensics diff` does)."""
    parsed = parse_paths(paths, progress)
    diagnosis = diagnose(parsed.evidence)
    return parsed, diagnosis
