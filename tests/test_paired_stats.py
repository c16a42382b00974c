"""Tests of the paired baseline-vs-candidate statistics (biascheck.metrics.paired)."""

from __future__ import annotations

import math
from fractions import Fraction
from statistics import NormalDist

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from property_examples import examples

from biascheck.benchmarks.qa.metrics import QA_METRICS, K
from biascheck.metrics.bootstrap import cluster_bootstrap, percentile_interval, resample_weights
from biascheck.metrics.paired import (
    PairedDifference,
    Spread,
    _binom_half_upper_tail_exact,
    _binom_half_upper_tail_log,
    badness,
    bounds_p_value,
    detectable_worsening,
    mcnemar_p_value,
    paired_bootstrap,
    student_t_quantile,
    student_t_tail,
    worsening_bounds,
)

NAN = float("nan")


# ---------------------------------------------------------------------------------------------
# Helpers


def share(counts):
    """c0 / (c0 + c1), NaN on an empty denominator: a metric in [0, 1]."""
    c = np.asarray(counts, dtype=np.float64)
    num, den = c[..., 0], c[..., 0] + c[..., 1]
    out = np.full(num.shape, np.nan)
    np.divide(num, den, out=out, where=den > 0)
    return out


def balance(counts):
    """(c0 - c1) / (c0 + c1), NaN on an empty denominator: a signed metric in [-1, 1]."""
    c = np.asarray(counts, dtype=np.float64)
    num, den = c[..., 0] - c[..., 1], c[..., 0] + c[..., 1]
    out = np.full(num.shape, np.nan)
    np.divide(num, den, out=out, where=den > 0)
    return out


THREE = {"hi": (share, "higher"), "lo": (share, "lower"), "zero": (balance, "zero")}


def same(a: float, b: float, tol: float = 1e-12) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, abs=tol)


def negated(ci: tuple[float, float]) -> tuple[float, float]:
    return (-ci[1], -ci[0])


def same_ci(a, b, tol: float = 1e-9) -> bool:
    return same(a[0], b[0], tol) and same(a[1], b[1], tol)


def exact_tail(worse: int, better: int) -> Fraction:
    n = worse + better
    return Fraction(sum(math.comb(n, k) for k in range(worse, n + 1)), 2**n)


def matrix(n_rows: int, n_cols: int = 2, lo: int = 0, hi: int = 4):
    row = st.lists(st.integers(lo, hi), min_size=n_cols, max_size=n_cols)
    return st.lists(row, min_size=n_rows, max_size=n_rows).map(lambda rows: np.array(rows, dtype=np.int64))


matrix_pairs = st.integers(1, 6).flatmap(lambda t: st.tuples(matrix(t), matrix(t)))
# every cluster has a positive denominator, so no resample is NaN
positive_matrices = st.integers(1, 6).flatmap(lambda t: matrix(t, lo=1))


# ---------------------------------------------------------------------------------------------
# mcnemar_p_value


@pytest.mark.parametrize(
    ("worse", "better", "expected"),
    [
        (5, 0, 1 / 32),
        (10, 2, 79 / 4096),  # (C(12,10) + C(12,11) + C(12,12)) / 2**12 = (66 + 12 + 1) / 4096
        (0, 0, 1.0),
        (0, 5, 1.0),
        (1, 0, 0.5),
        (1, 1, 0.75),
        (2, 0, 0.25),
        (3, 3, 42 / 64),  # (20 + 15 + 6 + 1) / 64
    ],
)
def test_mcnemar_golden(worse, better, expected):
    assert mcnemar_p_value(worse, better) == expected


def test_mcnemar_large_n_matches_exact_fraction():
    expected = float(exact_tail(600, 400))
    assert mcnemar_p_value(600, 400) == expected  # exact path: correctly rounded
    assert _binom_half_upper_tail_log(600, 1000) == pytest.approx(expected, rel=1e-11, abs=0)
    assert expected == pytest.approx(1.36423207803300921e-10, rel=1e-15, abs=0)  # mpmath, 50 digits


