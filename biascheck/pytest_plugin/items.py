"""pytest nodes for a suite: one item per case, one per gated metric and scope, one per regression
check and scope (with a baseline), one per category without data, one for completeness.

Node ids read as ``suites/kobbq/suite.toml::cases::age::age-001a-002-amb-bsd[p1-o0]`` and
``suites/kobbq/suite.toml::metrics::age::diff_bias_amb``, so ``-k age`` selects a category's
cases and its metric items together. Also what the items decide for the session: which cases a
selection of items calls (:func:`selection`) and how a passed item reports (:func:`report_status`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, TypeGuard, TypeVar

import pytest

from biascheck.core.errors import BiascheckError
from biascheck.evaluation.verdicts import OVERALL
from biascheck.pytest_plugin.state import STATE_KEY, BiascheckState
from biascheck.suite import ALLOW_MISSING_DATA, MISSING_DATA_FIX, Shard, Suite, missing_data_summary

STATUS_PROPERTY = "biascheck_status"
# The line every item reports (reportinfo): an item has no line of its own in suite.toml, and pytest
# needs a number to report a skip that a marker asked for (a conftest's pytest.mark.skip).
MANIFEST_LINE = 0


class BiascheckFailure(Exception):
    """A failed check whose message is the whole story (no traceback is shown)."""


# pytest's --tb styles, which Item.repr_failure takes (pytest does not export the name).
TracebackStyle = Literal["long", "short", "line", "no", "native", "value", "auto"]


class OneLineFailures(pytest.Item):
    """Items whose failures are one line of text, not a traceback into biascheck's internals."""

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: TracebackStyle | None = None) -> Any:
        """The failure's text for a BiascheckFailure, else pytest's own representation (Any: its
        type, a string or pytest's TerminalRepr, is not public)."""
        if isinstance(excinfo.value, BiascheckFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style)


def state_of(node: pytest.Item | pytest.Collector) -> BiascheckState:
    return node.config.stash[STATE_KEY]


NodeT = TypeVar("NodeT", bound=pytest.Item | pytest.Collector)


def parent_of(node: pytest.Item | pytest.Collector, kind: type[NodeT]) -> NodeT:
    """``node``'s parent, which the collection tree below (suite file, cases, category, case) makes a ``kind``."""
    parent = node.parent
    assert isinstance(parent, kind), f"{node.nodeid}: the parent is a {type(parent).__name__}, not a {kind.__name__}"
    return parent


class SuiteFile(pytest.File):
    suite: Suite  # loaded by collect

    def collect(self) -> Iterator[pytest.Item | pytest.Collector]:
        state = state_of(self)
        suite = state.load_suite(self.path)
        self.suite = suite
        yield CasesCollector.from_parent(self, name="cases")
        yield MetricsCollector.from_parent(self, name="metrics")
        if state.baseline.compare:
            # A missing, damaged or incomparable baseline, or a rule naming no metric of this
            # benchmark, is one collection error naming the file or option.
            state.baseline_for(suite)
            state.regression_rules(suite)
            yield RegressionCollector.from_parent(self, name="regression")
        if state.gate.gates_judge_agreement(suite):
            yield JudgeAgreementItem.from_parent(self, name="judge-agreement")
        yield RunCompleteItem.from_parent(self, name="run-complete")

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, BiascheckError):
            return str(excinfo.value)
        return super().repr_failure(excinfo)


class CasesCollector(pytest.Collector):
    def collect(self) -> Iterator[CategoryCollector]:
        suite = parent_of(self, SuiteFile).suite
        by_category: dict[str, list[tuple[str, tuple[str, ...]]]] = {}
        for name, category, case_ids in suite.benchmark.items(suite.cases):
            by_category.setdefault(category, []).append((name, case_ids))
        for category in sorted(set(by_category) | set(suite.skipped_categories)):
            yield CategoryCollector.from_parent(self, name=category, items=by_category.get(category, []))


