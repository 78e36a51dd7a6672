"""Plots. Each `plot_*` takes analysis values and returns a matplotlib Figure; the caller saves it.

matplotlib is imported lazily (commands without plots never load it) and figures are built on the Agg canvas
directly, without pyplot, so no global backend or figure registry is touched. Marks a reader (or a test) looks
for carry a `gid`: `window`, `root`, `root-range`, `wedge`, `ceiling`, `disagreement`, `threshold`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ..align.acceptance import AcceptanceReport
from ..align.coverage import GateCoverage, steps_near_ceiling
from ..align.answers import Root
from ..align.gates import GateDisagreement, ceiling_start
from ..align.timeline import CommLanes
from ..align.wedge import Wedge, Window
from ..model import GateChoice, GateDecision, phrases
from . import root_words, wedge_words
from .figures import PALETTE as _PALETTE
from .figures import figure as _figure
from .figures import png_bytes
from .ras_plot import plot_ras as plot_ras

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

ZOOM_ABOVE = 400  # lanes spanning more seqs than this get a second panel zoomed on the root (or the wedge)
# --- communicator timelines -------------------------------------------------------------------------------


def plot_comm_timeline(lanes: CommLanes, root: Root | None = None, window: Window | None = None,
                       wedge: Wedge | None = None, first_visible: int | None = None) -> Figure:
    """Per-rank launched collectives of one communicator against seq (one lane per rank, coloured by
    signature), the root collective (a red star, or a red span over the seqs it may be in), the wedge (black X)
    and the corrupt-and-continue window (shaded); below, when the sources give times, each rank's launched seq
    against time with the same marks. `timeline_caption` says which of these a plot has."""
    root, window, wedge = _marks(lanes, root, window, wedge)
    first = min((lo for lo, _ in lanes.extents.values()), default=1)
    last = max((hi for _, hi in lanes.extents.values()), default=1)
    if root is not None:  # a range reaching back before the records (timeout lines, a wrapped ring) is drawn whole
        first = min(first, root.seq_range[0])
    focus = root.seq if root else (wedge.seq if wedge else None)
    if focus is None and lanes.detail is not None:
        focus = (lanes.detail[0] + lanes.detail[1]) // 2
    zoom = focus is not None and last - first > ZOOM_ABOVE
    rows = 1 + int(zoom) + int(bool(lanes.times))
    lane_height = 0.45 * max(len(lanes.ranks), 2) + 1.2
    heights = [lane_height] * (1 + int(zoom)) + ([2.6] if lanes.times else [])
    fig, axes = _figure(11, sum(heights) + 0.8, rows, heights)
    colors = {label: _PALETTE[i] if i < len(_PALETTE) else "#BBBBBB" for i, label in enumerate(lanes.labels)}
    fig.suptitle(f"comm {lanes.comm}: collectives launched per rank", fontsize=12)
    _draw_lanes(axes[0], lanes, colors, root, window, wedge, first_visible, (first - 1, last + 2))
    axes[0].set_title("whole stream" if zoom else "", fontsize=9, loc="left")
    if zoom:
        low, high = max(first - 1, focus - 40), min(last + 2, focus + 40)
        if root is not None and _reach(root, last) - root.seq_range[0] <= 80:  # a range is zoomed on whole
            low, high = max(first - 1, min(low, root.seq_range[0] - 3)), min(last + 2, max(high, _reach(root, last) + 3))
        if wedge is not None and focus < wedge.seq <= focus + ZOOM_ABOVE // 2:  # the wedge in view, not on the edge
            high = min(last + 2, max(high, wedge.seq + 3))
        _draw_lanes(axes[1], lanes, colors, root, window, wedge, first_visible, (low, high))
        axes[1].set_title(f"zoom on seq {low + 1}..{high - 1}", fontsize=9, loc="left")
    from matplotlib.lines import Line2D

    handles = [_patch(colors[label], label) for label in lanes.labels[:len(_PALETTE)]]
    if root and _pinned(root):
        handles.append(Line2D([], [], label=_mark_label("root", root, wedge), marker="*", color="red",
                              markersize=12, linestyle="none"))
    elif root:
        handles.append(_patch("none", _mark_label("root", root, wedge), hatch="//", edgecolor="red"))
    if first_visible is not None and (root is None or first_visible != root.seq):
        handles.append(Line2D([], [], color="purple", linestyle=":", label=f"first visible mismatch, seq {first_visible}"))
    if wedge:
        handles.append(Line2D([], [], label=_mark_label("wedge", root, wedge), marker="X", color="black",
                              markersize=9, linestyle="none"))
        if wedge.absent_ranks:
            handles.append(Line2D([], [], label=f"never launched seq {wedge.seq}", marker="o", markerfacecolor="white",
                                  markeredgecolor="black", linestyle="none"))
    if window:
        handles.append(_patch("orange", f"corrupt-and-continue window, seq {window.first_seq}..{window.last_seq}",
                              alpha=0.25))
    axes[0].legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    if lanes.times:
        _draw_times(axes[-1], lanes, root, window, wedge)
    return fig


def _marks(lanes: CommLanes, root: Root | None, window: Window | None,
           wedge: Wedge | None) -> tuple[Root | None, Window | None, Wedge | None]:
    """The root, window and wedge that belong on this communicator's plot."""
    root = root if root is not None and root.comm == lanes.comm and root.seq_range is not None else None
    # An empty window (the group wedged at the root) or one known from counts alone has nothing to shade.
    window = window if window is not None and window.comm == lanes.comm and window.collectives else None
    wedge = wedge if wedge is not None and wedge.comm == lanes.comm else None
    return root, window, wedge


