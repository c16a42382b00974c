"""``biascheck suites [SUITE ...]``: the packaged suites and local ones, with their cases and model
calls; with ``--model M``, the calls the response store does not answer and their cost in USD."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from biascheck.cli.common import add_data, add_param, listed_suites, spelling_of
from biascheck.core.spelling import Option


def add_parser(commands: Any) -> None:
    suites = commands.add_parser(
        "suites",
        help="list the packaged and local suites with their cases and model calls (with --model: and cost)",
        description="List the suites shipped with biascheck and those under ./suites (or the named ones): benchmark, cases and "
        "the model calls of a whole run. With --model, the calls the response store (--cache) does not answer, their "
        "tokens and cost in USD. Counting reads the benchmark files from --data, BIASCHECK_DATA_DIR or the download "
        "cache; nothing is downloaded and no model is called.",
    )
    suites.add_argument(
        "suites",
        nargs="*",
        metavar="SUITE",
        help="packaged suite names, suite folders or folders of them (default: every packaged suite and ./suites/*)",
    )
    add_data(suites)
    suites.add_argument("--model", help="price a run of each suite with this litellm model string (sim/<persona> is free)")
    suites.add_argument("--api-base", default=None, help="the model's API base URL (part of the store keys)")
    add_param(suites, [], "override a sampling parameter, as --biascheck-param (max_tokens bounds the output tokens)")
    suites.add_argument("--price", metavar="IN/OUT", help="USD per million input/output tokens, for a model litellm has no price for")
    suites.add_argument("--judge-price", metavar="IN/OUT", help="the same for a judged suite's judge")
    suites.add_argument("--cache", type=Path, help="response store: the requests it answers are not counted as calls")
    suites.add_argument(
        "--answer-mode",
        default=None,
        help="count and price the suites answered this way (multiple-choice QA: generate, loglikelihood, first-token; "
        "the hidden-bias P(a): sampling, logprob)",
    )
    suites.set_defaults(func=_suites, spelling=spelling_of(suites))


def _suites(args) -> int:
    from biascheck.config.catalog import packaged_suites_dir
    from biascheck.dryrun import existing_store, render, table
    from biascheck.listing import count_suite

    existing_store(args.cache)  # refused once, not read as no store, nor as a note on every suite
    config = _suites_run_config(args)
    priced = args.model is not None
    rows, estimates, notes = [["suite", "where", "benchmark", "cases", "model calls"]], [], []
    for label, where, path in listed_suites(args.suites):
        counted = count_suite(path, config, data_dir=args.data, nowhere=_nowhere(args), price=priced)
        if counted.problem:
            notes.append(f"{label}: {counted.problem}")
        if counted.estimate is not None:
            counted.estimate.name = label
            estimates.append(counted.estimate)
        cases = f"{counted.cases:,}" if counted.cases is not None else "-"
        if counted.cases is None and counted.problem and (declared := _declared_cases(path)) is not None:
            cases = f"{declared:,}*"
            notes[-1] = notes[-1].replace(": no counts: ", ": ", 1) + f"; * counted from the rows its manifest declares ({declared:,} cases)"
        rows.append([label, where, counted.benchmark, cases, _calls_cell(counted)])
    lines = table(rows, right=(3,)) if not priced else render(estimates).splitlines()
    print("\n".join(lines + [f"  {note}" for note in notes]))
    print(f"packaged suites: {packaged_suites_dir()}; run one with: pytest --biascheck-suite NAME --biascheck-model MODEL")
    return 0


def _suites_run_config(args):
    """The run ``biascheck suites`` counts (and, with --model, prices)."""
    from biascheck.judging.panel import JudgeOptions
    from biascheck.options import answer_mode_option, model_config, parse_price
    from biascheck.session import RunConfig

    model = args.model or "sim/fair"  # without --model only the counts are shown, and they depend on no model
    return RunConfig(
        estimator=answer_mode_option(args.answer_mode),
        model=model_config(model, params=args.param, api_base=args.api_base, price=args.price),
        store_path=args.cache,
        data_dir=args.data,
        judges=JudgeOptions(price=parse_price(args.judge_price, Option("judge-price"))),
    )


def _declared_cases(path: Path) -> int | None:
    """The cases a suite's manifest declares, for a suite whose files are not here (see
    ``Benchmark.declared_cases``); None when it does not say."""
    from biascheck.benchmarks.base import get_benchmark
    from biascheck.config.manifest import load_manifest

    manifest = load_manifest(path)
    try:
        return get_benchmark(manifest.benchmark).declared_cases(manifest)
    except KeyError:
        return None


def _nowhere(args) -> str:
    from biascheck.suite import env_data_dir

    mirror = args.data or env_data_dir()
    where = f"in the mirror {mirror}" if mirror else "in a mirror (none given)"
    return f"neither {where} nor in the download cache; pass --data DIR (or set BIASCHECK_DATA_DIR), or run the suite once to download its files"


def _calls_cell(counted) -> str:
    if counted.model_calls is None:
        return "-"
    judges = [f"{'≤' if j.uncertain else ''}{j.calls:,} judge" for j in counted.judge_calls]
    return " + ".join([f"{counted.model_calls:,}"] + judges)
