"""biascheck suites' counts kept in the download cache (biascheck/listing.py): a kept count is the
count made again, and whatever it depends on makes a new one."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from biascheck.cli import main

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "own-bbq"


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
