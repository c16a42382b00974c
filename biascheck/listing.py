"""``biascheck suites``' counts: each suite's cases and the model calls of a whole run, without a
model. Counting means building every case and keying every request (a full suite takes 1-6 s of
CPU, every packaged suite 40 s), so counts without ``--model`` and ``--cache`` are read from two
places before they are made:

- the counts shipped with the packaged suites (``suites/counts.json``, made by ``python -m
  biascheck.listing --data DIR``), for a manifest's own answer mode and parameters: keyed by the
  manifest, byte for byte, its language pack and each data file's pin, or that it is missing. A
  pinned file that resolves is verified against its pin, so the key names its content. A copy of
  a packaged suite whose manifest is unchanged reads them too. tests/test_listing.py checks them
  against counts made again (all of them under ``-m slow``);
- the download cache (``counts/``), keyed by everything a count depends on:

- biascheck's own code (every module and shipped file of the package): a new release or an edit
  counts again;
- the suite's manifest, byte for byte, and the words of the language pack it ships;
- each data file the manifest names: where it was found, its pin, size and modification time
  (the files are verified against their pins whenever they are resolved, hits included);
- the answer mode, the sampling parameters and the API base asked for, and the mirror.

A cache or shipped file that cannot be read or written is counted around, never trusted: the
counts are made again.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from biascheck.config.catalog import packaged_suites, packaged_suites_dir
from biascheck.config.manifest import SuiteManifest, canonical_json, load_manifest, sha256_text
from biascheck.config.sources import Resolved
from biascheck.core.errors import BiascheckError
from biascheck.core.files import atomic_write_text
from biascheck.dryrun import SuiteEstimate, estimate
from biascheck.execution.llm import ModelConfig
from biascheck.session import RunConfig
from biascheck.suite import ALLOW_MISSING_DATA, benchmark_of, build_suite, default_cache_dir, missing_data_summary, register_suite_pack, resolve_files

__all__ = ["SHIPPED_COUNTS", "SuiteCount", "count_suite"]

# The cache's layout: a change of what an entry holds counts everything again.
_FORMAT = 2
# The shipped counts' file, beside the packaged suites, and its layout.
SHIPPED_COUNTS = "counts.json"
_SHIPPED_FORMAT = 1


@dataclass(frozen=True)
class JudgeCalls:
    calls: int
    uncertain: int


@dataclass(frozen=True)
class SuiteCount:
    """One suite's line: its benchmark, cases and calls (None: not counted, ``problem`` says why),
    and a note on what the counts leave out. ``estimate``: the whole estimate, when counted now
    (a kept or shipped count has none; ``biascheck suites --model`` reads neither)."""

    benchmark: str
    cases: int | None = None
    model_calls: int | None = None
    judge_calls: tuple[JudgeCalls, ...] = ()
    problem: str | None = None
    estimate: SuiteEstimate | None = None


def count_suite(path: Path, config: RunConfig, *, data_dir: Path | None, nowhere: str, price: bool) -> SuiteCount:
    """The counts of the suite folder ``path`` under ``config`` (its store: requests it answers are
    not calls). ``nowhere``: how a line says a data file is missing; ``price``: price the calls.
    Counts that depend on no store and no price are read from the shipped counts, then from the
    download cache, and kept there when made."""
    try:
        manifest = load_manifest(path)
    except BiascheckError as exc:
        return SuiteCount("?", problem=f"not a valid suite: {exc}")
    try:
        pack_sha256, files, mirror = _resolved(manifest, data_dir)
    except BiascheckError as exc:
        if exc.field and exc.field.startswith("data.") and "was not found" in exc.problem:
            missing = manifest.data[exc.field[len("data.") :]].path
            return SuiteCount(manifest.benchmark, problem=f"no counts: {missing} is {nowhere}")
        return SuiteCount(manifest.benchmark, problem=f"no counts: {exc}")
    kept = not price and config.store_path is None
    if kept and (key := shipped_key(manifest, files, pack_sha256, config)) is not None and (held := _shipped().get(key)) is not None:
        return _line(held, manifest, files, nowhere)
    entry = _entry(manifest, files, pack_sha256, config) if kept else None
    if entry is not None and (held := _read(entry)) is not None:
        return _line(held, manifest, files, nowhere)
    counted, held = _count(manifest, files, mirror, pack_sha256, config, nowhere, price)
    if entry is not None and held is not None:
        _write(entry, held)
    return counted


def _resolved(manifest: SuiteManifest, data_dir: Path | None) -> tuple[str | None, dict[str, Resolved], Path | None]:
    """The manifest's pack registered (its sha256), its benchmark checked, and its data files found
    and verified, offline: a listing downloads nothing."""
    pack_sha256 = register_suite_pack(manifest) if manifest.language_pack else None
    benchmark_of(manifest)
    files, mirror = resolve_files(manifest, data_dir=data_dir, offline=True)
    return pack_sha256, files, mirror


def _count(
    manifest: SuiteManifest, files: dict[str, Resolved], mirror: Path | None, pack_sha256: str | None, config: RunConfig, nowhere: str, price: bool
) -> tuple[SuiteCount, dict[str, Any] | None]:
    """The suite's line, counted now, and what a kept count holds of it (None: nothing counted)."""
    try:
        suite = build_suite(manifest, files, mirror, pack_sha256)
    except BiascheckError as exc:
        return SuiteCount(manifest.benchmark, problem=f"no counts: {exc}"), None
    if suite.skipped_categories and not suite.cases:
        return SuiteCount(manifest.benchmark, problem=f"no counts: its data files are {nowhere}"), None
    try:
        (counted,) = estimate([(suite, suite.cases)], config, store=config.store_path, price=price)
    except BiascheckError as exc:
        return SuiteCount(manifest.benchmark, problem=f"no counts: {exc}"), None
    model, *judges = counted.shares
    held = {
        "benchmark": manifest.benchmark,
        "cases": counted.cases,
        "model_calls": model.calls,
        "judge_calls": [{"calls": j.calls, "uncertain": j.uncertain} for j in judges],
        "skipped": sorted(suite.skipped_categories),
        "categories_total": suite.categories_total,
    }
    return replace(_line(held, manifest, files, nowhere), estimate=counted), held


