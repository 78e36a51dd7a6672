"""Where a root on lengths alone follows from another communicator's divergence: the rules that read launch
counts of the root's odd ranks elsewhere as its cause, and the notes of that choice.

A rank stuck in one communicator stops launching in the others it belongs to (consequences.py, the nesting rule),
so a root whose records differ only in length may be what a divergence elsewhere left. Where no two ranks' whole
records compare that other communicator, its RAS counts (`ras_counted_cause`) or PyTorch's enqueued counts
(`enqueued_cause`) stand in for them; where nothing at all compares it, it is named beside the root
(`unseen_causes`). Of several communicators whose counts disagree, the first that is no consequence of another is
picked (`pick_counted`), since counts alone never say which diverged first; `comm_choice_notes` says what that
choice rests on. They are apart from choose.py, which orders every kind of evidence, as they weigh one kind
against the root: the counts of the communicators around it.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import replace

from ..model import WatchdogEvent
from ..model.kinds import is_p2p_comm
from .consequences import (Disagreement, candidates, consequences, departing_elsewhere, left_out_elsewhere, odd_ones,
                           other_side, ran_ahead)
from .answers import CommAnalysis, Root
from .enqueue_marks import EnqueueMarks
from .marks_only import marks_only_roots
from .notes import ConsequenceComm, Note, UndecidedComm, UnseenComm
from .ras import RasHistory, job_processes
from .ras_only import ras_only_roots
from .streams import Streams


def unseen_causes(root: Root, odd: frozenset, streams: Streams) -> list[Note]:
    """Where the root's streams differ only in length, the other communicators of its odd ranks that no two ranks'
    whole records compare (one rank on record, or the others' files cut short): a divergence there would show in
    the root's communicator just so."""
    if root.shown:
        return []
    whole = {c: set(ranks) - {r for (cut, r) in streams.cut if cut == c} for c, ranks in streams.members.items()}
    unseen = sorted(c for c, ranks in streams.members.items()
                    if c != root.comm and len(whole[c]) < 2 and set(ranks) & odd and not is_p2p_comm(c))
    return [UnseenComm(c, tuple(sorted(set(streams.members[c]) & odd)), root.comm) for c in unseen]


def ras_counted_cause(root: Root, analyses: dict[str, CommAnalysis], streams: Streams, ras: dict[str, RasHistory],
                   rank_map: dict[tuple[str, int], int], stops: dict[str, list[str]]
                   ) -> tuple[Root, list[Note]] | None:
    """Where the streams' root rests on lengths only, a communicator of its odd ranks that no two ranks' whole
    records compare, whose RAS counts disagree, is its cause by the nesting rule (consequences.py), as it would be
    were that one's records whole: a rank stuck there stops launching here. Returns that root (from the counts) and
    the notes of the choice; None where no such communicator explains it."""
    whole = {c: set(ranks) - {r for (cut, r) in streams.cut if cut == c} for c, ranks in streams.members.items()}
    counted = [(r, d) for r, d in ras_only_roots(ras, rank_map, streams, stops)
               if r.comm != root.comm and len(whole.get(r.comm, ())) < 2
               and (r.comm not in analyses or analyses[r.comm].root is None)]
    if not counted:
        return None
    # RAS names processes by host and pid: the same keys for the streams' ranks, where a reply ties them.
    process = {rank_map[(comm, r.rank)]: (r.host, r.pid) for comm, history in ras.items()
               for _, block in history.states for r in block.ranks
               if r.pid is not None and (comm, r.rank) in rank_map}

    def tied(analysis: CommAnalysis) -> bool:
        return {*analysis.ranks, *streams.expected_members.get(analysis.comm, ())} <= set(process)

    if not tied(analyses[root.comm]):
        return None
    mine = _streams_disagreement(root, analyses[root.comm], streams, process)
    # (as in enqueued_cause, the other communicators whose streams disagree too are weighed as well)
    beside = [_streams_disagreement(a.root, a, streams, process) for c, a in sorted(analyses.items())
              if c != root.comm and a.root is not None and a.root.comm == c and tied(a)]
    processes = job_processes(ras)
    explained = consequences([mine, *beside, *(d for _, d in counted)], processes)
    causes = [c for c in explained.get(root.comm, []) if c != root.comm and c in {d.comm for _, d in counted}]
    if not causes:
        return None
    chosen, notes = pick_counted([(r, d) for r, d in counted if r.comm in causes], processes)
    if chosen is None:
        return None
    return chosen, notes + comm_choice_notes(chosen, [root], {root.comm: causes}, [])


def enqueued_cause(root: Root, analyses: dict[str, CommAnalysis], streams: Streams, marks: dict[str, EnqueueMarks],
                    watchdog: list[WatchdogEvent], stops: dict[str, list[str]]) -> tuple[Root, list[Note]] | None:
    """As ras_counted_cause, by PyTorch's enqueued counts: where the streams' root rests on lengths only, a
    communicator of its odd ranks whose records end alike (a watchdog's line names the collective a rank waits in,
    not the work it enqueued behind it) while its counts disagree is its cause by the nesting rule: a rank stuck
    there stops launching here. Returns that root (from the counts) and the notes of the choice; None where no such
    communicator explains it.

    Worked example: ranks 2 and 3 of a two-rank comm 2 wait in its seq 4, rank 2 with seq 5 enqueued behind it;
    in the world comm 0, rank 3 launched 2 against the others' 3. Rank 3 is stuck in comm 2 (where either rank may
    have departed), and its count in comm 0 follows: the root is on comm 2."""
    counted = [(r, d) for r, d in marks_only_roots(marks, streams, watchdog, stopped=bool(stops))
               if r.comm != root.comm and (r.comm not in analyses or analyses[r.comm].root is None)]
    if not counted or root.comm not in analyses:
        return None
    mine = _streams_disagreement(root, analyses[root.comm], streams)
    # (the other communicators whose streams disagree too are weighed as well: a rank odd in the counted one may be
    # stuck in one of them rather than in the root's, so the counted one need not be the one cause of them all)
    beside = [_streams_disagreement(a.root, a, streams) for c, a in sorted(analyses.items())
              if c != root.comm and a.root is not None and a.root.comm == c]
    causes = [c for c in consequences([mine, *beside, *(d for _, d in counted)]).get(root.comm, [])
              if c != root.comm and c in {d.comm for _, d in counted}]
    if not causes:
        return None
    chosen, notes = pick_counted([(r, d) for r, d in counted if r.comm in causes])
    if chosen is None:
        return None
    return chosen, notes + comm_choice_notes(chosen, [root], {root.comm: causes}, [])


def _streams_disagreement(root: Root, analysis: CommAnalysis, streams: Streams,
                          process: Mapping[int, Hashable] | None = None) -> Disagreement:
    """A communicator's disagreement as its streams' root reads it (the ranks of files cut short left out of the
    counts). `process`: rank -> the key RAS names its process by, where the disagreement is weighed against RAS
    counts."""
    def key(rank: int) -> Hashable:
        return rank if process is None else process[rank]

    launched = {key(r): n for r, n in analysis.launched.items() if (root.comm, r) not in streams.cut}
    odd = odd_ones(launched, {key(r) for r in root.outlier_ranks}, root.majority)
    members = frozenset(key(r) for r in {*analysis.ranks, *streams.expected_members.get(root.comm, ())})
    return Disagreement(root.comm, members, odd, other=other_side(launched, odd, root.majority),
                        ahead=ran_ahead(launched, odd), uncounted=members - frozenset(launched))


def pick_counted(found: list[tuple[Root, Disagreement]], processes: int = 0) -> tuple[Root | None, list[Note]]:
    """Of the roots counts give (RAS, PyTorch's marks), one per communicator, the first that is no consequence of
    another, and the notes of that choice: counts alone never say which communicator diverged first.
    `processes`: how many processes the job has, where a RAS reply's job summary says (consequences.py)."""
    if not found:
        return None, []
    explained = consequences([d for _, d in found], processes)
    chosen = candidates([d for _, d in found], processes)
    roots = [root for root, _ in found]
    root, mine = next((r, d) for r, d in found if r.comm == chosen[0])
    elsewhere = departing_elsewhere(mine, [d for _, d in found], processes) if root.majority else {}
    # (a member the root names by no rank stays as it is)
    elsewhere = {p: comms for p, comms in elsewhere.items() if mine.rank_of(p) in root.outlier_ranks}
    others = {mine.rank_of(p): tuple(comms) for p, comms in elsewhere.items()}
    if others and set(root.outlier_ranks) - set(others):
        # Ranks odd here and in another communicator: their count here may follow from their departure there, so
        # the outliers are the ranks odd here alone, and each such communicator may be where the job diverged too.
        root = replace(root, outlier_ranks=[r for r in root.outlier_ranks if r not in others],
                       outlier_candidates=dict(sorted(others.items())))
        departed = {c for comms in elsewhere.values() for c in comms}
        chosen = [*chosen, *sorted(departed - set(chosen))]
        explained = {c: causes for c, causes in explained.items() if c not in departed}
    # Odd ranks ahead here may have left collectives of another of their communicators out, where counts differ too,
    # and issued their next one here early: each such communicator may be where the job diverged.
    skipped = left_out_elsewhere(mine, [d for _, d in found], processes)
    chosen = [*chosen, *(c for c in skipped if c not in chosen)]
    explained = {c: causes for c, causes in explained.items() if c not in skipped}
    notes = comm_choice_notes(root, roots, explained, chosen)
    return replace(root, undecided_comms=tuple(c for c in chosen if c != root.comm)), notes


def comm_choice_notes(root: Root, roots: list[Root], explained: dict[str, list[str]],
                      undecided: list[str]) -> list[Note]:
    """What the choice of the root's communicator rests on: the others whose ranks disagree too, read as its
    consequences, and those the evidence cannot rank against it."""
    notes: list[Note] = []
    for other in roots:
        if other.comm in explained:
            notes.append(ConsequenceComm(other.comm, tuple(other.outlier_ranks), other.kind,
                                         tuple(explained[other.comm])))
        elif other.comm in undecided and other.comm != root.comm:
            notes.append(UndecidedComm(other.comm, tuple(other.outlier_ranks), other.kind, root.comm))
    return notes
