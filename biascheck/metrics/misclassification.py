"""Correcting shares read by an imperfect judge: pure functions, no I/O.

A judge reads each item into one of ``k`` classes. On a labelled calibration set its confusion
matrix ``M`` has ``M[i, j] = P(judge says j | truth i)`` (rows sum to 1). Over the test set the
shares the judge reports are ``p = M^T pi`` where ``pi`` are the true shares, so

* the **binary** case (Rogan and Gladen, 1978; Lee et al., 2025, "How to Correctly Report
  LLM-as-a-Judge Evaluations", arXiv 2511.21140): with ``p`` the share judged positive, ``q1``
  the sensitivity ``P(+ | +)`` and ``q0`` the specificity ``P(- | -)``,
  ``theta = (p + q0 - 1) / (q0 + q1 - 1)``, clipped to [0, 1]; it needs ``q0 + q1 > 1``
  (:func:`rogan_gladen`, :func:`rogan_gladen_interval`);
* the **multiclass** case (adjusted classify-and-count): ``pi = (M^T)^-1 p``, projected onto the
  probability simplex (:func:`correct_shares`, :func:`project_to_simplex`);
* **pairs** of readings (BBG's pair types): if the judge errs independently on the two readings
  of a pair, the pair's confusion matrix is ``M kron M`` (:func:`pair_confusion`).

The analytic interval (:func:`rogan_gladen_interval`) is the delta-method variance of the
Rogan-Gladen estimator with the smoothed plug-ins the paper uses, ``p~ = (n p + z^2/2) / (n +
z^2)`` and ``q~_j = (m_j q_j + 1) / (m_j + 2)``::

    Var = [p~(1-p~)/n + theta~^2 q~1(1-q~1)/m1 + (1-theta~)^2 q~0(1-q~0)/m0] / (q~0 + q~1 - 1)^2

centred on ``theta~`` (the estimator at the smoothed plug-ins) and clipped to [0, 1]. The paper's
exact form (its bias shift) could not be read offline; this is the standard first-order form.

Allocation (:func:`allocate`, :func:`calibration_budget`): for a fixed total ``m = m0 + m1``,
minimising ``theta^2 a1 / m1 + (1 - theta)^2 a0 / m0`` (``a_j = q_j (1 - q_j)``) by Lagrange
gives ``m1 / m0 = theta sqrt(a1) / ((1 - theta) sqrt(a0))``, and the total
that reaches a half-width ``w`` at level ``z`` for a test set of ``n`` is
``(theta sqrt(a1) + (1 - theta) sqrt(a0))^2 / ((w/z)^2 (q0 + q1 - 1)^2 - p (1 - p) / n)``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

__all__ = [
    "JudgeTooWeak",
    "confusion_from_counts",
    "check_separable",
    "rogan_gladen",
    "rogan_gladen_interval",
    "project_to_simplex",
    "correct_shares",
    "pair_confusion",
    "resample_confusions",
    "Allocation",
    "allocate",
    "calibration_budget",
]


class JudgeTooWeak(ValueError):
    """The judge cannot be corrected: for some pair of classes it tells them apart no better than
    chance (``q0 + q1 <= 1``), or its confusion matrix is singular."""


def confusion_from_counts(counts: np.ndarray) -> np.ndarray:
    """Row-normalised confusion matrix from counts ``[true, judged]``; every row needs a count."""
    c = np.asarray(counts, dtype=np.float64)
    if c.ndim != 2 or c.shape[0] != c.shape[1]:
        raise ValueError(f"confusion counts must be a square matrix, got shape {c.shape}")
    totals = c.sum(axis=1, keepdims=True)
    if (totals <= 0).any():
        raise ValueError("every true class needs at least one labelled item")
    return c / totals


def check_separable(confusion: np.ndarray, classes: Sequence[str] | None = None) -> None:
    """Raise :class:`JudgeTooWeak` unless, for every ordered pair of classes (i, j), the judge says
    i more often when the truth is i than when it is j: with i as the positive class and j as the
    negative one, ``q1 = M[i, i]`` and ``q0 = 1 - M[j, i]``, so ``q0 + q1 > 1``. Also refuses a
    singular matrix (the correction would not be defined)."""
    m = np.asarray(confusion, dtype=np.float64)
    k = m.shape[0]
    names = list(classes) if classes is not None else [str(i) for i in range(k)]
    for i in range(k):
        for j in range(k):
            if i != j and m[i, i] + (1.0 - m[j, i]) <= 1.0:
                raise JudgeTooWeak(
                    f"for true {names[i]} against true {names[j]}: q1 + q0 = {m[i, i]:.3f} + {1.0 - m[j, i]:.3f} <= 1 "
                    f"(the judge says {names[i]} for true {names[j]} as often as for true {names[i]})"
                )
    if abs(np.linalg.det(m)) < 1e-9:
        raise JudgeTooWeak("the confusion matrix is singular: no correction is defined")


def rogan_gladen(p: float, q0: float, q1: float) -> float:
    """The corrected positive share ``(p + q0 - 1) / (q0 + q1 - 1)``, clipped to [0, 1]."""
    if q0 + q1 <= 1.0:
        raise JudgeTooWeak(f"q0 + q1 = {q0 + q1:.3f} <= 1: the judge is no better than chance")
    return min(1.0, max(0.0, (p + q0 - 1.0) / (q0 + q1 - 1.0)))


def rogan_gladen_interval(p: float, n: int, q0: float, m0: int, q1: float, m1: int, confidence: float = 0.95) -> tuple[float, float, float]:
    """(estimate, lower, upper): the Rogan-Gladen estimate of the share judged ``p`` of ``n``
    items, by a judge of specificity ``q0`` (on ``m0`` true negatives) and sensitivity ``q1``
    (on ``m1`` true positives), with the smoothed delta-method interval of the module notes."""
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    estimate = rogan_gladen(p, q0, q1)
    pt = (n * p + z * z / 2) / (n + z * z)
    q0t = (m0 * q0 + 1) / (m0 + 2)
    q1t = (m1 * q1 + 1) / (m1 + 2)
    if q0t + q1t <= 1.0:
        raise JudgeTooWeak(f"smoothed q0 + q1 = {q0t + q1t:.3f} <= 1")
    theta = min(1.0, max(0.0, (pt + q0t - 1) / (q0t + q1t - 1)))
    var = (pt * (1 - pt) / n + theta**2 * q1t * (1 - q1t) / m1 + (1 - theta) ** 2 * q0t * (1 - q0t) / m0) / (q0t + q1t - 1) ** 2
    half = z * math.sqrt(var)
    return estimate, max(0.0, theta - half), min(1.0, theta + half)


def project_to_simplex(v: np.ndarray) -> np.ndarray:
    """The Euclidean projection of each row of ``v`` (``(..., k)``) onto the probability simplex
    (Duchi et al., 2008): a row already on it is returned unchanged."""
    x = np.asarray(v, dtype=np.float64)
    shape = x.shape
    rows = x.reshape(-1, shape[-1])
    k = shape[-1]
    u = -np.sort(-rows, axis=1)
    css = np.cumsum(u, axis=1) - 1.0
    ind = np.arange(1, k + 1)
    cond = u - css / ind > 0
    rho = k - 1 - np.argmax(cond[:, ::-1], axis=1)
    tau = css[np.arange(len(rows)), rho] / (rho + 1)
    out = np.maximum(rows - tau[:, None], 0.0)
    nan = np.isnan(rows).any(axis=1)
    out[nan] = np.nan
    return out.reshape(shape)


def correct_shares(observed: np.ndarray, confusion: np.ndarray) -> np.ndarray:
    """True shares from observed ones: ``pi = (M^T)^-1 p`` per row, projected onto the simplex.

    ``observed``: ``(..., k)`` shares (rows summing to 1; NaN rows stay NaN). ``confusion``: one
    ``(k, k)`` matrix, or ``(B, k, k)`` matrices, one per row of a ``(B, k)`` ``observed`` (a
    bootstrap pairing each story resample with a calibration resample)."""
    p = np.asarray(observed, dtype=np.float64)
    m = np.asarray(confusion, dtype=np.float64)
    if m.ndim == 2:
        raw = p @ np.linalg.inv(m)  # p^T = pi^T M  =>  pi^T = p^T M^-1
    else:
        raw = np.einsum("bk,bkj->bj", p, np.linalg.inv(m))
    return project_to_simplex(raw)


def pair_confusion(confusion: np.ndarray) -> np.ndarray:
    """The confusion matrix of a pair of readings when the judge errs independently on each:
    ``M kron M`` (pair type ``(i1, i2)`` at index ``i1 * k + i2``); stacked ``(B, k, k)`` gives
    ``(B, k^2, k^2)``."""
    m = np.asarray(confusion, dtype=np.float64)
    if m.ndim == 2:
        return np.kron(m, m)
    b, k, _ = m.shape
    return np.einsum("bij,bkl->bikjl", m, m).reshape(b, k * k, k * k)


def resample_confusions(counts: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """``(B, k, k)`` confusion matrices, each row of the calibration counts resampled on its own
    (a multinomial of the class's size at its observed shares): the calibration's uncertainty,
    class by class, independent of the stories' resampling."""
    c = np.asarray(counts, dtype=np.int64)
    k = c.shape[0]
    out = np.empty((n_boot, k, k))
    for i in range(k):
        size = int(c[i].sum())
        out[:, i, :] = rng.multinomial(size, c[i] / size, size=n_boot) / size
    return out


@dataclass(frozen=True)
class Allocation:
    """A labelling budget: ``m1`` true positives and ``m0`` true negatives (rounded up)."""

    m1: int
    m0: int

    @property
    def total(self) -> int:
        return self.m1 + self.m0


def allocate(total: int, theta: float, q0: float, q1: float) -> Allocation:
    """Split ``total`` labels between the classes as the variance-minimising rule says:
    ``m1 : m0 = theta sqrt(q1 (1 - q1)) : (1 - theta) sqrt(q0 (1 - q0))``."""
    w1 = theta * math.sqrt(q1 * (1 - q1))
    w0 = (1 - theta) * math.sqrt(q0 * (1 - q0))
    share = 0.5 if w1 + w0 == 0 else w1 / (w1 + w0)
    m1 = round(total * share)
    return Allocation(m1, total - m1)


def calibration_budget(half_width: float, theta: float, q0: float, q1: float, n: int, confidence: float = 0.95) -> Allocation | None:
    """The fewest labels (allocated by :func:`allocate`) for which the corrected share's interval
    has half-width ``half_width`` on a test set of ``n`` items; None when the test set alone is
    already wider (more labels cannot help)."""
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    p = q1 * theta + (1 - q0) * (1 - theta)
    room = (half_width / z) ** 2 * (q0 + q1 - 1) ** 2 - p * (1 - p) / n
    if room <= 0:
        return None
    a1, a0 = math.sqrt(q1 * (1 - q1)), math.sqrt(q0 * (1 - q0))
    total = (theta * a1 + (1 - theta) * a0) ** 2 / room
    w1, w0 = theta * a1, (1 - theta) * a0
    share = 0.5 if w1 + w0 == 0 else w1 / (w1 + w0)
    return Allocation(math.ceil(total * share), math.ceil(total * (1 - share)))
