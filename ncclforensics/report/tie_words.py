"""The sides of a tie the ranks' issue orders part evenly, in words (align/issue_order_ties.py)."""

from __future__ import annotations

from ..align.answers import Root
from ..model.phrases import either, plural, ranks_words, seq_words, their, they


def issue_sides_words(root: Root) -> str:
    """Which ranks the issue orders put on each side of the tie, and what each side may have done (empty where
    they do not side the root's ranks)."""
    if root.issue_sides is None or root.seq_range is None:
        return ""
    early, later = list(root.issue_sides.early), list(root.issue_sides.later)
    low, high = root.seq_range
    by_place: dict[int, list[int]] = {}
    for rank, n in sorted(root.issue_places.items()):
        by_place.setdefault(n, []).append(rank)
    said = "; ".join(f"{ranks_words(ranks)} after {plural(n, 'collective')}" for n, ranks in sorted(by_place.items()))
    placed = [r for r in early if r in root.issue_places]
    text = (f" Each rank's records give its collectives of every communicator in the order it issued them, and "
            f"seq {high} of comm {root.comm} comes after so many of their other communicators' ({said}): "
            f"{ranks_words(placed)} issued it early.")
    late = [r for r in (*early, *later) if r in root.placed_late]
    for side in (early, later):
        kept = [r for r in side if r in late]
        if kept:
            others = [r for r in side if r not in kept]
            text += (f" {ranks_words(kept).capitalize()}'s records place {their(kept)} collectives here only from "
                     f"seq {min(root.placed_late[r] for r in kept)} on (records that begin late, as a Flight "
                     f"Recorder ring's do), past seq {high}; {they(kept)} launched as many here as "
                     f"{ranks_words(others)} and issued each one kept where {ranks_words(others)} did, as none of "
                     f"the other side did: {they(kept)} {'is' if len(kept) == 1 else 'are'} on that side.")
    more = f"{plural(root.size, 'collective')} more" if root.size else "more collectives"
    text += (f" Either {ranks_words(early)} ran {more} here, {'at ' if low == high else 'somewhere in '}"
             f"{seq_words(low, high)}, or {ranks_words(later)} left {'as many' if root.size else 'some'} out there "
             f"(past that, each side's collectives here pair with the other's as many seqs on)")
    if root.left_out_in:
        text += (f", or {ranks_words(early)} left out collectives of "
                 f"{either([f'comm {c}' for c in root.left_out_in])} before it")
    if root.issue_sides.elsewhere:
        text += (f", or {ranks_words(later)} ran as many more of "
                 f"{either([f'comm {c}' for c in root.issue_sides.elsewhere])} before it")
    sided = {*early, *later}
    rest = [r for r in root.outlier_ranks if r not in sided]
    # (a rank on either side may make either the fewer: no majority, though the sided ranks alone may be uneven)
    beside = f", with {ranks_words(rest)} on either side" if rest else ""
    text += (f"; {len(early)} {'rank' if len(early) == 1 else 'ranks'} against {len(later)}{beside}, and no majority "
             f"says which.")
    if rest:
        text += (f" {ranks_words(rest).capitalize()}'s records end before the sides part, or place nothing there: "
                 f"{they(rest)} may be on either side.")
    return text
