"""Inputs built to hurt: pickles that import, symlink loops, decompression bombs, huge lines, re-encoded files,
two files claiming one rank. Each is refused or reported in one line, the other inputs are still analysed, and
nothing runs out of time or memory."""

from __future__ import annotations

import codecs
import gzip
import importlib.util
import itertools
import json
import os
import pickle
import pickletools
import re
import subprocess
import sys
import time
import zlib
from pathlib import Path

import polars as pl
import pytest

from cli_helpers import FIXTURES, diff_json, real, run_cli
from ncclforensics.sources import InputFile, SOURCES, parse_file
from ncclforensics.sources import base
from ncclforensics.sources.keyvalue import MAX_RECORD_LINES
from ncclforensics.sources.nccl_log import NcclLogSource
from ncclforensics.sources.safe_pickle import load_pickle

EXTRA_OP = real("extra-op-4rank")
FUZZ = FIXTURES / "constructed" / "fuzz"
ROOT_SEQ = 25  # extra-op-4rank's root; every test below still finds it beside the hostile input


def stderr_lines_naming(err: str, path: Path) -> list[str]:
    return [line for line in err.splitlines() if str(path) in line]


def within_30_s(script: str, *args: str) -> dict:
    """rss_growth_mib, which must also finish within 30 s of wall time."""
    started = time.perf_counter()
    result = rss_growth_mib(script, *args)
    assert time.perf_counter() - started < 30
    return result


def rss_growth_mib(script: str, *args: str) -> dict:
    """Run `script` in a fresh interpreter (after importing ncclforensics); it sets `result`. Returns `result`
    plus `growth_mib`, the peak RSS gained while the script ran."""
    code = (
        "import json, resource, sys\n"
        "import ncclforensics.api, ncclforensics.sources\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        f"{script}\n"
        "result['growth_mib'] = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024\n"
        "print(json.dumps(result))\n"
    )
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "POLARS_MAX_THREADS": "1"})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


# --- Flight Recorder pickles that import ----------------------------------------------------------------------


class _Call:
    """Pickles as a call of `func(*args)` (what an attacker's __reduce__ does)."""

    def __init__(self, func, *args):
        self.func, self.args = func, args

    def __reduce__(self):
        return self.func, self.args


class _PersistentPickler(pickle.Pickler):
    """Writes every _Call as a persistent id: the loader's persistent_load would be asked to build it."""

    def persistent_id(self, obj):
        return f"touch {obj.args[0]}" if isinstance(obj, _Call) else None


def _dump_with(payload) -> dict:
    """A dump that looks like a real one (so it is detected as Flight Recorder) with `payload` inside."""
    return {"version": "2.10", "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0]"}},
            "entries": [{"profiling_name": "nccl:all_reduce", "collective_seq_id": 1, "frames": [payload]}]}


def hostile_pickles(marker: Path) -> dict[str, tuple[bytes, str]]:
    """name -> (pickle bytes, the opcode that would run code); each would create `marker` if it were loaded."""
    import builtins
    import subprocess as sp

    touch = f"touch {marker}"
    persistent = __import__("io").BytesIO()
    _PersistentPickler(persistent, protocol=2).dump(_dump_with(_Call(os.system, str(marker))))
    return {
        "os_system_global_reduce": (pickle.dumps(_dump_with(_Call(os.system, touch)), protocol=2), "GLOBAL"),
        "builtins_eval_stack_global": (pickle.dumps(_dump_with(_Call(builtins.eval, (
            f"__import__('pathlib').Path({str(marker)!r}).touch()"))), protocol=4), "STACK_GLOBAL"),
        "subprocess_popen_reduce": (pickle.dumps(_dump_with(_Call(sp.Popen, ["touch", str(marker)])), protocol=3),
                                    "REDUCE"),
        "os_system_protocol0": (f"cos\nsystem\n(S'{touch}'\ntR.".encode(), "GLOBAL"),
        "os_system_inst": (b"\x80\x02(\x8c" + bytes([len(touch)]) + touch.encode() + b"ios\nsystem\n.", "INST"),
        "os_system_obj": (f"\x80\x02(cos\nsystem\nS'{touch}'\no.".encode("latin-1"), "OBJ"),
        "persistent_load": (persistent.getvalue(), "BINPERSID"),
    }


@pytest.fixture()
def pickles(tmp_path):
    marker = tmp_path / "pwned"
    folder = tmp_path / "dumps"
    folder.mkdir()
    made = {}
    for name, (data, opcode) in hostile_pickles(marker).items():
        # The pickle really holds the dangerous opcode (so the test would catch an unpickler that runs it).
        assert opcode in {op.name for op, _, _ in pickletools.genops(data)}, name
        path = folder / f"{name}_rank0"
        path.write_bytes(data)
        made[name] = path
    return marker, made


def test_each_hostile_pickle_is_refused_and_never_run(pickles):
    marker, made = pickles
    for name, path in made.items():
        code, out, err = run_cli("parse", "--json", path)
        (row,) = json.loads(out)
        assert code == 2 and row["format"] == "flight-recorder" and row["records"] == 0, name
        (line,) = stderr_lines_naming(err, path)
        assert line.startswith(f"error: {path}: refused: ") and "never executed" in line, line
        assert "Traceback" not in err
    assert not marker.exists()


def test_diff_reports_hostile_pickles_and_still_analyses_the_rest(pickles):
    marker, made = pickles
    code, out, err = run_cli("diff", EXTRA_OP, *made.values())
    assert code == 2 and "DIVERGED" in out and "Traceback" not in err
    for path in made.values():
        assert len(stderr_lines_naming(err, path)) == 1
    code, d = diff_json(EXTRA_OP, *made.values())
    assert code == 2 and d["root"]["seq"] == ROOT_SEQ
    assert {p["file"] for p in d["problems"] if "refused" in p["message"]} == {str(p) for p in made.values()}
    assert not marker.exists()


def test_load_pickle_refuses_them_without_raising(tmp_path):
    marker = tmp_path / "pwned"
    for name, (data, _) in hostile_pickles(marker).items():
        value, problems = load_pickle(data, name)
        assert value is None and [p.message.startswith("refused: ") for p in problems] == [True], name
    assert not marker.exists()


# --- symlink loops ------------------------------------------------------------------------------------------------


