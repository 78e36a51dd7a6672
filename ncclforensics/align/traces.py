"""Per-collective fingerprint traces as collective streams, for ranks that no log or dump describes.

A trace lists, in issue order, every collective whose result the rank read back: its tag, often its op and
size, and a digest or a sum of the result. That is a stream of its own, but it names no communicator. The
communicator is recovered from the results: every rank of one physical collective reads back the same result,
so the ranks that share a digest (or, lacking digests, a sum) are that collective's members.
Worked example: ranks 0-3 share the digests of the world all-reduces and ranks 0,1 those of their tensor-parallel
group, so rank 0's trace splits into two streams; a drafter collective that rank 1 alone ran still pairs with
rank 0's next one, shares its digest and lands in the same stream, one seq ahead, where the tags disagree.
A record that no shared set, tag or known comm places goes with the ranks sharing its result where those reach
beyond every comm of the trace, else with its neighbours; either is a guess, and each one before a seq may put that
seq one off (`seq_slack`), which the diagnosis widens the root's range by. How the records are grouped into
comms is trace_groups.py's; here the groups become rows, named by what other evidence knows of each comm.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Protocol

import polars as pl

from ..model import EventState, Evidence, FingerprintRow, conform
from ..model.kinds import normalize_op
from .fingerprints import checked_right
from .notes import Note, TracesApart, TracesMixedComms, TracesNameNoComm, TracesUnplaced
from .trace_groups import (MIXED, UNKNOWN, Members, partners_by_tag, record_groups, recurring_with_tails,
                           result_holders, result_key, right_apart)
from .trace_joins import joined_comms


class _Rooted(Protocol):
    """What resting_on_guesses reads of a root (answers.Root; divergence.py imports this module)."""

    comm: str
    seq_range: tuple[int, int | None] | None
    outlier_ranks: list[int]


@dataclass(frozen=True)
class Placed:
    """One trace record as a collective row: its comm, its seq there, and whether only its neighbours put it
    there (no result it shares, and no tag, names its comm); or whether, placed by the traced ranks that share its
    result, it may be of a wider comm that also holds ranks of the job that left no trace (`maybe_wider`); and, where
    that wider comm is one other evidence names and the rank's own word says how far it got there, how many of its
    records at most are that comm's (`wider_room`: what it completed there, for a trace lists results read back)."""

    comm: str
    seq: int
    by_neighbours: bool
    maybe_wider: bool = False
    tag: str | None = None
    wider_room: int | None = None


Guesses = dict[int, tuple[Placed, ...]]  # rank -> its trace's records, in issue order, where any was a guess


