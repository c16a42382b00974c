"""What the shipped files say points somewhere that exists, and says what the settings do.

- Every reference to a documentation page (``docs/metrics.md``), to a section of one or of the
  README (``docs/metrics.md, "MBBQ"``, ``docs/suites.md#data``, ``README, "How thresholds are
  judged"``) and to a file of the project (``suites/bbq``, ``biascheck/benchmarks/packs/en.toml``,
  ``bench/startup.py``) in the files biascheck ships or copies into a user's repository resolves:
  the suites' and the examples' comments (``biascheck init`` copies them), baselines/README.md, and
  the docstrings, comments and messages of ``biascheck/``. The docs themselves are checked by
  ``mkdocs build --strict`` for their links; here, for the paths and sections they name in prose.
- docs/development.md's layout names the modules that are there, where they are.
- Each suite's ``description`` (what ``biascheck suites`` and the reports show) agrees with its
  settings wherever it states a number, and states no number this test does not check.
"""

from __future__ import annotations

import csv
import re
import tomllib
import unicodedata
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from biascheck.config.manifest import SuiteManifest, load_manifest

from conftest import ROOT

SUITE_FILES = sorted([*ROOT.glob("suites/*/suite.toml"), *ROOT.glob("examples/*/suite.toml")])
SHIPPED = sorted(
    {
        *SUITE_FILES,
        *ROOT.glob("examples/**/*.toml"),
        *ROOT.glob("examples/**/*.py"),
        ROOT / "baselines" / "README.md",
        *(p for ext in ("py", "toml", "json") for p in (ROOT / "biascheck").rglob(f"*.{ext}")),
    }
)
PROSE = sorted([ROOT / "README.md", *ROOT.glob("docs/*.md")])

# The project's own top-level folders a path may start with. Not preceded by a word, "/" or ".",
# so that a URL's path (https://docs.litellm.ai/docs/providers) or another file's name is no match.
# Nor one that goes on into a placeholder (suites/mbbq-<language>).
PATH = re.compile(r"(?<![\w/.\-<{])((?:biascheck|bench|suites|examples|tests|docs|baselines|\.ci|\.github)/[\w./*-]*[\w*/])(?![\w./*<{-])")
# What the docs' examples name in a user's repository, not in this one: the baselines a run records,
# a suite of one's own.
USERS = re.compile(r"baselines/\w|suites/my-")
# A section by name: `docs/x.md, "Name"`, `docs/x.md ("Name")`, `docs/x.md, Name)` (a few words).
DOC_SECTION = re.compile(r"(?<![\w/.])docs/([\w-]+\.md)(?:#([\w-]+)|,? \(?\"([^\"]+)\"|, ([A-Z][\w-]*(?: [\w-]+){0,3})\))")
# The README's sections: `README, "Name"`, `README ("Name")`, `README "Name"`, `README, Name)`,
# `README's "Name"`, `README's Name section`; never upstream's README (a benchmark's own).
README_SECTION = re.compile(
    r"(?<!upstream's )(?<!upstream )(?<![\w.])README(?:'s)?(?!\.)(?:,? \(?\"([^\"]+)\"|, ([A-Z][\w-]*(?: [\w-]+){0,3})\)|'s ([A-Z][\w -]{0,40}?) section)"
)


def flat(path: Path) -> str:
    """The file's text with its line breaks, comment marks and indentation made single spaces, so
    that a reference wrapped across lines of a comment or docstring reads as written."""
    text = path.read_text("utf-8")
    return re.sub(r"[ \t]*\n[ \t]*(?:#+[ \t]?)?[ \t]*", " ", text)


