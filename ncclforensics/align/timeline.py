"""What a postmortem shows over time: per-rank lanes of each communicator that matters, and the ordered story.

Pure values for report/plots.py and report/postmortem.py. A lane is one rank's launched collectives in one
communicator as runs of equal signature (`AllReduce 4096 x float32` for seq 1..24), so that millions of
collectives draw as a handful of segments.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from ..model import Location, WatchdogEvent
from ..model.phrases import ranks_words, seq_words
from .diagnosis import Diagnosis
from .watchdog import STOP_EVENTS
from .answers import DIFFERENT_OPS, EXTRA, MISSING, STOPPED
from .ras_only import floors_unordered, uncounted_ranks
from .streams import Streams
from .wedge import PairingRun

MAX_TIME_POINTS = 2000  # per rank, for the seq-against-time panel
MAX_RUNS = 20_000  # over all ranks; past it, runs are kept only near the root/wedge (see CommLanes.detail)
DETAIL_HALF_WIDTH = 200  # seqs either side of the focus kept in detail
TIMELINE_PAIRING_RUNS = 10  # window pairing runs told one by one in the timeline; the rest summed per kind


def pairing_totals(runs: list[PairingRun]) -> dict[str, tuple[int, int]]:
    """Pairing kind -> (runs, collectives), kinds in order of first appearance: how a window of tens of
    thousands of alternating runs is summed up."""
    totals: dict[str, tuple[int, int]] = {}
    for run in runs:
        count, collectives = totals.get(run.kind.value, (0, 0))
        totals[run.kind.value] = (count + 1, collectives + run.collectives)
    return totals


@dataclass(frozen=True)
class LaneRun:
    """Consecutive seqs of one rank with one signature."""

    first_seq: int
    last_seq: int
    label: str  # `AllReduce 4096 x float32`


@dataclass
class CommLanes:
    """One communicator's streams, per rank, ready to draw."""

    comm: str
    ranks: list[int]
    runs: dict[int, list[LaneRun]]
    launched: dict[int, int]
    completed: dict[int, int | None]
    times: dict[int, tuple[list[float], list[int]]] = field(default_factory=dict)  # rank -> (times, seqs)
    extents: dict[int, tuple[int, int]] = field(default_factory=dict)  # rank -> (first seq, last seq) read
    # None: `runs` cover every seq. Otherwise the seq range they cover: a stream whose signatures alternate
    # (AllReduce, AllGather, AllReduce, ... per layer) has as many runs as collectives, far too many to draw.
    detail: tuple[int, int] | None = None

    @property
    def labels(self) -> list[str]:
        """Signatures by how many seqs they cover, most first."""
        cover: dict[str, int] = {}
        for runs in self.runs.values():
            for run in runs:
                cover[run.label] = cover.get(run.label, 0) + run.last_seq - run.first_seq + 1
        return sorted(cover, key=lambda k: (-cover[k], k))


def comms_that_matter(diagnosis: Diagnosis, limit: int = 6) -> list[str]:
    """The root's, the first visible mismatch's and the wedge's communicators (and those of a deadlock cycle);
    when nothing diverged, the communicators with more than one rank, most collectives first."""
    chosen: list[str] = []

    def add(comm: str | None) -> None:
        if comm and comm in diagnosis.comms and comm not in chosen:
            chosen.append(comm)

    if diagnosis.root is not None:
        add(diagnosis.root.comm)
    if diagnosis.first_visible is not None:
        add(diagnosis.first_visible[0])
    if diagnosis.wedge is not None:
        add(diagnosis.wedge.comm)
        for _, comm, _ in diagnosis.wedge.cycle:
            add(comm)
    if not chosen:
        multi = [c for c, a in diagnosis.comms.items() if len(a.ranks) > 1] or list(diagnosis.comms)
        multi.sort(key=lambda c: (-max(diagnosis.comms[c].launched.values(), default=0), c))
        chosen = multi
    return chosen[:limit]


