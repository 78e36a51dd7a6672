"""What every source (input format) shares: the Source interface and safe reading of input files."""

from __future__ import annotations

import codecs
import io
import mmap
import os
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol
from collections.abc import Iterator

from ..errors import HostileInputError, SourceError
from ..model import Diagnostic, Evidence, FormatFacts, Location, Severity, SourceFormat

HEAD_BYTES = 64 * 1024
# A .gz that expands past this is treated as a decompression bomb; big real logs stay well under it.
DEFAULT_MAX_DECOMPRESSED = 2 * 1024**3
GZIP_MAGIC = b"\x1f\x8b"
# Per-file limits of text formats (every format but Flight Recorder dumps), so that one file cannot take the
# memory of the run: a line of more than MAX_LINE_BYTES is refused (a file is checked in windows of that size
# without a line break, so lines up to 64 MiB are always read and lines over 128 MiB always refused: a sparse
# file, one 2 GiB line in a small .gz); and a format read line by line in Python (all but NCCL debug logs,
# which polars streams) is refused above MAX_TEXT_BYTES, about 4x that much memory.
MAX_LINE_BYTES = 64 << 20
MAX_TEXT_BYTES = 1 << 30
_GUNZIP_STEP = 16 << 20  # bytes a decompression step yields at most


@dataclass
class InputFile:
    """One input file: how it is named in findings, and safe access to its (decompressed) content."""

    path: Path
    name: str  # as shown in locations: the path the user gave, or relative to the directory they gave
    # Read when the InputFile is made (not when the class is), so that a caller or a test can lower the module's limit.
    max_decompressed: int = field(default_factory=lambda: DEFAULT_MAX_DECOMPRESSED)
    size: int | None = None  # bytes on disk, when the walk already knows it (0: an empty file, read no further)
    _head: bytes | None = field(default=None, repr=False)

    @property
    def compressed(self) -> bool:
        """True for a gzip file (told by its magic bytes, not its name)."""
        with open(self.path, "rb") as f:
            return f.read(2) == GZIP_MAGIC

    def head(self) -> bytes:
        """The first 64 KiB of the content (decompressed), for format detection."""
        if self._head is None:
            if self.compressed:
                self._head = _gunzip(self.path, HEAD_BYTES, truncate=True)[0]
            else:
                with open(self.path, "rb") as f:
                    self._head = f.read(HEAD_BYTES)
        return self._head

    def read_bytes(self, max_line: int | None = MAX_LINE_BYTES, max_size: int | None = None,
                   max_lines: int | None = None) -> tuple[bytes, list[Diagnostic]]:
        """The whole content, decompressed with a size limit; a gzip that stops early yields what it had.
        `max_line`: refuse (SourceError) content with a line longer than this (None for binary formats).
        `max_size`: refuse content larger than this, as it inflates (a format read in memory: MAX_TEXT_BYTES).
        `max_lines`: refuse content of more line feeds than this, as it inflates (a format of one record a line)."""
        if self.compressed:
            if max_size is not None and max_size < self.max_decompressed:
                try:
                    data, problem = _gunzip(self.path, max_size, False, max_line, max_lines)
                except HostileInputError:
                    raise SourceError(f"{self.path}: gzip expands past {max_size >> 20} MiB, more than a file read in "
                                      f"memory may have; refusing the file (see MAX_TEXT_BYTES)") from None
            else:
                data, problem = _gunzip(self.path, self.max_decompressed, False, max_line, max_lines)
            return data, ([Diagnostic(Location(self.name), problem)] if problem else [])
        if max_line is not None:
            at = long_line_at(self.path, max_line)
            if at is not None:
                raise SourceError(long_line_message(self.path, at, max_line))
        if max_size is not None and (size := os.path.getsize(self.path)) > max_size:
            raise SourceError(f"{self.path}: {size} bytes, over the {max_size >> 20} MiB a file read in memory may "
                              f"have; refusing the file (see MAX_TEXT_BYTES)")
        data = self.path.read_bytes()
        if max_lines is not None and data.count(b"\n") > max_lines:
            raise SourceError(too_many_lines_message(self.path, max_lines))
        return data, []

    def read_text(self) -> tuple[str, list[Diagnostic]]:
        """The content as text: UTF-8, or UTF-16 with a BOM; undecodable bytes are replaced and reported.
        Read in memory, so at most MAX_TEXT_BYTES (a .gz too, as it inflates)."""
        data, problems = self.read_bytes(max_size=MAX_TEXT_BYTES)
        text, problem = decode(data, self.name)
        if problem:
            problems.append(problem)
        return text, problems

    def lines(self) -> tuple[list[str], list[Diagnostic]]:
        """The content split into lines (CR, LF or CRLF), line i+1 at index i."""
        text, problems = self.read_text()
        return split_lines(text), problems


def too_many_lines_message(path: Path, limit: int) -> str:
    return (f"{path}: more than {limit:,} lines, more than a file of records may have (one object a line, held in "
            f"memory); refusing the file (see MAX_RECORD_LINES): cut it to the steps in question (its last "
            f"{limit // 2:,} lines, say)")


def long_line_message(path: Path, at: int, limit: int) -> str:
    return (f"{path}: a line of more than {limit >> 20} MiB (from byte {at} of the content on); refusing the file "
            f"(see MAX_LINE_BYTES)")


