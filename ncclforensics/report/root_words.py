"""The root in sentences: what it is, where, which ranks, and what each kind of evidence added to it."""

from __future__ import annotations

from dataclasses import replace

from ..align.answers import DIFFERENT_OPS, EXTRA, MISSING, STOPPED, RangeReason, Root
from ..align.traces import grouped_by_traces
from ..model.phrases import either, plural, ranks_words, their, them, they, they_are, verb_form
from .tie_words import issue_sides_words


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


def expected_apart_words(root: Root) -> str:
    """The root of expected sums that part ranks which all read back right, no record giving their communicators
    (`Root.expected_apart_reading_right`): a departure, or ranks of another class by design."""
    who, outliers = ranks_words(root.outlier_ranks).capitalize(), root.outlier_ranks
    others = ranks_words(root.reference_ranks) if len(root.reference_ranks) <= 8 else \
        f"the other {len(root.reference_ranks)} ranks compared"
    return (f"{who} expected other sums at step {root.step_bound} than {others}, which "
            f"expected alike with {them(outliers)} in another step, though every one read its sum back right: "
            f"{they(outliers)} ran other collectives than the others by then, or {they_are(outliers)} of another "
            f"class of ranks that reads back other data by design (replicas serving other requests), which nothing "
            f"here tells apart, as no record gives their communicators; which collective is on no record.")


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
        return root_sentence(replace(root, early_in={})) + early_elsewhere_words(root)
    who = ranks_words(root.outlier_ranks)
    n = plural(root.size, "collective") if root.size else "collectives"  # (size 0: how many is not known)
    at = where(root)
    if root.reason is RangeReason.STEP_SUMS and root.expected_apart_reading_right:
        return expected_apart_words(root)
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
        what = f"differ by {kind_words(root)}, the records cannot tell which" \
            if len(set(root.kinds) - {root.kind}) > 1 else \
            "launched different collectives" if root.kind == DIFFERENT_OPS else \
            "differ by collectives one side launched and the other did not (or one side stopped)" \
            if root.kind == STOPPED else f"differ by {n} one side launched and the other did not"
        return f"{who.capitalize()} part ways in comm {root.comm}, {at}: they {what}, and no majority says which " \
               f"side deviated." + issue_sides_words(root)
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
    # (what the evidence adds to a root of each kind: where the ranks issued it, who is held back, how far the
    # journals got, what was left out before)
    added = {EXTRA: lambda: issue_order_words(root) + held_back_words(root) + journal_progress_words(root),
             MISSING: lambda: left_out_before_words(root) if root.left_out_before is not None else "",
             DIFFERENT_OPS: lambda: ""}[root.kind]
    if len(others) > 1:
        # (each rank may have departed by another kind: checksums add ranks whose records show no departure)
        return (f"{who.capitalize()} {verb_form('depart', root.outlier_ranks)} from the others in comm {root.comm}, "
                f"{at}: by {kind_words(root)}; the records cannot tell which." + added())
    if others:
        also = f" (or {' or '.join(kind_noun(k) for k in others)}: the records fit both)"
    return {
        EXTRA: f"{who.capitalize()} launched {n} in comm {root.comm} that the others did not, {at}{also}.",
        MISSING: f"{who.capitalize()} did not launch {n} in comm {root.comm} that the others did, {at}{also}.",
        DIFFERENT_OPS: f"{who.capitalize()} launched a different collective in comm {root.comm}, {at}{also}.",
    }[root.kind] + added()


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
        return stopped_past_words(root)
    if root.left_out_before is not None:
        return left_out_before_words(root)
    seq = root.issue_seq if root.issue_seq is not None else (
        (root.seq_range[1] if root.seq_range else None) or root.seq)
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
        comms = either([f"comm {c}" for c in root.left_out_in])
        unsized = (f", and {'its' if one else 'their'} records end before an extra block here would show its size"
                   if not root.size else "")
        text += (f" Or {'it' if one else 'they'} left out collectives of {comms} before it: each of "
                 f"{'its' if one else 'their'} collectives here from seq {seq} on comes after fewer of those than "
                 f"the others' of the same seq, as either puts it{unsized}; which, the records do not say.")
    late = [r for r in root.outlier_ranks if r not in early and r in root.placed_late]
    if late:
        one = len(late) == 1
        firsts = sorted({root.placed_late[r] for r in late})
        start = f"seq {firsts[0]}" if len(firsts) == 1 else f"seqs {', '.join(map(str, firsts))}"
        text += (f" {ranks_words(late).capitalize()}'s records place {their(late)} collectives here only from "
                 f"{start} on (records that begin late, as a Flight Recorder ring's do), past seq {seq}; "
                 f"{they(late)} launched as many here as {ranks_words(early)} and issued each one kept where "
                 f"{ranks_words(early)} did, which fits none of the others: {they(late)} issued one early too.")
    stopped = [r for r in root.outlier_ranks if r not in early and r not in late and r in root.stopped_past]
    if stopped:
        one = len(stopped) == 1
        text += (f" {ranks_words(stopped).capitalize()} issued {'its' if one else 'theirs'} where the others did, "
                 f"and then nothing more in any communicator, while the others went on past it though it never "
                 f"completed (a rank of the communicator never launched it): the program does not wait on it, so "
                 f"{'it' if one else 'they'} ran another collective there, one {'it waits' if one else 'they wait'} "
                 f"on, and which departure came first is not known.")
    parted = [r for r in root.outlier_ranks
              if r not in early and r not in late and r not in root.ran_ahead and r not in root.stopped_past]
    if parted:
        one = len(parted) == 1
        text += (f" {ranks_words(parted).capitalize()} issued {'its' if one else 'theirs'} where the others did, "
                 f"and {'its records part' if one else 'their records part'} from theirs by then: "
                 f"{'it' if one else 'they'} departed too, and which came first is not known.")
    text += ran_ahead_words(root)
    if root.blocked_elsewhere:
        who = ranks_words(list(root.blocked_elsewhere))
        one = len(root.blocked_elsewhere) == 1
        text += (f" {who.capitalize()} launched fewer here, but {'its' if one else 'their'} records end no further "
                 f"on in {'its' if one else 'their'} other communicators than the program goes before its next "
                 f"collective here: held back there (a rank runs its collectives in issue order, so its peers' "
                 f"collectives there wait behind the extra one), not short of one here.")
    return text


