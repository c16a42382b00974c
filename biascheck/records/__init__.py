"""Internal: no public names of its own (``biascheck.RunRecord``, ``biascheck.Comparison`` and the
loaders are exported by :mod:`biascheck`). Its modules may change without notice.

The typed, immutable record of a run (:class:`~biascheck.records.run.RunRecord`), of a baseline
(:class:`~biascheck.records.baseline.BaselineRecord`) and of a comparison
(:class:`~biascheck.records.comparison.Comparison`). ``results.json``, baseline files and
``comparison.json`` are their serialization: ``from_json`` / ``to_json`` at the file edges only,
and ``from_json(d).to_json() == d`` for every document biascheck writes, so the bytes of a file
read and written again are unchanged.
"""

__all__: list[str] = []
