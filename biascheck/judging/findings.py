"""What several judges found, beside the aggregate's metrics: each judge's own headline metrics
(corrected with its own calibration, when it has one), how many of its replies read as nothing,
Krippendorff's alpha (nominal) over the judges' readings with a bootstrap interval over stories,
each pair of judges' confusion table, how many cases the aggregation could not settle, and the
suite's ``min_alpha`` floor. results.json's ``judging`` (present only when several judges read).

The units of agreement are the cases the judges were asked about (a case with no story to read has
no reading of any judge). A reply that names no option, a filtered reply and a failed call are no
value of that judge: never a reading, and counted per judge. The bootstrap resamples stories (the
generations the cases read; a story's questions move together) with the suite's bootstrap
resamples and seed, as the metrics' do.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from biascheck.benchmarks.base import JudgedBenchmark
from biascheck.config.manifest import SuiteManifest
from biascheck.core.records import Case
from biascheck.judging.aggregate import DISAGREED
from biascheck.judging.stage import Judged, JudgingPlan
from biascheck.metrics.agreement import alpha_with_interval, pair_table
from biascheck.metrics.core import MetricValue, number

CONFIDENCE = 0.95


@dataclass(frozen=True)
class JudgeFindings:
    """One judge of several: its calls, the cases it was asked about and read, what it could not
    read by status, and its own headline metrics."""

    name: str
    calls: int
    cache_hits: int
    asked: int
    readings: int
    unscorable: dict[str, int]
    metrics: dict[str, MetricValue]
    calibration: str | None = None  # its calibration's id
    qualification: Mapping[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "model": self.name,
            "calls": self.calls,
            "cache_hits": self.cache_hits,
            "asked": self.asked,
            "readings": self.readings,
            "unscorable": dict(self.unscorable),
            "metrics": {name: value.to_json() for name, value in self.metrics.items()},
            "calibration": self.calibration,
        }
        if self.qualification is not None:
            out["qualification"] = dict(self.qualification)
        return out


@dataclass(frozen=True)
class PairFindings:
    """Two judges' readings of the cases both were asked about: their confusion table (classes and
    unscorable), how many they read alike, and of how many both read."""

    judges: tuple[str, str]
    table: dict[str, dict[str, int]]
    agreed: int
    compared: int

    def to_json(self) -> dict[str, Any]:
        return {"judges": list(self.judges), "agreed": self.agreed, "compared": self.compared, "table": self.table}


@dataclass(frozen=True)
class PanelFindings:
    """results.json's ``judging``: see the module docstring. ``agreement_passed`` is None when the
    suite sets no floor, or the run gates nothing (a shard, pending batches)."""

    aggregation: str
    primary: str | None
    min_alpha: float | None
    judges: tuple[JudgeFindings, ...]
    alpha: float
    alpha_ci: tuple[float, float]
    units: int
    stories: int
    classes: tuple[str, ...]
    pairs: tuple[PairFindings, ...]
    disagreed: int
    agreement_passed: bool | None

    def to_json(self) -> dict[str, Any]:
        return {
            "aggregation": self.aggregation,
            **({"primary": self.primary} if self.primary is not None else {}),
            "min_alpha": self.min_alpha,
            "agreement_passed": self.agreement_passed,
            "judges": [judge.to_json() for judge in self.judges],
            "agreement": {
                "alpha": number(self.alpha),
                "ci": [number(self.alpha_ci[0]), number(self.alpha_ci[1])],
                "confidence": CONFIDENCE,
                "units": self.units,
                "stories": self.stories,
                "classes": list(self.classes),
                "pairs": [pair.to_json() for pair in self.pairs],
            },
            "disagreed": self.disagreed,
        }


def panel_findings(
    plan: JudgingPlan,
    cases: Sequence[Case],
    generation_keys: Sequence[Sequence[str]],
    judged: Judged,
    *,
    resamples: int,
    seed: int,
    gate: bool,
) -> PanelFindings | None:
    """The findings of a suite read by several judges (None for one judge: it has no agreement)."""
    panel, benchmark = plan.panel, plan.suite.benchmark
    if not panel.several:
        return None
    if not isinstance(benchmark, JudgedBenchmark):
        raise TypeError(f"{plan.suite.name} is not judged")
    asked = [i for i, was in enumerate(judged.asked) if was]
    readings = [[_reading(own[cases[i].case_id]) for own in judged.by_judge] for i in asked]
    stories = ["\x1f".join(generation_keys[i]) for i in asked]
    classes = tuple(benchmark.reading_classes)
    alpha, ci, units = alpha_with_interval(readings, stories, classes, n_boot=resamples, seed=seed, confidence=CONFIDENCE)
    judges = tuple(_judge_findings(plan, index, cases, asked, judged, resamples, seed) for index in range(len(panel.judges)))
    pairs = []
    for a, b in combinations(range(len(panel.judges)), 2):
        first, second = [unit[a] for unit in readings], [unit[b] for unit in readings]
        both = [(x, y) for x, y in zip(first, second) if x is not None and y is not None]
        pairs.append(PairFindings((judges[a].name, judges[b].name), pair_table(first, second, classes), sum(x == y for x, y in both), len(both)))
    floor = panel.min_alpha
    passed = None if floor is None or not gate else (not math.isnan(alpha) and alpha >= floor)
    primary = panel.primary_judge
    return PanelFindings(
        aggregation=panel.aggregation,
        primary=primary.name if primary is not None else None,
        min_alpha=floor,
        judges=judges,
        alpha=alpha,
        alpha_ci=ci,
        units=units,
        stories=len(set(stories)),
        classes=classes,
        pairs=tuple(pairs),
        disagreed=sum(outcome.status == DISAGREED for outcome in judged.outcomes.values()),
        agreement_passed=passed,
    )


def _reading(outcome) -> str | None:
    return outcome.answer_class if outcome.status == "answered" else None


def _judge_findings(
    plan: JudgingPlan, index: int, cases: Sequence[Case], asked: Sequence[int], judged: Judged, resamples: int, seed: int
) -> JudgeFindings:
    run, benchmark = plan.runs[index], plan.suite.benchmark
    judged_benchmark = benchmark
    assert isinstance(judged_benchmark, JudgedBenchmark)
    own = judged.by_judge[index]
    statuses = Counter(own[cases[i].case_id].status for i in asked)
    manifest: SuiteManifest = judged_benchmark.with_scoring(plan.suite.manifest, run.scoring)
    overall = benchmark.aggregate(cases, own, resamples=resamples, seed=seed, manifest=manifest).overall
    calibration = run.scoring.get("calibration")
    return JudgeFindings(
        name=run.judge.name,
        calls=run.stats.calls,
        cache_hits=run.stats.cache_hits,
        asked=len(asked),
        readings=statuses.get("answered", 0),
        unscorable={status: count for status, count in sorted(statuses.items()) if status != "answered"},
        metrics={name: overall[name] for name in judged_benchmark.judge_metrics if name in overall},
        calibration=calibration.partition(":")[0] if calibration else None,
        qualification=run.qualification.to_dict() if run.qualification is not None else None,
    )
