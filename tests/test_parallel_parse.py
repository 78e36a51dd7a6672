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
