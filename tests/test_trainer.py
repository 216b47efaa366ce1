"""Whole-loop tests of gelujax.trainer on the tiny test task (tests/tiny_task.py)."""

import os
import shutil
import socket
import subprocess
import sys

import jax
import numpy as np
import pytest
from tiny_task import REFERENCE_MEMBERS, REFERENCE_SPEC, TinySpec, hash_tree, make_splits

from gelujax import checkpoints, trainer, writers
from gelujax.members import Members

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Killed(Exception):
  """Stands for the process being killed."""


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> str:
  """The workdir of the uninterrupted reference run."""
  workdir = str(tmp_path_factory.mktemp("reference") / "run")
  trainer.fit(REFERENCE_SPEC, workdir, REFERENCE_MEMBERS, progress=False)
  return workdir


def read_text(workdir: str, name: str) -> str:
  with open(os.path.join(workdir, name)) as f:
    return f.read()


def assert_same_run(workdir: str, reference: str, spec=REFERENCE_SPEC) -> None:
  """Bitwise equal final states and identical metrics.jsonl and summary.json."""
  assert read_text(workdir, "metrics.jsonl") == read_text(reference, "metrics.jsonl")
  assert read_text(workdir, "summary.json") == read_text(reference, "summary.json")
  _, _, state = trainer.restore(workdir, spec=spec)
  _, _, expected = trainer.restore(reference, spec=spec)
  for leaf, expected_leaf in zip(jax.tree.leaves(state), jax.tree.leaves(expected), strict=True):
    np.testing.assert_array_equal(np.asarray(leaf), np.asarray(expected_leaf))


def kill_at_save(monkeypatch, epoch: int, *, after_saving: bool) -> None:
  """Makes the run die when it reaches the checkpoint of ``epoch``."""
  save = checkpoints.Checkpointer.save

  def save_then_die(self, saved_epoch, *args):
    if saved_epoch == epoch and not after_saving:
      raise Killed
    save(self, saved_epoch, *args)
    if saved_epoch == epoch:
      raise Killed

  monkeypatch.setattr(checkpoints.Checkpointer, "save", save_then_die)


def numpy_metrics(params, split) -> tuple[np.ndarray, np.ndarray]:
  """Per-member mean cross-entropy and error of the tiny MLP, in float64 NumPy."""
  x = (split["inputs"].astype(np.float64) - 128) / 64
  dense0, dense1 = params["Dense_0"], params["Dense_1"]
  losses, errors = [], []
  for m in range(len(dense0["kernel"])):
    hidden = np.maximum(x @ np.float64(dense0["kernel"][m]) + dense0["bias"][m], 0)
    logits = hidden @ np.float64(dense1["kernel"][m]) + dense1["bias"][m]
    logits -= logits.max(axis=1, keepdims=True)
    log_probs = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    targets = split["targets"]
    losses.append(-log_probs[np.arange(len(targets)), targets].mean())
    errors.append((logits.argmax(axis=1) != targets).mean())
  return np.array(losses), np.array(errors)


def test_training_lowers_the_loss_and_metrics_match_numpy(reference):
  records = writers.read_metrics(reference)
  first = [r["train_loss"] for r in records if r["epoch"] == 1.0]
  last = [r["train_loss"] for r in records if r["epoch"] == 3.0]
  assert all(b < 0.8 * a for a, b in zip(first, last, strict=True))
  spec, members, state = trainer.restore(reference, spec=REFERENCE_SPEC)
  assert list(members) == [(1e-2, 0), (1e-2, 1), (3e-3, 0), (3e-3, 1)]
  params = jax.tree.map(np.asarray, state.params)
  for name in ("validation", "test"):
    split = make_splits()[name]
    loss, error = numpy_metrics(params, split)
    evaluated = trainer.evaluate_members(spec, state, split)
    np.testing.assert_allclose(evaluated["loss"], loss, rtol=1e-5)
    np.testing.assert_allclose(evaluated["error"], error)
    logged = [r for r in records if r["epoch"] == 3.0]
    np.testing.assert_allclose([r[f"{name}_loss"] for r in logged], loss, rtol=1e-5)
    np.testing.assert_allclose([r[f"{name}_error"] for r in logged], error)
  assert np.all(state.diverged_step == -1)


