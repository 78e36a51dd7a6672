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
'2' is ranks (4, 5, 6, 7) and group '5' is (2, 6) with the same first collectives: global rank 6. A comm is one
group for all its processes: one its peers' logs rule out is none of the process's (`_refuted_by_peers`). Processes no
dump matches are stand-ins (a caveat says so), numbered by host and pid: into the ranks other files were written by,
or the ranks left over, where they are as many; else past every rank the other evidence names.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import polars as pl

from ..model import Evidence
from .notes import LogRanksAreCommRanks, Note

HEAD = 8  # first collectives of a stream compared when matching a process to a dump


def resolve_global_ranks(evidence: list[Evidence]) -> tuple[list[Evidence], list[Note], dict[int, str]]:
    """`evidence` with NCCL log ranks made global where two processes claim one rank; the note that says so; and
    the ranks that are stand-ins, each with its process (`host:pid`)."""
    # Processes that claim ranks in their communicators (a log's INIT lines), not a recorder's own rank.
    logs = [item for item in evidence if _claims_comm_ranks(item)]
    claims: dict[int, set[tuple]] = {}
    for item in logs:
        for identity in item.identities:
            if identity.rank is not None and identity.pid is not None:
                claims.setdefault(identity.rank, set()).add((identity.host, identity.pid))
    if not logs:
        return evidence, [], {}
    widest = max((i.comm_size or 0 for item in logs for i in item.identities), default=0)
    if not any(len(processes) > 1 for processes in claims.values()) and _job_size(evidence) <= widest:
        return evidence, [], {}
    processes = sorted({p for ps in claims.values() for p in ps}, key=lambda p: (str(p[0]), p[1]))
    dumps = _dump_groups(evidence)
    wanted = sorted({seq for groups in dumps.values() for _, _, head in groups for seq, _ in head})
    mapping: dict[tuple, int] = {}
    matched: dict[tuple, set[int]] = {}  # process -> the dumps it fits (several where its log shows too little)
    # (every process of the logs, those no rank claims too: a comm's peers are read for `_refuted_by_peers`)
    comms_of = {process: _process_comms(logs, process, wanted) for process in _logged_processes(logs)}
    refuted = _refuted_by_peers(comms_of, dumps)
    for process in processes:
        comms = comms_of.get(process) or _process_comms(logs, process, wanted)
        matches = [rank for rank, groups in dumps.items() if _matches(comms, groups, refuted)]
        matched[process] = set(matches)
        # A dump is the process's only where some collective both recorded shows it: a fit on sizes and comm
        # ranks alone fits a rank that left no dump as well (it is still one the process may be, `_by_layout`).
        if len(matches) == 1 and matches[0] not in mapping.values() and _shown(comms, dumps[matches[0]], refuted):
            mapping[process] = matches[0]
    while True:
        # each process placed may place others, through a communicator they share or the ranks left
        found = _by_members(logs, evidence, processes, mapping)
        found.update(_by_layout(logs, evidence, processes, {**mapping, **found}, set(dumps), matched))
        if not found:
            break
        mapping.update(found)
    unmatched = [p for p in processes if p not in mapping]
    job = max(_job_size(evidence), len(mapping) + len(unmatched))  # every process is a rank of the job
    free = sorted(set(range(job)) - set(mapping.values()))
    if len(unmatched) == 1 and len(free) == 1:
        mapping[unmatched.pop()] = free[0]  # the one process left over is the one rank left over
    # (a dump no log process matched is most likely of a process that wrote no log: not one of these)
    free = [r for r in free if r not in dumps and r not in mapping.values()]
    written = sorted(_written_ranks(evidence) - set(mapping.values()) - set(dumps))
    if unmatched and len(unmatched) in (len(written), len(free)):
        # As many processes as ranks other files were written by, or as ranks left: numbered into them by host,
        # then pid (the order launchers start local ranks in), so the other evidence's records of those ranks meet
        # them; still stand-ins, as the caveat says.
        stand_ins = dict(zip(unmatched, written if len(unmatched) == len(written) else free))
    else:
        # Else past every rank other evidence names (journals, traces, PyTorch logs): a stand-in that took a
        # number of theirs would be read as that rank's process.
        next_rank = max([*mapping.values(), *dumps, job - 1]) + 1
        stand_ins = {p: next_rank + i for i, p in enumerate(unmatched)}
    mapping.update(stand_ins)
    renumber = {id(item) for item in logs}
    changed = [_renumbered(item, mapping) if id(item) in renumber else item for item in evidence]
    note = LogRanksAreCommRanks(given=len(mapping) - len(stand_ins),
                                stand_ins=tuple((r, host, pid) for (host, pid), r in stand_ins.items()))
    return changed, [note], {rank: f"{host}:{pid}" for (host, pid), rank in stand_ins.items()}


