"""align/waiting.py: the communicators in which a rank waits, by its records, a peer's desync report, or PyTorch's
counts."""

from __future__ import annotations

import polars as pl

from ncclforensics.align.streams import Streams
from ncclforensics.align.waiting import waiting_elsewhere
from ncclforensics.align.enqueue_marks import enqueue_marks
from ncclforensics.model import CommInfo, Location, ProgressReport, WatchdogEvent, WatchdogKind


def _counts(comm: str, counts: dict[int, tuple[int, int]]) -> list[ProgressReport]:
    """A dump's pg_status of `comm`: rank -> (last enqueued, last completed)."""
    return [ProgressReport(loc=Location(f"fr_rank{rank}", None, field="pg_status"), comm=comm, rank=rank,
                           last_enqueued=enqueued, last_completed=completed)
            for rank, (enqueued, completed) in counts.items()]


def test_counts_that_leave_work_unfinished_elsewhere_while_all_here_completed_say_where_a_rank_waits():
    # Seed 1030105: ranks 0-3 launched 2 world collectives and completed both, and 12 in their TP group, completing
    # 6; their dump rings kept only TP entries scheduled behind the one they wait in, so no record of theirs
    # started. They wait in the TP group. Ranks 4-7 wait in the world (3 launched, 2 completed): their TP group's
    # work merely queues behind it, and its counts say nothing of where they wait.
    progress = _counts("0", {r: (2, 2) if r < 4 else (3, 2) for r in range(8)})
    progress += _counts("1", {r: (12, 6) for r in range(4)}) + _counts("2", {r: (18, 12) for r in range(4, 8)})
    marks = enqueue_marks(progress, [])
    assert waiting_elsewhere(Streams(), "0", marks) == {r: {"1"} for r in range(4)}
    # (records that started a collective elsewhere and never finished it say so whatever the counts)
    started = pl.DataFrame({"seq": [7], "state": ["started"]})
    streams = Streams(parts={("2", 5): started})
    assert waiting_elsewhere(streams, "0", marks) == {**{r: {"1"} for r in range(4)}, 5: {"2"}}
    # A count that is only a floor of what a rank launched here says nothing of whether all of it completed.
    marks["0"].floors.add(0)
    assert 0 not in waiting_elsewhere(Streams(), "0", marks)


def test_a_peers_desync_report_says_where_a_rank_with_no_file_waits():
    # Seed 1030037: rank 3's watchdog log reports on its TP group of ranks 2 and 3 (its dump lists them): `[0]
    # joined but didn't finish collective #4`. Rank 2 left no file, yet it waits in the TP group.
    stop = WatchdogEvent(loc=Location("torch_rank3.log", 2), kind=WatchdogKind.TIMEOUT.value, rank=3, comm="2",
                         seq=4, op="AllReduce")
    report = WatchdogEvent(loc=Location("torch_rank3.log", 3), kind=WatchdogKind.DESYNC_REPORT.value, rank=3,
                           comm="2", seq=5, lagging=(((0,), 4, True),),
                           latest=(((0,), 4, False, "AllReduce"), ((1,), 5, False, "AllReduce")))
    config = CommInfo(loc=Location("fr_rank3", None, field="pg_config"), comm="2", ranks=(2, 3))
    marks = enqueue_marks(_counts("2", {3: (5, 3)}), [stop, report], [config])
    assert marks["2"].waiting == {2, 3}
    assert waiting_elsewhere(Streams(), "5", marks) == {2: {"2"}, 3: {"2"}}
    # A laggard that finished its last collective and joined no next one waits there in nothing.
    finished = WatchdogEvent(loc=report.loc, kind=report.kind, rank=3, comm="2", seq=5, lagging=(((0,), 4, False),))
    assert enqueue_marks(_counts("2", {3: (5, 3)}), [stop, finished], [config])["2"].waiting == set()
