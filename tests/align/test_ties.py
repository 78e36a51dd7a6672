"""align/choose.py: which side of an even split the gate journal may name."""

from __future__ import annotations

from ncclforensics.align.answers import Root
from ncclforensics.align.gates import GateDisagreement, tie_resolved_by_gate
from ncclforensics.align.notes import CountedAmongLookalikes
from ncclforensics.model import GateDecision, Location


def _tie(ranks: list[int]) -> Root:
    return Root(comm="0xa", seq=14, seq_range=(14, 14), outlier_ranks=ranks, reference_ranks=ranks, kind="extra",
                size=1, pinned_by="steps", reason=None, majority=False)


def _gate(passed: list[int], skipped: list[int]) -> GateDisagreement:
    decisions = {r: GateDecision(loc=Location(f"gate_journal_rank{r}.jsonl", 3), rank=r, step=2,
                                 decision="pass" if r in passed else "skip") for r in passed + skipped}
    return GateDisagreement(step=2, decisions=decisions, passed=passed, skipped=skipped, outlier_ranks=[],
                            ceiling_start=None, in_ceiling_window=None, pass_totals={}, proposed_totals={})


def test_the_gate_names_the_side_that_ran_the_drafter_where_it_journaled_every_rank_of_the_tie():
    assert tie_resolved_by_gate(_tie([0, 1]), _gate([0], [1])).outlier_ranks == [0]


def test_the_gate_names_the_side_of_an_even_split_that_ran_the_drafter_and_the_rest_is_its_reference():
    # Issue orders part ranks 0 and 3 from ranks 1 and 2, no majority, and read each side as the program in turn;
    # every rank journaled its gate, and ranks 0 and 3 passed alone: they deviated, and the two readings give way.
    from dataclasses import replace

    from ncclforensics.align.answers import IssueSides

    tie = replace(_tie([0, 1, 2, 3]), issue_sides=IssueSides(early=(0, 3), later=(1, 2)))
    root = tie_resolved_by_gate(tie, _gate([0, 3], [1, 2]))
    assert (root.outlier_ranks, root.reference_ranks, root.majority, root.issue_sides) == ([0, 3], [1, 2], True, None)
    two = tie_resolved_by_gate(_tie([0, 1]), _gate([0], [1]))
    assert (two.outlier_ranks, two.reference_ranks, two.majority) == ([0], [1], False)


def test_a_tie_with_ranks_the_gate_did_not_journal_keeps_both_sides():
    # Counts split ranks 0 and 3 from ranks 1 and 2; only ranks 0 and 1 journaled their gates. Rank 0 passed alone
    # among those, but rank 3 may have passed with it or skipped: the gate says nothing of which side is fewer.
    tie = _tie([0, 1, 2, 3])
    assert tie_resolved_by_gate(tie, _gate([0], [1])) == tie


def test_ranks_the_counts_name_among_records_alike_everywhere_are_the_outliers():
    # Every rank's records look alike and a result was misaligned: the records name every rank on either side.
    # PyTorch's counts say rank 3 launched one fewer than the seven others: it is the fewest departing, missing one.
    from dataclasses import replace

    from ncclforensics.align.lookalike_ties import counted_among_lookalikes
    from ncclforensics.align.answers import RangeReason

    every = replace(_tie(list(range(8))), seq=1, seq_range=(1, 19), reason=RangeReason.LOOKALIKE,
                    kinds=("extra", "missing", "different"))
    counted = Root(comm="0xa", seq=1, seq_range=(1, 19), outlier_ranks=[3], reference_ranks=[0, 1, 2, 4, 5, 6, 7],
                   kind="missing", size=1, pinned_by="PyTorch's enqueued counts", reason=RangeReason.COUNTS)
    root, said = counted_among_lookalikes(every, counted, set())
    assert root.outlier_ranks == [3] and root.majority and root.kind == "missing" and root.seq_range == (1, 19)
    assert said == [CountedAmongLookalikes(outliers=(3,), counted=(3,), launched="fewer",
                                           counted_by="PyTorch's enqueued counts")]
    # a rank behind that is stuck elsewhere may be held back: the counts then name no one
    assert counted_among_lookalikes(every, counted, {3}) == (every, [])
    # counts with no majority say nothing of who departed
    assert counted_among_lookalikes(every, replace(counted, majority=False), set()) == (every, [])


