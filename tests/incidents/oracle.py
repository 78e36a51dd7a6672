"""The property every answer of `diff` must have, checked against an incident's truth.

For an incident and the evidence written for it, the answer (`diff --json`'s dict) is checked thus:

- `false_divergence`: no rank diverged, yet the verdict is `diverged`;
- `missed`: a comm's ranks diverged and the evidence shows it (visibility.py), yet the answer has no root;
- `root_outside_range`: the root is on a comm that diverged, and the true root seq is not in `root.seq_range`
  (nor the first seq where an outlier that the evidence shows diverged);
- `root_without_range`: the same, with no `seq_range` at all (null: the answer does not place it), except where
  it rests on RAS counts of the collective types that differ, which place nothing in launch order (such
  counts name no seq, and the answer rightly gives none), or on per-step checksums alone (they give the step
  the results part at, which may not come before the step before the true root's, and no seq);
- `wrong_outliers`: `root.outlier_ranks` is not the true outliers (those whose divergence starts at the root, or
  every rank that diverged on that comm, or the first ones with some of the others that diverged there at a seq
  inside the answer's range: where several ranks may each have departed first, naming one that did depart there
  names no rank that ran the comm's program; or the same among the outliers the evidence shows, visibility.py);
  where the outliers are no strict minority of the ranks on record (two ranks, or an even split), naming the
  other side or both sides is right too (`Root.majority` is then false); a rank whose records of the comm all
  miss the root (NCCL logs or fingerprint traces cut short before it: a per-step trace before the sum of the
  step the rank ran it in, as its kept sums hold none of what it read back from there on; Flight Recorder rings
  whose oldest entry kept is after it; of the kinds that show the divergence: its records of kinds that do not,
  whole NCCL logs of a swap of collectives alike in shape, say nothing of either side), or that has no evidence of
  a kind that shows the divergence, is not on record for this (its records side with either);
  nor is one through fingerprint traces whose tracer read nothing back (it left no trace file: an empty file is
  evidence of no format, so no fingerprint record holds it);
  where every kind of evidence that shows an outlier shows it only through a view that is the very view of some
  reference ranks (per-step sums every rank read back wrong alike, the outlier's own departure a reorder inside one
  step, which sums alike), naming it with all those ranks is right too: their files differ in the rank number alone;
  a rank a peer's desync report lists is on record through it, whatever its own files (the report gives every
  member's last collective: `[2, 3] finished collective #39, but didn't join collective #40` puts rank 3 beside
  rank 2 though rank 3 left no file, and two ranks behind two are an even split; where that is only a floor of
  what the rank launched, it sides with either, visibility.py);
  a root on per-step checksums alone that names, among the ranks it compared, the first outliers of each of
  several comms that diverged there is right (a step's checksum sums what a rank read back from all its comms:
  ranks that departed in two comms part from the others alike), and where those are no strict minority of the
  ranks compared, a root naming all of those is right too;
  where the root names ranks behind (missing or stopped collectives) on counts alone, or on records that differ from
  the others' in length only, and names the ranks ahead that may instead have launched one more and held them back
  in another comm (`root.may_be_held_back_by`), the true outliers among those are right too: the counts, and records
  of lookalike collectives, read the same either way (a twin incident of the opposite truth writes the same
  counts; where the ranks' issue orders are on record too and leave no majority, nothing says which rank issued
  its collective where the program does);
  where the root rests on counts alone and names apart, as candidates (`root.outlier_candidates`), ranks whose
  counts part as the outliers' do but that depart in another comm too, outliers that are the named ones with any
  of those are right too: a rank that departed elsewhere runs on (or stays behind) into the same count here as one
  that departed here as well, and the counts read the same either way; so too where the root rests on records
  that begin after the ranks part and the candidates on counts (watchdog logs, RAS replies of theirs) that part
  them while they wait in another comm: one that departed here before the records and then stopped, waiting
  there, and one held back there by a peer write the same counts and logs (a twin incident with the candidate's
  departure undone writes byte-identical watchdog logs);
  where nothing in the evidence names global ranks (NCCL logs of a job without a comm over every rank, RAS
  replies alone), comm ranks are right too; a rank the answer numbers as a stand-in (`stand_in_ranks`) is read
  as the rank of the process it names;
- `root_on_unfaulted_comm`: the root is on a comm whose ranks all ran the same program (a consequence of a hang
  elsewhere) while a comm that diverged shows it; except where the root says that nothing on record ranks its
  comm against others whose ranks disagree too and names them (`root.comm_candidates`), one of them a comm that
  diverged: a rank stuck in one comm stops launching in the others, so launch counts that differ in several
  comms (two-rank comms, where neither side is a majority) fit a divergence in any of them, and naming the
  candidates is the honest answer there; what the root then says of its own comm is of a consequence, and is
  not checked;
- `unknown_comm`: the root's comm is none of the incident's (by NCCL commId or process-group name); a comm
  named by its members (`[ranks=1,3,7]`, fingerprint traces grouped by the results they share) is the comm of
  exactly those ranks, else the smallest one holding them all where that is one comm (traces name only the ranks
  that wrote them, so a comm some of whose ranks left no trace is named by the rest); a root on
  per-step checksums alone that names the ranks it compared (`[ranks=1,2]`) is read as on the comm that diverged
  holding the most of them, whether or not some comm has exactly those ranks (a step's checksum sums what a rank
  read back from every comm it is in, so such evidence names ranks, never a communicator);
- `parse_error`: a file that was written whole has an error-severity problem (a writer or parser bug);
- `crash`: `diff` raised (or the answer could not be read: a changed JSON contract).

An answer whose root names a rank whose evidence was cut short is not held against it (counted apart, as
`cut_explained`): a file cut mid-line looks like a rank that died, which can hide the divergence or fake one.
Comm ids: the commId hash `0x...` where NCCL logs give it, else the process-group name; with one comm in the
job any name is that comm.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .evidence import Written
from .incident import Incident
from .traces import PER_COLLECTIVE, read_back, steps_read_back
from .visibility import blurred_outliers, kinds_showing, reported_work, shown_outliers, visible_comms

VIOLATIONS = ("false_divergence", "missed", "root_outside_range", "root_without_range", "wrong_outliers",
              "root_on_unfaulted_comm", "unknown_comm", "parse_error", "crash")


@dataclass(frozen=True)
class Violation:
    """One way an answer broke the property."""

    kind: str
    detail: str


@dataclass
class Outcome:
    """One incident, its evidence, the answer and the verdict of the property."""

    seed: int
    fault: str
    subset: str
    label: str
    violations: list[Violation] = field(default_factory=list)
    visible: dict[str, list[str]] = field(default_factory=dict)  # comm -> evidence kinds that show it
    expected_root: bool = False  # a comm that diverged shows it in the evidence
    pinned: bool = False  # the answer's seq_range is the one true seq, on the right comm
    cut_explained: bool = False
    verdict: str | None = None
    root: dict | None = None
    message: str = ""
    wedge: dict | None = None  # the wedge against the truth's stalls, not part of the property (wedge_check.py)

    @property
    def ok(self) -> bool:
        """Whether the answer has the property."""
        return not self.violations


def resolve_comm(incident: Incident, name: str) -> str | None:
    """The incident comm an answer's comm id names (None when none)."""
    comms = incident.program.comms
    for c, comm in comms.items():
        if name.lower() in (comm.comm_id, comm.name):
            return c
    if name.startswith("[ranks=") and name.endswith("]"):  # a comm named by its members (fingerprint traces)
        members = tuple(int(r) for r in name[len("[ranks="):-1].split(","))
        named = [c for c, comm in comms.items() if tuple(sorted(comm.ranks)) == members]
        if len(named) == 1:
            return named[0]
        # (traces name only the ranks that wrote them: a comm some of whose ranks left no trace is named by the rest)
        holding = [c for c, comm in comms.items() if set(members) <= set(comm.ranks)]
        smallest = [c for c in holding if len(comms[c].ranks) == min(len(comms[h].ranks) for h in holding)]
        if len(smallest) == 1:
            return smallest[0]
    return next(iter(comms)) if len(comms) == 1 else None


