"""Why a root is a range, or names no majority, in a sentence, and what evidence would pin it."""

from __future__ import annotations

from ..align.answers import MISSING, RangeReason, Root
from ..model.phrases import either, ranks_words, seq_words, their
from .advice import FR_SETTINGS, LOG_SETTINGS, PINNING
from .root_words import kind_noun


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
        kinds = either([kind_noun(k) for k in (root.kinds or (root.kind,))])
        text = (f"{kinds} anywhere in {seq_words(*root.seq_range)} explain every record ({basis}) equally well, "
                f"since the collectives there look alike in everything recorded")
        if "call sites" in root.compared:
            text += " (their call stacks repeat too, as a loop's do)"
        # Only evidence not already given is asked for: stacks that were compared and are equal would not help.
        missing = [what for label, what in PINNING if label not in root.compared] or [
            "per-collective fingerprints with expected sums (a misaligned result is then wrong)"]
        text += f"; {either(missing)} would pin it"
    elif root.reason is RangeReason.PARTED_EARLIER:
        text = _parted_earlier(root)
    elif root.reason is RangeReason.COUNTED_ONLY:
        text = _counted_only(root)
    elif root.reason is RangeReason.LONE_FIELD:
        text = _lone_field(root)
    elif root.reason is RangeReason.UNPINNED:
        text = _unpinned(root)
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
                f"(each took part in what the others completed), in a step they never wrote: they never got through it, "
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
        if root.expected_apart_reading_right:
            text += ("; every rank read its sum back right and no record gives their communicators, so ranks of "
                     "another class that read back other data by design (replicas serving other requests) expect "
                     "apart as well: NCCL logs or Flight Recorder dumps, which give each rank's communicators, "
                     "would say whether they share them")
        elif root.may_sum_apart_by_design:
            text += ("; a rank that reads back more by design (a gather to it) sums apart as well, and no other step "
                     "on record shows the lone sums alike with others: expected sums in the trace, or a later step, "
                     "would say whether they departed at all")
    elif root.reason is RangeReason.TYPE_COUNTS:
        said = "; ".join(f"{t}: " + ", ".join(f"rank {r} {c}" for r, c in sorted(counts.items()))
                         for t, counts in root.counts_by_type.items())
        text = f"RAS counts each collective type apart ({said}), which places nothing in the communicator's launch order"
        if root.beyond_records:
            who = ranks_words(root.outlier_ranks)
            text += (f"; the records on file agree wherever they overlap, so the collective of another type is where "
                     f"none of {who}'s records reach (a ring that begins after it, a log cut before it)")
        text += f"; {FR_SETTINGS} or {LOG_SETTINGS} would say where"
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


def _unpinned(root: Root) -> str:
    """Why an outlier whose records lack the field that pins its group's departure reaches the range on: its own
    records, of collectives alike in what they hold, place its departure anywhere in it."""
    who = ranks_words(root.unpinned)
    one = len(root.unpinned) == 1
    others = [r for r in root.outlier_ranks if r not in root.unpinned]
    low, high = root.seq_range
    placed = seq_words(low, root.pinned_through if root.pinned_through is not None else low)
    own = f"{'its' if one else 'their'} records"
    text = (f"the records of {ranks_words(others)} place {'its' if len(others) == 1 else 'their'} departure at "
            f"{placed}; {who}, whose records end where those do, departed too, but {own} lack the fields that place "
            f"it and look alike throughout, so {who} may have departed anywhere in {seq_words(low, high)}: the first "
            f"divergent collective is at {placed}, and the range reaches on as far as {who} may have departed"
            ) if others else (f"{who}'s records lack the fields that place the departure and look alike throughout, "
                              f"so {who} may have departed anywhere in {seq_words(low, high)}")
    return text + f"; {who}'s {FR_SETTINGS} would say where"


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
            f"{seq_words(*root.seq_range)}; {either(missing)} would pin it")


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
            f"{their(others)} records against rank {lone}'s: rank {lone} may have departed there itself, so both are "
            f"named, and the first divergent collective is in {seq_words(*root.seq_range)}, where the other records "
            f"place it; {asked} of every rank would tell")
