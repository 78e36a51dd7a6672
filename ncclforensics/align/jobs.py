"""Which files belong to the job under study: one rule for every kind of file.

A file belongs to the job of the communicators it names (files sharing a communicator hash are one job, and so are
groups of logs that the Flight Recorder dumps place in one job: `_joined_by_dumps`); a file that names none (a gate
journal, a fingerprint trace, a Flight Recorder dump keyed by process-group name, a PyTorch log, a RAS reply older
than NCCL 2.26) belongs to the job of the files beside it in its folder. The job under study is the one with the
most files naming communicators; the others are reported and left out.
"""

from __future__ import annotations

import os

from ..model import Diagnostic, Evidence, Location
from .claims import check_claims
from .notes import JoinedByDumps, Note
from .ranks import distinct_choice, dump_fits, member_fits


def split_jobs(evidence: list[Evidence]) -> tuple[list[Evidence], list[Diagnostic], list[Note]]:
    """Keep the files of one job (see the module's docstring); report each file of another job and leave it out.
    Then check what the kept files claim against each other (align/claims.py). The note says which logs only the
    dumps joined to the job (`_joined_by_dumps`).

    A file naming no communicator stays when its folder holds no file that names one, or holds one of the job
    under study: only a folder whose every communicator-naming file is another job's ties it elsewhere.
    """
    kept, problems, notes = _one_job(evidence)
    kept, claims = check_claims(kept)
    return kept, problems + claims, notes


def _one_job(evidence: list[Evidence]) -> tuple[list[Evidence], list[Diagnostic], list[Note]]:
    named = [(i, set(comms)) for i, e in enumerate(evidence) if (comms := e.comms) and _hash_is_comm_id(e)]
    if len(named) < 2:
        return evidence, [], []
    linked = _linked_by_comms([comms for _, comms in named])
    jobs = _joined_by_dumps(evidence, named, linked) if len(set(linked)) > 1 else linked
    main = _largest(jobs)
    # the logs the dumps alone tie to the job: all but the largest of the groups that share communicators
    anchor = _largest([link for link, job in zip(linked, jobs) if job == main])
    joined = tuple(evidence[position].path for (position, _), link, job in zip(named, linked, jobs)
                   if job == main and link != anchor)
    notes: list[Note] = [JoinedByDumps(joined)] if joined else []
    if len(set(jobs)) < 2:
        return evidence, [], notes
    job_of = {position: job for (position, _), job in zip(named, jobs)}
    main_comms = sorted(set().union(*(comms for (_, comms), job in zip(named, jobs) if job == main)))
    shown_main = f"{', '.join(main_comms[:4])}{', ...' if len(main_comms) > 4 else ''}"
    folder_jobs: dict[str, set[int]] = {}
    folder_comms: dict[str, set[str]] = {}
    for position, comms in named:
        folder_jobs.setdefault(_folder(evidence[position]), set()).add(job_of[position])
        folder_comms.setdefault(_folder(evidence[position]), set()).update(comms)
    kept, problems = [], []
    for position, item in enumerate(evidence):
        if position in job_of:
            if job_of[position] == main:
                kept.append(item)
                continue
            comms = dict(named)[position]
            problems.append(Diagnostic(Location(item.path), (
                f"from a different job: its communicators ({', '.join(sorted(comms))}) share none with the "
                f"other files' ({shown_main}); left out")))
            continue
        beside = folder_jobs.get(_folder(item), set())
        if not beside or main in beside:
            kept.append(item)
            continue
        theirs = sorted(folder_comms[_folder(item)])
        problems.append(Diagnostic(Location(item.path), (
            f"from a different job: it names no communicator, and the files beside it that do name only another "
            f"job's ({', '.join(theirs[:4])}{', ...' if len(theirs) > 4 else ''}); left out")))
    return kept, problems, notes


def _largest(jobs: list[int]) -> int:
    """The job with the most files; a tie goes to the first in input order."""
    sizes: dict[int, int] = {}
    for job in jobs:
        sizes[job] = sizes.get(job, 0) + 1
    return max(sizes, key=lambda job: (sizes[job], -job))


