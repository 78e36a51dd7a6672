"""Error types. Every error raised on purpose by ncclforensics derives from ForensicsError."""

from __future__ import annotations

import re


# C0 controls but tab, DEL, C1 controls, line and paragraph separators, and lone surrogates.
_UNSAFE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
_UNSAFE_KEEP_NEWLINES = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def _shown(match: re.Match) -> str:
    char = match.group(0)
    if char == "\n":
        return "\\n"
    code = ord(char)
    if 0xD800 <= code <= 0xDFFF:
        return "\ufffd"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: object, newlines: bool = False) -> str:
    """`text` with every control character shown as an escape (`\\x1b`, `\\n`) and lone surrogates as U+FFFD, so
    that it prints as one line (with `newlines`, line breaks stay) and encodes as UTF-8."""
    text = text if isinstance(text, str) else str(text)
    pattern = _UNSAFE_KEEP_NEWLINES if newlines else _UNSAFE
    return pattern.sub(_shown, text) if pattern.search(text) else text


class ForensicsError(Exception):
    """Base of every error ncclforensics raises on purpose; the CLI turns it into one line and exit code 2."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint

    def __str__(self) -> str:
        text = super().__str__()
        return f"{text} (hint: {self.hint})" if self.hint else text


class SourceError(ForensicsError):
    """An input file could not be read or used at all."""


class HostileInputError(SourceError):
    """An input tried to do more than carry data (a pickle that imports, a decompression bomb)."""


class OutputError(ForensicsError):
    """An output location is not acceptable (inside an input folder, say)."""


class LiveError(ForensicsError):
    """The live mode could not do its job: a peer missing past its timeout, the store gone, a RAS server gone."""


def require(module: str, extra: str):
    """Import an optional dependency, or raise a ForensicsError naming the extra that provides it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ForensicsError(f"{module} is needed for this", hint=f"pip install 'ncclforensics[{extra}]'") from e
