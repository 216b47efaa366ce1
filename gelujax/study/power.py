"""Power: how many seeds or pairs a study needs, and the one upper confidence bound on a
standard deviation that every study sizes its seeds with.

A pilot's few paired differences give a sample SD that may well be below the true one; a study
sized on it is then short of power. Every study (a pilot's spread, the powered forms study, the
re-test's pilot, the transformer studies' sizing) takes the SD at its one-sided upper confidence
bound instead: the sample SD times :func:`sd_upper_factor`, with the chi-square quantile
computed exactly (:func:`chi2_quantile`, in plain Python: reading or rendering a result needs
no SciPy).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence

import numpy as np

from gelujax.study import stats
from gelujax.study.stats import POWER, hodges_lehmann, smallest_p, walsh_median

# The signed-rank (and rank-sum) test's efficiency against the t-test for normal differences:
# its shift's standard error is the mean's times sqrt(1 / RANK_EFFICIENCY) = sqrt(π/3).
RANK_EFFICIENCY = 3.0 / math.pi

# The one-sided confidence of the SD's upper bound a pilot's observed shift is sized at
# (:func:`pairs_at_bound`: the forms study's and the re-test's pilots).
PILOT_BOUND = 0.8

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


# ------------------------------------------------------- pairs and seeds for a power


def _z(p: float) -> float:
  return statistics.NormalDist().inv_cdf(p)


def count_to_decide(
  shift: float,
  unit_error: float,
  *,
  level: float,
  margin: float | None,
  power: float,
  floor: Callable[[bool], int],
) -> int | None:
  """The count n (seeds a side, or pairs) with which a true shift of ``shift`` is decided with
  ``power``, the shift's standard error with n being ``unit_error`` / sqrt(n): the one normal
  approximation every observed effect is sized with (:func:`seeds_for_power`,
  :func:`pairs_for_power`, :func:`pairs_for_shift`).

  The decision is the one the shift points to: without a ``margin``, a shift of either sign
  (two-sided at ``level``); with one, equivalence where the shift lies inside it (both one-sided
  tests at ``level`` / 2, as `gelujax.study.stats.Equivalence.p` doubles the smaller p), a shift
  beyond it where outside (one-sided at ``level`` / 4). The answer is at least ``floor(beyond)``,
  the count with which the exact test can reach its level at all.

  Returns:
    The count, or None where no count decides (a shift of exactly 0 without a margin, or of
    exactly the margin) or more than ``MAX_SEEDS`` would be needed.
  """
  beyond = margin is not None and abs(shift) > margin
  if margin is None or beyond:
    effect = abs(shift) - (margin or 0.0)
    if effect == 0.0:
      return None
    z_level = _z(1.0 - level / 2.0) if margin is None else _z(1.0 - level / 4.0)
    needed = math.ceil((unit_error * (z_level + _z(power)) / effect) ** 2)
  else:
    if abs(shift) == margin:
      return None
    needed = _tost_count(
      lambda n: unit_error / math.sqrt(n), shift, margin, _z(1.0 - level / 2.0), power
    )
    if needed is None:
      return None
  needed = max(needed, floor(beyond))
  return needed if needed <= stats.MAX_SEEDS else None


def _paired_count(
  differences: Sequence[float], level: float, margin: float | None, power: float
) -> int | None:
  """:func:`count_to_decide` for paired differences: their Hodges–Lehmann shift, its standard
  error with n pairs s·sqrt(π/3 / n) (s the differences' SD), and the fewest pairs with which
  an exact paired test reaches its one-sided level at all (1 / 2^n at most ``level`` / 4 for a
  shift beyond a margin, else ``level`` / 2); None with fewer than 3 differences."""
  d = np.asarray(differences, np.float64)
  if len(d) < 3:
    return None
  unit_error = float(np.std(d, ddof=1)) * math.sqrt(math.pi / 3.0)
  return count_to_decide(
    walsh_median(d), unit_error, level=level, margin=margin, power=power,
    floor=lambda beyond: next(
      n for n in range(1, stats.MAX_SEEDS + 1)
      if 0.5**n <= (level / 4.0 if beyond else level / 2.0)
    ),
  )  # fmt: skip


def seeds_for_power(
  a: Sequence[float],
  b: Sequence[float],
  *,
  level: float,
  margin: float | None = None,
  power: float = POWER,
) -> int | None:
  """The seeds a side with which the observed effect would be decided with ``power`` by the
  rank-sum tests (:func:`count_to_decide`).

  The observed Hodges–Lehmann shift is taken as the true one; its standard error with n' seeds
  a side is s·sqrt(π/3 · 2/n'), its asymptotic value for normal errors (the rank test's
  efficiency against the t-test is 3/π), with s the pooled standard deviation of the two
  samples. The answer is at least the seeds with which the exact test can reach its level at
  all (2 / C(2n, n) below it; ``level`` / 2 for a shift beyond the margin).

  Args:
    a, b: the per-seed values observed (at least 3 in all).
    level: the p-value the decision needs (e.g. alpha over the family's size, the strictest
      step of Holm's correction).
    margin: the equivalence margin, for an equivalence hypothesis.
    power: the probability of deciding.

  Returns:
    The seeds a side, or None where no number of seeds decides the observed effect (a shift of
    exactly 0, or exactly the margin) or more than ``MAX_SEEDS`` would be needed.
  """
  a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
  if len(a) + len(b) < 3:
    return None
  squares = sum(float(((x - x.mean()) ** 2).sum()) for x in (a, b))
  pooled = squares / (len(a) + len(b) - 2)
  return count_to_decide(
    hodges_lehmann(a, b),
    math.sqrt(2.0 * pooled * math.pi / 3.0),
    level=level,
    margin=margin,
    power=power,
    floor=lambda beyond: next(
      n for n in range(1, stats.MAX_SEEDS + 1) if smallest_p(n) < (level / 2 if beyond else level)
    ),
  )


def _tost_count(
  standard_error: Callable[[int], float], shift: float, margin: float, z_level: float, power: float
) -> int | None:
  """The smallest count n (from 2) at which both one-sided tests of a shift inside ±``margin``
  reject at the normal quantile ``z_level`` with ``power``, the shift's standard error with n
  being ``standard_error(n)``; None beyond ``MAX_SEEDS``."""
  normal = statistics.NormalDist()

  def tost_power(n: int) -> float:
    se = standard_error(n)
    if se == 0.0:
      return 1.0
    return max(
      0.0,
      1.0
      - normal.cdf(z_level - (margin - shift) / se)
      - normal.cdf(z_level - (margin + shift) / se),
    )

  return next((n for n in range(2, stats.MAX_SEEDS + 1) if tost_power(n) >= power), None)


def pairs_for_power(
  differences: Sequence[float], *, level: float, margin: float, power: float = POWER
) -> int | None:
  """The pairs with which the observed paired shift would be decided by
  :func:`paired_equivalence_test` (its :attr:`Equivalence.p` at most ``level``) with ``power``
  (:func:`count_to_decide`): the paired Hodges–Lehmann shift taken as the true one, its
  standard error with n pairs s·sqrt(π/3 / n), s the differences' standard deviation; at least
  the pairs with which the exact test can reach its level at all (1 / 2^n below it). With a few
  dozen pairs the power is close to the one asked for (tested by simulation); with about 10 or
  fewer the exact test's discreteness makes it lower (about 60% for a shift one standard
  deviation beyond the margin): read a small answer as "at least".

  Returns:
    The pairs, or None where no number decides (fewer than 3 differences, a shift of exactly
    the margin) or more than ``MAX_SEEDS`` would be needed.
  """
  return _paired_count(differences, level, margin, power)


def pairs_at_bound(
  differences: Sequence[float], *, level: float, margin: float | None, power: float = POWER
) -> tuple[int | None, int | None]:
  """The pairs that decide a pilot's observed paired shift (:func:`pairs_for_power` with a
  ``margin``, else :func:`pairs_for_shift`), with its differences as observed and with their
  spread about their Hodges–Lehmann shift widened to the SD's one-sided :data:`PILOT_BOUND`
  upper confidence bound (:func:`sd_upper_factor`): the second is what a study is sized with."""
  d = np.asarray(differences, np.float64)
  shift = walsh_median(d)
  widened = shift + (d - shift) * sd_upper_factor(len(d), PILOT_BOUND)
  return _paired_count(d, level, margin, power), _paired_count(widened, level, margin, power)


def in_tens(pairs: int | None) -> int:
  """A pilot's answer rounded up to tens of seeds; where it is None (no count up to
  ``MAX_SEEDS`` decides), ``MAX_SEEDS`` rounded up to tens."""
  return 10 * math.ceil((pairs or stats.MAX_SEEDS) / 10)


def detectable_shift(sd: float, pairs: int, *, level: float, power: float = POWER) -> float:
  """The paired shift that the two-sided :func:`signed_rank_test` at ``level`` detects with
  ``power`` from ``pairs`` pairs whose differences have standard deviation ``sd``: a normal
  approximation to the paired Hodges–Lehmann shift, whose standard error with n pairs is
  sd·sqrt(π/3 / n) (the signed-rank test's efficiency against the t-test is 3/π for normal
  differences), so (z(1 - level/2) + z(power)) times that. In ``sd``'s units."""
  return (_z(1.0 - level / 2.0) + _z(power)) * sd * math.sqrt(math.pi / 3.0 / pairs)


