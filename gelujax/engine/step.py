"""One member's training step, its evaluation, its outputs and its batches: pure functions of
arrays.

Everything here is for one member (one seed, one learning rate); `gelujax.engine.mesh` maps it
over a grid's members and jits it, and never the other way round (this module does not import
the mesh). What the functions need besides arrays is a `StepConfig`: the model, the optimizer
and the objective, given explicitly, and the epoch's shape.

All randomness comes from keys folded from (seed, stream, epoch, step) (`gelujax.prng`), so a
resumed run is bitwise equal to an uninterrupted one; nothing here reads another member's
values, so within one compiled grid a member's numbers do not depend on the others'.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import flax
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.extend import core as jax_core

from gelujax import prng
from gelujax.objectives import Objective

# How the logged training loss is measured: as the paper logged it, with dropout off on the
# step's batch before the update (one more forward pass when the model draws randomness), or
# the loss of the training pass itself (free; differs only for models with dropout).
TRAIN_LOSSES = ("dropout_off", "training_pass")


@flax.struct.dataclass
class TrainState:
  """One member's state; the mesh stacks it over members on a leading axis.

  Attributes:
    params: the model parameters.
    opt_state: the optimizer state.
    batch_stats: BatchNorm statistics ({} for models without BatchNorm).
    diverged_step: the global step at which the loss became non-finite, -1 while the member
      trains; a diverged member keeps the parameters and BatchNorm statistics it had before that
      step (its optimizer state is not used again).
  """

  params: Any
  opt_state: Any
  batch_stats: Any
  diverged_step: jax.Array


@dataclasses.dataclass(frozen=True)
class Groups:
  """Where each group (utterance) of a split lies: ``starts``/``lengths`` in frames."""

  starts: np.ndarray
  lengths: np.ndarray
  batch_frames: int  # frames in a padded batch of batch_size groups


def find_groups(groups: np.ndarray, batch_size: int, num_devices: int) -> Groups:
  """The groups of a split's ``groups`` column (ids, each group's frames contiguous); a batch
  of ``batch_size`` groups is padded to a multiple of ``num_devices`` frames (the ``data``
  axis it is split over) that holds the largest groups."""
  change = np.flatnonzero(np.diff(groups)) + 1
  starts = np.concatenate([[0], change]).astype(np.int32)
  lengths = np.diff(np.concatenate([starts, [len(groups)]])).astype(np.int32)
  if len(np.unique(groups[starts])) != len(starts):
    raise ValueError("split['groups'] must keep the frames of each group contiguous.")
  most = int(np.sort(lengths)[-batch_size:].sum())
  return Groups(starts, lengths, -(-most // num_devices) * num_devices)


def expand_groups(group_ids: jax.Array, groups: Groups) -> tuple[jax.Array, jax.Array]:
  """Frame indices and mask of a batch of whole groups, padded to ``batch_frames``."""
  starts, lengths = jnp.asarray(groups.starts), jnp.asarray(groups.lengths)
  sizes = lengths[group_ids]
  ends = jnp.cumsum(sizes)
  slots = jnp.arange(groups.batch_frames)
  # The group of each slot: how many groups end at or before it (searchsorted, as a sum of
  # comparisons: a batch holds few groups).
  ends_before = jnp.sum(ends[None, :] <= slots[:, None], axis=1, dtype=jnp.int32)
  which = jnp.minimum(ends_before, len(group_ids) - 1)
  mask = slots < ends[-1]
  frames = starts[group_ids[which]] + slots - (ends[which] - sizes[which])
  return jnp.where(mask, frames, 0), mask.astype(jnp.float32)


@dataclasses.dataclass(frozen=True)
class StepConfig:
  """What the step functions need besides arrays.

  Attributes:
    model: the Flax Linen model, called as ``model(x, train=...)``.
    optimizer: ``(learning_rate, *, steps_per_epoch) -> optax.GradientTransformation``, a
      member's optimizer for its peak learning rate (a traced scalar); see `transformation`.
    objective: batch preparation, loss, metrics and regularizer.
    sample: one example of zeros per input key (for shapes at initialisation).
    num_items: examples (or groups) in the training split.
    batch_size: examples (or groups) per step.
    steps_per_epoch: optimizer steps per epoch.
    groups: the training split's groups when batches are whole groups, else None.
    has_batch_stats: the model keeps BatchNorm statistics.
    dropout_bits: where dropout masks come from, one of `gelujax.prng.DROPOUT_BITS`.
    train_loss: how the logged training loss is measured, one of `TRAIN_LOSSES`.
  """

  model: nn.Module
  optimizer: Callable[..., optax.GradientTransformation]
  objective: Objective
  sample: dict[str, np.ndarray]
  num_items: int
  batch_size: int
  steps_per_epoch: int
  groups: Groups | None = None
  has_batch_stats: bool = False
  dropout_bits: str = "hash"
  train_loss: str = "dropout_off"

  def transformation(self, learning_rate) -> optax.GradientTransformation:
    """The optimizer of a member whose peak learning rate is ``learning_rate``."""
    return self.optimizer(learning_rate, steps_per_epoch=self.steps_per_epoch)


def holds_batch_stats(config: StepConfig) -> bool:
  """Whether the model keeps BatchNorm statistics (a ``batch_stats`` collection)."""
  variables = jax.eval_shape(
    jax.vmap(functools.partial(init_member, config)),
    jax.ShapeDtypeStruct((1,), jnp.int32),
    jax.ShapeDtypeStruct((1,), jnp.float32),
  )
  return bool(jax.tree.leaves(variables.batch_stats))


def draws_randomness(config: StepConfig) -> bool:
  """Whether the model in training mode draws randomness (dropout, the SOI map)."""
  inputs, _ = config.objective.prepare_batch(config.sample, False, jax.random.key(0))
  variables = jax.eval_shape(
    functools.partial(config.model.init, train=False), jax.random.key(0), inputs
  )
  try:
    jax.eval_shape(lambda v: config.model.apply(v, inputs, train=True), variables)
  except flax.errors.FlaxError:
    return True
  return False


def holds_convolution(config: StepConfig) -> bool:
  """Whether the model's forward pass computes a convolution (``conv_general_dilated`` in its
  jaxpr, nested calls included)."""
  inputs, _ = config.objective.prepare_batch(config.sample, False, jax.random.key(0))
  variables = jax.eval_shape(
    functools.partial(config.model.init, train=False), jax.random.key(0), inputs
  )
  jaxpr = jax.make_jaxpr(lambda v: config.model.apply(v, inputs, train=False))(variables)
  return "conv_general_dilated" in _primitives(jaxpr.jaxpr)


def _primitives(jaxpr) -> set[str]:
  found = set()
  for equation in jaxpr.eqns:
    found.add(equation.primitive.name)
    for sub in jax_core.jaxprs_in_params(equation.params):
      found |= _primitives(sub.jaxpr if isinstance(sub, jax_core.ClosedJaxpr) else sub)
  return found


def apply_model(config: StepConfig, params, batch_stats, inputs, *, train: bool, rng=None):
  """The model's outputs in float32, and its batch statistics (updated in training).

  A model that computes in bfloat16 returns bfloat16 outputs; losses and metrics are computed
  from their float32 values (a no-op for a float32 model).
  """
  variables = {"params": params}
  if config.has_batch_stats:
    variables["batch_stats"] = batch_stats
  if train and config.has_batch_stats:
    outputs, updates = config.model.apply(
      variables, inputs, train=True, rngs={"dropout": rng}, mutable=["batch_stats"]
    )
    return outputs.astype(jnp.float32), updates["batch_stats"]
  rngs = {"dropout": rng} if train else {}
  outputs = config.model.apply(variables, inputs, train=train, rngs=rngs)
  return outputs.astype(jnp.float32), batch_stats


def init_member(config: StepConfig, seed: jax.Array, learning_rate: jax.Array) -> TrainState:
  """A member's initial state: parameters drawn from its seed, a fresh optimizer state."""
  params_key, other_key = jax.random.split(prng.fold_key(seed, prng.INIT))
  inputs, _ = config.objective.prepare_batch(config.sample, False, other_key)
  variables = config.model.init({"params": params_key, "dropout": other_key}, inputs, train=False)
  return TrainState(
    params=variables["params"],
    opt_state=config.transformation(learning_rate).init(variables["params"]),
    batch_stats=variables.get("batch_stats", {}),
    diverged_step=jnp.int32(-1),
  )


