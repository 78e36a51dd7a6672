"""The simulated job: a tensor-parallel decode program, as each rank issues it.

A program is S decode steps. A step is read-back *segments*: a segment is a list of collectives the host enqueues
one after the other without waiting, followed by a read-back of their results (the host blocks until all of them
completed). The model's forward is one segment:

    [world ops (only with TP groups inside a world group)]
    for layer in layers: layer ops (1..3 all-reduces: self_attn, mlp, moe)
    [step-end op: lm_head all-gather, or a bigger all-reduce]

The drafter gate is evaluated at one point of every step (`gate_at`: an index into the forward, or after the
forward's read-back, where the drafter gets a segment of its own); a rank whose gate says `pass` runs the drafter
pass there (1..3 collectives of the drafter's own layers).

Every collective goes through the wrappers of a serving framework (vLLM), so the frames outside torch are the same
for every collective up to the layer, and two layers of the loop share the whole stack (the loop's line is the
same for every layer; only the line inside the layer that issues the collective tells self_attn from mlp).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace

Frame = tuple[str, str, int]  # (function, file, line), as Flight Recorder stores it

# ncclDataType_t and the c10 ScalarType name Flight Recorder writes
DTYPES = {"float32": (7, "Float"), "bfloat16": (9, "BFloat16"), "int32": (2, "Int")}
ELEMENT_BYTES = {"float32": 4, "bfloat16": 2, "int32": 4}

_TORCH = {
    "all_reduce": ("all_reduce", "site-packages/torch/distributed/distributed_c10d.py", 3068),
    "all_gather": ("all_gather_into_tensor", "site-packages/torch/distributed/distributed_c10d.py", 4186),
}
_C10D_WRAPPER = ("wrapper", "site-packages/torch/distributed/c10d_logger.py", 83)
_COORDINATOR = {  # GroupCoordinator.all_reduce / .all_gather, then the module-level wrappers
    "all_reduce": (("all_reduce", "vllm/distributed/parallel_state.py", 93),
                   ("tensor_model_parallel_all_reduce", "vllm/distributed/communication_op.py", 14)),
    "all_gather": (("all_gather", "vllm/distributed/parallel_state.py", 103),
                   ("tensor_model_parallel_all_gather", "vllm/distributed/communication_op.py", 20)),
}
_ROW_PARALLEL = ("forward", "vllm/model_executor/layers/linear.py", 1342)
_CALL_IMPL = ("_call_impl", "site-packages/torch/nn/modules/module.py", 1790)
_WRAPPED_CALL_IMPL = ("_wrapped_call_impl", "site-packages/torch/nn/modules/module.py", 1779)
_GATHER_LOGITS = (("_gather_logits", "vllm/model_executor/layers/logits_processor.py", 71),
                  ("forward", "vllm/model_executor/layers/logits_processor.py", 55))
_OUTER = (  # the step loop and main
    ("execute_model", "vllm/v1/worker/gpu_worker.py", 312),
    ("step", "vllm/v1/engine/core.py", 221),
    ("run_busy_loop", "vllm/v1/engine/core.py", 540),
    ("main", "vllm/entrypoints/serve.py", 33),
    ("<module>", "vllm/entrypoints/serve.py", 37),
)
_RUNNER = "vllm/v1/worker/gpu_model_runner.py"
_LLAMA = "vllm/model_executor/models/llama.py"
_EAGLE = "vllm/model_executor/models/llama_eagle.py"
# layer op name -> (line in the module that calls o_proj/down_proj, line in DecoderLayer.forward that calls it)
_LAYER_SITES = {"self_attn": (182, 305), "mlp": (97, 318), "moe": (241, 322)}
_LOOP_LINE = 395  # `hidden_states, residual = layer(positions, hidden_states, residual)` in LlamaModel.forward

VALUE_STEP = 100  # value(rank, step, vidx) = (rank + 1) * (vidx + 1) + 100 * (step % 10), as the real captures


def value(rank: int, step: int, vidx: int) -> float:
    """What rank `rank` feeds into the collective of value index `vidx` at `step` (small integers: exact sums)."""
    return float((rank + 1) * (vidx + 1) + VALUE_STEP * (step % 10))


@dataclass(frozen=True)
class Comm:
    """One communicator: a torch process group and the NCCL communicator under it."""

    name: str  # process-group name: "0" the default group, "1".."k" the groups made after it, in creation order
    ranks: tuple[int, ...]  # global ranks; the comm rank is the index
    hash: int  # NCCL commId
    pg_id: int  # the PG id on its member ranks (0 default group, 1 TP group, 2 DP group)
    desc: str  # "default_pg", "undefined" (new_group without a description), "tp", "dp": as pg_config says

    @property
    def comm_id(self) -> str:
        """The commId as NCCL and RAS print it, lowercase 0x hex."""
        return f"0x{self.hash:016x}"

    @property
    def guid(self) -> str:
        """How ProcessGroupNCCL's log prefix names the group: `0(default_pg)`, `1(tp)`, or the bare name."""
        return self.name if self.desc == "undefined" else f"{self.name}({self.desc})"


