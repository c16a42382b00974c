"""pytest hooks for biascheck. Only hooks live here, each a few lines handing the work to the
session's state (:mod:`.state`); the options are read by :mod:`.options`, the items are in :mod:`.items`.

``pytest --biascheck suites/kobbq --biascheck-model sim/stereotyped``: suite folders are pytest's
positional arguments; after selection (``-k``, node ids) every selected case's model call is made
up front, concurrently; then items read their outcomes and the gated metrics become test results.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from biascheck import options
from biascheck.core import garbage
from biascheck.options import FLAGS, INI_NUMBERS, OPTIONS
from biascheck.pytest_plugin import items as plugin_items
from biascheck.pytest_plugin import once
from biascheck.pytest_plugin.state import STATE_KEY, BiascheckState, pause_collector, resume_collector, session_state

__all__ = ["FLAGS", "INI_NUMBERS", "OPTIONS"]  # the option tables, read by the tests of `pytest --help`


def pytest_addoption(parser: pytest.Parser) -> None:
    options.add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "biascheck: a bias check collected from a suite manifest")
    if not options.enabled(config):
        return
    state = BiascheckState.configure(config)
    config.stash[STATE_KEY] = state
    config.pluginmanager.register(state, "biascheck-state")
    config.pluginmanager.register(once, "biascheck-once")  # a failed check printed once (see .once)
    config.add_cleanup(garbage.thaw)  # registered before pytest's own cleanups, so run after them: see state.pause_collector


@pytest.hookimpl(wrapper=True)
def pytest_collection(session: pytest.Session):
    """The cyclic garbage collector pauses while items are collected (see state.pause_collector)."""
    if session_state(session.config) is None or not pause_collector(session.config):
        return (yield)
    try:
        return (yield)
    finally:
        resume_collector(session.config)


def pytest_collect_file(file_path: Path, parent: pytest.Collector):
    if file_path.name == "suite.toml" and STATE_KEY in parent.config.stash:
        return plugin_items.SuiteFile.from_parent(parent, path=file_path, nodeid=plugin_items.packaged_nodeid(file_path, parent.config))
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    state = session_state(config)
    if state is not None and state.run_config.shard is not None:
        items[:] = plugin_items.keep_shard(config, items, state.run_config.shard)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    state = session_state(session.config)
    resume_collector(session.config)  # before any call: see state.pause_collector
    if state is None or session.config.option.collectonly:
        return  # --collect-only: no model call, and litellm stays unimported
    if sys.exc_info()[1] is not None:
        # pytest calls this hook in a ``finally``: collection was cut short (Ctrl-C, an error), and
        # no call may start on the part it collected.
        return
    state.selected_regressions = plugin_items.selected_metrics(session.items, plugin_items.RegressionItem)
    state.collection_finish(session, plugin_items.selection(session.items), plugin_items.selected_metrics(session.items))


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session):
    """A dry run ends after collection, so that -k and node ids choose what it prices: no item
    runs (each would read outcomes no call made). Ending it here rather than deselecting every item
    keeps "N collected" true and the exit code 0 (1 after a collection error, as for any run).
    So does a run that stopped after collection (Ctrl-C: see :meth:`.state.BiascheckState.stop`).
    Otherwise the items run in :func:`.items.run_items`, unless xdist distributes them."""
    state = session_state(session.config)
    if state is None:
        return None
    return True if state.dry_run or state.stopped is not None else plugin_items.run_items(session)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    if plugin_items.light_protocol(item):
        plugin_items.run_case(item, nextitem)
        return True
    return None


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config):
    return plugin_items.report_status(report)


def pytest_sessionfinish(session: pytest.Session) -> None:
    state = session_state(session.config)
    if state is not None:
        state.session_finish(session)


@pytest.hookimpl(optionalhook=True)  # xdist's hook: pytest without xdist (-p no:xdist) must not refuse the plugin
def pytest_testnodedown(node, error) -> None:
    state = session_state(node.config)
    if state is not None:
        state.merge_worker(getattr(node, "workeroutput", {}))


@pytest.hookimpl(tryfirst=True)
def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    # The failed checks left out of FAILURES go back before any summary reads them (see .once).
    once.restore(terminalreporter, config)
    state = session_state(config)
    if state is not None:
        state.terminal_summary(terminalreporter)
