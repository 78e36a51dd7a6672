"""What RAS replies alone say about a communicator no stream covers: which ranks launched more or fewer
(a root with a range, never a seq), and who waits on whom (a wedge). Also the map from RAS's comm ranks to
global ranks."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import polars as pl

from ..model import Evidence, Location, WedgeKind
from .consequences import (Disagreement, candidates, odd_behind, odd_ones, other_side, ran_ahead, unnamed_process,
                           unordered_counts, unordered_pair)
from .answers import DIFFERENT_OPS, EXTRA, MISSING, STOPPED, RangeReason, Root
from .notes import Note, RasCommRanks, RasRankUnnamed, SwappedTypes
from .ras import RasHistory, job_processes
from .streams import Streams
from .wedge import COUNT_FLOORS, LAUNCH_FLOORS, LAUNCHES_ONLY, RAS_DIFFERING_TYPES, RAS_UNSETTLED, Wedge


def ras_rank_map(streams: Streams, evidence: list[Evidence], ras: dict[str, RasHistory]) -> dict[tuple[str, int], int]:
    """(comm hash, comm rank) -> global rank, from the streams' comm_rank column and process identities."""
    mapping: dict[tuple[str, int], int] = {}
    for (comm, rank), part in streams.parts.items():
        for comm_rank in part.select(pl.col("comm_rank").drop_nulls().unique(maintain_order=True)).to_series():
            mapping[(comm, comm_rank)] = rank
    # A pid is unique on its host only: (host, pid) -> rank, host None where a record names no host.
    process_rank: dict[tuple[str | None, int], int] = {}
    for item in evidence:
        for identity in item.identities:
            if identity.pid is not None and identity.rank is not None:
                process_rank[(identity.host, identity.pid)] = identity.rank
    world = max((len(m) for m in streams.members.values()), default=0)
    # The one communicator larger than every other spans the job: its comm ranks are global ranks, and the
    # processes it names are those ranks in every other communicator too (a TP group's rank 0 that is process 636,
    # rank 2 of the world, is rank 2).
    sizes = {comm: history.states[-1][1].size or 0 for comm, history in ras.items()}
    largest = [comm for comm, size in sizes.items() if size and size == max(sizes.values())]
    if len(largest) == 1 and sizes[largest[0]] >= world:
        for _, block in ras[largest[0]].states:
            for r in block.ranks:
                if r.pid is not None:
                    process_rank.setdefault((r.host, r.pid), r.rank)
    hosts: dict[int, set[str | None]] = {}  # pid -> the hosts RAS names a process of that pid on
    for history in ras.values():
        for _, block in history.states:
            for r in block.ranks:
                if r.pid is not None:
                    hosts.setdefault(r.pid, set()).add(r.host)
    for comm, history in ras.items():
        for _, block in history.states:
            for r in block.ranks:
                rank = _process_rank(process_rank, r.host, r.pid, len(hosts.get(r.pid, ())) > 1)
                if (comm, r.rank) not in mapping and rank is not None:
                    mapping[(comm, r.rank)] = rank
    # A communicator spanning the whole job (the world) has comm ranks equal to global ranks. (Without streams,
    # only the one larger than every other is known to span it.)
    for comm, history in ras.items():
        size = history.states[-1][1].size
        if size and size >= world and (world or largest == [comm]):
            for rank in range(size):
                mapping.setdefault((comm, rank), rank)
    return mapping


def _process_rank(process_rank: dict[tuple[str | None, int], int], host: str | None, pid: int | None,
                  shared: bool) -> int | None:
    """The global rank of process `pid` on `host`: the record of that very process, else (a record that names no
    host, or spells it another way) the one rank every record of that pid agrees on, unless the pid is `shared`
    by processes on several hosts (the same pid on two nodes is two processes: which record is which is unknown)."""
    if pid is None:
        return None
    if (host, pid) in process_rank:
        return process_rank[(host, pid)]
    if shared:
        return None
    ranks = {rank for (_, p), rank in process_rank.items() if p == pid}
    return ranks.pop() if len(ranks) == 1 else None


