"""Paired comparison of a candidate model with a baseline that ran the same cases.

Both models answered the same cases, grouped in the same T clusters (templates), so each side
is a per-cluster count matrix (T x K) with the same row order.  :func:`paired_bootstrap`
resamples clusters with one multinomial weight matrix ``W`` (B x T, from
:func:`~biascheck.metrics.bootstrap.resample_weights`) and applies the *same* ``W`` to both sides
(``S_base = W @ C_base``, ``S_cand = W @ C_cand``).  A template that is easy or hard, or that
pulls both models towards the biased answer, then moves both sides of a resample together and
drops out of their difference: the interval of the difference reflects only how the two models
disagree, not how much the templates vary, and is much narrower than with independent weights.
A metric that also rests on another estimate (a judge calibration) has a ``resampled`` function:
resample ``b`` of both sides is taken at the same ``b``-th draw of that estimate, so the draw's
uncertainty enters the difference as it enters each side, and identical sides differ by exactly 0.

Each metric has a direction ``better`` (``higher``, ``lower`` or ``zero``: smaller ``|value|``
is better); :func:`badness` maps a value so that larger is worse, and the *worsening*
``badness(candidate) - badness(baseline)`` is positive when the candidate is worse.

:func:`worsening_bounds` turns a worsening and its spreads (:class:`Spread`: a standard error and
the degrees of freedom of the t it is read against) into a lower and an upper bound, each at
``1 - alpha_each``; :func:`bounds_p_value` is the p of the test those bounds invert, and
:func:`detectable_worsening` how far beyond a margin a worsening must lie to be caught with a given
power. Student's t (:func:`student_t_tail`, :func:`student_t_quantile`) is computed here from the
incomplete beta function, to spare a dependency on scipy for two functions.
:func:`mcnemar_p_value` is the exact sign test on the cases that changed (McNemar's test for a
proportion).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist

import numpy as np

from biascheck.metrics.bootstrap import percentile_interval, resample_weights

__all__ = [
    "BETTER",
    "PairedDifference",
    "badness",
    "paired_bootstrap",
    "paired_case_bootstrap",
    "mcnemar_p_value",
    "student_t_tail",
    "student_t_quantile",
    "Spread",
    "WorseningBounds",
    "worsening_bounds",
    "bounds_p_value",
    "detectable_worsening",
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
    resampled: Mapping[str, Callable[[np.ndarray], np.ndarray]] | None = None,
) -> dict[str, PairedDifference]:
    """Compare each metric between two (T, K) per-cluster count matrices with the same rows.

    ``metrics`` maps name -> ``(fn, better)``, ``fn`` taking counts ``(..., K)`` to values
    ``(...)``.  All metrics share one weight matrix ``resample_weights(T, n_boot,
    default_rng(seed))``, applied to both sides, so the base side's resamples are exactly those
    of :func:`~biascheck.metrics.bootstrap.bootstrap_sums` with the same seed.  With
    ``n_boot == 0`` or no clusters the intervals and SE are NaN and ``resamples`` is 0 (point
    estimates are still computed; with no clusters they are the metric of a zero vector).
    Shapes that differ, a bad ``better``, ``confidence`` outside (0, 1) or a negative
    ``n_boot`` raise ``ValueError``. ``resampled``: for a metric listed, the function of each
    side's ``(B, K)`` resampled sums used instead of ``fn``: row ``b`` of both sides at the same
    ``b``-th draw of what else the metric rests on (``MetricDef.resampled``, at a seed).
    """
    base = _as_counts(base_counts, "base")
    cand = _as_counts(cand_counts, "cand")
    if base.shape != cand.shape:
        raise ValueError(f"base and cand count matrices differ in shape: {base.shape} vs {cand.shape}")
    _check_settings(metrics, n_boot, confidence)

    n_clusters = base.shape[0]
    sums = None
    if n_boot > 0 and n_clusters > 0:
        weights = resample_weights(n_clusters, n_boot, np.random.default_rng(seed))
        sums = (weights @ base, weights @ cand)
    return _compare_metrics(base.sum(axis=0), cand.sum(axis=0), sums, metrics, confidence, resampled)


def paired_case_bootstrap(
    joint_counts: np.ndarray,
    metrics: Mapping[str, tuple[Callable[[np.ndarray], np.ndarray], str]],
    *,
    n_boot: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
    resampled: Mapping[str, Callable[[np.ndarray], np.ndarray]] | None = None,
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
    sums = None
    if n_boot > 0 and n > 0:
        draws = np.random.default_rng(seed).multinomial(n, joint.ravel() / n, size=n_boot).reshape(n_boot, k, k)
        sums = (draws.sum(axis=2).astype(np.float64), draws.sum(axis=1).astype(np.float64))
    return _compare_metrics(joint.sum(axis=1).astype(np.float64), joint.sum(axis=0).astype(np.float64), sums, metrics, confidence, resampled)


def _compare_metrics(
    tot_base: np.ndarray,
    tot_cand: np.ndarray,
    resampled: tuple[np.ndarray, np.ndarray] | None,
    metrics: Mapping[str, tuple[Callable, str]],
    confidence: float,
    resampled_fns: Mapping[str, Callable[[np.ndarray], np.ndarray]] | None = None,
) -> dict[str, PairedDifference]:
    out: dict[str, PairedDifference] = {}
    for name, (fn, better) in metrics.items():
        b, c = _scalar(fn(tot_base), name), _scalar(fn(tot_cand), name)
        worsening = float(badness(c, better)) - float(badness(b, better))
        if resampled is not None:
            s_base, s_cand = resampled
            at = (resampled_fns or {}).get(name, fn)  # the same draws on both sides
            rb, rc = _resampled(at, s_base, name), _resampled(at, s_cand, name)
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


# --- Student's t, for bounds from few clusters --------------------------------------------------

_CF_TINY = 1e-300
# Beyond this many degrees of freedom t is the normal to ~1e-6, and lgamma's rounding (its values
# grow as df log df) would cost more than that.
_NORMAL_DF = 1e6


def _betainc_continued_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularized incomplete beta I_x(a, b), by the modified Lentz
    method; it converges fast for ``x < (a + 1) / (a + b + 2)``."""
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > _CF_TINY else _CF_TINY)
    value = d
    for m in range(1, 10_000):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > _CF_TINY else _CF_TINY)
            c = 1.0 + numerator / c
            c = c if abs(c) > _CF_TINY else _CF_TINY
            value *= c * d
        if abs(c * d - 1.0) < 1e-15:
            break
    return value


