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

HBB suites (sampled answers, the ``sampling`` estimator) are drawn the same way: each of the k
samples of a filled question answers a with the persona's P_a at the suite's temperature, and the
k replies are read by the benchmark's own ``classify``.

Faults: a persona whose ``faults`` are ``filter`` alone is modelled exactly (its first attempt's
draw decides, and a filtered reply is final: the outcome ``filtered``, counted in ``ooc_ratio``),
so ``fail_rate=F&faults=filter`` is a persona that gets a share F of its replies filtered. Other
fault kinds end as the client's retries decide, which is not simulated here: they raise.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from biascheck.core.records import Case, HBBTruth, Outcome, QATruth, Response
from biascheck.records._json import Fields, freeze
from biascheck.records.run import CaseRecord, Metrics, RunRecord
from biascheck.sim.draws import encoded_keys, uniforms
from biascheck.sim.faults import choose_fault
from biascheck.sim.knowledge import message_key
from biascheck.sim.personas import FAIR_PERSONAS, Persona, choose_answer, expected_answer_distribution, expected_p_a, parse_persona, render_reply
from biascheck.suite import Suite

if TYPE_CHECKING:
    from biascheck.records.comparison import Comparison

# The outcome of a case as :func:`answer_states` codes it: a choice index (>= 0), or one of these.
OOC = -1
FILTERED = -2
OVERALL = "overall"
_KEPT_DRAWS = 48  # HBB: a persona's k samples' answer and fault draws, for both sides


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

    # --- the fast path (QA and HBB suites), computed once per suite ----------------------------

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
    def kind(self) -> str:
        """``qa`` (multiple-choice QA cases) or ``hbb`` (HBB filled questions, sampled)."""
        truths = [case.truth for case in self.suite.cases]
        if all(isinstance(t, QATruth) for t in truths):
            return "qa"
        if all(isinstance(t, HBBTruth) for t in truths):
            if self.estimator.kind != "sampling":
                raise ValueError(f"suite {self.suite.name}: only HBB's sampling estimator is simulated here")
            return "hbb"
        raise ValueError(f"suite {self.suite.name}: the simulation draws multiple-choice QA and HBB answers only")

    @cached_property
    def estimator(self) -> Any:
        """The suite's answer mode (QA: None, generation) or HBB estimator, as a run without an override has it."""
        return self.suite.benchmark.estimator(self.suite.manifest, None)

    @cached_property
    def temperature(self) -> float:
        """The temperature the suite's requests ask for (the simulator's default, 1, when unset)."""
        value = self.suite.manifest.sampling.get("temperature")
        return 1.0 if value is None else float(value)

    def p_a(self, persona: Persona) -> np.ndarray:
        """HBB: each filled question's P_a under ``persona`` at the suite's temperature."""
        return np.array([expected_p_a(persona, case, self.temperature) for case in self.suite.cases], dtype=np.float64)

    def sample_draws(self, *prefix: object, sample: int, suffix: tuple[object, ...] = ()) -> np.ndarray:
        """``uniform(*prefix, draw_key, *suffix)`` with the server's key of sample ``sample``
        (the message key, ``#sample=s`` appended for s > 0)."""
        if sample == 0:
            return self.draws(*prefix, suffix=suffix)
        name = (*prefix, "|", *suffix, "#", sample)
        cache = self._draws
        if name not in cache:
            while len(cache) >= _KEPT_DRAWS:
                del cache[next(iter(cache))]
            tail = f"#sample={sample}".encode()
            cache[name] = uniforms(prefix, [key[:-1] + tail + b'"' for key in self._encoded_keys], suffix)
        return cache[name]

    @cached_property
    def truths(self) -> dict[str, np.ndarray]:
        """Per case, as arrays: the biased, counter-biased and fair (unknown in an ambiguous
        context, correct in a disambiguated one) choice indexes, and the number of choices."""
        if self.kind != "qa":
            raise ValueError(f"suite {self.suite.name}: not a multiple-choice QA suite")
        qa = [case.truth_as(QATruth) for case in self.suite.cases]
        return {
            "biased": np.array([t.biased for t in qa], dtype=np.int64),
            "counter": np.array([t.counter for t in qa], dtype=np.int64),
            "fair": np.array([t.unknown if t.context == "amb" else t.correct for t in qa], dtype=np.int64),
            "choices": np.array([len(case.choices) for case in self.suite.cases], dtype=np.int64),
        }

    @cached_property
    def template(self) -> RunRecord:
        """A whole run's record (``fair``'s), whose suite, run and settings every persona's share."""
        return simulated_results(self, "fair", resamples=0)

    @cached_property
    def _records(self) -> list[dict[int, CaseRecord]]:
        return [{} for _ in self.suite.cases]

    def record(self, index: int, state: int) -> CaseRecord:
        """Case ``index``'s record when its outcome is ``state`` (cached: records are immutable)."""
        records = self._records[index]
        if state not in records:
            case = self.suite.cases[index]
            outcome = _outcome(case, state) if self.kind == "qa" else self.hbb_outcome(case, state)
            records[state] = CaseRecord.from_json(Fields(self.suite.benchmark.case_record(case, outcome), "a simulated case"))
        return records[state]

    @cached_property
    def _replies(self) -> dict[str, dict[int, Response]]:
        return {}

    def hbb_outcome(self, case: Case, state: int) -> Outcome:
        """The outcome the benchmark reads from k replies in ``state`` (:func:`hbb_state`)."""
        first, a, b = state // 10_000, state // 100 % 100, state % 100
        k = self.estimator.samples
        replies = self._replies.get(case.case_id)
        if replies is None:
            replies = {A: _reply(case, 0), B: _reply(case, 1), FILTERED_SAMPLE: Response(None, "content_filter"), REFUSED_SAMPLE: _reply(case, None)}
            self._replies[case.case_id] = replies
        rest = FILTERED_SAMPLE if first != REFUSED_SAMPLE else REFUSED_SAMPLE
        others = [A] * (a - (first == A)) + [B] * (b - (first == B))
        others += [rest] * (k - 1 - len(others))
        return self.suite.benchmark.classify(case, [replies[first]] + [replies[o] for o in others], self.estimator)