def _linked_by_comms(comm_sets: list[set[str]]) -> list[int]:
    """For each set, the index of the first set it is linked to through shared hashes (a union-find)."""
    parent = list(range(len(comm_sets)))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    owner: dict[str, int] = {}
    for index, comms in enumerate(comm_sets):
        for comm in comms:
            if comm in owner:
                a, b = find(index), find(owner[comm])
                parent[max(a, b)] = min(a, b)  # the root is the job's first file, so input order breaks ties
            else:
                owner[comm] = index
    return [find(index) for index in range(len(comm_sets))]


def _joined_by_dumps(evidence: list[Evidence], named: list[tuple[int, set[str]]], jobs: list[int]) -> list[int]:
    """`jobs`, with the groups of logs that the Flight Recorder dumps place in one job made one.

    Logs of one job can share no communicator: a rank that skipped a group's first collective never creates its
    communicator (PyTorch makes them lazily). Worked example: TP (0, 1), (2, 3) and DP (0, 2), (1, 3), with rank 1
    skipping DP's first collective and rank 2 the other DP's: ranks 0 and 1 share only their TP comm, ranks 2 and
    3 only theirs, two groups of logs. The dumps are one job's (one per global rank, their groups alike), and each dump is one process's:
    a process whose log records the same first collectives as a dump, in communicators of its groups' sizes at
    its comm ranks, may be that dump's; a process of a rank that left no dump may be that rank where the dumps'
    groups place it there, its records agreeing with theirs (`member_fits`: the TP peers of dumped ranks, whose
    own dumps are missing). Where processes of several groups are placed so, each at a rank of its own, and the
    groups' processes are no more than the dumps' job has ranks, they are that job. Two runs of one job side by
    side are two jobs: twice its processes."""
    dumps = [e for e in evidence if e.facts is not None and e.facts.recorder and e.ranks]
    dumped = [e.ranks[0] for e in dumps]
    groups: dict[str, set[tuple[int, ...]]] = {}
    for item in dumps:
        for info in item.comm_infos:
            groups.setdefault(info.comm, set()).add(tuple(info.ranks))
    if len(set(dumped)) < len(dumped) or any(len(listed) > 1 for listed in groups.values()):
        return jobs  # two dumps of one rank, or of one group with other ranks: not one job's
    world = max((rank + 1 for listed in groups.values() for ranks in listed for rank in ranks), default=0)
    processes: dict[int, set[tuple]] = {}
    for (position, _), job in zip(named, jobs):
        processes.setdefault(job, set()).update(
            (i.host, i.pid) for i in evidence[position].identities if i.pid is not None)
    if sum(sorted(len(members) for members in processes.values())[:2]) > world:
        return jobs  # (no two groups fit in the job: the dumps are not read)
    # a process is a dump's rank where it fits one, else a rank with no dump that the dumps' groups place it at
    fits = {**member_fits(evidence), **dump_fits(evidence)}
    placed = sorted(job for job, members in processes.items() if any(fits.get(p) for p in members))
    if len(placed) < 2:
        return jobs
    members = set().union(*(processes[job] for job in placed))
    if len(members) > world or not distinct_choice([fits[p] for p in members if fits.get(p)]):
        return jobs
    return [placed[0] if job in placed else job for job in jobs]


def _folder(item: Evidence) -> str:
    return os.path.dirname(os.path.normpath(item.path))


def _hash_is_comm_id(item: Evidence) -> bool:
    """Whether the file's hashes are commIds. RAS replies name communicators by commId only from NCCL 2.26 on
    (FormatFacts.comm_ids_since); before, RAS hashes and the logs' commIds differ, so an older (or unversioned)
    RAS reply cannot be told to belong to another job."""
    since = item.facts.comm_ids_since if item.facts is not None else None
    if since is None:
        return True
    try:
        major, minor = (int(x) for x in (item.version or "").split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= since
