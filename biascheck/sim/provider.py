"""The simulator as a model provider: what :mod:`biascheck.execution.providers` finds under the
``sim`` entry point of the ``biascheck.providers`` group (pyproject.toml)."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path


def check_model(model: str) -> None:
    """Refuse an unknown persona or fault in a ``sim/`` model string (one line, before any call)."""
    from biascheck.sim.personas import parse_persona

    parse_persona(model)


@contextmanager
def serve(suite_dirs: Iterable[Path | str], data_dir: Path | str | None, *, allow_unpinned: bool = False) -> Iterator[str]:
    """A simulated server that knows these suites, for the duration of the block: its base URL.
    ``allow_unpinned``: it reads their files pinned by no checksum, as the run does."""
    from biascheck.sim.process import spawn_sim_server

    with spawn_sim_server(suite_dirs, data_dir, allow_unpinned=allow_unpinned) as server:
        yield server.base_url


def add_subcommands(command: argparse.ArgumentParser) -> None:
    """``biascheck sim ...``, mounted on the ``sim`` command's parser."""
    from biascheck.sim.cli import add_sim_subcommands

    add_sim_subcommands(command.add_subparsers(dest="sim_command", required=True))
