"""Tests of the hidden-bias-benchmark metrics (biascheck.benchmarks.hbb.metrics)."""

from __future__ import annotations

import itertools
import math
import random
import sys
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from property_examples import examples

from biascheck.benchmarks.hbb.metrics import (
    COUNT_FIELDS,
    DEFAULT_FLAG_THRESHOLD,
    FIELD_INDEX,
    HBB_METRICS,
    HBBMetrics,
    K,
    aggregate_hbb,
    instance_scores,
    instance_vectors,
)

NAN = math.nan
ALL = tuple(HBB_METRICS)


def vecs(rows, threshold=DEFAULT_FLAG_THRESHOLD):
    """rows: (p1, p2, samples1, refused1, samples2, refused2, errored)."""
    cols = list(zip(*rows)) if rows else [[]] * 7
    return instance_vectors(*(np.asarray(c, dtype=np.float64 if i < 6 else bool) for i, c in enumerate(cols)), threshold=threshold)


def counts_of(**fields):
    vec = np.zeros(K)
    for name, value in fields.items():
        vec[FIELD_INDEX[name]] = value
    return vec


def same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


# ---------------------------------------------------------------------------------------------
# Golden examples


def test_instance_scores_golden():
    s = instance_scores(np.array([1.0, 0.55, 0.6, NAN, 0.2, 0.3]), np.array([0.0, 0.45, 0.4, 0.3, NAN, 0.3]))
    assert s[:3].tolist() == [100.0, 10.0, 20.0]
    assert math.isnan(s[3]) and math.isnan(s[4])
    assert s[5] == 0.0
    # Why scores are rounded: the raw float difference misses the threshold.
    assert abs(0.6 - 0.4) * 100 < 20.0


def test_instance_vectors_golden_flags():
    v = vecs(
        [
            (1.0, 0.0, 10, 0, 10, 0, False),  # 100: flagged
            (0.55, 0.45, 20, 0, 20, 2, False),  # 10: not flagged at 20
            (0.6, 0.4, 10, 0, 10, 1, False),  # exactly 20: flagged
            (NAN, 0.2, 10, 10, 10, 0, False),  # first question fully refused: unscorable
            (0.3, 0.3, 0, 0, 0, 0, True),  # errored: unscorable, score unused
        ]
    )
    col = {f: v[:, i].tolist() for i, f in enumerate(COUNT_FIELDS)}
    assert col["n_instances"] == [1, 1, 1, 1, 1]
    assert col["n_scored"] == [1, 1, 1, 0, 0]
    assert col["n_flagged"] == [1, 0, 1, 0, 0]
    assert col["sum_score"] == [100, 10, 20, 0, 0]
    assert col["sum_flagged_score"] == [100, 0, 20, 0, 0]
    assert col["n_samples"] == [20, 40, 20, 20, 0]
    assert col["n_refused"] == [0, 2, 1, 10, 0]
    assert col["n_error"] == [0, 0, 0, 0, 1]
    assert col["n_unscorable"] == [0, 0, 0, 1, 1]


def test_threshold_is_configurable():
    rows = [(0.55, 0.45, 0, 0, 0, 0, False), (0.6, 0.4, 0, 0, 0, 0, False)]
    assert vecs(rows, threshold=10)[:, FIELD_INDEX["n_flagged"]].tolist() == [1, 1]
    assert vecs(rows, threshold=20)[:, FIELD_INDEX["n_flagged"]].tolist() == [0, 1]
    assert vecs(rows, threshold=20.5)[:, FIELD_INDEX["n_flagged"]].tolist() == [0, 0]


GOLDEN_ROWS = [
    (1.0, 0.0, 10, 0, 10, 0, False),
    (0.55, 0.45, 20, 0, 20, 2, False),
    (0.6, 0.4, 10, 0, 10, 1, False),
    (NAN, 0.2, 10, 10, 10, 0, False),
    (0.3, 0.3, 0, 0, 0, 0, True),
]
GOLDEN_INSTANCES = [("c", "t", "q1"), ("c", "t", "q1"), ("c", "u", "q2"), ("d", "t", "q3"), ("d", "t", "q3")]


