"""pandas DataFrames of the records: a case, metric, check or flip a row. pandas is imported here,
when a frame is asked for, so that ``import biascheck`` stays cheap. The records call these from
their ``*_df`` methods, so the records are read here untyped (``Any``): an annotation naming them
would be an import cycle."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from biascheck.core import format as fmt
from biascheck.records._json import thaw

if TYPE_CHECKING:
    import pandas as pd

CASE_COLUMNS = (
    "suite", "model", "case_id", "sample_id", "category", "cluster", "label", "prompt_id", "order", "context_type",
    "choices", "answer", "outcome", "raw", "error", "truncated",
)  # fmt: skip
METRIC_COLUMNS = ("suite", "model", "metric", "group", "scope", "value", "ci_low", "ci_high", "n", "threshold", "passed", "status", "gated")
CHECK_COLUMNS = (
    "suite", "metric", "scope", "verdict", "baseline", "baseline_ci_low", "baseline_ci_high", "candidate", "candidate_ci_low",
    "candidate_ci_high", "difference", "worsening", "worsening_ci_low", "worsening_ci_high", "margin", "rule", "rule_source",
    "better", "p_value", "p_adjusted", "cases", "templates", "gated", "explanation",
)  # fmt: skip
FLIP_COLUMNS = (
    "suite", "case_id", "category", "context_type", "transition", "baseline", "candidate", "prompt", "answer", "baseline_answer",
    "correct_option", "stereotyped_option", "baseline_option", "candidate_option", "context", "question", "options",
)  # fmt: skip
JUDGE_COLUMNS = (
    "suite", "model", "judge", "calls", "cache_hits", "asked", "readings", "unreadable", "calibration",
    "metric", "value", "ci_low", "ci_high", "n", "alpha", "alpha_ci_low", "alpha_ci_high", "aggregation",
)  # fmt: skip
RUN_COLUMNS = (
    "source", "kind", "suite", "benchmark", "model", "revision", "created_at", "git_commit", "run_passed",
    "metric", "group", "scope", "value", "ci_low", "ci_high", "n", "threshold", "passed",
)  # fmt: skip


def _frame(rows: Iterable[Mapping[str, Any]], columns: Sequence[str]) -> pd.DataFrame:
    """A frame of ``rows`` with ``columns`` first (present even when there is no row), then any others."""
    import pandas as pd

    rows = list(rows)
    extra = list(dict.fromkeys(key for row in rows for key in row if key not in columns))
    return pd.DataFrame(rows, columns=[*columns, *extra])


def _threshold(verdict: Any) -> str | None:
    return fmt.threshold(thaw(verdict.threshold)) if verdict is not None else None


def cases_frame(record: Any) -> pd.DataFrame:
    suite, model = record.suite.name, record.model.model
    rows = []
    for case in record.cases:
        row = {
            "suite": suite,
            "model": model,
            **{key: getattr(case, key) for key in CASE_COLUMNS[2:]},
            **{key: thaw(value) for key, value in case.fields.items()},
        }
        row["choices"] = list(case.choices) if case.choices is not None else None
        rows.append(row)
    return _frame(rows, CASE_COLUMNS)


def _metric_row(value: Any, verdict: Any) -> dict[str, Any]:
    return {
        "metric": value.metric,
        "group": value.group,
        "scope": value.scope,
        "value": value.value,
        "ci_low": value.ci[0],
        "ci_high": value.ci[1],
        "n": value.n,
        "threshold": _threshold(verdict),
        "passed": verdict.passed if verdict is not None else None,
    }


def judges_frame(record: Any) -> pd.DataFrame:
    """A row per judge and metric of a run read by several judges (none for one judge), with the
    panel's agreement on every row."""
    judging = record.judging
    rows = []
    for judge in judging.judges if judging is not None else ():
        for value in judge.metrics:
            rows.append(
                {
                    "suite": record.suite.name,
                    "model": record.model.model,
                    "judge": judge.model,
                    "calls": judge.calls,
                    "cache_hits": judge.cache_hits,
                    "asked": judge.asked,
                    "readings": judge.readings,
                    "unreadable": judge.unreadable,
                    "calibration": judge.calibration,
                    "metric": value.metric,
                    "value": value.value,
                    "ci_low": value.ci[0],
                    "ci_high": value.ci[1],
                    "n": value.n,
                    "alpha": judging.agreement.alpha,
                    "alpha_ci_low": judging.agreement.ci[0],
                    "alpha_ci_high": judging.agreement.ci[1],
                    "aggregation": judging.aggregation,
                }
            )
    return _frame(rows, JUDGE_COLUMNS)


