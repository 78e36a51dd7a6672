"""A communicator analysed again, once the first analysis of every communicator is in: ranks behind in one that
stopped, and the ranks' issue orders across communicators, may say who departed where the records alone did not.

The first analysis of a communicator reads its own records. Ranks that launched fewer in a communicator that
stopped, with nothing saying they died or wait elsewhere, are outliers the records cannot show
(`reanalyze_behind_ranks`); and where the records show no majority departing, the order in which each rank issued
its collectives across its communicators may place an extra collective, a skipped one, or a peer held back
(`reanalyze_by_issue_orders`, interleave.py), or side the ranks whose records agree with either side of a tie
(`side_ties_by_issue_places`). They need every communicator's analysis to read one against the others, so they
run after it and replace a communicator's analysis in place.
"""

from __future__ import annotations

from dataclasses import replace

import polars as pl

from ..model.kinds import is_p2p_comm
from .answers import MISSING, STOPPED, CommAnalysis, Root
from .divergence import analyze_comm
from .early_in_tie import early_side_of_tie
from .enqueue_marks import EnqueueMarks
from .gates import GateDisagreement
from .interleave import (
    beside_early_issuers,
    held_by_early_issuers,
    issue_order_root,
    issue_order_split,
    stops_past_the_ranks_behind,
    with_early_issuers,
    with_stops_past_the_program,
)
from .issue_order_ties import issue_order_tie_root, narrows_tie
from .issue_orders import place_codes
from .late_in_tie import late_side_of_tie
from .left_out_before import left_out_root
from .left_out_here import early_elsewhere, skipped_here
from .narrowing import ISSUE_ORDER
from .notes import DepartedLater, Note
from .ran_ahead import extras_ahead, with_extras_ahead
from .streams import SIGNATURE, Streams
from .waiting import waiting_elsewhere


def reanalyze_behind_ranks(analyses: dict[str, CommAnalysis], streams: Streams, gate: GateDisagreement | None,
                  stops: dict[str, list[str]], dead: set[int],
                  marks: dict[str, EnqueueMarks] | None = None) -> None:
    """In a communicator that stopped, ranks that launched fewer than the others, with nothing saying they died,
    skipped collectives or are blocked elsewhere: analyse the communicator again with them as outliers. `marks`:
    PyTorch's counts and desync reports, which may say where a rank with no records waits (waiting.py)."""
    for comm, analysis in list(analyses.items()):
        if comm not in stops or len(analysis.ranks) < 3 or is_p2p_comm(comm):
            continue
        root = analysis.root
        # Outliers that ran other collectives than the program (extra ones, say) launched as many as that made
        # them: the others are behind only if they launched fewer than the rest of the reference.
        pacing = set(root.reference_ranks) if root is not None and root.majority and root.kind != STOPPED \
            and root.reference_ranks else set(analysis.ranks)
        most = max(n for r, n in analysis.launched.items() if r in pacing)
        # records ending at a cut file: not behind, unknown (unless PyTorch counts what they launched past it)
        # (or records that are timeout lines alone: the rank launched at least that far, how much further unknown)
        cut = ({r for (c, r) in streams.cut if c == comm} | streams.timeout_only(comm)) - set(analysis.counted) \
            - analysis.whole
        behind = {r for r, n in analysis.launched.items() if n < most} - dead - cut
        named = set(analysis.root.outlier_ranks) if analysis.root is not None and analysis.root.kind != STOPPED \
            else set()
        # (and so did those whose records show them departing after the named ones: the root leaves them off both
        # sides, and they need no block elsewhere either)
        named |= _departed_later(analysis, streams)
        # Where records already show a rank launching something else, ranks behind that also run in another
        # communicator are blocked there by it (a rank in this one alone would have nowhere else to wait), unless
        # their records there say that everything they launched completed (nothing holds them there).
        elsewhere = {r for c, other in analyses.items() if c != comm for r in other.ranks
                     if other.completed.get(r) is None or other.completed[r] < other.launched[r]}
        # (so is one with no records there that a peer's desync report, or PyTorch's counts, show waiting there:
        # `[0] joined but didn't finish collective #4` in its TP peer's log)
        elsewhere |= set(waiting_elsewhere(streams, comm, marks))
        # (the named ones launched as few as their own departure made them: they need no block elsewhere)
        caused = analysis.root is not None and analysis.root.shown and analysis.root.kind != STOPPED \
            and behind - named <= elsewhere
        # Ranks behind that wait in another communicator whose own root has others depart from them (they are its
        # reference) are held there by that departure, whatever this one's records show: ranks 4, 5 and 7 at one
        # world collective, ranks 1, 3 and 6 at two, where rank 6 ran seven TP collectives past 4, 5 and 7, which
        # wait in theirs. Analysed as behind, they would be named beside the world's own extra ranks.
        held = {r for r in behind - named for c, other in analyses.items() if c != comm and _waits_for_departed(other, r)}
        caused = caused or (analysis.root is not None and analysis.root.kind != STOPPED and behind - named <= held)
        if behind and not behind <= named and not caused and len(behind) * 2 <= len(set(analysis.ranks) - cut):
            analyses[comm] = analyze_comm(streams, comm, gate, behind, _counts(analysis), held=analysis.held,
                                          floors=analysis.floors, exact=analysis.exact)


