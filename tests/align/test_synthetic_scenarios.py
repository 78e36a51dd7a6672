"""Scenarios built in the tests from event records: cases the real captures do not cover."""

from ncclforensics.align.diagnosis import diagnose
from ncclforensics.report import words
from ncclforensics.model import (
    CollectiveEvent,
    Evidence,
    FingerprintRow,
    GateDecision,
    Location,
    SourceFormat,
    Verdict,
    WedgeKind,
    collectives_to_frame,
)


def rank_log(rank, comm_ops, states=None, name=None):
    """Evidence of one rank: comm_ops maps comm -> list of (op, count) in issue order (interleaved by order)."""
    name = name or f"rank{rank}.log"
    events = []
    order = comm_ops if isinstance(comm_ops, list) else [(c, o) for c, ops in comm_ops.items() for o in ops]
    seqs = {}
    for line, (comm, (op, count)) in enumerate(order, start=1):
        seqs[comm] = seqs.get(comm, 0) + 1
        state = None if states is None else states(comm, seqs[comm])
        events.append(CollectiveEvent(loc=Location(name, line), comm=comm, seq=seqs[comm], op=op, rank=rank,
                                      count=count, dtype="float32", redop="sum", root=0, state=state))
    fmt = SourceFormat.FLIGHT_RECORDER if states else SourceFormat.NCCL_LOG
    return Evidence(path=name, format=fmt, collectives=collectives_to_frame(events))


def gates(rank, decisions):
    return Evidence(path=f"gate{rank}.log", format=SourceFormat.GATE_JOURNAL, gates=[
        GateDecision(loc=Location(f"gate{rank}.log", i + 1), rank=rank, step=i, decision=d)
        for i, d in enumerate(decisions)])


AR = ("AllReduce", 4096)


def test_count_mismatch_is_the_first_difference_and_pinned():
    base = [AR] * 10 + [("AllReduce", 8192)] + [AR] * 3
    odd = [AR] * 10 + [("AllReduce", 1024)] + [AR] * 3
    ev = [rank_log(r, {"0xc": base}) for r in (0, 1, 2)] + [rank_log(3, {"0xc": odd})]
    d = diagnose(ev)
    assert d.verdict is Verdict.DIVERGED
    assert d.root.seq_range == (11, 11) and d.root.outlier_ranks == [3] and d.root.kind == "different"
    assert d.first_visible == ("0xc", 11)


def test_dropped_collective_gives_missing_with_range():
    base = [AR] * 6 + [("AllGather", 128)] + [AR] * 4
    dropped = [AR] * 5 + [("AllGather", 128)] + [AR] * 4
    ev = [rank_log(r, {"0xc": base}) for r in (0, 1, 2)] + [rank_log(3, {"0xc": dropped})]
    d = diagnose(ev)
    assert d.root.kind == "missing" and d.root.outlier_ranks == [3]
    assert d.root.seq_range == (1, 6)  # any of the six equal AllReduces could be the one it skipped
    assert d.first_visible == ("0xc", 6)


def test_two_rank_comm_names_both_without_journal_and_the_passer_with_one():
    drafted = [AR] * 4 + [("AllReduce", 512)] + [AR] * 4
    skipped = [AR] * 8
    ev = [rank_log(0, {"0xt": drafted}), rank_log(1, {"0xt": skipped})]
    d = diagnose(ev)
    assert d.root.outlier_ranks == [0, 1] and not d.root.majority
    # Rank 0's odd AllReduce may end a longer drafter pass whose first collectives look like the layers' ones.
    assert d.root.seq_range == (1, 5)
    assert any("No majority" in c for c in words.caveats(d))
    d = diagnose(ev + [gates(0, ["skip", "pass", "skip"]), gates(1, ["skip", "skip", "skip"])])
    assert d.root.outlier_ranks == [0]
    assert d.gate.step == 1 and d.gate.passed == [0]


def test_cross_communicator_deadlock():
    # rank 0 issues comm X then Y; rank 1 issues Y then X. Launches are asynchronous, so both ranks launched
    # both; the Flight Recorder states show each stuck in its first (started) and the second queued behind it.
    x, y = "0xaaaa", "0xbbbb"
    done = [(x, AR), (y, AR)] * 3
    ev = [rank_log(0, done + [(x, AR), (y, AR)], states=lambda c, s: "completed" if s <= 3 else
                   ("started" if c == x else "launched")),
          rank_log(1, done + [(y, AR), (x, AR)], states=lambda c, s: "completed" if s <= 3 else
                   ("started" if c == y else "launched"))]
    d = diagnose(ev)
    assert d.wedge is not None and d.wedge.kind is WedgeKind.CROSS_COMM_DEADLOCK
    assert {c for _, c, _ in d.wedge.cycle} == {x, y}


