"""The statistics of the study: exact rank tests over seeds, effect sizes, corrections.

Two runs are compared through their per-seed values. Everything here is exact for the sample
sizes of a study (up to a few dozen seeds a side) and needs NumPy only:

- :func:`rank_test`: the Wilcoxon–Mann–Whitney rank-sum test, two-sided or one-sided, its null
  distribution enumerated over every split of the pooled values (tied values get mid-ranks).
- :func:`hodges_lehmann` and :func:`shift_interval`: the Hodges–Lehmann shift (the median of
  every difference between a value of one run and one of the other) and its exact
  distribution-free confidence interval, read off the sorted differences at the order that the
  Mann–Whitney null distribution (:func:`mann_whitney_counts`) gives.
- :func:`equivalence_test`: two one-sided rank tests (TOST) against a stated margin, and the
  test that the shift lies beyond it.
- :func:`holm`: Holm's step-down adjusted p-values within a family.

How many seeds or pairs a decision needs is `gelujax.study.power`'s.

Runs trained with one seed share their initial draw, batch order and dropout stream whatever the
activation, so two runs' values of one seed are a pair. The paired counterparts:

- :func:`signed_rank_test`: the exact Wilcoxon signed-rank test of paired differences, its null
  distribution enumerated over every assignment of signs to their ranks (zero differences
  dropped, as Wilcoxon did; tied absolute differences get mid-ranks).
- :func:`walsh_median` and :func:`paired_interval`: the paired Hodges–Lehmann shift (the median
  of the Walsh averages (d_i + d_j) / 2, i <= j) and its exact distribution-free interval, read
  off the sorted Walsh averages at the order the signed-rank null distribution
  (:func:`signed_rank_counts`) gives.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Sequence

import numpy as np

# The significance level of every family of hypotheses (after Holm's correction).
ALPHA = 0.05
# The confidence level of every Hodges–Lehmann interval (the achieved level is stated).
CONFIDENCE = 0.95
# The power a study that decides an effect should have.
POWER = 0.8
# The most seeds a side :func:`seeds_for_power` looks for.
MAX_SEEDS = 1000
TWO_SIDED, LESS, GREATER = "two-sided", "less", "greater"


@dataclasses.dataclass(frozen=True)
class Stats:
  """Median, mean and sample standard deviation of some values, and the values (in seed
  order)."""

  median: float
  mean: float
  std: float
  n: int
  values: tuple[float, ...] = ()

  @classmethod
  def of(cls, values: Sequence[float]) -> Stats:
    if not len(values):
      return cls(math.nan, math.nan, math.nan, 0)
    x = np.asarray(values, np.float64)
    std = float(np.std(x, ddof=1)) if len(x) > 1 else math.nan
    return cls(float(np.median(x)), float(np.mean(x)), std, len(x), tuple(map(float, x)))


def _doubled_ranks(pooled: np.ndarray) -> np.ndarray:
  """Twice the mid-ranks of ``pooled`` (ties share the mean of their ranks): integers."""
  _, inverse, counts = np.unique(pooled, return_inverse=True, return_counts=True)
  ends = np.cumsum(counts)
  return (2 * ends - counts + 1)[inverse]


def rank_test(a: Sequence[float], b: Sequence[float], alternative: str = TWO_SIDED) -> float:
  """The exact p-value of the Wilcoxon–Mann–Whitney rank-sum test of samples ``a`` and ``b``.

  The null distribution of ``a``'s rank sum is enumerated over every way of drawing ``len(a)``
  of the pooled values (ties get mid-ranks), so the p-value is exact for any sizes and ties.

  Args:
    a, b: the two samples (e.g. one run's per-seed values, and another's).
    alternative: ``"two-sided"``: the rank sum at least as far from its mean as observed;
      ``"less"``: ``a`` tends to lie below ``b`` (a rank sum at most the observed one);
      ``"greater"``: ``a`` tends to lie above ``b``.

  Returns:
    The p-value; NaN when a sample is empty. With n values a side and no overlap the two-sided
    p-value is its minimum, 2 / C(2n, n): 0.0079 for 5 seeds, 1.1e-5 for 10.
  """
  pooled = np.concatenate([np.asarray(a, np.float64), np.asarray(b, np.float64)])
  n, total = len(a), len(pooled)
  if n == 0 or n == total:
    return math.nan
  ranks2 = _doubled_ranks(pooled)
  # ways[k, s]: subsets of k pooled values whose doubled ranks sum to s.
  ways = np.zeros((n + 1, int(ranks2.sum()) + 1))
  ways[0, 0] = 1.0
  for r in ranks2:
    ways[1:, r:] = ways[1:, r:] + ways[:-1, :-r]
  observed = int(ranks2[:n].sum())
  return _exact_p(ways[n], observed, n * (total + 1), alternative)  # centre: the expected sum


def direction(a: Sequence[float], b: Sequence[float]) -> int:
  """-1 where ``a``'s rank sum lies below its null mean (``a`` tends below ``b``), +1 above,
  0 at it: the side of the two-sided :func:`rank_test` the data fall on."""
  pooled = np.concatenate([np.asarray(a, np.float64), np.asarray(b, np.float64)])
  ranks2 = _doubled_ranks(pooled)
  return int(np.sign(int(ranks2[: len(a)].sum()) - len(a) * (len(pooled) + 1)))


def tied_values(a: Sequence[float], b: Sequence[float]) -> int:
  """How many distinct values occur more than once among ``a`` and ``b`` pooled (the values
  :func:`rank_test` gives a shared mid-rank)."""
  _, counts = np.unique(
    np.concatenate([np.asarray(a, np.float64), np.asarray(b, np.float64)]), return_counts=True
  )
  return int((counts > 1).sum())


def smallest_p(n: int, m: int | None = None) -> float:
  """The smallest two-sided p-value of the exact rank-sum test with n and m values a side."""
  m = n if m is None else m
  return min(1.0, 2.0 / math.comb(n + m, n))


def mann_whitney_counts(m: int, n: int) -> list[int]:
  """How many of the C(m + n, m) splits give each Mann–Whitney count U = 0 .. m·n (the pairs
  of a value of the m-sample above one of the n-sample), without ties.

  These are the coefficients of the Gaussian binomial [m + n choose m]_q, built as the product
  of (1 - q^(n+i)) / (1 - q^i) for i = 1..m, in exact integers.
  """
  poly = [1]
  for i in range(1, m + 1):
    grown = [*poly, *([0] * (n + i))]
    for k, c in enumerate(poly):
      grown[k + n + i] -= c
    for k in range(i, len(grown)):  # Division by (1 - q^i): a running sum with stride i.
      grown[k] += grown[k - i]
    poly = grown[: i * n + 1]
  return poly


def hodges_lehmann(a: Sequence[float], b: Sequence[float]) -> float:
  """The Hodges–Lehmann shift of ``a`` from ``b``: the median of every difference a_i - b_j."""
  diffs = np.subtract.outer(np.asarray(a, np.float64), np.asarray(b, np.float64))
  return float(np.median(diffs)) if diffs.size else math.nan


def shift_interval(
  a: Sequence[float], b: Sequence[float], confidence: float = CONFIDENCE
) -> tuple[float, float, float]:
  """The exact distribution-free confidence interval of the shift of ``a`` from ``b``.

  With the m·n differences a_i - b_j sorted, the interval runs from the k-th to the
  (m·n + 1 - k)-th, where k is the largest count with P(U <= k - 1) <= (1 - confidence) / 2
  under the null distribution of the Mann–Whitney U (:func:`mann_whitney_counts`): it holds
  the true shift with probability 1 - 2 P(U <= k - 1) (the *achieved* level, at least
  ``confidence``) for continuous values differing by a shift. It is the set of shifts the
  two-sided rank test does not reject at that level. Too few seeds for any k: (-inf, inf).

  Returns:
    ``(low, high, achieved confidence)``.
  """
  m, n = len(a), len(b)
  if not m or not n:
    return (math.nan, math.nan, math.nan)
  counts = np.asarray(mann_whitney_counts(m, n), np.float64)
  tail = np.cumsum(counts) / math.comb(m + n, m)  # tail[u] = P(U <= u)
  k = int(np.searchsorted(tail, (1.0 - confidence) / 2.0, side="right"))
  if k == 0:
    return (-math.inf, math.inf, 1.0)
  diffs = np.sort(np.subtract.outer(np.asarray(a, np.float64), np.asarray(b, np.float64)).ravel())
  return (float(diffs[k - 1]), float(diffs[m * n - k]), float(1.0 - 2.0 * tail[k - 1]))


def _signed_rank_ways(ranks2: np.ndarray) -> np.ndarray:
  """ways[s]: sign assignments whose positive doubled ranks sum to s (each rank positive or
  negative, 2^n in all; every doubled rank is at least 2). A function of the multiset of
  ranks alone, so kept by it (`_ways_of_sorted`): the calibration's bootstrap asks for the same
  ties thousands of times."""
  return _ways_of_sorted(tuple(sorted(map(int, ranks2))))


@functools.lru_cache(maxsize=4096)
def _ways_of_sorted(ranks2: tuple[int, ...]) -> np.ndarray:
  ways = np.zeros(sum(ranks2) + 1)
  ways[0] = 1.0
  for r in ranks2:
    ways[r:] = ways[r:] + ways[:-r]  # The right side is a new array: no aliasing.
  ways.flags.writeable = False  # shared by every caller
  return ways


def signed_rank_test(differences: Sequence[float], alternative: str = TWO_SIDED) -> float:
  """The exact p-value of the Wilcoxon signed-rank test of paired differences.

  The statistic is the sum of the ranks of |d| over the positive differences. Zero differences
  are dropped (Wilcoxon's convention, SciPy's ``zero_method="wilcox"``); tied |d| get
  mid-ranks. Its null distribution, every difference's sign + or - with probability 1/2, is
  enumerated over all 2^n sign assignments (in doubled ranks, integers), so the p-value is
  exact for any n and ties.

  Args:
    differences: the paired differences (e.g. GELU's value minus the baseline's, seed by seed).
    alternative: ``"two-sided"``: the statistic at least as far from its mean as observed;
      ``"less"``: the differences tend to lie below 0; ``"greater"``: above 0.

  Returns:
    The p-value; NaN when no difference is non-zero. With n differences of one sign the
    two-sided p-value is its minimum, 2 / 2^n: 0.0625 for 5 pairs, 0.002 for 10.
  """
  d = np.asarray(differences, np.float64)
  d = d[d != 0]
  if not len(d):
    return math.nan
  ranks2 = _doubled_ranks(np.abs(d))
  ways = _signed_rank_ways(ranks2)
  observed = int(ranks2[d > 0].sum())
  return _exact_p(ways, observed, ranks2.sum() / 2.0, alternative)


def signed_rank_direction(differences: Sequence[float]) -> int:
  """-1 where the signed-rank statistic lies below its null mean (the differences tend below
  0), +1 above, 0 at it (or no difference is non-zero): the side of the two-sided
  :func:`signed_rank_test` the data fall on (zeros dropped, mid-ranks for ties, as there)."""
  d = np.asarray(differences, np.float64)
  d = d[d != 0]
  if not len(d):
    return 0
  ranks2 = _doubled_ranks(np.abs(d))
  return int(np.sign(2 * int(ranks2[d > 0].sum()) - int(ranks2.sum())))


def _exact_p(ways: np.ndarray, observed: int, centre: float, alternative: str) -> float:
  """The exact p of a (doubled) rank statistic: ``ways[s]`` arrangements give the sum ``s``;
  two-sided, the sums at least as far from ``centre`` as ``observed``."""
  sums = np.arange(len(ways))
  if alternative == TWO_SIDED:
    extreme = np.abs(sums - centre) >= abs(observed - centre)
  elif alternative == LESS:
    extreme = sums <= observed
  elif alternative == GREATER:
    extreme = sums >= observed
  else:
    raise ValueError(
      f"alternative {alternative!r}: expected one of {TWO_SIDED}, {LESS}, {GREATER}."
    )
  return float(min(1.0, ways[extreme].sum() / ways.sum()))


def signed_rank_counts(n: int) -> list[int]:
  """How many of the 2^n sign assignments give each signed-rank sum T+ = 0 .. n(n + 1)/2,
  without ties: the coefficients of the product of (1 + q^i) for i = 1..n, in exact integers."""
  poly = [1]
  for i in range(1, n + 1):
    grown = [*poly, *([0] * i)]
    for k, c in enumerate(poly):
      grown[k + i] += c
    poly = grown
  return poly


def walsh_averages(differences: Sequence[float]) -> np.ndarray:
  """The n(n + 1)/2 Walsh averages (d_i + d_j) / 2, i <= j, sorted."""
  d = np.asarray(differences, np.float64)
  i, j = np.triu_indices(len(d))
  return np.sort((d[i] + d[j]) / 2.0)


def walsh_median(differences: Sequence[float]) -> float:
  """The paired Hodges–Lehmann shift: the median of the Walsh averages of the differences."""
  averages = walsh_averages(differences)
  return float(np.median(averages)) if averages.size else math.nan


def paired_interval(
  differences: Sequence[float], confidence: float = CONFIDENCE
) -> tuple[float, float, float]:
  """The exact distribution-free confidence interval of the paired shift (the centre of the
  differences' distribution).

  With the N = n(n + 1)/2 Walsh averages sorted, the interval runs from the k-th to the
  (N + 1 - k)-th, where k is the largest count with P(T+ <= k - 1) <= (1 - confidence) / 2
  under the null distribution of the signed-rank sum (:func:`signed_rank_counts`): it holds
  the centre with probability 1 - 2 P(T+ <= k - 1) (the *achieved* level) for differences
  symmetric about it. It is the set of shifts the two-sided signed-rank test does not reject at
  that level. Every difference counts, zeros included. Too few pairs for any k (5 or fewer at
  95%): (-inf, inf).

  Returns:
    ``(low, high, achieved confidence)``.
  """
  n = len(differences)
  if not n:
    return (math.nan, math.nan, math.nan)
  counts = np.asarray(signed_rank_counts(n), np.float64)
  tail = np.cumsum(counts) / 2.0**n  # tail[t] = P(T+ <= t)
  k = int(np.searchsorted(tail, (1.0 - confidence) / 2.0, side="right"))
  if k == 0:
    return (-math.inf, math.inf, 1.0)
  averages = walsh_averages(differences)
  return (
    float(averages[k - 1]),
    float(averages[len(averages) - k]),
    float(1.0 - 2.0 * tail[k - 1]),
  )


@dataclasses.dataclass(frozen=True)
class Equivalence:
  """The equivalence test of ``a`` and ``b`` within ``margin`` (:func:`equivalence_test`).

  Attributes:
    margin: the largest shift that counts as equivalent.
    p_equivalent: the TOST p-value: the larger of the one-sided rank tests of shift > -margin
      and shift < +margin; small where the shift lies within the margin.
    p_beyond: the two-sided test that the shift lies beyond the margin: twice the smaller of
      the one-sided rank tests of shift > +margin and shift < -margin (at most 1).
    p: the hypothesis' p-value, twice the smaller of the two (at most 1): either decision,
      equivalent or beyond the margin, is then made at the level of one test.
  """

  margin: float
  p_equivalent: float
  p_beyond: float

  @property
  def p(self) -> float:
    return min(1.0, 2.0 * min(self.p_equivalent, self.p_beyond))

  @property
  def equivalent(self) -> bool:
    """Which decision ``p`` stands for: equivalence (True) or a shift beyond the margin."""
    return self.p_equivalent <= self.p_beyond


def equivalence_test(a: Sequence[float], b: Sequence[float], margin: float) -> Equivalence:
  """Two one-sided rank tests (TOST) of whether ``a``'s shift from ``b`` lies within
  ±``margin``, and the test of whether it lies beyond: each one-sided test is the exact rank
  test of ``a`` moved by the margin against ``b``."""
  a = np.asarray(a, np.float64)
  above_low = rank_test(a + margin, b, GREATER)  # H0: shift <= -margin.
  below_high = rank_test(a - margin, b, LESS)  # H0: shift >= +margin.
  beyond_high = rank_test(a - margin, b, GREATER)  # H0: shift <= +margin.
  beyond_low = rank_test(a + margin, b, LESS)  # H0: shift >= -margin.
  return Equivalence(
    margin, max(above_low, below_high), min(1.0, 2.0 * min(beyond_high, beyond_low))
  )


def holm(p_values: Sequence[float]) -> list[float]:
  """Holm's step-down adjusted p-values: the i-th smallest of m p-values times (m - i + 1),
  made non-decreasing in that order and capped at 1. A hypothesis is rejected at level alpha
  under Holm's correction exactly where its adjusted p-value is below alpha."""
  p = np.asarray(p_values, np.float64)
  order = np.argsort(p, kind="stable")
  scaled = (len(p) - np.arange(len(p))) * p[order]
  adjusted = np.empty_like(p)
  adjusted[order] = np.minimum(1.0, np.maximum.accumulate(scaled))
  return adjusted.tolist()


def _one_sided_both(differences: np.ndarray) -> tuple[float, float]:
  """The one-sided signed-rank p ``"less"`` and ``"greater"`` of the same differences, ranked
  once; each 1 where no difference is non-zero (no evidence either way)."""
  d = differences[differences != 0]
  if not len(d):
    return 1.0, 1.0
  ranks2 = _doubled_ranks(np.abs(d))
  ways = _signed_rank_ways(ranks2)
  observed, centre = int(ranks2[d > 0].sum()), ranks2.sum() / 2.0
  return _exact_p(ways, observed, centre, LESS), _exact_p(ways, observed, centre, GREATER)


def paired_equivalence_test(differences: Sequence[float], margin: float) -> Equivalence:
  """:func:`equivalence_test` for paired values: the two one-sided signed-rank tests (TOST) of
  whether the paired shift (the centre of the differences) lies within ±``margin``, and the test
  of whether it lies beyond, each the exact signed-rank test of the differences moved by the
  margin."""
  d = np.asarray(differences, np.float64)
  beyond_low, above_low = _one_sided_both(d + margin)  # H0: shift >= -margin; <= -margin.
  below_high, beyond_high = _one_sided_both(d - margin)  # H0: shift >= +margin; <= +margin.
  return Equivalence(
    margin, max(above_low, below_high), min(1.0, 2.0 * min(beyond_high, beyond_low))
  )
