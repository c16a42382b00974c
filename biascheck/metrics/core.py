"""Metrics in general: pure functions from count vectors to values with cluster-bootstrap
intervals. A benchmark defines its metrics as :class:`MetricDef` s over its own count vectors
(``benchmarks/<name>/metrics.py``); tables, spreads and their JSON are built here, the bootstrap in
:mod:`biascheck.metrics.bootstrap`.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from biascheck.metrics.bootstrap import cluster_bootstrap_many

Better = Literal["higher", "lower", "zero"]


def divide(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den, NaN where den == 0."""
    num, den = np.broadcast_arrays(np.asarray(num, dtype=np.float64), np.asarray(den, dtype=np.float64))
    out = np.full(num.shape, np.nan)
    np.divide(num, den, out=out, where=den > 0)
    return out


@dataclass(frozen=True, slots=True)
class MetricDef:
    """A QA metric.

    ``fn`` maps counts ``(..., K)`` to values ``(...)``.  ``better``: ``higher`` / ``lower`` is
    better, or ``zero``: smaller ``|value|`` is better.  ``denominator`` gives the count reported
    as the metric's ``n``; ``requires`` lists every denominator with the note to give when it is
    zero (the value is then NaN).  ``bound`` names the metric that bounds ``|value|``, if any.
    ``gated``: False for a metric only reported, never gated nor kept in a baseline (how answers
    were read, e.g. QA's ``acc_norm_*``: not a function of the cells a baseline keeps).
    ``limits``: the range of its values, when known.
    ``resampled``: for a metric estimated from more than the counts (BBG's judge-corrected metrics
    also rest on a calibration), its values at bootstrap sums ``(B, K)`` and a seed, row ``b`` taken
    at the ``b``-th of ``B`` draws of that other estimate from the seed. Calls with the same ``B``
    and seed make the same draws, so a paired comparison applies one draw to both sides of each
    resample (:func:`biascheck.metrics.paired.paired_bootstrap`'s ``resampled``); None: ``fn``.
    """

    name: str
    fn: Callable[[np.ndarray], np.ndarray]
    better: Better
    description: str
    suites: frozenset[str]
    denominator: Callable[[np.ndarray], np.ndarray]
    requires: tuple[tuple[Callable[[np.ndarray], np.ndarray], str], ...]
    bound: str | None = None
    gated: bool = True
    limits: tuple[float, float] | None = None  # the values the metric can take, if known
    resampled: Callable[[np.ndarray, int], np.ndarray] | None = None

    def worsening_limits(self) -> tuple[float, float] | None:
        """The values a worsening (``badness(candidate) - badness(baseline)``) can take, from
        ``limits``: a confidence bound beyond them says nothing, so bounds are clipped to them."""
        if self.limits is None:
            return None
        lo, hi = self.limits
        if self.better == "higher":
            worst, best = -lo, -hi
        elif self.better == "lower":
            worst, best = hi, lo
        else:
            worst, best = max(abs(lo), abs(hi)), (0.0 if lo <= 0 <= hi else min(abs(lo), abs(hi)))
        return best - worst, worst - best

    def __call__(self, counts: np.ndarray) -> np.ndarray:
        return self.fn(counts)

    def n(self, counts: np.ndarray) -> int:
        """The denominator count of a single count vector."""
        return int(self.denominator(np.asarray(counts)))

    def note(self, counts: np.ndarray) -> str | None:
        """Why the value of a single count vector is NaN (every empty denominator), or None."""
        c = np.asarray(counts)
        notes = [text for den, text in self.requires if float(den(c)) == 0]
        return "; ".join(notes) if notes else None


def number(x: float) -> float | None:
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
        out: dict[str, Any] = {"value": number(self.value), "ci": [number(self.ci[0]), number(self.ci[1])], "n": self.n}
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
        out: dict[str, Any] = {"mean": number(self.mean), "std": number(self.std), "n": self.n}
        if self.note is not None:
            out["note"] = self.note
        return out


Table = dict[str, MetricValue]


def factorize(values: list[str]) -> tuple[np.ndarray, list[str]]:
    """Codes into the *sorted* unique values (so results never depend on row order)."""
    uniques = sorted(set(values))
    index = {u: i for i, u in enumerate(uniques)}
    return np.fromiter((index[v] for v in values), dtype=np.int64, count=len(values)), uniques


