"""The release decision of one suite: built once from its results document and its comparison with
a baseline (if any), and printed first by every view (report.md and so the job summary, the top of
report.html, the terminal's last block).

It re-decides nothing: a failing threshold is one :func:`failing` says failed (the helper
mark_deselected and every report use), a regression is the comparison's verdict, an unresolved
check fails under the comparison's own ``on_inconclusive``, and ``passed`` is the documents' own. A view
renders :class:`Decision`; none makes its own list of failures, which is how report.md once listed
one failed threshold while the comparison beside it held 16 regressions.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from biascheck.core import format as fmt
from biascheck.evaluation.regression import on_inconclusive_of, resolve_text, unresolved_checks
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

# A comparison's verdicts an on_inconclusive = fail gate fails on (regression.compare's `unresolved`).
_UNRESOLVED = ("inconclusive", "not compared")
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


# --- what fails a run, read from its results document ---------------------------------------------


def gated(verdict: Mapping[str, Any]) -> bool:
    """Whether a threshold check gated the run: False when -k or node ids left its metric item out."""
    return verdict.get("gated", True) is not False


def failing(verdict: Mapping[str, Any]) -> bool:
    """A check that failed the run: over its threshold, and its item selected."""
    return not verdict.get("passed") and gated(verdict)


def missing_data_failed(document: Mapping[str, Any]) -> bool:
    """Whether categories had no data and the run did not accept it. (A document written before
    missing data failed a run has no ``missing_data_allowed``: its gap was accepted silently.)"""
    suite = document["suite"]
    return bool(suite.get("skipped_categories")) and suite.get("missing_data_allowed") is False


def scope_label(document: Mapping[str, Any], scope: str) -> str:
    """How reports name a scope. "overall" of a run that covers part of the suite (``-k``, node ids)
    is the selection's: its verdicts are not the suite's. results.json keeps the key "overall"."""
    run_cases, total = document["run"]["cases"], document["suite"].get("cases_total")
    if scope != "overall" or total is None or run_cases >= total:
        return scope
    return f"selection ({fmt.count(run_cases)} of {fmt.count(total)} cases)"


# --- flips: one accessor for biascheck.comparison/1 and /2 ------------------------------------------


def flip_counts(flips: Mapping[str, Any] | None, scope: str) -> Flips:
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


# --- building it ---------------------------------------------------------------------------------


def decide(document: Mapping[str, Any], comparison: Mapping[str, Any] | None = None, *, thresholds: bool = True) -> Decision:
    """The decision of one suite's results ``document`` and its ``comparison`` with a baseline.
    ``thresholds=False``: the comparison's alone (``biascheck diff`` gates on it, not on the run's
    thresholds or missing data, which the run that made the results gated)."""
    suite = str(document["suite"]["name"])
    failed = [_regression(document, comparison, r) for r in comparison["results"] if r["verdict"] == "regressed"] if comparison is not None else []
    failed += [_threshold(document, v) for v in document["verdicts"] if thresholds and failing(v)]
    mode = on_inconclusive_of(comparison) if comparison is not None else None
    if comparison is not None and mode == "fail":
        failed += [_regression(document, comparison, r, kind=INCONCLUSIVE) for r in comparison["results"] if r["verdict"] in _UNRESOLVED]
    failed += _run_failures(document, comparison, missing_data=thresholds)
    passed = (not thresholds or bool(document["passed"])) and (comparison is None or bool(comparison["passed"]))
    if not passed and not failed:  # a verdict recorded without its reason (a hand-edited file)
        failed.append(FailedCheck(OTHER, suite, reason="the results record a failure without naming a check: see the report below"))
    inconclusive = [
        InconclusiveCheck(suite, r["metric"], r["scope"], REGRESSION, _unresolved_text(r))
        for r in (unresolved_checks(comparison) if comparison is not None and mode != "fail" else [])
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
        if thresholds and v.get("status") == "inconclusive" and not failing(v)
    ]
    return Decision(suite, passed, tuple(failed), tuple(inconclusive), comparison is not None, mode)


def decisions(documents: Sequence[Mapping[str, Any]], comparisons: Mapping[str, Mapping[str, Any]] | None = None) -> list[Decision]:
    """Each suite's decision, in the run's order."""
    comparisons = comparisons or {}
    return [decide(d, comparisons.get(d["suite"]["name"])) for d in documents]


def _threshold(document: Mapping[str, Any], verdict: Mapping[str, Any]) -> FailedCheck:
    mode = verdict.get("mode", "point")
    return FailedCheck(
        THRESHOLD,
        str(document["suite"]["name"]),
        metric=verdict["metric"],
        scope=verdict["scope"],
        scope_label=scope_label(document, verdict["scope"]),
        candidate=verdict["value"],
        interval=fmt.bounds(verdict["ci"]),
        interval_label="95% CI",
        # With its note: why a value is n/a ("no answered ambiguous cases"), which fails the check too.
        rule=f"threshold {fmt.threshold(verdict['threshold'])}"
        + (f" ({mode})" if mode != "point" else "")
        + (f"; {verdict['note']}" if verdict.get("note") else ""),
    )


def _regression(document: Mapping[str, Any], comparison: Mapping[str, Any], result: Mapping[str, Any], kind: str = REGRESSION) -> FailedCheck:
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
        flips=flip_counts(comparison.get("flips"), result["scope"]),
    )


def _run_failures(document: Mapping[str, Any], comparison: Mapping[str, Any] | None, *, missing_data: bool) -> list[FailedCheck]:
    """What fails the run as a whole: missing data, errored cases, an incomplete run."""
    suite, run = str(document["suite"]["name"]), document["run"]
    out = []
    if missing_data and missing_data_failed(document):
        summary = missing_data_summary(document["suite"]["skipped_categories"], document["suite"].get("categories_total"))
        out.append(FailedCheck(MISSING_DATA, suite, reason=summary))
    errors = max(int(run.get("case_errors") or 0), int((comparison or {}).get("candidate_errors") or 0))
    if errors:
        out.append(FailedCheck(ERRORED_CASES, suite, reason=f"{errors:,} cases without an answer: errored cases are missing evidence"))
    if not run.get("complete", True):
        out.append(FailedCheck(INCOMPLETE, suite, reason=str(run.get("incomplete_reason") or "reason not recorded")))
    return out


def _unresolved_text(result: Mapping[str, Any]) -> str:
    return (
        f"worsening {fmt.signed(result.get('worsening'))} {fmt.signed_ci(result.get('worsening_ci'))} across margin "
        f"{fmt.value(result.get('margin'))}; {resolve_text(result)}"
    )
