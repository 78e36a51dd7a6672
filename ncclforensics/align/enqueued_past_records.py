"""What PyTorch's enqueued counts say a rank launched past its records: past a timeout line's SeqNum, past a file
cut short, or in a comm none of whose records it kept (and the op a peer's desync report gives it there).

Read once the roots are found, beside the streams; apart from marks_only.py, which reads the counts where no
streams compare ranks.
"""

from __future__ import annotations

from ..model import Location
from .answers import ENQUEUED_COUNTS, CommAnalysis
from .enqueue_marks import EnqueueMarks
from .streams import Streams


def enqueued_in(groups: dict[str, EnqueueMarks], streams: Streams, comm: str) -> dict[int, int]:
    """rank -> the last work PyTorch counts it enqueued in the process group that is `comm` by name (empty where no
    group is)."""
    return next((dict(marks.launched) for name, marks in groups.items()
                 if marks.source == ENQUEUED_COUNTS and streams.aliases.get(name, name) == comm), {})


def uncounted_timeouts(streams: Streams, groups: dict[str, EnqueueMarks], comm: str) -> list[int]:
    """The ranks of `comm` whose records there are timeout lines alone and that no PyTorch count of enqueued work
    covers: what they launched is only known to reach their timeout's SeqNum."""
    return sorted(streams.timeout_only(comm) - set(enqueued_in(groups, streams, comm)))


def count_past_timeouts(analyses: dict[str, CommAnalysis], streams: Streams, groups: dict[str, EnqueueMarks]
                        ) -> dict[tuple[str, int], tuple[int, Location]]:
    """Where a rank's records of a comm are timeout lines alone, its last launched there is PyTorch's count of
    the work it enqueued, where a line gives one that goes further: the timeout's SeqNum is only a floor of it
    (`last enqueued work: 6464` beside a timeout at SeqNum 5730). Done once the roots are found (counts that
    differ are read as counts, by marks_only_root); returns (comm, rank) -> each count taken, and its line."""
    taken: dict[tuple[str, int], tuple[int, Location]] = {}
    for comm, analysis in analyses.items():
        marks = next((m for name, m in groups.items() if m.source == ENQUEUED_COUNTS
                      and streams.aliases.get(name, name) == comm), None)
        if marks is None:
            continue
        for rank in sorted(streams.timeout_only(comm) & set(marks.launched)):
            if rank in analysis.launched and marks.launched[rank] > analysis.launched[rank]:
                analysis.launched[rank] = marks.launched[rank]
                if rank in marks.counted_at:
                    taken[(comm, rank)] = (marks.launched[rank], marks.counted_at[rank])
    return taken


def counted_past_cuts(streams: Streams, groups: dict[str, EnqueueMarks],
                      tied: dict[str, str] | None = None) -> dict[str, dict[int, int]]:
    """comm -> {rank: last seq it enqueued} for ranks whose records of the comm end where a file was cut short,
    or that a configuration (or their own INIT line) names as members with none of their records kept (a dump's
    ring lost them, a log was cut before them), and whose PyTorch count of enqueued work goes further: what the
    rank launched past its records, by count only; or, for a rank cut short, as far as its records hold: it launched
    nothing past them.

    A process group is taken for the communicator only where it is the one group whose ranks are the comm's
    members (those on record, and those the configuration names) and whose count for every rank with whole
    records is the last seq those records hold, and it fits no other comm so (a group's name and a comm's hash
    are tied by nothing else). A rank whose file was cut short before it logged anything of the comm (not even
    its INIT line) may be a member too: where the group counts it, and no rank of the comm on record beside it,
    it is the member the cut hid (worked example: rank 0's NCCL log ends in the world's first all-reduce, before
    it joined its TP group; PyTorch's group over ranks 0-3 counts 18, 18, 16, 16, as the records of ranks 1-3
    end: rank 0 launched 18 there). A group that records already tie to the comm (`Streams.aliases`: its dump
    entries pair with the comm's logged collectives) is taken for it where it counts only some members: dumps'
    pg_status counts only the ranks that dumped, and a rank whose ring kept none of the comm's entries is on record
    there by its count alone (worked example: ranks 1 and 3 dumped, rank 3's ring holding its TP group's entries
    only; the world's pg_status counts 3 and 2, and the logs of ranks 0-2 end at 3, 3, 2: rank 3 launched 2 there).
    `tied`, where given, gets comm -> the group taken for it."""
    def last(comm: str, rank: int) -> int | None:
        part = streams.parts.get((comm, rank))
        return int(part.get_column("seq").max()) if part is not None and part.height else None

    counts = {name: marks.launched for name, marks in groups.items()
              if marks.source == ENQUEUED_COUNTS and len(marks.launched) > 1}
    fits: dict[str, list[str]] = {}
    cut_short = {r for (_, r) in streams.cut}
    for comm, members in streams.members.items():
        cut = {r for (c, r) in streams.cut if c == comm}
        whole = set(members) - cut
        # (a rank whose INIT line names it a member, its log cut before it logged any of the comm's collectives, is
        # a member the configuration does not name: the group that counts it may still be the comm)
        named = (set(members) | set(streams.expected_members.get(comm, ())) | set(streams.joined.get(comm, ()))
                 | (cut_short - set(members)))
        for name, launched in counts.items():
            aliased = streams.aliases.get(name) == comm and bool(whole & set(launched))
            if whole and (set(members) <= set(launched) or aliased) and set(launched) <= named \
                    and all(launched[r] == last(comm, r) for r in whole & set(launched)):
                fits.setdefault(name, []).append(comm)
    found: dict[str, dict[int, int]] = {}
    for name, comms in fits.items():
        if len(comms) != 1 or sum(comms[0] in c for c in fits.values()) != 1:
            continue
        comm = comms[0]
        if tied is not None:
            tied[comm] = name
        unseen = {r for r in counts[name] if r not in streams.members[comm]}
        # (a rank cut short whose count is the last seq its records hold is counted too: its records hold all it
        # launched there, the cut hid none of it)
        ahead = {r: n for r, n in counts[name].items() if (comm, r) in streams.cut and n >= (last(comm, r) or 0)
                 or r in unseen and n > 0}
        if ahead:
            found[comm] = ahead
    return found


def reported_ops_past_cuts(streams: Streams, groups: dict[str, EnqueueMarks],
                           counted: dict[str, dict[int, int]]) -> dict[str, dict[int, tuple[int, str]]]:
    """comm -> {rank: (seq, op)} for the ranks counted past their records there (`counted`, counted_past_cuts)
    with none of their records of the comm kept: the op of the last collective a peer's desync report gives each
    (`#12 started ranks: [9, 46] started ALLREDUCE`), at its seq (the group taken for the comm counts on the
    comm's seqs). A rank that left no file is still on record there: what it issued at that seq."""
    tied: dict[str, str] = {}
    counted_past_cuts(streams, groups, tied)
    out: dict[str, dict[int, tuple[int, str]]] = {}
    for comm, name in tied.items():
        ops = {r: groups[name].last_ops[r] for r in counted.get(comm, {}) if r in groups[name].last_ops
               and (comm, r) not in streams.parts}
        if ops:
            out[comm] = ops
    return out
