"""Tests for gelujax.study.findings: each wording rule on statistics chosen by hand (the committed
results' lines are re-derived in tests/test_results.py)."""

import pytest

from gelujax.paper import HYPOTHESES
from gelujax.study import findings, verdicts
from gelujax.study.verdicts import Evidence


def test_a_claim_whose_paper_values_contradict_it_says_so():
  h = next(h for h in HYPOTHESES["mnist"] if h.baseline == "relu" and h.dropout == 0.0)
  assert findings.contradiction_line("mnist", h) == (
    "- Paper values [Fig. 2, gelu_tanh below relu: final train log loss (nats), dropout 0]: the "
    "paper's text claims gelu_tanh below relu, but its values, gelu_tanh 0.008 vs relu 0.007, put "
    "gelu_tanh above relu: the values quoted contradict the claim's direction; the hypothesis "
    "tests the text's claim."
  )


def test_verdict_words_and_lines():
  h = HYPOTHESES["mnist"][0]
  (undecided,) = verdicts.judge([h], lambda _: Evidence((1.0, 2.0, 3.0), (2.0, 1.0, 3.0), "s"))
  # Equal samples: shift 0, which no number of seeds decides.
  assert findings.verdict_words(undecided) == (
    "inconclusive: no number of seeds decides the observed shift of 0"
  )
  (alone,) = verdicts.judge([h], lambda _: Evidence((1.0,), (2.0,), "s"))
  assert findings.verdict_words(alone) == (
    "inconclusive: too few seeds to estimate the seeds a side 80% power would need"
  )
  (decided,) = verdicts.judge([h], lambda _: Evidence((1, 2, 3, 4, 5), (6, 7, 8, 9, 10), "s"))
  assert findings.hypothesis_line("mnist", 1, decided) == (
    "- Hypothesis [Fig. 2, primary 1]: gelu_tanh below relu: final train log loss (nats), "
    "dropout 0: confirmed (gelu_tanh 3 vs relu 8, s; shift -5 [-8, -2], p = 0.0079, Holm 0.0079)."
  )
  (pending,) = verdicts.judge([h], lambda _: "pending: evaluation seeds not trained")
  assert findings.verdict_words(pending) == "pending: evaluation seeds not trained"


def test_an_equivalence_verdict_line_gives_the_verdicts_p_not_its_shifts():
  """The line's p is the one the verdict and its table row rest on: an equivalence claim's
  TOST-or-beyond p (twice the smaller one-sided p), not the rank-sum p of the shift."""
  h = next(h for h in HYPOTHESES["mnist_noise"] if h.direction == "equivalent")
  gelu, relu = (0.50, 0.51, 0.52, 0.53, 0.54), (0.40, 0.41, 0.42, 0.43, 0.44)
  (v,) = verdicts.judge([h], lambda _: Evidence(gelu, relu, "s"))
  assert (f"{v.comparison.p:.2g}", f"{v.p:.2g}", v.verdict) == ("0.0079", "0.016", "refuted")
  assert findings.hypothesis_line("mnist_noise", 3, v) == (
    "- Hypothesis [Fig. 3, primary 3]: relu within ±0.02 of gelu_tanh: test accuracy under "
    "noise, dropout 0, a = 1: refuted (gelu_tanh 0.52 vs relu 0.42, s; shift 0.1 [0.07, 0.13], "
    "p = 0.016, Holm 0.016)."
  )


def test_curve_lines():
  spike = {"seed": 0, "epoch": 20.0, "value": 0.1072, "running_min": 0.01573, "ratio": 6.815}
  assert findings.curve_line("elu", 1e-3, "spike", spike) == (
    "- Final value on a spike [elu, lr 0.001, seed 0]: its training loss at the last evaluation "
    "(epoch 20), 0.1072, is 6.82x its running minimum 0.01573: every final value of this member "
    "was taken on that spike."
  )
  improving = {"median": 46.0, "at_last": 1, "members": 5, "epoch": 50.0}
  assert findings.curve_line("gelu", 1e-3, "improving", improving).startswith(
    "- Still improving [gelu, lr 0.001]: the median best epoch is 46 of 50, after 80% of training;"
  )
  with pytest.raises(ValueError, match="kind 'other'"):
    findings.curve_line("gelu", 1e-3, "other", {})


def test_format_number():
  assert findings.format_number(0.123456) == "0.1235"
  assert findings.format_number(0.0612, 100) == "6.12"
  assert findings.format_number(None) == findings.format_number(float("nan")) == "–"
  assert findings.format_number(float("-inf")) == "-inf"
