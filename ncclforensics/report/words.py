"""The answer of `diff` in sentences: summary, cause, why a root is a range, caveats. Every renderer (terminal,
JSON, report) takes its words from here; align/ returns values only."""

from __future__ import annotations

from dataclasses import replace

from ..align.coverage import GateCoverage, Jurisdiction
from ..align.diagnosis import Diagnosis, agreeing_hang
from ..align.receipts import CountedLaunches, Finding, RasRanksGone
from ..align.divergence import DIFFERENT_OPS, EXTRA, MISSING, STOPPED, RangeReason, Root
from ..align.root import Contradiction
from ..align.gates import decision_tuple
from ..align.ras import RasHistory
from ..align.reconcile import CUDA_GRAPH_NOTE
from ..align.traces import grouped_by_traces
from ..align.wedge import COUNT_FLOORS, LAUNCHES_ONLY, Wedge, Window
from ..model import Verdict, WedgeKind
from ..model.kinds import is_p2p_comm
from ..model.phrases import ranks_words, seq_words
from .notes import note_words
from .receipts import receipt_words

# What to turn on so that the next incident pins its root (named in every range answer: a setting, or the evidence
# not given yet where the range already had the kinds a setting adds; tests check both).
FR_SETTINGS = "Flight Recorder dumps (TORCH_NCCL_TRACE_BUFFER_SIZE=20000 TORCH_NCCL_DUMP_ON_TIMEOUT=1)"
# What would tell lookalike collectives apart, by the evidence it adds (a label of the root's `compared`).
PINNING = (("call sites", "Flight Recorder dumps with call stacks (TORCH_NCCL_TRACE_BUFFER_SIZE=20000 "
                          "TORCH_NCCL_DUMP_ON_TIMEOUT=1)"),
           ("tags", "per-collective fingerprint traces with tags, steps and expected sums"),
           ("steps", "a gate journal with steps"))
LOG_SETTINGS = "NCCL debug logs (NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,COLL)"


def plural(n: int, word: str) -> str:
    """`1 collective`, `2 collectives`."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def compared(d: Diagnosis) -> bool:
    """Whether two or more ranks of one communicator had collectives to compare."""
    return any(len(a.ranks) > 1 for a in d.comms.values())


def verdict_label(d: Diagnosis) -> str:
    """The verdict as a heading: `DIVERGED`, `CONSISTENT`, ... and `NOTHING COMPARED` where no two ranks of one
    communicator are on record (nothing could agree or disagree)."""
    if d.verdict is Verdict.CONSISTENT and not compared(d):
        return "NOTHING COMPARED"
    return d.verdict.value.upper()


def kind_words(root: Root, stop: str = "stopped launching") -> str:
    """What the root is, as a label: `1 extra collective`, `3 missing collectives`, `different collectives at one
    seq`, `stopped launching` (`stop`), and the other kinds the records fit (`2 extra collectives, or 2 missing
    ...`)."""
    if root.reason is RangeReason.STEP_SUMS:
        return "results that differ in one step"

    def one(kind: str) -> str:
        if kind == DIFFERENT_OPS:
            return "different collectives at one seq"
        if kind == STOPPED:
            return stop
        return f"{root.size} {kind} collective{'' if root.size == 1 else 's'}" if root.size else f"{kind} collectives"
    return ", or ".join(one(k) for k in dict.fromkeys([root.kind, *root.kinds]))


def wedge_kind_words(kind: WedgeKind) -> str:
    """`no partner`, `count mismatch`, `a cross-communicator deadlock`, `cause unknown`."""
    return {WedgeKind.UNKNOWN: "cause unknown", WedgeKind.CROSS_COMM_DEADLOCK: "cross-communicator deadlock",
            WedgeKind.DEAD_RANK: "a rank is gone"}.get(kind, kind.value.replace("_", " "))


def wedge_where(wedge: Wedge) -> str:
    """`at seq 50`, `at or after seq 89`, `at or before seq 12`, `somewhere in seq 5..12`."""
    low, high = wedge.seq_range
    if high is None:
        return f"at or after seq {low}"
    if low == high:
        return f"at seq {low}"
    return f"at or before seq {high}" if low == 1 else f"somewhere in seq {low}..{high}"


def wedge_at(w: Wedge) -> str:
    """What a rank's collective at the wedge's seq is called: the wedge itself only where it is pinned."""
    return "at the wedge" if w.pinned else f"at seq {w.seq}"


def launched_words(w: Wedge, rank: int) -> str:
    """A rank's last launched seq at the wedge: "808 or more" where it is a timeout's SeqNum and no count says how
    much the rank enqueued after it."""
    return f"{w.launched[rank]} or more" if rank in w.launched_floors else str(w.launched[rank])


def never_launched(w: Wedge, rank: int) -> str:
    """A rank with no collective on record at the wedge's seq: it never launched it, it launched it by a count
    (RAS counts launches, not which collective), or its records end before it (a file cut short, records of
    completed collectives only)."""
    if rank in w.waiting_past:
        past = w.waiting_past[rank]
        return f"completed seq {w.seq}; waits past it, in seq {past.seq}: {past.describe()}"
    if w.launched.get(rank, 0) >= w.seq:
        return f"launched seq {w.seq} (by its count; no record says which collective)"
    if rank in w.absent_ranks:
        return f"never launched seq {w.seq}"
    return "records end before it"


def wedge_seq_words(wedge: Wedge) -> str:
    """`seq 50` where the wedge is pinned, else where it can be (`at or after seq 89`)."""
    return f"seq {wedge.seq}" if wedge.pinned else wedge_where(wedge)


def wedge_range_words(wedge: Wedge) -> str | None:
    """Why the wedge is a range of seqs, and what would pin it; None where it is pinned."""
    low, high = wedge.seq_range
    if wedge.pinned:
        return None
    if high is None:
        return (f"Where comm {wedge.comm} stopped is not on record: each rank's records there end with a collective "
                f"that completed (a trace written once a collective completed) or where a file was cut short, and "
                f"what a rank launched after its last record is unknown, so the wedge is at or after seq {low}, past "
                f"the last collective a rank is on record as completing (every rank took part in it); an NCCL log or a "
                f"Flight Recorder dump of every rank would place it.")
    if wedge.bounded_by == COUNT_FLOORS:
        return (f"Where comm {wedge.comm} stopped is not pinned: PyTorch's desync report gives "
                f"{ranks_words(wedge.absent_ranks)} only as the last collective its watchdog saw start, a floor of "
                f"what it launched, so the wedge is {wedge_where(wedge)}, up to where the other ranks' enqueued "
                f"counts end; {LOG_SETTINGS} or {FR_SETTINGS} would pin it.")
    if wedge.bounded_by != LAUNCHES_ONLY:
        return (f"Where comm {wedge.comm} stopped is not pinned: some rank's records there end before the stop (a "
                f"file cut short, a trace written once a collective completed), so the wedge is {wedge_where(wedge)}, "
                f"up to the first collective that a rank did not launch or was seen in flight in.")
    return (f"No source records which collectives of comm {wedge.comm} completed (NCCL logs and RAS count "
            f"launches only): seq {high} is the first collective not every rank launched, and one that every "
            f"rank launched before it may be where the group hung, so the wedge is {wedge_where(wedge)}; "
            f"Flight Recorder dumps (their states) would pin it.")


def shows_wedge(d: Diagnosis) -> bool:
    """Whether the answer has a wedge to show: not on a consistent run where nothing says the job stopped (its
    records merely end there)."""
    return d.wedge is not None and not (d.verdict is Verdict.CONSISTENT and not d.wedge.confirmed_by)


def records_end_words(wedge: Wedge) -> str:
    """Where a consistent run's records end, for the place a wedge would be shown."""
    launched = sorted(set(wedge.launched.values()))
    done = sorted({v for v in wedge.completed.values() if v is not None})
    said = f"the ranks launched up to seq {launched[-1]}" if launched else "nothing launched"
    if done:
        said += f" and completed up to seq {done[-1]}" if len(done) == 1 else \
            f" and completed up to seq {done[0]}..{done[-1]}"
    return (f"The records of comm {wedge.comm} end at seq {wedge.seq} ({said}); nothing says the job stopped "
            f"there, so there is no wedge.")