@settings(deadline=None, max_examples=examples(100))
@given(st.integers(0, 300), st.integers(0, 300))
def test_mcnemar_exact_and_log_space_agree(worse, better):
    expected = exact_tail(worse, better)
    assert mcnemar_p_value(worse, better) == float(expected)
    n = worse + better
    if n:
        assert _binom_half_upper_tail_exact(worse, n) == float(expected)
        assert _binom_half_upper_tail_log(worse, n) == pytest.approx(float(expected), rel=1e-11, abs=0)


@pytest.mark.parametrize(("worse", "better"), [(1100, 900), (1001, 999), (1000, 1000), (1300, 700), (2000, 0)])
def test_mcnemar_log_space_agrees_at_the_exact_threshold(worse, better):
    assert _binom_half_upper_tail_log(worse, worse + better) == pytest.approx(float(exact_tail(worse, better)), rel=1e-11, abs=0)


@pytest.mark.parametrize(
    ("worse", "better", "expected"),
    [
        (510000, 490000, 2.772181643849612302e-89),  # mpmath, 50 digits
        (501000, 499000, 0.02280414993269104321),
        # P(X >= n/2) = 1/2 + P(X = n/2) / 2 and P(X = n/2) ~ sqrt(2 / (pi n)) (1 - 1/(4n))
        (500000, 500000, 0.5 + 0.5 * math.sqrt(2 / (math.pi * 1e6)) * (1 - 1 / 4e6)),
    ],
)
def test_mcnemar_huge_n_no_overflow(worse, better, expected):
    p = mcnemar_p_value(worse, better)
    assert p == pytest.approx(expected, rel=1e-8, abs=0)


def test_mcnemar_extremes_of_huge_n():
    assert mcnemar_p_value(10**6, 0) == 0.0  # 2**-1e6 underflows, not an OverflowError
    assert mcnemar_p_value(0, 10**6) == 1.0
    assert 0.0 < mcnemar_p_value(502000, 498000) < mcnemar_p_value(501000, 499000) < 0.5


@settings(deadline=None, max_examples=examples(60))
@given(st.integers(0, 3000), st.integers(0, 3000))
def test_mcnemar_monotone(worse, better):
    p = mcnemar_p_value(worse, better)
    assert 0.0 <= p <= 1.0
    assert mcnemar_p_value(worse + 1, better) <= p  # more bad changes: more evidence
    assert mcnemar_p_value(worse, better + 1) >= p


def test_mcnemar_rejects_bad_counts():
    with pytest.raises(ValueError):
        mcnemar_p_value(-1, 3)
    with pytest.raises(TypeError):
        mcnemar_p_value(2.5, 3)


# ---------------------------------------------------------------------------------------------
# Student's t


@pytest.mark.parametrize(
    ("q", "df", "expected"),
    [  # printed t tables (e.g. Abramowitz & Stegun table 26.10), to their digits
        (0.975, 1, 12.7062047362),
        (0.975, 2, 4.30265272975),
        (0.975, 10, 2.22813885196),
        (0.995, 5, 4.03214298356),
        (0.999, 30, 3.38518486683),
        (0.95, 120, 1.65765089935),
        (0.9995, 3, 12.924),  # printed to three decimals
    ],
)
def test_student_t_quantile_golden(q, df, expected):
    digits = len(str(expected).split(".")[1])
    tolerance = max(0.5 * 10**-digits, 1e-9 * expected)  # the table's last digit, or 1e-9 relative
    assert student_t_quantile(q, df) == pytest.approx(expected, abs=tolerance)
    assert student_t_quantile(1 - q, df) == pytest.approx(-expected, abs=tolerance)


