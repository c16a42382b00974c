"""BBG's judge error, measured and corrected: the correction's math (properties and hand-computed
numbers), the simulator's judge of known confusion, the calibration kit (export, label, fit) and
the corrected metrics of a real run through pytest and the sim server, with their refusals."""

from __future__ import annotations

import importlib.util
import json
import math
import re
import tempfile
from html.parser import HTMLParser
from pathlib import Path
from xml.etree import ElementTree

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from biascheck.benchmarks.bbg.judge_calibration import CLASSES, MIN_PER_CLASS, JudgeCalibration, corrected_values, fit_calibration
from biascheck.benchmarks.bbg.metrics import BBG_METRICS, COUNT_FIELDS, PAIR_TYPES
from biascheck.cli import main
from biascheck.core import exits
from biascheck.core.errors import BiascheckError
from biascheck.metrics.misclassification import (
    JudgeTooWeak,
    allocate,
    calibration_budget,
    check_separable,
    correct_shares,
    pair_confusion,
    project_to_simplex,
    resample_confusions,
    rogan_gladen,
    rogan_gladen_interval,
)
from biascheck.sim.personas import parse_persona

from conftest import write_subset_suite

CONFUSION = "0.95,0.02,0.03,0.10,0.85,0.05,0.08,0.02,0.90"
M = np.array([float(x) for x in CONFUSION.split(",")]).reshape(3, 3)


def simplex(k: int):
    return st.lists(st.floats(0.0, 1.0), min_size=k, max_size=k).filter(lambda v: sum(v) > 1e-3).map(lambda v: np.array(v) / sum(v))


def dominant(k: int):
    """Confusion matrices whose diagonal holds at least 0.6 of each row (correctable)."""
    row = st.tuples(st.floats(0.6, 1.0), simplex(k - 1))
    return st.lists(row, min_size=k, max_size=k).map(lambda rows: np.array([_row(i, d, rest, k) for i, (d, rest) in enumerate(rows)]))


def _row(i: int, diagonal: float, rest: np.ndarray, k: int) -> np.ndarray:
    out = np.insert(rest * (1.0 - diagonal), i, diagonal)
    return out / out.sum()


# --- the math -------------------------------------------------------------------------------------


@given(simplex(3))
def test_identity_judge_leaves_shares_as_they_are(p):
    assert np.allclose(correct_shares(p, np.eye(3)), p)


@given(simplex(9), dominant(3))
def test_the_correction_inverts_the_forward_model_of_pairs(pi, m):
    """p = (M kron M)^T pi, so correcting p gives pi back (pi on the simplex: no projection)."""
    p = pi @ pair_confusion(m)
    assert np.allclose(correct_shares(p, pair_confusion(m)), pi, atol=1e-8)


@given(st.lists(st.floats(-3, 3), min_size=9, max_size=9), dominant(3))
def test_corrected_shares_lie_on_the_simplex(v, m):
    out = correct_shares(np.array(v) / max(abs(sum(v)), 1e-3), pair_confusion(m))
    assert (out >= 0).all() and math.isclose(out.sum(), 1.0, abs_tol=1e-9)
    assert np.allclose(project_to_simplex(out), out)  # idempotent


@given(st.floats(0.0, 1.0), st.floats(0.55, 1.0), st.floats(0.55, 1.0))
def test_rogan_gladen_inverts_the_binary_forward_model(theta, q0, q1):
    p = q1 * theta + (1 - q0) * (1 - theta)
    assert math.isclose(rogan_gladen(p, q0, q1), theta, abs_tol=1e-9)
    # ... and agrees with the multiclass form on two classes (rows: truth negative, positive).
    two = np.array([[q0, 1 - q0], [1 - q1, q1]])
    assert math.isclose(correct_shares(np.array([1 - p, p]), two)[1], theta, abs_tol=1e-9)


