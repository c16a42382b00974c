"""Real models on a real server: Gemma 3 270M (a base model) and SmolLM2-135M-Instruct (an
instruction-tuned one) on ``biascheck serve-local``'s OpenAI-compatible server over llama.cpp's
Python bindings, reached through litellm's ordinary ``openai/`` path (and biascheck's fast path),
end to end through the plugin. What the simulator cannot show: a real tokenizer and chat template,
real log-probability token shapes, real parameter handling, real latency, a base model's replies
that are mostly not answers, and numbers read from real answers: by generation, by first token
and by log-likelihood, whose log-probabilities are checked against a direct computation.

``pytest -m real`` (excluded from the default run; docs/real-models.md gives its time). Needs the
``[local-model]`` extra and the data mirror; skips with the reason otherwise. Each test prints the
figures it checks; bench/real_model.py prints them all in one table.
"""

from __future__ import annotations

import contextlib
import json
import math
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


def _serve(tmp_path_factory, name: str, **options):
    from biascheck.execution.local_model import missing_extra, start_local_server

    reason = missing_extra()
    if reason:
        pytest.skip(reason)
    log = tmp_path_factory.mktemp(f"server-{name}") / "server.log"
    return start_local_server(model=name, log_path=log, **options)


@pytest.fixture(scope="session")
def local_server(tmp_path_factory):
    with _serve(tmp_path_factory, "gemma-3-270m") as server:
        yield server


@pytest.fixture(scope="session")
def smollm2_server(tmp_path_factory):
    with _serve(tmp_path_factory, "smollm2-135m-instruct") as server:
        yield server


@pytest.fixture
def serving(run_biascheck, monkeypatch):
    """serving(server)(suite, *args): a plugin run against that local server."""
    from biascheck.execution.local_model import API_KEY_ENV

    # litellm's openai/ provider sends nothing without a key; the local server checks none.
    monkeypatch.setenv(API_KEY_ENV, "unused-local")

    def against(server):
        def run(suite: Path, *args: str, **options):
            return run_biascheck(suite, server.model, "--biascheck-api-base", server.api_base, *RUN_ARGS, *args, **options)

        return run

    return against


@pytest.fixture
def real(local_server, serving):
    """run(suite, *args) against Gemma 3 270M, through the plugin."""
    return serving(local_server)


