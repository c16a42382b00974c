"""Calibration by simulation: how often does the regression gate cry wolf, and how often does it
catch a known regression?

A persona's answers are drawn here exactly as the simulated server draws them
(:func:`~biascheck.sim.personas.choose_answer` on the prompt's message key), without the HTTP
round trip, so a repetition costs milliseconds instead of a full run. Each repetition compares
a baseline persona with a candidate persona under another seed; the gate's verdicts over many
repetitions give its false-alarm rate (same persona) and its power (a persona known to be worse).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from biascheck.core.records import Outcome
from biascheck.sim.knowledge import message_key
from biascheck.sim.personas import choose_answer, parse_persona
from biascheck.suite import Suite


@dataclass(frozen=True)
class PreparedSuite:
    """A suite's cases with their message keys (hashing the prompts once, not per repetition)."""

    suite: Suite
    keys: list[str]

    @classmethod
    def of(cls, suite: Suite) -> PreparedSuite:
        return cls(suite, [message_key(case.messages_as_dicts()) for case in suite.cases])


def simulated_results(prepared: PreparedSuite, persona: str, *, resamples: int | None = None) -> dict[str, Any]:
    """The ``results.json`` document of a run of ``persona`` on the suite, made without the server:
    the same answers (faults left out), outcomes, metrics and verdicts as a real run.
    ``resamples=0`` skips the metrics' bootstrap intervals (a comparison does not read them)."""
    from biascheck.evaluation.verdicts import check_thresholds
    from biascheck.execution.llm import ModelConfig
    from biascheck.reporting.results import build_results
    from biascheck.session import RunConfig, RunResult, SuiteResult

    spec = parse_persona(persona.removeprefix("sim/"))
    suite, manifest = prepared.suite, prepared.suite.manifest
    outcomes = {}
    for case, key in zip(suite.cases, prepared.keys):
        index = choose_answer(spec, case, key)
        outcomes[case.case_id] = (
            Outcome(case.case_id, "ooc", raw="")
            if index is None
            else Outcome(case.case_id, "answered", answer=index, answer_class=case.truth.answer_class(index), raw=case.letters[index])
        )
    metrics = suite.benchmark.aggregate(
        suite.cases,
        outcomes,
        resamples=manifest.bootstrap_resamples if resamples is None else resamples,
        seed=manifest.bootstrap_seed,
        manifest=manifest,
    )
    model = ModelConfig(model=f"sim/{spec.spec}")
    result = SuiteResult(suite, list(suite.cases), outcomes, dict(manifest.sampling), metrics, check_thresholds(manifest, metrics, suite.categories))
    return build_results(RunResult(RunConfig(model=model, store_path=Path("(simulated)")), [result]))[0]


def regressed_checks(prepared: PreparedSuite, baseline: str, candidate: str, settings) -> list[str]:
    """``metric (scope)`` of every check the gate calls regressed, comparing two personas."""
    from biascheck.evaluation.baseline import from_results
    from biascheck.evaluation.regression import compare

    base = from_results(simulated_results(prepared, baseline, resamples=0))
    comparison = compare(base, simulated_results(prepared, candidate, resamples=0), settings, baseline_path="(simulated)")
    return [f"{r['metric']} ({r['scope']})" for r in comparison["results"] if r["verdict"] == "regressed"]


def rates(prepared: PreparedSuite, pairs: Sequence[tuple[str, str]], settings, *, watch: str | None = None) -> dict[str, Any]:
    """Over the (baseline, candidate) persona pairs: the share of repetitions with any regressed
    check, and (``watch`` = ``"metric (scope)"``) the share where that check regressed."""
    any_regressed = watched = 0
    for baseline, candidate in pairs:
        flagged = regressed_checks(prepared, baseline, candidate, settings)
        any_regressed += bool(flagged)
        watched += watch in flagged
    n = len(pairs)
    return {"repetitions": n, "any_regressed": any_regressed / n, "watched_regressed": watched / n if watch else None}
