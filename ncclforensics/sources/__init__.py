"""Input formats. One module per format; `SOURCES` is the registry, `parse_file` detects and parses."""

from __future__ import annotations

from ..errors import SourceError
from ..model import Diagnostic, Evidence, Location, Severity, SourceFormat
from .base import (
    MAX_LINE_BYTES, MAX_TEXT_BYTES, InputFile, Source, head_text, long_line_at, long_line_message, looks_binary,
    unreadable,
)
from .discover import discover
from .fingerprint import FingerprintSource
from .flight_recorder import FlightRecorderSource
from .gate_journal import GateJournalSource
from .nccl_log import NcclLogSource
from .ras_json import RasJsonSource, RasMonitorSource
from .ras_text import RasTextSource
from .torch_log import TorchLogSource
from .vllm_metrics import VllmMetricsSource

SOURCES: tuple[Source, ...] = (
    FlightRecorderSource(),
    RasJsonSource(),
    RasMonitorSource(),
    RasTextSource(),
    NcclLogSource(),
    TorchLogSource(),
    GateJournalSource(),
    FingerprintSource(),
    VllmMetricsSource(),
)

_BY_FORMAT = {source.format: source for source in SOURCES}

# Line formats that share files: a server's log holds NCCL debug lines, watchdog messages, gate lines and
# spec-decode metrics side by side. Detection picks one; the others whose markers the file holds (every record
# line of a format holds one of its markers) are read too, by their own parsers, into the same Evidence.
LINE_MARKERS: dict[SourceFormat, tuple[bytes, ...]] = {
    SourceFormat.NCCL_LOG: (b": opCount ", b"Init COMPLETE", b"NCCL WARN"),
    SourceFormat.TORCH_LOG: (b"ProcessGroupNCCL", b"WorkNCCL(", b"Watchdog caught"),
    SourceFormat.GATE_JOURNAL: (b"decision",),
    SourceFormat.FINGERPRINT: (b"checksum", b"digest", b'"sum"', b" sum="),
    SourceFormat.VLLM_METRICS: (b"SpecDecoding metrics", b"Speculative metrics"),
}
COMPANION_MAX_BYTES = 64 << 20  # bigger files are searched for no other format
# An NCCL debug log is searched only up to this size: a bigger one is NCCL_DEBUG_FILE's own output (searching
# every big log for other formats' markers would cost a tenth of reading it).
NCCL_COMPANION_MAX_BYTES = 1 << 20


# What parse_file says of a file no parser recognises (not of one that is empty or cannot be read): such a file
# found in an evidence folder (a config.yaml) is not evidence, and the commands warn and go on.
NO_KNOWN_FORMAT = ("binary content of no known format", "unrecognised format")


def detect(file: InputFile) -> Source | None:
    """The source whose sniff scores the file's head highest, or None when nothing recognises it."""
    head = file.head()
    text = head_text(head)
    best, best_score = None, 0.0
    for source in SOURCES:
        score = source.sniff(head, text)
        if score > best_score:
            best, best_score = source, score
    return best


def parse_file(file: InputFile, fmt: SourceFormat | None = None,
               also: list[SourceFormat] | None = None) -> Evidence:
    """Detect the format (unless given) and parse, with the companion line formats the file holds (`also`, where
    the caller already looked them up); never raises for bad content, returns diagnostics instead."""
    try:
        head = file.head()
        if not head:
            if file.compressed:
                problems = file.read_bytes()[1]
                return _unrecognised(file, problems[0].message if problems else "empty after decompression")
            return _unrecognised(file, "empty file")
        source = _BY_FORMAT[fmt] if fmt else detect(file)
        if source is None:
            return _unrecognised(file, NO_KNOWN_FORMAT[0] if looks_binary(head) else NO_KNOWN_FORMAT[1])
        refusal = _over_limits(file, source.format)
        if refusal:
            return unreadable(file, source.format, SourceError(refusal))
        try:
            evidence = source.parse(file)
        except (SourceError, OSError, MemoryError, RecursionError) as e:
            return unreadable(file, source.format, e)
        for other in companions(file, source.format) if also is None else also:
            try:
                _merge(evidence, _BY_FORMAT[other].parse(file))
            except (SourceError, OSError, MemoryError, RecursionError):
                continue  # the file's own format was read; a companion that fails adds nothing
        return evidence
    except (SourceError, OSError) as e:
        return _unrecognised(file, str(e).removeprefix(f"{file.path}: "))


def _over_limits(file: InputFile, fmt: SourceFormat) -> str | None:
    """Why a plain text file is refused before it is read (base.MAX_LINE_BYTES, base.MAX_TEXT_BYTES), or None.
    A .gz is checked as it is decompressed."""
    if fmt is SourceFormat.FLIGHT_RECORDER or file.compressed:
        return None
    size = file.path.stat().st_size
    if fmt is not SourceFormat.NCCL_LOG and size > MAX_TEXT_BYTES:
        return (f"{size} bytes, over the {MAX_TEXT_BYTES >> 20} MiB a {fmt.value} file may have (it is read line "
                f"by line in memory); refusing the file (see MAX_TEXT_BYTES)")
    at = long_line_at(file.path, MAX_LINE_BYTES)
    return long_line_message(file.path, at, MAX_LINE_BYTES).removeprefix(f"{file.path}: ") if at is not None \
        else None


def companions(file: InputFile, primary: SourceFormat | None) -> list[SourceFormat]:
    """The line formats other than `primary` whose markers a text file of `primary`'s kind holds."""
    if primary not in LINE_MARKERS:
        return []
    try:
        limit = NCCL_COMPANION_MAX_BYTES if primary is SourceFormat.NCCL_LOG else COMPANION_MAX_BYTES
        if file.path.stat().st_size > limit:
            return []
        data = file.read_bytes()[0]
    except (SourceError, OSError):
        return []
    return [fmt for fmt, markers in LINE_MARKERS.items()
            if fmt is not primary and any(marker in data for marker in markers)]


def _merge(evidence: Evidence, other: Evidence) -> None:
    """Add what a companion parser read to the file's Evidence. Lines both parsers know (an NCCL abort line in a
    watchdog log) are kept once; the companion's errors are warnings (the file is not of its format)."""
    if other.record_count == 0:
        return
    evidence.also.append(other.format)
    if evidence.collectives.height == 0:
        evidence.collectives = other.collectives
    for name in ("identities", "watchdog", "progress", "comm_infos", "gates", "fingerprints", "metrics", "ras"):
        mine, theirs = getattr(evidence, name), getattr(other, name)
        lines = {(item.loc.line, type(item)) for item in mine}
        mine.extend(item for item in theirs if (item.loc.line, type(item)) not in lines)
    evidence.problems.extend(
        p if p.severity is Severity.WARNING else Diagnostic(p.loc, f"as {other.format.value}: {p.message}",
                                                            Severity.WARNING)
        for p in other.problems)
    evidence.version = evidence.version or other.version


def _unrecognised(file: InputFile, reason: str) -> Evidence:
    evidence = Evidence(path=file.name, format=None)
    evidence.problems.append(Diagnostic(Location(file.name), reason))
    return evidence


__all__ = ["NO_KNOWN_FORMAT", "SOURCES", "InputFile", "Source", "companions", "detect", "discover", "parse_file"]
