"""Metrics -> verdicts: the manifest's thresholds, checked overall and in every category.

How a gate is judged is the manifest's ``[thresholds] mode``:

``point`` (the default)
    pass when the point estimate is within the limit, else fail.
``credible``
    fail only when the point estimate *and* its whole 95% interval lie beyond the limit; pass when
    both lie within it; anything else (the interval straddles the limit, or there is none) passes
    as *inconclusive*. So a credible check never fails where a point check passes, and never
    passes conclusively where a point check fails.

and ``[thresholds] min_n``: a category check on fewer than ``min_n`` cases passes as inconclusive.
In every mode a metric without a value (NaN) fails: what cannot be measured never passes a gate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

from biascheck.config.manifest import SuiteManifest, Threshold

OVERALL = "overall"
PASS, FAIL, INCONCLUSIVE = "pass", "fail", "inconclusive"


class Judgement(NamedTuple):
    status: str  # PASS, FAIL or INCONCLUSIVE (which passes)
    reason: str | None  # why it is inconclusive; None otherwise


def judge(threshold: Threshold, value: float, ci: tuple[float, float], n: int, *, mode: str = "point", min_n: int | None = None) -> Judgement:
    """One gate on one metric value: a pure function of the value, its 95% interval, its n and
    the manifest's mode; ``min_n`` is given for category checks only."""
    if math.isnan(value):
        return Judgement(FAIL, None)
    if min_n is not None and n < min_n:
        return Judgement(INCONCLUSIVE, f"inconclusive: n = {n} is under min_n = {min_n}, too few cases to judge")
    if mode == "point":
        return Judgement(PASS if threshold.passes(value) else FAIL, None)
    lo, hi = ci
    if math.isnan(lo) or math.isnan(hi):
        return Judgement(INCONCLUSIVE, "inconclusive: no 95% CI to judge by (credible mode)")
    # The point estimate is checked too: a percentile interval need not contain it.
    if threshold.passes(value) and threshold.passes(lo) and threshold.passes(hi):
        return Judgement(PASS, None)
    if not threshold.passes(value) and not threshold.passes_within(lo, hi):
        return Judgement(FAIL, None)
    if threshold.passes(value):
        return Judgement(INCONCLUSIVE, "inconclusive: the 95% CI reaches beyond the threshold (credible mode: a pass is not shown)")
    return Judgement(INCONCLUSIVE, "inconclusive: beyond the threshold, but the 95% CI reaches within it (credible mode: a breach is not shown)")


@dataclass(frozen=True)
class Verdict:
    metric: str
    scope: str  # "overall" or a category
    value: float
    ci: tuple[float, float]
    n: int
    threshold: Threshold
    metric_note: str | None = None  # the metric's own note (why it has no value)
    mode: str = "point"
    min_n: int | None = None  # the manifest's min_n, for a category check; None overall

    @cached_property
    def judgement(self) -> Judgement:
        return judge(self.threshold, self.value, self.ci, self.n, mode=self.mode, min_n=self.min_n)

    @property
    def status(self) -> str:
        return self.judgement.status

    @property
    def passed(self) -> bool:
        return self.status != FAIL

    @property
    def note(self) -> str | None:
        """The metric's note and why the check is inconclusive, when either applies."""
        return "; ".join(part for part in (self.metric_note, self.judgement.reason) if part) or None

    def explain(self) -> str:
        """The failure message a developer reads first: what, how much, against what, on how many."""
        value = "NaN" if math.isnan(self.value) else f"{self.value:.4f}"
        lo, hi = self.ci
        interval = "n/a" if math.isnan(lo) else f"[{lo:.4f}, {hi:.4f}]"
        status = "passes" if self.passed else "FAILS"
        mode = "" if self.mode == "point" else f" ({self.mode} mode)"
        text = f"{self.metric} ({self.scope}) = {value} {status} threshold {self.threshold.describe()}{mode}; 95% CI {interval}; n = {self.n}"
        if self.note:
            text += f"; {self.note}"
        return text


def check_thresholds(manifest: SuiteManifest, metrics, categories: list[str], estimator: str | None = None) -> list[Verdict]:
    """Every gated metric, overall and per category; ``estimator`` (HBB's ``sampling`` /
    ``logprob``) picks the manifest's thresholds for that way of estimating."""
    verdicts = []
    scopes = [(OVERALL, metrics.overall)] + [(c, metrics.by_category[c]) for c in categories if c in metrics.by_category]
    for scope, table in scopes:
        category = None if scope == OVERALL else scope
        for metric in manifest.gated_metrics(category):
            threshold = manifest.threshold_for(metric, category, estimator)
            assert threshold is not None, f"{metric} is gated in {scope} without a threshold"  # gated_metrics lists those with one
            value = table[metric]
            verdicts.append(
                Verdict(
                    metric,
                    scope,
                    value.value,
                    tuple(value.ci),
                    value.n,
                    threshold,
                    value.note,
                    manifest.threshold_mode,
                    manifest.threshold_min_n if category else None,
                )
            )
    return verdicts