def permute(config: StepConfig, seed: jax.Array, epoch: jax.Array) -> jax.Array:
  """A member's item order in ``epoch``: the items of its whole batches, [steps * batch]."""
  key = prng.fold_key(seed, prng.SHUFFLE, epoch)
  used = config.steps_per_epoch * config.batch_size
  return jax.random.permutation(key, config.num_items)[:used]


def gather(config: StepConfig, data: dict[str, jax.Array], items_B: jax.Array):
  """A batch of ``data`` (and its mask) from item indices: examples, or frames of whole groups."""
  if config.groups is None:
    return {k: v[items_B] for k, v in data.items()}, jnp.ones(items_B.shape, jnp.float32)
  frames_B, mask_B = expand_groups(items_B, config.groups)
  return {k: v[frames_B] for k, v in data.items()}, mask_B


def step_keys(
  seed: jax.Array, epoch: jax.Array, steps: jax.Array, dropout_bits: str = "hash"
) -> tuple[jax.Array, jax.Array]:
  """A member's keys for ``steps`` of ``epoch``: ``(prepare, dropout)``, each [S].

  Folded from (seed, step stream, epoch, step), and computed for a whole segment at once: on a
  CPU, threefry's rounds inside the loop over steps would cost a loop of their own each step.
  ``dropout_bits`` says what the dropout keys are (`gelujax.prng.make_dropout_key`).
  """
  keys = jax.vmap(lambda step: prng.fold_key(seed, prng.STEP, epoch, step))(steps)
  prepare, dropout = jnp.moveaxis(jax.vmap(jax.random.split)(keys), 1, 0)
  make_dropout_key = functools.partial(prng.make_dropout_key, bits=dropout_bits)
  return prepare, jax.vmap(make_dropout_key)(dropout)


