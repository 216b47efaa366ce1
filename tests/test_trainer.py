"""Whole-loop tests of gelujax.engine on the tiny test task (tests/tiny_task.py)."""

import fcntl
import functools
import glob
import itertools
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import termios

import flax
import jax
import jitted
import numpy as np
import orbax.checkpoint as ocp
import pytest
from tensorboard_events import read_events, read_hparams
from tiny_task import (
  GRIDS,
  REFERENCE,
  REFERENCE_MEMBERS,
  TinyMLP,
  hash_tree,
  make_splits,
  shuffled_batches,
  tiny,
  tiny_like,
)

from gelujax import checkpoints, engine, models, prng, tasks
from gelujax import workdir as workdirs
from gelujax.engine.fit import PIECE_STEPS, describe_progress, pieces
from gelujax.members import Members
from gelujax.specs import resolve_activation

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Killed(Exception):
  """Stands for the process being killed."""


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> str:
  """The workdir of the uninterrupted reference run."""
  workdir = str(tmp_path_factory.mktemp("reference") / "run")
  engine.fit(REFERENCE, workdir, REFERENCE_MEMBERS, progress=False)
  return workdir


def read_text(workdir: str, name: str) -> str:
  with open(os.path.join(workdir, name)) as f:
    return f.read()


def derived_summary(workdir: str) -> dict:
  """The run's summary.json as a render derives it from its config.json and metrics.jsonl."""
  config = workdirs.read_json(os.path.join(workdir, "config.json"))
  return workdirs.derive_summary(workdir, config, workdirs.read_metrics(workdir))


def assert_same_run(workdir: str, reference: str, parts=REFERENCE) -> None:
  """Bitwise equal final states and identical metrics.jsonl and summary.json."""
  assert read_text(workdir, "metrics.jsonl") == read_text(reference, "metrics.jsonl")
  assert read_text(workdir, "summary.json") == read_text(reference, "summary.json")
  _, state = engine.restore(parts, workdir)
  _, expected = engine.restore(parts, reference)
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


def inputs_of(split) -> np.ndarray:
  """The tiny task's inputs as its prepare_batch scales them, in float64."""
  return (split["inputs"].astype(np.float64) - 128) / 64


def numpy_forward(params, x, keep=None):
  """The tiny MLP of one member in float64 NumPy: its pre-activations, hidden units (after
  dropout) and logits. ``keep`` is a dropout mask scaled by 1 / (1 - rate), or None (off)."""
  h = x @ np.float64(params["Dense_0"]["kernel"]) + params["Dense_0"]["bias"]
  a = np.maximum(h, 0) * (1.0 if keep is None else keep)
  return h, a, a @ np.float64(params["Dense_1"]["kernel"]) + params["Dense_1"]["bias"]


def numpy_softmax_cross_entropy(logits, targets) -> tuple[np.ndarray, np.ndarray]:
  """Each example's cross-entropy and the softmax probabilities, in float64."""
  logits = logits - logits.max(axis=1, keepdims=True)
  log_probs = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
  return -log_probs[np.arange(len(targets)), targets], np.exp(log_probs)


def member_params(params, i: int):
  """Member ``i``'s parameters of a stacked state, in float64."""
  return jax.tree.map(lambda leaf: np.float64(leaf[i]), params)


def numpy_loss_and_error(params, split) -> tuple[float, float]:
  """One member's mean cross-entropy and error of the tiny MLP on a split, in float64 NumPy."""
  logits = numpy_forward(params, inputs_of(split))[2]
  loss = numpy_softmax_cross_entropy(logits, split["targets"])[0].mean()
  return loss, (logits.argmax(axis=1) != split["targets"]).mean()


def numpy_metrics(params, split) -> tuple[np.ndarray, np.ndarray]:
  """Per-member mean cross-entropy and error of a stacked state's parameters."""
  members = range(len(params["Dense_0"]["kernel"]))
  losses, errors = np.array(
    [numpy_loss_and_error(member_params(params, m), split) for m in members]
  ).T
  return losses, errors


def numpy_adam(params, train, batches, learning_rate, masks=None):
  """One member of the tiny MLP trained in float64 NumPy: hand-written backpropagation of the
  mean cross-entropy and Adam (b1 0.9, b2 0.999, eps 1e-8, bias-corrected).

  Args:
    params: the member's initial parameters.
    train: the training split.
    batches: each step's example indices (of any length: a batch of whole groups is the frames
      of its groups).
    learning_rate: the member's learning rate.
    masks: each step's dropout mask ([batch, hidden], scaled by 1 / (1 - rate)); None: no
      dropout.

  Returns:
    The parameters after each step, and each step's loss before its update with dropout off
    (the training loss the trainer logs).
  """
  params = jax.tree.map(np.float64, params)
  m = jax.tree.map(np.zeros_like, params)
  v = jax.tree.map(np.zeros_like, params)
  x_all, y_all = inputs_of(train), train["targets"]
  after, losses = [], []
  for t, items in enumerate(batches, 1):
    x, y = x_all[items], y_all[items]
    keep = None if masks is None else masks[t - 1]
    losses.append(numpy_softmax_cross_entropy(numpy_forward(params, x)[2], y)[0].mean())
    h, a, logits = numpy_forward(params, x, keep)
    p = numpy_softmax_cross_entropy(logits, y)[1]
    d_logits = (p - np.eye(p.shape[1])[y]) / len(y)
    d_h = (d_logits @ params["Dense_1"]["kernel"].T) * (1.0 if keep is None else keep) * (h > 0)
    grads = {
      "Dense_0": {"kernel": x.T @ d_h, "bias": d_h.sum(0)},
      "Dense_1": {"kernel": a.T @ d_logits, "bias": d_logits.sum(0)},
    }
    m = jax.tree.map(lambda m, g: 0.9 * m + 0.1 * g, m, grads)
    v = jax.tree.map(lambda v, g: 0.999 * v + 0.001 * g**2, v, grads)
    m_hat = jax.tree.map(lambda m, t=t: m / (1 - 0.9**t), m)
    v_hat = jax.tree.map(lambda v, t=t: v / (1 - 0.999**t), v)
    params = jax.tree.map(
      lambda p, m, v: p - learning_rate * m / (np.sqrt(v) + 1e-8), params, m_hat, v_hat
    )
    after.append(params)
  return after, losses


def assert_params_close(state_params, i: int, expected) -> None:
  """Member ``i`` of a stacked state has the NumPy run's parameters (float32 rounding)."""
  for path, leaf in jax.tree_util.tree_leaves_with_path(member_params(state_params, i)):
    want = functools.reduce(lambda tree, key: tree[key.key], path, expected)
    np.testing.assert_allclose(leaf, want, rtol=1e-4, atol=1e-5, err_msg=str(path))


def initial_state_and_batches(parts, members, epochs=(1,)):
  """The run's initial state (unpadded, on the host) and each member's batches of ``epochs``,
  [epochs, steps, M, B], as the trainer draws them on a one-device mesh."""
  program = engine.make_program(parts, engine.make_mesh(len(members)), len(members))
  seeds_M, learning_rates_M = program.put_members(members)
  initial = jax.tree.map(np.asarray, program.unpad(program.init(seeds_M, learning_rates_M)))
  batches = [np.asarray(program.shuffle(seeds_M, np.int32(e)))[:, : len(members)] for e in epochs]
  return initial, np.stack(batches)


def test_training_lowers_the_loss_and_metrics_match_numpy(reference):
  records = workdirs.read_metrics(reference)
  first = [r["train_loss"] for r in records if r["epoch"] == 1.0]
  last = [r["train_loss"] for r in records if r["epoch"] == 3.0]
  assert all(b < 0.8 * a for a, b in zip(first, last, strict=True))
  members, state = engine.restore(REFERENCE, reference)
  assert list(members) == [(1e-2, 0), (1e-2, 1), (3e-3, 0), (3e-3, 1)]
  params = jax.tree.map(np.asarray, state.params)
  for name in ("validation", "test"):
    split = make_splits()[name]
    loss, error = numpy_metrics(params, split)
    evaluated = engine.evaluate_members(REFERENCE, state, split)
    np.testing.assert_allclose(evaluated["loss"], loss, rtol=1e-5)
    np.testing.assert_allclose(evaluated["error"], error)
    logged = [r for r in records if r["epoch"] == 3.0]
    np.testing.assert_allclose([r[f"{name}_loss"] for r in logged], loss, rtol=1e-5)
    np.testing.assert_allclose([r[f"{name}_error"] for r in logged], error)
  assert np.all(state.diverged_step == -1)