def pairs_for_shift(
  differences: Sequence[float], *, level: float, power: float = POWER
) -> int | None:
  """The pairs with which the observed paired shift (the median of the Walsh averages of
  ``differences``) would be found different from 0 by the two-sided :func:`signed_rank_test` at
  ``level`` with ``power``, were it the true one (:func:`count_to_decide`; the standard error
  :func:`detectable_shift`'s, the standard deviation the differences'); at least the pairs with
  which the exact test can reach ``level`` at all (2 / 2^n at most ``level``).

  Returns:
    The pairs, or None where no number decides (fewer than 3 differences, a shift of 0) or more
    than ``MAX_SEEDS`` would be needed.
  """
  return _paired_count(differences, level, None, power)


def pairs_to_detect(
  sd: float, margin: float, *, alpha: float, power: float, efficiency: float = 1.0
) -> int | None:
  """The pairs with which a two-sided paired test at ``alpha`` finds a true shift of ``margin``
  with ``power``, by the normal approximation: ((z(1 - alpha/2) + z(power)) s / margin)^2,
  rounded up, at least 2, with s = ``sd`` / sqrt(``efficiency``) (1: the t-test;
  :data:`RANK_EFFICIENCY`: the signed-rank test); None where ``sd`` is not finite."""
  if not math.isfinite(sd):
    return None
  s = sd * math.sqrt(1.0 / efficiency)
  return max(2, math.ceil(((_z(1.0 - alpha / 2.0) + _z(power)) * s / margin) ** 2))


