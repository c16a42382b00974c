"""biascheck suites' counts kept in the download cache and shipped with the packaged suites
(biascheck/listing.py): a kept or shipped count is the count made again, and whatever it depends
on makes a new one."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from biascheck.cli import main
from biascheck.config.catalog import packaged_suites, packaged_suites_dir
from biascheck.config.manifest import load_manifest
from biascheck.core.errors import BiascheckError
from biascheck.listing import SHIPPED_COUNTS, shipped_count, shipped_key
from biascheck.suite import register_suite_pack, resolve_files

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "own-bbq"
REMAKE = "python -m biascheck.listing --data ../shared/datasets"
# The shipped counts made again in the default run: one suite of each kind of count (QA, judged
# stories, hidden bias) and of each benchmark whose count is cheap; -m slow makes every one again.
CHEAP = ["kobbq-quick", "kobbg-quick", "enbbg-quick", "hbb", "bbq-quick"]


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("BIASCHECK_CACHE_DIR", str(folder))
    return folder


def listed(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["suites", *args]) == 0
    return capsys.readouterr().out


def entries(cache: Path) -> list[Path]:
    return sorted((cache / "counts").glob("*.json"))


def test_a_kept_count_is_the_count_made_again(tmp_path, cache, capsys, tiny_kobbq):
    example = shutil.copytree(EXAMPLE, tmp_path / "own-bbq")
    first = listed(capsys, str(tiny_kobbq), str(example))
    assert len(entries(cache)) == 2
    kept = listed(capsys, str(tiny_kobbq), str(example))
    assert kept == first
    shutil.rmtree(cache)
    assert listed(capsys, str(tiny_kobbq), str(example)) == first  # and made again from nothing


def test_an_edited_manifest_is_counted_again(cache, capsys, tiny_kobbq):
    before = listed(capsys, str(tiny_kobbq))
    manifest = tiny_kobbq / "suite.toml"
    manifest.write_text(manifest.read_text("utf-8").replace("templates_per_category = 1", "templates_per_category = 2"), "utf-8")
    after = listed(capsys, str(tiny_kobbq))
    assert after != before and len(entries(cache)) == 2
    cases = [int(line.split()[3].replace(",", "")) for line in (before, after) for line in line.splitlines()[1:2]]
    assert cases[1] > cases[0]


def test_a_touched_data_file_is_counted_again(tmp_path, cache, capsys):
    example = shutil.copytree(EXAMPLE, tmp_path / "own-bbq")
    first = listed(capsys, str(example))
    data = example / "data" / "age.csv"
    stat = data.stat()
    os.utime(data, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert listed(capsys, str(example)) == first
    assert len(entries(cache)) == 2  # not read from the kept entry: the file may have changed


def test_a_damaged_entry_is_counted_around(tmp_path, cache, capsys):
    example = shutil.copytree(EXAMPLE, tmp_path / "own-bbq")
    first = listed(capsys, str(example))
    (entry,) = entries(cache)
    entry.write_text('{"benchmark": "bbq", "cases": ', "utf-8")
    assert listed(capsys, str(example)) == first
    cases = first.splitlines()[1].split()[3]
    assert f"{json.loads(entry.read_text('utf-8'))['cases']:,}" == cases  # written again, whole


def test_counts_with_a_store_or_a_price_are_never_kept(tmp_path, cache, capsys):
    example = shutil.copytree(EXAMPLE, tmp_path / "own-bbq")
    listed(capsys, "--model", "sim/fair", str(example))
    listed(capsys, "--model", "sim/fair", "--cache", str(tmp_path / "store.sqlite"), str(example))
    assert entries(cache) == []


def shipped() -> dict[str, dict]:
    return json.loads((packaged_suites_dir() / SHIPPED_COUNTS).read_text("utf-8"))["counts"]


def test_the_shipped_counts_are_those_of_the_packaged_manifests_as_the_mirror_holds_their_files(data_dir):
    """Every packaged suite whose files the mirror has is read from the shipped counts, so the first
    listing builds no suite: a manifest edited without the counts made again fails here."""
    counts, expected = shipped(), set()
    for name, path in packaged_suites().items():
        manifest = load_manifest(path)
        pack = register_suite_pack(manifest) if manifest.language_pack else None
        try:
            files, _ = resolve_files(manifest, data_dir=data_dir, offline=True)
        except BiascheckError:  # a file it cannot do without is not in the mirror (MBBQ's): listed without counts
            continue
        key = shipped_key(manifest, files, pack, listing_config())
        assert key in counts and counts[key]["suite"] == name, f"{SHIPPED_COUNTS} has no count of {name} as it is now: run {REMAKE}"
        expected.add(key)
    assert set(counts) == expected, f"{SHIPPED_COUNTS} holds counts of no packaged suite: run {REMAKE}"


def listing_config():
    """The run a plain ``biascheck suites`` counts."""
    from biascheck.cli.main import parser
    from biascheck.cli.suites import _suites_run_config

    return _suites_run_config(parser().parse_args(["suites"]))


@pytest.mark.parametrize("name", [pytest.param(name, marks=[] if name in CHEAP else [pytest.mark.slow]) for name in packaged_suites()])
def test_a_shipped_count_is_the_count_made_again(name, data_dir):
    made = shipped_count(packaged_suites()[name], data_dir)
    if made is None:
        assert name not in {count["suite"] for count in shipped().values()}
        return
    key, held = made
    assert shipped().get(key) == {"suite": name, **held}, f"run {REMAKE}"


def test_a_packaged_suite_is_listed_from_its_shipped_count_until_its_copy_is_edited(tmp_path, cache, capsys, data_dir):
    copy = shutil.copytree(packaged_suites()["kobbq-quick"], tmp_path / "kobbq-quick")
    shipped_line = listed(capsys, "--data", str(data_dir), str(copy))
    assert entries(cache) == []  # read from the shipped counts: nothing counted, nothing kept
    listed(capsys, "--data", str(data_dir), "--answer-mode", "loglikelihood", str(copy))
    assert len(entries(cache)) == 1  # another answer mode than the manifest's: counted, and kept
    manifest = copy / "suite.toml"
    text = manifest.read_text("utf-8")
    assert "templates_per_category = 5" in text
    manifest.write_text(text.replace("templates_per_category = 5", "templates_per_category = 4"), "utf-8")
    edited = listed(capsys, "--data", str(data_dir), str(copy))
    assert len(entries(cache)) == 2
    cases = [int(out.splitlines()[1].split()[3].replace(",", "")) for out in (shipped_line, edited)]
    assert cases[1] < cases[0]


@pytest.mark.parametrize("damage", ["", "{", '{"format": 1, "counts": {"KEY": {"cases": -1}}}', '{"format": 99, "counts": {}}', "[1, 2]"])
def test_a_damaged_shipped_file_is_counted_around(tmp_path, cache, capsys, data_dir, monkeypatch, damage):
    """A counts.json that cannot be read, of another layout, or whose entry is not a count is never
    trusted: the suite is counted, and the line is the shipped one."""
    import biascheck.listing as listing

    copy = shutil.copytree(packaged_suites()["kobbq-quick"], tmp_path / "kobbq-quick")
    shipped_line = listed(capsys, "--data", str(data_dir), str(copy))
    folder = tmp_path / "damaged"
    folder.mkdir()
    key = next(key for key, count in shipped().items() if count["suite"] == "kobbq-quick")
    (folder / SHIPPED_COUNTS).write_text(damage.replace("KEY", key), "utf-8")
    monkeypatch.setattr(listing, "packaged_suites_dir", lambda: folder)
    listing._shipped.cache_clear()
    try:
        assert listed(capsys, "--data", str(data_dir), str(copy)) == shipped_line
        assert len(entries(cache)) == 1  # counted, and kept in the download cache
    finally:
        listing._shipped.cache_clear()