def timeline_caption(lanes: CommLanes, root: Root | None = None, window: Window | None = None,
                     wedge: Wedge | None = None, first_visible: int | None = None) -> str:
    """What `plot_comm_timeline` draws for these values, and nothing it does not."""
    root, window, wedge = _marks(lanes, root, window, wedge)
    marks = []
    if root is not None:
        marks.append("root (red star)" if _pinned(root) else
                     f"root somewhere in {phrases.seq_words(*root.seq_range)} (red hatched span)")
    if first_visible is not None and (root is None or first_visible != root.seq):
        marks.append("first visible mismatch (purple dotted line)")
    if window is not None:
        marks.append("corrupt-and-continue window (shaded orange)")
    if wedge is not None:
        marks.append("wedge (black X" + (", white circle: never launched" if wedge.absent_ranks else "") + ")")
    text = f"Collectives launched per rank in comm {lanes.comm}, coloured by signature"
    return text + (": " + ", ".join(marks) if marks else "; no root, window or wedge in this communicator")


def _reach(root: Root, last: int) -> int:
    """The high end of the root's range as drawn: one past the records' `last` seq where nothing bounds it."""
    low, high = root.seq_range
    return max(low, last + 1) if high is None else high


def _pinned(root: Root) -> bool:
    return root.seq_range[0] == root.seq_range[1]


def _mark_label(mark: str, root: Root | None, wedge: Wedge | None) -> str:
    if mark == "root" and root:
        where = f"seq {root.seq}" if _pinned(root) else f"somewhere in {phrases.seq_words(*root.seq_range)}"
        return f"root ({root_words.kind_words(root)}), {where}, {phrases.ranks_words(root.outlier_ranks)}"
    return f"wedge ({wedge_words.wedge_kind_words(wedge.kind)}), {wedge_words.wedge_seq_words(wedge)}" if wedge else ""


def _patch(color: str, label: str, alpha: float = 1.0, hatch: str | None = None, edgecolor: str | None = None):
    from matplotlib.patches import Patch

    return Patch(facecolor=color, alpha=alpha, label=label, hatch=hatch, edgecolor=edgecolor)


