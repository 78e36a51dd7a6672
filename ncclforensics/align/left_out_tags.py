"""A tie told apart by the tags each step repeats: the ranks whose own records of a step leave out a tag.

A model's forward issues its call sites in one order every step, on every rank that runs it (own_records.py says so
of fingerprint tags, recurring_sites.py of call stacks). Where records part the ranks with no majority (a tie of one
against one where the others' records end before the sides part: their step never completed), a rank whose own
records of a step issue tags a, b one after the other, where another rank's records of the same step hold t and its
own do not, and every other step on record that holds a and b issues a, t, b (two or more of them, none a, b), left
t out: it departed there, at the seq of its b (its stream shifts from there on). A step that holds other tags
between a and b elsewhere (a drafter pass, which may run in one step alone) says nothing, nor does one whose t no
other rank recorded in that step (every rank may have skipped a pass there).

A step's edges count as tags: where a rank's records of one step follow its records of another, the step's start
is on record (its first tag follows it), and so is the end of the step before (nothing of it comes after). A rank
that left out the first tag of a step, or the last, leaves it out between an edge and a tag, as one that left out
a middle one leaves it out between two tags. An edge is never placed where a rank's records end, nor where they
begin past the communicator's first collective: a trace may begin or end inside a step. Records that begin at seq 1
hold the communicator's first collective, and nothing of its step came before it there: that step's start is on
record too (so every rank's first step on record counts against one that left out a step's first tag later).

Worked example (998134): the traces of 64 ranks issue self_attn, mlp, moe, l1.self_attn, ... in step 0; ranks 24
and 32 alone read step 1 back (the others wait on their last collective there). Rank 32 issued mlp then
l1.self_attn, rank 24 moe then l1.mlp: their streams part one against one at seq 10, every other rank with no record
there. Rank 32 left out moe at seq 10 and rank 24 l1.self_attn at seq 11: rank 32 departed first.

Worked example (1101267): of 8 ranks, ranks 2 and 4 alone read step 2 back. Rank 2's records of it begin with
l0.moe right after step 1's lm_head, rank 4's with l0.mlp; rank 4's skip l1.mlp later. Every other step on record
that begins after another opens with l0.mlp then l0.moe: rank 2 left out l0.mlp at seq 11, rank 4 l1.mlp at seq 13.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from .edits import Codes, EditKind, Placement
from .proposal import Proposal

LEFT_OUT_TAGS = "tags each step repeats"  # the label of a tie told apart so (`pinned_by`)

# Other steps on record that must repeat the run a, t, b: one alone may be a departure of its own.
_AGAINST = 2

# Codes of a step's edges, as tags: a field's codes are odd hashes (codes.CodeBook) or 0, so these even ones are none.
_STEP_START = np.uint64(2**64 - 2)
_STEP_END = np.uint64(2**64 - 4)


def left_out_tags(codes: dict[int, Codes], start: int, seen: bool = True) -> dict[int, int]:
    """rank -> the first seq at which its own records of a step leave out a tag (module docstring); ranks whose
    records hold no tags and steps, or leave out none, are not listed. `seen`: only a tag that another rank's records
    of the same step hold (False where other evidence says the others ran more of that step)."""
    positions = _positions(codes, start)
    if positions.is_empty():
        return {}
    # (tags held once in their step only: a tag issued twice there has no one place)
    once = positions.filter(pl.len().over("rank", "step", "tag") == 1)
    at_a, at_b = once.rename({"tag": "a", "pos": "pos_a"}), once.rename({"tag": "b", "pos": "pos_b"})
    pairs = (at_a.join(at_b.with_columns(pl.col("pos_b") - 1), left_on=["rank", "step", "pos_a"],
                       right_on=["rank", "step", "pos_b"])
             .select("rank", "step", "a", "b", pos=pl.col("pos_a") + 1))  # a, b one after the other
    keys = pairs.select("a", "b").unique()
    # Every step holding both tags of a pair issued somewhere one after the other: how far apart, and what between.
    holding = (keys.join(at_a, on="a").join(at_b, on=["rank", "step", "b"])
               .with_columns(gap=pl.col("pos_b") - pl.col("pos_a"), pos_t=pl.col("pos_a") + 1)
               .join(positions.rename({"tag": "t", "pos": "pos_t"}), on=["rank", "step", "pos_t"], how="left"))
    per_pair = holding.group_by("a", "b").agg(
        held=pl.len(), apart_by_one=(pl.col("gap") == 2).sum(), adjacent=(pl.col("gap") == 1).sum(),
        middles=pl.col("t").filter(pl.col("gap") == 2).n_unique(), t=pl.col("t").filter(pl.col("gap") == 2).first())
    # The pair's own step holds a, b one after the other; every other step holding both holds a, t, b; another
    # rank's records of the step hold t, and its own do not.
    # (where other evidence says the others ran more of the step, other steps that leave t out too are departures
    # alike, not steps that never held it)
    alike = 1 if seen else pl.col("adjacent")
    found = (pairs.join(per_pair, on=["a", "b"])
             .filter((pl.col("apart_by_one") >= _AGAINST) & (pl.col("apart_by_one") + alike == pl.col("held"))
                     & (pl.col("middles") == 1)))
    if seen:
        found = (found.join(positions.select("step", t="tag", other="rank"), on=["step", "t"])
                 .filter(pl.col("other") != pl.col("rank")))  # another rank's records of the same step hold t
    found = (found.join(positions.select("rank", "step", t="tag"), on=["rank", "step", "t"], how="anti")
             .group_by("rank").agg(pl.col("pos").min()))
    return {int(rank): start + int(pos) for rank, pos in found.iter_rows()}


def _positions(codes: dict[int, Codes], start: int) -> pl.DataFrame:
    """(rank, step, tag, pos) for every position a rank recorded both a tag and a step at, and the edges of its
    steps on record: a step's start one position before its first tag, the step before's end one position after its
    last, wherever one step's records follow another's with no gap; and the first step's start, one position before
    the records, where they begin at the communicator's first collective (seq 1, position 0 from `start` 1)."""
    frames = []
    for rank, stream in codes.items():
        tag, step = stream.fields.get("tag"), stream.fields.get("step")
        if tag is None or step is None:
            continue
        recorded = (tag != 0) & (step != 0)
        at = np.flatnonzero(recorded)
        if not at.size:
            continue
        # positions whose record follows a record of another step
        turns = np.flatnonzero(recorded[1:] & recorded[:-1] & (step[1:] != step[:-1])) + 1
        starts = turns if start != 1 or at[0] != 0 else np.concatenate([[0], turns])
        frames.append(pl.DataFrame({
            "rank": np.full(at.size + starts.size + turns.size, rank, dtype=np.int64),
            "step": np.concatenate([step[at], step[starts], step[turns - 1]]),
            "tag": np.concatenate([tag[at], np.full(starts.size, _STEP_START), np.full(turns.size, _STEP_END)]),
            "pos": np.concatenate([at, starts - 1, turns]).astype(np.int64)}))
    if not frames:
        return pl.DataFrame(schema={"rank": pl.Int64, "step": pl.UInt64, "tag": pl.UInt64, "pos": pl.Int64})
    return pl.concat(frames)


