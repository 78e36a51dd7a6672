"""A rank's stdout/stderr with ProcessGroupNCCL's watchdog messages (`torch_rank<R>.log` of the real captures).

For every comm where the rank has a collective that never completed, the watchdog times out on the first one
(started or only scheduled: subcomm-divergence's ranks time out on a TP collective that waits behind a world one):

    [rank1]:[E1129 09:56:37.094914699 ProcessGroupNCCL.cpp:689] [Rank 1] Watchdog caught collective operation
    timeout: WorkNCCL(SeqNum=91, OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, Timeout(ms)=20000) ran for 20016
    milliseconds before timing out.

then (optionally) the desync report, `failure detected by watchdog at work sequence id: 91 PG status: last
enqueued work: 91, last completed work: 90`, the stack of the failed collective; every rank then gets the dump
signal on the default group (`Last enqueued NCCL work: 90, last completed NCCL work: 90.`; -1 where the default
group has no NCCL comm, as in the serving-* captures). `[Rank N]` and the
desync report's rank lists are comm ranks; `[rankR]:` is the global rank. A job that never hung has no such lines.
"""

from __future__ import annotations

import datetime

from .incident import TIMEOUT_MS, Incident
from .nccl_rules import COMPLETED, Launch

OP_TYPE = {"all_reduce": "ALLREDUCE", "all_gather": "_ALLGATHER_BASE"}
_DUMP_ADVICE = (
    "This is most likely caused by incorrect usages of collectives, e.g., wrong sizes used across ranks, the order "
    "of collectives is not same for all ranks or the scheduled collective, for some reason, didn't run. "
    "Additionally, this can be caused by GIL deadlock or other reasons such as network errors or bugs in the "
    "communications library (e.g. NCCL), etc. ")


