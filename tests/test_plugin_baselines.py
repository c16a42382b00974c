"""The baseline workflow through pytest and the ``biascheck`` command, against the sim server:
update -> compare (round trip) -> regression, refusals, damaged baselines, GitHub Actions output."""

from __future__ import annotations

import html
import json
import os
import subprocess
from pathlib import Path
from statistics import NormalDist

import pytest

# Imported here, not inside tests: pytester's teardown forgets modules first imported during a
# test, and numpy cannot be imported twice in one process.
from biascheck.evaluation import baseline as baselines
from biascheck.sim.calibration import PreparedSuite, simulated_results
from biascheck.suite import load_suite

from conftest import biascheck_command, write_subset_suite

pytestmark = pytest.mark.data

LOOSE = "diff_bias_amb = { max_abs = 1.0 }\nacc_dis = { min = 0.0 }\nooc_ratio = { max = 1.0 }"


@pytest.fixture
def gate_suite(tmp_path: Path, data_dir: Path) -> Path:
    """~100 KoBBQ cases whose thresholds always pass, so exit codes speak of regressions alone."""
    return write_subset_suite(
        tmp_path / "kobbq-gate",
        subset='templates_per_category = 1\nseed = 7\nchoice_orders = "original"',
        prompts='from_data = "prompts"\nuse = ["1"]',
        thresholds=LOOSE,
    )


def outcomes(run) -> dict[str, str]:
    """Node id -> outcome, from the JUnit XML a run wrote."""
    import xml.etree.ElementTree as ET

    tree = ET.parse(run.report_dir.parent / f"{run.report_dir.name}.xml")
    result = {}
    for case in tree.iter("testcase"):
        status = "failed" if case.find("failure") is not None else "skipped" if case.find("skipped") is not None else "passed"
        result[f"{case.get('classname')}::{case.get('name')}"] = status
    return result