def test_symlink_loops_terminate_and_are_reported(tmp_path):
    evidence = tmp_path / "evidence"
    evidence.mkdir()
    for source in EXTRA_OP.iterdir():
        (evidence / source.name).symlink_to(source)
    (evidence / "self").symlink_to(".")  # a folder that contains itself
    (evidence / "sub").mkdir()
    (evidence / "sub" / "up").symlink_to("..")  # a folder that contains its parent
    (evidence / "a").symlink_to("b")  # two file links pointing at each other
    (evidence / "b").symlink_to("a")
    loop = tmp_path / "loop"  # a given path that is a loop itself
    loop.symlink_to(loop)

    code, out, err = run_cli("parse", "--json", evidence, loop)
    assert code == 2 and "Traceback" not in err
    assert len(json.loads(out)) == 26  # every real file once, none twice through the loops
    for looping in (evidence / "self", evidence / "sub" / "up"):
        (line,) = stderr_lines_naming(err, looping)
        assert line.startswith("warning: ") and "symlink loop" in line
    for broken in (evidence / "a", evidence / "b"):
        assert len(stderr_lines_naming(err, broken)) == 1
    assert f"error: {loop}: broken symbolic link" in err

    code, d = diff_json(evidence)
    assert code == 1 and d["root"]["seq"] == ROOT_SEQ  # loops are warnings: the diagnosis stands


# --- decompression bombs ------------------------------------------------------------------------------------------


def write_gzip(path: Path, block: bytes, repeats: int, head: bytes = b"") -> None:
    """A .gz expanding to `block * repeats`, written in pieces (never held whole); `head`: a first gzip member."""
    packer = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    with open(path, "wb") as out:
        if head:
            out.write(gzip.compress(head))
        for _ in range(repeats):
            out.write(packer.compress(block))
        out.write(packer.flush())


NCCL_BLOCK = (EXTRA_OP / "nccl.vm.442.log").read_bytes()[:4096].rsplit(b"\n", 1)[0] + b"\n"


