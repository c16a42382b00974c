"""The shared layer of multiple-choice bias QA benchmarks in BBQ's design (KoBBQ, BBQ, CBBQ,
GG-BBQ, EsBBQ, CaBBQ, MBBQ; ``examples/minibbq``): a new one subclasses :class:`QABenchmark` and
implements ``load``, which returns :class:`QAData`; one in BBQ's file layout subclasses
:class:`BBQBenchmark`, or needs no code at all (a suite's ``[bbq]`` table, :class:`RowFormat`).
The building blocks the in-tree adapters use are public too: reading data files (``read_utf8``,
``jsonl_rows``, ``csv_rows``, ``row_error``, ``category_files``, ``item_of_row``, ``parsed_file``), seeded
subsets (``seeded_rank``, ``seeded_pick``, ``one_per_group``), answer modes (``AnswerMode``,
``continuations``) and a benchmark's own metrics over the shared count cells (``cell_sum``,
``cell_scores``, ``READING_METRICS``, ``divide``). The public names are ``__all__``; every module path is
internal."""

from typing import TYPE_CHECKING

from biascheck.core.lazy import lazy_exports

if TYPE_CHECKING:
    from biascheck.benchmarks.qa.answers import AnswerMode, continuations
    from biascheck.benchmarks.qa.bbq import BBQ_ROWS, BBQBenchmark, RowFormat, csv_rows, item_of_row, jsonl_rows, one_per_group, row_error
    from biascheck.benchmarks.qa.benchmark import QABenchmark, QAData, QAItem, QAPrompt, category_files, read_utf8, seeded_pick, seeded_rank
    from biascheck.benchmarks.qa.metrics import READING_METRICS, cell_scores, cell_sum
    from biascheck.config.sources import parsed_file
    from biascheck.metrics.core import divide

__all__ = [
    "BBQ_ROWS",
    "READING_METRICS",
    "AnswerMode",
    "BBQBenchmark",
    "QABenchmark",
    "QAData",
    "QAItem",
    "QAPrompt",
    "RowFormat",
    "category_files",
    "cell_scores",
    "cell_sum",
    "continuations",
    "csv_rows",
    "divide",
    "item_of_row",
    "jsonl_rows",
    "one_per_group",
    "parsed_file",
    "read_utf8",
    "row_error",
    "seeded_pick",
    "seeded_rank",
]

_HOMES = {
    **dict.fromkeys(
        ("QABenchmark", "QAData", "QAItem", "QAPrompt", "category_files", "read_utf8", "seeded_pick", "seeded_rank"),
        "biascheck.benchmarks.qa.benchmark",
    ),
    **dict.fromkeys(
        ("BBQ_ROWS", "BBQBenchmark", "RowFormat", "csv_rows", "item_of_row", "jsonl_rows", "one_per_group", "row_error"),
        "biascheck.benchmarks.qa.bbq",
    ),
    **dict.fromkeys(("AnswerMode", "continuations"), "biascheck.benchmarks.qa.answers"),
    **dict.fromkeys(("READING_METRICS", "cell_scores", "cell_sum"), "biascheck.benchmarks.qa.metrics"),
    "divide": "biascheck.metrics.core",
    "parsed_file": "biascheck.config.sources",
}
__getattr__, __dir__ = lazy_exports(__name__, _HOMES, __all__)
