"""The command line: options -> one api call -> one report call -> exit code. The only place that exits.

Exit codes follow diff(1): 0 consistent, 1 divergence found, 2 trouble (bad input wins the exit code, but the
results for the good inputs are still printed).
"""

from __future__ import annotations

import json
import sys

import click
from rich.console import Console

from . import __version__, api
from .commands import OneLineErrors, exit_code
from .model import Severity, Verdict, phrases
from .report import console as console_report
from .report import data, escape, plots
from .report import export as export_report
from .report import postmortem as postmortem_report
from .report import side_by_side as side_by_side_report



def _stderr() -> Console:
    return Console(stderr=True, highlight=False)


def _progress(enabled: bool):
    """A rich progress bar on stderr over the input files, when stderr is a terminal."""
    from rich.progress import Progress

    if not enabled or not sys.stderr.isatty():
        return None, None
    bar = Progress(console=_stderr(), transient=True)
    task = bar.add_task("reading evidence", total=None)

    def hook(name: str, done: int, total: int) -> None:
        bar.update(task, completed=done, total=total, description=f"reading {name}"[:60])

    return bar, hook


def _with_progress(quiet: bool, call):
    """Run `call(hook)` under the stderr progress bar (when stderr is a terminal)."""
    bar, hook = _progress(not quiet)
    if bar:
        with bar:
            return call(hook)
    return call(hook)


def _echo_json(obj: object) -> None:
    """JSON on stdout: indented for a person at a terminal, compact for a pipe or file (where json's C encoder
    writes it many times faster: a window of thousands of pairings is megabytes). Valid JSON only: NaN and
    infinite numbers (a corrupted checksum) are written as the strings "NaN", "Infinity", "-Infinity"."""
    options = {"indent": 2} if sys.stdout.isatty() else {"separators": (",", ":")}
    try:
        text = json.dumps(obj, allow_nan=False, **options)
    except ValueError:  # a non-finite float somewhere: rewrite those (a walk over the answer, only then)
        text = json.dumps(escape.json_safe(obj), allow_nan=False, **options)
    click.echo(text)


def _report_problems(parsed: api.ParsedInputs, more: list | None = None) -> bool:
    """Print every problem on stderr; True when one of them is an error (exit 2)."""
    problems = parsed.all_problems + list(more or [])
    console_report.render_problems(_stderr(), problems)
    return any(p.severity is Severity.ERROR for p in problems)


@click.group(cls=OneLineErrors, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ncclforensics")
@click.option("--debug", is_flag=True, hidden=True, help="Show tracebacks.")
def cli(debug: bool) -> None:
    """Forensics for NCCL hangs and silent corruption: which rank diverged, where, and what it cost.

    \b
    Example:
        ncclforensics parse incident/
        ncclforensics diff rank*.log fr_rank* ras_status_*.txt
        ncclforensics postmortem incident/ --out report/
    """


@cli.command(short_help="What each evidence file holds: format, ranks, comms, problems.")
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array, one object per file.")
def parse(paths: tuple[str, ...], as_json: bool) -> None:
    """Show what each evidence file holds: format, records, ranks, communicators, problems.

    PATHS are files or folders (walked recursively). Formats are detected from content.

    \b
    Example:
        ncclforensics parse examples/extra-op-4rank
        ncclforensics parse --json nccl.host.1234.log fr_rank0
    """
    parsed = _with_progress(as_json, lambda hook: api.parse_paths(list(paths), hook))
    if as_json:
        _echo_json([data.parse_dict(e) for e in parsed.evidence])
    else:
        console_report.render_parse_table(Console(), parsed.evidence)
    trouble = _report_problems(parsed)
    sys.exit(exit_code(trouble))


@cli.command(short_help="First divergent collective, misaligned window, wedge.")
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (the result for the good files).")
@click.option("--rank", "ranks", type=int, multiple=True, metavar="R", help="Look at this rank only (repeatable).")
@click.option("--comm", metavar="HASH", help="Look at this communicator only (its 0x hash, or a process-group "
              "name).")
@click.option("--around", type=click.IntRange(0, 1000), metavar="N", help="Show the ranks' streams side by side, aligned as "
              "the root says, N collectives around the root and the first visible mismatch.")
@click.option("--full-window", is_flag=True, help="With --json: every pairing run of the window (by default the "
              f"first {data.PAIRING_RUNS} and totals per kind).")
@click.option("--workers", type=click.IntRange(1, 1024), help="Files parsed at a time (default: one per CPU).")
def diff(paths: tuple[str, ...], as_json: bool, ranks: tuple[int, ...], comm: str | None, around: int | None,
         full_window: bool, workers: int | None) -> None:
    """Find the first divergent collective, the corrupt-and-continue window and the wedge.

    PATHS are evidence files from the ranks of one job, or folders (walked recursively): NCCL debug logs,
    Flight Recorder dumps, PyTorch logs, RAS replies, gate journals, fingerprint traces, in any mix; `-` reads a
    pasted log from standard input. --rank and --comm analyse that part of the job alone (ranks and comms as
    the whole job's analysis names them). Exit code: 0 consistent (or transient skew, or inconclusive), 1
    divergence found, 2 trouble (bad input; the result for the good files is still printed).

    \b
    Example:
        ncclforensics diff rank*.log
        ncclforensics diff --json incident/ > finding.json
        ncclforensics diff --around 5 --rank 0 --rank 1 incident/
        pbpaste | ncclforensics diff -
    """
    view = api.View(ranks=frozenset(ranks) if ranks else None, comm=comm)
    parsed, diagnosis = _with_progress(as_json, lambda hook: api.diff_paths(list(paths), hook, view, workers))
    side = api.aligned_view(diagnosis, around) if around is not None else None
    if as_json:
        result = data.diff_dict(diagnosis, full_window, side, view)
        result["problems"] = [data.problem_dict(p) for p in parsed.all_problems + diagnosis.problems]
        _echo_json(result)
    else:
        console_report.render_diagnosis(Console(), diagnosis)
        if around is not None:
            click.echo("\n" + (side_by_side_report.render_text(side) if side is not None else
                               "No aligned view: no root placed in recorded streams."))
    trouble = _report_problems(parsed, diagnosis.problems)
    sys.exit(exit_code(trouble, diagnosis.verdict is Verdict.DIVERGED))


@cli.command(short_help="Tables of the evidence (Parquet, CSV, NDJSON) for polars, pandas, DuckDB.")
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False),
              help="The table file: .parquet, .csv or .ndjson (refused on an input file or inside an input folder).")
