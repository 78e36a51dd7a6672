"""words.py: every kind of range answer names the settings that would pin the root next time."""

from __future__ import annotations

import dataclasses

import pytest
from cli_helpers import real

from ncclforensics import api
from ncclforensics.align.divergence import RangeReason
from ncclforensics.report import words


@pytest.fixture(scope="module")
def root():
    _, d = api.diff_paths([str(real("extra-op-4rank"))])
    return d.root


@pytest.mark.parametrize("reason", list(RangeReason), ids=[r.value for r in RangeReason])
def test_every_range_answer_names_a_setting(root, reason):
    ranged = dataclasses.replace(root, reason=reason, seq_range=(1, 41), compared=())  # signatures alone
    text = words.ambiguity(ranged)
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
    text = words.ambiguity(ranged)
    assert asked in text and "dumps with call stacks" not in text and text.endswith("would pin it")
    assert all(label in text.split(" equally well")[0] for label in compared)


def test_a_pinned_root_has_no_range_words(root):
    assert root.reason is None and words.ambiguity(root) is None