# HBB: what one sample gave (the first sample's kind is part of a case's state: it is the raw reply).
A, B, FILTERED_SAMPLE, REFUSED_SAMPLE = 0, 1, 2, 3


def hbb_state(first: int, a: int, b: int) -> int:
    """An HBB case's state: the first sample's kind, and how many of its k samples answered a and b."""
    return first * 10_000 + a * 100 + b


def _reply(case: Case, index: int | None) -> Response:
    """The simulated server's reply naming option ``index`` (None: its refusal), in the default style."""
    return Response(render_reply(parse_persona("fair"), case, index, ""), "stop")


def _outcome(case: Case, state: int) -> Outcome:
    """The outcome the runner reads from the simulated server's reply in ``state``."""
    if state == FILTERED:  # an empty reply with finish_reason content_filter
        return Outcome(case.case_id, "filtered", raw=None)
    if state == OOC:  # the refusal text, which names no option
        return Outcome(case.case_id, "ooc", raw="")
    return Outcome(case.case_id, "answered", answer=state, answer_class=case.truth_as(QATruth).answer_class(state), raw=case.letters[state])


def answer_states(prepared: PreparedSuite, persona: str | Persona) -> np.ndarray:
    """Every case's outcome under ``persona``, drawn at once (int64: a choice index, :data:`OOC` or
    :data:`FILTERED`): the same draws as :func:`~biascheck.sim.personas.choose_answer` and the
    fault of the first attempt, as the simulated server makes them."""
    spec = _persona(persona)
    if prepared.kind == "hbb":
        return _hbb_states(prepared, spec)
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


