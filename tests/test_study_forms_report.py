"""Tests for the words of the GELU forms study's report (gelujax.study.forms_report) on
hand-made outcomes: what its findings count, flag and say, without training anything."""

from __future__ import annotations

import dataclasses

import numpy as np

from gelujax.study import forms, forms_report, stats


def outcome(first, second, lr, d, metric=forms.DESIGN.metrics[0], dtype="float32"):
  c = forms.Comparison(first, second, dtype, lr, metric, control=forms.CONTROL in (first, second))
  return forms.paired_outcome(
    c, dict(enumerate(np.zeros(len(d)) + d)), dict.fromkeys(range(len(d)), 0.0)
  )


def test_an_inconclusive_cell_says_more_than_the_largest_count_tried(monkeypatch):
  """Where no count up to stats.MAX_SEEDS decides, the cell says "more than N pairs" with N the
  code's, not "no number of pairs decides" (which holds only for a shift exactly at the
  margin)."""
  noisy = np.array([0.004, -0.004, 0.003, -0.003, 0.0, 0.001, -0.002, 0.002, 0.005, -0.005])
  (found,) = forms.judge([outcome("gelu_sigmoid", "gelu_tanh", 1e-3, noisy)])
  assert found.verdict == forms.INCONCLUSIVE and found.pairs_needed is not None
  monkeypatch.setattr(stats, "MAX_SEEDS", found.pairs_needed - 1)
  (found,) = forms.judge([outcome("gelu_sigmoid", "gelu_tanh", 1e-3, noisy)])
  assert found.pairs_needed is None
  words = forms_report.verdict_words(found)
  assert f"more than {stats.MAX_SEEDS} pairs would decide" in words, words
  at_margin = np.array([0.002] * 5 + [0.001, 0.003] * 2 + [0.002])
  (found,) = forms.judge([outcome("gelu_sigmoid", "gelu_tanh", 1e-3, at_margin)])
  assert found.verdict == forms.INCONCLUSIVE and found.shift == 0.002
  assert "no number of pairs decides a shift exactly at the margin" in (
    forms_report.verdict_words(found)
  )


def swap(arm, activation, changes, key="loss", dtype="float32", to_dtype="float32", lr=1e-3):
  return forms_report.Swap(arm, dtype, activation, to_dtype, lr, key, tuple(changes))


def test_swap_findings_keep_each_direction_apart():
  """Swapping to gelu_sigmoid raises the loss and swapping from it lowers it: each direction has
  its line, with its own median, counts and range; none pools the two (whose pooled median
  would be about 0)."""
  up = [0.002, 0.003, 0.0021, 0.0067, -0.0001]
  swaps = [
    swap("gelu", "gelu_sigmoid", up),
    swap("gelu", "gelu_sigmoid", up, dtype="bfloat16", to_dtype="bfloat16"),
    swap("gelu_sigmoid", "gelu", [-c for c in up]),
    swap("gelu", "gelu", [1e-5] * 5, to_dtype="bfloat16"),
  ]
  lines = forms_report.swap_findings(forms.DESIGN, swaps)
  assert len(lines) == 3
  to, back, dtype = lines
  assert to.startswith("Swap gelu → gelu_sigmoid, each network in its own dtype (10 networks: ")
  assert "test log loss (nats) median +0.0021, 8 up and 2 down, from -0.0001 to +0.0067" in to
  assert "2 beyond the study's margin ±0.005" in to
  assert back.startswith("Swap gelu_sigmoid → gelu, each network in its own dtype (5 networks")
  assert "median -0.0021, 1 up and 4 down, from -0.0067 to +0.0001" in back
  assert dtype.startswith("Swap gelu, float32 → bfloat16 (5 networks: every lr and seed)")


def test_the_headline_keeps_the_equivalents_the_control_does_not_back_apart():
  """Two forms equivalent at two lrs; the control is different from gelu at the first lr only:
  the first equivalent survives the control, the second is †, and the headline says so."""
  tiny = np.linspace(-0.0004, 0.0005, 10)
  large = np.linspace(0.006, 0.009, 10)
  noisy = np.array([0.004, -0.004, 0.003, -0.003, 0.0, 0.001, -0.002, 0.002, 0.005, -0.005])
  design = dataclasses.replace(forms.DESIGN, learning_rates=(1e-3, 3e-3), dtypes=("float32",))
  judged = forms.judge([
    outcome("gelu_tanh", "gelu", 1e-3, tiny),
    outcome("gelu_tanh", "gelu", 3e-3, tiny),
    outcome("relu", "gelu", 1e-3, large),
    outcome("relu", "gelu", 3e-3, noisy),
  ])  # fmt: skip
  assert [o.verdict for o in judged] == ["equivalent", "equivalent", "different", "inconclusive"]
  first, control, metric = forms_report.findings(design, judged, [])[:3]
  assert first == (
    "The forms, 2 pre-registered comparisons: 2 equivalent (1 †), 0 different, 0 inconclusive. "
    "Of the 2 *equivalent*, 1 survives the control (relu was found different from gelu in "
    "their dtype, lr and metric) and 1 is † (it was not: there the design could not tell the "
    "control from gelu either); by metric: test error (%) at the best-validation epoch: "
    "1 survives, 1 †."
  )
  assert control.startswith("The control (relu − gelu), 2 comparisons: 0 equivalent, 1 different")
  assert metric.startswith(
    "test error (%) at the best-validation epoch, float32: 2 equivalent (1 †)"
  )
