"""The Python API's gate: what ``biascheck diff`` does, from Python (docs/api.md). Load a run, a
baseline or a comparison as its record (:func:`load_run`, :func:`load_baseline`,
:func:`load_comparison`), compare a run with a baseline (:func:`compare`, through the same settings
resolution as ``biascheck diff``), and a history or a sweep of models as one DataFrame
(:func:`runs_df`). ``biascheck diff`` reads its files through the readers here too.

Heavy modules (the statistics, the schemas, pandas) are imported when a function first needs them.
"""

from __future__ import annotations

import json
import sys
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from biascheck.core.errors import BiascheckError
from biascheck.records._json import thaw
from biascheck.records.baseline import BASELINE_SCHEMA, BaselineRecord
from biascheck.records.comparison import FLIPS_FILE, Comparison
from biascheck.records.run import RESULTS_SCHEMA, RunRecord

if TYPE_CHECKING:
    import pandas as pd

    from biascheck.session import RunResult
    from biascheck.suite import Suite

RESULTS_FIX = "give the results.json a run wrote, or the report folder holding it"
# How the API names what its caller can change, in errors of code it shares with the plugin.
DATA_ARGUMENT = "load_suite(data_dir=...)"


def load_suite(
    suite_dir: Path | str,
    *,
    data_dir: Path | None = None,
    cache_dir: Path | None = None,
    offline: bool | None = None,
    allow_unpinned: bool = False,
) -> Suite:
    """The suite in ``suite_dir`` (a folder, its suite.toml, or a packaged suite's name) with its
    data files resolved (``data_dir``: a mirror, else BIASCHECK_DATA_DIR; a suite with its own data
    folder, ``[suite] data``, reads there; then the cache; then a download unless ``offline``) and its
    cases built. :func:`biascheck.run` reads the suite from the same ``data_dir``; an error about the
    data names this argument. ``allow_unpinned``: accept files the manifest pins by no checksum
    (pass ``RunConfig(allow_unpinned_data=True)`` to the run too)."""
    from biascheck import suite

    return suite.load_suite(
        suite_dir, data_dir=data_dir, cache_dir=cache_dir, offline=offline, data_option=DATA_ARGUMENT, allow_unpinned=allow_unpinned
    )


# --- reading files -------------------------------------------------------------------------------


def read_json(path: Path, fix: str, what: str = "a results.json") -> Any:
    """A JSON document a command or the API reads; every problem one line naming the file."""
    try:
        return json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        raise BiascheckError(path, None, "no such file", fix) from None
    except IsADirectoryError:
        raise BiascheckError(path, None, "is a folder", fix) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BiascheckError(path, None, f"is not {what} ({exc})", fix) from None
    except ValueError:  # an integer of more digits than Python converts
        raise BiascheckError(path, None, f"is not {what} (it holds a number of more than {sys.get_int_max_str_digits()} digits)", fix) from None
    except RecursionError:
        raise BiascheckError(path, None, f"is not {what} (it is nested too deeply)", fix) from None


def suite_folders(path: Path, name: str = "results.json") -> list[str]:
    """The suites of a report folder of several (a folder each, holding ``name``)."""
    return sorted(p.parent.name for p in path.glob(f"*/{name}"))


def results_file(path: Path, name: str = "results.json", suite: str | None = None, suite_option: str | None = None) -> Path:
    """The file a path names: itself, or ``name`` in the report folder it names (``suite``: in that
    suite's folder of a report of several). A report of several without ``suite`` is an error
    that lists them (``suite_option``: how the caller picks one; else: give one of the folders)."""
    if not path.is_dir():
        return path
    if suite is not None:
        return path / suite / name if (path / suite / name).exists() or not (path / name).exists() else path / name
    if not (path / name).exists():
        suites = suite_folders(path, name)
        if suites:  # a report of several suites has a folder per suite
            fix = f"pass {suite_option} (one of them)" if suite_option else f"give one of them, e.g. {path / suites[0]}"
            raise BiascheckError(path, None, f"holds no {name}, and its subfolders hold one each ({', '.join(suites)})", fix)
    return path / name


def read_run(
    path: Path,
    baseline_fix: str = "give a run's results.json (or its report folder) here",
    *,
    suite: str | None = None,
    suite_option: str | None = None,
) -> tuple[Path, RunRecord]:
    """(the file, the record of its checked ``results.json``) of a path naming a run."""
    path = results_file(path, suite=suite, suite_option=suite_option)
    return path, run_of(path, read_json(path, RESULTS_FIX), baseline_fix)


