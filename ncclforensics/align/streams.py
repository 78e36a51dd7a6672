"""Per-communicator, per-rank launch-ordered streams, merged from every source that describes them.

NCCL pairs collectives by issue order per communicator, so the unit of analysis is the row
(comm, rank, seq). A rank's stream may be described by several files (its NCCL debug log, its Flight Recorder
dump); they are merged row by row, and where they contradict each other that is reported, not hidden.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from ..model import CommInfo, Diagnostic, Evidence, Location, Severity, SourceFormat, conform

# Which source wins a field when two describe the same (comm, rank, seq): NCCL's own line is exact about
# what was launched; the Flight Recorder knows completion state, call sites and times.
_PRIORITY = {SourceFormat.NCCL_LOG.value: 0, SourceFormat.FLIGHT_RECORDER.value: 1}
SIGNATURE = ["op", "count", "dtype", "redop", "root"]
_RECORDER_FIELDS = ["state", "callsite", "time"]  # the Flight Recorder's word wins for these
MERGED_FIELDS = ["op", "count", "dtype", "redop", "root", "state", "step", "tag", "callsite", "time", "host",
                 "pid", "comm_rank", "comm_size"]


@dataclass
class Streams:
    """Every collective of the job, one row per (comm, rank, seq), plus how comms and ranks were resolved."""

    frame: pl.DataFrame  # sorted by comm, rank, seq; COLLECTIVE_SCHEMA columns + fr_file, fr_record, sources
    members: dict[str, list[int]] = field(default_factory=dict)  # comm -> global ranks seen in it
    aliases: dict[str, str] = field(default_factory=dict)  # process-group name -> NCCL comm hash
    problems: list[Diagnostic] = field(default_factory=list)
    excluded_files: list[str] = field(default_factory=list)
    # (comm, rank, source format) -> (last seq, first file) as each source alone saw it, for reconciling
    launched_by_source: dict[tuple[str, int, str], tuple[int, str]] = field(default_factory=dict)
    expected_members: dict[str, list[int]] = field(default_factory=dict)  # comm -> ranks its config names

    def stream(self, comm: str, rank: int) -> pl.DataFrame:
        """One rank's rows in one comm, in seq order."""
        return self.frame.filter((pl.col("comm") == comm) & (pl.col("rank") == rank))


def build_streams(evidence: list[Evidence]) -> Streams:
    """Merge the collectives of every file into per-(comm, rank) streams, resolving process-group names."""
    problems: list[Diagnostic] = []
    frames = []
    for item in evidence:
        if item.collectives.height == 0:
            continue
        frame = item.collectives.with_columns(pl.col("file").fill_null(item.path))
        unranked = frame.filter(pl.col("rank").is_null())
        if unranked.height:
            problems.append(Diagnostic(
                Location(item.path),
                f"{unranked.height} collectives name no rank (no INIT line or rank in the file); left out",
                Severity.WARNING,
            ))
            frame = frame.filter(pl.col("rank").is_not_null())
        frames.append(frame.with_columns(pl.lit(item.format.value).alias("source")))
    if not frames:
        return Streams(frame=_empty_merged(), problems=problems)
    raw = pl.concat([conform(f.drop("source")).with_columns(f.get_column("source")) for f in frames])

    comm_infos = [c for item in evidence for c in item.comm_infos]
    aliases = resolve_aliases(raw, comm_infos)
    if aliases:
        raw = raw.with_columns(pl.col("comm").replace(aliases))

    raw, conflicts = _drop_conflicting_files(raw)
    problems.extend(conflicts)
    by_source = raw.group_by(["comm", "rank", "source"]).agg(pl.col("seq").max(), pl.col("file").first())
    launched_by_source = {(c, r, s): (q, f) for c, r, s, q, f in by_source.iter_rows()}
    merged, contradictions = _merge_rows(raw)
    problems.extend(contradictions)
    members = {
        comm: sorted(ranks)
        for comm, ranks in merged.group_by("comm").agg(pl.col("rank").unique()).iter_rows()
    }
    expected: dict[str, set[int]] = {}
    for info in comm_infos:
        if info.ranks:
            expected.setdefault(aliases.get(info.comm, info.comm), set()).update(info.ranks)
    return Streams(frame=merged, members=members, aliases=aliases, problems=problems,
                   launched_by_source=launched_by_source,
                   expected_members={c: sorted(r) for c, r in expected.items()})


def _empty_merged() -> pl.DataFrame:
    base = conform(pl.DataFrame())
    return base.with_columns(
        pl.lit(None, pl.String).alias("fr_file"), pl.lit(None, pl.Int64).alias("fr_record"),
        pl.lit(None, pl.List(pl.String)).alias("sources"),
    )


def resolve_aliases(raw: pl.DataFrame, comm_infos: list[CommInfo]) -> dict[str, str]:
    """Map Flight Recorder process-group names to the NCCL comm hash that carried them.

    A process group and a communicator are the same when they have the same global ranks and the same
    launch-ordered ops. Worked example: FR pg "0" on ranks {0,1,2,3} whose first ops are AllReduce x4096 matches
    NCCL comm 0x1715b7bd1b8fda9e seen in the INIT lines of the same four processes with the same ops.
    """
    hashed = raw.filter(pl.col("comm").str.starts_with("0x"))
    named = raw.filter(~pl.col("comm").str.starts_with("0x"))
    if hashed.height == 0 or named.height == 0:
        return {}
    hash_members = {c: frozenset(r) for c, r in hashed.group_by("comm").agg(pl.col("rank").unique()).iter_rows()}
    aliases: dict[str, str] = {}
    for name, ranks in named.group_by("comm").agg(pl.col("rank").unique()).iter_rows():
        pg_ranks = frozenset(ranks)
        for info in comm_infos:
            if info.comm == name and info.ranks:
                pg_ranks = pg_ranks | frozenset(info.ranks)
        candidates = [c for c, m in hash_members.items() if m == pg_ranks or (m and m <= pg_ranks)]
        if not candidates:
            continue
        best = max(candidates, key=lambda c: (_agreement(named, name, hashed, c), len(hash_members[c])))
        if _agreement(named, name, hashed, best) > 0:
            aliases[name] = best
    return aliases


