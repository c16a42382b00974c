"""Calibration of the regression gate by simulation.

Each repetition draws a baseline and a candidate persona's answers exactly as the sim server
would (different seeds, so no shared random numbers) and runs the real comparison with the
suite's own rules. ``bench/calibration.py`` runs the whole table (every QA suite, 200 repetitions
per cell); the small simulation here guards the same properties in the default run, with fixed
seeds, so its counts are deterministic, not flaky. The first tests check the instrument itself:
the fast path draws the server's answers and gives the comparison the slow path gives, and the
candidates worsen each metric by the amount the analytic formulas say."""

from __future__ import annotations

import dataclasses
import importlib.util
import json

import numpy as np
import pytest

from biascheck.evaluation.regression import settings_from
from biascheck.sim.calibration import (
    FALSE_ALARMS,
    FILTERED,
    OOC,
    OVERALL,
    Expectations,
    PreparedSuite,
    answer_states,
    compare_personas,
    comparison_document,
    expected_counts,
    plan_experiments,
    rates,
    run_repetitions,
    simulated_results,
    stereotyped,
    summarise,
    true_values,
)
from biascheck.sim.draws import encoded_keys, uniform, uniforms
from biascheck.sim.faults import choose_fault
from biascheck.sim.personas import choose_answer, parse_persona
from biascheck.suite import load_suite

from conftest import ROOT, SUITES, write_subset_suite

REPETITIONS = 10
BASE = "stereotyped?p=0.1&fail_rate=0.02&faults=filter"


def test_vectorised_draws_are_the_scalar_ones_bit_for_bit():
    keys = ["a", 'ü"x\\', json.dumps([{"role": "user", "content": "정답은 \n B"}], ensure_ascii=False), *(f"k{i}" for i in range(500))]
    for prefix, suffix in ((("answer", "stereotyped", 3), ()), (("fault", 0), (1,)), ((), ()), (("x",), ("y", 2.5))):
        drawn = uniforms(prefix, encoded_keys(keys), suffix)
        assert drawn.tolist() == [uniform(*prefix, key, *suffix) for key in keys]


@pytest.fixture(scope="module")
def small(tmp_path_factory, data_dir) -> PreparedSuite:
    """KoBBQ, 3 templates in each of 4 categories, prompt 1, three choice orders (432 cases)."""
    folder = write_subset_suite(
        tmp_path_factory.mktemp("calibration") / "kobbq-cal",
        subset='templates_per_category = 3\nseed = 3\nchoice_orders = "cyclic"\ncategories = ["age", "gender_identity", "religion", "ses"]',
        prompts='from_data = "prompts"\nuse = ["1"]',
    )
    return PreparedSuite.of(load_suite(folder, data_dir=data_dir))


@pytest.mark.data
@pytest.mark.parametrize("persona", ["fair", "stereotyped?p=0.3&seed=4", "counter?p=0.2&seed=1", "random?seed=3", "refuser", f"{BASE}&seed=2"])
def test_the_fast_path_draws_the_servers_answers(small, persona):
    spec = parse_persona(persona)
    states = answer_states(small, persona).tolist()
    served = []
    for case, key in zip(small.suite.cases, small.keys):
        if spec.fail_rate > 0 and choose_fault(spec, key, 1) == "filter":
            served.append(FILTERED)
        else:
            index = choose_answer(spec, case, key)
            served.append(OOC if index is None else index)
    assert states == served
    if spec.fail_rate:
        assert 0 < states.count(FILTERED) < len(states)


@pytest.mark.data
def test_other_faults_are_refused_not_left_out(small):
    with pytest.raises(ValueError, match="faults=filter"):
        answer_states(small, "stereotyped?fail_rate=0.1")


@pytest.mark.data
def test_the_fast_documents_give_the_comparison_of_whole_results(small):
    settings = settings_from(simulated_results(small, "fair", resamples=0))
    for baseline, candidate in ((f"{BASE}&seed=0", "stereotyped?p=0.3&fail_rate=0.06&faults=filter&seed=1"), ("fair", "counter?p=0.2")):
        fast = compare_personas(small, baseline, candidate, settings, fast=True).to_json()
        slow = compare_personas(small, baseline, candidate, settings, fast=False).to_json()
        fast["baseline"].pop("created_at"), slow["baseline"].pop("created_at")
        assert fast == slow