def _comm_of_ranks_compared(incident: Incident, name: str) -> str | None:
    """The comm that diverged holding the most of the ranks a `[ranks=...]` name lists (None when none)."""
    if not (name.startswith("[ranks=") and name.endswith("]")):
        return None
    ranks = {int(r) for r in name[len("[ranks="):-1].split(",")}
    overlap = {c: len(ranks & set(incident.program.comms[c].ranks)) for c in incident.truth.roots}
    best = max(overlap, key=lambda c: (overlap[c], -len(incident.program.comms[c].ranks)), default=None)
    return best if best is not None and overlap[best] else None


def _job_ranks(incident: Incident, answer: dict, ranks: list[int]) -> list[int]:
    """The answer's ranks as the job's: a stand-in rank (`stand_in_ranks`, numbered for a process no evidence
    placed) is the rank of that process."""
    stand_ins = answer.get("stand_in_ranks") or {}
    by_process = {f"{who.host}:{who.pid}": rank for rank, who in incident.identity.items()}
    return [by_process.get(stand_ins.get(str(r), ""), r) if str(r) in stand_ins else r for r in ranks]


RECORD_KINDS = ("nccl", "fr", "torch", "fp", "ras")  # evidence kinds that hold a rank's records of a comm


def _record_kinds(incident: Incident, written: Written, rank: int, comm: str) -> list[str]:
    """The kinds of evidence that hold the rank's records of `comm`: its own files', and watchdog logs where a
    peer's desync report on the comm lists the rank's last collective (its count, or a floor of it). A rank drawn
    for fingerprint traces that read nothing back has no trace file (an empty file is evidence of no format): no
    fingerprint holds a record of it, and nothing on file says it had a tracer at all."""
    return [k for k in RECORD_KINDS if written.has(k, rank) and (k != "fp" or _has_trace_file(written, rank))
            or k == "torch" and rank in reported_work(incident, written, comm)]