def ras_only_root(ras: dict[str, RasHistory], rank_map: dict, streams: Streams,
                  stops: dict[str, list[str]]) -> Root | None:
    """Without streams, RAS counts still show which ranks launched more or fewer, but not where (see
    ras_only_roots); of several communicators that disagree, the first that is no consequence of another."""
    found = ras_only_roots(ras, rank_map, streams, stops)
    if not found:
        return None
    chosen = candidates([d for _, d in found], job_processes(ras))
    return next(root for root, d in found if d.comm == chosen[0])


def ras_only_roots(ras: dict[str, RasHistory], rank_map: dict, streams: Streams,
                   stops: dict[str, list[str]]) -> list[tuple[Root, Disagreement]]:
    """Per communicator no stream covers whose RAS counts disagree and that stopped, its root, and who its
    disagreement involves (for telling cause from consequence). NCCL 2.26+ counts each collective type apart, so
    its counts place nothing in the communicator's launch order: the root names the ranks and the types, with no
    seq. A single counter (2.24, 2.25) counts every collective: a range of seqs. (A communicator whose streams
    leave out a rank the counts give counts too: the streams that agree say nothing of that rank. Of one the streams
    cover, counts that no one program gives show a departure the records left out: see _unordered_types_root.)"""
    found = []
    for comm, history in sorted(ras.items()):
        if comm in streams.members and not (history.disagree and _counted_unstreamed(comm, history, rank_map,
                                                                                      streams)):
            root = _unordered_types_root(comm, history.by_type())
        else:
            root = _comm_root(comm, history, stops)
        if root is not None:
            names = _names_for(root, _names(comm, history, rank_map))
            found.append((_named(root, names), _disagreement(comm, history, root, names)))
    sizes = {comm: history.states[-1][1].size or 0 for comm, history in ras.items()}
    largest = [comm for comm, size in sizes.items() if size and size == max(sizes.values())]
    if len(largest) == 1:
        found = [(root, _place_unlisted(d, [o for _, o in found])) if d.comm == largest[0] else (root, d)
                 for root, d in found]
    return found


def _counted_unstreamed(comm: str, history: RasHistory, rank_map: dict, streams: Streams) -> bool:
    """Whether the counts give a rank, known by its global rank, that no stream of the communicator covers."""
    members = set(streams.members.get(comm, ()))
    return any((comm, r) in rank_map and rank_map[(comm, r)] not in members for r in history.launched())


def _place_unlisted(spanning: Disagreement, found: list[Disagreement]) -> Disagreement:
    """The communicator that spans the job, with the ranks a reply gives only as `2 ranks have launched up to
    operation 1` made the processes they must be: where the other communicators name exactly as many processes
    it does not name, it holds those. Odd are all of them, where all those ranks are."""
    unknown = {k for k in spanning.members if unnamed_process(k)}
    named = set().union(*(d.members for d in found)) - spanning.members
    named = {k for k in named if not unnamed_process(k)}
    if not unknown or len(named) != len(unknown):
        return spanning
    odd, other = spanning.odd, spanning.other
    if unknown <= odd:
        odd = (odd - unknown) | named
    elif unknown & odd:
        return spanning  # some of them odd, and which processes those are is not known
    if unknown <= other:
        other = (other - unknown) | named
    elif unknown & other:
        return spanning
    return replace(spanning, members=(spanning.members - unknown) | named, odd=odd, other=other, unknown=0)