def pairs_for_equivalence(
  sd: float, margin: float, *, alpha: float, power: float, efficiency: float = 1.0
) -> int | None:
  """The pairs with which two one-sided paired tests, each at ``alpha``, find a true shift of 0
  within ±``margin`` with ``power``, by the normal approximation: ((z(1 - alpha) +
  z(1 - (1 - power)/2)) s / margin)^2, rounded up, at least 2, with s = ``sd`` /
  sqrt(``efficiency``); None where ``sd`` is not finite (:func:`equivalence_power` inverts it)."""
  if not math.isfinite(sd):
    return None
  s = sd * math.sqrt(1.0 / efficiency)
  z = _z(1.0 - alpha) + _z(1.0 - (1.0 - power) / 2.0)
  return max(2, math.ceil((z * s / margin) ** 2))


def equivalence_power(
  sd: float, margin: float, pairs: int, *, alpha: float, efficiency: float = 1.0
) -> float:
  """The power of two one-sided paired tests, each at ``alpha``, to find a true shift of 0
  within ±``margin`` with ``pairs`` pairs, by the approximation :func:`pairs_for_equivalence`
  inverts: 1 − 2 Φ(z(1 − alpha) − margin √pairs / s), s = ``sd`` / sqrt(``efficiency``); NaN
  where ``sd`` is not finite."""
  if not math.isfinite(sd):
    return math.nan
  normal = statistics.NormalDist()
  z = normal.inv_cdf(1.0 - alpha)
  s = sd * math.sqrt(1.0 / efficiency)
  reach = margin * math.sqrt(pairs) / s if sd > 0 else math.inf
  return max(0.0, 1.0 - 2.0 * normal.cdf(z - reach))


def floor_pairs(one_sided: float) -> int:
  """The fewest pairs with which an exact one-sided signed-rank test can reach ``one_sided`` at
  all: its smallest p with n pairs is 1 / 2^n."""
  return next(n for n in range(1, stats.MAX_SEEDS + 1) if 0.5**n <= one_sided)
