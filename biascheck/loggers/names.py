"""The names a run's metrics take in a tracker: one mapping, used by every tracker, so that MLflow and
Weights & Biases show the same keys (docs/trackers.md, "Names").

A metric's key is ``<metric>`` overall and ``<metric>/<group>/<scope>`` for a category, label or
prompt (``diff_bias_amb/category/age``); its interval bounds add ``/ci_low`` and ``/ci_high``. Each
part (metric, group, scope) is escaped to ASCII letters, digits, ``_`` and ``-``: any other
character is written as its UTF-8 bytes, ``.XX`` each (upper-case hex), and an empty part as
``._``. MLflow accepts such keys (letters, digits, ``_ - . space /``, no empty or ``.`` path part),
and the mapping is injective: a part never holds ``/``, a ``.`` always starts an escape, and the
parts and suffixes of a key are read back in one way only. A key over :data:`LONGEST` characters
(MLflow's limit) keeps its first characters and ends in ``.H`` and a 64-bit digest of the whole.
"""

from __future__ import annotations

import hashlib
import re

LONGEST = 250  # MLflow's longest metric key
_PLAIN = re.compile(r"[A-Za-z0-9_-]")
BOUNDS = ("ci_low", "ci_high")


def escaped(part: str) -> str:
    """``part`` in the key alphabet: letters, digits, ``_`` and ``-`` kept, every other character
    as its UTF-8 bytes (``.XX`` each), the empty text as ``._``."""
    if not part:
        return "._"
    return "".join(char if _PLAIN.fullmatch(char) else "".join(f".{byte:02X}" for byte in char.encode("utf-8")) for char in part)


def metric_key(metric: str, group: str, scope: str, bound: str | None = None) -> str:
    """The key of a metric's value (``bound`` None) or of one of its interval bounds
    (``ci_low``, ``ci_high``), for ``group`` "overall" or a category, label or prompt ``scope``."""
    parts = [escaped(metric)] if group == "overall" else [escaped(metric), escaped(group), escaped(scope)]
    if bound is not None:
        parts.append(bound)
    return bounded("/".join(parts))


def bounded(key: str) -> str:
    """``key``, or, when longer than MLflow allows, its head and a digest of the whole (``.H`` then
    16 hex digits: ``H`` follows no other ``.``, so such a key is no escaped one)."""
    if len(key) <= LONGEST:
        return key
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]
    return key[: LONGEST - 18].rstrip("/") + ".H" + digest
