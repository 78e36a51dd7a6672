"""The root of one communicator: every explanation the records allow, narrowed by every piece of evidence.

The model. The ranks of a communicator run one program. An outlier rank's stream is that program with an edit
in it: collectives of its own inserted (`extra`), program collectives left out (`missing`), or a block of
different ones in their place (`different`). Every rank's records stop somewhere (a wedge, a kill, a dump taken
while it ran), and a Flight Recorder ring may have lost their beginning: both ends of a stream are cuts, never
evidence that nothing came before or after.

A `Placement` is a set of explanations: one edit kind and size on one outlier, starting anywhere in a range of
seqs. The records propose placements: an edit is possible where the outlier's stream, shifted by the edit,
pairs with the reference stream position by position over everything both have on record. Two positions may
pair when every field both sides recorded is equal (op, count, dtype, reduction, root, call stack, tag, step);
a field one side did not record constrains nothing. Other evidence then narrows the placements as
`Constraint`s: results checked against their expected value (a wrong one is misaligned, a right one aligned),
and the step at which the drafter gates disagreed. A constraint that would leave nothing is a contradiction:
it is reported with both sides' evidence and the answer keeps what the records alone allow.

Worked example (long-window, signatures alone): rank 1 has 91 AllReduces of 1024 floats, ranks 0, 2, 3 have 90
of the same. An insertion of one collective anywhere in seq 1..91 explains that, so the answer is 1..91. The
fingerprint tags say rank 1's seq 8 is `draft` where the others' is `layer1`, and rank 1's seq 9..91 pair with
the others' 8..90 tag for tag: only an insertion at seq 8 survives, and the root is pinned there.

This module holds `solve`. The answer it builds is a `Solution` (solution.py), the constraints and how they narrow
are in narrowing.py, and the edits a stream's records hide before a stop or a group's departure in hidden_edits.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ..model import Location
from .edits import Codes, EditKind, Placement, agree, blocks_through, merged, place_edits
from .hidden_edits import hidden_departures, unpinned_departures
from .left_out_tags import LEFT_OUT_TAGS, left_out_tags, told_by_left_out_tags
from .narrowing import ISSUE_ORDER, PARTED_COMPLETIONS, Constraint, apply
from .propose import propose
from .proposal import Proposal, span_of, within
from .richer_fields import lengths_later, lone_recorder_tie, one_side, parted_sooner, parts_earlier, picks_side
from .solution import Contradiction, Solution

__all__ = ["solve"]


# -- one answer ---------------------------------------------------------------------------------------------------


def solve(code_stages: list[tuple[str, Callable[[], dict[int, Codes] | None]]], start: int,
          constraints: list[Constraint], basis: Callable[[int], tuple[Location, ...]],
          deviants: set[int] | None = None, prefer: EditKind | None = None,
          behind: set[int] | None = None, cut: set[int] | None = None,
          ended: set[int] | None = None, incomplete: set[int] | None = None,
          unseen: set[int] | None = None, lookalikes: bool = True, closed: set[int] | None = None,
          settled: set[int] | None = None, held: dict[int, frozenset[int]] | None = None,
          reported: set[int] | None = None, places: dict[int, Codes] | None = None) -> Solution | None:
    """Propose from the records field set by field set (signatures first, then each richer field), keep each
    stage that narrows without changing who the outliers are, then narrow by every constraint.

    `code_stages`: (label, codes) where each stage adds fields to the last; `basis(seq)` gives the records'
    locations at a seq, for contradictions. `lookalikes`: streams that agree throughout may still hold an edit
    among lookalikes where results read back wrong (False where the ranks are grouped by their results: agreement
    among them says nothing). `places`: where each rank issued its collectives here among its other communicators'
    (see propose).
    """
    proposal: Proposal | None = None
    chosen: dict[int, Codes] = {}  # the codes the proposal was made from
    pinned_by = ""
    narrowed: list[str] = []
    stages: list[str] = []  # every stage so far; each adds fields to the last
    compared: list[str] = []  # the stages up to the last one whose proposal was kept
    richest: dict[int, Codes] = {}  # the last stage's codes
    widened: Proposal | None = None  # the proposal a richer field that parts the same ranks earlier widened
    parted_earlier: tuple[str, int, int] | None = None
    lone_field: tuple[str, int, int] | None = None  # (see Solution.lone_field)
    tied: Proposal | None = None  # the proposal that named a lone recorder of a richer field beside the outliers
    fields_before: set[str] = set()
    for label, make in code_stages:
        codes = make()
        if codes is None:
            continue
        added_fields = {f for c in codes.values() for f in c.fields} - fields_before
        fields_before |= added_fields
        stages.append(label)
        richest = codes
        found = propose(codes, start, deviants, behind, cut, ended, incomplete, unseen, closed, settled, held,
                        reported, places)
        if found is None or not found.placements:
            continue
        if proposal is not None:
            found = one_side(found, proposal, codes)
        # Records that differ beat streams that differ in length only (a trace flushed per step, a cut), where
        # they depart no later: the first departure is theirs.
        earlier = found.shown and not proposal.shown and (span_of(found.placements)[0] <= span_of(
            proposal.placements)[0] or lengths_later(found, proposal, codes, start)) \
            if proposal is not None and proposal.placements else False
        if proposal is None or (proposal.stopped and not found.stopped) or earlier:
            if earlier:
                narrowed.append(label)
            proposal, pinned_by, compared, chosen = found, label, list(stages), codes
            continue
        added = set(found.outliers) - set(proposal.outliers)
        more = added and set(found.outliers) > set(proposal.outliers) and found.shown
        if more and found.reference and set(found.reference).isdisjoint(added):
            reference = merged(codes[r] for r in found.reference)
            more = all(not agree(codes[r], reference) for r in added)  # not merely unrecorded where others differ
        if more:
            # A richer field shows more ranks departing (where the others' records may only have differed in
            # length): they do, and the first departure may be theirs.
            proposal, pinned_by, compared, chosen = found, label, list(stages), codes
            narrowed.append(label)
            continue
        if picks_side(found, proposal, chosen, start):
            # A poorer field that only some ranks recorded split them evenly; a richer one more of them recorded
            # names one side of that split as a minority: it says who departed, within where.
            proposal, pinned_by, compared, chosen = found, label, list(stages), codes
            narrowed.append(label)
            continue
        if (wider := parts_earlier(found, proposal)) is not None:
            # A richer field parts the same ranks before the poorer ones do: either may say where they diverged.
            # (where its records part nobody sooner, the widening is of lookalikes, and says no more than they do)
            parted_earlier = (label, span_of(found.placements)[0], span_of(proposal.placements)[0]) \
                if parted_sooner(codes, chosen) else None
            proposal, compared, chosen = wider, list(stages), codes
            widened = proposal
            continue
        if set(found.outliers) != set(proposal.outliers) or not within(found, proposal):
            continue  # a field that moves the answer rather than narrowing it is not trusted
        if (tie := lone_recorder_tie(found, proposal, codes, added_fields, start)) is not None:
            # The richer field parts the outliers from one rank of the reference alone (the rest recorded none of
            # it), and no one edit explains their streams against it: that rank may have departed itself.
            proposal, compared, chosen = tie, list(stages), codes
            lone_field = (label, *[r for r in tie.outliers if r not in found.outliers], span_of(found.placements)[0])
            tied = tie
            continue
        if span_of(found.placements) != span_of(proposal.placements):
            narrowed.append(label)
            pinned_by = label
        proposal, compared, chosen = found, list(stages), codes
    if proposal is not None and proposal.placed and ISSUE_ORDER not in narrowed:
        # (ranks that agree with either side by their records counted for one by where they issued them)
        narrowed.append(ISSUE_ORDER)
    told = told_by_left_out_tags(proposal, richest, start) if proposal is not None else None
    if told is not None:
        # A tie whose named ranks' own records of a step leave out a tag the steps repeat: those departed, where
        # those records say (no edit their streams may hide before it: their own records place it).
        proposal, chosen, pinned_by = told, richest, LEFT_OUT_TAGS
        narrowed.append(LEFT_OUT_TAGS)
    if proposal is None:
        proposal = _misaligned_lookalikes(richest, start, constraints) if lookalikes else None
        if proposal is None:
            return None
        pinned_by, compared, chosen = "fingerprints", list(stages), richest
    hidden = hidden_departures(proposal, chosen, start, unseen) if told is None else []
    solution = Solution(proposal.placements + hidden, proposal.outliers, proposal.reference, proposal.majority,
                        pinned_by, narrowed, departs_again=not proposal.whole, prefer=prefer,
                        either_side=proposal.either_side, shown=proposal.shown, told=proposal.told,
                        compared=compared, members=proposal.members, unplaced=proposal.unplaced,
                        parted_earlier=parted_earlier if proposal is widened else None,
                        lone_field=lone_field if proposal is tied else None,
                        unpinned=unpinned_departures(proposal, chosen, start) if told is None else [],
                        reference_end=_settled_end(proposal, chosen, start, settled),
                        settled=frozenset(settled or ()))
    if proposal.stopped:
        if not any(getattr(c, "wrong", None) for c in constraints):
            return solution
        # Results read back wrong: the group ran misaligned, so the ranks that launched fewer did not merely stop
        # after their last record; they left collectives out at or before the first wrong result (or ran others
        # of their own and then blocked elsewhere, which their records cannot tell from it).
        skipped = _skips(chosen, proposal, start)
        if not skipped:
            return solution
        solution.placements = skipped + solution.placements
    # Blocks of different collectives where completions part streams that differ in length only: narrowed by
    # every constraint beside the records' placements, and joined to them after (they neither rule out the
    # records' explanations nor stand in for those a contradiction adds).
    blocks = _different_then_stopped(chosen, proposal, start, constraints) if not proposal.shown else []
    for constraint in constraints:
        blocks = [n for p in blocks if (n := constraint.narrow(p)) is not None]
        solution.unpinned = [n for p in solution.unpinned if (n := constraint.narrow(p)) is not None]
        kept = apply(solution.placements, constraint, joint=solution.majority and not solution.either_side)
        if kept is None and not solution.shown and not getattr(constraint, "wrong", True):
            # Streams that differ in length only, and results checked right wherever an edit could be: the longer
            # stream is not ahead, the others' records stop short of it (a trace flushed per step, a cut).
            return None
        if kept is None:
            low, high = solution.seq_range
            solution.contradictions.append(Contradiction(constraint.label, (low, high),
                                                         tuple(constraint.locs) + basis(low)))
            solution.placements += _misaligned_by(constraint, solution.placements)
            continue
        if span_of(kept) != span_of(solution.placements):
            solution.narrowed_by.append(constraint.label)
            solution.pinned_by = constraint.label
        solution.placements = kept
        if getattr(constraint, "wrong", None):
            # results read back wrong: misaligned, whatever records say
            solution.by_results = solution.by_results or not solution.shown
            solution.shown, solution.told = True, False
    solution.placements += blocks
    return _unplaced_left_out(_unplaced_reached(solution, chosen, start), richest, start)


def _unplaced_reached(solution: Solution, codes: dict[int, Codes], start: int) -> Solution:
    """A solution with no majority that left ranks unplaced whose records, cut short, end before the streams part
    by length, where other evidence (results read back wrong) places the parting within those records: they go on
    past it, agreeing with either side, so they side with either, and every rank is named (as propose names every
    rank that sides with either where no majority decides). Left unplaced, they would present one side as the lone
    one that departed. Worked example: ranks 1 and 3 launched 12, rank 2 11, and rank 0's log was cut, its trace
    reading back 11 whose results from seq 9 on are wrong, as rank 2's: it may be on either side, two against two."""
    if solution.majority or not solution.by_results or not solution.unplaced or not solution.placements:
        return solution
    high = solution.seq_range[1]
    if not any(r in codes and start + codes[r].length > high for r in solution.unplaced):
        return solution
    solution.outliers = sorted({*solution.outliers, *solution.reference, *solution.unplaced})
    solution.unplaced = []
    return solution