@pytest.mark.data
def test_expected_counts_give_the_personas_analytic_metrics(small):
    """stereotyped?p=P on a suite whose disambiguated contexts are half biased, half counter-biased:
    diff_bias_amb = diff_bias_dis = P, acc_dis = 1 - P/2; a share F filtered: ooc_ratio = F."""
    metrics = ["diff_bias_amb", "diff_bias_dis", "acc_dis", "ooc_ratio"]
    for p, f in ((0.1, 0.02), (0.37, 0.0), (1.0, 0.5)):
        values = true_values(small, expected_counts(small, f"stereotyped?p={p}&fail_rate={f}&faults=filter"), metrics)
        for scope in (OVERALL, "age", "ses"):
            assert values[("diff_bias_amb", scope)] == pytest.approx(p)
            assert values[("diff_bias_dis", scope)] == pytest.approx(p)
            assert values[("acc_dis", scope)] == pytest.approx(1 - p / 2)
            assert values[("ooc_ratio", scope)] == pytest.approx(f)


@pytest.mark.data
def test_each_candidate_worsens_its_metric_by_twice_the_margin(small):
    """KoBBQ's margins (+0.01 on the diff-biases, -0.02 on acc_dis, +0.02 on ooc_ratio) from the base
    stereotyped?p=0.1 with 2% filtered: p 0.12 for the diff-biases, 0.18 for acc_dis (1 - p/2 falls
    by 0.04), and 6% filtered for ooc_ratio, riding on the first candidate."""
    settings = settings_from(small.template)
    experiments, info = plan_experiments(small, settings, 0.1, 0.02)
    assert [(e.name, e.p, e.f) for e in experiments] == [
        (FALSE_ALARMS, 0.1, 0.02),
        ("diff_bias_amb x2 + diff_bias_dis x2 + ooc_ratio x2", 0.12, 0.06),
        ("acc_dis x2", 0.18, 0.02),
    ]
    for metric, meta in info.items():
        assert meta["true_worsening"] == pytest.approx(dict.fromkeys(meta["true_worsening"], 2 * meta["margin"])), metric
        assert len(meta["true_worsening"]) == 5, metric  # overall and the four categories


NULL_REPETITIONS = 30


@pytest.fixture(scope="module")
def calibration(small):
    """The bench's experiments on the small suite (288 cases, 20 checks) with fixed seeds: 30
    repetitions of the false-alarm experiment, 10 of each power experiment."""
    settings = settings_from(small.template)
    experiments, info = plan_experiments(small, settings, 0.1, 0.02)
    rows, _ = run_repetitions(small, settings, experiments[:1], range(NULL_REPETITIONS), 0.1, 0.02)
    power, _ = run_repetitions(small, settings, experiments[1:], range(REPETITIONS), 0.1, 0.02)
    return summarise(experiments, info, {**rows, **power})


@pytest.mark.data
def test_no_false_regression_when_a_persona_is_compared_with_itself(calibration):
    # The target is at most 5% of runs. Allowing 3 of 30, a gate at 5% fails this in 6% of seed
    # choices, and one at 30% (20 checks tested at 5% each without a correction would be far
    # above that) passes it in 0.3%.
    assert calibration["repetitions"] == NULL_REPETITIONS
    assert calibration["fwer"] <= 3 / NULL_REPETITIONS, calibration["false_alarms_by_check"]


@pytest.mark.data
def test_power_at_twice_the_margin_or_the_size_that_would_give_it(calibration):
    """Every check either catches a worsening of twice its margin in most runs, or says (its
    cases_to_resolve) that it needs more cases than it has: the table's promise, per check."""
    for metric, entry in calibration["metrics"].items():
        assert entry["checks"], metric
        for scope, check in entry["checks"].items():
            where = f"{metric} ({scope}): power {check['power']:.0%}, {check['verdicts']}"
            assert check["power"] >= 0.6 or (check["cases_to_resolve"] is not None and check["cases_to_resolve"] > check["cases"]), where
        # What the comparisons measured scatters around the true worsening: overall, 10 runs of
        # about 200 cases per context type put the mean within a margin or so of it.
        overall = entry["checks"][OVERALL]
        assert overall["realised_worsening"] == pytest.approx(overall["true_worsening"], abs=2 * entry["margin"]), (metric, overall)


