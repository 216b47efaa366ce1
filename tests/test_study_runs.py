"""Tests for gelujax.study.runs on workdirs written in the trainer's file formats.

Every expected selection, median, mean and std below is computed by hand from the chosen values.
"""

import json
import math
from pathlib import Path

import numpy as np
import pytest
import scipy.stats

from gelujax import workdir as workdirs
from gelujax.study import runs, tables
from tests.fake_workdirs import constant, member, write_workdir

ROOT = Path(__file__).resolve().parents[1]
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
  return runs.load_run(write_workdir(tmp_path / "gelu", members))


def test_selects_lowest_median_validation(three_lr_run):
  assert runs.select_learning_rate(three_lr_run) == 1e-4


def test_selected_stats_by_hand(three_lr_run):
  row = runs.summarize_run(three_lr_run)
  selected = row.selected
  assert selected.learning_rate == 1e-4
  assert (selected.members, selected.diverged) == (3, 0)
  assert selected.seeds == [0, 1, 2]
  # The best epoch is epoch 2 for every member (validation 0.5 higher at 1, 9.0 at 3).
  assert selected.best_epoch == 2.0
  test_error = selected.metrics["best.test_error"]
  assert test_error.median == pytest.approx(0.06)
  assert test_error.mean == pytest.approx(0.2 / 3)
  # Sample std of (0.05, 0.09, 0.06): sqrt((0.0166..^2 + 0.0233..^2 + 0.0066..^2) / 2).
  assert test_error.std == pytest.approx(math.sqrt(8.6667e-4 / 2), rel=1e-4)
  assert test_error.n == 3
  # The selected lr's members are 3, 4, 5: final train losses 0.04, 0.05, 0.06.
  assert selected.metrics["final.train_loss"].median == pytest.approx(0.05)
  assert selected.metrics["best.validation_loss"].median == pytest.approx(0.16)
  assert selected.metrics["final.validation_loss"].median == pytest.approx(9.0)
  assert [g.select_median for g in row.grid] == pytest.approx([0.20, 0.16, 0.41])
  assert row.select_metric == "validation_loss"
  assert (row.run, row.activation, row.dropout) == ("gelu", "gelu", 0.0)
  assert row.epochs == 3


def test_values_at_the_selected_or_a_given_lr(three_lr_run):
  row = runs.summarize_run(three_lr_run)
  assert row.values(None, "best.test_error") == pytest.approx([0.05, 0.09, 0.06])
  assert row.values(1e-5, "best.test_error") == pytest.approx([0.2, 0.2, 0.2])
  assert row.values(0.5, "best.test_error") == []
  assert three_lr_run.seeds() == [0, 1, 2]


def test_the_one_values_reader_gives_every_seeds_value_by_lr(tmp_path):
  """lr -> seed -> value from the members' summaries (the grid's test errors by hand), NaN for
  a diverged member; one lr alone; another reading of each member where asked."""
  members = grid(
    [[0.3, 0.1, 0.2], [0.15, 0.5, 0.16]],
    test_error=[[0.01, 0.02, 0.03], [0.05, 0.09, 0.06]],
    diverged={4: 2},
  )
  run = runs.load_run(write_workdir(tmp_path / "gelu", members))
  found = runs.values(run, "best.test_error")
  assert list(found) == [1e-3, 1e-4]
  assert found[1e-3] == pytest.approx({0: 0.01, 1: 0.02, 2: 0.03})
  assert found[1e-4][0] == pytest.approx(0.05) and math.isnan(found[1e-4][1])
  assert found[1e-4][2] == pytest.approx(0.06)
  assert runs.lr_values(run, "best.test_error", 1e-3) == pytest.approx({0: 0.01, 1: 0.02, 2: 0.03})
  assert runs.lr_values(run, "best.test_error", 0.5) == {}
  seeds = runs.lr_values(run, "best.test_error", 1e-3, read=lambda m: float(m["seed"]))
  assert seeds == {0: 0.0, 1: 1.0, 2: 2.0}


def test_a_tie_selects_the_smaller_lr_whatever_the_grids_order(tmp_path):
  """Equal medians (0.2 at 1e-3 and at 1e-4; 1e-3 listed first): the smaller lr, 1e-4, as the
  pilots select (it was the earlier lr of the grid here, 1e-3, while the pilots took the
  smaller: one rule selected two ways)."""
  members = grid([[0.1, 0.2, 0.3], [0.3, 0.2, 0.1]])
  run = runs.load_run(write_workdir(tmp_path / "gelu", members))
  assert run.learning_rates()[:2] == [1e-3, 1e-4]
  assert runs.select_learning_rate(run) == 1e-4
  assert runs.choose_lr({3e-4: 0.5, 1e-3: 0.5, 1e-2: 0.6}) == 3e-4
  assert runs.choose_lr({1e-3: None, 1e-4: math.inf}) == 1e-4  # all diverged: never chosen
  assert runs.choose_lr({1e-3: None}) is None


