"""One biascheck run, without pytest: selected cases -> requests -> responses -> outcomes -> metrics
-> verdicts. The pytest plugin (``pytest --biascheck``) and the Python API (``biascheck.run``) are
thin adapters over :func:`run`, as are ``biascheck run`` and ``biascheck qualify-judge``; the gate
around it (comparisons, reports, baselines) is :mod:`biascheck.orchestration`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from biascheck.benchmarks.base import JudgedBenchmark
from biascheck.core.bounds import BOUNDS
from biascheck.core.errors import BiascheckError
from biascheck.core.garbage import collector_paused
from biascheck.core.records import UNUSABLE_REPLY, Case, Outcome, Response
from biascheck.core.spelling import Option, option
from biascheck.evaluation.verdicts import Verdict, check_thresholds
from biascheck.execution.batch_runner import in_batches, refuse_open_batches
from biascheck.execution.batches import BatchOptions, batch_provider
from biascheck.execution.llm import LiteLLMClient, ModelConfig, check_ready, check_serves
from biascheck.execution.planning import plan_requests
from biascheck.execution.policy import Budget, RetryPolicy
from biascheck.execution.progress import NoProgress, Progress
from biascheck.execution.providers import simulator
from biascheck.execution.runner import NOT_RUN, ModelRequest, PartOf, RunInterrupted, execute, run_sync
from biascheck.execution.stats import RunStats, RunStatus
from biascheck.execution.store import ResponseStore, StoreWriteError
from biascheck.judging.findings import PanelFindings, panel_findings
from biascheck.judging.panel import Judge, JudgeOptions, Panel
from biascheck.judging.qualification import Qualification, RunCases
from biascheck.judging.stage import (
    Judged,
    JudgeRun,
    JudgingPlan,
    check_judges_ready,
    check_prices,
    judged_outcomes,
    judging_plan,
    qualify_judges,
    read_stories,
)
from biascheck.suite import Shard, Suite

REJUDGE_MISSING = "not in the response store (--biascheck-rejudge calls only the judge; run once without it)"


@dataclass(frozen=True)
class RunConfig:
    model: ModelConfig
    store_path: Path
    data_dir: Path | None = None
    concurrency: int = 32
    max_cost_usd: float | None = None
    policy: RetryPolicy = RetryPolicy()
    # pytest-xdist's testrunuid: the workers of one run share its errors through the store.
    shared_run_id: str | None = None
    # The answer mode (--biascheck-answer-mode) of the suites whose benchmark has it (QA: generate |
    # loglikelihood | first-token; HBB's estimator: sampling | logprob); None: each manifest's.
    estimator: str | None = None
    # Judged benchmarks (BBG): the judges, their endpoint and price, re-judging, qualification, the
    # unscorable convention and calibrations, where the run replaces the suites' own (biascheck.judging).
    judges: JudgeOptions = JudgeOptions()
    # --biascheck-shard: this run answers one part of each suite for a later merged run; no verdicts.
    shard: Shard | None = None
    # Where the model under test was named, for errors about it (a judge being qualified: its option).
    model_source: object = Option("model")
    # --biascheck-batch: the calls the store lacks go as provider batches (execution/batch_runner.py).
    batch: BatchOptions | None = None
    # --biascheck-allow-missing-data: a category whose data file can be had nowhere is left out and
    # the results say so, instead of failing the run (see biascheck.suite.ALLOW_MISSING_DATA).
    allow_missing_data: bool = False
    # --biascheck-allow-unpinned-data: read data files the manifest pins by no checksum (a dataset of
    # the user's own); the results record them. The run's simulator reads them too.
    allow_unpinned_data: bool = False

    def __post_init__(self) -> None:
        # The bound of --biascheck-concurrency, for Python callers too: 0 workers would answer nothing.
        BOUNDS["concurrency"].check(self.concurrency, "RunConfig", "concurrency")


@dataclass
class SuiteResult:
    suite: Suite
    cases: list[Case]
    outcomes: dict[str, Outcome]
    params: dict[str, Any]
    metrics: Any
    verdicts: list[Verdict]
    estimator: str | None = None
    estimator_note: str | None = None
    # A judged suite's stage: its panel, scoring and each judge's part (calls, qualification).
    judging: JudgingPlan | None = None
    # Each judge's outcomes beside the aggregate's (``outcomes``), and, read by several judges,
    # their agreement and the rest of what they found.
    judged: Judged | None = None
    findings: PanelFindings | None = None
    served: dict[str, dict[str, int]] = field(default_factory=dict)  # see served_by
    # This suite's own calls, its judges' included (see _SuitePlan.stats); the run's are RunResult.stats.
    stats: RunStats = field(default_factory=RunStats)

    @property
    def panel(self) -> Panel | None:
        return self.judging.panel if self.judging is not None else None

    @property
    def judge(self) -> Judge | None:
        """The judge of a suite read by one."""
        panel = self.panel
        return panel.judges[0] if panel is not None and not panel.several else None

    @property
    def judge_qualification(self) -> Qualification | None:
        """The qualification of a suite's one judge (several: each judge's, in ``findings``)."""
        return self.judging.runs[0].qualification if self.judging is not None and self.judge is not None else None

    @property
    def judge_stats(self) -> RunStats:
        return self.judging.stats if self.judging is not None else RunStats()

    @property
    def scoring(self) -> dict[str, str] | None:
        """How the suite's units were scored where a run may choose (BBG's unscorable convention and
        calibration); None for the other benchmarks."""
        return self.judging.scoring.scoring if self.judging is not None else None

    @property
    def passed(self) -> bool:
        """Every threshold met and, read by several judges, their agreement at the suite's floor."""
        agreed = self.findings is None or self.findings.agreement_passed is not False
        return agreed and all(v.passed for v in self.verdicts)