def _departed_later(analysis: CommAnalysis, streams: Streams) -> set[int]:
    """The ranks whose own records show them departing after the root's outliers: a root of records that differ,
    with a majority, names neither side for them (solution.Solution.leading). Worked example: rank 0 swapped two world
    all-reduces at seq 5 and rank 3 ran one of its own at seq 7, where it waits; the root names rank 0, and rank 3,
    one short of ranks 0 and 1, launched as few as its own departure made it."""
    root = analysis.root
    if root is None or not root.majority or not root.shown or root.kind == STOPPED:
        return set()
    sided = {*root.outlier_ranks, *root.reference_ranks, *root.unplaced_ranks, *root.outlier_candidates,
             *root.waiting_candidates}
    return {r for r in analysis.ranks if r not in sided and (analysis.comm, r) in streams.parts}


def _counts(analysis: CommAnalysis) -> dict[int, int]:
    """What PyTorch counts of the ranks cut short, for analysing the communicator again: those counted past their
    records, and those whose records it shows whole."""
    return {**analysis.counted, **{r: analysis.launched[r] for r in analysis.whole}}


def _waits_for_departed(analysis: CommAnalysis, rank: int) -> bool:
    """Whether `rank` waits in this communicator (its last launch there never completed) for ranks its root has
    depart from it: it is of the root's reference, and a majority."""
    root = analysis.root
    if root is None or not root.majority or root.kind == STOPPED or rank not in root.reference_ranks:
        return False
    done = analysis.completed.get(rank)
    return rank in analysis.launched and (done is None or done < analysis.launched[rank])


