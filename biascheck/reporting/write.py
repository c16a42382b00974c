"""Writing a run's report folder: the one module that imports every file renderer, so that none of
them imports another's writer (results, comparison and HTML renderings only read documents)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from biascheck.core.files import atomic_write_text, replace_folder
from biascheck.reporting.comparison import render_comparison_markdown
from biascheck.reporting.html import render_history_html, render_html, render_index, render_runs_html
from biascheck.reporting.results import render_markdown, render_summary_markdown, validate_results
from biascheck.reporting.runs import render_runs_markdown
from biascheck.reporting.samples import REPORT_PROMPTS


def write_reports(documents: list[dict[str, Any]], folder: Path, comparisons: dict[str, dict[str, Any]] | None = None) -> list[Path]:
    """``results.json``, ``report.md`` and ``report.html`` in ``folder``, plus ``comparison.json``
    and ``comparison.md`` for a suite compared with a baseline; with several suites, one subfolder
    each and ``summary.md`` and ``index.html`` across them. All files of the run, and its run marker, appear at once (see :func:`biascheck.core.files.replace_folder`)."""

    comparisons = comparisons or {}

    def render() -> dict[str, str]:
        files: dict[str, str] = {}
        for document in documents:
            prompts = document.get(REPORT_PROMPTS)
            document = {key: value for key, value in document.items() if key != REPORT_PROMPTS}  # the page's, not results.json's
            prefix = "" if len(documents) == 1 else f"{document['suite']['name']}/"
            validate_results(document, str(folder / prefix / "results.json"))
            comparison = comparisons.get(document["suite"]["name"])
            files[prefix + "results.json"] = json.dumps(document, ensure_ascii=False, indent=1, allow_nan=False) + "\n"
            files[prefix + "report.md"] = render_markdown(document)
            files[prefix + "report.html"] = render_html(document, comparison, prompts=prompts)
            if comparison is not None:
                files[prefix + "comparison.json"] = json.dumps(comparison, ensure_ascii=False, indent=1, allow_nan=False) + "\n"
                files[prefix + "comparison.md"] = render_comparison_markdown(comparison)
        if len(documents) > 1:
            files["summary.md"] = render_summary_markdown(documents)
            files["index.html"] = render_index(documents, comparisons)
        return files

    return replace_folder(folder, render) if documents else []


def write_compare(document: dict[str, Any], folder: Path) -> list[Path]:
    """``compare.md``, ``compare.json`` and ``compare.html`` of a ``biascheck compare`` document in
    ``folder`` (created if need be), each written atomically; other files there are left alone."""
    files = {
        "compare.md": render_runs_markdown(document),
        "compare.json": json.dumps(document, ensure_ascii=False, indent=1, allow_nan=False) + "\n",
        "compare.html": render_runs_html(document),
    }
    for name, text in files.items():
        atomic_write_text(folder / name, text)
    return [folder / name for name in files]


def write_history(document: dict[str, Any], folder: Path) -> Path:
    """``history.html`` of a ``biascheck history`` document in ``folder``, written atomically."""
    atomic_write_text(folder / "history.html", render_history_html(document))
    return folder / "history.html"
