"""What every plot is drawn on: a Figure on the Agg canvas (no pyplot, no global backend), its palette, and PNG
bytes with every text drawn as written."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

from ..errors import ForensicsError

if TYPE_CHECKING:
    from matplotlib.figure import Figure

PALETTE = ["#4C72B0", "#DD8452", "#55A868", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C", "#CCB974", "#64B5CD"]


def figure(width: float, height: float, rows: int = 1, height_ratios: list[float] | None = None, cols: int = 1):
    """A Figure on an Agg canvas and its axes (a flat list, row by row)."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as e:  # matplotlib is a dependency; a broken install still gets a clear message
        raise ForensicsError("matplotlib is needed for plots", hint="pip install matplotlib") from e
    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, cols, squeeze=False, height_ratios=height_ratios)
    return fig, list(axes.flat)


def png_bytes(fig: Figure, dpi: int = 110) -> bytes:
    """The figure as PNG bytes (what the postmortem writes and embeds). Labels hold names from the inputs, where
    `$...$` would be read as mathtext (and a bad one fail the drawing): every text is drawn as written."""
    from matplotlib.text import Text

    for text in fig.findobj(Text):
        text.set_parse_math(False)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()
