"""The keyed reader (big logs: COLL lines deduplicated before they are parsed) gives exactly what the line reader
gives, on every NCCL log among the fixtures and on variants made to hit its special cases."""

from __future__ import annotations

from pathlib import Path

import pytest
from polars.testing import assert_frame_equal

from ncclforensics.sources import nccl_log
from ncclforensics.sources.nccl_log import keyed
from ncclforensics.sources.base import InputFile
from fixture_paths import FIXTURES

LOGS = sorted(p for p in FIXTURES.rglob("*") if p.is_file() and b"NCCL" in p.read_bytes())
REAL = FIXTURES / "real" / "nccl-2.28.9" / "extra-op-4rank" / "nccl.vm.442.log"


def _both(path: Path, monkeypatch) -> tuple:
    monkeypatch.setattr(nccl_log, "KEYED_MIN_BYTES", 1 << 62)
    lines = nccl_log.NcclLogSource().parse(InputFile(path, path.name))
    monkeypatch.setattr(nccl_log, "KEYED_MIN_BYTES", 0)
    keyed = nccl_log.NcclLogSource().parse(InputFile(path, path.name))
    return lines, keyed


def _same(path: Path, monkeypatch) -> None:
    lines, keyed = _both(path, monkeypatch)
    # The keyed reader masks the opCount (that is what makes its keys few; a file it hands back to the line reader
    # keeps it); the rest is the line reader's exactly.
    opcount = keyed.collectives["opcount"]
    assert opcount.null_count() == len(opcount) or opcount.equals(lines.collectives["opcount"])
    assert_frame_equal(lines.collectives.drop("opcount"), keyed.collectives.drop("opcount"))
    for name in ("identities", "watchdog", "problems", "version"):
        assert repr(getattr(lines, name)) == repr(getattr(keyed, name)), name


@pytest.mark.parametrize("path", LOGS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_fixture_logs_read_alike(path, monkeypatch):
    _same(path, monkeypatch)


VARIANTS = {
    "stamped": lambda t: b"\n".join(b"[2026-11-29 08:56:%02d.%03d] " % (i % 60, i) + line if line else line
                                    for i, line in enumerate(t.split(b"\n"))),
    "cut_last_line": lambda t: t + b"vm:442:442 [0] NCCL INFO AllReduce: opCount 32 sendbuff 0x7f97",
    "warn_inside_coll": lambda t: t.replace(b"AllReduce: opCount 5 ", b"NCCL WARN AllReduce: opCount 5 ", 1),
    "opcount_left_in_shape": lambda t: t.replace(b"AllReduce: opCount 6 sendbuff", b"AllReduce: opCount 6 sendbufX", 1),
    "run_together": lambda t: t.replace(b"(nil)\nvm:442:442 [0] NCCL INFO AllReduce: opCount 7 ",
                                        b"(nil)vm:442:442 [0] NCCL INFO AllReduce: opCount 7 ", 1),
    "crlf": lambda t: t.replace(b"\n", b"\r\n"),
    "blank_lines": lambda t: b"\n\n" + t.replace(b"(nil)\n", b"(nil)\n\n", 5),
    "separator_byte": lambda t: t.replace(b"(nil)\n", b"(nil)\x1f\n", 1),
    "bad_utf8": lambda t: t.replace(b"Init START", b"Init \xff\xfeSTART", 1),
    "no_final_newline": lambda t: t.rstrip(b"\n"),
}


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_variants_read_alike(name, tmp_path, monkeypatch):
    path = tmp_path / f"{name}.log"
    path.write_bytes(VARIANTS[name](REAL.read_bytes()))
    _same(path, monkeypatch)


@pytest.mark.parametrize("block_bytes", [64, 1000])
@pytest.mark.parametrize("name", ["stamped", "cut_last_line", "opcount_left_in_shape", "crlf", "blank_lines",
                                  "no_final_newline", "warn_inside_coll"])
def test_read_in_blocks_alike(name, block_bytes, tmp_path, monkeypatch):
    """A big log is read a block of lines at a time (its memory bounded by a block, not the file): blocks shorter
    than a line, and blocks that end mid-line, number and split the lines as one read of the whole file does."""
    monkeypatch.setattr(keyed, "BLOCK_BYTES", block_bytes)
    path = tmp_path / f"{name}.log"
    path.write_bytes(VARIANTS[name](REAL.read_bytes()))
    assert path.stat().st_size > 10 * block_bytes
    assert keyed.read_keyed(InputFile(path, path.name), 0) is not None  # read by blocks, not handed back
    _same(path, monkeypatch)