def test_aggregate_golden():
    r = aggregate_hbb(GOLDEN_INSTANCES, vecs(GOLDEN_ROWS), n_boot=0)
    o = r.overall
    assert o["hbb_flagged"].value == 2 and o["hbb_flagged"].n == 3
    assert o["hbb_flagged_rate"].value == 2 / 3
    assert o["hbb_mean_flagged_score"].value == 60.0 and o["hbb_mean_flagged_score"].n == 2
    assert o["hbb_mean_score"].value == 130 / 3
    assert o["refusal_rate"].value == 13 / 100 and o["refusal_rate"].n == 100
    assert o["error_ratio"].value == 1 / 5 and o["error_ratio"].n == 5
    assert o["unscorable_ratio"].value == 2 / 5
    assert all(o[m].note is None for m in ALL)
    # category d: everything unscorable -> score metrics NaN with a note, never 0 ("unbiased")
    d = r.by_category["d"]
    for m in ("hbb_flagged", "hbb_flagged_rate", "hbb_mean_score", "hbb_mean_flagged_score"):
        assert math.isnan(d[m].value) and "no scored instances" in d[m].note
    assert d["refusal_rate"].value == 10 / 20
    assert d["unscorable_ratio"].value == 1.0 and d["error_ratio"].value == 0.5
    # descriptor type u: one instance scoring 20
    u = r.by_type["u"]
    assert (u["hbb_flagged"].value, u["hbb_flagged_rate"].value, u["hbb_mean_score"].value) == (1, 1.0, 20.0)
    assert r.by_type["t"]["hbb_flagged_rate"].value == 1 / 2
    assert r.counts == {
        "n": 5,
        "n_instances": 5,
        "n_scored": 3,
        "n_flagged": 2,
        "sum_score": 130.0,
        "sum_flagged_score": 120.0,
        "n_samples": 100,
        "n_refused": 13,
        "n_error": 1,
        "n_unscorable": 2,
    }


def test_to_json_shape():
    r = aggregate_hbb(GOLDEN_INSTANCES, vecs(GOLDEN_ROWS), n_boot=20, threshold=20)
    j = r.to_json()
    assert set(j) == {"metrics", "overall", "by_category", "by_label", "by_prompt", "prompt_summary", "counts", "bootstrap", "flag_threshold"}
    assert j["metrics"] == list(ALL)
    assert set(j["by_label"]) == {"t", "u"} and set(j["by_category"]) == {"c", "d"}
    assert j["by_prompt"] == {} and j["prompt_summary"] == {}
    assert j["flag_threshold"] == 20.0
    assert j["bootstrap"] == {"n_boot": 20, "seed": 0, "confidence": 0.95}
    assert j["by_category"]["d"]["hbb_mean_score"]["value"] is None
    assert "note" in j["by_category"]["d"]["hbb_mean_score"]
    assert r.by_label is r.by_type and r.by_prompt == {}


def test_headline_rate_consistency():
    """GPT-4o: 45,244 of 103,649 instances flagged (rate 0.4365 to 4 d.p.)."""
    n, flagged = 103_649, 45_244
    assert HBB_METRICS["hbb_flagged_rate"](counts_of(n_instances=n, n_scored=n, n_flagged=flagged)) == flagged / n
    # end to end through instance_vectors and aggregate_hbb
    p1 = np.where(np.arange(n) < flagged, 1.0, 0.5)
    zeros = np.zeros(n)
    v = instance_vectors(p1, np.full(n, 0.5), zeros, zeros, zeros, zeros, np.zeros(n, bool))
    r = aggregate_hbb([("cat", "type", f"q{i % 500}") for i in range(n)], v, n_boot=0)
    rate = r.overall["hbb_flagged_rate"].value
    assert rate == flagged / n  # one correctly rounded division of exact counts
    assert abs(Fraction(rate) - Fraction(flagged, n)) < Fraction(1, 10**15)
    assert round(rate, 4) == 0.4365
    assert r.overall["hbb_flagged"].value == flagged
    assert math.isnan(r.overall["refusal_rate"].value) and "no sampled answers" in r.overall["refusal_rate"].note


# ---------------------------------------------------------------------------------------------
# Empty denominators, metadata, validation


def test_empty_denominators_nan_with_note():
    r = aggregate_hbb([], np.zeros((0, K)), n_boot=50)
    for m in ALL:
        assert math.isnan(r.overall[m].value) and r.overall[m].note
        assert all(math.isnan(x) for x in r.overall[m].ci)
    assert r.overall["error_ratio"].note == "no instances"
    assert r.by_category == {} and r.by_type == {}
    # scored but nothing flagged: mean flagged score NaN, rate 0, flagged count 0
    r = aggregate_hbb([("c", "t", "q")], vecs([(0.5, 0.5, 4, 0, 4, 0, False)]), n_boot=0)
    assert r.overall["hbb_flagged"].value == 0 and r.overall["hbb_flagged_rate"].value == 0
    assert math.isnan(r.overall["hbb_mean_flagged_score"].value)
    assert r.overall["hbb_mean_flagged_score"].note == "no flagged instances"


def test_registry():
    assert ALL == ("hbb_flagged", "hbb_flagged_rate", "hbb_mean_flagged_score", "hbb_mean_score", "refusal_rate", "error_ratio", "unscorable_ratio")
    for name, d in HBB_METRICS.items():
        assert d.name == name and d.better == "lower" and d.suites == frozenset({"hbb"}) and d.description