def with_trace_rows(evidence: list[Evidence], listed: dict[str, set[int]] | None = None
                    ) -> tuple[list[Evidence], list[Note], Guesses]:
    """`evidence`, with collective rows from the per-collective fingerprints of each rank that no NCCL log or
    Flight Recorder dump describes (watchdog rows are sparse: they do not count as describing), put into a copy of
    the Evidence of the trace's file; notes on how their communicators were named; and, per rank whose trace
    had records placed by their neighbours alone, where each record went (see `seq_slack`). `listed`: group -> the
    ranks PyTorch's counts give it (the members a peer's desync report lists among them:
    enqueue_marks.enqueue_marks)."""
    described = _described_ranks(evidence)
    traced = [f for item in evidence for f in item.fingerprints if f.op is not None]
    mine = sorted({f.rank for f in traced} - described)
    if not mine:
        return evidence, [], {}
    holders, tags_of = result_holders(traced)
    traces: dict[int, list[FingerprintRow]] = {}  # rank -> its records in issue order
    for row in sorted(traced, key=lambda f: (f.rank, f.step, f.op, f.loc.line or 0)):
        traces.setdefault(row.rank, []).append(row)
    last_rows = {r: trace[-1] for r, trace in traces.items()}
    recurring = recurring_with_tails(traced, holders, tags_of, last_rows)
    apart_right = right_apart(traced)
    known = _known_members(evidence, listed or {})
    cut = {f.rank for item in evidence if item.cut is not None for f in item.fingerprints}  # traces cut short
    # Global ranks count from 0: a rank below the highest on record that left nothing is one of the job's too.
    everyone = set(range(max({*traces, *(r for m in known.values() for r in m)}) + 1))
    # Ranks that left no trace: a result the traced ranks share may be of a comm that holds some of them too.
    untraced_ranks = everyone - set(traces)
    rows: dict[str, list[dict]] = {}
    mixed: list[int] = []  # ranks whose traces hold several comms and no digests
    unplaced: list[int] = []  # ranks whose traces share no result and whose comm nothing names
    apart: list[int] = []  # ranks with results of a comm whose other members left no trace and are not known
    guesses: Guesses = {}
    grouped: dict[int, tuple[list[Members], frozenset[int]]] = {}  # rank -> each record's members, the guessed ones
    apart_from_all: dict[int, Members] = {}  # rank -> the one comm holding it, where its trace shares no result
    for rank in mine:
        trace = traces[rank]
        # Comms other evidence puts the rank in whose other members left no trace: a result of one of them is
        # shared with no other trace.
        untraced = [frozenset(m) for m in known.values()
                    if rank in m and len(m) > 1 and not (set(m) - {rank}) & set(traces)]
        placement = record_groups(trace, holders, tags_of, rank, last_rows, untraced,
                            {frozenset(m) for m in known.values()} | recurring,
                            partners_by_tag(rank, holders, tags_of, everyone), apart_right)
        if placement is MIXED:
            mixed.append(rank)
            continue
        groups, guessed = placement if placement is not None else (None, frozenset())
        if groups is None:
            only = _only_comm(rank, known, set(traces))
            groups = None if only is None else [only] * len(trace)
            if only is not None:
                apart_from_all[rank] = only
        if groups is None:
            unplaced.append(rank)
            continue
        grouped[rank] = (groups, guessed)
    opened = _open_comm_of_the_rest(unplaced, known, _listed_whole(evidence), everyone, traces, holders, tags_of)
    if opened is not None:
        # (the ranks it takes in go to it as to the one comm holding them, and it is known with them: named so)
        for rank in unplaced:
            grouped[rank] = ([opened] * len(traces[rank]), frozenset())
            apart_from_all[rank] = opened
        known = {comm: set(opened) for comm in known}
        unplaced = []
    grouped = joined_comms(grouped, traces, holders, tags_of, cut, apart_from_all)
    for rank, (groups, guessed) in grouped.items():
        trace = traces[rank]
        seqs: dict[Members, int] = {}
        names: dict[Members, str] = {}
        if UNKNOWN in groups:
            apart.append(rank)
        placed: list[Placed] = []
        for i, row, members in ((i, row, m) for i, (row, m) in enumerate(zip(trace, groups)) if m is not UNKNOWN):
            seqs[members] = seqs.get(members, 0) + 1
            if members not in names:
                names[members] = comm_named_by(_cut_out(members, trace, groups, known, traces, cut), known)
            comm = names[members]
            holding = _known_wider(members, rank, known, untraced_ranks)
            wider = bool(untraced_ranks) and (grouped_by_traces(comm) or bool(holding)) and i not in guessed
            room = None if grouped_by_traces(comm) or not holding else _completed_in(holding, rank, evidence)
            placed.append(Placed(comm, seqs[members], i in guessed, wider, row.tag, room if wider else None))
            rows.setdefault(row.loc.path, []).append({
                "file": row.loc.path, "line": row.loc.line, "record": row.loc.record, "rank": rank,
                "comm": comm, "seq": seqs[members], "op": normalize_op(row.kind) if row.kind else None,
                "count": row.numel, "state": EventState.COMPLETED.value, "step": row.step, "tag": row.tag,
            })
        if guessed or any(p.maybe_wider for p in placed):
            guesses[rank] = tuple(placed)
    notes: list[Note] = [*([TracesMixedComms(tuple(mixed))] if mixed else []),
                         *([TracesUnplaced(tuple(unplaced))] if unplaced else []),
                         *([TracesApart(tuple(apart))] if apart else [])]
    named = {r["comm"] for found in rows.values() for r in found}
    if any(grouped_by_traces(comm) for comm in named):
        notes.append(TracesNameNoComm())
    out = [replace(item, collectives=_frame(rows.pop(item.path))) if item.path in rows else item for item in evidence]
    return out, notes, guesses


