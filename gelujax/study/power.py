"""The one upper confidence bound on a standard deviation that every study sizes its seeds with.

A pilot's few paired differences give a sample SD that may well be below the true one; a study
sized on it is then short of power. Every study (a pilot's spread, the powered forms study, the
re-test's pilot, the transformer studies' sizing) takes the SD at its one-sided upper confidence
bound instead: the sample SD times :func:`sd_upper_factor`, with the chi-square quantile
computed exactly (:func:`chi2_quantile`, in plain Python: reading or rendering a result needs
no SciPy).
"""

from __future__ import annotations

import math

# Where the bisection of `chi2_quantile` stops: the bracket's width relative to its midpoint.
_TOLERANCE = 1e-15


def _lower_gamma_regularized(a: float, x: float) -> float:
  """P(a, x) = γ(a, x) / Γ(a), the regularized lower incomplete gamma function: its series
  below ``x < a + 1``, else 1 minus the continued fraction of Q (Lentz's method)."""
  if x <= 0.0:
    return 0.0
  log_front = a * math.log(x) - x - math.lgamma(a)
  if x < a + 1.0:
    term = total = 1.0 / a
    n = a
    while abs(term) > abs(total) * 1e-17:
      n += 1.0
      term *= x / n
      total += term
    return total * math.exp(log_front)
  tiny = 1e-300
  b = x + 1.0 - a
  c, d = 1.0 / tiny, 1.0 / b
  h = d
  for i in range(1, 10_000):
    an = -i * (i - a)
    b += 2.0
    d = an * d + b
    d = tiny if abs(d) < tiny else d
    c = b + an / c
    c = tiny if abs(c) < tiny else c
    d = 1.0 / d
    delta = d * c
    h *= delta
    if abs(delta - 1.0) < 1e-17:
      break
  return 1.0 - math.exp(log_front) * h


def chi2_cdf(x: float, k: int) -> float:
  """The chi-square distribution function of ``k`` degrees of freedom at ``x``."""
  return _lower_gamma_regularized(k / 2.0, x / 2.0)


def chi2_quantile(p: float, k: int) -> float:
  """The ``p`` quantile of the chi-square distribution of ``k`` degrees of freedom, by
  bisection of :func:`chi2_cdf` to about 15 significant digits.

  Raises:
    ValueError: ``p`` outside (0, 1) or ``k`` below 1.
  """
  if not 0.0 < p < 1.0 or k < 1:
    raise ValueError(f"chi2_quantile needs 0 < p < 1 and k >= 1; got p={p}, k={k}.")
  low, high = 0.0, max(1.0, 2.0 * k)
  while chi2_cdf(high, k) < p:
    low, high = high, 2.0 * high
  while high - low > _TOLERANCE * (high + low) / 2.0:
    middle = (low + high) / 2.0
    if middle in (low, high):
      break
    if chi2_cdf(middle, k) < p:
      low = middle
    else:
      high = middle
  return (low + high) / 2.0


def sd_upper_factor(pairs: int, confidence: float) -> float:
  """What multiplies the sample SD of ``pairs`` normal values to give its one-sided
  ``confidence`` upper confidence bound: sqrt(k / q), k = pairs - 1 and q the chi-square
  quantile of k degrees of freedom at 1 - ``confidence`` (exact); NaN below 2 pairs."""
  if pairs < 2:
    return math.nan
  k = pairs - 1
  return math.sqrt(k / chi2_quantile(1.0 - confidence, k))
