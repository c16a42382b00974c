"""BBG default suites against the simulated model: calls per stage, cold and cached wall time.

    BIASCHECK_DATA_DIR=../shared/datasets python bench/bbg.py [--persona "stereotyped?p=0.3"] [--judge judge] [--unscorable unknown]

For each default suite (suites/kobbg, suites/enbbg: the paper's five runs), from a cold store and
then again from the warm one: generation calls, judge calls, wall time, and ntr_gen / bias_gen
against the persona's exact expectation (``expected_pair_distribution``, averaged over pairs).
The timings go through the library (``biascheck.session.run``), litellm's real HTTP path and the
sim server; a ``pytest --biascheck`` run adds about two seconds of start-up.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def expected(suite, persona: str) -> tuple[float, float]:
    from biascheck.benchmarks.bbg.benchmark import BBG
    from biascheck.sim.personas import parse_persona
    from biascheck.sim.stories import expected_pair_distribution

    pairs = BBG._pairs(suite.cases)
    mean: dict[str, float] = {}
    for first, second in pairs:
        for kind, p in expected_pair_distribution(parse_persona(persona), first.truth, second.truth).items():
            mean[kind] = mean.get(kind, 0.0) + p / len(pairs)
    ntr = mean.get("uu", 0) + mean.get("bc", 0) + mean.get("cb", 0)
    bias = mean.get("bb", 0) + (mean.get("bu", 0) + mean.get("ub", 0)) / 2 - mean.get("cc", 0) - (mean.get("cu", 0) + mean.get("uc", 0)) / 2
    return ntr, bias


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--persona", default="fair")
    parser.add_argument("--judge", default="judge")
    parser.add_argument("--suites", nargs="+", default=["kobbg", "enbbg"])
    parser.add_argument(
        "--unscorable",
        choices=("exclude", "unknown"),
        default=None,
        help="how pairs without a reading are scored (default: the suite's [bbg] unscorable)",
    )
    args = parser.parse_args()

    from biascheck.execution.llm import ModelConfig
    from biascheck.judging.panel import JudgeOptions
    from biascheck.session import RunConfig, run
    from biascheck.suite import load_suite

    print(f"persona sim/{args.persona}, judge sim/{args.judge}, unscorable {args.unscorable or 'as the suite says'}")
    print(f"{'suite':8} {'store':5} {'cases':>6} {'generation':>10} {'judge':>6} {'seconds':>8} {'ntr_gen':>8} {'bias_gen':>9}  expected")
    for name in args.suites:
        suite = load_suite(ROOT / "suites" / name)
        ntr, bias = expected(suite, args.persona)
        with tempfile.TemporaryDirectory() as tmp:
            config = RunConfig(
                model=ModelConfig(f"sim/{args.persona}"),
                judges=JudgeOptions(models=(f"sim/{args.judge}",), unscorable=args.unscorable),
                store_path=Path(tmp) / "store.sqlite",
                concurrency=64,
            )
            for store in ("cold", "warm"):
                start = time.perf_counter()
                result = run([(suite, suite.cases)], config)
                seconds = time.perf_counter() - start
                overall = result.suites[0].metrics.overall
                judge_calls = result.judge_stats.calls
                print(
                    f"{name:8} {store:5} {len(suite.cases):>6} {result.stats.calls - judge_calls:>10} {judge_calls:>6} "
                    f"{seconds:>8.1f} {overall['ntr_gen'].value:>8.4f} {overall['bias_gen'].value:>+9.4f}  {ntr:.4f} / {bias:+.4f}"
                    f"  (u by convention {overall['u_by_convention_ratio'].value:.4f})"
                )


if __name__ == "__main__":
    main()
