"""Fingerprint traces not written as far as their ranks got: a peer's result of a later collective says the rank
took part in it, and ranks that got through a step part past its end from those whose traces never wrote it."""

import hashlib
import json

from tests.cli_helpers import diff_json

TAGS = ("mlp", "mtp", "moe")  # one step's collectives of the one 4-rank comm


def _digest_traces(tmp_path, steps_of: dict[int, list[tuple[str, ...]]]) -> dict:
    """Write each rank's trace (rank -> the tags of each step it read back) with digests, one per physical
    collective (the comm's seq); the answer."""
    for rank, steps in steps_of.items():
        lines, seq = [], 0
        for step, tags in enumerate(steps):
            for op, tag in enumerate(tags):
                seq += 1
                digest = hashlib.blake2b(f"tp:{seq}".encode(), digest_size=8).hexdigest()
                lines.append(json.dumps({"step": step, "op": op, "rank": rank, "tag": tag, "kind": "AllReduce",
                                         "numel": 1024, "sum": 100.0 * seq, "digest": digest}))
        (tmp_path / f"fingerprint_rank{rank}.jsonl").write_text("\n".join(lines) + "\n")
    return diff_json(str(tmp_path))[1]


def test_peers_that_completed_a_step_with_a_rank_and_never_wrote_it_part_from_it_past_its_end(tmp_path):
    """Ranks 0-2 write their traces once a step and hang in step 2, so they hold steps 0 and 1 (seq 1-6); rank 3 left
    `moe` out of step 2 and got through it: its trace holds step 2's `mlp` and `mtp`, seq 7 and 8. Its results of
    those need the peers' part in them: the peers' traces end where they were written, not where they stopped, so
    rank 3's two records are no extra collectives. The peers never got through step 2, rank 3 did with nothing of
    it past seq 8: they part at seq 9, and what the peers launched at seq 7 and 8 is on no record."""
    whole = [TAGS, TAGS]
    d = _digest_traces(tmp_path, {0: whole, 1: whole, 2: whole, 3: [*whole, TAGS[:2]]})
    root = d["root"]
    assert (root["comm"], root["seq_range"], root["outlier_ranks"]) == ("[ranks=0,1,2,3]", [7, 9], [3])
    assert root["kind"] == "missing" and root["majority"]
    assert any("never got through it" in c for c in d["caveats"])


def test_traces_that_end_alike_past_a_step_part_nowhere(tmp_path):
    """Every rank wrote the same steps: nothing was left unwritten, and nothing parts them."""
    whole = [TAGS, TAGS]
    assert _digest_traces(tmp_path, {r: whole for r in range(4)})["root"] is None


def test_lengths_of_unwritten_traces_that_no_step_parts_name_no_one_and_pin_nothing(tmp_path):
    """Rank 2's trace holds step 2's `mlp` and `mtp` (seq 7 and 8), rank 3's only `mlp`, ranks 0 and 1's nothing of
    it. Rank 2's result of seq 8 needs every rank's part: the others' traces were not written as far as they got,
    and no step's end parts them (rank 3 wrote some of step 2). Rank 2's longer trace is no extra collective: every
    rank is named, from seq 7 on, nothing bounding it above."""
    whole = [TAGS, TAGS]
    d = _digest_traces(tmp_path, {0: whole, 1: whole, 2: [*whole, TAGS[:2]], 3: [*whole, TAGS[:1]]})
    root = d["root"]
    assert root["seq_range"] == [7, None] and not root["majority"]
    assert root["outlier_ranks"] == root["reference_ranks"] == [0, 1, 2, 3]
    assert "not written as far as those ranks got" in root["ambiguity"]
