"""Tests for gelujax.study.analysis and the evidence it judges (gelujax.study.evidence): which
seeds each hypothesis is tested on, the fixed-lr sensitivity, the selections and the paper
values that contradict their claim."""

import dataclasses
import math

import numpy as np
import pytest
import scipy.stats

from gelujax.paper import PAPER, PRIMARY, SECONDARY, Design
from gelujax.study import analysis, evidence, runs, verdicts
from gelujax.study.evidence import RunValues

SELECT = Design(tuple(range(100, 105)))
ALL_LRS = Design((3, 4, 5), select_lr=False)
LOSS = "final.train_loss"


def run(
  activation,
  selection,
  evaluation,
  selected=1e-3,
  dropout=0.0,
  evaluation_seeds=(),
  key=LOSS,
  candidates=(),
  facts=None,
):
  """A run's values: lists of values in seed order (selection seeds 0, 1, ...; evaluation seeds
  ``evaluation_seeds``, or 100, 101, ...), or a pending reason for the run or an lr."""

  def seeded(values, first):
    if isinstance(values, str):
      return values
    seeds = list(evaluation_seeds) if first == 100 and evaluation_seeds else None
    return {key: dict(zip(seeds or range(first, first + len(values)), values, strict=True))}

  return RunValues(
    activation if dropout == 0 else f"{activation}_dropout{dropout:g}",
    activation,
    dropout,
    selected,
    {lr: seeded(v, 0) for lr, v in selection.items()},
    evaluation if isinstance(evaluation, str) else {lr: seeded(v, 100) for lr, v in
                                                    evaluation.items()},
    (0, 1, 2),
    evaluation_seeds,
    tuple(selection),
    candidates,
    facts or {},
  )  # fmt: skip


def first_primary(task="mnist"):
  return next(h for h in PAPER[task].hypotheses if h.family == PRIMARY)


def test_selected_lr_hypotheses_use_the_evaluation_seeds_only():
  h = first_primary()  # gelu_tanh below relu, dropout 0.
  values = [
    run("gelu_tanh", {1e-3: [9, 9, 9], 1e-4: [1, 2, 3]}, {1e-4: [1, 2, 3, 4, 5]}, 1e-4,
        evaluation_seeds=range(100, 105)),
    run("relu", {1e-3: [5, 5, 5]}, {1e-3: [6, 7, 8, 9, 10]}, evaluation_seeds=range(100, 105)),
  ]  # fmt: skip
  found = evidence.gather(h, values, SELECT)
  assert (found.gelu, found.baseline) == ((1, 2, 3, 4, 5), (6, 7, 8, 9, 10))
  assert found.seeds == "evaluation seeds 100–104 at the selected lr"
  # Without the evaluation run: pending, never the selection seeds under the same name.
  values[1] = run("relu", {1e-3: [5, 5, 5]}, evidence.PENDING_EVALUATION)
  assert evidence.gather(h, values, SELECT) == "pending: evaluation seeds not trained"
  assert evidence.gather(h, values[:1], SELECT) == "not run: no relu run with dropout 0"


def test_unselected_lrs_are_tested_on_the_grid_and_evaluation_seeds_together():
  h = next(x for x in PAPER["mnist_ae"].hypotheses if x.learning_rate == 1e-4)
  options = {"evaluation_seeds": (3, 4, 5), "key": h.metric}
  values = [
    run(
      "gelu_tanh", {1e-3: [0, 0, 0], 1e-4: [1, 2, 3]}, {1e-3: [0] * 3, 1e-4: [4, 5, 6]}, **options
    ),
    run("relu", {1e-3: [0, 0, 0], 1e-4: [7, 8, 9]}, {1e-3: [0] * 3, 1e-4: [10, 11, 12]}, **options),
  ]
  found = evidence.gather(h, values, ALL_LRS)
  assert found.gelu == (1, 2, 3, 4, 5, 6) and found.baseline == (7, 8, 9, 10, 11, 12)
  assert found.seeds == "seeds 0–5"
  values[0] = run("gelu_tanh", {1e-4: [1, 2, 3]}, evidence.PENDING_EVALUATION, key=h.metric)
  assert evidence.gather(h, values, ALL_LRS) == evidence.PENDING_EVALUATION
  # A design without evaluation seeds tests the grid's own.
  values = [
    run("gelu_tanh", {1e-4: [1, 2, 3]}, {}, key=h.metric),
    run("relu", {1e-4: [7, 8, 9]}, {}, key=h.metric),
  ]
  found = evidence.gather(h, values, Design((), select_lr=False))
  assert found.gelu == (1, 2, 3) and found.seeds == "seeds 0–2"


