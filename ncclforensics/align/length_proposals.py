"""Proposals for streams that differ in length alone, and for ranks behind the rest: where records agree wherever
they overlap, only where each stream ends says who launched more or fewer, and which side is the minority.
"""

from __future__ import annotations

from dataclasses import replace

from .edits import Codes, EditKind, Placement, merged, place_edits
from .proposal import Proposal


def with_behind(proposal: Proposal | None, codes: dict[int, Codes], start: int,
                 behind: set[int] | None) -> Proposal | None:
    """`proposal` with the `behind` ranks among the reference added as outliers: collectives missing anywhere in
    their records, or a stop after their last one."""
    if not behind:
        return proposal
    reference_ranks = proposal.reference if proposal else sorted(codes)
    stopped = proposal.stopped if proposal else []
    late = sorted(r for r in behind if (r in reference_ranks or r in stopped) and r in codes)
    keep = [r for r in reference_ranks if r not in behind]
    if not late or len(late) * 2 > len(codes) or not keep:
        return proposal
    # A stream cut short no later than where the late ones end may be behind too (what it launched past its cut is
    # unknown): where it could make the late ones half the ranks, no majority says which side departed.
    cut_behind = [r for r in (proposal.unplaced if proposal else []) if r in codes and r not in late
                  and codes[r].length <= max(codes[rank].length for rank in late)]
    tie = (len(late) + len(cut_behind)) * 2 >= len(codes)
    reference = merged(codes[r] for r in keep)
    # Ranks that stopped short and are not behind (nothing says they left one out or are held back) merely lag:
    # their records end, and they side with nobody.
    lagging = [r for r in stopped if r not in late]
    placements = [] if proposal is None else [p for p in proposal.placements if p.kind is not EditKind.STOPPED
                                              or p.rank not in late and p.rank not in lagging]
    for rank in late:
        found, _ = place_edits(rank, codes[rank], reference, start, known=True)
        placements += [p for p in found if p.kind is EditKind.MISSING]
        end = start + codes[rank].length
        placements.append(Placement(rank, EditKind.STOPPED, reference.length - codes[rank].length, end, end))
    if tie:
        # Half the ranks behind: they skipped collectives, or the other half launched extra ones.
        ahead = merged(codes[r] for r in late)
        for rank in keep:
            placements += [p for p in place_edits(rank, codes[rank], ahead, start)[0] if p.kind is EditKind.EXTRA]
        return Proposal(placements, sorted(codes), sorted(codes), False, True, either_side=True,
                        shown=bool(proposal and proposal.shown))
    earlier = [] if proposal is None or not proposal.majority or proposal.stopped else proposal.outliers
    outliers = sorted(set(earlier) | set(late))
    standing = {rep: [r for r in ranks if r not in late or r == rep]
                for rep, ranks in (proposal.members if earlier else {}).items()}
    return Proposal(placements, outliers, keep, True, proposal.whole if proposal else True,
                    shown=bool(proposal and proposal.shown), members=standing,
                    unplaced=sorted(set(proposal.unplaced if proposal else []) | set(lagging)))


