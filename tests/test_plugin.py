"""The pytest plugin end to end: real pytest runs (pytester subprocesses) against the simulated
model over litellm's real HTTP path, on a small KoBBQ subset unless a test says otherwise."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import pytest

from conftest import SUITES, write_subset_suite


def outcome_counts(results: dict) -> dict[str, int]:
    counts: dict[str, int] = {}
    for case in results["cases"]:
        counts[case["outcome"]] = counts.get(case["outcome"], 0) + 1
    return counts


def test_collect_only_calls_nothing_and_never_imports_litellm(small_kobbq, data_dir, tmp_path):
    script = (
        "import sys, pytest\n"
        f"code = pytest.main(['--biascheck', {str(small_kobbq)!r}, '--biascheck-model', 'sim/fair', '--collect-only', '-q',"
        f" '--biascheck-data', {str(data_dir)!r}, '--biascheck-cache', {str(tmp_path / 's.sqlite')!r}, '-p', 'no:cacheprovider'])\n"
        "print('LITELLM_IMPORTED', 'litellm' in sys.modules)\n"
        "sys.exit(code)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "LITELLM_IMPORTED False" in proc.stdout
    assert "::cases::age::" in proc.stdout and "::metrics::overall::diff_bias_amb" in proc.stdout
    assert not (tmp_path / "s.sqlite").exists() or sqlite3.connect(tmp_path / "s.sqlite").execute("select count(*) from responses").fetchone()[0] == 0


def test_fair_passes_and_stereotyped_fails_with_readable_failures(run_biascheck, tiny_kobbq, tmp_path):
    # Without xdist loaded (-p no:xdist): the plugin's hook of xdist's must not make pytest refuse it.
    fair = run_biascheck(tiny_kobbq, "sim/fair", "-p", "no:xdist")
    assert fair.ret == 0, fair.output
    results = fair.results()
    assert results["passed"] and results["run"]["complete"]
    assert all(v["passed"] for v in results["verdicts"])
    assert outcome_counts(results).keys() <= {"unknown", "biased", "counter"}
    assert "biased" not in fair.result.parseoutcomes(), "a fair model's correct answers must not be reported as biased"

    junit = tmp_path / "junit.xml"
    biased = run_biascheck(tiny_kobbq, "sim/stereotyped?p=1", f"--junitxml={junit}", report="report-stereo")
    assert biased.ret == 1, biased.output
    outcomes = biased.result.parseoutcomes()
    assert outcomes["failed"] >= 1 and outcomes["biased"] > 0
    failed = {(v["scope"], v["metric"]) for v in biased.results()["verdicts"] if not v["passed"]}
    assert ("overall", "diff_bias_amb") in failed
    # The failure message is the whole story: metric, value, threshold, interval, n.
    assert "diff_bias_amb (overall) = 1.0000 FAILS threshold |x| <= 0.05; 95% CI [1.0000, 1.0000]; n = " in biased.failures
    assert "Traceback" not in biased.output
    tree = ET.parse(junit)
    failures = [tc.get("name") for tc in tree.iter("testcase") if tc.find("failure") is not None]
    assert "diff_bias_amb" in failures


RECORDER = """
import json

import pytest

PHASES = {}


def pytest_runtest_logreport(report):
    if "::cases::" in report.nodeid:
        PHASES.setdefault(report.nodeid, []).append(report.when + " " + report.outcome)


def pytest_collection_modifyitems(items):
    # A marker a conftest puts on a case: pytest's own setup reads it.
    first = next(item for item in items if "::cases::age::" in item.nodeid)
    first.add_marker(pytest.mark.skip(reason="skipped by a conftest"))


def pytest_terminal_summary(terminalreporter):
    terminalreporter.write_line("PHASES " + json.dumps(sorted(PHASES.values())))
