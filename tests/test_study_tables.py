"""Tests for gelujax.study.tables: every cell of a table from values chosen by hand."""

import pytest

from gelujax.paper import PAPER
from gelujax.study import noise, runs, tables, verdicts
from gelujax.study.verdicts import Evidence
from tests.fake_workdirs import constant, member, write_workdir


@pytest.fixture
def row(tmp_path):
  # Medians of the best validation losses: 0.20, 0.16, 0.41 -> lr 1e-4 is selected.
  best = [[0.30, 0.10, 0.20], [0.15, 0.50, 0.16], [0.40, 0.41, 0.42]]
  errors = [[0.01, 0.01, 0.01], [0.05, 0.09, 0.06], [0.2, 0.2, 0.2]]
  members = [
    member(
      seed,
      lr,
      train_loss=constant(0.01 * (3 * i + seed + 1)),
      validation_loss=[best[i][seed] + 0.5, best[i][seed], 9.0],
      test_error=constant(errors[i][seed]),
    )
    for i, lr in enumerate((1e-3, 1e-4, 1e-5))
    for seed in range(3)
  ]
  return runs.summarize_run(runs.load_run(write_workdir(tmp_path / "gelu", members)))


def test_format_table_and_grid(row):
  table = tables.format_table(
    [row],
    metric="best.test_error",
    label="test error (%)",
    scale=100,
    paper={"gelu": 0.0612},
    extra=[("final.train_loss", "final train loss", 1.0)],
  )
  lines = table.splitlines()
  assert lines[0] == (
    "| run | lr | seeds | diverged | unstable | paper test error (%) | median test error (%) | "
    "mean ± std test error (%) | final train loss |"
  )
  # Median 6, mean 6.667, std 2.082 (percent); the extra column keeps its own scale.
  assert lines[2] == "| gelu | 0.0001 | 0–2 | 0/3 | 0/3 | 6.12 | 6 | 6.667 ± 2.1 | 0.05 |"
  grid = tables.format_grid([row], metric="best.test_error", label="test error (%)", scale=100)
  assert "| gelu | 0.0001 (selected) | 0/3 | 0/3 | 0.16 (validation_loss) | 6 |" in grid
  assert "| gelu | 0.001 | 0/3 | 0/3 | 0.2 (validation_loss) | 1 |" in grid
  assert "| gelu | 1e-05 | 0/3 | 0/3 | 0.41 (validation_loss) | 20 |" in grid
  # A design that selects no lr (Fig. 4: each lr a hypothesis) marks none, the same numbers.
  unmarked = tables.format_grid(
    [row], metric="best.test_error", label="test error (%)", scale=100, mark_selected=False
  )
  assert "(selected)" not in unmarked
  assert unmarked == grid.replace(" (selected)", "")
  selection = tables.format_table(
    [row], metric="best.test_error", label="e", selection={"gelu": "0.0001 over 0.001"}
  )
  assert selection.splitlines()[0].endswith("| lr selection |")
  assert selection.splitlines()[2].endswith("| 0.0001 over 0.001 |")


def test_noise_table_interpolates_each_seed_then_takes_the_median():
  result = {
    "learning_rate": 1e-3,
    "members": 4,
    "diverged": 1,
    "seeds": [0, 1, 3],
    "levels": [0.0, 2.0, 3.0],
    "accuracy": [[0.98, 0.5, 0.2], [0.96, 0.4, 0.3], [0.90, 0.9, 0.1]],
    "loss": [[0.1, 2.0, 4.0], [0.3, 3.0, 5.0], [0.2, 1.0, 6.0]],
  }
  # a = 1 is halfway from 0 to 2: per seed, accuracy 0.74, 0.68, 0.90 -> median 0.74 (the
  # median curve, 0.96 and 0.5 at a = 0 and 2, would give 0.73); loss 1.05, 1.65, 0.6 -> 1.05.
  assert noise.noise_at(result, "accuracy", 1.0) == pytest.approx(0.74)
  table = tables.format_noise_table({"gelu_tanh_eval": result}, paper={"gelu_tanh": {0.0: 0.98}})
  lines = table.splitlines()
  assert lines[0] == (
    "| run | lr | seeds | diverged | accuracy a=0 (paper) | accuracy a=1 (paper) | "
    "accuracy a=3 (paper) | log loss a=0 | log loss a=1 | log loss a=3 |"
  )
  assert lines[2] == (
    "| gelu_tanh_eval | 0.001 | 0, 1, 3 | 1/4 | 0.96 (0.98) | 0.74 | 0.2 | 0.2 | 1.05 | 5 |"
  )


