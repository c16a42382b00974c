"""Fuzzing the input surfaces (issue 23): suite.toml (through its schema), baselines and results
files, and the arguments of every ``biascheck`` subcommand. Whatever the input, the answer is a
valid result or one line naming what is wrong: never a traceback, never a hang. (Server replies are
fuzzed in test_hostile_server.py.)

The default run takes a fixed set of examples of each (``derandomize``: it never flakes) and runs
in this process; ``-m slow`` runs hundreds of fresh examples, and the commands in a subprocess with
a deadline, with the benchmark data, the packaged suites and the servers included.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import math
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_examples import examples

from biascheck.benchmarks.base import benchmark_of
from biascheck.cli import main
from biascheck.config.manifest import load_manifest
from biascheck.core.errors import BiascheckError

from conftest import SUITES, write_subset_suite

FAST = settings(max_examples=examples(40), deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
MANY = settings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck))

# --- values a hostile user writes -----------------------------------------------------------------

_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)  # no lone surrogates: files are UTF-8


def _nested(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


# A number of 5,000 digits: Python's int() refuses more than 4,300, so it is written in as text.
HUGE = "<<5000 digits>>"


def with_huge(text: str) -> str:
    return text.replace(json.dumps(HUGE), "1" + "0" * 4999)


LEAVES = st.one_of(
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.sampled_from([0, -1, 1, 2**63, 2**64 + 1, HUGE]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([1e308, -1e308, 5e-324]),
    _TEXT,
    st.sampled_from(["", "a" * 5000, "-1e308%", "+0.02", "../../etc/passwd", "/proc/1/x", "{suite}", "[/]"]),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(_TEXT, st.integers(), max_size=2),
    st.integers(30, 600).map(_nested),
)


def _paths(value, prefix: tuple = ()):
    """Every path into a JSON-like value (dict keys and list indexes)."""
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value[:5]):
            yield from _paths(item, (*prefix, index))


@st.composite
def mutated(draw, document):
    """``document`` with one to four parts replaced, removed or added."""
    document = copy.deepcopy(document)
    for _ in range(draw(st.integers(1, 4))):
        path = draw(st.sampled_from(list(_paths(document))[1:] or [()]))
        if not path:
            break
        parent = document
        for key in path[:-1]:
            parent = parent[key]
        action = draw(st.sampled_from(["replace", "replace", "remove", "add"]))
        if action == "remove" and isinstance(parent, dict):
            del parent[path[-1]]
        elif action == "add" and isinstance(parent, dict):
            parent[draw(_TEXT)] = draw(LEAVES)
        else:
            parent[path[-1]] = draw(LEAVES)
    return document


@st.composite
def garbled(draw, text: str) -> str:
    """``text`` cut short, or with characters inserted or removed."""
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(text)))
        text = draw(st.sampled_from([text[:at], text[:at] + draw(_TEXT) + text[at:], text[:at] + text[at + draw(st.integers(1, 50)) :]]))
    return text


def assert_one_line(error: BiascheckError | str, where: object = None) -> None:
    message = str(error)
    assert "\n" not in message.strip() and "Traceback" not in message, message
    if where is not None:
        assert message.startswith(str(where)), message
    assert len(message) < 2000, message


# --- suite.toml -----------------------------------------------------------------------------------

# A QA suite, HBB and BBG: each benchmark's own table is fuzzed through its schema fragment too.
BASE_SUITES = ("kobbq", "hbb", "enbbg-quick")
BASES = {name: tomllib.loads((SUITES / name / "suite.toml").read_text("utf-8")) for name in BASE_SUITES}


def toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if value != value else ("inf" if value > 0 else "-inf")
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a TOML basic string takes JSON's escapes
    if isinstance(value, list):
        return "[" + ", ".join(map(toml_value, value)) + "]"
    return "{" + ", ".join(f"{json.dumps(key, ensure_ascii=False)} = {toml_value(item)}" for key, item in value.items()) + "}"


def toml_document(document: dict) -> str:
    return with_huge("".join(f"{json.dumps(key, ensure_ascii=False)} = {toml_value(value)}\n" for key, value in document.items()))


@st.composite
def manifests(draw) -> str:
    base = BASES[draw(st.sampled_from(BASE_SUITES))]
    if draw(st.integers(0, 3)):
        return toml_document(draw(mutated(base)))
    return draw(garbled(toml_document(base)))


def _check_manifest(folder: Path, text: str) -> None:
    folder.mkdir(exist_ok=True)
    (folder / "suite.toml").write_text(text, "utf-8")
    try:
        benchmark_of(load_manifest(folder))  # the suite schema, then the benchmark's own table
    except BiascheckError as exc:
        assert_one_line(exc, folder / "suite.toml")


def test_the_packaged_suites_read_back_through_the_toml_writer(tmp_path):
    for name in BASE_SUITES:
        folder = tmp_path / name
        folder.mkdir()
        (folder / "suite.toml").write_text(toml_document(BASES[name]), "utf-8")
        assert load_manifest(folder).raw == BASES[name]


@FAST
@given(text=manifests())
def test_a_fuzzed_suite_toml_is_valid_or_one_line(tmp_path, text):
    _check_manifest(tmp_path / "suite", text)


@pytest.mark.slow
@MANY
@given(text=manifests())
def test_many_fuzzed_suite_tomls_are_valid_or_one_line(tmp_path, text):
    _check_manifest(tmp_path / "suite", text)


@pytest.mark.slow
@settings(MANY, max_examples=40)
@given(text=manifests())
def test_fuzzed_suites_are_listed_or_refused_by_the_command(tmp_path, data_dir, text):
    """``biascheck suites`` builds every case from the benchmark data: a subprocess, with a deadline."""
    folder = tmp_path / "suite"
    folder.mkdir(exist_ok=True)
    (folder / "suite.toml").write_text(text, "utf-8")
    done = _command(["suites", "--data", str(data_dir), str(folder)], tmp_path)
    assert done.returncode in (0, 2), done.stderr


# --- baselines and results.json ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def documents(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict, Path]:
    """(a baseline, the results of a later run, the suite folder) of a tiny KoBBQ."""
    from biascheck.evaluation import baseline as baselines
    from biascheck.sim.calibration import PreparedSuite, simulated_results
    from biascheck.suite import load_suite

    from conftest import mirror_or_skip

    mirror = mirror_or_skip()
    folder = write_subset_suite(
        tmp_path_factory.mktemp("fuzz") / "kobbq-tiny",
        subset='templates_per_category = 1\nseed = 7\nchoice_orders = "original"',
        prompts='from_data = "prompts"\nuse = ["1"]',
    )
    prepared = PreparedSuite.of(load_suite(folder, data_dir=mirror))
    recorded = baselines.from_results(simulated_results(prepared, "stereotyped?p=0.2", resamples=0), git="0" * 40)
    baseline = {key: value for key, value in recorded.to_json().items() if key != "digest"}  # a baseline file's document, to edit
    results = simulated_results(prepared, "stereotyped?p=0.3", resamples=0).to_json()
    results["suite"]["manifest"] = str(folder / "suite.toml")
    return baseline, results, folder


def _write_baseline(path: Path, document) -> None:
    from biascheck.evaluation import baseline as baselines

    try:
        text = baselines.document_text(document)  # with its digest made again: the checks behind the digest are reached
    except (ValueError, TypeError, RecursionError, KeyError, AttributeError):  # nan, or not a document at all
        text = json.dumps(document)
    path.write_text(with_huge(text), "utf-8")


@st.composite
def baseline_texts(draw, document: dict) -> str:
    from biascheck.evaluation import baseline as baselines

    if draw(st.integers(0, 3)):
        return draw(mutated(document))
    return draw(garbled(baselines.document_text(document)))


def _check_baseline(path: Path, value) -> None:
    from biascheck.evaluation import baseline as baselines

    if isinstance(value, str):
        path.write_text(value, "utf-8")
    else:
        _write_baseline(path, value)
    try:
        baselines.load(path)
    except BiascheckError as exc:
        assert_one_line(exc, path)


@pytest.mark.data
@FAST
@given(data=st.data())
def test_a_fuzzed_baseline_loads_or_is_one_line(tmp_path, documents, data):
    _check_baseline(tmp_path / "baseline.json", data.draw(baseline_texts(documents[0])))


@pytest.mark.slow
@pytest.mark.data
@MANY
@given(data=st.data())
def test_many_fuzzed_baselines_load_or_are_one_line(tmp_path, documents, data):
    _check_baseline(tmp_path / "baseline.json", data.draw(baseline_texts(documents[0])))


def _check_diff(tmp_path: Path, documents, results) -> None:
    baseline, _, folder = documents
    _write_baseline(tmp_path / "baseline.json", baseline)
    path = tmp_path / "results.json"
    path.write_text(results if isinstance(results, str) else with_huge(json.dumps(results)), "utf-8")
    code, _, err = run_main(["diff", str(tmp_path / "baseline.json"), str(path), "--suite", str(folder)])
    assert code in (0, 1, 2), err
    if code == 2:
        assert_one_line(err, "biascheck: ")


@st.composite
def results_texts(draw, document: dict):
    if draw(st.integers(0, 3)):
        return draw(mutated(document))
    return draw(garbled(json.dumps(document, indent=1)))


@pytest.mark.data
@settings(FAST, max_examples=examples(15))  # each comparison bootstraps: about 0.1 s
@given(data=st.data())
def test_a_diff_with_fuzzed_results_compares_or_is_one_line(tmp_path, documents, data):
    _check_diff(tmp_path, documents, data.draw(results_texts(documents[1])))


@pytest.mark.slow
@pytest.mark.data
@settings(MANY, max_examples=200)
@given(data=st.data())
def test_many_diffs_with_fuzzed_results_compare_or_are_one_line(tmp_path, documents, data):
    _check_diff(tmp_path, documents, data.draw(results_texts(documents[1])))


# The [regression] settings a results.json records, by the bound each takes (None: not a number).
REGRESSION_FIELDS = {"alpha": "alpha", "power": "power", "resamples": "resamples", "seed": "seed", "flip_limit": "flip_limit"}
REGRESSION_FIELDS |= {"on_inconclusive": None, "rules": None}


def _valid_setting(field: str, value) -> bool:
    """Whether ``value`` is a setting suite.toml would take for ``field`` (the spec, stated apart
    from the code under test)."""
    from biascheck.core.bounds import BOUNDS

    if field == "on_inconclusive":
        return value in ("pass", "warn", "fail")
    if field == "rules":
        return isinstance(value, list) and all(isinstance(item, str) for item in value)
    try:
        BOUNDS[REGRESSION_FIELDS[field]].check(value, "x")
    except BiascheckError:
        return False
    return True


@pytest.mark.data
@settings(FAST, max_examples=examples(30))
@given(field=st.sampled_from(sorted(REGRESSION_FIELDS)), value=st.one_of(LEAVES, st.just("<removed>")))
def test_a_diff_never_takes_its_settings_from_the_candidate(tmp_path, documents, field, value):
    """Issue 34, D6: alpha 0, NaN or "x", power 2, seed -1 or rules null in B's results.json were
    tracebacks exiting 1 ("regressed"), resamples 1e9 took 23 GB, and alpha 2 or flip_limit -5 were
    used. Any value: a comparison with A's settings, or one line naming B's field, exit 2."""
    baseline, results, _ = documents
    results = copy.deepcopy(results)
    if value == "<removed>":
        del results["suite"]["regression"][field]
    else:
        results["suite"]["regression"][field] = value
    _write_baseline(tmp_path / "baseline.json", baseline)
    path = tmp_path / "results.json"
    path.write_text(with_huge(json.dumps(results)), "utf-8")
    code, _, err = run_main(["diff", str(tmp_path / "baseline.json"), str(path), "--report", str(tmp_path / "report")])
    if code == 2:  # the field named, or the file (a number of 5,000 digits is no JSON number Python reads)
        assert_one_line(err, f"biascheck: {path}: ")
        assert f"{path}: suite.regression" in err and field in err or "is not a results.json" in err, err
        return
    assert code in (0, 1) and "Traceback" not in err, err
    assert value == "<removed>" and field not in ("alpha", "rules") or _valid_setting(field, value), (field, value)
    used = json.loads((tmp_path / "report" / "comparison.json").read_text("utf-8"))["settings"]
    wanted = documents[1]["suite"]["regression"]  # the suite's, which A records
    assert (used["alpha"], used["power"], used["n_boot"], used["seed"]) == (wanted["alpha"], wanted["power"], wanted["resamples"], wanted["seed"])


# --- a labelled judge calibration sample ------------------------------------------------------------------

_SAMPLE_CELLS = st.one_of(LEAVES, st.sampled_from(["b", "c", "u", "", " B ", "=1+1", "'b", "sim/judge"]))


@FAST
@given(
    rows=st.lists(
        st.dictionaries(
            st.sampled_from(["case_id", "judge_answer", "label", "label_2", "adjudicated", "judge", "prompt", "language", "x"]), _SAMPLE_CELLS
        ),
        max_size=6,
    ),
    as_csv=st.booleans(),
    repeat=st.integers(1, 3),
)
def test_a_fuzzed_labelled_sample_fits_or_is_one_line(tmp_path, rows, as_csv, repeat):
    """Issue 34, D10: repeated rows, deep nesting and huge cells among them."""
    import csv

    from biascheck.benchmarks.bbg.judge_calibration import fit_calibration

    path = tmp_path / ("labelled.csv" if as_csv else "labelled.jsonl")
    if as_csv:
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=["case_id", "judge_answer", "label", "label_2", "adjudicated", "judge", "prompt", "language", "x"])
        writer.writeheader()
        writer.writerows([{key: str(value) for key, value in row.items()} for row in rows])
        text = buffer.getvalue()
    else:
        text = "".join(json.dumps(row) + "\n" for row in rows)
    path.write_text(with_huge(text * repeat), "utf-8")
    try:
        fit_calibration(path)
    except BiascheckError as exc:
        assert_one_line(exc, path)


# --- the arguments of every subcommand -----------------------------------------------------------------

VALUES = [
    *["0", "-3", "1", "32", "10", "1e400", "nan", "inf", "-inf", "", " ", "x", "9" * 5000, "a" * 300],
    *["/", "/proc/1/x", "/dev/null", "/dev/null/x", ".", "..", "{suite}", "[/]"],
    *["sim/fair", "sim/judge", "openai/x", "opneai/gpt-4o-mini", "nosuchsuite"],
    *["diff_bias_amb:+0.02", "acc_dis:-1e308%", "x:", "1/1", "inf/1", "-1/2", "temperature=3", "seed=1", "max_tokens=0", "top_p=nan"],
    *["http://127.0.0.1:9/v1", "kobbq", "bbq", "mlflow", "wandb", "{suite}-{nope}"],
]
# Each subcommand's options, and how many positional arguments it may be given.
COMMANDS = {
    ("diff",): (["--compare-fail", "--report", "--suite", "--data", "--on-inconclusive"], ["--allow-fingerprint-mismatch", "--fail-inconclusive"], 2),
    ("compare",): (["--out"], [], 3),
    ("log",): (["--to", "--experiment", "--run-name"], [], 2),
    ("history",): (["--baselines", "--out"], [], 1),
    ("suites",): (["--data", "--model", "--api-base", "--param", "--price", "--judge-price", "--cache"], [], 1),
    ("init",): ([], ["--force"], 2),
    ("store", "merge"): ([], [], 3),
    ("run",): (
        ["--model", "--data", "--cache", "--report", "--baseline", "--param", "--compare-fail", "--concurrency", "--shard"],
        ["--update-baseline", "--dry-run"],
        2,
    ),
    ("judge", "export"): (["--run", "--n", "--out", "--seed", "--data", "--benchmark"], [], 1),
    ("judge", "fit"): (["--out", "--benchmark"], [], 1),
    ("qualify-judge",): (
        ["--suite", "--benchmark", "--cases", "--seed", "--min-accuracy", "--max-abs-diff-bias", "--param", "--api-base", "--data", "--cache"]
        + ["--concurrency", "--json"],
        [],
        1,
    ),
}
# Commands that serve until stopped when their arguments are right: only in a subprocess.
SERVERS = {
    ("serve-local",): (["--port", "--model-file", "--n-ctx", "--startup-timeout", "--log"], [], 0),
    ("sim", "serve"): (["--suite", "--data", "--port", "--persona"], [], 0),
}


@st.composite
def argvs(draw, commands: dict, files: list[str]) -> list[str]:
    command = draw(st.sampled_from(sorted(commands)))
    valued, flags, positionals = commands[command]
    values = st.sampled_from(VALUES + files)
    argv = [*command, *draw(st.lists(values, min_size=1 if command == ("suites",) else 0, max_size=positionals))]
    for _ in range(draw(st.integers(0, 4))):
        option = draw(st.sampled_from(valued + flags + ["--help", "--nope"]))
        argv += [option] if option in flags or option.startswith("--h") else [option, draw(values)]
    if draw(st.booleans()):
        argv = draw(st.permutations(argv))
    return argv


def run_main(argv: list[str]) -> tuple[int, str, str]:
    """``biascheck ARGV`` in this process: (exit code, stdout, stderr); argparse's exits included."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exit:  # argparse: --help, or its usage error
            code = exit.code if isinstance(exit.code, int) else 2
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def files(tmp_path: Path) -> list[str]:
    """Files and folders the arguments may name: a store, garbage, a folder, a missing path."""
    from biascheck.execution.store import ResponseStore

    with ResponseStore(tmp_path / "store.sqlite"):
        pass
    (tmp_path / "garbage").write_bytes(b"\x00\xffnot a store, not JSON" * 50)
    (tmp_path / "folder").mkdir()
    return [str(tmp_path / name) for name in ("store.sqlite", "garbage", "folder", "missing", "folder/new.json")]


