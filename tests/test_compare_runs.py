"""Comparing any runs (issue 25, part 4), end to end through the ``biascheck`` command on real files:
``biascheck diff A B`` of two results.json files, ``biascheck compare RUN...`` and ``biascheck history
SUITE`` over a baseline replaced twice. The runs are :func:`biascheck.sim.calibration.simulated_results`
documents (the sim personas' answers, no HTTP), written where a report folder would hold them."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import html
import io
import json
import math
import re
import tempfile
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_examples import examples

from biascheck.api import load_run
from biascheck.cli import main
from biascheck.core.files import atomic_write_text
from biascheck.core.format import md_text
from biascheck.evaluation import baseline as baselines
from biascheck.records.baseline import BaselineRecord
from biascheck.records.run import RunRecord
from biascheck.reporting.runs import RegressionMark, check_text, compare_runs, regression_text
from biascheck.sim.calibration import PreparedSuite, simulated_results
from biascheck.suite import load_suite

from conftest import write_subset_suite

pytestmark = pytest.mark.data

PERSONAS = {"fair": "fair", "some": "stereotyped?p=0.3", "most": "stereotyped?p=0.9"}


@pytest.fixture(scope="module")
def suite_dir(tmp_path_factory, data_dir) -> Path:
    """KoBBQ, one template per category, prompt 1 (96 cases)."""
    return write_subset_suite(
        tmp_path_factory.mktemp("suite") / "kobbq-tiny",
        subset='templates_per_category = 1\nseed = 7\nchoice_orders = "original"',
        prompts='from_data = "prompts"\nuse = ["1"]',
    )


@pytest.fixture(scope="module")
def documents(suite_dir, data_dir) -> dict[str, dict]:
    prepared = PreparedSuite.of(load_suite(suite_dir, data_dir=data_dir))
    return {name: simulated_results(prepared, persona).to_json() for name, persona in PERSONAS.items()}


def write_run(folder: Path, document: dict) -> Path:
    """A report folder holding ``document`` as its results.json."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.json").write_text(json.dumps(document, ensure_ascii=False), "utf-8")
    return folder


@pytest.fixture(scope="module")
def runs(documents, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("runs")
    return {name: write_run(root / name, document) for name, document in documents.items()}


def one_line_error(capsys) -> str:
    captured = capsys.readouterr()
    err = captured.err
    assert err.count("\n") == 1 and err.startswith("biascheck: ") and "Traceback" not in err, err
    # The command's errors name its own options, never the plugin's spellings.
    assert "--biascheck-" not in err, err
    return err


# --- biascheck diff A B, with a run on either side --------------------------------------------------


def test_diff_of_two_results_files_exits_1_on_a_regression_and_0_otherwise(runs, documents, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    assert main(["diff", str(runs["fair"] / "results.json"), str(runs["most"] / "results.json"), "--report", str(tmp_path / "d")]) == 1
    comparison = json.loads((tmp_path / "d" / "comparison.json").read_text("utf-8"))
    assert comparison["regressed"] and comparison["baseline"]["model"] == "sim/fair"
    # A is a run: the comparison says when it was made, not when the diff was.
    assert comparison["baseline"]["created_at"] == documents["fair"]["created_at"]
    assert "diff_bias_amb (overall) regressed" in capsys.readouterr().out
    # Every flip in flips.jsonl beside it, once, with both sides' replies (A is a run: it has them).
    flips = [json.loads(line) for line in (tmp_path / "d" / "flips.jsonl").read_text("utf-8").splitlines()]
    assert comparison["flips"]["file"] == "flips.jsonl" and len(flips) == comparison["flips"]["total"] > 0
    assert len({f["case_id"] for f in flips}) == len(flips) and "all" not in comparison["flips"]
    replies = {name: {c["case_id"]: c["raw"] for c in documents[name]["cases"]} for name in ("fair", "most")}
    assert all(f["answer"] == replies["most"][f["case_id"]] and f["baseline_answer"] == replies["fair"][f["case_id"]] for f in flips)
    assert {f["case_id"] for f in comparison["flips"]["examples"]} <= {f["case_id"] for f in flips}
    # Report folders on both sides; a run compared with itself.
    assert main(["diff", str(runs["fair"]), str(runs["fair"])]) == 0

    # The same verdicts as against a recorded baseline of A.
    recorded = tmp_path / "release.json"
    write_baseline(baseline_of(documents["fair"]), recorded)
    assert main(["diff", str(recorded), str(runs["most"]), "--report", str(tmp_path / "b")]) == 1
    against = json.loads((tmp_path / "b" / "comparison.json").read_text("utf-8"))
    # A baseline file keeps no replies: the flips say so with null.
    assert all(f["baseline_answer"] is None for f in map(json.loads, (tmp_path / "b" / "flips.jsonl").read_text("utf-8").splitlines()))
    assert [(r["metric"], r["scope"], r["verdict"]) for r in against["results"]] == [
        (r["metric"], r["scope"], r["verdict"]) for r in comparison["results"]
    ]

    # In GitHub Actions: annotations, and the step summary written by the plugin's function (the comparison alone).
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    capsys.readouterr()
    assert main(["diff", str(runs["fair"]), str(runs["most"])]) == 1
    assert "::error title=biascheck kobbq%3A diff_bias_amb (overall) regressed::" in capsys.readouterr().out
    text = summary.read_text("utf-8")
    assert text.startswith("# biascheck diff: kobbq — REGRESSED") and "# biascheck: kobbq" not in text
    # A summary that cannot be written is said, and the verdict stands.
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path))
    assert main(["diff", str(runs["fair"]), str(runs["fair"])]) == 0
    assert "could not append the summary" in capsys.readouterr().err


def edited(document: dict, change) -> dict:
    out = copy.deepcopy(document)
    change(out)
    return out


