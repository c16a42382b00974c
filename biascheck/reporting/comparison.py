"""A comparison with a baseline (``comparison.json``) in Markdown (for pull requests and
``$GITHUB_STEP_SUMMARY``), and the rows and headline the terminal shares (:mod:`.terminal`; GitHub
annotations: :mod:`.github`). Like the results renderings, they are built from the JSON document
alone, so ``biascheck diff`` and the pytest plugin (also under xdist) show the same thing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from biascheck.core import format as fmt
from biascheck.core.format import Markdown, flips_anchor, md_fence, md_row, md_text, strong
from biascheck.evaluation.regression import OVERALL, bounds_label, on_inconclusive_of, resolve_text, unresolved_checks

MARK = {
    "regressed": strong("REGRESSED"),
    "improved": "improved",
    "within margin": "within margin",
    "inconclusive": Markdown("_inconclusive_"),
    "not compared": "not compared",
}


def headline(comparison: Mapping[str, Any]) -> str:
    counts: dict[str, int] = {}
    for result in comparison["results"]:
        counts[result["verdict"]] = counts.get(result["verdict"], 0) + 1
    verdicts = ", ".join(f"{counts[v]} {v}" for v in ("regressed", "inconclusive", "improved", "within margin", "not compared") if v in counts)
    base, cand = comparison["baseline"], comparison["candidate"]
    return (
        f"{comparison['suite']['name']}: {cand['model']} vs baseline {base['model']} ({base['path']}): {verdicts}; "
        f"{comparison['flips']['total']} of {comparison['cases']['common']} cases changed outcome"
    )


def unresolved_heading(comparison: Mapping[str, Any]) -> str | None:
    """One line on the checks that could not be resolved and what they do to the gate (its
    ``on_inconclusive``); None when there are none."""
    count = len(unresolved_checks(comparison))
    if not count:
        return None
    checks = f"{count} check{'s' if count > 1 else ''}"
    mode = on_inconclusive_of(comparison)
    if mode == "fail":
        return f"{checks} could not be resolved, and fail the gate (on_inconclusive = fail)"
    if mode == "warn":
        return (
            f"WARNING: {checks} could not be resolved: the gate passes without showing or ruling out a worsening beyond "
            "the margin (on_inconclusive = warn; 'fail' would fail it, 'pass' quiets this)"
        )
    return f"{checks} inconclusive, passing (on_inconclusive = pass)"


def unresolved_lines(comparison: Mapping[str, Any]) -> list[str]:
    """Per unresolved check: what it detects against its margin, and the suite size that would
    resolve it (``cases_to_resolve``, an estimate assuming the same spread per case)."""
    return [
        f"{r['metric']} ({r['scope']}): detects {fmt.value(r.get('mde'))} against margin {fmt.value(r.get('margin'))}; {resolve_text(r)}"
        for r in unresolved_checks(comparison)
    ]


def rows(comparison: Mapping[str, Any]) -> list[list[str]]:
    rows = []
    for r in comparison["results"]:
        rows.append(
            [
                r["metric"],
                r["scope"],
                fmt.value(r["baseline"]["value"]),
                fmt.value(r["candidate"]["value"]),
                f"{fmt.signed(r.get('worsening'))} {fmt.signed_ci(r.get('worsening_ci'))}",
                fmt.p_value(r["p_adjusted"]),
                fmt.value(r["mde"]),
                r["rule"],
                r["verdict"],
            ]
        )
    return rows


def render_comparison_markdown(comparison: Mapping[str, Any]) -> str:
    status = "REGRESSED" if comparison["regressed"] else ("passed" if comparison["passed"] else "FAILED (inconclusive checks)")
    settings = comparison["settings"]
    baseline = (
        f"Baseline made {comparison['baseline']['created_at']} with biascheck {comparison['baseline']['tool_version']}"
        + (f" at commit {comparison['baseline']['git_commit'][:12]}" if comparison["baseline"]["git_commit"] else "")
        + ". "
        f"Worsening = how much worse the candidate is (positive: worse), with {bounds_label(settings['family_size'], settings['alpha'])}: "
        f"each verdict is read off them (regressed: beyond the margin; within margin: inside it; inconclusive: across it). "
        f"Spread from a paired bootstrap over templates (t, templates - 1 df) and over cases ({settings['n_boot']} resamples), "
        f"the wider; an exact sign test on the changed cases; p = Bonferroni-adjusted. "
        f"mde = the smallest worsening detected with {fmt.percent(settings['power'])} power."
    )
    out = [f"# biascheck diff: {md_text(comparison['suite']['name'])} — {status}", "", md_text(headline(comparison)), "", md_text(baseline), ""]
    if comparison["warnings"]:
        out += [f"- warning: {md_text(w)}" for w in comparison["warnings"]] + [""]
    out += [
        "| metric | scope | baseline | candidate | worsening [bounds] | p (adjusted) | mde | rule | verdict |",
        "|---|---|---:|---:|---|---:|---:|---|---|",
    ]
    for r, row in zip(comparison["results"], rows(comparison)):
        row[-1] = MARK[r["verdict"]]
        if r["verdict"] == "regressed":
            row[-1] = Markdown(f"{MARK['regressed']} ([flips](#{evidence_anchor(comparison, r['scope'])}))")
        out.append(md_row(row))
    heading = unresolved_heading(comparison)
    if heading:
        out += ["", "## Unresolved checks", "", md_text(heading), ""] + [f"- {md_text(line)}" for line in unresolved_lines(comparison)]
        out += ["", "Suite sizes are estimates: the detectable worsening shrinks as 1/sqrt(cases), assuming the same spread per case."]
    notable = [r for r in comparison["results"] if r["verdict"] in ("regressed", "inconclusive")]
    if notable:
        out += ["", "## Why", ""] + [f"- {md_text(r['explanation'])}" for r in notable]
    return "\n".join(out + flips_markdown(comparison)) + "\n"


def evidence_anchor(comparison: Mapping[str, Any], scope: str) -> str:
    """Where a check of ``scope`` finds its flips: its category's examples, else all flips."""
    examples = (comparison.get("flips") or {}).get("examples") or []
    return flips_anchor(scope) if any(isinstance(f, Mapping) and f.get("category") == scope for f in examples) else "flips"


