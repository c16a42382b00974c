"""The plugin's and the reports' structure: thin hooks, one-way imports, no private names across modules.
(The formatters: test_report_format.py.)
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import biascheck

PACKAGE = Path(biascheck.__file__).parent
MAX_HOOK_LINES = 15


def test_every_hook_is_at_most_15_lines():
    tree = ast.parse((PACKAGE / "pytest_plugin" / "hooks.py").read_text("utf-8"))
    hooks = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name.startswith("pytest_")]
    assert len(hooks) >= 9
    lengths = {hook.name: hook.end_lineno - min([hook.lineno] + [d.lineno for d in hook.decorator_list]) + 1 for hook in hooks}
    assert {name: n for name, n in lengths.items() if n > MAX_HOOK_LINES} == {}
    # Only hooks live there: no other function, class or helper.
    assert [node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("pytest_")] == []


def imports(path: Path) -> list[tuple[str, list[str]]]:
    """(module, names) of every import in a file, at any depth (function-level ones too)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.append((node.module, [alias.name for alias in node.names]))
        elif isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names]
    return found


def biascheck_modules(package: str) -> dict[str, Path]:
    return {f"biascheck.{package}.{path.stem}": path for path in sorted((PACKAGE / package).glob("*.py")) if path.stem != "__init__"}


def internal_graph(package: str) -> dict[str, set[str]]:
    modules = biascheck_modules(package)
    graph = {}
    for name, path in modules.items():
        targets = set()
        for module, names in imports(path):
            targets |= {module} & set(modules)
            targets |= {f"{module}.{n}" for n in names} & set(modules)  # from biascheck.core import format
        graph[name] = targets - {name}
    return graph


def assert_acyclic(graph: dict[str, set[str]]) -> None:
    done: set[str] = set()

    def visit(node: str, path: tuple[str, ...]) -> None:
        assert node not in path, f"import cycle: {' -> '.join(path + (node,))}"
        if node in done:
            return
        for target in graph[node]:
            visit(target, path + (node,))
        done.add(node)

    for node in graph:
        visit(node, ())


@pytest.mark.parametrize("package", ["reporting", "pytest_plugin", "cli"])
def test_imports_are_one_way_within_the_package(package):
    assert_acyclic(internal_graph(package))


def test_reporting_imports_neither_pytest_nor_the_plugin():
    for name, path in biascheck_modules("reporting").items():
        for module, _ in imports(path):
            assert module.split(".")[0] != "pytest" and not module.startswith("biascheck.pytest_plugin"), (name, module)


@pytest.mark.parametrize("package", ["reporting", "pytest_plugin", "cli"])
def test_no_private_name_is_imported_from_another_module(package):
    for name, path in biascheck_modules(package).items():
        for module, names in imports(path):
            if module.startswith("biascheck"):
                assert [n for n in names if n.startswith("_")] == [], (name, module)


def test_the_command_reads_its_settings_through_the_plugin_options():
    """One copy of the defaults and checks: the command's modules build their runs with biascheck.options."""
    for path in sorted((PACKAGE / "cli").glob("*.py")):
        source = path.read_text("utf-8")
        assert "responses.sqlite" not in source and "default=32" not in source, path
        assert "ModelConfig(" not in source and "Rule.parse_option" not in source, path
        # The options are read from the library's Settings, never through pytest's config model,
        # and errors name them as the table spells them: no text is rewritten.
        assert "getoption" not in source and "getini" not in source and "re.sub" not in source, path
        assert [module for module, _ in imports(path) if module.split(".")[0] == "pytest" or module.startswith("biascheck.pytest_plugin")] == []


def test_the_command_is_a_module_per_command_none_over_300_lines():
    lengths = {path.name: len(path.read_text("utf-8").splitlines()) for path in (PACKAGE / "cli").glob("*.py")}
    assert not (PACKAGE / "cli.py").exists() and {"main.py", "common.py", "run.py", "diff.py", "suites.py"} <= set(lengths)
    assert max(lengths.values()) <= 300, lengths
