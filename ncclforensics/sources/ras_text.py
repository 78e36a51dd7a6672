"""Placeholder until the ras_text parser lands."""

from __future__ import annotations

from ..model import Evidence, SourceFormat
from .base import InputFile


class RasTextSource:
    format = SourceFormat.RAS_TEXT

    def sniff(self, head: bytes, text: str) -> float:
        return 0.0

    def parse(self, file: InputFile) -> Evidence:
        raise NotImplementedError
