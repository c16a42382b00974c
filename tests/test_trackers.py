"""--biascheck-log and ``biascheck log`` (issue 39) against the real trackers: a real ``mlflow server``
(SQLite store, artifacts served from a local folder) on loopback, one for the test run (its xdist
workers share it), read back through ``mlflow.MlflowClient``; Weights & Biases offline, read back from its run folder (the
summary and config files, and the run's .wandb log through W&B's own reader). Without a tracker's
library these skip, except in CI (``CI=true`` or ``BIASCHECK_REQUIRE_DATA=1``), where they fail:
``[dev]`` installs both."""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from biascheck.loggers.names import LONGEST, escaped, metric_key

CANARY = "canary-5f0e1d2c3b4a-secret"
SECRETS = {"MLFLOW_TRACKING_TOKEN": CANARY, "MLFLOW_TRACKING_PASSWORD": CANARY + "-pw", "WANDB_API_KEY": CANARY + "-wandb"}


def needs(module: str) -> Any:
    """A tracker's library; its absence skips, but fails in CI (as the data mirror's does)."""
    try:
        return importlib.import_module(module)
    except ImportError:
        message = f"needs {module} (pip install -e '.[dev]' installs it)"
        if os.environ.get("BIASCHECK_REQUIRE_DATA") == "1" or os.environ.get("CI") == "true":
            pytest.fail(message + " (CI forbids skipping)")
        pytest.skip(message)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class MlflowServer:
    """``mlflow server`` on loopback with a SQLite store; :meth:`start` starts it, :meth:`stop` kills
    it (also one another process started: ``pid``)."""

    def __init__(self, folder: Path, *, port: int | None = None, pid: int | None = None) -> None:
        self.folder = folder
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.pid = pid
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        command = [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", f"sqlite:///{self.folder / 'mlflow.db'}"]
        command += ["--artifacts-destination", str(self.folder / "artifacts"), "--host", "127.0.0.1", "--port", str(self.port), "--workers", "1"]
        # No job runner (it would import MLflow's GenAI evaluation, and litellm with it): a tracking server.
        env = os.environ | {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        with (self.folder / "server.log").open("ab") as log:  # the server holds its own copy
            # Its own process group: `mlflow server` serves from a uvicorn child, which a kill must reach too.
            self.process = subprocess.Popen(command, stdout=log, stderr=log, stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        self.pid = self.process.pid
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError("mlflow server exited: " + (self.folder / "server.log").read_text(errors="replace")[-2000:])
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as answer:
                    if answer.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        raise AssertionError("mlflow server did not answer /health in 120 s")

    def stop(self) -> None:
        if self.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGKILL)  # its own process group (start_new_session)
        if self.process is not None:
            self.process.wait(30)


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory, worker_id):
    """One server for the test run, started by the first worker that needs it, stopped by the last
    to finish with it (its users are counted in a file, under a lock): a start is about 5 s of CPU
    in two processes. A test that takes the server down does so through a :class:`Gateway`."""
    import fcntl

    needs("mlflow")
    # The folder the xdist workers share (each one's base temp folder is inside it).
    shared = tmp_path_factory.getbasetemp() if worker_id == "master" else tmp_path_factory.getbasetemp().parent
    lock, state = shared / "mlflow.lock", shared / "mlflow.json"

    @contextlib.contextmanager
    def locked():
        with lock.open("a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            yield

    with locked():
        if state.is_file():
            known = json.loads(state.read_text("utf-8"))
            server = MlflowServer(Path(known["folder"]), port=known["port"], pid=known["pid"])
        else:
            (shared / "mlflow").mkdir()
            server = MlflowServer(shared / "mlflow")
            server.start()
            known = {"folder": str(server.folder), "port": server.port, "pid": server.pid, "users": 0}
        known["users"] += 1
        state.write_text(json.dumps(known), "utf-8")
    yield server
    with locked():
        known = json.loads(state.read_text("utf-8"))
        known["users"] -= 1
        if known["users"] == 0:
            server.stop()
            state.unlink()
        else:
            state.write_text(json.dumps(known), "utf-8")


class Gateway:
    """A TCP forwarder on loopback to a server: :meth:`stop` refuses connections and cuts the open
    ones, as a killed server does; :meth:`start` listens again on the same port. The tests that
    take the tracker down take down its gateway, never the server the other tests share."""

    def __init__(self, target_port: int) -> None:
        self.target = target_port
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._listener: socket.socket | None = None
        self._open: set[socket.socket] = set()
        self._guard = threading.Lock()

    def start(self) -> None:
        if self._listener is not None:
            return
        self._listener = socket.create_server(("127.0.0.1", self.port))  # SO_REUSEADDR: the same port again
        threading.Thread(target=self._accept, args=(self._listener,), daemon=True).start()

    def stop(self) -> None:
        if self._listener is not None:
            # shutdown first: a close alone leaves the socket listening while accept() waits on it.
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)
            self._listener.close()
            self._listener = None
        with self._guard:
            for connection in self._open:
                with contextlib.suppress(OSError):
                    connection.shutdown(socket.SHUT_RDWR)
                connection.close()
            self._open.clear()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:  # closed by stop
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target))
            except OSError:
                client.close()
                continue
            with self._guard:
                self._open |= {client, upstream}
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