def numpy_adam_epochs(params, splits, batches_ExSxB, learning_rate):
  """The tiny MLP trained in float64 NumPy: hand-written backpropagation of the mean
  cross-entropy and Adam (b1 0.9, b2 0.999, eps 1e-8, bias-corrected) over the given batches.

  Returns the final parameters and each epoch's mean of the pre-update batch losses."""
  params = {k: {n: np.float64(v) for n, v in layer.items()} for k, layer in params.items()}
  m = jax.tree.map(np.zeros_like, params)
  v = jax.tree.map(np.zeros_like, params)
  x_all = (splits["train"]["inputs"].astype(np.float64) - 128) / 64
  y_all = splits["train"]["targets"]
  t, epoch_losses = 0, []
  for batches_SxB in batches_ExSxB:
    losses = []
    for items in batches_SxB:
      x, y = x_all[items], y_all[items]
      w0, b0 = params["Dense_0"]["kernel"], params["Dense_0"]["bias"]
      w1, b1 = params["Dense_1"]["kernel"], params["Dense_1"]["bias"]
      h = x @ w0 + b0
      a = np.maximum(h, 0)
      logits = a @ w1 + b1
      logits -= logits.max(axis=1, keepdims=True)
      p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
      losses.append(-np.log(p[np.arange(len(y)), y]).mean())
      d_logits = (p - np.eye(p.shape[1])[y]) / len(y)
      d_h = (d_logits @ w1.T) * (h > 0)
      grads = {
        "Dense_0": {"kernel": x.T @ d_h, "bias": d_h.sum(0)},
        "Dense_1": {"kernel": a.T @ d_logits, "bias": d_logits.sum(0)},
      }
      t += 1
      for layer, names in params.items():
        for name in names:
          g = grads[layer][name]
          m[layer][name] = 0.9 * m[layer][name] + 0.1 * g
          v[layer][name] = 0.999 * v[layer][name] + 0.001 * g**2
          m_hat = m[layer][name] / (1 - 0.9**t)
          v_hat = v[layer][name] / (1 - 0.999**t)
          params[layer][name] = params[layer][name] - learning_rate * m_hat / (
            np.sqrt(v_hat) + 1e-8
          )
    epoch_losses.append(np.mean(losses))
  return params, epoch_losses


def test_training_follows_a_numpy_adam_on_the_trainers_batches(tmp_path):
  """The whole loop (batch gathering, loss, gradients, Adam, each member's own lr, the logged
  training loss) against float64 NumPy replaying the same initial weights and batch order."""
  spec = TinySpec(epochs=2)
  trainer.fit(spec, str(tmp_path), Members([1e-2, 3e-3], [0, 1]), progress=False)
  _, members, state = trainer.restore(str(tmp_path), spec=spec)
  splits = make_splits()
  program = trainer.make_program(
    spec, trainer.make_mesh(len(members)), splits["train"], len(members)
  )
  seeds_M, learning_rates_M = program.put_members(members)
  initial = program.unpad(program.init(seeds_M, learning_rates_M))
  batches_ExSxMxB = np.stack(
    [np.asarray(program.shuffle(seeds_M, np.int32(e)))[:, : len(members)] for e in (1, 2)]
  )
  records = writers.read_metrics(str(tmp_path))
  for i, (learning_rate, _) in enumerate(members):
    params, losses = numpy_adam_epochs(
      jax.tree.map(lambda leaf, i=i: np.asarray(leaf[i]), initial.params),
      splits,
      batches_ExSxMxB[:, :, i],
      learning_rate,
    )
    for layer, names in params.items():
      for name, expected in names.items():
        np.testing.assert_allclose(
          np.asarray(state.params[layer][name][i]), expected, rtol=1e-4, atol=1e-5
        )
    logged = [r["train_loss"] for r in records if r["member"] == i]
    np.testing.assert_allclose(logged, losses, rtol=1e-5)


