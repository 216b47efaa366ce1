"""Tests for gelujax.sweep on workdirs written in the trainer's file formats.

Every expected selection, median, mean and std below is computed by hand from the chosen values.
"""

import dataclasses
import itertools
import math
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import scipy.stats

import gelujax
from gelujax import sweep
from gelujax.members import Members
from tests.fake_workdirs import constant, member, write_workdir

LRS = (1e-3, 1e-4, 1e-5)


def grid(best_validation, test_error=None, diverged=None):
  """Members lr-major over LRS x seeds 0..2 with flat curves at the given values."""
  members = []
  for i, lr in enumerate(LRS[: len(best_validation)]):
    for seed in range(3):
      k = i * 3 + seed
      members.append(
        member(
          seed,
          lr,
          diverged_epoch=(diverged or {}).get(k),
          train_loss=constant(0.01 * (k + 1)),
          validation_loss=[best_validation[i][seed] + 0.5, best_validation[i][seed], 9.0],
          validation_error=constant(0.1),
          test_loss=constant(0.3),
          test_error=constant(test_error[i][seed] if test_error else 0.1),
        )
      )
  return members


@pytest.fixture
def three_lr_run(tmp_path):
  # Medians of the best validation losses: 0.20, 0.16, 0.41 -> lr 1e-4 is selected.
  members = grid(
    [[0.30, 0.10, 0.20], [0.15, 0.50, 0.16], [0.40, 0.41, 0.42]],
    test_error=[[0.01, 0.01, 0.01], [0.05, 0.09, 0.06], [0.2, 0.2, 0.2]],
  )
  return sweep.load_run(write_workdir(tmp_path / "gelu", members))


def test_selects_lowest_median_validation(three_lr_run):
  assert sweep.select_learning_rate(three_lr_run) == 1e-4


def test_selected_stats_by_hand(three_lr_run):
  row = sweep.summarize_run(three_lr_run)
  selected = row["selected"]
  assert selected["learning_rate"] == 1e-4
  assert (selected["members"], selected["diverged"]) == (3, 0)
  assert selected["seeds"] == [0, 1, 2]
  # The best epoch is epoch 2 for every member (validation 0.5 higher at 1, 9.0 at 3).
  assert selected["best_epoch"] == 2.0
  test_error = selected["metrics"]["best.test_error"]
  assert test_error["median"] == pytest.approx(0.06)
  assert test_error["mean"] == pytest.approx(0.2 / 3)
  # Sample std of (0.05, 0.09, 0.06): sqrt((0.0166..^2 + 0.0233..^2 + 0.0066..^2) / 2).
  assert test_error["std"] == pytest.approx(math.sqrt(8.6667e-4 / 2), rel=1e-4)
  assert test_error["n"] == 3
  # The selected lr's members are 3, 4, 5: final train losses 0.04, 0.05, 0.06.
  assert selected["metrics"]["final.train_loss"]["median"] == pytest.approx(0.05)
  assert selected["metrics"]["best.validation_loss"]["median"] == pytest.approx(0.16)
  assert selected["metrics"]["final.validation_loss"]["median"] == pytest.approx(9.0)
  assert [g["select_median"] for g in row["grid"]] == pytest.approx([0.20, 0.16, 0.41])
  assert row["select_metric"] == "validation_loss"
  assert (row["run"], row["activation"], row["dropout"]) == ("gelu", "gelu", 0.0)


def test_majority_diverged_lr_loses_to_stable_one(tmp_path):
  # lr 1e-3: seeds 0 and 1 diverge, seed 2 reaches 0.01 -> median over (inf, inf, 0.01) = inf.
  members = grid([[0.9, 0.9, 0.01], [0.2, 0.2, 0.2]], diverged={0: 2, 1: 3})
  run = sweep.load_run(write_workdir(tmp_path / "relu", members))
  assert sweep.select_learning_rate(run) == 1e-4


