"""Generate large, format-faithful incidents for the benchmarks (not a test; run_all.py calls it, cached).

    python benchmarks/generate.py nccl --ranks 8 --ops 1000000 [--out DIR]
    python benchmarks/generate.py fr --ranks 64 --ops 20000 [--out DIR]

One incident is a folder of evidence only, one file per rank, plus `<folder>.truth.json` beside it (never inside:
it would be read as evidence):

- `nccl`: `nccl.<host>.<pid>.log` per rank, what `NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,COLL
  NCCL_DEBUG_FILE=nccl.%h.%p.log` writes (the lines of tests/fixtures/real/nccl-2.28.9/extra-op-4rank, with
  hosts of 8 GPUs each): version and plugin lines, `Init START`, the `nRanks .. nNodes` line, channel lines,
  `Init COMPLETE` with the commId, then one COLL line per collective (`AllReduce: opCount 1f sendbuff 0x..
  recvbuff 0x.. count 16384 datatype 9 op 0 root 0 comm 0x.. [nranks=8] stream 0x..`), then the socket WARN of
  a peer gone.
- `fr`: `fr_rank<R>` per rank, the pickle (protocol 2) ProcessGroupNCCL writes on a watchdog timeout, schema
  2.10: `version`, `pg_config` (`{"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, ..]"}}`),
  `comm_lib_version`, `pg_status`, `entries` with every field of a real 2.10 entry (frames, record_id, pg_id,
  process_group, thread_name/id, collective_seq_id, p2p_seq_id, op_id, profiling_name, time_created_ns,
  duration_ms, input/output sizes and dtypes, state, time_discovered_*, retired, timeout_ms, is_p2p).

The job is a tensor-parallel decode loop: per step 16 layers x (attention AllReduce, MLP AllReduce) of 16384
bf16, then a sampler AllReduce of 4096 bf16. Mid-way, one rank (the outlier) runs one extra AllReduce of 16384
bf16 from the drafter (`spec_decode/eagle.py:233`, a call site no other collective has) inside a run of
shape-equal AllReduces. From there the outlier is one collective ahead: the pairings are shape-equal (silent
corruption) except at step ends, where a 16384 pairs with a 4096 (a count mismatch NCCL 2.28.9 completes); the
first *visible* mismatch is the first such step end, not the root. At the end the majority has launched N
collectives and the outlier N+1: its last one never gets a partner (FR state `started`, pg_status last
completed N), the wedge.

Truth (`<folder>.truth.json`): outlier rank, root seq (the extra collective's seq on the outlier), first visible
mismatch seq, collectives per rank, comm (hash for logs, process-group name for dumps).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import shutil
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
LAYERS = 16
STEP = 2 * LAYERS + 1  # collectives per decode step
COMM_HASH = 0x1715B7BD1B8FDA9E
GPUS_PER_HOST = 8
SCHEMA = 1  # bump when the output changes, to invalidate cached incidents

TORCH_FRAMES = (
    ("all_reduce", "site-packages/torch/distributed/distributed_c10d.py", 3068),
    ("wrapper", "site-packages/torch/distributed/c10d_logger.py", 83),
)
OUTER_FRAMES = (
    ("execute_model", "vllm/v1/worker/gpu_model_runner.py", 1510),
    ("<module>", "vllm/v1/worker/worker.py", 42),
)


@dataclass(frozen=True)
class Kind:
    """One kind of collective of the loop: what NCCL and the Flight Recorder record about it."""

    name: str
    op: str  # NCCL op name
    count: int
    nccl_dtype: int  # ncclDataType_t
    fr_dtype: str  # c10 ScalarType name, as FR writes it
    frame: tuple[str, str, int]  # innermost user frame (name, file, line): the call site
    buffer: int  # sendbuff == recvbuff (in-place)


ATTN = Kind("attn", "AllReduce", 16384, 9, "BFloat16", ("forward", "vllm/model_executor/models/llama.py", 182),
            0x7F3C5E000000)
MLP = Kind("mlp", "AllReduce", 16384, 9, "BFloat16", ("forward", "vllm/model_executor/models/llama.py", 97),
           0x7F3C5E400000)
SAMPLER = Kind("sampler", "AllReduce", 4096, 9, "BFloat16",
               ("sample", "vllm/model_executor/layers/logits_processor.py", 71), 0x7F3C5E800000)
DRAFT = Kind("draft", "AllReduce", 16384, 9, "BFloat16", ("propose", "vllm/v1/spec_decode/eagle.py", 233),
             0x7F3C5EC00000)
KINDS = (ATTN, MLP, SAMPLER, DRAFT)


def majority_kind(index: int) -> Kind:
    """The collective at 0-based position `index` of a rank that did not diverge."""
    p = index % STEP
    if p == STEP - 1:
        return SAMPLER
    return ATTN if p % 2 == 0 else MLP


@dataclass(frozen=True)
class Truth:
    """What the generator injected, and what a right answer says."""

    format: str  # nccl-log | flight-recorder
    ranks: int
    ops: int  # collectives per majority rank (the outlier has ops + 1)
    outlier: int
    root_seq: int  # 1-based seq of the extra collective on the outlier
    first_visible_seq: int  # first seq whose signatures differ across ranks
    comm: str
    files: int
    bytes: int
    schema: int = SCHEMA

    @property
    def collectives(self) -> int:
        """Collectives in the whole incident."""
        return self.ranks * self.ops + 1


def plan(ranks: int, ops: int, fmt: str, comm: str) -> Truth:
    """Where the extra collective goes: mid-way, on an attention AllReduce inside a step (not at its edge)."""
    outlier = ranks // 2 + 1 if ranks > 2 else 0
    root_index = (ops // 2) // STEP * STEP + 10  # 0-based, an ATTN slot with shape-equal neighbours
    if root_index >= ops:
        root_index = min(10, ops - 1)
    # Outlier position j > root holds the majority's j-1: the first visible mismatch is the first j where
    # kind(j - 1) and kind(j) differ in shape (a step end).
    first_visible = None
    for j in range(root_index + 1, ops):
        a, b = majority_kind(j - 1), majority_kind(j)
        if (a.op, a.count, a.nccl_dtype) != (b.op, b.count, b.nccl_dtype):
            first_visible = j + 1
            break
    return Truth(fmt, ranks, ops, outlier, root_index + 1, first_visible or ops + 1, comm, 0, 0)


def expected_window(truth: Truth) -> dict:
    """What a right answer says of the window and the wedge: the outlier is one ahead from the root to the end,
    so the window runs from the root seq to the majority's last; its count-mismatched pairings are the step ends
    after the root (outlier position j holds the majority's j - 1); the wedge is the outlier's last collective
    (seq ops + 1), which no other rank launched."""
    root = truth.root_seq - 1
    mismatched = 0
    for j in range(root + 1, truth.ops):
        a, b = majority_kind(j - 1), majority_kind(j)
        mismatched += (a.op, a.count, a.nccl_dtype) != (b.op, b.count, b.nccl_dtype)
    return {"last_seq": truth.ops, "collectives": truth.ops - root, "count_mismatch": mismatched,
            "wedge_seq": truth.ops + 1}


def stream(truth: Truth, rank: int) -> list[Kind]:
    """The kinds of collectives `rank` launched, in order."""
    kinds = [majority_kind(i) for i in range(truth.ops)]
    if rank == truth.outlier:
        kinds.insert(truth.root_seq - 1, DRAFT)
    return kinds


# --- NCCL debug logs ------------------------------------------------------------------------------------------


def _who(rank: int) -> tuple[str, int, int]:
    """(host, pid, cuda device) of a rank: hosts of 8 GPUs."""
    return f"node{rank // GPUS_PER_HOST:03d}", 21400 + (rank % GPUS_PER_HOST) * 7 + rank // GPUS_PER_HOST * 3, \
        rank % GPUS_PER_HOST


def write_nccl_log(folder: Path, truth: Truth, rank: int) -> int:
    """One rank's NCCL debug log; returns its size in bytes."""
    host, pid, dev = _who(rank)
    ranks = truth.ranks
    nodes = (ranks + GPUS_PER_HOST - 1) // GPUS_PER_HOST
    ptr = f"0x{0x2571A990 + rank * 0x9B3D40:x}"  # heap pointers, as in the real capture
    bus = f"{[0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB][dev]:x}000"
    head = f"{host}:{pid}:{pid} [{dev}] NCCL INFO "
    proxy = f"{host}:{pid}:{pid + 94} [{dev}] NCCL INFO "
    lines = [
        head + "Bootstrap: Using eth0:10.1.%d.%d<0>" % (rank // GPUS_PER_HOST // 250, rank // GPUS_PER_HOST % 250 + 2),
        head + "cudaDriverVersion 13000",
        head + "NCCL version 2.28.9+cuda13.0",
        head + "NET/Plugin: Could not find: libnccl-net.so",
        head + "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0:10.1.0.2<0>",
        head + "Using network IB",
        head + (f"ncclCommInitRankConfig comm {ptr} rank {rank} nranks {ranks} cudaDev {dev} nvmlDev {dev} "
                f"busId {bus} commId 0x{COMM_HASH:016x} - Init START"),
        head + f"comm {ptr} rank {rank} nRanks {ranks} nNodes {nodes} localRanks {min(ranks, GPUS_PER_HOST)} "
               f"localRank {dev} MNNVL 0",
        head + "Channel 00/02 : " + " ".join(str(r) for r in range(min(ranks, 16))),
        head + "Channel 01/02 : " + " ".join(str(r) for r in range(min(ranks, 16))),
        head + "P2P Chunksize set to 131072",
        proxy + f"[Proxy Service] Device {dev} CPU core {dev * 4}",
        head + "CC Off, workFifoBytes 1048576",
        head + (f"ncclCommInitRankConfig comm {ptr} rank {rank} nranks {ranks} cudaDev {dev} nvmlDev {dev} "
                f"busId {bus} commId 0x{COMM_HASH:016x} - Init COMPLETE"),
        head + (f"Init timings - ncclCommInitRankConfig: rank {rank} nranks {ranks} total 1.12 (kernels 0.57, alloc "
                "0.02, bootstrap 0.21, allgathers 0.04, topo 0.11, graphs 0.01, connections 0.16, rest 0.00)"),
    ]
    pieces = {
        k: (head + f"{k.op}: opCount ",
            f" sendbuff 0x{k.buffer:x} recvbuff 0x{k.buffer:x} count {k.count} datatype {k.nccl_dtype} op 0 "
            f"root 0 comm {ptr} [nranks={ranks}] stream (nil)\n")
        for k in KINDS
    }
    path = folder / f"nccl.{host}.{pid}.log"
    with open(path, "w") as out:
        out.write("\n".join(lines) + "\n")
        kinds = stream(truth, rank)
        for start in range(0, len(kinds), 100_000):
            out.write("".join(f"{pieces[k][0]}{i:x}{pieces[k][1]}"
                              for i, k in enumerate(kinds[start:start + 100_000], start)))
        if rank == truth.outlier:  # its peers exited; its proxy thread sees the sockets close
            out.write(f"\n[2026-11-29 08:56:01] {host}:{pid}:{pid + 100} [{dev}] misc/socket.cc:72 NCCL WARN "
                      "socketProgress: Connection closed by remote peer \n")
            out.write(f"{host}:{pid}:{pid + 100} [{dev}] NCCL INFO misc/socket.cc:845 -> 6\n")
        else:
            out.write(f"{host}:{pid}:{pid} [{dev}] NCCL INFO comm {ptr} rank {rank} nranks {ranks} cudaDev {dev} "
                      f"busId {bus} - Destroy COMPLETE\n")
    return path.stat().st_size


# --- Flight Recorder dumps ------------------------------------------------------------------------------------


def _frames(kind: Kind) -> list[dict]:
    inner = [{"name": n, "filename": f, "line": line} for n, f, line in TORCH_FRAMES]
    user = [{"name": kind.frame[0], "filename": kind.frame[1], "line": kind.frame[2]}]
    return inner + user + [{"name": n, "filename": f, "line": line} for n, f, line in OUTER_FRAMES]


def fr_dump(truth: Truth, rank: int) -> dict:
    """One rank's Flight Recorder dump, as ProcessGroupNCCL builds it (fresh objects per entry, as torch's)."""
    kinds = stream(truth, rank)
    last = len(kinds)
    wedged = rank == truth.outlier  # its last collective has no partner: started, never completed
    base = 1795942499244720350 + rank * 37_000
    thread_id = str(140301389668672 + rank * 8192)
    entries = []
    add = entries.append
    for i, kind in enumerate(kinds):
        seq = i + 1
        created = base + i * 1_480_000
        done = not (wedged and seq == last)
        entry = {
            "frames": _frames(kind), "record_id": i, "pg_id": 0, "process_group": ("0", "default_pg"),
            "thread_name": "pt_main_thread", "thread_id": thread_id, "collective_seq_id": seq, "p2p_seq_id": 0,
            "op_id": seq, "profiling_name": "nccl:all_reduce", "time_created_ns": created,
        }
        if done:
            entry["duration_ms"] = 0.05 + (i * 7919 % 1000) / 10000.0
        entry.update({
            "input_sizes": [[kind.count]], "input_dtypes": [kind.fr_dtype], "output_sizes": [[kind.count]],
            "output_dtypes": [kind.fr_dtype], "state": "completed" if done else "started",
            "time_discovered_started_ns": created + 412_000,
            "time_discovered_completed_ns": created + 1_270_000 if done else None,
            "retired": done, "timeout_ms": 600000, "is_p2p": False,
        })
        add(entry)
    return {
        "version": "2.10",
        "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": str(list(range(truth.ranks)))}},
        "comm_lib_version": "2.28.9",
        "pg_status": {"0": {"last_enqueued_collective": last, "last_started_collective": last,
                            "last_completed_collective": last - 1 if wedged else last}},
        "entries": entries,
    }


