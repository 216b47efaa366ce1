"""Tests for the GELU forms study (gelujax.study.forms and forms_report): its paired tests
against SciPy, its verdict rule on hand-made differences, and the study end to end on MNIST-format
files with the real trainer, its swaps (kept as `gelujax.study.wrong_form` rows) checked against a
NumPy forward pass in float64."""

from __future__ import annotations

import dataclasses
import json
import math
import os

import numpy as np
import pytest
import scipy.special
import scipy.stats

from gelujax.study import forms, forms_report, power, registry, runs, stats, wrong_form
from tests.test_reproduce_cli import write_tiny_mnist
from tests.test_results_forms import check_forms_result, one_sided_p


@pytest.mark.parametrize("seed", range(4))
def test_paired_equivalence_matches_the_enumerated_signed_rank_tests(seed):
  rng = np.random.default_rng(seed)
  d = np.round(rng.normal(0.001 * seed, 0.002, 9), 4)  # ties in |d ± margin|, as test errors
  margin = 0.002
  found = stats.paired_equivalence_test(d, margin)
  tost = max(one_sided_p(d + margin, "greater"), one_sided_p(d - margin, "less"))
  beyond = min(1.0, 2 * min(one_sided_p(d - margin, "greater"), one_sided_p(d + margin, "less")))
  assert found.p_equivalent == pytest.approx(tost, abs=1e-12)
  assert found.p_beyond == pytest.approx(beyond, abs=1e-12)
  # Without ties SciPy's own exact test agrees.
  x = rng.normal(0.0, 0.002, 8)
  p = scipy.stats.wilcoxon(x + margin, alternative="greater", method="exact").pvalue
  q = scipy.stats.wilcoxon(x - margin, alternative="less", method="exact").pvalue
  assert stats.paired_equivalence_test(x, margin).p_equivalent == pytest.approx(max(p, q))


def simulated_power(shift, sd, margin, n, equivalent, reps=300):
  rng = np.random.default_rng(1)
  tests = [stats.paired_equivalence_test(rng.normal(shift, sd, n), margin) for _ in range(reps)]
  return np.mean([t.p < 0.05 and t.equivalent == equivalent for t in tests])


