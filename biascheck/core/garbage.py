"""Python's cyclic garbage collector, kept off biascheck's many long-lived objects.

Building a suite's cases, a run's requests or its outcomes makes hundreds of thousands of objects
that form no reference cycles and all stay alive; the collector, triggered every few hundred
allocations, traverses them again and again meanwhile (in a process that already holds many, a
test process with litellm loaded, it took most of the time). It is paused for such a block
(:func:`collector_paused`) and resumes after it; reference counting frees what the block drops,
as always.

What lives on is frozen (:func:`freeze`, ``gc.freeze``) while the model calls run, and by the
pytest plugin from collection to the session's end: each full collection would walk it all. The
freezes nest: the heap is unfrozen (``gc.unfreeze``) when the outermost one thaws, so the calls of
a pytest session leave frozen what its collection froze (pytest's garbage checks at its end, one
full collection each, then walk only what is new).

At the process's exit the heap is frozen once more (:func:`freeze_at_exit`, registered by the
first :func:`collector_paused`): the interpreter's shutdown otherwise runs full collections over
everything left, a million objects after a KoBBQ session, which took longer than the rest of an
interrupted run's ending. Objects are still freed by reference counting as the modules are
cleared; only garbage in reference cycles is left to the operating system, as Python itself
leaves whatever still exists at exit (its ``__del__`` may not run).
"""

from __future__ import annotations

import atexit
import gc
from collections.abc import Iterator
from contextlib import contextmanager

_frozen = 0  # freezes not yet thawed (see freeze)
_at_exit = False


@contextmanager
def collector_paused() -> Iterator[None]:
    """The block runs without cyclic garbage collection (unless it was off already)."""
    freeze_at_exit()
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def freeze() -> None:
    """Move every object the collector tracks out of its sight (``gc.freeze``) until the matching
    :func:`thaw`; freezes nest."""
    global _frozen
    _frozen += 1
    gc.freeze()


def thaw() -> None:
    """End a :func:`freeze`: the heap goes back in the collector's sight when no other freeze holds
    it (nothing when none does)."""
    global _frozen
    if _frozen == 0:
        return
    _frozen -= 1
    if _frozen == 0:
        gc.unfreeze()


def freeze_at_exit() -> None:
    """Freeze the heap when the process exits (an ``atexit`` handler, registered once): see the
    module's docstring."""
    global _at_exit
    if not _at_exit:
        _at_exit = True
        atexit.register(gc.freeze)
