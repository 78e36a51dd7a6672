"""Per-collective fingerprint traces give each collective its step and tag, once tied to a stream."""

from __future__ import annotations

import polars as pl

from ..model import COLLECTIVE_SCHEMA, EventState, FingerprintRow, SourceFormat
from ..model.kinds import normalize_op
from .streams import Streams

# How far, relative to the larger of 1 and the value, a sum read back may be from another that sums the same results
# (its expected value, or another rank's sum of one design): the tracer sums in the job's float32 while the value a
# consistent world gives is summed apart, in another order, so equal results may part in the last bits of float32.
SUM_TOLERANCE = 1e-6


def attach_fingerprints(streams: Streams, fingerprints: list[FingerprintRow]) -> Streams:
    """Fill `step` and `tag` of the rows a rank's per-collective fingerprints describe.

    Fingerprints name no communicator, so a rank's trace (ordered by step, then op) is tied to the one comm
    whose stream launches the same ops with the same counts in the same order, or to the rank's comms together in
    the order it issued them (one comm's stream alone only where the rank launched in no other); if none or several
    do, the trace is left unattached (it still serves as corruption evidence). Records past the end of streams cut
    short carry them on, each in the comm its digest's holders are the members of (a comm the rank has no record of
    too, where the log was cut before it: the rank joins it there), or at the one place where the other ranks'
    records of its digest are tied, once every trace is tied (a member's trace may stop before it). A stream carries
    on its rank's trace alone only where no record's digest is another comm's, and, past a cut, only the records
    whose op and size no other comm the rank's INIT lines name launched (_past_cut_by_ops); else each record goes
    where its digest or its op places it, and from the first that nothing places on, none is placed.
    """
    per_collective = [f for f in fingerprints if f.op is not None]
    if not per_collective or not streams.parts:
        return streams
    rows = []
    extensions: dict[tuple[str, int], pl.DataFrame] = {}  # (comm, rank) -> trace records past a log cut sooner
    traces: dict[int, list[FingerprintRow]] = {}  # rank -> its records by step, then op
    for row in sorted(per_collective, key=lambda f: (f.rank, f.step, f.op)):
        traces.setdefault(row.rank, []).append(row)
    holders: dict[str, set[int]] = {}  # digest -> the ranks that read that result back
    for row in per_collective:
        if row.digest is not None:
            holders.setdefault(row.digest, set()).add(row.rank)
    # (comm, seq)s where ranks' records of each digest are tied to streams: a digest is one physical collective's,
    # so another rank's record of it past its own log's cut is at that place too (however many members traced it)
    places: dict[str, dict[int, set[tuple[str, int]]]] = {}  # digest -> rank -> (comm, seq)
    tied: list[tuple[int, tuple]] = []  # (rank, the one match of its trace) for carrying records past its streams
    untied: list[int] = []  # ranks whose traces neither made their streams nor line up with one of them
    for rank, trace in traces.items():
        made_rows = _made_by(streams, rank, trace)
        if made_rows is not None:
            # The trace made the rank's streams: each record is the row it made, and rows of other sources beside
            # them (a timeout line's) are no record of it, whatever their position.
            rows.extend(made_rows)
            digests = {str(f.loc): f.digest for f in trace}
            for comm, _, seq, *_, where in made_rows:
                if digests.get(where) is not None:
                    places.setdefault(digests[where], {}).setdefault(rank, set()).add((comm, seq))
            continue
        kinds = [(normalize_op(f.kind) if f.kind else None, f.numel) for f in trace]
        # The comms other evidence puts the rank in: a trace carries on the stream of its one comm only where it
        # has no other (its records of the others are lost with the file, not absent from its trace).
        comms_of_rank = {c for c, m in [*streams.members.items(), *streams.expected_members.items()] if rank in m}
        # Candidates: each comm's stream alone, and all of the rank's comms in its own issue order (a trace of
        # a rank that uses several comms, e.g. world and tensor-parallel).
        candidates = [streams.stream(comm, rank) for comm in streams.members]
        mine = [streams.parts[key] for key in sorted(streams.parts) if key[1] == rank]
        issued = issue_ordered(pl.concat(mine) if mine else streams.stream("", rank))
        if issued is not None and issued.get_column("comm").n_unique() > 1:
            candidates.append(issued)
        # Comms the rank has records of: a trace lists the rank's collectives of every comm one after another, so a
        # stream of one comm takes it only where the rank launched in no other (else the trace's records of the
        # others would be read as this comm's, and its tags shifted by them).
        launched_in = {comm for (comm, r), part in streams.parts.items() if r == rank and part.height}
        matches = []
        for stream in candidates:
            if stream is not issued and len(launched_in) > 1:
                continue
            skip = _lost_head(stream, trace)
            if skip is None:
                continue
            ours = trace[skip:]
            head, paired = _paired(stream, len(ours))
            reach = paired[-1] + 1 if len(paired) else 0  # the records up to the stream's last row
            if reach < len(ours) and not (len(mine) == 1 and len(comms_of_rank) <= 1 and _cut_sooner(stream)) \
                    and not (stream is issued and all(_cut_sooner(part) for part in mine)
                             and any((comm, rank) in streams.cut for comm in streams.members)):
                continue
            ops = list(zip(head.get_column("op").to_list(), head.get_column("count").to_list()))
            if all((k is None or k == o) and (n is None or n == c)
                   for (k, n), (o, c) in zip((kinds[skip + i] for i in paired), ops)):
                matches.append((head, [ours[i] for i in paired], ours[reach:], _gaps(head, ours, paired, reach)))
        if len(matches) == 1:
            head, ours, rest, gaps = matches[0]
            rows.extend((comm, rank, seq, f.step, f.tag, checked_right(f), str(f.loc)) for comm, seq, f in zip(
                head.get_column("comm").to_list(), head.get_column("seq").to_list(), ours))
            for comm, seq, f in zip(head.get_column("comm").to_list(), head.get_column("seq").to_list(), ours):
                if f.digest is not None:
                    places.setdefault(f.digest, {}).setdefault(rank, set()).add((comm, seq))
            tied.append((rank, matches[0]))
        else:
            untied.append(rank)
    for rank, (head, _, rest, gaps) in tied:
        # (after every trace is tied, so that any rank's records of a digest place another's)
        trace = traces[rank]
        one = head.get_column("comm")[0] if head.get_column("comm").n_unique() == 1 else None
        from_start = (trace[0].step, trace[0].op) == (0, 0)
        # Records whose results ranks beyond the one comm share, or that other ranks' records tie to another comm,
        # are not the one stream's to carry on: each goes where its digest places it, up to the first that nothing
        # places (what follows may be of any comm the rank's cut log never named).
        beyond = one is not None and _shared_beyond(streams, one, rank, rest, holders, places)
        if one is not None and not beyond:
            elsewhere: dict[tuple[str, int], pl.DataFrame] = {}
            if rest and (one, rank) in streams.cut:
                rest, elsewhere = _past_cut_by_ops(streams, one, rank, rest, holders, from_start)
            if rest or gaps:
                extensions[(one, rank)] = _trace_rows(head, [*gaps, *_past_end(head, rest)])
            extensions.update(elsewhere)
        elif rest:
            extensions.update(_beyond_comms(streams, rank, rest, holders, places, from_start))
        if beyond and gaps:  # (records in a gap of the one stream are its, whatever lies past its end)
            inside = _trace_rows(head, gaps)
            past = extensions.get((one, rank))
            extensions[(one, rank)] = inside if past is None else pl.concat([inside, past], how="diagonal_relaxed")
    for rank in untied:
        # (after every tied trace: their records of a digest are where this rank's record of it is)
        found = _placed_by_digests(streams, rank, traces[rank], places)
        for (comm, seq), f in found.items():
            if not streams.stream(comm, rank).filter(pl.col("seq") == seq).height:
                continue
            rows.append((comm, rank, seq, f.step, f.tag, checked_right(f), str(f.loc)))
        for comm in sorted({comm for comm, _ in found}):
            have = set(streams.stream(comm, rank).get_column("seq").to_list())
            added = [(seq, f) for (c, seq), f in sorted(found.items(), key=lambda kv: kv[0][1])
                     if c == comm and seq not in have]
            if added:
                extensions[(comm, rank)] = _trace_rows_of(comm, rank, added)
    if not rows and not extensions:
        return streams
    known = pl.DataFrame(rows, schema={"comm": pl.String, "rank": pl.Int64, "seq": pl.Int64,
                                       "_step": pl.Int64, "_tag": pl.String, "_checked": pl.Boolean,
                                       "_checked_at": pl.String}, orient="row")
    by_key = known.partition_by(["comm", "rank"], as_dict=True)
    empty = known.clear()

    def attach(part: pl.DataFrame) -> pl.DataFrame:
        key = (part.get_column("comm")[0], part.get_column("rank")[0]) if part.height else None
        joined = part.drop("checked", "checked_at", strict=False).join(
            by_key.get(key, empty), on=["comm", "rank", "seq"], how="left", maintain_order="left")
        joined = joined.with_columns(
            pl.coalesce("step", "_step").alias("step"), pl.coalesce("tag", "_tag").alias("tag"),
            pl.col("_checked").alias("checked"), pl.col("_checked_at").alias("checked_at"),
        ).drop("_step", "_tag", "_checked", "_checked_at")
        if key in extensions:
            added = extensions[key]
            top, low = joined.get_column("seq").max(), added.get_column("seq").min()
            gaps = top is not None and low is not None and low < top
            joined = pl.concat([joined, added], how="diagonal_relaxed").select(joined.columns)
            if gaps:  # (records in a gap of the stream go between its rows, in seq order)
                joined = joined.sort("seq", nulls_last=True, maintain_order=True)
        return joined

    streams.map_parts(attach)
    # (a comm whose every record of the rank is the trace's: its log was cut before the rank's first one there)
    template = next(iter(streams.parts.values())).clear()
    for (comm, rank), added in extensions.items():
        if (comm, rank) not in streams.parts:
            streams.parts[(comm, rank)] = pl.concat([template, added], how="diagonal_relaxed").select(template.columns)
            streams.members[comm] = sorted({*streams.members.get(comm, ()), rank})
    _cut_short_of_traces(streams)
    return streams


