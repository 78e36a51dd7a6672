"""Entry points composing the layers: what the CLI, notebooks and tests call."""

from __future__ import annotations

import multiprocessing as mp
import os
import re
import shlex
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from collections.abc import Callable

import polars as pl

from .align.acceptance import AcceptanceOptions, AcceptanceReport, acceptance
from .align.coverage import GateCoverage, gate_coverage
from .align.diagnosis import Diagnosis, diagnose
from .align.side_by_side import SideBySide, side_by_side
from .align.view import View
from .align.view import select as select_view
from .errors import SourceError
from .model import Diagnostic, Evidence, Location, Severity, SourceFormat
from .model.frame import empty_collectives
from .sources import NO_KNOWN_FORMAT, InputFile, companions, detect, discover, parse_file
from .sources.discover import check_output as check_output_path
from .sources.stdin import SpooledStdin, is_stdin

if TYPE_CHECKING:
    from .report.export import ExportTable
    from .report.postmortem import PostmortemData

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


def parse_paths(paths: list[str], progress: ProgressHook | None = None, workers: int | None = None) -> ParsedInputs:
    """Discover the files under `paths` and parse each with the format its content shows.

    Files are parsed in parallel, `workers` at a time (default: one per CPU this process may run on): pickles
    (Flight Recorder dumps, whose parsing is Python) and small files in forked worker processes, big text files in threads (their parsers
    spend their time in polars, which releases the GIL and uses every core). The result is the same as parsing them
    one by one, in input order. `-` or `/dev/stdin` among the paths reads standard input (sources/stdin.py).
    """
    with _Inputs(paths) as (files, problems):
        parsed = ParsedInputs(problems=problems)
        parsed.evidence = parse_files(files, progress, workers)
    _skip_strays(parsed.evidence, set(paths))
    return parsed


def _skip_strays(evidence: list[Evidence], given: set[str] | None) -> None:
    """Files that no parser recognises, found by walking a folder (not among the `given` paths; None: wherever
    they came from), are not evidence: their error becomes a warning that they were skipped, so that a
    config.yaml beside the logs does not turn exit 1 into 2. An empty file, or one a parser recognised but
    could not read, looks like evidence and stays an error."""
    for item in evidence:
        if item.format is not None or (given is not None and item.path in given) or len(item.problems) != 1:
            continue
        problem = item.problems[0]
        if problem.severity is Severity.ERROR and problem.message in NO_KNOWN_FORMAT:
            item.problems = [Diagnostic(problem.loc, f"{problem.message}: not evidence; skipped", Severity.WARNING)]


