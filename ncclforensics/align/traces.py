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
seq one off (`seq_slack`), which the diagnosis widens the root's range by.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import polars as pl

from ..model import EventState, Evidence, FingerprintRow, conform
from ..model.kinds import normalize_op
from .fingerprints import checked_right
from .notes import Note, TracesApart, TracesMixedComms, TracesNameNoComm, TracesUnplaced

Members = frozenset[int]
MIXED: list[Members] = []  # a trace of several comms that its sums cannot split
UNKNOWN: Members = frozenset({-1})  # a record of a comm whose other members left no trace and are not known
NOT_APART: Members = frozenset()  # a tag other ranks' groups do not place


@dataclass(frozen=True)
class Placed:
    """One trace record as a collective row: its comm, its seq there, and whether only its neighbours put it
    there (no result it shares, and no tag, names its comm); or whether, placed by the traced ranks that share its
    result, it may be of a wider comm that also holds ranks of the job that left no trace (`maybe_wider`)."""

    comm: str
    seq: int
    by_neighbours: bool
    maybe_wider: bool = False
    tag: str | None = None


Guesses = dict[int, tuple[Placed, ...]]  # rank -> its trace's records, in issue order, where any was a guess


def with_trace_rows(evidence: list[Evidence], listed: dict[str, set[int]] | None = None
                    ) -> tuple[list[Evidence], list[Note], Guesses]:
    """`evidence`, with collective rows from the per-collective fingerprints of each rank that no NCCL log or
    Flight Recorder dump describes (watchdog rows are sparse: they do not count as describing), put into a copy of
    the Evidence of the trace's file; notes on how their communicators were named; and, per rank whose trace
    had records placed by their neighbours alone, where each record went (see `seq_slack`). `listed`: group -> the
    ranks PyTorch's counts give it (the members a peer's desync report lists among them: watchdog.enqueue_marks)."""
    described = _described_ranks(evidence)
    traced = [f for item in evidence for f in item.fingerprints if f.op is not None]
    mine = sorted({f.rank for f in traced} - described)
    if not mine:
        return evidence, [], {}
    holders, tags_of = _holders(traced)
    traces: dict[int, list[FingerprintRow]] = {}  # rank -> its records in issue order
    for row in sorted(traced, key=lambda f: (f.rank, f.step, f.op, f.loc.line or 0)):
        traces.setdefault(row.rank, []).append(row)
    last_rows = {r: trace[-1] for r, trace in traces.items()}
    recurring = _recurring_with_tails(traced, holders, tags_of, last_rows)
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
    for rank in mine:
        trace = traces[rank]
        # Comms other evidence puts the rank in whose other members left no trace: a result of one of them is
        # shared with no other trace.
        untraced = [frozenset(m) for m in known.values()
                    if rank in m and len(m) > 1 and not (set(m) - {rank}) & set(traces)]
        placement = _groups(trace, holders, tags_of, rank, last_rows, untraced,
                            {frozenset(m) for m in known.values()} | recurring,
                            _partners_by_tag(rank, holders, tags_of, everyone))
        if placement is MIXED:
            mixed.append(rank)
            continue
        groups, guessed = placement if placement is not None else (None, frozenset())
        if groups is None:
            only = _only_comm(rank, known, set(traces))
            groups = None if only is None else [only] * len(trace)
        if groups is None:
            unplaced.append(rank)
            continue
        grouped[rank] = (groups, guessed)
    grouped = _joined_by_cut_traces(grouped, traces, holders, cut)
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
            wider = bool(untraced_ranks) and grouped_by_traces(comm) and i not in guessed
            placed.append(Placed(comm, seqs[members], i in guessed, wider, row.tag))
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
    """The other comms a record of `comm` in `seq_range` that only its neighbours put there may be of: those of the
    nearest records on either side of it in its trace that were not guesses. A root that rests on such a record
    may be a departure in any of them. Worked example: rank 0's trace holds `moe` of its TP pair, then
    `dp.retry`, which no other rank read back and whose tag no comm's results carry, then `dp` of its DP pair:
    `dp.retry` went with `moe` to the TP pair, and may as well be the DP pair's, as `dp` is."""
    low, high = seq_range
    found: set[str] = set()
    for placed in guesses.values():
        for i, p in enumerate(placed):
            if p.comm != comm or not p.by_neighbours or p.seq < low or (high is not None and p.seq > high):
                continue
            sides = (reversed(placed[:i]), placed[i + 1:])
            found |= {q.comm for side in sides for q in [next((q for q in side if not q.by_neighbours), None)]
                      if q is not None and q.comm != comm}
    return tuple(sorted(found))


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
        slack = max(slack, sum(1 for p in placed[:at] if p.comm == comm and p.maybe_wider
                               and (here is None or p.tag != here)))
    return slack


