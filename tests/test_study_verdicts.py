"""Tests for gelujax.study.verdicts: each verdict from values whose tests SciPy computes."""

import numpy as np
import pytest
import scipy.stats

from gelujax.paper import EQUIVALENT, HIGHER, LOWER, PRIMARY, Hypothesis
from gelujax.study import stats, verdicts
from gelujax.study.verdicts import Evidence


def hypothesis(direction=LOWER, baseline="relu", margin=None, metric="final.train_loss"):
  return Hypothesis(
    "mnist", PRIMARY, metric, "loss", "gelu_tanh", baseline, direction, 0.0, margin=margin
  )


def judge_one(h, gelu, baseline, others=()):
  """Judges ``h`` in a family with ``others`` (hypotheses whose evidence is pending)."""
  family = [h, *others]
  return verdicts.judge(
    family, lambda x: Evidence(tuple(gelu), tuple(baseline), "seeds") if x is h else "pending: x"
  )


LOW, HIGH = list(range(10)), list(range(20, 30))


@pytest.mark.parametrize(
  ("direction", "gelu", "baseline", "expected"),
  [
    (LOWER, LOW, HIGH, verdicts.CONFIRMED),
    (LOWER, HIGH, LOW, verdicts.REFUTED),
    (HIGHER, HIGH, LOW, verdicts.CONFIRMED),
    (HIGHER, LOW, HIGH, verdicts.REFUTED),
  ],
)
def test_confirmed_and_refuted(direction, gelu, baseline, expected):
  (verdict,) = judge_one(hypothesis(direction), gelu, baseline)
  p = scipy.stats.mannwhitneyu(gelu, baseline, method="exact").pvalue
  assert verdict.p == pytest.approx(p) and verdict.holm == pytest.approx(p)
  assert verdict.verdict == expected and verdict.seeds_needed is None


def test_holm_counts_pending_hypotheses_as_p_one():
  # 5 seeds a side apart: p = 2/252 = 0.0079; among 4 hypotheses (3 pending): Holm 4 x 0.0079 =
  # 0.032 < 0.05, confirmed; among 7: 0.056, inconclusive.
  h = hypothesis()
  others = [hypothesis(baseline=f"b{i}") for i in range(3)]
  judged = judge_one(h, [1, 2, 3, 4, 5], [6, 7, 8, 9, 10], others)
  assert judged[0].holm == pytest.approx(4 * 2 / 252) and judged[0].verdict == verdicts.CONFIRMED
  assert [v.verdict for v in judged[1:]] == [verdicts.PENDING] * 3
  assert [v.seeds for v in judged[1:]] == ["pending: x"] * 3
  assert [v.holm for v in judged[1:]] == [1.0] * 3
  others = [hypothesis(baseline=f"b{i}") for i in range(6)]
  (first, *_) = judge_one(h, [1, 2, 3, 4, 5], [6, 7, 8, 9, 10], others)
  assert first.holm == pytest.approx(7 * 2 / 252)
  assert first.verdict == verdicts.INCONCLUSIVE
  # The seeds needed, from the normal approximation at 0.05 / 7 (by hand with SciPy's normal):
  # pooled sd of 1..5 and 6..10 is sqrt(2.5); shift -5.
  z = scipy.stats.norm.ppf(1 - 0.05 / 7 / 2) + scipy.stats.norm.ppf(0.8)
  expected = int(np.ceil(2 * (np.sqrt(2.5 * np.pi / 3) * z / 5) ** 2))
  floor = next(n for n in range(1, 100) if 2 / scipy.special.comb(2 * n, n) < 0.05 / 7)
  assert first.seeds_needed == max(expected, floor)


def test_equivalence_verdicts():
  rng = np.random.default_rng(0)
  gelu = rng.normal(0.50, 0.005, 10)
  close = rng.normal(0.501, 0.005, 10)
  (verdict,) = judge_one(hypothesis(EQUIVALENT, margin=0.02, metric="accuracy@1"), gelu, close)
  assert verdict.verdict == EQUIVALENT
  assert verdict.p == pytest.approx(verdict.equivalence.p)
  # Far apart (0.1 against a margin of 0.02): refuted.
  far = rng.normal(0.6, 0.005, 10)
  (verdict,) = judge_one(hypothesis(EQUIVALENT, margin=0.02, metric="accuracy@1"), gelu, far)
  assert verdict.verdict == verdicts.REFUTED and not verdict.equivalence.equivalent
  # 3 seeds a side cannot show either: inconclusive, with the seeds that would.
  (verdict,) = judge_one(
    hypothesis(EQUIVALENT, margin=0.02, metric="accuracy@1"), gelu[:3], close[:3]
  )
  assert verdict.verdict == verdicts.INCONCLUSIVE
  assert verdict.seeds_needed == stats.seeds_for_power(gelu[:3], close[:3], level=0.05, margin=0.02)


def test_comparison_holds_the_shift_interval_and_p():
  c = verdicts.Comparison.of([1, 2, 3, 4, 5], [6, 7, 8, 9, 10])
  assert (c.shift, c.low, c.high) == (-5, -8, -2)
  assert c.p == pytest.approx(2 / 252) and c.ties == 0
  assert (c.median_a, c.median_b) == (3, 8)
  assert c.to_json()["a"] == [1, 2, 3, 4, 5]
