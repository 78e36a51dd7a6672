"""RAS snapshots over time: stuck communicators, transient skew, missing and dead ranks.

RAS counts are launched operations, not completed ones, so a single `OK` reply proves nothing about
progress; only counts compared across two or more replies tell a wedge (unchanged while ranks disagree) from
skew (moving).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ..model import Location, RasComm, RasSnapshot

RasGone = Literal["dead", "unresponsive", "missing"]  # how a reply says a rank is gone, strongest first


@dataclass
class RasHistory:
    """One communicator across the RAS replies that mention it, oldest first."""

    comm: str
    states: list[tuple[RasSnapshot, RasComm]] = field(default_factory=list)
    families: dict[str, list[RasComm]] = field(default_factory=dict)  # reply format -> comm blocks, in order

    @property
    def locations(self) -> list[Location]:
        """Where each reply's block for this comm was read."""
        return [c.loc for _, c in self.states]

    @staticmethod
    def counts(comm: RasComm) -> tuple:
        """What can be compared between replies of one format: per-rank counts and the MISMATCH groups."""
        ranks = tuple(sorted((r.rank, tuple(sorted(r.counts.items()))) for r in comm.ranks if r.counts))
        groups = tuple(sorted((g.op or "", g.count if g.count is not None else -1, g.nranks, g.ranks)
                              for g in comm.count_groups))
        return ranks, groups, comm.status, comm.errors

    @property
    def disagree(self) -> bool:
        """The latest reply shows ranks at different counts."""
        comm = self.states[-1][1]
        if len({g.count for g in comm.count_groups}) > 1:
            return True
        per_rank = [tuple(sorted(r.counts.items())) for r in comm.ranks if r.counts and not r.missing]
        return len(set(per_rank)) > 1

    @property
    def moving(self) -> bool | None:
        """Counts changed between replies (None with a single reply)."""
        compared = [blocks for blocks in self.families.values() if len(blocks) >= 2]
        if not compared:
            return None
        # Text and JSON replies of one moment read differently, so only replies of one format are compared.
        return any(len({self.counts(c) for c in blocks}) > 1 for blocks in compared)

    @property
    def stuck(self) -> bool:
        """Two or more replies with unchanged counts while the ranks disagree."""
        return self.moving is False and self.disagree

    @property
    def settled(self) -> bool:
        """Two or more replies of one format with unchanged counts: the counts stopped moving, so they are what
        each rank launched, not a reading taken before it went on."""
        return self.moving is False

    @property
    def differing_types_only(self) -> bool:
        """The latest reply counts only the collective types whose counts differ between ranks (2.26+ MISMATCH
        lines, no table of every type): a rank's count is a floor of what it launched, the types left out adding
        as many to every rank."""
        comm = self.states[-1][1]
        return not self.tabled() and any(g.op not in (None, "ops") for g in comm.count_groups)

    @property
    def missing_ranks(self) -> list[int]:
        """Ranks any reply lists as missing (no data from their process)."""
        found = set()
        for _, comm in self.states:
            found.update(comm.missing_ranks)
            found.update(r.rank for r in comm.ranks if r.missing)
        return sorted(found)

    @property
    def dead_ranks(self) -> list[int]:
        """Ranks any reply says RAS considers dead (`considered_dead`, a DEAD error naming their process)."""
        found = set()
        for _, comm in self.states:
            found.update(comm.dead_ranks)
            found.update(r.rank for r in comm.ranks if r.dead)
        return sorted(found)

    @property
    def unresponsive_ranks(self) -> list[int]:
        """Ranks any reply lists as unreachable by RAS that none says is dead: gone, or only cut off."""
        found = {r.rank for _, comm in self.states for r in comm.ranks if r.unresponsive}
        return sorted(found - set(self.dead_ranks))

    def gone_by_status(self) -> list[tuple[RasGone, list[int]]]:
        """The ranks gone from the comm, each once, under the strongest word a reply gives: `dead`, `unresponsive`,
        or `missing` (its process answers RAS but no longer reports the comm); statuses with no rank left out."""
        dead, unresponsive = self.dead_ranks, self.unresponsive_ranks
        answering = [r for r in self.missing_ranks if r not in dead and r not in unresponsive]
        return [(status, ranks) for status, ranks in (("dead", dead), ("unresponsive", unresponsive),
                                                      ("missing", answering)) if ranks]

    @property
    def error_ranks(self) -> dict[int, str]:
        """Ranks with an asynchronous error, and the error."""
        found = {}
        for _, comm in self.states:
            for r in comm.ranks:
                if r.async_error:
                    found[r.rank] = r.async_error
        return found

    def tabled(self) -> dict[int, dict[str, int]]:
        """The latest reply's per-rank table of counts per type (VERBOSE STATUS, JSON): every type each rank
        launched, so their sum is how many collectives it launched. Empty where the reply has no table."""
        comm = self.states[-1][1]
        table = {r.rank: dict(r.counts) for r in comm.ranks if r.counts and not r.missing}
        # A plain STATUS reply lists a rank only in a MISMATCH line, with the one type that differs: no table.
        listed = {g.op for g in comm.count_groups}
        if not table or (comm.size and len(table) < comm.size) or (
                listed and not any(set(c) - listed for c in table.values())):
            return {}
        return table

    def by_type(self) -> dict[int, dict[str, int]]:
        """Latest launched counts per comm rank and collective type (NCCL 2.26+ counts each type apart; 2.24 and
        2.25 keep one counter, `ops`). From the per-rank table, else from the MISMATCH lines that list ranks; the
        ranks such a line does not list (`3 ranks have launched up to operation 49`) are the comm's others."""
        comm = self.states[-1][1]
        found = self.tabled()
        if found:
            return found
        if not comm.count_groups:
            return {r.rank: dict(r.counts) for r in comm.ranks if r.counts and not r.missing}
        size = comm.size or 0
        for group in comm.count_groups:
            listed = set(group.ranks)
            others = [g for g in comm.count_groups if g.op == group.op and g is not group]
            if not listed and size and all(g.ranks for g in others):
                listed = set(range(size)) - {r for g in others for r in g.ranks}
            for rank in listed:
                found.setdefault(rank, {})[group.op or "ops"] = group.count or 0
        return found

    def launched(self) -> dict[int, int]:
        """Latest total launched count per comm rank, where the reply gives it per rank."""
        comm = self.states[-1][1]
        totals = {r.rank: sum(r.counts.values()) for r in comm.ranks if r.counts}
        for group in comm.count_groups:
            for rank in group.ranks:
                if group.count is not None and rank not in totals:
                    totals[rank] = group.count
        return totals