def test_a_decompression_bomb_is_one_line_and_exit_2_while_the_rest_is_analysed(tmp_path, monkeypatch):
    monkeypatch.setattr(base, "DEFAULT_MAX_DECOMPRESSED", 1 << 20)  # 1 MiB, so that the bomb stays small
    bomb = tmp_path / "nccl.bomb.log.gz"
    write_gzip(bomb, NCCL_BLOCK, (64 << 20) // len(NCCL_BLOCK))  # 64 MiB of NCCL lines, 64x the limit
    hidden = tmp_path / "nccl.hidden.log.gz"
    write_gzip(hidden, NCCL_BLOCK, (64 << 20) // len(NCCL_BLOCK), head=NCCL_BLOCK)  # the bomb as a second member
    assert bomb.stat().st_size < 1 << 20

    code, out, err = run_cli("diff", EXTRA_OP, bomb, hidden)
    assert code == 2 and "DIVERGED" in out and "Traceback" not in err
    for path in (bomb, hidden):
        (line,) = stderr_lines_naming(err, path)
        assert line == f"error: {path}: gzip expands past 1048576 bytes; refusing it as a decompression bomb"
    assert diff_json(EXTRA_OP, bomb, hidden)[1]["root"]["seq"] == ROOT_SEQ


def test_a_decompression_bomb_is_stopped_without_expanding_in_memory(tmp_path):
    """With a 16 MiB limit, 256 MiB bombs (as the first member, as a later one, and a zlib stream as the content
    of a plain file, which polars would expand by itself) cost about the limit, not their size."""
    one = tmp_path / "first.log.gz"
    write_gzip(one, NCCL_BLOCK * 256, (256 << 20) // (len(NCCL_BLOCK) * 256))
    two = tmp_path / "second.log.gz"
    write_gzip(two, NCCL_BLOCK * 256, (256 << 20) // (len(NCCL_BLOCK) * 256), head=NCCL_BLOCK)
    inner = zlib.compressobj(6)  # a zlib stream as the content of a plain file: NCCL log bytes to the parser
    plain = tmp_path / "zlib-content.log"
    with open(plain, "wb") as out:
        for _ in range(256):
            out.write(inner.compress(NCCL_BLOCK * 256))  # about 256 MiB when expanded
        out.write(inner.flush())
    script = (
        "from pathlib import Path\n"
        "from ncclforensics.sources import InputFile, parse_file\n"
        "from ncclforensics.sources.nccl_log import NcclLogSource\n"
        "result = {}\n"
        "for arg in sys.argv[1:3]:\n"
        "    e = parse_file(InputFile(Path(arg), arg, max_decompressed=16 << 20))\n"
        "    result[arg] = [p.message for p in e.problems]\n"
        "e = NcclLogSource().parse(InputFile(Path(sys.argv[3]), 'plain'))\n"
        "result['plain'] = [p.message for p in e.problems][:1]\n"
    )
    result = rss_growth_mib(script, str(one), str(two), str(plain))
    for path in (one, two):
        assert result[str(path)] == [f"gzip expands past {16 << 20} bytes; refusing it as a decompression bomb"]
    assert result["plain"] == ["not valid UTF-8; undecodable bytes replaced"]
    assert result["growth_mib"] < 150, result


def test_gzip_members_and_early_ends_are_read_as_far_as_they_go(tmp_path):
    two = tmp_path / "two.gz"
    two.write_bytes(gzip.compress(b"step=1 rank=0 decision=pass\n") + gzip.compress(b"step=2 rank=0 decision=skip\n"))
    assert len(parse_file(InputFile(two, "two.gz")).gates) == 2
    cut = tmp_path / "cut.gz"
    cut.write_bytes(gzip.compress(NCCL_BLOCK * 50)[:-200])
    text, problems = InputFile(cut, "cut.gz").read_bytes()
    assert 0 < len(text) < len(NCCL_BLOCK * 50) and problems[0].message.startswith("gzip stream ends early")


# --- one unreadable value ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("logs_only", [False, True], ids=["every-kind", "nccl-logs-only"])
def test_one_unreadable_count_is_reported_and_moves_nothing(tmp_path, logs_only):
    """One COLL line with `count -4096` was dropped as unrecognised; the hole it left in rank 1's seqs turned
    every rank into an outlier. The line is kept with its count unknown: the same root as the untouched evidence,
    the problem at its file:line, exit 2."""
    folder = _copy_of(EXTRA_OP, tmp_path / "ev")
    if logs_only:
        for path in folder.iterdir():
            if not path.name.startswith("nccl."):
                path.unlink()
    log = folder / "nccl.vm.443.log"
    lines = log.read_text().splitlines(keepends=True)
    assert " count 4096 " in lines[42]
    lines[42] = lines[42].replace(" count 4096 ", " count -4096 ")
    log.write_text("".join(lines))
    whole = diff_json(*(sorted(EXTRA_OP.glob("nccl.*.log")) if logs_only else [EXTRA_OP]))[1]["root"]
    code, found = diff_json(folder)
    assert code == 2 and found["verdict"] == "diverged"
    root = found["root"]
    assert (root["seq_range"], root["outlier_ranks"]) == (whole["seq_range"], whole["outlier_ranks"])
    assert root["outlier_ranks"] == [0] and (logs_only or root["seq"] == ROOT_SEQ)
    [problem] = [p for p in found["problems"] if p["file"] == str(log)]
    assert (problem["line"], problem["severity"]) == (43, "error") and problem["message"].endswith("count '-4096'")


def test_streams_that_agree_up_to_a_cut_are_not_said_to_be_nothing_compared(tmp_path):
    """Rank 0's NCCL log cut inside a COLL line: the answer is inconclusive (what rank 0 did after the cut is
    unknown), but its headline said "Nothing here gives the collectives of two or more ranks ... to compare" while
    four ranks' 864 collectives were compared and agree."""
    folder = tmp_path / "ev"
    folder.mkdir()
    for path in real("transient-skew").glob("nccl.*.log"):
        (folder / path.name).write_bytes(path.read_bytes())
    log = folder / "nccl.vm.592.log"
    lines = log.read_bytes().splitlines(keepends=True)
    cut = next(i for i in range(900, len(lines)) if b": opCount " in lines[i])
    log.write_bytes(b"".join(lines[:cut]) + lines[cut][:60])
    code, found = diff_json(folder)
    assert (code, found["verdict"]) == (0, "inconclusive")
    assert found["summary"].startswith("The collective streams of 4 ranks agree wherever their records overlap, but "
                                       "that is not enough to call the job consistent"), found["summary"]
    assert any(f"({log}:{cut + 1})" in caveat for caveat in found["caveats"])


# --- a 64 MiB line, and lines built to make regexes slow ------------------------------------------------------------


def test_a_64_mib_line_in_an_nccl_log_keeps_memory_bounded_and_the_diagnosis(tmp_path):
    evidence = tmp_path / "evidence"
    evidence.mkdir()
    for source in EXTRA_OP.iterdir():
        (evidence / source.name).symlink_to(source)
    (evidence / "nccl.vm.442.log").unlink()
    lines = (EXTRA_OP / "nccl.vm.442.log").read_bytes().split(b"\n")
    with open(evidence / "nccl.vm.442.log", "wb") as out:  # written in pieces: this process stays small too
        out.write(b"\n".join(lines[:30]) + b"\n" + lines[20][:60])
        for _ in range(64):
            out.write(b"a" * (1 << 20))
        out.write(b"\n" + b"\n".join(lines[30:]))
    script = (
        "parsed, d = ncclforensics.api.diff_paths(sys.argv[1:])\n"
        "result = {'seq': d.root.seq, 'problems': [str(p) for p in parsed.all_problems + d.problems]}\n"
    )
    result = rss_growth_mib(script, str(evidence))
    assert result["seq"] == ROOT_SEQ
    big = evidence / "nccl.vm.442.log"
    assert f"{big}:31: line of {60 + (64 << 20)} bytes is not NCCL debug output; skipped" in result["problems"]
    assert result["growth_mib"] < 600, result


def make_fixtures():
    spec = importlib.util.spec_from_file_location("make_fuzz_fixtures", FUZZ / "make_fixtures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("make", ["torch_pg_paren", "torch_nccl_prefix"])
def test_lines_built_to_backtrack_take_linear_time(tmp_path, make):
    """Torch-log lines that took time quadratic in their length (5 s at 3x the fixture's size); at 10x the
    fixture's size they now take well under a second."""
    path = tmp_path / "torch.log"
    path.write_bytes(getattr(make_fixtures(), make)(10 * (3000 if make == "torch_pg_paren" else 8000)))
    began = time.perf_counter()
    evidence = parse_file(InputFile(path, "torch.log"))
    assert time.perf_counter() - began < 3 and evidence.format.value == "torch-log"


def test_entries_sharing_one_memoised_frames_list_walk_it_once(monkeypatch):
    """3000 entries that are one memoised dict whose 3000 frames are inside torch: walking each entry's frames
    cost entries x frames (hours for a 1 MB file); each list is now walked once."""
    from ncclforensics.sources import fr_entries

    walked = []
    walk = fr_entries._call_site
    monkeypatch.setattr(fr_entries, "_call_site", lambda frames, seen: walked.append(len(frames)) or walk(
        frames, seen))
    path = FUZZ / "fr_memo_quadratic_rank0"
    evidence = parse_file(InputFile(path, path.name))
    assert evidence.collectives.height == 3000 and evidence.collectives["callsite"].null_count() == 3000
    assert walked == [3000]


def test_an_nccl_log_whose_content_starts_like_gzip_is_read_not_sniffed_by_polars():
    path = FUZZ / "nccl_log_gzip_magic_inside.log.gz"
    evidence = next(s for s in SOURCES if s.format.value == "nccl-log").parse(InputFile(path, path.name))
    assert evidence.collectives.height == 1 and evidence.ranks == [0]


def test_a_short_ras_reply_cannot_claim_millions_of_comms(tmp_path):
    reply = (EXTRA_OP / "ras_status_q0.txt").read_text().split("\n")
    row = next(i for i, line in enumerate(reply) if line.strip().startswith("0 "))
    rows = [f"{g:>5} 65536 1 4 4 4 RUNNING OK" for g in range(2000)]  # 2000 rows of 65536 healthy comms
    path = tmp_path / "ras_status.txt"
    path.write_text("\n".join(reply[:row] + rows + reply[row + 1:]))
    began = time.perf_counter()
    evidence = parse_file(InputFile(path, "ras_status.txt"))
    assert time.perf_counter() - began < 10
    assert sum(len(s.comms) for s in evidence.ras) <= 1 << 16
    assert any("more comms than this file may imply" in p.message for p in evidence.problems)


# --- re-encoded copies of real files ------------------------------------------------------------------------------


def reencode(source: Path, target: Path, how: str) -> Path:
    """A copy of a capture folder with every text file re-encoded (pickles are binary and stay as they are)."""
    target.mkdir()
    for path in sorted(source.iterdir()):
        data = path.read_bytes()
        if data[:1] == b"\x80":
            pass
        elif how == "crlf":
            data = data.replace(b"\n", b"\r\n")
        elif how == "utf-16-be":
            data = codecs.BOM_UTF16_BE + data.decode().encode("utf-16-be")
        else:
            data = data.decode().encode(how)  # "utf-16": a BOM, then the machine's byte order
        (target / path.name).write_bytes(data)
    return target


def analysis(d: dict, folder: Path) -> dict:
    kept = {key: d[key] for key in ("verdict", "root", "wedge", "window", "first_visible_mismatch")}
    return json.loads(json.dumps(kept).replace(str(folder), "<dir>"))


@pytest.mark.parametrize("how", ["crlf", "utf-16", "utf-16-be"])
@pytest.mark.parametrize("scenario", ["extra-op-4rank", "killed-rank"])
def test_crlf_and_utf16_copies_give_the_same_analysis(tmp_path, scenario, how):
    original = real(scenario)
    copy = reencode(original, tmp_path / scenario, how)
    code0, d0 = diff_json(original)
    code1, d1 = diff_json(copy)
    assert code1 == code0 and analysis(d1, copy) == analysis(d0, original)
    assert [p for p in d1["problems"] if p["severity"] == "error"] == []


def test_a_utf16_flight_recorder_json_dump_reads_like_the_original(tmp_path):
    copy = reencode(real("healthy-1rank"), tmp_path / "healthy", "utf-16")
    code, d = diff_json(copy)
    assert code == 0


# --- two files claiming one rank ----------------------------------------------------------------------------------


def conflicting_copies(folder: Path) -> tuple[Path, Path]:
    """Rank 1's NCCL log with its last 5 collectives gone, and rank 2's dump cut to 40 entries: two files that
    describe a rank the real capture already describes, differently."""
    folder.mkdir()
    lines = (EXTRA_OP / "nccl.vm.443.log").read_text().splitlines(keepends=True)
    colls = [i for i, line in enumerate(lines) if ": opCount " in line]
    log = folder / "nccl.vm.443.log"
    log.write_text("".join(line for i, line in enumerate(lines) if i not in colls[-5:]))
    dump, _ = load_pickle((EXTRA_OP / "fr_rank2").read_bytes(), "fr_rank2")
    dump["entries"] = dump["entries"][:40]
    fr = folder / "fr_rank2"
    fr.write_bytes(pickle.dumps(dump, protocol=2))
    return log, fr


def test_two_different_files_for_one_rank_are_a_conflict_not_merged(tmp_path):
    log, fr = conflicting_copies(tmp_path / "other")
    code, d = diff_json(EXTRA_OP, tmp_path / "other")
    assert code == 2
    conflicts = {p["file"]: p for p in d["problems"] if "conflicts with" in p["message"]}
    assert set(conflicts) == {str(log), str(fr)} and all(p["severity"] == "error" for p in conflicts.values())
    assert "rank 1 in comm 0x1715b7bd1b8fda9e" in conflicts[str(log)]["message"]
    assert f"using {EXTRA_OP / 'nccl.vm.443.log'} only" in conflicts[str(log)]["message"]
    # Not merged: the original streams alone give the root, the window and where each rank stopped.
    _, original = diff_json(EXTRA_OP)
    mine, theirs = analysis(d, EXTRA_OP), analysis(original, EXTRA_OP)
    for key in ("verdict", "root", "window", "first_visible_mismatch"):
        assert mine[key] == theirs[key], key
    for key in ("seq", "kind", "launched", "completed", "waiting_ranks", "absent_ranks"):
        assert mine["wedge"][key] == theirs["wedge"][key], key


def test_a_conflicting_file_is_left_out_entirely(tmp_path):
    log, fr = conflicting_copies(tmp_path / "other")
    _, d = diff_json(EXTRA_OP, tmp_path / "other")
    cited = [e["at"] for e in d["evidence"]] + d["wedge"]["confirmed_by"]
    assert not [c for c in cited if str(log) in c or str(fr) in c]


def test_an_identical_copy_of_a_file_is_a_duplicate_warning_not_trouble(tmp_path):
    copy = tmp_path / "nccl.vm.443.log"
    copy.write_bytes((EXTRA_OP / "nccl.vm.443.log").read_bytes())
    code, d = diff_json(EXTRA_OP, copy)
    assert code == 1 and d["root"]["seq"] == ROOT_SEQ
    (dup,) = [p for p in d["problems"] if p["file"] == str(copy)]
    assert dup["severity"] == "warning" and dup["message"].startswith("duplicates ")


# --- pickles built to make the unpickler or the reader blow up ------------------------------------------------------


def bounded_cli(*args, timeout: float = 60, memory_mib: int = 2048) -> subprocess.CompletedProcess:
    """`ncclforensics ARGS` in a child with an address-space limit and a timeout, so that a regression fails the
    test instead of hanging or exhausting the machine (and a crash of the interpreter shows as its exit code)."""
    import resource

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (memory_mib << 20, memory_mib << 20))

    return subprocess.run([sys.executable, "-m", "ncclforensics.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, preexec_fn=limit, env={**os.environ, "COLUMNS": "200"})


def _dump_bytes(extra: dict, protocol: int = 2) -> bytes:
    dump = {"version": "2.10", "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2, 3]"}},
            "entries": [{"process_group": ("0", "default_pg"), "collective_seq_id": 1, "pg_id": 0,
                         "profiling_name": "nccl:all_reduce", "input_sizes": [[8]], "input_dtypes": ["Float"],
                         "state": "completed", "frames": []}]}
    dump.update(extra)
    return pickle.dumps(dump, protocol=protocol)


def _as_dict_key(data: bytes, value_ops: bytes) -> bytes:
    """The dump with one more top-level key, `pg_status`, whose value is a dict keyed by what `value_ops` push
    (opcodes that leave one object on the stack): {<that>: 1}."""
    assert data.endswith(b"u.")
    return data[:-2] + b"\x8c\x09pg_status}" + value_ops + b"K\x01s" + b"u."


def hash_bomb(levels: int = 80) -> bytes:
    """((), ()) nested `levels` times by memo references (the Python pickler's own output for such a tuple), the
    last one then used as a dict key: hashing it walks 2**levels leaves."""
    chain = [()]
    for _ in range(levels):
        chain.append((chain[-1], chain[-1]))
    data = _dump_bytes({"chain": chain})
    last = max(arg for op, arg, _ in pickletools.genops(data) if op.name == "BINPUT")  # the last tuple's slot
    return _as_dict_key(data, b"h" + bytes([last]) if last < 256 else b"j" + last.to_bytes(4, "little"))


def billion_laughs(levels: int = 30, width: int = 10) -> dict:
    """A list nested `levels` deep by reference, `width` references a level: 10**30 leaves as a tree, a few
    hundred bytes as a pickle; put where the reader turns fields into text."""
    laughs: list = ["lol"]
    for _ in range(levels):
        laughs = [laughs] * width
    entry = {"process_group": (laughs, laughs), "collective_seq_id": laughs, "profiling_name": laughs,
             "input_sizes": laughs, "input_dtypes": laughs, "state": laughs, "frames": laughs,
             "time_created_ns": laughs, "pg_id": laughs, "thread_name": laughs}
    return {"version": laughs, "pg_config": {"0": {"name": laughs, "desc": laughs, "ranks": laughs}},
            "pg_status": {"0": {"last_enqueued_collective": laughs}}, "entries": [entry, entry], "rank": laughs}


@pytest.mark.parametrize("make", ["hash_bomb", "deep_tuple_key", "hash_bomb_protocol_5"])
def test_tuple_bombs_are_refused_at_once_without_a_crash(tmp_path, make):
    """A 1 KB pickle whose dict key is ((), ()) nested 80 times by reference ran for hours (hashing it); a tuple
    nested 10**6 deep as a key overflowed the C stack (SIGSEGV, exit 139, also in the main process that re-read
    the file after its worker died). Now each is one line, exit 2, and the other evidence is still analysed."""
    if make == "hash_bomb":
        data = hash_bomb()
    elif make == "deep_tuple_key":
        data = _as_dict_key(_dump_bytes({}), b")" + b"\x85" * 10**6)
    else:
        chain = [()]
        for _ in range(80):
            chain.append((chain[-1], chain[-1]))
        data = _dump_bytes({"chain": chain, "key": [chain[-1]]}, protocol=5)
        ops = list(pickletools.genops(data))  # make the list [t] of "key" a dict {t: 1}
        at = max(pos for op, _, pos in ops if op.name == "EMPTY_LIST")
        end = next(pos for op, _, pos in ops if op.name == "APPEND" and pos > at)
        data = data[:at] + b"}" + data[at + 1:end] + b"K\x01s" + data[end + 1:]
    bomb = tmp_path / "fr_rank9"
    bomb.write_bytes(data)
    started = time.perf_counter()
    done = bounded_cli("diff", "--json", EXTRA_OP, bomb)
    assert time.perf_counter() - started < 30
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert json.loads(done.stdout)["root"]["seq"] == ROOT_SEQ and "Traceback" not in done.stderr
    (line,) = stderr_lines_naming(done.stderr, bomb)
    assert line.startswith(f"error: {bomb}: refused: the tuple built at byte ") and "holds a tuple" in line


def test_a_billion_laughs_pickle_is_read_in_small_time_and_memory(tmp_path):
    """A list nested by reference, put into every field, took 5 GB (its text was built: str() of the name) and
    ran on; now each field is a malformed value, shown cut short."""
    bomb = tmp_path / "fr_rank2"
    bomb.write_bytes(pickle.dumps(billion_laughs(), protocol=2))
    assert bomb.stat().st_size < 20_000
    done = bounded_cli("parse", "--json", bomb, timeout=60, memory_mib=1024)
    assert done.returncode in (0, 2) and "Traceback" not in done.stderr, done.stderr[-2000:]
    (row,) = json.loads(done.stdout)
    assert row["format"] == "flight-recorder" and row["records"] == 0
    assert all(len(e["message"]) < 400 for e in row["errors"])
    assert any("process group '0'" in e["message"] for e in row["errors"])


def test_an_integer_of_5000_digits_as_a_group_name_is_one_line_not_a_traceback(tmp_path):
    """int("1" * 5000) as a process-group name and key raised ValueError (str() of it) and aborted the run."""
    huge = 10**5000
    dumps = {"fr_rank5": _dump_bytes({"pg_config": {huge: {"name": huge, "desc": "x", "ranks": "[0]"}},
                                      "pg_status": {huge: {"last_enqueued_collective": 1}}}),
             "fr_rank6.json": ('{"version": "2.10", "pg_config": {"0": {"name": "0", "ranks": "[0]"}}, '
                               '"pg_status": {"0": {"last_enqueued_collective": 1' + "0" * 5000 + '}}}').encode(),
             "fr_rank7": _dump_bytes({"pg_config": {10**600: {"name": 10**600, "desc": "x", "ranks": "[0]"}},
                                      "pg_status": {10**600: {"last_enqueued_collective": 1}}})}
    paths = []
    for name, data in dumps.items():
        (tmp_path / name).write_bytes(data)
        paths.append(tmp_path / name)
    code, out, err = run_cli("parse", "--json", *paths)
    assert code == 2 and "Traceback" not in err
    rows = {Path(r["file"]).name: r for r in json.loads(out)}
    assert rows["fr_rank5"]["records"] == 0 and "integer of 2077 bytes (LONG4)" in rows["fr_rank5"]["errors"][0][
        "message"]
    assert rows["fr_rank6.json"]["records"] == 0 and "ValueError" in rows["fr_rank6.json"]["errors"][0]["message"]
    assert rows["fr_rank7"]["records"] == 1  # 600 digits load (LONG1); the group is a bad name, a warning
    assert {e["severity"] for e in rows["fr_rank7"]["errors"]} == {"warning"}
    for path in paths:
        assert len(stderr_lines_naming(err, path)) >= 1


_DEAD_WORKER = """
import json, os, sys
from pathlib import Path
from ncclforensics import api

folder, flag, main = sys.argv[1], Path(sys.argv[2]), os.getpid()
packed, parse = api._parse_packed, api.parse_file

def packed_or_die(file):  # the first worker to get rank 2's dump dies, as a crash kills it
    if file.name.endswith("fr_rank2") and flag.exists():
        flag.unlink()
        os._exit(139)
    return packed(file)

def never_here(file, *args):  # forked workers inherit it: they may
    assert os.getpid() != main, f"{file.name} parsed in the main process"
    return parse(file, *args)

api._parse_packed, api.parse_file = packed_or_die, never_here
print(json.dumps([e.collectives.height for e in api.parse_files(api.discover([folder])[0])]))
"""


def test_a_dead_worker_is_followed_by_a_parse_in_a_fresh_process_not_in_this_one(tmp_path):
    """A worker that dies (here on purpose; before, on a pickle that overflowed the C stack) broke the pool, and
    every file it still had was parsed again in the main process, where the same crash ended the whole run.
    (In a fresh interpreter: forking is safe only before polars has started its threads.)"""
    folder = tmp_path / "ev"
    folder.mkdir()
    for name in ("fr_rank0", "fr_rank1", "fr_rank2", "fr_rank3"):
        (folder / name).symlink_to(EXTRA_OP / name)
    flag = tmp_path / "die"
    flag.touch()
    done = subprocess.run([sys.executable, "-c", _DEAD_WORKER, str(folder), str(flag)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert not flag.exists()  # a worker did die
    assert json.loads(done.stdout) == [50, 49, 49, 49]  # and rank 2 was read in a fresh process


def test_dumps_python_writes_with_tuples_still_load(tmp_path):
    """What the grammar must keep accepting: a tuple shared by every entry (Python's pickler), a tuple per entry
    whose items are memo references (PyTorch's dumps), items that are long strings, a group that pg_config does
    not list (its strings memoized after the first tuple), for protocols 2 to 5."""
    desc = "a process group description longer than sixty-four characters, in a tuple"
    shared = ("0", "default_pg")
    entries = [{"process_group": shared, "collective_seq_id": i, "profiling_name": "nccl:all_reduce",
                "input_sizes": [[8]], "input_dtypes": ["Float"], "state": "completed", "frames": []}
               for i in range(1, 40)]
    entries += [{"process_group": ("9", desc) if i % 2 else (str(9), desc + ""), "collective_seq_id": i,
                 "profiling_name": "nccl:all_reduce", "input_sizes": [[8]], "input_dtypes": ["Float"],
                 "state": "completed", "frames": []} for i in range(1, 40)]
    for entry in entries[::3]:
        entry["process_group"] = tuple(entry["process_group"])  # fresh tuples too, of the same strings
    dump = {"version": "2.10", "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}},
            "entries": entries}
    for protocol in (2, 3, 4, 5):
        data = pickle.dumps(dump, protocol=protocol)
        value, problems = load_pickle(data, "fr_rank0")
        assert problems == [] and value == dump, protocol
        big = pickle.dumps({**dump, "entries": entries * 300}, protocol=protocol)  # > 64 KiB: the DFA's path
        value, problems = load_pickle(big, "fr_rank0")
        assert problems == [] and len(value["entries"]) == len(entries) * 300, protocol


def test_both_engines_give_the_same_verdicts(monkeypatch):
    """The DFA (polars) and Python's engine walk one grammar: on corrupted copies of a real dump (large enough
    for the DFA) they agree."""
    import random

    from ncclforensics.sources import pickle_grammar

    dump = pickle.loads((EXTRA_OP / "fr_rank0").read_bytes())
    dump["entries"] = [pickle.loads(pickle.dumps(e)) for e in dump["entries"] * 8]  # copies: no shared memo
    data = pickle.dumps(dump, protocol=2)
    assert len(data) > 1 << 16
    rng = random.Random(7)
    for case in range(20):
        mutated = bytearray(data)
        for _ in range(rng.randint(1, 3)):
            mutated[rng.randrange(2, len(mutated))] = rng.choice([0x85, 0x86, 0x30, 0x32, 0x71, 0x68, 0x8B,
                                                                  rng.randrange(256)])
        mutated = bytes(mutated)
        monkeypatch.setattr(pickle_grammar, "_FAST_MIN", 1 << 40)
        python = pickle_grammar.scan(mutated)
        monkeypatch.setattr(pickle_grammar, "_FAST_MIN", 1 << 16)
        fast = pickle_grammar.scan(mutated)
        assert python[0] == fast[0], (case, python, fast)
        if python[0] in ("ok", "truncated"):
            assert python == fast, case


# --- Flight Recorder pickles cut short --------------------------------------------------------------------------


def test_a_dump_cut_anywhere_keeps_the_entries_before_the_cut_and_says_where(tmp_path):
    """A dump cut inside an opcode's argument (a memo index, a length, a string) was "not a Flight Recorder dump"
    and lost whole; a cut anywhere now keeps the complete entries before it and says at which byte, and which
    entry, it was cut. It is an error: a cut file is never read as complete."""
    from ncclforensics.model import Evidence, SourceFormat
    from ncclforensics.sources.flight_recorder import read_dump

    data = (EXTRA_OP / "fr_rank0").read_bytes()
    full = parse_file(InputFile(EXTRA_OP / "fr_rank0", "fr_rank0")).collectives
    first_entry = data.index(b"entries") + 20
    seen = set()
    for cut in range(first_entry, len(data) - 1, 97):
        value, problems = load_pickle(data[:cut], "fr_rank0")
        assert value is not None, (cut, problems)
        (problem,) = problems
        assert problem.severity.value == "error"
        assert problem.message.startswith(f"truncated pickle: the data ends at byte {cut} before the end")
        evidence = Evidence(path="fr_rank0", format=SourceFormat.FLIGHT_RECORDER)
        read_dump(value, "fr_rank0", evidence)
        frame = evidence.collectives
        assert frame.equals(full.head(frame.height)), cut
        if "the next one is cut short" in problem.message:
            assert problem.loc.record == frame.height
        seen.add(frame.height)
    assert len(seen) > 30
    path = tmp_path / "fr_rank0"
    path.write_bytes(data[:len(data) // 2 + 3])
    code, out, err = run_cli("parse", "--json", path)
    (row,) = json.loads(out)
    assert code == 2 and row["records"] > 10 and "truncated pickle" in err and "Traceback" not in err


# --- outputs that would overwrite or join the evidence --------------------------------------------------------------


def _copy_of(folder: Path, target: Path) -> Path:
    target.mkdir(parents=True)
    for source in folder.iterdir():
        (target / source.name).write_bytes(source.read_bytes())
    return target


def _snapshot(folder: Path) -> dict:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_no_output_of_any_command_overwrites_an_input_or_lands_in_an_input_folder(tmp_path):
    """`gates --plot ev/gate_journal_rank0.log ev` and `acceptance --plot vl/server.log vl/server.log` overwrote
    the input with a PNG; `--plot ev/x.png` wrote into an input folder; `postmortem ev2 --out ev2/more/pm` with
    `ev2/more` a link to a folder the walk reads was accepted. Each is now one line and exit 2, nothing written."""
    ev = _copy_of(EXTRA_OP, tmp_path / "ev")
    vl = tmp_path / "vl"
    vl.mkdir()
    (vl / "server.log").write_bytes((FIXTURES / "public" / "vllm_specdecode").glob("*").__next__().read_bytes())
    elsewhere = _copy_of(EXTRA_OP, tmp_path / "elsewhere" / "evidence")
    ev2 = tmp_path / "ev2"
    ev2.mkdir()
    (ev2 / "more").symlink_to(elsewhere)
    (tmp_path / "alias").symlink_to(ev)
    before = {f: _snapshot(f) for f in (ev, vl, elsewhere)}
    cases = [
        ("gates", "--plot", ev / "gate_journal_rank0.log", ev),
        ("gates", "--plot", ev / "x.png", ev),
        ("gates", "--plot", tmp_path / "alias" / "x.png", ev),
        ("acceptance", "--plot", vl / "server.log", vl / "server.log"),
        ("postmortem", ev2, "--out", ev2 / "more" / "pm"),
        ("postmortem", ev, "--out", tmp_path / "alias" / "pm"),
    ]
    for args in cases:
        code, out, err = run_cli(*args)
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1, (args, err)
        assert lines[0].startswith("error: --") and ("is an input file" in lines[0] or "is inside input folder" in
                                                     lines[0]), lines
    assert {f: _snapshot(f) for f in (ev, vl, elsewhere)} == before
    code, out, err = run_cli("gates", "--plot", tmp_path / "coverage.png", ev)
    assert code == 1 and (tmp_path / "coverage.png").read_bytes()[:4] == b"\x89PNG"  # outside: fine
    code, out, err = run_cli("acceptance", "--plot", vl / "acc.png", vl / "server.log")
    assert code in (0, 1) and (vl / "acc.png").exists()  # a plot beside an input file given as a file: fine


def test_a_link_left_in_the_output_folder_is_replaced_not_followed(tmp_path):
    ev = _copy_of(EXTRA_OP, tmp_path / "ev")
    before = _snapshot(ev)
    out = tmp_path / "pm"
    out.mkdir()
    (out / "report.md").symlink_to(ev / "nccl.vm.442.log")
    (tmp_path / "plot.png").symlink_to(ev / "gate_journal_rank1.log")
    code, _, err = run_cli("postmortem", ev, "--out", out)
    assert code == 1, err
    code, _, err = run_cli("gates", "--plot", tmp_path / "plot.png", ev)
    assert code == 2 and "is an input file" in err  # the link resolves to an input: refused
    assert _snapshot(ev) == before
    assert not (out / "report.md").is_symlink() and (out / "report.md").read_text().startswith("# ")


def test_the_sidecar_never_appends_alerts_to_the_journal_it_reads(tmp_path):
    from ncclforensics.live.cli import live
    from click.testing import CliRunner

    journal = tmp_path / "gate_rank0.jsonl"
    journal.write_text('{"step": 0, "rank": 0, "decision": "pass"}\n')
    link = tmp_path / "alerts.jsonl"
    link.symlink_to(journal)
    for alerts in (journal, link):
        result = CliRunner().invoke(live, ["sidecar", "--rank", "0", "--world-size", "1", "--journal", str(journal),
                                           "--alerts", str(alerts), "--timeout", "1"])
        assert result.exit_code == 2 and "is an input file" in result.stderr, result.output
    assert journal.read_text() == '{"step": 0, "rank": 0, "decision": "pass"}\n'


# --- names and values that are markup, escapes or not text ------------------------------------------------------------

HOSTILE_SITE = "app/[/]\x1b[2Jmodel``<img src=x onerror=alert(1)>``.py"


def hostile_names_copy(tmp_path: Path) -> Path:
    """extra-op-4rank in a folder whose name holds rich markup, with call sites holding markup, a terminal
    escape and a code span breaker, a fingerprint tag with a lone surrogate, a NaN checksum, and a file whose
    name holds a newline and a forged `error:` line."""
    folder = tmp_path / "in[" / "]cident"  # `[/]` in the path
    folder.mkdir(parents=True)
    for source in EXTRA_OP.iterdir():
        (folder / source.name).write_bytes(source.read_bytes())
    for rank in range(4):
        dump = pickle.loads((folder / f"fr_rank{rank}").read_bytes())
        for entry in dump["entries"]:
            for frame in entry["frames"]:
                if "torch" not in frame["filename"]:
                    frame["filename"] = HOSTILE_SITE + frame["filename"]  # still one file per call site
        (folder / f"fr_rank{rank}").write_bytes(pickle.dumps(dump, protocol=2))
    fingerprints = (folder / "fingerprint_rank1.log").read_text().replace("step=9 rank=1 checksum=10240.000000",
                                                                         "step=9 rank=1 checksum=nan")
    fingerprints += ('{"step": 11, "op": 0, "rank": 1, "tag": "layer0\\ud800", "kind": "AllReduce", "numel": 4, '
                     '"sum": 1.0, "expected_sum": 1.0, "digest": "x\\ud800"}\n')
    (folder / "fingerprint_rank1.log").write_text(fingerprints, errors="surrogatepass")
    # (empty: a file that looks like evidence and cannot be read is an error; one of no format would be a warning)
    (folder / "x\nerror: forged line").write_bytes(b"")
    return folder


def test_hostile_names_print_as_themselves_in_every_output(tmp_path):
    """`[/]` in a path or call site gave a rich MarkupError traceback; `\\e[2J` reached the terminal raw; a file
    name with a newline forged an `error:` line; a call site with double backticks ended its code span in
    report.md, and a CommonMark renderer then emitted `<img onerror=...>`; a lone surrogate in a tag was a
    UnicodeEncodeError in diff and postmortem; `diff --json` wrote a bare NaN."""
    from markdown_it import MarkdownIt

    folder = hostile_names_copy(tmp_path)
    done = bounded_cli("diff", folder)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert "DIVERGED" in done.stdout and "\x1b" not in done.stdout + done.stderr
    assert "app/[/]\\x1b[2Jmodel``<img" in done.stdout  # shown, escaped
    assert not [line for line in done.stderr.splitlines() if line.startswith("error: forged")]
    assert f"error: {folder}/x\\nerror: forged line: " in done.stderr

    code, out, err = run_cli("diff", "--json", folder)
    assert code == 2 and "Traceback" not in err

    def bare(token):
        raise AssertionError(f"bare {token} in the JSON")

    answer = json.loads(out, parse_constant=bare)
    assert answer["root"]["seq"] == ROOT_SEQ
    assert {s["step"]: s["values"]["1"] for s in answer["checksum_splits"]}[9] == "NaN"

    out = tmp_path / "pm"
    code, _, err = run_cli("postmortem", folder, "--out", out)
    assert code == 2 and "Traceback" not in err, err[-3000:]
    markdown = (out / "report.md").read_text(encoding="utf-8")
    rendered = MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)
    assert not re.search(r"<img[^>]*onerror", rendered) and "&lt;img src=x onerror" in rendered
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "<img src=x" not in page and "\x1b" not in page + markdown


def test_mathtext_in_names_is_drawn_as_written(tmp_path):
    """A comm or group named with `$...$` was mathtext to matplotlib: a bad one fails the drawing."""
    from ncclforensics.report import plots

    fig, (ax,) = plots._figure(3, 2)
    ax.set_title(r"comm $\frac{$ broken")
    assert plots.png_bytes(fig)[:4] == b"\x89PNG"


# --- files too big for their format ---------------------------------------------------------------------------------


def test_sparse_and_one_line_files_are_refused_in_bounded_memory(tmp_path):
    """A sparse 3 GB NCCL log (a real head, then a hole) was a polars PanicException at 6.4 GB RSS; a sparse
    3 GB gate journal took 6.4 GB and exit 0 with no problem; a 2 MB .gz of one 300 MiB line took 5x its size.
    Each is now one error line naming the limit, exit 2, and the rest of the evidence is still analysed."""
    folder = _copy_of(EXTRA_OP, tmp_path / "ev")
    log = folder / "nccl.vm.442.log"
    os.truncate(log, 3 << 30)
    journal = folder / "gate_journal_rank0.log"
    lines = journal.read_text().splitlines()
    journal.write_text("\n".join(lines * (70_000 // len("\n".join(lines)) + 1)) + "\n")  # a head of real lines
    os.truncate(journal, 3 << 30)
    packed = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    with open(folder / "one-line.log.gz", "wb") as out:
        out.write(packed.compress((EXTRA_OP / "nccl.vm.443.log").read_bytes()))
        for _ in range(300):
            out.write(packed.compress(b"a" * (1 << 20)))
        out.write(packed.flush())
    script = (
        "parsed, d = ncclforensics.api.diff_paths(sys.argv[1:])\n"
        "result = {'problems': [str(p) for p in parsed.all_problems if p.severity.value == 'error'],\n"
        "          'outlier': d.root.outlier_ranks if d.root else None}\n"
    )
    result = within_30_s(script, str(folder))
    problems = "\n".join(result["problems"])
    assert f"{log}: a line of more than 64 MiB (from byte 67108864 of the content on); refusing the file" in problems
    assert f"{journal}: 3221225472 bytes, over the 1024 MiB a gate-journal file may have" in problems
    assert f"{folder / 'one-line.log.gz'}: a line of more than 64 MiB" in problems
    assert result["outlier"] == [0]  # ranks 1-3 and rank 0's dump still tell the story
    assert result["growth_mib"] < 400, result


def sparse_nccl_log(path: Path, apart: int | None) -> Path:
    """A real log's head, then holes: one to 3 GiB (`apart` None), or lines `apart` bytes apart up to 1 GiB."""
    lines = (EXTRA_OP / "nccl.vm.442.log").read_bytes().splitlines(keepends=True)
    with open(path, "wb") as out:
        out.write(b"".join(lines[:60]))
        if apart is None:
            out.truncate(3 << 30)
            return path
        for line in itertools.cycle(lines[60:]):
            if out.tell() > (1 << 30) - apart:
                break
            out.seek(out.tell() + apart)  # a hole: a line of NULs, no disk and no memory here
            out.write(line)
    return path


@pytest.mark.parametrize("apart", [None, 8 << 20], ids=["one-hole-to-3-GiB", "lines-8-MiB-apart"])
def test_a_sparse_nccl_log_costs_bounded_memory_in_its_own_parser(tmp_path, apart):
    """`parse_file` refused a sparse 3 GiB log before reading it, but the NCCL log parser itself handed it to
    polars, which built the hole as one 3 GiB line: 15.6 GiB of RSS before the refusal. A 1 GiB log whose lines
    are 8 MiB of NULs apart was read whole in memory: 3.1 GiB. Now the first is refused unread and the second is
    streamed, its long lines skipped with a warning each."""
    log = sparse_nccl_log(tmp_path / "nccl.vm.442.log", apart)
    script = (
        "from pathlib import Path\n"
        "from ncclforensics.errors import SourceError\n"
        "from ncclforensics.sources import InputFile\n"
        "from ncclforensics.sources.nccl_log import NcclLogSource\n"
        "try:\n"
        "    e = NcclLogSource().parse(InputFile(Path(sys.argv[1]), 'nccl.vm.442.log'))\n"
        "    result = {'rows': e.collectives.height, 'problems': [str(p) for p in e.problems]}\n"
        "except SourceError as error:\n"
        "    result = {'refused': str(error)}\n"
    )
    result = rss_growth_mib(script, str(log))
    if apart is None:
        assert result["refused"] == f"{log}: a line of more than 64 MiB (from byte 67108864 of the content on); " \
                                    "refusing the file (see MAX_LINE_BYTES)"
        assert result["growth_mib"] < 100, result
    else:
        head = NcclLogSource().parse(InputFile(EXTRA_OP / "nccl.vm.442.log", "x")).collectives
        assert result["rows"] == head.filter(pl.col("line") <= 60).height > 0  # the head's; every later line is long
        skipped = [p for p in result["problems"] if "bytes is not NCCL debug output; skipped" in p]
        assert skipped[0].startswith("nccl.vm.442.log:61: line of 83887") and len(skipped) == 50
        assert any(p.endswith(" over-long lines skipped not listed") for p in result["problems"])
        assert result["growth_mib"] < 800, result


def test_a_gz_of_millions_of_one_repeated_journal_line_is_refused_as_it_inflates(tmp_path):
    """A 2 MB .gz inflating to 700 MB of one gate journal line (16M records) took over 15 minutes and 3.5 GiB
    (it is under the 1 GiB of a format read in memory); every line becomes a record object. A record file of
    more than MAX_RECORD_LINES lines is refused as it inflates: one error line, exit 2, the rest analysed."""
    line = (EXTRA_OP / "gate_journal_rank0.log").read_bytes().splitlines(keepends=True)[0]
    journal = tmp_path / "more" / "gate_journal_rank0.log.gz"
    journal.parent.mkdir()
    write_gzip(journal, line * 10_000, MAX_RECORD_LINES // 10_000 + 10)
    script = (
        "from pathlib import Path\n"
        "e = ncclforensics.sources.parse_file(ncclforensics.sources.InputFile(Path(sys.argv[1]), 'j.gz'))\n"
        "result = {'problems': [p.message for p in e.problems], 'gates': len(e.gates)}\n"
    )
    result = within_30_s(script, str(journal))
    assert result["gates"] == 0 and result["growth_mib"] < 150, result
    assert result["problems"] == [f"more than {MAX_RECORD_LINES:,} lines, more than a file of records may have (one "
                                  "object a line, held in memory); refusing the file (see MAX_RECORD_LINES): cut it "
                                  f"to the steps in question (its last {MAX_RECORD_LINES // 2:,} lines, say)"]
    code, found = diff_json(EXTRA_OP, journal)
    assert code == 2 and found["root"]["seq"] == ROOT_SEQ
    assert [p["file"] for p in found["problems"] if p["severity"] == "error"] == [str(journal)]


def test_an_empty_file_costs_no_parse(tmp_path):
    """100,000 empty files in a folder took 65 s and 1.7 GB (a worker round trip and a frame each); 5,000 take
    well under a second now, each still one line."""
    folder = tmp_path / "empty"
    folder.mkdir()
    for i in range(5000):
        (folder / f"f{i:05d}.log").touch()
    script = (
        "import time\n"
        "began = time.perf_counter()\n"
        "parsed, d = ncclforensics.api.diff_paths(sys.argv[1:])\n"
        "result = {'seconds': time.perf_counter() - began, 'problems': len(parsed.all_problems),\n"
        "          'empty': sum('empty file' in p.message for p in parsed.all_problems)}\n"
    )
    result = rss_growth_mib(script, str(folder))
    assert result["problems"] == result["empty"] == 5000
    assert result["seconds"] < 3 and result["growth_mib"] < 100, result
    code, out, err = run_cli("diff", folder)
    assert code == 2 and len(err.strip().splitlines()) == 5000


def test_a_sparse_file_that_starts_like_a_dump_is_refused_unread(tmp_path):
    """A dump's head then a hole to 3 GB was read whole (3 GB) before anything looked at it."""
    path = tmp_path / "fr_rank0"
    path.write_bytes((EXTRA_OP / "fr_rank0").read_bytes())
    os.truncate(path, 3 << 30)
    script = (
        "e = ncclforensics.sources.parse_file(ncclforensics.sources.InputFile(__import__('pathlib').Path(sys.argv[1]),"
        " 'fr_rank0'))\n"
        "result = {'problems': [p.message for p in e.problems]}\n"
    )
    result = rss_growth_mib(script, str(path))
    assert result["problems"] == [f"{3 << 30} bytes, over the 170 MiB a Flight Recorder dump may have (its load "
                                  f"would take over 4 GiB); not read"]
    assert result["growth_mib"] < 50
