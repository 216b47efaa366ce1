"""Tests for what the wrong GELU form costs (gelujax.study.wrong_form) and the engine's outputs
(gelujax.engine.predict_members), on tiny runs trained with the exact GELU.

Every expected value comes from NumPy in float64: the tiny MLP's logits from the restored
parameters (the forms by scipy.special.erf, numpy.tanh and numpy.exp), each network's statistics
from those logits, and the summary's interval from the signed-rank null distribution enumerated
over every sign assignment. The splits are made so that the statistics say something: points
placed where a network's argmax turns with the form (so the agreement and the error change),
clear of float32 rounding; in the token case, padding that would change every statistic if it
counted.

Tolerances: in float32 the logits agree to 1e-5 (the measured error is 5e-7 for logits up to
about 4), a change of the logits or of the mean loss to 2e-6, a count (error, agreement)
exactly. bfloat16 (8 bits of mantissa) computes the logits to within `BF16_LOGITS` of float64.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json

import jax
import numpy as np
import pytest
import scipy.special
from tiny_task import make_splits, tiny, tiny_like, write_mnist_files

from gelujax import engine, tasks
from gelujax.engine import mesh
from gelujax.members import Members
from gelujax.objectives import TokenClassification
from gelujax.study import wrong_form

LOGITS_RTOL = LOGITS_ATOL = 1e-5  # float32 logits against float64
CHANGE_ATOL = 2e-6  # float32: a difference of two logits, or of two mean losses
# bfloat16 logits against float64: measured 0.019 for the tiny MLP's logits (up to about 4).
BF16_LOGITS = 0.06
# The least top-1 margin of a counted position, under either form, in every network: clear of
# float32 rounding (5e-7), so that float32 and float64 take the same argmax.
MARGIN = 1e-5


def gelu(h):
  return 0.5 * h * (1.0 + scipy.special.erf(h / np.sqrt(2.0)))


def gelu_tanh(h):
  return 0.5 * h * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (h + 0.044715 * h**3)))


def gelu_sigmoid(h):
  return h / (1.0 + np.exp(-1.702 * h))


FORMS = {"gelu": gelu, "gelu_tanh": gelu_tanh, "gelu_sigmoid": gelu_sigmoid}

# The trained run: the tiny MLP with the exact GELU, six networks (an interval needs six pairs).
TRAINED = tiny(model_options={"activation": "gelu"}, learning_rates=[1e-2, 3e-3], seeds=3)


def run_with(activation: str, dtype: str | None = None, parts=TRAINED):
  """``parts`` with another activation (and compute dtype)."""
  options = {"activation": activation, **({"dtype": dtype} if dtype else {})}
  return tiny_like(parts, model_options=options)


def scaled(inputs) -> np.ndarray:
  """The tiny task's inputs as its objective scales them, in float64."""
  return (np.asarray(inputs, np.float64) - 128.0) / 64.0


def numpy_logits(params, activation: str, z) -> np.ndarray:
  """Every network's logits in float64, ``[M, *positions, classes]``, of scaled inputs
  ``z`` ``[*positions, 6]``."""
  dense0, dense1 = params["Dense_0"], params["Dense_1"]
  out = []
  for m in range(len(dense0["kernel"])):
    h = z @ dense0["kernel"][m] + dense0["bias"][m]
    out.append(FORMS[activation](h) @ dense1["kernel"][m] + dense1["bias"][m])
  return np.stack(out)


def margins(logits) -> np.ndarray:
  """The top-1 logit minus the top-2, per position."""
  top = np.sort(logits, axis=-1)
  return top[..., -1] - top[..., -2]


def numpy_cross_entropy(logits, targets) -> np.ndarray:
  shifted = logits - logits.max(axis=-1, keepdims=True)
  log_probs = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
  tags = np.broadcast_to(np.maximum(targets, 0), logits.shape[:-1])  # tag 0 at padding
  return -np.take_along_axis(log_probs, tags[..., None], axis=-1)[..., 0]


def numpy_costs(logits_a, logits_b, targets, counted) -> dict[str, np.ndarray]:
  """Each network's statistics, [M] each, over the ``counted`` positions only."""
  a, b = logits_a[:, counted], logits_b[:, counted]  # [M, P, classes]
  y = np.asarray(targets)[counted]
  return {
    "error_change": (b.argmax(-1) != y).mean(1) - (a.argmax(-1) != y).mean(1),
    "loss_change": numpy_cross_entropy(b, y).mean(1) - numpy_cross_entropy(a, y).mean(1),
    "largest_change": np.abs(b - a).max(axis=(1, 2)),
    "mean_change": np.abs(b - a).mean(axis=(1, 2)),
    "agreement": (a.argmax(-1) == b.argmax(-1)).mean(1),
  }


