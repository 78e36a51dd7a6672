"""Watchdog lines alone, of ranks that time out at different SeqNums: a hang or a lag, never a divergence by
itself. A timeout at SeqNum s says the rank completed everything before s and was still in s; PyTorch enqueues
asynchronously, so it says nothing of how many collectives the rank launched."""

from __future__ import annotations

from cli_helpers import diff_json, run_cli

# What PyTorch 2.4+ prints, one rank's lines after another's (`[rankN]:` is the global rank).
TIMEOUT = ("[rank{rank}]:[E1104 09:12:03.4172201{rank:02d} ProcessGroupNCCL.cpp:632] [Rank {rank}] Watchdog caught "
           "collective operation timeout: WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn={numel}, NumelOut={numel}, "
           "Timeout(ms)=600000) ran for 600041 milliseconds before timing out.")
STATUS = ("[rank{rank}]:[E1104 09:12:03.4175609{rank:02d} ProcessGroupNCCL.cpp:2271] [PG ID {pg} PG GUID {pg} Rank "
          "{rank}]  failure detected by watchdog at work sequence id: {seq} PG status: last enqueued work: {enqueued}, "
          "last completed work: {done}")
# Older PyTorch: no `[rankN]:` prefix, no timestamp.
OLD_TIMEOUT = ("[E ProcessGroupNCCL.cpp:563] [Rank {rank}] Watchdog caught collective operation timeout: "
               "WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn={numel}, NumelOut={numel}, Timeout(ms)=600000) ran for "
               "600012 milliseconds before timing out.")


def _paste(tmp_path, held: dict[int, tuple[int, str]], enqueued: dict[int, int] | None = None, pg: int = 4,
           numel: int = 3612672, old: bool = False):
    """A paste of each rank's timeout line (rank -> (SeqNum, OpType)) and, for ranks in `enqueued`, its PG status
    line after it."""
    lines = []
    for rank, (seq, op) in held.items():
        lines.append((OLD_TIMEOUT if old else TIMEOUT).format(rank=rank, seq=seq, op=op, numel=numel))
        if enqueued and rank in enqueued:
            lines.append(STATUS.format(rank=rank, pg=pg, seq=seq, enqueued=enqueued[rank], done=seq - 1))
    path = tmp_path / "pasted.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_two_ranks_a_seqnum_apart_are_held_not_diverged(tmp_path):
    """Rank 0 times out in Broadcast 5730, rank 3 in Broadcast 5729: rank 0 completed 5729, in which rank 3 is
    still held. Nothing says they launched different collectives."""
    code, d = diff_json(_paste(tmp_path, {0: (5730, "BROADCAST"), 3: (5729, "BROADCAST")}))
    assert code == 0 and d["verdict"] == "inconclusive" and d["root"] is None
    wedge = d["wedge"]
    assert wedge["seq"] == 5729 and wedge["waiting_ranks"] == [0, 3] and wedge["absent_ranks"] == []
    assert list(wedge["ops"]) == ["3"] and wedge["ops"]["3"]["evidence"].endswith("pasted.txt:2")
    assert wedge["waiting_past"]["0"]["seq"] == 5730 and wedge["waiting_past"]["0"]["evidence"].endswith(":1")
    assert d["summary"].startswith("Rank 3 waits in comm unnamed seq 5729 (Broadcast 3612672 x ?); rank 0 "
                                   "completed it and waits past it, in seq 5730")
    assert "part ways" not in d["summary"] and "Flight Recorder" in d["summary"]


def test_their_pg_status_gives_what_they_launched_and_agrees_with_the_seqnums(tmp_path):
    """The same with each rank's PG status: both enqueued 6464, far past the timeouts."""
    path = _paste(tmp_path, {0: (5730, "BROADCAST"), 3: (5729, "BROADCAST")}, enqueued={0: 6464, 3: 6464})
    code, d = diff_json(path)
    assert code == 0 and d["verdict"] == "inconclusive" and d["root"] is None
    assert d["wedge"]["seq"] == 5729 and d["wedge"]["launched"] == {"0": 6464, "3": 6464}
    assert d["wedge"]["completed"] == {"0": 5729, "3": 5728}
    assert "Both launched 6464 by PyTorch's count" in d["summary"]
    # A SeqNum below the count is a floor of it, no contradiction; each count is cited.
    assert d["contradictions"] == []
    counted = {e["says"]: e["at"] for e in d["evidence"] if e["kind"] == "counted_launches"}
    assert counted == {"rank 0: PyTorch counts 6464 collectives enqueued in comm 4": f"{path}:2",
                       "rank 3: PyTorch counts 6464 collectives enqueued in comm 4": f"{path}:4"}
    code, out, _ = run_cli("diff", path)
    assert code == 0 and out.startswith("INCONCLUSIVE: Rank 3 waits in comm 4 seq 5729")
    assert "rank 0: last launched 6464, last completed 5729; completed seq 5729; waits past it, in seq 5730" in out


