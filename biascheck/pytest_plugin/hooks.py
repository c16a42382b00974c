"""pytest hooks for biascheck. Only hooks live here; the work is done by :mod:`biascheck.session`.

``pytest --biascheck suites/kobbq --biascheck-model sim/stereotyped``: suite folders are pytest's
positional arguments; after selection (``-k``, node ids) every selected case's model call is made
up front, concurrently; then items read their outcomes and the gated metrics become test results.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from biascheck.core.errors import BiascheckError
from biascheck.evaluation.verdicts import OVERALL
from biascheck.execution.runner import FATAL, STORE_FAILURE
from biascheck.pytest_plugin.items import (
    STATE_KEY,
    STATUS_PROPERTY,
    CaseItem,
    ScopedItem,
    SuiteFile,
)

if TYPE_CHECKING:
    from biascheck.config.suite import Suite
    from biascheck.session import RunConfig, RunResult

OPTIONS = (
    # (option, ini key, env var, help)
    ("--biascheck-model", "biascheck_model", "BIASCHECK_MODEL", "litellm model string, or sim/<persona> for the simulated model"),
    (
        "--biascheck-model-revision",
        "biascheck_model_revision",
        "BIASCHECK_MODEL_REVISION",
        "what is served under the model string (a release tag, a commit, a checkpoint): part of every stored answer's key, "
        "so a model redeployed under the same name is asked again",
    ),
    ("--biascheck-data", "biascheck_data", "BIASCHECK_DATA_DIR", "mirror folder holding the benchmark files (else cache, then download)"),
    ("--biascheck-cache", "biascheck_cache", "BIASCHECK_CACHE", "response store (SQLite); default .biascheck/responses.sqlite"),
    ("--biascheck-concurrency", "biascheck_concurrency", None, "concurrent model calls, a whole number (default 32)"),
    ("--biascheck-report", "biascheck_report", None, "folder for results.json, report.md, report.html (replaced whole by each run)"),
    (
        "--biascheck-max-cost",
        "biascheck_max_cost",
        None,
        "stop issuing calls before this many USD would be spent, a number (calls in flight count at the mean cost per call); "
        "the run then fails as incomplete",
    ),
    ("--biascheck-api-base", "biascheck_api_base", None, "API base URL (vLLM, Ollama, a proxy)"),
    ("--biascheck-timeout", "biascheck_timeout", None, "seconds per model call attempt, a number (default 60)"),
    ("--biascheck-price", "biascheck_price", None, "INPUT/OUTPUT USD per million tokens, for models litellm has no price for"),
    ("--biascheck-retries", "biascheck_retries", None, "retries per call after 429/5xx/timeouts, a whole number (default 6)"),
    (
        "--biascheck-estimator",
        "biascheck_estimator",
        None,
        "HBB: estimate P(a) by 'sampling' (k answers) or 'logprob' (one call); default: the manifest's",
    ),
    (
        "--biascheck-judge",
        "biascheck_judge",
        "BIASCHECK_JUDGE",
        "BBG: the evaluator model that reads the stories (litellm string or sim/<persona>); default: the suite's [bbg.judge]",
    ),
    ("--biascheck-judge-api-base", "biascheck_judge_api_base", None, "BBG: the judge's API base URL (else its provider's variable)"),
    ("--biascheck-judge-price", "biascheck_judge_price", None, "BBG: INPUT/OUTPUT USD per million tokens for a judge litellm has no price for"),
    (
        "--biascheck-bbg-unscorable",
        "biascheck_bbg_unscorable",
        None,
        "BBG: a pair with an out-of-choice judge answer or an empty or filtered story is left out ('exclude') or read as u "
        "as in the paper ('unknown'); errored calls never are; default: the suite's [bbg] unscorable",
    ),
    (
        "--biascheck-baseline",
        "biascheck_baseline",
        "BIASCHECK_BASELINE",
        "baseline file to compare with ({suite}: the suite name, {model}: the model slug); with --biascheck-update-baseline, "
        "where to write it (default baselines/{suite}/release.json)",
    ),
)
FLAGS = (
    # (option, ini key, help)
    (
        "--biascheck-update-baseline",
        None,
        "write or replace the baseline from this run (default path baselines/{suite}/release.json); refused for partial or errored "
        "runs. Failed thresholds are reported, but a run that wrote every baseline passes (see --biascheck-strict-record)",
    ),
    (
        "--biascheck-strict-record",
        "biascheck_strict_record",
        "with --biascheck-update-baseline: a failed threshold fails the run even though the baseline was written",
    ),
    ("--biascheck-allow-fingerprint-mismatch", None, "compare with a baseline made from other data, prompts or subset, on the cases both share"),
    (
        "--biascheck-fail-inconclusive",
        "biascheck_fail_inconclusive",
        "fail regression checks that can neither show nor rule out a worsening beyond the margin",
    ),
    ("--biascheck-rejudge", None, "BBG: judge the stored generations again (e.g. with another --biascheck-judge): no generation call is made"),
    (
        "--biascheck-qualify-judge",
        "biascheck_qualify_judge",
        "BBG: first run the judge on the disambiguated QA items of [bbg.judge_qualification] and warn when it falls short",
    ),
    (
        "--biascheck-dry-run",
        None,
        "print the calls the selected cases would make (the response store's answers subtracted) and their cost in USD, "
        "then stop: no model call, no test run",
    ),
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("biascheck", "bias regression testing")
    group.addoption(
        "--biascheck",
        action="store_true",
        help="collect suite folders (suite.toml) as bias tests; a bare name that is no folder here (kobbq) is the packaged suite",
    )
    group.addoption(
        "--biascheck-suite",
        action="append",
        default=[],
        metavar="NAME",
        help="run a suite shipped with biascheck, by name (implies --biascheck); see `biascheck suites`",
    )
    for option, ini, env, text in OPTIONS:
        group.addoption(option, default=None, help=text + (f" [env {env}]" if env else ""))
        parser.addini(ini, text, type=INI_NUMBERS.get(ini, "string"), default=None)
    for option, ini, text in FLAGS:
        group.addoption(option, action="store_true", default=False, help=text)
        if ini:
            parser.addini(ini, text, type="bool", default=False)
    group.addoption(
        "--biascheck-param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override a sampling parameter of the manifests (temperature, seed, max_tokens, ...)",
    )
    group.addoption(
        "--biascheck-compare-fail",
        action="append",
        default=[],
        metavar="METRIC:MARGIN",
        help="regression rule, e.g. diff_bias_amb:+0.02 or acc_dis:-2%% (overrides the manifest's margin)",
    )
    parser.addini("biascheck_compare_fail", "regression rules, one METRIC:MARGIN per line", type="linelist", default=[])


# Typed, so that `pytest --help` says what they take; checked again by _run_config's number().
INI_NUMBERS = {"biascheck_concurrency": "int", "biascheck_retries": "int", "biascheck_max_cost": "float", "biascheck_timeout": "float"}


def _setting(config: pytest.Config, option: str, ini: str, env: str | None) -> str | None:
    value = config.getoption(option.lstrip("-").replace("-", "_"))
    if value is None and env:
        value = os.environ.get(env) or None
    if value is None:
        try:
            value = config.getini(ini)
        except (ValueError, TypeError, pytest.UsageError):  # pytest's message names neither the file nor the key
            kind = "a whole number" if INI_NUMBERS.get(ini) == "int" else "a number"
            raise BiascheckError(
                config.inipath or "ini file", ini, f"is not {kind}", f"e.g. {ini} = {'32' if kind == 'a whole number' else '1.5'}"
            ) from None
        value = None if value in (None, "") else str(value)
    return value


@dataclass
class BaselineOptions:
    pattern: str | None
    update: bool
    rules: list  # command-line Rules
    allow_mismatch: bool
    fail_inconclusive: bool
    strict_record: bool = False

    @property
    def compare(self) -> bool:
        return self.pattern is not None and not self.update


@dataclass(eq=False)  # registered as a plugin: hashed by identity
class BiascheckState:
    """What one pytest session knows: its settings, then the run's result and its JSON rendering."""

    config: pytest.Config
    run_config: RunConfig
    baseline: BaselineOptions
    report_dir: Path | None = None
    dry_run: bool = False
    result: RunResult | None = None
    results_json: list[dict] | None = None
    baselines: dict = field(default_factory=dict)  # suite name -> (path, loaded baseline)
    comparisons: dict = field(default_factory=dict)  # suite name -> comparison document
    # Failed reports seen by this process (the controller's under xdist): thresholds, and the rest.
    failed_thresholds: int = 0
    failed_other: int = 0

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """(Registered as a plugin.) A recording run forgives failed thresholds and nothing else."""
        if report.failed:
            if any(name == "biascheck_metric" for name, _ in report.user_properties):
                self.failed_thresholds += 1
            else:
                self.failed_other += 1

    def load_suite(self, manifest_path: Path) -> Suite:
        from biascheck.config.suite import load_suite
        from biascheck.session import judge_for

        suite = load_suite(manifest_path.parent, data_dir=self.run_config.data_dir)
        judge_for(suite, self.run_config)  # a judged suite without a judge is a collection error
        return suite

    def fingerprint(self, suite: Suite) -> dict:
        from biascheck.session import judge_for, scoring_for

        judge = judge_for(suite, self.run_config)
        return suite.fingerprint(judge.identity() if judge else None, scoring_for(suite, self.run_config))

    # --- what items read -------------------------------------------------------------------

    def _suite_result(self, suite_file):
        for result in self.result.suites:
            if result.suite is suite_file.suite:
                return result
        raise BiascheckError(suite_file.path, None, "was not run", "report this as a biascheck bug")

    def baseline_for(self, suite: Suite):
        """The baseline a suite is compared with: loaded and checked once, at collection."""
        if suite.name not in self.baselines:
            from biascheck.evaluation import baseline as baselines
            from biascheck.evaluation.regression import check_comparable

            path = baselines.baseline_path(
                self.baseline.pattern, suite=suite.name, model=self.run_config.model.model, root=self.config.invocation_params.dir
            )
            document = baselines.load(path)
            check_comparable(
                document,
                {"name": suite.name, "benchmark": suite.manifest.benchmark, "fingerprint": self.fingerprint(suite)},
                allow_mismatch=self.baseline.allow_mismatch,
                path=str(path),
            )
            self.baselines[suite.name] = (path, document)
        return self.baselines[suite.name]

    def regression_rules(self, suite: Suite) -> dict:
        from biascheck.evaluation.regression import resolve_rules

        return resolve_rules(suite.manifest.benchmark, suite.manifest.gated_metrics(None), suite.manifest.regression.rules, self.baseline.rules)

    def check(self, suite_file, scope: str, metric: str):
        comparison = self.comparisons.get(suite_file.suite.name)
        if comparison is None:
            return None
        for result in comparison["results"]:
            if result["scope"] == scope and result["metric"] == metric:
                return result
        return None

    def outcome(self, suite_file, case_id: str):
        return self._suite_result(suite_file).outcomes[case_id]

    def verdict(self, suite_file, scope: str, metric: str):
        for verdict in self._suite_result(suite_file).verdicts:
            if verdict.scope == scope and verdict.metric == metric:
                return verdict
        return None

    def case_errors(self, suite_file) -> int | None:
        """Errored cases of the suite in this run; ``None`` when none of its cases was selected."""
        if not any(r.suite is suite_file.suite for r in self.result.suites):
            return None
        return sum(o.status == "error" for o in self._suite_result(suite_file).outcomes.values())

    def incomplete_reason(self) -> str | None:
        return self.result.incomplete if self.result else None


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "biascheck: a bias check collected from a suite manifest")
    if not (config.getoption("biascheck") or config.getoption("biascheck_suite")):
        return
    try:
        _resolve_suite_names(config)
        _run_suites_in_one_process(config)
        run_config = _run_config(config)
        if config.getoption("biascheck_dry_run") and getattr(config.option, "numprocesses", None):
            raise BiascheckError(
                "--biascheck-dry-run", None, "cannot be combined with -n (pytest-xdist)", "drop -n: a dry run makes no call to share"
            )
    except BiascheckError as exc:
        raise pytest.UsageError(str(exc)) from None
    report = _setting(config, "--biascheck-report", "biascheck_report", None)
    if report and Path(report).exists() and not Path(report).is_dir():
        raise pytest.UsageError(f"--biascheck-report: {report} is a file; give a folder (it is created if missing)")
    try:
        baseline = _baseline_options(config)
    except BiascheckError as exc:
        raise pytest.UsageError(str(exc)) from None
    state = BiascheckState(config, run_config, baseline, report_dir=Path(report) if report else None, dry_run=config.getoption("biascheck_dry_run"))
    config.stash[STATE_KEY] = state
    config.pluginmanager.register(state, "biascheck-state")


