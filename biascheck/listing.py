"""``biascheck suites``' counts: each suite's cases and the model calls of a whole run, without a
model. Counting means building every case and keying every request (a full suite takes 2-13 s
of CPU), so counts without ``--model`` and ``--cache`` are kept in the download cache
(``counts/``), keyed by everything they depend on:

- biascheck's own code (every module and shipped file of the package): a new release or an edit
  counts again;
- the suite's manifest, byte for byte, and the words of the language pack it ships;
- each data file the manifest names: where it was found, its pin, size and modification time
  (the files are verified against their pins whenever they are resolved, hits included);
- the answer mode, the sampling parameters and the API base asked for, and the mirror.

A cache that cannot be read or written is counted around, never trusted: the counts are made again.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

from biascheck.config.manifest import SuiteManifest, canonical_json, load_manifest, sha256_text
from biascheck.config.sources import Resolved
from biascheck.core.errors import BiascheckError
from biascheck.core.files import atomic_write_text
from biascheck.dryrun import SuiteEstimate, estimate
from biascheck.session import RunConfig
from biascheck.suite import ALLOW_MISSING_DATA, benchmark_of, build_suite, default_cache_dir, missing_data_summary, register_suite_pack, resolve_files

__all__ = ["SuiteCount", "count_suite"]

# The cache's layout: a change of what an entry holds counts everything again.
_FORMAT = 1


@dataclass(frozen=True)
class JudgeCalls:
    calls: int
    uncertain: int


@dataclass(frozen=True)
class SuiteCount:
    """One suite's line: its benchmark, cases and calls (None: not counted, ``problem`` says why),
    and a note on what the counts leave out. ``estimate``: the whole estimate, when counted now
    (a cached count has none; ``biascheck suites --model`` never reads the cache)."""

    benchmark: str
    cases: int | None = None
    model_calls: int | None = None
    judge_calls: tuple[JudgeCalls, ...] = ()
    problem: str | None = None
    estimate: SuiteEstimate | None = None


def count_suite(path: Path, config: RunConfig, *, data_dir: Path | None, nowhere: str, price: bool) -> SuiteCount:
    """The counts of the suite folder ``path`` under ``config`` (its store: requests it answers are
    not calls). ``nowhere``: how a line says a data file is missing; ``price``: price the calls.
    Counts that depend on no store and no price are read from and kept in the download cache."""
    try:
        manifest = load_manifest(path)
    except BiascheckError as exc:
        return SuiteCount("?", problem=f"not a valid suite: {exc}")
    try:
        pack_sha256 = register_suite_pack(manifest) if manifest.language_pack else None
        benchmark_of(manifest)
        files, mirror = resolve_files(manifest, data_dir=data_dir, offline=True)  # a listing downloads nothing
    except BiascheckError as exc:
        if exc.field and exc.field.startswith("data.") and "was not found" in exc.problem:
            missing = manifest.data[exc.field[len("data.") :]].path
            return SuiteCount(manifest.benchmark, problem=f"no counts: {missing} is {nowhere}")
        return SuiteCount(manifest.benchmark, problem=f"no counts: {exc}")
    entry = None if price or config.store_path is not None else _entry(manifest, files, pack_sha256, config, nowhere)
    if entry is not None and (hit := _read(entry)) is not None:
        return hit
    counted = _count(manifest, files, mirror, pack_sha256, config, nowhere, price)
    if entry is not None and counted.cases is not None:
        _write(entry, counted)
    return counted


def _count(manifest: SuiteManifest, files, mirror, pack_sha256, config: RunConfig, nowhere: str, price: bool) -> SuiteCount:
    try:
        suite = build_suite(manifest, files, mirror, pack_sha256)
    except BiascheckError as exc:
        return SuiteCount(manifest.benchmark, problem=f"no counts: {exc}")
    skipped = sorted(suite.skipped_categories)
    if skipped and not suite.cases:
        return SuiteCount(manifest.benchmark, problem=f"no counts: its data files are {nowhere}")
    try:
        (counted,) = estimate([(suite, suite.cases)], config, store=config.store_path, price=price)
    except BiascheckError as exc:
        return SuiteCount(manifest.benchmark, problem=f"no counts: {exc}")
    note = None
    if skipped:
        # Only the files that could not be had: a category may lack one of its files (CBBQ's age
        # has its ambiguous half in the mirror and not its disambiguated one).
        missing = [
            manifest.data[key].path
            for key, category in manifest.data_categories.items()
            if category in skipped and (key not in suite.files or suite.files[key].local is None)
        ]
        note = (
            f"{missing_data_summary(skipped, suite.categories_total)}: {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} {nowhere}; "
            f"the counts leave them out, and a run without them is a failed check unless {ALLOW_MISSING_DATA}"
        )
    model, *judges = counted.shares
    return SuiteCount(
        manifest.benchmark,
        cases=counted.cases,
        model_calls=model.calls,
        judge_calls=tuple(JudgeCalls(j.calls, j.uncertain) for j in judges),
        problem=note,
        estimate=counted,
    )


@functools.cache
def _code_digest() -> str:
    """biascheck's own files (code, shipped suites, packs, schemas), read once a process."""
    package = Path(__file__).parent
    digest = hashlib.sha256()
    for file in sorted(package.rglob("*")):
        if file.suffix in {".py", ".toml", ".json", ".csv", ".jsonl"} and "__pycache__" not in file.parts:
            digest.update(str(file.relative_to(package)).encode() + b"\0" + file.read_bytes() + b"\0")
    return digest.hexdigest()


def _file_id(resolved: Resolved) -> list[object]:
    if resolved.local is None:
        return [None, resolved.reason]
    stat = resolved.local.stat()
    return [str(resolved.local.resolve()), resolved.pin, stat.st_size, stat.st_mtime_ns]


def _entry(manifest: SuiteManifest, files: dict[str, Resolved], pack_sha256: str | None, config: RunConfig, nowhere: str) -> Path | None:
    try:
        key = [
            _FORMAT,
            _code_digest(),
            sha256_text(manifest.path.read_text(encoding="utf-8")),
            pack_sha256,
            {name: _file_id(resolved) for name, resolved in sorted(files.items())},
            config.estimator,
            config.model.params,
            config.model.api_base,
            nowhere,
        ]
        return default_cache_dir() / "counts" / f"{sha256_text(canonical_json(key))[:32]}.json"
    except (OSError, TypeError, ValueError):
        return None


def _read(entry: Path) -> SuiteCount | None:
    try:
        held = json.loads(entry.read_text(encoding="utf-8"))
        return SuiteCount(
            benchmark=held["benchmark"],
            cases=held["cases"],
            model_calls=held["model_calls"],
            judge_calls=tuple(JudgeCalls(**judge) for judge in held["judge_calls"]),
            problem=held["problem"],
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write(entry: Path, counted: SuiteCount) -> None:
    held = {
        "benchmark": counted.benchmark,
        "cases": counted.cases,
        "model_calls": counted.model_calls,
        "judge_calls": [asdict(judge) for judge in counted.judge_calls],
        "problem": counted.problem,
    }
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(entry, json.dumps(held, sort_keys=True))
    except OSError:
        pass  # a cache that cannot be written only costs the next listing its speed
