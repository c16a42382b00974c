"""Model providers biascheck serves itself, the one seam where the simulator plugs in. A model
string ``<name>/...`` whose ``<name>`` is registered in the ``biascheck.providers`` entry-point group
is served by that provider (the simulator registers ``sim``, in pyproject.toml); every other model
string is litellm's. Nothing outside the simulator names it: it is found by its entry point."""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from contextlib import AbstractContextManager
from functools import cache
from importlib import import_module
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType

from biascheck.core.errors import BiascheckError

ENTRY_POINT_GROUP = "biascheck.providers"
SIMULATOR = "sim"
SIM_PREFIX = SIMULATOR + "/"


@cache
def _provider(name: str) -> ModuleType:
    # The same entry point found twice (an old install's metadata left beside the new one, e.g. from
    # before the distribution was named pytest-biascheck) names one module: load it once.
    modules = sorted({entry.value for entry in entry_points(group=ENTRY_POINT_GROUP, name=name)})
    if len(modules) != 1:
        found = ", ".join(modules) or "nothing"
        raise BiascheckError(
            f"the {ENTRY_POINT_GROUP} entry point {name!r}",
            None,
            f"names {found}",
            "reinstall biascheck (pip install --force-reinstall pytest-biascheck) and remove stale *.egg-info or *.dist-info folders of it",
        )
    return import_module(modules[0])


def is_simulated(model: str) -> bool:
    return model.startswith(SIM_PREFIX)


def check_simulated_model(model: str) -> None:
    """Refuse an unknown persona or fault in a ``sim/`` model string (one line, before any call)."""
    _provider(SIMULATOR).check_model(model)


def simulator(suite_dirs: Iterable[Path | str], data_dir: Path | str | None, *, allow_unpinned: bool = False) -> AbstractContextManager[str]:
    """A simulated server that knows these suites, for the duration of the block: its base URL.
    ``allow_unpinned``: the suites' files pinned by no checksum are read (as the run reads them)."""
    return _provider(SIMULATOR).serve(suite_dirs, data_dir, allow_unpinned=allow_unpinned)


def add_simulator_subcommands(command: argparse.ArgumentParser) -> None:
    """``biascheck sim ...``: the simulator on its own."""
    _provider(SIMULATOR).add_subcommands(command)