def long_line_at(path: Path, limit: int) -> int | None:
    """The offset of a window of `limit` bytes without a line break in a plain file, or None. The windows are
    aligned, so a line of 2 x `limit` or more is always found and one of `limit` or less never; a normal file
    costs one short search per window (memory-mapped: the rest is never read). `limit` is a multiple of the
    mapping granularity."""
    try:
        size = os.path.getsize(path)
        if size < limit:
            return None
        with open(path, "rb") as f:
            for start in range(0, size - limit + 1, limit):  # one window mapped at a time: bounded address space
                with mmap.mmap(f.fileno(), limit, access=mmap.ACCESS_READ, offset=start) as mm:
                    if mm.find(b"\n") < 0 and mm.find(b"\r") < 0:
                        return start
    except (OSError, ValueError):  # unreadable or unmappable (a pipe): the read itself reports it
        return None
    return None


def _gunzip(path: Path, limit: int, truncate: bool, max_line: int | None = None,
            max_lines: int | None = None) -> tuple[bytes, str | None]:
    """Decompress at most `limit` bytes; over the limit is hostile unless `truncate` (reading a head)."""
    try:
        return _gunzip_stream(path, limit, truncate, max_line, max_lines)
    except zlib.error as e:
        # Corrupt data is a problem with this file, not a reason to stop: report it, read nothing from it.
        return b"", f"corrupt gzip data ({e})"


def _gunzip_stream(path: Path, limit: int, truncate: bool, max_line: int | None = None,
                   max_lines: int | None = None) -> tuple[bytes, str | None]:
    out = io.BytesIO()
    line_feeds = 0
    decomp = zlib.decompressobj(16 + zlib.MAX_WBITS)
    fed = False  # whether the current gzip member has been given any input
    run = 0  # bytes since the last line break (with max_line: one 2 GiB line in 2 MB stops at max_line)
    with open(path, "rb") as f:
        data = b""
        while True:
            if not data:
                data = f.read(1 << 20)
                if not data:
                    break
            # Every step is capped at the room left (+1 to notice going past it): a bomb never expands in memory,
            # whichever member of a multi-member file it hides in.
            piece = decomp.decompress(data, min(limit - out.tell() + 1, _GUNZIP_STEP))
            if max_line is not None and piece:
                last = max(piece.rfind(b"\n"), piece.rfind(b"\r"))
                first = min((i for i in (piece.find(b"\n"), piece.find(b"\r")) if i >= 0), default=len(piece))
                if run + first > max_line:
                    raise SourceError(long_line_message(path, out.tell() - run, max_line))
                run = run + len(piece) if last < 0 else len(piece) - last - 1
            if max_lines is not None:
                line_feeds += piece.count(b"\n")
                if line_feeds > max_lines:
                    raise SourceError(too_many_lines_message(path, max_lines))
            out.write(piece)
            fed = True
            if out.tell() > limit:
                if truncate:
                    return out.getvalue()[:limit], None
                raise HostileInputError(f"{path}: gzip expands past {limit} bytes; refusing it as a decompression bomb")
            if decomp.eof:
                # Concatenated gzip members are legal; keep going with the rest.
                data = decomp.unused_data
                decomp, fed = zlib.decompressobj(16 + zlib.MAX_WBITS), False
            else:
                data = decomp.unconsumed_tail
    if fed and not decomp.eof and not truncate:
        if not out.tell():
            return b"", "gzip stream ends before any content"
        return out.getvalue(), "gzip stream ends early (truncated file); read what it had"
    return out.getvalue(), None


def split_lines(text: str) -> list[str]:
    """Split on LF, CRLF or CR only (not on form feeds or Unicode separators), so numbers match `grep -n`."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def decode(data: bytes, name: str) -> tuple[str, Diagnostic | None]:
    """Decode bytes as UTF-8 (UTF-16 when a BOM says so); replace bad bytes and say where the first was."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            return data.decode("utf-16"), None
        except UnicodeDecodeError as e:
            return data.decode("utf-16", errors="replace"), Diagnostic(Location(name), f"bad UTF-16: {e.reason}")
    if data.startswith(codecs.BOM_UTF8):
        data = data[3:]
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        problem = Diagnostic(Location(name, line), "not valid UTF-8; undecodable bytes replaced", Severity.WARNING)
        return data.decode("utf-8", errors="replace"), problem


def head_text(head: bytes) -> str:
    """Decode a head for sniffing; never fails."""
    return decode(head, "")[0]


def looks_binary(head: bytes) -> bool:
    """NUL bytes in text that is not UTF-16 mark a binary file."""
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return False
    return b"\x00" in head[:8192]


def numbered(lines: list[str]) -> Iterator[tuple[int, str]]:
    """(1-based line number, text) pairs."""
    return enumerate(lines, start=1)


class Source(Protocol):
    """One input format: `sniff` scores how much a file's head looks like it, `parse` reads the whole file.

    `facts` says what the rest of the package needs to know of the format (model/formats.py); every Evidence
    `parse` returns carries them. `format` is `facts.format`."""

    facts: FormatFacts
    format: SourceFormat

    def sniff(self, head: bytes, text: str) -> float:
        """A score > 0 when the head (raw and decoded) looks like this format; the highest score wins."""
        ...

    def parse(self, file: InputFile) -> Evidence:
        """Read the file into Evidence; problems become Diagnostics, never exceptions (except SourceError)."""
        ...


def unreadable(file: InputFile, facts: FormatFacts, error: Exception) -> Evidence:
    """Evidence for a file that could not be read at all, with the reason as an error diagnostic."""
    if isinstance(error, SourceError):
        message = str(error).removeprefix(f"{file.path}: ")
    else:
        message = f"cannot read: {error}"
    return Evidence(path=file.name, format=facts.format, problems=[Diagnostic(Location(file.name), message)],
                    facts=facts)
