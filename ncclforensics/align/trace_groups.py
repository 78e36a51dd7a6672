"""Which ranks each record of a fingerprint trace was a collective of: the grouping that makes a trace, which
names no communicator, into streams of comms (traces.py builds the rows from it).

Every rank of one physical collective reads back the same result, so the ranks sharing a record's digest (or,
lacking digests, its sum) are its members. Sums may coincide, ranks' traces may stop sooner than their comm's
(cut, or hung), and a misaligned pairing mixes two collectives' results: the rules here tell a comm from a
coincidence, a tail of a wider comm from a comm of its own, and one comm's split from two comms, and they say
which records only their neighbours place (a guess). They are apart from traces.py because they read one trace
against every other's results, and nothing else: no evidence, no rows.
"""

from __future__ import annotations

import math

from ..model import FingerprintRow
from ..model.kinds import SAME_RESULT_OPS, normalize_op
from .fingerprints import checked_right

Members = frozenset[int]
MIXED: list[Members] = []  # a trace of several comms that its sums cannot split
UNKNOWN: Members = frozenset({-1})  # a record of a comm whose other members left no trace and are not known
NOT_APART: Members = frozenset()  # a tag other ranks' groups do not place


def result_key(row: FingerprintRow) -> tuple | None:
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


def result_holders(traced: list[FingerprintRow]) -> tuple[dict[tuple, set[int]], dict[tuple, set[str | None]]]:
    """Per result: the ranks that read it back, and the tags they gave it."""
    holders: dict[tuple, set[int]] = {}
    tags_of: dict[tuple, set[str | None]] = {}
    for row in traced:
        key = result_key(row)
        if key is not None:
            holders.setdefault(key, set()).add(row.rank)
            tags_of.setdefault(key, set()).add(row.tag)
    return holders, tags_of


def right_apart(traced: list[FingerprintRow]) -> dict[tuple[str, int], dict[tuple, set[int]]]:
    """(tag, step) -> each result checked right under that tag in that step -> the ranks that read it back, counting
    only ranks with one record of the tag in the step, of an op whose result is the same on every rank
    (SAME_RESULT_OPS: a reduce-scatter's shards differ by rank). A result checked right is what its own collective
    gives (a misaligned pairing mixes two collectives' data, which checks wrong), so ranks that read back different
    ones under one tag in one step ran different collectives of it; a program issues each tagged collective on one
    comm (once a step, where a trace holds it once), so none of them is in the comm of another's."""
    once: dict[tuple[str, int, int], int] = {}
    for row in traced:
        if row.tag is not None and row.step is not None:
            once[(row.tag, row.step, row.rank)] = once.get((row.tag, row.step, row.rank), 0) + 1
    out: dict[tuple[str, int], dict[tuple, set[int]]] = {}
    for row in traced:
        key = result_key(row)
        if (key is not None and checked_right(row) and once.get((row.tag, row.step, row.rank)) == 1
                and row.kind is not None and normalize_op(row.kind) in SAME_RESULT_OPS):
            out.setdefault((row.tag, row.step), {}).setdefault(key, set()).add(row.rank)
    return out


def _read_apart(row: FingerprintRow, key: tuple | None, apart: dict[tuple[str, int], dict[tuple, set[int]]]
                ) -> set[int]:
    """The ranks that read back another result checked right under the tag of `row` (itself checked right) in its
    step: none of them is in the comm of its collective (right_apart)."""
    results = apart.get((row.tag, row.step), {}) if row.tag is not None and row.step is not None else {}
    if key not in results:
        return set()
    return {r for other, ranks in results.items() if other != key for r in ranks}


