"""The gate journal, followed: `tail -F` over a file that may be rotated or truncated, and its line format.

A gate journal has one line per decode step per rank, JSONL (what `journal_writer` writes) or key=value (what an
instrumented deployment logs). Both carry `step` and `decision`; `rank`, `seq`, `proposed_pass_count`,
`sched_count`, `fits` and `md_none` where known:

    {"step": 5, "rank": 0, "seq": 199995, "fits": true, "decision": "pass", ...}
    step=5 rank=0 seq=199995 fits=1 decision=pass

Lines are read one at a time here (the offline reader, `ncclforensics.sources.gate_journal`, reads whole files),
with the offline reader's `key=value` tokenizer and its rules for what is a record.
"""

from __future__ import annotations

import json
import os
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from ..errors import LiveError
from ..sources.keyvalue import key_values  # the offline reader's tokenizer: `[rank0] gate: step=5 rank=0 ...`

MAX_LINE_BYTES = 1 << 20  # a "line" longer than this is not a journal line (a binary file, say)
_READ_BYTES = 1 << 16
_HEAD_BYTES = 64

_PASS = {"pass"}
_SKIP = {"skip"}
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


@dataclass(frozen=True, slots=True)
class GateLine:
    """One journaled gate decision, as the sidecar compares it."""

    step: int
    decision: str  # "pass" | "skip"
    rank: int | None = None
    seq: int | None = None
    proposed_pass_count: int | None = None
    sched_count: int | None = None
    fits: bool | None = None
    md_none: bool | None = None

    def as_dict(self) -> dict[str, object]:
        """The known fields, None left out (the `decisions` entries of an alert)."""
        fields = {"decision": self.decision, "seq": self.seq, "proposed_pass_count": self.proposed_pass_count,
                  "sched_count": self.sched_count, "fits": self.fits, "md_none": self.md_none}
        return {k: v for k, v in fields.items() if v is not None}


class GateLineParser:
    """Reads gate-journal lines the way the offline reader (`sources.gate_journal`) does.

    - blank and `#` lines are skipped;
    - a line starting with `{` must be a JSON object; one with a `decision` is a gate record (then `step` and
      `rank` are required), one without is another kind of record and skipped;
    - any other line is a gate record when its `key=value` tokens hold `step`, `rank` and `decision`, else other
      log output, skipped; except in a JSON-lines journal (its first record line is JSON), where it is an error.

    `parse` returns a GateLine, None for a line to skip, or raises ValueError saying what is wrong.
    """

    def __init__(self) -> None:
        self.jsonl: bool | None = None  # decided by the first line that is not blank

    def reset(self) -> None:
        """A new file (rotation, truncation): its first line decides again."""
        self.jsonl = None

    def parse(self, text: str) -> GateLine | None:
        """One line; see the class docstring."""
        text = text.strip()
        if not text or text.startswith("#"):
            return None
        is_json = text.startswith("{")
        if self.jsonl is None:
            self.jsonl = is_json
        if is_json:
            try:
                fields = json.loads(text)
            except (json.JSONDecodeError, RecursionError) as e:
                message = f"{e.msg} at column {e.colno}" if isinstance(e, json.JSONDecodeError) else str(e)
                raise ValueError(f"invalid JSON ({message})") from None
            if not isinstance(fields, dict):
                raise ValueError(f"a JSON line must be an object, not {type(fields).__name__}")
            if "decision" not in fields:
                return None
        else:
            fields = key_values(text)
            if not all(key in fields for key in ("step", "rank", "decision")):
                if self.jsonl:
                    raise ValueError("neither a JSON object nor a key=value gate record in a JSON-lines journal")
                return None
        for key in ("step", "rank"):
            if fields.get(key) is None:
                raise ValueError(f"no `{key}`")
        return GateLine(
            step=_int(fields, "step"),
            decision=_decision(fields["decision"]),
            rank=_int(fields, "rank"),
            seq=_opt_int(fields, "seq"),
            proposed_pass_count=_opt_int(fields, "proposed_pass_count"),
            sched_count=_opt_int(fields, "sched_count"),
            fits=_opt_bool(fields, "fits"),
            md_none=_opt_bool(fields, "md_none"),
        )


def parse_gate_line(text: str) -> GateLine | None:
    """One line on its own (no JSON-lines context); see GateLineParser."""
    return GateLineParser().parse(text)


_MAX_VALUE = 2**62  # steps, ranks and counts travel as int64 (with -1 for "none"): 2**63 would overflow


def _int(fields: dict, key: str) -> int:
    value = fields[key]
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        raise ValueError(f"`{key}` is not an integer: {_shown(value)}")
    try:
        number = int(value) if not isinstance(value, str) or len(value) <= 40 else None
    except (TypeError, ValueError, OverflowError):  # OverflowError: int(inf)
        number = None
    if number is None:
        raise ValueError(f"`{key}` is not an integer: {_shown(value)}")
    if not 0 <= number < _MAX_VALUE:
        raise ValueError(f"`{key}` is out of range (0 to 2**62): {_shown(value)}")
    return number


def _shown(value: object) -> str:
    text = repr(value) if not isinstance(value, int) or abs(value) < 10**40 else \
        f"an integer of {value.bit_length()} bits"
    return text if len(text) <= 60 else text[:57] + "..."