def numpy_summary(values) -> dict[str, float]:
  """Median, mean, the median of the Walsh averages and its interval at the largest order k
  with P(T+ <= k - 1) <= 2.5%, T+ the signed-rank sum enumerated over all 2^n signs."""
  x = np.asarray(values, np.float64)
  n = len(x)
  walsh = np.sort([(x[i] + x[j]) / 2 for i in range(n) for j in range(i, n)])
  signs = np.array(list(itertools.product((0, 1), repeat=n)))
  sums = signs @ np.arange(1, n + 1)  # T+ of every sign assignment
  tail = [np.mean(sums <= t) for t in range(n * (n + 1) // 2 + 1)]
  k = max((t + 1 for t in range(len(tail)) if tail[t] <= 0.025), default=0)
  assert k >= 1, "too few networks for an interval"
  return {
    "median": np.median(x),
    "mean": np.mean(x),
    "centre": np.median(walsh),
    "low": walsh[k - 1],
    "high": walsh[len(walsh) - k],
    "confidence": 1.0 - 2.0 * tail[k - 1],
  }


def flip_points(params, a: str, b: str, base_z, per_network: int = 2) -> tuple[list, list]:
  """Inputs (float32, the task's 0-255 scale) where a network's argmax under form ``a``
  differs from that under ``b`` with both margins at least `MARGIN` and every other network's
  margins too: found on segments between ``base_z`` points of different classes, at the
  boundary (bisected in float64) and stepped off it. Returns the inputs and, for each, the
  class under ``a`` of the network it was placed for."""
  found, classes = [], []
  for m in range(len(params["Dense_0"]["kernel"])):
    placed = 0
    classes_a = numpy_logits(params, a, base_z)[m].argmax(-1)
    for i, j in itertools.product(range(len(base_z)), repeat=2):
      if placed == per_network:
        break
      if classes_a[i] == classes_a[j]:
        continue
      p0, step = base_z[i], base_z[j] - base_z[i]

      def side(t, m=m, p0=p0, step=step, c=classes_a[i]):
        return numpy_logits(params, a, (p0 + t * step)[None])[m, 0].argmax() == c

      low, high = 0.0, 1.0
      for _ in range(60):
        low, high = ((low + high) / 2, high) if side((low + high) / 2) else (low, (low + high) / 2)
      for offset in np.concatenate([-np.geomspace(1e-8, 1e-2, 120), np.geomspace(1e-8, 1e-2, 120)]):
        u = np.float32(64.0 * (p0 + (low + offset) * step) + 128.0)
        z = scaled(u)[None]
        la, lb = numpy_logits(params, a, z)[:, 0], numpy_logits(params, b, z)[:, 0]
        if la[m].argmax() != lb[m].argmax() and min(margins(la).min(), margins(lb).min()) >= MARGIN:
          found.append(u)
          classes.append(int(la[m].argmax()))
          placed += 1
          break
    assert placed == per_network, f"no boundary of network {m} turns between {a} and {b}"
  return found, classes


def check_costs(found: wrong_form.WrongForm, expected: dict[str, np.ndarray], atol) -> None:
  for name in wrong_form.STATISTICS:
    got = [getattr(n, name) for n in found.networks]
    tolerance = 0.0 if name in ("error_change", "agreement") else atol
    np.testing.assert_allclose(got, expected[name], rtol=0, atol=tolerance, err_msg=name)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
  """The trained run's grid, state and parameters (float64)."""
  workdir = str(tmp_path_factory.mktemp("gelu") / "run")
  engine.fit(TRAINED, workdir, progress=False)
  members, state = engine.restore(TRAINED, workdir)
  return members, state, jax.tree.map(np.float64, state.params)


def flip_split(params, b: str) -> dict[str, np.ndarray]:
  """The tiny task's test split (the points with a clear margin in every network, under both
  forms) and, for every network, two points where its argmax turns between gelu and ``b``,
  labelled with its class under gelu (so the wrong form errs there), in float32 inputs."""
  base = make_splits()["test"]
  z = scaled(base["inputs"])
  clear = np.all(margins(numpy_logits(params, "gelu", z)) >= MARGIN, axis=0)
  clear &= np.all(margins(numpy_logits(params, b, z)) >= MARGIN, axis=0)
  points, classes = flip_points(params, "gelu", b, z[clear])
  return {
    "inputs": np.concatenate([base["inputs"][clear].astype(np.float32), np.stack(points)]),
    "targets": np.concatenate([base["targets"][clear], classes]).astype(np.int32),
  }


def test_predict_members_gives_every_networks_logits_of_its_parts_in_batches(trained, monkeypatch):
  """The logits of each member, of the parts' own activation, on a split in several
  evaluation batches, the last padded (the padding dropped)."""
  members, state, params = trained
  monkeypatch.setattr(mesh, "EVAL_BATCH", 8)  # 30 examples: 4 batches of 8, 2 of them padding
  split = make_splits()["test"]
  for activation in ("gelu", "gelu_sigmoid"):
    outputs = engine.predict_members(run_with(activation), state, split)
    assert outputs.shape == (len(members), 30, 3) and outputs.dtype == np.float32
    expected = numpy_logits(params, activation, scaled(split["inputs"]))
    np.testing.assert_allclose(outputs, expected, rtol=LOGITS_RTOL, atol=LOGITS_ATOL)


@pytest.mark.parametrize("b", ["gelu_tanh", "gelu_sigmoid"])
def test_the_costs_of_the_wrong_form_match_numpy_in_float32(trained, b):
  members, state, params = trained
  split = flip_split(params, b)
  z = scaled(split["inputs"])
  logits_a, logits_b = numpy_logits(params, "gelu", z), numpy_logits(params, b, z)
  counted = np.ones(len(z), bool)
  expected = numpy_costs(logits_a, logits_b, split["targets"], counted)
  # What makes a break visible: every network turns somewhere and errs more there; the changes
  # lie well beyond the tolerances (A and B swapped would change their signs).
  assert np.all(expected["agreement"] < 1) and np.all(expected["error_change"] > 0)
  assert np.all(np.abs(expected["loss_change"]) > 2 * CHANGE_ATOL)
  assert np.all(expected["largest_change"] > 50 * CHANGE_ATOL)

  found = wrong_form.measure(run_with("gelu"), run_with(b), members, state, split)
  assert (found.trained, found.run_with, found.dtype) == ("gelu", b, "float32")
  assert [(n.learning_rate, n.seed) for n in found.networks] == list(members)
  assert not any(n.diverged for n in found.networks)
  check_costs(found, expected, CHANGE_ATOL)
  # The paired summary over the six networks, against the reference values.
  for name in wrong_form.STATISTICS:
    summary, want = found.statistic(name), numpy_summary(expected[name])
    assert summary.n == len(members)
    exact = name in ("error_change", "agreement")
    for key, value in want.items():
      tolerance = 1e-12 if exact or key == "confidence" else CHANGE_ATOL
      assert getattr(summary, key) == pytest.approx(value, abs=tolerance), (name, key)
  assert json.loads(json.dumps(found.to_json(), allow_nan=False))["run_with"] == b


def test_the_summary_leaves_out_diverged_networks_and_values_without_meaning():
  rng = np.random.default_rng(0)
  values = rng.normal(size=(7, 4))
  networks = [
    wrong_form.NetworkCost(1e-2, seed, seed == 3, *values[seed], float("nan")) for seed in range(7)
  ]
  summary = {s.statistic: s for s in wrong_form.summarize(networks)}
  kept = np.delete(values, 3, axis=0)  # the diverged network's
  for column, name in enumerate(wrong_form.STATISTICS[:4]):
    want = numpy_summary(kept[:, column])
    assert summary[name].n == 6
    for key, value in want.items():
      assert getattr(summary[name], key) == pytest.approx(value, abs=1e-12), (name, key)
  assert summary["agreement"].n == 0  # an objective without classes has no argmax


def test_in_bfloat16_the_forms_are_compared_in_bfloat16(trained):
  """Both forms computed in bfloat16: the logits to within bfloat16's accuracy of float64 (and
  not float32's), the statistics those of the bfloat16 logits, and so to within that accuracy
  of the float64 ones."""
  members, state, params = trained
  split = make_splits()["test"]
  targets = split["targets"]
  counted = np.ones(len(targets), bool)
  z = scaled(split["inputs"])
  a, b = run_with("gelu", "bfloat16"), run_with("gelu_sigmoid", "bfloat16")
  logits = {p: engine.predict_members(p, state, split).astype(np.float64) for p in (a, b)}
  for parts, activation in ((a, "gelu"), (b, "gelu_sigmoid")):
    error = np.abs(logits[parts] - numpy_logits(params, activation, z))
    assert error.max() <= BF16_LOGITS
    assert error.max() > 100 * LOGITS_ATOL  # computed in bfloat16, not float32
  found = wrong_form.measure(a, b, members, state, split)
  assert found.dtype == "bfloat16"
  check_costs(found, numpy_costs(logits[a], logits[b], targets, counted), CHANGE_ATOL)
  reference = numpy_costs(
    numpy_logits(params, "gelu", z), numpy_logits(params, "gelu_sigmoid", z), targets, counted
  )
  for name in ("largest_change", "mean_change"):
    got = [getattr(n, name) for n in found.networks]
    np.testing.assert_allclose(got, reference[name], rtol=0, atol=2 * BF16_LOGITS)


def test_a_change_of_dtype_is_a_row_of_its_own_form_from_its_own_dtype(trained, tmp_path):
  """The networks run with their own form in bfloat16 against float32 (the forms study's swap of
  dtype): the row says both dtypes, its statistics are those of the float32 and bfloat16 logits
  and survive the round trip; another form in another dtype is refused, and a row in one dtype
  keeps the format it had (no ``from_dtype``)."""
  members, state, _ = trained
  split = make_splits()["test"]
  a, b = run_with("gelu"), run_with("gelu", "bfloat16")
  found = wrong_form.measure(a, b, members, state, split)
  assert (found.trained, found.run_with, found.dtype, found.from_dtype) == (
    "gelu", "gelu", "bfloat16", "float32"
  )  # fmt: skip
  logits = [engine.predict_members(p, state, split).astype(np.float64) for p in (a, b)]
  counted = np.ones(len(split["targets"]), bool)
  check_costs(found, numpy_costs(*logits, split["targets"], counted), CHANGE_ATOL)
  assert found.statistic("largest_change").median > 100 * LOGITS_ATOL  # bfloat16 is not float32
  path = tmp_path / "rows.json"
  same = wrong_form.measure(a, run_with("gelu_tanh"), members, state, split)
  wrong_form.write(path, [found, same])
  assert wrong_form.read(path) == [found, same]
  assert "from_dtype" not in json.loads(path.read_text())["rows"][1]
  with pytest.raises(ValueError, match="compare the forms in one dtype, or one form in two"):
    wrong_form.measure(a, run_with("gelu_tanh", "bfloat16"), members, state, split)


# --------------------------------------------------------------------- token classification

LENGTH = 5  # tokens a sequence holds, the padding included


def token_splits(seed: int = 0) -> dict[str, dict[str, np.ndarray]]:
  """Sequences of 2 to `LENGTH` tokens, each token a point of the tiny task's blobs (its tag
  the blob), scaled inputs ``[N, LENGTH, 6]``, tags -1 beyond a sequence's end (its inputs
  zero)."""
  rng = np.random.default_rng(seed)
  centres = rng.normal(size=(3, 6)) * 40 + 128

  def make(n):
    tags = rng.integers(0, 3, (n, LENGTH)).astype(np.int32)
    inputs = scaled(centres[tags] + rng.normal(size=(n, LENGTH, 6)) * 30).astype(np.float32)
    beyond = np.arange(LENGTH) >= rng.integers(2, LENGTH + 1, n)[:, None]
    tags[beyond], inputs[beyond] = -1, 0.0
    return {"inputs": inputs, "targets": tags}

  return {"train": make(64), "validation": make(16), "test": make(24)}


@functools.cache
def token_parts(activation: str) -> engine.Parts:
  """The tiny MLP tagging every token (`TokenClassification`), two networks."""
  parts = tiny(model_options={"activation": activation}, seeds=2)
  return dataclasses.replace(
    parts,
    objective=TokenClassification(),
    splits=token_splits(),
    record={**parts.record, "task": "tiny_tokens"},
  )


@pytest.mark.slow
def test_padding_beyond_a_sequences_end_counts_in_no_statistic(tmp_path):
  """The padded positions hold inputs where the forms differ most and the argmax turns: every
  statistic over all positions differs from the one over the tagged positions, and the study
  gives the latter."""
  workdir = str(tmp_path / "run")
  engine.fit(token_parts("gelu"), workdir, progress=False)
  members, state = engine.restore(token_parts("gelu"), workdir)
  params = jax.tree.map(np.float64, state.params)
  test = dict(token_splits()["test"])
  padding = test["targets"] < 0
  # Into the padding: points where each network's argmax turns, and then the points (of a
  # pool) where the forms differ most.
  tagged = test["inputs"][~padding][:12].astype(np.float64)
  turning, _ = flip_points(params, "gelu", "gelu_sigmoid", tagged)
  pool = np.random.default_rng(1).normal(size=(4000, 6)) * 2
  change = np.abs(
    numpy_logits(params, "gelu_sigmoid", pool) - numpy_logits(params, "gelu", pool)
  ).max(axis=(0, 2))
  far = pool[np.argsort(change)[::-1]]
  fill = [scaled(u) for u in turning] + list(far)
  inputs = test["inputs"].copy()
  inputs[padding] = np.stack(fill[: int(padding.sum())]).astype(np.float32)
  test["inputs"] = inputs

  z = test["inputs"].astype(np.float64)
  logits_a, logits_b = numpy_logits(params, "gelu", z), numpy_logits(params, "gelu_sigmoid", z)
  assert np.all(margins(logits_a)[:, ~padding] >= MARGIN)
  assert np.all(margins(logits_b)[:, ~padding] >= MARGIN)
  expected = numpy_costs(logits_a, logits_b, test["targets"], ~padding)
  counting_padding = numpy_costs(logits_a, logits_b, test["targets"], np.ones_like(padding))
  for name in ("largest_change", "mean_change", "agreement", "loss_change"):
    assert np.all(np.abs(expected[name] - counting_padding[name]) > 5 * CHANGE_ATOL), name

  outputs = engine.predict_members(token_parts("gelu_sigmoid"), state, test)
  assert outputs.shape == (2, 24, LENGTH, 3)  # every position, the padding's too
  np.testing.assert_allclose(outputs, logits_b, rtol=LOGITS_RTOL, atol=LOGITS_ATOL)
  found = wrong_form.measure(token_parts("gelu"), token_parts("gelu_sigmoid"), members, state, test)
  check_costs(found, expected, CHANGE_ATOL)
  counted = wrong_form.counted_positions(token_parts("gelu").objective, test)
  np.testing.assert_array_equal(counted, ~padding)


# ------------------------------------------------------------------ a task spec, both dtypes


@pytest.mark.slow
def test_evaluate_builds_the_specs_parts_in_each_dtype(tmp_path):
  """`evaluate` on a task spec (tiny_mnist: 784 -> 16 -> 16 -> 10, trained with gelu): one
  row a dtype, the float32 row's logit changes those of a NumPy forward pass."""
  data_dir = tmp_path / "mnist"
  write_mnist_files(str(data_dir))
  spec = tasks.get("tiny_mnist(data_options={'validation_size': 32})").replace(
    activation="gelu", epochs=1
  )
  splits = spec.load_data(str(data_dir))
  workdir = str(tmp_path / "run")
  engine.fit(tasks.build(spec, splits), workdir, Members((1e-3,), (0, 1)), progress=False)
  members, state = engine.restore(tasks.build(spec, splits), workdir)
  rows = wrong_form.evaluate(spec, splits, members, state, "gelu_tanh")
  assert [(r.trained, r.run_with, r.dtype) for r in rows] == [
    ("gelu", "gelu_tanh", "float32"),
    ("gelu", "gelu_tanh", "bfloat16"),
  ]
  test = splits["test"]
  z = np.asarray(test["inputs"], np.float64).reshape(len(test["inputs"]), -1) / 255.0
  params = jax.tree.map(np.float64, state.params)

  def forward(activation):
    out = []
    for m in range(len(members)):
      h = z
      for layer in ("Dense_0", "Dense_1"):
        h = FORMS[activation](h @ params[layer]["kernel"][m] + params[layer]["bias"][m])
      out.append(h @ params["Dense_2"]["kernel"][m] + params["Dense_2"]["bias"][m])
    return np.stack(out)

  counted = np.ones(len(z), bool)
  expected = numpy_costs(forward("gelu"), forward("gelu_tanh"), test["targets"], counted)
  for name in ("largest_change", "mean_change", "loss_change"):
    got = [getattr(n, name) for n in rows[0].networks]
    np.testing.assert_allclose(got, expected[name], rtol=0, atol=CHANGE_ATOL, err_msg=name)
  assert all(s.n == 2 for s in rows[0].summary)
  assert rows[0].statistic("largest_change").low == -np.inf  # two networks: no interval