def test_training_follows_a_numpy_adam_on_the_trainers_batches(tmp_path):
  """The whole loop (batch gathering, loss, gradients, Adam, each member's own lr, the logged
  training loss) against float64 NumPy replaying the same initial weights and batch order."""
  parts = tiny(epochs=2)
  members = Members([1e-2, 3e-3], [0, 1])
  engine.fit(parts, str(tmp_path), members, progress=False)
  _, state = engine.restore(parts, str(tmp_path))
  train = make_splits()["train"]
  initial, batches_ExSxMxB = initial_state_and_batches(parts, members, epochs=(1, 2))
  records = workdirs.read_metrics(str(tmp_path))
  for i, (learning_rate, _) in enumerate(members):
    batches = batches_ExSxMxB[:, :, i].reshape(-1, parts.batch_size)
    after, losses = numpy_adam(member_params(initial.params, i), train, batches, learning_rate)
    assert_params_close(state.params, i, after[-1])
    logged = [r["train_loss"] for r in records if r["member"] == i]
    np.testing.assert_allclose(logged, np.reshape(losses, (2, -1)).mean(1), rtol=1e-5)


@pytest.mark.slow
def test_logged_training_loss_is_the_dropout_off_loss_before_each_step(tmp_path):
  """At dropout 0.5 the logged training loss is each step's loss on its batch with dropout off,
  with the parameters before the step's update (as the paper logged it): one record per step,
  against float64 NumPy Adam trained with the same batches and dropout masks."""
  parts = tiny(dropout=0.5, epochs=1, evals_per_epoch=12)
  members = Members([1e-2, 3e-3], [0])
  engine.fit(parts, str(tmp_path), members, progress=False)
  records = workdirs.read_metrics(str(tmp_path))
  train = make_splits()["train"]
  initial, batches_ExSxMxB = initial_state_and_batches(parts, members)
  assert batches_ExSxMxB.shape[1] == 12
  masks = dropout_masks(parts, 0, 1, 12, "hash")  # both members have seed 0
  for i, (learning_rate, _) in enumerate(members):
    batches = batches_ExSxMxB[0, :, i]
    _, losses = numpy_adam(member_params(initial.params, i), train, batches, learning_rate, masks)
    logged = [r["train_loss"] for r in records if r["member"] == i]
    assert [r["step"] for r in records if r["member"] == i] == list(range(1, 13))
    np.testing.assert_allclose(logged, losses, rtol=1e-5)


@pytest.mark.slow
def test_batch_norm_statistics_are_kept_and_used_in_evaluation(tmp_path):
  parts = tiny(model_options={"batch_norm": True}, epochs=2)
  engine.fit(parts, str(tmp_path), Members([1e-2], [0, 1]), progress=False)
  _, state = engine.restore(parts, str(tmp_path))
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
  logged = [r for r in workdirs.read_metrics(str(tmp_path)) if r["epoch"] == 2.0]
  np.testing.assert_allclose([r["test_loss"] for r in logged], loss, rtol=1e-5)
  np.testing.assert_allclose([r["test_error"] for r in logged], error)


def test_workdir_files_follow_the_formats(reference):
  config = workdirs.read_json(os.path.join(reference, "config.json"))
  assert config["task"] == "tiny" and config["dataset"] == "blobs"
  assert config["activation"] == "relu" and config["spec"]["dropout"] == 0.25
  assert config["members"][1] == {"seed": 1, "learning_rate": 1e-2}
  records = workdirs.read_metrics(reference)
  assert len(records) == 4 * 3
  assert set(records[0]) == {
    "member", "seed", "learning_rate", "epoch", "step", "diverged", "train_loss",
    "validation_loss", "validation_error", "test_loss", "test_error",
  }  # fmt: skip
  assert [(r["member"], r["epoch"], r["step"]) for r in records[:5]] == [
    (0, 1.0, 12), (1, 1.0, 12), (2, 1.0, 12), (3, 1.0, 12), (0, 2.0, 24)
  ]  # fmt: skip
  summary = workdirs.read_json(os.path.join(reference, "summary.json"))
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
  for i, m in enumerate(config["members"]):
    board = os.path.join(reference, "tensorboard", f"lr={m['learning_rate']:g},seed={m['seed']}")
    # The member's hyperparameters for TensorBoard's hparams plugin, as config.json holds them.
    assert read_hparams(board) == [
      {"task": "tiny", "dataset": "blobs", "activation": "relu", "dropout": 0.25,
       "learning_rate": m["learning_rate"], "seed": float(m["seed"])}
    ]  # fmt: skip
    # Each step's training loss (12 steps an epoch: every one): each evaluation's train_loss is
    # the mean of its epoch's steps.
    steps = [(step, value) for step, tag, value in read_events(board) if tag == "train_loss_step"]
    assert [step for step, _ in steps] == list(range(1, 37))
    logged = [r["train_loss"] for r in records if r["member"] == i]
    means = np.mean(np.reshape([value for _, value in steps], (3, 12)), axis=1)
    np.testing.assert_allclose(logged, means, rtol=1e-6)


@pytest.mark.slow
def test_grouped_batches_and_several_evaluations_per_epoch(tmp_path):
  """Batches of whole groups (utterances), evaluated twice an epoch: each half-epoch's logged
  training loss, its evaluations and the final parameters against float64 NumPy training on the
  frames of the same groups."""
  parts = tiny(
    group_batches=True, data_options={"grouped": True}, batch_size=4, epochs=1,
    evals_per_epoch=2,
  )  # fmt: skip
  members = Members([1e-2], [3])
  summary = engine.fit(parts, str(tmp_path), members, progress=False)
  assert derived_summary(str(tmp_path)) == summary  # evaluations at epochs 0.5 and 1
  splits = make_splits(grouped=True)
  train, groups = splits["train"], splits["train"]["groups"]
  # The groups in order of appearance, and the frames of each.
  order = groups[np.sort(np.unique(groups, return_index=True)[1])]
  steps, half = len(order) // 4, round(len(order) // 4 / 2)
  initial, batches_ExSxMxB = initial_state_and_batches(parts, members)
  batch_groups_SxB = batches_ExSxMxB[0, :, 0]
  assert sorted(batch_groups_SxB.ravel()) == sorted(set(batch_groups_SxB.ravel()))
  frames = [
    np.concatenate([np.flatnonzero(groups == order[g]) for g in b]) for b in batch_groups_SxB
  ]
  after, losses = numpy_adam(member_params(initial.params, 0), train, frames, 1e-2)
  records = workdirs.read_metrics(str(tmp_path))
  # TensorBoard holds every step's training loss, as float64 NumPy training computes it.
  board = os.path.join(tmp_path, "tensorboard", "lr=0.01,seed=3")
  step_losses = [(step, v) for step, tag, v in read_events(board) if tag == "train_loss_step"]
  assert [step for step, _ in step_losses] == list(range(1, steps + 1))
  np.testing.assert_allclose([v for _, v in step_losses], losses, rtol=1e-5)
  assert [(r["epoch"], r["step"]) for r in records] == [(half / steps, half), (1.0, steps)]
  for record, (first, last) in zip(records, [(0, half), (half, steps)], strict=True):
    np.testing.assert_allclose(record["train_loss"], np.mean(losses[first:last]), rtol=1e-5)
    for name in ("validation", "test"):
      loss, error = numpy_loss_and_error(after[last - 1], splits[name])
      np.testing.assert_allclose(record[f"{name}_loss"], loss, rtol=1e-5)
      np.testing.assert_allclose(record[f"{name}_error"], error)
  _, state = engine.restore(parts, str(tmp_path))
  assert_params_close(state.params, 0, after[-1])


def test_expand_groups_matches_a_python_reference():
  groups = np.repeat(np.arange(6), [3, 1, 2, 4, 1, 2]).astype(np.int32)
  found = engine.step.find_groups(groups, batch_size=3, num_devices=4)
  np.testing.assert_array_equal(found.starts, [0, 3, 4, 6, 10, 11])
  assert found.batch_frames == 12  # the 3 longest groups hold 9 frames; 4 devices -> 12
  frames, mask = engine.step.expand_groups(np.array([3, 1, 5], np.int32), found)
  expected = [6, 7, 8, 9, 3, 11, 12]
  np.testing.assert_array_equal(np.asarray(frames)[:7], expected)
  np.testing.assert_array_equal(np.asarray(mask), [1] * 7 + [0] * 5)


@pytest.mark.parametrize("after_saving", [True, False])
def test_killed_run_resumes_to_the_same_result(tmp_path, monkeypatch, reference, after_saving):
  workdir = str(tmp_path / "run")
  kill_at_save(monkeypatch, 2, after_saving=after_saving)
  with pytest.raises(Killed):
    engine.fit(REFERENCE, workdir, REFERENCE_MEMBERS, progress=False)
  # Killed before saving epoch 2, the log already holds epoch 2; resuming from epoch 1 must
  # not write it twice.
  assert max(r["epoch"] for r in workdirs.read_metrics(workdir)) == 2.0
  monkeypatch.undo()
  engine.fit(REFERENCE, workdir, REFERENCE_MEMBERS, progress=False)
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
  engine.fit(REFERENCE, workdir, REFERENCE_MEMBERS, progress=False)
  assert "Skipping checkpoint" in caplog.text
  assert_same_run(workdir, reference)


