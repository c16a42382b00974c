"""What every HTML page of biascheck writes text with: escaping, the language of a piece of text,
and its rough rendered width (for the charts' labels). Standard library only."""

from __future__ import annotations

import re
import unicodedata
from html import escape
from typing import Any

from biascheck.core import format as fmt

_HANGUL = re.compile("[\u1100-\u11ff\u3130-\u318f\uac00-\ud7a3]")
_HAN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


def esc(value: Any) -> str:
    return escape("" if value is None else str(value), quote=True)


def fmt_int(value: Any) -> str:
    return esc(fmt.count(value))


def lang(text: Any) -> str:
    """``lang="ko"`` on elements holding Korean text, ``lang="zh"`` on Chinese text (Han characters
    without Hangul), so browsers pick the language's fonts (report.css names Korean and Chinese
    ones for each) and line breaking."""
    if not isinstance(text, str):
        return ""
    if _HANGUL.search(text):
        return ' lang="ko"'
    return ' lang="zh"' if _HAN.search(text) else ""


def verdict_class(verdict: Any) -> str:
    return "v-" + re.sub(r"[^a-z0-9]+", "-", str(verdict).lower()).strip("-")


def text_width(text: str, size: float) -> float:
    """Rough rendered width: wide (Hangul, CJK) characters ~1 em, others ~0.6 em."""
    return sum(size * (1.0 if unicodedata.east_asian_width(ch) in "WF" else 0.6) for ch in text)


def shorten(text: str, size: float, width: float) -> str:
    """``text`` cut to fit ``width`` (whole characters, so never half a Hangul syllable) plus an ellipsis."""
    if text_width(text, size) <= width:
        return text
    while text and text_width(text + "\u2026", size) > width:
        text = text[:-1]
    return text + "\u2026"
