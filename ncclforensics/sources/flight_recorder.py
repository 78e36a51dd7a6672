"""PyTorch Flight Recorder dumps: the pickle ProcessGroupNCCL writes on a timeout, and `_dump_nccl_trace_json`.

One dump is one process's ring buffer. Each entry of `entries` becomes one row of the collectives frame:

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
from operator import itemgetter
from pathlib import PurePath

import polars as pl

from ..errors import SourceError
from ..model import (
    COLLECTIVE_SCHEMA,
    CommInfo,
    Diagnostic,
    Evidence,
    FormatFacts,
    Location,
    ProcessIdentity,
    ProgressReport,
    Severity,
    SourceFormat,
    conform,
)
from ..model.kinds import P2P_SUFFIX, EventState, normalize_dtype, normalize_op
from .base import InputFile, unreadable
from .safe_pickle import MAX_LOAD_BYTES, clip, load_pickle, no_gc, show

MAX_DUMP_BYTES = MAX_LOAD_BYTES // 24  # a load takes at least ~24 bytes of memory a byte of pickle

TOP_KEYS = frozenset({"version", "entries", "pg_config", "pg_status", "comm_lib_version", "nccl_version",
                      "xccl_version", "nccl_comm_state"})
# Entry fields of schema 1.1-2.10 (section 1.6 and 1.9 of the FR notes); later fields are reported, not fatal.
ENTRY_KEYS = frozenset({
    "frames", "record_id", "pg_id", "process_group", "thread_name", "thread_id", "collective_seq_id", "p2p_seq_id",
    "op_id", "profiling_name", "time_created_ns", "duration_ms", "input_sizes", "input_dtypes", "output_sizes",
    "output_dtypes", "state", "time_discovered_started_ns", "time_discovered_completed_ns", "retired", "timeout_ms",
    "is_p2p", "seq_id",
})
STATES = {"scheduled": EventState.LAUNCHED.value, "started": EventState.STARTED.value,
          "completed": EventState.COMPLETED.value}
# Frames inside PyTorch itself; the call site is the innermost frame outside them (the user's code path).
_TORCH_FRAME = re.compile(r"(?:site|dist)-packages/torch/|(?:^|/)torch/(?:distributed|csrc|lib|_C)(?:/|\b)")
# FR profiling names whose op is not NCCL's name once the backend prefix is gone (section 1.8 of the FR notes).
_FR_OPS = {
    "all_reduce_barrier": "AllReduce",  # barrier() is an AllReduce of one element as NCCL sees it
    "reduce_scatter_coalesced": "ReduceScatter",  # nccl:REDUCE_SCATTER_coalesced terminator
    "_broadcast_oop": "Broadcast",  # pieces of an uneven all_gather
    "_reduce_oop": "Reduce",  # pieces of an uneven reduce_scatter
    "all_to_all_single": "AllToAll",
}
_P2P_NAME = re.compile(r"^(send|recv)\s+(\d+)\s*(?:->|<-)\s*(\d+|\?)\s*$", re.I)
_DECIMAL = re.compile(r"-?[0-9]{1,18}")  # the JSON dump's pg_status values: "41", "-1"
_RANK = re.compile(r"\s*[0-9]{1,11}\s*")
_MAX_WARNINGS = 20  # per kind of problem; the rest are counted in one summary line
_INT64 = 2**63

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


class _Bad(Exception):
    """One entry (or field) does not have the documented shape."""


def _kind(value: object) -> str:
    return "null" if value is None else type(value).__name__


def _clean(text: str) -> str:
    """A string polars and terminals accept: lone surrogates from a broken pickle become '?'."""
    return text if text.isascii() else text.encode("utf-8", "replace").decode("utf-8")


def _name(value: object, what: str) -> str:
    """A process-group name as text: a string, or an int64 (1.x pg_id keys); never str() of anything bigger,
    which for a container shared by reference in a pickle is exponentially long, for a huge int a ValueError."""
    if type(value) is str:
        return _clean(value)
    return str(_int(value, what))


def _int(value: object, what: str) -> int:
    """An int64, also from the decimal strings the JSON dump uses for pg_status."""
    if type(value) is str and _DECIMAL.fullmatch(value):
        value = int(value)
    if type(value) is not int or not -_INT64 <= value < _INT64:
        raise _Bad(f"{what} is {show(value)}, not an integer")
    return value


def parse_ranks(value: object) -> tuple[int, ...]:
    """`"[0, 1, 2, 3]"` (2.x), `"[0,1]"` (ports) or `[0, 1]` (1.x) -> (0, 1, ...); never evaluates the text."""
    if isinstance(value, str):
        body = value.strip()
        if not (body.startswith("[") and body.endswith("]")):
            raise _Bad(f"ranks {show(value)} is not a list like [0, 1]")
        body = body[1:-1].strip()
        if not body:
            return ()
        parts = body.split(",")
        if not all(_RANK.fullmatch(p) for p in parts):
            raise _Bad(f"ranks {show(value)} is not a list of integers")
        return tuple(int(p.strip()) for p in parts)  # strip: \s takes \x1f, which int() does not
    if isinstance(value, (list, tuple)):
        return tuple(_int(r, "a rank") for r in value)
    raise _Bad(f"ranks is {_kind(value)}, not a list")


def rank_from_name(name: str) -> int | None:
    """The global rank PyTorch appends to TORCH_FR_DUMP_TEMP_FILE: `fr_rank3`, `comm_lib_trace_rank_3.json` -> 3."""
    stem = PurePath(name).name
    while True:
        cut = re.sub(r"\.[A-Za-z][A-Za-z0-9]*$", "", stem)
        if cut == stem or not cut:
            break
        stem = cut
    found = re.search(r"(?<![0-9])([0-9]{1,7})$", stem)
    return int(found.group(1)) if found else None


def _op_of(profiling_name: str) -> tuple[str, int | None]:
    """`nccl:all_reduce` -> (AllReduce, None); `nccl:send 0->1` -> (Send, 1): the peer is a comm rank."""
    if type(profiling_name) is not str:
        raise _Bad(f"profiling_name is {_kind(profiling_name)}, not a string")
    raw = profiling_name.split(":", 1)[1] if ":" in profiling_name else profiling_name
    raw = raw.strip()
    if not raw:
        raise _Bad(f"profiling_name {show(profiling_name)} names no op")
    p2p = _P2P_NAME.match(raw)
    if p2p:
        peer = p2p.group(3)
        if len(peer) > 18:
            raise _Bad(f"the peer in {show(profiling_name)} is out of range")
        return normalize_op(p2p.group(1)), (int(peer) if peer.isdigit() else None)
    key = raw.lower()
    if key in _FR_OPS:
        return _FR_OPS[key], None
    return _clean(normalize_op(raw)), None


class _Groups:
    """pg_config read once: global ranks per process group, and this rank's place in each."""

    def __init__(self, rank: int | None) -> None:
        self.rank = rank
        self.ranks: dict[str, tuple[int, ...]] = {}
        self.places: dict[str, tuple[int | None, int | None]] = {}
        self.unknown: list[str] = []
        self.outside: list[str] = []

    def place(self, pg: str) -> tuple[int | None, int | None]:
        """(comm_rank, comm_size) of this dump's rank in process group `pg`."""
        found = self.places.get(pg)
        if found is None:
            ranks = self.ranks.get(pg)
            if ranks is None:
                self.unknown.append(pg)
                found = (None, None)
            elif self.rank is not None and self.rank in ranks:
                found = (ranks.index(self.rank), len(ranks))
            else:
                if self.rank is not None:
                    self.outside.append(pg)
                found = (None, len(ranks) or None)
            self.places[pg] = found
        return found