@settings(deadline=None, max_examples=examples(200))
@given(st.floats(-50, 50, allow_nan=False))
def test_student_t_tail_closed_forms(t):
    # One degree of freedom is Cauchy's; two have an algebraic tail.
    assert student_t_tail(t, 1) == pytest.approx(0.5 - math.atan(t) / math.pi, rel=1e-10, abs=1e-15)
    assert student_t_tail(t, 2) == pytest.approx(0.5 * (1 - t / math.sqrt(2 + t * t)), rel=1e-10, abs=1e-15)


@settings(deadline=None, max_examples=examples(200))
@given(st.floats(-30, 30, allow_nan=False), st.integers(1, 5000), st.floats(1e-6, 1 - 1e-6))
def test_student_t_properties(t, df, q):
    tail = student_t_tail(t, df)
    assert 0.0 <= tail <= 1.0
    assert tail + student_t_tail(-t, df) == pytest.approx(1.0, abs=1e-12)  # symmetric
    assert student_t_tail(t, df) >= student_t_tail(t, df + 1) - 1e-15 if t > 0 else True  # heavier tails with fewer df
    assert student_t_tail(student_t_quantile(q, df), df) == pytest.approx(1 - q, rel=1e-8, abs=1e-13)  # the inverse
    assert abs(student_t_quantile(q, df)) >= abs(NormalDist().inv_cdf(q)) - 1e-9  # never thinner than the normal


def test_student_t_limits_and_bad_arguments():
    assert student_t_quantile(0.975, math.inf) == NormalDist().inv_cdf(0.975)
    assert student_t_quantile(0.975, 1e5) == pytest.approx(NormalDist().inv_cdf(0.975), rel=1e-4)
    assert student_t_tail(10.0, math.inf) == pytest.approx(7.619853024160526e-24, rel=1e-12)  # the normal's far tail
    assert student_t_tail(math.inf, 3) == 0.0 and student_t_tail(-math.inf, 3) == 1.0
    assert math.isnan(student_t_tail(NAN, 3))
    for bad in ((0.5, 0), (0.5, -1), (0.0, 3), (1.0, 3)):
        with pytest.raises(ValueError):
            student_t_quantile(*bad)
    with pytest.raises(ValueError):
        student_t_tail(1.0, 0)


# ---------------------------------------------------------------------------------------------
# worsening_bounds, bounds_p_value, detectable_worsening

CASES = Spread("cases", 0.1, math.inf)


def test_worsening_bounds_golden():
    b = worsening_bounds(0.3, [CASES], alpha_each=0.025)
    assert (b.lower, b.upper) == pytest.approx((0.3 - 0.1959963985, 0.3 + 0.1959963985), rel=1e-9)
    assert b.spread == CASES and b.floored == ()
    # The widest spread sets the bounds: 3 templates (t with 2 df) beat the cases' normal.
    templates = Spread("templates", 0.08, 2)
    b = worsening_bounds(0.3, [templates, CASES], alpha_each=0.025)
    assert b.spread == templates and b.upper - 0.3 == pytest.approx(4.30265272975 * 0.08, rel=1e-9)
    # Unknown spreads are skipped; none known gives NaN bounds.
    assert worsening_bounds(0.3, [Spread("templates", NAN, 2), CASES], alpha_each=0.025).spread == CASES
    assert math.isnan(worsening_bounds(0.3, [], alpha_each=0.025).lower)
    assert math.isnan(worsening_bounds(NAN, [CASES], alpha_each=0.025).upper)
    with pytest.raises(ValueError):
        worsening_bounds(0.3, [CASES], alpha_each=0.0)


