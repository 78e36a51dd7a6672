"""What the written evidence shows: which comms' ranks visibly disagree, and which outliers show as such.

Each kind of evidence gives every rank a *view* of a comm; two views differ when

- NCCL logs: the COLL lines differ in op, count or dtype at one seq, or a log that is whole has fewer collectives
  in the comm than the other; a log of a rank that launched nothing in a comm has no line that names it (NCCL
  makes a comm at its first collective, the default group's at start), so, where the comm is not over every rank,
  it gives no view of it: nothing in the files ties that process to the comm (the comm's INIT lines give its size,
  and an unlogged process of the job fits the missing place as well);
- Flight Recorder: the entries of one seq differ in profiling name, sizes, dtypes or frames (within what the rings
  kept), or `pg_status` says the two enqueued different numbers of collectives;
- watchdog logs: they time out at one seq in different collectives (op, sizes or the failed collective's stack,
  which the log writes), or the enqueued counts they give differ, or a desync report's snapshot gives them last
  collectives of one number but of different types; the report gives every member's last collective (a count
  where nothing can have held the rank back, see reported_work), so a
  rank is on record through a peer's report whether or not its own log says anything of the comm;
- RAS replies: the two launched different numbers of some collective type;
- fingerprints: the records at one (step, op) differ in tag, digest or sum; or per step, two sums that a run of
  the program without the fault makes equal differ (the two are replicas: what each was to run sums alike, so a
  rank that skipped or added a collective, whose own expected sum is then another, still parts from its replicas;
  the files' expected sums are the faulted launches', which say nothing of what the rank was to run), where some
  two traced ranks wrote one sum at all (else nothing on file says any were to agree: ranks of other replica groups
  write the same files). A rank that reads back a wrong sum (where the trace has the expected one) shows too;
  wrong means off by more than a checked sum's tolerance (a relative 1e-6: real checksums are floating sums, and
  one result summed in another order differs in its last bits, so a sum off by less reads as right to any reader).

A comm where nothing diverged is visible when some two views differ (a consequence of a hang elsewhere). On a
comm that diverged, an outlier *shows* when its view differs from a reference rank's (a rank that did not
diverge), or when it read back a wrong sum; but not where its view is the very view of a reference rank while
another outlier shows: what it read back wrong, that rank read back too (the departure of another mixed both),
and nothing in this kind tells the two apart. Where every rank with this kind of view diverged, an outlier shows
only where its view differs from another outlier's before that one departed (or where both departed at once):
past there the other's departure parts them, which says nothing of where this one departed. Gate journals alone
show a disagreement of decisions, not of collectives, so they make nothing visible. Counts (`pg_status`, a watchdog
log's, RAS's) show an outlier only where the ranks that did not diverge give one count: where they give several,
some are held back elsewhere, and an outlier's count apart from one of theirs says nothing of its own departure.
"""

from __future__ import annotations

from collections.abc import Callable

from .evidence import Written
from .incident import Incident
from .program import value
from .ras import type_counts
from .torch_log import last_work, timed_out
from .traces import PER_COLLECTIVE, read_back, steps_read_back, sums

View = tuple  # (comparable data, whether the rank read back a wrong sum)


def visible_comms(incident: Incident, written: Written) -> dict[str, list[str]]:
    """comm -> the kinds of evidence that show it (a comm that diverged: only where an outlier shows)."""
    out: dict[str, list[str]] = {}
    for kind, shown in _by_kind(incident, written).items():
        for comm, ranks in shown.items():
            if ranks:
                out.setdefault(comm, []).append(kind)
    return out


def shown_outliers(incident: Incident, written: Written) -> dict[str, set[int]]:
    """Per comm that diverged, the outliers whose divergence some evidence shows."""
    out: dict[str, set[int]] = {c: set() for c in incident.truth.roots}
    for shown in _by_kind(incident, written).values():
        for comm, ranks in shown.items():
            if comm in out:
                out[comm] |= ranks
    return out


def kinds_showing(incident: Incident, written: Written, comm: str, ranks: set[int]) -> list[str]:
    """The kinds of evidence that show any of `ranks` (outliers of `comm`) departing: a kind that shows only another
    outlier's departure there (a later skip that leaves a log one collective short) shows nothing of theirs."""
    return [kind for kind, shown in _by_kind(incident, written).items() if shown.get(comm, set()) & ranks]