@pytest.mark.parametrize(
  ("shift", "sd", "margin", "equivalent"),
  [(0.002, 0.002, 0.001, False), (0.0005, 0.004, 0.002, True)],
  ids=["beyond", "equivalent"],
)
def test_pairs_for_power_gives_about_80_percent_power_by_simulation(shift, sd, margin, equivalent):
  """Where the normal approximation holds (dozens of pairs), the pairs it asks for decide the
  shift about 80% of the time for normal differences with that shift (simulated with the exact
  tests), and half as many decide it less often."""
  rng = np.random.default_rng(0)
  n = power.pairs_for_power(rng.normal(shift, sd, 400), level=0.05, margin=margin)
  assert n is not None and 30 <= n <= 100
  found = simulated_power(shift, sd, margin, n, equivalent)
  assert 0.7 <= found <= 0.92
  assert simulated_power(shift, sd, margin, n // 2, equivalent) < found - 0.1


def outcome(first, second, lr, d, metric=forms.DESIGN.metrics[0], dtype="float32"):
  c = forms.Comparison(first, second, dtype, lr, metric, control=forms.CONTROL in (first, second))
  return forms.paired_outcome(
    c, dict(enumerate(np.zeros(len(d)) + d)), dict.fromkeys(range(len(d)), 0.0)
  )


def test_the_verdict_rule_by_hand():
  tiny = np.linspace(-0.0004, 0.0005, 10)  # every difference well inside ±0.002
  large = np.linspace(0.006, 0.009, 10)  # every one beyond +0.002
  noisy = np.array([0.004, -0.004, 0.003, -0.003, 0.0, 0.001, -0.002, 0.002, 0.005, -0.005])
  judged = forms.judge([
    outcome("gelu_tanh", "gelu", 1e-3, tiny),
    outcome("gelu_sigmoid", "gelu", 1e-3, large),
    outcome("gelu_sigmoid", "gelu_tanh", 1e-3, noisy),
  ])  # fmt: skip
  # One family of 3: Holm multiplies the smallest p by 3, the next by 2.
  # tiny: both one-sided p are 1/1024, p = 2/1024; large: beyond p = 2/1024, p = 4/1024.
  assert [o.equivalence.p for o in judged[:2]] == [2 / 1024, 4 / 1024]
  assert judged[0].p_holm == pytest.approx(3 * 2 / 1024)
  assert judged[1].p_holm == pytest.approx(2 * 4 / 1024)
  assert [o.verdict for o in judged] == ["equivalent", "different", "inconclusive"]
  assert judged[1].direction == "higher" and judged[1].shift == pytest.approx(0.0075)
  assert judged[2].pairs_needed is None or judged[2].pairs_needed > 10
  # The control is a family of its own: a relu comparison does not change the forms' Holm.
  with_control = forms.judge([*judged, outcome("relu", "gelu", 1e-3, large)])
  assert with_control[0].p_holm == judged[0].p_holm
  assert with_control[3].p_holm == pytest.approx(4 / 1024)
  # A diverged network (NaN) drops its pair.
  nan = outcome("gelu_tanh", "gelu", 1e-3, np.r_[tiny[:9], np.nan])
  assert len(nan.seeds) == 9 and 9 not in nan.seeds


def test_the_ratio_metric_compares_logs():
  metric = next(m for m in forms.DESIGN.metrics if m.log)
  c = forms.Comparison("gelu_tanh", "gelu", "float32", 1e-3, metric)
  o = forms.paired_outcome(c, {0: 0.105, 1: 0.21}, {0: 0.1, 1: 0.2})
  np.testing.assert_allclose(o.differences, [math.log(1.05), math.log(1.05)])
  assert metric.shown(o.shift) == pytest.approx(5.0)


def test_the_design_decides_with_its_seeds():
  """Every family of the fixed design can reach its strictest Holm level with its 10 pairs."""
  design = forms.DESIGN
  sizes = {}
  for c in forms.comparisons(design):
    sizes[c.family] = sizes.get(c.family, 0) + 1
  assert set(sizes.values()) == {9, 3}
  assert len(sizes) == 2 * len(design.dtypes) * len(design.metrics)
  for size in sizes.values():
    assert 4 * 0.5 ** len(design.seeds) <= design.alpha / size  # beyond the margin, doubled
  lines = forms_report.design_lines(design)
  assert any("every decision can reach the strictest level" in line for line in lines)


def gelu_forms_np(name, x):
  if name == "gelu":
    return 0.5 * x * (1 + scipy.special.erf(x / math.sqrt(2)))
  if name == "gelu_tanh":
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
  if name == "gelu_sigmoid":
    return x * scipy.special.expit(1.702 * x)
  return np.maximum(x, 0.0)


@pytest.fixture(scope="module")
def tiny_study(tmp_path_factory):
  root = tmp_path_factory.mktemp("forms")
  data = root / "data"
  data.mkdir()
  write_tiny_mnist(data, n_train=5_064, n_test=100)
  design = dataclasses.replace(
    forms.DESIGN, task="tiny_mnist", dataset="mnist", epochs=2, seeds=(0, 1, 2, 3, 4, 5),
    learning_rates=(1e-3, 3e-3),
  )  # fmt: skip
  out = root / "out"
  forms_report.reproduce(design, out=out, root=root, data_dir=str(data), command="the test")
  return design, out, root, data


@pytest.mark.e2e
def test_the_study_end_to_end_writes_every_verdict_and_swap(tiny_study):
  design, out, root, _ = tiny_study
  summary = json.loads((out / "summary.json").read_text())
  assert summary["missing"] == [] and summary["study"] == "gelu_forms"
  assert len(summary["outcomes"]) == len(forms.comparisons(design))
  readme = (out / "README.md").read_text()
  assert (out / forms_report.FIGURE).stat().st_size > 10_000
  assert "Trained with `the test` from a `git worktree` of unknown" in readme
  # Each cell's shift is the paired Hodges-Lehmann of the members' values read here.
  for o in summary["outcomes"]:
    c = o["comparison"]
    metric = next(m for m in design.metrics if m.key == c["metric"]["key"])
    values = []
    for arm in (c["first"], c["second"]):
      members = json.loads((out / "runs" / f"{arm}_{c['dtype']}" / "summary.json").read_text())
      where, key = metric.key.split(".")
      values.append({
        m["seed"]: m[where][key] for m in members["members"]
        if math.isclose(m["learning_rate"], c["learning_rate"])
      })  # fmt: skip
    d = [metric.compared([values[0][s]])[0] - metric.compared([values[1][s]])[0] for s in range(6)]
    walsh = [(d[i] + d[j]) / 2 for i in range(6) for j in range(i, 6)]
    assert o["shift"] == pytest.approx(float(np.median(walsh)), abs=1e-12)
    assert o["p_zero"] == pytest.approx(
      1.0 if not any(d) else min(1.0, 2 * min(one_sided_p(d, "greater"), one_sided_p(d, "less")))
    )
  # Re-rendering from the files alone gives the same README.
  forms_report.reproduce(design, out=out, root=root, train=False)
  assert (out / "README.md").read_text() == readme


@pytest.mark.e2e
def test_swaps_match_a_numpy_forward_pass_in_float64(tiny_study):
  """A float32 gelu network run with each other form, and in bfloat16, kept as the wrong form's
  rows (`gelujax.study.wrong_form`, the one format): each form's change of the test loss and its
  largest change of the logits are those of the restored parameters run through the MLP in NumPy
  with both forms."""
  from gelujax import engine, preprocessing, tasks

  _, out, _, data_dir = tiny_study
  workdir = out / "runs" / "gelu_float32"
  rows = wrong_form.read(out / "wrong_form" / "gelu_float32.json")
  assert not (out / "swaps").exists()
  assert [(r.trained, r.run_with, r.dtype, r.from_dtype) for r in rows] == [
    ("gelu", "gelu_tanh", "float32", None), ("gelu", "gelu_sigmoid", "float32", None),
    ("gelu", "gelu", "bfloat16", "float32"),
  ]  # fmt: skip
  spec = tasks.read_task(str(workdir))
  parts = tasks.build(spec, spec.load_data(str(data_dir)))
  _, state = engine.restore(parts, str(workdir))
  test = parts.splits["test"]
  x0 = np.asarray(preprocessing.scale_pixels(test["inputs"]), np.float64).reshape(
    len(test["targets"]), -1
  )
  params = state.params["params"] if "params" in state.params else state.params
  layers = sorted(params, key=lambda k: int(k.split("_")[-1]))
  summary = json.loads((workdir / "summary.json").read_text())["members"]

  def logits_and_loss(activation, i):
    x = x0
    for j, layer in enumerate(layers):
      x = x @ np.asarray(params[layer]["kernel"][i], np.float64)
      x = x + np.asarray(params[layer]["bias"][i], np.float64)
      if j < len(layers) - 1:
        x = gelu_forms_np(activation, x)
    logp = x - scipy.special.logsumexp(x, axis=1, keepdims=True)
    return x, -np.mean(logp[np.arange(len(x)), test["targets"]])

  for i in (0, len(summary) - 1):
    own, loss = logits_and_loss("gelu", i)
    assert loss == pytest.approx(summary[i]["final"]["test_loss"], rel=1e-4)  # its own form
    for row in rows[:2]:
      other, other_loss = logits_and_loss(row.run_with, i)
      n = row.networks[i]
      assert n.loss_change == pytest.approx(other_loss - loss, abs=1e-4 * loss), row.run_with
      assert n.largest_change == pytest.approx(np.abs(other - own).max(), abs=1e-4)
  assert all(n.largest_change > 0 for n in rows[2].networks)  # bfloat16 is not float32


@pytest.mark.e2e
def test_the_second_code_path_rederives_the_tiny_study(tiny_study):
  """The checks of tests/test_results_forms.py hold on a result made here, and catch a verdict
  cell changed by hand."""
  design, out, _, _ = tiny_study
  options = {
    "lrs": design.learning_rates,
    "metrics": {m.key: (m.margin, m.log) for m in design.metrics},
  }
  check_forms_result(out, **options)
  readme = (out / "README.md").read_text()
  changed = readme.replace("inconclusive (", "**equivalent** (", 1)
  assert changed != readme
  (out / "README.md").write_text(changed)
  try:
    with pytest.raises(AssertionError):
      check_forms_result(out, **options)
  finally:
    (out / "README.md").write_text(readme)


@pytest.mark.e2e
def test_reproduce_py_refuses_to_change_the_fixed_design(tmp_path):
  """--task=gelu_forms takes where it runs, never what it trains; --render of nothing is a
  one-line error; both write nothing."""
  from pathlib import Path

  from run_mains import run_mains

  repo = Path(__file__).resolve().parent.parent
  outs = [tmp_path / "a", tmp_path / "b"]
  ended = run_mains(
    repo / "experiments" / "reproduce.py",
    [
      ["--task=gelu_forms", "--seeds=3", "--learning_rates=1e-3", f"--out={outs[0]}"],
      ["--task=gelu_forms", "--render", f"--out={outs[1]}"],
    ],
    {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(repo)},
    repo,
  )
  assert ended[0].code == (
    "reproduce.py: error: --task gelu_forms trains the design fixed in "
    "gelujax.study.forms.DESIGN before its runs (arms gelu, gelu_tanh, gelu_sigmoid, relu, lrs "
    "0.0003, 0.001, 0.003, 10 seeds, 20 epochs, fashion_mnist); leave out --seeds, "
    "--learning_rates."
  )
  assert ended[1].code.startswith(f"reproduce.py: error: --render: {outs[1] / 'runs'} holds no")
  assert not any(out.exists() for out in outs)


def test_test_error_is_compared_in_whole_images():
  """A rate is compared as a count of the split's examples: one image apart is exactly 1, and
  rates that float arithmetic left a hair apart on the same count do not differ."""
  metric = forms.whole_test_error("")
  first, second = {0: 0.1178, 1: 0.1 + 0.2 - 0.3 + 0.1177}, {0: 0.1177, 1: 0.1177}
  a, b = forms.compared_values(first, second, metric)
  assert [a[s] - b[s] for s in (0, 1)] == [1.0, 0.0]
  assert metric.shown(metric.margin) == pytest.approx(0.2)  # 20 images: 0.2 points
  assert metric.amount("+0.2") == "+0.2 points"
  assert metric.shown_values([0.1177]).tolist() == [pytest.approx(11.77)]


def test_the_powered_design_has_the_seeds_its_pilot_asks_for():
  """POWERED's seed count is what its pilot (the first design's committed float32 grids of gelu
  and gelu_tanh) asks for, its seeds fresh; its families are gelu_tanh − gelu (2 lrs) and the
  control identity − gelu (2 lrs), per metric, in float32."""
  root = os.path.join(os.path.dirname(os.path.dirname(__file__)), "results", "fashion_mnist")
  finished = {
    name: runs.load_run(os.path.join(root, forms.TASK, "runs", name)) for name in forms.PILOT_RUNS
  }
  found = forms.pilot(finished)
  assert found["level"] == pytest.approx(0.025)
  assert found["seeds"] == len(forms.POWERED.seeds)
  assert max(v["pairs_bound"] for v in found["lrs"].values()) > 50  # so 60, not 50
  assert not set(forms.POWERED.seeds) & set(forms.DESIGN.seeds)
  families = {}
  for c in forms.comparisons(forms.POWERED):
    families.setdefault(c.family, []).append((c.first, c.second, c.learning_rate))
  assert families[("forms", "float32", "best.test_error")] == [
    ("gelu_tanh", "gelu", 3e-4), ("gelu_tanh", "gelu", 1e-3)
  ]  # fmt: skip
  assert families[("control", "float32", "best.test_loss")] == [
    ("identity", "gelu", 3e-4), ("identity", "gelu", 1e-3)
  ]  # fmt: skip
  assert len(families) == 4 and registry.get(forms.POWERED_TASK) is forms.POWERED