def test_counts_name_the_fewest_departing_where_checked_results_pin_records_alike_to_one_seq(tmp_path):
    # One group of four ranks, traces with expected sums and watchdog logs. Rank 0 left out step 1's drafter pair
    # (d1, d2): its step-1 `a` reads back right, its `b` and `c` wrong; the others' traces end with step 0, so no
    # record but rank 0's is there, and the results pin the root to seq 6, a range of one seq where records alike
    # in everything recorded name every rank. PyTorch's counts say rank 0 enqueued 10 and the three others 8: the
    # fewest departing is rank 0, as where the range holds several lookalikes.
    import json

    from tests.cli_helpers import diff_json

    for rank in range(4):
        rows = [(0, tag, 100.0 * i, 100.0 * i) for i, tag in enumerate(["a", "d1", "d2", "b"], start=1)]
        if rank == 0:
            rows += [(1, "a", 500.0, 500.0), (1, "b", 777.0, 600.0), (1, "c", 888.0, 700.0)]
        lines = [json.dumps({"step": step, "op": i if step == 0 else i - 4, "rank": rank, "tag": tag,
                             "kind": "AllReduce", "numel": 64, "sum": got, "expected_sum": want})
                 for i, (step, tag, got, want) in enumerate(rows)]
        (tmp_path / f"fingerprint_rank{rank}.jsonl").write_text("\n".join(lines) + "\n")
        (tmp_path / f"torch_rank{rank}.log").write_text(
            f"[rank{rank}]:[E1129 09:55:01.760126066 ProcessGroupNCCL.cpp:689] [Rank {rank}] Watchdog caught "
            "collective operation timeout: WorkNCCL(SeqNum=8, OpType=ALLREDUCE, NumelIn=64, NumelOut=64, "
            "Timeout(ms)=20000) ran for 20016 milliseconds before timing out.\n"
            f"[rank{rank}]:[E1129 09:55:01.761226066 ProcessGroupNCCL.cpp:2303] [PG ID 0 PG GUID 0(default_pg) Rank "
            f"{rank}]  failure detected by watchdog at work sequence id: 8 PG status: last enqueued work: "
            f"{10 if rank == 0 else 8}, last completed work: 7\n")
    root = diff_json(str(tmp_path))[1]["root"]
    assert root["seq_range"] == [6, 6] and root["outlier_ranks"] == [0] and root["reference_ranks"] == [1, 2, 3]
    assert root["majority"]


def test_ranks_whose_records_part_from_the_rest_of_the_counted_reference_depart_beside_those_counted():
    # Four ranks' traces agree through seq 3; their timeouts at seq 5 part them two against two: ranks 0 and 3 in an
    # AllReduce of 512, ranks 1 and 2 in an AllGather of 1000. No record says which pair departed; PyTorch's counts
    # say rank 1 launched one fewer than the others. Rank 2's record parts from ranks 0 and 3, the rest of the
    # reference: it departed too (ranks 1 and 2 depart, where the other reading has ranks 0, 3 and 1 depart).
    from dataclasses import replace

    import polars as pl

    from ncclforensics.align.lookalike_ties import counted_among_lookalikes, parted_reference
    from ncclforensics.align.answers import RangeReason
    from ncclforensics.align.streams import Streams

    def part(rank: int, op: str | None, count: int | None) -> pl.DataFrame:
        return pl.DataFrame({"rank": [rank] * 4, "seq": [1, 2, 3, 5], "op": [None, None, None, op],
                             "count": [None, None, None, count], "tag": ["a", "b", "c", None]},
                            schema_overrides={"op": pl.String, "count": pl.Int64})
    records = {0: ("AllReduce", 512), 1: ("AllGather", 1000), 2: ("AllGather", 1000), 3: ("AllReduce", 512)}
    streams = Streams(parts={("0xa", r): part(r, *v) for r, v in records.items()}, members={"0xa": [0, 1, 2, 3]})
    every = replace(_tie([0, 1, 2, 3]), seq=2, seq_range=(2, 5), reason=RangeReason.LOOKALIKE,
                    kinds=("different", "extra"))
    counted = Root(comm="0xa", seq=1, seq_range=(1, 5), outlier_ranks=[1], reference_ranks=[0, 2, 3],
                   kind="missing", size=1, pinned_by="PyTorch's enqueued counts", reason=RangeReason.COUNTS)
    parted = parted_reference(every, {0, 2, 3}, streams)
    assert parted == {2: 5}
    root, said = counted_among_lookalikes(every, counted, set(), parted)
    assert root.outlier_ranks == [1, 2] and root.reference_ranks == [0, 3] and root.majority
    assert said == [CountedAmongLookalikes(outliers=(1, 2), counted=(1,), launched="fewer",
                                           counted_by="PyTorch's enqueued counts", parted=(2,), parted_seq=5)]
    # With rank 3 in an AllGather too, rank 0 is the one of the rest that parts from the others.
    records[3] = ("AllGather", 1000)
    streams = Streams(parts={("0xa", r): part(r, *v) for r, v in records.items()}, members={"0xa": [0, 1, 2, 3]})
    assert parted_reference(every, {0, 2, 3}, streams) == {0: 5}
    # A rest that parts evenly (ranks 0 and 3 alone, one in each collective) says nothing of who departed.
    assert parted_reference(every, {0, 3}, streams) is None


