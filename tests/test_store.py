"""The response store: a write that fails is one line (what is stored stays), a file that is not a
biascheck store is refused untouched, damaged rows are asked again, and the store has one identity
however its path is written."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import sqlite3
import threading
import warnings
from contextlib import closing
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_examples import examples
from store_processes import ANSWER, REQUEST, key, open_and_put, run_through

from biascheck.core.errors import BiascheckError
from biascheck.execution.store import (
    APPLICATION_ID,
    SCHEMA_VERSION,
    ResponseStore,
    StoredResponse,
    StoreWarning,
    StoreWriteError,
    request_key,
)

# The layouts earlier biascheck releases wrote: no application_id, meta version '1'.
LEGACY_SCHEMA = """
CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE responses (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    request TEXT NOT NULL,
    text TEXT,
    finish_reason TEXT,
    usage TEXT NOT NULL,
    cost_usd REAL,
    created_at REAL NOT NULL{logprobs}
);
CREATE TABLE run_errors (
    run_id TEXT NOT NULL,
    key TEXT NOT NULL,
    error TEXT NOT NULL,
    PRIMARY KEY (run_id, key)
);
INSERT INTO meta VALUES ('version', '1');
"""


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def header(path: Path) -> tuple[int, int, str]:
    """application_id, user_version and journal mode, read on a connection of the test's own."""
    db = sqlite3.connect(path)
    try:
        return (
            db.execute("PRAGMA application_id").fetchone()[0],
            db.execute("PRAGMA user_version").fetchone()[0],
            db.execute("PRAGMA journal_mode").fetchone()[0],
        )
    finally:
        db.close()


def legacy_store(path: Path, *, logprobs: bool = True, rows: int = 2) -> None:
    db = sqlite3.connect(path, isolation_level=None)
    db.executescript(LEGACY_SCHEMA.format(logprobs=",\n    logprobs TEXT" if logprobs else ""))
    db.execute("PRAGMA journal_mode=WAL")
    for n in range(rows):
        db.execute(
            "INSERT INTO responses (key, model, request, text, finish_reason, usage, cost_usd, created_at) "
            "VALUES (?, 'm', '{}', ?, 'stop', '{\"prompt_tokens\": 1}', 0.5, 0)",
            (key(n), f"answer {n}"),
        )
    db.close()


def fill(store: ResponseStore, first: int, count: int) -> None:
    for n in range(first, first + count):
        store.put(key(n), "m", REQUEST, ANSWER)


def one_line(error: BaseException) -> str:
    message = str(error)
    assert "\n" not in message and "Traceback" not in message
    return message


# 1. A write that fails mid-run: one line, nothing lost.


def test_a_put_on_a_full_disk_is_one_line_and_keeps_what_is_stored(tmp_path: Path):
    path = tmp_path / "store.sqlite"
    with ResponseStore(path) as store:
        fill(store, 0, 5)
        # SQLITE_FULL exactly as a full disk gives it: the store may not grow past its pages.
        pages = store._db.execute("PRAGMA page_count").fetchone()[0]
        store._db.execute(f"PRAGMA max_page_count = {pages}")
        big = StoredResponse("x" * 50_000, "stop", {}, None)
        with pytest.raises(StoreWriteError) as caught:
            store.put(key(99), "m", REQUEST, big)
        message = one_line(caught.value)
        assert isinstance(caught.value, BiascheckError)
        assert str(store.path) in message and "database or disk is full" in message
        assert "free disk space" in message and "kept" in message and "not asked again" in message
        # Still usable for reading: every answer stored before the failure is there.
        assert store.get_many(key(n) for n in range(6)) == {key(n): ANSWER for n in range(5)}
        assert store.count() == 5
    with ResponseStore(path) as reopened:
        assert reopened.get_many(key(n) for n in range(100)) == {key(n): ANSWER for n in range(5)}
        reopened.put(key(99), "m", REQUEST, big)  # the cause is gone: the run resumes
        assert reopened.count() == 6


