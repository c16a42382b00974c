"""MLflow: each suite's run as an MLflow run (params, metrics, tags, files), the suites of a run of
several as the nested runs of one parent (MLflow's ``mlflow.parentRunId`` tag), through MLflow's own
client (``mlflow.MlflowClient``: ``pytest-biascheck[mlflow]``), at the tracking URI MLflow reads
(``MLFLOW_TRACKING_URI``; its credentials from MLflow's own variables, never written anywhere).

A run already in the experiment (its ``biascheck.run_id`` tag, finished) is not logged again; one
left unfinished (a send cut short) is deleted and logged anew. Requests are bounded: MLflow's
client would otherwise retry an unreachable server for minutes."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Sequence
from typing import Any

from biascheck.execution.redaction import redact, redact_url
from biascheck.loggers import DEFAULT_EXPERIMENT, LogOptions, TrackerError
from biascheck.loggers.tracked import TrackedRun

# MLflow's variables, set for biascheck's requests when the user has not: one retry, soon, and a
# bounded wait for an answer (MLflow's defaults: 7 retries with a backoff factor of 2, 120 s each).
REQUEST_BOUNDS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1", "MLFLOW_HTTP_REQUEST_TIMEOUT": "20"}
# MLflow's limits on one log_batch call (tags go with create_run).
BATCH_METRICS, BATCH_PARAMS = 1000, 100


def send(parent: TrackedRun | None, runs: Sequence[TrackedRun], options: LogOptions) -> list[str]:
    import mlflow

    with _bounded_requests():
        uri = redact_url(mlflow.get_tracking_uri())
        try:
            client = mlflow.MlflowClient()
            name = options.experiment or os.environ.get("MLFLOW_EXPERIMENT_NAME") or DEFAULT_EXPERIMENT
            experiment = _experiment(client, name)
            lines = []
            parent_id, parent_done = None, True
            if parent is not None:
                found = _found(client, experiment, parent.key)
                parent_done = found is not None and _finished(found)
                parent_id = found.info.run_id if found is not None else _create(client, experiment, parent, None)
            for run in runs:
                found = _found(client, experiment, run.key)
                if found is not None and _finished(found):
                    lines.append(f"mlflow: {run.name} is in experiment {name!r} already (run {found.info.run_id}): not logged again")
                    continue
                if found is not None:  # a send cut short: its run is partial
                    client.delete_run(found.info.run_id)
                run_id = _create(client, experiment, run, parent_id)
                _fill(client, run_id, run)
                lines.append(f"mlflow: logged {run.name} to experiment {name!r} at {uri} (run {run_id})")
            if parent is not None and parent_id is not None and not parent_done:
                # Last: a parent finished holds every suite (a send cut short leaves it unfinished).
                _fill(client, parent_id, parent)
            return lines
        except TrackerError:
            raise
        except Exception as exc:  # the client's, requests', the server's: any of them, in one line
            raise TrackerError(f"{uri}: {_reason(exc)}") from None


@contextlib.contextmanager
def _bounded_requests() -> Iterator[None]:
    added = {key: value for key, value in REQUEST_BOUNDS.items() if key not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for key in added:
            os.environ.pop(key, None)


def _experiment(client: Any, name: str) -> str:
    experiment = client.get_experiment_by_name(name)
    if experiment is None:
        return client.create_experiment(name)
    if experiment.lifecycle_stage != "active":
        raise TrackerError(f"the experiment {name!r} is deleted; restore it, or name another with the log-experiment option")
    return experiment.experiment_id


def _found(client: Any, experiment: str, key: str) -> Any:
    """The run of ``experiment`` tagged with this biascheck run's key, or None."""
    found = client.search_runs([experiment], filter_string=f"tags.`biascheck.run_id` = '{key}'", max_results=1)
    return found[0] if found else None


def _finished(run: Any) -> bool:
    return run.info.status == "FINISHED"


def _create(client: Any, experiment: str, run: TrackedRun, parent_id: str | None) -> str:
    tags = dict(run.tags) | ({"mlflow.parentRunId": parent_id} if parent_id else {})
    return client.create_run(experiment, tags=tags, run_name=run.name).info.run_id


def _fill(client: Any, run_id: str, run: TrackedRun) -> None:
    """The run's params, metrics and files, then finished (until then it is partial: see send)."""
    from mlflow.entities import Metric, Param

    timestamp = int(time.time() * 1000)
    metrics = [Metric(key, value, timestamp, 0) for key, value in run.metrics.items()]
    for start in range(0, len(metrics), BATCH_METRICS):
        client.log_batch(run_id, metrics=metrics[start : start + BATCH_METRICS])
    pairs = [Param(key, value) for key, value in run.params.items()]
    for start in range(0, len(pairs), BATCH_PARAMS):
        client.log_batch(run_id, params=pairs[start : start + BATCH_PARAMS])
    for path in run.artifacts:
        client.log_artifact(run_id, str(path))
    client.set_terminated(run_id, "FINISHED")


def _reason(exc: BaseException) -> str:
    """What went wrong, in a few words: a refused connection, a timeout, the server's status, or
    the first line of the client's message (credentials removed)."""
    text = str(exc) or type(exc).__name__
    for phrase, said in (
        ("Connection refused", "connection refused"),
        ("Read timed out", "no answer in time"),
        ("timed out", "no answer in time"),
        ("Name or service not known", "unknown host"),
        ("Failed to resolve", "unknown host"),
    ):
        if phrase in text:
            return said
    status = getattr(getattr(exc, "response", None), "status_code", None) or getattr(exc, "error_code", None)
    first = redact(text.strip().splitlines()[0] if text.strip() else text)
    first = first if len(first) <= 240 else first[:240] + " ..."
    return f"{status}: {first}" if status and str(status) not in first else first
