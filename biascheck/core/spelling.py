"""How an error names a setting: by its key in the option table (:mod:`biascheck.options`), spelled
the way the front end running the code spells it. pytest spells the key ``model``
``--biascheck-model``; the ``biascheck`` command ``--model``. Code below the front ends raises
``BiascheckError(Option("model"), ...)`` or writes ``option("model")`` into a fix; the front end
says once, around the code it calls, which spelling applies (:func:`spelled_as`). Without one,
pytest's applies (the plugin sets none).

One front end runs in a process at a time (the command, or a pytest session), so the spelling is
the process's, not a context variable's: the calls and errors of worker threads are named alike.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

PYTEST_PREFIX = "--biascheck-"


@dataclass
class Spelling:
    """A front end's names for the options: ``prefix + key``, or ``names[key]``. ``keys``: the
    options the front end has (None: every one); another key is spelled pytest's way, the one place
    it exists, and noted in ``unspelled`` for the error being built (:attr:`BiascheckError.unspelled`)."""

    prefix: str
    names: Mapping[str, str] = field(default_factory=dict)
    keys: frozenset[str] | None = None
    unspelled: list[str] = field(default_factory=list)

    def __call__(self, key: str) -> str:
        if key in self.names:
            return self.names[key]
        if self.keys is not None and key not in self.keys:
            self.unspelled.append(key)
            return PYTEST_PREFIX + key
        return self.prefix + key

    def has(self, key: str) -> bool:
        return key in self.names or self.keys is None or key in self.keys


PYTEST = Spelling(PYTEST_PREFIX)
_current: list[Spelling] = [PYTEST]


def current() -> Spelling:
    return _current[-1]


def option(key: str) -> str:
    """The option ``key`` (``model``, ``update-baseline``) as the running front end spells it."""
    return current()(key)


@dataclass(frozen=True)
class Option:
    """The where of an error about an option: its key, spelled when the error is built."""

    key: str

    def __str__(self) -> str:
        return option(self.key)


@contextmanager
def spelled_as(spelling: Spelling) -> Iterator[Spelling]:
    """Errors raised inside name the options as ``spelling`` does."""
    _current.append(spelling)
    try:
        yield spelling
    finally:
        _current.pop()


def take_unspelled() -> tuple[str, ...]:
    """The keys named since the last call that the running front end has no spelling for."""
    spelling = current()
    taken = tuple(dict.fromkeys(spelling.unspelled))
    spelling.unspelled.clear()
    return taken


class _Spelled(dict):
    def __missing__(self, key: str) -> str:
        return option(key)


@dataclass(frozen=True)
class Spelled:
    """A text that names options by key, spelled when it is shown: for texts made once (a module's
    fixes) and shown by either front end. ``Spelled("re-create it with {update-baseline}")``."""

    template: str

    def __str__(self) -> str:
        return self.template.format_map(_Spelled())

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)