def _described_ranks(evidence: list[Evidence]) -> set[int]:
    ranks: set[int] = set()
    for item in evidence:
        # Collectives that are the format's own records describe a stream; rows made from timeout lines (or
        # from traces) do not.
        if item.collectives.height == 0 or (item.facts is not None and item.facts.records != "collectives"):
            continue
        ranks.update(r for r in item.collectives.get_column("rank").unique().to_list() if r is not None)
    return ranks


def _key(row: FingerprintRow) -> tuple | None:
    """What the members of one physical collective share: its digest, else its sum (not its step: ranks
    misaligned across a step boundary file one collective under two steps). A sum checked right goes with its
    tag: the members of one collective read back one result, and where it is what a consistent world gives, each
    of them ran the collective the program has there, under one tag (a misaligned pairing mixes two collectives'
    data, which checks wrong); so ranks that read back one right sum under two tags ran two collectives whose sums
    coincide (TP groups whose sums are multiples of each other's), not one pairing of a comm holding both."""
    if row.digest is not None:
        return ("digest", row.digest)
    if row.sum is not None and not math.isnan(row.sum):
        return ("sum", row.sum, row.tag) if checked_right(row) else ("sum", row.sum)
    return None


def _holders(traced: list[FingerprintRow]) -> tuple[dict[tuple, set[int]], dict[tuple, set[str | None]]]:
    """Per result: the ranks that read it back, and the tags they gave it."""
    holders: dict[tuple, set[int]] = {}
    tags_of: dict[tuple, set[str | None]] = {}
    for row in traced:
        key = _key(row)
        if key is not None:
            holders.setdefault(key, set()).add(row.rank)
            tags_of.setdefault(key, set()).add(row.tag)
    return holders, tags_of


