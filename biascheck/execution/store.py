"""The response store: SQLite in WAL mode, one row per request, committed as each answer arrives
(the runner commits the answers that arrive in one turn of its event loop in one transaction).

The key is the sha256 of the canonical JSON of everything that determines an answer (model,
endpoint, messages, sampling parameters, sample index), so a warm store answers a re-run without a
single call and a run killed with SIGKILL loses at most the calls that were in flight. Errors are
never stored as answers: a reply that arrived but could not be read (``refused``: a log-probability
out of range, a negative usage) is kept, for what it cost, and never served to a later run, which
asks again; a row of an earlier biascheck holding such values is read as missing too.
``run_errors`` only lets the pytest-xdist workers of one run share the errors the first worker met,
so the others neither repeat nor disagree.
No API key or header value is part of a key or a row. A file is written to only once it is known
to be a biascheck store (``PRAGMA application_id``), one of an earlier biascheck, or empty.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import math
import os
import re
import sqlite3
import tempfile
import time
import warnings
from collections.abc import Iterable, Iterator, Sequence
from contextlib import closing, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from biascheck.core.errors import BiascheckError
from biascheck.core.garbage import collector_paused
from biascheck.core.records import Loglikelihood, distribution_problem, logprob_value
from biascheck.core.spelling import Spelled, option

STORE_VERSION = "1"  # meta.version: what a key and a row mean; unchanged by added columns
KEY_VERSION = 1
# PRAGMA application_id of every biascheck store ("BIAS" in ASCII): a file without it is only
# written to when it is empty or a store of an earlier biascheck (which did not mark its files).
APPLICATION_ID = 0x42494153
# PRAGMA user_version: the layout. Unmarked stores of earlier releases are schema 1 (logprobs may be
# missing); 2 adds responses.truncated; 3 what the provider said it served (served_model,
# system_fingerprint); 4 the provider batches a run submitted (batches); 5 what a log-likelihood
# request measured (responses.loglikelihood); 6 why a reply that arrived is unusable (responses.refused).
SCHEMA_VERSION = 6
FIX_OTHER_FILE = Spelled("point {cache} at another file")
# What to do about a write that failed, by SQLite's primary result code; then the run resumes.
_CAUSES = {
    sqlite3.SQLITE_FULL: "free disk space",
    sqlite3.SQLITE_READONLY: Spelled("make it writable (or point {cache} at a writable path)"),
    sqlite3.SQLITE_PERM: Spelled("make it writable (or point {cache} at a writable path)"),
    sqlite3.SQLITE_CANTOPEN: Spelled("make it writable (or point {cache} at a writable path)"),
    sqlite3.SQLITE_IOERR: "check the disk",
    sqlite3.SQLITE_BUSY: "let the process that holds it finish",
    sqlite3.SQLITE_LOCKED: "let the process that holds it finish",
    sqlite3.SQLITE_CORRUPT: Spelled("delete it (its answers are asked again) or point {cache} at another file"),
}
_BUSY_WAIT_S = 60.0
# canonical_json's serialisation, its encoder made once: json.dumps builds one for every call that
# passes options, and keys and rows are serialised once per request (tests/test_store.py holds
# the two equal).
_canonical = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False).encode
# A reply's usage as its column holds it; replies repeat a few usages, so each is serialised once.
_usage_json: dict[tuple, str] = {}


def request_key(
    model: str, endpoint: str, messages: list[dict[str, str]], params: dict[str, Any], sample: int = 0, revision: str | None = None
) -> str:
    """``revision``: what the user says is served under ``model`` (--biascheck-model-revision), so a
    model redeployed under the same name is asked again; absent from the key when not given, so
    the stores of runs without one keep answering.

    The sha256 of the canonical JSON of ``{"v", "model", "endpoint", "messages", "params", "sample"}``
    (and ``"revision"``), written as :func:`key_prefix` and :func:`sample_key`: the k samples of one
    prompt share everything but the sample, which sorts last but for ``v``."""
    return sample_key(key_prefix(model, endpoint, messages, params, revision), sample)


def key_prefix(model: str, endpoint: str, messages: list[dict[str, str]], params: dict[str, Any], revision: str | None = None) -> str:
    """The canonical JSON of a request's key material up to its sample, without the closing brace."""
    material: dict[str, Any] = {"model": model, "endpoint": endpoint, "messages": messages, "params": params}
    if revision is not None:
        material["revision"] = revision
    return _canonical(material)[:-1]


