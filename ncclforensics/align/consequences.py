"""Which communicators' disagreements are consequences of a divergence in another one.

A rank that is stuck in one communicator stops launching in every other one it belongs to, so one divergence
shows in several communicators: a tensor-parallel group whose ranks diverged (a rank ran the drafter's
collectives, the other did not) wedges, and the world group that contains it then sees those ranks launch fewer
collectives than everyone else; a rank the divergence let run on enqueues a collective in its data-parallel
group that its peers, stuck behind, never reach. Counts and lengths alone make those groups look like roots too.

Two rules tell the consequences, each from what every kind of evidence gives: who is in a communicator, and whom
its disagreement singles out (the *odd* ranks: the minority that departs from a majority, ahead or behind; where
no side is a majority, the side that launched fewer; else the outliers its root names):

- **nesting**: a communicator whose odd ranks all belong to a smaller one inside it (all of whose members are its
  members) that disagrees too is a consequence of that one. A divergence inside the outer group does not make
  the inner one disagree, since collectives are enqueued without waiting: a rank that skipped a world collective
  still enqueues its tensor-parallel ones, and its peers enqueue theirs behind the stuck one. Except where the
  same odd ranks are behind in both (`behind`): a rank stopped on the host in the outer group (it waits for the
  result of a collective it added there) enqueues nothing more inside, while its inner peers go on into their next
  collectives there, so the inner group disagrees as a consequence of the outer one: both stay candidates. So too
  where the outer group's odd ranks are ahead inside and the ranks behind inside are none of them: those peers,
  gone on inside, wait there for the ranks stopped outside and launch no more outside, a wait-for cycle that an
  inner departure writes alike;
- **one cause for all**: of the communicators left, those whose members do not include every odd rank of any of
  them are consequences of those that do (one divergence there involves every one of those ranks; no divergence
  in the others can involve ranks outside them). Where no side of a communicator is a majority, either side may
  be the one that departed (a rank that launched one more may have run on past collectives it skipped, or be
  stuck in one it added), so a communicator holds its odd ranks where it holds either side. An outer group that
  the nesting rule keeps only by its exceptions, beside inner groups that hold every odd rank of it, makes none of
  those a consequence so: they may hold it as much as it holds them (one departure in each of two TP pairs).

Neither rule makes a consequence of a communicator whose own records show that it diverged (`shown`): a rank held
back elsewhere launches a prefix of the program here, and prefixes of one program are ordered (one rank launched
at least as many of every collective type as another), so ranks of whom one launched more of one type and fewer
of another ran different programs here, whatever happened elsewhere.

Where neither rule separates two communicators, both stay candidates: the caller names one and says that the
evidence cannot tell which diverged first.

The rules weigh a communicator's odd ranks as a whole. Where some of them are odd in another communicator too and
others in none (`departing_elsewhere`), the latter surely departed here, while the former may only have run on (or
stayed behind) from their departure there: they are candidates, not outliers, and that communicator a candidate
too.

Odd ranks that ran ahead may have left collectives of another of their communicators out and issued their next one
here early, which reads here as an extra one would (`left_out_elsewhere`): each other communicator of theirs whose
counts differ too stays a candidate beside this one, whatever the rules read of it (one that holds this one inside
it excepted, by the nesting rule).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Disagreement:
    """One communicator's disagreement, as the rules read it."""

    comm: str
    members: frozenset[Hashable]  # the processes in it: global ranks, or (host, pid) where RAS gives no global ranks
    odd: frozenset[Hashable]  # the ranks its disagreement singles out (see odd_ones)
    unknown: int = 0  # members of which process they are is not on record (counted in `members` by a key of their own)
    other: frozenset[Hashable] = frozenset()  # where no side is a majority, the other side (it may have departed)
    shown: bool = False  # its own records show that it diverged (see the module docstring): no consequence
    # each member key with the rank a root names it by, where that is not the key (RAS: a process by its rank)
    names: tuple[tuple[Hashable, int], ...] = ()
    ahead: bool = False  # its odd ranks launched more than every other member (see the nesting rule)
    behind: bool = False  # its odd ranks launched fewer than every other member (see the nesting rule)
    # members with no launch count here (records cut short, or none): nothing says the odd ranks ran past them
    uncounted: frozenset[Hashable] = frozenset()

    def sides(self) -> list[frozenset[Hashable]]:
        """The odd ranks as the disagreement may be read: its odd ones, or, where no side is a majority, the
        other side."""
        return [self.odd, self.other] if self.other else [self.odd]

    def may_contain(self, other: Disagreement, processes: int) -> bool:
        """Whether `other` has fewer members, each of them one of this communicator's: as far as the record goes
        where this one has as many members as the `processes` on record (it spans them all), else by name (a
        member not on record could be any process, so it places none inside)."""
        if len(other.members) >= len(self.members):
            return False
        if len(self.members) >= processes:
            return len(other.members - self.members) <= self.unknown
        return other.members <= self.members

    def rank_of(self, key: Hashable) -> Hashable:
        """The rank a root names the member `key` by."""
        return dict(self.names).get(key, key)