def _run_suites_in_one_process(config: pytest.Config) -> None:
    """pytest-xdist gives a session of bias suites alone nothing: the model calls are concurrent in
    one process already, while every worker would collect every item and read every answer again
    and the controller relay three reports per item (a warm KoBBQ took 2.6 times as long under -n 2).
    Such a session runs in this process; mixed with other tests, it is distributed as asked."""
    if hasattr(config, "workerinput") or getattr(config.option, "dist", "no") == "no" or not getattr(config.option, "tx", None):
        return
    if config.args_source != pytest.Config.ArgsSource.ARGS or not all(map(_names_a_suite, config.args)):
        return
    workers = len(config.option.tx)
    config.option.dist, config.option.tx, config.option.numprocesses = "no", [], 0
    config.stash[ONE_PROCESS_NOTE] = (
        f"biascheck: bias suites only, so one process instead of {workers} xdist workers "
        "(calls are concurrent already; workers would repeat the collection and the run)"
    )


def _names_a_suite(arg: str) -> bool:
    path = Path(arg.split("::", 1)[0])
    return path.name == "suite.toml" or (path / "suite.toml").is_file()


ONE_PROCESS_NOTE = pytest.StashKey[str]()


def _resolve_suite_names(config: pytest.Config) -> None:
    """Packaged suites named on the command line become the paths pytest collects: each
    ``--biascheck-suite NAME``, and a bare argument (``kobbq``) that is no file or folder here.
    Given only ``--biascheck-suite``, they replace pytest's default arguments (testpaths or the
    working folder): the named suites alone run. (xdist workers repeat this from the same command line.)"""
    from biascheck.config.catalog import looks_like_a_name, packaged_suite

    here = Path(config.invocation_params.dir)
    given = config.args_source == pytest.Config.ArgsSource.ARGS
    args = list(config.args) if given else []
    for index, arg in enumerate(args):
        if looks_like_a_name(arg) and not (here / arg).exists():
            try:
                args[index] = str(packaged_suite(arg))
            except BiascheckError as exc:
                raise BiascheckError(arg, None, "no such file or folder, nor a packaged suite", f"{exc.fix}; or give a suite folder's path") from None
    for name in config.getoption("biascheck_suite"):
        path = str(packaged_suite(name))
        if path not in args:
            args.append(path)
    if args:
        config.args = args


