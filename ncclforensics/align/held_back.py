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

Launch counts alone (no completion marks) read the same either way, and `may_hold_back` names the ranks ahead that
may have launched the extra collective. The rank that did is not always level with the ranks of the other groups:
its GPU waits in the extra collective (or the next, which the peers it holds back never launch), so its host stops
launching at its next read-back, while the other groups' ranks, whose GPUs run on, launch on into the collective it
waits in and past it to theirs. The counts then come in three steps, `behind_in_chain`: its held peers furthest
behind, it one step up, the others above (world counts 6, 6, 4, 5, 6, 6, 6, 6: rank 3 ran one more, rank 2, its TP
peer, waits for it). Two ranks that skipped collectives, rank 2 two and rank 3 one, write the same counts; one
skip and one hold do too. The reading that needs one departure only names the ranks furthest behind, and every rank
ahead that may hold them back, the ranks between with them. Ranks above a count most ranks share (world counts 4, 4,
4, 4, 2, 3, 5, 4) launched more than the rest: an extra collective, a departure of its own; the steps end at the
rest's count, and those ranks are among the ranks ahead that may hold the others back (`ahead_of_the_rest`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from dataclasses import replace

from ..model.kinds import is_p2p_comm
from .answers import EXTRA, MISSING, HeldBack, RangeReason, Root
from .notes import HeldBackComm, Note


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
    behind = set(root.outlier_ranks)
    reading = held_back_reading(comm, behind, launched, completed)
    if reading is None:
        return None
    ahead, home, work, seq, program = reading
    here = launched[comm]
    mine = {(stacks or {}).get((comm, r, seq)) for r in ahead}
    theirs = {(stacks or {}).get((comm, r, seq)) for r in program}
    parted = None if None in mine | theirs or len(mine) > 1 or len(theirs) > 1 else mine != theirs
    held = HeldBack(group=home, work=work, issued_after=work - 1, program_after=min(program.values()),
                    program_ranks=tuple(sorted(program)), stacks_part=parted, seq=seq)
    return replace(root, seq_range=(root.seq_range[0], seq), outlier_ranks=sorted(ahead),
                   reference_ranks=sorted(set(here) - ahead), kind=EXTRA, size=1, majority=True, kinds=(EXTRA,),
                   behind_may_be_held=False, blocked_elsewhere=tuple(sorted(behind)), held_back=held)


def held_back_reading(comm: str, behind: set[int], launched: Mapping[str, Mapping[int, int]],
                      completed: Mapping[str, Mapping[int, int | None]]
                      ) -> tuple[set[int], str, int, int, dict[int, int]] | None:
    """Whether the completion marks read as `behind` (ranks of `comm` that launched fewer there) held back in their
    other group by its members ahead in `comm`, which issued their next collective there early (see the module
    docstring): (those members, the group, the work there every member launched and none completed, the seq here
    they issued early, rank -> what each rank of the other groups completed of its own before it); else None."""
    here, done = launched[comm], completed.get(comm, {})
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
    return ahead, home, work, seq, program


def held_back_ranks(comm: str, launched: Mapping[str, Mapping[int, int]],
                    completed: Mapping[str, Mapping[int, int | None]]) -> dict[int, frozenset[int]]:
    """rank -> the peers that hold it back, for the ranks furthest behind in `comm` by PyTorch's counts where the
    completion marks read as them held back in another group by those peers' early collective here (they ran the
    program as far as they launched here); empty where they do not."""
    here = launched.get(comm)
    if not here or len(set(here.values())) < 2:
        return {}
    least = min(here.values())
    behind = {r for r, n in here.items() if n == least}
    reading = held_back_reading(comm, behind, launched, completed)
    return {r: frozenset(reading[0]) for r in behind} if reading is not None else {}


