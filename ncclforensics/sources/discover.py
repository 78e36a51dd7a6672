"""Find input files under the paths a user gives, safely (symlink loops, unreadable entries)."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from collections.abc import Sequence

from ..errors import OutputError
from ..model import Diagnostic, Location, Severity
from .base import InputFile

# Files a postmortem folder commonly holds beside evidence; skipped silently when walking a folder.
NOT_EVIDENCE_SUFFIXES = {".png", ".jpg", ".jpeg", ".svg", ".html", ".md", ".pdf", ".py", ".sh", ".pyc", ".ipynb"}


def discover(paths: list[str]) -> tuple[list[InputFile], list[Diagnostic]]:
    """Expand files and folders (recursively) into input files, each named as the user would recognise it."""
    files: list[InputFile] = []
    problems: list[Diagnostic] = []
    seen_files: set[tuple[int, int]] = set()
    for given in paths:
        root = Path(given)
        if not root.exists() and not root.is_symlink():
            problems.append(Diagnostic(Location(given), "no such file or directory"))
        elif root.is_dir():
            _walk(root, files, problems, seen_files)
        elif not root.exists():
            problems.append(Diagnostic(Location(given), "broken symbolic link"))
        else:
            _add(root, given, files, problems, seen_files)
    return files, problems


def _walk(root: Path, files: list[InputFile], problems: list[Diagnostic], seen_files: set) -> None:
    seen_dirs: set[Path] = set()
    for current, dirnames, filenames in os.walk(root, followlinks=True, onerror=lambda e: problems.append(
            Diagnostic(Location(str(e.filename)), f"cannot list: {e.strerror}"))):
        real = Path(current).resolve()
        if real in seen_dirs:
            # A symlink loop (or a folder reached twice): walk it once.
            problems.append(Diagnostic(Location(current), "folder reached twice (symlink loop?); skipped",
                                       Severity.WARNING))
            dirnames[:] = []
            continue
        seen_dirs.add(real)
        dirnames.sort()
        for name in sorted(filenames):
            path = Path(current) / name
            if name.startswith(".") or path.suffix.lower() in NOT_EVIDENCE_SUFFIXES:
                continue
            _add(path, str(path), files, problems, seen_files, walked=True)


def _add(path: Path, name: str, files: list[InputFile], problems: list[Diagnostic], seen: set,
         walked: bool = False) -> None:
    """One file, identified by its device and inode (one stat, not a resolve of every component: a folder of
    100,000 files is walked in about a second)."""
    try:
        st = os.stat(path)
    except OSError:
        if walked:  # a link to nothing (or a loop of links) inside a folder
            problems.append(Diagnostic(Location(name), "broken symbolic link", Severity.WARNING))
        else:
            problems.append(Diagnostic(Location(name), "not a regular file"))
        return
    key = (st.st_dev, st.st_ino)
    if key in seen:
        return  # the same file given twice (or through a link): read it once
    seen.add(key)
    if not stat.S_ISREG(st.st_mode):
        problems.append(Diagnostic(Location(name), "not a regular file"))
        return
    files.append(InputFile(path=path, name=name, size=st.st_size))


def check_output(option: str, out: str | Path, inputs: Sequence[str | Path], folder_of_files: bool = True) -> Path:
    """The resolved output path, or OutputError (one line, exit 2) when writing there could destroy or mix with
    evidence: when it is an input file, or inside an input folder: a folder given as input, a folder the walk
    reaches through a link, or (with `folder_of_files`) the folder of a file given as input. Links are resolved,
    in the output path as in the inputs, so `ev2/more/pm` with `ev2/more` a link to a folder the walk reads is
    refused like the folder itself. Every output of every command goes through here."""
    target = Path(out).resolve()
    folders, files = _input_places(inputs, folder_of_files)
    for real, given in files.items():
        if target == real:
            raise OutputError(f"{option} {out} is an input file ({given}); write it outside the evidence")
    for real, given in folders.items():
        if target == real or real in target.parents:
            what = "is an input file, in" if target.is_file() else "is inside"
            raise OutputError(f"{option} {out} {what} input folder {given}; write it outside the evidence")
    return target


def _input_places(inputs: Sequence[str | Path], folder_of_files: bool) -> tuple[dict[Path, str], dict[Path, str]]:
    """(input folders, input files), resolved, each with the path to name it by."""
    folders: dict[Path, str] = {}
    files: dict[Path, str] = {}
    for given in inputs:
        path = Path(given)
        real = path.resolve()
        if real.is_dir():
            for current, dirnames, _ in os.walk(real, followlinks=True):
                resolved = Path(current).resolve()
                if resolved in folders:
                    dirnames[:] = []  # reached twice (a link loop): walked once
                    continue
                folders[resolved] = str(given) if resolved == real else f"{current} (read through {given})"
        else:
            files[real] = str(given)
            if folder_of_files:
                for parent in {real.parent, path.absolute().parent.resolve()}:
                    folders.setdefault(parent, str(parent))
    return folders, files