def record_groups(trace: list[FingerprintRow], holders: dict[tuple, set[int]], tags_of: dict[tuple, set[str | None]],
            rank: int, last_rows: dict[int, FingerprintRow], untraced: list[Members] = (),
            known: set[Members] = frozenset(), by_tag_elsewhere: dict[str, Members | None] | None = None,
            apart_right: dict[tuple[str, int], dict[tuple, set[int]]] | None = None
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
    digest is one physical collective's, so it is of no comm whose other members traced it), and left out; so is a
    sum no other trace read back where no set sharing the rank's results recurs (the one that shares once, say the
    world less the ranks that left no trace, is a comm by default only, and places none of its tag). A result
    shared with no one that only the one comm holding the rank would place follows its tag where that tag went with
    ranks beyond every comm elsewhere in the trace (a guess, as that one is); where its tag went with none it stays
    in that comm, a guess as well wherever any result went beyond it (that comm is then not the rank's only one).
    No record checked right goes to a comm holding a rank that read back another right result of its tag in its
    step (`apart_right`, right_apart): such a record shared with no one, whose every comm holding the rank is such,
    follows its tag where that tag went beyond every comm, else is UNKNOWN (its partners left no record of it)."""
    keys = [result_key(row) for row in trace]
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
    comms = set(seen) if digests else {m for m, n in seen.items() if n > 1 or m in known}
    # (with none such, the sets that share once stand in, comms by default: they place no result shared with no one)
    by_default = not comms
    comms = comms or set(seen)
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
    own = _split_apart(trace, own, alike, comms)
    # A set whose every shared result went to the wider comm (misaligned pairings of it) names no comm of its own:
    # left among the comms, it would make a trace of one comm look like several that its sums cannot split.
    comms &= set(own)
    given = [tags_of.get(key, set()) for key in keys]
    if len(comms) > 1 and not digests:
        # A tail's records are its wider comm's: their tags, and the misaligned pairings that recur in them, are
        # that comm's too, and a split that carries them is of that comm.
        as_wider = [tails.get(members, members) for members in own]
        comms = _one_comm_of_sums(comms, trace, _with_tails(trace, as_wider, alike, comms, at, last_rows), alike,
                                  given, {tails.get(members, members) for members in paired}, by_tag_elsewhere or {})
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
    ruled_out: dict[int, set[int]] = {}  # records shared with no one that every comm holding the rank is not of ->
    # the ranks that read back another right result of their tag in their step
    for i, (row, members, one) in enumerate(zip(trace, own, confirmed)):
        if members in comms and one:
            # A comm of its own whose results of this tag were a wider comm's before that comm's other members'
            # traces stopped: the tail of the wider one (a program issues a tagged collective on one comm).
            tail = [wider for wider in by_tag.get(row.tag, ()) if wider > members
                    and all(_last_before(r, i, trace, at, last_rows) for r in wider - members)]
            placed.append(tail[0] if len(tail) == 1 and row.tag is not None else members)
            continue
        # (a comm holding a rank that read back another right result of its tag in its step is not its comm)
        elsewhere = _read_apart(row, keys[i], apart_right or {})
        holding = [c for c in comms if members <= c and not c & elsewhere]
        tagged = list(by_tag.get(row.tag, ())) if row.tag is not None else []
        # (a result shared under several tags by ranks that are no comm is a coincidence of sums: shared by none)
        unshared = not tagged and (members == {rank} or not one and members not in comms)
        apart = (by_tag_elsewhere or {}).get(row.tag, NOT_APART) if unshared and not untraced else NOT_APART
        if apart is None and (digests or by_default and members == {rank}):
            # Its tag's results are others' in groups that leave the rank out, and a digest no trace shares is of
            # no comm whose other members traced it: a comm of peers that left no trace, which is not known. So is
            # a sum no trace shares where the one set holding the rank is a comm by default only (a split of a comm
            # the trace names by counts that differ in a misaligned pairing stays in it).
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
        elif placed[-1] is None and members == {rank} and not holding and any(members <= c for c in comms):
            ruled_out[i] = elsewhere
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
    # A result shared with no one, checked right, whose tag other ranks read back right apart from it in its step
    # while every comm holding the rank holds some of them: its partners left no record of it. It follows its tag
    # where that tag went with ranks beyond every comm (a guess), else it is of a comm whose other members are not
    # known, and left out: its neighbours' comm is known not to be its own.
    for i, elsewhere in ruled_out.items():
        target = {m for m in went.get(trace[i].tag, ()) if not m & elsewhere} if trace[i].tag is not None else set()
        if len(target) == 1:
            placed[i] = next(iter(target))
            beyond.add(i)
        else:
            placed[i] = UNKNOWN
    # Where results went with ranks beyond that comm, it is not the rank's only one: a result shared with no one
    # may be of either, and the one that holds the rank places it by a guess too.
    guessed = beyond | alone if beyond else beyond
    first = next((m for m in placed if m is not None and m is not UNKNOWN), next(iter(comms)))
    out: list[Members] = []
    before = first
    for members in placed:
        out.append(members if members is not None else before)
        before = out[-1] if out[-1] is not UNKNOWN else before
    return out, frozenset(i for i, members in enumerate(placed) if members is None) | guessed


def _split_apart(trace: list[FingerprintRow], own: list[Members], alike: list[bool], comms: set[Members]
                 ) -> list[Members]:
    """`own`, with each record a comm of its own inside a wider comm read back wrong under a tag of the wider comm's
    given to the wider one: a misaligned pairing of the wider comm's collective, whose members read back apart (ranks
    whose counts differ each read back their own sum), and whose side here happens to be a comm of its own too. A
    comm of its own is one whose aligned results (read back right, or unchecked) carry a tag no wider comm's do; a
    program issues each tagged collective on one comm. Worked example: ranks 0-3 share two world all-reduces of
    unlike sizes each step and ranks 0, 1 and 2, 3 their tensor-parallel groups' layers; in step 2 ranks 2 and 3
    issue the two world ones in the other order, so ranks 0, 1 read back one wrong sum of each and ranks 2, 3
    others: those records are the world's, misaligned at its seq 5, not the tensor-parallel groups' own."""
    aligned: dict[Members, set[str]] = {}  # comm -> the tags of its aligned results
    for row, members, one in zip(trace, own, alike):
        if members in comms and one and row.tag is not None and checked_right(row) is not False:
            aligned.setdefault(members, set()).add(row.tag)
    out = list(own)
    for i, (row, members) in enumerate(zip(trace, own)):
        if members not in comms or row.tag is None or checked_right(row) is not False or row.digest is not None:
            continue  # (a digest is one physical collective's: every member reads it back, misaligned or not)
        wider = [w for w in comms if w > members]
        theirs = [w for w in wider if row.tag in aligned.get(w, ())]
        if len(theirs) == 1 and aligned.get(members, set()) - set().union(*(aligned.get(w, set()) for w in wider)):
            out[i] = theirs[0]
        elif not aligned.get(members) and len(wider) == 1 and aligned.get(wider[0]):
            # A set with no aligned result at all (every one it shares read back wrong) is no comm of its own
            # inside the one wider comm that holds it: its members ran collectives of their own there (a drafter's,
            # say, that the rest skipped), paired misaligned with the wider comm's, and share those sums alike.
            out[i] = wider[0]
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


def recurring_with_tails(traced: list[FingerprintRow], holders: dict[tuple, set[int]],
                          tags_of: dict[tuple, set[str | None]], last_rows: dict[int, FingerprintRow]) -> set[Members]:
    """The sets of ranks that share one sum under a tag and whose tail shares another of that tag: the set's ranks
    but those whose traces end at an earlier step (they hung, or were cut). A set sharing sums once is no comm
    by itself (sums may coincide), but a comm's tagged collective recurs, and where some of its ranks stopped
    first the next one is their tail's alone. Worked example: a job of two steps issues its world all-reduce
    once a step; ranks 16-23 hang in step 1 and record it once, so every other rank's trace holds its result
    once shared by all 64 ranks and once by the 56 that went on: the 64 are a comm."""
    steps: dict[tuple, set[int]] = {}
    for row in traced:
        key = result_key(row)
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


def partners_by_tag(rank: int, holders: dict[tuple, set[int]], tags_of: dict[tuple, set[str | None]],
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
                      given: list[set[str | None]], paired: set[Members] = frozenset(),
                      by_tag_elsewhere: dict[str, Members | None] | None = None) -> set[Members] | None:
    """Several sets of ranks sharing sums, as the comms they are: ranks whose counts differ in a misaligned pairing
    each read back their own sum, which splits one collective's members, but the records of such a split carry tags
    the whole set's records carry too (`given`: per record, every tag its result's holders gave it; a misaligned
    result of the whole set carries the tags of each collective paired in it, so a split right after the pairing
    went misaligned, before the whole set recorded those tags aligned, carries them too). A split goes to the one
    wider set whose tags it carries (from the widest down); a set that carries no wider set's tags is a comm of its
    own (a tensor-parallel group inside the world), and where that leaves several comms, each must be one of its
    own: every tag their aligned results carry is shared by one of them alone (a program issues each tagged
    collective on one comm). Sums of two groups can also be equal by design (replicas fed alike), so a trace whose
    sets do not fit so cannot be split by its sums: None. So too where a set that is a comm of its own (results
    not read back wrong carry a tag no wider set carries) carries a wider one's tags: it may be the wider comm's
    split as well (a TP group whose ranks alone read back one side of a world swap), or the wider comm's results
    may be coincidences of its own and another group's. A set of `paired` (misaligned pairings that recur,
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
        # A tag no aligned result here confirms is confirmed by the group other ranks' groups of it leave this rank.
        confirmed = {**_placed_elsewhere(by_tag_elsewhere or {}, comms, confirmed), **confirmed}
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
        # misaligned result carries that result's tags (a later one may be a coincidence of sums across comms). A
        # set this trace holds no result of (another rank's) carries none here.
        if m not in own:
            return set()
        first = own.index(m)
        return {t for members, g in zip(own[:first], given[:first]) if members == whole for t in g} - {None}

    def mixed_in(whole: Members) -> set[str | None]:
        # the tags of the whole set's misaligned results: each collective paired in one was issued on its comm
        return {t for members, g, one in zip(own, given, alike) if members == whole and not one for t in g} - {None}
    # From the widest sets down, each set goes to the one wider comm whose tags it carries (a split of it); a set
    # that carries no wider comm's tags is a comm of its own (a tensor-parallel group inside the world).
    unwrong: dict[Members, set[str | None]] = {}  # the tags of each set's results shared alike, not read back wrong
    for row, members, one in zip(trace, own, alike):
        if one and checked_right(row) is not False:
            unwrong.setdefault(members, set()).add(row.tag)
    fold: dict[Members, Members] = {}
    for m in sorted(comms, key=len, reverse=True):
        wider = {fold[w] for w in comms
                 if m < w and tags.get(m, set()) & (tags.get(w, set()) - {None} | before(m, w) | mixed_in(w))}
        if len(wider) > 1:
            return None
        if wider and unwrong.get(m, set()) - set().union({None}, *(tags.get(w, set()) for w in comms if m < w)):
            # A comm of its own (results not read back wrong carry tags no wider set's do) that carries a wider
            # one's tags too: a split of the wider comm that is a comm of its own as well, or results of two comms
            # that coincide; sums unchecked cannot tell them apart (those checked wrong went to the wider comm:
            # _split_apart).
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