def dump_fits(evidence: list[Evidence]) -> dict[tuple, set[int]]:
    """Each process of the NCCL logs -> the Flight Recorder ranks whose dump it may be, where both recorded a
    collective of one of its communicators and agree on all of them (`_matches`); a fit on sizes and comm ranks
    alone is left out (every 2-rank comm fits a dump's 2-rank group at its comm rank)."""
    dumps = _dump_groups(evidence)
    if not dumps:
        return {}
    logs = [item for item in evidence if _claims_comm_ranks(item)]
    wanted = sorted({seq for groups in dumps.values() for _, _, head in groups for seq, _ in head})
    comms_of = {process: _process_comms(logs, process, wanted) for process in _logged_processes(logs)}
    refuted = _refuted_by_peers(comms_of, dumps)
    found: dict[tuple, set[int]] = {}
    for process, comms in comms_of.items():
        for rank, groups in dumps.items():
            if _shown(comms, groups, refuted) and _matches(comms, groups, refuted):
                found.setdefault(process, set()).add(rank)
    return found


def member_fits(evidence: list[Evidence]) -> dict[tuple, set[int]]:
    """Each process of the NCCL logs -> the global ranks that left no dump it may be, as a member of the groups the
    dumps list: each of its communicators allows the rank at its comm rank in every listed group of its size whose
    records (in any member's dump) agree with its log, and the process may be a rank every such communicator
    allows. At least one collective both recorded must tie them (as in `_shown`): sizes and comm ranks alone fit
    any job of that layout. Worked example: TP groups (0..3), (4..7) and DP groups (0, 4) .. (3, 7), dumps of ranks
    0..4 and 7; the process at comm rank 1 of a 4-rank comm whose AllReduces are those of (0..3) and (4..7) and at
    comm rank 1 of a 2-rank comm whose AllReduce x1 is that of every DP group may be rank 5 alone (1 left a dump).
    A communicator that allows only dumped ranks, or that no listed group agrees with, says nothing: its group may
    be listed by no dump (a dump lists its own rank's groups) and look like one that is, or its ranks may have
    parted before the dumps' first collectives end."""
    dumps = _dump_groups(evidence)
    if not dumps:
        return {}
    logs = [item for item in evidence if _claims_comm_ranks(item)]
    groups = [(g_ranks, head) for listed in dumps.values() for g_ranks, _, head in listed]
    wanted = sorted({seq for _, head in groups for seq, _ in head})
    processes = {(i.host, i.pid) for item in logs for i in item.identities if i.pid is not None}
    found: dict[tuple, set[int]] = {}
    for process in processes:
        allowed: set[int] | None = None
        shown = False
        for size, comm_rank, ops in _process_comms(logs, process, wanted).values():
            fitting = [(g_ranks[comm_rank], head) for g_ranks, head in groups
                       if len(g_ranks) == size and comm_rank < size and g_ranks[comm_rank] not in dumps
                       and _agree(ops, head)]
            if not fitting:
                continue
            here = {rank for rank, _ in fitting}
            allowed = here if allowed is None else allowed & here
            shown = shown or any(seq in ops for _, head in fitting for seq, _ in head)
        if shown and allowed:
            found[process] = allowed
    return found


