"""Placeholder until the vllm_metrics parser lands."""

from __future__ import annotations

from ..model import Evidence, SourceFormat
from .base import InputFile


class VllmMetricsSource:
    format = SourceFormat.VLLM_METRICS

    def sniff(self, head: bytes, text: str) -> float:
        return 0.0

    def parse(self, file: InputFile) -> Evidence:
        raise NotImplementedError