def test_call_stacks_the_root_compared_part_the_counted_reference_as_signatures_do():
    # Seed 942535: ranks 0, 1 and 2 keep dumps with call stacks; rank 3 left no file. All-reduces alike in signature;
    # at seq 17 and 18 rank 0 ran the drafter's layer and the model's in swapped order. With rank 3 siding with either,
    # the root names every rank, over seq 1..17 of lookalikes. PyTorch's counts say rank 2 launched one fewer (it left
    # out the step's last collective, at seq 20). The rest, ranks 0 and 1, part evenly by the call stacks the root
    # compared: nothing says which of them departed, and the counts do not name rank 2 alone as the fewest departing.
    from dataclasses import replace

    import polars as pl

    from ncclforensics.align.lookalike_ties import parted_reference
    from ncclforensics.align.answers import RangeReason
    from ncclforensics.align.streams import Streams

    model, drafter = "parallel_state.py:93 < llama.py:182", "parallel_state.py:93 < llama_eagle.py:61"

    def part(rank: int, stacks: list[str]) -> pl.DataFrame:
        return pl.DataFrame({"rank": [rank] * 4, "seq": [16, 17, 18, 19], "op": ["AllReduce"] * 4,
                             "count": [512] * 4, "stack": stacks, "callsite": ["parallel_state.py:93"] * 4})
    swapped, program = [model, drafter, model, model], [model, model, drafter, model]
    streams = Streams(parts={("0xa", 0): part(0, swapped), ("0xa", 1): part(1, program),
                             ("0xa", 2): part(2, program)}, members={"0xa": [0, 1, 2]})
    every = replace(_tie([0, 1, 2]), seq=1, seq_range=(1, 17), reason=RangeReason.LOOKALIKE,
                    kinds=("different", "extra"), compared=("call sites",))
    assert parted_reference(every, {0, 1}, streams) is None
    assert parted_reference(every, {0, 1, 2}, streams) == {0: 17}
    # (a root that compared signatures alone is not parted by call stacks it did not weigh)
    assert parted_reference(replace(every, compared=()), {0, 1}, streams) == {}


def test_ranks_parted_evenly_by_call_stacks_leave_the_counts_nobody_to_name():
    # Four ranks' all-reduces look alike through seq 3; at seq 3 the call stacks of ranks 0 and 2 differ (an extra
    # all-reduce from another call site on one of them), rank 3 left no records, and PyTorch's counts say rank 1
    # never launched seq 3 (it waits elsewhere). The stacks part the rest evenly: nothing says which of ranks 0 and 2
    # departed, and the counts' rank behind is no answer to it.
    from dataclasses import replace

    import polars as pl

    from ncclforensics.align.lookalike_ties import counted_among_lookalikes, parted_reference
    from ncclforensics.align.answers import RangeReason
    from ncclforensics.align.streams import Streams

    def part(rank: int, stacks: list[str | None]) -> pl.DataFrame:
        return pl.DataFrame({"rank": [rank] * 3, "seq": [1, 2, 3], "op": ["AllReduce"] * 3, "count": [1] * 3,
                             "stack": stacks}, schema_overrides={"stack": pl.String})
    streams = Streams(parts={("0xa", 0): part(0, [None, "tokens:90", "tokens:126"]),
                             ("0xa", 2): part(2, [None, None, "tokens:90"])}, members={"0xa": [0, 2]})
    every = replace(_tie([0, 1, 2, 3]), seq=1, seq_range=(1, 3), reason=RangeReason.LOOKALIKE,
                    kinds=("different", "extra", "missing"), compared=("call sites",))
    assert parted_reference(every, {0, 2, 3}, streams) is None
    # Where a third rank's stack sides with rank 2, rank 0 parts from the larger part.
    streams.parts[("0xa", 3)] = part(3, [None, None, "tokens:90"])
    streams.members["0xa"] = [0, 2, 3]
    assert parted_reference(every, {0, 2, 3}, streams) == {0: 3}
    counted = Root(comm="0xa", seq=1, seq_range=(1, 3), outlier_ranks=[1], reference_ranks=[0, 2, 3],
                   kind="missing", size=1, pinned_by="PyTorch's enqueued counts", reason=RangeReason.COUNTS)
    root, _ = counted_among_lookalikes(every, counted, set(), {0: 3})
    assert root.outlier_ranks == [0, 1]


