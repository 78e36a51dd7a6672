"""Placeholder until the flight_recorder parser lands."""

from __future__ import annotations

from ..model import Evidence, SourceFormat
from .base import InputFile


class FlightRecorderSource:
    format = SourceFormat.FLIGHT_RECORDER

    def sniff(self, head: bytes, text: str) -> float:
        return 0.0

    def parse(self, file: InputFile) -> Evidence:
        raise NotImplementedError