def _cut_short_of_traces(streams: Streams) -> None:
    """Mark cut (`Streams.cut`) the streams that end in a file cut short, before the furthest record of their comm
    that traces carried on past the cut files: the same rule as for the files alone (streams.py `_cut_ends`), with
    the trace records counted. Worked example: ranks 0 and 1's NCCL logs are both cut after seq 1, so neither ends
    before the other; rank 1's trace goes on with seq 2, whose result needed rank 0's part in it. Rank 0's log ends
    at seq 1 because the file does: read as a rank that launched no more, it put the stop at seq 2, which both ranks
    got past."""
    furthest: dict[str, int] = {}
    ends: dict[tuple[str, int], tuple[int, str | None]] = {}
    for key, part in streams.parts.items():
        if not part.height:
            continue
        last = part.row(part.height - 1, named=True)
        if last["seq"] is None:
            continue
        ends[key] = (last["seq"], last["file"])
        furthest[key[0]] = max(furthest.get(key[0], last["seq"]), last["seq"])
    for key, (seq, file) in ends.items():
        if key not in streams.cut and file in streams.cut_files and seq < furthest[key[0]]:
            streams.cut[key] = streams.cut_files[file]
            streams.launch_ends.discard(key)


def _made_by(streams: Streams, rank: int, trace: list[FingerprintRow]) -> list[tuple] | None:
    """Where the trace made some of the rank's stream rows (align/traces.py), (comm, rank, seq, step, tag, checked,
    where) for the row each of its records made, tied by the record's file and line; else None."""
    fingerprint = SourceFormat.FINGERPRINT.value
    by_place = {(f.loc.path, f.loc.line): f for f in trace}
    out = []
    for (comm, r), part in streams.parts.items():
        if r != rank or part.height == 0:
            continue
        made = part.filter(pl.col("sources").list.len() == 1).filter(
            pl.col("sources").list.first() == fingerprint).select("file", "line", "seq")
        for file, line, seq in made.iter_rows():
            f = by_place.get((file, line))
            if f is not None:
                out.append((comm, rank, seq, f.step, f.tag, checked_right(f), str(f.loc)))
    return out or None