def test_diff_refusals_name_the_file_the_field_and_its_own_options(runs, documents, tmp_path, capsys):
    fair, most = runs["fair"], str(runs["most"])
    other_prompts = write_run(tmp_path / "prompts", edited(documents["fair"], lambda d: d["suite"]["fingerprint"].update(prompts="0" * 16)))
    err = (main(["diff", str(other_prompts), most]), one_line_error(capsys))
    assert err[0] == 2 and f"{runs['most'] / 'results.json'}: suite.fingerprint: differs from that of {other_prompts / 'results.json'}" in err[1]
    assert "--allow-fingerprint-mismatch" in err[1]
    assert main(["diff", str(other_prompts), most, "--allow-fingerprint-mismatch"]) == 1
    capsys.readouterr()
    cases = [
        (
            edited(documents["fair"], lambda d: d["run"].update(estimator="loglikelihood")),
            "run.estimator: was answered by generation (the default), and",
        ),
        (edited(documents["fair"], lambda d: d["suite"].update(name="bbq-like")), "suite.name: is a run of suite 'kobbq'"),
        (edited(documents["fair"], lambda d: d["run"].update(complete=False, incomplete_reason="stopped")), "run.complete: the run is incomplete"),
        (edited(documents["fair"], lambda d: d["run"].update(case_errors=3)), "run.case_errors: 3 case(s) errored"),
    ]
    for i, (document, expected) in enumerate(cases):
        assert main(["diff", str(write_run(tmp_path / f"a{i}", document)), most]) == 2
        assert expected in one_line_error(capsys)

    # A baseline of another suite version: compare()'s own refusal, in diff's words.
    base = tmp_path / "other.json"
    write_baseline(baseline_of(edited(documents["fair"], lambda d: d["suite"]["fingerprint"].update(subset="0" * 16))), base)
    assert main(["diff", str(base), most]) == 2
    assert "suite.fingerprint" in (err := one_line_error(capsys)) and "--allow-fingerprint-mismatch" in err
    for argv, expected in (
        (["diff", str(tmp_path / "absent.json"), most], "no such baseline"),
        (["diff", str(fair), most, "--compare-fail", "nosuch:+0.1"], "--compare-fail: nosuch:+0.1: kobbq has no metric 'nosuch'"),
        (["diff", str(fair), most, "--compare-fail", "acc_dis:+0.1"], "--compare-fail: acc_dis:+0.1"),
        (["diff", str(fair), str(base)], "schema: is a baseline, not the results.json of a run; give as B the candidate"),
        (["diff", str(fair), str(tmp_path)], "holds no results.json, and its subfolders hold one each (a0, a1, a2, a3, prompts)"),
        (
            ["diff", str(fair), str(tmp_path / "a0" / "nothing")],
            "nothing: no such file; give the results.json a run wrote, or the report folder holding it",
        ),
    ):
        assert main(argv) == 2, argv
        assert expected in one_line_error(capsys), argv
    with pytest.raises(SystemExit):
        main(["diff", "--help"])
    assert "--biascheck-" not in capsys.readouterr().out


# --- biascheck compare RUN... ------------------------------------------------------------------------


def test_compare_of_three_runs_writes_markdown_json_and_html(runs, documents, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["compare", str(runs["fair"]), str(runs["some"] / "results.json"), str(runs["most"]), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed == (out / "compare.md").read_text("utf-8")
    document = json.loads((out / "compare.json").read_text("utf-8"))
    assert [run["model"] for run in document["runs"]] == [f"sim/{p}" for p in PERSONAS.values()]
    assert document["headline"] == ["diff_bias_amb", "diff_bias_dis", "acc_dis", "ooc_ratio"]
    row = next(r for r in document["rows"] if (r["metric"], r["scope"]) == ("diff_bias_amb", "overall"))
    assert [v["value"] for v in row["values"]] == [d["metrics"]["overall"]["diff_bias_amb"]["value"] for d in documents.values()]
    assert [v["ci"] for v in row["values"]] == [d["metrics"]["overall"]["diff_bias_amb"]["ci"] for d in documents.values()]
    assert row["threshold"] == {"max_abs": 0.05} and [v["passed"] for v in row["values"]] == [True, False, False]
    assert "| overall | 0.0000 [0.0000, 0.0000] | **0.2708" in printed
    page = (out / "compare.html").read_text("utf-8")
    charts = re.findall(r'<figure class="chart" id="chart-([a-z_]+)">(.*?)</figure>', page, re.S)
    assert [metric for metric, _ in charts] == document["headline"]
    for _, chart in charts:
        assert chart.count('<g class="mark">') == 3 and chart.count('class="threshold"') >= 1
    assert "<script" not in page and 'href="http' not in page and "src=" not in page


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda d: d["suite"].update(name="kobbq-other"), "suite.name: is a run of suite 'kobbq-other'"),
        (lambda d: d["suite"]["fingerprint"].update(data="0" * 16), "suite.fingerprint: differs from that of"),
        (lambda d: d["run"].update(estimator="first-token"), "run.estimator: was answered by first-token"),
        (lambda d: d["metrics"]["bootstrap"].update(confidence=0.9), "metrics.bootstrap.confidence: is 0.9"),
    ],
    ids=["suite", "fingerprint", "answer-mode", "interval-level"],
)
def test_compare_refuses_runs_that_cannot_stand_side_by_side(runs, documents, tmp_path, capsys, change, field):
    odd = write_run(tmp_path / "odd", edited(documents["most"], change))
    assert main(["compare", str(runs["fair"]), str(runs["some"]), str(odd), "--out", str(tmp_path)]) == 2
    err = one_line_error(capsys)
    assert err.startswith(f"biascheck: {odd / 'results.json'}: {field}"), err
    assert not (tmp_path / "compare.json").exists()


