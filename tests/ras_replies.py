"""RAS STATUS text replies of a one-node, four-process job, as NCCL 2.28 prints them, for tests to write."""

from __future__ import annotations

_HEAD = """NCCL version {version} compiled with CUDA 13.0
CUDA runtime version 13000, driver version 13000

Job summary
===========

  Nodes  Processes         GPUs  Processes     GPUs
(total)   per node  per process    (total)  (total)
      1          4            1          4        4

Communicators... (0.000s)
=============

Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors
    #  in group  per comm  per node  per comm  in group
"""

_WORLD_ROW = "    0         1         1         4         4         4   RUNNING  MISMATCH"


def ras_status_reply(warnings: str, tp_errors: str | None = None, version: str = "2.28.9") -> str:
    """A reply whose group 0 is the world comm (MISMATCH) and, with `tp_errors` (the row's text after its status:
    `  MISMATCH`, `      OK`), group 1 two TP comms of two ranks; `warnings` is the text of its Warnings section."""
    rows = [_WORLD_ROW]
    if tp_errors is not None:
        rows.append(f"    1         2         1         2         2         4   RUNNING{tp_errors}")
    return (_HEAD.format(version=version) + "\n".join(rows) + "\n\nErrors\n======\n\nWarnings\n========\n\n"
            + warnings)
