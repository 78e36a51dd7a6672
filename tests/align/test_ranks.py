"""align/ranks.py: global ranks for NCCL logs of processes that no communicator over every rank names."""

from __future__ import annotations

from dataclasses import replace

from ncclforensics.align.ranks import _by_layout, _by_members, _matches, dump_fits, resolve_global_ranks
from ncclforensics.model import (
    CollectiveEvent,
    CommInfo,
    Evidence,
    Location,
    ProcessIdentity,
    SourceFormat,
    WatchdogEvent,
    collectives_to_frame,
)
from ncclforensics.sources import formats

FACTS = formats()
# Nine ranks: tensor-parallel groups of 3 and data-parallel groups of 3, one size for both.
TP = [(0, 1, 2), (3, 4, 5), (6, 7, 8)]
DP = [(0, 3, 6), (1, 4, 7), (2, 5, 8)]


def _dump(rank: int) -> Evidence:
    """A Flight Recorder dump whose `pg_config` lists every group."""
    infos = [CommInfo(loc=Location(f"fr_rank{rank}", field="pg_config"), comm=str(i), ranks=g)
             for i, g in enumerate(TP + DP)]
    return Evidence(path=f"fr_rank{rank}", format=SourceFormat.FLIGHT_RECORDER, comm_infos=infos,
                    facts=FACTS[SourceFormat.FLIGHT_RECORDER])


def _log(pid: int, *comms: tuple[str, int]) -> Evidence:
    """One process's NCCL log: its comm rank in each comm of size 3."""
    identities = [ProcessIdentity(loc=Location(f"nccl.{pid}.log", 1), host="node", pid=pid, rank=comm_rank,
                                  comm=comm, comm_rank=comm_rank, comm_size=3) for comm, comm_rank in comms]
    return Evidence(path=f"nccl.{pid}.log", format=SourceFormat.NCCL_LOG, identities=identities,
                    facts=FACTS[SourceFormat.NCCL_LOG])


def test_a_comm_is_the_one_group_every_placed_member_allows():
    """Comm 0xdp holds rank 0 at comm rank 0 and rank 3 at comm rank 1. Rank 0 alone allows (0, 1, 2) and
    (0, 3, 6); rank 3 allows (0, 3, 6) only: the comm is that group, and its comm rank 2 is rank 6 (a union of
    what each allows would leave two groups, and place nobody)."""
    logs = [_log(1, ("0xdp", 0)), _log(2, ("0xdp", 1)), _log(3, ("0xdp", 2))]
    processes = [("node", 1), ("node", 2), ("node", 3)]
    found = _by_members(logs, [*logs, _dump(0)], processes, {("node", 1): 0, ("node", 2): 3})
    assert found == {("node", 3): 6}


def test_a_process_that_fits_several_dumps_may_be_any_of_them():
    """A log cut after its first INIT line (comm rank 2 of a group of 3) fits the dumps of ranks 5 and 8 alike.
    With ranks 2, 5 and 6 placed, the layout leaves 7 (no dump) and 8 (a dump): a process with a dump of its own
    would have matched it, but this one matched rank 8's among others, so it may be rank 8; nothing places it."""
    process = ("node", 9)
    logs = [_log(9, ("0xcut", 2))]
    evidence = [*logs, _dump(8), _dump(5)]
    placed = {("node", 1): 2, ("node", 2): 5, ("node", 3): 6}
    assert _by_layout(logs, evidence, [process], placed, {5, 8}, {process: {5, 8}}) == {}
    # (one that matched no dump is not rank 8: the one rank left is its)
    assert _by_layout(logs, evidence, [process], placed, {5, 8}, {process: set()}) == {process: 7}


def test_two_communicators_of_a_process_are_two_groups_of_its_dump():
    """Comm rank 0 of two 2-rank comms is not rank 1 of TP (0, 1) and DP (1, 3): its only group with it at comm
    rank 0 is DP, and one group cannot be both comms (rank 1 skipped DP's collective, so its dump says nothing
    against either)."""
    process = {"0xdp": (2, 0, {1: ("AllReduce", 1)}), "0xtp": (2, 0, {1: ("AllReduce", 2048)})}
    rank_1 = [((0, 1), 1, ((1, ("AllReduce", 2048)),)), ((1, 3), 0, ())]
    assert not _matches(process, rank_1)
    assert _matches({"0xtp": process["0xtp"]}, [((0, 1), 0, ((1, ("AllReduce", 2048)),))])


