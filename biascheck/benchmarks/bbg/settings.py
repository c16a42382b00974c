"""The [bbg] table of a suite.toml, read with its defaults (its schema: ``settings.schema.json``)."""

from __future__ import annotations

from typing import Any

from biascheck.config.manifest import SAMPLING_PARAMS, SuiteManifest


def bbg_settings(manifest: SuiteManifest) -> dict[str, Any]:
    """The suite's [bbg] table with its defaults: all five runs, missing readings left out of the
    proportions (unscorable "exclude"), the judge's parameters typed as on the command line, the
    paper's qualification bounds (accuracy 0.95, |diff-bias| 0.02)."""
    table = manifest.settings or {}
    judge = table.get("judge", {})
    qualification = {"suite": None, "cases": None, "seed": 0, "min_accuracy": 0.95, "max_abs_diff_bias": 0.02, **table.get("judge_qualification", {})}
    return {
        **table,
        "runs": sorted(table.get("runs", [1, 2, 3, 4, 5])),
        "unscorable": table.get("unscorable", "exclude"),
        "judge": {
            "model": judge.get("model"),
            "sampling": {name: SAMPLING_PARAMS[name](value) for name, value in judge.get("sampling", {}).items()},
            "calibration": judge.get("calibration"),
        },
        "judge_qualification": qualification,
    }
