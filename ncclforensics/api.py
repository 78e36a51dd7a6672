"""Entry points composing the layers: what the CLI, notebooks and tests call."""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .align.acceptance import AcceptanceOptions, AcceptanceReport, acceptance
from .align.coverage import GateCoverage, gate_coverage
from .align.diagnosis import Diagnosis, diagnose
from .align.inventory import inventory
from .align.timeline import comm_lanes, comms_that_matter, timeline
from .errors import OutputError, SourceError
from .model import Diagnostic, Evidence, Location, Severity, SourceFormat
from .report.postmortem import PostmortemData
from .sources import InputFile, detect, discover, parse_file

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


# --- postmortem, gate coverage, acceptance -------------------------------------------------------------------


def check_output_folder(out: str, paths: list[str]) -> Path:
    """The resolved output folder, or OutputError when it is (or resolves, through `..` or links, into) an input
    folder: a folder given as input or the folder of a file given as input. Reports written there would be
    read back as evidence by the next run, and input folders are never written to."""
    target = Path(out).resolve()
    for given in paths:
        path = Path(given).resolve()
        folder = path if path.is_dir() else path.parent
        if target == folder or folder in target.parents:
            raise OutputError(f"--out {out} is inside input folder {given if path.is_dir() else folder}; "
                              f"write the report outside the evidence")
        if target == path:
            raise OutputError(f"--out {out} is an input file")
    return target


def postmortem_paths(paths: list[str], out: str, progress: ProgressHook | None = None
                     ) -> tuple[ParsedInputs, PostmortemData]:
    """Check `out`, parse and diagnose the evidence under `paths`, and gather what the postmortem shows."""
    check_output_folder(out, paths)
    parsed, diagnosis = diff_paths(paths, progress)
    usable = [e for e in parsed.evidence if e.format is not None]
    frame = diagnosis.streams.frame
    data = PostmortemData(
        diagnosis=diagnosis, out=Path(out),
        command=shlex.join(["ncclforensics", "postmortem", *paths, "--out", out]),
        diff_command=shlex.join(["ncclforensics", "diff", "--json", *paths]),
        workdir=os.getcwd(),
        lanes=[comm_lanes(frame, diagnosis, comm) for comm in comms_that_matter(diagnosis)],
        gates=[g for e in usable for g in e.gates],
        inventory=inventory(parsed.evidence, diagnosis, parsed.problems),
        timeline=timeline(diagnosis, [w for e in usable for w in e.watchdog]),
    )
    return parsed, data


def parse_formats(paths: list[str], formats: set[SourceFormat], progress: ProgressHook | None = None
                  ) -> tuple[ParsedInputs, list[tuple[str, SourceFormat]]]:
    """Like parse_paths, but only files detected as one of `formats` are parsed (a soak folder of big NCCL logs
    is not read through to find its gate journals); the others are returned as (file, format) and skipped.
    Files no parser recognises are still reported, as in parse_paths."""
    files, problems = discover(paths)
    parsed = ParsedInputs(problems=problems)
    skipped: list[tuple[str, SourceFormat]] = []
    for index, file in enumerate(files):
        if progress:
            progress(file.name, index, len(files))
        source = _detect(file)
        if source is not None and source.format not in formats:
            skipped.append((file.name, source.format))
            continue
        parsed.evidence.append(parse_file(file, source.format if source else None))
    if progress:
        progress("", len(files), len(files))
    return parsed, skipped


def _detect(file: InputFile):
    try:
        return detect(file)
    except (SourceError, OSError):
        return None  # parse_file reports it


def gate_coverage_paths(paths: list[str], progress: ProgressHook | None = None
                        ) -> tuple[ParsedInputs, GateCoverage]:
    """Parse the gate journals under `paths` (files of other formats are skipped unread) and measure gate
    coverage per session (see align/coverage.py for what a session is)."""
    parsed, _ = parse_formats(paths, {SourceFormat.GATE_JOURNAL}, progress)
    decisions = [g for e in parsed.evidence for g in e.gates]
    coverage = gate_coverage(decisions)
    if not decisions:
        parsed.problems.append(Diagnostic(Location(", ".join(paths)), "no gate journal record in the inputs"))
    return parsed, coverage


def acceptance_paths(paths: list[str], baseline: str | None = None, options: AcceptanceOptions = AcceptanceOptions(),
                     progress: ProgressHook | None = None) -> tuple[ParsedInputs, AcceptanceReport]:
    """Parse the vLLM logs under `paths` (one run per file; files of other formats are skipped with a warning)
    and judge each run's acceptance, optionally against the lines under `baseline` taken together."""
    parsed, skipped = parse_formats(paths, {SourceFormat.VLLM_METRICS}, progress)
    for name, fmt in skipped:
        parsed.problems.append(Diagnostic(Location(name), f"not a vLLM log (reads as {fmt.value}); skipped",
                                          Severity.WARNING))
    runs = [(e.path, e.metrics) for e in parsed.evidence if e.metrics]
    base = None
    if baseline is not None:
        base_parsed, _ = parse_formats([baseline], {SourceFormat.VLLM_METRICS})
        parsed.problems.extend(base_parsed.all_problems)
        lines = [m for e in base_parsed.evidence for m in e.metrics]
        if not lines:
            raise SourceError(f"{baseline}: no SpecDecoding metrics line to use as the baseline")
        base = (baseline, lines)
    if not runs:
        parsed.problems.append(Diagnostic(Location(", ".join(paths)), "no SpecDecoding metrics line in the inputs"))
    return parsed, acceptance(runs, options, base)
