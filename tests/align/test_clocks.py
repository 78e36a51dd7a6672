"""Clocks that disagree, from event records: one rank's two sources, and one rank against the others."""

from ncclforensics.align.clocks import ACROSS_RANKS_S, SAME_PROCESS_S, clock_disagreements
from ncclforensics.align.diagnosis import diagnose
from ncclforensics.align.streams import build_streams
from ncclforensics.model import (
    CollectiveEvent,
    Evidence,
    GateDecision,
    Location,
    Severity,
    SourceFormat,
    collectives_to_frame,
)

T0 = 1_795_942_499.0
COMM = "0x1715b7bd1b8fda9e"


def collectives(rank, name, fmt, times, steps=None):
    """Evidence of one rank's AllReduces in COMM at `times` (seq 1, 2, ...); dump records or log lines."""
    events = []
    for i, t in enumerate(times):
        loc = Location(name, record=i) if fmt is SourceFormat.FLIGHT_RECORDER else Location(name, i + 1)
        events.append(CollectiveEvent(loc=loc, comm=COMM, seq=i + 1, op="AllReduce", rank=rank, count=4096,
                                      dtype="float32", time=t, step=steps[i] if steps else None))
    return Evidence(path=name, format=fmt, collectives=collectives_to_frame(events))


def dump(rank, times, **kw):
    return collectives(rank, f"fr_rank{rank}", SourceFormat.FLIGHT_RECORDER, times, **kw)


def log(rank, times, **kw):
    return collectives(rank, f"nccl.{rank}.log", SourceFormat.NCCL_LOG, times, **kw)


def check(evidence):
    return clock_disagreements(evidence, build_streams(evidence))


def times(n=20, offset=0.0):
    return [T0 + offset + 0.05 * i for i in range(n)]


def test_agreeing_clocks_say_nothing():
    evidence = [dump(r, times(offset=0.001 * r)) for r in range(4)] + [log(0, times(offset=0.9))]
    assert check(evidence) == []


def test_one_ranks_log_an_hour_off_its_dump_names_both_places_and_the_time_zone():
    evidence = [dump(r, times()) for r in range(4)] + [log(0, times(offset=3600.0))]
    problems = check(evidence)
    assert len(problems) == 1
    (p,) = problems
    assert p.severity is Severity.WARNING
    assert str(p.loc).startswith("fr_rank0#entries[") and "nccl.0.log:" in p.message
    assert "+3600.0 s" in p.message and "rank 0" in p.message and "local time" in p.message


def test_a_clock_minutes_off_is_reported_without_the_time_zone_hint():
    evidence = [dump(0, times()), log(0, times(offset=-2 * SAME_PROCESS_S - 7))]
    (p,) = check(evidence)
    assert "-127.0 s" in p.message and "local time" not in p.message


def test_one_rank_far_from_the_others_is_named_against_a_reference_rank():
    evidence = [dump(r, times()) for r in range(3)] + [dump(3, times(offset=2 * ACROSS_RANKS_S))]
    (p,) = check(evidence)
    assert p.loc.path == "fr_rank3" and "rank 3's clock is +600.0 s off" in p.message
    assert "against rank " in p.message and any(f"fr_rank{r}#entries[" in p.message for r in range(3))


def test_a_straggler_at_one_collective_is_no_clock_problem():
    late = times()
    late[7:] = [t + 1800 for t in late[7:8]] + late[8:]  # rank 3 came to seq 8 half an hour late, then caught up
    evidence = [dump(r, times()) for r in range(3)] + [dump(3, late)]
    assert check(evidence) == []


def test_two_ranks_that_disagree_give_one_warning_that_picks_no_culprit():
    problems = check([dump(0, times()), dump(1, times(offset=1000.0))])
    assert len(problems) == 1 and "no majority of them agrees" in problems[0].message


def test_a_gate_journal_far_from_its_steps_collectives():
    steps = [i // 4 for i in range(20)]  # four collectives per step
    gates = Evidence(path="gate_rank0.log", format=SourceFormat.GATE_JOURNAL, gates=[
        GateDecision(loc=Location("gate_rank0.log", s + 1), rank=0, step=s, decision="pass", time=T0 + 0.2 * s - 900)
        for s in range(5)])
    evidence = [dump(r, times(), steps=steps) for r in range(2)] + [gates]
    (p,) = check(evidence)
    assert p.loc.path == "gate_rank0.log" and p.loc.line is not None
    assert "gate decision (step" in p.message and "fr_rank0#entries[" in p.message and "+900.0 s" in p.message


def test_diagnose_reports_it_as_a_warning_beside_the_diagnosis():
    evidence = [dump(r, times()) for r in range(4)] + [log(0, times(offset=7200.0))]
    d = diagnose(evidence)
    clocks = [p for p in d.problems if p.message.startswith("clocks disagree")]
    assert len(clocks) == 1 and clocks[0].severity is Severity.WARNING
    assert d.root is None  # times change nothing in how collectives pair up


def test_the_file_by_file_check_agrees_with_the_check_of_every_stamp():
    from ncclforensics.align.clocks import _collective_stamps, _nobody_off, _one_file_each_and_nobody_off

    for offset in (0.0, ACROSS_RANKS_S - 1, ACROSS_RANKS_S + 1, 2 * ACROSS_RANKS_S):
        for n in (1, 2, 20):
            evidence = [dump(r, times(n)) for r in range(3)] + [dump(3, times(n, offset=offset))]
            streams = build_streams(evidence)
            expected = _nobody_off(_collective_stamps(evidence, streams))
            assert _one_file_each_and_nobody_off(evidence, streams) == expected, (offset, n)
            # the medians per key taken over a few seqs at a time (as a big job takes them, 2^20 stamps a pass)
            assert _one_file_each_and_nobody_off(evidence, streams, per_pass=5) == expected, (offset, n)
            assert expected == (offset <= ACROSS_RANKS_S)
    two_files = [dump(0, times()), log(0, times())]  # one rank, two files: left to the full computation
    assert not _one_file_each_and_nobody_off(two_files, build_streams(two_files))