def _draw_lanes(ax: Axes, lanes: CommLanes, colors: dict[str, str], root: Root | None, window: Window | None,
                wedge: Wedge | None, first_visible: int | None, xlim: tuple[int, int]) -> None:
    y = {rank: i for i, rank in enumerate(lanes.ranks)}
    for rank, (lo, hi) in lanes.extents.items():  # what was read, under the runs (all of it, or a gap)
        ax.hlines(y[rank], lo - 0.45, hi + 0.45, colors="#BBBBBB", linewidth=3, gid="extent")
    if lanes.detail is not None and (xlim[0] < lanes.detail[0] or xlim[1] > lanes.detail[1]):
        ax.text(0.01, 0.02, f"signatures drawn for seq {lanes.detail[0]}..{lanes.detail[1]} only (too many runs)",
                transform=ax.transAxes, fontsize=7, color="dimgray")
    segments: dict[str, tuple[list, list, list]] = {}  # one hlines call per signature, not per run
    for rank, runs in lanes.runs.items():
        for run in runs:
            if run.last_seq < xlim[0] or run.first_seq > xlim[1]:
                continue
            ys, starts, ends = segments.setdefault(run.label, ([], [], []))
            ys.append(y[rank])
            starts.append(run.first_seq - 0.45)
            ends.append(run.last_seq + 0.45)
    for label, (ys, starts, ends) in segments.items():
        ax.hlines(ys, starts, ends, colors=colors[label], linewidth=9, gid=f"lane:{label}")
    if window:
        ax.axvspan(window.first_seq - 0.5, window.last_seq + 0.5, color="orange", alpha=0.22, gid="window",
                   zorder=0)
    if root:
        outliers = [r for r in root.outlier_ranks if r in y] or list(y)
        if not _pinned(root):  # where nothing pins it: the whole range, on the outliers' lanes
            high = _reach(root, int(xlim[1]) - 2)
            ax.axvspan(root.seq_range[0] - 0.5, high + 0.5, facecolor="none", edgecolor="red",
                       hatch="//", alpha=0.6, gid="root-range", zorder=0)
            ax.barh([y[r] for r in outliers], high - root.seq_range[0] + 1, left=root.seq_range[0] - 0.5,
                    height=0.5, facecolor="none", edgecolor="red", linewidth=1.5, gid="root-span", zorder=5)
        elif xlim[0] < root.seq < xlim[1]:
            ax.axvline(root.seq, color="red", linestyle="--", linewidth=1, gid="root-line")
            ax.plot([root.seq] * len(outliers), [y[r] for r in outliers], marker="*", color="red", markersize=16,
                    markeredgecolor="darkred", linestyle="none", gid="root", zorder=5, clip_on=False)
    if first_visible is not None and (root is None or first_visible != root.seq):
        ax.axvline(first_visible, color="purple", linestyle=":", linewidth=1.2, gid="first-visible")
    if wedge and xlim[0] < wedge.seq < xlim[1]:
        inside = [r for r in wedge.waiting_ranks if r in y] or list(y)
        ax.axvline(wedge.seq, color="black", linestyle="--", linewidth=1, gid="wedge-line")
        ax.plot([wedge.seq] * len(inside), [y[r] for r in inside], marker="X", color="black", markersize=11,
                linestyle="none", gid="wedge", zorder=5, clip_on=False)
        for rank in wedge.absent_ranks:
            if rank in y:
                ax.plot([wedge.seq], [y[rank]], marker="o", markerfacecolor="white", markeredgecolor="black",
                        markersize=9, linestyle="none", gid="wedge-absent", zorder=5, clip_on=False)
    elif wedge and wedge.seq >= xlim[1]:
        ax.annotate(f"wedge {wedge_words.wedge_where(wedge)} \u2192", (1.0, 1.0), xycoords="axes fraction", ha="right",
                    va="bottom", fontsize=8, gid="wedge-beyond")
    ax.set_yticks(range(len(lanes.ranks)), [f"rank {r}" for r in lanes.ranks])
    if root:
        for label in ax.get_yticklabels():
            if label.get_text() in {f"rank {r}" for r in root.outlier_ranks}:
                label.set_color("red")
    ax.set_ylim(len(lanes.ranks) - 0.4, -0.6)
    ax.set_xlim(*xlim)
    ax.ticklabel_format(axis="x", useOffset=False, style="plain")
    ax.set_xlabel("seq (1-based launch order in the communicator)")
    ax.grid(axis="x", alpha=0.3)


