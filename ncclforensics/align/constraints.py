"""What the evidence beside the signatures allows, as constraints on the root for root.py: checked results (a
wrong result at seq s means misaligned at or before s), completions (a collective one rank completed while a peer
timed out in another), counts past the records, and the steps of the gate journal's first disagreement.
"""

from __future__ import annotations

from dataclasses import replace

import polars as pl

from ..model import EventState, Location
from .answers import CommAnalysis
from .comm_streams import CommStreams
from .edits import Codes, EditKind
from .gates import GateDisagreement
from .narrowing import PARTED_COMPLETIONS, GateStep, ResultChecks
from .solution import Solution
from .streams import Streams, traced

def short_of_completions(analysis: CommAnalysis) -> set[int]:
    """Ranks whose records end before a collective another rank completed: NCCL completes none without every
    rank's part, so they launched it, and their records are incomplete."""
    done = {r: c for r, c in analysis.completed.items() if c is not None}
    return {r for r, last in analysis.launched.items()
            if any(c > last for other, c in done.items() if other != r)}


def past_completions(solution: Solution, analysis: CommAnalysis, right: frozenset[int] = frozenset()) -> bool:
    """A rank whose records stop where others completed collectives after them did not stop there: NCCL completes
    no collective without every rank's part, so it launched every one the others completed, and its records are
    incomplete (a file cut at a line's end, a lost tail). A misaligned pairing completes too, so what it launched
    there is unknown: where it departed is anywhere from its last record on (past the results checked right from
    there, which were aligned) to one past the last collective the others launched. Returns whether it moved a
    stop."""
    if not solution.placements or any(p.kind is not EditKind.STOPPED for p in solution.placements):
        return False
    others = [r for r in analysis.ranks if r not in solution.outliers]
    done = [analysis.completed[r] for r in others if analysis.completed.get(r) is not None]
    if not done or all(p.high > max(done) for p in solution.placements):
        return False
    low = max(done) + 1
    high = max(low, max(analysis.launched[r] for r in others) + 1)
    solution.placements = [replace(p, low=_first_unchecked(p.low, right, high), high=max(p.high, high))
                           if p.high < low else p for p in solution.placements]
    return True


def past_counted(solution: Solution, recorded: dict[int, int], right: frozenset[int],
                  codes: dict[int, Codes] | None = None, start: int = 1) -> bool:
    """A rank whose stream PyTorch's counts carry past its records (a file cut short) launched collectives there
    that no record shows: the counts say how many, not which, so where it stopped or departed is anywhere from its
    first unrecorded one (past results checked right from there), not only where its count ends. Nor from there
    alone: where the others' collectives just before it look alike in everything recorded, its last records fit
    theirs one seq on as well, so it may have left out (or added) one at the head of that run. Returns whether
    it widened a stop."""
    if not solution.placements or any(p.kind is not EditKind.STOPPED for p in solution.placements):
        return False
    widened = False
    placements = []
    reference = [codes[r] for r in codes or {} if r not in solution.outliers and r not in recorded]
    for p in solution.placements:
        ranks = [r for r in solution.members.get(p.rank, [p.rank]) if r in recorded]
        first = min((_head_of_lookalikes(recorded[r] + 1, reference, start, right, (codes or {}).get(r))
                     for r in ranks), default=None)
        if first is not None and first < p.low:
            p = replace(p, low=_first_unchecked(first, right, p.low))
            widened = True
        placements.append(p)
    solution.placements = placements
    return widened


def _head_of_lookalikes(seq: int, reference: list[Codes], start: int, right: frozenset[int],
                        own: Codes | None = None) -> int:
    """The first seq of the run of collectives that, in every reference stream, look alike in every field up to
    `seq` (`seq` itself where the one before differs, is unrecorded, or had its results checked right). `own`:
    the counted rank's own records; where they lack a field (a log line without the call stack its dump would have
    given), the run goes on while its record there fits the reference's one seq on (or back) as well: what it did
    not record does not tell the two apart."""
    while reference and seq - 1 >= start and seq - 1 not in right:
        at, before = seq - start, seq - 1 - start
        if not (all(at < c.length and all(at < len(v) and v[at] != 0 and v[at] == v[before] for v in c.fields.values())
                    for c in reference) or _fits_shifted(own, before, reference)):
            break
        seq -= 1
    return seq