def comm_lanes(rows: pl.DataFrame | Streams, diagnosis: Diagnosis, comm: str) -> CommLanes:
    """Lanes of `comm` from the merged streams (Streams, or its frame). Each rank's rows are read on their own,
    a few columns at a time: the frame of every rank of a big job (Streams.frame) spells out the columns a parsed
    log holds as one value, gigabytes for 8 logs of a million collectives."""
    parts = _comm_parts(rows, comm)
    runs: dict[int, list[LaneRun]] = {}
    heads = []
    for rank, part in parts.items():
        signature = pl.struct(pl.col("op"), pl.col("count"), pl.col("dtype")).hash()
        starts = ((signature != signature.shift(1)) | (pl.col("seq") != pl.col("seq").shift(1) + 1)).fill_null(True)
        heads.append(part.select("seq", "op", "count", "dtype", starts.cum_sum().alias("_run")).group_by(
            "_run", maintain_order=True).agg(
            pl.col("seq").min().alias("lo"), pl.col("seq").max().alias("hi"), pl.col("op").first(),
            pl.col("count").first(), pl.col("dtype").first(),
        ).select(pl.lit(rank, pl.Int64).alias("rank"), "lo", "hi", _LABEL))
    grouped = pl.concat(heads) if heads else pl.DataFrame(schema={"rank": pl.Int64, "lo": pl.Int64,
                                                                  "hi": pl.Int64, "label": pl.String})
    extents = {rank: (int(part.get_column("seq").min()), int(part.get_column("seq").max()))
               for rank, part in parts.items() if part.height}
    detail = None
    if grouped.height > MAX_RUNS:
        focus = _focus(diagnosis, comm, max(hi for _, hi in extents.values()))
        detail = (focus - DETAIL_HALF_WIDTH, focus + DETAIL_HALF_WIDTH)
        grouped = grouped.filter((pl.col("hi") >= detail[0]) & (pl.col("lo") <= detail[1]))
    for rank, lo, hi, text in grouped.select("rank", "lo", "hi", "label").iter_rows():
        runs.setdefault(rank, []).append(LaneRun(lo, hi, text))
    analysis = diagnosis.comms.get(comm)
    wedge = diagnosis.wedge if diagnosis.wedge is not None and diagnosis.wedge.comm == comm else None
    # Ranks the wedge names but no row describes (known from counts only) still get a lane, empty.
    named = set(wedge.waiting_ranks) | set(wedge.absent_ranks) if wedge else set()
    lanes = CommLanes(
        comm=comm, ranks=sorted(set(extents) | named), runs=runs,
        launched=dict(analysis.launched) if analysis else {},
        completed=dict(analysis.completed) if analysis else {},
        extents=extents, detail=detail,
    )
    if parts and all(part.get_column("time").null_count() == 0 for part in parts.values()):
        for rank, part in parts.items():
            step = max(1, part.height // MAX_TIME_POINTS)
            sample = part.select("seq", "time").gather_every(step)
            if sample.get_column("seq")[-1] != part.get_column("seq")[-1]:
                sample = pl.concat([sample, part.select("seq", "time").tail(1)])
            lanes.times[rank] = (sample.get_column("time").to_list(), sample.get_column("seq").to_list())
    return lanes


_LABEL = pl.concat_str([
    pl.col("op").fill_null("?"), pl.lit(" "), pl.col("count").cast(pl.String).fill_null("?"), pl.lit(" x "),
    pl.col("dtype").fill_null("?")], ignore_nulls=False).alias("label")


def _comm_parts(rows: pl.DataFrame | Streams, comm: str) -> dict[int, pl.DataFrame]:
    """rank -> its rows of `comm` in seq order, ranks in order."""
    if isinstance(rows, Streams):
        return {rank: part for rank, part in sorted(rows.comm_parts(comm).items()) if part.height}
    mine = rows.filter(pl.col("comm") == comm).sort(["rank", "seq"])
    return {rank: part for (rank,), part in mine.partition_by("rank", maintain_order=True, as_dict=True).items()}


def _focus(diagnosis: Diagnosis, comm: str, last: int) -> int:
    """The seq a reader looks at first in `comm`: the root's, else the wedge's, else the last one."""
    if diagnosis.root is not None and diagnosis.root.comm == comm and diagnosis.root.seq is not None:
        return diagnosis.root.seq
    if diagnosis.wedge is not None and diagnosis.wedge.comm == comm:
        return diagnosis.wedge.seq
    return last


@dataclass(frozen=True)
class TimelineEntry:
    """One moment of the story, in causal order."""

    when: str  # `step 5`, `seq 25`, `seq 25..49`, `after the wedge`
    what: str
    where: tuple[Location, ...] = ()


def timeline(diagnosis: Diagnosis, watchdog: list[WatchdogEvent]) -> list[TimelineEntry]:
    """Gate disagreement -> root -> first visible mismatch -> window runs -> corrupted checksums -> wedge ->
    what noticed the stop (watchdog, RAS)."""
    out: list[TimelineEntry] = []
    gate = diagnosis.gate
    if gate is not None:
        window = ""
        if gate.in_ceiling_window is not None:
            window = f" ({'inside' if gate.in_ceiling_window else 'outside'} the ceiling window)"
        out.append(TimelineEntry(
            f"step {gate.step}", f"drafter gates disagree: pass on {ranks_words(gate.passed)}, skip on "
                                 f"{ranks_words(gate.skipped)}{window}", tuple(gate.locations)))
    root = diagnosis.root
    if root is not None:
        where = "seq unknown" if root.seq_range is None else seq_words(*root.seq_range)
        verb = {EXTRA: "launch a collective the others do not", MISSING: "skip a collective the others launch",
                DIFFERENT_OPS: "launch a different collective than the others",
                STOPPED: "stop launching" + (f" (nothing after seq {root.seq - 1})" if root.seq else "")}.get(root.kind, f"diverge ({root.kind})")
        step = f" (step {diagnosis.root_step})" if diagnosis.root_step is not None else ""
        out.append(TimelineEntry(f"{where}{step}",
                                 f"root: {ranks_words(root.outlier_ranks)} {verb} in comm {root.comm}",
                                 tuple(op.loc for _, op in sorted(root.ops.items()))))
    if diagnosis.first_visible is not None and (root is None or diagnosis.first_visible != (root.comm, root.seq)):
        comm, seq = diagnosis.first_visible
        ops = diagnosis.comms[comm].first_visible_ops
        out.append(TimelineEntry(f"seq {seq}", f"first visible mismatch of signatures in comm {comm} (what a "
                                               f"position-by-position check reports)",
                                 tuple(op.loc for _, op in sorted(ops.items()))))
    if diagnosis.window is not None:
        kinds = {"shape_equal": "shape-equal pairing: completes with mixed data (silent corruption)",
                 "count_mismatch": "count mismatch pairing", "type_mismatch": "type mismatch pairing"}
        runs = diagnosis.window.pairings
        for run in runs[:TIMELINE_PAIRING_RUNS]:
            out.append(TimelineEntry(f"seq {run.first_seq}..{run.last_seq}",
                                     f"{run.collectives} collective(s) in comm {diagnosis.window.comm}: "
                                     f"{kinds[run.kind.value]}"))
        rest = runs[TIMELINE_PAIRING_RUNS:]
        if rest:
            totals = ", ".join(f"{kinds[kind].split(':')[0]}: {n} run(s), {c} collective(s)"
                               for kind, (n, c) in pairing_totals(rest).items())
            out.append(TimelineEntry(f"seq {rest[0].first_seq}..{rest[-1].last_seq}",
                                     f"{len(rest)} more pairing runs in comm {diagnosis.window.comm} ({totals})"))
    if diagnosis.corrupted_fingerprints:
        first = min(diagnosis.corrupted_fingerprints, key=lambda f: (f.step, f.op or 0, f.rank))
        out.append(TimelineEntry(f"step {first.step}",
                                 f"first checksum that differs from the expected value: rank {first.rank} "
                                 f"({len(diagnosis.corrupted_fingerprints)} in all)", (first.loc,)))
    wedge = diagnosis.wedge
    if wedge is not None:
        waiting = f"{ranks_words(wedge.waiting_ranks)} inside it" if wedge.waiting_ranks else "no rank inside it"
        gone = uncounted_ranks(wedge)
        behind = [r for r in wedge.absent_ranks if r not in gone]
        # (a count read before the counts settled is a floor with no order: a rank behind by it may be ahead)
        absent = ("" if not behind else f", {ranks_words(behind)} behind by counts that may predate the stop"
                  if floors_unordered(wedge) else f", {ranks_words(behind)} never launched it")
        absent += f", {ranks_words(gone)} gone (count unknown)" if gone else ""
        # (a wedge the evidence only bounds is labelled with every seq it can be at, not the one its fields describe)
        where = seq_words(*wedge.seq_range) if wedge.seq_range is not None else f"seq {wedge.seq}"
        out.append(TimelineEntry(where, f"wedge in comm {wedge.comm} ({wedge.kind.value.replace('_', ' ')}): "
                                        f"{waiting}{absent}", tuple(wedge.evidence[:4])))
    # What noticed the stop, one entry per (kind, seq): `timeout at seq 17 on ranks 0, 1, 2 and 3`.
    noticed: dict[tuple[str, int | None], list[WatchdogEvent]] = {}
    for event in watchdog:
        if event.kind in STOP_EVENTS:
            noticed.setdefault((event.kind, event.seq), []).append(event)
    for (kind, seq), events in list(noticed.items())[:8]:
        at = f" at seq {seq}" if seq is not None else ""
        ranks = sorted({e.rank for e in events if e.rank is not None})
        out.append(TimelineEntry("after the wedge" if wedge else "at the stop",
                                 f"{kind.replace('_', ' ')}{at} on {ranks_words(ranks)}",
                                 tuple(e.loc for e in events[:4])))
    for comm, history in sorted(diagnosis.ras.items()):
        if history.stuck or history.moving:
            state = "counts unchanged while ranks disagree (stuck)" if history.stuck else "counts moving"
            out.append(TimelineEntry("RAS replies", f"comm {comm}: {len(history.states)} replies, {state}",
                                     tuple(history.locations[:2])))
    return out

