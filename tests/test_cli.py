"""The ``biascheck`` command's own options."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import biascheck


def test_version_is_the_package_version():
    done = subprocess.run([sys.executable, "-m", "biascheck.cli", "--version"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout == f"biascheck {biascheck.__version__}\n"


def test_the_version_is_the_projects():
    import tomllib

    from biascheck.core.version import VERSION

    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]
    assert VERSION == project["version"]
