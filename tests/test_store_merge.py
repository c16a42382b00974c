"""Merging response stores (``biascheck store merge``), as a sharded run's last job does: atomic,
idempotent, refusing stores of another schema, and treating two answers to one request as an error."""

from __future__ import annotations

import sqlite3
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
    (from_merged,), (from_whole,) = build_results(merged), build_results(whole)
    assert from_merged["metrics"] == from_whole["metrics"] and from_merged["verdicts"] == from_whole["verdicts"]
    assert [c["outcome"] for c in from_merged["cases"]] == [c["outcome"] for c in from_whole["cases"]]


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
