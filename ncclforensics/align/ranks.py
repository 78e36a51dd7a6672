"""Global ranks for NCCL debug logs of jobs in which no communicator holds every process.

NCCL never logs a global rank: a log's `rank` is the process's rank in its largest communicator
(sources/nccl_log/). That is the job's rank only where that communicator is the world. Tensor-parallel groups
inside data-parallel ones, with the default group's communicator never created (PyTorch makes it lazily), give
every process a rank in a group of 4: two processes then claim each rank, and their streams would be merged or
thrown out as conflicting.

Where that happens, each process is matched to a Flight Recorder dump: a dump's `pg_config` lists, per process
group, the global ranks in comm-rank order, so a process whose communicators have the sizes, the comm ranks and
the first collectives of one dump's groups is that dump's rank. Worked example: the process in tp comm
0x7e96.. as comm rank 2 (size 4) and in dp comm 0x97c7.. as comm rank 1 (size 2) matches the dump whose group
'2' is ranks (4, 5, 6, 7) and group '5' is (2, 6) with the same first collectives: global rank 6. Processes no
dump matches are numbered after the known ranks, by host and pid, and a caveat says they are stand-ins.
"""

from __future__ import annotations

from dataclasses import replace

import polars as pl

from ..model import Evidence, SourceFormat

HEAD = 8  # first collectives of a stream compared when matching a process to a dump


def resolve_global_ranks(evidence: list[Evidence]) -> tuple[list[Evidence], list[str]]:
    """`evidence` with NCCL log ranks made global where two processes claim one rank; and the caveats."""
    logs = [item for item in evidence if item.format is SourceFormat.NCCL_LOG and item.identities]
    claims: dict[int, set[tuple]] = {}
    for item in logs:
        for identity in item.identities:
            if identity.rank is not None and identity.pid is not None:
                claims.setdefault(identity.rank, set()).add((identity.host, identity.pid))
    if not any(len(processes) > 1 for processes in claims.values()):
        return evidence, []
    processes = sorted({p for ps in claims.values() for p in ps}, key=lambda p: (str(p[0]), p[1]))
    dumps = _dump_groups(evidence)
    mapping: dict[tuple, int] = {}
    for process in processes:
        matches = [rank for rank, groups in dumps.items() if _matches(_process_comms(logs, process), groups)]
        if len(matches) == 1 and matches[0] not in mapping.values():
            mapping[process] = matches[0]
    unmatched = [p for p in processes if p not in mapping]
    next_rank = max([*mapping.values(), *dumps, -1]) + 1
    stand_ins = {p: next_rank + i for i, p in enumerate(unmatched)}
    mapping.update(stand_ins)
    renumber = {id(item) for item in logs}
    changed = [_renumbered(item, mapping) if id(item) in renumber else item for item in evidence]
    caveats = [f"No communicator in the NCCL logs holds every process, so their ranks are comm ranks, not the "
               f"job's: {len(mapping) - len(stand_ins)} process(es) were matched to a Flight Recorder dump's rank"
               + ("; the others are stand-ins numbered by host, then pid ("
                  + ", ".join(f"rank {r} = {h}:{pid}" for (h, pid), r in list(stand_ins.items())[:8])
                  + (", ..." if len(stand_ins) > 8 else "") + ")" if stand_ins else "") + "."]
    return changed, caveats


def _dump_groups(evidence: list[Evidence]) -> dict[int, list[tuple[int, int, tuple]]]:
    """Flight Recorder rank -> per process group: (size, this rank's comm rank, first collectives)."""
    found: dict[int, list[tuple[int, int, tuple]]] = {}
    for item in evidence:
        if item.format is not SourceFormat.FLIGHT_RECORDER or not item.ranks:
            continue
        rank = item.ranks[0]
        rows = item.collectives
        for info in item.comm_infos:
            if not info.ranks or rank not in info.ranks:
                continue
            head = rows.filter(pl.col("comm") == info.comm).sort("seq").head(HEAD)
            found.setdefault(rank, []).append(
                (len(info.ranks), info.ranks.index(rank), tuple(head.select("op", "count").iter_rows())))
    return found


def _process_comms(logs: list[Evidence], process: tuple) -> list[tuple[int, int, tuple]]:
    """One process's communicators in the logs: (size, comm rank, first collectives)."""
    found = []
    host, pid = process
    for item in logs:
        rows = item.collectives.filter((pl.col("host") == host) & (pl.col("pid") == pid))
        for identity in item.identities:
            if (identity.host, identity.pid) != process or identity.comm_size is None or identity.comm_size < 2:
                continue
            head = rows.filter(pl.col("comm") == identity.comm).sort("seq").head(HEAD)
            found.append((identity.comm_size, identity.comm_rank, tuple(head.select("op", "count").iter_rows())))
    return found


def _matches(comms: list[tuple[int, int, tuple]], groups: list[tuple[int, int, tuple]]) -> bool:
    """Every communicator of the process is one of the dump's groups: same size, same comm rank, and the same
    first collectives as far as both recorded them (a group with no collectives yet says nothing against)."""
    if not comms:
        return False
    for size, comm_rank, head in comms:
        if not any(size == g_size and comm_rank == g_rank and head[:len(g_head)] == g_head[:len(head)]
                   for g_size, g_rank, g_head in groups):
            return False
    return True


def _renumbered(item: Evidence, mapping: dict[tuple, int]) -> Evidence:
    """The log's rows and identities with each process's global rank."""
    keys = pl.DataFrame({"host": [h for h, _ in mapping], "pid": [p for _, p in mapping],
                         "_rank": list(mapping.values())}, schema={"host": pl.String, "pid": pl.Int64,
                                                                   "_rank": pl.Int64})
    rows = item.collectives.join(keys, on=["host", "pid"], how="left", maintain_order="left").with_columns(
        pl.coalesce("_rank", "rank").alias("rank")).drop("_rank")
    identities = [replace(i, rank=mapping.get((i.host, i.pid), i.rank)) for i in item.identities]
    return replace(item, collectives=rows, identities=identities)
