"""Drafter-gate journals: one rank's gate decision per decode step (vLLM `input_fits_in_drafter`, §1.1).

Two spellings, one record per line, mixed freely in one file:

    {"step": 5, "rank": 0, "seq": 199995, "decision": "pass", "fits": true, "consensus": "max"}
    [rank0] INFO gate: step=5 rank=0 seq=199995 fits=1 decision=pass

A log line is a gate record when it has `step`, `rank` and `decision` keys; a JSON line when it has a
`decision` (then a missing `step` or `rank` is an error). Optional fields:
`seq` (the sequence length the rank saw), `proposed_pass_count`, `sched_count`, `fits`, `md_none`,
`max_model_len`, `spec_tokens`, `mode`, `time` (epoch seconds). Other keys (a consensus guard's `consensus`,
`local_decision`, `would_pass_total`, ...) are ignored.
A broken required field (step, rank, decision) drops the record; a broken optional field drops only that
field. Both are reported as errors at `file:line`.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..model import (
    Diagnostic,
    Evidence,
    FormatFacts,
    GateChoice,
    GateDecision,
    Location,
    SourceFormat,
)
from .base import InputFile
from .keyvalue import (
    Columns,
    LineRecord,
    bool_field,
    float_field,
    head_lines,
    int_field,
    optional,
    parse_records,
    present,
    record_share,
    required,
    shown,
    str_field,
)

_NEEDLES = ("decision",)
_JSON_KEYS = ('"decision"',)
_CHOICES = {choice.value: choice.value for choice in GateChoice}
_OPTIONAL_INTS = ("seq", "proposed_pass_count", "sched_count", "max_model_len", "spec_tokens")


def _is_gate(fields: Mapping[str, object], from_json: bool) -> bool:
    # A JSON line with a decision is a gate record (missing step or rank is then an error); a log line needs all
    # three keys, so that some other `decision=` in a log stays other log output.
    return "decision" in fields and (from_json or ("step" in fields and "rank" in fields))


class GateJournalSource:
    """Per-rank drafter-gate decisions, as JSON lines or `key=value` log lines."""

    facts = FormatFacts(SourceFormat.GATE_JOURNAL, "gate journal", records="gates", per_rank=True, claims_ranks=True,
                          markers=(b"decision",))
    format = facts.format

    def sniff(self, head: bytes, text: str) -> float:
        """The share of the head's non-blank lines that are gate records."""
        return record_share(head_lines(head, text), _NEEDLES, _is_gate)

    def parse(self, file: InputFile) -> Evidence:
        """Every gate record of the file; broken records become error diagnostics."""
        evidence, records = parse_records(file, self.facts, _NEEDLES, _JSON_KEYS, _is_gate, _decision, _COLUMNS)
        evidence.gates = records
        return evidence


def _decision(record: LineRecord, name: str) -> tuple[GateDecision | None, Diagnostic | None]:
    """One GateDecision from a record, and a Diagnostic naming every bad field (None when all are fine)."""
    fields = record.fields
    loc = Location(name, record.line)
    errors: list[str] = []
    step = required(int_field, fields, "step", errors)
    rank = required(int_field, fields, "rank", errors)
    choice = _choice(fields, errors)
    if step is None or rank is None or choice is None:
        return None, Diagnostic(loc, "broken gate record: " + "; ".join(errors))
    ints = {key: optional(int_field, fields, key, errors) for key in _OPTIONAL_INTS}
    decision = GateDecision(
        loc=loc,
        rank=rank,
        step=step,
        decision=choice,
        fits=optional(bool_field, fields, "fits", errors),
        md_none=optional(bool_field, fields, "md_none", errors),
        mode=optional(str_field, fields, "mode", errors),
        time=optional(float_field, fields, "time", errors, finite=True),
        **ints,
    )
    problem = Diagnostic(loc, "gate record with bad fields (read without them): " + "; ".join(errors)) if errors \
        else None
    return decision, problem


def _built(loc: Location, values: dict) -> GateDecision:
    return GateDecision(loc=loc, **values)


def _columns() -> Columns:
    """The column-wise reading of the same fields as `_decision` (a big journal is read so, see keyvalue.Columns)."""
    kinds: dict[str, object] = {"step": "int", "rank": "int", "decision": set(_CHOICES), "fits": "bool",
                                "md_none": "bool", "mode": "str", "time": "float"}
    kinds.update({key: "int" for key in _OPTIONAL_INTS})
    return Columns(kinds, ("step", "rank", "decision"), _built)


def _choice(fields: Mapping[str, object], errors: list[str]) -> str | None:
    """`pass` or `skip` (any case), else None with the reason in `errors`."""
    if not present(fields, "decision"):
        errors.append("no decision")
        return None
    value = fields["decision"]
    choice = _CHOICES.get(value.strip().lower()) if isinstance(value, str) else None
    if choice is None:
        errors.append(f"decision {shown(value)} is neither pass nor skip")
    return choice


_COLUMNS = _columns()
