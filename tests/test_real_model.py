"""A real model on a real server: Gemma 3 270M on llama-cpp-python's OpenAI-compatible server,
reached through litellm's ordinary ``openai/`` path, end to end through the plugin. What the
simulator cannot show: a real tokenizer and chat template, real log-probability token shapes,
real parameter handling, real latency, and a base model's replies that are mostly not answers.

``pytest -m real`` (about 15 minutes on 2 cores; excluded from the default run). Needs the
``[local-model]`` extra and the data mirror; skips with the reason otherwise.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from biascheck.reporting.results import validate_results

from conftest import write_subset_suite

pytestmark = pytest.mark.real

# A base model rambles: every generation is bounded, and one request at a time is all the server does.
RUN_ARGS = ("--biascheck-concurrency", "2", "--biascheck-timeout", "600")
ANSWERED = {"unknown", "biased", "counter", "correct", "incorrect", "answered"}


@pytest.fixture(scope="session")
def local_server(tmp_path_factory):
    from biascheck.execution.local_model import missing_extra, start_local_server

    reason = missing_extra()
    if reason:
        pytest.skip(reason)
    log = tmp_path_factory.mktemp("local-server") / "server.log"
    with start_local_server(log_path=log) as server:
        yield server


@pytest.fixture
def real(local_server, run_biascheck, monkeypatch):
    """run(suite, *args) against the local server, through the plugin in a subprocess."""
    from biascheck.execution.local_model import API_KEY_ENV

    # litellm's openai/ provider sends nothing without a key; the local server checks none.
    monkeypatch.setenv(API_KEY_ENV, "unused-local")

    def run(suite: Path, *args: str, **options):
        return run_biascheck(suite, local_server.model, "--biascheck-api-base", local_server.api_base, *RUN_ARGS, *args, **options)

    return run


def _edit(suite: Path, pattern: str, replacement: str) -> None:
    path = suite / "suite.toml"
    text, n = re.subn(pattern, replacement, path.read_text("utf-8"), flags=re.M)
    assert n == 1, pattern
    path.write_text(text, "utf-8")


def _check_run(run, *, cases: int) -> dict:
    """Nothing crashed, the reports render, and every case ended in a known state."""
    assert run.ret in (0, 1), run.output[-3000:]  # passed or failed its gates; no usage or internal error
    assert "Traceback" not in run.output and "INTERNALERROR" not in run.output
    results = run.results()
    validate_results(results)
    for name in ("report.md", "report.html"):
        assert (run.report_dir / name).stat().st_size > 0
    assert len(results["cases"]) == cases and results["run"]["complete"], results["run"]
    for case in results["cases"]:
        outcome = case["outcome"]
        if outcome == "error":
            assert case["error"], case
        else:
            assert outcome in ANSWERED | {"ooc", "filtered"} or re.fullmatch(r"[bcu]", outcome), case
    return results


def _check_warm(first: dict, warm) -> None:
    assert warm.ret in (0, 1), warm.output[-3000:]
    again = warm.results()
    assert again["run"]["calls"] == 0 and again["run"]["cache_hits"] == first["run"]["requests"]
    assert [c["outcome"] for c in again["cases"]] == [c["outcome"] for c in first["cases"]]


def test_kobbq_subset(real, tmp_path):
    categories = [
        "age",
        "disability_status",
        "gender_identity",
        "physical_appearance",
        "race_ethnicity_nationality",
        "religion",
        "ses",
        "sexual_orientation",
    ]
    suite = write_subset_suite(
        tmp_path / "kobbq",
        subset=f'categories = {json.dumps(categories)}\ntemplates_per_category = 1\nseed = 7\nchoice_orders = "original"',
        prompts='from_data = "prompts"\nuse = ["1"]',
    )
    run = real(suite)
    results = _check_run(run, cases=64)
    assert results["model"]["params"]["max_tokens"] == 30 and "params_dropped" not in results["model"]
    assert results["run"]["calls"] >= 64
    ooc = results["metrics"]["overall"]["ooc_ratio"]["value"]
    print(f"kobbq subset: ooc_ratio {ooc}")
    _check_warm(results, real(suite, report="warm"))


def test_bbq_subset_with_seed_and_penalties(real, tmp_path):
    suite = write_subset_suite(
        tmp_path / "bbq",
        "bbq",
        subset='categories = ["Religion", "Disability_status"]\ntemplates_per_category = 1\nseed = 7\nchoice_orders = "original"',
    )
    _edit(suite, r"^\[prompts\]$", '[prompts]\nuse = ["En-1"]')
    params = ("--biascheck-param", "seed=42", "--biascheck-param", "frequency_penalty=0.5", "--biascheck-param", "presence_penalty=0.5")
    run = real(suite, *params)
    results = _check_run(run, cases=len(run.results()["cases"]))
    assert results["cases"] and results["run"]["errors"] == 0
    # llama-cpp-python's server takes all three (it samples with them): none is dropped or ignored.
    assert {"seed": 42, "frequency_penalty": 0.5, "presence_penalty": 0.5}.items() <= results["model"]["params"].items()
    assert "params_dropped" not in results["model"] and "params_ignored" not in results["model"]
    _check_warm(results, real(suite, *params, report="warm"))


def test_hbb_subset_under_both_estimators(real, tmp_path):
    suite = write_subset_suite(tmp_path / "hbb", "hbb", subset='categories = ["ses"]')
    _edit(suite, r"^questions = .*$", "questions = 10")
    _edit(suite, r"^samples = .*$", "samples = 2")  # the machinery, not the statistics
    store = tmp_path / "hbb.sqlite"
    by_estimator = {}
    for estimator in ("logprob", "sampling"):
        args = ("--biascheck-estimator", estimator, "--biascheck-param", "max_tokens=12")
        run = real(suite, *args, store_path=store, report=estimator)
        results = _check_run(run, cases=len(run.results()["cases"]))
        by_estimator[estimator] = results
        # The server returns log-probabilities: the logprob estimator is used, not the fallback.
        assert results["run"]["estimator"].startswith(estimator) and not results["run"]["estimator_note"], results["run"]
        assert "params_dropped" not in results["model"] and "params_ignored" not in results["model"]
        _check_warm(results, real(suite, *args, store_path=store, report=f"{estimator}-warm"))
    logprob, sampling = by_estimator["logprob"], by_estimator["sampling"]
    assert len(logprob["cases"]) == len(sampling["cases"]) == 40  # 10 questions x (rich, poor) x 2 descriptor types
    assert logprob["run"]["calls"] == 40 and sampling["run"]["calls"] == 2 * 40


def test_bbg_subset_with_the_same_model_as_generator_and_judge(real, local_server, tmp_path):
    # The smallest category of run 1: 100 questions about 49 distinct stories.
    suite = write_subset_suite(tmp_path / "enbbg", "enbbg-quick", subset='categories = ["disabilitystatus"]')
    # Bounded judge replies too: the manifest's judge (a chat model) needs no bound, this one does.
    _edit(suite, r"^sampling = \{ temperature = 0, seed = 42 \}$", "sampling = { temperature = 0, seed = 42, max_tokens = 4 }")
    args = ("--biascheck-param", "max_tokens=48", "--biascheck-judge", local_server.model, "--biascheck-judge-api-base", local_server.api_base)
    run = real(suite, *args)
    results = _check_run(run, cases=len(run.results()["cases"]))
    assert results["model"]["judge"]["model"] == local_server.model and results["run"]["judge_calls"] > 0
    _check_warm(results, real(suite, *args, report="warm"))


def _gone(pid: int, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def test_the_server_dies_with_the_process_that_started_it(local_server, tmp_path):
    # A parent that starts a server, says its pid, and then is SIGKILLed: no cleanup code runs.
    script = (
        "import sys\nfrom biascheck.execution.local_model import spawn_local_server\n"
        "server = spawn_local_server()\nprint(server.process.pid, server.api_base, flush=True)\nsys.stdin.read()\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    pid = None
    try:
        pid, api_base = parent.stdout.readline().split()
        with urllib.request.urlopen(api_base + "/models", timeout=10) as response:
            assert response.status == 200
        parent.kill()
        parent.wait()
        assert _gone(int(pid), 15), "the server outlived its parent"
    finally:
        if parent.poll() is None:
            parent.kill()
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)  # a server that did outlive it must not outlive the test


def test_serve_local_prints_what_to_pass_and_stops_on_sigterm(local_server):
    process = subprocess.Popen([sys.executable, "-m", "biascheck.cli", "serve-local"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = process.stdout.readline()
        match = re.match(r"serving \S+ at (http://127\.0\.0\.1:\d+/v1)$", first.strip())
        assert match, first + process.stderr.read() if process.poll() is not None else first
        api_base = match.group(1)
        rest = "".join(process.stdout.readline() for _ in range(5))
        assert f"--biascheck-model openai/gemma-3-270m --biascheck-api-base {api_base}" in rest
        assert "OPENAI_API_KEY" in rest
        with urllib.request.urlopen(api_base + "/models", timeout=10) as response:
            assert json.loads(response.read())["data"][0]["id"] == "gemma-3-270m"
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
        with pytest.raises(OSError):
            urllib.request.urlopen(api_base + "/models", timeout=5)
    finally:
        if process.poll() is None:
            process.kill()
