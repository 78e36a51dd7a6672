"""A tie of call stacks told apart by the order of call sites the program repeats (align/recurring_sites.py)."""

from types import SimpleNamespace

import numpy as np

from ncclforensics.align.answers import DIFFERENT_OPS, Root
from ncclforensics.align.divergence import _by_recurring_sites, analyze_comm
from ncclforensics.align.edits import Codes
from ncclforensics.align.fingerprints import attach_fingerprints
from ncclforensics.align.recurring_sites import broke_recurring_order
from ncclforensics.align.streams import Streams, build_streams
from ncclforensics.model import (
    CollectiveEvent, Evidence, FingerprintRow, Location, SourceFormat, collectives_to_frame,
)

# Call sites A=1 (attention), B=2 (mlp), C=3 (drafter), E=4 (head), one step after another: A B C A B E.
STEP = [1, 2, 3, 1, 2, 4]


def test_the_side_whose_run_of_call_sites_recurs_nowhere_else_broke_the_program_order():
    # Rank 6 swapped B and C in the first step (A C B); rank 1 and every later step of both issue A B C.
    kept = np.array(STEP * 3, dtype=np.uint64)
    swapped = kept.copy()
    swapped[1], swapped[2] = 3, 2
    stacks = {1: kept, 6: swapped, 0: np.zeros(18, dtype=np.uint64)}  # (rank 0: a log without call stacks)
    assert broke_recurring_order(stacks, [0, 1, 6], 1, 2) == ([6], [1], 4)


def test_runs_of_other_call_sites_or_that_recur_nowhere_name_no_side():
    # Rank 6 left out the drafter (C) in the first step: A B A B E...; its run (B A B) recurs nowhere, but it holds
    # other call sites than rank 1's (B C A): a drafter pass may run in one step alone, and no order says which.
    kept = np.array(STEP * 3, dtype=np.uint64)
    skipped = np.array([1, 2, 1, 2, 4] + STEP * 2 + [1], dtype=np.uint64)
    assert broke_recurring_order({1: kept, 6: skipped}, [1, 6], 2, 2) is None
    # One step only: neither run recurs, and nothing says which is the program's.
    one = np.array(STEP, dtype=np.uint64)
    other = one.copy()
    other[1], other[2] = 3, 2
    assert broke_recurring_order({1: one, 6: other}, [1, 6], 1, 2) is None


def test_a_tie_of_call_stacks_beside_logs_without_them_names_the_rank_that_broke_the_order():
    # Dumps of ranks 1 and 6 part at seq 2..3, ranks 0 and 2 kept NCCL logs (no stacks): no majority, every rank
    # named; the order of call sites says rank 6 departed.
    kept = np.array(STEP * 3, dtype=np.uint64)
    swapped = kept.copy()
    swapped[1], swapped[2] = 3, 2
    stacks = {0: np.zeros(18, dtype=np.uint64), 1: kept, 2: np.zeros(18, dtype=np.uint64), 6: swapped}
    ops = np.ones(18, dtype=np.uint64)  # (every collective an AllReduce of one size: the logs side with either)
    root = _by_recurring_sites(_tie([0, 1, 2, 6]), _book(stacks), 1, _codes(stacks, {r: ops for r in stacks}))
    # (the logs fit both orders: ranks 0 and 2 are on neither side, not the kept one by default)
    assert root.outlier_ranks == [6] and root.reference_ranks == [1] and root.unplaced_ranks == [0, 2]
    assert root.majority
    assert root.pinned_by.startswith("call sites, whose run there on rank 6 recurs nowhere else")