def test_compare_refuses_a_baseline_and_a_single_run(runs, documents, tmp_path, capsys):
    base = tmp_path / "release.json"
    write_baseline(baseline_of(documents["fair"]), base)
    assert main(["compare", str(runs["fair"]), str(base)]) == 2
    assert "schema: is a baseline, not the results.json of a run; give runs" in one_line_error(capsys)
    assert main(["compare", str(runs["fair"]), "--out", str(tmp_path)]) == 2
    assert "give two runs or more" in one_line_error(capsys)


class _Page(HTMLParser):
    """Tags of a page, to check that it is well nested."""

    VOID = {"meta", "br", "line", "circle", "path", "rect", "polyline"}

    def __init__(self):
        super().__init__()
        self.open: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag not in self.VOID:
            self.open.append(tag)

    def handle_startendtag(self, tag, attrs):
        pass

    def handle_endtag(self, tag):
        if tag not in self.VOID:
            assert self.open and self.open.pop() == tag, (tag, self.open[-3:])

    def handle_data(self, data):
        self.text.append(data)


@settings(max_examples=examples(15), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    picks=st.lists(st.sampled_from(sorted(PERSONAS)), min_size=2, max_size=4),
    revisions=st.lists(st.one_of(st.none(), st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)), min_size=4, max_size=4),
)
def test_the_compare_table_over_any_runs(documents, capsys, picks, revisions):
    """Any runs of the suite, repeated or not, under any revision text: a column per run with a
    distinct label, the run's own numbers in it, and pages whose every text is escaped."""
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        chosen = [edited(documents[name], lambda d, r=revision: d["model"].update(revision=r)) for name, revision in zip(picks, revisions)]
        paths = [str(write_run(root / f"run{i}", document)) for i, document in enumerate(chosen)]
        assert main(["compare", *paths, "--out", str(root / "out")]) == 0
        printed = capsys.readouterr().out
        document = json.loads((root / "out" / "compare.json").read_text("utf-8"))
        page = (root / "out" / "compare.html").read_text("utf-8")
    labels = [run["label"] for run in document["runs"]]
    assert len(set(labels)) == len(labels) == len(chosen)
    for row in document["rows"]:
        for run, value in zip(chosen, row["values"]):
            table = run["metrics"]["overall"] if row["scope"] == "overall" else run["metrics"]["by_category"][row["scope"]]
            assert (value["value"], value["ci"], value["n"]) == (table[row["metric"]]["value"], table[row["metric"]]["ci"], table[row["metric"]]["n"])
    scopes = 1 + len(chosen[0]["metrics"]["by_category"])
    assert len(document["rows"]) == scopes * len(chosen[0]["metrics"]["overall"])
    tables = printed.split("\n## ")[1:]
    assert len(tables) == len(document["shown"])
    for table in tables:  # header, rule, a row per scope; each row a cell per run
        lines = [line for line in table.split("\n\n")[1].splitlines() if line.startswith("|")]
        assert len(lines) == 2 + scopes and all(len(re.findall(r"(?<!\\)\|", line)) == len(chosen) + 2 for line in lines), table
    parser = _Page()
    parser.feed(page)
    assert parser.open == []
    assert page.count('<g class="mark">') == len(document["headline"]) * len(chosen)


# --- the release history ------------------------------------------------------------------------------


def baseline_of(document: dict) -> dict:
    """The baseline document a recording of a results document writes (its digest made when written)."""
    return baselines.from_results(RunRecord.from_json(document)).to_json()


def write_baseline(document: dict, path: Path) -> None:
    """A baseline document written as baselines.write writes a record (any document: tests edit them)."""
    atomic_write_text(path, baselines.document_text(document))


def replace_baseline(document: dict, path: Path) -> Path | None:
    return baselines.replace(BaselineRecord.from_json(document), path)


def release(document: dict, revision: str | None, created: str) -> dict:
    """The baseline a recording of ``document`` as ``revision`` at ``created`` writes."""
    return {**baseline_of(edited(document, lambda d: d["model"].update(revision=revision))), "created_at": created}


