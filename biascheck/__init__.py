"""biascheck: continuous bias-regression testing for language models.

The pipeline, one module per stage:
suite manifest (:mod:`.manifest`, :mod:`.sources`, :mod:`.suite`) -> cases (:mod:`.benchmarks`)
-> model requests (:mod:`.runner`, :mod:`.llm`) -> responses (:mod:`.store`) -> outcomes
-> metrics (:mod:`.metrics`) -> verdicts (:mod:`.verdicts`) -> reports (:mod:`.report`).
:mod:`.plugin` adapts it to pytest; :mod:`.session` runs it without pytest.
"""

from biascheck.core.version import VERSION as __version__

# The Python API (docs/api.md), imported on first use: `import biascheck` stays cheap, as
# the pytest plugin and the CLI need (litellm alone takes seconds to import).
_API = {
    "load_suite": "biascheck.suite",
    "run": "biascheck.session",
    "RunConfig": "biascheck.session",
    "RunResult": "biascheck.session",
    "ModelConfig": "biascheck.execution.llm",
}
__all__ = ["ModelConfig", "RunConfig", "RunResult", "__version__", "load_suite", "run"]


def __getattr__(name: str):
    if name not in _API:
        raise AttributeError(f"module 'biascheck' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_API[name]), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_API])
