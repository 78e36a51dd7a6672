"""Loading untrusted pickles: plain data only, never an import, never a memory bomb.

A pickle is a program for a stack machine, and a dump folder on shared storage is writable by many. Before
loading, every opcode is checked (`_scan`): an import or object construction is reported as hostile, a memo index
beyond the file (the C unpickler allocates its memo up to the largest index, 64 GiB for 9 bytes) as a memory
bomb, and an opcode plain pickles of protocol 2+ never use as a foreign file. The load itself then uses an
Unpickler whose `find_class` refuses everything, as a second lock. A truncated pickle is read as far as it goes.
"""

from __future__ import annotations

import _compat_pickle
import gc
import io
import pickle
import pickletools
import re
import reprlib
import struct
from contextlib import contextmanager

import polars as pl

from ..model import Diagnostic, Location, Severity


class _Refused(Exception):
    """The pickle asked for more than plain data (an import, a persistent object)."""


class _DataOnlyUnpickler(pickle.Unpickler):
    """Loads dicts, lists, strings and numbers; refuses every import and persistent id."""

    def find_class(self, module: str, name: str):  # noqa: D102 - pickle API
        raise _Refused(f"refused: pickle tries to import {_import_name(module, name)}; never executed")

    def persistent_load(self, pid):  # noqa: D102 - pickle API
        raise _Refused("refused: pickle asks for a persistent object; never executed")


class _SalvagingUnpickler(pickle._Unpickler):  # the pure-Python unpickler: its stacks stay readable after an error
    """Reads a truncated pickle as far as it goes; refuses imports like _DataOnlyUnpickler."""

    find_class = _DataOnlyUnpickler.find_class
    persistent_load = _DataOnlyUnpickler.persistent_load


def _import_name(module: str, name: str) -> str:
    """`module.name` as Python 3 would import it (protocol 2 pickles say `__builtin__` for `builtins`)."""
    module, name = _compat_pickle.NAME_MAPPING.get((module, name), (module, name))
    module = _compat_pickle.IMPORT_MAPPING.get(module, module)
    return f"{clip(module)}.{clip(name)}"


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother, _REPR.maxlist, _REPR.maxdict = 3, 40, 40, 4, 4


def show(value: object) -> str:
    """A value as Python would write it, short and printable however big or deep: 'exploded', [[8]], 7."""
    return clip(_REPR.repr(value), 80)


def clip(value: object, limit: int = 80) -> str:
    text = value if isinstance(value, str) else repr(value)
    text = text.encode("ascii", "backslashreplace").decode("ascii")
    return text if len(text) <= limit else text[:limit] + "..."


# Plain-data opcodes with a fixed-size argument, matched in runs by one regex (each alternative starts with its
# own opcode byte). Memo indices stay below 2**22: the C unpickler allocates its memo up to the largest index it
# is given, so a 9-byte pickle saying LONG_BINPUT 0xffffffff would cost 64 GiB; larger indices are checked one by
# one against the file size below.
_PLAIN_RUN = re.compile(
    rb"(?:[\x28\x29\x30-\x32\x4e\x5d\x61\x65\x73-\x75\x7d\x85-\x89\x8f-\x91\x94]"  # no argument
    rb"|[\x4b\x68\x71\x80].|\x4d..|[\x4a\x6a]....|\x72..[\x00-\x3f]\x00|[\x47\x95].{8}"
    + b"".join(rb"|\x8a\x%02x.{%d}" % (k, k) for k in range(9))  # LONG1 of up to 8 bytes
    + rb")*+",
    re.S,
)
# Length-prefixed plain data: opcode -> (size of the length field, struct format).
_COUNTED = {0x58: (4, "<I"), 0x8c: (1, "<B"), 0x8d: (8, "<Q"), 0x8a: (1, "<B"), 0x8b: (4, "<I"),
            0x43: (1, "<B"), 0x42: (4, "<I"), 0x8e: (8, "<Q"), 0x96: (8, "<Q")}
# Opcodes that import, call or construct objects: never run, reported as hostile.
_HOSTILE = {0x63: "GLOBAL", 0x93: "STACK_GLOBAL", 0x69: "INST", 0x6f: "OBJ", 0x81: "NEWOBJ", 0x92: "NEWOBJ_EX",
            0x52: "REDUCE", 0x62: "BUILD", 0x82: "EXT1", 0x83: "EXT2", 0x84: "EXT4", 0x50: "PERSID",
            0x51: "BINPERSID", 0x97: "NEXT_BUFFER", 0x98: "READONLY_BUFFER"}
_STOP = 0x2e
_LONG_BINPUT = 0x72