def test_a_read_only_store_is_one_line_naming_the_fix(tmp_path: Path):
    with ResponseStore(tmp_path / "store.sqlite") as store:
        fill(store, 0, 1)
        store._db.execute("PRAGMA query_only = ON")  # SQLITE_READONLY, as a read-only file gives it (root writes anyway)
        with pytest.raises(StoreWriteError) as caught:
            store.put(key(1), "m", REQUEST, ANSWER)
        message = one_line(caught.value)
        assert str(store.path) in message and "readonly" in message and "writable" in message
        with pytest.raises(StoreWriteError, match="readonly"):
            store.record_run_errors("run", {key(1): "boom"})
        assert store.get_many([key(0)]) == {key(0): ANSWER}


def test_recording_run_errors_on_a_full_disk_is_one_line(tmp_path: Path):
    with ResponseStore(tmp_path / "store.sqlite") as store:
        store.record_run_errors("run", {key(0): "refused"})
        pages = store._db.execute("PRAGMA page_count").fetchone()[0]
        store._db.execute(f"PRAGMA max_page_count = {pages}")
        with pytest.raises(StoreWriteError) as caught:
            store.record_run_errors("run2", {key(n): "e" * 2000 for n in range(50)})
        assert "database or disk is full" in one_line(caught.value)
        assert not store._db.in_transaction
        assert store.run_errors("run") == {key(0): "refused"} and store.run_errors("run2") == {}


def test_a_run_whose_store_fills_up_stops_incomplete_with_one_line_and_keeps_its_answers(tmp_path: Path):
    import asyncio
    import contextlib

    from biascheck.execution.llm import Completion
    from biascheck.execution.runner import NOT_RUN, ModelRequest, execute
    from biascheck.execution.stats import RunStatus

    class Model:  # a fake client: long answers, so that the store fills after a few
        async def complete(self, messages, params, sample=0):
            return Completion("A" + "x" * 20_000, "stop", {}, 0.0)

        async def aclose(self):
            pass

    @contextlib.contextmanager
    def open_client():
        yield Model()

    requests = [ModelRequest(key(n), [{"role": "user", "content": str(n)}], {}) for n in range(40)]

    async def go():
        with ResponseStore(tmp_path / "store.sqlite") as store:
            pages = store._db.execute("PRAGMA page_count").fetchone()[0]
            store._db.execute(f"PRAGMA max_page_count = {pages + 30}")  # room for a few answers: then "disk full"
            return await execute(requests, store=store, model_name="m", open_client=open_client, concurrency=1)

    run = asyncio.run(go())
    reason = run.stats.incomplete
    assert reason.startswith("response store failure: ") and "\n" not in reason
    assert run.stats.status is RunStatus.STORE_FAILURE
    assert str((tmp_path / "store.sqlite").resolve()) in reason and "database or disk is full" in reason
    with ResponseStore(tmp_path / "store.sqlite") as store:
        kept = store.count()
        assert 0 < kept < 40 and len(store.get_many(key(n) for n in range(40))) == kept
    answered = [r for r in run.responses.values() if not r.errored]
    assert len(answered) == kept  # every answer reported was stored; the rest are asked again on resume
    assert sum(r.error.startswith(NOT_RUN) for r in run.responses.values() if r.errored) == 40 - kept - 1


def test_initialising_a_store_on_a_full_disk_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    connect = sqlite3.connect

    def full_disk(*args, **kwargs):
        db = connect(*args, **kwargs)
        db.execute("PRAGMA max_page_count = 1")  # no room for biascheck's tables
        return db

    monkeypatch.setattr(sqlite3, "connect", full_disk)
    with pytest.raises(StoreWriteError) as caught:
        ResponseStore(tmp_path / "store.sqlite")
    message = one_line(caught.value)
    assert "store.sqlite" in message and "database or disk is full" in message and "free disk space" in message


# 2. Files that are not biascheck stores, older stores, damaged rows.


def _other_responses_table(db: sqlite3.Connection) -> None:
    db.executescript("CREATE TABLE responses (id INTEGER PRIMARY KEY, body TEXT); INSERT INTO responses VALUES (1, 'theirs');")


def _other_tables(db: sqlite3.Connection) -> None:
    db.executescript("CREATE TABLE accounts (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO accounts VALUES (1, 'x');")