def ahead_where_stuck(rank: int, counts: Mapping[str, Mapping[int, int]]) -> bool:
    """Whether a peer of the rank, in a communicator where the rank is stuck, launched more there than it did
    (`counts`: comm -> rank -> launch count there, as far as known). A rank that left a collective out of another
    communicator before its records and went on issues its next collectives here, level with its peers or ahead of
    them; a peer ahead of it here ran past where it waits: the peer's own departure here (a collective it left
    out) may hold it, and it launched fewer elsewhere because it waits. Worked example: rank 1 waits in its TP
    pair's seq 6, having launched 6 there and 1 world collective; its peer rank 0 launched 11 there and waits in
    world seq 2: rank 0 may have skipped a TP collective and launched world seq 2 early, and rank 1 never reached
    it."""
    return any(n > there[rank] for there in counts.values() if rank in there
               for peer, n in there.items() if peer != rank)


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
    may_share = _sharing(root, groups)
    # (outliers ahead of the rest launched more than the ranks behind too: each may be the one)
    ahead = {*root.reference_ranks, *root.ahead_of_the_rest}

    def peers(rank: int) -> set[int]:
        return {r for r in ahead if may_share({rank, r})}

    held = [peers(o) for o in root.outliers_behind]
    if not held or not all(held):
        return ()
    return tuple(sorted(set().union(*held, *(peers(r) for r in behind_too))))


def held_back_elsewhere(root: Root, groups: Mapping[str, tuple[Set[int], int]]) -> tuple[Root, list[Note]]:
    """The root with, as candidates beside it, the communicators where its ranks behind may be held back by a rank
    ahead here (`may_be_held_back_by`, or the completion marks' group where the call stacks do not say the rank
    ahead issued an extra collective), and a note for each. The rank ahead that issued its next collective here
    early, pairing with the next one of the ranks that got further, launched an extra one here, or left collectives
    of the communicator it shares with the ranks behind out before it (a skipped drafter pass), which reads the same
    here: the departure may be there. Worked example: world counts 4, 2, 4, 4 and TP pairs {0, 1} {2, 3} with
    records alike; rank 0 skipped its drafter's collectives of TP pair {0, 1} and issued the world's next one early,
    so rank 1, waiting in the pair for rank 0, launched no more in the world: TP pair {0, 1} is a candidate.
    `groups`: as for may_hold_back."""
    named = {root.comm, *root.undecided_comms}
    held = root.held_back
    if held is not None and not held.stacks_part and held.group not in named and root.blocked_elsewhere:
        found = {held.group: (tuple(root.blocked_elsewhere), tuple(root.outlier_ranks))}
    elif root.may_be_held_back_by:
        found = {}
        for comm, may_share in _sharing_by_comm(root, groups).items():
            pairs = [(b, a) for b in root.outliers_behind for a in root.may_be_held_back_by if may_share({b, a})]
            if pairs and comm not in named and not is_p2p_comm(comm):
                found[comm] = (tuple(sorted({b for b, _ in pairs})), tuple(sorted({a for _, a in pairs})))
    else:
        return root, []
    # (a process group and its NCCL communicator that nothing on record ties together hold the same ranks: one
    # name, the NCCL hash first, as comm_named_by does)
    seen: dict[tuple, str] = {}
    for comm in sorted(found, key=lambda c: (not c.startswith("0x"), c)):
        members = groups.get(comm)
        key = (frozenset(members[0]), members[1]) if members is not None else (comm,)
        if key in seen:
            del found[comm]
        else:
            seen[key] = comm
    if not found:
        return root, []
    notes: list[Note] = [HeldBackComm(comm, behind, ahead, root.comm) for comm, (behind, ahead) in sorted(found.items())]
    return replace(root, undecided_comms=tuple(sorted({*root.undecided_comms, *found}))), notes


def _sharing(root: Root, groups: Mapping[str, tuple[Set[int], int]]) -> Callable[[set[int]], bool]:
    """Whether a pair of the root's ranks may share a communicator other than the root's, as far as the record of
    members goes (see may_hold_back)."""
    each = list(_sharing_by_comm(root, groups).values())

    def may_share(pair: set[int]) -> bool:
        return any(one(pair) for one in each)

    return may_share


def _sharing_by_comm(root: Root, groups: Mapping[str, tuple[Set[int], int]]
                     ) -> dict[str, Callable[[set[int]], bool]]:
    """comm -> whether a pair of the root's ranks may share it, for each communicator other than the root's (see
    may_hold_back)."""
    ranks = set(root.outlier_ranks) | set(root.reference_ranks) | set(root.unplaced_ranks) | set(
        root.outlier_candidates)

    def sharing(known: Set[int], size: int) -> Callable[[set[int]], bool]:
        return lambda pair: pair <= known or len(known | pair) <= size

    return {c: sharing(set(known), size) for c, (known, size) in groups.items()
            if c != root.comm and not (size == len(ranks) and set(known) <= ranks)}