def test_majority_diverged_lr_loses_to_stable_one(tmp_path):
  # lr 1e-3: seeds 0 and 1 diverge, seed 2 reaches 0.01 -> median over (inf, inf, 0.01) = inf.
  members = grid([[0.9, 0.9, 0.01], [0.2, 0.2, 0.2]], diverged={0: 2, 1: 3})
  run = runs.load_run(write_workdir(tmp_path / "relu", members))
  assert runs.select_learning_rate(run) == 1e-4


def test_minority_diverged_lr_selected_and_counted(tmp_path):
  # lr 1e-3: seed 0 diverges at epoch 1 -> median(inf, 0.10, 0.12) = 0.12 < 0.2 of lr 1e-4.
  members = grid(
    [[0.9, 0.10, 0.12], [0.2, 0.2, 0.2]],
    test_error=[[0.5, 0.04, 0.08], [0.1, 0.1, 0.1]],
    diverged={0: 1},
  )
  row = runs.summarize_run(runs.load_run(write_workdir(tmp_path / "elu", members)))
  selected = row.selected
  assert selected.learning_rate == 1e-3
  assert (selected.members, selected.diverged) == (3, 1)
  assert tables.diverged_label(row) == "1/3 diverged"
  # Statistics over the two members that did not diverge.
  assert selected.metrics["best.test_error"].median == pytest.approx(0.06)
  assert selected.metrics["best.test_error"].n == 2
  assert selected.metrics["best.test_error"].std == pytest.approx(0.04 / math.sqrt(2))
  assert row.grid[0].diverged == 1
  table = tables.format_table([row], metric="best.test_error", label="test error (%)", scale=100)
  assert "| elu | 0.001 | 0–2 | 1/3 diverged | 0/3 | – | 6 | 6 ± 2.8 |" in table
  # The selection compares every member, the diverged one as +inf (JSON: null).
  assert row.grid[0].select_values == [math.inf, 0.10, 0.12]


def test_all_diverged_lr_never_selected(tmp_path):
  # lr 1e-3 diverges entirely; lr 1e-4 has 2/3 diverged (median inf) but is still a result.
  members = grid([[0.1, 0.1, 0.1], [0.9, 0.9, 0.3]], diverged={0: 1, 1: 1, 2: 1, 3: 1, 4: 2})
  row = runs.summarize_run(runs.load_run(write_workdir(tmp_path / "relu", members)))
  assert row.selected.learning_rate == 1e-4
  assert tables.diverged_label(row) == "2/3 diverged"
  assert row.selected.metrics["best.validation_loss"].median == pytest.approx(0.3)


def test_everything_diverged(tmp_path):
  members = grid([[0.1, 0.1, 0.1]], diverged={0: 1, 1: 2, 2: 3})
  row = runs.summarize_run(runs.load_run(write_workdir(tmp_path / "relu", members)))
  assert row.selected is None
  assert tables.diverged_label(row) == "3/3 diverged"
  table = tables.format_table([row], metric="best.test_error", label="err", paper={"relu": 0.5})
  assert "| relu | – | – | 3/3 diverged | – | 0.5 | – | – |" in table


def test_no_validation_split_selects_on_test(tmp_path):
  members = [
    member(0, 1e-3, train_loss=constant(0.1), test_loss=[0.5, 0.4, 0.45]),
    member(0, 1e-4, train_loss=constant(0.1), test_loss=[0.5, 0.3, 0.6]),
  ]
  # The spec asks for validation_loss, which the records lack: selection falls back to test_loss.
  run = runs.load_run(write_workdir(tmp_path / "gelu", members, task="mnist_ae"))
  assert runs.selection_metric(run) == "test_loss"
  assert runs.select_learning_rate(run) == 1e-4
  row = runs.summarize_run(run)
  assert row.selected.metrics["final.test_loss"].median == pytest.approx(0.6)
  assert math.isnan(row.selected.metrics["final.test_loss"].std)


