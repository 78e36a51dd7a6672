"""The RAS plot: launched counts per collective type and rank across replies, and each rank's lag behind the
leader (report/plots.py draws the rest)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ..align.ras import RasHistory
from ..model import phrases
from .figures import PALETTE as _PALETTE
from .figures import figure as _figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def plot_ras(histories: dict[str, RasHistory], comms: list[str] | None = None, max_panels: int = 6) -> Figure:
    """RAS launched counts per collective type and rank across the replies (oldest first): one panel per
    (communicator, collective type) with its own scale, titled stuck (unchanged while ranks disagree) or moving.
    Ranks at one count draw on top of each other, so each group is named at the last reply."""
    panels: list[tuple[str, str, dict[int, list[float]]]] = []
    with_counts = [c for c, h in histories.items() if any(_ras_counts(block) for _, block in h.states)]
    order = list(dict.fromkeys([c for c in (comms or []) if c in with_counts] + sorted(with_counts)))
    for comm in order:
        history = histories[comm]
        series: dict[str, dict[int, list[float]]] = {}
        for index, (_, block) in enumerate(history.states):
            for (op, rank), n in _ras_counts(block).items():
                per_rank = series.setdefault(op, {})
                per_rank.setdefault(rank, [float("nan")] * len(history.states))[index] = n
        for op, per_rank in sorted(series.items()):
            if any(v for values in per_rank.values() for v in values if v == v):
                panels.append((comm, op, per_rank))
    panels = panels[:max_panels]
    if not panels:
        fig, axes = _figure(11, 2.0, 1)
        fig.suptitle("RAS launched-collective counts per type and rank across replies", fontsize=12)
        axes[0].text(0.5, 0.5, "no RAS reply gives per-rank counts", ha="center", va="center",
                     transform=axes[0].transAxes)
        axes[0].set_axis_off()
        return fig
    fig, axes = _figure(11, 2.9 * len(panels) + 0.8, len(panels), cols=2)
    fig.suptitle("RAS launched-collective counts per type and rank across replies (left), and how far each rank\n"
                 "is behind the leading rank (right)", fontsize=12)
    from matplotlib.ticker import MaxNLocator

    markers = "osD^v<>ph"
    for index, (comm, op, per_rank) in enumerate(panels):
        ax, lag_ax = axes[2 * index], axes[2 * index + 1]
        history = histories[comm]
        n = len(history.states)
        for j, (rank, values) in enumerate(sorted(per_rank.items())):
            ax.plot(range(n), values, marker=markers[j % len(markers)], color=_PALETTE[j % len(_PALETTE)],
                    linewidth=1.2, markersize=5, label=f"comm rank {rank}", gid=f"ras:{comm}:{op}:{rank}")
        last: dict[float, list[int]] = {}
        for rank, values in sorted(per_rank.items()):
            if values[-1] == values[-1]:
                last.setdefault(values[-1], []).append(rank)
        for count, group in sorted(last.items()):
            ax.annotate(f"{count:g}: {phrases.ranks_words(group, 'comm rank')}", (n - 1, count), xytext=(-4, 5),
                        textcoords="offset points", fontsize=10, color="dimgray", ha="right")
        values = [v for vs in per_rank.values() for v in vs if v == v]
        pad = 0.6 + 0.2 * (max(values) - min(values))
        ax.set_ylim(min(values) - pad, max(values) + pad)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlim(-0.3, n - 0.7)
        state = ("stuck: counts unchanged while ranks disagree" if history.stuck else
                 "moving: counts changed between replies" if history.moving else
                 "one reply per format: progress unknown" if history.moving is None else "unchanged, ranks agree")
        ax.set_title(f"comm {comm}, {op}:\n{state}", fontsize=11, loc="left")
        ax.set_xticks(range(n), [_reply_label(s) for s, _ in history.states], rotation=20, fontsize=9, ha="right")
        ax.tick_params(axis="y", labelsize=10)
        ax.set_ylabel(f"{op} launched", fontsize=10)
        ax.grid(alpha=0.3)
        leaders = [max((v[i] for v in per_rank.values() if v[i] == v[i]), default=float("nan")) for i in range(n)]
        for j, (rank, values) in enumerate(sorted(per_rank.items())):
            behind = [v - lead for v, lead in zip(values, leaders)]
            lag_ax.plot(range(n), behind, marker=markers[j % len(markers)], color=_PALETTE[j % len(_PALETTE)],
                        linewidth=1.2, markersize=5, label=f"comm rank {rank}", gid=f"ras-lag:{comm}:{op}:{rank}")
        lags = [v - lead for vs in per_rank.values() for v, lead in zip(vs, leaders) if v == v]
        lag_ax.set_ylim(min(lags + [0]) - 0.6, 0.6)
        lag_ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        lag_ax.set_xlim(-0.3, n - 0.7)
        lag_ax.set_xticks(range(n), [_reply_label(s) for s, _ in history.states], rotation=20, fontsize=9,
                          ha="right")
        lag_ax.tick_params(axis="y", labelsize=10)
        lag_ax.set_ylabel("minus the leader", fontsize=10)
        lag_ax.grid(alpha=0.3)
        lag_ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9, frameon=False)
    return fig


def _ras_counts(block) -> dict[tuple[str, int], int]:
    """(collective type, comm rank) -> launched count in one reply's block (per-rank counts, else the ranks
    listed in its MISMATCH groups)."""
    counts = {(op, r.rank): n for r in block.ranks for op, n in r.counts.items()}
    for group in block.count_groups:
        for rank in group.ranks:
            counts.setdefault((group.op or "ops", rank), group.count or 0)
    return counts


def _reply_label(snapshot) -> str:
    name = os.path.basename(snapshot.loc.path)
    return f"{name} {snapshot.time}" if snapshot.time else name
