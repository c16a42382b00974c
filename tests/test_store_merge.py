"""Merging response stores (``biascheck store merge``), as a sharded run's last job does: atomic,
idempotent, refusing stores of another schema, and treating two answers to one request as an error."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from test_store import LEGACY_SCHEMA

from biascheck.cli import main
from biascheck.core.errors import BiascheckError
from biascheck.execution.store import ResponseStore, StoredResponse, merge_stores


def answer(text: str, cost: float = 0.001) -> StoredResponse:
    return StoredResponse(text, "stop", {"prompt_tokens": 3, "completion_tokens": 1}, cost, {text: -0.1})


def store(path: Path, answers: dict[str, str], **kwargs) -> Path:
    with ResponseStore(path) as db:
        for key, text in answers.items():
            db.put(key, "openai/m", {"messages": [{"role": "user", "content": key}]}, answer(text, **kwargs))
    return path


def contents(path: Path) -> dict[str, str]:
    with ResponseStore(path) as db:
        return {key: stored.text for key, stored in db.get_many([f"k{i}" for i in range(100)]).items()}


def test_disjoint_stores_merge_into_one_and_a_second_merge_adds_nothing(tmp_path):
    first = store(tmp_path / "shard-1.sqlite", {"k1": "A", "k2": "B"})
    second = store(tmp_path / "shard-2.sqlite", {"k3": "C"})
    out = tmp_path / "merged.sqlite"
    result = merge_stores(out, [first, second])
    assert result.total == 3 and list(result.added.values()) == [2, 1] and list(result.present.values()) == [0, 0]
    assert contents(out) == {"k1": "A", "k2": "B", "k3": "C"}
    again = merge_stores(out, [first, second])
    assert again.total == 3 and list(again.added.values()) == [0, 0] and list(again.present.values()) == [2, 1]
    assert contents(out) == {"k1": "A", "k2": "B", "k3": "C"}
    assert not [p.name for p in tmp_path.iterdir() if "merging" in p.name or p.name.startswith("merged.sqlite-")]  # no temporary left


def test_an_existing_store_keeps_its_answers_and_the_same_answer_twice_is_no_conflict(tmp_path):
    out = store(tmp_path / "merged.sqlite", {"k1": "A"})
    # The same answer, asked again at another cost and time (a retried shard): not a conflict.
    shard = store(tmp_path / "shard.sqlite", {"k1": "A", "k2": "B"}, cost=0.002)
    result = merge_stores(out, [shard])
    assert result.added == {str(shard.resolve()): 1} and result.total == 2
    with ResponseStore(out) as db:
        assert db.get_many(["k1"])["k1"].cost_usd == 0.001  # the merged store's own row is kept


def test_different_answers_to_one_request_are_an_error_and_leave_the_output_as_it_was(tmp_path):
    first = store(tmp_path / "shard-1.sqlite", {"k1": "A", "k2": "B"})
    clash = store(tmp_path / "shard-2.sqlite", {"k3": "C", "k2": "C"})
    out = store(tmp_path / "merged.sqlite", {"k9": "Z"})
    before = out.read_bytes()
    with pytest.raises(BiascheckError) as error:
        merge_stores(out, [first, clash])
    message = str(error.value)
    assert message.startswith(f"{clash.resolve()}: holds answers that differ") and "\n" not in message
    assert out.read_bytes() == before  # the first input's answers were not half-merged
    assert contents(out) == {"k9": "Z"}


def test_stores_of_another_schema_or_no_store_are_refused_untouched(tmp_path):
    legacy = tmp_path / "legacy.sqlite"
    with sqlite3.connect(legacy) as db:
        db.executescript(LEGACY_SCHEMA.format(logprobs=""))
    other = tmp_path / "notes.sqlite"
    with sqlite3.connect(other) as db:
        db.executescript("CREATE TABLE notes (body TEXT)")
    text = tmp_path / "notes.txt"
    text.write_text("not a database", "utf-8")
    shard = store(tmp_path / "shard.sqlite", {"k1": "A"})
    for bad, problem in (
        (legacy, "store schema 1 (unmarked) is not this biascheck's"),
        (other, "not a biascheck response store"),
        (text, "not a usable response store"),
        (tmp_path / "missing.sqlite", "no such response store"),
    ):
        before = bad.read_bytes() if bad.exists() else None
        with pytest.raises(BiascheckError) as error:
            merge_stores(tmp_path / "merged.sqlite", [shard, bad])
        assert problem in str(error.value) and str(error.value).startswith(str(bad.resolve()))
        assert (bad.read_bytes() if bad.exists() else None) == before
        assert not (tmp_path / "merged.sqlite").exists()


def test_the_command_merges_and_says_what_it_did_or_fails_in_one_line(tmp_path, capsys):
    first = store(tmp_path / "a.sqlite", {"k1": "A"})
    second = store(tmp_path / "b.sqlite", {"k2": "B", "k1": "A"})
    assert main(["store", "merge", str(tmp_path / "all.sqlite"), str(first), str(second)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed == [
        f"{first.resolve()}: 1 answers added, 0 already there",
        f"{second.resolve()}: 1 answers added, 1 already there",
        f"{tmp_path / 'all.sqlite'}: 2 answers",
    ]
    clash = store(tmp_path / "c.sqlite", {"k2": "Z"})
    assert main(["store", "merge", str(tmp_path / "all.sqlite"), str(clash)]) == 2
    error = capsys.readouterr().err
    assert error.startswith("biascheck: ") and error.count("\n") == 1 and "differ" in error


def test_runs_of_two_halves_merged_answer_the_whole_run_without_a_call(tiny_kobbq, data_dir, tmp_path):
    """The halves of a suite run into two stores, merged: a whole run on the merged store makes no
    call and gives exactly the metrics and verdicts of a run that made every call itself."""
    from biascheck import ModelConfig, RunConfig, load_suite, run
    from biascheck.reporting.results import build_results

    suite = load_suite(tiny_kobbq, data_dir=data_dir)
    model = ModelConfig("sim/stereotyped?p=0.3&seed=4")
    halves = (suite.cases[::2], suite.cases[1::2])
    for index, half in enumerate(halves):
        run([(suite, half)], RunConfig(model=model, store_path=tmp_path / f"shard-{index}.sqlite", data_dir=data_dir))
    merge_stores(tmp_path / "merged.sqlite", [tmp_path / "shard-0.sqlite", tmp_path / "shard-1.sqlite"])
    merged = run([(suite, suite.cases)], RunConfig(model=model, store_path=tmp_path / "merged.sqlite", data_dir=data_dir))
    assert (merged.stats.calls, merged.stats.cache_hits) == (0, len(suite.cases))
    whole = run([(suite, suite.cases)], RunConfig(model=model, store_path=tmp_path / "whole.sqlite", data_dir=data_dir))
    assert whole.stats.calls == len(suite.cases)
    ((from_merged,), _), ((from_whole,), _) = build_results(merged), build_results(whole)
    assert from_merged.metrics == from_whole.metrics and from_merged.verdicts == from_whole.verdicts
    assert [c.outcome for c in from_merged.cases] == [c.outcome for c in from_whole.cases]


def test_the_batches_a_shard_submitted_go_with_its_answers(tmp_path):
    from biascheck.execution.store import BatchRecord

    shard = store(tmp_path / "shard.sqlite", {"k1": "A"})
    with ResponseStore(shard) as db:
        db.add_batch(BatchRecord("bc-1", "openai", "openai/m", "batch_1", ("k2", "k3"), "running", 1.0, 2.0))
    out = tmp_path / "merged.sqlite"
    merge_stores(out, [shard])
    merge_stores(out, [shard])  # idempotent for batches too
    with ResponseStore(out) as db:
        assert db.batches("openai/m") == [BatchRecord("bc-1", "openai", "openai/m", "batch_1", ("k2", "k3"), "running", 1.0, 2.0)]


# Issue 23: a merge into a store that a run holds; damaged inputs; a dead merger's files; stores of
# another version; folders that are not there.


def integrity(path: Path) -> str:
    with closing(sqlite3.connect(path)) as db:
        return db.execute("PRAGMA integrity_check").fetchone()[0]


def test_a_merge_into_a_store_a_run_holds_is_refused_in_one_line_and_the_run_loses_nothing(tmp_path):
    out = store(tmp_path / "R.sqlite", {"k1": "A"})
    shard = store(tmp_path / "shard.sqlite", {"k2": "B"})
    with ResponseStore(out) as run, run.exclusive():  # as a run holds its store while it calls
        inode = out.stat().st_ino
        with pytest.raises(BiascheckError) as error:
            merge_stores(out, [shard])
        message = str(error.value)
        assert message.startswith(f"{out}: in use by another biascheck process") and "\n" not in message, message
        assert out.stat().st_ino == inode
        run.put("k3", "openai/m", {"messages": []}, answer("C"))  # the run goes on
    assert contents(out) == {"k1": "A", "k3": "C"} and integrity(out) == "ok"
    merge_stores(out, [shard])  # once the run is done
    assert contents(out) == {"k1": "A", "k2": "B", "k3": "C"} and integrity(out) == "ok"


def test_a_merge_never_replaces_the_file_so_a_process_that_has_it_open_loses_nothing(tmp_path):
    """A run waiting for the store's lock, or a reader, has the file open: what it writes after the
    merge lands in the merged store, not in a file the merge replaced."""
    out = store(tmp_path / "R.sqlite", {"k1": "A"})
    shard = store(tmp_path / "shard.sqlite", {"k2": "B"})
    with ResponseStore(out) as waiting:
        inode = out.stat().st_ino
        merge_stores(out, [shard])
        assert out.stat().st_ino == inode
        assert set(waiting.get_many(["k1", "k2"])) == {"k1", "k2"}  # it sees the merge
        waiting.put("k3", "openai/m", {"messages": []}, answer("C"))
    assert contents(out) == {"k1": "A", "k2": "B", "k3": "C"} and integrity(out) == "ok"


def test_a_damaged_input_is_named_not_the_output(tmp_path):
    shard = tmp_path / "shard.sqlite"
    with ResponseStore(shard) as db:
        db.put_many([(f"k{i:05d}", "openai/m", {"messages": [{"role": "user", "content": "x" * 500}]}, answer("A")) for i in range(2000)])
    with open(shard, "r+b") as handle:  # the table's inner pages, not the first page naming the tables
        handle.seek(20 * 4096)
        handle.write(b"\xff" * 40 * 4096)
    out = store(tmp_path / "merged.sqlite", {"k9": "Z"})
    with pytest.raises(BiascheckError) as error:
        merge_stores(out, [shard])
    message = str(error.value)
    assert message.startswith(f"{shard.resolve()}: ") and "malformed" in message and "\n" not in message, message
    assert contents(out) == {"k9": "Z"} and integrity(out) == "ok"


def _dead_pid() -> int:
    import subprocess
    import sys

    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    return int(finished.stdout)


def test_the_files_a_dead_merger_left_are_removed_and_a_live_one_s_kept(tmp_path):
    import subprocess
    import sys

    shard = store(tmp_path / "shard.sqlite", {"k1": "A"})
    out = tmp_path / "merged.sqlite"
    dead = [tmp_path / f".merged.sqlite.merging-{_dead_pid()}{suffix}" for suffix in ("", "-journal")]
    with subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE) as alive:
        live = tmp_path / f".merged.sqlite.merging-{alive.pid}"
        for path in (*dead, live):
            path.write_bytes(b"left by a merge killed with SIGKILL")
        merge_stores(out, [shard])
        assert [p.exists() for p in dead] == [False, False] and live.exists()
        alive.stdin.close()  # type: ignore[union-attr]
    assert contents(out) == {"k1": "A"}


def test_a_merge_killed_at_any_point_leaves_the_output_whole_and_no_file_of_its_own(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    shard = tmp_path / "shard.sqlite"
    with ResponseStore(shard) as db:
        db.put_many([(f"k{i:05d}", "openai/m", {"messages": [{"role": "user", "content": "x" * 500}]}, answer("A")) for i in range(20_000)])
    out = store(tmp_path / "merged.sqlite", {"k1": "B"})
    before = set(tmp_path.iterdir())
    merging = subprocess.Popen([sys.executable, "-m", "biascheck.cli", "store", "merge", str(out), str(shard)])
    deadline = time.monotonic() + 60
    while merging.poll() is None and time.monotonic() < deadline:
        wal = out.with_name(out.name + "-wal")
        if any("merging" in p.name for p in tmp_path.iterdir()) or (wal.exists() and wal.stat().st_size > 1 << 20):
            break
        time.sleep(0.001)
    os.kill(merging.pid, signal.SIGKILL)
    merging.wait(60)
    left = {p.name for p in set(tmp_path.iterdir()) - before}
    # SQLite's own files of the stores it had open, and the lock: nothing else.
    assert left <= {"merged.sqlite.lock", "merged.sqlite-wal", "merged.sqlite-shm", "shard.sqlite-wal", "shard.sqlite-shm"}, left
    assert integrity(out) == "ok"
    with ResponseStore(out) as db:
        assert db.count() in (1, 20_001)  # all or nothing


def test_a_store_of_another_version_is_refused_naming_the_field(tmp_path):
    shard = store(tmp_path / "shard.sqlite", {"k1": "A"})
    with closing(sqlite3.connect(shard)) as db, db:
        db.execute("UPDATE meta SET value = '99' WHERE name = 'version'")
    with pytest.raises(BiascheckError) as error:
        merge_stores(tmp_path / "merged.sqlite", [shard])
    assert str(error.value).startswith(f"{shard.resolve()}: meta.version: store version 99 is not 1"), str(error.value)
    assert not (tmp_path / "merged.sqlite").exists()


def test_a_merge_into_a_folder_that_is_not_there_creates_none(tmp_path, capsys):
    shard = store(tmp_path / "shard.sqlite", {"k1": "A"})
    out = tmp_path / "nonexistent" / "x" / "merged.sqlite"
    assert main(["store", "merge", str(out), str(shard)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "is not a folder" in error, error
    assert not (tmp_path / "nonexistent").exists()


@pytest.mark.slow
def test_a_merge_during_a_live_run_loses_none_of_its_answers(small_kobbq, data_dir, tmp_path):
    """The issue's case end to end: a pytest run of 1,200 calls into R, and a merge into R as soon
    as the run has opened it. The merge waits for nothing and is refused (or, in the instant before
    the run takes its lock, merges in place); the run keeps every answer, R passes SQLite's
    integrity check, a re-run on R makes 0 calls, and the merge done after the run adds its store."""
    import json
    import os
    import subprocess
    import sys
    import time

    out = tmp_path / "R.sqlite"
    other = store(tmp_path / "other.sqlite", {"k1": "A"})
    env = {**os.environ, "BIASCHECK_DATA_DIR": str(data_dir)}

    def run(report: str) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "pytest", "--biascheck", str(small_kobbq), "--biascheck-model", "sim/fair", "--biascheck-cache", str(out)]
            + ["--biascheck-report", str(tmp_path / report), "--biascheck-concurrency", "8", "-p", "no:cacheprovider", "-q"],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    live = run("first")
    deadline = time.monotonic() + 300
    while not out.with_name(out.name + "-wal").exists() and live.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    merge = subprocess.run([sys.executable, "-m", "biascheck.cli", "store", "merge", str(out), str(other)], capture_output=True, text=True, env=env)
    assert merge.returncode in (0, 2), merge.stderr
    if merge.returncode == 2:
        assert merge.stderr.count("\n") == 1 and "in use by another biascheck process" in merge.stderr, merge.stderr
    output, _ = live.communicate(timeout=600)
    first = json.loads((tmp_path / "first" / "results.json").read_text("utf-8"))
    assert first["run"]["requests"] == 1200 and first["run"]["errors"] == 0, output
    assert integrity(out) == "ok"
    with ResponseStore(out) as db:
        assert db.count() >= 1200
    again = run("again")
    again.communicate(timeout=600)
    assert json.loads((tmp_path / "again" / "results.json").read_text("utf-8"))["run"]["calls"] == 0
    assert main(["store", "merge", str(out), str(other)]) == 0
    with ResponseStore(out) as db:
        assert db.count() == 1201 and integrity(out) == "ok"
