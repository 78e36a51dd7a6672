"""The corrupt-and-continue window and the wedge: how long the group ran misaligned, and where it stopped."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from ..model import Location, PairingKind, WedgeKind
from ..model.kinds import is_p2p_comm
from .comm_streams import CommStreams, comm_streams
from .answers import DIFFERENT_OPS, STOPPED, CommAnalysis, OpAt, Root, ops_at
from .counted_progress import CountedProgress
from .nccl_pairing import completed_everywhere_from, first_hanging_pairing
from .streams import Streams


@dataclass(frozen=True)
class PairingRun:
    """Consecutive misaligned seqs that NCCL paired the same way."""

    first_seq: int
    last_seq: int
    kind: PairingKind

    @property
    def collectives(self) -> int:
        """How many seqs the run spans."""
        return self.last_seq - self.first_seq + 1


@dataclass
class Window:
    """Collectives that completed while the streams were misaligned."""

    comm: str
    first_seq: int | None  # None: a root known from counts alone
    last_seq: int | None
    collectives: int | None  # counted from the root's earliest possible seq; None: unknown (counts alone)
    collectives_min: int  # counted from its latest possible seq (equal when the root is pinned)
    completion_known: bool  # False: completion inferred from launches (logs or RAS without states)
    pairings: list[PairingRun] = field(default_factory=list)
    # (seq, ranks): the collective after the window that those ranks completed while every other rank waits in it
    # (its watchdog's lines say so): NCCL completes an all-gather paired with an all-reduce of equal bytes on the
    # gather side only
    completed_by_some: tuple[int, tuple[int, ...]] | None = None


@dataclass
class Wedge:
    """Where progress stopped."""

    comm: str
    seq: int
    kind: WedgeKind
    launched: dict[int, int]
    completed: dict[int, int | None]
    waiting_ranks: list[int]  # ranks inside the stuck collective
    absent_ranks: list[int]  # ranks that never launched it
    ops: dict[int, OpAt] = field(default_factory=dict)
    cycle: list[tuple[int, str, int]] = field(default_factory=list)  # (rank, comm, seq) around a deadlock
    # rank -> the collective it waits in past the wedge, where it has no record of the wedge's seq but completed
    # it (its own timeout line at a later SeqNum): it is held there, not at the wedge
    waiting_past: dict[int, OpAt] = field(default_factory=dict)
    # ranks whose `launched` is only a floor: a timeout line's SeqNum, with no count of the work they enqueued
    # after it (PyTorch enqueues ahead of what completes)
    launched_floors: list[int] = field(default_factory=list)
    confirmed_by: list[str] = field(default_factory=list)  # what shows that it stopped (not merely lags)
    evidence: list[Location] = field(default_factory=list)
    # rank -> PyTorch's counts that carry its launched and completed past its records (counted_progress.py)
    counted: dict[int, CountedProgress] = field(default_factory=dict)
    # Every seq the stop can be at: (seq, seq) where the records pin it. The high end is None where they bound it
    # from below only (records of completed collectives that end, files cut short: later ones may have run). `seq`
    # is then where the records place it, the collective that the ranks' fields describe.
    seq_range: tuple[int, int | None] | None = None
    bounded_by: str | None = None  # why it is a range: COMPLETIONS_END, LAUNCHES_ONLY, COUNT_FLOORS or LAUNCH_FLOORS
    # ranks on record completing the range's low seq with an all-gather (or a collective of no recorded type): NCCL
    # may have completed it on their side alone, so the others may wait in it (see completed_everywhere_from)
    completed_alone: list[int] = field(default_factory=list)
    # why every rank's count is a floor (LAUNCH_FLOORS): RAS_DIFFERING_TYPES, RAS_UNSETTLED
    floored_by: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.seq_range is None:
            self.seq_range = (self.seq, self.seq)

    @property
    def pinned(self) -> bool:
        """Whether the evidence places the stop at one seq."""
        return self.seq_range == (self.seq, self.seq)


# Why a wedge is a range. The records of some rank end with collectives that completed, and nothing records
# what it launched after them (traces written once a collective completed, a file cut short): the bound from
# below is the first collective not on record as completed by every rank.
COMPLETIONS_END = "completions end"
# No source records which collectives completed (NCCL logs and RAS count launches): the first collective not
# every rank launched bounds it from above, and one every rank launched before it may be where it hung.
LAUNCHES_ONLY = "launches only"
# Some rank's launch count is only a floor (a desync report's last collective its watchdog saw it start): the
# first collective not every rank launched may be any up to where the other ranks' counts end.
COUNT_FLOORS = "count floors"
# Every rank's launch count is a floor: RAS counts that cover only the collective types whose counts differ (NCCL
# 2.26+ MISMATCH lines, no table of every type), or replies that do not show the counts had stopped moving (one
# reply, or counts that changed between replies: the job may have gone on after it). The first collective not every
# rank launched is at or after the one the counts give, and one every rank launched before it may be where the group
# hung: nothing bounds the stop.
LAUNCH_FLOORS = "launch floors"
RAS_DIFFERING_TYPES = "RAS counts only the types that differ"
RAS_UNSETTLED = "RAS counts not shown to have stopped moving"


def classify_pairings(rows: CommStreams, first: int, last: int) -> list[PairingRun]:
    """Per seq in [first, last], what pairing the ranks' collectives made, as runs of equal kind."""
    runs = _pairings_by_rank(rows, first, last)
    if runs is not None:
        return runs
    window = rows.frame(first, last, ["seq", "op", "dtype", "redop", "root", "count"])
    per_seq = window.group_by("seq").agg(
        pl.struct("op", "dtype", "redop", "root").n_unique().alias("types"),
        pl.col("count").n_unique().alias("counts"),
    ).sort("seq")
    runs = []
    for seq, types, counts in per_seq.iter_rows():
        kind = (PairingKind.TYPE_MISMATCH if types > 1 else
                PairingKind.COUNT_MISMATCH if counts > 1 else PairingKind.SHAPE_EQUAL)
        if runs and runs[-1].kind is kind and runs[-1].last_seq == seq - 1:
            runs[-1] = PairingRun(runs[-1].first_seq, seq, kind)
        else:
            runs.append(PairingRun(seq, seq, kind))
    return runs


