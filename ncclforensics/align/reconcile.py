"""Cross-check what different sources say about how far each rank got; report where they contradict."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..model import Location, ProgressReport, WatchdogEvent
from .ras import RasHistory
from .streams import Streams

# A SeqNum a rank timed out in says it launched at least that many; PyTorch enqueues asynchronously, so it may
# have launched many more: it contradicts a count only where it is above it.
FLOOR_LABELS = {"watchdog timeout SeqNum"}

CUDA_GRAPH_NOTE = (
    "RAS counts exclude collectives captured in CUDA graphs (NCCL >= 2.26.2), so a deployment replaying graphs "
    "shows smaller RAS counts than its logs"
)


@dataclass
class Contradiction:
    """Sources that disagree about one rank's launched count in one comm."""

    comm: str
    rank: int
    values: dict[str, tuple[int, Location]]  # source -> (launched count, where)
    note: str = ""


@dataclass
class Reconciliation:
    """Launched counts per (comm, rank) by source, and the contradictions among them."""

    contradictions: list[Contradiction] = field(default_factory=list)
    checked: int = 0


def reconcile(streams: Streams, progress: list[ProgressReport], watchdog: list[WatchdogEvent],
              ras: dict[str, RasHistory], ras_rank_map: dict[tuple[str, int], int]) -> Reconciliation:
    """Compare COLL line counts, Flight Recorder seqs and pg_status, watchdog marks and RAS counts."""
    values: dict[tuple[str, int], dict[str, tuple[int, Location]]] = {}
    for (comm, rank, source), (last, file) in streams.launched_by_source.items():
        if source == "fingerprint":
            continue  # a trace records the collectives whose results were read back: fewer than launched, no count
        label = {"nccl-log": "COLL lines", "torch-log": "watchdog timeout SeqNum"}.get(source, "Flight Recorder entries")
        values.setdefault((comm, rank), {})[label] = (last, Location(file))
    for report in progress:
        if report.rank is None or report.last_enqueued is None:
            continue
        comm = streams.aliases.get(report.comm, report.comm)
        label = "Flight Recorder pg_status" if "#" in str(report.loc) or report.loc.line is None else "watchdog"
        values.setdefault((comm, report.rank), {})[f"{label} last enqueued"] = (report.last_enqueued, report.loc)
    for event in watchdog:
        if event.rank is None or event.last_enqueued is None or event.comm is None:
            continue
        comm = streams.aliases.get(event.comm, event.comm)
        values.setdefault((comm, event.rank), {})["watchdog last enqueued"] = (event.last_enqueued, event.loc)
    for comm, history in ras.items():
        if not history.stuck or (history.states[-1][1].size or 0) < 2:
            # A reply from a running job is only a lower bound on what the logs later show, and NCCL
            # short-circuits single-rank communicators (their counts stay 0): neither can contradict a log.
            continue
        for comm_rank, total in history.launched().items():
            rank = ras_rank_map.get((comm, comm_rank))
            if rank is not None:
                values.setdefault((comm, rank), {})["RAS count"] = (total, history.states[-1][1].loc)
    result = Reconciliation()
    for (comm, rank), by_source in sorted(values.items()):
        if len(by_source) < 2:
            continue
        result.checked += 1
        counts = {v for v, _ in by_source.values()}
        exact = {v for label, (v, _) in by_source.items() if label not in FLOOR_LABELS}
        floors = [v for label, (v, _) in by_source.items() if label in FLOOR_LABELS]
        if len(counts) < 2 or len(exact) < 2 and all(f <= max(exact, default=f) for f in floors):
            continue
        note = ""
        ras_value = by_source.get("RAS count")
        if ras_value and ras_value[0] < max(counts):
            note = CUDA_GRAPH_NOTE
        # A Flight Recorder ring buffer and a dump taken later than the log legitimately differ by the
        # collectives issued in between; the report shows each value with its source so a reader can judge.
        result.contradictions.append(Contradiction(comm, rank, dict(sorted(by_source.items())), note))
    return result
