"""Calibration by simulation: how often does the regression gate cry wolf, and how often does it
catch a known regression?

A persona's answers are drawn here exactly as the simulated server draws them
(:func:`~biascheck.sim.personas.choose_answer` on the prompt's message key), without the HTTP
round trip, so a repetition costs milliseconds instead of a full run. Each repetition compares
a baseline persona with a candidate persona under another seed; the gate's verdicts over many
repetitions give its false-alarm rate (same persona) and its power (a persona known to be worse).

Two paths give the same answers. :func:`simulated_results` builds the whole ``results.json`` of a
run (metrics and verdicts included), one case at a time. :func:`comparison_document` is the fast
path for many repetitions of a QA suite: the answers of all cases drawn at once
(:func:`answer_states`, the server's sha256 draws computed in one pass), and a document holding
what :func:`~biascheck.evaluation.regression.compare` reads, the same case records as the whole
one; its metrics and verdicts are left empty, as a comparison recomputes every metric from the
cases (a test checks that both paths give the same comparison).

Faults: a persona whose ``faults`` are ``filter`` alone is modelled exactly (its first attempt's
draw decides, and a filtered reply is final: the outcome ``filtered``, counted in ``ooc_ratio``),
so ``fail_rate=F&faults=filter`` is a persona that gets a share F of its replies filtered. Other
fault kinds end as the client's retries decide, which is not simulated here: they raise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from biascheck.core.records import Case, Outcome, QATruth
from biascheck.sim.draws import encoded_keys, uniforms
from biascheck.sim.faults import choose_fault
from biascheck.sim.knowledge import message_key
from biascheck.sim.personas import FAIR_PERSONAS, Persona, choose_answer, expected_answer_distribution, parse_persona
from biascheck.suite import Suite

# The outcome of a case as :func:`answer_states` codes it: a choice index (>= 0), or one of these.
OOC = -1
FILTERED = -2
OVERALL = "overall"
_KEPT_DRAWS = 8


def _persona(persona: str | Persona) -> Persona:
    spec = parse_persona(persona.removeprefix("sim/")) if isinstance(persona, str) else persona
    if spec.fail_rate > 0 and spec.faults != ("filter",):
        raise ValueError(
            f"persona {spec.spec!r}: only fail_rate with faults=filter is simulated without the server "
            "(other faults end as the client's retries decide)"
        )
    return spec


def _filtered(persona: Persona, key: str) -> bool:
    return choose_fault(persona, key, 1) == "filter"


@dataclass(frozen=True)
class PreparedSuite:
    """A suite's cases with their message keys (hashing the prompts once, not per repetition)."""

    suite: Suite
    keys: list[str]

    @classmethod
    def of(cls, suite: Suite) -> PreparedSuite:
        return cls(suite, [message_key(case.messages_as_dicts()) for case in suite.cases])

    # --- the fast path (QA suites), computed once per suite ------------------------------------

    @cached_property
    def _encoded_keys(self) -> list[bytes]:
        return encoded_keys(self.keys)

    @cached_property
    def _draws(self) -> dict[tuple[object, ...], np.ndarray]:
        return {}

    def draws(self, *prefix: object, suffix: tuple[object, ...] = ()) -> np.ndarray:
        """``uniform(*prefix, key, *suffix)`` for every case's key, kept for the next few calls
        (the experiments of one repetition draw the same personas' seeds)."""
        cache = self._draws
        name = (*prefix, "|", *suffix)
        if name not in cache:
            while len(cache) >= _KEPT_DRAWS:
                del cache[next(iter(cache))]
            cache[name] = uniforms(prefix, self._encoded_keys, suffix)
        return cache[name]

    @cached_property
    def truths(self) -> dict[str, np.ndarray]:
        """Per case, as arrays: the biased, counter-biased and fair (unknown in an ambiguous
        context, correct in a disambiguated one) choice indexes, and the number of choices."""
        truths = [case.truth for case in self.suite.cases]
        if not all(isinstance(t, QATruth) for t in truths):
            raise ValueError(f"suite {self.suite.name}: the fast simulation draws multiple-choice QA answers only")
        qa: list[QATruth] = truths  # type: ignore[assignment]
        return {
            "biased": np.array([t.biased for t in qa], dtype=np.int64),
            "counter": np.array([t.counter for t in qa], dtype=np.int64),
            "fair": np.array([t.unknown if t.context == "amb" else t.correct for t in qa], dtype=np.int64),
            "choices": np.array([len(case.choices) for case in self.suite.cases], dtype=np.int64),
        }

    @cached_property
    def template(self) -> dict[str, Any]:
        """A whole results document (``fair``'s), whose suite, run and settings every persona's share."""
        return simulated_results(self, "fair", resamples=0)

    @cached_property
    def _records(self) -> list[dict[int, dict[str, Any]]]:
        return [{} for _ in self.suite.cases]

    def record(self, index: int, state: int) -> dict[str, Any]:
        """Case ``index``'s record in results.json when its outcome is ``state`` (cached: records are shared, never changed)."""
        records = self._records[index]
        if state not in records:
            case = self.suite.cases[index]
            records[state] = {**self.suite.benchmark.case_record(case, _outcome(case, state))}
        return records[state]


