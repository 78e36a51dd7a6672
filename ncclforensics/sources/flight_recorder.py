"""PyTorch Flight Recorder dumps: the pickle ProcessGroupNCCL writes on a timeout, and `_dump_nccl_trace_json`.

One dump is one process's ring buffer. Each entry of `entries` becomes one row of the collectives frame
(fr_entries.py):

    {"process_group": ("0", "default_pg"), "collective_seq_id": 50, "profiling_name": "nccl:all_reduce",
     "input_sizes": [[4096]], "input_dtypes": ["Float"], "state": "started", "frames": [..., worker@probe.py:85]}
    -> comm "0", seq 50, op AllReduce, count 4096, dtype float32, state started, callsite "capture/probe.py:85"

P2P entries (`is_p2p`) have their own counter (`p2p_seq_id`) and go to comm "<pg>:p2p". `pg_config` becomes
CommInfo (global ranks per process group) and `pg_status` ProgressReport (last enqueued/started/completed seq).

Pickles are untrusted input: they are loaded by safe_pickle.py, which checks every opcode first and never
imports. A dump that asks for an import is reported as hostile and never executed.
"""

from __future__ import annotations

import codecs
import json
import pickletools
import re

import polars as pl

from ..errors import SourceError
from ..model import (
    CommInfo, Diagnostic, Evidence, FormatFacts, Location, ProcessIdentity, ProgressReport, Severity, SourceFormat,
)
from ..model.kinds import P2P_SUFFIX
from .base import InputFile, unreadable
from .fr_entries import (
    INT64, RANK_TEXT, BadValue, Groups, Problems, clean, entries_frame, int_of, kind_of, name_of, parse_ranks,
    rank_from_name,
)
from .safe_pickle import MAX_LOAD_BYTES, TRUNCATED, clip, load_pickle, no_gc, show

MAX_DUMP_BYTES = MAX_LOAD_BYTES // 24  # a load takes at least ~24 bytes of memory a byte of pickle

TOP_KEYS = frozenset({"version", "entries", "pg_config", "pg_status", "comm_lib_version", "nccl_version",
                      "xccl_version", "nccl_comm_state"})
_UTF16_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)  # a JSON dump saved by a Windows tool


