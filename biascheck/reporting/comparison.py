"""A comparison with a baseline (:class:`~biascheck.records.comparison.Comparison`, what
``comparison.json`` holds) in Markdown (for pull requests and ``$GITHUB_STEP_SUMMARY``), and the
rows and headline the terminal shares (:mod:`.terminal`; GitHub annotations: :mod:`.github`). Like
the results renderings, they are built from the record alone, so ``biascheck diff`` and the pytest
plugin (also under xdist) show the same thing.
"""

from __future__ import annotations

from biascheck.core import format as fmt
from biascheck.core.format import Markdown, flips_anchor, md_fence, md_row, md_text, strong
from biascheck.evaluation.regression import OVERALL, bounds_label, resolve_text
from biascheck.records.comparison import Comparison, Flip, Flips
from biascheck.reporting.decision import NOT_GATED

MARK = {
    "regressed": strong("REGRESSED"),
    "improved": "improved",
    "within margin": "within margin",
    "inconclusive": Markdown("_inconclusive_"),
    "not compared": "not compared",
}


def headline(comparison: Comparison) -> str:
    counts: dict[str, int] = {}
    for check in comparison.checks:
        counts[check.verdict] = counts.get(check.verdict, 0) + 1
    verdicts = ", ".join(f"{counts[v]} {v}" for v in ("regressed", "inconclusive", "improved", "within margin", "not compared") if v in counts)
    base, cand = comparison.baseline, comparison.candidate
    return (
        f"{comparison.suite['name']}: {cand['model']} vs baseline {base['model']} ({base['path']}): {verdicts}; "
        f"{comparison.flips.total} of {comparison.cases['common']} cases changed outcome"
    )


def unresolved_heading(comparison: Comparison) -> str | None:
    """One line on the checks that could not be resolved and what they do to the gate (its
    ``on_inconclusive``); None when there are none."""
    count = len(comparison.inconclusive)
    if not count:
        return None
    checks = f"{count} check{'s' if count > 1 else ''}"
    mode = comparison.on_inconclusive
    if mode == "fail":
        return f"{checks} could not be resolved, and fail the gate (on_inconclusive = fail)"
    if mode == "warn":
        return (
            f"WARNING: {checks} could not be resolved: the gate passes without showing or ruling out a worsening beyond "
            "the margin (on_inconclusive = warn; 'fail' would fail it, 'pass' quiets this)"
        )
    return f"{checks} inconclusive, passing (on_inconclusive = pass)"


def unresolved_lines(comparison: Comparison) -> list[str]:
    """Per unresolved check: what it detects against its margin, and the suite size that would
    resolve it (``cases_to_resolve``, an estimate assuming the same spread per case)."""
    return [
        f"{c.metric} ({c.scope}): detects {fmt.value(c.mde)} against margin {fmt.value(c.margin)}; {resolve_text(c)}" for c in comparison.inconclusive
    ]


def rows(comparison: Comparison) -> list[list[str]]:
    return [
        [
            c.metric,
            c.scope,
            fmt.value(c.baseline.value),
            fmt.value(c.candidate.value),
            f"{fmt.signed(c.worsening)} {fmt.signed_ci(c.worsening_ci)}",
            fmt.p_value(c.p_adjusted),
            fmt.value(c.mde),
            c.rule,
            c.verdict if c.gated else f"{c.verdict}, {NOT_GATED}",
        ]
        for c in comparison.checks
    ]


def render_comparison_markdown(comparison: Comparison) -> str:
    status = "REGRESSED" if comparison.regressed else ("passed" if comparison.passed else "FAILED (inconclusive checks)")
    settings, made = comparison.settings, comparison.baseline
    baseline = (
        f"Baseline made {made['created_at']} with biascheck {made['tool_version']}"
        + (f" at commit {made['git_commit'][:12]}" if made["git_commit"] else "")
        + ". "
        f"Worsening = how much worse the candidate is (positive: worse), with {bounds_label(settings['family_size'], settings['alpha'])}: "
        f"each verdict is read off them (regressed: beyond the margin; within margin: inside it; inconclusive: across it). "
        f"Spread from a paired bootstrap over templates (t, templates - 1 df) and over cases ({settings['n_boot']} resamples), "
        f"the wider; an exact sign test on the changed cases; p = Bonferroni-adjusted. "
        f"mde = the smallest worsening detected with {fmt.percent(settings['power'])} power."
    )
    out = [f"# biascheck diff: {md_text(comparison.suite['name'])} — {status}", "", md_text(headline(comparison)), "", md_text(baseline), ""]
    if comparison.warnings:
        out += [f"- warning: {md_text(w)}" for w in comparison.warnings] + [""]
    out += [
        "| metric | scope | baseline | candidate | worsening [bounds] | p (adjusted) | mde | rule | verdict |",
        "|---|---|---:|---:|---|---:|---:|---|---|",
    ]
    for check, row in zip(comparison.checks, rows(comparison)):
        row[-1] = MARK[check.verdict] if check.gated else f"{check.verdict}, {NOT_GATED}"
        if check.regressed and check.gated:
            row[-1] = Markdown(f"{MARK['regressed']} ([flips](#{evidence_anchor(comparison, check.scope)}))")
        out.append(md_row(row))
    heading = unresolved_heading(comparison)
    if heading:
        out += ["", "## Unresolved checks", "", md_text(heading), ""] + [f"- {md_text(line)}" for line in unresolved_lines(comparison)]
        out += ["", "Suite sizes are estimates: the detectable worsening shrinks as 1/sqrt(cases), assuming the same spread per case."]
    notable = [c for c in comparison.checks if c.verdict in ("regressed", "inconclusive")]
    if notable:
        out += ["", "## Why", ""] + [f"- {md_text(c.explanation)}" for c in notable]
    return "\n".join(out + flips_markdown(comparison)) + "\n"