def test_history_over_a_baseline_replaced_twice(documents, suite_dir, tmp_path, capsys, monkeypatch):
    path = tmp_path / "baselines" / "kobbq" / "release.json"
    assert replace_baseline(release(documents["fair"], "v1.0", "2026-01-05T10:00:00+00:00"), path) is None
    kept = replace_baseline(release(documents["some"], "v1.1", "2026-02-05T10:00:00+00:00"), path)
    assert kept == path.parent / "history" / "v1.0.json"
    # No revision recorded: the replaced one is named for when it was made.
    assert replace_baseline(release(documents["most"], None, "2026-03-05T10:00:00+00:00"), path) == path.parent / "history" / "v1.1.json"
    assert sorted(p.name for p in (path.parent / "history").iterdir()) == ["v1.0.json", "v1.1.json"]
    assert baselines.load(kept).model_name == "sim/fair"  # kept whole: it still loads, digest and all

    monkeypatch.chdir(tmp_path)  # --baselines' default, ./baselines
    assert main(["history", str(suite_dir)]) == 0
    captured = capsys.readouterr()
    printed = captured.out
    # Without --out, beside the reports (.biascheck/, which a project ignores), not in the working folder.
    assert not (tmp_path / "history.html").exists() and not (tmp_path / "history.json").exists()
    assert "wrote .biascheck/history/kobbq/history.json, .biascheck/history/kobbq/history.html" in captured.err
    rows = [line for line in printed.splitlines() if line.startswith("| ") and "sim/" in line]
    assert [row.split(" | ")[0] for row in rows] == ["| v1.0", "| v1.1", "| 2026-03-05T10:00:00+00:00"]
    assert r"| diff_bias_amb (\|x\| <= 0.05) | diff_bias_dis (\|x\| <= 0.05) | acc_dis (x >= 0.8) | ooc_ratio (x <= 0.1) |" in printed
    page = (tmp_path / ".biascheck" / "history" / "kobbq" / "history.html").read_text("utf-8")
    charts = re.findall(r'<figure class="chart" id="chart-([a-z_]+)">(.*?)</figure>', page, re.S)
    assert [metric for metric, _ in charts] == ["diff_bias_amb", "diff_bias_dis", "acc_dis", "ooc_ratio"]
    for _, chart in charts:  # a row per release, the trend through them, the suite's threshold
        assert chart.count('<g class="mark">') == 3 and 'class="trend"' in chart and 'class="threshold"' in chart
    # By name: a packaged suite's (its manifest has the thresholds), else its baselines folder's (none then).
    assert main(["history", "kobbq", "--baselines", str(tmp_path / "baselines"), "--out", str(tmp_path / "h")]) == 0
    assert r"(\|x\| <= 0.05)" in capsys.readouterr().out and (tmp_path / "h" / "history.html").is_file()
    mine = tmp_path / "baselines" / "mine" / "release.json"
    replace_baseline(release(edited(documents["fair"], lambda d: d["suite"].update(name="mine")), "v1", "2026-01-01T00:00:00+00:00"), mine)
    assert main(["history", "mine", "--baselines", str(tmp_path / "baselines"), "--out", str(tmp_path / "h")]) == 0
    # the benchmark's bias metrics
    assert "| release | model | created | thresholds | vs the release before | diff_bias_amb | diff_bias_dis |" in capsys.readouterr().out
    (mine.parent / "stray.json").write_bytes(path.read_bytes())
    assert main(["history", "mine", "--baselines", str(tmp_path / "baselines")]) == 2
    assert "stray.json: suite.name: is a baseline of suite 'kobbq', among those of 'mine'" in one_line_error(capsys)
    assert main(["history", "nosuite", "--baselines", str(tmp_path / "baselines")]) == 2
    assert "nosuite: is neither a suite folder, nor a packaged suite, nor the name of a folder in" in one_line_error(capsys)


def test_a_replaced_baseline_is_never_lost(documents, tmp_path):
    path = tmp_path / "release.json"
    path.write_bytes(b"\xff not even text")  # too damaged to name: kept under the file's time
    kept = replace_baseline(release(documents["fair"], "v1", "2026-01-01T00:00:00+00:00"), path)
    assert kept is not None and kept.parent.name == "history" and kept.read_bytes() == b"\xff not even text"
    first = path.read_bytes()
    # The same revision recorded again: the second replaced file takes its creation time in its name.
    second = replace_baseline(release(documents["some"], "v1", "2026-01-02T00:00:00+00:00"), path)
    assert second == path.parent / "history" / "v1.json" and second.read_bytes() == first
    third = replace_baseline(release(documents["most"], "v1", "2026-01-03T00:00:00+00:00"), path)
    assert third == path.parent / "history" / "v1-2026-01-02T00-00-00-00-00.json"
    assert len(list((path.parent / "history").iterdir())) == 3
    # A copy already kept (a recording that stopped after keeping it) is not made twice.
    again = path.read_bytes()
    assert baselines.keep_replaced(path) == baselines.keep_replaced(path) and path.read_bytes() == again
    # A failed write of the new one leaves the old one in place, and a copy of it in history/.
    broken = dataclasses.replace(BaselineRecord.from_json(release(documents["most"], "v2", "2026-01-04T00:00:00+00:00")), tool={"not": object()})
    with contextlib.suppress(TypeError):
        baselines.replace(broken, path)
    assert path.read_bytes() == again


@settings(max_examples=examples(60), deadline=None)
@given(st.text(max_size=40))
def test_a_revision_names_a_file_in_history_whatever_it_says(revision):
    name = baselines.safe_name(revision)
    assert re.fullmatch(r"([A-Za-z0-9_][A-Za-z0-9._-]*)?", name) and len(name) <= 120 and "/" not in name and not name.startswith(".")


# --- the settings of a diff are A's or the suite's, never B's (issue 34, D6) ----------------------------

# (field, a bad value, what the one line says of it); "nan" is written as NaN, which JSON readers take.
BAD_SETTINGS = [
    ("alpha", 0, "less than or equal to the minimum of 0"),
    ("alpha", -0.5, "less than or equal to the minimum of 0"),
    ("alpha", "nan", "NaN"),
    ("alpha", "x", "'x' is not of type 'number'"),
    ("alpha", 2, "greater than the maximum of 0.5"),
    ("power", 2, "greater than or equal to the maximum of 1"),
    ("seed", -1, "less than the minimum of 0"),
    ("rules", None, "None is not of type 'array'"),
    ("resamples", 10**9, "greater than the maximum of 20000"),
    ("resamples", 0, "less than the minimum of 100"),
    ("flip_limit", -5, "less than the minimum of 0"),
    ("on_inconclusive", "maybe", "is not one of ['pass', 'warn', 'fail']"),
]


@pytest.mark.parametrize(("field", "value", "said"), BAD_SETTINGS, ids=[f"{f}={v}" for f, v, _ in BAD_SETTINGS])
def test_diff_refuses_bad_regression_settings_in_either_file_in_one_line(runs, documents, tmp_path, capsys, field, value, said):
    """Before: tracebacks exiting 1 (the code of "regressed"), 23 GB for resamples 1e9, and silent
    acceptance of alpha 2, resamples 0, flip_limit -5."""
    bad = edited(documents["most"], lambda d: d["suite"]["regression"].update({field: math.nan if value == "nan" else value}))
    odd = write_run(tmp_path / "odd", bad) / "results.json"
    for argv in (["diff", str(runs["fair"]), str(odd)], ["diff", str(odd), str(runs["fair"])]):
        assert main(argv) == 2, argv
        err = one_line_error(capsys)
        assert err.startswith(f"biascheck: {odd}: suite.regression.{field}: "), err
        assert said in err and "regenerate the file with biascheck" in err, err
    # A recorded baseline is held to the same bounds (its digest made again, so the bound is what refuses it).
    recorded = {**baseline_of(documents["fair"]), "regression": bad["suite"]["regression"]}
    path = tmp_path / "release.json"
    path.write_text(baselines.document_text(recorded) if value != "nan" else json.dumps(recorded), "utf-8")
    assert main(["diff", str(path), str(runs["most"])]) == 2
    assert one_line_error(capsys).startswith(f"biascheck: {path}: "), path