def test_a_sign_test_that_shows_nothing_keeps_the_bound_at_zero():
    # 5 of 5 changed cases worse: the exact sign test's p is 1/32, not below 0.001.
    b = worsening_bounds(0.2, [Spread("cases", 0.02, math.inf)], alpha_each=0.001, sign_p_worse=1 / 32, sign_p_better=1.0)
    assert b.lower == 0.0 and b.upper > 0.2 and b.floored == ("lower",)
    assert bounds_p_value(0.2, 0.0, [Spread("cases", 0.02, math.inf)], sign_p_worse=1 / 32) == 1 / 32
    # Enough of them (2^-12 < 0.001) and the bootstrap's bound stands.
    b = worsening_bounds(0.2, [Spread("cases", 0.02, math.inf)], alpha_each=0.001, sign_p_worse=2**-12)
    assert b.lower > 0.1 and b.floored == ()
    b = worsening_bounds(-0.2, [Spread("cases", 0.02, math.inf)], alpha_each=0.001, sign_p_worse=1.0, sign_p_better=1 / 32)
    assert b.upper == 0.0 and b.floored == ("upper",)


spreads_strategy = st.lists(
    st.builds(Spread, st.sampled_from(["templates", "cases"]), st.floats(0, 1, allow_nan=False), st.sampled_from([1, 2, 5, 30, math.inf])),
    min_size=1,
    max_size=3,
)


@settings(deadline=None, max_examples=examples(300))
@given(
    st.floats(-1, 1, allow_nan=False),
    st.floats(0, 0.5, allow_nan=False),
    spreads_strategy,
    st.floats(1e-5, 0.2),
    st.none() | st.floats(0, 1, allow_nan=False),
)
def test_the_bounds_and_the_p_value_decide_alike(worsening, margin, spreads, alpha_each, sign_p):
    """The lower bound lies beyond the margin exactly when the test's p is below the level, so a
    verdict read off the printed bounds is the test's verdict."""
    b = worsening_bounds(worsening, spreads, alpha_each=alpha_each, sign_p_worse=sign_p)
    p = bounds_p_value(worsening, margin, spreads, sign_p_worse=sign_p)
    assert b.lower <= worsening <= b.upper
    if abs(b.lower - margin) > 1e-9 * max(1.0, abs(margin)):  # off the boundary itself
        assert (b.lower > margin) == (p < alpha_each), (b, p)


def test_t_bounds_from_few_clusters_hold_their_level():
    """Cluster means drawn from a normal: bounds from 3 clusters on t with 2 df exclude the truth
    about as often as they promise; on the normal they would miss far more often."""
    rng = np.random.default_rng(11)
    draws = rng.normal(0.0, 1.0, size=(20000, 3))
    means, ses = draws.mean(axis=1), draws.std(axis=1, ddof=1) / math.sqrt(3)
    alpha = 0.05
    t_miss = np.mean([worsening_bounds(m, [Spread("templates", s, 2)], alpha_each=alpha).lower > 0 for m, s in zip(means, ses)])
    z_miss = np.mean([worsening_bounds(m, [Spread("cases", s, math.inf)], alpha_each=alpha).lower > 0 for m, s in zip(means, ses)])
    assert t_miss == pytest.approx(alpha, abs=0.006)
    assert z_miss > 2 * alpha


def test_detectable_worsening_has_the_stated_power():
    # An estimate ~ N(margin + detectable, se) has its lower bound beyond the margin w.p. power.
    se, alpha, margin, power = 0.02, 0.01, 0.05, 0.8
    spread = Spread("cases", se, math.inf)
    detectable = detectable_worsening([spread], alpha_each=alpha, power=power)
    assert detectable == pytest.approx((NormalDist().inv_cdf(1 - alpha) + NormalDist().inv_cdf(power)) * se, rel=1e-12)
    draws = np.random.default_rng(7).normal(margin + detectable, se, size=20000)
    caught = np.mean([worsening_bounds(w, [spread], alpha_each=alpha).lower > margin for w in draws])
    assert caught == pytest.approx(power, abs=0.015)
    assert math.isnan(detectable_worsening([], alpha_each=alpha, power=power))
    with pytest.raises(ValueError):
        detectable_worsening([spread], alpha_each=alpha, power=1.0)


# ---------------------------------------------------------------------------------------------
# badness