def behind_in_chain(root: Root, counts: Mapping[int, Sequence[int]], groups: Mapping[str, tuple[Set[int], int]],
                    floors: Iterable[int] = (), whole: bool = False) -> Root | None:
    """`root` (from launch counts alone) read as ranks held back behind a peer's extra collective, where the counts
    come in three or more steps (see the module docstring): its outliers the ranks furthest behind (they skipped
    collectives, or are held back), every other rank on the reference side, those between named
    (`behind_the_rest`). `counts`: rank -> what it launched here, per collective type (one count, or one per type,
    the same types for each rank); `groups`: as for may_hold_back; `floors`: ranks whose count is only a floor.
    Ranks the root names as candidates (`outlier_candidates`) are left out of the steps and stay candidates.
    `whole`: the counts are of every collective each rank launched here (one count, or every type, not only those
    that differ), so the range ends one past what the ranks behind launched; else the root's range stays (one that
    ends past theirs, or none).

    None where the counts do not read so: the steps are not each at least as far in every type as the one below
    (ranks that launched other collectives, not fewer), some rank below the top has only a floor, some rank between
    may share no other communicator with a rank behind of its own (each that launched one more holds back a peer of
    its own, so there are no more of them than ranks behind), or some rank behind shares none with a rank ahead."""
    if root.held_back is not None or root.journal_steps or root.unstopped or root.reason not in (
            RangeReason.COUNTS, RangeReason.TYPE_COUNTS):
        return None  # (placed by more than counts, or ranks RAS lost: no mere step behind)
    # (ranks the root names as candidates depart in another communicator too: their counts here may follow from
    # that, so the steps are read without them, and they stay candidates)
    counts = {r: c for r, c in counts.items() if r not in root.outlier_candidates}
    levels = sorted(set(map(tuple, counts.values())), key=sum)
    if any(sum(low) == sum(high) or any(a > b for a, b in zip(low, high)) for low, high in zip(levels, levels[1:])):
        return None
    # (ranks above a level most ranks share launched more than the rest: an extra collective, holding a peer
    # back or not; they are among the ranks ahead, and the steps end at the rest's level)
    rest = next((level for level in levels if sum(tuple(c) == level for c in counts.values()) * 2 > len(counts)),
                levels[-1])
    ahead = sorted(r for r, c in counts.items() if sum(c) > sum(rest))
    levels = levels[:levels.index(rest) + 1]
    if len(levels) < 3:
        return None
    behind = sorted(r for r, c in counts.items() if tuple(c) == levels[0])
    between = sorted(r for r, c in counts.items() if tuple(c) in levels[1:-1])
    if set(floors) & (set(behind) | set(between)):
        return None  # (a floor may have launched as many as any rank above it)
    ranks = set(counts)
    chain = replace(root, outlier_ranks=behind, reference_ranks=sorted(ranks - set(behind)),
                    unplaced_ranks=[r for r in root.unplaced_ranks if r not in ranks], kind=MISSING, kinds=(),
                    size=0, majority=len(behind) * 2 < len(ranks), behind_the_rest=tuple(between),
                    ahead_of_the_rest=tuple(ahead))
    may_share = _sharing(chain, groups)
    if not _matched(between, behind, lambda a, b: may_share({a, b})) or not may_hold_back(chain, groups):
        return None
    if whole and root.seq_range is not None and root.seq_range[1] is not None:
        # (the collective they skipped, or the extra one they wait for, is at most one past what they launched)
        chain = replace(chain, seq=1, seq_range=(1, sum(levels[0]) + 1))
    return chain


def _matched(these: Sequence[int], those: Sequence[int], may: Callable[[int, int], bool]) -> bool:
    """Whether each of `these` may be paired with one of `those` of its own (`may`: whether a pair may be)."""
    partner: dict[int, int] = {}

    def place(a: int, seen: set[int]) -> bool:
        for b in those:
            if b not in seen and may(a, b):
                seen.add(b)
                if b not in partner or place(partner[b], seen):
                    partner[b] = a
                    return True
        return False

    return all(place(a, set()) for a in these)