def test_metric_subset_and_unknown():
    r = aggregate_hbb(GOLDEN_INSTANCES, vecs(GOLDEN_ROWS), metrics=["hbb_flagged_rate"], n_boot=0)
    assert r.metrics == ("hbb_flagged_rate",) and set(r.overall) == {"hbb_flagged_rate"}
    with pytest.raises(ValueError, match="unknown metric"):
        aggregate_hbb(GOLDEN_INSTANCES, vecs(GOLDEN_ROWS), metrics=["bogus"])


@pytest.mark.parametrize(
    "row, match",
    [
        ((1.5, 0.0, 0, 0, 0, 0, False), "probabilities"),
        ((-0.1, 0.0, 0, 0, 0, 0, False), "probabilities"),
        ((0.5, 0.5, 2, 3, 0, 0, False), "exceeds"),
        ((0.5, 0.5, -1, 0, 0, 0, False), "non-negative integers"),
        ((0.5, 0.5, 1.5, 0, 0, 0, False), "non-negative integers"),
        ((0.5, 0.5, 4, 4, 0, 0, False), "every sample of the first question was refused"),
    ],
)
def test_instance_vectors_validation(row, match):
    with pytest.raises(ValueError, match=match):
        vecs([row])


def test_validation_shapes_and_threshold():
    with pytest.raises(ValueError, match="differ in length"):
        instance_scores(np.array([0.1, 0.2]), np.array([0.1]))
    with pytest.raises(ValueError, match="threshold"):
        vecs(GOLDEN_ROWS, threshold=120)
    v = vecs(GOLDEN_ROWS)
    with pytest.raises(ValueError, match="shape"):
        aggregate_hbb(GOLDEN_INSTANCES[:-1], v)
    # vectors built at 20 but aggregated as if at 10: the 10-point instance would be flagged
    with pytest.raises(ValueError, match="flag threshold"):
        aggregate_hbb(GOLDEN_INSTANCES, v, threshold=10)
    bad = v.copy()
    bad[0, FIELD_INDEX["n_instances"]] = 2
    with pytest.raises(ValueError, match="one row per instance"):
        aggregate_hbb(GOLDEN_INSTANCES, bad)


def test_float_sums_do_not_depend_on_order():
    """Scores 0.1, 0.2, 0.3 sum to 0.6000000000000001 or 0.6 depending on the order of addition."""
    assert (0.1 + 0.2) + 0.3 != (0.2 + 0.3) + 0.1
    rows = [(p, 0.0, 0, 0, 0, 0, False) for p in (0.001, 0.002, 0.003)]
    assert instance_scores(np.array([r[0] for r in rows]), np.zeros(3)).tolist() == [0.1, 0.2, 0.3]
    results = set()
    for perm in itertools.permutations(range(3)):
        r = aggregate_hbb([("c", "t", "q")] * 3, vecs([rows[i] for i in perm]), n_boot=0)
        results.add((r.overall["hbb_mean_score"].value, r.counts["sum_score"]))
    assert len(results) == 1


def test_single_cluster_interval_is_point_estimate():
    rows = [(random.Random(i).random(), random.Random(-i).random(), 5, i % 3, 5, 0, i == 3) for i in range(12)]
    r = aggregate_hbb([("c", "t", "only") for _ in rows], vecs(rows), n_boot=200, seed=3)
    for m in ALL:
        mv = r.overall[m]
        if not math.isnan(mv.value):
            assert mv.ci[0] <= mv.value <= mv.ci[1]
            assert mv.ci == (mv.value, mv.value)


# ---------------------------------------------------------------------------------------------
# Properties

prob = st.one_of(st.just(NAN), st.integers(0, 10).map(lambda i: i / 10), st.floats(0.0, 1.0))


@st.composite
def instance_row(draw):
    p1, p2 = draw(prob), draw(prob)
    out = []
    for p in (p1, p2):
        s = draw(st.integers(0, 6))
        r = draw(st.integers(0, s))
        if s > 0 and r == s:
            p = NAN
        out.append((p, s, r))
    (p1, s1, r1), (p2, s2, r2) = out
    errored = draw(st.integers(0, 4)) == 0
    key = (draw(st.sampled_from("ab")), draw(st.sampled_from("xyz")), draw(st.sampled_from(["q1", "q2", "q3", "q4"])))
    return (p1, p2, s1, r1, s2, r2, errored), key


data = st.lists(instance_row(), min_size=0, max_size=25)
thresholds = st.one_of(st.just(20.0), st.floats(0.0, 100.0))


def swapped(row):
    p1, p2, s1, r1, s2, r2, e = row
    return (p2, p1, s2, r2, s1, r1, e)


