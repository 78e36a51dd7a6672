"""What the records of one communicator allow: the proposals of edits that explain every rank's stream.

See align/root.py for the model; `solve` there narrows these proposals by every other piece of evidence.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .edits import Codes, EditKind, Placement, agree, compatible, merged, place_edits
from .length_proposals import lengths_only, with_behind
from .parting import (
    departed_alike,
    first_parting,
    first_parting_majority,
    loose_joined,
    reference_among_alike,
    rival_reference,
)
from .proposal import Proposal


def propose(codes: dict[int, Codes], start: int, deviants: set[int] | None = None,
            behind: set[int] | None = None, cut: set[int] | None = None,
            ended: set[int] | None = None, incomplete: set[int] | None = None,
            unseen: set[int] | None = None, closed: set[int] | None = None,
            settled: set[int] | None = None, held: dict[int, frozenset[int]] | None = None,
            reported: set[int] | None = None, places: dict[int, Codes] | None = None) -> Proposal | None:
    """Group the ranks into streams that agree; the largest group is the reference, and every other group's
    edits are placed against it. With no strict majority, both sides of a two-way split are placed against each
    other unless `deviants` (the ranks the gate journal says ran something the others did not) picks one.

    `behind`: ranks that launched fewer collectives than the others of a communicator that stopped, and that
    nothing says died. A stream that agrees with the others but ends sooner then is no mere cut: the rank
    skipped collectives somewhere (lookalikes), or stopped launching (blocked elsewhere).

    `ended`: ranks whose streams are known to end where their codes do (a count of what they launched runs past
    their records): one whose records agree with several groups goes with the one group that ends where it does.
    A stream that ends before the groups it agrees with part may belong to any of them (its end is a cut), so a
    group is the majority only if it stays one whichever group such streams belong to.

    `incomplete`: ranks whose records are known to end short of what they launched (a file cut short, collectives
    the others completed after their last record). One whose records agree with several groups sides with nobody:
    it is neither an outlier nor of the reference, and may be on any side.

    `unseen`: ranks with nothing on record but how many collectives they launched (a count in a peer's report).
    With no majority, one that sides with either group parts from neither: it is named on neither side, where every
    other rank that sides with either is known to be on neither side too (else every rank is named). `reported`:
    those of them whose last collective a peer's report gives (`[0, 2, 3] started ALLREDUCE` at #3): one whose
    count runs past where the groups part launched there what one of them did, and is on record beside them (its
    op alike with either): it sides with either, as a stream without the field that parts them does.

    `closed`: ranks whose records hold every collective they launched here (an NCCL log or a dump, whole). One
    that ends before the groups part never launched where they do: it is on neither side, and it cannot make the
    smaller side as large as the larger (a rank blocked elsewhere votes for nothing here). `settled`: those of them
    that nothing elsewhere held (in no other communicator, or with whole records there whose last collective
    completed): their streams end where their program did, as `ended` ones' do.

    `held`: ranks PyTorch's completion marks show held back in another communicator by peers ahead here that issued
    their next collective here early (held_back.py), rank -> those peers. One that agrees with several groups, its
    holders all in one of them, ran the program as far as it launched here, not what its holders ran: it goes with
    the largest of the others, where that one is larger than its holders' (the side that departed is the smaller),
    and makes no side larger (had it departed with its holders, it would have issued that collective here as early
    as they did).

    `places`: per rank whose records order its collectives across its communicators, where it issued each of its
    collectives here among the others' (issue_orders.issue_places: a code per position, the count of those it
    issued before it, plus one). One that agrees with several groups by its records, but whose places part it
    from every rank of all but one of them (and agree with every rank of that one), goes with that one: ranks
    that ran one program issue its collectives at one place among their other communicators', so the ranks it
    parts from by places ran another, or departed elsewhere (`_sided_by_places`)."""
    groups: list[tuple[list[int], Codes]] = []
    undecided: list[tuple[int, list[list[int]]]] = []
    sided: list[int] = []  # (ranks that agree with several groups, sided by their issue places)
    # The streams that recorded most go first, and each group compares as everything its members recorded: a
    # stream without call stacks agrees with every group, so it must not found one that the others then join.
    for rank in sorted(codes, key=lambda r: (-codes[r].length, -_recorded(codes[r]), r)):
        matching = [i for i, (_, stream) in enumerate(groups) if agree(codes[rank], stream)]
        if not matching:
            groups.append(([rank], codes[rank]))
        elif len(matching) == 1:
            members, stream = groups[matching[0]]
            members.append(rank)
            groups[matching[0]] = (members, merged([stream, codes[rank]]))
        elif rank in (ended or set()) | (settled or set()) and len(
                same := [i for i in matching if groups[i][1].length == codes[rank].length]) == 1:
            members, stream = groups[same[0]]
            members.append(rank)
            groups[same[0]] = (members, merged([stream, codes[rank]]))
        elif (side := _sided_by_places(rank, [groups[i][0] for i in matching], places)) is not None:
            members, stream = groups[matching[side]]
            members.append(rank)
            groups[matching[side]] = (members, merged([stream, codes[rank]]))
            sided.append(rank)
        else:
            undecided.append((rank, [groups[i][0] for i in matching]))
    groups, regrouped = _regrouped(groups, codes, undecided, ended, incomplete, settled, closed, places)
    sided += regrouped
    groups = _ran_on(groups, codes, incomplete, settled)
    # A stream that agrees with several groups (shorter, cut short, or lacking the field that parts them) tells
    # none of them apart: it goes with the largest, so that it does not make a minority look like half the ranks
    # (the fewest ranks departing is the likeliest explanation; the caveats name the cut).
    victims = {rank: apart for rank, matching in undecided if (apart := _apart_from_holders(rank, matching, held))}
    unplaced = sorted(rank for rank, _ in undecided if rank in (incomplete or ()) and rank not in victims)
    past = {rank: codes[rank].length > _parting(_groups_of_members(groups, matching)) for rank, matching in undecided}
    swing = sum(1 for rank, matching in undecided if rank not in victims and (rank in unplaced or _swings(
        past[rank], rank in (ended or ()), rank in (closed or ())) or rank in (closed or ()) and past[rank]
        and _ends_with_another(codes[rank], matching, groups)))
    # Known to be on neither side: a rank known only by its count, and one whose whole records end before the
    # groups part (it never launched where they do: it lags, or is held back elsewhere); one a report places
    # where they part is on record there.
    aside = {rank for rank, _ in undecided if rank in (unseen or ()) and not (rank in (reported or ()) and past[rank])
             or rank in (closed or ()) and not past[rank]}
    for rank, matching in undecided:
        if rank not in unplaced:
            max(victims.get(rank, matching), key=len).append(rank)
    groups = [(sorted(m), merged(codes[r] for r in m)) for m, _ in groups]
    if len(groups) == 1:
        return with_behind(lengths_only(codes, start, deviants, cut, incomplete), codes, start, behind)
    # Who is the majority is counted over the ranks whose records tell the groups apart: one that sides with
    # either could make the smaller side as large as the larger.
    loose = {rank for rank, _ in undecided}
    decided = [len(set(members) - loose) for members, _ in groups]
    order = sorted(range(len(groups)), key=lambda i: (-decided[i], -len(groups[i][0]), -groups[i][1].length,
                                                      groups[i][0]))
    groups, decided = [groups[i] for i in order], [decided[i] for i in order]
    # The reference is the strict majority, or, where the others split several ways, a group larger than each,
    # even where every stream that agrees with several groups belongs to another one (a stream's end is a cut: what
    # it launched past its records may be either group's).
    majority = decided[0] * 2 > sum(decided) + swing or (len(groups) > 2 and decided[0] > decided[1] + swing
                                                        and not departed_alike([s for _, s in groups], decided, swing))
    # (the ranks issue places sided, where the majority counts them: the answer rests on the issue orders too)
    without = [len(set(members) - loose - set(sided)) for members, _ in groups]
    placed = sorted(sided) if majority and sided and without[0] * 2 <= sum(without) + swing else []
    if not majority and len(groups) > 2:
        # Split several ways with no majority over the whole streams, the ranks may still agree where the streams
        # first part: the first divergent collective is there, and who departed first is the minority there.
        at = first_parting([stream for _, stream in groups])
        first = first_parting_majority([stream for _, stream in groups], codes, at) if at is not None else None
        if at is not None and first is not None:
            # (groups that side with it there part later: the reference is the one a majority holds where they do)
            first = reference_among_alike([stream for _, stream in groups], codes, at, first)
            # A minority there that explains the streams as well says as much: ranks that each departed there may
            # hold one record alike, and no majority says who departed (rival_reference).
            if first is not None and rival_reference(groups, codes, at, first, loose) is not None:
                first = None
        if at is not None and first is not None:
            groups = loose_joined(groups, first, at, loose - set(unplaced), codes)
            groups = [groups[first], *groups[:first], *groups[first + 1:]]
            decided = [decided[first], *decided[:first], *decided[first + 1:]]
            majority = True
    sides = [groups[0]]
    if not majority and len(groups) == 2:
        chosen = [g for g in groups if deviants and set(g[0]) <= deviants]
        if len(chosen) == 1 and not _side_left_unplaced(deviants, unplaced):  # the journal says which side deviated
            sides = [groups[1] if chosen[0] is groups[0] else groups[0]]
            majority = True
        else:
            sides = [groups[0], groups[1]]
    elif not majority:
        # Several groups and none larger than the rest: nothing says which one ran the program, so each is placed
        # against every other (against the first alone, one whose edit against another comes earlier would be
        # placed where it parts from the first only).
        sides = list(groups)
    placements: list[Placement] = []
    whole = True
    outliers: set[int] = set()
    standing: dict[int, list[int]] = {}
    parting: dict[frozenset[int], int] = {}  # a pair of groups (by their first ranks) -> where they have parted by
    for reference_ranks, reference in sides:
        for members, stream in groups:
            if members is reference_ranks:
                continue
            known = bool(deviants and set(members) & deviants)
            # (where the reference's shortest stream ends: an outlier that stopped no sooner got stuck in nothing)
            ends = min((codes[r].length for r in reference_ranks if r in codes), default=None)
            found, held = place_edits(members[0], stream, reference, start, known, ends)
            if found:
                pair = frozenset((members[0], reference_ranks[0]))
                parting[pair] = max(parting.get(pair, 0), max(p.high for p in found))
            for rank in _without_fields(members, stream, codes):
                # The group's stream carries fields this member never recorded (call stacks its NCCL log lacks):
                # where the others' records place the group's edit says nothing of where this member departed,
                # which may be anywhere its own records allow (ranks that agree in what both recorded may still
                # have departed at different lookalikes).
                found += [replace(p, member=rank)
                          for p in place_edits(members[0], codes[rank], reference, start, known)[0]]
            found += _before_own_records(members, codes, reference, start, known, found)
            whole &= held
            outliers.update(members)
            standing[members[0]] = list(members)
            placements.extend(replace(p, rank=members[0]) for p in found)
    if len(sides) > 2 and len(parting) == len(sides) * (len(sides) - 1) // 2:
        # Two groups that have parted by a seq cannot both be the program past it: the first divergent collective
        # comes no later than the earliest such parting of any two (edits that start after it depart later).
        bound = min(parting.values())
        placements = [replace(p, high=min(p.high, bound)) for p in placements if p.low <= bound]
    reference_ranks = sorted(set(codes) - outliers - set(unplaced)) if len(sides) == 1 else sorted(codes)
    named = sorted(outliers) if majority else sorted(codes)
    if not majority:
        # With no majority every rank is named, both sides and those that side with either (whose side is not on
        # record); or, where each of those is known to be on neither side, the two sides alone. (Naming the sides
        # less some of those that side with either would say the rest are known to be on a side.)
        blank = sorted(loose) if loose <= aside else []
        if blank and set(named) - set(blank):
            named = [r for r in named if r not in blank]
            reference_ranks = [r for r in reference_ranks if r not in blank]
            unplaced = blank
        else:
            unplaced = []
    proposal = Proposal(placements, named, reference_ranks, majority, whole, either_side=len(sides) > 1,
                        members=standing, unplaced=unplaced, placed=placed)
    return with_behind(proposal, codes, start, behind) if majority else proposal


def _before_own_records(members: list[int], codes: dict[int, Codes], reference: Codes, start: int, known: bool,
                        found: list[Placement]) -> list[Placement]:
    """The edits of a group's members whose records begin no earlier than where the group's edits are placed (a
    ring that kept fewer entries): the others' earlier records place the group's departure, and say nothing of
    where such a member departed, which may be anywhere before its own records allow, as its own records against
    the reference place it. Each such edit joins the group's, scored below them (theirs stay the likeliest), and no
    later than them (a later one moves no first departure).

    Worked example: ranks 1 and 3 are one all-reduce short from seq 6 on; rank 1's dump reaches back to seq 4 and
    pins its skip at seq 6, rank 3's begins at seq 6. Rank 3 may have skipped seq 5 (or any before): the group's
    answer is seq 1..6, not 6."""
    if not found:
        return []
    low, high = min(p.low for p in found), max(p.high for p in found)
    floor = min(p.score for p in found) - 1
    extra: list[Placement] = []
    for rank in members:
        first = min((int(hit[0]) for values in codes[rank].fields.values() if (hit := np.flatnonzero(values)).size),
                    default=None)
        if first is None or start + first < low:
            continue
        extra += [replace(p, rank=members[0], high=min(p.high, high), score=min(p.score, floor), widest=None)
                  for p in place_edits(members[0], codes[rank], reference, start, known)[0] if p.low < low]
    return extra


def _without_fields(members: list[int], stream: Codes, codes: dict[int, Codes]) -> list[int]:
    """The members that recorded nothing of some field the group's merged stream holds."""
    held = [name for name, values in stream.fields.items() if np.any(values)]
    return [rank for rank in members if any(not np.any(codes[rank].fields.get(name, np.zeros(0))) for name in held)]


