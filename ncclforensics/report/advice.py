"""What to turn on so that the next incident pins its root: the settings that record each kind of evidence.
Named in every range answer: a setting, or the evidence not given yet where the range already had the kinds a
setting adds (tests check both)."""

FR_SETTINGS = "Flight Recorder dumps (TORCH_NCCL_TRACE_BUFFER_SIZE=20000 TORCH_NCCL_DUMP_ON_TIMEOUT=1)"
LOG_SETTINGS = "NCCL debug logs (NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,COLL)"
# What would tell lookalike collectives apart, by the evidence it adds (a label of the root's `compared`).
PINNING = (("call sites", "Flight Recorder dumps with call stacks (TORCH_NCCL_TRACE_BUFFER_SIZE=20000 "
                          "TORCH_NCCL_DUMP_ON_TIMEOUT=1)"),
           ("tags", "per-collective fingerprint traces with tags, steps and expected sums"),
           ("steps", "a gate journal with steps"))