def run_of(path: Path, document: Any, baseline_fix: str) -> RunRecord:
    """The record of the ``results.json`` document read from ``path``, checked against its schema."""
    from biascheck.reporting.results import validate_results

    if isinstance(document, dict) and document.get("schema") == BASELINE_SCHEMA:
        raise BiascheckError(path, "schema", "is a baseline, not the results.json of a run", baseline_fix)
    validate_results(document, str(path))
    return RunRecord.from_json(document, str(path))


# --- comparing: biascheck diff's resolution of its settings ---------------------------------------

# The [regression] settings, in the order a note lists them.
_REGRESSION_KEYS = ("alpha", "power", "resamples", "seed", "flip_limit", "on_inconclusive", "rules")


def regression_table(
    suite: Path | None,
    reference: tuple[str, BaselineRecord],
    candidate: tuple[Path | str, RunRecord],
    *,
    suite_option: str = "--suite",
    candidate_name: str = "B",
) -> tuple[Mapping[str, Any], str, str | None]:
    """(the [regression] table a comparison tests with, the file it is from, what to say of it):
    that of the suite ``suite`` names (``biascheck diff --suite``, ``compare(suite=...)``); else
    the one the reference records (a run's results, or a baseline recorded by this biascheck);
    else that of the suite the candidate's results name; else the defaults. Never the candidate's
    own: a candidate does not choose how it is tested, and when it asks for other settings that is
    said. ``suite_option`` and ``candidate_name``: how the caller names the suite and the candidate."""
    from biascheck.config.manifest import RegressionSettings

    (reference_path, baseline), (_, results) = reference, candidate
    notes = []
    table: Mapping[str, Any] | None
    source: str | None
    if suite is not None:
        table, source = _suite_regression(suite, results, required=True, suite_option=suite_option, candidate_name=candidate_name)
    elif baseline.regression is not None:
        table, source = thaw(baseline.regression), reference_path
    else:
        manifest = Path(results.suite.manifest or "nowhere")
        table, source = _suite_regression(manifest, results, required=False, suite_option=suite_option, candidate_name=candidate_name)
        used = f"those of {source}" if source else "the defaults"
        table, source = table or RegressionSettings().to_dict(), source or "the defaults"
        notes.append(
            f"{reference_path} records no regression settings (a baseline of an older biascheck): the comparison uses {used} "
            f"({_settings_text(table, _REGRESSION_KEYS[:-1])}); pass {suite_option} to use the suite's"
        )
    assert table is not None and source is not None  # a suite named has its table, or raised
    recorded = thaw(results.suite.regression)
    asked = [key for key in _REGRESSION_KEYS if key in recorded and recorded[key] != table.get(key)]
    if asked:
        notes.append(
            f"{candidate_name}'s results.json asks for {_settings_text(recorded, asked)}; the comparison uses the regression settings of {source} "
            f"({_settings_text(table, asked)})"
        )
    return table, source, ". ".join(notes) or None


def _settings_text(table: Mapping[str, Any], keys: Sequence[str]) -> str:
    return ", ".join(f"{key} {(', '.join(table[key]) or 'none') if key == 'rules' else table[key]}" for key in keys if key in table)


def _suite_regression(
    path: Path, results: RunRecord, *, required: bool, suite_option: str, candidate_name: str
) -> tuple[dict[str, Any] | None, str | None]:
    """(the [regression] table, the suite.toml) of the suite at ``path`` (a folder or its
    suite.toml) when it is the candidate's suite; else an error (``required``: the caller named
    it) or Nones."""
    from biascheck.config.manifest import load_manifest

    fix = f"give the folder of the suite {candidate_name} ran"
    try:
        manifest = load_manifest(path)
    except BiascheckError as exc:
        if required:
            raise BiascheckError(suite_option, None, str(exc), fix) from None
        return None, None
    if manifest.name != results.suite.name:
        if required:
            problem = f"{manifest.path} is suite {manifest.name!r}, and {candidate_name} a run of {results.suite.name!r}"
            raise BiascheckError(suite_option, None, problem, fix)
        return None, None
    return manifest.regression.to_dict(), str(manifest.path)


