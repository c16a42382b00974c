"""Python's cyclic garbage collector, paused while biascheck builds many objects at once.

Building a suite's cases, a run's requests or its outcomes makes hundreds of thousands of objects
that form no reference cycles and all stay alive; the collector, triggered every few hundred
allocations, traverses them again and again meanwhile (in a process that already holds many, a
test process with litellm loaded, it took most of the time). It is paused for such a block and
resumes after it; reference counting frees what the block drops, as always.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """The block runs without cyclic garbage collection (unless it was off already)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
