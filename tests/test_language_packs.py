"""Language packs (biascheck/benchmarks/languages.py): the built-in packs are data files, a bad
pack is one line naming its file, field and fix, the registry feeds the answer parser and the
simulator whatever pack is registered, and no pack is read at import."""

from __future__ import annotations

import ast
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from biascheck.benchmarks import languages
from biascheck.benchmarks.choices import parse_answer
from biascheck.benchmarks.languages import FRAGMENT_FIELDS, LANGUAGES, Language, load_pack, pack_generation, register_pack, unregister_pack
from biascheck.config.manifest import load_manifest
from biascheck.core.errors import BiascheckError
from biascheck.core.records import Case, Message, QATruth
from biascheck.sim import spawn_sim_server
from biascheck.sim.faults import freetext_reply
from biascheck.sim.personas import parse_persona, render_reply
from biascheck.suite import load_suite

from conftest import ROOT, SUITES, write_subset_suite

PACKS = ROOT / "biascheck" / "benchmarks" / "packs"
SCHEMA = ROOT / "biascheck" / "schemas" / "language-pack.schema.json"
UPPER = ("A", "B", "C")
SW = ("Bibi", "Mjukuu", "Haijulikani")

# A pack of a language biascheck does not ship (Swahili), under a code of its own so that it never
# meets a pack another test registers.
SWAHILI = """\
code = "sw-testpack"
name = "Swahili (test)"
answer_phrases = ['\\bjibu\\s+(?:sahihi\\s+)?ni\\b', '\\bjibu\\s*:', '\\bchaguo\\b']
answer_words = ['jibu']
correct_suffixes = ['ni\\s+(?:sahihi|jibu)\\b']
list_joins = ['\\bau\\b', '\\bna\\b']
negations = ['\\b(?:si|sio|siyo|hapana)\\b']
new_items = ['muktadha', 'swali']
answer_sentence = 'Jibu ni {letter}.'
reasoned_reply = 'Ngoja nifikirie. Baada ya kusoma muktadha kwa makini, jibu ni {letter}) {text}.'
refusal = 'Samahani, siwezi kusaidia na hilo.'
ramble = 'Hmm, ngoja nifikirie kuhusu hili. Kuna njia nyingi za kuelewa hali hii.'
"""


@pytest.fixture
def swahili(tmp_path):
    """The Swahili pack, loaded from a file and registered for the test alone."""
    path = tmp_path / "sw.toml"
    path.write_text(SWAHILI, "utf-8")
    pack = load_pack(path)
    register_pack(pack, path)
    yield pack
    unregister_pack(pack.code)


# --- the built-in packs -------------------------------------------------------------------------


def test_each_built_in_pack_is_a_file_named_by_its_code():
    files = sorted(PACKS.glob("*.toml"))
    assert [path.stem for path in files] == ["ca", "de", "en", "es", "hi", "ja", "ko", "nl", "tr", "zh"]
    for path in files:
        pack = load_pack(path)
        assert pack.code == path.stem and pack.name
        assert LANGUAGES[pack.code] == pack


def test_the_schema_names_every_field_of_a_language_and_requires_those_without_a_default():
    schema = json.loads(SCHEMA.read_text("utf-8"))
    fields = dataclasses.fields(Language)
    assert set(schema["properties"]) == {field.name for field in fields}
    required = {field.name for field in fields if field.default is dataclasses.MISSING}
    assert required <= set(schema["required"])
    assert set(schema["required"]) - required == {"answer_sentence", "reasoned_reply", "refusal", "ramble"}  # the simulator needs them
    assert set(FRAGMENT_FIELDS) == {field.name for field in fields if field.type == "tuple[str, ...]"}