def test_the_progress_bar_counts_steps_and_names_the_best_member(tmp_path, capsys):
  """The bar counts steps from where a resume starts, and its note is one member's numbers, the
  best by the task's selection metric at the last evaluation, named; a run with nothing left to
  train says so in one line, and draws no bar."""
  workdir = str(tmp_path / "run")
  engine.fit(tiny_like(REFERENCE, epochs=2), workdir, REFERENCE_MEMBERS, progress=False)
  engine.fit(REFERENCE, workdir, REFERENCE_MEMBERS, progress=True)
  bars = [line for line in capsys.readouterr().err.splitlines() if "%|" in line]
  assert bars[0].startswith("epoch 3/3:  67%|") and "| 24/36 " in bars[0]
  assert bars[-1].startswith("epoch 3/3: 100%|") and "| 36/36 " in bars[-1]
  last = [r for r in workdirs.read_metrics(workdir) if r["epoch"] == 3.0]
  best = min(last, key=lambda r: r["validation_loss"])
  losses = ", ".join(f"{k}={best[k]:.4g}" for k in ("train_loss", "validation_loss", "test_loss"))
  assert bars[-1].endswith(
    f"best lr={best['learning_rate']:g} seed={best['seed']} by validation_loss: {losses}]"
  )
  boards = {p: os.listdir(p) for p in glob.glob(os.path.join(workdir, "tensorboard", "*"))}
  engine.fit(REFERENCE, workdir, REFERENCE_MEMBERS, progress=True)
  err = capsys.readouterr().err
  assert "%|" not in err
  assert err.splitlines()[-1] == (
    f"gelujax: {workdir} already trained 3 of 3 epochs; nothing to train."
  )
  assert {p: os.listdir(p) for p in boards} == boards  # nothing written to TensorBoard


def test_an_evaluation_segment_is_trained_in_the_fewest_near_equal_pieces_of_at_most_50_steps():
  assert PIECE_STEPS == 50
  assert pieces(0, 12) == [(0, 12)]
  assert pieces(0, 50) == [(0, 50)]
  assert pieces(0, 51) == [(0, 25), (25, 51)]
  assert pieces(0, 101) == [(0, 33), (33, 67), (67, 101)]
  assert pieces(12, 112) == [(12, 62), (62, 112)]
  # Fashion-MNIST's 469 steps an epoch at batch 128: ten pieces of 46 or 47 steps.
  lengths = [b - a for a, b in pieces(0, 469)]
  assert sorted(set(lengths)) == [46, 47] and sum(lengths) == 469 and len(lengths) == 10


# A tiny run of 120 steps an epoch: three pieces of 40.
LONG_EPOCHS = {"batch_size": 1, "data_options": {"num_train": 120}}


@pytest.mark.e2e
def test_on_a_terminal_the_bar_moves_within_a_long_epoch(tmp_path):
  """A real terminal (a pty as the run's stderr): the bar is drawn after each piece of the
  epoch, not only at its end."""
  workdir = str(tmp_path / "run")
  script = (
    f"import sys; sys.path.insert(0, {os.path.join(ROOT, 'tests')!r})\n"
    "from tiny_task import tiny\nfrom gelujax import engine\n"
    f"engine.fit(tiny(epochs=1, **{LONG_EPOCHS!r}), {workdir!r}, progress=True)\n"
  )
  leader, follower = os.openpty()
  fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 160, 0, 0))  # 160 columns
  with subprocess.Popen(
    [sys.executable, "-c", script], stdin=subprocess.DEVNULL, stdout=follower, stderr=follower
  ) as proc:
    os.close(follower)
    out = b""
    while True:
      try:
        chunk = os.read(leader, 4096)
      except OSError:  # EIO: the run closed the terminal.
        break
      if not chunk:
        break
      out += chunk
    assert proc.wait() == 0, out.decode(errors="replace")
  os.close(leader)
  counts = [int(n) for n in re.findall(r"\| +(\d+)/120 ", out.decode(errors="replace"))]
  assert [n for i, n in enumerate(counts) if i == 0 or n != counts[i - 1]] == [0, 40, 80, 120]


@pytest.mark.slow
def test_a_run_in_pieces_resumes_bitwise_and_agrees_with_one_scan_an_epoch(tmp_path):
  """Pieces are the same programs in a resumed run (bit for bit), and train what one scan of
  each epoch trains (another program: to float32 rounding)."""
  parts = tiny(epochs=2, **LONG_EPOCHS)
  whole, resumed = str(tmp_path / "whole"), str(tmp_path / "resumed")
  engine.fit(parts, whole, progress=False)
  engine.fit(tiny_like(parts, epochs=1), resumed, progress=False)
  engine.fit(parts, resumed, progress=False)
  assert_same_run(resumed, whole, parts)
  members, state = engine.restore(parts, whole)
  program = engine.make_program(parts, engine.make_mesh(1), len(members))
  seeds, learning_rates = program.put_members(members)
  scanned, data = program.init(seeds, learning_rates), program.put_data(parts.train)
  for epoch in (1, 2):
    scanned, _ = program.train_segment(
      scanned, data, program.shuffle(seeds, np.int32(epoch)), seeds, learning_rates,
      epoch=np.int32(epoch), first_step=np.int32(0), num_steps=program.steps_per_epoch,
    )  # fmt: skip
  assert program.steps_per_epoch == 120
  for leaf, expected in zip(
    jax.tree.leaves(program.unpad(scanned)), jax.tree.leaves(state), strict=True
  ):
    np.testing.assert_allclose(np.asarray(leaf), np.asarray(expected), rtol=2e-5, atol=1e-6)


def test_the_progress_note_is_the_best_members_by_the_selection_metric():
  members = [{"learning_rate": 1e-3, "seed": s} for s in (0, 1, 2)]
  metrics = {
    "train_loss": np.array([0.1, 0.3, 0.2]),
    "validation_loss": np.array([0.5, 0.4, 0.1]),
    "validation_error": np.array([0.2, 0.1, 0.3]),
  }
  diverged = np.array([False, False, True])
  describe = describe_progress
  # Member 2 has the lowest validation loss but diverged: member 1, with its own train loss.
  assert describe(metrics, diverged, members, "validation_loss") == (
    "best lr=0.001 seed=1 by validation_loss: train_loss=0.3, validation_loss=0.4"
  )
  assert describe(metrics, diverged, members, "validation_error") == (
    "best lr=0.001 seed=1 by validation_error: train_loss=0.3, validation_loss=0.4, "
    "validation_error=0.1"
  )
  # Without a validation split, its test counterpart; without either, the training loss.
  tested = {"train_loss": metrics["train_loss"], "test_loss": np.array([0.3, 0.2, 0.1])}
  assert describe(tested, diverged, members, "validation_loss").startswith(
    "best lr=0.001 seed=1 by test_loss:"
  )
  trained = {"train_loss": metrics["train_loss"]}
  assert describe(trained, diverged, members, "validation_loss") == (
    "best lr=0.001 seed=0 by train_loss: train_loss=0.1"
  )
  assert describe(trained, np.array([True] * 3), members, "validation_loss") == (
    "every member diverged"
  )


def test_more_epochs_continue_the_run(tmp_path, reference):
  workdir = str(tmp_path / "run")
  engine.fit(tiny_like(REFERENCE, epochs=2), workdir, REFERENCE_MEMBERS, progress=False)
  assert workdirs.read_json(os.path.join(workdir, "summary.json"))["epochs"] == 2
  # As if the first epochs were trained under other versions: the run still resumes (the
  # software is no part of its identity), and config.json keeps both records.
  path = os.path.join(workdir, "config.json")
  config = workdirs.read_json(path)
  (current,) = config["software"]
  older = {**current, "jax": "0.0.1", "git": {"commit": "0" * 40, "dirty": True}}
  workdirs.write_json(path, {**config, "software": [older]})
  engine.fit(REFERENCE, workdir, REFERENCE_MEMBERS, progress=False)
  assert_same_run(workdir, reference)
  assert workdirs.read_json(path)["software"] == [older, current]


@pytest.mark.parametrize(
  ("change", "grid", "message"),
  [
    ({"dropout": 0.5}, REFERENCE_MEMBERS, "dropout 0.25 (now 0.5)"),
    ({"model_options": {"hidden": 8}}, REFERENCE_MEMBERS, "model_options {} (now {'hidden': 8})"),
    ({"batch_size": 4}, REFERENCE_MEMBERS, "batch_size 8 (now 4)"),
    ({}, Members([1e-2], [0, 1]), "members lrs=[0.01, 0.003]"),
  ],
)
def test_incompatible_resume_is_refused_untouched(reference, change, grid, message):
  before = hash_tree(reference)
  with pytest.raises(ValueError, match=re.escape(message)) as error:
    engine.fit(tiny_like(REFERENCE, **change), reference, grid, progress=False)
  assert "another `workdir`" in str(error.value)
  assert hash_tree(reference) == before


