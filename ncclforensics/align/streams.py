"""Per-communicator, per-rank launch-ordered streams, merged from every source that describes them.

NCCL pairs collectives by issue order per communicator, so the unit of analysis is the row
(comm, rank, seq). A rank's stream may be described by several files (its NCCL debug log, its Flight Recorder
dump); they are merged row by row, and where they contradict each other that is reported, not hidden.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from ..model import COLLECTIVE_SCHEMA, CommInfo, Diagnostic, Evidence, Location, Severity, SourceFormat, conform

# Which source wins a field when two describe the same (comm, rank, seq) is what each format declares
# (FormatFacts.stream_priority, recorder): NCCL's own line is exact about what was launched; a recorder (the
# Flight Recorder) knows completion state, call sites and times.
SIGNATURE = ["op", "count", "dtype", "redop", "root"]
_RECORDER_FIELDS = ["state", "callsite", "stack", "time"]  # the Flight Recorder's word wins for these
MERGED_FIELDS = ["op", "count", "dtype", "redop", "root", "state", "step", "tag", "callsite", "stack", "time", "host",
                 "pid", "comm_rank", "comm_size"]


@dataclass
class Streams:
    """Every collective of the job, one row per (comm, rank, seq), plus how comms and ranks were resolved.

    The rows are kept per (comm, rank) in `parts`, each in seq order: the analysis reads one communicator's ranks
    at a time, so no frame of every row of the job is ever built for it (that would cost more memory than the
    parsed files). `frame` is all of them in one frame, sorted by comm, rank, seq, built when first asked for.
    """

    parts: dict[tuple[str, int], pl.DataFrame] = field(default_factory=dict)  # (comm, rank) -> rows, seq order
    members: dict[str, list[int]] = field(default_factory=dict)  # comm -> global ranks seen in it
    aliases: dict[str, str] = field(default_factory=dict)  # process-group name -> NCCL comm hash
    problems: list[Diagnostic] = field(default_factory=list)
    excluded_files: list[str] = field(default_factory=list)
    # (comm, rank, source format) -> (last seq, first file) as each source alone saw it, for reconciling
    launched_by_source: dict[tuple[str, int, str], tuple[int, str]] = field(default_factory=dict)
    expected_members: dict[str, list[int]] = field(default_factory=dict)  # comm -> ranks its config names
    # comm -> ranks whose own log, whole (not cut short), initialized it (an INIT line): a rank logging collectives
    # of other comms there and none of this one launched none in it
    initialized: dict[str, list[int]] = field(default_factory=dict)
    # comm -> ranks whose own INIT line names them members, in any log (one cut short too): a log cut before the
    # rank's first collective of the comm still says that the rank is one of its members
    joined: dict[str, list[int]] = field(default_factory=dict)
    # (comm, rank) -> where the file that holds its last records was cut short: the stream ends there because the
    # file does, so its end says nothing of where the rank stopped
    cut: dict[tuple[str, int], Location] = field(default_factory=dict)
    # path -> where that file was cut short (what `cut` was read from; records a trace carries on past the cut files
    # may move a comm's furthest record past a stream that ended with them, fingerprints.py)
    cut_files: dict[str, Location] = field(default_factory=dict)
    # ranks every file of whose collectives was cut short: nothing whole says what they launched after the cuts, in
    # any comm, so one with no records of a comm may have begun there after its files end (even where its records
    # of the other comms end no sooner than its peers', their files cut alike)
    cut_ranks: set[int] = field(default_factory=set)
    # (comm, rank) whose last record is a launch in a format that records every collective as launched (an NCCL log,
    # a dump), in a file not cut short there: the rank launched nothing later in the comm (before the records were
    # taken). A trace written once a collective completed, or a timeout line, leaves what came after it unknown.
    launch_ends: set[tuple[str, int]] = field(default_factory=set)
    _frame: pl.DataFrame | None = field(default=None, repr=False)

    @property
    def frame(self) -> pl.DataFrame:
        """Every row: COLLECTIVE_SCHEMA columns + fr_file, fr_record, sources; sorted by comm, rank, seq."""
        if self._frame is None:
            self._frame = pl.concat([self.parts[k] for k in sorted(self.parts)]) if self.parts else _empty_merged()
        return self._frame

    @frame.setter
    def frame(self, value: pl.DataFrame) -> None:
        self.parts = {(c, r): part for (c, r), part in value.partition_by(
            ["comm", "rank"], maintain_order=True, as_dict=True).items()}
        self._frame = None

    def stream(self, comm: str, rank: int) -> pl.DataFrame:
        """One rank's rows in one comm, in seq order."""
        part = self.parts.get((comm, rank))
        if part is not None:
            return part
        return next(iter(self.parts.values())).clear() if self.parts else _empty_merged()

    def comm_parts(self, comm: str) -> dict[int, pl.DataFrame]:
        """rank -> its rows in `comm` (seq order), ranks in order."""
        return {rank: self.parts[(comm, rank)] for rank in self.members.get(comm, [])}

    def timeout_only(self, comm: str) -> set[int]:
        """Ranks whose records of `comm` are PyTorch timeout lines alone (see timed_out_only)."""
        return {rank for rank, part in self.comm_parts(comm).items() if timed_out_only(part)}

    def map_parts(self, change) -> None:
        """Replace every part by change(part) (a new column, say), keeping the parts' order."""
        self.parts = {key: change(part) for key, part in self.parts.items()}
        self._frame = None


