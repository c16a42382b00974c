"""No import cycle anywhere in biascheck, counting the imports ``lint-imports`` leaves out: those
for type annotations only (``exclude_type_checking_imports``) and the packages' lazy re-exports
(``__getattr__`` through :mod:`biascheck.core.lazy`, invisible to a reader of import statements).
A cycle that only annotations close still ties two modules together for the reader and mypy."""

from __future__ import annotations

import importlib

import pytest

from conftest import ROOT


def lazy_edges() -> list[tuple[str, str]]:
    """(package, module) for each public name a package re-exports lazily."""
    edges = []
    for path in sorted((ROOT / "biascheck").rglob("__init__.py")):
        package = ".".join(path.parent.relative_to(ROOT).parts)
        module = importlib.import_module(package)
        for name in getattr(module, "__all__", []):
            home = getattr(getattr(module, name), "__module__", None)
            if home and home.startswith("biascheck.") and home != package:
                edges.append((package, home))
    return edges


def test_no_import_cycles_even_through_annotations_or_lazy_reexports():
    # grimp comes with [dev] (import-linter's), not [test]: the real-model job collects without it.
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("biascheck", exclude_type_checking_imports=False)
    for importer, imported in lazy_edges():
        graph.add_import(importer=importer, imported=imported)
    cycles = set()
    for importer in sorted(graph.modules):
        for imported in graph.find_modules_directly_imported_by(importer):
            back = graph.find_shortest_chain(importer=imported, imported=importer)
            if back:
                cycles.add(" -> ".join([importer, *back]))
    assert not cycles, sorted(cycles)
