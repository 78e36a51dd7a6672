"""Part of a job: the evidence of some ranks, or of one communicator (`diff --rank R --comm HASH`).

Ranks and communicators are known only once the analysis has resolved them (a Flight Recorder process group is
tied to its NCCL hash by its ranks and ops, a log without INIT lines gets stand-in ranks), so the part is chosen
from a first analysis of everything: the rows of the chosen (comm, rank) streams are found back in the files by
where they were read (file, line, record), and every file keeps only those rows. The records of other kinds keep
what names a chosen rank or communicator. The part is then analysed like a whole job.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import polars as pl

from ..errors import ForensicsError
from ..model import CommInfo, Evidence
from ..model.kinds import P2P_SUFFIX
from .notes import Note, PartialView, ViewLeftOutFingerprints, ViewLeftOutRas
from .streams import Streams


@dataclass(frozen=True)
class View:
    """Which part of a job to look at; None: all of it."""

    ranks: frozenset[int] | None = None
    comm: str | None = None

    @property
    def whole(self) -> bool:
        return self.ranks is None and self.comm is None


@dataclass
class Selection:
    """The evidence of a view, and what was left out that the view cannot split."""

    evidence: list[Evidence]
    view: View
    notes: list[Note] = field(default_factory=list)


_LOCATION = ["file", "line", "record"]


def select(evidence: list[Evidence], streams: Streams, ranks_seen: list[int], view: View) -> Selection:
    """The part of `evidence` that `view` names, from a first analysis of all of it (`streams`, and every rank
    `ranks_seen`). ForensicsError when the view names a rank or communicator the evidence has nothing of."""
    comm = _resolve_comm(view.comm, streams) if view.comm is not None else None
    view = replace(view, comm=comm)
    if view.ranks is not None:
        unknown = sorted(view.ranks - set(ranks_seen))
        if unknown:
            raise ForensicsError(f"--rank {', '.join(map(str, unknown))}: no evidence of "
                                 f"{'that rank' if len(unknown) == 1 else 'those ranks'} (ranks: "
                                 f"{', '.join(map(str, ranks_seen)) or 'none'})")
    comms = {comm, comm + P2P_SUFFIX} if comm is not None else None
    named = {name for name, target in streams.aliases.items() if comms is None or target in comms}

    def chosen_comm(name: str | None) -> bool:
        return comms is None or name is None or streams.aliases.get(name, name) in comms or name in comms

    def chosen_rank(rank: int | None) -> bool:
        return view.ranks is None or rank is None or rank in view.ranks

    # Gate decisions and fingerprints name ranks, not communicators: with --comm, those of its members.
    members = set().union(*(streams.members.get(c, []) for c in comms)) if comms is not None else None

    def member(rank: int) -> bool:
        return chosen_rank(rank) and (members is None or rank in members)

    keep = _kept_locations(streams, comms, view.ranks)
    notes: list[Note] = [PartialView(None if view.ranks is None else tuple(sorted(view.ranks)), view.comm)]
    out: list[Evidence] = []
    dropped_ras = False
    for item in evidence:
        if item.format is None:
            continue
        collectives = item.collectives
        if collectives.height:
            located = collectives.select(pl.col("file").fill_null(item.path), "line", "record").with_row_index()
            rows = located.join(keep, on=_LOCATION, how="semi", nulls_equal=True).get_column("index")
            collectives = collectives.with_row_index().filter(pl.col("index").is_in(rows.implode())).drop("index")
        ras = item.ras
        if view.ranks is not None and ras:
            ras, dropped_ras = [], True
        elif comms is not None:
            ras = [replace(s, comms=tuple(c for c in s.comms if c.comm in comms or c.comm in named),
                           issues=tuple(i for i in s.issues if chosen_comm(i.comm))) for s in ras]
        part = replace(
            item, collectives=collectives, ras=ras,
            gates=[g for g in item.gates if member(g.rank)],
            fingerprints=[f for f in item.fingerprints if member(f.rank) and (comms is None or f.op is None)],
            watchdog=[w for w in item.watchdog if chosen_rank(w.rank) and chosen_comm(w.comm)],
            progress=[p for p in item.progress if chosen_rank(p.rank) and chosen_comm(p.comm)],
            comm_infos=[_info_in_view(c, view.ranks) for c in item.comm_infos if chosen_comm(c.comm)],
            metrics=[],
        )
        said = (part.collectives.height or part.gates or part.fingerprints or part.watchdog or part.progress
                or any(s.comms for s in part.ras))
        if said:
            out.append(part)
    if comms is not None and any(f.op is not None for item in evidence for f in item.fingerprints):
        # A per-collective trace numbers a rank's collectives of a step across all its communicators: with the
        # others' rows gone, its numbers would tie checksums and steps to the wrong collectives.
        notes.append(ViewLeftOutFingerprints())
    if dropped_ras:
        notes.append(ViewLeftOutRas())
    return Selection(out, view, notes)


def _info_in_view(info: CommInfo, ranks: frozenset[int] | None) -> CommInfo:
    """A process group's configuration naming only the chosen ranks: the others are not missing, only not
    looked at (a rank a configuration names but no file speaks for is otherwise reported as silent)."""
    if ranks is None or not info.ranks:
        return info
    return replace(info, ranks=tuple(r for r in info.ranks if r in ranks))


def _resolve_comm(comm: str, streams: Streams) -> str:
    """The communicator as the analysis names it: a hash (any case) or a process-group name tied to one."""
    wanted = comm.strip().removesuffix(P2P_SUFFIX)
    wanted = wanted.lower() if wanted.lower().startswith("0x") else wanted
    wanted = streams.aliases.get(wanted, wanted)
    known = sorted(c for c in streams.members if not c.endswith(P2P_SUFFIX))
    if wanted not in known and wanted + P2P_SUFFIX not in streams.members:
        raise ForensicsError(f"--comm {comm}: no collectives of that communicator in the evidence (comms: "
                             f"{', '.join(known) or 'none'})")
    return wanted


def _kept_locations(streams: Streams, comms: set[str] | None, ranks: frozenset[int] | None) -> pl.DataFrame:
    """(file, line, record) of every source row of the chosen streams: the row's own and its Flight Recorder
    record's."""
    pieces = []
    for (comm, rank), part in streams.parts.items():
        if (comms is None or comm in comms) and (ranks is None or rank in ranks):
            pieces.append(part.select(_LOCATION))
            if "fr_file" in part.columns:
                pieces.append(part.select(pl.col("fr_file").alias("file"), pl.lit(None, pl.Int64).alias("line"),
                                          pl.col("fr_record").alias("record")).drop_nulls("file"))
    schema = {"file": pl.String, "line": pl.Int64, "record": pl.Int64}
    if not pieces:
        return pl.DataFrame(schema=schema)
    return pl.concat([p.cast(schema) for p in pieces]).unique()