def train_step(
  config: StepConfig,
  state: TrainState,
  learning_rate: jax.Array,
  batch: dict[str, jax.Array],
  mask: jax.Array,
  keys: tuple[jax.Array, jax.Array],
  step: jax.Array,
) -> tuple[TrainState, jax.Array]:
  """One optimizer step of one member on its ``batch``: its next state and training loss.

  Args:
    config: the run's `StepConfig`.
    state: the member's state.
    learning_rate: its peak learning rate.
    batch: its batch of training data, and ``mask`` (1 for the examples that count).
    keys: the step's ``(prepare, dropout)`` keys from `step_keys`.
    step: the global step, from 0.

  A member whose loss or gradients are not finite, or that diverged before, keeps its
  parameters and BatchNorm statistics exactly and records the step in ``diverged_step`` (the
  first time).
  """
  objective = config.objective
  prepare_key, dropout_key = keys
  inputs, targets = objective.prepare_batch(batch, True, prepare_key)

  def compute_loss(params):
    outputs, batch_stats = apply_model(
      config, params, state.batch_stats, inputs, train=True, rng=dropout_key
    )
    data_loss = objective.loss(outputs, targets, mask)
    return data_loss + objective.regularizer(params), (data_loss, batch_stats)

  (loss, (data_loss, batch_stats)), grads = jax.value_and_grad(compute_loss, has_aux=True)(
    state.params
  )
  if config.train_loss == "dropout_off":  # As the paper logged it: the same batch, dropout off.
    outputs, _ = apply_model(config, state.params, state.batch_stats, inputs, train=False)
    train_loss = objective.loss(outputs, targets, mask)
  else:
    train_loss = data_loss
  finite = [jnp.isfinite(g).all() for g in jax.tree.leaves(grads)]
  trains = jnp.isfinite(loss) & jnp.all(jnp.stack(finite)) & (state.diverged_step < 0)
  # A member that stops training keeps its parameters exactly: its gradients become zeros and its
  # learning rate 0, and every optimizer scales its update by the rate last, so each parameter
  # gets 0 added (its optimizer state, never used again, may change). Selecting the old state
  # instead (jnp.where on parameters and moments) made XLA copy all of them every step: 1.6x
  # the time of this guard with Adam on the autoencoder grid's parameters (`benchmarks/adam.py`).
  grads = jax.tree.map(lambda g: jnp.where(trains, g, jnp.zeros_like(g)), grads)
  rate = jnp.where(trains, learning_rate, jnp.zeros_like(learning_rate))
  updates, opt_state = config.transformation(rate).update(grads, state.opt_state, state.params)
  return TrainState(
    params=optax.apply_updates(state.params, updates),
    opt_state=opt_state,
    batch_stats=jax.tree.map(
      lambda new, old: jnp.where(trains, new, old), batch_stats, state.batch_stats
    ),
    diverged_step=jnp.where(trains | (state.diverged_step >= 0), state.diverged_step, step),
  ), train_loss