def test_minority_diverged_lr_selected_and_counted(tmp_path):
  # lr 1e-3: seed 0 diverges at epoch 1 -> median(inf, 0.10, 0.12) = 0.12 < 0.2 of lr 1e-4.
  members = grid(
    [[0.9, 0.10, 0.12], [0.2, 0.2, 0.2]],
    test_error=[[0.5, 0.04, 0.08], [0.1, 0.1, 0.1]],
    diverged={0: 1},
  )
  row = sweep.summarize_run(sweep.load_run(write_workdir(tmp_path / "elu", members)))
  selected = row["selected"]
  assert selected["learning_rate"] == 1e-3
  assert (selected["members"], selected["diverged"]) == (3, 1)
  assert sweep.diverged_label(row) == "1/3 diverged"
  # Statistics over the two members that did not diverge.
  assert selected["metrics"]["best.test_error"]["median"] == pytest.approx(0.06)
  assert selected["metrics"]["best.test_error"]["n"] == 2
  assert selected["metrics"]["best.test_error"]["std"] == pytest.approx(0.04 / math.sqrt(2))
  assert row["grid"][0]["diverged"] == 1
  table = sweep.format_table([row], metric="best.test_error", label="test error (%)", scale=100)
  assert "| elu | 0.001 | 1/3 diverged | 0/3 | – | 6 | 6 ± 2.8 |" in table
  # The selection compares every member, the diverged one as +inf (JSON: null).
  assert row["grid"][0]["select_values"] == [math.inf, 0.10, 0.12]


def test_all_diverged_lr_never_selected(tmp_path):
  # lr 1e-3 diverges entirely; lr 1e-4 has 2/3 diverged (median inf) but is still a result.
  members = grid([[0.1, 0.1, 0.1], [0.9, 0.9, 0.3]], diverged={0: 1, 1: 1, 2: 1, 3: 1, 4: 2})
  row = sweep.summarize_run(sweep.load_run(write_workdir(tmp_path / "relu", members)))
  assert row["selected"]["learning_rate"] == 1e-4
  assert sweep.diverged_label(row) == "2/3 diverged"
  assert row["selected"]["metrics"]["best.validation_loss"]["median"] == pytest.approx(0.3)


def test_everything_diverged(tmp_path):
  members = grid([[0.1, 0.1, 0.1]], diverged={0: 1, 1: 2, 2: 3})
  row = sweep.summarize_run(sweep.load_run(write_workdir(tmp_path / "relu", members)))
  assert row["selected"] is None
  assert sweep.diverged_label(row) == "3/3 diverged"
  table = sweep.format_table([row], metric="best.test_error", label="err", paper={"relu": 0.5})
  assert "| relu | – | 3/3 diverged | – | 0.5 | – | – |" in table


def test_no_validation_split_selects_on_test(tmp_path):
  members = [
    member(0, 1e-3, train_loss=constant(0.1), test_loss=[0.5, 0.4, 0.45]),
    member(0, 1e-4, train_loss=constant(0.1), test_loss=[0.5, 0.3, 0.6]),
  ]
  # The spec asks for validation_loss, which the records lack: selection falls back to test_loss.
  run = sweep.load_run(write_workdir(tmp_path / "gelu", members, task="mnist_ae"))
  assert sweep.selection_metric(run) == "test_loss"
  assert sweep.select_learning_rate(run) == 1e-4
  row = sweep.summarize_run(run)
  assert row["selected"]["metrics"]["final.test_loss"]["median"] == pytest.approx(0.6)
  assert math.isnan(row["selected"]["metrics"]["final.test_loss"]["std"])


def test_median_curve_skips_diverged_members(tmp_path):
  members = [
    member(0, 1e-3, train_loss=[1.0, 0.5, 0.2], validation_loss=constant(1.0)),
    member(1, 1e-3, train_loss=[3.0, 0.1, 0.4], validation_loss=constant(1.0)),
    member(2, 1e-3, train_loss=[2.0, 0.3, 0.3], validation_loss=constant(1.0)),
    member(3, 1e-3, train_loss=[0.0, 0.0, 0.0], validation_loss=constant(1.0), diverged_epoch=3),
    member(0, 1e-4, train_loss=[9.0, 9.0, 9.0], validation_loss=constant(1.0)),
  ]
  run = sweep.load_run(write_workdir(tmp_path / "gelu", members))
  curve = sweep.median_curve(run, "train_loss", 1e-3)
  np.testing.assert_array_equal(curve.x, [1.0, 2.0, 3.0])
  np.testing.assert_allclose(curve.median, [2.0, 0.3, 0.3])
  np.testing.assert_allclose(curve.low, [1.0, 0.1, 0.2])
  np.testing.assert_allclose(curve.high, [3.0, 0.5, 0.4])
  assert curve.members == 3
  assert sweep.median_curve(run, "test_loss", 1e-3) is None


