"""MBBQ (Neplenbroek, Bisazza and Fernández, COLM 2024, "MBBQ: A Dataset for Cross-Lingual
Comparison of Stereotypes in Generative LLMs"): BBQ's templates whose stereotypes hold in English,
Dutch, Spanish and Turkish, six categories each, and a control set per language in which the
people are named (no group, so no stereotype), to measure the task apart from bias.

Its files are BBQ's format exactly (BBQ's fields, ``data/{Category}[_control]_{language}.jsonl``),
read by BBQ's reader: the biased option from ``answer_info`` and ``stereotyped_groups`` with the
question's polarity, as BBQ's analysis script finds it. Where MBBQ's own scoring code
(``mbbq.py``, ``score_answer``) differs, biascheck follows BBQ's script (docs/metrics.md, "MBBQ"):
MBBQ's takes the stereotyped group's option as the biased answer for non-negative questions too,
and scores a row whose groups name two options as counter-biased, where BBQ's leaves it out.

The five prompts are MBBQ's own, read from the pinned upstream ``answer_detection.py`` (its
``prompts`` and, for Dutch, Spanish and Turkish, ``trans_prompt_dict``) rather than copied here:
the repository states no licence, so nothing of it is committed, and a suite downloads it with the
data. Its ``{}`` placeholders are the context, the question and the three options, lettered A, B
and C in the data's order (MBBQ shows them unshuffled).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from biascheck.benchmarks import Resolved, SuiteManifest, option
from biascheck.benchmarks.qa import BBQ_ROWS, BBQBenchmark, QAData, QAPrompt, RowFormat, read_utf8
from biascheck.core.errors import BiascheckError

LETTERS = ("A", "B", "C")
# The translations tag some people by their word in the language rather than BBQ's F and M (the
# Spanish Gender_identity files most): the words MBBQ's own code reads as F and M.
GENDER_WORDS = {
    "f": ("vrouw", "meisje", "kız", "kadın", "chica", "mujer", "maestra"),
    "m": ("jongen", "erkek çocuk", "adam", "chico", "hombre", "maestro"),
}
PLACEHOLDERS = ("{context}", "{question}", "{a}", "{b}", "{c}")
# What answer_detection.py names its English prompts and their translations.
PROMPTS, TRANSLATED = "prompts", "trans_prompt_dict"
FIX = "give the pinned answer_detection.py of MBBQ (the suite's [data.prompts])"


def read_prompts(path: Path, language: str) -> list[QAPrompt]:
    """MBBQ's five prompts in ``language``, P1..P5 in its order, from its answer_detection.py."""
    try:
        tree = ast.parse(read_utf8(path), filename=str(path))
    except SyntaxError as exc:
        raise BiascheckError(path, f"line {exc.lineno}", "is not Python source", FIX) from None
    found = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id in (PROMPTS, TRANSLATED)
        ):
            try:
                found[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                raise BiascheckError(path, node.targets[0].id, "is not a literal", FIX) from None
    english = found.get(PROMPTS)
    if not (isinstance(english, list) and english and all(isinstance(p, str) for p in english)):
        raise BiascheckError(path, PROMPTS, "is missing or not a list of prompts", FIX)
    if language == "en":
        texts = english
    else:
        table = found.get(TRANSLATED, {}).get(language) if isinstance(found.get(TRANSLATED), dict) else None
        if not isinstance(table, Mapping):
            raise BiascheckError(
                path, f"{TRANSLATED}.{language}", "is missing: MBBQ has no prompts in this language", "set [suite] language to en, nl, es or tr"
            )
        missing = [i for i, prompt in enumerate(english, 1) if prompt not in table]
        if missing:
            raise BiascheckError(path, f"{TRANSLATED}.{language}", f"has no translation of prompt P{missing[0]}", FIX)
        texts = [table[prompt] for prompt in english]
    return [QAPrompt(f"P{i}", _named(path, i, text.strip()), None, LETTERS) for i, text in enumerate(texts, 1)]


def _named(path: Path, number: int, text: str) -> str:
    """A prompt with its five positional ``{}`` named as biascheck's templates name them."""
    parts = text.split("{}")
    if len(parts) != len(PLACEHOLDERS) + 1:
        raise BiascheckError(path, f"prompt P{number}", f"has {len(parts) - 1} placeholders, not {len(PLACEHOLDERS)}", FIX)
    named = parts[0]
    for placeholder, rest in zip(PLACEHOLDERS, parts[1:]):
        named += placeholder + rest
    return named


class MBBQBenchmark(BBQBenchmark):
    name = "mbbq"
    # MBBQ's categories by their shared names (benchmarks.base.COMMON_CATEGORIES).
    common_categories = {
        "Age": "age",
        "Disability_status": "disability",
        "Gender_identity": "gender",
        "Physical_appearance": "physical_appearance",
        "SES": "ses",
        "Sexual_orientation": "sexual_orientation",
    }
    settings_schema = None  # MBBQ's files are BBQ's layout: no [mbbq] table
    settings_required = True

    def row_format(self, manifest: SuiteManifest) -> RowFormat:
        aliases = dict(BBQ_ROWS.group_aliases)
        for group, words in GENDER_WORDS.items():
            aliases[group] = (*aliases[group], *words)
        return replace(BBQ_ROWS, group_aliases=aliases)

    def load(self, manifest: SuiteManifest, files: Mapping[str, Resolved]) -> QAData:
        key = manifest.prompts_from_data
        if key is None or key not in files:
            raise BiascheckError(
                manifest.path, "prompts.from_data", "names no [data] file", 'set from_data = "prompts", the pinned answer_detection.py'
            )
        prompts_file = files[key].local
        if prompts_file is None:
            raise BiascheckError(
                manifest.path,
                f"data.{key}",
                files[key].reason or "not available",
                f"point {option('data')} at a folder holding it, or allow downloads",
            )
        data = super().load_items_of(manifest, files)
        return data._replace(prompts=read_prompts(prompts_file, manifest.language))


MBBQ = MBBQBenchmark()