@given(st.floats(0.0, 1.0), st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_rogan_gladen_is_clipped_and_refuses_a_chance_judge(p, q0, q1):
    if q0 + q1 <= 1.0:
        with pytest.raises(JudgeTooWeak):
            rogan_gladen(p, q0, q1)
    else:
        assert 0.0 <= rogan_gladen(p, q0, q1) <= 1.0


def test_golden_numbers_by_hand():
    # theta = (0.3 + 0.9 - 1) / (0.9 + 0.8 - 1) = 0.2 / 0.7
    assert math.isclose(rogan_gladen(0.3, 0.9, 0.8), 2 / 7)
    # The interval at n = 1000, m0 = m1 = 100, z = 1.959963984540054:
    z = 1.959963984540054
    pt = (300 + z * z / 2) / (1000 + z * z)  # 301.9207 / 1003.8415 = 0.300765
    q0t, q1t = 91 / 102, 81 / 102
    tt = (pt + q0t - 1) / (q0t + q1t - 1)
    se = math.sqrt(pt * (1 - pt) / 1000 + tt**2 * q1t * (1 - q1t) / 100 + (1 - tt) ** 2 * q0t * (1 - q0t) / 100) / (q0t + q1t - 1)
    estimate, lo, hi = rogan_gladen_interval(0.3, 1000, 0.9, 100, 0.8, 100)
    assert math.isclose(estimate, 2 / 7) and math.isclose(lo, tt - z * se) and math.isclose(hi, tt + z * se)
    # By hand: theta~ = 0.192922 / 0.686275 = 0.281115; variance terms 0.00021031 + 0.00012921 +
    # 0.00049722 = 0.00083674, se = 0.028926 / 0.686275 = 0.042149, z se = 0.082611.
    assert (round(lo, 4), round(hi, 4)) == (0.1985, 0.3637)
    # Allocation: m1 : m0 = theta sqrt(a1) : (1 - theta) sqrt(a0); equal q: 0.2 : 0.8.
    assert allocate(100, 0.2, 0.9, 0.9).m1 == 20 and allocate(100, 0.5, 0.9, 0.9).m1 == 50
    # q1 = 0.99 (a1 = 0.0099, sqrt 0.0995) vs q0 = 0.9 (sqrt 0.3): 0.5*0.0995 : 0.5*0.3 -> 24.9%.
    assert allocate(1000, 0.5, 0.9, 0.99).m1 == 249
    # The budget reaches the half-width it was asked for.
    budget = calibration_budget(0.05, 0.3, 0.9, 0.9, 2000)
    assert budget is not None
    _, lo, hi = rogan_gladen_interval(0.9 * 0.3 + 0.1 * 0.7, 2000, 0.9, budget.m0, 0.9, budget.m1)
    # (The budget uses the unsmoothed plug-ins, the interval the smoothed ones: within 5%.)
    assert 0.045 <= (hi - lo) / 2 <= 0.0525
    assert calibration_budget(0.01, 0.3, 0.9, 0.9, 100) is None  # the test set alone is wider


def test_a_judge_no_better_than_chance_for_a_class_pair_is_refused():
    check_separable(M, CLASSES)
    weak = np.array([[0.5, 0.3, 0.2], [0.55, 0.4, 0.05], [0.1, 0.1, 0.8]])  # says b for true c more than for true b
    with pytest.raises(JudgeTooWeak, match="for true b against true c"):
        check_separable(weak, CLASSES)


def test_bootstrap_and_analytic_intervals_agree_in_the_binary_case():
    """The bootstrap over items and, independently, each calibration class gives the interval
    the paper's analytic (delta-method) form gives, on a two-class problem."""
    rng = np.random.default_rng(1)
    n, theta, q0, q1, m0, m1 = 2000, 0.3, 0.9, 0.85, 300, 300
    p = q1 * theta + (1 - q0) * (1 - theta)
    positives = round(n * p)
    calibration = np.array([[round(m0 * q0), m0 - round(m0 * q0)], [m1 - round(m1 * q1), round(m1 * q1)]])
    boot = 4000
    p_boot = rng.binomial(n, positives / n, size=boot) / n
    draws = resample_confusions(calibration, boot, rng)
    corrected = correct_shares(np.stack([1 - p_boot, p_boot], axis=1), draws)[:, 1]
    lo_b, hi_b = np.percentile(corrected, [2.5, 97.5])
    est, lo_a, hi_a = rogan_gladen_interval(positives / n, n, q0, m0, q1, m1)
    assert abs((hi_b - lo_b) - (hi_a - lo_a)) / (hi_a - lo_a) < 0.1
    assert abs((lo_b + hi_b) / 2 - (lo_a + hi_a) / 2) < 0.01 and lo_a < est < hi_a


def test_pairs_whose_readings_err_together_break_the_independence_assumption():
    """M kron M assumes the judge errs on a pair's two readings independently. A judge that,
    in 10% of pairs, reads *both* stories as b (the same marginal M as one that misreads each
    reading on its own) leaves the corrected metrics off: the pair types most (p_bb 0.042 for 0,
    p_bu_plus_p_ub 0.131 for 0.2), ntr_gen 0.828 for 0.8, bias_gen 0.107 for 0.1 (raw: 0.19)."""
    e = 0.1
    lapse = np.array([[1.0, 0.0, 0.0], [e, 1 - e, 0.0], [e, 0.0, 1 - e]])  # the marginal confusion
    pi = np.zeros(9)
    for t, share in (("uu", 0.5), ("cb", 0.3), ("bu", 0.2)):
        pi[PAIR_TYPES.index(t)] = share
    independent = pi @ pair_confusion(lapse)
    correlated = (1 - e) * pi
    correlated[PAIR_TYPES.index("bb")] += e  # the lapse reads the whole pair as bb
    fixed = {name: float(v) for name, v in corrected_values(np.concatenate([correlated, np.zeros(3)]), lapse).items()}
    exact = {name: float(v) for name, v in corrected_values(np.concatenate([independent, np.zeros(3)]), lapse).items()}
    true_bias = 0.2 / 2
    assert math.isclose(exact["bias_gen_corrected"], true_bias, abs_tol=1e-9)
    assert abs(fixed["p_bb_corrected"] - 0.0) > 0.04 and abs(fixed["p_bu_plus_p_ub_corrected"] - 0.2) > 0.06
    assert abs(fixed["ntr_gen_corrected"] - 0.8) > 0.02 and 0.005 < fixed["bias_gen_corrected"] - true_bias < 0.01


# --- the simulator's judge of known confusion -----------------------------------------------------


def test_sim_judge_confusion_is_parsed_and_refused_when_malformed():
    persona = parse_persona(f"sim/judge?confusion={CONFUSION}")
    assert persona.confusion == tuple(M.reshape(9)) and persona.spec == "judge?confusion=0.95,0.02,0.03,0.1,0.85,0.05,0.08,0.02,0.9"
    for bad in ("0.9,0.1", "0.9,0.2,0,0,1,0,0,0,1", "a,b,c,d,e,f,g,h,i"):
        with pytest.raises(BiascheckError, match="confusion"):
            parse_persona(f"judge?confusion={bad}")
    with pytest.raises(BiascheckError, match="unknown parameter"):
        parse_persona(f"fair?confusion={CONFUSION}")


@pytest.mark.data
def test_sim_pair_types_follow_m_kron_m(data_dir):
    """The exact pair-type distribution with the confusion judge is the fair judge's times M kron M."""
    bench = _bench()
    pairs = bench.load_pairs(data_dir, "en", [1])
    from biascheck.sim.stories import expected_pair_distribution

    for first, second in pairs[:40]:
        fair = expected_pair_distribution("stereotyped?p=0.3", first, second)
        judged = expected_pair_distribution("stereotyped?p=0.3", first, second, judge=f"judge?confusion={CONFUSION}")
        pi = np.array([fair.get(t, 0.0) for t in PAIR_TYPES])
        assert np.allclose([judged.get(t, 0.0) for t in PAIR_TYPES], pi @ pair_confusion(M))


def _bench():
    spec = importlib.util.spec_from_file_location("judge_correction_bench", Path(__file__).parent.parent / "bench" / "judge_correction.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.data
def test_fast_bench_corrects_most_of_the_judges_bias(data_dir, capsys):
    """bench/judge_correction.py at 16 seeds (the closing note's figures are from 200): the
    corrected interval covers the truth and the correction removes most of the raw bias."""
    assert _bench().main(["--seeds", "16", "--resamples", "300", "--data", str(data_dir)]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1].split()
    assert last[0::2] == ["coverage", "raw_bias", "corrected_bias"]
    coverage, raw, corrected = (float(x) for x in last[1::2])
    assert coverage >= 0.9 and raw > 0.02 and abs(corrected) <= raw / 2


# --- the calibration file -------------------------------------------------------------------------


def _labelled(tmp_path: Path, rows: list[tuple[str, str]], name: str = "labelled.jsonl", **identity: str) -> Path:
    meta = {"judge": "sim/judge", "prompt": "abc", "language": "en", **identity}
    path = tmp_path / name
    path.write_text("".join(json.dumps({"case_id": str(i), "judge_answer": a, "label": t, **meta}) + "\n" for i, (t, a) in enumerate(rows)))
    return path


def _rows(counts: np.ndarray) -> list[tuple[str, str]]:
    return [(CLASSES[i], CLASSES[j]) for i in range(3) for j in range(3) for _ in range(int(counts[i, j]))]


def test_fit_counts_and_refuses(tmp_path):
    counts = np.array([[45, 3, 2], [4, 40, 6], [3, 2, 35]])
    calibration = fit_calibration(_labelled(tmp_path, _rows(counts)), date="2026-01-02")
    assert calibration.matrix.tolist() == counts.tolist() and calibration.per_class() == {"b": 50, "c": 50, "u": 40}
    assert calibration.to_json()["date"] == "2026-01-02" and calibration.judge == "sim/judge"
    few = counts.copy()
    few[2] = [1, 1, MIN_PER_CLASS - 3]
    with pytest.raises(BiascheckError, match=f"counts.u: has {MIN_PER_CLASS - 1} labelled stories of true class u, fewer than the minimum"):
        fit_calibration(_labelled(tmp_path, _rows(few)))
    weak = np.array([[20, 20, 10], [25, 15, 10], [3, 2, 35]])
    with pytest.raises(BiascheckError, match="the judge cannot be corrected: for true b against true c"):
        fit_calibration(_labelled(tmp_path, _rows(weak)))
    with pytest.raises(BiascheckError, match=r"row 3: label: unknown label 'x'; write b, c or u"):
        fit_calibration(_labelled(tmp_path, [("b", "b"), ("c", "c"), ("x", "b")]))
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text(_labelled(tmp_path, [("b", "b")]).read_text() + _labelled(tmp_path, [("c", "c")], "o.jsonl", judge="other").read_text())
    with pytest.raises(BiascheckError, match="fit one judge, prompt and language at a time"):
        fit_calibration(mixed)


def test_corrected_metrics_with_an_exact_calibration_recover_the_truth():
    """Counts that are exactly (M kron M)^T pi: the corrected metrics are the true pair types'."""
    pi = np.zeros(9)
    for t, share in (("bb", 0.2), ("bu", 0.1), ("ub", 0.1), ("uu", 0.3), ("cb", 0.3)):
        pi[PAIR_TYPES.index(t)] = share
    counts = np.zeros(len(COUNT_FIELDS))
    counts[:9] = 1e6 * (pi @ pair_confusion(M))
    got = corrected_values(counts, M)
    true_counts = np.zeros(len(COUNT_FIELDS))
    true_counts[:9] = pi * 1e6
    for name in ("ntr_gen", "bias_gen", "p_bb", "p_cc"):
        assert math.isclose(float(got[name + "_corrected"]), float(BBG_METRICS[name](true_counts)), abs_tol=1e-9)
    assert JudgeCalibration(((90, 5, 5), (5, 90, 5), (5, 5, 90)), "j", "p", "en", "d").scoring_value().endswith(":b=90,5,5;c=5,90,5;u=5,5,90;date=d")


# --- a comparison draws one calibration matrix per resample, for both sides --------------------------

NOISY = JudgeCalibration(((80, 12, 8), (10, 85, 5), (9, 6, 85)), "j", "p", "en", "d")
EXACT = JudgeCalibration(((10**6, 0, 0), (0, 10**6, 0), (0, 0, 10**6)), "j", "p", "en", "d")


def _runs(templates: int = 12, pairs: int = 40, moved: int = 4, seed: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """(T, K) pair-type counts of a baseline and of a candidate that read ``moved`` pairs of each
    template as bb where the baseline read uu."""
    rng = np.random.default_rng(seed)
    shares = np.zeros(len(PAIR_TYPES))
    for t, share in (("uu", 0.4), ("bc", 0.15), ("cb", 0.15), ("bb", 0.1), ("bu", 0.1), ("ub", 0.1)):
        shares[PAIR_TYPES.index(t)] = share
    base = np.zeros((templates, len(COUNT_FIELDS)))
    base[:, : len(PAIR_TYPES)] = rng.multinomial(pairs, shares, size=templates)
    base[:, PAIR_TYPES.index("uu")] += moved
    cand = base.copy()
    cand[:, PAIR_TYPES.index("uu")] -= moved
    cand[:, PAIR_TYPES.index("bb")] += moved
    return base, cand


def _compared(calibration: JudgeCalibration, base: np.ndarray, cand: np.ndarray, *, draws: bool = True):
    from biascheck.benchmarks.bbg.benchmark import BBGBenchmark
    from biascheck.evaluation.regression import _spreads, resampled_functions
    from biascheck.metrics.paired import paired_bootstrap, worsening_bounds

    defs = BBGBenchmark().scored_metric_defs({"calibration": calibration.scoring_value()})
    name = "bias_gen_corrected"
    drawn = resampled_functions(defs, [name], seed=3) if draws else None
    d = paired_bootstrap(base, cand, {name: (defs[name].fn, defs[name].better)}, n_boot=400, seed=3, resampled=drawn)[name]
    bounds = worsening_bounds(d.worsening, _spreads(d, None, len(base), False), alpha_each=0.05)
    return d, bounds


def test_a_comparison_carries_the_calibrations_uncertainty():
    """The same calibration on both sides, drawn anew per resample: the worsening's bounds are at
    least as wide as with an exact calibration, and wider than with its point estimate alone."""
    base, cand = _runs()
    exact, exact_bounds = _compared(EXACT, base, cand)
    noisy, noisy_bounds = _compared(NOISY, base, cand)
    fixed, fixed_bounds = _compared(NOISY, base, cand, draws=False)
    assert exact.worsening > 0 and noisy.worsening > 0  # the candidate reads more pairs as bb
    assert noisy_bounds.upper - noisy_bounds.lower >= exact_bounds.upper - exact_bounds.lower
    assert noisy.worsening_se > fixed.worsening_se  # the calibration's draws widen the spread
    assert noisy_bounds.upper - noisy_bounds.lower > fixed_bounds.upper - fixed_bounds.lower
    assert noisy.worsening == fixed.worsening  # the point estimate is the calibration's matrix either way


@pytest.mark.parametrize("calibration", [NOISY, EXACT])
def test_identical_sides_differ_by_exactly_zero_whatever_the_draw(calibration):
    base, _ = _runs()
    d, bounds = _compared(calibration, base, base.copy())
    assert d.worsening == 0.0 and d.worsening_ci == (0.0, 0.0) and d.worsening_se == 0.0 and d.resamples == 400
    assert (bounds.lower, bounds.upper) == (0.0, 0.0)


# --- through pytest and the sim server ------------------------------------------------------------


@pytest.mark.data
def test_export_label_fit_and_a_corrected_run(run_biascheck, tmp_path, data_dir, capsys):
    suite = write_subset_suite(
        tmp_path / "enbbg-some", "enbbg-quick", subset='categories = ["age", "religion", "ses", "nationality", "genderidentity"]'
    )
    judge = f"sim/judge?confusion={CONFUSION}"
    first = run_biascheck(suite, "sim/stereotyped?p=0.3", "--biascheck-judge", judge, report="r1")
    results = first.results()
    assert "bias_gen_corrected" not in results["metrics"]["overall"]
    sample, labelled, calibration = tmp_path / "sample.csv", tmp_path / "labelled.csv", tmp_path / "calibration.json"
    n = len(results["cases"])
    assert main(["judge", "export", str(suite), "--run", str(tmp_path / "r1"), "--n", str(n), "--out", str(sample), "--data", str(data_dir)]) == 0
    header = sample.read_text().splitlines()[0]
    assert header.startswith("case_id,category,run,story_seed,continuation,question,b,c,u,label")  # blind: no judge_answer
    assert "Label each story" in (tmp_path / "sample.csv.README.txt").read_text()
    assert main(["sim", "label", str(sample), "--suite", str(suite), "--data", str(data_dir), "--out", str(labelled)]) == 0
    assert main(["judge", "fit", str(labelled), "--key", str(tmp_path / "sample.csv.key.jsonl"), "--out", str(calibration)]) == 0
    fitted = json.loads(calibration.read_text())
    assert fitted["judge"] == judge and fitted["language"] == "en" and sum(fitted["per_class"].values()) == n
    capsys.readouterr()

    second = run_biascheck(suite, "sim/stereotyped?p=0.3", "--biascheck-judge", judge, "--biascheck-judge-calibration", str(calibration), report="r2")
    corrected = second.results()
    overall = corrected["metrics"]["overall"]
    for name in ("ntr_gen", "bias_gen", "p_bb"):
        raw, fixed = overall[name], overall[name + "_corrected"]
        assert raw == results["metrics"]["overall"][name]  # the raw metrics are unchanged
        assert fixed["ci"][0] <= fixed["value"] <= fixed["ci"][1]
    assert overall["ntr_gen_corrected"]["value"] > overall["ntr_gen"]["value"]  # misreadings made pairs look non-neutral
    counts = ";".join(f"{c}={','.join(map(str, r))}" for c, r in zip(CLASSES, fitted["counts"]))
    assert corrected["scoring"]["calibration"].split(":")[1] == f"{counts};date={fitted['date']}"
    check_correction_reports(corrected, fitted, tmp_path / "r2")
    assert "bias_gen_corrected" in corrected["metrics"]["by_category"]["age"]

    # A calibration of another judge is refused before any call, with the reason.
    other = run_biascheck(
        suite, "sim/stereotyped?p=0.3", "--biascheck-judge", "sim/judge", "--biascheck-judge-calibration", str(calibration), report="r3"
    )
    assert other.ret != 0 and "is a calibration for judge model" in other.output and "Traceback" not in other.output
    # A baseline made with a calibration gates the corrected metrics; a run without one is refused.
    baseline = tmp_path / "base.json"
    calibrated = ("--biascheck-judge", judge, "--biascheck-judge-calibration", str(calibration), "--biascheck-baseline", str(baseline))
    recorded = run_biascheck(suite, "sim/stereotyped?p=0.3", *calibrated, "--biascheck-update-baseline", report="r4")
    assert baseline.is_file(), recorded.output
    gated = run_biascheck(suite, "sim/stereotyped?p=0.3", *calibrated, "--biascheck-compare-fail", "bias_gen_corrected:+0.02", report="r5")
    assert "regression::overall::bias_gen_corrected" in gated.output or "bias_gen_corrected" in (tmp_path / "r5" / "comparison.md").read_text()
    checks = {(r["metric"], r["scope"]): r for r in json.loads((tmp_path / "r5" / "comparison.json").read_text())["results"]}
    assert checks[("bias_gen_corrected", "overall")]["verdict"] == "within margin"  # the same stories, the same matrix
    refused = run_biascheck(suite, "sim/stereotyped?p=0.3", "--biascheck-judge", judge, "--biascheck-baseline", str(baseline), report="r6")
    assert refused.ret != 0 and "scoring calibration=" in refused.output


@pytest.mark.data
def test_sim_label_refuses_a_row_naming_no_bbg_case_in_one_line(tiny_kobbq, tmp_path, data_dir, capsys):
    """A JSONL row's case_id may be any JSON value, and --suite may name a suite of another
    benchmark: each is one line naming the row, never a traceback."""
    from biascheck.suite import load_suite

    bbg = write_subset_suite(tmp_path / "enbbg-some", "enbbg-quick", subset='categories = ["age"]')
    kobbq_case = load_suite(tiny_kobbq, data_dir=data_dir).cases[0].case_id
    for suite, case_id in ((bbg, ["a", "list"]), (bbg, {"an": "object"}), (tiny_kobbq, kobbq_case)):
        sample = tmp_path / "sample.jsonl"
        sample.write_text(json.dumps({"case_id": case_id, "continuation": "a story", "label": ""}) + "\n")
        argv = ["sim", "label", str(sample), "--suite", str(suite), "--data", str(data_dir), "--out", str(tmp_path / "out.jsonl")]
        assert main(argv) == exits.USAGE
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "row 1: case_id" in err and "is no BBG case" in err, err


# --- the reports of a corrected run -----------------------------------------------------------------


def markdown_table(text: str, header: list[str]) -> list[list[str]]:
    """The rows of the Markdown table of ``text`` whose header row is ``header``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if [c.strip() for c in line.strip().strip("|").split("|")] == header)
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows


class _Tables(HTMLParser):
    """The cells of every ``<table class="confusion">`` of a page, row by row."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self.inside = False
        self.cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table" and ("class", "confusion") in attrs:
            self.inside = True
        elif self.inside and tag == "tr":
            self.rows.append([])
        elif self.inside and tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag):
        if tag == "table":
            self.inside = False
        elif self.inside and tag in ("td", "th") and self.cell is not None:
            self.rows[-1].append("".join(self.cell).strip())
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)


def check_correction_reports(results: dict, calibration: dict, folder: Path) -> None:
    """report.md and report.html show M as a table and raw beside corrected, with the numbers of
    results.json; the HTML's number line puts each dot and interval bar where its value lies."""
    counts, overall = calibration["counts"], results["metrics"]["overall"]
    corrected = [n for n in overall if n + "_corrected" in overall]
    assert {"ntr_gen", "bias_gen", "p_bb", "p_uu", "p_bc_plus_p_cb"} <= set(corrected)

    def f(x: float) -> str:
        return f"{x:.4f}"

    def ci(v: dict) -> str:
        return f"[{f(v['ci'][0])}, {f(v['ci'][1])}]"

    report = (folder / "report.md").read_text()
    matrix = markdown_table(report, ["true class", "labelled", "judge says b", "judge says c", "judge says u"])
    assert [r[0] for r in matrix] == list(CLASSES)
    for row, true_counts in zip(matrix, counts):
        assert int(row[1].replace(",", "")) == sum(true_counts)
        assert [float(x) for x in row[2:]] == pytest.approx([c / sum(true_counts) for c in true_counts], abs=5e-4)
    side = {r[0]: r[1:] for r in markdown_table(report, ["metric", "raw", "raw 95% CI", "corrected", "corrected 95% CI"])}
    assert list(side) == corrected
    for name in corrected:
        raw, fixed = overall[name], overall[name + "_corrected"]
        assert side[name] == [f(raw["value"]), ci(raw), f(fixed["value"]), ci(fixed)]
    assert f"{sum(map(sum, counts))} labelled stories" in report and calibration["date"] in report

    page = (folder / "report.html").read_text()
    tables = _Tables()
    tables.feed(page)
    assert tables.rows[0] == ["true class", "labelled", "judge says b", "judge says c", "judge says u"]
    for row, true_counts in zip(tables.rows[1:], counts, strict=True):
        assert [float(x) for x in row[2:]] == pytest.approx([c / sum(true_counts) for c in true_counts], abs=5e-4)
    svg = ElementTree.fromstring(re.search(r'<svg class="bars correction".*?</svg>', page, re.S).group(0))
    ns = "{http://www.w3.org/2000/svg}"
    ticks = [(float(t.get("x")), float(t.text.replace("\u2212", "-"))) for t in svg.iter(ns + "text") if t.get("class") == "tick"]
    (x_a, v_a), (x_b, v_b) = ticks[0], ticks[-1]

    def value_at(px: float) -> float:
        return v_a + (px - x_a) / (x_b - x_a) * (v_b - v_a)

    tolerance = 0.02 * (v_b - v_a) / (x_b - x_a)  # coordinates have 2 decimals
    marks = {g.get("data-metric"): g for g in svg.iter(ns + "g")}
    assert list(marks) == corrected
    for name, g in marks.items():
        for kind, value in (("raw", overall[name]), ("corrected", overall[name + "_corrected"])):
            (dot,) = [c for c in g.iter(ns + "circle") if c.get("class") == f"pt {kind}"]
            (bar,) = [r for r in g.iter(ns + "rect") if r.get("class") == f"ival {kind}"]
            assert value_at(float(dot.get("cx"))) == pytest.approx(value["value"], abs=tolerance)
            assert value_at(float(bar.get("x"))) == pytest.approx(value["ci"][0], abs=tolerance)
            assert value_at(float(bar.get("x")) + float(bar.get("width"))) == pytest.approx(value["ci"][1], abs=tolerance)
        (arrow,) = [a for a in g.iter(ns + "line") if a.get("class") == "arrow"]
        start = value_at(float(arrow.get("x1")))
        assert start == pytest.approx(overall[name]["value"], abs=tolerance)  # from the raw value ...
        towards = overall[name + "_corrected"]["value"] - overall[name]["value"]
        assert (float(arrow.get("x2")) - float(arrow.get("x1"))) * towards >= 0  # ... towards the corrected one
        assert f"{f(overall[name]['value'])} {ci(overall[name])}" in "".join(g.itertext())


# --- hostile labelled files and exports (issue 34, D10 and D11) ----------------------------------------


def test_fit_counts_each_story_once(tmp_path):
    """D10: the same 60 rows written twice passed the minimum of 30 per class."""
    counts = np.array([[18, 1, 1], [1, 17, 2], [1, 1, 18]])  # 20 stories per class: too few
    once = _labelled(tmp_path, _rows(counts))
    with pytest.raises(BiascheckError, match="fewer than the minimum"):
        fit_calibration(once)
    twice = tmp_path / "twice.jsonl"
    twice.write_text(once.read_text() * 2)
    with pytest.raises(BiascheckError) as refused:
        fit_calibration(twice)
    assert str(refused.value) == (
        f"{twice}: row 61: case_id: story '0' is labelled again (first in row 1); label each story once: delete the repeated rows, then fit again"
    )
    # An unlabelled repeat (a row skipped) is no second label.
    skipped = tmp_path / "skipped.jsonl"
    skipped.write_text(_labelled(tmp_path, _rows(np.array([[45, 3, 2], [4, 40, 6], [3, 2, 35]]))).read_text() + json.dumps(
        {"case_id": "0", "judge_answer": "b", "label": "", "judge": "sim/judge", "prompt": "abc", "language": "en"}
    ) + "\n")  # fmt: skip
    assert fit_calibration(skipped).per_class() == {"b": 50, "c": 50, "u": 40}


def test_fit_refuses_hostile_files_in_one_line(tmp_path, capsys):
    """D10: a deeply nested JSONL line and a CSV cell past 131,072 characters were tracebacks."""
    nested = tmp_path / "nested.jsonl"
    nested.write_text("[" * 100_000 + "]" * 100_000 + "\n")
    huge = tmp_path / "huge.csv"
    huge.write_text("case_id,judge_answer,label,judge,prompt,language\n1,b,b,sim/judge,abc," + "x" * 131_073 + "\n")
    for path, said in ((nested, f"{nested}: line 1: is nested too deeply"), (huge, f"{huge}: line 2: has a cell of more than 131,072 characters")):
        assert main(["judge", "fit", str(path), "--out", str(tmp_path / "calibration.json")]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"biascheck: {said}") and "Traceback" not in err, err


FORMULA_LEADS = "=+-@\t\r"


@given(
    st.lists(
        st.text(max_size=30) | st.sampled_from(['=HYPERLINK("http://x","y")', "+1", "-1", "@SUM(A1)", "\t=1", "\r=1", "'=1", "''"]),
        min_size=1,
        max_size=6,
    )
)
def test_a_csv_sample_holds_no_formula_and_reads_back_as_written(texts):
    """D11: model text such as =HYPERLINK(...) was written verbatim into the annotators' CSV. A cell
    that a spreadsheet would read as a formula starts with ' (OWASP's advice); judge fit reads back
    the text as it was."""
    import csv
    import io

    from biascheck.benchmarks.bbg.judge_calibration import ANNOTATOR_COLUMNS, read_sample, write_sample

    rows = [dict.fromkeys(ANNOTATOR_COLUMNS, "") | {"case_id": str(i), "continuation": text, "question": text[::-1]} for i, text in enumerate(texts)]
    written = write_sample(rows, Path("sample.csv"))
    for row in csv.DictReader(io.StringIO(written)):
        assert not any(cell.startswith(tuple(FORMULA_LEADS)) for cell in row.values()), row
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "sample.csv"
        path.write_text(written, "utf-8")
        assert [dict(row) for row in read_sample(path)] == rows


@pytest.mark.data
def test_export_refuses_another_suites_run_a_bad_seed_and_the_runs_own_files(run_biascheck, tmp_path, data_dir, capsys):
    """D11: --seed -1 was a traceback; kobbg-quick with an enbbg-quick run exited 0, pairing Korean
    seeds with English continuations; --out RUN/results.json overwrote the run's results."""
    suite = write_subset_suite(tmp_path / "enbbg-age", "enbbg-quick", subset='categories = ["age"]')
    first = run_biascheck(suite, "sim/stereotyped?p=0.3", "--biascheck-judge", "sim/judge", report="r1")
    assert first.ret in (0, 1), first.output
    capsys.readouterr()
    run = tmp_path / "r1"
    results = (run / "results.json").read_text("utf-8")
    common = ["--run", str(run), "--data", str(data_dir)]
    for argv, said in (
        (["judge", "export", str(suite), *common, "--out", str(tmp_path / "s.csv"), "--seed", "-1"], "--seed: '-1' is out of range"),
        (
            ["judge", "export", "kobbg-quick", *common, "--out", str(tmp_path / "s.csv")],
            f"--run: suite.name: {run / 'results.json'} is a run of suite 'enbbg-quick', not of 'kobbg-quick'",
        ),
        (["judge", "export", str(suite), *common, "--out", str(run / "results.json")], f"--out: {run / 'results.json'} is a file of the run"),
        (["judge", "export", str(suite), *common, "--out", str(run / "report.md")], f"--out: {run / 'report.md'} is a file of the run"),
    ):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"biascheck: {said}") and "Traceback" not in err, err
    assert (run / "results.json").read_text("utf-8") == results and not (tmp_path / "s.csv").exists()
    # A generation that is a spreadsheet formula reaches the annotators as text.
    document = json.loads(results)
    document["cases"][0]["generation"] = '=HYPERLINK("http://attacker.invalid","click")'
    (run / "results.json").write_text(json.dumps(document), "utf-8")
    n = str(len(document["cases"]))
    assert main(["judge", "export", str(suite), *common, "--n", n, "--out", str(tmp_path / "s.csv")]) == 0
    assert "'=HYPERLINK(" in (tmp_path / "s.csv").read_text("utf-8") and ",=HYPERLINK" not in (tmp_path / "s.csv").read_text("utf-8")


