"""Where a richer field (call stacks, tags) parts the ranks and a poorer one ties them: which side the tie takes.

The helpers `solve` in align/root.py uses when the records of several fields disagree on sides.
"""

from __future__ import annotations

from dataclasses import replace

from .codes import first_visible_seq
from .edits import Codes, agree, merged, place_edits
from .proposal import Proposal, span_of


def one_side(found: Proposal, proposal: Proposal, codes: dict[int, Codes]) -> Proposal:
    """A richer field that splits the ranks recording it evenly, where a poorer one already named a minority
    that is one side of that split, and the rest of that side recorded nothing that parts it from the other (it
    sides with either): that side's named ranks departed (the richer field says where, not who), so the split's
    placements of that side are kept, as a narrowing of the same outliers."""
    if found.majority or not found.either_side or not proposal.majority or proposal.stopped \
            or len(found.members) != 2:
        return found  # (a split of several groups: another side's edits against the rest are not the named one's)
    named = set(proposal.outliers)
    sides = [rep for rep, ranks in found.members.items() if named <= set(ranks)]
    if len(sides) != 1:
        return found
    others = [r for rep, ranks in found.members.items() if rep != sides[0] for r in ranks]
    if not others:
        return found
    reference = merged(codes[r] for r in others)
    if any(not agree(codes[r], reference) for r in found.members[sides[0]] if r not in named):
        return found  # more ranks than those named depart with them
    mine = [replace(p, rank=proposal.outliers[0]) for p in found.placements if p.rank == sides[0]]
    if not mine:
        return found
    return Proposal(mine, proposal.outliers, proposal.reference, True, found.whole, shown=found.shown,
                    members={proposal.outliers[0]: list(proposal.outliers)})


def lone_recorder_tie(found: Proposal, proposal: Proposal, codes: dict[int, Codes], fields: set[str],
                       start: int) -> Proposal | None:
    """Where a richer field narrows a poorer one's answer, but of the reference only one rank recorded that field
    (dumps with call stacks for it, NCCL logs without for the rest), and no one edit of the outliers explains their
    streams against it: the field pits the outliers against that one rank, which may itself have departed (an
    outlier's stream that departs from it twice may as well depart once, where the lone rank departed the other
    time). The field is no evidence against the outliers there: the poorer answer stands, and the lone rank is
    named beside the outliers, no majority, each placed against the other from where the field parts them.

    Worked example: ranks 0 and 1 keep NCCL logs, rank 2 a dump, rank 3 both; rank 3 is one all-reduce short
    (signatures: one left out somewhere in seq 8..13, among lookalikes). The call stacks, ranks 2 and 3's alone,
    part them at seq 2 (rank 2 issued two layers' all-reduces in each other's place) and again past seq 9 (rank 3's
    skip): they place rank 3's departure at seq 2 only by a block of a whole step. Rank 2 may have departed at seq 2,
    or rank 3: both are named over the signatures' range, seq 1..13, which holds seq 2."""
    if not found.majority or found.whole or found.stopped or not found.shown or not fields:
        return None
    outliers = set(found.outliers)

    def recorded(rank: int) -> bool:
        return any(f in codes[rank].fields and codes[rank].fields[f].any() for f in fields)

    recorders = [r for r in found.reference if r not in outliers and r in codes and recorded(r)]
    if len(recorders) != 1 or not any(recorded(r) for r in outliers if r in codes):
        return None
    lone = recorders[0]
    theirs = merged(codes[r] for r in found.outliers if r in codes)
    mine, _ = place_edits(lone, codes[lone], theirs, start)
    low = span_of(found.placements)[0]
    floor = min((p.score for p in proposal.placements), default=0) - 1
    placements = proposal.placements + [replace(p, score=min(p.score, floor)) for p in mine if p.low <= low]
    if len(placements) == len(proposal.placements):
        return None
    members = {**proposal.members, lone: [lone]}
    return Proposal(placements, sorted(outliers | {lone}), [r for r in found.reference if r != lone], False,
                    proposal.whole, either_side=True, shown=True, members=members)


def parts_earlier(found: Proposal, proposal: Proposal) -> Proposal | None:
    """Where a richer field parts the very ranks the poorer fields part (the same outliers, the same sides), but at
    an earlier seq: the proposal widened back to there, the richer field's earlier placements beside the poorer
    ones' (scored below them, reaching no later). Both can hold, and neither rules the other out: ranks may issue
    the same collective from different code (call stacks that differ where nothing diverged) and part where the
    signatures do, or issue collectives alike in signature in each other's place (a swap the signatures cannot
    show) where the richer field parts them. So the first divergent collective lies between the two.

    Worked example: ranks 4 and 5, a pair, run all-reduces alike in signature; their call stacks part at seq 1
    (rank 4 issued a layer's MLP before its attention), their signatures at seq 6 (rank 5 issued an all-gather in
    an all-reduce's place). The answer is seq 1..6, not 6."""
    if not found.shown or not proposal.shown or not found.placements or not proposal.placements:
        return None
    if found.stopped or proposal.stopped or set(found.outliers) != set(proposal.outliers):
        return None
    if found.majority != proposal.majority or found.either_side != proposal.either_side:
        return None
    if found.either_side and {frozenset(v) for v in found.members.values()} != {
            frozenset(v) for v in proposal.members.values()}:
        return None  # a split along other lines
    (low, _), (first, high) = span_of(found.placements), span_of(proposal.placements)
    if low >= first:
        return None
    floor = min(p.score for p in proposal.placements) - 1
    earlier = [replace(p, high=min(p.high, high), score=min(p.score, floor), widest=None)
               for p in found.placements if p.low < first]
    return replace(proposal, placements=proposal.placements + earlier,
                   members={**found.members, **proposal.members})


