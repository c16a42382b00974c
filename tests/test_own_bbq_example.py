"""``examples/own-bbq``: a BBQ-format dataset of one's own in a language biascheck does not ship
(Swahili), as a suite folder and nothing else: its suite.toml, its language pack and its data.
Run as a user runs it, ``pytest --biascheck examples/own-bbq`` from the checkout, in this process (pytester's
in-process run: a process of its own cost about 8 s of CPU a run), without biascheck's environment
variables, against the simulator over HTTP; the pack the run registers is removed after it."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_examples import examples
from test_answer_parser_languages import UPPER, check_a_fragment_and_one_option

from biascheck.benchmarks.choices import parse_answer
from biascheck.benchmarks.languages import BUILT_IN_PACKS, FRAGMENT_FIELDS, load_pack, register_pack, unregister_pack
from biascheck.benchmarks.qa import BBQ_ROWS
from biascheck.suite import load_suite

from conftest import ROOT

EXAMPLE = ROOT / "examples" / "own-bbq"
PACKS = ROOT / "biascheck" / "benchmarks" / BUILT_IN_PACKS
BIAS_CHECKS = {"diff_bias_amb", "diff_bias_dis"}


def run_example(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, model: str) -> tuple[pytest.RunResult, dict, list[str]]:
    """One run of the example folder: its result, results.json and the replies its store holds."""
    for name in os.environ:
        if name.startswith(("BIASCHECK_", "PYTEST_")) and name != "BIASCHECK_OFFLINE":  # offline: tests never download
            monkeypatch.delenv(name)
    report, store = pytester.path / "report", pytester.path / "store.sqlite"
    monkeypatch.chdir(ROOT)  # from the checkout, the folder named as the README names it
    args = ["-p", "no:cacheprovider", "-q", "--biascheck", "examples/own-bbq"]
    done = pytester.runpytest_inprocess(*args, "--biascheck-model", model, "--biascheck-report", str(report), "--biascheck-cache", str(store))
    results = json.loads((report / "results.json").read_text("utf-8"))
    with sqlite3.connect(store) as db:
        replies = [text for (text,) in db.execute("SELECT text FROM responses")]
    return done, results, replies


@pytest.fixture
def pack_removed_after():
    """Loading the suite here registers its pack in this process: removed again after the test, so
    that no other test of this worker sees a language it did not ask for."""
    yield
    unregister_pack("sw")


def test_the_example_is_a_suite_folder_with_no_python_in_a_language_not_built_in(pack_removed_after):
    files = sorted(path.relative_to(EXAMPLE).as_posix() for path in EXAMPLE.rglob("*") if path.is_file())
    assert files == ["data/age.csv", "data/gender.csv", "suite.toml", "sw.toml"]
    assert not (PACKS / "sw.toml").exists()
    suite = load_suite(EXAMPLE)  # pinned by sha256: no flag needed
    assert suite.manifest.benchmark == "bbq" and suite.manifest.language == "sw"
    assert not suite.unpinned_data
    assert suite.categories == ["age", "gender"]
    # 64 rows x 2 prompts x 3 choice orders, every row's biased option found from its own field.
    assert len(suite.cases) == 64 * 2 * 3
    assert suite.benchmark.row_format(suite.manifest) != BBQ_ROWS


@pytest.fixture
def fair(pytester, monkeypatch, pack_removed_after):
    return run_example(pytester, monkeypatch, "sim/fair?style=mixed")


@pytest.fixture
def stereotyped(pytester, monkeypatch, pack_removed_after):
    return run_example(pytester, monkeypatch, "sim/stereotyped?p=1&style=mixed")


def test_a_fair_model_passes_and_every_swahili_reply_is_read(fair):
    done, results, replies = fair
    assert done.ret == 0, done.stdout.str()[-3000:] + done.stderr.str()[-3000:]
    assert results["passed"] is True and results["suite"]["language"] == "sw"
    assert results["run"]["errors"] == 0 and results["run"]["calls"] == len(replies) == 384
    # The simulator answered in the pack's language ("Jibu ni B.": the phrase style), and the
    # parser read every reply, the Swahili sentences among them.
    assert any(reply.startswith("Jibu ni ") for reply in replies)
    assert results["metrics"]["overall"]["ooc_ratio"]["value"] == 0.0
    assert results["metrics"]["overall"]["acc_amb"]["value"] == results["metrics"]["overall"]["acc_dis"]["value"] == 1.0


def test_a_stereotyped_model_fails_the_bias_checks_with_every_reply_read(stereotyped):
    done, results, replies = stereotyped
    assert done.ret == 1, done.stdout.str()[-3000:] + done.stderr.str()[-3000:]
    failed = {verdict["metric"] for verdict in results["verdicts"] if verdict["status"] == "fail"}
    assert BIAS_CHECKS <= failed and "ooc_ratio" not in failed
    assert any(reply.startswith("Jibu ni ") for reply in replies)
    overall = results["metrics"]["overall"]
    assert overall["ooc_ratio"]["value"] == 0.0
    assert overall["diff_bias_amb"]["value"] == 1.0


def test_the_packs_words_are_part_of_the_fingerprint_and_its_comments_are_not(tmp_path, pack_removed_after):
    suite = tmp_path / "own-bbq"
    shutil.copytree(EXAMPLE, suite)
    pack = suite / "sw.toml"

    def fingerprint() -> dict:
        unregister_pack("sw")
        return load_suite(suite).fingerprint()

    before = fingerprint()
    pack.write_text(pack.read_text("utf-8") + "# A comment changes no word.\n", "utf-8")
    assert fingerprint() == before
    pack.write_text(pack.read_text("utf-8").replace("'\\bau\\b', ", ""), "utf-8")  # "au" (or) no longer joins
    after = fingerprint()
    assert after["prompts"] != before["prompts"] and after["suite"] != before["suite"]
    assert {key: after[key] for key in ("data", "subset")} == {key: before[key] for key in ("data", "subset")}


# Swahili replies as a model might write them, with the reading a careful reader gives them.
AGE = ("Mzee", "Kijana", "Haijulikani")
GENDER = ("Mwanamke", "Mwanamume", "Hakuna taarifa ya kutosha")
SWAHILI = [
    ("Jibu ni B.", AGE, 1),
    ("Jibu: C", AGE, 2),
    ("Jibu sahihi ni A.", AGE, 0),
    ("Jibu langu ni kijana.", AGE, 1),
    ("Nadhani ni A.", AGE, 0),
    ("Ninachagua B.", AGE, 1),
    ("Chaguo B.", AGE, 1),
    ("B ni sahihi.", AGE, 1),
    ("Kijana ndiye jibu sahihi.", AGE, 1),
    ("A) Mzee", AGE, 0),
    ("Haijulikani.", AGE, 2),
    ("Jibu ni C) Haijulikani, kwa sababu muktadha hautoshi.", AGE, 2),
    ("B. Mzee hakutajwa kuwa na tatizo.", AGE, 1),
    ("Labda ni B, ingawa sina uhakika.", AGE, 1),
    ("Si A, bali B.", AGE, 1),
    ("Subiri, jibu ni B.", AGE, 1),
    ("Kwa hiyo, jibu ni C.", AGE, 2),
    ("Hakuna taarifa ya kutosha.", GENDER, 2),
    ("Hakuna taarifa ya kutosha kujua.", GENDER, 2),
    ("C) Hakuna taarifa ya kutosha", GENDER, 2),
    ("A au B.", AGE, None),
    ("Mzee na kijana.", AGE, None),
    ("Mwanamke au mwanamume.", GENDER, None),
    ("Jibu si A.", AGE, None),
    ("Hapana, si B.", AGE, None),
    ("Sidhani kama B ni sahihi.", AGE, None),
    ("Samahani, siwezi kusaidia na hilo.", AGE, None),
]


@pytest.fixture(scope="module")
def swahili():
    """The example's pack, for this module's readings (each test registers it, which is a no-op
    when it is: another test of the module removes it), removed after them."""
    yield load_pack(EXAMPLE / "sw.toml")
    unregister_pack("sw")


@pytest.mark.parametrize(("reply", "choices", "expected"), SWAHILI)
def test_the_examples_pack_reads_swahili_replies(swahili, reply, choices, expected):
    register_pack(swahili, EXAMPLE / "sw.toml")
    assert parse_answer(reply, choices, UPPER) == expected


@pytest.mark.parametrize("field", sorted(FRAGMENT_FIELDS))
@settings(max_examples=examples(25), deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data())
def test_no_fragment_of_the_examples_pack_reads_one_option_as_another(swahili, field, data):
    """The property every built-in pack has (tests/test_answer_parser_languages.py), for this one."""
    register_pack(swahili, EXAMPLE / "sw.toml")
    check_a_fragment_and_one_option(data, getattr(swahili, field), field, AGE + GENDER)
