"""The entries of a Flight Recorder dump, each one row of the collectives frame (flight_recorder.py reads the rest).

Values are checked one by one: an entry with a field of the wrong type is reported at its file#entries[i] and
left out; the others are read.
"""

from __future__ import annotations

import re
from operator import itemgetter
from pathlib import PurePath

import polars as pl

from ..model import COLLECTIVE_SCHEMA, Diagnostic, Location, Severity, conform
from ..model.kinds import P2P_SUFFIX, EventState, normalize_dtype, normalize_op
from .safe_pickle import clip, show

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
RANK_TEXT = re.compile(r"\s*[0-9]{1,11}\s*")
_MAX_WARNINGS = 20  # per kind of problem; the rest are counted in one summary line
INT64 = 2**63



class BadValue(Exception):
    """One entry (or field) does not have the documented shape."""


def kind_of(value: object) -> str:
    return "null" if value is None else type(value).__name__


def clean(text: str) -> str:
    """A string polars and terminals accept: lone surrogates from a broken pickle become '?'."""
    return text if text.isascii() else text.encode("utf-8", "replace").decode("utf-8")


def name_of(value: object, what: str) -> str:
    """A process-group name as text: a string, or an int64 (1.x pg_id keys); never str() of anything bigger,
    which for a container shared by reference in a pickle is exponentially long, for a huge int a ValueError."""
    if type(value) is str:
        return clean(value)
    return str(int_of(value, what))


def int_of(value: object, what: str) -> int:
    """An int64, also from the decimal strings the JSON dump uses for pg_status."""
    if type(value) is str and _DECIMAL.fullmatch(value):
        value = int(value)
    if type(value) is not int or not -INT64 <= value < INT64:
        raise BadValue(f"{what} is {show(value)}, not an integer")
    return value


def parse_ranks(value: object) -> tuple[int, ...]:
    """`"[0, 1, 2, 3]"` (2.x), `"[0,1]"` (ports) or `[0, 1]` (1.x) -> (0, 1, ...); never evaluates the text."""
    if isinstance(value, str):
        body = value.strip()
        if not (body.startswith("[") and body.endswith("]")):
            raise BadValue(f"ranks {show(value)} is not a list like [0, 1]")
        body = body[1:-1].strip()
        if not body:
            return ()
        parts = body.split(",")
        if not all(RANK_TEXT.fullmatch(p) for p in parts):
            raise BadValue(f"ranks {show(value)} is not a list of integers")
        return tuple(int(p.strip()) for p in parts)  # strip: \s takes \x1f, which int() does not
    if isinstance(value, (list, tuple)):
        return tuple(int_of(r, "a rank") for r in value)
    raise BadValue(f"ranks is {kind_of(value)}, not a list")


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
        raise BadValue(f"profiling_name is {kind_of(profiling_name)}, not a string")
    raw = profiling_name.split(":", 1)[1] if ":" in profiling_name else profiling_name
    raw = raw.strip()
    if not raw:
        raise BadValue(f"profiling_name {show(profiling_name)} names no op")
    p2p = _P2P_NAME.match(raw)
    if p2p:
        peer = p2p.group(3)
        if len(peer) > 18:
            raise BadValue(f"the peer in {show(profiling_name)} is out of range")
        return normalize_op(p2p.group(1)), (int(peer) if peer.isdigit() else None)
    key = raw.lower()
    if key in _FR_OPS:
        return _FR_OPS[key], None
    return clean(normalize_op(raw)), None


class Groups:
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


class Problems:
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
        raise BadValue(f"a size list is {kind_of(sizes)}, not a list")
    if not sizes:
        return None
    shape = sizes[0]
    if type(shape) is not list and type(shape) is not tuple:
        raise BadValue(f"a tensor shape is {kind_of(shape)}, not a list")
    count = 1
    for dim in shape:
        if type(dim) is not int or dim < 0:
            raise BadValue(f"a tensor dimension is {show(dim)}")
        count *= dim
        if count >= INT64:
            raise BadValue("a tensor has more than 2**63 elements")
    return count


_COLUMNS = ("record", "comm", "comm_rank", "comm_size", "seq", "op", "root", "count", "dtype", "state", "callsite",
            "stack", "time")

def entries_frame(entries: list, name: str, groups: Groups, problems: Problems) -> pl.DataFrame:
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
                raise BadValue(f"process_group is {show(pg)}, not (name, desc)")
            place = places.get(key)
            if place is None:
                place = places[key] = _place(key, pg, groups)
            if entry.get("is_p2p"):
                seq = entry["p2p_seq_id"]
                comm = place[1]
            else:
                seq = entry["collective_seq_id"] if "collective_seq_id" in entry else entry["seq_id"]
                comm = place[0]
            if type(seq) is not int or not 0 <= seq < INT64:
                raise BadValue(f"its sequence number is {show(seq)}")
            profiling_name = entry["profiling_name"]
            op = ops.get(profiling_name)
            if op is None:
                op = ops[profiling_name] = _op_of(profiling_name)
            sizes = entry.get("output_sizes" if op[0] == "ReduceScatter" else "input_sizes")
            if sizes:
                shape = sizes[0]
                count = shape[0] if len(shape) == 1 and type(shape[0]) is int and 0 <= shape[0] < INT64 \
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
                if type(created) is not int or not 0 <= created < INT64:
                    raise BadValue(f"time_created_ns is {show(created)}, not a time in ns")
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
        except BadValue as e:
            problems.entry(index, f"malformed entry: {e}")
            continue
        except (TypeError, AttributeError, IndexError, ValueError, OverflowError) as e:
            problems.entry(index, f"malformed entry: {type(e).__name__} ({clip(str(e), 80)})")
            continue
        add((index, comm, place[2], place[3], seq, op[0], op[1], count, dtype, state, site[0], site[1], created))
    columns = list(zip(*rows)) if rows else [()] * len(_COLUMNS)
    frame = pl.DataFrame({c: list(v) for c, v in zip(_COLUMNS, columns)},
                         schema={c: COLLECTIVE_SCHEMA[c] for c in _COLUMNS})
    return conform(frame.with_columns(pl.lit(clean(name), pl.String).alias("file"),
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
                raise BadValue(f"a frame's line is {kind_of(line)}, not an integer")
            outside.append(f"{clean(filename)}:{line}")
    return (outside[0], " < ".join(outside)) if outside else _NO_SITE


def _place(key: object, pg: object, groups: Groups) -> tuple[str, str, int | None, int | None]:
    """(comm, p2p comm, comm_rank, comm_size) for a process group named `key` (2.x name or 1.x pg_id)."""
    if pg is not None and type(key) is not str:
        raise BadValue(f"process_group is {show(pg)}, not (name, desc)")
    name = clean(key) if type(key) is str else str(int_of(key, "pg_id"))
    return (name, name + P2P_SUFFIX) + groups.place(name)


def _dtype_of(value: object) -> str:
    if type(value) is not str:
        raise BadValue(f"input_dtypes[0] is {kind_of(value)}, not a string")
    return clean(normalize_dtype(value))


def _bad_state(value: object) -> str:
    raise BadValue(f"state {show(value)} is none of scheduled, started, completed")


def _inside_torch(filename: object) -> bool:
    if type(filename) is not str:
        raise BadValue(f"a frame's filename is {kind_of(filename)}, not a string")
    return inside_torch(filename)


def inside_torch(filename: str) -> bool:
    """Whether a frame of this file is PyTorch's own (a collective's call site is the innermost frame outside)."""
    return not filename or bool(_TORCH_FRAME.search(filename))
