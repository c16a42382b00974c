"""Re-exports imported on first use, for the packages' ``__init__`` (the public names, docs/api.md).

``import biascheck`` must stay cheap: the pytest plugin loads with every pytest run, and the
session alone imports litellm (seconds). A package names where each public name lives; the name's
module is imported when the name is first read (PEP 562), as hypothesis and numpy do.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, homes: Mapping[str, str], names: list[str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``: ``homes`` maps each public name to the
    module defining it; ``names`` is the package's ``__all__``, which must list them all."""
    if set(homes) - set(names):
        raise AssertionError(f"{package}.__all__ leaves out {sorted(set(homes) - set(names))}")

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        setattr(importlib.import_module(package), name, value)  # read once
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(importlib.import_module(package)), *homes})

    return __getattr__, __dir__
