"""Suites by name: those shipped in the package (``suites/<name>/suite.toml`` of the repository,
installed as ``biascheck/suites/<name>``) and suite folders of the user's own.

Needs neither pytest nor litellm: the plugin resolves ``--biascheck-suite NAME`` with it at start-up.
"""

from __future__ import annotations

import difflib
import shutil
from collections.abc import Iterable
from pathlib import Path

from biascheck.config.manifest import MANIFEST_NAME
from biascheck.core.errors import BiascheckError
from biascheck.core.spelling import Option

_PACKAGE = Path(__file__).resolve().parents[1]  # the biascheck package folder


def packaged_suites_dir() -> Path:
    """Where the packaged suites are: ``biascheck/suites`` in an installed wheel; in a source
    checkout (an editable install) the repository's ``suites/``, which that folder is built from."""
    installed = _PACKAGE / "suites"
    return installed if installed.is_dir() else _PACKAGE.parent / "suites"


def is_suite_dir(path: Path) -> bool:
    return (path / MANIFEST_NAME).is_file()


def packaged_suites() -> dict[str, Path]:
    """Packaged suite name (its folder's name) -> folder, sorted by name."""
    root = packaged_suites_dir()
    if not root.is_dir():
        return {}
    return {path.name: path for path in sorted(root.iterdir()) if is_suite_dir(path)}


def packaged_suite(name: str, where: object = Option("suite")) -> Path:
    """The folder of the packaged suite ``name``; an unknown name is one line listing the known ones."""
    known = packaged_suites()
    if name in known:
        return known[name]
    close = difflib.get_close_matches(name, list(known), n=1)
    hint = f"did you mean {close[0]}? " if close else ""
    raise BiascheckError(where, None, f"{name!r} is not a packaged suite", f"{hint}known: {', '.join(known) or '(none)'}")


def looks_like_a_name(text: str) -> bool:
    """A bare word such as ``kobbq``, not a path, a node id or a file name: only such an argument
    may name a packaged suite."""
    return bool(text) and not any(mark in text for mark in ("/", "\\", "::", ".")) and not text.startswith("-")


def suite_folder(suite: Path | str, where: str = "load_suite") -> Path | str:
    """A suite folder as given, or a bare name (``"kobbq"``) that is no file or folder here: the
    packaged suite of that name. Every command that takes a suite resolves it here, so each
    accepts the same names (``where``: how the caller names the argument in an error)."""
    if isinstance(suite, str) and looks_like_a_name(suite) and not Path(suite).exists():
        return packaged_suite(suite, where=where)
    return suite


def local_suites(paths: Iterable[Path]) -> list[Path]:
    """Suite folders among ``paths``: each path that holds a suite.toml, else its subfolders that do."""
    found: list[Path] = []
    for path in paths:
        if is_suite_dir(path):
            found.append(path)
        elif path.is_dir():
            found.extend(child for child in sorted(path.iterdir()) if is_suite_dir(child))
    return found


def copy_suite(name: str, dest: Path, *, force: bool = False) -> Path:
    """Copy the packaged suite ``name`` to ``dest``, to customise it. An existing ``dest`` is
    refused unless ``force``; then the suite's files are written over it, other files are kept."""
    source = packaged_suite(name, where="init").resolve()
    target = dest.resolve()
    if target.exists() and not target.is_dir():
        raise BiascheckError(dest, None, "is a file", "give a folder to copy the suite into")
    if target.exists() and not force:
        raise BiascheckError(dest, None, "already exists", "pass --force to write the suite over it, or give another DEST")
    # In a clone the packaged suites are the repository's suites/: never copy one onto itself.
    if target.is_relative_to(source) or source.is_relative_to(target):
        raise BiascheckError(dest, None, f"overlaps the packaged suite {source}", "give another DEST")
    try:
        target.mkdir(parents=True, exist_ok=True)
        shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True)
    except OSError as exc:  # /proc/1/x, a path under a file, a read-only folder
        raise BiascheckError(dest, None, f"cannot create the suite folder ({exc.strerror or exc})", "give a folder you can write to") from None
    return dest
