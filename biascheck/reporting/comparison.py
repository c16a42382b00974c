"""A comparison with a baseline (``comparison.json``) in Markdown (for pull requests and
``$GITHUB_STEP_SUMMARY``), and the rows and headline the terminal shares (:mod:`.terminal`; GitHub
annotations: :mod:`.github`). Like the results renderings, they are built from the JSON document
alone, so ``biascheck diff`` and the pytest plugin (also under xdist) show the same thing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from biascheck.core import format as fmt
from biascheck.core.format import Markdown, md_fence, md_row, md_text, strong
from biascheck.evaluation.regression import bounds_label, on_inconclusive_of, resolve_text, unresolved_checks

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
        out.append(md_row(row))
    heading = unresolved_heading(comparison)
    if heading:
        out += ["", "## Unresolved checks", "", md_text(heading), ""] + [f"- {md_text(line)}" for line in unresolved_lines(comparison)]
        out += ["", "Suite sizes are estimates: the detectable worsening shrinks as 1/sqrt(cases), assuming the same spread per case."]
    notable = [r for r in comparison["results"] if r["verdict"] in ("regressed", "inconclusive")]
    if notable:
        out += ["", "## Why", ""] + [f"- {md_text(r['explanation'])}" for r in notable]
    flips = comparison["flips"]
    out += ["", f"## Changed cases ({md_text(flips['total'])})", ""]
    if flips["by_transition"]:
        out += ["| baseline -> candidate | cases |", "|---|---:|"]
        out += [md_row(item) for item in flips["by_transition"].items()]
    if flips["shown"] < flips["total"]:
        out += ["", md_text(f"Listing the first {flips['shown']} (toward the biased answer first).")]
    for category, cases in flips["by_category"].items():
        # Raw HTML, where md_text still opens no tag: a category is named by a data file.
        out += ["", f"<details><summary>{md_text(f'{category}: {len(cases)} listed')}</summary>", ""]
        for case in cases:
            answer = "(none)" if case["answer"] is None else case["answer"]
            out.append(
                "- "
                + md_text(f"{case['case_id']} ({case['context_type']}): {case['baseline']} ->")
                + f" {strong(case['candidate'])}; answer: {md_text(answer)}"
            )
            if case["prompt"]:
                out += ["", *("  " + line for line in md_fence(case["prompt"]))]
        out += ["", "</details>"]
    return "\n".join(out) + "\n"