def _claims_comm_ranks(item: Evidence) -> bool:
    """A log whose collectives are its own records and whose processes name their rank in each communicator."""
    own = item.facts is None or item.facts.records == "collectives"
    return bool(item.identities) and own and not _recorder(item)


def _recorder(item: Evidence) -> bool:
    """A dump of one process (Flight Recorder), whose rank is the job's."""
    return item.facts is not None and item.facts.recorder


def _written_ranks(evidence: list[Evidence]) -> set[int]:
    """The global ranks that wrote the other evidence's files (journals, traces, PyTorch logs, dumps)."""
    return {r for item in evidence if not _claims_comm_ranks(item) for r in item.ranks}


def _job_size(evidence: list[Evidence]) -> int:
    """How many ranks other evidence shows the job has: its widest communicator, and its highest global rank."""
    size = 0
    for item in evidence:
        if _claims_comm_ranks(item):
            continue
        for info in item.comm_infos:
            size = max(size, info.size or 0, len(info.ranks), max(info.ranks, default=-1) + 1)
        size = max(size, max(item.ranks, default=-1) + 1)
    return size


def _dump_groups(evidence: list[Evidence]) -> dict[int, list[tuple[tuple[int, ...], int, tuple]]]:
    """Flight Recorder rank -> per process group: (its global ranks, this rank's comm rank, its first collectives
    on record as (seq, (op, count)): a ring that wrapped starts past seq 1)."""
    found: dict[int, list[tuple[tuple[int, ...], int, tuple]]] = {}
    for item in evidence:
        if not _recorder(item) or not item.ranks:
            continue
        rank = item.ranks[0]
        rows = item.collectives
        for info in item.comm_infos:
            if not info.ranks or rank not in info.ranks:
                continue
            head = rows.filter(pl.col("comm") == info.comm).sort("seq").head(HEAD)
            found.setdefault(rank, []).append((tuple(info.ranks), info.ranks.index(rank), tuple(
                (seq, (op, count)) for seq, op, count in head.select("seq", "op", "count").iter_rows())))
    return found


def _process_comms(logs: list[Evidence], process: tuple, seqs: list[int]) -> dict[str, tuple[int, int, dict]]:
    """One process's communicators in the logs: comm -> (size, comm rank, {seq: (op, count)} at the `seqs` asked
    for)."""
    found = {}
    host, pid = process
    for item in logs:
        mine = [i for i in item.identities if (i.host, i.pid) == process and i.comm_size and i.comm_size > 1]
        if not mine:
            continue  # (a log of other processes: its rows are not filtered at all)
        rows = item.collectives.filter((pl.col("host") == host) & (pl.col("pid") == pid)
                                       & pl.col("seq").is_in(seqs))
        for identity in mine:
            recorded = rows.filter(pl.col("comm") == identity.comm).select("seq", "op", "count")
            ops = {seq: (op, count) for seq, op, count in recorded.iter_rows()}
            if identity.comm in found:
                ops = {**found[identity.comm][2], **ops}
            found[identity.comm] = (identity.comm_size, identity.comm_rank, ops)
    return found


def _shown(comms: dict[str, tuple[int, int, dict]], groups: list[tuple[tuple[int, ...], int, tuple]],
           refuted: frozenset[tuple[str, tuple[int, ...]]] = frozenset()) -> bool:
    """Whether a collective both recorded ties one of the process's communicators to one of the dump's groups:
    same size and comm rank, a seq both hold, and the same collectives at every seq both hold. Worked example:
    comm rank 1 of a 2-rank comm whose log holds seqs 1..13 fits rank 2's group (0, 2), at its comm rank 1, whose
    ring kept none of its collectives: that fit shows nothing (rank 1, of group (0, 1), with no dump, fits alike)."""
    return any(size == len(g_ranks) and comm_rank == g_rank and _agree(ops, g_head)
               and any(seq in ops for seq, _ in g_head) and (comm, g_ranks) not in refuted
               for comm, (size, comm_rank, ops) in comms.items() for g_ranks, g_rank, g_head in groups)