def _outcome(case: Case, state: int) -> Outcome:
    """The outcome the runner reads from the simulated server's reply in ``state``."""
    if state == FILTERED:  # an empty reply with finish_reason content_filter
        return Outcome(case.case_id, "filtered", raw=None)
    if state == OOC:  # the refusal text, which names no option
        return Outcome(case.case_id, "ooc", raw="")
    return Outcome(case.case_id, "answered", answer=state, answer_class=case.truth.answer_class(state), raw=case.letters[state])  # type: ignore[attr-defined]


def answer_states(prepared: PreparedSuite, persona: str | Persona) -> np.ndarray:
    """Every case's outcome under ``persona``, drawn at once (int64: a choice index, :data:`OOC` or
    :data:`FILTERED`): the same draws as :func:`~biascheck.sim.personas.choose_answer` and the
    fault of the first attempt, as the simulated server makes them."""
    spec = _persona(persona)
    t = prepared.truths
    if spec.name == "refuser":
        states = np.full(len(t["fair"]), OOC, dtype=np.int64)
    elif spec.name in FAIR_PERSONAS:
        states = t["fair"].copy()
    else:
        draw = prepared.draws("answer", spec.name, spec.seed)
        if spec.name == "random":  # draws.pick: min(int(u * n), n - 1)
            states = np.minimum((draw * t["choices"]).astype(np.int64), t["choices"] - 1)
        elif spec.name in ("stereotyped", "counter"):
            states = np.where(draw < spec.p, t["biased" if spec.name == "stereotyped" else "counter"], t["fair"])
        else:
            raise ValueError(f"persona {spec.name!r} has no QA answers")
    if spec.fail_rate > 0:  # choose_fault: no fault iff uniform("fault", seed, key, 1) >= fail_rate
        fault = prepared.draws("fault", spec.seed, suffix=(1,))
        states[fault < spec.fail_rate] = FILTERED
    return states


def comparison_document(prepared: PreparedSuite, persona: str | Persona) -> dict[str, Any]:
    """The results document of ``persona``'s run as a comparison reads it (see the module doc):
    the fast path for many repetitions, from :func:`answer_states`."""
    spec = _persona(persona)
    states = answer_states(prepared, spec).tolist()
    template = prepared.template
    record = prepared.record
    return {
        **template,
        "model": {**template["model"], "model": f"sim/{spec.spec}"},
        "metrics": {"bootstrap": template["metrics"]["bootstrap"], "overall": {}, "by_category": {}},
        "verdicts": [],
        "cases": [record(i, state) for i, state in enumerate(states)],
    }


