"""The issue's acceptance run: the whole KoBBQ protocol (34,200 calls) against sim/fair, cold and warm.

It is the slowest test (about three minutes, bound by litellm's per-call CPU), so it lives in the
first file collected: under ``pytest -n 2`` one worker runs it while the other runs the rest.
"""

from __future__ import annotations

import pytest

from conftest import SUITES


@pytest.mark.slow
def test_full_kobbq_fair_passes_and_warm_rerun_makes_zero_calls(run_biascheck):
    cold = run_biascheck(SUITES / "kobbq", "sim/fair")
    assert cold.ret == 0, cold.output[-3000:]
    results = cold.results()
    assert results["run"]["cases"] == 34200 and results["run"]["calls"] == 34200
    assert all(v["passed"] for v in results["verdicts"])
    warm = run_biascheck(SUITES / "kobbq", "sim/fair", report="warm")
    assert warm.ret == 0
    assert warm.results()["run"]["calls"] == 0 and warm.results()["run"]["cache_hits"] == 34200
    assert warm.results()["metrics"] == results["metrics"]


@pytest.mark.slow
def test_full_kobbg_fair_with_the_sim_judge_passes_and_warm_rerun_makes_zero_calls(run_biascheck):
    """The headline command, offline: all five KoBBG runs, generation then judging."""
    cold = run_biascheck(SUITES / "kobbg", "sim/fair", "--biascheck-judge", "sim/judge")
    assert cold.ret == 0, cold.output[-3000:]
    results = cold.results()
    run = results["run"]
    assert run["cases"] == 5720
    # One generation per story version (2,860, of which 10 pairs of versions share the very same
    # seed and so one generation) and one judge call per question (the same 10 pairs also ask
    # the very same question about the very same story once).
    assert run["calls"] - run["judge_calls"] == 2850 and run["judge_calls"] == 5710
    assert results["metrics"]["overall"]["ntr_gen"]["value"] == 1.0
    warm = run_biascheck(SUITES / "kobbg", "sim/fair", "--biascheck-judge", "sim/judge", report="warm")
    assert warm.ret == 0 and warm.results()["run"]["calls"] == 0
    assert warm.results()["metrics"] == results["metrics"]