class _Inputs:
    """discover(paths), with standard input (`-`, `/dev/stdin`) copied to a temporary file and put after the
    others, named `<stdin>`; the copy is removed on leaving."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths
        self.stdin: SpooledStdin | None = None

    def __enter__(self) -> tuple[list[InputFile], list[Diagnostic]]:
        files, problems = discover([p for p in self.paths if not is_stdin(p)])
        if any(is_stdin(p) for p in self.paths):
            self.stdin = SpooledStdin()
            if self.stdin.file is not None:
                files.append(self.stdin.file)
            else:
                problems.append(self.stdin.problem)
        return files, problems

    def __exit__(self, *exc) -> None:
        if self.stdin is not None:
            self.stdin.close()


def parse_files(files: list[InputFile], progress: ProgressHook | None = None, workers: int | None = None
                ) -> list[Evidence]:
    """parse_file over `files`, `workers` at a time (default: one per usable CPU); the evidence in the order of
    `files`."""
    total = len(files)
    workers = min(total, workers or usable_cpus())
    if workers < 2:
        return _parse_in_turn(files, progress)
    done = 0
    results: dict[int, Evidence] = {}

    def finished(index: int, evidence: Evidence) -> None:
        nonlocal done
        results[index] = evidence
        done += 1
        if progress:
            progress(files[index].name, done, total)

    if progress:
        progress(files[0].name, 0, total)
    for index, file in enumerate(files):
        if file.size == 0:  # nothing to read: said here, not in a worker (100,000 of them cost a minute there)
            finished(index, _empty(file))
    routed = [i for i, f in enumerate(files) if i not in results and _to_process(f)]
    pool = _process_pool(min(workers, len(routed))) if len(routed) > 1 else None
    in_processes = routed if pool is not None else []
    with ExitStack() as stack:
        futures = {}
        if pool is not None:
            stack.enter_context(pool)
            futures = {pool.submit(_parse_packed, files[i]): i for i in in_processes}
        threads = stack.enter_context(ThreadPoolExecutor(workers))
        taken = set(in_processes)
        futures.update({threads.submit(parse_file, f): i for i, f in enumerate(files)
                        if i not in taken and i not in results})
        for future in as_completed(futures):
            index = futures[future]
            try:
                evidence = future.result()
            except BrokenProcessPool:  # a worker died (killed, out of memory, crashed): parse that file again
                evidence = _parse_isolated(files[index])
            if isinstance(evidence, tuple):
                evidence = _unpacked(*evidence)
            finished(index, evidence)
    if progress:
        progress("", total, total)
    return [results[i] for i in range(total)]


def _parse_isolated(file: InputFile) -> Evidence | tuple:
    """parse_file in a fresh process of its own, after a worker died: every file that worker would still have
    parsed comes here, one at a time, so that the one that kills its process is reported instead of being read
    again in this one (where a crash of the interpreter would end the whole run)."""
    try:
        with ProcessPoolExecutor(1, mp_context=mp.get_context("spawn")) as pool:
            return pool.submit(_parse_alone, file).result()
    except BrokenProcessPool:
        return Evidence(path=file.name, format=None, problems=[Diagnostic(Location(file.name), (
            "reading it made the process that parsed it die (a crash or a kill); left out"))])


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask: a batch job's share of the node, not the node)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


THREAD_MIN_BYTES = 16 << 20  # a text file this big is parsed in a thread: polars does its work, both cores busy


_NO_COLLECTIVES = empty_collectives()  # one frame (polars frames are immutable) for every empty file


def _empty(file: InputFile) -> Evidence:
    """What parse_file says of an empty file, without building a frame for it."""
    return Evidence(path=file.name, format=None, collectives=_NO_COLLECTIVES,
                    problems=[Diagnostic(Location(file.name), "empty file")])


def _parse_in_turn(files: list[InputFile], progress: ProgressHook | None) -> list[Evidence]:
    evidence = []
    for index, file in enumerate(files):
        if progress:
            progress(file.name, index, len(files))
        evidence.append(_empty(file) if file.size == 0 else parse_file(file))
    if progress:
        progress("", len(files), len(files))
    return evidence


def _parse_packed(file: InputFile) -> Evidence | tuple[Evidence, int, list[tuple]]:
    """parse_file in a worker process, its collectives frame packed for the way back: a column that holds one
    value throughout travels as that value (pickling a frame spells out every row of every column)."""
    evidence = parse_file(file)
    frame = evidence.collectives
    if frame.height == 0:
        return evidence
    evidence.collectives = frame.clear()
    single = frame.select(pl.all().n_unique() == 1).row(0)
    packed = []
    for name, one in zip(frame.columns, single):
        column = frame.get_column(name)
        if one:
            packed.append((name, column.dtype, column[0], True))
        elif column.dtype == pl.String:  # its distinct values once, and an index per row
            values = column.drop_nulls().unique(maintain_order=True)
            index = column.replace_strict(values, pl.int_range(len(values), eager=True), return_dtype=pl.UInt32)
            packed.append((name, column.dtype, (values, index), False))
        else:
            packed.append((name, column.dtype, column, False))
    return evidence, frame.height, packed


def _parse_alone(file: InputFile) -> Evidence | tuple[Evidence, int, list[tuple]]:
    """What _parse_isolated runs in its process: _parse_packed, under a name of its own."""
    return _parse_packed(file)


def _unpacked(evidence: Evidence, height: int, packed: list[tuple]) -> Evidence:
    """The Evidence _parse_packed packed, its frame as it was (columns, order, types and values)."""
    varying = {name: column if isinstance(column, pl.Series) else column[0].gather(column[1]).alias(name)
               for name, _, column, one in packed if not one}
    frame = pl.DataFrame(varying) if varying else pl.DataFrame({"_": pl.zeros(height, eager=True)})
    frame = frame.with_columns(pl.lit(value, dtype).alias(name) for name, dtype, value, one in packed if one)
    evidence.collectives = frame.select(name for name, *_ in packed)
    return evidence


def _to_process(file: InputFile) -> bool:
    """Whether `file` is parsed in a worker process rather than a thread: Flight Recorder dumps (their parsing is
    Python, which threads would serialize) and small files (where Python's share of the work outweighs polars')."""
    if _looks_pickled(file):
        return True
    try:
        return file.path.stat().st_size < THREAD_MIN_BYTES
    except OSError:
        return False


def _looks_pickled(file: InputFile) -> bool:
    """A pickle of protocol 2 or later (how Flight Recorder dumps start); only routes the file, never decides it."""
    try:
        with open(file.path, "rb") as f:
            head = f.read(2)
    except OSError:
        return False
    return len(head) == 2 and head[0] == 0x80 and 2 <= head[1] <= 5


def _process_pool(workers: int) -> ProcessPoolExecutor | None:
    """Forked workers, or None where forking is unsafe: polars' thread pool does not survive a fork, so once it has
    started (any earlier polars work in this process) a forked child would wait on it forever."""
    if workers < 2 or "fork" not in mp.get_all_start_methods() or not _fork_safe():
        return None
    return ProcessPoolExecutor(workers, mp_context=mp.get_context("fork"))


def _fork_safe() -> bool:
    try:
        names = [Path(f"/proc/self/task/{t}/comm").read_text() for t in os.listdir("/proc/self/task")]
    except OSError:
        return False
    return not any(re.match(r"polars-\d|tokio|rayon", name) for name in names)


def diff_paths(paths: list[str], progress: ProgressHook | None = None, view: View | None = None,
               workers: int | None = None) -> tuple[ParsedInputs, Diagnosis]:
    """Parse the evidence under `paths` (`workers` files at a time) and diagnose it (what `ncclforensics diff`
    does); with a `view` (`--rank`, `--comm`), diagnose that part of the job only (align/view.py)."""
    parsed = parse_paths(paths, progress, workers)
    diagnosis = diagnose(parsed.evidence)
    if view is not None and not view.whole:
        selection = select_view(parsed.evidence, diagnosis.streams, diagnosis.ranks, view)
        diagnosis = diagnose(selection.evidence, selection.view.ranks)
        diagnosis.notes = selection.notes + diagnosis.notes
    return parsed, diagnosis


def aligned_view(diagnosis: Diagnosis, around: int) -> SideBySide | None:
    """The ranks' streams side by side around the root and the first visible mismatch (align/side_by_side.py)."""
    visible = diagnosis.first_visible
    ops = diagnosis.comms[visible[0]].first_visible_ops if visible and visible[0] in diagnosis.comms else {}
    return side_by_side(diagnosis.streams, diagnosis.root, visible, ops, around) if diagnosis.streams else None


