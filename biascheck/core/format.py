"""How every report writes a number: the terminal summary, report.md, comparison.md, the job
summary and report.html all format through these, so one value reads the same everywhere.

One convention per thing:

- a missing value (None, NaN, an infinity, not a number) is ``n/a``;
- values and interval bounds have 4 decimals: ``0.1200``, ``[0.1000, 0.1400]``;
- differences are signed: ``+0.0200``, ``[-0.0100, +0.0500]``;
- p-values have 3 decimals, or 2 significant digits below 0.001: ``0.012``, ``3.2e-05``
  (as in the regression explanations);
- thresholds are ASCII, as in the pytest failure messages: ``|x| <= 0.05``, ``x >= 0.9``;
- counts have thousands separators: ``1,234``; a cost is ``$0.0123``; a share ``80%``.

Nothing here escapes for a format; :func:`md_cell` makes a text one GFM table cell.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any

NA = "n/a"
THRESHOLD_WORDS = {"max_abs": "|x| <= {:g}", "max": "x <= {:g}", "min": "x >= {:g}"}


def number(value: Any) -> float | None:
    """A finite number or None (null, NaN, infinities, booleans and non-numbers all read as missing)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def value(x: Any, digits: int = 4) -> str:
    x = number(x)
    return NA if x is None else f"{x:.{digits}f}"


def signed(x: Any, digits: int = 4) -> str:
    x = number(x)
    return NA if x is None else f"{x:+.{digits}f}"


def bounds(ci: Any) -> tuple[float | None, float | None]:
    if not isinstance(ci, (list, tuple)) or len(ci) != 2:
        return None, None
    return number(ci[0]), number(ci[1])


def ci(interval: Any, digits: int = 4) -> str:
    lo, hi = bounds(interval)
    return NA if lo is None or hi is None else f"[{value(lo, digits)}, {value(hi, digits)}]"


def signed_ci(interval: Any, digits: int = 4) -> str:
    lo, hi = bounds(interval)
    return NA if lo is None or hi is None else f"[{signed(lo, digits)}, {signed(hi, digits)}]"


def exact(x: Any) -> str:
    """Six significant digits, for a tooltip that shows more than the table."""
    x = number(x)
    return NA if x is None else f"{x:.6g}"


def p_value(p: Any) -> str:
    p = number(p)
    if p is None:
        return NA
    return f"{p:.2g}" if p < 0.001 else f"{p:.3f}"


def threshold_items(threshold: Any) -> list[tuple[str, float]]:
    """A threshold's (kind, limit) pairs (``{"max_abs": 0.05}``), numbers only."""
    if not isinstance(threshold, dict):
        return []
    return [(str(kind), float(limit)) for kind, limit in threshold.items() if number(limit) is not None]


def threshold(limits: Any) -> str:
    """``{"max_abs": 0.05}`` -> ``|x| <= 0.05``; several limits joined by commas; none -> empty."""
    return ", ".join(THRESHOLD_WORDS.get(kind, kind + " {:g}").format(limit) for kind, limit in threshold_items(limits))


def count(n: Any) -> str:
    """A whole number with thousands separators; None -> n/a; anything else as written."""
    if isinstance(n, int) and not isinstance(n, bool):
        return f"{n:,}"
    return NA if n is None else str(n)


def usd(x: Any) -> str:
    x = number(x)
    return NA if x is None else f"${x:.4f}"


def percent(x: Any) -> str:
    x = number(x)
    return NA if x is None else f"{x:.0%}"


def md_cell(text: Any) -> str:
    """``text`` as the content of one GFM table cell (report.md, comparison.md, the step summary),
    shown as written. An unescaped ``|`` ends the cell: GitHub then shifts the rest of the row (the
    threshold ``|x| <= 0.05`` became an empty cell and the verdict ``x``). A backslash is doubled:
    before an escaped ``|`` it would be taken into the escape and vanish. A line break would end the
    row, so whitespace runs become one space; a ``<`` that could open an HTML tag is escaped."""
    text = " ".join(str(text).split()).replace("\\", "\\\\").replace("|", "\\|")
    return re.sub(r"<(?=[A-Za-z/!?])", r"\\<", text)


def md_row(cells: Iterable[Any]) -> str:
    return "| " + " | ".join(map(md_cell, cells)) + " |"
