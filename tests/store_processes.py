"""What a store test's child processes run. Their own module, importing the store alone: a spawned
child imports the module of its target, and test_store.py's imports (pytest, hypothesis) cost a
child about a second of CPU, some forty children a test run."""

from __future__ import annotations

from biascheck.execution.store import ResponseStore, StoredResponse, request_key

ANSWER = StoredResponse("A", "stop", {"prompt_tokens": 3, "completion_tokens": 1}, 0.001, {"A": -0.1})
REQUEST = {"messages": [{"role": "user", "content": "Q?"}], "params": {"temperature": 0}, "sample": 0}


def key(n: int) -> str:
    return request_key("m", "e", [{"role": "user", "content": f"question {n}"}], {}, 0)


def open_and_put(path: str, n: int, barrier) -> None:
    barrier.wait()
    with ResponseStore(path) as store:
        store.put(key(n), "m", REQUEST, ANSWER)


def run_through(path: str, barrier, paid) -> None:
    """A run's part in a store: under its lock, "call" (put) the requests not stored yet."""
    barrier.wait()
    with ResponseStore(path) as store, store.exclusive():
        missing = [n for n in range(20) if key(n) not in store.get_many([key(n) for n in range(20)])]
        for n in missing:
            store.put(key(n), "m", REQUEST, ANSWER)
        with paid.get_lock():
            paid.value += len(missing)