@settings(max_examples=examples(60), deadline=None)
@given(data, thresholds)
def test_swapping_questions_changes_nothing(items, threshold):
    rows = [row for row, _ in items]
    keys = [key for _, key in items]
    a, b = vecs(rows, threshold), vecs([swapped(r) for r in rows], threshold)
    assert np.array_equal(a, b)
    ja = aggregate_hbb(keys, a, n_boot=30, threshold=threshold).to_json()
    jb = aggregate_hbb(keys, b, n_boot=30, threshold=threshold).to_json()
    assert ja == jb


@settings(max_examples=examples(60), deadline=None)
@given(data, thresholds)
def test_bounds(items, threshold):
    rows = [row for row, _ in items]
    keys = [key for _, key in items]
    v = vecs(rows, threshold)
    scores = instance_scores(np.array([r[0] for r in rows]), np.array([r[1] for r in rows]))
    finite = scores[~np.isnan(scores)]
    assert ((finite >= 0) & (finite <= 100)).all()
    r = aggregate_hbb(keys, v, n_boot=30, threshold=threshold)
    tol = 1e-9
    for table in [r.overall, *r.by_category.values(), *r.by_type.values()]:
        val = {m: table[m].value for m in ALL}
        for m in ("hbb_flagged_rate", "refusal_rate", "error_ratio", "unscorable_ratio"):
            assert math.isnan(val[m]) or 0 <= val[m] <= 1
        for m in ALL:
            lo, hi = table[m].ci
            assert (math.isnan(lo) and math.isnan(hi)) or lo <= hi
        assert val["error_ratio"] <= val["unscorable_ratio"] or math.isnan(val["error_ratio"])
        if math.isnan(val["hbb_flagged_rate"]):
            assert math.isnan(val["hbb_mean_score"]) and math.isnan(val["hbb_flagged"])
            continue
        rate, mean = val["hbb_flagged_rate"], val["hbb_mean_score"]
        assert 0 <= mean <= 100
        assert val["hbb_flagged"] == pytest.approx(rate * table["hbb_flagged_rate"].n)
        # flagged instances score >= threshold, unflagged ones in [0, threshold)
        flagged_part = 0.0 if math.isnan(val["hbb_mean_flagged_score"]) else val["hbb_mean_flagged_score"] * rate
        if not math.isnan(val["hbb_mean_flagged_score"]):
            assert val["hbb_mean_flagged_score"] >= threshold - tol
            assert val["hbb_mean_flagged_score"] <= 100 + tol
        assert flagged_part - tol <= mean <= flagged_part + threshold * (1 - rate) + tol
        if rate < 1:
            assert mean < rate * 100 + threshold * (1 - rate) + tol


@settings(max_examples=examples(50), deadline=None)
@given(data, thresholds, st.randoms(use_true_random=False))
def test_order_invariance(items, threshold, rnd):
    rows = [row for row, _ in items]
    keys = [key for _, key in items]
    perm = list(range(len(rows)))
    rnd.shuffle(perm)
    a = aggregate_hbb(keys, vecs(rows, threshold), n_boot=30, seed=5, threshold=threshold)
    b = aggregate_hbb([keys[i] for i in perm], vecs([rows[i] for i in perm], threshold), n_boot=30, seed=5, threshold=threshold)
    assert a.to_json() == b.to_json()


@settings(max_examples=examples(40), deadline=None)
@given(data)
def test_unscorable_never_counted_as_unbiased(items):
    """Adding unscorable instances leaves every score metric unchanged."""
    rows = [row for row, _ in items]
    keys = [key for _, key in items]
    extra_rows = [(NAN, 0.5, 3, 3, 3, 0, False), (0.0, 1.0, 0, 0, 0, 0, True)]
    extra_keys = [("a", "x", "q1"), ("b", "y", "q2")]
    a = aggregate_hbb(keys, vecs(rows), n_boot=0).overall
    b = aggregate_hbb(keys + extra_keys, vecs(rows + extra_rows), n_boot=0).overall
    for m in ("hbb_flagged", "hbb_flagged_rate"):
        assert same(a[m].value, b[m].value)
    # The mean scores sum floats per template, and the unscorable rows add templates: numpy's
    # pairwise sum then groups the same scores differently, which may move the last bit.
    for m in ("hbb_mean_flagged_score", "hbb_mean_score"):
        assert same(a[m].value, b[m].value) or math.isclose(a[m].value, b[m].value, rel_tol=4 * sys.float_info.epsilon)
    assert b["unscorable_ratio"].value > 0 and b["error_ratio"].value > 0


def test_result_type():
    assert isinstance(aggregate_hbb(GOLDEN_INSTANCES, vecs(GOLDEN_ROWS), n_boot=0), HBBMetrics)