def test_badness():
    assert badness(0.3, "higher") == -0.3
    assert badness(0.3, "lower") == 0.3
    assert badness(-0.3, "zero") == 0.3
    assert isinstance(badness(0.3, "lower"), float)
    assert math.isnan(badness(NAN, "zero"))
    v = np.array([-0.5, 0.0, 0.25, np.nan])
    np.testing.assert_array_equal(badness(v, "higher"), [0.5, 0.0, -0.25, np.nan])
    np.testing.assert_array_equal(badness(v, "lower"), v)
    np.testing.assert_array_equal(badness(v, "zero"), [0.5, 0.0, 0.25, np.nan])
    assert badness(np.ones((2, 3)), "zero").shape == (2, 3)
    with pytest.raises(ValueError):
        badness(0.3, "smaller")


# ---------------------------------------------------------------------------------------------
# paired_bootstrap


BASE = np.array([[3, 2], [1, 4], [5, 0], [2, 2], [4, 1]])
CAND = np.array([[4, 1], [2, 3], [5, 0], [3, 1], [4, 1]])


def test_paired_bootstrap_is_deterministic_for_a_seed():
    a = paired_bootstrap(BASE, CAND, THREE, n_boot=300, seed=3)
    b = paired_bootstrap(BASE.copy(), CAND.copy(), dict(THREE), n_boot=300, seed=3)
    assert a == b  # no NaN anywhere here, so dataclass equality is exact equality
    c = paired_bootstrap(BASE, CAND, THREE, n_boot=300, seed=4)
    assert c["hi"].difference == a["hi"].difference
    assert c["hi"].worsening_se != a["hi"].worsening_se


def test_paired_bootstrap_point_estimates():
    r = paired_bootstrap(BASE, CAND, THREE, n_boot=50)
    assert r["hi"].baseline == 15 / 24 and r["hi"].candidate == 18 / 24
    assert r["hi"].difference == 18 / 24 - 15 / 24
    assert isinstance(r["hi"], PairedDifference)
    assert r["hi"].resamples == 50


@settings(deadline=None, max_examples=examples(60))
@given(positive_matrices)
def test_identical_sides_give_exactly_zero(counts):
    r = paired_bootstrap(counts, counts.copy(), THREE, n_boot=200, seed=1)
    for d in r.values():
        assert d.difference == 0.0 and d.worsening == 0.0
        assert d.difference_ci == (0.0, 0.0)
        assert d.worsening_ci == (0.0, 0.0)
        assert d.worsening_se == 0.0
        assert d.resamples == 200


@settings(deadline=None, max_examples=examples(100))
@given(matrix_pairs, st.integers(0, 2**32 - 1))
def test_swapping_sides_negates(pair, seed):
    a, b = pair
    fwd = paired_bootstrap(a, b, THREE, n_boot=200, seed=seed)
    rev = paired_bootstrap(b, a, THREE, n_boot=200, seed=seed)
    for name in THREE:
        f, r = fwd[name], rev[name]
        assert same(r.baseline, f.candidate) and same(r.candidate, f.baseline)
        assert same(r.difference, -f.difference, 0.0)
        assert same(r.worsening, -f.worsening, 0.0)
        assert same_ci(r.difference_ci, negated(f.difference_ci))
        assert same_ci(r.worsening_ci, negated(f.worsening_ci))
        assert same(r.worsening_se, f.worsening_se)
        assert r.resamples == f.resamples


