"""The terminal summary (rich): the results of a run and its comparisons with the baselines, as
text for a writer (pytest's terminal reporter, ``biascheck diff``'s stdout). Built from the
records alone (:class:`~biascheck.records.run.RunRecord`,
:class:`~biascheck.records.comparison.Comparison`), like the other renderings; numbers formatted by :mod:`biascheck.core.format`.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from biascheck.benchmarks.base import layout_of
from biascheck.core import format as fmt
from biascheck.records.comparison import Check, Comparison
from biascheck.records.run import RunRecord, ThresholdVerdict
from biascheck.reporting.comparison import (
    examples_by_category,
    examples_note,
    flip_table,
    headline,
    regressed_categories,
    rows,
    unresolved_heading,
    unresolved_lines,
)
from biascheck.reporting.decision import FLIPS_FILES, Decision
from biascheck.reporting.results import (
    NOT_GATED,
    SUMMARY_HEADERS,
    category_metrics,
    data_quality_lines,
    deselected_line,
    judge_lines,
    missing_data_line,
    mode_text,
    report_examples,
    run_line,
    scope_label,
    summary_rows,
    unpinned_line,
    verdicts_by_scope,
)

if TYPE_CHECKING:
    from rich.console import JustifyMethod

STYLE = {"regressed": "bold red", "improved": "green", "within margin": "", "inconclusive": "yellow", "not compared": "dim"}


def _console(buffer: io.StringIO, *, color: bool, width: int):
    from rich.console import Console

    return Console(
        file=buffer,
        force_terminal=color,
        no_color=not color,
        color_system="standard" if color else None,
        width=max(width, 60),
        highlight=False,
        emoji=False,
    )


def print_table(console, table) -> None:
    """Print a rich table in the console's width where it fits without cutting a word, else wider.
    Left to itself rich shrinks any column to fit, cutting "0.0000" to "0.00…" and a category to
    "disability_stat…"; a line wider than the log is still read whole. So only a cell of several
    words (an interval, a threshold) wraps, between its words, in a column that may wrap: no column
    gets narrower than its longest word."""
    from rich.measure import Measurement

    if _width_at_most(table) <= console.width:  # the common case, known without rich's measuring (a third of printing)
        console.print(table)
        return
    unbounded = console.options.update_width(UNBOUNDED)
    excess = Measurement.get(console, unbounded, table).maximum - console.width
    if excess > 0:
        room = []
        for column in table.columns:
            sizes = [Measurement.get(console, unbounded, cell) for cell in (column.header, *column.cells)]
            widest, longest_word = max(size.maximum for size in sizes), max(size.minimum for size in sizes)
            room.append((0 if column.no_wrap else widest - longest_word, widest, column))
        # The columns with the most room to wrap give it first.
        for slack, widest, column in sorted(room, key=lambda r: -r[0]):
            cut = min(excess, slack)
            if cut > 0:
                column.width, excess = widest - cut, excess - cut
    width = console.width
    console.width = width + max(excess, 0)
    try:
        console.print(table)
    finally:
        console.width = width


UNBOUNDED = 100_000  # a width no terminal has


def _width_at_most(table) -> int:
    """A bound on the width the table takes unwrapped: its cells' text (markup tags removed, escapes
    kept), each column's minimum width, padding and borders. Cells that are not plain markup
    strings, or hold a tab, and columns of a set width, are not bounded (``UNBOUNDED``)."""
    from rich.cells import cell_len
    from rich.markup import RE_TAGS

    def text_width(cell: object) -> int:
        if not isinstance(cell, str) or "\t" in cell:
            return UNBOUNDED
        # A tag is markup unless an odd number of backslashes escapes it (then it shows, as written).
        plain = RE_TAGS.sub(lambda m: m.group(0) if len(m.group(2)) % 2 else m.group(2), cell)
        return max(map(cell_len, plain.split("\n")))

    _, right, _, left = table.padding
    columns = table.columns
    widths = [
        max(column.min_width or 0, *map(text_width, (column.header, *column.cells))) if column.width is None else UNBOUNDED for column in columns
    ]
    return sum(widths) + len(columns) * (left + right) + len(columns) + 1


def _mark(verdict: ThresholdVerdict | None) -> str:
    """A threshold check's verdict cell, as rich markup."""
    if verdict is None:
        return ""
    if verdict.inconclusive:
        return "[yellow]pass (inconclusive)[/]"
    if verdict.passed:
        return "[green]pass[/]"
    return "[bold red]FAIL[/]" if verdict.gated else f"[dim]{NOT_GATED}[/]"