def _baseline_options(config: pytest.Config) -> BaselineOptions:
    from biascheck.config.manifest import Rule

    texts = list(config.getini("biascheck_compare_fail")) + list(config.getoption("biascheck_compare_fail"))
    update = config.getoption("biascheck_update_baseline")
    return BaselineOptions(
        pattern=_setting(config, "--biascheck-baseline", "biascheck_baseline", "BIASCHECK_BASELINE"),
        update=update,
        rules=[Rule.parse_option(text) for text in texts],
        allow_mismatch=config.getoption("biascheck_allow_fingerprint_mismatch"),
        fail_inconclusive=config.getoption("biascheck_fail_inconclusive") or bool(config.getini("biascheck_fail_inconclusive")),
        strict_record=config.getoption("biascheck_strict_record") or bool(config.getini("biascheck_strict_record")),
    )


def _run_config(config: pytest.Config):
    from biascheck.benchmarks.bbg.metrics import UNSCORABLE_CONVENTIONS
    from biascheck.config.manifest import parse_sampling_overrides
    from biascheck.execution.llm import ModelConfig, Price, validate_model_string
    from biascheck.execution.runner import RetryPolicy
    from biascheck.session import RunConfig

    def setting(option: str) -> str | None:
        for name, ini, env, _ in OPTIONS:
            if name == option:
                return _setting(config, name, ini, env)
        raise KeyError(option)

    def number(option: str, kind, default, minimum):
        text = setting(option)
        if text is None:
            return default
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or not math.isfinite(value) or value < minimum:
            raise BiascheckError(option, None, f"{text!r} is not a {kind.__name__} >= {minimum}", f"e.g. {option} {default or 1}")
        return value

    model = setting("--biascheck-model")
    if not model:
        raise BiascheckError("--biascheck-model", None, "no model named", "pass --biascheck-model MODEL (e.g. sim/fair or openai/gpt-4o-mini)")
    validate_model_string(model, api_base=setting("--biascheck-api-base"))
    price = setting("--biascheck-price")
    data = setting("--biascheck-data")
    # Relative to where pytest was started, not its rootdir: the rootdir is the common ancestor of
    # every path-like argument (a data mirror elsewhere makes it /), which no user expects.
    cache = setting("--biascheck-cache") or str(Path(config.invocation_params.dir) / ".biascheck" / "responses.sqlite")
    model_config = ModelConfig(
        model=model,
        params=parse_sampling_overrides(config.getoption("biascheck_param")),
        api_base=setting("--biascheck-api-base"),
        timeout=number("--biascheck-timeout", float, 60.0, 0.001),
        price=Price.parse(price) if price else None,
        revision=setting("--biascheck-model-revision") or None,
    )
    max_cost = number("--biascheck-max-cost", float, None, 0.0)
    run_id = getattr(config, "workerinput", {}).get("testrunuid")
    estimator = setting("--biascheck-estimator")
    if estimator not in (None, "sampling", "logprob"):
        raise BiascheckError("--biascheck-estimator", None, f"{estimator!r} is not an estimator", "use sampling or logprob")
    judge = setting("--biascheck-judge")
    if judge:
        try:
            validate_model_string(judge, "--biascheck-judge", api_base=setting("--biascheck-judge-api-base"))
        except BiascheckError as exc:
            raise BiascheckError("--biascheck-judge", None, exc.problem, exc.fix) from None
    judge_price = setting("--biascheck-judge-price")
    unscorable = setting("--biascheck-bbg-unscorable")
    if unscorable is not None and unscorable not in UNSCORABLE_CONVENTIONS:
        raise BiascheckError("--biascheck-bbg-unscorable", None, f"{unscorable!r} is not a convention", f"use {' or '.join(UNSCORABLE_CONVENTIONS)}")
    return RunConfig(
        model=model_config,
        judge=judge,
        judge_api_base=setting("--biascheck-judge-api-base"),
        judge_price=Price.parse(judge_price, where="--biascheck-judge-price") if judge_price else None,
        rejudge=config.getoption("biascheck_rejudge"),
        qualify_judge=config.getoption("biascheck_qualify_judge") or bool(config.getini("biascheck_qualify_judge")),
        store_path=Path(cache),
        data_dir=Path(data) if data else None,
        concurrency=number("--biascheck-concurrency", int, 32, 1),
        max_cost_usd=max_cost,
        policy=RetryPolicy(max_retries=number("--biascheck-retries", int, 6, 0)),
        shared_run_id=run_id,
        estimator=estimator,
        bbg_unscorable=unscorable,
    )