def _comparison(capsys, tmp_path: Path, *argv: str) -> tuple[dict, str]:
    report = tmp_path / f"report{len(list(tmp_path.glob('report*')))}"
    main(["diff", *argv, "--report", str(report)])
    return json.loads((report / "comparison.json").read_text("utf-8")), capsys.readouterr().err


def test_diff_takes_its_settings_from_a_or_the_suite_and_says_when_b_asks_otherwise(runs, documents, suite_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    own = documents["fair"]["suite"]["regression"]
    # B asks for a laxer test (alpha 0.5, 100 resamples, seed 9): valid values, and not the ones used.
    lax = {"alpha": 0.5, "resamples": 100, "seed": 9, "flip_limit": 0}
    candidate = write_run(tmp_path / "lax", edited(documents["most"], lambda d: d["suite"]["regression"].update(lax)))
    comparison, err = _comparison(capsys, tmp_path, str(runs["fair"]), str(candidate))
    used = comparison["settings"]
    assert (used["alpha"], used["n_boot"], used["seed"]) == (own["alpha"], own["resamples"], own["seed"])
    assert comparison["flips"]["total"] > 0 and comparison["flips"]["limit"] == own["flip_limit"]
    assert "B's results.json asks for alpha 0.5, resamples 100, seed 9, flip_limit 0" in err, err
    # A baseline records its suite's settings, and they are used too.
    recorded = tmp_path / "release.json"
    strict = edited(documents["fair"], lambda d: d["suite"]["regression"].update(alpha=0.01))
    write_baseline(baseline_of(strict), recorded)
    assert baselines.load(recorded).regression["alpha"] == 0.01
    comparison, err = _comparison(capsys, tmp_path, str(recorded), str(candidate))
    assert comparison["settings"]["alpha"] == 0.01 and f"regression settings of {recorded}" in err, err
    # --suite: the suite's own, whatever A or B record.
    comparison, err = _comparison(capsys, tmp_path, str(recorded), str(candidate), "--suite", str(suite_dir))
    assert comparison["settings"]["alpha"] == own["alpha"] and f"regression settings of {suite_dir / 'suite.toml'}" in err, err
    # A baseline of an older biascheck records none: the suite B names, else the defaults, said either way.
    old = {k: v for k, v in baseline_of(documents["fair"]).items() if k != "regression"}
    write_baseline(old, recorded)
    nowhere = write_run(
        tmp_path / "nowhere",
        edited(
            documents["most"], lambda d: d["suite"].update(manifest=str(tmp_path / "gone" / "suite.toml")) or d["suite"]["regression"].update(lax)
        ),
    )
    comparison, err = _comparison(capsys, tmp_path, str(recorded), str(nowhere))
    assert comparison["settings"]["alpha"] == 0.05 and comparison["settings"]["n_boot"] == 2000, comparison["settings"]
    assert "records no regression settings" in err and "the defaults" in err and "--suite" in err, err


def test_a_run_listing_a_case_twice_is_refused_wherever_it_is_read(runs, documents, tmp_path, capsys):
    """Issue 34, D12: every case twice was compared as 192 cases against 96 (each change counted
    twice, every interval narrowed), with no word."""
    doubled = edited(documents["most"], lambda d: d["cases"].extend(copy.deepcopy(d["cases"])))
    first = documents["most"]["cases"][0]["case_id"]
    odd = write_run(tmp_path / "doubled", doubled) / "results.json"
    expected = f"biascheck: {odd}: cases.{len(documents['most']['cases'])}.case_id: case {first!r} appears twice"
    for argv in (
        ["diff", str(runs["fair"]), str(odd)],
        ["diff", str(odd), str(runs["fair"])],
        ["compare", str(runs["fair"]), str(odd), "--out", str(tmp_path / "out")],
    ):
        assert main(argv) == 2, argv
        assert one_line_error(capsys).startswith(expected), argv
    assert not (tmp_path / "out").exists()


# --- history and compare mark the same failed runs, from the recorded verdicts (issue 35) -----------


def _chart_marks(page: str) -> dict[str, list[tuple[bool, bool]]]:
    """Per chart (metric), per row: (its dot drawn in the failing colour, FAIL written beside it)."""
    out = {}
    for metric, chart in re.findall(r'<figure class="chart" id="chart-([a-z_]+)">(.*?)</figure>', page, re.S):
        rows = chart.split('<g class="mark">')[1:]
        out[metric] = [('class="pt failing"' in row, '<tspan class="fail">FAIL</tspan>' in row) for row in rows]
    return out


def _md_rows(text: str, first_cell: str) -> list[str]:
    """The rows of the first Markdown table whose header starts with ``first_cell``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_cell} |"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append(line)
    return rows


def _failed_by_record(document: dict) -> set[str]:
    """The overall metrics whose recorded verdict failed the run (a deselected one does not)."""
    return {v["metric"] for v in document["verdicts"] if v["scope"] == "overall" and not v["passed"] and v.get("gated", True)}


def test_history_and_compare_mark_the_same_failed_runs_from_the_recorded_verdicts(documents, suite_dir, tmp_path, capsys, monkeypatch):
    """Before: history.html drew a release over its threshold (0.0970 [0.0764, 0.1222] against
    |x| <= 0.05) in the passing colour with no FAIL, and history's Markdown said nothing, while
    compare marked the same run FAIL. A check a -k run deselected is recorded as not gating:
    neither view calls it a failure, whatever its value."""
    deselected = edited(documents["some"], lambda d: [v.update(gated=False) for v in d["verdicts"] if not v["passed"]])
    deselected["passed"] = True
    chosen = [documents["fair"], documents["most"], deselected, documents["some"]]
    failed = [_failed_by_record(d) for d in chosen]
    assert failed[0] == set() and failed[1] and failed[2] == set() and failed[3]  # the fixture holds both kinds

    paths = [str(write_run(tmp_path / "runs" / f"run{i}", d)) for i, d in enumerate(chosen)]
    assert main(["compare", *paths, "--out", str(tmp_path / "c")]) == 0
    compare_md = capsys.readouterr().out
    compare_html = (tmp_path / "c" / "compare.html").read_text("utf-8")

    path = tmp_path / "baselines" / "kobbq" / "release.json"
    for i, document in enumerate(chosen):
        replace_baseline(release(document, f"v{i}", f"2026-0{i + 1}-05T10:00:00+00:00"), path)
    monkeypatch.chdir(tmp_path)
    assert main(["history", str(suite_dir), "--out", str(tmp_path / "h")]) == 0
    history_md = capsys.readouterr().out
    history_html = (tmp_path / "h" / "history.html").read_text("utf-8")

    # The runs' table (compare) and the releases' table (history): FAIL on exactly the failed ones.
    compare_rows, history_rows = _md_rows(compare_md, r"\#"), _md_rows(history_md, "release")
    assert [("FAIL" in row) for row in compare_rows] == [bool(f) for f in failed], compare_rows
    assert [("FAIL" in row) for row in history_rows] == [bool(f) for f in failed], history_rows
    # Each failed metric is named in both, in the row of its run.
    for f, c_row, h_row in zip(failed, compare_rows, history_rows):
        for metric in f:
            assert metric in c_row and metric in h_row, (metric, c_row, h_row)
    # The charts: a failed release's dot in the failing colour and FAIL beside it, the same rows in both pages.
    compare_charts, history_charts = _chart_marks(compare_html), _chart_marks(history_html)
    assert list(history_charts) == list(compare_charts)
    for metric, rows in history_charts.items():
        expected = [(metric in f, metric in f) for f in failed]
        assert rows == compare_charts[metric] == expected, metric
    # The releases' table of history.html says it too, as compare.html's runs table does.
    for page in (compare_html, history_html):
        table = re.search(r'<section id="(?:runs|releases)">(.*?)</section>', page, re.S)
        assert table is not None
        body = table.group(1).split("<tbody>")[1]
        assert [('class="badge fail"' in row) for row in body.split("<tr>")[1:]] == [bool(f) for f in failed], page[:200]


def test_history_says_when_a_baseline_records_no_verdicts(documents, suite_dir, tmp_path, capsys, monkeypatch):
    """A baseline written by an older biascheck keeps no verdicts: history says so, rather than
    judge it again against today's thresholds."""
    path = tmp_path / "baselines" / "kobbq" / "release.json"
    old = {k: v for k, v in release(documents["most"], "v0", "2026-01-05T10:00:00+00:00").items() if k != "verdicts"}
    write_baseline(old, path)
    monkeypatch.chdir(tmp_path)
    assert main(["history", str(suite_dir), "--out", str(tmp_path / "h")]) == 0
    rows = _md_rows(capsys.readouterr().out, "release")
    assert len(rows) == 1 and "FAIL" not in rows[0] and "not recorded" in rows[0], rows
    page = (tmp_path / "h" / "history.html").read_text("utf-8")
    assert "not recorded" in page and 'class="pt failing"' not in page


# --- history and compare mark a regression against the run before, from one function (issue 35) ----

LOOSE = "diff_bias_amb = { max_abs = 1 }\ndiff_bias_dis = { max_abs = 1 }\nacc_dis = { min = 0 }\nooc_ratio = { max = 1 }"
# How much worse each persona answers: each one regresses against every one before it in this order.
RANK = {"fair": 0, "some": 1, "most": 2}


@pytest.fixture(scope="module")
def loose_documents(tmp_path_factory, data_dir) -> dict[str, dict]:
    """The runs of ``documents`` made under thresholds every persona passes: the same suite
    fingerprint and answers, other recorded verdicts (thresholds are no part of a fingerprint)."""
    folder = write_subset_suite(
        tmp_path_factory.mktemp("loose") / "kobbq-tiny",
        subset='templates_per_category = 1\nseed = 7\nchoice_orders = "original"',
        prompts='from_data = "prompts"\nuse = ["1"]',
        thresholds=LOOSE,
    )
    prepared = PreparedSuite.of(load_suite(folder, data_dir=data_dir))
    return {name: simulated_results(prepared, persona).to_json() for name, persona in PERSONAS.items()}


def _both_views(chosen: list[dict], root: Path, suite_dir: Path) -> dict[str, dict]:
    """``biascheck compare`` of ``chosen`` (as runs, in order) and ``biascheck history`` of them (as
    releases v0, v1, ... recorded in that order): each view's Markdown, JSON and HTML."""
    revised = [edited(d, lambda d, i=i: d["model"].update(revision=f"v{i}")) for i, d in enumerate(chosen)]
    paths = [str(write_run(root / "runs" / f"run{i}", d)) for i, d in enumerate(revised)]
    out = {}
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        assert main(["compare", *paths, "--out", str(root / "c")]) == 0
    out["compare"] = {"md": printed.getvalue(), "json": json.loads((root / "c" / "compare.json").read_text("utf-8"))}
    out["compare"]["html"] = (root / "c" / "compare.html").read_text("utf-8")
    path = root / "baselines" / "kobbq" / "release.json"
    for i, document in enumerate(revised):
        replace_baseline(release(document, f"v{i}", f"2026-01-01T{i:02d}:00:00+00:00"), path)
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        assert main(["history", str(suite_dir), "--baselines", str(root / "baselines"), "--out", str(root / "h")]) == 0
    out["history"] = {"md": printed.getvalue(), "json": json.loads((root / "h" / "history.json").read_text("utf-8"))}
    out["history"]["html"] = (root / "h" / "history.html").read_text("utf-8")
    return out


def _html_rows(page: str) -> list[str]:
    """The rows of the runs' (compare) or releases' (history) table."""
    table = re.search(r'<section id="(?:runs|releases)">(.*?)</section>', page, re.S)
    assert table is not None
    return table.group(1).split("<tbody>")[1].split("<tr>")[1:]


def _marks(view: dict) -> list[tuple[bool, str | None]]:
    """Per run (release), what each form of the view says of it: (failed its thresholds, its
    regression verdict); the Markdown, the JSON and the HTML must say the same."""
    items = view["json"].get("runs") or view["json"]["releases"]
    from_json = [(bool(item["failed"]), item["regression"] and item["regression"]["verdict"]) for item in items]
    header = r"\#" if "runs" in view["json"] else "release"
    from_md = []
    for row in _md_rows(view["md"], header):
        said = "regressed" if "**regressed vs" in row else "not regressed" if "not regressed vs" in row else None
        from_md.append(("FAIL" in row, "not compared" if "not compared with" in row else said))
    from_html = []
    for row in _html_rows(view["html"]):
        said = "regressed" if "badge v-regressed" in row else "not regressed" if "not regressed vs" in row else None
        from_html.append(('class="badge fail"' in row, "not compared" if "badge v-not-compared" in row else said))
    assert from_md == from_json == from_html, (from_md, from_json, from_html)
    return from_json


def test_history_and_compare_mark_a_release_that_regressed_against_the_one_before(documents, loose_documents, suite_dir, tmp_path):
    """Before: neither view tested a release against the one before it; a release that passed its
    thresholds but was credibly worse than its predecessor (what the gate fails) was drawn as fine.
    v1 fails its thresholds without answering differently from v0; v2 passes its (looser)
    thresholds and regressed against v1. Both views mark each alike, in Markdown, JSON and HTML."""
    chosen = [loose_documents["some"], documents["some"], loose_documents["most"]]
    assert [d["passed"] for d in chosen] == [True, False, True]
    views = _both_views(chosen, tmp_path, suite_dir)
    assert views["compare"]["json"]["schema"] == "biascheck.compare/2" and views["history"]["json"]["schema"] == "biascheck.history/2"
    for view in views.values():
        assert _marks(view) == [(False, None), (True, "not regressed"), (False, "regressed")]
    runs, releases = views["compare"]["json"]["runs"], views["history"]["json"]["releases"]
    # Against the run given before (compare), the release recorded before (history), by its label.
    assert [r["regression"]["against"] for r in runs[1:]] == [runs[0]["label"], runs[1]["label"]]
    assert [r["regression"]["against"] for r in releases[1:]] == ["v0", "v1"]
    # One test, one answer: the same regressed checks in both, each credibly worse beyond its margin.
    checks = releases[2]["regression"]["checks"]
    assert checks == runs[2]["regression"]["checks"]
    assert {(c["metric"], c["scope"]) for c in checks} >= {("diff_bias_amb", "overall"), ("diff_bias_dis", "overall")}
    assert all(c["worsening_ci"][0] > c["margin"] for c in checks), checks
    # They are the regressions of the Comparison record of the pair, the same read from the runs' records.
    records = [(run["path"], load_run(run["path"])) for run in runs]
    mark = compare_runs(records).runs[2].marks.regression
    assert mark is not None and [check.verdict for check in mark.checks] == ["regressed"] * len(checks)
    assert mark.to_json()["checks"] == checks
    for view in views.values():
        for check in mark.checks:
            assert md_text(check_text(check)) in view["md"], check
            assert html.escape(check_text(check), quote=True) in view["html"], check


def test_compare_and_history_read_records_and_mark_each_run_from_its_decisions(documents, loose_documents, suite_dir, tmp_path):
    """The views take records (issue 35): compare_runs of the runs' records (load_run) and
    history_document of the baselines' (load_baseline) give what the commands write, byte for byte;
    a run's FAIL is its record's failed_checks, and its regression the regressions of the
    Comparison record that biascheck.compare (the Python gate, as biascheck diff) makes of the pair."""
    from biascheck.api import compare, load_baseline
    from biascheck.config.manifest import load_manifest
    from biascheck.reporting.html import render_history_html, render_runs_html
    from biascheck.reporting.runs import history_document, render_history_markdown, render_runs_markdown

    chosen = [loose_documents["some"], documents["some"], loose_documents["most"]]
    views = _both_views(chosen, tmp_path, suite_dir)
    written = views["compare"]["json"]
    runs = compare_runs([(run["path"], load_run(run["path"])) for run in written["runs"]])
    assert {**runs.to_json(), "created_at": None} == {**written, "created_at": None}
    assert render_runs_markdown(runs) == views["compare"]["md"]
    when = re.compile(r"<dt>created</dt><dd>[^<]*</dd>")
    assert when.sub("", render_runs_html(runs)) == when.sub("", views["compare"]["html"])
    manifest = load_manifest(suite_dir)
    releases = [(release["path"], load_baseline(release["path"])) for release in views["history"]["json"]["releases"]]
    history = history_document(
        releases,
        suite=manifest.name,
        thresholds={metric: threshold.to_dict() for metric, threshold in manifest.thresholds.items()},
        gated_metrics=manifest.gated_metrics(None),
        regression=manifest.regression.to_dict(),
    )
    assert history.to_json() == views["history"]["json"]
    assert render_history_markdown(history) == views["history"]["md"] and render_history_html(history) == views["history"]["html"]

    def worse(checks) -> list[tuple[str, str, Any]]:
        return [(check.metric, check.scope, check.worsening_ci) for check in checks]

    for entries in (runs.runs, history.releases):
        assert [entry.marks.failed for entry in entries] == [entry.record.failed_checks for entry in entries]
        assert [bool(entry.marks.failed) for entry in entries] == [False, True, False]
        assert [entry.marks.regression and entry.marks.regression.verdict for entry in entries] == [None, "not regressed", "regressed"]
    for before, run, release in zip(runs.runs, runs.runs[1:], history.releases[1:]):
        regressions = worse(compare(before.record, run.record).regressions)
        assert run.marks.regression and release.marks.regression
        assert worse(run.marks.regression.checks) == worse(release.marks.regression.checks) == regressions


@settings(max_examples=examples(12), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(sorted(PERSONAS)), st.booleans()), min_size=2, max_size=4))
def test_history_and_compare_mark_the_same_runs_for_any_sequence_of_releases(documents, loose_documents, suite_dir, steps):
    """Any sequence of releases, each under strict or loose thresholds (so failing them or not), each
    answering better, worse or as the one before: both views mark the same ones, as failed when its
    recorded verdicts failed, as regressed exactly when it answers worse than its predecessor."""
    chosen = [(loose_documents if loose else documents)[persona] for persona, loose in steps]
    with tempfile.TemporaryDirectory() as folder:
        views = _both_views(chosen, Path(folder), suite_dir)
    marks = _marks(views["compare"])
    assert marks == _marks(views["history"])
    assert [failed for failed, _ in marks] == [not d["passed"] for d in chosen]
    expected = [None] + ["regressed" if RANK[b[0]] > RANK[a[0]] else "not regressed" for a, b in zip(steps, steps[1:])]
    assert [regression for _, regression in marks] == expected


