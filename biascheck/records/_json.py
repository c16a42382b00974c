"""The file edge of the records: reading a JSON object's fields with one-line errors, freezing
what a record keeps of a document as it is (read-only mappings and tuples), and writing a record
back with the document's own key order.

A record keeps the order of its document's keys (``key_order``), so that a file read and written
again has the same bytes, and the keys it has no field for (``rest``), so that fields a newer
biascheck or a benchmark adds travel through unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from biascheck.core.errors import BiascheckError

FIX = "regenerate the file with biascheck"
EMPTY: Mapping[str, Any] = MappingProxyType({})


def freeze(value: Any) -> Any:
    """A JSON value made read-only: objects as read-only mappings, arrays as tuples."""
    if isinstance(value, Mapping):
        return MappingProxyType({key: freeze(item) for key, item in value.items()})
    if isinstance(value, list | tuple):
        return tuple(freeze(item) for item in value)
    return value


def thaw(value: Any) -> Any:
    """The JSON value of a frozen one (:func:`freeze`'s inverse)."""
    if isinstance(value, Mapping):
        return {key: thaw(item) for key, item in value.items()}
    if isinstance(value, tuple | list):
        return [thaw(item) for item in value]
    return value


_KINDS: dict[str, tuple[type, ...]] = {
    "a string": (str,),
    "an integer": (int,),
    "a number": (int, float),
    "a boolean": (bool,),
    "an object": (Mapping,),
    "an array": (list, tuple),
}


class Fields:
    """One JSON object of a document, read field by field; a missing or mistyped field is a
    :class:`BiascheckError` naming the file and the field's path."""

    def __init__(self, value: Any, where: str, path: str = ""):
        if not isinstance(value, Mapping):
            raise BiascheckError(where, path or None, f"is {_kind_of(value)}, not an object", FIX)
        self.value, self.where, self.path = value, where, path

    def _name(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def _check(self, key: str, item: Any, kind: str, nullable: bool) -> Any:
        if item is None and nullable:
            return None
        types = _KINDS[kind]
        if not isinstance(item, types) or (kind in ("an integer", "a number") and isinstance(item, bool)):
            raise BiascheckError(self.where, self._name(key), f"is {_kind_of(item)}, not {kind}", FIX)
        return item

    def req(self, key: str, kind: str, *, nullable: bool = False) -> Any:
        if key not in self.value:
            raise BiascheckError(self.where, self._name(key), "is missing", FIX)
        return self._check(key, self.value[key], kind, nullable)

    def opt(self, key: str, kind: str, *, nullable: bool = False) -> Any:
        """The field, or None when it is absent (or null, where ``nullable``)."""
        return self._check(key, self.value[key], kind, nullable) if key in self.value else None

    def obj(self, key: str) -> Fields:
        self.req(key, "an object")
        return Fields(self.value[key], self.where, self._name(key))

    def items(self, key: str) -> list[Any]:
        return list(self.req(key, "an array"))

    def frozen(self, key: str, kind: str = "an object", *, optional: bool = False, nullable: bool = False) -> Any:
        """A field kept as it is, read-only (None when absent and ``optional``)."""
        value = self.opt(key, kind, nullable=nullable) if optional else self.req(key, kind, nullable=nullable)
        return freeze(value)

    def strings(self, key: str) -> tuple[str, ...]:
        values = self.items(key)
        for index, item in enumerate(values):
            self._check(f"{key}.{index}", item, "a string", False)
        return tuple(values)

    def interval(self, key: str) -> tuple[float | None, float | None]:
        values = self.items(key)
        if len(values) != 2:
            raise BiascheckError(self.where, self._name(key), f"has {len(values)} items, not 2 (an interval)", FIX)
        return (self._check(f"{key}.0", values[0], "a number", True), self._check(f"{key}.1", values[1], "a number", True))

    def child(self, key: str, value: Any) -> Fields:
        return Fields(value, self.where, self._name(key))

    def rest(self, known: Iterable[str]) -> Mapping[str, Any]:
        """The fields no record field holds, read-only, in the document's order."""
        names = set(known)
        return freeze({key: value for key, value in self.value.items() if key not in names})

    def order(self) -> tuple[str, ...]:
        return tuple(self.value)


def _kind_of(value: Any) -> str:
    if value is None:
        return "null"
    for kind, types in _KINDS.items():
        if isinstance(value, types) and not (kind != "a boolean" and isinstance(value, bool)):
            return kind
    return type(value).__name__


def emit(
    required: Sequence[tuple[str, Any]],
    optional: Sequence[tuple[str, Any, bool]],
    rest: Mapping[str, Any],
    order: Sequence[str],
) -> dict[str, Any]:
    """A record's JSON object: the ``required`` fields; each ``(key, value, nullable)`` of
    ``optional`` unless its value is None (a ``nullable`` one is written as null when the document
    read had it); the ``rest``. Keys come in ``order`` (the document's), then any others."""
    had = set(order)
    values: dict[str, Any] = dict(required)
    for key, value, nullable in optional:
        if value is not None or (nullable and key in had):
            values[key] = value
    for key, value in rest.items():
        values.setdefault(key, thaw(value))
    ordered = {key: values.pop(key) for key in order if key in values}
    ordered.update(values)
    return ordered


def json_interval(ci: tuple[float | None, float | None]) -> list[float | None]:
    return [ci[0], ci[1]]


def frozen_or_none(value: Any) -> Any:
    return None if value is None else thaw(value)