def _unplaced_left_out(solution: Solution, codes: dict[int, Codes], start: int) -> Solution:
    """A solution with a majority whose outliers' own records of a step leave out a tag the steps repeat (see
    left_out_tags.py), each at one seq within the root's range, that left ranks unplaced (records cut short): an
    unplaced rank whose own records of a step leave out a tag at that same seq departed with them. The majority ran
    more there (the solution says so), so no other rank need have recorded the tag left out in that step. Worked
    example: of 64 ranks, 19, 20 and 49 read step 1 back with mlp0 left out (the rest wait on their last collective
    of it, their traces end at step 0); 20 and 49 launched one fewer, and rank 19's log was cut before it: it left
    mlp0 out at the seq where 20 and 49 did."""
    if not solution.majority or not solution.unplaced or not solution.placements or not solution.outliers:
        return solution
    left = left_out_tags(codes, start, seen=False)
    low, high = solution.seq_range
    seqs = {left.get(r) for r in solution.outliers}
    if len(seqs) != 1 or (seq := seqs.pop()) is None or not low <= seq <= high:
        return solution
    joined = [r for r in solution.unplaced if left.get(r) == seq]
    if not joined:
        return solution
    outliers = sorted({*solution.outliers, *joined})
    if len(outliers) * 2 >= len(codes):
        return solution
    model = [p for p in solution.placements if p.rank == solution.outliers[0]]
    solution.placements += [replace(p, rank=r) for r in joined for p in model]
    solution.outliers = outliers
    solution.unplaced = [r for r in solution.unplaced if r not in joined]
    return solution