def _swings(past_parting: bool, ended: bool, closed: bool) -> bool:
    """Whether a stream that agrees with several groups could make the smaller as large as the larger. One a count
    carries past its records is unrecorded where the groups part, and may be either's. One whose count, or whose
    whole records, end before the groups part never launched where they do: it votes for neither (a rank blocked
    elsewhere, or one that stopped, launched nothing there). Any other that ends before they part is cut there, and
    may have gone on as either did."""
    if ended:
        return past_parting
    return not past_parting and not closed


def _apart_from_holders(rank: int, matching: list[list[int]],
                        held: dict[int, frozenset[int]] | None) -> list[list[int]]:
    """The groups a rank held back elsewhere (`held`, see propose) may be with: of those it agrees with, every one
    but the one that holds all its holders, where a larger one is among them (the marks say the holders departed,
    which the records confirm only where theirs is the smaller side); none where its holders are not all in one."""
    holders = (held or {}).get(rank)
    if not holders:
        return []
    theirs = [members for members in matching if holders <= set(members)]
    others = [members for members in matching if len(theirs) == 1 and members is not theirs[0]]
    return others if others and max(map(len, others)) > len(theirs[0]) else []


def _ends_with_another(stream: Codes, matching: list[list[int]], groups: list[tuple[list[int], Codes]]) -> bool:
    """Whether a whole stream that agrees with several groups (lacking the field that parts them) ends where one
    of them does other than the largest, which it would go with, and not where that one does: its end sides it with
    the other as much as the fewest departures side it with the largest, so it may be either's. Worked example
    (351492): rank 3's call stack parts from rank 2's at seq 2 and it launched 3, rank 2 launched 2 and so did rank
    0 (a count); rank 1's NCCL log, whole, holds 3 lookalikes: it may be rank 3's, or rank 2's gone on past where
    rank 2 was held elsewhere."""
    largest = max(matching, key=len)
    ends = {id(members): s.length for members, s in groups}
    return stream.length != ends.get(id(largest)) and any(
        stream.length == ends.get(id(members)) for members in matching if members is not largest)