@dataclass
class RunResult:
    config: RunConfig
    suites: list[SuiteResult]
    stats: RunStats = field(default_factory=RunStats)  # every call of the run, the judges' included
    judge_stats: RunStats = field(default_factory=RunStats)  # the judges' part

    @property
    def incomplete(self) -> str | None:
        return self.stats.incomplete

    @property
    def passed(self) -> bool:
        # A suite run without some categories' data is not that suite, unless the run accepted it.
        missing = any(s.suite.skipped_categories for s in self.suites) and not self.config.allow_missing_data
        return not self.incomplete and not missing and all(s.passed for s in self.suites)


def data_folder(suites: Sequence[Suite], config: RunConfig) -> Path | None:
    """The data mirror of the run (the simulator's): the one its suites were loaded from, which
    ``RunConfig.data_dir``, when given, must be. A suite loaded from another folder than the run
    names would be answered by a simulator that cannot read it, or reads other files."""
    loaded = {s.data_dir.resolve(): s.data_dir for s in suites if s.data_dir is not None}
    if config.data_dir is not None:
        other = sorted(str(folder) for key, folder in loaded.items() if key != config.data_dir.resolve())
        if other:
            raise BiascheckError(
                "RunConfig",
                "data_dir",
                f"is {config.data_dir}, but the suites were loaded from {', '.join(other)}",
                "give load_suite(data_dir=...) the same folder, or leave RunConfig.data_dir unset",
            )
        return config.data_dir
    if len(loaded) > 1:
        raise BiascheckError(
            "run", "selection", f"its suites were loaded from different data folders ({', '.join(sorted(map(str, loaded.values())))})",
            "load every suite of one run with the same load_suite(data_dir=...)",
        )  # fmt: skip
    return next(iter(loaded.values()), None)


def effective_params(suite: Suite, model: ModelConfig) -> dict[str, Any]:
    """The manifest's sampling parameters, overridden by the command line; sorted, as in store keys."""
    return dict(sorted({**suite.manifest.sampling, **model.params}.items()))


class _Clients:
    """Model clients for one run; ``sim/`` models (the model under test and a sim judge alike) share
    one simulated server that knows these suites, started on first use and stopped with the run,
    unless an api_base names a simulator already serving (whose batches outlive the run)."""

    def __init__(self, suites: Sequence[Suite], data_dir: Path | None, stack: ExitStack, allow_unpinned: bool = False):
        self._suites, self._data_dir, self._stack, self._allow_unpinned = suites, data_dir, stack, allow_unpinned
        self._sim_url: str | None = None

    @contextmanager
    def open(self, model: ModelConfig, *, require_price: bool, where: object = Option("model")) -> Iterator[LiteLLMClient]:
        if not model.is_sim:
            yield LiteLLMClient(model, require_price=require_price, where=where)
            return
        if model.api_base is not None:  # a simulator the user runs (biascheck sim serve), e.g. one that outlives runs
            yield LiteLLMClient(model, api_base=model.api_base, require_price=require_price)
            return
        if self._sim_url is None:
            folders = [s.manifest.directory for s in self._suites]
            self._sim_url = self._stack.enter_context(simulator(folders, self._data_dir, allow_unpinned=self._allow_unpinned))
        yield LiteLLMClient(model, api_base=self._sim_url, require_price=require_price)