@pytest.mark.data
def test_sim_label_takes_a_packaged_suite_name_as_run_and_judge_export_do(tmp_path, data_dir, capsys):
    """issue 36 §3: sim label --suite enbbg-quick said "no such suite manifest" where run and judge
    export accept the packaged name. A name that is no packaged suite is one line listing them."""
    from biascheck.suite import load_suite

    case = next(c for c in load_suite("enbbg-quick", data_dir=data_dir).cases)
    sample = tmp_path / "sample.jsonl"
    sample.write_text(json.dumps({"case_id": case.case_id, "continuation": "a story", "label": ""}) + "\n")
    out = tmp_path / "labelled.jsonl"
    assert main(["sim", "label", str(sample), "--suite", "enbbg-quick", "--data", str(data_dir), "--out", str(out)]) == 0, capsys.readouterr()
    assert json.loads(out.read_text())["label"] in CLASSES
    assert main(["sim", "label", str(sample), "--suite", "enbbg-quik", "--data", str(data_dir), "--out", str(out)]) == exits.USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'enbbg-quik' is not a packaged suite" in err and "did you mean enbbg-quick?" in err, err


# --- labelling that does not lean on the judge (issue 36 §3) ----------------------------------------


@pytest.mark.data
def test_export_is_blind_and_fit_joins_the_key_on_the_story_id(run_biascheck, tmp_path, data_dir, capsys):
    """The annotators' file held judge_answer: people anchor on a shown answer. It now holds none;
    the answers go to FILE.key.jsonl, which fit joins on case_id. --show-judge shows them (for
    adjudication), and the calibration says it was fitted from unblinded labels."""
    from biascheck.benchmarks.bbg.judge_calibration import read_sample, write_sample

    suite = write_subset_suite(tmp_path / "enbbg-age", "enbbg-quick", subset='categories = ["age"]')
    first = run_biascheck(suite, "sim/stereotyped?p=0.3", "--biascheck-judge", "sim/judge", report="r1")
    assert first.ret in (0, 1), first.output
    results = first.results()
    answers = {r["case_id"]: r["outcome"] for r in results["cases"]}
    common = ["--run", str(tmp_path / "r1"), "--data", str(data_dir), "--n", str(len(answers))]
    for name in ("sample.csv", "sample.jsonl"):
        sample = tmp_path / name
        assert main(["judge", "export", str(suite), *common, "--out", str(sample)]) == 0
        rows = read_sample(sample)
        assert rows and all("judge_answer" not in row for row in rows), rows[0]
        key = read_sample(tmp_path / f"{name}.key.jsonl")
        assert {row["case_id"]: row["judge_answer"] for row in key} == {row["case_id"]: answers[row["case_id"]] for row in rows}
        assert "judge_answer" not in (tmp_path / f"{name}.README.txt").read_text()
    capsys.readouterr()
    labelled = tmp_path / "labelled.csv"
    assert main(["sim", "label", str(tmp_path / "sample.csv"), "--suite", str(suite), "--data", str(data_dir), "--out", str(labelled)]) == 0
    assert "judge_answer" not in labelled.read_text().splitlines()[0]
    # fit needs the key: without it, one line saying where it is.
    assert main(["judge", "fit", str(labelled), "--out", str(tmp_path / "c.json")]) == exits.USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "judge_answer" in err and "--key" in err, err
    # With too few stories per class fit refuses, but only after joining: check the join alone.
    from biascheck.benchmarks.bbg.judge_calibration import labelled_sample

    joined = labelled_sample(labelled, key=tmp_path / "sample.csv.key.jsonl")
    assert joined.blind and len(joined.pairs) == len(answers) and all(answer == answers[case] for case, _, answer in joined.pairs)
    # --show-judge: the answer in the annotators' file, and the fit records that it was shown.
    shown = tmp_path / "shown.csv"
    assert main(["judge", "export", str(suite), *common, "--out", str(shown), "--show-judge"]) == 0
    assert "judge_answer" in shown.read_text().splitlines()[0] and (tmp_path / "shown.csv.key.jsonl").is_file()
    assert "judge_answer" in (tmp_path / "shown.csv.README.txt").read_text()
    for row in (rows := read_sample(shown)):
        row["label"] = "b"
    shown.write_text(write_sample(rows, shown, show_judge=True))
    assert not labelled_sample(shown).blind


