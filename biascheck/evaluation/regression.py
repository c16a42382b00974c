"""Regression checks: a candidate run compared with a baseline on the cases both ran.

For every compared metric, overall and in every category, the verdict is read off one interval,
the one printed beside it (see :mod:`biascheck.metrics.paired` for the functions):

- the worsening (``badness(candidate) - badness(baseline)``) is estimated on the cases both ran;
- its spread is measured twice, by a paired bootstrap over templates (the same resampled templates
  on both sides) and over cases. The template spread is read against Student's t with T - 1 degrees
  of freedom (few templates: wide), the case spread against the normal;
- its lower and upper bounds are ``worsening -/+ q * se`` for the spread that gives the widest, at
  ``1 - alpha / m`` each (Bonferroni over the m checks of the run): both bounds of every check hold
  at once with probability ``1 - alpha``, so the chance of any false regression in a run is at most
  ``alpha``; an exact sign test on the changed cases keeps a bound at 0 when the cases that moved are
  too few to show a change in its direction (the bootstrap's normal tail is too thin there);
- a metric that rests on a judge calibration (BBG's ``*_corrected``) takes, in resample b, the b-th
  calibration draw (each true class's labelled rows resampled) on both sides alike
  (:func:`resampled_functions`): the calibration's uncertainty widens the spread, and runs that
  answered alike still differ by exactly 0. The t with T - 1 degrees of freedom and the
  sqrt(T / (T - 1)) scaling apply to the whole spread, calibration part included (conservative).

Verdicts: ``regressed`` (the lower bound lies beyond the margin), ``improved`` (the upper bound
lies below minus the margin), ``within margin`` (the upper bound lies within the margin),
``inconclusive`` (the bounds straddle the margin: the data can neither show nor rule out a
worsening beyond it; the minimum detectable effect says how large a worsening this subset could
catch) and ``not compared`` (the metric is undefined on one side). ``p_adjusted`` is the
Bonferroni p of the same test: below ``alpha`` exactly when the check regressed.

What an inconclusive check does to the gate is the user's decision, ``on_inconclusive``
(``[regression]`` in suite.toml, ``--biascheck-on-inconclusive``): ``pass`` (quietly), ``warn`` (the
default: it passes, and the reports name it with the suite size that would resolve it) or ``fail``
(inconclusive and not compared checks fail, as ``--biascheck-fail-inconclusive`` always did).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from biascheck.benchmarks.base import get_benchmark, metric_defs_for
from biascheck.config.manifest import Rule
from biascheck.core import format as fmt
from biascheck.core.errors import BiascheckError
from biascheck.core.spelling import Option, option
from biascheck.evaluation.baseline import ComparisonUnits, fingerprint_differences, scoring_of
from biascheck.metrics.bootstrap import cluster_bootstrap_many
from biascheck.metrics.core import number
from biascheck.metrics.paired import (
    PairedDifference,
    Spread,
    WorseningBounds,
    bounds_p_value,
    detectable_worsening,
    mcnemar_p_value,
    paired_bootstrap,
    paired_case_bootstrap,
    worsening_bounds,
)
from biascheck.records.baseline import BaselineRecord
from biascheck.records.comparison import Check, Comparison
from biascheck.records.run import CaseRecord, RunRecord
from biascheck.suite import missing_data_summary

# What compare() tests: a run, or a recorded release (a baseline: biascheck history tests each
# release against the one before it).
Candidate = RunRecord | BaselineRecord

COMPARISON_SCHEMA = "biascheck.comparison/2"
OVERALL = "overall"
VERDICTS = ("regressed", "improved", "within margin", "inconclusive", "not compared")
ON_INCONCLUSIVE = ("pass", "warn", "fail")
DEFAULT_ON_INCONCLUSIVE = "warn"
# Transitions listed first in the flip report: toward the stereotype, then away from the right answer.
_FLIP_ORDER = ("biased", "flagged", "counter", "ooc", "filtered", "unscorable", "error", "unknown", "unflagged")


@dataclass(frozen=True)
class CompareSettings:
    rules: dict[str, Rule]  # metric -> rule, in report order
    alpha: float = 0.05
    power: float = 0.8
    n_boot: int = 2000
    seed: int = 0
    flip_limit: int = 200
    allow_fingerprint_mismatch: bool = False
    on_inconclusive: str = DEFAULT_ON_INCONCLUSIVE

    @property
    def fail_inconclusive(self) -> bool:
        return self.on_inconclusive == "fail"

    def to_dict(self, family_size: int) -> dict[str, Any]:
        return {
            "alpha": self.alpha,
            "power": self.power,
            "n_boot": self.n_boot,
            "seed": self.seed,
            "family_size": family_size,
            "on_inconclusive": self.on_inconclusive,
        }


def resolve_text(check: Check) -> str:
    """What would resolve an inconclusive check, from ``cases_to_resolve`` (an estimate)."""
    needed, cases = check.cases_to_resolve, check.cases
    now = f" (now {cases})" if cases is not None else ""
    if needed is None:
        if check.margin == 0:
            return "margin 0: no suite size resolves it; give the metric a margin"
        return "no estimate of the cases that would resolve it"
    if cases is not None and needed <= cases:
        return f"this suite's {cases} cases can resolve a worsening of the margin; this run's point estimate is close to it"
    return f"about {needed:,} cases would resolve it{now}"


def resolve_rules(
    benchmark_name: str,
    gated: Sequence[str],
    manifest_rules: Mapping[str, Rule],
    command_line: Sequence[Rule],
    where: object = Option("compare-fail"),
) -> dict[str, Rule]:
    """The rules a run checks: every gated metric and every metric with a rule; a command-line rule
    (given as ``where`` names it) replaces the manifest's; a gated metric without one gets margin 0
    (any credible worsening)."""
    benchmark = get_benchmark(benchmark_name)
    defs = {**benchmark.metric_defs, **benchmark.extra_metric_defs}  # BBG's judge-corrected metrics
    rules: dict[str, Rule] = {m: Rule(m, 0.0) for m in gated}
    rules.update(manifest_rules)
    for rule in command_line:
        if rule.metric not in defs:
            raise BiascheckError(where, rule.describe(), f"{benchmark_name} has no metric {rule.metric!r}", f"use one of: {', '.join(defs)}")
        rule.check_direction(defs[rule.metric].better, where=where, field=rule.describe())
        rules[rule.metric] = rule
    return rules


def settings_from(
    results: Candidate,
    command_line: Sequence[Rule] = (),
    *,
    regression: Mapping[str, Any] | None = None,
    where: str | None = None,
    candidate: str = "results.json",
    rules_where: object = Option("compare-fail"),
    **overrides: Any,
) -> CompareSettings:
    """The comparison settings of a candidate's ``results`` (read from ``candidate``): the rules of
    a ``[regression]`` table (as results.json records it) on the metrics the candidate gates
    overall, with command-line rules and flags on top. The table is ``regression``, read from
    ``where`` (a baseline, a suite.toml); by default the results' own, which is right only for the
    document of the run just made (its suite's): a file given as the candidate must not choose how
    it is tested (``biascheck diff`` passes its baseline's or suite's). The table's values were
    held to suite.toml's bounds when its file was read. ``rules_where``: how the caller names the
    command-line rules, for an error about one."""
    if regression is None:
        assert isinstance(results, RunRecord), "a baseline as the candidate is tested with the table given"
        regression, where = results.suite.regression, results.suite.manifest or candidate  # manifest: optional
    where = where or candidate
    benchmark = _benchmark(results)
    defs = metric_defs_for(get_benchmark(benchmark), scoring_of(results))
    manifest_rules = {}
    for text in regression["rules"]:
        rule = Rule.parse_option(text, where=f"{where}: regression.margins")
        if rule.metric not in defs:  # a rule on no metric of the benchmark cannot be checked
            raise BiascheckError(where, f"regression.rules: {text}", f"{benchmark} has no metric {rule.metric!r}", f"use one of: {', '.join(defs)}")
        manifest_rules[rule.metric] = Rule(rule.metric, rule.margin, rule.relative, rule.sign, "manifest")
    # The metrics gated overall, as the plugin's regression items are (category-only gates aside).
    gated = list(dict.fromkeys(v.metric for v in results.verdicts or () if v.scope == OVERALL))
    for metric in gated:
        if metric not in defs:
            raise BiascheckError(candidate, "verdicts", f"{benchmark} has no metric {metric!r}", "regenerate the file with biascheck")
    rules = resolve_rules(benchmark, gated, manifest_rules, command_line, rules_where)
    keys = ("alpha", "power", "seed", "flip_limit", "on_inconclusive")
    values = {k: regression[k] for k in keys if k in regression}
    if "resamples" in regression:
        values["n_boot"] = regression["resamples"]
    values.update(overrides)
    return CompareSettings(rules=rules, **values)


# --- the comparison ----------------------------------------------------------------------------


@dataclass
class _Check:
    metric: str
    scope: str
    rule: Rule
    better: str
    margin: float
    base: tuple[float, tuple[float, float], int]
    cand: tuple[float, tuple[float, float], int]
    paired: Any
    defined: bool  # the metric has a value on both sides
    spreads: list[Spread]
    mcnemar: dict[str, Any] | None
    limits: tuple[float, float] | None = None  # the values the worsening can take
    bounds: WorseningBounds | None = None
    p_value: float = math.nan
    p_adjusted: float = math.nan
    mde: float = math.nan
    verdict: str = "not compared"
    explanation: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def _wider(by_template: PairedDifference, by_case: PairedDifference) -> PairedDifference:
    """The bootstrap that spreads wider, for the unadjusted percentile intervals reported beside
    the bounds (the bounds themselves weigh both spreads, see :func:`_spreads`)."""
    if math.isnan(by_template.worsening_se) or by_case.worsening_se > by_template.worsening_se:
        return by_case
    return by_template


def _spreads(by_template: PairedDifference, by_case: PairedDifference | None, templates: int, identical: bool) -> list[Spread]:
    """The worsening's spreads a check's bounds must respect. Templates: the paired cluster
    bootstrap's SE, scaled by sqrt(T / (T - 1)) to the usual cluster-robust SE (the bootstrap's
    plug-in variance divides by T) and read against t with T - 1 degrees of freedom, which is what
    keeps the level with few templates; one template gives no template spread. Cases: the case
    bootstrap's SE against the normal, the spread independent cases would have. Units answered
    alike on both sides leave nothing to spread: the worsening is exactly 0 on every resample."""
    if identical:
        return [Spread("cases", 0.0, math.inf)]
    spreads = []
    if templates >= 2:
        spreads.append(Spread("templates", by_template.worsening_se * math.sqrt(templates / (templates - 1)), templates - 1))
    if by_case is not None:
        spreads.append(Spread("cases", by_case.worsening_se, math.inf))
    return spreads


def _cluster_matrix(units: ComparisonUnits, index: np.ndarray, cluster_codes: np.ndarray, n_clusters: int) -> np.ndarray:
    """(T, K) sums of the units' vectors per cluster."""
    out = np.zeros((n_clusters, units.vectors.shape[1]), dtype=units.vectors.dtype)
    np.add.at(out, cluster_codes, units.vectors[index])
    return out