def _comm_root(comm: str, history: RasHistory, stops: dict[str, list[str]]) -> Root | None:
    """The communicator's root by its RAS counts, its ranks by their comm ranks."""
    lost = sorted(set(history.missing_ranks) | set(history.dead_ranks))
    counts = history.launched()
    typed = history.by_type()
    if lost and counts:
        last = max(counts.values())
        single = all(set(c) <= {"ops"} for c in typed.values())
        return Root(
            comm=comm, seq=1 if single else None, seq_range=(1, last) if single else None,
            outlier_ranks=lost, reference_ranks=sorted(counts), kind=STOPPED, size=0,
            pinned_by="RAS counts", reason=RangeReason.NO_DATA, ops={}, counts_by_type=_by_type(typed),
        )
    if not history.disagree or not (history.stuck or stops.get(comm)) or len(typed) < 2:
        return None
    if all(set(c) <= {"ops"} for c in typed.values()):
        return root_from_counts(comm, {r: c.get("ops", 0) for r, c in typed.items()}, "RAS counts")
    return _root_from_type_counts(comm, _by_type(typed), complete=bool(history.tabled()))


def _names(comm: str, history: RasHistory, rank_map: dict) -> dict[int, int]:
    """comm rank -> the rank the answer names it by: its global rank where that is known. Ranks of no known global
    rank, in a communicator where others have one, are left out (one numbering per answer: a TP group's rank 0 is
    not global rank 0); where none has one, every rank goes by its comm rank."""
    ranks = {r.rank for _, b in history.states for r in b.ranks} | set(history.by_type()) | set(history.launched())
    named = {r: rank_map[(comm, r)] for r in ranks if (comm, r) in rank_map}
    return named or {r: r for r in ranks}


def unnamed_ranks(comm: str, ras: dict[str, RasHistory], rank_map: dict) -> list[Note]:
    """Notes on the ranks of `comm` that a root from its RAS counts leaves out (see _names)."""
    history = ras.get(comm)
    if history is None:
        return []
    names = _names(comm, history, rank_map)
    processes = {r.rank: (r.host, r.pid) for _, b in history.states for r in b.ranks if r.pid is not None}
    counts = history.by_type()
    if not any((comm, r) in rank_map for r in names):
        # No rank of it has a known global rank: the answer names its comm ranks, which a reader must not take
        # for the job's.
        return [RasCommRanks(comm, tuple((r, *processes[r]) for r in sorted(processes)))]
    left = sorted({*counts, *processes} - set(names))
    return [RasRankUnnamed(comm, r, processes.get(r), tuple(sorted(counts.get(r, {}).items()))) for r in left]


def _names_for(root: Root, names: dict[int, int]) -> dict[int, int]:
    """`names` (see _names), unless they would leave the root no outlier: then every rank by its comm rank."""
    if not any(r in names for r in root.outlier_ranks):
        return {r: r for r in [*root.outlier_ranks, *root.reference_ranks]}
    return names


def _named(root: Root, names: dict[int, int]) -> Root:
    """`root` with its comm ranks renamed (those with no name left out; see _names_for)."""
    return replace(root, outlier_ranks=sorted(names[r] for r in root.outlier_ranks if r in names),
                   reference_ranks=sorted(names[r] for r in root.reference_ranks if r in names),
                   counts_by_type={t: {names[r]: c for r, c in counts.items() if r in names}
                                   for t, counts in root.counts_by_type.items()})


def _disagreement(comm: str, history: RasHistory, root: Root, names: dict[int, int]) -> Disagreement:
    """Who the communicator's disagreement involves (`root` in comm ranks), each process by the host and pid RAS
    names it by (the same process in two communicators; a rank a reply lists only in a count of ranks is of no
    known process), with the rank the root names it by (`names`: comm rank -> that rank)."""
    block = history.states[-1][1]
    pids = {r.rank: (r.host, r.pid) for _, b in history.states for r in b.ranks if r.pid is not None}
    size = max([block.size or 0, *(r.rank + 1 for r in block.ranks), *(r + 1 for r in history.by_type())])
    key = {r: pids.get(r, ("unknown", comm, r)) for r in range(size)}  # (host, pid), or unknown
    # by_type, not launched(): it also counts the ranks a reply gives only as `3 ranks have launched up to ...`
    launched = {key[r]: sum(c.values()) for r, c in history.by_type().items() if r in key}
    lost = {key[r] for r in set(history.missing_ranks) | set(history.dead_ranks) if r in key}
    odd = frozenset(lost) or odd_ones(launched, {key[r] for r in root.outlier_ranks if r in key}, root.majority)
    other = frozenset() if lost else other_side(launched, odd, root.majority)
    return Disagreement(comm, frozenset(key.values()), odd, unknown=sum(r not in pids for r in key), other=other,
                        ahead=not lost and ran_ahead(launched, odd),
                        shown=not lost and unordered_counts(history.by_type()), behind=odd_behind(launched, odd),
                        names=tuple((key[r], names[r]) for r in sorted(key) if r in names))