def test_a_comm_is_the_group_whose_records_in_the_placed_rank_s_dump_agree():
    """Rank 3 is comm rank 1 of 0xtp23, which fits both its groups (2, 3) and (1, 3) by position; its dump has
    AllReduce x2048 in (2, 3) and AllReduce x1 in (1, 3), and the comm's records are AllReduce x2048: the comm is
    (2, 3), and its comm rank 0 is rank 2."""
    def log(pid: int, comm_rank: int) -> Evidence:
        path = f"nccl.{pid}.log"
        return Evidence(path=path, format=SourceFormat.NCCL_LOG, identities=[ProcessIdentity(
            loc=Location(path, 1), host="node", pid=pid, rank=comm_rank, comm="0xtp23", comm_rank=comm_rank,
            comm_size=2)], collectives=collectives_to_frame([CollectiveEvent(
                loc=Location(path, 2), comm="0xtp23", seq=1, op="AllReduce", count=2048, rank=comm_rank,
                host="node", pid=pid)]), facts=FACTS[SourceFormat.NCCL_LOG])

    infos = [CommInfo(loc=Location("fr_rank3", field="pg_config"), comm=name, ranks=ranks)
             for name, ranks in (("2", (2, 3)), ("4", (1, 3)))]
    dump = Evidence(path="fr_rank3", format=SourceFormat.FLIGHT_RECORDER, comm_infos=infos, collectives=(
        collectives_to_frame([CollectiveEvent(loc=Location("fr_rank3", record=i), comm=name, seq=1, op="AllReduce",
                                              count=count, rank=3) for i, (name, count) in enumerate(
                                                  (("4", 1), ("2", 2048)))])),
        facts=FACTS[SourceFormat.FLIGHT_RECORDER])
    logs = [log(2, 0), log(3, 1)]
    assert _by_members(logs, [*logs, dump], [("node", 2), ("node", 3)], {("node", 3): 3}) == {("node", 2): 2}


def test_a_dump_that_fits_a_process_on_sizes_and_comm_ranks_alone_is_not_its():
    """TP (0, 1), (2, 3) and DP (0, 2), (1, 3); dumps of ranks 0, 2 and 3. The one log's process is comm rank 1 of
    0xtp and comm rank 0 of 0xdp: rank 2's dump fits it (DP (0, 2) at comm rank 1, TP (2, 3) at 0), but its ring
    kept nothing of DP and TP only from seq 8, past the log's seqs: no collective ties them. Rank 1, which left no
    dump, fits as well, so the process is no rank a dump gives; it stands in as rank 1, the one rank left."""
    groups = {"1": (0, 1), "2": (2, 3), "3": (0, 2), "4": (1, 3)}

    def dump(rank: int, rows: list[tuple[str, int, int]]) -> Evidence:
        path = f"fr_rank{rank}"
        infos = [CommInfo(loc=Location(path, field="pg_config"), comm=name, ranks=ranks)
                 for name, ranks in groups.items() if rank in ranks]
        events = [CollectiveEvent(loc=Location(path, record=i), comm=name, seq=seq, op="AllReduce", count=count,
                                  rank=rank) for i, (name, seq, count) in enumerate(rows)]
        return Evidence(path=path, format=SourceFormat.FLIGHT_RECORDER, comm_infos=infos,
                        collectives=collectives_to_frame(events), facts=FACTS[SourceFormat.FLIGHT_RECORDER])

    path = "nccl.722.log"
    identities = [ProcessIdentity(loc=Location(path, 1), host="vm", pid=722, rank=comm_rank, comm=comm,
                                  comm_rank=comm_rank, comm_size=2) for comm, comm_rank in (("0xdp", 0), ("0xtp", 1))]
    events = [CollectiveEvent(loc=Location(path, 2 + seq), comm="0xtp", seq=seq, op="AllReduce", count=2048,
                              rank=1, host="vm", pid=722) for seq in (1, 2, 3)]
    events += [CollectiveEvent(loc=Location(path, 9 + seq), comm="0xdp", seq=seq, op="AllReduce", count=1,
                               rank=0, host="vm", pid=722) for seq in (1, 2)]
    log = Evidence(path=path, format=SourceFormat.NCCL_LOG, identities=identities,
                   collectives=collectives_to_frame(events), facts=FACTS[SourceFormat.NCCL_LOG])
    dumps = [dump(0, [("1", seq, 2048) for seq in (1, 2, 3)] + [("3", 1, 1)]),
             dump(2, [("2", seq, 2048) for seq in (8, 9)]),
             dump(3, [("2", seq, 2048) for seq in range(1, 10)] + [("4", 1, 1)])]
    _, notes, stand_ins = resolve_global_ranks([log, *dumps])
    assert stand_ins == {1: "vm:722"} and notes[0].given == 0