def pytest_collect_file(file_path: Path, parent: pytest.Collector):
    if file_path.name == "suite.toml" and STATE_KEY in parent.config.stash:
        return SuiteFile.from_parent(parent, path=file_path, nodeid=_packaged_nodeid(file_path, parent.config))
    return None


def _packaged_nodeid(file_path: Path, config: pytest.Config) -> str | None:
    """The node id of an installed packaged suite: biascheck/suites/<name>/suite.toml. pytest would
    name a file outside the rootdir relative to its argument, so every packaged suite would be
    plain ``suite.toml``. None (pytest's own id) for any other file."""
    from biascheck.config.catalog import packaged_suites_dir

    root = packaged_suites_dir().resolve()
    path = file_path.resolve()
    if not path.is_relative_to(root) or path.is_relative_to(Path(config.rootpath).resolve()):
        return None
    return f"biascheck/suites/{path.relative_to(root).as_posix()}"


def _selection(items: list[pytest.Item]):
    """Which cases to call: the selected case items, plus every case in the scope of a selected
    metric or regression item. A metric is always measured on its whole scope, so a selection
    such as ``--lf`` (failed cases + failed metrics) cannot turn a red gate green."""
    chosen: dict[SuiteFile, set[str]] = {}
    for item in items:
        if isinstance(item, CaseItem):
            chosen.setdefault(item.suite_file, set()).update(item.case_ids)
        elif isinstance(item, ScopedItem):
            scope = item.scope
            chosen.setdefault(item.suite_file, set()).update(
                c.case_id for c in item.suite_file.suite.cases if scope == OVERALL or c.category == scope
            )
    return [(suite_file, [c for c in suite_file.suite.cases if c.case_id in picked]) for suite_file, picked in chosen.items()]


