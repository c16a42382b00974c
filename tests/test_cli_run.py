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
