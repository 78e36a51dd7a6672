"""The wedge against the truth's stalls, beside the root property (not part of it: a wedge that misses is counted,
not a violation).

Where the truth has a stall (comm -> the first seq some member launched that never completed on every rank) and the
answer's wedge names a comm of the incident:

- a miss: the wedge names a stalled comm and its seq_range leaves that comm's stall seq out (a range open above
  leaves out only what is below it);
- launched over: a rank's `launched` in the wedge is above what the truth says it launched in that comm (a count,
  or a floor of one, can only be short of it).

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


@dataclass
class WedgeCheck:
    """One incident's wedge against its stalls."""

    comm: str | None  # the incident comm the wedge names (None: none it can be told to name)
    stall: int | None  # the true stall seq on that comm (None: that comm did not stall)
    seq_range: tuple[int, int | None]
    launched_over: dict[int, tuple[int, int]] = field(default_factory=dict)  # rank -> (reported, true)

    @property
    def miss(self) -> bool:
        """The wedge names a stalled comm and its range leaves the stall out."""
        if self.stall is None:
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


def wedge_dict(check: WedgeCheck | None) -> dict | None:
    """What an Outcome keeps of the check (plain values: outcomes cross processes and go to JSON)."""
    if check is None:
        return None
    return {"comm": check.comm, "stall": check.stall, "seq_range": list(check.seq_range), "miss": check.miss,
            "launched_over": {str(r): list(v) for r, v in sorted(check.launched_over.items())}}
