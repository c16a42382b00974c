"""Report and baseline files survive a kill at any instant: no leftover temp file, no report folder
mixing two runs, and a run stopped by a fatal model error still leaves the report saying why."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from biascheck.core import files
from biascheck.core.errors import BiascheckError
from biascheck.evaluation import baseline as baselines
from biascheck.records.run import RunRecord
from biascheck.reporting import results as report
from biascheck.reporting import write as writer
from biascheck.reporting.write import write_reports

from loopback import loopback_server, send_json

HOUR_AGO = time.time() - 3600
REPO = Path(__file__).resolve().parent.parent


def run_record(name: str = "kobbq", cases: int = 1, marker: str = "") -> RunRecord:
    """:func:`results_document`'s record, as write_reports takes it."""
    return RunRecord.from_json(results_document(name, cases, marker))


def results_document(name: str = "kobbq", cases: int = 1, marker: str = "") -> dict:
    """A small valid results.json document; ``marker`` tells two runs' documents apart."""
    overall = {"acc_amb": {"value": 0.5, "ci": [0.4, 0.6], "n": 10}, "diff_bias_amb": {"value": 0.01, "ci": [0.0, 0.02], "n": 10}}
    document = {
        "schema": "biascheck.results/1",
        "tool": {"name": "biascheck", "version": "0.1.0"},
        "created_at": "2026-01-01T00:00:00+00:00",
        "suite": {
            "name": name,
            "benchmark": "kobbq",
            "description": f"run {marker}",
            "fingerprint": {"suite": "f00d", "data": "d1", "prompts": "p1", "subset": "s1", "metrics_version": 1},
            "prompts": ["1"],
            "skipped_categories": {},
            "cases_total": 34200,
            "thresholds": {"diff_bias_amb": {"max_abs": 0.05}},
            "regression": {"rules": [], "alpha": 0.05},
        },
        "model": {"model": "sim/fair", "api_base": None, "params": {"temperature": 0}},
        "run": {
            "cases": cases,
            "calls": cases,
            "cache_hits": 0,
            "retries": 0,
            "errors": 0,
            "cost_usd": 0.0,
            "unpriced_calls": 0,
            "complete": True,
            "incomplete_reason": None,
        },
        "metrics": {"metrics": list(overall), "overall": overall, "by_category": {}, "by_label": {}, "by_prompt": {}, "prompt_summary": {}},
        "verdicts": [
            {
                "metric": "diff_bias_amb",
                "scope": "overall",
                "value": 0.01,
                "ci": [0.0, 0.02],
                "n": 10,
                "threshold": {"max_abs": 0.05},
                "passed": True,
                "note": None,
            }
        ],
        "passed": True,
        "cases": [
            {
                "case_id": f"age-{i:05d}[p1-o0]",
                "sample_id": f"age-{i:05d}",
                "category": "age",
                "cluster": f"age-{i:05d}",
                "prompt_id": "1",
                "context_type": "amb",
                "choices": ["A", "B", "C"],
                "raw": "C",
                "answer": "C",
                "outcome": "unknown",
                "error": None,
            }
            for i in range(cases)
        ],
    }
    report.validate_results(document)
    return document


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (hidden ones too), by relative path."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def hidden_siblings(folder: Path) -> list[str]:
    """Staging folders and previous sets moved aside, left beside ``folder``."""
    return sorted(p.name for p in folder.parent.iterdir() if p.name.startswith(f".{folder.name}.") and p.suffix in (".staging", ".old"))


def assert_one_run(folder: Path) -> dict:
    """The folder is one run's whole set: its marker names exactly the files there, with their digests."""
    marker = json.loads((folder / files.RUN_MARKER).read_text("utf-8"))
    written = {name: data for name, data in snapshot(folder).items() if name != files.RUN_MARKER}
    assert sorted(written) == sorted(marker["files"])
    for name, data in written.items():
        assert marker["files"][name] == "sha256:" + hashlib.sha256(data).hexdigest(), name
    return marker