# Four ranks, 2-rank comms TP (0, 1), (2, 3) and DP (0, 2), (1, 3); only rank 0 left a dump, which lists its own
# two groups. Comm rank 0 is the lower global rank in each.
PAIRS = {"0xtp01": (0, 1), "0xtp23": (2, 3), "0xdp02": (0, 2), "0xdp13": (1, 3)}


def _pair_log(rank: int, counts: dict[str, list[int]]) -> Evidence:
    """Rank `rank`'s NCCL log: its comm rank in each 2-rank comm holding it, and the counts of its AllReduces
    there (seq 1 on), where given."""
    path = f"nccl.{100 + rank}.log"
    comms = [(comm, ranks.index(rank)) for comm, ranks in PAIRS.items() if rank in ranks]
    identities = [ProcessIdentity(loc=Location(path, 1), host="node", pid=100 + rank, rank=comm_rank, comm=comm,
                                  comm_rank=comm_rank, comm_size=2) for comm, comm_rank in comms]
    events = [CollectiveEvent(loc=Location(path, 2 + seq), comm=comm, seq=seq, op="AllReduce", count=count,
                              rank=comm_rank, host="node", pid=100 + rank)
              for comm, comm_rank in comms for seq, count in enumerate(counts.get(comm, []), start=1)]
    # its aborts, numbered as the log numbers the process: its comm rank in the comm it initialized first
    aborts = [WatchdogEvent(loc=Location(path, 99), kind="abort", rank=comms[0][1], comm=comm, host="node",
                            pid=100 + rank) for comm, _ in comms]
    return Evidence(path=path, format=SourceFormat.NCCL_LOG, identities=identities, watchdog=aborts,
                    collectives=collectives_to_frame(events), facts=FACTS[SourceFormat.NCCL_LOG])


def _rank_0_dump() -> Evidence:
    """Rank 0's dump, a ring that kept TP's seqs 10..11 and DP's seq 4 only."""
    infos = [CommInfo(loc=Location("fr_rank0", field="pg_config"), comm=name, ranks=ranks)
             for name, ranks in (("1", (0, 1)), ("3", (0, 2)))]
    rows = [("1", 10, 2048), ("1", 11, 2048), ("3", 4, 8)]
    events = [CollectiveEvent(loc=Location("fr_rank0", record=i), comm=name, seq=seq, op="AllReduce", count=count,
                              rank=0) for i, (name, seq, count) in enumerate(rows)]
    return Evidence(path="fr_rank0", format=SourceFormat.FLIGHT_RECORDER, comm_infos=infos,
                    collectives=collectives_to_frame(events), facts=FACTS[SourceFormat.FLIGHT_RECORDER])


def test_a_group_one_comm_of_a_placed_process_is_is_not_another_of_its_comms():
    """Rank 0's process is comm rank 0 of 0xtp01 and of 0xdp02; both of its dump's groups, (0, 1) and (0, 2), put it
    at comm rank 0. 0xtp01's AllReduce x2048 at seq 10 is (0, 1)'s only, and 0xdp02 holds no seq past 4 that tells
    the two apart by records: but (0, 1) is 0xtp01, so 0xdp02 is (0, 2), and its comm rank 1 is rank 2."""
    tp, dp = [1, 8] + [2048] * 10, [1, 8, 1, 8]
    logs = [_pair_log(0, {"0xtp01": tp, "0xdp02": dp}), _pair_log(2, {"0xdp02": dp + [1]})]
    found = _by_members(logs, [*logs, _rank_0_dump()], [("node", 100), ("node", 102)], {("node", 100): 0})
    assert found == {("node", 102): 2}


