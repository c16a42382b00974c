"""Suites that ship with the package: the wheel's contents, naming a packaged suite
(``--biascheck-suite``, a bare name), ``biascheck suites``, ``biascheck init``, the dry run, and the
Python API example of docs/api.md run as written."""

from __future__ import annotations

import importlib
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_examples import examples

from biascheck.config.catalog import looks_like_a_name, packaged_suite, packaged_suites
from biascheck.core.errors import BiascheckError

from conftest import ROOT, SUITES, biascheck_command, write_subset_suite

NAMES = sorted(path.name for path in SUITES.iterdir() if (path / "suite.toml").is_file())


def cli(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return biascheck_command(*args, cwd=cwd, env=env)


def table_rows(text: str) -> dict[str, list[str]]:
    """The rows of a printed table by their first cell (columns: two spaces or more apart)."""
    rows = {}
    for line in text.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if len(cells) >= 4 and not line.startswith(" "):
            rows.setdefault(cells[0], cells)
    return rows


def number(cell: str) -> int:
    return int(cell.lstrip("~≤").replace(",", ""))


# --- packaging ---------------------------------------------------------------------------------


def test_pyproject_names_every_subpackage_and_ships_the_suites():
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]["setuptools"]
    subpackages = {".".join(path.parent.relative_to(ROOT).parts) for path in (ROOT / "biascheck").rglob("__init__.py")}
    # An explicit list (a mapped folder is invisible to packages.find): a new subpackage must be added.
    assert set(setuptools["packages"]) == subpackages | {"biascheck.suites"}
    assert setuptools["package-dir"] == {"biascheck.suites": "suites"}
    assert setuptools["package-data"]["biascheck.suites"] == ["*/suite.toml", "counts.json"]  # counts: biascheck/listing.py
    assert not list(SUITES.rglob("*.py")), "suites/ is package data only: a module there would be collected and shipped"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel pip builds from a copy of the sources (so no build/ is left in the repository)."""
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    for folder in ("biascheck", "suites"):
        shutil.copytree(ROOT / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-cache-dir", "-q", "-w", str(out), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (built,) = out.glob("pytest_biascheck-*.whl")
    return built


def test_the_wheel_holds_every_suite_and_their_counts_byte_for_byte(wheel):
    with zipfile.ZipFile(wheel) as archive:
        shipped = {name: archive.read(name) for name in archive.namelist() if name.startswith("biascheck/suites/")}
    manifests = {f"biascheck/suites/{name}/suite.toml": (SUITES / name / "suite.toml").read_bytes() for name in NAMES}
    assert shipped == manifests | {"biascheck/suites/counts.json": (SUITES / "counts.json").read_bytes()}


def test_the_wheel_holds_the_report_style_sheet(wheel):
    # report.html inlines it from the package: a wheel without it writes no report at all.
    with zipfile.ZipFile(wheel) as archive:
        assert archive.read("biascheck/reporting/report.css") == (ROOT / "biascheck" / "reporting" / "report.css").read_bytes()


def test_the_wheel_holds_the_language_packs_and_their_schema(wheel):
    # The answer parser reads its languages from them: a wheel without them reads no reply.
    packs = ROOT / "biascheck" / "benchmarks" / "packs"
    with zipfile.ZipFile(wheel) as archive:
        shipped = {name: archive.read(name) for name in archive.namelist() if name.startswith("biascheck/benchmarks/packs/")}
        schema = archive.read("biascheck/schemas/language-pack.schema.json")
    assert shipped == {f"biascheck/benchmarks/packs/{path.name}": path.read_bytes() for path in packs.glob("*.toml")}
    assert len(shipped) >= 6 and schema == (ROOT / "biascheck" / "schemas" / "language-pack.schema.json").read_bytes()


def test_an_installed_wheel_runs_a_packaged_suite_by_name(wheel, tmp_path, data_dir):
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    # The unpacked wheel first on the path: an installed (not editable) biascheck, run from elsewhere.
    env = {**os.environ, "PYTHONPATH": str(site), "BIASCHECK_DATA_DIR": str(data_dir)}
    work = tmp_path / "elsewhere"
    work.mkdir()
    script = (
        "import biascheck, biascheck.config.catalog as c\n"
        "print(biascheck.__file__)\nprint(c.packaged_suites_dir())\n"
        "print(len(biascheck.load_suite('enbbg-quick').cases))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=work, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    module, folder, cases = done.stdout.split()
    assert Path(module).is_relative_to(site) and Path(folder) == site / "biascheck" / "suites"
    assert int(cases) == 928
    collected = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--biascheck-suite",
            "enbbg-quick",
            "--biascheck-model",
            "sim/fair",
            "--biascheck-judge",
            "sim/fair",
            "--co",
            "-q",
        ],
        capture_output=True,
        text=True,
        cwd=work,
        env=env,
        timeout=120,
    )
    assert collected.returncode == 0, collected.stdout + collected.stderr
    cases = [line for line in collected.stdout.splitlines() if "::cases::" in line]
    assert len(cases) == 928 and all(line.startswith("biascheck/suites/enbbg-quick/suite.toml::") for line in cases)


# --- naming a packaged suite -------------------------------------------------------------------


def collected_cases(result: pytest.RunResult) -> list[str]:
    return [line for line in result.stdout.lines if "::cases::" in line]


def test_a_packaged_suite_runs_by_name_alone_and_a_local_folder_wins(pytester, data_dir, monkeypatch):
    pytester.makepyfile(test_user="def test_user():\n    assert False\n")
    # The data from BIASCHECK_DATA_DIR: a --biascheck-data path elsewhere would move pytest's rootdir, and the node ids.
    monkeypatch.setenv("BIASCHECK_DATA_DIR", str(data_dir))
    common = ["--biascheck-model", "sim/fair", "--biascheck-judge", "sim/fair", "-p", "no:cacheprovider", "--co", "-q"]
    named = pytester.runpytest_inprocess("--biascheck-suite", "enbbg-quick", *common)
    assert named.ret == 0, named.stdout.str() + named.stderr.str()
    assert "test_user" not in named.stdout.str()  # given alone, the named suite is all that is collected
    cases = collected_cases(named)
    assert len(cases) == 928 and all(line.startswith("biascheck/suites/enbbg-quick/suite.toml::") for line in cases)
    bare = pytester.runpytest_inprocess("--biascheck", "enbbg-quick", *common)
    assert collected_cases(bare) == cases
    # A folder of that name where pytest runs is a path, and a path always wins.
    write_subset_suite(
        pytester.path / "enbbg-quick",
        "kobbq",
        subset='templates_per_category = 1\nseed = 7\nchoice_orders = "original"',
        prompts='from_data = "prompts"\nuse = ["1"]',
    )
    local = pytester.runpytest_inprocess("--biascheck", "enbbg-quick", *common)
    assert collected_cases(local) and all(line.startswith("enbbg-quick/suite.toml::") for line in collected_cases(local))


def test_an_unknown_suite_name_is_one_line_naming_the_known_ones(pytester):
    for args, needle in (
        (["--biascheck-suite", "enbbg-quik"], "--biascheck-suite: 'enbbg-quik' is not a packaged suite; did you mean enbbg-quick?"),
        (["--biascheck", "kobbqq"], "kobbqq: no such file or folder, nor a packaged suite; did you mean kobbq?"),
    ):
        result = pytester.runpytest_inprocess(*args, "--biascheck-model", "sim/fair")
        text = result.stdout.str() + result.stderr.str()
        assert result.ret == pytest.ExitCode.USAGE_ERROR, text
        (line,) = [line for line in text.splitlines() if line.startswith("ERROR:")]
        assert needle in line and all(name in line for name in NAMES)
        assert "Traceback" not in text


@settings(max_examples=examples(200), deadline=None)
@given(st.text(max_size=20) | st.sampled_from(NAMES))
def test_a_name_resolves_to_its_packaged_suite_or_to_one_line_listing_them(name):
    try:
        folder = packaged_suite(name)
    except BiascheckError as exc:
        assert name not in NAMES
        assert "\n" not in str(exc) and all(known in str(exc) for known in NAMES)
    else:
        assert name in NAMES and folder == packaged_suites()[name] and (folder / "suite.toml").is_file()


@given(st.text(max_size=10), st.sampled_from(["/", "\\", ".", "::"]), st.text(max_size=10))
def test_a_path_a_node_id_or_a_file_name_is_never_taken_for_a_suite_name(head, mark, tail):
    assert not looks_like_a_name(head + mark + tail)


# --- the dry run ---------------------------------------------------------------------------------


def test_the_dry_run_predicts_the_calls_of_the_run_and_calls_nothing(pytester, tiny_kobbq, data_dir, tmp_path):
    from biascheck import ModelConfig, RunConfig, load_suite, run
    from biascheck.dryrun import estimate

    store, report = tmp_path / "store.sqlite", tmp_path / "report"
    dry = pytester.runpytest_inprocess(
        "--biascheck",
        str(tiny_kobbq),
        "--biascheck-model",
        "sim/fair",
        "--biascheck-data",
        str(data_dir),
        "--biascheck-cache",
        str(store),
        "--biascheck-report",
        str(report),
        "-p",
        "no:cacheprovider",
        "--biascheck-dry-run",
    )
    assert dry.ret == 0, dry.stdout.str() + dry.stderr.str()
    assert "biascheck dry run: no model call made" in dry.stdout.str() and "no tests ran" in dry.stdout.str()
    assert not store.exists() and not report.exists()  # no call, no store, no report
    row = table_rows(dry.stdout.str())["kobbq"]
    assert row[1] == "sim/fair" and row[-1] == "0.00"
    predicted = number(row[3])
    suite = load_suite(tiny_kobbq, data_dir=data_dir)
    config = RunConfig(model=ModelConfig("sim/fair"), store_path=store, data_dir=data_dir)
    assert run([(suite, suite.cases)], config).stats.calls == predicted == len(suite.cases)
    (again,) = estimate([(suite, suite.cases)], config, store=store)
    assert (again.calls, again.shares[0].stored) == (0, predicted)  # every answer is stored now


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from biascheck.suite import load_suite

    from conftest import mirror_or_skip

    folder = write_subset_suite(
        tmp_path_factory.mktemp("tiny") / "kobbq-tiny",
        subset='templates_per_category = 1\nseed = 7\nchoice_orders = "original"',
        prompts='from_data = "prompts"\nuse = ["1"]',
    )
    return load_suite(folder, data_dir=mirror_or_skip())


def priced(suite, model: str, price=None, **options):
    from biascheck.dryrun import estimate, render
    from biascheck.execution.llm import ModelConfig
    from biascheck.session import RunConfig

    config = RunConfig(model=ModelConfig(model, price=price), store_path=Path("unused.sqlite"), batch=options.pop("batch", None))
    (share,) = estimate([(suite, suite.cases)], config, **options)[0].shares
    return share, render(estimate([(suite, suite.cases)], config, **options))


def test_the_dry_run_prices_with_litellm_or_the_given_price(tiny, monkeypatch):
    from biascheck.execution.batches import BatchOptions
    from biascheck.execution.llm import Price, import_litellm

    # The module priced() uses: pytester may have re-imported it since `biascheck.dryrun` was first bound.
    dryrun = importlib.import_module("biascheck.dryrun")

    litellm = import_litellm()
    exact = sum(litellm.token_counter(model="hosted_vllm/my-model", messages=case.messages_as_dicts()) for case in tiny.cases)
    share, text = priced(tiny, "hosted_vllm/my-model")
    assert share.usd is None and "unknown" in text.splitlines()[1]
    assert "kobbq: cost unknown: pass --biascheck-price IN/OUT (USD per million tokens)" in text
    share, text = priced(tiny, "hosted_vllm/my-model", Price(1000, 2000))
    assert (share.prompt_tokens, share.output_tokens) == (exact, len(tiny.cases) * 30)  # the suite's max_tokens bounds each reply
    assert share.usd == pytest.approx(exact * 1e-3 + len(tiny.cases) * 30 * 2e-3)
    share, _ = priced(tiny, "openai/gpt-4o-mini")  # litellm's price map
    rates = litellm.model_cost["gpt-4o-mini"]
    assert share.usd == pytest.approx(share.prompt_tokens * rates["input_cost_per_token"] + share.output_tokens * rates["output_cost_per_token"])
    # --biascheck-batch: litellm's batch prices, and half a given price; the table says which rate.
    batched, text = priced(tiny, "openai/gpt-4o-mini", batch=BatchOptions())
    assert batched.usd == pytest.approx(
        share.prompt_tokens * rates["input_cost_per_token_batches"] + share.output_tokens * rates["output_cost_per_token_batches"]
    )
    assert batched.usd == pytest.approx(share.usd / 2) and "USD at the provider's batch rate" in text
    assert priced(tiny, "hosted_vllm/my-model", Price(1000, 2000), batch=BatchOptions())[0].usd == pytest.approx(
        exact * 0.5e-3 + len(tiny.cases) * 30 * 1e-3
    )
    assert priced(tiny, "sim/fair")[0].usd == 0.0
    # Over TOKEN_SAMPLE prompts, a seeded sample is counted and scaled, and the table says so.
    monkeypatch.setattr(dryrun, "TOKEN_SAMPLE", 40)
    share, text = priced(tiny, "hosted_vllm/my-model", Price(1000, 2000))
    assert share.sampled and share.prompt_tokens == pytest.approx(exact, rel=0.1) and "~" in text.splitlines()[1]
    assert "~ prompt tokens: estimated from a seeded sample of 40 prompts" in text


def test_the_dry_run_under_xdist_runs_in_one_process_or_is_refused(pytester, tiny_kobbq, data_dir, monkeypatch):
    monkeypatch.setenv("BIASCHECK_DATA_DIR", str(data_dir))
    args = ["--biascheck", str(tiny_kobbq), "--biascheck-model", "sim/fair", "--biascheck-dry-run", "-n", "2", "-p", "no:cacheprovider"]
    alone = pytester.runpytest_subprocess(*args)  # suites alone run in one process anyway (plugin: _run_suites_in_one_process)
    assert alone.ret == 0 and "kobbq" in table_rows(alone.stdout.str()), alone.stdout.str() + alone.stderr.str()
    pytester.makepyfile(test_other="def test_other():\n    pass\n")
    mixed = pytester.runpytest_subprocess(*args, "test_other.py")
    assert mixed.ret == pytest.ExitCode.USAGE_ERROR
    assert "ERROR: --biascheck-dry-run: cannot be combined with -n (pytest-xdist); drop -n" in mixed.stderr.str()


@pytest.fixture(scope="module")
def bbg_and_bbq(tmp_path_factory):
    from biascheck.suite import load_suite

    from conftest import mirror_or_skip

    data = mirror_or_skip()
    # BBG: the two questions of a story share its generation; BBQ: some items repeat a prompt; HBB:
    # k samples of one prompt are k requests.
    return [load_suite(SUITES / name, data_dir=data) for name in ("enbbg-quick", "bbq", "hbb")]


def run_config(store: Path | None = None):
    from biascheck.execution.llm import ModelConfig
    from biascheck.judging.panel import JudgeOptions
    from biascheck.session import RunConfig

    return RunConfig(model=ModelConfig("sim/fair"), store_path=store or Path("unused.sqlite"), judges=JudgeOptions(models=("sim/fair",)))


@settings(max_examples=examples(15), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_the_dry_run_counts_distinct_requests_exactly_as_the_run_keys_them(bbg_and_bbq, tmp_path, data):
    from biascheck.dryrun import estimate
    from biascheck.execution.planning import plan_requests
    from biascheck.execution.store import ResponseStore
    from biascheck.session import effective_params

    suite = data.draw(st.sampled_from(bbg_and_bbq))
    cases = data.draw(st.lists(st.sampled_from(suite.cases), max_size=300))
    config = run_config()
    estimator = suite.benchmark.estimator(suite.manifest, None)
    keys, _ = plan_requests(suite.benchmark.requests, cases, config.model, effective_params(suite, config.model), estimator)
    store = tmp_path / "empty.sqlite"
    ResponseStore(store).close()
    for store_path in (None, store):  # without a store: the cheap identity; with one: store keys
        (counted,) = estimate([(suite, cases)], config, store=store_path, price=False)
        assert counted.shares[0].calls == len({key for case_keys in keys for key in case_keys})


def test_the_dry_run_judges_stored_stories_exactly_and_the_rest_at_most(bbg_and_bbq, tmp_path):
    from biascheck.dryrun import estimate
    from biascheck.execution.planning import plan_requests
    from biascheck.execution.store import ResponseStore, StoredResponse
    from biascheck.session import effective_params

    suite = bbg_and_bbq[0]
    config = run_config(tmp_path / "store.sqlite")
    cases = suite.cases[:40]
    keys, _ = plan_requests(suite.benchmark.requests, cases, config.model, effective_params(suite, config.model), None)
    # A story for the first case's generation, an empty one for the last case's; the rest not generated.
    stories = {keys[0][0]: "A long story about them.", keys[-1][0]: "   "}
    with ResponseStore(config.store_path) as store:
        for key, text in stories.items():
            store.put(key, "sim/fair", {}, StoredResponse(text, "stop", {}, 0.0))
    (counted,) = estimate([(suite, cases)], config, store=config.store_path, price=False)
    generation, judge = counted.shares
    generations = {key for case_keys in keys for key in case_keys}
    assert (generation.calls, generation.stored) == (len(generations) - 2, 2)
    sharing = [i for i, case_keys in enumerate(keys) if case_keys[0] in stories]
    story, empty = [i for i in sharing if keys[i][0] == keys[0][0]], [i for i in sharing if keys[i][0] == keys[-1][0]]
    # A stored story is read once per question about it; an empty one is not read; the rest may be.
    assert judge.calls == len(story) + (len(cases) - len(story) - len(empty))
    assert judge.uncertain == len(cases) - len(story) - len(empty)


# --- the command line --------------------------------------------------------------------------


def test_suites_lists_cases_and_calls_and_says_why_without_data(tiny_kobbq, data_dir, tmp_path):
    from biascheck.suite import load_suite

    listed = cli("suites", "enbbg-quick", "kobbq-quick", "bbq-quick", str(tiny_kobbq), "--data", str(data_dir), cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    rows = table_rows(listed.stdout)
    tiny = len(load_suite(tiny_kobbq, data_dir=data_dir).cases)
    assert rows[str(tiny_kobbq)][1:] == ["local", "kobbq", f"{tiny:,}", f"{tiny:,}"]
    assert rows["enbbg-quick"][1:] == ["packaged", "bbg", "928", "463 + ≤928 judge"]
    # The pull-request suites: a few templates per category, one prompt; bbq-quick's six categories all in the mirror.
    assert rows["kobbq-quick"][1:] == ["packaged", "kobbq", "1,464", "1,464"]
    assert rows["bbq-quick"][1:] == ["packaged", "bbq", "1,068", "1,068"]
    assert "bbq-quick:" not in listed.stdout  # no line about missing data
    env = {key: value for key, value in os.environ.items() if key != "BIASCHECK_DATA_DIR"}
    env["BIASCHECK_CACHE_DIR"] = str(tmp_path / "empty-cache")
    missing = cli("suites", str(tiny_kobbq), cwd=tmp_path, env=env)
    assert missing.returncode == 0, missing.stderr
    assert table_rows(missing.stdout)[str(tiny_kobbq)][3:] == ["-", "-"]
    (why,) = [line for line in missing.stdout.splitlines() if "no counts" in line]
    assert "kobbq/KoBBQ_test_samples.tsv is neither in a mirror (none given) nor in the download cache; pass --data DIR" in why


def test_suites_lists_every_packaged_suite_and_the_local_ones(tmp_path):
    (tmp_path / "suites" / "mine").mkdir(parents=True)
    shutil.copy2(SUITES / "kobbq" / "suite.toml", tmp_path / "suites" / "mine" / "suite.toml")
    env = {key: value for key, value in os.environ.items() if key != "BIASCHECK_DATA_DIR"}
    env["BIASCHECK_CACHE_DIR"] = str(tmp_path / "empty-cache")  # no data: a fast listing without counts
    listed = cli("suites", cwd=tmp_path, env=env)
    assert listed.returncode == 0, listed.stderr
    rows = table_rows(listed.stdout)
    assert {name: rows[name][1] for name in NAMES} == {name: "packaged" for name in NAMES}
    assert rows["suites/mine"][1:3] == ["local", "kobbq"]
    unknown = cli("suites", "kobbqq", cwd=tmp_path)
    assert unknown.returncode == 2 and unknown.stderr.startswith("biascheck: suites: 'kobbqq' is not a packaged suite; did you mean kobbq?")


def test_suites_with_a_model_prices_each_suite(tiny_kobbq, data_dir, tmp_path):
    done = cli("suites", str(tiny_kobbq), "--data", str(data_dir), "--model", "hosted_vllm/my-model", "--price", "1000/2000", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    row = table_rows(done.stdout)[str(tiny_kobbq)]
    assert row[1] == "hosted_vllm/my-model" and number(row[6]) == number(row[3]) * 30
    assert float(row[-1].replace(",", "")) == pytest.approx(number(row[5]) * 1e-3 + number(row[6]) * 2e-3, abs=0.006)


def test_init_copies_a_packaged_suite_and_refuses_to_overwrite_unless_forced(tmp_path):
    done = cli("init", "kobbq", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    copied = tmp_path / "suites" / "kobbq" / "suite.toml"
    assert copied.read_bytes() == (SUITES / "kobbq" / "suite.toml").read_bytes()
    assert "  pytest --biascheck suites/kobbq --biascheck-model MODEL" in done.stdout.splitlines()
    copied.write_text("changed", "utf-8")
    (copied.parent / "notes.md").write_text("mine", "utf-8")
    refused = cli("init", "kobbq", cwd=tmp_path)
    assert refused.returncode == 2
    assert refused.stderr == "biascheck: suites/kobbq: already exists; pass --force to write the suite over it, or give another DEST\n"
    assert copied.read_text("utf-8") == "changed"
    forced = cli("init", "kobbq", "--force", cwd=tmp_path)
    assert forced.returncode == 0 and copied.read_bytes() == (SUITES / "kobbq" / "suite.toml").read_bytes()
    assert (copied.parent / "notes.md").read_text("utf-8") == "mine"  # --force writes the suite over it, keeps the rest
    typo = cli("init", "kobbqq", cwd=tmp_path)
    assert typo.returncode == 2 and "did you mean kobbq?" in typo.stderr and "\n" not in typo.stderr.rstrip("\n")


def test_init_prints_a_command_that_runs_the_copy(tmp_path, data_dir, monkeypatch):
    monkeypatch.setenv("BIASCHECK_DATA_DIR", str(data_dir))
    done = cli("init", "kobbg-quick", "my-suite", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    # Its judge is qualified on ../kobbq, which is not beside the copy: said once, with the command that fixes it.
    assert "(biascheck init kobbq kobbq)" in done.stdout
    (command,) = [line.strip() for line in done.stdout.splitlines() if line.strip().startswith("pytest ")]
    argv = command.replace("MODEL", "sim/fair").split()[1:]
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", *argv, "--biascheck-judge", "sim/fair", "-p", "no:cacheprovider", "--co", "-q"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )  # data: BIASCHECK_DATA_DIR
    assert collected.returncode == 0, collected.stdout + collected.stderr
    assert sum(line.startswith("my-suite/suite.toml::cases::") for line in collected.stdout.splitlines()) == 1144


# --- the Python API page's example ------------------------------------------------------------------


def documented_example() -> str:
    text = (ROOT / "docs" / "api.md").read_text("utf-8")
    section = text.split("\n## Running suites\n", 1)[1].split("\n## ", 1)[0]
    (code,) = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    return code


def test_the_documented_python_example_runs_as_written(tiny_kobbq, data_dir, tmp_path, monkeypatch, capsys):
    code = documented_example()
    assert code.count('load_suite("kobbq")') == 1
    code = code.replace('load_suite("kobbq")', f"load_suite({str(tiny_kobbq)!r})")  # a tiny subset, the rest as written
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BIASCHECK_DATA_DIR", str(data_dir))
    first: dict = {}
    exec(compile(code, "docs/api.md", "exec"), first)
    printed = capsys.readouterr().out
    result, cases = first["result"], first["suite"].cases
    assert (tmp_path / ".biascheck" / "responses.sqlite").is_file()
    (suite_result,) = result.suites
    assert len(suite_result.outcomes) == len(cases) and result.stats.calls == len(cases)
    assert all(verdict.explain() in printed for verdict in suite_result.verdicts) and suite_result.verdicts
    assert printed.splitlines()[-1] == ("passed" if result.passed else f"failed {result.incomplete or ''}")
    second: dict = {}
    exec(compile(code, "docs/api.md", "exec"), second)
    assert (second["result"].stats.calls, second["result"].stats.cache_hits) == (0, len(cases))