def test_batch_norm_statistics_are_kept_and_used_in_evaluation(tmp_path):
  spec = TinySpec(model_options={"batch_norm": True}, epochs=2)
  trainer.fit(spec, str(tmp_path), Members([1e-2], [0, 1]), progress=False)
  _, _, state = trainer.restore(str(tmp_path), spec=spec)
  stats = jax.tree.map(np.float64, state.batch_stats["BatchNorm_0"])
  assert np.all(stats["var"] != 1) and np.all(stats["mean"] != 0)  # updated by training
  # Evaluation normalises with the running statistics: fold them into the first layer.
  params = jax.tree.map(np.float64, state.params)
  scale = params["BatchNorm_0"]["scale"] / np.sqrt(stats["var"] + 1e-5)
  folded = {
    "Dense_0": {
      "kernel": params["Dense_0"]["kernel"] * scale[:, None, :],
      "bias": (params["Dense_0"]["bias"] - stats["mean"]) * scale + params["BatchNorm_0"]["bias"],
    },
    "Dense_1": params["Dense_1"],
  }
  test = make_splits()["test"]
  loss, error = numpy_metrics(folded, test)
  logged = [r for r in writers.read_metrics(str(tmp_path)) if r["epoch"] == 2.0]
  np.testing.assert_allclose([r["test_loss"] for r in logged], loss, rtol=1e-5)
  np.testing.assert_allclose([r["test_error"] for r in logged], error)


def test_workdir_files_follow_the_formats(reference):
  config = writers.read_json(os.path.join(reference, "config.json"))
  assert config["task"] == "tiny" and config["dataset"] == "blobs"
  assert config["activation"] == "relu" and config["spec"]["dropout"] == 0.25
  assert config["members"][1] == {"seed": 1, "learning_rate": 1e-2}
  records = writers.read_metrics(reference)
  assert len(records) == 4 * 3
  assert set(records[0]) == {
    "member", "seed", "learning_rate", "epoch", "step", "diverged", "train_loss",
    "validation_loss", "validation_error", "test_loss", "test_error",
  }  # fmt: skip
  assert [(r["member"], r["epoch"], r["step"]) for r in records[:5]] == [
    (0, 1.0, 12), (1, 1.0, 12), (2, 1.0, 12), (3, 1.0, 12), (0, 2.0, 24)
  ]  # fmt: skip
  summary = writers.read_json(os.path.join(reference, "summary.json"))
  assert summary["epochs"] == 3 and len(summary["members"]) == 4
  for i, member in enumerate(summary["members"]):
    own = [r for r in records if r["member"] == i]
    best = min(own, key=lambda r: r["validation_loss"])
    assert member["best_epoch"] == best["epoch"]
    assert member["best"]["validation_loss"] == best["validation_loss"]
    assert member["final"]["test_error"] == own[-1]["test_error"]
    assert not member["diverged"] and member["diverged_epoch"] is None
  boards = sorted(os.listdir(os.path.join(reference, "tensorboard")))
  assert boards == ["lr=0.003,seed=0", "lr=0.003,seed=1", "lr=0.01,seed=0", "lr=0.01,seed=1"]


def test_grouped_batches_and_several_evaluations_per_epoch(tmp_path):
  spec = TinySpec(
    group_batches=True, data_options={"grouped": True}, batch_size=4, epochs=1,
    evals_per_epoch=2,
  )  # fmt: skip
  trainer.fit(spec, str(tmp_path), Members([1e-2], [3]), progress=False)
  groups = make_splits(grouped=True)["train"]["groups"]
  steps = len(np.unique(groups)) // 4
  records = writers.read_metrics(str(tmp_path))
  assert [(r["epoch"], r["step"]) for r in records] == [
    (round(steps / 2) / steps, round(steps / 2)), (1.0, steps)
  ]  # fmt: skip
  assert all(np.isfinite(r["train_loss"]) for r in records)


def test_expand_groups_matches_a_python_reference():
  groups = np.repeat(np.arange(6), [3, 1, 2, 4, 1, 2]).astype(np.int32)
  found = trainer._find_groups(groups, batch_size=3, num_devices=4)
  np.testing.assert_array_equal(found.starts, [0, 3, 4, 6, 10, 11])
  assert found.batch_frames == 12  # the 3 longest groups hold 9 frames; 4 devices -> 12
  frames, mask = trainer._expand_groups(np.array([3, 1, 5], np.int32), found)
  expected = [6, 7, 8, 9, 3, 11, 12]
  np.testing.assert_array_equal(np.asarray(frames)[:7], expected)
  np.testing.assert_array_equal(np.asarray(mask), [1] * 7 + [0] * 5)


