"""Peak RSS of `diff` on big NCCL logs, phase by phase (parse, diagnosis), for one block size of the keyed reader
and one number of parse workers (not a test). Prints one JSON line.

    python benchmarks/nccl_memory.py benchmarks/data/nccl-8r-1000000 BLOCK_MIB WORKERS
"""

import json
import sys
import threading
import time

from ncclforensics import api
from ncclforensics.align.diagnosis import diagnose
from ncclforensics.sources.nccl_log import keyed

keyed.BLOCK_BYTES = int(sys.argv[2]) << 20
peak = {"now": 0}


def rss() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) // 1024 for line in f if line.startswith("VmRSS"))


def sample() -> None:
    while True:
        peak["now"] = max(peak["now"], rss())
        time.sleep(0.01)


threading.Thread(target=sample, daemon=True).start()
base = rss()
started = time.perf_counter()
parsed = api.parse_paths([sys.argv[1]], None, int(sys.argv[3]))
parse_s = time.perf_counter() - started
time.sleep(0.05)
parse_peak, held = peak["now"], rss()
peak["now"] = 0
started = time.perf_counter()
diagnosis = diagnose(parsed.evidence)
diagnose_s = time.perf_counter() - started
time.sleep(0.05)
print(json.dumps({"block_mib": int(sys.argv[2]), "workers": int(sys.argv[3]), "base_mib": base,
                  "parse_peak_mib": parse_peak, "after_parse_mib": held, "diagnose_peak_mib": peak["now"],
                  "parse_s": round(parse_s, 2), "diagnose_s": round(diagnose_s, 2),
                  "root": diagnosis.root and diagnosis.root.seq_range}))
