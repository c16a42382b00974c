"""pytest's rootdir, as it would be had it known biascheck's options from the start.

pytest decides its rootdir (where ``.pytest_cache`` goes, what node ids are relative to) from the
command line's arguments that name existing paths, before it loads plugins installed by entry point:
at that moment ``--biascheck-data ../shared/datasets`` is an unknown option followed by a positional
argument, and ``../shared/datasets`` is taken for a test path. In a repository with no pytest
configuration the rootdir then becomes the folder above the project. Once the plugin is loaded,
pytest parses the arguments again, knowing the option; this module decides the rootdir again from
that parse and puts it in place before pytest uses it (its cache, the conftests, the node ids).

Only a value of biascheck's own options given as a separate argument is corrected. When that value
also made pytest read another configuration file, nothing can be undone (its ``addopts`` were
applied): the run stops with a usage error that says to write ``--option=value``.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import TYPE_CHECKING

from biascheck.options import ALIASES, OPTIONS

if TYPE_CHECKING:
    import pytest

VALUED = {option for option, *_ in OPTIONS} | {alias for aliases in ALIASES.values() for alias in aliases}


def separate_values(args: list[str]) -> list[tuple[str, str]]:
    """The biascheck options given as ``--option value`` (two arguments), with their values."""
    found = []
    for index, arg in enumerate(args[:-1]):
        if arg == "--":
            break
        if arg in VALUED:
            found.append((arg, args[index + 1]))
    return found


def _exists(path: Path) -> bool:
    """As pytest's own test of the arguments: a path the file system refuses (too long) is no path."""
    try:
        return path.exists()
    except (OSError, ValueError):
        return False


def correct_rootdir(config: pytest.Config, args: list[str]) -> None:
    import pytest

    given = [(option, value) for option, value in separate_values(args) if _exists(Path(config.invocation_params.dir) / value)]
    if not given or not hasattr(config, "_rootpath"):
        return
    try:
        from _pytest.config.findpaths import determine_setup
    except ImportError:  # pragma: no cover - a pytest that moved it
        return
    namespace = config.known_args_namespace
    known = {
        "inifile": namespace.inifilename,
        "override_ini": namespace.override_ini,
        "args": namespace.file_or_dir,
        "rootdir_cmd_arg": namespace.rootdir or None,
        "invocation_dir": Path(config.invocation_params.dir),
    }
    parameters = inspect.signature(determine_setup).parameters
    if not {"inifile", "args", "rootdir_cmd_arg", "invocation_dir"} <= parameters.keys():  # pragma: no cover
        return
    rootpath, inipath = determine_setup(**{name: value for name, value in known.items() if name in parameters})[:2]
    if rootpath == config.rootpath:
        return
    option, value = given[0]
    if inipath != config.inipath:
        raise pytest.UsageError(
            f"{option} {value}: pytest took {value!r} for a test path before biascheck's options were known, and read "
            f"its configuration from {config.inipath or 'nothing'} instead of {inipath or 'nothing'}; write {option}={value}"
        )
    old = config.rootpath
    config._rootpath = rootpath
    config._parser.extra_info["rootdir"] = str(rootpath)
    if namespace.confcutdir == str(old):  # pytest's default, the rootdir's, when there is no configuration file
        namespace.confcutdir = str(rootpath)