def test_an_unblinded_calibration_says_so_in_its_file_id_and_the_runs_scoring(tmp_path):
    from biascheck.benchmarks.bbg.judge_calibration import load_calibration, parse_scoring_value

    counts = np.array([[45, 3, 2], [4, 40, 6], [3, 2, 35]])
    path = _labelled(tmp_path, _rows(counts))  # judge_answer in the labelled file: the annotators saw it
    unblinded = fit_calibration(path, date="2026-01-02")
    assert not unblinded.blind and unblinded.to_json()["blind"] is False
    assert unblinded.scoring_value().endswith(";labels=unblinded")
    # The same counts from blind labels: another calibration (another id, so never compared as one).
    key = tmp_path / "labelled.jsonl.key.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    key.write_text("".join(json.dumps({"case_id": r["case_id"], "judge_answer": r["judge_answer"]}) + "\n" for r in rows))
    path.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "judge_answer"}) + "\n" for r in rows))
    blind = fit_calibration(path, key=key, date="2026-01-02")
    assert blind.blind and blind.matrix.tolist() == counts.tolist() and blind.id != unblinded.id
    assert "labels=" not in blind.scoring_value()
    saved = tmp_path / "calibration.json"
    saved.write_text(json.dumps(unblinded.to_json()))
    assert not load_calibration(saved).blind and load_calibration(saved).id == unblinded.id
    assert parse_scoring_value(unblinded.scoring_value()).counts == unblinded.counts
    # A labelled story missing from the key, and a key holding a story twice, are one line each.
    key.write_text(key.read_text().splitlines()[0] + "\n")
    with pytest.raises(BiascheckError, match=r"row 2: case_id: story '1' is not in the key file .*key.jsonl"):
        fit_calibration(path, key=key)
    with pytest.raises(BiascheckError, match=r"nokey.jsonl: no such file; give the .key.jsonl file biascheck judge export wrote"):
        fit_calibration(path, key=tmp_path / "nokey.jsonl")
    key.write_text((json.dumps({"case_id": "0", "judge_answer": "b"}) + "\n") * 2)
    with pytest.raises(BiascheckError, match=r"key.jsonl: line 2: case_id: story '0' is in the key twice"):
        fit_calibration(path, key=key)


