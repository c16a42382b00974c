"""The response store: SQLite in WAL mode, one row per request, committed as each answer arrives.

The key is the sha256 of the canonical JSON of everything that determines an answer (model,
endpoint, messages, sampling parameters, sample index), so a warm store answers a re-run without a
single call and a run killed with SIGKILL loses at most the calls that were in flight. Errors are
never stored as answers; ``run_errors`` only lets the pytest-xdist workers of one run share the
errors the first worker met, so the others neither repeat nor disagree.
No API key or header value is part of a key or a row.
"""

from __future__ import annotations

import fcntl
import json
import sqlite3
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from biascheck.errors import BiascheckError
from biascheck.manifest import canonical_json, sha256_text

STORE_VERSION = "1"
KEY_VERSION = 1


def request_key(model: str, endpoint: str, messages: list[dict[str, str]], params: dict[str, Any], sample: int = 0) -> str:
    material = {"v": KEY_VERSION, "model": model, "endpoint": endpoint, "messages": messages, "params": params, "sample": sample}
    return sha256_text(canonical_json(material))


@dataclass(frozen=True, slots=True)
class StoredResponse:
    text: str | None
    finish_reason: str | None
    usage: dict[str, int]
    cost_usd: float | None
    logprobs: dict[str, float] | None = None


_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    request TEXT NOT NULL,
    text TEXT,
    finish_reason TEXT,
    usage TEXT NOT NULL,
    cost_usd REAL,
    created_at REAL NOT NULL,
    logprobs TEXT
);
CREATE TABLE IF NOT EXISTS run_errors (
    run_id TEXT NOT NULL,
    key TEXT NOT NULL,
    error TEXT NOT NULL,
    PRIMARY KEY (run_id, key)
);
"""


class ResponseStore:
    def __init__(self, path: Path | str):
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=60, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
            columns = {row[1] for row in self._db.execute("PRAGMA table_info(responses)")}
            if "logprobs" not in columns:  # a store written before log-probabilities were kept
                try:
                    self._db.execute("ALTER TABLE responses ADD COLUMN logprobs TEXT")
                except sqlite3.OperationalError as exc:
                    if "duplicate column" not in str(exc):  # another process of the run migrated it first
                        raise
            row = self._db.execute("SELECT value FROM meta WHERE name = 'version'").fetchone()
            if row is None:
                self._db.execute("INSERT OR IGNORE INTO meta VALUES ('version', ?)", (STORE_VERSION,))
            elif row[0] != STORE_VERSION:
                raise BiascheckError(self.path, "meta.version", f"store version {row[0]} is not {STORE_VERSION}", "use another --biascheck-cache path")
        except sqlite3.DatabaseError as exc:
            raise BiascheckError(self.path, None, f"not a usable response store ({exc})", "delete it or point --biascheck-cache elsewhere") from None
        except OSError as exc:
            raise BiascheckError(self.path, None, f"cannot open the response store ({exc.strerror})", "point --biascheck-cache at a writable path") from None

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> ResponseStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _rows(self, columns: str, keys: Iterable[str], where: str = "") -> Iterator[tuple]:
        """``columns`` of the rows of ``keys``, queried 500 keys at a time (SQLite's variable limit)."""
        keys = list(keys)
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            marks = ",".join("?" * len(chunk))
            yield from self._db.execute(f"SELECT {columns} FROM responses WHERE key IN ({marks}){where}", chunk)

    def get_many(self, keys: Iterable[str]) -> dict[str, StoredResponse]:
        found: dict[str, StoredResponse] = {}
        for key, text, finish, usage, cost, logprobs in self._rows("key, text, finish_reason, usage, cost_usd, logprobs", keys):
            found[key] = StoredResponse(text, finish, json.loads(usage), cost, json.loads(logprobs) if logprobs else None)
        return found

    def dropped_params(self, keys: Iterable[str]) -> dict[str, str]:
        """Parameters left out of the stored answers of ``keys`` (the server refused them), with why."""
        found: dict[str, str] = {}
        # instr() first: only the rare rows that record a dropped parameter are parsed.
        for (request,) in self._rows("request", keys, " AND instr(request, '\"params_dropped\"') > 0"):
            for name, reason in json.loads(request).get("params_dropped", {}).items():
                found.setdefault(name, reason)
        return found

    def put(self, key: str, model: str, request: dict[str, Any], response: StoredResponse) -> None:
        # One transaction per answer: what was answered is never lost to a kill.
        self._db.execute(
            "INSERT OR REPLACE INTO responses (key, model, request, text, finish_reason, usage, cost_usd, created_at, logprobs) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (key, model, canonical_json(request), response.text, response.finish_reason,
             json.dumps(response.usage, sort_keys=True), response.cost_usd, time.time(),
             json.dumps(response.logprobs, sort_keys=True) if response.logprobs is not None else None),
        )

    def count(self) -> int:
        return self._db.execute("SELECT count(*) FROM responses").fetchone()[0]

    def record_run_errors(self, run_id: str, errors: dict[str, str]) -> None:
        with self._transaction():
            self._db.executemany("INSERT OR REPLACE INTO run_errors VALUES (?, ?, ?)", [(run_id, k, e) for k, e in errors.items()])

    def run_errors(self, run_id: str) -> dict[str, str]:
        return dict(self._db.execute("SELECT key, error FROM run_errors WHERE run_id = ?", (run_id,)))

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold the store's call lock: one process of a run makes the calls, the others wait and read."""
        lock_path = self.path.with_name(self.path.name + ".lock")
        with open(lock_path, "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
