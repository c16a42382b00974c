"""Every command the README and docs/*.md show works as typed: each line of a code block that
starts with ``pytest --biascheck`` or ``biascheck `` (a line ending in ``\\`` goes on), split as a
shell would, is run in a project laid out as the docs assume (``suites/...`` in it, the data mirror
at ``../shared/datasets``).

How far each is run, to stay fast (in-process runs, a few seconds in all):

- a ``pytest`` command is collected (``--collect-only``): its options are parsed and checked, its
  suites and baselines loaded. Those that record a baseline or write a report with the simulated
  model run for real, since later commands read what they write (the compare run its baseline,
  ``biascheck diff`` its results.json);
- a ``biascheck`` command is parsed by the command's own parser; ``biascheck diff`` runs for real
  on what the runs above wrote;
- where a doc names a big suite (KoBBQ, HBB, BBQ, the BBG sets), the project's folder of that name
  holds a small one of the same benchmark: a KoBBQ subset of about 100 cases, or a shipped quick
  suite. The options, not the suite size, are what a command's text can get wrong.

Also here: the data flag written as two arguments (``--biascheck-data DIR``), which pytest reads
as a test path when it decides its rootdir, before biascheck's options are known.
"""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path

import pytest

from conftest import ROOT, SUITES, write_subset_suite

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# Words a doc writes for what the reader fills in, and what this test fills in; each must still
# occur in some command (a stale entry fails).
PLACEHOLDERS = {
    "http://127.0.0.1:PORT/v1": "http://127.0.0.1:8080/v1",
    " ... ": " --biascheck-model sim/fair --biascheck-judge sim/judge ",
}

# The small suite standing for each suite folder a command names (see the module docstring).
STAND_INS = {"bbq": "bbq-quick", "hbb-full": "hbb", "kobbg": "kobbg-quick", "enbbg": "enbbg-quick", "enbbg-quick": "enbbg-quick"}

# biascheck commands run for real, on the files the pytest runs before them wrote; the others are parsed.
RUN_FOR_REAL = {"diff baselines/kobbq/release.json reports/results.json"}


def documented_commands() -> list[tuple[str, str]]:
    """(where, command) for each documented command, in the docs' order."""
    found = []
    for doc in DOCS:
        lines = doc.read_text("utf-8").splitlines()
        in_code = False
        number = 0
        while number < len(lines):
            line = lines[number].strip()
            number += 1
            if line.startswith("```"):
                in_code = not in_code
                continue
            if not in_code or not (line.startswith("pytest --biascheck") or line.startswith("biascheck ")):
                continue
            where = f"{doc.relative_to(ROOT)}:{number}"
            while line.endswith("\\") and number < len(lines):
                line = line[:-1].rstrip() + " " + lines[number].strip()
                number += 1
            found.append((where, line))
    return found


def as_typed(command: str) -> list[str]:
    for placeholder, value in PLACEHOLDERS.items():
        command = command.replace(placeholder, value)
    return shlex.split(command, comments=True)


class Parsed(Exception):
    """Raised instead of running a parsed biascheck command."""