def check_comparable(b_suite: Mapping[str, Any], suite: Mapping[str, Any], *, allow_mismatch: bool, path: str) -> list[str]:
    """Refuse a baseline (``b_suite``: its suite) of another suite, or (unless allowed) one whose
    fingerprint differs; return the fingerprint parts that differ. Each suite holds ``name``,
    ``benchmark`` and ``fingerprint``."""
    if b_suite["name"] != suite["name"] or b_suite["benchmark"] != suite["benchmark"]:
        raise BiascheckError(
            path,
            "suite.name",
            f"is a baseline of suite {b_suite['name']!r} ({b_suite['benchmark']}), not of {suite['name']!r} ({suite['benchmark']})",
            "give the baseline of this suite",
        )
    differences = fingerprint_differences(b_suite["fingerprint"], suite["fingerprint"])
    if differences and not allow_mismatch:
        what = {
            "data": "benchmark data files",
            "prompts": "prompts",
            "subset": "subset of cases",
            "metrics_version": "metric definitions",
            "judge": "evaluator model or parameters",
            "scoring": "scoring convention",
            # Decision (issue 24): a run without some categories and a run with them are different
            # suites, refused like other data, whichever side is the partial one.
            "missing": "categories without data",
        }

        def shown(fingerprint: Mapping[str, Any], part: str) -> Any:
            return fingerprint.get(part) or "none"

        raise BiascheckError(
            path,
            "suite.fingerprint",
            "was made with other "
            + ", ".join(f"{what[d]} ({d} {shown(b_suite['fingerprint'], d)}, this run {shown(suite['fingerprint'], d)})" for d in differences),
            f"re-create the baseline with {option('update-baseline')}, or pass {option('allow-fingerprint-mismatch')} to compare the cases both share",
        )
    return differences


