"""NCCL RAS `STATUS` replies (`ras_status_q<N>.txt`), the shape of tests/fixtures/real/nccl-2.28.9 (2.28.9: per
collective type counts of launched collectives per rank).

The communicators table groups comms of one shape and status; a comm whose ranks launched different numbers of
some collective type gets a MISMATCH block in Warnings: the largest group of ranks as `N ranks have launched up
to operation K` (or `have not launched any operations`), every other rank on its own line with its GPU, process
and node. Ranks are comm ranks. A query taken while the job is stuck gives the same reply every time (q0 = q1).
"""

from __future__ import annotations

from collections import Counter

from .incident import Incident
from .nccl_log import NCCL_OP


def _node(incident: Incident, rank: int) -> str:
    host = incident.identity[rank].host
    return "192.0.2.2" if host == "vm" else f"10.1.{int(host[4:]) // 250}.{int(host[4:]) % 250 + 2}"


def type_counts(incident: Incident, comm: str) -> dict[str, dict[int, int]]:
    """collective type -> comm rank -> collectives of that type launched."""
    ranks = incident.program.comms[comm].ranks
    per_rank = [Counter(NCCL_OP[x.op.kind] for x in incident.run.comm_launches(r, comm)) for r in ranks]
    kinds = sorted({kind for counts in per_rank for kind in counts})
    return {kind: {i: counts.get(kind, 0) for i, counts in enumerate(per_rank)} for kind in kinds}


def _mismatches(incident: Incident, comm: str) -> list[str]:
    """The MISMATCH lines of one comm (empty when its counts agree)."""
    ranks = incident.program.comms[comm].ranks
    lines = []
    for kind, counts in type_counts(incident, comm).items():
        if len(set(counts.values())) < 2:
            continue
        groups: dict[int, list[int]] = {}
        for i, n in counts.items():
            groups.setdefault(n, []).append(i)
        largest = max(groups, key=lambda n: (len(groups[n]), -n))
        lines.append(f"  Communicator ranks have different {kind} operation counts")
        # the largest group first (summed up when it has several ranks), then every other rank on its own line
        order = [largest] + sorted((n for n in groups if n != largest), key=lambda n: groups[n][0])
        for n in order:
            did = f"launched up to operation {n}" if n else "not launched any operations"
            if n == largest and len(groups[n]) > 1:
                lines.append(f"  {len(groups[n])} ranks have {did}")
                continue
            for i in groups[n]:
                who = incident.identity[ranks[i]]
                lines.append(f"  Rank {i} has {did} -- GPU {who.dev} managed by process {who.pid} on node "
                             f"{_node(incident, ranks[i])}")
        lines.append("")
    return lines


def ras_status_text(incident: Incident) -> str:
    """One STATUS reply."""
    program = incident.program
    nodes = {_node(incident, r) for r in program.ranks}
    per_node = max(Counter(_node(incident, r) for r in program.ranks).values())
    out = [
        "NCCL version 2.28.9 compiled with CUDA 13.0",
        "CUDA runtime version 13000, driver version 13000",
        "",
        "Job summary",
        "===========",
        "",
        "  Nodes  Processes         GPUs  Processes     GPUs",
        "(total)   per node  per process    (total)  (total)",
        f"{len(nodes):>7} {per_node:>10} {1:>12} {program.world:>10} {program.world:>8}",
        "",
        "Communicators... (0.000s)",
        "=============",
        "",
        "Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors",
        "    #  in group  per comm  per node  per comm  in group",
    ]
    groups: dict[tuple, list[str]] = {}
    warnings: dict[str, list[str]] = {}
    for name, comm in program.comms.items():
        mismatch = _mismatches(incident, name)
        if mismatch:
            warnings[name] = mismatch
        comm_nodes = Counter(_node(incident, r) for r in comm.ranks)
        shape = (len(comm_nodes), max(comm_nodes.values()), len(comm.ranks), bool(mismatch), name if mismatch else "")
        groups.setdefault(shape, []).append(name)
    blocks = []
    for g, (shape, names) in enumerate(sorted(groups.items(), key=lambda x: (-x[0][2], not x[0][3], x[0][4]))):
        n_nodes, per, size, bad, _ = shape
        status = "MISMATCH" if bad else "OK"
        out.append(f"{g:>5} {len(names):>9} {n_nodes:>9} {per:>9} {size:>9} {size * len(names):>9}   RUNNING"
                   f"  {status:>6}")
        for i, name in enumerate(names):
            if name in warnings:
                blocks += [f"#{g}-{i} ({program.comms[name].hash:016x}) MISMATCH"] + warnings[name]
    out += ["", "Errors", "======", "", "Warnings", "========", ""] + blocks
    return "\n".join(out) + "\n"
