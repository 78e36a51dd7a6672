"""align/ras_only.py: what RAS counts alone say, on a real reply (a rank killed mid-run) and on counts."""

from __future__ import annotations

from fixture_paths import EXTRA_OP, KILLED
from ras_replies import ras_status_reply

from ncclforensics.align.notes import SwappedTypes
from ncclforensics.align.ras import ras_histories
from ncclforensics.align.ras_only import ras_only_root, ras_rank_map, root_from_counts, wedge_from_counts
from ncclforensics.align.streams import Streams
from ncclforensics.model import Location, Verdict, WedgeKind
from ncclforensics.sources import InputFile, parse_file

KILLED_COMM = "0xd5dc471d2873616f"
EXTRA_COMM = "0x1715b7bd1b8fda9e"


def _ras(folder, name: str):
    evidence = parse_file(InputFile(folder / name, name))
    assert not evidence.has_errors, evidence.problems
    return evidence, ras_histories([(evidence.format.value, s) for s in evidence.ras])


def test_a_killed_rank_is_the_root_of_a_comm_no_stream_covers():
    evidence, ras = _ras(KILLED, "ras_json_q1.txt")
    streams = Streams()
    # The reply's 4-rank comm is the widest thing on record: its comm ranks are the global ranks.
    rank_map = ras_rank_map(streams, [evidence], ras)
    assert {rank_map[(KILLED_COMM, r)] for r in range(4)} == {0, 1, 2, 3}
    root = ras_only_root(ras, rank_map, streams, stops={})
    assert (root.comm, root.outlier_ranks, root.reference_ranks, root.kind) == (KILLED_COMM, [1], [0, 2, 3], "stopped")
    # NCCL 2.28 counts each collective type apart: the counts place the root at no seq.
    assert root.seq is None and root.pinned_by == "RAS counts"


def test_counts_that_differ_are_a_root_once_the_comm_stopped():
    evidence, ras = _ras(EXTRA_OP, "ras_status_q0.txt")
    rank_map = ras_rank_map(Streams(), [evidence], ras)
    assert ras_only_root(ras, rank_map, Streams(), stops={}) is None  # behind is not stuck: nothing says it stopped
    root = ras_only_root(ras, rank_map, Streams(), stops={EXTRA_COMM: ["watchdog timeout (torch_rank1.log:40)"]})
    assert (root.outlier_ranks, root.reference_ranks, root.kind) == ([0], [1, 2, 3], "extra")


def test_a_comm_the_streams_cover_is_left_to_them():
    evidence, ras = _ras(KILLED, "ras_json_q1.txt")
    covered = Streams(members={KILLED_COMM: [0, 2, 3]})
    assert ras_only_root(ras, ras_rank_map(covered, [evidence], ras), covered, stops={}) is None


def test_counts_name_the_minority_and_a_range_never_a_seq():
    assert root_from_counts("0xab", {0: 10, 1: 10, 2: 10}, "RAS counts") is None
    behind = root_from_counts("0xab", {0: 10, 1: 10, 2: 9, 3: 10}, "RAS counts")
    assert (behind.outlier_ranks, behind.reference_ranks, behind.kind, behind.seq_range, behind.size) == (
        [2], [0, 1, 3], "missing", (1, 10), 1)
    ahead = root_from_counts("0xab", {0: 12, 1: 10, 2: 10}, "RAS counts")
    assert (ahead.outlier_ranks, ahead.kind, ahead.seq_range, ahead.size) == ([0], "extra", (1, 12), 2)
    halves = root_from_counts("0xab", {0: 5, 1: 5, 2: 6, 3: 6}, "RAS counts")  # of two equal groups, the one behind
    assert (halves.outlier_ranks, halves.kind, halves.majority) == ([0, 1], "missing", False)
    assert behind.majority and not root_from_counts("0xab", {0: 7, 1: 4}, "RAS counts").majority


