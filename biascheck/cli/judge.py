"""``biascheck judge export SUITE --run RESULTS --out FILE`` and ``biascheck judge fit LABELLED
--out FILE``: a judged benchmark's judge, a calibration set to label and the calibration it gives."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from biascheck.api import RESULTS_FIX, read_run
from biascheck.cli.common import add_benchmark, add_data, in_a_folder, spelling_of
from biascheck.core.bounds import argument
from biascheck.core.errors import BiascheckError


def add_parser(commands: Any) -> None:
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
    add_data(export)
    add_benchmark(export)
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
    export.set_defaults(func=_judge_export, spelling=spelling_of(export))
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
    add_benchmark(fit)
    fit.set_defaults(func=_judge_fit, spelling=spelling_of(fit))


def _judge_export(args) -> int:
    from biascheck.benchmarks.base import judged_benchmark
    from biascheck.config.catalog import suite_folder
    from biascheck.core.files import atomic_write_text
    from biascheck.suite import load_suite

    benchmark = judged_benchmark(args.benchmark, where="biascheck judge export --benchmark")
    in_a_folder("--out", args.out)
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
    in_a_folder("--out", args.out)
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