@dataclass
class _Piece:
    """The rows of one file for one (comm, rank), in file order."""

    order: tuple[int, int]  # (file's index among the inputs, group's index in the file): where it first appears
    comm: str
    rank: int
    file: str
    source: str  # the format's name (SourceFormat value)
    frame: pl.DataFrame
    priority: int = 2  # FormatFacts.stream_priority
    recorder: bool = False  # FormatFacts.recorder
    launches: bool = True  # the format's own records are the collectives as launched (not traces, timeout lines)


def build_streams(evidence: list[Evidence]) -> Streams:
    """Merge the collectives of every file into per-(comm, rank) streams, resolving process-group names.

    Works piece by piece (one file's rows for one comm and rank): a rank described by one file alone needs no
    merging, only the columns that say where its rows came from.
    """
    problems: list[Diagnostic] = []
    pieces: list[_Piece] = []
    described = False
    for index, item in enumerate(evidence):
        if item.collectives.height == 0:
            continue
        described = True
        frame = item.collectives.with_columns(pl.col("file").fill_null(item.path))
        unranked = frame.get_column("rank").null_count()
        if unranked:
            problems.append(Diagnostic(
                Location(item.path),
                f"{unranked} collectives name no rank (no INIT line or rank in the file); left out",
                Severity.WARNING,
            ))
            frame = frame.filter(pl.col("rank").is_not_null())
        facts = item.facts  # None for Evidence built by hand: a log like any other
        pieces.extend(_pieces(conform(frame), index, item.format.value, priority=facts.stream_priority if facts else 2,
                              recorder=facts is not None and facts.recorder,
                              launches=facts is None or facts.records == "collectives"))
    if not described:
        return Streams(problems=problems)

    comm_infos = [c for item in evidence for c in item.comm_infos]
    sizes = {i.comm: i.comm_size for item in evidence for i in item.identities if i.comm and i.comm_size}
    positions: dict[str, dict[int, set[int]]] = {}  # comm -> global rank -> the comm ranks INIT lines give it
    for item in evidence:
        for i in item.identities:
            if i.comm and i.rank is not None and i.comm_rank is not None:
                positions.setdefault(i.comm, {}).setdefault(i.rank, set()).add(i.comm_rank)
    aliases = resolve_pieces(pieces, comm_infos, sizes, positions)
    for piece in pieces:
        if piece.comm in aliases:
            piece.comm = aliases[piece.comm]
            piece.frame = piece.frame.with_columns(pl.lit(piece.comm, pl.String).alias("comm"))

    before = {piece.file for piece in pieces}
    pieces, conflicts = _drop_conflicting_pieces(pieces)
    problems.extend(conflicts)
    excluded = sorted(before - {piece.file for piece in pieces})
    launched_by_source: dict[tuple[str, int, str], tuple[int, str]] = {}
    for piece in pieces:
        key = (piece.comm, piece.rank, piece.source)
        last = piece.frame.get_column("seq").max()
        if key in launched_by_source:  # the first file, the largest seq
            seen, first_file = launched_by_source[key]
            known = [v for v in (seen, last) if v is not None]
            launched_by_source[key] = (max(known) if known else None, first_file)
        else:
            launched_by_source[key] = (last, piece.file)
    by_key: dict[tuple[str, int], list[_Piece]] = {}
    for piece in pieces:
        by_key.setdefault((piece.comm, piece.rank), []).append(piece)
    parts: dict[tuple[str, int], pl.DataFrame] = {}
    disagreeing, first_bad = 0, None
    for key in sorted(by_key):
        part, bad = _merge_pieces(by_key[key])
        parts[key] = part
        if bad is not None and bad.height:
            disagreeing += bad.height
            first_bad = first_bad or bad.row(0, named=True)
    if first_bad is not None:
        problems.append(Diagnostic(
            Location(first_bad["file"], first_bad["line"]),
            f"sources disagree about {disagreeing} collectives (first: rank {first_bad['rank']} comm "
            f"{first_bad['comm']} seq {first_bad['seq']}: {first_bad['fr_file']}#entries[{first_bad['fr_record']}] "
            f"says otherwise)",
            Severity.WARNING,
        ))
    members: dict[str, list[int]] = {}
    for comm, rank in parts:
        members.setdefault(comm, []).append(rank)
    expected: dict[str, set[int]] = {}
    for info in comm_infos:
        if info.ranks:
            expected.setdefault(aliases.get(info.comm, info.comm), set()).update(info.ranks)
    cut_files = {item.path: item.cut for item in evidence if item.cut is not None}
    cut = _cut_ends(by_key, cut_files)
    files_of: dict[int, set[str]] = {}
    for piece in pieces:
        files_of.setdefault(piece.rank, set()).add(piece.file)
    return Streams(parts=parts, members=members, aliases=aliases, problems=problems,
                   launched_by_source=launched_by_source, excluded_files=excluded,
                   expected_members={c: sorted(r) for c, r in expected.items()},
                   initialized=_initialized(evidence, aliases), joined=_joined(evidence, aliases),
                   cut=cut, cut_files=cut_files,
                   cut_ranks={rank for rank, files in files_of.items() if files <= cut_files.keys()},
                   launch_ends={key for key, found in by_key.items() if key not in cut and _launch_end(found)})


