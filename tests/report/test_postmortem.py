"""`ncclforensics postmortem` on every shared real capture: the report, its plots (checked through the Figure
objects: what was drawn where), the evidence index, and the refusal to write into an input folder."""

from __future__ import annotations

import base64
import io
import json
import os
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from PIL import Image

from ncclforensics import api
from ncclforensics.align.gates import first_gate_disagreement
from ncclforensics.cli import cli
from ncclforensics.report import plots, words
from ncclforensics.report.postmortem import build_figures, write_postmortem
from ncclforensics.report.receipts import receipt_words
from ncclforensics.report import wedge_words
from ncclforensics.sources import parse_file
from ncclforensics.sources.base import InputFile
from fixture_paths import FIXTURES

REAL = FIXTURES / "real"
CAPTURES = sorted(p for p in (REAL / "nccl-2.28.9").iterdir() if p.is_dir())
SECTIONS = ["## Verdict", "## Timeline", "## Root cause", "## Window", "## Wedge", "## Evidence index",
            "## Caveats", "## How to reproduce"]


def truth(name: str) -> tuple[str, int] | None:
    """(root comm hash, root seq) of a capture: from its truth file, else from the README's scenario notes."""
    path = REAL / "truth" / f"{name}.json"
    if path.exists():
        summary = json.loads(path.read_text())["summary"]
        first = summary["first_divergent"]
        return summary["comm_ids"][first["comm"]], first["seq"]
    # tests/fixtures/real/README.md: extra-op-4rank's first divergent collective is seq 25 of 0x1715b7bd1b8fda9e;
    # in killed-rank rank 1 dies after 124 collectives of 0xd5dc471d2873616f and the others hang in their 125th.
    return {"extra-op-4rank": ("0x1715b7bd1b8fda9e", 25), "killed-rank": ("0xd5dc471d2873616f", 125)}.get(name)


class Report:
    """One capture's postmortem, written once and inspected by several tests."""

    def __init__(self, capture: Path, out: Path):
        self.capture = capture
        self.out = out
        self.parsed, self.data = api.postmortem_paths([str(capture)], str(out))
        self.diagnosis = self.data.diagnosis
        self.figures = build_figures(self.data)
        self.written = write_postmortem(self.data, self.figures)
        self.md = (out / "report.md").read_text()
        self.html = (out / "report.html").read_text()
        self.captions = {name: caption for name, (_, caption) in self.figures.items()}

    def figure(self, name: str):
        return self.figures[name][0]


@pytest.fixture(scope="module", params=CAPTURES, ids=[p.name for p in CAPTURES])
def report(request, tmp_path_factory) -> Report:
    return Report(request.param, tmp_path_factory.mktemp("pm") / request.param.name)


def artists(fig, gid: str) -> list:
    """Every line, patch and text of the figure carrying `gid`."""
    found = []
    for ax in fig.axes:
        found += [a for a in list(ax.lines) + list(ax.patches) + list(ax.texts) if a.get_gid() == gid]
    return found


def test_report_names_root_comm_and_seq(report):
    expected = truth(report.capture.name)
    root = report.diagnosis.root
    if expected is None:
        assert root is None
        assert "No root collective" in report.md
        return
    comm, seq = expected
    assert root is not None and root.comm == comm and root.seq_range[0] <= seq <= root.seq_range[1]
    assert f"Root communicator: {comm}" in report.md
    assert re.search(rf"Root seq: {root.seq}\b", report.md)
    assert f"Root communicator: {comm}" in report.html and f"Root seq: {root.seq}" in report.html


def test_sections_and_reproduce_command(report):
    positions = [report.md.index(s) for s in SECTIONS]
    assert positions == sorted(positions)
    assert f"ncclforensics postmortem {report.capture} --out {report.out}" in report.md
    assert f"ncclforensics diff --json {report.capture}" in report.md
    assert f"**{words.verdict_label(report.diagnosis)}**" in report.md


def test_evidence_index_lists_every_file_with_receipts(report):
    index = report.md[report.md.index("## Evidence index"):report.md.index("## Caveats")]
    for item in report.parsed.evidence:
        fmt = item.format.value if item.format else "unrecognised"
        assert f"| `{item.path}` | {fmt} |" in index
    for finding in report.diagnosis.evidence:
        assert f"`{finding.loc}: {receipt_words(finding.fact)}`" in index


