"""Oracle over the real captures: evidence cut short, uneven across ranks, or mixed with another job's must give
the answer of the whole evidence, or an honest range that contains it, never an answer a cut alone changed.

    python benchmarks/oracle_cuts.py                      # every capture, every cut point (long)
    python benchmarks/oracle_cuts.py --cuts 40            # at most 40 cut points (and splits) per file and kind of cut
    python benchmarks/oracle_cuts.py --quick              # 3 cut points per file and kind (every kinds subset and rank share still)
    python benchmarks/oracle_cuts.py --replay 'extra-op-4rank|cut|nccl.vm.443.log|line|40' --keep /tmp/case
        (writes the case's evidence folder to /tmp/case; then `ncclforensics diff /tmp/case`)

Captures: every folder of tests/fixtures/real/nccl-2.28.9/ and of ../shared/fixtures/real/nccl-2.28.9/ (where the
checkout has one beside it; folders of a name already taken are the same capture). The reference answer of a capture
is the diagnosis of all its files: the root (communicator, seq range, outlier ranks) and the wedge (communicator,
seq). It is checked against the capture's ground truth (tests/fixtures/real/truth/, README) where one is written.

Cases, each run through the whole diagnosis and `diff --json` (which must be strict JSON):
- `cut`: one file cut after each line, and inside each line (half of it, no line break after), for text; at
  evenly spaced bytes for pickles;
- `rank`: every file of one rank cut at the same share of its length, each twentieth (the rank killed mid-write);
- `kinds`: every subset of the per-rank kinds of evidence (NCCL logs, dumps, PyTorch logs, journals, ...), with and
  without the RAS replies;
- `split`: Flight Recorder dumps for some ranks and NCCL logs for the others (every split, or --cuts of them);
- `job`: another capture's folder added beside this one.
`--cuts` samples the cut points of `cut` and the splits of `split`; `rank` and `kinds` cases are run whole, as
they are few.

An answer holds when it is the reference, or widens it honestly: the same communicator, a seq range that contains
the reference's, the same outliers (or a tie that names them), the wedge the same, unknown, or a range of seqs in the
same communicator that contains the reference's (at or after a seq, where records of completed collectives end; at or
before one, where only launches are on record); or no root at all with a verdict that claims nothing (inconclusive,
nothing compared). A CONSISTENT answer holds for a `kinds` case that keeps only kinds recording no more
than each collective's type, size and progress, where the capture's launch log says every rank launched the same
collectives in the same order and finished: a run without the fault writes the same files (two shape-equal
collectives issued in another order that healed), so nothing in them can show it. Outliers are ranks of the job, except where the answer says it names them by their rank in
the root's communicator (RAS replies alone, no record of their global ranks): those are compared as the processes
the replies list for them (the rule compared them as the job's ranks, which the answer says they are not), and
stand-in ranks (`stand_in_ranks`: numbered for a process no evidence placed), compared as the processes named.
Where the case cut a rank's files and the answer names that rank among `unplaced_ranks` (its records end before
the sides part, and are incomplete: it sides with nobody), the outliers may leave it out: the rule held the
answer to the whole evidence's outliers, which would count a rank of which the cut left no record at the root as
an outlier, or as of the reference, and either is a claim the evidence left cannot make; an answer that names the
rest and says which rank it cannot place is the honest range of outliers (no more than the whole's, and every
whole's outlier either named or said to be unplaced). (The
wedge was held to the same seq or none until the diagnosis could say a bound: a bound that
contains the reference is as honest as the root's range, so the rule for the root's range now holds for it too.) A cut the file shows (its last line without a line
break, a pickle without its end) that widens the answer must be reported (a problem naming the cut file); a cut
exactly at a line break leaves a file like a complete one. With another job's folder added, the answer is one job's
own (the one with more files naming communicators), never a mix. Anything else is a violation: a cut changed the
answer. Each violation is listed with
the line that replays it.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import itertools
import json
import math
import multiprocessing
import os
import re
import resource
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CAPTURE_DIRS = (ROOT / "tests" / "fixtures" / "real" / "nccl-2.28.9",
                ROOT.parent / "shared" / "fixtures" / "real" / "nccl-2.28.9")
TRUTH_DIR = ROOT / "tests" / "fixtures" / "real" / "truth"
QUICK_CUTS = 3  # cut points per file and kind of cut in --quick
PICKLE_MAGIC = b"\x80"


@dataclass(frozen=True)
class Answer:
    """What the oracle compares: the verdict as said, the root and the wedge."""

    label: str
    root_comm: str | None = None
    seq_lo: float | None = None  # the root's seq range; -inf..inf where it names no seq
    seq_hi: float | None = None
    outliers: frozenset = frozenset()
    tie: bool = False
    wedge_comm: str | None = None
    wedge_seq: int | None = None  # the lowest seq the wedge can be at
    wedge_hi: float | None = None  # the highest (inf: at or after wedge_seq); None: wedge_seq itself
    # The outliers' processes (pids), where the answer names them by their rank in the root's communicator, as a
    # caveat says, since no record gives their global ranks; and each process's global rank, as the evidence gives.
    outlier_pids: frozenset | None = field(default=None, compare=False)
    unplaced: frozenset = frozenset()  # ranks on neither side: incomplete records that end before the sides part
    pid_ranks: tuple = field(default=(), compare=False)

    def wedge_range(self) -> tuple[float, float]:
        return self.wedge_seq, self.wedge_seq if self.wedge_hi is None else self.wedge_hi

    def wedge_short(self) -> str:
        if self.wedge_seq is None:
            return "?"
        lo, hi = self.wedge_range()
        return str(lo) if lo == hi else f"{lo}.." if math.isinf(hi) else f"{lo}..{int(hi)}"

    def short(self) -> str:
        if self.root_comm is None:
            return f"{self.label}, no root" + (f", wedge {self.wedge_short()}" if self.wedge_seq is not None else "")
        lo, hi = (int(x) if math.isfinite(x) else "?" for x in (self.seq_lo, self.seq_hi))
        seqs = f"seq {lo}" if lo == hi else f"seq {lo}..{hi}"
        return (f"{self.label}, root {self.root_comm} {seqs} outliers {sorted(self.outliers)}"
                f"{' (tie)' if self.tie else ''}, wedge {self.wedge_short()}")


def answer_of(diagnosis, evidence: list, whole: bool = False) -> Answer:
    """The answer to compare; `whole`: the reference's, with every process's global rank."""
    from ncclforensics.report import wedge_words, words

    root, wedge = diagnosis.root, diagnosis.wedge
    label = words.verdict_label(diagnosis)
    shown = wedge is not None and wedge_words.shows_wedge(diagnosis)  # a healthy run's records end: no wedge is said
    wedge_part = {}
    if shown:
        low, high = wedge.seq_range
        wedge_part = {"wedge_comm": wedge.comm, "wedge_seq": low,
                      "wedge_hi": None if high == low else math.inf if high is None else high}
    if root is None:
        return Answer(label, **wedge_part)
    lo, hi = root.seq_range if root.seq_range is not None else (-math.inf, math.inf)
    hi = math.inf if hi is None else hi  # (at lo or later)
    pids = _comm_rank_pids(diagnosis, evidence)
    return Answer(label, root.comm, lo, hi, frozenset(root.outlier_ranks), not root.majority, **wedge_part,
                  outlier_pids=pids if pids is not None else _stand_in_pids(diagnosis, evidence),
                  unplaced=frozenset(root.unplaced_ranks),
                  pid_ranks=_pid_ranks(evidence) if whole else ())


def _stand_in_pids(diagnosis, evidence: list) -> frozenset | None:
    """The outliers' pids, where the root names a stand-in rank (`stand_in_ranks`: numbered for a process no
    evidence placed): compared as the processes they are, the others through the ranks the evidence gives."""
    stand_ins = diagnosis.stand_in_ranks
    if not set(diagnosis.root.outlier_ranks) & set(stand_ins):
        return None
    pid_of = {rank: pid for pid, rank in _pid_ranks(evidence)}
    return frozenset(int(stand_ins[r].rsplit(":", 1)[1]) if r in stand_ins else pid_of.get(r, f"rank {r}")
                     for r in diagnosis.root.outlier_ranks)


def _comm_rank_pids(diagnosis, evidence: list) -> frozenset | None:
    """The outliers' pids, where the root (from RAS counts) names ranks of a communicator none of whose ranks has a
    known global rank: the answer then names comm ranks, each a process the replies list."""
    from ncclforensics.align.ras_only import ras_rank_map

    root, history = diagnosis.root, diagnosis.ras.get(diagnosis.root.comm)
    if history is None or root.pinned_by != "RAS counts":
        return None
    if any(comm == root.comm for comm, _ in ras_rank_map(diagnosis.streams, evidence, diagnosis.ras)):
        return None
    pids = {r.rank: r.pid for _, block in history.states for r in block.ranks if r.pid is not None}
    return frozenset(pids.get(rank) for rank in root.outlier_ranks)


def _pid_ranks(evidence: list) -> tuple:
    """(pid, global rank) of every process the evidence gives a global rank (NCCL logs placed through the dumps;
    a pid that two ranks claim, on two hosts, is left out)."""
    from ncclforensics.align.ranks import resolve_global_ranks

    found: dict[int, set[int]] = {}
    for item in resolve_global_ranks(evidence)[0]:
        for identity in item.identities:
            if identity.pid is not None and identity.rank is not None:
                found.setdefault(identity.pid, set()).add(identity.rank)
    return tuple(sorted((pid, ranks.pop()) for pid, ranks in found.items() if len(ranks) == 1))


def judge(case: Answer, whole: Answer, reported: bool, cut: bool, cut_ranks: frozenset = frozenset()
          ) -> tuple[str, str]:
    """(outcome, why): `same`, `widened` (honest, and reported where something was cut), or `violation`.
    `cut_ranks`: the ranks whose files the case cut short."""
    if whole.root_comm is None:
        if case.label == "DIVERGED":
            return "violation", "a divergence the whole evidence does not show"
        if case != whole:  # a root said to be inconclusive, or nothing compared: claims nothing
            return _widened(reported, cut, f"{case.label} where the whole evidence is {whole.label}")
        return "same", ""
    if case.root_comm is None:
        if case.label in ("CONSISTENT", "TRANSIENT"):
            return "violation", f"{case.label} where the whole evidence shows a divergence"
        return _widened(reported, cut, "no root (nothing claimed)")
    if not same_comm(case.root_comm, whole.root_comm):
        return "violation", f"root in comm {case.root_comm}, not {whole.root_comm}"
    if not (case.seq_lo <= whole.seq_lo and case.seq_hi >= whole.seq_hi):
        return "violation", "root range leaves out the whole evidence's root"
    outliers = case.outliers
    if case.outlier_pids is not None:  # comm ranks, as the answer says: compared as the processes they are
        by_pid = dict(whole.pid_ranks)
        outliers = frozenset(by_pid.get(pid, f"process {pid}") for pid in case.outlier_pids)
    unplaced = case.unplaced & cut_ranks  # the cut left no record of them where the sides part
    if outliers != whole.outliers and not (case.tie and whole.outliers <= outliers) \
            and not (outliers and outliers <= whole.outliers <= outliers | unplaced):
        return "violation", f"outliers {sorted(case.outliers)}, not {sorted(whole.outliers)}"
    if case.wedge_seq is not None and not (same_comm(case.wedge_comm, whole.wedge_comm) and whole.wedge_seq is not None
                                           and case.wedge_range()[0] <= whole.wedge_range()[0]
                                           and case.wedge_range()[1] >= whole.wedge_range()[1]):
        return "violation", f"wedge at {case.wedge_comm} seq {case.wedge_short()}, not {whole.wedge_short()}"
    if case == whole:
        return "same", ""
    return _widened(reported, cut, "a wider answer")


def same_comm(a: str | None, b: str | None) -> bool:
    """One communicator: the same hash, or a process-group name (what dumps without NCCL logs call it) beside a
    hash, which only the logs would tie."""
    return a == b or (a is not None and b is not None and not (a.startswith("0x") and b.startswith("0x")))


def _widened(reported: bool, cut: bool, what: str) -> tuple[str, str]:
    if cut and not reported:
        return "violation", f"{what}, and the cut is not reported"
    return "widened", what


# --- cases ------------------------------------------------------------------------------------------------------


def is_pickle(data: bytes) -> bool:
    return data[:1] == PICKLE_MAGIC


def spread(count: int, at_most: int | None) -> list[int]:
    """`at_most` evenly spaced values of range(count) (all of them when None or enough)."""
    if at_most is None or count <= at_most:
        return list(range(count))
    return sorted({round(i * (count - 1) / max(1, at_most - 1)) for i in range(at_most)})


def cut_bytes(data: bytes, how: str, point: int) -> bytes:
    """The content cut: after line `point` (`line`), inside line `point` (`mid`), or at byte `point`."""
    if how == "byte":
        return data[:point]
    lines = data.splitlines(keepends=True)
    if how == "line":
        return b"".join(lines[:point])
    line = lines[point].rstrip(b"\r\n")
    return b"".join(lines[:point]) + line[: max(1, len(line) // 2)]


def file_cuts(name: str, data: bytes, at_most: int | None) -> list[tuple[str, int]]:
    if is_pickle(data):
        return [("byte", b) for b in spread(len(data), at_most) if b > 0]
    count = len(data.splitlines())
    return [("line", k) for k in spread(count, at_most)] + [("mid", k) for k in spread(count, at_most)]


def capture_cases(folder: Path, kinds: dict[str, str], ranks: dict[str, list[int]], others: list[Path],
                  at_most: int | None) -> list[tuple]:
    """Every case of one capture, as replayable tuples: (kind, ...)."""
    cases: list[tuple] = []
    files = sorted(p.name for p in folder.iterdir() if p.is_file())
    for name in files:
        cases += [("cut", name, how, point) for how, point in file_cuts(name, (folder / name).read_bytes(), at_most)]
    all_ranks = sorted({r for rs in ranks.values() if len(rs) == 1 for r in rs})
    for rank in all_ranks:
        cases += [("rank", rank, share) for share in range(1, 20)]  # every twentieth of the length
    per_rank = sorted({kinds[n] for n in files if len(ranks.get(n, [])) == 1})
    shared = sorted({kinds[n] for n in files if len(ranks.get(n, [])) != 1} - set(per_rank))
    subsets = [s for k in range(len(per_rank) + 1) for s in itertools.combinations(per_rank, k)]
    for subset in subsets:
        for with_shared in (True, False) if shared else (True,):
            kept = tuple(sorted(subset + (tuple(shared) if with_shared else ())))
            if set(kept) != set(per_rank) | set(shared):
                cases.append(("kinds", "+".join(kept) or "-"))
    if "flight-recorder" in per_rank and "nccl-log" in per_rank and len(all_ranks) > 1:
        splits = [s for k in range(1, len(all_ranks)) for s in itertools.combinations(all_ranks, k)]
        cases += [("split", ",".join(map(str, splits[i]))) for i in spread(len(splits), at_most)]
    cases += [("job", other.name) for other in others]
    return cases


def build_case(folder: Path, case: tuple, kinds: dict[str, str], ranks: dict[str, list[int]], out: Path,
               others: dict[str, Path]) -> tuple[Path, set[str]]:
    """Write the case's evidence folder under `out`; returns (the folder to diagnose, the names of the files cut)."""
    if out.exists():
        shutil.rmtree(out)
    evidence = out / folder.name
    evidence.mkdir(parents=True)
    kind = case[0]
    names = sorted(p.name for p in folder.iterdir() if p.is_file())
    cut_files = set()
    for name in names:
        data = (folder / name).read_bytes()
        if kind == "cut" and name == case[1]:
            data = cut_bytes(data, case[2], case[3])
            cut_files.add(name)
        elif kind == "rank" and ranks.get(name) == [case[1]]:
            size = len(data) if is_pickle(data) else len(data.splitlines())
            point = size * case[2] // 20
            data = cut_bytes(data, "byte" if is_pickle(data) else "line", point)
            cut_files.add(name)
        elif kind == "kinds" and kinds[name] not in case[1].split("+"):
            continue
        elif kind == "split" and len(ranks.get(name, [])) == 1:
            fr_ranks = {int(r) for r in str(case[1]).split(",")}  # one rank replays as an int
            if kinds[name] == "nccl-log" and ranks[name][0] in fr_ranks:
                continue
            if kinds[name] == "flight-recorder" and ranks[name][0] not in fr_ranks:
                continue
        (evidence / name).write_bytes(data)
    if kind == "job":
        shutil.copytree(others[case[1]], out / case[1])
    return out, cut_files