# --- two annotators: their agreement, and no fit from rows they disagree on -------------------------


def test_cohen_kappa_matches_a_hand_computed_table():
    from biascheck.metrics.kappa import cohen_kappa

    first = list("bbcubcuubc")
    second = list("bccubcubbu")
    # Agreement 7/10; both annotators' shares b 0.4, c 0.3, u 0.3: chance 0.16 + 0.09 + 0.09 = 0.34.
    assert cohen_kappa(first, second) == pytest.approx((0.7 - 0.34) / (1 - 0.34))  # 6/11
    assert cohen_kappa(list("bc"), list("cb")) == pytest.approx(-1.0)
    assert cohen_kappa(list("bbb"), list("bbb")) == 1.0  # one class throughout: agreement, not 0/0
    assert math.isnan(cohen_kappa([], []))


@given(st.lists(st.tuples(st.sampled_from(CLASSES), st.sampled_from(CLASSES)), min_size=1, max_size=60))
def test_cohen_kappa_lies_in_minus_one_one_and_is_one_for_identical_columns(rows):
    from biascheck.metrics.kappa import cohen_kappa

    first, second = [a for a, _ in rows], [b for _, b in rows]
    assert -1.0 - 1e-12 <= cohen_kappa(first, second) <= 1.0 + 1e-12
    assert cohen_kappa(first, first) == 1.0