def _draw_times(ax: Axes, lanes: CommLanes, root: Root | None, window: Window | None, wedge: Wedge | None) -> None:
    start = min(t[0] for t, _ in lanes.times.values() if t)
    for i, rank in enumerate(sorted(lanes.times)):
        times, seqs = lanes.times[rank]
        ax.step([t - start for t in times], seqs, where="post", label=f"rank {rank}",
                color=_PALETTE[i % len(_PALETTE)], linewidth=1.4)
    if window:
        ax.axhspan(window.first_seq - 0.5, window.last_seq + 0.5, color="orange", alpha=0.22, gid="window-time")
    if root and not _pinned(root):
        last = max((seq for _, seqs in lanes.times.values() for seq in seqs), default=root.seq_range[0])
        ax.axhspan(root.seq_range[0] - 0.5, _reach(root, last) + 0.5, facecolor="none", edgecolor="red", hatch="//",
                   alpha=0.6, gid="root-range-time")
    elif root:
        ax.axhline(root.seq, color="red", linestyle="--", linewidth=1, gid="root-time")
    if wedge:
        ax.axhline(wedge.seq, color="black", linestyle="--", linewidth=1, gid="wedge-time")
    ax.set_xlabel("seconds since the first collective (Flight Recorder times)")
    ax.set_ylabel("seq launched")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    ax.grid(alpha=0.3)


# --- gate decisions ----------------------------------------------------------------------------------------


def plot_gates(decisions: list[GateDecision], disagreement: GateDisagreement | None = None) -> Figure:
    """Per-rank gate decisions per step near the ceiling: the sequence length each rank saw against step with
    `max_model_len - spec_tokens + 1` drawn when journaled, and the decision grid; the disagreeing step is
    highlighted in both."""
    shown = steps_near_ceiling(decisions, disagreement.step if disagreement else None)
    ceiling = ceiling_start(decisions)
    ranks = sorted({d.rank for d in shown})
    has_seq = any(d.seq is not None for d in shown)
    rows = 2 if has_seq else 1
    fig, axes = _figure(11, 2.8 * rows + 0.45 * len(ranks), rows,
                        [3.0, 0.9 + 0.35 * len(ranks)] if has_seq else None)
    title = "drafter gate decisions per step"
    if disagreement:
        title += f": ranks disagree at step {disagreement.step}"
    fig.suptitle(title, fontsize=12)
    if has_seq:
        ax = axes[0]
        for i, rank in enumerate(ranks):
            mine = sorted((d for d in shown if d.rank == rank and d.seq is not None), key=lambda d: d.step)
            color = _PALETTE[i % len(_PALETTE)]
            ax.plot([d.step for d in mine], [d.seq for d in mine], color=color, linewidth=1, label=f"rank {rank}")
            passed = [d for d in mine if d.decision == GateChoice.PASS.value]
            skipped = [d for d in mine if d.decision != GateChoice.PASS.value]
            ax.plot([d.step for d in passed], [d.seq for d in passed], "o", color=color, markersize=5)
            ax.plot([d.step for d in skipped], [d.seq for d in skipped], "x", color=color, markersize=6)
        if ceiling is not None:
            ax.axhline(ceiling, color="red", linewidth=1.5, gid="ceiling",
                       label=f"max_model_len - spec_tokens + 1 = {ceiling}")
        else:
            ax.text(0.01, 0.95, "ceiling window unknown: the journal lacks max_model_len/spec_tokens",
                    transform=ax.transAxes, fontsize=9, va="top", color="dimgray", gid="ceiling-unknown")
        ax.set_ylabel("sequence length seen")
        ax.ticklabel_format(axis="y", useOffset=False, style="plain")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False,
                  title="o pass, x skip", title_fontsize=8)
        ax.grid(alpha=0.3)
    grid = axes[-1]
    y = {rank: i for i, rank in enumerate(ranks)}
    passed = [d for d in shown if d.decision == GateChoice.PASS.value]
    skipped = [d for d in shown if d.decision != GateChoice.PASS.value]
    grid.plot([d.step for d in passed], [y[d.rank] for d in passed], "s", color="#2E8B57", markersize=8,
              linestyle="none", label="pass", gid="pass")
    grid.plot([d.step for d in skipped], [y[d.rank] for d in skipped], "s", markerfacecolor="white",
              markeredgecolor="gray", markersize=8, linestyle="none", label="skip", gid="skip")
    if disagreement:
        for ax in axes:
            ax.axvspan(disagreement.step - 0.5, disagreement.step + 0.5, color="red", alpha=0.18,
                       gid="disagreement")
        outliers = [r for r in disagreement.outlier_ranks if r in y]
        grid.plot([disagreement.step] * len(outliers), [y[r] for r in outliers], "o", markerfacecolor="none",
                  markeredgecolor="red", markersize=15, markeredgewidth=2, linestyle="none", gid="outliers")
    grid.set_yticks(range(len(ranks)), [f"rank {r}" for r in ranks])
    grid.set_ylim(len(ranks) - 0.5, -0.5)
    grid.set_xlabel("decode step")
    grid.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    grid.grid(axis="x", alpha=0.3)
    if has_seq:
        grid.sharex(axes[0])
    return fig