def reanalyze_by_issue_orders(analyses: dict[str, CommAnalysis], streams: Streams,
                       gate: GateDisagreement | None) -> list[Note]:
    """In a communicator whose ranks launched different numbers of collectives, and whose records show no
    majority departing (only lengths, or no majority), the ranks' issue orders across their communicators may say
    who launched an extra one and who is held back elsewhere (align/interleave.py), or that ranks whose records
    stop short left out a collective here and went on elsewhere. They count only where every other communicator
    of its ranks is one program (no root there), or, where another's records show ranks departing there, without
    those ranks' places; a tie of one rank against one, where one of them issued its next collective early among
    its peers' of such a communicator (early_in_tie.py). Returns the notes of ranks a root no longer names as they
    departed later (_left_out_beside), and of ties so broken."""
    departed_later: list[Note] = []
    for comm, analysis in list(analyses.items()):
        root = analysis.root
        if root is not None and root.majority and root.kind != STOPPED:
            again, later = _left_out_beside(analyses, streams, comm, gate)
            departed_later += later
            if again:
                continue
        if root is not None and root.shown and root.majority and root.kind != STOPPED \
                and not held_back_by_issue_order(streams, comm, root):
            analysis.root = beside_early_issuers(root, streams)
            continue
        if root is not None and root.shown and not root.majority:
            # A rank the issue orders show late left collectives out here, where its count need not show it.
            near = {c for c, members in streams.members.items() if c != comm and set(members) & set(analysis.ranks)}
            late = late_side_of_tie(root, streams, frozenset(_departed_in(
                [analyses[c].root for c in near if c in analyses and analyses[c].root is not None])))
            if late is not None:
                analysis.root = late
                continue
        if len(set(analysis.launched.values())) < 2:
            continue
        others = {c for c, members in streams.members.items() if c != comm and set(members) & set(analysis.ranks)}
        rooted = [analyses[c].root for c in others if c in analyses and analyses[c].root is not None]
        # Another communicator whose records differ runs another program on some ranks; one whose records only
        # end apart is what a collective held back here leaves there, where this one's records show a departure
        # (else an early collective here and one left out there before it read the same).
        if root is not None and root.kind == STOPPED and not any(r.shown or r.kind != STOPPED for r in rooted):
            # (ranks that stopped short elsewhere too leave the places of what they issued before as they were)
            left_out = skipped_here(streams, comm, root.outlier_ranks)
            if left_out:
                # (ranks found behind whose issue orders place nothing stay behind: they skipped collectives or
                # are blocked elsewhere, as before, unless an early issuer holds them back: _beside_left_out)
                analyses[comm] = _beside_left_out(analysis, streams, gate, left_out)
                if analyses[comm].root is not None:
                    # (and those that stopped right after a collective the program does not wait on)
                    analyses[comm].root = with_stops_past_the_program(analyses[comm].root, streams)
                    # (or those that went on elsewhere ran extra collectives there, and stopped: candidates too)
                    if elsewhere := early_elsewhere(streams, comm, left_out):
                        analyses[comm].root = replace(analyses[comm].root, early_in=elsewhere, undecided_comms=tuple(
                            sorted({*analyses[comm].root.undecided_comms, *elsewhere})))
                continue
        broken = early_side_of_tie(root, streams, {c for c in others if c in analyses and analyses[c].root is not None}) \
            if root is not None else None
        if broken is not None:
            analysis.root = broken[0]
            departed_later.append(broken[1])
            continue
        # Ranks whose records show them departing in another communicator issued their collectives there off the
        # program, which moves their places here as an extra collective here would: they side with neither, and
        # the others' places still give the program (a TP group that parts at step 1 leaves its ranks' places of
        # step 0's world collectives where every other rank has them, yet says nothing of them).
        apart = _departed_in(rooted)
        found = issue_order_root(streams, comm, analysis.start, frozenset(apart))
        if found is not None and apart:
            found = replace(found, departed_in={r: apart[r] for r in found.unplaced_ranks if r in apart})
        # (ranks of its reference that launched more, whose own issue orders place an extra collective: they
        # departed too, and a stop naming them beside the ranks held back still reads as the issue orders say)
        with_roots = {c for c in others if c in analyses and analyses[c].root is not None}
        ahead = extras_ahead(streams, found, analysis.launched, with_roots) if found is not None else {}
        if found is not None and found.left_out_in and not _replaceable(root, found, streams, set(ahead)):
            # Places that fit a collective left out elsewhere as well say nothing of this communicator then: they
            # replace no root of its own records but a stop of the same ranks, which they show is no mere stop
            # (its records fit as well extra collectives before it, and the end of records hides their size).
            found = None
        tie = issue_order_tie_root(streams, comm, analysis.start, frozenset(apart)) if found is None else None
        if tie is not None and narrows_tie(tie, root):
            # No majority of the issue orders either: they still narrow the records' tie, and side its ranks.
            analysis.root = replace(tie, departed_in={r: apart[r] for r in tie.outlier_ranks if r in apart})
            continue
        if found is None and not apart and (elsewhere := left_out_root(streams, comm)) is not None:
            # The outliers issued their collective here early and went on elsewhere past the program's next one
            # here: they left collectives out there, which is where they departed, alone.
            theirs = analyses.get(elsewhere.comm)
            if theirs is not None and not (theirs.root is not None and theirs.root.shown):
                theirs.root = with_counted_outliers(elsewhere, theirs.root)
            continue
        if found is not None and rooted and not (root is not None and root.shown):
            # The other communicators' records only end apart: an early collective here and collectives left out
            # there before it read the same, so those stay candidates beside this one.
            found = replace(found, undecided_comms=tuple(sorted({*found.undecided_comms, *(
                c for c in others if c in analyses and analyses[c].root is not None and not analyses[c].root.shown)})))
        if found is not None:
            analysis.root, later = with_extras_ahead(found, ahead)
            # (and those of its reference that stopped right after a collective the program does not wait on)
            analysis.root = with_stops_past_the_program(analysis.root, streams)
            departed_later += later
        elif root is not None:
            # A stop whose ranks behind wait elsewhere, where a rank of its reference stopped right after a
            # collective the program does not wait on: that rank departed, and the ranks behind are held back.
            analysis.root = stops_past_the_ranks_behind(root, streams)
    return departed_later


