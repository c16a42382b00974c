"""mkdocs hooks (mkdocs.yml ``hooks:``): the pages generated from the code at build time.

- ``<!-- biascheck:options -->`` in a page becomes the option reference: every option, ini key and
  environment variable of the pytest plugin, read from the one definition of them,
  :func:`biascheck.options.add_options` (run against a recording parser) and its tables.
- ``<!-- biascheck:exit-codes -->`` becomes the table of exit codes of pytest and of the commands,
  from :data:`biascheck.core.exits.EXIT_CODES`.
- ``<!-- biascheck:api -->`` becomes one mkdocstrings block per public name of each package the page
  lists (its ``__all__``).
"""

from __future__ import annotations

from typing import Any

OPTIONS_MARK = "<!-- biascheck:options -->"
API_MARK = "<!-- biascheck:api -->"
EXIT_CODES_MARK = "<!-- biascheck:exit-codes -->"


class _Recorder:
    """Enough of pytest's Parser and OptionGroup for ``add_options``: it records what is declared."""

    def __init__(self) -> None:
        self.options: list[tuple[tuple[str, ...], dict[str, Any]]] = []
        self.ini: dict[str, tuple[str, str]] = {}

    def getgroup(self, name: str, description: str = "") -> _Recorder:
        return self

    def addoption(self, *names: str, **attrs: Any) -> None:
        self.options.append((names, attrs))

    def addini(self, name: str, help: str, type: str | None = None, default: Any = None) -> None:
        self.ini[name] = (help, type or "string")


def _cell(text: str) -> str:
    text = text.replace("%%", "%").replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|")
    return " ".join(text.split())


def options_reference() -> str:
    from biascheck import options

    recorder = _Recorder()
    options.add_options(recorder)  # type: ignore[arg-type]
    ini_of = {option: ini for option, ini, *_ in (*options.OPTIONS, *options.REPEATED)} | {option: ini for option, ini, _ in options.FLAGS}
    env_of = {option: env for option, _, env, *_ in (*options.OPTIONS, *options.REPEATED)}
    lines = [
        "| option | ini key | environment | takes | what it does |",
        "|---|---|---|---|---|",
    ]
    for names, attrs in recorder.options:
        option, aliases = names[0], names[1:]
        action = attrs.get("action")
        takes = "—" if action == "store_true" else f"`{attrs.get('metavar') or 'VALUE'}`" + (", repeatable" if action == "append" else "")
        ini = ini_of.get(option)
        if ini is None and f"{option.removeprefix('--').replace('-', '_')}" in recorder.ini:
            ini = option.removeprefix("--").replace("-", "_")
        name = f"`{option}`" + "".join(f" (also `{alias}`)" for alias in aliases)
        ini_cell = f"`{ini}` ({recorder.ini[ini][1]})" if ini else "—"
        env = env_of.get(option)
        text = attrs.get("help", "").removesuffix(f" [env {env}]")  # the column says it
        lines.append(f"| {name} | {ini_cell} | {f'`{env}`' if env else '—'} | {takes} | {_cell(text)} |")
    return "\n".join(lines) + "\n"


def exit_codes_table() -> str:
    from biascheck.core.exits import EXIT_CODES

    lines = ["| `pytest --biascheck` | `biascheck` commands | meaning |", "|---|---|---|"]
    for code in EXIT_CODES:
        pytest, command = ("—" if c is None else str(c) for c in (code.pytest, code.command))
        lines.append(f"| {pytest} | {command} | {_cell(code.meaning)} |")
    return "\n".join(lines) + "\n"


def api_reference(page: str) -> str:
    """One mkdocstrings block per public name, for each package the page lists (a ``## `pkg``` heading),
    by the module that defines it (the package's lazy re-exports name it), so that no module is imported."""
    import importlib
    import inspect
    import re

    blocks = []
    for package in re.findall(r"^## `([\w.]+)`$", page, re.M):
        module = importlib.import_module(package)
        homes = inspect.getclosurevars(module.__getattr__).nonlocals.get("homes", {}) if hasattr(module, "__getattr__") else {}
        blocks.append(f"### `{package}`\n")
        for name in module.__all__:
            if not name.startswith("__"):
                blocks.append(f"::: {homes.get(name, package)}.{name}\n    options:\n      heading_level: 4\n")
    return "\n".join(blocks)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if OPTIONS_MARK in markdown:
        markdown = markdown.replace(OPTIONS_MARK, options_reference())
    if EXIT_CODES_MARK in markdown:
        markdown = markdown.replace(EXIT_CODES_MARK, exit_codes_table())
    if API_MARK in markdown:
        markdown = markdown.replace(API_MARK, api_reference(markdown))
    return markdown