def export_paths(paths: list[str], out: str, table: ExportTable, progress: ProgressHook | None = None
                 ) -> tuple[ParsedInputs, pl.DataFrame]:
    """Check `out` (an output path, its suffix a table format), parse the evidence under `paths` and build the
    table `export` writes (report/export.py): the collectives as `diff` compared them, or the gate decisions,
    fingerprints or RAS counts as parsed."""
    from .report.export import (
        ExportTable,
        collectives_table,
        fingerprints_table,
        gates_table,
        ras_table,
        table_format,
    )

    table_format(out)
    check_output("--out", out, paths, folder_of_files=False)
    if table is ExportTable.COLLECTIVES:
        parsed, diagnosis = diff_paths(paths, progress)
        formats = {e.path: e.format.value for e in parsed.evidence if e.format is not None}
        return parsed, collectives_table(diagnosis.streams, formats)
    parsed = parse_paths(paths, progress)
    usable = [e for e in parsed.evidence if e.format is not None]
    if table is ExportTable.GATES:
        return parsed, gates_table([g for e in usable for g in e.gates])
    if table is ExportTable.FINGERPRINTS:
        return parsed, fingerprints_table([f for e in usable for f in e.fingerprints])
    if table is ExportTable.RAS:
        return parsed, ras_table(usable)
    raise AssertionError(table)  # every ExportTable is handled above (tests iterate them)


