"""A loaded suite: manifest + resolved data files -> cases, with its fingerprint.

This is the first stage of the pipeline and needs neither pytest nor litellm.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from biascheck.benchmarks.base import Prompt, benchmark_of, get_benchmark
from biascheck.benchmarks.languages import load_pack, register_pack
from biascheck.config.catalog import suite_folder
from biascheck.config.manifest import SuiteManifest, canonical_json, load_manifest, sha256_text
from biascheck.config.sources import MIRROR_OPTION, Resolved, resolve
from biascheck.core.errors import BiascheckError
from biascheck.core.garbage import collector_paused
from biascheck.core.records import Case
from biascheck.core.spelling import Option

# Bump when a metric definition changes: baselines computed under another version are not comparable.
METRICS_VERSION = 1

# A category whose data file can be had nowhere (not in the mirror or the cache, and no download)
# is left out of the run, and that is a failed check unless the run accepts the gap with this flag:
# a BBQ run of 6 of its 11 categories is not a BBQ run.
ALLOW_MISSING_DATA = "--biascheck-allow-missing-data"
MISSING_DATA_FIX = (
    "point --biascheck-data at a mirror that has the file, or allow downloads (unset BIASCHECK_OFFLINE), "
    f"or pass {ALLOW_MISSING_DATA} to run without it"
)


def missing_data_summary(missing: Iterable[str], total: int | None = None) -> str:
    """How every report says it: "5 of 11 categories have no data (Gender_identity, ...)"."""
    names = sorted(missing)
    noun = "category" if len(names) == 1 and not total else "categories"
    of = f" of {total}" if total else ""
    return f"{len(names)}{of} {noun} {'has' if len(names) == 1 else 'have'} no data ({', '.join(names)})"


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
    prompts: Sequence[Prompt]
    files: dict[str, Resolved]
    # Categories left out because their (optional) data file could be had nowhere: category -> why.
    skipped_categories: dict[str, str] = field(default_factory=dict)
    # What the data says against itself: category -> finding -> records (BuiltCases.data_quality).
    data_quality: dict[str, dict[str, int]] = field(default_factory=dict)
    # The mirror its files were looked for in (load_suite's data_dir, else BIASCHECK_DATA_DIR): a
    # run's simulator reads the suite from the same one.
    data_dir: Path | None = None
    # The digest of the words of the language pack the suite ships ([suite] language_pack; not of
    # its comments), None for none: they decide how replies are read, so the fingerprint holds it
    # as it holds the prompts.
    language_pack_sha256: str | None = None
    _by_id: dict[str, Case] | None = field(default=None, repr=False, compare=False)

    def __repr__(self) -> str:
        # Short: a traceback pytest formats on Ctrl-C shows each frame's arguments, and the default
        # repr of a suite rendered every case (seconds for KoBBQ's 34,200).
        return f"Suite({self.manifest.name!r}, {len(self.cases)} cases)"

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
    def unpinned_data(self) -> dict[str, str]:
        """The files the manifest pins by no checksum, read as --biascheck-allow-unpinned-data
        allows: data key -> the sha256 of what was read (results.json's suite.unpinned_data)."""
        return {key: r.content_sha256 or "" for key, r in sorted(self.files.items()) if r.unpinned and r.local is not None}

    @property
    def categories(self) -> list[str]:
        return sorted({case.category for case in self.cases})

    @property
    def categories_total(self) -> int:
        """The suite's categories, those without data included."""
        return len(set(self.categories) | set(self.skipped_categories))

    def fingerprint(self, judge: Mapping[str, Any] | None = None, scoring: Mapping[str, str] | None = None) -> dict[str, str | int]:
        """What makes two runs of this suite comparable: data, prompts, subset, metric definitions,
        the benchmark's own settings, and for a judged benchmark the judge's model and parameters and
        how what it could not read was scored (``scoring``; default the benchmark's), and which
        categories had no data (``missing``, kept readable, present only when some had none)."""
        m = self.manifest
        selected = set(m.categories)

        def measured(key: str) -> bool:
            # A category file [subset] categories leaves out is no part of what the run measures,
            # whether this machine has it or not.
            return not selected or key not in m.data_categories or m.data_categories[key] in selected

        # Each file by its pin: the sha256 where known (so fingerprints made before blob ids stay as
        # they were), else its git blob id.
        data = sorted((key, r.pin) for key, r in self.files.items() if r.local is not None and measured(key))
        prompts = [[p.id, p.template, p.unknown, list(p.letters)] for p in self.prompts]
        if self.language_pack_sha256 is not None:  # only then: the fingerprints of other suites stay as they were
            prompts.append(["language_pack", self.language_pack_sha256])
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
        if self.skipped_categories:  # readable too: a comparison of a whole run with a partial one says which
            parts["missing"] = ",".join(sorted(self.skipped_categories))
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
    def parse(cls, text: str, where: object = Option("shard")) -> Shard:
        index, slash, count = text.strip().partition("/")
        if slash and index.strip().isdigit() and count.strip().isdigit() and 1 <= int(index) <= int(count):
            return cls(int(index), int(count))
        raise BiascheckError(where, None, f"{text!r} is not a shard", "give K/N with 1 <= K <= N, e.g. 2/4 for the second of four")

    def holds(self, case: Case) -> bool:
        digest = hashlib.sha256(case.cluster.encode("utf-8")).digest()
        return int.from_bytes(digest[:8], "big") % self.count == self.index - 1

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def register_suite_pack(manifest: SuiteManifest) -> str:
    """Load the language pack a suite ships (``[suite] language_pack``, beside its manifest) and
    register it, so that this process's parser reads its words and its simulator writes them; the
    suite's ``language`` must be the pack's code. Returns the sha256 of the pack's fields (its
    words and sentences, not its comments or layout)."""
    path = manifest.directory / manifest.language_pack
    if not path.is_file():
        raise BiascheckError(
            manifest.path,
            "suite.language_pack",
            f"{manifest.language_pack!r} is no file beside the manifest",
            "give the pack's path relative to suite.toml",
        )
    pack = load_pack(path)
    if manifest.language != pack.code:
        stated = f"language {manifest.language!r}" if manifest.language else "no language"
        raise BiascheckError(
            manifest.path,
            "suite.language",
            f"states {stated}, but its pack {manifest.language_pack} is {pack.code!r}",
            f'set language = "{pack.code}"',
        )
    register_pack(pack, path)
    return sha256_text(canonical_json(dataclasses.asdict(pack)))


def load_suite(
    suite_dir: Path | str,
    *,
    data_dir: Path | None = None,
    cache_dir: Path | None = None,
    offline: bool | None = None,
    data_option: object = MIRROR_OPTION,
    allow_unpinned: bool = False,
) -> Suite:
    """The suite in ``suite_dir`` (a folder, its suite.toml, or a packaged suite's name) with its
    data files resolved (``data_dir``: a mirror, else BIASCHECK_DATA_DIR; a suite whose manifest
    names its own folder, ``[suite] data``, reads there instead; then the cache; then a download
    unless ``offline``) and its cases built. ``data_option``: how the caller names the mirror in an
    error (the plugin's option by default; the Python API's argument in ``biascheck.load_suite``).
    ``allow_unpinned``: accept files the manifest pins by no checksum (``--biascheck-allow-unpinned-data``)."""
    manifest = load_manifest(suite_folder(suite_dir))
    pack_sha256 = register_suite_pack(manifest) if manifest.language_pack else None
    benchmark_of(manifest)  # an unknown benchmark is named before any file is looked for
    files, mirror = resolve_files(
        manifest, data_dir=data_dir, cache_dir=cache_dir, offline=offline, data_option=data_option, allow_unpinned=allow_unpinned
    )
    return build_suite(manifest, files, mirror, pack_sha256)


def resolve_files(
    manifest: SuiteManifest,
    *,
    data_dir: Path | None = None,
    cache_dir: Path | None = None,
    offline: bool | None = None,
    data_option: object = MIRROR_OPTION,
    allow_unpinned: bool = False,
) -> tuple[dict[str, Resolved], Path | None]:
    """The manifest's data files, found and verified as :func:`load_suite` finds them, and the
    mirror they were looked for in; no case is built."""
    mirror = data_dir if data_dir is not None else env_data_dir()
    folder = manifest.data_folder if manifest.data_folder is not None else mirror
    if manifest.data_folder is not None and not manifest.data_folder.is_dir():
        raise BiascheckError(
            manifest.path,
            "suite.data",
            f"{manifest.data_folder} is not a folder",
            "give the folder of the suite's data files, relative to the manifest",
        )
    cache = cache_dir if cache_dir is not None else default_cache_dir() / "data"
    files = {
        key: resolve(
            file,
            manifest_path=manifest.path,
            mirror=folder,
            cache_dir=cache,
            offline=env_offline() if offline is None else offline,
            mirror_option=data_option if manifest.data_folder is None else f"{manifest.path}: suite.data",
            allow_unpinned=allow_unpinned,
        )
        for key, file in manifest.data.items()
    }
    return files, mirror


def build_suite(manifest: SuiteManifest, files: dict[str, Resolved], mirror: Path | None, pack_sha256: str | None) -> Suite:
    """The suite of ``manifest`` with its cases built from ``files`` (:func:`resolve_files`);
    ``pack_sha256``: what :func:`register_suite_pack` returned for the pack it ships, if any."""
    benchmark = benchmark_of(manifest)
    with collector_paused():
        built = benchmark.build_cases(manifest, files)
    return Suite(
        manifest=manifest,
        cases=built.cases,
        prompts=built.prompts,
        files=files,
        skipped_categories=built.skipped_categories,
        data_quality=built.data_quality,
        data_dir=Path(mirror) if mirror is not None else None,
        language_pack_sha256=pack_sha256,
    )
