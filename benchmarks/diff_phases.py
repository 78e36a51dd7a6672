"""What `ncclforensics diff --json --workers N PATH` does, with the time of each phase (not a test; the scaling
benchmark runs it as a child process).

    python benchmarks/diff_phases.py --workers 16 benchmarks/data/fr-1024r-2000

stdout: the same JSON `diff --json` prints. stderr, last line: {"import_s", "parse_s", "diagnose_s",
"output_s"} as JSON. The parse is the map (files in parallel, in worker processes); the diagnosis is the reduce
(one process, per communicator), so the two say where the time goes as workers are added.
"""

from __future__ import annotations

import time

STARTED = time.perf_counter()

import argparse
import json
import sys

from ncclforensics import api
from ncclforensics.align.diagnosis import diagnose
from ncclforensics.report import data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--workers", type=int, default=None)
    args = parser.parse_args()
    imported = time.perf_counter()
    parsed = api.parse_paths(args.paths, None, args.workers)
    parsed_at = time.perf_counter()
    diagnosis = diagnose(parsed.evidence)
    diagnosed = time.perf_counter()
    result = data.diff_dict(diagnosis)
    result["problems"] = [data.problem_dict(p) for p in parsed.all_problems + diagnosis.problems]
    sys.stdout.write(json.dumps(result, separators=(",", ":")) + "\n")
    sys.stdout.flush()
    done = time.perf_counter()
    print(json.dumps({"import_s": imported - STARTED, "parse_s": parsed_at - imported,
                      "diagnose_s": diagnosed - parsed_at, "output_s": done - diagnosed}), file=sys.stderr)


if __name__ == "__main__":
    main()
