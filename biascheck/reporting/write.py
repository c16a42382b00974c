"""Writing a run's report folder: the one module that imports every file renderer, so that none of
them imports another's writer (results, comparison and HTML renderings only read documents and records)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from biascheck.core.files import atomic_write_text, replace_folder
from biascheck.evaluation.regression import FLIPS_FILE, split_flips
from biascheck.records.comparison import Comparison
from biascheck.records.run import RunRecord
from biascheck.reporting.comparison import render_comparison_markdown
from biascheck.reporting.html import render_history_html, render_html, render_index, render_runs_html
from biascheck.reporting.results import render_markdown, render_summary_markdown, validate_results
from biascheck.reporting.runs import HistoryView, RunsView, render_runs_markdown
from biascheck.reporting.samples import REPORT_PROMPTS

# Where a pytest run without --biascheck-report writes its reports (beside the default store, which
# a project ignores already): a folder per suite, so runs of other suites do not replace each other's.
DEFAULT_REPORTS = Path(".biascheck") / "reports"


def default_report_dir(documents: list[dict]) -> Path:
    """The report folder of a run without --biascheck-report: ``.biascheck/reports/<suite>``, for
    several suites their names joined by ``+`` (a long list shortened to the first and a digest),
    for a shard ``<suite>-shard-K-of-N``: two runs of other suites or shards never share one. (Under
    pytest-xdist the controller alone writes reports.)"""
    names = [document["suite"]["name"] for document in documents]
    name = "+".join(names)
    if len(name) > 120:  # a folder name stays well under 255 bytes
        name = f"{names[0]}+{len(names) - 1}-more-{hashlib.sha256(name.encode()).hexdigest()[:8]}"
    shard = documents[0]["run"].get("shard")
    if shard:
        index, _, count = str(shard).partition("/")
        name += f"-shard-{index}-of-{count}"
    return DEFAULT_REPORTS / name


def write_reports(documents: list[dict[str, Any]], folder: Path, comparisons: dict[str, dict[str, Any]] | None = None) -> list[Path]:
    """``results.json``, ``report.md`` and ``report.html`` in ``folder``, plus ``comparison.json``,
    ``comparison.md`` and ``flips.jsonl`` (every flip) for a suite compared with a baseline; with
    several suites, one subfolder each and ``summary.md`` and ``index.html`` across them. All files of the run, and its run marker, appear at once (see :func:`biascheck.core.files.replace_folder`)."""

    comparisons = comparisons or {}

    def render() -> dict[str, str]:
        files: dict[str, str] = {}
        runs: list[RunRecord] = []
        compared: dict[str, Comparison] = {}
        for document in documents:
            prompts = document.get(REPORT_PROMPTS)
            document = {key: value for key, value in document.items() if key != REPORT_PROMPTS}  # the page's, not results.json's
            prefix = "" if len(documents) == 1 else f"{document['suite']['name']}/"
            validate_results(document, str(folder / prefix / "results.json"))
            # records from the documents until the pipeline makes them
            run, record = RunRecord.from_json(document, str(folder / prefix / "results.json")), None
            runs.append(run)
            comparison = comparisons.get(document["suite"]["name"])
            files[prefix + "results.json"] = json.dumps(document, ensure_ascii=False, indent=1, allow_nan=False) + "\n"
            flips: list[dict[str, Any]] = []
            if comparison is not None:
                # Every flip in flips.jsonl, one per line; comparison.json names it and keeps counts and examples.
                comparison, flips = split_flips(comparison, FLIPS_FILE)
                record = compared[run.suite.name] = Comparison.from_json(comparison, str(folder / prefix / "comparison.json"), flips)
            files[prefix + "report.md"] = render_markdown(run, record)  # its regressions with its thresholds
            files[prefix + "report.html"] = render_html(run, record, prompts=prompts)
            if comparison is not None and record is not None:
                files[prefix + "comparison.json"] = json.dumps(comparison, ensure_ascii=False, indent=1, allow_nan=False) + "\n"
                files[prefix + "comparison.md"] = render_comparison_markdown(record)
                files[prefix + FLIPS_FILE] = "".join(json.dumps(flip, ensure_ascii=False, allow_nan=False) + "\n" for flip in flips)
        if len(documents) > 1:
            files["summary.md"] = render_summary_markdown(runs)
            files["index.html"] = render_index(runs, compared)
        return files

    return replace_folder(folder, render) if documents else []


def write_compare(view: RunsView, folder: Path) -> list[Path]:
    """``compare.md``, ``compare.json`` and ``compare.html`` of ``biascheck compare``'s view in
    ``folder`` (created if need be), each written atomically; other files there are left alone."""
    files = {
        "compare.md": render_runs_markdown(view),
        "compare.json": json.dumps(view.to_json(), ensure_ascii=False, indent=1, allow_nan=False) + "\n",
        "compare.html": render_runs_html(view),
    }
    for name, text in files.items():
        atomic_write_text(folder / name, text)
    return [folder / name for name in files]


def write_history(view: HistoryView, folder: Path) -> list[Path]:
    """``history.json`` and ``history.html`` of ``biascheck history``'s view in ``folder``, each
    written atomically (the Markdown is printed); other files there are left alone."""
    files = {
        "history.json": json.dumps(view.to_json(), ensure_ascii=False, indent=1, allow_nan=False) + "\n",
        "history.html": render_history_html(view),
    }
    for name, text in files.items():
        atomic_write_text(folder / name, text)
    return [folder / name for name in files]