def test_worsening_sign_conventions():
    base = np.array([[5, 5], [4, 6], [6, 4]])  # share 0.5, balance 0.0
    cand = np.array([[8, 2], [7, 3], [9, 1]])  # share 0.8, balance 0.6
    r = paired_bootstrap(base, cand, THREE, n_boot=400, seed=2)
    assert r["hi"].difference == pytest.approx(0.3)
    assert r["hi"].worsening == pytest.approx(-0.3)  # higher is better: the candidate improved
    assert r["lo"].worsening == pytest.approx(0.3)  # lower is better: the candidate got worse
    assert r["zero"].worsening == pytest.approx(0.6)  # |0.6| - |0.0|
    assert r["hi"].difference_ci == r["lo"].difference_ci
    assert r["lo"].worsening_ci == r["lo"].difference_ci
    assert same_ci(r["hi"].worsening_ci, negated(r["hi"].difference_ci))
    lo, hi = r["lo"].worsening_ci
    assert 0 < lo <= hi < 1
    assert r["hi"].worsening_se == pytest.approx(r["lo"].worsening_se, rel=1e-12, abs=0)

    # "zero": from +0.2, crossing to -0.28 is worse by 0.08, crossing to -0.12 is better by 0.08
    base_z = np.array([[6, 4], [3, 2], [6, 4]])  # balance (15 - 10) / 25 = 0.2
    to_far = np.array([[3, 7], [2, 3], [4, 6]])  # (9 - 16) / 25 = -0.28
    far = paired_bootstrap(base_z, to_far, {"z": (balance, "zero")}, n_boot=100)["z"]
    assert far.difference == pytest.approx(-0.48) and far.worsening == pytest.approx(0.08)
    near = np.array([[5, 5], [2, 3], [4, 6]])  # (11 - 14) / 25 = -0.12
    close = paired_bootstrap(base_z, near, {"z": (balance, "zero")}, n_boot=100)["z"]
    assert close.difference == pytest.approx(-0.32) and close.worsening == pytest.approx(-0.08)


def test_base_side_uses_the_same_resamples_as_cluster_bootstrap():
    # The candidate's share is 1/2 in every cluster, hence in every resample, so the paired
    # difference is 1/2 minus the base resamples: its interval mirrors cluster_bootstrap(base).
    base = np.array([[3, 2], [1, 4], [5, 0], [2, 2], [0, 3], [4, 4], [1, 0]])
    cand = np.ones_like(base)
    for seed in (0, 11):
        lo, hi = cluster_bootstrap(base, share, n_boot=500, seed=seed)
        r = paired_bootstrap(base, cand, {"s": (share, "lower")}, n_boot=500, seed=seed)["s"]
        assert same_ci(r.difference_ci, (0.5 - hi, 0.5 - lo))


def test_matches_a_direct_computation_from_the_weights():
    n_boot, seed = 7, 13  # few resamples, so ddof=1 vs ddof=0 matters
    w = resample_weights(len(BASE), n_boot, np.random.default_rng(seed))
    got = paired_bootstrap(BASE, CAND, THREE, n_boot=n_boot, seed=seed)
    for name, (fn, better) in THREE.items():
        rb, rc = fn(w @ BASE), fn(w @ CAND)
        worse = badness(rc, better) - badness(rb, better)
        assert got[name].difference_ci == percentile_interval(rc - rb)
        assert got[name].worsening_ci == percentile_interval(worse)
        assert got[name].worsening_se == pytest.approx(float(np.std(worse, ddof=1)), rel=1e-12, abs=0)
    assert got["hi"].worsening_se != pytest.approx(float(np.std(badness(share(w @ CAND), "higher") - badness(share(w @ BASE), "higher"))))


def test_resamples_counts_the_non_nan_worsenings():
    base = np.array([[1, 0], [0, 0], [2, 1]])
    cand = np.array([[0, 1], [0, 0], [1, 1]])
    n_boot, seed = 400, 5
    w = resample_weights(3, n_boot, np.random.default_rng(seed))
    expected = int(np.sum((w[:, 0] + w[:, 2]) > 0))  # NaN only when cluster 1 alone is drawn
    assert expected < n_boot  # the data really produce some NaN resamples
    r = paired_bootstrap(base, cand, {"s": (share, "higher")}, n_boot=n_boot, seed=seed)["s"]
    assert r.resamples == expected
    assert not math.isnan(r.worsening_se)