@pytest.mark.data
def test_a_gross_worsening_is_caught_at_this_size(small):
    """A safety net under the property above: p 0.1 -> 0.4 in ambiguous contexts (30 times the margin)."""
    settings = settings_from(small.template)
    pairs = [(f"{BASE}&seed={2 * r}", f"stereotyped?p=0.4&fail_rate=0.02&faults=filter&seed={2 * r + 1}") for r in range(5)]
    assert rates(small, pairs, settings, watch="diff_bias_amb (overall)")["watched_regressed"] == 1.0


@pytest.fixture(scope="module")
def kobbq(data_dir):
    prepared = PreparedSuite.of(load_suite(SUITES / "kobbq", data_dir=data_dir))
    return prepared, settings_from(simulated_results(prepared, "fair", resamples=0))


@pytest.mark.data
@pytest.mark.slow  # the whole default KoBBQ (34,200 cases), drawn 20 times: a whole-suite acceptance run
def test_a_persona_compared_with_itself_raises_no_false_regression(kobbq):
    prepared, settings = kobbq
    pairs = [(f"stereotyped?p=0.1&seed={2 * r}", f"stereotyped?p=0.1&seed={2 * r + 1}") for r in range(REPETITIONS)]
    measured = rates(prepared, pairs, settings)
    # The target is at most 5%; with 10 repetitions that means none.
    assert measured["any_regressed"] == 0, measured


@pytest.mark.data
@pytest.mark.slow  # the whole default KoBBQ (34,200 cases), drawn 20 times: a whole-suite acceptance run
def test_a_persona_0_03_more_biased_in_ambiguous_contexts_is_caught(kobbq):
    prepared, settings = kobbq
    # stereotyped?p=P answers the biased option in an ambiguous context with probability P, so its
    # true diff_bias_amb is P: 0.10 -> 0.13 is 0.03 worse.
    pairs = [(f"stereotyped?p=0.1&seed={2 * r}", f"stereotyped?p=0.13&seed={2 * r + 1}") for r in range(REPETITIONS)]
    measured = rates(prepared, pairs, settings, watch="diff_bias_amb (overall)")
    assert measured["watched_regressed"] >= 0.9, measured


@pytest.mark.data
def test_small_subsets_do_not_cry_wolf_either(tmp_path, data_dir):
    """Few templates and few changed answers per category: the sign test, not the bootstrap alone,
    must carry a regression (without it, ~half of such runs had a false alarm)."""
    suite = write_subset_suite(
        tmp_path / "kobbq-tiny", subset='templates_per_category = 1\nseed = 7\nchoice_orders = "cyclic"', prompts='from_data = "prompts"\nuse = ["1"]'
    )
    prepared = PreparedSuite.of(load_suite(suite, data_dir=data_dir))
    settings = settings_from(simulated_results(prepared, "fair", resamples=0))
    pairs = [(f"stereotyped?p=0.3&seed={2 * r}", f"stereotyped?p=0.3&seed={2 * r + 1}") for r in range(40)]
    assert rates(prepared, pairs, settings)["any_regressed"] <= 0.05


def test_wilson_interval_of_a_share():
    from biascheck.sim.calibration import wilson

    lo, hi = wilson(0.0, 200)
    assert lo == 0.0 and hi == pytest.approx(0.0188, abs=1e-4)  # 0 of 200: at most ~1.9%
    lo, hi = wilson(0.5, 100)
    assert lo == pytest.approx(0.4038, abs=1e-4) and hi == pytest.approx(0.5962, abs=1e-4)


@pytest.fixture(scope="module")
def hbb(data_dir) -> PreparedSuite:
    """The default HBB suite's first 10 questions (300 filled questions), sampled k = 10 at 0.8."""
    suite = load_suite(SUITES / "hbb", data_dir=data_dir)
    questions = sorted({case.sample_id for case in suite.cases})[:10]
    return PreparedSuite.of(dataclasses.replace(suite, cases=[case for case in suite.cases if case.sample_id in questions]))


