"""The wedge and the corrupt-and-continue window in sentences: where the group stopped, why, and who waits where."""

from __future__ import annotations

from ..align.diagnosis import Diagnosis
from ..align.ras_only import floors_unordered, uncounted_ranks
from ..align.receipts import CountedLaunches
from ..align.wedge import (COUNT_FLOORS, LAUNCH_FLOORS, LAUNCHES_ONLY, RAS_DIFFERING_TYPES, RAS_UNSETTLED, Wedge,
                           Window)
from ..model import Verdict, WedgeKind
from ..model.phrases import ranks_words, verb_form
from .advice import FR_SETTINGS, LOG_SETTINGS


def wedge_kind_words(kind: WedgeKind) -> str:
    """`no partner`, `count mismatch`, `a cross-communicator deadlock`, `cause unknown`."""
    return {WedgeKind.UNKNOWN: "cause unknown", WedgeKind.CROSS_COMM_DEADLOCK: "cross-communicator deadlock",
            WedgeKind.RANK_GONE: "a rank is gone"}.get(kind, kind.value.replace("_", " "))


def wedge_where(wedge: Wedge) -> str:
    """`at seq 50`, `at or after seq 89`, `at or before seq 12`, `somewhere in seq 5..12`; where nothing bounds it,
    `at or before the first collective not every rank launched (seq 8 or later)` or `at a seq nothing here
    bounds`."""
    low, high = wedge.seq_range
    if high is None and wedge.bounded_by == LAUNCH_FLOORS:
        return f"at or before the first collective not every rank launched (seq {wedge.seq} or later)"
    if high is None:
        return f"at or after seq {low}" if low > 1 else "at a seq nothing here bounds"
    if low == high:
        return f"at seq {low}"
    return f"at or before seq {high}" if low == 1 else f"somewhere in seq {low}..{high}"


def wedge_at(w: Wedge) -> str:
    """What a rank's collective at the wedge's seq is called: the wedge itself only where it is pinned."""
    return "at the wedge" if w.pinned else f"at seq {w.seq}"


def launched_words(w: Wedge, rank: int) -> str:
    """A rank's last launched seq at the wedge: "808 or more" where it is only a floor (a timeout's SeqNum and no
    count says how much the rank enqueued after it; RAS counts of some types only, or read before they settled)."""
    return f"{w.launched[rank]} or more" if rank in w.launched_floors else str(w.launched[rank])


def never_launched(w: Wedge, rank: int) -> str:
    """A rank with no collective on record at the wedge's seq: it never launched it, it launched it by a count
    (RAS counts launches, not which collective), or its records end before it (a file cut short, records of
    completed collectives only)."""
    if rank in w.waiting_past:
        past = w.waiting_past[rank]
        return f"completed seq {w.seq}; waits past it, in seq {past.seq}: {past.describe()}"
    if (w.completed.get(rank) or 0) >= w.seq and rank in w.counted:
        return f"completed seq {w.seq} (by PyTorch's count; no record says which collective)"
    if w.bounded_by == LAUNCH_FLOORS and w.seq_range[1] is None:
        # (every count a floor: who launched more is known, not at which seq; not even that where the counts were
        # read before they settled, nor beside a rank that is gone with no count)
        gone = uncounted_ranks(w)
        gone_said = f"; {ranks_words(gone)} {'is' if len(gone) == 1 else 'are'} gone, count unknown" if gone else ""
        if floors_unordered(w):
            return (f"by its count, a floor of what it launched, read before the counts settled: no order between "
                    f"the ranks is known, no seq{gone_said}")
        others = [r for r in (w.absent_ranks if rank in w.waiting_ranks else w.waiting_ranks) if r in w.launched]
        more = "more" if rank in w.waiting_ranks else "fewer"
        if others:
            return (f"launched {more} than {ranks_words(others)} (by its count, a floor of what it launched; no "
                    f"seq){gone_said}")
        return (f"by its count, a floor of what it launched; no seq{gone_said}" if gone else
                "launched as many as the others (by its count, a floor of what it launched)")
    if w.launched.get(rank, 0) >= w.seq:
        return f"launched seq {w.seq} (by its count; no record says which collective)"
    if rank in w.absent_ranks:
        return f"never launched seq {w.seq}"
    return "records end before it"


