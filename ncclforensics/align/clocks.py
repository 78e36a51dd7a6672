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

# A stamp's `key` names what it stamps, in two columns (no text per row: a big job has millions of stamps): a
# collective is (comm, seq), a gate decision (null, step). _key_text spells it for the messages.
_STAMP = {"rank": pl.Int64, "key_comm": pl.String, "key_num": pl.Int64, "time": pl.Float64, "file": pl.String,
          "line": pl.Int64, "record": pl.Int64, "step": pl.Int64}
KEY = ["key_comm", "key_num"]
STAMPS_PER_PASS = 1 << 20  # stamps grouped at once (~35 MB) by the file-by-file check: a big job takes a few passes


def _key_text(row: dict, suffix: str = "") -> str:
    comm, num = row["key_comm" + suffix], row["key_num" + suffix]
    return f"gate decision (step {num})" if comm is None else f"collective (comm {comm}, seq {num})"


def clock_disagreements(evidence: list[Evidence], streams: Streams) -> list[Diagnostic]:
    """Warnings for timestamps that disagree: per rank between two sources, and per rank against the others."""
    if _one_file_each_and_nobody_off(evidence, streams):
        return []
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
    stepped = [part.filter(pl.col("step").is_not_null()).select("comm", "rank", "seq", "step")
               for part in streams.parts.values() if part.get_column("step").null_count() < part.height]
    steps = (pl.concat(stepped) if stepped else pl.DataFrame(
        schema={"comm": pl.String, "rank": pl.Int64, "seq": pl.Int64, "step": pl.Int64})).unique(["comm", "rank", "seq"])
    if steps.height:
        stamps = stamps.join(steps, on=["comm", "rank", "seq"], how="left")
    else:  # what the join gives when no collective has a step
        stamps = stamps.with_columns(pl.lit(None, pl.Int64).alias("step"))
    return stamps.select(pl.col("rank"), pl.col("comm").alias("key_comm"), pl.col("seq").alias("key_num"), "time",
                         "file", "line", "record", "step").cast(_STAMP)


def _gate_stamps(evidence: list[Evidence]) -> pl.DataFrame:
    rows = [(g.rank, None, g.step, g.time, g.loc.path, g.loc.line, g.loc.record, g.step)
            for item in evidence for g in item.gates if g.time is not None]
    return pl.DataFrame(rows, schema=_STAMP, orient="row")


def _pairs(collectives: pl.DataFrame, gates: pl.DataFrame) -> pl.DataFrame:
    """Pairs of stamps of one rank from two files that should be close: the same collective in both, or a gate
    decision and the earliest collective of its step."""
    # Only a rank stamped by two files or more can pair two files' stamps.
    several = collectives.group_by("rank").agg(pl.col("file").n_unique().alias("files")).filter(pl.col("files") > 1)
    mine = collectives.filter(pl.col("rank").is_in(several.get_column("rank").implode()))
    same = mine.join(mine, on=["rank", *KEY], suffix="_b").filter(pl.col("file") < pl.col("file_b"))
    same = same.with_columns(pl.col("key_comm").alias("key_comm_b"), pl.col("key_num").alias("key_num_b"))
    step_start = (collectives.filter(pl.col("step").is_not_null()).sort("time")
                  .group_by("file", "rank", "step", maintain_order=True).first())
    gate_vs_step = gates.join(step_start, on=["rank", "step"], suffix="_b")
    columns = ["rank", *KEY, "file", "line", "record", "time", "key_comm_b", "key_num_b", "file_b", "line_b",
               "record_b", "time_b"]
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
        key, key_b = _key_text(row), _key_text(row, "_b")
        what = key if key == key_b else f"{key} and its step's {key_b}"
        problems.append(Diagnostic(a, (
            f"clocks disagree: rank {row['rank']}'s {what} is stamped {_seconds(row['median'])} later at {b} than "
            f"here (median over {row['n']}); one rank's sources should agree within {SAME_PROCESS_S:.0f} s, so "
            f"their times cannot be put on one timeline.{hint}"), Severity.WARNING))
    return problems