def _by_type(typed: dict[int, dict[str, int]]) -> dict[str, dict[int, int]]:
    """rank -> type -> count, as type -> rank -> count (every type any rank launched)."""
    types = sorted({t for c in typed.values() for t in c})
    return {t: {r: typed[r].get(t, 0) for r in sorted(typed)} for t in types}


def _root_from_type_counts(comm: str, by_type: dict[str, dict[int, int]], complete: bool) -> Root | None:
    """The ranks whose counts per collective type differ from the most common ones (of two equal groups, both):
    they launched more, fewer or other collectives, somewhere. Counts of the types that differ alone place
    nothing; a table of every type (`complete`) adds up to how many collectives each rank launched, which bounds
    the seq as launch counts do."""
    ranks = sorted({r for counts in by_type.values() for r in counts})
    vector = {r: tuple(by_type[t].get(r, 0) for t in sorted(by_type)) for r in ranks}
    groups: dict[tuple, list[int]] = {}
    for r in ranks:
        groups.setdefault(vector[r], []).append(r)
    if len(groups) < 2:
        return None
    ordered = sorted(groups.items(), key=lambda g: (-len(g[1]), g[1]))
    majority = len(ordered[0][1]) * 2 > len(ranks)
    reference = ordered[0][1] if majority else []
    outliers = sorted(r for v, members in ordered[1:] for r in members) if majority else ranks
    mine, theirs = sum(vector[outliers[0]]), sum(ordered[0][0])
    kind = EXTRA if mine > theirs else MISSING if mine < theirs else DIFFERENT_OPS
    differing = {t: counts for t, counts in by_type.items() if len(set(counts.values())) > 1}
    last = None
    if complete:
        totals = [sum(vector[r]) for r in outliers]
        last = max(totals) + (1 if kind == MISSING else 0)
    return Root(
        comm=comm, seq=1 if last else None, seq_range=(1, last) if last else None, outlier_ranks=outliers,
        reference_ranks=reference, kind=kind, size=abs(mine - theirs), pinned_by="RAS counts", majority=majority,
        counts_by_type=differing, reason=RangeReason.COUNTS if last else RangeReason.TYPE_COUNTS, ops={},
    )


def _unordered_types_root(comm: str, typed: dict[int, dict[str, int]]) -> Root | None:
    """The root RAS counts per collective type (comm rank -> type -> launched) show for a communicator whose records
    agree: ranks that ran one program launched prefixes of it, so of two ranks one launched at least as many of
    every type as the other, whenever the counts were read. A rank with more of one type and fewer of another than
    the ranks most share issued a collective of another type somewhere, a departure no lag or stall gives, which the
    records left out (rings that begin after it, a log cut before it): shown, as a record that differs is. Worked
    example: rank 2 1 all-gather and 14 all-reduces, the other seven 0 and 15: rank 2 departed. The counts place
    nothing in launch order: no seq. Ranks merely behind or ahead of the most common counts may only lag, and are
    named on neither side; without a strict majority, every rank whose counts no one program gives beside another's
    is named, no majority. None where every two ranks' counts fit one program."""
    if len(typed) < 2 or not unordered_counts(typed):
        return None
    types = sorted(set.intersection(*(set(c) for c in typed.values())))
    vector = {r: tuple(typed[r][t] for t in types) for r in sorted(typed)}

    usual, sharing = Counter(vector.values()).most_common(1)[0]
    majority = sharing * 2 > len(vector)
    if majority:
        outliers = [r for r, v in vector.items() if unordered_pair(v, usual)]
        reference = [r for r, v in vector.items() if v == usual]
    else:
        outliers = [r for r, v in vector.items() if any(unordered_pair(v, w) for w in vector.values())]
        reference = [r for r in vector if r not in outliers]
    if not outliers:
        return None
    differing = {t: {r: typed[r][t] for r in sorted(typed)} for t in types
                 if len({typed[r][t] for r in typed}) > 1}
    return Root(comm=comm, seq=None, seq_range=None, outlier_ranks=outliers, reference_ranks=reference,
                kind=DIFFERENT_OPS, size=0, pinned_by="RAS counts", majority=majority, counts_by_type=differing,
                reason=RangeReason.TYPE_COUNTS, ops={}, shown=True, beyond_records=True)