def render_terminal(runs: Sequence[RunRecord], *, color: bool, width: int = 100) -> str:
    from rich.markup import escape as esc
    from rich.table import Table

    # Every piece of user or model text (suite and category names, model strings, reasons, questions)
    # goes through esc(): rich would read "[/]" in it as markup and fail, and eat "[red]".

    buffer = io.StringIO()
    console = _console(buffer, color=color, width=width)
    if len(runs) > 1:
        table = Table(title="every suite", title_justify="left")
        for header in SUMMARY_HEADERS:
            table.add_column(header, justify="right" if header in ("cases", "checks passed") else "left")
        for row in summary_rows(runs):
            style = {"passed": "green", "FAILED": "bold red", "INCOMPLETE": "bold red"}[row[-1]]
            table.add_row(*map(esc, row[:-1]), f"[{style}]{row[-1]}[/]")
        print_table(console, table)
    for run in runs:
        metrics = run.metrics
        verdicts = verdicts_by_scope(run)
        console.print(esc(run_line(run)), style="bold" if run.passed else "bold red")
        for line in judge_lines(run):
            console.print(f"  {esc(line)}", style="bold yellow" if line.startswith("WARNING") else None)
        unpinned = unpinned_line(run)
        if unpinned:
            console.print(f"  {esc(unpinned)}", style="yellow")
        deselected = deselected_line(run)
        if deselected:
            console.print(f"  {esc(deselected)}", style="yellow")
        missing = missing_data_line(run)
        if missing:
            console.print(f"  {esc(missing)}", style="bold red" if run.missing_data_failed else "yellow")
            for category, reason in run.suite.skipped_categories.items():
                console.print(f"    {esc(category)}: {esc(reason)}", style="yellow")
        for i, line in enumerate(data_quality_lines(run)):
            console.print(f"  {'  ' * bool(i)}{esc(line)}", style="dim")
        name = esc(run.suite.name)
        table = Table(title=f"{name}: {scope_label(run, 'overall')}", title_justify="left")
        columns: tuple[tuple[str, JustifyMethod], ...] = (
            ("metric", "left"),
            ("value", "right"),
            ("95% CI", "left"),
            ("n", "right"),
            ("threshold", "left"),
            ("verdict", "left"),
        )
        for header, justify in columns:
            table.add_column(header, justify=justify)
        for metric, value in metrics.table("overall").items():
            verdict = verdicts.get(("overall", metric))
            mark = _mark(verdict)
            table.add_row(
                esc(metric),
                fmt.value(value.value),
                fmt.ci(value.ci),
                fmt.count(value.n),
                fmt.threshold(verdict.threshold) + mode_text(verdict) if verdict else "",
                mark,
            )
        print_table(console, table)
        categories = metrics.scopes("category")
        if categories:
            # Long format (a row per category and gated metric) fits a narrow terminal.
            shown = category_metrics(run)
            table = Table(title=f"{name}: by category", title_justify="left")
            category_columns: tuple[tuple[str, JustifyMethod], ...] = (
                ("category", "left"),
                ("metric", "left"),
                ("value", "right"),
                ("95% CI", "left"),
                ("n", "right"),
                ("verdict", "left"),
            )
            for header, justify in category_columns:
                table.add_column(header, justify=justify)
            for category in categories:
                values = metrics.table("category", category)
                for i, metric in enumerate(shown):
                    verdict = verdicts.get((category, metric))
                    mark = _mark(verdict)
                    table.add_row(
                        esc(category) if i == 0 else "",
                        esc(metric),
                        fmt.value(values[metric].value),
                        fmt.ci(values[metric].ci),
                        fmt.count(values[metric].n),
                        mark,
                        end_section=i == len(shown) - 1,
                    )
            print_table(console, table)
        layout = layout_of(run.suite.benchmark)
        examples = report_examples(run)
        if examples:
            # rich measures East Asian wide characters, so Korean questions stay aligned.
            table = Table(title=f"{name}: {layout.examples_title}", title_justify="left")
            for header in layout.examples_columns:
                table.add_column(header)
            for example in examples:
                table.add_row(*map(esc, example))
            print_table(console, table)
        spreads = metrics.rest.get("prompt_summary")
        if spreads:
            across, prompts = layout.spread_over, metrics.scopes("prompt")
            table = Table(title=f"{name}: across {across}", title_justify="left")
            table.add_column("metric")
            for prompt in prompts:
                table.add_column(esc(prompt if across == "runs" else f"p{prompt}"), justify="right")
            table.add_column("mean ± std", justify="right")
            for metric in layout.headline:
                spread = spreads.get(metric)
                if spread is None:
                    continue
                table.add_row(
                    metric,
                    *(fmt.value(metrics.table("prompt", p)[metric].value) for p in prompts),
                    f"{fmt.value(spread['mean'])} ± {fmt.value(spread['std'])}",
                )
            print_table(console, table)
    return buffer.getvalue()


