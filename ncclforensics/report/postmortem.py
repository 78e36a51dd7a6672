"""The postmortem: report.md, a self-contained report.html and the PNGs, from one analysis.

Sections: verdict, timeline, root cause, window, wedge, evidence index, caveats, how to reproduce. Renders only;
every fact comes from the Diagnosis and the values api.postmortem_paths computed beside it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .. import __version__
from ..align.diagnosis import Diagnosis
from ..align.gates import decision_tuple
from ..align.inventory import Inventory
from ..align.reconcile import CUDA_GRAPH_NOTE
from ..align.side_by_side import SideBySide
from ..align.timeline import CommLanes, TimelineEntry, pairing_totals
from ..model import GateDecision, Verdict, phrases
from ..model.phrases import seq_words
from . import plots, root_words, side_by_side, wedge_words, words
from .export import pairings_table, write_table
from .document import Block, Bullets, Code, Heading, Image, Links, Mono, Para, Table, render_html, render_markdown
from .files import write_replacing
from .receipts import receipt_words

if TYPE_CHECKING:
    from matplotlib.figure import Figure

REPORT_MD, REPORT_HTML = "report.md", "report.html"
PAIRINGS_FILES = ("pairings.parquet", "pairings.csv")  # every pairing run of the window, beside the report
PAIRING_ROWS = 20  # window pairing runs listed in the report; the rest summed per kind (all in PAIRINGS_FILES)
ALIGNED_AROUND = 5  # lines either side of the root and the first visible mismatch in the aligned view


@dataclass
class PostmortemData:
    """Everything a postmortem shows (built by api.postmortem_paths)."""

    diagnosis: Diagnosis
    out: Path
    command: str  # the exact command that reproduces this report
    diff_command: str
    workdir: str
    lanes: list[CommLanes] = field(default_factory=list)
    gates: list[GateDecision] = field(default_factory=list)
    inventory: Inventory | None = None
    timeline: list[TimelineEntry] = field(default_factory=list)
    aligned: SideBySide | None = None  # the ranks' streams side by side around the root (align/side_by_side.py)


def _png_name(prefix: str, comm: str) -> str:
    return f"{prefix}-{re.sub(r'[^A-Za-z0-9_.-]+', '_', comm)[:80]}.png"


def build_figures(data: PostmortemData) -> dict[str, tuple[Figure, str]]:
    """The plots, by PNG file name, with their captions: one timeline per communicator that matters, the gate
    decisions, the RAS counts."""
    d = data.diagnosis
    figures: dict[str, tuple[Figure, str]] = {}
    for lanes in data.lanes:
        visible = d.first_visible[1] if d.first_visible and d.first_visible[0] == lanes.comm else None
        fig = plots.plot_comm_timeline(lanes, d.root, d.window, d.wedge if wedge_words.shows_wedge(d) else None, visible)
        figures[_png_name("timeline", lanes.comm)] = (
            fig, plots.timeline_caption(lanes, d.root, d.window, d.wedge if wedge_words.shows_wedge(d) else None, visible))
    if data.gates:
        figures["gates.png"] = (plots.plot_gates(data.gates, d.gate),
                                "Drafter gate decisions per step near the ceiling"
                                + (f" (step {d.gate.step}, where the ranks disagree, highlighted)" if d.gate else ""))
    if d.ras:
        order = list(dict.fromkeys(c for c in ([d.root.comm] if d.root else []) + ([d.wedge.comm] if d.wedge else [])
                                   if c in d.ras))
        order += [c for c, h in sorted(d.ras.items()) if h.disagree and c not in order]
        order += [c for c in sorted(d.ras) if c not in order]
        figures["ras.png"] = (plots.plot_ras(d.ras, order),
                              "RAS launched counts per collective type and rank across replies")
    return figures


def build_images(figures: dict[str, tuple[Figure, str]]) -> dict[str, Image]:
    """The figures rendered as PNG images."""
    return {name: Image(name, caption, plots.png_bytes(fig)) for name, (fig, caption) in figures.items()}


def build_document(data: PostmortemData, images: dict[str, Image]) -> list[Block]:
    """The report as blocks (see document.py)."""
    d = data.diagnosis
    blocks: list[Block] = [Heading("ncclforensics postmortem", 1)]
    blocks += _verdict(d)
    blocks.append(Heading("Timeline"))
    if data.timeline:
        blocks.append(Table(("when", "what", "evidence"), tuple(
            (e.when, e.what, Mono(", ".join(str(loc) for loc in e.where)) if e.where else "-")
            for e in data.timeline)))
    else:
        blocks.append(Para("Nothing happened that needs a timeline: the streams agree."))
    blocks += [img for name, img in images.items() if name.startswith("timeline-")]
    blocks += _root_cause(d, images)
    blocks += _aligned(data.aligned)
    blocks += _window(d)
    blocks += _wedge(d, images)
    blocks += _evidence_index(data)
    blocks += _caveats(data)
    blocks += [
        Heading("How to reproduce"),
        Para(f"Run from {data.workdir} with ncclforensics {__version__}; the first command rewrites this report, "
             f"the second prints the same analysis as JSON."),
        Code(f"{data.command}\n{data.diff_command}"),
    ]
    return blocks


def _verdict(d: Diagnosis) -> list[Block]:
    out: list[Block] = [Heading("Verdict"),
                        Para(words.summary(d) or d.verdict.value, strong=words.verdict_label(d),
                             tone=d.verdict.value)]
    facts: list[str] = []
    if d.root is not None:
        r = d.root
        facts.append(f"Root communicator: {r.comm}")
        if r.seq_range is None:
            facts.append("Root seq: unknown (counts alone)")
        elif r.seq_range[0] == r.seq_range[1]:
            facts.append(f"Root seq: {r.seq}")
        else:
            facts.append(f"Root seq: {r.seq} (earliest; anywhere in {seq_words(*r.seq_range)})")
        facts.append(f"Outlier: {phrases.ranks_words(r.outlier_ranks)} ({root_words.kind_words(r)}; placed by {r.pinned_by})")
        if d.root_step is not None:
            facts.append(f"Root step: {d.root_step}")
    if d.window is not None and not d.window.collectives:
        facts.append(wedge_words.window_words(d.window))
    elif d.window is not None:
        w = d.window
        count = str(w.collectives) if w.collectives == w.collectives_min else f"{w.collectives_min}..{w.collectives}"
        facts.append(f"Corrupt-and-continue window: {count} collectives, seq {w.first_seq}..{w.last_seq}")
    if wedge_words.shows_wedge(d):
        facts.append(f"Wedge: comm {d.wedge.comm} {wedge_words.wedge_seq_words(d.wedge)} "
                     f"({wedge_words.wedge_kind_words(d.wedge.kind)})")
    facts.append(f"Ranks with evidence: {', '.join(map(str, d.ranks)) or 'none'}")
    out.append(Bullets(tuple(facts)))
    return out


def _root_cause(d: Diagnosis, images: dict[str, Image]) -> list[Block]:
    out: list[Block] = [Heading("Root cause")]
    if d.root is None:
        out.append(Para("No root collective: no rank launched a collective the others did not."
                        if d.verdict in (Verdict.CONSISTENT, Verdict.TRANSIENT) else
                        "No root collective could be placed from this evidence."))
    else:
        r = d.root
        out.append(Para(words.cause(d) or words.summary(d)))
        out.append(Table(("rank", "role", "seq", "collective", "state", "evidence"), tuple(
            (str(rank), root_words.role(r, rank), str(op.seq), op.describe(),
             op.state or "-", Mono(str(op.loc)))
            for rank, op in sorted(r.ops.items()))))
        if d.first_visible is not None and d.first_visible != (r.comm, r.seq):
            out.append(Para(f"A position-by-position check (what PyTorch's analyzer reports) would first see a "
                            f"mismatch at comm {d.first_visible[0]} seq {d.first_visible[1]}, not at the root."))
    if d.gate is not None:
        g = d.gate
        window = ""
        if g.ceiling_start is not None:
            window = (f" The step was {'inside' if g.in_ceiling_window else 'outside'} the ceiling window "
                      f"(sequence length >= {g.ceiling_start}).")
        else:
            window = " The journal gives no max_model_len/spec_tokens, so the ceiling window is unknown."
        out.append(Para(f"Gate decisions at step {g.step}, the first step at which the ranks disagreed.{window}"))
        out.append(Table(("rank", "decision", "seq seen", "proposed pass count", "sched count", "fits", "md_none",
                          "evidence"), tuple(
            (str(rank), t["decision"], _v(t["seq"]), _v(t["proposed_pass_count"]), _v(t["sched_count"]),
             _v(t["fits"]), _v(t["md_none"]), Mono(str(dec.loc)))
            for rank, dec in g.decisions.items() for t in [decision_tuple(dec)])))
    if "gates.png" in images:
        out.append(images["gates.png"])
    return out


def _v(value) -> str:
    return "-" if value is None else str(value)


def _window(d: Diagnosis) -> list[Block]:
    out: list[Block] = [Heading("Window")]
    w = d.window
    if w is None:
        out.append(Para("No corrupt-and-continue window: nothing diverged."))
        return out
    if not w.collectives:
        out.append(Para(wedge_words.window_words(w)))
        return out
    count = str(w.collectives) if w.collectives == w.collectives_min else f"{w.collectives_min}..{w.collectives}"
    basis = "every rank completed" if w.completion_known else "every rank launched (completion not recorded)"
    out.append(Para(f"From the root to the last collective {basis}, comm {w.comm} ran {count} collectives "
                    f"misaligned: seq {w.first_seq}..{w.last_seq}. Shape-equal pairings complete with mixed data "
                    f"(silent corruption); mismatched pairings may complete wrongly or hang."))
    rows = [(f"{p.first_seq}..{p.last_seq}", _pairing_words(p.kind.value), str(p.collectives))
            for p in w.pairings[:PAIRING_ROWS]]
    rest = w.pairings[PAIRING_ROWS:]
    if rest:  # a long window alternates kinds tens of thousands of times: the rest summed per kind
        totals = pairing_totals(rest)
        rows.append((f"{rest[0].first_seq}..{rest[-1].last_seq}", f"{len(rest)} more runs: " + ", ".join(
            f"{_pairing_words(kind)} {phrases.plural(n, 'run')}" for kind, (n, _) in totals.items()),
                     str(sum(c for _, c in totals.values()))))
    out.append(Table(("seqs", "pairing", "collectives"), tuple(rows)))
    if w.completed_by_some is not None:
        out.append(Para(wedge_words.completed_by_some_words(w).capitalize()))
    if w.pairings:
        out.append(Links(f"All {len(w.pairings)} pairing runs (comm, first_seq, last_seq, kind, collectives):",
                         PAIRINGS_FILES))
    return out


def _pairing_words(kind: str) -> str:
    return "silent corruption (shape-equal)" if kind == "shape_equal" else kind.replace("_", " ")


def _aligned(view: SideBySide | None) -> list[Block]:
    """The ranks' streams side by side around the root and the first visible mismatch, aligned as the root
    says (`diff --around`)."""
    if view is None:
        return []
    out: list[Block] = [Heading("Aligned streams"), Para(side_by_side.title(view) + ".")]
    parts = [("Around the root", view.near_root)]
    if view.near_visible:
        parts.append((f"Around the first visible mismatch, seq {view.visible_seq}", view.near_visible))
    for label, lines in parts:
        header, rows = side_by_side.table(view, lines)
        out += [Heading(label, 3), Table(header, tuple(tuple(Mono(c) if 0 < i < len(row) - 1 else c
                                                              for i, c in enumerate(row)) for row in rows))]
    receipts = [(f"{label}, seq {seq}", str(rank), side_by_side.cell(op), Mono(str(op.loc)))
                for label, seq, ops in (("root", view.root_seq, view.root_ops),
                                        ("first visible mismatch", view.visible_seq, view.visible_ops))
                for rank, op in sorted(ops.items())]
    if receipts:
        out.append(Table(("at", "rank", "collective", "evidence"), tuple(receipts)))
    return out


def _wedge(d: Diagnosis, images: dict[str, Image]) -> list[Block]:
    out: list[Block] = [Heading("Wedge")]
    w = d.wedge
    if w is None:
        out.append(Para("No wedge: nothing in the evidence shows progress stopping."))
    elif not wedge_words.shows_wedge(d):
        out.append(Para(wedge_words.records_end_words(w)))
    else:
        out.append(Para(f"Comm {w.comm} stopped {wedge_words.wedge_where(w)}: {wedge_words.wedge_kind_words(w.kind)}."))
        if text := wedge_words.wedge_range_words(w):
            out.append(Para(text))
        out.append(Table(("rank", "last launched", "last completed", wedge_words.wedge_at(w)), tuple(
            (str(rank), wedge_words.launched_words(w, rank), _v(w.completed.get(rank)),
             (w.ops[rank].describe() if rank in w.ops else
              "never launched" if rank in w.absent_ranks and w.seq_range[1] is not None
              else wedge_words.never_launched(w, rank))
             + (f"; {counted}" if (counted := wedge_words.counted_words(w, rank)) else ""))
            for rank in sorted(w.launched))))
        if w.cycle:
            out.append(Para("Wait-for cycle: " + " -> ".join(f"rank {r} in {c} seq {s}" for r, c, s in w.cycle)))
        if w.confirmed_by:
            out.append(Bullets(tuple(f"stopped: {reason}" for reason in w.confirmed_by)))
    if "ras.png" in images:
        out.append(images["ras.png"])
    return out


def _evidence_index(data: PostmortemData) -> list[Block]:
    out: list[Block] = [Heading("Evidence index")]
    inv = data.inventory
    if inv is None or not inv.files:
        out.append(Para("No input files."))
        return out
    out.append(Table(("file", "format", "records", "ranks", "contributed"), tuple(
        (Mono(f.path), f.format or "unrecognised", str(f.records), ", ".join(map(str, f.ranks)) or "-",
         "; ".join(f.contributed)) for f in inv.files)))
    receipts = [f for f in inv.files if f.receipts or f.problems]
    if receipts:
        out.append(Heading("Receipts (file:line)", 3))
        items: list[str] = []
        for f in receipts:
            items += [Mono(f"{r.loc}: {receipt_words(r.fact)}") for r in f.receipts]
            items += [Mono(f"{p.loc}: {p.severity.value}: {p.message}") for p in f.problems]
        out.append(Bullets(tuple(items)))
    return out


def _caveats(data: PostmortemData) -> list[Block]:
    d = data.diagnosis
    items = words.caveats(d)
    if d.root is not None and d.root.seq_range is not None and d.root.seq_range[0] != d.root.seq_range[1] and not any(
            "not pinned" in c for c in items):
        items.append(f"Root not pinned: anywhere in {seq_words(*d.root.seq_range)}.")
    if not any(CUDA_GRAPH_NOTE in c for c in items):
        items.append(CUDA_GRAPH_NOTE + "; NCCL debug logs show them only at capture, so replays are invisible to "
                                       "launch counts as well.")
    inv = data.inventory
    if inv is not None:
        items += [f"Missing evidence: {gap}." for gap in inv.missing]
    return [Heading("Caveats"), Bullets(tuple(items)) if items else Para("None.")]


def write_postmortem(data: PostmortemData, figures: dict[str, tuple[Figure, str]] | None = None) -> list[Path]:
    """Write report.md, report.html and the PNGs into `data.out` (created if needed); return the paths, the
    two reports first. `figures` (from build_figures) may be passed in to keep hold of them."""
    images = build_images(build_figures(data) if figures is None else figures)
    blocks = build_document(data, images)
    data.out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, image in images.items():
        written.append(write_replacing(data.out / name, image.png))  # a link left there is replaced, not followed
    window = data.diagnosis.window
    if window is not None and window.pairings:
        runs = pairings_table(window)
        written += [write_table(runs, data.out / name) for name in PAIRINGS_FILES]
    md = write_replacing(data.out / REPORT_MD, render_markdown(blocks).encode("utf-8", "replace"))
    page = write_replacing(data.out / REPORT_HTML, render_html(
        blocks, f"ncclforensics postmortem: {data.diagnosis.verdict.value}").encode("utf-8", "replace"))
    return [md, page] + written
