"""Reports a person reads (issue 28, item 7): fonts for Korean and Chinese, the sample browser of
report.html (filters, prompt beside reply, bounded, hostile replies kept text), the default report
folder and a failing check printed once."""

from __future__ import annotations

import re
from importlib import resources

from biascheck.reporting.markup import lang


def css_rules(css: str) -> list[tuple[str, str]]:
    css = re.sub(r"/\*.*?\*/", "", css, flags=re.S)
    return [(selector.strip(), body) for selector, body in re.findall(r"([^{}]+)\{([^{}]*)\}", css)]


def test_the_style_sheet_falls_back_to_korean_and_chinese_fonts():
    css = resources.files("biascheck.reporting").joinpath("report.css").read_text("utf-8")
    rules = dict(css_rules(css))
    body = rules["body"]
    for font in ('"Noto Sans CJK KR"', '"Malgun Gothic"', '"PingFang SC"', '"Noto Sans CJK SC"', '"Microsoft YaHei"'):
        assert font in body, font
    # The Korean and Chinese fonts come before the Latin fallbacks, which have no such glyphs.
    assert body.index('"Noto Sans CJK SC"') < body.index("Arial")
    assert '"Noto Sans CJK SC"' in rules[":where(:lang(zh))"] and "word-break: normal" in rules[":where(:lang(zh))"]
    assert '"Noto Sans CJK KR"' in rules[":where(:lang(ko))"]


def test_text_is_marked_with_its_language():
    assert lang("할머니가 손자에게") == ' lang="ko"'
    assert lang("谁更可能不擅长使用电脑？") == ' lang="zh"'
    assert lang("漢字 and 한글") == ' lang="ko"'  # Korean with Hanja is Korean
    assert lang("grandmother") == "" and lang(None) == ""