def _agree(ops: dict, head: tuple) -> bool:
    """The same collectives at every seq both recorded (none in common says nothing against)."""
    return all(ops.get(seq, op) == op for seq, op in head)


def _matches(comms: dict[str, tuple[int, int, dict]], groups: list[tuple[tuple[int, ...], int, tuple]],
             refuted: frozenset[tuple[str, tuple[int, ...]]] = frozenset()) -> bool:
    """Every communicator of the process is one of the dump's groups, each a group of its own (two communicators
    of one process are two process groups): same size, same comm rank, and the same collectives at every seq both
    recorded, and not a group its peers in the logs rule out (`refuted`, `_refuted_by_peers`). Worked example: a
    process that is comm rank 0 of two 2-rank comms is not the dump whose only group with it at comm rank 0 is
    one."""
    if not comms:
        return False
    fits = [{index for index, (g_ranks, g_rank, g_head) in enumerate(groups)
             if size == len(g_ranks) and comm_rank == g_rank and _agree(ops, g_head)
             and (comm, g_ranks) not in refuted}
            for comm, (size, comm_rank, ops) in comms.items()]
    return distinct_choice(fits)


def _logged_processes(logs: list[Evidence]) -> set[tuple]:
    """Every (host, pid) the logs name."""
    return {(i.host, i.pid) for item in logs for i in item.identities if i.pid is not None}


def _refuted_by_peers(comms_of: dict[tuple, dict[str, tuple[int, int, dict]]],
                      dumps: dict[int, list[tuple[tuple[int, ...], int, tuple]]]
                      ) -> frozenset[tuple[str, tuple[int, ...]]]:
    """The (communicator, dump group) pairs the comm's other processes in the logs rule out (`comms_of`: each process's
    communicators, `_process_comms`): a communicator is one process group, so each of its processes is the group's
    rank at its comm rank, and one whose log fits no such rank's dump (`_matches`) says the comm is another group.
    Groups of one role run one program, so a log that shows one comm fits each of them alike; its peers' other comms
    tell them apart. Worked example: TP (0, 1), (2, 3) and DP (0, 2), (1, 3), dumps of ranks 0 and 1 only; rank 2's
    log, cut after its TP comm's first collective, fits rank 0's dump at comm rank 0 of (0, 1). Its TP peer is comm
    rank 1 there, and that process is comm rank 1 of a DP comm too, where rank 1's dump has it at comm rank 0 of (1,
    3): the peer is not rank 1, so the comm is not (0, 1), and the cut log is not rank 0's."""
    listed = {g_ranks for groups in dumps.values() for g_ranks, _, _ in groups}
    found = set()
    for comms in comms_of.values():
        for comm, (size, comm_rank, _) in comms.items():
            for g_ranks in listed:
                if len(g_ranks) != size or comm_rank >= size:
                    continue
                rank = g_ranks[comm_rank]
                if rank in dumps and not _matches(comms, dumps[rank]):
                    found.add((comm, g_ranks))
    return frozenset(found)


def distinct_choice(options: list[set[int]]) -> bool:
    """Whether each entry can take one of its options, no two the same (a bipartite matching, by augmenting
    paths: a process has a handful of communicators)."""
    taken: dict[int, int] = {}  # option -> the entry holding it

    def place(entry: int, seen: set[int]) -> bool:
        for option in options[entry] - seen:
            seen.add(option)
            if option not in taken or place(taken[option], seen):
                taken[option] = entry
                return True
        return False

    return all(place(entry, set()) for entry in range(len(options)))