class CategoryCollector(pytest.Collector):
    def __init__(self, *, items: list[tuple[str, tuple[str, ...]]], **kwargs):
        super().__init__(**kwargs)
        self.items = items
        self._report_keywords: dict[str, Literal[1]] | None = None
        self.case_path: str | None = None  # see CaseItem.location

    def report_keywords(self) -> dict[str, Literal[1]]:
        """The keywords its cases' reports carry from it and above (the same for every case)."""
        if self._report_keywords is None:
            self._report_keywords = dict.fromkeys(self.keywords, 1)
        return self._report_keywords

    def collect(self) -> Iterator[MissingDataItem | CaseItem]:
        suite = parent_of(parent_of(self, CasesCollector), SuiteFile).suite
        reason = suite.skipped_categories.get(self.name)
        if reason is not None:
            yield MissingDataItem.from_parent(self, name="missing-data", reason=reason)
            return
        for name, case_ids in self.items:
            yield CaseItem.from_parent(self, name=name, nodeid=self._case_nodeid(name), case_ids=case_ids)

    def _case_nodeid(self, name: str) -> object:  # pytest 9's NodeId (not public), a str, or None
        """A case's node id, its "[p1-o0]" as parameters, exactly as pytest parses the ids it reads
        back from its cache (otherwise --lf cannot find failed cases). Built from this collector's
        id where pytest has structured ids (9.x), so 100,000 cases share its parts rather than
        each parse a copy; given as text to older pytest; left to pytest for a name without one."""
        base, bracket, params = name.partition("[")
        if not bracket:
            return None
        structured = getattr(self, "id", None)
        if structured is not None and hasattr(structured, "with_params"):
            return structured.child(base).with_params(params.removesuffix("]"))
        return f"{self.nodeid}::{name}"


class CaseItem(OneLineFailures):
    """One case (an HBB instance: two). Passes unless a model call errored after retries; its
    report status says what the model did (biased, out of choice, flagged, ...)."""

    def __init__(self, *, case_ids: tuple[str, ...], **kwargs):
        super().__init__(**kwargs)
        self.case_ids = case_ids

    @property
    def category(self) -> CategoryCollector:
        return parent_of(self, CategoryCollector)

    @property
    def suite_file(self) -> SuiteFile:
        return parent_of(parent_of(self.category, CasesCollector), SuiteFile)

    def runtest(self) -> None:
        state = state_of(self)
        suite = self.suite_file.suite
        outcomes = [state.outcome(self.suite_file, case_id) for case_id in self.case_ids]
        status, error = suite.benchmark.item_status(outcomes, [suite.case(case_id) for case_id in self.case_ids], suite.manifest)
        self.user_properties.append((STATUS_PROPERTY, status))
        if error:
            raise BiascheckFailure(f"model call failed: {error}")

    def reportinfo(self):
        return self.path, MANIFEST_LINE, f"{self.parent.name}::{self.name}"

    @functools.cached_property
    def location(self) -> tuple[str, int | None, str]:
        """pytest's ``Item.location``, whose path, relative to the rootdir, is the suite file's for
        every case: found once per category rather than once per case."""
        category = self.category
        if category.case_path is None:
            # mypy reads a cached_property taken from its class as the function; it is the descriptor, with .func.
            category.case_path = pytest.Item.location.func(self)[0]  # type: ignore[attr-defined]
        return (category.case_path, MANIFEST_LINE, f"{category.name}::{self.name}")


class MissingDataItem(OneLineFailures):
    """A category whose data file could be had nowhere (mirror, cache, download): a failed check, so
    that a run of part of a suite never passes as the suite; skipped, with the reason, when the run
    accepts the gap (--biascheck-allow-missing-data)."""

    def __init__(self, *, reason: str, **kwargs):
        super().__init__(**kwargs)
        self.reason = reason

    def runtest(self) -> None:
        category = parent_of(self, CategoryCollector).name
        if state_of(self).run_config.allow_missing_data:
            pytest.skip(f"no data for {category}, as {ALLOW_MISSING_DATA} accepts: {self.reason}")
        raise BiascheckFailure(f"no data for category {category}: {self.reason}; {MISSING_DATA_FIX}")

    def reportinfo(self):
        return self.path, MANIFEST_LINE, f"{parent_of(self, CategoryCollector).name}::missing-data"


class MetricsCollector(pytest.Collector):
    def collect(self) -> Iterator[ScopeCollector]:
        suite = parent_of(self, SuiteFile).suite
        for scope in [OVERALL, *suite.categories]:
            yield ScopeCollector.from_parent(self, name=scope)


class ScopeCollector(pytest.Collector):
    @property
    def suite_file(self) -> SuiteFile:
        return parent_of(parent_of(self, MetricsCollector), SuiteFile)

    def collect(self) -> Iterator[MetricItem]:
        manifest = self.suite_file.suite.manifest
        for metric in manifest.gated_metrics(None if self.name == OVERALL else self.name):
            yield MetricItem.from_parent(self, name=metric)


class ScopedItem(OneLineFailures):
    """An item about every case of its scope (overall or one category): selecting it runs them all."""

    @property
    def scope_collector(self) -> ScopeCollector | RegressionScope:
        parent = self.parent
        assert isinstance(parent, ScopeCollector | RegressionScope), f"{self.nodeid}: the parent is a {type(parent).__name__}, not a scope"
        return parent

    @property
    def suite_file(self) -> SuiteFile:
        return self.scope_collector.suite_file

    @property
    def scope(self) -> str:
        return self.scope_collector.name