def _hbb_states(prepared: PreparedSuite, spec: Persona) -> np.ndarray:
    """Every HBB case's :func:`hbb_state`: sample s answers a iff ``uniform("hbb-answer", name,
    seed, key, s) < P_a`` (:func:`~biascheck.sim.personas.choose_answer`), unless its first attempt
    was filtered."""
    n, k = len(prepared.keys), prepared.estimator.samples
    if spec.name == "refuser":
        return np.full(n, hbb_state(REFUSED_SAMPLE, 0, 0), dtype=np.int64)
    p_a = prepared.p_a(spec)
    a = np.zeros(n, dtype=np.int64)
    b = np.zeros(n, dtype=np.int64)
    first = np.zeros(n, dtype=np.int64)
    for sample in range(k):
        kind = np.where(prepared.draws("hbb-answer", spec.name, spec.seed, suffix=(sample,)) < p_a, A, B)
        if spec.fail_rate > 0:
            kind[prepared.sample_draws("fault", spec.seed, sample=sample, suffix=(1,)) < spec.fail_rate] = FILTERED_SAMPLE
        a += kind == A
        b += kind == B
        if sample == 0:
            first = kind
    return first * 10_000 + a * 100 + b


def comparison_document(prepared: PreparedSuite, persona: str | Persona) -> RunRecord:
    """The record of ``persona``'s run as a comparison reads it (see the module doc): the fast
    path for many repetitions, from :func:`answer_states`; no metric values, no verdicts."""
    spec = _persona(persona)
    states = answer_states(prepared, spec).tolist()
    template = prepared.template
    record = prepared.record
    # How units were scored (HBB's flag threshold): a comparison reads it.
    rest = {key: template.metrics.rest[key] for key in ("bootstrap", "flag_threshold") if key in template.metrics.rest}
    return replace(
        template,
        model=replace(template.model, model=f"sim/{spec.spec}"),
        metrics=Metrics((), template.metrics.groups, freeze(rest)),
        verdicts=(),
        cases=tuple(record(i, state) for i, state in enumerate(states)),
    )


def simulated_results(prepared: PreparedSuite, persona: str, *, resamples: int | None = None) -> RunRecord:
    """The record (``results.json``) of a run of ``persona`` on the suite, made without the server:
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
        if prepared.kind == "hbb":  # k samples, in order, each with its own draws and fault
            replies = []
            for sample in range(prepared.estimator.samples):
                draw_key = key if sample == 0 else f"{key}#sample={sample}"
                index = choose_answer(spec, case, key, sample, prepared.temperature)
                filtered = spec.fail_rate > 0 and _filtered(spec, draw_key)
                replies.append(Response(None, "content_filter") if filtered else Response(render_reply(spec, case, index, draw_key), "stop"))
            outcomes[case.case_id] = suite.benchmark.classify(case, replies, prepared.estimator)
            continue
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
    estimator = prepared.estimator
    kind = getattr(estimator, "kind", None)
    verdicts = check_thresholds(manifest, metrics, suite.categories, kind)
    result = SuiteResult(
        suite, list(suite.cases), outcomes, dict(manifest.sampling), metrics, verdicts, str(estimator) if estimator is not None else None
    )
    return build_results(RunResult(RunConfig(model=model, store_path=Path("(simulated)")), [result]))[0][0]


def compare_personas(prepared: PreparedSuite, baseline: str, candidate: str, settings, *, fast: bool = True) -> Comparison:
    """The comparison of ``candidate`` against a baseline recorded from ``baseline``
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
    return [f"{c.metric} ({c.scope})" for c in comparison.regressions]


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
        truth = case.truth_as(QATruth)
        for index, probability in distribution.items():
            counts[cell(truth, _outcome(case, index))] += kept * probability
        counts[cell(truth, _outcome(case, OOC))] += kept * (1.0 - sum(distribution.values()))
        counts[cell(truth, _outcome(case, FILTERED))] += spec.fail_rate
    return {OVERALL: sum(out.values(), np.zeros(K)), **dict(sorted(out.items()))}


def true_values(prepared: PreparedSuite, counts: Mapping[str, np.ndarray], metrics: Sequence[str]) -> dict[tuple[str, str], float]:
    """``(metric, scope) -> value`` of the suite's metric definitions on expected counts."""
    defs = prepared.suite.benchmark.metric_defs
    return {(m, scope): float(defs[m].fn(c)) for m in metrics for scope, c in counts.items()}