def _beside_left_out(analysis: CommAnalysis, streams: Streams, gate: GateDisagreement | None,
                     left_out: dict[int, tuple[int, int]]) -> CommAnalysis:
    """The communicator analysed again with the ranks `left_out` (skipped_here) among those behind, and the ranks
    that issued a collective here early added (with_early_issuers): they departed beside those that left one out.
    Ranks behind that such an early issuer holds back in another communicator (held_by_early_issuers) are not
    behind: they stopped where its departure holds them, and the root names them on neither side. Where the root
    then names not every rank holding them back, nothing named explains their stop, and they stay behind."""
    def analysed(behind: set[int]) -> CommAnalysis:
        again = analyze_comm(streams, analysis.comm, gate, behind, _counts(analysis), left_out=left_out,
                             held=analysis.held, floors=analysis.floors, exact=analysis.exact)
        if again.root is not None:
            again.root = with_early_issuers(again.root, streams, left_out)
        return again

    held = held_by_early_issuers(streams, analysis.comm, left_out, set(analysis.behind))
    if held:
        again = analysed(set(analysis.behind) - set(held))
        if again.root is not None and set().union(*held.values()) <= set(again.root.outlier_ranks):
            return again
    return analysed(set(analysis.behind))


def side_ties_by_issue_places(analyses: dict[str, CommAnalysis], streams: Streams,
                              gate: GateDisagreement | None) -> None:
    """Where a communicator's records still part its ranks with no majority once the issue orders' own roots are
    in (reanalyze_by_issue_orders), and some of its ranks side with either by their records (they lack the field
    that parts the others: NCCL logs beside dumps with call stacks), where each rank issued its collectives here
    among its other communicators' may side them (propose, `places`): the communicator is analysed again with those
    places, and its root replaces the tie where it names a majority the places decide, within the tie's ranks and
    range (a narrowing of the same explanations). A rank whose records show it departing in another communicator
    has no places: theirs may be off by that departure.

    Worked example (1128224): rank 4 left out a drafter pass of 3 TP all-reduces, alike in signature to the layers'
    ones; only ranks 4 and 6 left call stacks, which part at TP seq 1, and ranks 5 and 7's NCCL logs pair with
    either. Rank 4 may have been held in the world communicator where its records end, so the lengths (6 against 9)
    side no one. But rank 4 issued the world's all-reduce before its TP seq 1, and ranks 5, 6 and 7 after their TP
    seq 3: ranks 5 and 7 ran rank 6's program, and rank 4 departed, against three."""
    for comm, analysis in list(analyses.items()):
        root = analysis.root
        if root is None or root.majority or not root.shown or root.seq_range is None or is_p2p_comm(comm):
            continue
        others = {c for c, members in streams.members.items() if c != comm and set(members) & set(analysis.ranks)}
        apart = _departed_in([analyses[c].root for c in others if c in analyses and analyses[c].root is not None])
        places = place_codes(streams, comm, analysis.start, frozenset(apart))
        if not places:
            continue
        found = analyze_comm(streams, comm, gate, set(analysis.behind), _counts(analysis), held=analysis.held,
                             floors=analysis.floors, exact=analysis.exact, places=places).root
        if found is not None and found.majority and ISSUE_ORDER in found.narrowed_by \
                and _narrows(found, root):
            analysis.root = found


def _narrows(found: Root, root: Root) -> bool:
    """Whether `found` names some of the ranks `root` names as its outliers, against the rest of them, within its
    seq range."""
    named = {*root.outlier_ranks, *root.reference_ranks}
    if not set(found.outlier_ranks) < named or {*found.outlier_ranks, *found.reference_ranks} != named:
        return False
    (low, high), (lowest, highest) = found.seq_range, root.seq_range
    return low >= lowest and (highest is None or high is not None and high <= highest)