# --- running ----------------------------------------------------------------------------------------------------


_PARSED: dict[tuple[str, str], object] = {}


def diagnose_folder(path: Path):
    """`diff --json` of one folder, in this process (the CLI's parallel parse gives the same evidence)."""
    from ncclforensics.align.diagnosis import diagnose
    from ncclforensics.api import ParsedInputs
    from ncclforensics.report import data
    from ncclforensics.sources import discover, parse_file

    files, problems = discover([str(path)])
    evidence = []
    for file in files:
        key = (file.name, hashlib.sha1(file.path.read_bytes()).hexdigest())
        if key not in _PARSED:  # a file the case left as it was is parsed once per worker
            _PARSED[key] = parse_file(file)
        evidence.append(_PARSED[key])
    parsed = ParsedInputs(evidence, problems)
    diagnosis = diagnose(parsed.evidence)
    json.dumps(data.diff_dict(diagnosis), allow_nan=False)  # what `diff --json` writes must be strict JSON
    return parsed, diagnosis


def profile(folder: Path) -> tuple[dict[str, str], dict[str, list[int]], Answer]:
    """Each file's format and the ranks it speaks for, and the whole evidence's answer."""
    parsed, diagnosis = diagnose_folder(folder)
    kinds, ranks = {}, {}
    for item in parsed.evidence:
        name = Path(item.path).name
        kinds[name] = item.format.value if item.format else "unrecognised"
        ranks[name] = item.ranks
    return kinds, ranks, answer_of(diagnosis, parsed.evidence, whole=True)