def test_a_diverging_member_leaves_the_others_unchanged(tmp_path, reference):
  """Members never exchange values: in a grid of the same shape (one compiled program), two
  members diverging beside members 0 and 1 leave their numbers bitwise as in the reference grid,
  whose other two members train. Trained alone in a grid of 2 (another program, whose sums XLA
  may round otherwise: on an AVX-512 Intel Xeon the evaluation's sums differ in the 8th digit),
  they agree to float32 rounding."""
  workdir, without = str(tmp_path / "run"), str(tmp_path / "without")
  grid, two = Members([1e-2, 1e30], [0, 1]), tiny_like(REFERENCE, epochs=2)
  assert list(grid)[:2] == list(REFERENCE_MEMBERS)[:2]
  engine.fit(two, workdir, grid, progress=False)  # Members 2 and 3 diverge in epoch 1.
  _, after_two = engine.restore(two, workdir)
  summary = engine.fit(REFERENCE, workdir, grid, progress=False)  # Resumed: more epochs.
  records = workdirs.read_metrics(workdir)
  expected = [r for r in workdirs.read_metrics(reference) if r["member"] < 2]
  assert [r for r in records if r["member"] < 2] == expected
  engine.fit(REFERENCE, without, Members([1e-2], [0, 1]), progress=False)
  assert_close_records(workdirs.read_metrics(without), expected)
  assert [m["diverged"] for m in summary["members"]] == [False, False, True, True]
  assert [m["diverged_epoch"] for m in summary["members"]] == [None, None, 1, 1]
  assert derived_summary(workdir) == summary
  diverged = [r for r in records if r["member"] >= 2]
  assert all(r["diverged"] for r in diverged)
  # Frozen before the non-finite step: its parameters stay finite, and the epochs after leave
  # them bitwise as they were, while the others train on.
  _, state = engine.restore(REFERENCE, workdir)
  assert all(np.isfinite(leaf).all() for leaf in jax.tree.leaves(state.params))
  pairs = zip(jax.tree.leaves(after_two.params), jax.tree.leaves(state.params), strict=True)
  for before, after in pairs:
    np.testing.assert_array_equal(after[2:], before[2:])
    assert not np.array_equal(after[:2], before[:2])
  assert diverged[-1]["validation_loss"] == diverged[-3]["validation_loss"]


@pytest.mark.slow
def test_a_diverged_member_stays_frozen_when_its_loss_turns_finite_again(tmp_path):
  """A member diverges at its first non-finite loss and never trains again, though later
  batches give it finite losses: its model's hidden values above 5 are NaN, which member 1's
  large learning rate reaches on some batches and not on others. Its parameters stay exactly
  those of its last finite step to the end of the run (epoch 1's, bitwise: the same program,
  resumed), every record says it diverged in epoch 1, and its evaluations stay the same."""
  workdir = str(tmp_path / "run")
  parts, grid = tiny_like(REFERENCE, model_options={"nan_above": 5.0}), Members([3e-3, 3e-1], [0])
  engine.fit(tiny_like(parts, epochs=1), workdir, grid, progress=False)
  _, after_one = engine.restore(tiny_like(parts, epochs=1), workdir)
  summary = engine.fit(parts, workdir, grid, progress=False)  # Resumed: epochs 2 and 3.
  _, after_three = engine.restore(parts, workdir)
  pairs = zip(jax.tree.leaves(after_one.params), jax.tree.leaves(after_three.params), strict=True)
  for before, after in pairs:
    np.testing.assert_array_equal(after[1], before[1])
    assert np.isfinite(after[1]).all()
    assert not np.array_equal(after[0], before[0])  # Member 0 trains on.
  assert [(m["diverged"], m["diverged_epoch"]) for m in summary["members"]] == [
    (False, None), (True, 1)
  ]  # fmt: skip
  frozen = [r for r in workdirs.read_metrics(workdir) if r["member"] == 1]
  assert [r["epoch"] for r in frozen] == [1.0, 2.0, 3.0]
  assert all(r["diverged"] and r["train_loss"] is None for r in frozen)
  assert len({r["validation_loss"] for r in frozen}) == 1 and frozen[0]["validation_loss"] > 0


_TRACED: list[str] = []


@functools.cache  # Once: JAX's listeners cannot be removed.
def _listen_for_traces() -> None:
  def traced(event: str, duration: float, *, fun_name: str = "", **kwargs) -> None:
    del duration, kwargs
    if event == "/jax/core/compile/jaxpr_trace_duration":
      _TRACED.append(fun_name)

  jax.monitoring.register_event_duration_secs_listener(traced)


@pytest.mark.slow
def test_a_second_fit_of_the_same_program_traces_and_compiles_nothing(tmp_path):
  """A process keeps the programs it made: another grid of the same size (the evaluation seeds
  of a reproduction) trains at once; a grid of another size is another program."""
  _listen_for_traces()
  engines = ("init_members", "shuffle", "train_segment", "evaluate")
  engine.fit(REFERENCE, str(tmp_path / "first"), Members((1e-2, 3e-3), (5, 6)), progress=False)
  _TRACED.clear()
  grid = Members((1e-2, 3e-3), (7, 8))  # the same size, other seeds
  engine.fit(REFERENCE, str(tmp_path / "same_size"), grid, progress=False)
  assert not [name for name in _TRACED if name in engines], _TRACED
  _TRACED.clear()
  engine.fit(REFERENCE, str(tmp_path / "other_size"), Members((1e-2,), (7,)), progress=False)
  assert sorted(set(_TRACED) & set(engines)) == sorted(engines)


def test_every_member_diverging_stops_with_an_error(tmp_path):
  workdir = str(tmp_path / "run")
  with pytest.raises(engine.DivergedError, match="All 2 members diverged"):
    engine.fit(REFERENCE, workdir, Members([1e30], [0, 1]), progress=False)
  summary = workdirs.read_json(os.path.join(workdir, "summary.json"))
  assert [m["diverged"] for m in summary["members"]] == [True, True]
  assert {r["epoch"] for r in workdirs.read_metrics(workdir)} == {1.0}  # stopped at once
  assert derived_summary(workdir) == summary  # records of fewer epochs than the config's


def free_port() -> int:
  with socket.socket() as s:
    s.bind(("localhost", 0))
    return s.getsockname()[1]


def run_reference(devices: int, *args: str) -> subprocess.Popen:
  """tests/tiny_task.py in a fresh process of ``devices`` CPU devices (see its doc)."""
  env = dict(
    os.environ,
    XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}",
    PYTHONPATH=ROOT,
    JAX_PLATFORMS="cpu",
  )
  script = os.path.join(ROOT, "tests", "tiny_task.py")
  return subprocess.Popen(
    [sys.executable, script, *args], env=env, cwd=ROOT,
    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
  )  # fmt: skip


def assert_close_metrics(workdir: str, reference: str) -> None:
  assert_close_records(workdirs.read_metrics(workdir), workdirs.read_metrics(reference))


def assert_close_records(records: list[dict], expected: list[dict]) -> None:
  """The same records, each number to float32 rounding (two different programs); an error
  rate to one example of its split (two logits within rounding of each other may rank either
  way in another program)."""
  sizes = {split: len(data["targets"]) for split, data in make_splits().items()}
  assert len(records) == len(expected)
  for record, want in zip(records, expected, strict=True):
    assert record.keys() == want.keys()
    for key, value in want.items():
      split = key.removesuffix("_error")
      atol = 1 / sizes[split] if key != split and value is not None else 1e-6
      np.testing.assert_allclose(record[key], value, rtol=1e-5, atol=atol, err_msg=key)


# The runs of the layout tests, by device count: (name, grid of tiny_task.GRIDS, --members_axis,
# the layout line the run prints). Each device count is one process that trains its runs in
# turn; "three" (3 members) is padded to 4.
LAYOUT_RUNS = {
  2: [
    ("2x1", "reference", None, "4 members on a mesh of 2 (members) x 1 (data) cpu devices"),
    ("1x2", "reference", 1, "4 members on a mesh of 1 (members) x 2 (data) cpu devices"),
    ("three_2x1", "three", None, "3 members on a mesh of 2 (members) x 1 (data) cpu devices, "
     "padded with 1 copy of the last member (discarded)"),
  ],
  4: [
    ("4x1", "reference", None, "4 members on a mesh of 4 (members) x 1 (data) cpu devices"),
    ("2x2", "reference", 2, "4 members on a mesh of 2 (members) x 2 (data) cpu devices"),
    ("three_2x2", "three", None, "3 members on a mesh of 2 (members) x 2 (data) cpu devices, "
     "padded with 1 copy of the last member (discarded)"),
  ],
}  # fmt: skip


