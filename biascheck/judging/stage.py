"""The judge stage of one run: once the model's responses are in, each judge of each judged suite
reads them, through the same store, batches, budget and dry run as the model under test.

Each judge's calls are keyed by its model and parameters, so a judge added to a recorded run is
the only one called; the others' readings come from the store. The session hands the stage a way
to call (:data:`JudgeCall`) and to run a QA selection (for qualification); the stage imports
nothing above it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from biascheck.benchmarks.base import JudgedBenchmark
from biascheck.config.manifest import canonical_json
from biascheck.core.errors import BiascheckError
from biascheck.core.records import Case, Outcome, Response
from biascheck.core.spelling import option
from biascheck.execution.batches import batch_provider
from biascheck.execution.llm import LiteLLMClient, check_ready
from biascheck.execution.planning import plan_requests
from biascheck.execution.runner import NOT_RUN, ModelRequest
from biascheck.execution.stats import RunStats
from biascheck.judging.aggregate import aggregate
from biascheck.judging.calibration import Scoring, scoring_for
from biascheck.judging.panel import Judge, JudgeOptions, Panel, panel_for
from biascheck.judging.qualification import Qualification, RunCases, qualify
from biascheck.suite import Suite

# How the stage calls a judge: (its requests, the judge, the counters its calls add to).
JudgeCall = Callable[[list[ModelRequest], Judge, RunStats], None]
# How a case's responses become its outcome (the session's reading, which marks truncated replies).
Classify = Callable[[Case, list[Response]], Outcome]


@dataclass
class JudgeRun:
    """One judge's part of one suite's stage: its scoring (its own calibration), its requests'
    keys per case (empty where it was not asked: no story to read), its counters, its qualification."""

    judge: Judge
    scoring: dict[str, str]
    keys: list[list[str]] = field(default_factory=list)
    stats: RunStats = field(default_factory=RunStats)
    qualification: Qualification | None = None


@dataclass
class JudgingPlan:
    """One judged suite's stage: its panel, how it is scored, and each judge's part."""

    suite: Suite
    panel: Panel
    scoring: Scoring
    runs: list[JudgeRun]

    @property
    def stats(self) -> RunStats:
        """Every judge's calls of this suite (qualifications included)."""
        total = RunStats()
        for run in self.runs:
            total.add(run.stats)
        return total

    def keys(self) -> Iterable[str]:
        return (key for run in self.runs for keys in run.keys for key in keys)


def plan_for(suite: Suite, options: JudgeOptions, panel: Panel) -> JudgingPlan:
    scoring = scoring_for(suite, options, panel)
    return JudgingPlan(suite, panel, scoring, [JudgeRun(judge, own) for judge, own in zip(panel.judges, scoring.per_judge)])


def judging_plan(suite: Suite, options: JudgeOptions, model) -> JudgingPlan | None:
    """The stage of ``suite`` (None: its benchmark has no judge); refused here when it cannot work."""
    panel = panel_for(suite, options, model)
    return plan_for(suite, options, panel) if panel is not None else None


# --- before the first call ------------------------------------------------------------------------


def check_prices(plans: Iterable[JudgingPlan]) -> None:
    """Under a budget every judge needs a price, known before the first generation is paid for."""
    for plan in plans:
        for judge in plan.panel.judges:
            if judge.model.is_sim:
                continue
            try:
                LiteLLMClient(judge.model, require_price=True)
            except BiascheckError:
                raise BiascheckError(
                    f"{option('max-cost')}",
                    None,
                    f"litellm has no price for the judge {judge.name}, so spending cannot be tracked",
                    f"pass {option('judge-price')} INPUT/OUTPUT (USD per million tokens)",
                ) from None


def check_judges_ready(plans: Iterable[JudgingPlan], *, batch: bool) -> None:
    """Every judge that will be called can be (a known provider, credentials set)."""
    for plan in plans:
        for judge in plan.panel.judges:
            check_ready(judge.model, judge.source)
            if batch:
                batch_provider(judge.model, f"{option('batch')} (the judge, {judge.source})")


# --- qualification ----------------------------------------------------------------------------------


def qualify_judges(
    plans: Iterable[JudgingPlan],
    run_cases_for: Callable[[Judge], RunCases],
    data_dir: Path | None,
    counted: Callable[[Qualification, JudgingPlan, JudgeRun], None],
) -> None:
    """Each judge once per qualification suite, on the disambiguated items of the QA suite its
    suite names; ``run_cases_for(judge)`` answers them (its budget is what the run has left), and
    ``counted`` adds a qualification's calls to the run's totals, once, for the first suite it serves."""
    done: dict[str, Qualification] = {}
    for plan in plans:
        benchmark = plan.suite.benchmark
        if not isinstance(benchmark, JudgedBenchmark):
            continue
        suite_dir, bounds = benchmark.qualification(plan.suite.manifest)
        for run in plan.runs:
            key = canonical_json([run.judge.model.endpoint, run.judge.identity(), str(suite_dir), bounds])
            if key not in done:
                judge = replace(run.judge.model, params=run.judge.params)
                done[key] = qualify(judge, suite_dir, run_cases_for(run.judge), data_dir=data_dir, **bounds)
                counted(done[key], plan, run)
            run.qualification = done[key]


# --- the stage's calls ------------------------------------------------------------------------------


def read_stories(
    plan: JudgingPlan,
    cases: Sequence[Case],
    generation_keys: Sequence[Sequence[str]],
    responses: dict[str, Response],
    call: JudgeCall,
    incomplete: str | None,
) -> None:
    """Each judge's requests for the generations in ``responses``, called (or, when the run is
    already ``incomplete``, marked not run); the responses land in ``responses``."""
    benchmark = plan.suite.benchmark
    if not isinstance(benchmark, JudgedBenchmark):
        raise TypeError(f"{plan.suite.name} is not judged")
    read = benchmark.judge_requests
    with_generation = [(case, [responses[k] for k in keys]) for case, keys in zip(cases, generation_keys)]
    for run in plan.runs:
        run.keys, requests = plan_requests(lambda pair, params: read(pair[0], pair[1], params), with_generation, run.judge.model, run.judge.params)
        if incomplete:
            for request in requests:
                responses.setdefault(request.key, Response(text=None, error=NOT_RUN + incomplete))
        else:
            call(requests, run.judge, run.stats)


# --- outcomes ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Judged:
    """One judged suite's outcomes: the aggregate of each case (what its metrics read) and each
    judge's own (in panel order); ``asked[i]``: whether the judges were asked about case i (it had
    a story to read)."""

    outcomes: dict[str, Outcome]
    by_judge: tuple[dict[str, Outcome], ...]
    asked: tuple[bool, ...]


def judged_outcomes(
    plan: JudgingPlan, cases: Sequence[Case], generation_keys: Sequence[Sequence[str]], responses: Mapping[str, Response], classify: Classify
) -> Judged:
    unread: list[list[str]] = [[] for _ in cases]  # the stage never ran (e.g. it was interrupted): nothing was read
    by_judge = tuple(
        {
            case.case_id: classify(case, [responses[k] for k in [*keys, *judge_keys]])
            for case, keys, judge_keys in zip(cases, generation_keys, run.keys or unread)
        }
        for run in plan.runs
    )
    panel = plan.panel
    names = [judge.name for judge in panel.judges]
    outcomes = by_judge[0] if not panel.several else {
        case.case_id: aggregate([own[case.case_id] for own in by_judge], panel.aggregation, panel.primary, names) for case in cases
    }  # fmt: skip
    asked = tuple(bool(keys) for keys in plan.runs[0].keys or unread)
    return Judged(outcomes, by_judge, asked)
