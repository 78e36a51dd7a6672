"""How the ranks' collectives pair and what completes: NCCL 2.28.9 as measured on an H200.

The rules (all of NCCL's behaviour the simulator assumes is in this module):

1. Pairing is by issue order per communicator: the k-th collective of each rank in a comm pairs with the k-th of
   every other member, whatever they are (tests/fixtures/real: extra-op-4rank, long-window).
2. All-reduces of different counts pair and complete (extra-op-4rank: 4096 with 8192 floats, silent corruption).
3. An all-gather and an all-reduce of the same total bytes (the gather's output) pair and complete; the
   all-reduce side only finishes when the all-gather side's next collective in that comm comes (an opposite
   pairing later balances them); at the very end the all-gather side completes and the all-reduce side stays
   `started`.
4. Different collective types of different total bytes hang: both sides `started` (type-mismatch: an AllGather
   of 1024 floats in, 4096 out, against AllReduces of 1024).
5. A collective without a partner hangs, `started` on the ranks that launched it (long-window seq 91).
6. A rank's collectives run in issue order on its GPU, across comms (every collective is synchronous: the
   compute stream waits for it), so one stuck collective holds back everything the rank enqueued after it,
   which stays `scheduled` (subcomm-divergence: the TP collectives behind world seq 6).
7. The host enqueues a read-back segment's collectives without waiting, then blocks in the read-back until all of
   them completed (after a hang it keeps enqueueing until that sync point). Ranks that finish are idle.

One case is not measured and is assumed: all-gathers of different counts are treated like rule 4 (they hang).
The simulator draws it only where an outlier's substituted all-gather meets the others' step-end one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .program import Op, Program

SCHEDULED, STARTED, COMPLETED = "scheduled", "started", "completed"


@dataclass
class Launch:
    """One collective a rank enqueued, and what became of it."""

    op: Op
    rank: int
    index: int  # position in the rank's issue order (all comms)
    seq: int  # 1-based launch ordinal in its comm
    step: int
    segment: int  # index of its read-back segment in the rank's whole run
    state: str = SCHEDULED
    partners: dict[int, Op] = field(default_factory=dict)  # rank -> the op it paired with (itself included)

    @property
    def aligned(self) -> bool:
        """Whether every member issued the same program collective at this seq."""
        return len({op.intent for op in self.partners.values()}) <= 1


@dataclass
class Pairing:
    """What NCCL made of the k-th collectives of a comm's members."""

    comm: str
    seq: int
    outcome: str  # "aligned" | "shape_equal" | "count_mismatch" | "type_mismatch_completed" | "hang"
    completed: bool  # every side completed


@dataclass
class Run:
    """The outcome: every rank's launches (issue order), the resolved pairings per comm, where comms stopped."""

    launches: dict[int, list[Launch]]
    pairings: dict[str, list[Pairing]]
    stalls: dict[str, tuple[int, str]]  # comm -> (seq, kind) of its first collective that never completed
    segments_done: dict[int, int]  # rank -> read-back segments the host got through
    segments_enqueued: dict[int, int]  # rank -> read-back segments whose collectives the host enqueued
    finished: dict[int, bool]

    def comm_launches(self, rank: int, comm: str) -> list[Launch]:
        """`rank`'s launches in `comm`, by seq."""
        return [launch for launch in self.launches[rank] if launch.op.comm == comm]

    @property
    def hung(self) -> bool:
        """Whether any collective never completed."""
        return any(launch.state != COMPLETED for ls in self.launches.values() for launch in ls)


def _outcome(ops: dict[int, Op], size: int) -> str:
    """Rules 2-4 for one pairing of the members' ops."""
    if len({op.intent for op in ops.values()}) == 1:
        return "aligned"
    kinds = {op.kind for op in ops.values()}
    if len(kinds) == 1:
        if "all_gather" in kinds and len({op.count for op in ops.values()}) > 1:
            return "hang"  # not measured (see the module docstring)
        if len({(op.count, op.dtype) for op in ops.values()}) == 1:
            return "shape_equal"
        return "count_mismatch"
    if len({op.total_bytes(size) for op in ops.values()}) == 1:
        return "type_mismatch_completed"
    return "hang"


