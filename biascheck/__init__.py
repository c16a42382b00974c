"""biascheck: continuous bias-regression testing for language models.

The pipeline, one layer per package (docs/development.md, "Layout"; ``lint-imports`` holds that they import one
way): suite manifests and data files (:mod:`.config`) -> cases (:mod:`.benchmarks`, through
:mod:`.suite`) -> model requests and responses (:mod:`.execution`: the runner, litellm, the
response store) -> outcomes (for judged benchmarks through the judge stage, :mod:`.judging`) -> metrics (:mod:`.metrics`) -> verdicts and baselines
(:mod:`.evaluation`) -> reports (:mod:`.reporting`). :mod:`.session` runs it without pytest;
:mod:`.pytest_plugin` adapts it to pytest and :mod:`.cli` is the ``biascheck`` command.

Public and internal: the public names are those of ``__all__`` here, in :mod:`biascheck.benchmarks`,
:mod:`biascheck.benchmarks.qa` and :mod:`biascheck.sim` (docs/api.md lists them; a test holds the
two equal). Import them from there: every other module path is internal and may change without
notice, including the modules these names are defined in.
"""

from typing import TYPE_CHECKING

from biascheck.core.lazy import lazy_exports
from biascheck.core.version import VERSION as __version__

if TYPE_CHECKING:
    from biascheck.api import compare, load_baseline, load_comparison, load_run, load_suite, runs_df
    from biascheck.core.errors import BiascheckError
    from biascheck.execution.batches import BatchOptions
    from biascheck.execution.llm import ModelConfig
    from biascheck.execution.stats import RunStatus
    from biascheck.judging.panel import JudgeOptions
    from biascheck.records.comparison import Comparison
    from biascheck.records.run import RunRecord
    from biascheck.reporting.results import build_results
    from biascheck.reporting.write import write_reports
    from biascheck.session import RunConfig, RunResult, SuiteResult, run
    from biascheck.suite import Shard, Suite

__all__ = [
    "BatchOptions",
    "BiascheckError",
    "Comparison",
    "JudgeOptions",
    "ModelConfig",
    "RunConfig",
    "RunRecord",
    "RunResult",
    "RunStatus",
    "Shard",
    "Suite",
    "SuiteResult",
    "__version__",
    "build_results",
    "compare",
    "load_baseline",
    "load_comparison",
    "load_run",
    "load_suite",
    "run",
    "runs_df",
    "write_reports",
]

# Imported on first use: `import biascheck` stays cheap, as the pytest plugin and the CLI need
# (litellm alone takes seconds to import).
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "BatchOptions": "biascheck.execution.batches",
        "BiascheckError": "biascheck.core.errors",
        "Comparison": "biascheck.records.comparison",
        "JudgeOptions": "biascheck.judging.panel",
        "ModelConfig": "biascheck.execution.llm",
        "RunConfig": "biascheck.session",
        "RunRecord": "biascheck.records.run",
        "RunResult": "biascheck.session",
        "RunStatus": "biascheck.execution.stats",
        "Shard": "biascheck.suite",
        "Suite": "biascheck.suite",
        "SuiteResult": "biascheck.session",
        "build_results": "biascheck.reporting.results",
        "compare": "biascheck.api",
        "load_baseline": "biascheck.api",
        "load_comparison": "biascheck.api",
        "load_run": "biascheck.api",
        "load_suite": "biascheck.api",
        "runs_df": "biascheck.api",
        "run": "biascheck.session",
        "write_reports": "biascheck.reporting.write",
    },
    __all__,
)