def test_a_layout_the_dumps_list_part_of_is_no_layout():
    """Rank 0's dump lists (0, 1) and (0, 2), which cover ranks 0..2, but the logs show four processes and four
    2-rank comms: TP (2, 3) and DP (1, 3) are listed nowhere. Rank 3's process is comm rank 1 of both of its comms,
    which the listed groups allow for ranks 1 and 2 alone: with 0 and 1 placed the layout would name it rank 2.
    Nothing places it."""
    logs = [_pair_log(rank, {}) for rank in range(4)]
    placed = {("node", 100): 0, ("node", 101): 1}
    processes = [("node", 100 + rank) for rank in range(4)]
    assert _by_layout(logs, [*logs, _rank_0_dump()], processes, placed, {0}) == {}


def test_processes_of_2_rank_comms_beside_one_dump_are_their_ranks_in_every_record():
    """The four processes of TP (0, 1), (2, 3) and DP (0, 2), (1, 3), with rank 0's dump alone: rank 0's process
    matches it, its comms name ranks 1 and 2 (0xdp02 by elimination), and rank 3 is the one left; not rank 2 by a
    layout that lists half the groups. Their aborts carry the same ranks as their collectives."""
    tp, dp = [1, 8] + [2048] * 10, [1, 8, 1, 8]
    logs = [_pair_log(0, {"0xtp01": tp, "0xdp02": dp}), _pair_log(1, {"0xtp01": tp, "0xdp13": dp}),
            _pair_log(2, {"0xdp02": dp + [8], "0xtp23": tp}), _pair_log(3, {"0xdp13": dp + [8], "0xtp23": tp})]
    changed, notes, stand_ins = resolve_global_ranks([*logs, _rank_0_dump()])
    assert stand_ins == {} and notes[0].given == 4
    for rank, log in enumerate(changed[:4]):
        assert {i.rank for i in log.identities} == {rank}
        assert set(log.collectives.get_column("rank").to_list()) == {rank}
        assert {w.rank for w in log.watchdog} == {rank}


def test_a_log_whose_comm_peer_is_no_rank_of_the_dump_s_group_is_not_that_dump_s():
    """1093826: TP (0, 1), (2, 3) and DP (0, 2), (1, 3), dumps of ranks 0 and 1 (each lists its own groups). Rank
    2's log was cut after its TP comm's first collective: comm rank 0 of a 2-rank comm whose records are TP's, as
    rank 0's dump has (0, 1). But its TP peer is comm rank 1 of a DP comm too, where rank 1's dump has rank 1 at
    comm rank 0: the peer is not rank 1, so the comm is not (0, 1), and the cut log is not rank 0's. Taken as
    rank 0's, it met rank 0's own log in one dump, and rank 0's log was left out as another job's."""
    tp, dp = [2048] * 4, [1] * 4

    def dump(rank: int) -> Evidence:
        path = f"fr_rank{rank}"
        groups = [(name, ranks) for name, ranks in (("1", (0, 1)), ("3", (0, 2)), ("4", (1, 3))) if rank in ranks]
        infos = [CommInfo(loc=Location(path, field="pg_config"), comm=name, ranks=ranks) for name, ranks in groups]
        events = [CollectiveEvent(loc=Location(path, record=i), comm=name, seq=seq, op="AllReduce", count=count,
                                  rank=rank) for i, (name, seq, count) in enumerate(
                                      (name, seq, count) for name, _ in groups
                                      for seq, count in enumerate(tp if name == "1" else dp, start=1))]
        return Evidence(path=path, format=SourceFormat.FLIGHT_RECORDER, comm_infos=infos,
                        collectives=collectives_to_frame(events), facts=FACTS[SourceFormat.FLIGHT_RECORDER])

    logs = [_pair_log(0, {"0xtp01": tp, "0xdp02": dp}), _pair_log(3, {"0xtp23": tp, "0xdp13": dp})]
    cut = _pair_log(2, {"0xtp23": tp[:1]})
    cut = replace(cut, identities=[i for i in cut.identities if i.comm == "0xtp23"])  # (cut before DP's INIT)
    evidence = [*logs, cut, dump(0), dump(1)]
    assert dump_fits(evidence) == {("node", 100): {0}}
    changed, notes, stand_ins = resolve_global_ranks(evidence)
    assert notes[0].given == 1 and {i.rank for i in changed[0].identities} == {0}
    assert set(stand_ins.values()) == {"node:102", "node:103"}
