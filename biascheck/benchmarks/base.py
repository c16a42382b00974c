"""Benchmarks: the protocol every benchmark implements, its base class, and the registry.

:class:`Benchmark` declares every member the rest of biascheck reads from a benchmark (nothing
reads more: ``tests/test_benchmark_contract.py`` runs a benchmark made of these members alone).
:class:`BaseBenchmark` is the way to write one: it marks with ``@abstractmethod`` what a benchmark
must say itself, as syrupy's ``AbstractSyrupyExtension`` does, and gives the rest a default.

Must say (abstract in :class:`BaseBenchmark`):

- ``name``; ``metric_defs``: metric name -> :class:`~biascheck.metrics.core.MetricDef`, what
  ``aggregate`` reports, in order; ``record_columns``: what a baseline keeps per case (at least
  ``case_id``, ``category``, ``cluster``, ``outcome``); ``report_layout``: how reports show it;
- ``build_cases(manifest, files)``: data files -> prompts -> :class:`~biascheck.core.records.Case` s
  (benchmark item x prompt x choice order) in a :class:`BuiltCases`, with the categories whose
  optional data file could be had nowhere (left out of the run, a failed check unless accepted);
- ``requests(case, params, estimator)``: the model requests a case needs, as (messages, params,
  sample index); one for a QA case, k samples (or one log-probability call) for an HBB question;
- ``classify(case, responses, estimator)``: its responses -> :class:`~biascheck.core.records.Outcome`;
- ``aggregate(cases, outcomes, *, resamples, seed, manifest=None)`` -> a :class:`Metrics`;
- ``case_record(case, outcome)``: the case as results.json lists it (a dict holding at least the
  ``record_columns``); ``comparison_units(records, scoring)``: the keyword arguments of
  :class:`~biascheck.evaluation.baseline.ComparisonUnits` from such records.

Has a default (override where the benchmark differs):

- ``metric_names`` (the keys of ``metric_defs``); ``extra_metric_defs`` (none) and
  ``scored_metric_defs(scoring)`` (``metric_defs``): metrics that depend on how a run was scored
  (BBG's judge-corrected ones); ``settings_schema`` (None: no suite.toml table of
  its own; ``settings_required``, True: a suite must have it), ``takes_prompts`` / ``takes_answers``
  (False: no [prompts] / [answers] table),
  ``records_schema`` (anything goes), ``estimators`` (none), ``common_categories`` (none);
- ``estimator(manifest, override)`` -> None (one way to answer); ``fallback_reason(estimator,
  responses)`` -> None; ``fingerprint_settings(manifest)`` -> []; ``default_scoring(manifest)``
  -> None; ``report_examples(cases, limit)`` -> []; ``declared_cases(manifest)`` -> None (no count without the data);
- ``items(cases)``: the test items a suite shows, as (name, category, case ids): one per case;
  ``item_status(outcomes, cases, manifest)`` -> (status, error or None) of one item: the
  outcome's status.

``common_categories`` maps the benchmark's own category names to the shared names of
:data:`COMMON_CATEGORIES` (``{"Gender_identity": "gender", "SES": "ses"}``), for the reports' view
across suites (index.html: the same metric, category by category, for suites in other
languages). Map a category only where it measures the same social dimension; leave out the ones
that have no counterpart (intersections such as BBQ's Race_x_SES). A benchmark with an empty one
is left out of that view with a note; read it with :func:`common_categories`. The metrics the view
compares are ``report_layout.bias_metrics``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from biascheck.config.manifest import EXAMPLE_FIX, SuiteManifest, check_table
from biascheck.config.sources import Resolved
from biascheck.core.errors import BiascheckError
from biascheck.core.records import Case, Outcome, Response
from biascheck.core.validation import DocumentValidator

if TYPE_CHECKING:
    from biascheck.metrics.core import MetricDef, Table


@runtime_checkable
class Prompt(Protocol):
    """A prompt a suite's cases were rendered from, as the suite's fingerprint and reports read it
    (QA's :class:`~biascheck.benchmarks.qa.QAPrompt` is one)."""

    @property
    def id(self) -> str: ...

    @property
    def template(self) -> str: ...

    @property
    def unknown(self) -> str | None: ...  # the prompt's own wording of the unknown option, if any

    @property
    def letters(self) -> Sequence[str]: ...  # how it labels the options


@dataclass
class BuiltCases:
    """What ``Benchmark.build_cases`` returns."""

    cases: list[Case]
    prompts: Sequence[Prompt]  # the prompts used, for the fingerprint and reports
    skipped_categories: dict[str, str] = field(default_factory=dict)  # category -> reason
    # What the data says against itself, counted over the category's files (not only the cases the
    # subset keeps): category -> finding -> records; results.json's suite.data_quality. Empty: none.
    data_quality: dict[str, dict[str, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class ReportLayout:
    """How the reports show a benchmark's results (results.json does not say; the benchmark does)."""

    headline: tuple[str, ...]  # the metrics of the across-prompts and by-label tables, in order
    category_headline: tuple[str, ...] = ()  # shown in the per-category table whether gated or not
    label_title: str = "By label"  # the by-label table's title: what a label is for this benchmark
    spread_over: str = "prompts"  # what the across-... table spreads over (the by_prompt keys)
    examples_title: str = ""  # the examples table (``report_examples``), when the benchmark has one
    examples_columns: tuple[str, ...] = ()
    # Its headline bias metrics, which the view across suites compares category by category with
    # every other suite that reports the same metric (see ``common_categories``); empty: none.
    bias_metrics: tuple[str, ...] = ()


# The shared names a benchmark's ``common_categories`` maps its categories to: a category of one
# suite corresponds to a category of another when both map to the same name. Reuse one where the
# social dimension is the same; add a name here (one word or snake_case) for a dimension none covers.
COMMON_CATEGORIES = (
    "age",
    "disability",
    "disease",
    "education",
    "family_structure",
    "gender",
    "household_registration",
    "nationality",
    "physical_appearance",
    "political_orientation",
    "race_ethnicity",
    "region",
    "religion",
    "ses",
    "sexual_orientation",
)


DEFAULT_LAYOUT = ReportLayout(headline=())


# A model request of a case: (messages as dicts, request parameters, sample index).
Request = tuple[list[dict], dict, int]
# A test item of a suite: (its name, its category, the ids of the cases it reports on).
Item = tuple[str, str, tuple[str, ...]]


@runtime_checkable
class Metrics(Protocol):
    """What ``Benchmark.aggregate`` returns: the gated tables (metric name ->
    :class:`~biascheck.metrics.core.MetricValue`), overall and per category, and ``to_json()``,
    results.json's ``metrics``, which the reports and baselines read: ``overall``, ``by_category``,
    ``by_label`` and ``by_prompt`` (tables as :func:`~biascheck.metrics.core.tables_json` writes
    them; the last two may be empty), ``prompt_summary`` (metric -> spread over prompts; may be
    empty) and ``bootstrap`` (``n_boot``, ``seed``, ``confidence``)."""

    @property
    def overall(self) -> Table: ...

    @property
    def by_category(self) -> Mapping[str, Table]: ...

    def to_json(self) -> dict[str, Any]: ...


@runtime_checkable
class Benchmark(Protocol):
    """Every member the rest of biascheck reads from a benchmark (see the module docstring for
    what each means and which :class:`BaseBenchmark` defaults)."""

    @property
    def name(self) -> str: ...

    @property
    def metric_defs(self) -> Mapping[str, MetricDef]: ...

    @property
    def metric_names(self) -> tuple[str, ...]: ...

    # Metrics reported beside metric_defs only when a run is scored so (BBG's judge-corrected ones).
    @property
    def extra_metric_defs(self) -> Mapping[str, MetricDef]: ...

    def scored_metric_defs(self, scoring: Mapping[str, Any]) -> Mapping[str, MetricDef]:
        """The metric definitions of a run scored with ``scoring`` (its results' ``scoring``)."""
        ...

    @property
    def record_columns(self) -> tuple[str, ...]: ...

    @property
    def report_layout(self) -> ReportLayout: ...

    # The schema fragment of the benchmark's own suite.toml table, named after it (None: it takes
    # none), whether a suite must have that table, and whether its suites name their prompts in
    # [prompts] (else its table holds them).
    @property
    def settings_schema(self) -> Mapping[str, Any] | None: ...

    @property
    def settings_required(self) -> bool: ...

    @property
    def takes_prompts(self) -> bool: ...

    # Whether its suites may say how a case is answered in [answers] (QA: its answer modes).
    @property
    def takes_answers(self) -> bool: ...

    # Its part of the written documents: {"results_case": schema of each results.json case,
    # "baseline_row": schema of each baseline row} (records.schema.json beside its code).
    @property
    def records_schema(self) -> Mapping[str, Any]: ...

    # Ways to answer a case the run may choose (--biascheck-estimator); empty: there is one.
    @property
    def estimators(self) -> tuple[str, ...]: ...

    # Its categories -> names of COMMON_CATEGORIES (empty: left out of the view across suites).
    @property
    def common_categories(self) -> Mapping[str, str]: ...

    def build_cases(self, manifest: SuiteManifest, files: Mapping[str, Resolved]) -> BuiltCases: ...

    def estimator(self, manifest: SuiteManifest, override: str | None) -> Any:
        """How this run answers a case (``override``: the run's choice among ``estimators``)."""
        ...

    def requests(self, case: Case, params: dict, estimator: Any) -> list[Request]: ...

    def classify(self, case: Case, responses: Sequence[Response], estimator: Any) -> Outcome: ...

    def fallback_reason(self, estimator: Any, responses: Sequence[Response]) -> str | None:
        """Why the run answered otherwise than ``estimator`` says (a note for the report), or None."""
        ...

    def aggregate(
        self, cases: Sequence[Case], outcomes: Mapping[str, Outcome], *, resamples: int, seed: int, manifest: SuiteManifest | None = None
    ) -> Metrics: ...

    def items(self, cases: Sequence[Case]) -> list[Item]: ...

    def item_status(self, outcomes: Sequence[Outcome], cases: Sequence[Case], manifest: SuiteManifest) -> tuple[str, str | None]: ...

    def case_record(self, case: Case, outcome: Outcome) -> dict[str, Any]: ...

    def comparison_units(self, records: Sequence[Mapping[str, Any]], scoring: Mapping[str, str]) -> dict[str, Any]: ...

    def fingerprint_settings(self, manifest: SuiteManifest) -> list[Any]:
        """The benchmark's own settings that change what a run measures (part of the suite's
        fingerprint "subset"): e.g. which questions, runs or estimator. Empty when it has none."""
        ...

    def default_scoring(self, manifest: SuiteManifest) -> dict[str, str] | None:
        """How the suite scores what could not be read, when the run does not say (a fingerprint
        part kept readable); None when the benchmark has no such choice."""
        ...

    def report_examples(self, cases: Sequence[Mapping[str, Any]], limit: int) -> list[tuple[str, ...]]:
        """Up to ``limit`` rows of the reports' examples table, from results.json's cases (empty:
        the benchmark shows none); columns as ``report_layout.examples_columns``."""
        ...

    def declared_cases(self, manifest: SuiteManifest) -> int | None:
        """The suite's cases from what its manifest declares alone (its data files' ``rows``),
        for a listing of suites whose files are not here; None when the manifest cannot say."""
        ...


# Anything goes: a benchmark that describes its records overrides ``records_schema``.
ANY_RECORDS: Mapping[str, Any] = {"results_case": {}, "baseline_row": {}}


class BaseBenchmark(ABC):
    """The base class of a :class:`Benchmark`: ``@abstractmethod`` marks what a benchmark must say
    (it cannot be instantiated before it does); everything else has the default the module
    docstring lists. A class attribute overrides an abstract property (``name = "kobbq"``)."""

    # --- must say -------------------------------------------------------------------------------

    @property
    @abstractmethod
    def name(self) -> str: ...

    @property
    @abstractmethod
    def metric_defs(self) -> Mapping[str, MetricDef]: ...

    @property
    @abstractmethod
    def record_columns(self) -> tuple[str, ...]: ...

    @property
    @abstractmethod
    def report_layout(self) -> ReportLayout: ...

    @abstractmethod
    def build_cases(self, manifest: SuiteManifest, files: Mapping[str, Resolved]) -> BuiltCases: ...

    @abstractmethod
    def requests(self, case: Case, params: dict, estimator: Any) -> list[Request]: ...

    @abstractmethod
    def classify(self, case: Case, responses: Sequence[Response], estimator: Any) -> Outcome: ...

    @abstractmethod
    def aggregate(
        self, cases: Sequence[Case], outcomes: Mapping[str, Outcome], *, resamples: int, seed: int, manifest: SuiteManifest | None = None
    ) -> Metrics: ...

    @abstractmethod
    def case_record(self, case: Case, outcome: Outcome) -> dict[str, Any]: ...

    @abstractmethod
    def comparison_units(self, records: Sequence[Mapping[str, Any]], scoring: Mapping[str, str]) -> dict[str, Any]: ...

    # --- defaults -------------------------------------------------------------------------------

    settings_schema: Mapping[str, Any] | None = None
    settings_required = True
    takes_prompts = False
    takes_answers = False
    records_schema: Mapping[str, Any] = ANY_RECORDS
    estimators: tuple[str, ...] = ()
    common_categories: Mapping[str, str] = {}
    extra_metric_defs: Mapping[str, MetricDef] = {}

    @property
    def metric_names(self) -> tuple[str, ...]:
        return tuple(self.metric_defs)

    def scored_metric_defs(self, scoring: Mapping[str, Any]) -> Mapping[str, MetricDef]:
        return self.metric_defs

    def estimator(self, manifest: SuiteManifest, override: str | None) -> Any:
        return None

    def fallback_reason(self, estimator: Any, responses: Sequence[Response]) -> str | None:
        return None

    def fingerprint_settings(self, manifest: SuiteManifest) -> list[Any]:
        return []

    def default_scoring(self, manifest: SuiteManifest) -> dict[str, str] | None:
        return None

    def report_examples(self, cases: Sequence[Mapping[str, Any]], limit: int) -> list[tuple[str, ...]]:
        return []

    def declared_cases(self, manifest: SuiteManifest) -> int | None:
        return None

    def items(self, cases: Sequence[Case]) -> list[Item]:
        """One test item per case, named by its id."""
        return [(case.case_id, case.category, (case.case_id,)) for case in cases]

    def item_status(self, outcomes: Sequence[Outcome], cases: Sequence[Case], manifest: SuiteManifest) -> tuple[str, str | None]:
        """The status of the item's one outcome, and its error when it is one."""
        (outcome,) = outcomes
        return outcome.status, outcome.error if outcome.status == "error" else None


@runtime_checkable
class JudgedBenchmark(Protocol):
    """The capability of a benchmark whose responses evaluator models (judges) read, in the judge
    stage of a run (:mod:`biascheck.judging`). Its settings live in the suite.toml table named
    ``settings_table``: the judges, how several judges' readings are combined, how what no judge
    could read is scored, the calibrations, and the QA suite a judge is qualified on."""

    settings_table: str
    # How what the judges could not read may be scored (``scoring``'s override takes one of these).
    scoring_choices: tuple[str, ...]
    # The QA suite a judge is qualified on when the user names none (a folder or packaged name).
    qualification_default: str
    # The classes a judge's reading may take (an answered outcome's ``answer_class``): the values
    # of the judges' agreement.
    reading_classes: tuple[str, ...]
    # The metrics reported for each judge of several, beside the aggregate's (those its results have).
    judge_metrics: tuple[str, ...]

    def judge_settings(self, manifest: SuiteManifest) -> Mapping[str, Any]:
        """The judges the manifest names: ``{"models": [str, ...], "models_field": the field that
        names them, "sampling": {...}, "aggregation": str, "primary": str | None, "min_alpha":
        float | None}``."""
        ...

    def judge_requests(self, case: Case, generation: Sequence[Response], judge_params: dict) -> list[tuple[list[dict], dict, int]]: ...

    def shown_to_judges(self, record: Mapping[str, Any]) -> tuple[str, str]:
        """What a report shows of a judged case (results.json's record) beside its judges'
        readings: the question they answered and the text they read."""
        ...

    def calibration_paths(self, manifest: SuiteManifest) -> list[tuple[Path, str]]:
        """The calibrations the manifest names, each with where (for errors about it)."""
        ...

    def calibration_judge(self, path: Path, where: str) -> str:
        """The judge model the calibration at ``path`` was fitted for."""
        ...

    def scoring(
        self, manifest: SuiteManifest, override: str | None, *, calibration: Path | None = None, judge: str | None = None, where: str = ""
    ) -> dict[str, str]:
        """The scoring convention of a run: ``override`` (a command-line choice), else the manifest's;
        with ``calibration`` (a judge's, named at ``where``), checked against ``judge``, its id and counts."""
        ...

    def with_scoring(self, manifest: SuiteManifest, scoring: Mapping[str, str]) -> SuiteManifest:
        """The manifest as the run scores it: the run's convention replaces the file's."""
        ...

    def qualification_path(self, manifest: SuiteManifest) -> str | None:
        """The qualification suite as the manifest writes it (relative to it); None when unset."""
        ...

    def qualification(self, manifest: SuiteManifest) -> tuple[Path, dict[str, Any]]:
        """The QA suite a judge is qualified on, and the qualification's bounds."""
        ...


def metric_defs_for(benchmark: Benchmark, scoring: Mapping[str, Any] | None) -> Mapping[str, MetricDef]:
    """A benchmark's metric definitions as a run was scored (its results' ``scoring``): its
    ``metric_defs`` unless they depend on it (BBG's judge calibration)."""
    return benchmark.scored_metric_defs(scoring or {})


def schema_fragment(package: str, name: str = "settings") -> dict[str, Any]:
    """The ``<name>.schema.json`` a benchmark package ships beside its code (``settings``: its
    suite.toml table; ``records``: its results cases and baseline rows)."""
    import json
    from importlib import resources

    from biascheck.core.bounds import with_bounds

    return with_bounds(json.loads(resources.files(package).joinpath(f"{name}.schema.json").read_text("utf-8")))


def document_schema(base: Mapping[str, Any], benchmark_name: str, record: str, where: str) -> dict[str, Any]:
    """A written document's schema (results.json, a baseline) for one benchmark: the shared
    ``base`` with the benchmark's ``record`` fragment applied to each of its case records."""
    try:
        fragment = get_benchmark(benchmark_name).records_schema[record]
    except KeyError:
        known = ", ".join(sorted(registered_benchmarks()))
        raise BiascheckError(
            where,
            "suite.benchmark",
            f"{benchmark_name!r} is not a registered benchmark",
            f"install the package that provides it (registered: {known})",
        ) from None
    cases = {"items": fragment} if record == "results_case" else {"properties": {"rows": {"items": fragment}}}
    return {**base, "allOf": [{"properties": {"cases": cases}}]}


def first_document_error(document: Any, validator_of: Callable[[str | None], DocumentValidator]) -> Any:
    """The first schema error of a written document (a results.json, a baseline), by path, or None.
    ``validator_of(None)``: the shared schema's validator; ``validator_of(name)``: the shared schema
    with benchmark ``name``'s records (:func:`document_schema`). A document that holds is read once,
    by its benchmark's validator (jsonschema-rs's check: :mod:`biascheck.core.validation`); one that
    does not is read again the long way, by jsonschema, which names the shared part's first error first."""
    suite = document.get("suite") if isinstance(document, dict) else None
    benchmark = suite.get("benchmark") if isinstance(suite, dict) else None
    if isinstance(benchmark, str) and _loads(benchmark) and validator_of(benchmark).is_valid(document):
        return None

    def first(validator: Any) -> Any:
        return next(iter(sorted(validator.iter_errors(document), key=lambda e: [str(p) for p in e.absolute_path])), None)

    # The shared part holds, so the benchmark is named: now its records.
    return first(validator_of(None)) or first(validator_of(document["suite"]["benchmark"]))


def check_settings(manifest: SuiteManifest, benchmark: Benchmark) -> None:
    """The manifest's benchmark-specific parts: its own table against the fragment it ships, and
    [prompts] where the benchmark takes one (the suite schema checked everything else)."""
    name, table, path = manifest.benchmark, manifest.settings, manifest.path
    if benchmark.settings_schema is None:
        if table is not None:
            raise BiascheckError(path, name, f"{name} suites have no [{name}] table", "remove it")
    elif table is None:
        if benchmark.settings_required:
            raise BiascheckError(path, "(top level)", f"{name!r} is a required property", f"add a [{name}] table ({EXAMPLE_FIX})")
    else:
        check_table(path, name, table, dict(benchmark.settings_schema))
    if benchmark.takes_prompts and "prompts" not in manifest.raw:
        raise BiascheckError(path, "(top level)", "'prompts' is a required property", f"add a [prompts] table ({EXAMPLE_FIX})")
    if not benchmark.takes_prompts and "prompts" in manifest.raw:
        raise BiascheckError(path, "prompts", f"{name} suites take no [prompts] table (their prompts are in [{name}])", "remove it")
    if not benchmark.takes_answers and "answers" in manifest.raw:
        raise BiascheckError(path, "answers", f"{name} suites take no [answers] table", "remove it (answer modes are the QA benchmarks')")


def suite_schema() -> dict[str, Any]:
    """The whole suite.toml schema, for editors and documentation: the packaged suite schema with
    each registered benchmark's table (its fragment) in place."""
    import copy

    from biascheck.config.manifest import suite_validator

    schema = copy.deepcopy(suite_validator().schema)  # its bounds filled in
    for name in sorted(registered_benchmarks()):
        fragment = get_benchmark(name).settings_schema
        if fragment is not None:
            schema["properties"][name] = {key: value for key, value in fragment.items() if key not in ("$schema", "$id")}
    return schema


def check_metric_tables(manifest: SuiteManifest, defs: Mapping, benchmark: str, *, estimators: bool = False) -> list[tuple[str, dict]]:
    """Every threshold and regression rule of the manifest names a metric of the benchmark, and
    each rule's sign agrees with its metric's direction; returns the threshold tables. (A gate on
    a metric the benchmark never reports would only fail at the end of a paid run.)"""
    if manifest.estimator_thresholds and not estimators:
        raise BiascheckError(
            manifest.path, "estimator_thresholds", f"{benchmark} has one way to answer, no estimators", "put these gates in [thresholds]"
        )
    tables = [
        ("thresholds", manifest.thresholds),
        *((f"category_thresholds.{c}", t) for c, t in manifest.category_thresholds.items()),
        *((f"estimator_thresholds.{e}", t) for e, t in manifest.estimator_thresholds.items()),
    ]
    gated = [name for name, d in defs.items() if d.gated]
    named = [(f"{where}.{metric}", metric) for where, table in tables for metric in table]
    for where, metric in [*named, *((f"regression.margins.{m}", m) for m in manifest.regression.rules)]:
        if metric not in defs:
            raise BiascheckError(manifest.path, where, f"{benchmark} does not report a metric {metric!r}", f"use one of: {', '.join(gated)}")
        if not defs[metric].gated:
            raise BiascheckError(
                manifest.path,
                where,
                f"{metric} is reported beside the gated metrics, never gated ({defs[metric].description})",
                f"gate one of: {', '.join(gated)}",
            )
    for metric, rule in manifest.regression.rules.items():
        rule.check_direction(defs[metric].better, where=manifest.path, field=f"regression.margins.{metric}")
    return tables


ENTRY_POINT_GROUP = "biascheck.benchmarks"


def registered_benchmarks() -> dict[str, EntryPoint]:
    """Benchmark name -> where it is defined: the entry points of the ``biascheck.benchmarks``
    group. biascheck's own benchmarks register there too (pyproject.toml), exactly as a third
    party's package would, so nothing here names one."""
    return {entry.name: entry for entry in entry_points(group=ENTRY_POINT_GROUP)}


def _loads(name: str) -> bool:
    """Whether ``name`` is a registered benchmark: loaded once, where listing the registered ones
    reads every installed distribution's entry points (about 10 ms)."""
    try:
        get_benchmark(name)
    except KeyError:
        return False
    return True


@cache
def get_benchmark(name: str) -> Benchmark:
    """The benchmark registered as ``name``; only its own module is imported."""
    entry = registered_benchmarks().get(name)
    if entry is None:
        raise KeyError(name)
    return entry.load()


def judged_benchmarks() -> dict[str, JudgedBenchmark]:
    """The registered benchmarks an evaluator model reads, by name (this loads every benchmark)."""
    found = {name: get_benchmark(name) for name in sorted(registered_benchmarks())}
    return {name: benchmark for name, benchmark in found.items() if isinstance(benchmark, JudgedBenchmark)}


def judged_benchmark(name: str | None, *, where: str) -> JudgedBenchmark:
    """The judged benchmark ``name``, or the only one registered when ``name`` is None."""
    judged = judged_benchmarks()
    if name is None and len(judged) == 1:
        return next(iter(judged.values()))
    if name in judged:
        return judged[name]
    problem = f"{name!r} is not a judged benchmark" if name is not None else "several judged benchmarks are registered"
    raise BiascheckError(where, None, problem, f"name one of: {', '.join(judged) or '(none registered)'}")


def reading_shown(benchmark_name: str | None) -> Callable[[Mapping[str, Any]], tuple[str, str]]:
    """How reports show a judged case of a results document's benchmark beside its judges'
    readings (``JudgedBenchmark.shown_to_judges``); nothing when it is not registered here."""
    try:
        benchmark = get_benchmark(benchmark_name or "")
    except KeyError:
        benchmark = None
    if isinstance(benchmark, JudgedBenchmark):
        return benchmark.shown_to_judges
    return lambda record: ("", "")


def layout_of(benchmark_name: str | None) -> ReportLayout:
    """The report layout of a results document's benchmark; a plain one when it is not registered
    here (a report of another installation's results still renders)."""
    try:
        return get_benchmark(benchmark_name or "").report_layout
    except KeyError:
        return DEFAULT_LAYOUT


def common_categories(benchmark: object) -> dict[str, str]:
    """A benchmark's ``common_categories`` (its category -> shared name), empty when it has none."""
    return dict(getattr(benchmark, "common_categories", None) or {})


def common_categories_of(document: Mapping[str, Any]) -> dict[str, str]:
    """The category mapping of a results document: the one it carries (``suite.common_categories``,
    written by the run), else its registered benchmark's (a document of an older biascheck); empty
    when neither says."""
    suite = document.get("suite") or {}
    if "common_categories" in suite:
        return dict(suite["common_categories"] or {})
    try:
        return common_categories(get_benchmark(suite.get("benchmark") or ""))
    except KeyError:
        return {}


def examples_of(document: Mapping[str, Any], limit: int = 5) -> list[tuple[str, ...]]:
    """The examples table's rows of a results document (see ``Benchmark.report_examples``)."""
    try:
        benchmark = get_benchmark((document.get("suite") or {}).get("benchmark") or "")
    except KeyError:
        return []
    return benchmark.report_examples(document.get("cases") or [], limit)


def benchmark_of(manifest: SuiteManifest) -> Benchmark:
    """The manifest's benchmark, with its settings checked; an unregistered name is a one-line error."""
    try:
        benchmark = get_benchmark(manifest.benchmark)
    except KeyError:
        known = ", ".join(map(repr, sorted(registered_benchmarks())))
        raise BiascheckError(manifest.path, "suite.benchmark", f"{manifest.benchmark!r} is not allowed", f"use one of: {known}") from None
    check_settings(manifest, benchmark)
    return benchmark