def _paired(stream: pl.DataFrame, length: int) -> tuple[pl.DataFrame, range | list[int]]:
    """The stream's rows a trace of `length` records (from the stream's first seq on) describes, and for each the
    index of its record. A trace lists the rank's collectives one after another, so in one comm its records line
    up with the stream by seq: where the stream's records skip seqs (a log cut short beside a dump whose ring
    begins later), record i is seq first + i, not the stream's i-th row. Across comms (seqs per comm) they line
    up row by row."""
    seq = stream.get_column("seq")
    if stream.height == 0 or seq.null_count() or stream.get_column("comm").n_unique() != 1 \
            or seq[-1] - seq[0] + 1 == stream.height:
        head = stream.head(length)
        return head, range(head.height)
    first = seq[0]
    head = stream.filter(pl.col("seq") < first + length)
    return head, [s - first for s in head.get_column("seq").to_list()]


def _lost_head(stream: pl.DataFrame, trace: list[FingerprintRow]) -> int | None:
    """How many of the trace's first records come before the stream's first (0 for a stream from seq 1); None
    where that cannot be told. A trace begins at the rank's first collective; a Flight Recorder ring that wrapped
    begins later, at its first entry's seq, so the trace lines up with it by seq, not head to head."""
    first = stream.get_column("seq").min() if stream.height else None
    if first is None or first <= 1:
        return 0
    if stream.get_column("comm").n_unique() != 1 or (trace[0].step, trace[0].op) != (0, 0):
        return None  # (a trace that does not begin at step 0 could begin anywhere)
    return first - 1 if first - 1 < len(trace) else None