def _misaligned_by(constraint: Constraint, placements: list[Placement]) -> list[Placement]:
    """Where results that read back wrong rule out every edit the records place (a stop after the first wrong one,
    say), both stand, as a contradiction, and the answer may not choose: the ranks ran misaligned somewhere after
    the last right result before the first wrong one, which the records did not show. Those placements join the
    records' ones, each outlier's below its own (the records' explanation stays the likeliest kind)."""
    wrong = getattr(constraint, "wrong", ())
    if not wrong:
        return []
    first = min(wrong)
    before = [s for s in getattr(constraint, "right", ()) if s < first]
    low = max(before) + 1 if before else 1
    floor = min((p.score for p in placements), default=0) - 1
    return [Placement(rank, kind, 1, low, first, score=floor) for rank in dict.fromkeys(p.rank for p in placements)
            for kind in (EditKind.EXTRA, EditKind.MISSING)]


def _settled_end(proposal: Proposal, codes: dict[int, Codes], start: int, settled: set[int] | None) -> int | None:
    """The last seq the reference's records hold, where every reference rank is settled (its records hold all it
    launched here, and nothing elsewhere held it): where its program stopped it (Solution.reference_end)."""
    reference = [r for r in proposal.reference if r in codes]
    if not reference or not set(reference) <= (settled or set()):
        return None
    return max(start + codes[r].length - 1 for r in reference)