@pytest.fixture(scope="module")
def layouts(tmp_path_factory) -> dict[str, str]:
  """The workdirs of `LAYOUT_RUNS` by name, trained in two fresh processes (2 and 4 devices)
  side by side, and, meanwhile, "three_1x1": the 3-member grid on this process's one device
  (unpadded)."""
  root = tmp_path_factory.mktemp("layouts")
  processes = {
    devices: run_reference(
      devices, *[",".join([str(root / name), grid, *([str(axis)] if axis else [])])
                 for name, grid, axis, _ in runs]
    )
    for devices, runs in LAYOUT_RUNS.items()
  }  # fmt: skip
  engine.fit(REFERENCE, str(root / "three_1x1"), GRIDS["three"], progress=False)
  for devices, process in processes.items():
    output = process.communicate(timeout=600)[0]
    assert process.returncode == 0, output
    for name, _, _, layout in LAYOUT_RUNS[devices]:
      assert f"{layout}\n" in output, name
  names = [name for runs in LAYOUT_RUNS.values() for name, *_ in runs]
  return {name: str(root / name) for name in [*names, "three_1x1"]}


@pytest.mark.slow
def test_each_members_results_do_not_depend_on_the_layout(layouts, reference):
  """Every member trains the same whichever devices hold it: to float32 rounding, not bit for
  bit, since XLA compiles a program partitioned over several devices with other fusions (which
  round a multiply-add differently), and a batch split over ``data`` sums its gradient in
  another order. The run's config is the same, so a run can resume on another layout."""
  for name in ("2x1", "1x2", "4x1", "2x2"):
    assert_close_metrics(layouts[name], reference)
    config = workdirs.read_json(os.path.join(layouts[name], "config.json"))
    expected = workdirs.read_json(os.path.join(reference, "config.json"))
    # The same run; the strategy a device takes its members with follows its share of them.
    strategy = config.pop("member_strategy")
    assert strategy in engine.mesh.STRATEGIES
    assert config.pop("member_strategies") == [[1, strategy]]
    expected.pop("member_strategy"), expected.pop("member_strategies")
    assert config == expected


def checkpoint_shapes(workdir: str, epoch: int) -> dict[str, tuple[int, ...]]:
  """The shape of every array a checkpoint holds, as Orbax's own metadata records it."""
  path = os.path.join(workdir, "checkpoints", str(epoch), "default")
  tree = ocp.StandardCheckpointer().metadata(path).item_metadata.tree
  leaves = jax.tree_util.tree_leaves_with_path(tree, is_leaf=lambda x: hasattr(x, "shape"))
  return {jax.tree_util.keystr(path): tuple(leaf.shape) for path, leaf in leaves}


@pytest.mark.slow
def test_a_padded_grid_equals_its_members_unpadded_and_the_pad_is_dropped(layouts):
  """3 members padded to 4 (on 2 or 4 devices) train as the 3 alone on one device, to float32
  rounding; the pad reaches no file: metrics.jsonl, summary.json, checkpoints, TensorBoard."""
  three_reference = layouts["three_1x1"]
  expected_summary = workdirs.read_json(os.path.join(three_reference, "summary.json"))
  expected_shapes = checkpoint_shapes(three_reference, 3)
  assert {shape[0] for shape in expected_shapes.values()} == {3}
  _, expected_state = engine.restore(REFERENCE, three_reference)
  for name in ("three_2x1", "three_2x2"):
    workdir = layouts[name]
    assert_close_metrics(workdir, three_reference)  # as many records, members 0-2
    assert read_text(workdir, "config.json") == read_text(three_reference, "config.json")
    summary = workdirs.read_json(os.path.join(workdir, "summary.json"))
    assert len(summary["members"]) == 3
    for member, want in zip(summary["members"], expected_summary["members"], strict=True):
      assert member["best_epoch"] == want["best_epoch"]
      for key in ("best", "final"):
        assert member[key] == pytest.approx(want[key], rel=1e-5, abs=1e-6)
    for epoch in (2, 3):
      assert checkpoint_shapes(workdir, epoch) == expected_shapes
    _, state = engine.restore(REFERENCE, workdir)
    for leaf, want in zip(jax.tree.leaves(state), jax.tree.leaves(expected_state), strict=True):
      np.testing.assert_allclose(np.asarray(leaf), np.asarray(want), rtol=1e-4, atol=1e-5)
    assert sorted(os.listdir(os.path.join(workdir, "tensorboard"))) == sorted(
      os.listdir(os.path.join(three_reference, "tensorboard"))
    )


def test_each_epochs_batches_are_a_permutation_drawn_from_seed_and_epoch():
  """Each epoch, a member's batches hold every training example once, but for the remainder
  of an epoch that is no whole batch (100 examples, batches of 8: 4 left out); the order comes
  from the member's seed and the epoch only, not from its learning rate or place in the grid."""
  parts = tiny(data_options={"num_train": 100})
  members = Members([1e-2, 3e-3], [0, 1])  # members 0 and 2 have seed 0, 1 and 3 seed 1
  program = engine.make_program(parts, engine.make_mesh(4), 4)
  batches_ExSxMxB = shuffled_batches(program, members)
  assert batches_ExSxMxB.shape == (3, 12, 4, 8)
  orders = np.moveaxis(batches_ExSxMxB, 2, 0).reshape(4, 3, 96)  # [members, epochs, items]
  for order in orders.reshape(-1, 96):
    assert len(set(order)) == 96 and set(order) <= set(range(100))
  np.testing.assert_array_equal(orders[0], orders[2])  # the same seed: the same batches
  np.testing.assert_array_equal(orders[1], orders[3])
  # Every (seed, epoch) its own order: any two agree in about one place of 96, as two
  # independent permutations do, and leave out other examples.
  distinct = orders[:2].reshape(6, 96)
  for a, b in itertools.combinations(range(6), 2):
    assert np.mean(distinct[a] == distinct[b]) < 0.1, (a, b)
  left_out = {frozenset(set(range(100)) - set(order)) for order in distinct}
  assert len(left_out) > 1


@pytest.mark.slow
def test_batches_do_not_depend_on_the_layout(layouts, reference):
  """The batches each run of `LAYOUT_RUNS` drew (saved beside its workdir) are the ones drawn
  on one device."""
  for grid in ("reference", "three"):
    program = engine.make_program(REFERENCE, engine.make_mesh(1), len(GRIDS[grid]))
    expected = shuffled_batches(program, GRIDS[grid])
    for name, run_grid, *_ in (run for runs in LAYOUT_RUNS.values() for run in runs):
      if run_grid == grid:
        np.testing.assert_array_equal(np.load(f"{layouts[name]}.batches.npy"), expected, name)


@pytest.mark.slow
def test_two_processes_agree_with_one(tmp_path, reference):
  two_by_two = f"{tmp_path / 'two_by_two'},reference"
  address = f"localhost:{free_port()}"
  processes = [run_reference(2, two_by_two, f"--process={address},2,{i}") for i in range(2)]
  for process in processes:
    output = process.communicate(timeout=300)[0]
    assert process.returncode == 0, output
  assert_close_metrics(str(tmp_path / "two_by_two"), reference)


# Every initializer of the models but the tiny task's (lecun_normal, Flax's default), at a shape
# it is used at: a dense kernel (the unit-norm one is only for those), a 3x3 convolution's, an
# embedding table.
INITIALIZERS = {
  "unit_norm": (models.unit_norm_init, (784, 64)),
  "glorot_uniform": (flax.linen.initializers.glorot_uniform(), (3, 3, 16, 32)),
  "he_normal": (flax.linen.initializers.variance_scaling(2.0, "fan_in", "normal"), (3, 3, 16, 32)),
  "normal": (flax.linen.initializers.normal(1.0), (21, 50)),
}


@pytest.mark.slow
def test_init_compiled_at_level_1_draws_the_bits_of_the_default_level():
  """`Program.init` compiles at XLA's optimization level 1 on CPU (it runs once a run, and
  LLVM's optimizing of its unrolled threefry rounds took most of its compile time): it draws
  the parameters the default level draws (the bits; floats to 2 ulp, two programs), so a run
  started today starts where the committed runs started. (benchmarks/init_compile.py checks
  every task's model at full size.)"""
  num = len(REFERENCE_MEMBERS)
  mesh = engine.make_mesh(num)
  program = engine.make_program(REFERENCE, mesh, num)
  seeds, learning_rates = program.put_members(REFERENCE_MEMBERS)
  default = jax.jit(functools.partial(engine.mesh.init_members, program.config, mesh))
  for leaf, want in zip(
    jax.tree.leaves(program.init(seeds, learning_rates)),
    jax.tree.leaves(default(seeds, learning_rates)),
    strict=True,
  ):
    assert_same_draw(np.asarray(leaf), np.asarray(want))
  key = jax.random.key(3)
  for name, (init, shape) in INITIALIZERS.items():
    draw = functools.partial(init, shape=shape)
    assert_same_draw(
      np.asarray(jitted.jit(draw)(key)),  # at level 1, as the engine and tests/jitted.py
      np.asarray(jax.jit(draw)(key)),
      err_msg=name,
    )


