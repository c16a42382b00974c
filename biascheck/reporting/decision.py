"""The release decision of one suite: built once from its run's record and its comparison with a
baseline (if any), and printed first by every view (report.md and so the job summary, the top of
report.html, the terminal's last block).

It re-decides nothing: a failing threshold is one the run's record says failed
(``RunRecord.failed_checks``), a regression is the comparison's verdict (``Comparison.regressions``),
an unresolved check fails under the comparison's own ``on_inconclusive``, and ``passed`` is the records' own. A view
renders :class:`Decision`; none makes its own list of failures, which is how report.md once listed
one failed threshold while the comparison beside it held 16 regressions.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from biascheck.core import format as fmt
from biascheck.evaluation.regression import on_inconclusive_of, resolve_text
from biascheck.records.comparison import Check, Comparison
from biascheck.records.comparison import Flips as FlipsRecord
from biascheck.records.run import RunRecord, ThresholdVerdict
from biascheck.reporting import document_views
from biascheck.suite import missing_data_summary

# Kinds of failing checks, in the order a decision lists them: what the gate was set to catch first.
REGRESSION = "regression"
THRESHOLD = "threshold"
INCONCLUSIVE = "inconclusive"  # an unresolved comparison check, failing under on_inconclusive = fail
MISSING_DATA = "missing data"
ERRORED_CASES = "errored cases"
INCOMPLETE = "incomplete run"
OTHER = "other"
KINDS = (REGRESSION, THRESHOLD, INCONCLUSIVE, MISSING_DATA, ERRORED_CASES, INCOMPLETE, OTHER)

# Where every flip is: the comparison's files beside report.md.
FLIPS_FILES = "comparison.md / flips.jsonl"


@dataclass(frozen=True)
class Flips:
    """A check's evidence: its scope's flipped cases counted by direction (``"unknown -> biased"``),
    most first. ``partial``: counted from the shown flips only (a ``biascheck.comparison/1`` file)."""

    scope: str
    counts: tuple[tuple[str, int], ...]
    partial: bool = False

    def text(self, arrow: str = "->") -> str:
        if not self.counts:
            return "none among the flips listed" if self.partial else "no flipped case"
        shown = ", ".join(f"{transition.replace('->', arrow)} {n:,}" for transition, n in self.counts)
        return shown + (" (of the flips listed)" if self.partial else "")


@dataclass(frozen=True)
class FailedCheck:
    """One reason the gate failed: a check (metric and scope) or the run itself (metric None)."""

    kind: str
    suite: str
    metric: str | None = None
    scope: str | None = None
    scope_label: str | None = None  # how reports name the scope ("selection (96 of 200 cases)")
    baseline: float | None = None
    candidate: float | None = None  # a threshold check's value, a comparison's candidate value
    interval: tuple[float | None, float | None] | None = None
    interval_label: str = ""  # "95% CI" (a threshold's value) or "worsening bounds" (a comparison)
    rule: str = ""  # the rule it broke, as the suite states it
    reason: str = ""  # one line, for a kind with no metric (missing data, errored cases, ...)
    flips: Flips | None = None  # a regression's evidence

    @property
    def key(self) -> tuple[str, str | None, str | None]:
        return self.kind, self.metric, self.scope

    def values_text(self) -> str:
        """``baseline → candidate``, or the value alone (a threshold), or empty (no metric)."""
        if self.metric is None:
            return ""
        if self.kind == THRESHOLD:
            return fmt.value(self.candidate)
        return f"{fmt.value(self.baseline)} \u2192 {fmt.value(self.candidate)}"

    def interval_text(self) -> str:
        if self.interval is None:
            return ""
        shown = fmt.ci(self.interval) if self.kind == THRESHOLD else fmt.signed_ci(self.interval)
        return f"{self.interval_label} {shown}"

    def text(self) -> str:
        """The check in one line of plain text (the terminal's; Markdown and HTML use the parts)."""
        if self.metric is None:
            return f"{self.kind}: {self.reason}"
        parts = [f"{self.kind}: {self.metric} ({self.scope_label or self.scope}) {self.values_text()}", self.interval_text(), f"broke {self.rule}"]
        return ", ".join(part for part in parts if part)


@dataclass(frozen=True)
class InconclusiveCheck:
    """A check the data could neither pass nor fail, listed after the failures, one line each."""

    suite: str
    metric: str
    scope: str
    source: str  # "regression" (a comparison check) or "threshold" (a threshold's interval straddles it)
    text: str  # what it detects and what would resolve it


@dataclass(frozen=True)
class Decision:
    """A suite's release decision: whether it passed, every failing check (regressions first), then
    the inconclusive checks. ``passed`` is the results' and the comparison's own verdict."""

    suite: str
    passed: bool
    failed: tuple[FailedCheck, ...]
    inconclusive: tuple[InconclusiveCheck, ...]
    compared: bool  # against a baseline
    on_inconclusive: str | None = None  # the comparison's, when compared

    @property
    def status(self) -> str:
        return "PASSED" if self.passed else "FAILED"

    def headline(self) -> str:
        """``FAILED: 3 regressions, 31 thresholds`` (the failing checks by kind)."""
        if not self.failed:
            unresolved = f"; {len(self.inconclusive)} inconclusive" if self.inconclusive else ""
            return f"{self.status}: no check failed{unresolved}" + ("" if self.compared else " (thresholds only: no baseline)")
        counts = Counter(check.kind for check in self.failed)
        return f"{self.status}: " + ", ".join(f"{counts[kind]} {_plural(kind, counts[kind])}" for kind in KINDS if counts[kind])


def _plural(kind: str, n: int) -> str:
    if n == 1 or kind in (MISSING_DATA, ERRORED_CASES, INCOMPLETE):
        return kind
    return {INCONCLUSIVE: "inconclusive checks (on_inconclusive = fail)", OTHER: "others"}.get(kind, kind + "s")


# --- the documents report.html still passes ----------------------------------------------------------

View = TypeVar("View", bound=Callable[..., Any])


def accepts_documents(legacy: Callable[..., Any]) -> Callable[[View], View]:
    """A view of records that report.html still calls with its documents: a document (or a list
    of them) goes to ``legacy``, the view as it read documents (:mod:`.document_views`), until the
    page moves to records alongside; then this goes. Every other caller gives records."""

    def taking(view: View) -> View:
        @functools.wraps(view)
        def reading(first: Any, *args: Any, **kwargs: Any) -> Any:
            documents = isinstance(first, Mapping) or (isinstance(first, list | tuple) and any(isinstance(item, Mapping) for item in first))
            return (legacy if documents else view)(first, *args, **kwargs)

        return cast(View, reading)

    return taking


# --- the decision of report.html's documents, as it was read before the views took records; goes
# with biascheck.reporting.document_views when the page takes records (every other caller gives them)

_UNRESOLVED = ("inconclusive", "not compared")


def _scope_label_of_document(document: Mapping[str, Any], scope: str) -> str:
    """How reports name a scope. "overall" of a run that covers part of the suite (``-k``, node ids)
    is the selection's: its verdicts are not the suite's. results.json keeps the key "overall"."""
    run_cases, total = document["run"]["cases"], document["suite"].get("cases_total")
    if scope != "overall" or total is None or run_cases >= total:
        return scope
    return f"selection ({fmt.count(run_cases)} of {fmt.count(total)} cases)"


def _flip_counts_of_document(flips: Mapping[str, Any] | None, scope: str) -> Flips:
    """A scope's flips counted by direction. ``/2`` counts them (``by_category``: category ->
    {transition: n}; overall: ``by_transition``); a ``/1`` file lists the shown flips under
    ``by_category``, so a category's counts come from those, marked partial when some were not shown."""
    flips = flips or {}
    if scope == "overall":
        counts: Mapping[str, Any] = flips.get("by_transition") or {}
        partial = False
    else:
        entry = (flips.get("by_category") or {}).get(scope)
        if "examples" in flips:  # /2
            counts, partial = entry or {}, False
        else:  # /1: the shown flips themselves; a category may have flips none of which was shown
            counts = Counter(f"{flip.get('baseline')} -> {flip.get('candidate')}" for flip in entry or [] if isinstance(flip, Mapping))
            partial = (flips.get("shown") or 0) < (flips.get("total") or 0)
    ordered = sorted(((str(t), int(n)) for t, n in counts.items()), key=lambda item: (-item[1], item[0]))
    return Flips(scope, tuple(ordered), partial)


def _decide_document(document: Mapping[str, Any], comparison: Mapping[str, Any] | None = None, *, thresholds: bool = True) -> Decision:
    """The decision of one suite's results ``document`` and its ``comparison`` with a baseline.
    ``thresholds=False``: the comparison's alone (``biascheck diff`` gates on it, not on the run's
    thresholds or missing data, which the run that made the results gated)."""
    suite = str(document["suite"]["name"])
    failed = (
        [_regression_of_document(document, comparison, r) for r in comparison["results"] if r["verdict"] == "regressed"]
        if comparison is not None
        else []
    )
    failed += [_threshold_of_document(document, v) for v in document["verdicts"] if thresholds and document_views.failing(v)]
    mode = on_inconclusive_of(comparison) if comparison is not None else None
    if comparison is not None and mode == "fail":
        failed += [_regression_of_document(document, comparison, r, kind=INCONCLUSIVE) for r in comparison["results"] if r["verdict"] in _UNRESOLVED]
    failed += _run_failures_of_document(document, comparison, missing_data=thresholds)
    passed = (not thresholds or bool(document["passed"])) and (comparison is None or bool(comparison["passed"]))
    if not passed and not failed:  # a verdict recorded without its reason (a hand-edited file)
        failed.append(FailedCheck(OTHER, suite, reason="the results record a failure without naming a check: see the report below"))
    inconclusive = [
        InconclusiveCheck(suite, r["metric"], r["scope"], REGRESSION, _unresolved_text_of_document(r))
        for r in (document_views.unresolved_checks(comparison) if comparison is not None and mode != "fail" else [])
    ]
    inconclusive += [
        InconclusiveCheck(
            suite,
            v["metric"],
            v["scope"],
            THRESHOLD,
            f"threshold: {fmt.value(v['value'])} {fmt.ci(v['ci'])} straddles {fmt.threshold(v['threshold'])}",
        )
        for v in document["verdicts"]
        if thresholds and v.get("status") == "inconclusive" and not document_views.failing(v)
    ]
    return Decision(suite, passed, tuple(failed), tuple(inconclusive), comparison is not None, mode)


def _threshold_of_document(document: Mapping[str, Any], verdict: Mapping[str, Any]) -> FailedCheck:
    mode = verdict.get("mode", "point")
    return FailedCheck(
        THRESHOLD,
        str(document["suite"]["name"]),
        metric=verdict["metric"],
        scope=verdict["scope"],
        scope_label=_scope_label_of_document(document, verdict["scope"]),
        candidate=verdict["value"],
        interval=fmt.bounds(verdict["ci"]),
        interval_label="95% CI",
        # With its note: why a value is n/a ("no answered ambiguous cases"), which fails the check too.
        rule=f"threshold {fmt.threshold(verdict['threshold'])}"
        + (f" ({mode})" if mode != "point" else "")
        + (f"; {verdict['note']}" if verdict.get("note") else ""),
    )


def _regression_of_document(
    document: Mapping[str, Any], comparison: Mapping[str, Any], result: Mapping[str, Any], kind: str = REGRESSION
) -> FailedCheck:
    return FailedCheck(
        kind,
        str(document["suite"]["name"]),
        metric=result["metric"],
        scope=result["scope"],
        scope_label=result["scope"],
        baseline=(result.get("baseline") or {}).get("value"),
        candidate=(result.get("candidate") or {}).get("value"),
        interval=fmt.bounds(result.get("worsening_ci")),
        interval_label="worsening bounds",
        rule=f"margin {result['rule']}" + ("" if kind == REGRESSION else f" ({result['verdict']}; on_inconclusive = fail)"),
        flips=_flip_counts_of_document(comparison.get("flips"), result["scope"]),
    )


def _run_failures_of_document(document: Mapping[str, Any], comparison: Mapping[str, Any] | None, *, missing_data: bool) -> list[FailedCheck]:
    """What fails the run as a whole: missing data, errored cases, an incomplete run."""
    suite, run = str(document["suite"]["name"]), document["run"]
    out = []
    if missing_data and document_views.missing_data_failed(document):
        summary = missing_data_summary(document["suite"]["skipped_categories"], document["suite"].get("categories_total"))
        out.append(FailedCheck(MISSING_DATA, suite, reason=summary))
    errors = max(int(run.get("case_errors") or 0), int((comparison or {}).get("candidate_errors") or 0))
    if errors:
        out.append(FailedCheck(ERRORED_CASES, suite, reason=f"{errors:,} cases without an answer: errored cases are missing evidence"))
    if not run.get("complete", True):
        out.append(FailedCheck(INCOMPLETE, suite, reason=str(run.get("incomplete_reason") or "reason not recorded")))
    return out


def _unresolved_text_of_document(result: Mapping[str, Any]) -> str:
    return (
        f"worsening {fmt.signed(result.get('worsening'))} {fmt.signed_ci(result.get('worsening_ci'))} across margin "
        f"{fmt.value(result.get('margin'))}; {document_views.resolve_text(result)}"
    )


# --- how reports name a scope -----------------------------------------------------------------------


@accepts_documents(_scope_label_of_document)
def scope_label(run: RunRecord, scope: str) -> str:
    """How reports name a scope. "overall" of a run that covers part of the suite (``-k``, node ids)
    is the selection's: its verdicts are not the suite's. results.json keeps the key "overall"."""
    cases, total = run.run.cases, run.suite.cases_total
    if scope != "overall" or cases >= total:
        return scope
    return f"selection ({fmt.count(cases)} of {fmt.count(total)} cases)"


# --- flips: /1 and /2 read alike by the record ------------------------------------------------------


def flip_counts(flips: FlipsRecord, scope: str) -> Flips:
    """A scope's flips counted by direction: ``by_category`` (overall: ``by_transition``). A
    ``/1`` file's counts are those of the flips it listed, marked partial when it listed fewer than changed."""
    counts = flips.by_transition if scope == "overall" else flips.by_category.get(scope, {})
    ordered = sorted(((str(t), int(n)) for t, n in counts.items()), key=lambda item: (-item[1], item[0]))
    return Flips(scope, tuple(ordered), flips.partial and scope != "overall")


# --- building it ---------------------------------------------------------------------------------


@accepts_documents(_decide_document)
def decide(run: RunRecord, comparison: Comparison | None = None, *, thresholds: bool = True) -> Decision:
    """The decision of one suite's ``run`` and its ``comparison`` with a baseline, read off the
    records' own verdicts. ``thresholds=False``: the comparison's alone (``biascheck diff`` gates on
    it, not on the run's thresholds or missing data, which the run that made the results gated)."""
    suite = run.suite.name
    failed = [_regression(suite, comparison, c) for c in comparison.regressions] if comparison is not None else []
    failed += [_threshold(run, v) for v in run.failed_checks if thresholds]
    mode = comparison.on_inconclusive if comparison is not None else None
    if comparison is not None and mode == "fail":
        failed += [_regression(suite, comparison, c, kind=INCONCLUSIVE) for c in comparison.unresolved]
    failed += _run_failures(run, comparison, missing_data=thresholds)
    passed = (not thresholds or run.passed) and (comparison is None or comparison.passed)
    if not passed and not failed:  # a verdict recorded without its reason (a hand-edited file)
        failed.append(FailedCheck(OTHER, suite, reason="the results record a failure without naming a check: see the report below"))
    inconclusive = [
        InconclusiveCheck(suite, c.metric, c.scope, REGRESSION, _unresolved_text(c))
        for c in (comparison.inconclusive if comparison is not None and mode != "fail" else ())
    ]
    inconclusive += [
        InconclusiveCheck(
            suite, v.metric, v.scope, THRESHOLD, f"threshold: {fmt.value(v.value)} {fmt.ci(v.ci)} straddles {fmt.threshold(v.threshold)}"
        )
        for v in run.inconclusive_checks
        if thresholds and not v.failed
    ]
    return Decision(suite, passed, tuple(failed), tuple(inconclusive), comparison is not None, mode)


def decisions(runs: Sequence[RunRecord], comparisons: Mapping[str, Comparison] | None = None) -> list[Decision]:
    """Each suite's decision, in the run's order."""
    comparisons = comparisons or {}
    return [decide(run, comparisons.get(run.suite.name)) for run in runs]


def comparison_record(document: Mapping[str, Any], where: str = "comparison") -> Comparison:
    """The record of a comparison document as compare() makes it in memory (every flip under
    ``flips["all"]``) or as comparison.json holds it; what callers that still hold the document
    convert with, once, until the pipeline makes records."""
    from biascheck.evaluation.regression import split_flips

    flips = document.get("flips") or {}
    if "all" not in flips:
        return Comparison.from_json(document, where)
    split, every = split_flips(document)
    # Where every flip is stays what the document says (in memory: no file yet).
    return Comparison.from_json({**split, "flips": {**split["flips"], "file": flips.get("file")}}, where, every, where)


def _threshold(run: RunRecord, verdict: ThresholdVerdict) -> FailedCheck:
    mode = verdict.mode or "point"
    return FailedCheck(
        THRESHOLD,
        run.suite.name,
        metric=verdict.metric,
        scope=verdict.scope,
        scope_label=scope_label(run, verdict.scope),
        candidate=verdict.value,
        interval=fmt.bounds(verdict.ci),
        interval_label="95% CI",
        # With its note: why a value is n/a ("no answered ambiguous cases"), which fails the check too.
        rule=f"threshold {fmt.threshold(verdict.threshold)}"
        + (f" ({mode})" if mode != "point" else "")
        + (f"; {verdict.note}" if verdict.note else ""),
    )


def _regression(suite: str, comparison: Comparison, check: Check, kind: str = REGRESSION) -> FailedCheck:
    return FailedCheck(
        kind,
        suite,
        metric=check.metric,
        scope=check.scope,
        scope_label=check.scope,
        baseline=check.baseline.value,
        candidate=check.candidate.value,
        interval=fmt.bounds(check.worsening_ci),
        interval_label="worsening bounds",
        rule=f"margin {check.rule}" + ("" if kind == REGRESSION else f" ({check.verdict}; on_inconclusive = fail)"),
        flips=flip_counts(comparison.flips, check.scope),
    )


def _run_failures(run: RunRecord, comparison: Comparison | None, *, missing_data: bool) -> list[FailedCheck]:
    """What fails the run as a whole: missing data, errored cases, an incomplete run."""
    suite, info = run.suite.name, run.run
    out = []
    if missing_data and run.missing_data_failed:
        out.append(FailedCheck(MISSING_DATA, suite, reason=missing_data_summary(run.suite.skipped_categories, run.suite.categories_total)))
    errors = max(info.case_errors or 0, comparison.candidate_errors if comparison is not None else 0)
    if errors:
        out.append(FailedCheck(ERRORED_CASES, suite, reason=f"{errors:,} cases without an answer: errored cases are missing evidence"))
    if not info.complete:
        out.append(FailedCheck(INCOMPLETE, suite, reason=info.incomplete_reason or "reason not recorded"))
    return out


def _unresolved_text(check: Check) -> str:
    return (
        f"worsening {fmt.signed(check.worsening)} {fmt.signed_ci(check.worsening_ci)} across margin {fmt.value(check.margin)}; {resolve_text(check)}"
    )
