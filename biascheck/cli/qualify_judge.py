"""``biascheck qualify-judge MODEL --suite DIR``: is an evaluator fit to read BBG stories? Its
accuracy and diff-bias on a QA suite's disambiguated items; exit 1 when it falls short."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from biascheck.cli.common import add_cache, add_concurrency, add_data, add_param, in_a_folder, spelling_of
from biascheck.core.bounds import argument
from biascheck.core.errors import BiascheckError

MODEL = "biascheck qualify-judge MODEL"


def add_parser(commands: Any) -> None:
    qualify = commands.add_parser(
        "qualify-judge",
        help="check an evaluator model on the disambiguated items of a QA suite (exit 1 when below the bounds)",
        description="Run a candidate judge of a judged benchmark on the disambiguated items of a QA suite, where the context "
        "states the answer, and report its accuracy and diff-bias.",
    )
    qualify.add_argument("model", help="litellm model string of the judge, or sim/<persona>")
    qualify.add_argument("--suite", default=None, help="QA suite folder or packaged name (default: the judged benchmark's own choice)")
    qualify.add_argument("--benchmark", default=None, help="the judged benchmark whose judge this is (default: the one registered)")
    qualify.add_argument(
        "--cases", type=argument("cases", "--cases"), default=None, help="a seeded subset of about this many items, whole templates (default: all)"
    )
    qualify.add_argument("--seed", type=argument("seed", "--seed"), default=0, help="seed of that subset")
    qualify.add_argument("--min-accuracy", type=argument("accuracy", "--min-accuracy"), default=0.95, help="warn below this accuracy (default 0.95)")
    qualify.add_argument(
        "--max-abs-diff-bias", type=argument("abs_diff_bias", "--max-abs-diff-bias"), default=0.02, help="warn above this |diff-bias| (default 0.02)"
    )
    add_param(qualify, ["temperature=0", "seed=42"], "the judge's sampling parameters (default temperature=0 seed=42, as in the paper)")
    qualify.add_argument("--api-base", default=None, help="API base URL (vLLM, Ollama, a proxy)")
    add_data(qualify)
    add_cache(qualify)
    add_concurrency(qualify)
    qualify.add_argument("--json", type=Path, help="also write the qualification as JSON to this file")
    # The judge is the positional MODEL, not a --model.
    qualify.set_defaults(func=_qualify_judge, spelling=spelling_of(qualify, model=MODEL))


def _qualify_judge(args) -> int:
    from biascheck.benchmarks.base import judged_benchmark
    from biascheck.core.files import atomic_write_text
    from biascheck.execution.llm import validate_model_string
    from biascheck.judging.qualification import qualify
    from biascheck.options import model_config
    from biascheck.session import RunConfig, qa_runner

    validate_model_string(args.model, MODEL, api_base=args.api_base)
    if args.json is not None:
        if args.json.is_dir():  # refused before the qualification's calls
            raise BiascheckError("--json", None, f"{args.json} is a folder", "give the path of a file, e.g. --json qualification.json")
        in_a_folder("--json", args.json)  # before the calls, rather than creating folders after them
    judge = model_config(args.model, params=args.param, api_base=args.api_base)
    config = RunConfig(model=judge, store_path=args.cache, data_dir=args.data, concurrency=args.concurrency, model_source=MODEL)
    benchmark = judged_benchmark(args.benchmark, where="biascheck qualify-judge --benchmark")
    suite = args.suite if args.suite is not None else benchmark.qualification_default
    result = qualify(
        judge,
        suite,
        qa_runner(config),
        data_dir=args.data,
        cases=args.cases,
        seed=args.seed,
        min_accuracy=args.min_accuracy,
        max_abs_diff_bias=args.max_abs_diff_bias,
    )
    print(result.summary)
    for warning in result.warnings:
        print(f"WARNING: {warning}")
    print("qualified" if result.qualified else "NOT qualified")
    if args.json:
        atomic_write_text(args.json, json.dumps(result.to_dict(), ensure_ascii=False, indent=1) + "\n")
    return 0 if result.qualified else 1