def job_processes(ras: dict[str, RasHistory]) -> int:
    """How many processes the job has, as the text replies' job summaries give it (the most any gives; 0 where
    none does: JSON replies have no summary). Dead processes count too, as they do in the summary."""
    return max((snapshot.processes or 0 for history in ras.values() for snapshot, _ in history.states), default=0)


def _order_key(snapshot: RasSnapshot) -> tuple:
    # Replies that carry a timestamp sort by it; text replies carry none, so they keep their input order
    # (file names like ras_status_q0, q1 sort naturally). Said so in the report's caveats.
    return (snapshot.time or "", snapshot.loc.path, snapshot.loc.line or 0)


def ras_histories(snapshots: list[tuple[str, RasSnapshot]]) -> dict[str, RasHistory]:
    """Group every STATUS reply's communicators by hash, each history oldest first.

    `snapshots` pairs each reply with its family (the input format, plus `verbose` for VERBOSE STATUS text).
    """
    histories: dict[str, RasHistory] = {}
    for family, snapshot in sorted((p for p in snapshots if p[1].event is None), key=lambda p: _order_key(p[1])):
        for comm in snapshot.comms:
            history = histories.setdefault(comm.comm, RasHistory(comm.comm))
            history.states.append((snapshot, comm))
            history.families.setdefault(family, []).append(comm)
    return histories
