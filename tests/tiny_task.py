"""A test-only task's parts (a small MLP on synthetic data, `tiny`: a ReLU unless its model
options name another activation), and helpers the trainer and command-line tests share.

Run as a script it trains grids one after the other in one fresh process, printing each one's
layout; the tests use it to train with other device counts (one JAX start for several layouts)
or as one process of a multi-process run:

  python tests/tiny_task.py WORKDIR,GRID[,MEMBERS_AXIS] ... [--process=COORDINATOR,COUNT,ID]

GRID names one of `GRIDS`. In a single process, beside each workdir it saves the batches
`shuffle` gives its members in epochs 1-3, ``WORKDIR.batches.npy``, ``[epochs, steps, members,
batch]``.
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import hashlib
import json
import os
import struct
import sys
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from gelujax import optimizers
from gelujax.members import Members
from gelujax.objectives import Objective
from gelujax.parts import Parts
from gelujax.specs import resolve_activation


class TinyMLP(nn.Module):
  # A name `gelujax.specs.resolve_activation` takes; "relu" is `jax.nn.relu`, as the NumPy
  # references compute it.
  activation: str = "relu"
  # The type the dense layers and the activation compute in (None: their inputs', float32).
  dtype: str | None = None
  hidden: int = 16
  num_classes: int = 3
  dropout: float = 0.0
  batch_norm: bool = False
  # Hidden values above this become NaN (a unit that overflows on large inputs): a member whose
  # weights grow gets a non-finite loss on the batches that reach it, a finite one on the rest.
  nan_above: float | None = None

  @nn.compact
  def __call__(self, x, train: bool):
    dtype = None if self.dtype is None else jnp.dtype(self.dtype)
    x = nn.Dense(self.hidden, dtype=dtype)(x)
    if self.nan_above is not None:
      x = jnp.where(x > self.nan_above, jnp.nan, x)
    if self.batch_norm:
      x = nn.BatchNorm(use_running_average=not train, momentum=0.5)(x)
    x = jax.nn.relu(x) if self.activation == "relu" else resolve_activation(self.activation)[2](x)
    x = nn.Dropout(self.dropout, deterministic=not train)(x)
    return nn.Dense(self.num_classes, dtype=dtype)(x)


def make_splits(
  num_train: int = 96, seed: int = 0, grouped: bool = False
) -> dict[str, dict[str, np.ndarray]]:
  """Three Gaussian blobs in 6 dimensions; inputs uint8 like images, labels int32.

  With ``grouped``, the training split also has "groups": runs of 1 to 4 examples.
  """
  rng = np.random.default_rng(seed)
  centres = rng.normal(size=(3, 6)) * 40 + 128

  def make(n):
    targets = rng.integers(0, 3, n).astype(np.int32)
    inputs = centres[targets] + rng.normal(size=(n, 6)) * 30
    return {"inputs": np.clip(inputs, 0, 255).astype(np.uint8), "targets": targets}

  splits = {"train": make(num_train), "validation": make(40), "test": make(30)}
  if grouped:
    splits["train"]["groups"] = np.repeat(np.arange(num_train), rng.integers(1, 5, num_train))[
      :num_train
    ].astype(np.int32)
  return splits


# The tiny task's settings, and their values unless `tiny` is given others.
SETTINGS = {
  "dropout": 0.0,
  "dropout_bits": "hash",
  "learning_rates": [1e-2],
  "seeds": 2,
  "batch_size": 8,
  "epochs": 3,
  "evals_per_epoch": 1,
  "group_batches": False,
  "select_metric": "validation_loss",
  "model_options": {},
  "data_options": {},
}


def tiny(**settings: Any) -> Parts:
  """The parts of a tiny task (a `TinyMLP` on `make_splits`'s blobs, `TinyObjective`, Adam),
  built as a test builds parts of its own: ``settings`` override `SETTINGS`. The same settings
  give the same parts (as `gelujax.tasks.build` gives the same model, optimizer and objective),
  so that a test's second fit of them compiles nothing."""
  unknown = sorted(set(settings) - set(SETTINGS))
  if unknown:
    raise TypeError(f"tiny() takes no settings {unknown}; its settings are {sorted(SETTINGS)}.")
  return _tiny(json.dumps({**SETTINGS, **settings}, sort_keys=True))


def tiny_like(parts: Parts, **settings: Any) -> Parts:
  """`tiny` with the settings of ``parts`` (from `tiny`), and ``settings`` changed."""
  return tiny(**{**parts.record["spec"], **settings})


@functools.cache
def _tiny(key: str) -> Parts:
  settings = json.loads(key)
  return Parts(
    name="tiny",
    model=TinyMLP(dropout=settings["dropout"], **settings["model_options"]),
    optimizer=functools.partial(optimizers.build, "adam", epochs=settings["epochs"]),
    objective=TinyObjective(),
    splits=make_splits(**settings["data_options"]),
    batch_size=settings["batch_size"],
    epochs=settings["epochs"],
    evals_per_epoch=settings["evals_per_epoch"],
    group_batches=settings["group_batches"],
    dropout_bits=settings["dropout_bits"],
    select_metric=settings["select_metric"],
    extendable=True,  # Adam at a constant rate
    grid=Members(tuple(settings["learning_rates"]), tuple(range(settings["seeds"]))),
    record={
      "task": "tiny",
      "dataset": "blobs",
      "activation": settings["model_options"].get("activation", "relu"),
      "spec": settings,
    },
  )


@dataclasses.dataclass(frozen=True)
class TinyObjective(Objective):
  """The tiny task's objective: inputs centred at 128 and scaled by 64, no augmentation."""

  metric_names = ("loss", "error")

  def prepare_batch(self, batch, train: bool, key):
    del train, key
    return (batch["inputs"].astype(jnp.float32) - 128) / 64, batch["targets"]

  def loss(self, outputs, targets, mask):
    losses = optax.softmax_cross_entropy_with_integer_labels(outputs, targets)
    return (losses * mask).sum() / mask.sum()

  def metrics(self, outputs, targets, mask):
    losses = optax.softmax_cross_entropy_with_integer_labels(outputs, targets)
    wrong = (outputs.argmax(-1) != targets).astype(jnp.float32)
    return {"loss": (losses * mask).sum(), "error": (wrong * mask).sum()}

  def regularizer(self, params):
    del params
    return 0.0


def write_mnist_files(folder: str, num_train: int = 256, num_test: int = 64) -> None:
  """MNIST's four gzipped IDX files, with easy classes: each label brightens its own rows."""
  rng = np.random.default_rng(0)
  os.makedirs(folder, exist_ok=True)
  for prefix, n in (("train", num_train), ("t10k", num_test)):
    labels = rng.integers(0, 10, n).astype(np.uint8)
    images = rng.integers(0, 100, (n, 28, 28)).astype(np.uint8)
    for i, label in enumerate(labels):
      images[i, 2 * label : 2 * label + 3] += 150
    for name, array in (("images-idx3", images), ("labels-idx1", labels)):
      header = b"\x00\x00\x08" + bytes([array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
      with open(os.path.join(folder, f"{prefix}-{name}-ubyte.gz"), "wb") as f:
        f.write(gzip.compress(header + array.tobytes()))


def hash_tree(directory: str) -> dict[str, str]:
  """Each file under ``directory`` -> its content hash and mtime (to see that none changed)."""
  hashes = {}
  for parent, _, files in os.walk(directory):
    for name in files:
      path = os.path.join(parent, name)
      with open(path, "rb") as f:
        hashes[path] = f"{hashlib.sha256(f.read()).hexdigest()} {os.stat(path).st_mtime_ns}"
  return hashes


# The run most tests compare against.
REFERENCE = tiny(dropout=0.25, epochs=3)
REFERENCE_MEMBERS = Members(learning_rates=(1e-2, 3e-3), seeds=(0, 1))
# Grids the script trains by name: 3 members pad to 4 on a members axis of 2 or 4 devices.
GRIDS = {
  "reference": REFERENCE_MEMBERS,
  "three": Members(learning_rates=(1e-2, 3e-3, 1e-3), seeds=(1,)),
}
SHUFFLED_EPOCHS = (1, 2, 3)


def shuffled_batches(program, members: Members) -> np.ndarray:
  """The item indices of each member's batches in `SHUFFLED_EPOCHS`, as the run draws them,
  ``[epochs, steps, members, batch]`` (the padding left out)."""
  seeds, _ = program.put_members(members)
  return np.stack(
    [np.asarray(program.shuffle(seeds, np.int32(e)))[:, : len(members)] for e in SHUFFLED_EPOCHS]
  )


def main(argv: list[str]) -> None:
  """Trains the runs named on the command line (see the module doc)."""
  from gelujax import engine, host

  runs = [a.split(",") for a in argv[1:] if not a.startswith("--process=")]
  process = [a.removeprefix("--process=") for a in argv[1:] if a.startswith("--process=")]
  if process:
    coordinator, count, index = process[0].split(",")
    host.initialize_distributed(coordinator, int(count), int(index))
  for workdir, grid, *axis in runs:
    members, members_axis = GRIDS[grid], int(axis[0]) if axis else None
    mesh = engine.make_mesh(len(members), members_axis)
    print(engine.describe_layout(len(members), mesh), flush=True)
    engine.fit(REFERENCE, workdir, members, progress=False, members_axis=members_axis)
    program = engine.make_program(REFERENCE, mesh, len(members))
    if jax.process_count() == 1:  # Another process's batches are not addressable here.
      np.save(f"{workdir}.batches.npy", shuffled_batches(program, members))


if __name__ == "__main__":
  main(sys.argv)


def wrong_share_bounds(logits, targets, tie=1e-4):
  """The share of examples whose logits' top class is not the target, as ``(fewest, most)``:
  an example whose target's logit and the largest other one are within ``tie`` of each other
  (another program's rounding could rank them either way) counts as right in the first and
  wrong in the second."""
  logits = np.asarray(logits, np.float64)
  targets = np.broadcast_to(targets, logits.shape[:-1])  # the same targets for every member
  target = np.take_along_axis(logits, targets[..., None], axis=-1)[..., 0]
  others = logits.copy()
  np.put_along_axis(others, targets[..., None], -np.inf, axis=-1)
  other = others.max(axis=-1)
  return (other > target + tie).mean(axis=-1), (other >= target - tie).mean(axis=-1)