def finding_says(d: Diagnosis, finding: Finding) -> str:
    """What one receipt says, as shown: on a run without a wedge to show, the last collective is not called one."""
    return receipt_words(finding.fact, wedge_shown=shows_wedge(d))


def role(root: Root, rank: int) -> str:
    """What a rank of the root's table is: only the ranks the root names take a side (a rank left off both, such as
    one departing later or with records that end before the sides part, is not shown as the reference)."""
    if rank in root.outlier_ranks:
        return "outlier"
    if rank in root.reference_ranks:
        return "reference"
    if rank in root.unplaced_ranks:
        return "unplaced"
    if rank in root.outlier_candidates or rank in root.waiting_candidates:
        return "candidate"
    return "neither side"


def where(root: Root) -> str:
    """`at seq 25`, `somewhere in seq 1..91`, or where no count places it."""
    if root.seq_range is None:
        return "at a seq nothing here places"
    low, high = root.seq_range
    if high is None:
        return f"at seq {low} or later"
    return f"at seq {low}" if low == high else f"somewhere in seq {low}..{high}"


def apart_by_design_words(root: Root) -> str:
    """The root of lone unchecked sums in the only step on record beside the others (`Root.may_sum_apart_by_design`):
    a departure, or a rank that sums apart by design."""
    who = ranks_words(root.outlier_ranks).capitalize()
    one = len(root.outlier_ranks) == 1
    at = (f"in comm {root.comm} at step {root.step_bound}, beside ranks that sum alike in groups, and no other step "
          f"of {'its' if one else 'their'} trace{'' if one else 's'} is on record beside them")
    design = "which nothing here tells apart; which collective is on no record."
    if one:
        return (f"{who} sums alone {at}: it ran other collectives than its group by then, or it reads back more by "
                f"design (a gather to it), {design}")
    return (f"{who} each sum alone {at}: one of them (or each) ran other collectives than its group by then, and "
            f"nothing says which, or they read back more by design (a gather to them), {design}")


def root_sentence(root: Root) -> str:
    """What the root is, in one sentence."""
    if root.unstopped:
        behind = ranks_words(root.reference_ranks if root.kind == EXTRA else root.outlier_ranks)
        return (f"{root_sentence(replace(root, unstopped=False))} Nothing here says the job had stopped when its "
                f"dumps were written, so {behind} may only have lagged behind the others, not yet launched what they "
                f"had; a timeout or entries that never complete would confirm it.")
    if root.outlier_candidates:
        return root_sentence(replace(root, outlier_candidates={})) + candidates_words(root)
    if root.waiting_candidates:
        return root_sentence(replace(root, waiting_candidates={})) + waiting_candidates_words(root)
    if root.early_in:
        return root_sentence(replace(root, early_in=())) + early_elsewhere_words(root)
    who = ranks_words(root.outlier_ranks)
    n = plural(root.size, "collective") if root.size else "collectives"  # (size 0: how many is not known)
    at = where(root)
    if root.reason is RangeReason.STEP_SUMS and root.may_sum_apart_by_design:
        return apart_by_design_words(root)
    if root.reason is RangeReason.STEP_SUMS:
        if not root.majority:
            # (Some of them may have read back nothing there: a trace cut short still puts its rank in the doubt.)
            step = f" by step {root.step_bound}" if root.step_bound is not None else ""
            if len(root.outlier_ranks) == 1:
                # (the one rank with a trace, or one that read back wrong beside ranks that share no comm with it:
                # its peers in the collective that mixed its results left no trace)
                return f"The checksums of {who} show results mixed{step} in comm {root.comm}, and no rank that " \
                       f"shared the collective that mixed them left a trace: the communicator diverged, and which " \
                       f"of its ranks deviated, and in which collective, is on no record."
            return f"The per-step checksums of {who} show results mixed{step} in comm {root.comm}, and nothing " \
                   f"says which of them deviated; which collective is on no record."
        # (ranks the checksums alone group may be in several comms: a checksum sums every comm a rank is in)
        which_comm = ", and in which of their communicators," if len(root.outlier_ranks) > 1 and \
            grouped_by_traces(root.comm) else ""
        return f"{who.capitalize()} read back results that part from the others' in comm {root.comm}: " \
               f"{'it' if len(root.outlier_ranks) == 1 else 'they'} ran other collectives than theirs; which " \
               f"collective{which_comm} is on no record."
    if not root.majority and len(root.outlier_ranks) > 1 and (root.kind != STOPPED or len(root.kinds) > 1) \
            and not root.behind_the_rest:
        what = "launched different collectives" if root.kind == DIFFERENT_OPS else \
            "differ by collectives one side launched and the other did not (or one side stopped)" \
            if root.kind == STOPPED else f"differ by {n} one side launched and the other did not"
        return f"{who.capitalize()} part ways in comm {root.comm}, {at}: they {what}, and no majority says which " \
               f"side deviated."
    if root.kind == STOPPED and len(root.outlier_ranks) > 1 and set(root.kinds) - {STOPPED, MISSING}:
        # (some of them may have launched as many as the others, of other collectives)
        return (f"{who.capitalize()} depart from the others in comm {root.comm}, {at}: by "
                f"{kind_words(root, stop='a stop')}; the records cannot tell which.")
    if root.kind == STOPPED and MISSING in root.kinds:
        return (f"{who.capitalize()} launched fewer collectives than the others in comm {root.comm}: "
                f"{'it' if len(root.outlier_ranks) == 1 else 'they'} skipped collectives {at}, or stopped launching "
                f"after {'its' if len(root.outlier_ranks) == 1 else 'their'} last (blocked elsewhere); the records "
                f"cannot tell which." + held_elsewhere_words(root))
    if root.kind == STOPPED and root.reason in (RangeReason.PAST_RECORDS, RangeReason.PAST_COUNTED) \
            and root.seq_range is not None and root.seq_range[1] is not None:
        low, high = root.seq_range
        one = len(root.outlier_ranks) == 1
        its = "its" if one else "their"
        short = (f"{who.capitalize()}'s records in comm {root.comm} end before collectives the others completed "
                 f"with {'it' if one else 'them'}") if root.reason is RangeReason.PAST_RECORDS else (
                 f"{who.capitalize()} launched fewer collectives than the others in comm {root.comm} by PyTorch's "
                 f"counts, which go on past {its} records")
        return (f"{short}: {who} departed somewhere in seq {low}..{high} (stopped launching, or launched "
                f"collectives of {its} own), and {its} records do not say which.")
    if root.kind == STOPPED:
        after = f" after seq {root.seq - 1}" if root.seq_range is not None and root.seq_range[0] == root.seq_range[1] \
            else ""
        return f"{who.capitalize()} stopped launching in comm {root.comm}{after}." + held_elsewhere_words(root)
    if root.kind == MISSING and root.ahead_of_the_rest and not root.behind_the_rest:
        # (counts that part ranks ahead of the rest and behind it: the sentence is of those behind)
        return root_sentence(replace(root, outlier_ranks=root.outliers_behind, ahead_of_the_rest=())) \
            + ahead_words(root)
    if root.kind == MISSING and root.behind_may_be_held:
        one = len(root.outlier_ranks) == 1
        held = root.may_be_held_back_by
        by = (f" ({'one of ' if len(held) > 1 else ''}{ranks_words(held)}, as far as the record of who shares "
              f"a communicator with {'it' if one else 'them'} goes)" if held else "")
        fewer = f"{n} fewer" if root.size else "fewer collectives"
        if root.behind_the_rest:
            # (counts in three steps or more: the rank that launched one more may be behind the rest, stuck in it)
            between = ranks_words(root.behind_the_rest)
            some = len(root.behind_the_rest) == 1
            return (f"{who.capitalize()} launched {fewer} than the others in comm {root.comm}, {at}, and {between} "
                    f"fewer than the rest but more than {'it' if one else 'them'}: {'it' if one else 'they'} "
                    f"skipped them ({between} some too), or {'it is' if one else 'they are'} held back in another "
                    f"communicator by a rank ahead here that launched more{by}, which then waits in that "
                    f"collective and launches no further here while ranks of other groups go on past it "
                    f"({between} may {'be that rank' if some else 'be such ranks'}); the counts cannot tell "
                    f"which.{ahead_words(root)}")
        return (f"{who.capitalize()} launched {fewer} than the others in comm {root.comm}, {at}: "
                f"{'it' if one else 'they'} skipped {'it' if root.size == 1 else 'them'}, or "
                f"{'it is' if one else 'they are'} "
                f"held back in another communicator by a rank ahead here that launched more{by}; the counts "
                f"cannot tell which.")
    also = ""
    others = [k for k in root.kinds if k != root.kind]
    if others:
        also = f" (or {' or '.join(_kind_noun(k) for k in others)}: the records fit both)"
    return {
        EXTRA: f"{who.capitalize()} launched {n} in comm {root.comm} that the others did not, {at}{also}."
               + issue_order_words(root) + held_back_words(root) + journal_progress_words(root),
        MISSING: f"{who.capitalize()} did not launch {n} in comm {root.comm} that the others did, {at}{also}."
                 + (left_out_before_words(root) if root.left_out_before is not None else ""),
        DIFFERENT_OPS: f"{who.capitalize()} launched a different collective in comm {root.comm}, {at}{also}.",
    }[root.kind]