def stopped_past_words(root: Root) -> str:
    """Why ranks that stopped right after a collective the program does not wait on are named, where the ranks
    behind wait elsewhere (interleave.stops_past_the_ranks_behind; empty where that is not the root's ground)."""
    if not root.stopped_past or not root.blocked_elsewhere:
        return ""
    stopped, behind = list(root.stopped_past), list(root.blocked_elsewhere)
    one, one_behind = len(stopped) == 1, len(behind) == 1
    seq = root.seq_range[1] if root.seq_range else root.seq
    return (f" {ranks_words(stopped).capitalize()} issued {'its' if one else 'their'} seq {seq} where the others did, and "
            f"then nothing more in any communicator, while {ranks_words(root.reference_ranks)} went on past it "
            f"though it never completed ({ranks_words(behind)} never launched it): the program does not wait on "
            f"it, so {'it' if one else 'they'} ran another collective there, one {'it waits' if one else 'they wait'} "
            f"on. {ranks_words(behind).capitalize()} launched fewer here, but {'its' if one_behind else 'their'} "
            f"records end no further on in {'its' if one_behind else 'their'} other communicators than the program "
            f"goes before {'its' if one_behind else 'their'} next collective here: waiting there, not short of one "
            f"here.")

def ran_ahead_words(root: Root) -> str:
    """Why ranks that launched more than the others are named beside the early ones (align/ran_ahead.py; empty
    where none are)."""
    if not root.ran_ahead:
        return ""
    text = ""
    for (low, high), ranks in sorted({span: sorted(r for r, s in root.ran_ahead.items() if s == span)
                                      for span in set(root.ran_ahead.values())}.items()):
        one = len(ranks) == 1
        it, its = ("it", "its") if one else ("they", "their")
        text += (f" {ranks_words(ranks).capitalize()} launched more here than the others, and issued seq {high} "
                 f"after fewer collectives of another communicator than {its} peers there, whose records here end "
                 f"sooner, issued before theirs or in all: {it} ran an extra collective of {its} own, "
                 f"{f'somewhere in seq {low}..{high} (alike in place)' if low < high else f'at seq {high}'}, and "
                 f"which departure came first is not known.")
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
    comms = either([f"comm {c}" for c in sorted({c for cs in root.waiting_candidates.values() for c in cs})]) \
        or "another communicator"
    it = "it" if one else "they"
    # (records that begin late, or the candidates' own records that end before the sides part: no record of theirs
    # compares them where they may have departed, waiting_past_records.py)
    unrecorded = ("before the records begin" if root.reason is RangeReason.BEFORE_RECORDS
                  else f"past where {their(ranks)} records end")
    return (f" PyTorch's counts part {who} from the others here too, but {it} {'waits' if one else 'wait'} in "
            f"{comms}: {it} may be held back there by a peer, or {it} departed "
            f"here {unrecorded} and then stopped; the counts read the same, so {it} "
            f"{'is a candidate' if one else 'are candidates'}, not named.")