class Tracking:
    def __init__(self, server: MlflowServer, experiment: str) -> None:
        import mlflow

        self.server, self.experiment = server, experiment
        self.client = mlflow.MlflowClient(tracking_uri=server.url)

    def runs(self) -> list:
        found = self.client.get_experiment_by_name(self.experiment)
        return self.client.search_runs([found.experiment_id], max_results=100) if found else []


@pytest.fixture
def tracking(mlflow_server, monkeypatch, tmp_path) -> Tracking:
    """This test's experiment on the shared server, W&B offline in this test's folder, and canary secrets."""
    experiment = f"exp-{tmp_path.name}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server.url)
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wandb-dir"))
    for name in ("WANDB_DATA_DIR", "WANDB_CACHE_DIR", "WANDB_CONFIG_DIR"):  # artifacts' staging, logs, settings: not the home folder's
        monkeypatch.setenv(name, str(tmp_path / "wandb-dir" / name.lower()))
    monkeypatch.setenv("WANDB_SILENT", "true")
    (tmp_path / "wandb-dir").mkdir()
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    return Tracking(mlflow_server, experiment)


def biascheck_lines(output: str, tracker: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith(f"biascheck: {tracker}: ")]


def expected_params(results: dict) -> dict[str, str]:
    """What results.json says of each param, read from the document (not through the loggers)."""
    model = results["model"]
    judges = [j["model"] for j in model.get("judges") or ([model["judge"]] if model.get("judge") else [])]
    return {
        "suite": results["suite"]["name"],
        "benchmark": results["suite"]["benchmark"],
        "suite_fingerprint": json.dumps(results["suite"]["fingerprint"], ensure_ascii=False, separators=(",", ":")),
        "model": model["model"],
        "revision": model.get("revision") or "",
        "answer_mode": results["run"].get("estimator") or "default",
        "judges": ", ".join(judges),
        "cases": str(results["run"]["cases"]),
        "biascheck_version": results["tool"]["version"],
    }


def expected_metrics(results: dict) -> dict[str, float]:
    """Every defined value and interval bound of results.json's metric tables, by its documented key."""
    values = {}
    tables = {"overall": {"overall": results["metrics"]["overall"]}}
    tables |= {group: results["metrics"][f"by_{group}"] for group in ("category", "label", "prompt")}
    for group, scopes in tables.items():
        for scope, metrics in scopes.items():
            for metric, value in metrics.items():
                for bound, number in ((None, value["value"]), ("ci_low", value["ci"][0]), ("ci_high", value["ci"][1])):
                    if number is not None:
                        values[metric_key(metric, group, scope, bound)] = number
    return values


def wandb_runs(wandb_dir: Path) -> list[Path]:
    return sorted((wandb_dir / "wandb").glob("offline-run-*"))


