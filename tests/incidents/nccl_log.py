"""NCCL debug logs (`NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,COLL NCCL_DEBUG_FILE=nccl.%h.%p.log`), one per rank.

The line shapes are those of tests/fixtures/real/nccl-2.28.9 (subcomm-divergence has two communicators per log):
version lines, then per communicator (the world one at start, the others lazily, before their first collective)
`Init START`, the `nRanks .. nNodes`
line, `Init COMPLETE` with the commId, the `Init timings` line; one COLL line per collective
(`AllReduce: opCount 1a sendbuff 0x.. recvbuff 0x.. count 1024 datatype 7 op 0 root 0 comm 0x.. [nranks=4]
stream (nil)`), opCount counted per communicator from 0; the connection lines after a comm's first collective;
at the end `Destroy COMPLETE` (a clean job) or `Abort START/COMPLETE` (a rank that left a hung job).
"""

from __future__ import annotations

from .incident import Incident, RankIdentity
from .program import DTYPES

NCCL_OP = {"all_reduce": "AllReduce", "all_gather": "AllGather"}


def prefix(who: RankIdentity, thread: int | None = None) -> str:
    """`vm:435:435 [0] NCCL INFO `: host, pid, thread id, cuda device."""
    return f"{who.host}:{who.pid}:{who.pid if thread is None else thread} [{who.dev}] NCCL INFO "


def _buffer(rank: int, vidx: int, receive: bool = False) -> str:
    return f"0x7f{(0x3a7 + rank * 0x41) & 0xfff:03x}{0xe00000 + vidx * 0x1000 + (0x800 if receive else 0):06x}"


def nccl_log_lines(incident: Incident, rank: int) -> list[tuple[str, str | None]]:
    """The lines of `rank`'s log, each with the comm of a COLL line (None for other lines)."""
    program = incident.program
    who = incident.identity[rank]
    head = prefix(who)
    lines: list[tuple[str, str | None]] = [(head + text, None) for text in (
        "ENV/Plugin: Could not find: libnccl-env.so",
        "cudaDriverVersion 13000",
        "NCCL version 2.28.9+cuda13.0",
        "NET/Plugin: Could not find: libnccl-net.so",
        "NET/IB : No device found.",
        "NET/Socket : Using [0]eth0:192.0.2.2<0>",
        "Initialized NET plugin Socket",
        "Using network Socket",
    )]
    # the default group's communicator is set up at start (the first barrier), the others lazily before their
    # first collective (as in subcomm-divergence and the serving-* captures)
    initialized: set[str] = set()
    if program.default_comm is not None:
        initialized.add(program.default_comm)
        lines += [(head + text, None) for text in _init(incident, rank, program.default_comm)]
    op_count: dict[str, int] = {}
    for launch in incident.run.launches[rank]:
        op = launch.op
        comm = program.comms[op.comm]
        ptr = f"0x{incident.pointers[(rank, op.comm)]:x}"
        comm_rank = comm.ranks.index(rank)
        size = len(comm.ranks)
        if op.comm not in initialized:
            initialized.add(op.comm)
            lines += [(head + text, None) for text in _init(incident, rank, op.comm)]
        count = op_count.get(op.comm, 0)
        op_count[op.comm] = count + 1
        receive = op.kind == "all_gather"
        lines.append((
            head + f"{NCCL_OP[op.kind]}: opCount {count:x} sendbuff {_buffer(rank, op.vidx)} recvbuff "
            f"{_buffer(rank, op.vidx, receive)} count {op.count} datatype {DTYPES[op.dtype][0]} op 0 root 0 "
            f"comm {ptr} [nranks={size}] stream (nil)", op.comm))
        if count == 0 and size > 1:
            left, right = comm.ranks[comm_rank - 1], comm.ranks[(comm_rank + 1) % size]
            left, right = comm.ranks.index(left), comm.ranks.index(right)
            lines += [
                (prefix(who, who.pid + 110) + f"[Proxy Progress] Device {who.dev} CPU core 5", None),
                (head + f"Channel 00/0 : {left}[{who.dev}] -> {comm_rank}[{who.dev}] [receive] via NET/Socket/0", None),
                (head + f"Channel 00/0 : {comm_rank}[{who.dev}] -> {right}[{who.dev}] [send] via NET/Socket/0", None),
                (head + "Connected all rings, use ring PXN 0 GDR 0", None),
            ]
    lines += [(text, None) for text in _teardown(incident, rank, initialized)]
    return lines


def _init(incident: Incident, rank: int, comm_name: str) -> list[str]:
    """The INIT lines of one communicator on one rank."""
    comm = incident.program.comms[comm_name]
    who = incident.identity[rank]
    ptr = f"0x{incident.pointers[(rank, comm_name)]:x}"
    comm_rank, size = comm.ranks.index(rank), len(comm.ranks)
    hosts = {incident.identity[r].host for r in comm.ranks}
    local = sum(1 for r in comm.ranks if incident.identity[r].host == who.host)
    local_rank = sum(1 for r in comm.ranks[:comm_rank] if incident.identity[r].host == who.host)
    config = (f"ncclCommInitRankConfig comm {ptr} rank {comm_rank} nranks {size} cudaDev {who.dev} "
              f"nvmlDev {who.dev} busId {who.bus} commId {comm.comm_id}")
    lines = [
        f"{config} - Init START",
        f"comm {ptr} rank {comm_rank} nRanks {size} nNodes {len(hosts) if who.host != 'vm' else size} "
        f"localRanks {local if who.host != 'vm' else 1} localRank {local_rank if who.host != 'vm' else 0} MNNVL 0",
    ]
    if comm_rank == 0:
        ring = " ".join(str(i) for i in range(min(size, 16)))
        lines += [f"Channel 00/02 : {ring}", f"Channel 01/02 : {ring}"]
    lines += [
        "P2P Chunksize set to 131072",
        "CC Off, workFifoBytes 1048576",
        f"{config} - Init COMPLETE",
        f"Init timings - ncclCommInitRankConfig: rank {comm_rank} nranks {size} total 0.71 (kernels 0.68, alloc 0.00, "
        "bootstrap 0.01, allgathers 0.00, topo 0.01, graphs 0.00, connections 0.00, rest 0.00)",
    ]
    return [prefix(who) + line for line in lines]


def _teardown(incident: Incident, rank: int, comms: set[str]) -> list[str]:
    """Destroy lines for a job that ended cleanly; Abort lines for a rank that finished while others hung."""
    run = incident.run
    if not run.finished[rank]:
        return []  # still stuck when the launcher killed it
    who = incident.identity[rank]
    out = []
    for name in sorted(comms):
        comm = incident.program.comms[name]
        ptr = f"0x{incident.pointers[(rank, name)]:x}"
        where = f"comm {ptr} rank {comm.ranks.index(rank)}"
        size = len(comm.ranks)
        if run.hung:
            thread = prefix(who, who.pid + 130)
            out += [f"{thread}{where} nRanks {size} cudaDev {who.dev} busId {who.bus} - Abort START",
                    f"{thread}{where} nranks {size} cudaDev {who.dev} busId {who.bus} - Abort COMPLETE"]
        else:
            out.append(f"{prefix(who)}{where} nranks {size} cudaDev {who.dev} busId {who.bus} - Destroy COMPLETE")
    return out


def file_name(incident: Incident, rank: int) -> str:
    """`nccl.<host>.<pid>.log` (NCCL_DEBUG_FILE=nccl.%h.%p.log)."""
    who = incident.identity[rank]
    return f"nccl.{who.host}.{who.pid}.log"