def load_json(data: bytes, name: str) -> tuple[object | None, list[Diagnostic]]:
    """Load a `_dump_nccl_trace_json` dump; malformed JSON is a Diagnostic at its line."""
    try:
        text = data.decode("utf-16" if data.startswith(_UTF16_BOMS) else "utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1 if not data.startswith(_UTF16_BOMS) else None
        return None, [Diagnostic(Location(name, line), "not a Flight Recorder dump: JSON that is not UTF-8 or UTF-16")]
    try:
        with no_gc():
            return json.loads(text), []
    except json.JSONDecodeError as e:
        return None, [Diagnostic(Location(name, e.lineno), f"not valid JSON: {e.msg} (column {e.colno})")]
    except (RecursionError, ValueError, MemoryError) as e:
        return None, [Diagnostic(Location(name), f"not a readable JSON dump: {type(e).__name__}")]


# ---------------------------------------------------------------------------------------------------------------
# Detection


def _sniff_pickle(head: bytes) -> float:
    """0.95 for a pickled dict whose first keys are FR keys, 0.3 for any other pickle (so hostile ones are seen)."""
    if head[:1] != b"\x80" or len(head) < 3 or not 2 <= head[1] <= 5:
        if re.match(rb"c[A-Za-z_][\w.]*\n[A-Za-z_][\w.]*\n[\x28\x29\x4eSVIpqt\x80]", head):
            return 0.3  # protocol 0 pickle that starts by importing something
        return 0.0
    names: list[str] = []
    try:
        for index, (op, arg, _) in enumerate(pickletools.genops(head)):
            names.append(op.name)
            if isinstance(arg, str) and arg in TOP_KEYS and "EMPTY_DICT" in names[:3]:
                return 0.95
            if index > 64:
                break
    except Exception:  # noqa: BLE001 - the head ends mid-opcode, or is no pickle after all
        pass
    return 0.3 if len(names) > 1 else 0.0


def _sniff_json(text: str) -> float:
    if not text.lstrip().startswith("{"):
        return 0.0
    if '"pg_config"' in text or '"profiling_name"' in text or '"collective_seq_id"' in text:
        return 0.9
    if '"entries"' in text and '"version"' in text:
        return 0.5
    return 0.0


# ---------------------------------------------------------------------------------------------------------------
# Interpretation


def _read_groups(dump: dict, name: str, evidence: Evidence) -> dict[str, tuple[int, ...]]:
    """pg_config -> CommInfo records, and global ranks per process-group name."""
    config = dump.get("pg_config")
    ranks_of: dict[str, tuple[int, ...]] = {}
    if config is None:
        return ranks_of
    if not isinstance(config, dict):
        evidence.problems.append(Diagnostic(Location(name), f"pg_config is {kind_of(config)}, not a dict; ignored",
                                            Severity.WARNING))
        return ranks_of
    for key, value in config.items():
        loc = Location(name, record=key if type(key) is int and -INT64 <= key < INT64 else None, field="pg_config")
        try:
            if isinstance(value, dict):  # 2.x: {name: {"name", "desc", "ranks": "[0, 1]"}}
                pg = name_of(value.get("name", key), "its name")
                desc = value.get("desc")
                ranks = parse_ranks(value.get("ranks", "[]"))
            else:  # 1.x: {pg_id: [0, 1, 2, 3]}
                pg, desc, ranks = name_of(int_of(key, "pg_config key"), "pg_config key"), None, parse_ranks(value)
        except BadValue as e:
            evidence.problems.append(Diagnostic(loc, f"process group {show(key)}: {e}; ignored",
                                                Severity.WARNING))
            continue
        ranks_of[pg] = ranks
        evidence.comm_infos.append(CommInfo(loc=loc, comm=pg, name=pg,
                                            desc=clean(desc) if isinstance(desc, str) else None,
                                            ranks=ranks, size=len(ranks)))
    return ranks_of


def _global_rank(dump: dict, ranks_of: dict[str, tuple[int, ...]], name: str,
                 evidence: Evidence) -> int | None:
    """The rank that wrote the dump: stated in the content, implied by pg_config, or at the end of the file name.

    pg_config lists only the groups this process is a member of, so the ranks common to all of them include it;
    when exactly one rank is common (a one-rank group, or `sub_pg` [1] beside the world group) that is the rank.
    """
    stated = dump.get("rank")
    content = stated if type(stated) is int and 0 <= stated < INT64 else None
    if content is None:
        common = None
        for ranks in ranks_of.values():
            if ranks:
                common = set(ranks) if common is None else common & set(ranks)
        if common is not None and len(common) == 1:
            content = common.pop()
    from_name = rank_from_name(name)
    if content is not None:
        if from_name is not None and from_name != content:
            evidence.problems.append(Diagnostic(Location(name), (
                f"the file name says rank {from_name} but the dump's process groups say rank {content}; "
                f"using rank {content}"), Severity.WARNING))
        return content
    if from_name is None:
        evidence.problems.append(Diagnostic(Location(name), (
            "cannot tell which global rank wrote this dump (its content does not say and its file name does not "
            "end in the rank, as `<TORCH_FR_DUMP_TEMP_FILE><rank>` does); its collectives have no rank"),
            Severity.WARNING))
    return from_name


def _progress(dump: dict, entries: list, rank: int | None, name: str, evidence: Evidence) -> None:
    """pg_status -> ProgressReport; -1 means "none yet" and becomes null. Keys are pg_id, not the pg name."""
    status = dump.get("pg_status")
    if status is None:
        return
    if not isinstance(status, dict):
        evidence.problems.append(Diagnostic(Location(name), f"pg_status is {kind_of(status)}, not a dict; ignored",
                                            Severity.WARNING))
        return
    names: dict[str, str] = {}
    for entry in entries:  # pg_id -> pg name, from the entries that carry both
        if isinstance(entry, dict):
            pg, pg_id = entry.get("process_group"), entry.get("pg_id")
            if isinstance(pg, (list, tuple)) and pg and isinstance(pg[0], str) and type(pg_id) is int:
                names.setdefault(str(pg_id), clean(pg[0]))
                if len(names) == len(status):
                    break
    config = [c.comm for c in evidence.comm_infos]
    # A pg_id no surviving entry names (the ring overwrote them all) is the one group of pg_config no other pg_id
    # took, where exactly one of each is left: pg_status and pg_config list the same groups, by id and by name.
    unnamed = [key for key in status if isinstance(key, str) and key not in names]
    untaken = [comm for comm in config if comm not in names.values()]
    if len(unnamed) == 1 and len(untaken) == 1 and len(status) == len(config):
        names[unnamed[0]] = untaken[0]
    for key, value in status.items():
        loc = Location(name, record=int(key.strip()) if isinstance(key, str) and RANK_TEXT.fullmatch(key) else None,
                       field="pg_status")
        try:
            if not isinstance(value, dict):
                raise BadValue(f"is {kind_of(value)}, not a dict")
            seqs = [value.get(f"last_{what}_collective") for what in ("enqueued", "started", "completed")]
            enqueued, started, completed = (None if v is None else int_of(v, "a last_*_collective value")
                                            for v in seqs)
        except BadValue as e:
            evidence.problems.append(Diagnostic(loc, f"pg_status {show(key)} {e}; ignored", Severity.WARNING))
            continue
        try:
            key = name_of(key, "a pg_status key")
        except BadValue as e:
            evidence.problems.append(Diagnostic(loc, f"pg_status {show(key)}: {e}; ignored", Severity.WARNING))
            continue
        comm = names.get(key) or (config[0] if len(config) == 1 and len(status) == 1 else key)
        evidence.progress.append(ProgressReport(
            loc=loc, comm=comm, rank=rank,
            last_enqueued=None if enqueued is None or enqueued < 0 else enqueued,
            last_started=None if started is None or started < 0 else started,
            last_completed=None if completed is None or completed < 0 else completed,
        ))


_MAX_SEQ_WARNINGS = 5


def _uneven_ring(entries: list, frame: pl.DataFrame, name: str) -> list[Diagnostic]:
    """Warnings where one dump's ring is not what a ring is: an entry twice (its record_id again), or sequence
    numbers that skip between two consecutive entries of a process group (entries missing inside the ring,
    which would read as collectives the rank never launched). The pieces of one coalesced or uneven collective
    share a number, and Send/Recv streams are left alone (batched P2P ops share one)."""
    found = []
    seen: dict[int, int] = {}
    twice = 0
    for index in frame.get_column("record").to_list() if frame.height else ():  # the entries read, not skipped
        record_id = entries[index].get("record_id")
        if type(record_id) is not int:
            continue
        first = seen.setdefault(record_id, index)
        if first != index:
            twice += 1
            if twice <= _MAX_SEQ_WARNINGS:
                found.append(Diagnostic(Location(name, record=index), (
                    f"record_id {record_id} again (first at entries[{first}]): a duplicated entry, implausible "
                    f"in one ring"), Severity.WARNING))
    if frame.height > 1:
        seqs = frame.filter(~pl.col("comm").str.ends_with(P2P_SUFFIX)).select(
            "record", "comm", "seq", pl.col("seq").shift(1).over("comm").alias("before"),
            pl.col("record").shift(1).over("comm").alias("previous"))
        gaps = seqs.filter((pl.col("record") == pl.col("previous") + 1) & (pl.col("seq") > pl.col("before") + 1))
        for record, comm, seq, before, _ in gaps.head(_MAX_SEQ_WARNINGS).iter_rows():
            found.append(Diagnostic(Location(name, record=record), (
                f"process group {show(comm)}: seq {seq} right after {before}: {seq - before - 1} missing inside "
                f"the ring, implausible in one dump (they would read as collectives never launched)"),
                Severity.WARNING))
        twice += max(gaps.height - _MAX_SEQ_WARNINGS, 0)
    if twice > _MAX_SEQ_WARNINGS:
        found.append(Diagnostic(Location(name), f"{twice - _MAX_SEQ_WARNINGS} more entries repeated or out of "
                                f"sequence", Severity.WARNING))
    return found


def read_dump(dump: object, name: str, evidence: Evidence) -> None:
    """Fill `evidence` from a loaded dump (a dict from pickle or JSON)."""
    if not isinstance(dump, dict):
        evidence.problems.append(Diagnostic(Location(name), (
            f"not a Flight Recorder dump: the top level is {kind_of(dump)}, not a dict with `entries` and `version`")))
        return
    if not TOP_KEYS.intersection(k for k in dump if isinstance(k, str)):
        evidence.problems.append(Diagnostic(Location(name), (
            "not a Flight Recorder dump: a dict without `version`, `entries`, `pg_config` or `pg_status`")))
        return
    version = dump.get("version")
    if isinstance(version, str):
        evidence.version = clean(version)
        if not re.fullmatch(r"[12]\.\d+", version):
            evidence.problems.append(Diagnostic(Location(name), (
                f"schema version {clip(version, 20)} is not one this parser knows (1.x, 2.2-2.10); reading it as "
                f"2.x"), Severity.WARNING))
    else:
        evidence.problems.append(Diagnostic(Location(name), "the dump states no schema version", Severity.WARNING))
    entries = dump.get("entries", [])
    if not isinstance(entries, list):
        evidence.problems.append(Diagnostic(Location(name), f"`entries` is {kind_of(entries)}, not a list"))
        entries = []
    ranks_of = _read_groups(dump, name, evidence)
    rank = _global_rank(dump, ranks_of, name, evidence)
    groups = Groups(rank)
    groups.ranks = ranks_of
    for info in evidence.comm_infos:
        if rank is not None and rank in info.ranks:
            evidence.identities.append(ProcessIdentity(loc=info.loc, rank=rank, comm=info.comm,
                                                       comm_rank=info.ranks.index(rank), comm_size=len(info.ranks)))
    problems = Problems(name)
    evidence.collectives = entries_frame(entries, name, groups, problems)
    evidence.problems.extend(problems.close())
    evidence.problems.extend(_uneven_ring(entries, evidence.collectives, name))
    for pg in groups.unknown:
        evidence.problems.append(Diagnostic(Location(name), (
            f"entries name process group {show(pg)}, which pg_config does not list: no comm rank or size for them"),
            Severity.WARNING))
    for pg in groups.outside:
        evidence.problems.append(Diagnostic(Location(name), (
            f"rank {rank} is not among the ranks of process group {show(pg)}, {show(list(ranks_of[pg]))}: is the "
            f"rank right?"),
            Severity.WARNING))
    _progress(dump, entries, rank, name, evidence)


class FlightRecorderSource:
    """PyTorch Flight Recorder dumps, pickle (files ProcessGroupNCCL writes) or JSON (`_dump_nccl_trace_json`)."""

    facts = FormatFacts(SourceFormat.FLIGHT_RECORDER, "Flight Recorder dump", records="collectives", per_rank=True,
                          job_ranks=True, stream_priority=1, recorder=True, binary=True)
    format = facts.format

    def sniff(self, head: bytes, text: str) -> float:
        """0.95 for a pickled FR dict, 0.9 for FR JSON, 0.3 for any other pickle (to report it), else 0."""
        return max(_sniff_pickle(head), _sniff_json(text) if head[:1] != b"\x80" else 0.0)

    def parse(self, file: InputFile) -> Evidence:
        """Load the dump safely and turn it into collectives, process groups and progress reports."""
        evidence = Evidence(path=file.name, format=self.format, facts=self.facts)
        try:
            size = file.size if file.size is not None else file.path.stat().st_size
            if not file.compressed and size > MAX_DUMP_BYTES:  # refused unread: a sparse 3 GB file is no dump
                raise SourceError(f"{size} bytes, over the {MAX_DUMP_BYTES >> 20} MiB a Flight Recorder dump may "
                                  f"have (its load would take over {MAX_LOAD_BYTES >> 30} GiB); not read")
            data, problems = file.read_bytes(max_line=None)  # a pickle has no lines
        except (SourceError, OSError) as e:  # a decompression bomb, a vanished file
            return unreadable(file, self.facts, e)
        evidence.problems.extend(problems)
        with no_gc():
            if data.startswith(_UTF16_BOMS) or data.lstrip()[:1] in (b"{", b"\xef"):
                dump, problems = load_json(data, file.name)
            else:
                dump, problems = load_pickle(data, file.name)
            evidence.problems.extend(problems)
            evidence.cut = next((p.loc for p in problems if p.message.startswith(TRUNCATED)), None)
            if dump is not None:
                read_dump(dump, file.name, evidence)
            del dump  # freed here, by reference counting, while the collector is still off
        return evidence
