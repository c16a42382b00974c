"""What the command makes of the paths it is given: a folder where a store belongs is refused, not
read as an empty store, and a file to write in a folder that is not there is refused before any
call, not written after creating the folders (issue 23, item 15)."""

from __future__ import annotations

from pathlib import Path

from biascheck.cli import main


def one_line_error(capsys) -> str:
    captured = capsys.readouterr()
    assert captured.err.startswith("biascheck: ") and captured.err.count("\n") == 1 and "Traceback" not in captured.err, captured
    return captured.err


def test_suites_refuses_a_folder_for_a_store(tmp_path: Path, capsys):
    assert main(["suites", "--model", "sim/fair", "--cache", str(tmp_path), "kobbq"]) == 2
    error = one_line_error(capsys)
    assert f"{tmp_path}: is a folder, not a response store" in error, error


def test_qualify_judge_refuses_a_json_file_in_a_folder_that_is_not_there_before_any_call(tmp_path: Path, capsys):
    target = tmp_path / "nonexistent" / "x" / "qualification.json"
    assert main(["qualify-judge", "sim/judge", "--cache", str(tmp_path / "store.sqlite"), "--json", str(target)]) == 2
    error = one_line_error(capsys)
    assert f"--json: {target.parent} is not a folder" in error, error
    assert not (tmp_path / "nonexistent").exists() and not (tmp_path / "store.sqlite").exists()
