"""The README stays short and points into the documentation site, whose generated pages come from the
code (docs/hooks.py). The site itself is built in strict mode by .ci/run and GitHub CI."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from biascheck import options

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text("utf-8")


def hooks():
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_is_short_and_its_links_reach_pages():
    assert len(README.splitlines()) <= 250
    for target in re.findall(r"\]\((docs/[^)#]*)", README):
        assert (ROOT / target).exists(), target
    nav = (ROOT / "mkdocs.yml").read_text("utf-8")
    for page in sorted((ROOT / "docs").glob("*.md")):
        assert f": {page.name}\n" in nav, f"{page.name} is not in mkdocs.yml's nav"


def test_the_readme_says_which_name_is_which():
    names = " ".join(README.split("**Names.**", 1)[1].split("\n\n", 1)[0].split())
    assert "is **`pytest-biascheck`**" in names and "the package **`biascheck`**" in names and "the command it installs is **`biascheck`**" in names


def test_the_option_reference_is_generated_from_the_options_definition():
    page = (ROOT / "docs" / "options.md").read_text("utf-8")
    assert page.count("<!-- biascheck:options -->") == 1
    assert not re.search(r"^\|", page, re.M), "the option table is generated, not written in the page"
    parser = pytest.Parser(_ispytest=True)
    options.add_options(parser)
    declared = [opt.names()[0] for opt in parser.getgroup("biascheck").options]
    table = hooks().options_reference()
    rows = re.findall(r"^\| `(--biascheck[a-z-]*)`", table, re.M)
    assert rows == declared and len(rows) >= 30
    assert "| `--biascheck-data` | `biascheck_data` (string) | `BIASCHECK_DATA_DIR` |" in table
    assert "| `--biascheck-answer-mode` (also `--biascheck-estimator`) |" in table


def test_the_api_page_documents_every_public_name():
    import importlib

    page = (ROOT / "docs" / "api.md").read_text("utf-8")
    assert page.count("<!-- biascheck:api -->") == 1
    reference = hooks().api_reference(page)
    blocks = re.findall(r"^::: (\S+)$", reference, re.M)
    packages = re.findall(r"^### `([\w.]+)`$", reference, re.M)
    assert packages == ["biascheck", "biascheck.benchmarks", "biascheck.benchmarks.qa", "biascheck.sim"]
    public = [name for package in packages for name in importlib.import_module(package).__all__ if not name.startswith("__")]
    assert [block.rsplit(".", 1)[1] for block in blocks] == public
    assert "::: biascheck.api.load_suite" in reference  # by the module defining it: nothing is imported to document it


def test_the_exit_codes_are_generated_from_their_one_table():
    from biascheck.core.exits import EXIT_CODES

    page = (ROOT / "docs" / "usage.md").read_text("utf-8")
    assert page.count("<!-- biascheck:exit-codes -->") == 1
    rows = re.findall(r"^\| (\d+|—) \| (\d+|—) \| ", hooks().exit_codes_table(), re.M)
    assert rows == [tuple("—" if c is None else str(c) for c in (code.pytest, code.command)) for code in EXIT_CODES]
    assert ("4", "4") in rows and ("4", "2") in rows and ("2", "130") in rows