def run_child(script: str, *args: str) -> subprocess.Popen:
    """A Python child running ``script``; returns once it printed "stalled" (it then sleeps until killed)."""
    child = subprocess.Popen([sys.executable, "-c", script, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    line = child.stdout.readline()
    if line.strip() != "stalled":
        child.kill()
        pytest.fail(f"the child never stalled: {line!r} {child.communicate()[1][-2000:]}")
    return child


def kill(child: subprocess.Popen) -> None:
    child.send_signal(signal.SIGKILL)
    child.communicate(timeout=30)  # waits, and closes its pipes


# --- 1. leftover temp files --------------------------------------------------------------------

# Stalls inside atomic_write_text after the data is written, before the rename: where a SIGKILL
# leaves a hidden temp file.
STALL_IN_WRITE = """
import os, sys, time
from pathlib import Path
from biascheck.core import files

def stall(fd):
    print("stalled", flush=True)
    time.sleep(600)

os.fsync = stall
files.atomic_write_text(Path(sys.argv[1]), "x" * 100_000)
"""


def test_a_baseline_write_removes_leftover_temp_files_and_nothing_else(tmp_path):
    folder = tmp_path / "baselines" / "kobbq"
    folder.mkdir(parents=True)
    leftovers = [folder / ".sim-fair.json.k3j2h1g0.tmp", folder / ".openai-gpt-4o.json.a_b9x7yq.tmp"]
    unrelated = [
        folder / ".gitkeep",
        folder / ".sim-fair.json.tmp",
        folder / ".notes.ABCDEFGH.tmp",
        folder / "sim-fair.json.k3j2h1g0.tmp",
        folder / ".sim-fair.json.k3j2h1g0.tmp.bak",
        folder / ".editor.json.k3j2h1g0.swp",
    ]
    for path in leftovers + unrelated:
        path.write_text("" if path in leftovers else "keep me")
        os.utime(path, (HOUR_AGO, HOUR_AGO))

    files.atomic_write_text(folder / "sim-fair.json", baselines.document_text({"schema": "x", "n": 1}))  # as baselines.write writes

    assert json.loads((folder / "sim-fair.json").read_text())["n"] == 1
    assert [p.name for p in leftovers if p.exists()] == []
    assert all(p.read_text() == "keep me" for p in unrelated)


def test_a_killed_write_leaves_a_temp_file_that_the_next_write_removes_but_a_live_one_stays(tmp_path):
    folder = tmp_path / "baselines"
    folder.mkdir()
    child = run_child(STALL_IN_WRITE, str(folder / "stalled.json"))
    try:
        (temp,) = [p for p in folder.iterdir() if p.name.startswith(".stalled.json.")]
        os.utime(temp, (HOUR_AGO, HOUR_AGO))  # old, but its writer is alive: its lock says so
        files.atomic_write_text(folder / "other.json", baselines.document_text({"n": 1}))
        assert temp.exists(), "a temp file another live process is writing was removed"
    finally:
        kill(child)
    assert temp.exists()  # what SIGKILL leaves behind

    files.atomic_write_text(folder / "other.json", baselines.document_text({"n": 2}))

    assert sorted(p.name for p in folder.iterdir()) == ["other.json"]


def test_a_report_write_removes_a_dead_staging_folder_but_not_a_live_one(tmp_path):
    folder = tmp_path / "report"
    write_reports([run_record()], folder)
    dead = tmp_path / ".report.deadbeef.staging"
    live = tmp_path / ".report.0a1b2c3d.staging"
    for staging in (dead, live):
        staging.mkdir()
        (staging / "results.json").write_text("{}")
    unrelated = [tmp_path / ".report-notes", tmp_path / ".report.txt", tmp_path / ".other.deadbeef.staging"]
    for path in unrelated:
        path.mkdir()
    # An old-style leftover inside the report folder (biascheck once wrote there directly).
    (folder / ".results.json.x1y2z3w4.tmp").write_text("")
    handle = os.open(live, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)  # a live run is filling it
        write_reports([run_record(marker="2")], folder)
        assert live.exists() and not dead.exists()
    finally:
        os.close(handle)

    write_reports([run_record(marker="3")], folder)

    assert not live.exists() and all(p.exists() for p in unrelated)
    assert hidden_siblings(folder) == []
    assert_one_run(folder)


# --- 2. a folder never mixes two runs ----------------------------------------------------------


def test_a_failure_while_rendering_leaves_the_previous_set_whole(tmp_path, monkeypatch):
    folder = tmp_path / "report"
    write_reports([run_record(cases=3, marker="old")], folder)
    before = snapshot(folder)

    def broken(document, comparison):
        raise RuntimeError("killed while rendering")

    monkeypatch.setattr(writer, "render_markdown", broken)
    with pytest.raises(RuntimeError):
        write_reports([run_record(cases=5, marker="new")], folder)

    assert snapshot(folder) == before
    assert hidden_siblings(folder) == []


def test_a_failed_rename_in_the_middle_leaves_the_previous_set_whole(tmp_path, monkeypatch):
    folder = tmp_path / "report"
    write_reports([run_record(cases=3, marker="old")], folder)
    before = snapshot(folder)
    calls = []
    real_rename, real_replace = os.rename, os.replace

    def second_fails(real):
        def rename(src, dst, *args, **kwargs):
            calls.append((src, dst))
            if len(calls) == 2:
                raise OSError(28, "No space left on device")
            return real(src, dst, *args, **kwargs)

        return rename

    monkeypatch.setattr(os, "rename", second_fails(real_rename))
    monkeypatch.setattr(os, "replace", second_fails(real_replace))
    with pytest.raises(OSError):
        write_reports([run_record(cases=5, marker="new")], folder)

    assert snapshot(folder) == before


# Stalls at the second rename (or replace) of a report write: the instant between files (the old
# way) or between moving the previous set aside and moving the new one in.
STALL_IN_SWAP = """
import json, os, sys, time
from pathlib import Path
from biascheck.core import files
from biascheck.records.run import RunRecord
from biascheck.reporting.write import write_reports

calls = []

def stalling(real):
    def rename(src, dst, *args, **kwargs):
        calls.append(dst)
        if len(calls) == 2:
            print("stalled", flush=True)
            time.sleep(600)
        return real(src, dst, *args, **kwargs)
    return rename

os.rename, os.replace = stalling(os.rename), stalling(os.replace)
write_reports([RunRecord.from_json(json.loads(Path(sys.argv[2]).read_text("utf-8")))], Path(sys.argv[1]))
"""


def test_a_kill_in_the_middle_of_a_report_write_never_leaves_a_mix_and_the_next_start_recovers(tmp_path, monkeypatch):
    folder = tmp_path / "report"
    write_reports([run_record(cases=3, marker="old")], folder)
    before = snapshot(folder)
    new = tmp_path / "new.json"
    new.write_text(json.dumps(results_document(cases=5, marker="new")), "utf-8")

    kill(run_child(STALL_IN_SWAP, str(folder), str(new)))

    # Wholly the old run, or no folder at all (the old set moved aside), never a mix.
    assert not folder.exists() or snapshot(folder) == before
    # The next start puts the old set back, even when its own write then fails.
    monkeypatch.setattr(writer, "render_markdown", lambda document, comparison: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        write_reports([run_record(cases=7, marker="failed")], folder)
    assert snapshot(folder) == before
    assert hidden_siblings(folder) == []
    monkeypatch.undo()

    write_reports([run_record(cases=9, marker="next")], folder)
    assert len(json.loads((folder / "results.json").read_text("utf-8"))["cases"]) == 9
    assert_one_run(folder)
    assert hidden_siblings(folder) == []


def test_several_suites_are_swapped_in_together(tmp_path, monkeypatch):
    folder = tmp_path / "report"
    write_reports([run_record("kobbq", 3, "old"), run_record("bbq", 3, "old")], folder)
    before = snapshot(folder)
    assert {"kobbq/results.json", "bbq/report.md"} <= set(before)
    real = report.render_markdown
    monkeypatch.setattr(writer, "render_markdown", lambda run, comparison: 1 / 0 if run.suite.name == "bbq" else real(run, comparison))

    with pytest.raises(ZeroDivisionError):
        write_reports([run_record("kobbq", 5, "new"), run_record("bbq", 5, "new")], folder)

    assert snapshot(folder) == before
    marker = assert_one_run(folder)
    assert {"kobbq/results.json", "bbq/report.md"} <= set(marker["files"])


def test_a_run_marker_names_every_file_of_the_run_and_stale_files_of_the_last_run_go(tmp_path):
    folder = tmp_path / "report"
    write_reports([run_record("kobbq", marker="1"), run_record("bbq", marker="1")], folder)
    one = assert_one_run(folder)

    written = write_reports([run_record(marker="2")], folder)

    two = assert_one_run(folder)
    assert one["run_id"] != two["run_id"]
    # The last run's suite subfolders are gone: the folder is this run's set only.
    assert sorted(snapshot(folder)) == sorted(["results.json", "report.md", "report.html", files.RUN_MARKER])
    assert [p.name for p in written][:3] == ["results.json", "report.md", "report.html"]
    assert all(p.parent == folder for p in written)


def test_files_biascheck_did_not_write_are_kept_and_a_foreign_folder_is_refused(tmp_path):
    folder = tmp_path / "report"
    write_reports([run_record(marker="1")], folder)
    (folder / "junit.xml").write_text("<testsuites/>")  # e.g. --junitxml=report/junit.xml
    (folder / ".gitkeep").write_text("")

    write_reports([run_record(marker="2")], folder)

    assert (folder / "junit.xml").read_text() == "<testsuites/>" and (folder / ".gitkeep").exists()
    assert "run 2" in (folder / "results.json").read_text("utf-8")
    (folder / "notes").mkdir()
    (folder / "notes" / "todo.txt").write_text("mine")
    before = snapshot(folder)

    with pytest.raises(BiascheckError) as error:
        write_reports([run_record(marker="3")], folder)

    message = str(error.value)
    assert "notes" in message and str(folder) in message and len(message.splitlines()) == 1
    assert snapshot(folder) == before and hidden_siblings(folder) == []


def test_the_working_folder_is_never_swapped(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(BiascheckError) as error:
        write_reports([run_record()], Path("."))
    assert "working folder" in str(error.value)
    assert list(tmp_path.iterdir()) == []


# --- the same for `biascheck diff --report`, and 3. a fatal model error -----------------------


def test_diff_report_is_written_whole_or_not_at_all(run_biascheck, tiny_kobbq, tmp_path, monkeypatch):
    from biascheck.cli import main
    from biascheck.reporting import write as html_report  # the module that renders the files

    base = tmp_path / "base.json"
    made = run_biascheck(tiny_kobbq, "sim/fair", "--biascheck-update-baseline", "--biascheck-baseline", str(base))
    assert made.ret == 0 and base.is_file(), made.output[-3000:]
    diff = tmp_path / "diff"
    assert main(["diff", str(base), str(made.report_dir), "--report", str(diff)]) == 0
    marker = assert_one_run(diff)
    assert {"comparison.json", "comparison.md", "report.html", "results.json"} <= set(marker["files"])
    before = snapshot(diff)

    def broken(*args, **kwargs):
        raise RuntimeError("killed while rendering the page")

    monkeypatch.setattr(html_report, "render_html", broken)
    with pytest.raises(RuntimeError):
        main(["diff", str(base), str(made.report_dir), "--report", str(diff), "--compare-fail", "acc_amb:-50%"])

    assert snapshot(diff) == before


def test_a_fatal_model_error_still_writes_the_report_that_says_why(run_biascheck, tiny_kobbq, monkeypatch):
    def unauthorized(handler, n, body):
        send_json(
            handler,
            401,
            {
                "error": {
                    "message": "Incorrect API key provided: sk-dummy.",
                    "type": "invalid_request_error",
                    "param": None,
                    "code": "invalid_api_key",
                }
            },
        )

    monkeypatch.setenv("OPENAI_API_KEY", "sk-dummy")
    with loopback_server(unauthorized) as (api_base, arrivals):
        run = run_biascheck(tiny_kobbq, "openai/x", "--biascheck-api-base", api_base, "--biascheck-concurrency", "2")

    assert run.ret == 4, run.output[-3000:]
    assert arrivals and "Traceback" not in run.output
    results = run.results()
    reason = results["run"]["incomplete_reason"]
    assert results["run"]["complete"] is False and not results["passed"]
    assert reason.startswith("fatal model error: ") and "AuthenticationError" in reason
    # The same one line as the usage error, and the report says it too.
    assert f"ERROR: openai/x: {reason}" in run.output
    assert "INCOMPLETE: fatal model error" in (run.report_dir / "report.md").read_text("utf-8")
    assert_one_run(run.report_dir)
