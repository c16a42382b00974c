"""Agreement between judges who read the same units: Krippendorff's alpha (nominal) with a cluster
bootstrap interval, and the confusion table of two judges. Pure functions, no I/O.

Alpha (Krippendorff, 2011, "Computing Krippendorff's Alpha-Reliability") is computed from the
*coincidence matrix* ``o``: every unit ``u`` with ``m_u >= 2`` values adds, for each ordered pair of
values given by two different judges, ``1 / (m_u - 1)`` at ``o[c, k]``. A judge who gave a unit no
value (it could not read it) is missing there, never a value; a unit with fewer than two values is
unpairable and adds nothing. With ``n_c`` the row sums and ``n`` their total (the pairable values),

    alpha = 1 - D_o / D_e = 1 - (n - 1) * sum_{c != k} o[c, k] / (n**2 - sum_c n_c**2)

(the nominal metric: every disagreement weighs 1). It is 1 for perfect agreement, about 0 when the
judges agree as often as chance would, and negative for systematic disagreement (never below -1).
Two conventions: no pairable value (``n < 2``) gives NaN, never a number; pairable values that are
all of one class leave ``D_e = 0`` and the ratio 0/0, which biascheck calls agreement, 1 (as for
Cohen's kappa in :mod:`biascheck.metrics.kappa`, and as R's ``irr::kripp.alpha`` does).

Every unit's coincidences are a vector of ``C * C`` entries, and alpha is a function of their sum,
so the cluster bootstrap of :mod:`biascheck.metrics.bootstrap` applies unchanged: sum the units of
each cluster (a story, whose readings are not independent), resample clusters, and take the
percentile interval of alpha over the resampled sums.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from biascheck.metrics.bootstrap import DEFAULT_N_BOOT, NAN_INTERVAL, bootstrap_sums, percentile_interval
from biascheck.metrics.core import factorize

__all__ = ["UNSCORABLE", "coincidences", "alpha_of_sums", "krippendorff_alpha", "alpha_with_interval", "pair_table"]

#: How :func:`pair_table` names a unit a judge gave no value.
UNSCORABLE = "unscorable"


def coincidences(readings: Sequence[Sequence[Hashable | None]], classes: Sequence[Hashable]) -> np.ndarray:
    """Each unit's coincidence entries, shape ``(U, C * C)`` (row-major ``o[c, k]``): ``readings[u]``
    holds one value per judge, None where that judge gave none. A value not among ``classes`` is a
    ``ValueError``."""
    index = {value: i for i, value in enumerate(classes)}
    size = len(classes)
    out = np.zeros((len(readings), size * size), dtype=np.float64)
    for u, unit in enumerate(readings):
        values = [value for value in unit if value is not None]
        for value in values:
            if value not in index:
                raise ValueError(f"unit {u}: {value!r} is not one of the classes {list(classes)}")
        m = len(values)
        if m < 2:
            continue
        counts = np.bincount([index[value] for value in values], minlength=size).astype(np.float64)
        # Ordered pairs of values from two different judges: n_c n_k for c != k, n_c (n_c - 1) on the diagonal.
        pairs = np.outer(counts, counts) - np.diag(counts)
        out[u] = (pairs / (m - 1)).ravel()
    return out


def alpha_of_sums(sums: np.ndarray, n_classes: int) -> np.ndarray:
    """Alpha of summed coincidence entries, shape ``(..., C * C)`` -> ``(...)`` (see the module
    docstring for the formula and its two conventions)."""
    o = np.asarray(sums, dtype=np.float64).reshape(*np.shape(sums)[:-1], n_classes, n_classes)
    n_c = o.sum(axis=-1)
    n = n_c.sum(axis=-1)
    disagreements = n - np.trace(o, axis1=-2, axis2=-1)
    expected = n * n - (n_c * n_c).sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        alpha = 1.0 - (n - 1.0) * disagreements / expected
    # Rounding can leave a few ulps of "disagreement" among identical values: 0/0 is agreement.
    alpha = np.where(expected <= 1e-9 * np.maximum(n * n, 1.0), 1.0, alpha)
    return np.where(n < 2.0 - 1e-9, np.nan, alpha)


def krippendorff_alpha(readings: Sequence[Sequence[Hashable | None]], classes: Sequence[Hashable] | None = None) -> float:
    """Nominal alpha of ``readings`` (a row per unit, a value or None per judge); ``classes``
    defaults to the values seen."""
    if classes is None:
        classes = sorted({value for unit in readings for value in unit if value is not None}, key=repr)
    if not classes:
        return float("nan")
    return float(alpha_of_sums(coincidences(readings, classes).sum(axis=0), len(classes)))


def alpha_with_interval(
    readings: Sequence[Sequence[Hashable | None]],
    clusters: Sequence[str],
    classes: Sequence[Hashable],
    *,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = 0,
    confidence: float = 0.95,
) -> tuple[float, tuple[float, float], int]:
    """(alpha, its percentile interval under a bootstrap of ``clusters``, the number of pairable
    units). ``clusters[u]`` names unit u's resampling unit: units of one cluster move together.
    ``n_boot = 0`` gives a NaN interval."""
    if len(clusters) != len(readings):
        raise ValueError(f"one cluster per unit: {len(clusters)} clusters for {len(readings)} units")
    units = coincidences(readings, classes)
    alpha = float(alpha_of_sums(units.sum(axis=0), len(classes)))
    pairable = int((units.sum(axis=1) > 0).sum())
    if n_boot <= 0 or not len(units):
        return alpha, NAN_INTERVAL, pairable
    codes, names = factorize(list(clusters))
    by_cluster = np.zeros((len(names), units.shape[1]))
    np.add.at(by_cluster, codes, units)
    draws = alpha_of_sums(bootstrap_sums(by_cluster, n_boot=n_boot, seed=seed), len(classes))
    return alpha, percentile_interval(draws, confidence), pairable


def pair_table(first: Sequence[Hashable | None], second: Sequence[Hashable | None], classes: Sequence[Hashable]) -> dict[str, dict[str, int]]:
    """Two judges' readings of the same units counted: ``table[a][b]`` units the first read as a and
    the second as b, over ``classes`` and :data:`UNSCORABLE` (None: no value)."""
    if len(first) != len(second):
        raise ValueError(f"two judges read the same units: {len(first)} readings against {len(second)}")
    names = [str(c) for c in classes] + [UNSCORABLE]
    table = {row: dict.fromkeys(names, 0) for row in names}
    for a, b in zip(first, second):
        table[UNSCORABLE if a is None else str(a)][UNSCORABLE if b is None else str(b)] += 1
    return table
