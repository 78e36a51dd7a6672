"""Where a piece of evidence came from."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Location:
    """A place in an input: `path:line` for text, `path#entries[i]` for a record of a dump.

    Lines are 1-based; `record` is the 0-based index into a dump's `entries` (or another list named by `field`).
    """

    path: str
    line: int | None = None
    record: int | None = None
    field: str = "entries"

    def __str__(self) -> str:
        if self.record is not None:
            return f"{self.path}#{self.field}[{self.record}]"
        if self.line is not None:
            return f"{self.path}:{self.line}"
        return self.path
