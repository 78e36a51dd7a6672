"""`python -m ncclforensics ...`: the same commands as the console script (for a venv not on PATH)."""

from ncclforensics.cli import cli

cli(prog_name="ncclforensics")
