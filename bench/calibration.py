"""Calibration table of the regression gate, by simulation, for the shipped suites.

    BIASCHECK_DATA_DIR=../shared/datasets python bench/calibration.py --repetitions 200 --jobs 2 \\
        --json calibration.json

For each suite, with the rules, alpha and resamples the suite ships (``settings_from`` its results),
every repetition r draws a baseline and candidates exactly as the simulated server would
(:mod:`biascheck.sim.calibration`; seeds 2r and 2r + 1, so the two sides share no random numbers)
and runs the real :func:`~biascheck.evaluation.regression.compare`:

- **false alarms**: the base persona against itself under the other seed. FWER is the share of
  repetitions in which any check of the comparison is ``regressed`` (target: at most 5%), with its
  95% Wilson interval. The base persona is ``stereotyped?p=0.1`` with 2% of its replies filtered
  (``fail_rate=0.02&faults=filter``), so every gated metric scatters between seeds: ``fair``
  answers every case deterministically, and two seeds of it are the same run.
- **power**: the base persona against a candidate whose true worsening of a metric is twice that
  metric's margin in every scope it is checked in (at least twice: where scopes differ, the
  least-worsened scope gets exactly twice). The share of repetitions in which each check of that
  metric is ``regressed`` is its power (target: at least 80%). Where power stays below 80%, the
  table gives the size needed: the median over repetitions of the comparison's own
  ``cases_to_resolve`` for the check, as a multiple of the cases the check has now.

The candidates are worked out analytically (:func:`biascheck.sim.calibration.expected_counts`,
from the personas' documented answer distributions) and solved numerically per metric
(:func:`~biascheck.sim.calibration.plan_experiments`). ``stereotyped?p=P`` answers the biased
option with probability P and the fair one otherwise, so where disambiguated contexts are half
biased, half counter-biased (KoBBQ, BBQ, EsBBQ, CaBBQ) ``diff_bias_amb = diff_bias_dis = P`` and
``acc_dis = 1 - P/2``; CBBQ's disambiguated contexts are all counter-biased, so there
``s_amb = s_dis = s_total = P`` and ``acc_dis = 1 - P``; ``fail_rate=F`` makes ``ooc_ratio = F``
and leaves the rest. With KoBBQ's margins the candidates are P + 0.02 (the diff-biases), P + 0.08
(``acc_dis``) and F + 0.04 (``ooc_ratio``). Metrics that need the same P share an experiment, and
the ``ooc_ratio`` worsening rides on the first one (filtering moves no other metric). Where scopes
are unbalanced (BBQ's categories) the least-worsened scope gets twice the margin, the others a
little more; the table's JSON has each check's true worsening beside the mean worsening the
comparisons measured.

Checks with margin 0 (a gated metric the suite gives no margin: GG-BBQ's, BBQ's
``bias_score_dis``) have no "twice the margin": their power is not measured (n/a).
HBB (the default suite, sampled) is simulated as its runs are: k = 10 samples per filled question at
the suite's temperature, each answering a with the persona's P_a; ``stereotyped?p=P`` moves P_a of
each category's marked and favoured identities, so ``hbb_flagged_rate`` rises with P, most where
those identities make up more of the instances (the table's JSON has each category's true
worsening), and ``unscorable_ratio`` (an instance whose question had all k samples filtered) needs
F near 0.68, its own experiment, as that much filtering also moves the flagged rate. ``hbb-full``
is left out for its cost (see the table), the BBG suites because their runs are stories judged by a
second model, which :mod:`biascheck.sim.calibration` does not draw.

Prints the Markdown table (pasted in docs/baselines.md), the per-check details with ``--details``, and
writes everything to ``--json``. ``--jobs N`` runs repetitions in N processes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any

from biascheck.evaluation.regression import CompareSettings, settings_from
from biascheck.sim.calibration import (
    FALSE_ALARMS,
    Experiment,
    PreparedSuite,
    plan_experiments,
    run_repetitions,
    stereotyped,
    summarise,
)
from biascheck.suite import load_suite

ROOT = Path(__file__).resolve().parent.parent
SUITES = (
    "kobbq",
    "kobbq-quick",
    "bbq",
    "bbq-quick",
    "esbbq",
    "esbbq-quick",
    "cabbq",
    "cabbq-quick",
    "cbbq",
    "cbbq-quick",
    "gg-bbq",
    "gg-bbq-quick",
    "hbb",
)
NOT_SIMULATED = {
    "hbb-full": "77,350 questions x 10 samples, 103k instances: about 20 s per comparison, 3 h for the cell",
    "enbbg": "BBG: stories written by the model and read by a judge model; not drawn in-process",
    "enbbg-quick": "BBG: as enbbg",
    "kobbg": "BBG: as enbbg",
    "kobbg-quick": "BBG: as enbbg",
    # MBBQ's files are in no mirror (its repository states no licence): the bench has nothing to draw.
    **{
        f"mbbq-{language}{kind}": "MBBQ: never mirrored (no licence), so not in the data this bench reads"
        for language in ("en", "nl", "es", "tr")
        for kind in ("", "-quick", "-control", "-control-quick")
    },
}
BASE_P, BASE_FILTER = 0.1, 0.02

_CACHE: dict[str, tuple[PreparedSuite, CompareSettings]] = {}


def prepared_suite(name: str) -> tuple[PreparedSuite, CompareSettings]:
    """A suite folder under suites/, prepared once per process, and the settings it ships."""
    if name not in _CACHE:
        prepared = PreparedSuite.of(load_suite(ROOT / "suites" / name))
        _CACHE[name] = (prepared, settings_from(prepared.template))
    return _CACHE[name]


def task(name: str, experiments: Sequence[Experiment], reps: Sequence[int], base_p: float, base_f: float):
    """Some repetitions of one suite (what a process of the pool runs)."""
    prepared, settings = prepared_suite(name)
    return run_repetitions(prepared, settings, experiments, reps, base_p, base_f)


def _round(x: float) -> int:
    """Two significant digits: an estimate's precision."""
    digits = max(0, len(str(int(x))) - 2)
    return int(round(x, -digits))


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%" if x >= 0.995 or x < 0.005 or round(100 * x) == 100 * x else f"{100 * x:.1f}%"


def markdown(summaries: Sequence[dict[str, Any]], not_covered: dict[str, str]) -> str:
    lines = [
        "| suite | cases | checks | FWER (95% CI) | power at 2× margin: lowest, checks ≥ 80% | size for 80% on every check (× now) |",
        "| --- | ---: | ---: | --- | --- | --- |",
    ]
    for s in summaries:
        lo, hi = s["fwer_ci"]
        powers, needs = [], []
        for metric, m in s["metrics"].items():
            if m.get("lever") is None:
                powers.append(f"{metric} n/a (margin 0)")
                continue
            powers.append(f"{metric} {_pct(m['min_power'])}, {m['reaching']}/{len(m['checks'])}")
            if m["reaching"] < len(m["checks"]):
                if m["times_needed_max"] is not None:
                    needs.append(f"{metric} ×{m['times_needed_max']:,.1f} (~{_round(m['times_needed_max'] * s['cases']):,} cases)")
                else:
                    needs.append(f"{metric}: no estimate")
        lines.append(
            f"| {s['suite']} | {s['cases']:,} | {s['checks']} | {_pct(s['fwer'])} ({_pct(lo)}–{_pct(hi)}) | "
            + "; ".join(powers)
            + " | "
            + ("; ".join(needs) or "none")
            + " |"
        )
    for name, why in not_covered.items():
        lines.append(f"| {name} | | | not simulated | {why} | |")
    return "\n".join(lines)


def details(summary: dict[str, Any]) -> str:
    lines = [
        f"\n### {summary['suite']}: per check",
        "",
        "| check | margin | true / realised worsening | power | cases | cases to resolve (median) |",
        "| --- | ---: | --- | ---: | ---: | ---: |",
    ]
    for metric, m in summary["metrics"].items():
        for scope, c in m["checks"].items():
            true = c["true_worsening"]
            real = c["realised_worsening"]
            resolve = f"{c['cases_to_resolve']:,.0f} (×{c['times_needed']:.1f})" if c["times_needed"] else ""
            lines.append(
                f"| {metric} ({scope}) | {m['margin']:g} | {true:+.4f} / {real:+.4f} | {_pct(c['power'])} | {c['cases'] or ''} | {resolve} |"
                if true is not None and real is not None
                else f"| {metric} ({scope}) | {m['margin']:g} | | {_pct(c['power'])} | {c['cases'] or ''} | {resolve} |"
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suites", default=",".join(SUITES), help="comma-separated suite folders under suites/ (default: every suite it simulates)")
    parser.add_argument("--repetitions", type=int, default=200)
    parser.add_argument("--jobs", type=int, default=1, help="processes running repetitions")
    parser.add_argument("--chunk", type=int, default=25, help="repetitions per task")
    parser.add_argument("--base-p", type=float, default=BASE_P, help="the base persona: stereotyped?p=P")
    parser.add_argument("--base-filter", type=float, default=BASE_FILTER, help="the base persona's share of filtered replies")
    parser.add_argument("--json", type=Path, help="write the table and every check's figures here")
    parser.add_argument(
        "--update", action="store_true", help="with --json: keep the file's other suites, replace those measured now, and redo the table"
    )
    parser.add_argument("--details", action="store_true", help="also print every check's power and size needed")
    args = parser.parse_args(argv)
    asked = [n.strip() for n in args.suites.split(",") if n.strip()]
    names = [n for n in asked if n not in NOT_SIMULATED]
    # The whole table names every shipped suite it leaves out, and why.
    not_covered = dict(NOT_SIMULATED) if args.suites == ",".join(SUITES) else {n: NOT_SIMULATED[n] for n in asked if n in NOT_SIMULATED}

    started = time.perf_counter()
    plans: dict[str, tuple[list[Experiment], dict[str, Any]]] = {}
    planned: dict[str, float] = {}
    for name in names:
        t = time.perf_counter()
        prepared, settings = prepared_suite(name)
        plans[name] = plan_experiments(prepared, settings, args.base_p, args.base_filter)
        planned[name] = time.perf_counter() - t
        print(
            f"{name}: {len(prepared.suite.cases):,} cases, {len(plans[name][0])} experiments planned in {time.perf_counter() - t:.1f} s",
            file=sys.stderr,
            flush=True,
        )
    tasks = [
        (name, list(range(start, min(start + args.chunk, args.repetitions)))) for name in names for start in range(0, args.repetitions, args.chunk)
    ]
    rows: dict[str, dict[str, list]] = {n: {e.name: [] for e in plans[n][0]} for n in names}
    seconds: dict[str, list[float]] = {n: [] for n in names}

    def take(name: str, done) -> None:
        for experiment, found in done[0].items():
            rows[name][experiment] += found
        seconds[name] += done[1]
        print(f"  {name}: {len(seconds[name])} repetitions, {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)

    if args.jobs > 1:
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            futures = [(name, pool.submit(task, name, plans[name][0], reps, args.base_p, args.base_filter)) for name, reps in tasks]
            for name, future in futures:
                take(name, future.result())
    else:
        for name, reps in tasks:
            take(name, task(name, plans[name][0], reps, args.base_p, args.base_filter))

    summaries = []
    for name in names:
        prepared, settings = prepared_suite(name)
        experiments, info = plans[name]
        per_rep = statistics.fmean(seconds[name])
        summaries.append(
            {
                "suite": name,
                "cases": len(prepared.suite.cases),
                "settings": {"alpha": settings.alpha, "n_boot": settings.n_boot, "rules": {m: r.describe() for m, r in settings.rules.items()}},
                **summarise(experiments, info, rows[name]),
                "experiments": [asdict(e) for e in experiments],
                "seconds_per_repetition": per_rep,
                "seconds_per_comparison": per_rep / len(experiments),
                "seconds_planning": planned[name],
                "seconds_total": planned[name] + sum(seconds[name]),
            }
        )
        print(f"{name}: {per_rep:.2f} s per repetition ({len(experiments)} comparisons, {per_rep / len(experiments):.2f} s each)", file=sys.stderr)
    wall = time.perf_counter() - started
    base = stereotyped(args.base_p, args.base_filter)
    runs = [{"suites": names, "wall_seconds": wall, "jobs": args.jobs, "cpu_count": os.cpu_count()}] if names else []
    if args.update and args.json and args.json.exists():
        earlier = json.loads(args.json.read_text("utf-8"))
        if (earlier["repetitions"], earlier["base_persona"]) != (args.repetitions, base):
            raise SystemExit(f"{args.json} has {earlier['repetitions']} repetitions of {earlier['base_persona']}: not the same table")
        kept = [s for s in earlier["suites"] if s["suite"] not in names]
        order = {name: i for i, name in enumerate((*SUITES, *NOT_SIMULATED))}
        summaries = sorted(kept + summaries, key=lambda s: order.get(s["suite"], len(order)))
        # A suite left out says why in this code's words (the reasons change as the bench does).
        left_out = {**earlier["not_covered"], **not_covered}
        not_covered = {n: NOT_SIMULATED.get(n, left_out[n]) for n in sorted(left_out, key=lambda n: order.get(n, len(order))) if n not in names}
        runs = earlier["runs"] + runs
    table = markdown(summaries, not_covered)
    print(table)
    print(f"\n{args.repetitions} repetitions per cell; base persona {base}; {wall / 60:.1f} min wall with {args.jobs} process(es)")
    if args.details:
        for summary in summaries:
            print(details(summary))
    if args.json:
        document = {
            "repetitions": args.repetitions,
            "base_persona": base,
            "false_alarm_experiment": FALSE_ALARMS,
            "runs": runs,
            "markdown": table,
            "suites": summaries,
            "not_covered": not_covered,
        }
        args.json.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