@dataclass(frozen=True)
class Op:
    """One collective as one rank issues it."""

    comm: str  # Comm.name
    kind: str  # "all_reduce" | "all_gather"
    count: int  # elements each rank sends (NCCL's count; an all-gather receives count * comm size)
    dtype: str
    tag: str  # what the program calls it, e.g. model.layers.1.mlp
    vidx: int  # value index: which input the rank feeds in (see value)
    step: int
    site: tuple[Frame, ...]  # the frames between the wrappers and the step loop (see stack)
    extra: bool = False  # not part of the reference program (a fault put it there)

    @property
    def frames(self) -> tuple[Frame, ...]:
        """The whole Python stack, innermost first."""
        return stack(self.kind, self.site)

    @property
    def intent(self) -> tuple:
        """What the program meant this collective to be: equal on every rank for one program collective."""
        return (self.comm, self.step, self.tag, self.kind, self.count)

    def out_count(self, comm_size: int) -> int:
        """Elements in the output tensor."""
        return self.count * comm_size if self.kind == "all_gather" else self.count

    def total_bytes(self, comm_size: int) -> int:
        """Bytes of the collective's result: what must agree for NCCL to pair two different collective types."""
        return self.out_count(comm_size) * ELEMENT_BYTES[self.dtype]


def stack(kind: str, site: tuple[Frame, ...]) -> tuple[Frame, ...]:
    """The whole stack of a collective issued through the serving wrappers from `site` (innermost first); every
    module's `forward` is called through nn.Module's `_wrapped_call_impl` and `_call_impl`, as in the real dumps."""
    frames = []
    for frame in site:
        frames.append(frame)
        if frame[0] == "forward":
            frames += [_CALL_IMPL, _WRAPPED_CALL_IMPL]
    return (_TORCH[kind], _C10D_WRAPPER, *_COORDINATOR[kind], *frames, *_OUTER)


def layer_site(op: str) -> tuple[Frame, ...]:
    """Frames between the wrapper and the step loop for a decoder layer's reduction (the same for every layer)."""
    module_line, layer_line = _LAYER_SITES[op]
    return (_ROW_PARALLEL, ("forward", _LLAMA, module_line), ("forward", _LLAMA, layer_line),
            ("forward", _LLAMA, _LOOP_LINE), ("execute_model", _RUNNER, 1510))


def lm_head_site(kind: str) -> tuple[Frame, ...]:
    """The model's step-end collective: the vocab-parallel logits gather (or a reduction of the logits)."""
    if kind == "all_gather":
        return (*_GATHER_LOGITS, ("compute_logits", _LLAMA, 420), ("execute_model", _RUNNER, 1523))
    return (("forward", "vllm/model_executor/layers/vocab_parallel_embedding.py", 470),
            ("compute_logits", _LLAMA, 424), ("execute_model", _RUNNER, 1523))


def drafter_site(kind: str, index: int) -> tuple[Frame, ...]:
    """A drafter collective: its own layer lines in llama_eagle.py, then propose() and the runner."""
    inner = _GATHER_LOGITS if kind == "all_gather" else (_ROW_PARALLEL,)
    return (*inner, ("forward", _EAGLE, 61 + 9 * index), ("forward", _EAGLE, 140),
            ("propose", "vllm/v1/spec_decode/eagle.py", 233), ("propose_draft_token_ids", _RUNNER, 2104),
            ("execute_model", _RUNNER, 1561))


def world_site(index: int) -> tuple[Frame, ...]:
    """A world-group collective of the step's start (the data-parallel token-count agreement)."""
    return (("num_tokens_across_dp", "vllm/forward_context.py", 90 + 12 * index),
            ("_get_num_input_tokens", _RUNNER, 1452), ("execute_model", _RUNNER, 1480))


