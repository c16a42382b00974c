"""Benchmarks: each module implements the same small protocol.

- ``build_cases(manifest, files)``: data files -> prompts -> :class:`~biascheck.core.records.Case` s
  (benchmark item x prompt x choice order), plus categories skipped for missing optional data;
- ``requests(case, params, estimator)``: the model requests a case needs, as (messages, params,
  sample index); one for a QA case, k samples (or one log-probability call) for an HBB question;
- ``classify(case, responses, estimator)``: its responses -> :class:`~biascheck.core.records.Outcome`;
- ``metric_names``: what ``aggregate`` reports; ``aggregate(cases, outcomes, ...)`` -> metrics;
- ``items(cases)``: the test items a suite shows (one per case, or per HBB instance) and
  ``item_status(item, outcomes)`` what each reports.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from biascheck.config.manifest import SuiteManifest
from biascheck.config.sources import Resolved
from biascheck.core.errors import BiascheckError
from biascheck.core.records import Case, Outcome, Response


@dataclass
class BuiltCases:
    cases: list[Case]
    prompts: list  # the prompts used, for the fingerprint and reports
    skipped_categories: dict[str, str] = field(default_factory=dict)  # category -> reason


class Benchmark(Protocol):
    name: str
    metric_names: tuple[str, ...]

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


@runtime_checkable
class JudgedBenchmark(Protocol):
    """The capability of a benchmark whose responses an evaluator model reads. Its settings live in
    the suite.toml table named ``settings_table``: the judge (``model``, ``sampling``), how what the
    judge could not read is scored, and the QA suite the judge is qualified on."""

    settings_table: str

    def judge_settings(self, manifest: SuiteManifest) -> Mapping[str, Any]:
        """``{"model": str | None, "sampling": {...}}``: the judge the manifest names."""
        ...

    def judge_requests(self, case: Case, generation: Sequence[Response], judge_params: dict) -> list[tuple[list[dict], dict, int]]: ...

    def scoring(self, manifest: SuiteManifest, override: str | None) -> dict[str, str]:
        """The scoring convention of a run: ``override`` (a command-line choice), else the manifest's."""
        ...

    def with_scoring(self, manifest: SuiteManifest, scoring: Mapping[str, str]) -> SuiteManifest:
        """The manifest as the run scores it: the run's convention replaces the file's."""
        ...

    def qualification(self, manifest: SuiteManifest) -> tuple[Path, dict[str, Any]]:
        """The QA suite the judge is qualified on, and the qualification's bounds."""
        ...

    def qualify(self, judge: Any, suite_dir: Path, config: Any, **bounds: Any) -> Any:
        """Run the qualification (see :meth:`qualification`)."""
        ...


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
    for where, table in tables:
        for metric in table:
            if metric not in defs:
                raise BiascheckError(
                    manifest.path, f"{where}.{metric}", f"{benchmark} does not report a metric {metric!r}", f"use one of: {', '.join(defs)}"
                )
    for metric, rule in manifest.regression.rules.items():
        if metric not in defs:
            raise BiascheckError(
                manifest.path, f"regression.margins.{metric}", f"{benchmark} does not report a metric {metric!r}", f"use one of: {', '.join(defs)}"
            )
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