def answer_mode(suite: Suite, config: RunConfig) -> Any:
    """How the suite's cases are answered: the run's --biascheck-answer-mode when its benchmark has
    that mode, else the manifest's (the benchmark's estimator: None when there is one way)."""
    override = config.estimator if config.estimator in suite.benchmark.estimators else None
    return suite.benchmark.estimator(suite.manifest, override)


@dataclass(frozen=True)
class SuiteSettings:
    """What a run chose for one suite beyond its manifest: for a judged suite, its judge stage
    (panel and scoring, :func:`biascheck.judging.stage.judging_plan`), and the fingerprint they
    give. The one place a suite's judges are resolved: collection, the dry run, baselines and the
    run read it here."""

    suite: Suite
    config: RunConfig
    judging: JudgingPlan | None

    @property
    def panel(self) -> Panel | None:
        return self.judging.panel if self.judging is not None else None

    @property
    def scoring(self) -> dict[str, str] | None:
        return self.judging.scoring.scoring if self.judging is not None else None

    def fingerprint(self) -> dict[str, Any]:
        panel = self.panel
        return self.suite.fingerprint(panel.identity() if panel is not None else None, self.scoring)


def resolve(suite: Suite, config: RunConfig) -> SuiteSettings:
    """The run's settings of one suite; a judged suite whose judges cannot work is refused here."""
    return SuiteSettings(suite, config, judging_plan(suite, config.judges, config.model))


def check_before_collection(config: RunConfig) -> None:
    """What can be refused before any suite is loaded (the plugin's pytest_configure): the model's
    provider credentials (for the providers known without litellm, in milliseconds), a budget
    without a price for the model (this asks litellm's price map), and an endpoint that refuses
    connections. Only when the store holds no answer of the model, so that every case will be
    called; a run a warm store may answer is checked by :func:`_check_ready`, once its requests
    are known."""
    from biascheck.execution.readiness import check_credentials, check_endpoint, store_answers_model

    model = config.model
    if config.judges.rejudge or store_answers_model(config.store_path, model.model):
        return
    check_credentials(model, config.model_source)
    if config.max_cost_usd is not None and model.price is None and not model.is_sim:
        LiteLLMClient(model, require_price=True, where=config.model_source)
    check_endpoint(model, config.model_source)


def _check_ready(plans: list[_SuitePlan], config: RunConfig, store: ResponseStore) -> None:
    """Before the first call: the model under test and every judge can be called (a known
    provider, credentials set), when they will be, and the provider can serve each suite's answer
    mode. A run answered from the store needs neither; a judge whose readings are all stored is
    checked when its first call is about to be made."""
    keys = {key for plan in plans for keys in plan.keys for key in keys}
    rejudge = config.judges.rejudge
    generating = not rejudge and store.count(keys) < len(keys)
    if generating:
        check_ready(config.model, config.model_source)
        for needs in dict.fromkeys(n for plan in plans if (n := _needs(plan)) is not None):
            check_serves(config.model, needs, _mode_source(config), batch=config.batch is not None)
        if config.batch is not None:
            batch_provider(config.model)
    if generating or rejudge:
        check_judges_ready([plan.judging for plan in plans if plan.judging is not None], batch=config.batch is not None)


def _needs(plan: _SuitePlan) -> str | None:
    """What a suite's answer mode needs from the provider (a QA mode read from log-probabilities)."""
    return getattr(plan.estimator, "needs", None)


def _mode_source(config: RunConfig) -> str:
    return option("answer-mode") if config.estimator else str(config.model_source)