def pytest_collection_finish(session: pytest.Session) -> None:
    state = session.config.stash.get(STATE_KEY, None)
    if state is None or session.config.option.collectonly:
        return  # --collect-only: no model call, and litellm stays unimported
    selection = _selection(session.items)
    names: dict[str, Path] = {}
    for suite_file, _ in selection:
        other = names.setdefault(suite_file.suite.name, suite_file.path)
        if other != suite_file.path:
            raise pytest.UsageError(
                f"{suite_file.path}: suite.name: {suite_file.suite.name!r} is also the name of {other}; give each suite a distinct name"
            )
    # Refused before any call; an xdist worker cannot raise a usage error cleanly, so there the
    # controller refuses the write at the end (baseline.refuse_reason sees the partial run).
    if state.baseline.update and len(selection) > 1 and state.baseline.pattern and "{suite}" not in state.baseline.pattern:
        raise pytest.UsageError(
            f"--biascheck-baseline {state.baseline.pattern}: {len(selection)} suites would overwrite one file; "
            "put {suite} in the path, e.g. baselines/{suite}/release.json"
        )
    if state.baseline.update and not hasattr(session.config, "workerinput"):
        partial = [(sf, len(cases)) for sf, cases in selection if len(cases) != len(sf.suite.cases)]
        if partial:
            suite_file, n = partial[0]
            raise pytest.UsageError(
                f"{suite_file.path}: --biascheck-update-baseline: only {n} of the suite's {len(suite_file.suite.cases)} cases are selected; "
                "a baseline must cover the whole suite: run it without -k or node ids"
            )
    if state.dry_run:
        _dry_run(session, state, selection)
        return
    from rich.markup import escape

    from biascheck import session as biassession
    from biascheck.execution.runner import RichProgress
    from biascheck.reporting.results import build_results

    capture = session.config.pluginmanager.getplugin("capturemanager")
    # RichProgress shows its label as rich markup: a model string such as openai/x[/] must stay text.
    label = f"biascheck {escape(state.run_config.model.model)}"
    try:
        with capture.global_and_fixture_disabled():
            state.result = biassession.run(
                [(suite_file.suite, cases) for suite_file, cases in selection],
                state.run_config,
                progress=RichProgress(label),
            )
    except BiascheckError as exc:
        # Nothing could be measured (unusable store, simulated server that would not start):
        # one line and exit code 4, rather than thousands of items failing with the same message.
        raise pytest.UsageError(str(exc)) from None
    state.results_json = build_results(state.result)
    reason = state.result.incomplete or ""
    if reason.startswith((FATAL, STORE_FAILURE)):
        # The results say why the run stopped. pytest_sessionfinish runs after a usage error too
        # and writes them, as for any run: the report folder, the job summary, a refused baseline.
        whose = "" if reason.startswith((f"{FATAL}the judge ", STORE_FAILURE)) else f"{state.run_config.model.model}: "
        raise pytest.UsageError(whose + reason)
    if state.baseline.compare:
        _compare(state, selection)