def test_noise_curve_by_hand():
  result = {
    "levels": [0.0, 1.5, 3.0],
    "accuracy": [[0.9, 0.6, 0.2], [0.95, 0.5, 0.3], [0.97, 0.7, 0.1]],
  }
  curve = sweep.noise_curve(result, "accuracy")
  np.testing.assert_allclose(curve.median, [0.95, 0.6, 0.2])
  np.testing.assert_allclose(curve.low, [0.9, 0.5, 0.1])
  np.testing.assert_allclose(curve.high, [0.97, 0.7, 0.3])
  assert curve.members == 3


def test_run_name():
  assert sweep.run_name("gelu") == "gelu"
  assert sweep.run_name("gelu", 0.5) == "gelu_dropout0.5"


def test_finished_summary_and_grid_checks(tmp_path):
  members = grid([[0.1, 0.2, 0.3], [0.2, 0.2, 0.2]])
  partial = write_workdir(tmp_path / "partial", members, finished=False)
  assert sweep.finished_summary(partial, Members(LRS[:2], [0, 1, 2]), 3) is None
  done = write_workdir(tmp_path / "done", members)
  summary = sweep.finished_summary(done, Members(LRS[:2], [0, 1, 2]), 3)
  assert summary["activation"] == "gelu"
  empty = tmp_path / "empty"
  assert sweep.finished_summary(empty, Members([1e-3], [0]), 3) is None
  with pytest.raises(ValueError, match=r"different grid.*--out"):
    sweep.finished_summary(done, Members(LRS[:2], [0, 1]), 3)
  with pytest.raises(ValueError, match=r"different grid"):
    sweep.finished_summary(partial, Members(LRS[1:], [0, 1, 2]), 3)
  # A finished run asked for more epochs is resumed (not finished); fewer is an error.
  assert sweep.finished_summary(done, Members(LRS[:2], [0, 1, 2]), 5) is None
  with pytest.raises(ValueError, match=r"3 epochs, more than the 2 requested.*--epochs 3"):
    sweep.finished_summary(done, Members(LRS[:2], [0, 1, 2]), 2)


def test_run_grid_skips_finished_run_without_training(tmp_path, monkeypatch):
  class Spec:
    epochs = 3

  done = write_workdir(tmp_path / "done", grid([[0.1, 0.2, 0.3]]))
  # A trainer that fails if touched proves the finished run is not retrained.
  trainer = types.SimpleNamespace(fit=lambda *a, **k: pytest.fail("trained a finished run"))
  monkeypatch.setitem(sys.modules, "gelujax.trainer", trainer)
  monkeypatch.setattr(gelujax, "trainer", trainer, raising=False)
  summary, trained = sweep.run_grid(Spec(), done, Members([1e-3], [0, 1, 2]))
  assert not trained
  assert len(summary["members"]) == 3


def test_load_run_needs_a_summary(tmp_path):
  partial = write_workdir(tmp_path / "gelu", grid([[0.1, 0.2, 0.3]]), finished=False)
  with pytest.raises(ValueError, match=r"no summary\.json"):
    sweep.load_run(partial)


def test_format_table_and_grid(three_lr_run):
  row = sweep.summarize_run(three_lr_run)
  table = sweep.format_table(
    [row],
    metric="best.test_error",
    label="test error (%)",
    scale=100,
    paper={"gelu": 0.0612},
    extra=[("final.train_loss", "final train loss", 1.0)],
  )
  lines = table.splitlines()
  assert lines[0] == (
    "| run | lr | diverged | unstable | paper test error (%) | median test error (%) | "
    "mean ± std test error (%) | final train loss |"
  )
  # Median 6, mean 6.667, std 2.082 (percent); the extra column keeps its own scale.
  assert lines[2] == "| gelu | 0.0001 | 0/3 | 0/3 | 6.12 | 6 | 6.667 ± 2.1 | 0.05 |"
  grid_table = sweep.format_grid([row], metric="best.test_error", label="test error (%)", scale=100)
  assert "| gelu | 0.0001 (selected) | 0/3 | 0/3 | 0.16 (validation_loss) | 6 |" in grid_table
  assert "| gelu | 0.001 | 0/3 | 0/3 | 0.2 (validation_loss) | 1 |" in grid_table
  assert "| gelu | 1e-05 | 0/3 | 0/3 | 0.41 (validation_loss) | 20 |" in grid_table
  selection = sweep.format_table(
    [row], metric="best.test_error", label="e", selection={"gelu": "0.0001 over 0.001"}
  )
  assert selection.splitlines()[0].endswith("| lr selection |")
  assert selection.splitlines()[2].endswith("| 0.0001 over 0.001 |")