def test_pairing_reduces_the_standard_error():
    # Templates differ a lot in difficulty and both models share that; the candidate differs
    # from the baseline by a few answers per template.
    rng = np.random.default_rng(2024)
    n_clusters, per = 40, 50
    p = rng.uniform(0.05, 0.95, n_clusters)
    base_ok = rng.binomial(per, p)
    cand_ok = np.clip(base_ok + rng.integers(-2, 3, n_clusters), 0, per)
    base = np.column_stack([base_ok, per - base_ok])
    cand = np.column_stack([cand_ok, per - cand_ok])
    n_boot = 2000
    paired = paired_bootstrap(base, cand, {"acc": (share, "higher")}, n_boot=n_boot, seed=0)["acc"]
    w1 = resample_weights(n_clusters, n_boot, np.random.default_rng(1))
    w2 = resample_weights(n_clusters, n_boot, np.random.default_rng(2))
    unpaired_se = float(np.std(share(w2 @ cand) - share(w1 @ base), ddof=1))
    assert paired.worsening_se < 0.25 * unpaired_se
    lo, hi = paired.difference_ci
    assert hi - lo < 0.25 * 2 * 1.96 * unpaired_se


def test_one_cluster_and_one_resample():
    one = paired_bootstrap([[3, 1]], [[1, 1]], THREE, n_boot=100)
    assert one["hi"].difference_ci == (one["hi"].difference,) * 2
    assert one["hi"].worsening_ci == (one["hi"].worsening,) * 2
    assert one["hi"].worsening_se == 0.0
    single = paired_bootstrap(BASE, CAND, THREE, n_boot=1)["hi"]
    assert single.resamples == 1 and math.isnan(single.worsening_se)
    assert single.worsening_ci[0] == single.worsening_ci[1]


def test_no_resamples_or_no_clusters():
    r = paired_bootstrap(BASE, CAND, THREE, n_boot=0)["hi"]
    assert r.baseline == 15 / 24 and r.candidate == 18 / 24 and r.worsening == pytest.approx(-3 / 24)
    assert all(math.isnan(x) for x in (*r.difference_ci, *r.worsening_ci, r.worsening_se))
    assert r.resamples == 0
    empty = np.zeros((0, 2))
    e = paired_bootstrap(empty, empty, THREE, n_boot=100)["hi"]
    assert all(math.isnan(x) for x in (e.baseline, e.candidate, e.difference, e.worsening, e.worsening_se))
    assert all(math.isnan(x) for x in (*e.difference_ci, *e.worsening_ci))
    assert e.resamples == 0


def test_bad_inputs_raise():
    with pytest.raises(ValueError):
        paired_bootstrap(BASE, CAND[:4], THREE)
    with pytest.raises(ValueError):
        paired_bootstrap(BASE, np.ones((5, 3)), THREE)
    with pytest.raises(ValueError):
        paired_bootstrap(BASE[0], CAND[0], THREE)
    with pytest.raises(ValueError):
        paired_bootstrap(BASE, CAND, {"s": (share, "bigger")})
    with pytest.raises(ValueError):
        paired_bootstrap(BASE, CAND, THREE, confidence=1.0)
    with pytest.raises(ValueError):
        paired_bootstrap(BASE, CAND, THREE, n_boot=-1)
    with pytest.raises(ValueError):
        paired_bootstrap(BASE, CAND, {"bad": (lambda c: np.atleast_1d(share(c))[..., None], "lower")}, n_boot=10)


def test_with_the_qa_metrics():
    rng = np.random.default_rng(9)
    base = rng.integers(0, 4, size=(12, K))
    cand = rng.integers(0, 4, size=(12, K))
    metrics = {name: (m.fn, m.better) for name, m in QA_METRICS.items()}
    r = paired_bootstrap(base, cand, metrics, n_boot=200, seed=0)
    assert set(r) == set(QA_METRICS)
    for name, m in QA_METRICS.items():
        b, c = float(m.fn(base.sum(0))), float(m.fn(cand.sum(0)))
        assert r[name].baseline == b and r[name].candidate == c
        assert same(r[name].worsening, badness(c, m.better) - badness(b, m.better), 0.0)
        assert r[name].resamples == 200
