"""The gate journal, written: append-only JSONL, one line per decode step per rank, flushed per line.

The offline reader (`ncclforensics.sources.gate_journal`) reads `step`, `rank`, `seq`, `decision`,
`proposed_pass_count`, `sched_count`, `fits`, `md_none`, `max_model_len`, `spec_tokens`, `mode` and `time`, and
ignores any other key; the guard adds `local_decision`, `consensus`, `peers` and `would_pass_total`.

Example line (one line in the file):

    {"step": 5, "rank": 0, "seq": 995, "decision": "pass", "proposed_pass_count": 1, "sched_count": 1,
     "fits": true, "md_none": false, "max_model_len": 1000, "spec_tokens": 3, "mode": "enforce",
     "time": 1764406506.12, "local_decision": "skip", "consensus": "pass",
     "peers": {"0": [5, 0, 1, 0, 0], "1": [5, 1, 1, 1, 0]}, "would_pass_total": 1}
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any
from collections.abc import Mapping

# Keys the offline gate-journal parser reads, in the order they are written.
GATE_KEYS = (
    "step", "rank", "seq", "decision", "proposed_pass_count", "sched_count", "fits", "md_none",
    "max_model_len", "spec_tokens", "mode", "time",
)


def gate_record(
    step: int,
    rank: int,
    decision: str,
    *,
    seq: int | None = None,
    proposed_pass_count: int | None = None,
    sched_count: int | None = None,
    fits: bool | None = None,
    md_none: bool | None = None,
    max_model_len: int | None = None,
    spec_tokens: int | None = None,
    mode: str | None = None,
    time: float | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """One journal record: the offline keys first (None values left out), then any extra keys."""
    record: dict[str, Any] = {
        "step": step, "rank": rank, "seq": seq, "decision": decision,
        "proposed_pass_count": proposed_pass_count, "sched_count": sched_count, "fits": fits, "md_none": md_none,
        "max_model_len": max_model_len, "spec_tokens": spec_tokens, "mode": mode, "time": time,
    }
    record = {k: v for k, v in record.items() if v is not None}
    record.update(extra)
    return record


class JournalWriter:
    """Appends one JSON object per line to a file and flushes each line, so a tail (or a crash) sees whole lines.

    Opened in append mode: several runs (or a restarted rank) add to one file, never truncate it. Thread-safe.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Line buffering flushes on every newline; write() adds the newline in the same call.
        self._file = open(self.path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115 - closed by close()
        self._lock = threading.Lock()
        self.lines = 0

    def write(self, record: Mapping[str, Any]) -> None:
        """Append one record as one line."""
        line = json.dumps(record, separators=(", ", ": "), default=_jsonable) + "\n"
        with self._lock:
            self._file.write(line)
            self.lines += 1

    def close(self) -> None:
        """Flush and close the file (idempotent)."""
        with self._lock:
            if not self._file.closed:
                self._file.close()

    def __enter__(self) -> JournalWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _jsonable(value: Any) -> Any:
    """Numbers from numpy or torch scalars (`.item()`), anything else as its string."""
    item = getattr(value, "item", None)
    return item() if callable(item) else str(value)