def train_steps(
  config: StepConfig,
  state: TrainState,
  learning_rate: jax.Array,
  seed: jax.Array,
  items_SxB: jax.Array,
  data: dict[str, jax.Array],
  epoch: jax.Array,
  steps_S: jax.Array,
) -> tuple[TrainState, jax.Array]:
  """One member through steps ``steps_S`` of ``epoch`` on the batches ``items_SxB`` of
  ``data``: a `lax.scan` of `train_step`. Returns its state and its training loss at each
  step, [S]."""
  keys = step_keys(seed, epoch, steps_S, config.dropout_bits)

  def scan_step(state, xs):
    step, items_B, keys = xs
    batch, mask = gather(config, data, items_B)
    return train_step(config, state, learning_rate, batch, mask, keys, step)

  return jax.lax.scan(scan_step, state, (steps_S, items_SxB, keys))


def evaluate_member(
  config: StepConfig, params: Any, batch_stats: Any, split: dict[str, jax.Array]
) -> dict[str, jax.Array]:
  """One member's metric sums over a split of padded batches, ``[batches, batch, ...]`` with a
  ``mask`` (`gelujax.engine.mesh.Program.put_eval_split`)."""

  def sum_metrics(batch):
    batch = dict(batch)
    mask = batch.pop("mask")
    inputs, targets = config.objective.prepare_batch(batch, False, None)
    outputs, _ = apply_model(config, params, batch_stats, inputs, train=False)
    return config.objective.metrics(outputs, targets, mask)

  def evaluate_batch(totals, batch):
    return jax.tree.map(jnp.add, totals, sum_metrics(batch)), None

  # The first batch's sums start the total (0 + x is x, so this is the sum from zero).
  first = sum_metrics(jax.tree.map(lambda x: x[0], split))
  totals, _ = jax.lax.scan(evaluate_batch, first, jax.tree.map(lambda x: x[1:], split))
  return totals


def predict_member(
  config: StepConfig, params: Any, batch_stats: Any, split: dict[str, jax.Array]
) -> jax.Array:
  """One member's model outputs (logits) on a split of padded batches, as `evaluate_member`
  reads it: ``[batches, batch, ...]`` in float32 (`apply_model`), dropout off, the padding's
  outputs included (the caller drops them by the split's ``mask``)."""

  def outputs_of(batch):
    batch = {k: v for k, v in batch.items() if k != "mask"}
    inputs, _ = config.objective.prepare_batch(batch, False, None)
    return apply_model(config, params, batch_stats, inputs, train=False)[0]

  return jax.lax.map(outputs_of, split)
