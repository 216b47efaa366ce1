"""Tests for gelujax.study.verdicts: each verdict from values whose tests SciPy computes."""

import math

import numpy as np
import pytest
import scipy.stats

from gelujax.paper import EQUIVALENT, HIGHER, LOWER, PRIMARY, Hypothesis
from gelujax.study import power, verdicts
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
  assert verdict.seeds_needed == power.seeds_for_power(gelu[:3], close[:3], level=0.05, margin=0.02)


def test_comparison_holds_the_shift_interval_and_p():
  c = verdicts.Comparison.of([1, 2, 3, 4, 5], [6, 7, 8, 9, 10])
  assert (c.shift, c.low, c.high) == (-5, -8, -2)
  assert c.p == pytest.approx(2 / 252) and c.ties == 0
  assert (c.median_a, c.median_b) == (3, 8)
  assert c.to_json()["a"] == [1, 2, 3, 4, 5]


def candidates(h, pairs):
  """``pairs``: (lrs, gelu values, baseline values) or (lrs, pending reason)."""
  return [
    verdicts.Candidate(lrs, rest[0] if len(rest) == 1 else Evidence(*rest, "seeds", lrs))
    for lrs, *rest in pairs
  ]


def test_each_pair_of_candidate_lrs_is_a_test_of_the_family():
  """Holm runs over every pair of every hypothesis: 3 pairs and 1 pending hypothesis make a
  family of 4 tests; a verdict stands only where every pair agrees."""
  h, other = hypothesis(), hypothesis(baseline="elu")
  low, high = [1, 2, 3, 4, 5], [6, 7, 8, 9, 10]

  def judged(pairs):
    return verdicts.judge(
      [h, other], lambda x: candidates(h, pairs) if x is h else "pending: evaluation seeds"
    )

  # Below at every pair: confirmed, each pair's Holm p = 4 x 2/252 (the 4 tests share it).
  first, second = judged([((1e-3, 1e-3), low, high), ((1e-3, 1e-4), low, high),
                          ((1e-4, 1e-3), low, high)])  # fmt: skip
  assert first.verdict == verdicts.CONFIRMED
  assert [o.holm for o in first.outcomes] == pytest.approx([4 * 2 / 252] * 3)
  assert [o.learning_rates for o in first.outcomes] == [(1e-3, 1e-3), (1e-3, 1e-4), (1e-4, 1e-3)]
  assert (first.comparison, first.single) == (None, None) and math.isnan(first.p)
  assert second.verdict == verdicts.PENDING and second.holm == 1.0
  # Below at one pair, above at another: depends on the learning rate.
  (first, _) = judged([((1e-3, 1e-3), low, high), ((1e-4, 1e-3), high, low)])
  assert first.verdict == verdicts.DEPENDS
  assert [o.verdict for o in first.outcomes] == [verdicts.CONFIRMED, verdicts.REFUTED]
  # Confirmed at one pair, undecided at another (Holm 3 x 2/252 = 0.024; the other p = 1).
  (first, _) = judged([((1e-3, 1e-3), low, high), ((1e-4, 1e-3), [1, 2, 3], [1, 2, 3])])
  assert first.verdict == verdicts.DEPENDS
  # A pair still waiting for its seeds: pending, whatever the others say; it counts as p = 1.
  (first, _) = judged([((1e-3, 1e-3), low, high), ((1e-4, 1e-3), "pending: lr 1e-4 of x")])
  assert first.verdict == verdicts.PENDING
  assert [o.verdict for o in first.outcomes] == [verdicts.CONFIRMED, verdicts.PENDING]
  assert first.outcomes[1].seeds == "pending: lr 1e-4 of x" and first.outcomes[1].p == 1.0
  assert first.outcomes[0].holm == pytest.approx(3 * 2 / 252)
  assert first.pending() == [first.outcomes[1]]


def test_a_hypothesis_without_runs_has_no_pairs_and_counts_once():
  h, other = hypothesis(), hypothesis(baseline="elu")
  first, second = verdicts.judge(
    [h, other],
    lambda x: Evidence((1, 2, 3, 4, 5), (6, 7, 8, 9, 10), "s") if x is h else "not run: no elu",
  )
  assert second.outcomes == () and second.verdict == verdicts.PENDING
  assert (second.seeds, second.p, second.holm) == ("not run: no elu", 1.0, 1.0)
  assert first.holm == pytest.approx(2 * 2 / 252)


def test_paired_comparison_against_scipy():
  """The pairs are the seeds both sides have; the signed-rank p is SciPy's exact one, the
  shift the median of the Walsh averages of the differences, by hand."""
  rng = np.random.default_rng(5)
  a = dict(zip(range(100, 110), rng.normal(0.0, 1.0, 10), strict=True))
  b = {seed: value + rng.normal(0.3, 0.2) for seed, value in a.items() if seed != 104}
  b[200] = 9.0  # Not a seed of a: unpaired.
  e = Evidence(tuple(a.values()), tuple(b.values()), "s", gelu_seeds=tuple(a),
               baseline_seeds=tuple(b))  # fmt: skip
  paired = e.paired()
  seeds = [s for s in a if s != 104]
  d = np.array([a[s] - b[s] for s in seeds])
  assert paired.seeds == tuple(seeds)
  assert paired.differences == pytest.approx(d)
  assert paired.p == pytest.approx(scipy.stats.wilcoxon(d, method="exact").pvalue, rel=1e-12)
  walsh = [(d[i] + d[j]) / 2 for i in range(len(d)) for j in range(i, len(d))]
  assert paired.shift == pytest.approx(np.median(walsh))
  assert paired.correlation == pytest.approx(
    np.corrcoef([a[s] for s in seeds], [b[s] for s in seeds])[0, 1]
  )
  assert paired.zeros == 0 and paired.low < paired.shift < paired.high
  # Without the seeds, no pairs; judged, the outcome carries the pairs.
  assert Evidence((1.0,), (2.0,), "s").paired() is None
  (verdict,) = verdicts.judge([hypothesis()], lambda _: e)
  assert verdict.single.paired == paired