def test_update_then_compare_round_trip_then_a_regression(run_biascheck, gate_suite, tmp_path, monkeypatch, data_dir):
    pattern = str(tmp_path / "baselines" / "{suite}" / "base.json")
    written = tmp_path / "baselines" / "kobbq" / "base.json"

    first = run_biascheck(gate_suite, "sim/stereotyped?p=0.2", "--biascheck-update-baseline", "--biascheck-baseline", pattern)
    assert first.ret == 0, first.output
    assert f"baseline written: {written}" in first.output
    document = json.loads(written.read_text("utf-8"))
    assert len(document["cases"]["rows"]) == first.results()["run"]["cases"] == first.results()["suite"]["cases_total"]

    # Round trip: the same persona and seed against its own baseline passes every regression item.
    same = run_biascheck(
        gate_suite, "sim/stereotyped?p=0.2", "--biascheck-baseline", pattern, "--junitxml", str(tmp_path / "same.xml"), report="same"
    )
    assert same.ret == 0, same.output
    regression = {k: v for k, v in outcomes(same).items() if "regression" in k}
    assert regression and set(regression.values()) == {"passed"}
    comparison = json.loads((same.report_dir / "comparison.json").read_text("utf-8"))
    assert comparison["flips"]["total"] == 0 and not comparison["regressed"]
    assert (same.report_dir / "comparison.md").is_file() and (same.report_dir / "report.html").is_file()
    assert json.loads(written.read_text("utf-8")) == document  # a normal run never changes the baseline

    # A more biased candidate: regression items fail with one line each, in JUnit and in GitHub's formats.
    summary = tmp_path / "step-summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    worse = run_biascheck(
        gate_suite, "sim/stereotyped?p=0.9", "--biascheck-baseline", pattern, "--junitxml", str(tmp_path / "worse.xml"), report="worse"
    )
    assert worse.ret == 1, worse.output
    failed = [k for k, v in outcomes(worse).items() if v == "failed"]
    assert any(k.endswith("regression.overall::diff_bias_amb") for k in failed), failed
    assert all("regression" in k for k in failed)  # thresholds are loose: only the comparison fails
    assert "diff_bias_amb (overall) regressed: 0.1" in worse.output
    assert "::error title=biascheck kobbq%3A diff_bias_amb (overall) regressed::" in worse.output
    # A deselected check is never annotated: annotations are the failed items.
    quiet = run_biascheck(gate_suite, "sim/stereotyped?p=0.9", "--biascheck-baseline", pattern, "-k", "not regression", report="quiet")
    assert quiet.ret == 0 and "::error" not in quiet.output
    # Nor does the decision count it: every view agrees with the exit status, and says why.
    deselected = json.loads((quiet.report_dir / "comparison.json").read_text("utf-8"))
    assert (deselected["passed"], deselected["regressed"]) == (True, False)
    assert all(r["gated"] is False for r in deselected["results"]) and any(r["verdict"] == "regressed" for r in deselected["results"])
    opening = (quiet.report_dir / "report.md").read_text("utf-8").split("\n")[2]
    assert "FAILED" not in opening and "regression" not in opening, opening
    assert "regressed, not gated (deselected)" in (quiet.report_dir / "comparison.md").read_text("utf-8")
    assert "biascheck decision: kobbq: FAILED" not in quiet.output
    text = summary.read_text("utf-8")
    assert "# biascheck diff: kobbq — REGRESSED" in text and "unknown -> biased" in text
    # The flip list quotes the Korean prompt as sent, byte for byte, in every format.
    comparison = json.loads((worse.report_dir / "comparison.json").read_text("utf-8"))
    flip = comparison["flips"]["examples"][0]
    sent = next(c.messages[-1].content for c in load_suite(gate_suite, data_dir=data_dir).cases if c.case_id == flip["case_id"])
    assert flip["prompt_text"] == sent and any("\uac00" <= ch <= "\ud7a3" for ch in sent)
    # The gate writes every flip beside comparison.json, one per line.
    every = [json.loads(line) for line in (worse.report_dir / "flips.jsonl").read_text("utf-8").splitlines()]
    assert comparison["flips"]["file"] == "flips.jsonl" and len(every) == comparison["flips"]["total"] >= comparison["flips"]["shown"] >= 1
    assert flip in every
    for name in ("comparison.md", "report.html"):
        page = (worse.report_dir / name).read_text("utf-8")
        assert sent.splitlines()[1] in page or html.escape(sent.splitlines()[1]) in page, name
    assert "Traceback" not in worse.output

    # `biascheck diff` gives the same verdicts without pytest.
    monkeypatch.delenv("GITHUB_ACTIONS")
    diff = biascheck_command(
        "diff", str(written), str(worse.report_dir), "--suite", str(gate_suite), "--data", str(data_dir), "--report", str(tmp_path / "diff")
    )
    assert diff.returncode == 1, diff.stderr
    again = json.loads((tmp_path / "diff" / "comparison.json").read_text("utf-8"))
    mine = json.loads((worse.report_dir / "comparison.json").read_text("utf-8"))
    assert [(r["metric"], r["scope"], r["verdict"]) for r in again["results"]] == [(r["metric"], r["scope"], r["verdict"]) for r in mine["results"]]
    assert again["flips"] == mine["flips"]