def _cut_sooner(stream: pl.DataFrame) -> bool:
    """The stream of a rank's one comm whose records stop sooner than its trace: a file cut short, which the trace's
    later records carry on (seqs contiguous, so they follow on). With several comms the trace mixes them."""
    if stream.height == 0 or stream.get_column("comm").n_unique() != 1:
        return False
    seq = stream.get_column("seq")
    return seq.null_count() == 0 and seq[-1] - seq[0] + 1 == stream.height


def _gaps(head: pl.DataFrame, ours: list[FingerprintRow], paired: range | list[int],
          reach: int) -> list[tuple[int, FingerprintRow]]:
    """(seq, record) for the trace records lined up by seq with a one-comm stream that has no row there: a log
    cut short beside a dump whose ring begins later leaves the seqs between on no record but the trace, which
    lists every collective the rank read back. Worked example: rank 0's log is cut after seq 1 and its ring keeps
    seq 5 on; its trace's records 2-4 are seqs 2-4, where its tags may part from the others'."""
    if isinstance(paired, range) or head.get_column("comm").n_unique() != 1:
        return []
    first, kept = head.get_column("seq")[0], set(paired)
    return [(first + i, ours[i]) for i in range(reach) if i not in kept]


def _beyond(head: pl.DataFrame, rest: list[FingerprintRow]) -> pl.DataFrame:
    """Rows for the trace records past the end of a stream cut sooner: what the rank read back, so completed."""
    return _trace_rows(head, _past_end(head, rest))