def test_a_rank_stuck_where_its_peers_wait_for_it_here_is_not_held_back():
    # PyTorch's counts: rank 1 finished seq 1 of the world group and never launched seq 2, where ranks 0 and 2 wait
    # (rank 5 went on ahead); rank 1 is stuck in its pair group with rank 0. Were rank 0 free there, rank 1 might be
    # held back by it; but rank 0 waits here, at the seq rank 1 never launched: each waits for the other, and nothing
    # outside this group holds rank 1, so its count is a departure of its own. Rank 3, stuck with rank 2's pair peer
    # rank 4, which waits nowhere here, may be held back.
    from dataclasses import replace

    import polars as pl

    from ncclforensics.align.choose import _held_before_records
    from ncclforensics.align.streams import Streams
    from ncclforensics.align.enqueue_marks import EnqueueMarks

    def part(rank: int, seq: int, state: str) -> pl.DataFrame:
        return pl.DataFrame({"rank": [rank], "seq": [seq], "state": [state]})
    parts = {("0", 0): part(0, 2, "started"), ("0", 2): part(2, 2, "started"),
             ("1", 0): part(0, 5, "started"), ("1", 1): part(1, 5, "started"),
             ("2", 3): part(3, 5, "started"), ("2", 4): part(4, 5, "started")}
    streams = Streams(parts=parts, members={"0": [0, 2, 5], "1": [0, 1], "2": [3, 4]})
    # (the root of the records: rank 5 went on ahead, ranks 0 and 2 follow the program)
    root = replace(_tie([5]), comm="0", seq=1, seq_range=(1, 2), reference_ranks=[0, 2], majority=True)
    marks = {"0": EnqueueMarks(launched={0: 2, 1: 1, 2: 2, 3: 1, 5: 3})}
    assert _held_before_records(root, marks, streams) & {1, 3} == {3}  # (of the ranks behind)
    # A peer that departed may wait here in a collective of its own (an extra one): it holds the rank back.
    assert _held_before_records(replace(root, outlier_ranks=[0], reference_ranks=[2]), marks, streams) & {1} == {1}


def test_a_rank_stuck_where_its_peer_ran_past_it_may_be_held_back_by_that_peer():
    # Seed 932995, watchdog logs alone: rank 1 launched 1 world collective and waits in its TP pair's seq 6, having
    # launched 6 there; its TP peer rank 0 waits in world seq 2 having launched 11 TP collectives. Rank 0 ran past
    # rank 1 in their pair: its own departure there (a TP collective it left out) may hold rank 1, which then never
    # reached world seq 2. Rank 1's count here is no departure of its own that the evidence shows: held back.
    from dataclasses import replace

    import polars as pl

    from ncclforensics.align.choose import _held_before_records
    from ncclforensics.align.streams import Streams
    from ncclforensics.align.enqueue_marks import EnqueueMarks

    def part(rank: int, seq: int, state: str) -> pl.DataFrame:
        return pl.DataFrame({"rank": [rank], "seq": [seq], "state": [state]})
    parts = {("0", 0): part(0, 2, "started"), ("0", 2): part(2, 2, "started"), ("0", 4): part(4, 2, "started"),
             ("1", 0): part(0, 6, "started"), ("1", 1): part(1, 6, "started")}
    streams = Streams(parts=parts, members={"0": [0, 1, 2, 4], "1": [0, 1]})
    root = replace(_tie([2]), comm="0", seq=1, seq_range=(1, 2), reference_ranks=[0, 4], majority=True)
    world = EnqueueMarks(launched={0: 2, 1: 1, 2: 2, 4: 2})
    marks = {"0": world, "1": EnqueueMarks(launched={0: 11, 1: 6})}
    assert 1 in _held_before_records(root, marks, streams)
    # Level with its peer there (or ahead: where a rank that left one out here goes on to), it holds itself.
    assert 1 not in _held_before_records(root, {"0": world, "1": EnqueueMarks(launched={0: 6, 1: 6})}, streams)
    assert 1 not in _held_before_records(root, {"0": world, "1": EnqueueMarks(launched={0: 6, 1: 7})}, streams)


