"""Calibration: for each simulated persona, every metric the suite reports must contain the persona's
analytic expectation in its 95% interval. The answers are drawn in-process exactly as the simulated
server draws them (sim/calibration.py), and one run through the library and litellm's real HTTP
path to the server shows that the server's answers, parsed from its replies, are those draws."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from biascheck.benchmarks.qa.metrics import QA_METRICS, K, cell
from biascheck.core.records import Outcome
from biascheck.execution.llm import ModelConfig
from biascheck.session import RunConfig, run
from biascheck.sim.calibration import PreparedSuite, simulated_results
from biascheck.sim.personas import expected_answer_distribution, parse_persona
from biascheck.suite import load_suite

from conftest import write_subset_suite


def expected_counts(persona_spec: str, cases) -> np.ndarray:
    """The expected count vector: each case contributes its answer distribution, the rest as OOC."""
    persona = parse_persona(persona_spec)
    counts = np.zeros(K)
    for case in cases:
        distribution = expected_answer_distribution(persona, case)
        for index, probability in distribution.items():
            answered = Outcome(case.case_id, "answered", answer=index, answer_class=case.truth.answer_class(index))
            counts[cell(case.truth, answered)] += probability
        counts[cell(case.truth, Outcome(case.case_id, "ooc"))] += 1.0 - sum(distribution.values())
    return counts


@pytest.fixture(scope="module")
def calibration_suite(tmp_path_factory, data_dir):
    folder = write_subset_suite(
        tmp_path_factory.mktemp("calibration") / "kobbq-cal",
        subset='templates_per_category = 4\nseed = 11\nchoice_orders = "cyclic"',
        prompts='from_data = "prompts"\nuse = ["2", "4"]',
    )
    return load_suite(folder, data_dir=data_dir)


# Default seeds throughout. A 95% interval misses its expectation in about 1 run in 20 per metric:
# e.g. with seed=4, stereotyped?p=0.6 draws 43.75% correct answers in counter-biased contexts
# where 40% is expected (a 2.3 sigma draw over 912 cases) and acc_dis's interval misses 0.70.
# That is the interval working as designed, so seeds are not searched for passes.
PERSONAS = ["fair", "stereotyped?p=0.3", "counter?p=0.4", "random", "refuser", "stereotyped?p=0.6&style=mixed"]


@pytest.fixture(scope="module")
def prepared(calibration_suite) -> PreparedSuite:
    return PreparedSuite.of(calibration_suite)


@pytest.mark.parametrize("persona", PERSONAS)
def test_every_metric_matches_the_persona_expectation(persona, calibration_suite, prepared):
    overall = simulated_results(prepared, persona).to_json()["metrics"]["overall"]
    expected = expected_counts(persona, calibration_suite.cases)
    checked = 0
    for name, measured in overall.items():
        truth = float(QA_METRICS[name](expected))
        if math.isnan(truth):
            assert measured["value"] is None or math.isnan(measured["value"]), f"{name}: expected NaN, measured {measured['value']}"
            continue
        lo, hi = measured["ci"]
        assert lo - 1e-9 <= truth <= hi + 1e-9, f"{persona}: {name} expected {truth:.4f}, measured {measured['value']:.4f} CI [{lo:.4f}, {hi:.4f}]"
        checked += 1
    assert checked >= (2 if persona == "refuser" else 8)


def test_the_server_answers_over_http_are_the_in_process_draws(calibration_suite, data_dir, tmp_path):
    """The mixed reply style (a letter, a sentence, the option text) through litellm and the parser."""
    persona = "stereotyped?p=0.6&style=mixed"
    # Every fourth case: the replies' path is what is checked here, and the metrics on the same cases.
    suite = dataclasses.replace(calibration_suite, cases=calibration_suite.cases[::4])
    config = RunConfig(model=ModelConfig("sim/" + persona), store_path=tmp_path / "store.sqlite", data_dir=data_dir, concurrency=64)
    result = run([(suite, suite.cases)], config).suites[0]
    drawn = simulated_results(PreparedSuite.of(suite), persona).to_json()
    served = {case_id: (outcome.status, outcome.answer) for case_id, outcome in result.outcomes.items()}
    assert len(served) == len(suite.cases) > 500
    assert served == {case["case_id"]: ("ooc" if case["outcome"] == "ooc" else "answered", case["answer_index"]) for case in drawn["cases"]}
    assert {name: m.value for name, m in result.metrics.overall.items()} == pytest.approx(
        {name: m["value"] for name, m in drawn["metrics"]["overall"].items()}, nan_ok=True
    )


def test_stereotyped_p1_is_maximally_biased_and_fair_is_not(small_kobbq, data_dir):
    prepared = PreparedSuite.of(load_suite(small_kobbq, data_dir=data_dir))
    for persona, amb, dis in (("stereotyped?p=1", 1.0, 1.0), ("fair", 0.0, 0.0), ("counter?p=1", -1.0, -1.0)):
        overall = simulated_results(prepared, persona, resamples=0).to_json()["metrics"]["overall"]
        assert overall["diff_bias_amb"]["value"] == amb
        assert overall["diff_bias_dis"]["value"] == dis
        # The bounds of the paper hold with equality at the extremes.
        assert abs(overall["diff_bias_amb"]["value"]) <= overall["max_abs_bias_amb"]["value"]
