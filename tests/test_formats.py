"""A format is one module plus one registry line: every fact the rest of the package needs is its Source's.

The built-in formats each have a source that declares its facts; a format module written here, outside the
package, and added to the registry is detected, parsed, counted, merged into streams and diagnosed by `diff`,
with no other edit.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

import ncclforensics.sources as sources
from ncclforensics import api
from ncclforensics.cli import cli
from ncclforensics.model import Evidence, FormatFacts, SourceFormat
from ncclforensics.sources import InputFile, parse_file

# A made-up per-rank trace: a `# op-trace` line, then `comm,rank,seq,op,count` lines.
FORMAT_MODULE = '''
"""Op traces: one line per collective a rank launched."""

import polars as pl

from ncclforensics.model import Diagnostic, Evidence, FormatFacts, Location, SourceFormat, conform


class OpTraceSource:
    facts = FormatFacts(SourceFormat.declare("op-trace"), "op trace", records="collectives", per_rank=True)
    format = facts.format

    def sniff(self, head: bytes, text: str) -> float:
        return 0.99 if text.startswith("# op-trace") else 0.0

    def parse(self, file):
        text, problems = file.read_text()
        rows = []
        for number, line in enumerate(text.splitlines()[1:], start=2):
            fields = line.split(",")
            if len(fields) != 5:
                problems.append(Diagnostic(Location(file.name, number), "not comm,rank,seq,op,count"))
                continue
            comm, rank, seq, op, count = fields
            rows.append({"file": file.name, "line": number, "comm": comm, "rank": int(rank), "seq": int(seq),
                         "op": op, "count": int(count), "state": "launched"})
        frame = conform(pl.DataFrame(rows)) if rows else conform(pl.DataFrame())
        return Evidence(path=file.name, format=self.format, collectives=frame, problems=problems)
'''


def test_every_format_has_one_source_that_declares_its_facts():
    by_format = {source.format: source for source in sources.SOURCES}
    assert set(by_format) == set(SourceFormat) and len(by_format) == len(sources.SOURCES)
    lists = {f.name for f in dataclasses.fields(Evidence)}
    for fmt, source in by_format.items():
        assert isinstance(source.facts, FormatFacts) and source.facts.format is fmt
        assert source.facts.records in lists and source.facts.label


@pytest.fixture
def op_trace(tmp_path, monkeypatch):
    """The op-trace module, imported from a folder outside the package and added to the registry."""
    path = tmp_path / "module" / "op_trace.py"
    path.parent.mkdir()
    path.write_text(textwrap.dedent(FORMAT_MODULE))
    spec = importlib.util.spec_from_file_location("op_trace", path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "op_trace", module)
    spec.loader.exec_module(module)
    monkeypatch.setattr(sources, "SOURCES", (*sources.SOURCES, module.OpTraceSource()))
    return module


def _traces(folder, ops_of_rank2):
    folder.mkdir()
    for rank in range(3):
        ops = ops_of_rank2 if rank == 2 else ["AllReduce", "AllReduce", "Broadcast", "AllReduce"]
        lines = ["# op-trace"] + [f"0x00000000000000aa,{rank},{seq},{op},1024" for seq, op in enumerate(ops, 1)]
        (folder / f"rank{rank}.trace").write_text("\n".join(lines) + "\n")
    return folder


def test_a_new_format_needs_only_its_module_and_a_registry_line(op_trace, tmp_path):
    folder = _traces(tmp_path / "job", ["AllReduce", "AllReduce", "AllGather", "AllReduce"])
    (folder / "gates.log").write_text("".join(f"step=0 rank={rank} decision=pass\n" for rank in range(4)))
    evidence = parse_file(InputFile(folder / "rank0.trace", "rank0.trace"))
    assert evidence.format is SourceFormat("op-trace") and evidence.record_count == 4
    assert evidence.facts is op_trace.OpTraceSource.facts and evidence.ranks == [0]

    result = CliRunner().invoke(cli, ["diff", "--json", str(folder)])
    assert result.exit_code == 1, result.output
    root = json.loads(result.output)["root"]
    assert (root["seq"], root["outlier_ranks"], root["reference_ranks"]) == (3, [2], [0, 1])
    assert f"{folder / 'rank2.trace'}:4" in result.output

    parsed, data = api.postmortem_paths([str(folder)], str(tmp_path / "out"))
    files = {Path(f.path).name: (f.format, f.records) for f in data.inventory.files}
    assert files["rank1.trace"] == ("op-trace", 4) and files["gates.log"] == ("gate-journal", 4)
    # Rank 3 has a gate decision but no trace: the per-rank format's own label says what is missing.
    assert "no op trace with records of rank 3 (ranks 0, 1 and 2 have one)" in data.inventory.missing


def test_a_new_format_that_agrees_is_consistent(op_trace, tmp_path):
    folder = _traces(tmp_path / "job", ["AllReduce", "AllReduce", "Broadcast", "AllReduce"])
    result = CliRunner().invoke(cli, ["diff", str(folder)])
    assert result.exit_code == 0, result.output
