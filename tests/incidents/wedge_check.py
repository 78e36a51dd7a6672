"""The wedge against the truth's stalls, beside the root property (not part of it: a wedge that misses is counted,
not a violation).

Where the truth has a stall (comm -> the first seq some member launched that never completed on every rank) and the
answer's wedge names a comm of the incident:

- a miss: the wedge names a stalled comm and its seq_range leaves that comm's stall seq out (a range open above
  leaves out only what is below it);
- launched over: a rank's `launched` in the wedge is above what the truth says it launched in that comm (a count,
  or a floor of one, can only be short of it).

Ranks are compared only where the answer names the job's ranks (no stand-in ranks).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .incident import Incident
from .oracle import resolve_comm


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


def check_wedge(incident: Incident, answer: dict) -> WedgeCheck | None:
    """The wedge of `answer` (diff --json) against the truth of `incident`; None where the truth has no stall or
    the answer no wedge."""
    stalls = incident.truth.stalls
    wedge = answer.get("wedge")
    if not stalls or not wedge:
        return None
    comm = resolve_comm(incident, wedge["comm"])
    low, high = wedge["seq_range"]
    check = WedgeCheck(comm, stalls[comm][0] if comm in stalls else None, (low, high))
    if comm is None or answer.get("stand_in_ranks"):
        return check
    members = set(incident.program.comms[comm].ranks)
    true = incident.truth.launched.get(comm, {})
    check.launched_over = {int(r): (n, true[int(r)]) for r, n in wedge.get("launched", {}).items()
                           if int(r) in members and int(r) in true and n is not None and n > true[int(r)]}
    return check


def wedge_dict(check: WedgeCheck | None) -> dict | None:
    """What an Outcome keeps of the check (plain values: outcomes cross processes and go to JSON)."""
    if check is None:
        return None
    return {"comm": check.comm, "stall": check.stall, "seq_range": list(check.seq_range), "miss": check.miss,
            "launched_over": {str(r): list(v) for r, v in sorted(check.launched_over.items())}}
