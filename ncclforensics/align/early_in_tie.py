"""A tie the records leave, broken by where each side issued its next collective among its other communicators'.

Two sides of a communicator part with no majority, and the other ranks' whole records end before the sides part:
they launched as many here as the program has up to there, then went on in their other communicators (or stopped
there), and say nothing of either side here. A rank runs its collectives in issue order across its communicators,
though: a peer of a side's rank in another communicator that runs one program (no root of its own there), whose
whole records end here at seq N and go on there past where that rank issued seq N + 1 here, never issued seq
N + 1 there. That rank issued it early: an extra collective of its own, at N + 1 or before it. Had the program
issued it there instead, every such peer would have left it out, where one rank ran one more.

Read so, one rank against one: the rank shown early departed, and names the root; the other, shown early
nowhere (or not read: its other communicator has a root, and its place there may be off by its own departure
there), needs no departure here once the early one's extra collective is taken out. Where both show early, or
neither, the tie stands. Worked example (949514): rank 1 issues world seq 3 right after world seq 2; ranks 0, 2 and 3, its
peers of a TP group whose records agree, end the world at seq 2 and go on to seven TP collectives without seq 3;
rank 4, the other side, issued world seqs 3 and 4 after its own TP group, where it departed itself. Rank 1 ran one
world collective more.
"""

from __future__ import annotations

from dataclasses import replace

from ..model import Location
from ..model.kinds import is_p2p_comm
from .answers import Root
from .issue_orders import issued_before
from .narrowing import ISSUE_ORDER
from .notes import IssuedEarlyInTie
from .streams import Streams


def early_side_of_tie(root: Root, streams: Streams, rooted: set[str]) -> tuple[Root, IssuedEarlyInTie] | None:
    """The root with the side of its tie that the issue orders show issuing a collective early as its outliers,
    and the note that says so (None where they show no one side so: see the module docstring). `rooted`: the
    communicators with a root of their own (their places may be off by a departure there)."""
    named = sorted(set(root.outlier_ranks))
    if root.majority or set(root.reference_ranks) != set(named) or not root.unplaced_ranks or len(named) != 2 \
            or root.seq_range is None or is_p2p_comm(root.comm):
        return None
    parts = streams.comm_parts(root.comm) if all((root.comm, r) in streams.parts for r in
                                                 streams.members.get(root.comm, [])) else {}
    last = {r: int(part.get_column("seq").max()) for r, part in parts.items() if part.height}
    # the ranks on neither side whose whole records here end alike, before the sides part
    whole = [r for r in root.unplaced_ranks if (root.comm, r) in streams.launch_ends and r in last
             and not any(rank == r for _, rank in streams.cut)]
    ends = {last[r] for r in whole}
    if len(ends) != 1 or len(whole) != len(root.unplaced_ranks):
        return None
    seq = ends.pop() + 1
    if seq < root.seq_range[0] or any(last.get(r, 0) < seq for r in named):
        return None  # (an early collective after the range departs later; a side that never issued it shows none)
    early: dict[int, tuple[str, list[int]]] = {}
    for rank in named:
        mine = issued_before(streams, rank, root.comm, seq)
        if mine is None:
            continue
        for other, members in sorted(streams.members.items()):
            peers = [r for r in whole if r in members]
            if other == root.comm or rank not in members or other in rooted or is_p2p_comm(other) or not peers:
                continue
            theirs = [issued_before(streams, peer, root.comm, seq) for peer in peers]
            if all(t is not None and t.get(other, 0) > mine.get(other, 0) for t in theirs):
                early[rank] = (other, peers)
    if len(early) != 1:
        return None  # (both early, or neither: the tie stands)
    outliers = sorted(early)
    elsewhere = sorted({other for other, _ in early.values()})
    peers = sorted({p for _, ps in early.values() for p in ps})
    rows = parts[outliers[0]].filter(parts[outliers[0]].get_column("seq") == seq).to_dicts()
    where = str(Location(rows[0]["file"], rows[0].get("line"), rows[0].get("record")))
    tie_broken = replace(root, outlier_ranks=outliers, reference_ranks=[r for r in named if r not in early],
                         majority=True, narrowed_by=(*root.narrowed_by, ISSUE_ORDER))
    return tie_broken, IssuedEarlyInTie(tuple(outliers), root.comm, seq, ", ".join(elsewhere), tuple(peers), where)
