"""ambiguity.py and words.py: every kind of range answer names the settings that would pin the root next time."""

from __future__ import annotations

import dataclasses

import pytest
from cli_helpers import real

from ncclforensics import api
from ncclforensics.align.answers import OpAt, RangeReason, Root
from ncclforensics.model import Location
from ncclforensics.report import words
from ncclforensics.report import ambiguity, root_words


@pytest.fixture(scope="module")
def root():
    _, d = api.diff_paths([str(real("extra-op-4rank"))])
    return d.root


@pytest.mark.parametrize("reason", list(RangeReason), ids=[r.value for r in RangeReason])
def test_every_range_answer_names_a_setting(root, reason):
    ranged = dataclasses.replace(root, reason=reason, seq_range=(1, 41), compared=())  # signatures alone
    text = ambiguity.ambiguity(ranged)
    assert text and any(setting in text for setting in ("NCCL_DEBUG=INFO", "TORCH_NCCL_TRACE_BUFFER_SIZE")), text


@pytest.mark.parametrize("compared, asked", [
    (("call sites",), "fingerprint traces with tags"),
    (("call sites", "tags"), "gate journal with steps"),
    (("call sites", "tags", "steps"), "expected sums"),
])
def test_a_lookalike_range_asks_only_for_evidence_not_given(root, compared, asked):
    """Call stacks that were compared and repeat (a loop) would not pin it next time either: the words ask for
    what was not given, and name what was."""
    ranged = dataclasses.replace(root, reason=RangeReason.LOOKALIKE, seq_range=(1, 41), compared=compared)
    text = ambiguity.ambiguity(ranged)
    assert asked in text and "dumps with call stacks" not in text and text.endswith("would pin it")
    assert all(label in text.split(" equally well")[0] for label in compared)


def test_a_pinned_root_has_no_range_words(root):
    assert root.reason is None and ambiguity.ambiguity(root) is None


def test_a_root_that_leaves_every_kind_open_names_a_departure_not_one_kind(root):
    """A rank added by checksums departed somewhere its records do not show: by a collective left out, added or
    another one. The sentence names a departure and every kind, never one kind for every rank."""
    one = dataclasses.replace(root, outlier_ranks=[1], reference_ranks=[0, 2, 3], kind="different", size=1,
                              kinds=("different", "extra"), seq_range=(1, 2), majority=True)
    assert "launched a different collective" in root_words.root_sentence(one)
    text = root_words.root_sentence(dataclasses.replace(one, outlier_ranks=[1, 2], reference_ranks=[0, 3, 4],
                                                        kinds=("different", "extra", "missing")))
    assert text.startswith("Ranks 1 and 2 depart from the others in comm ")
    assert "different collectives at one seq, or 1 extra collective, or 1 missing collective" in text
    assert "launched a different collective" not in text
    one_rank = root_words.root_sentence(dataclasses.replace(one, kinds=("different", "extra", "missing")))
    assert one_rank.startswith("Rank 1 departs from the others in comm ")


def test_checksum_outliers_of_ranks_the_checksums_alone_group_leave_their_communicators_open():
    """Per-step checksums name ranks, not a comm: where they name several outliers in a group of ranks no other
    evidence names, which of the ranks' communicators each departed in is on no record either."""
    from ncclforensics.align.step_sums import step_sums_root
    from ncclforensics.model import FingerprintRow, Location

    def per_step(rank: int, got: float, want: float) -> FingerprintRow:
        return FingerprintRow(Location(f"fp{rank}", 1), rank, 0, None, sum=got, expected_sum=want)
    rows = [per_step(0, 69.0, 86.0), per_step(4, 148.0, 224.0)]
    rows += [per_step(rank, 27.0 + rank, 22.0 + rank) for rank in (1, 2, 3)]
    rows += [per_step(rank, 84.0 + rank, 58.0 + rank) for rank in (5, 6, 7)]
    root, _ = step_sums_root(rows, {})
    assert "which collective, and in which of their communicators, is on no record" in root_words.root_sentence(root)
    named = dataclasses.replace(root, comm="0xabc")
    assert "which collective is on no record" in root_words.root_sentence(named)