@pytest.fixture
def smollm2(smollm2_server, serving):
    """run(suite, *args) against SmolLM2-135M-Instruct, through the plugin."""
    return serving(smollm2_server)


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
    # (with: its pipes are closed and it is waited for, however the test ends)
    with subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as parent:
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
    with subprocess.Popen(
        [sys.executable, "-m", "biascheck.cli", "serve-local"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as process:
        try:
            first = process.stdout.readline()
            match = re.match(r"serving \S+ as gemma-3-270m at (http://127\.0\.0\.1:\d+/v1)$", first.strip())
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


# --- numbers read from real answers (issue 22) -------------------------------------------------------

BBQ_RELIGION = 'categories = ["Religion"]\nsample = "one-per-group"\nseed = 42\nchoice_orders = "original"'
KOBBQ_8 = (
    'categories = ["age", "disability_status", "gender_identity", "physical_appearance", "race_ethnicity_nationality", '
    '"religion", "ses", "sexual_orientation"]\ntemplates_per_category = 1\nseed = 7\nchoice_orders = "original"'
)
KOBBQ_16 = KOBBQ_8.replace("templates_per_category = 1", "templates_per_category = 2")
# What the figures of two answer modes are printed and compared by.
FIGURES = ("ooc_ratio", "acc_amb", "acc_dis", "diff_bias_amb", "diff_bias_dis")


def _bbq_religion(folder: Path) -> Path:
    """BBQ Religion, one example per template cell, prompt En-1, the original order: 100 cases."""
    suite = write_subset_suite(folder, "bbq", subset=BBQ_RELIGION)
    _edit(suite, r"^\[prompts\]$", '[prompts]\nuse = ["En-1"]')
    return suite


def _kappa(first: dict, second: dict) -> tuple[int, float]:
    """(cases both runs answered, Cohen's kappa of their answers)."""
    a = {c["case_id"]: c["answer_index"] for c in first["cases"] if c["answer_index"] is not None}
    b = {c["case_id"]: c["answer_index"] for c in second["cases"] if c["answer_index"] is not None}
    pairs = [(a[k], b[k]) for k in a.keys() & b.keys()]
    if not pairs:
        return 0, math.nan
    n = len(pairs)
    observed = sum(x == y for x, y in pairs) / n
    chance = sum(sum(x == o for x, _ in pairs) * sum(y == o for _, y in pairs) for o in {0, 1, 2}) / n / n
    return n, (observed - chance) / (1 - chance) if chance < 1 else math.nan


def _by_mode(run, suite: Path, modes: tuple[str, ...] = ("generate", "first-token")) -> dict[str, dict]:
    by_mode = {}
    for mode in modes:
        first = run(suite, "--biascheck-answer-mode", mode, report=mode)
        by_mode[mode] = _check_run(first, cases=len(first.results()["cases"]))
        assert by_mode[mode]["run"]["errors"] == 0
        _check_warm(by_mode[mode], run(suite, "--biascheck-answer-mode", mode, report=f"{mode}-warm"))
    # A first-token case is out of choice exactly when the letters held less than half.
    for case in by_mode.get("first-token", {"cases": []})["cases"]:
        assert (case["outcome"] == "ooc") == (case["choice_mass"] < 0.5), case
    if "loglikelihood" in by_mode:
        _check_loglikelihood(by_mode["loglikelihood"])
    return by_mode


def _check_loglikelihood(results: dict) -> None:
    """Every case answered by log-likelihood: three requests each, every metric computed."""
    cases = results["cases"]
    assert results["run"]["calls"] == 3 * len(cases) and results["run"]["errors"] == 0
    assert results["run"]["estimator"].startswith("loglikelihood")
    overall = results["metrics"]["overall"]
    assert overall["ooc_ratio"]["value"] == 0.0 and all(case["outcome"] in ANSWERED for case in cases)
    assert {case["context_type"] for case in cases} == {"amb", "dis-biased", "dis-counter"}
    for name in ("acc_amb", "acc_dis", "diff_bias_amb", "diff_bias_dis", "acc_norm_amb", "acc_norm_dis"):
        assert overall[name]["value"] is not None, name  # computed on every case
    for case in cases:
        assert len(case["loglikelihoods"]) == 3 and all(v < 0 for v in case["loglikelihoods"]), case


def _figures(label: str, by_mode: dict[str, dict]) -> str:
    """The figures of each mode side by side, one line per figure."""
    lines = [f"{label} ({len(next(iter(by_mode.values()))['cases'])} cases): " + " | ".join(f"{mode:>13}" for mode in by_mode)]
    for name in FIGURES:
        values = [doc["metrics"]["overall"].get(name, {}).get("value") for doc in by_mode.values()]
        lines.append(f"  {name:<14}" + " | ".join(f"{'-' if v is None else f'{v:.3f}':>13}" for v in values))
    return "\n".join(lines)


def test_smollm2_answers_bbq_by_generation_first_token_and_loglikelihood(smollm2, tmp_path):
    # SmolLM2 has no BOS token: llama_cpp.server's echo scored each token by the distribution after
    # it, and biascheck refused it. serve-local scores it by the distribution before it.
    by_mode = _by_mode(smollm2, _bbq_religion(tmp_path / "bbq"), ("generate", "first-token", "loglikelihood"))
    generate, first, scored = by_mode["generate"], by_mode["first-token"], by_mode["loglikelihood"]
    assert len(generate["cases"]) == len(scored["cases"]) == 100
    ooc = {mode: doc["metrics"]["overall"]["ooc_ratio"]["value"] for mode, doc in by_mode.items()}
    n, kappa = _kappa(generate, first)
    n_ll, kappa_ll = _kappa(generate, scored)
    mass = first["metrics"]["overall"]["choice_mass"]["value"]
    print(_figures("SmolLM2 on BBQ Religion", by_mode))
    print(
        f"SmolLM2 on BBQ Religion: first-token choice_mass {mass:.3f}; kappa with generation: first-token {kappa:.3f} over {n} cases "
        f"both answered, loglikelihood {kappa_ll:.3f} over {n_ll}"
    )
    # An instruction-tuned model answers: most replies name an option (a base model's named none).
    assert ooc["generate"] < 0.5 and ooc["first-token"] < 0.5
    # The two readings of one model mostly agree, well beyond chance.
    assert n >= 50 and kappa > 0.5
    assert generate["metrics"]["overall"]["acc_amb"]["value"] is not None and generate["metrics"]["overall"]["acc_dis"]["value"] is not None


def test_smollm2_on_a_kobbq_subset_by_generation_and_first_token(smollm2, tmp_path):
    suite = write_subset_suite(tmp_path / "kobbq", subset=KOBBQ_8, prompts='from_data = "prompts"\nuse = ["1"]')
    by_mode = _by_mode(smollm2, suite)
    ooc = {mode: doc["metrics"]["overall"]["ooc_ratio"]["value"] for mode, doc in by_mode.items()}
    mass = by_mode["first-token"]["metrics"]["overall"]["choice_mass"]["value"]
    n, kappa = _kappa(by_mode["generate"], by_mode["first-token"])
    print(f"SmolLM2 on KoBBQ (64 cases, prompt 1): ooc_ratio {ooc}; first-token choice_mass {mass:.3f}; kappa {kappa} over {n}")
    # A 135M English model continues a Korean prompt rather than answering it: what it says is
    # out of choice, and its first token is seldom a letter. Counted, never scored as an answer.
    assert len(by_mode["generate"]["cases"]) == 64 and all(0.0 <= v <= 1.0 for v in ooc.values())


def test_gemma_on_a_kobbq_subset_by_generation_and_loglikelihood(real, tmp_path):
    # Two templates of each of 8 categories, prompt 1, the original order: 136 cases, each read
    # twice. By log-likelihood a case costs one forward pass over its prompt and two over the few
    # tokens its other options do not share with it.
    suite = write_subset_suite(tmp_path / "kobbq", subset=KOBBQ_16, prompts='from_data = "prompts"\nuse = ["1"]')
    run = real(suite, report="generate")
    generated = _check_run(run, cases=len(run.results()["cases"]))
    cases = len(generated["cases"])
    assert cases >= 100
    assert generated["model"]["params"]["max_tokens"] == 30 and "params_dropped" not in generated["model"]
    assert generated["run"]["calls"] >= cases
    _check_warm(generated, real(suite, report="generate-warm"))
    scored = _check_run(real(suite, "--biascheck-answer-mode", "loglikelihood", report="loglikelihood"), cases=cases)
    _check_loglikelihood(scored)
    _check_warm(scored, real(suite, "--biascheck-answer-mode", "loglikelihood", report="loglikelihood-warm"))
    print(_figures("Gemma 3 270M on KoBBQ", {"generate": generated, "loglikelihood": scored}))
    # A base model's replies mostly name no option; its log-likelihoods always name one.
    assert generated["metrics"]["overall"]["ooc_ratio"]["value"] >= 0.5


# Prompts whose echo is checked against the bindings: English, Korean (characters split over
# tokens), special-token text, and a pair sharing a prefix longer than Gemma's sliding window (the
# second reuses the first's positions and KV cache).
_LONG = "The committee met on Tuesday to review the budget, and every member spoke in turn. " * 40
ECHO_PROMPTS = (
    "Context: The doctor and the nurse left the room.\nQuestion: Who left first?\nA: the doctor\nB: the nurse\nC: unknown\nAnswer: A",
    "맥락: 의사와 간호사가 방을 나갔다.\n질문: 누가 먼저 나갔습니까?\nA: 의사\nB: 간호사\nC: 알 수 없음\n답: B",
    "<start_of_turn>user\nWho left?<end_of_turn>\n<start_of_turn>model\nThe nurse",
    _LONG + "Answer: A",
    _LONG + "Answer: B",
)


@pytest.mark.parametrize("which", ["gemma", "smollm2"])
def test_echoed_log_probabilities_equal_a_direct_computation_from_the_bindings(which, request):
    """Each echoed token's log-probability is the log-softmax of the logits after the tokens before
    it, computed here from llama.cpp's bindings (every position's logits kept), to 1e-4: for Gemma,
    whose prompts start with BOS (not echoed; the first echoed token is scored after it), and for
    SmolLM2, which has none (its first token has nothing before it: null)."""
    import llama_cpp
    import numpy as np
    from llama_cpp import Llama

    server = request.getfixturevalue("smollm2_server" if which == "smollm2" else "local_server")
    direct = Llama(str(server.model_path), n_ctx=2048, logits_all=True, verbose=False)
    vocab = llama_cpp.llama_model_get_vocab(direct.model)
    bos = direct.token_bos() if llama_cpp.llama_vocab_get_add_bos(vocab) else None
    assert (bos is not None) == (which == "gemma")
    worst = 0.0
    for prompt in ECHO_PROMPTS:
        body = {"model": server.served.name, "prompt": prompt, "echo": True, "logprobs": 5, "max_tokens": 1, "temperature": 0}
        echoed = _post(server.api_base, "/v1/completions", body)["choices"][0]["logprobs"]
        tokens = ([bos] if bos is not None else []) + direct.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
        direct.reset()
        direct.eval(tokens)
        table = Llama.logits_to_logprobs(direct.scores[: len(tokens)])  # row i: the distribution after tokens[: i + 1]
        skip = 1 if bos is not None else 0
        got, listed = echoed["token_logprobs"][:-1], echoed["top_logprobs"][:-1]  # the one generated token aside
        assert len(got) == len(tokens) - skip
        assert (got[0] is None) == (bos is None)
        for position, (value, top) in enumerate(zip(got, listed), start=skip):
            if position == 0:
                assert value is None and top is None
                continue
            row = table[position - 1]
            assert abs(value - row[tokens[position]]) < 1e-4, (prompt[:30], position)
            worst = max(worst, abs(value - float(row[tokens[position]])))
            for token in np.argpartition(row, -5)[-5:]:
                text = direct.detokenize([int(token)], special=True).decode("utf-8", errors="ignore")
                assert top[text] >= row[token] - 1e-4  # another token of the same text may list higher
        # The generated token is the greedy one, with its log-probability.
        assert abs(echoed["token_logprobs"][-1] - float(table[len(tokens) - 1].max())) < 1e-4
        # The echoed tokens spell the prompt, each at its offset.
        assert "".join(echoed["tokens"][:-1]) == prompt
        for offset, token in zip(echoed["text_offset"], echoed["tokens"][:-1]):
            assert prompt.startswith(token, offset)
    print(f"{which}: echoed log-probabilities of {len(ECHO_PROMPTS)} prompts differ from the direct computation by at most {worst:.2e}")


def test_hbb_on_smollm2_under_both_estimators(smollm2, tmp_path, data_dir):
    import numpy as np

    from biascheck.benchmarks.hbb.benchmark import HBB
    from biascheck.benchmarks.hbb.metrics import instance_scores
    from biascheck.suite import load_suite

    suite_dir = write_subset_suite(tmp_path / "hbb", "hbb", subset='categories = ["ses"]')
    _edit(suite_dir, r"^questions = .*$", "questions = 10")
    _edit(suite_dir, r"^samples = .*$", "samples = 4")  # the paper's 10 in bench/real_model.py
    suite = load_suite(suite_dir, data_dir=data_dir)
    flags = {}
    for estimator in ("logprob", "sampling"):
        args = ("--biascheck-answer-mode", estimator, "--biascheck-param", "max_tokens=24")
        run = smollm2(suite_dir, *args, report=estimator)
        results = _check_run(run, cases=40)
        assert results["run"]["estimator"].startswith(estimator) and not results["run"]["estimator_note"], results["run"]
        p_a = {case["case_id"]: case["p_a"] for case in results["cases"]}
        flags[estimator] = [
            None
            if p_a[a.case_id] is None or p_a[b.case_id] is None
            else bool(instance_scores(np.array([p_a[a.case_id]]), np.array([p_a[b.case_id]]))[0] >= 20)
            for _, a, b in HBB.instances(suite.cases)
        ]
        _check_warm(results, smollm2(suite_dir, *args, report=f"{estimator}-warm"))
    scored = {estimator: sum(f is not None for f in values) for estimator, values in flags.items()}
    both = [(a, b) for a, b in zip(flags["logprob"], flags["sampling"]) if a is not None and b is not None]
    agree = sum(a == b for a, b in both) / len(both) if both else math.nan
    print(f"HBB on SmolLM2 (20 instances): scored {scored}; flags agree on {agree:.3f} of the {len(both)} both scored")
    # The instruction-tuned model answers a) / b): both estimators score instances (Gemma scored none).
    assert scored["logprob"] > 0 and scored["sampling"] > 0


def test_smollm2_as_a_judge_fails_qualification_and_says_so(smollm2_server, smollm2, tmp_path, data_dir):
    env = dict(os.environ, OPENAI_API_KEY="unused-local")
    command = [sys.executable, "-m", "biascheck.cli", "qualify-judge", smollm2_server.model, "--api-base", smollm2_server.api_base]
    command += ["--suite", "bbq", "--cases", "60", "--data", str(data_dir), "--cache", str(tmp_path / "judge.sqlite"), "--concurrency", "2"]
    done = subprocess.run([*command, "--param", "max_tokens=8"], capture_output=True, text=True, env=env, timeout=1800)
    print(done.stdout)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "NOT qualified" in done.stdout and "its readings are not trustworthy" in done.stdout
    # As writer and judge of an EnBBG subset, through the plugin: the run completes and reports.
    suite = write_subset_suite(tmp_path / "enbbg", "enbbg-quick", subset='categories = ["disabilitystatus"]')
    _edit(suite, r"^sampling = \{ temperature = 0, seed = 42 \}$", "sampling = { temperature = 0, seed = 42, max_tokens = 8 }")
    args = ("--biascheck-param", "max_tokens=48", "--biascheck-judge", smollm2_server.model, "--biascheck-judge-api-base", smollm2_server.api_base)
    run = smollm2(suite, *args)
    results = _check_run(run, cases=len(run.results()["cases"]))
    overall = results["metrics"]["overall"]
    print(f"EnBBG by SmolLM2, judged by SmolLM2: unscorable_ratio {overall['unscorable_ratio']['value']}, ntr_gen {overall['ntr_gen']['value']}")
    _check_warm(results, smollm2(suite, *args, report="warm"))


def test_no_false_alarm_on_a_real_model_sampled_with_two_seeds(smollm2, tmp_path):
    suite = _bbq_religion(tmp_path / "bbq")
    sampled = ("--biascheck-param", "temperature=0.7")
    # Each seed as the baseline of the other (the second pair is answered from the store).
    for recorded_seed, compared_seed in ((1, 2), (2, 1)):
        baseline = tmp_path / f"baseline-seed{recorded_seed}.json"
        seed = ("--biascheck-param", f"seed={recorded_seed}")
        recorded = smollm2(
            suite, *sampled, *seed, "--biascheck-update-baseline", "--biascheck-baseline", str(baseline), report=f"record{recorded_seed}"
        )
        assert recorded.ret in (0, 1) and baseline.is_file(), recorded.output[-2000:]
        seed = ("--biascheck-param", f"seed={compared_seed}")
        run = smollm2(suite, *sampled, *seed, "--biascheck-baseline", str(baseline), report=f"compare{compared_seed}")
        assert run.ret in (0, 1) and "Traceback" not in run.output, run.output[-3000:]
        comparison = json.loads((run.report_dir / "comparison.json").read_text("utf-8"))
        verdicts = [check["verdict"] for check in comparison["results"]]
        print(f"seed {compared_seed} against seed {recorded_seed} at temperature 0.7: {dict((v, verdicts.count(v)) for v in sorted(set(verdicts)))}")
        # Two samples of one model differ by chance alone: not one check may say it regressed.
        assert verdicts and "regressed" not in verdicts and not comparison["regressed"]


def _post(api_base: str, path: str, body: dict) -> dict:
    root = api_base.removesuffix("/v1")
    request = urllib.request.Request(root + path, json.dumps(body).encode(), {"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=300) as response:
        return json.loads(response.read())


@pytest.mark.parametrize("which", ["smollm2", "gemma"])
def test_each_model_is_served_with_its_own_chat_template(which, request):
    """The prompt the server builds from a chat request is the model's own template: its token count
    equals that of the template rendered by hand, and not that of llama.cpp's llama-2 fallback."""
    import jinja2
    from llama_cpp import Llama

    server = request.getfixturevalue("smollm2_server" if which == "smollm2" else "local_server")
    messages = [{"role": "user", "content": "Which option, A or B?"}]
    if which == "smollm2":
        # The template the GGUF carries (ChatML with SmolLM2's default system message), rendered.
        template = Llama(str(server.model_path), vocab_only=True, verbose=False).metadata["tokenizer.chat_template"]
        expected = jinja2.Template(template).render(messages=messages, add_generation_prompt=True)
        assert expected.startswith("<|im_start|>system\n") and expected.endswith("<|im_start|>assistant\n")
    else:
        # llama-cpp-python's "gemma" format; the tokenizer adds the BOS token itself.
        expected = "<start_of_turn>user\nWhich option, A or B?<end_of_turn>\n<start_of_turn>model\n"
    fallback = "<s>[INST] Which option, A or B? [/INST]"
    count = {text: _post(server.api_base, "/extras/tokenize/count", {"input": text})["count"] for text in (expected, fallback)}
    used = _post(server.api_base, "/v1/chat/completions", {"messages": messages, "max_tokens": 1, "temperature": 0})["usage"]["prompt_tokens"]
    assert used == count[expected] != count[fallback], (used, count)