def _betainc(a: float, b: float, x: float, y: float) -> float:
    """The regularized incomplete beta function I_x(a, b) for a, b > 0 and 0 <= x <= 1, given
    ``y = 1 - x`` computed without cancellation (for t near 0, x rounds to 1 but y does not)."""
    if x <= 0.0:
        return 0.0
    if y <= 0.0:
        return 1.0
    log_front = a * math.log(x) + b * math.log(y) - (math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b))
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _betainc_continued_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _betainc_continued_fraction(b, a, y) / b


def student_t_tail(t: float, df: float) -> float:
    """P(T > t) for Student's t with ``df`` > 0 degrees of freedom (``df`` inf: the normal tail).

    Computed as ``I_{df/(df+t^2)}(df/2, 1/2) / 2`` with the incomplete beta's continued fraction,
    accurate in the far tail where ``1 - cdf`` would cancel; above 1e6 degrees of freedom, the
    normal tail. NaN ``t`` gives NaN.
    """
    t, df = float(t), float(df)
    if not df > 0:
        raise ValueError(f"df must be > 0, got {df!r}")
    if math.isnan(t):
        return math.nan
    if df > _NORMAL_DF:
        return _upper_normal_tail(t)
    if math.isinf(t):
        return 0.0 if t > 0 else 1.0
    tail = 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t), t * t / (df + t * t))
    return tail if t >= 0 else 1.0 - tail


def student_t_quantile(q: float, df: float) -> float:
    """The ``q`` quantile of Student's t with ``df`` > 0 degrees of freedom (inf: the normal's).

    Found by bisection on :func:`student_t_tail` to about 1e-12 relative; ``q`` outside (0, 1)
    raises ``ValueError``.
    """
    q, df = float(q), float(df)
    if not 0 < q < 1:
        raise ValueError(f"q must be in (0, 1), got {q!r}")
    if not df > 0:
        raise ValueError(f"df must be > 0, got {df!r}")
    return _t_quantile(q, df)


@lru_cache(maxsize=4096)
def _t_quantile(q: float, df: float) -> float:
    if df > _NORMAL_DF:
        return NormalDist().inv_cdf(q)
    if q < 0.5:
        return -_t_quantile(1.0 - q, df)
    tail = 1.0 - q
    lo, hi = 0.0, max(1.0, NormalDist().inv_cdf(q))
    while student_t_tail(hi, df) > tail:
        lo, hi = hi, 2.0 * hi
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if student_t_tail(mid, df) > tail:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * hi:
            break
    return 0.5 * (lo + hi)


