"""Clocks that disagree: timestamps of one rank, or of one collective on several ranks, that cannot all be right.

Times come from Flight Recorder entries (`time_created_ns`), NCCL debug lines with a timestamp prefix (read as
UTC; NCCL prints local time) and gate journals (`time`). PyTorch log lines carry a time too, but the torch-log
parser keeps none, so they are not compared. Two checks, both on medians so that one slow collective (a
straggler, the hang itself) does not count:

- one rank, two sources: the same collective (comm, seq) in two files, or a gate decision and the first
  collective of its step, should be stamped within SAME_PROCESS_S; they are stamped by one process, or by the
  ranks' processes within one step;
- one rank against the others: collectives pair up across ranks, so the ranks launch the same seq (and decide the
  same step) at nearly the same time; a rank whose times sit ACROSS_RANKS_S off the median of all ranks, for most
  collectives, has a clock that is off (or a time zone read wrongly).

Each finding is one warning naming file:line (or file#entries[i]) of both sides. Times that disagree make the
timeline misleading; they change nothing else in the diagnosis, which pairs collectives by seq, not by time.
"""

from __future__ import annotations

import polars as pl

from ..model import Diagnostic, Evidence, Location, Severity
from .streams import Streams

SAME_PROCESS_S = 60.0  # one process's sources share its clock; buffering delays by seconds, not minutes
ACROSS_RANKS_S = 300.0  # ranks meet at every collective; a straggler's lag shows at one seq, not in the median
_TIME_ZONE_STEP_S = 900.0  # time zones are whole quarter hours from UTC

_STAMP = {"rank": pl.Int64, "key": pl.String, "time": pl.Float64, "file": pl.String, "line": pl.Int64,
          "record": pl.Int64, "step": pl.Int64}


def clock_disagreements(evidence: list[Evidence], streams: Streams) -> list[Diagnostic]:
    """Warnings for timestamps that disagree: per rank between two sources, and per rank against the others."""
    collectives = _collective_stamps(evidence, streams)
    gates = _gate_stamps(evidence)
    problems = _same_rank(_pairs(collectives, gates))
    problems += _across_ranks(pl.concat([collectives, gates]))
    return problems


def _collective_stamps(evidence: list[Evidence], streams: Streams) -> pl.DataFrame:
    """One row per timed collective of every file; `key` names the collective (comm after alias resolution and
    seq), `step` comes from the streams where fingerprints tied the collective to a step."""
    frames = []
    for item in evidence:
        timed = item.collectives.filter(pl.col("time").is_not_null() & pl.col("rank").is_not_null())
        if timed.height:
            frames.append(timed.select("rank", "comm", "seq", "time", pl.col("file").fill_null(item.path),
                                       "line", "record"))
    if not frames:
        return pl.DataFrame(schema=_STAMP)
    stamps = pl.concat(frames)
    if streams.aliases:
        stamps = stamps.with_columns(pl.col("comm").replace(streams.aliases))
    steps = streams.frame.filter(pl.col("step").is_not_null()).select("comm", "rank", "seq", "step").unique(
        ["comm", "rank", "seq"])
    stamps = stamps.join(steps, on=["comm", "rank", "seq"], how="left")
    key = pl.format("collective (comm {}, seq {})", "comm", "seq")
    return stamps.select(pl.col("rank"), key.alias("key"), "time", "file", "line", "record", "step").cast(_STAMP)


def _gate_stamps(evidence: list[Evidence]) -> pl.DataFrame:
    rows = [(g.rank, f"gate decision (step {g.step})", g.time, g.loc.path, g.loc.line, g.loc.record, g.step)
            for item in evidence for g in item.gates if g.time is not None]
    return pl.DataFrame(rows, schema=_STAMP, orient="row")


def _pairs(collectives: pl.DataFrame, gates: pl.DataFrame) -> pl.DataFrame:
    """Pairs of stamps of one rank from two files that should be close: the same collective in both, or a gate
    decision and the earliest collective of its step."""
    same = collectives.join(collectives, on=["rank", "key"], suffix="_b").filter(pl.col("file") < pl.col("file_b"))
    same = same.with_columns(pl.col("key").alias("key_b"))
    step_start = (collectives.filter(pl.col("step").is_not_null()).sort("time")
                  .group_by("file", "rank", "step", maintain_order=True).first())
    gate_vs_step = gates.join(step_start, on=["rank", "step"], suffix="_b")
    columns = ["rank", "key", "file", "line", "record", "time", "key_b", "file_b", "line_b", "record_b", "time_b"]
    return pl.concat([same.select(columns), gate_vs_step.select(columns)])


