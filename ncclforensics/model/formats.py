"""What the rest of the package needs to know of an input format, declared by the format's own source.

Each module in sources/ gives its Source a `facts = FormatFacts(...)`; every Evidence its parser builds carries
them, so the analysis (align/) and the registry (sources/__init__.py) read a format's facts from the evidence,
never from a table of formats. Adding a format is one module plus one registry line.
"""

from __future__ import annotations

from dataclasses import dataclass

from .kinds import SourceFormat


@dataclass(frozen=True)
class FormatFacts:
    """One input format's facts. The defaults are those of a format that describes no stream and no rank."""

    format: SourceFormat
    label: str  # in words, for sentences: "NCCL debug log"
    records: str  # the Evidence field that holds the format's own records (its record_count): "collectives", ...
    per_rank: bool = False  # written once per rank: a rank without one lacks evidence of this kind (inventory)
    # Speaks for the ranks its records name, with no communicator to tie them to the job: checked against the
    # job's size, and never counted in it (align/jobs.py).
    claims_ranks: bool = False
    job_ranks: bool = False  # the ranks its records name are the job's: they bound the job's size (align/jobs.py)
    comm_ids_since: tuple[int, int] | None = None  # the producer version from which its comm hashes are commIds
    # Collectives: which source's fields win where two describe one (comm, rank, seq): the lowest (align/streams.py).
    stream_priority: int = 2
    # A recorder's rows (Flight Recorder entries) know completion state, call sites and times better than a log's
    # line, and are cited by record (file#entries[i]) where no line is known (align/streams.py).
    recorder: bool = False
    opcount_positions: bool = False  # rankless collectives can be placed by NCCL's opCount (align/unranked.py)
    # A line format whose every record line holds one of these: looked for (and read) in other line formats'
    # files, whose lines may interleave with its own (sources/__init__.py).
    markers: tuple[bytes, ...] = ()
    binary: bool = False  # not text: no line-length limit applies
    streamed: bool = False  # read without holding the file in memory: no text size limit, searched for no companions
