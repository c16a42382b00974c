"""Paired comparison of a candidate model with a baseline that ran the same cases.

Both models answered the same cases, grouped in the same T clusters (templates), so each side
is a per-cluster count matrix (T x K) with the same row order.  :func:`paired_bootstrap`
resamples clusters with one multinomial weight matrix ``W`` (B x T, from
:func:`~biascheck.metrics.bootstrap.resample_weights`) and applies the *same* ``W`` to both sides
(``S_base = W @ C_base``, ``S_cand = W @ C_cand``).  A template that is easy or hard, or that
pulls both models towards the biased answer, then moves both sides of a resample together and
drops out of their difference: the interval of the difference reflects only how the two models
disagree, not how much the templates vary, and is much narrower than with independent weights.

Each metric has a direction ``better`` (``higher``, ``lower`` or ``zero``: smaller ``|value|``
is better); :func:`badness` maps a value so that larger is worse, and the *worsening*
``badness(candidate) - badness(baseline)`` is positive when the candidate is worse.

:func:`worsening_p_value` tests "worsening <= margin" with a normal approximation using the
bootstrap standard error rather than the share of resamples beyond the margin: a percentile
p-value cannot go below ``1/(B+1)``, too coarse to survive a Holm correction (:func:`holm`) over a
family of ~50 metric-by-group tests, whereas the normal tail is continuous.
:func:`mcnemar_p_value` is the exact test for a single case-level binary outcome (discordant
pairs), and :func:`minimum_detectable_effect` says what a given SE can detect.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from biascheck.metrics.bootstrap import percentile_interval, resample_weights

__all__ = [
    "BETTER",
    "PairedDifference",
    "badness",
    "paired_bootstrap",
    "paired_case_bootstrap",
    "worsening_p_value",
    "mcnemar_p_value",
    "holm",
    "minimum_detectable_effect",
]

BETTER = ("higher", "lower", "zero")
_NAN_INTERVAL = (math.nan, math.nan)
# Up to this many discordant pairs the McNemar tail is an exact integer sum (correctly rounded).
_EXACT_MAX_N = 2000


@dataclass(frozen=True, slots=True)
class PairedDifference:
    """One metric compared between baseline and candidate on the same clusters.

    ``baseline`` / ``candidate`` are the metric on each side's total counts; ``difference`` is
    ``candidate - baseline`` and ``worsening`` is ``badness(candidate) - badness(baseline)``
    (positive = candidate worse).  The intervals are percentile intervals of the paired
    resamples; ``worsening_se`` is the sample std (ddof=1) of the ``resamples`` non-NaN
    resampled worsenings (NaN with fewer than 2).
    """

    baseline: float
    candidate: float
    difference: float
    difference_ci: tuple[float, float]
    worsening: float
    worsening_ci: tuple[float, float]
    worsening_se: float
    resamples: int


def _check_better(better: str) -> None:
    if better not in BETTER:
        raise ValueError(f"better must be one of {', '.join(BETTER)}, got {better!r}")


def badness(values: np.ndarray | float, better: str) -> np.ndarray | float:
    """Map metric values so that larger is worse: ``-v`` (higher), ``v`` (lower), ``|v|`` (zero).

    A scalar gives a float, an array an array of the same shape; NaN stays NaN.
    """
    _check_better(better)
    v = np.asarray(values, dtype=np.float64)
    out = -v if better == "higher" else (v if better == "lower" else np.abs(v))
    return float(out) if out.ndim == 0 else out


def _as_counts(counts, side: str) -> np.ndarray:
    c = np.asarray(counts, dtype=np.float64)
    if c.ndim != 2:
        raise ValueError(f"{side}_counts must be a (T, K) matrix, got shape {c.shape}")
    return c


def _scalar(value, name: str) -> float:
    v = np.asarray(value, dtype=np.float64)
    if v.size != 1:
        raise ValueError(f"metric {name!r} returned shape {v.shape} for one count vector, expected a scalar")
    return float(v.reshape(()))


def _resampled(fn: Callable, sums: np.ndarray, name: str) -> np.ndarray:
    v = np.asarray(fn(sums), dtype=np.float64)
    if v.shape != sums.shape[:1]:
        raise ValueError(f"metric {name!r} returned shape {v.shape} for {sums.shape[0]} resamples")
    return v


def _check_settings(metrics: Mapping[str, tuple[Callable, str]], n_boot: int, confidence: float) -> None:
    if n_boot < 0:
        raise ValueError(f"n_boot must be >= 0, got {n_boot!r}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    for _, better in metrics.values():
        _check_better(better)


def paired_bootstrap(
    base_counts: np.ndarray,
    cand_counts: np.ndarray,
    metrics: Mapping[str, tuple[Callable[[np.ndarray], np.ndarray], str]],
    *,
    n_boot: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, PairedDifference]:
    """Compare each metric between two (T, K) per-cluster count matrices with the same rows.

    ``metrics`` maps name -> ``(fn, better)``, ``fn`` taking counts ``(..., K)`` to values
    ``(...)``.  All metrics share one weight matrix ``resample_weights(T, n_boot,
    default_rng(seed))``, applied to both sides, so the base side's resamples are exactly those
    of :func:`~biascheck.metrics.bootstrap.bootstrap_sums` with the same seed.  With
    ``n_boot == 0`` or no clusters the intervals and SE are NaN and ``resamples`` is 0 (point
    estimates are still computed; with no clusters they are the metric of a zero vector).
    Shapes that differ, a bad ``better``, ``confidence`` outside (0, 1) or a negative
    ``n_boot`` raise ``ValueError``.
    """
    base = _as_counts(base_counts, "base")
    cand = _as_counts(cand_counts, "cand")
    if base.shape != cand.shape:
        raise ValueError(f"base and cand count matrices differ in shape: {base.shape} vs {cand.shape}")
    _check_settings(metrics, n_boot, confidence)

    n_clusters = base.shape[0]
    resampled = None
    if n_boot > 0 and n_clusters > 0:
        weights = resample_weights(n_clusters, n_boot, np.random.default_rng(seed))
        resampled = (weights @ base, weights @ cand)
    return _compare_metrics(base.sum(axis=0), cand.sum(axis=0), resampled, metrics, confidence)


def paired_case_bootstrap(
    joint_counts: np.ndarray,
    metrics: Mapping[str, tuple[Callable[[np.ndarray], np.ndarray], str]],
    *,
    n_boot: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, PairedDifference]:
    """Like :func:`paired_bootstrap`, resampling *cases* independently instead of clusters.

    ``joint_counts[i, j]`` counts the cases in cell ``i`` for the baseline and ``j`` for the
    candidate (K x K). Resampling n cases with replacement is a multinomial draw over the K*K
    joint cells, so this costs O(B K^2) however many cases there are. With few templates a
    cluster bootstrap underestimates the spread (two templates give three distinct resamples);
    this gives the spread independent cases would have, the floor a comparison should not go below.
    """
    joint = np.asarray(joint_counts, dtype=np.int64)
    if joint.ndim != 2 or joint.shape[0] != joint.shape[1]:
        raise ValueError(f"joint_counts must be a square (K, K) matrix, got shape {joint.shape}")
    _check_settings(metrics, n_boot, confidence)
    k, n = joint.shape[0], int(joint.sum())
    resampled = None
    if n_boot > 0 and n > 0:
        draws = np.random.default_rng(seed).multinomial(n, joint.ravel() / n, size=n_boot).reshape(n_boot, k, k)
        resampled = (draws.sum(axis=2).astype(np.float64), draws.sum(axis=1).astype(np.float64))
    return _compare_metrics(joint.sum(axis=1).astype(np.float64), joint.sum(axis=0).astype(np.float64), resampled, metrics, confidence)


def _compare_metrics(
    tot_base: np.ndarray,
    tot_cand: np.ndarray,
    resampled: tuple[np.ndarray, np.ndarray] | None,
    metrics: Mapping[str, tuple[Callable, str]],
    confidence: float,
) -> dict[str, PairedDifference]:
    out: dict[str, PairedDifference] = {}
    for name, (fn, better) in metrics.items():
        b, c = _scalar(fn(tot_base), name), _scalar(fn(tot_cand), name)
        worsening = float(badness(c, better)) - float(badness(b, better))
        if resampled is not None:
            s_base, s_cand = resampled
            rb, rc = _resampled(fn, s_base, name), _resampled(fn, s_cand, name)
            diffs = rc - rb
            worse = np.asarray(badness(rc, better)) - np.asarray(badness(rb, better))
            finite = worse[~np.isnan(worse)]
            se = float(np.std(finite, ddof=1)) if finite.size >= 2 else math.nan
            out[name] = PairedDifference(
                b,
                c,
                c - b,
                percentile_interval(diffs, confidence),
                worsening,
                percentile_interval(worse, confidence),
                se,
                int(finite.size),
            )
        else:
            out[name] = PairedDifference(b, c, c - b, _NAN_INTERVAL, worsening, _NAN_INTERVAL, math.nan, 0)
    return out


def _upper_normal_tail(z: float) -> float:
    """1 - Phi(z), accurate far into the upper tail (``1 - NormalDist().cdf(z)`` is 0 for z > 8.3)."""
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def worsening_p_value(worsening: float, se: float, margin: float) -> float:
    """One-sided p-value for H0 "true worsening <= margin": ``1 - Phi((worsening - margin) / se)``.

    A NaN worsening gives 1.0 (no evidence).  With ``se`` 0 or NaN the test is degenerate: 0.0
    if ``worsening > margin`` else 1.0.  A NaN margin or negative ``se`` raise ``ValueError``.
    """
    worsening, se, margin = float(worsening), float(se), float(margin)
    if math.isnan(margin):
        raise ValueError("margin must not be NaN")
    if se < 0:
        raise ValueError(f"se must be >= 0, got {se!r}")
    if math.isnan(worsening):
        return 1.0
    if math.isnan(se) or se == 0:
        return 0.0 if worsening > margin else 1.0
    z = (worsening - margin) / se
    if math.isnan(z):  # inf - inf or inf / inf: no usable evidence
        return 1.0
    return min(1.0, max(0.0, _upper_normal_tail(z)))


def _binom_half_upper_tail_exact(m: int, n: int) -> float:
    """P(X >= m), X ~ Binomial(n, 1/2), as a correctly rounded exact rational."""
    if m <= 0:
        return 1.0
    if m > n:
        return 0.0
    term, total = math.comb(n, m), 0
    for k in range(m, n + 1):
        total += term
        term = term * (n - k) // (k + 1)  # exact: C(n, k+1) = C(n, k) (n - k) / (k + 1)
    return total / (1 << n)  # int / int is correctly rounded


def _binom_half_upper_tail_log(m: int, n: int) -> float:
    """P(X >= m), X ~ Binomial(n, 1/2), in log space (no overflow for any n).

    For ``m > n/2`` the terms from ``m`` up shrink (ratio ``(n-k)/(k+1) < 1``), so the sum is
    taken relative to the first term, whose log comes from ``lgamma``, and stops once the
    geometric bound on the rest is negligible.  Otherwise use the complement, by symmetry
    ``P(X <= m-1) = P(X >= n-m+1)``.  Relative error ~1e-16 * lgamma(n) (about 1e-9 at n = 1e6).
    """
    if m <= 0:
        return 1.0
    if m > n:
        return 0.0
    if 2 * m <= n:
        return 1.0 - _binom_half_upper_tail_log(n - m + 1, n)
    log_first = math.lgamma(n + 1) - math.lgamma(m + 1) - math.lgamma(n - m + 1) - n * math.log(2.0)
    total, term = 1.0, 1.0
    for k in range(m, n):
        ratio = (n - k) / (k + 1)
        term *= ratio
        total += term
        if term * ratio / (1.0 - ratio) < 1e-17 * total:  # bound on all later terms
            break
    return min(1.0, math.exp(log_first + math.log(total)))


def mcnemar_p_value(worse: int, better: int) -> float:
    """Exact one-sided McNemar test on discordant pairs: P(X >= worse), X ~ Bin(worse + better, 1/2).

    ``worse`` counts cases that changed in the bad direction, ``better`` those that changed in the
    good direction.  No discordant pairs give 1.0.  Exact integer arithmetic up to 2000 pairs,
    log space above (no overflow).  Negative counts raise ``ValueError``.
    """
    worse, better = operator.index(worse), operator.index(better)
    if worse < 0 or better < 0:
        raise ValueError(f"counts must be >= 0, got worse={worse}, better={better}")
    n = worse + better
    if n == 0:
        return 1.0
    if n <= _EXACT_MAX_N:
        return _binom_half_upper_tail_exact(worse, n)
    return _binom_half_upper_tail_log(worse, n)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values, in input order (reject H_i at level alpha iff adj_i < alpha).

    With the p's sorted ascending, ``adj_(i) = max_{j<=i} min(1, (m - j) p_(j))`` (0-based j).  NaN
    counts as 1.0; a p outside [0, 1] raises ``ValueError``.  Tied p's get equal adjusted values,
    so the result does not depend on the order of the input beyond permuting along with it.
    """
    ps = [1.0 if math.isnan(float(p)) else float(p) for p in p_values]
    for p in ps:
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"p-values must be in [0, 1], got {p!r}")
    m = len(ps)
    order = sorted(range(m), key=ps.__getitem__)
    adjusted = [0.0] * m
    running = 0.0
    for j, i in enumerate(order):
        running = max(running, min(1.0, (m - j) * ps[i]))
        adjusted[i] = running
    return adjusted


def minimum_detectable_effect(se: float, *, alpha: float, power: float = 0.8) -> float:
    """``(z_{1-alpha} + z_power) * se``: the smallest true excess over the margin that the
    one-sided level-``alpha`` test of :func:`worsening_p_value` detects with probability ``power``.

    NaN ``se`` gives NaN; ``alpha`` / ``power`` outside (0, 1) or a negative ``se`` raise ``ValueError``.
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    if not 0 < power < 1:
        raise ValueError(f"power must be in (0, 1), got {power!r}")
    se = float(se)
    if math.isnan(se):
        return math.nan
    if se < 0:
        raise ValueError(f"se must be >= 0, got {se!r}")
    z = NormalDist()
    return (z.inv_cdf(1.0 - alpha) + z.inv_cdf(power)) * se