def candidates_words(root: Root) -> str:
    """Why the ranks whose counts part as the outliers' do, but that depart in another communicator too, are
    candidates rather than outliers (empty where there are none)."""
    if not root.outlier_candidates:
        return ""
    ranks = sorted(root.outlier_candidates)
    one = len(ranks) == 1
    comms = sorted({c for cs in root.outlier_candidates.values() for c in cs})
    it, its = ("it", "its") if one else ("they", "their")
    who = ranks_words(ranks)
    return (f" {who.capitalize()}'s counts here part from the others' as {ranks_words(root.outlier_ranks)}'s do, "
            f"but {it} {'departs' if one else 'depart'} in comm {' and '.join(comms)} too: {its} count here may follow from "
            f"that (a rank that departed there ran on past its peers, or stayed behind them), or {it} departed here "
            f"as well; counts cannot tell which, so {it} {'is a candidate' if one else 'are candidates'}, not "
            f"named.")


def issue_order_words(root: Root) -> str:
    """Why the issue orders across communicators place the root (empty where they did not): where each side
    issued it among its other communicators' collectives, and who is held back elsewhere."""
    if not root.issue_places:
        return ""
    if root.left_out_before is not None:
        return left_out_before_words(root)
    seq = (root.seq_range[1] if root.seq_range else None) or root.seq
    by_place: dict[int, list[int]] = {}
    for rank, n in sorted(root.issue_places.items()):
        by_place.setdefault(n, []).append(rank)
    said = "; ".join(f"{ranks_words(ranks)} after {plural(n, 'collective')}" for n, ranks in sorted(by_place.items()))
    places = [root.issue_places[r] for r in root.reference_ranks if r in root.issue_places]
    early = [r for r in root.outlier_ranks if places and root.issue_places.get(r, max(places)) < max(places)]
    early = early or list(root.outlier_ranks)
    text = (f" Each rank's records give its collectives of every communicator in the order it issued them, and "
            f"seq {seq} of comm {root.comm} comes after so many of their other communicators' ({said}): "
            f"{ranks_words(early)} issued one there early.")
    if root.left_out_in:
        one = len(early) == 1
        comms = _either([f"comm {c}" for c in root.left_out_in])
        unsized = (f", and {'its' if one else 'their'} records end before an extra block here would show its size"
                   if not root.size else "")
        text += (f" Or {'it' if one else 'they'} left out collectives of {comms} before it: each of "
                 f"{'its' if one else 'their'} collectives here from seq {seq} on comes after fewer of those than "
                 f"the others' of the same seq, as either puts it{unsized}; which, the records do not say.")
    parted = [r for r in root.outlier_ranks if r not in early]
    if parted:
        one = len(parted) == 1
        text += (f" {ranks_words(parted).capitalize()} issued {'its' if one else 'theirs'} where the others did, "
                 f"and {'its records part' if one else 'their records part'} from theirs by then: "
                 f"{'it' if one else 'they'} departed too, and which came first is not known.")
    if root.blocked_elsewhere:
        who = ranks_words(list(root.blocked_elsewhere))
        one = len(root.blocked_elsewhere) == 1
        text += (f" {who.capitalize()} launched fewer here, but {'its' if one else 'their'} records end no further "
                 f"on in {'its' if one else 'their'} other communicators than the program goes before its next "
                 f"collective here: held back there (a rank runs its collectives in issue order, so its peers' "
                 f"collectives there wait behind the extra one), not short of one here.")
    return text


def left_out_before_words(root: Root) -> str:
    """Why another communicator's issue orders place collectives left out here (align/left_out_before.py)."""
    comm, seq = root.left_out_before
    by_place: dict[int, list[int]] = {}
    for rank, n in sorted(root.issue_places.items()):
        by_place.setdefault(n, []).append(rank)
    said = "; ".join(f"{ranks_words(ranks)} after {plural(n, 'collective')}" for n, ranks in sorted(by_place.items()))
    placed = [r for r in root.outlier_ranks if r in root.issue_places] or list(root.outlier_ranks)
    who = ranks_words(placed)
    one = len(placed) == 1
    text = (f" Each rank's records give its collectives of every communicator in the order it issued them, and "
            f"seq {seq} of comm {comm} comes after so many of their other communicators' ({said}): {who} issued "
            f"{'it' if one else 'theirs'} early, yet went on in {'its' if one else 'their'} other communicators past "
            f"where the program issues the next one there without issuing it, which an extra collective there would "
            f"not do: {'it' if one else 'they'} left out collectives of comm {root.comm} before it.")
    if counted := [r for r in root.outlier_ranks if r not in placed]:
        one = len(counted) == 1
        text += (f" {ranks_words(counted).capitalize()} launched in comm {root.comm} as far past where the others "
                 f"stopped as {who} did, though {'its' if one else 'their'} records end before {'its' if one else 'their'} "
                 f"issue order shows where: {'it' if one else 'they'} departed too, anywhere {'its' if one else 'their'} "
                 f"count allows.")
    if root.blocked_elsewhere:
        behind = ranks_words(list(root.blocked_elsewhere))
        text += (f" {behind.capitalize()} launched fewer in comm {comm}, but "
                 f"{'its' if len(root.blocked_elsewhere) == 1 else 'their'} records end no further on than the "
                 f"program goes before the next one there: held back, not short of one there.")
    return text