def evidence_anchor(comparison: Comparison, scope: str) -> str:
    """Where a check of ``scope`` finds its flips: its category's examples, else all flips."""
    return flips_anchor(scope) if any(flip.category == scope for flip in comparison.flips.examples) else "flips"


def regressed_categories(comparison: Comparison) -> set[str]:
    """The categories with a check that regressed in the category itself."""
    return {c.scope for c in comparison.regressions if c.scope != OVERALL}


def flip_table(flips: Flips) -> tuple[list[str], list[tuple[str, int, list[int]]]]:
    """The compact table of flips per category and direction: the transitions (columns, as
    ``by_transition`` orders them), and per category its total and count per transition."""
    transitions = list(flips.by_transition)
    table = [(c, sum(counts.values()), [counts.get(t, 0) for t in transitions]) for c, counts in flips.by_category.items()]
    return transitions, table


def examples_by_category(flips: Flips) -> dict[str, list[Flip]]:
    """The examples shown, grouped by category in the order of ``by_category``."""
    grouped: dict[str, list[Flip]] = {c: [] for c in flips.by_category}
    for flip in flips.examples:
        grouped.setdefault(flip.category, []).append(flip)
    return {c: shown for c, shown in grouped.items() if shown}


def examples_note(flips: Flips) -> str:
    """How the examples were chosen, and where every flip is."""
    total, shown, limit, file = flips.total, flips.shown, flips.limit, flips.file
    where = f"; every flip is in {file}" if file else ""
    if shown >= total:
        return f"All {fmt.count(total)} shown{where}."
    return (
        f"{fmt.count(shown)} of {fmt.count(total)} shown (limit {fmt.count(limit)}), taken in turn from each "
        f"regressed category's directions toward worse first, then from the others{where}."
    )


def flips_markdown(comparison: Comparison) -> list[str]:
    """The changed cases: counts per category and direction, then the examples by category, each
    category under its anchor (:func:`flips_anchor`), which a regressed check's row links to."""
    flips = comparison.flips
    out = [
        "",
        '<a id="flips"></a>',
        "",
        f"## Changed cases ({md_text(fmt.count(flips.total))} of {md_text(fmt.count(comparison.cases['common']))})",
        "",
    ]
    if not flips.total:
        return out + ["No case changed outcome."]
    transitions, table = flip_table(flips)
    evidence = regressed_categories(comparison)
    out += [md_row(["category", "changed", *transitions]), "|---|" + "---:|" * (len(transitions) + 1)]
    for category, total, counts in table:
        name = Markdown(f"{md_text(category)} ({strong('regressed')})") if category in evidence else category
        out.append(md_row([name, total, *counts]))
    out.append(md_row([Markdown("_all_"), flips.total, *flips.by_transition.values()]))
    out += ["", md_text(examples_note(flips))]
    for category, cases in examples_by_category(flips).items():
        counted = sum(flips.by_category.get(category, {}).values())
        # Raw HTML, where md_text still opens no tag: a category is named by a data file.
        out += ["", f'<a id="{flips_anchor(category)}"></a>', ""]
        out += [f"<details><summary>{md_text(f'{category}: {len(cases)} shown of {counted}')}</summary>", ""]
        for case in cases:
            out += _flip_markdown(case)
        out += ["", "</details>"]
    return out


def _flip_markdown(flip: Flip) -> list[str]:
    answer = "(none)" if flip.answer is None else flip.answer
    prompt = f", prompt {flip.prompt}" if flip.prompt is not None else ""
    out = [
        "- " + md_text(f"{flip.case_id} ({flip.context_type}{prompt}): {flip.baseline} ->") + f" {strong(flip.candidate)}; answer: {md_text(answer)}"
    ]
    if flip.baseline_answer is not None:
        out.append("  " + md_text(f"baseline's answer: {flip.baseline_answer}"))
    if flip.options:
        out.append("  " + md_text("options: " + " / ".join(map(str, flip.options))))
    named = [(label, text) for label, text in (("correct", flip.correct_option), ("stereotyped", flip.stereotyped_option)) if text is not None]
    if named:
        out.append("  " + md_text("; ".join(f"{label}: {text}" for label, text in named)))
    prompt_text = flip.rest.get("prompt_text")
    if prompt_text:
        out += ["", *("  " + line for line in md_fence(prompt_text))]
    return out
