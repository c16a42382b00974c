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


# --- the default report folder ----------------------------------------------------------------------


def test_the_default_report_folder_is_per_suite_and_per_shard():
    from pathlib import Path
    from types import SimpleNamespace

    from biascheck.reporting.write import default_report_dir

    def document(name: str, shard: str | None = None):  # what the folder is named for: a RunRecord's suite name and shard
        return SimpleNamespace(suite=SimpleNamespace(name=name), run=SimpleNamespace(shard=shard))

    assert default_report_dir([document("kobbq")]) == Path(".biascheck/reports/kobbq")
    assert default_report_dir([document("kobbq"), document("bbq")]) == Path(".biascheck/reports/kobbq+bbq")
    assert default_report_dir([document("hbb-full", "2/4")]) == Path(".biascheck/reports/hbb-full-shard-2-of-4")
    many = default_report_dir([document(f"suite-{k:03d}") for k in range(40)])
    assert many.name.startswith("suite-000+39-more-") and len(many.name) < 40


def test_a_run_without_the_option_writes_its_reports_to_the_default_folder_and_says_where(pytester, tiny_kobbq, data_dir, tmp_path):
    result = pytester.runpytest_inprocess(
        "--biascheck",
        str(tiny_kobbq),
        "--biascheck-model",
        "sim/fair",
        "--biascheck-data",
        str(data_dir),
        "--biascheck-cache",
        str(tmp_path / "store.sqlite"),
        "-p",
        "no:cacheprovider",
        "-q",
        "-k",
        "ses",
    )
    assert result.ret == 0, result.stdout.str()
    folder = pytester.path / ".biascheck" / "reports" / "kobbq"
    assert sorted(p.name for p in folder.iterdir()) == ["biascheck-run.json", "report.html", "report.md", "results.json"]
    # The last lines of the run name the folder, after the summary.
    tail = result.stdout.str().split("biascheck summary", 1)[1]
    assert "biascheck: wrote .biascheck/reports/kobbq: results.json, report.md, report.html" in tail


# --- a failing check printed once --------------------------------------------------------------------


def test_a_failing_check_is_printed_once(run_biascheck, tiny_kobbq, tmp_path):
    import xml.etree.ElementTree as ET

    junit = tmp_path / "junit.xml"
    run = run_biascheck(tiny_kobbq, "sim/stereotyped?p=1", "-k", "age", f"--junitxml={junit}")
    assert run.ret == 1, run.output
    output = run.output
    # No FAILURES block repeats it: the summary's table says FAIL, the short summary names the item.
    assert "= FAILURES =" not in output and "_ age::diff_bias_amb _" not in output
    summary = output.split("biascheck summary", 1)[1]
    table, short = summary.split("short test summary info", 1)
    assert re.search(r"│ age\s+│ diff_bias_amb │ 1\.0000 │ .* │ FAIL\s+│", table)
    # (The line's text follows where the terminal has room for it: always in CI, where pytest never cuts it.)
    assert re.search(r"FAILED \S*suite\.toml::metrics::age::diff_bias_amb( - diff_bias_amb \(age\).*)?\n", short)
    assert output.count("::metrics::age::diff_bias_amb") == 1
    # The failure's whole text is still the item's: junit (and GitHub's ::error lines) read it.
    failures = {tc.get("name"): tc.find("failure").get("message") for tc in ET.parse(junit).iter("testcase") if tc.find("failure") is not None}
    assert failures["diff_bias_amb"].startswith("diff_bias_amb (age) = 1.0000 FAILS threshold |x| <= 0.05; 95% CI [1.0000, 1.0000]; n = ")