def _placed_elsewhere(by_tag_elsewhere: dict[str, Members | None], comms: set[Members],
                      confirmed: dict[str | None, set[Members]]) -> dict[str | None, set[Members]]:
    """tag -> the comm of this trace that other ranks' groups give the rank for a tag no aligned result of this
    trace confirms (`by_tag_elsewhere`: the rank with the ranks that the groups sharing the tag's results leave
    out). A trace that went misaligned before it recorded a tag aligned confirms that tag nowhere, though its
    peers' traces do: a result its holders read back under such tags is a pairing in the comm their groups make
    of them. Worked example: tensor-parallel pairs {2, 3}, {4, 5}, {6, 7} share each layer's sums; rank 1 skipped
    layer 1's attention, so ranks 0 and 1 read back one wrong sum under `layers.1.attn` and `layers.1.mlp`, and
    rank 0's trace ends in that step: the pairs elsewhere make {0, 1} its group for both tags, a comm its aligned
    layer 0 results name, so the pairing is {0, 1}'s."""
    return {tag: {group} for tag, group in by_tag_elsewhere.items()
            if tag not in confirmed and group is not None and group in comms}


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
    key = result_key(last)
    if key in at:
        return at[key] < index
    return last.step is not None and trace[index].step is not None and last.step < trace[index].step