def blurred_outliers(incident: Incident, written: Written) -> dict[str, set[int]]:
    """Per comm that diverged where every kind of evidence that shows an outlier shows it only through a view that
    is the very view of a reference rank (a wrong sum every member read back alike, and no other outlier showing):
    the ranks on record whose views are the shown outliers' in every such kind. Nothing on file tells those apart
    (their files differ in the rank number alone), so any of them may be the one that departed."""
    out: dict[str, set[int]] = {}
    for comm, root in incident.truth.roots.items():
        blur: set[int] | None = None
        for views_of, differ, _ in _KINDS.values():
            views = views_of(incident, written, comm)
            references = [r for r in views if r not in root.faulted]
            shown = {r for r in root.faulted if r in views
                     and (views[r][1] or any(differ(views[r], views[o]) for o in references))}
            if not shown or not references:
                continue
            if any(all(views[r] != views[o] for o in references) for r in shown):
                blur = None  # (this kind tells an outlier from every reference rank)
                break
            same = shown | {o for o in views if any(views[o] == views[r] for r in shown)}
            blur = same if blur is None else blur & same
        if blur is not None:
            out[comm] = blur
    return out


def _by_kind(incident: Incident, written: Written) -> dict[str, dict[str, set[int]]]:
    """kind -> comm -> the ranks it shows (outliers on a comm that diverged; any rank whose view differs else)."""
    out: dict[str, dict[str, set[int]]] = {}
    for kind, (views_of, differ, before) in _KINDS.items():
        for comm in incident.program.comms:
            views = views_of(incident, written, comm)
            shown = _shown(incident, comm, views, differ, before)
            if shown:
                out.setdefault(kind, {})[comm] = shown
    return out


def _shown(incident: Incident, comm: str, views: dict[int, View], differ: Callable, before: Callable) -> set[int]:
    root = incident.truth.roots.get(comm)
    if root is None:
        ranks = list(views)
        return {r for r in ranks if views[r][1] or any(differ(views[r], views[o]) for o in ranks if o != r)}
    faulted = [r for r in root.faulted if r in views]
    references = [r for r in views if r not in root.faulted]
    if references:
        shown = {r for r in faulted if views[r][1] or any(differ(views[r], views[o]) for o in references)}
        # A wrong read-back shared to the last sum with a reference rank is another outlier's doing, where one shows.
        alike = {r for r in shown if any(views[r] == views[o] for o in references)}
        return shown - alike if shown - alike else shown

    def apart(r: int, o: int) -> bool:
        # Outliers set beside each other show only where they part before the other one departed (or where both
        # departed at once): past that, the other's departure parts them, which says nothing of where this one did.
        end = root.first[o] + (root.first[o] == root.first[r])
        return root.first[r] <= root.first[o] and differ(before(views[r], end), before(views[o], end))

    return {r for r in faulted if views[r][1] or any(apart(r, o) for o in faulted if o != r)}


def _nccl_before(view: View, seq: int) -> View:
    """A view of NCCL logs cut to the seqs before `seq` (so no longer whole)."""
    (tokens, _), wrong = view
    return (tokens[:seq - 1], False), wrong


def _fr_before(view: View, seq: int) -> View:
    """A Flight Recorder view of the entries before `seq` (its counts say nothing of where)."""
    (_, entries), wrong = view
    return ({}, {s: entry for s, entry in entries.items() if s < seq}), wrong


def _torch_before(view: View, seq: int) -> View:
    """A watchdog view with a timeout, and a desync report's last collective, before `seq` (its counts say
    nothing of where)."""
    (timeout, _, last), wrong = view
    return (timeout if timeout and timeout[0] < seq else None, None, last if last and last[0] < seq else None), wrong


def _counts_before(view: View, seq: int) -> View:
    """RAS counts, which place nothing in a comm's seqs: nothing to compare."""
    return ({}, {}), view[1]


def _results_before(view: View, seq: int) -> View:
    """Fingerprint records, numbered by step, not by a comm's seq: nothing to compare but a wrong result."""
    (scheme, _, shared), wrong = view
    return (scheme, {}, shared), wrong


# --- views per kind ---------------------------------------------------------------------------------------------


def _ranks(incident: Incident, written: Written, kind: str, comm: str) -> list[int]:
    return [r for r in incident.program.comms[comm].ranks if written.has(kind, r)]


