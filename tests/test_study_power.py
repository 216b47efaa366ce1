"""The one SD bound every study sizes with: its chi-square quantile, computed without SciPy,
against SciPy's (an independent implementation), and the bound's defining property."""

import math

import numpy as np
import pytest
import scipy.stats

from gelujax.study import power, stats


@pytest.mark.parametrize("k", [1, 2, 3, 9, 29, 59, 200, 2000])
@pytest.mark.parametrize("p", [1e-6, 0.05, 0.2, 0.5, 0.8, 0.975, 1 - 1e-6])
def test_the_chi_square_quantile_is_scipys(k, p):
  assert power.chi2_quantile(p, k) == pytest.approx(scipy.stats.chi2.ppf(p, k), rel=1e-10)
  assert power.chi2_cdf(scipy.stats.chi2.ppf(p, k), k) == pytest.approx(p, rel=1e-10)


def test_the_sd_bound_is_the_chi_square_bound():
  """sqrt(k / q), q the chi-square quantile of k = n - 1 at 1 - confidence: P(chi2_k <= k /
  f^2) is 1 - confidence, by SciPy's cdf; by hand at 4 pairs, sqrt(3 / 1.005174)."""
  for n in (2, 3, 4, 10, 30, 60):
    k = n - 1
    factor = power.sd_upper_factor(n, 0.8)
    assert factor == pytest.approx(math.sqrt(k / scipy.stats.chi2.ppf(0.2, k)), rel=1e-10)
    assert scipy.stats.chi2.cdf(k / factor**2, k) == pytest.approx(0.2, rel=1e-9)
  assert power.sd_upper_factor(4, 0.8) == pytest.approx(math.sqrt(3 / 1.005174), rel=1e-6)
  assert math.isnan(power.sd_upper_factor(1, 0.8))


def test_a_pilots_pairs_at_the_bound_widen_its_spread_by_the_chi_square_factor():
  """The shift stays the differences' Walsh median; their SD grows by the chi-square factor
  (SciPy's), so the pairs that find the shift different are the normal approximation's
  ((z(1 - level/2) + z(0.8)) SD f sqrt(pi/3) / shift)^2, by hand here; and the answer in tens."""
  d = [3.0, -2.0, 5.0, -1.0, 4.0, 1.0, -3.0, 6.0, 0.0, 2.0]  # 41 and 68 pairs: above the floor
  shift = float(np.median([(d[i] + d[j]) / 2 for i in range(10) for j in range(i, 10)]))
  f = math.sqrt(9 / scipy.stats.chi2.ppf(0.2, 9))
  z = scipy.stats.norm.ppf(1 - 0.025 / 2) + scipy.stats.norm.ppf(0.8)
  expected = [
    math.ceil((z * np.std(d, ddof=1) * g * math.sqrt(math.pi / 3) / shift) ** 2) for g in (1, f)
  ]
  assert list(power.pairs_at_bound(d, level=0.025, margin=None)) == expected
  assert expected[1] > expected[0]
  assert power.in_tens(expected[1]) == 10 * math.ceil(expected[1] / 10)
  assert power.in_tens(None) == 10 * math.ceil(stats.MAX_SEEDS / 10)


def test_bad_arguments_are_refused():
  for p, k in ((0.0, 3), (1.0, 3), (0.5, 0)):
    with pytest.raises(ValueError, match="chi2_quantile needs"):
      power.chi2_quantile(p, k)


def test_rendering_a_study_needs_no_scipy():
  """The study package imports SciPy nowhere (pyproject does not require it)."""
  import pathlib

  root = pathlib.Path(power.__file__).parent
  found = [p.name for p in root.rglob("*.py") if "scipy" in p.read_text()]
  assert found == []
