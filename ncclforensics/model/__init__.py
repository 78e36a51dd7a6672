"""The one event model every parser produces and every analysis reads."""

from .event import (
    CollectiveEvent,
    CommInfo,
    Diagnostic,
    FingerprintRow,
    GateDecision,
    ProcessIdentity,
    ProgressReport,
    RasComm,
    RasCountGroup,
    RasIssue,
    RasRank,
    RasSnapshot,
    SpecDecodeMetrics,
    WatchdogEvent,
)
from .evidence import Evidence
from .formats import FormatFacts
from .frame import COLLECTIVE_SCHEMA, collectives_to_frame, conform, empty_collectives, frame_to_collectives
from .kinds import EventState, GateChoice, PairingKind, Severity, SourceFormat, Verdict, WatchdogKind, WedgeKind
from .location import Location

__all__ = [
    "COLLECTIVE_SCHEMA", "CollectiveEvent", "CommInfo", "Diagnostic", "EventState", "Evidence",
    "FingerprintRow", "FormatFacts", "GateChoice", "GateDecision", "Location", "PairingKind", "ProcessIdentity",
    "ProgressReport", "RasComm", "RasCountGroup", "RasIssue", "RasRank", "RasSnapshot", "Severity",
    "SourceFormat", "SpecDecodeMetrics", "Verdict", "WatchdogEvent", "WatchdogKind", "WedgeKind", "collectives_to_frame",
    "conform", "empty_collectives", "frame_to_collectives",
]