def _has_trace_file(written: Written, rank: int) -> bool:
    """Whether a fingerprint trace file was written for `rank` (one that read nothing back has none)."""
    return any(name.startswith(f"fingerprint_rank{rank}.") for name in written.files)


def _kept(incident: Incident, written: Written, rank: int):
    """The rank's launches its Flight Recorder ring kept (all of them where no ring was drawn)."""
    launches = incident.run.launches[rank]
    return launches[-written.ring[rank]:] if rank in written.ring else launches


def _no_record_at(incident: Incident, written: Written, rank: int, comm: str, seq: int,
                  kinds: list[str] | None = None) -> bool:
    """Whether every record the rank has of `comm` misses `seq`: a rank that never launched it (blocked elsewhere:
    what it would have launched there is no record, whatever kind of evidence counts its launches), NCCL logs or
    fingerprint traces cut short before it, Flight Recorder rings whose oldest entry kept is after it, or a peer's
    desync report alone, which gives the rank's last collective and how many it launched (or a floor of it), where
    `seq` is not that last one and the count says nothing of `seq`: a floor, or a root that left the counts as they
    were (a substitution or a reorder: `[3] started ALLREDUCE` at #15 says nothing of what rank 3 issued at #5); any
    other kind of evidence counts as a record. `kinds`: the kinds of the rank's records to look at (all by default)."""
    kinds = _record_kinds(incident, written, rank, comm) if kinds is None else kinds
    if kinds and incident.truth.launched.get(comm, {}).get(rank, 0) < seq:
        return True
    if kinds == ["torch"] and not written.has("torch", rank):
        root = incident.truth.roots.get(comm)
        last_seq, _, exact = reported_work(incident, written, comm)[rank]
        return last_seq != seq and root is not None and (not exact or root.kind not in ("missing", "extra"))
    if not kinds or set(kinds) - {"nccl", "fr", "fp"}:
        return False
    if "fp" in kinds and not _trace_cut_before(incident, written, rank, comm, seq):
        return False
    if "nccl" in kinds and not (("nccl", rank) in written.cut and written.nccl_kept.get(rank, {}).get(comm, 0) < seq):
        return False
    if "fr" in kinds:
        return min((x.seq for x in _kept(incident, written, rank) if x.op.comm == comm), default=seq + 1) > seq
    return True


