"""The one decision rule (`gelujax.study.judge`), against Holm's correction and the words worked
out by hand, and the judges of every study deciding by it."""

import pytest

from gelujax.study import judge


def test_holm_then_below_the_level_then_the_claims_words():
  """Four tests at 0.05. Holm by hand: sorted p 0.01, 0.02, 0.03, (pending) 1 times 4, 3, 2, 1:
  0.04, 0.06, 0.06 (kept monotone), 1. So only the first is decided."""
  family = [
    judge.Test(0.02, judge.LOWER, side=-1),
    judge.Test(0.01, judge.LOWER, side=+1),
    judge.Test(0.03, judge.EITHER, within=True),
    judge.Test(0.5, judge.WITHIN, pending=True),
  ]
  found = judge.decide(family, 0.05)
  assert [d.holm for d in found] == pytest.approx([0.06, 0.04, 0.06, 1.0])
  assert [d.verdict for d in found] == [
    judge.INCONCLUSIVE, judge.REFUTED, judge.INCONCLUSIVE, judge.PENDING
  ]  # fmt: skip
  assert [d.decided for d in found] == [False, True, False, False]


@pytest.mark.parametrize(
  ("test", "verdict"),
  [
    (judge.Test(0.001, judge.LOWER, side=-1), judge.CONFIRMED),
    (judge.Test(0.001, judge.LOWER, side=+1), judge.REFUTED),
    (judge.Test(0.001, judge.HIGHER, side=+1), judge.CONFIRMED),
    (judge.Test(0.001, judge.HIGHER, side=0), judge.REFUTED),
    (judge.Test(0.001, judge.WITHIN, within=True), judge.EQUIVALENT),
    (judge.Test(0.001, judge.WITHIN, within=False), judge.REFUTED),
    (judge.Test(0.001, judge.EITHER, within=True), judge.EQUIVALENT),
    (judge.Test(0.001, judge.EITHER, within=False), judge.DIFFERENT),
  ],
)
def test_a_decided_test_says_what_its_claim_makes_of_the_finding(test, verdict):
  assert judge.decide([test]) == [judge.Decision(0.001, verdict)]


def test_a_p_at_the_level_is_not_below_it():
  """The boundary of every study: below the level decides, at it does not."""
  assert judge.decide([judge.Test(0.05, judge.LOWER, side=-1)], 0.05)[0].verdict == (
    judge.INCONCLUSIVE
  )
  assert judge.decide([judge.Test(0.0499, judge.LOWER, side=-1)], 0.05)[0].verdict == (
    judge.CONFIRMED
  )


def test_an_unknown_claim_is_refused():
  with pytest.raises(ValueError, match="claim is one of lower, higher, equivalent, either"):
    judge.Test(0.01, "better")


def test_every_study_judges_by_the_one_rule(monkeypatch):
  """The paper's, the forms', the re-test's judges all decide through `judge.decide`: a rule
  that decides nothing makes each of them decide nothing."""
  import numpy as np

  from gelujax.paper import LOWER, Hypothesis
  from gelujax.study import confirm, forms, verdicts

  calls = []
  original = judge.decide

  def nothing(family, alpha=0.05):
    calls.append(len(family))
    return [judge.Decision(1.0, judge.PENDING if t.pending else judge.INCONCLUSIVE) for t in family]

  monkeypatch.setattr(judge, "decide", nothing)
  h = Hypothesis("t", "primary", "best.test_error", "error", "gelu", "relu", LOWER)
  values = {"gelu": dict(enumerate(np.arange(10.0))), "relu": dict(enumerate(np.arange(10.0) + 5))}
  assert confirm.judge_family([h], values)[0].verdict == judge.INCONCLUSIVE
  evidence = verdicts.Evidence(tuple(np.arange(10.0)), tuple(np.arange(10.0) + 5), "seeds 0–9")
  assert verdicts.judge([h], lambda _: evidence)[0].verdict == judge.INCONCLUSIVE
  metric = forms.Metric("best.test_error", "error", 0.5)
  c = forms.Comparison("gelu_tanh", "gelu", "float32", 1e-3, metric)
  o = forms.paired_outcome(c, dict(enumerate(np.zeros(10))), dict(enumerate(np.zeros(10) + 1e-3)))
  assert forms.judge([o])[0].verdict == judge.INCONCLUSIVE
  assert calls == [1, 1, 1]
  monkeypatch.setattr(judge, "decide", original)
  assert confirm.judge_family([h], values)[0].verdict == judge.CONFIRMED
  assert forms.judge([o])[0].verdict == judge.EQUIVALENT
