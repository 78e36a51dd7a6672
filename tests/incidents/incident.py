"""One simulated incident: the program, the fault, what NCCL made of it, and the ground truth.

    incident = draw(seed)
    written = incident.write(folder, {"nccl": [0, 1, 2, 3], "fr": [0, 1]}, random.Random(seed))

The truth is computed from what the ranks launched, never from the evidence:

- per comm with a divergence, the root: the 1-based seq of the first collective an outlier launched that is not
  what its reference program has there (an insertion: the first extra op; a skip: the seq of the skipped
  collective, which is the outlier's seq at that position; a reorder: the first swapped seq; a substitution: its
  seq), the outlier ranks whose divergence starts there, every rank that diverged on that comm, kind and step;
- the corrupt-and-continue window (seqs that completed while misaligned), the stalls (wedge seq and kind per
  comm), and per comm and rank the collectives launched and completed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from .faults import Fault, draw_fault
from .nccl_rules import COMPLETED, Launch, Run, simulate
from .program import Op, Program, draw_program

BASE_NS = 1795946081700291066  # 2026-11-29 09:54:41 UTC, the day of the real captures
SEGMENT_NS = 25_000_000
OP_NS = 200_000
TIMEOUT_MS = 20000


@dataclass(frozen=True)
class RootTruth:
    """The first divergent collective of one comm."""

    comm: str
    seq: int
    outliers: tuple[int, ...]  # ranks whose divergence starts at `seq`
    faulted: tuple[int, ...]  # every rank that diverged on this comm (later ones included)
    kind: str  # extra | missing | reorder | different
    step: int
    first: dict[int, int] = field(default_factory=dict)  # every rank that diverged -> the seq where it did


@dataclass
class Truth:
    """What really happened."""

    roots: dict[str, RootTruth]
    window: dict[str, list[int]]  # comm -> seqs that completed while misaligned
    stalls: dict[str, tuple[int, str]]  # comm -> (seq, kind) where it stopped
    launched: dict[str, dict[int, int]]  # comm -> rank -> collectives launched
    completed: dict[str, dict[int, int]]  # comm -> rank -> last seq completed in order

    def as_dict(self) -> dict:
        """A plain dict for messages and JSON."""
        return {
            "roots": {c: {"seq": r.seq, "outliers": list(r.outliers), "faulted": list(r.faulted), "kind": r.kind,
                          "step": r.step} for c, r in self.roots.items()},
            "window": {c: [s[0], s[-1], len(s)] for c, s in self.window.items() if s},
            "stalls": {c: list(v) for c, v in self.stalls.items()},
            "launched": {c: {str(r): n for r, n in v.items()} for c, v in self.launched.items()},
        }


@dataclass(frozen=True)
class RankIdentity:
    """Where a rank runs, as NCCL's log prefix and INIT lines show it."""

    host: str
    pid: int
    dev: int
    bus: str


@dataclass
class Incident:
    """A drawn incident; `write` puts its evidence into a folder."""

    seed: int
    program: Program
    fault: Fault
    run: Run
    truth: Truth
    identity: dict[int, RankIdentity]
    pointers: dict[tuple[int, str], int]  # (rank, comm) -> ncclComm_t address
    base_ns: int = BASE_NS
    notes: dict = field(default_factory=dict)

    def enqueue_ns(self, launch: Launch) -> int:
        """When the host enqueued a collective (FR time_created_ns)."""
        return self.base_ns + launch.segment * SEGMENT_NS + launch.index * OP_NS + launch.rank * 5_000

    def hang_ns(self) -> int:
        """When progress stopped (the last enqueue anywhere, plus a little)."""
        last = max((self.enqueue_ns(x) for ls in self.run.launches.values() for x in ls), default=self.base_ns)
        return last + 5_000_000

    def comm_id(self, comm: str) -> str:
        """How the answer names a comm when NCCL logs give its hash."""
        return self.program.comms[comm].comm_id

    def write(self, folder: Path, kinds: dict[str, list[int]], rng: random.Random):
        """Write the evidence `kinds` (kind -> ranks) into `folder`; returns what was written (evidence.Written)."""
        from .evidence import write_evidence

        return write_evidence(self, Path(folder), kinds, rng)

    def describe(self) -> str:
        """The incident in a few lines, for failure messages."""
        p = self.program
        comms = ", ".join(f"{c.name}={c.comm_id} ranks {list(c.ranks)}" for c in p.comms.values())
        forward = " ".join(f"{t.tag}:{t.kind}x{t.count}" for t in p.forward)
        drafter = " ".join(f"{t.tag}:{t.kind}x{t.count}" for t in p.drafter)
        lines = [
            f"world {p.world}, {p.steps} steps, comms {comms}",
            f"forward: {forward}; gate at {p.gate_at}; drafter: {drafter}",
            f"fault {self.fault.name}: " + "; ".join(f"rank {f.rank} {f.kind} on {f.comm}: {f.what}"
                                                     for f in self.fault.ranks),
            f"truth: {self.truth.as_dict()}",
        ]
        return "\n".join(lines)