@dataclass(frozen=True)
class OpTemplate:
    """A collective of the program, before it is placed in a step."""

    where: str  # "world" | "tp"
    kind: str
    count: int
    dtype: str
    tag: str
    vidx: int
    site: tuple[Frame, ...]

    def at(self, step: int, comm: str) -> Op:
        """The collective at `step` on `comm`."""
        return Op(comm, self.kind, self.count, self.dtype, self.tag, self.vidx, step, self.site)


@dataclass(frozen=True)
class Gate:
    """The drafter gate (vLLM's input_fits_in_drafter): pass while seq + spec_tokens <= max_model_len."""

    max_model_len: int
    spec_tokens: int
    seq_base: int  # the sequence length every rank sees at step 0
    lag: dict[int, int] = field(default_factory=dict)  # rank -> tokens its scheduler view is behind (-1: ahead)

    def seq(self, rank: int, step: int) -> int:
        """The sequence length `rank` sees at `step`."""
        return self.seq_base + step - self.lag.get(rank, 0)

    def passes(self, rank: int, step: int) -> bool:
        """Whether `rank`'s gate says pass at `step`."""
        return self.seq(rank, step) + self.spec_tokens <= self.max_model_len

    def last_pass_step(self) -> int:
        """The last step at which a rank without lag passes (-1: never)."""
        return self.max_model_len - self.spec_tokens - self.seq_base


@dataclass
class Program:
    """The reference program (what every rank should run) and, per rank, what it does run."""

    world: int
    comms: dict[str, Comm]
    steps: int
    dtype: str
    forward: list[OpTemplate]  # one step's forward, in issue order
    drafter: list[OpTemplate]
    gate: Gate
    gate_at: int  # index into the forward where the gate is evaluated; len(forward): after its read-back
    tp_of: dict[int, str]  # rank -> its TP group's comm name (the world group itself without TP groups)
    outer_of: dict[int, str] = field(default_factory=dict)  # rank -> the comm of its "world" ops (world or DP group)
    default_comm: str | None = "0"  # the default group's comm; None where it is never used (no NCCL comm)
    plans: dict[int, list[list[list[Op]]]] = field(default_factory=dict)  # rank -> steps -> segments -> ops
    reference: dict[int, list[list[list[Op]]]] | None = None  # set where the program is not one step repeated

    @property
    def ranks(self) -> list[int]:
        """Global ranks."""
        return list(range(self.world))

    @property
    def two_level(self) -> bool:
        """Whether the ranks have "world" ops on a comm of their own (the world group or a DP group)."""
        return any(self.outer_of[r] != self.tp_of[r] for r in self.ranks)

    def comm_of(self, template: OpTemplate, rank: int) -> str:
        """The comm a template's collective runs on for `rank`."""
        return self.outer_of[rank] if template.where == "world" else self.tp_of[rank]

    def reference_step(self, rank: int, step: int, gate_pass: bool) -> list[list[Op]]:
        """The segments of `step` for `rank` when nothing goes wrong (its gate said `gate_pass`)."""
        forward = [t.at(step, self.comm_of(t, rank)) for t in self.forward]
        drafter = [t.at(step, self.comm_of(t, rank)) for t in self.drafter] if gate_pass else []
        if self.gate_at >= len(forward):
            return [forward, drafter] if drafter else [forward]
        return [forward[:self.gate_at] + drafter + forward[self.gate_at:]]

    def build_plans(self) -> None:
        """Every rank's reference plan, the drafter running where its gate passes."""
        self.plans = {r: [self.reference_step(r, s, self.gate.passes(r, s)) for s in range(self.steps)]
                      for r in self.ranks}

    def reference_plans(self) -> dict[int, list[list[list[Op]]]]:
        """What every rank would run without the fault: the gate without lag, no plan edits."""
        if self.reference is not None:
            return self.reference
        unlagged = replace(self.gate, lag={})
        return {r: [self.reference_step(r, s, unlagged.passes(r, s)) for s in range(self.steps)] for r in self.ranks}

    def size(self, comm: str) -> int:
        """Ranks in a comm."""
        return len(self.comms[comm].ranks)


def mark_extra(op: Op) -> Op:
    """The same collective, flagged as not part of the reference program."""
    return replace(op, extra=True)


