"""The edits a stream's records hide before the departure they show: before a stop (the end of a rank's records
is a cut), and before or after the departure of a group a stream joined by its length only.

`solve` (root.py) adds the hidden departures of a group's members, and keeps apart those after the group's
(`unpinned_departures`); divergence.py widens a stop by `edits_before_stop`. They are apart from the solver: each
reaches from an answer already found.
"""

from __future__ import annotations

from dataclasses import replace

from .edits import Codes, EditKind, Placement, agree, merged, place_edits
from .narrowing import Constraint, narrowed
from .proposal import Proposal
from .solution import Solution


def hidden_departures(proposal: Proposal, codes: dict[int, Codes], start: int,
                      unseen: set[int] | None = None) -> list[Placement]:
    """Edits of a group's members whose own records do not show the group's departure. A stream that lacks the
    field parting a group from the reference (an NCCL log without the call stacks the others' dumps have) agrees
    with both, and joins the group by its length only: it departed too, but its records say nothing of where the
    group's did. It may have left out (or added) a collective anywhere its own records allow against the
    reference, earlier than the group: every such edit joins the group's, scored below them (the group's stays the
    likeliest), and no later than them (a later one moves no first departure).

    Worked example: ranks 0..6 keep dumps with call stacks or NCCL logs, all-reduces alike in signature; rank 2's
    dump shows it skipped seq 22; rank 7, one short too, kept an NCCL log only. Rank 7 may have skipped any of seq
    1..22: the answer is seq 1..22, not 21..22.

    The group's placements are named after its lowest rank, which need not be the one whose records placed them:
    a rank known only by PyTorch's count of what it launched (`unseen`: no records of its own) may be that rank,
    and is weighed as any other member; its edits say so (`Placement.unrecorded`), as nothing but a count places
    them. Worked example: rank 5's records show it skipped seq 3; rank 3 left nothing, and a peer's desync report
    counts it one short too. Rank 3 may have left out any of seq 1..3: the answer is seq 1..3, not 3."""
    found: list[Placement] = []
    for rep, rank, reference, own in _joined_by_length(proposal, codes):
        high, floor = max(p.high for p in own), min(p.score for p in own) - 1
        unrecorded = rank if rank in (unseen or ()) else None
        found += [replace(p, score=min(p.score, floor), unrecorded=unrecorded, member=rank)
                  for p in _edits_before(rep, codes[rank], reference, start, min(q.low for q in own), high)]
    return found


def unpinned_departures(proposal: Proposal, codes: dict[int, Codes], start: int) -> list[Placement]:
    """The mirror of `hidden_departures`: the edits a group's member joined by its length only may have made after
    the group's placements end. The others' records (call stacks its NCCL log lacks) pin the group's departure;
    its own records, one short among lookalikes, allow its skip anywhere they reach, so it need not have departed
    where they did. Each edit is the member's own (`rank` and `member` are that rank), kept apart from the
    placements, whose range they must not move: the first departure is the group's, wherever the member's is;
    but a range that names the member reaches as far as they do (Solution.named_range).

    Worked example (1172565): rank 7's call stacks show it skipped seq 1; rank 1, one all-reduce short too, kept an
    NCCL log of all-reduces alike in shape only. Rank 1 may have skipped any of seq 1..11 (it skipped seq 11): the
    root is at seq 1, and a range naming rank 1 beside rank 7 is seq 1..11."""
    if not proposal.majority or proposal.either_side:
        return []  # (a tie's sides are placed against each other: no group stands apart from one reference)
    found: list[Placement] = []
    for _, rank, reference, own in _joined_by_length(proposal, codes):
        high = max(p.high for p in own)
        placed, _ = place_edits(rank, codes[rank], reference, start, known=True)
        found += [replace(p, member=rank, widest=None) for p in placed
                  if p.kind in (EditKind.EXTRA, EditKind.MISSING) and p.high > high]
    return found


def _joined_by_length(proposal: Proposal, codes: dict[int, Codes]
                      ) -> list[tuple[int, int, Codes, list[Placement]]]:
    """(the group's rank the placements name, a member, the reference's merged records, the group's placements)
    for each member of a group whose records agree with the reference's and differ in length only: it joined the
    group by its length, and its records say nothing of where the group departed."""
    if not proposal.shown or not proposal.members or not proposal.placements or not proposal.reference:
        return []
    keep = [r for r in proposal.reference if r in codes]
    if not keep:
        return []
    reference = merged(codes[r] for r in keep)
    found = []
    for rep, members in proposal.members.items():
        own = [p for p in proposal.placements if p.rank == rep]
        if not own:
            continue
        for rank in members:
            if rank not in codes or codes[rank].length == reference.length \
                    or not agree(codes[rank], reference):
                continue  # its records show a departure of their own (or none at all)
            found.append((rep, rank, reference, own))
    return found


