"""Runs of one suite set beside each other: whether they can be (``biascheck diff`` of two runs)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from biascheck.core.errors import BiascheckError
from biascheck.evaluation.baseline import fingerprint_differences

# The fix of a refused run when no option allows the difference (biascheck compare).
SAME_SUITE_FIX = "compare runs of one suite version: run the other models again on this suite, or compare each group of runs on its own"


def _answer_mode(document: Mapping[str, Any]) -> str:
    return str((document.get("run") or {}).get("estimator") or "generation (the default)")


def check_same_suite(
    reference: tuple[str, Mapping[str, Any]],
    run: tuple[str, Mapping[str, Any]],
    *,
    allow_fingerprint_mismatch: bool = False,
    fix: str = SAME_SUITE_FIX,
) -> list[str]:
    """Refuse to set ``run`` (path, results document) beside ``reference``: another suite, another
    suite fingerprint (data, prompts, subset, ...; see :func:`fingerprint_differences`) unless
    allowed, or another answer mode (``run.estimator``: a parsed reply, a log-likelihood and a
    first-token reading of one model differ by construction). The one-line error names ``run``'s
    file and field, and ``fix`` (for a fingerprint). Returns the fingerprint parts that differ."""
    where, document = run
    other, first = reference
    mine, theirs = document["suite"], first["suite"]
    if (mine["name"], mine["benchmark"]) != (theirs["name"], theirs["benchmark"]):
        raise BiascheckError(
            where,
            "suite.name",
            f"is a run of suite {mine['name']!r} ({mine['benchmark']}), and {other} of {theirs['name']!r} ({theirs['benchmark']})",
            "compare runs of one suite",
        )
    differences = fingerprint_differences(theirs["fingerprint"], mine["fingerprint"])
    if differences and not allow_fingerprint_mismatch:
        shown = ", ".join(
            f"{part} {mine['fingerprint'].get(part) or 'none'} here, {theirs['fingerprint'].get(part) or 'none'} in {other}" for part in differences
        )
        raise BiascheckError(where, "suite.fingerprint", f"differs from that of {other} ({shown})", fix)
    if _answer_mode(document) != _answer_mode(first):
        raise BiascheckError(
            where,
            "run.estimator",
            f"was answered by {_answer_mode(document)}, and {other} by {_answer_mode(first)}: answers read in different ways are not comparable",
            "compare runs answered the same way (pytest's answer-mode option chooses it)",
        )
    return differences