def _regrouped(groups: list[tuple[list[int], Codes]], codes: dict[int, Codes],
               undecided: list[tuple[int, list[list[int]]]], ended: set[int] | None,
               incomplete: set[int] | None = None, settled: set[int] | None = None,
               closed: set[int] | None = None, places: dict[int, Codes] | None = None
               ) -> tuple[list[tuple[list[int], Codes]], list[int]]:
    """The groups with every joiner that also agrees with a group founded after it joined taken out again (it
    joined while that group did not exist yet): a stream that recorded less (no call stacks, say) but went on
    longer goes first and joins the first group, whose records it then carries against streams that part from
    that group's founder alone. Such a rank goes with the one group it agrees with once the groups are rebuilt
    without it, or is undecided (added to `undecided`) where it agrees with several.

    Its length still tells: one that went on past the later group's end, as far as only a minority of the ranks
    did (they launched more than most: extra collectives), parts from that group by it and stays. And where the
    groups rebuilt without the joiners are even (the ranks whose records part them outnumber neither side), and
    collectives left out or added are all that parts them, a joiner goes with the one group it agrees with that
    ends where it does: had that group added them, the joiner would end where the other does (where different
    collectives part them too, its length tells nothing of who ran those, and it stays undecided). So does a
    `settled` joiner (its records hold all it launched, and nothing elsewhere held it) where they are not even.
    Where none of that tells, its issue places may (`places`, `_sided_by_places`); the joiners so sided are
    returned beside the groups."""
    if len(groups) < 2:
        return groups, []
    known = [r for r in codes if r not in (incomplete or ())] or list(codes)

    def apart(rank: int, stream: Codes) -> bool:  # ended past `stream`, as far as a minority did
        length = codes[rank].length
        return length > stream.length and sum(codes[r].length >= length for r in known) * 2 < len(known)

    loose = {r for i, (members, _) in enumerate(groups) for r in members[1:]
             if any(agree(codes[r], stream) and not apart(r, stream) for j, (_, stream) in enumerate(groups)
                    if j != i)}
    if not loose:
        return groups, []
    sided: list[int] = []
    for members, _ in groups:  # (in place: the undecided name the groups by their member lists)
        members[:] = [r for r in members if r not in loose]
    rebuilt = [(members, merged(codes[r] for r in members)) for members, _ in groups]
    sizes = sorted((len(members) for members, _ in rebuilt), reverse=True)
    even = sizes[0] * 2 <= sum(sizes)
    for rank in sorted(loose, key=lambda r: (-codes[r].length, -_recorded(codes[r]), r)):
        matching = [i for i, (_, stream) in enumerate(rebuilt) if agree(codes[rank], stream)
                    and not apart(rank, stream)]
        same = [i for i in matching if rebuilt[i][1].length == codes[rank].length]
        # (a group whose records hold all a member launched here, while it runs in other communicators too, may end
        # where that member was held there, not where its program does: its end then tells nothing)
        held = (closed or set()) - (settled or set())
        whole = len(same) == 1 and not any(set(rebuilt[i][0]) & held for i in matching if i != same[0])
        # Where the joiner and every rank of the groups it agrees with are settled, each stream ends where its
        # program did: one that ran another group's program would end where that group does, whatever collectives
        # part the groups. Worked example: rank 3 skipped a drafter pass of 3 and ran on to its program's end, 8
        # collectives; rank 2 ran the pass, 9; whole NCCL logs of lookalikes, 9 each, are rank 2's program.
        ends_tell = len(same) == 1 and all(set(rebuilt[i][0]) | {rank} <= (settled or set()) for i in matching)
        if len(matching) == 1 or rank in (ended or ()) and len(same) == 1 or ends_tell or (
                even and whole or rank in (settled or ())) and len(same) == 1 and all(
                _length_edit(rebuilt[i][1], rebuilt[same[0]][1]) for i in matching if i != same[0]):
            members, _ = rebuilt[matching[0] if len(matching) == 1 else same[0]]
            members.append(rank)
        elif (side := _sided_by_places(rank, [rebuilt[i][0] for i in matching], places)) is not None:
            rebuilt[matching[side]][0].append(rank)
            sided.append(rank)
        else:
            undecided.append((rank, [rebuilt[i][0] for i in matching]))
    return [(members, merged(codes[r] for r in members)) for members, _ in rebuilt], sided


