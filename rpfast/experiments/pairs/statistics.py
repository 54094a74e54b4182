"""The test statistic of the RPC protocol (BREC, Wang & Zhang 2023) for one pair of graphs.

A model embeds Q relabelings of G and the same number of H; ``D [Q, p]`` holds the differences
``f(G_q) - f(H_q)``. With ``d`` the mean row of ``D`` and ``S`` its sample covariance (divisor
``Q - 1``):

* the protocol's statistic ("code convention", which omits the factor Q):
  ``T2 = d^T pinv(S) d``, compared with :data:`THRESHOLD`;
* the proper Hotelling statistic ``Q d^T S^-1 d`` (pseudo-inverse where S is singular), whose
  ``(Q - p) / (p (Q - 1))`` multiple is F(p, Q - p) distributed under "no difference", and its
  p-value;
* with ``ridge`` > 0, ``S + ridge I`` replaces ``S`` (an exactly invariant model has ``S = 0``
  and ``T2 = 0``; the ridge mode is reported apart, never mixed into the protocol's score).

A pair is *distinguished* iff ``T2 > THRESHOLD`` and ``T2`` is not within :data:`SAME` of the
reliability statistic (the same statistic between two halves of one graph's relabelings); it is
*reliable* iff that statistic is below the threshold.
"""
from dataclasses import dataclass

import numpy as np

#: The protocol's threshold on T2 (BREC's, for Q = 32 and p = 16).
THRESHOLD = 72.34
#: T2 this close to the reliability statistic counts as not distinguished.
SAME = 1e-6


def t_squared(differences: np.ndarray, ridge: float = 0.0) -> float:
    """``d^T pinv(S + ridge I) d`` of ``differences [Q, p]`` (float64; see the module docstring)."""
    d = _check(differences)
    mean = d.mean(axis=0)
    covariance = np.atleast_2d(np.cov(d, rowvar=False))
    if ridge:
        covariance = covariance + ridge * np.eye(covariance.shape[0])
    return float(mean @ np.linalg.pinv(covariance) @ mean)


def hotelling_p_value(differences: np.ndarray, ridge: float = 0.0) -> float:
    """The p-value of the proper Hotelling statistic ``Q T2`` with ``F = (Q - p) / (p (Q - 1)) Q T2``
    ~ F(p, Q - p); NaN where ``Q <= p`` (no F distribution)."""
    from scipy.stats import f

    d = _check(differences)
    q, p = d.shape
    if q <= p:
        return float("nan")
    statistic = q * t_squared(d, ridge)
    return float(f.sf((q - p) / (p * (q - 1)) * statistic, p, q - p))


def _check(differences) -> np.ndarray:
    d = np.asarray(differences, dtype=np.float64)
    if d.ndim != 2 or d.shape[0] < 2 or d.shape[1] < 1:
        raise ValueError(f"differences must be [Q >= 2, p >= 1], got shape {d.shape}")
    if not np.isfinite(d).all():
        raise ValueError("differences must be finite (a diverged model?)")
    return d


@dataclass(frozen=True)
class PairVerdict:
    """One pair's statistics and the protocol's decision."""

    t2: float
    t2_reliability: float
    p_value: float

    @property
    def distinguished(self) -> bool:
        return self.t2 > THRESHOLD and abs(self.t2 - self.t2_reliability) > SAME

    @property
    def reliable(self) -> bool:
        return self.t2_reliability < THRESHOLD


def verdict(pair_differences: np.ndarray, reliability_differences: np.ndarray, ridge: float = 0.0) -> PairVerdict:
    """The :class:`PairVerdict` of ``D`` (G against H) and of the reliability check's ``D``
    (one graph's two halves of relabelings)."""
    return PairVerdict(t_squared(pair_differences, ridge), t_squared(reliability_differences, ridge),
                       hotelling_p_value(pair_differences, ridge))