def check_same_answer_mode(baseline: BaselineRecord, candidate: Candidate, *, path: str) -> None:
    """Refuse to compare runs answered in different ways (QA's answer modes, HBB's estimators):
    a reply parsed, a log-likelihood arg max and a first-token reading of one model differ by
    construction, as sampled and log-probability P(a) do, whatever the model did."""
    mode = {"baseline": baseline.model.get("estimator"), "this run": _estimator(candidate)}
    if mode["baseline"] != mode["this run"]:
        shown = {side: value or "generation (the default)" for side, value in mode.items()}
        raise BiascheckError(
            path,
            "model.estimator",
            f"was answered by {shown['baseline']}, and this run by {shown['this run']}: answers read in different ways are not comparable",
            f"run in the baseline's answer mode ({option('answer-mode')}), or record a baseline in this one ({option('update-baseline')})",
        )


def compare(
    baseline: BaselineRecord,
    candidate: Candidate,
    settings: CompareSettings,
    *,
    baseline_path: str,
    prompts: Mapping[str, str] | None = None,
    baseline_answers: Mapping[str, str | None] | None = None,
) -> Comparison:
    """The comparison (``biascheck.comparison/2``) of a candidate run (or a recorded release) with
    a loaded baseline. Raises :class:`BiascheckError` when they are not comparable. ``prompts``:
    case id -> the prompt's text; ``baseline_answers``: case id -> the baseline's raw reply (a
    baseline file keeps none; a run's results.json does): both for the flips only. Every flip is
    in ``flips.every``; comparison.json keeps its counts and examples, and the file beside it
    (flips.jsonl, written by :func:`biascheck.reporting.write.write_reports`) every flip."""
    c_suite = _suite_identity(candidate)
    differences = check_comparable(baseline.suite, c_suite, allow_mismatch=settings.allow_fingerprint_mismatch, path=baseline_path)
    check_same_answer_mode(baseline, candidate, path=baseline_path)

    benchmark = get_benchmark(c_suite["benchmark"])
    # Both sides scored as the candidate was (the fingerprint check refused another scoring): a
    # BBG judge calibration is applied to baseline and candidate alike.
    scoring = scoring_of(candidate)
    defs = metric_defs_for(benchmark, scoring)
    base = ComparisonUnits.of(baseline, scoring_of(baseline) or scoring)
    cand = ComparisonUnits.of(candidate, scoring)
    base_index = {uid: i for i, uid in enumerate(base.ids)}
    pairs = [(base_index[uid], j) for j, uid in enumerate(cand.ids) if uid in base_index]
    if not pairs:
        raise BiascheckError(
            baseline_path,
            "cases",
            f"none of the run's {len(cand.ids)} units is in the baseline, so nothing can be compared",
            f"re-create the baseline for this suite with {option('update-baseline')}",
        )
    bi = np.array([p[0] for p in pairs], dtype=np.int64)
    ci = np.array([p[1] for p in pairs], dtype=np.int64)

    warnings = _warnings(baseline, candidate, len(base.ids), len(cand.ids), len(pairs), differences)
    # Errored cases leave every metric but error_ratio: a comparison without them is no evidence.
    candidate_errors = sum(cand.outcomes[j] == "error" for j in ci)
    complete = candidate.run.complete if isinstance(candidate, RunRecord) else True
    if candidate_errors:
        warnings.append(f"{candidate_errors} of the compared cases errored in the candidate run: the comparison cannot pass")
    if isinstance(candidate, RunRecord) and not complete:
        warnings.append(f"the candidate run is incomplete ({candidate.run.incomplete_reason}): the comparison cannot pass")
    categories = sorted({cand.categories[j] for j in ci})
    checks: list[_Check] = []
    for scope in [OVERALL, *categories]:
        if scope == OVERALL:
            sb, sc = bi, ci
        else:
            keep = np.array([cand.categories[j] == scope for j in ci], dtype=bool)
            sb, sc = bi[keep], ci[keep]
        clusters = [cand.clusters[j] for j in sc]
        names = sorted(set(clusters))
        code = {c: k for k, c in enumerate(names)}
        codes = np.fromiter((code[c] for c in clusters), dtype=np.int64, count=len(clusters))
        cb = _cluster_matrix(base, sb, codes, len(names))
        cc = _cluster_matrix(cand, sc, codes, len(names))
        fns = {m: (defs[m].fn, defs[m].better) for m in settings.rules}
        drawn = resampled_functions(defs, settings.rules, settings.seed)
        by_template = paired_bootstrap(cb, cc, fns, n_boot=settings.n_boot, seed=settings.seed, resampled=drawn)
        by_case = None
        if base.cells is not None and cand.cells is not None:
            k = base.vectors.shape[1]
            joint = np.bincount(base.cells[sb] * k + cand.cells[sc], minlength=k * k).reshape(k, k)
            by_case = paired_case_bootstrap(joint, fns, n_boot=settings.n_boot, seed=settings.seed, resampled=drawn)
        at_resamples = {m: drawn.get(m, defs[m].fn) for m in settings.rules}
        side_b = cluster_bootstrap_many(cb, at_resamples, n_boot=settings.n_boot, seed=settings.seed)
        side_c = cluster_bootstrap_many(cc, at_resamples, n_boot=settings.n_boot, seed=settings.seed)
        total_b, total_c = cb.sum(axis=0), cc.sum(axis=0)
        identical = bool(np.array_equal(base.vectors[sb], cand.vectors[sc]))  # every unit answered alike
        for metric, rule in settings.rules.items():
            # Point values are the same either way; the unadjusted intervals come from the wider.
            d = _wider(by_template[metric], by_case[metric]) if by_case else by_template[metric]
            margin = rule.absolute_margin(d.baseline) if not math.isnan(d.baseline) else math.nan
            changed = None
            defined = not (math.isnan(d.baseline) or math.isnan(d.candidate))
            if metric in base.scores and metric in cand.scores and defined:
                changed = _sign_test(base.scores[metric][sb], cand.scores[metric][sc], defs[metric].better, d.candidate)
            spreads = _spreads(by_template[metric], by_case[metric] if by_case else None, len(names), identical)
            checks.append(
                _Check(
                    metric,
                    scope,
                    rule,
                    defs[metric].better,
                    margin,
                    (d.baseline, side_b[metric], defs[metric].n(total_b)),
                    (d.candidate, side_c[metric], defs[metric].n(total_c)),
                    d,
                    defined,
                    spreads,
                    changed,
                    defs[metric].worsening_limits(),
                    extra={"templates": len(names), "cases": len(sc)},
                )
            )

    # Bonferroni over the checks that can be decided: each bound of every check holds at
    # 1 - alpha/m, so the bounds hold for all checks at once with probability 1 - alpha.
    family_size = sum(c.defined for c in checks)
    for check in checks:
        _decide(check, settings, family_size)

    cases = candidate.cases if isinstance(candidate, RunRecord) else ()
    flips, every = _flips(base, cand, bi, ci, checks, cases, prompts, baseline_answers, settings.flip_limit)
    regressed = any(c.verdict == "regressed" for c in checks)
    unresolved = any(c.verdict in ("inconclusive", "not compared") for c in checks)
    c_model = _model(candidate)
    document = {
        "schema": COMPARISON_SCHEMA,
        "suite": {"name": c_suite["name"], "benchmark": c_suite["benchmark"]},
        "baseline": {
            "path": baseline_path,
            "model": baseline.model_name,
            "params": baseline.model["params"],
            "created_at": baseline.created_at,
            "git_commit": baseline.git_commit,
            "tool_version": baseline.tool["version"],
        },
        "candidate": {"model": c_model["model"], "params": c_model["params"]},
        "fingerprint": {"equal": not differences, "differences": differences, "allowed": bool(differences)},
        "warnings": warnings,
        "cases": {"baseline": len(base.ids), "candidate": len(cand.ids), "common": len(pairs)},
        "settings": settings.to_dict(family_size),
        "results": [_check_json(c) for c in checks],
        "regressed": regressed,
        "candidate_errors": candidate_errors,
        "passed": not regressed and not (settings.fail_inconclusive and unresolved) and not candidate_errors and complete,
        "flips": flips,
    }
    # Read as comparison.json is read: the record a file of this document gives.
    return Comparison.from_json(document, "comparison", every, "comparison")


