"""Input formats. One module per format; `SOURCES` is the registry, `parse_file` detects and parses."""

from __future__ import annotations

from ..errors import SourceError
import dataclasses

from ..model import Diagnostic, Evidence, FormatFacts, Location, Severity, SourceFormat
from .base import (
    MAX_LINE_BYTES, MAX_TEXT_BYTES, InputFile, Source, head_text, long_line_at, long_line_message, looks_binary,
    unreadable,
)
from .discover import discover
from .fingerprint import FingerprintSource
from .flight_recorder import FlightRecorderSource
from .gate_journal import GateJournalSource
from .nccl_log import NcclLogSource
from .ras import RasJsonSource, RasMonitorSource, RasTextSource
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

# Line formats share files: a server's log holds NCCL debug lines, watchdog messages, gate lines and spec-decode
# metrics side by side. Detection picks one; the others whose markers the file holds (FormatFacts.markers: every
# record line of a format holds one of them) are read too, by their own parsers, into the same Evidence.
COMPANION_MAX_BYTES = 64 << 20  # bigger files are searched for no other format
# A streamed format's file (an NCCL debug log) is searched only up to this size: a bigger one is NCCL_DEBUG_FILE's
# own output (searching every big log for other formats' markers would cost a tenth of reading it).
STREAMED_COMPANION_MAX_BYTES = 1 << 20


def source_of(fmt: SourceFormat) -> Source:
    """The registered source of a format (KeyError for none)."""
    for source in SOURCES:
        if source.format is fmt:
            return source
    raise KeyError(fmt)


def formats() -> dict[SourceFormat, FormatFacts]:
    """Every registered format's facts, in registry order."""
    return {source.format: source.facts for source in SOURCES}


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
        source = source_of(fmt) if fmt else detect(file)
        if source is None:
            return _unrecognised(file, NO_KNOWN_FORMAT[0] if looks_binary(head) else NO_KNOWN_FORMAT[1])
        refusal = _over_limits(file, source.facts)
        if refusal:
            return unreadable(file, source.facts, SourceError(refusal))
        try:
            evidence = _parse(source, file)
        except (SourceError, OSError, MemoryError, RecursionError) as e:
            return unreadable(file, source.facts, e)
        for other in companions(file, source.format) if also is None else also:
            try:
                _merge(evidence, _parse(source_of(other), file))
            except (SourceError, OSError, MemoryError, RecursionError):
                continue  # the file's own format was read; a companion that fails adds nothing
        return evidence
    except (SourceError, OSError) as e:
        return _unrecognised(file, str(e).removeprefix(f"{file.path}: "))


def _parse(source: Source, file: InputFile) -> Evidence:
    """source.parse(file), its Evidence carrying the source's facts (a parser that builds its own need not say)."""
    evidence = source.parse(file)
    if evidence.facts is None:
        evidence.facts = source.facts
    return evidence


def _over_limits(file: InputFile, facts: FormatFacts) -> str | None:
    """Why a plain text file is refused before it is read (base.MAX_LINE_BYTES, base.MAX_TEXT_BYTES), or None.
    A .gz is checked as it is decompressed."""
    if facts.binary or file.compressed:
        return None
    size = file.path.stat().st_size
    if not facts.streamed and size > MAX_TEXT_BYTES:
        return (f"{size} bytes, over the {MAX_TEXT_BYTES >> 20} MiB a {facts.format.value} file may have (it is read "
                f"line by line in memory); refusing the file (see MAX_TEXT_BYTES)")
    at = long_line_at(file.path, MAX_LINE_BYTES)
    return long_line_message(file.path, at, MAX_LINE_BYTES).removeprefix(f"{file.path}: ") if at is not None \
        else None


def companions(file: InputFile, primary: SourceFormat | None) -> list[SourceFormat]:
    """The line formats other than `primary` whose markers a text file of `primary`'s kind holds."""
    known = formats()
    if primary not in known or not known[primary].markers:
        return []
    try:
        limit = STREAMED_COMPANION_MAX_BYTES if known[primary].streamed else COMPANION_MAX_BYTES
        if file.path.stat().st_size > limit:
            return []
        data = file.read_bytes(max_size=limit)[0]  # a .gz too: inflated past the limit, it is searched no further
    except (SourceError, OSError):
        return []
    return [fmt for fmt, facts in known.items()
            if fmt is not primary and any(marker in data for marker in facts.markers)]


def _merge(evidence: Evidence, other: Evidence) -> None:
    """Add what a companion parser read to the file's Evidence. Lines both parsers know (an NCCL abort line in a
    watchdog log) are kept once; the companion's errors are warnings (the file is not of its format)."""
    if other.record_count == 0:
        return
    evidence.also.append(other.format)
    if other.facts is not None:
        evidence.also_facts.append(other.facts)
    if evidence.collectives.height == 0:
        evidence.collectives = other.collectives
    for name in _RECORD_LISTS:
        mine, theirs = getattr(evidence, name), getattr(other, name)
        lines = {(item.loc.line, type(item)) for item in mine}
        mine.extend(item for item in theirs if (item.loc.line, type(item)) not in lines)
    evidence.problems.extend(
        p if p.severity is Severity.WARNING else Diagnostic(p.loc, f"as {other.format.value}: {p.message}",
                                                            Severity.WARNING)
        for p in other.problems)
    evidence.version = evidence.version or other.version


# Evidence's lists of records, each merged item by item (not `problems`, `also` or `also_facts`: said apart).
_RECORD_LISTS = tuple(f.name for f in dataclasses.fields(Evidence)
                      if f.name not in ("problems", "also", "also_facts") and "list[" in str(f.type))


def _unrecognised(file: InputFile, reason: str) -> Evidence:
    evidence = Evidence(path=file.name, format=None)
    evidence.problems.append(Diagnostic(Location(file.name), reason))
    return evidence


__all__ = ["NO_KNOWN_FORMAT", "SOURCES", "InputFile", "Source", "companions", "detect", "discover", "parse_file"]