def test_median_curve_skips_diverged_members(tmp_path):
  members = [
    member(0, 1e-3, train_loss=[1.0, 0.5, 0.2], validation_loss=constant(1.0)),
    member(1, 1e-3, train_loss=[3.0, 0.1, 0.4], validation_loss=constant(1.0)),
    member(2, 1e-3, train_loss=[2.0, 0.3, 0.3], validation_loss=constant(1.0)),
    member(3, 1e-3, train_loss=[0.0, 0.0, 0.0], validation_loss=constant(1.0), diverged_epoch=3),
    member(0, 1e-4, train_loss=[9.0, 9.0, 9.0], validation_loss=constant(1.0)),
  ]
  run = runs.load_run(write_workdir(tmp_path / "gelu", members))
  curve = runs.median_curve(run, "train_loss", 1e-3)
  np.testing.assert_array_equal(curve.x, [1.0, 2.0, 3.0])
  np.testing.assert_allclose(curve.median, [2.0, 0.3, 0.3])
  np.testing.assert_allclose(curve.low, [1.0, 0.1, 0.2])
  np.testing.assert_allclose(curve.high, [3.0, 0.5, 0.4])
  assert curve.members == 3
  assert runs.median_curve(run, "test_loss", 1e-3) is None


def test_run_name():
  assert runs.run_name("gelu") == "gelu"
  assert runs.run_name("gelu", 0.5) == "gelu_dropout0.5"
  # A spec that is no plain name is a folder's name as train.py makes it: one '_' a run of
  # characters other than letters, digits, '_', '.', '=' and '-'.
  assert runs.run_name("myacts:squareplus") == "myacts_squareplus"
  assert runs.run_name("gaussian_gelu(sigma=0.5)", 0.5) == "gaussian_gelu_sigma=0.5__dropout0.5"
  assert runs.run_name("my.acts:f(b=1, c='x')") == "my.acts_f_b=1_c=_x_"


def test_the_committed_runs_keep_their_names():
  folders = sorted((ROOT / "results").glob("*/*/runs/*/"))
  assert len(folders) > 30
  for folder in folders:
    assert folder.name == workdirs.folder_name(folder.name)


def test_load_run_needs_a_summary(tmp_path):
  partial = write_workdir(tmp_path / "gelu", grid([[0.1, 0.2, 0.3]]), finished=False)
  with pytest.raises(ValueError, match=r"no summary\.json"):
    runs.load_run(partial)


def diverging(diverged_at):
  """Two members over 3 epochs, each diverging at its epoch of ``diverged_at`` (None: never)."""
  return [
    member(seed, 1e-3, diverged_epoch=at, train_loss=[0.5, 0.4, 0.3], validation_loss=[0.3] * 3)
    for seed, at in enumerate(diverged_at)
  ]


def keep_lines(workdir, keep):
  """metrics.jsonl with only the lines (records) that ``keep`` keeps, edited in place."""
  path = workdir / "metrics.jsonl"
  lines = path.read_text().splitlines(keepends=True)
  path.write_text("".join(line for line in lines if keep(json.loads(line))))
  return path


def test_load_run_derives_the_summary_from_the_records_not_summary_json(tmp_path):
  workdir = write_workdir(tmp_path / "gelu", grid([[0.1, 0.2, 0.3]]))
  written = json.loads((workdir / "summary.json").read_text())
  edited = json.loads((workdir / "summary.json").read_text())
  edited["members"][1]["best"]["validation_loss"] = 0.01
  edited["members"][2]["diverged"] = True
  (workdir / "summary.json").write_text(json.dumps(edited))
  assert runs.load_run(workdir).summary == written


def test_a_run_stopped_because_every_member_diverged_loads(tmp_path):
  """The trainer stops after the epoch by which every member has diverged: its records end
  there, before the last epoch its config sets."""
  workdir = write_workdir(tmp_path / "relu", diverging([1, 2]))
  keep_lines(workdir, lambda r: r["epoch"] <= 2)
  run = runs.load_run(workdir)
  assert [(m["diverged"], m["diverged_epoch"]) for m in run.members] == [(True, 1), (True, 2)]
  assert [m["best_epoch"] for m in run.members] == [None, 1.0]
  assert run.summary["epochs"] == 3


def test_records_that_end_early_are_refused_unless_every_member_diverged(tmp_path):
  workdir = write_workdir(tmp_path / "relu", diverging([1, None]))
  path = keep_lines(workdir, lambda r: r["epoch"] <= 2)
  with pytest.raises(ValueError) as error:
    runs.load_run(workdir)
  assert str(error.value).startswith(
    f"{path} holds 2 evaluations of member 0 (seed 0, lr 0.001), up to epoch 2, where the "
    "finished run made 3 of each member (1 an epoch for the 3 epochs its config.json sets; fewer "
    "only where every member had diverged, which stops a run)."
  )