def _launch_end(pieces: list[_Piece]) -> bool:
    """Whether a (comm, rank)'s last seq is in a piece of a format that records collectives as launched."""
    ends = [(piece.frame.get_column("seq").max(), piece.launches) for piece in pieces]
    ends = [(seq, launches) for seq, launches in ends if seq is not None]
    launched = [seq for seq, launches in ends if launches]
    return bool(launched) and max(launched) == max(seq for seq, _ in ends)


def _initialized(evidence: list[Evidence], aliases: dict[str, str]) -> dict[str, list[int]]:
    """comm -> ranks whose own whole log (the INIT lines of a process that logs its collectives) initialized it."""
    found: dict[str, set[int]] = {}
    for item in evidence:
        if item.cut is not None or item.collectives.height == 0 or not item.identities or item.declares("recorder"):
            continue
        # (a query, not get_column: a column of one value per file would be written out per row and kept)
        ranks = item.collectives.select(pl.col("rank").drop_nulls().unique()).to_series()
        if len(ranks) != 1:
            continue  # (a log of several processes: which process initialized which comm is in the identities)
        for identity in item.identities:
            if identity.comm is not None:
                found.setdefault(aliases.get(identity.comm, identity.comm), set()).add(int(ranks[0]))
    return {comm: sorted(ranks) for comm, ranks in found.items()}


def _joined(evidence: list[Evidence], aliases: dict[str, str]) -> dict[str, list[int]]:
    """comm -> ranks an INIT line names members by their global rank, whatever became of the file after it."""
    found: dict[str, set[int]] = {}
    for item in evidence:
        for identity in item.identities:
            if identity.comm is not None and identity.rank is not None:
                found.setdefault(aliases.get(identity.comm, identity.comm), set()).add(identity.rank)
    return {comm: sorted(ranks) for comm, ranks in found.items()}