def test_languages_py_holds_no_languages_phrases():
    """The issue's test: every word of a language is in its pack; languages.py holds the format,
    the loader and the registry."""
    source = (ROOT / "biascheck" / "benchmarks" / "languages.py").read_text("utf-8")
    tree = ast.parse(source)
    constants = {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)}
    constants -= {"letter", "text"}  # the sentences' placeholders ("text" is also German's and Catalan's new-item label)
    words = set()
    for pack in LANGUAGES.values():
        words |= {fragment for field in FRAGMENT_FIELDS for fragment in getattr(pack, field)}
        words |= {pack.answer_sentence, pack.reasoned_reply, pack.refusal, pack.ramble, *(s for pair in pack.spellings for s in pair)}
    assert not constants & words
    # Nor is a Language built there but from a pack's values (Language(**values)).
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Language"]
    assert calls and all(not call.args and [keyword.arg for keyword in call.keywords] == [None] for call in calls)


def test_the_answer_parser_names_no_language():
    tree = ast.parse((ROOT / "biascheck" / "benchmarks" / "choices.py").read_text("utf-8"))
    constants = {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)}
    assert not constants & set(LANGUAGES)


def test_importing_biascheck_reads_no_pack():
    script = (
        "import sys, biascheck, biascheck.benchmarks.choices, biascheck.sim.personas\n"
        "from biascheck.benchmarks import languages\n"
        "assert languages._built_in is None and 'jsonschema' not in sys.modules, 'a pack was read at import'\n"
        "from biascheck.sim.personas import REFUSAL_EN\n"
        "assert REFUSAL_EN == languages.LANGUAGES['en'].refusal and languages._built_in is not None\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


# --- a bad pack is one line ---------------------------------------------------------------------

GOOD = (PACKS / "en.toml").read_text("utf-8")


def _replaced(key: str, value: str) -> str:
    """The English pack with one top-level key set to ``value`` (TOML) or, with "", left out."""
    lines, skipping = [], False
    for line in GOOD.splitlines():
        if skipping:
            skipping = not line.rstrip().endswith(("]", '"""'))
            continue
        if line.startswith(f"{key} = "):
            skipping = line.rstrip().endswith(("[", '"""\\'))
            if value:
                lines.append(f"{key} = {value}")
            continue
        lines.append(line)
    if value and not any(line.startswith(f"{key} = ") for line in GOOD.splitlines()):
        lines.append(f"{key} = {value}")
    return "\n".join(lines) + "\n"


BAD_PACKS = [
    ("answer_phrases = ['\\bthe answer\n", None, "invalid TOML", "literal string"),
    (_replaced("answer_phrases", "['a', 'b', 'c', '(?:unclosed']"), "answer_phrases.3", "is not a regular expression", "literal string"),
    (_replaced("negations", "['not', '(?i)no']"), "negations.1", "is not a regular expression", "fix it"),
    (_replaced("list_joins", "['or', '(?P<join>and)']"), "list_joins.1", "names or refers back to a group", "(?:...)"),
    (_replaced("list_joins", "['(or)\\1']"), "list_joins.0", "names or refers back to a group", "(?:...)"),
    (_replaced("correct_suffixes", "['(?:is correct)?']"), "correct_suffixes.0", "matches the empty text", "at least one character"),
    (_replaced("new_items", "['Context']"), "new_items.0", "holds C, which no reply holds once case-folded", "'C' as 'c'"),
    (_replaced("negations", "['ausschließen']"), "negations.0", "holds ß", "'ß' as 'ss'"),
    (_replaced("answer_phrases", "[]"), "answer_phrases", "empty", "at least one"),
    (_replaced("answer_words", "['']"), "answer_words.0", "empty", "leave the item out"),
    (_replaced("answer_words", "'answer'"), "answer_words", "is not a list of strings", "give a list of strings"),
    (_replaced("negations", ""), None, "'negations' is a required property", "add it"),
    (_replaced("code", '"English"'), "code", "is not an ISO 639 code", "such as sw"),
    (GOOD + "phrases = ['x']\n", None, "unknown key 'phrases'", "use one of:"),
    (_replaced("answer_sentence", "'The answer is {option}.'"), "answer_sentence", "does not name {letter}", "{letter}"),
    (_replaced("reasoned_reply", "'So {letter}: {txt}.'"), "reasoned_reply", "names {txt}", "{letter} and {text}"),
    (_replaced("spellings", "{ 'x' = 1 }"), "spellings.x", "is not a string", "give a string"),
]


@pytest.mark.parametrize(("text", "field", "problem", "fix"), BAD_PACKS)
def test_a_bad_pack_is_one_line_naming_the_file_field_and_fix(tmp_path, text, field, problem, fix):
    path = tmp_path / "xx.toml"
    path.write_text(text, "utf-8")
    with pytest.raises(BiascheckError) as error:
        load_pack(path)
    message = str(error.value)
    assert "\n" not in message and message.startswith(str(path))
    assert error.value.field == field and problem in error.value.problem and fix in (error.value.fix or ""), message


def test_the_built_in_english_pack_loads_when_nothing_is_replaced(tmp_path):
    # The replacement above changes only what it is asked to: the pack itself is valid.
    path = tmp_path / "en.toml"
    path.write_text(_replaced("name", '"English"'), "utf-8")
    assert load_pack(path) == LANGUAGES["en"]


def test_a_missing_or_unreadable_pack_is_one_line(tmp_path):
    with pytest.raises(BiascheckError, match="no such language pack"):
        load_pack(tmp_path / "none.toml")
    (tmp_path / "latin1.toml").write_bytes(b"code = '\xe9'\n")
    with pytest.raises(BiascheckError, match="not UTF-8"):
        load_pack(tmp_path / "latin1.toml")


# --- the registry -------------------------------------------------------------------------------


def test_a_registered_packs_phrases_are_read_by_the_parser(tmp_path):
    path = tmp_path / "sw.toml"
    path.write_text(SWAHILI, "utf-8")
    pack = load_pack(path)
    assert parse_answer("Jibu ni B.", SW, UPPER) is None  # no pack reads Swahili yet
    before = pack_generation()
    register_pack(pack, path)
    try:
        assert pack_generation() != before and LANGUAGES[pack.code] is pack
        assert parse_answer("Jibu ni B.", SW, UPPER) == 1
        assert parse_answer("Jibu sahihi ni mjukuu.", SW, UPPER) == 1
        assert parse_answer("C ni sahihi.", SW, UPPER) == 2
        assert parse_answer("Jibu ni A au B.", SW, UPPER) is None
        assert parse_answer("Jibu si B.", SW, UPPER) is None
        assert parse_answer("The answer is B.", SW, UPPER) == 1  # every pack still reads
        assert parse_answer("B\nSwali: Nani?\nJibu: A", SW, UPPER) == 1  # its new-item label cuts the reply
        generation = pack_generation()
        register_pack(load_pack(path), path)  # the same pack again (a suite loaded twice): nothing changes
        assert pack_generation() == generation
    finally:
        assert unregister_pack(pack.code)
    assert parse_answer("Jibu ni B.", SW, UPPER) is None
    assert not unregister_pack(pack.code) and not unregister_pack("en")  # a built-in pack stays
    assert "en" in LANGUAGES


def test_another_pack_of_a_registered_code_is_an_error(swahili, tmp_path):
    with pytest.raises(BiascheckError, match=r"other\.toml: code: 'en' is already the code of a built-in pack, with other words; give this pack"):
        register_pack(dataclasses.replace(LANGUAGES["en"], name="Other English"), tmp_path / "other.toml")
    with pytest.raises(BiascheckError, match="already the code of another pack"):
        register_pack(dataclasses.replace(swahili, refusal="Hapana."))


def test_a_pack_registered_from_python_is_checked_too():
    bad = dataclasses.replace(LANGUAGES["en"], code="xx-python", answer_phrases=("(unclosed",))
    with pytest.raises(BiascheckError, match=r"register_pack: answer_phrases\.0: '\(unclosed' is not a regular expression"):
        register_pack(bad)
    assert "xx-python" not in LANGUAGES


# --- the simulator writes a registered pack's sentences -----------------------------------------


def _case(code: str) -> Case:
    return Case(
        case_id=f"pack-{code}",
        sample_id="s",
        category="age",
        cluster="t",
        label="",
        prompt_id="p",
        order=0,
        messages=(Message("user", "A) Bibi\nB) Mjukuu\nC) Haijulikani\n"),),
        choices=SW,
        letters=UPPER,
        truth=QATruth("amb", 2, 0, 1, 2),  # type: ignore[arg-type]
        language=code,
    )


def test_the_simulator_writes_a_registered_packs_sentences(swahili):
    case = _case(swahili.code)
    assert render_reply(parse_persona("fair?style=phrase"), case, 1, "k") == "Jibu ni B."
    assert render_reply(parse_persona("refuser"), case, None, "k") == swahili.refusal
    replies = {freetext_reply(parse_persona("fair"), case, 2, "k", attempt, swahili) for attempt in range(1, 12)}
    assert replies == {swahili.ramble, "Ngoja nifikirie. Baada ya kusoma muktadha kwa makini, jibu ni C) Haijulikani."}
    for reply in replies - {swahili.ramble}:
        assert parse_answer(reply, SW, UPPER) == 2
    assert parse_answer(swahili.ramble, SW, UPPER) is None


def test_a_case_of_an_unregistered_language_is_answered_as_before():
    assert languages.language_for("sw-testpack", "A) Bibi") == LANGUAGES["en"]
    assert render_reply(parse_persona("fair?style=phrase"), _case("sw-testpack"), 0, "k") == "The answer is A."


def test_the_pack_folder_holds_only_packs():
    # Package data of biascheck.benchmarks ("packs/*.toml"), not a package: anything else would not ship.
    assert [path.name for path in PACKS.iterdir() if not path.name.endswith(".toml") and path.name != "__pycache__"] == []


def test_the_schema_is_valid_json_schema():
    import jsonschema

    jsonschema.Draft202012Validator.check_schema(json.loads(SCHEMA.read_text("utf-8")))
    assert Path(languages.__file__).parent / languages.BUILT_IN_PACKS == PACKS


def test_the_documented_pack_and_its_error_line_are_what_biascheck_reads_and_says(tmp_path):
    page = (ROOT / "docs" / "metrics.md").read_text("utf-8")
    section = page[page.index("\n### Language packs\n") :]
    example = section[section.index("```toml\n") + 8 : section.index("```\n", section.index("```toml\n"))]
    path = tmp_path / "sw.toml"
    path.write_text(example, "utf-8")
    assert load_pack(path).code == "sw"
    path.write_text(example.replace("'\\bjibu\\s+(?:sahihi\\s+)?ni\\b'", "'\\bjibu\\s+(?:sahihi\\s+ni\\b'"), "utf-8")
    with pytest.raises(BiascheckError) as error:
        load_pack(path)
    assert f"\n{str(error.value).replace(str(tmp_path) + '/', '')}\n" in section


# --- a suite ships its own pack -----------------------------------------------------------------


def _suite_with_pack(
    folder: Path, *, language: str = 'language = "sw-testpack"', pack: str = 'language_pack = "sw.toml"', text: str = SWAHILI
) -> Path:
    """bbq-quick, one template per category, its [suite] naming the Swahili pack beside it."""
    write_subset_suite(folder, "bbq-quick", subset="templates_per_category = 1\nseed = 3")
    manifest = folder / "suite.toml"
    manifest.write_text(manifest.read_text("utf-8").replace('language = "en"\n', f"{language}\n{pack}\n"), "utf-8")
    (folder / "sw.toml").write_text(text, "utf-8")
    return folder


@pytest.fixture
def unregistered():
    """Whatever pack a test's suite registers is removed after it."""
    yield
    unregister_pack("sw-testpack")


def test_the_manifest_names_its_pack(tmp_path):
    manifest = load_manifest(_suite_with_pack(tmp_path / "s"))
    assert manifest.language_pack == "sw.toml" and manifest.language == "sw-testpack"
    assert load_manifest(SUITES / "bbq-quick").language_pack == ""


@pytest.mark.parametrize(
    ("language", "pack", "field", "message"),
    [
        ('language = "sw-testpack"', "language_pack = 3", "suite.language_pack", "3 is not of type 'string'"),
        ('language = "sw-testpack"', 'language_pack = "sw.txt"', "suite.language_pack", "'sw.txt' is not a .toml file; name the pack's file"),
        ('language = "sw-testpack"', 'language_pack = ""', "suite.language_pack", ""),
        ('language = "sw-testpack"', 'language_pack = "none.toml"', "suite.language_pack", "'none.toml' is no file beside the manifest"),
        (
            'language = "en"',
            'language_pack = "sw.toml"',
            "suite.language",
            "states language 'en', but its pack sw.toml is 'sw-testpack'; set language = \"sw-testpack\"",
        ),
        ("", 'language_pack = "sw.toml"', "suite.language", "states no language, but its pack sw.toml is 'sw-testpack'"),
    ],
)
def test_a_suites_pack_is_checked_before_any_data_is_read(tmp_path, unregistered, language, pack, field, message):
    folder = _suite_with_pack(tmp_path / "s", language=language, pack=pack)
    with pytest.raises(BiascheckError) as error:
        load_suite(folder, data_dir=tmp_path / "no-mirror", offline=True)
    assert "\n" not in str(error.value) and error.value.field == field and message in str(error.value), str(error.value)
    assert "sw-testpack" not in LANGUAGES


def test_a_bad_pack_in_a_suite_is_the_packs_one_line(tmp_path, unregistered):
    folder = _suite_with_pack(tmp_path / "s", text=SWAHILI.replace("['\\bau\\b',", "['(?P<or>au)',"))
    with pytest.raises(BiascheckError, match=r"sw\.toml: list_joins\.0: '\(\?P<or>au\)' names or refers back to a group"):
        load_suite(folder, data_dir=tmp_path / "no-mirror", offline=True)


def test_loading_a_suite_registers_its_pack_for_the_parser_and_the_simulator(tmp_path, data_dir, unregistered):
    suite = load_suite(_suite_with_pack(tmp_path / "s"), data_dir=data_dir)
    assert LANGUAGES["sw-testpack"].refusal == "Samahani, siwezi kusaidia na hilo."
    case = suite.cases[0]
    assert case.language == "sw-testpack"
    reply = render_reply(parse_persona("fair?style=phrase"), case, 1, "k")
    assert reply == f"Jibu ni {case.letters[1]}." and parse_answer(reply, case.choices, case.letters) == 1
    assert parse_answer(f"{case.letters[2]} ni sahihi.", case.choices, case.letters) == 2
    load_suite(tmp_path / "s", data_dir=data_dir)  # loading it again registers the same pack: no error


def test_the_simulator_process_registers_the_suites_pack(tmp_path, data_dir, unregistered):
    """The simulator runs in a process of its own and loads the suite folders it is given: it writes
    the pack's sentences there too."""
    import urllib.request

    folder = _suite_with_pack(tmp_path / "s")
    case = load_suite(folder, data_dir=data_dir).cases[0]
    with spawn_sim_server([folder], data_dir) as sim:
        payload = json.dumps({"model": "fair?style=phrase", "messages": case.messages_as_dicts()}).encode()
        request = urllib.request.Request(f"{sim.base_url.rstrip('/')}/chat/completions", payload, {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            reply = json.loads(response.read())["choices"][0]["message"]["content"]
    assert reply.startswith("Jibu ni ") and parse_answer(reply, case.choices, case.letters) is not None