def test_a_rank_without_call_stacks_whose_log_departs_as_the_dump_that_broke_the_order_did_is_named_with_it():
    # As above, but C is an AllGather where A and B are AllReduces: rank 2's NCCL log shows the same swap in its
    # signatures as rank 6's dump, rank 0's log the program's order. Rank 2 departed with rank 6, rank 0 did not.
    kept = np.array(STEP * 3, dtype=np.uint64)
    swapped = kept.copy()
    swapped[1], swapped[2] = 3, 2
    blank = np.zeros(18, dtype=np.uint64)
    stacks = {0: blank, 1: kept, 2: blank, 6: swapped}
    gathers = {r: np.where(order == 3, 2, 1).astype(np.uint64) for r, order in ((0, kept), (1, kept), (2, swapped),
                                                                                 (6, swapped))}
    root = _by_recurring_sites(_tie([0, 1, 2, 6]), _book(stacks), 1, _codes(stacks, gathers))
    assert root.outlier_ranks == [2, 6] and root.reference_ranks == [0, 1] and root.majority
    # A log that agrees with neither side departed some other way: the tie stays.
    gathers[2] = np.full(18, 2, dtype=np.uint64)
    assert _by_recurring_sites(_tie([0, 1, 2, 6]), _book(stacks), 1, _codes(stacks, gathers)).majority is False


def test_a_rank_whose_log_fits_both_orders_goes_with_the_side_that_ends_where_its_whole_log_does():
    # Rank 6 swapped B and C in the first step and stopped one collective short of rank 1 (18 records): the logs
    # of ranks 0, 2 and 3 (every collective an AllReduce of one size) fit both orders. Rank 2's whole log ends
    # where rank 6's does, rank 0's where rank 1's does; rank 3's log may be cut (its end is not known): it is
    # on neither side, and nothing puts a log that fits both orders on the kept side by default.
    kept = np.array(STEP * 3, dtype=np.uint64)
    swapped = kept[:17].copy()
    swapped[1], swapped[2] = 3, 2
    stacks = {0: np.zeros(18, dtype=np.uint64), 1: kept, 2: np.zeros(17, dtype=np.uint64),
              3: np.zeros(17, dtype=np.uint64), 6: swapped}
    ops = {r: np.ones(len(s), dtype=np.uint64) for r, s in stacks.items()}
    root = _by_recurring_sites(_tie([0, 1, 2, 3, 6]), _book(stacks), 1, _codes(stacks, ops), ended={0, 1, 2, 6})
    assert root.outlier_ranks == [2, 6] and root.reference_ranks == [0, 1] and root.unplaced_ranks == [3]
    assert root.majority


def _tie(ranks: list[int]) -> Root:
    """Dumps of ranks 1 and 6 part at seq 2..3 with no majority: every rank named on both sides."""
    return Root(comm="tp", seq=2, seq_range=(2, 3), outlier_ranks=ranks, reference_ranks=ranks, kind=DIFFERENT_OPS,
                size=2, pinned_by="call sites", reason=None, majority=False, narrowed_by=("call sites",))


def _book(stacks: dict[int, np.ndarray]) -> SimpleNamespace:
    return SimpleNamespace(codes=lambda fields: {r: SimpleNamespace(fields={"stack": s}) for r, s in stacks.items()})


def _codes(stacks: dict[int, np.ndarray], ops: dict[int, np.ndarray]) -> dict[int, Codes]:
    """Every field compared: the ops (each rank's signatures) and the call stacks (0 where unrecorded)."""
    return {r: Codes({"op": ops[r], "stack": stacks[r]}, len(stacks[r])) for r in stacks}


