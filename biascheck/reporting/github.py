"""GitHub Actions output: the job's step summary (``$GITHUB_STEP_SUMMARY``) and ``::error``
annotations, for the pytest plugin and ``biascheck diff``. Text in, text out: the callers write it."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from biascheck.evaluation.regression import resolve_text
from biascheck.records.comparison import Comparison
from biascheck.records.run import RunRecord
from biascheck.reporting.comparison import render_comparison_markdown
from biascheck.reporting.decision import decide
from biascheck.reporting.results import decision_markdown, render_markdown, render_summary_markdown


def in_github_actions() -> bool:
    return os.environ.get("GITHUB_ACTIONS") == "true"


def step_summary(runs: Sequence[RunRecord], comparisons: Mapping[str, Comparison], *, reports: bool = True) -> str:
    """The job summary of a run: the table across suites (several), each suite's report (its
    decision first) and comparison; without ``reports``, each comparison after its decision (the
    comparison's alone: ``biascheck diff`` gates on nothing else)."""
    parts = [render_summary_markdown(runs)] if len(runs) > 1 and reports else []
    for run in runs:
        comparison = comparisons.get(run.suite.name)
        if reports:
            parts.append(render_markdown(run, comparison))
        if comparison is None:
            continue
        markdown = render_comparison_markdown(comparison)
        if not reports:  # under the comparison's title, its decision first
            title, _, rest = markdown.partition("\n")
            markdown = "\n".join([title, "", *decision_markdown(decide(run, comparison, thresholds=False))]) + rest
        parts.append(markdown)
    return "\n".join(parts)


def write_step_summary(runs: Sequence[RunRecord], comparisons: Mapping[str, Comparison], *, reports: bool = True) -> str | None:
    """Append :func:`step_summary` to ``$GITHUB_STEP_SUMMARY`` when it is set, for the plugin and
    ``biascheck diff`` alike (the latter without ``reports``: the run's report is in the summary of
    the job that made it). Returns a one-line problem when the file could not be appended to."""
    if not os.environ.get("GITHUB_STEP_SUMMARY"):
        return None
    return append_step_summary(step_summary(runs, comparisons, reports=reports))


def append_step_summary(text: str) -> str | None:
    """Append ``text`` to ``$GITHUB_STEP_SUMMARY`` (when set); a one-line problem when that failed."""
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return None
    try:
        with open(target, "a", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as exc:
        return f"GITHUB_STEP_SUMMARY {target}: could not append the summary ({exc.strerror or exc})"
    return None


def _escape_annotation(text: str) -> str:
    # GitHub workflow-command escaping for the message part.
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def annotation(title: str, message: str, level: str = "error") -> str:
    # Property values also escape ':' and ','.
    title = _escape_annotation(title).replace(":", "%3A").replace(",", "%2C")
    return f"::{level} title={title}::{_escape_annotation(message)}"


def unresolved_annotations(comparisons: Iterable[Comparison]) -> list[str]:
    """``::warning`` lines, one per check that could not be resolved, for suites whose
    ``on_inconclusive`` is warn (with fail, the failed items or ``::error`` lines say it)."""
    return [
        annotation(
            f"biascheck {comparison.suite['name']}: {c.metric} ({c.scope}) inconclusive",
            f"{c.explanation}; {resolve_text(c)} (on_inconclusive = warn: the gate passes)",
            "warning",
        )
        for comparison in comparisons
        if comparison.on_inconclusive == "warn"
        for c in comparison.inconclusive
    ]


def github_annotations(comparisons: Sequence[Comparison]) -> list[str]:
    """``::error`` lines for regressed metrics of ``biascheck diff`` (GitHub shows them on the run).
    Under pytest the failed items themselves are annotated, so a deselected check never is."""
    return [
        annotation(f"biascheck {comparison.suite['name']}: {c.metric} ({c.scope}) regressed", c.explanation)
        for comparison in comparisons
        for c in comparison.regressions
    ]


def failed_check_annotations(failed: Iterable[tuple[str, str]], runs: Sequence[RunRecord], rootpath: Path) -> list[str]:
    """One annotation per failed gate, regression or missing-data item, as (node id, failure text):
    what failed, in its own one-line words. Other failed items (cases, run-complete) are not annotated."""
    names = {Path(run.suite.manifest).resolve(): run.suite.name for run in runs if run.suite.manifest}
    lines = []
    for nodeid, text in failed:
        parts = nodeid.split("::")
        if len(parts) < 4:
            continue
        suite = names.get((Path(rootpath) / parts[0]).resolve(), parts[0])
        if parts[-3] in ("metrics", "regression"):
            kind = "regressed" if parts[-3] == "regression" else "fails its threshold"
            lines.append(annotation(f"biascheck {suite}: {parts[-1]} ({parts[-2]}) {kind}", text.strip()))
        elif parts[-3] == "cases" and parts[-1] == "missing-data":
            lines.append(annotation(f"biascheck {suite}: {parts[-2]} has no data", text.strip()))
    return lines