# W&B's run log (a run folder's .wandb file) as W&B writes it: a 7-byte header (":W&B", magic,
# version), then blocks of 32 KiB holding records, each a 7-byte header (CRC, length, type: full,
# first, middle, last) and a piece of a protobuf Record of W&B's own schema (wandb.proto). W&B 0.31
# ships no Python reader of it any more (its core, in Go, reads it for `wandb sync`), and an offline
# run writes no wandb-summary.json: the log is the run.
BLOCK, RECORD_HEADER = 32768, 7


def wandb_records(run: Path) -> list:
    import struct

    from wandb.proto import wandb_internal_pb2

    data = next(run.glob("*.wandb")).read_bytes()
    assert data[:4] == b":W&B", data[:7]
    records, position, pieces = [], 7, b""
    while position + RECORD_HEADER <= len(data):
        if BLOCK - position % BLOCK < RECORD_HEADER:  # the block's tail is padding
            position += BLOCK - position % BLOCK
            continue
        _, length, kind = struct.unpack("<IHB", data[position : position + RECORD_HEADER])
        piece = data[position + RECORD_HEADER : position + RECORD_HEADER + length]
        position += RECORD_HEADER + length
        pieces = piece if kind in (1, 2) else pieces + piece
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pieces)
            records.append(record)
    return records


class OfflineRun:
    """What an offline W&B run holds, read from its log: config, summary, history, group, artifact files."""

    def __init__(self, folder: Path) -> None:
        self.config: dict[str, Any] = {}
        self.summary: dict[str, Any] = {}
        self.history: dict[str, Any] = {}
        self.files: dict[str, str] = {}
        self.group = self.job_type = self.name = None
        for record in wandb_records(folder):
            kind = record.WhichOneof("record_type")
            if kind == "run":
                self.config |= {item.key: json.loads(item.value_json) for item in record.run.config.update if not item.key.startswith("_")}
                self.group, self.job_type, self.name = record.run.run_group, record.run.job_type, record.run.display_name
            elif kind == "summary":
                self.summary |= {"/".join(item.nested_key) or item.key: json.loads(item.value_json) for item in record.summary.update}
            elif kind == "history":
                self.history |= {"/".join(item.nested_key) or item.key: json.loads(item.value_json) for item in record.history.item}
            elif kind == "artifact":
                self.files |= {entry.path: entry.digest for entry in record.artifact.manifest.contents}


def md5_b64(path: Path) -> str:
    import base64
    import hashlib

    return base64.b64encode(hashlib.md5(path.read_bytes()).digest()).decode()


def no_canary_in(folder: Path) -> list[Path]:
    return [path for path in folder.rglob("*") if path.is_file() and any(v.encode() in path.read_bytes() for v in SECRETS.values())]


# --- the names ---------------------------------------------------------------------------------


def valid_mlflow_key(key: str) -> bool:
    """MLflow's own rule for a metric key (its characters; a path that normalizes to itself), and its length; ASCII."""
    from mlflow.utils.validation import path_not_unique, validate_param_and_metric_name

    return bool(validate_param_and_metric_name(key)) and not path_not_unique(key) and len(key) <= LONGEST and key.isascii()


@pytest.fixture(scope="module")
def mlflow_library():
    return needs("mlflow")


@given(a=st.text(max_size=300), b=st.text(max_size=300))
def test_any_two_category_names_map_to_distinct_valid_keys(mlflow_library, a, b):
    for bound in (None, "ci_low", "ci_high"):
        key_a, key_b = metric_key("diff_bias_amb", "category", a, bound), metric_key("diff_bias_amb", "category", b, bound)
        assert valid_mlflow_key(key_a) and valid_mlflow_key(key_b), (key_a, key_b)
        assert (key_a == key_b) == (a == b)
    # A value's key is never a bound's, nor the overall value's.
    assert metric_key("acc", "category", a) not in (metric_key("acc", "category", b, "ci_low"), metric_key("acc", "overall", "overall"))


def test_the_documented_examples_of_the_names():
    assert metric_key("diff_bias_amb", "overall", "overall") == "diff_bias_amb"
    assert metric_key("diff_bias_amb", "overall", "overall", "ci_low") == "diff_bias_amb/ci_low"
    assert metric_key("diff_bias_amb", "category", "age") == "diff_bias_amb/category/age"
    assert escaped("나이") == ".EB.82.98.EC.9D.B4" and escaped(" ") == ".20" and escaped("/") == ".2F" and escaped("") == "._"
    long = metric_key("m", "category", "x" * 400)
    assert len(long) == LONGEST and ".H" in long[-18:]