def render_comparison_terminal(comparisons: Sequence[Comparison], *, color: bool, width: int = 100) -> str:
    from rich.markup import escape as esc
    from rich.table import Table

    buffer = io.StringIO()
    console = _console(buffer, color=color, width=width)
    # User and model text (suite, model, category names, warnings) goes through esc(): rich reads "[/]" as markup.
    for comparison in comparisons:
        console.print(esc(headline(comparison)), style="bold red" if comparison.regressed else "bold")
        for warning in comparison.warnings:
            console.print(f"  warning: {esc(warning)}", style="yellow")
        table = Table(title=f"{esc(comparison.suite['name'])}: regression checks", title_justify="left")
        columns: tuple[tuple[str, JustifyMethod], ...] = (
            ("metric", "left"),
            ("scope", "left"),
            ("baseline", "right"),
            ("candidate", "right"),
            ("worsening [bounds]", "left"),
            ("p (adjusted)", "right"),
            ("mde", "right"),
            ("verdict", "left"),
        )
        for header, justify in columns:
            # Names never wrap or get cut; the interval column wraps first on a narrow terminal.
            table.add_column(esc(header), justify=justify, no_wrap=header in ("metric", "verdict"))
        quiet = 0
        for check, row in zip(comparison.checks, rows(comparison)):
            # Every overall check is shown; a category only when it says something.
            if check.scope != "overall" and check.verdict == "within margin":
                quiet += 1
                continue
            verdict = row.pop()
            row.pop(-1)  # the rule is in the explanation; keep the table narrow
            style = STYLE[check.verdict] if check.gated else "dim"
            table.add_row(*map(esc, row), f"[{style}]{esc(verdict)}[/]" if style else esc(verdict))
        print_table(console, table)
        if quiet:
            console.print(f"  {quiet} category checks within margin (all are in comparison.md)", style="dim")
        _print_flips(console, comparison)
        for check in comparison.checks:
            if check.gated and (check.regressed or (check.inconclusive and check.scope == "overall")):
                console.print(f"  {esc(check.explanation + _evidence(comparison, check))}", style=STYLE[check.verdict])
        heading = unresolved_heading(comparison)
        if heading:
            style = {"warn": "bold yellow", "fail": "bold red"}.get(comparison.on_inconclusive, "yellow")
            console.print(f"  {esc(heading)}", style=style)
            for line in unresolved_lines(comparison):
                console.print(f"    {esc(line)}", style="yellow")
            console.print("    (suite sizes are estimates, as 1/sqrt(cases) with the same spread per case; details in comparison.md)", style="dim")
    return buffer.getvalue()