def _stamp(ns: int, level: str, where: str) -> str:
    """`E1129 09:55:02.279616572 ProcessGroupNCCL.cpp:689` in UTC."""
    t = datetime.datetime.fromtimestamp(ns // 1_000_000_000, datetime.timezone.utc)
    return f"{level}{t:%m%d %H:%M:%S}.{ns % 1_000_000_000:09d} {where}"


def _first_incomplete(incident: Incident, rank: int) -> dict[str, Launch]:
    """Per comm, the rank's first collective that never completed."""
    out: dict[str, Launch] = {}
    for launch in incident.run.launches[rank]:
        if launch.state != COMPLETED and launch.op.comm not in out:
            out[launch.op.comm] = launch
    return out


def timed_out(incident: Incident) -> dict[int, dict[str, Launch]]:
    """rank -> comm -> the collective its watchdog times out on."""
    return {r: found for r in incident.program.ranks if (found := _first_incomplete(incident, r))}


def torch_log_text(incident: Incident, rank: int, desync: bool) -> str:
    """The whole log of `rank`."""
    program = incident.program
    hang = incident.hang_ns()
    tag = f"[rank{rank}]:"
    lines = [f"{tag}[{_stamp(incident.base_ns - 900_000_000, 'W', 'Utils.hpp:137')}] Warning: Environment variable "
             "TORCH_NCCL_TRACE_BUFFER_SIZE is deprecated; use TORCH_FR_BUFFER_SIZE instead (function operator())"]
    stuck = timed_out(incident)
    if not stuck:
        return "\n".join(lines) + "\n"
    first = min(stuck)
    at = hang + TIMEOUT_MS * 1_000_000 + rank * 3_000_000
    for name, launch in sorted(stuck.get(rank, {}).items()):
        comm = program.comms[name]
        me = comm.ranks.index(rank)
        op = launch.op
        size = len(comm.ranks)
        work = (f"WorkNCCL(SeqNum={launch.seq}, OpType={OP_TYPE[op.kind]}, NumelIn={op.count}, "
                f"NumelOut={op.out_count(size)}, Timeout(ms)={TIMEOUT_MS})")
        pg = f"[PG ID {comm.pg_id} PG GUID {comm.guid} Rank {me}]"
        lines.append(f"{tag}[{_stamp(at, 'E', 'ProcessGroupNCCL.cpp:689')}] [Rank {me}] Watchdog caught collective "
                     f"operation timeout: {work} ran for {TIMEOUT_MS + 16 + rank} milliseconds before timing out.")
        if desync:
            lines += _desync(incident, rank, name, at)
        launched = incident.truth.launched[name][rank]
        done = incident.truth.completed[name][rank]
        lines.append(f"{tag}[{_stamp(at + 1_100_000, 'E', 'ProcessGroupNCCL.cpp:2303')}] {pg}  failure detected by "
                     f"watchdog at work sequence id: {launch.seq} PG status: last enqueued work: {launched}, "
                     f"last completed work: {done}")
        lines.append(f"{tag}[{_stamp(at + 5_000_000_000, 'E', 'ProcessGroupNCCL.cpp:733')}] Stack trace of the "
                     "failed collective: ")
        lines += [f"#{i} {fn} from {path}:{line}" for i, (fn, path, line) in enumerate(op.frames)]
        lines.append("")
        if rank == first:
            lines.append(f"{tag}[{_stamp(at + 5_000_100_000, 'E', 'ProcessGroupNCCL.cpp:2636')}] {pg} First PG on "
                         "this rank to signal dumping.")
    # the default group's line: with no NCCL comm under it (serving), `PG GUID 0` and counts of -1
    world = program.comms.get(program.default_comm) if program.default_comm else None
    default = f"[PG ID 0 PG GUID {world.guid if world else '0'} Rank {rank}]"
    signal_at = hang + TIMEOUT_MS * 1_000_000 + 6_000_000_000 + rank * 1_000_000
    if rank == first:
        source = "this local rank"
    else:
        source = f" rank {first}"
        lines.append(f"{tag}[{_stamp(signal_at - 200_000, 'E', 'ProcessGroupNCCL.cpp:1849')}] {default} Observed "
                     "flight recorder dump signal from another rank via TCPStore.")
    launched = incident.truth.launched[world.name][rank] if world else -1
    done = incident.truth.completed[world.name][rank] if world else -1
    lines.append(f"{tag}[{_stamp(signal_at, 'E', 'ProcessGroupNCCL.cpp:1914')}] {default} Received a dump signal due "
                 f"to a collective timeout from {source} and we will try our best to dump the debug info. Last "
                 f"enqueued NCCL work: {launched}, last completed NCCL work: {done}.{_DUMP_ADVICE}")
    lines.append(f"{tag}[{_stamp(signal_at + 400_000, 'E', 'ProcessGroupNCCL.cpp:1628')}] {default} ProcessGroupNCCL "
                 "preparing to dump debug info. Include stack trace: 1, only active collectives: 0")
    if rank in stuck:
        name = min(stuck[rank])
        me = program.comms[name].ranks.index(rank)
        down = signal_at + 60_000_000_000
        lines.append(f"{tag}[{_stamp(down, 'E', 'ProcessGroupNCCL.cpp:750')}] [Rank {me}] Some NCCL operations have "
                     "failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations "
                     "might run on corrupted/incomplete data.")
        lines.append(f"{tag}[{_stamp(down + 50_000, 'E', 'ProcessGroupNCCL.cpp:764')}] [Rank {me}] To avoid data "
                     "inconsistency, we are taking the entire process down.")
    return "\n".join(lines) + "\n"


def last_work(incident: Incident, comm_name: str) -> dict[int, tuple[int, bool, str]]:
    """rank -> (seq, finished, op type) of the last collective it enqueued in the comm, for every member that
    enqueued any there: what each desync report on the comm lists of it (its snapshot)."""
    out: dict[int, tuple[int, bool, str]] = {}
    for r in incident.program.comms[comm_name].ranks:
        if mine := incident.run.comm_launches(r, comm_name):
            out[r] = (mine[-1].seq, mine[-1].state == COMPLETED, OP_TYPE[mine[-1].op.kind])
    return out


def _desync(incident: Incident, rank: int, comm_name: str, at: int) -> list[str]:
    """TORCH_NCCL_DESYNC_DEBUG's report, as 2.11 builds it: every member's last enqueued work and whether it
    finished, grouped; the culprits are the group of the lowest seq (type-mismatch shows it naming #18 where the
    hang is at #17: it looks at the last enqueued work, not at the one that timed out)."""
    comm = incident.program.comms[comm_name]
    me = comm.ranks.index(rank)
    last = {comm.ranks.index(r): work for r, work in last_work(incident, comm_name).items()}
    if not last:
        return []
    seq_me, _, op_me = last.get(me, (0, False, "ALLREDUCE"))
    groups: dict[tuple[int, bool], list[int]] = {}
    for r, (seq, done, _) in sorted(last.items()):
        groups.setdefault((seq, done), []).append(r)
    low = min(groups)
    culprits = ", ".join(str(r) for r in groups[low])
    if low[1] and len(groups) > 1:
        verdict = f"[{culprits}] finished collective #{low[0]}, but didn't join collective #{low[0] + 1}"
    else:
        verdict = f"- [{culprits}] joined but didn't finish collective #{low[0]}"
    lines = [f"[rank{rank}]:[{_stamp(at + 1_000_000, 'E', 'ProcessGroupNCCL.cpp:2495')}] Rank {me}",
             f"\t - [{me}] Timeout at collective: {op_me}, #{seq_me}",
             "\t - To our best knowledge, the lagging/dead/mismatched ranks that caused the desync are:",
             f"\t     {verdict} (count from 1)" if low[1] and len(groups) > 1 else f"\t   {verdict} (count from 1)",
             "\t - Snapshot of ranks' latest states:"]
    for (seq, done), members in sorted(groups.items()):
        state = "finished" if done else "started"
        lines.append(f"\t   #{seq} {state} ranks:")
        by_op: dict[str, list[int]] = {}  # (each rank's own op: ranks at one seq may have enqueued different ones)
        for r in members:
            by_op.setdefault(last[r][2], []).append(r)
        lines += [f"\t     [{', '.join(map(str, ranks))}] {state} {op}" for op, ranks in sorted(by_op.items())]
    return lines