def test_a_repeated_foreign_or_undiverged_record_is_refused(tmp_path):
  workdir = write_workdir(tmp_path / "gelu", diverging([None, 2]))
  path = workdir / "metrics.jsonl"
  lines = path.read_text().splitlines(keepends=True)
  path.write_text("".join([*lines[:2], lines[1], *lines[3:]]))  # member 0's epoch 2, again
  with pytest.raises(
    ValueError,
    match=r"evaluation 3 of member 0 \(seed 0, lr 0\.001\) at epoch 2, where the run made it at "
    r"epoch 3\. The run's summary\.json says it finished",
  ):
    runs.load_run(workdir)
  path.write_text("".join(lines).replace('"seed": 1,', '"seed": 7,', 1))
  with pytest.raises(
    ValueError,
    match=r"holds a record of member 1 \(seed 7, lr 0\.001\) at epoch 1, which is not a member "
    r"of the run's config\.json",
  ):
    runs.load_run(workdir)
  last = lines[-1].replace('"diverged": true', '"diverged": false')
  path.write_text("".join([*lines[:-1], last]))  # member 1's last record, no longer diverged
  with pytest.raises(
    ValueError,
    match=r"marks member 1 \(seed 1, lr 0\.001\) diverged at epoch 2 but not at epoch 3, where",
  ):
    runs.load_run(workdir)


COMMITTED = sorted(p.parent for p in (ROOT / "results").glob("**/metrics.jsonl"))


@pytest.mark.parametrize("workdir", COMMITTED, ids=[str(p.relative_to(ROOT)) for p in COMMITTED])
def test_each_committed_runs_summary_json_is_what_its_records_give(workdir):
  """What a render reads instead of summary.json is what the trainer wrote there."""
  run = runs.load_run(workdir)
  assert run.summary == json.loads((workdir / "summary.json").read_text())


def test_candidate_lrs_are_those_the_rank_sum_test_cannot_tell_from_the_selected():
  """5 seeds a side: lr 1e-4 overlaps the selected 1e-3 in 3 of the 25 pairs (U = 3, p =
  2 x 7/252 = 0.056 >= 0.05): a candidate; 1e-5 in 2 (U = 2, p = 2 x 4/252 = 0.032): not one;
  an lr whose members all diverged: never. Each p is SciPy's exact Mann-Whitney p."""
  selected = [1.0, 2.0, 3.0, 4.0, 5.0]
  close = [3.5, 4.5, 6.0, 7.0, 8.0]  # 3.5 below 4 and 5, 4.5 below 5: U = 3.
  apart = [4.5, 4.8, 7.0, 8.0, 9.0]  # 4.5 and 4.8 below 5 only: U = 2.

  def lr_row(learning_rate, diverged, values):
    return runs.LrRow(learning_rate, 5, diverged, list(range(5)), 1.0, {}, select_values=values)

  grid_ = [
    lr_row(1e-3, 0, selected),
    lr_row(1e-4, 0, close),
    lr_row(1e-5, 0, apart),
    lr_row(1e-6, 5, [None] * 5),
  ]
  found = runs.candidate_lrs(grid_, 1e-3)
  for lr, values in ((1e-4, close), (1e-5, apart)):
    expected = scipy.stats.mannwhitneyu(values, selected, method="exact").pvalue
    assert found[lr] == pytest.approx(expected, rel=1e-12)
  assert found[1e-4] == pytest.approx(2 * 7 / 252) and found[1e-5] == pytest.approx(2 * 4 / 252)
  assert found[1e-3] is None and found[1e-6] is None
  assert list(found) == [1e-3, 1e-4, 1e-5, 1e-6]  # The selected first, then the grid's order.
  assert runs.candidates(found, 1e-3) == [1e-3, 1e-4]
  assert runs.candidate_lrs(grid_, None) == {}


def test_summarize_run_lists_the_candidates(three_lr_run):
  # 3 seeds a side: the smallest p is 0.1, so every lr not wholly diverged is a candidate.
  # Against the selected 1e-4 (0.15, 0.5, 0.16): 1e-3 (0.3, 0.1, 0.2) and 1e-5 (0.4, 0.41,
  # 0.42), SciPy's exact p-values.
  row = runs.summarize_run(three_lr_run)
  assert row.candidates == [1e-4, 1e-3, 1e-5]
  best = [0.15, 0.5, 0.16]
  expected = [scipy.stats.mannwhitneyu(x, best, method="exact").pvalue
              for x in ([0.3, 0.1, 0.2], [0.4, 0.41, 0.42])]  # fmt: skip
  found = [g.candidate_p for g in row.grid]
  assert found[1] is None and found[::2] == pytest.approx(expected)
