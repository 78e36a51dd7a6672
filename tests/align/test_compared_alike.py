"""How far records alike with a reference rank's bound a rank's departure (align/compared_alike.py)."""

import polars as pl

from ncclforensics.align.compared_alike import departs_no_sooner

STEP = ["mtp.layers.0", "mtp.layers.1", "model.layers.0.mlp", "lm_head"]


def rows(tags: list[str | None], first: int = 1) -> pl.DataFrame:
    return pl.DataFrame({"seq": list(range(first, first + len(tags))), "tag": tags,
                         "op": ["AllReduce"] * len(tags)})


def test_records_alike_in_tags_that_change_put_a_rank_counted_short_past_them():
    # Seq 1..12 alike, three steps of four tags: a rank one short left out a collective no sooner than seq 12 (its
    # seq 11 would otherwise hold lm_head); one more, added no sooner than seq 12 (its seq 12 would hold seq 11's).
    assert departs_no_sooner(rows(STEP * 3), rows(STEP * 3), -1) == 12
    assert departs_no_sooner(rows(STEP * 3), rows(STEP * 3), 1) == 12
    # Counts alike bound nothing; nor do records alike in everything recorded (lookalikes may hide the shift).
    assert departs_no_sooner(rows(STEP * 3), rows(STEP * 3), 0) is None
    assert departs_no_sooner(rows(["x"] * 12), rows(["x"] * 12), -1) is None
    # Tags alike from seq 5 on bound the departure at seq 5 (a collective left out there shifts lookalikes alone).
    assert departs_no_sooner(rows(STEP + ["x"] * 8), rows(STEP + ["x"] * 8), -1) == 5


def test_records_bound_only_where_they_compare_alike():
    # The rank's records end at seq 8 where the reference's hold seq 1..15: seq 8 is the last compared.
    assert departs_no_sooner(rows(STEP * 2), rows(STEP * 4 + STEP[:3]), -1) == 9
    # Records that part at seq 3 compare nothing past it.
    assert departs_no_sooner(rows(["a", "b", "c", "d"]), rows(["a", "b", "x", "d"]), -1) == 3
    # Fields one side lacks compare nothing.
    assert departs_no_sooner(rows([None] * 4), rows(["a", "b", "c", "d"]), -1) is None
