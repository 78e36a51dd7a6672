"""The wedge against the truth's stalls, beside the root property (not part of it: a wedge that misses is counted,
not a violation).

Where the truth has a stall (comm -> the first seq some member launched that never completed on every rank) and the
answer's wedge names a comm of the incident:

- a miss: the wedge names a stalled comm and its seq_range leaves that comm's stall seq out (a range open above
  leaves out only what is below it);
- launched over: a rank's `launched` in the wedge is above what the truth says it launched in that comm (a count,
  or a floor of one, can only be short of it).

A comm named by its members (`[ranks=0,1,3]`, fingerprint traces alone) whose ranks' traces each went whole into
its stream, where those traces record collectives of more than one comm of the program, is numbered by trace
positions: a trace records its rank's collectives of every comm in issue order, and one that names no comm cannot
tell them apart. The truth is then read in those positions: the stall is where the stalled comm's collective at its
stall seq sits in each named rank's issue order, and a rank's `launched` is compared with every collective it
launched. Where the named ranks that launched that collective have it at different positions, or some ranks'
traces went whole into the stream and others' were split among comms, the numbering is no one comm's and no
trace's alike: the seq and `launched` are left unchecked (`compared` false), counted apart. Worked example
(1219789): ranks 0 and 1 trace the world all-reduce and their TP group's, and rank 3 the world one alone; the
world stalls at its seq 2, position 3 in the traces of ranks 0 and 1, position 2 in rank 3's. Where the answer
split the traces into comms (each named rank's records in several of its comms), its seqs are that comm's, and the
truth is read in the comm's seqs.

Ranks are compared only where the answer names the job's ranks (no stand-in ranks). Where nothing in the evidence
names global ranks (NCCL logs of a job without a comm over every rank, RAS replies alone: oracle.py
`names_global_ranks`), the wedge's ranks may be the comm's ranks, as the root's may: a rank's `launched` is over
only where it is over read either way (RAS replies of a pair {1, 3} give `Rank 0` and `Rank 1`, the pair's ranks,
and a wedge giving rank 1 two launches gives global rank 3's, not global rank 1's).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .evidence import Written
from .incident import Incident
from .oracle import names_global_ranks, resolve_comm
from .traces import PER_COLLECTIVE, read_back


@dataclass
class WedgeCheck:
    """One incident's wedge against its stalls."""

    comm: str | None  # the incident comm the wedge names (None: none it can be told to name)
    stall: int | None  # the true stall seq on that comm (None: that comm did not stall)
    seq_range: tuple[int, int | None]
    launched_over: dict[int, tuple[int, int]] = field(default_factory=dict)  # rank -> (reported, true)
    numbering: str = "comm"  # "comm": the comm's seqs; "trace": positions in the named ranks' traces
    compared: bool = True  # False: the answer's seqs are no numbering the truth can be read in (left unchecked)

    @property
    def miss(self) -> bool:
        """The wedge names a stalled comm and its range leaves the stall out."""
        if self.stall is None or not self.compared:
            return False
        low, high = self.seq_range
        return not (low <= self.stall and (high is None or self.stall <= high))


def check_wedge(incident: Incident, written: Written, answer: dict) -> WedgeCheck | None:
    """The wedge of `answer` (diff --json) against the truth of `incident` and the evidence `written` for it; None
    where the truth has no stall or the answer no wedge."""
    stalls = incident.truth.stalls
    wedge = answer.get("wedge")
    if not stalls or not wedge:
        return None
    comm = resolve_comm(incident, wedge["comm"])
    low, high = wedge["seq_range"]
    check = WedgeCheck(comm, stalls[comm][0] if comm in stalls else None, (low, high))
    if comm is None or answer.get("stand_in_ranks"):
        return check
    traced = _trace_numbering(incident, written, answer, comm)
    if traced is not None:
        check.numbering = "trace"
        if traced is False:
            check.compared = False
            return check
        check.stall, true = traced
        check.launched_over = {int(r): (n, true[int(r)]) for r, n in wedge.get("launched", {}).items()
                               if int(r) in true and n is not None and n > true[int(r)]}
        return check
    order = incident.program.comms[comm].ranks
    readings = [{r: r for r in order}]  # the answer's rank -> the job's rank it names
    if not names_global_ranks(incident, written):
        readings.append(dict(enumerate(order)))  # (the comm's ranks: comm rank i is the comm's i-th member)
    true = incident.truth.launched.get(comm, {})
    overs = [{int(r): (n, true[job[int(r)]]) for r, n in wedge.get("launched", {}).items()
              if int(r) in job and job[int(r)] in true and n is not None and n > true[job[int(r)]]}
             for job in readings]
    check.launched_over = min(overs, key=len)  # (the reading that puts fewest over; the job's ranks on a tie)
    return check


def _members(name: str) -> list[int] | None:
    """The ranks a `[ranks=0,1,3]` comm name lists (None for any other name)."""
    if not (name.startswith("[ranks=") and name.endswith("]")):
        return None
    return [int(r) for r in name[len("[ranks="):-1].split(",")]


def _trace_numbering(incident: Incident, written: Written, answer: dict, comm: str
                     ) -> tuple[int | None, dict[int, int]] | bool | None:
    """Where the wedge's comm is named by its members, each of whom is on record by a per-collective fingerprint
    trace alone, and their traces record collectives of more than one comm of the program: the truth in trace
    positions, (the stall's position, or None where `comm` did not stall; rank -> every collective it launched),
    where every named rank's trace went whole into the comm's stream and those that launched the stalled collective
    have it at one position; False where the numbering is no one trace position (positions that differ, or some
    traces split among comms and others not); None where the comm's own seqs are the numbering (other evidence,
    traces of one comm, or traces the answer split into comms)."""
    wedge = answer["wedge"]
    named = _members(str(wedge["comm"]))
    if named is None or written.fp_scheme not in PER_COLLECTIVE:
        return None
    if any(not written.has("fp", r) or written.has("nccl", r) or written.has("fr", r) for r in named):
        return None
    records = {r: read_back(incident, r)[:written.cut.get(("fp", r))] for r in named}
    if len({x.op.comm for done in records.values() for x in done}) < 2:
        return None
    streams = [c for c in answer.get("comms") or [] if c.get("comm") == wedge["comm"]]
    counts = (streams[0] if streams else wedge).get("launched") or {}
    # (a trace went whole into the stream where the answer lists the rank in no other comm and counts every record;
    # a trace of one comm's records reads alike either way)
    whole = {r: counts.get(str(r), 0) == len(done) and not any(
        r in c.get("ranks", ()) for c in answer.get("comms") or [] if c.get("comm") != wedge["comm"])
             for r, done in records.items() if len({x.op.comm for x in done}) > 1}
    if not any(whole.values()):
        return None
    if not all(whole.values()):
        return False
    launched = {r: len(incident.run.launches[r]) for r in named}
    if comm not in incident.truth.stalls:
        return None, launched
    seq = incident.truth.stalls[comm][0]
    at = {next((i + 1 for i, x in enumerate(incident.run.launches[r]) if x.op.comm == comm and x.seq == seq), None)
          for r in named} - {None}
    return (at.pop(), launched) if len(at) == 1 else False


def wedge_dict(check: WedgeCheck | None) -> dict | None:
    """What an Outcome keeps of the check (plain values: outcomes cross processes and go to JSON)."""
    if check is None:
        return None
    return {"comm": check.comm, "stall": check.stall, "seq_range": list(check.seq_range), "miss": check.miss,
            "launched_over": {str(r): list(v) for r, v in sorted(check.launched_over.items())},
            "numbering": check.numbering, "compared": check.compared}