class FakeTrainer:
  """Stands in for gelujax.trainer: records fit calls and writes an all-diverged workdir."""

  class DivergedError(RuntimeError):
    pass

  def __init__(self):
    self.calls = []

  def fit(self, spec, workdir, members, *, data_dir, progress):
    learning_rates, seeds = list(members.learning_rates), list(members.seeds)
    self.calls.append((workdir, seeds, learning_rates, data_dir))
    members = [
      member(s, lr, train_loss=constant(1.0), validation_loss=constant(1.0), diverged_epoch=2)
      for lr in learning_rates
      for s in seeds
    ]
    write_workdir(Path(workdir), members)
    raise self.DivergedError("all diverged")


def test_run_grid_trains_and_keeps_all_diverged_result(tmp_path, monkeypatch):
  class Spec:
    epochs = 3

  trainer = FakeTrainer()
  monkeypatch.setitem(sys.modules, "gelujax.trainer", trainer)
  monkeypatch.setattr(gelujax, "trainer", trainer, raising=False)
  workdir = tmp_path / "relu"
  summary, trained = sweep.run_grid(
    Spec(), workdir, Members([1e-2], [0, 1]), data_dir="/data", progress=False
  )
  assert trained
  assert trainer.calls == [(str(workdir), [0, 1], [1e-2], "/data")]
  assert [m["diverged"] for m in summary["members"]] == [True, True]
  # Finished now, so a second call does not train.
  _, trained = sweep.run_grid(Spec(), workdir, Members([1e-2], [0, 1]))
  assert not trained
  assert len(trainer.calls) == 1


def test_noise_table_interpolates_each_seed_then_takes_the_median():
  result = {
    "learning_rate": 1e-3,
    "members": 4,
    "diverged": 1,
    "levels": [0.0, 2.0, 3.0],
    "accuracy": [[0.98, 0.5, 0.2], [0.96, 0.4, 0.3], [0.90, 0.9, 0.1]],
    "loss": [[0.1, 2.0, 4.0], [0.3, 3.0, 5.0], [0.2, 1.0, 6.0]],
  }
  # a = 1 is halfway from 0 to 2: per seed, accuracy 0.74, 0.68, 0.90 -> median 0.74 (the
  # median curve, 0.96 and 0.5 at a = 0 and 2, would give 0.73); loss 1.05, 1.65, 0.6 -> 1.05.
  assert sweep.noise_at(result, "accuracy", 1.0) == pytest.approx(0.74)
  table = sweep.format_noise_table({"gelu_tanh": result}, paper={"gelu_tanh": {0.0: 0.98}})
  lines = table.splitlines()
  assert lines[0] == (
    "| run | lr | diverged | accuracy a=0 (paper) | accuracy a=1 (paper) | accuracy a=3 (paper) "
    "| log loss a=0 | log loss a=1 | log loss a=3 |"
  )
  assert lines[2] == "| gelu_tanh | 0.001 | 1/4 | 0.96 (0.98) | 0.74 | 0.2 | 0.2 | 1.05 | 5 |"


def brute_force_rank_test(a, b):
  """The two-sided rank-sum p-value by listing every split of the pooled values (mid-ranks)."""
  pooled = np.concatenate([a, b])
  order = np.argsort(pooled, kind="stable")
  ranks = np.empty(len(pooled))
  ranks[order] = np.arange(1, len(pooled) + 1)
  for value in np.unique(pooled):  # Ties share the mean of their ranks.
    ranks[pooled == value] = ranks[pooled == value].mean()
  centre = len(a) * (len(pooled) + 1) / 2
  observed = abs(ranks[: len(a)].sum() - centre)
  splits = list(itertools.combinations(range(len(pooled)), len(a)))
  extreme = sum(abs(ranks[list(s)].sum() - centre) >= observed - 1e-9 for s in splits)
  return extreme / len(splits)


@pytest.mark.parametrize("sizes", [(5, 5), (3, 3), (3, 7), (6, 4), (1, 4)])
def test_rank_test_matches_scipy_exact_without_ties(sizes):
  rng = np.random.default_rng(sum(sizes))
  for shift in (0.0, 0.5, 3.0):
    a, b = rng.normal(size=sizes[0]), rng.normal(shift, size=sizes[1])
    expected = scipy.stats.mannwhitneyu(a, b, alternative="two-sided", method="exact").pvalue
    assert sweep.rank_test(a, b) == pytest.approx(expected, rel=1e-12)