def _fits_shifted(own: Codes | None, position: int, reference: list[Codes]) -> bool:
    """Whether the rank's record at `position` fits every reference stream's record one position on, or one back,
    in every field both recorded (0: not recorded, which fits anything)."""
    if own is None or position >= own.length:
        return False

    def fits(other: int) -> bool:
        return other >= 0 and all(
            other < c.length and all(
                position < len(mine) and other < len(c.fields.get(name, ())) and (
                    mine[position] == 0 or c.fields[name][other] == 0 or mine[position] == c.fields[name][other])
                for name, mine in own.fields.items())
            for c in reference)
    return fits(position + 1) or fits(position - 1)


def _first_unchecked(seq: int, right: frozenset[int], high: int) -> int:
    """The first seq from `seq` on whose results were not checked right (at most `high`)."""
    while seq in right and seq < high:
        seq += 1
    return seq


UNBOUNDED = 2 ** 62  # the high end of a span no record bounds


def evidence_constraints(rows: CommStreams, start: int, gate: GateDisagreement | None, deviants: set[int] | None,
                 counted: dict[int, int] | None = None) -> list:
    """The evidence beside the records that narrows where the root is: checked results, then the gate's step."""
    checks = result_checks(rows, start)
    constraints: list = [checks] if checks is not None else []
    if gate is not None and deviants:
        spans = {rank: span for rank in deviants if rank in rows.parts
                 and (span := _gate_span(rows.parts[rank], gate, rank)) is not None}
        others = [r for r in rows.parts if r not in deviants]
        reference = _gate_span(rows.parts[others[0]], gate, others[0]) if others else None
        # A deviant whose records end before the step (it never read the step back) launched that step's
        # collectives past them: as far as its count goes, where one does.
        unread = {rank: (end, (counted or {}).get(rank, UNBOUNDED)) for rank, (low, high) in spans.items()
                  if high >= UNBOUNDED and low >= (end := int(rows.parts[rank].get_column("seq").max()) + 1)}
        if spans:
            constraints.append(GateStep(spans, reference, deviants <= set(gate.passed), tuple(gate.locations),
                                        unread=unread))
    return constraints


def result_checks(rows: CommStreams, start: int) -> ResultChecks | None:
    """The seqs (from `start` on) whose results were read back right on every rank that checked them, and those
    read back wrong on some, with where; None where some rank's records carry no checks, or none was checked."""
    if not all("checked" in part.columns for part in rows.parts.values()):
        return None
    frame = rows.frame(start, None, ["seq", "checked", "checked_at"])
    checks = frame.filter(pl.col("checked").is_not_null()).group_by("seq").agg(
        pl.col("checked").all().alias("right"), pl.col("checked_at").filter(~pl.col("checked")).first(),
        pl.col("checked_at").last().alias("any_at"))
    if not checks.height:
        return None
    right = checks.filter(pl.col("right"))
    wrong = checks.filter(~pl.col("right")).sort("seq")
    locs = []
    if wrong.height:
        locs.append(_parse_loc(wrong.get_column("checked_at")[0]))
    if right.height:
        locs.append(_parse_loc(right.sort("seq").get_column("any_at")[-1]))
    return ResultChecks(frozenset(right.get_column("seq").to_list()), frozenset(wrong.get_column("seq").to_list()),
                        tuple(locs))


ROOTLESS_OPS = ("AllReduce", "AllGather", "ReduceScatter")


def parted_completions(rows: CommStreams, start: int, completed: dict[int, int | None]) -> list[ResultChecks]:
    """Seqs some rank completed while another timed out in its own collective there: NCCL completes a collective
    without a root (all-reduce, all-gather, reduce-scatter) on every rank of it or on none, so those two were
    different collectives, misaligned at or before that seq (a watchdog timeout row, `started` and no dump's
    entry, ran out its timeout and never finished; a rooted one's root may finish before the others).
    `completed` leaves out ranks known by their own timeout lines alone: PyTorch's word that a rank held at a later
    SeqNum completed this one records nothing of it, and a rank that sent its last part finishes before a peer
    whose receive waits on the network or on a rank with no lines here: that is a hang, not two collectives."""
    stuck = rows.frame(start, None, ["rank", "seq", "op", "state", "fr_file", "file", "line"]).filter(
        (pl.col("state") == EventState.STARTED.value) & pl.col("fr_file").is_null()
        & pl.col("op").is_in(list(ROOTLESS_OPS)))
    wrong, locs = set(), []
    for rank, seq, _, _, _, file, line in stuck.rows():
        done = completed.get(rank)
        if done is not None and done < seq and any(c is not None and c >= seq for r, c in completed.items()
                                                   if r != rank):
            wrong.add(seq)
            locs.append(Location(file, line))
    return [ResultChecks(frozenset(), frozenset(wrong), tuple(locs), label=PARTED_COMPLETIONS)] if wrong else []