def _two_annotators(tmp_path: Path, counts: np.ndarray, second: dict[int, str], adjudicated: dict[int, str] | None = None) -> Path:
    """A labelled JSONL sample (the judge's answers shown) with a label_2 column: the second
    annotator agrees with the first except on the rows in ``second``."""
    path = _labelled(tmp_path, _rows(counts))
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for i, row in enumerate(rows):
        row["label_2"] = second.get(i, row["label"])
        if adjudicated is not None:
            row["adjudicated"] = adjudicated.get(i, "")
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_fit_reports_two_annotators_kappa_and_refuses_their_disagreements_unless_adjudicated(tmp_path, capsys):
    counts = np.array([[45, 3, 2], [4, 40, 6], [3, 2, 35]])  # rows 0-49 true b, 50-99 c, 100-139 u
    agreeing = _two_annotators(tmp_path, counts, {})
    calibration = fit_calibration(agreeing, date="2026-01-02")
    assert calibration.to_json()["annotators"] == {"cohen_kappa": 1.0, "rows": 140, "adjudicated": 0}
    disagreeing = _two_annotators(tmp_path, counts, {3: "c", 60: "u"})
    with pytest.raises(BiascheckError) as refused:
        fit_calibration(disagreeing)
    assert str(refused.value).startswith(f"{disagreeing}: label_2: the two annotators disagree on 2 of 140 rows (rows 4, 61; Cohen's kappa 0.978)")
    assert "write the agreed label (b, c or u) in an adjudicated column of those rows" in str(refused.value)
    assert main(["judge", "fit", str(disagreeing), "--out", str(tmp_path / "c.json")]) == exits.USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "disagree on 2 of 140 rows" in err, err
    settled = _two_annotators(tmp_path, counts, {3: "c", 60: "u"}, adjudicated={3: "c", 60: "c"})
    fitted = fit_calibration(settled)
    # Row 4 (a true-b story judged b) adjudicated c moves to true c; row 61 stays c.
    assert fitted.matrix.sum() == 140 and fitted.matrix[1].sum() == 51 and fitted.matrix[0].sum() == 49
    assert fitted.to_json()["annotators"]["adjudicated"] == 2
    assert main(["judge", "fit", str(settled), "--out", str(tmp_path / "c.json")]) == 0
    out = capsys.readouterr().out
    assert "two annotators: Cohen's kappa 0.978 over 140 rows (2 adjudicated)" in out, out
    with pytest.raises(BiascheckError, match=r"row 2: label_2: unknown label 'x'"):
        fit_calibration(_two_annotators(tmp_path, counts, {1: "x"}))
