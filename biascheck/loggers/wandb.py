"""Weights & Biases: each suite's run as a W&B run (its params as the run's config, its metrics logged
once, so its summary holds them, its files as an artifact), the suites of a run of several (and the
whole run's parent) in one group, through W&B's own library (``pytest-biascheck[wandb]``), with the
settings W&B reads (``WANDB_MODE``, ``WANDB_DIR``, ``WANDB_ENTITY``; the key from ``WANDB_API_KEY``
or ``wandb login``, never written anywhere).

The W&B run's id is the biascheck run's key: online, a run the project has already is not logged
again; offline (``WANDB_MODE=offline``), each send writes a run folder, and ``wandb sync`` sends
one id once."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from biascheck.execution.redaction import redact
from biascheck.loggers import DEFAULT_EXPERIMENT, LogOptions, TrackerError
from biascheck.loggers.tracked import TrackedRun

ARTIFACT_TYPE = "biascheck-report"
LONGEST_GROUP = 128  # W&B's longest group name


def send(parent: TrackedRun | None, runs: Sequence[TrackedRun], options: LogOptions) -> list[str]:
    import wandb

    project = options.experiment or os.environ.get("WANDB_PROJECT") or DEFAULT_EXPERIMENT
    group = f"{parent.name[: LONGEST_GROUP - len(parent.key) - 1]}-{parent.key}" if parent is not None else None
    offline = os.environ.get("WANDB_MODE", "").lower() in ("offline", "dryrun")
    lines = []
    try:
        for run, job in [*((parent, "run") for parent in [parent] if parent is not None), *((run, "suite") for run in runs)]:
            if not offline and _exists(wandb, project, run.key):
                lines.append(f"wandb: {run.name} is in project {project!r} already (run {run.key}): not logged again")
                continue
            _log(wandb, run, project, group, job)
            if job == "suite":
                lines.append(f"wandb: logged {run.name} to project {project!r}{' (offline)' if offline else ''} (run {run.key})")
    except TrackerError:
        raise
    except Exception as exc:  # W&B's errors (no key, refused, unreachable): in one line
        raise TrackerError(_reason(exc)) from None
    return lines


def _log(wandb: Any, run: TrackedRun, project: str, group: str | None, job: str) -> None:
    settings = wandb.Settings(console="off", quiet=True, silent=True, save_code=False, disable_git=True, x_disable_stats=True, x_disable_meta=True)
    tracked = wandb.init(
        project=project,
        name=run.name,
        id=run.key,
        group=group,
        job_type=job,
        config={**run.params, **{key.replace(".", "_"): value for key, value in run.tags.items()}},
        settings=settings,
        reinit="create_new",
        resume="allow",
    )
    try:
        tracked.log(dict(run.metrics), step=0)
        if run.artifacts:
            artifact = wandb.Artifact(f"biascheck-{run.key}", type=ARTIFACT_TYPE)
            for path in run.artifacts:
                artifact.add_file(str(path), name=path.name)
            tracked.log_artifact(artifact)
    finally:
        tracked.finish()


def _exists(wandb: Any, project: str, key: str) -> bool:
    """Whether the project holds a run of this id (online only; offline, nothing can be asked)."""
    api = wandb.Api(timeout=20)
    entity = os.environ.get("WANDB_ENTITY") or api.default_entity
    try:
        api.run(f"{entity}/{project}/{key}")
    except wandb.errors.CommError:
        return False
    return True


def _reason(exc: BaseException) -> str:
    text = redact(str(exc).strip() or type(exc).__name__)
    first = text.splitlines()[0] if text else type(exc).__name__
    if "api_key" in first.lower() or "api key" in first.lower():
        return "no API key: run `wandb login`, set WANDB_API_KEY, or log offline with WANDB_MODE=offline"
    return first if len(first) <= 240 else first[:240] + " ..."