def _dry_run(session: pytest.Session, state: BiascheckState, selection) -> None:
    """--biascheck-dry-run: what the selected cases would send and cost, printed before any call."""
    from biascheck.dryrun import estimate, render

    try:
        estimates = estimate([(suite_file.suite, cases) for suite_file, cases in selection], state.run_config, store=state.run_config.store_path)
    except BiascheckError as exc:
        raise pytest.UsageError(str(exc)) from None
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    write = reporter.write if reporter is not None else print
    if reporter is not None:
        reporter.write_sep("=", "biascheck dry run: no model call made")
    write(render(estimates) if estimates else "no case selected: no model call would be made\n")


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session):
    """A dry run ends after collection, so that -k and node ids choose what it prices: no item
    runs (each would read outcomes no call made). Ending it here rather than deselecting every item
    keeps "N collected" true and the exit code 0 (1 after a collection error, as for any run)."""
    state = session.config.stash.get(STATE_KEY, None)
    return True if state is not None and state.dry_run else None


def _compare(state: BiascheckState, selection) -> None:
    from biascheck.evaluation.regression import compare, settings_from

    for document, (suite_file, cases) in zip(state.results_json, selection):
        suite = suite_file.suite
        path, baseline = state.baseline_for(suite)
        settings = settings_from(
            document,
            state.baseline.rules,
            allow_fingerprint_mismatch=state.baseline.allow_mismatch,
            fail_inconclusive=state.baseline.fail_inconclusive,
        )
        prompts = {case.case_id: case.messages[-1].content for case in cases}
        try:
            state.comparisons[suite.name] = compare(baseline, document, settings, baseline_path=_shown_path(path, state.config), prompts=prompts)
        except BiascheckError as exc:
            raise pytest.UsageError(str(exc)) from None


