"""The notes of a diagnosis (align/notes.py) in sentences: one sentence a note, the same for every renderer."""

from __future__ import annotations

from dataclasses import asdict

from ..align import notes as n
from ..model.phrases import are, ranks_words, seq_words, them, their, they, verb_form

_DID = {"extra": "launched more", "missing": "launched fewer", "stopped": "stopped"}
FIELD_WORDS = {"op": "collective type", "count": "count", "dtype": "data type", "redop": "reduction",
               "root": "root rank", "stack": "call stack", "tag": "tag", "step": "step"}
_BASIS = {"counts": "the counts", "late_records": "the records, which begin after the ranks already disagree,",
          "records": "the records, which show no such departure,"}


def note_dict(note: n.Note) -> dict:
    """A note for `--json`: its kind and its fields (tuples as lists)."""
    return {"kind": note.kind, **{k: _plain(v) for k, v in asdict(note).items()}}


def _plain(value):
    return [_plain(v) for v in value] if isinstance(value, tuple) else value


def note_words(note: n.Note) -> str:
    """The sentence that says `note`."""
    match note:
        case n.ConsequenceComm(comm, ranks, kind_there, causes):
            return (f"comm {comm}'s ranks disagree too ({_did(ranks, kind_there)} there); read as a consequence of "
                    f"comm {' and '.join(causes)}: a rank stuck in one communicator stops launching in the others "
                    f"it belongs to")
        case n.UndecidedComm(comm, ranks, kind_there, root_comm):
            return (f"comm {comm}'s ranks disagree too ({_did(ranks, kind_there)} there), and nothing on record says "
                    f"whether comm {root_comm} or comm {comm} diverged first; the root names comm {root_comm}")
        case n.UnseenComm(comm, ranks, root_comm):
            return (f"{ranks_words(ranks)} also runs in comm {comm}, where no other rank's records are whole to "
                    f"compare with: a divergence there would show in comm {root_comm} just so")
        case n.MixedElsewhere(comm, ranks, where, root_comm):
            return (f"{ranks_words(ranks)} read back wrong results in comm {comm} ({where}): its collectives paired "
                    f"with others on some rank, so comm {comm} diverged too; a rank stuck there stops launching in "
                    f"comm {root_comm} just so, and nothing on record says which diverged first")
        case n.HeldBackComm(comm, ranks, ahead, root_comm):
            one = len(ahead) == 1
            return (f"{ranks_words(ahead)} may hold {ranks_words(ranks)} back in comm {comm}, which they share: "
                    f"{'it' if one else 'they'} may have left collectives of comm {comm} out (a skipped drafter pass, "
                    f"say) and issued {'its' if one else 'their'} next collective in comm {root_comm} early, which "
                    f"reads there as an extra one; the departure may be in comm {comm}, and nothing on record says "
                    f"which")
        case n.StepSumMixedElsewhere(comms, rank, step, where, got, expected, root_comm):
            either = " or ".join(f"comm {c}" for c in comms)
            return (f"rank {rank}'s checksum of step {step} is wrong ({where}: {got:g} where {expected:g} was "
                    f"expected): it read back results mixed in one of its communicators, so {either} may have "
                    f"diverged too; a rank stuck there stops launching in comm {root_comm} just so, and nothing on "
                    f"record says which diverged first")
        case n.UnplacedResultMixedElsewhere(comms, rank, step, tag, where, got, expected, root_comm):
            either = " or ".join(f"comm {c}" for c in comms)
            what = f"the collective tagged {tag}" if tag else "a collective"
            return (f"rank {rank} read back a wrong result of {what} in step {step} ({where}: {got:g} where "
                    f"{expected:g} was expected), past the end of its launch records, so in none of its "
                    f"communicators on record: it read back results mixed in one of them, so {either} may have "
                    f"diverged too; a rank stuck there stops launching in comm {root_comm} just so, and nothing on "
                    f"record says which diverged first")
        case n.CountedAmongLookalikes(outliers, counted, launched, counted_by, (), _):
            return (f"the records of every rank look alike, and {_counted(outliers, launched, counted_by)}: the "
                    f"root names {ranks_words(outliers)}, the fewest departing")
        case n.CountedAmongLookalikes(outliers, counted, launched, counted_by, parted, parted_seq):
            return (f"no record says which side departed, yet {_counted(counted, launched, counted_by)}, and "
                    f"{ranks_words(parted)}'s records part from the rest of them (seq {parted_seq}): the root names "
                    f"{ranks_words(outliers)}, the fewest departing")
        case n.CountsNameSide(ranks, launched, counted_by, side) if set(side) > set(ranks):
            return (f"{_counted(ranks, launched, counted_by)}: of the two sides the records part, {their(ranks)} "
                    f"side departed: {ranks_words(side)}")
        case n.CountsNameSide(ranks, launched, counted_by):
            return (f"{_counted(ranks, launched, counted_by)}: of the two sides the records part, {they(ranks)} "
                    f"departed")
        case n.CountedBeforeRecords(added, launched, counted_by, outliers, either):
            return (f"{_counted(added, launched, counted_by)}, before the records begin: the root names "
                    f"{ranks_words(outliers)}"
                    + (f" ({ranks_words(either)}, which no record compares, may be on either side of the records' "
                       f"split, which no majority decides)" if either else ""))
        case n.CountsTieBeforeRecords(either, counted_by, outliers):
            return (f"{ranks_words(either)}, which no record compares, {are(either)} parted from others by "
                    f"{counted_by} with no majority, as the records part theirs: each is on a side of the tie, and "
                    f"the root names {ranks_words(outliers)}, both sides")
        case n.SnapshotSides(sided, either, outliers, majority):
            said = [f"a peer's desync report puts {ranks_words(sided)}, which left no file, on the outliers' side"
                    ] if sided else []
            said += [f"nothing on record sides {ranks_words(either)}, which left no file"] if either else []
            return ("; ".join(said) + (f": the root names {ranks_words(outliers)}" if majority else
                                       f": the outliers may be half the ranks, and the root names "
                                       f"{ranks_words(outliers)}, no majority"))
        case n.CountedPastRecords(added, launched, counted_by, outliers):
            return (f"{_counted(added, launched, counted_by)}, which go on past the records, while {their(added)} "
                    f"records end where the others' do: {_departed_too(added, outliers)}")
        case n.RanPastHang(added, comm, hang_seq, stop_seq, outliers):
            return (f"{ranks_words(added)} launched past seq {stop_seq} in comm {comm}, where most ranks stop, "
                    f"though seq {hang_seq} hangs on every rank (a pairing NCCL never completes) and the program "
                    f"stops every rank's launches at one place behind it: "
                    f"{_departed_too(added, outliers, f', at or before seq {stop_seq + 1}')}")
        case n.IssuedEarlyByCounts(ranks, comm, seq, place, others, floor, later):
            return (f"PyTorch's counts say that {ranks_words(ranks)} {verb_form('wait', ranks)} in seq {seq} of comm {comm}, "
                    f"the first collective {they(ranks)} never completed, issued right after {place} of "
                    f"{their(ranks)} other groups' collectives, while {ranks_words(others)} issue it after {floor} or "
                    f"more (a rank's GPU runs its collectives in issue order): {they(ranks)} issued it early, an "
                    f"extra collective of {their(ranks)} own at seq {seq} or before (or {they(ranks)} left "
                    f"collectives of {their(ranks)} other groups out before it)"
                    + (f"; {ranks_words(later)}, whose records part there with no majority, part later, past where "
                       f"{ranks_words(ranks)} issued {their(ranks)} own: one side of {them(later)} departed too"
                       if later else ""))
        case n.DepartedLater(ranks, seq_range, comm, shown_by):
            return (f"{ranks_words(ranks)} departed too in comm {comm} (by {shown_by}), at {_span(seq_range)}, "
                    f"after the departure the root names: the root leaves {them(ranks)} out, though "
                    f"{they(ranks)} did not run the program either")
        case n.IssuedEarlyInTie(ranks, comm, seq, elsewhere, peers, where):
            return (f"no majority parts the two sides in comm {comm}, but {ranks_words(ranks)} issued seq {seq} there "
                    f"({where}) before {their(ranks)} peers of comm {elsewhere}, {ranks_words(peers)}, whose whole "
                    f"records of comm {comm} end at seq {seq - 1}, went on there without it: {they(ranks)} issued it "
                    f"early, a collective of {their(ranks)} own, so the root names {ranks_words(ranks)}")
        case n.SumsAddOutliers(added, step, basis, outliers):
            return (f"{ranks_words(added)} read back per-step checksums that part from the others' at step {step}: "
                    f"{they(added)} departed too, and {_BASIS[basis]} do not say whose departure came first, so "
                    f"the root names {ranks_words(outliers)}")
        case n.SumsPartReference(added, largest, step, outliers):
            return (f"{ranks_words(added)} launched as many collectives as {ranks_words(largest)} and read back "
                    f"per-step checksums that part from theirs at step {step}: {they(added)} departed too, and the "
                    f"counts do not say whose departure came first, so the root names {ranks_words(outliers)}")
        case n.SumsPlaceCutRanks(joined, step, outliers, seq_range):
            return (f"the records of {ranks_words(joined)} end before the sides part, and per-step checksums say "
                    f"{they(joined)} read back at step {step} what the outliers did: {they(joined)} departed too, "
                    f"after {their(joined)} last record, so the root names {ranks_words(outliers)} over {_span(seq_range)}")
        case n.SwappedTypes(comm, added, outliers, seq_range):
            return (f"RAS counts give {ranks_words(added)} as many collectives as most ranks of comm {comm}, of other "
                    f"types: {they(added)} issued a collective of another type somewhere no record shows, so the "
                    f"root names {ranks_words(outliers)} over {seq_words(*seq_range)}")
        case n.GuessedTracePlacement(moved, comm, seq_range):
            many = moved > 1
            return (f"{moved} record{'s' if many else ''} of the fingerprint traces before the root "
                    f"{'were' if many else 'was'} put in a communicator by a guess (no tag, and no result shared "
                    f"within a communicator the trace names, places {'them' if many else 'it'}): the seqs of comm "
                    f"{comm} may be off by as many, so the root is in {seq_words(*seq_range)}")
        case n.GuessedRootComm(comm, others):
            return (f"The root rests on a record of the fingerprint traces that only its neighbours put in comm {comm} "
                    f"(no tag, and no result shared within a communicator the trace names, places it); its rank's trace "
                    f"holds records of comm {', '.join(others)} too, so the departure may be there as well")
        case n.TracesMayBeWider(records, comm, seq_range):
            many = records > 1
            return (f"{records} record{'s' if many else ''} of the fingerprint traces before the root "
                    f"{'are results' if many else 'is a result'} only the traced ranks of comm {comm} read back, "
                    f"and ranks of the job left no trace: {'each' if many else 'it'} may be of a wider communicator "
                    f"that holds them too, so the seqs of comm {comm} may be too high by as many, and the root is "
                    f"in {seq_words(*seq_range)}")
        case n.CutRecords(comm, ranks, where):
            return (f"{ranks_words(ranks)}'s records in comm {comm} end where a file was cut short ({where}): what "
                    f"came after is unknown")
        case n.CompletionsOnly(formats):
            return (f"Only {formats} describe the collectives, and they record a collective once it completed: a "
                    "collective every rank launched and none completed (a hang), or a rank that died in it, leaves "
                    "no record, so the ranks' agreement up to where their records end says nothing of what came "
                    "after")
        case n.UncomparedFields(comm, ranks, fields):
            many = len(fields) > 1
            return (f"In comm {comm}, {ranks_words(ranks)}'s evidence carries no "
                    f"{' or '.join(FIELD_WORDS[f] for f in fields)}: {'those were' if many else 'that was'} compared "
                    f"only between ranks that recorded {'them' if many else 'it'}")
        case n.TracesMixedComms(ranks):
            return (f"the fingerprint traces of {ranks_words(ranks)} hold collectives of several communicators and "
                    f"no digests, so which is which cannot be told: left out of the comparison")
        case n.TracesUnplaced(ranks):
            return (f"the fingerprint traces of {ranks_words(ranks)} share no result with another rank's and their "
                    f"communicator is not known: left out of the comparison")
        case n.TracesApart(ranks):
            return (f"the fingerprint traces of {ranks_words(ranks)} hold results no other trace shares, of a "
                    f"communicator whose other members left no trace and are not known: those left out of the "
                    f"comparison")
        case n.TracesNameNoComm():
            return ("fingerprint traces name no communicator: one named [ranks=...] is the ranks that read back the "
                    "same results")
        case n.RootOffMembers(comm, strays, both):
            said = " and ".join(([f"{ranks_words(strays)}, no member of it"] if strays else [])
                                + ([f"{ranks_words(both)} on both sides"] if both else []))
            return (f"the records part in comm {comm}, but the root found there names {said}: the files tie ranks "
                    f"or process groups to it in ways that do not agree, so no root is given")
        case n.JoinedByDumps(files):
            shown = ", ".join(files[:4]) + (f" and {len(files) - 4} more" if len(files) > 4 else "")
            return (f"the NCCL logs {shown} share no communicator with the other logs: they are read as this job's "
                    f"because the Flight Recorder dumps' process groups place each of their processes at a rank of "
                    f"it, no two at one; logs of another run of the same program would be placed alike, and no "
                    f"communicator hash here tells the two apart")
        case n.LogRanksAreCommRanks(given, stand_ins):
            text = (f"No communicator in the NCCL logs holds every process, so their ranks are comm ranks, not the "
                    f"job's: {'1 process was' if given == 1 else f'{given} processes were'} given the job's rank through the Flight "
                    f"Recorder dumps")
            if stand_ins:
                named = ", ".join(f"rank {r} = {host}:{pid}" for r, host, pid in stand_ins[:8])
                text += (f"; the others are stand-ins numbered by host, then pid ({named}"
                         f"{', ...' if len(stand_ins) > 8 else ''})")
            return text + "."
        case n.NoInitLines(stand_ins, more, partial):
            named = ", ".join(f"rank {r} = {host}:{pid}" for r, host, pid in stand_ins)
            text = (f"No INIT lines: the ranks and communicator hashes are unknown. COLL lines were grouped into one "
                    f"communicator per size ([nranks=N]) and placed by their opCount, and the processes were "
                    f"numbered by host, then pid ({named}{f' and {more} more' if more else ''}): stand-ins, not "
                    f"necessarily the job's ranks.")
            if partial:
                sizes = "; ".join(f"[nranks={size}]: {seen} on record" for size, seen in partial)
                text += f" Not every rank has lines here ({sizes}): the ranks without any may be where the others wait."
            return text
        case n.RasCommRanks(comm, processes):
            who = ", ".join(f"rank {r} is process {pid} on {host}" for r, host, pid in processes)
            return (f"comm {comm}'s ranks are named by their rank in it, not the job's: no record gives their global "
                    f"ranks" + (f" ({who})" if who else ""))
        case n.RasRankUnnamed(comm, rank, process, counts):
            return (f"comm {comm}'s rank {rank}" + (f" (process {process[1]} on {process[0]})" if process else "")
                    + (" launched " + ", ".join(f"{t} {c}" for t, c in counts) if counts else "")
                    + "; no record gives its global rank, so the ranks named leave it out")
        case n.PartialView(ranks, comm):
            return (f"This analysis looks at {_view(ranks, comm)} only (--rank/--comm); the rest of the job's "
                    f"evidence was left out, and with it what ties this part to the rest (fingerprints numbered "
                    f"across communicators, the other ranks' gate decisions): the root may be placed less precisely "
                    f"than in the whole job's analysis.")
        case n.ViewLeftOutFingerprints():
            return ("Per-collective fingerprints were left out: they number a rank's collectives across all its "
                    "communicators, which --comm does not keep.")
        case n.ViewLeftOutRas():
            return ("RAS replies were left out: they count collectives by communicator rank, which --rank does not "
                    "select.")
    raise TypeError(f"no words for {type(note).__name__}")  # a new note needs its sentence here


def _did(ranks, kind: str) -> str:
    return f"{ranks_words(ranks)} {_DID.get(kind, 'launched other collectives')}"


def _counted(ranks, launched: str, counted_by: str) -> str:
    """`ranks 1 and 2 launched fewer collectives than the others by RAS counts`."""
    return f"{ranks_words(ranks)} launched {launched} collectives than the others by {counted_by}"


def _departed_too(added, outliers, where: str = "") -> str:
    """The clause of a note on ranks whose records no other rank's compare, added beside the root's outliers."""
    return (f"{they(added)} departed too{where}, where no record compares {them(added)}, and nothing says whose "
            f"departure came first, so the root names {ranks_words(outliers)}")


def _span(seq_range: tuple[int, int | None]) -> str:
    low, high = seq_range
    return f"seq {low} or later" if high is None else f"seq {low}..{high}"


def _view(ranks: tuple[int, ...] | None, comm: str | None) -> str:
    parts = []
    if ranks is not None:
        parts.append(("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, sorted(ranks))))
    if comm is not None:
        parts.append(f"comm {comm}")
    return " in ".join(parts) if parts else "the whole job"
