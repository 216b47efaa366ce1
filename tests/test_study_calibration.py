"""Tests for gelujax.study.calibration: the sensitivity bootstrap against one computed here with
NumPy's same draws and the signed-rank tests enumerated by hand; the control's rule and the
status at hand-made numbers; the closeness against NumPy and counts by hand."""

from __future__ import annotations

import itertools
import math
import statistics

import numpy as np
import pytest
import scipy.stats

from gelujax.study import calibration

D = np.array([3.0, -1.0, 4.0, 1.0, -5.0, 9.0, 2.0, -6.0])  # mean 7/8: exact in binary


def one_sided(d, greater):
  """The exact one-sided signed-rank p, every sign assignment of the non-zero |d| enumerated
  (zeros dropped, mid-ranks for ties, as SciPy ranks); 1 where none is non-zero."""
  d = d[d != 0]
  if not len(d):
    return 1.0
  ranks = scipy.stats.rankdata(np.abs(d))
  observed = ranks[d > 0].sum()
  signs = np.array(list(itertools.product((0, 1), repeat=len(d))))
  sums = signs @ ranks
  return float(np.mean(sums >= observed - 1e-9) if greater else np.mean(sums <= observed + 1e-9))


def decide_by_hand(d, margin, level):
  p_equivalent = max(one_sided(d + margin, True), one_sided(d - margin, False))
  p_beyond = min(1.0, 2 * min(one_sided(d - margin, True), one_sided(d + margin, False)))
  if min(1.0, 2 * min(p_equivalent, p_beyond)) < level:
    return "equivalent" if p_equivalent <= p_beyond else "different"
  return "inconclusive"


def test_the_sensitivity_is_the_bootstrap_judged_by_the_paired_tost():
  """200 resamples of D centred at its mean (NumPy's default_rng(0), the same draws at every
  shift), moved by 0, 1 and 2 margins of 4 and judged at 0.05 by the TOST enumerated here: the
  shares equal the module's exactly; and 2000 resamples by default, seed 0, the same twice."""
  margin, level, resamples = 4.0, 0.05, 200
  drawn = np.random.default_rng(0).integers(0, len(D), size=(resamples, len(D)))
  centred = D - D.mean()
  want = {
    k: [decide_by_hand(centred[i] + k * margin, margin, level) for i in drawn] for k in (0, 1, 2)
  }
  found = calibration.sensitivity(D, margin, level, resamples=resamples)
  assert found.equivalent_at_zero == want[0].count("equivalent") / resamples
  assert found.different == {k: want[k].count("different") / resamples for k in (1, 2)}
  assert found.calibrates == (want[2].count("different") / resamples >= 0.8)
  assert (calibration.RESAMPLES, calibration.BOOTSTRAP_SEED) == (2000, 0)
  assert calibration.sensitivity(D, margin, level) == calibration.sensitivity(D, margin, level)


def test_a_wide_spread_does_not_calibrate_and_a_narrow_one_does():
  """Differences of SD about 3 margins: a 2-margin shift is found different rarely, so the
  sensitivity does not calibrate; SD about a tenth of a margin: always."""
  wide = np.array([30.0, -25, 12, -40, 8, 33, -19, 2, -11, 27])
  narrow = wide / 100
  assert not calibration.sensitivity(wide, 10.0, 0.025, resamples=100).calibrates
  found = calibration.sensitivity(narrow, 10.0, 0.025, resamples=100)
  assert found.calibrates and found.different[2] == 1.0 and found.equivalent_at_zero == 1.0


@pytest.mark.parametrize(
  ("verdict", "shift", "calibrates"),
  [("different", 2.9, True), ("different", -3.0, True), ("different", 3.1, False),
   ("inconclusive", 1.0, False), ("equivalent", 0.5, False)],
)  # fmt: skip
def test_a_control_calibrates_only_when_different_within_three_margins(verdict, shift, calibrates):
  assert calibration.control_calibrates(verdict, shift * 10.0, 10.0) == calibrates


def test_the_status_names_what_calibrates():
  yes = calibration.Sensitivity(10, 0.05, 1.0, {1: 0.1, 2: 0.8})
  no = calibration.Sensitivity(10, 0.05, 1.0, {1: 0.1, 2: 0.79})
  assert calibration.status(True, no) == "calibrated by the control"
  assert calibration.status(False, yes) == "calibrated by its own sensitivity"
  assert (
    calibration.status(False, no) == calibration.status(False, None) == ("control uncalibrated")
  )


def test_the_closeness_against_numpy_and_by_hand():
  """Seeds 0-4 (seed 4's second value NaN: left out): the correlation NumPy's, the SDs the
  statistics module's, 2 of 4 pairs with the same best epoch; a correlation of 0.95 is nearly
  one network, one of 0.5 not."""
  first = {0: 1.0, 1: 2.0, 2: 3.0, 3: 4.0, 4: 9.0}
  second = {0: 1.5, 1: 1.8, 2: 3.3, 3: 3.9, 4: math.nan}
  found = calibration.closeness(first, second, {0: 3, 1: 4, 2: 5, 3: 6}, {0: 3, 1: 5, 2: 5, 3: 7})
  a, b = [1.0, 2.0, 3.0, 4.0], [1.5, 1.8, 3.3, 3.9]
  assert found.pairs == 4 and found.same_epoch == 2
  assert found.correlation == pytest.approx(np.corrcoef(a, b)[0, 1], rel=1e-12)
  assert found.sd_first == pytest.approx(statistics.stdev(a))
  assert found.sd_second == pytest.approx(statistics.stdev(b))
  assert found.sd_paired == pytest.approx(
    statistics.stdev([x - y for x, y in zip(a, b, strict=True)])
  )
  assert found.nearly_one
  far = calibration.closeness({0: 1.0, 1: 2.0, 2: 3.0}, {0: 2.0, 1: 1.0, 2: 3.0})
  assert far.correlation == pytest.approx(0.5) and not far.nearly_one and far.same_epoch is None
