"""Files that appear whole or not at all, and report folders replaced as one set.

A kill (SIGKILL, a CI job's timeout) can come at any instant, so nothing is written in place: a
file goes to a hidden temp file beside it (``.<name>.<random>.tmp``) renamed over it, and a report
folder is filled as a hidden sibling (``.<name>.<random>.staging``) and swapped in whole. While it
writes one, biascheck holds an flock on it. The kernel drops a lock when its process dies, even by
SIGKILL, so the next write tells a leftover (unlocked: removed) from a write another live process
is making right now (locked: left alone) at once, rather than guessing from ages, which would keep
a leftover for a while or take a slow live write for one. Only these name shapes are touched.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import secrets
import shutil
import stat
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

from biascheck.core.errors import BiascheckError
from biascheck.core.version import VERSION

RUN_MARKER = "biascheck-run.json"
# What biascheck writes into a report folder, at its top or in a suite's subfolder.
REPORT_FILES = frozenset(
    {"results.json", "report.md", "report.html", "comparison.json", "flips.jsonl", "comparison.md", "summary.md", "index.html", RUN_MARKER}
)
_TEMP = re.compile(r"\..+\.[a-z0-9_]{8}\.tmp")  # tempfile's 8 random characters
# Where the file system has no locks (some network mounts), a leftover is told by its age instead.
_STALE_WITHOUT_LOCKS_S = 3600.0
_OWN_FOLDER = "write the report into a folder of its own (e.g. {}): a report folder is replaced whole, so it never mixes two runs"


def atomic_write_text(path: Path, text: str) -> None:
    """Write to a temp file beside ``path`` and rename: a reader never sees half a file. Leftovers
    of writes killed in that folder before are removed first."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """:func:`atomic_write_text` for bytes written as they are (a copy of a file kept whole)."""
    if path.is_dir():  # refused before a temp file is made beside it (os.replace would refuse it after)
        raise BiascheckError(path, None, "is a folder", "give the path of a file")
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_leftover_temps(path.parent)
    fd, tmp = _new_temp(path.parent, f".{path.name}.", ".tmp")
    try:
        # mkstemp makes the file private; a report or baseline is as readable as any file written here.
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
            os.replace(tmp, path)  # while the handle, and so the lock, is held
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def replace_folder(folder: Path, render: Callable[[], dict[str, str]]) -> list[Path]:
    """Make ``folder`` hold the files ``render`` gives (relative path -> text) and
    ``biascheck-run.json`` (a run id and each file's digest), all at once. Leftovers of a killed
    write are dealt with and the folder is checked first, so even a write that then fails puts the
    previous set back. The files are written into a staging sibling, the previous
    set is renamed aside, the new one renamed in, the previous one removed. The folder is wholly
    the previous run or wholly this one; killed between the two renames, it is missing until the
    next write puts the previous set back (:func:`_recover`).

    The user's files in the folder are kept: hard-linked into the new set, never copied or moved,
    so each keeps a name at every instant. A folder holding what cannot be carried over that way
    (a subfolder of the user's, a symlink), the working folder and a mount point are refused."""
    real = folder.resolve()
    cwd = Path.cwd().resolve()
    if real == cwd or real in cwd.parents:
        raise BiascheckError(folder, None, "is the working folder or holds it", _OWN_FOLDER.format(folder / "biascheck-report"))
    if real.exists() and not real.is_dir():
        raise BiascheckError(folder, None, "is a file", "give a folder (it is created if missing)")
    if real.exists() and os.path.ismount(real):
        raise BiascheckError(folder, None, "is a mount point, which cannot be renamed", _OWN_FOLDER.format(folder / "biascheck-report"))
    real.parent.mkdir(parents=True, exist_ok=True)
    _recover(real)
    if real.exists():
        _carried(real, folder)  # refused before anything is written
    files = render()
    marker = {
        "schema": "biascheck.run/1",
        "run_id": uuid.uuid4().hex,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "tool": {"name": "biascheck", "version": VERSION},
        "files": {name: "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest() for name, text in files.items()},
    }
    with _staging(real) as staging:
        for name, text in {**files, RUN_MARKER: json.dumps(marker, indent=1) + "\n"}.items():
            path = staging / name
            path.parent.mkdir(exist_ok=True)
            with open(path, "x", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
        _swap(staging, real, folder)
    return [folder / name for name in files] + [folder / RUN_MARKER]


def _swap(staging: Path, real: Path, folder: Path) -> None:
    while True:
        try:
            fd = os.open(real, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except FileNotFoundError:
            os.rename(staging, real)
            return
        try:
            # Locked while moved aside, so that no other write takes it for a leftover; a run
            # swapping this folder right now finishes first, and this one then replaces its set.
            _lock(fd, wait=True)
            if not _is(fd, real):
                continue
            aside = real.with_name(f".{real.name}.{secrets.token_hex(4)}.old")
            os.rename(real, aside)
            try:
                for name in _carried(aside, folder):  # the user's files as they are now
                    try:
                        os.link(aside / name, staging / name)
                    except OSError as exc:
                        raise BiascheckError(
                            folder / name,
                            None,
                            f"cannot be kept in the new report ({exc.strerror or exc})",
                            _OWN_FOLDER.format(folder / "biascheck-report"),
                        ) from None
                os.rename(staging, real)
            except BaseException:
                os.rename(aside, real)  # the previous set stays
                raise
            if _removable(aside):
                shutil.rmtree(aside)
            return
        finally:
            os.close(fd)


def _carried(real: Path, folder: Path) -> list[str]:
    """The names of the user's files in a report folder: all but biascheck's own files and its
    suites' subfolders. Raises for what cannot be carried over by a hard link."""
    carried = []
    for entry in sorted(real.iterdir()):
        mode = entry.lstat().st_mode
        if stat.S_ISREG(mode):
            if not _own(entry.name):
                carried.append(entry.name)
        elif not (stat.S_ISDIR(mode) and all(_own(p.name) and stat.S_ISREG(p.lstat().st_mode) for p in entry.iterdir())):
            kind = "folder" if stat.S_ISDIR(mode) else "link" if stat.S_ISLNK(mode) else "special file"
            raise BiascheckError(
                folder,
                None,
                f"holds the {kind} {entry.name}, which biascheck did not write",
                _OWN_FOLDER.format(folder / "biascheck-report") + f", or move {entry.name} out",
            )
    return carried


def _own(name: str) -> bool:
    return name in REPORT_FILES or _TEMP.fullmatch(name) is not None


def _removable(tree: Path) -> bool:
    """Whether a staging or moved-aside folder can go: it holds only biascheck's files and links
    to the user's files that have another name. A user's file whose only name is there stays."""
    for root, folders, names in os.walk(tree):
        depth = len(Path(root).relative_to(tree).parts)
        for name in folders + names:
            info = os.lstat(Path(root) / name)
            if stat.S_ISDIR(info.st_mode) and depth == 0:
                continue
            if not (stat.S_ISREG(info.st_mode) and (_own(name) or info.st_nlink > 1)):
                return False
    return True


def _recover(real: Path) -> None:
    """Leftovers of a killed write of this folder: a staging folder is removed; a previous set
    moved aside is put back when the folder is missing (killed between the two renames), else
    removed. The newest goes back first."""
    pattern = re.compile(re.escape(f".{real.name}.") + r"[a-z0-9_]{8}\.(staging|old)")
    found = []
    for entry in real.parent.iterdir():
        if pattern.fullmatch(entry.name):
            with contextlib.suppress(FileNotFoundError):
                found.append((entry.lstat().st_mtime, entry))
    for _, entry in sorted(found, reverse=True):
        with _left_over(entry, folder=True) as dead:
            if not dead:
                continue
            if entry.name.endswith(".old") and not real.exists():
                os.rename(entry, real)
            elif _removable(entry):
                shutil.rmtree(entry)


def _remove_leftover_temps(folder: Path) -> None:
    """Temp files of writes killed in ``folder`` (``.<name>.<random>.tmp``, nothing else)."""
    for entry in folder.iterdir():
        if _TEMP.fullmatch(entry.name):
            with _left_over(entry, folder=False) as dead:
                if dead:
                    entry.unlink(missing_ok=True)


@contextlib.contextmanager
def _staging(real: Path) -> Iterator[Path]:
    """A new hidden sibling of the report folder to fill; removed unless it was swapped in."""
    fd, path = _new_temp(real.parent, f".{real.name}.", ".staging", folder=True)
    staging = Path(path)
    try:
        # mkdtemp makes the folder private; the report folder keeps its mode, or gets the usual one.
        os.chmod(staging, stat.S_IMODE(real.stat().st_mode) if real.exists() else 0o777 & ~_umask())
        yield staging
    finally:
        try:
            if _is(fd, staging) and _removable(staging):
                shutil.rmtree(staging)
        finally:
            os.close(fd)


def _new_temp(parent: Path, prefix: str, suffix: str, *, folder: bool = False) -> tuple[int, str]:
    """A new temp file (or folder) in ``parent`` and an fd that holds its lock."""
    while True:
        if folder:
            path = tempfile.mkdtemp(prefix=prefix, suffix=suffix, dir=parent)
            try:
                fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
            except FileNotFoundError:
                continue
        else:
            fd, path = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=parent)
        _lock(fd, wait=True)
        if _is(fd, path):
            return fd, path
        # Another write took it for a leftover between its creation and the lock: take another.
        os.close(fd)


@contextlib.contextmanager
def _left_over(path: Path, *, folder: bool) -> Iterator[bool]:
    """Whether ``path``, of a temp name shape, is a leftover of a dead writer. Its lock is held
    meanwhile, so that it can be removed or put back before any writer could take it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        fd = None
    try:
        info = os.fstat(fd) if fd is not None else None
        dead = info is not None and (stat.S_ISDIR(info.st_mode) if folder else stat.S_ISREG(info.st_mode))
        if dead:
            assert fd is not None and info is not None  # dead implies both
            held = _lock(fd, wait=False)
            dead = (held if held is not None else time.time() - info.st_mtime > _STALE_WITHOUT_LOCKS_S) and _is(fd, path)
        yield dead
    finally:
        if fd is not None:
            os.close(fd)


def _lock(fd: int, *, wait: bool) -> bool | None:
    """flock ``fd``: True when locked, False when a live process holds it, None when the file
    system has no locks."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except BlockingIOError:
        return False
    except OSError:
        return None
    return True


def _is(fd: int, path: Path | str) -> bool:
    """Whether ``path`` still names the file open as ``fd``."""
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path, follow_symlinks=False))
    except OSError:
        return False


def _umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask
