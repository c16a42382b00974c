"""What a tracker is sent of a run: its records turned into one :class:`TrackedRun` per suite (and,
for a run of several suites, one for the whole run, their parent), so that every tracker logs the
same params, metrics, tags and files under the same names. Nothing here imports a tracker."""

from __future__ import annotations

import hashlib
import json
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from biascheck.core.errors import BiascheckError
from biascheck.loggers.names import BOUNDS, metric_key
from biascheck.records._json import thaw
from biascheck.records.comparison import Comparison
from biascheck.records.run import RunRecord

DEFAULT_RUN_NAME = "{suite}-{model}"
# The fields a run name template may use.
NAME_FIELDS = ("suite", "model", "revision", "answer_mode", "benchmark", "created_at", "run_id")
LONGEST_PARAM = 6000  # MLflow's longest param value
# The files each suite's run carries, from its report folder (those it has), and the whole run's.
SUITE_FILES = ("report.html", "results.json", "comparison.json")
RUN_FILES = ("index.html", "summary.md")
# The answer mode param of a suite answered the one way its benchmark has (QA: generate).
DEFAULT_ANSWER_MODE = "default"


@dataclass(frozen=True)
class TrackedRun:
    """One tracker run: ``key``, a stable id of the biascheck run it shows (the same each time the
    same results are sent: how a tracker sees it has the run already), its ``name``, and what it
    holds. ``parent``: the key of the whole run, for a suite of a run of several."""

    key: str
    name: str
    params: Mapping[str, str]
    metrics: Mapping[str, float]
    tags: Mapping[str, str]
    artifacts: tuple[Path, ...]
    parent: str | None = None


def check_run_name(template: str, where: object) -> str:
    """A run name template: its fields among :data:`NAME_FIELDS`, no conversion or format spec;
    else one line naming ``where`` and the fields it may use."""
    fix = f"use the fields {', '.join('{' + name + '}' for name in NAME_FIELDS)}, e.g. {DEFAULT_RUN_NAME}"
    try:
        fields = [(name, conversion, spec) for _, name, spec, conversion in string.Formatter().parse(template) if name is not None]
    except ValueError as exc:
        raise BiascheckError(where, None, f"{template!r} is not a template ({exc})", fix + " (a brace itself is written {{ or }})") from None
    for name, conversion, spec in fields:
        if name not in NAME_FIELDS or conversion or spec:
            raise BiascheckError(where, None, f"{template!r} has the field {{{name}}}, which is not a run's", fix)
    if not template.strip():
        raise BiascheckError(where, None, "is empty", fix)
    return template


def run_key(record: RunRecord) -> str:
    """A digest of what makes this run this run: its suite (name and fingerprint), model and
    revision, shard, and when it was made. Sending the same results again gives the same key."""
    identity = [record.schema, record.suite.name, thaw(record.suite.fingerprint), record.model.model, record.model.revision]
    identity += [record.run.shard, record.created_at]
    return _digest(identity)


def _digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=True).encode()).hexdigest()[:16]


def tracked_runs(
    runs: Sequence[RunRecord], comparisons: Mapping[str, Comparison], folder: Path | None, run_name: str = DEFAULT_RUN_NAME
) -> tuple[TrackedRun | None, list[TrackedRun]]:
    """(the whole run's parent, None for one suite; a run per suite) of a run's records and its
    comparisons by suite name. ``folder``: its report folder (None: no files are sent)."""
    several = len(runs) > 1
    keys = [run_key(record) for record in runs]
    parent = _parent(runs, comparisons, folder, run_name, keys) if several else None
    children = []
    for record, key in zip(runs, keys):
        files = folder / record.suite.name if folder is not None and several else folder
        children.append(_suite_run(record, comparisons.get(record.suite.name), key, files, run_name, parent.key if parent else None))
    return parent, children


def _suite_run(record: RunRecord, comparison: Comparison | None, key: str, folder: Path | None, run_name: str, parent: str | None) -> TrackedRun:
    tags = {"biascheck.run_id": key, "biascheck.kind": "suite", "biascheck.passed": _word(_passed(record, comparison))}
    if parent is not None:
        tags["biascheck.parent_run_id"] = parent
    return TrackedRun(
        key=key,
        name=_name(run_name, record, key),
        params=params(record),
        metrics=metrics(record, comparison),
        tags=tags,
        artifacts=_files(folder, SUITE_FILES),
        parent=parent,
    )


