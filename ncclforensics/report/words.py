"""The answer of `diff` in sentences: the summary, the cause and the caveats. Every renderer (terminal, JSON,
report) takes its words from here and from the modules these sentences are made of (root_words: the root;
ambiguity: why it is a range; wedge_words: the wedge and the window); align/ returns values only."""

from __future__ import annotations

from ..align.coverage import GateCoverage, Jurisdiction
from ..align.diagnosis import Diagnosis, agreeing_hang
from ..align.answers import EXTRA, MISSING, STOPPED
from ..align.gates import decision_tuple
from ..align.order_contradictions import OrderContradiction
from ..align.ras import RasHistory
from ..align.receipts import Finding, RasRanksGone
from ..align.reconcile import CUDA_GRAPH_NOTE
from ..align.solution import Contradiction
from ..model import Verdict
from ..model.kinds import is_p2p_comm
from ..model.phrases import plural, ranks_words, seq_words
from .advice import FR_SETTINGS, LOG_SETTINGS
from .ambiguity import ambiguity
from .notes import note_words
from .receipts import receipt_words
from .root_words import root_sentence, unplaced_words
from .wedge_words import (counted_launches, held_apart_words, shows_wedge, wedge_kind_words, wedge_range_words,
                          wedge_where)


def compared(d: Diagnosis) -> bool:
    """Whether two or more ranks of one communicator had collectives to compare."""
    return any(len(a.ranks) > 1 for a in d.comms.values())


def verdict_label(d: Diagnosis) -> str:
    """The verdict as a heading: `DIVERGED`, `CONSISTENT`, ... and `NOTHING COMPARED` where no two ranks of one
    communicator are on record (nothing could agree or disagree)."""
    if d.verdict is Verdict.CONSISTENT and not compared(d):
        return "NOTHING COMPARED"
    return d.verdict.value.upper()


def finding_says(d: Diagnosis, finding: Finding) -> str:
    """What one receipt says, as shown: on a run without a wedge to show, the last collective is not called one."""
    return receipt_words(finding.fact, wedge_shown=shows_wedge(d))


def death_words(d: Diagnosis) -> str:
    """What shows that the stopped ranks are gone (RAS, peers' errors), with receipts: "died" only where RAS
    considers a process dead; unreachable is not dead."""
    if not d.death:
        return (" Nothing in the evidence says it died; it may be blocked elsewhere (in another communicator or "
                "on the host).")
    shown = "; ".join(f"{receipt_words(f.fact)} ({f.loc})" for f in d.death[:4])
    # A peer's error ("remote process exited or there was a network error", "connection closed by remote peer")
    # does not tell an exit from a network fault.
    died = any(isinstance(f.fact, RasRanksGone) and f.fact.status == "dead" for f in d.death)
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
    if d.diverged_by_results:
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
    if d.order_contradiction is not None:
        parts.append(order_contradiction_words(d.order_contradiction))
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


def order_contradiction_words(c: OrderContradiction) -> str:
    """Two ranks' issue orders that no one program gives, with where each issued the collective it put first."""
    (one, first), (other, second) = c.first, c.second
    then_a = "before" if c.first_rank_issued_second else "and never"
    then_b = "before" if c.second_rank_issued_first else "and never"
    return (f"Rank {c.first_rank} launched comm {one} seq {first} ({c.first_at}) {then_a} comm {other} seq {second}, "
            f"rank {c.second_rank} comm {other} seq {second} ({c.second_at}) {then_b} comm {one} seq {first}: no one "
            f"program issues its collectives in both orders, so a rank departed.")


def wrong_results_words(d: Diagnosis) -> str:
    """Results read back wrong where nothing else shows a divergence: proof of mixed data all the same, said with
    the first of them."""
    rows = d.corrupted_fingerprints
    first = min(rows, key=lambda f: (f.step, f.op or 0, f.rank))
    ranks = sorted({f.rank for f in rows})
    some = "a wrong result" if len(rows) == 1 else f"{len(rows)} wrong results"
    return (f"{ranks_words(ranks).capitalize()} read back {some} ({first.loc}, step {first.step}): collectives "
            f"completed with mixed data.")


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
