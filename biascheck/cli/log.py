"""``biascheck log RESULTS --to mlflow``: send a run that was made already (its report folder, or a
results.json) to experiment trackers, as ``--biascheck-log`` sends a run once its files are
written (:func:`biascheck.orchestration.log_to_trackers`): for a tracker that was down then, or a
run made without logging. A run the tracker has already is not logged twice. Exit 0 when every run
is in every tracker, 1 when a tracker could not take one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from biascheck.cli.common import print_notices, spelling_of
from biascheck.core import exits
from biascheck.core.errors import BiascheckError
from biascheck.core.spelling import Option


def add_parser(commands: Any) -> None:
    log = commands.add_parser(
        "log",
        help="send a run's results (a report folder or results.json) to MLflow or Weights & Biases, e.g. after the tracker was down",
        description="Send runs that were made already to experiment trackers, with the params, metrics and files --biascheck-log "
        "sends (docs/trackers.md): RESULTS is a report folder (of one suite or several) or a results.json. A run the tracker "
        "holds already is said and skipped, so sending again after a partial failure logs nothing twice. Exit 0 when every run "
        "is in every tracker, 1 when a tracker could not be reached or refused, 2 on a usage error.",
    )
    log.add_argument("results", nargs="+", metavar="RESULTS", help="a report folder or a results.json")
    log.add_argument("--to", action="append", required=True, metavar="TRACKER", help="mlflow or wandb; give it twice for both")
    log.add_argument(
        "--experiment", default=None, help="the MLflow experiment or W&B project (default: MLFLOW_EXPERIMENT_NAME or WANDB_PROJECT, else biascheck)"
    )
    log.add_argument("--run-name", default=None, help="the run name template ({suite} {model} {revision} {answer_mode} ...; default {suite}-{model})")
    log.set_defaults(func=_log, spelling=spelling_of(log, log="--to", **{"log-experiment": "--experiment", "log-run-name": "--run-name"}))


def _log(args) -> int:
    from biascheck.loggers import log_options
    from biascheck.orchestration import Level, log_to_trackers

    options = log_options(
        args.to, Option("log"), required=True, experiment=args.experiment, run_name=args.run_name, name_where=Option("log-run-name")
    )
    loaded = [_loaded(Path(text)) for text in args.results]  # every one read before any is sent
    failed = False
    for folder, checked in loaded:
        notices = log_to_trackers(checked, folder, options)
        print_notices(notice.text for notice in notices)
        failed = failed or any(notice.level is Level.ERROR for notice in notices)
    return exits.FAILED if failed else exits.PASSED


def _loaded(path: Path):
    """(the report folder, the run's records) of a report folder or a results.json."""
    from biascheck.api import load_comparison, read_run, suite_folders
    from biascheck.orchestration import Checked

    if path.is_file() and path.name != "results.json":
        raise BiascheckError(path, None, "is not a results.json", "give a report folder or the results.json in it")
    if path.is_dir() and not (path / "results.json").exists():
        names = suite_folders(path)
        if not names:
            raise BiascheckError(path, None, "holds no results.json, nor do its subfolders", "give a report folder or a results.json")
        folders = [path / name for name in names]
    else:
        folders = [path if path.is_dir() else path.parent]
    runs = [read_run(folder / "results.json")[1] for folder in folders]
    comparisons = {run.suite.name: load_comparison(folder) for run, folder in zip(runs, folders) if (folder / "comparison.json").is_file()}
    return path if path.is_dir() else path.parent, Checked(runs, comparisons)