def parted_sooner(richer: dict[int, Codes], poorer: dict[int, Codes]) -> bool:
    """Whether the records part some ranks at an earlier position with the richer field than without it, as
    `parts_earlier`'s widening says they do. A richer field that only leaves an outlier's last record unmatched (a
    call stack no other record has, which a block of its own lookalikes running to its end may hold) widens the
    range back as lookalikes do, and parts nobody sooner."""
    richer_at, poorer_at = first_visible_seq(richer), first_visible_seq(poorer)
    return richer_at is not None and (poorer_at is None or richer_at < poorer_at)


def lengths_later(found: Proposal, proposal: Proposal, codes: dict[int, Codes], start: int) -> bool:
    """Whether a richer field that shows ranks departing at a seq (`found`) leaves the ranks whose streams differed
    in length only under the poorer fields (`proposal`) no edit before that seq: their early placements paired only
    lookalikes, which the richer field tells apart, so the first departure the records show is `found`'s, and the
    lengths differ after it (a trace flushed per step, or ranks that stopped). Worked example: rank 1's trace holds
    a step more than the others' (they hung in that step, their results never read back), which signatures alone
    place as extra collectives from seq 2 on; the tags say rank 0 issued seq 3 and 4 in each other's place, and
    rank 1's records pair with the others' tag for tag: rank 0 departed first, at seq 3."""
    low = span_of(found.placements)[0]
    named = set(found.outliers)
    reference = [r for r in found.reference if r in codes and r not in named]
    late = [r for r in proposal.outliers if r not in named]
    if not late or any(r not in codes for r in late):
        return False
    for rank in late:
        others = [r for r in reference if r != rank]
        if not others:
            return False
        placed, _ = place_edits(rank, codes[rank], merged(codes[r] for r in others), start)
        if any(p.low < low for p in placed):
            return False
    return True


def picks_side(found: Proposal, proposal: Proposal, poorer: dict[int, Codes], start: int = 1) -> bool:
    """Whether a richer field's proposal, with a majority, names as its outliers one side of a poorer field's even
    split (either side may have departed there) and places them within where that split did: the richer field
    decides who departed, as a narrowing (the ranks that did not record the poorer field side with either, and the
    richer one counts them). `poorer`: the codes the split was made from, from seq `start` on.

    The side named may be the split's side as grouped, or the ranks of it whose poorer records part it from the
    other side with any that side with either: a group of the split lumps ranks that recorded nothing there with
    one side or the other. Worked example (seed 740944): eight ranks, tags of every collective, call stacks from
    rings that reach back to the parting on ranks 0 and 6 alone; ranks 2 and 6 issued two layers' all-reduces in
    each other's place. The stacks part rank 0 from rank 6, one against one; the tags part ranks 2 and 6 from
    the six others: rank 6's side departed, and rank 2 (no stack there) with it.

    Outliers of the richer field whose every edit lies past the split depart later, apart from it (rank 4 skipped
    a collective three steps on): they say nothing of the split, and the side is judged by the others' edits."""
    if proposal.majority or not proposal.either_side or proposal.stopped or not found.majority or found.stopped:
        return False
    if not found.shown or not found.placements:
        return False
    low, high = span_of(proposal.placements)
    early = [p for p in found.placements if p.low <= high]
    if not early or min(p.low for p in early) < low or max(p.high for p in early) > high:
        return False
    # (the groups whose edits all lie past the split are left out of the side named)
    named = {r for p in early for r in found.members.get(p.rank, [p.rank])}
    if any(named == set(ranks) for ranks in proposal.members.values()):
        return True
    # Each group of the split whose records part it from another goes wholly with the side named or wholly with
    # the other (a split of several groups as much as one of two): at least one with the side named, and one not
    # (of two groups, the other may have recorded nothing that parts it: its ranks side with either).
    upto = {r: _cut_at(c, high - start + 1) for r, c in poorer.items()}  # (what parts ranks later is another departure)
    parting = [ranks for ranks in _parting_ranks(proposal, upto) if ranks]
    inside = [ranks for ranks in parting if ranks <= named]
    outside = [ranks for ranks in parting if not ranks & named]
    return bool(inside) and len(inside) + len(outside) == len(parting) and (
        bool(outside) or len(parting) == 1 and len(proposal.members) == 2)


def _cut_at(codes: Codes, length: int) -> Codes:
    """The stream's first `length` records."""
    return Codes({name: values[:length] for name, values in codes.fields.items()}, min(codes.length, length))


def _parting_ranks(proposal: Proposal, codes: dict[int, Codes]) -> list[set[int]]:
    """Per group of a split, its ranks whose records part them from another group's (the rest of that group
    recorded nothing that does: they side with either); empty sets for a split whose groups hold no codes."""
    sides = [[r for r in ranks if r in codes] for ranks in proposal.members.values()]
    if len(sides) < 2 or not all(sides):
        return [set() for _ in sides]
    others = [[merged(codes[o] for o in other) for j, other in enumerate(sides) if j != i] for i in range(len(sides))]
    return [{r for r in side if any(not agree(codes[r], theirs) for theirs in others[i])}
            for i, side in enumerate(sides)]