def test_a_rank_with_no_records_whose_count_is_all_it_launched_goes_with_the_side_that_ends_where_it_does():
    # Ranks 1 and 3 dumped comm 0xa (two layers a step, attention A and MoE M, each layer's from the same call
    # sites: A M A M); rank 1 left out step 1's first M (seq 6), and the results read back wrong from there. Ranks 0
    # and 2 left no records: a peer's desync report counts rank 2 launching 15 (`[1, 2] finished collective #15,
    # but didn't join collective #16`: all it launched) and rank 0 at least 16 (`#16 started ranks: [0, 3]`, a
    # floor). Rank 2 ends where rank 1 does: it departed too, and is named with it; rank 0 is on neither side.
    streams = _dumped_tie()
    root = analyze_comm(streams, "0xa", counted={0: 16, 2: 15}, floors=frozenset({0}), exact=frozenset({2})).root
    assert (root.outlier_ranks, root.reference_ranks, root.unplaced_ranks) == ([1, 2], [3], [0])
    assert root.majority and root.seq_range == (6, 6)
    # A count that is only a floor says nothing of where rank 2's stream ends: on neither side.
    root = analyze_comm(streams, "0xa", counted={0: 16, 2: 15}, floors=frozenset({0, 2})).root
    assert (root.outlier_ranks, root.unplaced_ranks) == ([1], [0, 2])
    # Nor does a count no desync report shows to be all it launched (a dump's, taken while the job ran on).
    root = analyze_comm(streams, "0xa", counted={0: 16, 2: 15}, floors=frozenset({0})).root
    assert (root.outlier_ranks, root.unplaced_ranks) == ([1], [0, 2])
    # Nor one of a rank that another communicator names with none of its records there: it may wait in it.
    streams.expected_members["0xb"] = [0, 1, 2, 3]
    root = analyze_comm(streams, "0xa", counted={0: 16, 2: 15}, floors=frozenset({0}), exact=frozenset({2})).root
    assert (root.outlier_ranks, root.unplaced_ranks) == ([1], [0, 2])


def test_a_rank_cut_short_whose_count_is_only_a_floor_is_on_neither_side():
    # As above, but rank 2 dumped too, its ring cut after seq 4 (before the ranks part): PyTorch's count carries its
    # stream on past the cut. Counted to 15, all it launched, it goes with rank 1; at least 15 (a floor), it may
    # have launched 16 as rank 3 did, and is on neither side.
    streams = _dumped_tie(cut_after=4)
    root = analyze_comm(streams, "0xa", counted={0: 16, 2: 15}, floors=frozenset({0})).root
    assert (root.outlier_ranks, root.reference_ranks, root.unplaced_ranks) == ([1, 2], [3], [0])
    root = analyze_comm(streams, "0xa", counted={0: 16, 2: 15}, floors=frozenset({0, 2})).root
    assert (root.outlier_ranks, root.reference_ranks, root.unplaced_ranks) == ([1], [3], [0, 2])


def _dumped_tie(cut_after: int | None = None) -> Streams:
    """Dumps of ranks 1 and 3 of comm 0xa (members 0-3), four steps of A M A M, rank 1 without step 1's first M,
    beside per-collective checksums right up to seq 5 and wrong from seq 6 on; rank 3 waits in its seq 16. With
    `cut_after`, rank 2's dump too, of rank 1's program, cut after that seq."""
    def program(skip: bool) -> list[tuple[int, str]]:
        return [(step, site) for step in range(4) for at, site in enumerate(["attn.py:10", "moe.py:20"] * 2)
                if not (skip and step == 1 and at == 1)]

    evidence, traces = [], []
    for rank, skip, kept in ((1, True, 15), (3, False, 16), (2, True, cut_after or 0)):
        sites = program(skip)[:kept]
        if not sites:
            continue
        events = [CollectiveEvent(loc=Location(f"fr_rank{rank}", None, seq - 1), comm="0xa", seq=seq, op="AllReduce",
                                  rank=rank, count=2048, dtype="float32", redop="sum", root=0, callsite=site,
                                  stack=site, state="completed" if skip or seq < len(sites) else "started")
                  for seq, (_, site) in enumerate(sites, start=1)]
        evidence.append(Evidence(path=f"fr_rank{rank}", format=SourceFormat.FLIGHT_RECORDER,
                                 collectives=collectives_to_frame(events)))
        traces += [FingerprintRow(loc=Location(f"fingerprint_rank{rank}.jsonl", seq), rank=rank, step=step, op=seq - 1,
                                  tag=site, kind="AllReduce", numel=2048, sum=1.0 if seq < 6 else 2.0, expected_sum=1.0)
                   for seq, (step, site) in enumerate(sites, start=1) if skip or seq < len(sites)]
    streams = attach_fingerprints(build_streams(evidence), traces)
    streams.expected_members["0xa"] = [0, 1, 2, 3]
    if cut_after:
        streams.cut[("0xa", 2)] = Location("fr_rank2", None, cut_after)
    return streams