def _departed_in(roots: list[Root]) -> dict[int, tuple[str, ...]]:
    """rank -> the communicators among `roots` whose records show it may have departed there: their outliers,
    those they place on neither side, and with no majority their reference too (either side may have)."""
    found: dict[int, set[str]] = {}
    for root in roots:
        if root.shown:
            for r in {*root.outlier_ranks, *root.unplaced_ranks, *(() if root.majority else root.reference_ranks)}:
                found.setdefault(r, set()).add(root.comm)
    return {r: tuple(sorted(comms)) for r, comms in found.items()}


def with_counted_outliers(found: Root, own: Root | None) -> Root:
    """The issue orders' root `found` of a communicator, with the ranks it leaves unplaced (their records cut
    before the split they read) that the communicator's own root `own` names beside `found`'s outliers, as a
    majority, by what the ranks launched there (counts or lengths: they went on past where the reference stopped,
    as the outliers did): the issue orders say which side of the counts departed, and these are on it by their
    counts, though no place of their own says where they departed (anywhere `own`'s range allows, so the range
    reaches back to its start). Worked example: ranks 57 and 58 skipped a drafter pass and launched 10 in their
    TP group where the rest stopped at 7; rank 58's log is cut before its TP collectives, and only rank 57's issue
    order shows it issued the next world collective early: both departed."""
    if own is None or not own.majority or own.seq_range is None or found.seq_range is None \
            or not set(found.outlier_ranks) < set(own.outlier_ranks):
        return found
    counted = sorted(set(own.outlier_ranks) & set(found.unplaced_ranks))
    if not counted or set(own.outlier_ranks) - set(found.outlier_ranks) - set(counted):
        return found  # (an outlier of the counts that the issue orders place on the reference: they disagree)
    low = min(found.seq_range[0], own.seq_range[0])
    return replace(found, seq=min(found.seq, low), seq_range=(low, found.seq_range[1]),
                   outlier_ranks=sorted({*found.outlier_ranks, *counted}),
                   unplaced_ranks=[r for r in found.unplaced_ranks if r not in counted])


def _replaceable(root: Root | None, found: Root, streams: Streams, ahead: set[int]) -> bool:
    """Whether an issue-order root whose places fit collectives left out elsewhere as well (`found.left_out_in`)
    takes the place of the communicator's own `root`: a stop of the same ranks, which the places show is no mere
    stop; a root whose records part the ranks with no majority where the issue orders side every rank as the
    records allow (`_sides_records_allow`); and, where they give the extra block's size (records that end before
    any later collective here could tell the two readings apart), a stop of its outliers and the ranks they hold
    back elsewhere (with any ranks `ahead`, whose own issue orders place an extra collective: ran_ahead.py), any
    root naming no majority, or a root of lengths alone naming ranks the issue orders place where the program is
    (ranks that went on into the next step launched more, and the early one's extra collective, alike in what the
    records give, made the ranks held back look like their reference): none says more of who departed, and the
    issue orders name the early one, with the other communicators as candidates."""
    if root is None:
        return False
    if root.kind == STOPPED and root.outlier_ranks == found.outlier_ranks:
        return True
    if not root.majority and root.shown and found.majority and _sides_records_allow(streams, root, found):
        return True
    held = set(found.outlier_ranks) | set(found.blocked_elsewhere)
    lengths = not root.shown and root.kind != STOPPED and set(root.outlier_ranks) <= set(found.reference_ranks)
    return bool(found.size) and (not root.majority or lengths
                                 or root.kind == STOPPED and set(root.outlier_ranks) - ahead <= held)