def counted_words(w: Wedge, rank: int) -> str | None:
    """Where a rank's launched and completed are PyTorch's counts past its records: `by PyTorch's counts
    (torch_rank0.log:12); its records end at seq 4 (fingerprint_rank0.jsonl:4)`, or `... end at seq 8 completed
    (fr_rank0.pkl#9), seq 10 launched` where the two differ; None where they are the records'."""
    counted = w.counted.get(rank)
    if counted is None or (w.launched.get(rank), w.completed.get(rank)) == (counted.records_launched,
                                                                           counted.records_completed):
        return None
    lines = ", ".join(str(loc) for loc in counted.at)
    # (both ends where they differ: records that launched 10 and completed 8 end at neither alone; the record cited
    # is the last at or before the completed one)
    same = counted.records_completed in (None, counted.records_launched)
    end = counted.records_launched if counted.records_completed is None else counted.records_completed
    records = ("; no record of its own there" if counted.records_at is None else
               f"; its records end at seq {end} ({counted.records_at})" if same else
               f"; its records end at seq {end} completed ({counted.records_at}), seq {counted.records_launched} "
               f"launched")
    return f"by PyTorch's counts ({lines}){records}"


def wedge_seq_words(wedge: Wedge) -> str:
    """`seq 50` where the wedge is pinned, else where it can be (`at or after seq 89`)."""
    return f"seq {wedge.seq}" if wedge.pinned else wedge_where(wedge)


def wedge_range_words(wedge: Wedge) -> str | None:
    """Why the wedge is a range of seqs, and what would pin it; None where it is pinned."""
    low, high = wedge.seq_range
    if wedge.pinned:
        return None
    if high is None and wedge.bounded_by == LAUNCH_FLOORS:
        return launch_floors_words(wedge)
    if high is None:
        past = ("past the last collective a rank is on record as completing (every rank took part in it)"
                if not wedge.completed_alone else
                f"the last collective a rank is on record as completing: every rank took part in it, but "
                f"{ranks_words(wedge.completed_alone)} completed it with an all-gather (or a collective of no recorded "
                f"type), which NCCL completes on the gather side alone where it pairs with an all-reduce of equal "
                f"bytes, so the others may wait in it")
        return (f"Where comm {wedge.comm} stopped is not on record: each rank's records there end with a collective "
                f"that completed (a trace written once a collective completed) or where a file was cut short, and "
                f"what a rank launched after its last record is unknown, so the wedge is {wedge_where(wedge)}, "
                f"{past}; an NCCL log or a Flight Recorder dump of every rank would place it.")
    if wedge.bounded_by == COUNT_FLOORS:
        return (f"Where comm {wedge.comm} stopped is not pinned: PyTorch's desync report gives "
                f"{ranks_words(wedge.absent_ranks)} only as the last collective its watchdog saw start, a floor of "
                f"what it launched, so the wedge is {wedge_where(wedge)}, up to where the other ranks' enqueued "
                f"counts end; {LOG_SETTINGS} or {FR_SETTINGS} would pin it.")
    if wedge.bounded_by != LAUNCHES_ONLY:
        return (f"Where comm {wedge.comm} stopped is not pinned: some rank's records there end before the stop (a "
                f"file cut short, a trace written once a collective completed), so the wedge is {wedge_where(wedge)}, "
                f"up to the first collective that a rank did not launch or was seen in flight in.")
    if wedge.completed_alone:
        return (f"Not every rank's records of comm {wedge.comm} say which collectives completed (NCCL logs count "
                f"launches only): {ranks_words(wedge.completed_alone)} completed seq {low} with an all-gather (or a "
                f"collective of no recorded type), which NCCL completes on the gather side alone where it pairs with "
                f"an all-reduce of equal bytes, so the others may wait in it, and seq {high} is the first collective "
                f"not every rank launched: the wedge is {wedge_where(wedge)}; Flight Recorder dumps of every rank "
                f"(their states) would pin it.")
    return (f"No source records which collectives of comm {wedge.comm} completed (NCCL logs and RAS count "
            f"launches only): seq {high} is the first collective not every rank launched, and one that every "
            f"rank launched before it may be where the group hung, so the wedge is {wedge_where(wedge)}; "
            f"Flight Recorder dumps (their states) would pin it.")