def test_a_recording_reports_failed_thresholds_but_passes_unless_strict(run_biascheck, pytester, tmp_path, data_dir):
    strict = write_subset_suite(
        tmp_path / "kobbq-strict",
        subset='templates_per_category = 1\nseed = 7\nchoice_orders = "original"',
        prompts='from_data = "prompts"\nuse = ["1"]',
        thresholds="diff_bias_amb = { max_abs = 0.01 }",
    )
    # No --biascheck-baseline: the default name, independent of the model (under xdist, beside an
    # ordinary test, so that the controller sees a worker's failed reports: one worker, since the
    # controller reads each worker's alike, and a worker is a process paying litellm's import).
    other = pytester.makepyfile(test_other="def test_other():\n    pass\n")
    recorded = run_biascheck(strict, "sim/stereotyped?p=0.9", "--biascheck-update-baseline", str(other), "-n", "1")
    written = pytester.path / "baselines" / "kobbq" / "release.json"
    assert recorded.ret == 0, recorded.output
    assert "overall::diff_bias_amb FAILED" in recorded.output or "FAILED" in recorded.output
    assert "threshold check(s) failed (listed above); every baseline was recorded, so the run passes" in recorded.output
    assert json.loads(written.read_text("utf-8"))["model"]["model"] == "sim/stereotyped?p=0.9"

    strict_run = run_biascheck(strict, "sim/stereotyped?p=0.9", "--biascheck-update-baseline", "--biascheck-strict-record")
    assert strict_run.ret == 1 and "baseline replaced" in strict_run.output, strict_run.output
    # The replaced baseline is kept beside it, named for when it was made (no revision was given).
    (kept,) = (written.parent / "history").iterdir()
    assert kept.name.startswith("20") and f"(the one it replaced is kept as baselines/kobbq/history/{kept.name})" in strict_run.output
    assert baselines.load(kept).model_name == "sim/stereotyped?p=0.9"  # whole: it loads, digest and all
    # Anything other than a threshold still fails a recording: here the baseline is refused.
    errored = run_biascheck(strict, "sim/fair?fail_rate=1&faults=500", "--biascheck-update-baseline", "--biascheck-retries", "0", report="errored")
    assert errored.ret == 1 and "not writing the baseline" in errored.output, errored.output


def test_baseline_updates_are_refused_for_partial_or_errored_runs(run_biascheck, gate_suite, tmp_path):
    target = tmp_path / "b.json"
    partial = run_biascheck(gate_suite, "sim/fair", "--biascheck-update-baseline", "--biascheck-baseline", str(target), "-k", "age")
    assert partial.ret == 4 and "a baseline must cover the whole suite" in partial.output and not target.exists()
    errored = run_biascheck(
        gate_suite,
        "sim/fair?fail_rate=1&faults=500",
        "--biascheck-update-baseline",
        "--biascheck-baseline",
        str(target),
        "--biascheck-retries",
        "0",
        report="errored",
    )
    assert errored.ret == 1 and not target.exists()
    assert "not writing the baseline" in errored.output and "errored after retries" in errored.output


def test_a_baseline_path_the_file_system_refuses_is_one_line(run_biascheck, gate_suite, tmp_path):
    # Issue 23, item 10: a 5,000-character suite name gave OSError: File name too long from
    # path.exists(); the schema now bounds names, and any path the file system refuses is one line.
    target = tmp_path / ("b" * 300 + ".json")
    run = run_biascheck(gate_suite, "sim/fair", "--biascheck-update-baseline", "--biascheck-baseline", str(target))
    assert run.ret == 1 and "Traceback" not in run.output and "INTERNALERROR" not in run.output, run.output
    assert f"biascheck: {target}: could not write the baseline (File name too long)" in run.output, run.output


def test_damaged_or_incomparable_baselines_are_one_line_errors(run_biascheck, gate_suite, tmp_path, data_dir):
    target = tmp_path / "b.json"
    assert run_biascheck(gate_suite, "sim/fair", "--biascheck-update-baseline", "--biascheck-baseline", str(target)).ret == 0
    text = target.read_text("utf-8")
    target.write_text(text[:-200], "utf-8")
    truncated = run_biascheck(gate_suite, "sim/fair", "--biascheck-baseline", str(target), report="t")
    assert truncated.ret in (2, 4) and f"{target}: is truncated" in truncated.output and "Traceback" not in truncated.output

    target.write_text(text, "utf-8")
    other_prompts = write_subset_suite(
        tmp_path / "kobbq-other",
        subset='templates_per_category = 1\nseed = 7\nchoice_orders = "original"',
        prompts='from_data = "prompts"\nuse = ["1", "2"]',
        thresholds=LOOSE,
    )
    mismatch = run_biascheck(other_prompts, "sim/fair", "--biascheck-baseline", str(target), report="m")
    assert mismatch.ret in (2, 4) and f"{target}: suite.fingerprint: was made with other prompts" in mismatch.output
    assert "Traceback" not in mismatch.output
    allowed = run_biascheck(other_prompts, "sim/fair", "--biascheck-baseline", str(target), "--biascheck-allow-fingerprint-mismatch", report="a")
    assert allowed.ret == 0, allowed.output
    comparison = json.loads((allowed.report_dir / "comparison.json").read_text("utf-8"))
    # Prompt 1's cases are shared; prompt 2's are not in the baseline and are left out, with a warning.
    assert comparison["fingerprint"]["differences"] == ["prompts"] and comparison["cases"]["common"] == 96
    assert comparison["cases"]["candidate"] == 192 and any("not in the baseline" in w for w in comparison["warnings"])