def assert_same_draw(got: np.ndarray, want: np.ndarray, err_msg: str = "") -> None:
  """Integers (random bits, counters) bit for bit; floats to 2 ulp: the two optimization levels
  are two programs, whose float arithmetic (the normal initializers' inverse erf) another CPU
  may round otherwise."""
  if np.issubdtype(want.dtype, np.floating):
    np.testing.assert_array_max_ulp(got, want, maxulp=2)
  else:
    np.testing.assert_array_equal(got, want, err_msg=err_msg)


def dropout_masks(parts, seed: int, epoch: int, steps: int, bits: str) -> list[np.ndarray]:
  """The tiny MLP's dropout masks ([batch, hidden], scaled by 1 / (1 - rate)) at a member's
  ``steps`` first steps of ``epoch``, drawn by Flax's own Dropout from the keys the trainer
  documents: the step's threefry key (seed, step stream, epoch, step) is split, and the second
  half is the dropout key (``threefry``), or the hash key made from it (``hash``)."""
  model = TinyMLP(dropout=parts.model.dropout)
  # Hidden units all 1, so the Dropout's output is its scaled mask.
  params = {
    "Dense_0": {"kernel": np.zeros((6, 16), np.float32), "bias": np.ones(16, np.float32)},
    "Dense_1": {"kernel": np.zeros((16, 3), np.float32), "bias": np.zeros(3, np.float32)},
  }
  masks = []
  for step in range(steps):
    key = jax.random.split(prng.fold_key(seed, prng.STEP, epoch, step))[1]
    key = prng.make_dropout_key(key) if bits == "hash" else key
    _, captured = model.apply(
      {"params": params}, np.zeros((parts.batch_size, 6), np.float32), train=True,
      rngs={"dropout": key}, capture_intermediates=True, mutable=["intermediates"],
    )  # fmt: skip
    masks.append(np.float64(captured["intermediates"]["Dropout_0"]["__call__"][0]))
  return masks


@pytest.mark.slow
def test_threefry_dropout_bits_train_other_masks_and_are_recorded_as_another_run(tmp_path):
  """Each setting trains with its own masks: the run's parameters and logged loss against
  float64 NumPy Adam with the masks Flax draws from that setting's keys."""
  parts = tiny_like(REFERENCE, epochs=1)
  members = Members([1e-2], [0])
  train = make_splits()["train"]
  initial, batches_ExSxMxB = initial_state_and_batches(parts, members)
  steps = batches_ExSxMxB.shape[1]
  for bits in prng.DROPOUT_BITS:
    workdir = str(tmp_path / bits)
    engine.fit(tiny_like(parts, dropout_bits=bits), workdir, members, progress=False)
    masks = dropout_masks(parts, 0, 1, steps, bits)
    assert 0.6 < np.mean([m > 0 for m in masks]) < 0.9  # a quarter dropped
    after, losses = numpy_adam(
      member_params(initial.params, 0), train, batches_ExSxMxB[0, :, 0], 1e-2, masks
    )
    _, state = engine.restore(tiny_like(parts, dropout_bits=bits), workdir)
    assert_params_close(state.params, 0, after[-1])
    [record] = workdirs.read_metrics(workdir)
    np.testing.assert_allclose(record["train_loss"], np.mean(losses), rtol=1e-5)
  hashed, threefry = (dropout_masks(parts, 0, 1, 1, bits)[0] for bits in ("hash", "threefry"))
  assert np.mean(hashed != threefry) > 0.2  # other masks
  # The default is left out of config.json, so configs written before the field still match.
  hashed, threefry = str(tmp_path / "hash"), str(tmp_path / "threefry")
  assert "dropout_bits" not in workdirs.read_json(os.path.join(hashed, "config.json"))["spec"]
  config = workdirs.read_json(os.path.join(threefry, "config.json"))
  assert config["spec"]["dropout_bits"] == "threefry"
  with pytest.raises(ValueError, match=r"differs in: dropout_bits 'threefry' \(now 'hash'\)"):
    engine.fit(tiny_like(parts, epochs=2), threefry, members, progress=False)


def test_members_hold_what_int32_seeds_and_float32_rates_hold():
  grid = Members([1.2e-38, 3.0e38, 1e-3], [0, 2**31 - 1, -(2**31)])
  assert list(grid)[:2] == [(1.2e-38, 0), (1.2e-38, 2**31 - 1)]  # learning-rate major
  with pytest.raises(ValueError, match="`seeds` has 2147483648; seeds are int32"):
    Members([1e-3], [2**31])
  with pytest.raises(ValueError, match="has 1e-300, which is 0 in float32"):
    Members([1e-300], [0])
  assert np.float32(1e-300) == 0 and np.float32(1e-46) == 0  # what the check prevents
  with pytest.raises(ValueError, match="has 1e-39, which is 0 in float32"):
    Members([1e-39], [0])  # a float32 subnormal: not a usable rate either
  with pytest.raises(ValueError, match="has 1e\\+39, which is infinite in float32"):
    Members([1e39], [0])
  for bad, message in [
    (([], [0]), "`learning_rates` is empty"),
    (([1e-3], []), "`seeds` is empty"),
    (([1e-3, 1e-3], [0]), "repeats a value"),
    (([1e-3], [1, 1]), "repeats a seed"),
    (([float("nan")], [0]), "finite and > 0"),
    (([-1e-3], [0]), "finite and > 0"),
  ]:
    with pytest.raises(ValueError, match=message):
      Members(*bad)


def test_the_library_names_its_arguments_not_the_scripts_flags(tmp_path):
  """A notebook's call reads `workdir`, not --workdir: flags are experiments/'s words."""
  path = tmp_path / "results.txt"
  path.write_text("precious\n")
  with pytest.raises(workdirs.WorkdirError) as error:
    engine.fit(REFERENCE, str(path), REFERENCE_MEMBERS, progress=False)
  assert str(error.value) == (
    f"`workdir` {path} is a file, not a folder; pass a new folder or this run's workdir."
  )
  with pytest.raises(ValueError) as error:
    engine.fit(REFERENCE, str(tmp_path / "run"), REFERENCE_MEMBERS, members_axis=0)
  assert str(error.value).startswith("`members_axis` 0 does not divide the ")
  assert "--" not in str(error.value)
  assert path.read_text() == "precious\n" and not (tmp_path / "run").exists()


def test_more_steps_than_the_int32_step_counter_holds_are_refused_before_the_workdir(tmp_path):
  """A member's step counts on from epoch to epoch in int32 (its keys are drawn from it):
  100,000 epochs of 21,475 steps (batch 1) would wrap it. Refused before the workdir is made."""
  parts = tiny_like(REFERENCE, epochs=100_000, batch_size=1, data_options={"num_train": 21_475})
  with pytest.raises(ValueError) as error:
    engine.fit(parts, str(tmp_path / "run"), Members([1e-2], [0]), progress=False)
  assert str(error.value) == (
    "`epochs` 100000 of 21,475 steps (`batch_size` 1, 21,475 items) make 2,147,500,000 steps, "
    "more than the int32 step counter holds (2,147,483,647); train fewer `epochs` or with a "
    "larger `batch_size`."
  )
  assert not (tmp_path / "run").exists()


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
  engine.fit(tiny_like(REFERENCE, epochs=1), str(tmp_path), Members([5e-3], [4]), progress=False)
  config = workdirs.read_json(tmp_path / "config.json")
  assert config["spec"]["learning_rates"] == [5e-3] and config["spec"]["seeds"] == 1
  assert config["members"] == [{"seed": 4, "learning_rate": 5e-3}]


# ------------------------------------------------------------------- bfloat16 computation

# Closeness of a bfloat16 run to the float32 run of the same grid: bfloat16 keeps 8 significant
# bits (unit roundoff 2^-8, 0.39%). A loss averages 32 to 64 examples whose rounding errors
# largely cancel, and tiny_mnist's 3 epochs are 21 steps, so the curves agree to well under one
# roundoff where rounding only perturbs them (measured: at most 0.15%); 2% leaves room for the
# trajectories to drift apart by rounding without letting a wrong computation (a loss off by a
# factor, a layer in the wrong type) pass. A classification error may flip the examples that
# lie on the decision boundary: up to 4 of the 64 test images.
BF16_LOSS_RTOL = 0.02
BF16_ERROR_ATOL = 4 / 64