def _other_application(db: sqlite3.Connection) -> None:
    db.execute("PRAGMA application_id = 1195724867")  # another application's mark, no tables yet


def _other_application_in_wal(db: sqlite3.Connection) -> None:
    db.execute("PRAGMA journal_mode=WAL")
    _other_tables(db)


def _our_tables_and_another(db: sqlite3.Connection) -> None:
    db.executescript(LEGACY_SCHEMA.format(logprobs=",\n    logprobs TEXT") + "CREATE TABLE notes (body TEXT);")


def _our_tables_another_version(db: sqlite3.Connection) -> None:
    db.executescript(LEGACY_SCHEMA.format(logprobs="").replace("'version', '1'", "'version', '7'"))


def _marked_but_user_version(db: sqlite3.Connection) -> None:
    db.execute("PRAGMA user_version = 12")


FOREIGN = {
    "another responses table": (_other_responses_table, "responses"),
    "other tables": (_other_tables, "accounts"),
    "another application_id": (_other_application, "application_id"),
    "another application in WAL mode": (_other_application_in_wal, "accounts"),
    "biascheck's tables and another": (_our_tables_and_another, "notes"),
    "biascheck's tables, another version": (_our_tables_another_version, "version"),
    "an unmarked user_version": (_marked_but_user_version, "user_version"),
}


@pytest.mark.parametrize("make", FOREIGN.values(), ids=FOREIGN.keys())
def test_a_foreign_database_is_refused_and_left_byte_for_byte(tmp_path: Path, make):
    build, found = make
    path = tmp_path / "theirs.db"
    db = sqlite3.connect(path, isolation_level=None)
    build(db)
    db.close()
    before = digest(path)
    with pytest.raises(BiascheckError) as caught:
        ResponseStore(path)
    message = one_line(caught.value)
    assert message.startswith(str(path.resolve()) + ": not a biascheck response store (")
    assert found in message and message.endswith("point --biascheck-cache at another file")
    assert digest(path) == before
    assert not (tmp_path / "theirs.db-wal").exists() or (tmp_path / "theirs.db-wal").stat().st_size == 0


def test_a_file_that_is_not_sqlite_is_refused_untouched(tmp_path: Path):
    path = tmp_path / "notes.txt"
    path.write_text("these are my notes, not a database\n" * 100)
    before = digest(path)
    with pytest.raises(BiascheckError, match="not a usable response store .not an SQLite database.*point --biascheck-cache at another file$"):
        ResponseStore(path)
    assert digest(path) == before


def test_a_store_of_a_newer_biascheck_is_refused_untouched(tmp_path: Path):
    path = tmp_path / "store.sqlite"
    ResponseStore(path).close()
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.commit()
    db.close()
    before = digest(path)
    with pytest.raises(BiascheckError, match=f"newer biascheck .store schema {SCHEMA_VERSION + 1}"):
        ResponseStore(path)
    assert digest(path) == before


@pytest.mark.parametrize("exists", [False, True], ids=["new file", "0-byte file"])
def test_a_new_store_is_marked_as_biascheck_s(tmp_path: Path, exists: bool):
    path = tmp_path / "store.sqlite"
    if exists:
        path.touch()
    with ResponseStore(path) as store:
        store.put(key(0), "m", REQUEST, ANSWER)
    assert header(path) == (APPLICATION_ID, SCHEMA_VERSION, "wal")
    assert APPLICATION_ID == int.from_bytes(b"BIAS", "big")
    with ResponseStore(path) as store:
        assert store.get_many([key(0)]) == {key(0): ANSWER}


@pytest.mark.parametrize("logprobs", [True, False], ids=["with logprobs", "before logprobs"])
def test_a_store_of_an_earlier_biascheck_is_adopted_and_migrated(tmp_path: Path, logprobs: bool):
    path = tmp_path / "store.sqlite"
    legacy_store(path, logprobs=logprobs)
    with ResponseStore(path) as store:
        assert store.get_many([key(0), key(1)]) == {
            key(n): StoredResponse(f"answer {n}", "stop", {"prompt_tokens": 1}, 0.5, None, False) for n in range(2)
        }
        store.put(key(2), "m", REQUEST, StoredResponse("cut", "length", {}, None, {"A": -1.0}, True))
        assert store.get_many([key(2)])[key(2)].truncated is True
    assert header(path) == (APPLICATION_ID, SCHEMA_VERSION, "wal")


