"""Placeholder until the ras_json parser lands."""

from __future__ import annotations

from ..model import Evidence, SourceFormat
from .base import InputFile


class RasJsonSource:
    format = SourceFormat.RAS_JSON

    def sniff(self, head: bytes, text: str) -> float:
        return 0.0

    def parse(self, file: InputFile) -> Evidence:
        raise NotImplementedError


class RasMonitorSource:
    format = SourceFormat.RAS_MONITOR

    def sniff(self, head: bytes, text: str) -> float:
        return 0.0

    def parse(self, file: InputFile) -> Evidence:
        raise NotImplementedError
