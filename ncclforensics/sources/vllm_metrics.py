"""vLLM speculative-decoding metrics lines (reference: peers_and_vllm.md §1.4), every format since V0:

    V0 (<=0.9.2)  Speculative metrics: Draft acceptance rate: 0.200, System efficiency: 0.167,
                  Number of speculative tokens: 5, Number of accepted tokens: 1, Number of draft tokens: 5,
                  Number of emitted tokens: 1.
                  (totals since the server started: `cumulative`; the other formats count one interval)
    V1 pre-rename Speculative metrics: Draft acceptance rate: 1.000, Number of accepted tokens: 66, ...
    0.8.3-0.8.4   SpecDecoding metrics: Draft acceptance rate: 62.3%, Accepted: 282 tokens, Drafted: 453 tokens
    0.8.5-0.10.1  ... Draft acceptance rate: %, Mean acceptance length: 2.87, Accepted: .., Drafted: ..,
                  Per-position acceptance rate: 0.821, 0.609, 0.437
    0.10.2+       SpecDecoding metrics: Mean acceptance length: 2.87, Accepted throughput: 9.40 tokens/s,
                  Drafted throughput: 15.10 tokens/s, Accepted: 282 tokens, Drafted: 453 tokens,
                  Per-position acceptance rate: 0.821, 0.609, 0.437, Avg Draft acceptance rate: 62.3%

Fields are found by name, never by position (the order changed across releases, and forks add fields such as
`Rejected: 3 tokens`); unknown fields are skipped. The per-position rates are the comma-separated numbers
after their key (no brackets upstream; a bracketed list is read too).
A rate with `%` is a percent; a rate without one is a fraction (the V0 format), unless it is above 1.
Before the message may come `(APIServer pid=95669) INFO 07-20 18:11:49 [metrics.py:101] ` or the older
`INFO 02-06 03:05:53 metrics.py:475] `, with ANSI colours; `process` is the pid of that prefix. Without a
pid, it is the `Engine NNN` of the stats line before (DP>1), else None. vLLM's JSON logging is read too.

`vllm bench serve` prints one block per run (percent values, one position per line); it becomes one record at
its heading line, with no process:

    ---------------Speculative Decoding---------------
    Acceptance rate (%):                     73.47
    Acceptance length:                       3.20
    Drafts:                                  6393
    Draft tokens:                            19179
    Accepted tokens:                         14090
    Per-position acceptance (%):
      Position 0:                            83.42
"""

from __future__ import annotations

import math
import re

from ..model import Diagnostic, Evidence, FormatFacts, Location, Severity, SourceFormat, SpecDecodeMetrics
from .base import InputFile
from .keyvalue import head_lines, json_object, read_lines, shown

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_MARKER = re.compile(r"\b(?:SpecDecoding|Speculative) metrics:")
_NEEDLES = ("SpecDecoding metrics:", "Speculative metrics:")
_STATS_NEEDLE = "Avg prompt throughput:"  # the stats line vLLM logs just before each SpecDecoding line
# (APIServer pid=95669), (RayWorkerWrapper pid=7, ip=10.0.0.1); bounded so that no line can make it slow.
_PROCESS = re.compile(r"\([^()\s]{0,80}\s?pid=(\d{1,12})[^()]{0,80}\)")
_ENGINE = re.compile(r"\bEngine (\d+):")
# A key: a letter after the start or a comma, up to `: `; numbers of the per-position run never start one.
# Words are joined by single blanks so that a long run of blanks cannot make the match backtrack quadratically.
_KEY = re.compile(r"(?:^|,)\s*([A-Za-z][\w()/%-]*(?: [\w()/%-]+)*)\s*:(?=\s|$)")
_NUMBER = re.compile(r"\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf))\s*(%?)", re.IGNORECASE)
_ITEM_SPLIT = re.compile(r"[,\s]+")
_BENCH_NEEDLE = "Speculative Decoding"
_BENCH_HEADING = re.compile(r"^\s*-{3,}\s*Speculative Decoding\s*-{3,}\s*$")
_BENCH_LINE = re.compile(r"^\s*([A-Za-z][\w()%/-]*(?: [\w()%/-]+)*)\s*:(.*)$")
_BENCH_POSITION = re.compile(r"position (\d{1,4})")
# A metrics line is a few hundred characters (a JSON log record a few thousand); the regexes over a line of
# megabytes take seconds, so longer lines are set aside.
_MAX_LINE = 1 << 16

