"""Faults: what makes the ranks issue different collectives, drawn at random and applied to the rank plans.

Fault names (one per incident):

- `healthy`: nothing goes wrong (the drafter may run, on every rank alike);
- `drafter_extra`: the outlier's scheduler view lags one token behind, so its gate passes one step longer near the
  ceiling and it alone runs a drafter pass (1..3 collectives) at that step;
- `drafter_missing`: the outlier's view is one token ahead: it skips the drafter pass the others run;
- `type_boundary`: a drafter_extra whose first collective has another type than the collective the others issue
  there, and another size: NCCL cannot pair them, the job hangs at once;
- `skip`: one rank leaves out one collective of its forward (its shard had nothing to reduce);
- `reorder`: one or two ranks issue two adjacent collectives of one comm in the other order (can heal);
- `different`: one rank issues an all-gather where the others issue an all-reduce (or the other way round);
- `world_extra`: with TP groups inside a world group (or beside DP groups), one rank issues one more
  world-group (DP-group) collective;
- `multi`: two or three outliers, each with a fault of its own, or all with the same one.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace

from .program import Op, OpTemplate, Program, drafter_site, mark_extra, world_site

KINDS = ("healthy", "drafter_extra", "drafter_missing", "type_boundary", "skip", "reorder", "different",
         "world_extra", "multi")
WEIGHTS = (10, 16, 8, 6, 12, 10, 8, 5, 10)


@dataclass(frozen=True)
class RankFault:
    """What one outlier rank does differently."""

    rank: int
    kind: str  # extra | missing | reorder | different (the kind of the first divergent collective)
    comm: str
    step: int
    what: str  # in words, for failure messages


@dataclass
class Fault:
    """The fault of an incident (empty `ranks` for a healthy one)."""

    name: str
    ranks: list[RankFault] = field(default_factory=list)

    @property
    def outliers(self) -> list[int]:
        """Every rank with a fault."""
        return sorted({f.rank for f in self.ranks})


def draw_fault(rng: random.Random, program: Program) -> Fault:
    """Draw a fault, apply it to `program` (its gate and plans) and return it; plans are built here."""
    name = rng.choices(KINDS, weights=WEIGHTS)[0]
    if name == "world_extra" and not program.two_level:
        name = "skip"
    if name == "multi" and program.world < 4:
        name = "drafter_extra"
    if name in ("drafter_extra", "drafter_missing", "type_boundary"):
        count = 1 if program.world == 2 or rng.random() < 0.8 else 2
        outliers = rng.sample(program.ranks, count)
        return _gate_fault(rng, program, name, outliers)
    program.build_plans()
    if name == "healthy":
        return Fault(name)
    if name == "multi":
        return _multi(rng, program)
    if name == "reorder":
        count = 2 if program.world >= 4 and rng.random() < 0.5 else 1
        outliers = rng.sample(program.ranks, count)
        step = rng.randrange(program.steps)
        faults = _reorder(rng, program, outliers, step)
        return Fault(name, faults) if faults else Fault("healthy")
    rank = rng.choice(program.ranks)
    fault = _plan_fault(rng, program, name, rank)
    return Fault(name, [fault]) if fault else Fault("healthy")


def _gate_fault(rng: random.Random, program: Program, name: str, outliers: list[int]) -> Fault:
    """Gate disagreement near the ceiling: the outliers' views lag (extra pass) or lead (missing pass)."""
    gate = program.gate
    step = rng.randrange(program.steps)
    if name == "drafter_missing":
        # everyone without lag passes up to `step`; the outliers (one token ahead) stop one step earlier
        lag = -1
        seq_base = gate.max_model_len - gate.spec_tokens - step
    else:
        # everyone without lag passes up to step - 1; the outliers (one token behind) pass at `step` too
        lag = 1
        seq_base = gate.max_model_len - gate.spec_tokens - (step - 1)
    program.gate = replace(gate, seq_base=seq_base, lag={r: lag for r in outliers})
    if name == "type_boundary":
        _drafter_across_type(rng, program, step)
    program.build_plans()
    kind = "missing" if name == "drafter_missing" else "extra"
    comm = {r: program.tp_of[r] for r in outliers}
    what = "its gate passed alone" if kind == "extra" else "its gate skipped alone"
    return Fault(name, [RankFault(r, kind, comm[r], step, f"{what} at step {step}") for r in outliers])


