"""Which judge calibration applies to which judge, and how a suite's run is scored.

A calibration (``biascheck judge fit``) is a judge's confusion matrix, fitted for one judge model:
the run's calibrations (``--biascheck-judge-calibration``, given once or several times, else the
manifest's) are matched to the panel's judges by the model each was fitted for. Each judge's own
metrics are corrected with its own calibration. The aggregate's metrics are corrected where the
correction is known to hold: with one judge, or under ``aggregation = "primary"`` (the aggregate
is the primary judge's readings, so its calibration applies). A majority or unanimity of judges
has no confusion matrix a calibration gives (it depends on how the judges' errors go together),
so its metrics are the raw ones, and the reports say each calibrated judge's corrected figures are
shown beside it instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from biascheck.benchmarks.base import JudgedBenchmark
from biascheck.core.errors import BiascheckError
from biascheck.core.spelling import option
from biascheck.judging.panel import JudgeOptions, Panel
from biascheck.suite import Suite


@dataclass(frozen=True)
class Scoring:
    """How a judged suite's run is scored: the aggregate's convention (``scoring``, the results'
    ``scoring`` and a fingerprint part) and each judge's own (``per_judge``, in panel order: its
    calibration, when it has one). ``corrected``: whether the aggregate's metrics are corrected."""

    scoring: dict[str, str]
    per_judge: tuple[dict[str, str], ...]

    @property
    def corrected(self) -> bool:
        return "calibration" in self.scoring


def scoring_for(suite: Suite, options: JudgeOptions, panel: Panel) -> Scoring:
    """The scoring of ``suite`` judged by ``panel``: the run's unscorable convention (else the
    manifest's) and the calibrations, each checked against the judge it is for."""
    benchmark = suite.benchmark
    if not isinstance(benchmark, JudgedBenchmark):
        raise TypeError(f"{suite.name} is not judged")
    manifest = suite.manifest
    given = [(Path(path), option("judge-calibration")) for path in options.calibrations] or benchmark.calibration_paths(manifest)
    names = [judge.name for judge in panel.judges]
    paths: list[tuple[Path, str] | None] = [None] * len(names)
    if not panel.several:
        if len(given) > 1:
            where = option("judge-calibration") if options.calibrations else str(manifest.path)
            raise BiascheckError(where, None, f"gives {len(given)} calibrations for one judge ({names[0]})", "give the judge's one calibration")
        paths[0] = given[0] if given else None
    else:
        for path, where in given:
            judge = benchmark.calibration_judge(path, where)
            if judge not in names:
                raise BiascheckError(
                    where, None, f"{path} is a calibration for judge model {judge!r}, not one of this run's judges ({', '.join(names)})",
                    "give a calibration of each judge that has one (biascheck judge fit), or add that judge",
                )  # fmt: skip
            index = names.index(judge)
            if paths[index] is not None:
                raise BiascheckError(where, None, f"gives two calibrations for the judge {judge}", "give one calibration per judge")
            paths[index] = (path, where)
    per_judge = tuple(
        benchmark.scoring(
            manifest, options.unscorable, calibration=path[0] if path else None, judge=name, where=path[1] if path else option("judge-calibration")
        )
        for name, path in zip(names, paths)
    )
    if not panel.several:
        return Scoring(per_judge[0], per_judge)
    if panel.primary is not None:
        return Scoring(per_judge[panel.primary], per_judge)
    try:
        aggregate = benchmark.scoring(manifest, options.unscorable, calibration=None, judge=None)
    except BiascheckError as exc:  # a gated corrected metric, which no majority of judges can give
        raise BiascheckError(
            exc.where, exc.field, f"{exc.problem}: a {panel.aggregation} of judges is not corrected (a calibration corrects one judge's readings)",
            'set aggregation = "primary" with a calibrated primary judge, or gate the raw metric',
        ) from None  # fmt: skip
    return Scoring(aggregate, per_judge)