def seq_slack(comm: str, low: int, guesses: Guesses) -> tuple[int, int]:
    """How far the seqs of `comm` from `low` on may be off, down and up, for the records its members' traces put
    in a comm by their neighbours alone: each such record before it in `comm` may be another comm's (its seqs
    are then one lower), and each such record in another comm before the first record of `comm` at `low` or
    later may be this comm's (one higher). Worked example: ranks 48-55 read back a world all-reduce whose result
    63 ranks share once (the traces of a few others were cut), which is no comm the traces name; it goes with
    its neighbours, in the 8 ranks' comm, and every seq after it there may be one too high. The most of any
    rank counts."""
    down = up = 0
    for placed in guesses.values():
        if not any(p.comm == comm for p in placed):
            continue
        at = next((i for i, p in enumerate(placed) if p.comm == comm and p.seq >= low), len(placed))
        down = max(down, sum(1 for p in placed[:at] if p.by_neighbours and p.comm == comm))
        up = max(up, sum(1 for p in placed[:at] if p.by_neighbours and p.comm != comm))
    return down, up


def guessed_comms(comm: str, seq_range: tuple[int, int | None], guesses: Guesses) -> tuple[str, ...]:
    """The other comms a record of `comm` in `seq_range` that only its neighbours put there may be of: every other
    comm its rank's trace places a record in (by a guess too: a result a rank read back with other ranks is of a
    collective of theirs). A rank issues its comms' collectives in any order, so a record no result or tag places is
    as likely any of its comms' as its neighbours' (those on both sides may be of one comm, and it of another); a
    root that rests on it may be a departure in any of them. Worked example: rank 6's trace holds `moe` of its TP
    group, then `dp.retry`, which no other rank read back and whose tag no comm's results carry, then `lm_head` of
    the TP group: `dp.retry` went with its neighbours to the TP group, and may as well be its DP pair's, as `dp`
    earlier in its trace is."""
    low, high = seq_range
    found: set[str] = set()
    for placed in guesses.values():
        if any(p.comm == comm and p.by_neighbours and p.seq >= low and (high is None or p.seq <= high)
               for p in placed):
            found |= {p.comm for p in placed if p.comm != comm}
    return tuple(sorted(found))


def resting_on_guesses(roots: Iterable[_Rooted], guesses: Guesses) -> frozenset[str]:
    """The comms of `roots` whose outliers' departure may be a record that only its neighbours put there: a record
    of an outlier's trace in the root's comm and range, placed by a guess. Were it another comm's, the root's
    records would not show that departure at all (it may be where the rank issued a collective of that other comm
    among this one's), so such a root weighs less than one whose records their results place. Worked example (the
    one of guessed_comms): rank 6's `dp.retry` went with its neighbours to the TP group, where it reads as an extra
    collective of rank 6's; it may as well be of rank 6's DP pair, and the TP group's records then agree."""
    found = set()
    for root in roots:
        if root.seq_range is None:
            continue
        low, high = root.seq_range
        if any(p.comm == root.comm and p.by_neighbours and p.seq >= low and (high is None or p.seq <= high)
               for rank in root.outlier_ranks for p in guesses.get(rank, ())):
            found.add(root.comm)
    return frozenset(found)


def wider_slack(comm: str, low: int, guesses: Guesses) -> int:
    """How far the seqs of `comm` from `low` on may be too high, for the records its members' traces put in it
    that may be of a wider comm holding ranks that left no trace (`Placed.maybe_wider`): each one before seq `low`
    may be that comm's, one seq fewer of this one. A record of the tag the rank gave seq `low` is not counted: a
    program issues a tagged collective on one comm. Worked example: ranks 4-7 alone left traces and each reads back
    `dp.num_tokens.0` and then `mlp`, every result shared by the four: `dp.num_tokens.0` may be a world collective
    of all eight ranks, so `mlp` is seq 1 or 2 of the four's comm. The most of any rank counts."""
    slack = 0
    for placed in guesses.values():
        at = next((i for i, p in enumerate(placed) if p.comm == comm and p.seq >= low), None)
        if at is None:
            continue
        here = placed[at].tag
        maybe = [p for p in placed[:at] if p.comm == comm and p.maybe_wider and (here is None or p.tag != here)]
        rooms = [p.wider_room for p in maybe]
        room = max(rooms) if rooms and None not in rooms else len(maybe)  # (the rank read back no more of it)
        slack = max(slack, min(len(maybe), room))
    return slack


