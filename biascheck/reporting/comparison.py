"""Renderings of a comparison with a baseline (``comparison.json``): Markdown (for pull requests and
``$GITHUB_STEP_SUMMARY``), the terminal (rich) and GitHub Actions annotations. Like the results
renderings, they are built from the JSON document alone, so ``biascheck diff`` and the pytest
plugin (also under xdist) show the same thing.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any

from biascheck.reporting.results import fmt, md_row, print_table

MARK = {
    "regressed": "**REGRESSED**",
    "improved": "improved",
    "unchanged": "unchanged",
    "inconclusive": "_inconclusive_",
    "not compared": "not compared",
}
STYLE = {"regressed": "bold red", "improved": "green", "unchanged": "", "inconclusive": "yellow", "not compared": "dim"}


def signed(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.4f}"


def signed_ci(ci: Sequence[float | None]) -> str:
    lo, hi = ci
    return "n/a" if lo is None or hi is None else f"[{lo:+.4f}, {hi:+.4f}]"


def p_text(p: float | None) -> str:
    if p is None:
        return "n/a"
    return f"{p:.2g}" if p < 0.001 else f"{p:.3f}"


def headline(comparison: Mapping[str, Any]) -> str:
    counts: dict[str, int] = {}
    for result in comparison["results"]:
        counts[result["verdict"]] = counts.get(result["verdict"], 0) + 1
    verdicts = ", ".join(f"{counts[v]} {v}" for v in ("regressed", "inconclusive", "improved", "unchanged", "not compared") if v in counts)
    base, cand = comparison["baseline"], comparison["candidate"]
    return (
        f"{comparison['suite']['name']}: {cand['model']} vs baseline {base['model']} ({base['path']}): {verdicts}; "
        f"{comparison['flips']['total']} of {comparison['cases']['common']} cases changed outcome"
    )


def _rows(comparison: Mapping[str, Any]) -> list[list[str]]:
    rows = []
    for r in comparison["results"]:
        rows.append(
            [
                r["metric"],
                r["scope"],
                fmt(r["baseline"]["value"]),
                fmt(r["candidate"]["value"]),
                f"{signed(r['difference'])} {signed_ci(r['difference_ci'])}",
                p_text(r["p_adjusted"]),
                fmt(r["mde"]),
                r["rule"],
                r["verdict"],
            ]
        )
    return rows


def render_comparison_markdown(comparison: Mapping[str, Any]) -> str:
    status = "REGRESSED" if comparison["regressed"] else ("passed" if comparison["passed"] else "FAILED (inconclusive checks)")
    settings = comparison["settings"]
    out = [
        f"# biascheck diff: {comparison['suite']['name']} — {status}",
        "",
        headline(comparison),
        "",
        f"Baseline made {comparison['baseline']['created_at']} with biascheck {comparison['baseline']['tool_version']}"
        + (f" at commit {comparison['baseline']['git_commit'][:12]}" if comparison["baseline"]["git_commit"] else "")
        + ". "
        f"Paired bootstrap over templates ({settings['n_boot']} resamples), McNemar for paired proportions, "
        f"Holm over the {settings['family_size']} checks at alpha {settings['alpha']}; mde = the smallest worsening detected "
        f"with {settings['power']:.0%} power.",
        "",
    ]
    if comparison["warnings"]:
        out += [f"- warning: {w}" for w in comparison["warnings"]] + [""]
    out += [
        "| metric | scope | baseline | candidate | difference [95% CI] | p (Holm) | mde | rule | verdict |",
        "|---|---|---:|---:|---|---:|---:|---|---|",
    ]
    for r, row in zip(comparison["results"], _rows(comparison)):
        row[-1] = MARK[r["verdict"]]
        out.append(md_row(row))
    notable = [r for r in comparison["results"] if r["verdict"] in ("regressed", "inconclusive")]
    if notable:
        out += ["", "## Why", ""] + [f"- {r['explanation']}" for r in notable]
    flips = comparison["flips"]
    out += ["", f"## Changed cases ({flips['total']})", ""]
    if flips["by_transition"]:
        out += ["| baseline -> candidate | cases |", "|---|---:|"]
        out += [md_row(item) for item in flips["by_transition"].items()]
    if flips["shown"] < flips["total"]:
        out += ["", f"Listing the first {flips['shown']} (toward the biased answer first)."]
    for category, cases in flips["by_category"].items():
        out += ["", f"<details><summary>{_md(category)}: {len(cases)} listed</summary>", ""]
        for case in cases:
            out.append(
                f"- `{case['case_id']}` ({case['context_type']}): {case['baseline']} -> **{case['candidate']}**; answer: {_md(case['answer'])}"
            )
            if case["prompt"]:
                out.append("")
                out.append("  ```text")
                out += ["  " + line for line in case["prompt"].replace("```", "'''").splitlines()]
                out.append("  ```")
        out += ["", "</details>"]
    return "\n".join(out) + "\n"


def _md(text: str | None) -> str:
    """Text in a list item or a ``<summary>`` (raw HTML, where a backslash escape would show): one
    line, no tag. Table cells go through :func:`biascheck.reporting.results.md_cell`."""
    if text is None:
        return "(none)"
    return " ".join(str(text).split()).replace("<", "&lt;")


def render_comparison_terminal(comparisons: Sequence[Mapping[str, Any]], *, color: bool, width: int = 100) -> str:
    from rich.console import Console
    from rich.markup import escape as esc
    from rich.table import Table

    buffer = io.StringIO()
    console = Console(
        file=buffer,
        force_terminal=color,
        no_color=not color,
        color_system="standard" if color else None,
        width=max(width, 60),
        highlight=False,
        emoji=False,
    )
    # User and model text (suite, model, category names, warnings) goes through esc(): rich reads "[/]" as markup.
    for comparison in comparisons:
        console.print(esc(headline(comparison)), style="bold red" if comparison["regressed"] else "bold")
        for warning in comparison["warnings"]:
            console.print(f"  warning: {esc(warning)}", style="yellow")
        table = Table(title=f"{esc(comparison['suite']['name'])}: regression checks", title_justify="left")
        for header, justify in (
            ("metric", "left"),
            ("scope", "left"),
            ("baseline", "right"),
            ("candidate", "right"),
            ("difference [95% CI]", "left"),
            ("p (Holm)", "right"),
            ("mde", "right"),
            ("verdict", "left"),
        ):
            # Names never wrap or get cut; the interval column wraps first on a narrow terminal.
            table.add_column(header, justify=justify, no_wrap=header in ("metric", "verdict"))
        quiet = 0
        for r, row in zip(comparison["results"], _rows(comparison)):
            # Every overall check is shown; a category only when it says something.
            if r["scope"] != "overall" and r["verdict"] == "unchanged":
                quiet += 1
                continue
            verdict = row.pop()
            row.pop(-1)  # the rule is in the explanation; keep the table narrow
            table.add_row(*map(esc, row), f"[{STYLE[verdict]}]{verdict}[/]" if STYLE[verdict] else verdict)
        print_table(console, table)
        if quiet:
            console.print(f"  {quiet} category checks unchanged (all are in comparison.md)", style="dim")
        flips = comparison["flips"]
        if flips["by_transition"]:
            console.print("  changed cases: " + esc(", ".join(f"{t}: {n}" for t, n in flips["by_transition"].items())))
        for r in comparison["results"]:
            if r["verdict"] == "regressed" or (r["verdict"] == "inconclusive" and r["scope"] == "overall"):
                console.print(f"  {esc(r['explanation'])}", style=STYLE[r["verdict"]])
        unresolved = sum(r["verdict"] == "inconclusive" and r["scope"] != "overall" for r in comparison["results"])
        if unresolved:
            console.print(
                f"  {unresolved} category checks inconclusive: too few cases to show or rule out a worsening beyond "
                "their margins (the mde column is the smallest worsening each detects; details in comparison.md)",
                style="yellow",
            )
    return buffer.getvalue()


def _escape_annotation(text: str) -> str:
    # GitHub workflow-command escaping for the message part.
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def annotation(title: str, message: str) -> str:
    # Property values also escape ':' and ','.
    title = _escape_annotation(title).replace(":", "%3A").replace(",", "%2C")
    return f"::error title={title}::{_escape_annotation(message)}"


def github_annotations(comparisons: Sequence[Mapping[str, Any]]) -> list[str]:
    """``::error`` lines for regressed metrics of ``biascheck diff`` (GitHub shows them on the run).
    Under pytest the failed items themselves are annotated, so a deselected check never is."""
    return [
        annotation(f"biascheck {comparison['suite']['name']}: {r['metric']} ({r['scope']}) regressed", r["explanation"])
        for comparison in comparisons
        for r in comparison["results"]
        if r["verdict"] == "regressed"
    ]