@pytest.mark.parametrize("after_saving", [True, False])
def test_killed_run_resumes_to_the_same_result(tmp_path, monkeypatch, reference, after_saving):
  workdir = str(tmp_path / "run")
  kill_at_save(monkeypatch, 2, after_saving=after_saving)
  with pytest.raises(Killed):
    trainer.fit(REFERENCE_SPEC, workdir, REFERENCE_MEMBERS, progress=False)
  # Killed before saving epoch 2, the log already holds epoch 2; resuming from epoch 1 must
  # not write it twice.
  assert max(r["epoch"] for r in writers.read_metrics(workdir)) == 2.0
  monkeypatch.undo()
  trainer.fit(REFERENCE_SPEC, workdir, REFERENCE_MEMBERS, progress=False)
  assert_same_run(workdir, reference)


# Orbax's reader of the damaged file leaves a callback for its closed event loop behind.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_damaged_newest_checkpoint_falls_back_to_the_one_before(tmp_path, reference, caplog):
  workdir = str(tmp_path / "run")
  shutil.copytree(reference, workdir)
  data = os.path.join(workdir, "checkpoints", "3", "default", "d")
  for name in os.listdir(data):
    with open(os.path.join(data, name), "wb") as f:
      f.write(b"not an array")
  os.remove(os.path.join(workdir, "summary.json"))
  trainer.fit(REFERENCE_SPEC, workdir, REFERENCE_MEMBERS, progress=False)
  assert "Skipping checkpoint" in caplog.text
  assert_same_run(workdir, reference)


def test_more_epochs_continue_the_run(tmp_path, reference):
  workdir = str(tmp_path / "run")
  trainer.fit(REFERENCE_SPEC.replace(epochs=2), workdir, REFERENCE_MEMBERS, progress=False)
  assert writers.read_json(os.path.join(workdir, "summary.json"))["epochs"] == 2
  trainer.fit(REFERENCE_SPEC, workdir, REFERENCE_MEMBERS, progress=False)
  assert_same_run(workdir, reference)


@pytest.mark.parametrize(
  ("change", "grid", "message"),
  [
    ({"activation": "gelu"}, REFERENCE_MEMBERS, "activation 'relu'"),
    ({"model": "other"}, REFERENCE_MEMBERS, "model 'tiny_mlp'"),
    ({"name": "other"}, REFERENCE_MEMBERS, "name 'tiny'"),
    ({}, Members([1e-2], [0, 1]), "members lrs=[0.01, 0.003]"),
  ],
)
def test_incompatible_resume_is_refused_untouched(reference, change, grid, message):
  before = hash_tree(reference)
  with pytest.raises(ValueError, match=message.replace("[", r"\[")) as error:
    trainer.fit(REFERENCE_SPEC.replace(**change), reference, grid, progress=False)
  assert "another --workdir" in str(error.value)
  assert hash_tree(reference) == before


def test_a_diverging_member_leaves_the_others_unchanged(tmp_path):
  workdir, without = str(tmp_path / "run"), str(tmp_path / "without")
  summary = trainer.fit(REFERENCE_SPEC, workdir, Members([1e-2, 1e30], [0, 1]), progress=False)
  trainer.fit(REFERENCE_SPEC, without, Members([1e-2], [0, 1]), progress=False)
  records = writers.read_metrics(workdir)
  assert [r for r in records if r["member"] < 2] == writers.read_metrics(without)
  assert [m["diverged"] for m in summary["members"]] == [False, False, True, True]
  assert [m["diverged_epoch"] for m in summary["members"]] == [None, None, 1, 1]
  diverged = [r for r in records if r["member"] >= 2]
  assert all(r["diverged"] for r in diverged)
  # Frozen before the non-finite step: its parameters stay finite and unchanged.
  _, _, state = trainer.restore(workdir, spec=REFERENCE_SPEC)
  assert all(np.isfinite(leaf).all() for leaf in jax.tree.leaves(state.params))
  assert diverged[-1]["validation_loss"] == diverged[-3]["validation_loss"]