def tiny_mnist(tmp_path, dtype: str, epochs: int = 3):
  from tiny_task import write_mnist_files

  from gelujax import tasks

  data_dir = tmp_path / "mnist"
  if not data_dir.exists():
    write_mnist_files(str(data_dir))
  spec = tasks.get("tiny_mnist(data_options={'validation_size': 32})")
  spec = spec.replace(dtype=dtype, epochs=epochs)
  return tasks.build(spec, spec.load_data(str(data_dir)))


@pytest.mark.slow
def test_bfloat16_trains_close_to_float32_with_float32_state(tmp_path):
  members = Members((1e-3,), (0, 1))
  runs = {}
  for dtype in ("float32", "bfloat16"):
    engine.fit(tiny_mnist(tmp_path, dtype), str(tmp_path / dtype), members, progress=False)
    runs[dtype] = workdirs.read_metrics(tmp_path / dtype)
  low, full = runs["bfloat16"], runs["float32"]
  first, last = low[:2], low[-2:]
  assert all(b["train_loss"] < 0.8 * a["train_loss"] for a, b in zip(first, last, strict=True))
  for a, b in zip(low, full, strict=True):
    assert (a["member"], a["epoch"]) == (b["member"], b["epoch"])
    for key in ("train_loss", "validation_loss", "test_loss"):
      assert abs(a[key] - b[key]) <= BF16_LOSS_RTOL * b[key], (key, a, b)
    assert abs(a["test_error"] - b["test_error"]) <= BF16_ERROR_ATOL, (a, b)
  assert low != full  # computed in another type: not the float32 numbers
  # Parameters, optimizer state and batch statistics are float32 in the checkpoint.
  _, state = engine.restore(tiny_mnist(tmp_path, "bfloat16"), str(tmp_path / "bfloat16"))
  assert {leaf.dtype for leaf in jax.tree.leaves(state.params)} == {np.dtype(np.float32)}
  floats = [leaf for leaf in jax.tree.leaves(state.opt_state) if leaf.dtype.kind == "f"]
  assert floats and {leaf.dtype for leaf in floats} == {np.dtype(np.float32)}
  # config.json records the dtype only when it is not float32 (runs before it keep their
  # identity), and a resume with another dtype is refused like any other field, untouched.
  configs = {d: workdirs.read_json(tmp_path / d / "config.json")["spec"] for d in runs}
  assert configs["bfloat16"]["dtype"] == "bfloat16" and "dtype" not in configs["float32"]
  before = hash_tree(str(tmp_path / "bfloat16"))
  other = tiny_mnist(tmp_path, "float32", epochs=4)
  with pytest.raises(ValueError, match=r"dtype 'bfloat16' \(now 'float32'\)"):
    engine.fit(other, str(tmp_path / "bfloat16"), members, progress=False)
  assert hash_tree(str(tmp_path / "bfloat16")) == before


def jaxpr_equations(jaxpr):
  """Every equation of a jaxpr and of the jaxprs inside it (scan, shard_map, jit, ...)."""
  for eqn in jaxpr.eqns:
    yield eqn
    for param in eqn.params.values():
      for sub in param if isinstance(param, list | tuple) else [param]:
        if isinstance(sub, jax.extend.core.ClosedJaxpr):
          yield from jaxpr_equations(sub.jaxpr)
        elif isinstance(sub, jax.extend.core.Jaxpr):
          yield from jaxpr_equations(sub)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_bfloat16_programs_compute_products_and_activations_in_bfloat16(tmp_path, dtype):
  parts = tiny_mnist(tmp_path, dtype)
  splits = parts.splits
  members = Members((1e-3,), (0, 1))
  program = engine.make_program(parts, engine.make_mesh(2), 2)
  seeds, lrs = program.put_members(members)
  state = program.init(seeds, lrs)
  args = (state, program.put_data(splits["train"]), program.shuffle(seeds, np.int32(1)), seeds)
  train = jax.make_jaxpr(
    functools.partial(program.train_segment, num_steps=2, epoch=np.int32(1)),
  )(*args, lrs, first_step=np.int32(0))
  evaluate = jax.make_jaxpr(program.evaluate)(state, program.put_eval_split(splits["test"]))
  expected = np.dtype(getattr(jax.numpy, dtype))
  # Every matrix product, forward and backward (3 layers: 3 forward, 5 backward, 3 more for the
  # dropout-off loss when the model draws randomness; tiny_mnist has none).
  products = [e for e in jaxpr_equations(train.jaxpr) if e.primitive.name == "dot_general"]
  assert len(products) >= 8
  assert {e.outvars[0].aval.dtype for e in products} == {expected}
  # Each hidden activation (gelu_tanh, a jitted function) takes and returns the compute type:
  # 2 layers, traced twice (the first evaluation batch, then the scan over the others).
  evaluated = jaxpr_equations(evaluate.jaxpr)
  activations = [e for e in evaluated if e.params.get("name") == "gelu_tanh"]
  assert len(activations) == 4
  for eqn in activations:
    assert eqn.invars[0].aval.dtype == eqn.outvars[0].aval.dtype == expected
  # Parameters and the state stay float32 in either case; losses and metrics are float32.
  assert {leaf.dtype for leaf in jax.tree.leaves(state.params)} == {np.dtype(np.float32)}
  assert {v.aval.dtype for v in evaluate.jaxpr.outvars} == {np.dtype(np.float32)}
  assert train.jaxpr.outvars[-1].aval.dtype == np.float32  # the training loss


@pytest.mark.slow
def test_an_activation_is_resolved_once_where_the_task_is_checked_and_never_in_the_step():
  """The walk of ``--activation`` (docs/extending.md): the spec is resolved once, when the
  TaskSpec checks it; `tasks.build` gives the model the resolved function, and tracing and
  running the step resolves nothing (`specs.resolve_activation` is the one place a spec
  becomes a function). tests/test_train_cli.py counts the parses of a whole run."""
  resolve_activation.cache_clear()
  spec = tasks.get("tiny_mnist").replace(activation="gaussian_gelu(mu=0.25, sigma=0.75)")
  assert resolve_activation.cache_info().misses == 1
  rng = np.random.default_rng(0)
  train = {
    "inputs": rng.integers(0, 256, (64, 28, 28, 1)).astype(np.uint8),
    "targets": rng.integers(0, 10, 64).astype(np.int32),
  }
  parts = tasks.build(spec, {"train": train})
  assert resolve_activation.cache_info().misses == 1
  program = engine.make_program(parts, engine.make_mesh(1), 1)
  assert not isinstance(program.config.model.activation, str)
  called = resolve_activation.cache_info()
  seeds, learning_rates = program.put_members(Members((1e-3,), (0,)))
  state = program.init(seeds, learning_rates)
  batches = program.shuffle(seeds, np.int32(1))
  state, loss = program.train_segment(
    state, program.put_data(train), batches, seeds, learning_rates, epoch=np.int32(1),
    first_step=np.int32(0), num_steps=program.steps_per_epoch,
  )  # fmt: skip
  assert np.isfinite(np.asarray(loss)).all()
  assert resolve_activation.cache_info() == called  # neither parsed nor looked up in the step


# ------------------------------------------------------------------------ member strategies

# The reference runs take this CPU's rule (`gelujax.engine.mesh.RULE`); the tests below train
# the other strategy beside it, whichever the rule picks.
RULED = engine.mesh.RULE["cpu", False]
OTHER = "vmap" if RULED == "map" else "map"


@pytest.fixture(scope="module")
def other(tmp_path_factory) -> str:
  """The reference grid trained with the strategy this CPU's rule does not pick."""
  workdir = str(tmp_path_factory.mktemp("other") / "run")
  engine.fit(REFERENCE, workdir, REFERENCE_MEMBERS, progress=False, member_strategy=OTHER)
  return workdir


def test_the_two_strategies_train_each_member_alike_to_float32_rounding(other, reference):
  """The other strategy is another program than the reference's: each member's every record
  agrees to float32 rounding, not bit for bit, and the run's identity is the same (config.json
  differs only in the strategy it records)."""
  assert_close_metrics(other, reference)
  config = workdirs.read_json(os.path.join(other, "config.json"))
  expected = workdirs.read_json(os.path.join(reference, "config.json"))
  assert (config.pop("member_strategy"), expected.pop("member_strategy")) == (OTHER, RULED)
  assert config.pop("member_strategies") == [[1, OTHER]]
  assert expected.pop("member_strategies") == [[1, RULED]]
  assert config == expected
  _, state = engine.restore(REFERENCE, other)
  _, want = engine.restore(REFERENCE, reference)
  pairs = zip(jax.tree.leaves(state.params), jax.tree.leaves(want.params), strict=True)
  for leaf, want_leaf in pairs:
    np.testing.assert_allclose(leaf, want_leaf, rtol=1e-4, atol=1e-6)


