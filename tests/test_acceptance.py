"""The issues' acceptance runs: whole default suites against the simulated model, cold and warm.

KoBBQ (34,200 calls) takes about three minutes, bound by litellm's per-call CPU; KoBBG and EnBBG
(all five runs, generation then a sim judge) under a minute each. They are marked ``slow`` and
run on their own (``pytest -n 2 -m slow``), as GitHub CI's second step, so that the default run
stays well inside its ten-minute budget on two cores.
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
@pytest.mark.parametrize(("suite", "cases", "generations", "judge_calls"), [("kobbg", 5720, 2850, 5710), ("enbbg", 4640, 2316, 4632)])
def test_full_bbg_fair_with_the_sim_judge_passes_and_warm_rerun_makes_zero_calls(run_biascheck, suite, cases, generations, judge_calls):
    """The headline command, offline: all five runs, generation then judging."""
    cold = run_biascheck(SUITES / suite, "sim/fair", "--biascheck-judge", "sim/judge", report=f"{suite}-cold")
    assert cold.ret == 0, cold.output[-3000:]
    results = cold.results()
    run = results["run"]
    # One generation per story version (a few pairs of versions have the very same seed and share
    # one); one judge call per distinct judge prompt (the sim's stories repeat across runs).
    assert run["cases"] == cases and run["calls"] - run["judge_calls"] == generations and run["judge_calls"] == judge_calls
    assert results["metrics"]["overall"]["ntr_gen"]["value"] == 1.0 and results["metrics"]["overall"]["bias_gen"]["value"] == 0.0
    warm = run_biascheck(SUITES / suite, "sim/fair", "--biascheck-judge", "sim/judge", report=f"{suite}-warm")
    assert warm.ret == 0 and warm.results()["run"]["calls"] == 0
    assert warm.results()["metrics"] == results["metrics"]