def _gate_span(part: pl.DataFrame, gate: GateDisagreement, rank: int) -> tuple[int, int] | None:
    """The seqs a rank's collectives of the gate's step may cover: by the steps its records carry, and after the
    time of its decision (the drafter's collectives follow the decision that launched them; both times are read
    from one host's clock)."""
    span = _step_span(part, gate.step) if "step" in part.columns else None
    decision = gate.decisions.get(rank)
    times = part.select("seq", "time").drop_nulls()
    if decision is not None and decision.time is not None and times.height:
        first, last = times.get_column("time").min(), times.get_column("time").max()
        if first <= decision.time <= last + 3600:  # the same clock, not another timebase
            # (after the last record known to come before it: a record with no time may come after it; with none,
            # anywhere from the first seq, since records that begin later, a ring that wrapped, may begin past it)
            before = times.filter(pl.col("time") < decision.time - _half_last_digit(decision.time)).get_column(
                "seq").max()
            low = before + 1 if before is not None else 1
            high = span[1] if span else int(part.get_column("seq").max()) + 1
            span = (max(low, span[0]) if span else low, high)
    return span if span is None or span[0] <= span[1] else None


def _half_last_digit(value: float) -> float:
    """Half a unit of the last decimal a time was written with: a decision written to the millisecond may have
    been made up to half a millisecond before it (repr gives the shortest decimal that reads back as the value,
    so a time written with trailing zeros counts as written coarser, which only widens)."""
    text = repr(float(value))
    if "e" in text or "." not in text:
        return 0.5
    return 0.5 * 10.0 ** -len(text.split(".")[1])


def _step_span(part: pl.DataFrame, step: int) -> tuple[int, int] | None:
    """The seqs a rank's collectives of `step` may cover: after its last record of an earlier step, before its
    first of a later one (a step whose results were never read back has no step on its last records). None where
    no record of the rank is tied to a step. A trace records a collective once its result was read back: where
    it holds nothing of the step or later (the rank hung in it), the step's collectives go on past its end, as
    many as it launched, which no record counts."""
    steps = part.select("seq", "step").drop_nulls()
    if steps.height == 0:
        return None
    before = steps.filter(pl.col("step") < step).get_column("seq").max()
    after = steps.filter(pl.col("step") > step).get_column("seq").min()
    low = (before + 1) if before is not None else int(part.get_column("seq").min())
    last = int(part.get_column("seq").max())
    unread = traced(part) and before is not None and before == last
    high = (after - 1) if after is not None else UNBOUNDED if unread else last + 1
    return (low, high) if low <= high else None


def _parse_loc(text: str | None) -> Location:
    path, _, line = (text or "").rpartition(":")
    return Location(path, int(line)) if line.isdigit() else Location(text or "")


def completed_by_a_peer(streams: Streams, comm: str, part: pl.DataFrame) -> bool:
    """Whether a peer's records say the collective that ends `part` completed (an NCCL log records launches only):
    a collective every member feeds (an all-reduce: no rank's result is whole before all joined) that completed on
    one member was joined by every member, so none was held in it."""
    seq, op = part.get_column("seq")[-1], part.get_column("op")[-1]
    if op not in ROOTLESS_OPS:
        return False
    for (c, _), peer in streams.parts.items():
        if c != comm or peer is part or "state" not in peer.columns:
            continue
        last = peer.filter(peer.get_column("seq") == seq)
        if last.height and last.get_column("op")[-1] == op and last.get_column("state")[-1] == "completed":
            return True
    return False


def gate_deviants(gate: GateDisagreement | None, ranks: list[int]) -> set[int] | None:
    """The ranks the gate journal says ran what the others did not: the minority side of the disagreement, or,
    with no minority, the side that passed."""
    if gate is None:
        return None
    mine = set(ranks)
    deviants = set(gate.outlier_ranks) & mine
    if not deviants and set(gate.skipped) & mine:
        deviants = set(gate.passed) & mine
    return deviants if deviants and deviants != mine else None
