"""Comms widened by the traces that belong to them though they share few of their results.

trace_groups.py groups each trace's records by the ranks that read back the same result. A rank that left a comm's
pairing (a skip, an extra collective) or whose trace was cut short shares fewer results than it ran with the comm,
and would make a comm of its own that no program ran. Each rule here widens a comm by such ranks where their traces
allow no other reading, or sets apart records no comm the traces name can hold.
"""

from __future__ import annotations

from ..model import FingerprintRow
from .trace_groups import UNKNOWN, Members, result_key

Grouped = dict[int, tuple[list[Members], frozenset[int]]]  # rank -> its records' comms, and those guessed


def joined_comms(grouped: Grouped, traces: dict[int, list[FingerprintRow]], holders: dict[tuple, set[int]],
                 tags_of: dict[tuple, set[str | None]], cut: set[int], apart_from_all: dict[int, Members]) -> Grouped:
    """`grouped` after every rule, in order: ranks whose traces were cut (`cut`), ranks that departed, ranks whose
    traces share no result at all (`apart_from_all`), then records set apart where two ranks read back alone."""
    grouped = _joined_by_cut_traces(grouped, traces, holders, cut)
    grouped = _joined_by_departed_traces(grouped, traces, holders, tags_of)
    grouped = _joined_by_traces_apart(grouped, apart_from_all)
    return _apart_where_both_read_back_alone(grouped, traces, holders, tags_of)


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
            key = result_key(row)
            if key is not None and members is not UNKNOWN:
                placed.setdefault(members, set()).add(key)
    wider: dict[Members, Members] = {}
    for members, keys in placed.items():
        joining = {r for key in keys for r in holders.get(key, ()) if r not in members and r in cut and r in traces
                   and all(result_key(row) in keys for row in traces[r] if result_key(row) is not None)}
        if joining:
            wider[members] = members | joining
    if not wider:
        return grouped
    out: dict[int, tuple[list[Members], frozenset[int]]] = {}
    for rank, (groups, guessed) in grouped.items():
        joined = [(placed[m], w) for m, w in wider.items() if rank in w and rank not in m]  # (its results, comm)
        out[rank] = ([next((w for keys, w in joined if result_key(row) in keys), wider.get(m, m))
                      for row, m in zip(traces[rank], groups)], guessed)
    return out


def _joined_by_departed_traces(grouped: dict[int, tuple[list[Members], frozenset[int]]],
                               traces: dict[int, list[FingerprintRow]], holders: dict[tuple, set[int]],
                               tags_of: dict[tuple, set[str | None]]
                               ) -> dict[int, tuple[list[Members], frozenset[int]]]:
    """`grouped`, with each comm widened by the ranks that departed from it (`_departed`): a rank whose results
    shared with any trace are the comm's records that it read back with every one of its members, misaligned (their
    holders gave them several tags), and whose every later result it read back alone. It ran that collective with
    them under a tag of its own (an extra collective, paired with their first), and from then on each side read back
    its own results (counts that differ in a misaligned pairing part its members' sums), so what the members read
    back without it says nothing of them. Its records go to the wider comm, and so do its results read back alone
    under a tag of the comm's results (a program issues a tagged collective on one comm); the comm's records are the
    wider comm's in every trace. Worked example: one comm of ranks 0-3, sums only; rank 0 alone ran a drafter
    all-reduce `mtp` at step 0, which paired with the others' `self_attn` (one sum, two tags), and each of its later
    results is its own while ranks 1-3 share theirs: the four are the comm, where the tags part rank 0 from the others
    at seq 1 (as a comm of ranks 1-3 beside one of rank 0's single record, no record compared them)."""
    placed: dict[Members, set[tuple]] = {}  # comm -> the results its records hold, over every trace
    tags: dict[Members, set[str | None]] = {}  # comm -> the tags of its results that their holders gave alike
    for rank, (groups, _) in grouped.items():
        for row, members in zip(traces[rank], groups):
            key = result_key(row)
            if key is None or members is UNKNOWN or rank not in members:
                continue
            placed.setdefault(members, set()).add(key)
            if len(tags_of.get(key, ())) == 1:
                tags.setdefault(members, set()).add(row.tag)
    wider: dict[Members, Members] = {}
    for members, keys in placed.items():
        joining = {r for key in keys for r in holders.get(key, ()) if r not in members and r in grouped
                   and _departed(traces[r], keys, members | {r}, holders, tags_of)}
        if joining:
            wider[members] = members | joining
    if not wider:
        return grouped
    out: dict[int, tuple[list[Members], frozenset[int]]] = {}
    for rank, (groups, guessed) in grouped.items():
        joined = [(placed[m], tags.get(m, set()) - {None}, w) for m, w in wider.items() if rank in w and rank not in m]
        out[rank] = ([next((w for keys, carried, w in joined if result_key(row) in keys or (
            len(holders.get(result_key(row), ())) < 2 and row.tag in carried)), wider.get(m, m))
                      for row, m in zip(traces[rank], groups)], guessed)
    return out