def regressed_categories(comparison: Mapping[str, Any]) -> set[str]:
    """The categories with a check that regressed in the category itself."""
    return {r["scope"] for r in comparison["results"] if r["verdict"] == "regressed" and r["scope"] != OVERALL}


def flip_table(flips: Mapping[str, Any]) -> tuple[list[str], list[tuple[str, int, list[int]]]]:
    """The compact table of flips per category and direction: the transitions (columns, as
    ``by_transition`` orders them), and per category its total and count per transition."""
    transitions = list(flips["by_transition"])
    rows = [(c, sum(counts.values()), [counts.get(t, 0) for t in transitions]) for c, counts in flips["by_category"].items()]
    return transitions, rows


def examples_by_category(flips: Mapping[str, Any]) -> dict[str, list[Mapping[str, Any]]]:
    """The examples shown, grouped by category in the order of ``by_category``."""
    grouped: dict[str, list[Mapping[str, Any]]] = {c: [] for c in flips["by_category"]}
    for flip in flips["examples"]:
        grouped.setdefault(flip["category"], []).append(flip)
    return {c: shown for c, shown in grouped.items() if shown}


def examples_note(flips: Mapping[str, Any]) -> str:
    """How the examples were chosen, and where every flip is."""
    where = f"; every flip is in {flips['file']}" if flips.get("file") else ""
    if flips["shown"] >= flips["total"]:
        return f"All {fmt.count(flips['total'])} shown{where}."
    return (
        f"{fmt.count(flips['shown'])} of {fmt.count(flips['total'])} shown (limit {fmt.count(flips['limit'])}), taken in turn from each "
        f"regressed category's directions toward worse first, then from the others{where}."
    )


def flips_markdown(comparison: Mapping[str, Any]) -> list[str]:
    """The changed cases: counts per category and direction, then the examples by category, each
    category under its anchor (:func:`flips_anchor`), which a regressed check's row links to."""
    flips = comparison["flips"]
    out = [
        "",
        '<a id="flips"></a>',
        "",
        f"## Changed cases ({md_text(fmt.count(flips['total']))} of {md_text(fmt.count(comparison['cases']['common']))})",
        "",
    ]
    if not flips["total"]:
        return out + ["No case changed outcome."]
    transitions, table = flip_table(flips)
    evidence = regressed_categories(comparison)
    out += [md_row(["category", "changed", *transitions]), "|---|" + "---:|" * (len(transitions) + 1)]
    for category, total, counts in table:
        name = Markdown(f"{md_text(category)} ({strong('regressed')})") if category in evidence else category
        out.append(md_row([name, total, *counts]))
    out.append(md_row([Markdown("_all_"), flips["total"], *flips["by_transition"].values()]))
    out += ["", md_text(examples_note(flips))]
    for category, cases in examples_by_category(flips).items():
        counted = sum(flips["by_category"].get(category, {}).values())
        # Raw HTML, where md_text still opens no tag: a category is named by a data file.
        out += ["", f'<a id="{flips_anchor(category)}"></a>', ""]
        out += [f"<details><summary>{md_text(f'{category}: {len(cases)} shown of {counted}')}</summary>", ""]
        for case in cases:
            out += _flip_markdown(case)
        out += ["", "</details>"]
    return out


def _flip_markdown(case: Mapping[str, Any]) -> list[str]:
    answer = "(none)" if case.get("answer") is None else case["answer"]
    prompt = f", prompt {case['prompt']}" if case.get("prompt") is not None else ""
    out = [
        "- "
        + md_text(f"{case['case_id']} ({case['context_type']}{prompt}): {case['baseline']} ->")
        + f" {strong(case['candidate'])}; answer: {md_text(answer)}"
    ]
    if case.get("baseline_answer") is not None:
        out.append("  " + md_text(f"baseline's answer: {case['baseline_answer']}"))
    if case.get("options"):
        out.append("  " + md_text("options: " + " / ".join(map(str, case["options"]))))
    named = [(label, case.get(key)) for label, key in _OPTION_LABELS if case.get(key) is not None]
    if named:
        out.append("  " + md_text("; ".join(f"{label}: {text}" for label, text in named)))
    if case.get("prompt_text"):
        out += ["", *("  " + line for line in md_fence(case["prompt_text"]))]
    return out


_OPTION_LABELS = (("correct", "correct_option"), ("stereotyped", "stereotyped_option"))