class MetricItem(ScopedItem):
    """A gated aggregate over the cases of its scope (overall or one category)."""

    def runtest(self) -> None:
        verdict = state_of(self).verdict(self.suite_file, self.scope, self.name)
        if verdict is None:
            pytest.skip(f"no selected cases in {self.scope}")
        self.user_properties.append(("biascheck_metric", verdict.explain()))
        if not verdict.passed:
            raise BiascheckFailure(verdict.explain())
        if verdict.status == "inconclusive":
            self.user_properties.append((STATUS_PROPERTY, verdict.status))

    def reportinfo(self):
        return self.path, MANIFEST_LINE, f"{self.scope}::{self.name}"


class RegressionCollector(pytest.Collector):
    def collect(self) -> Iterator[RegressionScope]:
        suite = parent_of(self, SuiteFile).suite
        for scope in [OVERALL, *suite.categories]:
            yield RegressionScope.from_parent(self, name=scope)


class RegressionScope(pytest.Collector):
    @property
    def suite_file(self) -> SuiteFile:
        return parent_of(parent_of(self, RegressionCollector), SuiteFile)

    def collect(self) -> Iterator[RegressionItem]:
        for metric in state_of(self).regression_rules(self.suite_file.suite):
            yield RegressionItem.from_parent(self, name=metric)


class RegressionItem(ScopedItem):
    """A metric of one scope compared with the baseline: fails when it credibly got worse by more
    than its rule's margin (and, with on_inconclusive = fail, when that cannot be told)."""

    def runtest(self) -> None:
        state = state_of(self)
        check = state.check(self.suite_file, self.scope, self.name)
        if check is None:
            pytest.skip(f"no selected cases in {self.scope}")
        self.user_properties.append(("biascheck_regression", check.explanation))
        verdict = check.verdict
        strict = state.comparisons[self.suite_file.suite.name].on_inconclusive == "fail"
        if verdict == "regressed" or (strict and verdict in ("inconclusive", "not compared")):
            raise BiascheckFailure(check.explanation)
        if verdict == "not compared":
            pytest.skip(check.explanation)
        if verdict in ("inconclusive", "improved"):
            self.user_properties.append((STATUS_PROPERTY, verdict))

    def reportinfo(self):
        return self.path, MANIFEST_LINE, f"regression::{self.scope}::{self.name}"


class RunCompleteItem(OneLineFailures):
    """Fails when the run stopped early (budget, fatal model error), when categories of this suite
    had no data (unless accepted), or a case of this suite has no answer after retries: metrics over
    the answered cases alone are not evidence of a pass."""

    def runtest(self) -> None:
        state = state_of(self)
        reason = state.incomplete_reason()
        if reason:
            raise BiascheckFailure(f"the run is incomplete: {reason}")
        suite_file = parent_of(self, SuiteFile)
        suite = suite_file.suite
        if suite.skipped_categories and not state.run_config.allow_missing_data:
            raise BiascheckFailure(
                f"the run is incomplete: {missing_data_summary(suite.skipped_categories, suite.categories_total)} "
                f"(see the categories' missing-data items); {MISSING_DATA_FIX}"
            )
        errors = state.case_errors(suite_file)
        if errors is None:
            pytest.skip("no case of this suite was selected")
        if errors:
            raise BiascheckFailure(f"the run is incomplete: {errors} case(s) errored after retries (see the case items and error_ratio)")

    def reportinfo(self):
        return self.path, MANIFEST_LINE, "run-complete"


class JudgeAgreementItem(OneLineFailures):
    """Fails when the suite's judges agree below its ``min_alpha``: their readings are too unlike
    to gate on (a suite read by several judges with a floor)."""

    def runtest(self) -> None:
        from biascheck.reporting.decision import agreement_text
        from biascheck.reporting.results import agreement_line

        record = state_of(self).record(parent_of(self, SuiteFile))
        if record is None:
            pytest.skip("no case of this suite was selected")
        judging = record.judging
        if judging is None or judging.agreement_passed is None:
            pytest.skip("no agreement was checked (a shard, or batches not yet scored)")
        if judging.agreement_failed:
            raise BiascheckFailure(agreement_text(judging))
        self.user_properties.append(("biascheck_metric", agreement_line(judging)))

    def reportinfo(self):
        return self.path, MANIFEST_LINE, "judge-agreement"