def _groups(trace: list[FingerprintRow], holders: dict[tuple, set[int]], tags_of: dict[tuple, set[str | None]],
            rank: int, last_rows: dict[int, FingerprintRow], untraced: list[Members] = (),
            known: set[Members] = frozenset(), by_tag_elsewhere: dict[str, Members | None] | None = None
            ) -> tuple[list[Members], frozenset[int]] | list[Members] | None:
    """The members of each record's collective, and the indices of the records placed by their neighbours alone;
    None when no record shares its result with another rank; MIXED when sums, lacking digests, point to several
    comms.

    A record's members are the ranks that share its result (for sums, where that set recurs in the trace), unless
    they are the tail of a wider set whose other members' traces stopped sooner. Otherwise (a coincidence of sums,
    partners whose traces are missing) the record goes to the one set its tag went to; failing that, to the one
    such set that holds every rank sharing it; failing that, to the set of the record before it (the one after, at
    the start): neighbours are usually of one comm, and when that guess is wrong every rank of the comm that
    recorded it makes the same one. A result shared with no one, whose tag no comm's results carry, goes to the
    one comm in `untraced` (one other evidence puts the rank in, whose other members left no trace) where there is
    one: its partners are those that left nothing to share. Failing that, where other ranks' results of its tag
    are shared in groups that leave this rank out (`by_tag_elsewhere`: its tensor-parallel peers traced nothing),
    it goes to a group of its own with the ranks no such group holds, where they are as many as its peers; where
    they are not, a digest's record is UNKNOWN (of a comm whose other members left no trace and are not known: a
    digest is one physical collective's, so it is of no comm whose other members traced it), and left out. A result
    shared with no one that only the one comm holding the rank would place follows its tag where that tag went with
    ranks beyond every comm elsewhere in the trace (a guess, as that one is)."""
    keys = [_key(row) for row in trace]
    own = [frozenset(holders.get(key, ())) | {rank} if key is not None else frozenset({rank}) for key in keys]
    # A result whose holders gave it one tag is one collective they all issued; one given several tags is a
    # misaligned pairing (within one comm) or a coincidence of sums (across comms): it names comms only where
    # nothing else does.
    alike = [key is not None and len(tags_of.get(key, ())) == 1 for key in keys]
    shared = [i for i, members in enumerate(own) if len(members) > 1]
    digests = any(row.digest for row in trace)
    # A digest is one physical collective's, misaligned or not: every shared one names a comm. A sum given several
    # tags names one only as the wider set of a comm its aligned results name (a misaligned pairing in it), or as a
    # set that shares two or more results checked wrong (recurring misaligned pairings: `paired`), unless it is
    # part of a set aligned results name (the counts split that comm's collective).
    pool = [i for i in shared if alike[i]]
    paired = _paired_wrong(trace, own, alike, shared) if not digests else set()
    if digests or not pool:
        pool = shared
    else:
        named = {own[i] for i in pool}
        pool += [i for i in shared if not alike[i] and (any(own[i] > members for members in named)
                                                        or own[i] in paired and not any(own[i] < m for m in named))]
    # (the tags a misaligned pairing's holders gave it are each issued on its comm: they count as that comm's)
    confirmed = [one or members in paired for one, members in zip(alike, own)]
    seen: dict[Members, int] = {}
    for i in pool:
        seen[own[i]] = seen.get(own[i], 0) + 1
    if not seen:
        return None
    # A digest is one physical collective's; a sum may recur by coincidence, so a set of ranks that shares sums
    # once is no comm, unless other evidence (`known`) gives a comm just those members.
    comms = set(seen) if digests else {m for m, n in seen.items() if n > 1 or m in known} or set(seen)
    # Where some members' traces stop sooner (cut, or the rank hung), the records after their last one are shared
    # by the rest only: that subset is the tail of the wider comm, not a comm of its own. A sub-communicator's
    # other members carry on with records of their own.
    at = {key: i for i, key in enumerate(keys) if key is not None}
    # A wider set that shared a result once under a tag of a comm it holds (that comm's collective, paired there
    # with others) is that comm, where its other ranks' traces all ended before this trace's first record of it:
    # the comm's later records are its tail's alone. Worked example: ranks 1 and 2 each ran a drafter all-reduce
    # at seq 1, which paired with the layer all-reduce of ranks 0 and 3 (one sum, tags `mtp` and `mlp`); rank 1's
    # trace ends there (cut), so ranks 0, 2 and 3 alone share the `mlp` sums of seq 2 on: the four are the comm,
    # not those three. (A sub-communicator's own tags are none of the wider set's: a TP group stays one.)
    if not digests:
        tagged: dict[Members, set[str | None]] = {}
        for key, members in zip(keys, own):
            tagged.setdefault(members, set()).update(tags_of.get(key, ()) if key is not None else ())
        comms |= {m for m in seen if m not in comms and any(
            c < m and tagged.get(c, set()) & tagged.get(m, set()) - {None}
            and _stopped_before(m - c, c, trace, own, at, last_rows) for c in comms)}
    tails = {m: max(wider, key=len) for m in comms
             if (wider := [w for w in comms if m < w and _stopped_before(w - m, m, trace, own, at, last_rows)])}
    comms -= set(tails)
    given = [tags_of.get(key, set()) for key in keys]
    if len(comms) > 1 and not digests:
        # A tail's records are its wider comm's: their tags, and the misaligned pairings that recur in them, are
        # that comm's too, and a split that carries them is of that comm.
        as_wider = [tails.get(members, members) for members in own]
        comms = _one_comm_of_sums(comms, trace, _with_tails(trace, as_wider, alike, comms, at, last_rows), alike,
                                  given, {tails.get(members, members) for members in paired})
        if comms is None:
            return MIXED
    by_tag: dict[str | None, set[Members]] = {}
    for row, members, one, tags in zip(trace, own, confirmed, given):
        if members in comms and one:
            for tag in {row.tag} if members not in paired else tags | {row.tag}:
                by_tag.setdefault(tag, set()).add(members)
    placed: list[Members | None] = []
    beyond: set[int] = set()  # records that went with the ranks sharing their result, which no comm here holds
    alone: set[int] = set()  # records shared with no one, placed only by the one comm that holds the rank
    for i, (row, members, one) in enumerate(zip(trace, own, confirmed)):
        if members in comms and one:
            # A comm of its own whose results of this tag were a wider comm's before that comm's other members'
            # traces stopped: the tail of the wider one (a program issues a tagged collective on one comm).
            tail = [wider for wider in by_tag.get(row.tag, ()) if wider > members
                    and all(_last_before(r, i, trace, at, last_rows) for r in wider - members)]
            placed.append(tail[0] if len(tail) == 1 and row.tag is not None else members)
            continue
        holding = [c for c in comms if members <= c]
        tagged = list(by_tag.get(row.tag, ())) if row.tag is not None else []
        # (a result shared under several tags by ranks that are no comm is a coincidence of sums: shared by none)
        unshared = not tagged and (members == {rank} or not one and members not in comms)
        apart = (by_tag_elsewhere or {}).get(row.tag, NOT_APART) if unshared and not untraced else NOT_APART
        if apart is None and digests:
            # Its tag's results are others' in groups that leave the rank out, and a digest no trace shares is of
            # no comm whose other members traced it: a comm of peers that left no trace, which is not known.
            placed.append(UNKNOWN)
            continue
        # A tag names the collective the rank issued, and so its comm; a sum shared beyond it may be a coincidence.
        placed.append(tagged[0] if len(tagged) == 1 else members if members in comms else
                      untraced[0] if unshared and len(untraced) == 1 else apart if apart else
                      holding[0] if len(holding) == 1 else None)
        if placed[-1] is None and len(members) > 1 and not holding:
            # Ranks beyond every comm of the trace read back its result: likelier one collective of theirs (a comm
            # no result of this trace names twice) than its neighbours' comm, where their peers did not read it.
            beyond.add(i)
            placed[-1] = members
        elif unshared and members == {rank} and not untraced and not apart and len(holding) == 1:
            alone.add(i)
    # A result shared with no one, which only the one comm holding the rank put in it, whose tag went with ranks
    # beyond every comm elsewhere in the trace: its partners there left no record of it (their traces stopped
    # sooner), so it follows its tag, a guess as that one is.
    went = {}
    for i in beyond:
        went.setdefault(trace[i].tag, set()).add(placed[i])
    for i in alone:
        if trace[i].tag is not None and len(went.get(trace[i].tag, ())) == 1:
            placed[i] = next(iter(went[trace[i].tag]))
            beyond.add(i)
    first = next((m for m in placed if m is not None and m is not UNKNOWN), next(iter(comms)))
    out: list[Members] = []
    before = first
    for members in placed:
        out.append(members if members is not None else before)
        before = out[-1] if out[-1] is not UNKNOWN else before
    return out, frozenset(i for i, members in enumerate(placed) if members is None) | beyond


