"""A tie the records leave, broken by ranks that issued a collective late among their other communicators', where
the counts do not show them short.

Where a communicator's records part its ranks with no majority (fingerprints of one side only past where the
other side's traces end, say), each rank's issue order across its communicators may still place every seq: the
program's place is where a strict majority issued it (issue_orders.program_places). A rank that issued a seq here
after more of its other communicators' collectives than the program has before it went on elsewhere past where
the program issues it: it left collectives out here (left_out_here.skipped_here), between the last seq it placed
where the program does, at a seq the program issues apart from the next one, and that seq. Its count need not show
it: once it left them out, it ran on into the next step, whose collectives make its count up. So, of the ranks the
tie names, those the orders show late departed, and the rest, placed where the program is, are the reference, a
majority; the root is where the tie's range and the late ranks' own range meet.

Interleave.issue_order_split reads only the other direction (a minority issued early: an extra collective); a rank
placed late it leaves to the counts, which is this case where they are equal. Ranks that another communicator's
records show departing there (`apart`) have places off by that departure: none of them is read. Nor do the orders
side anyone where the records of the rest part up to the root: a rank cut short has no place past its cut, so it
never shows late, yet its records may side with a late rank (a tie of two against two, not three against one).

Worked example (1209067): ranks 0 to 3 are a TP group; rank 3's drafter gate skipped alone at step 1. Only rank 3's
fingerprints reach past step 0, and its step-1 sums are wrong from TP seq 5: a tie of rank 3 against ranks 0, 1 and
2, all of which launched 8 TP collectives. Ranks 0, 1 and 2 issue TP seq 7 after 2 world collectives, rank 3 after
3: rank 3 went on past where the program issues seq 7, and left out collectives among seqs 5..7.
"""

from __future__ import annotations

from dataclasses import replace

from ..model.kinds import is_p2p_comm
from .answers import MISSING, STOPPED, Root
from .compared_alike import records_part
from .issue_orders import program_places
from .left_out_here import skipped_here
from .narrowing import ISSUE_ORDER
from .streams import Streams


def late_side_of_tie(root: Root, streams: Streams, apart: frozenset[int] = frozenset()) -> Root | None:
    """The tie `root` with the ranks the issue orders show late (they left collectives out here) as its outliers
    and the rest of its ranks as the reference, a majority; None where the orders place no such side (see the
    module docstring). `apart`: ranks whose records show them departing in another communicator."""
    if root.majority or not root.shown or root.kind == STOPPED or root.seq_range is None \
            or is_p2p_comm(root.comm):
        return None
    found = program_places(streams, root.comm)
    if found is None:
        return None
    places, launched, program = found
    named = {*root.outlier_ranks, *root.reference_ranks, *root.unplaced_ranks}
    if not named or not named <= set(places) or named & apart:
        return None
    late = skipped_here(streams, root.comm, sorted(named))
    rest = sorted(named - set(late))
    if not late or len(rest) <= len(late):
        return None
    # (a count that shows a late rank short is read by the counts' own roots: this is where they are equal)
    if min(launched[r] for r in late) < min(launched[r] for r in rest):
        return None
    high = max(hi for _, hi in late.values())
    # The reference must be the program wherever it placed the seqs up to the late ranks' range: a rank of it
    # placed apart there departed too, and the orders then side no one.
    if any(seq in places[r] and seq <= launched[r] and places[r][seq] != program[seq]
           for r in rest for seq in program if seq <= high):
        return None
    low = max(root.seq_range[0], min(lo for lo, _ in late.values()))
    top = root.seq_range[1] if root.seq_range[1] is not None else high
    top = min(top, high)
    if low > top:
        return None  # (the orders' range misses the records' one: they tell of another departure)
    if records_part(streams, root.comm, rest, top):
        # The records part the rest up to the root: not all of them ran the program there, and one cut short (its
        # places end before they could show it late) may have left out what the late ranks did.
        return None
    return replace(root, seq=low, seq_range=(low, top), outlier_ranks=sorted(late), reference_ranks=rest,
                   unplaced_ranks=[], majority=True, kind=MISSING, kinds=(MISSING,),
                   narrowed_by=(*root.narrowed_by, ISSUE_ORDER))
