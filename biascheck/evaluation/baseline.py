"""Baselines: the stored result of a release, to compare the next candidate against.

``baselines/<suite>/release.json`` (by default) holds what a paired comparison needs and nothing a reviewer
should not see: the suite fingerprint, the model string and sampling parameters, every metric with
its interval, and per case only its id, category, template and outcome class (no model text).

The file is written for review in a pull request: a header, then one case per line, so a changed
outcome is a one-line diff. It carries a digest of its contents; on load, the metrics are re-tallied
from the case rows and the digest is checked, so a truncated, hand-edited or schema-invalid file is
a one-line error naming the file and the field, never a silently wrong comparison.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from biascheck.benchmarks.base import document_schema, first_document_error, get_benchmark, metric_defs_for
from biascheck.config.manifest import canonical_json, sha256_text
from biascheck.core.bounds import with_bounds
from biascheck.core.errors import BiascheckError
from biascheck.core.spelling import Spelled, option
from biascheck.core.validation import DocumentValidator
from biascheck.core.version import VERSION
from biascheck.records._json import freeze, thaw
from biascheck.records.baseline import BaselineRecord, BaselineVerdict
from biascheck.records.run import CaseRecord, Metrics, RunRecord
from biascheck.suite import ALLOW_MISSING_DATA, missing_data_summary

BASELINE_SCHEMA = "biascheck.baseline/1"
FINGERPRINT_PARTS = ("data", "prompts", "subset", "metrics_version", "judge", "scoring", "missing")
# A baseline is named for what it is (the release gated against), not for the candidate, so a model
# renamed between releases still finds it. ``{model}`` (the model slug) remains for teams that gate
# several models side by side.
DEFAULT_PATTERN = "baselines/{suite}/release.json"
# Where a replaced baseline is kept, beside it: history/<revision>.json (see :func:`replace`).
HISTORY = "history"
FIX_RECREATE = Spelled("restore it from version control, or re-create it with {update-baseline}")


def model_slug(model: str) -> str:
    """A file name for a model string: ``openai/gpt-4o-mini`` -> ``openai-gpt-4o-mini``."""
    slug = re.sub(r"[^a-z0-9._]+", "-", model.lower()).strip("-.")
    return slug or "model"


def baseline_path(pattern: str | Path | None, *, suite: str, model: str, root: Path) -> Path:
    """Where a suite's baseline lives: ``pattern`` with ``{suite}`` (the suite name) and ``{model}``
    (the model slug) filled in, else ``DEFAULT_PATTERN``. Relative paths are taken from ``root``.
    """
    path = Path(str(pattern or DEFAULT_PATTERN).replace("{suite}", suite).replace("{model}", model_slug(model)))
    return path if path.is_absolute() else root / path


def git_commit(cwd: Path) -> str | None:
    """The commit the baseline was made at, when there is one."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        out = None
    if out is not None and out.returncode == 0 and re.fullmatch(r"[0-9a-f]{40}", out.stdout.strip()):
        return out.stdout.strip()
    return os.environ.get("GITHUB_SHA") or None


# --- from a run --------------------------------------------------------------------------------