def metrics_frame(record: Any) -> pd.DataFrame:
    # Threshold checks are on the overall and category scopes (results.json's verdicts).
    verdicts = {(v.scope, v.metric): v for v in record.verdicts}
    rows = []
    for value in record.metrics.values:
        verdict = verdicts.get((value.scope, value.metric)) if value.group in ("overall", "category") else None
        row = {"suite": record.suite.name, "model": record.model.model, **_metric_row(value, verdict)}
        row["status"] = verdict.status if verdict is not None else None
        row["gated"] = verdict.gated if verdict is not None else None
        rows.append(row)
    return _frame(rows, METRIC_COLUMNS)


def checks_frame(comparison: Any) -> pd.DataFrame:
    rows = []
    for check in comparison.checks:
        rows.append(
            {
                "suite": comparison.suite.get("name"),
                "metric": check.metric,
                "scope": check.scope,
                "verdict": check.verdict,
                "baseline": check.baseline.value,
                "baseline_ci_low": check.baseline.ci[0],
                "baseline_ci_high": check.baseline.ci[1],
                "candidate": check.candidate.value,
                "candidate_ci_low": check.candidate.ci[0],
                "candidate_ci_high": check.candidate.ci[1],
                "difference": check.difference,
                "worsening": check.worsening,
                "worsening_ci_low": check.worsening_ci[0],
                "worsening_ci_high": check.worsening_ci[1],
                "margin": check.margin,
                "rule": check.rule,
                "rule_source": check.rule_source,
                "better": check.better,
                "p_value": check.p_value,
                "p_adjusted": check.p_adjusted,
                "cases": check.cases,
                "templates": check.templates,
                "gated": check.gated,
                "explanation": check.explanation,
            }
        )
    return _frame(rows, CHECK_COLUMNS)


def flips_frame(comparison: Any) -> pd.DataFrame:
    flips = comparison.flips
    every = flips.every is not None
    rows = []
    for flip in flips.every if flips.every is not None else flips.examples:
        row = {"suite": comparison.suite.get("name"), "transition": flip.transition}
        row.update((key, getattr(flip, key)) for key in FLIP_COLUMNS if key not in row)
        row["options"] = list(flip.options) if flip.options is not None else None
        row.update((key, thaw(value)) for key, value in flip.rest.items())
        rows.append(row)
    frame = _frame(rows, FLIP_COLUMNS)
    # Whether these are all the flips (flips.jsonl read, or comparison.json showed them all).
    frame.attrs["complete"] = every or len(flips.examples) == flips.total
    return frame


def runs_frame(runs: Iterable[tuple[Mapping[str, Any], Iterable[Any], Mapping[tuple[str, str], Any]]]) -> pd.DataFrame:
    """``runs``: per run or baseline, its columns (source, kind, suite, ...), its metric values and
    its threshold checks by (scope, metric)."""
    rows = []
    for head, values, verdicts in runs:
        for value in values:
            if value.group not in ("overall", "category"):
                continue  # a history compares releases by the gated scopes a baseline keeps too
            rows.append({**head, **_metric_row(value, verdicts.get((value.scope, value.metric)))})
    return _frame(rows, RUN_COLUMNS)