def test_counts_that_part_ranks_ahead_of_the_rest_and_behind_it_name_them_all():
    # Seed 926339, watchdog logs alone: ranks 3 and 7 skipped the world's first collective and rank 0 ran one more.
    # World counts 2, 1, 1, 0, 1, 1, 1, 0: the smallest group alone (rank 0) would put ranks 3 and 7, one short,
    # on the reference side; whose departure came first the counts cannot tell.
    from ncclforensics.align.held_back import may_hold_back
    from ncclforensics.report.root_words import root_sentence

    counts = {0: 2, 1: 1, 2: 1, 3: 0, 4: 1, 5: 1, 6: 1, 7: 0}
    root = root_from_counts("0", counts, "PyTorch's enqueued counts")
    assert (root.outlier_ranks, root.reference_ranks, root.ahead_of_the_rest) == ([0, 3, 7], [1, 2, 4, 5, 6], (0,))
    assert (root.kind, root.kinds, root.seq_range, root.size, root.majority) == (
        "missing", ("missing", "extra"), (1, 2), 1, True)
    # (the ranks behind are held back, if at all, by a peer that launched more than they: not by rank 0's own peer)
    pairs = {"0": (set(range(8)), 8), "1": ({0, 1}, 2), "2": ({2, 3}, 2), "3": ({4, 5}, 2), "4": ({6, 7}, 2)}
    assert root.outliers_behind == [3, 7] and may_hold_back(root, pairs) == (2, 6)
    said = root_sentence(root)
    assert said.startswith("Ranks 3 and 7 did not launch 1 collective") and "Rank 0 launched more than the rest" in said
    # ranks behind at two counts, no rank ahead: every one of them, and how many each left out is not one number
    behind = root_from_counts("0", {0: 4, 1: 4, 2: 4, 3: 2, 4: 3}, "RAS counts")
    assert (behind.outlier_ranks, behind.seq_range, behind.size, behind.ahead_of_the_rest) == ([3, 4], (1, 4), 0, ())


def test_the_wedge_is_the_first_collective_not_every_rank_launched():
    where = [Location("ras_status_q0.txt", 14)]
    wedge = wedge_from_counts("0xab", {0: 50, 1: 49, 2: 50}, {0: 49, 1: 49, 2: None}, set(), ["RAS"], where)
    assert (wedge.seq, wedge.waiting_ranks, wedge.absent_ranks, wedge.kind) == (50, [0, 2], [1], WedgeKind.NO_PARTNER)
    assert wedge.evidence == where and wedge.completed == {0: 49, 1: 49, 2: None}
    dead = wedge_from_counts("0xab", {0: 50, 1: 49, 2: 50}, {}, {1}, [], where)
    assert dead.kind is WedgeKind.RANK_GONE


def test_comm_ranks_named_for_want_of_global_ones_are_said_to_be_comm_ranks():
    from tests.cli_helpers import diff_json
    from fixture_paths import FIXTURES

    replies = sorted(str(p) for p in (FIXTURES / "constructed" / "ras").glob("tp-pair-mismatch-2.28.9-q*.txt"))
    _, d = diff_json(*replies)
    assert d["root"]["comm"] == "0x3c8e95904ecc4c46" and d["root"]["outlier_ranks"] == [0, 1]
    assert any("ranks are named by their rank in it, not the job's" in c and "rank 0 is process 21428" in c
               for c in d["caveats"])


def test_one_pid_on_two_nodes_is_two_processes(tmp_path):
    # Each node numbers its processes apart: ranks 1 and 3 share pid 21435 but not the node, so the world
    # comm's ranks (its comm ranks are global ranks) stay two ranks, not one named twice.
    reply = tmp_path / "ras_status_q0.txt"
    reply.write_text("\n".join([
        "NCCL version 2.28.9 compiled with CUDA 13.0", "CUDA runtime version 13000, driver version 13000", "",
        "Job summary", "===========", "",
        "  Nodes  Processes         GPUs  Processes     GPUs",
        "(total)   per node  per process    (total)  (total)",
        "      2          3            1          6        6", "",
        "Communicators... (0.000s)", "=============", "",
        "Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors",
        "    #  in group  per comm  per node  per comm  in group",
        "    0         1         2         3         6         6   RUNNING  MISMATCH", "",
        "Errors", "======", "", "Warnings", "========", "",
        "#0-0 (912922dd2503890a) MISMATCH",
        "  Communicator ranks have different AllReduce operation counts",
        "  4 ranks have launched up to operation 8",
        "  Rank 1 has launched up to operation 10 -- GPU 1 managed by process 21435 on node 10.1.0.2",
        "  Rank 3 has launched up to operation 10 -- GPU 1 managed by process 21435 on node 10.1.0.9", ""]))
    evidence, ras = _ras(tmp_path, reply.name)
    rank_map = ras_rank_map(Streams(), [evidence], ras)
    assert (rank_map[("0x912922dd2503890a", 1)], rank_map[("0x912922dd2503890a", 3)]) == (1, 3)
    root = ras_only_root(ras, rank_map, Streams(), stops={"0x912922dd2503890a": ["RAS"]})
    assert (root.outlier_ranks, root.reference_ranks) == ([1, 3], [0, 2, 4, 5])