# --- postmortem, gate coverage, acceptance -------------------------------------------------------------------


def check_output(option: str, out: str, paths: list[str], folder_of_files: bool = True) -> Path:
    """The resolved output path, or OutputError when it is an input file or inside an input folder, links
    resolved (see sources.discover.check_output): the one check of every output path of every command. A plot
    (one file) may go beside an input file (`folder_of_files=False`); a report folder may not."""
    files = [p for p in paths if not is_stdin(p)]  # standard input is no place on disk (`-` is not ./-)
    return check_output_path(option, out, files, folder_of_files)


def check_output_folder(out: str, paths: list[str]) -> Path:
    """check_output for `--out` (the postmortem's folder)."""
    return check_output("--out", out, paths)


def postmortem_paths(paths: list[str], out: str, progress: ProgressHook | None = None
                     ) -> tuple[ParsedInputs, PostmortemData]:
    """Check `out`, parse and diagnose the evidence under `paths`, and gather what the postmortem shows."""
    from .align.inventory import inventory  # the report's modules are loaded when a report is made, not by `diff`
    from .align.timeline import comm_lanes, comms_that_matter, timeline
    from .report.postmortem import ALIGNED_AROUND, PostmortemData

    check_output_folder(out, paths)
    parsed, diagnosis = diff_paths(paths, progress)
    usable = [e for e in parsed.evidence if e.format is not None]
    data = PostmortemData(
        diagnosis=diagnosis, out=Path(out),
        command=shlex.join(["ncclforensics", "postmortem", *paths, "--out", out]),
        diff_command=shlex.join(["ncclforensics", "diff", "--json", *paths]),
        workdir=os.getcwd(),
        lanes=[comm_lanes(diagnosis.streams, diagnosis, comm) for comm in comms_that_matter(diagnosis)],
        gates=[g for e in usable for g in e.gates],
        inventory=inventory(parsed.evidence, diagnosis, parsed.problems),
        timeline=timeline(diagnosis, [w for e in usable for w in e.watchdog]),
        aligned=aligned_view(diagnosis, ALIGNED_AROUND),
    )
    return parsed, data


def parse_formats(paths: list[str], formats: set[SourceFormat], progress: ProgressHook | None = None
                  ) -> tuple[ParsedInputs, list[tuple[str, SourceFormat]]]:
    """Like parse_paths, but only files detected as one of `formats` are parsed (a soak folder of big NCCL logs
    is not read through to find its gate journals); the others are returned as (file, format) and skipped.
    Files no parser recognises are still reported, as in parse_paths."""
    with _Inputs(paths) as (files, problems):
        parsed = ParsedInputs(problems=problems)
        skipped: list[tuple[str, SourceFormat]] = []
        for index, file in enumerate(files):
            if progress:
                progress(file.name, index, len(files))
            source = _detect(file)
            also = companions(file, source.format) if source is not None else []
            if source is not None and source.format not in formats and not formats.intersection(also):
                skipped.append((file.name, source.format))
                continue
            parsed.evidence.append(parse_file(file, source.format if source else None, also))
    _skip_strays(parsed.evidence, None)  # "files of other formats are skipped": unrecognised ones too
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
        where = paths[0] if len(paths) == 1 else f"{len(paths)} inputs"  # each named once, by its own line
        parsed.problems.append(Diagnostic(Location(where), "no gate journal record in the inputs"))
    return parsed, coverage


def acceptance_paths(paths: list[str], baseline: str | None = None, options: AcceptanceOptions | None = None,
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
    return parsed, acceptance(runs, options or AcceptanceOptions(), base)
