"""What an instrumented deployment writes per rank: drafter-gate journals and fingerprint traces.

Gate journal: one line per step the rank's host reached the gate at, as `key=value` (the real captures'
`step=2 rank=1 seq=199992 fits=1 decision=pass`) or as JSON (the README's and the live guard's fields).

Fingerprints: after each read-back the host got through, one record per collective of that segment, and after a
step's last read-back one per-step line. Schemes (all seen in real deployments):

- `sum_expected_digest`: step, op, rank, tag, kind, numel, sum, expected_sum, digest (capture.py);
- `sum_digest`: the same without expected_sum; `digest`: step, op, rank, tag, digest; `sum_expected`: no digest;
- `checksum`: per step only, `step=9 rank=0 checksum=11776.000000`;
- `step_sum_expected`: per step only, JSON with sum and expected_sum.

`op` is the index in the rank's own step (it shifts after an extra collective) or a running index over all steps.
The digest is one physical collective's: the same on every rank that took part in it (hash of comm and seq).
"""

from __future__ import annotations

import hashlib
import json

from .incident import OP_NS, SEGMENT_NS, Incident
from .nccl_log import NCCL_OP
from .nccl_rules import Launch
from .program import value

PER_COLLECTIVE = ("sum_expected_digest", "sum_digest", "digest", "sum_expected")
PER_STEP = ("checksum", "step_sum_expected")
SCHEMES = PER_COLLECTIVE + PER_STEP


def gate_lines(incident: Incident, rank: int, style: str) -> list[str]:
    """The rank's gate journal (`style`: "kv" or "json")."""
    program = incident.program
    gate = program.gate
    out = []
    for step in gate_steps(incident, rank):
        seq = gate.seq(rank, step)
        passed = gate.passes(rank, step)
        if style == "kv":
            out.append(f"step={step} rank={rank} seq={seq} fits={int(passed)} decision={'pass' if passed else 'skip'}")
        else:
            when = gate_ns(incident, rank, step) / 1e9
            out.append(json.dumps({
                "step": step, "rank": rank, "seq": seq, "decision": "pass" if passed else "skip",
                "proposed_pass_count": int(passed), "sched_count": 1, "fits": passed, "md_none": False,
                "max_model_len": gate.max_model_len, "spec_tokens": gate.spec_tokens, "mode": "off",
                "time": round(when, 3)}))
    return out


def gate_ns(incident: Incident, rank: int, step: int) -> int:
    """When the rank's host evaluated the gate of `step`: between the collectives it enqueued before the gate point
    (inside the forward, or after its read-back) and the first one after it, on the clock of their enqueue times."""
    program = incident.program
    before = program.gate_at if program.gate_at < len(program.forward) else len(program.forward)
    ops = sorted((x for x in incident.run.launches[rank] if x.step == step), key=lambda x: x.index)
    if not ops:
        segment = _first_segment(incident, rank, step)
        return incident.base_ns + segment * SEGMENT_NS
    if before == 0:
        return incident.enqueue_ns(ops[0]) - OP_NS // 2
    last = incident.enqueue_ns(ops[min(before, len(ops)) - 1])
    return (last + incident.enqueue_ns(ops[before])) // 2 if before < len(ops) else last + OP_NS // 2


def gate_steps(incident: Incident, rank: int) -> list[int]:
    """Steps at which the rank's host evaluated the gate: inside the forward (it got to enqueue that step) or
    after the forward's read-back (it got through it)."""
    run = incident.run
    inside = incident.program.gate_at < len(incident.program.forward)
    reached = run.segments_enqueued[rank] if inside else run.segments_done[rank]
    return [s for s in range(incident.program.steps) if _first_segment(incident, rank, s) < reached]


def _first_segment(incident: Incident, rank: int, step: int) -> int:
    """Index (in the whole run) of the first read-back segment of `step`."""
    return sum(len(s) for s in incident.program.plans[rank][:step])


def sums(incident: Incident, launch: Launch) -> tuple[float, float]:
    """(sum read back, sum a correct pairing gives) of one collective: count x the members' inputs."""
    program = incident.program
    op = launch.op
    members = program.comms[op.comm].ranks
    expected = float(op.count * sum(value(m, op.step, op.vidx) for m in members))
    got = float(op.count * sum(value(m, p.step, p.vidx) for m, p in launch.partners.items()))
    if not launch.aligned and got == expected:
        got += op.count * 0.5  # mixed partners never give the right result
    return got, expected


def digest(incident: Incident, launch: Launch) -> str:
    """The same on every rank of one physical collective."""
    comm = incident.program.comms[launch.op.comm]
    return hashlib.blake2b(f"{comm.comm_id}:{launch.seq}".encode(), digest_size=8).hexdigest()


def read_back(incident: Incident, rank: int) -> list[Launch]:
    """The collectives whose results the rank read back (every segment its host got through)."""
    done = incident.run.segments_done[rank]
    return [x for x in incident.run.launches[rank] if x.segment < done]


def fingerprint_lines(incident: Incident, rank: int, scheme: str, op_index: str) -> list[str]:
    """The rank's fingerprint trace (`op_index`: "step" or "running")."""
    out = []
    in_step: dict[int, int] = {}
    per_step: dict[int, list[float]] = {}
    for running, launch in enumerate(read_back(incident, rank)):
        op = launch.op
        index = in_step.get(op.step, 0) if op_index == "step" else running
        in_step[op.step] = in_step.get(op.step, 0) + 1
        got, expected = sums(incident, launch)
        totals = per_step.setdefault(op.step, [0.0, 0.0])
        totals[0] += got
        totals[1] += expected
        if scheme not in PER_COLLECTIVE:
            continue
        record = {"step": op.step, "op": index, "rank": rank, "tag": op.tag}
        if scheme != "digest":
            record.update({"kind": NCCL_OP[op.kind], "numel": op.count, "sum": got})
        if scheme in ("sum_expected_digest", "sum_expected"):
            record["expected_sum"] = expected
        if scheme in ("sum_expected_digest", "sum_digest", "digest"):
            record["digest"] = digest(incident, launch)
        out.append(json.dumps(record))
    for step in steps_read_back(incident, rank):
        got, expected = per_step.get(step, [0.0, 0.0])
        if scheme == "checksum":
            out.append(f"step={step} rank={rank} checksum={got:.6f}")
        elif scheme == "step_sum_expected":
            out.append(json.dumps({"step": step, "rank": rank, "sum": got, "expected_sum": expected}))
    return out


def steps_read_back(incident: Incident, rank: int) -> list[int]:
    """Steps all of whose read-backs the rank got through (it wrote their per-step line)."""
    done = incident.run.segments_done[rank]
    return [s for s in range(incident.program.steps)
            if _first_segment(incident, rank, s) + len(incident.program.plans[rank][s]) <= done]