def _nccl_views(incident: Incident, written: Written, comm: str) -> dict[int, View]:
    views = {}
    program = incident.program
    named_by_all = comm == program.default_comm or set(program.comms[comm].ranks) == set(program.ranks)
    for r in _ranks(incident, written, "nccl", comm):
        launches = incident.run.comm_launches(r, comm)
        if not launches and not named_by_all:
            continue  # (its log names the comm nowhere: no view of it)
        # (a log cut before its first line of the comm kept none of it)
        kept = written.nccl_kept.get(r, {}).get(comm, 0 if ("nccl", r) in written.cut else len(launches))
        tokens = tuple((x.op.kind, x.op.count, x.op.dtype) for x in launches[:kept])
        views[r] = ((tokens, ("nccl", r) not in written.cut), False)
    return views


def _nccl_differ(a: View, b: View) -> bool:
    (ta, whole_a), (tb, whole_b) = a[0], b[0]
    n = min(len(ta), len(tb))
    if ta[:n] != tb[:n]:
        return True
    return (whole_a and len(ta) < len(tb)) or (whole_b and len(tb) < len(ta))


def _fr_views(incident: Incident, written: Written, comm: str) -> dict[int, View]:
    size = incident.program.size(comm)
    views = {}
    for r in _ranks(incident, written, "fr", comm):
        launches = incident.run.launches[r]
        kept = launches[-written.ring[r]:] if r in written.ring else launches
        entries = {x.seq: (x.op.kind, x.op.count, x.op.out_count(size), x.op.dtype, x.op.frames)
                   for x in kept if x.op.comm == comm}
        views[r] = (({"enqueued": incident.truth.launched[comm][r]}, entries), False)
    if not _references_agree(incident, comm, {r: view[0][0]["enqueued"] for r, view in views.items()}):
        views = {r: (({}, entries), wrong) for r, ((_, entries), wrong) in views.items()}
    return views


def _references_agree(incident: Incident, comm: str, counts: dict[int, object]) -> bool:
    """Whether the ranks that did not diverge in `comm` give one count (None: none given). Where they give several,
    some are held back elsewhere, and a rank's count apart from one of theirs says nothing of its own departure."""
    root = incident.truth.roots.get(comm)
    given = {count for r, count in counts.items() if count is not None and (root is None or r not in root.faulted)}
    return root is None or len(given) <= 1


def _plain_differ(a: View, b: View) -> bool:
    """Views of (scalars that must agree, {key: value} that must agree where both have the key)."""
    (scalars_a, keyed_a), (scalars_b, keyed_b) = a[0], b[0]
    if any(k in scalars_b and scalars_a[k] != scalars_b[k] for k in scalars_a):
        return True
    return any(k in keyed_b and keyed_a[k] != keyed_b[k] for k in keyed_a)


def reported_work(incident: Incident, written: Written, comm: str) -> dict[int, tuple[int, str, bool]]:
    """rank -> (seq, op type, whether that is its count) of the last collective it enqueued in `comm`, as a desync
    report in the watchdog logs written gives it: a report on the comm (in the log of a rank that timed out there)
    lists every member's, its own and its peers', so a rank whose own log says nothing of the comm, or that left no
    log at all, is on record there through a peer's (`[3] finished collective #39, but didn't join collective #40`).

    What a report gives of a rank is the last collective its watchdog saw start or finish, and PyTorch's own
    captures show it short of what the rank enqueued (work behind one that never completes never starts), so it is
    the rank's count only where the rank finished it and is in no other comm, where nothing else on its GPU holds
    back what it enqueued after; else it is a floor, and shows no rank behind. The op of that collective is the
    op the rank issued at that number, either way.

    The report numbers ranks within the group; a peer is on record as a rank of the job only where the files tie
    that numbering to the job's (`_placed`): the group is over every rank (its ranks are the global ranks, in
    order), a member's Flight Recorder dump lists the group's members (`pg_config`, in the group's order: place i
    is the i-th, whatever group it is), the peer's own log names its rank in the group (`[rank3]:... [Rank 1]
    Watchdog caught ...`), or the peer lies between two ranks so placed that are as far apart in both numberings.
    Else `[1]` is some member, nobody knows which. That a group is over every rank shows only where it is the
    default group, a member's dump lists its members, or every rank of the job left a log (a report that names as
    many places as there are ranks): lines of ranks 0 and 2 about a group whose report names places 0..3 fit a
    group of global ranks 0, 1, 2 and 5 as well."""
    if not written.desync:
        return {}
    stuck = timed_out(incident)
    if not any(comm in stuck.get(r, {}) for r in _ranks(incident, written, "torch", comm)):
        return {}
    placed = _placed(incident, written, comm, stuck)
    alone = {r for r in incident.program.comms[comm].ranks
             if not any(r in other.ranks for name, other in incident.program.comms.items() if name != comm)}
    return {r: (seq, op, finished and r in alone) for r, (seq, finished, op) in last_work(incident, comm).items()
            if r in placed}