def _sides_records_allow(streams: Streams, root: Root, found: Root) -> bool:
    """Whether the issue orders side every rank on record, and the records part their outliers from their
    reference up to the last seq the early collective can be, and no two of the reference from each other: then
    the records' own split with no majority (call stacks on two ranks alone, one against one, beside logs without
    them) is the issue orders' one, which every rank's whole order of collectives sides. Worked example: ranks 1
    and 3 alone left call stacks, which part at TP seq 18 (a drafter's all-reduce against a layer's, alike in
    signature); rank 1 issued seq 18 after two world collectives, ranks 0, 2 and 3 after three: rank 1 departed,
    against three."""
    parts = streams.comm_parts(found.comm)
    on_record = {*parts, *root.outlier_ranks, *root.reference_ranks, *root.unplaced_ranks}
    if found.seq_range is None or found.seq_range[1] is None or on_record - {*found.outlier_ranks,
                                                                             *found.reference_ranks}:
        return False  # (a rank the issue orders leave unplaced, its records cut short, may be on either side)
    fields = [c for c in (*SIGNATURE, "callsite", "stack", "tag", "step")
              if all(c in parts[r].columns for r in (*found.outlier_ranks, *found.reference_ranks) if r in parts)]
    if not fields:
        return False

    def kinds_per_seq(ranks: list[int]) -> pl.DataFrame:
        high = found.seq_range[1]
        rows = [parts[r].filter(pl.col("seq") <= high).select("seq", *fields) for r in ranks if r in parts]
        if not rows:
            return pl.DataFrame()
        return pl.concat(rows).group_by("seq").agg(pl.col(c).drop_nulls().n_unique() for c in fields)

    def any_apart(counts: pl.DataFrame) -> bool:
        return counts.height > 0 and bool(
            counts.select(pl.any_horizontal(pl.col(c) > 1 for c in fields).any()).item())

    return not any_apart(kinds_per_seq(found.reference_ranks)) and any_apart(
        kinds_per_seq([*found.outlier_ranks, *found.reference_ranks]))


def held_back_by_issue_order(streams: Streams, comm: str, root: Root) -> bool:
    """Whether a root of collectives missing on ranks behind, which their records show (others' results misaligned
    where they have fewer), is what the issue orders read as a peer's extra collective: the ranks behind are those
    the issue orders show stopped where the program goes on elsewhere (held back there), and the range where a
    rank issued one early holds the root's seq. A misaligned pairing there is the extra one's as well, so the
    issue orders, which say who issued it where the program does not, name the root."""
    if root.kind != MISSING or root.seq_range is None:
        return False
    split = issue_order_split(streams, comm)
    return (split is not None and sorted(split.blocked) == sorted(root.outlier_ranks)
            and split.low <= root.seq_range[0] <= split.seq)


def _left_out_beside(analyses: dict[str, CommAnalysis], streams: Streams, comm: str,
                     gate: GateDisagreement | None) -> tuple[bool, list[DepartedLater]]:
    """Ranks of a root's reference that launched fewer here than the rest of it, and whose issue orders show that
    they left out a collective here rather than stopped (left_out_here.skipped_here: they went on elsewhere past where
    the program issues it), departed too: where the collective they left out may come at or before the root's
    last seq, they may have departed first, and the root is analysed again with them among the ranks behind.
    Worked example: rank 1 left out the world's first all-reduce and went on in its tensor-parallel group, while
    rank 0 launched one more in the world: the records place rank 0's extra one at seq 1..2, and the issue orders
    place rank 1's skip at seq 1; both are named. Where the skip comes before every place the records leave the
    outliers' own departure (rank 1 skips seq 4, rank 0's extra one is seq 5), the skip alone is the root, and the
    outliers, departed later, are no longer named: they departed still, and stay out of the reference (a note
    says so). Returns whether it analysed the root again, and that note."""
    analysis = analyses[comm]
    root = analysis.root
    reference = [r for r in root.reference_ranks if r in analysis.launched]
    if not reference or root.seq_range is None or root.seq_range[1] is None:
        return False, []
    most = max(analysis.launched[r] for r in reference)
    fewer = [r for r in reference if analysis.launched[r] < most and r not in analysis.behind]
    left_out = {r: span for r, span in (skipped_here(streams, comm, fewer) if fewer else {}).items()
                if span[0] <= root.seq_range[1]}
    if not left_out:
        return False, []
    again = analyze_comm(streams, comm, gate, set(analysis.behind) | set(left_out), _counts(analysis),
                         left_out=left_out, held=analysis.held, floors=analysis.floors,
                         exact=analysis.exact)
    if again.root is None:
        return False, []
    departed = set(again.ranks) - set(again.root.reference_ranks) - set(again.root.unplaced_ranks)
    if not set(root.outlier_ranks) | set(left_out) <= departed or not set(left_out) & set(again.root.outlier_ranks):
        return False, []
    analyses[comm] = again
    later = tuple(sorted(set(root.outlier_ranks) - set(again.root.outlier_ranks)))
    return True, [DepartedLater(later, root.seq_range, comm, root.pinned_by)] if later else []