class _Problems:
    """Warnings about entries: the first few one by one, the rest in one summary line."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.items: list[Diagnostic] = []
        self.skipped = 0
        self.unknown: set[str] = set()  # entry keys of no known schema version

    def entry(self, index: int, message: str) -> None:
        self.skipped += 1
        if self.skipped <= _MAX_WARNINGS:
            self.items.append(Diagnostic(Location(self.name, record=index), f"{message}; entry skipped",
                                         Severity.WARNING))

    def close(self) -> list[Diagnostic]:
        if self.unknown:
            names = ", ".join(sorted(clip(k, 40) for k in self.unknown)[:10])
            self.items.insert(0, Diagnostic(Location(self.name), (
                f"entries carry fields no known schema version has, ignored: {names}"), Severity.WARNING))
        if self.skipped > _MAX_WARNINGS:
            self.items.append(Diagnostic(Location(self.name), f"{self.skipped - _MAX_WARNINGS} more malformed "
                                         f"entries skipped ({self.skipped} in all)", Severity.WARNING))
        return self.items


def _numel(sizes: object) -> int | None:
    """Elements of the first tensor of a size list: [[4, 1024], [8]] -> 4096; [] -> None."""
    if type(sizes) is not list and type(sizes) is not tuple:
        raise _Bad(f"a size list is {_kind(sizes)}, not a list")
    if not sizes:
        return None
    shape = sizes[0]
    if type(shape) is not list and type(shape) is not tuple:
        raise _Bad(f"a tensor shape is {_kind(shape)}, not a list")
    count = 1
    for dim in shape:
        if type(dim) is not int or dim < 0:
            raise _Bad(f"a tensor dimension is {show(dim)}")
        count *= dim
        if count >= _INT64:
            raise _Bad("a tensor has more than 2**63 elements")
    return count


_COLUMNS = ("record", "comm", "comm_rank", "comm_size", "seq", "op", "root", "count", "dtype", "state", "callsite",
            "stack", "time")

def entries_frame(entries: list, name: str, groups: _Groups, problems: _Problems) -> pl.DataFrame:
    """The collectives frame of a dump's entries: one pass, one tuple per entry, no per-entry objects.

    Everything that repeats (process groups, profiling names, dtypes, frame file names) is looked up once.
    """
    rows = []
    add = rows.append
    ops: dict[object, tuple[str, int | None]] = {}
    dtypes: dict[object, str] = {}
    inside_torch: dict[object, bool] = {}
    places: dict[object, tuple] = {}
    sizes_seen: set[int] = set()  # key counts of the entries whose keys were checked against ENTRY_KEYS
    sites: dict[int, tuple] = {}  # id of a frames list (alive as long as `entries`) -> (call site, stack)
    by_value: dict[tuple, tuple] = {}  # (file names, lines) of a frames list -> (call site, stack)
    for index, entry in enumerate(entries):
        try:
            if len(entry) not in sizes_seen:
                sizes_seen.add(len(entry))
                problems.unknown.update(k for k in entry.keys() - ENTRY_KEYS if isinstance(k, str))
            pg = entry.get("process_group")
            if pg is None:
                key = entry["pg_id"]  # 1.x dumps name the group by pg_id only
            elif type(pg) is tuple or type(pg) is list:
                key = pg[0]
            else:
                raise _Bad(f"process_group is {show(pg)}, not (name, desc)")
            place = places.get(key)
            if place is None:
                place = places[key] = _place(key, pg, groups)
            if entry.get("is_p2p"):
                seq = entry["p2p_seq_id"]
                comm = place[1]
            else:
                seq = entry["collective_seq_id"] if "collective_seq_id" in entry else entry["seq_id"]
                comm = place[0]
            if type(seq) is not int or not 0 <= seq < _INT64:
                raise _Bad(f"its sequence number is {show(seq)}")
            profiling_name = entry["profiling_name"]
            op = ops.get(profiling_name)
            if op is None:
                op = ops[profiling_name] = _op_of(profiling_name)
            sizes = entry.get("output_sizes" if op[0] == "ReduceScatter" else "input_sizes")
            if sizes:
                shape = sizes[0]
                count = shape[0] if len(shape) == 1 and type(shape[0]) is int and 0 <= shape[0] < _INT64 \
                    else _numel(sizes)
            else:
                count = None if sizes is None else _numel(sizes)
            types = entry.get("input_dtypes")
            dtype = None
            if types:
                dtype = dtypes.get(types[0])
                if dtype is None:
                    dtype = dtypes[types[0]] = _dtype_of(types[0])
            state = entry.get("state")
            if state is not None:
                state = STATES.get(state) or _bad_state(state)
            created = entry.get("time_created_ns")
            if created is not None:
                if type(created) is not int or not 0 <= created < _INT64:
                    raise _Bad(f"time_created_ns is {show(created)}, not a time in ns")
                created /= 1e9
            site = _NO_SITE
            frames = entry.get("frames")
            if frames:
                # A pickle may hand many entries one (memoised) list: walk each list once, or a small file of
                # shared long lists costs entries x frames.
                site = sites.get(id(frames), _UNSEEN)
                if site is _UNSEEN:
                    site = sites[id(frames)] = _cached_call_site(frames, inside_torch, by_value)
        except KeyError as e:
            problems.entry(index, f"malformed entry: no field {show(e.args[0] if e.args else '?')}")
            continue
        except _Bad as e:
            problems.entry(index, f"malformed entry: {e}")
            continue
        except (TypeError, AttributeError, IndexError, ValueError, OverflowError) as e:
            problems.entry(index, f"malformed entry: {type(e).__name__} ({clip(str(e), 80)})")
            continue
        add((index, comm, place[2], place[3], seq, op[0], op[1], count, dtype, state, site[0], site[1], created))
    columns = list(zip(*rows)) if rows else [()] * len(_COLUMNS)
    frame = pl.DataFrame({c: list(v) for c, v in zip(_COLUMNS, columns)},
                         schema={c: COLLECTIVE_SCHEMA[c] for c in _COLUMNS})
    return conform(frame.with_columns(pl.lit(_clean(name), pl.String).alias("file"),
                                      pl.lit(groups.rank, pl.Int64).alias("rank")))


_UNSEEN = object()
_NO_SITE = (None, None)


def _cached_call_site(frames: object, inside_torch: dict[object, bool], by_value: dict[tuple, tuple]
                      ) -> tuple[str | None, str | None]:
    """_call_site, looked up by the frames' file names and lines: every entry of a dump has a frames list of its
    own, but a loop issues a handful of distinct ones. Only lists of str names and int lines are looked up, where
    _call_site is a function of those values alone (a line of 1.0 or True is equal to 1 but not valid)."""
    try:
        files, lines = tuple(map(_FILENAME, frames)), tuple(map(_LINE, frames))
    except (KeyError, TypeError):  # not every frame a dict with both (a frame inside torch needs no line)
        return _call_site(frames, inside_torch)
    if not {*map(type, files)} <= _STR or not {*map(type, lines)} <= _INT_TYPE:
        return _call_site(frames, inside_torch)
    key = (files, lines)
    site = by_value.get(key)
    if site is None:
        site = by_value[key] = _call_site(frames, inside_torch)
    return site


_FILENAME, _LINE = itemgetter("filename"), itemgetter("line")
_STR, _INT_TYPE = {str}, {int}


def _call_site(frames: object, inside_torch: dict[object, bool]) -> tuple[str | None, str | None]:
    """(`file:line` of the first frame outside torch, every frame outside torch innermost first joined by
    " < "), or (None, None). The stack tells apart collectives that one wrapper function issues for many layers."""
    outside = []
    for frame in frames:
        filename = frame["filename"]
        inside = inside_torch.get(filename)
        if inside is None:
            inside = inside_torch[filename] = _inside_torch(filename)
        if not inside:
            line = frame["line"]
            if type(line) is not int:
                raise _Bad(f"a frame's line is {_kind(line)}, not an integer")
            outside.append(f"{_clean(filename)}:{line}")
    return (outside[0], " < ".join(outside)) if outside else _NO_SITE


def _place(key: object, pg: object, groups: _Groups) -> tuple[str, str, int | None, int | None]:
    """(comm, p2p comm, comm_rank, comm_size) for a process group named `key` (2.x name or 1.x pg_id)."""
    if pg is not None and type(key) is not str:
        raise _Bad(f"process_group is {show(pg)}, not (name, desc)")
    name = _clean(key) if type(key) is str else str(_int(key, "pg_id"))
    return (name, name + P2P_SUFFIX) + groups.place(name)


def _dtype_of(value: object) -> str:
    if type(value) is not str:
        raise _Bad(f"input_dtypes[0] is {_kind(value)}, not a string")
    return _clean(normalize_dtype(value))


def _bad_state(value: object) -> str:
    raise _Bad(f"state {show(value)} is none of scheduled, started, completed")


def _inside_torch(filename: object) -> bool:
    if type(filename) is not str:
        raise _Bad(f"a frame's filename is {_kind(filename)}, not a string")
    return not filename or bool(_TORCH_FRAME.search(filename))


def _read_groups(dump: dict, name: str, evidence: Evidence) -> dict[str, tuple[int, ...]]:
    """pg_config -> CommInfo records, and global ranks per process-group name."""
    config = dump.get("pg_config")
    ranks_of: dict[str, tuple[int, ...]] = {}
    if config is None:
        return ranks_of
    if not isinstance(config, dict):
        evidence.problems.append(Diagnostic(Location(name), f"pg_config is {_kind(config)}, not a dict; ignored",
                                            Severity.WARNING))
        return ranks_of
    for key, value in config.items():
        loc = Location(name, record=key if type(key) is int and -_INT64 <= key < _INT64 else None, field="pg_config")
        try:
            if isinstance(value, dict):  # 2.x: {name: {"name", "desc", "ranks": "[0, 1]"}}
                pg = _name(value.get("name", key), "its name")
                desc = value.get("desc")
                ranks = parse_ranks(value.get("ranks", "[]"))
            else:  # 1.x: {pg_id: [0, 1, 2, 3]}
                pg, desc, ranks = _name(_int(key, "pg_config key"), "pg_config key"), None, parse_ranks(value)
        except _Bad as e:
            evidence.problems.append(Diagnostic(loc, f"process group {show(key)}: {e}; ignored",
                                                Severity.WARNING))
            continue
        ranks_of[pg] = ranks
        evidence.comm_infos.append(CommInfo(loc=loc, comm=pg, name=pg,
                                            desc=_clean(desc) if isinstance(desc, str) else None,
                                            ranks=ranks, size=len(ranks)))
    return ranks_of


def _global_rank(dump: dict, ranks_of: dict[str, tuple[int, ...]], name: str,
                 evidence: Evidence) -> int | None:
    """The rank that wrote the dump: stated in the content, implied by pg_config, or at the end of the file name.

    pg_config lists only the groups this process is a member of, so the ranks common to all of them include it;
    when exactly one rank is common (a one-rank group, or `sub_pg` [1] beside the world group) that is the rank.
    """
    stated = dump.get("rank")
    content = stated if type(stated) is int and 0 <= stated < _INT64 else None
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
        evidence.problems.append(Diagnostic(Location(name), f"pg_status is {_kind(status)}, not a dict; ignored",
                                            Severity.WARNING))
        return
    names: dict[str, str] = {}
    for entry in entries:  # pg_id -> pg name, from the entries that carry both
        if isinstance(entry, dict):
            pg, pg_id = entry.get("process_group"), entry.get("pg_id")
            if isinstance(pg, (list, tuple)) and pg and isinstance(pg[0], str) and type(pg_id) is int:
                names.setdefault(str(pg_id), _clean(pg[0]))
                if len(names) == len(status):
                    break
    config = [c.comm for c in evidence.comm_infos]
    for key, value in status.items():
        loc = Location(name, record=int(key.strip()) if isinstance(key, str) and _RANK.fullmatch(key) else None,
                       field="pg_status")
        try:
            if not isinstance(value, dict):
                raise _Bad(f"is {_kind(value)}, not a dict")
            seqs = [value.get(f"last_{what}_collective") for what in ("enqueued", "started", "completed")]
            enqueued, started, completed = (None if v is None else _int(v, "a last_*_collective value")
                                            for v in seqs)
        except _Bad as e:
            evidence.problems.append(Diagnostic(loc, f"pg_status {show(key)} {e}; ignored", Severity.WARNING))
            continue
        try:
            key = _name(key, "a pg_status key")
        except _Bad as e:
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
            f"not a Flight Recorder dump: the top level is {_kind(dump)}, not a dict with `entries` and `version`")))
        return
    if not TOP_KEYS.intersection(k for k in dump if isinstance(k, str)):
        evidence.problems.append(Diagnostic(Location(name), (
            "not a Flight Recorder dump: a dict without `version`, `entries`, `pg_config` or `pg_status`")))
        return
    version = dump.get("version")
    if isinstance(version, str):
        evidence.version = _clean(version)
        if not re.fullmatch(r"[12]\.\d+", version):
            evidence.problems.append(Diagnostic(Location(name), (
                f"schema version {clip(version, 20)} is not one this parser knows (1.x, 2.2-2.10); reading it as "
                f"2.x"), Severity.WARNING))
    else:
        evidence.problems.append(Diagnostic(Location(name), "the dump states no schema version", Severity.WARNING))
    entries = dump.get("entries", [])
    if not isinstance(entries, list):
        evidence.problems.append(Diagnostic(Location(name), f"`entries` is {_kind(entries)}, not a list"))
        entries = []
    ranks_of = _read_groups(dump, name, evidence)
    rank = _global_rank(dump, ranks_of, name, evidence)
    groups = _Groups(rank)
    groups.ranks = ranks_of
    for info in evidence.comm_infos:
        if rank is not None and rank in info.ranks:
            evidence.identities.append(ProcessIdentity(loc=info.loc, rank=rank, comm=info.comm,
                                                       comm_rank=info.ranks.index(rank), comm_size=len(info.ranks)))
    problems = _Problems(name)
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
            if dump is not None:
                read_dump(dump, file.name, evidence)
            del dump  # freed here, by reference counting, while the collector is still off
        return evidence