def _across_ranks(stamps: pl.DataFrame) -> list[Diagnostic]:
    """Ranks whose times sit far off the median of all ranks, for the collectives and steps they share."""
    if _nobody_off(stamps):
        return []
    earliest = stamps.sort("time")
    if not earliest.select(pl.struct("rank", *KEY).is_unique().all()).item():  # else each is its own earliest
        earliest = earliest.group_by("rank", *KEY, maintain_order=True).first()
    shared = earliest.filter(pl.len().over(KEY) >= 2)
    if shared.height == 0:
        return []
    offsets = shared.with_columns((pl.col("time") - pl.col("time").median().over(KEY)).alias("offset"))
    typical = _typical(offsets, ["rank"])
    off = typical.filter(pl.col("median").abs() > ACROSS_RANKS_S).sort("rank")
    if off.height == 0:
        return []
    ranks = typical.height
    problems = []
    for row in off.iter_rows(named=True):
        here = _loc(row, "")
        other = (offsets.filter(pl.col("key_comm").eq_missing(row["key_comm"]) & (pl.col("key_num") == row["key_num"])
                                & (pl.col("rank") != row["rank"]))
                 .sort(pl.col("offset").abs()).row(0, named=True))
        if 2 * off.height >= ranks:  # as many clocks off as on: the median itself is no reference
            verdict = (f"rank {row['rank']}'s clock is {_seconds(row['median'])} off the median of the ranks and "
                       f"no majority of them agrees, so which clock is wrong cannot be told")
        else:
            verdict = f"rank {row['rank']}'s clock is {_seconds(row['median'])} off the other ranks'"
        problems.append(Diagnostic(here, (
            f"clocks disagree: {verdict} (median over {row['n']} collectives or steps they share; e.g. its "
            f"{_key_text(row)} here against rank {other['rank']} at {_loc(other, '')}); its times cannot be compared "
            f"with theirs."), Severity.WARNING))
        if 2 * off.height >= ranks:
            break  # one warning says it: there is no rank to single out
    return problems


def _nobody_off(stamps: pl.DataFrame) -> bool:
    """True when _across_ranks has nothing to say: every rank's median offset is within ACROSS_RANKS_S. Worked out
    the same way (the same medians of the same stamps) on one integer per key, without the sorts that only pick
    which stamps a warning cites; where a rank has two stamps for one key, or keys do not fit an integer, False."""
    if stamps.height == 0:
        return True
    comms = stamps.select(pl.col("key_comm").drop_nulls().unique()).to_series().to_list()
    low_rank, high_rank, low_num, high_num = stamps.select(
        pl.col("rank").min().alias("a"), pl.col("rank").max().alias("b"), pl.col("key_num").min().alias("c"),
        pl.col("key_num").max().alias("d")).row(0)
    if None in (low_rank, low_num) or low_rank < 0 or low_num < 0 or \
            (len(comms) + 1) * (high_num + 1) * (high_rank + 1) >= 1 << 62:
        return False
    comm = pl.col("key_comm").replace_strict(comms, list(range(1, len(comms) + 1)), default=0,
                                             return_dtype=pl.Int64)
    key = (comm * (high_num + 1) + pl.col("key_num")).alias("key")
    keyed = stamps.select("rank", key, "time")
    if keyed.select((pl.col("key") * (high_rank + 1) + pl.col("rank")).n_unique()).item() != keyed.height:
        return False  # a rank stamped one key twice: the earliest counts, which the full computation picks
    shared = keyed.filter(pl.len().over("key") >= 2)
    if shared.height == 0:
        return True
    offsets = shared.select("rank", (pl.col("time") - pl.col("time").median().over("key")).alias("offset"))
    medians = offsets.group_by("rank").agg(pl.col("offset").median())
    return not medians.select((pl.col("offset").abs() > ACROSS_RANKS_S).any()).item()