def _cut_ends(by_key: dict[tuple[str, int], list[_Piece]], cut_files: dict[str, Location]
              ) -> dict[tuple[str, int], Location]:
    """The (comm, rank)s described by a file cut short that stops before the comm's furthest record: what that
    source would have said past its cut is unknown, whatever the rank's other files say (a log cut at seq 11
    beside a dump of 12 entries, where the other ranks' logs go to 13: a dump is taken while the rank runs, and
    its end may come before the logs' ends).

    Except where a whole dump of the rank goes on past the cut and ends before the other ranks' dumps of the comm
    (a dump of 5 entries beside its log cut at 4, where the other ranks' dumps go to 6): compared with its own kind,
    that dump says the rank launched fewer, as it would with no cut file beside it; the cut takes nothing away
    from it. Only a dump: one read whole is whole (a pickle or JSON document cut short does not read), where a log
    or a trace cut at a line's end reads as whole."""
    out: dict[tuple[str, int], Location] = {}
    if not cut_files:
        return out
    lasts = {key: [(piece.frame.select(pl.col("seq").max()).item(), piece.file, piece.source) for piece in pieces]
             for key, pieces in by_key.items()}
    furthest: dict[str, int] = {}
    by_format: dict[tuple[str, str], int] = {}  # (comm, format) -> the furthest record of whole files of it
    for (comm, _), found in lasts.items():
        for last, file, source in found:
            if last is not None:
                furthest[comm] = max(furthest.get(comm, last), last)
                if file not in cut_files:
                    by_format[comm, source] = max(by_format.get((comm, source), last), last)
    for key, found in lasts.items():
        short = sorted((file, last or 0) for last, file, _ in found
                       if file in cut_files and (last or 0) < furthest.get(key[0], 0))
        if not short:
            continue
        cut_at = max(last for _, last in short)
        if any(last is not None and cut_at < last < by_format.get((key[0], source), 0) and file not in cut_files
               and source == SourceFormat.FLIGHT_RECORDER.value for last, file, source in found):
            continue
        out[key] = cut_files[short[0][0]]
    return out


def _pieces(frame: pl.DataFrame, index: int, source: str, priority: int, recorder: bool,
            launches: bool = True) -> list[_Piece]:
    """A file's rows split by (comm, rank, file), in order of first appearance."""
    if frame.height == 0:
        return []
    keys = ["comm", "rank", "file"]
    if frame.select(pl.col(k).n_unique() == 1 for k in keys).row(0) == (True, True, True):
        groups = [frame]
    else:
        groups = frame.partition_by(keys, maintain_order=True)
    return [_Piece((index, i), *g.select(pl.col(k).first() for k in keys).row(0), source, g,
                   priority=priority, recorder=recorder, launches=launches)
            for i, g in enumerate(groups)]


def _empty_merged() -> pl.DataFrame:
    base = conform(pl.DataFrame())
    return base.with_columns(
        pl.lit(None, pl.String).alias("fr_file"), pl.lit(None, pl.Int64).alias("fr_record"),
        pl.lit(None, pl.List(pl.String)).alias("sources"),
    )