def test_a_killed_run_resumes_bitwise_in_its_strategy_and_on_request_in_the_other(
  tmp_path, monkeypatch, other
):
  """A run of the other strategy killed after its checkpoint of epoch 2 resumes under "auto"
  with the strategy it recorded, not the rule's, to the uninterrupted run's files and state bit
  for bit (the same program). Resumed with the rule's strategy asked for instead (allowed: the
  strategy is not the run's identity), its last epoch agrees to float32 rounding, and
  config.json records the strategy it finished with and which epochs each strategy trained."""
  workdir, switched = str(tmp_path / "run"), str(tmp_path / "switched")
  kill_at_save(monkeypatch, 2, after_saving=True)
  with pytest.raises(Killed):
    engine.fit(REFERENCE, workdir, REFERENCE_MEMBERS, progress=False, member_strategy=OTHER)
  monkeypatch.undo()
  shutil.copytree(workdir, switched)
  engine.fit(REFERENCE, workdir, REFERENCE_MEMBERS, progress=False)  # auto
  assert_same_run(workdir, other)
  assert workdirs.read_json(os.path.join(workdir, "config.json"))["member_strategy"] == OTHER
  engine.fit(REFERENCE, switched, REFERENCE_MEMBERS, progress=False, member_strategy=RULED)
  assert_close_metrics(switched, other)
  config = workdirs.read_json(os.path.join(switched, "config.json"))
  assert config["member_strategy"] == RULED
  assert config["member_strategies"] == [[1, OTHER], [3, RULED]]
  config = workdirs.read_json(os.path.join(workdir, "config.json"))
  assert config["member_strategies"] == [[1, OTHER]]


def test_a_run_recorded_before_strategies_resumes_vmapped(tmp_path, monkeypatch, capfd):
  """A run whose config.json records no strategy trained vmapped (the one strategy then):
  resumed under "auto" it stays vmapped, and its layout line says why."""
  workdir = str(tmp_path / "run")
  kill_at_save(monkeypatch, 1, after_saving=True)
  with pytest.raises(Killed):
    engine.fit(REFERENCE, workdir, REFERENCE_MEMBERS, progress=False, member_strategy="vmap")
  monkeypatch.undo()
  path = os.path.join(workdir, "config.json")
  config = workdirs.read_json(path)
  del config["member_strategy"]
  workdirs.write_json(path, config)
  capfd.readouterr()
  engine.fit(tiny_like(REFERENCE, epochs=2), workdir, REFERENCE_MEMBERS)
  assert workdirs.read_json(path)["member_strategy"] == "vmap"
  assert (
    "members vmapped on each device (as the run began: a resume stays one program)."
  ) in capfd.readouterr().err


def test_a_diverging_member_of_the_other_strategy_freezes_alone(tmp_path, other):
  """With the other strategy too, members 2 and 3 diverging beside members 0 and 1 leave those
  bitwise as in its reference grid (one compiled program), and stay frozen."""
  workdir = str(tmp_path / "run")
  grid = Members([1e-2, 1e30], [0, 1])
  summary = engine.fit(REFERENCE, workdir, grid, progress=False, member_strategy=OTHER)
  records = workdirs.read_metrics(workdir)
  expected = [r for r in workdirs.read_metrics(other) if r["member"] < 2]
  assert [r for r in records if r["member"] < 2] == expected
  assert [m["diverged_epoch"] for m in summary["members"]] == [None, None, 1, 1]
  frozen = [r for r in records if r["member"] == 3]
  assert len({r["validation_loss"] for r in frozen}) == 1


def test_the_layout_line_says_how_a_device_takes_its_members(tmp_path, capfd):
  engine.fit(
    tiny_like(REFERENCE, epochs=1), str(tmp_path / "run"), REFERENCE_MEMBERS,
    member_strategy="map",
  )  # fmt: skip
  assert (
    "gelujax: 4 members on a mesh of 1 (members) x 1 (data) cpu devices; members one after "
    "another (lax.map) on each device (as asked).\n"
  ) in capfd.readouterr().err


def test_a_bad_member_strategy_is_refused_before_anything_is_written(tmp_path):
  workdir = tmp_path / "run"
  with pytest.raises(ValueError) as error:
    engine.fit(REFERENCE, str(workdir), REFERENCE_MEMBERS, member_strategy="pmap")
  assert str(error.value) == "`member_strategy` 'pmap' is not one of auto, vmap, map."
  assert not workdir.exists()


@pytest.mark.parametrize(("task", "expected"), [("tiny_mnist", False), ("tiny_cifar", True)])
def test_the_rule_reads_whether_the_model_convolves(task, expected):
  """`choose_strategy`'s rule keys on the platform and on a convolution in the model's forward
  pass (found in its jaxpr, nested calls included): the MLP has none, the small convnet does;
  on this CPU a device of several members takes `RULE`'s entry, one member is vmapped."""
  spec = tasks.get(task)
  train = {
    "inputs": np.zeros((64, *((28, 28, 1) if task == "tiny_mnist" else (32, 32, 3))), np.uint8),
    "targets": np.zeros(64, np.int32),
  }
  program = engine.make_program(tasks.build(spec, {"train": train}), engine.make_mesh(2), 2)
  assert engine.step.holds_convolution(program.config) is expected
  assert program.strategy == engine.mesh.RULE["cpu", expected]
  assert engine.mesh.choose_strategy(program.config, engine.make_mesh(1), 1)[0] == "vmap"


# Trains, on 2 CPU devices, grids whose one evaluation segment is more pieces than XLA's CPU
# devices take in flight (32 each): every piece is dispatched before the first is read. Then
# checks that no program of the members layout holds a collective, and which layouts do.
_MANY_PIECES = """
import re, sys
import jax, numpy as np
from tiny_task import tiny
from gelujax import engine
from gelujax.engine.fit import PIECE_STEPS
from gelujax.members import Members

grid = Members(learning_rates=(1e-2,), seeds=(0, 1))
root = sys.argv[1]
for run, (axis, batch) in enumerate([(None, 1), (None, 1), (1, 2)]):
  parts = tiny(batch_size=batch, epochs=1, data_options={"num_train": 20000 * batch})
  engine.fit(parts, f"{root}/{run}", grid, progress=False, members_axis=axis)
  program = engine.make_program(parts, engine.make_mesh(2, axis), 2)
  assert program.steps_per_epoch // PIECE_STEPS >= 400
  seeds, lrs = program.put_members(grid)
  state = program.init(seeds, lrs)
  split = program.put_eval_split(parts.splits["validation"])
  lowered = {
    "init": program.init.lower(seeds, lrs),
    "shuffle": program.shuffle.lower(seeds, np.int32(1)),
    "train_segment": program.train_segment.lower(
      state, program.put_data(parts.train), program.shuffle(seeds, np.int32(1)), seeds, lrs,
      epoch=np.int32(1), first_step=np.int32(0), num_steps=2),
    "evaluate": program.evaluate.lower(state, split),
    "predict": program.predict.lower(state, split),
    "pad": program.pad.lower(program.unpad(state)),
  }
  found = {
    name: sorted(set(re.findall(r"all-gather|all-reduce|collective-permute|all-to-all|"
                                r"reduce-scatter", f.compile().as_text())))
    for name, f in lowered.items()
  }
  print(program.mesh.shape["members"], program.holds_collectives, found, flush=True)
"""


@pytest.mark.e2e
def test_grids_with_more_pieces_in_flight_than_xla_takes_finish_under_load(tmp_path):
  """A segment of more than 64 pieces dispatched ahead, on 2 CPU devices with a core kept busy:
  once a program held a collective (the losses gathered onto every device), this aborted after
  XLA's 40 s rendezvous timeout. On the members layout no program holds one; on the data
  layout the gradient's all-reduce does, and the loop runs those one at a time."""
  busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
  try:
    env = dict(
      os.environ,
      XLA_FLAGS="--xla_force_host_platform_device_count=2",
      PYTHONPATH=os.pathsep.join([ROOT, os.path.join(ROOT, "tests")]),
      JAX_PLATFORMS="cpu",
    )
    done = subprocess.run(
      [sys.executable, "-c", _MANY_PIECES, str(tmp_path)], env=env, capture_output=True, text=True,
      timeout=600,
    )  # fmt: skip
  finally:
    busy.kill()
    busy.wait()
  assert done.returncode == 0, done.stderr[-3000:]
  lines = done.stdout.splitlines()
  names = ("init", "shuffle", "train_segment", "evaluate", "predict", "pad")
  none = str({name: [] for name in names})
  assert lines[:2] == [f"2 False {none}"] * 2
  members, collectives, found = lines[2].split(" ", 2)
  assert (members, collectives) == ("1", "True")
  assert "'train_segment': ['all-reduce']" in found
  for name in ("init", "shuffle", "pad"):
    assert f"'{name}': []" in found
