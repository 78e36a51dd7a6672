"""What a diagnosis rests on and what it cannot see, as facts: the analysis says which, report/notes.py words them.

Each note is a small frozen dataclass named for what it says; its fields are what the sentence needs and what
`--json` gives under `notes` (with `kind`, the class name in snake case).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


class Fact:
    """A fact of the analysis, named in `--json` by `kind`: its class name in snake case (`cut_records`)."""

    @property
    def kind(self) -> str:
        return re.sub(r"(?<!^)(?=[A-Z])", "_", type(self).__name__).lower()


@dataclass(frozen=True)
class Note(Fact):
    """A fact beside the answer."""


# How the root's communicator was chosen


@dataclass(frozen=True)
class ConsequenceComm(Note):
    """Another communicator's ranks disagree too, read as a consequence of `causes`."""

    comm: str
    ranks: tuple[int, ...]
    kind_there: str  # the other root's kind (extra, missing, stopped, different_ops)
    causes: tuple[str, ...]


@dataclass(frozen=True)
class UndecidedComm(Note):
    """Another communicator's ranks disagree too, and nothing says whether it or the root's diverged first."""

    comm: str
    ranks: tuple[int, ...]
    kind_there: str
    root_comm: str


@dataclass(frozen=True)
class UnseenComm(Note):
    """The root's odd ranks run in a communicator no two ranks' whole records compare."""

    comm: str
    ranks: tuple[int, ...]
    root_comm: str


@dataclass(frozen=True)
class MixedElsewhere(Note):
    """Per-collective traces read back wrong results in another communicator: it diverged too, and a rank stuck
    there stops launching in the root's just so."""

    comm: str
    ranks: tuple[int, ...]
    where: str  # file:line of the first wrong result
    root_comm: str


@dataclass(frozen=True)
class HeldBackComm(Note):
    """The root's ranks behind (`ranks`) share `comm` with ranks ahead (`ahead`) that may hold them back: those may
    have left collectives of it out and issued their next one in the root's comm early, which reads as an extra one
    there; the departure may be in `comm`."""

    comm: str
    ranks: tuple[int, ...]
    ahead: tuple[int, ...]
    root_comm: str


@dataclass(frozen=True)
class StepSumMixedElsewhere(Note):
    """A rank's per-step checksum is wrong: results mixed in one of its other communicators (`comms`), which may
    have diverged too."""

    comms: tuple[str, ...]
    rank: int
    step: int
    where: str
    sum: float
    expected_sum: float
    root_comm: str


@dataclass(frozen=True)
class UnplacedResultMixedElsewhere(Note):
    """A rank's per-collective record is wrong where no stream holds it (its launch records end before it): results
    mixed in one of its other communicators (`comms`), which may have diverged too."""

    comms: tuple[str, ...]
    rank: int
    step: int
    tag: str | None
    where: str
    sum: float
    expected_sum: float
    root_comm: str


# Who departed, where records alone do not say


@dataclass(frozen=True)
class CountedAmongLookalikes(Note):
    """Records alike (or parting evenly); PyTorch's counts name a minority; `parted`: ranks whose records part
    from the rest of them, first at `parted_seq`."""

    outliers: tuple[int, ...]
    counted: tuple[int, ...]
    launched: str  # "fewer" or "more"
    counted_by: str
    parted: tuple[int, ...] = ()
    parted_seq: int | None = None


@dataclass(frozen=True)
class CountsNameSide(Note):
    """Of the two sides the records part, the side of the ranks counts show launching more or fewer departed."""

    ranks: tuple[int, ...]
    launched: str
    counted_by: str
    side: tuple[int, ...] = ()  # every rank of their side (the counted ones and those whose records pair with theirs)


@dataclass(frozen=True)
class CountedBeforeRecords(Note):
    """Ranks counts show launching more or fewer before the records begin, added to the outliers."""

    added: tuple[int, ...]
    launched: str
    counted_by: str
    outliers: tuple[int, ...]
    either: tuple[int, ...] = ()  # ranks no record compares, named as they may be on either side of a tie


@dataclass(frozen=True)
class CountsTieBeforeRecords(Note):
    """Ranks no record compares, which counts part from others with no majority (as the records part theirs), named
    beside the records' tie: each is on one side of it, and no majority says which side departed."""

    either: tuple[int, ...]
    counted_by: str
    outliers: tuple[int, ...]


