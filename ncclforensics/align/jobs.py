"""Which files belong to the job under study: those linked by the communicator hashes they share."""

from __future__ import annotations

from ..model import Diagnostic, Evidence, Location, SourceFormat


def split_jobs(evidence: list[Evidence]) -> tuple[list[Evidence], list[Diagnostic]]:
    """Keep the files of one job: those linked by shared communicator hashes. Files whose communicators
    share nothing with the largest such group come from another job; they are reported and left out.
    Files that name no hash (journals, fingerprints, dumps keyed by process-group name) stay."""
    named = [(i, set(comms)) for i, e in enumerate(evidence) if (comms := e.comms) and _hash_is_comm_id(e)]
    if len(named) < 2:
        return evidence, []
    parent = list(range(len(named)))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    owner: dict[str, int] = {}
    for index, (_, comms) in enumerate(named):
        for comm in comms:
            if comm in owner:
                parent[find(index)] = find(owner[comm])
            else:
                owner[comm] = index
    groups: dict[int, list[int]] = {}
    for index in range(len(named)):
        groups.setdefault(find(index), []).append(index)
    if len(groups) < 2:
        return evidence, []
    main = max(groups.values(), key=len)
    main_comms = sorted(set().union(*(named[i][1] for i in main)))
    dropped, problems = set(), []
    for members in groups.values():
        if members is main:
            continue
        for index in members:
            position, comms = named[index]
            dropped.add(position)
            problems.append(Diagnostic(
                Location(evidence[position].path),
                f"from a different job: its communicators ({', '.join(sorted(comms))}) share none with the "
                f"other files' ({', '.join(main_comms[:4])}{', ...' if len(main_comms) > 4 else ''}); left out",
            ))
    return [e for i, e in enumerate(evidence) if i not in dropped], problems


def _hash_is_comm_id(item: Evidence) -> bool:
    """RAS names a communicator by its commId hash only from NCCL 2.26 on; before, RAS hashes and the logs'
    commIds differ, so an older (or unversioned) RAS reply cannot be told to belong to another job."""
    if item.format not in (SourceFormat.RAS_TEXT, SourceFormat.RAS_JSON, SourceFormat.RAS_MONITOR):
        return True
    try:
        major, minor = (int(x) for x in (item.version or "").split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= (2, 26)