def test_ranks_waiting_elsewhere_are_found_once_and_said_even_where_no_comm_is_on_record():
    # The one map of where ranks wait outside the root's comm serves both the ranks held back and the candidates'
    # comms; a candidate of no comm on record (none the map holds) still gets a sentence, not an error.
    from dataclasses import replace

    import polars as pl

    from ncclforensics.align.waiting import waiting_elsewhere
    from ncclforensics.align.streams import Streams
    from ncclforensics.report.root_words import waiting_candidates_words

    def part(rank: int, state: str) -> pl.DataFrame:
        return pl.DataFrame({"rank": [rank], "seq": [4], "state": [state]})
    streams = Streams(parts={("0", 0): part(0, "started"), ("1", 0): part(0, "started"), ("1", 1): part(1, "started"),
                             ("2", 3): part(3, "completed")}, members={"0": [0], "1": [0, 1], "2": [3]})
    assert waiting_elsewhere(streams, "0") == {0: {"1"}, 1: {"1"}}
    words = waiting_candidates_words(replace(_tie([1]), waiting_candidates={1: ("1",)}))
    assert "waits in comm 1:" in words
    words = waiting_candidates_words(replace(_tie([1]), waiting_candidates={1: ()}))
    assert "waits in another communicator:" in words


def test_ranks_the_counts_part_that_wait_in_another_comm_are_the_candidates_beside_late_records():
    # 357252: the world group's records begin after ranks 6 and 7 departed, and part rank 6 alone; PyTorch's counts
    # part both from the six that agree. Rank 7 waits in its TP group (a collective that started and never
    # finished): held back there by a peer, or departed here first and then stopped; its candidacy rests on the
    # counts parting it and on where it waits. Counts with no strict majority part nobody.
    import polars as pl

    from ncclforensics.align.choose import _counts_apart
    from ncclforensics.align.waiting import waiting_elsewhere
    from ncclforensics.align.streams import Streams
    from ncclforensics.align.enqueue_marks import EnqueueMarks

    def part(rank: int, seq: int, state: str) -> pl.DataFrame:
        return pl.DataFrame({"rank": [rank], "seq": [seq], "state": [state]})
    parts = {("0xw", 6): part(6, 5, "completed"), ("0xw", 7): part(7, 5, "completed"),
             ("0xtp", 6): part(6, 9, "completed"), ("0xtp", 7): part(7, 9, "started")}
    streams = Streams(parts=parts, members={"0xw": list(range(8)), "0xtp": [6, 7]}, aliases={"0": "0xw"})
    marks = {"0": EnqueueMarks(launched={**{r: 4 for r in range(6)}, 6: 5, 7: 6})}
    assert _counts_apart("0xw", marks, streams) == {6, 7}  # (the group's name goes by its comm's hash)
    assert waiting_elsewhere(streams, "0xw") == {7: {"0xtp"}}
    tie = {"0": EnqueueMarks(launched={0: 4, 1: 4, 2: 5, 3: 5})}
    assert _counts_apart("0xw", tie, streams) == set()