"""


def test_case_items_report_call_and_teardown_and_honour_markers_and_maxfail(run_biascheck, tiny_kobbq, tmp_path, pytester):
    # Case items take a lighter protocol than pytest's (no output capture around phases that do
    # nothing, no report of a setup or teardown that passed: pytest's terminal scans every such
    # report once per failure); the call is reported, and the teardown under --junitxml, which
    # still gets each case's status; a marker put on a case still applies; -x still stops at the
    # first failure.
    pytester.makepyfile(recorder=RECORDER)
    pytester.syspathinsert()
    junit = tmp_path / "junit.xml"
    run = run_biascheck(tiny_kobbq, "sim/stereotyped?p=1", "-p", "recorder", f"--junitxml={junit}", "-k", "age")
    phases = json.loads(next(line for line in run.output.splitlines() if line.startswith("PHASES "))[len("PHASES ") :])
    assert phases.count(["setup skipped", "teardown passed"]) == 1 and run.result.parseoutcomes()["skipped"] == 1
    assert len(phases) == 8 and phases.count(["call passed", "teardown passed"]) == 7, phases
    bare = run_biascheck(tiny_kobbq, "sim/stereotyped?p=1", "-p", "recorder", "-k", "age")  # without --junitxml
    phases = json.loads(next(line for line in bare.output.splitlines() if line.startswith("PHASES "))[len("PHASES ") :])
    assert len(phases) == 8 and phases.count(["call passed"]) == 7 and phases.count(["setup skipped", "teardown passed"]) == 1, phases
    stopped = run_biascheck(tiny_kobbq, "sim/stereotyped?p=1", "-x", "-k", "age")
    assert stopped.result.parseoutcomes()["failed"] == 1 and "stopping after 1 failures" in stopped.output
    tree = ET.parse(junit)
    statuses = [p.get("value") for tc in tree.iter("testcase") if "cases" in tc.get("classname", "") for p in tc.iter("property")]
    assert len(statuses) == 7 and set(statuses) <= {"biased", "answered"} and "biased" in statuses


def test_the_model_calls_run_with_the_garbage_collector_on_and_nothing_stays_frozen(run_biascheck, tiny_kobbq, monkeypatch):
    # Collection pauses the cyclic collector and freezes what it made; the calls, made inside
    # pytest's collection hook, must run with it on (their clients make cyclic garbage: a cold
    # KoBBQ grew to twice its memory without it), and the session's end unfreezes everything.
    import gc

    import biascheck.session as session

    assert gc.isenabled() and gc.get_freeze_count() == 0  # this test process's own state, before the run
    real, seen = session.run, []

    def spy(*args, **kwargs):
        seen.append((gc.isenabled(), gc.get_freeze_count() > 0))
        return real(*args, **kwargs)

    monkeypatch.setattr(session, "run", spy)
    ran = run_biascheck(tiny_kobbq, "sim/fair", "-k", "age")
    assert ran.ret == 0, ran.output
    assert seen == [(True, True)] and gc.isenabled() and gc.get_freeze_count() == 0


def test_reports_and_results_json_match_schema_and_keep_korean_byte_exact(run_biascheck, small_kobbq, data_dir):
    from biascheck.reporting.results import validate_results
    from biascheck.suite import load_suite

    run = run_biascheck(small_kobbq, "sim/random?seed=5&style=text")
    for text in ("biascheck summary", "acc_amb", "diff_bias_dis", "95% CI", "by category", "across prompts", "mean ± std"):
        assert text in run.output
    markdown = (run.report_dir / "report.md").read_text("utf-8")
    assert "| diff_bias_amb |" in markdown and "## By category" in markdown and "## Across prompts" in markdown
    results = run.results()
    validate_results(results)
    suite = load_suite(small_kobbq, data_dir=data_dir)
    by_id = {case.case_id: case for case in suite.cases}
    assert results["run"]["cases"] == len(suite.cases) == len(results["cases"])
    for case in results["cases"][:200]:
        source = by_id[case["case_id"]]
        assert case["choices"] == list(source.choices)
        if case["answer"] is not None:
            assert case["raw"] == case["answer"]  # style=text replies with the option text itself
            assert case["answer"] in source.choices
    raw = (run.report_dir / "results.json").read_bytes()
    assert "알 수 없음".encode() in raw or "정답 없음".encode() in raw  # stored as UTF-8, not \\u escapes
    assert results["suite"]["fingerprint"]["suite"] == suite.fingerprint()["suite"]


def test_fault_injection_every_case_is_answered_or_errored_and_totals_add_up(run_biascheck, tiny_kobbq, http_client):
    model = "sim/fair?fail_rate=0.2&faults=429,500,503,timeout,garbage&delay=5&retry_after_ms=10"
    run = run_biascheck(
        tiny_kobbq,
        model,
        "--biascheck-timeout",
        "1",
        "--biascheck-retries",
        "2",
        "--biascheck-concurrency",
        "64",
        "--biascheck-http-client",
        http_client,
    )
    results = run.results()
    stats = results["run"]
    counts = outcome_counts(results)
    assert sum(counts.values()) == stats["cases"] == stats["requests"]
    assert counts.get("error", 0) == stats["errors"] == results["metrics"]["counts"].get("n_error", stats["errors"])
    # Every uncached request makes one first attempt plus its retries.
    assert stats["calls"] == stats["requests"] - stats["cache_hits"] - stats["not_run"] + stats["retries"]
    assert stats["retries"] > 0.1 * stats["requests"]  # ~20% of attempts fail, so retries happened
    # Retried successes are scored; only exhausted retries error, and those are counted, not scored.
    errored = [c for c in results["cases"] if c["outcome"] == "error"]
    assert all(c["answer"] is None and c["error"] for c in errored)
    overall = results["metrics"]["overall"]
    assert overall["error_ratio"]["value"] == pytest.approx(stats["errors"] / stats["cases"])
    assert overall["acc_amb"]["value"] == 1.0 and overall["diff_bias_amb"]["value"] == 0.0
    if errored:
        assert run.result.parseoutcomes()["failed"] >= len(errored)
        assert "model call failed:" in run.output


def test_content_filter_is_an_outcome_not_an_error(run_biascheck, tmp_path, data_dir):
    suite = write_subset_suite(
        tmp_path / "tiny", subset='templates_per_category = 1\nchoice_orders = "original"', prompts='from_data = "prompts"\nuse = ["1"]'
    )
    run = run_biascheck(suite, "sim/fair?fail_rate=1&faults=filter")
    results = run.results()
    assert outcome_counts(results) == {"filtered": results["run"]["cases"]}
    assert results["run"]["errors"] == 0 and results["run"]["retries"] == 0
    assert results["metrics"]["overall"]["ooc_ratio"]["value"] == 1.0
    assert results["metrics"]["overall"]["acc_amb"]["value"] is None  # NaN: nothing answered, never 0
    assert results["run"]["filtered"] == results["run"]["cases"]
    cached = run_biascheck(suite, "sim/fair?fail_rate=1&faults=filter", "-vv", report="r2")
    assert "CONTENT-FILTERED" in cached.output
    # Counted from the outcomes: a run answered from the store reports them too (it used to say 0).
    assert cached.results()["run"]["calls"] == 0 and cached.results()["run"]["filtered"] == results["run"]["cases"]


def test_budget_stops_calls_and_the_run_fails_as_incomplete(run_biascheck, tiny_kobbq):
    run = run_biascheck(tiny_kobbq, "sim/fair", "--biascheck-price", "100/100", "--biascheck-max-cost", "0.5", "--biascheck-concurrency", "16")
    assert run.ret == 1
    results = run.results()
    stats = results["run"]
    assert not stats["complete"] and "budget" in stats["incomplete_reason"]
    assert stats["not_run"] > 0 and stats["calls"] < stats["requests"]
    # Calls in flight are reserved at the mean cost per call, so overspend is about one call at most.
    per_call = stats["cost_usd"] / stats["calls"]
    assert 0.5 - 3 * per_call <= stats["cost_usd"] <= 0.5 + 2 * per_call
    assert not results["passed"]
    assert "the run is incomplete: budget of $0.5 reached" in run.output


def test_usage_errors_are_one_line_without_traceback(pytester, small_kobbq):
    cases = [
        (["--biascheck-model", "sim/biased"], "sim/biased"),
        (["--biascheck-model", "sim/stereotyped?p=2"], "p"),
        (["--biascheck-model", "sim/fair", "--biascheck-param", "temprature=0"], "temprature"),
        (["--biascheck-model", "sim/fair", "--biascheck-concurrency", "zero"], "--biascheck-concurrency"),
        (["--biascheck-model", "sim/fair", "--biascheck-price", "cheap"], "--biascheck-price"),
        ([], "--biascheck-model"),
        (["--biascheck-model", "sim/fair", "--biascheck-estimator", "guess"], "--biascheck-answer-mode: 'guess' is not an answer mode"),
        (["--biascheck-model", "sim/fair", "--biascheck-answer-mode", "guess"], "--biascheck-answer-mode: 'guess' is not an answer mode"),
        (["--biascheck-model", "sim/fair", "--biascheck-compare-fail", "diff_bias_amb"], "--biascheck-compare-fail"),
    ]
    for args, needle in cases:
        result = pytester.runpytest_inprocess("--biascheck", str(small_kobbq), *args)
        text = result.stdout.str() + result.stderr.str()
        assert result.ret == pytest.ExitCode.USAGE_ERROR, text
        lines = [line for line in text.splitlines() if line.startswith("ERROR:")]
        assert len(lines) == 1 and needle in lines[0], text
        assert "Traceback" not in text


def test_number_ini_keys_are_typed_in_help_and_checked_with_the_file_and_key(pytester, small_kobbq):
    help_text = pytester.runpytest_inprocess("--help").stdout.str()
    for key, kind in (
        ("biascheck_concurrency", "int"),
        ("biascheck_retries", "int"),
        ("biascheck_max_cost", "float"),
        ("biascheck_timeout", "float"),
        ("biascheck_model", "string"),
    ):
        assert re.search(rf"{key} \({kind}\):", help_text), key
    ini = pytester.makeini("[pytest]\nbiascheck_concurrency = many\n")
    result = pytester.runpytest_inprocess("-c", str(ini), "--biascheck", str(small_kobbq), "--biascheck-model", "sim/fair")
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR and "Traceback" not in text, text
    assert (
        f"ERROR: {ini}: biascheck_concurrency: is not a whole number; give a whole number from 1 to 512, e.g. biascheck_concurrency = 32" in text
    ), text


def test_store_that_is_not_sqlite_is_a_clear_error(run_biascheck, tiny_kobbq, tmp_path):
    bad = tmp_path / "not-a-store.sqlite"
    bad.write_text("this is not a database " * 100)
    run = run_biascheck(tiny_kobbq, "sim/fair", store_path=bad)
    assert run.ret == pytest.ExitCode.USAGE_ERROR
    assert f"ERROR: {bad}: not a usable response store" in run.output
    assert "Traceback" not in run.output


def test_warm_store_rerun_makes_no_calls_and_selection_limits_calls(run_biascheck, tiny_kobbq):
    cold = run_biascheck(tiny_kobbq, "sim/stereotyped?p=0.3", "-k", "age")
    age_cases = cold.results()["run"]["cases"]
    assert cold.results()["run"]["calls"] == age_cases > 0
    assert {c["category"] for c in cold.results()["cases"]} == {"age"}
    full = run_biascheck(tiny_kobbq, "sim/stereotyped?p=0.3", report="r2")
    assert full.results()["run"]["cache_hits"] == age_cases
    assert full.results()["run"]["calls"] == full.results()["run"]["cases"] - age_cases
    warm = run_biascheck(tiny_kobbq, "sim/stereotyped?p=0.3", report="r3")
    assert warm.results()["run"]["calls"] == 0
    assert warm.results()["run"]["cache_hits"] == warm.results()["run"]["cases"]
    assert warm.results()["cases"] == full.results()["cases"]
    # A sampling parameter is part of the key: changing it is a different request.
    other = run_biascheck(tiny_kobbq, "sim/stereotyped?p=0.3", "--biascheck-param", "max_tokens=31", "-k", "religion", report="r4")
    assert other.results()["run"]["calls"] == other.results()["run"]["cases"]
    assert other.results()["model"]["params"]["max_tokens"] == 31


def test_each_suites_stats_are_its_own_in_a_run_of_two(run_biascheck, tiny_kobbq, tiny_kobbq_p3):
    # Issue 35: each suite's stats line showed the whole run's calls and cache hits. Suite A answered
    # alone first: in the run of both, A is all cache hits and B all calls, in every view.
    other = tiny_kobbq_p3
    alone = run_biascheck(tiny_kobbq, "sim/stereotyped?p=0.3", report="alone")
    a_cases = alone.results()["run"]["cases"]
    assert alone.results()["run"]["calls"] == a_cases > 0
    both = run_biascheck(tiny_kobbq, "sim/stereotyped?p=0.3", str(other), report="both")
    a, b = (json.loads((both.report_dir / name / "results.json").read_text("utf-8")) for name in ("kobbq", "kobbq-p3"))
    assert a["run"]["cases"] == a_cases and b["run"]["cases"] > 0
    assert (a["run"]["requests"], a["run"]["cache_hits"], a["run"]["calls"]) == (a_cases, a_cases, 0)
    assert (b["run"]["requests"], b["run"]["cache_hits"], b["run"]["calls"]) == (b["run"]["cases"], 0, b["run"]["cases"])
    assert a["run"]["errors"] == b["run"]["errors"] == 0 and a["run"]["retries"] == b["run"]["retries"] == 0
    assert a["run"]["cost_usd"] == 0 and a["run"]["not_run"] == b["run"]["not_run"] == 0
    for name, document in (("kobbq", a), ("kobbq-p3", b)):
        line = f"{document['run']['calls']} calls, {document['run']['cache_hits']} cache hits"
        assert line in both.output, both.output  # the terminal's line of this suite
        assert line in (both.report_dir / name / "report.md").read_text("utf-8")
    assert f"{a_cases} calls, 0 cache hits" not in both.output.split("kobbq (kobbq) on")[1].split("\n")[0]
    # The progress line is the run's: both suites' requests, its calls and cache hits in total.
    total = a_cases + b["run"]["cases"]
    assert f"{total} requests, {a_cases} cache hits, {b['run']['cases']} calls" in both.output, both.output


def test_a_request_two_suites_share_is_asked_once_and_counts_for_the_first(run_biascheck, tiny_kobbq, tmp_path):
    copy = tmp_path / "kobbq-copy"
    copy.mkdir()
    (copy / "suite.toml").write_text((tiny_kobbq / "suite.toml").read_text("utf-8").replace('name = "kobbq"', 'name = "kobbq-copy"', 1), "utf-8")
    both = run_biascheck(tiny_kobbq, "sim/stereotyped?p=0.3", str(copy))
    first, second = (json.loads((both.report_dir / name / "results.json").read_text("utf-8"))["run"] for name in ("kobbq", "kobbq-copy"))
    assert first["cases"] == second["cases"] > 0
    assert (first["requests"], first["calls"], first["cache_hits"]) == (first["cases"], first["cases"], 0)
    assert (second["requests"], second["calls"], second["cache_hits"]) == (0, 0, 0)
    assert f"{first['cases']} requests, 0 cache hits, {first['cases']} calls" in both.output, both.output


def test_xdist_calls_once_and_matches_a_single_process_run(run_biascheck, pytester, tiny_kobbq, tmp_path):
    # Suites alone gain nothing from workers: one process, said in the summary.
    single = run_biascheck(tiny_kobbq, "sim/stereotyped?p=0.4&seed=9", "-n", "2", store_path=tmp_path / "a.sqlite", report="single")
    assert "bringing up nodes" not in single.output, single.output
    assert "biascheck: bias suites only, so one process instead of 2 xdist workers" in single.output
    # Beside an ordinary test, the suite is distributed over the workers: the same calls, once.
    other = pytester.makepyfile(test_other="def test_other():\n    pass\n")
    double = run_biascheck(tiny_kobbq, "sim/stereotyped?p=0.4&seed=9", str(other), "-n", "2", store_path=tmp_path / "b.sqlite", report="double")
    assert single.ret == double.ret
    assert "bringing up nodes" in double.output and "one process instead of" not in double.output, double.output
    one, two = single.results(), double.results()
    assert two["run"]["calls"] == one["run"]["calls"] == one["run"]["cases"]
    assert two["cases"] == one["cases"]
    assert two["metrics"] == one["metrics"]
    assert sqlite3.connect(tmp_path / "b.sqlite").execute("select count(*) from responses").fetchone()[0] == one["run"]["cases"]


def test_api_keys_never_reach_store_reports_or_logs(pytester, tiny_kobbq, data_dir, tmp_path, monkeypatch):
    """A non-sim model string through --biascheck-api-base: litellm sends the key; we never keep it."""
    from biascheck.sim import SimKnowledge, SimServer
    from biascheck.suite import load_suite

    secret = "sk-test-" + "9" * 40
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    knowledge = SimKnowledge.from_cases(load_suite(tiny_kobbq, data_dir=data_dir).cases)
    with SimServer(knowledge, default_persona="stereotyped?p=0.5") as server:
        result = pytester.runpytest_subprocess(
            "--biascheck",
            str(tiny_kobbq),
            "--biascheck-model",
            "openai/candidate-model",
            "--biascheck-api-base",
            server.base_url,
            "--biascheck-data",
            str(data_dir),
            "--biascheck-cache",
            str(tmp_path / "store.sqlite"),
            "--biascheck-report",
            str(tmp_path / "report"),
            f"--junitxml={tmp_path / 'junit.xml'}",
            "-k",
            "age",
            "-p",
            "no:cacheprovider",
            "--biascheck-price",
            "0.15/0.6",
        )
        assert server.stats()["total_requests"] > 0
    results = json.loads((tmp_path / "report" / "results.json").read_text("utf-8"))
    assert results["model"]["model"] == "openai/candidate-model" and results["run"]["calls"] > 0
    assert results["run"]["cost_usd"] > 0  # priced by litellm from the registered price and reported usage
    output = result.stdout.str() + result.stderr.str()
    for path in [tmp_path / "store.sqlite", tmp_path / "report" / "results.json", tmp_path / "report" / "report.md", tmp_path / "junit.xml"]:
        assert secret.encode() not in path.read_bytes(), path
    assert secret not in output


def test_sigkill_resumes_from_the_store(run_biascheck, data_dir, tmp_path):
    # One template per category, two prompts, three orders: enough calls to kill the run mid-flight.
    suite = write_subset_suite(
        tmp_path / "kobbq-kill",
        subset='templates_per_category = 1\nseed = 7\nchoice_orders = "cyclic"',
        prompts='from_data = "prompts"\nuse = ["1", "3"]',
    )
    store = tmp_path / "store.sqlite"
    command = [
        sys.executable,
        "-m",
        "pytest",
        "--biascheck",
        str(suite),
        "--biascheck-model",
        "sim/random?seed=4",
        "--biascheck-data",
        str(data_dir),
        "--biascheck-cache",
        str(store),
        "--biascheck-concurrency",
        "4",
        "-p",
        "no:cacheprovider",
        "-q",
    ]
    process = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    stored = 0
    while time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.2)
        if store.exists():
            try:
                stored = sqlite3.connect(store, timeout=1).execute("select count(*) from responses").fetchone()[0]
            except sqlite3.OperationalError:
                continue
            if stored >= 100:
                break
    assert process.poll() is None, "the run ended before it could be killed"
    os.killpg(process.pid, signal.SIGKILL)  # the run and its simulated server, mid-flight
    process.wait()
    kept = sqlite3.connect(store).execute("select count(*) from responses").fetchone()[0]
    assert kept >= 100

    # sim/random fails the thresholds (exit 1); what matters here is what the re-run had to call.
    # The re-run in this process: only the killed run needs a process of its own.
    rerun = run_biascheck(suite, "sim/random?seed=4", "--biascheck-concurrency", "4", store_path=store)
    assert rerun.ret == 1, rerun.output[-2000:]
    results = rerun.results()
    # Everything answered before the kill is reused; only the rest is called.
    assert results["run"]["cache_hits"] == kept
    assert results["run"]["calls"] == results["run"]["cases"] - kept


@pytest.mark.slow  # collects the whole packaged KoBBQ (34,253 items): an acceptance run
def test_stereotyped_fails_diff_bias_amb_on_the_real_suite(run_biascheck):
    run = run_biascheck(SUITES / "kobbq", "sim/stereotyped?p=1", "-k", "sexual_orientation")
    assert run.ret == 1
    failed = {(v["scope"], v["metric"]) for v in run.results()["verdicts"] if not v["passed"]}
    assert {("overall", "diff_bias_amb"), ("sexual_orientation", "diff_bias_amb")} <= failed


def test_a_budget_needs_a_price(run_biascheck, tiny_kobbq, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-unused-0000000000")
    run = run_biascheck(
        tiny_kobbq, "openai/model-litellm-does-not-know", "--biascheck-max-cost", "1", "--biascheck-api-base", "http://127.0.0.1:9/v1", "-k", "age"
    )
    assert run.ret == pytest.ExitCode.USAGE_ERROR
    assert "litellm has no price for openai/model-litellm-does-not-know" in run.output
    assert "Traceback" not in run.output


def test_summary_respects_color(run_biascheck, tiny_kobbq):
    plain = run_biascheck(tiny_kobbq, "sim/fair", "--color=no", "-k", "ses")
    colored = run_biascheck(tiny_kobbq, "sim/fair", "--color=yes", "-k", "ses", report="r2")
    assert "\x1b[" not in plain.output
    summary = colored.output.split("biascheck summary", 1)[1]
    assert "\x1b[" in summary and "diff_bias_amb" in summary


# A BBQ suite of one category the data mirror has and one it lacks (offline: tests never download).
BBQ_WITH_A_GAP = 'categories = ["Gender_identity", "Sexual_orientation"]\ntemplates_per_category = 1\nseed = 7\nchoice_orders = "original"'


def test_a_bbq_category_without_data_fails_the_run_unless_the_gap_is_accepted(run_biascheck, tmp_path, monkeypatch):
    # Issue 24, part 1: a run of part of BBQ used to pass as BBQ, its missing categories skipped.
    suite = write_subset_suite(tmp_path / "bbq-gap", "bbq", subset=BBQ_WITH_A_GAP)
    monkeypatch.setenv("GITHUB_ACTIONS", "true")  # the gate's annotations
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    run = run_biascheck(suite, "sim/fair", "-rfs")
    assert run.ret == pytest.ExitCode.TESTS_FAILED, run.output[-3000:]
    assert "Traceback" not in run.output
    outcomes = run.result.parseoutcomes()
    assert outcomes["failed"] == 2 and "skipped" not in outcomes  # the category's item and run-complete; every metric passed
    missing = "bbq/Gender_identity.jsonl was not found: not in the mirror"
    fix = "or pass --biascheck-allow-missing-data to run without it"
    run.result.stdout.re_match_lines(
        [r"FAILED .*/bbq-gap/suite.toml::cases::Gender_identity::missing-data", r"FAILED .*/bbq-gap/suite.toml::run-complete"]
    )
    output = " ".join(run.output.split())
    assert re.search(
        rf"no data for category Gender_identity: {missing} \S+ \(no bbq/Gender_identity.jsonl\); not in the cache \(\S+\); downloads are disabled \(offline\); point --biascheck-data",
        output,
    )
    assert (
        "the run is incomplete: 1 of 2 categories has no data (Gender_identity) (see the categories' missing-data items); point --biascheck-data"
        in output
    )
    assert output.count(fix) >= 2
    assert "MISSING DATA: 1 of 2 categories has no data (Gender_identity), so this is no complete bbq run: a failed check" in output
    assert "::error title=biascheck bbq%3A Gender_identity has no data::no data for category Gender_identity" in run.output
    results = run.results()
    assert results["passed"] is False and results["suite"]["missing_data_allowed"] is False
    assert list(results["suite"]["skipped_categories"]) == ["Gender_identity"] and results["suite"]["categories_total"] == 2
    assert results["suite"]["fingerprint"]["missing"] == "Gender_identity"
    assert {c["category"] for c in results["cases"]} == {"Sexual_orientation"}
    assert "**MISSING DATA: 1 of 2 categories has no data" in (run.report_dir / "report.md").read_text("utf-8")

    for accept in (["--biascheck-allow-missing-data"], ["-o", "biascheck_allow_missing_data=true"]):  # the option, and its ini key
        accepted = run_biascheck(suite, "sim/fair", "-rs", *accept, report=f"accepted{len(accept)}")
        assert accepted.ret == 0, accepted.output[-3000:]
        assert accepted.result.parseoutcomes()["skipped"] == 1
        assert f"no data for Gender_identity, as --biascheck-allow-missing-data accepts: {missing}" in " ".join(accepted.output.split())
        results = accepted.results()
        assert results["passed"] is True and results["suite"]["missing_data_allowed"] is True
        assert list(results["suite"]["skipped_categories"]) == ["Gender_identity"]
        summary = " ".join(accepted.output.split())  # the summary is wrapped at the terminal's width
        assert "1 of 2 categories has no data (Gender_identity): left out of this run, as --biascheck-allow-missing-data accepted" in summary


def test_credentials_in_an_api_base_are_not_reported():
    from biascheck.execution.llm import ModelConfig

    config = ModelConfig("openai/m", api_base="https://alice:s3cr3t-token@llm.example.com:8443/v1?key=abc123")
    reported = config.to_dict()["api_base"]
    assert "s3cr3t" not in reported and "abc123" not in reported and "alice" not in reported
    assert reported == "https://[redacted]@llm.example.com:8443/v1?[redacted]"
    assert ModelConfig("openai/m", api_base="http://127.0.0.1:8000/v1").to_dict()["api_base"] == "http://127.0.0.1:8000/v1"


def test_error_text_is_redacted_before_it_is_kept(monkeypatch):
    from biascheck.execution.redaction import redact

    monkeypatch.setenv("MY_PROVIDER_API_KEY", "prov-key-0123456789")
    text = redact("401 for key prov-key-0123456789 at https://bob:hunter2@api.example.com/v1; Bearer abcdefghijkl; sk-abcdef123456")
    for secret in ("prov-key-0123456789", "hunter2", "abcdefghijkl", "sk-abcdef123456"):
        assert secret not in text


def test_report_folder_problems_are_one_line_and_fail_the_run(run_biascheck, tiny_kobbq, tmp_path):
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    run = run_biascheck(tiny_kobbq, "sim/fair", "-k", "ses", "--biascheck-report", str(a_file))
    assert run.ret == pytest.ExitCode.USAGE_ERROR
    assert f"--biascheck-report: {a_file} is a file" in run.output
    blocked = a_file / "below-a-file"  # cannot be created: its parent is a file
    run = run_biascheck(tiny_kobbq, "sim/fair", "-k", "ses", "--biascheck-report", str(blocked))
    assert run.ret == pytest.ExitCode.TESTS_FAILED
    assert f"biascheck: {blocked}: could not write the report" in run.output
    assert "Traceback" not in run.output


def test_an_empty_selection_calls_nothing(run_biascheck, tiny_kobbq):
    run = run_biascheck(tiny_kobbq, "sim/fair", "-k", "no-such-case")
    assert run.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    assert "biascheck summary" not in run.output and "Traceback" not in run.output


# --- regressions found in review ----------------------------------------------------------------


def test_the_endpoint_from_an_environment_variable_is_part_of_the_store_key(monkeypatch):
    from biascheck.execution.llm import ModelConfig

    monkeypatch.setenv("OPENAI_API_BASE", "http://127.0.0.1:18801/v1")
    first = ModelConfig("openai/m")
    monkeypatch.setenv("OPENAI_API_BASE", "http://127.0.0.1:18802/v1")
    second = ModelConfig("openai/m")
    assert first.endpoint != second.endpoint
    assert second.to_dict()["api_base"] == "http://127.0.0.1:18802/v1"
    monkeypatch.setenv("HOSTED_VLLM_API_BASE", "http://gpu:8000/v1")
    assert ModelConfig("hosted_vllm/llama").endpoint == "http://gpu:8000/v1"
    assert ModelConfig("sim/fair").endpoint == "biascheck-sim"


def test_errors_fail_the_gate_even_when_only_metrics_are_selected(run_biascheck, tiny_kobbq, http_client):
    run = run_biascheck(
        tiny_kobbq,
        "sim/fair?fail_rate=0.9&faults=500",
        "--biascheck-retries",
        "0",
        "--biascheck-http-client",
        http_client,
        "-k",
        "metrics or run-complete",
    )
    assert run.ret == 1
    assert "case(s) errored after retries" in run.output
    assert run.results()["passed"] is False and run.results()["run"]["case_errors"] > 0


def test_a_metric_is_measured_on_its_whole_scope_and_lf_finds_failed_cases(pytester, tiny_kobbq, data_dir, tmp_path):
    args = ["--biascheck", str(tiny_kobbq), "--biascheck-data", str(data_dir), "--biascheck-cache", str(tmp_path / "s.sqlite")]
    full = pytester.runpytest_inprocess(*args, "--biascheck-model", "sim/stereotyped?p=0.3", "--biascheck-report", str(tmp_path / "full"))
    assert full.ret == 1
    # One metric plus two cases: the metric still sees every case of its scope.
    some = pytester.runpytest_inprocess(
        *args,
        "--biascheck-model",
        "sim/stereotyped?p=0.3",
        "--biascheck-report",
        str(tmp_path / "some"),
        "-k",
        "(metrics and overall and diff_bias_amb) or age-",
    )
    whole = json.loads((tmp_path / "full" / "results.json").read_text())["verdicts"]
    part = json.loads((tmp_path / "some" / "results.json").read_text())["verdicts"]
    pick = lambda vs: next(v for v in vs if v["scope"] == "overall" and v["metric"] == "diff_bias_amb")  # noqa: E731
    assert pick(part) == pick(whole) and not pick(part)["passed"]
    assert some.ret == 1
    # --lf reruns the errored case items (their ids carry [p1-o0]-style brackets).
    faulty = [*args, "--biascheck-model", "sim/fair?fail_rate=0.5&faults=500", "--biascheck-retries", "0", "-p", "cacheprovider"]
    first = pytester.runpytest_inprocess(*faulty)
    failed = first.parseoutcomes()["failed"]
    again = pytester.runpytest_inprocess(*faulty, "--lf", "--co", "-q")
    assert f"{failed}/" in again.stdout.str()


def test_manifest_sampling_values_are_typed_like_command_line_values(small_kobbq, data_dir):
    from biascheck.config.manifest import parse_sampling_overrides
    from biascheck.execution.llm import ModelConfig
    from biascheck.session import effective_params
    from biascheck.suite import load_suite

    suite = load_suite(small_kobbq, data_dir=data_dir)
    assert suite.manifest.sampling["temperature"] == 0.0 and isinstance(suite.manifest.sampling["temperature"], float)
    overridden = effective_params(suite, ModelConfig("sim/fair", params=parse_sampling_overrides(["temperature=0"])))
    assert json.dumps(overridden, sort_keys=True) == json.dumps(effective_params(suite, ModelConfig("sim/fair")), sort_keys=True)


def test_non_finite_option_values_are_refused(pytester, small_kobbq):
    for option in ("--biascheck-max-cost", "--biascheck-timeout"):
        result = pytester.runpytest_inprocess("--biascheck", str(small_kobbq), "--biascheck-model", "sim/fair", option, "nan")
        assert result.ret == pytest.ExitCode.USAGE_ERROR and option in result.stderr.str()


def test_two_suites_with_one_name_are_refused(run_biascheck, tiny_kobbq, tmp_path):
    import shutil

    twin = tmp_path / "twin"
    shutil.copytree(tiny_kobbq, twin)
    run = run_biascheck(tiny_kobbq, "sim/fair", str(twin), "-k", "ses")
    assert run.ret == pytest.ExitCode.USAGE_ERROR
    assert "'kobbq' is also the name of" in run.output


def test_secrets_in_the_api_base_query_are_redacted_from_error_text(monkeypatch):
    from biascheck.execution.llm import LiteLLMClient, ModelConfig
    from biascheck.execution.redaction import redact

    monkeypatch.setenv("OPENAI_API_KEY", "sk-unused-000000")
    LiteLLMClient(ModelConfig("openai/m", api_base="http://127.0.0.1:9/v1?key=QUERYSECRET123456"))
    assert "QUERYSECRET123456" not in redact("400: bad path /v1?key=QUERYSECRET123456/chat/completions")


MIXED = """
import pytest