def test_the_cause_says_whether_gate_journals_were_given_where_they_name_no_disagreement():
    # extra-op-4rank's journals part at step 5; with no disagreement left, what the cause says of them depends on
    # whether any were given.
    _, d = api.diff_paths([str(real("extra-op-4rank"))])
    agreeing = dataclasses.replace(d, gate=None)
    assert "The gate journals of ranks 0, 1, 2 and 3 agree at every step" in words.cause(agreeing)
    assert "Only rank 2 journaled its gate" in words.cause(dataclasses.replace(agreeing, journaled_ranks=[2]))
    assert "No gate journal was given" in words.cause(dataclasses.replace(agreeing, journaled_ranks=[]))


def test_a_range_from_a_richer_field_to_the_signatures_says_where_each_parts_the_ranks(root):
    """Call stacks that part the ranks at seq 1, signatures only at seq 6: the words name both seqs and why both
    fit, and do not say the stacks repeat (they part)."""
    ranged = dataclasses.replace(root, reason=RangeReason.PARTED_EARLIER, seq_range=(1, 6), compared=("call sites",),
                                 parted_earlier=("call sites", 1, 6))
    text = ambiguity.ambiguity(ranged)
    assert "the call stacks part" in text and "at seq 1" in text and "only at seq 6" in text
    assert "repeat" not in text and "seq 1..6" in text and "gate journal with steps" in text


def test_a_rank_the_root_puts_on_neither_side_is_not_called_the_reference(root):
    """Ranks in the root's table that it names on neither side (departing later, records ending before the sides
    part, candidates) are shown as what they are, not as reference ranks."""
    ranks = sorted(root.ops)
    outlier, reference, unplaced, candidate, other = ranks[0], ranks[1], ranks[2], ranks[3], 99
    named = dataclasses.replace(root, outlier_ranks=[outlier], reference_ranks=[reference], unplaced_ranks=[unplaced],
                                outlier_candidates={candidate: ("0xabc",)})
    assert [root_words.role(named, r) for r in (outlier, reference, unplaced, candidate, other)] == [
        "outlier", "reference", "unplaced", "candidate", "neither side"]


def test_a_lone_unchecked_sum_in_the_only_step_is_named_and_said_to_maybe_part_by_design(tmp_path):
    # Seed 840255's traces: rank 0 sums alone beside ranks 1-3 and 4-7, each alike, in step 0 alone.
    sums = [2173076.0, 2439316.0, 2439316.0, 2439316.0] + [6192276.0] * 4
    for rank, total in enumerate(sums):
        (tmp_path / f"fingerprint_rank{rank}.log").write_text(f"step=0 rank={rank} checksum={total:.6f}\n")
    _, d = api.diff_paths([str(tmp_path)])
    assert d.verdict.value == "inconclusive" and d.root.outlier_ranks == [0] and d.root.majority
    text = root_words.root_sentence(d.root)
    assert text.startswith("Rank 0 sums alone") and "by design" in text and "at step 0" in text
    assert "by design" in ambiguity.ambiguity(d.root)


def test_expected_sums_apart_where_every_sum_reads_back_right_and_no_comm_is_known_may_part_by_design(tmp_path):
    # Seed 995899's shape: ranks 0-4 expect alike at step 0; at step 1 rank 4 expects another sum, every rank reading
    # its own back right, and nothing gives their communicators: rank 4 launched other collectives, or serves other
    # data by design.
    import json

    for rank in range(5):
        steps = [(1188495360.0, 1188495360.0), (1319568384.0, 1319567360.0) if rank < 4 else (1302471696.0,
                                                                                             1302471680.0)]
        (tmp_path / f"fingerprint_rank{rank}.jsonl").write_text("".join(
            json.dumps({"step": step, "rank": rank, "sum": got, "expected_sum": want}) + "\n"
            for step, (got, want) in enumerate(steps)))
    _, d = api.diff_paths([str(tmp_path)])
    assert d.verdict.value == "inconclusive" and d.root.outlier_ranks == [4] and d.root.majority
    text = root_words.root_sentence(d.root)
    assert text.startswith("Rank 4 expected other sums at step 1") and "by design" in text
    assert "would say whether they share them" in ambiguity.ambiguity(d.root)