def test_call_stacks_compared_only_where_recorded_part_the_counted_reference(tmp_path):
    # Four ranks, traces of tags and watchdog logs. Rank 1's trace runs one collective further than the others' and
    # it never launched seq 4 (PyTorch's counts: 3, the others 4); ranks 0, 2 and 3 time out at seq 4, an all-reduce
    # alike in signature, but rank 2's call stack is another layer's. The root compared call stacks between the
    # three that printed them (rank 1 has none): rank 2 parts from ranks 0 and 3 there and departed too, beside the
    # rank the counts name.
    import json

    from tests.cli_helpers import diff_json

    def stack(layer_line: int) -> str:
        frames = ["all_reduce from site-packages/torch/distributed/distributed_c10d.py:3068",
                  "all_reduce from vllm/distributed/parallel_state.py:93",
                  f"forward from vllm/model_executor/models/llama.py:{layer_line}",
                  "execute_model from vllm/v1/worker/gpu_model_runner.py:1510"]
        return "".join(f"#{i} {frame}\n" for i, frame in enumerate(frames))

    for rank in range(4):
        tags = ["mlp", "moe"] + (["mlp"] if rank == 1 else [])
        (tmp_path / f"fingerprint_rank{rank}.jsonl").write_text("".join(
            json.dumps({"step": i // 2, "op": i, "rank": rank, "tag": tag, "digest": f"{i:016x}"}) + "\n"
            for i, tag in enumerate(tags)))
        head = f"[rank{rank}]:[E1129 09:55:01.730906066 ProcessGroupNCCL.cpp"
        group = f"[PG ID 0 PG GUID 0(default_pg) Rank {rank}]"
        if rank == 1:
            log = (f"{head}:1914] {group} Received a dump signal due to a collective timeout from  rank 0 and we will "
                   "try our best to dump the debug info. Last enqueued NCCL work: 3, last completed NCCL work: 3.\n")
        else:
            log = (f"{head}:689] [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4, "
                   "OpType=ALLREDUCE, NumelIn=512, NumelOut=512, Timeout(ms)=20000) ran for 20016 milliseconds "
                   "before timing out.\n"
                   f"{head}:2303] {group}  failure detected by watchdog at work sequence id: 4 PG status: last "
                   "enqueued work: 4, last completed work: 3\n"
                   f"{head}:733] [Rank {rank}] Stack trace of the failed collective: \n{stack(97 if rank == 2 else 241)}"
                   "\n")
        (tmp_path / f"torch_rank{rank}.log").write_text(log)
    root = diff_json(str(tmp_path))[1]["root"]
    assert root["outlier_ranks"] == [1, 2] and root["reference_ranks"] == [0, 3] and root["majority"]


def test_a_rank_stuck_with_a_peer_that_issued_its_collective_here_early_is_held_back():
    # Seed 1104866, six ranks in TP pairs {0, 1}, {2, 3}, {4, 5}. Rank 1 never launched world seq 2; it waits in its
    # pair's seq 1, which rank 0 launched too and never completed, both recording it alike: rank 0 issued world seq 2
    # before it, after none of its TP collectives, and waits there. Ranks 2-5 issued world seq 2 after 5 TP
    # collectives (rank 1 issued 5 without it): rank 0 issued it early, whatever its record there agrees with, and
    # holds rank 1 back. Where ranks 2-5 issued it before any TP collective too, rank 0 ran the program's order, and
    # rank 1, which each waits for, departed.
    from dataclasses import replace

    import polars as pl

    from ncclforensics.align.choose import _held_before_records
    from ncclforensics.align.enqueue_marks import EnqueueMarks
    from ncclforensics.align.streams import Streams

    def group(counts: dict[int, tuple[int, int]]) -> EnqueueMarks:
        return EnqueueMarks(launched={r: n for r, (n, _) in counts.items()},
                            completed={r: done for r, (_, done) in counts.items()}, stops=["watchdog timeout"])

    def waits(seq: int, count: int) -> pl.DataFrame:
        return pl.DataFrame({"seq": [seq], "state": ["started"], "op": ["AllReduce"], "count": [count]})

    parts = {**{("0", r): waits(2, 1) for r in (0, 2, 3, 4, 5)}, ("1", 0): waits(1, 1024), ("1", 1): waits(1, 1024),
             **{(c, r): waits(6, 1024) for c, ranks in (("2", (2, 3)), ("3", (4, 5))) for r in ranks}}
    streams = Streams(parts=parts, members={"0": [0, 2, 3, 4, 5], "1": [0, 1], "2": [2, 3], "3": [4, 5]})
    root = replace(_tie([2]), comm="0", seq=1, seq_range=(1, 2), reference_ranks=[0, 3, 4, 5], majority=True)

    def marks(tp_completed: int) -> dict[str, EnqueueMarks]:
        return {"0": group({0: (2, 1), 1: (1, 1), 2: (2, 1), 3: (2, 1), 4: (2, 1), 5: (2, 1)}),
                "1": group({0: (5, 0), 1: (5, 0)}),
                **{c: group({r: (5 + tp_completed, tp_completed) for r in ranks})
                   for c, ranks in (("2", (2, 3)), ("3", (4, 5)))}}

    assert 1 in _held_before_records(root, marks(5), streams)
    assert 1 not in _held_before_records(root, marks(0), streams)
