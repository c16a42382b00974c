"""``biascheck run``: the plugin's run without pytest, through the same gate
(:mod:`biascheck.orchestration`): the same results.json, baseline and comparison.json as
``pytest --biascheck`` on the same store, and pytest's exit codes."""

from __future__ import annotations

import json
from pathlib import Path

from biascheck.cli import main

TIMES = {"created_at", "recorded_at", "digest"}


def _without_times(path: Path) -> dict:
    return {k: v for k, v in json.loads(path.read_text("utf-8")).items() if k not in TIMES}


def test_run_writes_what_the_plugin_writes(run_biascheck, tiny_kobbq, data_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    store = tmp_path / "store.sqlite"
    common = [str(tiny_kobbq), "--model", "sim/stereotyped", "--data", str(data_dir), "--cache", str(store)]
    # A recording passes although sim/stereotyped fails thresholds: its job is the baseline.
    assert main(["run", *common, "--report", str(tmp_path / "cli-record"), "--update-baseline", "--baseline", "b/{suite}.json"]) == 0
    assert "baseline written: b/kobbq.json" in capsys.readouterr().err
    gate = ["--baseline", str(tmp_path / "b" / "{suite}.json")]
    # The store answers every call: the two gates see the same answers.
    assert main(["run", *common, "--report", str(tmp_path / "cli"), *gate]) == 1  # thresholds fail, as the plugin's items do
    out = capsys.readouterr().out
    assert "kobbq" in out and "regression" in out.lower()
    plugin = run_biascheck(tiny_kobbq, "sim/stereotyped", "--biascheck-baseline", str(tmp_path / "b" / "{suite}.json"), report="plugin")
    assert plugin.ret == 1
    for name in ("results.json", "comparison.json"):
        assert _without_times(tmp_path / "cli" / name) == _without_times(tmp_path / "plugin" / name), name
    # The recorded run is this one's: the baseline says so through its results.
    assert _without_times(tmp_path / "cli-record" / "results.json")["cases"] == plugin.results()["cases"]


def test_run_names_its_own_options_in_errors(tiny_kobbq, data_dir, capsys):
    assert main(["run", str(tiny_kobbq), "--data", str(data_dir), "--cache", "x.sqlite"]) == 2
    err = capsys.readouterr().err
    assert "--model" in err and "--biascheck-" not in err
    assert main(["run", str(tiny_kobbq), "--model", "sim/stereotyped", "--concurrency", "0"]) == 2
    assert "--concurrency" in capsys.readouterr().err


def test_a_run_that_stops_exits_as_pytest_does_not_as_a_usage_error(run_biascheck, tiny_kobbq, data_dir, tmp_path, capsys, monkeypatch):
    """Issue 34, D15: the circuit breaker (like a fatal model error or a store that cannot be
    written) made ``biascheck run`` exit 2, its usage error, where pytest exits 4."""
    from biascheck.execution.store import ResponseStore, StoredResponse

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-unused-000000")
    store = tmp_path / "store.sqlite"
    with ResponseStore(store) as kept:  # an answer of the model: the start-up probe leaves the endpoint to the run
        kept.put("0" * 64, "openai/x", {"messages": [], "params": {}, "sample": 0}, StoredResponse("A", "stop", {}, 0.0))
    argv = ["run", str(tiny_kobbq), "--model", "openai/x", "--api-base", "http://127.0.0.1:9/v1", "--data", str(data_dir), "--cache", str(store)]
    assert main([*argv, "--report", str(tmp_path / "cli")]) == 4
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("biascheck: openai/x: fatal model error: cannot reach http://127.0.0.1:9/v1: ") and "circuit breaker" in last, last
    plugin = run_biascheck(tiny_kobbq, "openai/x", "--biascheck-api-base", "http://127.0.0.1:9/v1", store_path=store)
    assert plugin.ret == 4
    # A usage error stays apart from it: the command's own 2.
    assert main([*argv, "--concurrency", "0"]) == 2


def test_the_exit_codes_are_one_table_for_pytest_and_the_commands():
    import pytest

    from biascheck.core import exits

    by_command = {code.command: code for code in exits.EXIT_CODES if code.command is not None}
    assert len(by_command) == len([c for c in exits.EXIT_CODES if c.command is not None]), "a command's code means one thing"
    # Where the command's code differs from pytest's, it is pytest's own convention (usage error, Ctrl-C).
    assert by_command[exits.USAGE].pytest == pytest.ExitCode.USAGE_ERROR
    assert by_command[exits.INTERRUPTED].pytest == pytest.ExitCode.INTERRUPTED
    for code in (exits.PASSED, exits.FAILED, exits.RUN_STOPPED, exits.BATCH_PENDING):
        assert by_command[code].pytest == code
    assert (exits.PASSED, exits.FAILED) == (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
