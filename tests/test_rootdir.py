"""``--biascheck-data ../shared/datasets``, the space form the documentation writes, in a repository
with no pytest configuration: pytest decides its rootdir before it knows biascheck's options and
takes the value for a test path; the plugin decides it again (biascheck/pytest_plugin/rootdir.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from biascheck.pytest_plugin.rootdir import separate_values


def run(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-v", *args], cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.fixture
def beside(tmp_path) -> tuple[Path, Path]:
    """A project without pytest configuration, and a data folder beside it."""
    project, data = tmp_path / "project", tmp_path / "datasets"
    project.mkdir()
    data.mkdir()
    (project / "test_one.py").write_text("def test_one():\n    pass\n")
    return project, data


def test_the_data_option_leaves_the_rootdir_in_the_project(beside):
    project, _ = beside
    done = run(project, "--biascheck-data", "../datasets")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"rootdir: {project}\n" in done.stdout
    assert "test_one.py::test_one PASSED" in done.stdout  # no folder prefix in the node id
    assert (project / ".pytest_cache").is_dir() and not (project.parent / ".pytest_cache").exists()


def test_under_xdist_too(beside):
    project, _ = beside
    done = run(project, "-n", "2", "--biascheck-data", "../datasets", "--biascheck-cache", "../datasets")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"rootdir: {project}\n" in done.stdout and "PASSED test_one.py::test_one" in done.stdout
    assert not (project.parent / ".pytest_cache").exists()


def test_a_value_that_brought_its_own_configuration_is_a_usage_error(beside):
    # pytest read the data folder's configuration (and applied its addopts) before the plugin loaded:
    # that cannot be undone, so the run stops and says which form to write.
    project, data = beside
    (data / "pytest.ini").write_text("[pytest]\naddopts = -q\n")
    done = run(project, "--biascheck-data", "../datasets")
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stdout + done.stderr
    assert "write --biascheck-data=../datasets" in done.stderr
    assert run(project, "--biascheck-data=../datasets").returncode == 0


def test_a_value_the_file_system_refuses_is_no_path(tmp_path):
    from biascheck.pytest_plugin.rootdir import _exists

    assert not _exists(tmp_path / ("b" * 300 + ".json")) and not _exists(tmp_path / "a\0b") and _exists(tmp_path)


def test_only_biascheck_options_given_as_two_arguments():
    args = ["--biascheck", "suites/kobbq", "--biascheck-data", "../d", "--biascheck-estimator", "logprob", "-k", "x", "--biascheck-cache=s"]
    assert separate_values(args) == [("--biascheck-data", "../d"), ("--biascheck-estimator", "logprob")]
    assert separate_values(["--", "--biascheck-data", "x"]) == []