@click.option("--table", type=click.Choice([t.value for t in export_report.ExportTable]), default="collectives",
              show_default=True, help="Which table: the collectives as compared, gate decisions, fingerprints, "
              "RAS counts.")
def export(paths: tuple[str, ...], out: str, table: str) -> None:
    """Write a table of the evidence for polars, pandas or DuckDB; the format follows the suffix of OUT.

    `collectives`: every collective as `diff` compared it, one row per (comm, rank, seq), with where it was read
    (file, line or record, format; the Flight Recorder record beside a log line), rank, comm, comm rank, seq, op,
    count, dtype, reduction, root, state, call site, step, tag, time. `gates`, `fingerprints`, `ras`: gate
    decisions, fingerprint rows, RAS counts per reply, comm, rank and collective type. Exit code: 0 written,
    2 trouble (the table is still written for the good files, except when OUT is refused).

    \b
    Example:
        ncclforensics export incident/ --out collectives.parquet
        ncclforensics export --table gates soak/ --out gates.csv
    """
    parsed, frame = _with_progress(False, lambda hook: api.export_paths(
        list(paths), out, export_report.ExportTable(table), hook))
    written = export_report.write_table(frame, out)
    _stderr().print(f"wrote {escape.printable(written)}: {phrases.plural(frame.height, f'{table} row')}", markup=False)
    trouble = _report_problems(parsed)
    sys.exit(exit_code(trouble))


# --- postmortem, gates, acceptance ---------------------------------------------------------------------------


@cli.command(short_help="Write report.md, report.html and the plots of one incident.")
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--out", "out", required=True, type=click.Path(file_okay=False),
              help="Folder for report.md, report.html and the PNGs (created; refused inside an input folder).")
def postmortem(paths: tuple[str, ...], out: str) -> None:
    """Write a postmortem: report.md, a self-contained report.html (plots embedded) and the PNGs.

    Sections: verdict, timeline, root cause, window, wedge, evidence index with file:line receipts, caveats and
    the command that reproduces it. Plots: per-rank collectives per communicator (root, wedge and window
    marked), gate decisions near the ceiling, RAS counts across replies. OUT must not be (or resolve into) an
    input folder. Exit code as diff: 0 consistent or transient, 1 diverged, 2 trouble (the report is still
    written for the good files, except when OUT is refused).

    \b
    Example:
        ncclforensics postmortem incident/ --out postmortem-incident/
        ncclforensics postmortem rank*.log fr_rank* ras_status_*.txt --out /tmp/pm
    """
    parsed, data = _with_progress(False, lambda hook: api.postmortem_paths(list(paths), out, hook))
    written = postmortem_report.write_postmortem(data)
    tables = [p.name for p in written if p.name in postmortem_report.PAIRINGS_FILES]
    _stderr().print(f"wrote {escape.printable(written[0])}, {escape.printable(written[1])}, "
                    f"{phrases.plural(sum(p.suffix == '.png' for p in written), 'plot')}"
                    + (f" and the window's pairing runs ({', '.join(tables)})" if tables else ""), markup=False)
    trouble = _report_problems(parsed, data.diagnosis.problems)
    sys.exit(exit_code(trouble, data.diagnosis.verdict is Verdict.DIVERGED))


