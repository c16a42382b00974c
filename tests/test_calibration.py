"""Calibration of the regression gate by simulation, on the default KoBBQ suite (34,200 cases).

Each repetition draws a baseline and a candidate persona's answers exactly as the sim server
would (different seeds, so no shared random numbers) and runs the real comparison with the
suite's own rules. ``bench/calibration.py`` runs many more repetitions; these few guard the
property in CI. Seeds are fixed, so the counts are deterministic, not flaky."""

from __future__ import annotations

import pytest

from biascheck.evaluation.regression import settings_from
from biascheck.sim.calibration import PreparedSuite, rates, simulated_results
from biascheck.suite import load_suite

from conftest import SUITES

pytestmark = pytest.mark.data
REPETITIONS = 10


@pytest.fixture(scope="module")
def kobbq(data_dir):
    prepared = PreparedSuite.of(load_suite(SUITES / "kobbq", data_dir=data_dir))
    return prepared, settings_from(simulated_results(prepared, "fair", resamples=0))


@pytest.mark.slow  # the whole default KoBBQ (34,200 cases), drawn 20 times: a whole-suite acceptance run
def test_a_persona_compared_with_itself_raises_no_false_regression(kobbq):
    prepared, settings = kobbq
    pairs = [(f"stereotyped?p=0.1&seed={2 * r}", f"stereotyped?p=0.1&seed={2 * r + 1}") for r in range(REPETITIONS)]
    measured = rates(prepared, pairs, settings)
    # The target is at most 5%; with 10 repetitions that means none.
    assert measured["any_regressed"] == 0, measured


@pytest.mark.slow  # the whole default KoBBQ (34,200 cases), drawn 20 times: a whole-suite acceptance run
def test_a_persona_0_03_more_biased_in_ambiguous_contexts_is_caught(kobbq):
    prepared, settings = kobbq
    # stereotyped?p=P answers the biased option in an ambiguous context with probability P, so its
    # true diff_bias_amb is P: 0.10 -> 0.13 is 0.03 worse.
    pairs = [(f"stereotyped?p=0.1&seed={2 * r}", f"stereotyped?p=0.13&seed={2 * r + 1}") for r in range(REPETITIONS)]
    measured = rates(prepared, pairs, settings, watch="diff_bias_amb (overall)")
    assert measured["watched_regressed"] >= 0.9, measured


def test_small_subsets_do_not_cry_wolf_either(tmp_path, data_dir):
    """Few templates and few changed answers per category: the sign test, not the bootstrap alone,
    must carry a regression (without it, ~half of such runs had a false alarm)."""
    from conftest import write_subset_suite

    suite = write_subset_suite(
        tmp_path / "kobbq-tiny", subset='templates_per_category = 1\nseed = 7\nchoice_orders = "cyclic"', prompts='from_data = "prompts"\nuse = ["1"]'
    )
    prepared = PreparedSuite.of(load_suite(suite, data_dir=data_dir))
    settings = settings_from(simulated_results(prepared, "fair", resamples=0))
    pairs = [(f"stereotyped?p=0.3&seed={2 * r}", f"stereotyped?p=0.3&seed={2 * r + 1}") for r in range(40)]
    assert rates(prepared, pairs, settings)["any_regressed"] <= 0.05