def _past_end(head: pl.DataFrame, rest: list[FingerprintRow]) -> list[tuple[int, FingerprintRow]]:
    """(seq, record) for trace records that follow the last row of the stream `head` is of, one seq each."""
    last = head.get_column("seq")[-1]
    return [(last + 1 + i, f) for i, f in enumerate(rest)]


def _trace_rows(head: pl.DataFrame, placed: list[tuple[int, FingerprintRow]]) -> pl.DataFrame:
    """Rows of the stream `head` is of for trace records at the seqs given (seq, record): what the rank read back,
    so completed."""
    return _trace_rows_of(head.get_column("comm")[0], head.get_column("rank")[0], placed)


def _trace_rows_of(comm: str, rank: int, placed: list[tuple[int, FingerprintRow]]) -> pl.DataFrame:
    """Rows of the rank's stream in `comm` for trace records at the seqs given (seq, record)."""
    rest = [f for _, f in placed]
    return pl.DataFrame({
        "file": [f.loc.path for f in rest], "line": [f.loc.line for f in rest], "comm": comm, "rank": rank,
        "seq": [seq for seq, _ in placed],
        "op": [normalize_op(f.kind) if f.kind else None for f in rest], "count": [f.numel for f in rest],
        "state": EventState.COMPLETED.value, "step": [f.step for f in rest], "tag": [f.tag for f in rest],
        "checked": [checked_right(f) for f in rest], "checked_at": [str(f.loc) for f in rest],
        "sources": [[SourceFormat.FINGERPRINT.value]] * len(rest),
    }, schema_overrides={"line": pl.Int64, "count": pl.Int64, "step": pl.Int64, "rank": pl.Int64, "seq": pl.Int64,
                         "checked": pl.Boolean, "sources": pl.List(pl.String),
                         "state": COLLECTIVE_SCHEMA["state"]})


def _shared_beyond(streams: Streams, comm: str, rank: int, rest: list[FingerprintRow], holders: dict[str, set[int]],
                   places: dict[str, dict[int, set[tuple[str, int]]]]) -> bool:
    """Whether a record past the end of the rank's one stream shares its result (digest) with a rank that is no
    member of that stream's comm, or with another rank's record tied to another comm: a digest is one physical
    collective's, so the trace holds another comm's records, which the rank's log, cut short, never named; they are
    not the stream's to carry on. Worked example: rank 7's log is cut after its first world collective; its trace's
    later records share digests with ranks 5 and 6 (world members too), whose logs put those records in their TP
    comm: they are rank 7's TP records, not its world seqs 2, 3, ..."""
    members = {*streams.members.get(comm, ()), *streams.expected_members.get(comm, ()), rank}
    for row in rest:
        if row.digest is None:
            continue
        elsewhere = {c for r, where in places.get(row.digest, {}).items() if r != rank for c, _ in where} - {comm}
        if holders.get(row.digest, set()) - members or elsewhere:
            return True
    return False