def test_bad_rules_and_one_file_for_several_suites_are_refused_before_any_call(run_biascheck, gate_suite, tmp_path, data_dir):
    target = tmp_path / "b.json"
    baselines.write(baselines.from_results(simulated_results(PreparedSuite.of(load_suite(gate_suite, data_dir=data_dir)), "fair")), target)
    for rule, problem in (("acc_dsi:+0.1", "kobbq has no metric 'acc_dsi'"), ("acc_dis:+0.1", "points the wrong way")):
        run = run_biascheck(gate_suite, "sim/fair", "--biascheck-baseline", str(target), "--biascheck-compare-fail", rule, "--collect-only")
        assert run.ret in (2, 4) and f"--biascheck-compare-fail: {rule}: " in run.output and problem in run.output, run.output
        assert "Traceback" not in run.output and "INTERNALERROR" not in run.output

    twin = gate_suite.parent / "kobbq-twin"
    twin.mkdir()
    (twin / "suite.toml").write_text((gate_suite / "suite.toml").read_text("utf-8").replace('name = "kobbq"', 'name = "kobbq-twin"'), "utf-8")
    both = run_biascheck(gate_suite, "sim/fair", str(twin), "--biascheck-update-baseline", "--biascheck-baseline", str(tmp_path / "one.json"))
    assert both.ret == 4 and "2 suites would overwrite one file" in both.output and "calls" not in both.output


def test_pytest_help_lists_every_biascheck_option(pytester):
    """argparse formats help with %: one unescaped percent sign broke `pytest --help`."""
    result = pytester.runpytest_inprocess("--help")
    assert result.ret == 0, result.stderr.str()
    text = result.stdout.str()
    for option in (
        "--biascheck-baseline",
        "--biascheck-update-baseline",
        "--biascheck-compare-fail",
        "--biascheck-estimator",
        "--biascheck-allow-fingerprint-mismatch",
        "--biascheck-fail-inconclusive",
        "--biascheck-on-inconclusive",
        "acc_dis:-2%",
    ):
        assert option in text, option


# --- on_inconclusive: pass | warn | fail (issue 25, part 3) ------------------------------------

# A small worsening on ~100 cases: no check regresses, several can neither show nor rule out one.
SLIGHTLY_WORSE = "sim/stereotyped?p=0.1"


def with_on_inconclusive(suite: Path, mode: str) -> Path:
    """A copy of ``suite`` whose [regression] table says ``on_inconclusive = mode``."""
    copy = suite.parent / f"{suite.name}-{mode}"
    copy.mkdir()
    text = (suite / "suite.toml").read_text("utf-8")
    assert "\n[regression]\n" in text
    (copy / "suite.toml").write_text(text.replace("\n[regression]\n", f'\n[regression]\non_inconclusive = "{mode}"\n'), "utf-8")
    return copy