def _joined_by_cut_traces(grouped: dict[int, tuple[list[Members], frozenset[int]]],
                          traces: dict[int, list[FingerprintRow]], holders: dict[tuple, set[int]], cut: set[int]
                          ) -> dict[int, tuple[list[Members], frozenset[int]]]:
    """`grouped`, with each comm widened by the ranks whose traces were cut short and whose every result is one of
    the comm's records (in some trace) that they read back with its members: they ran its collectives with them until
    their files stop, so what the members read back after that, without them, says nothing of them. Their own records
    go to the wider comm, in every trace (a comm is one set of ranks). Worked example: ranks 0 and 2 issued `lm_head`
    first in a 4-rank comm and read back one result; rank 0's trace is cut after that record, so the comm's later
    results are shared by ranks 1-3 alone, and rank 0's one record, shared with rank 2 alone, would make a comm of
    the two: both go to the comm of all four, where rank 0's record parts it from ranks 1 and 3 as rank 2's does."""
    placed: dict[Members, set[tuple]] = {}  # comm -> the results its records hold, over every trace
    for rank, (groups, _) in grouped.items():
        for row, members in zip(traces[rank], groups):
            key = _key(row)
            if key is not None and members is not UNKNOWN:
                placed.setdefault(members, set()).add(key)
    wider: dict[Members, Members] = {}
    for members, keys in placed.items():
        joining = {r for key in keys for r in holders.get(key, ()) if r not in members and r in cut and r in traces
                   and all(_key(row) in keys for row in traces[r] if _key(row) is not None)}
        if joining:
            wider[members] = members | joining
    if not wider:
        return grouped
    out: dict[int, tuple[list[Members], frozenset[int]]] = {}
    for rank, (groups, guessed) in grouped.items():
        joined = [(placed[m], w) for m, w in wider.items() if rank in w and rank not in m]  # (its results, comm)
        out[rank] = ([next((w for keys, w in joined if _key(row) in keys), wider.get(m, m))
                      for row, m in zip(traces[rank], groups)], guessed)
    return out