def test_every_member_diverging_stops_with_an_error(tmp_path):
  workdir = str(tmp_path / "run")
  with pytest.raises(trainer.DivergedError, match="All 2 members diverged"):
    trainer.fit(REFERENCE_SPEC, workdir, Members([1e30], [0, 1]), progress=False)
  summary = writers.read_json(os.path.join(workdir, "summary.json"))
  assert [m["diverged"] for m in summary["members"]] == [True, True]
  assert {r["epoch"] for r in writers.read_metrics(workdir)} == {1.0}  # stopped at once


def free_port() -> int:
  with socket.socket() as s:
    s.bind(("localhost", 0))
    return s.getsockname()[1]


def run_reference(workdir: str, devices: int, *distributed: str) -> subprocess.Popen:
  env = dict(
    os.environ,
    XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}",
    PYTHONPATH=ROOT,
    JAX_PLATFORMS="cpu",
  )
  script = os.path.join(ROOT, "tests", "tiny_task.py")
  return subprocess.Popen(
    [sys.executable, script, workdir, *distributed], env=env, cwd=ROOT,
    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
  )  # fmt: skip


def assert_close_metrics(workdir: str, reference: str) -> None:
  records, expected = writers.read_metrics(workdir), writers.read_metrics(reference)
  assert len(records) == len(expected)
  for record, want in zip(records, expected, strict=True):
    assert record.keys() == want.keys()
    for key, value in want.items():
      np.testing.assert_allclose(record[key], value, rtol=1e-5, atol=1e-6, err_msg=key)


@pytest.mark.slow
@pytest.mark.parametrize(
  ("devices", "members_axis", "layout"),
  [
    (2, None, "2 (members) x 1 (data)"),
    (4, None, "4 (members) x 1 (data)"),
    (2, 1, "1 (members) x 2 (data)"),
    (4, 2, "2 (members) x 2 (data)"),
  ],
)
def test_each_members_results_do_not_depend_on_the_layout(
  tmp_path, reference, devices, members_axis, layout
):
  """Every member trains the same whichever devices hold it: to float32 rounding, not bit for
  bit, since XLA compiles a program partitioned over several devices with other fusions (which
  round a multiply-add differently), and a batch split over ``data`` sums its gradient in
  another order. The run's config is the same, so a run can resume on another layout."""
  workdir = str(tmp_path / "run")
  axis = [f"--members_axis={members_axis}"] if members_axis else []
  process = run_reference(workdir, devices, *axis)
  assert process.wait(timeout=300) == 0, process.stdout.read()
  assert f"4 members on a mesh of {layout} cpu devices" in process.stdout.read()
  assert_close_metrics(workdir, reference)
  assert read_text(workdir, "config.json") == read_text(reference, "config.json")


@pytest.mark.slow
def test_two_processes_agree_with_one(tmp_path, reference):
  two_by_two = str(tmp_path / "two_by_two")
  address = f"localhost:{free_port()}"
  processes = [run_reference(two_by_two, 2, address, "2", str(i)) for i in range(2)]
  for process in processes:
    assert process.wait(timeout=300) == 0, process.stdout.read()
  assert_close_metrics(two_by_two, reference)


def test_training_members_one_at_a_time_or_vmapped_agrees():
  """`member_chunk` changes how a device loops over its members; vmapped, XLA may sum a small
  product in another order, so members agree to float32 rounding (within 1e-6 after 2
  epochs), not bit for bit."""
  splits = make_splits()
  num = len(REFERENCE_MEMBERS)
  mesh = trainer.make_mesh(num)
  states = []
  for chunk in (0, 1, 3):
    program = trainer.make_program(REFERENCE_SPEC, mesh, splits["train"], num, member_chunk=chunk)
    seeds, learning_rates = program.put_members(REFERENCE_MEMBERS)
    data = program.put_data(splits["train"])
    state = program.init(seeds, learning_rates)
    for epoch in (1, 2):
      batches = program.shuffle(seeds, np.int32(epoch))
      state, _ = program.train_segment(
        state, data, batches, seeds, learning_rates, np.int32(epoch), np.int32(0),
        num_steps=program.steps_per_epoch,
      )  # fmt: skip
    states.append(jax.tree.map(np.asarray, program.unpad(state)))
  for other in states[1:]:
    for leaf, expected in zip(jax.tree.leaves(other), jax.tree.leaves(states[0]), strict=True):
      np.testing.assert_allclose(leaf, expected, rtol=1e-6, atol=1e-6)


