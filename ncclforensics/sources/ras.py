"""The three RAS formats: text STATUS replies, JSON STATUS replies and MONITOR event streams.

One reader serves them all (`ras_json.read_ras` walks a transcript of any mix of them); each format's sniff says
which the file mostly is, and labels its Evidence.
"""

from __future__ import annotations

import re

from ..model import Evidence, FormatFacts, SourceFormat
from . import ras_common as rc
from .base import InputFile, looks_binary
from .ras_json import read_ras
from .ras_text import sniff_text


class RasTextSource:
    """NCCL RAS text STATUS replies (and whatever else a RAS transcript holds, read by `read_ras`)."""

    facts = FormatFacts(SourceFormat.RAS_TEXT, "RAS text reply", records="ras", comm_ids_since=(2, 26))
    format = facts.format

    def sniff(self, head: bytes, text: str) -> float:
        """0.95 on table/block/Errors lines only a text reply has, 0.9 on its headings, else 0."""
        return sniff_text(head, text)

    def parse(self, file: InputFile) -> Evidence:
        """Every reply, JSON object and MONITOR event of the file; problems become diagnostics."""
        return read_ras(file, self.facts)


class RasJsonSource:
    """NCCL RAS `SET FORMAT json` + `STATUS` replies (2.28.7+), several per file if need be."""

    facts = FormatFacts(SourceFormat.RAS_JSON, "RAS JSON reply", records="ras", comm_ids_since=(2, 26))
    format = facts.format

    def sniff(self, head: bytes, text: str) -> float:
        """0.97 for a JSON document with RAS STATUS keys."""
        if looks_binary(head) or '"communicators' not in text:
            return 0.0
        keys = ('"nccl_version"', '"secondary_hash"', '"collective_counts"', '"missing_ranks"')
        return 0.97 if any(k in text for k in keys) else 0.0

    def parse(self, file: InputFile) -> Evidence:
        """Every reply, JSON object and MONITOR event of the file; problems become diagnostics."""
        return read_ras(file, self.facts)


class RasMonitorSource:
    """NCCL RAS `MONITOR` event streams (2.29.2+), text lines or concatenated JSON objects."""

    facts = FormatFacts(SourceFormat.RAS_MONITOR, "RAS MONITOR stream", records="ras", comm_ids_since=(2, 26))
    format = facts.format

    def sniff(self, head: bytes, text: str) -> float:
        """0.95 for MONITOR text lines or JSON events (0.9 when STATUS replies are in the same file)."""
        if looks_binary(head):
            return 0.0
        names = "|".join(rc.MONITOR_EVENTS)
        text_event = re.search(rf"^\[\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d\] (?:{names}):", text, re.M)
        json_event = re.search(rf'"event"\s*:\s*"(?:{names})"', text)
        if not (text_event or json_event):
            return 0.0
        return 0.9 if '"communicators' in text else 0.95

    def parse(self, file: InputFile) -> Evidence:
        """Every event, reply and JSON object of the file; problems become diagnostics."""
        return read_ras(file, self.facts)