def _with_tails(trace: list[FingerprintRow], own: list[Members], alike: list[bool], comms: set[Members],
                at: dict[tuple, int], last_rows: dict[int, FingerprintRow]) -> list[Members]:
    """`own`, with each aligned record of a subset of a wider comm given to the wider one where the wider one's
    aligned records carry its tag and every rank the subset lacks recorded its last result before it: the tail of
    the wider comm (its other members stopped), not the subset's own. Worked example: ranks 0-3 share a world
    all-reduce `dp` each step and ranks 2, 3 a TP group; ranks 0 and 1 hang after step 1, so ranks 2 and 3 alone
    share step 2's `dp`: that record is the world's, and the TP group's own tags are its layers' alone."""
    tags: dict[Members, set[str | None]] = {}
    for row, members, one in zip(trace, own, alike):
        if members in comms and one:
            tags.setdefault(members, set()).add(row.tag)
    out = list(own)
    for i, (row, members, one) in enumerate(zip(trace, own, alike)):
        if not one or members not in comms or row.tag is None:
            continue
        wider = [w for w in comms if w > members and row.tag in tags.get(w, ())
                 and all(_last_before(r, i, trace, at, last_rows) for r in w - members)]
        if len(wider) == 1:
            out[i] = wider[0]
    return out


def _recurring_with_tails(traced: list[FingerprintRow], holders: dict[tuple, set[int]],
                          tags_of: dict[tuple, set[str | None]], last_rows: dict[int, FingerprintRow]) -> set[Members]:
    """The sets of ranks that share one sum under a tag and whose tail shares another of that tag: the set's ranks
    but those whose traces end at an earlier step (they hung, or were cut). A set sharing sums once is no comm
    by itself (sums may coincide), but a comm's tagged collective recurs, and where some of its ranks stopped
    first the next one is their tail's alone. Worked example: a job of two steps issues its world all-reduce
    once a step; ranks 16-23 hang in step 1 and record it once, so every other rank's trace holds its result
    once shared by all 64 ranks and once by the 56 that went on: the 64 are a comm."""
    steps: dict[tuple, set[int]] = {}
    for row in traced:
        key = _key(row)
        if key is not None and row.step is not None:
            steps.setdefault(key, set()).add(row.step)
    by_tag: dict[str | None, list[tuple[Members, int]]] = {}
    for key, ranks in holders.items():
        tags = tags_of.get(key, set())
        if len(ranks) > 1 and len(tags) == 1 and None not in tags and len(steps.get(key, ())) == 1:
            by_tag.setdefault(next(iter(tags)), []).append((frozenset(ranks), next(iter(steps[key]))))

    def ended_before(rank: int, step: int) -> bool:
        last = last_rows.get(rank)
        return last is not None and last.step is not None and last.step < step
    return {wider for results in by_tag.values() for wider, _ in results
            if any(tail < wider and all(ended_before(r, step) for r in wider - tail) for tail, step in results)}