# The same walk, sped up: Python's regex engine costs ~30 ns an opcode, which for a 20,000-entry dump is more than
# the load itself. Rust's (polars) runs a DFA instead, but only over UTF-8 text, so the bytes are first mapped onto
# ASCII: bytes below 0x80 stay themselves, bytes from 0x80 become an ASCII code of the same role (an opcode of the
# same argument size, or one that ends the run) that is >= 0x40, so it never passes for a small length or for the
# memo-index bytes checked below. The run also takes length-prefixed strings and bytes shorter than 64 (a string
# is one opcode whose length picks its alternative), which Python's engine leaves to the loop. The alternatives
# start with distinct codes, so the longest run is the only parse: it ends exactly where the loop below would
# next stop. A long run is handed to the DFA a few times per dump; then (or for short dumps) Python's engine.
_ANY = r"[\x{00}-\x{7f}]"
_SMALL = 64


def _ascii_codes() -> bytes:
    table = bytearray(range(128)) + bytearray(b"|" * 128)  # |: no opcode, ends the run
    for byte in (0x85, 0x86, 0x87, 0x88, 0x89, 0x8F, 0x90, 0x91, 0x94):
        table[byte] = 0x7D  # no argument, like EMPTY_DICT
    table[0x80], table[0x95] = 0x4B, 0x47  # PROTO: one byte, like BININT1; FRAME: eight, like BINFLOAT
    table[0x8A] = table[0x8C] = 0x43  # LONG1, SHORT_BINUNICODE: a 1-byte length and data, like SHORT_BINBYTES
    return bytes(table)


def _counted(length_bytes: int) -> str:
    pad = r"\x{00}" * (length_bytes - 1)
    return "(?:" + "|".join(f"\\x{{{n:02x}}}{pad}" + (f"{_ANY}{{{n}}}" if n else "") for n in range(_SMALL)) + ")"


_TO_ASCII = _ascii_codes()
_FAST_RUN = "^(?:" + "|".join([
    r"[\x{28}\x{29}\x{30}-\x{32}\x{4e}\x{5d}\x{61}\x{65}\x{73}-\x{75}\x{7d}]",  # no argument
    rf"[\x{{4b}}\x{{68}}\x{{71}}]{_ANY}", rf"\x{{4d}}{_ANY}{{2}}", rf"[\x{{4a}}\x{{6a}}]{_ANY}{{4}}",
    rf"\x{{72}}{_ANY}{{2}}[\x{{00}}-\x{{3f}}]\x{{00}}", rf"\x{{47}}{_ANY}{{8}}",
    r"\x{58}" + _counted(4), r"\x{42}" + _counted(4),  # BINUNICODE, BINBYTES
    r"\x{43}" + _counted(1),  # SHORT_BINBYTES, SHORT_BINUNICODE, LONG1
]) + ")*"
_FAST_MIN = 1 << 16  # shorter remainders go to Python's engine
_FAST_TIMES = 8  # DFA runs per dump (each slices the remainder)


def _fast_run(text: pl.Series, pos: int) -> int:
    """Where the run of plain opcodes starting at `pos` ends (text: the dump mapped by _TO_ASCII, one string)."""
    return pos + (text.str.slice(pos) if pos else text).str.extract(_FAST_RUN, 0).str.len_bytes()[0]


def _scan(data: bytes) -> tuple[str, int]:
    """Check every opcode up to STOP without building anything.

    Returns (verdict, byte offset): "ok" at STOP, "truncated" at the end of the data, "hostile" at an opcode that
    imports or builds objects, "memo" at an out-of-range memo index, "foreign" at an opcode plain FR pickles never
    use (protocol 0/1 text opcodes, or a byte that is no opcode).
    """
    end = len(data)
    pos = 0
    run = _PLAIN_RUN.match
    text = pl.Series([data.translate(_TO_ASCII)], dtype=pl.Binary).cast(pl.String) if end >= _FAST_MIN else None
    fast = _FAST_TIMES
    while True:
        if text is not None and fast and end - pos >= _FAST_MIN:
            fast -= 1
            pos = _fast_run(text, pos)
        pos = run(data, pos).end()
        if pos >= end:
            return "truncated", pos
        op = data[pos]
        if op == _STOP:
            return "ok", pos
        if op == _LONG_BINPUT:
            if pos + 5 > end:
                return "truncated", pos
            if struct.unpack_from("<I", data, pos + 1)[0] > end:
                return "memo", pos
            pos += 5
        elif op in _COUNTED:
            width, fmt = _COUNTED[op]
            if pos + 1 + width > end:
                return "truncated", pos
            size = struct.unpack_from(fmt, data, pos + 1)[0]
            if pos + 1 + width + size > end:
                return "truncated", pos
            pos += 1 + width + size
        elif op in _HOSTILE:
            return "hostile", pos
        else:
            return "foreign", pos


