"""How many examples a property test of the default run tries.

The README's test command tries a quarter of each test's count (``examples(300)`` is 75; the tests
that set none try 25 of hypothesis's 100): the hypothesis tests were about a sixth of its CPU.
``BIASCHECK_TEST_EXAMPLES=full`` tries every test's whole count, as GitHub CI's property step does
(``pytest -m "hypothesis and not slow and not real"``). Tests under ``-m slow`` set their own counts
(hundreds of fresh examples) and are never scaled."""

from __future__ import annotations

import math
import os

FULL = os.environ.get("BIASCHECK_TEST_EXAMPLES") == "full"


def examples(count: int) -> int:
    """``count`` under ``BIASCHECK_TEST_EXAMPLES=full``, else a quarter of it (at least 2)."""
    return count if FULL else max(2, math.ceil(count / 4))
