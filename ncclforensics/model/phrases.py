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


def plural(n: int, word: str) -> str:
    """`1 collective`, `2 collectives`."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def either(items: list[str]) -> str:
    """`a`, `a or b`, `a, b, or c` (empty for none)."""
    if not items:
        return ""
    if len(items) == 2:
        return f"{items[0]} or {items[1]}"
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + ", or " + items[-1]


def they(ranks) -> str:
    """Pronouns and verbs that agree with a list of ranks: `it` for one, `they` for several."""
    return "they" if len(ranks) > 1 else "it"


def them(ranks) -> str:
    return "them" if len(ranks) > 1 else "it"


def their(ranks) -> str:
    return "their" if len(ranks) > 1 else "its"


def are(ranks) -> str:
    return "are" if len(ranks) > 1 else "is"


def they_are(ranks) -> str:
    return f"{they(ranks)} {are(ranks)}"


def verb_form(word: str, ranks) -> str:
    """`waits` for one rank, `wait` for several."""
    return word + "s" if len(ranks) == 1 else word
