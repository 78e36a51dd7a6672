"""Gate coverage over soak runs, on gate journals written here with known answers.

Every journal is written the way a deployment writes one (JSON lines or `key=value` log lines, one per rank per
decode step) and read back through the real parser: the session split, the ceiling window and the disagreements
are then checked against what the generator put in.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from ncclforensics import api
from ncclforensics.align.coverage import Jurisdiction
from ncclforensics.cli import cli
from ncclforensics.report import plots
from ncclforensics.report.words import coverage_summary

MAX_MODEL_LEN, SPEC_TOKENS = 4096, 3
CEILING = MAX_MODEL_LEN - SPEC_TOKENS + 1  # 4094: the first sequence length at which the gate must skip


@dataclass(frozen=True)
class Session:
    """One session to write: `steps` decode steps from sequence length `start_seq`, one per step."""

    steps: int
    start_seq: int
    ranks: int = 4
    flip: tuple[int, int] | None = None  # (step, rank): that rank decides the other way at that step
    known_window: bool = True  # journal max_model_len and spec_tokens
    drop: tuple[int, int] | None = None  # (step, rank): that rank journals nothing at that step

    def seq(self, step: int) -> int:
        return self.start_seq + step

    @property
    def in_window(self) -> int:
        return sum(self.seq(s) >= CEILING for s in range(self.steps))


def records(session: Session, rank: int) -> list[dict]:
    out = []
    for step in range(session.steps):
        if session.drop == (step, rank):
            continue
        fits = session.seq(step) + SPEC_TOKENS <= MAX_MODEL_LEN
        decision = "pass" if fits else "skip"
        if session.flip == (step, rank):
            decision = "skip" if decision == "pass" else "pass"
        record = {"step": step, "rank": rank, "seq": session.seq(step), "decision": decision, "fits": fits,
                  "proposed_pass_count": 1 if decision == "pass" else 0}
        if session.known_window:
            record.update(max_model_len=MAX_MODEL_LEN, spec_tokens=SPEC_TOKENS)
        out.append(record)
    return out


def line(record: dict, style: str) -> str:
    if style == "json":
        return json.dumps(record)
    fields = " ".join(f"{k}={int(v) if isinstance(v, bool) else v}" for k, v in record.items())
    return f"[rank{record['rank']}] INFO gate: {fields}"


def write_folders(root: Path, sessions: list[Session], style: str = "json") -> list[Path]:
    """One folder per session, one file per rank."""
    folders = []
    for index, session in enumerate(sessions):
        folder = root / f"s{index:03d}"
        folder.mkdir(parents=True)
        for rank in range(session.ranks):
            suffix = "jsonl" if style == "json" else "log"
            (folder / f"gate_rank{rank}.{suffix}").write_text(
                "".join(line(r, style) + "\n" for r in records(session, rank)))
        folders.append(folder)
    return folders


def write_appended(root: Path, sessions: list[Session], style: str = "json") -> None:
    """One file per rank holding every session one after the other (the journal writer appends)."""
    root.mkdir(parents=True)
    ranks = max(s.ranks for s in sessions)
    for rank in range(ranks):
        lines = [line(r, style) for s in sessions if rank < s.ranks for r in records(s, rank)]
        (root / f"gate_rank{rank}.{'jsonl' if style == 'json' else 'log'}").write_text("\n".join(lines) + "\n")


def thirty() -> list[Session]:
    """30 sessions of 40 steps: every third reaches the window (its last 10 steps); sessions 4, 11, 18 and 25
    have a flip at step 35 (inside the window for 18, outside for the rest); session 29 lacks the window."""
    out = []
    for i in range(30):
        start = CEILING - 30 if i % 3 == 0 else 1000 + i
        flip = (35, i % 4) if i % 7 == 4 else None
        out.append(Session(steps=40, start_seq=start, flip=flip, known_window=i != 29))
    return out


@pytest.fixture(scope="module")
def soak30(tmp_path_factory) -> tuple[Path, list[Session]]:
    root = tmp_path_factory.mktemp("soak30")
    sessions = thirty()
    # Half the folders in each journal spelling.
    write_folders(root / "json", sessions[:15], "json")
    write_folders(root / "log", sessions[15:], "log")
    return root, sessions


def test_thirty_sessions_in_folders(soak30):
    root, sessions = soak30
    parsed, coverage = api.gate_coverage_paths([str(root)])
    assert not parsed.all_problems
    assert len(coverage.sessions) == 30
    assert coverage.verdict is Jurisdiction.EXERCISED
    # Sessions come in folder order: json/s000..s014 then log/s000..s014.
    assert [Path(s.name).name for s in coverage.sessions] == [f"s{i:03d}" for i in range(15)] * 2
    for expected, got in zip(sessions, coverage.sessions):
        assert got.steps == expected.steps == 40
        assert got.ranks == [0, 1, 2, 3]
        if expected.known_window:
            assert got.ceiling_start == CEILING
            assert got.steps_in_window == expected.in_window
            assert got.exercised is (expected.in_window > 0)
        else:
            assert got.steps_in_window is None and got.exercised is None
        if expected.flip is None:
            assert got.disagreement is None and got.lockstep
        else:
            step, rank = expected.flip
            assert got.disagreement is not None and got.disagreement.step == step
            assert got.disagreement.outlier_ranks == [rank]
            assert got.disagreeing_steps == 1 and not got.lockstep
            assert got.disagreement.in_ceiling_window is (expected.seq(step) >= CEILING)
            assert all(str(loc).endswith(f":{step + 1}") for loc in got.disagreement.locations)
    assert sum(1 for s in coverage.sessions if s.exercised) == 10
    assert coverage.steps_in_window == 10 * 10
    assert [s.disagreement.step for s in coverage.disagreeing_sessions] == [35, 35, 35, 35]
    assert coverage.disagreeing_sessions[2].disagreement.in_ceiling_window is True  # session 18 reaches it
    # Totals: every rank journaled 1200 steps; passes are the steps below the window, plus or minus the flips.
    for rank, tally in coverage.totals.items():
        flips = [s for s in sessions if s.flip and s.flip[1] == rank]
        expected_skips = sum(s.in_window for s in sessions) + sum(
            1 if s.seq(35) < CEILING else -1 for s in flips)
        assert tally.steps == 1200
        assert tally.skips == expected_skips
        assert tally.would_pass == tally.passes == 1200 - expected_skips
        assert tally.proposed_pass_total == tally.passes
    assert "10 of 29 sessions reached the ceiling window" in coverage_summary(coverage)
    assert "unknown in 1 more session;" in coverage_summary(coverage)


def five_hundred() -> list[Session]:
    """500 sessions of 8 steps: session i reaches the window when i % 50 == 7 (its last 3 steps); a flip at step
    6 on rank 1 when i % 100 == 7 (inside the window) and on rank 2 at step 2 when i % 125 == 3 (outside)."""
    out = []
    for i in range(500):
        start = CEILING - 5 if i % 50 == 7 else 2000
        flip = (6, 1) if i % 100 == 7 else ((2, 2) if i % 125 == 3 else None)
        out.append(Session(steps=8, start_seq=start, flip=flip))
    return out


@pytest.fixture(scope="module")
def soak500(tmp_path_factory) -> tuple[Path, list[Session]]:
    root = tmp_path_factory.mktemp("soak500") / "run"
    sessions = five_hundred()
    write_appended(root, sessions, "json")
    return root, sessions


def test_five_hundred_sessions_appended_restart_on_step_counter(soak500):
    root, sessions = soak500
    parsed, coverage = api.gate_coverage_paths([str(root)])
    assert not parsed.all_problems
    assert len(coverage.sessions) == 500
    assert [s.name for s in coverage.sessions[:2]] == [f"{root} #1", f"{root} #2"]
    assert coverage.verdict is Jurisdiction.EXERCISED
    exercised = [i for i, s in enumerate(coverage.sessions) if s.exercised]
    assert exercised == [i for i in range(500) if i % 50 == 7]
    assert all(coverage.sessions[i].steps_in_window == 3 for i in exercised)
    assert coverage.steps_in_window == 30
    disagreeing = {i: s.disagreement for i, s in enumerate(coverage.sessions) if s.disagreement}
    assert sorted(disagreeing) == sorted(i for i in range(500) if i % 100 == 7 or i % 125 == 3)
    for i, d in disagreeing.items():
        step, rank = sessions[i].flip
        assert (d.step, d.outlier_ranks) == (step, [rank])
        assert d.in_ceiling_window is (i % 100 == 7)
    assert len(coverage.lockstep_sessions) == 500 - len(disagreeing)
    assert coverage.steps == 4000


def test_not_exercised_and_window_unknown(tmp_path):
    below = [Session(steps=12, start_seq=100 + 7 * i) for i in range(6)]
    write_folders(tmp_path / "below", below, "log")
    _, coverage = api.gate_coverage_paths([str(tmp_path / "below")])
    assert coverage.verdict is Jurisdiction.NOT_EXERCISED
    assert coverage_summary(coverage).startswith("No step of 6 sessions reached the ceiling window")
    assert [s.headroom for s in coverage.sessions] == [CEILING - (100 + 7 * i + 11) for i in range(6)]

    unknown = [Session(steps=5, start_seq=CEILING, known_window=False) for _ in range(3)]
    write_folders(tmp_path / "unknown", unknown, "json")
    _, coverage = api.gate_coverage_paths([str(tmp_path / "unknown")])
    assert coverage.verdict is Jurisdiction.WINDOW_UNKNOWN
    assert "window" in coverage_summary(coverage) and "unknown" in coverage_summary(coverage)
    assert all(s.steps_in_window is None for s in coverage.sessions)


def test_missing_steps_break_lockstep(tmp_path):
    write_folders(tmp_path, [Session(steps=10, start_seq=CEILING - 4, drop=(7, 3))], "json")
    _, coverage = api.gate_coverage_paths([str(tmp_path)])
    (session,) = coverage.sessions
    assert session.missing_steps == {3: 1}
    assert session.disagreement is None and not session.lockstep
    assert session.tallies[3].steps == 9 and session.tallies[0].steps == 10
    assert session.steps_in_window == 6  # sequence lengths 4094..4099


def test_cli_json_plot_and_exit_codes(soak30, tmp_path):
    root, _ = soak30
    png = tmp_path / "coverage.png"
    result = CliRunner().invoke(cli, ["gates", "--json", "--plot", str(png), str(root)])
    assert result.exit_code == 1, result.output  # the gates disagreed in some session
    out = json.loads(result.stdout)
    assert out["verdict"] == "exercised" and out["verdict_label"] == "EXERCISED"
    assert out["totals"]["sessions"] == 30 and out["totals"]["steps_in_window"] == 100
    assert out["totals"]["sessions_with_disagreement"] == 4
    first = next(s for s in out["sessions"] if s["first_disagreement"])
    assert first["first_disagreement"]["step"] == 35 and first["lockstep"] is False
    assert set(out["per_rank"]) == {"0", "1", "2", "3"}
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    calm = tmp_path / "calm"
    write_folders(calm, [Session(steps=6, start_seq=10)], "json")
    result = CliRunner().invoke(cli, ["gates", str(calm)])
    assert result.exit_code == 0, result.output
    assert "NOT EXERCISED" in result.stdout

    result = CliRunner().invoke(cli, ["gates", str(tmp_path / "nothing-here")])
    assert result.exit_code == 2


def test_coverage_plot_marks(soak30):
    root, sessions = soak30
    _, coverage = api.gate_coverage_paths([str(root)])
    fig = plots.plot_coverage(coverage)
    top, bottom = fig.axes[:2]
    exercised = [p for p in top.patches if p.get_gid() == "exercised"]
    assert len(exercised) == 30
    assert [round(p.get_height()) for p in exercised] == [s.in_window if s.known_window else 0 for s in sessions]
    (marks,) = [line for line in top.lines if line.get_gid() == "disagreements"]
    assert list(marks.get_xdata()) == [i for i, s in enumerate(sessions) if s.flip]
    (ceiling,) = [line for line in bottom.lines if line.get_gid() == "ceiling"]
    assert set(ceiling.get_ydata()) == {CEILING}
    assert "EXERCISED" in fig.get_suptitle()
