"""The public API is what the packages' ``__all__`` say and docs/api.md lists, the same names, and
reading it stays cheap: ``import biascheck`` (and every public package) imports no litellm."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys

import pytest

from conftest import ROOT

API_PAGE = ROOT / "docs" / "api.md"


def documented() -> dict[str, list[str]]:
    """docs/api.md: package (a ``## `pkg``` heading) -> the names of its ``- `name``` lines."""
    sections: dict[str, list[str]] = {}
    current = None
    for line in API_PAGE.read_text("utf-8").splitlines():
        heading = re.fullmatch(r"## `([\w.]+)`", line)
        if heading:
            current = sections.setdefault(heading.group(1), [])
        elif (item := re.match(r"- `(\w+)`", line)) and current is not None:
            current.append(item.group(1))
    return sections


def packages() -> list[str]:
    return sorted(".".join(path.parent.relative_to(ROOT).parts) for path in (ROOT / "biascheck").rglob("__init__.py"))


def test_every_package_declares_its_public_names():
    missing = [name for name in packages() if not hasattr(importlib.import_module(name), "__all__")]
    assert not missing, f"packages without __all__: {missing}"


def test_the_documented_api_is_the_packages_all():
    public = {name: sorted(module.__all__) for name in packages() if (module := importlib.import_module(name)).__all__}
    docs = documented()
    assert {name: sorted(names) for name, names in docs.items()} == public
    for names in docs.values():
        assert len(names) == len(set(names)), "a name listed twice"


def test_every_public_name_resolves_and_is_listed_by_dir():
    for package, names in documented().items():
        module = importlib.import_module(package)
        for name in names:
            assert getattr(module, name) is not None
            assert name in dir(module)
    try:
        importlib.import_module("biascheck").no_such_name  # noqa: B018
    except AttributeError as error:
        assert str(error) == "module 'biascheck' has no attribute 'no_such_name'"
    else:
        raise AssertionError("an unknown name resolved")


def test_the_extension_surface_is_reachable_from_the_public_packages():
    import biascheck
    from biascheck import benchmarks
    from biascheck.benchmarks import qa

    for needed in ("BiascheckError", "Shard", "BatchOptions", "write_reports", "load_suite", "run"):
        assert needed in biascheck.__all__
    assert {"Benchmark", "BaseBenchmark", "Case", "Outcome", "Response"} <= set(benchmarks.__all__)
    assert {"QABenchmark", "QAData", "QAItem", "QAPrompt"} <= set(qa.__all__)
    assert issubclass(qa.QABenchmark, benchmarks.BaseBenchmark)


def test_importing_the_public_packages_and_the_benchmark_names_imports_no_litellm():
    code = (
        "import sys, biascheck, biascheck.benchmarks as b, biascheck.benchmarks.qa as qa, biascheck.sim\n"
        "[getattr(b, n) for n in b.__all__]; [getattr(qa, n) for n in qa.__all__]; biascheck.BiascheckError\n"
        "heavy = sorted(m for m in ('litellm', 'biascheck.session', 'biascheck.execution.llm') if m in sys.modules)\n"
        "print(heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def biascheck_imports(path) -> list[tuple[str, str]]:
    """The ``from biascheck... import name`` statements of a module: (module, name)."""
    tree = ast.parse(path.read_text("utf-8"), filename=str(path))
    return [
        (node.module, alias.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "biascheck"
        for alias in node.names
    ]


def test_a_third_party_adapter_imports_only_documented_public_names():
    """examples/minibbq, written against docs/api.md, needs nothing from an internal module."""
    docs = documented()
    imports = biascheck_imports(ROOT / "examples" / "minibbq" / "minibbq.py")
    assert imports, "the example imports nothing from biascheck"
    private = [f"{module}.{name}" for module, name in imports if name not in docs.get(module, ())]
    assert not private, f"examples/minibbq imports names docs/api.md does not list: {private}"


# The BBQ-family adapters built in: each reads its data with the QA layer's public building blocks.
BBQ_FAMILY = ("cbbq", "esbbq", "ggbbq", "mbbq")


@pytest.mark.parametrize("package", BBQ_FAMILY)
def test_the_built_in_bbq_family_adapters_use_only_the_public_building_blocks(package):
    """What an in-tree adapter imports from biascheck is its own package's, a documented public
    name, or BiascheckError from its home module (biascheck re-exports it; the top-level package
    sits above the benchmarks' layer)."""
    docs = documented()
    own = f"biascheck.benchmarks.{package}"
    for path in sorted((ROOT / "biascheck" / "benchmarks" / package).glob("*.py")):
        for module, name in biascheck_imports(path):
            allowed = module.startswith(own) or name in docs.get(module, ()) or (module, name) == ("biascheck.core.errors", "BiascheckError")
            assert allowed, f"{path.relative_to(ROOT)} imports {module}.{name}, which docs/api.md does not list"