def waiting_candidates_words(root: Root) -> str:
    """Why ranks whose counts part, but that wait in another communicator, are candidates (empty where none)."""
    if not root.waiting_candidates:
        return ""
    ranks = sorted(root.waiting_candidates)
    one = len(ranks) == 1
    who = ranks_words(ranks)
    comms = _either([f"comm {c}" for c in sorted({c for cs in root.waiting_candidates.values() for c in cs})]) \
        or "another communicator"
    it = "it" if one else "they"
    return (f" PyTorch's counts part {who} from the others here too, but {it} {'waits' if one else 'wait'} in "
            f"{comms}: {it} may be held back there by a peer, or {it} departed "
            f"here before the records begin and then stopped; the counts read the same, so {it} "
            f"{'is a candidate' if one else 'are candidates'}, not named.")


def early_elsewhere_words(root: Root) -> str:
    """Why the root's communicator is no surer than others where its outliers went on (empty where none)."""
    if not root.early_in:
        return ""
    one = len(root.outlier_ranks) == 1
    who = ranks_words(list(root.outlier_ranks))
    comms = _either([f"comm {c}" for c in root.early_in])
    return (f" Or {who} ran extra collectives of {comms} and stopped there: {'its' if one else 'their'} records "
            f"there after {'its' if one else 'their'} last one here come after fewer of this communicator's "
            f"collectives than a peer's of the same seq, which a collective left out here and one run early there "
            f"both give; which, the records do not say.")


def held_back_words(root: Root) -> str:
    """Why PyTorch's completion marks in the other groups name the root's outliers (empty where they did not)."""
    held = root.held_back
    if held is None or root.seq_range is None or root.seq_range[1] is None:
        return ""
    seq = held.seq if held.seq is not None else root.seq_range[1]
    who = ranks_words(root.outlier_ranks)
    has = "has" if len(root.outlier_ranks) == 1 else "have"
    behind = ranks_words(list(root.blocked_elsewhere))
    one = len(root.blocked_elsewhere) == 1
    own = "its own group's" if len(held.program_ranks) == 1 else "their own groups'"
    text = (f" By PyTorch's completion marks, {behind} completed all {'it' if one else 'they'} launched here and "
            f"{'waits' if one else 'wait'} in group {held.group} at work {held.work}, which every member of that "
            f"group on record launched and none completed: an earlier collective of another group holds it on some "
            f"member's GPU (a rank runs its collectives in issue order), and only {who} {has} one pending, seq "
            f"{seq} here, issued after {plural(held.issued_after, 'collective')} of group {held.group}; "
            f"{ranks_words(list(held.program_ranks))}, stuck in seq {seq} too, completed {held.program_after} or "
            f"more of {own} collectives before "
            f"it. So {who} issued it early, and {behind} "
            f"{'is' if one else 'are'} held back there, not short of one here.")
    if held.stacks_part:
        text += f" {who.capitalize()}'s call stack of seq {seq} differs from theirs, as an extra collective's does."
    return text


def journal_progress_words(root: Root) -> str:
    """Why launch counts read against the gate journals name the root's outliers, or leave out ranks behind
    (empty where they did neither)."""
    if not root.journal_steps:
        return ""
    furthest = max(root.journal_steps.values())
    ahead = sorted(r for r, s in root.journal_steps.items() if s == furthest)
    counts = "; ".join(f"{t}: " + ", ".join(f"rank {r} {c}" for r, c in sorted(by_rank.items()))
                       for t, by_rank in root.counts_by_type.items())
    reason = (f"got through every read-back before that step's gate, so every collective they "
              f"launched before the last of those completed, and NCCL completes one only once every rank launched "
              f"it; the program has no more there than the fewest any rank launched ({counts})")
    held = [r for r in root.blocked_elsewhere if root.journal_steps.get(r, furthest) < furthest]
    if held:
        who = ranks_words(held)
        one = len(held) == 1
        steps = " and ".join(f"step {s}" for s in sorted({root.journal_steps[r] for r in held}))
        return (f" {who.capitalize()}'s gate journal ends at {steps}, while {ranks_words(ahead)}'s goes on to step "
                f"{furthest}: those {reason}, and {who} launched the fewest, none of the next step's: "
                f"{'it' if one else 'they'} launched all the program has there, and {'is' if one else 'are'} "
                f"behind only by the steps {'it' if one else 'they'} did not reach (held back), not short of one "
                f"here.")
    mine = sorted({root.journal_steps[r] for r in root.outlier_ranks})
    steps = " and ".join(f"step {s}" for s in mine)
    who = ranks_words(root.outlier_ranks)
    return (f" {who.capitalize()}'s gate journal ends at {steps}, while {ranks_words(ahead)}'s goes on to step "
            f"{furthest}: those {reason}, and {who}, which never got past it, launched more.")


def _kind_noun(kind: str) -> str:
    return {EXTRA: "extra collectives", MISSING: "missing collectives", DIFFERENT_OPS: "a different collective"}.get(
        kind, kind)


def _either(items: list[str]) -> str:
    """`a`, `a or b`, `a, b, or c` (empty for none)."""
    if not items:
        return ""
    if len(items) == 2:
        return f"{items[0]} or {items[1]}"
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + ", or " + items[-1]