def _trace_cut_before(incident: Incident, written: Written, rank: int, comm: str, seq: int) -> bool:
    """Whether the rank's fingerprint trace was cut short before it got to `seq` of `comm`. A per-collective
    trace's lines are the collectives it read back, one each in issue order; a per-step trace's are its steps read
    back, one sum each of every collective it read back in that step (it names none, so a sum kept is a record of
    each of them, and of nothing after). Either way, the whole lines kept hold the collectives up to some point,
    and they end before `seq`. Worked example (1128721): a per-step trace cut mid-line after its step 0 sum holds
    nothing of seq 5, launched in step 1; the sums of steps 1 and on, which alone could side with anyone, are lost."""
    if ("fp", rank) not in written.cut:
        return False
    done = read_back(incident, rank)
    if written.fp_scheme in PER_COLLECTIVE:
        kept = done[:written.cut[("fp", rank)]]
    else:
        steps = set(steps_read_back(incident, rank)[:written.cut[("fp", rank)]])
        kept = [x for x in done if x.op.step in steps]
    return max((x.seq for x in kept if x.op.comm == comm), default=0) < seq


def _first_kept(incident: Incident, written: Written, rank: int, comm: str, showing: list[str]) -> int:
    """The first seq of `comm` the rank's records of a kind that shows the divergence (`showing`) hold: the oldest
    entry its Flight Recorder ring kept where a ring is all of them it left, else 1 (its logs of lookalikes show
    nothing at seqs the ring lost)."""
    if [k for k in _record_kinds(incident, written, rank, comm) if k in showing] != ["fr"] or rank not in written.ring:
        return 1
    return min((x.seq for x in _kept(incident, written, rank) if x.op.comm == comm), default=1)


def _cut_ranks(written: Written) -> set[int]:
    return {rank for _, rank in written.cut}


def _explained_by_cut(root: dict, written: Written) -> bool:
    """Whether the answer names a rank whose records were cut short: a log that ends mid-line looks like a rank
    that stopped, which can hide the divergence or make one appear."""
    return bool(_cut_ranks(written) & set(root.get("outlier_ranks") or []))


