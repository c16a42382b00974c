"""Benchmark knowledge lives in the benchmark's own folder (``biascheck/benchmarks/<name>/``) and the
simulator: nothing else names a benchmark. The scan reads every other module with ``ast``: string
constants (docstrings aside), names, attributes and imports that name one."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "biascheck"
BENCHMARK_WORD = re.compile(r"(?<![a-z])(ko)?bb[qg](?![a-z])|(?<![a-z])hbb(?![a-z])|(?<![a-z])mrc(?![a-z])", re.I)
EXEMPT = ("sim",)  # and every benchmark's own folder, benchmarks/<name>/


def docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                found.add(id(first.value))
    return found


def sites_in(source: str) -> list[tuple[int, str]]:
    tree = ast.parse(source)
    skip = docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            text = node.value
        elif isinstance(node, ast.Name):
            text = node.id
        elif isinstance(node, ast.Attribute):
            text = node.attr
        elif isinstance(node, ast.ImportFrom):
            text = node.module or ""
        elif isinstance(node, ast.alias):
            text = node.name
        else:
            continue
        for match in BENCHMARK_WORD.finditer(text.replace("_", " ")):
            found.append((getattr(node, "lineno", 0), match.group(0).lower()))
    return found


def benchmark_sites() -> dict[str, list[tuple[int, str]]]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative.startswith(EXEMPT) or (relative.startswith("benchmarks/") and relative.count("/") >= 2):
            continue
        sites = sites_in(path.read_text("utf-8"))
        if sites:
            out[f"biascheck/{relative}"] = sites
    return out


def test_the_scan_finds_a_planted_site():
    planted = 'def f(suite):\n    """About KoBBQ (a docstring is no site)."""\n    return suite.name == "kobbq" or suite.hbb_flags\n'
    assert sorted(sites_in(planted)) == [(3, "hbb"), (3, "kobbq")]


def test_no_module_outside_a_benchmark_names_one():
    found = {file: [f"line {line}: {word}" for line, word in sites] for file, sites in benchmark_sites().items()}
    assert not found, f"benchmark-specific code outside biascheck/benchmarks/<name>/ (move it behind the protocol in benchmarks/base.py): {found}"
