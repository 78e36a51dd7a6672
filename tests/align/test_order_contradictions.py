"""Two ranks' whole records that give their shared communicators' collectives in orders no one program gives
(align/order_contradictions.py), and the verdict they make: `diverged`, whatever the moment each record ends."""

from ncclforensics.align.diagnosis import diagnose
from ncclforensics.align.order_contradictions import order_contradictions
from ncclforensics.align.streams import build_streams
from ncclforensics.model import CollectiveEvent, Evidence, Location, SourceFormat, collectives_to_frame
from ncclforensics.model.kinds import P2P_SUFFIX
from ncclforensics.report import words

from cli_helpers import run_cli

W, T1, T2 = "0xwor1d", "0x7e1", "0x7e2"


def rank_log(rank, order, cut=False):
    """An NCCL log of one rank: the comms of its collectives in the order it issued them, one line each."""
    name = f"rank{rank}.log"
    seqs, events = {}, []
    for line, comm in enumerate(order, start=1):
        seqs[comm] = seqs.get(comm, 0) + 1
        events.append(CollectiveEvent(loc=Location(name, line), comm=comm, seq=seqs[comm], op="AllReduce",
                                      rank=rank, count=512, dtype="float32", redop="sum", root=0))
    return Evidence(path=name, format=SourceFormat.NCCL_LOG, collectives=collectives_to_frame(events),
                    cut=Location(name, len(order)) if cut else None)


def step(tp, skip=False):
    """Three TP collectives (two where the rank's drafter skipped alone), then one of the world."""
    return [tp] * (2 if skip else 3) + [W]


# Each TP pair's second rank skipped one of step 1's TP collectives: it went on to the world one while its peer
# waits in TP for it (1078644's shape).
HUNG = [step(T1) + [T1] * 3, step(T1) + step(T1, skip=True), step(T2) + [T2] * 3, step(T2) + step(T2, skip=True)]


def test_ranks_that_each_issued_one_the_other_never_did_contradict_one_program():
    found = order_contradictions(build_streams([rank_log(r, o) for r, o in enumerate(HUNG)]))
    assert [(c.first_rank, c.second_rank, sorted(c.comms)) for c in found] == [(0, 1, [T1, W]), (2, 3, [T2, W])]
    first = found[0]
    # rank 0 issued TP seq 6 (its line 7) with world 1 the last before it, and never world 2; rank 1 issued world 2
    # (its line 7) after TP 5 and never TP 6
    assert (first.first, first.second) == ((T1, 6), (W, 2))
    assert str(first.first_at) == "rank0.log:7" and str(first.second_at) == "rank1.log:7"
    assert not first.first_rank_issued_second and not first.second_rank_issued_first


def test_both_issued_both_in_opposite_orders():
    logs = [rank_log(0, [T1, W, T1, W]), rank_log(1, [T1, T1, W, W])]
    found = order_contradictions(build_streams(logs))
    assert len(found) == 1 and found[0].first_rank_issued_second and found[0].second_rank_issued_first
    assert (found[0].first, found[0].second) == ((W, 1), (T1, 2))


def test_prefixes_of_one_order_do_not_contradict():
    # logs taken at different moments of one program: the ranks' launch counts differ, their orders do not
    program = step(T1) * 3
    logs = [rank_log(0, program), rank_log(1, program[:5]), rank_log(2, program[:8]), rank_log(3, program[:1])]
    assert order_contradictions(build_streams(logs)) == []


def test_a_log_cut_short_says_nothing_of_what_it_did_not_record():
    # rank 0's log, cut, may have gone on to world 2 before TP 6: only rank 1's whole one orders the two
    logs = [rank_log(0, HUNG[0], cut=True), rank_log(1, HUNG[1])]
    assert order_contradictions(build_streams(logs)) == []
    assert order_contradictions(build_streams([rank_log(0, HUNG[0]), rank_log(1, HUNG[1])]))


def test_send_recv_comms_are_left_out():
    # a send pairs with its peer's receive, not with a place in one program: its comm orders nothing here
    p2p = W + P2P_SUFFIX
    streams = build_streams([rank_log(r, [p2p if c == W else c for c in o]) for r, o in enumerate(HUNG[:2])])
    assert p2p in streams.members and order_contradictions(streams) == []


def test_the_contradiction_makes_the_verdict_and_says_why():
    d = diagnose([rank_log(r, o) for r, o in enumerate(HUNG)])
    assert d.verdict.value == "diverged" and d.order_contradiction is not None
    said = words.summary(d)
    assert "rank0.log:7" in said and "rank1.log:7" in said and "no one program issues" in said


COMM_IDS = {W: "0x5eedc0de00000001", T1: "0x5eedc0de00000002", T2: "0x5eedc0de00000003"}
MEMBERS = {W: [0, 1, 2, 3], T1: [0, 1], T2: [2, 3]}


def nccl_log_text(rank, order):
    """The NCCL_DEBUG=INFO (INIT,COLL) log of one rank that issued `order` (comms), as NCCL 2.28 writes it: each
    communicator initialized before its first collective, one COLL line per collective, no teardown (it hung)."""
    head = f"vm:{700 + rank}:{700 + rank} [{rank}] NCCL INFO "
    lines = [head + "NCCL version 2.28.9+cuda13.0"]
    counts: dict[str, int] = {}
    for comm in order:
        ptr = f"0x5{rank}{list(COMM_IDS).index(comm)}0000"
        size, comm_rank = len(MEMBERS[comm]), MEMBERS[comm].index(rank)
        if comm not in counts:
            config = (f"ncclCommInitRankConfig comm {ptr} rank {comm_rank} nranks {size} cudaDev {rank} nvmlDev "
                      f"{rank} busId {rank + 1}000 commId {COMM_IDS[comm]}")
            lines += [head + f"{config} - Init START", head + f"comm {ptr} rank {comm_rank} nRanks {size} nNodes 1 "
                      f"localRanks {size} localRank {comm_rank} MNNVL 0", head + f"{config} - Init COMPLETE"]
        count = counts.get(comm, 0)
        counts[comm] = count + 1
        lines.append(head + f"AllReduce: opCount {count:x} sendbuff 0x7f0000e00000 recvbuff 0x7f0000e00000 count 512 "
                     f"datatype 7 op 0 root 0 comm {ptr} [nranks={size}] stream (nil)")
    return "\n".join(lines) + "\n"


def test_diff_on_logs_whose_orders_contradict_exits_1_and_says_why(tmp_path):
    for rank, order in enumerate([[W] + o for o in HUNG]):  # (the world's first barrier at start)
        (tmp_path / f"nccl.vm.{700 + rank}.log").write_text(nccl_log_text(rank, order))
    code, out, _ = run_cli("diff", tmp_path)
    assert code == 1 and out.startswith("DIVERGED")
    said = " ".join(out.split())
    # (the world's seq 3 is its barrier at start plus one world collective a step)
    assert (f"Rank 0 launched comm {COMM_IDS[T1]} seq 6 ({tmp_path / 'nccl.vm.700.log'}:15) and never comm "
            f"{COMM_IDS[W]} seq 3, rank 1 comm {COMM_IDS[W]} seq 3 ({tmp_path / 'nccl.vm.701.log'}:15) and never comm "
            f"{COMM_IDS[T1]} seq 6: no one program issues its collectives in both orders, so a rank departed.") in said