def simulate(program: Program) -> Run:
    """Run every rank's plan under the rules above until nothing moves."""
    ranks = program.ranks
    segments = {r: [(s, ops) for s, step in enumerate(program.plans[r]) for ops in step] for r in ranks}
    launches: dict[int, list[Launch]] = {r: [] for r in ranks}
    by_comm: dict[str, dict[int, list[Launch]]] = {c: {r: [] for r in comm.ranks} for c, comm in program.comms.items()}
    next_segment = {r: 0 for r in ranks}
    waiting: dict[int, list[Launch]] = {r: [] for r in ranks}
    head = {r: 0 for r in ranks}  # index of the first launch not completed
    position = {c: 0 for c in program.comms}  # next seq (0-based) to pair
    stuck: dict[str, str] = {}  # comm -> why its next pairing can never resolve
    awaiting: dict[str, tuple[int, list[int], list[int]]] = {}  # comm -> (k, all-reduce side, all-gather side)
    pairings: dict[str, list[Pairing]] = {c: [] for c in program.comms}

    def host(r: int) -> bool:
        if next_segment[r] >= len(segments[r]) or any(x.state != COMPLETED for x in waiting[r]):
            return False
        step, ops = segments[r][next_segment[r]]
        waiting[r] = []
        for op in ops:
            mine = by_comm[op.comm][r]
            launch = Launch(op, r, len(launches[r]), len(mine) + 1, step, next_segment[r])
            launches[r].append(launch)
            mine.append(launch)
            waiting[r].append(launch)
        next_segment[r] += 1
        return True

    def gpu(r: int) -> bool:
        ls = launches[r]
        while head[r] < len(ls) and ls[head[r]].state == COMPLETED:
            head[r] += 1
        if head[r] < len(ls) and ls[head[r]].state == SCHEDULED:
            ls[head[r]].state = STARTED
            return True
        return False

    def pair(c: str) -> bool:
        members = program.comms[c].ranks
        if c in awaiting:
            k, reduce_side, gather_side = awaiting[c]
            if all(len(by_comm[c][m]) > k + 1 and by_comm[c][m][k + 1].state == STARTED for m in gather_side):
                for m in reduce_side:
                    by_comm[c][m][k].state = COMPLETED
                del awaiting[c]
                return True
            return False
        if c in stuck:
            return False
        k = position[c]
        if not all(len(by_comm[c][m]) > k and by_comm[c][m][k].state == STARTED for m in members):
            return False
        here = {m: by_comm[c][m][k] for m in members}
        ops = {m: launch.op for m, launch in here.items()}
        for launch in here.values():
            launch.partners = ops
        outcome = _outcome(ops, len(members))
        position[c] = k + 1
        if outcome == "hang":
            stuck[c] = "type_mismatch"
            pairings[c].append(Pairing(c, k + 1, outcome, False))
            return True
        if outcome == "type_mismatch_completed":
            reduce_side = [m for m in members if ops[m].kind == "all_reduce"]
            gather_side = [m for m in members if ops[m].kind == "all_gather"]
            for m in gather_side:
                here[m].state = COMPLETED
            awaiting[c] = (k, reduce_side, gather_side)
            pairings[c].append(Pairing(c, k + 1, outcome, False))
            return True
        for launch in here.values():
            launch.state = COMPLETED
        pairings[c].append(Pairing(c, k + 1, outcome, True))
        return True

    moved = True
    while moved:
        moved = False
        for r in ranks:
            while host(r) | gpu(r):
                moved = True
        for c in program.comms:
            while pair(c):
                moved = True
    for c, pending in awaiting.items():  # rule 3's very end: the gather side finished, the reduce side waits
        k, _, _ = pending
        for p in pairings[c]:
            if p.seq == k + 1:
                p.completed = False
    for c, ps in pairings.items():
        for p in ps:
            if p.outcome == "type_mismatch_completed" and c not in awaiting:
                p.completed = True
    finished = {r: next_segment[r] == len(segments[r]) and all(x.state == COMPLETED for x in launches[r])
                for r in ranks}
    done = {r: next_segment[r] - (1 if any(x.state != COMPLETED for x in waiting[r]) else 0) for r in ranks}
    return Run(launches, pairings, _stalls(program, by_comm, stuck), done, dict(next_segment), finished)


def _stalls(program: Program, by_comm: dict[str, dict[int, list[Launch]]], stuck: dict[str, str]
            ) -> dict[str, tuple[int, str]]:
    """Per comm, the first seq that some member launched and that never completed everywhere, and why."""
    stalls = {}
    for c, per_rank in by_comm.items():
        longest = max(len(ls) for ls in per_rank.values())
        for k in range(longest):
            here = {m: ls[k] for m, ls in per_rank.items() if len(ls) > k}
            if all(launch.state == COMPLETED for launch in here.values()) and len(here) == len(per_rank):
                continue
            if not any(launch.state == STARTED for launch in here.values()):
                break  # nothing of it ever ran: it only waits behind another comm's stall
            if stuck.get(c) and all(launch.state == STARTED for launch in here.values()) and len(here) == len(per_rank):
                kind = stuck[c]
            elif any(launch.state == SCHEDULED for launch in here.values()):
                kind = "cross_comm_deadlock"
            else:
                kind = "no_partner"
            stalls[c] = (k + 1, kind)
            break
    return stalls