class _Typed:
    """A RAS history reduced to its latest counts per comm rank and collective type."""

    def __init__(self, typed: dict[int, dict[str, int]]):
        self.typed = typed

    def by_type(self) -> dict[int, dict[str, int]]:
        return self.typed


def test_counts_of_as_many_collectives_of_other_types_add_their_ranks_to_a_root_the_records_place():
    from ncclforensics.align.answers import RangeReason, Root
    from ncclforensics.align.answers import DIFFERENT_OPS
    from ncclforensics.align.ras_only import with_swapped_types

    # Tags part rank 0 at seq 19; RAS counts give rank 2 one all-gather more and one all-reduce fewer than the
    # others, as many in all: it issued a collective of another type somewhere no record shows.
    root = Root(comm="0xabc", seq=19, seq_range=(19, 19), outlier_ranks=[0], reference_ranks=[1, 2, 3],
                kind=DIFFERENT_OPS, size=2, pinned_by="steps", reason=RangeReason.LOOKALIKE, majority=True, ops={},
                kinds=(DIFFERENT_OPS,), shown=True)
    rank_map = {("0xabc", r): r for r in range(4)}
    usual = {"AllGather": 4, "AllReduce": 24}
    history = _Typed({0: usual, 1: usual, 2: {"AllGather": 5, "AllReduce": 23}, 3: usual})
    merged, said = with_swapped_types(root, history, rank_map)
    assert (merged.outlier_ranks, merged.seq_range, merged.majority) == ([0, 2], (1, 19), False)
    assert said == [SwappedTypes(root.comm, (2,), (0, 2), (1, 19))]
    # Fewer in all is a rank behind (held back, stopped), not another type: nothing added.
    behind = _Typed({0: usual, 1: usual, 2: {"AllGather": 4, "AllReduce": 23}, 3: usual})
    assert with_swapped_types(root, behind, rank_map) == (root, [])


def _mismatch_reply(folder, lines: list[str]):
    """A plain STATUS reply of one 8-rank comm (0x35dcea3a2541a598), stuck, with these MISMATCH lines."""
    reply = folder / "ras_status_q0.txt"
    reply.write_text("\n".join([
        "NCCL version 2.28.9 compiled with CUDA 13.0", "CUDA runtime version 13000, driver version 13000", "",
        "Job summary", "===========", "",
        "  Nodes  Processes         GPUs  Processes     GPUs",
        "(total)   per node  per process    (total)  (total)",
        "      1          8            1          8        8", "",
        "Communicators... (0.000s)", "=============", "",
        "Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors",
        "    #  in group  per comm  per node  per comm  in group",
        "    0         1         1         8         8         8   RUNNING  MISMATCH", "",
        "Errors", "======", "", "Warnings", "========", "",
        "#0-0 (35dcea3a2541a598) MISMATCH", *lines, ""]))
    return _ras(folder, reply.name)


def test_counts_no_one_program_gives_are_a_root_of_a_comm_whose_records_agree(tmp_path):
    from ncclforensics.report.ambiguity import ambiguity

    # Seed 1082064: rank 2 issued an all-gather where an all-reduce was due, at seq 8, where its Flight Recorder ring
    # had not reached and its NCCL log was cut before; every record on file agrees. RAS gives it 1 all-gather and 14
    # all-reduces, the others 0 and 15: ranks of one program launch prefixes of it, so rank 2 departed.
    comm = "0x35dcea3a2541a598"
    evidence, ras = _mismatch_reply(tmp_path, [
        "  Communicator ranks have different AllGather operation counts",
        "  7 ranks have not launched any operations",
        "  Rank 2 has launched up to operation 1 -- GPU 0 managed by process 738 on node 192.0.2.2", "",
        "  Communicator ranks have different AllReduce operation counts",
        "  7 ranks have launched up to operation 15",
        "  Rank 2 has launched up to operation 14 -- GPU 0 managed by process 738 on node 192.0.2.2"])
    covered = Streams(members={comm: list(range(8))})
    root = ras_only_root(ras, ras_rank_map(covered, [evidence], ras), covered, stops={})
    assert (root.comm, root.outlier_ranks, root.reference_ranks, root.kind) == (comm, [2], [0, 1, 3, 4, 5, 6, 7],
                                                                                 "different")
    # Counts per type place nothing in launch order: no seq, no range.
    assert (root.seq, root.seq_range, root.pinned_by, root.shown) == (None, None, "RAS counts", True)
    assert root.counts_by_type == {"AllGather": {r: int(r == 2) for r in range(8)},
                                   "AllReduce": {r: 15 - (r == 2) for r in range(8)}}
    assert "where none of rank 2's records reach" in ambiguity(root)
    # A rank merely behind may only lag: the records that agree keep the comm.
    evidence, ras = _mismatch_reply(tmp_path, [
        "  Communicator ranks have different AllReduce operation counts",
        "  7 ranks have launched up to operation 15",
        "  Rank 2 has launched up to operation 14 -- GPU 0 managed by process 738 on node 192.0.2.2"])
    assert ras_only_root(ras, ras_rank_map(covered, [evidence], ras), covered, stops={comm: ["RAS"]}) is None


