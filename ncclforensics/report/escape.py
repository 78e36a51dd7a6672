"""Text from the inputs, made safe for each output's own syntax.

File names, call sites, comm names and messages come from hostile files. Printed raw, `\\e[2J` clears the
terminal, a file name holding a newline forges an `error:` line, `[/]` is a rich markup tag (a MarkupError
traceback), a lone surrogate (`"layer0\\ud800"` from a JSON `\\ud800` escape) cannot be encoded as UTF-8. So every
renderer passes input text through here: `printable` for plain lines, `markup` for rich markup strings,
`json_safe` for JSON. Markdown and HTML escaping is in document.py.
"""

from __future__ import annotations

import math

from rich.markup import escape as _rich_escape

from ..errors import printable


def markup(text: object, newlines: bool = False) -> str:
    """`printable(text)` escaped for rich markup: `[/]` in a path prints as itself."""
    return _rich_escape(printable(text, newlines))


def utf8(text: str) -> str:
    """`text` with lone surrogates as U+FFFD (control characters kept), for files written as UTF-8."""
    return text.encode("utf-8", "replace").decode("utf-8") if _has_surrogate(text) else text


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


NON_FINITE = {math.inf: "Infinity", -math.inf: "-Infinity"}


def json_safe(value: object) -> object:
    """`value` with every float that JSON cannot hold (NaN, Infinity, -Infinity: bare tokens `JSON.parse`
    rejects) as the string "NaN", "Infinity" or "-Infinity", and strings made valid UTF-8."""
    if isinstance(value, float):
        return value if math.isfinite(value) else "NaN" if math.isnan(value) else NON_FINITE[value]
    if isinstance(value, str):
        return utf8(value)
    if isinstance(value, dict):
        return {json_safe(k) if isinstance(k, str) else k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value