def test_rank_test_with_ties_matches_enumeration():
  rng = np.random.default_rng(0)
  for _ in range(10):
    a, b = rng.integers(0, 4, size=5) / 4, rng.integers(1, 5, size=4) / 4
    assert sweep.rank_test(a, b) == pytest.approx(brute_force_rank_test(a, b), rel=1e-12)


def test_rank_test_separated_seeds_by_hand():
  # No overlap: only the 2 most extreme of C(10, 5) = 252 splits are as extreme.
  assert sweep.rank_test([1, 2, 3, 4, 5], [6, 7, 8, 9, 10]) == pytest.approx(2 / 252)
  assert sweep.rank_test([3, 2, 1], [4, 6, 5]) == pytest.approx(2 / 20)
  assert sweep.rank_test([1, 1, 1], [1, 1, 1]) == 1.0


def ranking_row(run, values):
  stats = sweep.Stats.of(values)
  selected = {"metrics": {"best.test_error": dataclasses.asdict(stats)}}
  return {"run": run, "selected": selected}


def test_rank_orders_by_median_and_tests_neighbours():
  rows = [
    ranking_row("relu", [0.30, 0.31, 0.32, 0.33, 0.34]),
    ranking_row("gelu", [0.10, 0.11, 0.12, 0.13, 0.14]),
    ranking_row("elu", [0.29, 0.35, 0.36, 0.37, 0.38]),
    {"run": "silu", "selected": None},  # Every member diverged: not ranked.
  ]
  values = sweep.selected_values(rows, "best.test_error")
  assert list(values) == ["relu", "gelu", "elu"]
  family = sweep.Family()
  ranking = sweep.rank(family, "selected lr", "error (%)", values, scale=100.0)
  family.correct()
  assert [run for run, _ in ranking.order] == ["gelu", "relu", "elu"]
  # gelu vs relu: no overlap, p = 2 / C(10, 5); relu vs elu: elu's 0.29 lies below all of
  # relu's and its other four above: SciPy's exact p.
  first, second = ranking.tests
  assert (first.a, first.b, first.p) == ("gelu", "relu", pytest.approx(2 / 252))
  expected = scipy.stats.mannwhitneyu(values["relu"], values["elu"], method="exact").pvalue
  assert second.p == pytest.approx(expected)
  # Holm over the two tests: 2 * p for the smaller, then max(that, p) for the larger.
  assert first.holm == pytest.approx(2 * 2 / 252)
  assert second.holm == pytest.approx(max(2 * 2 / 252, second.p))
  assert first.outcome == sweep.BEYOND and second.outcome == sweep.WITHIN
  lines = sweep.format_rankings([ranking]).splitlines()
  assert lines[2] == "| error (%) | 1 | gelu | 12 | 10–14 |  |"
  assert lines[3] == (
    "|  | 2 | relu | 32 | 30–34 | beyond the seed spread (p = 0.0079, Holm 0.016, no seed "
    "overlaps) |"
  )
  assert lines[4].startswith("|  | 3 | elu | 36 | 29–38 | within the seed spread (p = ")


def test_rank_higher_is_better():
  family = sweep.Family()
  accuracy = {"relu": [0.5, 0.52, 0.51], "gelu": [0.6, 0.61, 0.62]}
  ranking = sweep.rank(family, "s", "accuracy", accuracy, lower_is_better=False)
  family.correct()
  rows = sweep.format_rankings([ranking]).splitlines()[2:]
  assert rows[0].startswith("| accuracy | 1 | gelu | 0.61 | 0.6–0.62 |")
  # 3 seeds a side, all apart: p = 2 / C(6, 3) = 0.1, not enough even before correction.
  assert rows[1] == (
    "|  | 2 | relu | 0.51 | 0.5–0.52 | within the seed spread (p = 0.1, Holm 0.1, no seed "
    "overlaps) |"
  )


def test_holm_by_hand():
  # Sorted p: 0.01, 0.02, 0.03, 0.2 times 4, 3, 2, 1 = 0.04, 0.06, 0.06, 0.2; running maximum
  # keeps them; the original order is restored.
  assert sweep.holm([0.03, 0.01, 0.2, 0.02]) == pytest.approx([0.06, 0.04, 0.2, 0.06])
  # Running maximum: 0.01 * 3 = 0.03, then 0.011 * 2 = 0.022 -> 0.03, then 0.9.
  assert sweep.holm([0.011, 0.01, 0.9]) == pytest.approx([0.03, 0.03, 0.9])
  # Capped at 1: 0.6 * 2 = 1.2 -> 1, then max(1, 0.7) = 1.
  assert sweep.holm([0.7, 0.6]) == pytest.approx([1.0, 1.0])
  assert sweep.holm([]) == []


