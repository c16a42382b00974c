"""Metrics: pure functions from cases and outcomes to values with cluster-bootstrap intervals.

Entry point: :func:`aggregate_qa`.  The metric definitions and the count vectors they read are
in :mod:`biascheck.benchmarks.qa.metrics`; the bootstrap in :mod:`biascheck.metrics.bootstrap`.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from biascheck.benchmarks.qa.metrics import (
    COUNT_FIELDS,
    QA_METRICS,
    SUITES,
    K,
    MetricDef,
    cell,
    metrics_for_suite,
    tally,
)
from biascheck.core.records import Case, Outcome
from biascheck.metrics.bootstrap import DEFAULT_N_BOOT, cluster_bootstrap_many

__all__ = [
    "COUNT_FIELDS",
    "QA_METRICS",
    "SUITES",
    "MetricDef",
    "MetricValue",
    "QAMetrics",
    "Spread",
    "aggregate_qa",
    "metrics_for_suite",
    "tally",
]


def _num(x: float) -> float | None:
    """JSON number: NaN becomes None (null)."""
    return None if math.isnan(x) else x


@dataclass(frozen=True, slots=True)
class MetricValue:
    """A metric's point estimate, its bootstrap interval, its denominator count and, when the
    value is NaN, why (e.g. ``"no answered ambiguous cases"``)."""

    value: float
    ci: tuple[float, float]
    n: int
    note: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"value": _num(self.value), "ci": [_num(self.ci[0]), _num(self.ci[1])], "n": self.n}
        if self.note is not None:
            out["note"] = self.note
        return out


@dataclass(frozen=True, slots=True)
class Spread:
    """Mean and sample standard deviation (ddof=1) of a metric across prompts, over the ``n``
    prompts where it is not NaN (the papers report mean +- std over prompts)."""

    mean: float
    std: float
    n: int
    note: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"mean": _num(self.mean), "std": _num(self.std), "n": self.n}
        if self.note is not None:
            out["note"] = self.note
        return out


Table = dict[str, MetricValue]


@dataclass(frozen=True)
class QAMetrics:
    """Result of :func:`aggregate_qa`.  Each table maps metric name -> :class:`MetricValue`;
    ``by_*`` map a group (category, non-empty label, prompt id; sorted) to a table."""

    metrics: tuple[str, ...]
    overall: Table
    by_category: dict[str, Table]
    by_label: dict[str, Table]
    by_prompt: dict[str, Table]
    prompt_summary: dict[str, Spread]
    counts: dict[str, int] = field(default_factory=dict)
    n_boot: int = DEFAULT_N_BOOT
    seed: int = 0
    confidence: float = 0.95

    def to_json(self) -> dict[str, Any]:
        return {
            "metrics": list(self.metrics),
            "overall": tables_json({"": self.overall})[""],
            "by_category": tables_json(self.by_category),
            "by_label": tables_json(self.by_label),
            "by_prompt": tables_json(self.by_prompt),
            "prompt_summary": {name: s.to_json() for name, s in self.prompt_summary.items()},
            "counts": dict(self.counts),
            "bootstrap": {"n_boot": self.n_boot, "seed": self.seed, "confidence": self.confidence},
        }


def _factorize(values: list[str]) -> tuple[np.ndarray, list[str]]:
    """Codes into the *sorted* unique values (so results never depend on row order)."""
    uniques = sorted(set(values))
    index = {u: i for i, u in enumerate(uniques)}
    return np.fromiter((index[v] for v in values), dtype=np.int64, count=len(values)), uniques


def _grouped_cluster_counts(group: np.ndarray, n_groups: int, cluster: np.ndarray, n_clusters: int, cell_idx: np.ndarray) -> np.ndarray:
    """(G, T, K) counts: cases of group g in cluster t falling in cell k."""
    flat = (group * n_clusters + cluster) * K + cell_idx
    return np.bincount(flat, minlength=n_groups * n_clusters * K).reshape(n_groups, n_clusters, K)


def _table(cluster_counts: np.ndarray, defs: Sequence[MetricDef], n_boot: int, seed: int, confidence: float) -> Table:
    """Point estimates from the total and intervals from the cluster bootstrap of one group.

    Shared by every benchmark: rows are clusters' summed (non-negative) vectors; a cluster with
    nothing in this group is left out of the resampling."""
    present = cluster_counts[cluster_counts.sum(axis=1) > 0]
    total = present.sum(axis=0) if len(present) else np.zeros(cluster_counts.shape[1], dtype=cluster_counts.dtype)
    cis = cluster_bootstrap_many(present, {d.name: d.fn for d in defs}, n_boot=n_boot, seed=seed, confidence=confidence)
    return {d.name: MetricValue(float(d.fn(total)), cis[d.name], d.n(total), d.note(total)) for d in defs}


def _spread(values: list[float], unit: str = "prompts") -> Spread:
    """Mean and sample std over the ``unit`` (prompts, runs) where the metric has a value."""
    finite = [v for v in values if not math.isnan(v)]
    notes = []
    if len(finite) < len(values):
        notes.append(f"{len(values) - len(finite)} of {len(values)} {unit} have no value")
    if len(finite) < 2:
        notes.append(f"fewer than 2 {unit} with a value: no standard deviation")
    mean = statistics.fmean(finite) if finite else math.nan
    std = statistics.stdev(finite) if len(finite) >= 2 else math.nan
    return Spread(mean, std, len(finite), "; ".join(notes) or None)


def tables_json(tables: dict[str, Table]) -> dict[str, Any]:
    """``{group: {metric: value JSON}}``, as results.json holds metric tables."""
    return {group: {name: mv.to_json() for name, mv in table.items()} for group, table in tables.items()}


def aggregate_qa(
    cases: Sequence[Case],
    outcomes: Mapping[str, Outcome],
    *,
    metrics: Sequence[str] | None = None,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = 0,
    confidence: float = 0.95,
) -> QAMetrics:
    """Score QA cases: overall, by category, by (non-empty) label and by prompt.

    ``outcomes`` maps ``case_id`` to the case's :class:`Outcome`; a case without one, duplicate
    case ids, or an outcome inconsistent with its case raise ``ValueError`` (programming errors).
    ``metrics`` defaults to every metric in :data:`QA_METRICS`.  Intervals come from a cluster
    bootstrap over ``Case.cluster`` within each group, with a fresh ``default_rng(seed)`` per
    group (so a group's interval does not depend on which other groups exist); ``n_boot=0``
    skips it (intervals are NaN).  The result depends neither on the order of ``cases`` nor on
    that of ``outcomes``.
    """
    names = tuple(QA_METRICS) if metrics is None else tuple(metrics)
    unknown = [n for n in names if n not in QA_METRICS]
    if unknown:
        raise ValueError(f"unknown metric(s) {', '.join(map(repr, unknown))}; known: {', '.join(QA_METRICS)}")
    defs = [QA_METRICS[n] for n in names]

    n = len(cases)
    cell_idx = np.empty(n, dtype=np.int64)
    clusters: list[str] = []
    categories: list[str] = []
    labels: list[str] = []
    prompts: list[str] = []
    seen: set[str] = set()
    for i, case in enumerate(cases):
        cid = case.case_id
        if cid in seen:
            raise ValueError(f"duplicate case id {cid!r}")
        seen.add(cid)
        outcome = outcomes.get(cid)
        if outcome is None:
            raise ValueError(f"no outcome for case {cid!r}")
        if outcome.case_id != cid:
            raise ValueError(f"outcome stored under case {cid!r} is for case {outcome.case_id!r}")
        cell_idx[i] = cell(case.truth, outcome)
        clusters.append(case.cluster)
        categories.append(case.category)
        labels.append(case.label)
        prompts.append(case.prompt_id)

    cluster, cluster_names = _factorize(clusters)
    n_clusters = len(cluster_names)

    def by(values: list[str], skip_empty: bool = False) -> dict[str, Table]:
        group, group_names = _factorize(values)
        counts = _grouped_cluster_counts(group, len(group_names), cluster, n_clusters, cell_idx)
        return {g: _table(counts[i], defs, n_boot, seed, confidence) for i, g in enumerate(group_names) if not (skip_empty and g == "")}

    overall_counts = _grouped_cluster_counts(np.zeros(n, dtype=np.int64), 1, cluster, n_clusters, cell_idx)[0]
    overall = _table(overall_counts, defs, n_boot, seed, confidence)
    by_prompt = by(prompts)
    return QAMetrics(
        metrics=names,
        overall=overall,
        by_category=by(categories),
        by_label=by(labels, skip_empty=True),
        by_prompt=by_prompt,
        prompt_summary={m: _spread([t[m].value for t in by_prompt.values()]) for m in names},
        counts={"n": n, **dict(zip(COUNT_FIELDS, map(int, overall_counts.sum(axis=0))))},
        n_boot=n_boot,
        seed=seed,
        confidence=confidence,
    )
