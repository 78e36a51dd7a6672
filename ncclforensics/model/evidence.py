"""What one parsed input file holds."""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from .event import (
    CommInfo,
    Diagnostic,
    FingerprintRow,
    GateDecision,
    ProcessIdentity,
    ProgressReport,
    RasSnapshot,
    SpecDecodeMetrics,
    WatchdogEvent,
)
from .formats import FormatFacts
from .location import Location
from .frame import empty_collectives
from .kinds import Severity, SourceFormat


@dataclass
class Evidence:
    """Everything one input file says, in the one event model. Built by exactly one parser."""

    path: str
    format: SourceFormat | None  # None: no parser recognised the file
    collectives: pl.DataFrame = field(default_factory=empty_collectives)
    identities: list[ProcessIdentity] = field(default_factory=list)
    comm_infos: list[CommInfo] = field(default_factory=list)
    progress: list[ProgressReport] = field(default_factory=list)
    ras: list[RasSnapshot] = field(default_factory=list)
    gates: list[GateDecision] = field(default_factory=list)
    fingerprints: list[FingerprintRow] = field(default_factory=list)
    watchdog: list[WatchdogEvent] = field(default_factory=list)
    metrics: list[SpecDecodeMetrics] = field(default_factory=list)
    problems: list[Diagnostic] = field(default_factory=list)
    version: str | None = None  # producer version (NCCL, Flight Recorder schema), where stated
    also: list[SourceFormat] = field(default_factory=list)
    # Where the file itself shows it was cut short (a pickle without its end, a last line without its line feed):
    # its records end there because the file does, not because the rank stopped.
    cut: Location | None = None  # other formats whose lines the file holds, also read
    # A trace cut inside a record it had begun: the step that record is of, as far as its digits go (a floor:
    # `step=1` may have been `step=12`). The rank wrote it once it had read that step back.
    cut_step: int | None = None
    # What its format declares (model/formats.py), and what the formats in `also` declare; None: no parser read it.
    facts: FormatFacts | None = field(default=None, repr=False, compare=False)
    also_facts: list[FormatFacts] = field(default_factory=list, repr=False, compare=False)

    @property
    def record_count(self) -> int:
        """The format's own records (COLL lines, dump entries, replies, decisions, ...: FormatFacts.records)."""
        if self.facts is None:
            return 0
        records = getattr(self, self.facts.records)
        return records.height if isinstance(records, pl.DataFrame) else len(records)

    def declares(self, fact: str, also: bool = False) -> bool:
        """Whether its format declares `fact` (a FormatFacts flag); with `also`, or a format whose lines it also
        holds. False for Evidence built by hand, without a parser's facts."""
        every = (self.facts, *self.also_facts) if also else (self.facts,)
        return any(getattr(facts, fact) for facts in every if facts is not None)

    @property
    def ranks(self) -> list[int]:
        """Global ranks this file speaks for (not ranks it merely mentions)."""
        found: set[int] = set()
        found.update(self._distinct("rank"))
        found.update(i.rank for i in self.identities if i.rank is not None)
        found.update(g.rank for g in self.gates)
        found.update(f.rank for f in self.fingerprints)
        found.update(w.rank for w in self.watchdog if w.rank is not None)
        found.update(p.rank for p in self.progress if p.rank is not None)
        return sorted(found)

    def _distinct(self, column: str) -> list:
        """The distinct non-null values of a collectives column, read by one expression: a big log's frame holds
        a constant column as one value, which reading the column would first spell out once per row."""
        return self.collectives.select(pl.col(column).drop_nulls().unique()).to_series().to_list()

    @property
    def comms(self) -> list[str]:
        """The `0x...` communicator hashes this file names."""
        found: set[str] = set()
        found.update(self._distinct("comm"))
        found.update(i.comm for i in self.identities if i.comm)
        for snapshot in self.ras:
            found.update(c.comm for c in snapshot.comms)
            found.update(i.comm for i in snapshot.issues if i.comm)
        found.update(w.comm for w in self.watchdog if w.comm)
        return sorted(c for c in found if c.startswith("0x"))

    @property
    def has_errors(self) -> bool:
        """True when a problem of error severity was found (exit code 2)."""
        return any(p.severity is Severity.ERROR for p in self.problems)