def _placed(incident: Incident, written: Written, comm: str, stuck: dict) -> set[int]:
    """The members of `comm` whose place in the group the files tie to their rank of the job (see reported_work):
    every member where the group is known to be over every rank, or where a member's Flight Recorder dump lists the
    group's members in order (`pg_config`: a group of global ranks 0-3 in a job of 8 numbers rank 0 as `[0]`,
    whether or not rank 0 left a file); else those whose own log names their place in it, and the members those
    places pin between them (`_between_places`)."""
    members = incident.program.comms[comm].ranks
    world = set(members) == set(incident.program.ranks) and (
        comm == incident.program.default_comm or all(written.has("torch", r) for r in incident.program.ranks))
    if world or any(written.has("fr", r) for r in members):
        return set(members)
    own = {r for r in members if written.has("torch", r) and comm in stuck.get(r, {})}
    return own | _between_places(sorted(members), own)


def _between_places(members: list[int], own: set[int]) -> set[int]:
    """The members whose place the places that lines give (`own`'s) pin: a group numbers its members in ascending
    global order, so where two placed members (or the start, place -1 at rank -1) are as far apart in both
    numberings, the members between them are every rank between them. Worked example (1203333): ranks 1, 3, 5, 6
    and 7 name their places 1, 3, 5, 6 and 7 in an 8-rank group; place 0 has no member below it but rank 0, and
    place 2 lies between ranks 1 and 3: the report's `[0, 2, 4]` are ranks 0, 2 and 4. Past the last one, a place
    may be any rank above it."""
    anchors = [(-1, -1)] + sorted((members.index(r), r) for r in own)
    placed = set()
    for (low, at_low), (high, at_high) in zip(anchors, anchors[1:]):
        if at_high - at_low == high - low:
            placed.update(members[low + 1:high])
    return placed


def _torch_views(incident: Incident, written: Written, comm: str) -> dict[int, View]:
    stuck = timed_out(incident)
    if not stuck:
        return {}  # no hang, no watchdog lines
    size = incident.program.size(comm)
    reported = reported_work(incident, written, comm)
    views = {}
    for r in incident.program.comms[comm].ranks:
        own = written.has("torch", r)
        if not own and r not in reported:
            continue
        launch = stuck.get(r, {}).get(comm) if own else None
        # (the log gives the failed collective's stack too: one seq's collectives issued from two call sites differ)
        timeout = (launch.seq, launch.op.kind, launch.op.count, launch.op.out_count(size),
                   tuple(launch.op.frames)) if launch else None
        counted = launch or (own and comm == incident.program.default_comm) or r in reported and reported[r][2]
        count = incident.truth.launched[comm][r] if counted else None
        views[r] = ((timeout, count, reported[r][:2] if r in reported else None), False)
    if not _references_agree(incident, comm, {r: view[0][1] for r, view in views.items()}):
        views = {r: ((timeout, None, last), wrong) for r, ((timeout, _, last), wrong) in views.items()}
    return views


def _torch_differ(a: View, b: View) -> bool:
    (timeout_a, count_a, last_a), (timeout_b, count_b, last_b) = a[0], b[0]
    if timeout_a and timeout_b and timeout_a[0] == timeout_b[0] and timeout_a != timeout_b:
        return True
    if last_a and last_b and last_a[0] == last_b[0] and last_a[1] != last_b[1]:
        return True  # (a desync report's snapshot: last collectives of one number, of different types)
    return count_a is not None and count_b is not None and count_a != count_b


def _ras_views(incident: Incident, written: Written, comm: str) -> dict[int, View]:
    if not written.ranks.get("ras"):
        return {}
    counts = type_counts(incident, comm)
    ranks = incident.program.comms[comm].ranks
    by_rank = {r: tuple(sorted((kind, per[i]) for kind, per in counts.items())) for i, r in enumerate(ranks)}
    if not _references_agree(incident, comm, by_rank):
        return {}
    return {r: ((dict(by_rank[r]), {}), False) for r in ranks}


def _kept(written: Written, rank: int, records: list) -> list:
    return records[:written.cut[("fp", rank)]] if ("fp", rank) in written.cut else records