def ambiguity(root: Root) -> str | None:
    """Why the root is a range (None when it is pinned), and what would pin it."""
    if root.reason is None:
        return None
    high = root.seq_range[1] if root.seq_range else None
    if root.reason is RangeReason.BEFORE_RECORDS:
        text = (f"the ranks' records only start at seq {root.records_start}, and they already disagree there or look "
                f"alike back to it: the first divergent collective is at or before seq {high}; records from before "
                f"seq {root.records_start} (a larger TORCH_NCCL_TRACE_BUFFER_SIZE, or {LOG_SETTINGS}) would tell")
    elif root.reason is RangeReason.LOOKALIKE:
        basis = ", ".join(dict.fromkeys(["signatures", *root.compared, *root.narrowed_by]))
        kinds = _either([_kind_noun(k) for k in (root.kinds or (root.kind,))])
        text = (f"{kinds} anywhere in {seq_words(*root.seq_range)} explain every record ({basis}) equally well, "
                f"since the collectives there look alike in everything recorded")
        if "call sites" in root.compared:
            text += " (their call stacks repeat too, as a loop's do)"
        # Only evidence not already given is asked for: stacks that were compared and are equal would not help.
        missing = [what for label, what in PINNING if label not in root.compared] or [
            "per-collective fingerprints with expected sums (a misaligned result is then wrong)"]
        text += f"; {_either(missing)} would pin it"
    elif root.reason is RangeReason.PARTED_EARLIER:
        text = _parted_earlier(root)
    elif root.reason is RangeReason.COUNTED_ONLY:
        text = _counted_only(root)
    elif root.reason is RangeReason.LONE_FIELD:
        text = _lone_field(root)
    elif root.reason is RangeReason.PAST_RECORDS:
        who = ranks_words(root.outlier_ranks)
        text = (f"the records of {who} end before collectives the others completed, and NCCL completes none "
                f"without every rank: {who} launched those too, so the records are incomplete (cut at a line's "
                f"end, their tail lost, or a trace's last step never read back); a misaligned pairing completes too, "
                f"so what {who} launched there is not on record, and where {who} stopped or departed is in "
                f"{seq_words(*root.seq_range)}; {who}'s whole {LOG_SETTINGS} or {FR_SETTINGS} would say where")
    elif root.reason is RangeReason.UNREAD_STEP:
        who = ranks_words(root.outlier_ranks)
        text = (f"the records of {who} end before the step at which the gates disagreed (a trace holds a step once "
                f"its results were read back, and {who} never read that step back): the first divergent collective "
                f"lies in that step, past the records, at seq {root.seq_range[0]} or later, and no count of what "
                f"{who} launched bounds it; {LOG_SETTINGS} or {FR_SETTINGS} would say where")
    elif root.reason is RangeReason.UNWRITTEN_STEP:
        low, high = root.seq_range
        early, late = ((root.outlier_ranks, root.reference_ranks) if root.kind == MISSING
                       else (root.reference_ranks, root.outlier_ranks))
        text = (f"the traces of {ranks_words(late)} end before collectives {ranks_words(early)} completed with them "
                f"(NCCL completes none without every rank), in a step they never wrote: they never got through it, "
                f"while {ranks_words(early)} did, with nothing of it after seq {high - 1}; so the two part at seq "
                f"{high}, unless {ranks_words(late)} waited in another communicator of theirs past it (each is a "
                f"candidate), and what {ranks_words(late)} launched from seq {low} on is on no record; their "
                f"{LOG_SETTINGS} or {FR_SETTINGS} would say where")
    elif root.reason is RangeReason.UNWRITTEN_ENDS:
        text = (f"some of the ranks' traces end before collectives a peer completed with them (NCCL completes none "
                f"without every rank): they were not written as far as those ranks got, so where each trace ends "
                f"says nothing of where its rank stopped, and nothing else on record parts the ranks; the first "
                f"divergent collective is at seq {root.seq_range[0]} or later, and which rank departed is not "
                f"told; {LOG_SETTINGS} or {FR_SETTINGS} would say")
    elif root.reason is RangeReason.PAST_COUNTED:
        who = ranks_words(root.outlier_ranks)
        text = (f"the records of {who} end before what PyTorch's counts say {who} launched: the counts say how "
                f"many, not which, so where {who} stopped or departed is in {seq_words(*root.seq_range)} (from "
                f"the head of any run of lookalike collectives the records end in: they fit it one seq on too); "
                f"{who}'s whole {LOG_SETTINGS} or {FR_SETTINGS} would say where")
    elif root.reason is RangeReason.COUNTS:
        source = "RAS gives" if root.pinned_by == "RAS counts" else "PyTorch's marks give"
        text = f"{source} only how many collectives each rank launched, not which"
        if root.counts_by_type:
            text += " (" + "; ".join(f"{t}: " + ", ".join(f"rank {r} {c}" for r, c in sorted(counts.items()))
                                     for t, counts in root.counts_by_type.items()) + ")"
        text += f"; any seq up to {high} fits; {LOG_SETTINGS} or {FR_SETTINGS} would say which"
    elif root.reason is RangeReason.LAST_OPS:
        text = (f"PyTorch's desync report gives only each rank's last collective, and at #{high} they are of "
                f"different types: the ranks issued different collectives there, or left one out and added another "
                f"before it; any seq up to {high} fits; {LOG_SETTINGS} or {FR_SETTINGS} would say which")
    elif root.reason is RangeReason.STEP_SUMS:
        text = (f"only checksums place it, and no collective stream: the results part at step {root.step_bound}, so "
                f"the first divergent collective is in that step or before, and which one is on no record; "
                f"per-collective fingerprints with digests, {LOG_SETTINGS} or {FR_SETTINGS} would say which")
        if root.may_sum_apart_by_design:
            text += ("; a rank that reads back more by design (a gather to it) sums apart as well, and no other step "
                     "on record shows the lone sums alike with others: expected sums in the trace, or a later step, "
                     "would say whether they departed at all")
    elif root.reason is RangeReason.TYPE_COUNTS:
        said = "; ".join(f"{t}: " + ", ".join(f"rank {r} {c}" for r, c in sorted(counts.items()))
                         for t, counts in root.counts_by_type.items())
        text = (f"RAS counts each collective type apart ({said}), which places nothing in the communicator's launch "
                f"order; {FR_SETTINGS} or {LOG_SETTINGS} would say where")
    else:
        who = "rank" if len(root.outlier_ranks) == 1 else "ranks"
        text = f"RAS has no data from the missing {who}, so where {'it' if who == 'rank' else 'they'} stopped is " \
               f"unknown"
        if high is not None:
            text += f": at or before seq {high}, the most any other rank launched"
        text += f"; {LOG_SETTINGS} or {FR_SETTINGS} would say where"
    if not root.majority and (len(root.outlier_ranks) > 1 or root.reference_ranks):
        text += "; no majority says which side deviated"
    held = root.held_back
    if held is not None and not held.stacks_part:
        who = ranks_words(root.outlier_ranks)
        stacks = "equal" if held.stacks_part is False else "not on record for every rank"
        text += (f"; nor do the counts tell an extra collective here from collectives of group {held.group} that "
                 f"{who} left out before it (a skipped drafter pass, say): either way {who} issued seq "
                 f"{held.seq if held.seq is not None else root.seq_range[1]} after fewer of that group's collectives than the others, and the call stacks "
                 f"of that collective, which would tell, are {stacks}; {who}'s records of both groups in the order "
                 f"{'it' if len(root.outlier_ranks) == 1 else 'they'} issued them ({FR_SETTINGS} with call stacks) "
                 f"would say which")
    if root.behind_may_be_held:
        who = ranks_words(root.outliers_behind)
        counts = root.reason in (RangeReason.COUNTS, RangeReason.TYPE_COUNTS)
        said = "counts" if counts else "records that differ in length only"
        tell = (f"records of every rank's communicators in the order it issued them ({LOG_SETTINGS} or "
                f"{FR_SETTINGS}) would tell" if counts else
                "every rank's records of all its communicators in the order it issued them would tell, where a "
                "majority of the ranks places that collective alike among the others")
        text += (f"; nor do {said} say that {who} deviated: a rank runs its collectives in issue order across its "
                 f"communicators, so one that launched an extra collective here holds back its peers in another "
                 f"communicator (they then launch fewer here), while ranks of other groups that got further launch "
                 f"their next collective here, which pairs with the extra one; {who} may be held back elsewhere, and "
                 f"the rank that launched one more then among those ahead; {tell}")
        if root.behind_the_rest:
            between = ranks_words(root.behind_the_rest)
            text += (f"; the rank that launched one more waits in it (or in the next collective here, which the "
                     f"peers it holds back never launch) and launches no further here, while the ranks of other "
                     f"groups go on past it: the counts come in more than two steps, and {between}, between, may be that "
                     f"rank; one departure explains them so, while two ranks that each skipped collectives would "
                     f"take two" + (", besides the extra collective of the ranks ahead of the rest"
                                    if root.ahead_of_the_rest else ""))
    return text


def _counted_only(root: Root) -> str:
    """Why an outlier known only by its count leaves the root a range: its count says how many, not which."""
    who = ranks_words(root.counted_only)
    one = len(root.counted_only) == 1
    beside = [r for r in root.outlier_ranks if r not in root.counted_only]
    text = (f"{who} left no records here: only PyTorch's count of what {'it' if one else 'they'} launched places "
            f"{'it' if one else 'them'} among the outliers, which says how many collectives {'it' if one else 'they'} "
            f"left out or added, not which, so where {who} departed is anywhere in {seq_words(*root.seq_range)}")
    if beside:
        text += (f", no later than where the records of {ranks_words(beside)} place "
                 f"{'its' if len(beside) == 1 else 'their'} own departure")
    return text + f"; {who}'s {LOG_SETTINGS} or {FR_SETTINGS} would say where"