def _suite_identity(side: Candidate) -> dict[str, Any]:
    """What check_comparable reads of the candidate's suite: name, benchmark and fingerprint."""
    if isinstance(side, BaselineRecord):
        return {"name": side.suite_name, "benchmark": side.benchmark, "fingerprint": side.suite["fingerprint"]}
    return {"name": side.suite.name, "benchmark": side.suite.benchmark, "fingerprint": side.suite.fingerprint}


def _benchmark(side: Candidate) -> str:
    return side.benchmark if isinstance(side, BaselineRecord) else side.suite.benchmark


def _estimator(side: Candidate) -> str | None:
    return side.model.get("estimator") if isinstance(side, BaselineRecord) else side.run.estimator


def _model(side: Candidate) -> Mapping[str, Any]:
    """The model as the comparison's warnings read it: model, params, revision, served."""
    if isinstance(side, BaselineRecord):
        return side.model
    model = side.model
    return {"model": model.model, "params": model.params, "revision": model.revision, "served": model.served}


def _skipped(side: Candidate) -> tuple[Mapping[str, str], int | None]:
    """(the categories a side ran without, its categories in all)."""
    if isinstance(side, BaselineRecord):
        return side.suite.get("skipped_categories") or {}, side.suite.get("categories_total")
    return side.suite.skipped_categories, side.suite.categories_total