def _parent(runs: Sequence[RunRecord], comparisons: Mapping[str, Comparison], folder: Path | None, run_name: str, keys: list[str]) -> TrackedRun:
    key = _digest(sorted(keys))  # the suites in any order: a report folder lists them by name
    first = runs[0]
    passed = all(_passed(record, comparisons.get(record.suite.name)) for record in runs)
    suites = "+".join(record.suite.name for record in runs)
    return TrackedRun(
        key=key,
        name=_name(run_name, first, key, suite=suites),
        params={
            "suites": _bounded(", ".join(record.suite.name for record in runs)),
            "model": first.model.model,
            "revision": first.model.revision or "",
        },
        metrics={"gate/passed": float(passed), "gate/suites_failed": float(sum(not _passed(r, comparisons.get(r.suite.name)) for r in runs))},
        tags={"biascheck.run_id": key, "biascheck.kind": "run", "biascheck.passed": _word(passed)},
        artifacts=_files(folder, RUN_FILES),
    )


def params(record: RunRecord) -> dict[str, str]:
    """A suite run's params: which suite (name, benchmark, fingerprint), model, revision, answer
    mode and judges, as results.json says them (text; "" for no revision or judge)."""
    return {
        "suite": record.suite.name,
        "benchmark": record.suite.benchmark,
        "suite_fingerprint": _bounded(json.dumps(thaw(record.suite.fingerprint), ensure_ascii=False, separators=(",", ":"))),
        "model": _bounded(record.model.model),
        "revision": _bounded(record.model.revision or ""),
        "answer_mode": record.run.estimator or DEFAULT_ANSWER_MODE,
        "judges": _bounded(", ".join(record.model.judge_names)),
        "cases": str(record.run.cases),
        "biascheck_version": str(record.tool.get("version", "")),
    }


def metrics(record: RunRecord, comparison: Comparison | None) -> dict[str, float]:
    """Every metric of every scope with its interval bounds (undefined ones left out), then the
    gate: ``gate/passed`` (1 or 0), the threshold checks failed and inconclusive, and with a
    baseline the regression checks regressed and inconclusive."""
    values: dict[str, float] = {}
    for value in record.metrics.values:
        for bound, number in zip((None, *BOUNDS), (value.value, *value.ci)):
            if number is not None:
                values[metric_key(value.metric, value.group, value.scope, bound)] = float(number)
    values["gate/passed"] = float(_passed(record, comparison))
    values["gate/thresholds_failed"] = float(len(record.failed_checks))
    values["gate/thresholds_inconclusive"] = float(len(record.inconclusive_checks))
    if comparison is not None:
        values["gate/regressed"] = float(len(comparison.regressions))
        values["gate/inconclusive"] = float(len(comparison.inconclusive))
    return values


def _passed(record: RunRecord, comparison: Comparison | None) -> bool:
    """The suite's gate: its thresholds and the whole run (the record), and no regression."""
    return record.passed and (comparison is None or comparison.passed)


def _word(passed: bool) -> str:
    return "true" if passed else "false"


def _name(template: str, record: RunRecord, key: str, **given: str) -> str:
    fields = {
        "suite": record.suite.name,
        "model": record.model.model,
        "revision": record.model.revision or "",
        "answer_mode": record.run.estimator or DEFAULT_ANSWER_MODE,
        "benchmark": record.suite.benchmark,
        "created_at": record.created_at,
        "run_id": key,
    }
    return _bounded(template.format_map(fields | given), 250)


def _bounded(text: str, longest: int = LONGEST_PARAM) -> str:
    """A value within a tracker's limit: a longer one keeps its head and says how long it was."""
    if len(text) <= longest:
        return text
    tail = f" [... {len(text):,} characters in all: see results.json]"
    return text[: longest - len(tail)] + tail


def _files(folder: Path | None, names: Sequence[str]) -> tuple[Path, ...]:
    if folder is None:
        return ()
    return tuple(folder / name for name in names if (folder / name).is_file())