def _probe_answer_modes(plans: list[_SuitePlan], store: ResponseStore, call, responses: dict[str, Any], config: RunConfig) -> set[str]:
    """A mode read from log-probabilities that only the endpoint can tell it does not serve (a
    chat-only server, llama.cpp's without --logits_all) stops the run after one request, not
    after all of them: the first request the store lacks goes alone, and its reply is checked.
    Its answer is stored and counted like any other; returns the keys so asked."""
    probed: set[str] = set()
    for plan in plans:
        unserved = getattr(plan.estimator, "unserved", None)
        if unserved is None:
            continue
        stored = store.stored_keys(r.key for r in plan.requests)
        first = next((r for r in plan.requests if r.key not in stored and r.key not in responses), None)
        if first is None:
            continue
        call([first])
        probed.add(first.key)
        reason = unserved(responses[first.key])
        if reason:
            # Its reply, if stored, is no answer for this mode: the next run asks again (the server
            # may have been fixed meanwhile, e.g. llama.cpp's restarted with --logits_all).
            with suppress(StoreWriteError):
                store.refuse(first.key, f"{UNUSABLE_REPLY}{reason}")
            raise BiascheckError(
                _mode_source(config),
                None,
                f"{config.model.model} cannot answer {plan.suite.manifest.name} by {plan.estimator.kind}: {reason}",
                f"answer by generate ({option('answer-mode')} generate), or serve what the mode needs",
            )
    return probed


def _refuse_unserved(plans: list[_SuitePlan], store: ResponseStore, responses: dict[str, Any]) -> None:
    """A reply without what its answer mode reads (first-token's log-probabilities, a
    log-likelihood's prompt log-probabilities) is its case's error in this run, and no answer for
    the next: marked unusable, as the probe's is, it is asked again once the server serves them.
    (The probe sees only the first reply; a batch has no probe; a server may omit them now and then.)"""
    for plan in plans:
        unserved = getattr(plan.estimator, "unserved", None)
        if unserved is None:
            continue
        for request in plan.requests:
            response = responses.get(request.key)
            reason = unserved(response) if response is not None and not response.errored else None
            if reason:
                with suppress(StoreWriteError):
                    store.refuse(request.key, f"{UNUSABLE_REPLY}{reason}")


@dataclass
class _SuitePlan:
    suite: Suite
    cases: list[Case]
    params: dict[str, Any]
    estimator: Any
    judging: JudgingPlan | None  # a judged suite's stage: its judges' keys, counters, qualifications
    note: str | None = None
    keys: list[list[str]] = field(default_factory=list)
    requests: list[ModelRequest] = field(default_factory=list)
    # This suite's own counters: its requests of the model under test (one that two suites of the run
    # share counts, like its call, for the first) and its judges' calls.
    stats: RunStats = field(default_factory=RunStats)

    def plan(self, model: ModelConfig) -> None:
        self.keys, self.requests = plan_requests(self.suite.benchmark.requests, self.cases, model, self.params, self.estimator)

    def sent_params(self) -> dict[str, Any]:
        """The parameters the suite's requests were sent with, as results.json records them: an
        answer mode's or estimator's own (first-token's max_tokens 1 and top_logprobs, a
        log-likelihood's echo) in place of the sampling parameters they replace; the run's seed,
        not each request's. Every request of a suite has the same ones."""
        return dict(sorted(self.requests[0].params.items())) if self.requests else self.params