def resampled_functions(defs: Mapping[str, Any], metrics: Iterable[str], seed: int) -> dict[str, Callable[[np.ndarray], np.ndarray]]:
    """The metrics that rest on more than the counts (BBG's judge-corrected ones: a calibration),
    as functions of resampled sums at ``seed``'s draws: resample b of baseline and candidate alike
    takes the b-th calibration draw, so its uncertainty widens the worsening's spread and identical
    sides still differ by exactly 0 on every resample."""
    out: dict[str, Callable[[np.ndarray], np.ndarray]] = {}
    for m in metrics:
        at = defs[m].resampled
        if at is not None:
            out[m] = functools.partial(at, seed=seed)
    return out


def _warnings(baseline: BaselineRecord, candidate: Candidate, n_base: int, n_cand: int, n_common: int, differences: list[str]) -> list[str]:
    out = []
    if differences:
        out.append(f"suite fingerprint differs ({', '.join(differences)}); compared on the {n_common} cases both share, as allowed")
    for side, record in (("the baseline", baseline), ("this run", candidate)):
        skipped, total = _skipped(record)
        if skipped:
            out.append(f"{side} ran without some categories: {missing_data_summary(skipped, total)}")
    b_params, c_params = baseline.model["params"], _model(candidate)["params"]
    changed = sorted(set(b_params) | set(c_params))
    changed = [k for k in changed if b_params.get(k) != c_params.get(k)]
    if changed:
        out.append("sampling parameters differ: " + ", ".join(f"{k} {b_params.get(k, 'unset')} -> {c_params.get(k, 'unset')}" for k in changed))
    out += _identity_warnings(baseline.model, _model(candidate))
    if n_common < n_cand:
        out.append(f"{n_cand - n_common} of the candidate's {n_cand} cases are not in the baseline and are not compared")
    if n_common < n_base:
        out.append(f"{n_base - n_common} of the baseline's {n_base} cases were not run and are not compared (a partial selection)")
    return out


def _identity_warnings(baseline: Mapping[str, Any], candidate: Mapping[str, Any]) -> list[str]:
    """What says the two runs tested the same model where they should differ, or not: the same
    revision on both sides (a release compared with itself?), and what the provider said it served."""
    out = []
    b_revision, c_revision = baseline.get("revision"), candidate.get("revision")
    if b_revision is not None and b_revision == c_revision:
        out.append(f"the baseline and this run both test revision {b_revision}: is this the release it should be?")
    for key, label in (("models", "served models"), ("system_fingerprints", "system fingerprints")):
        b_served, c_served = set((baseline.get("served") or {}).get(key, {})), set((candidate.get("served") or {}).get(key, {}))
        if b_served and c_served and b_served != c_served:
            out.append(f"the provider reported other {label} than for the baseline: {', '.join(sorted(b_served))} -> {', '.join(sorted(c_served))}")
    return out


def _sign_test(sb: np.ndarray, sc: np.ndarray, better: str, candidate_value: float) -> dict[str, Any]:
    """The cases whose contribution to the metric moved, split into ``worse`` and ``better``, with
    the exact one-sided sign test of that split (McNemar's test when the metric is a proportion).
    Only cases in the metric's denominator on both sides count. For a metric best at zero, moving
    toward the candidate's sign is worse."""
    both = ~np.isnan(sb) & ~np.isnan(sc)
    up, down = int(np.sum(sc[both] > sb[both])), int(np.sum(sc[both] < sb[both]))
    if better == "higher" or (better == "zero" and candidate_value < 0):
        worse, improved = down, up
    elif better == "lower" or candidate_value > 0:
        worse, improved = up, down
    else:  # a candidate at exactly zero cannot be worse than any baseline
        worse, improved = 0, up + down
    return {"worse": worse, "better": improved, "p_value": mcnemar_p_value(worse, improved), "p_value_better": mcnemar_p_value(improved, worse)}


