"""The opcode grammar of plain data, and `scan(data)`: whether a pickle may be loaded and, where not, why and at
which byte (safe_pickle.py loads it).

A pickle is checked opcode by opcode against the grammar of plain data before anything is loaded. Besides
imports (hostile) and memo indices past the file (the C unpickler sizes its memo for the largest index: 64 GiB
for 9 bytes), the grammar bounds the work the load itself does. Loading hashes every dict key, and a tuple's
hash walks all of it, through every shared reference: ((), ()) nested 80 times by memo references is 2**80
leaves (hours), and a tuple nested 10**6 deep overflows the C stack (SIGSEGV). So:

- a tuple holds only names and numbers, or memo references below a threshold t, at most 16 of them; a tuple
  is memoized only at indices >= t. t is the index at which the first tuple is memoized (rounded down to a
  power of two the engines can compare): the strings a real dump's tuples refer to (("0", "default_pg")) are
  memoized before it, in pg_config. So no tuple holds a tuple, and a key costs at most 16 hashes;
- DUP, POP and POP_MARK (which make the top of the stack an older object), sets and frozensets (which hash
  what they hold), LONG4 (ints of any size hash in time of their size) and PROTO after the start are refused:
  Python's and PyTorch's picklers never write them into a dump;
- a memo put never follows a memo get (no writer memoizes an object twice);
- protocols 2 and 3 memoize with BINPUT/LONG_BINPUT, 4 and 5 with MEMOIZE only, as Python's pickler does.

Two engines walk the grammar: Python's regex engine over the bytes, and (for long dumps) Rust's (polars) over
the bytes mapped to ASCII, which runs a DFA at a few ns an opcode instead of ~30 ns. The mapping keeps bytes
below 0x80 and gives each high opcode an ASCII code of its role that is >= 0x41 (so it never passes for a
small length or a small memo index); other high bytes become `|`, which ends a run. Both engines take the
same leftmost-first match, so they stop at the same byte. Where they stop, the loop below reads the opcode:
STOP, a string of 64 bytes or more, a memo put that has no place in the grammar, or something refused. Shapes
the grammar cannot follow but a plain pickle may have (a tuple holding a long string, a memo reference above
t) are decided by an exact, slower walk (`_exact`) that tracks what every stack item and memo slot holds.

What a load builds is bounded too: every element costs at least one byte of the file, and the containers
(the only objects much bigger than the bytes that make them) are counted before loading (MAX_LOAD_BYTES).
"""

from __future__ import annotations

import pickle
import re
import struct
from functools import cache

import polars as pl

_SMALL = 64  # counted strings shorter than this are taken by the engines; longer ones by the loop
MAX_TUPLE = 16  # items of a tuple
_MEMO_DFA = 22  # LONG_BINPUT indices below 2**22 are taken by the engines; larger ones by the loop
_FAST_MIN = 1 << 16  # shorter remainders go to Python's engine
_FAST_TIMES = 8  # DFA runs per dump (each slices the remainder)
EXACT_MAX = 16 << 20  # bytes the exact walk takes on (about 1 us an opcode); larger files are refused instead
_TUPLE_OPS = {0x85: 1, 0x86: 2, 0x87: 3}
_STOP, _MARK, _TUPLE, _EMPTY_TUPLE = 0x2E, 0x28, 0x74, 0x29
_BINPUT, _LONG_BINPUT, _MEMOIZE, _BINGET, _LONG_BINGET, _FRAME = 0x71, 0x72, 0x94, 0x68, 0x6A, 0x95
# Opcodes with a fixed-size argument, and opcodes whose argument is a length and that many bytes.
_FIXED = {0x4B: 1, 0x68: 1, 0x71: 1, 0x80: 1, 0x4D: 2, 0x4A: 4, 0x6A: 4, 0x72: 4, 0x47: 8, 0x95: 8}
_COUNTED = {0x8A: 1, 0x8C: 1, 0x43: 1, 0x58: 4, 0x42: 4, 0x8B: 4, 0x8D: 8, 0x8E: 8, 0x96: 8}
# Opcodes that import, call or construct objects: never run, reported as hostile.
_HOSTILE = {0x63: "GLOBAL", 0x93: "STACK_GLOBAL", 0x69: "INST", 0x6f: "OBJ", 0x81: "NEWOBJ", 0x92: "NEWOBJ_EX",
            0x52: "REDUCE", 0x62: "BUILD", 0x82: "EXT1", 0x83: "EXT2", 0x84: "EXT4", 0x50: "PERSID",
            0x51: "BINPERSID", 0x97: "NEXT_BUFFER", 0x98: "READONLY_BUFFER"}