def test_sensitivity_sets_each_shared_lr_against_the_selected_lr_result():
  h = first_primary()
  # Selected: gelu_tanh at 1e-4 lies above relu at 1e-3 (shift +); at the shared lr 1e-3
  # gelu_tanh lies below (shift -): disagrees; at 1e-4 above: agrees.
  values = [
    run("gelu_tanh", {1e-3: [1, 2, 3], 1e-4: [20, 21, 22]}, "pending: x", 1e-4),
    run("relu", {1e-3: [10, 11, 12], 1e-4: [15, 16, 17]}, "pending: x", 1e-3),
  ]
  (verdict,) = verdicts.judge([h], lambda x: evidence.gather(x, values, SELECT))
  found = analysis.sensitivity(h, values, verdict)
  reference, source = found.reference
  assert source == "selection seeds" and reference.shift == 10
  assert found.selected_lrs == (1e-4, 1e-3)
  assert found.at_lr[1e-3].shift == -9 and found.agrees(1e-3) is False
  assert found.at_lr[1e-4].shift == 5 and found.agrees(1e-4) is True
  # With the evaluation seeds trained, the reference is their comparison.
  values = [
    run("gelu_tanh", {1e-3: [1, 2, 3], 1e-4: [20, 21, 22]}, {1e-4: [1, 2, 3]}, 1e-4),
    run("relu", {1e-3: [10, 11, 12], 1e-4: [15, 16, 17]}, {1e-3: [5, 6, 7]}, 1e-3),
  ]
  (verdict,) = verdicts.judge([h], lambda x: evidence.gather(x, values, SELECT))
  found = analysis.sensitivity(h, values, verdict)
  assert found.reference[1] == "evaluation seeds" and found.reference[0].shift == -4
  assert found.agrees(1e-3) is True and found.agrees(1e-4) is False


def test_the_fig2_no_dropout_paper_values_contradict_the_text():
  found = analysis.contradictions(PAPER["mnist"].hypotheses)
  # The figure's GELU 0.008 lies above ReLU's 0.007 though the text claims it lowest; against
  # ELU (0.013) and with dropout (0.044 vs 0.35, 0.105) the values agree with the claim.
  assert [(h.baseline, h.dropout, h.paper) for h in found] == [("relu", 0.0, (0.008, 0.007))]
  assert (
    analysis.contradictions([h for h in PAPER["mnist"].hypotheses if h.family == SECONDARY]) == []
  )


def test_selections_compare_the_runner_up():
  def lr_row(learning_rate, diverged, values):
    return runs.LrRow(learning_rate, 3, diverged, [0, 1, 2], 1.0, {}, select_values=values)

  grid = [lr_row(1e-3, 0, [0.3, 0.1, 0.2]), lr_row(1e-4, 0, [0.15, 0.5, 0.16])]
  grid.append(lr_row(1e-5, 3, [None] * 3))
  row = runs.RunRow("gelu", "gelu", 0.0, 3, "validation_loss", grid[1], grid, [1e-4])
  (entry,) = analysis.selections([row])
  assert (entry.selected, entry.runner_up, entry.lrs) == (1e-4, 1e-3, 3)
  assert entry.comparison.a == (0.15, 0.5, 0.16)


def test_exploratory_uses_evaluation_seeds_where_both_runs_have_them():
  metrics = [analysis.Metric(LOSS, "loss")]
  values = [
    run("gelu", {1e-3: [1, 2, 3]}, {1e-3: [4, 5, 6]}),
    run("silu", {1e-3: [1, 2, 3]}, evidence.PENDING_EVALUATION),
    run("relu", {1e-3: [7, 8, 9]}, {1e-3: [10, 11, 12]}),
  ]
  found = analysis.exploratory(values, metrics, SELECT)
  assert [(e.run, e.baseline, e.seeds) for e in found] == [
    ("gelu", "relu", "evaluation seeds"),
    ("silu", "relu", "selection seeds"),
    ("silu", "gelu", "selection seeds"),
  ]
  assert found[0].comparison.a == (4, 5, 6) and found[1].comparison.a == (1, 2, 3)


