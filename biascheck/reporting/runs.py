"""Several runs of one suite side by side (``biascheck compare``), and a suite's baselines across
releases (``biascheck history``): their views (:class:`RunsView`, :class:`HistoryView`), whose
``to_json`` is ``compare.json`` / ``history.json``, and their Markdown. The HTML pages are
:func:`biascheck.reporting.html.render_runs_html` and ``render_history_html``.

Each run shows its own metric values with the intervals its ``results.json`` records. Both views
read typed records (:class:`~biascheck.records.run.RunRecord` of a results.json,
:class:`~biascheck.records.baseline.BaselineRecord` of a baseline) and mark a run (release) from
:func:`run_marks` alone: the threshold checks its record says failed it, and whether it regressed
against the one before it (the ``regressions`` of the
:class:`~biascheck.records.comparison.Comparison` that ``biascheck diff A B`` would make).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Protocol

from biascheck.benchmarks.base import get_benchmark, layout_of
from biascheck.core import format as fmt
from biascheck.core.errors import BiascheckError
from biascheck.core.format import md_row, md_text, strong
from biascheck.core.version import VERSION
from biascheck.evaluation import baseline as baselines
from biascheck.evaluation.baseline import fingerprint_differences
from biascheck.evaluation.regression import compare, settings_from
from biascheck.records._json import json_interval, thaw
from biascheck.records.baseline import BaselineRecord, BaselineVerdict
from biascheck.records.comparison import Check, Comparison
from biascheck.records.run import MetricValue, RunRecord, SuiteInfo, ThresholdVerdict
from biascheck.suite import missing_data_summary

# /2: each run (release) carries its regression against the one before it (run_marks).
COMPARE_SCHEMA = "biascheck.compare/2"
HISTORY_SCHEMA = "biascheck.history/2"
OVERALL = "overall"
# A run's (release's) regression mark against its predecessor: its "verdict".
REGRESSED, NOT_REGRESSED, NOT_COMPARED = "regressed", "not regressed", "not compared"
# The fix of a refused run when no option allows the difference (biascheck compare).
SAME_SUITE_FIX = "compare runs of one suite version: run the other models again on this suite, or compare each group of runs on its own"


# A results.json's record or a baseline's: history reads baselines, compare runs.
Record = RunRecord | BaselineRecord


class Scoped(Protocol):
    """A check named by its metric and scope: a threshold verdict, or a comparison's check."""

    @property
    def metric(self) -> str: ...
    @property
    def scope(self) -> str: ...