def _partners_by_tag(rank: int, holders: dict[tuple, set[int]], tags_of: dict[tuple, set[str | None]],
                     everyone: set[int]) -> dict[str, Members | None]:
    """tag -> the comm of the rank's results of that tag that it shares with no trace, where the other ranks share
    the tag's results in groups of one size that all leave it out: it with the ranks those groups leave out, where
    they are one group's worth; None where they are not (its peers are not known)."""
    groups: dict[str, set[Members]] = {}
    for key, ranks in holders.items():
        tags = tags_of.get(key, set())
        if len(ranks) > 1 and len(tags) == 1 and None not in tags:
            groups.setdefault(next(iter(tags)), set()).add(frozenset(ranks))
    # the ranks in groups of each size that leave the rank out, over every tag (a tag's own groups may miss one whose
    # sums of it coincide with another's)
    held: dict[int, set[int]] = {}
    for sets in groups.values():
        for m in sets:
            if rank not in m:
                held.setdefault(len(m), set()).update(m)
    out: dict[str, Members | None] = {}
    for tag, sets in groups.items():
        sizes = {len(m) for m in sets}
        if any(rank in m for m in sets) or len(sizes) != 1:
            continue
        size = sizes.pop()
        free = everyone - held[size] - {rank}
        # (else its peers are not known: None)
        out[tag] = frozenset(free | {rank}) if len(free) == size - 1 else None
    return out


def _paired_wrong(trace: list[FingerprintRow], own: list[Members], alike: list[bool],
                  shared: list[int]) -> set[Members]:
    """The sets of ranks that read back, with this rank, two or more results it checked wrong under several tags:
    misaligned pairings, each one collective whose members all read back its one mixed result, whatever tags they
    gave it. Such a set is a comm even where no aligned result names it (a comm misaligned from its first
    collective); one such result alone may be a coincidence of sums. Worked example: rank 0 left out two drafter
    collectives of its tensor-parallel group {0, 1}; its next two pair with rank 1's drafter ones, and each pair
    reads back one wrong sum under the tags `mlp`/`mtp.0` and `moe`/`mtp.1`: {0, 1} is a comm."""
    counts: dict[Members, int] = {}
    for i in shared:
        if not alike[i] and checked_right(trace[i]) is False:
            counts[own[i]] = counts.get(own[i], 0) + 1
    return {members for members, n in counts.items() if n > 1}


