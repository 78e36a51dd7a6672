"""What the line-record sources share: `key=value` tokens in log lines, JSON-lines records, and field values.

A gate journal or a fingerprint trace is one record per line, written either as a JSON object
(`{"step": 5, "rank": 0, "decision": "pass"}`) or as `key=value` tokens anywhere in a log line
(`[rank0] 12:00:01 gate: step=5 rank=0 decision=pass`). `read_records` turns both into `LineRecord`s;
each source then says which records are its own (`wanted`) and converts the values with the `*_field` readers,
which raise `FieldError` with a message naming the field and the bad value.
"""

from __future__ import annotations

import json
import math
import re
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import polars as pl

from ..errors import SourceError
from ..model import Diagnostic, Evidence, FormatFacts, Location, Severity
from .base import HEAD_BYTES, MAX_TEXT_BYTES, InputFile, decode, looks_binary, split_lines, unreadable

# `key=value` with the key not glued to a word, dot or dash before it (so `nranks=4` is `nranks`, never `rank`,
# and `--step=3` is not a token). A value runs to a blank, `,` `;` or a closing bracket, so `[rank=0]:` gives
# `0`; a double-quoted value may hold anything but a newline.
_KEY_VALUE = re.compile(r'(?<![\w.\-])([A-Za-z_][\w.\-]*)=("(?:[^"\\\n]|\\.)*"|[^\s,;)\]}]*)')
_INTEGER = re.compile(r"[+-]?\d{1,30}")
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
_SHOWN_CHARS = 40  # a bad value longer than this is cut in messages
_INT64_MAX = 2**63 - 1  # what a polars Int64 column (and any sane step, rank or count) holds
CUT_SHORT = ("the file ends inside this line (no newline after it, where every other line has one): cut short; "
             "not read")


def key_values(line: str) -> dict[str, str]:
    """The `key=value` tokens of one log line; the first occurrence of a key wins.

    >>> key_values('I0527 gate.py:12] step=5 rank=0 fits=1 decision=pass mode="observe only"')
    {'step': '5', 'rank': '0', 'fits': '1', 'decision': 'pass', 'mode': 'observe only'}
    """
    found: dict[str, str] = {}
    for match in _KEY_VALUE.finditer(line):
        key, value = match.group(1), match.group(2)
        if key in found:
            continue
        if len(value) >= 2 and value[0] == '"' and value[-1] == '"':
            value = value[1:-1].replace('\\"', '"').replace("\\\\", "\\")
        found[key] = value
    return found


def read_lines(file: InputFile, facts: FormatFacts) -> tuple[list[str], Evidence]:
    """The file's lines and the Evidence to fill, holding any reading problems; a corrupt gzip gives no lines."""
    lines, evidence, _ = read_lines_cut(file, facts)
    return lines, evidence


# Record formats (gate journals, fingerprint traces) make one object per line: about 0.75 GiB and a minute per
# million lines, so a file of more lines is refused before it is decoded (a .gz of one repeated line, 700 MB
# inflated, took 3 GiB and over 15 minutes). README, "Per-file limits".
MAX_RECORD_LINES = 2_000_000


def read_lines_cut(file: InputFile, facts: FormatFacts,
                   max_lines: int | None = None) -> tuple[list[str], Evidence, bool]:
    """read_lines, and whether the last line has no newline after it: a file written line by line and cut
    short (the process killed mid-write, a copy stopped early) ends inside its last line. `max_lines`: refuse a
    file of more line feeds (MAX_RECORD_LINES)."""
    try:
        data, problems = file.read_bytes(max_size=MAX_TEXT_BYTES, max_lines=max_lines)
        text, problem = decode(data, file.name)
        del data
        if problem:
            problems.append(problem)
    except (SourceError, zlib.error, EOFError) as e:  # gzip magic, then bytes that do not inflate
        return [], unreadable(file, facts, e), False
    evidence = Evidence(path=file.name, format=facts.format, problems=problems, facts=facts)
    return split_lines(text), evidence, text[-1:] not in ("", "\n", "\r")


