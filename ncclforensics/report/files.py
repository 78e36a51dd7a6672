"""Writing output files: whole or not at all, and never through a link.

An output path was checked against the inputs (sources.discover.check_output) before anything is computed; the
write itself then goes to a temporary file beside it and is renamed over the path, so that a link left at the
path (say `report.md` -> an input log) is replaced, never followed, and a run killed mid-write leaves no half
file.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_replacing(path: str | Path, data: bytes) -> Path:
    """Write `data` to `path` by renaming a temporary file of the same folder over it; returns the path."""
    path = Path(path)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path
