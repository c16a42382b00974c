"""Calibration of the regression gate by simulation, with many repetitions.

    BIASCHECK_DATA_DIR=../shared/datasets python bench/calibration.py --repetitions 200

On the default KoBBQ suite (or --suite), with the suite's own regression rules:
- false regressions: a persona compared with itself under another seed; the share of runs with
  any regressed check (target: at most 5%);
- power: a persona whose true diff_bias_amb is 0.03 worse (stereotyped p 0.10 -> 0.13); the
  share of runs where diff_bias_amb (overall) regressed (target: at least 90%).
Each rate is printed with its 95% Wilson interval and the wall time.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

from biascheck.evaluation.regression import settings_from
from biascheck.sim.calibration import PreparedSuite, rates, simulated_results
from biascheck.suite import load_suite

ROOT = Path(__file__).resolve().parent.parent


def wilson(share: float, n: int, z: float = 1.959964) -> tuple[float, float]:
    centre = (share + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(share * (1 - share) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", type=Path, default=ROOT / "suites" / "kobbq")
    parser.add_argument("--repetitions", type=int, default=200)
    parser.add_argument("--p", type=float, default=0.10, help="baseline persona: stereotyped?p=P")
    parser.add_argument("--worse-by", type=float, default=0.03, help="the candidate's true diff_bias_amb excess")
    args = parser.parse_args()

    start = time.perf_counter()
    prepared = PreparedSuite.of(load_suite(args.suite))
    settings = settings_from(simulated_results(prepared, "fair", resamples=0))
    print(
        f"suite {prepared.suite.name}: {len(prepared.suite.cases)} cases; rules "
        + ", ".join(r.describe() for r in settings.rules.values())
        + f"; alpha {settings.alpha}, {settings.n_boot} resamples; loaded in {time.perf_counter() - start:.1f} s"
    )
    experiments = {
        "false regression (self vs self)": (
            [(f"stereotyped?p={args.p}&seed={2 * r}", f"stereotyped?p={args.p}&seed={2 * r + 1}") for r in range(args.repetitions)],
            None,
        ),
        f"power (diff_bias_amb +{args.worse_by})": (
            [
                (f"stereotyped?p={args.p}&seed={2 * r}", f"stereotyped?p={round(args.p + args.worse_by, 6)}&seed={2 * r + 1}")
                for r in range(args.repetitions)
            ],
            "diff_bias_amb (overall)",
        ),
    }
    for label, (pairs, watch) in experiments.items():
        start = time.perf_counter()
        measured = rates(prepared, pairs, settings, watch=watch)
        share = measured["watched_regressed"] if watch else measured["any_regressed"]
        lo, hi = wilson(share, len(pairs))
        extra = f"; any check regressed in {measured['any_regressed']:.1%}" if watch else ""
        print(f"{label}: {share:.1%} of {len(pairs)} repetitions (95% CI {lo:.1%}-{hi:.1%}){extra}; {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