def _reader(data: bytes) -> io.BufferedReader:
    """A file over `data` with peek(): the C unpickler then reads ahead in blocks (3x faster than BytesIO)."""
    return io.BufferedReader(io.BytesIO(data))


@contextmanager
def no_gc():
    """Loading builds millions of containers; the cyclic GC would rescan them all for nothing."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def load_pickle(data: bytes, name: str) -> tuple[object | None, list[Diagnostic]]:
    """Load a pickle that may only hold plain data; anything else is a Diagnostic, never an exception."""
    where = Location(name)
    verdict, pos = _scan(data)
    if verdict == "hostile":
        return None, [Diagnostic(where, _refusal(data, pos))]
    if verdict == "memo":
        index = struct.unpack_from("<I", data, pos + 1)[0]
        return None, [Diagnostic(where, f"refused: pickle memo index {index} at byte {pos} is beyond the file "
                                        f"({len(data)} bytes), a memory bomb or corruption; never loaded")]
    if verdict == "foreign":
        return None, [Diagnostic(where, f"not a Flight Recorder dump: byte {pos} is {_opcode_name(data[pos])}, "
                                        f"which plain-data pickles of protocol 2+ do not use")]
    if verdict == "truncated":
        return _salvage(data, name)
    problems = []
    try:
        with no_gc():
            value = _DataOnlyUnpickler(_reader(data)).load()
    except _Refused as e:  # unreachable after the scan; kept as a second lock
        return None, [Diagnostic(where, str(e))]
    except Exception as e:  # noqa: BLE001 - any failure of a checked pickle is bad input, reported
        return None, [Diagnostic(where, f"not a readable pickle: {type(e).__name__}: {clip(str(e), 200)}")]
    if pos + 1 < len(data):
        problems.append(Diagnostic(where, f"{len(data) - pos - 1} bytes after the end of the pickle ignored",
                                   Severity.WARNING))
    return value, problems


def _refusal(data: bytes, pos: int) -> str:
    """The hostile-pickle message, naming the import where the pickle names one."""
    try:
        _DataOnlyUnpickler(_reader(data)).load()
    except _Refused as e:
        return str(e)
    except Exception:  # noqa: BLE001 - it failed before reaching an import; name the opcode instead
        pass
    return f"refused: pickle uses opcode {_opcode_name(data[pos])} at byte {pos} to build objects; never executed"


def _opcode_name(byte: int) -> str:
    op = pickletools.code2op.get(chr(byte))
    return op.name if op else f"byte 0x{byte:02x} (no pickle opcode)"


def _salvage(data: bytes, name: str) -> tuple[object | None, list[Diagnostic]]:
    """Read what a truncated dump holds: the complete top-level keys and the complete entries before the cut."""
    unpickler = _SalvagingUnpickler(io.BytesIO(data))
    try:
        with no_gc():
            unpickler.load()
    except Exception:  # noqa: BLE001 - it stops at the cut, that is the point
        pass
    stacks = list(getattr(unpickler, "metastack", [])) + [getattr(unpickler, "stack", [])]
    top = stacks[0][0] if stacks and stacks[0] and isinstance(stacks[0][0], dict) else None
    message = f"truncated pickle: the data ends at byte {len(data)} before the end of the dump"
    if top is None:
        return None, [Diagnostic(Location(name), message + "; nothing could be read")]
    if len(stacks) > 1:
        pending = stacks[1]
        pairs = list(zip(pending[0::2], pending[1::2]))
        if len(stacks) > 2 and pairs and pairs[-1][0] != "entries":
            pairs.pop()  # its value was still being read
        try:
            top.update(pairs)
        except TypeError:  # an unhashable key: not a dump
            return None, [Diagnostic(Location(name), message + "; nothing could be read")]
    if not top:
        return None, [Diagnostic(Location(name), message + "; nothing could be read")]
    entries = top.get("entries")
    if isinstance(entries, list):
        for level in range(2, len(stacks)):
            if stacks[level - 1] and stacks[level - 1][-1] is entries:
                done = stacks[level]
                open_last = level + 1 < len(stacks) or (done and done[-1] == {})
                entries.extend(done[:-1] if open_last and done else done)
                break
        message += f"; read the {len(entries)} complete entries before it"
    return top, [Diagnostic(Location(name), message)]