def ras_only_wedge(ras: dict[str, RasHistory], rank_map: dict, stops: dict[str, list[str]],
                    dead: set[int], streams: Streams) -> Wedge | None:
    """Without streams for a comm, RAS counts still show who waits on whom. RAS counts launches, not completions:
    the wedge is at or before the first collective not every rank launched (where the counts are floors, that one is
    only at or after where they put it: see ras_comm_wedge). Of several communicators, the root's
    (the first whose disagreement is no consequence of another's) comes first."""
    root = ras_only_root(ras, rank_map, streams, stops)
    for comm, history in sorted(ras.items(), key=lambda item: (root is None or item[0] != root.comm, item[0])):
        if comm in streams.members:
            continue
        wedge = ras_comm_wedge(comm, history, rank_map, stops, dead)
        if wedge is not None:
            return wedge
    return None


def ras_comm_wedge(comm: str, history: RasHistory, rank_map: dict, stops: dict[str, list[str]],
                   dead: set[int]) -> Wedge | None:
    """One communicator's wedge by its RAS counts (see ras_only_wedge), where they disagree (or lost ranks) and
    it stopped. Counts are what each rank launched only where they cover every collective type and the replies show
    them stopped moving; otherwise each is a floor (`floored_by` says why), and the wedge is bounded by nothing: the
    first collective not every rank launched is at or after the one they give, and the group may have hung in any
    before it."""
    counts = history.launched()
    if not counts or not (history.stuck or stops.get(comm)):
        return None
    floored_by = [RAS_DIFFERING_TYPES] if history.differing_types_only else []
    floored_by += [] if history.settled else [RAS_UNSETTLED]
    if history.differing_types_only:
        # (the sum of the types that differ: the types left out add as many to every rank, so who launched more
        # holds, though not how many)
        sums = {r: sum(c.values()) for r, c in history.by_type().items()}
        counts = {r: sums[r] for r in counts} if set(counts) <= set(sums) else counts
    global_counts = {rank_map.get((comm, r), r): c for r, c in counts.items()}
    missing = [rank_map.get((comm, r), r) for r in history.missing_ranks + history.dead_ranks]
    if not history.disagree and not missing:
        return None
    missing = sorted(set(missing))
    present = {r: c for r, c in global_counts.items() if r not in missing}
    floors = set(global_counts) if floored_by else set()
    if missing and present:
        # The present ranks wait, at the latest, in the last collective all of them launched.
        seq = min(present.values())
        inside, absent = sorted(present), missing
    else:
        wedge = wedge_from_counts(comm, global_counts, {}, dead | set(missing), list(stops.get(comm, [])),
                                  history.locations, floors=floors)
        wedge.floored_by, wedge.launched_floors = floored_by, sorted(floors)
        return wedge
    kind = WedgeKind.RANK_GONE if (set(missing) | (dead & set(absent))) else WedgeKind.NO_PARTNER
    high, bounded_by = (None, LAUNCH_FLOORS) if floors else (seq, LAUNCHES_ONLY if seq > 1 else None)
    return Wedge(comm=comm, seq=seq, kind=kind, launched=global_counts, completed={},
                 waiting_ranks=inside, absent_ranks=absent, confirmed_by=list(stops.get(comm, [])),
                 evidence=history.locations, seq_range=(1, high), bounded_by=bounded_by, floored_by=floored_by,
                 launched_floors=sorted(floors))


