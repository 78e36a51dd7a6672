"""Where the test inputs are: every test module takes its fixture paths from here (a module, not conftest.py:
tests/live has a conftest.py of its own, and `import conftest` would find whichever was imported last).

`tests/fixtures/` holds real captures with their ground truth (`real/`, see its README), outputs pasted in public
issues (`public/`, see INDEX.md) and constructed inputs (`constructed/`, each folder with a README).
"""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures"
REAL = FIXTURES / "real" / "nccl-2.28.9"  # captures on real NCCL 2.28.9 (fixtures/real/README.md)
EXTRA_OP = REAL / "extra-op-4rank"  # rank 0 launched one extra AllReduce
KILLED = REAL / "killed-rank"
HEALTHY = REAL / "healthy-1rank"