# --- soak coverage and acceptance --------------------------------------------------------------------------


def plot_coverage(coverage: GateCoverage) -> Figure:
    """Steps inside the ceiling window per session (bars; disagreeing sessions marked red), and each session's
    largest sequence length against its ceiling."""
    sessions = coverage.sessions
    fig, axes = _figure(11, 6, 2, [1.0, 1.0])
    fig.suptitle(f"gate coverage over {phrases.plural(len(sessions), 'session')}: {coverage.verdict.label}",
                 fontsize=12)
    x = list(range(len(sessions)))
    top, bottom = axes
    top.bar(x, [s.steps for s in sessions], color="#DDDDDD", width=0.9, label="steps journaled")
    top.bar(x, [s.steps_in_window or 0 for s in sessions], color="#4C72B0", width=0.9,
            label="steps in the ceiling window", gid="exercised")
    unknown = [i for i, s in enumerate(sessions) if s.exercised is None]
    if unknown:
        top.bar(unknown, [sessions[i].steps for i in unknown], color="none", edgecolor="gray", hatch="..",
                width=0.9, label="window unknown", gid="unknown")
    bad = [i for i, s in enumerate(sessions) if s.disagreement is not None]
    if bad:
        top.plot(bad, [sessions[i].steps for i in bad], "v", color="red", markersize=7, linestyle="none",
                 label="gates disagreed", gid="disagreements")
    top.set_ylabel("steps")
    top.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    top.grid(axis="y", alpha=0.3)
    known = [i for i, s in enumerate(sessions) if s.max_seq is not None]
    bottom.plot(known, [sessions[i].max_seq for i in known], "o", markersize=3, color="#4C72B0",
                label="largest sequence length seen")
    limits = [i for i, s in enumerate(sessions) if s.ceiling_start is not None]
    if limits:
        bottom.plot(limits, [sessions[i].ceiling_start for i in limits], "_", color="red", markersize=9,
                    markeredgewidth=2, linestyle="none", label="max_model_len - spec_tokens + 1", gid="ceiling")
    bottom.set_ylabel("sequence length")
    bottom.set_xlabel("session (folder, in input order)")
    bottom.sharex(top)
    step = max(1, -(-len(sessions) // 40))  # at most 40 labels; a soak of hundreds shows every k-th
    shown = list(range(0, len(sessions), step))
    labels = _session_labels(sessions)
    bottom.set_xticks(shown, [labels[i] for i in shown], rotation=30, ha="right", fontsize=8)
    top.tick_params(labelbottom=False)
    bottom.ticklabel_format(axis="y", useOffset=False, style="plain")
    bottom.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    bottom.grid(alpha=0.3)
    return fig


def _session_labels(sessions) -> list[str]:
    """Each session by its name (`folder`, or `folder #k` where a folder holds several sessions) less the path
    every folder shares (`run-03`, not `/data/soak/run-03`), cut to 28 characters from the left."""
    folders = {s.folder for s in sessions}
    common = os.path.commonpath(list(folders)) if len(folders) > 1 else os.path.dirname(next(iter(folders), ""))
    labels = []
    for s in sessions:
        label = s.name[len(common):].lstrip("/" + os.sep) if common and s.name.startswith(common) else s.name
        label = label or s.name
        labels.append(label if len(label) <= 28 else "..." + label[-25:])
    return labels


def plot_acceptance(report: AcceptanceReport) -> Figure:
    """Per-position acceptance rate of every run side by side (left) and conditional acceptance with the
    collapse threshold (right); the baseline dashed black, collapsed runs drawn thick with red markers."""
    fig, (left, right) = _figure(12, 5.2 + 0.25 * ((len(report.runs) + 3) // 3), 1, cols=2)
    fig.suptitle("speculative decoding: acceptance per draft position", fontsize=12)
    runs = list(report.runs) + ([report.baseline] if report.baseline else [])
    names = [os.path.basename(r.file) for r in runs]
    names = [n if names.count(n) == 1 else r.file for n, r in zip(names, runs)]
    without = []
    styles = ["-", "--", "-.", ":"]
    for i, (run, name) in enumerate(zip(runs, names)):
        positions = [k for k, v in enumerate(run.per_position) if v is not None]
        if not positions:
            without.append(name)
            continue
        is_base = run is report.baseline
        label = f"baseline: {name}" if is_base else name + (" (collapsed)" if run.collapsed else "")
        if is_base:
            style = dict(color="black", linestyle="--", linewidth=1.5)
        else:
            style = dict(color=_PALETTE[i % len(_PALETTE)], linestyle=styles[(i // len(_PALETTE)) % 4],
                         linewidth=2.6 if run.collapsed else 1.4)
            if run.collapsed:
                style.update(markeredgecolor="red", markeredgewidth=1.5)
        left.plot(positions, [run.per_position[k] for k in positions], marker="o", label=label,
                  gid=f"run:{run.file}", **style)
        later = [k for k, v in enumerate(run.conditional) if v is not None]
        right.plot(later, [run.conditional[k] for k in later], marker="o", label=label,
                   gid=f"conditional:{run.file}", **style)
    right.axhline(report.options.threshold, color="red", linewidth=1.2, gid="threshold",
                  label=f"collapse threshold {report.options.threshold:g}")
    for ax, what in ((left, "acceptance rate (accepted / drafts)"),
                     (right, "conditional acceptance (rate k / rate k-1)")):
        ax.set_xlabel("draft position")
        ax.set_ylabel(what)
        ax.set_ylim(-0.02, 1.05)
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.grid(alpha=0.3)
    title = None
    if without:
        title = "no per-position rates (not drawn): " + ", ".join(without[:6]) + (" ..." if len(without) > 6 else "")
    handles, labels = right.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=min(3, len(labels)), fontsize=8, frameon=False,
               title=title, title_fontsize=8)
    return fig


def write_png(fig: Figure, path: str, dpi: int = 110) -> str:
    """Save a figure as PNG at `path` (the CLI's --plot, checked against the inputs before); returns the path."""
    from .files import write_replacing

    write_replacing(path, png_bytes(fig, dpi))
    return path
