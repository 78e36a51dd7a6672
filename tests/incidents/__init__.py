"""A random incident simulator that writes evidence in the real formats, and the property `diff` must have.

    from incidents import draw, run_seed
    incident = draw(7)                      # program, fault, what NCCL made of it, truth
    written = incident.write(folder, {"nccl": [0, 1, 2, 3], "fr": [0, 1, 2, 3]}, random.Random(7))
    outcome = run_seed(7, workdir)          # draw, write a random evidence subset, diff, check the property

Modules: program (the decode program and its stacks), faults, nccl_rules (NCCL 2.28.9 behaviour, as measured on
an H200), incident (truth), nccl_log / flight_recorder / torch_log / traces (the writers), evidence (subsets),
visibility, oracle (the property), runner.
"""

from .evidence import KINDS, SUBSETS, Written, draw_subset
from .incident import Incident, RootTruth, Truth, draw
from .oracle import VIOLATIONS, Outcome, Violation, check
from .runner import run_seed, run_seeds

__all__ = ["KINDS", "SUBSETS", "VIOLATIONS", "Incident", "Outcome", "RootTruth", "Truth", "Violation", "Written",
           "check", "draw", "draw_subset", "run_seed", "run_seeds"]
