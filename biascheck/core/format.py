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

Text from outside biascheck (a model or served model name, a system fingerprint, an error or
refusal, a reply, a prompt, a suite, category or file name) goes into a Markdown report (report.md,
comparison.md, summary.md, compare.md, the job summary) through :func:`md_text` alone, or
:func:`md_fence` for a block shown verbatim: there it stays text, whatever it says.
"""

from __future__ import annotations

import math
import re
import zlib
from collections.abc import Iterable, Mapping
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
    if not isinstance(threshold, Mapping):
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


class Markdown(str):
    """Markdown that biascheck wrote itself (``**FAIL**``): :func:`md_text` keeps it as it is."""


def strong(text: Any) -> Markdown:
    """``text`` in bold, itself escaped."""
    return Markdown(f"**{md_text(text)}**")


# Characters that are not text: controls (an ANSI escape's ESC, NUL) and the bidi controls that
# reorder what follows them on screen (U+202A-U+202E, U+2066-U+2069).
_INVISIBLE = re.compile("[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f\u202a-\u202e\u2066-\u2069]")

# What Markdown (CommonMark, GFM, GitHub) reads as syntax anywhere in a line, escaped by a
# backslash: \ ` * | ~ $ # @ (@: e-mail autolinks; $: GitHub's math), an underscore unless it is
# inside a word (where it cannot emphasise: snake_case names stay readable), a "]" before the "("
# or "[" of a link or the ":" of a link definition (so "[0.1, 0.2]" stays as it is: without a
# definition "[x]" links nowhere), and, by a backslash before them, the "://" of a scheme and the
# "." of "www." (GFM's autolinks).
_MD_SYNTAX = re.compile(r"[\\`*|~$#@]|\](?=[(\[:])|(?<![^\W_])_|_(?![^\W_])|(?<=[A-Za-z])(?=://)|(?<=(?<![\w\\])(?i:www))(?=\.)")
# What opens a block at the start of a line, escaped by a backslash before its last character: a
# quote's ">", a task box's "[" ("[x]"), a list's "-" or "+" and an ordered list's "1." or "1)"
# before a space, a thematic break's or setext underline's "--" or "==" (so "-0.5", "0.25" and
# "[0.1, 0.2]" stay as they are).
_MD_LEAD = re.compile(r">|\[(?=[ xX]\])|(?:[-+=]|\d{1,9}[.)])(?=\s|$)|-(?=-)|=(?==)")
# What opens a tag, comment, autolink or entity, as HTML references: they are read the same in
# Markdown and in raw HTML around it (a <summary>), where a backslash is no escape.
_HTML_OPENING = re.compile(r"[<&](?=[A-Za-z0-9#/!?])")


def one_line(text: Any) -> str:
    """``text`` on one line: whitespace runs (line breaks of every kind among them) as one space,
    control and bidi characters dropped. None is empty."""
    return " ".join(_INVISIBLE.sub("", "" if text is None else str(text)).split())


def md_text(text: Any) -> str:
    """``text`` from outside as Markdown that shows it as written, on one line (:func:`one_line`):
    it can start no block (heading, list, quote, code, table row), and makes no tag, comment,
    link, image, autolink, emphasis, code span or math; a ``|`` cannot end a table cell. Also safe
    in raw HTML (a ``<summary>``), where only the backslashes of the escapes show. Markdown that
    biascheck wrote (:class:`Markdown`) is kept as it is. A line's text goes through it whole
    (``md_text(f"{name}: {note}")``): a "]" it ends with could make a link definition of the ":"
    written after it.

    GitHub's @mentions and #references are made after Markdown, from the text shown: those stay."""
    if isinstance(text, Markdown):
        return text
    line = _MD_SYNTAX.sub(lambda m: "\\" + m.group(), one_line(text))
    line = _HTML_OPENING.sub(lambda m: "&lt;" if m.group() == "<" else "&amp;", line)
    lead = _MD_LEAD.match(line)
    return line[: lead.end() - 1] + "\\" + line[lead.end() - 1 :] if lead else line


def md_row(cells: Iterable[Any]) -> str:
    """One GFM table row, each cell through :func:`md_text`: an unescaped ``|`` would end a cell
    and shift the rest of the row (the threshold ``|x| <= 0.05`` became an empty cell)."""
    return "| " + " | ".join(map(md_text, cells)) + " |"


def md_fence(text: Any, info: str = "text") -> list[str]:
    """``text`` as a fenced code block, shown verbatim line by line: the fence is longer than any
    run of backticks in it, so nothing inside can close it."""
    lines = [_INVISIBLE.sub("", line) for line in ("" if text is None else str(text)).splitlines()]
    longest = max((len(run) for run in re.findall(r"`+", "\n".join(lines))), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence + info, *lines, fence]


def flips_anchor(category: Any) -> str:
    """The anchor of a category's flips in comparison.md and report.html (``flips-<category>``),
    which a regressed check links to: letters, digits, ``_`` and ``-`` of any script; a name with
    other characters gets its CRC-32 added, so that two names never share one."""
    name = str(category)
    slug = re.sub(r"[^\w-]+", "-", name).strip("-")
    if slug != name:
        slug += f"-{zlib.crc32(name.encode('utf-8')):08x}"
    return f"flips-{slug}"