def test_three_outcomes_and_their_words():
  family = sweep.Family()
  apart = family.test("s", "m", ("a", [1, 2, 3, 4, 5]), ("b", [6, 7, 8, 9, 10]))
  again = family.test("s", "m", ("b", [6, 7, 8, 9, 10]), ("a", [1, 2, 3, 4, 5]))
  assert again is apart  # One pair, scope and metric is one test of the family.
  tied = family.test("s", "m", ("c", [1, 2, 3, 4, 6]), ("d", [6, 7, 8, 9, 10]))
  mixed = family.test("s", "m", ("e", [1, 3, 5, 7, 9]), ("f", [2, 4, 6, 8, 10]))
  with pytest.raises(ValueError, match="not been corrected"):
    _ = apart.outcome
  family.correct()
  with pytest.raises(ValueError, match="after its correction"):
    family.test("s", "m", ("a", [1]), ("g", [2]))
  # apart: 2/252 * 3 tests = 0.024 < 0.05. tied (6 shared, mid-rank 5.5): p = 4/252 = 0.016,
  # Holm 2 * 0.016 = 0.032. mixed: p = 0.69 (scipy).
  assert apart.outcome == sweep.BEYOND and apart.statistics() == (
    "p = 0.0079, Holm 0.024, no seed overlaps"
  )
  assert tied.p == pytest.approx(4 / 252) and tied.ties == 1
  assert tied.verdict() == (
    "beyond the seed spread (p = 0.016, Holm 0.032, 1 tied value (mid-ranks))"
  )
  assert mixed.outcome == sweep.WITHIN
  family = sweep.Family()
  tests = [
    family.test("s", "m", (f"a{i}", [1, 2, 3, 4, 5]), ("b", [6, 7, 8, 9, 10])) for i in range(7)
  ]
  family.correct()
  # 7 tests x 2/252 = 0.056: every one is below 0.05 only before correction.
  assert {t.outcome for t in tests} == {sweep.UNCORRECTED}
  assert OUTCOME_PHRASES == {
    sweep.OUTCOME_WORDS[o] for o in (sweep.BEYOND, sweep.UNCORRECTED, sweep.WITHIN)
  }


OUTCOME_PHRASES = {
  "beyond the seed spread",
  "p < 0.05 before correction only",
  "within the seed spread",
}


def test_smallest_p():
  assert sweep.smallest_p(5) == pytest.approx(2 / 252)
  assert sweep.smallest_p(3) == pytest.approx(0.1)
  assert sweep.smallest_p(10) == pytest.approx(2 / 184756)


def test_jumps_above_twice_the_running_minimum(tmp_path):
  members = [
    # 0.1 -> 0.05 -> 0.2 (4x 0.05) -> 0.3 (6x, the same jump, its peak) -> 0.06 -> 0.11 (2.2x).
    member(0, 1e-3, train_loss=[0.1, 0.05, 0.2, 0.3, 0.06, 0.11], validation_loss=constant(1, 6)),
    # Never above twice its running minimum: 0.1, 0.19 (1.9x), 0.05, 0.1 (exactly 2x).
    member(1, 1e-3, train_loss=[0.1, 0.19, 0.05, 0.1, 0.1, 0.1], validation_loss=constant(1, 6)),
  ]
  run = sweep.load_run(write_workdir(tmp_path / "elu", members))
  jumps = sweep.find_jumps(run)
  assert [(j["seed"], j["epoch"], j["value"], j["running_min"]) for j in jumps] == [
    (0, 4.0, 0.3, 0.05),
    (0, 6.0, 0.11, 0.05),
  ]
  assert jumps[0]["ratio"] == pytest.approx(6.0) and jumps[1]["ratio"] == pytest.approx(2.2)
  row = sweep.summarize_run(run)
  assert row["jumps"] == jumps
  assert sweep.unstable_label(row, row["grid"][0]) == "1/2"


def test_noise_values_interpolate_each_seed():
  result = {"levels": [0.0, 2.0], "accuracy": [[0.9, 0.5], [0.8, 0.2]]}
  assert sweep.noise_values(result, "accuracy", 1.0) == pytest.approx([0.7, 0.5])
