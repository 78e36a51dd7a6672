"""Flight Recorder dumps (`fr_rank<R>`, TORCH_FR_DUMP_TEMP_FILE=fr_rank): a pickle of plain dicts and lists,
protocol 2, schema 2.10, as ProcessGroupNCCL writes it (the real `fr_rank<R>` files of tests/fixtures/real).

`pg_config` is keyed by process-group name (the rank's own groups), `pg_status` by PG id, each entry's
`process_group` is (name, desc); `collective_seq_id` and `op_id` count per group; `record_id` counts over all
groups. A ring of N entries keeps the last N (TORCH_FR_BUFFER_SIZE).
"""

from __future__ import annotations

import pickle

from .incident import TIMEOUT_MS, Incident
from .nccl_rules import COMPLETED, SCHEDULED, STARTED
from .program import DTYPES

PROFILING_NAME = {"all_reduce": "nccl:all_reduce", "all_gather": "nccl:_all_gather_base"}


def fr_dump(incident: Incident, rank: int, ring: int | None = None) -> dict:
    """One rank's dump; `ring` keeps only the last `ring` entries."""
    program = incident.program
    launches = incident.run.launches[rank]
    dump_ns = incident.hang_ns() + (TIMEOUT_MS + 6000) * 1_000_000
    thread_id = str(139664811872576 + rank * 8192)
    entries = []
    for launch in launches:
        op = launch.op
        comm = program.comms[op.comm]
        size = len(comm.ranks)
        created = incident.enqueue_ns(launch)
        dtype = DTYPES[op.dtype][1]
        entry = {
            "frames": [{"name": n, "filename": f, "line": line} for n, f, line in op.frames],
            "record_id": launch.index, "pg_id": comm.pg_id, "process_group": (comm.name, comm.desc),
            "thread_name": "python3", "thread_id": thread_id, "collective_seq_id": launch.seq, "p2p_seq_id": 0,
            "op_id": launch.seq, "profiling_name": PROFILING_NAME[op.kind], "time_created_ns": created,
        }
        if launch.state == COMPLETED:
            entry["duration_ms"] = 0.9 + (launch.index * 7919 % 1000) / 1000.0
        entry.update({
            "input_sizes": [[op.count]], "input_dtypes": [dtype], "output_sizes": [[op.out_count(size)]],
            "output_dtypes": [dtype], "state": launch.state,
            "time_discovered_started_ns": None if launch.state == SCHEDULED else (
                created + 300_000 if launch.state == COMPLETED else dump_ns),
            "time_discovered_completed_ns": created + 1_100_000 if launch.state == COMPLETED else None,
            "retired": launch.state == COMPLETED, "timeout_ms": TIMEOUT_MS, "is_p2p": False,
        })
        entries.append(entry)
    if ring is not None:
        entries = entries[-ring:] if ring > 0 else []
    pg_config = {}
    pg_status = {}
    for name, comm in program.comms.items():
        if rank not in comm.ranks:
            continue
        pg_config[name] = {"name": name, "desc": comm.desc, "ranks": str(list(comm.ranks))}
        mine = [x for x in launches if x.op.comm == name]
        started = [x.seq for x in mine if x.state in (STARTED, COMPLETED)]
        pg_status[str(comm.pg_id)] = {
            "last_enqueued_collective": len(mine),
            "last_started_collective": max(started, default=0),
            "last_completed_collective": incident.truth.completed[name][rank],
        }
    return {"version": "2.10", "pg_config": pg_config, "comm_lib_version": "2.28.9", "pg_status": pg_status,
            "entries": entries}


def fr_bytes(incident: Incident, rank: int, ring: int | None = None) -> bytes:
    """The pickle ProcessGroupNCCL writes (protocol 2)."""
    return pickle.dumps(fr_dump(incident, rank, ring), protocol=2)
