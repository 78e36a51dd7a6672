"""Input formats. One module per format; `SOURCES` is the registry, `parse_file` detects and parses."""

from __future__ import annotations

from ..errors import SourceError
from ..model import Diagnostic, Evidence, Location, SourceFormat
from .base import InputFile, Source, head_text, looks_binary, unreadable
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


def parse_file(file: InputFile, fmt: SourceFormat | None = None) -> Evidence:
    """Detect the format (unless given) and parse; never raises for bad content, returns diagnostics instead."""
    try:
        head = file.head()
        if not head:
            if file.compressed:
                problems = file.read_bytes()[1]
                return _unrecognised(file, problems[0].message if problems else "empty after decompression")
            return _unrecognised(file, "empty file")
        source = _BY_FORMAT[fmt] if fmt else detect(file)
        if source is None:
            reason = "binary content of no known format" if looks_binary(head) else "unrecognised format"
            return _unrecognised(file, reason)
        try:
            return source.parse(file)
        except (SourceError, OSError, MemoryError, RecursionError) as e:
            return unreadable(file, source.format, e)
    except (SourceError, OSError) as e:
        return _unrecognised(file, str(e).removeprefix(f"{file.path}: "))


def _unrecognised(file: InputFile, reason: str) -> Evidence:
    evidence = Evidence(path=file.name, format=None)
    evidence.problems.append(Diagnostic(Location(file.name), reason))
    return evidence


__all__ = ["SOURCES", "InputFile", "Source", "detect", "discover", "parse_file"]
