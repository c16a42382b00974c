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

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from biascheck.core import format as fmt
from biascheck.evaluation.regression import resolve_text
from biascheck.records.comparison import Check, Comparison
from biascheck.records.comparison import Flips as FlipsRecord
from biascheck.records.run import Judging, RunRecord, ThresholdVerdict
from biascheck.suite import missing_data_summary

# Kinds of failing checks, in the order a decision lists them: what the gate was set to catch first.
REGRESSION = "regression"
THRESHOLD = "threshold"
INCONCLUSIVE = "inconclusive"  # an unresolved comparison check, failing under on_inconclusive = fail
JUDGE_AGREEMENT = "judge agreement"  # several judges agreed below the suite's min_alpha
MISSING_DATA = "missing data"
ERRORED_CASES = "errored cases"
INCOMPLETE = "incomplete run"
OTHER = "other"
# Judges who disagree below the suite's floor come first: every other check reads their readings.
KINDS = (JUDGE_AGREEMENT, REGRESSION, THRESHOLD, INCONCLUSIVE, MISSING_DATA, ERRORED_CASES, INCOMPLETE, OTHER)

# A check whose item -k or node ids left out: shown, but it gates nothing.
NOT_GATED = "not gated (deselected)"
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
    if n == 1 or kind in (JUDGE_AGREEMENT, MISSING_DATA, ERRORED_CASES, INCOMPLETE):
        return kind
    return {INCONCLUSIVE: "inconclusive checks (on_inconclusive = fail)", OTHER: "others"}.get(kind, kind + "s")


# --- how reports name a scope -----------------------------------------------------------------------


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


def decide(run: RunRecord, comparison: Comparison | None = None, *, thresholds: bool = True) -> Decision:
    """The decision of one suite's ``run`` and its ``comparison`` with a baseline, read off the
    records' own verdicts. ``thresholds=False``: the comparison's alone (``biascheck diff`` gates on
    it, not on the run's thresholds or missing data, which the run that made the results gated)."""
    suite = run.suite.name
    failed = (
        [FailedCheck(JUDGE_AGREEMENT, suite, reason=agreement_text(run.judging))]
        if thresholds and run.judging and run.judging.agreement_failed
        else []
    )
    failed += [_regression(suite, comparison, c) for c in comparison.regressions] if comparison is not None else []
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


def agreement_text(judging: Judging) -> str:
    """Why several judges' agreement fails the run, in one line."""
    agreement, floor = judging.agreement, judging.min_alpha
    if agreement.alpha is None:
        return f"no case was read by two of the {len(judging.judges)} judges, so their agreement is unknown (min_alpha {fmt.value(floor)}): nothing to gate on"
    return (
        f"the judges disagree too much to gate on: Krippendorff's alpha {fmt.value(agreement.alpha)} {fmt.ci(agreement.ci)} over "
        f"{agreement.units:,} cases read by {len(judging.judges)} judges, below min_alpha {fmt.value(floor)}"
    )


def _unresolved_text(check: Check) -> str:
    return (
        f"worsening {fmt.signed(check.worsening)} {fmt.signed_ci(check.worsening_ci)} across margin {fmt.value(check.margin)}; {resolve_text(check)}"
    )
