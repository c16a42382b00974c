"""HBB estimators against the simulated model: calls, wall time, agreement; and memory at full size.

    BIASCHECK_DATA_DIR=../shared/datasets python bench/hbb.py [--persona "stereotyped?p=0.5"]
    BIASCHECK_DATA_DIR=../shared/datasets python bench/hbb.py --full-memory

Default: the default suite (suites/hbb, 60 questions, 4,020 instances) with ``sampling`` (k = 10)
and with ``logprob``, each from a cold store: model calls, wall time, flagged rate, and how far the
two estimators' flagged sets agree (agreement, Cohen's kappa), plus the agreement of each with the
persona's known truth. The simulator honours temperature as a softmax does, so sampling at the
suite's 0.8 estimates the sharpened P(a) while the logprob estimator reads P(a) at temperature 1,
as with a real model: each is compared with the truth at its own temperature and at the paper's.

``--full-memory``: the full suite (suites/hbb-full, 103,649 instances) with ``logprob`` (77,350
calls) into a store, then, in a fresh process, building and scoring it again from that warm
store, reporting wall time and peak resident memory of that process.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_suite(suite_dir: Path, persona: str, estimator: str, store: Path):
    from biascheck.execution.llm import ModelConfig
    from biascheck.session import RunConfig, run
    from biascheck.suite import load_suite

    suite = load_suite(suite_dir)
    config = RunConfig(model=ModelConfig(model=f"sim/{persona}"), store_path=store, concurrency=64, estimator=estimator)
    start = time.perf_counter()
    result = run([(suite, suite.cases)], config)
    return suite, result, time.perf_counter() - start


def flagged(suite, result) -> list[bool | None]:
    import numpy as np

    from biascheck.benchmarks.hbb.benchmark import HBB, hbb_settings
    from biascheck.benchmarks.hbb.metrics import instance_scores

    outcomes = result.suites[0].outcomes
    threshold = hbb_settings(suite.manifest)["flag_threshold"]
    out = []
    for _, first, second in HBB.instances(suite.cases):
        a, b = outcomes[first.case_id].p_a, outcomes[second.case_id].p_a
        out.append(None if a is None or b is None else bool(instance_scores(np.array([a]), np.array([b]))[0] >= threshold))
    return out


def truth(suite, persona: str, temperature: float) -> list[bool]:
    """Which instances the persona's exact P(a) at ``temperature`` flags."""
    from biascheck.benchmarks.hbb.benchmark import HBB, hbb_settings
    from biascheck.sim.personas import expected_p_a

    threshold = hbb_settings(suite.manifest)["flag_threshold"]
    return [
        round(abs(expected_p_a(persona, f, temperature) - expected_p_a(persona, s, temperature)) * 100, 10) >= threshold
        for _, f, s in HBB.instances(suite.cases)
    ]


def agreement(x: list, y: list) -> tuple[float, float, int]:
    """(share of instances both flag alike, Cohen's kappa, n) over the instances both scored."""
    pairs = [(a, b) for a, b in zip(x, y) if a is not None and b is not None]
    n = len(pairs)
    if not n:
        return float("nan"), float("nan"), 0
    observed = sum(a == b for a, b in pairs) / n
    px, py = sum(a for a, _ in pairs) / n, sum(b for _, b in pairs) / n
    chance = px * py + (1 - px) * (1 - py)
    kappa = (observed - chance) / (1 - chance) if chance < 1 else 1.0
    return observed, kappa, n


def compare_estimators(persona: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        measured = {}
        for estimator in ("sampling", "logprob"):
            suite, result, seconds = run_suite(ROOT / "suites" / "hbb", persona, estimator, Path(tmp) / f"{estimator}.sqlite")
            metrics = result.suites[0].metrics.overall
            measured[estimator] = flagged(suite, result)
            print(
                f"{estimator:8s}: {result.stats.calls} calls for {len(suite.cases)} questions, {seconds:.1f} s; "
                f"flagged rate {metrics['hbb_flagged_rate'].value:.4f} {tuple(round(v, 4) for v in metrics['hbb_flagged_rate'].ci)}, "
                f"mean score {metrics['hbb_mean_score'].value:.2f}"
            )
        from biascheck.benchmarks.hbb.benchmark import LOGPROB_PARAMS

        sampled_at = suite.manifest.sampling.get("temperature", 1.0)
        read_at = LOGPROB_PARAMS["temperature"]
        share, kappa, _ = agreement(measured["sampling"], measured["logprob"])
        print(
            f"flagged sets, sampling (T = {sampled_at:g}) vs logprob (T = {read_at:g}): agree on {share:.1%} of "
            f"{len(measured['logprob'])} instances, Cohen's kappa {kappa:.3f}"
        )
        for estimator, own in (("sampling", sampled_at), ("logprob", read_at)):
            for temperature in dict.fromkeys((own, sampled_at)):
                share, kappa, _ = agreement(measured[estimator], truth(suite, persona, temperature))
                print(f"flagged sets, {estimator} vs the persona's truth at T = {temperature:g}: agree on {share:.1%}, kappa {kappa:.3f}")


def warm_pass(store: str) -> None:
    """In a fresh process: build and score the full suite from the warm store; print JSON."""
    suite, result, seconds = run_suite(ROOT / "suites" / "hbb-full", "stereotyped?p=0.5", "logprob", Path(store))
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        json.dumps(
            {
                "seconds": seconds,
                "calls": result.stats.calls,
                "cache_hits": result.stats.cache_hits,
                "instances": result.suites[0].metrics.counts["n_instances"],
                "peak_rss_mib": peak_mib,
            }
        )
    )


def full_memory() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "full.sqlite"
        _, result, seconds = run_suite(ROOT / "suites" / "hbb-full", "stereotyped?p=0.5", "logprob", store)
        print(f"cold full suite (logprob): {result.stats.calls} calls in {seconds:.0f} s")
        out = subprocess.run([sys.executable, __file__, "--warm-pass", str(store)], capture_output=True, text=True, check=True)
        figures = json.loads(out.stdout.strip().splitlines()[-1])
        print(
            f"warm full suite: {figures['instances']} instances, {figures['calls']} calls, {figures['cache_hits']} cache hits, "
            f"{figures['seconds']:.1f} s, peak RSS {figures['peak_rss_mib']:.0f} MiB"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--persona", default="stereotyped?p=0.5")
    parser.add_argument("--full-memory", action="store_true")
    parser.add_argument("--warm-pass", metavar="STORE", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.warm_pass:
        warm_pass(args.warm_pass)
    elif args.full_memory:
        full_memory()
    else:
        compare_estimators(args.persona)


if __name__ == "__main__":
    main()