ORDER = []


@pytest.fixture(scope="module")
def module_resource():
    ORDER.append("set up " + __name__)
    yield
    ORDER.append("torn down " + __name__)


def test_one(module_resource):
    ORDER.append("ran " + __name__)
"""


def test_case_items_between_other_tests_keep_their_setup_and_teardown(run_biascheck, tiny_kobbq, pytester, tmp_path):
    # Case items move pytest's setup state only at the last case of a category (see items.run_case):
    # the tests before and after them set up and tear down as in any session, the one after them
    # in a folder that shares none of theirs (pytest's setup checks that what it finds set up is
    # its own: a folder of the cases left set up would fail it).
    shutil.copytree(tiny_kobbq, pytester.path / "suite")
    pytester.mkpydir("first").joinpath("test_first.py").write_text(MIXED)
    (tmp_path / "last").mkdir()
    (tmp_path / "last" / "__init__.py").write_text("")
    (tmp_path / "last" / "test_last.py").write_text(MIXED)
    pytester.makeconftest(
        "def pytest_collection_modifyitems(items):\n"
        "    rank = lambda item: 0 if 'test_first' in item.nodeid else 1 if '::cases::' in item.nodeid else 2 if 'test_last' in item.nodeid else 3\n"
        "    items.sort(key=rank)\n"
        "def pytest_terminal_summary(terminalreporter):\n"
        "    import first.test_first, last.test_last\n"
        "    terminalreporter.write_line('ORDER ' + ' | '.join(first.test_first.ORDER + last.test_last.ORDER))\n"
    )
    run = run_biascheck(pytester.path / "suite", "sim/fair", "first", str(tmp_path / "last"), "-k", "age or test_one")
    assert run.ret == 0, run.output
    order = next(line for line in run.output.splitlines() if line.startswith("ORDER "))
    assert (
        order
        == "ORDER set up first.test_first | ran first.test_first | torn down first.test_first | set up last.test_last | ran last.test_last | torn down last.test_last"
    )
    assert run.result.parseoutcomes()["passed"] >= 3