def _decide(check: _Check, settings: CompareSettings, family_size: int) -> None:
    """The verdict, read off the printed bounds: beyond the margin (regressed), below minus the
    margin (improved), within it (within margin), or straddling it (inconclusive)."""
    d = check.paired
    where = f"{check.metric} ({check.scope})"
    moved = f"{fmt.value(d.baseline)} -> {fmt.value(d.candidate)}"
    if not check.defined:
        check.verdict = "not compared"
        side = "baseline" if math.isnan(d.baseline) else "candidate"
        check.explanation = f"{where} not compared: undefined on the {side} side ({moved})"
        return
    alpha_each = settings.alpha / max(family_size, 1)
    sign = check.mcnemar
    check.bounds = bounds = worsening_bounds(
        d.worsening,
        check.spreads,
        alpha_each=alpha_each,
        sign_p_worse=sign["p_value"] if sign else None,
        sign_p_better=sign["p_value_better"] if sign else None,
        limits=check.limits,
    )
    margin = check.margin
    check.p_value = bounds_p_value(d.worsening, margin, check.spreads, sign_p_worse=sign["p_value"] if sign else None)
    check.p_adjusted = min(1.0, check.p_value * family_size) if not math.isnan(check.p_value) else math.nan
    detectable = detectable_worsening(check.spreads, alpha_each=alpha_each, power=settings.power)
    check.mde = margin + detectable
    lo, hi = bounds.lower, bounds.upper
    digits = _digits_apart(margin, lo, hi)
    shown = f"worsening {fmt.signed(d.worsening)}, {bounds_label(family_size, settings.alpha)} {fmt.signed_ci((lo, hi), digits)}"
    tail = f"margin {margin:.{digits}f} ({check.rule.describe()})"
    if math.isnan(lo):
        check.verdict = "inconclusive"
        why = "one template and no case-level resampling" if check.extra.get("templates") == 1 else "no resamples"
        check.explanation = f"{where} inconclusive: {moved}; nothing measures this check's spread ({why}), so nothing is decided; {tail}"
    elif lo > margin:
        check.verdict = "regressed"
        check.explanation = f"{where} regressed: {moved}; {shown} lies beyond the {tail}"
    elif hi < -margin:
        check.verdict = "improved"
        check.explanation = f"{where} improved: {moved}; {shown} lies below the negative of the {tail}"
    elif hi <= margin:
        check.verdict = "within margin"
        check.explanation = f"{where} within margin: {moved}; {shown} lies within the {tail}"
        lo_d, hi_d = d.difference_ci
        if check.better == "zero" and (lo_d > 0 or hi_d < 0) and d.baseline * d.candidate < 0:
            # |x| did not grow, but the bias now points the other way: worth a reader's attention.
            check.explanation += "; the sign flipped, so the bias changed direction"
    else:
        check.verdict = "inconclusive"
        spread = bounds.spread
        width = (
            f"spread from {check.extra.get('templates')} templates, t with {spread.df:.0f} df"
            if spread and spread.source == "templates"
            else "spread from cases"
        )
        if check.limits is not None and check.mde > check.limits[1]:
            detects = (
                f"at this size no worsening the metric can take (up to {fmt.signed(check.limits[1])}) is detected with {settings.power:.0%} power"
            )
        else:
            detects = f"this comparison detects a worsening of {fmt.value(check.mde)} or more with {settings.power:.0%} power"
        check.explanation = f"{where} inconclusive: {moved}; {shown} ({width}) straddles the {tail}; {detects}" + (
            "" if check.mde <= 2 * margin or margin == 0 else " (more cases are needed to resolve the margin)"
        )
        # Projected from the deciding spread with normal quantiles: the t's extra width shrinks as
        # templates grow. A reader can redo it from "interval".
        assert bounds.spread is not None
        projected = detectable_worsening([Spread(bounds.spread.source, bounds.spread.se, math.inf)], alpha_each=alpha_each, power=settings.power)
        check.extra["cases_to_resolve"] = cases_to_resolve(projected, margin, check.extra.get("cases", 0))


def _digits_apart(margin: float, *bounds: float) -> int:
    """Decimals enough that a bound just beyond (or within) the margin does not print equal to it,
    nor to minus it: a reader compares the printed numbers."""
    for digits in range(4, 10):
        if all(f"{abs(b):.{digits}f}" != f"{margin:.{digits}f}" for b in bounds if not math.isnan(b)):
            return digits
    return 10


def bounds_label(family_size: int, alpha: float = 0.05) -> str:
    """How the printed bounds are labelled: what they hold, and over how many checks."""
    level = f"{1 - alpha:.0%}" if round(100 * (1 - alpha), 6).is_integer() else f"{1 - alpha:.1%}"
    return f"simultaneous {level} bounds over {family_size} checks" if family_size > 1 else f"{level} bounds"


def cases_to_resolve(detectable: float, margin: float, cases: int) -> int | None:
    """The suite size (compared cases of the check's scope) at which the worsening a check detects
    beyond its margin (its MDE less the margin) would shrink to the margin itself, so that a
    worsening of twice the margin is caught and none within it is blamed. The detectable worsening
    scales with the standard error, as 1/sqrt(n) when every case spreads as these did: an estimate.
    None when the margin is 0 (no size resolves it) or nothing is known."""
    if not (margin > 0) or math.isnan(detectable) or cases <= 0:
        return None
    needed = cases * (detectable / margin) ** 2 if detectable / margin < 1e9 else math.inf
    return max(cases, math.ceil(needed)) if needed < 1e15 else None  # beyond any suite: no estimate


def _interval_json(check: _Check) -> dict[str, Any] | None:
    """How ``worsening_ci`` was made, so a reader can redo it: its level, the spread that set its
    width (standard error, degrees of freedom, quantile) and any bound the sign test floored."""
    b = check.bounds
    if b is None or b.spread is None:
        return None
    return {
        "level": "simultaneous one-sided bounds, Bonferroni: each holds at 1 - alpha / family_size",
        "spread": b.spread.source,
        "se": number(b.spread.se),
        "df": None if math.isinf(b.spread.df) else int(b.spread.df),
        "quantile": number(b.quantile),
        "floored_by_sign_test": list(b.floored),
    }