# --- simultaneous bounds of a worsening ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Spread:
    """One estimate of a worsening's sampling spread: its standard error and the degrees of
    freedom of the t it is read against (``math.inf``: the normal). ``source`` says what was
    resampled: ``templates`` (clusters) or ``cases``."""

    source: str
    se: float
    df: float


@dataclass(frozen=True, slots=True)
class WorseningBounds:
    """A lower and an upper confidence bound of a worsening, each holding with probability at least
    ``1 - alpha_each``; ``spread`` is the one that set their distance from the estimate (None when
    no spread was known and the bounds are NaN), ``quantile`` its t quantile, and ``floored`` the
    bounds an exact sign test moved to 0 (it could not show the change in that direction)."""

    lower: float
    upper: float
    spread: Spread | None
    quantile: float
    floored: tuple[str, ...]


def _usable(spreads: Sequence[Spread]) -> list[Spread]:
    return [s for s in spreads if not math.isnan(s.se) and s.df > 0]


def worsening_bounds(
    worsening: float,
    spreads: Sequence[Spread],
    *,
    alpha_each: float,
    sign_p_worse: float | None = None,
    sign_p_better: float | None = None,
    limits: tuple[float, float] | None = None,
) -> WorseningBounds:
    """Bounds ``worsening -/+ q * se`` with ``q`` the ``1 - alpha_each`` quantile of each spread's
    t, from the spread that gives the widest: no estimate of the spread may make the comparison
    surer than another allows. With Bonferroni's ``alpha_each = alpha / m`` over m checks, each
    kind of bound holds for all checks at once with probability ``1 - alpha``.

    A sign test's p (``sign_p_worse``: "no case changed for the worse more often than for the
    better") of at least ``alpha_each`` keeps the lower bound at or below 0, and likewise the upper
    bound with ``sign_p_better``: with few changed cases the bootstrap's normal tail is too thin,
    and the exact test is the one that holds there. A test that rejects "worsening <= d" for d >= 0
    only when both reject keeps its level, and these bounds are exactly the values it does not reject.
    ``limits``, the values the worsening can take, clip the bounds (a bound beyond them says nothing).
    """
    if not 0 < alpha_each < 1:
        raise ValueError(f"alpha_each must be in (0, 1), got {alpha_each!r}")
    usable = _usable(spreads)
    if math.isnan(worsening) or not usable:
        return WorseningBounds(math.nan, math.nan, None, math.nan, ())
    widths = [(student_t_quantile(1.0 - alpha_each, s.df) * s.se, s) for s in usable]
    width, spread = max(widths, key=lambda ws: ws[0])
    lower, upper = worsening - width, worsening + width
    floored = []
    if sign_p_worse is not None and sign_p_worse >= alpha_each and lower > 0:
        lower = 0.0
        floored.append("lower")
    if sign_p_better is not None and sign_p_better >= alpha_each and upper < 0:
        upper = 0.0
        floored.append("upper")
    if limits is not None:
        lower, upper = max(lower, limits[0]), min(upper, limits[1])
    return WorseningBounds(lower, upper, spread, student_t_quantile(1.0 - alpha_each, spread.df), tuple(floored))


def bounds_p_value(worsening: float, margin: float, spreads: Sequence[Spread], *, sign_p_worse: float | None = None) -> float:
    """One-sided p for "worsening <= margin" by the test :func:`worsening_bounds` inverts: the
    largest of each spread's t tail and (for a margin >= 0) the sign test's p. So the lower bound
    at ``alpha_each`` exceeds the margin exactly when this p is below ``alpha_each``. NaN when no
    spread is known; a spread of 0 gives 0 or 1."""
    usable = _usable(spreads)
    if math.isnan(worsening) or math.isnan(margin) or not usable:
        return math.nan
    p = 0.0
    for s in usable:
        if s.se == 0:
            tail = 0.0 if worsening > margin else 1.0
        else:
            tail = student_t_tail((worsening - margin) / s.se, s.df)
        p = max(p, tail)
    if sign_p_worse is not None and margin >= 0:
        p = max(p, sign_p_worse)
    return p


def detectable_worsening(spreads: Sequence[Spread], *, alpha_each: float, power: float) -> float:
    """How far beyond its margin a true worsening must lie to be called with probability ``power``:
    ``(q_{1-alpha_each} + q_{power}) * se`` on each spread's t, the largest. NaN with no spread."""
    if not 0 < power < 1:
        raise ValueError(f"power must be in (0, 1), got {power!r}")
    usable = _usable(spreads)
    if not usable:
        return math.nan
    return max((student_t_quantile(1.0 - alpha_each, s.df) + student_t_quantile(power, s.df)) * s.se for s in usable)
