"""The Python API does what the command does: load a run, a baseline and a comparison as records,
gate a run against a baseline (``biascheck.compare``), DataFrames of each, and suites loaded from
the data folder a run then uses, with errors in the API's words."""

from __future__ import annotations

from pathlib import Path

import pytest

from biascheck import BiascheckError, ModelConfig, RunConfig, load_suite, run

from conftest import write_subset_suite

TINY = 'templates_per_category = 1\nseed = 7\nchoice_orders = "original"'


@pytest.fixture
def no_data_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Neither BIASCHECK_DATA_DIR nor a download cache that holds the files: only what the call names."""
    monkeypatch.delenv("BIASCHECK_DATA_DIR", raising=False)
    monkeypatch.setenv("BIASCHECK_CACHE_DIR", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("BIASCHECK_OFFLINE", "1")


def test_a_run_uses_the_data_folder_its_suites_were_loaded_from(tmp_path, data_dir, no_data_env):
    """load_suite(..., data_dir=X) then run(...) with a RunConfig that names no folder: the simulator
    reads the suite from X too (before: it looked in no mirror and the run failed)."""
    suite = load_suite(write_subset_suite(tmp_path / "kobbq-tiny", subset=TINY), data_dir=data_dir)
    config = RunConfig(model=ModelConfig("sim/fair"), store_path=tmp_path / "store.sqlite")
    result = run([(suite, suite.cases[:6])], config)
    assert result.stats.calls == 6 and not result.incomplete


def test_a_run_refuses_a_data_folder_other_than_its_suites(tmp_path, data_dir, no_data_env):
    suite = load_suite(write_subset_suite(tmp_path / "kobbq-tiny", subset=TINY), data_dir=data_dir)
    other = tmp_path / "other-mirror"
    other.mkdir()
    config = RunConfig(model=ModelConfig("sim/fair"), store_path=tmp_path / "store.sqlite", data_dir=other)
    with pytest.raises(BiascheckError, match=r"^RunConfig: data_dir: .*other-mirror.* load_suite\(data_dir=") as error:
        run([(suite, suite.cases[:6])], config)
    assert "--biascheck" not in str(error.value)


@pytest.mark.parametrize("mirror", ["missing-folder", None])
def test_a_missing_data_mirror_in_an_api_call_names_the_api_argument(tmp_path, no_data_env, mirror):
    folder = write_subset_suite(tmp_path / "kobbq-tiny", subset=TINY)
    with pytest.raises(BiascheckError) as error:
        load_suite(folder, data_dir=tmp_path / mirror if mirror else None)
    assert "load_suite(data_dir=...)" in str(error.value) and "--biascheck" not in str(error.value), str(error.value)


def test_the_command_still_names_its_own_option(tmp_path, no_data_env, monkeypatch, capsys):
    """The same missing file through `biascheck run` names --data (the command's spelling of the
    plugin's --biascheck-data), not the API's argument."""
    from biascheck.cli import main

    folder = write_subset_suite(tmp_path / "kobbq-tiny", subset=TINY)
    monkeypatch.chdir(tmp_path)
    assert main(["run", str(folder), "--model", "sim/fair", "--cache", str(tmp_path / "s.sqlite")]) == 2
    said = capsys.readouterr().err
    assert "point --data at a mirror folder" in said and "load_suite(" not in said, said


# --- the records and the gate from Python -----------------------------------------------------


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory, data_dir: Path):
    """A tiny KoBBQ answered by a nearly fair model and by a stereotyped one (a regression), as
    RunResults and as report folders; and a report folder holding both suites of a run of two."""
    from biascheck import build_results, write_reports

    tmp = tmp_path_factory.mktemp("api")
    suite = load_suite(write_subset_suite(tmp / "kobbq-tiny", subset=TINY), data_dir=data_dir)
    results = {}
    for model in ("sim/stereotyped?p=0.01", "sim/stereotyped?p=0.3"):
        results[model] = run([(suite, suite.cases)], RunConfig(model=ModelConfig(model), store_path=tmp / "store.sqlite"))
        runs, prompts = build_results(results[model])
        write_reports(runs, tmp / model.split("=")[1], prompts=prompts)
    return tmp, suite, results["sim/stereotyped?p=0.01"], results["sim/stereotyped?p=0.3"]


def test_compare_from_python_decides_as_biascheck_diff(two_runs, capsys):
    """The same two runs through `biascheck diff` and `biascheck.compare`: the same checks, verdicts
    and decision (the API resolves its settings as the command does)."""
    import json

    from biascheck import compare, load_run
    from biascheck.cli import main

    tmp, _, before, after = two_runs
    code = main(["diff", str(tmp / "0.01"), str(tmp / "0.3"), "--report", str(tmp / "diffed")])
    capsys.readouterr()
    written = json.loads((tmp / "diffed" / "comparison.json").read_text("utf-8"))
    comparison = compare(load_run(tmp / "0.01"), load_run(tmp / "0.3"))
    assert code == 1 and comparison.passed is written["passed"] is False
    words = {"unchanged": "within margin"}
    assert [(c.metric, c.scope, c.verdict) for c in comparison.checks] == [
        (c["metric"], c["scope"], words.get(c["verdict"], c["verdict"])) for c in written["results"]
    ]
    assert [c.worsening_ci for c in comparison.checks] == [tuple(c["worsening_ci"]) for c in written["results"]]
    assert comparison.regressions and all(c.verdict == "regressed" for c in comparison.regressions)
    # A RunResult and a RunRecord of the same run are one candidate.
    assert compare(load_run(before), after).checks == comparison.checks
    # A command-line rule and on_inconclusive, as --compare-fail and --on-inconclusive.
    loose = compare(load_run(before), after, rules=["diff_bias_amb:10"], on_inconclusive="pass")
    assert next(c for c in loose.checks if c.metric == "diff_bias_amb" and c.scope == "overall").rule.startswith("diff_bias_amb")
    for rule in ("no such rule", "no_metric:0.1", "diff_bias_amb:-1"):  # unreadable, no such metric, the wrong way
        with pytest.raises(BiascheckError, match=r"^compare\(rules=\.\.\.\): ") as error:
            compare(load_run(before), after, rules=[rule])
        assert "--biascheck" not in str(error.value)


def test_a_run_compared_with_a_baseline_file_and_the_records_frames(two_runs, tmp_path):
    from biascheck import compare, load_baseline, load_run
    from biascheck.evaluation import baseline as baselines

    _, _, before, after = two_runs
    record = load_run(before)
    path = tmp_path / "baseline.json"
    baselines.write(baselines.from_results(record), path)
    baseline = load_baseline(path)
    assert baseline.suite_name == record.suite.name and baseline.passed is (not record.failed_checks)
    comparison = compare(baseline, after)
    assert not comparison.passed and comparison.regressions

    cases = load_run(after).cases_df()
    assert len(cases) == len(after.suites[0].cases)
    first = load_run(after).cases[0]
    row = cases.iloc[0]
    assert (row["case_id"], row["category"], row["prompt_id"], row["order"], row["answer"], row["outcome"], row["raw"]) == (
        first.case_id, first.category, first.prompt_id, first.order, first.answer, first.outcome, first.raw,
    )  # fmt: skip
    assert "answer_index" in cases.columns  # the benchmark's own fields too
    metrics = record.metrics_df()
    overall = metrics[(metrics["group"] == "overall")].set_index("metric")
    for verdict in record.verdicts:
        if verdict.scope == "overall":
            assert overall.loc[verdict.metric, "passed"] == verdict.passed and overall.loc[verdict.metric, "ci_low"] == verdict.ci[0]
    checks = comparison.checks_df()
    assert list(checks["verdict"]) == [c.verdict for c in comparison.checks]
    flips = comparison.flips_df()
    assert len(flips) == comparison.flips.total and flips.attrs["complete"]
    assert dict(flips["transition"].value_counts()) == dict(comparison.flips.by_transition)


def test_load_run_of_a_folder_of_several_suites_names_them(two_runs, tmp_path):
    import shutil

    from biascheck import load_run, runs_df

    tmp = two_runs[0]
    both = tmp_path / "both"
    shutil.copytree(tmp / "0.01", both / "kobbq")
    shutil.copytree(tmp / "0.3", both / "kobbq-p3")
    with pytest.raises(BiascheckError, match=r"subfolders hold one each \(kobbq, kobbq-p3\); pass load_run\(\.\.\., suite=NAME\)"):
        load_run(both)
    assert load_run(both, suite="kobbq-p3").model.model == "sim/stereotyped?p=0.3"
    frame = runs_df([both, tmp / "0.01" / "results.json"])
    assert sorted(set(frame["source"])) == sorted(
        {str(both / "kobbq" / "results.json"), str(both / "kobbq-p3" / "results.json"), str(tmp / "0.01" / "results.json")}
    )
    overall = frame[(frame["metric"] == "diff_bias_amb") & (frame["scope"] == "overall")]
    assert sorted(overall["model"]) == ["sim/stereotyped?p=0.01", "sim/stereotyped?p=0.01", "sim/stereotyped?p=0.3"]


def test_load_comparison_reads_every_flip_from_flips_jsonl(two_runs, tmp_path):
    """A comparison.json written by today's biascheck (/1), and a flips.jsonl beside it."""
    import json

    from biascheck import load_comparison
    from biascheck.cli import main

    tmp = two_runs[0]
    assert main(["diff", str(tmp / "0.01"), str(tmp / "0.3"), "--report", str(tmp_path / "r")]) == 1
    (tmp_path / "r" / "flips.jsonl").unlink(missing_ok=True)  # the one a biascheck that writes it wrote: this test writes its own
    comparison = load_comparison(tmp_path / "r")
    assert comparison.flips.every is None and comparison.regressions
    lines = [{**flip.to_json(), "baseline_answer": "(the baseline's reply)"} for flip in comparison.flips.examples]
    (tmp_path / "r" / "flips.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines), "utf-8")
    again = load_comparison(tmp_path / "r" / "comparison.json")
    assert [f.to_json() for f in again.flips.every] == lines and len(again.flips_df()) == len(lines)
    for text, said in (('{"case_id": "x"}\n', "line 1.category: is missing"), ("{}\nnot json\n", "line 2: is not a JSON object")):
        (tmp_path / "r" / "flips.jsonl").write_text(text, "utf-8")
        with pytest.raises(BiascheckError, match=rf"^{tmp_path / 'r' / 'flips.jsonl'}: {said}"):
            load_comparison(tmp_path / "r")


def gate_section() -> tuple[list[str], list[str]]:
    """docs/api.md's "Gating from Python": its Python blocks and the outputs it shows, in order."""
    import re

    from conftest import ROOT

    text = (ROOT / "docs" / "api.md").read_text("utf-8")
    section = text.split("\n## Gating from Python\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.DOTALL), re.findall(r"```text\n(.*?)```", section, re.DOTALL)


def test_the_documented_gate_runs_as_written(tmp_path, data_dir, monkeypatch, capsys):
    """The blocks of docs/api.md's "Gating from Python", on the tiny KoBBQ the page says: they
    print what the page shows (the gate fails with the regression it lists; the frames), and a
    baseline file gates as the run it was recorded from."""
    from biascheck.evaluation import baseline as baselines

    blocks, shown = gate_section()
    tiny = write_subset_suite(tmp_path / "kobbq-tiny", subset=TINY)
    assert len(blocks) == 3 and blocks[0].count('load_suite("kobbq")') == 1
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BIASCHECK_DATA_DIR", str(data_dir))
    namespace: dict = {}
    exec(compile(blocks[0].replace('load_suite("kobbq")', f"load_suite({str(tiny)!r})"), "docs/api.md", "exec"), namespace)
    comparison = namespace["comparison"]
    assert capsys.readouterr().out == shown[0] and comparison.regressions
    baselines.write(baselines.from_results(namespace["before"]), tmp_path / "baselines" / "kobbq" / "sim-stereotyped-p-0.01.json")
    exec(compile(blocks[1], "docs/api.md", "exec"), namespace)
    assert namespace["comparison"].checks == comparison.checks
    exec(compile(blocks[2], "docs/api.md", "exec"), namespace)
    # As printed, but for the padding pandas gives a header line.
    assert [line.rstrip() for line in capsys.readouterr().out.splitlines()] == shown[1].splitlines()


def test_the_gate_names_import_neither_pandas_nor_litellm():
    """Reading the records and the gate's functions is cheap, as `import biascheck` is: pandas is
    imported by a DataFrame call, litellm by a run."""
    import subprocess
    import sys

    from conftest import ROOT

    code = (
        "import sys, biascheck\n"
        "[getattr(biascheck, n) for n in ('RunRecord', 'Comparison', 'load_run', 'load_baseline', 'load_comparison', 'compare', 'runs_df')]\n"
        "print(sorted(m for m in ('pandas', 'litellm', 'biascheck.session') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]", out.stderr


def test_a_run_of_two_suites_gives_the_record_of_the_one_asked_for(two_runs, tmp_path, data_dir):
    from dataclasses import replace

    from biascheck import compare, load_run

    tmp, suite, before, _ = two_runs
    named = tmp_path / "kobbq-p3"
    write_subset_suite(named, subset=TINY)
    (named / "suite.toml").write_text((named / "suite.toml").read_text("utf-8").replace('name = "kobbq"', 'name = "kobbq-p3"', 1), "utf-8")
    second = load_suite(named, data_dir=data_dir)
    both = run([(suite, suite.cases), (second, second.cases)], RunConfig(model=ModelConfig("sim/stereotyped?p=0.3"), store_path=tmp / "store.sqlite"))
    with pytest.raises(BiascheckError, match=r"^RunResult: ran 2 suites \(kobbq, kobbq-p3\); pass load_run\(result, suite=NAME\), one of them$"):
        load_run(both)
    assert load_run(both, suite="kobbq-p3").suite.name == "kobbq-p3"
    # compare() takes the suite of the baseline's name from a run of several.
    assert compare(load_run(before), both).suite["name"] == "kobbq"
    with pytest.raises(
        BiascheckError, match=r"^RunResult: ran no suite 'elsewhere' \(it ran kobbq, kobbq-p3\); compare it with a baseline of one of them$"
    ):
        compare(replace(load_run(before), suite=replace(load_run(before).suite, name="elsewhere")), both)
    assert second.data_dir == suite.data_dir == data_dir


def test_runs_df_of_a_suites_baseline_folder_is_its_history(two_runs, tmp_path):
    from biascheck import load_run, runs_df
    from biascheck.evaluation import baseline as baselines

    _, _, before, after = two_runs
    folder = tmp_path / "baselines" / "kobbq"
    for name, result in (("old", before), ("new", after)):
        baselines.write(baselines.from_results(load_run(result), git=name), folder / f"{name}.json")
    frame = runs_df([folder])
    assert set(frame["kind"]) == {"baseline"} and set(frame["git_commit"]) == {"old", "new"}
    overall = frame[(frame["scope"] == "overall") & (frame["metric"] == "diff_bias_amb")]
    assert list(overall["model"]) == ["sim/stereotyped?p=0.01", "sim/stereotyped?p=0.3"] or list(overall["model"]) == [
        "sim/stereotyped?p=0.3",
        "sim/stereotyped?p=0.01",
    ]
    assert overall["threshold"].iloc[0] == "|x| <= 0.05" and overall["passed"].notna().all()


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("not json", "is not a results.json or a baseline"),
        ('{"schema": "biascheck.comparison/2"}', "schema: is neither a results.json nor a baseline"),
        ('{"schema": "biascheck.results/1", "suite": 3}', "is a required property; regenerate the file with biascheck"),
        ("[1, 2]", "schema: is neither a results.json nor a baseline"),
    ],
)
def test_runs_df_of_a_file_that_is_no_run_is_one_line(tmp_path, text, said):
    from biascheck import runs_df

    path = tmp_path / "results.json"
    path.write_text(text, "utf-8")
    with pytest.raises(BiascheckError) as caught:
        runs_df([path])
    message = str(caught.value)
    assert message.startswith(str(path)) and said in message and "\n" not in message, message
