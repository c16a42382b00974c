"""The ``biascheck`` command's own options."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import biascheck


def test_version_is_the_package_version():
    done = subprocess.run([sys.executable, "-m", "biascheck.cli", "--version"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout == f"biascheck {biascheck.__version__}\n"


def test_the_version_is_the_projects():
    import tomllib

    from biascheck.core.version import VERSION

    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]
    assert VERSION == project["version"]


# --- one line, never a traceback (issue 23) -------------------------------------------------------


def _one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def damaged_store(path: Path) -> Path:
    """A biascheck store whose header and schema are intact and whose table pages are garbage:
    it opens, and reading its rows fails with 'database disk image is malformed'."""
    import sqlite3
    from contextlib import closing

    from biascheck.execution.store import ResponseStore, StoredResponse

    with ResponseStore(path) as store:
        store.put_many([(f"{i:064d}", "sim/fair", {"messages": ["x" * 300]}, StoredResponse("A" * 200, "stop", {}, 0.0)) for i in range(3000)])
    with closing(sqlite3.connect(path)) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        size = db.execute("PRAGMA page_size").fetchone()[0]
        roots = db.execute("SELECT max(rootpage) FROM sqlite_master").fetchone()[0]
    data = bytearray(path.read_bytes())
    for offset in range(size * roots, len(data), 5):  # the pages after every table's root: its rows
        data[offset] = 0xAB
    path.write_bytes(bytes(data))
    return path


def test_a_store_damaged_inside_is_one_line(tmp_path, capsys):
    # Item 5: sqlite3.DatabaseError escaped the first read of the store's rows.
    import pytest

    from biascheck.core.errors import BiascheckError
    from biascheck.execution.store import ResponseStore

    store = damaged_store(tmp_path / "damaged.sqlite")
    with ResponseStore(store) as opened, pytest.raises(BiascheckError) as exc:
        opened.get_many(["0" * 64])
    assert str(exc.value).startswith(f"{store}: cannot read the response store (database disk image is malformed)"), exc.value
    assert "delete it (its answers are asked again)" in str(exc.value)


def test_biascheck_suites_on_a_damaged_store_says_so(tiny_kobbq, tmp_path, capsys):
    from biascheck.cli import main

    store = damaged_store(tmp_path / "damaged.sqlite")
    assert main(["suites", "--model", "sim/fair", "--cache", str(store), str(tiny_kobbq)]) == 0
    out = capsys.readouterr().out
    assert "cannot read the response store (database disk image is malformed)" in out, out


def test_qualify_judge_refuses_a_folder_for_json_before_any_call(tmp_path, capsys):
    # Item 7: IsADirectoryError after the whole qualification, and a temp file tried in the parent.
    from biascheck.cli import main

    assert main(["qualify-judge", "sim/judge", "--json", str(tmp_path), "--cache", str(tmp_path / "s.sqlite")]) == 2
    assert _one_line(capsys).startswith(f"biascheck: --json: {tmp_path} is a folder; "), "names the option"
    assert not (tmp_path / "s.sqlite").exists()


def test_an_atomic_write_over_a_folder_is_refused_before_any_temp_file(tmp_path):
    import pytest

    from biascheck.core.errors import BiascheckError
    from biascheck.core.files import atomic_write_text

    folder = tmp_path / "target"
    folder.mkdir()
    with pytest.raises(BiascheckError, match="is a folder"):
        atomic_write_text(folder, "x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["target"]


def test_init_into_a_folder_that_cannot_be_made_is_one_line(tmp_path, capsys):
    # Item 8: FileNotFoundError for /proc/1/x, NotADirectoryError under a file.
    from biascheck.cli import main

    for dest in ("/proc/1/x", str(tmp_path / "file" / "x")):
        (tmp_path / "file").write_text("")
        assert main(["init", "kobbq", dest]) == 2
        assert _one_line(capsys).startswith(f"biascheck: {dest}: cannot create the suite folder ("), dest


def test_an_infinite_price_is_refused(tmp_path, capsys):
    # Item 13: "inf/1" printed "at most inf USD"; nan was already refused.
    from biascheck.cli import main

    for price in ("inf/1", "1/-inf", "1e400/1", "1e300/1"):
        assert main(["suites", "--model", "openai/gpt-4o-mini", "--price", price, str(tmp_path)]) == 2
        assert _one_line(capsys).startswith(f"biascheck: --price: {price!r} is not INPUT/OUTPUT USD per million tokens"), price


def test_a_path_the_system_refuses_is_one_line_in_every_command(tmp_path, capsys):
    # Found by fuzzing: store merge with a 5,000-character input name raised OSError: File name too long.
    from biascheck.cli import main

    assert main(["store", "merge", str(tmp_path / "out.sqlite"), str(tmp_path / ("9" * 5000))]) == 2
    err = _one_line(capsys)
    assert "File name too long; check the path" in err and len(err) < 1000, err


# --- one option table, spelled by each front end (issue 38) ---------------------------------------


def test_an_error_keeps_the_options_key_and_each_front_end_spells_it(tmp_path, capsys):
    """The table names an option by its key; pytest spells it --biascheck-KEY, the command --KEY,
    and an error raised by the library for either says it that way: no text is rewritten."""
    import argparse
    from contextlib import nullcontext

    import pytest

    from biascheck.cli import main
    from biascheck.core.errors import BiascheckError
    from biascheck.core.spelling import spelled_as
    from biascheck.options import COMMAND, add_command_options, command_settings, run_config

    parser = argparse.ArgumentParser()
    add_command_options(parser)
    settings = command_settings(parser.parse_args([]))
    for context, name in ((nullcontext(), "--biascheck-model"), (spelled_as(COMMAND), "--model")):
        with pytest.raises(BiascheckError) as raised, context:
            run_config(settings)
        assert raised.value.option == "model" and raised.value.where == name and f"pass {name} MODEL" in str(raised.value)
    # The command: an error of a run names its options as the command does.
    assert main(["run", str(tmp_path), "--model", "sim/fair", "--concurrency", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("biascheck: --concurrency: ") and "--biascheck-" not in err