def _sided_by_places(rank: int, matching: list[list[int]], places: dict[int, Codes] | None) -> int | None:
    """Of the groups a rank agrees with by its records (`matching`, their member lists), the index of the one whose
    every rank with places (see propose) the rank's places agree with, where they part it from every rank with
    places of each other group; None where they tell no one group so (a group with no places on record is not
    ruled out, and one whose ranks the places part from each other, one departed elsewhere, rules out nothing).

    Ranks that ran one program issue each of its collectives here after as many of their other communicators'
    collectives, wherever each stopped: a rank whose places part from a group's at a position it shares with it
    did not run that group's program there (or departed in another communicator, a second departure where one
    explains it). Worked example: reanalysis.side_ties_by_issue_places."""
    mine = (places or {}).get(rank)
    if mine is None or len(matching) < 2:
        return None
    fits: list[int] = []
    for i, members in enumerate(matching):
        theirs = [places[r] for r in members if r in places]
        alike = [agree(mine, other) for other in theirs]
        if not theirs or any(alike) and not all(alike):
            return None
        if all(alike):
            fits.append(i)
    return fits[0] if len(fits) == 1 else None


def _ran_on(groups: list[tuple[list[int], Codes]], codes: dict[int, Codes], incomplete: set[int] | None,
            settled: set[int] | None) -> list[tuple[list[int], Codes]]:
    """The groups, with the members of one that went on past where the rest of it stopped split off as a group of
    their own, where the rest are `settled` (their records hold all they launched and nothing elsewhere held them:
    their streams end where their program stopped) and as far as only a minority of the ranks went: ranks that ran
    one program stop at one place, so those that launched more were elsewhere in it (they left out lookalikes, or
    added collectives at the end). Worked example: ranks 0 and 1 launch 4 all-reduces and stop, rank 2 launches 7
    and rank 3 departs visibly at seq 4: rank 2 agrees with ranks 0 and 1 wherever they overlap, yet departed too,
    perhaps first (it skipped one of the lookalikes before seq 4). Only where the records part other ranks too:
    streams that differ in length alone are weighed as such (`lengths_only`)."""
    if len(groups) < 2 or not settled:
        return groups
    known = [r for r in codes if r not in (incomplete or ())] or list(codes)
    out = []
    for members, stream in groups:
        top = max(codes[r].length for r in members)
        ahead = [r for r in members if codes[r].length == top]
        rest = [r for r in members if codes[r].length < top]
        if rest and set(rest) <= settled and sum(codes[r].length >= top for r in known) * 2 < len(known):
            members[:] = rest  # (in place: the undecided name the groups by their member lists)
            out += [(members, merged(codes[r] for r in rest)), (ahead, merged(codes[r] for r in ahead))]
        else:
            out.append((members, stream))
    return out