def resolve_pieces(pieces: list[_Piece], comm_infos: list[CommInfo], sizes: dict[str, int] | None = None,
                   positions: dict[str, dict[int, set[int]]] | None = None) -> dict[str, str]:
    """Map Flight Recorder process-group names to the NCCL comm hash that carried them.

    A process group and a communicator are the same when they have the same global ranks and the same
    launch-ordered ops. Worked example: FR pg "0" on ranks {0,1,2,3} whose first ops are AllReduce x4096 matches
    NCCL comm 0x1715b7bd1b8fda9e seen in the INIT lines of the same four processes with the same ops. Where the
    logs hold only some of a group's ranks, a comm whose INIT lines give another size (`sizes`) is not it, and a
    comm goes to one group only: two groups of one rank are two communicators. Where a group lists its ranks (in
    comm-rank order) and INIT lines give a member's comm rank in a comm (`positions`: comm -> global rank -> comm
    ranks), the comm is that group only where each such member stands at its comm rank there: rank 2 as comm
    rank 1 of 0x76e2.. is no member of that comm in group (2, 3), whose comm rank 1 is rank 3. (A list shorter than
    the comm, as a view of some ranks leaves it, gives no comm ranks.)
    """
    sizes = sizes or {}
    positions = positions or {}
    hashed = [p for p in pieces if p.comm.startswith("0x") and p.frame.height]
    named = [p for p in pieces if not p.comm.startswith("0x") and p.frame.height]
    if not hashed or not named:
        return {}
    hash_members: dict[str, set[int]] = {}
    for piece in hashed:
        hash_members.setdefault(piece.comm, set()).add(piece.rank)
    named_members: dict[str, set[int]] = {}
    for piece in named:
        named_members.setdefault(piece.comm, set()).add(piece.rank)
    aliases: dict[str, str] = {}
    for name, ranks in named_members.items():
        pg_ranks = frozenset(ranks)
        listed = False
        orders = set()
        for info in comm_infos:
            if info.comm == name and info.ranks:
                pg_ranks, listed = pg_ranks | frozenset(info.ranks), True
                orders.add(tuple(info.ranks))
        size = sizes.get(name) or (len(pg_ranks) if listed else None)
        candidates = [c for c, m in hash_members.items() if (m == pg_ranks or (m and m <= pg_ranks))
                      and (size is None or sizes.get(c, size) == size)
                      and all(_placed_alike(order, positions.get(c, {})) for order in orders
                              if len(order) == sizes.get(c, len(order)))]
        agreement = {c: _agreement(named, name, hashed, c) for c in candidates}
        best = max(candidates, key=lambda c: (agreement[c], len(hash_members[c])), default=None)
        if best is not None and agreement[best] > 0:
            aliases[name] = best
        elif not listed and size is None:
            # The group's records may come from some of its ranks only (a watchdog log names the collective a
            # rank timed out in, and a rank stuck in another group names none of this one): a comm whose logs hold
            # those ranks and more is it, where its collectives agree with the group's and no other's do as well.
            wider = [c for c, m in hash_members.items() if pg_ranks < m]
            agreement = {c: _agreement(named, name, hashed, c) for c in wider}
            top = max(agreement.values(), default=0.0)
            found = [c for c in wider if agreement[c] == top]
            if top > 0 and len(found) == 1:
                aliases[name] = found[0]
    taken: dict[str, list[str]] = {}
    for name, comm in aliases.items():
        taken.setdefault(comm, []).append(name)
    for names in taken.values():
        if len(names) > 1:  # which group it is, nothing here tells: none is tied to it
            for name in names:
                del aliases[name]
    return aliases


def _placed_alike(order: tuple[int, ...], placed: dict[int, set[int]]) -> bool:
    """Whether every member whose comm rank INIT lines give stands at that comm rank in the group's `order`."""
    return all(0 <= comm_rank < len(order) and order[comm_rank] == rank
               for rank, comm_ranks in placed.items() for comm_rank in comm_ranks)


def _agreement(named: list[_Piece], name: str, hashed: list[_Piece], comm: str) -> float:
    """Share of (rank, seq) rows where the named stream and the hashed stream launch the same op and count."""
    columns = ["rank", "seq", "op", "count"]
    left = pl.concat([p.frame.select(columns) for p in named if p.comm == name])
    right = pl.concat([p.frame.select(columns) for p in hashed if p.comm == comm])
    joined = left.join(right, on=["rank", "seq"], how="inner", suffix="_r")
    if joined.height == 0:
        # No rank is described by both (dumps for some ranks, logs for the others): compare seq by seq, across
        # ranks, the collectives each side launched there.
        left, right = left.drop("rank").unique(), right.drop("rank").unique()
        seqs = left.select("seq").unique().join(right.select("seq").unique(), on="seq").height
        if seqs == 0:
            return 0.0
        same = left.join(right, on=["seq", "op", "count"]).select("seq").unique().height
        return same / seqs
    same = joined.filter((pl.col("op") == pl.col("op_r")) & (pl.col("count") == pl.col("count_r"))).height
    return same / joined.height