def ahead_words(root: Root) -> str:
    """Where ranks of a root on counts in steps launched more than the rest (empty otherwise)."""
    if not root.ahead_of_the_rest:
        return ""
    ahead = ranks_words(root.ahead_of_the_rest)
    one = len(root.ahead_of_the_rest) == 1
    return (f" {ahead[0].upper() + ahead[1:]} launched more than the rest: "
            f"{'an extra collective' if one else 'extra collectives'} here, a departure of {'its' if one else 'their'}"
            f" own, before or after this one; the counts cannot tell which came first.")


def held_elsewhere_words(root: Root) -> str:
    """Where ranks behind whose records differ in length only may be held back by a peer ahead that launched one
    more (empty otherwise)."""
    if not root.behind_may_be_held or root.kind != STOPPED:
        return ""
    one = len(root.outlier_ranks) == 1
    held = root.may_be_held_back_by
    # (ranks on neither side whose records end as early may be behind too: their peers are named as well)
    by = f" ({'one of ' if len(held) > 1 else ''}{ranks_words(held)}, as far as the record of who shares a " \
         f"communicator with the ranks behind goes)" if held else ""
    return (f" Or {'it is' if one else 'they are'} held back in another communicator by a rank ahead here that "
            f"launched one more{by}, which reads the same.")


FIELD_NOUNS = {"call sites": "call stacks"}  # a compared field's label -> its name in a sentence


def _parted_earlier(root: Root) -> str:
    """Why a richer field that parts the same ranks earlier than the signatures leaves a range between the two."""
    label, early, late = root.parted_earlier or ("", *root.seq_range)
    noun = FIELD_NOUNS.get(label, label)
    if root.majority:
        who = f"{ranks_words(root.outlier_ranks)} and the others"
    else:
        who = ranks_words(sorted(set(root.outlier_ranks) | set(root.reference_ranks)))
    missing = [what for name, what in PINNING if name not in root.compared and name != label] or [
        "per-collective fingerprints with expected sums (a misaligned result is then wrong)"]
    return (f"the {noun} part {who} at seq {early}, but the signatures (op, count, type) part them only at seq "
            f"{late}: the ranks may have issued collectives alike in signature in each other's place at seq "
            f"{early} (a swap the signatures cannot show), or the same collective from different code there (not a "
            f"divergence) and parted at seq {late}; both fit every record, so the first divergent collective is in "
            f"{seq_words(*root.seq_range)}; {_either(missing)} would pin it")


def _lone_field(root: Root) -> str:
    """Why a richer field that one rank of the reference alone recorded names that rank beside the outliers."""
    label, lone, seq = root.lone_field or ("", None, root.seq_range[0])
    noun = FIELD_NOUNS.get(label.split(" of ")[0], label.split(" of ")[0])
    others = [r for r in root.outlier_ranks if r != lone]
    rest = [r for r in root.reference_ranks if r != lone]
    without = f" ({ranks_words(rest)} recorded none)" if rest else ""
    asked = dict(PINNING).get(label.split(" of ")[0], FR_SETTINGS)
    return (f"the {noun} part {ranks_words(others)} from the others at seq {seq} only against rank {lone}'s, the one "
            f"other rank that recorded them{without}, and no one edit explains "
            f"{_their(others)} records against rank {lone}'s: rank {lone} may have departed there itself, so both are "
            f"named, and the first divergent collective is in {seq_words(*root.seq_range)}, where the other records "
            f"place it; {asked} of every rank would tell")


def _their(ranks: list[int]) -> str:
    return "their" if len(ranks) > 1 else "its"


def _they(ranks: list[int]) -> str:
    return "they" if len(ranks) > 1 else "it"


def _they_are(ranks: list[int]) -> str:
    return "they are" if len(ranks) > 1 else "it is"


def unplaced_words(root: Root, analysis) -> str:
    """What the records of the ranks on neither side of the root hide."""
    apart = [r for r in root.unplaced_ranks if r in root.departed_in]
    if apart:
        rest = [r for r in root.unplaced_ranks if r not in apart]
        said = departed_in_words(root, apart)
        return f"{said} {unplaced_words(replace(root, unplaced_ranks=rest), analysis)}" if rest else said
    ranks = root.unplaced_ranks
    who = ranks_words(ranks)
    if analysis is not None and not set(ranks) & {*analysis.launched, *analysis.counted}:
        # (ranks known here by a count alone: counts_beside_records.short_of_records)
        return (f"{who.capitalize()} left no records in comm {root.comm}, and by PyTorch's counts launched none of the "
                f"collectives where the others' records begin: {_they(ranks)} never reached where the ranks part "
                f"(held back in another communicator, by a peer that departed here, or stopped), so whether "
                f"{_they(ranks)} deviated too is not on record, and {_they_are(ranks)} named on neither side.")
    ends = [analysis.launched[r] for r in ranks if analysis is not None and r in analysis.launched]
    at = f" at seq {max(ends)}" if len(set(ends)) == 1 else ""
    return (f"The records of {who} in comm {root.comm} end{at}, before the ranks part, short of the others' (a file "
            f"cut short, collectives the others completed after them, or a rank that lags or is held back "
            f"elsewhere, where nothing confirms a hang): whether {_they(ranks)} deviated too, or went with the "
            f"others, is not on record, so {_they_are(ranks)} named on neither side.")


def departed_in_words(root: Root, ranks: list[int]) -> str:
    """Why the issue orders place `ranks`, which depart in another communicator, on neither side."""
    comms = sorted({c for r in ranks for c in root.departed_in[r]})
    where = f"comm {comms[0]}" if len(comms) == 1 else f"other communicators ({', '.join(comms)})"
    return (f"{ranks_words(ranks).capitalize()} {_verb('depart', ranks)} in {where} too, as {_their(ranks)} records "
            f"there show: a collective added or left out there moves {_their(ranks)} places here as an extra one "
            f"here would, so {_their(ranks)} issue order says nothing of comm {root.comm}, and {_they_are(ranks)} "
            f"named on neither side; the others' places give the program.")


def where_stacks_part(root: Root) -> dict[str, str] | None:
    """Per rank at the root, the frame where its call stack parts from the reference ranks' (walking in from the
    outermost frame): the call site that tells the outlier's collective from the others'. None where the stacks
    are equal or unknown."""
    stacks = {rank: op.stack.split(" < ") for rank, op in root.ops.items() if op.stack}
    reference = [stacks[r] for r in root.reference_ranks if r in stacks]
    if not reference:
        return None
    theirs = list(reversed(reference[0]))
    parted = {}
    for rank in root.outlier_ranks:
        if rank not in stacks:
            continue
        mine = list(reversed(stacks[rank]))
        depth = next((i for i, (a, b) in enumerate(zip(mine, theirs)) if a != b), min(len(mine), len(theirs)))
        if depth < len(mine) or depth < len(theirs):
            parted[str(rank)] = mine[depth] if depth < len(mine) else mine[-1]
            parted.setdefault(str(root.reference_ranks[0]), theirs[depth] if depth < len(theirs) else theirs[-1])
    return parted or None


def window_words(window: Window) -> str:
    """A window with nothing in it, or one known from counts alone."""
    if window.collectives is None:
        return (f"Corrupt-and-continue window in comm {window.comm}: unknown (nothing on record says what paired "
                f"with what).")
    return (f"Corrupt-and-continue window in comm {window.comm}: 0 collectives (the group wedged at the root, "
            f"nothing completed misaligned).")