# Field name (lower case) -> (SpecDecodeMetrics field, how to read the value).
_FIELDS = {
    "mean acceptance length": ("mean_acceptance_length", "float"),
    "accepted": ("accepted", "int"),
    "number of accepted tokens": ("accepted", "int"),
    "drafted": ("drafted", "int"),
    "number of draft tokens": ("drafted", "int"),
    "per-position acceptance rate": ("per_position", "rates"),
    "avg draft acceptance rate": ("avg_acceptance_rate", "rate"),
    "draft acceptance rate": ("avg_acceptance_rate", "rate"),
}
# The same for the `vllm bench serve` block (its `Drafts:`, the number of drafts, has no field in the model).
_BENCH_FIELDS = {
    "acceptance rate (%)": ("avg_acceptance_rate", "percent"),
    "acceptance length": ("mean_acceptance_length", "float"),
    "draft tokens": ("drafted", "int"),
    "accepted tokens": ("accepted", "int"),
}


class VllmMetricsSource:
    """vLLM `SpecDecoding metrics` / `Speculative metrics` log lines and `vllm bench serve` blocks."""

    facts = FormatFacts(SourceFormat.VLLM_METRICS, "vLLM metrics log", records="metrics",
                          markers=(b"SpecDecoding metrics", b"Speculative metrics"))
    format = facts.format

    def sniff(self, head: bytes, text: str) -> float:
        """Share of non-blank head lines that are metrics lines or bench-block lines (vLLM stats lines count half)."""
        lines = head_lines(head, text)
        nonblank = hits = 0
        for line in lines:
            if not line.strip():
                continue
            nonblank += 1
            if any(needle in line for needle in _NEEDLES) and _MARKER.search(line):
                hits += 1
            elif _STATS_NEEDLE in line:
                hits += 0.5
        for start, end in _bench_blocks(lines):
            hits += end - start
        return hits / nonblank if nonblank else 0.0

    def parse(self, file: InputFile) -> Evidence:
        """Every metrics line of the file; other lines are other log output and skipped."""
        lines, evidence = read_lines(file, self.facts)
        blocks = dict(_bench_blocks(lines))
        engine: str | None = None  # `Engine NNN` of the latest stats line without a pid prefix
        for index, raw in enumerate(lines):
            if index in blocks:
                loc = Location(file.name, index + 1)
                metrics, errors = _bench(lines[index + 1:blocks[index]], loc)
                _keep(evidence, loc, "vllm bench Speculative Decoding block", metrics, errors)
                continue
            if not any(needle in raw for needle in _NEEDLES) and _STATS_NEEDLE not in raw:
                continue
            if len(raw) > _MAX_LINE:
                evidence.problems.append(Diagnostic(Location(file.name, index + 1), f"line of {len(raw)} characters "
                                                    "is too long to be a vLLM metrics line; skipped"))
                continue
            line, process = _message(_ANSI.sub("", raw))
            marker = _MARKER.search(line)
            if marker is None:
                found = _ENGINE.search(line)
                if found and process is None:
                    engine = f"Engine {found.group(1)}"
                continue
            loc = Location(file.name, index + 1)
            metrics, errors = _metrics(line[marker.end():], loc, process or engine)
            _keep(evidence, loc, f"{marker.group(0)[:-1]} line", metrics, errors)
        return evidence


