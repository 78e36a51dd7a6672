"""What files claim against each other: a rank the job cannot have, one rank's gate decisions in two files, RAS
counts that go backwards or replies that no order can reconcile. Each is a warning at file:line; none changes what
is read, except that a gate decision two files give for one rank and step is taken from the first file (said so).
"""

from __future__ import annotations

import dataclasses
from itertools import combinations

from ..model import Diagnostic, Evidence, RasComm, RasSnapshot, Severity, SourceFormat
from .ras import RasHistory

MAX_REPLY_WARNINGS = 5  # per communicator: more would bury the rest
MAX_COMM_SIZE = 1 << 20  # a RAS communicator claiming more ranks is not compared across replies


def check_claims(evidence: list[Evidence]) -> tuple[list[Evidence], list[Diagnostic]]:
    """Every check of this module over the files of one job."""
    kept, problems = check_rank_claims(evidence)
    return kept, problems + check_ras_counts(kept)


def check_rank_claims(evidence: list[Evidence]) -> tuple[list[Evidence], list[Diagnostic]]:
    """Warnings, at file:line, for journal records that claim a rank the job cannot have (one at or beyond its
    size: the largest communicator, the processes its NCCL logs show, the ranks its dumps and logs name), and
    for gate decisions of one rank and step found in two files: the first file's decision is used, the later
    file keeps its other steps, and the warning says whether the two agreed."""
    size = _job_size(evidence)
    problems: list[Diagnostic] = []
    if size:
        for item in evidence:
            if not item.declares("claims_ranks"):  # records that speak for ranks no communicator ties to the job
                continue
            records = getattr(item, item.facts.records)
            outside = sorted({r.rank for r in records if r.rank >= size})
            if outside:
                first = min((r for r in records if r.rank >= size), key=lambda r: r.loc.line or 0)
                problems.append(Diagnostic(first.loc, (
                    f"{item.facts.label} record of rank {_listed(outside)}, but the job has ranks "
                    f"0..{size - 1} (its communicators, processes and other files); read as written"),
                    Severity.WARNING))
    claimed: dict[tuple[int, int], tuple[str, object]] = {}  # (rank, step) -> (file, its decision)
    kept = []
    for item in evidence:
        if not item.gates:
            kept.append(item)
            continue
        own, repeated = [], {}
        for decision in item.gates:
            earlier = claimed.get((decision.rank, decision.step))
            if earlier is not None and earlier[0] != item.path:
                repeated.setdefault((earlier[0], decision.rank), []).append((earlier[1], decision))
                continue
            claimed[(decision.rank, decision.step)] = (item.path, decision)
            own.append(decision)
        for (other, rank), pairs in repeated.items():
            problems.append(_twice_claimed(item.path, other, rank, pairs))
        kept.append(dataclasses.replace(item, gates=own) if repeated else item)
    return kept, problems


def _twice_claimed(path: str, other: str, rank: int, pairs: list) -> Diagnostic:
    """The warning for rank `rank`'s decisions in `path` at steps `other` already gave."""
    steps = sorted(later.step for _, later in pairs)
    first_earlier, first_later = min(pairs, key=lambda pair: pair[1].step)
    differ = [(a, b) for a, b in pairs if a.decision != b.decision or a.seq != b.seq]
    agreement = "the same at each" if not differ else (
        f"they differ at {len(differ)}, first at step {differ[0][1].step}: {differ[0][0].loc} says "
        f"{differ[0][0].decision}, {differ[0][1].loc} says {differ[0][1].decision}")
    span = f"step {steps[0]}" if len(steps) == 1 else f"{len(steps)} steps ({steps[0]}..{steps[-1]})"
    return Diagnostic(first_later.loc, (
        f"gate decisions of rank {rank} for {span} are also in {first_earlier.loc} on: two files claim "
        f"one rank; {agreement}; the first file's are used"), Severity.WARNING)


def _job_size(evidence: list[Evidence]) -> int:
    """How many ranks the job has, by what its collective evidence shows (0 when nothing shows it)."""
    size = 0
    processes: dict[SourceFormat, set[tuple[str | None, int]]] = {}  # per format: RAS and logs spell hosts apart
    for item in evidence:
        if item.declares("claims_ranks"):
            continue
        for identity in item.identities:
            size = max(size, identity.comm_size or 0)
            if identity.pid is not None:
                processes.setdefault(item.format, set()).add((identity.host, identity.pid))
        if item.declares("job_ranks"):
            size = max(size, 1 + max(item.ranks, default=-1))
    return max([size, *map(len, processes.values())])


def _listed(ranks: list[int]) -> str:
    return ", ".join(map(str, ranks[:4])) + (", ..." if len(ranks) > 4 else "")


def check_ras_counts(evidence: list[Evidence]) -> list[Diagnostic]:
    """A count RAS gives for a rank never falls: a later reply (by its timestamp, or by file name for text
    replies, which carry none) with a rank's count of one type below an earlier reply's is a warning naming both;
    two replies where each has some rank ahead of the other cannot both be true, whatever their order."""
    replies: dict[str, list[tuple[RasSnapshot, RasComm, dict[int, dict[str, int]]]]] = {}
    for item in evidence:
        for snapshot in item.ras:
            if snapshot.event is not None or snapshot.truncated:
                continue
            for comm in snapshot.comms:
                if comm.size is not None and comm.size > MAX_COMM_SIZE:
                    continue  # by_type spells out the ranks a MISMATCH line does not list: not for a size of 10**12
                counts = RasHistory(comm.comm, [(snapshot, comm)]).by_type()
                if counts:
                    replies.setdefault(comm.comm, []).append((snapshot, comm, counts))
    problems: list[Diagnostic] = []
    for comm, found in sorted(replies.items()):
        found.sort(key=lambda reply: (reply[0].time or "", reply[0].loc.path, reply[0].loc.line or 0))
        warned = 0
        for (first_reply, first, a), (second_reply, second, b) in combinations(found, 2):
            fell = _falls(a, b)
            if not fell:
                continue
            rose = _falls(b, a)
            rank, op, before, after = fell
            if rose:
                r2, op2, in_second, in_first = rose
                message = (f"RAS replies contradict each other for comm {comm}: {first.loc} has rank {rank} at "
                           f"{op} {before} and rank {r2} at {op2} {in_first}, {second.loc} rank {rank} at {after} "
                           f"and rank {r2} at {in_second}; counts never fall, so no order of the two fits both")
            else:
                order = "by their timestamps" if first_reply.time and second_reply.time else \
                    "by file name (no timestamps)"
                message = (f"RAS counts go backwards for comm {comm}: rank {rank} {op} {before} at {first.loc}, "
                           f"then {after} at {second.loc} (replies ordered {order}); counts never fall, so one "
                           f"reply is wrong or the order is not the order they were taken in")
            problems.append(Diagnostic(second.loc, message, Severity.WARNING))
            warned += 1
            if warned >= MAX_REPLY_WARNINGS:
                break
    return problems


def _falls(a: dict[int, dict[str, int]], b: dict[int, dict[str, int]]) -> tuple[int, str, int, int] | None:
    """The first (rank, type, count in a, count in b) with b's count below a's, or None."""
    for rank in sorted(set(a) & set(b)):
        for op in sorted(set(a[rank]) & set(b[rank])):
            if b[rank][op] < a[rank][op]:
                return rank, op, a[rank][op], b[rank][op]
    return None
