"""Hostile inputs (issue 11): user and model text with rich markup in it is shown literally, never
read as markup (``[/]`` used to end the run with rich's MarkupError as an INTERNALERROR, and
``[red]`` was silently eaten)."""

from __future__ import annotations

from pathlib import Path

import pytest

from biascheck.records.comparison import Comparison
from biascheck.records.run import RunRecord
from biascheck.reporting.terminal import render_comparison_terminal, render_terminal

from loopback import chat_answer, loopback_server, send_json

HOSTILE = "x[/][red]y[bold]"


def _document(hostile: str) -> dict:
    """A results.json with markup in every free text render_terminal shows."""
    ci = [0.1, 0.2]
    value = {"value": 0.15, "ci": ci, "n": 10}
    return {
        "schema": "biascheck.results/1",
        "tool": {"name": "biascheck", "version": "0.1.0"},
        "created_at": "2026-11-21T10:00:00+00:00",
        "passed": False,
        "suite": {
            "name": f"suite{hostile}",
            "benchmark": "kobbq",
            "fingerprint": {"suite": "abc"},
            "prompts": ["1"],
            "skipped_categories": {f"cat{hostile}": f"reason{hostile}"},
            "cases_total": 10,
            "thresholds": {},
            "regression": {},
        },
        "model": {"model": f"openai/{hostile}", "params": {}, "params_dropped": {f"p{hostile}": f"dropped{hostile}"}, "params_ignored": {}},
        "run": {
            "cases": 10,
            "calls": 10,
            "cache_hits": 0,
            "retries": 0,
            "errors": 10,
            "cost_usd": 0.0,
            "unpriced_calls": 0,
            "complete": False,
            "incomplete_reason": f"incomplete{hostile}",
            "estimator_note": f"note{hostile}",
        },
        "metrics": {
            "overall": {"acc_dis": value},
            "by_category": {f"cat{hostile}": {"acc_dis": value}},
            "by_prompt": {f"p{hostile}": {"acc_dis": value}},
            "prompt_summary": {},
            "by_label": {},
        },
        "verdicts": [
            {"scope": "overall", "metric": "acc_dis", "passed": False, "threshold": {"min": 0.8}, "value": 0.15, "ci": ci, "n": 10},
            {"scope": f"cat{hostile}", "metric": "acc_dis", "passed": True, "threshold": {"min": 0.1}, "value": 0.15, "ci": ci, "n": 10},
        ],
        "cases": [],
    }


def test_terminal_report_shows_markup_in_user_text_literally():
    for color in (False, True):
        text = render_terminal([RunRecord.from_json(_document(HOSTILE))], color=color, width=400)
        for shown in (
            f"suite{HOSTILE}",
            f"openai/{HOSTILE}",
            f"cat{HOSTILE}",
            f"reason{HOSTILE}",
            f"incomplete{HOSTILE}",
            f"note{HOSTILE}",
            f"dropped{HOSTILE}",
        ):
            assert shown in text, (shown, text)
        # The report's own styling still works.
        assert "FAIL" in text and "pass" in text and "[green]" not in text


def test_comparison_report_shows_markup_in_user_text_literally():
    result = {
        "metric": "acc_dis",
        "scope": f"cat{HOSTILE}",
        "better": "higher",
        "rule": "-2%",
        "rule_source": "suite",
        "margin": 0.02,
        "baseline": {"value": 0.9, "ci": [0.8, 1.0], "n": 10},
        "candidate": {"value": 0.5, "ci": [0.4, 0.6], "n": 10},
        "difference": -0.4,
        "difference_ci_unadjusted": [-0.5, -0.3],
        "worsening": 0.4,
        "worsening_ci": [0.3, 0.5],
        "worsening_ci_unadjusted": [0.32, 0.48],
        "interval": None,
        "p_value": 0.001,
        "p_adjusted": 0.001,
        "mcnemar": None,
        "mde": 0.05,
        "cases_to_resolve": None,
        "verdict": "regressed",
        "explanation": f"explained{HOSTILE}",
    }
    comparison = {
        "schema": "biascheck.comparison/2",
        "suite": {"name": f"suite{HOSTILE}"},
        "fingerprint": {},
        "settings": {},
        "regressed": True,
        "candidate_errors": 0,
        "passed": False,
        "warnings": [f"warn{HOSTILE}"],
        "results": [result],
        "flips": {
            "by_transition": {f"a{HOSTILE}->b": 3},
            "by_category": {f"cat{HOSTILE}": {f"a{HOSTILE}->b": 3}},
            "examples": [],
            "total": 3,
            "shown": 0,
            "limit": 200,
            "file": None,
        },
        "cases": {"common": 10},
        "baseline": {"model": f"openai/{HOSTILE}", "path": f"base{HOSTILE}.json"},
        "candidate": {"model": f"openai/{HOSTILE}"},
    }
    for color in (False, True):
        text = render_comparison_terminal([Comparison.from_json(comparison)], color=color, width=400)
        for shown in (
            f"suite{HOSTILE}",
            f"openai/{HOSTILE}",
            f"base{HOSTILE}.json",
            f"warn{HOSTILE}",
            f"cat{HOSTILE}",
            f"a{HOSTILE}->b",
            f"explained{HOSTILE}",
        ):
            assert shown in text, (shown, text)


def test_model_string_with_markup_is_no_internal_error(run_biascheck, tiny_kobbq: Path, monkeypatch):
    # A loopback server answering "A" to everything: the run completes and prints the model string.
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    model = f"openai/{HOSTILE}"
    with loopback_server(lambda handler, n, body: send_json(handler, 200, chat_answer(body))) as (api_base, _):
        run = run_biascheck(tiny_kobbq, model, "--biascheck-api-base", api_base, "-k", "age and p1")
    assert "INTERNALERROR" not in run.output and "MarkupError" not in run.output, run.output
    assert run.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), run.output
    assert f"on {model}:" in run.output, run.output
