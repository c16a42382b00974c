"""The [bbg] table of a suite.toml, read with its defaults (its schema: ``settings.schema.json``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from biascheck.config.manifest import SAMPLING_PARAMS, SuiteManifest
from biascheck.core.errors import BiascheckError


def bbg_settings(manifest: SuiteManifest) -> dict[str, Any]:
    """The suite's [bbg] table with its defaults: all five runs, missing readings left out of the
    proportions (unscorable "exclude"), the judges (``model`` or ``models``, as a list) and their
    parameters typed as on the command line, several judges combined by majority with no agreement
    floor, the calibrations as a list, the paper's qualification bounds (accuracy 0.95,
    |diff-bias| 0.02)."""
    table = manifest.settings or {}
    judge = table.get("judge", {})
    if "model" in judge and "models" in judge:
        raise BiascheckError(manifest.path, "bbg.judge.models", "is given beside model", "name one judge in model or several in models, not both")
    qualification = {"suite": None, "cases": None, "seed": 0, "min_accuracy": 0.95, "max_abs_diff_bias": 0.02, **table.get("judge_qualification", {})}
    calibration = judge.get("calibration") or []
    return {
        **table,
        "runs": sorted(table.get("runs", [1, 2, 3, 4, 5])),
        "unscorable": table.get("unscorable", "exclude"),
        "judge": {
            "models": list(judge["models"]) if "models" in judge else [judge["model"]] if judge.get("model") else [],
            "models_field": "models" if "models" in judge else "model",
            "sampling": {name: SAMPLING_PARAMS[name](value) for name, value in judge.get("sampling", {}).items()},
            "calibrations": [calibration] if isinstance(calibration, str) else list(calibration),
            "aggregation": judge.get("aggregation", "majority"),
            "primary": judge.get("primary"),
            "min_alpha": judge.get("min_alpha"),
        },
        "judge_qualification": qualification,
    }


def qualification_suite(manifest: SuiteManifest) -> Path:
    """The QA suite a BBG manifest qualifies its judges on (relative to the manifest)."""
    settings = bbg_settings(manifest)["judge_qualification"]
    if not settings["suite"]:
        raise BiascheckError(
            manifest.path, "bbg.judge_qualification.suite", "names no QA suite", 'set suite = "../kobbq" (Korean) or "../bbq" (English)'
        )
    return (manifest.directory / settings["suite"]).resolve()