def _opt_int(fields: dict, key: str) -> int | None:
    value = fields.get(key)
    if value is None or value == "" or value == "None":
        return None
    return _int(fields, key)


def _opt_bool(fields: dict, key: str) -> bool | None:
    value = fields.get(key)
    if value is None or isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"`{key}` is not a boolean: {value!r}")


def _decision(value: object) -> str:
    text = str(value).strip().lower() if isinstance(value, str) else None
    if text in _PASS:
        return "pass"
    if text in _SKIP:
        return "skip"
    raise ValueError(f"`decision` must be pass or skip, not {value!r}")


class JournalTail:
    """Complete lines of a file as it grows, like `tail -F`: survives rotation (a new file at the path) and
    truncation (the file shrinks, or no longer starts with the bytes it started with), and holds at most `MAX_LINE_BYTES` of an unfinished line.

    Without `follow` it reads to the end once; the last line counts even without its newline. Line numbers are
    1-based within the current file (they restart after a rotation or a truncation).
    """

    def __init__(self, path: str | os.PathLike[str], follow: bool = True) -> None:
        self.path = Path(path)
        self.follow = follow
        self.eof = False  # without follow: the whole file has been read
        self.rotations = 0
        self.truncations = 0
        self._file = None
        self._id: tuple[int, int] | None = None
        self._pos = 0
        self._partial = b""
        self._lineno = 0
        self._head = b""  # the file's first bytes: a truncated-and-rewritten file no longer starts with them
        self._ready: deque[tuple[int, int, bytes]] = deque()
        self.generation = 0  # +1 for every file opened or rewound: line numbers restart

    def _open(self) -> bool:
        try:
            file = open(self.path, "rb")  # noqa: SIM115 - held open while it is followed, closed on rotation
        except FileNotFoundError:
            if self.follow:
                return False  # like tail -F: wait for it to appear
            raise LiveError(f"{self.path}: no such journal") from None
        except OSError as e:
            raise LiveError(f"{self.path}: cannot read the journal: {e.strerror}") from e
        st = os.fstat(file.fileno())
        self._file, self._id, self._pos, self._partial, self._lineno = file, (st.st_dev, st.st_ino), 0, b"", 0
        self._head = b""
        self.generation += 1
        return True

    def where(self, lineno: int) -> str:
        """`path:line`, for messages."""
        return f"{self.path}:{lineno}"

    def read(self, max_lines: int) -> list[tuple[int, int, bytes]]:
        """Up to `max_lines` complete lines as (generation, line number, raw bytes without the newline)."""
        if self._file is None and not self._open():
            return []
        if self.follow and not self._ready and self._head and self._rewritten():
            self._rewind()  # truncated and rewritten past the old length since the last look
        while len(self._ready) < max_lines and self._fill():
            pass
        count = min(max_lines, len(self._ready))
        return [self._ready.popleft() for _ in range(count)]

    def _fill(self) -> bool:
        """Read one chunk into complete lines; False when nothing more is available now."""
        if self._file is None:
            return False
        chunk = self._file.read(_READ_BYTES)
        if chunk:
            if len(self._head) < _HEAD_BYTES and self._pos < _HEAD_BYTES:
                self._head = (self._head + chunk)[:_HEAD_BYTES]
            self._pos += len(chunk)
            self._split(chunk)
            return True
        if not self.follow:
            self._finish_partial()
            self.eof = True
            return False
        return self._check_rotation()

    def _split(self, chunk: bytes) -> None:
        parts = (self._partial + chunk).split(b"\n")
        self._partial = parts.pop()
        for part in parts:
            self._lineno += 1
            self._ready.append((self.generation, self._lineno, part))
        if len(self._partial) > MAX_LINE_BYTES:
            raise LiveError(f"{self.where(self._lineno + 1)}: line longer than {MAX_LINE_BYTES} bytes; "
                            "not a gate journal")

    def _finish_partial(self) -> None:
        if self._partial:
            self._lineno += 1
            self._ready.append((self.generation, self._lineno, self._partial))
            self._partial = b""

    def _check_rotation(self) -> bool:
        """At the end of the open file: reopen when the path now names another file, rewind when it shrank."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return False  # rotated away and not recreated yet: keep waiting
        if (st.st_dev, st.st_ino) != self._id:
            # Drain what the writer added to the old file before it moved on; its last line counts.
            while chunk := self._file.read(_READ_BYTES):  # type: ignore[union-attr]
                self._split(chunk)
            self._finish_partial()
            self._file.close()  # type: ignore[union-attr]
            self.rotations += 1
            return self._open()
        if st.st_size < self._pos or (self._head and self._rewritten()):
            self._rewind()
            return True
        return False

    def _rewind(self) -> None:
        self._file.seek(0)  # type: ignore[union-attr]
        self._pos, self._partial, self._lineno, self._head = 0, b"", 0, b""
        self.truncations += 1
        self.generation += 1

    def _rewritten(self) -> bool:
        """Truncated and written past the old length between two looks: the first bytes changed."""
        try:
            return os.pread(self._file.fileno(), len(self._head), 0) != self._head  # type: ignore[union-attr]
        except OSError:
            return False

    def close(self) -> None:
        """Close the open file."""
        if self._file is not None:
            self._file.close()
            self._file = None