# --- options -----------------------------------------------------------------------------------


def test_a_bad_run_name_template_or_a_companion_without_a_tracker_is_one_line_before_collection(pytester, monkeypatch):
    from biascheck import options
    from biascheck.core.errors import BiascheckError

    needs("mlflow"), needs("wandb")
    config = pytester.parseconfig(
        "--biascheck", "--biascheck-model", "sim/fair", "--biascheck-log", "mlflow", "--biascheck-log-run-name", "{suite}-{nope}"
    )
    with pytest.raises(
        BiascheckError, match=r"^--biascheck-log-run-name: '\{suite\}-\{nope\}' has the field \{nope\}, which is not a run's; use the fields"
    ):
        options.log_options(config)
    with pytest.raises(BiascheckError, match=r"^--biascheck-log-required: only applies to a run that logs to a tracker; add --biascheck-log mlflow"):
        options.log_options(pytester.parseconfig("--biascheck", "--biascheck-model", "sim/fair", "--biascheck-log-required"))
    with pytest.raises(BiascheckError, match=r"^--biascheck-log: 'neptune' is not a tracker; use mlflow or wandb$"):
        options.log_options(pytester.parseconfig("--biascheck", "--biascheck-model", "sim/fair", "--biascheck-log", "neptune"))
    assert options.log_options(pytester.parseconfig("--biascheck", "--biascheck-model", "sim/fair")) is None
    # Several at once, from the environment (whitespace-separated) or the ini file (a line each).
    monkeypatch.setenv("BIASCHECK_LOG", "wandb mlflow")
    assert options.log_options(pytester.parseconfig("--biascheck", "--biascheck-model", "sim/fair")).trackers == ("wandb", "mlflow")
    monkeypatch.delenv("BIASCHECK_LOG")
    pytester.makeini("[pytest]\nbiascheck_log =\n    mlflow\n    wandb\nbiascheck_log_run_name = {suite}@{revision}\n")
    logged = options.log_options(pytester.parseconfig("--biascheck", "--biascheck-model", "sim/fair"))
    assert logged.trackers == ("mlflow", "wandb") and logged.run_name == "{suite}@{revision}" and not logged.required


def test_a_missing_extra_is_one_line_before_collection(pytester, monkeypatch, tiny_kobbq, data_dir, tmp_path):
    """The library made unimportable (None in sys.modules: both the import and its lookup fail)."""
    from biascheck.cli import main

    monkeypatch.setitem(sys.modules, "wandb", None)
    result = pytester.runpytest_inprocess("--biascheck", str(tiny_kobbq), "--biascheck-model", "sim/fair", "--biascheck-log", "wandb")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.strip()]
    assert errors == [
        "ERROR: --biascheck-log: logging to wandb needs its client library, which is not installed; pip install 'pytest-biascheck[wandb]'"
    ], result.stderr.str()
    assert "collected" not in result.stdout.str()
    monkeypatch.chdir(tmp_path)
    assert main(["run", str(tiny_kobbq), "--model", "sim/fair", "--data", str(data_dir), "--log", "wandb", "--cache", "s.sqlite"]) == 2
    assert not (tmp_path / "s.sqlite").exists()