def test_hypotheses_table_rows():
  first, second, *_ = (h for h in PAPER["mnist"].hypotheses if h.family == "primary")
  # gelu_tanh 1..5 against relu 6..10: no overlap, p = 2 / C(10, 5); differences -9..-1, the
  # 3rd and 23rd of 25 sorted: -8 and -2; median -5. The second waits: Holm counts it as p = 1,
  # so the first's p is multiplied by the family's 2.
  judged = verdicts.judge(
    [first, second],
    lambda h: (
      Evidence((1, 2, 3, 4, 5), (6, 7, 8, 9, 10), "seeds 0–4")
      if h is first
      else "pending: evaluation seeds not trained"
    ),
  )
  lines = tables.format_hypotheses(judged).splitlines()
  assert lines[0] == tables.HYPOTHESES_HEAD
  assert lines[2] == (
    "| 1 | gelu_tanh below relu: final train log loss (nats), dropout 0 | 0.008 vs 0.007 | "
    "– vs – | 3 vs 8 (seeds 0–4; 5 vs 5) | -5 [-8, -2] | 0.0079 | 0.016 | confirmed |"
  )
  assert lines[3] == (
    "| 2 | gelu_tanh below elu: final train log loss (nats), dropout 0 | 0.008 vs 0.013 | – vs – "
    "| – | – | – | – | pending: evaluation seeds not trained |"
  )


def test_a_hypothesis_at_several_pairs_of_candidate_lrs_has_a_row_per_pair():
  (first,) = (h for h in PAPER["mnist"].hypotheses if h.family == "primary" and h.baseline == "relu"
              and h.dropout == 0.5)  # fmt: skip
  pairs = [
    verdicts.Candidate((1e-3, 1e-3), Evidence((1, 2, 3, 4, 5), (6, 7, 8, 9, 10), "s",
                                              caveats=(("epochs", {"epochs": 2, "paper": 50}),))),
    verdicts.Candidate((1e-4, 1e-3), "pending: evaluation seeds not trained at candidate lr x"),
  ]  # fmt: skip
  (verdict,) = verdicts.judge([first], lambda _: pairs)
  lines = tables.format_hypotheses([verdict]).splitlines()
  assert lines[2] == (
    "| 1 | gelu_tanh below relu: final train log loss (nats), dropout 0.5 | 0.044 vs 0.35 | 2 "
    "pairs of candidate lrs | – | – | – | – | pending: evaluation seeds not trained at candidate "
    "lr x; caveats: judged at epoch 2 of the paper's 50 |"
  )  # The verdict's row carries the caveats of every pair judged.
  # Holm over the 2 pairs: 2 x 2/252 = 0.016.
  assert lines[3] == (
    "| 1a | | | 0.001 vs 0.001 | 3 vs 8 (s; 5 vs 5) | -5 [-8, -2] | 0.0079 | 0.016 | confirmed; "
    "caveats: judged at epoch 2 of the paper's 50 |"
  )
  assert lines[4] == (
    "| 1b | | | 0.0001 vs 0.001 | – | – | – | – | pending: evaluation seeds not trained at "
    "candidate lr x |"
  )
  assert len(lines) == 5
