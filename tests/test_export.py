"""`export`: the tables read back with polars hold what the tool itself read and compared."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from cli_helpers import REAL, real, run_cli
from polars.testing import assert_frame_equal

from ncclforensics import api
from ncclforensics.report.export import COLUMNS, ExportTable, TableFormat, read_table

SCENARIOS = sorted(p.name for p in REAL.iterdir() if p.is_dir())


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_collectives_read_back_are_the_rows_diff_compared(scenario, tmp_path):
    out = tmp_path / "collectives.parquet"
    code, _, err = run_cli("export", real(scenario), "--out", out)
    assert code in (0, 2) and f"wrote {out}" in err
    table = pl.read_parquet(out)
    _, diagnosis = api.diff_paths([str(real(scenario))])
    compared = diagnosis.streams.frame
    assert table.height == compared.height and list(table.columns) == list(COLUMNS[ExportTable.COLLECTIVES])
    key = ["comm", "rank", "seq", "op", "count", "dtype", "redop", "root", "state", "file", "line", "record",
           "fr_file", "fr_record", "callsite", "step", "tag"]
    assert_frame_equal(table.select(key), compared.select(key))
    # Every rank's launched count is what diff reports for it, communicator by communicator.
    launched = table.group_by("comm", "rank").agg(pl.col("seq").max())
    for comm, rank, last in launched.iter_rows():
        assert diagnosis.comms[comm].launched[rank] == last


def test_each_row_is_where_it_says_it_was_read(tmp_path):
    out = tmp_path / "collectives.csv"
    run_cli("export", real("extra-op-4rank"), "--out", out)
    table = read_table(out)
    logs = table.filter(pl.col("format") == "nccl-log")
    assert logs.height == 197 and logs.get_column("fr_file").null_count() == 0  # every row also in a dump
    lines = {}
    for file, line, op, count in logs.select("file", "line", "op", "count").iter_rows():
        text = lines.setdefault(file, Path(file).read_text().splitlines())[line - 1]
        assert f"{op}: opCount" in text and f" count {count} " in text, (file, line, text)
    extra = table.filter((pl.col("rank") == 0) & (pl.col("seq") == 25)).row(0, named=True)
    assert extra["callsite"] == "capture/probe.py:91" and extra["fr_record"] == 24  # the extra AllReduce
    assert extra["sources"] == "nccl-log+flight-recorder"


@pytest.mark.parametrize("fmt", list(TableFormat))
@pytest.mark.parametrize("table", list(ExportTable))
def test_every_table_in_every_format_reads_back_the_same(table, fmt, tmp_path):
    out = tmp_path / f"t{fmt.value}"
    code, _, err = run_cli("export", "--table", table.value, real("extra-op-4rank"), "--out", out)
    assert code == 0, err
    frame = read_table(out, table)
    _, reference = api.export_paths([str(real("extra-op-4rank"))], str(tmp_path / "x.parquet"), table)
    assert frame.height > 0 and list(frame.columns) == list(COLUMNS[table])
    assert_frame_equal(frame, reference)


def test_gate_fingerprint_and_ras_tables_hold_the_parsed_records(tmp_path):
    folder = real("extra-op-4rank")
    parsed = api.parse_paths([str(folder)])
    gates = [g for e in parsed.evidence for g in e.gates]
    _, table = api.export_paths([str(folder)], str(tmp_path / "g.parquet"), ExportTable.GATES)
    assert table.height == len(gates) == 48
    step5 = table.filter(pl.col("step") == 5).sort("rank")
    assert step5.get_column("decision").to_list() == ["pass", "skip", "skip", "skip"]
    for file, line, decision in step5.select("file", "line", "decision").iter_rows():
        assert decision in Path(file).read_text().splitlines()[line - 1]
    _, prints = api.export_paths([str(folder)], str(tmp_path / "f.parquet"), ExportTable.FINGERPRINTS)
    step9 = prints.filter(pl.col("step") == 9).sort("rank")
    assert step9.get_column("sum").to_list() == [11776.0, 10240.0, 10240.0, 10240.0]  # rank 0 read mixed data
    _, ras = api.export_paths([str(folder)], str(tmp_path / "r.parquet"), ExportTable.RAS)
    verbose = ras.filter(pl.col("file").str.ends_with("ras_verbose_q1.txt") & (pl.col("type") == "AllReduce"))
    assert dict(verbose.select("comm_rank", "count").iter_rows()) == {0: 50, 1: 49, 2: 49, 3: 49}


def test_an_unknown_suffix_is_one_line_and_exit_2(tmp_path):
    code, _, err = run_cli("export", real("extra-op-4rank"), "--out", tmp_path / "t.xlsx")
    assert code == 2 and err.count("\n") == 1 and "suffix .xlsx" in err and ".parquet, .csv or .ndjson" in err
    assert not (tmp_path / "t.xlsx").exists()


def test_the_output_goes_through_the_output_path_check(tmp_path):
    folder = tmp_path / "incident"
    folder.mkdir()
    for source in real("type-mismatch").iterdir():
        (folder / source.name).write_bytes(source.read_bytes())
    inside = folder / "collectives.parquet"
    code, _, err = run_cli("export", folder, "--out", inside)
    assert code == 2 and "inside input folder" in err and not inside.exists()
    log = tmp_path / "rank0.csv"  # an NCCL log (formats are told by content) that a careless --out would replace
    log.write_bytes((folder / "nccl.vm.772.log").read_bytes())
    code, _, err = run_cli("export", log, "--out", log)
    assert code == 2 and "is an input file" in err and log.read_bytes() == (folder / "nccl.vm.772.log").read_bytes()


def test_trouble_still_writes_the_table_of_the_good_files(tmp_path):
    bad = tmp_path / "journal.log"
    bad.write_text("step=1 rank=0 decision=maybe\n")
    out = tmp_path / "t.ndjson"
    code, _, err = run_cli("export", real("type-mismatch"), bad, "--out", out)
    assert code == 2 and f"error: {bad}:1:" in err
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["rank"] for r in rows} == {0, 1, 2, 3}