def _beyond_comms(streams: Streams, rank: int, rest: list[FingerprintRow], holders: dict[str, set[int]],
                  places: dict[str, dict[int, set[tuple[str, int]]]], from_start: bool = False
                  ) -> dict[tuple[str, int], pl.DataFrame]:
    """Rows for the trace records past the end of a rank's streams, cut sooner (a log cut short): each record goes
    to the one comm whose members are exactly the ranks that read back the same result (its digest's holders), or
    to the one place (comm, seq) where other ranks' records of that result are tied to their streams (`places`:
    digest -> rank -> (comm, seq)), where that is the record's next seq in the comm: a digest is one physical
    collective's, so it places the record though a member's trace stops before it. That goes up to the first record
    neither places (a comm with a member that left no trace, or one the rank's records do not show: what follows may
    be anywhere). `from_start`: the trace begins with the rank's first collective, so a comm the rank has no record
    of, whose members with the rank are the holders, places a record too, from seq 1 there: the rank's log was cut
    before its first collective of that comm. Worked example: rank 4's log is cut after its first collective, of its
    DP pair {0, 4}; its trace's next records share digests with ranks 5-7, whose logs name their TP comm of four:
    those records are rank 4's seqs 1, 2, ... there, not its DP pair's. And rank 2's log is cut after its TP seq 7;
    its trace's next record shares its digest with ranks 0 and 1 alone (rank 3's trace stops sooner), whose
    records of it are TP seq 8: it is rank 2's TP seq 8, where its tag and size may part from theirs."""
    mine = {comm: streams.parts[(comm, r)] for comm, r in streams.parts if r == rank}
    known = {*streams.members, *streams.expected_members}
    members = {comm: set(streams.members.get(comm, ())) | set(streams.expected_members.get(comm, ())) | (
        {rank} if from_start else set()) for comm in (known if from_start else mine)}
    placed: dict[str, list[FingerprintRow]] = {}
    for row in rest:
        sharing = holders.get(row.digest, set()) if row.digest is not None else set()
        # (a comm other ranks' records of the digest are tied to outweighs one whose known members the holders are)
        tied_at = {c for r, where in places.get(row.digest, {}).items() if r != rank for c, _ in where}
        fits = [c for c in members if len(sharing) > 1 and sharing == members[c] and rank in sharing
                and (not tied_at or c in tied_at)]
        if len(fits) != 1:
            fits = _tied_by_others(row, rank, sharing, places, members, mine, placed)
        if len(fits) != 1:
            break
        placed.setdefault(fits[0], []).append(row)
    return {(comm, rank): _beyond(mine[comm], rows) if comm in mine else _trace_rows_of(comm, rank, list(
        enumerate(rows, start=1))) for comm, rows in placed.items()}


def _past_cut_by_ops(streams: Streams, one: str, rank: int, rest: list[FingerprintRow], holders: dict[str, set[int]],
                     from_start: bool) -> tuple[list[FingerprintRow], dict[tuple[str, int], pl.DataFrame]]:
    """The trace records past the end of the rank's one stream (of `one`, in a log cut short) that stream carries
    on, and rows for those that go to another comm the rank's log initialized, where it launched none before the
    cut. What the rank issued past the cut may be of any comm its INIT lines name it a member of (a log records a
    comm's collectives only once they are launched), so a record goes to a comm only where its op and size are
    among those that comm's other members launched and no other such comm's, and its digest's holders are all
    members; the rank's first record of a comm it has no row of is its seq 1 there (`from_start`: the trace begins
    with the rank's first collective). From the first record that fits no comm, or several, on, none is placed:
    it may have taken a seq of any of them. Worked example: rank 6's log is cut after its first world all-reduce
    (1 x int32) and the INIT of its TP comm; its trace goes on with all-reduces of 4096 floats and an all-gather
    of 1000, which its TP peers launched and no world member did: they are its TP seqs 1-4, not world seqs 2-5."""
    comms = {c for c, ranks in [*streams.members.items(), *streams.expected_members.items(),
                                *streams.joined.items()] if rank in ranks}
    if comms == {one}:
        return rest, {}
    members = {c: {*streams.members.get(c, ()), *streams.expected_members.get(c, ()), *streams.joined.get(c, ())}
               for c in comms}
    launched: dict[str, set[tuple]] = {}  # comm -> the (op, count)s its other members launched
    for c in comms:
        others = [part for (comm, r), part in streams.parts.items() if comm == c and r != rank]
        # (the distinct pairs, column-wise: a comm's streams may hold millions of rows)
        pairs = [p.select("op", "count") for p in others]
        launched[c] = set(pl.concat(pairs, how="vertical_relaxed").unique().iter_rows()) if pairs else set()
    kept: list[FingerprintRow] = []
    placed: dict[str, list[FingerprintRow]] = {}
    for row in rest:
        kind = normalize_op(row.kind) if row.kind else None
        sharing = holders.get(row.digest, set()) - {rank} if row.digest is not None else set()
        fits = [c for c in sorted(comms) if sharing <= members[c] and (not launched[c] or any(
            (kind is None or op in (None, kind)) and (row.numel is None or count in (None, row.numel))
            for op, count in launched[c]))]
        if fits == [one]:
            kept.append(row)
        elif len(fits) == 1 and from_start and (fits[0], rank) not in streams.parts:
            placed.setdefault(fits[0], []).append(row)
        else:
            break
    return kept, {(comm, rank): _trace_rows_of(comm, rank, list(enumerate(rows, start=1)))
                  for comm, rows in placed.items()}