def test_importing_biascheck_and_the_plugin_imports_no_tracker():
    code = (
        "import sys, biascheck, biascheck.pytest_plugin.hooks, biascheck.orchestration, biascheck.loggers, biascheck.loggers.tracked\n"
        "print(sorted(m for m in ('mlflow', 'wandb') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --- logging a run -------------------------------------------------------------------------------


def test_a_gated_run_reads_back_from_mlflow_and_wandb_equal_to_its_files(run_biascheck, tiny_kobbq, tracking, tmp_path):
    import mlflow

    import biascheck

    experiment, client = tracking.experiment, tracking.client
    recorded = run_biascheck(tiny_kobbq, "sim/fair", "--biascheck-update-baseline", "--biascheck-baseline", str(tmp_path / "base.json"))
    assert recorded.ret == 0, recorded.output
    args = ["--biascheck-baseline", str(tmp_path / "base.json"), "--biascheck-log", "mlflow", "--biascheck-log", "wandb"]
    args += ["--biascheck-log-experiment", experiment, "--biascheck-model-revision", "v1.2"]
    gated = run_biascheck(tiny_kobbq, "sim/fair", *args)
    assert gated.ret == 0, gated.output
    results = gated.results()
    comparison = json.loads((gated.report_dir / "comparison.json").read_text("utf-8"))

    # MLflow: one run, its params and metrics those of results.json, the gate's, and the files.
    (run,) = tracking.runs()
    assert run.info.run_name == "kobbq-sim/fair" and run.info.status == "FINISHED"
    assert run.data.params == expected_params(results)
    metrics = expected_metrics(results)
    regressed = sum(c["verdict"] == "regressed" and c.get("gated", True) for c in comparison["results"])
    inconclusive = sum(c["verdict"] == "inconclusive" and c.get("gated", True) for c in comparison["results"])
    gate = {"gate/passed": 1.0, "gate/thresholds_failed": 0.0, "gate/thresholds_inconclusive": 0.0}
    gate |= {"gate/regressed": float(regressed), "gate/inconclusive": float(inconclusive)}
    assert run.data.metrics == metrics | gate
    assert any(key.startswith("acc_amb/category/") for key in metrics) and "acc_amb/ci_low" in metrics
    assert run.data.tags["biascheck.passed"] == "true" and len(run.data.tags["biascheck.run_id"]) == 16
    assert sorted(a.path for a in client.list_artifacts(run.info.run_id)) == ["comparison.json", "report.html", "results.json"]
    for name in ("report.html", "results.json", "comparison.json"):
        downloaded = Path(client.download_artifacts(run.info.run_id, name, str(tmp_path / "down")))
        assert downloaded.read_bytes() == (gated.report_dir / name).read_bytes(), name
    assert [line for line in biascheck_lines(gated.output, "mlflow")] == [
        f"biascheck: mlflow: logged kobbq-sim/fair to experiment {experiment!r} at {os.environ['MLFLOW_TRACKING_URI']} (run {run.info.run_id})"
    ]

    # runs_df and an MLflow search: the same numbers for the same run.
    frame = biascheck.runs_df([gated.report_dir])
    searched = mlflow.search_runs(experiment_names=[experiment])
    assert len(searched) == 1
    for row in frame.itertuples():
        for bound, number in ((None, row.value), ("ci_low", row.ci_low), ("ci_high", row.ci_high)):
            if number is not None and number == number:
                assert searched[f"metrics.{metric_key(row.metric, row.group, row.scope, bound)}"].iloc[0] == number

    # W&B offline: one run whose summary (and history) holds the same metrics, whose config the same params.
    (offline,) = [OfflineRun(folder) for folder in wandb_runs(Path(os.environ["WANDB_DIR"]))]
    assert {key: offline.summary[key] for key in metrics | gate} == metrics | gate
    assert {key: offline.history[key] for key in metrics | gate} == metrics | gate
    assert {key: offline.config[key] for key in expected_params(results)} == expected_params(results)
    assert offline.config["biascheck_run_id"] == run.data.tags["biascheck.run_id"] and offline.name == "kobbq-sim/fair"
    assert offline.files == {name: md5_b64(gated.report_dir / name) for name in ("report.html", "results.json", "comparison.json")}

    # Neither library printed into the run's output: biascheck's lines say what was sent.
    assert [
        line for line in gated.output.splitlines() if ("wandb" in line.lower() or "mlflow" in line.lower()) and not line.startswith("biascheck: ")
    ] == []
    # No secret reached a file, the tracker's params and tags, or what it stores.
    for folder in (tmp_path, tracking.server.folder):
        assert no_canary_in(folder) == [], folder
    assert CANARY not in json.dumps([run.data.params, run.data.tags]) and CANARY not in gated.output


def test_a_run_of_two_suites_is_one_parent_and_a_child_each(run_biascheck, tiny_kobbq, tiny_kobbq_p3, tracking, capsys):
    from biascheck.cli import main

    args = [str(tiny_kobbq_p3), "--biascheck-log", "mlflow", "--biascheck-log", "wandb", "--biascheck-log-experiment", tracking.experiment]
    result = run_biascheck(tiny_kobbq, "sim/fair", *args, "--biascheck-log-run-name", "{suite} {model} {revision}")
    assert result.ret == 0, result.output
    runs = tracking.runs()
    parents = [r for r in runs if r.data.tags["biascheck.kind"] == "run"]
    children = sorted((r for r in runs if r.data.tags["biascheck.kind"] == "suite"), key=lambda r: r.data.params["suite"])
    assert len(parents) == 1 and [c.data.params["suite"] for c in children] == ["kobbq", "kobbq-p3"]
    (parent,) = parents
    assert all(c.data.tags["mlflow.parentRunId"] == parent.info.run_id for c in children)
    assert all(c.data.tags["biascheck.parent_run_id"] == parent.data.tags["biascheck.run_id"] for c in children)
    assert parent.data.params["suites"] == "kobbq, kobbq-p3" and parent.data.metrics["gate/passed"] == 1.0
    assert [c.info.run_name for c in children] == ["kobbq sim/fair ", "kobbq-p3 sim/fair "]
    for child in children:
        results = json.loads((result.report_dir / child.data.params["suite"] / "results.json").read_text("utf-8"))
        assert child.data.metrics == {**child.data.metrics, **expected_metrics(results)}
    assert sorted(a.path for a in tracking.client.list_artifacts(parent.info.run_id)) == ["index.html", "summary.md"]
    # W&B: the parent and each suite, in one group.
    offline = [OfflineRun(folder) for folder in wandb_runs(Path(os.environ["WANDB_DIR"]))]
    assert sorted(run.job_type for run in offline) == ["run", "suite", "suite"]
    assert len({run.group for run in offline}) == 1 and offline[0].group.endswith(parent.data.tags["biascheck.run_id"])
    # Sent again from the report folder (its suites by name): the parent is found, each child is there already.
    assert main(["log", str(result.report_dir), "--to", "mlflow", "--experiment", tracking.experiment]) == 0
    assert capsys.readouterr().err.count("is in experiment") == 2 and len(tracking.runs()) == 3


class KillServer:
    """A plugin of the pytest run: takes the MLflow server (its gateway) down once the model calls
    are made, mid-run."""

    def __init__(self, server: Gateway) -> None:
        self.server = server

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session):
        self.server.stop()