def check(incident: Incident, written: Written, answer: dict, problems: list[dict]) -> Outcome:
    """The property for one answer (`problems`: `parse --json`-style error dicts of the parse)."""
    truth = incident.truth
    outcome = Outcome(incident.seed, incident.fault.name, written.subset, written.label,
                      verdict=answer.get("verdict"), root=answer.get("root"))
    add = outcome.violations.append
    cut_files = {f for f in written.files if _is_cut(f, written, incident)}
    for p in problems:
        if p["severity"] == "error" and p["file"] not in cut_files:
            add(Violation("parse_error", f"{p['file']}:{p['line']}: {p['message']}"))
    outcome.visible = visible_comms(incident, written)
    shown = shown_outliers(incident, written)
    faulted_visible = [c for c in truth.roots if shown[c]]
    outcome.expected_root = bool(faulted_visible)
    root = answer.get("root")
    if not truth.roots:
        if answer.get("verdict") == "diverged":
            if root is not None and _explained_by_cut(root, written):
                outcome.cut_explained = True
            else:
                add(Violation("false_divergence", f"no rank diverged; answer: {_root_text(root)}"))
        return outcome
    if root is None:
        if faulted_visible:
            add(Violation("missed", f"comm(s) {faulted_visible} diverged visibly ({outcome.visible}); "
                                    f"verdict {answer.get('verdict')}, no root"))
        return outcome
    comm = resolve_comm(incident, str(root.get("comm")))
    if root.get("pinned_by") == "per-step checksums" and str(root.get("comm")).startswith("[ranks="):
        comm = _comm_of_ranks_compared(incident, str(root.get("comm")))
    if comm is None:
        add(Violation("unknown_comm", f"root comm {root['comm']!r} is none of the incident's"))
        return outcome
    if comm not in truth.roots:
        candidates = {resolve_comm(incident, str(c)) for c in root.get("comm_candidates") or []}
        if _explained_by_cut(root, written):
            outcome.cut_explained = True
        elif faulted_visible and not candidates & set(truth.roots):
            add(Violation("root_on_unfaulted_comm", f"root on comm {comm} (nothing diverged there); the divergence "
                                                    f"is on {list(truth.roots)}: {_root_text(root)}"))
        return outcome
    true = truth.roots[comm]
    seen = shown[comm]
    if not seen:
        # the evidence holds nothing of the outliers' side of it: what the answer says is a consequence
        return outcome
    # where some outliers do not show (a shape-equal reorder in NCCL logs), the root is the first one that does
    seen_seq = min(true.first[r] for r in seen)
    seen_outliers = {r for r in seen if true.first[r] == seen_seq}
    seqs = sorted({true.seq, seen_seq})
    if root.get("seq_range") is None and root.get("pinned_by") == "RAS counts" and root.get("counts_by_type"):
        low = high = None  # RAS counts of the types that differ place nothing in launch order: honestly unplaced
    elif root.get("seq_range") is None and root.get("pinned_by") == "per-step checksums":
        low = high = None  # per-step checksums give the step, and no collective: honestly unplaced
        # `true.step` is the outlier's step at the root seq; a collective it left out at the end of step s mixes
        # the others' results of step s, which it files under s + 1.
        if root.get("step") is not None and true.step is not None and root["step"] < true.step - 1:
            add(Violation("root_outside_range", f"true root at step {true.step} on comm {comm}; the answer's "
                                                f"checksums part at step {root['step']}"))
    elif not isinstance(root.get("seq_range"), list) or len(root["seq_range"]) != 2:
        add(Violation("root_without_range", f"true root seq {true.seq} on comm {comm}; the answer's seq_range is "
                                            f"{root.get('seq_range')!r}"))
        low = high = None
    else:
        low, high = root["seq_range"]
        high = float("inf") if high is None else high  # (null: at low or later)
    if low is not None and not any(low <= seq <= high for seq in seqs):
        if _explained_by_cut(root, written):
            outcome.cut_explained = True
            return outcome
        add(Violation("root_outside_range", f"true root seq {_or(seqs)} on comm {comm} outside "
                                            f"seq_range {root['seq_range']}"))
    members = set(incident.program.comms[comm].ranks)
    kinds = {r: _record_kinds(incident, written, r, comm) for r in members}
    evident = {r for r in members if kinds[r]}
    sides = [set(true.outliers), set(true.faulted), seen_outliers, set(seen)]
    accepted = sides + [side & evident for side in sides]
    # A rank whose records of the comm end where its files were cut or where it stopped launching, or begin where a
    # ring kept them, before the outliers' departure shows sides with nobody (it shows at the root, or, where the
    # outliers' own rings begin after it, at their first entry kept; where no evidence shows the true outliers, at
    # the first departure some evidence does show, `seen_seq`); nor does one with no evidence of a kind that shows
    # the divergence (NCCL logs beside dumps whose call stacks alone part the ranks): the first departure shown, not
    # another outlier's later one, whose kinds say nothing of what the records hold there. Worked example (1144634):
    # rank 0, which left nothing, ran one more world collective at seq 3, and rank 2 skipped one at seq 5; rank 1's
    # log ends at seq 4, where it stopped launching. At seq 3 it records what ranks 2 and 3 record alike; of seq 5,
    # where they part, it holds nothing (a twin run with rank 3 adding one there writes the same three logs), so
    # ranks 2 and 3 are an even split.
    showing = kinds_showing(incident, written, comm, seen_outliers)
    shows_at = max(seen_seq, min(_first_kept(incident, written, r, comm, showing) for r in seen))
    # (a record of a kind that cannot show the divergence decides nothing: a rank whose Flight Recorder ring, the
    # only kind that shows it, begins after the root sides with either, whatever logs of lookalikes it left)
    deciding = {r for r in evident if any(kind in kinds[r] for kind in showing) and not _no_record_at(
        incident, written, r, comm, shows_at, [k for k in kinds[r] if k in showing])} or evident
    # (ranks with no record at the root side with either: with them beside the outliers, no majority either)
    unknown = evident - deciding
    for pool in {frozenset(evident), frozenset(deciding)}:
        for side in [side & pool for side in sides]:
            if len(side | unknown) * 2 >= len(pool | unknown):  # no strict majority: either side, or both
                accepted += [evident - side, evident, pool - side, pool, members - side, members]
    # Outliers whose every showing view is the very view of some reference ranks (a wrong sum all read back alike):
    # nothing on file tells them from those ranks, so naming all of them, no majority, is right too.
    blur = blurred_outliers(incident, written).get(comm)
    if blur:
        accepted += [blur, blur & evident]
    if not names_global_ranks(incident, written):
        # NCCL logs and RAS replies of a job with no communicator over every rank give comm ranks only
        order = incident.program.comms[comm].ranks
        accepted += [{order.index(r) for r in side} for side in accepted]
    got = set(_job_ranks(incident, answer, root.get("outlier_ranks") or []))
    # Several ranks that diverged on the comm, whose departures may each be the first: naming the first ones with
    # others that diverged there, each within the answer's range, names no rank that ran the comm's program.
    between = low is not None and any(
        first <= got <= set(faulted) and all(low <= true.first.get(r, 0) <= high for r in got - first)
        for first, faulted in ((set(true.outliers), true.faulted), (seen_outliers, seen),
                               (set(true.outliers) & evident, set(true.faulted) & evident)) if first)
    # Per-step checksums alone place no collective, so they cannot order departures inside one step: naming the
    # first ones shown with others shown that departed by the step the checksums part at names no rank that ran the
    # program (nor one whose departure nothing shows).
    between = between or (low is None and root.get("pinned_by") == "per-step checksums" and root.get("step") is not None
                          and seen_outliers <= got <= set(seen)
                          and all(_step_of(incident, r, comm, true.first[r]) <= root["step"]
                                  for r in got - seen_outliers))
    # Counts alone of ranks behind, or records that differ in length only: one that launched one more here, holding
    # its peers back in another comm, writes the counts of the peers skipping one (or stopping); an answer naming the
    # ranks ahead that may have done so names it.
    held = set(root.get("may_be_held_back_by") or [])
    held_back = (bool(held) and root.get("kind") in ("missing", "stopped") and set(true.outliers) <= held
                 and not got & held and set(root.get("kinds") or [root.get("kind")]) <= {"missing", "stopped", "extra"})
    # Counts alone of ranks that part as the outliers do, but depart in another comm too: named apart as candidates,
    # the true outliers are the ranks named with any of them.
    maybe = set(_job_ranks(incident, answer, root.get("outlier_candidates") or []))
    with_candidates = (bool(maybe) and root.get("pinned_by") in COUNTS_SOURCES
                       and any(got <= side <= got | maybe for side in accepted))
    # Records that begin after the ranks part, beside counts that part a rank waiting in another comm: one held back
    # there by a peer writes the counts of one that departed here first and then stopped (a twin incident with that
    # rank's departure undone writes the same files, 357252); named apart as waiting candidates, resting on counts,
    # the true outliers are the named ones with any of them.
    waiting = {int(r) for r in root.get("waiting_candidates") or {}}
    waiting = set(_job_ranks(incident, answer, sorted(waiting)))
    with_candidates = with_candidates or (
        bool(waiting) and all(written.has("torch", r) or written.has("ras", r) for r in waiting)
        and any(got <= side <= got | waiting for side in accepted))
    if got not in accepted and not between and not held_back and not with_candidates \
            and not _checksum_firsts(incident, root, got) and not _explained_by_cut(root, written):
        add(Violation("wrong_outliers", f"outlier_ranks {sorted(got)}; true outliers {list(true.outliers)} "
                                        f"(diverged on the comm: {list(true.faulted)}, of which the evidence shows "
                                        f"{sorted(seen)}; majority: {root.get('majority')})"))
    outcome.pinned = low is not None and low == high and low in seqs and not outcome.violations
    return outcome