def truth_of(folder: Path) -> str:
    """The ground truth's root seq and wedge seq, where the capture's truth file writes them."""
    path = TRUTH_DIR / f"{folder.name}.json"
    if not path.exists():
        return "README"
    summary = json.loads(path.read_text()).get("summary", {})
    first, wedge = summary.get("first_divergent") or {}, summary.get("wedge") or {}
    return f"root seq {first.get('seq', '-')}, wedge seq {wedge.get('seq', '-')}"


# Kinds of evidence that record of each collective no more than its type, size and progress (no call site, tag or
# value), and of a rank no more than its gate decisions.
SIGNATURE_KINDS = frozenset({"nccl-log", "ras-json", "ras-text", "torch-log", "gate-journal"})


@functools.cache  # one read of the truth file per capture, not per case
def launches_alike(folder: Path) -> bool:
    """Whether the capture's launch log says every rank launched the same types and sizes in the same order on
    every communicator, and every rank finished: then evidence of SIGNATURE_KINDS alone is what a run without
    the fault writes too, and cannot show the divergence."""
    path = TRUTH_DIR / f"{folder.name}.json"
    if not path.exists():
        return False
    truth = json.loads(path.read_text())
    log, columns = truth.get("launch_log"), truth.get("launch_log_columns")
    if not log or not columns:
        return False
    fields = [columns.index(name) for name in ("comm", "kind", "count")]
    orders = {tuple(tuple(row[i] for i in fields) for row in rows) for rows in log.values()}
    finished = all(rank.get("rc") == 0 and rank.get("finished_all_steps") for rank in truth["ranks"].values())
    return len(orders) == 1 and finished


