"""What the commands share: the options several take (spelled once here, with the defaults of
:mod:`biascheck.options`), how a command spells the options the library's errors name
(:func:`spelling_of`), and the checks and listings more than one command makes."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from pathlib import Path

from biascheck.core.bounds import argument
from biascheck.core.errors import BiascheckError
from biascheck.core.spelling import Spelling
from biascheck.options import COMMAND, DEFAULT_CONCURRENCY, DEFAULT_STORE


def spelling_of(parser: argparse.ArgumentParser, **names: str) -> Spelling:
    """How errors raised under ``parser``'s command name the options: ``--key`` for those the
    command has (its ``--`` options), ``names[key]`` where it says otherwise; an option it lacks
    keeps pytest's name (``biascheck diff`` then gives a fix of its own: ``BiascheckError.unspelled``)."""
    keys = {text[2:] for action in parser._actions for text in action.option_strings if text.startswith("--")}
    return Spelling(COMMAND.prefix, names, frozenset(keys))


def add_data(parser: argparse.ArgumentParser, text: str = "mirror folder of the benchmark files") -> None:
    parser.add_argument("--data", type=Path, help=text)


def add_param(parser: argparse.ArgumentParser, default: list[str], text: str) -> None:
    parser.add_argument("--param", action="append", default=default, metavar="NAME=VALUE", help=text)


def add_cache(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cache", type=Path, default=DEFAULT_STORE, help="response store (SQLite)")


def add_concurrency(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--concurrency",
        type=argument("concurrency", "--concurrency"),
        default=DEFAULT_CONCURRENCY,
        help=f"concurrent model calls (default {DEFAULT_CONCURRENCY})",
    )


def add_benchmark(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--benchmark", default=None, help="the judged benchmark (default: the one registered)")


def in_a_folder(option: str, path: Path) -> None:
    """A file to write must be in a folder that exists: biascheck creates none for it."""
    if not path.parent.is_dir():
        raise BiascheckError(option, None, f"{path.parent} is not a folder", "name a file in an existing folder")


def print_notices(lines: Iterable[str]) -> None:
    for line in lines:
        print(f"biascheck: {line}", file=sys.stderr)


def listed_suites(given: list[str]) -> list[tuple[str, str, Path]]:
    """(label, where, folder) of each suite to list: the named or given ones (a path wins over a
    name, as for pytest --biascheck), else every packaged suite and those under ./suites."""
    from biascheck.config.catalog import local_suites, looks_like_a_name, packaged_suite, packaged_suites

    if not given:
        packaged = packaged_suites()
        shipped = {path.resolve() for path in packaged.values()}
        # In a clone ./suites is where the packaged suites come from: each is listed once, as packaged.
        local = [path for path in local_suites([Path("suites")]) if path.resolve() not in shipped]
        return [(name, "packaged", path) for name, path in packaged.items()] + [(str(path), "local", path) for path in local]
    listed = []
    for text in given:
        if looks_like_a_name(text) and not Path(text).exists():
            listed.append((text, "packaged", packaged_suite(text, where="suites")))
            continue
        found = local_suites([Path(text)])
        if not found:
            raise BiascheckError(
                text, None, "holds no suite.toml, nor do its subfolders", "give a suite folder, a folder of them, or a packaged suite's name"
            )
        listed += [(str(path), "local", path) for path in found]
    return listed