def _length_edit(stream: Codes, reference: Codes) -> bool:
    """Whether collectives left out or added are all that parts `stream` from `reference` (no different ones: a
    length that parts them then tells who left out or added them).

    Where the lengths differ, a block of different collectives is no rival to a collective left out or added that
    alone explains every record: it leaves the difference in length to explain, by such a collective beside it (two
    edits where one does). Worked example: rank 0 left out a drafter pass of two collectives at seq 1; only rank 2's
    dump reaches back to the pass's second collective, whose call stack parts it from rank 0's there. Rank 0 issuing
    another collective there explains that one record too, but not that it launched two fewer."""
    found, whole = place_edits(0, stream, reference, 0)
    shifts = [p for p in found if p.kind in (EditKind.MISSING, EditKind.EXTRA)]
    diff = stream.length - reference.length
    if diff:
        kind = EditKind.EXTRA if diff > 0 else EditKind.MISSING
        return whole and any(p.kind is kind and p.size == abs(diff) for p in shifts)
    return whole and bool(found) and len(shifts) == len(found)


def _groups_of_members(groups: list[tuple[list[int], Codes]], matching: list[list[int]]) -> list[Codes]:
    """The streams of the groups whose member lists are `matching`."""
    return [stream for members, stream in groups if any(members is m for m in matching)]


def _parting(streams: list[Codes]) -> int:
    """The first position where the streams may not all pair (the shorter's end where they agree throughout)."""
    first, at = streams[0], None
    for other in streams[1:]:
        n = min(first.length, other.length)
        bad = np.flatnonzero(~compatible(first, 0, other, 0, n))
        here = int(bad[0]) if bad.size else n
        at = here if at is None else min(at, here)
    return first.length if at is None else at


def _side_left_unplaced(deviants: set[int] | None, unplaced: list[int]) -> bool:
    """Whether some rank the gate journal names a deviant is one the records leave on neither side (cut before
    the groups part). The journal then puts it on the side of the group it names, which is only part of that side:
    the group is no minority by the records, and where the journal has none either (two passed, two skipped) it
    says which side ran the drafter, not which one departed. Rank 1 ahead of rank 2, ranks 0 and 3 cut short, and
    the journal's ranks 1 and 3 passed where 0 and 2 skipped: a tie of two against two, not rank 1 alone."""
    return bool(deviants and deviants & set(unplaced))


def _recorded(stream: Codes) -> int:
    """How many field values the stream recorded."""
    return sum(int(np.count_nonzero(values)) for values in stream.fields.values())
