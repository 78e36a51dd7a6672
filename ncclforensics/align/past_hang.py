"""Ranks whose records run on past a collective that hangs on every rank, where the others' records stop.

A pairing NCCL never completes (align/nccl_pairing.py `first_hanging_pairing`: collective types of different sizes at
one seq) hangs on every rank of it: each GPU runs its collectives in issue order, so nothing issued after it completes
on any of them. Their hosts enqueue on without waiting until the program reads a result back, and the program reads
back at the same place on every rank that runs it: ranks that run it, stuck at the same collective, stop launching
at the same seq. A rank of the reference side whose records go on past where a strict majority of the ranks stop,
while those are held back by nothing else on record (in no other communicator of theirs ahead of a peer they may
wait for), ran another program: it left collectives out before the hang (and so read back past it), or launched
past where the program stops, at the first seq the others never launched at the latest. Its records, alike with
the others' where both hold one, do not say whose departure came first: the root names it beside its own outliers,
and its range reaches that seq.

Worked example: ranks 0 to 3 of a TP group launched seq 1..7, all-reduces alike but rank 3's all-gather at seq 7,
which hangs; rank 0 launched on to seq 13, while ranks 1 to 3 stop at 7 and are behind their DP peers. Rank 0
left a collective out somewhere in seq 1..7 (or went on past the stop, at seq 8): the root names ranks 0 and 3 in
seq 1..8.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from .comm_streams import comm_streams
from .answers import STOPPED, CommAnalysis, Root
from .notes import Note, RanPastHang
from .sums_beside import named_among
from .streams import Streams
from .nccl_pairing import first_hanging_pairing


def with_ranks_past_hang(root: Root, analysis: CommAnalysis, streams: Streams) -> tuple[Root, list[Note]]:
    """`root` (a majority's outliers its records show) with the reference ranks added whose records run on past a
    pairing that hangs on every rank, where a strict majority of the ranks' records stop (see the module
    docstring), and the note that says so. Unchanged where the records hold no such pairing, some rank's records
    end before it or where its file was cut, the records of a rank that stops are not of every collective it
    launched (a trace written at completion), or such a rank may wait for a peer in another communicator."""
    if not root.shown or not root.majority or root.kind == STOPPED or root.seq_range is None:
        return root, []
    comm = root.comm
    cut = {r for (c, r) in streams.cut if c == comm}
    parts = {r: p for r, p in streams.comm_parts(comm).items() if p.height}
    ends = {r: int(p.get_column("seq").max()) for r, p in parts.items()}
    if cut & set(ends) or len(ends) < 3:
        return root, []  # (a record cut short says nothing of where its rank stopped)
    hang = first_hanging_pairing(comm_streams(parts), max(analysis.first_seq.values()), max(ends.values()))
    if hang is None or min(ends.values()) < hang:
        return root, []
    stop, stopping = Counter(ends.values()).most_common(1)[0]
    ahead = sorted(r for r in root.reference_ranks if ends.get(r, stop) > stop)
    if stopping * 2 <= len(ends) or not ahead:
        return root, []
    if any((comm, r) not in streams.launch_ends for r, end in ends.items() if end == stop):
        return root, []  # (records written once a collective completed leave what a rank launched later unknown)
    waiting = _ahead_of_a_peer(streams, comm)
    if any(r in waiting for r, end in ends.items() if end == stop):
        return root, []  # (held back elsewhere, the ranks that stop read the same)
    outliers = sorted({*root.outlier_ranks, *ahead})
    low, high = root.seq_range
    merged = replace(named_among(root, outliers, set(ends) | set(root.reference_ranks) | set(root.outlier_ranks)),
                     seq_range=(low, None if high is None else max(high, stop + 1)))
    return merged, [RanPastHang(tuple(ahead), comm, hang, stop, tuple(outliers))]


def _ahead_of_a_peer(streams: Streams, comm: str) -> set[int]:
    """The ranks whose records in a communicator other than `comm` go further than a peer's there: each may wait
    there for that peer (a collective the peer never launched holds its host at a read-back)."""
    ends: dict[str, dict[int, int]] = {}
    for (other, rank), part in streams.parts.items():
        if other != comm and part.height:
            ends.setdefault(other, {})[rank] = int(part.get_column("seq").max())
    return {rank for counts in ends.values() for rank, end in counts.items() if end > min(counts.values())}