def _judge(judge: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The judge as a baseline keeps it: model and parameters, no endpoint or timeout."""
    return {"model": judge["model"], "params": dict(judge["params"])} if judge else None


def from_results(run: RunRecord, *, git: str | None = None) -> BaselineRecord:
    """The baseline of one suite's run (its digest is computed when it is written)."""
    suite, model, metrics = run.suite, run.model, run.metrics
    benchmark = get_benchmark(suite.benchmark)
    columns = tuple(benchmark.record_columns)
    rows = tuple(tuple(case_columns(case, columns)) for case in sorted(run.cases, key=lambda c: c.case_id))
    suite_json: dict[str, Any] = {
        "name": suite.name,
        "benchmark": suite.benchmark,
        "fingerprint": suite.fingerprint,
        # A baseline of a run without some categories says so: the categories, and that the gap was accepted.
        "skipped_categories": suite.skipped_categories,
    }
    if suite.missing_data_allowed is not None:
        suite_json["missing_data_allowed"] = suite.missing_data_allowed
    if suite.categories_total is not None:
        suite_json["categories_total"] = suite.categories_total
    return BaselineRecord(
        tool=freeze({"name": "biascheck", "version": VERSION}),
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        git_commit=git,
        suite=freeze(suite_json),
        # No api_base: a loopback port or an internal host name is not part of what was measured.
        model=freeze(
            {
                "model": model.model,
                "revision": model.revision,
                "params": model.params,
                "judge": _judge(model.judge),
                # Several judges: each (with one, "judge" above, as before several could read).
                **({"judges": [_judge(judge) for judge in model.judges]} if model.judges else {}),
                "estimator": run.run.estimator,
                **({"served": model.served} if model.served else {}),
            }
        ),
        bootstrap=freeze(metrics.rest["bootstrap"]),
        # Only what a comparison checks: a metric never gated is not a function of the kept rows.
        metrics=Metrics(tuple(v for v in metrics.values if v.group in ("overall", "category") and _gated(benchmark, v.metric)), BASELINE_GROUPS),
        columns=columns,
        rows=rows,
        digest="",
        # The suite's [regression] settings, which biascheck diff then takes from the baseline, not the candidate.
        regression=suite.regression,
        # How units were scored, where the benchmark has a setting for it (HBB's flag threshold, BBG's unscorable).
        scoring=freeze(scoring_of(run)),
        # The run's threshold verdicts as it reached them: biascheck history marks a release from
        # these, never by judging its values against thresholds edited since.
        verdicts=tuple(BaselineVerdict(v.metric, v.scope, v.threshold, v.passed, v.gated) for v in run.verdicts),
        key_order=_BASELINE_ORDER,
    )


# A new baseline's keys, in the order its file has always had them (the digest is added last).
_BASELINE_ORDER = (
    "schema", "tool", "created_at", "git_commit", "suite", "model", "bootstrap", "regression", "scoring", "metrics", "verdicts", "cases",
)  # fmt: skip
BASELINE_GROUPS = ("overall", "by_category")


def scoring_of(run: RunRecord | BaselineRecord) -> dict[str, Any]:
    """How a run scored its units (HBB: the flag threshold; BBG: its unscorable convention and
    calibration), as a baseline records it."""
    if isinstance(run, BaselineRecord):
        return thaw(run.scoring) if run.scoring else {}
    threshold = run.metrics.rest.get("flag_threshold")
    if "flag_threshold" in run.metrics.rest:
        return {"flag_threshold": threshold}
    return thaw(run.scoring) if run.scoring else {}


def case_columns(case: CaseRecord, columns: Sequence[str]) -> list[Any]:
    """A case's values of a benchmark's record columns (a baseline row; a comparison's unit)."""
    return [getattr(case, column) if column in _CASE_FIELDS else case.fields[column] for column in columns]


_CASE_FIELDS = frozenset(CaseRecord._KEYS)


def _gated(benchmark: Any, metric: str) -> bool:
    defs = benchmark.metric_defs
    return metric not in defs or defs[metric].gated


def refuse_reason(results: RunRecord) -> str | None:
    """Why this run must not become a baseline, or None. A baseline is the whole suite, answered."""
    run, suite = results.run, results.suite
    if run.shard:
        return f"it is shard {run.shard} of the suite: merge the shards' stores (biascheck store merge) and run the whole suite"
    if not run.complete:
        return f"the run is incomplete ({run.incomplete_reason})"
    if run.case_errors:
        return f"{run.case_errors} case(s) errored after retries"
    if suite.skipped_categories and suite.missing_data_allowed is False:
        return (
            f"{missing_data_summary(suite.skipped_categories, suite.categories_total)}; a baseline of part of the suite is "
            f"recorded only with {ALLOW_MISSING_DATA}, and then says so"
        )
    if run.cases != suite.cases_total:
        return (
            f"only {run.cases} of the suite's {suite.cases_total} cases were selected (-k, node ids or a "
            "deselected category); a baseline must cover the whole suite: run it without a selection"
        )
    return None


# --- writing -----------------------------------------------------------------------------------


def _digest(document: Mapping[str, Any]) -> str:
    return sha256_text(canonical_json({k: v for k, v in document.items() if k != "digest"}))


def _pretty(value: Any, indent: str = "") -> str:
    """JSON with every leaf (an object or list holding no object and no list of lists: a metric,
    a case row) on one line, and everything above it indented."""
    if not isinstance(value, (dict, list)) or _leaf(value):
        return json.dumps(value, ensure_ascii=False, allow_nan=False)
    inner = indent + " "
    if isinstance(value, dict):
        items = [f"{inner}{json.dumps(k, ensure_ascii=False)}: {_pretty(v, inner)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    return "[\n" + ",\n".join(inner + _pretty(v, inner) for v in value) + "\n" + indent + "]"


def _leaf(value: dict | list) -> bool:
    items = value.values() if isinstance(value, dict) else value
    return all(not isinstance(v, dict) and not (isinstance(v, list) and any(isinstance(x, (dict, list)) for x in v)) for v in items) and not (
        isinstance(value, list) and any(isinstance(v, list) for v in value)
    )


def dumps(baseline: BaselineRecord) -> str:
    """The file text (the record's serialization, its digest computed over the rest): a pretty
    header, one metric and one case row per line (reviewable diffs)."""
    return document_text({key: value for key, value in baseline.to_json().items() if key != "digest"})


def document_text(document: Mapping[str, Any]) -> str:
    """A baseline document's file text, its digest added last (:func:`dumps`)."""
    return _pretty({**document, "digest": _digest(document)}) + "\n"


def write(baseline: BaselineRecord, path: Path) -> None:
    from biascheck.core.files import atomic_write_text

    atomic_write_text(path, dumps(baseline))


def replace(baseline: BaselineRecord, path: Path) -> Path | None:
    """Write ``baseline`` to ``path``, first keeping the baseline it replaces (if any) as
    ``history/<revision>.json`` beside it: the release history. Returns where the replaced file
    went, None when there was none. Both writes are atomic and the old file is copied before it is
    replaced, so a write that fails or is killed at any point loses no file."""
    kept = keep_replaced(path) if path.exists() else None
    write(baseline, path)
    return kept


def safe_name(text: str) -> str:
    """``text`` as a file name on any system: letters, digits, ``.``, ``_`` and ``-`` (``v1.2:rc/3``
    -> ``v1.2-rc-3``); empty when nothing of it is left."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")[:120]


def keep_replaced(path: Path) -> Path:
    """Copy the baseline at ``path`` into ``history/`` beside it, byte for byte, named for the
    model revision it records, else its ``created_at`` (else the file's time: a file too damaged
    to say is kept all the same). A name another file already holds gets the creation time added,
    then a count; a copy already there (an earlier recording that stopped after keeping it) is
    not made twice."""
    from biascheck.core.files import atomic_write_bytes

    old = path.read_bytes()
    revision, created = _identity(old)
    created = created or datetime.fromtimestamp(path.stat().st_mtime, UTC).isoformat(timespec="seconds")
    stem = safe_name(revision or "") or safe_name(created) or "baseline"
    names = [stem] + ([f"{stem}-{safe_name(created)}"] if revision else []) + [f"{stem}-{k}" for k in range(2, 1000)]
    for name in names:
        target = path.parent / HISTORY / f"{name}.json"
        if target.is_file() and target.read_bytes() == old:
            return target
        if not target.exists():
            atomic_write_bytes(target, old)
            return target
    raise BiascheckError(path.parent / HISTORY, None, f"holds {len(names)} files named for {stem!r}", "move older ones elsewhere")


def _identity(text: bytes) -> tuple[str | None, str | None]:
    """(model revision, created_at) of a baseline's text, as far as it can be read; never raises:
    the file is kept whatever it holds."""
    try:
        document = json.loads(text)
    except (ValueError, RecursionError):
        return None, None
    if not isinstance(document, dict):
        return None, None
    model = document.get("model")
    revision = model.get("revision") if isinstance(model, dict) else None
    created = document.get("created_at")
    return (revision if isinstance(revision, str) else None), (created if isinstance(created, str) else None)


# --- reading -----------------------------------------------------------------------------------


def releases(folder: Path) -> list[tuple[Path, BaselineRecord]]:
    """A suite's baselines by release: each ``*.json`` in ``folder`` (``baselines/<suite>/``) and in
    its ``history/``, loaded and checked (:func:`load`), oldest first by the time each was
    recorded (``created_at``); of two made in the same second, the one in use is the later."""
    current, kept = sorted(folder.glob("*.json")), sorted((folder / HISTORY).glob("*.json"))
    loaded = [(path, load(path), path in current) for path in current + kept if path.is_file()]
    return [(path, baseline) for path, baseline, _ in sorted(loaded, key=lambda item: (_moment(item[1].created_at), item[2], str(item[0])))]


def _moment(text: str) -> datetime:
    """A ``created_at`` as a point in time (one without a zone is UTC); unreadable: the earliest."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return datetime.min.replace(tzinfo=UTC)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@cache
def _base_schema() -> dict[str, Any]:
    return json.loads(resources.files("biascheck.schemas").joinpath("baseline.schema.json").read_text("utf-8"))


_VALIDATORS: dict[str | None, DocumentValidator] = {}


def _validator(benchmark: str | None = None, where: str = "") -> DocumentValidator:
    """The baseline schema; with ``benchmark``, its rows checked by that benchmark's fragment: one for each, kept
    (``where``, the document read, is named in the error of a benchmark not registered)."""
    if benchmark not in _VALIDATORS:
        schema = _base_schema() if benchmark is None else document_schema(_base_schema(), benchmark, "baseline_row", where)
        _VALIDATORS[benchmark] = DocumentValidator(with_bounds(schema))  # the [regression] settings: suite.toml's bounds
    return _VALIDATORS[benchmark]


def _field(path) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def load(path: Path) -> BaselineRecord:
    """Read and check a baseline; every problem is a :class:`BiascheckError` naming the field."""
    where = str(path)
    try:
        text = path.read_text("utf-8")
    except FileNotFoundError:
        raise BiascheckError(where, None, "no such baseline", f"create it with {option('update-baseline')}, or fix {option('baseline')}") from None
    except IsADirectoryError:
        raise BiascheckError(where, None, "is a folder", "give a baseline file; {suite} in the path stands for the suite name") from None
    except UnicodeDecodeError:
        raise BiascheckError(where, None, "is not UTF-8 text", FIX_RECREATE) from None
    except OSError as exc:
        raise BiascheckError(where, None, f"cannot be read ({exc.strerror or exc})", "check the path and its permissions") from None
    try:
        document = json.loads(
            text,
            parse_constant=lambda name: _reject_number(where, name),
            parse_float=lambda token: _finite(where, token),
            parse_int=lambda token: _integer(where, token),
        )
    except json.JSONDecodeError as exc:
        # A write cut short (an interrupted copy, a full disk) ends without the closing brace.
        truncated = exc.msg != "Extra data" and not text.rstrip().endswith("}")
        problem = "is truncated (the JSON ends early)" if truncated else f"is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
        raise BiascheckError(where, None, problem, FIX_RECREATE) from None
    except RecursionError:
        raise BiascheckError(where, None, "is nested too deeply to be a baseline", FIX_RECREATE) from None
    if isinstance(document, dict) and document.get("schema") not in (None, BASELINE_SCHEMA) and isinstance(document.get("schema"), str):
        raise BiascheckError(
            where,
            "schema",
            f"{document['schema']!r} is not a baseline (expected {BASELINE_SCHEMA!r})",
            "give a baseline file, or use `biascheck diff BASELINE RESULTS` for a results.json",
        )
    _schema_check(document, where)
    _check_rows(where, document)
    _check_metrics(where, document)
    if document["digest"] != _digest(document):
        raise BiascheckError(where, "digest", "the contents do not match the digest: the file was edited after it was written", FIX_RECREATE)
    return BaselineRecord.from_json(document, where)


def _schema_check(document: Any, where: str) -> None:
    error = first_document_error(document, lambda benchmark: _validator(benchmark, where) if benchmark else _validator())
    if error is not None:
        raise BiascheckError(where, _field(error.absolute_path), error.message, FIX_RECREATE)


def _reject_number(where: str, name: str):
    raise BiascheckError(where, None, f"holds {name}, which is not a JSON number", FIX_RECREATE)


def _integer(where: str, token: str) -> int:
    try:
        return int(token)
    except ValueError:  # more digits than Python converts (4,300)
        raise BiascheckError(where, None, f"holds a number of more than {sys.get_int_max_str_digits()} digits", FIX_RECREATE) from None


def _finite(where: str, token: str) -> float:
    value = float(token)
    if not math.isfinite(value):
        _reject_number(where, token)
    return value


def _check_rows(where: str, document: Mapping[str, Any]) -> None:
    benchmark = get_benchmark(document["suite"]["benchmark"])
    if document["cases"]["columns"] != list(benchmark.record_columns):
        raise BiascheckError(where, "cases.columns", f"expected {list(benchmark.record_columns)}", FIX_RECREATE)
    seen: set[str] = set()
    for index, row in enumerate(document["cases"]["rows"]):
        if row[0] in seen:
            raise BiascheckError(where, f"cases.rows[{index}]", f"case {row[0]!r} appears twice", FIX_RECREATE)
        seen.add(row[0])


def _check_metrics(where: str, document: Mapping[str, Any]) -> None:
    """The stored point estimates must be what the stored outcomes give: catches hand edits early,
    and names the field, which a digest alone cannot."""
    cases = document["cases"]
    records = ComparisonUnits.of_rows(
        document["suite"]["benchmark"], [dict(zip(cases["columns"], row)) for row in cases["rows"]], document.get("scoring")
    )
    benchmark = get_benchmark(document["suite"]["benchmark"])
    defs = metric_defs_for(benchmark, document.get("scoring"))
    scopes = [("overall", records.counts(None), document["metrics"]["overall"])]
    scopes += [(f"by_category.{c}", records.counts(c), t) for c, t in document["metrics"]["by_category"].items()]
    for scope, counts, table in scopes:
        for name, stored in table.items():
            if name not in defs:
                raise BiascheckError(where, f"metrics.{scope}.{name}", f"{benchmark.name} has no metric {name!r}", FIX_RECREATE)
            value = float(defs[name].fn(counts))
            if not _same(value, stored["value"]):
                raise BiascheckError(
                    where,
                    f"metrics.{scope}.{name}.value",
                    f"{stored['value']} is not what the stored case outcomes give ({_show(value)})",
                    FIX_RECREATE,
                )


def _same(value: float, stored: float | None) -> bool:
    # Float sums (HBB scores) may differ in the last bits with summation order; any real edit is
    # orders of magnitude larger (one changed case moves a metric by at least 1/n).
    return stored is None if math.isnan(value) else stored is not None and math.isclose(value, stored, rel_tol=1e-9, abs_tol=1e-12)


def _show(value: float) -> str:
    return "null" if math.isnan(value) else repr(value)


# What a part meant in fingerprints made before it was recorded: every BBG run was then scored by
# leaving unscorable pairs out, so such a baseline still compares with a run that does the same.
_BEFORE_RECORDED = {"scoring": "unscorable=exclude"}


def fingerprint_differences(baseline: Mapping[str, Any], candidate: Mapping[str, Any]) -> list[str]:
    """Which parts of the suite fingerprint differ (data, prompts, subset, metrics_version, ...)."""

    def value(fingerprint: Mapping[str, Any], part: str) -> Any:
        if part in fingerprint or part not in _BEFORE_RECORDED or candidate.get(part) != _BEFORE_RECORDED[part]:
            return fingerprint.get(part)
        return _BEFORE_RECORDED[part]

    return [part for part in FINGERPRINT_PARTS if value(baseline, part) != value(candidate, part)]


# --- the per-unit view that comparisons use -------------------------------------------------


@dataclass(frozen=True)
class ComparisonUnits:
    """What a comparison pairs: a benchmark's scored units (a QA case; an HBB instance) in columns.

    ``vectors`` (n, K) are the units' count vectors, summed for any metric; ``scores[metric]`` is
    each unit's contribution to that metric's numerator (NaN: not in its denominator), for the
    sign test; ``cells`` are the one-hot cells when the vectors are one-hot (QA), which allows
    the case-level bootstrap; ``kinds`` describe units in the flip list (a context type)."""

    ids: list[str]
    categories: list[str]
    clusters: list[str]
    vectors: np.ndarray
    outcomes: list[str]
    kinds: list[str]
    scores: dict[str, np.ndarray]
    cells: np.ndarray | None = None

    @classmethod
    def of_rows(cls, benchmark: str, records: Sequence[Mapping[str, Any]], scoring: Mapping[str, Any] | None) -> ComparisonUnits:
        """From a benchmark's case records (at least its record columns), scored as ``scoring`` says."""
        return cls(**get_benchmark(benchmark).comparison_units(records, scoring=scoring or {}))

    @classmethod
    def of(cls, side: RunRecord | BaselineRecord, scoring: Mapping[str, Any] | None) -> ComparisonUnits:
        """The units of a run or a baseline, read from the record."""
        if isinstance(side, BaselineRecord):
            return cls.of_rows(side.benchmark, [dict(zip(side.columns, row)) for row in side.rows], scoring)
        columns = tuple(get_benchmark(side.suite.benchmark).record_columns)
        return cls.of_rows(side.suite.benchmark, [dict(zip(columns, case_columns(case, columns))) for case in side.cases], scoring)

    def counts(self, category: str | None) -> np.ndarray:
        """The summed vector of all units (``None``) or of one category."""
        if category is None:
            return self.vectors.sum(axis=0)
        return self.vectors[np.array([c == category for c in self.categories], dtype=bool)].sum(axis=0)