_SCALARS = {0x4E, 0x88, 0x89, 0x4B, 0x4D, 0x4A, 0x47, 0x8A, 0x8C, 0x43, 0x58, 0x42, 0x8D, 0x8E, 0x96}


def _ascii_codes() -> bytes:
    table = bytearray(range(128)) + bytearray(b"|" * 128)  # |: no opcode, ends the run
    table[0x85], table[0x86], table[0x87] = ord("A"), ord("D"), ord("E")  # TUPLE1, TUPLE2, TUPLE3
    table[0x88] = table[0x89] = ord("N")  # NEWTRUE, NEWFALSE: a scalar without argument, like NONE
    table[0x8A] = table[0x8C] = ord("C")  # LONG1, SHORT_BINUNICODE: a 1-byte length and data, like SHORT_BINBYTES
    table[_MEMOIZE], table[_FRAME] = ord("H"), ord("W")
    return bytes(table)


_TO_ASCII = _ascii_codes()


class _Dialect:
    """Regex pieces for one engine: Python's over the bytes, or Rust's over the bytes mapped to ASCII."""

    def __init__(self, rust: bool) -> None:
        self.rust = rust
        self.top = 0x7F if rust else 0xFF

    def op(self, byte: int) -> str:
        return f"\\x{_TO_ASCII[byte] if self.rust else byte:02x}"

    def any(self, n: int = 1) -> str:
        one = f"[\\x00-\\x{self.top:02x}]"
        return "" if n == 0 else one if n == 1 else f"{one}{{{n}}}"

    def between(self, low: int, high: int) -> str:  # exact in both engines for low <= 0x41 and high < 0x41 or top
        return f"[\\x{low:02x}-\\x{min(high, self.top):02x}]"

    def counted(self, ops: tuple[int, ...], width: int) -> str:
        pad = "\\x00" * (width - 1)
        codes = "".join(dict.fromkeys(self.op(op) for op in ops))
        return f"[{codes}](?:" + "|".join(f"\\x{n:02x}{pad}{self.any(n)}" for n in range(_SMALL)) + ")"

    def index_below(self, width: int, k: int) -> str:
        """A little-endian index of `width` bytes below 2**k (k % 8 <= 6)."""
        q, r = divmod(k, 8)
        return "".join(self.any() if i < q else self.between(0, (1 << r) - 1) if i == q else "\\x00"
                       for i in range(width))

    def index_at_least(self, width: int, k: int) -> str | None:
        """An index of `width` bytes at least 2**k (k % 8 <= 6), also below 2**22 for 4 bytes; None: none is."""
        q, r = divmod(k, 8)
        alts = []
        for j in range(q, width):
            low = 1 << r if j == q else 1
            if width == 4 and j == 3 or width == 4 and j == 2 and low > 0x3F:
                continue
            high = 0x3F if width == 4 and j == 2 else 0xFF
            rest = "".join(self.any() if i < 2 else self.between(0, 0x3F) if i == 2 else "\\x00"
                           for i in range(j + 1, width))
            alts.append(self.any(j) + self.between(low, high) + rest)
        return "(?:" + "|".join(alts) + ")" if alts else None