def test_sixty_four_ranks_one_extra_op():
    base = [AR] * 30
    extra = [AR] * 12 + [("AllReduce", 2)] + [AR] * 18
    ev = [rank_log(r, {"0xw": base}) for r in range(64) if r != 17] + [rank_log(17, {"0xw": extra})]
    d = diagnose(ev)
    # The odd AllReduce may be the last of up to 13 extra collectives, the others looking like the layers' ones:
    # signatures alone give the range, and the likeliest kind.
    assert d.root.outlier_ranks == [17] and d.root.seq_range == (1, 13) and d.root.kind == "extra"
    assert d.window.first_seq == 1 and d.window.last_seq == 30 and d.window.collectives_min == 18
    assert d.wedge.seq == 31 and d.wedge.kind is WedgeKind.NO_PARTNER and d.wedge.waiting_ranks == [17]
    assert d.ranks == list(range(64))


def test_consistent_streams():
    ev = [rank_log(r, {"0xw": [AR] * 5}) for r in range(4)]
    d = diagnose(ev)
    assert d.verdict is Verdict.CONSISTENT and d.root is None and d.wedge is None


def test_conflicting_files_for_one_rank_are_reported_not_merged():
    ev = [rank_log(0, {"0xw": [AR] * 5}), rank_log(1, {"0xw": [AR] * 5}),
          rank_log(1, {"0xw": [AR] * 7}, name="other_job_rank1.log")]
    d = diagnose(ev)
    assert any("conflicts with" in p.message and p.loc.path == "other_job_rank1.log" for p in d.problems)
    assert d.comms["0xw"].launched == {0: 5, 1: 5}


def test_a_result_read_back_wrong_is_a_divergence_even_where_no_stream_shows_one():
    # Rank 3's records end two collectives short of the others', with nothing to say whether it skipped them or
    # stopped (inconclusive on its own). Rank 2's trace of step 0 reads back a checksum other than the one a
    # consistent world gives: collectives completed with mixed data, so the job did diverge (exit 1).
    def trace(rank, got):
        path = f"fingerprint_rank{rank}.jsonl"
        return Evidence(path=path, format=SourceFormat.FINGERPRINT, fingerprints=[
            FingerprintRow(Location(path, 1), rank, 0, sum=got, expected_sum=64.0)])
    logs = [rank_log(r, {"0xw": [AR] * 5}) for r in range(3)] + [rank_log(3, {"0xw": [AR] * 3})]
    assert diagnose(logs + [trace(0, 64.0)]).verdict is Verdict.INCONCLUSIVE
    d = diagnose(logs + [trace(0, 64.0), trace(2, 48.0)])
    assert d.verdict is Verdict.DIVERGED and d.root.outlier_ranks == [3]
    # The summary says why it is a divergence, although the window it gives may hold no misaligned collective.
    assert "Rank 2 read back a wrong result (fingerprint_rank2.jsonl:1, step 0)" in words.summary(d)
    # A root that rests on the checksums says so itself; one that does not is told of the wrong result.
    lone = diagnose([rank_log(r, {"0xw": [AR] * 5}) for r in range(4)] + [trace(2, 48.0)])
    assert "read back a wrong result" not in words.summary(lone) and "checksums of rank 2" in words.summary(lone)


def test_a_rank_that_stopped_before_two_others_part_leaves_them_an_even_split():
    # Each step opens with two world all-reduces (counts 1 and 8), then two of the rank's TP pair. Rank 2 left out
    # the world count-1 one at step 2 (world seq 5), where rank 3 ran it; rank 1 stopped after step 1 (world seq 4),
    # and rank 0 left nothing. Rank 1 holds nothing of seq 5, and what it would have launched there is no record:
    # rank 3 running one more there writes the same records as rank 2 running one fewer, so the two are named
    # together, no majority, and rank 1 is on neither side (1144634's evidence).
    def step(tp, skip=False):
        return ([] if skip else [("0xw", ("AllReduce", 1))]) + [("0xw", ("AllReduce", 8))] + [(tp, AR)] * 2

    logs = [rank_log(1, step("0xt1") * 2), rank_log(2, step("0xt2") * 2 + step("0xt2", skip=True)),
            rank_log(3, step("0xt2") * 3)]
    root = diagnose(logs).root
    assert (root.comm, root.outlier_ranks, root.reference_ranks, root.majority) == ("0xw", [2, 3], [2, 3], False)
    assert root.unplaced_ranks == [1] and root.seq_range[0] <= 5 <= root.seq_range[1]
