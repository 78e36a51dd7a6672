"""Placeholder until the nccl_log parser lands."""

from __future__ import annotations

from ..model import Evidence, SourceFormat
from .base import InputFile


class NcclLogSource:
    format = SourceFormat.NCCL_LOG

    def sniff(self, head: bytes, text: str) -> float:
        return 0.0

    def parse(self, file: InputFile) -> Evidence:
        raise NotImplementedError