def death_words(d: Diagnosis) -> str:
    """What shows that the stopped ranks are gone (RAS, peers' errors), with receipts: "died" only where RAS
    considers a process dead or a peer saw it exit; unreachable is not dead."""
    if not d.death:
        return (" Nothing in the evidence says it died; it may be blocked elsewhere (in another communicator or "
                "on the host).")
    shown = "; ".join(f"{receipt_words(f.fact)} ({f.loc})" for f in d.death[:4])
    died = any(not isinstance(f.fact, RasRanksGone) or f.fact.status == "dead" for f in d.death)
    return f" Evidence that it {'died' if died else 'is gone'}: {shown}."


def contradiction_words(c: Contradiction) -> str:
    """What a root's contradiction says: the constraint allows no root the records allow."""
    return f"{c.constraint} allow no root the records allow ({seq_words(*c.seq_range)})"


def cause(d: Diagnosis) -> str | None:
    """The root, tied to the gate disagreement where one was journaled."""
    root, gate = d.root, d.gate
    if root is None:
        return None
    what = root_sentence(root)
    if root.contradictions:
        what += " " + " ".join(f"Contradiction: {contradiction_words(c)} ({', '.join(map(str, c.locs[:4]))})."
                               for c in root.contradictions)
    if root.kind == STOPPED:
        return what + death_words(d)
    if gate is None and len(d.journaled_ranks) > 1:
        return what + (f" The gate journals of {ranks_words(d.journaled_ranks)} agree at every step they hold, so "
                       f"they do not say why the ranks disagreed.")
    if gate is None and d.journaled_ranks:
        return what + (f" Only {ranks_words(d.journaled_ranks)} journaled its gate, which compares with nothing, so "
                       f"why the ranks disagreed is not known from this evidence.")
    if gate is None:
        return what + " No gate journal was given, so why the ranks disagreed is not known from this evidence."
    passed = ", ".join(map(str, gate.passed)) or "none"
    skipped = ", ".join(map(str, gate.skipped)) or "none"
    tuples = "; ".join(
        f"rank {r}: {', '.join(f'{k}={v}' for k, v in decision_tuple(dec).items() if v is not None)} ({dec.loc})"
        for r, dec in gate.decisions.items())
    window = ""
    if gate.ceiling_start is not None:
        window = (f" The step was {'inside' if gate.in_ceiling_window else 'outside'} the ceiling window "
                  f"(seq >= max_model_len - spec_tokens + 1 = {gate.ceiling_start}).")
    what_at_root = {EXTRA: "extra collective", MISSING: "missing collective"}.get(root.kind, "different collective")
    if d.gate_ties:
        verb, others = ("skipped", "the others ran") if root.kind == MISSING else ("ran", "the others skipped")
        link = f" {ranks_words(d.gate_ties).capitalize()} {verb} the drafter's collectives {others}: that is the " \
               f"{what_at_root} at the root."
    else:
        link = " The journal's disagreement does not name the root's outlier ranks; treat the tie as unproven."
    return (f"{what} At step {gate.step} the drafter gates disagreed: passed: {passed}; skipped: {skipped}. "
            f"Decisions: {tuples}.{window}{link}")


def one_reply_words(comm: str, history: RasHistory) -> str:
    """A RAS reply whose ranks disagree, with no second reply to tell a straggler from a wedge."""
    block = history.states[-1][1]
    if block.count_groups:
        groups = sorted(block.count_groups, key=lambda g: g.count if g.count is not None else -1)
        said = [plural(g.nranks, "rank") + (f" ({', '.join(map(str, g.ranks))})" if g.ranks else "")
                + f" at {g.count}" for g in groups]
    else:
        launched = history.launched()
        said = [f"{ranks_words(sorted(r for r in launched if launched[r] == n))} at {n}"
                for n in sorted(set(launched.values()))]
    return (f"RAS ({block.loc}) shows comm {comm} with its ranks' launched collectives apart: {'; '.join(said)}. "
            f"One reply cannot tell a straggler from a wedge: query RAS again (counts that move are skew, counts "
            f"that stay are a wedge).")


def summary(d: Diagnosis) -> str:
    """The answer in a few sentences: what diverged, what ran misaligned, where it stopped."""
    root, wedge = d.root, d.wedge
    compared = [a for a in d.comms.values() if len(a.ranks) > 1]
    if d.verdict is Verdict.CONSISTENT:
        if not compared:
            return ("No two ranks of one communicator have collectives on record, so nothing could agree or "
                    f"disagree: this is no sign of health. {LOG_SETTINGS} or {FR_SETTINGS} from two or more ranks "
                    f"of one communicator would tell.")
        ranks = len({r for a in compared for r in a.ranks})
        return f"The collective streams of {plural(ranks, 'rank')} agree wherever their records overlap."
    if d.verdict is Verdict.TRANSIENT:
        return "Ranks were skewed in one RAS reply but counts moved on: skew, not a wedge."
    parts = []
    if root is not None:
        parts.append(root_sentence(root))
    w = d.window
    if w is not None and w.collectives:
        count = str(w.collectives) if w.collectives_min == w.collectives else f"{w.collectives_min} to {w.collectives}"
        within = "seq" if w.collectives_min == w.collectives else "within seq"
        parts.append(f"The group then ran {count} collective{'' if w.collectives == 1 else 's'} misaligned "
                     f"({within} {w.first_seq}..{w.last_seq}).")
    if d.corrupted_fingerprints and not (w is not None and w.collectives) and not (
            root is not None and (root.reason is RangeReason.STEP_SUMS or root.by_results)):
        parts.append(wrong_results_words(d))
    if wedge is not None and root is None and agreeing_hang(wedge) and wedge.waiting_past:
        parts.append(held_apart_words(wedge, counted_launches(d)))
    elif wedge is not None and root is None and agreeing_hang(wedge):
        op = next(iter(wedge.ops.values()))
        every = "both" if len(wedge.waiting_ranks) == 2 else "all"
        parts.append(f"{ranks_words(wedge.waiting_ranks).capitalize()} {every} wait in the same collective, comm "
                     f"{wedge.comm} seq {wedge.seq} ({op.describe()}): nothing here shows them disagreeing or whom "
                     f"they wait for (a rank with no file here, the network?).")
    elif wedge is not None and wedge.confirmed_by:
        parts.append(f"It wedged {wedge_where(wedge)} in comm {wedge.comm} ({wedge_kind_words(wedge.kind)}).")
    elif wedge is not None and wedge.pinned:
        parts.append(f"The records stop at seq {wedge.seq} in comm {wedge.comm} ({wedge_kind_words(wedge.kind)}); nothing "
                     f"confirms a hang there (no timeout, no RAS counts that stay).")
    elif wedge is not None:
        parts.append(f"The records place no stop in comm {wedge.comm}: it would be {wedge_where(wedge)} "
                     f"({wedge_kind_words(wedge.kind)}), and nothing confirms a hang (no timeout, no RAS counts that "
                     f"stay).")
    for comm, history in sorted(d.ras.items()):
        if not parts and history.disagree and history.moving is None:
            parts.append(one_reply_words(comm, history))
    if not parts and compared:  # inconclusive although the streams agree: what they cannot show is in the caveats
        ranks = len({r for a in compared for r in a.ranks})
        parts.append(f"The collective streams of {plural(ranks, 'rank')} agree wherever their records overlap, but "
                     "that is not enough to call the job consistent (see the caveats" + (
                         " and the evidence)." if d.evidence else ")."))
    if not parts:
        parts.append("Nothing here gives the collectives of two or more ranks of one communicator to compare"
                     + ("; the evidence table lists what the files do say." if d.evidence else "."))
    return " ".join(parts)