@cache
def _grammar(rust: bool, memo: bool, k: int | str | None) -> str:
    """One run of plain-data opcodes. `memo`: protocol 4+ (MEMOIZE). `k`: "open" before a tuple is memoized
    (then a memoized tuple ends the run), None when no memo reference may be a tuple's item, else the exponent
    of the threshold t (items below 2**k, tuples memoized at 2**k and above).

    Python's engine takes no counted strings (the loop reads each, as it reads long ones for both engines), and
    neither takes tuples of MARK ... TUPLE (4 items or more, which dumps never hold): both go to the exact walk
    when they end up inside a tuple, so that each engine's regex stays small enough to compile in milliseconds.
    """
    d = _Dialect(rust)
    put = d.op(_MEMOIZE) if memo else f"(?:{d.op(_BINPUT)}{d.any()}|{d.op(_LONG_BINPUT)}{d.index_below(4, _MEMO_DFA)})"
    frame = f"{d.op(_FRAME)}{d.any(8)}"
    scalars = [d.op(0x4E), d.op(0x88), d.op(0x89), d.op(0x4B) + d.any(), d.op(0x4D) + d.any(2),
               d.op(0x4A) + d.any(4), d.op(0x47) + d.any(8)]
    if rust:
        scalars += [d.counted((0x8A, 0x8C, 0x43), 1), d.counted((0x58, 0x42), 4)]
    scalar = f"(?:{'|'.join(dict.fromkeys(scalars))})(?:{put})?"
    get_any = f"{d.op(_BINGET)}{d.any()}|{d.op(_LONG_BINGET)}{d.any(4)}"
    if k == "open":
        get_item: str | None = get_any
    elif k is None:
        get_item = None
    else:
        get_item = f"{d.op(_BINGET)}{d.index_below(1, k)}|{d.op(_LONG_BINGET)}{d.index_below(4, k)}"
    item = f"(?:{f'(?:{frame})*' if memo else ''}(?:{scalar}{f'|{get_item}' if get_item else ''}))"
    if k == "open":
        tuple_put = ""  # a memoized tuple ends the run: the loop reads t from its put
    elif memo or k is None:
        tuple_put = f"(?:{put})?"
    else:
        alts = [d.op(_BINPUT) + c for c in [d.index_at_least(1, k)] if c]
        alts += [d.op(_LONG_BINPUT) + c for c in [d.index_at_least(4, k)] if c]
        tuple_put = f"(?:{'|'.join(alts)})?"
    # An item, then what makes it the first of a tuple's one, two or three items (tried first), or nothing.
    tuple_of = (f"(?:{d.op(0x85)}{tuple_put}|{item}(?:{d.op(0x86)}{tuple_put}|{item}{d.op(0x87)}{tuple_put}))?")
    tokens = [d.op(_EMPTY_TUPLE) + tuple_put, item + tuple_of, scalar, get_any, f"{d.op(0x5D)}(?:{put})?",
              f"{d.op(0x7D)}(?:{put})?", d.op(_MARK), d.op(0x61), d.op(0x65), d.op(0x73), d.op(0x75)]
    if memo:
        tokens.append(frame)
    token = "|".join(tokens)
    return f"(?:{token})*" if rust else f"(?:{token})*+"


@cache
def _python_run(memo: bool, k: int | str | None) -> re.Pattern:
    return re.compile(_grammar(False, memo, k).encode("latin-1"), re.DOTALL)


def _fast_run(text: pl.Series, pos: int, grammar: str) -> int:
    """Where the run of plain opcodes starting at `pos` ends (text: the dump mapped by _TO_ASCII, one string).
    A run from just after PROTO skips it in the pattern; later ones slice the remainder (a copy)."""
    if pos <= 2:
        return text.str.extract(f"^[\\x00-\\x7f]{{{pos}}}{grammar}", 0).str.len_bytes()[0]
    return pos + text.str.slice(pos).str.extract(f"^{grammar}", 0).str.len_bytes()[0]


def _threshold(t: int) -> int | None:
    """The exponent k of the largest 2**k <= t that both engines compare exactly (k % 8 <= 6, k <= 21)."""
    if t <= 0:
        return None
    k = min(t.bit_length() - 1, 21)
    return k - 1 if k % 8 == 7 else k