def test_every_other_activation_is_compared_with_the_gelus_seed_by_seed():
  """A user's activation against the baselines and against gelu and gelu_tanh (the issue's
  user ran the protocol for that comparison); each pair of runs once; paired on the seeds both
  trained, the paired shift and interval as NumPy and SciPy give them."""
  metrics = [analysis.Metric(LOSS, "loss")]
  gelu = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
  d = [0.1, -0.2, 0.3, 0.4, 0.5, 0.6]
  values = [
    run("gelu", {1e-3: [1, 2]}, {1e-3: gelu}),
    run("gelu_tanh", {1e-3: [1, 2]}, {1e-3: [x + 0.01 for x in gelu]}),
    run("relu", {1e-3: [7, 8]}, {1e-3: [x + 1 for x in gelu]}),
    run("myacts:squareplus", {1e-3: [1, 2]}, {1e-3: [x + y for x, y in zip(gelu, d, strict=True)]}),
  ]
  found = analysis.exploratory(values, metrics, SELECT)
  assert [(e.run, e.baseline) for e in found] == [
    ("gelu", "relu"), ("gelu", "gelu_tanh"), ("gelu_tanh", "relu"),
    ("myacts:squareplus", "relu"), ("myacts:squareplus", "gelu"),
    ("myacts:squareplus", "gelu_tanh"),
  ]  # fmt: skip
  mine = found[4]
  assert mine.seeds == "evaluation seeds" and mine.paired.seeds == tuple(range(100, 106))
  assert mine.paired.differences == pytest.approx(d, abs=1e-12)
  walsh = [(d[i] + d[j]) / 2 for i in range(6) for j in range(i, 6)]
  assert mine.paired.shift == pytest.approx(np.median(walsh), abs=1e-12)
  # 6 pairs: P(T+ = 0) = 1/64 is the only tail at most 0.025, so the interval runs from the
  # smallest Walsh average to the largest (the smallest and largest difference).
  assert (mine.paired.low, mine.paired.high) == pytest.approx((min(d), max(d)), abs=1e-12)
  assert mine.paired.confidence == pytest.approx(1 - 2 / 64)
  assert mine.paired.p == pytest.approx(scipy.stats.wilcoxon(d, method="exact").pvalue)
  # Unpaired beside it: 6 against 6 values.
  assert mine.comparison.b == tuple(gelu) and math.isfinite(mine.comparison.low)
  # Pairs only where the seeds match: evaluation seeds 102-107 share 102-105 with gelu's.
  squareplus = [x + y for x, y in zip(gelu, d, strict=True)]
  shifted = run(
    "myacts:squareplus", {1e-3: [1, 2]}, {1e-3: squareplus}, evaluation_seeds=range(102, 108)
  )
  (only,) = analysis.exploratory([values[0], shifted], metrics, SELECT)
  assert only.paired.seeds == (102, 103, 104, 105)
  assert only.paired.differences == pytest.approx(
    [a - b for a, b in zip(squareplus, gelu[2:], strict=False)], abs=1e-12
  )
  # Other references: none of them trained here leaves the baselines alone.
  chosen = analysis.exploratory(values, metrics, SELECT, references=("silu",))
  assert [(e.run, e.baseline) for e in chosen] == [
    ("gelu", "relu"), ("gelu_tanh", "relu"), ("myacts:squareplus", "relu")
  ]  # fmt: skip


@pytest.mark.parametrize("task", sorted(PAPER))
def test_every_hypothesis_names_a_gelu_run_and_a_baseline(task):
  for h in PAPER[task].hypotheses:
    assert h.gelu == "gelu_tanh" and h.baseline in ("relu", "elu")
    assert h.family in (PRIMARY, SECONDARY)
    assert (h.margin is not None) == (h.direction == "equivalent")