def run_as_baseline(
    reference: tuple[str, RunRecord], candidate: tuple[str, RunRecord], *, allow_mismatch: bool, fix: str, side: str
) -> BaselineRecord:
    """The baseline a recording of the ``reference`` run (path, results document) would be, to
    compare ``candidate`` with: refused when the run is incomplete, has errored cases, or is of
    another suite (``fix``: for a fingerprint that differs; ``side``: how the caller names the
    reference, as "A" of ``biascheck diff A B``)."""
    from biascheck.evaluation import baseline as baselines
    from biascheck.reporting.runs import check_same_suite

    file, results = reference
    run = results.run
    # Missing answers are no reference: a recording would refuse this run for the same reasons.
    if not run.complete:
        raise BiascheckError(file, "run.complete", f"the run is incomplete ({run.incomplete_reason})", f"give as {side} a run that completed")
    if run.case_errors:
        raise BiascheckError(
            file, "run.case_errors", f"{run.case_errors} case(s) errored after retries", f"give as {side} a run whose every case was answered"
        )
    # In words for two runs (compare() would speak of a baseline); compare() then checks the rest.
    check_same_suite((file, results), candidate, allow_fingerprint_mismatch=allow_mismatch, fix=fix)
    # A recorded run's creation time, not this moment's: the comparison says when it was made.
    return replace(baselines.from_results(results), created_at=results.created_at)


# --- the public functions ------------------------------------------------------------------------


def load_run(source: Path | str | RunResult, *, suite: str | None = None) -> RunRecord:
    """The record of a run: a ``results.json``, or the report folder holding it; of a report folder
    of several suites (a folder each), the one ``suite`` names (without it, the error lists
    them; :func:`runs_df` reads them all). Also a :class:`~biascheck.RunResult` of
    :func:`biascheck.run`: its suite (``suite``: which, when it ran several)."""
    if isinstance(source, Path | str):
        return read_run(Path(source), "read it with load_baseline", suite=suite, suite_option="load_run(..., suite=NAME)")[1]
    return _record_of(source, suite, "pass load_run(result, suite=NAME), one of them")


def _record_of(result: RunResult, suite: str | None, fix: str) -> RunRecord:
    """The record of one suite (``suite``; may be None when it ran one) of a run made in this process."""
    from biascheck.reporting.results import build_results

    records = {r.suite.name: r for r in build_results(result)[0]}
    if suite is None and len(records) == 1:
        (record,) = records.values()
    elif suite in records:
        record = records[suite]
    else:
        problem = f"ran {len(records)} suites ({', '.join(records)})" if suite is None else f"ran no suite {suite!r} (it ran {', '.join(records)})"
        raise BiascheckError("RunResult", None, problem, fix)
    return record


def load_baseline(path: Path | str) -> BaselineRecord:
    """The record of a baseline file, checked as ``biascheck diff`` checks it (schema, digest)."""
    from biascheck.evaluation import baseline as baselines

    return baselines.load(Path(path))


def load_comparison(source: Path | str, *, suite: str | None = None) -> Comparison:
    """The record of a ``comparison.json`` (schema /2, or /1 of an older biascheck), or of the
    report folder holding it (``suite``: which, of a report of several). The flips.jsonl beside it,
    when there is one, gives every flip (``comparison.flips.every``, ``flips_df()``)."""
    path = results_file(Path(source), "comparison.json", suite, "load_comparison(..., suite=NAME)")
    fix = "give the comparison.json a run or biascheck diff wrote, or the report folder holding it"
    document = read_json(path, fix, "a comparison.json")
    flips = path.parent / FLIPS_FILE
    every = _jsonl(flips, fix) if flips.is_file() else None
    return Comparison.from_json(document, str(path), every, str(flips))


def _jsonl(path: Path, fix: str) -> list[Any]:
    lines = []
    try:
        text = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BiascheckError(path, None, f"cannot be read ({exc})", fix) from None
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                lines.append(json.loads(line))
            except (ValueError, RecursionError) as exc:
                raise BiascheckError(path, f"line {number}", f"is not a JSON object ({exc})", fix) from None
    return lines