def _known_wider(members: Members, rank: int, known: dict[str, set[int]], untraced: set[int]) -> list[str]:
    """The comms other evidence names that hold the rank and every one of `members`, and beyond them only ranks that
    left no trace: a result `members` alone read back may be such a comm's, its other members' records lost.
    Worked example: PyTorch's logs put ranks 0-7 in the world comm and ranks 4-7 in a TP comm; ranks 4-7 alone
    left traces, so a result the four share may be a world collective's as well as the TP comm's."""
    return sorted(comm for comm, ranks in known.items()
                  if rank in ranks and ranks > members and ranks - members <= untraced)


def _completed_in(comms: list[str], rank: int, evidence: list[Evidence]) -> int | None:
    """How many collectives the rank completed in all of `comms` together, by its own word (the most it reported
    in each), where it reported on every one; else None. A record of a trace is a result read back, so completed:
    no more of its records than that are those comms'."""
    said: dict[str, int] = {}
    for item in evidence:
        for report in item.progress:
            if report.rank == rank and report.comm in comms and report.last_completed is not None:
                said[report.comm] = max(said.get(report.comm, 0), report.last_completed)
    return sum(said.values()) if set(said) == set(comms) else None


def _described_ranks(evidence: list[Evidence]) -> set[int]:
    ranks: set[int] = set()
    for item in evidence:
        # Collectives that are the format's own records describe a stream; rows made from timeout lines (or
        # from traces) do not.
        if item.collectives.height == 0 or (item.facts is not None and item.facts.records != "collectives"):
            continue
        ranks.update(r for r in item.collectives.get_column("rank").unique().to_list() if r is not None)
    return ranks


def _cut_out(members: Members, trace: list[FingerprintRow], groups: list[Members], known: dict[str, set[int]],
             traces: dict[int, list[FingerprintRow]], cut: set[int]) -> Members:
    """The members of the one comm other evidence names that holds `members` and whose other members' traces were
    cut short before this trace's first record of `members`, or share none of its results (what they read back
    past the cut is not on record, so they share none of its results; what they read back before it, apart, they
    read back in a collective of their own: departed); else `members`. Worked example: PyTorch's logs put ranks
    0-7 in the world comm, and the traces of ranks 0 and 1 end at a cut after their first record: ranks 2-7 alone
    share the world results, and the comm they name is the world's."""
    first = trace[groups.index(members)]
    at = (first.step, first.op if first.op is not None else -1)
    theirs = {result_key(row) for row, m in zip(trace, groups) if m == members} - {None}

    def cut_before(rank: int) -> bool:
        last = traces[rank][-1] if rank in traces else None
        return rank in cut and last is not None and ((last.step, last.op if last.op is not None else -1) < at
                                                     or not theirs & {result_key(row) for row in traces[rank]})
    wider = [frozenset(m) for m in known.values() if set(m) > members and all(cut_before(r) for r in set(m) - members)]
    return wider[0] if len(set(wider)) == 1 else members


def _known_members(evidence: list[Evidence], listed: dict[str, set[int]]) -> dict[str, set[int]]:
    """comm -> the global ranks other evidence puts in it (collective rows, communicator configs, a rank's own
    word on how far it got in it or that its watchdog fired there, and the members a peer's desync report lists),
    less the ranks whose own word is that they enqueued nothing there (a comm left with none is dropped)."""
    known: dict[str, set[int]] = {}
    idle: set[tuple[str, int]] = set()  # (comm, rank) where the rank's own word is that it enqueued no work there
    for item in evidence:
        for said in (*item.progress, *item.watchdog):
            if said.comm is not None and said.rank is not None:
                known.setdefault(said.comm, set()).add(said.rank)
                if said.last_enqueued is not None and said.last_enqueued < 0:
                    idle.add((said.comm, said.rank))
        if item.collectives.height:
            pairs = item.collectives.select("comm", "rank").drop_nulls().unique()
            for comm, rank in pairs.iter_rows():
                known.setdefault(comm, set()).add(rank)
        for info in item.comm_infos:
            if info.ranks:
                known.setdefault(info.comm, set()).update(info.ranks)
    # A desync report lists every member of its group, those whose own lines never name it too.
    for group, ranks in listed.items():
        if group in known:
            known[group] |= set(ranks)
    # A group where a rank enqueued no work at all (`last enqueued NCCL work: -1`: the default group of a job whose
    # collectives all go through others) holds none of that rank's collectives: it names none of its records.
    for comm, rank in idle:
        if comm in known:
            known[comm].discard(rank)
    return {comm: ranks for comm, ranks in known.items() if ranks}