def _shown_path(path: Path, config: pytest.Config) -> str:
    """Relative to the working folder when inside it (as a user typed it), else absolute."""
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return str(path)


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config):
    if report.when != "call" or not report.passed:
        return None
    return REPORT_STATUS.get(dict(report.user_properties).get(STATUS_PROPERTY))


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
}


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    state = config.stash.get(STATE_KEY, None)
    if state is None:
        return
    if hasattr(config, "workerinput"):
        # xdist worker: hand the results to the controller, which reports them once.
        if state.results_json is not None:
            config.workeroutput["biascheck"] = json.dumps(state.results_json)
            config.workeroutput["biascheck_comparisons"] = json.dumps(state.comparisons)
        return
    _write_reports(session, state)
    if state.baseline.update:
        _update_baselines(session, state)


def pytest_testnodedown(node, error) -> None:
    config = node.config
    state = config.stash.get(STATE_KEY, None)
    payload = getattr(node, "workeroutput", {}).get("biascheck")
    if state is None or not payload:
        return
    documents = json.loads(payload)
    # Comparisons are a pure function of the outcomes, the same on every worker.
    state.comparisons.update(json.loads(node.workeroutput.get("biascheck_comparisons", "{}")))
    if state.results_json is None:
        state.results_json = documents
        return
    # Every worker holds the same outcomes; only the call counters differ (the worker that won the
    # store's lock made the calls, the others read them). Report the run's totals.
    merged = []
    for mine, theirs in zip(state.results_json, documents):
        base, other = (mine, theirs) if mine["run"]["calls"] >= theirs["run"]["calls"] else (theirs, mine)
        for counter in ("calls", "retries", "cost_usd", "judge_calls"):
            if counter in base["run"]:
                base["run"][counter] += other["run"][counter]
        merged.append(base)
    state.results_json = merged


def _say(session: pytest.Session, message: str, **markup) -> None:
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write("\n")
        reporter.write_line(message, **markup)


def _write_reports(session: pytest.Session, state: BiascheckState) -> None:
    if not state.results_json:
        return
    from biascheck.reporting.write import write_reports

    if os.environ.get("GITHUB_ACTIONS") == "true":
        _github_step_summary(session, state)
    folder = state.report_dir
    if folder is None:
        return
    try:
        write_reports(state.results_json, folder, state.comparisons)
    except BiascheckError as exc:  # a folder that is not biascheck's to replace
        problem = str(exc)
    except OSError as exc:
        problem = f"{folder}: could not write the report ({exc.strerror or exc}); point --biascheck-report at a writable folder"
    else:
        return
    # A gate whose evidence was not written must not pass.
    _say(session, f"biascheck: {problem}", red=True)
    state.failed_other += 1
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _github_step_summary(session: pytest.Session, state: BiascheckState) -> None:
    from biascheck.reporting.comparison import render_comparison_markdown
    from biascheck.reporting.results import render_markdown, render_summary_markdown

    target = os.environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return
    parts = [render_summary_markdown(state.results_json)] if len(state.results_json) > 1 else []
    for document in state.results_json:
        parts.append(render_markdown(document))
        comparison = state.comparisons.get(document["suite"]["name"])
        if comparison is not None:
            parts.append(render_comparison_markdown(comparison))
    try:
        with open(target, "a", encoding="utf-8") as handle:
            handle.write("\n".join(parts))
    except OSError as exc:
        _say(session, f"biascheck: GITHUB_STEP_SUMMARY {target}: could not append the summary ({exc.strerror or exc})", yellow=True)


