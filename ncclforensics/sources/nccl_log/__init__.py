"""NCCL_DEBUG logs (`NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,COLL`): collectives, comm identities, errors.

A file holds one process or many: lines of several processes interleave and are told apart by their
`host:pid:tid` header. Lines may carry NCCL's timestamp (`[2026-11-29 08:56:01] `, also sub-second), a launcher
prefix (`[1,0]<stdout>:`, `[rank0]:`, `0: `, `(RayTrainWorker pid=.., ip=..) `, grep's `LOG1.0.txt:`), `> `
quoting, trailing blanks and CRLF. See nccl_formats.md §4, §5.1 and §7.

What each kind of line becomes:
- A COLL line (`AllReduce: opCount 1d sendbuff .. count 8192 datatype 7 op 0 root 0 comm 0x2571a990 [nranks=4]
  stream (nil)`) is one row of the collectives frame, state `launched`:
  - `seq` is the 1-based ordinal of the line among the COLL lines of the same communicator in the same process
    (host, pid, comm pointer, INIT), not the opCount: grouped ops share one and 1-rank comms keep it at 0. The
    opCount is kept in `opcount` by the line reader (logs under 1 MiB: pasted fragments, where the ordinal means
    nothing); the keyed reader of big logs masks it and leaves `opcount` null. Send/Recv lines go to comm
    `<comm>:p2p` with their own seq (model/kinds.py, P2P_SUFFIX), as the Flight Recorder keeps `p2p_seq_id`.
  - `comm` is the commId hash (`0x%016x`) of the most recent INIT line for that pointer in that process before
    the COLL line (NCCL reuses pointers after a destroy). With no such INIT line `comm` is `host:pid:pointer`
    (`?` for an unknown host or pid) and `comm_rank` is null, and a warning says so once per communicator.
  - `rank` (global) is the process's comm rank in the largest communicator it belongs to in this file (the one
    with most ranks; ties: the one initialised first). That is the world rank when the world communicator's
    INIT line is in the file: NCCL never logs a global rank. A process driving several GPUs (one rank per device,
    `ncclCommInitAll`) gets per device the rank of the communicator's `cudaDev`. Null without an INIT line.
  - `time` comes from a timestamp prefix (UTC assumed; NCCL logs local time), else null. INFO lines carry one
    only with `NCCL_DEBUG_TIMESTAMP_LEVELS=WARN,INFO`.
- INIT lines (`ncclCommInitRankConfig comm 0x.. rank 0 nranks 4 cudaDev 0 nvmlDev 0 busId 60 commId 0x.. -
  Init COMPLETE`, the START form, `[Rank N]` from 2.29, the split/shrink forms, the older `comm 0x.. rank 0 nRanks
  4 nNodes ..`) become one ProcessIdentity per communicator a process joined. Split lines print no commId; from
  2.26.2 the hash is derived from the parent's (`child_comm_hash`); before that it cannot be known.
- WARN lines become WatchdogEvents: kind `abort`, `async_error` or `timeout` where the message says so, else
  `nccl_warn`. `Abort COMPLETE` INFO lines (and an Abort START that never completed) are kind `abort`.
- `NCCL version 2.28.9+cuda13.0` gives Evidence.version `2.28.9`.
A line with a COLL body (`<op>: opCount `) that does not parse is an error diagnostic (a warning for a cut
last line); a COLL line without a header is kept and attributed by its comm pointer where only one process
uses it. Every other line is ignored.

Speed: every line is matched by polars' (Rust, linear-time) regex engine, column-wise. A COLL line is cut down
to its shape (what stays the same from call to call), and only the distinct shapes are parsed field by field;
Python loops only over the few INIT, WARN and version lines. A million COLL lines take a few seconds and well
under 1 GiB (benchmarks/parse_nccl_log.py).

The package: two readers turn a file into the same `LogLines` (table.py): lines.py splits the content in memory,
keyed.py streams a big plain log and reads each distinct line once. history.py reads the INIT, teardown, WARN
and version lines; table.py ties the COLL lines to that history and assembles the collectives frame.
"""

from __future__ import annotations

import polars as pl

from ...model import Evidence, FormatFacts, Location, SourceFormat
from ..base import MAX_TEXT_BYTES, InputFile
from .comm_hash import child_comm_hash, hash_name
from .history import History
from .keyed import read_keyed
from .lines import read_lines, report_long_lines
from .patterns import SNIFF, Problems
from .table import LogLines, collectives

KEYED_MIN_BYTES = 1 << 20  # plain logs from this size on are read by keys (keyed.py)


class NcclLogSource:
    """NCCL_DEBUG output (INFO/WARN lines with a `host:pid:tid` header), one or many processes per file."""

    facts = FormatFacts(SourceFormat.NCCL_LOG, "NCCL debug log", records="collectives", per_rank=True, stream_priority=0,
                        opcount_positions=True, markers=(b": opCount ", b"Init COMPLETE", b"NCCL WARN"), streamed=True)
    format = facts.format

    def sniff(self, head: bytes, text: str) -> float:
        """The fraction of non-blank lines of the head that are NCCL debug lines (0 when there are none)."""
        lines = pl.Series([line for line in text.splitlines() if line.strip()], dtype=pl.String)
        return float(lines.str.contains(SNIFF).mean()) if len(lines) else 0.0

    def parse(self, file: InputFile) -> Evidence:
        """Read the whole log: collectives column-wise, INIT/WARN lines one by one."""
        found = read_keyed(file, KEYED_MIN_BYTES)
        if found is not None:
            try:
                return _evidence(file.name, found, Problems(file.name, []), self.facts)
            except pl.exceptions.PolarsError:  # a line read again that no longer reads: the line reader says what
                pass
        # The line reader holds the content in memory (a few times its size): MAX_TEXT_BYTES at most, as every
        # format read in memory. The logs it gets are small, compressed or odd (UTF-16, CR line ends, bad UTF-8).
        data, diagnostics = file.read_bytes(max_size=MAX_TEXT_BYTES)
        problems = Problems(file.name, diagnostics)
        return _evidence(file.name, read_lines(data, problems), problems, self.facts)


def _evidence(name: str, found: LogLines, problems: Problems, facts: FormatFacts) -> Evidence:
    report_long_lines(problems, found.long_lines)
    history = History(problems)
    history.read(found.misc)
    evidence = Evidence(path=name, format=facts.format, collectives=collectives(found, history, problems), facts=facts)
    evidence.identities = history.identities()
    evidence.watchdog = history.watchdog()
    evidence.version = history.version
    if found.cut_line is not None:
        evidence.cut = Location(name, found.cut_line)
        if not any(p.loc.line == found.cut_line for p in problems.items):
            problems.warn(found.cut_line, "the file ends inside this line (no line feed after it): cut short, so "
                                          "the records end here because the file does")
    evidence.problems = problems.items
    return evidence


__all__ = ["KEYED_MIN_BYTES", "NcclLogSource", "child_comm_hash", "hash_name"]