def floors_unordered(wedge: Wedge) -> bool:
    """Whether a wedge's counts say nothing of which rank launched more: counts read before they settled (one
    reply, or counts still moving) are each a floor taken at its own moment, so rank 0 at 8 and rank 1 at 7 may be
    8 and 9 by now. Counts of the types that differ, settled, keep their order (the types left out add as many to
    every rank)."""
    return wedge.bounded_by == LAUNCH_FLOORS and RAS_UNSETTLED in wedge.floored_by


def uncounted_ranks(wedge: Wedge) -> list[int]:
    """Ranks of a wedge that are gone with no count of theirs (RAS lists them missing): what they launched is
    unknown, so no other rank launched more or fewer than they."""
    return [r for r in wedge.absent_ranks if r not in wedge.launched]


def root_from_counts(comm: str, counts: dict[int, int], pinned_by: str, floors: set[int] | frozenset = frozenset(),
                     unnamed: dict[int, int] | None = None) -> Root | None:
    """From how many collectives each rank launched (global rank -> count), the ranks that launched more or
    fewer than the others: every rank off the count most ranks share (of two counts as common, the one behind
    departed, with no majority). Where the odd collective is, counts cannot tell: the range is every seq up to
    the most an outlier ahead launched, or one past what an outlier behind launched. `floors`: ranks whose count
    is only a floor (they launched at least that many): outliers behind among them may have launched any number
    short of the others', so the range goes up to the others' count.

    Ranks ahead of the rest beside ranks behind it (world counts 2, 1, 1, 0, 1, 1, 1, 0) both departed, an extra
    collective and a missing one, and the counts cannot tell whose came first: every one of them is an outlier,
    those ahead named apart (`ahead_of_the_rest`).

    `unnamed`: count -> how many more members stand at it whose global ranks are not known; they weigh in which
    count most members share, but are never named: where one is off that count (an outlier), None."""
    unnamed = {v: n for v, n in (unnamed or {}).items() if n}
    values = sorted(set(counts.values()) | set(unnamed))
    if len(values) < 2:
        return None
    by_value = {v: [r for r, c in counts.items() if c == v] for v in values}
    tally = {v: len(by_value[v]) + unnamed.get(v, 0) for v in values}
    usual = max(reversed(values), key=tally.get)  # (of two counts as common, the higher)
    ahead = sorted(r for r, c in counts.items() if c > usual)
    behind = sorted(r for r, c in counts.items() if c < usual)
    if not ahead and not behind or any(v != usual for v in unnamed):
        return None
    floored = bool(set(behind) & set(floors))
    # (an outlier ahead added one at most as far as its count; one behind left one out at most one past its own)
    last = max([counts[r] for r in ahead] + [counts[r] + 1 for r in behind] + ([usual] if floored else []))
    odd = {counts[r] for r in behind or ahead}
    # (how many fewer a floor's rank launched is not known: it skipped some, or stopped after its last)
    kinds = (MISSING, STOPPED) if floored else (MISSING,) if behind and ahead else ()
    kinds += (EXTRA,) if behind and ahead else ()
    return Root(
        comm=comm, seq=1, seq_range=(1, last), outlier_ranks=sorted(ahead + behind),
        reference_ranks=sorted(by_value[usual]), kind=MISSING if behind else EXTRA, kinds=kinds,
        size=0 if floored or len(odd) > 1 else abs(odd.pop() - usual), pinned_by=pinned_by,
        reason=RangeReason.COUNTS, ops={}, ahead_of_the_rest=tuple(ahead) if behind else (),
        # (of two equal groups, either may have departed)
        majority=(len(ahead) + len(behind)) * 2 < len(counts) + sum(unnamed.values()),
    )


