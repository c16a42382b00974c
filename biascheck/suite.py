"""A loaded suite: manifest + resolved data files -> cases, with its fingerprint.

This is the first stage of the pipeline and needs neither pytest nor litellm.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from biascheck.benchmarks.base import benchmark_of, get_benchmark
from biascheck.config.manifest import SuiteManifest, canonical_json, load_manifest, sha256_text
from biascheck.config.sources import Resolved, resolve
from biascheck.core.errors import BiascheckError
from biascheck.core.records import Case

# Bump when a metric definition changes: baselines computed under another version are not comparable.
METRICS_VERSION = 1


def default_cache_dir() -> Path:
    base = os.environ.get("BIASCHECK_CACHE_DIR") or os.path.join(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache", "biascheck")
    return Path(base)


def env_data_dir() -> Path | None:
    value = os.environ.get("BIASCHECK_DATA_DIR")
    return Path(value) if value else None


def env_offline() -> bool:
    return os.environ.get("BIASCHECK_OFFLINE", "").lower() in ("1", "true", "yes")


@dataclass
class Suite:
    manifest: SuiteManifest
    cases: list[Case]
    prompts: list
    files: dict[str, Resolved]
    skipped_categories: dict[str, str] = field(default_factory=dict)
    _by_id: dict[str, Case] | None = field(default=None, repr=False, compare=False)

    @property
    def name(self) -> str:
        return self.manifest.name

    @property
    def benchmark(self):
        return get_benchmark(self.manifest.benchmark)

    def case(self, case_id: str) -> Case:
        if self._by_id is None:
            self._by_id = {case.case_id: case for case in self.cases}
        return self._by_id[case_id]

    @property
    def categories(self) -> list[str]:
        return sorted({case.category for case in self.cases})

    def fingerprint(self, judge: Mapping[str, Any] | None = None, scoring: Mapping[str, str] | None = None) -> dict[str, str | int]:
        """What makes two runs of this suite comparable: data, prompts, subset, metric definitions,
        the benchmark's own settings, and for a judged benchmark the judge's model and parameters and
        how what it could not read was scored (``scoring``; default the benchmark's)."""
        # Each file by its pin: the sha256 where known (so fingerprints made before blob ids stay as
        # they were), else its git blob id.
        data = sorted((key, r.file.pin) for key, r in self.files.items() if r.local is not None)
        prompts = [[p.id, p.template, p.unknown, list(p.letters)] for p in self.prompts]
        m = self.manifest
        subset = [m.benchmark, sorted(m.categories), m.choice_orders, m.sample, m.subset_seed, m.templates_per_category]
        subset += self.benchmark.fingerprint_settings(m)
        parts: dict[str, str | int] = {
            "data": sha256_text(canonical_json(data))[:16],
            "prompts": sha256_text(canonical_json(prompts))[:16],
            "subset": sha256_text(canonical_json(subset))[:16],
            "metrics_version": METRICS_VERSION,
        }
        if judge is not None:
            parts["judge"] = sha256_text(canonical_json(judge))[:16]
        if scoring is None:
            scoring = self.benchmark.default_scoring(m)
        if scoring:  # kept readable, so a refused comparison can say which convention each side used
            parts["scoring"] = ",".join(f"{key}={value}" for key, value in sorted(scoring.items()))
        parts["suite"] = sha256_text(canonical_json(parts))[:16]
        return parts


@dataclass(frozen=True)
class Shard:
    """Part ``index`` of ``count`` disjoint parts of every suite's cases (``--biascheck-shard K/N``).

    A case belongs to the part its cluster (its template, question or story pair) hashes to, with
    sha256 so every machine agrees: the parts never overlap and together cover the suite, and an
    item's cases (an HBB instance pairs two of one question) stay in one part."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str, where: str = "--biascheck-shard") -> Shard:
        index, slash, count = text.strip().partition("/")
        if slash and index.strip().isdigit() and count.strip().isdigit() and 1 <= int(index) <= int(count):
            return cls(int(index), int(count))
        raise BiascheckError(where, None, f"{text!r} is not a shard", "give K/N with 1 <= K <= N, e.g. 2/4 for the second of four")

    def holds(self, case: Case) -> bool:
        digest = hashlib.sha256(case.cluster.encode("utf-8")).digest()
        return int.from_bytes(digest[:8], "big") % self.count == self.index - 1

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def _suite_folder(suite: Path | str) -> Path | str:
    """A suite folder, or a bare name (``"kobbq"``) that is no file or folder here: the packaged suite."""
    from biascheck.config.catalog import looks_like_a_name, packaged_suite

    if isinstance(suite, str) and looks_like_a_name(suite) and not Path(suite).exists():
        return packaged_suite(suite, where="load_suite")
    return suite


def load_suite(
    suite_dir: Path | str,
    *,
    data_dir: Path | None = None,
    cache_dir: Path | None = None,
    offline: bool | None = None,
) -> Suite:
    """The suite in ``suite_dir`` (a folder, its suite.toml, or a packaged suite's name) with its
    data files resolved (``data_dir``: a mirror, else BIASCHECK_DATA_DIR; then the cache; then a
    download unless ``offline``) and its cases built."""
    manifest = load_manifest(_suite_folder(suite_dir))
    benchmark = benchmark_of(manifest)
    mirror = data_dir if data_dir is not None else env_data_dir()
    cache = cache_dir if cache_dir is not None else default_cache_dir() / "data"
    files = {
        key: resolve(
            file,
            manifest_path=manifest.path,
            mirror=mirror,
            cache_dir=cache,
            offline=env_offline() if offline is None else offline,
        )
        for key, file in manifest.data.items()
    }
    built = benchmark.build_cases(manifest, files)
    return Suite(manifest=manifest, cases=built.cases, prompts=built.prompts, files=files, skipped_categories=built.skipped_categories)
