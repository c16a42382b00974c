"""Shared fixtures. Tests that need the real benchmark files read them from the mirror named by
``BIASCHECK_DATA_DIR``; without it they skip, unless ``BIASCHECK_REQUIRE_DATA=1`` (set by .ci/run),
which turns that skip into a failure so CI can never pass by skipping."""

from __future__ import annotations

import atexit
import contextlib
import io
import json
import os
import re
import subprocess
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy  # noqa: F401
import pytest
from hypothesis import settings
from property_examples import examples

# The property tests that set no count of examples try examples(100) of them (property_examples.py);
# conftest is imported before the test modules, whose settings inherit this profile.
settings.register_profile("biascheck", max_examples=examples(100))
settings.load_profile("biascheck")

# numpy is imported here, once, before any test: pytester restores sys.modules after each test that
# uses it, and a C extension first imported inside such a test could then never be imported again
# in that worker ("cannot load module more than once per process").

ROOT = Path(__file__).resolve().parent.parent
SUITES = ROOT / "suites"

# Test runs never touch the network or a user's .env, and litellm never fetches its price map.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_MODE", "PRODUCTION")
os.environ["BIASCHECK_OFFLINE"] = "1"


def pytest_configure(config: pytest.Config) -> None:
    """What every test process imports before its first test (not xdist's controller, which runs no
    test: litellm's import alone is 2 s to 4.5 s of CPU, before the workers start).

    litellm, once per test process, before any in-process pytest run: pytester removes the modules
    a run imported when it ends, and litellm's import adds an importlib_metadata finder to
    sys.meta_path that would then outlive its module and hide every installed distribution (pytest's
    own plugin entry points included) from the next run. Runs in a subprocess import it themselves.

    BBG's benchmark too: get_benchmark keeps the benchmark object an in-process run loaded, and had
    that run imported its modules, pytester would remove them, so that a later import made another
    MRCQuestion class than the one of the kept benchmark's cases (isinstance on a case's truth fails)."""
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        return
    import litellm  # noqa: F401

    import biascheck.benchmarks.bbg.benchmark  # noqa: F401