def wedge_from_counts(comm: str, counts: dict[int, int], completed: dict[int, int | None], dead: set[int],
                      confirmed_by: list[str], evidence: list[Location], ops: dict | None = None,
                      floors: set[int] | frozenset = frozenset()) -> Wedge:
    """The first collective not every rank launched (global rank -> launched count): who waits in it, who is
    absent. Counts of launches bound the stop from above: a collective every rank launched before it may be where
    the group hung, unless every rank's completions (global rank -> last completed) say it went past. `floors`:
    ranks whose count is only a floor; where one is the lowest, the first collective not every rank launched may
    be any up to the lowest of the counts that are not floors; where every count is one, nothing bounds it
    (LAUNCH_FLOORS)."""
    # Where every rank launched as many, none launched the next: a group that stopped waits in one of those.
    seq = min(counts.values()) + (1 if len(set(counts.values())) > 1 else 0)
    done = [c for r, c in completed.items() if r in counts]
    low = min(seq, min(done) + 1) if done and None not in done else 1
    exact = [c for r, c in counts.items() if r not in floors]
    # (a floor rank may have launched as many as the fewest exact count: the first not every rank launched is then
    # the one after it, where the exact counts differ)
    high = max(seq, min(exact) + (len(set(exact)) > 1)) if exact and floors & set(counts) else seq
    inside = sorted(r for r, c in counts.items() if c >= seq)
    absent = sorted(r for r, c in counts.items() if c < seq)
    kind = WedgeKind.RANK_GONE if dead & set(absent) else WedgeKind.NO_PARTNER if absent else WedgeKind.UNKNOWN
    bounded_by = COUNT_FLOORS if high > seq else LAUNCHES_ONLY if low < seq else None
    if not exact and floors >= set(counts):
        high, bounded_by = None, LAUNCH_FLOORS
    return Wedge(comm=comm, seq=seq, kind=kind, launched=dict(counts), completed=dict(completed),
                 waiting_ranks=inside, absent_ranks=absent, confirmed_by=confirmed_by, evidence=evidence,
                 ops=dict(ops or {}), seq_range=(low, high), bounded_by=bounded_by)


def with_swapped_types(root: Root, history: RasHistory, rank_map: dict) -> tuple[Root, list[Note]]:
    """A root the records place, with the ranks added whose RAS counts launched as many collectives as a strict
    majority of the comm's ranks did, of other types: at some seq each issued a collective of another type than the
    others, a departure wherever it was, and one no record the root rests on shows (records without op types, rings
    that begin after it). Where that was is not on record, so the range reaches back to the comm's first seq, and the
    first departure may be theirs. Worked example: fingerprints part rank 0 by its tags at seq 19; RAS counts give
    rank 2 5 all-gathers and 23 all-reduces, ranks 0, 1 and 3 4 and 24: rank 2 departed too, somewhere in seq
    1..19, and the root names ranks 0 and 2, no majority."""
    if root.seq_range is None or root.seq_range[1] is None:
        return root, []
    typed = history.by_type()
    names = {r: rank_map.get((root.comm, r)) for r in typed}
    if len(typed) < 3 or None in names.values():
        return root, []
    vectors = {r: tuple(sorted((t, n) for t, n in counts.items() if n)) for r, counts in typed.items()}
    usual = max(set(vectors.values()), key=lambda v: sum(1 for w in vectors.values() if w == v))
    if sum(1 for v in vectors.values() if v == usual) * 2 <= len(vectors):
        return root, []
    total = sum(n for _, n in usual)
    swapped = sorted(names[r] for r, v in vectors.items() if v != usual and sum(n for _, n in v) == total)
    added = [r for r in swapped if r not in root.outlier_ranks]
    members = set(root.outlier_ranks) | set(root.reference_ranks) | set(root.unplaced_ranks)
    if not added or not set(added) <= members:
        return root, []
    outliers = sorted(set(root.outlier_ranks) | set(added))
    high = root.seq_range[1]
    merged = replace(root, outlier_ranks=outliers, reference_ranks=sorted(members - set(outliers)), seq=1,
                     seq_range=(1, high), majority=len(outliers) * 2 < len(members))
    return merged, [SwappedTypes(root.comm, tuple(added), tuple(outliers), (1, high))]
