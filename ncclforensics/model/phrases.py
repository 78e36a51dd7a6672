"""Phrases every layer that words its own messages shares (align's findings, report's sentences)."""

from __future__ import annotations


def ranks_words(ranks, noun: str = "rank") -> str:
    """`rank 1`, `ranks 0, 2 and 3`, `ranks 0..7` (a run of more than four), `no rank`."""
    ranks = list(ranks)
    if not ranks:
        return f"no {noun}"
    if len(ranks) == 1:
        return f"{noun} {ranks[0]}"
    if len(ranks) > 4 and ranks == list(range(ranks[0], ranks[-1] + 1)):
        return f"{noun}s {ranks[0]}..{ranks[-1]}"
    return f"{noun}s " + ", ".join(map(str, ranks[:-1])) + f" and {ranks[-1]}"


def seq_words(low: int, high: int | None) -> str:
    """`seq 5`, `seq 5..9`, or `seq 5 or later` (nothing bounds the range above)."""
    if high is None:
        return f"seq {low} or later"
    return f"seq {low}" if low == high else f"seq {low}..{high}"