def _agreement(named: pl.DataFrame, name: str, hashed: pl.DataFrame, comm: str) -> float:
    """Share of (rank, seq) rows where the named stream and the hashed stream launch the same op and count."""
    left = named.filter(pl.col("comm") == name).select("rank", "seq", "op", "count")
    right = hashed.filter(pl.col("comm") == comm).select("rank", "seq", "op", "count")
    joined = left.join(right, on=["rank", "seq"], how="inner", suffix="_r")
    if joined.height == 0:
        return 0.0
    same = joined.filter((pl.col("op") == pl.col("op_r")) & (pl.col("count") == pl.col("count_r"))).height
    return same / joined.height


def _drop_conflicting_files(raw: pl.DataFrame) -> tuple[pl.DataFrame, list[Diagnostic]]:
    """Two files of one format for the same (comm, rank) are a conflict: keep the first, report the other."""
    per_file = (
        raw.group_by(["comm", "rank", "source", "file"], maintain_order=True)
        .agg(pl.len().alias("rows"), pl.col("line").min().alias("first_line"),
             pl.col("op").hash().sum().alias("ops_hash"), pl.col("count").hash().sum().alias("count_hash"))
    )
    problems: list[Diagnostic] = []
    dropped: list[tuple[str, int, str]] = []
    for (comm, rank, _source), group in per_file.group_by(["comm", "rank", "source"], maintain_order=True):
        if group.height < 2:
            continue
        keep = group.row(0, named=True)
        for other in group.iter_rows(named=True):
            if other["file"] == keep["file"]:
                continue
            same = (other["rows"], other["ops_hash"], other["count_hash"]) == (
                keep["rows"], keep["ops_hash"], keep["count_hash"])
            verb = "duplicates" if same else "conflicts with"
            problems.append(Diagnostic(
                Location(other["file"], other["first_line"]),
                f"{verb} {keep['file']}: both describe rank {rank} in comm {comm}; using {keep['file']} only",
                Severity.WARNING if same else Severity.ERROR,
            ))
            dropped.append((comm, rank, other["file"]))
    if not dropped:
        return raw, problems
    drop = pl.DataFrame(dropped, schema={"comm": pl.String, "rank": pl.Int64, "file": pl.String}, orient="row")
    return raw.join(drop, on=["comm", "rank", "file"], how="anti"), problems


def _merge_rows(raw: pl.DataFrame) -> tuple[pl.DataFrame, list[Diagnostic]]:
    """One row per (comm, rank, seq): fields from the most exact source, contradictions reported."""
    ordered = raw.with_columns(
        pl.col("source").replace_strict(_PRIORITY, default=2, return_dtype=pl.Int64).alias("_prio")
    ).sort(["comm", "rank", "seq", "_prio"])
    keys = ["comm", "rank", "seq"]
    fr = pl.col("source") == SourceFormat.FLIGHT_RECORDER.value
    merged = ordered.group_by(keys, maintain_order=True).agg(
        [pl.col(c).drop_nulls().first().alias(c) for c in MERGED_FIELDS if c not in _RECORDER_FIELDS]
        + [pl.coalesce(pl.col(c).filter(fr).drop_nulls().first(), pl.col(c).drop_nulls().first()).alias(c)
           for c in _RECORDER_FIELDS]
        + [
            pl.col("file").filter(pl.col("line").is_not_null() | ~fr).first().alias("file"),
            pl.col("line").drop_nulls().first().alias("line"),
            pl.col("file").filter(fr).first().alias("fr_file"),
            pl.col("record").filter(fr).first().alias("fr_record"),
            pl.col("source").unique().alias("sources"),
            pl.col("op").drop_nulls().n_unique().alias("_ops"),
            pl.col("count").drop_nulls().n_unique().alias("_counts"),
        ]
    )
    merged = merged.with_columns(
        pl.when(pl.col("file").is_null()).then(pl.col("fr_file")).otherwise(pl.col("file")).alias("file"),
        pl.when(pl.col("line").is_null()).then(pl.col("fr_record")).otherwise(None).alias("record"),
    )
    bad = merged.filter((pl.col("_ops") > 1) | (pl.col("_counts") > 1))
    problems = []
    if bad.height:
        first = bad.row(0, named=True)
        problems.append(Diagnostic(
            Location(first["file"], first["line"]),
            f"sources disagree about {bad.height} collectives (first: rank {first['rank']} comm {first['comm']} "
            f"seq {first['seq']}: {first['fr_file']}#entries[{first['fr_record']}] says otherwise)",
            Severity.WARNING,
        ))
    columns = list(conform(pl.DataFrame()).columns) + ["fr_file", "fr_record", "sources"]
    return conform(merged).with_columns(merged.select("fr_file", "fr_record", "sources")).select(columns).sort(
        ["comm", "rank", "seq"]), problems
