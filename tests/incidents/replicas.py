"""The real captures' jobs, rebuilt as simulated programs: the NCCL rules must give what really happened there
(tests/fixtures/real/README.md, "Scenarios and what really happened").

Each function returns an Incident whose program is the capture's: capture.py's jobs (the default group is the
world comm, faults placed by hand) and serving.py's (a TP group `1`, DP groups, the drafter gate with a lag).
"""

from __future__ import annotations

from dataclasses import replace

from .faults import Fault, RankFault
from .incident import Incident, incident_of
from .program import Comm, Gate, OpTemplate, Program, drafter_site, layer_site, lm_head_site, mark_extra, world_site

_NEVER = Gate(max_model_len=1000, spec_tokens=1, seq_base=5000)  # the gate never passes: faults are placed by hand


def _plain(world: int, tp: list[tuple[int, ...]] | None = None):
    """capture.py's communicators: the default group, TP groups made with new_group inside it."""
    comms = {"0": Comm("0", tuple(range(world)), 0x1715B7BD1B8FDA9E, 0, "default_pg")}
    tp_of = {r: "0" for r in range(world)}
    for g, members in enumerate(tp or []):
        name = str(g + 1)
        comms[name] = Comm(name, members, 0x74D3A424ABB07664 + g, 1, "undefined")
        tp_of.update({r: name for r in members})
    return comms, tp_of, {r: "0" for r in range(world)}, "0"