_KINDS = (PairingKind.SHAPE_EQUAL, PairingKind.COUNT_MISMATCH, PairingKind.TYPE_MISMATCH)


def _pairings_by_rank(rows: CommStreams, first: int, last: int) -> list[PairingRun] | None:
    """classify_pairings where every rank has every seq in [first, last] (None otherwise): each rank's types and
    counts compared with the first rank's, seq by seq, as arrays (a type is the hash of its fields)."""
    if not rows.parts or last < first:
        return None
    spans = [rows.span(rank, first, last) for rank in rows.parts]
    if any(span is None for span in spans):
        return None
    # Each rank's rows of [first, last] against the first rank's, one rank at a time: arrays of one rank's seqs,
    # never of every rank's (a window of 10,000 seqs on 1,024 ranks is 10 M rows). A row's hash is the same in
    # any frame.
    types0, nulls0, counts0 = _type_and_count(spans[0])
    type_differs = np.zeros(len(types0), dtype=bool)
    count_differs = np.zeros(len(types0), dtype=bool)
    for span in spans[1:]:
        types, nulls, counts = _type_and_count(span)
        type_differs |= types != types0
        count_differs |= (nulls != nulls0) | (~nulls & (counts != counts0))
    kinds = np.where(type_differs, 2, np.where(count_differs, 1, 0))
    cuts = np.flatnonzero(np.diff(kinds)) + 1
    starts = np.r_[0, cuts]
    ends = np.r_[cuts, len(kinds)] - 1
    return [PairingRun(first + int(a), first + int(b), _KINDS[int(kinds[a])]) for a, b in zip(starts, ends)]


