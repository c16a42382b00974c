"""Internal: no public names. A run's records sent to the experiment trackers model teams read
beside their other evaluations (docs/trackers.md): a view of the record, beside :mod:`biascheck.reporting`.

- :mod:`.names`: the one mapping of metric names to tracker keys;
- :mod:`.tracked`: the records as :class:`~.tracked.TrackedRun` (params, metrics, tags, files),
  the same for every tracker;
- :mod:`.mlflow`, :mod:`.wandb`: each tracker, through its own client library, imported only when a
  run is sent to it (an optional extra: ``pytest-biascheck[mlflow]``, ``[wandb]``).

:func:`send` never raises for a tracker that cannot be reached or refuses: it says so in one line
naming the tracker and the fix, for the caller to show (the files are written first)."""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from biascheck.core.errors import BiascheckError
from biascheck.core.spelling import option
from biascheck.execution.redaction import redact
from biascheck.loggers.tracked import DEFAULT_RUN_NAME, check_run_name, tracked_runs

if TYPE_CHECKING:
    from biascheck.records.comparison import Comparison
    from biascheck.records.run import RunRecord

__all__: list[str] = []

# tracker -> (the module its client library is, the extra that installs it)
TRACKERS = {"mlflow": ("mlflow", "mlflow"), "wandb": ("wandb", "wandb")}
DEFAULT_EXPERIMENT = "biascheck"  # the MLflow experiment, the W&B project, when none is named


@dataclass(frozen=True)
class LogOptions:
    """Where a run's records are sent: ``trackers`` (of :data:`TRACKERS`, in the order given),
    ``experiment`` (the MLflow experiment, the W&B project; None: the tracker's own variable
    (MLFLOW_EXPERIMENT_NAME, WANDB_PROJECT), else :data:`DEFAULT_EXPERIMENT`), the ``run_name``
    template, and whether a run that could not be sent fails (``required``)."""

    trackers: tuple[str, ...]
    required: bool = False
    experiment: str | None = None
    run_name: str = DEFAULT_RUN_NAME


@dataclass(frozen=True)
class Sent:
    """One line about sending to a tracker (without the ``biascheck: `` prefix); ``failed``: the
    tracker could not be reached or refused, and the run is not (wholly) there."""

    text: str
    failed: bool = False


class TrackerError(Exception):
    """A tracker could not take a run: its message is the reason, in a few words."""


def check_trackers(names: Sequence[str], where: object) -> tuple[str, ...]:
    """The trackers named, each once and known, with its client library installed; else one line
    naming ``where`` and the fix (before collection: nothing has run)."""
    for name in names:
        if name not in TRACKERS:
            raise BiascheckError(where, None, f"{name!r} is not a tracker", f"use {' or '.join(TRACKERS)}")
        module, extra = TRACKERS[name]
        if importlib.util.find_spec(module) is None:
            raise BiascheckError(where, None, f"logging to {name} needs its client library, which is not installed", _install(extra))
    return tuple(dict.fromkeys(names))


def _install(extra: str) -> str:
    return f"pip install 'pytest-biascheck[{extra}]'"


def log_options(
    trackers: Sequence[str], where: object, *, required: bool, experiment: str | None, run_name: str | None, name_where: object
) -> LogOptions:
    """Checked :class:`LogOptions` (``where``, ``name_where``: how the trackers and the template were given)."""
    if experiment is not None and not experiment.strip():
        experiment = None
    template = check_run_name(run_name, name_where) if run_name is not None else DEFAULT_RUN_NAME
    return LogOptions(check_trackers(trackers, where), required=required, experiment=experiment, run_name=template)


def send(
    runs: Sequence[RunRecord], comparisons: Mapping[str, Comparison], folder: Path | None, options: LogOptions, *, shown: str | None
) -> list[Sent]:
    """Send a run's records (its report ``folder``: the files) to each tracker of ``options``.
    ``shown``: the folder as the user would type it (None: no report was written), for the line of
    a tracker that failed, which says how to send the run later."""
    parent, children = tracked_runs(runs, comparisons, folder, options.run_name)
    said: list[Sent] = []
    for tracker in options.trackers:
        extra = TRACKERS[tracker][1]
        resend = f"send it later with `biascheck log {shown} --to {tracker}`" if shown else f"write a report ({option('report')}) to send it later"
        try:
            module = importlib.import_module(f"biascheck.loggers.{tracker}")
            said += [Sent(line) for line in module.send(parent, children, options)]
        except ImportError as exc:
            said.append(
                Sent(f"{tracker}: the run was not logged: its client library cannot be imported ({exc}); {_install(extra)}, then {resend}", True)
            )
        except TrackerError as exc:
            said.append(Sent(f"{tracker}: the run was not logged ({exc}); its files are written: {resend} once {tracker} is reachable", True))
        except Exception as exc:  # the library itself broke (a dependency it cannot import, say): still one line
            problem = redact(" ".join(str(exc).split())[:240]) or type(exc).__name__
            said.append(Sent(f"{tracker}: the run was not logged ({type(exc).__name__}: {problem}); its files are written: {resend}", True))
    return said
