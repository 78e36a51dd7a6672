"""The `live` command group: `sidecar` and `ras`. Importing it needs no torch (torch is imported when a command runs).

Exit codes, as everywhere in ncclforensics: 0 nothing found, 1 found (a gate disagreement, a stuck communicator),
2 trouble (a peer missing past the timeout, the store or the RAS server unreachable, an unreadable journal line).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from collections.abc import Iterator

import click

from ..commands import OneLineErrors, exit_code
from .view import plural



def _quiet_torch() -> None:
    # c10d logs connection retries and peer closures at WARNING on stderr; the commands report them as one line.
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "FATAL")


@contextmanager
def _stop_on_signals() -> Iterator[threading.Event]:
    """An event set by SIGINT/SIGTERM while the block runs, so a loop ends cleanly (and tells its peers) instead
    of dying; a second signal interrupts at once. The previous handlers come back afterwards."""
    stop = threading.Event()

    def handler(signum, frame):  # noqa: ARG001
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@click.group(cls=OneLineErrors, context_settings={"help_option_names": ["-h", "--help"]},
             short_help="Watch a running job: gate sidecars and a RAS watcher.")
def live() -> None:
    """Watch a running job: gate sidecars per rank, and a NCCL RAS watcher.

    \b
    Example:
        ncclforensics live sidecar --rank 0 --world-size 4 --journal gate_rank0.jsonl
        ncclforensics live ras --interval 5 --out ras-capture/
    """


@live.command(short_help="Compare one rank's gate decisions with the others' as it runs.")
@click.option("--rank", type=int, required=True, help="This sidecar's rank (the rank whose journal it tails).")
@click.option("--world-size", type=int, required=True, help="Number of sidecars (tensor-parallel ranks).")
@click.option("--store", default="127.0.0.1:29517", show_default=True,
              help="HOST:PORT of the TCPStore rank 0 hosts (bound to HOST only; no authentication).")
@click.option("--journal", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="This rank's gate journal (JSONL or key=value lines).")
@click.option("--alerts", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Append one JSON line per disagreement here.")
@click.option("--follow/--no-follow", default=True, show_default=True,
              help="Keep tailing (survives rotation and truncation), or stop after the last step every rank has.")
@click.option("--timeout", type=float, default=30.0, show_default=True,
              help="Seconds a peer may be missing or silent before this is trouble (exit 2); joining the group "
                   "takes at most this long in all, however many tries it takes.")
@click.option("--interval", type=float, default=0.2, show_default=True, hidden=True,
              help="Seconds between idle rounds.")
def sidecar(rank: int, world_size: int, store: str, journal: Path, alerts: Path | None, follow: bool,
            timeout: float, interval: float) -> None:
    """Compare one rank's drafter-gate decisions with every other rank's, step by step, while the job runs.

    Run one per rank. Rank 0 hosts a TCPStore at --store (loopback by default; TCPStore has no authentication, so
    never expose it beyond a trusted network); the sidecars form their own gloo group through it. Every step that
    all ranks have journaled is compared; a disagreement prints an alert and appends it to --alerts. Exit 0: no
    disagreement; 1: a disagreement was seen; 2: trouble (a peer missing past --timeout, the store unreachable,
    an unreadable journal line).

    \b
    Example:
        ncclforensics live sidecar --rank 0 --world-size 2 --journal gate_rank0.jsonl --alerts alerts.jsonl &
        ncclforensics live sidecar --rank 1 --world-size 2 --journal gate_rank1.jsonl --alerts alerts.jsonl
        ncclforensics live sidecar --rank 1 --world-size 2 --store 10.0.0.5:29517 --journal j1.log --no-follow
    """
    if alerts is not None:
        from ..sources.discover import check_output

        check_output("--alerts", alerts, [journal], folder_of_files=False)  # never appended to the journal it reads
    _quiet_torch()
    from .sidecar import SidecarOptions, parse_store, run_sidecar

    host, port = parse_store(store)
    options = SidecarOptions(rank=rank, world_size=world_size, journal=journal, host=host, port=port,
                             alerts=alerts, follow=follow, timeout=timeout, interval=interval)

    def alert(a) -> None:
        click.echo(f"rank {rank}: ALERT {a.describe()}")

    def note(text: str) -> None:
        click.echo(f"note: {text}", err=True)

    with _stop_on_signals() as stop:
        result = run_sidecar(options, on_alert=alert, on_note=note, stop=stop)
    for r, (last, journaled) in sorted(result.uncompared.items()):
        note(f"rank {r} journaled up to step {journaled}; steps after {last} were not journaled by every rank")
    click.echo(f"rank {rank}: {plural(result.steps_compared, 'step')} compared, "
               f"{plural(result.disagreements, 'disagreement')}"
               + (f", {plural(result.incomplete_steps, 'step')} not journaled by every rank"
                  if result.incomplete_steps else ""),
               err=True)
    if not result.steps_compared:
        click.echo(f"warning: {journal}: no step was compared (no gate decision line that every rank journaled); "
                   f"is --journal this rank's gate journal?", err=True)
    sys.exit(exit_code(False, bool(result.disagreements)))


@live.command(short_help="Poll NCCL RAS, save every reply, report stuck communicators.")
@click.option("--host", default="127.0.0.1", show_default=True, help="RAS server (NCCL_RAS_ADDR of the job).")
@click.option("--port", type=int, default=28028, show_default=True, help="RAS client port.")
@click.option("--interval", type=float, default=5.0, show_default=True, help="Seconds between polls.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder for the replies (ras_<n>.txt); a new or empty one. Default: ./ras-capture-<time>.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per state change (JSONL).")
@click.option("--polls", type=click.IntRange(min=1), default=None, help="Stop after N good replies.")
@click.option("--stuck-after", type=click.IntRange(min=2), default=3, show_default=True,
              help="Polls with the same disagreeing counts that make a communicator stuck.")
@click.option("--format", "fmt", type=click.Choice(["auto", "json", "text"]), default="auto", show_default=True,
              help="Reply format: JSON when the server has it (NCCL 2.28.7+), else text.")
@click.option("--verbose-status", is_flag=True, help="Send VERBOSE STATUS (looser outlier rules; text only).")
@click.option("--timeout", "collective_timeout", type=click.IntRange(min=0), default=5, show_default=True,
              help="RAS TIMEOUT: seconds the RAS collective waits per leg.")
@click.option("--connect-timeout", type=float, default=2.0, show_default=True, help="Seconds to connect.")
@click.option("--read-timeout", type=float, default=None,
              help="Seconds a report may take, from STATUS to its last byte, however it trickles (default: "
                   "--timeout + 6); connecting and the handshake get --connect-timeout, also in all.")
@click.option("--max-failures", type=click.IntRange(min=0), default=5, show_default=True,
              help="Failed polls in a row before giving up (0: never).")
@click.option("--retry", type=float, default=1.0, show_default=True, hidden=True, help="First back-off, seconds.")
@click.option("--monitor", is_flag=True, help="Also follow RAS MONITOR events (NCCL 2.29+).")
def ras(host: str, port: int, interval: float, out: Path | None, as_json: bool, polls: int | None,
        stuck_after: int, fmt: str, verbose_status: bool, collective_timeout: int, connect_timeout: float,
        read_timeout: float | None, max_failures: int, retry: float, monitor: bool) -> None:
    """Poll NCCL RAS, save every reply, and report stuck communicators as they appear.

    Speaks the RAS client protocol on HOST:PORT (loopback by default). A communicator whose ranks disagree and
    whose counts stay the same for --stuck-after polls is stuck; disagreeing counts that move are transient skew.
    Missing and dead ranks are reported too. Every state change is printed (one JSON object per line with
    --json). A server that stalls, closes mid-reply or sends garbage is retried with back-off. Ctrl-C ends the
    watch with a summary. Exit 0: nothing stuck; 1: a stuck communicator was seen; 2: trouble (no reply at all,
    or --max-failures failed polls in a row).

    \b
    Example:
        ncclforensics live ras --interval 5 --out incident/ras
        ncclforensics live ras --json --polls 4 --stuck-after 3 --out ras-capture
        ncclforensics live ras --host 127.0.0.1 --port 28028 --format text --monitor
    """
    from rich.console import Console

    from .ras_watch import RasWatcher, WatchOptions, prepare_out_dir
    from .view import comm_table, retry_words, summary_lines

    if out is None:
        import time

        out = Path(f"ras-capture-{time.strftime('%Y%m%d-%H%M%S')}")
        click.echo(f"note: saving replies to {out}/ (made at the first reply)", err=True)
    options = WatchOptions(out=prepare_out_dir(out), host=host, port=port, interval=interval, polls=polls,
                           stuck_after=stuck_after, fmt=fmt, verbose=verbose_status,
                           collective_timeout=collective_timeout, connect_timeout=connect_timeout,
                           read_timeout=read_timeout, retry=retry, max_failures=max_failures, monitor=monitor)
    watcher = RasWatcher(options)
    console = Console(highlight=False, soft_wrap=True)

    def emit(obj: dict) -> None:
        click.echo(json.dumps(obj))

    def retry_note(error: str, delay: float, attempt: int) -> None:
        click.echo(retry_words(error, delay, attempt), err=True)

    def note(text: str) -> None:
        click.echo(f"note: {text}", err=True)

    def event(raw: bytes) -> None:
        text = raw.decode("utf-8", "replace")
        if as_json:
            emit({"kind": "ras_event", "event": text})
        else:
            console.print(f"RAS event: {text}")

    with _stop_on_signals() as stop:
        if as_json:
            summary = watcher.run(lambda c: emit(c.as_dict()), retry_note, on_event=event, on_note=note, stop=stop)
            emit(summary.as_dict())
        elif console.is_terminal:
            from rich.live import Live

            # Everything goes through the live view: lines printed beside it (stderr) would collide with the table
            # and leave stale fragments. The last failed poll stays in view until a reply arrives.
            with Live(comm_table(watcher), console=console, refresh_per_second=4) as view:
                def failed(error: str, delay: float, attempt: int) -> None:
                    view.update(comm_table(watcher, retry_words(error, delay, attempt)))

                def polled(w) -> None:
                    view.update(comm_table(w))

                summary = watcher.run(lambda c: view.console.print(c.describe(), markup=False, soft_wrap=False), failed,
                                      on_poll=polled, on_event=lambda raw: view.console.print(
                                          f"RAS event: {raw.decode('utf-8', 'replace')}", markup=False,
                                          soft_wrap=False),
                                      on_note=lambda text: view.console.print(f"note: {text}", markup=False,
                                                                              soft_wrap=False),
                                      stop=stop)
                view.update(comm_table(watcher, None if summary.polls_ok else summary.last_error))
        else:
            summary = watcher.run(lambda c: console.print(c.describe()), retry_note, on_event=event, on_note=note,
                                  stop=stop)
    if not as_json:  # on a terminal wrapped between words; in a pipe one line each
        for line in summary_lines(summary):
            console.print(line, markup=False, soft_wrap=not console.is_terminal)
    if summary.trouble:
        click.echo(f"error: {summary.gave_up or summary.last_error or 'no RAS reply'}", err=True)
    sys.exit(exit_code(summary.trouble, bool(summary.stuck)))


if __name__ == "__main__":
    live()