def edits_before_stop(solution: Solution, codes: dict[int, Codes], start: int,
                      constraints: list[Constraint]) -> bool:
    """A stop's explanations widened by the edits its records hide: the end of a rank's records is a cut, so a rank
    whose records agree with the others' up to where it stopped may instead have run a block of collectives of its
    own just before (paired with its peers' regular ones, which its records cannot tell from its own where they
    look alike in everything recorded), or left some out, and then blocked elsewhere. Every such edit its records
    allow (`place_edits`, up to MAX_EDIT; none before a record that is provably the program's own collective there)
    joins the stop, each scored below it (the stop stays the likeliest kind), where every constraint allows it
    (results checked right before it, the gate journal's step, the issue orders). The shorter side of a tie of
    lengths that places the longer side's extra collectives alone (`_ends_of_a_tie`) is reached back from the same
    way, and the range then runs over both sides. Returns whether it widened a stop.

    Worked example (NCCL logs alone): ranks 0 and 1 logged eight all-reduces of 1024 floats, rank 3 six. Rank 3
    stopped after its sixth, or ran two of its own at seq 2 (a drafter pass that pairs with the others' layers) and
    then blocked in another communicator: the answer is seq 1..7, not a stop at 7."""
    stops, keep = solution.placements, list(solution.reference)
    tie = not stops or any(p.kind is not EditKind.STOPPED for p in stops)
    if tie:
        stops, keep = _ends_of_a_tie(solution, codes, start)
    stopped = {r for p in stops for r in solution.members.get(p.rank, [p.rank])}
    keep = [r for r in keep if r in codes and r not in stopped]
    if not stops or not keep:
        return False
    reference = merged(codes[r] for r in keep)
    found: list[Placement] = []
    for stop in stops:
        ranks = [r for r in solution.members.get(stop.rank, [stop.rank]) if r in codes]
        for rank in ranks:
            # (an edit held to where records after it confirm another, `Placement.widest`, reaches back as far as
            # it could where a constraint rules those out, as in `solve`)
            edits = [replace(p, score=min(p.score, stop.score) - 1)
                     for p in _edits_before(stop.rank, codes[rank], reference, start, stop.low, stop.high, held=True)]
            for constraint in constraints:
                edits = narrowed(edits, constraint)
            found += [replace(p, widest=None) for p in edits if p.low < stop.low and p.low <= p.high]
    solution.placements = solution.placements + found
    # (a tie's two sides: either one departed, and the range runs over both)
    solution.either_side = solution.either_side or tie and bool(found)
    return bool(found)


def _ends_of_a_tie(solution: Solution, codes: dict[int, Codes], start: int) -> tuple[list[Placement], list[int]]:
    """Where streams that agree differ in length only and no majority says which side departed (two ranks), the
    records place the longer side's extra collectives alone; the shorter side may as well have stopped where its
    records end, after an edit of its own among lookalikes. Its stops, each scored below every placement (the
    records' own explanation stays the likeliest kind), for edits_before_stop to reach back from. Worked example:
    rank 5 ran one drafter all-reduce of its own at seq 3, alike in shape to rank 4's layer there, and then blocked
    in the world comm; rank 4 went on to an all-gather at seq 4. By lengths, rank 4 ran one extra at seq 4, or rank
    5 stopped there, or ran one of its own at seq 3 and then stopped: the answer is seq 3..4. Returns the stops and
    the ranks of the longer side, that they are placed against."""
    if solution.shown or solution.majority or not solution.placements \
            or any(p.kind is not EditKind.EXTRA for p in solution.placements):
        return [], []
    ahead = sorted({p.rank for p in solution.placements} & set(codes))
    if not ahead:
        return [], []
    longest = max(codes[r].length for r in ahead)
    floor = min(p.score for p in solution.placements) - 1
    ends = [Placement(r, EditKind.STOPPED, longest - codes[r].length, start + codes[r].length,
                      start + codes[r].length, score=floor)
            for r in solution.reference if r in codes and r not in ahead and codes[r].length < longest]
    return ends, ahead


def _edits_before(rank: int, stream: Codes, reference: Codes, start: int, low: int, high: int,
                  held: bool = False) -> list[Placement]:
    """The collectives left out or added that a stream agreeing with `reference` as far as it goes allows before
    `low` (its records say nothing of where its own departure is), as edits of `rank` that reach no later than
    `high`: what a stop, or a group the stream joined by its length only, may hide before the edit it shows.
    `held`: also those held at or past `low` by records that confirm another edit, that could start before it
    (`Placement.widest`, kept for a constraint that rules the confirmed ones out)."""
    placed, _ = place_edits(rank, stream, reference, start, known=True)
    return [replace(p, high=min(p.high, high), widest=p.widest if held else None) for p in placed
            if p.kind in (EditKind.EXTRA, EditKind.MISSING)
            and (p.low < low or held and p.widest is not None and p.widest < low)]