def run(selection: Sequence[tuple[Suite, Sequence[Case]]], config: RunConfig, *, progress: Progress = NoProgress()) -> RunResult:
    """Answer the selected cases and score them. Judged benchmarks take a second stage
    (:mod:`biascheck.judging`): once the model's generations are in, each judge reads each one
    (``--biascheck-rejudge``: generations only from the store, so only the judges are called)."""
    model = config.model
    plans = []
    with collector_paused():  # a request per case, or ten: see biascheck.core.garbage
        for suite, cases in selection:
            settings = resolve(suite, config)
            plan = _SuitePlan(suite, list(cases), effective_params(suite, model), answer_mode(suite, config), settings.judging)
            plan.plan(model)
            plans.append(plan)
    judged = [plan.judging for plan in plans if plan.judging is not None]

    if config.max_cost_usd is not None:
        check_prices(judged)
    suites = [suite for suite, _ in selection]
    stats = RunStats()
    if config.judges.qualify:
        _qualify_judges(plans, config, stats)
    responses: dict[str, Any] = {}
    with ExitStack() as stack, ResponseStore(config.store_path) as store, store.exclusive(), _kept_on_interrupt(store, plans):
        clients = _Clients(suites, data_folder(suites, config), stack, config.allow_unpinned_data)
        shared = store.run_errors(config.shared_run_id) if config.shared_run_id else None
        _check_ready(plans, config, store)

        def call(
            requests: list[ModelRequest],
            judge: Judge | None = None,
            *,
            part: RunStats | None = None,
            offline: str | None = None,
            part_of: PartOf | None = None,
        ) -> None:
            from rich.markup import escape

            caller = model if judge is None else judge.model
            backend = in_batches(config.batch) if config.batch is not None and offline is None else None
            if backend is None and offline is None:
                refuse_open_batches(store, caller.model, [r.key for r in requests])
            execution = run_sync(
                execute(
                    requests,
                    store=store,
                    model_name=caller.model,
                    open_client=lambda: clients.open(
                        caller, require_price=config.max_cost_usd is not None, where=config.model_source if judge is None else judge.source
                    ),
                    concurrency=config.concurrency,
                    policy=config.policy,
                    budget=Budget(config.max_cost_usd - stats.cost_usd if config.max_cost_usd is not None else None),
                    progress=progress,
                    shared_errors=shared,
                    offline=offline,
                    # The progress label is rich markup: the judge's model string must stay text.
                    label=None if judge is None else f"biascheck judge {escape(caller.model)}",
                    backend=backend,
                    part_of=part_of if part_of is not None else _suite_of(plans),
                )
            )
            responses.update(execution.responses)
            if judge is not None:  # a fatal error of the judge's (e.g. its API key) names the judge
                execution.stats.blame_judge(caller.model)
            stats.add(execution.stats)
            if part is not None:
                part.add(execution.stats)
            if config.shared_run_id:
                errors = {k: r.error for k, r in execution.responses.items() if r.error is not None and k not in (shared or {})}
                if errors:
                    store.record_run_errors(config.shared_run_id, errors)

        rejudge = config.judges.rejudge
        probed = _probe_answer_modes(plans, store, call, responses, config) if not rejudge and config.batch is None else set()
        # Re-judging calls the judges only: every answer of the model under test comes from the store.
        call([r for plan in plans for r in plan.requests if r.key not in probed], offline=REJUDGE_MISSING if rejudge else None)
        _refuse_unserved(plans, store, responses)
        # A provider that returns no log-probabilities: the whole suite is estimated by sampling
        # instead, and the results say so (estimators are never mixed within one run).
        fallback = []
        for plan in plans:
            note = plan.suite.benchmark.fallback_reason(plan.estimator, [responses[k] for keys in plan.keys for k in keys])
            if note:
                plan.estimator, plan.note = plan.estimator.fallback(), note
                plan.plan(model)
                fallback += plan.requests
        if fallback and not stats.incomplete:
            call(fallback, offline=REJUDGE_MISSING if rejudge else None)
        for request in fallback:  # the run stopped before the fallback could be made
            responses.setdefault(request.key, Response(text=None, error=NOT_RUN + (stats.incomplete or "not run")))

        # The judge stage: requests exist only once the generations do. Each suite's judges call
        # on their own, so each suite (and each judge) reports its own counts.
        for plan in plans:
            if plan.judging is not None:
                suite_of = _suite_of([plan])
                read_stories(
                    plan.judging,
                    plan.cases,
                    plan.keys,
                    responses,
                    lambda requests, judge, part: call(requests, judge, part=part, part_of=suite_of),
                    stats.incomplete,
                )

    with collector_paused():  # an outcome per case
        results = _score(plans, responses, stats, config)
    judge_stats = RunStats()
    for stage in judged:
        judge_stats.add(stage.stats)
    return RunResult(config, results, stats, judge_stats)


def _score(plans: list[_SuitePlan], responses: dict[str, Any], stats: RunStats, config: RunConfig) -> list[SuiteResult]:
    """Each suite's outcomes, metrics and verdicts from the responses of its requests."""
    results = []
    pending = stats.status is RunStatus.BATCH_PENDING  # nothing is answered yet: no verdict
    for plan in plans:
        suite, benchmark, manifest = plan.suite, plan.suite.benchmark, plan.suite.manifest
        judged, findings = None, None
        resamples, seed = manifest.bootstrap_resamples, manifest.bootstrap_seed
        if plan.judging is not None and isinstance(benchmark, JudgedBenchmark):
            manifest = benchmark.with_scoring(manifest, plan.judging.scoring.scoring)  # this run's convention replaces the file's

            def classify(case: Case, replies: list[Response]) -> Outcome:
                return _classify(benchmark, case, replies, plan.estimator)

            judged = judged_outcomes(plan.judging, plan.cases, plan.keys, responses, classify)
            outcomes = judged.outcomes
            findings = panel_findings(plan.judging, plan.cases, plan.keys, judged, resamples=resamples, seed=seed, gate=not (config.shard or pending))
        else:
            outcomes = {
                case.case_id: _classify(benchmark, case, [responses[k] for k in keys], plan.estimator) for case, keys in zip(plan.cases, plan.keys)
            }
        metrics = benchmark.aggregate(plan.cases, outcomes, resamples=resamples, seed=seed, manifest=manifest)
        categories = sorted({case.category for case in plan.cases})
        kind = getattr(plan.estimator, "kind", None)
        results.append(
            SuiteResult(
                suite,
                plan.cases,
                outcomes,
                plan.sent_params(),
                metrics,
                [] if config.shard or pending else check_thresholds(manifest, metrics, categories, kind),  # they would mislead
                str(plan.estimator) if plan.estimator is not None else None,
                plan.note,
                judging=plan.judging,
                judged=judged,
                findings=findings,
                served=served_by([responses[k] for keys in plan.keys for k in keys]),
                stats=plan.stats,
            )
        )
    return results