def _check_json(check: _Check) -> dict[str, Any]:
    d = check.paired
    b = check.bounds

    def side(value):
        v, ci, n = value
        return {"value": number(v), "ci": [number(ci[0]), number(ci[1])], "n": n}

    return {
        "metric": check.metric,
        "scope": check.scope,
        "better": check.better,
        "rule": check.rule.describe(),
        "rule_source": check.rule.source,
        "margin": number(check.margin),
        "baseline": side(check.base),
        "candidate": side(check.cand),
        "difference": number(d.difference),
        "difference_ci_unadjusted": [number(d.difference_ci[0]), number(d.difference_ci[1])],
        "worsening": number(d.worsening),
        # The printed, deciding interval; the verdict is read off it and the margin.
        "worsening_ci": [number(b.lower), number(b.upper)] if b else [None, None],
        "worsening_ci_unadjusted": [number(d.worsening_ci[0]), number(d.worsening_ci[1])],
        "interval": _interval_json(check),
        "p_value": number(check.p_value),
        "p_adjusted": number(check.p_adjusted),
        "mcnemar": check.mcnemar,
        "mde": number(check.mde),
        "cases_to_resolve": None,
        "verdict": check.verdict,
        "explanation": check.explanation,
        **check.extra,
    }


FLIPS_FILE = "flips.jsonl"

FlipGroup = tuple[str, str]  # (category, "<baseline> -> <candidate>")