# The files whose tests start servers or processes, several seconds each, run first. xdist's
# worksteal gives each worker half of the collection, in order, and an idle worker takes the end of
# the other's queue, so that a run ended on the long tests of the last files (the trackers' were
# last) with one worker busy and the other idle; now it ends on short tests either worker takes.
RUN_FIRST = (
    "test_trackers.py",
    "test_interrupts.py",
    "test_plugin_baselines.py",
    "test_plugin.py",
    "test_packaged_suites.py",
    "test_fast_path.py",
    "test_calibration.py",
    "test_call_deadlines.py",
)
assert all((Path(__file__).parent / name).is_file() for name in RUN_FIRST), "RUN_FIRST names a file tests/ no longer has"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: position for position, name in enumerate(RUN_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: each file keeps its order


# One simulated server per test process (each xdist worker), in a thread of it, for every in-process
# run of a sim/ model (pytester's in-process runs, the CLI's and the API's main called here): a run
# otherwise starts `python -m biascheck.sim serve`, which imports biascheck and loads the suites
# again (about half a second of CPU and a second of waiting, some hundreds of times). Each run still
# gets a simulator of its own: a fresh SimApp (its attempt counters, faults and batches start from
# nothing, as a new process's do) knowing exactly the suites the run names, loaded as the simulator's
# process loads them (a suite of the same files loaded once); only the thread and the listening
# socket are shared. Runs in a subprocess (runpytest_subprocess, `python -m biascheck.cli`) start
# the simulator's process as users' runs do, and so does a suite the simulator could not load (its
# process says why, as it would).
# BIASCHECK_TEST_SIM=process gives every run its own process again.
import biascheck.sim.provider as _sim_provider  # noqa: E402


class SharedSimulator:
    def __init__(self) -> None:
        self._server: Any = None
        self._suites: dict[tuple, Any] = {}

    def _started(self) -> Any:
        if self._server is None:
            from biascheck.sim.knowledge import SimKnowledge
            from biascheck.sim.server import SimServer

            self._server = SimServer(SimKnowledge.from_cases([])).start()
            atexit.register(self._server.close)
        return self._server

    def _loaded(self, folder: Path, data: Path | None, allow_unpinned: bool, load_suite: Any) -> Any:
        """The suite in ``folder``, loaded once for each content of its folder (manifest, data files,
        pack) and mirror: the tests' small suites repeat across tests, each in a folder of its own.
        (A data file the manifest names outside the folder is pinned by its checksum.)"""
        import hashlib

        if allow_unpinned:  # files the manifest pins by no checksum may lie outside the folder, and change
            return load_suite(folder, data_dir=data, allow_unpinned=True)
        files = tuple(sorted((str(p.relative_to(folder)), hashlib.sha256(p.read_bytes()).hexdigest()) for p in folder.rglob("*") if p.is_file()))
        key = (files, str(data), allow_unpinned)
        if key not in self._suites:
            self._suites[key] = load_suite(folder, data_dir=data, allow_unpinned=allow_unpinned)
        return self._suites[key]

    @contextlib.contextmanager
    def serve(self, suite_dirs: Iterable[Path | str], data_dir: Path | str | None, *, allow_unpinned: bool = False) -> Iterator[str]:
        from biascheck.sim.knowledge import SimKnowledge
        from biascheck.sim.server import SimApp
        from biascheck.suite import load_suite

        suite_dirs = list(suite_dirs)
        data = Path(data_dir) if data_dir is not None else None
        try:
            suites = [self._loaded(Path(folder), data, allow_unpinned, load_suite) for folder in suite_dirs]
        except Exception:
            suites = None
        if suites is None:
            with _SPAWNED_SERVE(suite_dirs, data_dir, allow_unpinned=allow_unpinned) as url:
                yield url
            return
        server = self._started()
        app = SimApp(SimKnowledge.from_suites(suites))
        server.app = server._http.app = app
        try:
            yield server.base_url
        finally:
            # Nothing of this run's simulator answers the next run (a request still in flight is refused).
            server.app = server._http.app = SimApp(SimKnowledge.from_cases([]))


_SPAWNED_SERVE = _sim_provider.serve
if os.environ.get("BIASCHECK_TEST_SIM") != "process":
    _sim_provider.serve = SharedSimulator().serve  # type: ignore[assignment]


def _import_what_a_run_imports(folder: Path) -> None:
    """Every biascheck module, then, with the data mirror, one small KoBBQ run per answer mode for
    the modules a run imports on its way (litellm's and openai's lazy ones, at the first call)."""
    import importlib
    import pkgutil

    import hypothesis.internal.observability  # noqa: F401  (its pytest plugin imports it at each run's end)

    # Imported at a run's first use, and so again by every in-process run that uses them: httpx's
    # transport (httpcore), and the anthropic SDK (its batch tests) where the extra is installed.
    for name in ("httpcore", "anthropic"):
        with contextlib.suppress(ImportError):
            importlib.import_module(name)

    import biascheck
    from biascheck import ModelConfig, RunConfig, load_suite, run

    for module in pkgutil.walk_packages(biascheck.__path__, "biascheck."):
        if not module.name.endswith("__main__"):
            with contextlib.suppress(ImportError):  # an optional extra's module (serve-local: llama_cpp)
                importlib.import_module(module.name)
    mirror = os.environ.get("BIASCHECK_DATA_DIR")
    if not mirror or not Path(mirror).is_dir():
        return
    suite = load_suite(write_subset_suite(folder / "kobbq", subset='templates_per_category = 1\ncategories = ["age"]'), data_dir=Path(mirror))
    for mode in ("generate", "loglikelihood", "first-token"):
        run(
            [(suite, suite.cases[:3])],
            RunConfig(model=ModelConfig("sim/fair"), store_path=folder / f"{mode}.sqlite", data_dir=Path(mirror), estimator=mode),
        )


@pytest.fixture(scope="session")
def _modules_a_run_imports(tmp_path_factory: pytest.TempPathFactory) -> None:
    _import_what_a_run_imports(tmp_path_factory.mktemp("warm-up"))


@pytest.fixture
def pytester(_modules_a_run_imports: None, pytester: pytest.Pytester) -> pytest.Pytester:
    """pytester, once this process has imported what a run imports. An in-process run's imports
    are removed when it ends (pytester restores sys.modules), so that each run imported them again:
    some 630 modules, openai's SDK most of them, about a second of CPU a run."""
    return pytester


def biascheck_command(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``biascheck ARGS`` in ``cwd`` with the environment ``env`` (else this one), its output and exit
    status captured as a subprocess's would be: in this process, through the main the console script
    calls (a process of its own costs about a second of CPU a command). A test of what only a
    process shows (a signal, a warning at exit) starts one."""
    from biascheck.cli import main

    out, err = io.StringIO(), io.StringIO()
    saved = dict(os.environ)
    try:
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        with contextlib.chdir(cwd or Path.cwd()), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as exit:
                code = exit.code if isinstance(exit.code, int) else 1
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return subprocess.CompletedProcess(["biascheck", *args], code, out.getvalue(), err.getvalue())


def mirror_or_skip() -> Path:
    value = os.environ.get("BIASCHECK_DATA_DIR")
    if not value:
        message = "needs the benchmark data mirror: set BIASCHECK_DATA_DIR (e.g. ../shared/datasets)"
        if os.environ.get("BIASCHECK_REQUIRE_DATA") == "1":
            pytest.fail(message + " (BIASCHECK_REQUIRE_DATA=1 forbids skipping)")
        pytest.skip(message)
    path = Path(value).resolve()
    if not path.is_dir():
        pytest.fail(f"BIASCHECK_DATA_DIR={value} is not a folder")
    return path


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return mirror_or_skip()


@pytest.fixture(params=["fast", pytest.param("litellm", marks=pytest.mark.slow)])
def http_client(request: pytest.FixtureRequest) -> str:
    """--biascheck-http-client: a test that takes it runs through both paths (execution/fast_http.py).
    Through litellm under ``-m slow``: the default run has the fast path, which every simulated
    run takes, and tests/test_fast_path.py, which holds the two paths to the same rows and errors."""
    return request.param


def write_subset_suite(
    folder: Path, base: str = "kobbq", *, subset: str = "", prompts: str | None = None, thresholds: str | None = None, extra: str = ""
) -> Path:
    """A copy of a real manifest with its [subset] (and optionally [prompts]/[thresholds]) replaced."""
    text = (SUITES / base / "suite.toml").read_text("utf-8")
    text = re.sub(r"\n\[subset\]\n(?:[^\[\n][^\n]*\n|\n)*", "\n", text)
    if prompts is not None:
        text = re.sub(r"\n\[prompts\]\n(?:[^\[\n][^\n]*\n|\n)*", "\n", text)
        text += "\n[prompts]\n" + prompts + "\n"
    if thresholds is not None:
        text = re.sub(r"\n\[thresholds\]\n(?:[^\[\n][^\n]*\n|\n)*", "\n", text)
        text += "\n[thresholds]\n" + thresholds + "\n"
    text += "\n[subset]\n" + subset + "\n" + extra
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "suite.toml").write_text(text, "utf-8")
    return folder


@pytest.fixture
def small_kobbq(tmp_path: Path, data_dir: Path) -> Path:
    """KoBBQ with 2 templates per category, prompts 1 and 3, all three choice orders (~1,000 cases)."""
    return write_subset_suite(
        tmp_path / "kobbq-small",
        subset='templates_per_category = 2\nseed = 7\nchoice_orders = "cyclic"',
        prompts='from_data = "prompts"\nuse = ["1", "3"]',
    )


@pytest.fixture
def tiny_kobbq(tmp_path: Path, data_dir: Path) -> Path:
    """KoBBQ with 1 template per category, prompt 1, the original choice order (~100 cases): for
    tests of the plugin's semantics, where the cost of a run should be its start-up alone."""
    return write_subset_suite(
        tmp_path / "kobbq-tiny",
        subset='templates_per_category = 1\nseed = 7\nchoice_orders = "original"',
        prompts='from_data = "prompts"\nuse = ["1"]',
    )


@pytest.fixture
def tiny_kobbq_p3(tmp_path: Path, data_dir: Path) -> Path:
    """tiny_kobbq's twin asking prompt 3, under its own name (kobbq-p3): the second suite of a run of two."""
    folder = write_subset_suite(
        tmp_path / "kobbq-tiny-3",
        subset='templates_per_category = 1\nseed = 7\nchoice_orders = "original"',
        prompts='from_data = "prompts"\nuse = ["3"]',
    )
    manifest = folder / "suite.toml"
    manifest.write_text(manifest.read_text("utf-8").replace('name = "kobbq"', 'name = "kobbq-p3"', 1), "utf-8")
    return folder


class BiascheckRun:
    """One ``pytest --biascheck`` run (in-process: see the litellm import above), with its results.json loaded."""

    def __init__(self, result: pytest.RunResult, report_dir: Path):
        self.result = result
        self.report_dir = report_dir

    @property
    def ret(self) -> int:
        return int(self.result.ret)

    @property
    def output(self) -> str:
        return self.result.stdout.str() + "\n" + self.result.stderr.str()

    @property
    def failures(self) -> str:
        """The failed items' messages, as junit and GitHub's annotations read them (the terminal
        prints a failed check once, in biascheck's summary, not in FAILURES)."""
        return "\n".join(report.longreprtext for report in self.result.reprec.getfailures())

    def results(self) -> dict:
        return json.loads((self.report_dir / "results.json").read_text("utf-8"))


@pytest.fixture
def run_biascheck(pytester: pytest.Pytester, tmp_path: Path, data_dir: Path):
    store = tmp_path / "store.sqlite"

    def run(
        suite: Path | str, model: str, *args: str, store_path: Path = store, report: str = "report", plugins: Sequence[object] = ()
    ) -> BiascheckRun:
        report_dir = tmp_path / report
        # pytest lists every folder from its confcutdir (here the rootdir) down to the suite's, and
        # the rootdir of a run in pytester's folder of a suite in tmp_path is their common parent:
        # the worker's base temp folder, a folder for each test so far (some 1,500 by the end),
        # listed again at every run. The suite's parent as the confcutdir lists only that folder.
        confcutdir = ["--confcutdir", str(Path(suite).parent)] if Path(suite).is_absolute() else []
        result = pytester.runpytest_inprocess(
            *confcutdir,
            "--biascheck",
            str(suite),
            "--biascheck-model",
            model,
            "--biascheck-data",
            str(data_dir),
            "--biascheck-cache",
            str(store_path),
            "--biascheck-report",
            str(report_dir),
            "-p",
            "no:cacheprovider",
            "-q",
            *args,
            plugins=list(plugins),
        )
        return BiascheckRun(result, report_dir)

    return run