def run_case(folder: Path, case: tuple, kinds: dict[str, str], ranks: dict[str, list[int]], whole: Answer,
             others: dict[str, Path], scratch: Path) -> tuple[str, str, Answer | None]:
    """One case: its evidence written under `scratch`, diagnosed and judged. (outcome, why, the answer)."""
    path, cut_files = build_case(folder, case, kinds, ranks, scratch, others)
    try:
        parsed, diagnosis = diagnose_folder(path)
    except Exception as e:  # noqa: BLE001 - a crash is a violation of its own, recorded with the case
        return "violation", f"raised {type(e).__name__}: {e}", None
    reported = any(Path(p.loc.path).name in cut_files for p in parsed.all_problems)
    got = answer_of(diagnosis, parsed.evidence)
    # A cut the file itself shows (no line break at its end, a pickle without its STOP) must be reported; one
    # exactly at a line break leaves a file like a complete one, so an honest wider answer is all one can ask.
    shows_cut = case[0] == "cut" and case[2] in ("mid", "byte")
    cut_ranks = frozenset(r for name in cut_files for r in ranks.get(name, []))
    outcome, why = judge(got, whole, reported, shows_cut, cut_ranks)
    if case[0] == "kinds" and got.label == "CONSISTENT" and set(case[1].split("+")) <= SIGNATURE_KINDS \
            and launches_alike(folder):
        outcome, why = "widened", "CONSISTENT: what the kinds kept record is alike on every rank"
    if case[0] == "job" and outcome != "same":
        # The job under study is the one with more files naming communicators: the answer is that job's whole.
        _, _, theirs = profile(others[case[1]])
        if got != theirs:
            outcome, why = "violation", f"neither job's own answer ({why or 'another job changed it'})"
        else:
            outcome, why = "same", ""
    return outcome, why, got