def test_a_marked_store_of_schema_1_gains_the_truncated_column(tmp_path: Path):
    path = tmp_path / "store.sqlite"
    legacy_store(path)
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    db.execute("PRAGMA user_version = 1")
    db.commit()
    db.close()
    with ResponseStore(path) as store:
        store.put(key(5), "m", REQUEST, StoredResponse("cut", "length", {}, None, None, True))
        assert store.get_many([key(0), key(5)]) == {
            key(0): StoredResponse("answer 0", "stop", {"prompt_tokens": 1}, 0.5),
            key(5): StoredResponse("cut", "length", {}, None, None, True),
        }
    assert header(path)[:2] == (APPLICATION_ID, SCHEMA_VERSION)


@pytest.mark.parametrize("start", ["new", "legacy"])
def test_processes_opening_one_store_at_once_all_succeed(tmp_path: Path, start: str):
    """pytest-xdist workers open a brand-new (or not yet adopted) store at the same moment."""
    context = multiprocessing.get_context("spawn")
    for attempt in range(3):
        path = tmp_path / f"store{attempt}.sqlite"
        if start == "legacy":
            legacy_store(path, logprobs=False, rows=0)
        barrier = context.Barrier(6)
        workers = [context.Process(target=open_and_put, args=(str(path), n, barrier)) for n in range(6)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(120)
        assert [w.exitcode for w in workers] == [0] * 6
        with ResponseStore(path) as store:
            assert store.count() == 6
        assert header(path) == (APPLICATION_ID, SCHEMA_VERSION, "wal")


def _open_and_put_noting(path: Path, n: int, barrier: threading.Barrier, failures: list[BaseException]) -> None:
    try:
        open_and_put(str(path), n, barrier)
    except BaseException as exc:  # noqa: BLE001 - reported by the test's assert
        failures.append(exc)


def test_threads_opening_one_new_store_at_once_all_succeed(tmp_path: Path):
    for attempt in range(5):
        path = tmp_path / f"store{attempt}.sqlite"
        barrier = threading.Barrier(8)
        failures: list[BaseException] = []
        threads = [threading.Thread(target=_open_and_put_noting, args=(path, n, barrier, failures)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert failures == []
        with ResponseStore(path) as store:
            assert store.count() == 8


def _damage(path: Path, sql: str, *params) -> None:
    db = sqlite3.connect(path)
    db.execute(sql, params)
    db.commit()
    db.close()


def test_damaged_rows_are_read_as_missing_with_one_warning(tmp_path: Path):
    path = tmp_path / "store.sqlite"
    with ResponseStore(path) as store:
        fill(store, 0, 6)
    _damage(path, "UPDATE responses SET usage = '{\"prompt_tok' WHERE key = ?", key(0))
    _damage(path, "UPDATE responses SET logprobs = '{\"A\": -0.' WHERE key = ?", key(1))
    _damage(path, "UPDATE responses SET usage = '[1, 2]' WHERE key = ?", key(2))
    _damage(path, "UPDATE responses SET text = CAST(x'ff41fe' AS TEXT) WHERE key = ?", key(3))
    with ResponseStore(path) as store:
        with pytest.warns(StoreWarning) as caught:
            found = store.get_many(key(n) for n in range(6))
        assert len(caught) == 1
        message = str(caught[0].message)
        assert str(store.path) in message and "4 damaged" in message and "\n" not in message
        assert found == {key(4): ANSWER, key(5): ANSWER}
        # Asked again, the answer replaces the damaged row.
        fill(store, 0, 4)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert store.get_many(key(n) for n in range(6)) == {key(n): ANSWER for n in range(6)}


def test_dropped_params_skip_a_damaged_request(tmp_path: Path):
    path = tmp_path / "store.sqlite"
    with ResponseStore(path) as store:
        for n, dropped in enumerate([{"logprobs": "refused"}, {"seed": "unsupported"}, {"top_k": "no"}]):
            store.put(key(n), "m", {**REQUEST, "params_dropped": dropped}, ANSWER)
    _damage(path, 'UPDATE responses SET request = \'{"params_dropped": {"seed"\' WHERE key = ?', key(1))
    _damage(path, 'UPDATE responses SET request = \'{"params_dropped": ["top_k"]}\' WHERE key = ?', key(2))
    with ResponseStore(path) as store:
        assert store.dropped_params(key(n) for n in range(3)) == {"logprobs": "refused"}


def test_a_truncated_reply_is_stored_as_truncated(tmp_path: Path):
    with ResponseStore(tmp_path / "store.sqlite") as store:
        cut = StoredResponse("x" * 10, "length", {"completion_tokens": 10}, None, None, True)
        store.put(key(0), "m", REQUEST, cut)
        store.put(key(1), "m", REQUEST, ANSWER)
        assert store.get_many([key(0), key(1)]) == {key(0): cut, key(1): ANSWER}


# What a reply's reading keeps (execution.llm): token counts, a cost, and log-probabilities at most
# 0 whose probabilities sum to at most 1 (five of at most e^-1.7 do). Other values are read as
# missing (tests/test_reply_values.py).
stored_responses = st.builds(
    StoredResponse,
    st.none() | st.text(),
    st.none() | st.text(max_size=20),
    st.dictionaries(st.text(max_size=20), st.integers(min_value=0, max_value=2**63 - 1), max_size=5),
    st.none() | st.floats(min_value=0, max_value=1e6),
    st.none() | st.dictionaries(st.text(max_size=10), st.floats(min_value=-1e300, max_value=-1.7), max_size=5),
    st.booleans(),
)


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(response=stored_responses)
def test_what_is_put_is_what_is_read(tmp_path: Path, response: StoredResponse):
    with ResponseStore(tmp_path / "store.sqlite") as store:
        store.put(key(0), "m", REQUEST, response)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert store.get_many([key(0)]) == {key(0): response}


# 3. One store, one lock, however its path is written.


@pytest.mark.parametrize("link", ["file", "directory"])
def test_a_store_reached_through_a_symlink_shares_its_lock(tmp_path: Path, link: str):
    real = tmp_path / "real" / "store.sqlite"
    real.parent.mkdir()
    if link == "file":
        (tmp_path / "link.sqlite").symlink_to(real)
        other = tmp_path / "link.sqlite"
    else:
        (tmp_path / "linkdir").symlink_to(real.parent, target_is_directory=True)
        other = tmp_path / "linkdir" / "store.sqlite"
    held, release, acquired = threading.Event(), threading.Event(), threading.Event()

    def hold(store: ResponseStore) -> None:
        with store.exclusive():
            held.set()
            release.wait(30)

    def take(store: ResponseStore) -> None:
        with store.exclusive():
            acquired.set()

    with ResponseStore(real) as first, ResponseStore(other) as second:
        holder = threading.Thread(target=hold, args=(first,))
        holder.start()
        assert held.wait(10)
        taker = threading.Thread(target=take, args=(second,))
        taker.start()
        try:
            assert not acquired.wait(0.5), "the store was locked twice over through its symlink"
        finally:
            release.set()
            holder.join(10)
        assert acquired.wait(10)
        taker.join(10)
        assert second.path == first.path
        second.put(key(0), "m", REQUEST, ANSWER)
        assert first.get_many([key(0)]) == {key(0): ANSWER}
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file() and not p.is_symlink()) == ["store.sqlite", "store.sqlite.lock"]


def test_a_lock_file_that_cannot_be_created_is_one_line(tmp_path: Path):
    with ResponseStore(tmp_path / "store.sqlite") as store:
        (tmp_path / "store.sqlite.lock").mkdir()
        with pytest.raises(StoreWriteError) as caught, store.exclusive():
            pass
        assert "store.sqlite.lock: cannot create the store's lock file" in one_line(caught.value)


_texts = st.text(max_size=20)
_params = st.dictionaries(
    st.sampled_from(["temperature", "max_tokens", "seed", "logprobs", "top_logprobs", "echo", "zz"]),
    st.one_of(st.integers(-3, 2**40), st.floats(allow_nan=False, allow_infinity=False), st.booleans(), _texts),
    max_size=5,
)


@settings(max_examples=examples(300), suppress_health_check=[HealthCheck.too_slow])
@given(
    model=_texts,
    endpoint=_texts,
    messages=st.lists(st.fixed_dictionaries({"role": st.sampled_from(["system", "user", "assistant"]), "content": _texts}), max_size=3),
    params=_params,
    sample=st.integers(0, 10**6),
    revision=st.none() | _texts,
)
def test_request_keys_are_the_hash_of_their_whole_canonical_material(model, endpoint, messages, params, sample, revision):
    # request_key writes the material up to the sample once for a prompt's k samples; the key must
    # stay the one every store already holds: sha256 of the canonical JSON of the whole material.
    from biascheck.config.manifest import canonical_json

    material = {"v": 1, "model": model, "endpoint": endpoint, "messages": messages, "params": params, "sample": sample}
    if revision is not None:
        material["revision"] = revision
    expected = hashlib.sha256(canonical_json(material).encode("utf-8")).hexdigest()
    assert request_key(model, endpoint, messages, params, sample, revision) == expected


def test_a_known_key_is_unchanged():
    # The key of one request as stores written before key_prefix hold it.
    assert request_key("sim/fair", "biascheck-sim", [{"role": "user", "content": "질문?"}], {"temperature": 0, "max_tokens": 30}, 3) == (
        hashlib.sha256(
            '{"endpoint":"biascheck-sim","messages":[{"content":"질문?","role":"user"}],"model":"sim/fair",'
            '"params":{"max_tokens":30,"temperature":0},"sample":3,"v":1}'.encode()
        ).hexdigest()
    )


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
        lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3),
        max_leaves=10,
    )
)
def test_keys_and_rows_are_serialised_as_canonical_json(value):
    # The store's own encoder (made once) writes what canonical_json writes: keys of earlier
    # stores keep answering.
    from biascheck.config.manifest import canonical_json, sha256_text
    from biascheck.execution import store

    assert store._canonical(value) == canonical_json(value)
    messages = [{"role": "user", "content": json.dumps(value)}]
    material = {"v": store.KEY_VERSION, "model": "m", "endpoint": "e", "messages": messages, "params": {"x": value}, "sample": 0}
    assert request_key("m", "e", messages, {"x": value}) == sha256_text(canonical_json(material))
    usage = {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}
    assert store._usage_column(usage) == store._usage_column(dict(reversed(usage.items()))) == json.dumps(usage, sort_keys=True)
    assert store._usage_column({"prompt_tokens": True}) == '{"prompt_tokens": true}'