@FAST
@given(data=st.data())
def test_fuzzed_command_arguments_give_a_result_or_one_line(tmp_path, files, monkeypatch, data):
    # In this process, so without the benchmark data: a run that would be long stops at its data.
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("BIASCHECK_DATA_DIR", raising=False)
    monkeypatch.setenv("BIASCHECK_OFFLINE", "1")  # a suite named by the fuzzer is refused at its data, not downloaded
    monkeypatch.setenv("BIASCHECK_CACHE_DIR", str(tmp_path / "cache"))
    argv = data.draw(argvs(COMMANDS, files))
    code, _, err = run_main(argv)
    assert "Traceback" not in err, (argv, err)
    if code not in (0, 1) and "usage:" not in err:  # argparse's usage errors are its own
        assert_one_line(err, "biascheck: ")


def _command(argv: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "biascheck.cli", *argv], capture_output=True, text=True, cwd=cwd, timeout=timeout)


@pytest.mark.slow
@settings(MANY, max_examples=150)
@given(data=st.data())
def test_fuzzed_commands_in_a_subprocess_end_or_serve(tmp_path, files, data_dir, data):
    """Every subcommand with the benchmark data, the servers included: a command ends within its
    deadline with a result or one line, or it is a server that said where it serves."""
    argv = data.draw(argvs({**COMMANDS, **SERVERS}, [*files, str(data_dir), str(SUITES / "kobbq-quick")]))
    process = subprocess.Popen(
        [sys.executable, "-m", "biascheck.cli", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
        env={**os.environ, "BIASCHECK_CACHE_DIR": str(tmp_path / "cache")},
    )  # fmt: skip
    try:
        out, err = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        assert argv[0] in ("sim", "serve-local", "qualify-judge") and ("serving" in out + err or argv[0] == "qualify-judge"), (argv, out, err)
        return
    assert "Traceback" not in err, (argv, err)
    if process.returncode not in (0, 1) and "usage:" not in err:
        assert_one_line(err.strip().splitlines()[-1] if err.strip() else err, "biascheck")


# --- pytest's options and ini keys ---------------------------------------------------------------


@st.composite
def plugin_settings(draw) -> tuple[list[str], str]:
    """(command-line arguments, ini file text) of a run, each option given a hostile value."""
    from biascheck.options import FLAGS, OPTIONS

    values = st.sampled_from(VALUES)
    args, ini = ["--biascheck", "--biascheck-model", draw(st.sampled_from(["sim/fair", "sim/fair?p=2", "openai/x", ""]))], ""
    for _ in range(draw(st.integers(0, 5))):
        option, key, *_ = draw(st.sampled_from(OPTIONS))
        if draw(st.booleans()):
            args.append(f"{option}={draw(values)}")
        else:
            ini += f"{key} = {draw(values)}\n"
    args += draw(st.lists(st.sampled_from([flag for flag, *_ in FLAGS] + ["--biascheck-param", "--biascheck-compare-fail"]), max_size=2))
    if args[-1] in ("--biascheck-param", "--biascheck-compare-fail"):
        args[-1] += f"={draw(values)}"
    return args, ini


@settings(FAST, max_examples=examples(20))  # pytest parses a command line in about 0.1 s
@given(given_settings=plugin_settings())
def test_fuzzed_plugin_options_configure_a_run_or_are_one_line(pytester, given_settings):
    from biascheck import options

    args, ini = given_settings
    pytester.makeini("[pytest]\n" + ini.replace("%", "%%"))
    try:
        config = pytester.parseconfig(*args)
    except pytest.UsageError:  # a value argparse takes for an option ("-inf"): pytest's usage error
        return
    try:
        options.run_config(config)
        options.baseline_options(config)
    except BiascheckError as exc:
        assert_one_line(exc)


@FAST
@given(
    labels=st.lists(
        st.dictionaries(st.sampled_from(["case_id", "label", "label_2", "adjudicated", "judge", "prompt", "language"]), _SAMPLE_CELLS), max_size=6
    ),
    key=st.lists(st.dictionaries(st.sampled_from(["case_id", "judge_answer", "x"]), _SAMPLE_CELLS), max_size=6),
)
def test_a_fuzzed_key_file_joins_or_is_one_line(tmp_path, labels, key):
    """Issue 36 §3: the judge's answers come from the export's key file, joined on case_id; any
    key file, and any labelled rows beside it, fit or are refused in one line."""
    from biascheck.benchmarks.bbg.judge_calibration import fit_calibration

    path, key_path = tmp_path / "labelled.jsonl", tmp_path / "labelled.jsonl.key.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in labels), "utf-8")
    key_path.write_text(with_huge("".join(json.dumps(row) + "\n" for row in key)), "utf-8")
    try:
        fit_calibration(path, key=key_path)
    except BiascheckError as exc:
        assert_one_line(exc, path if str(exc).startswith(str(path) + ":") else key_path)