@dataclass(frozen=True)
class SnapshotSides(Note):
    """Ranks with no file of their own, which no record compares, sided by a peer's desync report: `sided` share
    the outliers' ops in its snapshot, `either` it cannot side; the root names `outliers`, a majority or not."""

    sided: tuple[int, ...]
    either: tuple[int, ...]
    outliers: tuple[int, ...]
    majority: bool


@dataclass(frozen=True)
class CountedPastRecords(Note):
    """Ranks counts show launching more or fewer past where the records compare them (their records end alike with
    the others'), added to the outliers."""

    added: tuple[int, ...]
    launched: str
    counted_by: str
    outliers: tuple[int, ...]


@dataclass(frozen=True)
class RanPastHang(Note):
    """Ranks whose records in `comm` run on past `stop_seq`, where a strict majority's stop, though the pairing at
    `hang_seq` hangs on every rank (align/past_hang.py), added to the outliers."""

    added: tuple[int, ...]
    comm: str
    hang_seq: int
    stop_seq: int
    outliers: tuple[int, ...]


@dataclass(frozen=True)
class IssuedEarlyByCounts(Note):
    """PyTorch's counts place `ranks`' seq `seq` of `comm`, the first collective they never completed, right after
    `place` collectives of their other groups, where `others` issue it after `floor` or more (they completed or
    launched that many there and never completed it): `ranks` issued it early. `later`: ranks whose records at the
    root's seq part with no majority, past where `ranks` issued theirs (align/counted_places.py)."""

    ranks: tuple[int, ...]
    comm: str
    seq: int
    place: int
    others: tuple[int, ...]
    floor: int
    later: tuple[int, ...] = ()


@dataclass(frozen=True)
class DepartedLater(Note):
    """Ranks that departed too, in `seq_range` (as `shown_by` says), after the departure the root names: left out
    of the root, though they did not run the program either."""

    ranks: tuple[int, ...]
    seq_range: tuple[int, int | None]  # where their departure may lie, as far as their records say
    comm: str
    shown_by: str  # the evidence that shows their departure ("PyTorch's enqueued counts", "signatures", ...)


@dataclass(frozen=True)
class IssuedEarlyInTie(Note):
    """The root's two sides tied; `ranks` issued seq `seq` of `comm` before their peers of `elsewhere` (`peers`,
    whose whole records of `comm` end just before it) went on there past where they issued it: they ran one early.
    `where` is the early collective's record."""

    ranks: tuple[int, ...]
    comm: str
    seq: int
    elsewhere: str
    peers: tuple[int, ...]
    where: str


@dataclass(frozen=True)
class SumsAddOutliers(Note):
    """Ranks whose per-step checksums part at `step` departed too; `basis` cannot order the departures."""

    added: tuple[int, ...]
    step: int | None
    basis: str  # "counts", "late_records" or "records"
    outliers: tuple[int, ...]


@dataclass(frozen=True)
class SumsPartReference(Note):
    """Ranks that launched as many as `largest` but whose checksums part from theirs at `step` departed too."""

    added: tuple[int, ...]
    largest: tuple[int, ...]
    step: int | None
    outliers: tuple[int, ...]


@dataclass(frozen=True)
class SumsPlaceCutRanks(Note):
    """Ranks whose records end before the sides part read back at `step` what the outliers did."""

    joined: tuple[int, ...]
    step: int | None
    outliers: tuple[int, ...]
    seq_range: tuple[int, int | None]


@dataclass(frozen=True)
class SwappedTypes(Note):
    """RAS counts give `added` as many collectives as most ranks, of other types: they departed too, somewhere no
    record shows."""

    comm: str
    added: tuple[int, ...]
    outliers: tuple[int, ...]
    seq_range: tuple[int, int | None]


@dataclass(frozen=True)
class GuessedTracePlacement(Note):
    """`moved` trace records before the root were put in a communicator by a guess: its seqs may be off by as many."""

    moved: int
    comm: str
    seq_range: tuple[int, int | None]