def _keep(evidence: Evidence, loc: Location, what: str, metrics: SpecDecodeMetrics | None, errors: list[str]) -> None:
    if metrics is not None:
        evidence.metrics.append(metrics)
    bad = [e for e in errors if not e.startswith(_DOUBT)]
    doubts = [e.removeprefix(_DOUBT) for e in errors if e.startswith(_DOUBT)]
    if bad:
        evidence.problems.append(Diagnostic(loc, f"{what}: " + "; ".join(bad)))
    if doubts:
        evidence.problems.append(Diagnostic(loc, f"{what}: implausible: " + "; ".join(doubts), Severity.WARNING))


def _message(line: str) -> tuple[str, str | None]:
    """The log message (the line itself, or the `message` of a JSON log record) and the pid it names."""
    stripped = line.strip()
    if stripped.startswith("{"):
        record, _ = json_object(stripped)
        if record is not None:
            message = record.get("message", record.get("msg"))
            pid = record.get("process", record.get("pid"))
            if isinstance(message, str):
                return message, str(pid) if isinstance(pid, (int, str)) and not isinstance(pid, bool) else None
    marker = _MARKER.search(line)
    found = _PROCESS.search(line, 0, marker.start() if marker else len(line))
    return line, found.group(1) if found else None


def _metrics(body: str, loc: Location, process: str | None) -> tuple[SpecDecodeMetrics | None, list[str]]:
    """Read the `key: value` fields after the marker; a bad value is left out and named in the errors."""
    keys = list(_KEY.finditer(body))
    values: dict[str, object] = {}
    errors: list[str] = []
    doubts: list[str] = []
    for i, key in enumerate(keys):
        name = " ".join(key.group(1).split())
        target = _FIELDS.get(name.lower())
        if target is None or target[0] in values:
            continue
        end = keys[i + 1].start() if i + 1 < len(keys) else len(body)
        text = body[key.end():end].strip().rstrip(",").strip()
        field, kind = target
        try:
            values[field] = _READERS[kind](text)
        except ValueError:
            values[field] = None
            errors.append(f"{name} {shown(text)} is not {_WHAT[kind]}")
            continue
        doubt = _implausible(kind, text, values[field])
        if doubt:
            doubts.append(f"{name} {shown(text)} {doubt}")
    if not values:
        return None, ["no known field (Mean acceptance length, Accepted, Drafted, Draft acceptance rate ...)"]
    values = {k: v for k, v in values.items() if v is not None}
    # Only vLLM V0 logs `System efficiency`, and its counts and rate are totals since the server started.
    values["cumulative"] = any(" ".join(key.group(1).split()).lower() == "system efficiency" for key in keys)
    if errors and not values:
        return None, errors
    return SpecDecodeMetrics(loc=loc, process=process, **values), errors + [_DOUBT + d for d in doubts]


_DOUBT = "implausible: "  # marks a doubt among the errors: _keep reports it as a warning


def _implausible(kind: str, text: str, value: object) -> str | None:
    """Why a value that parsed is not one vLLM writes, or None: a rate above 1 without `%` (read as a percent,
    as 62.3 is, but 1.9 could as well be a broken 1.9x), a percent above 100, a per-position rate above 1."""
    if kind == "rate" and isinstance(value, float):
        number, percent, _ = _number(text)
        if not percent and 1 < number <= 100:
            return f"is above 1 without a %: read as {number:g}%"
        if number > 100:
            return "is above 100%"
    if kind == "percent" and isinstance(value, float) and value > 1:
        return "is above 100%"
    if kind == "rates" and any(isinstance(v, float) and v > 1 for v in value):
        return "holds a rate above 1"
    return None


def _bench_blocks(lines: list[str]) -> list[tuple[int, int]]:
    """(heading index, end index) of each `vllm bench serve` Speculative Decoding block: the heading and the
    `label: value` lines after it (a `====` rule, a `----` heading or any other line ends it)."""
    blocks = []
    for i, line in enumerate(lines):
        if _BENCH_NEEDLE in line and _BENCH_HEADING.match(line):
            end = i + 1
            while end < len(lines) and _BENCH_LINE.match(lines[end]):
                end += 1
            if end > i + 1:  # a heading alone (a cut paste) says nothing
                blocks.append((i, end))
    return blocks


