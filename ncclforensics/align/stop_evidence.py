"""What shows that a communicator stopped rather than merely lagging: watchdog timeouts, Flight Recorder entries
never completed, ranks gone in RAS, a pairing NCCL never completes; and the wedge a root's counts place where a
stop elsewhere waits on it.
"""

from __future__ import annotations

import polars as pl

from ..model import WatchdogEvent
from ..model.phrases import ranks_words
from .answers import STOPPED, CommAnalysis, Root
from .comm_streams import comm_streams
from .ras import RasHistory
from .ras_only import ras_comm_wedge
from .streams import Streams
from .watchdog import STOP_EVENTS
from .nccl_pairing import first_hanging_pairing
from .wedge import Wedge


def counted_cause_wedge(wedge: Wedge | None, root: Root, ras: dict[str, RasHistory],
                         rank_map: dict[tuple[str, int], int], stops: dict[str, list[str]], dead: set[int]
                         ) -> Wedge | None:
    """Where the root is a communicator's counts that caused the streams' stop elsewhere (choose.py), a wedge
    in another communicator whose absent ranks are all the root's members waits on the root's: the wedge is the
    root's by its counts, confirmed by that stop too."""
    history = ras.get(root.comm)
    members = {rank for (comm, _), rank in rank_map.items() if comm == root.comm}
    if history is None or wedge is None or wedge.comm == root.comm or not wedge.absent_ranks \
            or not set(wedge.absent_ranks) <= members:
        return wedge
    found = ras_comm_wedge(root.comm, history, rank_map, stops, dead)
    if found is None:
        return wedge
    found.confirmed_by += [f"{reason}, in comm {wedge.comm}, which waits on it" for reason in wedge.confirmed_by
                           if reason not in found.confirmed_by]
    return found


def stop_evidence(streams: Streams, analyses: dict[str, CommAnalysis], ras: dict[str, RasHistory],
                   watchdog: list[WatchdogEvent], dead: set[int]) -> dict[str, list[str]]:
    """comm -> what shows that it stopped rather than merely lagging."""
    stops: dict[str, list[str]] = {}
    for event in watchdog:
        if event.kind in STOP_EVENTS:
            comm = streams.aliases.get(event.comm, event.comm) if event.comm else None
            targets = [comm] if comm in analyses else [c for c, a in analyses.items() if event.rank in a.ranks]
            for c in targets:
                label = f"watchdog {event.kind.replace('_', ' ')} ({event.loc})"
                if label not in stops.setdefault(c, []):
                    stops[c].append(label)
    for comm, analysis in analyses.items():
        if analysis.has_states and unfinished_entries(streams, comm):
            stops.setdefault(comm, []).append("Flight Recorder entries launched but never completed")
        if dead & set(analysis.ranks):
            stops.setdefault(comm, []).append(f"{ranks_words(sorted(dead & set(analysis.ranks)))} gone (missing, "
                                              f"unreachable or dead in RAS, or cut off from a peer)")
    for comm, history in ras.items():
        if history.stuck:
            stops.setdefault(comm, []).append(
                f"RAS counts unchanged over {len(history.states)} replies while ranks disagree")
        lost = sorted(set(history.missing_ranks) | set(history.dead_ranks))
        if lost and comm not in analyses:
            stops.setdefault(comm, []).append(
                f"RAS lists comm {ranks_words(lost)} as gone (missing, unreachable or dead)")
    return stops


def hanging_pairings(streams: Streams, analyses: dict[str, CommAnalysis]) -> dict[str, list[str]]:
    """comm -> a pairing its records show that NCCL never completes (types of different sizes at one seq, among the
    ranks that recorded it: a rank whose log was cut before it cannot complete it), past a root the records show:
    the group stopped there, whatever else is on record, so ranks that launched fewer than the others are behind,
    not lagging (NCCL logs alone say nothing of completion)."""
    found: dict[str, list[str]] = {}
    for comm, analysis in analyses.items():
        root = analysis.root
        if root is None or not root.shown or root.kind == STOPPED or not analysis.launched:
            continue
        rows = comm_streams(streams.comm_parts(comm))
        hang = first_hanging_pairing(rows, max(analysis.first_seq.values()), max(analysis.launched.values()))
        if hang is not None:
            found[comm] = [f"a pairing NCCL never completes at seq {hang}"]
    return found


def unfinished_entries(streams: Streams, comm: str) -> bool:
    """Whether a Flight Recorder dump holds an entry of `comm` it never saw complete. (Not a row some other source
    adds after the dump was taken: a log goes on where a dump taken by hand stopped.)"""
    unfinished = pl.col("fr_file").is_not_null() & (pl.col("state") != "completed")
    return any(part.select(unfinished.any()).item() for part in streams.comm_parts(comm).values())