def other_side(launched: Mapping[Hashable, int], odd: frozenset[Hashable], majority: bool) -> frozenset[Hashable]:
    """Where no side is a majority, the ranks on the other side of the odd ones (see Disagreement.other)."""
    return frozenset() if majority else frozenset(launched) - odd


def odd_ones(launched: Mapping[Hashable, int], outliers: set[Hashable], majority: bool) -> frozenset[Hashable]:
    """The ranks a communicator's disagreement singles out: its root's outliers where they depart from a majority;
    else (no side is a majority) those that launched fewer than the most any rank launched; else the outliers."""
    if majority and outliers:
        return frozenset(outliers)
    most = max(launched.values(), default=0)
    behind = frozenset(p for p, n in launched.items() if n < most)
    return behind or frozenset(outliers)


def ran_ahead(launched: Mapping[Hashable, int], odd: frozenset[Hashable]) -> bool:
    """Whether the odd ranks launched more than every other member (`launched`: member -> count): a disagreement's
    `ahead` (see _ran_past_free_ranks). False where the odd ranks are every member or some has no count."""
    rest = [n for p, n in launched.items() if p not in odd]
    return bool(odd) and bool(rest) and odd <= set(launched) and min(launched[p] for p in odd) > max(rest)


def consequences(found: list[Disagreement], processes: int = 0) -> dict[str, list[str]]:
    """comm -> the communicators whose divergence explains its disagreement (only comms that are consequences).
    `processes`: how many processes the job has, where a record says (a RAS reply's job summary); else (or where
    fewer) those the disagreements name. A communicator spans the job only where it has that many members: one of
    4 processes, 3 of them unnamed, spans a job of 8 no more than a 2-process one does, and holds a smaller one
    only by name."""
    explained: dict[str, list[str]] = {}
    processes = max(processes, len({p for d in found for p in d.members if not unnamed_process(p)}))
    rivals: dict[str, set[str]] = {}  # inner comm -> the outer groups kept beside it (see _kept_beside)
    for outer in found:
        if outer.shown or _ran_past_free_ranks(outer, found):
            continue
        inner = [d for d in found if d.comm != outer.comm and outer.may_contain(d, processes)
                 and not _stopped_in_either(outer, d) and not _waiting_on_each_other(outer, d)]
        causes = _holding_every_odd_rank(outer, inner)
        if causes:
            explained[outer.comm] = causes
        else:
            for comm in _kept_beside(outer, found, processes):
                rivals.setdefault(comm, set()).add(outer.comm)
    left = [d for d in found if d.comm not in explained]
    covering = [d.comm for d in left if any(o.odd for o in left) and all(
        any(side <= d.members for side in o.sides()) for o in left)]
    if covering:
        for d in left:
            if d.comm not in covering and not d.shown and not set(covering) <= rivals.get(d.comm, set()):
                explained[d.comm] = covering
    return explained


def _kept_beside(outer: Disagreement, found: list[Disagreement], processes: int) -> list[str]:
    """The groups inside `outer` that would explain every odd rank of it by the nesting rule, where only its
    exceptions (the same odd ranks behind in both, or each side waiting in one for the other) keep `outer` beside
    them; empty where some odd rank has no such group. Either reading fits the counts, so the rule of one cause for
    all, which assumes one divergence, does not make those groups consequences of `outer` in turn: one TP pair
    each, both split, may hold the world's ranks behind as well as be held by them. Worked example: world counts
    2, 3, 2, 3, TP pairs {0, 1} and {2, 3} at 10 and 9 each: ranks 1 and 3 may each have added a world
    collective, or ranks 0 and 2 each a collective in their pair (or ranks 1 and 3 left some out there)."""
    return _holding_every_odd_rank(outer, [d for d in found if d.comm != outer.comm and d.odd
                                           and outer.may_contain(d, processes)])


