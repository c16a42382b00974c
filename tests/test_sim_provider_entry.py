"""The simulator is found by its entry point (biascheck.execution.providers): metadata left by an
older install beside the new one must not break every command that reaches it."""

from __future__ import annotations

import pytest

from biascheck.core.errors import BiascheckError
from biascheck.execution import providers


def _register(site, distribution: str, module: str) -> None:
    info = site / f"{distribution}-0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: 0\n", "utf-8")
    (info / "entry_points.txt").write_text(f"[{providers.ENTRY_POINT_GROUP}]\nsim = {module}\n", "utf-8")


@pytest.fixture
def site(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    providers._provider.cache_clear()
    yield tmp_path
    providers._provider.cache_clear()


def test_the_same_entry_point_found_twice_loads_its_module_once(site):
    # An old distribution's metadata (biascheck, before the name pytest-biascheck) naming the same module.
    _register(site, "biascheck", "biascheck.sim.provider")
    providers.check_simulated_model("sim/fair")  # no error: one module, loaded once


def test_two_modules_under_one_name_are_one_line_naming_both_and_the_fix(site):
    _register(site, "someone-else", "someone_else.provider")
    with pytest.raises(BiascheckError) as caught:
        providers.check_simulated_model("sim/fair")
    message = str(caught.value)
    assert "\n" not in message and "biascheck.sim.provider" in message and "someone_else.provider" in message
    assert "pip install --force-reinstall pytest-biascheck" in message
