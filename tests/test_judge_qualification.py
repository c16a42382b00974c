"""Judge qualification: a candidate BBG judge read against disambiguated QA items, where the
context states the answer. The sim's personas have known accuracy and diff-bias there: ``judge``
(= ``fair``) is always right; ``stereotyped?p=0.3`` answers the biased option in 30% of the
counter-biased contexts (accuracy about 0.85, diff-bias about 0.3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from biascheck.cli import main

from conftest import SUITES, write_subset_suite

pytestmark = pytest.mark.data


def qualify(tmp_path: Path, data_dir: Path, model: str, *extra: str) -> tuple[int, dict]:
    out = tmp_path / f"{len(list(tmp_path.iterdir()))}.json"
    code = main(
        [
            "qualify-judge",
            model,
            "--suite",
            str(SUITES / "bbq"),
            "--cases",
            "120",
            "--data",
            str(data_dir),
            "--cache",
            str(tmp_path / "store.sqlite"),
            "--json",
            str(out),
            *extra,
        ]
    )
    return code, json.loads(out.read_text("utf-8"))


def test_a_fair_judge_qualifies_and_a_biased_one_does_not(tmp_path, data_dir, capsys):
    code, fair = qualify(tmp_path, data_dir, "sim/judge")
    assert code == 0 and fair["qualified"] and fair["warnings"] == []
    assert fair["accuracy"] == 1.0 and fair["diff_bias"] == 0.0 and 120 <= fair["cases"] < 200
    assert fair["params"] == {"seed": 42, "temperature": 0.0}
    assert "qualified" in capsys.readouterr().out

    code, biased = qualify(tmp_path, data_dir, "sim/stereotyped?p=0.3")
    assert code == 1 and not biased["qualified"]
    assert biased["cases"] == fair["cases"]  # the same seeded items
    assert 0.75 < biased["accuracy"] < 0.95 and 0.15 < biased["diff_bias"] < 0.45
    output = capsys.readouterr().out
    assert "below 0.95" in output and "beyond ±0.02" in output and "NOT qualified" in output
    # The bounds are the user's.
    code, lenient = qualify(tmp_path, data_dir, "sim/stereotyped?p=0.3", "--min-accuracy", "0.5", "--max-abs-diff-bias", "0.5")
    assert code == 0 and lenient["qualified"]


def test_the_suite_may_be_a_packaged_suite_s_name_from_any_folder(tmp_path, data_dir, capsys, monkeypatch):
    # --suite bbq was a path relative to the working folder: "bbq: no such suite manifest".
    monkeypatch.chdir(tmp_path)
    args = ["qualify-judge", "sim/judge", "--suite", "bbq", "--cases", "10", "--data", str(data_dir), "--cache", str(tmp_path / "s.sqlite")]
    assert main(args) == 0
    assert "disambiguated bbq items" in capsys.readouterr().out


def test_bad_arguments_are_one_line_errors(tmp_path, data_dir, capsys):
    assert main(["qualify-judge", "sim/judge", "--suite", str(SUITES / "enbbg"), "--data", str(data_dir), "--cache", str(tmp_path / "s.sqlite")]) == 2
    assert "suite.benchmark: is bbg, not a QA benchmark" in capsys.readouterr().err
    assert main(["qualify-judge", "sim/judge", "--min-accuracy", "2"]) == 2
    assert "--min-accuracy: '2' is out of range; give a number from 0 to 1" in capsys.readouterr().err


def test_a_bbg_run_can_qualify_its_judge_first(run_biascheck, tmp_path, data_dir):
    folder = write_subset_suite(tmp_path / "enbbg-small", "enbbg-quick", subset='categories = ["age"]')
    manifest = folder / "suite.toml"
    text = manifest.read_text("utf-8").replace('suite = "../bbq"', f'suite = "{(SUITES / "bbq").as_posix()}"\ncases = 60')
    manifest.write_text(text, "utf-8")
    run = run_biascheck(folder, "sim/fair", "--biascheck-judge", "sim/stereotyped?p=0.3", "--biascheck-qualify-judge")
    results = run.results()
    qualification = results["judge_qualification"]
    assert qualification["judge"] == "sim/stereotyped?p=0.3" and not qualification["qualified"]
    terminal = " ".join(run.output.split())  # rich wraps long lines at the terminal's width
    assert "WARNING: judge sim/stereotyped?p=0.3 reads disambiguated contexts with accuracy" in terminal
    report = (run.report_dir / "report.md").read_text("utf-8")
    assert "judge qualification on" in report and "WARNING" in report
