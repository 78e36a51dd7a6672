"""Launch counts of one communicator read against PyTorch's completion marks in the ranks' other communicators.

A rank's collectives run in issue order on its GPU whatever their communicator (align/interleave.py), so nothing it
issued after a collective that never completes completes either. PyTorch marks, per process group and rank, the
last work enqueued and the last completed. Where a communicator W stopped with some ranks behind (fewer launched),
those marks may say whether the ranks behind skipped a collective of W or are held back elsewhere:

- a rank behind that completed all it launched in W waits in its other group X, at the first work it did not
  complete there. Where every member of X on record launched that work and none completed it, X waits for nothing
  of its own: an earlier collective of another group holds it on some member's GPU. The ranks behind have none
  pending; each other member of X has one pending in W, the next after the last the ranks behind launched, and so
  issued it after exactly the collectives of X it completed;
- ranks of the other groups, with that collective of W pending too, completed more of their own groups'
  collectives than that, all of them issued before it: the program issues it later. The members of X ahead in W
  issued it early, an extra collective; the ranks behind are held back by it, not short of one.

Had the ranks behind skipped it instead, the members of X ahead would have issued it where the program does, and
the other groups' ranks, stuck in it as well, would have completed no more of their groups' collectives before it
than those members did: the two readings part by these counts, which is why they decide.

The counts do not tell an extra collective of W from collectives of X the members ahead left out before it (a
drafter pass they skipped, say): either way they issued it after fewer of X's than the program. Their call stack
of it, where their timeout lines give it, tells: the program's own collective comes from the program's call site.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Set
from dataclasses import replace

from .divergence import EXTRA, MISSING, HeldBack, Root


def held_back_root(root: Root, launched: Mapping[str, Mapping[int, int]],
                   completed: Mapping[str, Mapping[int, int | None]],
                   stacks: Mapping[tuple[str, int, int], str] | None = None) -> Root | None:
    """`root` (ranks of its comm behind by PyTorch's counts) with its outliers the ranks the completion marks show
    to have launched an extra collective that holds the ranks behind back (see the module docstring); None where
    the marks do not show that. `launched` / `completed`: group -> rank -> PyTorch's last enqueued / completed
    work, the groups' names as the root's comm is named; `stacks`: (group, rank, work) -> the call stack of a
    work that timed out."""
    comm = root.comm
    if root.kind != MISSING or comm not in launched or root.seq_range is None or root.seq_range[1] is None:
        return None
    here, done = launched[comm], completed.get(comm, {})
    behind = set(root.outlier_ranks)
    if len({here.get(r) for r in behind}) != 1 or any(done.get(r) != here.get(r) for r in behind):
        return None  # a rank behind with work pending here waits here
    seq = here[min(behind)] + 1  # the collective here no rank behind launched

    def other_groups(rank: int) -> list[str]:
        return [g for g, ranks in launched.items() if g != comm and rank in ranks]

    homes = [other_groups(r) for r in behind]
    if any(len(h) != 1 for h in homes) or len({h[0] for h in homes}) != 1:
        return None
    home = homes[0][0]
    members = set(launched[home])
    waits = {completed.get(home, {}).get(r) for r in members}
    if None in waits or len(waits) != 1:
        return None
    work = waits.pop() + 1
    if any(launched[home][r] < work for r in members):
        return None  # a member that never launched it: the group waits for that member
    ahead = members - behind

    def pending_here(rank: int) -> bool:
        return here.get(rank, 0) >= seq and done.get(rank) == seq - 1

    if not ahead or any(other_groups(r) != [home] or not pending_here(r) for r in ahead):
        return None
    rest = set(here) - members
    program: dict[int, int] = {}
    for rank in rest:
        groups = other_groups(rank)
        # a group with more members than the one held runs another program: its counts do not compare
        if len(groups) != 1 or len(launched[groups[0]]) > len(members) or not pending_here(rank):
            return None
        mark = completed.get(groups[0], {}).get(rank)
        if mark is None or mark < work:
            return None  # it completed no more before it than the ranks ahead issued: no early one
        program[rank] = mark
    if not program or len(ahead) * 2 >= len(here):
        return None
    mine = {(stacks or {}).get((comm, r, seq)) for r in ahead}
    theirs = {(stacks or {}).get((comm, r, seq)) for r in program}
    parted = None if None in mine | theirs or len(mine) > 1 or len(theirs) > 1 else mine != theirs
    held = HeldBack(group=home, work=work, issued_after=work - 1, program_after=min(program.values()),
                    program_ranks=tuple(sorted(program)), stacks_part=parted)
    return replace(root, seq_range=(root.seq_range[0], seq), outlier_ranks=sorted(ahead),
                   reference_ranks=sorted(set(here) - ahead), kind=EXTRA, size=1, majority=True, kinds=(EXTRA,),
                   behind_may_be_held=False, blocked_elsewhere=tuple(sorted(behind)), held_back=held)


def may_hold_back(root: Root, groups: Mapping[str, tuple[Set[int], int]], behind_too: Iterable[int] = ()
                  ) -> tuple[int, ...]:
    """The ranks ahead in the root's comm that may have launched an extra collective there that holds its
    outliers (behind by counts, or by records that differ in length only) back: an extra one here keeps a rank's
    peers of another communicator waiting for it there, so each outlier shares some other communicator with one of
    them (several ranks ahead may each have launched one, each holding its own peers back). `groups`: comm -> (its
    members on record, its size); members not on record may be any rank. A group of the root's size whose members
    on record are all the root's may be the root's comm under another name (a process group beside a RAS hash):
    left out. `behind_too`: ranks on neither side whose records end where they may be behind as well (cut short):
    their peers may hold them back just so. Empty where some outlier shares no communicator with a rank ahead."""
    ranks = set(root.outlier_ranks) | set(root.reference_ranks) | set(root.unplaced_ranks)
    others = {c: (set(known), size) for c, (known, size) in groups.items()
              if c != root.comm and not (size == len(ranks) and set(known) <= ranks)}

    def may_share(pair: set[int]) -> bool:
        return any(pair <= known or len(known | pair) <= size for known, size in others.values())

    def peers(rank: int) -> set[int]:
        return {r for r in root.reference_ranks if may_share({rank, r})}

    held = [peers(o) for o in root.outlier_ranks]
    if not held or not all(held):
        return ()
    return tuple(sorted(set().union(*held, *(peers(r) for r in behind_too))))