def _same_rank(pairs: pl.DataFrame) -> list[Diagnostic]:
    if pairs.height == 0:
        return []
    offsets = pairs.with_columns((pl.col("time_b") - pl.col("time")).alias("offset"))
    typical = _typical(offsets, ["rank", "file", "file_b"])
    problems = []
    for row in typical.filter(pl.col("median").abs() > SAME_PROCESS_S).sort("rank", "file", "file_b").iter_rows(
            named=True):
        a, b = _loc(row, ""), _loc(row, "_b")
        hint = ""
        if _whole_time_zones(row["median"]):
            hint = " A whole number of time-zone steps: NCCL prints local time, which is read here as UTC."
        what = row["key"] if row["key"] == row["key_b"] else f"{row['key']} and its step's {row['key_b']}"
        problems.append(Diagnostic(a, (
            f"clocks disagree: rank {row['rank']}'s {what} is stamped {_seconds(row['median'])} later at {b} than "
            f"here (median over {row['n']}); one rank's sources should agree within {SAME_PROCESS_S:.0f} s, so "
            f"their times cannot be put on one timeline.{hint}"), Severity.WARNING))
    return problems


def _across_ranks(stamps: pl.DataFrame) -> list[Diagnostic]:
    """Ranks whose times sit far off the median of all ranks, for the collectives and steps they share."""
    earliest = stamps.sort("time").group_by("rank", "key", maintain_order=True).first()
    shared = earliest.filter(pl.len().over("key") >= 2)
    if shared.height == 0:
        return []
    offsets = shared.with_columns((pl.col("time") - pl.col("time").median().over("key")).alias("offset"))
    typical = _typical(offsets, ["rank"])
    off = typical.filter(pl.col("median").abs() > ACROSS_RANKS_S).sort("rank")
    if off.height == 0:
        return []
    ranks = typical.height
    problems = []
    for row in off.iter_rows(named=True):
        here = _loc(row, "")
        other = (offsets.filter((pl.col("key") == row["key"]) & (pl.col("rank") != row["rank"]))
                 .sort(pl.col("offset").abs()).row(0, named=True))
        if 2 * off.height >= ranks:  # as many clocks off as on: the median itself is no reference
            verdict = (f"rank {row['rank']}'s clock is {_seconds(row['median'])} off the median of the ranks and "
                       f"no majority of them agrees, so which clock is wrong cannot be told")
        else:
            verdict = f"rank {row['rank']}'s clock is {_seconds(row['median'])} off the other ranks'"
        problems.append(Diagnostic(here, (
            f"clocks disagree: {verdict} (median over {row['n']} collectives or steps they share; e.g. its "
            f"{row['key']} here against rank {other['rank']} at {_loc(other, '')}); its times cannot be compared "
            f"with theirs."), Severity.WARNING))
        if 2 * off.height >= ranks:
            break  # one warning says it: there is no rank to single out
    return problems


def _typical(offsets: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """Per group: the median offset, the number of stamps, and the stamp whose offset is nearest the median (the
    one a message cites)."""
    ranked = offsets.with_columns(
        pl.col("offset").median().over(by).alias("median"), pl.len().over(by).alias("n"),
    ).with_columns((pl.col("offset") - pl.col("median")).abs().alias("_distance"))
    return ranked.sort("_distance").group_by(by, maintain_order=True).first()


def _loc(row: dict, suffix: str) -> Location:
    return Location(row["file" + suffix], row["line" + suffix], row["record" + suffix])


def _seconds(value: float) -> str:
    return f"{value:+.1f} s"


def _whole_time_zones(offset: float) -> bool:
    steps = round(offset / _TIME_ZONE_STEP_S)
    return steps != 0 and abs(offset - steps * _TIME_ZONE_STEP_S) <= SAME_PROCESS_S