@pytest.fixture
def gateway(tracking, monkeypatch):
    """The tracking server as this test's runs reach it (MLFLOW_TRACKING_URI), to take down and up again."""
    gateway = Gateway(tracking.server.port)
    gateway.start()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", gateway.url)
    yield gateway
    gateway.stop()


def test_a_tracker_killed_mid_run_loses_nothing_and_biascheck_log_sends_it_once(run_biascheck, tiny_kobbq, tracking, gateway, capsys):
    from biascheck.cli import main

    args = ["--biascheck-log", "mlflow", "--biascheck-log-experiment", tracking.experiment]
    try:
        started = time.monotonic()
        down = run_biascheck(tiny_kobbq, "sim/fair", *args, plugins=[KillServer(gateway)])
        took = time.monotonic() - started
        assert down.ret == 0, down.output  # the gate's: sim/fair passes
        assert (down.report_dir / "results.json").is_file() and (down.report_dir / "report.html").is_file()
        (line,) = biascheck_lines(down.output, "mlflow")
        assert line.startswith(f"biascheck: mlflow: the run was not logged ({gateway.url}: connection refused); its files are written: ")
        assert line.endswith(f"send it later with `biascheck log {down.report_dir} --to mlflow` once mlflow is reachable"), line
        assert took < 60, took
        required = run_biascheck(tiny_kobbq, "sim/fair", *args, "--biascheck-log-required", report="report-required")
        assert required.ret == pytest.ExitCode.TESTS_FAILED, required.output
        assert len(biascheck_lines(required.output, "mlflow")) == 1
        capsys.readouterr()
        # biascheck log while the server is still down: one line, exit 1, nothing lost.
        assert main(["log", str(down.report_dir), "--to", "mlflow", "--experiment", tracking.experiment]) == 1
        (said,) = capsys.readouterr().err.splitlines()
        assert said.startswith(f"biascheck: mlflow: the run was not logged ({gateway.url}: connection refused)"), said
    finally:
        gateway.start()
    capsys.readouterr()
    report = str(down.report_dir)
    assert main(["log", report, "--to", "mlflow", "--experiment", tracking.experiment]) == 0
    (run,) = tracking.runs()
    assert run.data.params["suite"] == "kobbq" and run.info.status == "FINISHED"
    assert capsys.readouterr().err.startswith("biascheck: mlflow: logged kobbq-sim/fair")
    # Again: nothing is logged twice.
    assert main(["log", report + "/results.json", "--to", "mlflow", "--experiment", tracking.experiment]) == 0
    assert "is in experiment" in capsys.readouterr().err and len(tracking.runs()) == 1
    assert json.loads((down.report_dir / "results.json").read_text("utf-8"))["suite"]["name"] == "kobbq"


