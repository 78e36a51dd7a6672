"""Loading untrusted pickles: plain data only, never an import, never a memory or CPU bomb.

A pickle is a program for a stack machine, and a dump folder on shared storage is writable by many. Before
loading, every opcode is checked against the grammar of plain data (pickle_grammar.py): an
import or object construction is reported as hostile, a memo index beyond the file (the C unpickler allocates
its memo up to the largest index, 64 GiB for 9 bytes) as a memory bomb, a tuple that holds a tuple (hashing one
as a dict key walks every shared reference: hours for 20 KB, a crash for a tuple nested 10**6 deep) as refused,
and an opcode Flight Recorder dumps never use as a foreign file. The load itself then uses an Unpickler whose
`find_class` refuses everything, as a second lock. A truncated pickle is read as far as it goes.
"""

from __future__ import annotations

import _compat_pickle
import gc
import io
import pickle
import pickletools
import reprlib
import struct
from contextlib import contextmanager

from ..model import Diagnostic, Location, Severity
from .pickle_grammar import EXACT_MAX, MAX_TUPLE, scan


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


TRUNCATED = "truncated pickle"  # how a dump cut short is reported (the source marks its Evidence cut)
MAX_LOAD_BYTES = 4 << 30  # refused above this estimate of the memory a load takes (64 bytes per container)


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
    verdict, pos = scan(data)
    if verdict == "hostile":
        return None, [Diagnostic(where, _refusal(data, pos))]
    if verdict == "memo":
        index = struct.unpack_from("<I", data, pos + 1)[0]
        return None, [Diagnostic(where, f"refused: pickle memo index {index} at byte {pos} is beyond the file "
                                        f"({len(data)} bytes), a memory bomb or corruption; never loaded")]
    if verdict in ("nested", "wide"):
        what = "a tuple" if verdict == "nested" else f"more than {MAX_TUPLE} items"
        return None, [Diagnostic(where, f"refused: the tuple built at byte {pos} holds {what}, which Flight "
                                        f"Recorder dumps never do (hashing such tuples can take hours or crash); "
                                        f"never loaded")]
    if verdict == "unchecked":
        return None, [Diagnostic(where, f"refused: the pickle builds tuples the fast check cannot follow, and at "
                                        f"{len(data)} bytes it is over the {EXACT_MAX >> 20} MiB the exact check "
                                        f"takes; never loaded")]
    if verdict == "foreign" and data[pos] == 0x8B and pos + 5 <= len(data):
        size = struct.unpack_from("<I", data, pos + 1)[0]
        return None, [Diagnostic(where, f"refused: byte {pos} is an integer of {size} bytes (LONG4); Flight "
                                        f"Recorder dumps hold 64-bit numbers, and hashing or printing such "
                                        f"integers costs time in their size; never loaded")]
    if verdict == "foreign":
        return None, [Diagnostic(where, f"not a Flight Recorder dump: byte {pos} is {_opcode_name(data[pos])}, "
                                        f"which Flight Recorder dumps never use")]
    containers = data.count(b"]") + data.count(b"}")  # at most as many lists and dicts as these bytes
    estimate = 64 * containers + 24 * len(data)
    if estimate > MAX_LOAD_BYTES:
        return None, [Diagnostic(where, f"refused: loading it could take {estimate / 2**30:.1f} GiB (up to "
                                        f"{containers} lists and dicts), over the {MAX_LOAD_BYTES >> 30} GiB "
                                        f"limit; never loaded")]
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
    """The hostile-pickle message, naming the import where the pickle names one. Only what the scan checked,
    up to the hostile opcode and its argument, is loaded (and it stops there: find_class refuses)."""
    try:
        _DataOnlyUnpickler(_reader(data[:pos + 1024])).load()
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
    message = f"{TRUNCATED}: the data ends at byte {len(data)} before the end of the dump"
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
    where = Location(name)
    if isinstance(entries, list):
        open_last = False
        for level in range(2, len(stacks)):
            if stacks[level - 1] and stacks[level - 1][-1] is entries:
                done = stacks[level]
                open_last = bool(level + 1 < len(stacks) or (done and done[-1] == {}))
                entries.extend(done[:-1] if open_last and done else done)
                break
        message += f"; read the {len(entries)} complete entries before it"
        if open_last:  # the cut is inside the next entry: say which, so that its file#entries[i] can be looked up
            where = Location(name, record=len(entries))
            message += ", the next one is cut short and left out"
    return top, [Diagnostic(where, message)]