_REPLY = ras_status_reply("""#0-0 (95a736d419965902) MISMATCH
  Communicator ranks have different {kind}operation counts
  3 ranks have launched up to operation 7
  Rank 0 has launched up to operation 8 -- GPU 0 managed by process 21400 on node 10.1.0.2
""", version="{version}")


def _replies(tmp_path, n: int, version: str = "2.28.9", kind: str = "AllReduce "):
    """`n` RAS STATUS text replies, each the same (ranks 1, 2 and 3 at 7 of `kind`, rank 0 at 8), and their
    history of the comm."""
    from ncclforensics.align.ras_only import ras_comm_wedge

    snapshots = []
    for q in range(n):
        path = tmp_path / f"ras_status_q{q}.txt"
        path.write_text(_REPLY.format(version=version, kind=kind))
        evidence = parse_file(InputFile(path, path.name))
        snapshots += [(evidence.format.value, s) for s in evidence.ras]
    history = ras_histories(snapshots)["0x95a736d419965902"]
    return history, lambda stops: ras_comm_wedge(history.comm, history, {}, stops, set())


def test_counts_of_the_types_that_differ_are_floors_and_bound_no_wedge(tmp_path):
    # Seed 1181020: NCCL 2.28.9's MISMATCH lines count only the all-reduces (rank 0 8, the others 7); each rank also
    # launched an all-gather those lines leave out, and the group stopped at seq 9. The counts are floors of what
    # each rank launched: the first collective not every rank launched is seq 8 or later, and the wedge is bounded
    # by nothing (it was (1, 8), which left the stall out), however settled the replies.
    from ncclforensics.align.wedge import LAUNCH_FLOORS, RAS_DIFFERING_TYPES

    history, wedge_of = _replies(tmp_path, 2)
    assert history.settled and history.differing_types_only
    wedge = wedge_of({})
    assert (wedge.seq, wedge.seq_range, wedge.bounded_by, wedge.floored_by) == (
        8, (1, None), LAUNCH_FLOORS, [RAS_DIFFERING_TYPES])
    assert (wedge.waiting_ranks, wedge.absent_ranks, wedge.launched_floors) == ([0], [1, 2, 3], [0, 1, 2, 3])
    assert not wedge.pinned


def test_counts_of_every_collective_are_floors_until_replies_show_them_settled(tmp_path):
    # One counter for every collective (2.25): two replies alike say the counts stopped, and the first collective
    # not every rank launched bounds the wedge from above; one reply read while a watchdog says the comm stopped may
    # predate the stop, so its counts are floors too.
    from ncclforensics.align.wedge import LAUNCH_FLOORS, LAUNCHES_ONLY, RAS_UNSETTLED

    settled, wedge_of = _replies(tmp_path, 2, "2.25.1", "collective ")
    assert settled.settled and not settled.differing_types_only
    wedge = wedge_of({})
    assert (wedge.seq, wedge.seq_range, wedge.bounded_by, wedge.launched_floors) == (8, (1, 8), LAUNCHES_ONLY, [])
    once = tmp_path / "once"
    once.mkdir()
    _, wedge_of = _replies(once, 1, "2.25.1", "collective ")
    wedge = wedge_of({"0x95a736d419965902": ["watchdog timeout (torch_rank1.log:40)"]})
    assert (wedge.seq_range, wedge.bounded_by, wedge.floored_by) == ((1, None), LAUNCH_FLOORS, [RAS_UNSETTLED])


