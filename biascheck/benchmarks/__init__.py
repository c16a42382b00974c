"""Benchmarks: the protocol a benchmark implements, its base class, the records it works on and
the registry (entry-point group ``biascheck.benchmarks``). How to write one: docs/adding-a-benchmark.md; the
public names are ``__all__`` (docs/api.md); the benchmark packages below are internal, except
:mod:`biascheck.benchmarks.qa`, the shared layer of BBQ-style multiple-choice benchmarks."""

from typing import TYPE_CHECKING

from biascheck.core.lazy import lazy_exports

if TYPE_CHECKING:
    from biascheck.benchmarks.base import (
        COMMON_CATEGORIES,
        BaseBenchmark,
        Benchmark,
        BuiltCases,
        JudgedBenchmark,
        Metrics,
        Prompt,
        ReportLayout,
        get_benchmark,
        registered_benchmarks,
        schema_fragment,
    )
    from biascheck.config.manifest import SuiteManifest
    from biascheck.config.sources import Resolved
    from biascheck.core.records import Case, Message, Outcome, QATruth, Response
    from biascheck.core.spelling import option
    from biascheck.metrics.core import MetricDef, MetricValue, metric_table, tables_json

__all__ = [
    "COMMON_CATEGORIES",
    "BaseBenchmark",
    "Benchmark",
    "BuiltCases",
    "Case",
    "JudgedBenchmark",
    "Message",
    "MetricDef",
    "MetricValue",
    "Metrics",
    "Outcome",
    "Prompt",
    "QATruth",
    "ReportLayout",
    "Resolved",
    "Response",
    "SuiteManifest",
    "get_benchmark",
    "metric_table",
    "option",
    "registered_benchmarks",
    "schema_fragment",
    "tables_json",
]

_BASE = "biascheck.benchmarks.base"
_RECORDS = "biascheck.core.records"
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        **dict.fromkeys(
            ["COMMON_CATEGORIES", "BaseBenchmark", "Benchmark", "BuiltCases", "JudgedBenchmark", "Metrics", "Prompt", "ReportLayout"], _BASE
        ),
        **dict.fromkeys(["get_benchmark", "registered_benchmarks", "schema_fragment"], _BASE),
        **dict.fromkeys(["Case", "Message", "Outcome", "QATruth", "Response"], _RECORDS),
        **dict.fromkeys(["MetricDef", "MetricValue", "metric_table", "tables_json"], "biascheck.metrics.core"),
        # What a benchmark's load() is given: the suite's manifest and its data files as resolved.
        "SuiteManifest": "biascheck.config.manifest",
        "Resolved": "biascheck.config.sources",
        # An option named in an error's fix, as the front end running the code spells it.
        "option": "biascheck.core.spelling",
    },
    __all__,
)