def told_by_left_out_tags(proposal: Proposal, codes: dict[int, Codes], start: int) -> Proposal | None:
    """The proposal of a tie (no majority) whose named groups include ranks whose own records of a step leave out a
    tag: those departed, each group where its ranks' records first leave one out, with every member of the group
    whose records reach that seq (one whose records there lack the tags, a trace cut short beside an NCCL log,
    departed with it; one whose records end before it sides with either, and goes with the rest), against every
    other rank, where they are a strict minority of the ranks on record; else None."""
    if proposal.majority or proposal.stopped or not proposal.placements:
        return None
    left = left_out_tags(codes, start)
    departed: dict[int, tuple[int, list[int]]] = {}  # a flagged rank -> (seq, the ranks departing with it)
    for p in proposal.placements:
        members = proposal.members.get(p.rank, [p.rank])
        flagged = [r for r in members if r in left]
        if flagged and flagged[0] not in departed:
            seq = min(left[r] for r in flagged)
            departed[flagged[0]] = (seq, sorted(r for r in members if r in codes and codes[r].length > seq - start))
    outliers = sorted({r for _, ranks in departed.values() for r in ranks})
    if not departed or len(outliers) * 2 >= len(codes):
        return None
    placements = [Placement(rank, EditKind.MISSING, 1, seq, seq, score=1) for rank, (seq, _) in sorted(departed.items())]
    return Proposal(placements, outliers, sorted(set(codes) - set(outliers)), True, True,
                    members={rank: ranks for rank, (_, ranks) in departed.items()})