def slug(heading: str) -> str:
    """mkdocs' (Python-Markdown toc's) anchor of a heading."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def sections(page: Path) -> tuple[set[str], set[str]]:
    """(the page's section names, lower case, its anchors): its headings outside code blocks, and
    the bold run-in headings that open a paragraph (**How thresholds are judged** ...)."""
    names, anchors, fenced = set(), set(), False
    for line in page.read_text("utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (heading := re.match(r"#{1,6} (.+?)\s*(?:\{[^}]*\})?$", line)):
            names.add(re.sub(r"[`*]", "", heading.group(1)).lower())
            anchors.add(slug(heading.group(1)))
        elif not fenced and (lead := re.match(r"\*\*([^*]+?)\.?\*\*", line)):
            names.add(lead.group(1).lower())
    return names, anchors


# An installed wheel's folders where the source tree has them elsewhere (pyproject.toml's package-dir).
INSTALLED_AS = {"biascheck/suites": "suites"}


def path_resolves(text: str) -> bool:
    """A path of the project exists (a glob, something); a placeholder (suites/NAME) is no path."""
    text = text.rstrip(".")
    if any(re.fullmatch(r"[A-Z][A-Z_]+", part) for part in text.split("/")):
        return True
    for installed, source in INSTALLED_AS.items():
        if text == installed or text.startswith(installed + "/"):
            text = source + text[len(installed) :]
    return any(ROOT.glob(text)) if "*" in text else (ROOT / text).exists()


def shipped_references(files: list[Path], users: bool = False) -> Iterator[tuple[str, str, str]]:
    """(file, reference, why it does not resolve) of each broken reference."""
    docs_sections = {page.name: sections(page) for page in ROOT.glob("docs/*.md")}
    readme_names, _ = sections(ROOT / "README.md")
    for file in files:
        where = str(file.relative_to(ROOT)) if file.is_relative_to(ROOT) else file.name
        text = flat(file)
        for match in PATH.finditer(text):
            if not path_resolves(match.group(1)) and not (users and USERS.match(match.group(1))):
                yield where, match.group(1), "no such file or folder"
        for match in DOC_SECTION.finditer(text):
            page, anchor, name = match.group(1), match.group(2), match.group(3) or match.group(4)
            if page not in docs_sections:
                yield where, match.group(0), "no such page"
            elif anchor is not None and anchor not in docs_sections[page][1]:
                yield where, match.group(0), f"no heading of docs/{page} has the anchor #{anchor}"
            elif name is not None and name.lower() not in docs_sections[page][0]:
                yield where, match.group(0), f"docs/{page} has no section {name!r}"
        for match in README_SECTION.finditer(text):
            name = next(group for group in match.groups() if group)
            if name.lower() not in readme_names:
                yield where, match.group(0), f"README.md has no section {name!r} (moved to docs/?)"


def test_every_reference_in_a_shipped_file_resolves():
    broken = list(shipped_references(SHIPPED))
    assert not broken, "\n".join(f"{where}: {ref!r}: {why}" for where, ref, why in broken)


def test_every_path_and_section_the_docs_name_in_prose_resolves():
    """mkdocs checks the pages' links; this, what they name in running text and code spans."""
    broken = list(shipped_references(PROSE, users=True))
    assert not broken, "\n".join(f"{where}: {ref!r}: {why}" for where, ref, why in broken)


def test_the_patterns_find_the_references_they_are_for(tmp_path: Path):
    """The checks above are only as good as what they find: each form of reference is found, and
    prose (upstream's README, a URL, a placeholder) is not."""
    sample = tmp_path / "sample.toml"
    sample.write_text(
        '# (README, "How thresholds\n# are judged"), README, GG-BBQ), the README\'s Nowhere section,\n'
        '# docs/metrics.md, "No such", (docs/metrics.md, Nothing here), docs/suites.md#no-anchor,\n'
        "# docs/nowhere.md, biascheck/reporting/format.py, bench/nothing.py\n"
        '# fine: docs/metrics.md, "MBBQ", (docs/metrics.md, MBBQ), docs/suites.md#data, suites/bbq,\n'
        '# upstream\'s README, "Evaluation Metric", https://docs.litellm.ai/docs/providers, baselines/<suite>/x,\n'
        '# FILE.README.txt, suites/*/suite.toml, docs/suites.md, "How thresholds are judged"\n',
        "utf-8",
    )
    found = [ref for _, ref, _ in shipped_references([sample])]
    assert found == [
        "docs/nowhere.md",
        "biascheck/reporting/format.py",
        "bench/nothing.py",
        'docs/metrics.md, "No such"',
        "docs/metrics.md, Nothing here)",
        "docs/suites.md#no-anchor",
        'README, "How thresholds are judged"',
        "README, GG-BBQ)",
        "README's Nowhere section",
    ]


def test_the_development_layout_names_the_modules_that_are_there():
    """Each top-level entry of the layout exists in biascheck/, each module and package of
    biascheck/ is in it, and a ``name.py`` its description names is in that folder (or is a path)."""
    page = (ROOT / "docs" / "development.md").read_text("utf-8")
    block = page.split("## Layout", 1)[1].split("```", 2)[1]
    entries: dict[str, list[str]] = {}
    current = None
    for line in block.splitlines():
        if entry := re.match(r"  ([\w.]+/?)\s", line + " "):
            current = entry.group(1)
            entries[current] = [line[len(entry.group(0)) :]]
        elif current and line.startswith("   "):
            entries[current].append(line)
    package = ROOT / "biascheck"
    there = {p.name + "/" if p.is_dir() else p.name for p in package.iterdir() if not p.name.startswith("__") and (p.is_dir() or p.suffix == ".py")}
    missing = sorted(name for name in entries if name.rstrip("/") + ("/" if name.endswith("/") else "") not in there)
    unlisted = sorted(there - set(entries))
    assert not missing and not unlisted, f"layout names {missing} that are not in biascheck/; it leaves out {unlisted}"
    misplaced = []
    for name, lines in entries.items():
        folder = package / name if name.endswith("/") else package
        for module in re.findall(r"(?<![\w/.])([\w/]+\.py)\b", " ".join(lines)):
            if not (folder / module).exists() and not (package / module).exists():
                misplaced.append(f"{name}: {module}")
    assert not misplaced, f"modules the layout names where they are not: {misplaced}"


# --- descriptions ------------------------------------------------------------------------------------


def prompts_of(manifest: SuiteManifest, data: Path | None) -> list[str] | None:
    """The ids of the prompts a QA suite asks (None: they come from a data file and no mirror is here)."""
    if manifest.prompt_ids is not None:
        return list(manifest.prompt_ids)
    ids = [p.id for p in manifest.inline_prompts]
    if manifest.prompts_from_data:
        if data is None:
            return None
        from biascheck.benchmarks.qa.kobbq import load_prompts

        ids += [p.id for p in load_prompts(data / manifest.data[manifest.prompts_from_data].path)]
    return ids


def orders_of(manifest: SuiteManifest) -> int:
    from biascheck.benchmarks.qa.benchmark import choice_orders

    return len(choice_orders(manifest.choice_orders))


def csv_rows(manifest: SuiteManifest, data: Path | None) -> int | None:
    if data is None:
        return None
    total = 0
    for key in manifest.data_categories:
        with open(data / manifest.data[key].path, encoding="utf-8", newline="") as handle:
            total += sum(1 for _ in csv.DictReader(handle))
    return total


def own_bbq_templates(raw: dict) -> dict[str, int]:
    """examples/own-bbq: the templates of each category, from its own data folder (a file a category)."""
    counts = {}
    field = raw["bbq"]["fields"]["question_index"]
    for file in sorted((ROOT / "examples" / "own-bbq" / raw["suite"]["data"]).glob("*.csv")):
        with open(file, encoding="utf-8", newline="") as handle:
            counts[file.stem] = len({row[field] for row in csv.DictReader(handle)})
    return counts


def hbb_questions(data: Path | None) -> int | None:
    if data is None:
        return None
    from biascheck.benchmarks.hbb.data import load_questions

    manifest = load_manifest(ROOT / "suites" / "hbb")
    return len(load_questions(data / manifest.data["questions"].path))


def number(text: str) -> int:
    return int(text.replace(",", ""))


Check = Callable[[SuiteManifest, dict, Path | None], object]
# What a description may state, and what it must then agree with: (pattern, the stated value, the
# value from the settings (None: needs the data mirror, which is not here)).
CLAIMS: list[tuple[str, Callable[[re.Match[str]], object] | None, Check | None]] = [
    # The specific ones first: a number one of them reads is read by no later claim.
    (r"(\d[\d,]*) instances \((\d+) per template, (\d+) templates per category\)", None, None),  # the arithmetic, below
    (r"age and gender, (\d+) templates each", lambda m: {"age": int(m[1]), "gender": int(m[1])}, lambda mf, raw, data: own_bbq_templates(raw)),
    (r"run 1 of the paper's five", lambda m: [1], lambda mf, raw, data: raw["bbg"]["runs"]),
    (
        r"the paper's five runs \(evaluation sets 1, 2, 3, 4, 42 with story prompts 1-5\)",
        lambda m: ([1, 2, 3, 4, 5], ["1", "2", "3", "4", "42"], 5),
        lambda mf, raw, data: (raw["bbg"]["runs"], [_evaluation_set(k) for k in raw["bbg"]["runs"]], len(raw["bbg"]["story_prompts"])),
    ),
    (
        r"a seeded stratified subset of (\d+) of the ([\d,]+) questions",
        lambda m: (int(m[1]), number(m[2])),
        lambda mf, raw, data: None if (n := hbb_questions(data)) is None else (raw["hbb"]["questions"], n),
    ),
    (r"all ([\d,]+) questions", lambda m: number(m[1]), lambda mf, raw, data: None if "questions" in raw["hbb"] else hbb_questions(data)),
    (r"\(([\d,]+) instances\)", lambda m: number(m[1]), lambda mf, raw, data: _hbb_instances(raw, data)),
    (r"all ([\d,]+) instances", lambda m: number(m[1]), lambda mf, raw, data: csv_rows(mf, data)),
    (r"(\d+) templates (?:each|per category)", lambda m: int(m[1]), lambda mf, raw, data: mf.templates_per_category),
    (r"(\d+) (?:mirrored )?categories", lambda m: int(m[1]), lambda mf, raw, data: len(set(mf.data_categories.values()))),
    (r"(\d+) (?:German |English )?prompts", lambda m: int(m[1]), lambda mf, raw, data: None if (p := prompts_of(mf, data)) is None else len(p)),
    (r"\bprompt ([A-Za-z]*-?\d+)\b", lambda m: [m[1]], lambda mf, raw, data: prompts_of(mf, data)),
    (r"\bthe harness prompt\b", lambda m: ["harness"], lambda mf, raw, data: prompts_of(mf, data)),
    (r"x (\d+) choice orders", lambda m: int(m[1]), lambda mf, raw, data: orders_of(mf)),
    (r"one (?:example|instance|row) per (?:template )?cell", lambda m: "one-per-group", lambda mf, raw, data: mf.sample),
]


def _evaluation_set(run: int) -> str:
    from biascheck.benchmarks.bbg.data import EVALUATION_SETS

    return EVALUATION_SETS[run]


def _hbb_instances(raw: dict, data: Path | None) -> int | None:
    from biascheck.benchmarks.hbb.data import CATEGORY_COUNTS

    questions = raw["hbb"].get("questions") or hbb_questions(data)
    return None if questions is None else questions * sum(CATEGORY_COUNTS.values())


def description_claims(suite: Path, data: Path | None) -> tuple[list[str], list[str]]:
    """(the claims of the suite's description its settings contradict, the numbers no claim reads)."""
    manifest = load_manifest(suite)
    raw = tomllib.loads(suite.read_text("utf-8"))
    text = manifest.description or ""
    wrong, read = [], []
    for pattern, stated, actual in CLAIMS:
        for match in re.finditer(pattern, text):
            if any(start < match.end() and match.start() < end for start, end in read):
                continue
            read.append(match.span())
            if stated is None:  # N instances (k per template, T templates per category): the arithmetic
                total, per, templates = number(match[1]), int(match[2]), int(match[3])
                categories = len(set(manifest.data_categories.values()))
                if total != per * templates * categories or templates != manifest.templates_per_category:
                    wrong.append(f"{match[0]!r}: {templates} templates per category set {manifest.templates_per_category}, x {categories} categories")
                continue
            value = actual(manifest, raw, data)
            if value is None:
                continue  # needs the data mirror
            if stated(match) != value:
                wrong.append(f"{match[0]!r} says {stated(match)}, the settings give {value}")
    unread = [m[0] for m in re.finditer(r"\d[\d,]*", text) if not any(start <= m.start() < end for start, end in read)]
    return wrong, unread


@pytest.mark.parametrize("suite", [p.parent for p in SUITE_FILES], ids=lambda p: str(p.relative_to(ROOT)))
def test_each_suite_description_agrees_with_its_settings(suite: Path):
    import os

    data = Path(os.environ["BIASCHECK_DATA_DIR"]) if os.environ.get("BIASCHECK_DATA_DIR") else None
    wrong, unread = description_claims(suite / "suite.toml", data)
    assert not wrong, f"{suite.name}'s description: " + "; ".join(wrong)
    assert not unread, f"{suite.name}'s description states {unread}, which no check of this test reads: add one to CLAIMS"


def test_the_description_check_reads_a_wrong_number(tmp_path: Path):
    """bbq-quick's description, had it said 5 templates per category (as it once did) for its 10."""
    text = (ROOT / "suites" / "bbq-quick" / "suite.toml").read_text("utf-8")
    suite = tmp_path / "suite.toml"
    suite.write_text(
        re.sub(
            r'^description = ".*"$', 'description = "BBQ, 6 mirrored categories, 5 templates each, prompt En-2 x 1 choice orders"', text, flags=re.M
        ),
        "utf-8",
    )
    wrong, unread = description_claims(suite, None)
    assert wrong == [
        "'5 templates each' says 5, the settings give 10",
        "'prompt En-2' says ['En-2'], the settings give ['En-1']",
        "'x 1 choice orders' says 1, the settings give 3",
    ]
    assert unread == []


def test_the_benchmark_page_counts_the_protocol_it_describes():
    from biascheck.benchmarks import BaseBenchmark, Benchmark

    page = " ".join((ROOT / "docs" / "adding-a-benchmark.md").read_text("utf-8").split())
    stated = re.search(r"the protocol in `biascheck/benchmarks/base.py`: (\d+) members, of which its base class asks for (\d+)", page)
    assert stated, "docs/adding-a-benchmark.md no longer counts the protocol's members: update this test"
    members = [name for name in vars(Benchmark) if not name.startswith("_")]
    assert (int(stated[1]), int(stated[2])) == (len(members), len(BaseBenchmark.__abstractmethods__))


def test_the_suites_name_the_family_correction_the_comparison_makes():
    """The regression checks hold every bound at 1 - alpha / m (Bonferroni; docs/baselines.md says
    why not Holm). The suites' comments, which `biascheck init` copies, say the same."""
    from biascheck.evaluation import regression

    assert "Bonferroni" in (regression.__doc__ or "") and "Holm" not in (regression.__doc__ or "")
    for suite in SUITE_FILES:
        comments = " ".join(line for line in suite.read_text("utf-8").splitlines() if line.lstrip().startswith("#"))
        assert "Holm" not in comments, f"{suite.relative_to(ROOT)} says Holm; the comparison is Bonferroni's"
