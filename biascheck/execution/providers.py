"""Model providers biascheck serves itself, the one seam where the simulator plugs in. A model
string ``<name>/...`` whose ``<name>`` is registered in the ``biascheck.providers`` entry-point group
is served by that provider (the simulator registers ``sim``, in pyproject.toml); every other model
string is litellm's. Nothing outside the simulator names it: it is found by its entry point."""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from contextlib import AbstractContextManager
from functools import cache
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType

ENTRY_POINT_GROUP = "biascheck.providers"
SIMULATOR = "sim"
SIM_PREFIX = SIMULATOR + "/"


@cache
def _provider(name: str) -> ModuleType:
    (entry,) = entry_points(group=ENTRY_POINT_GROUP, name=name)
    return entry.load()


def is_simulated(model: str) -> bool:
    return model.startswith(SIM_PREFIX)


def check_simulated_model(model: str) -> None:
    """Refuse an unknown persona or fault in a ``sim/`` model string (one line, before any call)."""
    _provider(SIMULATOR).check_model(model)


def simulator(suite_dirs: Iterable[Path | str], data_dir: Path | str | None) -> AbstractContextManager[str]:
    """A simulated server that knows these suites, for the duration of the block: its base URL."""
    return _provider(SIMULATOR).serve(suite_dirs, data_dir)


def add_simulator_subcommands(command: argparse.ArgumentParser) -> None:
    """``biascheck sim ...``: the simulator on its own."""
    _provider(SIMULATOR).add_subcommands(command)