def test_on_inconclusive_pass_warn_and_fail_end_to_end(run_biascheck, gate_suite, tmp_path, monkeypatch, pytester, data_dir):
    base = tmp_path / "base.json"
    recorded = run_biascheck(gate_suite, "sim/fair", "--biascheck-update-baseline", "--biascheck-baseline", str(base), report="record")
    assert recorded.ret == 0, recorded.output

    # warn, the default: the gate passes and every summary names the unresolved checks and the size that would resolve them.
    summary = tmp_path / "step-summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    warn = run_biascheck(gate_suite, SLIGHTLY_WORSE, "--biascheck-baseline", str(base), report="warn")
    assert warn.ret == 0, warn.output
    comparison = json.loads((warn.report_dir / "comparison.json").read_text("utf-8"))
    assert comparison["settings"]["on_inconclusive"] == "warn" and "fail_inconclusive" not in comparison["settings"]
    assert not comparison["regressed"] and comparison["passed"]
    unresolved = [r for r in comparison["results"] if r["verdict"] == "inconclusive"]
    assert unresolved
    for r in unresolved:  # every margin here is > 0: the estimate exists, and exceeds the cases the check had
        assert isinstance(r["cases_to_resolve"], int) and r["cases_to_resolve"] >= r["cases"] > 0, r
        # Redone from what comparison.json prints: the deciding spread, on normal quantiles.
        z = NormalDist().inv_cdf
        family, alpha, power = (comparison["settings"][k] for k in ("family_size", "alpha", "power"))
        detectable = (z(1 - alpha / family) + z(power)) * r["interval"]["se"]
        assert r["cases_to_resolve"] == pytest.approx(max(r["cases"], r["cases"] * (detectable / r["margin"]) ** 2), abs=1.001)
    assert all(r["cases_to_resolve"] is None for r in comparison["results"] if r["verdict"] != "inconclusive")
    assert f"WARNING: {len(unresolved)} checks could not be resolved" in warn.output
    warnings = [line for line in warn.output.splitlines() if line.startswith("::warning ")]
    assert len(warnings) == len(unresolved) and "::error" not in warn.output, warn.output
    first = unresolved[0]
    assert any(f"{first['metric']} ({first['scope']}) inconclusive::" in line and "cases would resolve it" in line for line in warnings)
    step = summary.read_text("utf-8")
    assert "## Unresolved checks" in step and f"{first['metric']} ({first['scope']}): detects" in step
    assert f"about {first['cases_to_resolve']:,} cases would resolve it" in step
    assert "## Unresolved checks" in (warn.report_dir / "comparison.md").read_text("utf-8")
    assert 'id="unresolved"' in (warn.report_dir / "report.html").read_text("utf-8")
    # Like ::error lines, ::warning lines name only the checks whose items ran.
    unselected = run_biascheck(gate_suite, SLIGHTLY_WORSE, "--biascheck-baseline", str(base), "-k", "not regression", report="unselected")
    assert unselected.ret == 0 and "::warning" not in unselected.output, unselected.output
    monkeypatch.delenv("GITHUB_ACTIONS")

    # fail, and its old spelling: each unresolved check is a failed regression item.
    for i, args in enumerate((["--biascheck-on-inconclusive=fail"], ["--biascheck-fail-inconclusive"])):
        xml = tmp_path / f"fail{i}.xml"
        failed = run_biascheck(gate_suite, SLIGHTLY_WORSE, "--biascheck-baseline", str(base), "--junitxml", str(xml), *args, report=f"fail{i}")
        assert failed.ret == 1, failed.output
        items = [k for k, v in outcomes(failed).items() if v == "failed"]
        assert len(items) == len(unresolved) and all("regression" in k for k in items), items
        assert json.loads((failed.report_dir / "comparison.json").read_text("utf-8"))["settings"]["on_inconclusive"] == "fail"
        assert "checks could not be resolved, and fail the gate" in failed.output

    # pass, from the manifest: quiet, yet still listed; the command line overrides the manifest.
    quiet_suite = with_on_inconclusive(gate_suite, "pass")
    quiet = run_biascheck(quiet_suite, SLIGHTLY_WORSE, "--biascheck-baseline", str(base), report="pass")
    assert quiet.ret == 0 and "WARNING" not in quiet.output and "could not be resolved" not in quiet.output, quiet.output
    assert "inconclusive, passing (on_inconclusive = pass)" in quiet.output
    assert "_inconclusive_" in (quiet.report_dir / "comparison.md").read_text("utf-8")
    overridden = run_biascheck(quiet_suite, SLIGHTLY_WORSE, "--biascheck-baseline", str(base), "--biascheck-on-inconclusive", "fail", report="over")
    assert overridden.ret == 1, overridden.output

    # The ini key, under the command line.
    ini = str(pytester.makeini("[pytest]\nbiascheck_on_inconclusive = fail\n"))
    assert run_biascheck(gate_suite, SLIGHTLY_WORSE, "-c", ini, "--biascheck-baseline", str(base), report="ini").ret == 1
    assert (
        run_biascheck(gate_suite, SLIGHTLY_WORSE, "-c", ini, "--biascheck-baseline", str(base), "--biascheck-on-inconclusive=warn", report="ini2").ret
        == 0
    )

    # `biascheck diff` decides the same way.
    def diff(*args: str) -> subprocess.CompletedProcess:
        return biascheck_command(
            "diff", str(base), str(warn.report_dir), *args, env={**os.environ, "GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": ""}
        )

    default = diff()
    assert default.returncode == 0 and default.stdout.count("::warning ") == len(unresolved), default.stdout + default.stderr
    assert diff("--on-inconclusive", "fail").returncode == 1
    assert diff("--fail-inconclusive").returncode == 1
    assert diff("--on-inconclusive", "pass").stdout.count("::warning ") == 0