COUNTS_SOURCES = ("RAS counts", "PyTorch's enqueued counts", "PyTorch's desync report")


def _step_of(incident: Incident, rank: int, comm: str, seq: int) -> int:
    """The step in which the rank launched `seq` of `comm` (its last step where it launched fewer)."""
    steps = [x.step for x in incident.run.launches[rank] if x.op.comm == comm and x.seq <= seq]
    return steps[-1] if steps else 0


def _checksum_firsts(incident: Incident, root: dict, got: set[int]) -> bool:
    """Whether a root on per-step checksums alone names the first outliers of every comm that diverged among the
    ranks it compared, where those are several: a step's checksum sums what a rank read back from all its comms,
    so ranks that departed in two comms in one step part from the others alike."""
    name = str(root.get("comm"))
    if root.get("pinned_by") != "per-step checksums" or not name.startswith("[ranks="):
        return False
    compared = {int(r) for r in name[len("[ranks="):-1].split(",")}
    step = root.get("step")
    # (a comm that diverged only after the step the checksums part at did not mix them)
    hit = [c for c in incident.truth.roots if compared & set(incident.program.comms[c].ranks)
           and (step is None or incident.truth.roots[c].step is None or incident.truth.roots[c].step - 1 <= step)]
    firsts = {r for c in hit for r in incident.truth.roots[c].outliers}
    # (where those are no strict minority of the ranks compared, naming every one of them is right too)
    return len(hit) > 1 and (got == firsts or got == compared and firsts <= compared
                             and len(firsts) * 2 >= len(compared))