def draw(seed: int) -> Incident:
    """The incident of `seed` (the same seed gives the same incident)."""
    rng = random.Random(seed)
    program = draw_program(rng)
    fault = draw_fault(rng, program)
    return incident_of(program, fault, seed, rng)


def incident_of(program: Program, fault: Fault, seed: int = 0, rng: random.Random | None = None) -> Incident:
    """Simulate a program whose plans are built (and changed by `fault`) and work out the truth."""
    rng = rng or random.Random(seed)
    run = simulate(program)
    truth = _truth(program, fault, run)
    return Incident(seed, program, fault, run, truth, _identities(rng, program.world), _pointers(rng, program))


def _identities(rng: random.Random, world: int) -> dict[int, RankIdentity]:
    """One host per rank (as the real captures: `vm`, one GPU each) or hosts of 8 GPUs."""
    if world <= 8 and rng.random() < 0.5:
        base = rng.randint(300, 900)
        return {r: RankIdentity("vm", base + r, 0, "60") for r in range(world)}
    buses = ["18000", "2a000", "3a000", "5d000", "9a000", "ab000", "ba000", "db000"]
    return {r: RankIdentity(f"node{r // 8:03d}", 21400 + (r % 8) * 7 + (r // 8) * 3, r % 8, buses[r % 8])
            for r in range(world)}


def _pointers(rng: random.Random, program: Program) -> dict[tuple[int, str], int]:
    """Heap addresses of every rank's ncclComm_t."""
    return {(r, c): rng.randrange(0x1000000, 0x4FFFFFF0) & ~0xF
            for c, comm in program.comms.items() for r in comm.ranks}


def _first_difference(mine: list[Op], reference: list[Op]) -> int | None:
    """First index where two comm streams of intents differ (the shorter one's end counts), None if equal."""
    for i, (a, b) in enumerate(zip(mine, reference)):
        if a.intent != b.intent:
            return i
    return None if len(mine) == len(reference) else min(len(mine), len(reference))


def _truth(program: Program, fault: Fault, run: Run) -> Truth:
    """Roots, window, stalls and counts from the launches (see the module docstring)."""
    reference = program.reference_plans()
    kinds = {(f.rank, f.comm): f for f in fault.ranks}
    passed = {r: _passed_divergence(program.plans[r], reference[r], len(run.launches[r]), run.segments_enqueued[r])
              for r in program.ranks}
    roots: dict[str, RootTruth] = {}
    for c, comm in program.comms.items():
        planned = {r: [op for step in program.plans[r] for seg in step for op in seg if op.comm == c]
                   for r in comm.ranks}
        if len({tuple(op.intent for op in ops) for ops in planned.values()}) == 1:
            continue  # every member did the same (all outliers alike): NCCL sees no disagreement here
        found: dict[int, tuple[int, int]] = {}  # rank -> (0-based index in the comm, step)
        for r in comm.ranks:
            meant = [op for step in reference[r] for seg in step for op in seg if op.comm == c]
            i = _first_difference(planned[r], meant)
            if i is not None and passed[r]:
                found[r] = (i, (planned[r][i] if i < len(planned[r]) else meant[i]).step)
        if not found:
            continue
        first = min(i for i, _ in found.values())
        outliers = tuple(sorted(r for r, (i, _) in found.items() if i == first))
        fault_of = kinds.get((outliers[0], c))
        kind = fault_of.kind if fault_of else "different"
        roots[c] = RootTruth(c, first + 1, outliers, tuple(sorted(found)), kind, found[outliers[0]][1],
                             {r: i + 1 for r, (i, _) in found.items()})
    window = {c: [p.seq for p in ps if p.outcome in ("shape_equal", "count_mismatch", "type_mismatch_completed")]
              for c, ps in run.pairings.items()}
    launched = {c: {r: len(run.comm_launches(r, c)) for r in comm.ranks} for c, comm in program.comms.items()}
    completed = {c: {r: _completed_prefix(run.comm_launches(r, c)) for r in comm.ranks}
                 for c, comm in program.comms.items()}
    return Truth(roots, window, dict(run.stalls), launched, completed)


def _passed_divergence(plan: list, reference: list, launched: int, enqueued: int) -> bool:
    """Whether a rank got as far as the first point where its plan departs from its reference (all comms, issue
    order): it launched the collective there; or, when its plan simply ends early, everything it had; or it left
    out the collectives there, within the read-back segments it enqueued (the reference has more in them than it
    launched: a skip at the end of a segment, the host then blocked in the read-back)."""
    mine = [op for step in plan for seg in step for op in seg]
    meant = [op for step in reference for seg in step for op in seg]
    j = _first_difference(mine, meant)
    if j is None:
        return False
    if j >= len(mine):
        return launched == len(mine)
    keys = [(s, k) for s, step in enumerate(plan) for k in range(len(step))][:enqueued]
    in_reference = sum(len(reference[s][k]) for s, k in keys if s < len(reference) and k < len(reference[s]))
    return launched > j or (launched == j and in_reference > j)


def _completed_prefix(launches: list[Launch]) -> int:
    """The last seq up to which every collective completed (ProcessGroupNCCL's last completed work)."""
    n = 0
    for launch in launches:
        if launch.state != COMPLETED:
            break
        n = launch.seq
    return n