def _op_size(data: bytes, pos: int) -> int | None:
    """Bytes of the opcode at `pos` with its argument; None when the data ends inside them."""
    op = data[pos]
    size = 1 + _FIXED.get(op, 0)
    if op in _COUNTED:
        width = _COUNTED[op]
        if pos + 1 + width > len(data):
            return None
        size = 1 + width + int.from_bytes(data[pos + 1:pos + 1 + width], "little")
    return size if pos + size <= len(data) else None


def _put_index(data: bytes, pos: int, memo_len: int) -> int:
    op = data[pos]
    if op == _BINPUT:
        return data[pos + 1]
    if op == _LONG_BINPUT:
        return struct.unpack_from("<I", data, pos + 1)[0]
    return memo_len


def _is_put(op: int, memo: bool) -> bool:
    return op == _MEMOIZE if memo else op in (_BINPUT, _LONG_BINPUT)


_OPEN_MAX = 1 << 20  # bytes walked by Python's engine to find the first memoized tuple before the DFA runs


def scan(data: bytes) -> tuple[str, int]:
    """Check every opcode up to STOP against the grammar, without building anything.

    Returns (verdict, byte offset): "ok" at STOP, "truncated" where the data ends (inside an opcode or between
    two), "hostile" at an opcode that imports or builds objects, "memo" at an out-of-range memo index, "nested"
    or "wide" at a tuple holding a tuple or more than 16 items, "unchecked" where a file too big for the exact
    walk needs it, "foreign" at an opcode Flight Recorder dumps never use.
    """
    end = len(data)
    if data in (b"", b"\x80"):
        return "truncated", 0
    if data[0] == 0x80 and data[1] > pickle.HIGHEST_PROTOCOL:
        return "foreign", 1
    memo = data[0] == 0x80 and data[1] >= 4
    start = 2 if data[0] == 0x80 else 0  # protocol 0 and 1 pickles do not start with PROTO
    # t first, with Python's engine over the head (a dump memoizes its first tuple in its first entry), so
    # that the DFA then walks the whole dump once, with the threshold in its pattern.
    k, _ = _walk(data, start, memo, "open", None, stop_at=_OPEN_MAX)
    text = pl.Series([data.translate(_TO_ASCII)], dtype=pl.Binary).cast(pl.String) if end >= _FAST_MIN else None
    return _walk(data, start, memo, k, text)


def _walk(data: bytes, start: int, memo: bool, k: int | str | None, text: pl.Series | None,
          stop_at: int | None = None) -> tuple:
    """The scan loop from `start` (after PROTO) on. With `stop_at`, only finding t: returns (k, pos) at the
    first put that may be a tuple's (or "open" when there is none before `stop_at` or something else ends the
    walk)."""
    end = len(data)
    pos = start
    fast = _FAST_TIMES
    while True:
        if text is not None and fast and end - pos >= _FAST_MIN:
            fast -= 1
            pos = _fast_run(text, pos, _grammar(True, memo, k))
        pos = _python_run(memo, k).match(data, pos).end()
        if stop_at is not None and pos >= stop_at:
            return k, pos
        if pos >= end:
            return ("truncated", pos) if stop_at is None else (k, pos)
        op = data[pos]
        size = _op_size(data, pos)
        if stop_at is not None and (op in _HOSTILE or size is None or op == _STOP):
            return k, pos
        if op == _STOP:
            return "ok", pos
        if op in _HOSTILE:
            return "hostile", pos
        if size is None and (op in _FIXED or op in _COUNTED):
            return "truncated", pos
        if op in _COUNTED and op != 0x8B:  # a long string or number: read it here, then the put that memoizes it
            pos += size
            if pos < end and _is_put(data[pos], memo):
                put = _op_size(data, pos)
                if put is None:
                    return ("truncated", pos) if stop_at is None else (k, pos)
                if data[pos] == _LONG_BINPUT and _put_index(data, pos, 0) > end:
                    return ("memo", pos) if stop_at is None else (k, pos)
                pos += put
            continue
        if _is_put(op, memo):
            # A put the grammar did not take: after a memo get, a second put, the put of a tuple, or an index of
            # 2**22 and more. Before any tuple is memoized, it may be that tuple's (so it sets t, the lower the
            # safer). After, a large index is safe (no tuple item refers that high); anything else is walked.
            index = _put_index(data, pos, 0)
            if op == _LONG_BINPUT and index > end:
                return ("memo", pos) if stop_at is None else (k, pos)
            if k == "open":
                k = _threshold(_memo_ordinal(data, pos) if memo else index)
                if stop_at is not None:
                    return k, pos
            elif memo or index < 1 << _MEMO_DFA:
                return _exact(data, start, memo)
            pos += size
            continue
        if stop_at is not None:
            return k, pos
        if op in _TUPLE_OPS or op == _TUPLE:
            return _exact(data, start, memo)  # a tuple whose items the grammar cannot follow
        return "foreign", pos


