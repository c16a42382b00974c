"""Every concurrency, timeout and count is bounded the same way wherever it is given: pytest's
options and ini keys, the ``biascheck`` command's options and suite.toml (issue 23, item 11:
``qualify-judge --concurrency 0`` ran on at a concurrency of 1 for hours, and ``-3`` was accepted).
Each bad value is one line naming where it was given and the range, before any model call."""

from __future__ import annotations

import pytest

from biascheck import options
from biascheck.cli import main
from biascheck.core.bounds import BOUNDS
from biascheck.core.errors import BiascheckError

# (pytest option, ini key, the bound it takes)
PLUGIN_NUMBERS = [
    ("--biascheck-concurrency", "biascheck_concurrency", "concurrency"),
    ("--biascheck-timeout", "biascheck_timeout", "timeout"),
    ("--biascheck-retries", "biascheck_retries", "retries"),
    ("--biascheck-max-cost", "biascheck_max_cost", "max_cost"),
]


def _out_of_bounds(name: str) -> list[str]:
    bound = BOUNDS[name]
    return [f"{bound.low - 1:g}", f"{bound.high * 10:g}", "-3", "1e400"]


def _config(pytester: pytest.Pytester, *args: str) -> pytest.Config:
    return pytester.parseconfig("--biascheck", "--biascheck-model", "sim/fair", *args)


@pytest.mark.parametrize(("option", "ini", "name"), PLUGIN_NUMBERS)
def test_plugin_options_and_ini_keys_take_one_bound(pytester, option, ini, name):
    for value in _out_of_bounds(name):
        with pytest.raises(BiascheckError) as given:
            options.run_config(_config(pytester, option, value))
        assert str(given.value).startswith(f"{option}: "), given.value
        assert BOUNDS[name].describe() in str(given.value)
        pytester.makeini(f"[pytest]\n{ini} = {value}\n")
        with pytest.raises(BiascheckError) as written:
            options.run_config(_config(pytester))
        # The ini file and key are named, with the same range.
        assert str(written.value).startswith(f"{pytester.path / 'tox.ini'}: {ini}: "), written.value
        assert BOUNDS[name].describe() in str(written.value)
        (pytester.path / "tox.ini").unlink()
    low = BOUNDS[name].low
    assert options.run_config(_config(pytester, option, f"{low:g}")) is not None


def test_the_batch_poll_takes_its_bound(pytester):
    with pytest.raises(BiascheckError, match="--biascheck-batch-poll: '-1' is out of range"):
        options.run_config(_config(pytester, "--biascheck-batch", "--biascheck-batch-poll", "-1"))


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["qualify-judge", "sim/judge", "--concurrency", "0"], "--concurrency"),
        (["qualify-judge", "sim/judge", "--concurrency", "-3"], "--concurrency"),
        (["qualify-judge", "sim/judge", "--concurrency", "100000"], "--concurrency"),
        (["qualify-judge", "sim/judge", "--cases", "0"], "--cases"),
        (["qualify-judge", "sim/judge", "--min-accuracy", "nan"], "--min-accuracy"),
        (["serve-local", "--port", "70000"], "--port"),
        (["serve-local", "--n-ctx", "10"], "--n-ctx"),
        (["serve-local", "--startup-timeout", "-1"], "--startup-timeout"),
        (["sim", "serve", "--suite", "x", "--port", "-1"], "--port"),
    ],
)
def test_command_options_take_the_same_bounds(tmp_path, capsys, monkeypatch, args, option):
    monkeypatch.chdir(tmp_path)
    assert main([*args, *(["--cache", "s.sqlite"] if args[0] == "qualify-judge" else [])]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"biascheck: {option}: "), err
    assert "out of range; give a " in err, err
    assert not (tmp_path / "s.sqlite").exists(), "refused before any call"


def test_suite_counts_take_the_bounds_of_the_table():
    from biascheck.benchmarks.base import suite_schema

    schema = suite_schema()
    fields = {
        "templates_per_category": schema["properties"]["subset"]["properties"]["templates_per_category"],
        "min_n": schema["properties"]["thresholds"]["properties"]["min_n"],
        "flip_limit": schema["properties"]["regression"]["properties"]["flip_limit"],
        "resamples": schema["properties"]["bootstrap"]["properties"]["resamples"],
        "samples": schema["properties"]["hbb"]["properties"]["samples"],
        "questions": schema["properties"]["hbb"]["properties"]["questions"],
        "cases": schema["properties"]["bbg"]["properties"]["judge_qualification"]["properties"]["cases"],
    }
    for name, field in fields.items():
        resolved = field if "minimum" in field else schema["$defs"][field["$ref"].rsplit("/", 1)[1]]
        assert (resolved["minimum"], resolved["maximum"]) == (BOUNDS[name].low, BOUNDS[name].high), name
