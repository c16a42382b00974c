"""Every test module imports with ``pytest-biascheck[test]`` alone: the real-model job installs
``.[test,local-model]``, not ``[dev]``, and one module importing a dev tool at its top stops that
job's whole collection (``pytest -m real`` exited 2 for ``import grimp``). A dev tool is imported
inside the test that needs it, behind ``pytest.importorskip``."""

from __future__ import annotations

import ast
import sys
from importlib import metadata

from packaging.requirements import Requirement

from conftest import ROOT

DISTRIBUTION = "pytest-biascheck"


def _canonical(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def installed_with(distribution: str, extras: frozenset[str]) -> set[str]:
    """The distributions that ``pip install distribution[extras]`` brings (canonical names): its
    requirements for those extras, and theirs, as the installed metadata declares them."""
    seen: set[tuple[str, frozenset[str]]] = set()
    pending = [(distribution, extras)]
    while pending:
        name, wanted = pending.pop()
        if (_canonical(name), wanted) in seen:
            continue
        seen.add((_canonical(name), wanted))
        try:
            requires = metadata.distribution(name).requires or []
        except metadata.PackageNotFoundError:
            continue  # an optional requirement for another platform or Python
        for line in requires:
            requirement = Requirement(line)
            marker = requirement.marker
            if marker is None or any(marker.evaluate({"extra": extra}) for extra in wanted | {""}):
                pending.append((requirement.name, frozenset(requirement.extras)))
    return {name for name, _ in seen}


def top_level_imports(source: str) -> set[str]:
    """The top-level package of each import a module makes as it is imported: the statements of
    its body, not those inside functions (which run when a test does)."""
    names: set[str] = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.Import):
            names.update(alias.name.partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.partition(".")[0])
    return names


def test_every_test_module_imports_with_the_test_extra_alone():
    allowed = installed_with(DISTRIBUTION, frozenset({"test"}))
    owners = metadata.packages_distributions()
    local = {path.stem for path in (ROOT / "tests").glob("*.py")} | {"biascheck"}
    missing = []
    for path in sorted((ROOT / "tests").glob("*.py")):
        for name in sorted(top_level_imports(path.read_text(encoding="utf-8"))):
            if name in sys.stdlib_module_names or name in local:
                continue
            distributions = {_canonical(d) for d in owners.get(name, [])}
            if not distributions & allowed:
                missing.append(f"{path.name}: import {name} (from {sorted(distributions) or 'nothing installed'})")
    assert not missing, missing


def test_the_check_sees_a_dev_tool_imported_at_module_level():
    allowed = installed_with(DISTRIBUTION, frozenset({"test"}))
    assert {"hypothesis", "pandas", "pytest", "litellm", "numpy"} <= allowed  # numpy through pandas
    assert not {"grimp", "import-linter", "mypy", "mkdocs", "ruff"} & allowed
    assert top_level_imports("import grimp\ndef f():\n    import mypy\n") == {"grimp"}
