"""What the plots draw, read back from the figures: a root that is a range as a span, the wedge kept in view,
gate sessions by folder, RAS text large enough to read where the HTML shows it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from cli_helpers import REAL

from ncclforensics import api
from ncclforensics.report import plots
from ncclforensics.report import wedge_words
from ncclforensics.report.postmortem import build_figures

ROOT = Path(__file__).parents[2]
PAGE_PX = 72 * 16  # report.html's content width (max-width: 72rem): wider images are shrunk to it


def artists(fig, gid: str) -> list:
    return [a for ax in fig.axes for a in ax.get_children() if a.get_gid() == gid]


def legend_labels(fig) -> list[str]:
    return [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]


def test_a_root_range_is_drawn_whole_not_as_a_star(tmp_path):
    # Flight Recorder rings that wrapped: the records start at seq 62, so the root is anywhere in 1..91.
    _, data = api.postmortem_paths(sorted(str(p) for p in (REAL / "wrapped-ring").glob("fr_rank*")),
                                   str(tmp_path / "pm"))
    root = data.diagnosis.root
    assert root.seq_range[0] < root.seq_range[1]
    fig, caption = next(v for k, v in build_figures(data).items() if k.startswith("timeline-"))
    assert not artists(fig, "root") and not artists(fig, "root-line")  # no star at the range's first seq
    (bar,) = artists(fig, "root-span")  # on the one outlier's lane
    assert (bar.get_x(), bar.get_x() + bar.get_width()) == (root.seq_range[0] - 0.5, root.seq_range[1] + 0.5)
    assert any(f"somewhere in seq {root.seq_range[0]}..{root.seq_range[1]}" in label for label in legend_labels(fig))
    assert "red hatched span" in caption and "red star" not in caption


def test_the_zoom_keeps_the_root_range_and_names_a_wedge_beyond_it(tmp_path):
    """3,000 collectives per rank (benchmarks/generate.py): the zoom panel shows the whole root range and says
    where the wedge is rather than cutting its marker at the edge."""
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "generate.py"), "nccl", "--ranks", "4", "--ops",
                    "3000", "--out", str(tmp_path / "data")], check=True, capture_output=True, timeout=120)
    incident = tmp_path / "data" / "nccl-4r-3000"
    _, data = api.postmortem_paths([str(incident)], str(tmp_path / "pm"))
    d = data.diagnosis
    fig, _ = next(v for k, v in build_figures(data).items() if k.startswith("timeline-"))
    zoom = fig.axes[1]
    low, high = zoom.get_xlim()
    assert low < d.root.seq_range[0] and d.root.seq_range[1] < high
    for ax in fig.axes[:2]:  # any wedge marker drawn lies inside its panel
        for mark in (a for a in ax.get_children() if a.get_gid() == "wedge"):
            assert all(ax.get_xlim()[0] < x < ax.get_xlim()[1] for x in mark.get_xdata())
    if d.wedge.seq > high:
        assert [a.get_text() for a in zoom.texts if a.get_gid() == "wedge-beyond"] == [
            f"wedge {wedge_words.wedge_where(d.wedge)} \u2192"]  # NCCL logs alone: at or before the seq


def test_gate_coverage_sessions_are_labelled_by_folder(tmp_path):
    from align.test_coverage import Session, write_folders

    write_folders(tmp_path / "soak", [Session(10, 4090), Session(10, 100), Session(10, 100, flip=(3, 1))])
    _, coverage = api.gate_coverage_paths([str(tmp_path / "soak")], None)
    fig = plots.plot_coverage(coverage)
    labels = [t.get_text() for t in fig.axes[1].get_xticklabels()]
    assert labels == ["s000", "s001", "s002"]


def test_ras_text_is_readable_at_the_size_the_html_shows_it(tmp_path):
    _, data = api.postmortem_paths([str(REAL / "extra-op-4rank")], str(tmp_path / "pm"))
    fig, _ = build_figures(data)["ras.png"]
    from matplotlib.text import Text

    fig.canvas.draw()
    width_px = fig.get_figwidth() * 110  # png_bytes' dpi
    shrink = min(1.0, PAGE_PX / width_px)
    sizes = [t.get_fontsize() for t in fig.findobj(Text) if t.get_text().strip() and t.get_visible()]
    smallest_px = min(sizes) * 110 / 72 * shrink
    assert smallest_px >= 12, (min(sizes), shrink)  # was 7 pt in a 13 inch figure: about 8 px on the page