def lengths_only(codes: dict[int, Codes], start: int, deviants: set[int] | None,
                  cut: set[int] | None = None, incomplete: set[int] | None = None) -> Proposal | None:
    """Streams that agree wherever they overlap and differ only in length: the side that goes on past the others
    (the minority) launched collectives the others did not; the side that stops short (the minority) stopped.
    Where the gate journal names the deviating ranks, their edit lies somewhere in their records; or, for a
    deviant whose records end short of what it launched (`incomplete`), anywhere past their end up to one past
    the others' records: what it launched there is on no record."""
    lengths = {r: c.length for r, c in codes.items()}
    if deviants and set(codes) - deviants:
        told = sorted(deviants & set(codes))
        reference = merged(codes[r] for r in codes if r not in deviants)
        # Deviants that launched more than everyone else show their extra collectives; otherwise only the
        # journal's word places an edit on them.
        ahead = all(lengths[r] > reference.length for r in told)
        last = start + reference.length
        found = [replace(p, high=max(p.high, last)) if rank in (incomplete or ()) and p.low >= start + lengths[rank]
                 else p for rank in told for p in place_edits(rank, codes[rank], reference, start, known=not ahead)[0]]
        if found:
            return Proposal(found, told, sorted(set(codes) - deviants), True, True, shown=False, told=not ahead)
    if len(set(lengths.values())) < 2:
        return None
    longest = max(lengths.values())
    ahead = sorted(r for r, n in lengths.items() if n == longest)
    # A stream that ends where its file was cut short may have gone on as far as any: it did not stop there.
    unknown = sorted(r for r in set(codes) - set(ahead) if r in (cut or ()))
    behind = sorted(set(codes) - set(ahead) - set(unknown))
    if not behind:
        return None  # the shorter streams end where their files were cut short: nothing differs on record
    # Two ranks, one ahead: it launched more, or the other stopped short; nothing says which. The streams cut
    # short side with neither, so they are not counted; yet each may be on either side, so a side is the minority
    # only where it stays one with every such stream on it: ranks 0 and 1 at 14, rank 3 at 15 and rank 2 cut at 14
    # may be two against two (rank 2 went on to 15 too), and both sides are then named.
    deciding = len(ahead) + len(behind)
    tie = len(ahead) * 2 == deciding and deciding == 2
    if len(ahead) * 2 < deciding or tie:
        # Ranks that ran one program stop at one place: where most of the rest end alike, those that end sooner
        # than they do departed as well (they left out lookalikes, or stopped short), and may have departed first.
        level = max(lengths[r] for r in behind)
        short = [r for r in behind if lengths[r] < level] if not tie and sum(
            lengths[r] == level for r in behind) * 2 > deciding + len(unknown) else []
        reference = merged(codes[r] for r in behind if r not in short)
        placements: list[Placement] = []
        for rank in ahead:
            found, _ = place_edits(rank, codes[rank], reference, start)
            placements.extend(found)
        for rank in short:
            found, _ = place_edits(rank, codes[rank], reference, start, known=True)
            placements += [p for p in found if p.kind is EditKind.MISSING]
            end = start + lengths[rank]
            placements.append(Placement(rank, EditKind.STOPPED, level - lengths[rank], end, end))
        if short:
            return Proposal(placements, sorted([*ahead, *short]), sorted(set(behind) - set(short)), True, True,
                            shown=False, unplaced=unknown)
        split = (len(ahead) + len(unknown)) * 2 >= deciding + len(unknown)  # (a two-rank tie among them)
        # (a stream cut short sides with neither: what it launched past its cut may place it, per-step checksums)
        return Proposal(placements, sorted(codes) if split else ahead, behind, not split, True, shown=False,
                        unplaced=[] if split else unknown)
    shortest = min(lengths[r] for r in behind)
    stopped = sorted(r for r in behind if lengths[r] == shortest)
    at = start + shortest
    # (a stream cut no later than where they stopped may have stopped there too; one cut short before the longest
    # ends may have stopped where the others did, or gone on: on no side)
    may_stop = [r for r in unknown if lengths[r] <= shortest]
    minority = (len(stopped) + len(may_stop)) * 2 < deciding + len(may_stop)
    placements = [Placement(r, EditKind.STOPPED, longest - shortest, at, at) for r in stopped]
    if not minority and not unknown:
        # As many ranks end sooner as go on: the longer may have run extra collectives as well as the shorter left
        # some out or stopped, and no majority says which, so both sides are named, with the edits of each.
        reference = merged(codes[r] for r in stopped)
        for rank in sorted(set(codes) - set(stopped) - set(unknown)):
            placements.extend(place_edits(rank, codes[rank], reference, start)[0])
        return Proposal(placements, sorted(codes), sorted(set(codes) - set(unknown)), False, True, stopped,
                        shown=False)
    return Proposal(placements, stopped, sorted(set(codes) - set(stopped) - set(unknown)), minority, True, stopped,
                    shown=False, unplaced=unknown)