def _by_members(logs: list[Evidence], evidence: list[Evidence], processes: list[tuple],
                mapping: dict[tuple, int]) -> dict[tuple, int]:
    """Processes no dump matched, placed through a communicator a placed process shares with them: the dumps list
    the groups' global ranks, so the one group of the comm's size with the placed process's rank at its comm rank
    is that comm's, and a comm rank in it names a global rank. Worked example: the process of comm rank 0 in
    0xbd55.. has no dump; the process matched to rank 5 is comm rank 1 there, and rank 5's dump lists the group
    (4, 5, 6, 7): comm rank 0 is rank 4."""
    groups: dict[int, list[tuple[int, ...]]] = {}
    for item in evidence:
        if _recorder(item):
            for info in item.comm_infos:
                for rank in set(info.ranks or ()):
                    groups.setdefault(rank, []).append(tuple(info.ranks))
    identities = [i for item in logs for i in item.identities if i.comm_size and i.comm_rank is not None]
    # Each placed process allows the groups that hold its rank at its comm rank; the comm's group is one every
    # placed member allows (rank 27 at comm rank 3 of a group of 8 fits both (24..31) and (3, 11, .., 59), and
    # its peers in the comm say which).
    # A placed rank's own dump also holds its first collectives in each group: a group whose records there differ
    # from the comm's in the process's log is another communicator (rank 3 at comm rank 1 of a 2-rank comm fits
    # both (2, 3) and (1, 3); the comm's AllReduce x2048 at seq 1 is (2, 3)'s, if (1, 3)'s is AllReduce x1).
    heads = {(rank, g_ranks): head for rank, dumped in _dump_groups(evidence).items()
             for g_ranks, _, head in dumped}
    wanted = sorted({seq for head in heads.values() for seq, _ in head})
    ops = {(process, comm): comm_ops for process in mapping
           for comm, (_, _, comm_ops) in _process_comms(logs, process, wanted).items()}
    members: dict[str, set[tuple[int, ...]]] = {}
    own: dict[tuple, set[str]] = {}  # placed process -> its comms some listed group fits
    for i in identities:
        rank = mapping.get((i.host, i.pid))
        if rank is not None:
            fits = {g for g in groups.get(rank, []) if len(g) == i.comm_size and 0 <= i.comm_rank < len(g)
                    and g[i.comm_rank] == rank
                    and _agree(ops.get(((i.host, i.pid), i.comm), {}), heads.get((rank, g), ()))}
            if fits:  # (one that no listed group holds there says nothing of which group it is)
                members[i.comm] = members[i.comm] & fits if i.comm in members else fits
                own.setdefault((i.host, i.pid), set()).add(i.comm)
    _distinct_groups(members, own)
    found: dict[tuple, int] = {}
    taken = set(mapping.values())
    for process in processes:
        if process in mapping:
            continue
        named = {next(iter(members[i.comm]))[i.comm_rank] for i in identities
                 if (i.host, i.pid) == process and len(members.get(i.comm, ())) == 1}
        if len(named) == 1 and not (named & taken):
            found[process] = named.pop()
            taken.add(found[process])
    return found


def _distinct_groups(members: dict[str, set[tuple[int, ...]]], own: dict[tuple, set[str]]) -> None:
    """Narrows `members` in place: two comms of one process are two of its groups (as in `_matches`), so a group
    left alone for one of a placed process's comms is none of its others'. Worked example: rank 0 at comm rank 0 of
    0xtp and 0xdp fits its groups (0, 1) and (0, 2) in both; 0xtp's records at seq 10 are (0, 1)'s alone, and
    0xdp's log holds no seq that tells them apart: 0xdp is (0, 2)."""
    changed = True
    while changed:
        changed = False
        for comms in own.values():
            pinned = {comm: next(iter(members[comm])) for comm in comms if len(members[comm]) == 1}
            for comm in comms:
                others = {group for other, group in pinned.items() if other != comm}
                left = members[comm] - others
                if left and left != members[comm]:  # (none left: the records disagree; leave it as it is)
                    members[comm] = left
                    changed = True