def wrong_results_words(d: Diagnosis) -> str:
    """Results read back wrong where the answer has no misaligned window to hold them: proof of mixed data all the
    same, said with the first of them."""
    rows = d.corrupted_fingerprints
    first = min(rows, key=lambda f: (f.step, f.op or 0, f.rank))
    ranks = sorted({f.rank for f in rows})
    some = "a wrong result" if len(rows) == 1 else f"{len(rows)} wrong results"
    return (f"{ranks_words(ranks).capitalize()} read back {some} ({first.loc}, step {first.step}): collectives "
            f"completed with mixed data.")


def counted_launches(d: Diagnosis) -> dict[int, int]:
    """rank -> PyTorch's count of the work it enqueued in the wedged comm, where the answer took one past the
    rank's timeout lines (a CountedLaunches receipt)."""
    return {f.fact.rank: f.fact.count for f in d.evidence
            if isinstance(f.fact, CountedLaunches) and d.wedge is not None and f.fact.comm == d.wedge.comm}


def held_apart_words(wedge: Wedge, counts: dict[int, int]) -> str:
    """Ranks held at different SeqNums of one comm, the lowest of them the wedge: some in its collective, the
    others past it, in later ones of their own after completing it (their timeout lines). Nothing shows them
    disagreeing: a timeout's SeqNum says what a rank completed, not what it launched."""
    held, ahead = sorted(wedge.ops), sorted(wedge.waiting_past)
    op = wedge.ops[held[0]]
    later: dict[tuple[int, str], list[int]] = {}
    for rank, at in sorted(wedge.waiting_past.items()):
        later.setdefault((at.seq, at.describe()), []).append(rank)
    where = "; ".join(("" if len(later) == 1 else f"{ranks_words(ranks)} ") + f"in seq {seq} ({what})"
                      for (seq, what), ranks in sorted(later.items()))
    text = (f"{ranks_words(held).capitalize()} {_verb('wait', held)} in comm {wedge.comm} seq {wedge.seq} "
            f"({op.describe()}); {ranks_words(ahead)} completed it and {_verb('wait', ahead)} past it, {where}.")
    if counts:
        every = len(counts) == len(wedge.waiting_ranks)
        who = ("Both" if len(counts) == 2 else "All") if every else ranks_words(sorted(counts)).capitalize()
        values = sorted(set(counts.values()))
        text += (f" {who} launched {values[0]} by PyTorch's count." if len(values) == 1 else
                 f" By PyTorch's count they launched {', '.join(f'{r}:{n}' for r, n in sorted(counts.items()))}.")
    return (text + f" A timeout's SeqNum says what a rank completed, not how many it launched: nothing here shows "
            f"the ranks disagreeing, only that {ranks_words(held)} {_verb('lag', held)} or {_verb('hang', held)} "
            f"in a collective {ranks_words(ahead)} finished (a rank finishes once its own part is done, a "
            f"broadcast's root before its receivers; whom {ranks_words(held)} {_verb('wait', held)} for, a rank "
            f"with no lines here or the network, is not on record). {FR_SETTINGS}, {LOG_SETTINGS} or the watchdog "
            f"lines of every rank would tell.")


def _verb(verb: str, ranks: list[int]) -> str:
    """`waits` for one rank, `wait` for several."""
    return verb + "s" if len(ranks) == 1 else verb


def caveats(d: Diagnosis) -> list[str]:
    """What the answer rests on and what it cannot see."""
    found = [note_words(note) for note in d.notes]
    root = d.root
    if root is not None and (text := ambiguity(root)):
        found.append(f"Root not pinned: {text}.")
    if root is not None and root.departs_again:
        found.append("No single edit explains the outlier's whole stream (it departs again later); the root is "
                     "placed by the edit that explains it furthest.")
    if root is not None and not root.majority and len(root.outlier_ranks) > 1:
        found.append("No majority among the ranks of the root's comm; both sides are named, since nothing "
                     "in the evidence says which one deviated.")
    if root is not None and root.unplaced_ranks:
        found.append(unplaced_words(root, d.comms.get(root.comm)))
    if d.window is not None and d.window.collectives and not d.window.completion_known:
        found.append("No source records completion for every rank (NCCL logs and RAS count launches only), so "
                     "the window counts collectives every rank launched.")
    if any(c.note == CUDA_GRAPH_NOTE for c in d.reconciliation.contradictions) or d.ras:
        found.append(CUDA_GRAPH_NOTE + ".")
    if d.text_ras_replies > 1:
        found.append("Text RAS replies carry no timestamp; they were ordered by file name.")
    if any(len(h.states) == 1 and not h.disagree for h in d.ras.values()) and d.verdict is Verdict.CONSISTENT:
        found.append("A single RAS reply saying OK does not prove progress (it counts launches, not completions).")
    for comm, expected in sorted((d.streams.expected_members if d.streams else {}).items()):
        analysis = d.comms.get(comm)
        silent = sorted(set(expected) - set(analysis.ranks)) if analysis else []
        if silent:
            found.append(f"No file gives the collectives of {ranks_words(silent)} in comm {comm}, which its "
                         f"configuration names (a rank that died writes no Flight Recorder dump).")
    if d.wedge is not None and not d.wedge.confirmed_by and shows_wedge(d):
        found.append("Nothing in the evidence (watchdog timeout, repeated RAS replies, Flight Recorder states) "
                     "confirms that the job stopped; the wedge is where it would stop.")
    if d.wedge is not None and shows_wedge(d) and (text := wedge_range_words(d.wedge)):
        found.append(text)
    p2p = sorted(comm for comm in d.comms if is_p2p_comm(comm))
    if p2p:
        found.append(f"Send/Recv are kept apart from the collectives ({', '.join(p2p[:4])}"
                     f"{', ...' if len(p2p) > 4 else ''}) and not compared rank against rank: a send pairs with its "
                     f"peer's receive, not with the same position on every rank.")
    return found


def coverage_summary(c: GateCoverage) -> str:
    """Gate coverage in one sentence: what the verdict (`c.verdict.label`, shown beside it) rests on."""
    n = len(c.sessions)
    unknown = len(c.unknown_sessions)
    if c.verdict is Jurisdiction.NO_JOURNALS:
        return "The inputs hold no drafter-gate decision."
    if c.verdict is Jurisdiction.WINDOW_UNKNOWN:
        every = "The journal of the one session lacks" if n == 1 else f"The journals of all {n} sessions lack"
        return (f"{every} max_model_len/spec_tokens (or the sequence length), so whether any step reached the "
                f"ceiling window is unknown; journal them with each gate decision to tell.")
    known = n - unknown
    tail = f"; the window is unknown in {plural(unknown, 'more session')}" if unknown else ""
    if c.verdict is Jurisdiction.NOT_EXERCISED:
        return (f"No step of {plural(known, 'session')} reached the ceiling window "
                f"(sequence length >= max_model_len - spec_tokens + 1){tail}.")
    disagreeing = len(c.disagreeing_sessions)
    return (f"{len(c.exercised_sessions)} of {plural(known, 'session')} reached the ceiling window "
            f"({plural(c.steps_in_window, 'step')} inside it){tail}; the gates disagreed in "
            f"{plural(disagreeing, 'session')}.")