def _bench(block: list[str], loc: Location) -> tuple[SpecDecodeMetrics | None, list[str]]:
    """One record from the lines of a `vllm bench serve` block below its heading (percents become fractions)."""
    values: dict[str, object] = {}
    positions: dict[int, float] = {}
    errors: list[str] = []
    for line in block:
        label, text = _BENCH_LINE.match(line).groups()
        text = text.strip()
        name = " ".join(label.split()).lower()
        position = _BENCH_POSITION.fullmatch(name)
        target = ("per_position", "percent") if position else _BENCH_FIELDS.get(name)
        if target is None:
            continue  # Drafts:, the `Per-position acceptance (%):` sub-heading, fields of newer releases
        try:
            value = _READERS[target[1]](text)
        except ValueError:
            errors.append(f"{label} {shown(text)} is not {_WHAT[target[1]]}")
            continue
        if position:
            positions[int(position.group(1))] = value if value is not None else math.nan
        elif value is not None:
            values.setdefault(target[0], value)
    if positions:
        values["per_position"] = tuple(positions.get(i, math.nan) for i in range(max(positions) + 1))
    if not values:
        return None, errors or ["no known field (Acceptance rate (%), Acceptance length, Accepted tokens ...)"]
    return SpecDecodeMetrics(loc=loc, **values), errors


def _number(text: str) -> tuple[float, bool, str]:
    """The leading number of a value, whether a `%` follows it, and the text after it."""
    match = _NUMBER.match(text)
    if match is None:
        raise ValueError(text)
    return float(match.group(1)), bool(match.group(2)), text[match.end():]


def _int(text: str) -> int:
    """`282 tokens` -> 282; `1.` (V0's full stop) -> 1; counts past Int64 are refused."""
    match = _NUMBER.match(text)
    if match is None or match.group(2):
        raise ValueError(text)
    digits = match.group(1).rstrip(".")
    if not digits.isdigit() or len(digits) > 18:
        raise ValueError(text)
    return int(digits)


def _float(text: str) -> float | None:
    """`2.87` -> 2.87; `nan` (nothing drafted) -> None."""
    value, percent, _ = _number(text)
    if percent:
        raise ValueError(text)
    return value if math.isfinite(value) else None


def _rate(text: str) -> float | None:
    """`62.3%` -> 0.623, `0.200` -> 0.2, `nan%` -> None."""
    value, percent, _ = _number(text)
    if not math.isfinite(value):
        return None
    if value < 0:
        raise ValueError(text)
    return _fraction(value) if percent or value > 1 else value


def _percent(text: str) -> float | None:
    """`73.47` (a percent, whether or not a `%` follows) -> 0.7347; `nan` -> None."""
    value, _, rest = _number(text)
    if rest.strip() or (math.isfinite(value) and value < 0):
        raise ValueError(text)
    return _fraction(value) if math.isfinite(value) else None


def _rates(text: str) -> tuple[float, ...]:
    """`0.821, 0.609, 0.437` (or bracketed, or with `%`) -> fractions; nan kept where a position had no drafts."""
    items = [item for item in _ITEM_SPLIT.split(text.strip().strip("[]()").rstrip(".")) if item]
    out = []
    for item in items:
        value, percent, rest = _number(item)
        if rest.strip() or (math.isfinite(value) and value < 0):
            raise ValueError(text)
        out.append(_fraction(value) if percent else value)
    if not out:
        raise ValueError(text)
    return tuple(out)


def _fraction(percent: float) -> float:
    """62.3 -> 0.623, rounded so that the printed digits survive (not 0.6229999999999999)."""
    return round(percent / 100, 12) if math.isfinite(percent) else percent


_READERS = {"int": _int, "float": _float, "rate": _rate, "rates": _rates, "percent": _percent}
_WHAT = {"int": "a count", "float": "a number", "rate": "a rate", "rates": "a list of rates", "percent": "a percent"}
