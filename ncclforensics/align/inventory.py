"""The evidence index of a postmortem: what each input file contributed, and which ranks' evidence is missing."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from ..model import Diagnostic, Evidence, GateChoice, SourceFormat
from ..model.phrases import ranks_words
from .diagnosis import Diagnosis
from .receipts import Finding

@dataclass
class FileContribution:
    """One input file in the evidence index."""

    path: str
    format: str | None  # SourceFormat value; None: not recognised, not used
    version: str | None
    records: int
    ranks: list[int]
    contributed: list[str]  # what it told the analysis, in words
    receipts: list[Finding] = field(default_factory=list)  # the diagnosis' file:line receipts in this file
    problems: list[Diagnostic] = field(default_factory=list)


@dataclass
class Inventory:
    """Every file and what it gave, plus the gaps."""

    files: list[FileContribution]
    missing: list[str]  # one sentence per gap


def inventory(evidence: list[Evidence], diagnosis: Diagnosis, walk_problems: list[Diagnostic] = ()) -> Inventory:
    """Index the files and say which ranks lack which kind of evidence."""
    receipts: dict[str, list[Finding]] = defaultdict(list)
    for finding in diagnosis.evidence:
        receipts[finding.loc.path].append(finding)
    extra: dict[str, list[Diagnostic]] = defaultdict(list)
    for problem in list(walk_problems) + list(diagnosis.problems):
        extra[problem.loc.path].append(problem)
    files = [
        FileContribution(
            path=item.path, format=item.format.value if item.format else None, version=item.version,
            records=item.record_count, ranks=item.ranks, contributed=_contributed(item),
            receipts=receipts.get(item.path, []), problems=list(item.problems) + extra.pop(item.path, []),
        )
        for item in evidence
    ]
    for path, problems in extra.items():
        files.append(FileContribution(path=path, format=None, version=None, records=0, ranks=[],
                                      contributed=["nothing (could not be read)"], problems=problems))
    return Inventory(files=files, missing=missing_evidence(evidence, diagnosis))


def _contributed(item: Evidence) -> list[str]:
    if item.format is None:
        return ["nothing: not a recognised format, not used"]
    out = []
    frame = item.collectives
    if frame.height:
        for comm, part in sorted(frame.group_by("comm"), key=lambda p: str(p[0][0])):
            ranks = sorted(r for r in part.get_column("rank").drop_nulls().unique().to_list())
            seqs = part.get_column("seq")
            name = f"comm {comm[0]}" if str(comm[0]).startswith("0x") else f"process group {comm[0]}"
            out.append(f"{part.height} collectives of {ranks_words(ranks)} in {name} "
                       f"(seq {seqs.min()}..{seqs.max()})")
    if item.identities:
        who = sorted({(i.rank, i.host, i.pid) for i in item.identities if i.rank is not None},
                     key=lambda t: (t[0], str(t[1]), t[2] or 0))
        if who:
            out.append("identity: " + "; ".join(f"rank {r} = {h or '?'} pid {p or '?'}" for r, h, p in who[:4]))
    if item.progress:
        for p in item.progress[:4]:
            name = f"comm {p.comm}" if p.comm.startswith("0x") else f"process group {p.comm}"
            out.append(f"progress of rank {p.rank} in {name}: last enqueued {p.last_enqueued}, "
                       f"last completed {p.last_completed}")
    for snapshot in item.ras:
        comms = ", ".join(f"{c.comm} {','.join(c.errors) or c.status or 'OK'}" for c in snapshot.comms[:4])
        label = f"RAS {snapshot.event} event" if snapshot.event else "RAS reply"
        out.append(f"{label}{' at ' + snapshot.time if snapshot.time else ''}: {comms or 'no communicator'}")
    if item.gates:
        steps = [g.step for g in item.gates]
        passes = sum(g.decision == GateChoice.PASS.value for g in item.gates)
        out.append(f"{len(item.gates)} gate decisions of {ranks_words(sorted({g.rank for g in item.gates}))}, "
                   f"steps {min(steps)}..{max(steps)} ({passes} pass, {len(item.gates) - passes} skip)")
    if item.fingerprints:
        bad = sum(f.sum is not None and f.expected_sum is not None and f.sum != f.expected_sum
                  for f in item.fingerprints)
        out.append(f"{len(item.fingerprints)} checksums of {ranks_words(sorted({f.rank for f in item.fingerprints}))}"
                   + (f", {bad} differ from the expected value" if bad else ""))
    if item.watchdog:
        kinds: dict[str, int] = {}
        for w in item.watchdog:
            kinds[w.kind] = kinds.get(w.kind, 0) + 1
        out.append("watchdog/NCCL messages: " + ", ".join(f"{k.replace('_', ' ')} x{n}" for k, n in kinds.items()))
    if item.metrics:
        out.append(f"{len(item.metrics)} spec-decode metrics lines")
    return out or ["nothing the analysis uses"]


def missing_evidence(evidence: list[Evidence], diagnosis: Diagnosis) -> list[str]:
    """Ranks without a per-rank file (FormatFacts.per_rank) that other ranks have, formats in input order; ranks
    RAS lists as missing or dead; communicator members that no file speaks for."""
    ranks = set(diagnosis.ranks)
    out: list[str] = []
    have: dict[SourceFormat, set[int]] = {}
    labels: dict[SourceFormat, str] = {}
    for item in evidence:
        if item.facts is not None and item.facts.per_rank:
            have.setdefault(item.format, set()).update(item.ranks)
            labels[item.format] = item.facts.label
    for fmt, label in labels.items():
        present = have[fmt]
        if not present:
            continue
        absent = sorted(ranks - present)
        if absent:
            out.append(f"no {label} with records of {ranks_words(absent)} ({ranks_words(sorted(present))} "
                       f"{'has' if len(present) == 1 else 'have'} one)")
    for comm, history in sorted(diagnosis.ras.items()):
        for status, ranks in history.gone_by_status():
            said = {"dead": "considers {} of comm {} dead", "unresponsive": "cannot reach {} of comm {}",
                    "missing": "lists {} of comm {} as missing (the process answers but no longer reports the comm)"}
            out.append("RAS " + said[status].format(f"comm {ranks_words(ranks)}", comm))
    sizes: dict[str, int] = {}
    for item in evidence:
        for identity in item.identities:
            if identity.comm and identity.comm_size:
                sizes[identity.comm] = max(sizes.get(identity.comm, 0), identity.comm_size)
    for comm, analysis in sorted(diagnosis.comms.items()):
        size = sizes.get(comm)
        if size and len(analysis.ranks) < size:
            out.append(f"comm {comm} has {size} ranks but collectives of only {len(analysis.ranks)} were read "
                       f"({ranks_words(analysis.ranks)})")
    return out