def test_a_range_an_outlier_known_only_by_its_count_leaves_names_it_and_the_outliers_whose_records_bound_it(root):
    """Rank 3 left no records, and its count puts it one short beside rank 5, whose records place its own skip at
    seq 3: the words say the count places rank 3 anywhere up to there, not that the collectives look alike."""
    ranged = dataclasses.replace(root, reason=RangeReason.COUNTED_ONLY, seq_range=(1, 3), outlier_ranks=[3, 5],
                                 counted_only=(3,))
    text = ambiguity.ambiguity(ranged)
    assert text.startswith("rank 3 left no records here") and "anywhere in seq 1..3" in text
    assert "no later than where the records of rank 5 place its own departure" in text and "look alike" not in text


def test_a_range_an_outlier_without_the_field_that_pins_its_group_leaves_says_where_the_others_depart(root):
    """Rank 7's call stacks place its skip at seq 1; rank 1, one short too, kept an NCCL log of lookalikes only:
    the words give the root at seq 1 and say the range reaches on for rank 1, not that the collectives look alike
    to everyone."""
    ranged = dataclasses.replace(root, reason=RangeReason.UNPINNED, seq_range=(1, 11), outlier_ranks=[1, 7],
                                 unpinned=(1,), pinned_through=1)
    text = ambiguity.ambiguity(ranged)
    assert text.startswith("the records of rank 7 place its departure at seq 1; rank 1, whose records end")
    assert "rank 1 may have departed anywhere in seq 1..11" in text and "first divergent collective is at seq 1" in text


def test_where_stacks_part_needs_one_reference_stack_and_names_the_rank_that_holds_it():
    def op(rank: int, site: str) -> OpAt:
        return OpAt(rank=rank, seq=3, op="AllReduce", count=8, dtype=None, redop=None, root=None, state="started",
                    callsite=None, step=None, loc=Location(f"torch_rank{rank}.log", 2), stack=f"a.py:1 < {site}")

    # Rank 0 has no record there: the reference stack is rank 2's, and it is named so.
    root = Root(comm="0", seq=3, seq_range=(3, 3), outlier_ranks=[1], reference_ranks=[0, 2, 3], kind="different",
                size=1, pinned_by="signatures", reason=None, ops={1: op(1, "f.py:102"), 2: op(2, "f.py:90"),
                                                                  3: op(3, "f.py:90")})
    assert root_words.where_stacks_part(root) == {"1": "f.py:102", "2": "f.py:90"}
    # Reference ranks whose stacks part among themselves give no one stack to part from.
    parted = dataclasses.replace(root, ops={**root.ops, 3: op(3, "f.py:102")})
    assert root_words.where_stacks_part(parted) is None


def test_ranks_that_may_have_run_early_elsewhere_are_named_with_their_own_communicators(root):
    """Ranks 0 and 2 left a collective out here, or ran extra ones elsewhere and stopped: each only in a
    communicator it is a member of (rank 0 of comm A is no member of rank 2's comm B)."""
    both = dataclasses.replace(root, outlier_ranks=[0, 2], early_in={"0xb": (2,)})
    text = root_words.early_elsewhere_words(both)
    assert text.startswith(" Or rank 2 in comm 0xb ran extra collectives and stopped there: its records")
    apart = dataclasses.replace(both, early_in={"0xa": (0,), "0xb": (2,)})
    assert root_words.early_elsewhere_words(apart).startswith(
        " Or rank 0 in comm 0xa or rank 2 in comm 0xb ran extra collectives and stopped there: their records")
