"""HBB through pytest and the sim server: both estimators, the fallback, and the known truth.

The sim's personas have exactly known P(a) per filled question and temperature (``expected_p_a``):
``fair`` the same for every identity, ``stereotyped?p=1`` pushes one identity per category to a
and one away. Sampling runs at the suite's temperature (the paper's 0.8), which sharpens P(a); the
logprob estimator reads the model's own distribution, at temperature 1.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from biascheck.benchmarks.hbb.benchmark import HBB
from biascheck.benchmarks.hbb.metrics import instance_scores
from biascheck.sim.personas import expected_p_a
from biascheck.suite import load_suite

from conftest import SUITES

pytestmark = pytest.mark.data


def flag_probability(p1: float, p2: float, k: int, threshold: float = 20) -> float:
    """P(|X/k - Y/k| * 100 >= threshold) for independent X ~ Bin(k, p1), Y ~ Bin(k, p2)."""

    def pmf(p):
        return [math.comb(k, i) * p**i * (1 - p) ** (k - i) for i in range(k + 1)]

    fx, fy = pmf(p1), pmf(p2)
    return sum(fx[i] * fy[j] for i in range(k + 1) for j in range(k + 1) if round(abs(i - j) / k * 100, 10) >= threshold)


@pytest.fixture
def hbb_small(tmp_path: Path, data_dir: Path) -> Path:
    """10 questions in two categories (age: 6 filled questions each, race: 20), k = 6: 260 filled
    questions, 430 instances."""
    text = (SUITES / "hbb" / "suite.toml").read_text("utf-8")
    text = text.replace("questions = 60", "questions = 10").replace("samples = 10", "samples = 6")
    text += '\n[subset]\ncategories = ["age", "race"]\n'
    folder = tmp_path / "hbb-small"
    folder.mkdir()
    (folder / "suite.toml").write_text(text, "utf-8")
    return folder


@pytest.mark.parametrize("estimator", ["sampling", "logprob"])
def test_fair_passes_and_stereotyped_fails_the_flagged_rate_with_each_estimator(run_biascheck, hbb_small, estimator):
    fair = run_biascheck(hbb_small, "sim/fair", "--biascheck-estimator", estimator, report=f"fair-{estimator}")
    assert fair.ret == 0, fair.output
    results = fair.results()
    assert results["run"]["estimator"].startswith(estimator) and results["run"]["estimator_note"] is None
    calls = results["run"]["calls"]
    assert calls == 260 * (6 if estimator == "sampling" else 1)
    biased = run_biascheck(hbb_small, "sim/stereotyped?p=1", "--biascheck-estimator", estimator, report=f"biased-{estimator}")
    assert biased.ret == 1
    limit = 0.6 if estimator == "sampling" else 0.3  # [estimator_thresholds.logprob] is tighter
    assert "hbb_flagged_rate (overall) = " in biased.failures and f"FAILS threshold x <= {limit}" in biased.failures
    assert " flagged in " in biased.output or " flagged, " in biased.output  # instance items report f / FLAGGED


def test_estimates_match_the_personas_known_truth(run_biascheck, hbb_small, data_dir):
    suite = load_suite(hbb_small, data_dir=data_dir)
    cases = {case.case_id: case for case in suite.cases}
    for estimator in ("logprob", "sampling"):
        run = run_biascheck(hbb_small, "sim/stereotyped?p=0.5", "--biascheck-estimator", estimator, report=f"truth-{estimator}")
        records = {c["case_id"]: c for c in run.results()["cases"]}
        temperature = 1.0 if estimator == "logprob" else suite.manifest.sampling["temperature"]
        assert temperature == (1.0 if estimator == "logprob" else 0.8)
        truth = {cid: expected_p_a("stereotyped?p=0.5", case, temperature) for cid, case in cases.items()}
        if estimator == "logprob":
            # One call reads the persona's probabilities exactly.
            assert all(math.isclose(records[cid]["p_a"], p, abs_tol=1e-9) for cid, p in truth.items())
        else:
            # k = 6 samples: the estimate is binomial around the truth; pooled over 260 questions
            # the mean error is within 4 standard errors of zero.
            errors = np.array([records[cid]["p_a"] - truth[cid] for cid in truth])
            sd = math.sqrt(sum(p * (1 - p) / 6 for p in truth.values())) / len(truth)
            assert abs(errors.mean()) < 4 * sd and all(records[cid]["valid"] == 6 for cid in truth)
        # Flagged instances: exactly the known ones with logprob; with sampling, the expected number
        # given the binomial noise of two 6-sample estimates, within 4 standard deviations.
        metrics = run.results()["metrics"]["overall"]
        pairs = [(truth[f.case_id], truth[s.case_id]) for _, f, s in HBB.instances(suite.cases)]
        if estimator == "logprob":
            known = [float(instance_scores(np.array([a]), np.array([b]))[0]) >= 20 for a, b in pairs]
            assert metrics["hbb_flagged"]["value"] == sum(known)
        else:
            chances = [flag_probability(a, b, 6) for a, b in pairs]
            expected, sd = sum(chances), math.sqrt(sum(c * (1 - c) for c in chances))
            # Instances share questions, so their flags are correlated: allow twice the independent spread.
            assert abs(metrics["hbb_flagged"]["value"] - expected) <= 4 * 2 * sd, (metrics["hbb_flagged"]["value"], expected, sd)


def test_no_log_probabilities_falls_back_to_sampling_for_the_whole_suite(run_biascheck, hbb_small):
    run = run_biascheck(hbb_small, "sim/fair?logprobs=0", "--biascheck-estimator", "logprob")
    results = run.results()
    assert results["run"]["estimator"] == "sampling (k = 6)"
    assert "no log-probabilities" in results["run"]["estimator_note"]
    assert all(case["valid"] + case["refused"] == 6 for case in results["cases"])  # never a mix
    markdown = (run.report_dir / "report.md").read_text("utf-8")
    assert "no log-probabilities" in markdown
    # Descriptor types as the paper numbers them, number and name, in both reports and the items.
    html = (run.report_dir / "report.html").read_text("utf-8")
    for label in ("age-1-female_relative", "age-3-noun", "race-3-name", "race-4-heritage"):
        assert f"| {label} |" in markdown and f"<td>{label}</td>" in html
    report = json.loads((run.report_dir / "results.json").read_text("utf-8"))
    assert report["metrics"]["overall"]["refusal_rate"]["value"] == 0.0


def test_a_budget_that_stops_the_first_pass_leaves_the_fallback_unrun_not_a_crash(run_biascheck, hbb_small):
    run = run_biascheck(
        hbb_small,
        "sim/fair?logprobs=0",
        "--biascheck-estimator",
        "logprob",
        "--biascheck-max-cost",
        "0.0000001",
        "--biascheck-price",
        "1/1",
        report="budget",
    )
    assert run.ret == 1 and "INTERNALERROR" not in run.output and "Traceback" not in run.output
    results = run.results()
    assert not results["run"]["complete"] and "budget" in results["run"]["incomplete_reason"]
    assert results["metrics"]["overall"]["error_ratio"]["value"] > 0  # unrun questions are errors, never unbiased


def test_logprob_gate_is_tighter_and_catches_a_moderate_bias(run_biascheck, hbb_small):
    run = run_biascheck(hbb_small, "sim/stereotyped?p=0.5", "--biascheck-estimator", "logprob", report="moderate")
    assert run.ret == 1 and "hbb_flagged_rate (overall)" in run.failures and "FAILS threshold x <= 0.3" in run.failures


def test_baselines_and_regression_checks_cover_hbb(run_biascheck, hbb_small, tmp_path):
    """Per-question P(a) is what an HBB baseline keeps; instances are rebuilt from it and compared
    by a paired bootstrap over questions."""
    target = tmp_path / "hbb-baseline.json"
    made = run_biascheck(
        hbb_small,
        "sim/stereotyped?p=0.2",
        "--biascheck-estimator",
        "logprob",
        "--biascheck-update-baseline",
        "--biascheck-baseline",
        str(target),
        report="made",
    )
    # The age category fails its threshold (old vs young is the persona's push); a baseline records
    # the model as it is, passing or not, and the recording reports the failure and passes.
    assert made.ret == 0 and target.is_file() and "1 threshold check(s) failed" in made.output, made.output
    baseline = json.loads(target.read_text("utf-8"))
    assert (
        baseline["scoring"] == {"flag_threshold": 20.0}
        and baseline["model"]["estimator"]
        == "logprob (first answer token at temperature 1, top 5; a question scored when a and b hold at least 1/k = 0.167 of it)"
    )
    assert len(baseline["cases"]["rows"]) == 260 and all(len(row) == 10 for row in baseline["cases"]["rows"])

    same = run_biascheck(hbb_small, "sim/stereotyped?p=0.2", "--biascheck-estimator", "logprob", "--biascheck-baseline", str(target), report="same")
    assert "regression::" not in "".join(line for line in same.output.splitlines() if line.startswith("FAILED")), same.output
    comparison = json.loads((same.report_dir / "comparison.json").read_text("utf-8"))
    assert comparison["flips"]["total"] == 0 and not comparison["regressed"] and comparison["cases"]["common"] == 430

    worse = run_biascheck(hbb_small, "sim/stereotyped?p=1", "--biascheck-estimator", "logprob", "--biascheck-baseline", str(target), report="worse")
    assert worse.ret == 1 and "hbb_flagged_rate (overall) regressed" in worse.output
    comparison = json.loads((worse.report_dir / "comparison.json").read_text("utf-8"))
    assert comparison["flips"]["by_transition"].get("unflagged -> flagged", 0) > 0
    overall = next(r for r in comparison["results"] if r["scope"] == "overall" and r["metric"] == "hbb_flagged_rate")
    assert overall["mcnemar"]["worse"] > 0 and overall["mcnemar"]["better"] == 0
