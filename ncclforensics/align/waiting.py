"""Where a rank waits: the communicators other than one analysed in which it has work that never finished.

A rank that launched fewer collectives in one communicator than its peers did may have departed there, or be held
in another one, where it waits in a collective that never finishes and so launches nothing more anywhere. Three
kinds of evidence say that it waits there:

- its own records there hold a collective that started and never finished (a Flight Recorder entry, a timeout);
  those enqueued behind it are recorded after it, never started;
- a peer's desync report there shows it joined a collective and never finished it (`[0] joined but didn't finish
  collective #4`, `#6 started ranks: [0, 3]`), though it left no file of its own (enqueue_marks.EnqueueMarks.waiting);
- PyTorch's counts there (a dump's pg_status, `last enqueued work: 12, last completed work: 6`) show work that
  never completed, while its counts in the communicator analysed show that everything it launched there completed:
  nothing holds it there. Worked example: ranks 0 and 2 launched 2 world collectives and completed both, and 12 in
  their TP group, completing 6; their dump rings kept only TP entries scheduled behind the one they wait in, so no
  record of theirs started. They wait in the TP group. (Where counts here leave work in flight too, the rank may
  wait here, and its other groups' work merely queue behind: their counts say nothing of where it waits.)
"""

from __future__ import annotations

from ..model import EventState
from .enqueue_marks import EnqueueMarks
from .streams import Streams


def waiting_elsewhere(streams: Streams, comm: str, marks: dict[str, EnqueueMarks] | None = None
                      ) -> dict[int, set[str]]:
    """rank -> the communicators other than `comm` in which it waits (see the module docstring)."""
    waiting: dict[int, set[str]] = {}
    for (other, rank), part in streams.parts.items():
        if other != comm and (part.get_column("state") == EventState.STARTED.value).any():
            waiting.setdefault(rank, set()).add(other)
    by_comm = {streams.aliases.get(name, name): group for name, group in (marks or {}).items()}
    here = by_comm.get(comm)
    for other, group in by_comm.items():
        if other == comm:
            continue
        for rank in group.waiting:
            waiting.setdefault(rank, set()).add(other)
        for rank, launched in group.launched.items():
            done = group.completed.get(rank)
            if done is not None and done < launched and here is not None and _all_completed(here, rank):
                waiting.setdefault(rank, set()).add(other)
    return waiting


def _all_completed(group: EnqueueMarks, rank: int) -> bool:
    """Whether PyTorch's counts say that everything `rank` launched in the group completed (a floor of what it
    launched says nothing of it)."""
    launched, done = group.launched.get(rank), group.completed.get(rank)
    return launched is not None and done is not None and done >= launched and rank not in group.floors