@contextmanager
def _kept_on_interrupt(store: ResponseStore, plans: list[_SuitePlan]) -> Iterator[None]:
    """Ctrl-C: say how many of the run's answers the store holds (read from it: what a re-run finds)."""
    try:
        yield
    except KeyboardInterrupt:
        keys = {key for plan in plans for keys in plan.keys for key in keys}
        keys.update(key for plan in plans if plan.judging is not None for key in plan.judging.keys())
        raise RunInterrupted(store.path, store.count(keys), len(keys)) from None


def served_by(responses: Sequence[Response]) -> dict[str, dict[str, int]]:
    """What the provider said answered the model under test: how many replies named each served
    model and each system fingerprint (OpenAI's, vLLM's ...). Two of either within one run mean
    the model behind the name changed while it ran."""
    served: dict[str, dict[str, int]] = {}
    for name, values in (("models", [r.served_model for r in responses]), ("system_fingerprints", [r.system_fingerprint for r in responses])):
        counts: dict[str, int] = {}
        for value in values:
            if value is not None:
                counts[value] = counts.get(value, 0) + 1
        if counts:
            served[name] = dict(sorted(counts.items()))
    return served


def _classify(benchmark, case: Case, responses: list[Response], estimator) -> Outcome:
    """The benchmark's reading of a case, marked when a reply it read was cut to the size limit."""
    outcome = benchmark.classify(case, responses, estimator)
    return replace(outcome, truncated=True) if any(r.truncated for r in responses) else outcome


def qa_runner(config: RunConfig) -> RunCases:
    """How a judge is qualified through this session (:func:`biascheck.judging.qualification.qualify`):
    its QA items answered with the judge as the model, under ``config``'s store, data, concurrency,
    budget and model source, in their own answer mode, with no judge of their own."""
    qualifying = replace(config, judges=JudgeOptions(), estimator=None)
    return lambda suite, cases, model: run([(suite, cases)], replace(qualifying, model=model))


def _qualify_judges(plans: list[_SuitePlan], config: RunConfig, stats: RunStats) -> None:
    """Each judge once per qualification suite (:func:`biascheck.judging.stage.qualify_judges`),
    answered by this session with the judge as the model: its calls count in the run's totals and
    spend its budget."""
    suite_stats = {id(plan.judging): plan.stats for plan in plans if plan.judging is not None}

    def run_cases_for(judge: Judge) -> RunCases:
        budget = config.max_cost_usd - stats.cost_usd if config.max_cost_usd is not None else None
        return qa_runner(replace(config, max_cost_usd=budget, model_source=judge.source))

    def counted(qualification: Qualification, judging: JudgingPlan, judge_run: JudgeRun) -> None:
        if qualification.stats is not None:
            for total in (stats, judge_run.stats, suite_stats[id(judging)]):
                total.add(qualification.stats)
        if qualification.incomplete:
            stats.stop_with(qualification.incomplete)

    qualify_judges([plan.judging for plan in plans if plan.judging is not None], run_cases_for, config.data_dir, counted)


def _suite_of(plans: list[_SuitePlan]) -> PartOf:
    """Whose counters each request of these suites counts in besides the run's: its suite's, the
    first of the run's that needs it (a request two suites share is asked once, so counted once)."""
    if len(plans) == 1:
        stats = plans[0].stats
        return lambda key: stats
    owner: dict[str, RunStats] = {}
    for plan in plans:
        for request in plan.requests:
            owner.setdefault(request.key, plan.stats)
    return owner.get