def test_on_inconclusive_conflicts_and_bad_values_are_one_line_usage_errors(run_biascheck, gate_suite, pytester, tmp_path):
    base = str(tmp_path / "absent.json")  # for diff: refused before the baseline is read
    for args, expected in (
        (
            ["--biascheck-fail-inconclusive", "--biascheck-on-inconclusive=pass"],
            "--biascheck-on-inconclusive: 'pass' contradicts --biascheck-fail-inconclusive (an alias of fail)",
        ),
        (["--biascheck-on-inconclusive=maybe"], "--biascheck-on-inconclusive: 'maybe' is not allowed; use one of: pass, warn, fail"),
    ):
        run = run_biascheck(gate_suite, "sim/fair", "--collect-only", *args)
        assert run.ret == 4 and expected in run.output and "Traceback" not in run.output, run.output
    ini = pytester.makeini("[pytest]\nbiascheck_fail_inconclusive = true\nbiascheck_on_inconclusive = pass\n")
    run = run_biascheck(gate_suite, "sim/fair", "-c", str(ini), "--collect-only")
    assert run.ret == 4 and f"{ini}: biascheck_on_inconclusive: 'pass' contradicts biascheck_fail_inconclusive = true" in run.output, run.output
    # The command line decides over an ini file that disagrees with it.
    run = run_biascheck(gate_suite, "sim/fair", "-c", str(ini), "--collect-only", "--biascheck-on-inconclusive=warn")
    assert run.ret == 0, run.output
    bad = with_on_inconclusive(gate_suite, "sometimes")
    run = run_biascheck(bad, "sim/fair", "--collect-only")
    assert run.ret in (1, 2, 4) and "regression.on_inconclusive: 'sometimes' is not allowed; use one of: 'pass', 'warn', 'fail'" in run.output, (
        run.output
    )
    # diff's pair
    done = biascheck_command("diff", base, str(tmp_path), "--fail-inconclusive", "--on-inconclusive", "warn")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "--on-inconclusive: 'warn' contradicts --fail-inconclusive" in done.stderr, (
        done.stderr
    )


def test_comparison_files_from_before_on_inconclusive_are_read_by_their_fail_inconclusive():
    from biascheck.evaluation.regression import cases_to_resolve
    from biascheck.records.comparison import on_inconclusive

    assert on_inconclusive({"fail_inconclusive": True}) == "fail"
    assert on_inconclusive({"fail_inconclusive": False}) == "pass"  # they passed quietly
    assert on_inconclusive({"on_inconclusive": "warn", "fail_inconclusive": True}) == "warn"
    # 1/sqrt(n): a detectable worsening of 3 margins beyond the margin needs 9 times the cases.
    assert cases_to_resolve(0.03, 0.01, 100) == 900
    assert cases_to_resolve(0.005, 0.01, 100) == 100  # resolvable at this size already
    assert cases_to_resolve(0.03, 0.0, 100) is None  # margin 0: no size resolves it