def test_a_hypothesis_is_tested_at_every_pair_of_candidate_lrs():
  h = first_primary()  # gelu_tanh below relu, dropout 0.
  seeds = {"evaluation_seeds": range(100, 105)}
  values = [
    run("gelu_tanh", {1e-3: [1, 2, 3], 1e-4: [1, 2, 3]}, {1e-4: [1, 2, 3, 4, 5],
        1e-3: evidence.PENDING_EVALUATION}, 1e-4, candidates=(1e-4, 1e-3), **seeds),
    run("relu", {1e-3: [5, 5, 5], 1e-4: [9, 9, 9]}, {1e-3: [6, 7, 8, 9, 10]},
        candidates=(1e-3,), **seeds),
  ]  # fmt: skip
  assert evidence.candidate_pairs(h, values, SELECT) == [(1e-4, 1e-3), (1e-3, 1e-3)]
  # The earlier design: the selected lrs alone.
  earlier = dataclasses.replace(SELECT, candidates=False)
  assert evidence.candidate_pairs(h, values, earlier) == [(1e-4, 1e-3)]
  selected, other = evidence.candidate_evidence(h, values, SELECT)
  assert selected.learning_rates == (1e-4, 1e-3)
  assert selected.evidence.seeds == "evaluation seeds 100–104 at the selected lr"
  assert selected.evidence.gelu_seeds == (100, 101, 102, 103, 104)
  assert (
    other.evidence == "pending: evaluation seeds not trained at candidate lr 0.001 of gelu_tanh"
  )
  (verdict,) = verdicts.judge([h], lambda x: evidence.candidate_evidence(x, values, SELECT))
  assert verdict.verdict == verdicts.PENDING
  assert evidence.untrained_runs(h, verdict, values, SELECT) == [
    ("gelu_tanh", 1e-3, "gelu_tanh_eval_lr0.001")
  ]
  # Trained: the pair at other lrs names them.
  values[0] = run("gelu_tanh", {1e-3: [1, 2, 3], 1e-4: [1, 2, 3]},
                  {1e-4: [1, 2, 3, 4, 5], 1e-3: [11, 12, 13, 14, 15]}, 1e-4,
                  candidates=(1e-4, 1e-3), **seeds)  # fmt: skip
  _, other = evidence.candidate_evidence(h, values, SELECT)
  assert other.evidence.seeds == "evaluation seeds 100–104 at lrs 0.001 vs 0.001"
  assert other.evidence.gelu == (11, 12, 13, 14, 15)
  (verdict,) = verdicts.judge([h], lambda x: evidence.candidate_evidence(x, values, SELECT))
  # Holm over the 2 pairs: 2 x 2/252 = 0.016 each; below at one, above at the other.
  assert [o.verdict for o in verdict.outcomes] == [verdicts.CONFIRMED, verdicts.REFUTED]
  assert verdict.verdict == verdicts.DEPENDS


def test_analyse_keeps_the_earlier_designs_verdicts_where_the_candidates_change_it():
  values = [
    run("gelu_tanh", {1e-3: [1, 2, 3], 1e-4: [1, 2, 3]},
        {1e-4: [1, 2, 3, 4, 5], 1e-3: [11, 12, 13, 14, 15]}, 1e-4, candidates=(1e-4, 1e-3)),
    run("relu", {1e-3: [5, 5, 5]}, {1e-3: [6, 7, 8, 9, 10]}, candidates=(1e-3,)),
  ]  # fmt: skip
  options = {"selection_rows": [], "metrics": [], "command": "python x.py"}
  found = analysis.analyse("mnist", values, SELECT, **options)
  assert found.changed() and found.command == "python x.py"
  assert [v.verdict for v in found.primary[:1]] == [verdicts.DEPENDS]
  # The earlier design: the selected lrs alone, one test per hypothesis (Holm over the 4).
  earlier = found.earlier_primary[0]
  assert earlier.verdict == verdicts.CONFIRMED and earlier.single.learning_rates == (1e-4, 1e-3)
  assert earlier.holm == pytest.approx(4 * 2 / 252)
  # Every run with one candidate: nothing changed, no earlier verdicts kept.
  values = [dataclasses.replace(v, candidates=v.candidates[:1]) for v in values]
  found = analysis.analyse("mnist", values, SELECT, **options)
  assert not found.changed() and found.earlier_primary == []


