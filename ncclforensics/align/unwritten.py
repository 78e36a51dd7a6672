"""Fingerprint traces not written up to where their ranks got, and where such ranks part from those whose are.

A trace holds a collective once its result was read back, and is written as results are (once a step, where it
is flushed so). A rank can complete collectives its trace does not hold yet: PyTorch's counts say so, and so does a
peer's record of a later collective of the comm, since NCCL completes a collective only once every rank of the comm
took part in it. Such a trace was not written past its end, in any comm: its ends say nothing of where the rank
stopped, as a file cut short says nothing (`unwritten_ends`).

What the traces still say is where each rank's read-backs ended. A rank whose trace holds a step, ending at seq E of
a comm, got through that step (or read-back) with nothing more of it to launch; peers that completed seq E with
it and hold nothing of that step never got through it: past seq E they had more of that step to launch, which it
did not. That is where the two sides part (`parted_at_read_back`).
"""

from __future__ import annotations

import polars as pl

from ..model import EventState, Location, ProgressReport, SourceFormat, WatchdogEvent
from .answers import EXTRA, MISSING, RangeReason, Root
from .streams import Streams

FINGERPRINT = SourceFormat.FINGERPRINT.value  # the source of trace rows in `Streams.launched_by_source`


def completed_floors(streams: Streams, progress: list[ProgressReport], watchdog: list[WatchdogEvent],
                     peers: bool = True) -> dict[tuple[str, int], int]:
    """(comm, rank) -> the last seq the rank surely launched and completed there: PyTorch's `last completed` count
    of it, and (`peers`) the last completed record of any peer in the comm (NCCL completes a collective only once
    every rank of its comm took part: a peer's result of seq 23 needs this rank's part in seq 23)."""
    floors: dict[tuple[str, int], int] = {}

    def raise_to(key: tuple[str, int], seq: int) -> None:
        floors[key] = max(floors.get(key, 0), seq)
    for comm, rank, count in [*((p.comm, p.rank, p.last_completed) for p in progress),
                              *((w.comm, w.rank, w.last_completed) for w in watchdog)]:
        if comm is not None and rank is not None and count is not None:
            raise_to((streams.aliases.get(comm, comm), rank), count)
    done = pl.col("state") == EventState.COMPLETED.value
    for (comm, _), part in (streams.parts.items() if peers else ()):
        if not part.height or "state" not in part.columns:
            continue
        last = part.filter(done).get_column("seq").max()
        if last is None:
            continue
        for peer in streams.members.get(comm, []):
            raise_to((comm, peer), int(last))
    return floors


def unwritten_ends(streams: Streams, floors: dict[tuple[str, int], int]) -> dict[tuple[str, int], Location]:
    """(comm, rank) -> the last record of the rank's trace, for each comm whose stream that trace ends, where the
    rank completed more in some comm than its trace holds there (`floors`): a trace that lacks a collective the rank
    completed was not written past its end, in any comm; its ends there say nothing of where the rank stopped, as a
    file cut short says nothing. Worked examples: rank 2 completed world collective 3 (its watchdog's `last
    completed work: 3`) and hung in the same step; its trace, flushed per step, ends a step sooner with 2 world
    records and 4 of its TP group's, where its peer's holds 6: the TP group's shorter stream is no departure. Rank 7's
    trace holds step 3's five collectives of its group's comm, through seq 23, and its peers' traces end at step 2,
    seq 18: they took part in seq 23 too (rank 7's result of it needs them), and never wrote step 3."""
    traced = {(comm, rank): (last, file) for (comm, rank, source), (last, file) in streams.launched_by_source.items()
              if source == FINGERPRINT}
    short = {file for key, (last, file) in traced.items() if floors.get(key, 0) > last}
    out: dict[tuple[str, int], Location] = {}
    for (comm, rank), (last, file) in traced.items():
        part = streams.parts.get((comm, rank))
        if file in short and part is not None and part.height and int(part.get_column("seq").max()) == last:
            row = part.filter(pl.col("seq") == last).row(0, named=True)
            out[(comm, rank)] = Location(file, row.get("line"))
    return out