def _by_layout(logs: list[Evidence], evidence: list[Evidence], processes: list[tuple], mapping: dict[tuple, int],
               dumped: set[int], matched: dict[tuple, set[int]] | None = None) -> dict[tuple, int]:
    """Processes still unplaced, placed by the job's group layout alone: every dump's `pg_config` lists every
    group's global ranks, so each of a process's communicators (its size, its comm rank) allows the global ranks
    at that position of a group of that size, and one rank left over them all is the process's. Worked example:
    TP groups (0, 1, 2, 3), (4, 5, 6, 7) and DP groups (0, 4), (1, 5), (2, 6), (3, 7); comm rank 2 of a 4-rank
    comm allows ranks 2 and 6, comm rank 1 of a 2-rank comm allows 4, 5, 6 and 7: rank 6."""
    layouts = {tuple(info.ranks) for item in evidence if _recorder(item) for info in item.comm_infos
               if len(info.ranks) > 1}
    job = set(range(max(_job_size(evidence), len(processes))))  # (every process is a rank of the job)
    logged = Counter(size for _, size in {(i.comm, i.comm_size) for item in logs for i in item.identities
                                          if i.comm and i.comm_size})
    listed = Counter(len(g) for g in layouts)
    # Only sizes whose groups, as the dumps list them, cover the whole job, and are as many as the logs show comms
    # of that size or more: a group no dump lists (a dump lists its own rank's groups) would otherwise leave its
    # true ranks out and a wrong one over. Worked example: rank 0's dump lists (0, 1) and (0, 2), the logs show four
    # 2-rank comms of four processes; (1, 3) and (2, 3) are listed nowhere, and rank 3, comm rank 1 of both, would
    # be read as rank 2.
    complete = {size for size in listed
                if {r for g in layouts if len(g) == size for r in g} >= job and logged[size] <= listed[size]}
    if not layouts or not job:
        return {}
    taken = set(mapping.values())
    found: dict[tuple, int] = {}
    for process in processes:
        if process in mapping:
            continue
        places = [(i.comm_size, i.comm_rank) for item in logs for i in item.identities
                  if (i.host, i.pid) == process and i.comm_size and i.comm_size > 1 and i.comm_rank is not None]
        places = [(size, comm_rank) for size, comm_rank in places if size in complete]
        if not places:
            continue
        allowed: set[int] | None = None
        for size, comm_rank in places:
            here = {group[comm_rank] for group in layouts if len(group) == size and comm_rank < size}
            allowed = here if allowed is None else allowed & here
        # a process with a dump of its own would have matched it (a group no dump lists can leave a dumped
        # rank the only one allowed); one whose log shows too little to tell several dumps apart may be any of them
        allowed = (allowed or set()) - taken - (dumped - (matched or {}).get(process, set()))
        if len(allowed) == 1:
            found[process] = allowed.pop()
            taken.add(found[process])
    return found


def _renumbered(item: Evidence, mapping: dict[tuple, int]) -> Evidence:
    """The log's rows, identities and watchdog events (its aborts and WARN lines) with each process's global
    rank."""
    keys = pl.DataFrame({"host": [h for h, _ in mapping], "pid": [p for _, p in mapping],
                         "_rank": list(mapping.values())}, schema={"host": pl.String, "pid": pl.Int64,
                                                                   "_rank": pl.Int64})
    rows = item.collectives.join(keys, on=["host", "pid"], how="left", maintain_order="left").with_columns(
        pl.coalesce("_rank", "rank").alias("rank")).drop("_rank")
    identities = [replace(i, rank=mapping.get((i.host, i.pid), i.rank)) for i in item.identities]
    watchdog = [replace(w, rank=mapping.get((w.host, w.pid), w.rank)) for w in item.watchdog]
    return replace(item, collectives=rows, identities=identities, watchdog=watchdog)
