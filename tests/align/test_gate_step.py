"""Where the gate journal places the deviating rank's collectives of its step (align/constraints.py `_gate_span`)."""

import polars as pl

from ncclforensics.align.constraints import _gate_span
from ncclforensics.align.gates import GateDisagreement
from ncclforensics.model import GateDecision, Location


def _gate(time: float) -> GateDisagreement:
    decision = GateDecision(Location("gate_journal_rank1.jsonl", 2), rank=1, step=1, decision="pass", time=time)
    other = GateDecision(Location("gate_journal_rank0.jsonl", 2), rank=0, step=1, decision="skip", time=time)
    return GateDisagreement(step=1, decisions={0: other, 1: decision}, passed=[1], skipped=[0], outlier_ranks=[],
                            ceiling_start=None, in_ceiling_window=None, pass_totals={}, proposed_totals={})


def test_a_decision_before_every_record_kept_places_nothing_before_the_first_of_them():
    # Rank 1's Flight Recorder ring wrapped: it keeps seqs 14..20, the first timed within the decision's last digit
    # (written as 100.0: anywhere in 99.95..100.05), the rest after it. No record is known to come before the
    # decision, which may come before seq 13 as well: the ring's start bounds nothing.
    times = [99.99] + [100.0 + 0.01 * s for s in range(1, 7)]
    part = pl.DataFrame({"seq": list(range(14, 21)), "time": times})
    assert _gate_span(part, _gate(100.0), 1) == (1, 21)
    # A record known to come before the decision bounds it.
    part = pl.DataFrame({"seq": list(range(14, 21)), "time": [99.9, *times[1:]]})
    assert _gate_span(part, _gate(100.0), 1) == (15, 21)