# Examples the terminal names per category: the rest are in comparison.md and the flips file.
TERMINAL_EXAMPLES = 3


def _print_flips(console: Any, comparison: Comparison) -> None:
    """The changed cases per category and direction (a compact table), then a few examples of each
    category, as comparison.md lists them."""
    from rich.markup import escape as esc
    from rich.table import Table

    flips = comparison.flips
    if not flips.total:
        return
    transitions, counts = flip_table(flips)
    evidence = regressed_categories(comparison)
    table = Table(title=f"{esc(comparison.suite['name'])}: changed cases by category", title_justify="left")
    table.add_column("category", no_wrap=True)
    table.add_column("changed", justify="right")
    for transition in transitions:
        table.add_column(esc(transition), justify="right")
    for category, total, row in counts:
        name = esc(category) + (" [bold red](regressed)[/]" if category in evidence else "")
        table.add_row(name, fmt.count(total), *map(fmt.count, row))
    table.add_row("all", fmt.count(flips.total), *map(fmt.count, flips.by_transition.values()), style="bold")
    print_table(console, table)
    for category, shown in examples_by_category(flips).items():
        named = "; ".join(f"{f.case_id} {f.baseline} -> {f.candidate}" for f in shown[:TERMINAL_EXAMPLES])
        more = f" (+{len(shown) - TERMINAL_EXAMPLES} more shown in comparison.md)" if len(shown) > TERMINAL_EXAMPLES else ""
        console.print(f"  {esc(category)}: {esc(named)}{more}", style="dim")
    console.print(f"  {esc(examples_note(flips))}", style="dim")


def _evidence(comparison: Comparison, check: Check) -> str:
    """Where a regressed check's flips are: its category's counts by direction."""
    if not check.regressed:
        return ""
    flips = comparison.flips
    counts: Mapping[str, int] = flips.by_transition if check.scope == "overall" else flips.by_category.get(check.scope, {})
    if not counts:
        return "; no case of it changed outcome"
    where = "" if check.scope == "overall" else f" in {check.scope}"
    return f"; changed cases{where}: " + ", ".join(f"{t} {fmt.count(n)}" for t, n in counts.items())


def render_decision_terminal(decisions: Sequence[Decision], *, color: bool, width: int = 100) -> str:
    """The terminal's last block: each suite's decision and its reasons, every failing check on a
    line of its own (regressions first, with the flips that are their evidence), then the
    inconclusive checks one line each; after the tables, so that it is what a reader sees last."""
    from rich.markup import escape as esc

    buffer = io.StringIO()
    console = _console(buffer, color=color, width=width)
    for decision in decisions:
        console.print(f"biascheck decision: {esc(decision.suite)}: {esc(decision.headline())}", style="bold green" if decision.passed else "bold red")
        for check in decision.failed:
            console.print(f"  FAIL {esc(check.text())}", style="red")
            if check.flips is not None:
                console.print(
                    f"    flips ({esc(check.flips.scope)}): {esc(check.flips.text())}; every flip: {FLIPS_FILES}", style="dim", soft_wrap=True
                )
        if decision.inconclusive:
            mode = f" (on_inconclusive = {decision.on_inconclusive}: they pass)" if decision.on_inconclusive else ""
            console.print(f"  inconclusive ({len(decision.inconclusive)}){esc(mode)}:", style="yellow")
            for unresolved in decision.inconclusive:
                console.print(f"    {esc(unresolved.metric)} ({esc(unresolved.scope)}): {esc(unresolved.text)}", style="yellow")
    return buffer.getvalue()
