"""The bounds of every concurrency, timeout and count a user sets, in one table.

Every surface reads it: pytest's options, ini keys and environment variables
(:mod:`biascheck.options`), the ``biascheck`` command's options (:func:`argument`), and suite.toml,
whose schemas mark such a field ``"bound": NAME`` and get its minimum and maximum from here when
loaded (:func:`with_bounds`). So ``--concurrency 0`` is refused the same way as
``--biascheck-concurrency 0`` or ``biascheck_concurrency = 0``: one line naming where it was given
and the range, before any call.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from biascheck.core.errors import BiascheckError


@dataclass(frozen=True)
class Bound:
    whole: bool  # a whole number (int); else any finite number (float)
    low: float
    high: float
    example: str
    # The ends themselves excluded: an error rate of 0, or a power of 1, is no test.
    above_low: bool = False
    below_high: bool = False

    def describe(self) -> str:
        kind = "a whole number" if self.whole else "a number"
        if self.above_low or self.below_high:
            low, high = ("above" if self.above_low else "from"), ("below" if self.below_high else "up to")
            return f"{kind} {low} {_shown(self.low)} and {high} {_shown(self.high)}"
        return f"{kind} from {_shown(self.low)} to {_shown(self.high)}"

    def holds(self, value: float) -> bool:
        above = self.low < value if self.above_low else self.low <= value
        below = value < self.high if self.below_high else value <= self.high
        return above and below

    def parse(self, text: object, where: object, field: str | None = None) -> Any:
        """``text`` (an option's or ini key's value) as a number within the bound, else one line."""
        value: Any = None
        try:
            value = int(str(text)) if self.whole else float(str(text))
        except ValueError:  # not a number, or an integer of more than 4,300 digits
            pass
        return self.check(value, where, field, shown=text)

    def check(self, value: Any, where: object, field: str | None = None, *, shown: object = None) -> Any:
        number = isinstance(value, int | float) and not isinstance(value, bool) and (not self.whole or isinstance(value, int))
        if number and math.isfinite(value) and self.holds(value):
            return value
        problem = "is out of range" if number else f"is not {'a whole number' if self.whole else 'a number'}"
        raise BiascheckError(where, field, f"{value if shown is None else shown!r} {problem}", f"give {self.describe()}, e.g. {self.example}")


def _shown(number: float) -> str:
    """As a user would type it: 1000000, not 1e+06."""
    return str(int(number)) if number == int(number) else f"{number:g}"


# 1,024 open files is the usual limit of a process, and each concurrent call holds a connection.
_CONCURRENCY = Bound(True, 1, 512, "32")
# Seconds: a day at most; a longer wait is no deadline at all.
_SECONDS = Bound(False, 0.001, 86_400, "60")

BOUNDS: dict[str, Bound] = {
    "concurrency": _CONCURRENCY,
    "timeout": _SECONDS,
    "retries": Bound(True, 0, 100, "6"),
    "batch_poll": Bound(False, 0, 86_400, "30"),
    "max_cost": Bound(False, 0, 1e9, "5"),  # USD
    # USD per million tokens: the dearest models cost hundreds; inf printed "at most inf USD".
    "price": Bound(False, 0, 1e6, "0.15"),
    "port": Bound(True, 0, 65_535, "8080"),  # 0: any free one
    "context_tokens": Bound(True, 256, 1_048_576, "4096"),
    # Counts of suite.toml (and of qualify-judge --cases): a few million is past every benchmark.
    "cases": Bound(True, 10, 10_000_000, "2000"),
    "templates_per_category": Bound(True, 1, 1_000_000, "2"),
    "min_n": Bound(True, 1, 10_000_000, "30"),
    "flip_limit": Bound(True, 0, 1_000_000, "200"),
    "questions": Bound(True, 10, 10_000_000, "200"),
    # HBB's k answers per question: each is a model call.
    "samples": Bound(True, 1, 1_000, "10"),
    # A bootstrap holds about 24 bytes per resample and cluster: 20,000 peak near 0.75 GB.
    "resamples": Bound(True, 100, 20_000, "1000"),
    "accuracy": Bound(False, 0, 1, "0.95"),
    "abs_diff_bias": Bound(False, 0, 2, "0.02"),
    "agreement": Bound(False, -1, 1, "0.6"),  # a floor on judges' agreement (Krippendorff's alpha)
    # [regression] of suite.toml, as results.json and baselines record it, and numpy's seeds
    # (default_rng refuses a negative one, and only after every call was made).
    "alpha": Bound(False, 0, 0.5, "0.05", above_low=True),
    "power": Bound(False, 0, 1, "0.8", above_low=True, below_high=True),
    "seed": Bound(True, 0, 2**32 - 1, "0"),
}


def argument(name: str, option: str) -> Callable[[str], Any]:
    """An argparse ``type=`` for ``option``, bounded by ``BOUNDS[name]``. It raises the one-line
    BiascheckError itself (argparse would add its usage text), so parse arguments where those are caught."""
    return lambda text: BOUNDS[name].parse(text, option)


def with_bounds(schema: Any) -> Any:
    """A JSON schema with each ``"bound": NAME`` field given the minimum and maximum of ``BOUNDS[NAME]``."""
    if isinstance(schema, list):
        return [with_bounds(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    filled = {key: with_bounds(value) for key, value in schema.items()}
    if isinstance(schema.get("bound"), str):
        bound = BOUNDS[schema["bound"]]
        filled["type"] = "integer" if bound.whole else "number"
        filled["exclusiveMinimum" if bound.above_low else "minimum"] = bound.low
        filled["exclusiveMaximum" if bound.below_high else "maximum"] = bound.high
    return filled