def _misaligned_lookalikes(codes: dict[int, Codes], start: int, constraints: list[Constraint]) -> Proposal | None:
    """Streams that agree in everything recorded, yet results read back wrong: the ranks ran misaligned on
    collectives that look alike (an edit among lookalikes shows in no record). No record says which ranks departed,
    so every rank is named, on either side, unless the ranks with no record of the first wrong result are a
    minority: those are named; the results say where (at or before the first wrong one, after the right ones: the
    constraints narrow these placements)."""
    wrong = [s for c in constraints for s in getattr(c, "wrong", ())]
    if len(codes) < 2 or not wrong or min(wrong) < start:
        return None
    first = min(wrong)
    # Every member of a misaligned collective read it back (it completed on all of them). Where the ranks with a
    # record of the first wrong result are a strict majority, alike in all they recorded there and after, the
    # rest, with no record of it, ran the other collective: the fewest departing.
    at = first - start
    blank = [r for r in sorted(codes) if codes[r].length <= at or not any(v[at] for v in codes[r].fields.values())]
    named = blank if blank and len(blank) * 2 < len(codes) else sorted(codes)
    placements = [Placement(rank, kind, 1, start, first) for rank in named
                  for kind in (EditKind.EXTRA, EditKind.MISSING)]
    placements += [Placement(rank, EditKind.DIFFERENT, 1, first, first) for rank in named]
    if named == blank:
        return Proposal(placements, blank, [r for r in sorted(codes) if r not in blank], True, True,
                        members={rank: [rank] for rank in blank})
    return Proposal(placements, sorted(codes), sorted(codes), False, True, either_side=True,
                    members={rank: [rank] for rank in codes})


def _different_then_stopped(codes: dict[int, Codes], proposal: Proposal, start: int,
                            constraints: list[Constraint]) -> list[Placement]:
    """Where streams that differ in length only parted at a seq by their completions (one rank completed it while
    another timed out in its own collective there, `PARTED_COMPLETIONS`): a block of different collectives through
    that seq, on each rank the proposal places edits on, against the rest of the reference. A swap or substitution
    whose pair completes on one side (an all-gather and an all-reduce of equal bytes) leaves the other side stuck
    in it, launching nothing more: its stream ends short, which reads as lengths alone, yet no collective was added
    or left out. Worked example: ranks 2 and 3 swap a layer's all-reduce and the logits' all-gather at seq 13; the
    pair at 13 completes, and at 14 rank 2's all-gather completes while rank 3's all-reduce never does. Rank 3's
    trace stops a step before (its step never finished), so nothing recorded differs: the block may start anywhere
    its trace left unrecorded, up to 14."""
    parted = [s for c in constraints if getattr(c, "label", None) == PARTED_COMPLETIONS for s in c.wrong]
    if not parted:
        return []
    seq = min(parted)
    found: list[Placement] = []
    for rank in dict.fromkeys(p.rank for p in proposal.placements):
        if rank not in codes:
            continue
        mine = set(proposal.members.get(rank, [rank])) | {rank}
        others = [r for r in proposal.reference if r not in mine and r not in proposal.stopped and r in codes]
        if others:
            found += blocks_through(rank, codes[rank], merged(codes[r] for r in others), start, seq)
    return found


def _skips(codes: dict[int, Codes], proposal: Proposal, start: int) -> list[Placement]:
    """Collectives left out anywhere in the records of the ranks that stopped short, against the others'."""
    keep = [r for r in proposal.reference if r not in proposal.stopped]
    if not keep:
        return []
    reference = merged(codes[r] for r in keep)
    skips = [p for rank in proposal.stopped for p in place_edits(rank, codes[rank], reference, start, known=True)[0]
             if p.kind is EditKind.MISSING]
    # The same ranks may instead have run collectives of their own there and then blocked elsewhere: their
    # records, one for one with the others' up to their end, do not tell the two apart.
    return skips + [replace(p, kind=EditKind.EXTRA, score=p.score - 1) for p in skips]