def sample_key(prefix: str, sample: int) -> str:
    """The key of sample ``sample`` of the request whose :func:`key_prefix` is ``prefix``."""
    return hashlib.sha256(f'{prefix},"sample":{_canonical(sample)},"v":{KEY_VERSION}}}'.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class StoredResponse:
    text: str | None
    finish_reason: str | None
    usage: dict[str, int]
    cost_usd: float | None
    logprobs: dict[str, float] | None = None
    truncated: bool = False
    # What the provider said answered: its reply's ``model`` (e.g. a dated snapshot) and
    # ``system_fingerprint``, when it sends them.
    served_model: str | None = None
    system_fingerprint: str | None = None
    loglikelihood: Loglikelihood | None = None
    # Why the reply cannot be read as an answer (execution.llm's UNUSABLE_REPLY line), or None.
    # Such a row keeps what was paid for; get_many never serves it.
    refused: str | None = None


@dataclass(frozen=True, slots=True)
class BatchRecord:
    """A provider batch as the store keeps it. ``id`` is biascheck's own (the batch's metadata
    ``biascheck_submission``, so a batch created just before a kill is found again); ``state``:
    ``submitting`` (recorded, not yet created), ``running``, then ``collected`` (its answers
    stored), ``failed``, ``expired`` or ``cancelled`` (what it answered stored too), or ``lost``
    (the provider does not know it)."""

    id: str
    provider: str
    model: str
    batch_id: str | None
    keys: tuple[str, ...]
    state: str
    submitted_at: float
    updated_at: float
    detail: str | None = None


class StoreWarning(UserWarning):
    """The store has damaged rows: they are read as missing, asked again and replaced."""


class StoreWriteError(BiascheckError):
    """A write to the store failed (disk full, read-only): what is stored stays; the run can resume."""


# The layout, by table; the columns a store of an earlier biascheck may lack come last.
_TABLES = {
    "meta": "name TEXT PRIMARY KEY, value TEXT NOT NULL",
    "responses": "key TEXT PRIMARY KEY, model TEXT NOT NULL, request TEXT NOT NULL, text TEXT, finish_reason TEXT, "
    "usage TEXT NOT NULL, cost_usd REAL, created_at REAL NOT NULL, logprobs TEXT, truncated INTEGER NOT NULL DEFAULT 0, "
    "served_model TEXT, system_fingerprint TEXT, loglikelihood TEXT, refused TEXT",
    "run_errors": "run_id TEXT NOT NULL, key TEXT NOT NULL, error TEXT NOT NULL, PRIMARY KEY (run_id, key)",
    # One row per provider batch, written before the batch is created: a run killed at any point
    # finds what it submitted. ``keys``: a JSON list of the request keys in it (its custom_ids).
    "batches": "id TEXT PRIMARY KEY, provider TEXT NOT NULL, model TEXT NOT NULL, batch_id TEXT, keys TEXT NOT NULL, "
    "state TEXT NOT NULL, submitted_at REAL NOT NULL, updated_at REAL NOT NULL, detail TEXT",
}
_ADDED_COLUMNS = {
    "logprobs": "TEXT",
    "truncated": "INTEGER NOT NULL DEFAULT 0",
    "served_model": "TEXT",
    "system_fingerprint": "TEXT",
    "loglikelihood": "TEXT",
    "refused": "TEXT",
}
_COLUMNS = {
    "meta": ("name", "value"),
    "responses": ("key", "model", "request", "text", "finish_reason", "usage", "cost_usd", "created_at", *_ADDED_COLUMNS),
    "run_errors": ("run_id", "key", "error"),
    "batches": ("id", "provider", "model", "batch_id", "keys", "state", "submitted_at", "updated_at", "detail"),
}
# The tables of the stores earlier releases wrote without marking them.
_LEGACY_TABLES = ("meta", "responses", "run_errors")
# What earlier releases wrote to responses: without, then with, log-probabilities.
_LEGACY_RESPONSES = (_COLUMNS["responses"][:8], _COLUMNS["responses"][:9])


@dataclass(frozen=True, slots=True)
class _Layout:
    """What a database file holds, read without writing to it."""

    application_id: int
    user_version: int
    tables: dict[str, tuple[str, ...]]  # name -> columns; SQLite's own tables left out
    others: tuple[str, ...]  # views and triggers
    meta_version: str | None

    def is_empty(self) -> bool:
        return self.application_id == 0 and self.user_version == 0 and not self.tables and not self.others

    def is_legacy(self) -> bool:
        """Written by a biascheck that did not yet mark its stores."""
        return (
            self.application_id == 0
            and self.user_version == 0
            and not self.others
            and tuple(sorted(self.tables)) == tuple(sorted(_LEGACY_TABLES))
            and self.tables["responses"] in _LEGACY_RESPONSES
            and all(self.tables[t] == _COLUMNS[t] for t in ("meta", "run_errors"))
            and self.meta_version in (None, STORE_VERSION)
        )

    def is_current(self) -> bool:
        return (
            self.application_id == APPLICATION_ID
            and self.user_version == SCHEMA_VERSION
            and all(set(columns) <= set(self.tables.get(t, ())) for t, columns in _COLUMNS.items())
            and self.meta_version is not None
        )

    def found(self) -> str:
        """What makes it someone else's file, for the error."""
        if self.application_id not in (0, APPLICATION_ID):
            return f"application_id {self.application_id:#010x}"
        if self.user_version:
            return f"application_id 0, user_version {self.user_version}"
        if sorted(self.tables) != sorted(_LEGACY_TABLES) or self.others:
            return "tables: " + _listed([*self.tables, *self.others])
        for table, columns in self.tables.items():
            expected = _LEGACY_RESPONSES if table == "responses" else (_COLUMNS[table],)
            if columns not in expected:
                return f"{table} columns: {_listed(columns)}"
        return f"meta version {self.meta_version!r}, not {STORE_VERSION!r}"


def _listed(names: Iterable[object], shown: int = 6) -> str:
    """Names for a one-line message: another application's database may have hundreds of tables."""
    texts = [str(name) for name in names]
    more = f" and {len(texts) - shown} more" if len(texts) > shown else ""
    return ", ".join(texts[:shown]) + more


def _read_layout(db: sqlite3.Connection) -> _Layout:
    if not db.in_transaction:  # one snapshot: another process may be initialising the file meanwhile
        db.execute("BEGIN")
        try:
            layout = _read_layout(db)
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")  # of reads only: writes nothing
        return layout
    objects = db.execute(
        "SELECT type, name FROM sqlite_master WHERE type IN ('table', 'view', 'trigger') AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name"
    ).fetchall()
    tables = {name: tuple(c for (c,) in db.execute("SELECT name FROM pragma_table_info(?)", (name,))) for kind, name in objects if kind == "table"}
    meta_version = None
    if tables.get("meta") == _COLUMNS["meta"]:
        row = db.execute("SELECT value FROM meta WHERE name = 'version'").fetchone()
        meta_version = row[0] if row else None
    return _Layout(
        db.execute("PRAGMA application_id").fetchone()[0],
        db.execute("PRAGMA user_version").fetchone()[0],
        tables,
        tuple(name for kind, name in objects if kind != "table"),
        meta_version,
    )


def _check_layout(path: Path, layout: _Layout, fix: object) -> None:
    """Refuse a file that is not a store this biascheck reads or may adopt (empty, or an earlier
    biascheck's); ``fix`` says what to give instead."""
    if layout.application_id == APPLICATION_ID:
        if layout.user_version > SCHEMA_VERSION:
            raise BiascheckError(
                path,
                None,
                f"written by a newer biascheck (store schema {layout.user_version}, this one reads up to {SCHEMA_VERSION})",
                f"upgrade biascheck or {fix}",
            )
        if layout.meta_version not in (None, STORE_VERSION):
            raise BiascheckError(path, "meta.version", f"store version {layout.meta_version} is not {STORE_VERSION}", fix)
    elif not (layout.is_empty() or layout.is_legacy()):
        raise BiascheckError(path, None, f"not a biascheck response store ({layout.found()})", fix)


class _Undecodable(bytes):
    """A TEXT value that is not UTF-8: a damaged row, read as missing instead of failing the query."""


def _decode(raw: bytes) -> str | _Undecodable:
    try:
        return raw.decode()
    except UnicodeDecodeError:
        return _Undecodable(raw)


def _json(value: object) -> Any:
    """A JSON column's value; ValueError or TypeError if it is damaged."""
    if not isinstance(value, str):
        raise TypeError(f"not JSON text: {type(value).__name__}")
    return json.loads(value)


def _response(row: Sequence[object], shared: dict[object, Any]) -> StoredResponse | None:
    """The row as a StoredResponse, or None when it is damaged. Its equal short values are the
    objects already in ``shared`` (one per read, see shared_values): a full HBB's 773,500 answers
    repeat a few usages, finish reasons, model names and replies, and held apart they took 800 MB.
    A usage's text is parsed once per read, its dict shared from there."""
    text, finish, usage, cost, logprobs, truncated, served_model, system_fingerprint, loglikelihood = row
    try:
        raw_usage = usage
        usage = shared.get(("usage text", raw_usage)) if isinstance(raw_usage, str) else None
        if usage is None:
            usage = _json(raw_usage)
            if isinstance(usage, dict) and isinstance(raw_usage, str):
                shared[("usage text", raw_usage)] = usage
        logprobs = None if logprobs is None else _distribution(_json(logprobs))
        measured = None if loglikelihood is None else _loglikelihood(_json(loglikelihood))
    except (ValueError, TypeError, KeyError):
        return None
    if not (
        isinstance(text, str | None)
        and isinstance(finish, str | None)
        and _counts(usage)
        and (cost is None or (isinstance(cost, float | int) and math.isfinite(cost) and cost >= 0))
        and truncated in (0, 1)
        and isinstance(served_model, str | None)
        and isinstance(system_fingerprint, str | None)
    ):
        return None
    return shared_values(StoredResponse(text, finish, usage, cost, logprobs, bool(truncated), served_model, system_fingerprint, measured), shared)


def _counts(usage: object) -> bool:
    """A stored usage: token counts, whole and not negative (earlier releases stored what a reply said)."""
    return isinstance(usage, dict) and all(type(v) is int and v >= 0 for v in usage.values())


def _distribution(logprobs: object) -> dict[str, float]:
    """Stored first-token log-probabilities, as floats; TypeError when they cannot be true
    (execution.llm.first_token_logprobs reads a reply's so; earlier releases stored 1000.0, NaN or
    a 400-digit integer as it came)."""
    if not isinstance(logprobs, dict):
        raise TypeError("logprobs")
    values = {token: logprob_value(value) for token, value in logprobs.items()}
    read = {token: value for token, value in values.items() if value is not None}
    if len(read) < len(values) or distribution_problem(read.values()) is not None:
        raise TypeError("logprobs")
    return read


def _loglikelihood(value: Any) -> Loglikelihood:
    """A stored log-likelihood measurement; TypeError or KeyError when it is damaged."""
    logprob, tokens, greedy = value["logprob"], value["tokens"], value["greedy"]
    measured = logprob_value(logprob)  # a sum of log-probabilities, each at most 0
    if measured is None:
        raise TypeError("logprob")
    if not (isinstance(tokens, int) and not isinstance(tokens, bool) and tokens >= 1 and isinstance(greedy, bool)):
        raise TypeError("tokens or greedy")
    return Loglikelihood(measured, tokens, greedy)


_INSERT_RESPONSE = (
    "INSERT OR REPLACE INTO responses (key, model, request, text, finish_reason, usage, cost_usd, created_at, logprobs, "
    "truncated, served_model, system_fingerprint, loglikelihood, refused) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def _row(key: str, model: str, request: dict[str, Any], response: StoredResponse, now: float) -> tuple:
    return (
        key,
        model,
        _canonical(request),
        response.text,
        response.finish_reason,
        _usage_column(response.usage),
        response.cost_usd,
        now,
        json.dumps(response.logprobs, sort_keys=True) if response.logprobs is not None else None,
        int(response.truncated),
        response.served_model,
        response.system_fingerprint,
        json.dumps(response.loglikelihood.to_dict(), sort_keys=True) if response.loglikelihood is not None else None,
        response.refused,
    )


def _usage_column(usage: dict[str, int]) -> str:
    key = tuple(usage.items())
    for _, value in key:
        if type(value) is not int:  # (1, 1.0 and True would be one key)
            return json.dumps(usage, sort_keys=True)
    text = _usage_json.get(key)
    if text is None:
        if len(_usage_json) > 100_000:  # prompts of every length: forget rather than grow
            _usage_json.clear()
        text = _usage_json[key] = json.dumps(usage, sort_keys=True)
    return text


def shared_values(response: StoredResponse, shared: dict[object, Any]) -> StoredResponse:
    """``response`` with its usage, finish reason, model names and short reply replaced by the equal
    objects already in ``shared``: what makes a run's many answers cheap to hold."""
    usage = response.usage
    try:
        usage = shared.setdefault(("usage", *sorted(usage.items())), usage)
    except TypeError:  # a value that cannot be a key (not what biascheck writes): kept as it is
        pass
    finish, served, fingerprint = (
        shared.setdefault(v, v) if isinstance(v, str) else v for v in (response.finish_reason, response.served_model, response.system_fingerprint)
    )
    text = shared.setdefault(response.text, response.text) if isinstance(response.text, str) and len(response.text) <= 512 else response.text
    return StoredResponse(
        text, finish, usage, response.cost_usd, response.logprobs, response.truncated, served, fingerprint, response.loglikelihood, response.refused
    )


def _errorcode(exc: sqlite3.Error) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return None if code is None else code & 0xFF  # the primary code of an extended one


def one_name(path: Path) -> Path:
    """The name every process of this user on this machine opens the store at ``path`` by: the
    first name it was opened by, kept per file identity (device and inode) in a folder of symbolic
    links under the temporary folder. Two hard links are two paths to one file, and SQLite keeps a
    store's write-ahead log and its index next to the name it is given: runs through two links
    would each take their own lock and make every call, and each write the file through a log the
    other cannot see ("database disk image is malformed"). ``path`` itself when the store does not
    exist yet (it is created with that one name), has that one name, or the folder cannot be used.
    (A link made while a run has the store open, by its only name then, is not seen.)"""
    try:
        identity = path.stat()
    except OSError:
        return path
    if identity.st_nlink < 2:
        return path
    registry = Path(tempfile.gettempdir()) / f"biascheck-stores-{os.getuid()}"
    entry = registry / f"{identity.st_dev}-{identity.st_ino}"
    try:
        registry.mkdir(mode=0o700, exist_ok=True)
        if registry.lstat().st_uid != os.getuid() or not registry.is_dir():  # not this user's: unused
            return path
        with open(registry / ".lock", "a") as handle:  # one process at a time checks and sets a name
            fcntl.flock(handle, fcntl.LOCK_EX)
            known = Path(os.readlink(entry)) if entry.is_symlink() else None
            with suppress(OSError):
                if known is not None and os.path.samestat(known.stat(), identity):
                    return known
            # Unknown, or a name that now is another file's (its inode reused): this one.
            staged = registry / f".{entry.name}.{os.getpid()}"
            staged.unlink(missing_ok=True)
            os.symlink(path, staged)
            os.replace(staged, entry)
    except OSError:
        return path
    return path


class ResponseStore:
    def __init__(self, path: Path | str):
        path = Path(path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise BiascheckError(
                path, None, f"cannot open the response store ({exc.strerror})", f"point {option('cache')} at a writable path"
            ) from None
        # One name for one store, however it is reached (symlinks, hard links): SQLite names the
        # -wal and -shm files after the path it opens, and exclusive() locks a file next to it.
        self.path = one_name(path.resolve())
        self._lock_path = self.path.with_name(self.path.name + ".lock")
        try:
            self._db = sqlite3.connect(self.path, timeout=_BUSY_WAIT_S, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise BiascheckError(self.path, None, f"cannot open the response store ({exc})", "point --biascheck-cache at a writable path") from None
        self._db.text_factory = _decode
        try:
            self._open()
        except sqlite3.Error as exc:
            self._db.close()
            if _errorcode(exc) == sqlite3.SQLITE_NOTADB:  # maybe a file of the user's: never "delete it"
                raise BiascheckError(self.path, None, f"not a usable response store (not an SQLite database: {exc})", FIX_OTHER_FILE) from None
            if _errorcode(exc) == sqlite3.SQLITE_CORRUPT:
                raise BiascheckError(
                    self.path, None, f"not a usable response store ({exc})", f"delete it (its answers are asked again) or {FIX_OTHER_FILE}"
                ) from None
            raise self._write_error(exc, "cannot initialise the response store") from None
        except BaseException:
            self._db.close()
            raise

    def _open(self) -> None:
        """Check what the file is, then make it a current store: nothing is written to a file that
        is not empty, not a store of ours and not one of an earlier biascheck."""
        layout = _read_layout(self._db)
        self._check(layout)
        if not layout.is_current():
            # Re-read under the write lock: another process (an xdist worker) may have got here first.
            with self._transaction():
                layout = _read_layout(self._db)
                self._check(layout)
                if not layout.is_current():
                    self._initialise(layout)
        self._use_wal()
        self._db.execute("PRAGMA synchronous=NORMAL")

    def _check(self, layout: _Layout) -> None:
        _check_layout(self.path, layout, FIX_OTHER_FILE)

    def _initialise(self, layout: _Layout) -> None:
        """Create what is missing and mark the file as ours, in the caller's transaction."""
        for table, columns in _TABLES.items():
            if table not in layout.tables:
                self._db.execute(f"CREATE TABLE {table} ({columns})")
        for column, definition in _ADDED_COLUMNS.items():
            if "responses" in layout.tables and column not in layout.tables["responses"]:
                try:
                    self._db.execute(f"ALTER TABLE responses ADD COLUMN {column} {definition}")
                except sqlite3.OperationalError as exc:
                    if "duplicate column" not in str(exc):  # an earlier biascheck migrated it first
                        raise
        self._db.execute("INSERT OR IGNORE INTO meta VALUES ('version', ?)", (STORE_VERSION,))
        self._db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def _use_wal(self) -> None:
        """Switch the store to WAL once. SQLite does not wait for other connections' locks before that
        switch (no busy handler), so a worker opening a new store with others retries it."""
        deadline = time.monotonic() + _BUSY_WAIT_S
        while self._db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            try:
                self._db.execute("PRAGMA journal_mode=WAL")
            except sqlite3.OperationalError as exc:
                if _errorcode(exc) not in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED) or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    def _write_error(self, exc: sqlite3.Error, problem: str) -> StoreWriteError:
        code = _errorcode(exc)
        fix = _CAUSES.get(code, "fix the cause") if code is not None else "fix the cause"
        return StoreWriteError(
            self.path,
            None,
            f"{problem} ({exc}); the answers already stored are kept",
            f"{fix}, then run again: answered requests are not asked again",
        )

    @contextmanager
    def _reading(self) -> Iterator[None]:
        """A read that fails (pages damaged after the header: 'database disk image is malformed') is one line."""
        try:
            yield
        except sqlite3.DatabaseError as exc:
            fix = _CAUSES.get(_errorcode(exc) or 0, "fix the cause")
            raise BiascheckError(self.path, None, f"cannot read the response store ({exc})", fix) from None

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> ResponseStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _rows(self, columns: str, keys: Iterable[str], where: str = "", *, usable: bool = True) -> Iterator[tuple]:
        """``columns`` of the rows of ``keys`` (with ``usable``, those of unusable replies left
        out), queried 500 keys at a time (SQLite's variable limit)."""
        keys = list(keys)
        if usable:
            where = " AND refused IS NULL" + where
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            marks = ",".join("?" * len(chunk))
            with self._reading():
                yield from self._db.execute(f"SELECT {columns} FROM responses WHERE key IN ({marks}){where}", chunk)

    def get_many(self, keys: Iterable[str]) -> dict[str, StoredResponse]:
        """The stored answers of ``keys``. A reply stored as unusable is left out (asked again); so is
        a damaged row, or one holding values no reply can hold (asked again, then replaced by
        ``put``), with one StoreWarning per call."""
        found: dict[str, StoredResponse] = {}
        damaged = 0
        shared: dict[object, Any] = {}
        columns = "key, text, finish_reason, usage, cost_usd, logprobs, truncated, served_model, system_fingerprint, loglikelihood"
        with collector_paused():  # a full HBB's 773,500 answers: see biascheck.core.garbage
            for key, *row in self._rows(columns, keys):
                response = _response(row, shared)
                if response is None:
                    damaged += 1
                else:
                    found[key] = response
        if damaged:
            warnings.warn(
                f"{self.path}: {damaged} damaged stored answer{'s' if damaged > 1 else ''} read as missing: asked again and replaced",
                StoreWarning,
                stacklevel=2,
            )
        return found

    def dropped_params(self, keys: Iterable[str]) -> dict[str, str]:
        """Parameters left out of the stored answers of ``keys`` (the server refused them), with why."""
        found: dict[str, str] = {}
        # instr() first: only the rare rows that record a dropped parameter are parsed.
        for (request,) in self._rows("request", keys, " AND instr(request, '\"params_dropped\"') > 0"):
            try:
                dropped = _json(request).get("params_dropped")
            except (ValueError, TypeError, AttributeError):  # damaged: get_many asks its key again anyway
                continue
            if isinstance(dropped, dict):
                for name, reason in dropped.items():
                    if isinstance(reason, str):
                        found.setdefault(name, reason)
        return found

    def refuse(self, key: str, reason: str) -> None:
        """Mark the stored reply of ``key`` unusable (an answer mode's check found it so): it stays,
        for what it cost, and is asked again by the next run instead of being served."""
        self._write("cannot mark an answer unusable", "UPDATE responses SET refused = ? WHERE key = ? AND refused IS NULL", (reason, key))

    def put(self, key: str, model: str, request: dict[str, Any], response: StoredResponse) -> None:
        # One transaction per answer: what was answered is never lost to a kill.
        try:
            self._db.execute(_INSERT_RESPONSE, _row(key, model, request, response, time.time()))
        except sqlite3.Error as exc:
            raise self._write_error(exc, "cannot store an answer") from None

    def count(self, keys: Iterable[str] | None = None) -> int:
        """How many answers are stored: all, or those of ``keys`` (without reading them)."""
        if keys is None:
            with self._reading():
                return self._db.execute("SELECT count(*) FROM responses").fetchone()[0]
        return sum(1 for _ in self._rows("1", keys))

    def stored_keys(self, keys: Iterable[str], *, unusable_too: bool = False) -> set[str]:
        """Which of ``keys`` have an answer stored (without reading them): what a dry run subtracts.
        ``unusable_too``: or a reply stored as unusable (which a run asks again)."""
        return {key for (key,) in self._rows("key", keys, usable=not unusable_too)}

    def record_run_errors(self, run_id: str, errors: dict[str, str]) -> None:
        try:
            with self._transaction():
                self._db.executemany("INSERT OR REPLACE INTO run_errors VALUES (?, ?, ?)", [(run_id, k, e) for k, e in errors.items()])
        except sqlite3.Error as exc:
            raise self._write_error(exc, "cannot record the run's errors") from None

    def run_errors(self, run_id: str) -> dict[str, str]:
        with self._reading():
            rows = self._db.execute("SELECT key, error FROM run_errors WHERE run_id = ?", (run_id,)).fetchall()
        return {key: error for key, error in rows if isinstance(key, str) and isinstance(error, str)}

    def put_many(self, rows: Sequence[tuple[str, str, dict[str, Any], StoredResponse]]) -> None:
        """Store (key, model, request, response) rows in one transaction: a batch's answers, which
        arrive together, at thousands per second; a kill keeps the transactions already committed."""
        now = time.time()
        try:
            with self._transaction():
                self._db.executemany(_INSERT_RESPONSE, [_row(key, model, request, response, now) for key, model, request, response in rows])
        except sqlite3.Error as exc:
            raise self._write_error(exc, "cannot store a batch's answers") from None

    # --- provider batches -----------------------------------------------------------------------

    def add_batch(self, record: BatchRecord) -> None:
        """Record a batch before it is created at the provider (its ``batch_id`` still None)."""
        row = (record.id, record.provider, record.model, record.batch_id, json.dumps(list(record.keys)), record.state)
        self._write(
            "cannot record a batch",
            "INSERT INTO batches VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (*row, record.submitted_at, record.updated_at, record.detail),
        )

    def update_batch(self, record: BatchRecord) -> None:
        self._write(
            "cannot record a batch's state",
            "UPDATE batches SET batch_id = ?, state = ?, updated_at = ?, detail = ? WHERE id = ?",
            (record.batch_id, record.state, record.updated_at, record.detail, record.id),
        )

    def forget_batch(self, record_id: str) -> None:
        """A submission that never became a batch (its upload failed): its keys are free again."""
        self._write("cannot record a batch", "DELETE FROM batches WHERE id = ?", (record_id,))

    def _write(self, problem: str, statement: str, values: tuple) -> None:
        try:
            with self._transaction():
                self._db.execute(statement, values)
        except sqlite3.Error as exc:
            raise self._write_error(exc, problem) from None

    def batches(self, model: str) -> list[BatchRecord]:
        """The batches submitted for ``model``, oldest first; a damaged row is left out."""
        with self._reading():
            rows = self._db.execute("SELECT * FROM batches WHERE model = ? ORDER BY submitted_at, id", (model,)).fetchall()
        found = []
        for row in rows:
            try:
                keys = _json(row[4])
                if not (isinstance(keys, list) and all(isinstance(k, str) for k in keys)):
                    continue
                found.append(BatchRecord(row[0], row[1], row[2], row[3], tuple(keys), row[5], row[6], row[7], row[8]))
            except (ValueError, TypeError):
                continue
        return found

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            if self._db.in_transaction:  # SQLite rolls some failures (a full disk) back itself
                self._db.execute("ROLLBACK")
            raise
        try:
            self._db.execute("COMMIT")
        except BaseException:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise

    @contextmanager
    def exclusive(self, *, wait: bool = True) -> Iterator[None]:
        """Hold the store's call lock: one process of a run makes the calls, the others wait and read.
        ``wait=False`` (a merge): refuse in one line while another process holds it."""
        try:
            handle = open(self._lock_path, "a")  # noqa: SIM115 - closed by the with below
        except OSError as exc:
            raise StoreWriteError(
                self._lock_path, None, f"cannot create the store's lock file ({exc.strerror})", f"point {option('cache')} at a writable path"
            ) from None
        with handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                raise BiascheckError(
                    self.path,
                    None,
                    f"in use by another biascheck process (a run or a merge holds {self._lock_path.name})",
                    "let it finish, then try again",
                ) from None
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


# --- merging the stores of sharded runs -----------------------------------------------------------

# What makes two stored answers to one key the same answer; when, how much and at what cost it was
# asked may differ (a retried shard), and the answer already in the merged store is kept.
_ANSWER_COLUMNS = ("model", "request", "text", "finish_reason", "logprobs", "truncated", "loglikelihood")


@dataclass(frozen=True, slots=True)
class MergeResult:
    added: dict[str, int]  # input path -> answers it added
    present: dict[str, int]  # input path -> answers the merged store already had
    total: int  # answers in the merged store


def merge_stores(out: Path | str, inputs: Sequence[Path | str]) -> MergeResult:
    """Merge response stores (e.g. one per shard job) into ``out``, which may exist already.

    In place, in one transaction, under the lock a run takes (:meth:`ResponseStore.exclusive`): a
    merge into a store a live run holds is refused, and the file is never replaced, so a process
    that has it open (a run waiting for the lock, a reader) keeps reading and writing the merged
    store. A failure, or a kill, leaves ``out``'s answers as they were. Idempotent: merging the same
    stores again adds nothing. Every input must be a store of this schema, opened read-only. Two
    different answers to one request key are an error naming it, never a silent choice."""
    out = Path(out).resolve()
    sources = [Path(p).resolve() for p in inputs]
    for source in sources:
        _check_mergeable(source)
    if not out.parent.is_dir():
        raise BiascheckError(out, None, f"{out.parent} is not a folder", "create it first, or name a store in an existing folder")
    if out.exists():
        _check_mergeable(out, empty_ok=True)
    _remove_dead_mergers_files(out)
    added: dict[str, int] = {}
    present: dict[str, int] = {}
    with ResponseStore(out) as store, store.exclusive(wait=False):
        try:
            with store._transaction():
                for source in sources:
                    if not os.path.samefile(source, store.path):  # (a hard link to ``out`` is ``out``)
                        added[str(source)], present[str(source)] = _merge_into(store._db, source)
            total = store.count()
        except sqlite3.Error as exc:
            fix = _CAUSES.get(_errorcode(exc) or 0, "fix the cause")
            raise BiascheckError(
                out, None, f"cannot write the merged store ({exc}); its answers are as they were", f"{fix}, then merge again"
            ) from None
    return MergeResult(added, present, total)


_MERGE_CHUNK = 500  # rows compared and inserted at once (SQLite's variable limit: 999 at least)


def _merge_into(db: sqlite3.Connection, source: Path) -> tuple[int, int]:
    """Add ``source``'s answers and batches to ``db`` in its open transaction: (answers added,
    answers it already had). A failure to read ``source`` names it, not the merged store."""
    columns = _COLUMNS["responses"]
    answer = [columns.index(c) for c in _ANSWER_COLUMNS]
    insert = f"INSERT INTO responses ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
    added = offered = 0
    for chunk in _source_rows(source, f"SELECT {', '.join(columns)} FROM responses"):
        offered += len(chunk)
        marks = ",".join("?" * len(chunk))
        held = {
            row[0]: row[1:]
            for row in db.execute(f"SELECT key, {', '.join(_ANSWER_COLUMNS)} FROM responses WHERE key IN ({marks})", [r[0] for r in chunk])
        }
        conflicts = [row[0] for row in chunk if row[0] in held and tuple(row[i] for i in answer) != held[row[0]]]
        if conflicts:
            raise BiascheckError(
                source,
                None,
                f"holds answers that differ from the merged store's for the same request (keys {', '.join(k[:12] for k in conflicts[:3])}...)",
                "merge stores of one model and revision whose shards did not overlap; rerun a shard into a fresh store",
            )
        new = [row for row in chunk if row[0] not in held]
        db.executemany(insert, new)
        added += len(new)
    # A shard's batches go with it: a batch it submitted without waiting is collected by the merged run.
    batch_columns = _COLUMNS["batches"]
    for chunk in _source_rows(source, f"SELECT {', '.join(batch_columns)} FROM batches"):
        db.executemany(f"INSERT OR IGNORE INTO batches VALUES ({', '.join('?' * len(batch_columns))})", chunk)
    return added, offered - added


def _source_rows(source: Path, query: str) -> Iterator[list[tuple]]:
    """The rows of ``query`` on ``source``, read-only, one snapshot, in chunks; a store that cannot
    be read (damaged pages) is named."""
    try:
        with closing(_read_only(source)) as db:
            db.execute("BEGIN")  # one snapshot of a store a shard may still be writing
            cursor = db.execute(query)
            while chunk := cursor.fetchmany(_MERGE_CHUNK):
                yield chunk
            db.execute("COMMIT")
    except sqlite3.Error as exc:
        raise BiascheckError(
            source, None, f"cannot be read ({exc}); nothing of it was merged", "rerun its shard into a fresh store, or merge without it"
        ) from None


def _remove_dead_mergers_files(out: Path) -> None:
    """What merges of earlier biascheck releases, killed, left beside ``out`` (they built the merge
    in ``.OUT.merging-PID`` and its journal): removed once that process is gone. A merge now
    writes ``out`` in place and leaves nothing of its own."""
    pattern = re.compile(re.escape(f".{out.name}.merging-") + r"(\d+)(-journal|-wal|-shm)?")
    for entry in out.parent.iterdir():
        match = pattern.fullmatch(entry.name)
        if match and not _alive(int(match.group(1))):
            entry.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    if pid == os.getpid():  # this merge writes no such file: one of an earlier process with this id
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process
        return True
    return True


def _read_only(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True, isolation_level=None)
    db.text_factory = _decode
    return db


def _check_mergeable(path: Path, *, empty_ok: bool = False) -> None:
    """A store of this biascheck's schema; older or foreign files are refused, never upgraded here.
    ``empty_ok``: an empty file is fine too (the merged store, made one)."""
    fix = f"give the stores the runs wrote ({option('cache')})"
    if not path.is_file():
        raise BiascheckError(path, None, "no such response store", fix)
    try:
        with closing(_read_only(path)) as db:
            layout = _read_layout(db)
    except sqlite3.Error as exc:
        raise BiascheckError(path, None, f"not a usable response store ({exc})", fix) from None
    _check_layout(path, layout, fix)
    if layout.is_empty():
        if empty_ok:
            return
        raise BiascheckError(path, None, "is an empty file, not a response store", fix)
    if not layout.is_current():
        found = layout.user_version if layout.application_id == APPLICATION_ID else "1 (unmarked)"
        raise BiascheckError(
            path,
            None,
            f"store schema {found} is not this biascheck's ({SCHEMA_VERSION})",
            "merge stores written by one biascheck version (a run with this one upgrades a store in place)",
        )