def test_caveats(report):
    caveats = report.md[report.md.index("## Caveats"):report.md.index("## How to reproduce")]
    assert "CUDA graphs" in caveats
    root = report.diagnosis.root
    if root is not None and root.seq_range[0] != root.seq_range[1]:
        assert "not pinned" in caveats
    if report.capture.name == "killed-rank":
        assert "no Flight Recorder dump with records of rank 1 (ranks 0, 2 and 3 have one)" in caveats
        assert "RAS cannot reach comm rank 1 of comm" in caveats and "as missing" not in caveats


def test_pngs_are_real_images(report):
    pngs = [p for p in report.written if p.suffix == ".png"]
    assert {p.name for p in pngs} == set(report.figures)
    assert any(p.name.startswith("timeline-") for p in pngs)
    for path in pngs:
        with Image.open(path) as image:
            assert image.format == "PNG" and image.width > 600 and image.height > 200
            colours = image.convert("RGB").getcolors(maxcolors=1 << 16)
            assert colours is None or len(colours) > 20  # not blank
        assert f"]({path.name})" in report.md  # linked from the Markdown


def test_html_is_self_contained(report):
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:|//|file:)""", report.html)
    assert "<script" not in report.html and "<link" not in report.html
    uris = re.findall(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', report.html)
    files = {p.name: p.read_bytes() for p in report.written if p.suffix == ".png"}
    assert len(uris) == len(files)
    assert sorted(base64.b64decode(u) for u in uris) == sorted(files.values())


def test_timeline_plot_marks_root_window_and_wedge(report):
    d = report.diagnosis
    timelines = {name: report.figure(name) for name in report.figures if name.startswith("timeline-")}
    assert len(timelines) == len(report.data.lanes) >= 1
    if d.root is not None and d.root.seq_range[0] != d.root.seq_range[1]:  # a range is drawn whole, no star
        fig = report.figure(f"timeline-{d.root.comm}.png")
        assert not artists(fig, "root") and artists(fig, "root-span") and artists(fig, "root-range")
    elif d.root is not None:
        fig = report.figure(f"timeline-{d.root.comm}.png")
        (star, *_) = artists(fig, "root")
        assert set(star.get_xdata()) == {d.root.seq}
        lanes = next(lane for lane in report.data.lanes if lane.comm == d.root.comm)
        assert sorted(star.get_ydata()) == [lanes.ranks.index(r) for r in d.root.outlier_ranks]
        labels = [t.get_text() for t in fig.axes[0].get_yticklabels() if t.get_color() == "red"]
        assert labels == [f"rank {r}" for r in d.root.outlier_ranks]
    if d.window is not None and d.window.collectives:  # (an empty window, wedged at the root, has no shade)
        fig = report.figure(f"timeline-{d.window.comm}.png")
        (span, *_) = artists(fig, "window")
        x0, x1 = span.get_x(), span.get_x() + span.get_width()
        assert (x0, x1) == (d.window.first_seq - 0.5, d.window.last_seq + 0.5)
    else:
        assert not any(artists(f, "window") for f in timelines.values())
    if d.wedge is not None and wedge_words.shows_wedge(d):
        fig = report.figure(f"timeline-{d.wedge.comm}.png")
        (cross, *_) = artists(fig, "wedge")
        assert set(cross.get_xdata()) == {d.wedge.seq}
    else:  # a consistent run whose records merely end is drawn without a wedge
        assert not any(artists(f, "wedge") for f in timelines.values())
    for name, fig in timelines.items():  # the caption names only what is drawn
        caption = report.captions[name]
        assert ("red star" in caption) == bool(artists(fig, "root"))
        assert ("hatched span" in caption) == bool(artists(fig, "root-span"))
        assert ("shaded orange" in caption) == bool(artists(fig, "window"))
        assert ("black X" in caption) == bool(artists(fig, "wedge"))
    if report.capture.name == "extra-op-4rank":  # 25 collectives completed misaligned, the wedge at seq 50
        assert (d.window.first_seq, d.window.last_seq, d.wedge.seq) == (25, 49, 50)


def test_gate_plot_highlights_the_disagreeing_step(report):
    gate = report.diagnosis.gate
    if "gates.png" not in report.figures:
        assert not report.data.gates
        return
    fig = report.figure("gates.png")
    spans = artists(fig, "disagreement")
    if gate is None:
        assert not spans
        return
    assert spans and all(s.get_x() == gate.step - 0.5 for s in spans)
    (circles,) = artists(fig, "outliers")
    assert set(circles.get_xdata()) == {gate.step}
    # Journals without max_model_len/spec_tokens: the plot says the ceiling is unknown; with them it draws it.
    if gate.ceiling_start is None:
        assert not artists(fig, "ceiling") and artists(fig, "ceiling-unknown")
    else:
        assert artists(fig, "ceiling") and not artists(fig, "ceiling-unknown")


def test_ras_plot_says_stuck_or_moving(report):
    if "ras.png" not in report.figures:
        assert not report.diagnosis.ras
        return
    titles = " ".join(" ".join(ax.get_title(loc="left").split()) for ax in report.figure("ras.png").axes)
    for comm, history in report.diagnosis.ras.items():
        if history.stuck and f"comm {comm}" in titles:
            assert f"comm {comm}" in titles and "stuck" in titles
    if report.capture.name == "transient-skew":
        assert "moving" in titles and "stuck" not in titles
    if report.capture.name == "extra-op-4rank":
        assert "comm 0x1715b7bd1b8fda9e, AllReduce: stuck" in titles


def test_gate_plot_draws_the_ceiling_when_journaled(tmp_path):
    # A journal written as the live guard writes it, near max_model_len 1000 with 3 speculative tokens: the
    # ceiling window starts at sequence length 998, and rank 1 alone passes at step 6 (length 998).
    lines = {r: [] for r in range(2)}
    for step in range(10):
        for rank in range(2):
            seq = 992 + step
            decision = "pass" if seq + 3 <= 1000 or (rank == 1 and step == 6) else "skip"
            lines[rank].append(json.dumps({"step": step, "rank": rank, "seq": seq, "decision": decision,
                                           "max_model_len": 1000, "spec_tokens": 3}))
    gates = []
    for rank, text in lines.items():
        path = tmp_path / f"gate_rank{rank}.jsonl"
        path.write_text("\n".join(text) + "\n")
        gates += parse_file(InputFile(path=path, name=str(path))).gates
    disagreement = first_gate_disagreement(gates)
    assert disagreement.step == 6 and disagreement.ceiling_start == 998
    fig = plots.plot_gates(gates, disagreement)
    (ceiling,) = artists(fig, "ceiling")
    assert set(ceiling.get_ydata()) == {998}
    assert "max_model_len - spec_tokens + 1 = 998" in ceiling.get_label()
    assert {s.get_x() for s in artists(fig, "disagreement")} == {5.5}
    png = plots.png_bytes(fig)
    with Image.open(io.BytesIO(png)) as image:
        assert image.format == "PNG"


# --- the CLI: exit codes and the refusal to write into input folders ----------------------------------------


@pytest.fixture()
def capture_copy(tmp_path) -> Path:
    """A copy of a small real capture, so that a bug in the refusal could never write into the fixtures."""
    target = tmp_path / "incident"
    shutil.copytree(REAL / "nccl-2.28.9" / "healthy-1rank", target)
    return target


def _listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.mark.parametrize("out", ["{in}/report", "{in}", "{in}/../incident/sub/deeper", "{tmp}/x/../incident/r",
                                 "{link}/pm"])
def test_out_inside_an_input_folder_is_refused(capture_copy, tmp_path, out):
    os.symlink(capture_copy, tmp_path / "alias")
    before = _listing(capture_copy)
    target = out.format(**{"in": capture_copy, "tmp": tmp_path, "link": tmp_path / "alias"})
    result = CliRunner().invoke(cli, ["postmortem", str(capture_copy), "--out", target])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --out") and "input" in lines[0]
    assert _listing(capture_copy) == before


def test_out_beside_input_files_is_refused_but_elsewhere_is_fine(capture_copy, tmp_path):
    log = capture_copy / "nccl.vm.446.log"
    before = _listing(capture_copy)
    result = CliRunner().invoke(cli, ["postmortem", str(capture_copy), "--out", str(log)])
    assert result.exit_code == 2  # a file is no output folder (click says so)
    result = CliRunner().invoke(cli, ["postmortem", str(log), "--out", str(capture_copy / "pm")])
    assert result.exit_code == 2 and "inside input folder" in result.stderr
    assert _listing(capture_copy) == before
    result = CliRunner().invoke(cli, ["postmortem", str(log), "--out", str(tmp_path / "pm")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "pm" / "report.md").exists()


def test_exit_codes_follow_diff(capture_copy, tmp_path):
    result = CliRunner().invoke(cli, ["postmortem", str(capture_copy), "--out", str(tmp_path / "healthy")])
    assert result.exit_code == 0, result.output
    assert "wrote" in result.stderr
    diverged = REAL / "nccl-2.28.9" / "killed-rank"
    result = CliRunner().invoke(cli, ["postmortem", str(diverged), "--out", str(tmp_path / "diverged")])
    assert result.exit_code == 1, result.output
    # A stray file of no evidence format in the folder is skipped with a warning: the exit code stays.
    (capture_copy / "notes.txt").write_text("not evidence\n")
    result = CliRunner().invoke(cli, ["postmortem", str(capture_copy), "--out", str(tmp_path / "stray")])
    assert result.exit_code == 0, result.output
    assert "warning: " in result.stderr and "notes.txt: unrecognised format: not evidence; skipped" in result.stderr
    # One that looks like evidence and cannot be read is trouble; trouble wins, but the report is still written.
    (capture_copy / "fr_rank3").write_bytes(b"")
    result = CliRunner().invoke(cli, ["postmortem", str(capture_copy), "--out", str(tmp_path / "trouble")])
    assert result.exit_code == 2
    assert "fr_rank3: empty file" in result.stderr
    md = (tmp_path / "trouble" / "report.md").read_text()
    assert "notes.txt" in md and "fr_rank3" in md and "unrecognised" in md


# --- rendering details ------------------------------------------------------------------------------------------


def test_hostile_text_stays_text():
    from ncclforensics.report.document import Bullets, Heading, Mono, Para, Table, render_html, render_markdown

    evil = '<img src="http://x/y.png" onerror=alert(1)> *bold* [link](http://x) | pipe'
    blocks = [Heading(evil), Para(evil), Bullets((evil, Mono(evil))), Table(("a", "b"), ((evil, Mono(evil)),))]
    page = render_html(blocks, evil)
    assert "<img" not in page and "http://x/y.png" not in page.replace("&quot;http://x/y.png&quot;", "")
    assert page.count("&lt;img src=&quot;http://x/y.png&quot;") == 7  # title, heading, para, 2 items, 2 cells
    md = render_markdown(blocks)
    assert not re.search(r"(?<![\\`])<img", md)  # escaped, or inside a code span
    assert "\\*bold\\*" in md and "\\[link\\]" in md
    table_row = md.strip().splitlines()[-1]
    assert table_row.count(" | ") == 1 and table_row.count("\\|") == 2  # the cells' pipes are escaped


def test_alternating_signatures_are_drawn_near_the_focus_only():
    import numpy as np
    import polars as pl

    from ncclforensics.align.diagnosis import Diagnosis
    from ncclforensics.align.timeline import DETAIL_HALF_WIDTH, comm_lanes
    from ncclforensics.model import Verdict, conform

    n = 6_000  # AllReduce, AllGather, AllReduce, ... on 4 ranks: 24,000 runs of one collective each
    seq = np.tile(np.arange(1, n + 1), 4)
    frame = conform(pl.DataFrame({
        "comm": ["0xabc"] * 4 * n, "rank": np.repeat(np.arange(4), n), "seq": seq,
        "op": np.where(seq % 2 == 0, "AllReduce", "AllGather"), "count": [4096] * 4 * n, "dtype": ["float32"] * 4 * n,
    }))
    lanes = comm_lanes(frame, Diagnosis(verdict=Verdict.CONSISTENT, ranks=[0, 1, 2, 3], comms={}), "0xabc")
    assert lanes.detail == (n - DETAIL_HALF_WIDTH, n + DETAIL_HALF_WIDTH)
    assert lanes.extents == {r: (1, n) for r in range(4)}
    assert all(len(runs) == DETAIL_HALF_WIDTH + 1 for runs in lanes.runs.values())
    fig = plots.plot_comm_timeline(lanes)
    assert len(fig.axes) == 2  # the whole stream and a zoom on its end
    assert any("too many runs" in t.get_text() for t in fig.axes[0].texts)


def test_a_timeline_from_timeout_lines_alone_draws_the_ranks_known_from_counts(tmp_path):
    """extra-op's stderr only: rank 0's timeout line is the one collective on record; ranks 1-3 are known from
    their enqueued counts. Their lanes are there, empty, with the never-launched marks at the wedge, and the root
    is drawn as the whole range the counts allow."""
    logs = sorted(str(p) for p in (REAL / "nccl-2.28.9" / "extra-op-4rank").glob("torch_rank*"))
    _, data = api.postmortem_paths(logs, str(tmp_path / "out"))
    (fig, _), = [f for name, f in build_figures(data).items() if name.startswith("timeline")]
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["rank 0", "rank 1", "rank 2", "rank 3"]
    absent = [a for a in ax.lines if a.get_gid() == "wedge-absent"]
    assert sorted(int(a.get_ydata()[0]) for a in absent) == [1, 2, 3] and all(a.get_xdata()[0] == 50 for a in absent)
    assert ax.get_xlim()[0] <= 1 and [a for a in ax.patches if a.get_gid() == "root-range"]