def test_a_wedge_of_counts_that_are_all_floors_is_open_above():
    from ncclforensics.align.wedge import LAUNCH_FLOORS

    wedge = wedge_from_counts("0xab", {0: 50, 1: 49, 2: 50}, {}, set(), ["RAS"], [], floors={0, 1, 2})
    assert (wedge.seq, wedge.seq_range, wedge.bounded_by) == (50, (1, None), LAUNCH_FLOORS)
    some = wedge_from_counts("0xab", {0: 50, 1: 49, 2: 50}, {}, set(), ["RAS"], [], floors={1})
    assert some.seq_range == (1, 50)


def test_counts_read_before_they_settled_keep_no_order_between_ranks(tmp_path):
    # One reply read while a watchdog says the comm stopped: rank 0 at 8, the others at 7, each a floor taken at
    # its own moment (rank 0 at 8 and rank 1 at 7 may be 8 and 9 by now). Neither the wedge's words nor a rank's
    # nor the timeline may say who launched more (they said "Who launched more holds", rank 0 "launched more than
    # ranks 1, 2 and 3", and the others "never launched it").
    from ncclforensics.align.diagnosis import Diagnosis
    from ncclforensics.align.timeline import timeline
    from ncclforensics.report.wedge_words import launch_floors_words, never_launched

    _, wedge_of = _replies(tmp_path, 1, "2.25.1", "collective ")
    wedge = wedge_of({"0x95a736d419965902": ["watchdog timeout (torch_rank1.log:40)"]})
    said = launch_floors_words(wedge)
    assert "No order between the ranks is known" in said and "Who launched more" not in said
    for rank in range(4):
        words = never_launched(wedge, rank)
        assert "no order between the ranks is known" in words and "more" not in words and "fewer" not in words
    entry = [e for e in timeline(Diagnosis(Verdict.INCONCLUSIVE, [0, 1, 2, 3], {}, wedge=wedge), []) if "wedge in comm" in e.what]
    assert entry and "never launched" not in entry[0].what and "may predate the stop" in entry[0].what


def test_a_rank_ras_lists_missing_is_gone_with_its_count_unknown():
    # Two replies alike: ranks 0, 1 and 2 count only the all-reduces that differ (8, 7, 7), rank 3 is missing, with
    # no count. No rank launched more than rank 3: what it launched is unknown (the words said the others "launched
    # more than rank 3").
    from ncclforensics.align.ras import RasHistory
    from ncclforensics.align.ras_only import ras_comm_wedge
    from ncclforensics.align.timeline import timeline
    from ncclforensics.align.diagnosis import Diagnosis
    from ncclforensics.model import RasComm, RasCountGroup, RasRank, RasSnapshot
    from ncclforensics.report.wedge_words import launch_floors_words, never_launched

    history = RasHistory("0xab")
    for q in range(2):
        loc = Location(f"ras_status_q{q}.txt", 10)
        comm = RasComm(loc=loc, comm="0xab", size=4, errors=("MISMATCH",),
                       ranks=(RasRank(3, missing=True, unresponsive=True),),
                       count_groups=(RasCountGroup("AllReduce", 8, 1, (0,)), RasCountGroup("AllReduce", 7, 2, (1, 2))))
        history.states.append((RasSnapshot(loc=loc, comms=(comm,)), comm))
        history.families.setdefault("ras", []).append(comm)
    assert history.settled and history.differing_types_only and history.missing_ranks == [3]
    wedge = ras_comm_wedge("0xab", history, {}, {}, set())
    assert (wedge.kind, wedge.waiting_ranks, wedge.absent_ranks, wedge.seq_range) == (
        WedgeKind.RANK_GONE, [0, 1, 2], [3], (1, None))
    said = launch_floors_words(wedge)
    assert "Rank 3 is gone (RAS lists it missing) and what it launched is unknown" in said
    for rank in (0, 1, 2):
        words = never_launched(wedge, rank)
        assert "rank 3" not in words.split(";")[0] and "rank 3 is gone, count unknown" in words
    entry = [e for e in timeline(Diagnosis(Verdict.INCONCLUSIVE, [0, 1, 2, 3], {}, wedge=wedge), []) if "wedge in comm" in e.what]
    assert entry and "never launched" not in entry[0].what and "rank 3 gone (count unknown)" in entry[0].what
