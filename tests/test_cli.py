"""The ``biascheck`` command's own options."""

from __future__ import annotations

import subprocess
import sys

import biascheck


def test_version_is_the_package_version():
    done = subprocess.run([sys.executable, "-m", "biascheck.cli", "--version"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout == f"biascheck {biascheck.__version__}\n"