def _memo_ordinal(data: bytes, stop: int) -> int:
    """The index a MEMOIZE at `stop` stores to: the MEMOIZEs before it (protocol 4+ memoizes with nothing else).
    0 (the safe answer) for a prefix too long to walk."""
    if stop > EXACT_MAX:
        return 0
    count, pos = 0, 2
    while pos < stop:
        count += data[pos] == _MEMOIZE
        pos += _op_size(data, pos) or 1
    return count


def _exact(data: bytes, start: int, memo: bool) -> tuple[str, int]:
    """The grammar's rules, with what each stack item and memo slot holds tracked exactly (T: a tuple, O: any
    other object) instead of the threshold t. About 1 us an opcode, so only for files up to EXACT_MAX.

    Where the unpickler itself would fail (a stack underflow, a memo slot never filled), the walk goes on as if
    the missing item were not a tuple: the load stops there with an error anyway, and the verdict stays the one
    the grammar gives (so both paths say the same of a file)."""
    end = len(data)
    if end > EXACT_MAX:
        return "unchecked", 0
    stack: list[str] = []
    marks: list[int] = []
    slots: dict[int, str] = {}
    memo_len, pos = 0, start
    while pos < end:
        op = data[pos]
        size = _op_size(data, pos)
        if op in _HOSTILE:
            return "hostile", pos
        if size is None:
            return "truncated", pos
        if op == _STOP:
            return "ok", pos
        floor = marks[-1] if marks else 0
        if op in _SCALARS or op in (0x5D, 0x7D):
            stack.append("O")
        elif op == _MARK:
            marks.append(len(stack))
        elif op == _EMPTY_TUPLE:
            stack.append("T")
        elif op in _TUPLE_OPS or op == _TUPLE:
            if op == _TUPLE:
                floor = marks.pop() if marks else len(stack)
                count = len(stack) - floor
            else:
                count = min(_TUPLE_OPS[op], len(stack) - floor)
            if count > MAX_TUPLE:
                return "wide", pos
            if "T" in stack[len(stack) - count:]:
                return "nested", pos
            del stack[len(stack) - count:]
            stack.append("T")
        elif op in (0x61, 0x73):  # APPEND, SETITEM: the list or dict below stays
            del stack[max(floor + 1, len(stack) - (1 if op == 0x61 else 2)):]
        elif op in (0x65, 0x75):  # APPENDS, SETITEMS
            del stack[(marks.pop() if marks else len(stack)):]
        elif op in (_BINGET, _LONG_BINGET):
            index = data[pos + 1] if op == _BINGET else struct.unpack_from("<I", data, pos + 1)[0]
            stack.append(slots.get(index, "O"))
        elif _is_put(op, memo):
            index = _put_index(data, pos, memo_len)
            if op == _LONG_BINPUT and index > end and index >= 1 << _MEMO_DFA:  # the grammar's rule
                return "memo", pos
            memo_len += index not in slots
            slots[index] = stack[-1] if len(stack) > floor else "O"
        elif not (op == _FRAME and memo):
            return "foreign", pos
        pos += size
    return "truncated", pos