def parted_at_read_back(streams: Streams, comm: str, unwritten: set[tuple[str, int]],
                        floors: dict[tuple[str, int], int]) -> Root | None:
    """Where the ranks of `comm` part, as far as traces go, when some traces were not written as far as their ranks
    got (`unwritten`) and the others were: each of the others holds step s through seq E of the comm and nothing
    later of step s in any comm (it got through step s's read-back, which ends there), while those unwritten
    completed seq E too (`floors`) and hold nothing of step s: they had more of step s to launch past seq E. If
    that was in this comm, they part at seq E + 1 (the others' next collective here, if any, is a later step's);
    what the unwritten ranks launched from their last record to seq E is on no record, so the first divergent
    collective may lie there too. The smaller side is the outliers: the ranks that ended the step early left a
    collective out (`missing`); those that went on launched one more (`extra`), or waited in another comm (the
    root names those of the comms the unwritten ranks are in as candidates). None where any rank of the comm is
    neither (a cut file, no steps on its records). Worked example: ranks 4-6 completed seq 23 of their comm with
    rank 7 (its results of seqs 19-23, step 3, need theirs) and their traces end at step 2, seq 18; rank 7's holds
    step 3 whole, five collectives of the comm where each earlier step held six: rank 7 left one out at seq 24."""
    members = streams.members.get(comm, [])
    ended: dict[int, tuple[int, int]] = {}  # rank whose trace holds step s through seq E -> (E, s)
    unread: dict[int, int] = {}  # rank whose trace was not written as far as it got -> its last seq here
    for rank in members:
        part = streams.parts.get((comm, rank))
        if part is None or not part.height or "step" not in part.columns \
                or (comm, rank, FINGERPRINT) not in streams.launched_by_source:
            return None
        last = part.row(part.height - 1, named=True)
        if (comm, rank) in unwritten:
            unread[rank] = int(last["seq"])
        elif last["step"] is not None and last["line"] is not None and (comm, rank) not in streams.cut:
            ended[rank] = (int(last["seq"]), int(last["step"]))
        else:
            return None
    if not ended or not unread or len(set(ended.values())) != 1:
        return None
    end, step = next(iter(ended.values()))
    if any(_later_in_step(streams, rank, step, end_line) for rank in ended
           for end_line in [streams.parts[(comm, rank)].get_column("line")[-1]]):
        return None  # (its read-back of step s goes on past seq E: it may have waited at what comes after)
    if any(floors.get((comm, rank), 0) < end or _last_step(streams, rank) >= step for rank in unread):
        return None
    early, late = sorted(ended), sorted(unread)
    outliers, reference = (early, late) if len(early) <= len(late) else (late, early)
    kind = MISSING if outliers == early else EXTRA
    low = min(unread.values()) + 1
    elsewhere = sorted({c for c, ranks in streams.members.items() if c != comm and set(ranks) & set(late)})
    return Root(comm=comm, seq=low, seq_range=(low, end + 1), outlier_ranks=outliers, reference_ranks=reference,
                kind=kind, size=1, pinned_by="steps", reason=RangeReason.UNWRITTEN_STEP,
                majority=len(early) != len(late), kinds=(kind,), narrowed_by=("steps",), records_start=low, undecided_comms=tuple(elsewhere))


def _last_step(streams: Streams, rank: int) -> int:
    """The last step the rank's records hold, in any comm (-1 where none)."""
    steps = [part.get_column("step").max() for (_, r), part in streams.parts.items() if r == rank
             and "step" in part.columns]
    return max((int(s) for s in steps if s is not None), default=-1)


def _later_in_step(streams: Streams, rank: int, step: int, line: int) -> bool:
    """Whether the rank's trace holds a record of `step` after line `line`, in any comm."""
    return any(part.filter((pl.col("step") == step) & (pl.col("line") > line)).height
               for (_, r), part in streams.parts.items() if r == rank and "step" in part.columns)
