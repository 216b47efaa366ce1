"""`Parts`: what the engine trains, as built objects rather than settings.

`gelujax.tasks.build` makes them from a task spec and its data, parsing every string of the
spec there, once; the engine (`make_program`, `fit`, `restore`, `evaluate_members`) takes them
and knows nothing of task specs. A test or a script of one's own may make its own parts, as
flax's examples build a train state from a model and an optimizer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import flax.linen as nn
import numpy as np
import optax

from gelujax.members import Members
from gelujax.objectives import Objective


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class Parts:
  """The model, its optimizer and objective, the data, and how the run goes through them.

  Attributes:
    name: the task's name, for messages.
    model: the Linen model, its activation resolved.
    optimizer: ``(learning_rate, *, steps_per_epoch) -> optax.GradientTransformation``: the
      optimizer for one member's peak learning rate, its schedule bound to the run's epochs.
    objective: the loss, metrics and batch preparation (`gelujax.objectives`).
    splits: the data, ``{"train", "validation", "test"}`` -> arrays (``"inputs"``,
      ``"targets"``, optionally ``"groups"``); the programs depend on the training split's
      shapes, dtypes and groups.
    batch_size: examples (or whole groups, with ``group_batches``) per step.
    epochs: passes over the training split.
    evals_per_epoch: evaluations per epoch.
    group_batches: batches are ``batch_size`` whole groups of ``splits["train"]["groups"]``.
    dropout_bits: ``"hash"`` or ``"threefry"`` (`gelujax.prng`).
    steps_per_epoch: the steps of an epoch, drawn from a fresh permutation of the training
      items (at most every whole batch of them); None: every whole batch.
    select_metric: the metric whose lowest value picks a member's best evaluation.
    extendable: whether a run may be trained for another number of ``epochs`` from its
      checkpoint: true only where no step it took depends on the total (an optimizer whose
      schedule spans the run makes a longer run a new run, `gelujax.optimizers.extendable`).
    grid: the members trained when `fit` is given none.
    record: the run as config.json records it, JSON values only: ``task``, ``dataset``,
      ``activation``, ``spec`` (every setting; `fit` fills in the grid it trains) and, for a
      user's activation, ``activation_source``, for a user's model ``model_source``. A
      workdir's identity is a hash of it (`gelujax.workdir.identity`), so it must name
      everything the parts were built from.

  Two parts share compiled programs only where they hold the same model, optimizer and
  objective objects (`gelujax.tasks.build` gives the same objects for the same settings):
  a program is never reused for parts it was not built from.
  """

  name: str
  model: nn.Module
  optimizer: Callable[..., optax.GradientTransformation]
  objective: Objective
  splits: Mapping[str, Mapping[str, np.ndarray]]
  batch_size: int
  epochs: int
  evals_per_epoch: int = 1
  group_batches: bool = False
  dropout_bits: str = "hash"
  steps_per_epoch: int | None = None
  select_metric: str = "validation_loss"
  extendable: bool = False
  grid: Members
  record: Mapping[str, Any]

  def __post_init__(self):
    """Checks the record before any step: a missing field fails at once, naming it, rather
    than after an epoch when the run's files are written; the spec's ``epochs`` is this run's
    (filled in where the record leaves it out)."""
    record = self.record
    if not isinstance(record, Mapping):
      raise ValueError(
        f"Parts {self.name!r}: record is a {type(record).__name__}; it must be a dict naming the "
        "run: task, dataset, activation and spec (every setting the parts were built from)."
      )
    missing = [k for k in ("task", "dataset", "activation", "spec") if k not in record]
    if missing:
      raise ValueError(
        f"Parts {self.name!r}: record has no {', '.join(repr(k) for k in missing)}; it must "
        "name the run's task, dataset, activation and spec (a dict of every setting the parts "
        "were built from, which config.json records and a resume compares)."
      )
    spec = record["spec"]
    if not isinstance(spec, Mapping):
      raise ValueError(
        f"Parts {self.name!r}: record['spec'] is a {type(spec).__name__}; it must be a dict of "
        "the settings the parts were built from."
      )
    if "epochs" in spec and spec["epochs"] != self.epochs:
      raise ValueError(
        f"Parts {self.name!r}: record['spec']['epochs'] is {spec['epochs']!r} but epochs is "
        f"{self.epochs}; give one number of epochs."
      )
    if "epochs" not in spec:  # the run's own, as config.json and summary.json state it
      object.__setattr__(self, "record", {**record, "spec": {**spec, "epochs": self.epochs}})

  @property
  def train(self) -> Mapping[str, np.ndarray]:
    """The training split."""
    return self.splits["train"]