def _tied_by_others(row: FingerprintRow, rank: int, sharing: set[int],
                    places: dict[str, dict[int, set[tuple[str, int]]]], members: dict[str, set[int]],
                    mine: dict[str, pl.DataFrame], placed: dict[str, list[FingerprintRow]]) -> list[str]:
    """[comm] where other ranks' records of the row's digest are tied to one (comm, seq), of a comm of the rank
    whose members hold every rank sharing the digest, and that seq is the rank's next there (past its stream, then
    past the records placed so far); else []. A place that is not the next seq is no pairing the rank's own order
    gives, so it places nothing."""
    if row.digest is None:
        return []
    at = set().union(*(where for r, where in places.get(row.digest, {}).items() if r != rank))
    if len(at) != 1:
        return []
    (comm, seq), = at
    if comm not in members or not sharing <= members[comm] | {rank}:
        return []
    last = mine[comm].get_column("seq").max() if comm in mine else None
    return [comm] if seq == (last or 0) + len(placed.get(comm, [])) + 1 else []


def _placed_by_digests(streams: Streams, rank: int, trace: list[FingerprintRow],
                       places: dict[str, dict[int, set[tuple[str, int]]]]) -> dict[tuple[str, int], FingerprintRow]:
    """(comm, seq) -> record, for the records of a trace that lines up with none of the rank's streams (its comms
    in an issue order no source gives: a log cut short before a dump's ring begins) whose digest other ranks'
    records hold at one (comm, seq) of a comm the rank is a member of: a digest is one physical collective's, and
    NCCL pairs a comm's collectives by seq, so the rank's record is that seq too, whatever its tag says. Where the
    places go back in a comm against the trace's own order, or part from the rank's row there in op or size, the
    digests are no such tie (a result two collectives share by chance): nothing is placed. Worked example: rank 1's
    log is cut after its first world all-reduce and its ring keeps TP seqs 7-10; its trace's records of TP seqs
    3 and 4 share their digests with rank 0's seqs 3 and 4, under each other's tags: those two were misaligned."""
    members = {comm: {*streams.members.get(comm, ()), *streams.expected_members.get(comm, ()),
                      *streams.joined.get(comm, ())} for comm in {*streams.members, *streams.expected_members}}
    found: dict[tuple[str, int], FingerprintRow] = {}
    last: dict[str, int] = {}  # comm -> the seq the trace's latest record there was placed at
    for row in trace:
        if row.digest is None:
            continue
        at = set().union(*(where for r, where in places.get(row.digest, {}).items() if r != rank))
        if len(at) != 1:
            continue
        (comm, seq), = at
        if rank not in members.get(comm, ()):
            continue
        mine = streams.stream(comm, rank).filter(pl.col("seq") == seq)
        kind = normalize_op(row.kind) if row.kind else None
        if seq <= last.get(comm, 0) or mine.height and not (
                (kind is None or mine.get_column("op")[0] in (None, kind))
                and (row.numel is None or mine.get_column("count")[0] in (None, row.numel))):
            return {}
        last[comm] = seq
        found[(comm, seq)] = row
    return found