def _update_baselines(session: pytest.Session, state: BiascheckState) -> None:
    """syrupy-style: a baseline changes only when asked, and only from a whole, answered run."""
    from biascheck.evaluation import baseline as baselines

    if not state.results_json:
        return  # nothing was run
    if session.exitstatus == pytest.ExitCode.INTERRUPTED:
        _say(session, "biascheck: the run was interrupted; no baseline was written", red=True)
        return
    commit = baselines.git_commit(Path(session.config.invocation_params.dir))
    written = 0
    for document in state.results_json:
        name = document["suite"]["name"]
        path = baselines.baseline_path(
            state.baseline.pattern, suite=name, model=document["model"]["model"], root=session.config.invocation_params.dir
        )
        reason = baselines.refuse_reason(document)
        if reason:
            _say(session, f"biascheck: {name}: not writing the baseline {_shown_path(path, session.config)}: {reason}", red=True)
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
            continue
        replaced = path.exists()
        try:
            baselines.write(baselines.from_results(document, git=commit), path)
        except OSError as exc:
            _say(session, f"biascheck: {path}: could not write the baseline ({exc.strerror or exc})", red=True)
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
            continue
        written += 1
        _say(session, f"biascheck: {name}: baseline {'replaced' if replaced else 'written'}: {_shown_path(path, session.config)}", green=True)
    _forgive_recorded_thresholds(session, state, every_baseline_written=written == len(state.results_json))


def _forgive_recorded_thresholds(session: pytest.Session, state: BiascheckState, *, every_baseline_written: bool) -> None:
    """A recording run's job is the baseline: when it wrote every one, failed thresholds (still
    listed above, and in the report) do not fail it, unless --biascheck-strict-record. A release
    whose bias is over a threshold is the gate's to stop; the recording keeps the evidence."""
    if (
        state.baseline.strict_record
        or not every_baseline_written
        or state.failed_other
        or not state.failed_thresholds
        or session.exitstatus != pytest.ExitCode.TESTS_FAILED
    ):
        return
    _say(
        session,
        f"biascheck: {state.failed_thresholds} threshold check(s) failed (listed above); every baseline was recorded, "
        "so the run passes (--biascheck-strict-record makes it fail)",
        yellow=True,
    )
    session.exitstatus = pytest.ExitCode.OK


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    state = config.stash.get(STATE_KEY, None)
    if state is None:
        return
    if not state.results_json:
        return  # nothing was selected, or this is an xdist worker
    from biascheck.reporting.github import annotation
    from biascheck.reporting.terminal import render_comparison_terminal, render_terminal

    # A CI log has no edge: unless it says its width (COLUMNS, which pytest reads), it gets a wide
    # summary rather than pytest's fallback of 80 columns, which wraps every table.
    width = terminalreporter._tw.fullwidth if terminalreporter.isatty or os.environ.get("COLUMNS") else 160
    terminalreporter.write_sep("=", "biascheck summary")
    if ONE_PROCESS_NOTE in config.stash:
        terminalreporter.write_line(config.stash[ONE_PROCESS_NOTE])
    terminalreporter.write(render_terminal(state.results_json, color=terminalreporter.hasmarkup, width=width))
    comparisons = [state.comparisons[d["suite"]["name"]] for d in state.results_json if d["suite"]["name"] in state.comparisons]
    if comparisons:
        terminalreporter.write_sep("=", "biascheck comparison with the baseline")
        terminalreporter.write(render_comparison_terminal(comparisons, color=terminalreporter.hasmarkup, width=width))
    if os.environ.get("GITHUB_ACTIONS") == "true":
        # One annotation per failed gate or regression item: what failed, in its own one-line words.
        names = {Path(d["suite"]["manifest"]).resolve(): d["suite"]["name"] for d in state.results_json}
        for report in terminalreporter.stats.get("failed", []):
            parts = report.nodeid.split("::")
            if len(parts) >= 4 and parts[-3] in ("metrics", "regression"):
                kind = "regressed" if parts[-3] == "regression" else "fails its threshold"
                suite = names.get((Path(config.rootpath) / parts[0]).resolve(), parts[0])
                terminalreporter.write_line(annotation(f"biascheck {suite}: {parts[-1]} ({parts[-2]}) {kind}", report.longreprtext.strip()))
