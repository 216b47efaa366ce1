"""Tests for the words of the GELU forms study's report (gelujax.study.forms_report) on
hand-made outcomes: what its findings count, flag and say, without training anything."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gelujax.study import (
  calibration,
  corrections,
  forms,
  forms_corrections,
  forms_report,
  forms_words,
  judge,
  stats,
  wrong_form,
)


def outcome(first, second, lr, d, metric=forms.DESIGN.metrics[0], dtype="float32"):
  """A comparison whose differences are ``d`` (of the logs, for a ratio metric)."""
  c = forms.Comparison(first, second, dtype, lr, metric, control=forms.CONTROL in (first, second))
  base = 1.0 if metric.log else 0.0
  first = np.exp(d) if metric.log else base + np.asarray(d)
  return forms.paired_outcome(c, dict(enumerate(first)), dict.fromkeys(range(len(d)), base))


def test_an_inconclusive_cell_says_more_than_the_largest_count_tried(monkeypatch):
  """Where no count up to stats.MAX_SEEDS decides, the cell says "more than N pairs" with N the
  code's, not "no number of pairs decides" (which holds only for a shift exactly at the
  margin)."""
  noisy = np.array([0.004, -0.004, 0.003, -0.003, 0.0, 0.001, -0.002, 0.002, 0.005, -0.005])
  (found,) = forms.judge([outcome("gelu_sigmoid", "gelu_tanh", 1e-3, noisy)])
  assert found.verdict == judge.INCONCLUSIVE and found.pairs_needed is not None
  monkeypatch.setattr(stats, "MAX_SEEDS", found.pairs_needed - 1)
  (found,) = forms.judge([outcome("gelu_sigmoid", "gelu_tanh", 1e-3, noisy)])
  assert found.pairs_needed is None
  words = forms_words.verdict_words(found)
  assert f"more than {stats.MAX_SEEDS} pairs would find it equivalent" in words, words
  at_margin = np.array([0.002] * 5 + [0.001, 0.003] * 2 + [0.002])
  (found,) = forms.judge([outcome("gelu_sigmoid", "gelu_tanh", 1e-3, at_margin)])
  assert found.verdict == judge.INCONCLUSIVE and found.shift == 0.002
  assert "no number of pairs decides a shift exactly at the margin" in (
    forms_words.verdict_words(found)
  )


def test_the_pairs_that_would_decide_say_which_way():
  """An inconclusive shift inside the margin (0.001 of 0.002, noisy) would be found
  *equivalent* with more pairs, one beyond it (0.003) *different*: the cell says which, for a
  control as for a form (a control's *equivalent* fails it)."""
  noise = np.array([0.004, -0.004, 0.003, -0.003, 0.0, 0.001, -0.002, 0.002, 0.005, -0.005])
  for centre, decision in ((0.001, "equivalent"), (0.003, "different")):
    for first in ("gelu_tanh", "relu"):
      (found,) = forms.judge([outcome(first, "gelu", 1e-3, noise + centre)])
      assert found.verdict == forms.INCONCLUSIVE and found.pairs_needed is not None
      words = forms_words.verdict_words(found)
      assert f"~{found.pairs_needed} pairs would find it {decision})" in words, words


def swap(arm, activation, changes, dtype="float32", to_dtype="float32", lr=1e-3):
  """A swap's row (`gelujax.study.wrong_form`): each network's change of the test loss."""
  nan = (float("nan"),) * 4
  networks = tuple(
    wrong_form.NetworkCost(lr, seed, False, nan[0], c, *nan[1:]) for seed, c in enumerate(changes)
  )
  from_dtype = dtype if to_dtype != dtype else None
  summary = wrong_form.summarize(networks)
  return wrong_form.WrongForm(arm, activation, to_dtype, networks, summary, from_dtype)


def test_swap_findings_keep_each_direction_apart():
  """Swapping to gelu_sigmoid raises the loss and swapping from it lowers it: each direction has
  its line, with its own median, counts and range; none pools the two (whose pooled median
  would be about 0)."""
  up = [0.002, 0.003, 0.0021, 0.0067, -0.0001]
  found = [
    swap("gelu", "gelu_sigmoid", up),
    swap("gelu", "gelu_sigmoid", up, dtype="bfloat16", to_dtype="bfloat16"),
    swap("gelu_sigmoid", "gelu", [-c for c in up]),
    swap("gelu", "gelu", [1e-5] * 5, to_dtype="bfloat16"),
  ]
  lines = forms_report.swap_findings(forms.DESIGN, found)
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
  the first equivalent is calibrated by the control (0.006-0.009 from gelu, within 3 margins of
  0.002), the second is †, and the headline says so."""
  tiny = np.linspace(-0.0004, 0.0005, 10)
  large = np.linspace(0.004, 0.005, 10)
  noisy = np.array([0.004, -0.004, 0.003, -0.003, 0.0, 0.001, -0.002, 0.002, 0.005, -0.005])
  design = dataclasses.replace(forms.DESIGN, learning_rates=(1e-3, 3e-3), dtypes=("float32",))
  judged = forms.judge([
    outcome("gelu_tanh", "gelu", 1e-3, tiny),
    outcome("gelu_tanh", "gelu", 3e-3, tiny),
    outcome("relu", "gelu", 1e-3, large),
    outcome("relu", "gelu", 3e-3, noisy),
  ])  # fmt: skip
  assert [o.verdict for o in judged] == ["equivalent", "equivalent", "different", "inconclusive"]
  first, control, metric = forms_words.findings(design, judged, [])[:3]
  assert first == (
    "The forms, 2 pre-registered comparisons: 2 equivalent (1 †), 0 different, 0 inconclusive. "
    "Of the 2 *equivalent*, 1 is calibrated by the control (relu was found different from gelu "
    "within 3 margins in their dtype, lr and metric), 0 by their own sensitivity (their paired "
    "differences, resampled 2000 times, find a true 2-margin shift different in at least 80% of "
    "resamples: `gelujax.study.calibration`), 0 are ‡ (the control was found different from "
    "gelu, but more than 3 margins away, and their own paired differences do not find a true "
    "2-margin shift different in 80% of resamples: *equivalent* with the same seeds, control "
    "uncalibrated) and 1 is † (the control was not found different: there the design could not "
    "tell the control from gelu either); by metric: test error (%) at the best-validation "
    "epoch: 1 calibrated, 0 ‡, 1 †."
  )
  assert control.startswith("The control (relu − gelu), 2 comparisons: 0 equivalent, 1 different")
  assert metric.startswith(
    "test error (%) at the best-validation epoch, float32: 2 equivalent (1 †)"
  )


def test_a_final_metric_still_falling_is_flagged_where_its_verdicts_are_counted():
  """The final train loss still falling 5-12% over the last fifth of training: the findings
  flag it after its tallies, with its margin in epochs of that fall, and the headline's count
  of its equivalents carries it."""
  tiny = np.linspace(-0.004, 0.005, 10)
  large = np.linspace(0.06, 0.09, 10)
  metric = next(m for m in forms.DESIGN.metrics if m.key == "final.train_loss")
  design = dataclasses.replace(
    forms.DESIGN, learning_rates=(1e-3,), dtypes=("float32",), metrics=(metric,)
  )
  judged = forms.judge([
    outcome("gelu_tanh", "gelu", 1e-3, tiny, metric),
    outcome("relu", "gelu", 1e-3, large, metric),
  ])  # fmt: skip
  falling = {
    metric.key: {"low": 0.051, "high": 0.128, "start": 16.0, "epoch": 20.0, "cells": 3,
                 "epochs_low": 1.4, "epochs_high": 3.7},
  }  # fmt: skip
  lines = forms_words.findings(design, judged, [], falling)
  assert lines[0].endswith(
    "final train log loss (ratio): 1 calibrated, 0 ‡, 0 †, on a loss still falling 5.1% to "
    "12.8% over the last fifth of training."
  )
  assert lines[3] == (
    "final train log loss (ratio) still falls at the last epoch: its median fall over the last "
    "fifth of training (epochs 16–20) is 5.1% to 12.8% across the 3 grids and lrs, so its margin "
    "±5% is 1.4 to 3.7 epochs of that fall: an *equivalent* on it says the arms lie within that "
    "much training of each other, on a loss that has not settled."
  )
  assert not any("still falls" in line for line in forms_words.findings(design, judged, []))


def test_the_corrections_quote_the_fixed_design_and_show_what_is_true():
  """The first design stays as it was fixed: each correction quotes words its README states (or,
  for the rule it left unstated, names it); the facts that correct it come from the paper's
  record: its smallest test-error gap is 0.10 points (Twitter POS, relu), half the margin; Fig.
  2's losses differ by a factor of 2 only with dropout."""
  design_text = " ".join(forms_report.design_lines(forms.DESIGN))
  assert "(0.1-0.3 points on Twitter POS)" in design_text  # not rewritten
  for c in corrections.CORRECTIONS[forms.TASK]:
    if "“" in c.wrong:
      quoted = c.wrong.split("“", 1)[1].split("”", 1)[0]
      assert quoted in design_text, quoted
  gaps = forms_corrections.paper_gaps_words(forms.DESIGN.metrics[0])
  assert "§3.3 twitter_pos: relu 0.10, elu 0.34" in gaps
  assert "The smallest, 0.10 points (§3.3 twitter_pos, relu), is below the margin ±0.2" in gaps
  ratios = forms_corrections.fig2_ratios_words()
  assert "dropout 0: relu 0.875x, elu 1.62x; dropout 0.5: relu 7.95x, elu 2.39x" in ratios
  assert ratios.endswith("A factor of 2 or more in 2 of 4, all with dropout 0.5")
  # A design without corrections renders none.
  unnamed = dataclasses.replace(forms.POWERED, name="a_design_without_corrections")
  assert forms_corrections.correction_lines(unnamed, [], {}) == []


def test_what_ten_pairs_could_resolve_is_derived_from_the_differences():
  """The paired SD of the forms' test-error differences per lr, and the pairs a true shift of 0
  would need to be called equivalent (the differences centred on their shift)."""
  rng = np.random.default_rng(0)
  design = dataclasses.replace(forms.DESIGN, learning_rates=(1e-3,), dtypes=("float32",))
  narrow, wide = rng.normal(0, 0.0005, 10), rng.normal(0.001, 0.005, 10)
  judged = forms.judge([
    outcome("gelu_tanh", "gelu", 1e-3, narrow),
    outcome("gelu_sigmoid", "gelu", 1e-3, wide),
    outcome("relu", "gelu", 1e-3, wide),  # the control: not among the forms' spread
  ])  # fmt: skip
  spread = forms.paired_spread(design, judged)
  sds = [100 * np.std(d, ddof=1) for d in (narrow, wide)]
  assert spread[1e-3]["sd_low"] == pytest.approx(min(sds))
  assert spread[1e-3]["sd_high"] == pytest.approx(max(sds))
  small, large = spread[1e-3]["pairs"]
  assert small is not None and small <= 10 and (large is None or large > 10)
  words = forms_corrections.paired_sd_words(design, judged)
  assert f"{min(sds):.2f}–{max(sds):.2f} points at lr 0.001" in words
  assert words.endswith("10 pairs suffice in 1 of the 2 comparisons")


WIDE = np.array([0.0032, -0.0017, -0.0006, 0.0031, 0.001, 0.001, -0.0008, -0.0025, 0.0003, 0.0002])


def test_an_equivalent_is_calibrated_by_a_near_control_or_its_own_sensitivity_or_marked():
  """Three families of one comparison each (a level of 0.05): on test error in float32, WIDE
  (SD 0.0019, within ±0.002: equivalent at p 0.035) beside a control 25 margins away (+0.05 on
  every seed): its own differences find a 2-margin shift different in under 80% of resamples
  (computed by `calibration.sensitivity`, tested against a by-hand bootstrap), so ‡; in
  bfloat16, WIDE / 3 beside the same control: calibrated by its own sensitivity; on test loss
  (±0.005), a narrow equivalent beside a control 2.4 margins away (+0.012 on every seed, found
  different): calibrated by the control. No cell says the control alone makes it survive."""
  far = np.full(10, 0.05) + np.arange(10) * 1e-4
  near = np.full(10, 0.012) + np.arange(10) * 1e-4
  loss = forms.DESIGN.metrics[1]
  design = dataclasses.replace(forms.DESIGN, learning_rates=(1e-3,))
  judged = forms.judge([
    outcome("gelu_tanh", "gelu", 1e-3, WIDE),
    outcome("relu", "gelu", 1e-3, far),
    outcome("gelu_tanh", "gelu", 1e-3, WIDE / 3, dtype="bfloat16"),
    outcome("relu", "gelu", 1e-3, far, dtype="bfloat16"),
    outcome("gelu_tanh", "gelu", 1e-3, WIDE, metric=loss),
    outcome("relu", "gelu", 1e-3, near, metric=loss),
  ])  # fmt: skip
  assert [o.verdict for o in judged] == ["equivalent", "different"] * 3
  assert judged[0].equivalence.p == pytest.approx(0.03515625)
  wide = calibration.sensitivity(WIDE, 0.002, 0.05)
  assert wide.different[2] < 0.8 <= calibration.sensitivity(WIDE / 3, 0.002, 0.05).different[2]
  found = calibration.calibrations(design, judged)
  assert list(found.values()) == [
    "control uncalibrated", "calibrated by its own sensitivity", "calibrated by the control"
  ]  # fmt: skip
  table = "\n".join(forms_report.verdict_table(design, judged, forms.DESIGN.metrics[0]))
  assert "**equivalent** ‡<br>" in table and table.count("‡") == 1
  line = forms_words.equivalents_line(design, judged)
  assert line.startswith(
    "Of the 3 *equivalent*, 1 is calibrated by the control (relu was found different from gelu "
    "within 3 margins in their dtype, lr and metric), 1 by their own sensitivity"
  )
  assert "1 is ‡ (the control was found different from gelu, but more than 3 margins away" in line
  assert "survive" not in line
  rows = forms_words.headline_rows(design, judged)
  (error,) = [r for r in rows if r["where"] == "gelu_forms, forms: best.test_error, float32"]
  assert error["verdict"] == "1 equivalent (1 ‡), 0 different, 0 inconclusive"
  assert "(equivalent ‡)" in error["ours"] and error["caveats"].startswith("1 ‡ (the control")
  summary = forms_words.headline_summary(design, judged)
  assert "2 of the 3 *equivalent* calibrated" in summary and "1 control uncalibrated (‡)" in summary