# Options under which every item takes pytest's full protocol: a debugger, the fixture display.
_FULL_PROTOCOL_OPTIONS = ("usepdb", "trace", "setupshow", "setuponly", "setupplan")


def light_protocol(item: pytest.Item) -> TypeGuard[CaseItem]:
    """Whether an item takes :func:`run_case`: a case item, unless an option wants pytest's own protocol
    or a marker was put on it or above it (a skip or xfail added by a conftest: pytest's setup reads them)."""
    return (
        isinstance(item, CaseItem)
        and not any(getattr(item.config.option, name, False) for name in _FULL_PROTOCOL_OPTIONS)
        and next(item.iter_markers(), None) is None
    )


def run_case(item: CaseItem, nextitem: pytest.Item | None) -> None:
    """pytest's run-test protocol for a case item, less what a case has no use for. A case has no
    fixtures and neither prints nor logs (it reads an outcome made before any item ran), so the
    hooks that capture output and logs around each phase, and keep pytest's setup state, run only
    where the setup state must move: for the last case of its category (the next item has another
    parent, or there is none), whose pytest_runtest_setup and pytest_runtest_teardown set up what
    the next item shares with it and tear down the rest. The cases before it in its category need
    neither: what they share with the next case is already set up, and a case's own setup is
    empty. Around every case, those hooks cost KoBBQ's 34,200 cases some ten seconds. The call is
    reported through pytest_runtest_logreport as always (the terminal, --lf, junitxml, xdist), and
    so is a setup or teardown that fails or skips, with its report from pytest_runtest_makereport,
    and so from every plugin's. A setup or teardown that passes carries nothing (no output was
    captured) and is not reported: pytest's terminal keeps every such report and scans them all
    once per failing test for teardown output, which cost a warm KoBBQ run with 39 failing checks
    over two seconds. Under --junitxml the teardown is reported, as pytest writes it, since
    junitxml writes a test's properties (the case's status) from it."""
    ihook = item.ihook
    nodeid, location = item.nodeid, item.location
    ihook.pytest_runtest_logstart(nodeid=nodeid, location=location)
    keywords = {item.name: 1, **item.category.report_keywords()}  # what dict.fromkeys(item.keywords, 1) gives, unmarked
    report_id = getattr(item, "id", nodeid)  # pytest 9's structured id, which reports would parse from the text
    reraise = (pytest.exit.Exception, KeyboardInterrupt)
    unreported = ("setup",) if item.config.option.xmlpath else ("setup", "teardown")
    # Whether the setup state moves at this case (see above): decided before its call, whose
    # failure may stop the session (-x), as pytest's setup is.
    moves = nextitem is None or nextitem.parent is not item.parent

    def phase(when, func) -> bool:
        call = pytest.CallInfo.from_call(func, when=when, reraise=reraise)
        if call.excinfo is None:
            if when in unreported:
                return True
            report = pytest.TestReport(
                report_id, location, keywords, "passed", None, when, (), call.duration, call.start, call.stop, item.user_properties
            )
        else:
            report = ihook.pytest_runtest_makereport(item=item, call=call)
        ihook.pytest_runtest_logreport(report=report)
        return report.passed

    if not moves or phase("setup", lambda: ihook.pytest_runtest_setup(item=item)):
        phase("call", item.runtest)
    if item.session.shouldfail or item.session.shouldstop:
        nextitem = None  # as pytest's protocol: the session ends after this item (its end tears down the rest)
    if moves:
        phase("teardown", lambda: ihook.pytest_runtest_teardown(item=item, nextitem=nextitem))
    elif "teardown" not in unreported:
        phase("teardown", _nothing)
    ihook.pytest_runtest_logfinish(nodeid=nodeid, location=location)


def _nothing() -> None:
    """A case's own teardown: it set nothing up."""


def run_items(session: pytest.Session) -> bool | None:
    """pytest's test loop (its own pytest_runtestloop), where a case item that may take the
    light protocol runs :func:`run_case` without going through pytest_runtest_protocol: that hook's
    wrappers (warnings capture, assertion hooks, faulthandler) have nothing to act on in a case,
    which only reads its outcome, and cost KoBBQ's 34,200 cases over a second. None (pytest's own
    loop) under xdist, whose controller and workers run their own loops."""
    config = session.config
    if config.pluginmanager.has_plugin("dsession") or hasattr(config, "workerinput"):
        return None
    if session.testsfailed and not config.option.continue_on_collection_errors:
        raise session.Interrupted(f"{session.testsfailed} error{'s' if session.testsfailed != 1 else ''} during collection")
    if config.option.collectonly:
        return True
    items = session.items
    for i, item in enumerate(items):
        nextitem = items[i + 1] if i + 1 < len(items) else None
        if light_protocol(item):
            run_case(item, nextitem)
        else:
            item.ihook.pytest_runtest_protocol(item=item, nextitem=nextitem)
        if session.shouldfail:
            raise session.Failed(session.shouldfail)
        if session.shouldstop:
            raise session.Interrupted(session.shouldstop)
    return True


