"""Parsing in parallel (worker processes for dumps and small files, threads for big logs) gives what parsing the
files one by one gives. Run in a fresh interpreter: worker processes are forked only before polars has started
its threads, which a test process has long done."""

from __future__ import annotations

import json
import subprocess
import sys

from fixture_paths import REAL

from ncclforensics import api
from ncclforensics.sources import discover

DUMP = """
import json, sys
from ncclforensics import api
from ncclforensics.sources import discover
files, _ = discover(sys.argv[1:])
assert api._fork_safe(), "polars started its threads before parsing: no worker processes"
print(json.dumps([[e.path, e.format.value if e.format else None, e.collectives.to_dicts(), repr(e.problems),
                   repr(e.identities), repr(e.comm_infos), repr(e.progress), repr(e.watchdog), e.version]
                  for e in api.parse_files(files)], default=str))
"""


def _canonical(evidence) -> list:
    return json.loads(json.dumps([[e.path, e.format.value if e.format else None, e.collectives.to_dicts(),
                                   repr(e.problems), repr(e.identities), repr(e.comm_infos), repr(e.progress),
                                   repr(e.watchdog), e.version] for e in evidence], default=str))


def test_parallel_parse_matches_one_by_one():
    folders = [str(p) for p in sorted(REAL.iterdir()) if p.is_dir()]
    out = subprocess.run([sys.executable, "-c", DUMP, *folders], capture_output=True, text=True, check=True)
    parallel = json.loads(out.stdout)
    files, _ = discover(folders)
    assert len(files) > 20
    assert parallel == _canonical(api._parse_in_turn(files, None))


def test_diff_answers_the_same_with_any_number_of_workers():
    folder = str(REAL / "extra-op-4rank")
    runs = [subprocess.run([sys.executable, "-m", "ncclforensics.cli", "diff", "--json", *workers, folder],
                           capture_output=True, text=True) for workers in ([], ["--workers", "1"], ["--workers", "3"])]
    assert {r.returncode for r in runs} == {1}
    assert runs[0].stdout == runs[1].stdout == runs[2].stdout
    assert json.loads(runs[0].stdout)["root"]["outlier_ranks"]


def test_workers_default_to_the_cpus_this_process_may_run_on():
    code = "import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); " \
           "from ncclforensics import api; print(api.usable_cpus())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "1"