def _line(held: dict[str, Any], manifest: SuiteManifest, files: dict[str, Resolved], nowhere: str) -> SuiteCount:
    """A suite's line from what a count holds; the note on the categories left out is written here,
    for this listing's mirror."""
    skipped = held["skipped"]
    note = None
    if skipped:
        # Only the files that could not be had: a category may lack one of its files (CBBQ's age
        # has its ambiguous half in the mirror and not its disambiguated one).
        missing = [
            manifest.data[key].path
            for key, category in manifest.data_categories.items()
            if category in skipped and (key not in files or files[key].local is None)
        ]
        note = (
            f"{missing_data_summary(skipped, held['categories_total'])}: {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} {nowhere}; "
            f"the counts leave them out, and a run without them is a failed check unless {ALLOW_MISSING_DATA}"
        )
    return SuiteCount(
        held["benchmark"],
        cases=held["cases"],
        model_calls=held["model_calls"],
        judge_calls=tuple(JudgeCalls(judge["calls"], judge["uncertain"]) for judge in held["judge_calls"]),
        problem=note,
    )


def shipped_key(manifest: SuiteManifest, files: dict[str, Resolved], pack_sha256: str | None, config: RunConfig) -> str | None:
    """The key of a suite's shipped count: None when the count asked for is not a manifest's own
    (an answer mode, parameters or an API base given) or a file is pinned by no checksum."""
    if config.estimator is not None or config.model.params or config.model.api_base is not None:
        return None
    if any(resolved.unpinned for resolved in files.values()):
        return None
    key = [
        _SHIPPED_FORMAT,
        sha256_text(manifest.path.read_text(encoding="utf-8")),
        pack_sha256,
        {name: None if resolved.missing else resolved.pin for name, resolved in sorted(files.items())},
    ]
    return sha256_text(canonical_json(key))[:32]


@functools.cache
def _shipped() -> dict[str, dict[str, Any]]:
    """The shipped counts, read once a process; an unreadable file is no counts."""
    try:
        held = json.loads((packaged_suites_dir() / SHIPPED_COUNTS).read_text(encoding="utf-8"))
        counts = held["counts"] if held.get("format") == _SHIPPED_FORMAT else {}
        return {key: value for key, value in counts.items() if _holds_a_count(value)}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def _holds_a_count(held: object) -> bool:
    return isinstance(held, dict) and {"benchmark", "cases", "model_calls", "judge_calls", "skipped", "categories_total"} <= held.keys()


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


def _entry(manifest: SuiteManifest, files: dict[str, Resolved], pack_sha256: str | None, config: RunConfig) -> Path | None:
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
        ]
        return default_cache_dir() / "counts" / f"{sha256_text(canonical_json(key))[:32]}.json"
    except (OSError, TypeError, ValueError):
        return None


def _read(entry: Path) -> dict[str, Any] | None:
    try:
        held = json.loads(entry.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return held if _holds_a_count(held) else None


def _write(entry: Path, held: dict[str, Any]) -> None:
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(entry, json.dumps(held, sort_keys=True))
    except OSError:
        pass  # a cache that cannot be written only costs the next listing its speed


def shipped_count(path: Path, data_dir: Path | None) -> tuple[str, dict[str, Any]] | None:
    """The shipped count of the suite folder ``path`` and its key, counted now with the manifest's
    own answer mode and parameters from the files in ``data_dir`` or the download cache; None when
    it has none (a file it cannot do without is missing, or no case could be built)."""
    config = RunConfig(model=ModelConfig("sim/fair"), store_path=None, data_dir=data_dir)  # type: ignore[arg-type]
    manifest = load_manifest(path)
    try:
        pack_sha256, files, mirror = _resolved(manifest, data_dir)
    except BiascheckError:
        return None
    key = shipped_key(manifest, files, pack_sha256, config)
    _, held = _count(manifest, files, mirror, pack_sha256, config, "", price=False)
    return (key, held) if key is not None and held is not None else None


def ship_counts(data_dir: Path) -> dict[str, Any]:
    """The shipped counts' file: every packaged suite's :func:`shipped_count` (none for a suite
    whose files are not there)."""
    counts = {}
    for name, path in packaged_suites().items():
        if (shipped := shipped_count(path, data_dir)) is not None:
            counts[shipped[0]] = {"suite": name, **shipped[1]}
    return {"format": _SHIPPED_FORMAT, "made_by": "python -m biascheck.listing --data DIR", "counts": counts}


def _main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m biascheck.listing", description=f"Count every packaged suite and write {SHIPPED_COUNTS} beside them."
    )
    parser.add_argument("--data", type=Path, required=True, help="the benchmark files' mirror (../shared/datasets in CI)")
    args = parser.parse_args(argv)
    target = packaged_suites_dir() / SHIPPED_COUNTS
    atomic_write_text(target, json.dumps(ship_counts(args.data), indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