def _drafter_across_type(rng: random.Random, program: Program, step: int) -> None:
    """Make the drafter's first collective differ in type and size from what the others issue in its place."""
    partner = _partner_template(program, step)
    first = program.drafter[0]
    tp_size = program.size(program.tp_of[0])
    if partner is None or partner.kind == "all_reduce":
        count = (partner.count if partner else first.count) + rng.choice([1, 3, 24])
        new = OpTemplate("tp", "all_gather", count, first.dtype, "mtp.lm_head", 59, drafter_site("all_gather", 0))
        if partner is not None and new.count * tp_size == partner.count:
            new = replace(new, count=new.count + 1)
    else:
        count = partner.count * tp_size * 2 + rng.choice([0, 8])
        new = OpTemplate("tp", "all_reduce", count, first.dtype, "mtp.layers.0", 50, drafter_site("all_reduce", 0))
    program.drafter = [new] + program.drafter[1:]


def _partner_template(program: Program, step: int) -> OpTemplate | None:
    """The TP collective the reference ranks issue where the drafter would go at `step` (None: nothing follows)."""
    later = [t for t in program.forward[program.gate_at:] if t.where == "tp"]
    if later:
        return later[0]
    if step + 1 < program.steps:
        return next(t for t in program.forward if t.where == "tp")
    return None


def _forward_ops(program: Program, rank: int, step: int) -> list[Op]:
    """The collectives of the forward segment of `step` (the first segment), without drafter ones."""
    return [op for op in program.plans[rank][step][0] if not op.tag.startswith("mtp.")]


def _plan_fault(rng: random.Random, program: Program, name: str, rank: int) -> RankFault | None:
    """Apply a one-rank change to `rank`'s plan (skip, different, world_extra); None if the program has no place."""
    step = rng.randrange(program.steps)
    segment = program.plans[rank][step][0]
    if name == "skip":
        candidates = _forward_ops(program, rank, step)
        op = rng.choice(candidates)
        segment.remove(op)
        return RankFault(rank, "missing", op.comm, step, f"skipped {op.tag} at step {step}")
    if name == "different":
        candidates = [op for op in _forward_ops(program, rank, step) if op.comm == program.tp_of[rank]]
        op = rng.choice(candidates)
        size = program.size(op.comm)
        if op.kind == "all_reduce":
            same_bytes = op.count % size == 0 and rng.random() < 0.5
            new = replace(op, kind="all_gather", count=op.count // size if same_bytes else op.count)
        else:
            new = replace(op, kind="all_reduce", count=op.count * size if rng.random() < 0.5 else op.count)
        new = mark_extra(new)
        segment[segment.index(op)] = new
        what = f"issued {new.kind} x{new.count} for {op.tag} at step {step}"
        return RankFault(rank, "different", op.comm, step, what)
    if name == "world_extra":
        world_ops = [op for op in segment if op.comm == program.outer_of[rank] != program.tp_of[rank]]
        if not world_ops:
            return None
        base = rng.choice(world_ops)
        extra = mark_extra(replace(base, tag="dp.num_tokens.retry", vidx=70, site=world_site(3)))
        at = rng.randint(0, len(segment))
        segment.insert(at, extra)
        return RankFault(rank, "extra", base.comm, step, f"one more world collective at step {step}")
    raise ValueError(name)


def _reorder(rng: random.Random, program: Program, outliers: list[int], step: int) -> list[RankFault]:
    """The outliers swap two adjacent collectives of one comm in `step`'s forward (the same pair on each)."""
    segment = program.plans[outliers[0]][step][0]
    pairs = [i for i in range(len(segment) - 1)
             if segment[i].comm == segment[i + 1].comm and segment[i].intent != segment[i + 1].intent]
    if not pairs:
        return []
    i = rng.choice(pairs)
    faults = []
    for rank in outliers:
        ops = program.plans[rank][step][0]
        ops[i], ops[i + 1] = ops[i + 1], ops[i]
        faults.append(RankFault(rank, "reorder", ops[i].comm, step,
                                f"issued {ops[i].tag} before {ops[i + 1].tag} at step {step}"))
    return faults


def _multi(rng: random.Random, program: Program) -> Fault:
    """Two or three outliers: the same skip on each, or each with a one-rank fault of its own."""
    count = rng.choice([2, 2, 3]) if program.world >= 8 else 2
    outliers = rng.sample(program.ranks, count)
    faults: list[RankFault] = []
    if rng.random() < 0.4:
        step = rng.randrange(program.steps)
        index = rng.randrange(len(_forward_ops(program, outliers[0], step)))
        for rank in outliers:
            op = _forward_ops(program, rank, step)[index]
            program.plans[rank][step][0].remove(op)
            faults.append(RankFault(rank, "missing", op.comm, step, f"skipped {op.tag} at step {step}"))
        return Fault("multi", faults)
    for rank in outliers:
        name = rng.choice(["skip", "skip", "different", "reorder"] + (["world_extra"] if program.two_level else []))
        if name == "reorder":
            faults += _reorder(rng, program, [rank], rng.randrange(program.steps))
        else:
            fault = _plan_fault(rng, program, name, rank)
            faults += [fault] if fault else []
    return Fault("multi", faults) if faults else Fault("healthy")