def _type_and_count(span: pl.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row of `span`: the hash of its type (op, dtype, reduction, root), whether its count is null, its count
    (0 where null)."""
    window = span.select(pl.struct("op", "dtype", "redop", "root").hash().alias("type"),
                         pl.col("count").is_null().alias("null"), pl.col("count").fill_null(0).alias("count"))
    return tuple(window.get_column(name).to_numpy() for name in ("type", "null", "count"))


def misaligned_window(streams: Streams, analysis: CommAnalysis, root: Root,
                      waiting: dict[int, int] | None = None) -> Window:
    """From the root to the last collective every rank completed (or, lacking states, launched), and at least to
    the last one whose result read back wrong (it completed misaligned). Empty (0 collectives) when the group
    wedged at the root itself. `waiting`: rank -> its last completed, for ranks PyTorch's lines show completed no
    more (counted_progress.py); where every rank that completed least is one, the next collective that others
    completed is named (`completed_by_some`)."""
    frame = comm_streams(streams.comm_parts(analysis.comm))
    completed = [c for c in analysis.completed.values()]
    completion_known = all(c is not None for c in completed)
    end = min(completed) if completion_known else min(analysis.launched.values())
    by_some = _completed_by_some(analysis, end, waiting or {}) if completion_known else None
    low, high = root.seq_range
    wrong = _wrong_results(frame, low)
    if wrong is not None:
        end = max(end, wrong)
    if root.kind == DIFFERENT_OPS and root.size and high is not None:
        # A swapped collective misaligns only its own seqs; the streams pair normally after it.
        end = min(end, high + root.size - 1)
    if by_some is not None and by_some[0] != end + 1:
        by_some = None  # (the window ends elsewhere: a result read back wrong, a swap that realigns)
    # (a stop the records cannot tell from collectives left out or added earlier may still have misaligned them)
    if set(root.kinds or (root.kind,)) == {STOPPED} or end < low:
        return Window(comm=analysis.comm, first_seq=low, last_seq=low - 1, collectives=0, collectives_min=0,
                      completion_known=completion_known, completed_by_some=by_some if end == low - 1 else None)
    return Window(
        comm=analysis.comm, first_seq=low, last_seq=end, collectives=end - low + 1,
        # (a root open above, at `low` or later, may come after every collective: none is surely misaligned)
        collectives_min=max(end - high + 1, 0) if high is not None else 0, completion_known=completion_known,
        pairings=classify_pairings(frame, low, end), completed_by_some=by_some,
    )


def _completed_by_some(analysis: CommAnalysis, end: int, waiting: dict[int, int]) -> tuple[int, tuple[int, ...]] | None:
    """(end + 1, the ranks that completed it) where some did and every rank that did not completed `end` and no
    more by its own watchdog's lines (`waiting`); else None."""
    ahead = tuple(sorted(r for r, c in analysis.completed.items() if c is not None and c > end))
    behind = [r for r, c in analysis.completed.items() if c == end]
    if not ahead or not behind or any(waiting.get(r) != end for r in behind):
        return None
    return end + 1, ahead


def count_only_window(root: Root) -> Window:
    """A root known from launch counts alone: no record says which collectives paired, so nothing about the
    window is known but that it may be empty."""
    return Window(comm=root.comm, first_seq=None, last_seq=None, collectives=None, collectives_min=0,
                  completion_known=False)


def _wrong_results(rows: CommStreams, low: int) -> int | None:
    """The last seq from `low` whose checked result was wrong on some rank (fingerprints with expected values)."""
    last = None
    for part in rows.parts.values():
        if "checked" not in part.columns:
            return None
        seqs = part.filter((pl.col("checked") == False) & (pl.col("seq") >= low)).get_column("seq")
        if len(seqs):
            last = max(last or 0, int(seqs.max()))
    return last


def find_wedge(streams: Streams, analyses: dict[str, CommAnalysis], dead_ranks: set[int],
               confirmed_by: dict[str, list[str]], root_comm: str | None = None,
               counted: dict[str, dict[int, CountedProgress]] | None = None) -> Wedge | None:
    """Where progress stopped, across communicators, or None when nothing shows a stop.

    `confirmed_by` maps comm -> what shows that it stopped (watchdog timeout, RAS counts unchanged, Flight
    Recorder entries never completed); without it, unequal launches may be a job caught mid-flight. `counted`:
    comm -> rank -> PyTorch's counts past the rank's records there, which `analyses` already hold
    (counted_progress.py); a rank they show completed no more is placed by them, its records cut short or not.
    """
    blocked = _blocked_ops(streams, analyses)
    candidates: list[Wedge] = []
    for comm, analysis in analyses.items():
        if len(analysis.ranks) < 2 or is_p2p_comm(comm):  # a p2p stream's counts differ by design
            continue
        wedge = _comm_wedge(streams, analysis, dead_ranks, blocked, (counted or {}).get(comm, {}))
        if wedge is None:
            continue
        wedge.confirmed_by = list(confirmed_by.get(comm, []))
        candidates.append(wedge)
    if not candidates:
        return None
    root_comm = streams.aliases.get(root_comm, root_comm)  # a root named by process group, the wedges by hash
    at_root = next((w for w in candidates if w.comm == root_comm), None)
    if at_root is not None:
        # A communicator whose absent ranks are all stuck in the root's (or their records there end where a file
        # was cut) waits on the root's: its stop, however confirmed, is a consequence, and says the job stopped.
        cut = {rank for (comm, rank) in streams.cut if comm == root_comm}
        stuck = set(at_root.waiting_ranks) | cut
        follows = [w for w in candidates if w is not at_root and w.absent_ranks and set(w.absent_ranks) <= stuck
                   and w.kind is not WedgeKind.CROSS_COMM_DEADLOCK]
        for w in follows:
            at_root.confirmed_by += [f"{reason}, in comm {w.comm}, which waits on it" for reason in w.confirmed_by
                                     if reason not in at_root.confirmed_by]
        candidates = [w for w in candidates if w not in follows]
    # A confirmed stop beats an inferred one; then the kind that explains most (a cycle, a death); then the
    # root's own communicator (where the misalignment stopped it first, before others waited on it).
    rank = {WedgeKind.CROSS_COMM_DEADLOCK: 0, WedgeKind.RANK_GONE: 1}
    return min(candidates, key=lambda w: (not w.confirmed_by, rank.get(w.kind, 2), w.comm != root_comm, w.seq))


def _comm_wedge(streams: Streams, analysis: CommAnalysis, dead_ranks: set[int],
                blocked: dict[int, tuple[str, int]], counted: dict[int, CountedProgress]) -> Wedge | None:
    frame = comm_streams(streams.comm_parts(analysis.comm))
    launched, completed = analysis.launched, analysis.completed
    # Where PyTorch's lines show a rank completed no more (it waits in the next one, or launched nothing after its
    # last), that is where it stopped, whatever its records hold.
    finals = {rank: p.completed for rank, p in counted.items() if p.final and p.completed is not None}
    # A rank whose records end where its file was cut short says nothing of where it stopped: the wedge is
    # placed by the others (by every rank, where all were cut).
    cut = {rank for (comm, rank) in streams.cut if comm == analysis.comm} - set(finals)
    whole = {r: n for r, n in launched.items() if r not in cut} or launched
    lowest, highest = min(whole.values()), max(launched.values())
    known = [c for r, c in completed.items() if c is not None and r in whole]
    if len(known) == len(whole) and min(known) < highest:
        seq = min(known) + 1  # the first collective not every rank completed
    elif lowest < highest:
        seq = lowest + 1
    elif any(c < highest for c in known):
        seq = min(known) + 1
    else:
        return None
    hang = first_hanging_pairing(frame, max(analysis.first_seq.values()), min(seq, lowest))
    if hang is not None and hang < seq:
        seq = hang  # a pairing NCCL does not complete stops the group there, whatever was launched after it
    low, high, bounded_by, alone = _stop_bounds(frame, analysis, cut, hang, finals)
    seq = max(low, seq if high is None else min(seq, high))
    if high is None:
        # Nothing on record is where the ranks stopped: who waits and who never launched it is not known.
        kind = WedgeKind.RANK_GONE if set(analysis.ranks) & dead_ranks else WedgeKind.UNKNOWN
        ends = {rank: frame.last(rank) for rank in frame.parts}
        return Wedge(comm=analysis.comm, seq=seq, kind=kind, launched=dict(launched), completed=dict(completed),
                     waiting_ranks=[], absent_ranks=[], seq_range=(low, None), bounded_by=bounded_by,
                     counted=dict(counted), completed_alone=alone,
                     evidence=[op.loc for last in sorted(set(ends.values()))
                               for rank, op in ops_at(frame, last).items() if ends[rank] == last])
    inside = sorted(r for r, last in launched.items() if last >= seq)
    # Ranks the comm's configuration names but no file speaks for (a rank that died writes no dump).
    silent = sorted(set(streams.expected_members.get(analysis.comm, [])) - set(analysis.ranks))
    absent = sorted(r for r, last in launched.items() if last < seq and r in whole) + silent
    ops = ops_at(frame, seq)
    dead = sorted(set(absent) & dead_ranks) or sorted(set(analysis.ranks) & dead_ranks)
    cycle = _cycle(blocked, streams, analysis.comm)
    if cycle:
        kind = WedgeKind.CROSS_COMM_DEADLOCK
    elif dead:
        kind = WedgeKind.RANK_GONE
    elif set(absent) - set(silent):
        kind = WedgeKind.NO_PARTNER
    elif silent:
        kind = WedgeKind.UNKNOWN  # the silent ranks may be dead or elsewhere: nothing says which
    else:
        signatures = {(o.op, o.dtype, o.redop, o.root) for o in ops.values()}
        counts = {o.count for o in ops.values()}
        kind = (WedgeKind.TYPE_MISMATCH if len(signatures) > 1 else
                WedgeKind.COUNT_MISMATCH if len(counts) > 1 else WedgeKind.UNKNOWN)
    past = {rank: op for rank in inside if rank not in ops and (completed.get(rank) or 0) >= seq
            and (op := ops_at(frame, completed[rank] + 1).get(rank)) is not None and op.state == "started"}
    return Wedge(
        comm=analysis.comm, seq=seq, kind=kind, launched=dict(launched), completed=dict(completed),
        waiting_ranks=inside, absent_ranks=absent, ops=ops, cycle=cycle, waiting_past=past,
        evidence=[o.loc for o in ops.values()], seq_range=(low, high), bounded_by=bounded_by if low < high else None,
        counted=dict(counted), completed_alone=alone if low < high else [],
    )


def _stop_bounds(rows: CommStreams, analysis: CommAnalysis, cut: set[int], hang: int | None,
                 finals: dict[int, int] | None = None) -> tuple[int, int | None, str | None, list[int]]:
    """(low, high, why, alone): the seqs the group's stop can be at, the first collective not every rank
    completed, and the ranks whose completion of `low` may have been on their side alone.

    From below: where a rank's completions are final (a dump's states: a collective in flight, or every one it
    launched completed; a timeout line), the stop is past the fewest such a rank completed. For every other rank, a
    collective some rank completed had every rank in it (NCCL completes none without every rank's part), so the
    stop is at or past the last one any rank is on record as completing (completed_everywhere_from), or at it where
    that rank completed an all-gather (or a collective of no recorded type): paired with an all-reduce of equal
    bytes, NCCL completes it on the gather side alone, so a dump final for the gathering rank bounds no rank whose
    records do not say what it completed (an NCCL log). From above: a
    rank seen in flight stopped there; a rank whose last record is its launch of a collective (an NCCL log line, a
    dump's entry) launched
    nothing after it; a pairing NCCL never completes hangs. A rank whose records end with a completed collective
    of a format that records only completions (fingerprint traces, flushed per step), or whose file was cut
    short, bounds nothing from above and its end nothing from below: it may have gone on. A rank PyTorch's lines show
    completed no more than `finals` gives it (rank -> its last completed: it waits in the next, or launched nothing
    after it) did not complete the next one, whatever its records hold.
    """
    completed, launched = analysis.completed, analysis.launched
    final: list[int] = []
    final_ranks: set[int] = set()
    highs = [hang] if hang is not None else []
    for rank, part in rows.parts.items():
        if rank in cut or not part.height:
            continue
        done = completed.get(rank)
        after = rows.row_at(rank, done + 1) if done is not None else None
        in_flight = after is not None and (
            after["state"] == "started" or (after["fr_file"] is not None and after["state"] != "completed"))
        last = part.row(part.height - 1, named=True)
        if in_flight:
            highs.append(done + 1)
            final.append(done)
            final_ranks.add(rank)
        elif last["fr_file"] is not None and done is not None:  # the dump saw every collective it launched end
            highs.append(launched[rank] + 1)
            final.append(done)
            final_ranks.add(rank)
        elif last["state"] != "completed":
            highs.append(launched[rank] + 1)
    for rank, done in (finals or {}).items():
        highs.append(done + 1)
        final.append(done)
        final_ranks.add(rank)
    alone: list[int] = []
    low = min(final) + 1 if final else None
    if any(done is not None for done in completed.values()):
        # A rank whose completions are not final is placed by the others' (each took part in the last one any
        # completed): where that one was an all-gather, it may have completed on the gather side alone, so the
        # rank may wait in it, however final the gathering ranks' own completions are.
        everywhere, gathered = completed_everywhere_from(rows, completed)
        open_ranks = [r for r in completed if r not in final_ranks]
        reach = min((max(everywhere, (completed[r] or 0) + 1) for r in open_ranks), default=None)
        if reach is not None and (low is None or reach < low):
            low, alone = reach, gathered if reach == everywhere else []
    if low is None:
        low = 1
    high = min(highs) if highs else None
    if high is not None and high < low:
        low, alone = high, []  # a rank launched less than another completed: the launches are the firmer record
    if high is not None and low == high:
        return low, high, None, []
    return low, high, LAUNCHES_ONLY if high is not None and None in completed.values() else COMPLETIONS_END, alone


def _blocked_ops(streams: Streams, analyses: dict[str, CommAnalysis]) -> dict[int, tuple[str, int]]:
    """Per rank, the earliest collective (in that rank's own issue order) that it launched but that did not
    finish: where its stream is stuck. Needs an order across comms: one file per rank (line numbers or dump
    records) or times."""
    pending_rows = []
    for comm, analysis in analyses.items():
        everyone = min(analysis.launched.values())
        for rank in analysis.ranks:
            done = analysis.completed.get(rank)
            floor = done if done is not None else everyone
            if analysis.launched[rank] > floor:
                pending_rows.append((rank, comm, floor + 1))
    if not pending_rows:
        return {}
    pending = pl.DataFrame(pending_rows, schema={"rank": pl.Int64, "comm": pl.String, "seq": pl.Int64},
                           orient="row")
    found = [part.filter(pl.col("seq") == seq) for rank, comm, seq in pending_rows
             if (part := streams.parts.get((comm, rank))) is not None]
    found = [hit for hit in found if hit.height]
    rows = pending.join(pl.concat(found) if found else streams.stream("", -1), on=["rank", "comm", "seq"],
                        how="left")
    blocked: dict[int, tuple[str, int]] = {}
    for rank, group in rows.group_by("rank"):
        rank = rank[0]
        for order in ("fr_record", "line", "time"):
            if group.get_column(order).null_count() == 0 and (
                    order != "line" or group.get_column("file").n_unique() == 1):
                first = group.sort(order).row(0, named=True)
                blocked[rank] = (first["comm"], first["seq"])
                break
        else:
            if group.height == 1:
                blocked[rank] = (group.row(0, named=True)["comm"], group.row(0, named=True)["seq"])
    return blocked


def _cycle(blocked: dict[int, tuple[str, int]], streams: Streams, comm: str) -> list[tuple[int, str, int]]:
    """A wait-for cycle through `comm` spanning more than one communicator, if there is one.

    Rank A blocked at (X, s) waits for every member of X that is not itself blocked at or past (X, s).
    """
    def waits_for(rank: int) -> list[int]:
        where = blocked.get(rank)
        if where is None:
            return []
        x, s = where
        out = []
        for member in streams.members.get(x, []):
            if member == rank:
                continue
            other = blocked.get(member)
            if other is None:
                continue  # not blocked anywhere we can see: no cycle through it
            if other[0] != x or other[1] < s:
                out.append(member)
        return out

    for start in sorted(blocked):
        path, seen = [start], {start}
        while True:
            nxt = waits_for(path[-1])
            nxt = [n for n in nxt if n == start or n not in seen]
            if not nxt:
                break
            if start in nxt:
                cycle = [(r, *blocked[r]) for r in path]
                if len({c for _, c, _ in cycle}) > 1 and any(c == comm for _, c, _ in cycle):
                    return cycle
                break
            path.append(nxt[0])
            seen.add(nxt[0])
    return []
