"""A long corrupt-and-continue window stays a bounded summary in --json and the postmortem; every run is kept
in --full-window and in OUT/pairings.parquet."""

from __future__ import annotations

import json

import polars as pl
from cli_helpers import real, run_cli


def test_json_lists_the_first_runs_and_sums_up_every_run(monkeypatch):
    from ncclforensics.report import data

    _, out, _ = run_cli("diff", "--json", "--full-window", real("extra-op-4rank"))
    full = json.loads(out)["window"]
    assert full["pairings_complete"] and full["pairing_runs"] == len(full["pairings"]) == 3
    monkeypatch.setattr(data, "PAIRING_RUNS", 1)
    _, out, _ = run_cli("diff", "--json", real("extra-op-4rank"))
    window = json.loads(out)["window"]
    assert window["pairings"] == full["pairings"][:1] and not window["pairings_complete"]
    assert window["pairing_runs"] == 3
    assert window["pairing_totals"] == {"shape_equal": {"runs": 2, "collectives": 23},
                                        "count_mismatch": {"runs": 1, "collectives": 2}}
    assert sum(t["collectives"] for t in window["pairing_totals"].values()) == window["collectives"] == 25


def test_postmortem_summarises_the_window_and_writes_every_run_beside_it(monkeypatch, tmp_path):
    from ncclforensics.align import timeline
    from ncclforensics.report import postmortem

    monkeypatch.setattr(postmortem, "PAIRING_ROWS", 1)
    monkeypatch.setattr(timeline, "TIMELINE_PAIRING_RUNS", 1)
    out = tmp_path / "pm"
    code, _, err = run_cli("postmortem", real("extra-op-4rank"), "--out", out)
    assert code == 1 and "pairings.parquet" in err
    md = (out / "report.md").read_text()
    window = md[md.index("## Window"):md.index("## Wedge")]
    rows = [line for line in window.splitlines() if line.startswith("| ") and "seqs" not in line]
    assert rows[0].startswith("| 25\\..40 |") and "2 more runs" in rows[1] and len(rows) == 2
    assert "[pairings.parquet](pairings.parquet)" in window and "[pairings.csv](pairings.csv)" in window
    timeline_section = md[md.index("## Timeline"):md.index("## Root cause")]
    assert "2 more pairing runs" in timeline_section and "41..42" not in timeline_section
    html = (out / "report.html").read_text()
    assert '<a href="pairings.parquet">pairings.parquet</a>' in html
    _, json_out, _ = run_cli("diff", "--json", "--full-window", real("extra-op-4rank"))
    expected = json.loads(json_out)["window"]["pairings"]
    for name in ("pairings.parquet", "pairings.csv"):
        runs = pl.read_parquet(out / name) if name.endswith(".parquet") else pl.read_csv(out / name)
        assert runs.drop("comm").to_dicts() == expected
        assert set(runs.get_column("comm")) == {"0x1715b7bd1b8fda9e"}


def test_a_healthy_report_writes_no_pairings(tmp_path):
    out = tmp_path / "pm"
    code, _, err = run_cli("postmortem", real("transient-skew"), "--out", out)
    assert code == 0 and not (out / "pairings.parquet").exists() and "pairing runs" not in err
