"""Fuzz every input parser with random and mutated inputs (a benchmark-style run, not a test; run by hand).

    python benchmarks/fuzz_parsers.py                       # every parser, 100,000 cases each
    python benchmarks/fuzz_parsers.py --quick               # 1,000 cases each, a smoke run
    python benchmarks/fuzz_parsers.py --parser nccl-log --parser parse_file --cases 20000 --seed 7

Parsers are the sources of `ncclforensics.sources.SOURCES` (called as `source.parse(InputFile(path, name))`) and
`parse_file` (detection, then the detected parser). A case is random bytes or text (hypothesis-style: small sizes
and boundary values most of the time), or a mutation of a real capture of the parser's format
(tests/fixtures/real/nccl-2.28.9/*/, tests/fixtures/public/*/; tests/fixtures/constructed/ only for a format
without one): truncation, dropped / duplicated / reordered / interleaved lines, CRLF, UTF-16 with a BOM, NUL bytes,
byte flips, huge and negative numbers, structural edits of the JSON or pickle inside, imports spliced into
pickles, a gzip that stops early, a gzip of a mutated file, and a few 64 MiB lines.

Hostile shapes too: nested and multiplying pickle references (hash bombs, billion laughs, a tuple nested 10**5
deep as a key), integers of thousands of digits, rich markup, Markdown, HTML and mathtext in names and values,
terminal escapes, control characters and lone surrogates, sparse files (the content, then a hole to 3 GiB).

`pipeline` runs each case through everything a user sees instead of one parser: the mutated file in place of its
namesake among the files of a real capture, parsed and diagnosed, `diff --json` as the CLI writes it (which a
strict JSON parser must accept), the terminal report and problem lines (which must hold no control character),
and the postmortem's report.md and report.html (which, rendered by a CommonMark renderer, must hold no raw HTML;
plots every PLOT_EVERY cases).

Per parser it reports cases tried, uncaught exceptions (distinct crash sites; the first traceback and input of
each are saved under --out), bad results (a problem that does not name its file; for `pipeline`, what the checks
above find), the slowest case, the peak RSS of the worker processes and cases/s. Every case runs under a time
limit (CASE_TIMEOUT_S; past it, it is recorded like a crash); memory is measured (an address-space limit would
turn polars' allocation failures into aborts that take the worker down). Exit code 1 when any crash was found.

Each case is written to one reused file on tmpfs (/dev/shm) so that the disk is not the bottleneck; cases are
deterministic in (--seed, parser, case index), so a crash is reproduced with `--replay PARSER:INDEX`.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
import codecs
import gzip
import json
import multiprocessing
import os
import pickle
import pickletools
import random
import re
import resource
import shutil
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
SEED_DIRS = (FIXTURES / "real" / "nccl-2.28.9", FIXTURES / "public")
FALLBACK_DIR = FIXTURES / "constructed"
NOT_SEEDS = {".md", ".py"}
PARSE_FILE = "parse_file"
# The whole pipeline on one mutated file among the other files of a real capture: parse, diagnose, `diff --json`,
# the terminal report, the postmortem report (Markdown and HTML; plots every PLOT_EVERY cases).
PIPELINE = "pipeline"
PIPELINE_BASE = FIXTURES / "real" / "nccl-2.28.9" / "extra-op-4rank"
PLOT_EVERY = 25
BIG_LINE = 64 << 20
CASE_TIMEOUT_S = 120  # a case still running after this is a hang, recorded like a crash
SLOW_S = 5.0  # cases slower than this are listed (64 MiB lines excepted)

# ----------------------------------------------------------------------------------------------------------------
# Seeds


def load_seeds() -> dict[str, list[tuple[str, bytes]]]:
    """(file name, content) of every real and public capture, by the format `detect` gives it.

    A format with no real or public capture (ras-monitor) takes its constructed fixtures instead.
    """
    from ncclforensics.sources import InputFile, detect

    def collect(dirs) -> dict[str, list[tuple[str, bytes]]]:
        found: dict[str, list[tuple[str, bytes]]] = {}
        for folder in dirs:
            for path in sorted(folder.rglob("*")):
                if not path.is_file() or path.suffix in NOT_SEEDS:
                    continue
                source = detect(InputFile(path, str(path)))
                if source is not None:
                    found.setdefault(source.format.value, []).append((path.name, path.read_bytes()))
        return found

    seeds = collect(SEED_DIRS)
    for fmt, files in collect([FALLBACK_DIR]).items():
        seeds.setdefault(fmt, files)
    return seeds


def parser_names() -> list[str]:
    from ncclforensics.sources import SOURCES

    return [s.format.value for s in SOURCES] + [PARSE_FILE]


# ----------------------------------------------------------------------------------------------------------------
# Mutations: each takes (rng, data, corpus) and returns new bytes. `corpus` is the seeds of the format.

_DIGITS = re.compile(rb"\d+")
_HUGE = (b"9" * 30, b"9223372036854775807", b"9223372036854775808", b"18446744073709551616",
         b"1" + b"0" * 5000, b"1e309", b"-1e309", b"340282366920938463463374607431768211456", b"0" * 400 + b"1",
         b"4294967296", b"2147483648", b"99999999999999999999.5", b"nan", b"inf", b"0x" + b"f" * 40)
_NEGATIVE = (b"-1", b"-0", b"-9223372036854775808", b"-9223372036854775809", b"-99999", b"-2147483649")
_SPECIAL_TEXT = ("\x00", "\r", "\n", "\r\n", "\t", "\x0b", "\x0c", "\x1c", "\x85", "\u2028", "\u2029", "\ufeff",
                 "\ud800", "\udfff", "\U0001f600", "e\u0301", "\u202e", "\x1b[31m", '"', "\\", "{", "}", "[", "]",
                 ":", ",", "=", " ", "0x", "-", "%", "nan", "null", "true", "{\"", "\"}")
_MAGIC = (b"", b"\x1f\x8b", b"\x80\x02", b"\x80\x04\x95", b"\x80\x05", codecs.BOM_UTF8, codecs.BOM_UTF16_LE,
          codecs.BOM_UTF16_BE, b"{", b"[", b"NCCL version ", b"c__builtin__\neval\n")
_ALPHABET = b"\x00\xff\n\r {}[]:,\"=0123456789-.x#" + bytes(range(0x20, 0x7f, 7))
# Imports and constructions a hostile pickle may splice in (they must be refused, never run).
_PICKLE_IMPORTS = (
    b"cos\nsystem\n(S'touch /tmp/ncclforensics-fuzz-pwned'\ntR.",
    b"\x8c\x08builtins\x8c\x04eval\x93\x8c\x061+1\x85R.",
    b"csubprocess\nPopen\n(S'true'\ntR.",
    b"(cos\nsystem\nS'true'\no.",
    b"(S'true'\nios\nsystem\n.",
    b"\x80\x02cposix\nsystem\nq\x00X\x04\x00\x00\x00trueq\x01\x85q\x02Rq\x03.",
    b"P0\n.", b"\x80\x04K\x01Q.", b"\x80\x04\x82\x01.", b"\x80\x05\x97.",
)
# Plain-data opcodes (MARK, EMPTY_LIST, EMPTY_DICT, APPEND(S), SETITEM(S), TUPLE*, MEMOIZE, POP, DUP, ...).
_PICKLE_SOUP = b"()]}aetsu\x85\x86\x87\x94\x88\x89N0.2" + b"K\x07" + b"J\xff\xff\xff\xff" + b"q\x00" + b"h\x00"


def _lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


def m_random_bytes(rng: random.Random, data: bytes, corpus) -> bytes:
    """Hypothesis-style bytes: mostly short, biased to structural bytes, sometimes behind a magic prefix."""
    size = rng.choice((0, 1, 2, 3, 8, 64, 256)) if rng.random() < 0.5 else int(rng.expovariate(1 / 2000))
    size = min(size, 1 << 16)
    if rng.random() < 0.5:
        body = bytes(rng.choice(_ALPHABET) for _ in range(size))
    else:
        body = rng.randbytes(size)
    return rng.choice(_MAGIC) + body


def m_random_text(rng: random.Random, data: bytes, corpus) -> bytes:
    """Random text from format tokens, specials (lone surrogates, separators, controls) and any code point."""
    tokens = _tokens(rng, corpus)
    parts = []
    for _ in range(rng.choice((1, 4, 16, 64, 256))):
        roll = rng.random()
        if roll < 0.5 and tokens:
            parts.append(rng.choice(tokens))
        elif roll < 0.8:
            parts.append(rng.choice(_SPECIAL_TEXT))
        else:
            parts.append(chr(rng.randrange(0x110000)))
    text = "".join(parts)
    encoding = rng.choice(("utf-8", "utf-8", "utf-8", "utf-16", "latin-1"))
    return text.encode(encoding, errors="surrogatepass" if encoding != "latin-1" else "replace")


def _tokens(rng: random.Random, corpus) -> list[str]:
    if not corpus:
        return []
    _, seed = rng.choice(corpus)
    words = re.findall(rb"\S+|\s+", seed[:4096])
    return [w.decode("utf-8", "replace") for w in words]


def m_truncate(rng, data, corpus):
    return data[:rng.randrange(len(data) + 1)]


def m_drop_lines(rng, data, corpus):
    lines = _lines(data)
    keep = [line for line in lines if rng.random() > rng.choice((0.02, 0.2, 0.6))]
    return b"\n".join(keep)


def m_duplicate_lines(rng, data, corpus):
    lines = _lines(data)
    if not lines:
        return data
    for _ in range(rng.randint(1, 8)):
        i = rng.randrange(len(lines))
        lines[i:i] = [lines[i]] * rng.choice((1, 2, 50))
    return b"\n".join(lines)


def m_reorder_lines(rng, data, corpus):
    lines = _lines(data)
    if len(lines) < 2:
        return data
    if rng.random() < 0.3:
        rng.shuffle(lines)
    else:
        i = rng.randrange(len(lines))
        j = min(len(lines), i + rng.randint(2, 20))
        window = lines[i:j]
        rng.shuffle(window)
        lines[i:j] = window
    return b"\n".join(lines)


def m_interleave(rng, data, corpus):
    """The lines of two files of the format, merged in a random order (each file's own order kept)."""
    _, other = rng.choice(corpus) if corpus else ("", data)
    a, b = _lines(data), _lines(other)
    out, i, j = [], 0, 0
    while i < len(a) or j < len(b):
        if j >= len(b) or (i < len(a) and rng.random() < 0.5):
            out.append(a[i])
            i += 1
        else:
            out.append(b[j])
            j += 1
    return b"\n".join(out)


def m_crlf(rng, data, corpus):
    return data.replace(b"\n", rng.choice((b"\r\n", b"\r", b"\n\r", b"\r\r\n")))


def m_utf16(rng, data, corpus):
    text = data.decode("utf-8", errors="replace")
    if rng.random() < 0.5:
        return text.encode("utf-16")  # native order with a BOM
    bom, codec = rng.choice(((codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be")))
    encoded = bom + text.encode(codec)
    return encoded[:-1] if rng.random() < 0.2 else encoded  # an odd length: a cut UTF-16 file


def m_nul_bytes(rng, data, corpus):
    out = bytearray(data)
    for _ in range(rng.randint(1, 16)):
        out[rng.randrange(len(out) + 1):0] = b"\x00" * rng.choice((1, 1, 2, 100))
    return bytes(out)


def m_byte_flips(rng, data, corpus):
    out = bytearray(data)
    if not out:
        return bytes(rng.randbytes(4))
    for _ in range(rng.choice((1, 2, 4, 16, 64))):
        i = rng.randrange(len(out))
        out[i] = rng.randrange(256) if rng.random() < 0.5 else out[i] ^ (1 << rng.randrange(8))
    return bytes(out)


def m_huge_numbers(rng, data, corpus):
    return _replace_numbers(rng, data, _HUGE)


def m_negative_numbers(rng, data, corpus):
    return _replace_numbers(rng, data, _NEGATIVE + (b"-",))


def _replace_numbers(rng, data, choices) -> bytes:
    spans = [m.span() for m in _DIGITS.finditer(data)]
    if not spans:
        return data + rng.choice(choices)
    chosen = sorted(rng.sample(spans, min(len(spans), rng.choice((1, 3, 20)))), reverse=True)
    out = bytearray(data)
    for start, end in chosen:
        value = rng.choice(choices)
        out[start:end] = value + out[start:end] if value == b"-" else value
    return bytes(out)


def m_splice(rng, data, corpus):
    """A piece of another seed (or the same one) pasted at a random place."""
    _, other = rng.choice(corpus) if corpus else ("", data)
    if not other:
        return data
    i = rng.randrange(len(other))
    piece = other[i:i + rng.choice((1, 16, 200, 4000))]
    at = rng.randrange(len(data) + 1)
    return data[:at] + piece + data[at + (rng.randrange(50) if rng.random() < 0.5 else 0):]


def m_deep_nesting(rng, data, corpus):
    """Brackets nested deeper than any parser's recursion limit, at a random place."""
    depth = rng.choice((100, 1000, 5000, 100000))
    opener = rng.choice((b"[", b'{"a":', b"(", b"]", b"(]"))
    at = rng.randrange(len(data) + 1)
    return data[:at] + opener * depth + data[at:]


def m_structured(rng, data, corpus):
    """Edit the values of the JSON document, JSON lines or pickle inside, and write it back out."""
    if data[:1] == b"\x80":
        return _mutate_pickle(rng, data)
    text = data.decode("utf-8", errors="replace")
    try:
        document = json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested too deeply by an earlier mutation
        document = None
    if document is not None:
        return json.dumps(_mutate_value(rng, document, 0), indent=rng.choice((None, 2))).encode()
    lines = text.split("\n")
    for i, line in enumerate(lines):
        start = line.find("{")
        if start < 0 or rng.random() < 0.5:
            continue
        try:
            value = json.loads(line[start:])
        except (ValueError, RecursionError):
            continue
        lines[i] = line[:start] + json.dumps(_mutate_value(rng, value, 0))
    return "\n".join(lines).encode("utf-8", errors="surrogatepass")


def _mutate_pickle(rng, data: bytes) -> bytes:
    from ncclforensics.sources.safe_pickle import load_pickle  # never executes anything

    value, _ = load_pickle(data, "seed")
    if value is None:
        return data
    try:
        return pickle.dumps(_mutate_value(rng, value, 0), protocol=rng.choice((2, 3, 4, 5)))
    except (RecursionError, ValueError):
        return data


_ODD_VALUES = (None, True, False, 0, -1, 1, 2**31, 2**63 - 1, 2**63, 2**64, -(2**63) - 1, 10**30, 1.5,
               float("nan"), float("inf"), -float("inf"), 1e308, "", "x" * 1000, "\x00", "\ud800", "[0, 1]",
               "[", "-1", "9" * 40, [], {}, [[]], [None], {"": None}, "0x1715b7bd1b8fda9e", "nccl:all_reduce")


def _mutate_value(rng, value, depth: int):
    """A copy of a JSON-like value (dicts, lists, tuples, scalars) with some parts replaced, dropped or added."""
    if rng.random() < (0.02 if depth else 0.002):
        return _odd(rng)
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            roll = rng.random()
            if roll < 0.03:
                continue  # drop a key
            if roll < 0.05:
                key = _odd_key(rng)
            out[key] = _mutate_value(rng, item, depth + 1)
        if rng.random() < 0.05:
            out[_odd_key(rng)] = _odd(rng)
        return out
    if isinstance(value, (list, tuple)):
        items = [_mutate_value(rng, item, depth + 1) for item in value]
        if items and rng.random() < 0.1:
            roll = rng.random()
            i = rng.randrange(len(items))
            if roll < 0.33:
                del items[i]
            elif roll < 0.66:
                items.insert(i, items[i])
            else:
                rng.shuffle(items)
        if rng.random() < 0.02:
            return tuple(items) if isinstance(value, list) else list(items)
        return tuple(items) if isinstance(value, tuple) else items
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int) and rng.random() < 0.05:
        return rng.choice((-value, value * 2**40, -1, 2**63, value + 1))
    if isinstance(value, str) and rng.random() < 0.03:
        return rng.choice((value * 100, value[: len(value) // 2], value.upper(), "", value + "\x00"))
    return value


def _odd(rng):
    value = rng.choice(_ODD_VALUES)
    return [value] * rng.choice((1, 1000)) if rng.random() < 0.05 else value


def _odd_key(rng):
    return rng.choice(("", "\x00", "entries", "version", "rank", "step", "decision", "x" * 300, "comm"))


def m_pickle_opcodes(rng, data, corpus):
    """Imports or plain-data opcode soup spliced into a pickle (hostile ones must be refused, never run)."""
    at = rng.randrange(len(data) + 1)
    if rng.random() < 0.5:
        piece = rng.choice(_PICKLE_IMPORTS)
    else:
        piece = bytes(rng.choice(_PICKLE_SOUP) for _ in range(rng.choice((1, 4, 32, 512))))
    return data[:at] + piece + (data[at:] if rng.random() < 0.7 else b"")


def m_gzip_truncated(rng, data, corpus):
    packed = gzip.compress(data, compresslevel=rng.choice((1, 6, 9)))
    return packed[:rng.randrange(len(packed))]


def m_gzip_mutated(rng, data, corpus):
    inner = _apply(rng, rng.choice(_PLAIN), data, corpus)
    packed = gzip.compress(inner, compresslevel=1)
    roll = rng.random()
    if roll < 0.1:
        packed += gzip.compress(data, compresslevel=1)  # two members: legal, both are read
    elif roll < 0.2:
        packed += rng.randbytes(rng.randrange(1, 64))  # trailing garbage after the member
    return packed


def big_line(rng, data, size: int = BIG_LINE) -> bytes:
    """A line of `size` bytes: plain filler, or the start of a real line of the format run on for 64 MiB."""
    lines = _lines(data)
    line = rng.choice(lines) if lines else b""
    filler = rng.choice((b"a", b"0", b" ", b"\xff", b"{"))
    long = (line[: len(line) // 2] if rng.random() < 0.5 else b"") + filler * size
    at = rng.randrange(len(lines) + 1)
    return b"\n".join(lines[:at] + [long] + lines[at:])


def _laughs(rng) -> list:
    """A list nested by reference: `width`**`levels` leaves as a tree, a few hundred bytes as a pickle."""
    value: list = [rng.choice(("lol", 7, None))]
    for _ in range(rng.choice((8, 20, 40))):
        value = [value] * rng.choice((2, 10))
    return value


def m_pickle_references(rng, data, corpus):
    """Nested and multiplying memo references, as the Python pickler writes shared objects: a tuple of tuples
    of ... shared 80 levels deep as a dict key (a hash bomb), a list nested by reference in a dump's fields
    (billion laughs: a tree of 10**30 leaves), a tuple nested 10**5 deep as a key (the C stack)."""
    from ncclforensics.sources.safe_pickle import load_pickle  # never executes anything

    dump, _ = load_pickle(data, "seed") if data[:1] == b"\x80" else (None, [])
    if not isinstance(dump, dict):
        dump = {"version": "2.10", "entries": []}
    roll = rng.random()
    protocol = rng.choice((2, 4, 5))
    if roll < 0.4:  # a hash bomb: built as a list [t] (no hashing here), then the list turned into {t: 1}
        chain = [()]
        for _ in range(rng.choice((30, 80))):
            chain.append((chain[-1], chain[-1]) if rng.random() < 0.8 else (chain[-1],))
        out = pickle.dumps({**dump, "chain": chain, "pg_status": [chain[-1]]}, protocol=protocol)
        ops = list(pickletools.genops(out))
        at = max(pos for op, _, pos in ops if op.name == "EMPTY_LIST")
        end = next((pos for op, _, pos in ops if op.name == "APPEND" and pos > at), None)
        if end is None:
            return out
        return out[:at] + b"}" + out[at + 1:end] + b"K\x01s" + out[end + 1:]
    if roll < 0.8:  # billion laughs in whichever fields the reader turns into text
        laughs = _laughs(rng)
        entries = dump.get("entries") if isinstance(dump.get("entries"), list) else []
        target = rng.choice(("name", "desc", "profiling_name", "frames", "process_group", "state", "version",
                             "pg_status", "input_dtypes"))
        if target in ("name", "desc"):
            dump["pg_config"] = {"0": {"name": "0", "desc": "x", "ranks": "[0]", target: laughs}}
        elif target in ("version", "pg_status"):
            dump[target] = laughs if target == "version" else {"0": {"last_enqueued_collective": laughs}}
        else:
            for entry in entries[: rng.choice((1, 5, len(entries) or 1))]:
                if isinstance(entry, dict):
                    entry[target] = (laughs, laughs) if target == "process_group" else laughs
        return pickle.dumps(dump, protocol=protocol)
    depth = rng.choice((1000, 100_000))
    head = pickle.dumps({**dump, "pg_status": {}}, protocol=2)
    if not head.endswith(b"u."):
        return head
    return head[:-2] + b"\x8c\x03key}" + b")" + b"\x85" * depth + b"K\x01s" + b"u."


def m_huge_ints(rng, data, corpus):
    """Integers of thousands of digits where names and numbers go (str() of one past 4300 digits raises):
    LONG4 and LONG1 in pickles, long digit runs in text."""
    if data[:1] == b"\x80":
        from ncclforensics.sources.safe_pickle import load_pickle

        dump, _ = load_pickle(data, "seed")
        if isinstance(dump, dict):
            huge = rng.choice((10**5000, 10**600, -(10**700), 2**64))
            dump["pg_config"] = {huge: {"name": huge, "desc": "x", "ranks": "[0]"}}
            dump["pg_status"] = {huge: {"last_enqueued_collective": huge}}
            try:
                return pickle.dumps(dump, protocol=rng.choice((2, 5)))
            except ValueError:
                return data
    return _replace_numbers(rng, data, (b"1" + b"0" * 5000, b"9" * 4400, b"-" + b"9" * 4400))


_MARKUP = ("[/]", "[bold red]", "[/bold]", "[link=file:///etc/passwd]x[/link]", "``", "```", "`",
           "<img src=x onerror=alert(1)>", "<script>alert(1)</script>", "](javascript:alert(1))", "$\\frac{$",
           "$x$", "|", "\\", "*_", "# ", "> ", "&amp;", "{{", "%s%n")
_CONTROL = ("\x1b[2J", "\x1b]0;pwned\x07", "\x1b[31m", "\x07", "\x08", "\r", "\x9b2J", "\x00", "\x7f", "\u2028",
            "\n", "\nerror: forged", "\u202e", "\ud800", "\udfff")


def _splice_text(rng, data: bytes, pieces) -> bytes:
    """Pieces pasted into values: after `=` or `: `, inside quotes, into file names and call sites."""
    text = data.decode("utf-8", errors="surrogateescape")
    spots = [m.end() for m in re.finditer(r'(?:=|": "|: |/|\()', text)] or [len(text)]
    for _ in range(rng.choice((1, 3, 10))):
        at = rng.choice(spots)
        text = text[:at] + rng.choice(pieces) + text[at:]
    return text.encode("utf-8", errors="surrogatepass")


def m_markup(rng, data, corpus):
    """Rich markup, Markdown and HTML syntax and mathtext where names and values go."""
    if data[:1] == b"\x80":
        return _mutate_pickle_strings(rng, data, _MARKUP)
    return _splice_text(rng, data, _MARKUP)


def m_control(rng, data, corpus):
    """Terminal escapes, control characters, line separators and lone surrogates in names and values."""
    if data[:1] == b"\x80":
        return _mutate_pickle_strings(rng, data, _CONTROL)
    if rng.random() < 0.3:  # as JSON escapes, which decode to the characters themselves
        return _splice_text(rng, data, [json.dumps(c)[1:-1] for c in _CONTROL])
    return _splice_text(rng, data, _CONTROL)


def _mutate_pickle_strings(rng, data: bytes, pieces) -> bytes:
    """The dump with pieces added to its strings (call sites, group names, op names)."""
    from ncclforensics.sources.safe_pickle import load_pickle

    dump, _ = load_pickle(data, "seed")
    if dump is None:
        return data

    def walk(value, depth=0):
        if isinstance(value, str) and rng.random() < 0.3:
            return value + rng.choice(pieces) + value[: rng.randrange(len(value) + 1)]
        if isinstance(value, dict) and depth < 6:
            return {walk(k, depth + 1) if isinstance(k, str) and rng.random() < 0.1 else k: walk(v, depth + 1)
                    for k, v in value.items()}
        if isinstance(value, (list, tuple)) and depth < 6:
            items = [walk(v, depth + 1) for v in value]
            return tuple(items) if isinstance(value, tuple) else items
        return value

    try:
        return pickle.dumps(walk(dump), protocol=rng.choice((2, 5)))
    except (ValueError, RecursionError, UnicodeEncodeError):
        return data


SPARSE_SIZE = 3 << 30  # a "sparse" case: the content, then a hole up to this size (truncate: no disk, no memory)


# (name, function, weight); weights give each mutation roughly its share of the cases.
MUTATIONS = [
    ("random_bytes", m_random_bytes, 8), ("random_text", m_random_text, 8), ("truncate", m_truncate, 10),
    ("drop_lines", m_drop_lines, 6), ("duplicate_lines", m_duplicate_lines, 5), ("reorder_lines", m_reorder_lines, 5),
    ("interleave", m_interleave, 6), ("crlf", m_crlf, 4), ("utf16", m_utf16, 4), ("nul_bytes", m_nul_bytes, 4),
    ("byte_flips", m_byte_flips, 10), ("huge_numbers", m_huge_numbers, 6), ("negative_numbers", m_negative_numbers, 5),
    ("splice", m_splice, 5), ("deep_nesting", m_deep_nesting, 2), ("structured", m_structured, 10),
    ("pickle_opcodes", m_pickle_opcodes, 3), ("gzip_truncated", m_gzip_truncated, 2), ("gzip_mutated", m_gzip_mutated, 3),
    ("pickle_references", m_pickle_references, 4), ("huge_ints", m_huge_ints, 3), ("markup", m_markup, 5),
    ("control", m_control, 5),
]
_BY_NAME = {name: fn for name, fn, _ in MUTATIONS}
_PLAIN = [name for name, _, _ in MUTATIONS if not name.startswith("gzip")]
_WEIGHTS = [w for _, _, w in MUTATIONS]


def _apply(rng, name: str, data: bytes, corpus) -> bytes:
    return _BY_NAME[name](rng, data, corpus)


def big_line_indices(cases: int) -> set[int]:
    """The few case indices that get a 64 MiB line: 3 of 100,000, 1 in a quick run."""
    return {13 + k * (cases // 3) for k in range(3)} if cases >= 3000 else ({13} if cases > 13 else set())


def sparse_indices(cases: int) -> set[int]:
    """The case indices that become sparse files: one in 500."""
    return set(range(7, cases, 500))


def make_case(parser: str, index: int, seed: int, seeds: dict[str, list[tuple[str, bytes]]],
              big: set[int], big_size: int = BIG_LINE, sparse: set[int] = frozenset()) -> tuple[str, str, bytes]:
    """(mutation label, file name for findings, content) of one case; the same for the same arguments."""
    rng = random.Random(f"{seed}:{parser}:{index}")
    everything = parser in (PARSE_FILE, PIPELINE)
    corpus = [item for files in seeds.values() for item in files] if everything else seeds.get(parser, [])
    name, data = rng.choice(corpus) if corpus else ("random", b"")
    if index in big:
        return "big_line", f"fuzz/{name}", big_line(rng, data, big_size)
    if index in sparse:  # a sparse file: the content, then a hole (made by run_chunk)
        return "sparse", f"fuzz/{name}", data
    label = rng.choices(_PLAIN + ["gzip_truncated", "gzip_mutated"],
                        weights=[w for n, _, w in MUTATIONS if n in _PLAIN] + [2, 3])[0]
    data = _apply(rng, label, data, corpus)
    if not label.startswith("gzip") and rng.random() < 0.25:  # a second mutation on top of the first
        second = rng.choice(_PLAIN)
        data = _apply(rng, second, data, corpus)
        label += "+" + second
    return label, f"fuzz/{name}", data


# ----------------------------------------------------------------------------------------------------------------
# Running cases (in worker processes)


class _CaseTimeout(BaseException):
    """Raised by SIGALRM in a case that runs too long; a BaseException so that no `except Exception` eats it."""


def _on_alarm(signum, frame):
    raise _CaseTimeout(f"case still running after {CASE_TIMEOUT_S} s")


_STATE: dict = {}


def _init_worker(workdir: str) -> None:
    _STATE["seeds"] = load_seeds()
    folder = Path(workdir) / f"w{os.getpid()}"
    folder.mkdir(parents=True, exist_ok=True)
    _STATE["path"] = folder / "case"
    signal.signal(signal.SIGALRM, _on_alarm)


def run_parser(parser: str, path: Path, name: str):
    """Parse one file with one parser (or parse_file) and return the Evidence."""
    from ncclforensics.errors import SourceError
    from ncclforensics.sources import SOURCES, InputFile, parse_file
    from ncclforensics.sources.base import unreadable

    file = InputFile(path, name)
    if parser == PARSE_FILE:
        return parse_file(file)
    source = next(s for s in SOURCES if s.format.value == parser)
    try:
        return source.parse(file)
    except SourceError as e:  # the one exception a Source may raise: a refusal, one line as parse_file reports it
        return unreadable(file, source.facts, e)


def run_pipeline(path: Path, name: str, index: int) -> str | None:
    """The case as one file of a real capture (in place of the file of that name, if the capture has one), through
    everything a user sees: parse and diagnose, `diff --json` as the CLI writes it, the terminal report with its
    problem lines, the postmortem's report.md and report.html. Returns what is wrong (None when nothing is):
    JSON that a strict parser rejects, a control character on the terminal, raw HTML in the rendered
    Markdown or in the page."""
    import io

    from rich.console import Console

    from ncclforensics import api
    from ncclforensics.report import console as terminal
    from ncclforensics.report import data as answer
    from ncclforensics.report import postmortem
    from ncclforensics.report.escape import json_safe

    folder = path.parent / "pipeline"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    base = Path(name).name
    for source in PIPELINE_BASE.iterdir():
        if source.name != base:
            (folder / source.name).symlink_to(source)
    os.replace(path, folder / base)
    parsed, report = api.postmortem_paths([str(folder)], str(path.parent / "pm"))
    d = report.diagnosis
    result = answer.diff_dict(d)
    result["problems"] = [answer.problem_dict(p) for p in parsed.all_problems + d.problems]
    try:
        text = json.dumps(result, allow_nan=False)
    except ValueError:
        text = json.dumps(json_safe(result), allow_nan=False)  # what cli._echo_json does

    def bare(token):
        raise ValueError(f"bare {token}")

    try:
        json.loads(text, parse_constant=bare)
    except ValueError as e:
        return f"diff --json is not strict JSON: {e}"
    screen = io.StringIO()
    console = Console(file=screen, width=120, color_system=None, force_terminal=False)
    terminal.render_diagnosis(console, d)
    terminal.render_problems(console, parsed.all_problems + d.problems)
    shown = screen.getvalue()
    bad = re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]", shown)
    if bad:
        return f"the terminal report holds {bad.group(0)!r}"
    figures = postmortem.build_figures(report) if index % PLOT_EVERY == 0 else {}
    blocks = postmortem.build_document(report, postmortem.build_images(figures))
    markdown = postmortem.render_markdown(blocks)
    page = postmortem.render_html(blocks, "fuzz")
    markdown.encode("utf-8")
    page.encode("utf-8")
    try:
        from markdown_it import MarkdownIt
    except ImportError:  # rich brings it; without it the Markdown is not rendered
        rendered = ""
    else:
        rendered = MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)
    for where, html in (("report.md rendered", rendered), ("report.html", page)):
        # The report's own tags, its inline plots and its links to files beside it (`pairings.parquet`): a file
        # name only, so no `javascript:` or other scheme can come from an input.
        tag = re.search(r"<(?!/?(?:p|h[1-6]|ul|ol|li|table|thead|tbody|tr|th|td|code|pre|strong|em|figure|"
                        r"figcaption|br|hr|html|head|body|meta|title|style)\b|!DOCTYPE|img src=\"(?:"
                        r"data:image/png;base64,[A-Za-z0-9+/=]*|[\w.-]+\.png)\"|a href=\"[\w-]+\.[\w.-]+\">|/a>)"
                        r"[a-zA-Z!/][^>]*>", html)
        if tag:
            return f"{where} holds raw HTML: {tag.group(0)[:120]}"
    return None


def check_evidence(evidence, name: str) -> str | None:
    """What is wrong with a parser's result (None when it is fine): every problem must name the file."""
    from ncclforensics.model import Evidence

    if not isinstance(evidence, Evidence):
        return f"returned {type(evidence).__name__}, not Evidence"
    if evidence.path != name:
        return f"Evidence.path is {evidence.path!r}, not {name!r}"
    for problem in evidence.problems:
        if problem.loc.path != name:
            return f"a problem names {problem.loc.path!r}, not {name!r}: {problem.message[:200]}"
    return None


def _crash_site(error: BaseException) -> str:
    """`ExcType at file.py:line` of the innermost frame in ncclforensics (else the innermost frame)."""
    frames = traceback.extract_tb(error.__traceback__)
    ours = [f for f in frames if "ncclforensics" in f.filename] or frames
    where = f"{Path(ours[-1].filename).name}:{ours[-1].lineno}" if ours else "?"
    return f"{type(error).__name__} at {where}"


def run_chunk(task: tuple) -> dict:
    """Run cases [start, stop) of one parser; returns counts, the first failure of each kind and peak RSS."""
    parser, start, stop, seed, big, big_size, out_dir = task
    sparse = sparse_indices(stop)
    seeds, path = _STATE["seeds"], _STATE["path"]
    result = {"cases": 0, "crashes": {}, "bad_results": {}, "slow": [], "max_s": 0.0, "max_case": None}
    for index in range(start, stop):
        label, name, data = make_case(parser, index, seed, seeds, big, big_size, sparse)
        path.write_bytes(data)
        if label == "sparse":
            os.truncate(path, SPARSE_SIZE)
        began = time.perf_counter()
        error = problem = None
        signal.alarm(CASE_TIMEOUT_S)
        try:
            if parser == PIPELINE:
                problem = run_pipeline(path, name, index)
            else:
                evidence = run_parser(parser, path, name)
                problem = check_evidence(evidence, name)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as e:  # noqa: BLE001 - counting every escape is the point
            error = e
        finally:
            signal.alarm(0)
        took = time.perf_counter() - began
        del data
        result["cases"] += 1
        where = path if path.exists() else path.parent / "pipeline" / Path(name).name  # the pipeline moves it
        if took > result["max_s"]:
            result["max_s"], result["max_case"] = took, f"{index} ({label}, {where.stat().st_size} bytes)"
        if took > SLOW_S and label != "big_line":
            result["slow"].append((index, label, round(took, 2)))
        if error is not None:
            _record(result["crashes"], _crash_site(error), parser, index, label, where,
                    "".join(traceback.format_exception(error)), out_dir)
        elif problem is not None:
            _record(result["bad_results"], problem.split(":")[0], parser, index, label, where, problem, out_dir)
    result["rss_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return result


def _record(found: dict, key: str, parser: str, index: int, label: str, path: Path, text: str, out_dir: str) -> None:
    """Count a failure; save the input and the traceback of the first one of each kind."""
    if key in found:
        found[key]["count"] += 1
        return
    folder = Path(out_dir) / parser
    folder.mkdir(parents=True, exist_ok=True)
    stem = folder / re.sub(r"[^\w-]+", "_", key)[:100]  # one saved example per kind, whichever worker is first
    found[key] = {"count": 1, "case": index, "mutation": label, "first": text.strip().splitlines()[-1][:300],
                  "saved": str(stem)}
    if stem.with_suffix(".txt").exists():
        return
    if path.stat().st_size <= 1 << 20:  # big-line inputs are regenerated with --replay instead
        shutil.copyfile(path, stem.with_suffix(".bin"))
    stem.with_suffix(".txt").write_text(f"parser {parser}, case {index}, mutation {label}\n\n{text}")


# ----------------------------------------------------------------------------------------------------------------
# Driver


def fuzz_parser(parser: str, cases: int, seed: int, workers: int, workdir: str, out_dir: str,
                big_size: int, chunk: int = 250) -> dict:
    """All cases of one parser in a fresh pool (so that peak RSS is this parser's)."""
    big = big_line_indices(cases)
    tasks = [(parser, i, min(i + chunk, cases), seed, big, big_size, out_dir) for i in range(0, cases, chunk)]
    total = {"parser": parser, "cases": 0, "crashes": {}, "bad_results": {}, "slow": [], "max_s": 0.0,
             "max_case": None, "rss_kib": 0}
    began = time.perf_counter()
    for done in _chunks_done(tasks, workers, workdir):
        total["cases"] += done["cases"]
        for kind in ("crashes", "bad_results"):
            for key, item in done[kind].items():
                if key in total[kind]:
                    total[kind][key]["count"] += item["count"]
                else:
                    total[kind][key] = item
        total["slow"] += done["slow"]
        if done["max_s"] > total["max_s"]:
            total["max_s"], total["max_case"] = done["max_s"], done["max_case"]
        total["rss_kib"] = max(total["rss_kib"], done["rss_kib"])
        _progress(parser, total["cases"], cases, began)
    total["seconds"] = time.perf_counter() - began
    print(file=sys.stderr)
    return total


def _chunks_done(tasks: list[tuple], workers: int, workdir: str):
    """run_chunk's results, as they come. A worker that dies (killed for memory, a crash of the interpreter) is a
    crash of its chunk, recorded like an uncaught exception; the chunks still to run go to a fresh pool (a pool of
    multiprocessing waits forever for a worker that died)."""
    context = multiprocessing.get_context("spawn")  # polars' threads do not survive fork
    pending = list(tasks)
    while pending:
        with ProcessPoolExecutor(workers, mp_context=context, initializer=_init_worker,
                                 initargs=(workdir,)) as pool:
            futures = {pool.submit(run_chunk, task): task for task in pending}
            pending = []
            for future in as_completed(futures):
                task = futures[future]
                try:
                    yield future.result()
                except BrokenProcessPool:
                    pending.append(task)
        if pending:  # the first of them (in order) is the one whose worker died, or waited behind it: run alone
            task, pending = pending[0], pending[1:]
            yield from _chunk_alone(task, workdir, context)


def _chunk_alone(task: tuple, workdir: str, context) -> Iterator[dict]:
    parser, start, stop = task[0], task[1], task[2]
    with ProcessPoolExecutor(1, mp_context=context, initializer=_init_worker, initargs=(workdir,)) as pool:
        try:
            yield pool.submit(run_chunk, task).result()
            return
        except BrokenProcessPool:
            pass
    key = f"worker died in cases {start}..{stop - 1} (killed for memory, or a crash of the interpreter)"
    yield {"cases": stop - start, "crashes": {key: {"count": 1, "case": start, "mutation": "?", "first": key,
                                                    "saved": f"--replay {parser}:<index in {start}..{stop - 1}>"}},
           "bad_results": {}, "slow": [], "max_s": 0.0, "max_case": None, "rss_kib": 0}


def _progress(parser: str, done: int, cases: int, began: float) -> None:
    rate = done / max(time.perf_counter() - began, 1e-9)
    print(f"\r{parser}: {done}/{cases} cases, {rate:.0f}/s", end="", file=sys.stderr, flush=True)


def table(results: list[dict]) -> str:
    """The results as a Markdown table."""
    rows = [("| parser | cases | uncaught exceptions (distinct sites) | bad results | "
             "peak RSS | cases/s | slowest case |"), "|---|---:|---|---:|---:|---:|---|"]
    for r in results:
        crashes = sum(c["count"] for c in r["crashes"].values())
        bad = sum(c["count"] for c in r["bad_results"].values())
        rows.append(f"| {r['parser']} | {r['cases']:,} | {crashes} ({len(r['crashes'])}) | {bad} | "
                    f"{r['rss_kib'] / 1024:.0f} MiB | {r['cases'] / r['seconds']:.0f} | {r['max_s']:.2f} s, case "
                    f"{r['max_case']} |")
    return "\n".join(rows)


def details(results: list[dict]) -> str:
    lines = []
    for r in results:
        for kind in ("crashes", "bad_results"):
            for key, item in r[kind].items():
                lines.append(f"{r['parser']}: {key} x{item['count']} (first: case {item['case']}, {item['mutation']}): "
                             f"{item['first']}\n    saved: {item['saved']}.txt")
        for index, label, took in r["slow"][:5]:
            lines.append(f"{r['parser']}: slow case {index} ({label}): {took} s")
    return "\n".join(lines)


def replay(spec: str, seed: int, cases: int, big_size: int) -> None:
    """Rebuild one case (PARSER:INDEX) into ./fuzz-case.bin and parse it in this process, traceback and all."""
    parser, _, index = spec.rpartition(":")
    label, name, data = make_case(parser, int(index), seed, load_seeds(), big_line_indices(cases), big_size,
                                  sparse_indices(cases))
    path = Path("fuzz-case.bin")
    path.write_bytes(data)
    if label == "sparse":  # as run_chunk makes it: the content, then a hole
        os.truncate(path, SPARSE_SIZE)
    print(f"case {index} of {parser}: {label}, {len(data)} bytes -> {path} (named {name})")
    evidence = run_parser(parser, path, name)
    print(check_evidence(evidence, name) or f"ok: {evidence.record_count} records, {len(evidence.problems)} problems")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, help="cases per parser (default 100,000; 1,000 with --quick)")
    parser.add_argument("--pipeline-cases", type=int,
                        help=f"cases of {PIPELINE} (default 2,000; 100 with --quick): each runs the whole pipeline")
    parser.add_argument("--parser", action="append", help="a parser (format name or parse_file); repeatable")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 1,000 cases per parser")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--big-line-mib", type=int, default=BIG_LINE >> 20, help="size of the few huge lines")
    parser.add_argument("--out", default=str(Path(tempfile.gettempdir()) / "ncclforensics-fuzz"),
                        help="where failing inputs, tracebacks and results.json go")
    parser.add_argument("--replay", metavar="PARSER:INDEX",
                        help="rebuild and parse one case, in this process (give the run's --cases and --seed; "
                             "--cases 0 for tests/test_fuzz_sample.py, which makes no 64 MiB lines)")
    args = parser.parse_args()
    cases = args.cases if args.cases is not None else 1000 if args.quick else 100_000
    big_size = args.big_line_mib << 20
    if args.replay:
        replay(args.replay, args.seed, cases, big_size)
        return 0
    names = parser_names() + [PIPELINE]
    chosen = args.parser or names
    unknown = sorted(set(chosen) - set(names))
    if unknown:
        parser.error(f"unknown parser(s) {', '.join(unknown)}; choose from {', '.join(names)}")
    os.environ.setdefault("POLARS_MAX_THREADS", "1")  # one polars thread per worker: the workers are the cores
    shm = Path("/dev/shm")
    workdir = tempfile.mkdtemp(prefix="ncclforensics-fuzz-", dir=shm if shm.is_dir() else None)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    results = []
    pipeline_cases = args.pipeline_cases if args.pipeline_cases is not None else 100 if args.quick else 2000
    try:
        for name in chosen:
            count = pipeline_cases if name == PIPELINE else cases
            results.append(fuzz_parser(name, count, args.seed, args.workers, workdir, args.out, big_size))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(table(results))
    found = details(results)
    if found:
        print("\n" + found)
    (Path(args.out) / "results.json").write_text(json.dumps(results, indent=2, default=str))
    return 1 if any(r["crashes"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
