"""Benchmarks: each module implements the same small protocol.

- ``build_cases(manifest, files)``: data files -> prompts -> :class:`~biascheck.core.records.Case` s
  (benchmark item x prompt x choice order), plus the categories whose optional data file could be
  had nowhere (left out of the run, which reports them as a failed check unless accepted);
- ``requests(case, params, estimator)``: the model requests a case needs, as (messages, params,
  sample index); one for a QA case, k samples (or one log-probability call) for an HBB question;
- ``classify(case, responses, estimator)``: its responses -> :class:`~biascheck.core.records.Outcome`;
- ``metric_names``: what ``aggregate`` reports; ``aggregate(cases, outcomes, ...)`` -> metrics;
- ``items(cases)``: the test items a suite shows (one per case, or per HBB instance) and
  ``item_status(item, outcomes)`` what each reports.

Optional: ``common_categories``, a mapping from the benchmark's own category names to the shared
names of :data:`COMMON_CATEGORIES` (``{"Gender_identity": "gender", "SES": "ses"}``), for the
reports' view across suites (index.html: the same metric, category by category, for suites in
other languages). Map a category only where it measures the same social dimension; leave out the
ones that have no counterpart (intersections such as BBQ's Race_x_SES). A benchmark without it
(or with an empty one) is left out of that view with a note; read it with
:func:`common_categories`. The metrics the view compares are ``report_layout.bias_metrics``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from biascheck.config.manifest import EXAMPLE_FIX, SuiteManifest, check_table
from biascheck.config.sources import Resolved
from biascheck.core.errors import BiascheckError
from biascheck.core.records import Case, Outcome, Response


@dataclass
class BuiltCases:
    cases: list[Case]
    prompts: list  # the prompts used, for the fingerprint and reports
    skipped_categories: dict[str, str] = field(default_factory=dict)  # category -> reason


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


@runtime_checkable
class Benchmark(Protocol):
    """What every benchmark has (see the module docstring). Beside these members, a benchmark may
    have ``common_categories: Mapping[str, str]`` (its category -> a name of
    :data:`COMMON_CATEGORIES`); it is not a member here so that a benchmark without one still is a
    :class:`Benchmark`, and it is read with :func:`common_categories`."""

    name: str
    metric_names: tuple[str, ...]
    # The schema fragment of the benchmark's own suite.toml table, named after it (None: it takes
    # none), and whether its suites name their prompts in [prompts] (else its table holds them).
    settings_schema: Mapping[str, Any] | None
    takes_prompts: bool
    # Whether its suites may say how a case is answered in [answers] (QA: its answer modes).
    takes_answers: bool
    # Ways to answer a case the run may choose (--biascheck-estimator); empty: there is one.
    estimators: tuple[str, ...]
    report_layout: ReportLayout
    # Its part of the written documents: {"results_case": schema of each results.json case,
    # "baseline_row": schema of each baseline row} (records.schema.json beside its code).
    records_schema: Mapping[str, Any]

    def build_cases(self, manifest: SuiteManifest, files: Mapping[str, Resolved]) -> BuiltCases: ...

    def requests(self, case: Case, params: dict, estimator: str | None) -> list[tuple[list[dict], dict, int]]: ...

    def classify(self, case: Case, responses: Sequence[Response], estimator: str | None) -> Outcome: ...

    def aggregate(self, cases: Sequence[Case], outcomes: Mapping[str, Outcome], *, resamples: int, seed: int): ...

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


@runtime_checkable
class JudgedBenchmark(Protocol):
    """The capability of a benchmark whose responses an evaluator model reads. Its settings live in
    the suite.toml table named ``settings_table``: the judge (``model``, ``sampling``), how what the
    judge could not read is scored, and the QA suite the judge is qualified on."""

    settings_table: str
    # How what the judge could not read may be scored (``scoring``'s override takes one of these).
    scoring_choices: tuple[str, ...]
    # The QA suite a judge is qualified on when the user names none (a folder or packaged name).
    qualification_default: str

    def judge_settings(self, manifest: SuiteManifest) -> Mapping[str, Any]:
        """``{"model": str | None, "sampling": {...}}``: the judge the manifest names."""
        ...

    def judge_requests(self, case: Case, generation: Sequence[Response], judge_params: dict) -> list[tuple[list[dict], dict, int]]: ...

    def scoring(self, manifest: SuiteManifest, override: str | None, *, calibration: Path | None = None, judge: str | None = None) -> dict[str, str]:
        """The scoring convention of a run: ``override`` (a command-line choice), else the manifest's;
        ``calibration``: a calibration file of the judge given for the run (else the manifest's, if
        any), checked against ``judge``, the run's judge model."""
        ...

    def with_scoring(self, manifest: SuiteManifest, scoring: Mapping[str, str]) -> SuiteManifest:
        """The manifest as the run scores it: the run's convention replaces the file's."""
        ...

    def qualification_path(self, manifest: SuiteManifest) -> str | None:
        """The qualification suite as the manifest writes it (relative to it); None when unset."""
        ...

    def qualification(self, manifest: SuiteManifest) -> tuple[Path, dict[str, Any]]:
        """The QA suite the judge is qualified on, and the qualification's bounds."""
        ...

    def qualify(self, judge: Any, suite_dir: Path, config: Any, **bounds: Any) -> Any:
        """Run the qualification (see :meth:`qualification`)."""
        ...


def metric_defs_for(benchmark: Any, scoring: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """A benchmark's metric definitions as a run was scored (its results' ``scoring``): a benchmark
    whose metrics depend on it (BBG's judge calibration) has ``scored_metric_defs``."""
    specialise = getattr(benchmark, "scored_metric_defs", None)
    return specialise(scoring or {}) if specialise is not None else benchmark.metric_defs


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


def check_settings(manifest: SuiteManifest, benchmark: Benchmark) -> None:
    """The manifest's benchmark-specific parts: its own table against the fragment it ships, and
    [prompts] where the benchmark takes one (the suite schema checked everything else)."""
    name, table, path = manifest.benchmark, manifest.settings, manifest.path
    if benchmark.settings_schema is None:
        if table is not None:
            raise BiascheckError(path, name, f"{name} suites have no [{name}] table", "remove it")
    elif table is None:
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