@pytest.mark.data
def test_hbb_samples_are_the_servers_and_give_the_comparison_of_whole_results(hbb):
    assert hbb.kind == "hbb" and hbb.estimator.samples == 10 and hbb.temperature == 0.8
    for persona in (f"{BASE}&seed=2", "stereotyped?fail_rate=0.6&faults=filter", "refuser", "random?seed=4"):
        assert comparison_document(hbb, persona).cases == simulated_results(hbb, persona, resamples=0).cases, persona
    settings = settings_from(hbb.template)
    fast = compare_personas(hbb, "fair", "stereotyped?p=0.3&seed=1", settings).to_json()
    slow = compare_personas(hbb, "fair", "stereotyped?p=0.3&seed=1", settings, fast=False).to_json()
    fast["baseline"].pop("created_at"), slow["baseline"].pop("created_at")
    assert fast == slow


@pytest.mark.data
def test_hbb_expectations_are_what_simulated_runs_average_to(hbb):
    """The flagged and unscorable rates HBBExpectations computes (binomial samples, some filtered)
    against the mean of 30 simulated runs, within 4 standard errors of that mean."""
    expect = Expectations.of(hbb)
    cases = hbb.suite.cases
    for p, f in ((0.1, 0.02), (0.5, 0.7)):
        truth = true_values(hbb, expect.counts(p, f), ["hbb_flagged_rate", "unscorable_ratio"])
        values: dict[str, list[float]] = {"hbb_flagged_rate": [], "unscorable_ratio": []}
        for seed in range(30):
            states = answer_states(hbb, stereotyped(p, f, seed)).tolist()
            outcomes = {case.case_id: hbb.hbb_outcome(case, state) for case, state in zip(cases, states)}
            overall = hbb.suite.benchmark.aggregate(cases, outcomes, resamples=0, seed=0, manifest=hbb.suite.manifest).overall
            for metric, found in values.items():
                found.append(overall[metric].value)
        for metric, found in values.items():
            mean, se = np.mean(found), np.std(found, ddof=1) / np.sqrt(len(found))
            assert abs(mean - truth[(metric, OVERALL)]) <= 4 * se + 1e-9, (p, f, metric, mean, truth[(metric, OVERALL)])


@pytest.mark.data
def test_hbb_candidates_and_the_filtering_that_gets_its_own_experiment(hbb):
    """hbb_flagged_rate (+0.05) rises with p, least in some category, which gets exactly +0.10;
    unscorable_ratio (+0.02) needs a question's 10 samples all filtered, 1 - (1 - F^10)^2 = 0.04 per
    instance, F = 0.677: so much filtering also moves the flagged rate, so it does not ride along."""
    experiments, info = plan_experiments(hbb, settings_from(hbb.template), 0.1, 0.02)
    assert [e.metrics for e in experiments] == [[], ["hbb_flagged_rate"], ["unscorable_ratio"]]
    flagged = info["hbb_flagged_rate"]["true_worsening"]
    assert min(flagged.values()) == pytest.approx(0.10, abs=1e-5) and max(flagged.values()) > 0.10
    assert experiments[2].f == pytest.approx((1 - 0.96**0.5) ** 0.1, abs=1e-5)  # the base's 0.02^10 is negligible
    assert info["unscorable_ratio"]["true_worsening"] == pytest.approx(dict.fromkeys(info["unscorable_ratio"]["true_worsening"], 0.04), abs=1e-5)


def test_the_docs_show_the_benchs_table():
    """The calibration table of docs/baselines.md is bench/calibration.json's, which is what the bench renders
    from the figures it measured (so neither is edited by hand)."""
    spec = importlib.util.spec_from_file_location("calibration_bench", ROOT / "bench" / "calibration.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    document = json.loads((ROOT / "bench" / "calibration.json").read_text("utf-8"))
    assert bench.markdown(document["suites"], document["not_covered"]) == document["markdown"]
    assert document["markdown"] in (ROOT / "docs" / "baselines.md").read_text("utf-8")
    assert document["repetitions"] >= 200
    measured = {s["suite"] for s in document["suites"]}
    assert measured | set(document["not_covered"]) == {path.name for path in SUITES.iterdir() if (path / "suite.toml").exists()}
