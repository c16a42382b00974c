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