def _holding_every_odd_rank(outer: Disagreement, inner: list[Disagreement]) -> list[str]:
    """The comms of `inner` that hold an odd rank of `outer`, where every odd rank is in one (else none)."""
    causes = {p: [d.comm for d in inner if p in d.members] for p in outer.odd}
    if not outer.odd or not all(causes.values()):
        return []
    return sorted({c for comms in causes.values() for c in comms})


def _ran_past_free_ranks(outer: Disagreement, found: list[Disagreement]) -> bool:
    """Whether the odd ranks of `outer` launched more than members that no other disagreeing communicator holds:
    nothing on record holds those back, so the odd ranks did not merely run on past peers stuck elsewhere, and a
    divergence inside does not explain them (the nesting rule reads odd ranks stuck inside, or running on past
    peers stuck there). Worked example: rank 6 launched 5 world collectives, ranks 0 to 7 otherwise 4, and 18 in
    its TP group against 20; ranks 0 to 3 share no disagreeing group: the world may be where it departed first.
    A member with no count here (`uncounted`: a log cut short, perhaps before the init lines of the groups it is in)
    is neither known to be behind nor known to be in no other group: the odd ranks ran past nothing it shows."""
    if not outer.ahead:
        return False
    held = {p for d in found if d.comm != outer.comm for p in d.members}
    return bool(outer.members - outer.odd - outer.uncounted - held)


def _stopped_in_either(outer: Disagreement, inner: Disagreement) -> bool:
    """Whether the same odd ranks are behind in `outer` and in `inner`, whose own records do not show that it
    diverged: stopped by a divergence in either, they launch fewer in the other (see the nesting rule)."""
    return outer.behind and inner.behind and outer.odd == inner.odd and not inner.shown


def _waiting_on_each_other(outer: Disagreement, inner: Disagreement) -> bool:
    """Whether the odd ranks of `outer` are ahead in `inner`, whose own records do not show that it diverged,
    while its ranks behind are none of the odd ones in `outer`: each side may wait in one communicator for the
    other (a wait-for cycle across the two; see the nesting rule). A rank stopped on the host in the outer group
    (waiting for the result of a collective it added there, or of one its peers there left out) enqueues nothing
    more inside, while its inner peers go on there, wait for it, and launch no more outside: the counts read the
    same as an inner departure that holds those peers back. Worked example: ranks 0 and 1 launched 10 and 9 in
    their pair, the world 2, 3, 3, 3: rank 1 may have added a world collective, or rank 0 one in the pair."""
    if inner.shown or not outer.behind:
        return False
    ahead = inner.other or (inner.members - inner.odd if inner.behind else frozenset())
    held = outer.odd & inner.members
    return bool(held) and held <= ahead and not inner.odd & outer.odd


def odd_behind(launched: Mapping[Hashable, int], odd: frozenset[Hashable]) -> bool:
    """Whether the odd ranks launched fewer than every other member (`launched`: member -> count)."""
    rest = [n for p, n in launched.items() if p not in odd]
    return bool(odd) and bool(rest) and max(launched.get(p, 0) for p in odd) < min(rest)


def departing_elsewhere(chosen: Disagreement, found: list[Disagreement], processes: int = 0
                        ) -> dict[Hashable, list[str]]:
    """The odd ranks of `chosen` (a majority's outliers) that are odd in another communicator too, with those
    communicators, where some of its odd ranks are odd in no other: those surely departed here, while the others'
    counts here may follow from their departure there (a rank that skipped a collective there ran on past its
    peers, stuck behind, into collectives here they never reach; one stuck there launched fewer here), or be a
    departure of their own here as well; counts cannot tell which. A communicator that holds `chosen` inside it is
    left out: a divergence in the outer group does not make the inner one disagree (the nesting rule). Empty where
    every odd rank is odd elsewhere too: the rules weigh those communicators as wholes."""
    processes = max(processes, len({p for d in found for p in d.members if not unnamed_process(p)}))
    elsewhere: dict[Hashable, list[str]] = {}
    for p in chosen.odd:
        comms = [d.comm for d in found if d.comm != chosen.comm and not d.may_contain(chosen, processes)
                 and any(p in side for side in d.sides())]
        if comms:
            elsewhere[p] = sorted(comms)
    return elsewhere if elsewhere and set(chosen.odd) - set(elsewhere) else {}