def _only_comm(rank: int, known: dict[str, set[int]], traced: set[int]) -> Members | None:
    """With no result shared, the one comm other evidence puts the rank in; with no comm known at all, one comm
    of every traced rank (a trace of a job with one communicator); else None."""
    # (comms of one set of members, a process group and its NCCL communicator, say, are one set)
    holding = {frozenset(members) for members in known.values() if rank in members}
    if len(holding) == 1:
        return next(iter(holding))
    if not known:
        return frozenset(traced)
    return None


def _listed_whole(evidence: list[Evidence]) -> set[str]:
    """The comms a source lists whole (a communicator config's ranks or size): no rank beyond them is a member."""
    return {info.comm for item in evidence for info in item.comm_infos if info.ranks or info.size}


def _open_comm_of_the_rest(apart: list[int], known: dict[str, set[int]], whole: set[str], everyone: set[int],
                           traces: dict[int, list[FingerprintRow]], holders: dict[tuple, set[int]],
                           tags_of: dict[tuple, set[str | None]]) -> Members | None:
    """The one comm other evidence names, with the ranks whose traces share no result and whom no comm on record
    holds (`apart`), where it holds every other rank of the job; else None. Such a comm is known by its members'
    own word alone (a watchdog line, a count), which names none that said nothing of it, so it is no list of all
    of them (`whole`: comms a source lists whole); and where its traced members read back wrong, alike, a result
    they gave one tag, the collective they ran alike mixed with one a member beyond them issued. A job whose
    evidence names one comm, every rank beyond it apart, is a job of one communicator as far as the evidence goes,
    as one that names none is (_only_comm). Worked example: ranks 1-3 time out in process group 1, rank 0's log
    says nothing of it; rank 0 skipped the group's first collective, so every result of its trace is its own, and
    ranks 1-3 share theirs, read back wrong: rank 0 is the group's fourth member, where its records part from theirs
    at seq 1 (left out, ranks 1-3 would part from no one)."""
    comms = {frozenset(ranks) for ranks in known.values()}  # (a process group and its NCCL comm are one set)
    if not apart or len(comms) != 1 or whole & set(known):
        return None
    members, = comms
    if members | set(apart) != everyone:
        return None
    rows = [row for rank in sorted(members & set(traces)) for row in traces[rank] if checked_right(row) is False]
    wrong_alike = any(len(holders.get(key, ())) > 1 and holders[key] <= members and len(tags_of[key]) == 1
                      for key in map(result_key, rows))
    return members | set(apart) if wrong_alike else None


TRACE_GROUP = "[ranks="  # how a comm no evidence but the traces' alike results names begins


def comm_named_by(members: Members, known: dict[str, set[int]]) -> str:
    """The comm whose known members are exactly these (an NCCL hash before a process-group name), else the ranks."""
    same = [comm for comm, ranks in known.items() if ranks == members]
    hashed = [comm for comm in same if comm.startswith("0x")]
    for choice in (hashed, same):
        if len(choice) == 1:
            return choice[0]
    return TRACE_GROUP + ",".join(map(str, sorted(members))) + "]"


def grouped_by_traces(comm: str) -> bool:
    """Whether a comm is only the ranks whose traces read back alike results (no other evidence names it)."""
    return comm.startswith(TRACE_GROUP)


def _frame(rows: list[dict]) -> pl.DataFrame:
    schema = {"line": pl.Int64, "record": pl.Int64, "count": pl.Int64, "step": pl.Int64, "seq": pl.Int64,
              "rank": pl.Int64}
    return conform(pl.DataFrame(rows, schema_overrides=schema))