def checked_right(row: FingerprintRow) -> bool | None:
    """True when the collective's result equals what a consistent world gives, False when not, None unknown."""
    if row.sum is None or row.expected_sum is None:
        return None
    return abs(row.sum - row.expected_sum) <= SUM_TOLERANCE * max(1.0, abs(row.expected_sum))


def issue_ordered(rows: pl.DataFrame) -> pl.DataFrame | None:
    """One rank's rows across comms in the order it issued them, where a source gives that order: dump
    records (per process, across process groups), line numbers of one log, or times; else None."""
    if rows.height == 0:
        return None
    if rows.get_column("fr_record").null_count() == 0 and rows.get_column("fr_file").n_unique() == 1:
        return rows.sort("fr_record")
    if rows.get_column("line").null_count() == 0 and rows.get_column("file").n_unique() == 1:
        return rows.sort("line")
    if rows.get_column("time").null_count() == 0:
        return rows.sort("time")
    return _log_then_dump(rows)


def _log_then_dump(rows: pl.DataFrame) -> pl.DataFrame | None:
    """One rank's rows in issue order where one log holds some and one dump the rest, and the rows both hold tie
    the two orders together (a log cut short, a dump's ring that goes on past it): each row the dump alone holds goes
    after the last row both hold that the dump recorded before it; else None. Worked example: a log holds comm A's
    seqs 1-9 and comm B's 1-4 (lines 17-43, cut there), a dump records A's seqs 5-10 (records 0-5): A's seq 10 goes
    after A's seq 9, the last row both hold."""
    lined = rows.filter(pl.col("line").is_not_null())
    dumped = rows.filter(pl.col("line").is_null())
    both = lined.filter(pl.col("fr_record").is_not_null()).sort("fr_record")
    if not lined.height or not both.height or lined.get_column("file").n_unique() != 1 \
            or dumped.get_column("fr_record").null_count() or pl.concat([both, dumped]).get_column("fr_file").n_unique() != 1:
        return None
    if not both.get_column("line").is_sorted():
        return None  # (the two orders disagree: neither is the issue order)
    anchors = dumped.sort("fr_record").join_asof(
        both.select(pl.col("fr_record"), pl.col("line").alias("_after")), on="fr_record", strategy="backward")
    if anchors.get_column("_after").null_count():
        return None  # (a row the dump alone holds before every row both hold: where among the log's it goes is unknown)
    return pl.concat([lined.with_columns(pl.col("line").alias("_after"), pl.lit(0).alias("_dumped")),
                      anchors.with_columns(pl.lit(1).alias("_dumped"))], how="vertical_relaxed") \
        .sort("_after", "_dumped", "fr_record").drop("_after", "_dumped")


def corrupted(fingerprints: list[FingerprintRow]) -> list[FingerprintRow]:
    """Rows whose checksum differs from the value a consistent world gives (where the trace records it)."""
    return [f for f in fingerprints
            if f.sum is not None and f.expected_sum is not None and abs(f.sum - f.expected_sum) > SUM_TOLERANCE * max(
                1.0, abs(f.expected_sum))]


def diverging_steps(fingerprints: list[FingerprintRow]) -> dict[int, dict[int, FingerprintRow]]:
    """Steps where per-step checksums differ across ranks (a symptom of mixed data), step -> rank -> row."""
    table: dict[int, dict[int, FingerprintRow]] = {}
    for f in fingerprints:
        if f.op is None and (f.sum is not None or f.digest is not None):
            table.setdefault(f.step, {})[f.rank] = f
    # Where every rank's checksum is the value a consistent world gives, they differ by design (replicas that
    # serve different requests), not by mixed data.
    return {step: rows for step, rows in sorted(table.items())
            if len(rows) > 1 and len({(r.sum, r.digest) for r in rows.values()}) > 1
            and not all(checked_right(r) for r in rows.values())}
