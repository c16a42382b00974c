"""The validator of the documents biascheck writes and reads back (results.json, baselines).

jsonschema-rs says whether a document holds, and jsonschema names the first error of one that does
not, in the words biascheck's one-line errors quote. jsonschema-rs is about a hundred times faster
(a KoBBQ results.json of 96 cases: 26 ms with jsonschema, 0.13 ms with it), and every run checks
the results.json it writes, and every ``biascheck diff`` reads two whole (a full KoBBQ's 34,200
cases took jsonschema about a second a pass).

A document holds where jsonschema says it holds. Where jsonschema-rs says no, or cannot read a value
(NaN, infinity, a lone surrogate, a key that is not a string), jsonschema decides: its ``$`` matches
before a final newline, its ``\\d`` any script's digits, and NaN is a number to it, where
jsonschema-rs says otherwise. The one value jsonschema-rs takes and jsonschema does not is a tuple
for an array, which no parsed document holds and a written one holds as the array it is written as.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

__all__ = ["DocumentValidator"]


class DocumentValidator:
    """A Draft 2020-12 schema's validator: :meth:`is_valid` fast, :meth:`iter_errors` jsonschema's."""

    def __init__(self, schema: dict[str, Any]) -> None:
        import jsonschema
        import jsonschema_rs

        self.schema = schema
        self._errors = jsonschema.Draft202012Validator(schema)
        self._holds = jsonschema_rs.Draft202012Validator(schema, validate_formats=False)  # as jsonschema: format is a note

    def is_valid(self, document: Any) -> bool:
        try:
            if self._holds.is_valid(document):
                return True
        except (ValueError, TypeError, OverflowError, RecursionError):  # a value it has no JSON for (UnicodeEncodeError is a ValueError)
            pass
        return bool(self._errors.is_valid(document))

    def iter_errors(self, document: Any) -> Iterator[Any]:
        return self._errors.iter_errors(document)
