"""The views report.html still calls with results and comparison documents, as they read them
before the views took records: kept whole, so that the page renders as it did, damaged documents
included, until it moves to records alongside; then this module goes. Every other caller gives
records (:mod:`.results`, :mod:`.comparison`), whose views send a document here
(:func:`biascheck.reporting.decision.accepts_documents`). It imports no other view.

:func:`gated`, :func:`failing`, :func:`missing_data_failed` and :func:`verdict_index` read a
threshold check of a document for what still edits or reads documents (``mark_deselected``, history
and compare), and are what ``biascheck.reporting.results`` exports under those names.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from biascheck.core import format as fmt
from biascheck.core.format import flips_anchor
from biascheck.evaluation.regression import on_inconclusive_of, resolve_check_text
from biascheck.suite import ALLOW_MISSING_DATA, MISSING_DATA_FIX, missing_data_summary

# As results.py says them (this module goes with report.html's documents; it imports no view).
CORRECTED = "_corrected"
CORRECTION_NOTE = "the correction assumes independent judge errors on a pair's two readings"
CORRECTION_CI_NOTE = "95% intervals; the corrected ones include the calibration's uncertainty"


def gated(verdict: Mapping[str, Any]) -> bool:
    """Whether a threshold check gated the run: False when -k or node ids left its metric item out."""
    return verdict.get("gated", True) is not False


def failing(verdict: Mapping[str, Any]) -> bool:
    """A check that failed the run: over its threshold, and its item selected."""
    return not verdict.get("passed") and gated(verdict)


def missing_data_failed(document: Mapping[str, Any]) -> bool:
    """Whether categories had no data and the run did not accept it (``RunRecord.missing_data_failed``)."""
    suite = document["suite"]
    return bool(suite.get("skipped_categories")) and suite.get("missing_data_allowed") is False


def verdict_index(document: Mapping[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(v["scope"], v["metric"]): v for v in document["verdicts"]}


def unresolved_checks(comparison: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The checks that could neither show nor rule out a worsening beyond their margin."""
    return [r for r in comparison["results"] if r["verdict"] == "inconclusive"]


def resolve_text(result: Mapping[str, Any]) -> str:
    """What would resolve an inconclusive check (``evaluation.regression.resolve_text`` of a document)."""
    return resolve_check_text(result.get("cases_to_resolve"), result.get("cases"), result.get("margin"))


def served_warning(document: dict[str, Any]) -> str | None:
    """Said when the provider named more than one served model or system fingerprint in one run:
    the model behind the name changed while it ran, and the run mixes two models' answers."""
    served = document["model"].get("served") or {}
    changed = [
        f"{len(served[k])} {label} ({', '.join(served[k])})"
        for k, label in (("models", "served models"), ("system_fingerprints", "system fingerprints"))
        if len(served.get(k, {})) > 1
    ]
    return f"the provider reported {' and '.join(changed)} within this run" if changed else None


def judge_lines(document: dict[str, Any], *, correction: bool = True) -> list[str]:
    """Who judged the generations, and the warnings of the judge's qualification; ``correction``:
    with the judge correction as text lines (the terminal; report.md and report.html show it as
    tables, :func:`correction_rows`)."""
    judge = document["model"].get("judge")
    if not judge:
        return []
    run = document["run"]
    params = ", ".join(f"{k}={v}" for k, v in judge["params"].items()) or "provider defaults"
    lines = [
        f"judged by {judge['model']} ({params}): {run.get('judge_calls', 0)} judge calls, "
        f"{run.get('judge_cache_hits', 0)} cache hits" + ("; re-judged stored generations" if run.get("rejudge") else "")
    ]
    convention = (document.get("scoring") or {}).get("unscorable")
    counts = document["metrics"].get("counts", {})
    if convention == "unknown":
        lines.append(
            f"unscorable = unknown (as the paper): {counts.get('n_u_by_convention', 0)} of {counts.get('n', 0)} pairs scored "
            "with an out-of-choice judge answer or an empty or filtered story read as u; pairs with an errored call left out"
        )
    elif convention == "exclude":
        lines.append(
            f"unscorable = exclude: {counts.get('n_unscorable', 0) - counts.get('n_error', 0)} of {counts.get('n', 0)} pairs "
            "with an out-of-choice judge answer or an empty or filtered story left out, never read as u"
        )
    lines += correction_lines(document) if correction else []
    qualification = document.get("judge_qualification")
    if qualification:
        lines.append(qualification["summary"])
        lines += [f"WARNING: {w}" for w in qualification["warnings"]]
    return lines


def calibration_of(document: dict[str, Any]) -> dict[str, Any] | None:
    """The judge calibration a run's scoring records (``<id>:b=..;c=..;u=..;date=..``): its id,
    date, counts per true class and row-normalised confusion matrix; None without one."""
    value = (document.get("scoring") or {}).get("calibration")
    if not value:
        return None
    ident, _, body = str(value).partition(":")
    fields = dict(part.split("=", 1) for part in body.split(";") if "=" in part)
    counts = {c: [int(x) for x in fields.get(c, "0,0,0").split(",")] for c in ("b", "c", "u")}
    matrix = {c: [x / max(sum(row), 1) for x in row] for c, row in counts.items()}
    return {"id": ident, "date": fields.get("date", "?"), "counts": counts, "matrix": matrix}