def _drop_conflicting_pieces(pieces: list[_Piece]) -> tuple[list[_Piece], list[Diagnostic]]:
    """Two files of one format for the same (comm, rank) are a conflict: keep the first, report the other."""
    groups: dict[tuple[str, int, str], dict[str, list[_Piece]]] = {}
    for piece in pieces:
        groups.setdefault((piece.comm, piece.rank, piece.source), {}).setdefault(piece.file, []).append(piece)
    problems: list[Diagnostic] = []
    dropped: set[tuple[str, int, str]] = set()
    for (comm, rank, _source), files in groups.items():
        if len(files) < 2:
            continue
        stats = []
        for file, mine in files.items():
            rows = pl.concat([p.frame for p in mine]) if len(mine) > 1 else mine[0].frame
            stats.append(rows.select(
                pl.lit(file).alias("file"), pl.len().alias("rows"), pl.col("line").min().alias("first_line"),
                pl.col("op").hash().sum().alias("ops_hash"), pl.col("count").hash().sum().alias("count_hash"),
            ).row(0, named=True))
        keep = stats[0]
        for other in stats[1:]:
            same = (other["rows"], other["ops_hash"], other["count_hash"]) == (
                keep["rows"], keep["ops_hash"], keep["count_hash"])
            verb = "duplicates" if same else "conflicts with"
            problems.append(Diagnostic(
                Location(other["file"], other["first_line"]),
                f"{verb} {keep['file']}: both describe rank {rank} in comm {comm}; using {keep['file']} only",
                Severity.WARNING if same else Severity.ERROR,
            ))
            dropped.add((comm, rank, other["file"]))
    if not dropped:
        return pieces, problems
    return [p for p in pieces if (p.comm, p.rank, p.file) not in dropped], problems


MERGED_COLUMNS = [*COLLECTIVE_SCHEMA, "fr_file", "fr_record", "sources"]  # (no polars work at import: see api)


def _merge_pieces(pieces: list[_Piece]) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """One (comm, rank)'s rows, one per seq, and the rows where its sources disagree (None: a single source)."""
    if len(pieces) == 1 and _increasing(pieces[0].frame.get_column("seq")):
        return _as_merged(pieces[0]), None
    raw = pl.concat([p.frame.with_columns(pl.lit(p.source, pl.String).alias("source"),
                                          pl.lit(p.priority, pl.Int64).alias("_prio"),
                                          pl.lit(p.recorder).alias("_recorder")) for p in pieces])
    return _merge_rows(raw)


def _increasing(seq: pl.Series) -> bool:
    """Strictly increasing and without nulls: every row is its own (comm, rank, seq)."""
    if seq.null_count():
        return False
    values = seq.to_numpy()
    return bool((values[1:] > values[:-1]).all())


def _as_merged(piece: _Piece) -> pl.DataFrame:
    """A piece that alone describes its (comm, rank), as _merge_rows would give it: nothing to merge, only where
    each row came from."""
    fr = piece.recorder
    record = pl.col("record") if fr else pl.lit(None, pl.Int64)
    frame = piece.frame
    no_lines = frame.get_column("line").null_count() == frame.height
    # A dump's rows have no lines: its record column stays as it is, shared by record and fr_record (no copy).
    kept = record if no_lines else pl.when(pl.col("line").is_null()).then(record).otherwise(None).cast(pl.Int64)
    return frame.with_columns(
        kept.alias("record"),
        (pl.col("file") if fr else pl.lit(None, pl.String)).alias("fr_file"),
        record.alias("fr_record"),
        pl.lit(pl.Series("sources", [[piece.source]], dtype=pl.List(pl.String))).first().alias("sources"),
    ).select(MERGED_COLUMNS)


def _merge_rows(raw: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """One row per (comm, rank, seq): fields from the most exact source; and the rows where they contradict."""
    ordered = raw.sort(["comm", "rank", "seq", "_prio"])
    keys = ["comm", "rank", "seq"]
    fr = pl.col("_recorder")
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
    out = conform(merged).with_columns(merged.select("fr_file", "fr_record", "sources")).select(MERGED_COLUMNS)
    return out.sort(["comm", "rank", "seq"]), bad


def traced(part: pl.DataFrame) -> bool:
    """Whether a stream's rows come from a fingerprint trace (a rank's trace is its stream only where no log or
    dump describes it, so its first row says)."""
    if part.height == 0 or "sources" not in part.columns:
        return False
    first = part.select(pl.col("sources").first()).item()
    return first is not None and first.to_list() == [SourceFormat.FINGERPRINT.value]


def timed_out_only(part: pl.DataFrame) -> bool:
    """Whether a stream's rows all come from PyTorch's timeout lines (`WorkNCCL(SeqNum=5730, ...)`). Such a line
    says the rank completed everything before that SeqNum and was still in it; PyTorch enqueues asynchronously, so
    it says nothing of how many collectives the rank launched after it: the stream's end is a floor, as a cut
    file's is, not where the rank stopped launching."""
    if part.height == 0 or "sources" not in part.columns:
        return False
    return part.select(pl.col("sources").list.join(",").eq(SourceFormat.TORCH_LOG.value).all()).item()
