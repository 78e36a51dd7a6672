"""Fingerprint traces: checksums a rank computed after each step, or after each collective.

Two spellings, one record per line, mixed freely in one file:

    {"step": 0, "op": 0, "rank": 0, "tag": "layer0", "kind": "AllReduce", "numel": 512,
     "sum": -1124.0, "expected_sum": -1124.0, "digest": "bbf2b25758600fd3"}
    step=9 rank=0 checksum=11776.000000

A line is a fingerprint record when it has `digest`, `sum`, `checksum` or `expected_sum` and no `decision`
(that is a gate record), plus `step` and `rank` keys when written as `key=value`; it then needs valid `step`,
`rank` and a digest or sum. `checksum` is read as `sum` (when `sum` is absent). `kind` is normalised to NCCL's op name.
`op` is whatever ordinal the writer used: in the real per-collective traces it counts collectives across
steps (step 1 starts at op 4 with four collectives per step), not within a step.
A broken required field drops the record; a broken optional field drops only that field; both are errors.
A file whose last line has no newline after it was cut short there (`Evidence.cut`); that line is not read as a
record, but the step it had begun (`step=1 r`: step 1, or 10 and up, its digits cut) says how far the rank got
(`Evidence.cut_step`, a floor).
Sums may be nan or inf: a corrupted reduction produces exactly that, so they are kept.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ..model import Diagnostic, Evidence, FingerprintRow, FormatFacts, Location, SourceFormat
from ..model.kinds import normalize_op
from .base import InputFile
from .keyvalue import (
    CUT_SHORT,
    LineRecord,
    float_field,
    head_lines,
    int_field,
    optional,
    present,
    parse_records,
    record_share,
    required,
    str_field,
)

_NEEDLES = ("sum", "digest")  # "sum" also finds checksum= and expected_sum=
_JSON_KEYS = ('"digest"', '"sum"', '"checksum"', '"expected_sum"')
_VALUE_KEYS = ("digest", "sum", "checksum", "expected_sum")
# `step=12` or `"step": 12` at the start of a field; the digits kept where the line was cut inside them
_STEP_BEGUN = re.compile(r'(?:^|[\s{,])"?step"?\s*[=:]\s*(\d+)')


def _is_fingerprint(fields: Mapping[str, object], from_json: bool) -> bool:
    if "decision" in fields or not any(key in fields for key in _VALUE_KEYS):
        return False
    return from_json or ("step" in fields and "rank" in fields)


class FingerprintSource:
    """Per-rank fingerprint traces, as JSON lines or `key=value` log lines."""

    facts = FormatFacts(SourceFormat.FINGERPRINT, "fingerprint trace", records="fingerprints", per_rank=True,
                          claims_ranks=True, markers=(b"checksum", b"digest", b'"sum"', b" sum="))
    format = facts.format

    def sniff(self, head: bytes, text: str) -> float:
        """The share of the head's non-blank lines that are fingerprint records."""
        return record_share(head_lines(head, text), _NEEDLES, _is_fingerprint)

    def parse(self, file: InputFile) -> Evidence:
        """Every fingerprint record of the file; broken records become error diagnostics."""
        evidence, records = parse_records(file, self.facts, _NEEDLES, _JSON_KEYS, _is_fingerprint, _row,
                                          begun=begun_step)
        evidence.fingerprints = records
        # A trace cut short says nothing of what the rank read back past the cut.
        evidence.cut = next((p.loc for p in evidence.problems if p.message == CUT_SHORT), None)
        return evidence


def begun_step(line: str) -> int | None:
    """The step a record cut short had begun, as far as its digits go: a floor (`step=1` may have been `step=12`,
    never less); None where the cut came before a digit of it."""
    found = _STEP_BEGUN.search(line)
    return int(found.group(1)) if found else None


def _row(record: LineRecord, name: str) -> tuple[FingerprintRow | None, Diagnostic | None]:
    """One FingerprintRow from a record, and a Diagnostic naming every bad field (None when all are fine)."""
    fields = record.fields
    loc = Location(name, record.line)
    errors: list[str] = []
    step = required(int_field, fields, "step", errors)
    rank = required(int_field, fields, "rank", errors)
    digest = optional(str_field, fields, "digest", errors)
    total = optional(float_field, fields, "sum", errors)
    if total is None and not present(fields, "sum"):
        total = optional(float_field, fields, "checksum", errors)
    if not any(present(fields, key) for key in ("digest", "sum", "checksum")):
        errors.append("no digest, sum or checksum")
    if step is None or rank is None or (digest is None and total is None):
        return None, Diagnostic(loc, "broken fingerprint record: " + "; ".join(errors))
    kind = optional(str_field, fields, "kind", errors)
    row = FingerprintRow(
        loc=loc,
        rank=rank,
        step=step,
        op=optional(int_field, fields, "op", errors),
        tag=optional(str_field, fields, "tag", errors),
        kind=normalize_op(kind) if kind else kind,
        numel=optional(int_field, fields, "numel", errors),
        digest=digest,
        sum=total,
        expected_sum=optional(float_field, fields, "expected_sum", errors),
    )
    problem = Diagnostic(loc, "fingerprint record with bad fields (read without them): " + "; ".join(errors)) \
        if errors else None
    return row, problem