def parse_biascheck(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """``argv`` through the biascheck command's own parser (argparse's error exits with 2), nothing run."""
    from biascheck.cli import main

    original = argparse.ArgumentParser.parse_args

    def parse_only(self, args=None, namespace=None):
        original(self, args, namespace)
        raise Parsed

    with monkeypatch.context() as patch:
        patch.setattr(argparse.ArgumentParser, "parse_args", parse_only)
        with pytest.raises(Parsed):
            main(argv)


@pytest.fixture
def project(pytester: pytest.Pytester, tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The layout the docs assume, the current folder (after pytester's): suites/ inside, the mirror at ../shared/datasets."""
    work = tmp_path / "work"
    (work / "shared").mkdir(parents=True)
    (work / "shared" / "datasets").symlink_to(data_dir, target_is_directory=True)
    folder = work / "project"
    write_subset_suite(
        folder / "suites" / "kobbq",
        subset='templates_per_category = 1\nseed = 7\nchoice_orders = "original"',
        prompts='from_data = "prompts"\nuse = ["1"]',
    )
    for name, stand_in in STAND_INS.items():
        (folder / "suites" / name).symlink_to(SUITES / stand_in, target_is_directory=True)
    write_calibration(folder / "calibration.json", SUITES / STAND_INS["enbbg"])
    monkeypatch.chdir(folder)
    return folder


def write_calibration(path: Path, suite: Path) -> None:
    """What ``biascheck judge fit sample.csv --out calibration.json`` (parsed here, not run: it needs
    a sample labelled by people) writes for the placeholder's judge, sim/judge, of ``suite``'s prompt."""
    import tomllib

    from biascheck.benchmarks.bbg.judge_calibration import JudgeCalibration, prompt_fingerprint

    bbg = tomllib.loads((suite / "suite.toml").read_text("utf-8"))["bbg"]
    counts = ((40, 5, 5), (5, 40, 5), (5, 5, 40))
    calibration = JudgeCalibration(counts, "sim/judge", prompt_fingerprint(bbg["mrc_prompt"]), bbg["language"], "2025-01-01")
    path.write_text(json.dumps(calibration.to_json()), "utf-8")


def test_every_documented_command_works_as_typed(project, pytester, monkeypatch):
    from biascheck.cli import main

    commands = documented_commands()
    assert len(commands) >= 30 and any(cmd.startswith("biascheck diff") for _, cmd in commands)
    texts = " ".join(cmd for _, cmd in commands)
    assert all(placeholder in texts for placeholder in PLACEHOLDERS), "a placeholder no doc writes any more"
    # The data folder as one argument (see test_a_typo_in_the_suite_path_names_the_suite_path).
    assert "--biascheck-data=../shared/datasets" in texts and "--biascheck-data " not in texts
    # BIASCHECK_DATA_DIR stays set: where a command names no data folder, a reader's run finds the
    # files through it or the download cache. Where it names one, the option wins.
    failed, done = [], set()
    for where, command in commands:
        argv = as_typed(command)
        if tuple(argv) in done:
            continue
        done.add(tuple(argv))
        if argv[0] == "pytest":
            real = any(arg.startswith("sim/") for arg in argv) and ("--biascheck-update-baseline" in argv or "--biascheck-report" in argv)
            extra = [] if real else ["--collect-only"]
            result = pytester.runpytest_inprocess(*argv[1:], *extra, "-q", "-p", "no:cacheprovider")
            # A recording or comparing run of the stereotyped model may fail its thresholds (exit 1): it ran.
            if result.ret not in ((0, 1) if real else (0,)):
                failed.append(f"{where}: {command}\n  exit {result.ret}: {(result.stdout.str() + result.stderr.str()).strip()[-600:]}")
        elif " ".join(argv[1:4]) in RUN_FOR_REAL:
            status = main(argv[1:])
            if status not in (0, 1):  # 1: the diff found a regression
                failed.append(f"{where}: {command}\n  exit {status}")
        else:
            try:
                parse_biascheck(argv[1:], monkeypatch)
            except (SystemExit, pytest.fail.Exception) as exc:
                failed.append(f"{where}: {command}\n  not parsed: {exc}")
    assert not failed, "documented commands that do not work as typed:\n" + "\n".join(failed)
    assert (project / "baselines" / "kobbq" / "release.json").is_file() and (project / "reports" / "results.json").is_file()


# --- the data flag as two arguments --------------------------------------------------------------


@pytest.fixture
def beside(pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A project with its pytest configuration and a test, and a data folder beside it; the project is the current folder."""
    project, data = tmp_path / "project", tmp_path / "datasets"
    project.mkdir()
    data.mkdir()
    (project / "pyproject.toml").write_text('[tool.pytest.ini_options]\naddopts = "-p no:cacheprovider"\n')
    (project / "test_one.py").write_text("def test_one():\n    pass\n")
    monkeypatch.chdir(project)
    return project, data


def test_a_typo_in_the_suite_path_names_the_suite_path(beside, pytester):
    # pytest decides its rootdir and configuration from the arguments that name existing paths before
    # biascheck's options are known: written as two arguments, the data folder is one, and the
    # misspelt suite is not. The error is pytest's own, about the suite path, and nothing else.
    result = pytester.runpytest_inprocess("--biascheck", "suites/kobbqq", "--biascheck-data", "../datasets", "--biascheck-model", "sim/fair")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.strip()]
    assert errors == ["ERROR: file or directory not found: suites/kobbqq"], result.stderr.str()
    assert "--biascheck-data" not in result.stdout.str() + result.stderr.str()


def test_the_documented_form_leaves_the_rootdir_in_the_project(beside, pytester):
    project, _ = beside
    (project / "pyproject.toml").unlink()  # no configuration: the rootdir is what the paths given make it
    result = pytester.runpytest_inprocess("--biascheck-data=../datasets", "-v", "-p", "no:cacheprovider")
    assert result.ret == 0, result.stdout.str()
    assert f"rootdir: {project}" in result.stdout.str() and "test_one.py::test_one PASSED" in result.stdout.str()