def _flips(
    base: ComparisonUnits,
    cand: ComparisonUnits,
    bi: np.ndarray,
    ci: np.ndarray,
    checks: Sequence[_Check],
    cases: Sequence[CaseRecord],
    prompts: Mapping[str, str] | None,
    baseline_answers: Mapping[str, str | None] | None,
    limit: int,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(the flips as comparison.json counts them, with up to ``limit`` examples chosen across what
    regressed first (:func:`choose_examples`); every flip): the units whose outcome changed.
    ``cases``: the candidate's (none for a recorded release), for the flips' prompts and replies."""
    rank = {o: k for k, o in enumerate(_FLIP_ORDER)}
    changed = [(i, j) for i, j in zip(bi.tolist(), ci.tolist()) if base.outcomes[i] != cand.outcomes[j]]
    changed.sort(key=lambda p: (cand.categories[p[1]], rank.get(cand.outcomes[p[1]], 99), base.outcomes[p[0]], cand.ids[p[1]]))
    groups: dict[FlipGroup, list[int]] = {}  # (category, transition) -> positions in ``changed``, in its order
    for k, (i, j) in enumerate(changed):
        groups.setdefault((cand.categories[j], f"{base.outcomes[i]} -> {cand.outcomes[j]}"), []).append(k)
    by_transition: dict[str, int] = {}
    by_category: dict[str, dict[str, int]] = {}
    for (category, transition), members in groups.items():
        by_transition[transition] = by_transition.get(transition, 0) + len(members)
        by_category.setdefault(category, {})[transition] = len(members)
    picked = choose_examples(groups, _worse_transitions(checks, base, cand, changed, groups), limit)
    every = _flip_records(changed, base, cand, cases, prompts, baseline_answers)
    counts = {
        "total": len(changed),
        "by_transition": _by_count(by_transition),
        "by_category": {category: _by_count(counts) for category, counts in sorted(by_category.items())},
        "examples": [every[k] for k in sorted(picked)],
        "limit": limit,
        "shown": len(picked),
        "file": None,  # set by the report writer, which puts every flip in FLIPS_FILE
    }
    return counts, every


def _by_count(counts: Mapping[str, int]) -> dict[str, int]:
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _worse_transitions(
    checks: Sequence[_Check], base: ComparisonUnits, cand: ComparisonUnits, changed: Sequence[tuple[int, int]], groups: Mapping[FlipGroup, list[int]]
) -> list[FlipGroup]:
    """The (category, transition) groups that hold a flip toward worse for a regressed check: one
    that moved the unit's contribution to the check's metric the way the metric calls worse (as
    the sign test counts it), in the check's category, or in every category for an overall check.
    A metric without per-unit contributions counts every flip of its scope. In ``groups``' order
    (categories, then as the flip report ranks transitions). One pass over the flips per check."""
    keys = list(groups)
    code = np.empty(len(changed), dtype=np.int64)
    for k, key in enumerate(keys):
        code[groups[key]] = k
    categories = np.array([key[0] for key in keys], dtype=object)
    bi = np.fromiter((i for i, _ in changed), dtype=np.int64, count=len(changed))
    ci = np.fromiter((j for _, j in changed), dtype=np.int64, count=len(changed))
    wanted = np.zeros(len(keys), dtype=bool)
    for check in checks:
        if check.verdict != "regressed":
            continue
        worse = _toward_worse(check, base, cand, bi, ci)
        if check.scope != OVERALL:
            worse &= categories[code] == check.scope
        wanted[code[worse]] = True
    return [key for key, hit in zip(keys, wanted.tolist()) if hit]


def _toward_worse(check: _Check, base: ComparisonUnits, cand: ComparisonUnits, bi: np.ndarray, ci: np.ndarray) -> np.ndarray:
    """Which of the flips (baseline rows ``bi``, candidate rows ``ci``) moved the check's metric the
    way it calls worse, as :func:`_sign_test` counts them."""
    before_scores, after_scores = base.scores.get(check.metric), cand.scores.get(check.metric)
    if before_scores is None or after_scores is None:
        return np.ones(len(bi), dtype=bool)
    before, after = before_scores[bi], after_scores[ci]
    with np.errstate(invalid="ignore"):  # NaN (not in the metric's denominator) compares False
        if check.better == "higher" or (check.better == "zero" and check.paired.candidate < 0):
            return np.asarray(after < before)
        if check.better == "lower" or check.paired.candidate > 0:
            return np.asarray(after > before)
    return np.zeros(len(bi), dtype=bool)


def choose_examples(groups: Mapping[FlipGroup, Sequence[int]], first: Sequence[FlipGroup], limit: int) -> list[int]:
    """Up to ``limit`` members of ``groups`` (each a (category, transition) group's flips, in the
    order to show them), taken round-robin: one from each group of ``first`` (what regressed) in
    turn until they run out, then likewise from the others. Every group of ``first`` is shown
    when ``limit`` allows one each, whatever its category is called; linear in what is taken."""
    picked: list[int] = []
    chosen = set(first)
    for keys in (list(first), [key for key in groups if key not in chosen]):
        depth = 0
        while keys and len(picked) < limit:
            keys = [key for key in keys if depth < len(groups[key])]
            for key in keys:
                if len(picked) == limit:
                    break
                picked.append(groups[key][depth])
            depth += 1
    return picked


def _flip_records(
    changed: Sequence[tuple[int, int]],
    base: ComparisonUnits,
    cand: ComparisonUnits,
    cases: Sequence[CaseRecord],
    prompts: Mapping[str, str] | None,
    baseline_answers: Mapping[str, str | None] | None,
) -> list[dict[str, Any]]:
    """Every flip as the report shows it: outcomes, the prompt (id, and its text when the run has
    it), the options shown, the candidate's reply and the baseline's (a baseline file keeps none)."""
    ids = {cand.ids[j] for _, j in changed}
    by_id = {c.case_id: c for c in cases if c.case_id in ids}
    roles = _qa_options(cases) if ids else {}
    out = []
    for i, j in changed:
        uid = cand.ids[j]
        case = by_id.get(uid)
        flip: dict[str, Any] = {
            "case_id": uid,
            "category": cand.categories[j],
            "context_type": cand.kinds[j],
            "baseline": base.outcomes[i],
            "candidate": cand.outcomes[j],
            "prompt": case.prompt_id if case else None,
            "answer": case.raw if case else None,
            "baseline_answer": baseline_answers.get(uid) if baseline_answers else None,
            **_flip_options(roles.get(uid, {}), cand.kinds[j], base.outcomes[i], cand.outcomes[j]),
        }
        if case is not None and case.choices is not None:
            flip["options"] = list(case.choices)
        if prompts and prompts.get(uid) is not None:
            flip["prompt_text"] = prompts[uid]
        out.append(flip)
    return out


_QA_CLASSES = ("unknown", "biased", "counter")
_CORRECT_CLASS = {"amb": "unknown", "dis-biased": "biased", "dis-counter": "counter"}


def _qa_options(cases: Sequence[CaseRecord]) -> dict[str, dict[str, str]]:
    """case id -> {answer class: option text} for multiple-choice cases, as far as the run shows it.

    results.json does not record the truth itself, only each answer's class. But an item's biased
    and counter options are the same text in all its cases (prompts and orders only move them), and a
    prompt's "unknown" wording is in every case it renders; so one answered case of an item, or a
    prompt whose cases share just one option, names options for its siblings too. Classes the run
    does not show stay missing rather than guessed."""
    qa = [(c, c.choices) for c in cases if c.choices is not None and len(c.choices) == 3 == len(set(c.choices))]
    by_sample: dict[str, dict[str, str]] = {}
    unknown_by_prompt: dict[str, str] = {}
    shared_by_prompt: dict[str, set[str]] = {}
    for case, choices in qa:
        prompt = case.prompt_id
        shared_by_prompt[prompt] = shared_by_prompt.get(prompt, set(choices)) & set(choices)
        if case.outcome in _QA_CLASSES and case.answer is not None and case.answer in choices:
            if case.outcome == "unknown":
                unknown_by_prompt[prompt] = case.answer
            else:
                by_sample.setdefault(case.sample_id, {})[case.outcome] = case.answer
    for prompt, shared in shared_by_prompt.items():
        if len(shared) == 1:  # the unknown wording is always shared, so a lone shared option is it
            unknown_by_prompt.setdefault(prompt, next(iter(shared)))
    out = {}
    for case, choices in qa:
        known = dict(by_sample.get(case.sample_id, {}))
        if case.prompt_id in unknown_by_prompt:
            known["unknown"] = unknown_by_prompt[case.prompt_id]
        roles = {cls: text for cls, text in known.items() if text in choices}
        if len(set(roles.values())) != len(roles):  # inconsistent data: name nothing
            continue
        if len(roles) == 2:  # three options, three classes: the last is what remains
            (cls,) = set(_QA_CLASSES) - set(roles)
            (roles[cls],) = set(choices) - set(roles.values())
        out[case.case_id] = roles
    return out


def _flip_options(roles: Mapping[str, str], kind: Any, baseline: str, candidate: str) -> dict[str, str]:
    """The optional option texts of one flip: correct, stereotyped, and each side's answer."""
    named = {
        "correct_option": roles.get(_CORRECT_CLASS.get(kind, "")),
        "stereotyped_option": roles.get("biased"),
        "baseline_option": roles.get(baseline),
        "candidate_option": roles.get(candidate),
    }
    return {key: text for key, text in named.items() if text is not None}