def run_capture(task: tuple) -> dict:
    """All cases of one capture (in a worker process)."""
    folder, other_paths, at_most, only = task
    folder, others = Path(folder), {Path(p).name: Path(p) for p in other_paths}
    os.environ.setdefault("POLARS_MAX_THREADS", "1")
    started = time.monotonic()
    kinds, ranks, whole = profile(folder)
    cases = capture_cases(folder, kinds, ranks, list(others.values()), at_most)
    if only is not None:
        cases = [c for c in cases if tuple(map(str, c)) == tuple(map(str, only))]  # `0` replays as an int
    counts = {"same": 0, "widened": 0, "violation": 0}
    by_kind: dict[str, dict[str, int]] = {}
    violations, slowest = [], 0.0
    with tempfile.TemporaryDirectory(dir="/dev/shm" if os.path.isdir("/dev/shm") else None) as tmp:
        for case in cases:
            t0 = time.monotonic()
            outcome, why, got = run_case(folder, case, kinds, ranks, whole, others, Path(tmp) / "case")
            slowest = max(slowest, time.monotonic() - t0)
            counts[outcome] += 1
            by_kind.setdefault(case[0], {"same": 0, "widened": 0, "violation": 0})[outcome] += 1
            if outcome == "violation":
                violations.append({"case": "|".join(map(str, (folder.name, *case))), "why": why,
                                   "got": got.short() if got else "-", "expected": whole.short()})
    return {"capture": folder.name, "truth": truth_of(folder), "whole": whole.short(), "cases": len(cases),
            "counts": counts, "by_kind": by_kind, "violations": violations, "seconds": time.monotonic() - started,
            "slowest_s": slowest, "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def captures() -> list[Path]:
    found: dict[str, Path] = {}
    for base in CAPTURE_DIRS:
        if base.is_dir():
            for folder in sorted(p for p in base.iterdir() if p.is_dir()):
                found.setdefault(folder.name, folder)
    return list(found.values())


def other_job(folder: Path, all_captures: list[Path]) -> list[Path]:
    """The capture after this one (in name order) whose communicators differ: its folder is the other job."""
    names = [c.name for c in all_captures]
    i = names.index(folder.name)
    return [all_captures[(i + 1) % len(all_captures)]] if len(all_captures) > 1 else []


def pattern_of(violation: dict) -> tuple[str, str, str]:
    """(kind of case, kind of file cut, why with its numbers and hashes taken out): what violations share."""
    _, kind, *rest = violation["case"].split("|")
    file = re.sub(r"[\d.]+(log|txt|jsonl|json)?$", "", rest[0]) + (f" ({rest[1]})" if len(rest) > 2 else "") \
        if kind == "cut" else ""
    why = re.sub(r"\d+", "N", re.sub(r"0x[0-9a-f]+|\[ranks=[\d,]+\]", "C", violation["why"]))
    return kind, file, why


def report(results: list[dict], at_most: int | None, seconds: float) -> str:
    total = {k: sum(r["counts"][k] for r in results) for k in ("same", "widened", "violation")}
    cases = sum(r["cases"] for r in results)
    lines = [
        "# Oracle: cut, uneven and mixed evidence on the real captures",
        "",
        (f"`python benchmarks/oracle_cuts.py{f' --cuts {at_most}' if at_most else ''}`: "
         f"{'at most ' + str(at_most) if at_most else 'every'} cut point per file and kind of cut, "
         f"{cases:,} cases in {seconds:.0f} s on {os.cpu_count()} CPUs (shared). "
         f"Holds: {total['same']:,} the same answer, {total['widened']:,} an honest wider one; "
         f"violations: {total['violation']:,}."),
        "",
        ("| capture | ground truth | whole evidence | cases | same | widened | violations | s | slowest case s | "
         "peak RSS MiB |"),
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        c = r["counts"]
        lines.append(f"| {r['capture']} | {r['truth']} | {r['whole']} | {r['cases']} | {c['same']} | {c['widened']} | "
                     f"{c['violation']} | {r['seconds']:.0f} | {r['slowest_s']:.2f} | {r['peak_rss_mib']:.0f} |")
    kinds = sorted({k for r in results for k in r["by_kind"]})
    lines += ["", "| kind of case | same | widened | violations |", "|---|---:|---:|---:|"]
    for kind in kinds:
        sums = {k: sum(r["by_kind"].get(kind, {}).get(k, 0) for r in results) for k in total}
        lines.append(f"| {kind} | {sums['same']} | {sums['widened']} | {sums['violation']} |")
    violations = [v for r in results for v in r["violations"]]
    if violations:
        patterns: dict[tuple, list[str]] = {}
        for v in violations:
            patterns.setdefault(pattern_of(v), []).append(v["case"])
        lines += ["", "## Violations by pattern", "", "| cases | kind of case | file | why | first case |",
                  "|---:|---|---|---|---|"]
        for (kind, file, why), cases_of in sorted(patterns.items(), key=lambda p: -len(p[1])):
            lines.append(f"| {len(cases_of)} | {kind} | {file} | {why} | `{cases_of[0]}` |")
        lines += ["", "## Violations", "",
                  ("Replay one: `python benchmarks/oracle_cuts.py --replay 'CASE' --keep /tmp/case`, then "
                   "`ncclforensics diff /tmp/case`."), "", "| case | why | got | whole evidence |", "|---|---|---|---|"]
        for v in violations:
            lines.append(f"| `{v['case']}` | {v['why']} | {v['got']} | {v['expected']} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cuts", type=int, default=None, help="at most this many cut points per file and kind")
    parser.add_argument("--quick", action="store_true", help=f"--cuts {QUICK_CUTS}")
    parser.add_argument("--capture", action="append", help="only these captures (folder names)")
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--out", type=Path, help="write the report here (Markdown)")
    parser.add_argument("--replay", help="one case, as a violation lists it")
    parser.add_argument("--keep", type=Path, help="with --replay: write the case's evidence folder here")
    args = parser.parse_args()
    at_most = QUICK_CUTS if args.quick else args.cuts
    everything = captures()
    if args.replay:
        name, kind, *rest = args.replay.split("|")
        folder = next(c for c in everything if c.name == name)
        case = (kind, *(int(x) if x.lstrip("-").isdigit() else x for x in rest))
        kinds, ranks, _ = profile(folder)
        if args.keep:
            others = {c.name: c for c in everything}
            build_case(folder, case, kinds, ranks, args.keep, others)
            print(f"ncclforensics diff {args.keep}")
        result = run_capture((str(folder), [str(p) for p in other_job(folder, everything)], None, case))
        print(json.dumps(result, indent=1))
        return 1 if result["counts"]["violation"] else 0
    chosen = [c for c in everything if not args.capture or c.name in args.capture]
    tasks = [(str(c), [str(p) for p in other_job(c, everything)], at_most, None) for c in chosen]
    started = time.monotonic()
    with multiprocessing.get_context("spawn").Pool(args.workers) as pool:
        results = []
        for result in pool.imap_unordered(run_capture, tasks):
            c = result["counts"]
            print(f"{result['capture']}: {result['cases']} cases, {c['same']} same, {c['widened']} widened, "
                  f"{c['violation']} violations ({result['seconds']:.0f} s)", flush=True)
            results.append(result)
    results.sort(key=lambda r: r["capture"])
    text = report(results, at_most, time.monotonic() - started)
    if args.out:
        args.out.write_text(text)
        args.out.with_suffix(".json").write_text(json.dumps(results, indent=1))
    print(text)
    return 1 if any(r["counts"]["violation"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
