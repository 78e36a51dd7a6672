"""Findings as plain dicts: the JSON output contract."""

from __future__ import annotations

from ..model import Diagnostic, Evidence


def problem_dict(problem: Diagnostic) -> dict:
    """`{"file", "line", "message", "severity"}` for one diagnostic."""
    return {
        "file": problem.loc.path,
        "line": problem.loc.line,
        "message": problem.message,
        "severity": problem.severity.value,
    }


def parse_dict(evidence: Evidence) -> dict:
    """What `parse --json` prints for one file."""
    return {
        "file": evidence.path,
        "format": evidence.format.value if evidence.format else None,
        "version": evidence.version,
        "records": evidence.record_count,
        "ranks": evidence.ranks,
        "comms": evidence.comms,
        "errors": [
            {"line": p.loc.line, "message": p.message, "severity": p.severity.value} for p in evidence.problems
        ],
    }