def test_threefry_dropout_bits_train_other_masks_and_are_recorded_as_another_run(tmp_path):
  hashed, threefry = str(tmp_path / "hash"), str(tmp_path / "threefry")
  spec = REFERENCE_SPEC.replace(epochs=1)
  members = Members([1e-2], [0])
  trainer.fit(spec, hashed, members, progress=False)
  trainer.fit(spec.replace(dropout_bits="threefry"), threefry, members, progress=False)
  # The default is left out of config.json, so configs written before the field still match.
  assert "dropout_bits" not in writers.read_json(os.path.join(hashed, "config.json"))["spec"]
  config = writers.read_json(os.path.join(threefry, "config.json"))
  assert config["spec"]["dropout_bits"] == "threefry"
  [a], [b] = writers.read_metrics(hashed), writers.read_metrics(threefry)
  assert a["train_loss"] != b["train_loss"]  # other masks, same initialisation
  with pytest.raises(ValueError, match=r"differs in: dropout_bits 'threefry' \(now 'hash'\)"):
    trainer.fit(spec.replace(epochs=2), threefry, members, progress=False)


def test_members_hold_what_int32_seeds_and_float32_rates_hold():
  grid = Members([1.2e-38, 3.0e38, 1e-3], [0, 2**31 - 1, -(2**31)])
  assert list(grid)[:2] == [(1.2e-38, 0), (1.2e-38, 2**31 - 1)]  # learning-rate major
  with pytest.raises(ValueError, match="--seeds has 2147483648; seeds are int32"):
    Members([1e-3], [2**31])
  with pytest.raises(ValueError, match="has 1e-300, which is 0 in float32"):
    Members([1e-300], [0])
  assert np.float32(1e-300) == 0 and np.float32(1e-46) == 0  # what the check prevents
  with pytest.raises(ValueError, match="has 1e-39, which is 0 in float32"):
    Members([1e-39], [0])  # a float32 subnormal: not a usable rate either
  with pytest.raises(ValueError, match="has 1e\\+39, which is infinite in float32"):
    Members([1e39], [0])
  for bad, message in [
    (([], [0]), "--learning_rates is empty"),
    (([1e-3], []), "--seeds is empty"),
    (([1e-3, 1e-3], [0]), "repeats a value"),
    (([1e-3], [1, 1]), "repeats a seed"),
    (([float("nan")], [0]), "finite and > 0"),
    (([-1e-3], [0]), "finite and > 0"),
  ]:
    with pytest.raises(ValueError, match=message):
      Members(*bad)


def test_members_round_trip_through_config_json_and_refuse_a_partial_grid():
  grid = Members([1e-2, 3e-3], [5, 7])
  assert grid.to_json() == [
    {"seed": 5, "learning_rate": 1e-2}, {"seed": 7, "learning_rate": 1e-2},
    {"seed": 5, "learning_rate": 3e-3}, {"seed": 7, "learning_rate": 3e-3},
  ]  # fmt: skip
  assert Members.from_json(grid.to_json()) == grid
  with pytest.raises(ValueError, match="not a whole learning-rate-major grid"):
    Members.from_json(grid.to_json()[:3])


def test_config_json_names_one_grid(tmp_path):
  """The spec written to config.json holds the grid that trained, not the task's default."""
  trainer.fit(REFERENCE_SPEC.replace(epochs=1), str(tmp_path), Members([5e-3], [4]), progress=False)
  config = writers.read_json(tmp_path / "config.json")
  assert config["spec"]["learning_rates"] == [5e-3] and config["spec"]["seeds"] == 1
  assert config["members"] == [{"seed": 4, "learning_rate": 5e-3}]
