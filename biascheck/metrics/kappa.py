"""Cohen's kappa: how far two annotators agree beyond chance, on one set of items. Pure, no I/O.

``kappa = (p_o - p_e) / (1 - p_e)``, with ``p_o`` the share of items both gave the same label and
``p_e = sum_k p1_k p2_k`` the agreement expected from each annotator's own label shares (Cohen,
1960). It lies in [-1, 1]; 1 is perfect agreement. When both annotators gave every item one and
the same label, ``p_e = 1`` and the ratio is 0/0: biascheck calls that agreement, 1.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Sequence


def cohen_kappa(first: Sequence[Hashable], second: Sequence[Hashable]) -> float:
    """Cohen's kappa of two annotators' labels of the same items (NaN for no items)."""
    if len(first) != len(second):
        raise ValueError(f"two annotators label the same items: {len(first)} labels against {len(second)}")
    n = len(first)
    if n == 0:
        return math.nan
    observed = sum(a == b for a, b in zip(first, second)) / n
    shares, other = Counter(first), Counter(second)
    expected = sum(shares[label] * other[label] for label in shares) / (n * n)
    if expected >= 1.0:
        return 1.0
    return (observed - expected) / (1.0 - expected)