# --- the calibration experiments: false alarms, and power at twice each margin -------------------

TARGET_POWER = 0.80
Z95 = 1.959964
FALSE_ALARMS = "false alarms"


def wilson(share: float, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a share of ``n`` repetitions."""
    centre = (share + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(share * (1 - share) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def stereotyped(p: float, f: float, seed: int | None = None) -> str:
    """``stereotyped?p=P`` with a share ``f`` of its replies filtered, under ``seed``."""
    filtered = f"&fail_rate={f:.6g}&faults=filter" if f > 0 else ""
    return f"stereotyped?p={p:.6g}{filtered}" + (f"&seed={seed}" if seed is not None else "")


@dataclass
class Experiment:
    """A candidate ``stereotyped(p, f)`` compared with the base persona; ``metrics``: the metrics
    whose power it measures (none: the false-alarm experiment, the base persona itself)."""

    name: str
    p: float
    f: float
    metrics: list[str] = field(default_factory=list)


class Expectations:
    """A suite's expected count vectors per scope under ``stereotyped(p, f)``, and so the true
    value of each metric there (:meth:`values`) and its true worsening between two such personas."""

    def __init__(self, prepared: PreparedSuite):
        self.prepared = prepared

    @staticmethod
    def of(prepared: PreparedSuite) -> Expectations:
        return QAExpectations(prepared) if prepared.kind == "qa" else HBBExpectations(prepared)

    def counts(self, p: float, f: float) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def check(self, p: float, f: float) -> None:
        """Raise AssertionError when a shortcut of :meth:`counts` disagrees with the direct computation."""

    def worsening(self, metric: str, base: tuple[float, float], cand: tuple[float, float]) -> dict[str, float]:
        """The true worsening of ``metric`` per scope from ``stereotyped(*base)`` to ``stereotyped(*cand)``
        (``badness`` of the candidate's less the baseline's; scopes where it is undefined left out)."""
        from biascheck.metrics.paired import badness

        better = self.prepared.suite.benchmark.metric_defs[metric].better
        vb = true_values(self.prepared, self.counts(*base), [metric])
        vc = true_values(self.prepared, self.counts(*cand), [metric])
        out = {}
        for (_, scope), b in vb.items():
            w = float(badness(vc[(metric, scope)], better)) - float(badness(b, better))
            if not math.isnan(w):
                out[scope] = w
        return out


class QAExpectations(Expectations):
    """QA: linear in p (the persona answers the biased option with probability p, the fair one
    otherwise) and in f (filtered replies), so three exact computations give every (p, f)."""

    def __init__(self, prepared: PreparedSuite):
        super().__init__(prepared)
        self.at_0 = expected_counts(prepared, "stereotyped?p=0")
        self.at_1 = expected_counts(prepared, "stereotyped?p=1")
        self.filtered = expected_counts(prepared, "stereotyped?p=0&fail_rate=1&faults=filter")

    def counts(self, p: float, f: float) -> dict[str, np.ndarray]:
        return {s: (1 - f) * ((1 - p) * self.at_0[s] + p * self.at_1[s]) + f * self.filtered[s] for s in self.at_0}

    def check(self, p: float, f: float) -> None:
        direct = expected_counts(self.prepared, stereotyped(p, f))
        for scope, counts in self.counts(p, f).items():
            if not np.allclose(counts, direct[scope], rtol=1e-9, atol=1e-6):
                raise AssertionError(f"stereotyped(p={p}, f={f}) ({scope}): expected counts are not linear in p and f")


class HBBExpectations(Expectations):
    """HBB, sampled: each of a filled question's k samples is filtered with probability f, else
    answers a with its P_a (:func:`~biascheck.sim.personas.expected_p_a` at the suite's
    temperature). So the valid count v is Binomial(k, 1 - f), the a count given v Binomial(v, P_a),
    and the estimate a / v takes one of a few values (undefined when v = 0). An instance's
    expected count vector sums, over the pairs of values of its two questions, their probability
    times the instance's score, flag and scoredness, exactly as the metrics define them."""

    def __init__(self, prepared: PreparedSuite):
        from biascheck.benchmarks.hbb.benchmark import hbb_settings
        from biascheck.benchmarks.hbb.metrics import instance_scores

        super().__init__(prepared)
        self.k = k = prepared.estimator.samples
        threshold = float(hbb_settings(prepared.suite.manifest)["flag_threshold"])
        # Every (v, a) outcome, and the value a / v it estimates (grid index; len(grid): undefined).
        self.grid = sorted({a / v for v in range(1, k + 1) for a in range(v + 1)})
        self.outcomes = [(v, a) for v in range(k + 1) for a in range(v + 1)]
        self.cell = np.array([self.grid.index(a / v) if v else len(self.grid) for v, a in self.outcomes])
        x = np.array(self.grid)
        self.score = instance_scores(np.repeat(x, len(x)), np.tile(x, len(x))).reshape(len(x), len(x))
        self.flagged = (self.score >= threshold).astype(np.float64)
        index = {case.case_id: i for i, case in enumerate(prepared.suite.cases)}
        pairs = prepared.suite.benchmark.instances(prepared.suite.cases)
        self.first = np.array([index[f.case_id] for _, f, _ in pairs])
        self.second = np.array([index[s.case_id] for _, _, s in pairs])
        self.scopes = np.array([f.category for _, f, _ in pairs])

    def distribution(self, p_a: np.ndarray, f: float) -> np.ndarray:
        """(cases, len(grid) + 1): the probability of each estimate, the last column undefined."""
        from math import comb

        k = self.k
        out = np.zeros((len(p_a), len(self.grid) + 1))
        for (v, a), cell in zip(self.outcomes, self.cell):
            out[:, cell] += comb(k, v) * (1 - f) ** v * f ** (k - v) * comb(v, a) * p_a**a * (1 - p_a) ** (v - a)
        return out

    def counts(self, p: float, f: float) -> dict[str, np.ndarray]:
        from biascheck.benchmarks.hbb.metrics import FIELD_INDEX, K

        d = self.distribution(self.prepared.p_a(parse_persona(stereotyped(p, 0.0))), f)
        d1, d2 = d[self.first], d[self.second]
        v1, v2 = d1[:, :-1], d2[:, :-1]
        scored = v1.sum(axis=1) * v2.sum(axis=1)
        vectors = np.zeros((len(self.first), K))
        vectors[:, FIELD_INDEX["n_instances"]] = 1.0
        vectors[:, FIELD_INDEX["n_scored"]] = scored
        vectors[:, FIELD_INDEX["n_unscorable"]] = 1.0 - scored
        vectors[:, FIELD_INDEX["n_flagged"]] = np.einsum("ig,gh,ih->i", v1, self.flagged, v2)
        vectors[:, FIELD_INDEX["sum_score"]] = np.einsum("ig,gh,ih->i", v1, self.score, v2)
        vectors[:, FIELD_INDEX["sum_flagged_score"]] = np.einsum("ig,gh,ih->i", v1, self.score * self.flagged, v2)
        vectors[:, FIELD_INDEX["n_samples"]] = 2 * self.k
        vectors[:, FIELD_INDEX["n_refused"]] = 2 * self.k * f
        out = {OVERALL: vectors.sum(axis=0)}
        for scope in sorted(set(self.scopes.tolist())):
            out[scope] = vectors[self.scopes == scope].sum(axis=0)
        return out


def _same(a: Mapping[str, float], b: Mapping[str, float]) -> bool:
    return a.keys() == b.keys() and all(math.isclose(a[k], b[k], rel_tol=1e-9, abs_tol=1e-12) for k in a)


def _solve(fn: Callable[[float], float], lo: float, hi: float, target: float) -> float | None:
    """The smallest x in [lo, hi] with fn(x) >= target (fn increasing), to 1e-6: the closest
    multiple of 1e-6 if it reaches the target within rounding (0.12, not 0.120001), else the next."""
    tolerance = 1e-9 * max(1.0, abs(target))
    if fn(hi) < target - tolerance:
        return None
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if fn(mid) < target else (lo, mid)
    near = round(hi, 6)
    return near if fn(near) >= target - tolerance else math.ceil(hi * 1e6) / 1e6


def plan_experiments(prepared: PreparedSuite, settings, base_p: float, base_f: float) -> tuple[list[Experiment], dict[str, Any]]:
    """The experiments of a suite's calibration: false alarms (the base persona ``stereotyped(base_p,
    base_f)`` against itself), then per metric a candidate whose true worsening is twice the
    metric's margin in the scope it worsens least (so at least twice in every scope).

    The lever is p when raising it worsens the metric enough, else f (``ooc_ratio``). Metrics that
    need the same p share an experiment; a metric on f rides on the first one (filtering moves no
    other metric). Returns the experiments and, per metric of the rules, its margin, candidate and
    true worsening per scope (or why it has no experiment: margin 0, or no such candidate)."""
    if all(rule.margin == 0 for rule in settings.rules.values()):  # nothing to worsen by twice its margin
        return [Experiment(FALSE_ALARMS, base_p, base_f)], {
            metric: {"margin": 0.0, "lever": None, "why": "margin 0: no worsening of twice the margin to detect"} for metric in settings.rules
        }
    expect = Expectations.of(prepared)
    base_values = true_values(prepared, expect.counts(base_p, base_f), list(settings.rules))
    by_p: dict[float, Experiment] = {}
    on_filter: list[tuple[str, float]] = []
    info: dict[str, Any] = {}
    for metric, rule in settings.rules.items():
        margin = rule.absolute_margin(base_values[(metric, OVERALL)])
        if not margin > 0:
            info[metric] = {"margin": margin, "lever": None, "why": "margin 0: no worsening of twice the margin to detect"}
            continue

        def least(p: float, f: float, metric: str = metric) -> float:
            return min(expect.worsening(metric, (base_p, base_f), (p, f)).values(), default=-math.inf)

        p = _solve(lambda x: least(x, base_f), base_p, 1.0, 2 * margin)
        if p is not None:
            by_p.setdefault(p, Experiment("", p, base_f)).metrics.append(metric)
            info[metric] = {"margin": margin, "lever": {"p": p}}
            continue
        f = _solve(lambda x: least(base_p, x), base_f, 1.0, 2 * margin)
        if f is None:
            info[metric] = {"margin": margin, "lever": None, "why": "no stereotyped persona worsens it by twice the margin"}
            continue
        on_filter.append((metric, f))
        info[metric] = {"margin": margin, "lever": {"fail_rate": f}}
    experiments = list(by_p.values())
    for metric, f in on_filter:
        # A metric on f rides on the first experiment when filtering that much moves none of its
        # metrics' true worsening (QA: filtered replies leave every proportion as it was).
        host = experiments[0] if experiments else None
        if host is not None and all(
            _same(expect.worsening(m, (base_p, base_f), (host.p, max(host.f, f))), expect.worsening(m, (base_p, base_f), (host.p, host.f)))
            for m in host.metrics
        ):
            host.f = max(host.f, f)
            host.metrics.append(metric)
        else:
            experiments.append(Experiment("", base_p, f, [metric]))
    for experiment in experiments:
        experiment.name = " + ".join(f"{m} x2" for m in experiment.metrics)
        for metric in experiment.metrics:
            info[metric]["candidate"] = stereotyped(experiment.p, experiment.f)
            info[metric]["true_worsening"] = expect.worsening(metric, (base_p, base_f), (experiment.p, experiment.f))
        expect.check(experiment.p, experiment.f)
    return [Experiment(FALSE_ALARMS, base_p, base_f), *experiments], info


Row = dict[str, tuple[str, Any, Any, Any]]  # check -> (verdict, worsening, cases, cases_to_resolve)


def run_repetitions(
    prepared: PreparedSuite, settings, experiments: Sequence[Experiment], reps: Sequence[int], base_p: float, base_f: float
) -> tuple[dict[str, list[Row]], list[float]]:
    """Repetition r compares the base persona under seed 2r with each experiment's candidate under
    seed 2r + 1, through :func:`~biascheck.evaluation.regression.compare` and the suite's own
    settings. Returns per experiment one row per repetition (each check's verdict, measured
    worsening, cases and ``cases_to_resolve``), and the seconds each repetition took."""
    from biascheck.evaluation.baseline import from_results
    from biascheck.evaluation.regression import compare

    rows: dict[str, list[Row]] = {e.name: [] for e in experiments}
    seconds = []
    for r in reps:
        started = time.perf_counter()
        baseline = from_results(comparison_document(prepared, stereotyped(base_p, base_f, 2 * r)))
        for experiment in experiments:
            candidate = comparison_document(prepared, stereotyped(experiment.p, experiment.f, 2 * r + 1))
            comparison = compare(baseline, candidate, settings, baseline_path="(simulated)")
            rows[experiment.name].append(
                {f"{c.metric} ({c.scope})": (c.verdict, c.worsening, c.cases, c.cases_to_resolve) for c in comparison.checks}
            )
        seconds.append(time.perf_counter() - started)
    return rows, seconds


def summarise(experiments: Sequence[Experiment], info: Mapping[str, Any], rows: Mapping[str, Sequence[Row]]) -> dict[str, Any]:
    """The calibration of one suite from its experiments' rows: FWER (the share of false-alarm
    repetitions with any regressed check) with its Wilson interval, and per metric and check the
    power (the share of its experiment's repetitions where the check regressed), the true and the
    mean measured worsening, and for a check below :data:`TARGET_POWER` the size needed (the median
    ``cases_to_resolve`` over repetitions, and that as a multiple of the check's cases)."""
    null = rows[FALSE_ALARMS]
    reps = len(null)
    checks = list(null[0])
    fwer = sum(any(v[0] == "regressed" for v in row.values()) for row in null) / reps
    false_by_check = {c: n / reps for c in checks if (n := sum(row[c][0] == "regressed" for row in null))}
    metrics: dict[str, Any] = {}
    for metric, meta in info.items():
        entry: dict[str, Any] = {**meta, "checks": {}}
        experiment = next((e for e in experiments if metric in e.metrics), None)
        if experiment is not None:
            for check in (c for c in checks if c.startswith(f"{metric} (")):
                scope = check[len(metric) + 2 : -1]
                found = [row[check] for row in rows[experiment.name]]
                verdicts = [v[0] for v in found]
                realised = [v[1] for v in found if v[1] is not None]
                cases = next((v[2] for v in found if v[2] is not None), None)
                needed = [v[3] for v in found if v[3] is not None]
                power = verdicts.count("regressed") / len(found)
                entry["checks"][scope] = {
                    "power": power,
                    "power_ci": wilson(power, len(found)),
                    "verdicts": {v: verdicts.count(v) for v in sorted(set(verdicts))},
                    "true_worsening": meta["true_worsening"].get(scope),
                    "realised_worsening": statistics.fmean(realised) if realised else None,
                    "cases": cases,
                    "cases_to_resolve": statistics.median(needed) if needed else None,
                    "times_needed": statistics.median(needed) / cases if needed and cases else None,
                }
            values = list(entry["checks"].values())
            below = [v for v in values if v["power"] < TARGET_POWER]
            factors = [v["times_needed"] for v in below if v["times_needed"] is not None]
            overall = entry["checks"].get(OVERALL, {}).get("realised_worsening")
            entry.update(
                min_power=min(v["power"] for v in values),
                reaching=len(values) - len(below),
                times_needed_max=max(factors) if factors else None,
                below_without_estimate=len(below) - len(factors),
                realised_over_margin_overall=overall / meta["margin"] if overall is not None else None,
            )
        metrics[metric] = entry
    return {
        "checks": len(checks),
        "repetitions": reps,
        "fwer": fwer,
        "fwer_ci": wilson(fwer, reps),
        "false_alarms_by_check": false_by_check,
        "metrics": metrics,
    }
