"""align/group_places.py: the members of a process group that the places PyTorch's lines give leave no doubt of."""

from __future__ import annotations

import json

from ncclforensics.align.group_places import members_by_places
from ncclforensics.model import Location, WatchdogEvent


def _status(rank: int, place: int | None, group: str = "1") -> WatchdogEvent:
    # [rank3]:[E...] [PG ID 1 PG GUID 1(tp) Rank 3]  failure detected by watchdog at work sequence id: 13 ...
    return WatchdogEvent(loc=Location(f"torch_rank{rank}.log", 2), kind="pg_status", rank=rank, comm=group, seq=13,
                         group_rank=place)


def test_places_as_far_apart_as_their_global_ranks_leave_the_ranks_between_to_the_group():
    # Ranks 1 and 3 at places 1 and 3: place 2 is the one global rank between them.
    assert members_by_places([_status(0, 0), _status(1, 1), _status(3, 3)], "1") == {0, 1, 2, 3}
    # From the start too: rank 3 at place 3 has places 0-2 below it, ranks 0-2 alone can fill them.
    assert members_by_places([_status(3, 3)], "1") == {0, 1, 2, 3}
    # Ranks 4 and 7 at places 0 and 1 (a group of ranks 4 and 7): nothing lies between them in the group.
    assert members_by_places([_status(4, 0), _status(7, 1)], "1") == {4, 7}
    # Ranks 0 and 3 at places 0 and 2: one of ranks 1 and 2 is a member, and which is not said.
    assert members_by_places([_status(0, 0), _status(3, 2)], "1") == {0, 3}
    # Past the highest place on record the group's size is not known.
    assert members_by_places([_status(0, 0), _status(1, 1)], "1") == {0, 1}
    # Lines of another group place nothing here.
    assert members_by_places([_status(0, 0), _status(3, 3, group="2")], "1") == {0}


def test_places_that_disagree_say_nothing_beyond_the_ranks_with_lines():
    assert members_by_places([_status(1, 1), _status(1, 2), _status(3, 3)], "1") == {1, 3}
    assert members_by_places([_status(1, 2), _status(3, 1)], "1") == {1, 3}


def _watchdog_log(rank: int, place: int, enqueued: int) -> str:
    stamp = "[E1129 09:55:01.741896066 ProcessGroupNCCL.cpp"
    return (f"[rank{rank}]:{stamp}:689] [Rank {place}] Watchdog caught collective operation timeout: WorkNCCL("
            "SeqNum=13, OpType=ALLREDUCE, NumelIn=512, NumelOut=512, Timeout(ms)=20000) ran for 20019 milliseconds "
            f"before timing out.\n[rank{rank}]:{stamp}:2303] [PG ID 1 PG GUID 1(tp) Rank {place}]  failure detected "
            f"by watchdog at work sequence id: 13 PG status: last enqueued work: {enqueued}, last completed work: 12\n")


def test_a_rank_the_places_put_in_the_counted_group_joins_the_counts_root_where_its_checksums_part(tmp_path):
    # Seed 1085264: PyTorch's counts of group 1 give ranks 0 and 1 fourteen launches and rank 3 thirteen; rank 2's
    # log holds no line of group 1 (it never timed out there), so no count of it. Per-step checksums with expected
    # values: at step 0 (the only step every rank summed) ranks 0, 1 and 3 are off alike and rank 2 alone, both in
    # what it read back and in what it expected: it departed by step 0. Ranks 1 and 3 sit at places 1 and 3 of
    # group 1, so place 2 is rank 2's: it is in the counted group, and departed there too, the counts not saying
    # whose departure came first. (Its sums were never alike with the others', which alone would not place it.)
    from ncclforensics.api import diff_paths

    for rank, enqueued in ((0, 14), (1, 14), (3, 13)):
        (tmp_path / f"torch_rank{rank}.log").write_text(_watchdog_log(rank, rank, enqueued))
    sums = {0: [(238848.0, 190720.0)], 1: [(238848.0, 190720.0)], 3: [(238848.0, 190720.0)],
            2: [(120192.0, 149760.0), (1405824.0, 1470720.0)]}
    for rank, steps in sums.items():
        (tmp_path / f"fingerprint_rank{rank}.jsonl").write_text("".join(
            json.dumps({"step": step, "rank": rank, "sum": total, "expected_sum": expected}) + "\n"
            for step, (total, expected) in enumerate(steps)))
    _, diagnosis = diff_paths([str(p) for p in sorted(tmp_path.iterdir())])
    root = diagnosis.root
    assert root is not None and root.comm == "1" and root.pinned_by == "PyTorch's enqueued counts"
    assert (root.outlier_ranks, root.reference_ranks, root.majority) == ([2, 3], [0, 1], False)
    assert root.seq_range == (1, 14)
    # Where rank 3 sits at place 2 instead, rank 2 is no member (ranks 0, 1 and 3 fill places 0-2): the
    # counts' root stands alone.
    (tmp_path / "torch_rank3.log").write_text(_watchdog_log(3, 2, 13))
    _, diagnosis = diff_paths([str(p) for p in sorted(tmp_path.iterdir())])
    assert diagnosis.root is not None and diagnosis.root.outlier_ranks == [3]