def compare(
    baseline: BaselineRecord | RunRecord,
    run: RunRecord | RunResult,
    *,
    suite: Path | str | None = None,
    rules: Sequence[str] = (),
    on_inconclusive: str | None = None,
    allow_fingerprint_mismatch: bool = False,
) -> Comparison:
    """``run`` compared with ``baseline``, as ``biascheck diff A B`` compares them: ``baseline`` a
    baseline (:func:`load_baseline`) or another run (a recording of it is the baseline); ``run`` a
    run's record (:func:`load_run`) or the :class:`~biascheck.RunResult` of :func:`biascheck.run`.
    The settings are resolved as the command resolves them: the [regression] table of ``suite`` (a
    suite folder: ``--suite``), else the one the baseline records, else that of the run's suite,
    else the defaults; ``rules`` (``"METRIC:MARGIN"``, ``--compare-fail``) on top;
    ``on_inconclusive`` ("pass", "warn", "fail"); ``allow_fingerprint_mismatch`` compares the
    cases both share. What the command would say of the settings is a warning."""
    from biascheck.evaluation.regression import compare as compare_records
    from biascheck.evaluation.regression import settings_from
    from biascheck.options import check_on_inconclusive, parse_rules

    mode = check_on_inconclusive(on_inconclusive, False, "compare", "on_inconclusive", "")
    rules_where = "compare(rules=...)"
    parsed = parse_rules(list(rules), where=rules_where)
    wanted = baseline.suite_name if isinstance(baseline, BaselineRecord) else baseline.suite.name
    record = run if isinstance(run, RunRecord) else _record_of(run, wanted, "compare it with a baseline of one of them")
    if isinstance(baseline, BaselineRecord):
        reference, recorded = "baseline", baseline
    else:
        fix = "compare runs of one suite version, or pass allow_fingerprint_mismatch=True to compare the cases both share"
        reference = "baseline run"
        recorded = run_as_baseline((reference, baseline), ("run", record), allow_mismatch=allow_fingerprint_mismatch, fix=fix, side="baseline")
    table, source, said = regression_table(
        Path(suite) if suite is not None else None,
        (reference, recorded),
        ("run", record),
        suite_option="compare(suite=...)",
        candidate_name="the run",
    )
    settings = settings_from(
        record,
        parsed,
        regression=table,
        where=source,
        candidate="run",
        rules_where=rules_where,
        allow_fingerprint_mismatch=allow_fingerprint_mismatch,
        **({"on_inconclusive": mode} if mode else {}),
    )
    if said:
        warnings.warn(said, stacklevel=2)
    # A baseline file keeps no replies; a run does, and its flips show them beside the run's.
    replies = None if isinstance(baseline, BaselineRecord) else {case.case_id: case.raw for case in baseline.cases}
    return compare_records(recorded, record, settings, baseline_path=reference, baseline_answers=replies)


def runs_df(sources: Iterable[Path | str | RunRecord | BaselineRecord]) -> pd.DataFrame:
    """One row per run (or baseline), metric and scope (overall and each category), for a history
    or a sweep of models: from results.json files, report folders (every suite of one of several),
    baseline files, a suite's baseline folder (``baselines/<suite>``, its history/ included) and
    records. Columns: source, kind (run or baseline), suite, benchmark, model, revision,
    created_at, git_commit, run_passed, metric, group, scope, value, ci_low, ci_high, n,
    threshold, passed."""
    from biascheck.records.frames import runs_frame

    return runs_frame(_run_rows(source, record) for source, record in _records(sources))


def _run_rows(source: str, record: RunRecord | BaselineRecord) -> tuple[dict[str, Any], Any, dict[tuple[str, str], Any]]:
    """(the columns of one run or baseline, its metric values, its threshold checks by scope and metric)."""
    head: dict[str, Any] = {"source": source}
    if isinstance(record, RunRecord):
        head |= {"kind": "run", "suite": record.suite.name, "benchmark": record.suite.benchmark, "model": record.model.model}
        head |= {"revision": record.model.revision, "created_at": record.created_at, "git_commit": None, "run_passed": record.passed}
        verdicts: Iterable[Any] = record.verdicts
    else:
        head |= {"kind": "baseline", "suite": record.suite_name, "benchmark": record.benchmark, "model": record.model_name}
        head |= {
            "revision": record.model.get("revision"),
            "created_at": record.created_at,
            "git_commit": record.git_commit,
            "run_passed": record.passed,
        }
        verdicts = record.verdicts or ()
    return head, record.metrics.values, {(v.scope, v.metric): v for v in verdicts}


def _records(sources: Iterable[Path | str | RunRecord | BaselineRecord]) -> list[tuple[str, RunRecord | BaselineRecord]]:
    out: list[tuple[str, RunRecord | BaselineRecord]] = []
    for source in sources:
        if isinstance(source, RunRecord | BaselineRecord):
            out.append(("record", source))
            continue
        path = Path(source)
        if path.is_dir() and not (path / "results.json").exists():
            suites = suite_folders(path)
            if suites:
                out += [(str(path / name / "results.json"), load_run(path / name)) for name in suites]
            else:
                from biascheck.evaluation import baseline as baselines

                out += [(str(file), baseline) for file, baseline in baselines.releases(path)]
            continue
        file = results_file(path)
        document = read_json(file, "give results.json files, report folders or baseline files", "a results.json or a baseline")
        if isinstance(document, dict) and document.get("schema") == BASELINE_SCHEMA:
            out.append((str(file), load_baseline(file)))
        elif isinstance(document, dict) and document.get("schema") == RESULTS_SCHEMA:
            out.append((str(file), run_of(file, document, "read it with load_baseline")))  # read once
        else:
            raise BiascheckError(
                file, "schema", "is neither a results.json nor a baseline", "give results.json files, report folders or baseline files"
            )
    return out