def json_object(text: str) -> tuple[dict | None, str | None]:
    """Parse one JSON line: (the object, None), or (None, what is wrong with it)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        return None, f"invalid JSON: {e.msg} (column {e.colno})"
    except (ValueError, RecursionError) as e:  # e.g. an integer of more than 4300 digits, or nesting too deep
        return None, f"invalid JSON: {e}"
    if not isinstance(value, dict):
        return None, f"JSON line is {type(value).__name__}, not an object"
    return value, None


def jsonl_mode(lines: Sequence[str]) -> bool:
    """True when at least half of the non-blank lines start with `{`: a JSON-lines file, where every line counts.

    `#` comment lines count as blank.
    """
    blank = json_lines = 0
    for line in lines:
        stripped = line.lstrip()
        if not stripped or stripped[0] == "#":
            blank += 1
        elif stripped[0] == "{":
            json_lines += 1
    nonblank = len(lines) - blank
    return nonblank > 0 and 2 * json_lines >= nonblank


@dataclass(frozen=True, slots=True)
class LineRecord:
    """The fields of one record: JSON values, or strings for `key=value` tokens."""

    line: int  # 1-based
    fields: Mapping[str, object]
    from_json: bool


def parse_records(
    file: InputFile,
    facts: FormatFacts,
    needles: tuple[str, ...],
    json_keys: tuple[str, ...],
    wanted: Callable[[Mapping[str, object], bool], bool],
    convert: Callable[[LineRecord, str], tuple[object | None, Diagnostic | None]],
    columns: Columns | None = None,
    begun: Callable[[str], int | None] | None = None,
) -> tuple[Evidence, list]:
    """A record parser's whole job: the file's records (read_records), each made a value by `convert(record,
    name)`, which also names its bad fields. Returns the Evidence (with every problem) and the values.

    With `columns`, a file of COLUMNAR_MIN_LINES lines or more is read column-wise first (see `Columns`): the lines
    whose every field reads cleanly become values without Python per field; the others, and the last line of a
    file cut short, go through `convert` as above. Same values and problems either way, in line order.
    `begun(line)`: the step a record cut short had begun, which the file's last line gives where it was cut
    (`Evidence.cut_step`)."""
    lines, evidence, cut = read_lines_cut(file, facts, MAX_RECORD_LINES)
    cut_last = cut and len(lines) > 1
    if cut_last and begun is not None:
        evidence.cut_step = begun(lines[-1])
    fast: dict[int, object] = {}
    if columns is not None and len(lines) >= COLUMNAR_MIN_LINES:
        fast = columns.read(lines[:-1] if cut_last else lines, file.name)
    rest = [(n, line) for n, line in enumerate(lines, start=1) if n not in fast]
    slow: dict[int, list] = {}
    for item in read_records([line for _, line in rest], file.name, needles, json_keys, wanted,
                             cut_last=cut_last, strict=jsonl_mode(lines)):
        number = rest[(item.line if isinstance(item, LineRecord) else item.loc.line) - 1][0]
        if isinstance(item, Diagnostic):
            slow.setdefault(number, []).append(Diagnostic(Location(file.name, number), item.message, item.severity))
            continue
        value, problem = convert(LineRecord(number, item.fields, item.from_json), file.name)
        slow.setdefault(number, []).extend(x for x in (value, problem) if x is not None)
    values = []
    for number in sorted(fast.keys() | slow.keys()):
        for item in [fast[number]] if number in fast else slow[number]:
            (evidence.problems if isinstance(item, Diagnostic) else values).append(item)
    return evidence, values


COLUMNAR_MIN_LINES = 2_000  # below this, the Python reader alone is as fast


@dataclass(frozen=True)
class Columns:
    """How a source's records read column-wise with polars: each field's key and kind (`int`, `bool`, `float`,
    `str` or a set of choices), the keys a record must have, and `build(line, values)` making the value.

    A line is read here only when it is a plain `key=value` line (no `{` or `"`) or a JSON object line, holds every
    required key, and every field it holds reads as its kind (ints from 0 to 2**63-1, finite floats, flags 0/1,
    true/false, yes/no, on/off, a known choice); anything else is left to the Python reader, which names what is
    wrong. `key=value` fields are the first `key=` token not glued to a word, dot or dash (as `key_values`)."""

    kinds: Mapping[str, object]
    required: tuple[str, ...]
    build: Callable[[Location, dict], object]

    def read(self, lines: Sequence[str], name: str) -> dict[int, object]:
        """line number (1-based) -> value, for the lines that read cleanly."""
        frame = pl.DataFrame({"text": pl.Series(lines, dtype=pl.String)}).with_row_index("line", offset=1)
        frame = frame.with_columns(pl.col("text").str.strip_chars())
        text = pl.col("text")
        frame = frame.with_columns(is_json=text.str.starts_with("{"),
                                   plain=~text.str.contains("[{\"]") & text.str.contains("=", literal=True)
                                   & ~text.str.starts_with("#"))
        any_json, any_plain = frame.select(pl.col("is_json").any(), pl.col("plain").any()).row(0)
        is_json, plain = pl.col("is_json"), pl.col("plain")
        fields, checks = [], []
        for key, kind in self.kinds.items():  # a spelling no line uses costs nothing
            from_text = text.str.extract(r"(?:^|[^\w.\-])" + re.escape(key) + r"=([^\s,;)\]}]*)", 1) \
                if any_plain else pl.lit(None, pl.String)
            from_json = text.str.json_path_match(f"$.{key}") if any_json else pl.lit(None, pl.String)
            raw = pl.when(is_json).then(from_json).when(plain).then(from_text).otherwise(None)
            raw = pl.when(raw.str.strip_chars().is_in(list(_ABSENT))).then(None).otherwise(raw)
            value, ok = _column(raw if kind == "str" else raw.str.strip_chars(), kind)
            if kind == "str" and any_json:  # a JSON value read as text must be a JSON string, not a number or flag
                ok = ok & (~is_json | raw.is_null() | text.str.contains(f'"{re.escape(key)}"\\s*:\\s*"'))
            if key in self.required:
                ok = ok & raw.is_not_null()
            fields.append(value.alias(key))
            checks.append(ok)
        clean = ((plain | is_json) & pl.all_horizontal(checks)).fill_null(False)
        rows = frame.filter(clean).select("line", *fields)
        names = list(self.kinds)
        return {row[0]: self.build(Location(name, row[0]), dict(zip(names, row[1:]))) for row in rows.iter_rows()}


def _column(raw: pl.Expr, kind: object) -> tuple[pl.Expr, pl.Expr]:
    """The typed value of a field column and whether it read cleanly (an absent value is clean: null)."""
    absent = raw.is_null()
    if kind == "int":
        good = raw.str.contains(r"^\+?\d{1,19}$")
        number = raw.str.strip_chars_start("+").cast(pl.UInt64, strict=False)
        good = good & number.is_not_null() & (number <= _INT64_MAX)
        return pl.when(good).then(number).cast(pl.Int64), absent | good
    if kind == "float":
        number = raw.cast(pl.Float64, strict=False)
        return number, absent | number.is_finite()
    if kind == "bool":
        lowered = raw.str.to_lowercase()
        return lowered.is_in(sorted(_TRUE)), absent | lowered.is_in(sorted(_TRUE | _FALSE))
    if kind == "str":
        return raw, pl.lit(True)
    lowered = raw.str.to_lowercase()  # a set of choices, matched in any case
    return lowered, absent | lowered.is_in(sorted(kind))


def read_records(
    lines: Sequence[str],
    name: str,
    needles: tuple[str, ...],
    json_keys: tuple[str, ...],
    wanted: Callable[[Mapping[str, object], bool], bool],
    cut_last: bool = False,
    strict: bool | None = None,
) -> Iterator[LineRecord | Diagnostic]:
    """The records of one source in `lines`, and a Diagnostic for each line that is a broken record.

    `cut_last`: the last line has no newline after it while the lines before have theirs, so the file was cut
    inside it. A JSON record there that parses whole is whole (its closing brace came); anything else there (a
    `key=value` record, whose `checksum=94.` may have been `94.5`, or JSON cut mid-way) is reported as cut short,
    never read as a value.

    `needles`: substrings a `key=value` record line must contain one of (the cheap test before tokenising).
    `json_keys`: quoted keys (`'"decision"'`) that make a non-JSON line starting with `{` a broken record even in a
    file that is not JSON lines. `wanted(fields, from_json)`: whether a parsed line is a record of this source.
    Blank lines and `#` comments are skipped.
    In a JSON-lines file (see `jsonl_mode`) every other line must be a JSON object or a wanted `key=value` record;
    JSON objects that are not wanted (metadata lines, other record kinds) are skipped silently.
    """
    strict = jsonl_mode(lines) if strict is None else strict  # `strict`: the whole file's mode, for a part of it
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if not stripped or stripped[0] == "#":
            continue  # blank, or a comment (as the live journal tail also skips)
        problem = None
        last_cut = cut_last and number == len(lines)
        start = 0 if stripped[0] == "{" else stripped.find('{"')
        if start >= 0:
            obj, problem = json_object(stripped[start:])
            if obj is not None and wanted(obj, True):
                yield LineRecord(number, obj, True)
                continue
            if last_cut and start == 0 and problem:
                yield Diagnostic(Location(name, number), CUT_SHORT, Severity.WARNING)
                continue
            if obj is not None and start == 0:
                continue  # a JSON line of another kind (a header, another record type)
            if problem and not (any(key in stripped for key in json_keys) or (strict and start == 0)):
                problem = None  # a log line that merely holds a `{`: try it as `key=value` below
        if "=" in stripped and any(needle in stripped for needle in needles):
            fields = key_values(stripped)
            if wanted(fields, False) or last_cut:
                yield Diagnostic(Location(name, number), CUT_SHORT, Severity.WARNING) if last_cut else \
                    LineRecord(number, fields, False)
                continue
        if last_cut:  # a record cut before the key that makes it one (`step=5 rank=0 se`), or before its first `=`
            yield Diagnostic(Location(name, number), CUT_SHORT, Severity.WARNING)
            continue
        if problem is None and strict:
            problem = "neither a JSON object nor a key=value record in a JSON-lines file"
        if problem is not None:
            yield Diagnostic(Location(name, number), problem)


def head_lines(head: bytes, text: str) -> list[str]:
    """The complete lines of a sniffed head: none for binary content, the last one dropped when the head was cut."""
    if looks_binary(head):
        return []
    lines = text.splitlines()
    if len(head) >= HEAD_BYTES and lines:
        lines.pop()
    return lines


def record_share(lines: Sequence[str], needles: tuple[str, ...],
                 wanted: Callable[[Mapping[str, object], bool], bool]) -> float:
    """Sniff score: the share of non-blank lines that are records of one source (0 when none is)."""
    nonblank = sum(1 for line in lines if line.strip())
    if not nonblank:
        return 0.0
    hits = sum(1 for item in read_records(lines, "", needles, (), wanted) if isinstance(item, LineRecord))
    return hits / nonblank


class FieldError(ValueError):
    """A field whose value cannot be used; the message names the field and the value."""


def shown(value: object) -> str:
    """A value as a message quotes it, cut to a readable length."""
    text = repr(value)
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 3] + "..."


_ABSENT = {"", "None", "null"}  # `key=`, and what Python's and JSON's "no value" look like in a log line


def present(fields: Mapping[str, object], key: str) -> bool:
    """True when the field is there and not JSON null (nor an empty `key=`, `key=None` or `key=null`)."""
    value = fields.get(key)
    return value is not None and not (isinstance(value, str) and value.strip() in _ABSENT)


def int_field(fields: Mapping[str, object], key: str, minimum: int | None = 0) -> int | None:
    """An integer field (JSON int, integral float, or digits); None when absent."""
    if not present(fields, key):
        return None
    value = fields[key]
    number: int | None = None
    if isinstance(value, bool):
        number = None
    elif isinstance(value, int):
        number = value
    elif isinstance(value, float) and math.isfinite(value) and value.is_integer() or isinstance(value, str) and _INTEGER.fullmatch(value.strip()):
        number = int(value)
    if number is None:
        raise FieldError(f"{key} {shown(value)} is not an integer")
    if minimum is not None and number < minimum:
        raise FieldError(f"{key} {number} is below {minimum}")
    if abs(number) > _INT64_MAX:
        raise FieldError(f"{key} {shown(value)} is too large")
    return number


def float_field(fields: Mapping[str, object], key: str, finite: bool = False) -> float | None:
    """A number field (JSON number or numeric text; nan and inf allowed unless `finite`); None when absent."""
    if not present(fields, key):
        return None
    value = fields[key]
    number: float | None = None
    try:
        if isinstance(value, (int, float)) and not isinstance(value, bool) or isinstance(value, str) and len(value) <= 1000:
            number = float(value)
    except (ValueError, OverflowError):  # not numeric text; an integer too large for a float
        number = None
    if number is None:
        raise FieldError(f"{key} {shown(value)} is not a number")
    if finite and not math.isfinite(number):
        raise FieldError(f"{key} {shown(value)} is not a finite number")
    return number


def bool_field(fields: Mapping[str, object], key: str) -> bool | None:
    """A flag field: JSON bool, 0/1, or true/false/yes/no text; None when absent."""
    if not present(fields, key):
        return None
    value = fields[key]
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
    raise FieldError(f"{key} {shown(value)} is not a flag (true/false or 1/0)")


def str_field(fields: Mapping[str, object], key: str) -> str | None:
    """A text field (numbers are taken as their text); None when absent."""
    if not present(fields, key):
        return None
    value = fields[key]
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    raise FieldError(f"{key} {shown(value)} is not text")


def optional(read: Callable[..., object], fields: Mapping[str, object], key: str, errors: list[str],
             **options: object):
    """`read(fields, key)`, or None with the reason added to `errors` when the value is bad."""
    try:
        return read(fields, key, **options)
    except FieldError as e:
        errors.append(str(e))
        return None


def required(read: Callable[..., object], fields: Mapping[str, object], key: str, errors: list[str]):
    """Like `optional`, and a missing field is an error too."""
    if not present(fields, key):
        errors.append(f"no {key}")
        return None
    return optional(read, fields, key, errors)
