"""Standard input as one more input file: `-` or `/dev/stdin` among the paths reads a pasted log.

The bytes are copied to a temporary file (parsers map and re-read their files) and named `<stdin>` in every
finding. The copy stops past MAX_STDIN_BYTES: a paste bigger than the largest text file any line-by-line parser
reads is refused in one line, like a file over its limit. Format detection then runs on the copy as on any file.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path
from typing import BinaryIO, Self

from ..model import Diagnostic, Location
from .base import MAX_TEXT_BYTES, InputFile

STDIN_PATHS = ("-", "/dev/stdin")
STDIN_NAME = "<stdin>"
MAX_STDIN_BYTES = MAX_TEXT_BYTES
_CHUNK = 1 << 20


def is_stdin(path: str) -> bool:
    """Whether a path on the command line means standard input."""
    return path in STDIN_PATHS


class SpooledStdin:
    """Standard input copied to a temporary folder; `close()` removes it (use as a context manager)."""

    def __init__(self, stream: BinaryIO | None = None) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="ncclforensics-stdin-"))
        self.file: InputFile | None = None
        self.problem: Diagnostic | None = None
        source = stream if stream is not None else sys.stdin.buffer
        target = self.folder / "stdin"
        copied = 0
        with open(target, "wb") as out:
            while chunk := source.read(_CHUNK):
                copied += len(chunk)
                if copied > MAX_STDIN_BYTES:
                    self.problem = Diagnostic(Location(STDIN_NAME), (
                        f"more than {MAX_STDIN_BYTES >> 20} MiB on standard input; refused (give the file's path "
                        f"instead)"))
                    break
                out.write(chunk)
        if self.problem is None:
            self.file = InputFile(path=target, name=STDIN_NAME, size=copied)

    def close(self) -> None:
        """Remove the copy."""
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