def correction_rows(document: dict[str, Any]) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(metric, raw value, corrected value) of the overall metrics a judge calibration corrected,
    in report order; empty without a calibration."""
    overall = document["metrics"]["overall"]
    return [(name, raw, fixed) for name, raw in overall.items() if (fixed := overall.get(name + CORRECTED)) is not None]


def correction_lines(document: dict[str, Any]) -> list[str]:
    """A judge-corrected run in text lines (the terminal): the calibration (size, date, M as
    rows), and raw -> corrected."""
    calibration = calibration_of(document)
    if calibration is None:
        return []
    rows = "; ".join(f"true {c}: " + " ".join(f"{j} {x:.3f}" for j, x in zip("bcu", row)) for c, row in calibration["matrix"].items())
    moved = [
        f"{name} {fmt.value(raw['value'])} {fmt.ci(raw['ci'])} → {fmt.value(fixed['value'])} {fmt.ci(fixed['ci'])}"
        for name, raw, fixed in correction_rows(document)
    ]
    return [
        f"{calibration_heading(calibration)}; confusion P(judge says column | true row): {rows}; {CORRECTION_NOTE}",
        f"corrected for the judge (raw → corrected, {CORRECTION_CI_NOTE}): " + "; ".join(moved),
    ]


def missing_data_line(document: dict[str, Any]) -> str | None:
    """What every report says about the categories the run went without; None when it had them all.
    Each category's reason follows it, in each report's own layout."""
    suite = document["suite"]
    missing = suite.get("skipped_categories") or {}
    if not missing:
        return None
    summary = missing_data_summary(missing, suite.get("categories_total"))
    if missing_data_failed(document):
        return f"MISSING DATA: {summary}, so this is no complete {suite['benchmark']} run: a failed check; {MISSING_DATA_FIX}"
    accepted = f"as {ALLOW_MISSING_DATA} accepted" if suite.get("missing_data_allowed") else "with no check (results of an older biascheck)"
    return f"{summary}: left out of this run, {accepted}"


def data_quality_lines(document: dict[str, Any]) -> list[str]:
    """What every report says about records of the benchmark's data that are inconsistent
    (``suite.data_quality``): a heading line, then one line per category; none when there are none.
    How each kind of record is scored is in docs/metrics.md."""
    found = document["suite"].get("data_quality") or {}
    if not found:
        return []
    total = sum(sum(findings.values()) for findings in found.values())
    lines = [f"The benchmark's data holds {fmt.count(total)} inconsistent records (how each is scored: docs/metrics.md):"]
    for category, findings in found.items():
        lines.append(f"{category}: " + ", ".join(f"{fmt.count(n)} {kind.replace('_', ' ')}" for kind, n in findings.items()))
    return lines


def deselected_line(document: dict[str, Any]) -> str | None:
    """One line on the checks whose metric items a selection left out, and how to gate them."""
    count = sum(not gated(v) for v in document["verdicts"])
    if not count:
        return None
    return (
        f"{count} threshold check{'s' if count > 1 else ''} not gated: -k or node ids deselected their metric items, so their "
        "verdicts do not count; run without -k, or select the metrics:: items (e.g. -k metrics), to gate them"
    )


def summary_rows(documents: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """One row per suite of a run: what a reader of several suites wants first."""
    rows = []
    for document in documents:
        verdicts = document["verdicts"]
        failed = sum(failing(v) for v in verdicts)
        overall = ", ".join(f"{v['metric']} {fmt.value(v['value'])}" for v in verdicts if v["scope"] == "overall")
        incomplete = not document["run"]["complete"] or missing_data_failed(document)
        status = "INCOMPLETE" if incomplete else "passed" if document["passed"] else "FAILED"
        rows.append(
            [
                document["suite"]["name"],
                document["suite"]["benchmark"],
                document["model"]["model"],
                str(document["run"]["cases"]),
                f"{len(verdicts) - failed} of {len(verdicts)}",
                overall,
                status,
            ]
        )
    return rows


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


def evidence_anchor(comparison: Mapping[str, Any], scope: str) -> str:
    """Where a check of ``scope`` finds its flips: its category's examples, else all flips."""
    examples = (comparison.get("flips") or {}).get("examples") or []
    return flips_anchor(scope) if any(isinstance(f, Mapping) and f.get("category") == scope for f in examples) else "flips"


def examples_note(flips: Mapping[str, Any]) -> str:
    """How the examples were chosen, and where every flip is."""
    where = f"; every flip is in {flips['file']}" if flips.get("file") else ""
    if flips["shown"] >= flips["total"]:
        return f"All {fmt.count(flips['total'])} shown{where}."
    return (
        f"{fmt.count(flips['shown'])} of {fmt.count(flips['total'])} shown (limit {fmt.count(flips['limit'])}), taken in turn from each "
        f"regressed category's directions toward worse first, then from the others{where}."
    )


def calibration_heading(calibration: dict[str, Any]) -> str:
    """The calibration's id, date and size, in one sentence."""
    sizes = ", ".join(f"{c} {fmt.count(sum(row))}" for c, row in calibration["counts"].items())
    total = sum(sum(row) for row in calibration["counts"].values())
    return f"judge calibration {calibration['id']} ({calibration['date']}): {fmt.count(total)} labelled stories (true {sizes})"