def _one_comm_of_sums(comms: set[Members], trace: list[FingerprintRow], own: list[Members], alike: list[bool],
                      given: list[set[str | None]], paired: set[Members] = frozenset()) -> set[Members] | None:
    """Several sets of ranks sharing sums, as the comms they are: ranks whose counts differ in a misaligned pairing
    each read back their own sum, which splits one collective's members, but the records of such a split carry tags
    the whole set's records carry too (`given`: per record, every tag its result's holders gave it; a misaligned
    result of the whole set carries the tags of each collective paired in it, so a split right after the pairing
    went misaligned, before the whole set recorded those tags aligned, carries them too). A split goes to the one
    wider set whose tags it carries (from the widest down); a set that carries no wider set's tags is a comm of its
    own (a tensor-parallel group inside the world), and where that leaves several comms, each must be one of its
    own: every tag their aligned results carry is shared by one of them alone (a program issues each tagged
    collective on one comm). Sums of two groups can also be equal by design (replicas fed alike), so a trace whose
    sets do not fit so cannot be split by its sums: None. A set of `paired` (misaligned pairings that recur,
    _paired_wrong) confirms every tag its results were given, as an aligned result confirms its one tag. Worked
    example: in the tensor-parallel comm of ranks 56-63 rank 57 issues `lm_head` before `mlp` in step 0, so the
    other seven share two wrong sums rank 57 does not; rank 56's trace holds its data-parallel comm, the 8 ranks
    (step 1, aligned) and the seven, whose tags are the 8 ranks': the seven are the 8 ranks' comm split, beside the
    data-parallel one, and the tags part rank 57 from the seven at seq 1."""
    tags: dict[Members, set[str | None]] = {}
    sets_of_tag: dict[str | None, set[Members]] = {}
    for row, members, one, tagged in zip(trace, own, alike, given):
        tags.setdefault(members, set()).add(row.tag)
        if members in comms and (one or members in paired):
            for tag in tagged | {row.tag} if members in paired else {row.tag}:
                sets_of_tag.setdefault(tag, set()).add(members)
    shared = [(row.tag, members, tagged) for row, members, tagged in zip(trace, own, given) if len(members) > 1]

    def unconfirmed(confirmed: dict[str | None, set[Members]]) -> bool:
        # A shared result whose tag no set confirms, unless its holders gave it several tags (a misaligned pairing:
        # each collective paired in it was issued on its comm) of which those confirmed name one set holding every
        # holder: the pairing is of that comm, whatever tag this rank gave its side (an extra collective of its own).
        return any(tag not in confirmed and len({m for t in tagged - {None} for m in confirmed.get(t, ())
                                                 if members <= m}) != 1 for tag, members, tagged in shared)
    if (None not in sets_of_tag and not unconfirmed(sets_of_tag)
            and all(len(sets) == 1 for sets in sets_of_tag.values())):
        # Every tag's results are shared by one set of ranks, each time: a program issues each tagged collective
        # on one comm, so the sets are comms (replicas fed alike would share a tag's sums with both sets). A
        # result shared under a tag no aligned result confirms (a coincidence of sums across comms, a misaligned
        # pairing) could be either's: then the sums cannot split the trace.
        return comms

    def before(m: Members, whole: Members) -> set[str | None]:
        # the tags of the whole set's results before the set's first record: a split that starts right after a
        # misaligned result carries that result's tags (a later one may be a coincidence of sums across comms)
        first = own.index(m)
        return {t for members, g in zip(own[:first], given[:first]) if members == whole for t in g} - {None}

    def mixed_in(whole: Members) -> set[str | None]:
        # the tags of the whole set's misaligned results: each collective paired in one was issued on its comm
        return {t for members, g, one in zip(own, given, alike) if members == whole and not one for t in g} - {None}
    # From the widest sets down, each set goes to the one wider comm whose tags it carries (a split of it); a set
    # that carries no wider comm's tags is a comm of its own (a tensor-parallel group inside the world).
    fold: dict[Members, Members] = {}
    for m in sorted(comms, key=len, reverse=True):
        wider = {fold[w] for w in comms
                 if m < w and tags.get(m, set()) & (tags.get(w, set()) - {None} | before(m, w) | mixed_in(w))}
        if len(wider) > 1:
            return None
        fold[m] = wider.pop() if wider else m
    kept = {fold[m] for m in comms}
    if len(kept) > 1:
        # several comms: each must be one of its own, every tag its aligned results carry shared by it alone
        folded: dict[str | None, set[Members]] = {}
        for tag, sets in sets_of_tag.items():
            folded.setdefault(tag, set()).update(fold[m] for m in sets)
        if None in folded or unconfirmed(folded) or any(len(sets) != 1 for sets in folded.values()):
            return None
    return kept


def _stopped_before(gone: Members, subset: Members, trace: list[FingerprintRow], own: list[Members],
                    at: dict[tuple, int], last_rows: dict[int, FingerprintRow]) -> bool:
    """Whether every rank of `gone` recorded its last result before this trace's first record of `subset`."""
    first = own.index(subset)
    return all(_last_before(r, first, trace, at, last_rows) for r in gone)


def _last_before(rank: int, index: int, trace: list[FingerprintRow], at: dict[tuple, int],
                 last_rows: dict[int, FingerprintRow]) -> bool:
    """Whether `rank` recorded its last result before this trace's record `index`: as a result this trace shares,
    or, where it shares none of theirs (their last was in another comm), at an earlier step (the ranks of one job
    count steps alike)."""
    last = last_rows.get(rank)
    if last is None:
        return False
    key = _key(last)
    if key in at:
        return at[key] < index
    return last.step is not None and trace[index].step is not None and last.step < trace[index].step


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
    theirs = {_key(row) for row, m in zip(trace, groups) if m == members} - {None}

    def cut_before(rank: int) -> bool:
        last = traces[rank][-1] if rank in traces else None
        return rank in cut and last is not None and ((last.step, last.op if last.op is not None else -1) < at
                                                     or not theirs & {_key(row) for row in traces[rank]})
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