def test_caveats_a_verdict_carries():
  h = first_primary()  # final.train_loss: a value after the last epoch.
  fall = {"median": 0.01, "start": 40.0, "epoch": 50.0}
  learns_not = {"median": 0.49, "chance": 0.9, "classes": 10}
  values = [
    run("gelu_tanh", {1e-3: [1, 2, 3]}, {1e-3: [1, 2, 3]},
        facts={1e-3: {"falling": {"train_loss": fall}, "not_learning": None}}),
    run("relu", {1e-3: [5, 5, 5]}, {1e-3: [6, 7, 8]},
        facts={1e-3: {"falling": {"train_loss": {**fall, "median": 0.002}},
                      "not_learning": learns_not}}),
  ]  # fmt: skip
  e = evidence.gather(h, values, SELECT, None, {"epochs": {"epochs": 20, "paper": 250}})
  assert e.caveats == (
    ("falling", {"metric": "train_loss", "start": 40.0, "epoch": 50.0, "gelu": 0.01,
                 "baseline": 0.002}),
    ("not_learning", {"run": "relu", "learning_rate": 1e-3, **learns_not}),
    ("epochs", {"epochs": 20, "paper": 250}),
  )  # fmt: skip
  # Below the share (1%) in both runs, the paper's epochs, a metric at the best epoch: none.
  slow = {1e-3: {"falling": {"train_loss": {**fall, "median": 0.0099}}}}
  values = [dataclasses.replace(v, facts=slow) for v in values]
  assert (
    evidence.gather(h, values, SELECT, None, {"epochs": {"epochs": 50, "paper": 50}}).caveats == ()
  )
  secondary = next(x for x in PAPER["mnist"].hypotheses if x.metric == "best.test_error")
  facts = {1e-3: {"falling": {"test_error": fall, "train_loss": fall}}}
  values = [
    run(a, {1e-3: [1, 2, 3]}, {1e-3: [1, 2, 3]}, key=secondary.metric, facts=facts)
    for a in ("gelu_tanh", "relu")
  ]
  assert evidence.gather(secondary, values, SELECT).caveats == ()


def test_values_without_their_seeds_are_refused():
  with pytest.raises(ValueError, match="3 values for 2 seeds"):
    evidence.seeded([1.0, 2.0, 3.0], [0, 1])
  assert evidence.seeded({5: 1.0}, []) == {5: 1.0}


def test_the_method_states_the_tie_rule_the_trainer_applies():
  """A member whose validation error ties at epochs 2 and 4 (0.1 both, by hand): the trainer's
  summary takes epoch 2, the earliest, and the method paragraph of every paper result says
  that a tie takes the earliest of the tied epochs."""
  from gelujax.study import best, method
  from gelujax.workdir import records as workdir_records

  rows = [
    {"member": 0, "epoch": e, "validation_error": v, "test_error": t}
    for e, v, t in ((1, 0.3, 0.31), (2, 0.1, 0.12), (3, 0.2, 0.21), (4, 0.1, 0.11))
  ]
  config = {
    "members": [{"seed": 0, "learning_rate": 1e-3}], "task": "mnist", "dataset": "mnist",
    "activation": "gelu", "spec": {"epochs": 4},
  }  # fmt: skip
  summary = workdir_records.summarize(config, rows, [None], "validation_error")
  assert summary["members"][0]["best_epoch"] == 2
  assert best.best_record(rows, "validation_error")["epoch"] == 2
  values = [
    run("gelu_tanh", {1e-3: [1, 2, 3]}, {1e-3: [1, 2, 3, 4, 5]}),
    run("relu", {1e-3: [5, 5, 5]}, {1e-3: [6, 7, 8, 9, 10]}),
  ]
  options = {"selection_rows": [], "metrics": [], "command": "python x.py"}
  text = method.method("mnist", analysis.analyse("mnist", values, SELECT, **options))
  assert "where epochs tie on it, the earliest of the tied epochs (" in text