def test_one_rank_behind_two_that_share_a_seqnum_is_held_there(tmp_path):
    """Ranks 0 and 2 time out in AllReduce 377, rank 1 in AllReduce 376, with and without PG status lines."""
    held = {2: (377, "ALLREDUCE"), 0: (377, "ALLREDUCE"), 1: (376, "ALLREDUCE")}
    for enqueued in (None, {0: 380, 1: 380, 2: 380}):
        code, d = diff_json(_paste(tmp_path, held, enqueued=enqueued, numel=2048))
        assert code == 0 and d["verdict"] == "inconclusive" and d["root"] is None
        wedge = d["wedge"]
        assert wedge["seq"] == 377 - 1 and list(wedge["ops"]) == ["1"] and sorted(wedge["waiting_past"]) == ["0", "2"]
        assert d["summary"].startswith("Rank 1 waits in comm") and "ranks 0 and 2 completed it" in d["summary"]
        assert ("All launched 380 by PyTorch's count" in d["summary"]) == (enqueued is not None)


def test_older_lines_without_rank_prefixes_read_alike(tmp_path):
    code, d = diff_json(_paste(tmp_path, {2: (90, "BROADCAST"), 1: (91, "BROADCAST"), 0: (91, "BROADCAST")},
                               numel=1000, old=True))
    assert code == 0 and d["verdict"] == "inconclusive" and d["root"] is None
    assert d["wedge"]["seq"] == 90 and sorted(d["wedge"]["waiting_past"]) == ["0", "1"]


def test_enqueued_counts_that_differ_still_show_a_divergence(tmp_path):
    """Rank 1 enqueued one collective fewer than ranks 0 and 2: the counts part them, whatever the SeqNums."""
    held = {0: (377, "ALLREDUCE"), 1: (376, "ALLREDUCE"), 2: (377, "ALLREDUCE")}
    code, d = diff_json(_paste(tmp_path, held, enqueued={0: 380, 1: 379, 2: 380}, numel=2048))
    assert code == 1 and d["verdict"] == "diverged"
    assert d["root"]["outlier_ranks"] == [1] and d["root"]["pinned_by"] == "PyTorch's enqueued counts"


def test_one_seqnum_in_different_collectives_beside_a_rank_behind_is_still_a_desync(tmp_path):
    """Ranks 0 and 1 in AllReduce 51, rank 2 in Broadcast 51, rank 3 held in 50: the desync at 51 shows."""
    lines = [TIMEOUT.format(rank=0, seq=51, op="ALLREDUCE", numel=4096),
             TIMEOUT.format(rank=1, seq=51, op="ALLREDUCE", numel=4096),
             TIMEOUT.format(rank=2, seq=51, op="BROADCAST", numel=100),
             TIMEOUT.format(rank=3, seq=50, op="ALLREDUCE", numel=4096)]
    path = tmp_path / "pasted.txt"
    path.write_text("\n".join(lines) + "\n")
    code, d = diff_json(path)
    assert code == 1 and d["verdict"] == "diverged" and d["root"]["kind"] == "different"
    assert d["root"]["seq_range"] == [1, 51] and 2 in d["root"]["outlier_ranks"]


def test_ranks_held_apart_in_two_groups_are_no_divergence_in_either(tmp_path):
    """Ranks 0 and 1 time out a SeqNum apart in PG 1, ranks 2 and 3 in PG 2; each group's ranks enqueued alike."""
    lines = [TIMEOUT.format(rank=0, seq=41, op="ALLREDUCE", numel=8),
             STATUS.format(rank=0, pg=1, seq=41, enqueued=45, done=40),
             TIMEOUT.format(rank=1, seq=42, op="ALLREDUCE", numel=8),
             STATUS.format(rank=1, pg=1, seq=42, enqueued=45, done=41),
             TIMEOUT.format(rank=2, seq=7, op="BROADCAST", numel=8),
             STATUS.format(rank=2, pg=2, seq=7, enqueued=9, done=6),
             TIMEOUT.format(rank=3, seq=8, op="BROADCAST", numel=8),
             STATUS.format(rank=3, pg=2, seq=8, enqueued=9, done=7)]
    path = tmp_path / "pasted.txt"
    path.write_text("\n".join(lines) + "\n")
    code, d = diff_json(path)
    assert code == 0 and d["verdict"] == "inconclusive" and d["root"] is None
    assert {c["comm"]: c["launched"] for c in d["comms"]} == {"1": {"0": 45, "1": 45}, "2": {"2": 9, "3": 9}}
    assert d["contradictions"] == []


def test_two_ranks_in_one_collective_both_wait_there(tmp_path):
    """Two ranks at one SeqNum in one collective, one of them with a PG status line: a hang at that seq, said of
    two ranks as of two; the one without a count launched at least its SeqNum, said as a floor."""
    code, d = diff_json(_paste(tmp_path, {0: (1580, "ALLREDUCE"), 4: (1580, "ALLREDUCE")}, enqueued={0: 1582}))
    assert code == 0 and d["verdict"] == "inconclusive" and d["root"] is None
    assert d["summary"].startswith("Ranks 0 and 4 both wait in the same collective")
    assert d["wedge"]["launched"] == {"0": 1582, "4": 1580} and d["wedge"]["launched_floors"] == [4]