def launch_floors_words(wedge: Wedge) -> str:
    """Why a wedge placed by counts that are all floors is bounded by nothing."""
    why = {RAS_DIFFERING_TYPES: "RAS counts only the collective types whose counts differ (the others add as many "
                                "to every rank)",
           RAS_UNSETTLED: "no two RAS replies show the counts unchanged (a reply may have been read before the "
                          "ranks went on)"}
    reasons = [why[r] for r in wedge.floored_by if r in why] or [
        "PyTorch's desync report gives each rank only as the last collective its watchdog saw start"]
    gone = uncounted_ranks(wedge)
    # (floors read at different moments keep no order: rank 0 at 8 and rank 1 at 7 may be 8 and 9 by now)
    order = ("No order between the ranks is known (one may have gone on past another after its count was read)"
             if floors_unordered(wedge) else "Who launched more holds")
    if gone:
        order = (f"{ranks_words(gone).capitalize()} {'is' if len(gone) == 1 else 'are'} gone (RAS lists "
                 f"{'it' if len(gone) == 1 else 'them'} missing) and what {'it' if len(gone) == 1 else 'they'} "
                 f"launched is unknown; {order[0].lower() + order[1:]} of the others")
    return (f"Where comm {wedge.comm} stopped is not bounded: {'; and '.join(reasons)}, so each rank's count is a "
            f"floor of what it launched. {order}, but the first collective not every rank launched "
            f"is seq {wedge.seq} or later, and one every rank launched before it may be where the group hung; "
            f"{FR_SETTINGS} or {LOG_SETTINGS} would place it.")


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


def window_words(window: Window) -> str:
    """A window with nothing in it, or one known from counts alone."""
    if window.collectives is None:
        return (f"Corrupt-and-continue window in comm {window.comm}: unknown (nothing on record says what paired "
                f"with what).")
    if window.completed_by_some is not None:
        return (f"Corrupt-and-continue window in comm {window.comm}: 0 collectives every rank completed (the group "
                f"wedged at the root); {completed_by_some_words(window)}")
    return (f"Corrupt-and-continue window in comm {window.comm}: 0 collectives (the group wedged at the root, "
            f"nothing completed misaligned).")


def completed_by_some_words(window: Window) -> str:
    """`seq 7 completed on ranks 2 and 5 only; the others wait in it (their watchdogs' lines).`"""
    seq, ranks = window.completed_by_some
    return (f"seq {seq} completed on {ranks_words(list(ranks))} only; the others wait in it (their watchdogs' "
            f"lines).")


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
    text = (f"{ranks_words(held).capitalize()} {verb_form('wait', held)} in comm {wedge.comm} seq {wedge.seq} "
            f"({op.describe()}); {ranks_words(ahead)} completed it and {verb_form('wait', ahead)} past it, {where}.")
    if counts:
        every = len(counts) == len(wedge.waiting_ranks)
        who = ("Both" if len(counts) == 2 else "All") if every else ranks_words(sorted(counts)).capitalize()
        values = sorted(set(counts.values()))
        text += (f" {who} launched {values[0]} by PyTorch's count." if len(values) == 1 else
                 f" By PyTorch's count they launched {', '.join(f'{r}:{n}' for r, n in sorted(counts.items()))}.")
    return (text + f" A timeout's SeqNum says what a rank completed, not how many it launched: nothing here shows "
            f"the ranks disagreeing, only that {ranks_words(held)} {verb_form('lag', held)} or {verb_form('hang', held)} "
            f"in a collective {ranks_words(ahead)} finished (a rank finishes once its own part is done, a "
            f"broadcast's root before its receivers; whom {ranks_words(held)} {verb_form('wait', held)} for, a rank "
            f"with no lines here or the network, is not on record). {FR_SETTINGS}, {LOG_SETTINGS} or the watchdog "
            f"lines of every rank would tell.")