def packaged_nodeid(file_path: Path, config: pytest.Config) -> str | None:
    """The node id of an installed packaged suite: biascheck/suites/<name>/suite.toml. pytest would
    name a file outside the rootdir relative to its argument, so every packaged suite would be
    plain ``suite.toml``. None (pytest's own id) for any other file."""
    from biascheck.config.catalog import packaged_suites_dir

    root = packaged_suites_dir().resolve()
    path = file_path.resolve()
    if not path.is_relative_to(root) or path.is_relative_to(Path(config.rootpath).resolve()):
        return None
    return f"biascheck/suites/{path.relative_to(root).as_posix()}"


def keep_shard(config: pytest.Config, collected: list[pytest.Item], shard: Shard) -> list[pytest.Item]:
    """The items of one shard's cases (``--biascheck-shard``). Metric and regression items are
    deselected: a shard judges no verdict, the run on the merged store does."""

    def kept(item: pytest.Item) -> bool:
        if isinstance(item, CaseItem):
            return all(shard.holds(item.suite_file.suite.case(case_id)) for case_id in item.case_ids)
        return not isinstance(item, ScopedItem)

    config.hook.pytest_deselected(items=[item for item in collected if not kept(item)])
    return [item for item in collected if kept(item)]


def selection(items: list[pytest.Item]) -> list[tuple[SuiteFile, list]]:
    """Which cases to call: the selected case items, plus every case in the scope of a selected
    metric or regression item. A metric is always measured on its whole scope, so a selection
    such as ``--lf`` (failed cases + failed metrics) cannot turn a red gate green."""
    chosen: dict[SuiteFile, set[str]] = {}
    scopes: dict[SuiteFile, set[str]] = {}
    for item in items:
        if isinstance(item, CaseItem):
            chosen.setdefault(item.suite_file, set()).update(item.case_ids)
        elif isinstance(item, ScopedItem):
            chosen.setdefault(item.suite_file, set())
            scopes.setdefault(item.suite_file, set()).add(item.scope)
    selected = []
    for suite_file, picked in chosen.items():
        wanted = scopes.get(suite_file, set())
        every = OVERALL in wanted
        selected.append((suite_file, [c for c in suite_file.suite.cases if every or c.category in wanted or c.case_id in picked]))
    return selected


def selected_metrics(items: list[pytest.Item], kind: type[ScopedItem] | None = None) -> dict[str, set[tuple[str, str]]]:
    """Suite name -> the (scope, metric) of its selected metric items (or items of ``kind``, e.g.
    RegressionItem): the checks that gate the run."""
    chosen: dict[str, set[tuple[str, str]]] = {}
    for item in items:
        if isinstance(item, kind or MetricItem):
            chosen.setdefault(item.suite_file.suite.name, set()).add((item.scope, item.name))
    return chosen


# How a passed item reports what the model did: (category, letter, word).
REPORT_STATUS = {
    "biased": ("biased", "b", "BIASED"),
    "ooc": ("ooc", "o", "OUT-OF-CHOICE"),
    "filtered": ("filtered", "~", "CONTENT-FILTERED"),
    "flagged": ("flagged", "f", "FLAGGED"),
    "unscorable": ("unscorable", "u", "UNSCORABLE"),
    "inconclusive": ("inconclusive", "?", "INCONCLUSIVE"),
    "improved": ("improved", "+", "IMPROVED"),
    # BBG: what the judge read in the story (the pair types come from two of these).
    "b": ("biased", "b", "B (BIASED)"),
    "c": ("counter-biased", "c", "C (COUNTER-BIASED)"),
    "u": ("undetermined", "u", "U (UNDETERMINED)"),
    "empty": ("empty", "e", "EMPTY-GENERATION"),
    # Several judges whose readings settled no class (a tie, a split).
    "disagreed": ("disagreed", "d", "JUDGES DISAGREE"),
}


def report_status(report: pytest.TestReport):
    """(category, letter, word) of a passed item's call that says what the model did, else None."""
    if report.when != "call" or not report.passed:
        return None
    status = dict(report.user_properties).get(STATUS_PROPERTY)
    return REPORT_STATUS.get(status) if isinstance(status, str) else None