def _fp_views(incident: Incident, written: Written, comm: str) -> dict[int, View]:
    scheme = written.fp_scheme
    if scheme is None:
        return {}
    views = {}
    reference = incident.program.reference_plans() if scheme not in PER_COLLECTIVE else {}
    shared = scheme not in PER_COLLECTIVE and _sums_shared_on_file(incident, written)
    for r in _ranks(incident, written, "fp", comm):
        wrong = False
        keyed: dict = {}
        if scheme in PER_COLLECTIVE:
            in_step: dict[int, int] = {}
            for running, launch in enumerate(_kept(written, r, read_back(incident, r))):
                step = launch.op.step
                index = in_step.get(step, 0) if written.fp_op == "step" else running
                in_step[step] = in_step.get(step, 0) + 1
                if launch.op.comm != comm:
                    continue
                got, expected = sums(incident, launch)
                wrong |= "expected" in scheme and _read_wrong(got, expected)
                digest = launch.seq if "digest" in scheme else None  # the digest is a hash of comm and seq
                keyed[(step, index)] = (launch.op.tag, digest, None if scheme == "digest" else got)
        else:
            for step in _kept(written, r, steps_read_back(incident, r)):
                launches = [x for x in read_back(incident, r) if x.op.step == step]
                got = sum(sums(incident, x)[0] for x in launches)
                expected = sum(sums(incident, x)[1] for x in launches)
                mine = any(x.op.comm == comm and not x.aligned for x in launches)
                wrong |= mine and scheme == "step_sum_expected" and _read_wrong(got, expected)
                keyed[step] = (got, _fault_free_sum(incident, reference[r][step]), mine)
        views[r] = ((scheme, keyed, shared), wrong)
    return views


def _sums_shared_on_file(incident: Incident, written: Written) -> bool:
    """Per-step sums: whether some two traced ranks wrote one sum (at one step, or a step apart where one ran
    ahead), the only thing in such files that says ranks ran one program and were to agree. Where no two did, every
    trace parts from every other from its first line: two replicas that parted before the first step on file
    (981063) and ranks that sum apart by design (other replica groups, other data: 123077) write the very same
    files, and what the program meant them to sum is nowhere on file."""
    ranks = [r for r in incident.program.ranks if written.has("fp", r)]
    written_sums = [[sum(sums(incident, x)[0] for x in read_back(incident, r) if x.op.step == step)
                     for step in _kept(written, r, steps_read_back(incident, r))] for r in ranks]
    return any(not _read_wrong(mine, theirs) for i, own in enumerate(written_sums)
               for other in written_sums[i + 1:] for mine in own for theirs in other)


def _fault_free_sum(incident: Incident, segments: list) -> float:
    """The per-step sum a run of the program without the fault gives a rank whose reference plan of the step is
    `segments` (every pairing right): two ranks this makes equal run alike (one replica class), so their sums must
    agree whatever their faulted launches were; a rank that skipped or added a collective is still one of its
    replicas, and its sum parting from theirs shows it."""
    comms = incident.program.comms
    return sum(float(op.count * sum(value(m, op.step, op.vidx) for m in comms[op.comm].ranks))
               for segment in segments for op in segment)


def _read_wrong(got: float, expected: float) -> bool:
    """Whether a sum reads back wrong: off by more than a checked sum's tolerance (a floating sum of one result,
    summed in another order, differs in its last bits)."""
    return abs(got - expected) > 1e-6 * max(1.0, abs(expected))


def _fp_differ(a: View, b: View) -> bool:
    (scheme, keyed_a, shared), (_, keyed_b, _) = a[0], b[0]
    if scheme in PER_COLLECTIVE:
        return any(k in keyed_b and keyed_a[k] != keyed_b[k] for k in keyed_a)
    # per step: sums that a run without the fault makes equal, differing, on a step where one of the two was
    # misaligned here, where the files show ranks that were to agree at all
    return shared and any(k in keyed_b and keyed_a[k][1] == keyed_b[k][1] and keyed_a[k][0] != keyed_b[k][0]
                          and (keyed_a[k][2] or keyed_b[k][2]) for k in keyed_a)


_KINDS: dict[str, tuple[Callable, Callable, Callable]] = {
    "nccl": (_nccl_views, _nccl_differ, _nccl_before), "fr": (_fr_views, _plain_differ, _fr_before),
    "torch": (_torch_views, _torch_differ, _torch_before), "ras": (_ras_views, _plain_differ, _counts_before),
    "fp": (_fp_views, _fp_differ, _results_before),
}  # kind -> (its views of a comm, whether two views differ, a view cut before a seq)
