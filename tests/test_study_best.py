"""Tests for gelujax.study.best, a member's best evaluation and its tie rule: on records written
by hand, on a hand-made run, and against the trainer's own summary (`gelujax.workdir.summarize`)
on every committed run."""

import json
import math
from pathlib import Path

import pytest

from gelujax.study import best, runs
from tests import fake_workdirs

ROOT = Path(__file__).resolve().parents[1]

# Epochs 2 and 4 tie on the lowest validation error (0.1); epoch 3 has the lowest loss; epoch 5
# is not finite (null, as metrics.jsonl holds it).
RECORDS = [
  {"epoch": 1.0, "validation_error": 0.3, "validation_loss": 0.9},
  {"epoch": 2.0, "validation_error": 0.1, "validation_loss": 0.8},
  {"epoch": 3.0, "validation_error": 0.2, "validation_loss": 0.5},
  {"epoch": 4.0, "validation_error": 0.1, "validation_loss": 0.7},
  {"epoch": 5.0, "validation_error": None, "validation_loss": None},
]


def test_the_best_record_is_the_lowest_finite_value_the_earliest_of_a_tie_by_default():
  assert best.best_record(RECORDS, "validation_error")["epoch"] == 2.0
  assert best.best_record(RECORDS, "validation_error", best.EARLIEST)["epoch"] == 2.0
  assert best.best_record(RECORDS, "validation_error", tie="latest")["epoch"] == 4.0
  assert best.best_record(RECORDS, "validation_loss", tie="latest")["epoch"] == 3.0
  # A NaN is not a value: skipped as null is.
  nan = [{"epoch": 1.0, "validation_error": math.nan}, {"epoch": 2.0, "validation_error": 0.4}]
  assert best.best_record(nan, "validation_error")["epoch"] == 2.0
  assert best.best_record(RECORDS[4:], "validation_error") is None
  assert best.best_record([], "validation_error", tie="latest") is None
  assert best.best_record([{"epoch": 1.0}], "validation_error") is None  # no such key
  with pytest.raises(ValueError, match="tie rule 'first': expected one of earliest, latest"):
    best.best_record(RECORDS, "validation_error", "first")


def test_the_tied_records_are_every_epoch_of_the_lowest_value():
  assert [r["epoch"] for r in best.tied_records(RECORDS, "validation_error")] == [2.0, 4.0]
  assert [r["epoch"] for r in best.tied_records(RECORDS, "validation_loss")] == [3.0]
  assert best.tied_records(RECORDS[4:], "validation_error") == []


def member(seed, errors, *, diverged_epoch=None):
  n = len(errors)
  return {
    "seed": seed, "learning_rate": 1e-3, "diverged_epoch": diverged_epoch,
    "validation_error": errors, "validation_loss": [1.0 - 0.1 * e for e in range(n)],
    "test_error": [0.5] * n, "test_loss": [1.0] * n, "train_loss": [1.0] * n,
  }  # fmt: skip


def test_tied_members_and_members_best_at_the_last_epoch(tmp_path):
  """Seed 0 ties at epochs 2 and 4; seed 1's lowest is epoch 4 of 4, alone; seed 2 ties at epochs
  1 and 2 but diverged at epoch 3, so it is left out of both; seed 3 ties at 3 and 4, and its
  best (the earliest) is not the last epoch."""
  workdir = fake_workdirs.write_workdir(
    tmp_path / "run",
    [
      member(0, [0.3, 0.1, 0.2, 0.1]),
      member(1, [0.3, 0.2, 0.2, 0.1]),
      member(2, [0.1, 0.1, 0.2, 0.2], diverged_epoch=3),
      member(3, [0.3, 0.2, 0.1, 0.1]),
    ],
    select_metric="validation_error",
  )
  run = runs.load_run(workdir)
  tied = best.tied_members(run, 1e-3, "validation_error")
  assert {seed: [r["epoch"] for r in t] for seed, t in tied.items()} == {0: [2, 4], 3: [3, 4]}
  assert best.tied_members(run, 3e-4, "validation_error") == {}  # no member at that lr
  assert [m["best_epoch"] for m in run.members] == [2, 4, 1, 3]
  assert best.at_last_epoch(run, 1e-3) == [1]


def committed_runs():
  return sorted(ROOT.glob("results/*/*/runs/*/summary.json"))


def test_the_earliest_rule_is_the_trainers_on_every_committed_run():
  """Every member of every committed run: the earliest rule on its records gives the best epoch
  the trainer wrote into its summary.json (and `gelujax.workdir.summarize` derives again from
  its records); the latest rule differs exactly at the members whose best ties, and some do
  (issue 42's tie among them)."""
  members = differing = 0
  tied_seeds = set()
  for path in committed_runs():
    run = runs.load_run(path.parent)
    written = json.loads(path.read_text())["members"]
    metric = runs.selection_metric(run)
    for m, kept in zip(run.members, written, strict=True):
      records = runs.member_records(run, m, metric)
      earliest = best.best_record(records, metric)
      latest = best.best_record(records, metric, tie="latest")
      assert (earliest or {}).get("epoch") == m["best_epoch"] == kept["best_epoch"], (path, m)
      tied = len(best.tied_records(records, metric)) > 1
      assert (earliest is not latest) == tied, (path, m)
      members += 1
      differing += tied
      if tied and path.parent.name == "gelu_tanh_eval" and "spelling" in str(path):
        tied_seeds.add(m["seed"])
  assert members > 1000 and differing > 10
  assert tied_seeds == {109}