def _or(seqs: list[int]) -> str:
    return " or ".join(map(str, seqs))


def names_global_ranks(incident: Incident, written: Written) -> bool:
    """Whether the evidence says which global rank a collective stream is: Flight Recorder dumps and watchdog logs
    (`[rankR]:`) do; NCCL logs only through a comm over every rank (its INIT lines give each process its rank
    there); RAS replies alone never (a reply lists a comm's ranks with their processes only for a comm in
    trouble, so a world comm that is fine ties no process to a global rank). Gate journals and fingerprint traces
    name global ranks, but nothing ties them to a log's comm ranks."""
    if any(written.ranks.get(kind) for kind in ("fr", "torch")):
        return True
    if not written.ranks.get("nccl"):
        return False
    world = tuple(incident.program.ranks)
    return any(comm.ranks == world for comm in incident.program.comms.values())


def _is_cut(name: str, written: Written, incident: Incident) -> bool:
    """Whether the file `name` was cut short."""
    from . import nccl_log

    for kind, rank in written.cut:
        if kind == "nccl" and name == nccl_log.file_name(incident, rank):
            return True
        if kind == "fp" and name.startswith(f"fingerprint_rank{rank}."):
            return True
    return False


def _root_text(root: dict | None) -> str:
    if root is None:
        return "no root"
    return (f"root comm {root.get('comm')} seq_range {root.get('seq_range')} outliers {root.get('outlier_ranks')} "
            f"kind {root.get('kind')} pinned_by {root.get('pinned_by')!r}")
