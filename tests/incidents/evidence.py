"""Which evidence an incident leaves, and writing it into a folder.

Kinds: `nccl` (NCCL debug logs), `fr` (Flight Recorder dumps), `torch` (watchdog logs), `gate` (gate journals),
`fp` (fingerprint traces), `ras` (two NCCL RAS STATUS replies, taken while the job is stuck; one for all ranks).
A subset names the kinds and the ranks each is written for; `write_evidence` also
draws how: the fingerprint scheme and op numbering, the gate journal's spelling, whether the desync report is on,
Flight Recorder rings that wrap, and logs or traces cut short mid-line (a process killed while writing).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from . import flight_recorder, nccl_log, ras, torch_log, traces
from .incident import Incident

KINDS = ("nccl", "fr", "torch", "gate", "fp", "ras")

# name -> (weight, kinds written for every rank); "mixed" and "some-ranks" are drawn per rank
SUBSETS = {
    "fr": (12, ("fr",)),
    "nccl": (12, ("nccl",)),
    "nccl+fp": (10, ("nccl", "fp")),
    "nccl+gate": (8, ("nccl", "gate")),
    "torch": (7, ("torch",)),
    "fp": (5, ("fp",)),
    "fr+gate": (6, ("fr", "gate")),
    "torch+fp": (5, ("torch", "fp")),
    "nccl+torch": (6, ("nccl", "torch")),
    "ras": (4, ("ras",)),
    "ras+gate": (3, ("ras", "gate")),
    "all": (12, KINDS),
    "mixed": (9, ()),  # Flight Recorder for some ranks, NCCL logs for the others (some both)
    "some-ranks": (8, ()),  # one kind set, for a random part of the ranks (evidence pasted from a few)
}


@dataclass
class Written:
    """What a folder holds."""

    subset: str
    ranks: dict[str, list[int]]  # kind -> ranks written
    files: list[str] = field(default_factory=list)
    cut: dict[tuple[str, int], int] = field(default_factory=dict)  # (kind, rank) -> whole lines kept
    nccl_kept: dict[int, dict[str, int]] = field(default_factory=dict)  # rank -> comm -> COLL lines kept whole
    ring: dict[int, int] = field(default_factory=dict)  # rank -> Flight Recorder entries kept (a ring that wrapped)
    fp_scheme: str | None = None
    fp_op: str | None = None
    gate_style: str | None = None
    desync: bool = False

    def has(self, kind: str, rank: int) -> bool:
        """Whether `kind` was written for `rank`."""
        return rank in self.ranks.get(kind, [])

    @property
    def label(self) -> str:
        """The subset with the fingerprint scheme, for tables."""
        return self.subset + (f" [{self.fp_scheme}]" if self.fp_scheme else "")

    def as_dict(self) -> dict:
        """A plain dict for messages."""
        return {"subset": self.subset, "ranks": self.ranks, "cut": {f"{k}:{r}": n for (k, r), n in self.cut.items()},
                "ring": self.ring, "fp": [self.fp_scheme, self.fp_op], "gate": self.gate_style,
                "desync": self.desync}


def draw_subset(rng: random.Random, world: int) -> tuple[str, dict[str, list[int]]]:
    """A subset of evidence: its name and kind -> ranks."""
    names = list(SUBSETS)
    name = rng.choices(names, weights=[SUBSETS[n][0] for n in names])[0]
    ranks = list(range(world))
    if name == "mixed":
        split = {"nccl": [], "fr": []}
        for r in ranks:
            for kind in rng.choice([("nccl",), ("fr",), ("nccl", "fr")]):
                split[kind].append(r)
        return name, {k: v for k, v in split.items() if v}
    if name == "some-ranks":
        kinds = rng.choice([("nccl",), ("fr",), ("torch",), ("nccl", "fp"), KINDS[:-1]])  # RAS speaks for all
        part = sorted(rng.sample(ranks, rng.randint(max(1, world // 2), world)))
        return name, {k: part for k in kinds}
    return name, {k: ranks for k in SUBSETS[name][1]}


def _cut(rng: random.Random, lines: list[str], keep_from: int) -> tuple[str, int]:
    """The text of `lines` cut mid-line somewhere after line `keep_from`; and how many lines stay whole."""
    whole = rng.randint(keep_from, max(keep_from, len(lines) - 1))
    line = lines[whole] if whole < len(lines) else ""
    partial = line[:rng.randint(1, max(1, len(line) // 3))] if line else ""
    return "\n".join(lines[:whole]) + ("\n" if whole else "") + partial, whole


def write_evidence(incident: Incident, folder: Path, kinds: dict[str, list[int]], rng: random.Random) -> Written:
    """Write `kinds` (kind -> ranks) for `incident` into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    written = Written("custom", {k: sorted(v) for k, v in kinds.items() if v})
    cut_rate = rng.choice([0.0, 0.0, 0.0, 0.15])
    files = written.files
    for rank in written.ranks.get("nccl", []):
        lines = nccl_log.nccl_log_lines(incident, rank)
        path = folder / nccl_log.file_name(incident, rank)
        texts = [text for text, _ in lines]
        first_coll = next((i for i, (_, c) in enumerate(lines) if c), len(lines))
        if rng.random() < cut_rate and first_coll < len(lines):
            text, whole = _cut(rng, texts, first_coll + 1)
            written.cut[("nccl", rank)] = whole
        else:
            text, whole = "\n".join(texts) + "\n", len(lines)
        kept: dict[str, int] = {}
        for _, comm in lines[:whole]:
            if comm:
                kept[comm] = kept.get(comm, 0) + 1
        written.nccl_kept[rank] = kept
        path.write_text(text)
        files.append(path.name)
    if written.ranks.get("fr"):
        wraps = rng.random() < 0.2
        for rank in written.ranks["fr"]:
            total = len(incident.run.launches[rank])
            if wraps and total > 8:
                written.ring[rank] = rng.randint(max(4, total // 3), total - 1)
            data = flight_recorder.fr_bytes(incident, rank, written.ring.get(rank))
            (folder / f"fr_rank{rank}").write_bytes(data)
            files.append(f"fr_rank{rank}")
    if written.ranks.get("torch"):
        written.desync = rng.random() < 0.5
        for rank in written.ranks["torch"]:
            (folder / f"torch_rank{rank}.log").write_text(torch_log.torch_log_text(incident, rank, written.desync))
            files.append(f"torch_rank{rank}.log")
    if written.ranks.get("gate"):
        written.gate_style = rng.choice(["kv", "json"])
        suffix = "log" if written.gate_style == "kv" else "jsonl"
        for rank in written.ranks["gate"]:
            lines = traces.gate_lines(incident, rank, written.gate_style)
            if not lines:
                continue  # it never got to the gate
            name = f"gate_journal_rank{rank}.{suffix}"
            (folder / name).write_text("".join(line + "\n" for line in lines))
            files.append(name)
    if written.ranks.get("fp"):
        written.fp_scheme = rng.choice(traces.SCHEMES)
        written.fp_op = rng.choice(["step", "running"])
        suffix = "log" if written.fp_scheme == "checksum" else "jsonl"
        for rank in written.ranks["fp"]:
            lines = traces.fingerprint_lines(incident, rank, written.fp_scheme, written.fp_op)
            if not lines:
                continue  # it read nothing back: no trace (an empty file is not evidence of any format)
            name = f"fingerprint_rank{rank}.{suffix}"
            if len(lines) > 1 and rng.random() < cut_rate:
                text, whole = _cut(rng, lines, 1)
                written.cut[("fp", rank)] = whole
            else:
                text = "".join(line + "\n" for line in lines)
            (folder / name).write_text(text)
            files.append(name)
    if written.ranks.get("ras"):
        text = ras.ras_status_text(incident)
        for query in ("q0", "q1"):
            (folder / f"ras_status_{query}.txt").write_text(text)
            files.append(f"ras_status_{query}.txt")
    return written