def left_out_elsewhere(chosen: Disagreement, found: list[Disagreement], processes: int = 0) -> list[str]:
    """The other communicators whose counts differ too that hold one of `chosen`'s odd ranks, where those ran
    ahead: a rank that left collectives of another of its communicators out issues its next one here early, and
    runs ahead here just as one that launched an extra one here does (the mirror of it); the counts do not say
    which came first, whatever the rules read. A communicator that holds `chosen` inside it is left out (the
    nesting rule: a rank that skipped a collective of the outer group still launches its inner ones)."""
    if not chosen.ahead:
        return []
    processes = max(processes, len({p for d in found for p in d.members if not unnamed_process(p)}))
    return sorted(d.comm for d in found if d.comm != chosen.comm and chosen.odd & d.members
                  and not d.may_contain(chosen, processes))


def unordered_counts(counts: Mapping[Hashable, Mapping[str, int]]) -> bool:
    """Whether no one program has every rank's launches as a prefix of it (rank -> collective type -> launched):
    some rank launched more of one type and fewer of another than some other rank (only the types every rank has
    a count of are compared)."""
    types = set.intersection(*(set(c) for c in counts.values())) if counts else set()
    vectors = [tuple(c[t] for t in sorted(types)) for c in counts.values()]
    return any(unordered_pair(a, b) for i, a in enumerate(vectors) for b in vectors[i + 1:])


def unordered_pair(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    """Whether two ranks' launch counts per type (in one order of types) are no prefixes of one program: each
    launched more of some type than the other."""
    return any(x > y for x, y in zip(a, b)) and any(x < y for x, y in zip(a, b))


def unnamed_process(process: Hashable) -> bool:
    """Whether a member key stands for a rank of no known process (see ras_only._disagreement)."""
    return isinstance(process, tuple) and bool(process) and process[0] == "unknown"


def candidates(found: list[Disagreement], processes: int = 0) -> list[str]:
    """The communicators that no rule shows to be a consequence, in the order given; except that where none is
    known to hold every odd rank of them, the smallest one that may hold them all (as far as its members not on
    record go) comes first: one divergence there can involve every one of those ranks (a RAS reply lists only the
    ranks that depart from a majority, the others as a count). Before all that, those whose own records show that
    they diverged (`shown`) come first. An outer group kept beside an inner one only because the same odd ranks are
    behind in both (the nesting rule) comes last. `processes`: as for consequences."""
    explained = consequences(found, processes)
    processes = max(processes, len({p for d in found for p in d.members if not unnamed_process(p)}))
    left = [d for d in found if d.comm not in explained]
    # An outer group the nesting rule keeps only because its odd ranks may have stopped there comes after the others,
    # which are ordered as though it were a consequence (as it would be, were they not behind in both).
    stopped_outer = kept_outer(left, processes)
    kept = [d for d in left if d.comm in stopped_outer]
    left = [d for d in left if d.comm not in stopped_outer]
    left = [d for d in left if d.shown] + [d for d in left if not d.shown]
    every = frozenset().union(*(d.odd for d in left)) if left else frozenset()
    if every and not any(every <= d.members for d in left):
        holding = [d for d in left if _may_hold(d, every, found)]
        if holding:
            first = min(holding, key=lambda d: len(d.members))
            if sum(len(d.members) == len(first.members) for d in holding) == 1:
                left = [first] + [d for d in left if d is not first]
    return [d.comm for d in left + kept]


def kept_outer(found: list[Disagreement], processes: int = 0) -> set[str]:
    """The outer groups of `found` that the nesting rule keeps beside an inner one only because their odd ranks
    may have stopped there: the same odd ranks behind in both, or each side waiting in one for the other.
    `processes`: as for consequences, where the caller has already counted them."""
    processes = max(processes, len({p for d in found for p in d.members if not unnamed_process(p)}))
    return {o.comm for o in found for d in found if d.comm != o.comm and o.may_contain(d, processes)
            and (_stopped_in_either(o, d) or _waiting_on_each_other(o, d))}


def _may_hold(comm: Disagreement, ranks: frozenset[Hashable], found: list[Disagreement]) -> bool:
    """Whether `ranks` may all be members of `comm`: those named elsewhere fill its members not on record, and
    the ones another communicator's reply gives only as a count (no process known) may be any of its members
    that reply does not name."""
    named = {p for p in ranks if not unnamed_process(p)}
    if len(named - comm.members) > comm.unknown:
        return False
    by_reply: dict[Hashable, int] = {}
    for p in ranks:
        if unnamed_process(p) and p not in comm.members:
            by_reply[p[1]] = by_reply.get(p[1], 0) + 1
    named_by = {d.comm: {p for p in d.members if not unnamed_process(p)} for d in found}
    return all(count <= sum(1 for m in comm.members if m not in named_by.get(reply, ()))
               for reply, count in by_reply.items())