@dataclass(frozen=True, slots=True)
class RegressionMark:
    """A run's (release's) paired comparison with the one before it (:func:`regression_against`):
    ``verdict`` regressed, not regressed or not compared; ``checks``, the comparison's regressed
    checks; ``reason``, why it was not compared."""

    against: str
    verdict: str
    checks: tuple[Check, ...] = ()
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        checks = [{"metric": c.metric, "scope": c.scope, "worsening_ci": json_interval(c.worsening_ci), "margin": c.margin} for c in self.checks]
        return {"against": self.against, "verdict": self.verdict, "checks": checks, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class Marks:
    """What ``compare`` and ``history`` mark on a run (release): ``failed``, the threshold checks
    that failed it (None: its baseline records no verdicts), and ``regression`` against the one
    before it (None for the first)."""

    failed: tuple[Scoped, ...] | None
    regression: RegressionMark | None

    def to_json(self) -> dict[str, Any]:
        failed = None if self.failed is None else [{"metric": c.metric, "scope": c.scope} for c in self.failed]
        return {"failed": failed, "regression": None if self.regression is None else self.regression.to_json()}


def _fingerprint(record: Record) -> Mapping[str, Any]:
    """The fingerprint of the suite a run or a baseline is of (a baseline's suite is not typed)."""
    return record.suite["fingerprint"] if isinstance(record, BaselineRecord) else record.suite.fingerprint


def _answer_mode(record: Record) -> str:
    """How a run's answers were read: a results.json's ``run.estimator``, a baseline's ``model.estimator``."""
    mode = record.model.get("estimator") if isinstance(record, BaselineRecord) else record.run.estimator
    return str(mode or "generation (the default)")


def check_same_suite(
    reference: tuple[str, RunRecord],
    run: tuple[str, RunRecord],
    *,
    allow_fingerprint_mismatch: bool = False,
    fix: str = SAME_SUITE_FIX,
) -> list[str]:
    """Refuse to set ``run`` (path, record of its results.json) beside ``reference``: another suite,
    another suite fingerprint (data, prompts, subset, ...; see :func:`fingerprint_differences`)
    unless allowed, or another answer mode (``run.estimator``: a parsed reply, a log-likelihood
    and a first-token reading of one model differ by construction). The one-line error names
    ``run``'s file and field, and ``fix`` (for a fingerprint). Returns the fingerprint parts that differ."""
    where, record = run
    other, first = reference
    mine, theirs = record.suite, first.suite
    if (mine.name, mine.benchmark) != (theirs.name, theirs.benchmark):
        raise BiascheckError(
            where,
            "suite.name",
            f"is a run of suite {mine.name!r} ({mine.benchmark}), and {other} of {theirs.name!r} ({theirs.benchmark})",
            "compare runs of one suite",
        )
    differences = fingerprint_differences(theirs.fingerprint, mine.fingerprint)
    if differences and not allow_fingerprint_mismatch:
        shown = ", ".join(
            f"{part} {mine.fingerprint.get(part) or 'none'} here, {theirs.fingerprint.get(part) or 'none'} in {other}" for part in differences
        )
        raise BiascheckError(where, "suite.fingerprint", f"differs from that of {other} ({shown})", fix)
    if _answer_mode(record) != _answer_mode(first):
        raise BiascheckError(
            where,
            "run.estimator",
            f"was answered by {_answer_mode(record)}, and {other} by {_answer_mode(first)}: answers read in different ways are not comparable",
            "compare runs answered the same way (pytest's answer-mode option chooses it)",
        )
    return differences


def recorded_verdicts(record: Record) -> dict[tuple[str, str], bool | None] | None:
    """The threshold verdicts a run or a baseline records, by (scope, metric): True passed, False
    failed the run, None did not gate it (-k deselected its metric item). None when the record has
    none (a baseline of an older biascheck). ``compare`` and ``history`` mark a run from its
    record alone: neither judges a value against a threshold again."""
    if record.verdicts is None:
        return None
    return {(v.scope, v.metric): _recorded(v) for v in record.verdicts}


def _recorded(verdict: ThresholdVerdict | BaselineVerdict) -> bool | None:
    """A threshold check as it decided the run: passed, failed, or None when it did not gate it."""
    return verdict.passed if verdict.gated else None


def failed_checks(record: Record) -> tuple[Scoped, ...] | None:
    """The threshold checks that failed the run, as its record says (``failed_checks``); None
    when a baseline records no verdicts."""
    if isinstance(record, BaselineRecord) and record.passed is None:
        return None
    return record.failed_checks


def scopes_text(checks: Sequence[Scoped]) -> str:
    """Checks by metric, their scopes counted: ``diff_bias_amb (overall and 2 categories), acc_dis (1 category)``."""
    scopes: dict[str, list[str]] = {}
    for check in checks:
        scopes.setdefault(check.metric, []).append(check.scope)
    parts = []
    for metric, where in scopes.items():
        categories = sum(scope != OVERALL for scope in where)
        named = [OVERALL] if OVERALL in where else []
        named += [f"{categories} categor{'y' if categories == 1 else 'ies'}"] if categories else []
        parts.append(f"{metric} ({' and '.join(named)})")
    return ", ".join(parts)


def failed_text(failed: Sequence[Scoped] | None) -> str:
    """A run's (compare) or a release's (history) thresholds in words, the same in both views:
    ``FAIL: diff_bias_amb (overall and 2 categories), acc_dis (1 category)``, passed, or not recorded."""
    if failed is None:
        return "not recorded (a baseline of an older biascheck)"
    if not failed:
        return "passed"
    return "FAIL: " + scopes_text(failed)


# --- against the run before -----------------------------------------------------------------------


def run_marks(runs: Sequence[tuple[str, str, Record]], *, regression: Mapping[str, Any] | None = None) -> list[Marks]:
    """What ``compare`` and ``history`` mark on each run (path, label, the record of a results.json
    or a baseline), in the order given: the threshold checks its record says failed it
    (:func:`failed_checks`), and its paired comparison with the run before it
    (:func:`regression_against`; None for the first). Both views mark from this alone, so they
    cannot disagree. ``regression``: the ``[regression]`` table to test with when the run before
    records none (the suite's, where known)."""
    return [Marks(failed_checks(run[2]), None if k == 0 else regression_against(runs[k - 1], run, fallback=regression)) for k, run in enumerate(runs)]


def regression_against(
    previous: tuple[str, str, Record], run: tuple[str, str, Record], *, fallback: Mapping[str, Any] | None = None
) -> RegressionMark:
    """``run`` compared with ``previous`` (each path, label, record) as ``biascheck diff previous
    run`` compares them: :func:`biascheck.evaluation.regression.compare` with the ``[regression]``
    table ``previous`` records (else ``fallback``), read as a :class:`Comparison`: REGRESSED with
    its ``regressions``, NOT_REGRESSED, or NOT_COMPARED with the reason. Runs that cannot be
    compared are marked so, never an error: a history spans suite versions and old baselines."""
    (previous_path, label, before), (path, _, after) = previous, run
    reason = _not_comparable(before, after)
    table = before.regression if isinstance(before, BaselineRecord) else before.suite.regression
    table = thaw(table) if table is not None else fallback
    if reason is None and table is None:
        reason = f"{label} records no regression settings (a baseline of an older biascheck)"
    if reason is not None:
        return RegressionMark(label, NOT_COMPARED, reason=reason)
    try:
        comparison = _compared(before, after, table, previous_path, path)
    except BiascheckError as exc:  # e.g. no case in common
        return RegressionMark(label, NOT_COMPARED, reason=exc.problem)
    # The verdict alone is read: what the gate calls a regression is a regression here.
    regressions = comparison.regressions
    return RegressionMark(label, REGRESSED if regressions else NOT_REGRESSED, regressions)


def _compared(before: Record, after: Record, table: Mapping[str, Any] | None, where: str, path: str) -> Comparison:
    """The :class:`Comparison` of ``after`` against ``before``, as the gate makes it; a run before
    is the baseline a recording of it would be (keeping when it was made)."""
    settings = settings_from(after, regression=table, where=where, candidate=path)
    baseline = before if isinstance(before, BaselineRecord) else replace(baselines.from_results(before), created_at=before.created_at)
    return compare(baseline, after, settings, baseline_path=where)


def _not_comparable(before: Record, after: Record) -> str | None:
    """Why ``after`` cannot be tested against ``before`` (each a run or a baseline), in the words
    of ``biascheck diff``'s refusals; None when it can."""
    if isinstance(before, RunRecord):
        if not before.run.complete:
            return f"the run before is incomplete ({before.run.incomplete_reason})"
        if before.run.case_errors:
            return f"{before.run.case_errors} case(s) of the run before errored"
    changed = fingerprint_differences(_fingerprint(before), _fingerprint(after))
    if changed:
        return f"the suite changed ({', '.join(changed)})"
    if _answer_mode(before) != _answer_mode(after):
        return f"answered by {_answer_mode(after)}, the one before by {_answer_mode(before)}"
    if after.verdicts is None:
        return "it records no verdicts, so not which metrics it gates (a baseline of an older biascheck)"
    return None


def regression_text(mark: RegressionMark | None) -> str:
    """A run's regression mark in a few words, the same in both views: ``regressed vs v1.1:
    diff_bias_amb (overall), acc_dis (2 categories)``, ``not regressed vs v1.1``, ``not compared:
    <reason>``, or ``-`` for the first run."""
    if mark is None:
        return "-"
    if mark.verdict == NOT_COMPARED:
        return f"not compared with {mark.against}: {mark.reason}"
    if mark.verdict == REGRESSED:
        return f"regressed vs {mark.against}: {scopes_text(mark.checks)}"
    return f"{NOT_REGRESSED} vs {mark.against}"


def check_text(check: Check) -> str:
    """A regressed check in a line: metric, scope, the worsening's interval and the margin it exceeds."""
    return f"{check.metric} ({check.scope}): worsened by {fmt.signed_ci(check.worsening_ci)}, beyond its margin {fmt.value(check.margin)}"


def _confidence(record: RunRecord) -> float | None:
    return fmt.number((record.metrics.rest.get("bootstrap") or {}).get("confidence"))


def run_labels(records: Sequence[RunRecord], paths: Sequence[str]) -> list[str]:
    """A short, distinct name per run: the model (with its revision), then its creation time where
    two runs share one, then its path where they still do."""
    labels = [r.model.model + (f"@{r.model.revision}" if r.model.revision else "") for r in records]
    if len(set(labels)) < len(labels):
        labels = [f"{label} ({r.created_at})" if labels.count(label) > 1 else label for label, r in zip(labels, records)]
    if len(set(labels)) < len(labels):
        labels = [path if labels.count(label) > 1 else label for label, path in zip(labels, paths)]
    return labels


def headline_metrics(benchmark: str, gated_metrics: Sequence[str], reported: Sequence[str]) -> list[str]:
    """The metrics charted one per chart: the gated ones (in gate order), then the benchmark's own
    headline bias metrics (``report_layout.bias_metrics``), those reported only."""
    return [m for m in dict.fromkeys([*gated_metrics, *layout_of(benchmark).bias_metrics]) if m in reported]


def _revision(record: BaselineRecord) -> str | None:
    return record.model.get("revision")  # a baseline's model is not typed


def _overall(record: Record) -> dict[str, MetricValue]:
    return record.metrics.table("overall", OVERALL)


# --- several runs side by side --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Cell:
    """One run's value of a metric in a scope, with its threshold and recorded verdict (``passed``:
    None not gated here; False failed the run, :func:`recorded_verdicts`)."""

    value: MetricValue | None
    threshold: Mapping[str, Any] | None
    passed: bool | None

    def to_json(self) -> dict[str, Any]:
        value = self.value
        return {
            "value": value.value if value else None,
            "ci": json_interval(value.ci) if value else [None, None],
            "n": value.n if value else None,
            "threshold": self.threshold,
            "passed": self.passed,
            **({"note": value.note} if value and value.note else {}),
        }


@dataclass(frozen=True, slots=True)
class Row:
    """A metric in a scope across the runs; ``threshold``: the one every run has, else None."""

    metric: str
    scope: str
    better: str | None
    threshold: Mapping[str, Any] | None
    values: tuple[Cell, ...]

    def to_json(self) -> dict[str, Any]:
        values = [v.to_json() for v in self.values]
        return {"metric": self.metric, "scope": self.scope, "better": self.better, "threshold": self.threshold, "values": values}


@dataclass(frozen=True, slots=True)
class RunEntry:
    """A run as compare shows it: its label, its file, its record, its marks and its notes."""

    label: str
    path: str
    record: RunRecord
    marks: Marks
    notes: tuple[str, ...]

    @property
    def params(self) -> dict[str, Any]:
        """The model's parameters as its results.json has them."""
        return thaw(self.record.model.params)

    def to_json(self) -> dict[str, Any]:
        record = self.record
        return {
            "label": self.label,
            "path": self.path,
            "model": record.model.model,
            "revision": record.model.revision,
            "params": self.params,
            "estimator": record.run.estimator,
            "created_at": record.created_at,
            "cases": record.run.cases,
            "passed": record.passed,
            # Its marks (run_marks), as history has a release's: the recorded threshold checks that
            # failed it, and its regression against the run before it.
            **self.marks.to_json(),
            "notes": list(self.notes),
        }


@dataclass(frozen=True, slots=True)
class RunsView:
    """``biascheck compare`` of several runs of one suite: its ``compare.json`` (:meth:`to_json`),
    ``compare.md`` (:func:`render_runs_markdown`) and ``compare.html``
    (:func:`biascheck.reporting.html.render_runs_html`) are rendered from it."""

    suite: SuiteInfo
    created_at: str
    confidence: float | None
    runs: tuple[RunEntry, ...]
    headline: tuple[str, ...]
    shown: tuple[str, ...]  # the metrics of the Markdown and HTML tables (compare.json has every one)
    rows: tuple[Row, ...]

    def to_json(self) -> dict[str, Any]:
        suite = self.suite.to_json()
        return {
            "schema": COMPARE_SCHEMA,
            "tool": {"name": "biascheck", "version": VERSION},
            "created_at": self.created_at,
            "suite": {k: suite[k] for k in ("name", "benchmark", "fingerprint", "language", "description") if k in suite},
            "confidence": self.confidence,
            "runs": [run.to_json() for run in self.runs],
            "headline": list(self.headline),
            "shown": list(self.shown),
            "rows": [row.to_json() for row in self.rows],
        }


def compare_runs(runs: Sequence[tuple[str, RunRecord]]) -> RunsView:
    """``biascheck compare`` of several runs (path as shown, the record of its results.json) of one
    suite: a row per metric and scope, each run's value, interval, n and threshold verdict in it,
    and each run's marks (:func:`run_marks`): its predecessor is the run given before it. Raises
    :class:`BiascheckError` naming the first run that cannot stand beside the first."""
    paths, records = [p for p, _ in runs], [r for _, r in runs]
    if len(runs) < 2:
        raise BiascheckError("biascheck compare", None, f"got {len(runs)} run", "give two runs or more (results.json files or report folders)")
    for run in runs[1:]:
        check_same_suite(runs[0], run)
        if _confidence(run[1]) != _confidence(records[0]):
            raise BiascheckError(
                run[0],
                "metrics.bootstrap.confidence",
                f"is {_confidence(run[1])}, and {paths[0]}'s {_confidence(records[0])}: intervals of different levels are not side by side",
                "give the suites the same [bootstrap] confidence and run them again",
            )
    suite = records[0].suite
    metrics = list(dict.fromkeys(m for r in records for m in _overall(r)))
    scopes = list(dict.fromkeys([OVERALL, *(v.scope for r in records for v in r.metrics.values if v.group == "category")]))
    defs = get_benchmark(suite.benchmark).metric_defs
    verdicts = [{(v.scope, v.metric): v for v in r.verdicts} for r in records]
    rows = []
    for metric in metrics:
        for scope in scopes:
            values = tuple(_cell(r, index.get((scope, metric)), metric, scope) for r, index in zip(records, verdicts))
            if all(v.value is None for v in values):
                continue  # no run reports it here
            thresholds = {json.dumps(v.threshold, sort_keys=True) for v in values}
            # One threshold for the row when every run has the same (suites may be edited between runs).
            threshold = values[0].threshold if len(thresholds) == 1 else None
            rows.append(Row(metric, scope, defs[metric].better if metric in defs else None, threshold, values))
    gated_overall = [v.metric for r in records for v in r.verdicts if v.scope == OVERALL]
    layout = layout_of(suite.benchmark)
    headline = headline_metrics(suite.benchmark, gated_overall, metrics)
    labels = run_labels(records, paths)
    marks = run_marks(list(zip(paths, labels, records)))
    return RunsView(
        suite=suite,
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        confidence=_confidence(records[0]),
        runs=tuple(RunEntry(label, path, r, mark, _notes(r)) for label, path, r, mark in zip(labels, paths, records, marks)),
        headline=tuple(headline),
        shown=tuple(m for m in dict.fromkeys([*headline, *layout.headline, *layout.category_headline, *gated_overall]) if m in metrics),
        rows=tuple(rows),
    )


def _cell(record: RunRecord, verdict: ThresholdVerdict | None, metric: str, scope: str) -> Cell:
    """A run's value of ``metric`` in ``scope``, with the threshold check it recorded there."""
    value = record.metrics.table("overall" if scope == OVERALL else "category", scope).get(metric)
    if verdict is None:
        return Cell(value, None, None)
    return Cell(value, thaw(verdict.threshold), _recorded(verdict))


def _notes(record: RunRecord) -> tuple[str, ...]:
    run, suite = record.run, record.suite
    notes = []
    if not run.complete:
        notes.append(f"incomplete: {run.incomplete_reason}")
    if run.case_errors:
        notes.append(f"{run.case_errors} cases errored")
    if run.cases != suite.cases_total:
        notes.append(f"a selection of {run.cases} of the suite's {suite.cases_total} cases: its overall is the selection's")
    if suite.skipped_categories:
        notes.append(missing_data_summary(suite.skipped_categories, suite.categories_total))
    return tuple(notes)


# --- Markdown -----------------------------------------------------------------------------------


def _value_cell(value: MetricValue | None, passed: bool | None) -> str:
    number = fmt.number(value.value) if value else None
    text = f"{fmt.value(number)} {fmt.ci(value.ci)}" if value and number is not None else fmt.NA
    return strong(f"{text} FAIL") if passed is False else text


def _regression_cell(mark: RegressionMark | None) -> str:
    text = regression_text(mark)
    return strong(text) if mark and mark.verdict == REGRESSED else text  # md_row escapes it


def _regression_lines(items: Sequence[tuple[str, Marks]], what: str) -> list[str]:
    """Below a runs' (releases') table: each regressed check of each (label, marks), in the order given."""
    out = []
    for label, marks in items:
        mark = marks.regression
        if mark and mark.verdict == REGRESSED:
            out += [f"- {strong(label)} " + md_text(f"regressed vs {mark.against}:")]
            out += [f"  - {md_text(check_text(check))}" for check in mark.checks]
    if not out:
        return []
    return ["", f"Regressed against the {what} before (the paired test of `biascheck diff`, with the suite's [regression] settings):", "", *out]


def rows_by_metric(rows: Sequence[Row]) -> dict[str, list[Row]]:
    grouped: dict[str, list[Row]] = {}
    for row in rows:
        grouped.setdefault(row.metric, []).append(row)
    return grouped


def render_runs_markdown(view: RunsView) -> str:
    """``compare.md`` (and what ``biascheck compare`` prints): the runs, then a table per metric
    with a row per scope and a column per run."""
    suite, runs = view.suite, view.runs
    level = fmt.percent(view.confidence) if view.confidence is not None else "the recorded"
    out = [
        f"# biascheck compare: {md_text(suite.name)} — {len(runs)} runs",
        "",
        md_text(f"Suite {suite.name} ({suite.benchmark}), fingerprint {suite.fingerprint.get('suite')}.") + " Each cell is a run's value "
        f"with its own {level} bootstrap interval, as its results.json records it; **FAIL**: a threshold check the run failed (its recorded verdict). Intervals that "
        "overlap do not show two runs equal, nor do separate ones a tested difference: `biascheck diff A B` tests two runs case by case, "
        "and each run here is tested so against the run given before it (**regressed**).",
        "",
        md_row(["#", "run", "model", "revision", "created", "cases", "thresholds", "vs the run before"]),
        "|---:|---|---|---|---|---:|---|---|",
    ]
    for i, run in enumerate(runs, 1):
        record, failed = run.record, run.marks.failed
        status = failed_text(failed) if failed or record.passed else "FAILED (see its notes)"
        status = status if record.passed else strong(status)
        cells = [i, run.label, record.model.model, record.model.revision or "-", record.created_at, fmt.count(record.run.cases), status]
        out.append(md_row([*cells, _regression_cell(run.marks.regression)]))
    out += _regression_lines([(run.label, run.marks) for run in runs], "run")
    notes = ["- " + md_text(f"{run.label}: {note}") for run in runs for note in run.notes]
    if notes:
        out += ["", *notes]
    grouped = rows_by_metric(view.rows)
    for metric in view.shown:
        rows = grouped.get(metric, [])
        if not rows:
            continue
        better = rows[0].better
        threshold = fmt.threshold(rows[0].threshold)
        extra = "; ".join(part for part in (f"threshold {threshold}" if threshold else "", f"better: {better}" if better else "") if part)
        out += ["", "## " + md_text(f"{metric}" + (f" ({extra})" if extra else "")), ""]
        out += [md_row(["scope", *(run.label for run in runs)]), "|---|" + "---:|" * len(runs)]
        out += [md_row([row.scope, *(_value_cell(v.value, v.passed) for v in row.values)]) for row in rows]
    hidden = sorted(set(grouped) - set(view.shown))
    if hidden:
        out += ["", md_text(f"Not shown here: {', '.join(hidden)} (in compare.json).")]
    return "\n".join(out) + "\n"


# --- across releases ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Release:
    """A release as history shows it: its label (revision, else creation time), its file, its
    baseline's record, what of the suite changed since the release before, and its marks."""

    label: str
    path: str
    record: BaselineRecord
    suite_changed: tuple[str, ...]
    marks: Marks
    headline: tuple[str, ...]

    @property
    def revision(self) -> str | None:
        """The model's revision it was recorded as (None: it is labelled by its creation time)."""
        return _revision(self.record)

    @property
    def fingerprint(self) -> str | None:
        """The suite's fingerprint it was recorded under."""
        return _fingerprint(self.record).get("suite")

    def value(self, metric: str) -> MetricValue | None:
        """Its overall value of ``metric``."""
        return _overall(self.record).get(metric)

    def passed(self, metric: str) -> bool | None:
        """Its overall verdict on ``metric`` (None: not gated, or not recorded)."""
        return (recorded_verdicts(self.record) or {}).get((OVERALL, metric))

    def to_json(self) -> dict[str, Any]:
        record = self.record
        return {
            "label": self.label,
            "path": self.path,
            "model": record.model_name,
            "revision": self.revision,
            "created_at": record.created_at,
            "git_commit": record.git_commit,
            "fingerprint": self.fingerprint,
            # What of the suite changed since the release before: values across it measure another suite.
            "suite_changed": list(self.suite_changed),
            "metrics": {m: value.to_json() if (value := self.value(m)) else None for m in self.headline},
            # Its marks (run_marks), as compare has a run's: the recorded threshold checks that
            # failed it (None: none recorded) and its regression against the release before;
            # and each headline metric's overall verdict.
            **self.marks.to_json(),
            "passed": {m: self.passed(m) for m in self.headline},
        }


@dataclass(frozen=True, slots=True)
class HistoryView:
    """``biascheck history`` of a suite's baselines, oldest first: its ``history.json``
    (:meth:`to_json`), the Markdown it prints (:func:`render_history_markdown`) and
    ``history.html`` (:func:`biascheck.reporting.html.render_history_html`) are rendered from it.
    ``thresholds``: the suite's, by headline metric (None where unknown)."""

    suite: str
    benchmark: str
    thresholds: Mapping[str, Any]
    headline: tuple[str, ...]
    releases: tuple[Release, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": HISTORY_SCHEMA,
            "tool": {"name": "biascheck", "version": VERSION},
            "suite": {"name": self.suite, "benchmark": self.benchmark},
            "thresholds": dict(self.thresholds),
            "headline": list(self.headline),
            "releases": [release.to_json() for release in self.releases],
        }


def history_document(
    releases: Sequence[tuple[str, BaselineRecord]],
    *,
    suite: str,
    thresholds: Mapping[str, Any] | None,
    gated_metrics: Sequence[str],
    regression: Mapping[str, Any] | None = None,
) -> HistoryView:
    """``biascheck history`` of a suite's baselines (path as shown, the baseline's record), in the
    order given (oldest first): each release's overall value of each headline metric with its
    interval, and its marks (:func:`run_marks`), its predecessor the release before.
    ``thresholds``: the suite's (from its manifest), None when unknown; ``regression``: its
    ``[regression]`` table, for a release whose predecessor records none."""
    if not releases:
        raise BiascheckError(suite, None, "has no baseline", "record one with pytest's update-baseline option")
    for path, record in releases:
        if record.suite_name != suite:
            raise BiascheckError(
                path, "suite.name", f"is a baseline of suite {record.suite_name!r}, among those of {suite!r}", "move it to its suite's folder"
            )
    benchmark = releases[0][1].benchmark
    reported = list(dict.fromkeys(m for _, record in releases for m in _overall(record)))
    headline = tuple(headline_metrics(benchmark, gated_metrics, reported))
    labels = [_revision(record) or record.created_at for _, record in releases]
    marks = run_marks([(path, label, record) for (path, record), label in zip(releases, labels)], regression=regression)
    entries = []
    previous: Mapping[str, Any] | None = None
    for (path, record), label, mark in zip(releases, labels, marks):
        fingerprint = _fingerprint(record)
        changed = () if previous is None else tuple(fingerprint_differences(previous, fingerprint))
        previous = fingerprint
        entries.append(Release(label, path, record, changed, mark, headline))
    return HistoryView(suite, benchmark, {m: (thresholds or {}).get(m) for m in headline}, headline, tuple(entries))


def render_history_markdown(view: HistoryView) -> str:
    """What ``biascheck history`` prints: a row per release, oldest first, a column per headline metric."""
    headline, releases = view.headline, view.releases
    out = [
        f"# biascheck history: {md_text(view.suite)} — {len(releases)} releases",
        "",
        "Each release's baseline, oldest first: the overall value of each headline metric with its 95% bootstrap interval; "
        "**FAIL**: a threshold check the release failed when it was recorded (its verdict, not today's thresholds); "
        "**regressed**: the release is credibly worse than the release before it by more than a margin (the paired test of `biascheck diff`).",
        "",
        md_row(
            [
                "release",
                "model",
                "created",
                "thresholds",
                "vs the release before",
                *(f"{m} ({fmt.threshold(view.thresholds.get(m))})" if view.thresholds.get(m) else m for m in headline),
            ]
        ),
        "|---|---|---|---|---|" + "---:|" * len(headline),
    ]
    for release in releases:
        cells = [_value_cell(value, release.passed(m)) if (value := release.value(m)) else fmt.NA for m in headline]
        status = failed_text(release.marks.failed)
        status = strong(status) if release.marks.failed else status
        record = release.record
        out.append(md_row([release.label, record.model_name, record.created_at, status, _regression_cell(release.marks.regression), *cells]))
    out += _regression_lines([(release.label, release.marks) for release in releases], "release")
    changes = [
        "- " + md_text(f"{r.label}: the suite changed ({', '.join(r.suite_changed)}): values before it measure another suite")
        for r in releases
        if r.suite_changed
    ]
    if changes:
        out += ["", *changes]
    return "\n".join(out) + "\n"
