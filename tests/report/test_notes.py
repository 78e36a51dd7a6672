"""The notes of a diagnosis: every kind the analysis can give has its sentence and its `--json` form."""

from __future__ import annotations

import json

from ncclforensics.align import notes as n
from ncclforensics.report.notes import note_dict, note_words

SAMPLES = [
    n.ConsequenceComm("tp0", (1,), "stopped", ("world",)),
    n.UndecidedComm("tp0", (1, 2), "extra", "world"),
    n.UnseenComm("tp0", (1,), "world"),
    n.MixedElsewhere("tp1", (2, 3), "fp2.log:7", "world"),
    n.HeldBackComm("tp0", (1,), (0,), "world"),
    n.StepSumMixedElsewhere(("tp1",), 3, 0, "fp3.log:1", 189890.0, 48578.0, "world"),
    n.UnplacedResultMixedElsewhere(("tp1",), 3, 0, "layers.2.moe", "fp3.jsonl:8", 192512.0, 212992.0, "world"),
    n.CountedAmongLookalikes((3,), (3,), "fewer", "PyTorch's enqueued counts"),
    n.CountedAmongLookalikes((1, 2), (1,), "more", "RAS counts", (2,), 5),
    n.CountsNameSide((2,), "fewer", "PyTorch's enqueued counts"),
    n.CountsNameSide((2,), "fewer", "PyTorch's enqueued counts", (2, 3)),
    n.CountedBeforeRecords((2,), "more", "PyTorch's enqueued counts", (1, 2)),
    n.CountedBeforeRecords((2,), "fewer", "PyTorch's enqueued counts", (1, 2, 4), (4,)),
    n.CountsTieBeforeRecords((0, 2), "PyTorch's enqueued counts", (0, 1, 2, 3)),
    n.CountedPastRecords((4,), "fewer", "PyTorch's enqueued counts", (4, 6)),
    n.SnapshotSides((0,), (), (0, 1, 2, 3), False),
    n.SnapshotSides((), (4,), (0, 1, 2, 3, 4), False),
    n.SnapshotSides((0,), (), (0, 2), True),
    n.RanPastHang((0,), "0xa", 7, 7, (0, 3)),
    n.DepartedLater((7,), (12, None), "1", "PyTorch's enqueued counts"),
    n.IssuedEarlyInTie((1,), "0xa", 3, "0xb", (0, 2, 3), "nccl.vm.647.log:21"),
    n.IssuedEarlyByCounts((1,), "0", 3, 0, (0, 2, 3), 8, (2, 3)),
    n.SumsAddOutliers((2,), 4, "counts", (2, 3)),
    n.SumsAddOutliers((2, 5), 4, "late_records", (2, 3, 5)),
    n.SumsPartReference((2,), (0, 1), 0, (2, 3)),
    n.SumsPlaceCutRanks((7,), 2, (1, 7), (2, None)),
    n.SwappedTypes("0xa", (2,), (0, 2), (1, 19)),
    n.GuessedTracePlacement(2, "0xa", (3, 9)),
    n.TracesMayBeWider(1, "[ranks=4,5,6,7]", (1, 2)),
    n.GuessedRootComm("[ranks=0,1]", ("[ranks=0,2]",)),
    n.CutRecords("0xa", (1,), "nccl_rank1.log:40"),
    n.CompletionsOnly("fingerprint traces"),
    n.UncomparedFields("0xa", (0, 1), ("redop", "root")),
    n.TracesMixedComms((1,)),
    n.TracesUnplaced((1, 2)),
    n.TracesApart((3,)),
    n.TracesNameNoComm(),
    n.RootOffMembers("0xa", (2,), ()),
    n.RootOffMembers("0xa", (), (3,)),
    n.JoinedByDumps(("nccl.vm.307.log", "nccl.vm.308.log")),
    n.LogRanksAreCommRanks(3, ((4, "node1", 77),)),
    n.LogRanksAreCommRanks(1, ()),
    n.NoInitLines(((0, "node0", 10), (1, "node0", 11)), 6, ((8, 2),)),
    n.RasCommRanks("0xb", ((0, "node0", 10),)),
    n.RasRankUnnamed("0xb", 1, None, ()),
    n.PartialView((0, 3), "0xa"),
    n.ViewLeftOutFingerprints(),
    n.ViewLeftOutRas(),
]


def _kinds(cls: type) -> set[type]:
    return {k for sub in cls.__subclasses__() for k in {sub, *_kinds(sub)}}


def test_every_kind_of_note_has_a_sample_here():
    assert _kinds(n.Note) == {type(note) for note in SAMPLES}


def test_every_note_reads_as_one_sentence_and_as_json():
    for note in SAMPLES:
        text = note_words(note)
        assert text and "\n" not in text and "{" not in text and "None" not in text, (note, text)
        assert json.loads(json.dumps(note_dict(note)))["kind"] == note.kind


def test_a_note_says_its_facts():
    assert note_words(n.UndecidedComm("tp0", (1, 2), "extra", "world")) == (
        "comm tp0's ranks disagree too (ranks 1 and 2 launched more there), and nothing on record says whether comm "
        "world or comm tp0 diverged first; the root names comm world")
    assert note_words(n.SumsPlaceCutRanks((7,), 2, (1, 7), (2, None))) == (
        "the records of rank 7 end before the sides part, and per-step checksums say it read back at step 2 what the "
        "outliers did: it departed too, after its last record, so the root names ranks 1 and 7 over seq 2 or later")
    assert note_dict(n.CutRecords("0xa", (1,), "nccl_rank1.log:40")) == {
        "kind": "cut_records", "comm": "0xa", "ranks": [1], "where": "nccl_rank1.log:40"}