@dataclass(frozen=True)
class GuessedRootComm(Note):
    """The root rests on a trace record that only its neighbours put in `comm`; its rank's trace holds records of
    `others` too, which it may be of as well."""

    comm: str
    others: tuple[str, ...]


@dataclass(frozen=True)
class TracesMayBeWider(Note):
    """`records` trace records before the root, results only the traced ranks of its communicator share, may be of
    a wider communicator that also holds ranks that left no trace: its seqs may be too high by as many."""

    records: int
    comm: str
    seq_range: tuple[int, int | None]


# What the evidence cannot show


@dataclass(frozen=True)
class CutRecords(Note):
    """Ranks' records in a communicator end where a file was cut short."""

    comm: str
    ranks: tuple[int, ...]
    where: str  # file:line


@dataclass(frozen=True)
class CompletionsOnly(Note):
    """Only records made once a collective completed describe the collectives (`formats`, plural words)."""

    formats: str


@dataclass(frozen=True)
class UncomparedFields(Note):
    """Some ranks' evidence carries no `fields`: compared only between ranks that recorded them."""

    comm: str
    ranks: tuple[int, ...]
    fields: tuple[str, ...]  # field names (op, count, stack, ...)


@dataclass(frozen=True)
class TracesMixedComms(Note):
    """Traces hold collectives of several communicators and no digests: left out."""

    ranks: tuple[int, ...]


@dataclass(frozen=True)
class TracesUnplaced(Note):
    """Traces share no result with another rank's and their communicator is not known: left out."""

    ranks: tuple[int, ...]


@dataclass(frozen=True)
class TracesApart(Note):
    """Traces hold results no other trace shares, of a communicator whose other members are not known."""

    ranks: tuple[int, ...]


@dataclass(frozen=True)
class TracesNameNoComm(Note):
    """Fingerprint traces name no communicator: one named [ranks=...] is the ranks that read back the same."""


@dataclass(frozen=True)
class RootOffMembers(Note):
    """The root found on comm `comm` named ranks its members are not (`strays`) or, with a majority, ranks on
    both sides (`both`): the evidence ties ranks or groups to the comm inconsistently, so no root is given."""

    comm: str
    strays: tuple[int, ...]
    both: tuple[int, ...]


# How ranks were numbered


@dataclass(frozen=True)
class JoinedByDumps(Note):
    """NCCL logs that share no communicator with the job's other logs, read as its own because the Flight Recorder
    dumps' groups place each of their processes at a rank of the job, no two at one (align/jobs.py)."""

    files: tuple[str, ...]


@dataclass(frozen=True)
class LogRanksAreCommRanks(Note):
    """No NCCL log communicator holds every process: `given` processes got the job's rank through the dumps, the
    others are stand-ins (rank, host, pid)."""

    given: int
    stand_ins: tuple[tuple[int, str, int], ...]


@dataclass(frozen=True)
class NoInitLines(Note):
    """NCCL logs without INIT lines: COLL lines grouped per size, processes numbered by host then pid."""

    stand_ins: tuple[tuple[int, str, int], ...]  # the first few
    more: int  # stand-ins not listed
    partial: tuple[tuple[int, int], ...]  # (nranks, ranks on record) of sizes not every rank has lines of


@dataclass(frozen=True)
class RasCommRanks(Note):
    """A RAS-counted communicator's ranks are named by their rank in it: no record gives their global ranks."""

    comm: str
    processes: tuple[tuple[int, str, int], ...]  # (comm rank, host, pid)


@dataclass(frozen=True)
class RasRankUnnamed(Note):
    """A rank of a RAS-counted communicator that no record gives a global rank, left out of the ranks named."""

    comm: str
    rank: int
    process: tuple[str, int] | None  # (host, pid)
    counts: tuple[tuple[str, int], ...]  # (collective type, launched)


# What a partial view leaves out


@dataclass(frozen=True)
class PartialView(Note):
    """The analysis looks at part of the job only (--rank/--comm; None: not narrowed by that option)."""

    ranks: tuple[int, ...] | None
    comm: str | None


@dataclass(frozen=True)
class ViewLeftOutFingerprints(Note):
    """Per-collective fingerprints were left out of a --rank view."""


@dataclass(frozen=True)
class ViewLeftOutRas(Note):
    """RAS replies were left out of a --rank view."""