def _departed(trace: list[FingerprintRow], keys: set[tuple], members: Members, holders: dict[tuple, set[int]],
              tags_of: dict[tuple, set[str | None]]) -> bool:
    """Whether a trace's results shared with any other trace are all of `keys` (one comm's records), each read back
    by `members` (the comm with the trace's rank) exactly, one of them misaligned (given several tags), and every
    result after the first of them, but those, is one it read back alone (none before it: a rank that ran aligned
    with them would have shared those)."""
    shared = [i for i, row in enumerate(trace) if len(holders.get(result_key(row), ())) > 1]
    if not shared or any(result_key(trace[i]) not in keys or holders[result_key(trace[i])] != members
                         for i in shared):
        return False
    if not any(len(tags_of.get(result_key(trace[i]), ())) > 1 for i in shared):
        return False
    return shared[0] == 0 and all(len(holders.get(result_key(row), ())) == 1 for i, row in enumerate(trace)
                                  if i not in shared)


def _joined_by_traces_apart(grouped: dict[int, tuple[list[Members], frozenset[int]]],
                            apart_from_all: dict[int, Members]) -> dict[int, tuple[list[Members], frozenset[int]]]:
    """`grouped`, with each set of ranks that shares results widened to the one comm holding some ranks whose
    traces share no result at all (`apart_from_all`: rank -> that comm), where those ranks are every rank the set
    lacks of it. A rank of the comm that departed (skipped or reordered a collective) reads back, from then on,
    results of its own, and its peers read back theirs without it: the set they share is the comm less the rank,
    not a comm of its own. Worked example: one comm of 8 ranks, nothing else names it; rank 1 skipped its first
    collective, so its every record pairs misaligned and shares no result, and ranks 0, 2-7 share theirs. Rank 1
    goes to the one comm of every traced rank, and so do the seven's records, where rank 1's then part from
    theirs at seq 1 (they made two comms, which no record compared)."""
    wider = set(apart_from_all.values())
    if not wider:
        return grouped

    def widened(members: Members) -> Members:
        if members is UNKNOWN:
            return members
        holding = [w for w in wider if members < w and all(apart_from_all.get(r) == w for r in w - members)]
        return holding[0] if len(holding) == 1 else members
    return {rank: ([widened(m) for m in groups], guessed) for rank, (groups, guessed) in grouped.items()}


def _apart_where_both_read_back_alone(grouped: dict[int, tuple[list[Members], frozenset[int]]],
                                      traces: dict[int, list[FingerprintRow]], holders: dict[tuple, set[int]],
                                      tags_of: dict[tuple, set[str | None]]
                                      ) -> dict[int, tuple[list[Members], frozenset[int]]]:
    """`grouped`, with the records placed in a comm whose digest no other trace holds made UNKNOWN where two or
    more of its ranks hold such records, but for those of a tag the comm's shared results carry. A digest is one
    physical collective's, a trace is a prefix of what its rank read back in issue order, and a comm's ranks issue
    its collectives in one order: had ranks R and P each read back a collective of the comm that the other did not,
    the one of the lower seq would be in both traces. So the lone records of one of them at most are the comm's,
    and where nothing but its being the one comm holding them put them there (no tag of its shared results), which
    one is not known: they are of comms whose other members left no trace. Worked example: ranks 3 and 4 alone left
    traces and share the digests of two world all-reduces; each then reads back five TP all-reduces whose digests
    no one shares. Put in the world comm, the two streams part at seq 3 on tags (`self_attn` against `mlp`), a
    divergence of a comm of ranks 3 and 4 that no program ran; the records are the TP groups', whose other ranks
    left no trace."""
    confirmed: dict[Members, set[str | None]] = {}  # comm -> the tags of its results that several traces hold
    lone: dict[Members, dict[int, list[int]]] = {}  # comm -> rank -> its records there that no other trace holds
    for rank, (groups, _) in grouped.items():
        for i, (row, members) in enumerate(zip(traces[rank], groups)):
            key = result_key(row)
            if key is None or members is UNKNOWN or len(members) < 2:
                continue
            if len(holders.get(key, ())) > 1:
                confirmed.setdefault(members, set()).update(tags_of.get(key, ()))
            elif row.digest is not None:
                lone.setdefault(members, {}).setdefault(rank, []).append(i)
    apart: dict[int, set[int]] = {}  # rank -> its records of no comm the traces name
    for members, by_rank in lone.items():
        if len(by_rank) > 1:
            for rank, found in by_rank.items():
                apart.setdefault(rank, set()).update(
                    i for i in found if traces[rank][i].tag not in confirmed.get(members, set()))
    if not any(apart.values()):
        return grouped
    return {rank: ([UNKNOWN if i in apart.get(rank, ()) else m for i, m in enumerate(groups)], guessed)
            for rank, (groups, guessed) in grouped.items()}