def count_columns(index: Mapping[str, int], counts: np.ndarray, *names: str) -> np.ndarray:
    """The sum of the named fields of count vectors ``(..., K)``, as floats: a benchmark's metrics
    read their cells by name (``index``: field -> position), ``partial(count_columns, INDEX)``."""
    c = np.asarray(counts)
    out = c[..., index[names[0]]].astype(np.float64)
    for name in names[1:]:
        out = out + c[..., index[name]]
    return out


def grouped_cluster_codes(group: np.ndarray, n_groups: int, cluster: np.ndarray, n_clusters: int, codes: np.ndarray, n_codes: int) -> np.ndarray:
    """(G, T, n_codes) integer counts: the units of group g in cluster t with code k (a unit's
    one-hot cell, or an index into a table of count vectors)."""
    flat = (group * n_clusters + cluster) * n_codes + codes
    return np.bincount(flat, minlength=n_groups * n_clusters * n_codes).reshape(n_groups, n_clusters, n_codes)


def metric_table(cluster_counts: np.ndarray, defs: Sequence[MetricDef], n_boot: int, seed: int, confidence: float) -> Table:
    """Point estimates from the total and intervals from the cluster bootstrap of one group.

    Shared by every benchmark: rows are clusters' summed (non-negative) vectors; a cluster with
    nothing in this group is left out of the resampling."""
    present = cluster_counts[cluster_counts.sum(axis=1) > 0]
    total = present.sum(axis=0) if len(present) else np.zeros(cluster_counts.shape[1], dtype=cluster_counts.dtype)
    cis = cluster_bootstrap_many(present, {d.name: d.fn for d in defs}, n_boot=n_boot, seed=seed, confidence=confidence)
    return {d.name: MetricValue(float(d.fn(total)), cis[d.name], d.n(total), d.note(total)) for d in defs}


def spread(values: list[float], unit: str = "prompts") -> Spread:
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


# --- the skeleton of a benchmark's aggregate ------------------------------------------------------


def resolve_metrics(metrics: Sequence[str] | None, default: Sequence[str], known: Sequence[str]) -> tuple[str, ...]:
    """The metric names an aggregate reports: ``metrics`` (``default`` when None), each one of
    ``known``; a ``ValueError`` naming the known ones otherwise (a programming error)."""
    names = tuple(default) if metrics is None else tuple(metrics)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown metric(s) {', '.join(map(repr, unknown))}; known: {', '.join(known)}")
    return names


def check_vectors(v: np.ndarray, n: int, k: int, row: str) -> np.ndarray:
    """``v`` as an (n, k) array, one row per ``row`` (an empty input of no rows taken as one)."""
    if v.size == 0 and n == 0:
        v = v.reshape(0, k)
    if v.shape != (n, k):
        raise ValueError(f"vectors must have shape ({n}, {k}) (one row per {row}), got {v.shape}")
    return v


class Clustered:
    """What the QA, HBB and BBG aggregates share: rows (cases, instances, pairs) in clusters (the
    bootstrap's units), and a benchmark's tables of any partition of the rows into groups
    (``tables(group codes, number of groups)`` -> a :class:`Table` per group, from the rows'
    per-cluster sums in each group, :func:`metric_table`). Groups are keyed by their sorted
    names, so a table depends neither on the order of the rows nor on which other groups exist."""

    def __init__(self, clusters: list[str]):
        self.n = len(clusters)
        self.cluster, names = factorize(clusters)
        self.n_clusters = len(names)

    def whole(self) -> np.ndarray:
        """The group codes of the partition into one group (the overall table)."""
        return np.zeros(self.n, dtype=np.int64)

    def by(self, values: list[str], tables: Callable[[np.ndarray, int], list[Table]], *, skip_empty: bool = False) -> dict[str, Table]:
        """A table per distinct value of a column of the rows (category, label, prompt, run), in
        sorted order; ``skip_empty``: none for the empty value (rows without a label)."""
        group, group_names = factorize(values)
        return {g: t for g, t in zip(group_names, tables(group, len(group_names))) if not (skip_empty and g == "")}


def spreads(tables: Mapping[str, Table], names: Sequence[str], unit: str = "prompts") -> dict[str, Spread]:
    """Each metric's :func:`spread` over the tables of a partition (by prompt, by run)."""
    return {m: spread([t[m].value for t in tables.values()], unit) for m in names}
