"""align/diagnosis.py `_members_only`: a root names only members of its comm, and no rank on both sides."""

from __future__ import annotations

from ncclforensics.align.diagnosis import _members_only
from ncclforensics.align.answers import Root
from ncclforensics.align.notes import RootOffMembers
from ncclforensics.align.streams import Streams


def _root(outliers: list[int], reference: list[int], majority: bool = True) -> Root:
    return Root(comm="0xtp", seq=1, seq_range=(1, 14), outlier_ranks=outliers, reference_ranks=reference,
                kind="extra", size=1, pinned_by="signatures", reason=None, majority=majority)


def test_a_root_naming_ranks_its_comm_s_configuration_leaves_out_is_no_answer():
    """The dumps list 0xtp's group as (0, 1): a root there naming ranks 2 and 3 rests on files tied to it
    wrongly; so does one with a majority that puts rank 0 on both sides."""
    streams = Streams(members={"0xtp": [0, 1]}, expected_members={"0xtp": [0, 1]})
    assert _members_only(_root([2, 3], [3], majority=False), streams) == (None, [RootOffMembers("0xtp", (2, 3), ())])
    assert _members_only(_root([0], [0, 1]), streams) == (None, [RootOffMembers("0xtp", (), (0,))])
    # (with no majority both sides are named, the other side among them; nothing lists an unknown comm's members)
    assert _members_only(_root([0, 1], [1], majority=False), streams)[0] is not None
    assert _members_only(_root([2], [3]), Streams(members={"0xtp": [2, 3]}))[0] is not None
