"""Internal: no public names (the public API is ``biascheck.__all__`` and the packages docs/api.md
lists). Its modules may change without notice.

The judge stage of a run, between the responses of the model under test and the outcomes: for a
suite whose benchmark declares the judged capability (:class:`~biascheck.benchmarks.base.JudgedBenchmark`),
one or several evaluator models read each response, their readings are combined into one outcome
per case, and their agreement is measured. The session calls it; nothing below it knows it.

- :mod:`.panel`: the run's judge options (``RunConfig.judges``) and a suite's panel of judges, with
  how their readings are combined (majority, unanimous, one primary judge).
- :mod:`.calibration`: which judge calibration applies to which judge, and the scoring it gives.
- :mod:`.aggregate`: several judges' outcomes of one case -> one outcome.
- :mod:`.stage`: the stage itself: each judge's requests, calls and outcomes, per suite.
- :mod:`.findings`: what several judges found: each judge's own metrics and unreadable replies,
  Krippendorff's alpha with its interval, each pair's confusion table, the ``min_alpha`` floor.
- :mod:`.qualification`: is a judge fit to read, on a QA suite's disambiguated items.
"""

__all__: list[str] = []
