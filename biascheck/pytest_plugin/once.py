"""A failed check printed once. pytest would print a failed threshold check three times: its
block in FAILURES (a header and the one line), biascheck's summary (a FAIL row of its table) and
the short test summary (``FAILED <node id> - <the line>``). The FAILURES block says nothing the
other two do not, so it is left out for the checks biascheck's summary shows: every failed
threshold check, and every failed regression check whose explanation the comparison summary
prints. The failed reports themselves are untouched: the short test summary (``-rf``, what the
GitHub action's log shows), ``--junitxml``, the ``::error`` annotations and ``--lf`` see them all.

pytest prints FAILURES before the plugins' terminal summaries and the short test summary after
them (``TerminalReporter.pytest_terminal_summary`` wraps them), so :func:`pytest_terminal_summary`,
a wrapper around it, sets those reports aside from ``stats["failed"]`` before FAILURES is printed,
and :func:`restore` (first of the plugins' summaries) puts them back in their place.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import pytest

from biascheck.pytest_plugin.state import session_state

if TYPE_CHECKING:
    from biascheck.records.comparison import Comparison

_KEY = pytest.StashKey[list]()


def _shown_by_biascheck(report: pytest.TestReport, explanations: set[str]) -> bool:
    properties = dict(report.user_properties)
    if "biascheck_metric" in properties:
        return True
    return properties.get("biascheck_regression") in explanations


def _printed_explanations(comparisons: Iterable[Comparison]) -> set[str]:
    """The regression explanations the comparison summary prints (render_comparison_terminal)."""
    return {
        c.explanation
        for comparison in comparisons
        for c in comparison.checks
        if c.verdict == "regressed" or (c.verdict == "inconclusive" and c.scope == "overall")
    }


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config):
    state = session_state(config)
    failed = terminalreporter.stats.get("failed")
    if state is not None and state.checked is not None and state.checked.runs and failed:
        explanations = _printed_explanations(state.comparisons.values())
        config.stash[_KEY] = list(failed)
        failed[:] = [report for report in failed if not _shown_by_biascheck(report, explanations)]
        if not failed:
            del terminalreporter.stats["failed"]  # as if none had failed: no FAILURES heading
    try:
        return (yield)
    finally:
        restore(terminalreporter, config)


def restore(terminalreporter, config: pytest.Config) -> None:
    """``stats["failed"]`` as it was (nothing when nothing was set aside)."""
    kept = config.stash.get(_KEY, None)
    if kept is not None:
        del config.stash[_KEY]
        terminalreporter.stats["failed"] = kept