def test_runs_through_two_hard_links_to_one_store_pay_once(tmp_path: Path):
    # Issue 34 D13: two runs through two hard links took two locks (one per name), each made every
    # call, and wrote one file through two write-ahead logs ("database disk image is malformed").
    real = tmp_path / "a" / "store.sqlite"
    real.parent.mkdir()
    with ResponseStore(real):
        pass
    linked = tmp_path / "b" / "store.sqlite"
    linked.parent.mkdir()
    os.link(real, linked)

    with ResponseStore(linked) as through_link, ResponseStore(real) as through_real:
        assert through_link.path == through_real.path, "one file, two names to open it by"

    context = multiprocessing.get_context("spawn")
    barrier, paid = context.Barrier(2), context.Value("i", 0)
    runs = [context.Process(target=run_through, args=(str(path), barrier, paid)) for path in (real, linked)]
    for run in runs:
        run.start()
    for run in runs:
        run.join(120)
    assert [run.exitcode for run in runs] == [0, 0]
    assert paid.value == 20, f"{paid.value} calls made for 20 requests"
    with ResponseStore(linked) as store:
        assert store.count() == 20
    assert not list(linked.parent.glob("store.sqlite-*")), "a second write-ahead log beside the second name"
    with closing(sqlite3.connect(real)) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