def simulated_results(prepared: PreparedSuite, persona: str, *, resamples: int | None = None) -> dict[str, Any]:
    """The ``results.json`` document of a run of ``persona`` on the suite, made without the server:
    the same answers (faults: see the module doc), outcomes, metrics and verdicts as a real run.
    ``resamples=0`` skips the metrics' bootstrap intervals (a comparison does not read them)."""
    from biascheck.evaluation.verdicts import check_thresholds
    from biascheck.execution.llm import ModelConfig
    from biascheck.reporting.results import build_results
    from biascheck.session import RunConfig, RunResult, SuiteResult

    spec = _persona(persona)
    suite, manifest = prepared.suite, prepared.suite.manifest
    outcomes = {}
    for case, key in zip(suite.cases, prepared.keys):
        index = choose_answer(spec, case, key)
        if spec.fail_rate > 0 and _filtered(spec, key):
            outcomes[case.case_id] = _outcome(case, FILTERED)
        else:
            outcomes[case.case_id] = _outcome(case, OOC if index is None else index)
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


def compare_personas(prepared: PreparedSuite, baseline: str, candidate: str, settings, *, fast: bool = True) -> dict[str, Any]:
    """The comparison document of ``candidate`` against a baseline recorded from ``baseline``
    (``fast``: the documents of :func:`comparison_document`, else of :func:`simulated_results`)."""
    from biascheck.evaluation.baseline import from_results
    from biascheck.evaluation.regression import compare

    if fast:
        base, cand = comparison_document(prepared, baseline), comparison_document(prepared, candidate)
    else:
        base, cand = simulated_results(prepared, baseline, resamples=0), simulated_results(prepared, candidate, resamples=0)
    return compare(from_results(base), cand, settings, baseline_path="(simulated)")


def regressed_checks(prepared: PreparedSuite, baseline: str, candidate: str, settings) -> list[str]:
    """``metric (scope)`` of every check the gate calls regressed, comparing two personas."""
    comparison = compare_personas(prepared, baseline, candidate, settings)
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


# --- what a persona's metrics are, analytically ------------------------------------------------


def expected_counts(prepared: PreparedSuite, persona: str | Persona) -> dict[str, np.ndarray]:
    """The expected count vector of each scope (``overall`` and every category) of a QA suite
    under ``persona``: each case contributes its answer distribution
    (:func:`~biascheck.sim.personas.expected_answer_distribution`, the rest out-of-choice), all
    of it times ``1 - fail_rate``, and ``fail_rate`` to the filtered cell. A metric's value on
    these is the persona's true value, the one its runs scatter around."""
    from biascheck.benchmarks.qa.metrics import K, cell

    spec = _persona(persona)
    out: dict[str, np.ndarray] = {}
    for case in prepared.suite.cases:
        counts = out.setdefault(case.category, np.zeros(K))
        distribution = expected_answer_distribution(spec, case)
        kept = 1.0 - spec.fail_rate
        for index, probability in distribution.items():
            counts[cell(case.truth, _outcome(case, index))] += kept * probability  # type: ignore[arg-type]
        counts[cell(case.truth, _outcome(case, OOC))] += kept * (1.0 - sum(distribution.values()))  # type: ignore[arg-type]
        counts[cell(case.truth, _outcome(case, FILTERED))] += spec.fail_rate  # type: ignore[arg-type]
    return {OVERALL: sum(out.values(), np.zeros(K)), **dict(sorted(out.items()))}


def true_values(prepared: PreparedSuite, counts: Mapping[str, np.ndarray], metrics: Sequence[str]) -> dict[tuple[str, str], float]:
    """``(metric, scope) -> value`` of the suite's metric definitions on expected counts."""
    defs = prepared.suite.benchmark.metric_defs
    return {(m, scope): float(defs[m].fn(c)) for m in metrics for scope, c in counts.items()}
