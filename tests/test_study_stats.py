"""Tests for gelujax.study.stats against SciPy and brute-force enumeration in float64."""

import itertools
import math

import numpy as np
import pytest
import scipy.stats

from gelujax.study import power, stats


def midranks(pooled):
  """Ranks 1..N with ties given the mean of their ranks (SciPy's 'average')."""
  return scipy.stats.rankdata(pooled, method="average")


def enumerate_rank_sums(a, b):
  """Every split of the pooled values into len(a) and len(b): the rank sum of the first part."""
  pooled = np.concatenate([a, b])
  ranks = midranks(pooled)
  return (
    np.array([ranks[list(s)].sum() for s in itertools.combinations(range(len(pooled)), len(a))]),
    ranks[: len(a)].sum(),
    len(a) * (len(pooled) + 1) / 2,
  )


def brute_force_p(a, b, alternative):
  sums, observed, centre = enumerate_rank_sums(np.asarray(a, float), np.asarray(b, float))
  if alternative == "two-sided":
    extreme = np.abs(sums - centre) >= abs(observed - centre) - 1e-9
  elif alternative == "less":
    extreme = sums <= observed + 1e-9
  else:
    extreme = sums >= observed - 1e-9
  return extreme.mean()


@pytest.mark.parametrize("sizes", [(5, 5), (3, 3), (3, 7), (6, 4), (1, 4), (10, 10)])
@pytest.mark.parametrize("alternative", ["two-sided", "less", "greater"])
def test_rank_test_matches_scipy_exact_without_ties(sizes, alternative):
  rng = np.random.default_rng(sum(sizes))
  for shift in (0.0, 0.5, 3.0):
    a, b = rng.normal(size=sizes[0]), rng.normal(shift, size=sizes[1])
    expected = scipy.stats.mannwhitneyu(a, b, alternative=alternative, method="exact").pvalue
    assert stats.rank_test(a, b, alternative) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("alternative", ["two-sided", "less", "greater"])
def test_rank_test_with_ties_matches_enumeration(alternative):
  rng = np.random.default_rng(0)
  for _ in range(10):
    a, b = rng.integers(0, 4, size=5) / 4, rng.integers(1, 5, size=4) / 4
    expected = brute_force_p(a, b, alternative)
    assert stats.rank_test(a, b, alternative) == pytest.approx(expected, rel=1e-12)


def test_rank_test_by_hand():
  # No overlap: only the 2 most extreme of C(10, 5) = 252 splits are as extreme (1 on a side).
  assert stats.rank_test([1, 2, 3, 4, 5], [6, 7, 8, 9, 10]) == pytest.approx(2 / 252)
  assert stats.rank_test([1, 2, 3, 4, 5], [6, 7, 8, 9, 10], "less") == pytest.approx(1 / 252)
  assert stats.rank_test([1, 2, 3, 4, 5], [6, 7, 8, 9, 10], "greater") == 1.0
  assert stats.rank_test([1, 1, 1], [1, 1, 1]) == 1.0
  assert math.isnan(stats.rank_test([], [1.0]))
  with pytest.raises(ValueError, match="alternative"):
    stats.rank_test([1], [2], "sideways")


def test_direction_and_ties():
  assert stats.direction([1, 2, 3], [4, 5, 6]) == -1
  assert stats.direction([4, 5, 6], [1, 2, 3]) == 1
  assert stats.direction([1, 6], [2, 5]) == 0
  assert stats.tied_values([1, 2, 2], [2, 3, 3]) == 2


def test_smallest_p():
  assert stats.smallest_p(5) == pytest.approx(2 / 252)
  assert stats.smallest_p(3) == pytest.approx(0.1)
  assert stats.smallest_p(10) == pytest.approx(2 / 184756)
  assert stats.smallest_p(1) == 1.0


@pytest.mark.parametrize(("m", "n"), [(1, 1), (2, 3), (4, 4), (5, 5), (3, 6)])
def test_mann_whitney_counts_match_enumeration(m, n):
  """U of a split = pairs (i in the m-part, j in the n-part) with rank_i > rank_j."""
  counts = np.zeros(m * n + 1, int)
  for part in itertools.combinations(range(m + n), m):
    rest = [r for r in range(m + n) if r not in part]
    counts[sum(i > j for i in part for j in rest)] += 1
  assert stats.mann_whitney_counts(m, n) == counts.tolist()