MINIMAL_RESULTS = {
    "schema": "biascheck.results/1",
    "tool": {"name": "biascheck", "version": "0.1.0"},
    "created_at": "2026-01-01T00:00:00+00:00",
    "suite": {"name": "own", "benchmark": "bbq", "fingerprint": {"data": "0"}, "prompts": ["1"], "skipped_categories": {}, "cases_total": 10}
    | {"thresholds": {}, "regression": {}},
    "model": {"model": "sim/fair", "params": {}},
    "run": {"cases": 10, "calls": 0, "cache_hits": 10, "retries": 0, "errors": 0, "cost_usd": 0.0, "complete": True},
    "metrics": {"overall": {}, "by_category": {}, "by_label": {}, "by_prompt": {}},
    "verdicts": [],
    "passed": True,
    "cases": [],
}


def test_any_category_name_is_a_key_mlflow_takes(tracking, tmp_path):
    """Names of users' own suites (Korean, Swahili, slashes, dots, empty, long) logged to the real server."""
    from biascheck import loggers
    from biascheck.records.run import Metrics, MetricValue, RunRecord

    names = ["나이", "umri wa mtu", "a/b", ".", "..", "", "x" * 300, "50%", "é"]
    values = tuple(MetricValue("acc_amb", name, "category", 0.5 + i / 100, (0.4, 0.6), 10) for i, name in enumerate(names))
    record = replace(RunRecord.from_json(MINIMAL_RESULTS), metrics=Metrics(values))
    options = loggers.LogOptions(("mlflow",), experiment=tracking.experiment)
    sent = loggers.send([record], {}, None, options, shown=None)
    assert [s.failed for s in sent] == [False], sent
    (run,) = tracking.runs()
    assert {key: value for key, value in run.data.metrics.items() if not key.startswith("gate/")} == {
        metric_key("acc_amb", "category", name, bound): number
        for i, name in enumerate(names)
        for bound, number in ((None, 0.5 + i / 100), ("ci_low", 0.4), ("ci_high", 0.6))
    }


def test_biascheck_run_logs_as_the_plugin_does(tiny_kobbq, data_dir, tracking, tmp_path, capsys, monkeypatch):
    from biascheck.cli import main

    monkeypatch.chdir(tmp_path)
    argv = ["run", str(tiny_kobbq), "--model", "sim/fair", "--data", str(data_dir), "--cache", "s.sqlite", "--report", "out"]
    assert main([*argv, "--log", "mlflow", "--log-experiment", tracking.experiment, "--log-run-name", "{benchmark}:{suite}"]) == 0
    (run,) = tracking.runs()
    assert run.info.run_name == "kobbq:kobbq" and run.data.params["suite"] == "kobbq"
    assert sorted(a.path for a in tracking.client.list_artifacts(run.info.run_id)) == ["report.html", "results.json"]
    assert "biascheck: mlflow: logged kobbq:kobbq to experiment" in capsys.readouterr().err