def _comms(rng: random.Random, world: int) -> tuple[dict[str, Comm], dict[int, str], dict[int, str], str | None]:
    """The communicators, as (comms, rank -> TP comm, rank -> outer comm, the default group's comm).

    Two styles: `plain` (capture.py's: the default group is the world comm; TP groups made with new_group inside
    it, desc `undefined`) and `serving` (a framework's: the default group gets no NCCL comm; a TP group `1` desc
    `tp`, also where it holds every rank; with TP groups smaller than the world, DP groups of the ranks with one
    TP rank, desc `dp`)."""
    def new_hash() -> int:
        return rng.getrandbits(64) | (1 << 60)

    serving = rng.random() < 0.4
    tp = world
    if world >= 4 and rng.random() < 0.3:
        tp = {4: 2, 8: rng.choice([2, 4]), 64: 8}[world]
    comms: dict[str, Comm] = {}
    if not serving:
        comms["0"] = Comm("0", tuple(range(world)), new_hash(), 0, "default_pg")
        if tp == world:
            return comms, {r: "0" for r in range(world)}, {r: "0" for r in range(world)}, "0"
    tp_of, outer_of = {}, {}
    for g in range(world // tp):
        name = str(len(comms) + (1 if serving else 0))
        members = tuple(range(g * tp, (g + 1) * tp))
        comms[name] = Comm(name, members, new_hash(), 1, "tp" if serving else "undefined")
        tp_of.update({r: name for r in members})
        outer_of.update({r: "0" for r in members})
    if serving and tp < world:
        for i in range(tp):
            name = str(len(comms) + 1)
            members = tuple(range(i, world, tp))
            comms[name] = Comm(name, members, new_hash(), 2, "dp")
            outer_of.update({r: name for r in members})
    if serving and tp == world:
        outer_of = dict(tp_of)
    return comms, tp_of, outer_of, None if serving else "0"


def draw_program(rng: random.Random) -> Program:
    """A random program; plans are not built yet (faults change the gate first)."""
    world = rng.choices([2, 4, 8, 64], weights=[16, 42, 38, 4])[0]
    comms, tp_of, outer_of, default = _comms(rng, world)
    tp_size = len(comms[tp_of[0]].ranks)
    dtype = rng.choice(["float32", "bfloat16"])
    hidden = rng.choice([512, 1024, 2048, 4096])
    steps = rng.randint(2, 4) if world < 64 else 2
    layers = rng.randint(1, 3 if world < 64 else 2)
    layer_ops = rng.sample(["self_attn", "mlp", "moe"], rng.choice([1, 2, 2, 2, 3]))
    layer_ops.sort(key=["self_attn", "mlp", "moe"].index)
    forward: list[OpTemplate] = []
    if any(outer_of[r] != tp_of[r] for r in range(world)):
        for j in range(rng.choice([1, 1, 2])):
            forward.append(OpTemplate("world", "all_reduce", 1 + 7 * j, "int32", f"dp.num_tokens.{j}", 60 + j,
                                      world_site(j)))
    for i in range(layers):
        for j, name in enumerate(layer_ops):
            forward.append(OpTemplate("tp", "all_reduce", hidden, dtype, f"model.layers.{i}.{name}", 3 * i + j,
                                      layer_site(name)))
    end = rng.choice(["none", "gather", "gather", "reduce"])
    if end == "gather":
        # a logits shard whose gathered size sometimes equals the hidden all-reduce's: NCCL pairs those
        shard = hidden // tp_size if rng.random() < 0.4 and hidden % tp_size == 0 else rng.choice([256, 512, 1000])
        forward.append(OpTemplate("tp", "all_gather", shard, dtype, "lm_head", 40, lm_head_site("all_gather")))
    elif end == "reduce":
        forward.append(OpTemplate("tp", "all_reduce", hidden * 4, dtype, "lm_head", 40, lm_head_site("all_reduce")))
    drafter = [OpTemplate("tp", "all_reduce", hidden, dtype, f"mtp.layers.{j}", 50 + j, drafter_site("all_reduce", j))
               for j in range(rng.randint(1, 3))]
    spec = rng.randint(1, 4)
    max_len = rng.choice([4096, 8192, 32768, 200000])
    # by default the drafter stays off (the sequence is past the ceiling) or runs on every step (far below it)
    seq_base = rng.choice([max_len - spec + 1, max_len // 2])
    return Program(world, comms, steps, dtype, forward, drafter, Gate(max_len, spec, seq_base),
                   rng.randint(0, len(forward)), tp_of, outer_of, default)