def early_elsewhere_words(root: Root) -> str:
    """Why the root's communicator is no surer than others where its outliers went on (empty where none)."""
    if not root.early_in:
        return ""
    one = len({r for ranks in root.early_in.values() for r in ranks}) == 1
    # (each rank with the communicators it is a member of: `ranks 0 and 2 ran extra collectives of comm A` would
    # put rank 0 in comm A)
    who = either([f"{ranks_words(list(ranks))} in comm {c}" for c, ranks in root.early_in.items()])
    return (f" Or {who} ran extra collectives and stopped there: {'its' if one else 'their'} records "
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


def kind_noun(kind: str) -> str:
    return {EXTRA: "extra collectives", MISSING: "missing collectives", DIFFERENT_OPS: "a different collective"}.get(
        kind, kind)


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


def unplaced_words(root: Root, analysis) -> str:
    """What the records of the ranks on neither side of the root hide."""
    apart = [r for r in root.unplaced_ranks if r in root.departed_in]
    if apart:
        rest = [r for r in root.unplaced_ranks if r not in apart]
        said = departed_in_words(root, apart)
        return f"{said} {unplaced_words(replace(root, unplaced_ranks=rest), analysis)}" if rest else said
    late = [r for r in root.unplaced_ranks if r in root.placed_late]
    if late:
        rest = [r for r in root.unplaced_ranks if r not in late]
        said = placed_late_words(root, late)
        return f"{said} {unplaced_words(replace(root, unplaced_ranks=rest), analysis)}" if rest else said
    ranks = root.unplaced_ranks
    who = ranks_words(ranks)
    if analysis is not None and not set(ranks) & {*analysis.launched, *analysis.counted}:
        # (ranks known here by a count alone: counts_beside_records.short_of_records)
        return (f"{who.capitalize()} left no records in comm {root.comm}, and by PyTorch's counts launched none of the "
                f"collectives where the others' records begin: {they(ranks)} never reached where the ranks part "
                f"(held back in another communicator, by a peer that departed here, or stopped), so whether "
                f"{they(ranks)} deviated too is not on record, and {they_are(ranks)} named on neither side.")
    ends = [analysis.launched[r] for r in ranks if analysis is not None and r in analysis.launched]
    at = f" at seq {max(ends)}" if len(set(ends)) == 1 else ""
    return (f"The records of {who} in comm {root.comm} end{at}, before the ranks part, short of the others' (a file "
            f"cut short, collectives the others completed after them, or a rank that lags or is held back "
            f"elsewhere, where nothing confirms a hang): whether {they(ranks)} deviated too, or went with the "
            f"others, is not on record, so {they_are(ranks)} named on neither side.")


def placed_late_words(root: Root, ranks: list[int]) -> str:
    """Why the issue orders place `ranks`, whose places begin past where they part the ranks, on neither side."""
    firsts = sorted({root.placed_late[r] for r in ranks})
    start = f"seq {firsts[0]}" if len(firsts) == 1 else f"seqs {', '.join(map(str, firsts))}"
    return (f"The records of {ranks_words(ranks)} place {their(ranks)} collectives in comm {root.comm} among "
            f"{their(ranks)} other communicators' only from {start} on (records that begin late, as a Flight "
            f"Recorder ring's do), past where the ranks part, and what {they(ranks)} launched there fits both sides "
            f"alike, or neither: whether {they(ranks)} deviated too is not on record, so {they_are(ranks)} named on "
            f"neither side.")


def departed_in_words(root: Root, ranks: list[int]) -> str:
    """Why the issue orders place `ranks`, which depart in another communicator, on neither side."""
    comms = sorted({c for r in ranks for c in root.departed_in[r]})
    where = f"comm {comms[0]}" if len(comms) == 1 else f"other communicators ({', '.join(comms)})"
    return (f"{ranks_words(ranks).capitalize()} {verb_form('depart', ranks)} in {where} too, as {their(ranks)} records "
            f"there show: a collective added or left out there moves {their(ranks)} places here as an extra one "
            f"here would, so {their(ranks)} issue order says nothing of comm {root.comm}, and {they_are(ranks)} "
            f"named on neither side; the others' places give the program.")


def where_stacks_part(root: Root) -> dict[str, str] | None:
    """Per rank at the root, the frame where its call stack parts from the reference ranks' (walking in from the
    outermost frame): the call site that tells the outlier's collective from the others'. None where the stacks
    are equal or unknown."""
    stacks = {rank: op.stack.split(" < ") for rank, op in root.ops.items() if op.stack}
    reference = [r for r in root.reference_ranks if r in stacks]
    if not reference or any(stacks[r] != stacks[reference[0]] for r in reference):
        return None  # (reference ranks whose stacks part among themselves give no one stack to part from)
    theirs = list(reversed(stacks[reference[0]]))
    parted = {}
    for rank in root.outlier_ranks:
        if rank not in stacks:
            continue
        mine = list(reversed(stacks[rank]))
        depth = next((i for i, (a, b) in enumerate(zip(mine, theirs)) if a != b), min(len(mine), len(theirs)))
        if depth < len(mine) or depth < len(theirs):
            parted[str(rank)] = mine[depth] if depth < len(mine) else mine[-1]
            parted.setdefault(str(reference[0]), theirs[depth] if depth < len(theirs) else theirs[-1])
    return parted or None
