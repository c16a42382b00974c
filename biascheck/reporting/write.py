"""Writing a run's report folder: the one module that imports every file renderer, so that none of
them imports another's writer (results, comparison and HTML renderings only read documents and records)."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from biascheck.core.files import atomic_write_text, replace_folder
from biascheck.evaluation.regression import FLIPS_FILE
from biascheck.records.comparison import Comparison
from biascheck.records.run import RunRecord
from biascheck.reporting.comparison import render_comparison_markdown
from biascheck.reporting.html import render_history_html, render_html, render_index, render_runs_html
from biascheck.reporting.results import render_markdown, render_summary_markdown, validate_results
from biascheck.reporting.runs import HistoryView, RunsView, render_runs_markdown

# Where a pytest run without --biascheck-report writes its reports (beside the default store, which
# a project ignores already): a folder per suite, so runs of other suites do not replace each other's.
DEFAULT_REPORTS = Path(".biascheck") / "reports"
# Where ``biascheck history SUITE`` writes history.json and history.html without --out: beside the
# reports, .biascheck/history/<suite>, rather than an untracked file in the working folder.
DEFAULT_HISTORY = Path(".biascheck") / "history"


def results_text(document: Mapping[str, Any]) -> str:
    """results.json's text: indented as ``json.dumps(indent=1)`` but for the cases, one per line
    (a line per changed case in a diff). The cases go through json's C encoder; indentation takes
    the pure-Python one, which spent 0.48 s of a warm KoBBQ re-run's 7 s of CPU on them (now 0.22 s)."""
    cases = document.get("cases")
    if not isinstance(cases, list) or not cases:
        return json.dumps(document, ensure_ascii=False, indent=1, allow_nan=False) + "\n"
    # A placeholder no case or field can hold (a control character and a random name), replaced once.
    placeholder = f"\x00{uuid.uuid4().hex}"
    text = json.dumps({**document, "cases": placeholder}, ensure_ascii=False, indent=1, allow_nan=False)
    one = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode
    block = "[\n  " + ",\n  ".join(map(one, cases)) + "\n ]"
    return text.replace(json.dumps(placeholder), block, 1) + "\n"


def default_report_dir(runs: Sequence[RunRecord]) -> Path:
    """The report folder of a run without --biascheck-report: ``.biascheck/reports/<suite>``, for
    several suites their names joined by ``+`` (a long list shortened to the first and a digest),
    for a shard ``<suite>-shard-K-of-N``: two runs of other suites or shards never share one. (Under
    pytest-xdist the controller alone writes reports.)"""
    names = [run.suite.name for run in runs]
    name = "+".join(names)
    if len(name) > 120:  # a folder name stays well under 255 bytes
        name = f"{names[0]}+{len(names) - 1}-more-{hashlib.sha256(name.encode()).hexdigest()[:8]}"
    shard = runs[0].run.shard
    if shard:
        index, _, count = str(shard).partition("/")
        name += f"-shard-{index}-of-{count}"
    return DEFAULT_REPORTS / name


def write_reports(
    runs: Sequence[RunRecord],
    folder: Path,
    comparisons: Mapping[str, Comparison] | None = None,
    prompts: Mapping[str, Mapping[str, Sequence[tuple[str, str]]]] | None = None,
) -> list[Path]:
    """``results.json``, ``report.md`` and ``report.html`` in ``folder``, plus ``comparison.json``,
    ``comparison.md`` and ``flips.jsonl`` (every flip) for a suite compared with a baseline
    (``comparisons``: by suite name); with several suites, one subfolder each and ``summary.md``
    and ``index.html`` across them. ``prompts``: by suite name, the prompts of the cases
    report.html shows (:func:`biascheck.reporting.results.build_results`). The files are the
    records' serializations; all of the run's, and its run marker, appear at once (see
    :func:`biascheck.core.files.replace_folder`)."""

    comparisons = comparisons or {}
    prompts = prompts or {}

    def render() -> dict[str, str]:
        files: dict[str, str] = {}
        documents = [run.to_json() for run in runs]
        written: dict[str, Comparison] = {}  # as comparison.json holds them: naming flips.jsonl
        for run, document in zip(runs, documents):
            name = run.suite.name
            prefix = "" if len(runs) == 1 else f"{name}/"
            validate_results(document, str(folder / prefix / "results.json"), every_case=False)
            comparison = comparisons.get(name)
            if comparison is not None:
                # comparison.json names flips.jsonl, which holds every flip, one per line; it keeps counts and examples.
                comparison = written[name] = replace(comparison, flips=replace(comparison.flips, file=FLIPS_FILE))
            files[prefix + "results.json"] = results_text(document)
            files[prefix + "report.md"] = render_markdown(run, comparison)  # its regressions with its thresholds
            files[prefix + "report.html"] = render_html(run, comparison, prompts=dict(prompts.get(name, {})))
            if comparison is not None:
                files[prefix + "comparison.json"] = json.dumps(comparison.to_json(), ensure_ascii=False, indent=1, allow_nan=False) + "\n"
                files[prefix + "comparison.md"] = render_comparison_markdown(comparison)
                flips = comparison.flips
                every = flips.every if flips.every is not None else flips.examples  # a comparison read without its flips.jsonl
                files[prefix + FLIPS_FILE] = "".join(json.dumps(flip.to_json(), ensure_ascii=False, allow_nan=False) + "\n" for flip in every)
        if len(runs) > 1:
            files["summary.md"] = render_summary_markdown(runs)
            files["index.html"] = render_index(runs, written)
        return files

    return replace_folder(folder, render) if runs else []


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