def _mark(mark: dict | None) -> RegressionMark | None:
    """The typed mark of a view's JSON (a check read by its metric, scope, interval and margin)."""
    if mark is None:
        return None
    checks = tuple(SimpleNamespace(**check) for check in mark["checks"])
    return RegressionMark(mark["against"], mark["verdict"], checks, mark["reason"])


def test_a_release_that_cannot_be_tested_against_the_one_before_is_marked_not_compared(documents, suite_dir, tmp_path, capsys, monkeypatch):
    """A history spans suite versions and older baselines, a sweep may hold a stopped run: such a
    pair is marked "not compared" with the reason, and the command still shows everything (exit 0)."""
    monkeypatch.chdir(tmp_path)

    def history(name: str, steps: list[tuple[dict, Any]]) -> list[dict]:
        for i, (document, change) in enumerate(steps):
            recorded = release(edited(document, lambda d: d["suite"].update(name=name)), f"v{i}", f"2026-01-01T{i:02d}:00:00+00:00")
            write_baseline(change(recorded), tmp_path / "baselines" / name / "history" / f"v{i}.json")
        assert main(["history", str(suite_dir) if name == "kobbq" else name, "--out", str(tmp_path / name)]) == 0
        printed = capsys.readouterr().out
        marks = [r["regression"] for r in json.loads((tmp_path / name / "history.json").read_text("utf-8"))["releases"]]
        for row, mark in zip(_md_rows(printed, "release"), marks):
            assert md_text(regression_text(_mark(mark))) in row, (row, mark)
        return marks

    def prompts(d: dict) -> dict:
        return {**d, "suite": {**d["suite"], "fingerprint": {**d["suite"]["fingerprint"], "prompts": "other"}}}

    def old(*keys: str):
        return lambda d: {k: v for k, v in d.items() if k not in keys}

    same = lambda d: d  # noqa: E731
    # A suite without a manifest here: a predecessor recording no [regression] table leaves no test to run.
    marks = history("mine", [(documents["fair"], same), (documents["some"], prompts), (documents["most"], lambda d: old("regression")(prompts(d)))])
    assert marks[1] == {"against": "v0", "verdict": "not compared", "checks": [], "reason": "the suite changed (prompts)"}
    assert marks[2]["verdict"] == "regressed"  # its predecessor records the table

    def loglik(d: dict) -> dict:
        return {**d, "model": {**d["model"], "estimator": "loglik"}}

    steps = [(documents["fair"], old("regression")), (documents["most"], same), (documents["most"], old("verdicts")), (documents["most"], loglik)]
    marks = history("mine2", steps)
    assert marks[1]["verdict"] == "not compared" and marks[1]["reason"] == "v0 records no regression settings (a baseline of an older biascheck)"
    assert marks[2]["verdict"] == "not compared" and "records no verdicts" in marks[2]["reason"]
    assert marks[3]["verdict"] == "not compared" and marks[3]["reason"] == "answered by loglik, the one before by generation (the default)"
    # The suite's folder given: its [regression] table stands in for one a predecessor does not record.
    marks = history("kobbq", [(documents["fair"], old("regression")), (documents["most"], same)])
    assert marks[1]["verdict"] == "regressed" and marks[1]["checks"]

    stopped = edited(documents["some"], lambda d: d["run"].update(complete=False, incomplete_reason="interrupted by the user"))
    paths = [str(write_run(tmp_path / "runs" / name, d)) for name, d in (("stopped", stopped), ("most", documents["most"]))]
    assert main(["compare", *paths, "--out", str(tmp_path / "c")]) == 0
    row = _md_rows(capsys.readouterr().out, r"\#")[1]
    mark = json.loads((tmp_path / "c" / "compare.json").read_text("utf-8"))["runs"][1]["regression"]
    assert mark["verdict"] == "not compared" and mark["reason"] == "the run before is incomplete (interrupted by the user)"
    assert md_text(regression_text(_mark(mark))) in row
