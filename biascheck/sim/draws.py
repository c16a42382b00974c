"""Deterministic pseudo-random draws for the simulated model.

Every random decision the simulator makes (which answer, which reply style, whether an attempt
fails and how) is a pure function of the request, never of arrival order or concurrency: it is
a uniform number in [0, 1) read off the sha256 of the decision's name and its inputs.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

import numpy as np


def uniform(*parts: object) -> float:
    """A uniform number in [0, 1) determined by ``parts`` (JSON-serialisable values)."""
    text = json.dumps(parts, ensure_ascii=False, separators=(",", ":"))
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def pick(count: int, *parts: object) -> int:
    """A uniform index in ``range(count)`` determined by ``parts``."""
    return min(int(uniform(*parts) * count), count - 1)


def encoded_keys(keys: Sequence[str]) -> list[bytes]:
    """Keys as :func:`uniforms` takes them: their JSON text, UTF-8 encoded."""
    return [json.dumps(key, ensure_ascii=False).encode() for key in keys]


def uniforms(prefix: tuple[object, ...], keys: Sequence[bytes], suffix: tuple[object, ...] = ()) -> np.ndarray:
    """``uniform(*prefix, key, *suffix)`` for many keys at once (float64 array, bit for bit the same).

    ``keys`` are the string keys as :func:`encoded_keys` gives them, so a caller drawing many times
    over the same keys encodes them once: the JSON text of ``[*prefix, key, *suffix]`` is the
    texts of its parts, as :func:`uniform` writes it."""
    head = json.dumps(list(prefix), ensure_ascii=False, separators=(",", ":"))[:-1] + ("," if prefix else "")
    tail = ("," + json.dumps(list(suffix), ensure_ascii=False, separators=(",", ":"))[1:] if suffix else "]").encode()
    start = hashlib.sha256(head.encode())
    digests = []
    for key in keys:
        h = start.copy()
        h.update(key)
        h.update(tail)
        digests.append(h.digest()[:8])
    # uint64 -> float64 rounds to nearest as Python's int / 2**64 does; dividing by 2**64 is exact.
    return np.frombuffer(b"".join(digests), dtype=">u8").astype(np.float64) / 2.0**64
