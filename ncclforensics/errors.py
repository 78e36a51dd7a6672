"""Error types. Every error raised on purpose by ncclforensics derives from ForensicsError."""

from __future__ import annotations

import re

import click

EXIT_TROUBLE = 2  # the exit code of every command for input or output it cannot use


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


class ParseError(SourceError):
    """An input is unusable at a known place: `str(e)` is `path:line: message`."""

    def __init__(self, location: object, message: str, hint: str | None = None) -> None:
        super().__init__(f"{location}: {message}", hint)
        self.location = location


class HostileInputError(SourceError):
    """An input tried to do more than carry data (a pickle that imports, a decompression bomb)."""


class AlignError(ForensicsError):
    """The evidence cannot be aligned (for example no collectives at all)."""


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


class OneLineErrors(click.Group):
    """A command group that turns ForensicsError into one line on stderr and exit code 2; the traceback only with
    the root command's --debug. Used by `ncclforensics` and by its `live` group (which also runs on its own)."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except ForensicsError as e:
            if ctx.find_root().params.get("debug"):
                raise
            click.echo(f"error: {printable(e)}", err=True)  # one line, whatever the paths in it hold
            ctx.exit(EXIT_TROUBLE)
