"""The shared layer of multiple-choice bias QA benchmarks in BBQ's design (KoBBQ, BBQ, CBBQ,
GG-BBQ, EsBBQ, CaBBQ; ``examples/minibbq``): a new one subclasses :class:`QABenchmark` and
implements ``load``, which returns :class:`QAData`. The public names are ``__all__``."""

from typing import TYPE_CHECKING

from biascheck.core.lazy import lazy_exports

if TYPE_CHECKING:
    from biascheck.benchmarks.qa.benchmark import QABenchmark, QAData, QAItem, QAPrompt

__all__ = ["QABenchmark", "QAData", "QAItem", "QAPrompt"]

__getattr__, __dir__ = lazy_exports(__name__, dict.fromkeys(__all__, "biascheck.benchmarks.qa.benchmark"), __all__)
