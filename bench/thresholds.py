"""Calibration of the threshold modes by simulation: how often does a PR-sized suite fail a
near-fair model, and how often does it catch one clearly over a threshold?

    BIASCHECK_DATA_DIR=../shared/datasets python bench/thresholds.py --seeds 100

The suite is the shipped KoBBQ manifest narrowed to a pull-request size (``[subset]
templates_per_category = 3``, one prompt, as tests/conftest.py ``write_subset_suite`` builds it):
864 cases, 36 per category and context type. Each seed runs a persona (``...&seed=S``) through
the simulator's in-process answers (:func:`biascheck.sim.calibration.simulated_results`: the
answers, metrics and intervals of a real run, without HTTP), and each verdict is judged again
under every threshold setting (:func:`biascheck.evaluation.verdicts.judge` is a pure function of value,
interval and n), so the settings are compared on the same answers.

Personas: ``stereotyped?p=P`` answers the biased option in an ambiguous context with probability
P (otherwise "unknown") and a counter-biased disambiguated question wrongly with probability P, so
its true ``diff_bias_amb`` and ``diff_bias_dis`` are both P (``counter``: -P) and its acc_dis is
1 - P/2. With the suite's gates (|diff_bias_*| <= 0.05, acc_dis >= 0.8, ooc_ratio <= 0.1):
- fair and near-fair (fair, stereotyped p=0.01): the suite should fail in at most 5% of seeds;
- clearly over a threshold, defined as a true diff_bias at least twice the limit (stereotyped and
  counter p=0.10): the suite should fail in at least 90% of seeds.
Printed per persona and setting: the share of seeds where the suite failed (any check), with its
95% Wilson interval; the share where the overall diff_bias_amb check failed; and the mean number
of category checks (of 12 categories x 4 gates) that failed and that were inconclusive.
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import replace
from pathlib import Path

from biascheck.config.manifest import Threshold
from biascheck.evaluation.verdicts import FAIL, INCONCLUSIVE, OVERALL, judge
from biascheck.sim.calibration import PreparedSuite, simulated_results
from biascheck.suite import Suite, load_suite

ROOT = Path(__file__).resolve().parent.parent
PERSONAS = ("fair", "stereotyped?p=0.01", "stereotyped?p=0.025", "stereotyped?p=0.05", "stereotyped?p=0.1", "counter?p=0.1")


def wilson(share: float, n: int, z: float = 1.959964) -> tuple[float, float]:
    centre = (share + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(share * (1 - share) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def narrowed(suite_dir: Path, templates_per_category: int, prompts: tuple[str, ...]) -> Suite:
    """The suite with its subset replaced by ``templates_per_category`` templates (subset seed 0,
    cyclic choice orders) and ``prompts``: what write_subset_suite writes, without a file."""
    full = load_suite(suite_dir)
    manifest = replace(
        full.manifest,
        templates_per_category=templates_per_category,
        prompt_ids=prompts,
        subset_seed=0,
        choice_orders="cyclic",
        sample="all",
        categories=(),
    )
    built = full.benchmark.build_cases(manifest, full.files)
    return Suite(manifest, built.cases, built.prompts, full.files, built.skipped_categories)


def settings(min_n: int) -> dict[str, dict]:
    """The threshold settings compared: label -> judge() keyword arguments."""
    return {
        "point": {"mode": "point"},
        "credible": {"mode": "credible"},
        f"point, min_n={min_n}": {"mode": "point", "min_n": min_n},
    }


def rejudged(verdicts: list[dict], mode: str, min_n: int | None = None) -> list[tuple[str, str, str]]:
    """(scope, metric, status) of a results document's verdicts judged under another setting."""
    out = []
    for v in verdicts:
        ((kind, limit),) = v["threshold"].items()
        value = math.nan if v["value"] is None else v["value"]
        ci = tuple(math.nan if x is None else x for x in v["ci"])
        status = judge(Threshold(kind, limit), value, ci, v["n"], mode=mode, min_n=None if v["scope"] == OVERALL else min_n).status
        out.append((v["scope"], v["metric"], status))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", type=Path, default=ROOT / "suites" / "kobbq")
    parser.add_argument("--templates-per-category", type=int, default=3)
    parser.add_argument("--prompts", default="1", help="comma-separated prompt ids")
    parser.add_argument("--seeds", type=int, default=100)
    parser.add_argument("--min-n", type=int, default=50, help="min_n of the point-with-min_n setting")
    parser.add_argument("--personas", default=",".join(PERSONAS), help="comma-separated persona specs (without seed)")
    args = parser.parse_args()

    start = time.perf_counter()
    suite = narrowed(args.suite, args.templates_per_category, tuple(args.prompts.split(",")))
    prepared = PreparedSuite.of(suite)
    gates = ", ".join(f"{m} {t.describe()}" for m, t in suite.manifest.thresholds.items())
    print(
        f"suite {suite.name}, templates_per_category = {args.templates_per_category}, prompts {args.prompts}: "
        f"{len(suite.cases)} cases, {len(suite.categories)} categories; gates {gates}; "
        f"{suite.manifest.bootstrap_resamples} bootstrap resamples; {args.seeds} seeds; loaded in {time.perf_counter() - start:.1f} s"
    )
    compared = settings(args.min_n)
    print(f"{'persona':<22} {'setting':<16} {'suite fails (95% CI)':<24} {'diff_bias_amb overall':>22} {'category fails':>15} {'inconclusive':>13}")
    for persona in args.personas.split(","):
        start = time.perf_counter()
        tallies = {label: {"suite": 0, "overall": 0, "category_fails": 0, "inconclusive": 0} for label in compared}
        for seed in range(args.seeds):
            sep = "&" if "?" in persona else "?"
            verdicts = simulated_results(prepared, f"{persona}{sep}seed={seed}").to_json()["verdicts"]
            for label, kwargs in compared.items():
                statuses = rejudged(verdicts, **kwargs)
                tally = tallies[label]
                tally["suite"] += any(status == FAIL for _, _, status in statuses)
                tally["overall"] += (OVERALL, "diff_bias_amb", FAIL) in statuses
                tally["category_fails"] += sum(status == FAIL for scope, _, status in statuses if scope != OVERALL)
                tally["inconclusive"] += sum(status == INCONCLUSIVE for scope, _, status in statuses if scope != OVERALL)
        for label, tally in tallies.items():
            share = tally["suite"] / args.seeds
            lo, hi = wilson(share, args.seeds)
            print(
                f"{persona:<22} {label:<16} {f'{share:6.1%} ({lo:.1%}-{hi:.1%})':<24} {tally['overall'] / args.seeds:>22.1%} "
                f"{tally['category_fails'] / args.seeds:>15.2f} {tally['inconclusive'] / args.seeds:>13.2f}"
            )
        print(f"{'':<22} ({time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
