"""Live mode: watch a running job instead of reading its remains.

- `guard.GateConsensusGuard`: an in-process drafter-gate consensus on a dedicated gloo group (off|observe|enforce).
- `sidecar`: one process per rank that tails the rank's gate journal and compares steps across ranks.
- `ras_client` / `ras_watch`: a NCCL RAS client and a poller that tells stuck communicators from transient skew.
- `journal_writer` / `journal_tail`: the gate journal (JSONL, one line per step per rank), written and followed.

Nothing here is imported by the offline commands, and torch is imported lazily (`ncclforensics[live]`).
"""