def _serving(world: int, tp: int):
    """serving.py's: TP groups `1`.. (desc tp), and with tp < world DP groups {i, i + tp, ...} (desc dp)."""
    comms, tp_of, outer_of = {}, {}, {}
    for g in range(world // tp):
        name = str(g + 1)
        comms[name] = Comm(name, tuple(range(g * tp, (g + 1) * tp)), 0x2F610D321B4A85CD + g, 1, "tp")
        tp_of.update({r: name for r in comms[name].ranks})
    for i in range(tp if tp < world else 0):
        name = str(len(comms) + 1)
        comms[name] = Comm(name, tuple(range(i, world, tp)), 0x772983640D2431F5 + i, 2, "dp")
        outer_of.update({r: name for r in comms[name].ranks})
    return comms, tp_of, outer_of or dict(tp_of), None


def _reduce(tag: str, vidx: int, count: int = 1024, where: str = "tp", site: str = "mlp") -> OpTemplate:
    frames = world_site(0) if where == "world" else layer_site(site)
    return OpTemplate(where, "all_reduce", count, "int32" if where == "world" else "float32", tag, vidx, frames)


def _program(world: int, steps: int, forward: list[OpTemplate], groups, drafter=(), gate=_NEVER) -> Program:
    comms, tp_of, outer_of, default = groups
    program = Program(world, comms, steps, "float32", list(forward), list(drafter), gate, len(forward), tp_of,
                      outer_of, default)
    program.build_plans()
    return program


def _insert(program: Program, rank: int, step: int, at: int, template: OpTemplate) -> None:
    """Put one extra collective into `rank`'s forward of `step`, before its op `at`."""
    op = mark_extra(template.at(step, program.comm_of(template, rank)))
    program.plans[rank][step][0].insert(at, op)


def long_window() -> Incident:
    """30 steps of 3 AllReduce of 1024 floats; at step 2 rank 1 alone runs an extra one right after layer0."""
    program = _program(4, 30, [_reduce(f"layer{i}", i) for i in range(3)], _plain(4))
    draft = OpTemplate("tp", "all_reduce", 1024, "float32", "draft", 5, drafter_site("all_reduce", 0))
    _insert(program, 1, 2, 1, draft)
    return incident_of(program, Fault("drafter_extra", [RankFault(1, "extra", "0", 2, "extra draft at step 2")]))


def type_mismatch() -> Incident:
    """12 steps of 3 AllReduce of 1024 floats; at step 5 rank 1 calls all_gather_into_tensor (1024 in, 4096 out)
    where the others call their second AllReduce."""
    program = _program(4, 12, [_reduce(f"layer{i}", i) for i in range(3)], _plain(4))
    ops = program.plans[1][5][0]
    ops[1] = mark_extra(replace(ops[1], kind="all_gather"))
    return incident_of(program, Fault("different", [RankFault(1, "different", "0", 5, "all_gather at step 5")]))


def subcomm_divergence() -> Incident:
    """World group and TP groups {0,1}, {2,3}: per step one world AllReduce (embed), two on the TP group; at step 4
    rank 3 alone runs an extra TP AllReduce between tp_attn and tp_mlp."""
    forward = [replace(_reduce("embed", 0, where="world"), count=1024, dtype="float32"), _reduce("tp_attn", 1),
               _reduce("tp_mlp", 2)]
    program = _program(4, 10, forward, _plain(4, tp=[(0, 1), (2, 3)]))
    _insert(program, 3, 4, 2, OpTemplate("tp", "all_reduce", 1024, "float32", "tp_draft", 5,
                                         drafter_site("all_reduce", 0)))
    return incident_of(program, Fault("drafter_extra", [RankFault(3, "extra", "2", 4, "extra tp_draft at step 4")]))


def extra_op_4rank() -> Incident:
    """12 steps of 4 AllReduce of 4096 floats, step 9 one more of 8192 on every rank; at step 5 rank 0 alone runs
    an extra, shape-equal AllReduce (after the step's four)."""
    program = _program(4, 12, [_reduce(f"op{i}", i, 4096) for i in range(4)], _plain(4))
    step9 = _reduce("step9", 4, 8192)
    for rank in program.ranks:
        program.plans[rank][9][0].append(step9.at(9, "0"))
    program.reference = {r: [[list(seg) for seg in step] for step in plan] for r, plan in program.plans.items()}
    _insert(program, 0, 5, 4, OpTemplate("tp", "all_reduce", 1024 * 4, "float32", "draft", 5,
                                         drafter_site("all_reduce", 0)))
    return incident_of(program, Fault("drafter_extra", [RankFault(0, "extra", "0", 5, "extra at step 5")]))


def _serving_forward(dp: bool = False) -> list[OpTemplate]:
    """2 layers (self_attn, mlp: AllReduce 1024) and the lm_head AllGather of 512 per rank."""
    forward = [_reduce("dp.num_tokens_across_dp", 15, 1, where="world")] if dp else []
    for i in range(2):
        forward += [_reduce(f"model.layers.{i}.self_attn", 2 * i, site="self_attn"),
                    _reduce(f"model.layers.{i}.mlp", 2 * i + 1)]
    return forward + [OpTemplate("tp", "all_gather", 512, "float32", "lm_head", 8, lm_head_site("all_gather"))]


def _drafter(attention: bool = True) -> list[OpTemplate]:
    ops = [OpTemplate("tp", "all_reduce", 1024, "float32", "mtp.mtp_block.self_attn", 11,
                      drafter_site("all_reduce", 0))] if attention else []
    ops.append(OpTemplate("tp", "all_reduce", 1024, "float32", "mtp.mtp_block.mlp", 12, drafter_site("all_reduce", 1)))
    return ops + [OpTemplate("tp", "all_gather", 512, "float32", "mtp.lm_head", 14, drafter_site("all_gather", 2))]


def _lagging(ranks: list[int]) -> Gate:
    """max_model_len 4096, 3 speculative tokens, seq 4091 + step (one less on the lagging ranks)."""
    return Gate(4096, 3, 4091, {r: 1 for r in ranks})


def serving_drafter_typeboundary() -> Incident:
    """TP 4, drafter of three; rank 1's view lags: it alone runs the drafter at step 3."""
    program = _program(4, 6, _serving_forward(), _serving(4, 4), _drafter(), _lagging([1]))
    return incident_of(program, Fault("type_boundary", [RankFault(1, "extra", "1", 3, "its gate passed alone")]))


def serving_skipped_allreduce() -> Incident:
    """TP 4, drafter of three on every rank every step; at step 2 rank 0 leaves out layer 0's self_attn."""
    program = _program(4, 6, _serving_forward(), _serving(4, 4), _drafter(), Gate(8192, 3, 1024))
    ops = program.plans[0][2][0]
    ops.remove(next(op for op in ops if op.tag == "model.layers.0.self_attn"))
    return incident_of(program, Fault("skip", [RankFault(0, "missing", "1", 2, "skipped layer 0's self_attn")]))


def serving_reorder_heals() -> Incident:
    """TP 4, drafter of two on every rank; at step 2 ranks 1 and 3 issue layer 1's mlp before its self_attn."""
    program = _program(4, 6, _serving_forward(), _serving(4, 4), _drafter(attention=False), Gate(8192, 3, 2048))
    for rank in (1, 3):
        ops = program.plans[rank][2][0]
        ops[2], ops[3] = ops[3], ops[2]
    return incident_of(program, Fault("reorder", [RankFault(r, "reorder", "1", 2, "mlp first") for r in (1, 3)]))


def serving_two_drafters_8rank() -> Incident:
    """TP 8, drafter of two; ranks 2 and 5 lag and run the drafter alone at step 3."""
    program = _program(8, 6, _serving_forward(), _serving(8, 8), _drafter(attention=False), _lagging([2, 5]))
    return incident_of(program, Fault("drafter_extra", [RankFault(r, "extra", "1", 3, "lag") for r in (2, 5)]))


def serving_tp_in_dp_8rank() -> Incident:
    """Two TP groups of 4, four DP groups {i, i+4}; a num_tokens AllReduce on the DP group starts every step;
    drafter of three; rank 6 lags and runs the drafter alone at step 3."""
    program = _program(8, 6, _serving_forward(dp=True), _serving(8, 4), _drafter(), _lagging([6]))
    return incident_of(program, Fault("type_boundary", [RankFault(6, "extra", "2", 3, "its gate passed alone")]))