def test_hodges_lehmann_is_the_median_of_all_differences():
  a, b = [1.0, 4.0, 9.0], [0.5, 2.0]
  # Differences: 0.5, -1, 3.5, 2, 8.5, 7 -> sorted -1, 0.5, 2, 3.5, 7, 8.5 -> median 2.75.
  assert stats.hodges_lehmann(a, b) == pytest.approx(2.75)


def test_shift_interval_by_hand():
  # 5 vs 5: P(U <= 2) = 4/252 <= 0.025 < P(U <= 3) = 7/252, so k = 3: the 3rd and 23rd of the
  # 25 differences, at level 1 - 8/252.
  a, b = [1, 2, 3, 4, 5], [6, 7, 8, 9, 10]
  low, high, level = stats.shift_interval(a, b)
  diffs = sorted(x - y for x in a for y in b)
  assert (low, high) == (diffs[2], diffs[22]) == (-8, -2)
  assert level == pytest.approx(1 - 8 / 252)
  # 2 vs 2: the smallest tail, 1/6, exceeds 0.025: no interval at 95%.
  assert stats.shift_interval([1, 2], [3, 4]) == (-math.inf, math.inf, 1.0)


@pytest.mark.parametrize(("m", "n"), [(5, 5), (4, 6), (10, 10), (6, 6)])
def test_shift_interval_is_the_inverted_rank_test(m, n):
  """A shift d lies in the interval exactly where the two-sided rank test of a - d against b
  (SciPy's exact p-value) does not reject at the interval's own level."""
  rng = np.random.default_rng(m * n)
  a, b = rng.normal(1.0, 1.0, m), rng.normal(0.0, 1.0, n)
  low, high, level = stats.shift_interval(a, b)
  diffs = np.sort(np.subtract.outer(a, b).ravel())
  midpoints = (diffs[1:] + diffs[:-1]) / 2  # Shifts between differences: no ties.
  for d in [diffs[0] - 1, *midpoints, diffs[-1] + 1]:
    p = scipy.stats.mannwhitneyu(a - d, b, method="exact").pvalue
    assert (low < d < high) == (p > 1 - level + 1e-12), (d, p, low, high)


@pytest.mark.parametrize(("m", "n"), [(5, 5), (3, 4), (6, 6)])
def test_shift_interval_covers_the_true_shift_at_its_level(m, n):
  """Coverage by enumeration: for continuous values differing by a shift, every assignment of
  the pooled ranks to the two samples is equally likely; the interval holds the true shift in
  exactly the share of assignments its level says."""
  base = np.arange(m + n, dtype=float) * 1.7 + 0.3  # Distinct values; the shift is 0.
  covered = []
  for part in itertools.combinations(range(m + n), m):
    rest = [i for i in range(m + n) if i not in part]
    low, high, level = stats.shift_interval(base[list(part)], base[rest])
    covered.append(low <= 0.0 <= high)
  assert np.mean(covered) == pytest.approx(level, abs=1e-12)


def test_equivalence_test_matches_shifted_scipy_tests():
  rng = np.random.default_rng(3)
  a, b = rng.normal(0.0, 1.0, 10), rng.normal(0.2, 1.0, 10)
  margin = 1.5
  result = stats.equivalence_test(a, b, margin)

  def mwu(x, y, alternative):
    return scipy.stats.mannwhitneyu(x, y, alternative=alternative, method="exact").pvalue

  tost = max(mwu(a + margin, b, "greater"), mwu(a - margin, b, "less"))
  beyond = min(1.0, 2 * min(mwu(a - margin, b, "greater"), mwu(a + margin, b, "less")))
  assert result.p_equivalent == pytest.approx(tost)
  assert result.p_beyond == pytest.approx(beyond)
  assert result.p == pytest.approx(min(1.0, 2 * min(tost, beyond)))
  assert result.equivalent and result.p < 0.05
  # Equivalence within the margin <=> the (1 - 2 alpha) interval lies inside it (alpha: the
  # one-sided level TOST reached).
  far = stats.equivalence_test(a + 5.0, b, margin)
  assert not far.equivalent and far.p_beyond < 0.05


def test_holm_by_hand():
  # Sorted p: 0.01, 0.02, 0.03, 0.2 times 4, 3, 2, 1 = 0.04, 0.06, 0.06, 0.2; running maximum
  # keeps them; the original order is restored.
  assert stats.holm([0.03, 0.01, 0.2, 0.02]) == pytest.approx([0.06, 0.04, 0.2, 0.06])
  # Running maximum: 0.01 * 3 = 0.03, then 0.011 * 2 = 0.022 -> 0.03, then 0.9.
  assert stats.holm([0.011, 0.01, 0.9]) == pytest.approx([0.03, 0.03, 0.9])
  assert stats.holm([0.7, 0.6]) == pytest.approx([1.0, 1.0])
  assert stats.holm([]) == []


