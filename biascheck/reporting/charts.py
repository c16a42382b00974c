"""The SVG charts of the HTML pages: horizontal bars with their intervals (a row per category),
points with their intervals (a row per run or release) and the judge correction's arrows. Each
returns an ``<svg>`` element; its classes are styled by report.css. Every piece of text goes
through :func:`biascheck.reporting.markup.esc`."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from biascheck.core import format as fmt
from biascheck.reporting.markup import esc, fmt_int, lang, shorten, text_width, verdict_class

if TYPE_CHECKING:
    from biascheck.records.run import MetricValue

STEPS = (0.01, 0.02, 0.025, 0.05, 0.1, 0.2, 0.25, 0.5, 1.0, 2.0, 5.0)


def threshold_positions(threshold: Any) -> list[float]:
    out: list[float] = []
    for kind, limit in fmt.threshold_items(threshold):
        limit = float(limit)
        out += [-limit, limit] if kind == "max_abs" else [limit]
    return out


def correction_svg(rows: Sequence[tuple[str, MetricValue, MetricValue]]) -> str:
    """A row per metric on one number line: the raw interval and value above, the corrected ones
    below, and an arrow from the raw value to the corrected one."""
    positions: list[float | None] = []
    for _, raw, fixed in rows:
        for value in (raw, fixed):
            positions += [fmt.number(value.value), *fmt.bounds(value.ci)]
    lo, hi, step = domain(positions)
    size = 12.0
    label_w = min(max([text_width(name, size) for name, _, _ in rows] + [60.0]) + 12, 300.0)
    width, value_w = 920.0 + max(label_w - 240.0, 0.0), 330.0
    x0 = label_w + 10
    plot_w = width - x0 - value_w - 14
    slot_h, top, axis_h, offset, bar_h = 38.0, 6.0, 26.0, 8.0, 6.0
    bottom = top + slot_h * len(rows)

    def x(v: float) -> float:
        return x0 + (v - lo) / (hi - lo) * plot_w

    svg = [
        f'<svg class="bars correction" viewBox="0 0 {num(width)} {num(bottom + axis_h)}" style="max-width:{num(width)}px" '
        'role="img" aria-label="raw and judge-corrected metrics" xmlns="http://www.w3.org/2000/svg">'
    ]
    for i in range(int(round((hi - lo) / step)) + 1):
        t = lo + i * step
        cls = "zero" if abs(t) < 1e-9 else "grid"
        svg.append(f'<line class="{cls}" x1="{num(x(t))}" y1="{num(top)}" x2="{num(x(t))}" y2="{num(bottom)}"/>')
        svg.append(f'<text class="tick" x="{num(x(t))}" y="{num(bottom + 16)}" text-anchor="middle">{tick_label(t)}</text>')
    for k, (name, raw, fixed) in enumerate(rows):
        yc = top + k * slot_h + slot_h / 2
        tip = (
            f"{name}: raw {fmt.exact(raw.value)} [{', '.join(map(fmt.exact, fmt.bounds(raw.ci)))}] \u2192 "
            f"corrected {fmt.exact(fixed.value)} [{', '.join(map(fmt.exact, fmt.bounds(fixed.ci)))}]"
        )
        g = [f'<g class="mark" data-metric="{esc(name)}"><title>{esc(tip)}</title>']
        g.append(f'<text class="cat" x="0" y="{num(yc + 4)}"><tspan>{esc(shorten(name, size, label_w - 12))}</tspan></text>')
        points = {}
        for kind, value, y in (("raw", raw, yc - offset), ("corrected", fixed, yc + offset)):
            v = fmt.number(value.value)
            c_lo, c_hi = fmt.bounds(value.ci)
            if c_lo is not None and c_hi is not None:
                g.append(
                    f'<rect class="ival {kind}" x="{num(x(c_lo))}" y="{num(y - bar_h / 2)}" width="{num(x(c_hi) - x(c_lo))}" height="{num(bar_h)}"/>'
                )
            if v is not None:
                points[kind] = (x(v), y)
        if len(points) == 2:
            (x1, y1), (x2, y2) = points["raw"], points["corrected"]
            length = math.hypot(x2 - x1, y2 - y1)
            ux, uy = (x2 - x1) / length, (y2 - y1) / length
            tip_x, tip_y = x2 - 4.0 * ux, y2 - 4.0 * uy  # the head stops at the corrected dot's edge
            base_x, base_y = tip_x - 7.0 * ux, tip_y - 7.0 * uy
            g.append(f'<line class="arrow" x1="{num(x1)}" y1="{num(y1)}" x2="{num(base_x)}" y2="{num(base_y)}"/>')
            g.append(
                f'<path class="arrowhead" d="M{num(tip_x)} {num(tip_y)}L{num(base_x - 3.5 * uy)} {num(base_y + 3.5 * ux)}'
                f'L{num(base_x + 3.5 * uy)} {num(base_y - 3.5 * ux)}Z"/>'
            )
        for kind, (px, py) in points.items():
            g.append(f'<circle class="pt {kind}" cx="{num(px)}" cy="{num(py)}" r="3.5"/>')
        for kind, value, y in (("raw", raw, yc - offset), ("corrected", fixed, yc + offset)):
            text = f"{kind} {fmt.value(value.value)} {fmt.ci(value.ci)}"
            g.append(f'<text class="val" x="{num(x0 + plot_w + 12)}" y="{num(y + 4)}">{esc(text)}</text>')
        g.append("</g>")
        svg.append("".join(g))
    svg.append("</svg>")
    return "\n".join(svg)


def domain(points: Iterable[float | None]) -> tuple[float, float, float]:
    """(low, high, tick step): a round interval holding every point (None: none) and 0."""
    known = [p for p in points if p is not None] + [0.0]
    lo, hi = min(known), max(known)
    if hi - lo < 1e-12:
        return (0.0, 1.0, 0.2) if lo == 0 else (min(lo, 0.0) - 0.05, max(hi, 0.0) + 0.05, 0.05)
    step = next((s for s in STEPS if (hi - lo) / s <= 10), STEPS[-1])
    return math.floor(lo / step + 1e-9) * step, math.ceil(hi / step - 1e-9) * step, step


def tick_label(value: float) -> str:
    value = round(value, 6)
    return "0" if value == 0 else f"{value:g}".replace("-", "\u2212")


def num(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".")


class Measured(Protocol):
    """What a chart plots: a value with its interval and size (a run's metric, a comparison's side)."""

    @property
    def value(self) -> float | None: ...
    @property
    def ci(self) -> tuple[float | None, float | None]: ...
    @property
    def n(self) -> int | None: ...


def _read(measured: Measured | None) -> tuple[float | None, float | None, float | None, int | None, str | None]:
    """(value, interval low, interval high, n, note) of what a row plots; all None where there is none."""
    if measured is None:
        return None, None, None, None, None
    lo, hi = fmt.bounds(measured.ci)
    return fmt.number(measured.value), lo, hi, measured.n, getattr(measured, "note", None)


class Side(NamedTuple):
    """One bar of a chart row: its kind (``value``: the only bar, unlabelled; ``baseline`` and
    ``candidate``; ``suite``: one of the suites across), what it plots (None: nothing),
    whether it fails its gate (None: not gated here), its label beside the bar and what the
    tooltip adds."""

    kind: str
    value: Measured | None
    failing: bool | None
    label: str = ""
    extra: str = ""


def bar_svg(rows: list[tuple[str, Any, Any, list[Side]]], metric: str, *, side_w: float, mark_failing: bool) -> str:
    """Horizontal bars with their 95% intervals: a row per category (label, threshold, a verdict
    written under the label or None, its bars), a bar per side."""
    points: list[float | None] = []
    for _, threshold, _, sides in rows:
        points += threshold_positions(threshold)
        for side in sides:
            points += _read(side.value)[:3]
    lo, hi, step = domain(points)

    size = 12.0
    label_w = min(max([text_width(row[0], size) for row in rows] + [60.0]) + 12, 230.0)
    paired = max(len(row[3]) for row in rows) > 1
    value_w = 236.0
    width = 920.0 + max(side_w - 68.0, 0.0)
    x0 = label_w + side_w + 10
    plot_w = width - x0 - value_w - 14
    bar_h = 12.0 if paired else 14.0
    slot_h = 17.0 if paired else 24.0
    row_gap = 10.0 if paired else 0.0
    top, axis_h = 6.0, 26.0
    tops = []  # each row's top: rows may hold different numbers of bars
    y = top
    for row in rows:
        tops.append(y)
        y += slot_h * len(row[3]) + row_gap
    height = y + axis_h

    def x(v: float) -> float:
        return x0 + (v - lo) / (hi - lo) * plot_w

    plot_top, plot_bottom = top, y
    svg = [
        f'<svg class="bars" viewBox="0 0 {num(width)} {num(height)}" style="max-width:{num(width)}px" '
        f'role="img" aria-label="{esc(metric)} by category" xmlns="http://www.w3.org/2000/svg">'
    ]
    ticks = [lo + i * step for i in range(int(round((hi - lo) / step)) + 1)]
    for t in ticks:
        xt = x(t)
        cls = "zero" if abs(t) < 1e-9 else "grid"
        svg.append(f'<line class="{cls}" x1="{num(xt)}" y1="{num(plot_top)}" x2="{num(xt)}" y2="{num(plot_bottom)}"/>')
        svg.append(f'<text class="tick" x="{num(xt)}" y="{num(plot_bottom + 16)}" text-anchor="middle">{tick_label(t)}</text>')

    for y_top, (category, threshold, row_verdict, sides) in zip(tops, rows):
        y_row = y_top + row_gap / 2
        label = shorten(category, size, label_w - 12)
        y_label = y_row + slot_h / 2 + 4
        svg.append(f'<text class="cat" x="0" y="{num(y_label)}"{lang(category)}><title>{esc(category)}</title>{esc(label)}</text>')
        if row_verdict is not None:
            svg.append(
                f'<text class="verdict {verdict_class(row_verdict)}" x="0" y="{num(y_label + slot_h)}" font-size="11">{esc(row_verdict)}</text>'
            )
        threshold_text = fmt.threshold(threshold)
        for j, side in enumerate(sides):
            yc = y_row + j * slot_h + slot_h / 2
            failing = side.failing
            v, c_lo, c_hi, n, note = _read(side.value)
            tip = f"{category} \u2014 {side.label or side.kind}: {metric} = {fmt.exact(v)}, 95% CI [{fmt.exact(c_lo)}, {fmt.exact(c_hi)}], n = {fmt_int(n) if n is not None else 'n/a'}"
            if threshold_text and side.kind != "baseline":
                tip += f"; threshold {threshold_text}" + ("" if failing is None else (": FAIL" if failing else ": pass"))
            if note:
                tip += f"; {note}"
            tip += side.extra
            g = [f'<g class="mark {esc(side.kind)}"><title>{esc(tip)}</title>']
            if side.label:
                shown = shorten(side.label, 11.0, side_w - 6)
                g.append(f'<text class="side" x="{num(label_w)}" y="{num(yc + 4)}" font-size="11"{lang(side.label)}>{esc(shown)}</text>')
            if v is not None:
                a, b = sorted((x(0.0), x(v)))
                cls = "bar" + (" base" if side.kind == "baseline" else "") + (" failing" if failing and mark_failing else "")
                g.append(f'<rect class="{cls}" x="{num(a)}" y="{num(yc - bar_h / 2)}" width="{num(max(b - a, 1.0))}" height="{num(bar_h)}"/>')
            if v is None:  # no bar: say so in the plot too, so an empty row is not read as 0
                g.append(f'<text class="na" x="{num(x(0.0) + 4)}" y="{num(yc + 4)}" font-size="11">n/a</text>')
            if v is not None and c_lo is not None and c_hi is not None:
                xl, xh, cap = x(c_lo), x(c_hi), bar_h / 2 - 1
                g.append(
                    f'<path class="ci" d="M{num(xl)} {num(yc - cap)}V{num(yc + cap)}M{num(xl)} {num(yc)}H{num(xh)}'
                    f'M{num(xh)} {num(yc - cap)}V{num(yc + cap)}"/>'
                )
            text = "n/a" if v is None else f"{fmt.value(v)} {fmt.ci([c_lo, c_hi])}"
            mark = ' <tspan class="fail">FAIL</tspan>' if failing else ""
            g.append(f'<text class="val" x="{num(x0 + plot_w + 12)}" y="{num(yc + 4)}">{esc(text)}{mark}</text>')
            g.append("</g>")
            svg.append("".join(g))

    # Threshold: one line through the whole plot when every row shares it, else one per row.
    shared = [t for _, t, _, _ in rows]
    if all(t == shared[0] for t in shared) and threshold_positions(shared[0]):
        segments = [(p, plot_top, plot_bottom, shared[0]) for p in threshold_positions(shared[0])]
    else:
        segments = []
        for y_top, (_, threshold, _, sides) in zip(tops, rows):
            row_h = slot_h * len(sides) + row_gap
            segments += [(p, y_top + 1, y_top + row_h - 1, threshold) for p in threshold_positions(threshold)]
    for p, y1, y2, threshold in segments:
        svg.append(
            f'<line class="threshold" x1="{num(x(p))}" y1="{num(y1)}" x2="{num(x(p))}" y2="{num(y2)}">'
            f"<title>threshold {esc(fmt.threshold(threshold))}</title></line>"
        )
    svg.append("</svg>")
    return "\n".join(svg)


class Point(NamedTuple):
    """One row of a point chart: a run or a release, what it plots (None: nothing), its threshold,
    whether it fails it (None: not judged here) and a muted note beside the label."""

    label: str
    value: Measured | None
    threshold: Any
    failing: bool | None
    note: str = ""


def point_svg(points: list[Point], metric: str, *, level: str, connect: bool = False) -> str:
    """A row per point: the value as a dot with its interval, and the threshold, one dashed line
    through the plot when every row has the same one, else a segment per row. ``connect`` draws a
    thin line through the dots in row order (releases, oldest first)."""
    positions: list[float | None] = []
    for point in points:
        positions += threshold_positions(point.threshold)
        positions += _read(point.value)[:3]
    lo, hi, step = domain(positions)
    size, small = 12.0, 11.0
    label_w = min(max([text_width(p.label, size) for p in points] + [60.0]) + 12, 300.0)
    note_w = min(max(text_width(p.note, small) for p in points) + 10, 200.0) if any(p.note for p in points) else 0.0
    width, value_w = 920.0 + max(label_w + note_w - 240.0, 0.0), 236.0
    x0 = label_w + note_w + 10
    plot_w = width - x0 - value_w - 14
    slot_h, top, axis_h = 24.0, 6.0, 26.0
    bottom = top + slot_h * len(points)

    def x(v: float) -> float:
        return x0 + (v - lo) / (hi - lo) * plot_w

    svg = [
        f'<svg class="bars" viewBox="0 0 {num(width)} {num(bottom + axis_h)}" style="max-width:{num(width)}px" '
        f'role="img" aria-label="{esc(metric)}, one row per run" xmlns="http://www.w3.org/2000/svg">'
    ]
    for i in range(int(round((hi - lo) / step)) + 1):
        t = lo + i * step
        cls = "zero" if abs(t) < 1e-9 else "grid"
        svg.append(f'<line class="{cls}" x1="{num(x(t))}" y1="{num(top)}" x2="{num(x(t))}" y2="{num(bottom)}"/>')
        svg.append(f'<text class="tick" x="{num(x(t))}" y="{num(bottom + 16)}" text-anchor="middle">{tick_label(t)}</text>')
    shared = points[0].threshold
    if all(p.threshold == shared for p in points):
        segments = [(position, top, bottom, shared) for position in threshold_positions(shared)]
    else:
        segments = [
            (pos, top + k * slot_h + 1, top + (k + 1) * slot_h - 1, p.threshold)
            for k, p in enumerate(points)
            for pos in threshold_positions(p.threshold)
        ]
    for position, y1, y2, threshold in segments:
        svg.append(
            f'<line class="threshold" x1="{num(x(position))}" y1="{num(y1)}" x2="{num(x(position))}" y2="{num(y2)}">'
            f"<title>threshold {esc(fmt.threshold(threshold))}</title></line>"
        )
    if connect:
        trend = [(x(v), top + k * slot_h + slot_h / 2) for k, p in enumerate(points) if (v := _read(p.value)[0]) is not None]
        if len(trend) > 1:
            svg.append('<polyline class="trend" points="' + " ".join(f"{num(a)},{num(b)}" for a, b in trend) + '"/>')
    for k, point in enumerate(points):
        yc = top + k * slot_h + slot_h / 2
        v, c_lo, c_hi, n, note = _read(point.value)
        tip = f"{point.label}: {metric} = {fmt.exact(v)}, {level} CI [{fmt.exact(c_lo)}, {fmt.exact(c_hi)}], n = {fmt_int(n) if n is not None else 'n/a'}"
        if fmt.threshold(point.threshold):
            tip += f"; threshold {fmt.threshold(point.threshold)}" + ("" if point.failing is None else ": FAIL" if point.failing else ": pass")
        if note:
            tip += f"; {note}"
        g = [f'<g class="mark"><title>{esc(tip)}</title>']
        shown = shorten(point.label, size, label_w - 12)
        g.append(f'<text class="cat" x="0" y="{num(yc + 4)}"{lang(point.label)}>{esc(shown)}</text>')
        if point.note:
            g.append(f'<text class="side" x="{num(label_w)}" y="{num(yc + 4)}" font-size="11">{esc(shorten(point.note, small, note_w - 6))}</text>')
        if v is None:  # no dot: say so in the plot, so an empty row is not read as 0
            g.append(f'<text class="na" x="{num(x(0.0) + 4)}" y="{num(yc + 4)}" font-size="11">n/a</text>')
        else:
            if c_lo is not None and c_hi is not None:
                xl, xh, cap = x(c_lo), x(c_hi), 5.0
                g.append(
                    f'<path class="ci" d="M{num(xl)} {num(yc - cap)}V{num(yc + cap)}M{num(xl)} {num(yc)}H{num(xh)}M{num(xh)} {num(yc - cap)}V{num(yc + cap)}"/>'
                )
            g.append(f'<circle class="pt{" failing" if point.failing else ""}" cx="{num(x(v))}" cy="{num(yc)}" r="4.5"/>')
        text = "n/a" if v is None else f"{fmt.value(v)} {fmt.ci([c_lo, c_hi])}"
        mark = ' <tspan class="fail">FAIL</tspan>' if point.failing else ""
        g.append(f'<text class="val" x="{num(x0 + plot_w + 12)}" y="{num(yc + 4)}">{esc(text)}{mark}</text></g>')
        svg.append("".join(g))
    svg.append("</svg>")
    return "\n".join(svg)
