"""Tests for gelujax.study.curves: each rule on curves whose answer is known by hand."""

import dataclasses

import pytest

from gelujax.study import curves, runs, tables
from tests.fake_workdirs import constant, member, write_workdir


def test_jumps_above_twice_the_running_minimum(tmp_path):
  members = [
    # 0.1 -> 0.05 -> 0.2 (4x 0.05) -> 0.3 (6x, the same jump, its peak) -> 0.06 -> 0.11 (2.2x).
    member(0, 1e-3, train_loss=[0.1, 0.05, 0.2, 0.3, 0.06, 0.11], validation_loss=constant(1, 6)),
    # Never above twice its running minimum: 0.1, 0.19 (1.9x), 0.05, 0.1 (exactly 2x).
    member(1, 1e-3, train_loss=[0.1, 0.19, 0.05, 0.1, 0.1, 0.1], validation_loss=constant(1, 6)),
  ]
  run = runs.load_run(write_workdir(tmp_path / "elu", members))
  jumps = curves.find_jumps(run)
  assert [(j["seed"], j["epoch"], j["value"], j["running_min"]) for j in jumps] == [
    (0, 4.0, 0.3, 0.05),
    (0, 6.0, 0.11, 0.05),
  ]
  assert jumps[0]["ratio"] == pytest.approx(6.0) and jumps[1]["ratio"] == pytest.approx(2.2)
  row = dataclasses.replace(runs.summarize_run(run), curves=curves.describe_curves(run, [1e-3]))
  assert tables.unstable_label(row, row.grid[0]) == "1/2"
  # Seed 0's last evaluation (0.11) is 2.2x its running minimum: a final value on a spike.
  (spike,) = curves.final_spikes(run, 1e-3)
  assert (spike["seed"], spike["epoch"], spike["value"], spike["running_min"]) == (0, 6, 0.11, 0.05)


def test_still_improving_needs_the_median_best_epoch_in_the_last_fifth(tmp_path):
  # Validation losses bottom out at epochs 10, 9 and 7 of 10: median 9 > 8.
  def falling_until(best):
    return [1.0 - 0.05 * e if e <= best else 0.6 for e in range(1, 11)]

  improving = [
    member(s, 1e-3, train_loss=constant(0.1, 10), validation_loss=falling_until(b))
    for s, b in enumerate((10, 9, 7))
  ]
  run = runs.load_run(write_workdir(tmp_path / "gelu", improving))
  assert curves.still_improving(run, 1e-3) == {
    "median": 9.0,
    "at_last": 1,
    "members": 3,
    "epoch": 10.0,
  }
  # Bottoming out at epochs 8, 8 and 10: median 8, not after 80% of 10 epochs.
  stopped = [
    member(s, 1e-3, train_loss=constant(0.1, 10), validation_loss=falling_until(b))
    for s, b in enumerate((8, 8, 10))
  ]
  run = runs.load_run(write_workdir(tmp_path / "relu", stopped))
  assert curves.still_improving(run, 1e-3) is None


def test_not_learning_is_judged_against_the_chance_error(tmp_path):
  # Fashion-MNIST has 10 classes: chance error 0.9; a run does not learn above 0.45.
  def run_with(errors, name):
    members = [
      member(s, 1e-3, train_loss=constant(1.0 + s), validation_loss=[0.9, 0.8, 0.85],
             test_error=[0.9, e, e])
      for s, e in enumerate(errors)
    ]  # fmt: skip
    return runs.load_run(write_workdir(tmp_path / name, members))

  fact = curves.not_learning(run_with([0.40, 0.50, 0.61], "relu"), 1e-3)
  assert fact == {
    "median": 0.5,
    "chance": pytest.approx(0.9),
    "classes": 10,
    "low": 0.4,
    "high": 0.61,
    "train_low": 1.0,
    "train_high": 3.0,
  }
  assert curves.not_learning(run_with([0.40, 0.44, 0.61], "gelu"), 1e-3) is None
  # An autoencoder has no error to judge.
  members = [member(0, 1e-3, train_loss=constant(0.1), test_loss=constant(0.2))]
  run = runs.load_run(write_workdir(tmp_path / "ae", members, task="mnist_ae"))
  assert curves.not_learning(run, 1e-3) is None


def test_still_falling_measures_the_last_fifth_of_training(tmp_path):
  # 10 epochs: the last fifth runs from epoch 8 (8 <= 0.8 x 10) to 10. Seed 0 falls from 0.5 to
  # 0.4 (20%), seed 1 from 0.2 to 0.19 (5%), seed 2 rises from 0.1 to 0.11 (-10%): median 5%.
  members = [
    member(s, 1e-3, train_loss=[1.0] * 7 + [start, 0.9 * start + 0.1 * end, end],
           validation_loss=constant(1, 10))
    for s, (start, end) in enumerate(((0.5, 0.4), (0.2, 0.19), (0.1, 0.11)))
  ]  # fmt: skip
  members.append(member(3, 1e-3, train_loss=constant(0.1, 10), validation_loss=constant(1, 10),
                        diverged_epoch=9))  # fmt: skip
  run = runs.load_run(write_workdir(tmp_path / "gelu", members))
  found = curves.still_falling(run, 1e-3, "train_loss")
  assert (found["start"], found["epoch"], found["members"]) == (8.0, 10.0, 3)
  assert found["median"] == pytest.approx(0.05)
  assert (found["low"], found["high"]) == (pytest.approx(-0.1), pytest.approx(0.2))
  assert curves.still_falling(run, 1e-3, "no_such_metric") is None