def test_stats_of_values():
  s = stats.Stats.of([0.05, 0.09, 0.06])
  assert (s.median, s.n) == (pytest.approx(0.06), 3)
  assert s.mean == pytest.approx(0.2 / 3)
  assert s.std == pytest.approx(np.std([0.05, 0.09, 0.06], ddof=1))
  assert stats.Stats.of([]).n == 0 and math.isnan(stats.Stats.of([1.0]).std)


def simulated_power(shift, n, level, rng, trials=400):
  """The share of normal samples (sd 1) shifted by ``shift`` where SciPy's exact two-sided
  rank test rejects at ``level``."""
  hits = 0
  for _ in range(trials):
    a, b = rng.normal(shift, 1.0, n), rng.normal(0.0, 1.0, n)
    hits += scipy.stats.mannwhitneyu(a, b, method="exact").pvalue < level
  return hits / trials


def test_seeds_for_power_reach_about_80_percent_by_simulation():
  """The seeds the normal approximation asks for, from a 10-seed pilot of a shift of 1 sd, give
  the exact test about 80% power (simulated with SciPy's exact test), and fewer seeds less."""
  rng = np.random.default_rng(7)
  # A pilot whose sample shift is close to its true one: normal quantiles, shifted by 1.
  pilot = scipy.stats.norm.ppf((np.arange(10) + 0.5) / 10)
  n = power.seeds_for_power(pilot + 1.0, pilot, level=0.0125)
  assert 10 <= n <= 40
  found = simulated_power(1.0, n, 0.0125, rng)
  assert 0.68 <= found <= 0.92, (n, found)
  assert simulated_power(1.0, max(2, n // 2), 0.0125, rng) < found


def test_seeds_for_power_edge_cases():
  # No shift: no number of seeds decides it; a huge shift: the least seeds that can reach the
  # level at all (2 / C(2n, n) < 0.0125 first at n = 5).
  assert power.seeds_for_power([1, 2, 3], [2, 1, 3], level=0.05) is None
  assert power.seeds_for_power([100, 101, 102], [1, 2, 3], level=0.0125) == 5
  # An equivalence at its margin cannot be decided; well inside it, equivalence needs seeds.
  at_margin = power.seeds_for_power([1.0, 2.0, 3.0], [0.0, 1.0, 2.0], level=0.05, margin=1.0)
  assert at_margin is None
  inside = power.seeds_for_power([0.0, 1.0, 2.0, 3.0], [0.1, 1.1, 2.1, 3.1], level=0.05, margin=3)
  assert inside is not None and inside >= 5


# ------------------------------------------------------------------- the paired counterparts


def brute_force_signed_rank_p(d, alternative):
  """Every one of the 2^n sign assignments of the non-zero differences' SciPy mid-ranks: the
  share whose positive rank sum is as extreme as the observed one."""
  d = np.asarray(d, float)
  d = d[d != 0]
  ranks = scipy.stats.rankdata(np.abs(d))
  observed, centre = ranks[d > 0].sum(), ranks.sum() / 2
  sums = np.array([
    sum(r for r, s in zip(ranks, signs, strict=True) if s)
    for signs in itertools.product((0, 1), repeat=len(d))
  ])  # fmt: skip
  if alternative == "two-sided":
    extreme = np.abs(sums - centre) >= abs(observed - centre) - 1e-9
  elif alternative == "less":
    extreme = sums <= observed + 1e-9
  else:
    extreme = sums >= observed - 1e-9
  return extreme.mean()


@pytest.mark.parametrize("n", [1, 4, 5, 6, 10, 12])
@pytest.mark.parametrize("alternative", ["two-sided", "less", "greater"])
def test_signed_rank_test_matches_scipy_exact_without_ties(n, alternative):
  rng = np.random.default_rng(n)
  for centre in (0.0, 0.4, 2.0):
    d = rng.normal(centre, 1.0, n)
    expected = scipy.stats.wilcoxon(d, alternative=alternative, method="exact").pvalue
    assert stats.signed_rank_test(d, alternative) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("alternative", ["two-sided", "less", "greater"])
def test_signed_rank_test_with_ties_and_zeros_matches_enumeration(alternative):
  rng = np.random.default_rng(1)
  for _ in range(10):
    d = rng.integers(-3, 4, size=9) / 4  # Tied |d| and zeros.
    if not np.any(d):
      continue
    expected = brute_force_signed_rank_p(d, alternative)
    assert stats.signed_rank_test(d, alternative) == pytest.approx(expected, rel=1e-12)


def test_signed_rank_test_by_hand():
  # One sign: only the 2 most extreme of 2^n assignments (1 on a side).
  assert stats.signed_rank_test([1, 2, 3, 4, 5]) == pytest.approx(2 / 32)
  assert stats.signed_rank_test([-1, -2, -3, -4, -5] * 2) == pytest.approx(2 / 1024)
  assert stats.signed_rank_test([-1, -2, -3, -4, -5], "less") == pytest.approx(1 / 32)
  assert stats.signed_rank_test([-1, -2, -3, -4, -5], "greater") == 1.0
  # A zero difference is dropped: the same p as without it.
  assert stats.signed_rank_test([0, 1, 2, 3, 4, 5]) == stats.signed_rank_test([1, 2, 3, 4, 5])
  assert math.isnan(stats.signed_rank_test([0.0, 0.0]))
  with pytest.raises(ValueError, match="alternative"):
    stats.signed_rank_test([1], "sideways")


@pytest.mark.parametrize("n", [1, 2, 5, 8])
def test_signed_rank_counts_match_enumeration(n):
  counts = np.zeros(n * (n + 1) // 2 + 1, int)
  for signs in itertools.product((0, 1), repeat=n):
    counts[sum(r for r, s in zip(range(1, n + 1), signs, strict=True) if s)] += 1
  assert stats.signed_rank_counts(n) == counts.tolist()


def test_walsh_median_by_hand():
  # Walsh averages of 1, 2, 9: 1, 1.5, 5, 2, 5.5, 9 -> sorted 1, 1.5, 2, 5, 5.5, 9 -> 3.5.
  assert stats.walsh_averages([1, 2, 9]).tolist() == [1, 1.5, 2, 5, 5.5, 9]
  assert stats.walsh_median([1, 2, 9]) == pytest.approx(3.5)
  assert math.isnan(stats.walsh_median([]))


def test_paired_interval_by_hand():
  # 10 pairs: P(T+ <= 8) = 25/1024 <= 0.025 < P(T+ <= 9) = 30/1024, so k = 9: the 9th and the
  # 47th of the 55 Walsh averages, at level 1 - 50/1024.
  d = np.arange(1.0, 11.0)
  low, high, level = stats.paired_interval(d)
  averages = stats.walsh_averages(d)
  assert (low, high) == (averages[8], averages[46])
  assert level == pytest.approx(1 - 50 / 1024)
  # 5 pairs: the smallest tail, 1/32, exceeds 0.025: no interval at 95%.
  assert stats.paired_interval([1, 2, 3, 4, 5]) == (-math.inf, math.inf, 1.0)


@pytest.mark.parametrize("n", [6, 8, 10])
def test_paired_interval_is_the_inverted_signed_rank_test(n):
  """A shift s lies in the interval exactly where SciPy's exact two-sided signed-rank test of
  d - s does not reject at the interval's own level."""
  rng = np.random.default_rng(n)
  d = rng.normal(0.5, 1.0, n)
  low, high, level = stats.paired_interval(d)
  averages = stats.walsh_averages(d)
  midpoints = (averages[1:] + averages[:-1]) / 2
  for s in [averages[0] - 1, *midpoints, averages[-1] + 1]:
    p = scipy.stats.wilcoxon(d - s, method="exact").pvalue
    assert (low < s < high) == (p > 1 - level + 1e-12), (s, p, low, high)


@pytest.mark.parametrize("n", [6, 7, 9])
def test_paired_interval_covers_the_centre_at_its_level(n):
  """Coverage by enumeration: for differences symmetric about 0, each of the 2^n sign
  assignments of the same magnitudes is equally likely; the interval holds 0 in exactly the
  share its level says."""
  magnitudes = np.arange(1, n + 1) * 1.3 + 0.1
  covered = []
  for signs in itertools.product((-1, 1), repeat=n):
    low, high, level = stats.paired_interval(magnitudes * np.array(signs))
    covered.append(low <= 0.0 <= high)
  assert np.mean(covered) == pytest.approx(level, abs=1e-12)