def write_fr_dump(folder: Path, truth: Truth, rank: int) -> int:
    """`fr_rank<R>` (TORCH_FR_DUMP_TEMP_FILE=fr_rank): the pickle of one rank; returns its size."""
    path = folder / f"fr_rank{rank}"
    data = pickle.dumps(fr_dump(truth, rank), protocol=2)
    path.write_bytes(data)
    return len(data)


# --- incidents, cached ----------------------------------------------------------------------------------------


def _write_one(args: tuple) -> int:
    fmt, folder, truth, rank = args
    return (write_nccl_log if fmt == "nccl" else write_fr_dump)(Path(folder), truth, rank)


def incident(fmt: str, ranks: int, ops: int, root: Path = DATA, workers: int | None = None,
             quiet: bool = False) -> tuple[Path, Truth]:
    """The folder of an incident (generated unless a complete one is there) and its truth."""
    name = f"{fmt}-{ranks}r-{ops}"
    folder = root / name
    truth_path = root / f"{name}.truth.json"
    comm = f"0x{COMM_HASH:016x}" if fmt == "nccl" else "0"
    truth = plan(ranks, ops, "nccl-log" if fmt == "nccl" else "flight-recorder", comm)
    if truth_path.exists() and folder.is_dir():
        saved = json.loads(truth_path.read_text())
        if saved.get("schema") == SCHEMA and len(os.listdir(folder)) == ranks:
            return folder, Truth(**saved)
    if folder.exists():
        shutil.rmtree(folder)
    truth_path.unlink(missing_ok=True)
    folder.mkdir(parents=True)
    started = time.perf_counter()
    jobs = [(fmt, str(folder), truth, rank) for rank in range(ranks)]
    workers = workers or min(os.cpu_count() or 1, 4)
    if workers > 1 and ranks > 1:
        with ProcessPoolExecutor(workers) as pool:
            sizes = list(pool.map(_write_one, jobs, chunksize=max(1, ranks // (workers * 8))))
    else:
        sizes = [_write_one(job) for job in jobs]
    truth = Truth(**{**asdict(truth), "files": ranks, "bytes": sum(sizes)})
    truth_path.write_text(json.dumps(asdict(truth), indent=1) + "\n")
    if not quiet:
        print(f"generated {folder} ({sum(sizes) / 1e6:.0f} MB, {ranks} files) in {time.perf_counter() - started:.1f}s",
              file=sys.stderr)
    return folder, truth


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("format", choices=["nccl", "fr"])
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--ops", type=int, default=None, help="collectives per rank (default 1e6 nccl, 2e4 fr)")
    parser.add_argument("--out", type=Path, default=DATA, help="parent folder of the incident")
    args = parser.parse_args()
    ops = args.ops or (1_000_000 if args.format == "nccl" else 20_000)
    folder, truth = incident(args.format, args.ranks, ops, args.out)
    print(json.dumps({"folder": str(folder), **asdict(truth)}))


if __name__ == "__main__":
    main()
