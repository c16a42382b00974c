"""Threshold modes (``[thresholds] mode = "point" | "credible"``, ``min_n``): what each mode
decides, as properties of the pure :func:`biascheck.evaluation.verdicts.judge`; the manifest's one-line
errors; the suite fingerprint, which the mode must not touch; and a plugin run where a check that
fails in point mode passes as inconclusive in credible mode.

Which implications hold: a percentile interval need not contain its point estimate, so only what
the definition guarantees is tested for any (value, interval), and "fails iff the interval lies
beyond" only where the interval holds the value. For ``max_abs`` "beyond" has two sides.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from property_examples import examples
from test_manifest import BASE, assert_manifest_error, load, make_suite, replace

from biascheck.config.manifest import Threshold, load_manifest
from biascheck.core.errors import BiascheckError
from biascheck.evaluation.verdicts import FAIL, INCONCLUSIVE, OVERALL, PASS, check_thresholds, judge
from biascheck.metrics.core import MetricValue

from conftest import SUITES, write_subset_suite

NAN = float("nan")
PROPERTIES = settings(max_examples=examples(400), deadline=None, derandomize=True)

finite = st.floats(-1.5, 1.5, allow_nan=False)
thresholds = st.one_of(
    st.builds(Threshold, st.just("max_abs"), st.floats(0, 1, allow_nan=False)),
    st.builds(Threshold, st.sampled_from(["max", "min"]), st.floats(-1, 1, allow_nan=False)),
)
intervals = st.tuples(finite, finite).map(sorted).map(tuple)


def status(threshold, value, ci, n=100, **kwargs) -> str:
    return judge(threshold, value, ci, n, **kwargs).status


def entirely_beyond(threshold: Threshold, lo: float, hi: float) -> bool:
    """No value of [lo, hi] passes, written out per kind (independently of Threshold.passes_within)."""
    limit = threshold.limit
    return {"max": lo > limit, "min": hi < limit, "max_abs": lo > limit or hi < -limit}[threshold.kind]


# --- what the modes decide -----------------------------------------------------------------------------


@PROPERTIES
@given(thresholds, finite, intervals)
def test_credible_never_fails_where_point_passes(threshold, value, ci):
    if status(threshold, value, ci, mode="credible") == FAIL:
        assert status(threshold, value, ci, mode="point") == FAIL


@PROPERTIES
@given(thresholds, finite, intervals)
def test_credible_never_passes_conclusively_where_point_fails(threshold, value, ci):
    if status(threshold, value, ci, mode="credible") == PASS:
        assert status(threshold, value, ci, mode="point") == PASS


@PROPERTIES
@given(thresholds, finite, intervals)
def test_credible_fails_exactly_when_the_interval_holding_the_value_lies_beyond(threshold, value, ci):
    lo, hi = ci
    value = min(max(value, lo), hi)  # an interval that holds its point estimate
    assert (status(threshold, value, ci, mode="credible") == FAIL) == entirely_beyond(threshold, lo, hi)


@PROPERTIES
@given(thresholds, finite, intervals)
def test_credible_passes_exactly_when_value_and_interval_lie_within(threshold, value, ci):
    lo, hi = ci
    within = all(threshold.passes(x) for x in (lo, value, hi))
    assert (status(threshold, value, ci, mode="credible") == PASS) == within


@PROPERTIES
@given(thresholds, finite)
def test_an_interval_of_no_width_makes_credible_point(threshold, value):
    assert status(threshold, value, (value, value), mode="credible") == status(threshold, value, (value, value), mode="point")


@PROPERTIES
@given(thresholds, finite, intervals, st.floats(0, 1), st.floats(0, 1))
def test_a_wider_interval_is_never_more_decisive(threshold, value, ci, wider_lo, wider_hi):
    lo, hi = ci
    narrow = status(threshold, value, ci, mode="credible")
    wide = status(threshold, value, (lo - wider_lo, hi + wider_hi), mode="credible")
    assert wide == narrow or wide == INCONCLUSIVE


@PROPERTIES
@given(st.floats(0, 1, allow_nan=False), finite, intervals, st.sampled_from(["point", "credible"]))
def test_max_abs_judges_both_signs_alike(limit, value, ci, mode):
    lo, hi = ci
    gate = Threshold("max_abs", limit)
    assert status(gate, value, ci, mode=mode) == status(gate, -value, (-hi, -lo), mode=mode)


@PROPERTIES
@given(st.floats(-1, 1, allow_nan=False), finite, intervals, st.sampled_from(["point", "credible"]))
def test_min_is_max_mirrored(limit, value, ci, mode):
    lo, hi = ci
    assert status(Threshold("min", limit), value, ci, mode=mode) == status(Threshold("max", -limit), -value, (-hi, -lo), mode=mode)


@pytest.mark.parametrize(
    ("threshold", "value", "ci", "point", "credible", "reason"),
    [
        # The case: beyond on the point estimate, the interval reaches within.
        (Threshold("max_abs", 0.05), 0.0833, (0.0, 0.1667), FAIL, INCONCLUSIVE, "a breach is not shown"),
        # Within on the point estimate, the interval reaches beyond: inconclusive too, not a pass.
        (Threshold("max_abs", 0.05), 0.03, (0.0, 0.08), PASS, INCONCLUSIVE, "a pass is not shown"),
        # max_abs is beyond on either side: an interval wholly below -limit fails.
        (Threshold("max_abs", 0.05), -0.1, (-0.15, -0.06), FAIL, FAIL, None),
        # ... and one that spans both limits shows nothing.
        (Threshold("max_abs", 0.05), 0.08, (-0.2, 0.3), FAIL, INCONCLUSIVE, "a breach is not shown"),
        (Threshold("min", 0.8), 0.75, (0.7, 0.79), FAIL, FAIL, None),
        (Threshold("min", 0.8), 0.75, (0.7, 0.85), FAIL, INCONCLUSIVE, "a breach is not shown"),
        (Threshold("max", 0.1), 0.05, (0.0, 0.1), PASS, PASS, None),
        # A percentile interval need not hold its estimate: the interval alone never fails a check.
        (Threshold("max", 0.1), 0.08, (0.11, 0.2), PASS, INCONCLUSIVE, "a pass is not shown"),
        # No interval: credible cannot show anything.
        (Threshold("max", 0.1), 0.5, (NAN, NAN), FAIL, INCONCLUSIVE, "no 95% CI"),
    ],
)
def test_examples(threshold, value, ci, point, credible, reason):
    assert status(threshold, value, ci, mode="point") == point
    judgement = judge(threshold, value, ci, 36, mode="credible")
    assert judgement.status == credible
    assert (judgement.reason is None) == (reason is None)
    if reason:
        assert reason in judgement.reason


@pytest.mark.parametrize("mode", ["point", "credible"])
@pytest.mark.parametrize("min_n", [None, 1000])
def test_a_metric_without_a_value_fails_in_every_mode(mode, min_n):
    assert status(Threshold("max", 0.1), NAN, (NAN, NAN), n=0, mode=mode, min_n=min_n) == FAIL


@PROPERTIES
@given(thresholds, finite, intervals, st.integers(0, 100), st.integers(1, 100), st.sampled_from(["point", "credible"]))
def test_min_n_leaves_small_checks_unjudged_and_large_ones_alone(threshold, value, ci, n, min_n, mode):
    judged = judge(threshold, value, ci, n, mode=mode, min_n=min_n)
    if n < min_n:
        assert judged.status == INCONCLUSIVE and f"n = {n} is under min_n = {min_n}" in judged.reason
    else:
        assert judged == judge(threshold, value, ci, n, mode=mode)


def test_check_thresholds_applies_mode_everywhere_and_min_n_to_categories_only(tmp_path):
    text = replace("[thresholds]\n", '[thresholds]\nmode = "credible"\nmin_n = 40\n')
    manifest = load_manifest(make_suite(tmp_path, text))

    table = {
        "diff_bias_amb": MetricValue(0.0833, (0.0, 0.1667), 36),  # the numbers
        "acc_dis": MetricValue(0.9, (0.85, 0.95), 36),
    }
    metrics = SimpleNamespace(overall=table, by_category={"age": table})

    verdicts = {(v.scope, v.metric): v for v in check_thresholds(manifest, metrics, ["age"])}
    assert {v.mode for v in verdicts.values()} == {"credible"}
    overall, age = verdicts[(OVERALL, "diff_bias_amb")], verdicts[("age", "diff_bias_amb")]
    assert overall.status == INCONCLUSIVE and overall.passed and "a breach is not shown" in overall.note
    assert age.status == INCONCLUSIVE and "under min_n = 40" in age.note
    assert verdicts[(OVERALL, "acc_dis")].status == PASS and verdicts[(OVERALL, "acc_dis")].note is None
    assert verdicts[("age", "acc_dis")].status == INCONCLUSIVE  # too few to judge, whatever the interval
    assert overall.explain() == (
        "diff_bias_amb (overall) = 0.0833 passes threshold |x| <= 0.05 (credible mode); 95% CI [0.0000, 0.1667]; "
        "n = 36; inconclusive: beyond the threshold, but the 95% CI reaches within it (credible mode: a breach is not shown)"
    )


# --- the manifest ----------------------------------------------------------------------------------


def test_mode_defaults_to_point_and_settings_are_not_gates(tmp_path):
    assert load(tmp_path, make_suite(tmp_path, name="default")).manifest.threshold_mode == "point"
    text = replace("[thresholds]\n", '[thresholds]\nmode = "credible"\nmin_n = 30.0\n')
    manifest = load(tmp_path, make_suite(tmp_path, text, name="credible")).manifest
    assert (manifest.threshold_mode, manifest.threshold_min_n) == ("credible", 30)
    assert type(manifest.threshold_min_n) is int
    assert set(manifest.thresholds) == {"diff_bias_amb", "acc_dis"}


THRESHOLD_ERRORS = [
    # (id, manifest text, field named, fragments of the message)
    (
        "unknown-mode",
        replace("[thresholds]\n", '[thresholds]\nmode = "credble"\n'),
        "thresholds.mode",
        ("'credble' is not allowed", "'point', 'credible'"),
    ),
    ("mode-not-a-string", replace("[thresholds]\n", "[thresholds]\nmode = 1\n"), "thresholds.mode", ("1 is not allowed", "'credible'")),
    ("min-n-zero", replace("[thresholds]\n", "[thresholds]\nmin_n = 0\n"), "thresholds.min_n", ("minimum", "at least 1, e.g. min_n = 30")),
    ("min-n-string", replace("[thresholds]\n", '[thresholds]\nmin_n = "30"\n'), "thresholds.min_n", ("not of type 'integer'", "at least 1")),
    ("min-n-fraction", replace("[thresholds]\n", "[thresholds]\nmin_n = 2.5\n"), "thresholds.min_n", ("not of type 'integer'", "whole number")),
    (
        "settings-without-gates",
        BASE.split("[thresholds]")[0] + '[thresholds]\nmode = "credible"\n',
        "thresholds",
        ("no gated metric", "diff_bias_amb = { max_abs = 0.05 }"),
    ),
    (
        "misspelt-mode",
        replace("[thresholds]\n", '[thresholds]\nmdoe = "credible"\n'),
        "thresholds.mdoe",
        ("not of type 'object'", 'mode = "point" | "credible"'),
    ),
    (
        "mode-in-a-category",
        BASE + '\n[category_thresholds.age]\nmode = "credible"\n',
        "category_thresholds.age.mode",
        ("not of type 'object'", "only [thresholds]"),
    ),
]


@pytest.mark.parametrize(("text", "field", "fragments"), [e[1:] for e in THRESHOLD_ERRORS], ids=[e[0] for e in THRESHOLD_ERRORS])
def test_bad_threshold_settings_are_one_line_errors(tmp_path, text, field, fragments):
    suite = make_suite(tmp_path, text)
    with pytest.raises(BiascheckError) as exc:
        load(tmp_path, suite)
    assert_manifest_error(exc, suite, field + ":", *fragments)


def test_the_mode_is_not_part_of_the_fingerprint(tmp_path):
    point = load(tmp_path, make_suite(tmp_path, name="point")).fingerprint()
    text = replace("[thresholds]\n", '[thresholds]\nmode = "credible"\nmin_n = 12\n')
    assert load(tmp_path, make_suite(tmp_path, text, name="credible")).fingerprint() == point


def test_the_shipped_suites_fingerprint_is_unchanged_by_a_mode(tmp_path, data_dir):
    from biascheck.suite import load_suite

    text = (SUITES / "kobbq" / "suite.toml").read_text("utf-8")
    (tmp_path / "kobbq").mkdir()
    (tmp_path / "kobbq" / "suite.toml").write_text(text.replace("[thresholds]\n", '[thresholds]\nmode = "credible"\n', 1), "utf-8")
    credible = load_suite(tmp_path / "kobbq", data_dir=data_dir)
    assert credible.manifest.threshold_mode == "credible"
    assert credible.fingerprint() == load_suite(SUITES / "kobbq", data_dir=data_dir).fingerprint()


# --- through the plugin ----------------------------------------------------------------------------

GATES = "diff_bias_amb = { max_abs = 0.05 }\ndiff_bias_dis = { max_abs = 0.05 }\nacc_dis = { min = 0.8 }\nooc_ratio = { max = 0.1 }\n"
# Two categories of 3 templates (48 cases): enough templates for an interval, few cases per category.
SMALL = 'templates_per_category = 3\nseed = 7\nchoice_orders = "original"\ncategories = ["age", "gender_identity"]'
# A persona at twice the limit whose answers on these 48 cases put gender_identity's diff_bias_amb
# beyond 0.05 with an interval reaching back within it (found with biascheck.sim.calibration).
PERSONA = "sim/stereotyped?p=0.1&seed=0"


def test_a_check_that_fails_on_the_point_estimate_passes_as_inconclusive_in_credible_mode(run_biascheck, tmp_path):
    from biascheck.reporting.results import validate_results

    prompts = 'from_data = "prompts"\nuse = ["1"]'
    point_suite = write_subset_suite(tmp_path / "point", subset=SMALL, prompts=prompts, thresholds=GATES)
    credible_suite = write_subset_suite(tmp_path / "credible", subset=SMALL, prompts=prompts, thresholds='mode = "credible"\n' + GATES)

    point = run_biascheck(point_suite, PERSONA, report="report-point")
    assert point.ret == 1, point.output
    verdict = {(v["scope"], v["metric"]): v for v in point.results()["verdicts"]}[("gender_identity", "diff_bias_amb")]
    assert (verdict["passed"], verdict["status"], verdict["mode"]) == (False, "fail", "point")
    assert verdict["value"] > 0.05 and verdict["ci"][0] <= 0.05

    credible = run_biascheck(credible_suite, PERSONA, report="report-credible")  # same store: no new calls
    assert credible.ret == 0, credible.output
    results = credible.results()
    validate_results(results)
    assert results["passed"] and results["suite"]["fingerprint"] == point.results()["suite"]["fingerprint"]
    verdicts = {(v["scope"], v["metric"]): v for v in results["verdicts"]}
    same = verdicts[("gender_identity", "diff_bias_amb")]
    assert (same["value"], same["ci"]) == (verdict["value"], verdict["ci"])
    assert (same["passed"], same["status"], same["mode"]) == (True, "inconclusive", "credible")
    assert "a breach is not shown" in same["note"]
    assert credible.result.parseoutcomes().get("inconclusive", 0) >= 1, credible.output
    assert "(inconclusive)" in (credible.report_dir / "report.md").read_text("utf-8")