def _one_file_each_and_nobody_off(evidence: list[Evidence], streams: Streams,
                                  per_pass: int = STAMPS_PER_PASS) -> bool:
    """True when clock_disagreements has nothing to say and that is seen file by file: no gate decisions, every
    rank stamped by one file, and _nobody_off true of the stamps. The stamps of a big job are tens of millions of
    rows; this reads each file's own columns (no copy where nothing is null), never holds a key per stamp, and
    takes the medians per key over a range of seqs at a time (about `per_pass` stamps), where building every stamp
    with its file, line and record would cost ~100 bytes a row. False also where it cannot tell: the full
    computation decides then."""
    if any(g.time is not None for item in evidence for g in item.gates):
        return False
    pieces = []  # (file's timed rows: rank, comm, seq, time), one per file with any
    files_of: dict[int, str] = {}
    for item in evidence:
        frame = item.collectives
        if frame.height == 0:
            continue
        # (Counted in a query: a column of one value per file, a dump's rank, stays one value; get_column would
        # spell it out per row in the evidence's own frame, for the rest of the run.)
        if any(frame.select(pl.col("time").null_count(), pl.col("rank").null_count()).row(0)):
            frame = frame.select("rank", "comm", "seq", "time", "file").filter(
                pl.col("time").is_not_null() & pl.col("rank").is_not_null())
            if frame.height == 0:
                continue
        for rank, file in frame.select("rank", pl.col("file").fill_null(item.path)).unique().iter_rows():
            if files_of.setdefault(rank, file) != file:
                return False  # a rank stamped by two files: their stamps pair up (_pairs)
        pieces.append(frame.select("rank", "comm", "seq", "time"))
    if not pieces:
        return True
    ranks_seen: set[int] = set()
    for piece in pieces:  # a rank in two pieces (two Evidence of one file) could stamp one key twice
        ranks = set(piece.select(pl.col("rank").unique()).to_series().to_list())
        if ranks & ranks_seen:
            return False
        ranks_seen |= ranks
    # Comms as the streams name them (aliases resolved), in each use of `comm`: no column of them is kept.
    named = pl.col("comm").replace(streams.aliases) if streams.aliases else pl.col("comm")
    bounds = pl.concat([p.select(pl.col("rank").min().alias("a"), pl.col("rank").max().alias("b"),
                                 pl.col("seq").min().alias("c"), pl.col("seq").max().alias("d")) for p in pieces])
    low_rank, high_rank, low_num, high_num = bounds.select(pl.col("a").min(), pl.col("b").max(), pl.col("c").min(),
                                                           pl.col("d").max()).row(0)
    comms = sorted({c for p in pieces for c in p.select(named.drop_nulls().unique()).to_series().to_list()})
    if None in (low_rank, low_num) or low_rank < 0 or low_num < 0 or \
            (len(comms) + 1) * (high_num + 1) * (high_rank + 1) >= 1 << 62:
        return False  # what _nobody_off says of such stamps
    comm = named.replace_strict(comms, list(range(1, len(comms) + 1)), default=0, return_dtype=pl.Int64)
    key = (comm * (high_num + 1) + pl.col("seq")).alias("key")
    for piece in pieces:  # ranks are in one piece each: a key stamped twice by a rank is twice in its piece
        if piece.select((key * (high_rank + 1) + pl.col("rank")).n_unique()).item() != piece.height:
            return False
    # A key is (comm, seq): the keys of a range of seqs are grouped apart from the others'.
    stamps = sum(piece.height for piece in pieces)
    passes = max(1, -(-stamps // per_pass))
    width = -(-(high_num - low_num + 1) // passes)
    every = pl.concat([piece.lazy() for piece in pieces])
    per_key = pl.concat([
        every.filter(pl.col("seq").is_between(first, first + width - 1)).select(key, "time").group_by("key").agg(
            pl.len().alias("n"), pl.col("time").median().alias("median")).collect()
        for first in range(low_num, high_num + 1, width)])
    shared = per_key.filter(pl.col("n") >= 2)
    if shared.height == 0:
        return True
    medians = shared.select("key", "median")
    for piece in pieces:  # each rank's median offset from the keys' medians, over the keys it shares
        offsets = piece.select("rank", key, "time").join(medians, on="key", how="inner").select(
            "rank", (pl.col("time") - pl.col("median")).alias("offset"))
        if offsets.group_by("rank").agg(pl.col("offset").median()).select(
                (pl.col("offset").abs() > ACROSS_RANKS_S).any()).item():
            return False
    return True


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