@cli.command(short_help="Did soak runs reach the gate's ceiling window, and agree?")
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--plot", "plot", type=click.Path(dir_okay=False), help="Write a PNG of exercised steps per session.")
def gates(paths: tuple[str, ...], as_json: bool, plot: str | None) -> None:
    """Gate coverage over soak runs: was the drafter gate's ceiling window ever reached, and did ranks agree?

    PATHS are gate journals or folders of them (files of other formats, or of none, are skipped). A session is
    one folder's set of per-rank journals; a journal whose step counter goes back down starts a new session in
    that folder. Per
    session: steps, steps in the ceiling window (sequence length >= max_model_len - spec_tokens + 1), pass and
    skip counts per rank, lockstep, the first disagreement. Verdict: EXERCISED, NOT EXERCISED, or WINDOW UNKNOWN
    when the journals lack max_model_len/spec_tokens. Exit code: 0 no disagreement, 1 the gates disagreed in a
    session, 2 trouble (a journal line that cannot be read, or no journal at all in PATHS).

    \b
    Example:
        ncclforensics gates soak/ --plot coverage.png
        ncclforensics gates --json soak/session-*/ > coverage.json
    """
    if plot:
        api.check_output("--plot", plot, list(paths), folder_of_files=False)
    parsed, coverage = _with_progress(as_json, lambda hook: api.gate_coverage_paths(list(paths), hook))
    if as_json:
        _echo_json(data.coverage_dict(coverage))
    else:
        console_report.render_coverage(Console(), coverage)
    if plot:
        plots.write_png(plots.plot_coverage(coverage), plot)
    trouble = _report_problems(parsed)
    sys.exit(exit_code(trouble, bool(coverage.disagreeing_sessions)))


@cli.command(short_help="Spec-decode acceptance per run: collapse and low acceptance.")
@click.argument("logs", nargs=-1, required=True, type=click.Path())
@click.option("--json", "as_json", is_flag=True, help='Print {"runs": [...]} as JSON.')
@click.option("--baseline", type=click.Path(), help="A healthy run's log to compare against.")
@click.option("--collapse-threshold", type=click.FloatRange(0, 1), default=0.5, show_default=True,
              help="Collapsed when a later position's conditional acceptance is below this.")
@click.option("--baseline-margin", type=click.FloatRange(0, 1), default=0.10, show_default=True,
              help="With --baseline: collapsed when a later position's conditional acceptance is more than this "
                   "below the baseline's (absolute).")
@click.option("--low-acceptance", type=click.FloatRange(0, 1), default=0.3, show_default=True,
              help="Low when the run's overall acceptance (accepted / drafted tokens) is below this.")
@click.option("--plot", "plot", type=click.Path(dir_okay=False), help="Write a PNG of the per-position curves.")
def acceptance(logs: tuple[str, ...], as_json: bool, baseline: str | None, collapse_threshold: float,
               baseline_margin: float, low_acceptance: float, plot: str | None) -> None:
    """Spec-decode acceptance per run (file) from vLLM SpecDecoding metrics lines; flags acceptance collapse.

    Per run: per-position acceptance rates (weighted by drafted tokens), mean acceptance length, conditional
    acceptance (rate k / rate k-1), and `collapsed` when a later position's conditional acceptance is below
    --collapse-threshold, or more than --baseline-margin below the --baseline run's, or nothing was accepted at
    all; `low` when its overall acceptance is below --low-acceptance (the one judgement for logs without
    per-position rates, such as vLLM V0's). Exit code: 0 no run collapsed or low, 1 a run collapsed or is low,
    2 trouble.

    \b
    Example:
        ncclforensics acceptance server.log
        ncclforensics acceptance --baseline before-fix.log --plot acceptance.png after-fix.log
    """
    if plot:
        api.check_output("--plot", plot, list(logs) + ([baseline] if baseline else []), folder_of_files=False)
    options = api.AcceptanceOptions(threshold=collapse_threshold, baseline_margin=baseline_margin,
                                    low_rate=low_acceptance)
    parsed, report = _with_progress(as_json, lambda hook: api.acceptance_paths(list(logs), baseline, options, hook))
    if as_json:
        _echo_json(data.acceptance_dict(report))
    else:
        console_report.render_acceptance(Console(), report)
    if plot:
        plots.write_png(plots.plot_acceptance(report), plot)
    trouble = _report_problems(parsed)
    sys.exit(exit_code(trouble, bool(report.flagged)))


# The live mode imports torch only inside its commands, so registering it costs offline commands nothing.
from .live.cli import live  # noqa: E402

cli.add_command(live)


def main() -> None:
    """Console-script entry point."""
    cli()


if __name__ == "__main__":
    main()
