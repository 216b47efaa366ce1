"""The training engine: a grid of members trained as one compiled program on a device mesh.

Vocabulary (see DESIGN.md):

- **member**: one (learning rate, seed) pair of a run's grid, `Members`. The members' states are
  stacked on a leading axis and every step is `jax.vmap`ped over them, so a whole grid is one
  compiled program.
- **mesh**: the devices of every process as a 2-D `Mesh` with axes ``("members", "data")``
  (`make_mesh`). Member states, and their batches, are sharded over ``members``: members never
  communicate, so a grid spreads over devices, CPU cores or TPU chips with no traffic. Each batch
  is sharded over ``data``: **data parallelism**, where ``jax.jit`` inserts the gradient
  all-reduce. A grid that does not divide over ``members`` is padded with copies of its last
  member, whose results are dropped.
- **program**: the jitted step functions of a run on its mesh (`make_program`): `init_member`,
  `shuffle`, `train_segment` (a `lax.scan` of `train_step` over a segment of an epoch) and
  `evaluate`, each a pure module-level function.

All randomness comes from keys folded from (seed, stream, epoch, step) (`gelujax.prng`), so a
resumed run is bitwise equal to an uninterrupted one, and a member's numbers do not depend on the
other members of its grid or on the ``members`` layout.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import os
import sys
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import flax
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from gelujax import checkpoints, data, prng, writers
from gelujax import workdir as workdirs
from gelujax.members import Members

# Fields of a task that may change when a run is resumed.
_RESUMABLE_FIELDS = workdirs.RESUMABLE_FIELDS
# Evaluation batches hold at least this many examples (more work per scan step).
_EVAL_BATCH = 1024
_EVAL_SPLITS = ("validation", "test")
# How the logged training loss is measured: as the paper logged it, with dropout off on the
# step's batch before the update (one more forward pass when the model draws randomness), or
# the loss of the training pass itself (free; differs only for models with dropout).
TRAIN_LOSSES = ("dropout_off", "training_pass")


class DivergedError(RuntimeError):
  """Every member of a run diverged (its training loss became non-finite)."""


class Task(Protocol):
  """What the trainer reads of a task: `gelujax.tasks.TaskSpec` is the implementation.

  A task is a frozen dataclass of plain values (``dataclasses.asdict`` of it is written to
  config.json) with the methods below.
  """

  name: str
  dataset: str
  activation: str
  dropout: float
  dropout_bits: str
  learning_rates: tuple[float, ...]
  seeds: int
  batch_size: int
  epochs: int
  evals_per_epoch: int
  group_batches: bool
  select_metric: str

  def replace(self, **overrides: Any) -> Task: ...

  def load_data(self, data_dir: str | None = None) -> Mapping[str, dict[str, np.ndarray]]: ...

  def for_data(self, splits: Mapping[str, dict[str, np.ndarray]]) -> Task: ...

  def build_model(self) -> nn.Module: ...

  def build_optimizer(
    self, learning_rate: float | jax.Array, steps_per_epoch: int
  ) -> optax.GradientTransformation: ...

  def prepare_batch(
    self, batch: Mapping[str, jax.Array], train: bool, key: jax.Array | None
  ) -> tuple[jax.Array, jax.Array]: ...

  def loss(self, outputs: jax.Array, targets: jax.Array, mask: jax.Array) -> jax.Array: ...

  def metrics(
    self, outputs: jax.Array, targets: jax.Array, mask: jax.Array
  ) -> dict[str, jax.Array]: ...

  def regularizer(self, params: Any) -> jax.Array: ...


@flax.struct.dataclass
class TrainState:
  """One member's state; the trainer stacks it over members on a leading axis.

  Attributes:
    params: the model parameters.
    opt_state: the optimizer state.
    batch_stats: BatchNorm statistics ({} for models without BatchNorm).
    diverged_step: the global step at which the loss became non-finite, -1 while the member
      trains; a diverged member keeps the state it had before that step.
  """

  params: Any
  opt_state: Any
  batch_stats: Any
  diverged_step: jax.Array


# ----------------------------------------------------------------------------- the mesh


def choose_layout(num_members: int, num_devices: int) -> tuple[int, int]:
  """``(members, data)`` device counts for a grid: every device on ``members`` when the grid has
  at least as many members as there are devices; otherwise the largest divisor of the device
  count that the grid fills, the rest on ``data``."""
  members = max(d for d in range(1, num_devices + 1) if num_devices % d == 0 and d <= num_members)
  return members, num_devices // members


def make_mesh(num_members: int, members_axis: int | None = None) -> Mesh:
  """The ``("members", "data")`` mesh over every device of every process.

  Args:
    num_members: the grid's size, from which `choose_layout` picks the layout.
    members_axis: devices along ``members`` instead (a divisor of the device count).
  """
  count = jax.device_count()
  if members_axis is None:
    members_axis = choose_layout(num_members, count)[0]
  if members_axis < 1 or count % members_axis:
    raise ValueError(
      f"--members_axis {members_axis} does not divide the {count} devices; valid: "
      f"{', '.join(str(d) for d in range(1, count + 1) if count % d == 0)}."
    )
  return jax.make_mesh(
    (members_axis, count // members_axis),
    ("members", "data"),
    axis_types=(jax.sharding.AxisType.Auto,) * 2,
  )


def padded_size(num_members: int, mesh: Mesh) -> int:
  """The grid's size rounded up to a multiple of the ``members`` axis."""
  devices = mesh.shape["members"]
  return -(-num_members // devices) * devices


def describe_layout(num_members: int, mesh: Mesh) -> str:
  """One line on how the grid lies on the mesh, padding included."""
  text = (
    f"{num_members} member{'s' * (num_members != 1)} on a mesh of {mesh.shape['members']} "
    f"(members) x {mesh.shape['data']} (data) {mesh.devices.flat[0].platform} devices"
  )
  pad = padded_size(num_members, mesh) - num_members
  if pad:
    text += f", padded with {pad} cop{'ies' if pad > 1 else 'y'} of the last member (discarded)"
  return text


# ----------------------------------------------------------------------- the step functions


@dataclasses.dataclass(frozen=True)
class _Groups:
  """Where each group (utterance) of a split lies: ``starts``/``lengths`` in frames."""

  starts: np.ndarray
  lengths: np.ndarray
  batch_frames: int  # frames in a padded batch of batch_size groups


def _find_groups(groups: np.ndarray, batch_size: int, num_devices: int) -> _Groups:
  change = np.flatnonzero(np.diff(groups)) + 1
  starts = np.concatenate([[0], change]).astype(np.int32)
  lengths = np.diff(np.concatenate([starts, [len(groups)]])).astype(np.int32)
  if len(np.unique(groups[starts])) != len(starts):
    raise ValueError("split['groups'] must keep the frames of each group contiguous.")
  most = int(np.sort(lengths)[-batch_size:].sum())
  return _Groups(starts, lengths, -(-most // num_devices) * num_devices)


def _expand_groups(group_ids: jax.Array, groups: _Groups) -> tuple[jax.Array, jax.Array]:
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
  """What the step functions need besides arrays: the task, its model and the epoch's shape.

  Attributes:
    task: the run's task.
    model: ``task.build_model()``.
    sample: one training example per input key (for shapes at initialisation).
    num_items: examples (or groups) in the training split.
    steps_per_epoch: optimizer steps per epoch.
    groups: the training split's groups when batches are whole groups, else None.
    has_batch_stats: the model keeps BatchNorm statistics.
    dropout_bits: where dropout masks come from, one of `gelujax.prng.DROPOUT_BITS`.
    train_loss: how the logged training loss is measured, one of `TRAIN_LOSSES`.
    mesh: the ``("members", "data")`` mesh.
    member_chunk: how many of a device's members each loop over steps trains at once,
      vmapped (0: all of them).
  """

  task: Task
  model: nn.Module
  sample: dict[str, np.ndarray]
  num_items: int
  steps_per_epoch: int
  groups: _Groups | None = None
  has_batch_stats: bool = False
  dropout_bits: str = "hash"
  train_loss: str = "dropout_off"
  mesh: Mesh | None = None
  member_chunk: int = 0

  @property
  def optimizer_of(self) -> Callable[[jax.Array], optax.GradientTransformation]:
    return lambda lr: self.task.build_optimizer(lr, self.steps_per_epoch)


def map_members(config: StepConfig, fn: Callable[..., Any], members: Any, *shared: Any) -> Any:
  """``fn(member, *shared)`` for every member of the leading axis of ``members``, each device
  mapping over its own.

  The mesh's ``members`` axis is manual here: a device sees only its members, and no member's
  arithmetic depends on another's or on how many share its device. Each device takes
  ``config.member_chunk`` members at a time, vmapped (0: all of them). ``shared`` arguments
  are the same for every member; the ``data`` axis stays automatic, so arrays sharded over it
  (a batch) are split by XLA, which inserts the reductions across it.
  """

  def map_local(members, *shared):
    local = jax.tree.leaves(members)[0].shape[0]
    size = min(config.member_chunk or local, local)
    one = functools.partial(_call_member, fn, shared)
    if size == local:
      return jax.vmap(one)(members)
    return jax.lax.map(one, members, batch_size=size)

  return jax.shard_map(
    map_local,
    mesh=config.mesh,
    in_specs=(P("members"), *[P()] * len(shared)),
    out_specs=P("members"),
    axis_names={"members"},
  )(members, *shared)


def _call_member(fn, shared, member):
  return fn(member, *shared)


def _apply(config: StepConfig, params, batch_stats, inputs, *, train: bool, rng=None):
  """The model's outputs, and its batch statistics (updated in training)."""
  variables = {"params": params}
  if config.has_batch_stats:
    variables["batch_stats"] = batch_stats
  if train and config.has_batch_stats:
    outputs, updates = config.model.apply(
      variables, inputs, train=True, rngs={"dropout": rng}, mutable=["batch_stats"]
    )
    return outputs, updates["batch_stats"]
  rngs = {"dropout": rng} if train else {}
  return config.model.apply(variables, inputs, train=train, rngs=rngs), batch_stats


def init_member(config: StepConfig, seed: jax.Array, learning_rate: jax.Array) -> TrainState:
  """A member's initial state: parameters drawn from its seed, a fresh optimizer state."""
  params_key, other_key = jax.random.split(prng.fold_key(seed, prng.INIT))
  inputs, _ = config.task.prepare_batch(config.sample, False, other_key)
  variables = config.model.init({"params": params_key, "dropout": other_key}, inputs, train=False)
  return TrainState(
    params=variables["params"],
    opt_state=config.optimizer_of(learning_rate).init(variables["params"]),
    batch_stats=variables.get("batch_stats", {}),
    diverged_step=jnp.int32(-1),
  )


def init_members(config: StepConfig, seeds: jax.Array, learning_rates: jax.Array) -> TrainState:
  """`init_member` of every member, [M, ...]."""
  return map_members(config, lambda member: init_member(config, *member), (seeds, learning_rates))


def shuffle(config: StepConfig, seeds_M: jax.Array, epoch: jax.Array) -> jax.Array:
  """Each member's batches of the epoch as item indices, ``[steps, members, batch_size]``."""
  used = config.steps_per_epoch * config.task.batch_size

  def permute(seed):
    key = prng.fold_key(seed, prng.SHUFFLE, epoch)
    return jax.random.permutation(key, config.num_items)[:used]

  order_MxN = jax.vmap(permute)(seeds_M)
  return order_MxN.reshape(len(seeds_M), config.steps_per_epoch, -1).transpose(1, 0, 2)


def _gather(config: StepConfig, data: dict[str, jax.Array], items_B: jax.Array):
  """A batch of ``data`` (and its mask) from item indices: examples, or frames of whole groups."""
  if config.groups is None:
    return {k: v[items_B] for k, v in data.items()}, jnp.ones(items_B.shape, jnp.float32)
  frames_B, mask_B = _expand_groups(items_B, config.groups)
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

  A member whose loss or gradients are not finite, or that diverged before, keeps its state and
  records the step in ``diverged_step`` (the first time).
  """
  task = config.task
  prepare_key, dropout_key = keys
  inputs, targets = task.prepare_batch(batch, True, prepare_key)

  def compute_loss(params):
    outputs, batch_stats = _apply(
      config, params, state.batch_stats, inputs, train=True, rng=dropout_key
    )
    data_loss = task.loss(outputs, targets, mask)
    return data_loss + task.regularizer(params), (data_loss, batch_stats)

  (loss, (data_loss, batch_stats)), grads = jax.value_and_grad(compute_loss, has_aux=True)(
    state.params
  )
  if config.train_loss == "dropout_off":  # As the paper logged it: the same batch, dropout off.
    outputs, _ = _apply(config, state.params, state.batch_stats, inputs, train=False)
    train_loss = task.loss(outputs, targets, mask)
  else:
    train_loss = data_loss
  updates, opt_state = config.optimizer_of(learning_rate).update(
    grads, state.opt_state, state.params
  )
  stepped = state.replace(
    params=optax.apply_updates(state.params, updates), opt_state=opt_state, batch_stats=batch_stats
  )
  trains = jnp.isfinite(loss) & jnp.isfinite(optax.tree.norm(grads)) & (state.diverged_step < 0)
  frozen = state.replace(
    diverged_step=jnp.where(state.diverged_step < 0, step, state.diverged_step)
  )
  # A select, which XLA fuses into the update's own loops, rather than a branch.
  return jax.tree.map(lambda new, old: jnp.where(trains, new, old), stepped, frozen), train_loss


def train_segment(
  config: StepConfig,
  state: TrainState,
  data: dict[str, jax.Array],
  batches: jax.Array,
  seeds: jax.Array,
  learning_rates: jax.Array,
  epoch: jax.Array,
  first: jax.Array,
  *,
  num_steps: int,
) -> tuple[TrainState, jax.Array]:
  """Trains every member on ``num_steps`` of the epoch's ``batches`` from step ``first``.

  Each device trains its own members (the ``members`` axis is manual: no member's arithmetic
  leaves its device), ``config.member_chunk`` of them at a time (vmapped), each through the whole
  segment: a `lax.scan` of `train_step` over the steps. Batches stay sharded
  over ``data`` (automatic: XLA inserts the gradient all-reduce).

  Args:
    config: the run's `StepConfig`.
    state: the stacked state, [M, ...].
    data: the training split's arrays, [N, ...], replicated.
    batches: the epoch's item indices from `shuffle`, [steps, M, B].
    seeds: [M] int32.
    learning_rates: [M] float32.
    epoch: the epoch, from 1.
    first: the epoch's step to start at.
    num_steps: steps to take (static).

  Returns:
    The next state and each member's mean training loss over these steps, [M].
  """
  batches = jax.lax.dynamic_slice_in_dim(batches, first, num_steps)
  steps = (epoch - 1) * config.steps_per_epoch + first + jnp.arange(num_steps, dtype=jnp.int32)

  def train_member(member, data, epoch, steps):
    """One member through the segment."""
    state, items_SxB, seed, learning_rate = member
    keys = step_keys(seed, epoch, steps, config.dropout_bits)

    def scan_step(state, xs):
      step, items_B, keys = xs
      batch, mask = _gather(config, data, items_B)
      return train_step(config, state, learning_rate, batch, mask, keys, step)

    state, losses_S = jax.lax.scan(scan_step, state, (steps, items_SxB, keys))
    return state, losses_S.mean()

  members = (state, jnp.moveaxis(batches, 1, 0), seeds, learning_rates)
  return map_members(config, train_member, members, data, epoch, steps)


def evaluate(config: StepConfig, state: TrainState, split: dict[str, jax.Array]):
  """Per-member metric sums over a split from `Program.put_eval_split`, each [M].

  Every member sees every example: the split's batches are shared, sharded over ``data``.
  """
  task = config.task

  def evaluate_member(member, split):
    params, batch_stats = member

    def sum_metrics(batch):
      batch = dict(batch)
      mask = batch.pop("mask")
      inputs, targets = task.prepare_batch(batch, False, None)
      outputs, _ = _apply(config, params, batch_stats, inputs, train=False)
      return task.metrics(outputs, targets, mask)

    def evaluate_batch(totals, batch):
      return jax.tree.map(jnp.add, totals, sum_metrics(batch)), None

    # The first batch's sums start the total (0 + x is x, so this is the sum from zero).
    first = sum_metrics(jax.tree.map(lambda x: x[0], split))
    totals, _ = jax.lax.scan(evaluate_batch, first, jax.tree.map(lambda x: x[1:], split))
    return totals

  return map_members(config, evaluate_member, (state.params, state.batch_stats), split)


# ------------------------------------------------------------------------------ the program


def _draws_randomness(config: StepConfig) -> bool:
  """Whether the model in training mode draws randomness (dropout, the SOI map)."""
  inputs, _ = config.task.prepare_batch(config.sample, False, jax.random.key(0))
  variables = jax.eval_shape(
    functools.partial(config.model.init, train=False), jax.random.key(0), inputs
  )
  try:
    jax.eval_shape(lambda v: config.model.apply(v, inputs, train=True), variables)
  except flax.errors.FlaxError:
    return True
  return False


@dataclasses.dataclass(frozen=True)
class Program:
  """A run's jitted step functions on its mesh, and where their arrays live.

  Arrays over members are ``[M_padded, ...]`` sharded over ``members``; use `put_members`,
  `put_data`, `put_eval_split` to place inputs, and `unpad` for results.

  Attributes:
    config: the static part of the step functions.
    mesh: the ``("members", "data")`` mesh.
    num_members: the grid's size M (before padding).
    init: ``(seeds, learning_rates) -> TrainState``.
    shuffle: ``(seeds, epoch) -> batches [steps, M, B]``.
    train_segment: ``(state, data, batches, seeds, learning_rates, epoch, first, *, num_steps)
      -> (state, mean training loss [M])``; donates ``state``.
    evaluate: ``(state, split) -> {metric: sums [M]}``.
  """

  config: StepConfig
  mesh: Mesh
  num_members: int
  init: Callable[..., TrainState]
  shuffle: Callable[..., jax.Array]
  train_segment: Callable[..., tuple[TrainState, jax.Array]]
  evaluate: Callable[..., dict[str, jax.Array]]

  @property
  def steps_per_epoch(self) -> int:
    return self.config.steps_per_epoch

  @property
  def padded_members(self) -> int:
    return padded_size(self.num_members, self.mesh)

  def _pad_index(self) -> np.ndarray:
    return np.minimum(np.arange(self.padded_members), self.num_members - 1)

  def put_members(self, members: Members) -> tuple[jax.Array, jax.Array]:
    """``(seeds, learning_rates)`` of the padded grid, sharded over ``members``."""
    if len(members) != self.num_members:
      raise ValueError(f"The program is for {self.num_members} members, not {len(members)}.")
    lrs, seeds = (np.array(column) for column in zip(*members, strict=True))
    index = self._pad_index()
    sharding = NamedSharding(self.mesh, P("members"))
    return (
      _put(seeds[index].astype(np.int32), sharding),
      _put(lrs[index].astype(np.float32), sharding),
    )

  def put_data(self, split: Mapping[str, np.ndarray]) -> dict[str, jax.Array]:
    """A training split's arrays, replicated on every device."""
    sharding = NamedSharding(self.mesh, P())
    return {k: _put(v, sharding) for k, v in split.items() if k != "groups"}

  def put_eval_split(self, split: Mapping[str, np.ndarray]) -> dict[str, jax.Array]:
    """A split padded to whole evaluation batches, ``[batches, batch, ...]``, each batch sharded
    over ``data`` (every member sees every example)."""
    size = len(split["targets"])
    data = self.mesh.shape["data"]
    batch = min(max(_EVAL_BATCH, self.config.task.batch_size), size)
    batch = -(-batch // data) * data
    num_batches = -(-size // batch)
    arrays = {k: v for k, v in split.items() if k != "groups"}
    arrays["mask"] = np.ones(size, np.float32)
    out = {}
    for k, v in arrays.items():
      padded = np.zeros((num_batches * batch, *v.shape[1:]), v.dtype)
      padded[:size] = v
      out[k] = _put(
        padded.reshape(num_batches, batch, *v.shape[1:]), NamedSharding(self.mesh, P(None, "data"))
      )
    return out

  def pad(self, state: TrainState) -> TrainState:
    """A state of the grid's M members (e.g. restored) as the program's padded, sharded state."""
    index = self._pad_index()
    sharding = NamedSharding(self.mesh, P("members"))
    return jax.jit(
      lambda s: jax.tree.map(lambda x: x[index], s), out_shardings=sharding
    )(state)  # fmt: skip

  def unpad(self, state: TrainState) -> TrainState:
    """The M real members of a padded state, replicated (for checkpoints and the host)."""
    num = self.num_members
    replicated = NamedSharding(self.mesh, P())
    return jax.jit(lambda s: jax.tree.map(lambda x: x[:num], s), out_shardings=replicated)(state)

  def abstract_state(self) -> TrainState:
    """The shapes, dtypes and (replicated) shardings of an unpadded state: what checkpoints
    hold."""
    config, num = self.config, self.num_members
    shapes = jax.eval_shape(
      jax.vmap(functools.partial(init_member, config)),
      jax.ShapeDtypeStruct((num,), jnp.int32),
      jax.ShapeDtypeStruct((num,), jnp.float32),
    )
    replicated = NamedSharding(self.mesh, P())
    return jax.tree.map(
      lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=replicated), shapes
    )


def _put(x: np.ndarray, sharding: NamedSharding) -> jax.Array:
  """A host array, the same on every process, laid out as ``sharding`` says."""
  return jax.make_array_from_callback(x.shape, sharding, lambda index: x[index])


def make_program(
  task: Task,
  mesh: Mesh,
  train: Mapping[str, np.ndarray],
  num_members: int,
  *,
  dropout_bits: str = "hash",
  train_loss: str = "dropout_off",
  member_chunk: int = 0,
) -> Program:
  """The jitted step functions of ``num_members`` members of ``task`` on ``mesh``.

  Args:
    task: the run's task.
    mesh: a ``("members", "data")`` mesh (`make_mesh`).
    train: the training split (its shapes, sizes and groups; the arrays are placed separately).
    num_members: the grid's size; padded to a multiple of the ``members`` axis.
    dropout_bits: ``"hash"`` (the trainer's default) or ``"threefry"`` (`gelujax.prng`).
    train_loss: ``"dropout_off"`` (the paper's logged training loss) or ``"training_pass"``.
    member_chunk: members trained at once by each device's loop over steps (0: all of them,
      vmapped). Fewer hold less memory at once; on CPU, one at a time measured no faster than
      all (benchmarks/results/training.md).
  """
  if dropout_bits not in prng.DROPOUT_BITS:
    raise ValueError(f"dropout_bits {dropout_bits!r}; valid: {', '.join(prng.DROPOUT_BITS)}.")
  if train_loss not in TRAIN_LOSSES:
    raise ValueError(f"train_loss {train_loss!r}; valid: {', '.join(TRAIN_LOSSES)}.")
  groups = None
  if task.group_batches:
    groups = _find_groups(train["groups"], task.batch_size, mesh.shape["data"])
    num_items = len(groups.starts)
  else:
    num_items = len(train["targets"])
  config = StepConfig(
    task=task,
    model=task.build_model(),
    sample={k: v[:1] for k, v in train.items() if k != "groups"},
    num_items=num_items,
    steps_per_epoch=max(num_items // task.batch_size, 1),
    groups=groups,
    dropout_bits=dropout_bits,
    mesh=mesh,
    member_chunk=member_chunk,
  )
  variables = jax.eval_shape(
    jax.vmap(functools.partial(init_member, config)),
    jax.ShapeDtypeStruct((1,), jnp.int32),
    jax.ShapeDtypeStruct((1,), jnp.float32),
  )
  has_batch_stats = bool(jax.tree.leaves(variables.batch_stats))
  if train_loss == "dropout_off" and not has_batch_stats and not _draws_randomness(config):
    train_loss = "training_pass"  # The same number: the training pass is deterministic.
  config = dataclasses.replace(config, has_batch_stats=has_batch_stats, train_loss=train_loss)
  members = NamedSharding(mesh, P("members"))
  replicated = NamedSharding(mesh, P())
  return Program(
    config=config,
    mesh=mesh,
    num_members=num_members,
    init=jax.jit(functools.partial(init_members, config), out_shardings=members),
    shuffle=jax.jit(
      functools.partial(shuffle, config),
      out_shardings=NamedSharding(mesh, P(None, "members", "data")),
    ),
    train_segment=jax.jit(
      functools.partial(train_segment, config),
      static_argnames="num_steps",
      donate_argnums=0,
      out_shardings=(members, replicated),
    ),
    evaluate=jax.jit(functools.partial(evaluate, config), out_shardings=replicated),
  )


def to_host(x: jax.Array) -> np.ndarray:
  """A replicated array as NumPy (this process's copy; works in a multi-process run)."""
  return np.asarray(x.addressable_data(0))


# ------------------------------------------------------------------------------------ fit


# Spec fields added after runs were committed: config.json leaves each out at its default, so
# the configs (and identities) of runs written before it stay the same.
_OMITTED_AT_DEFAULT = {"dropout_bits": "hash"}


def make_config(task: Task, members: Members) -> dict[str, Any]:
  """The config.json object of a run (JSON types only); its spec holds the grid's learning
  rates and seed count, so config.json names one grid only."""
  task = task.replace(learning_rates=members.learning_rates, seeds=len(members.seeds))
  spec = {
    k: v
    for k, v in dataclasses.asdict(task).items()
    if k not in _OMITTED_AT_DEFAULT or v != _OMITTED_AT_DEFAULT[k]
  }
  return json.loads(
    json.dumps(
      {
        "task": task.name,
        "dataset": task.dataset,
        "activation": task.activation,
        "spec": spec,
        "members": members.to_json(),
      }
    )
  )


def check_run(task: Task, workdir: str, members: Members) -> None:
  """Checks a run's settings and that ``workdir`` is free or holds this same run.

  Touches nothing; `fit` calls it before any work, and so can a command line.

  Raises:
    ValueError: naming the bad setting, its value and what would be valid.
  """
  if task.epochs < 1:
    raise ValueError(f"--epochs is {task.epochs}; it must be at least 1.")
  if task.batch_size < 1:
    raise ValueError(f"--batch_size is {task.batch_size}; it must be at least 1.")
  workdirs.check_writable(workdir)
  old = workdirs.read_config(workdir)
  if old is None:
    return
  new = make_config(task, members)
  old_spec, new_spec = ({**_OMITTED_AT_DEFAULT, **c["spec"]} for c in (old, new))
  differences = [
    f"{key} {old_spec.get(key)!r} (now {value!r})"
    for key, value in new_spec.items()
    if key not in (*_RESUMABLE_FIELDS, "learning_rates", "seeds") and old_spec.get(key) != value
  ]
  if old["members"] != new["members"]:
    old_members = Members.from_json(old["members"])
    text = f"members {old_members.describe()} (now {members.describe()})"
    if sorted(old_members) == sorted(members):
      text += (
        " (the same members in another order: members are numbered in the order that "
        "--learning_rates and --seeds give them)"
      )
    differences.append(text)
  if differences:
    raise ValueError(
      f"Workdir {workdir} holds another run (task {old['task']!r}) that differs in: "
      f"{'; '.join(differences)}. Pass another --workdir, or the same settings to resume it "
      "(only --epochs may change)."
    )
  workdirs.check_epochs(workdir, task.epochs)
  workdirs.check_resumable(workdir)


def fit(
  task: Task,
  workdir: str,
  members: Members | None = None,
  *,
  data_dir: str | None = None,
  progress: bool = True,
  checkpoint_every: int = 1,
  keep_checkpoints: int = 2,
  members_axis: int | None = None,
) -> dict[str, Any]:
  """Trains the grid ``members`` of ``task``; see the module doc.

  A workdir that holds a checkpoint of this run resumes from its newest readable checkpoint
  (``task.epochs`` may have grown); results are bitwise equal to an uninterrupted run.

  Args:
    task: a `gelujax.tasks.TaskSpec` (or any `Task`).
    workdir: where config.json, metrics.jsonl, tensorboard/, checkpoints/ and summary.json go.
    members: the grid; default: the task's own (`Members.of_task`).
    data_dir: passed to ``task.load_data``.
    progress: show a progress bar.
    checkpoint_every: save a checkpoint every this many epochs (and after the first and the
      last: a workdir with records past epoch 1 and no checkpoint lost its checkpoints).
    keep_checkpoints: how many of the newest checkpoints to keep (>= 2).
    members_axis: devices along the mesh's ``members`` axis (default: `choose_layout`).

  Returns:
    The summary.json object.

  Raises:
    ValueError: bad settings, or a workdir that holds another run (nothing is written).
    DivergedError: every member diverged (summary.json is written first).
  """
  members = members or Members.of_task(task)
  check_run(task, workdir, members)
  if checkpoint_every < 1:
    raise ValueError(f"checkpoint_every is {checkpoint_every}; it must be at least 1.")
  mesh = make_mesh(len(members), members_axis)
  if task.batch_size % mesh.shape["data"]:
    raise ValueError(
      f"--batch_size is {task.batch_size}; it must be a multiple of the {mesh.shape['data']} "
      "devices of the mesh's data axis, since every batch is split evenly over them."
    )
  config = make_config(task, members)
  splits = task.load_data(data_dir)
  # Where the data came from and what was verified: recorded, never part of the run's identity
  # (`checkpoints.identity` and `check_run` read task, spec and members only).
  record = getattr(splits, "info", {}).get("record")
  if record is not None:
    config["data"] = record
    if progress and jax.process_index() == 0:
      print(f"gelujax: {data.describe_record(record)}", file=sys.stderr, flush=True)
  program = make_program(
    task.for_data(splits), mesh, splits["train"], len(members), dropout_bits=task.dropout_bits
  )
  steps, items = program.steps_per_epoch, program.config.num_items
  if items < task.batch_size:
    raise ValueError(
      f"--batch_size {task.batch_size} is larger than the training split ({items} items); it "
      f"must be at most {items}."
    )
  if not 1 <= task.evals_per_epoch <= steps:
    raise ValueError(
      f"evals_per_epoch {task.evals_per_epoch} does not fit an epoch of {steps} "
      f"step{'s' * (steps != 1)} (--batch_size {task.batch_size}, {items} items); it must lie "
      f"in [1, {steps}]: use fewer evaluations per epoch or a smaller batch size."
    )
  member = jax.tree.map(
    lambda s: jax.ShapeDtypeStruct(s.shape[1:], s.dtype), program.abstract_state()
  )
  per_device = program.padded_members // mesh.shape["members"]
  workdirs.check_memory(member, member.params, per_device, len(members), splits)
  seeds_M, learning_rates_M = program.put_members(members)
  train = program.put_data(splits["train"])
  eval_splits = {
    name: program.put_eval_split(splits[name]) for name in _EVAL_SPLITS if name in splits
  }
  sizes = {name: len(splits[name]["targets"]) for name in eval_splits}
  members_json = members.to_json()
  num = len(members)

  lead = jax.process_index() == 0
  with workdirs.writing(workdir, lead):  # One writer; a full disk is one line naming the file.
    check_run(task, workdir, members)  # Again, now that no one else writes it.
    checkpointer = checkpoints.Checkpointer(workdir, keep_checkpoints, config)
    restored = checkpointer.restore_latest(program.abstract_state())
    if restored is None:
      start, state, recorded = 0, program.init(seeds_M, learning_rates_M), []
    else:
      start, state, recorded = restored.epoch, program.pad(restored.state), restored.metrics
    bounds = [0, *evaluation_steps(steps, task.evals_per_epoch)]
    # Every record up to the checkpoint, saved with each checkpoint (process 0 writes it).
    records = list(recorded or [])
    if lead:
      evaluations = [
        (member, *_evaluation_point(epoch, last, steps))
        for epoch in range(1, start + 1)
        for last in bounds[1:]
        for member in range(num)
      ]
      records = workdirs.resume_metrics(workdir, start, recorded, evaluations)
      workdirs.write_config(workdir, config)
      writer = writers.MetricsWriter(workdir, members_json, purge_step=start * steps + 1)
    if progress and lead and mesh.size > 1:  # Where the grid lies, and any padding.
      print(f"gelujax: {describe_layout(num, mesh)}.", file=sys.stderr, flush=True)
    bar = writers.progress_bar(task.epochs, start, progress and lead)
    diverged = _diverged(program, state)
    try:
      for epoch in range(start + 1, task.epochs + 1):
        batches = program.shuffle(seeds_M, np.int32(epoch))
        for first, last in itertools.pairwise(bounds):
          state, train_loss = program.train_segment(
            state,
            train,
            batches,
            seeds_M,
            learning_rates_M,
            np.int32(epoch),
            np.int32(first),
            num_steps=last - first,
          )
          metrics = {"train_loss": to_host(train_loss)[:num]}
          for name, split in eval_splits.items():
            for key, mean in _mean_metrics(program, state, split, sizes[name]).items():
              metrics[f"{name}_{key}"] = mean
          diverged = _diverged(program, state)
          point = _evaluation_point(epoch, last, steps)
          records += writers.make_records(members_json, *point, diverged, metrics)
          if lead:
            writer.write(records[-num:])
        if epoch in (1, task.epochs) or epoch % checkpoint_every == 0 or diverged.all():
          checkpointer.save(epoch, program.unpad(state), records)
        bar.set_postfix(_describe_progress(metrics, diverged), refresh=False)  # update() draws.
        bar.update(1)
        if diverged.all():
          break
    finally:
      bar.close()
      checkpointer.close()
      if lead:
        writer.close()
    return _finish(workdir, config, task, program, state, diverged)


def evaluation_steps(steps_per_epoch: int, evals_per_epoch: int) -> list[int]:
  """The steps of an epoch after which the members are evaluated (the last: the epoch's end)."""
  return [round(i * steps_per_epoch / evals_per_epoch) for i in range(1, evals_per_epoch + 1)]


def _evaluation_point(epoch: int, last: int, steps_per_epoch: int) -> tuple[float, int]:
  """``(epoch, step)`` of metrics records written after step ``last`` of ``epoch``."""
  return epoch - 1 + last / steps_per_epoch, (epoch - 1) * steps_per_epoch + last


def _diverged(program: Program, state: TrainState) -> np.ndarray:
  """Whether each of the M members has diverged, [M] bool."""
  return _diverged_steps(program, state) >= 0


def _diverged_steps(program: Program, state: TrainState) -> np.ndarray:
  replicated = NamedSharding(program.mesh, P())
  steps = jax.jit(lambda s: s, out_shardings=replicated)(state.diverged_step)
  return to_host(steps)[: program.num_members]


def _describe_progress(metrics: dict[str, np.ndarray], diverged: np.ndarray) -> dict[str, str]:
  """The progress bar's note: each loss of the best member still training."""
  if diverged.all():
    return {"diverged": "all"}
  return {k: f"{v[~diverged].min():.4g}" for k, v in metrics.items() if "loss" in k}


def _finish(workdir, config, task, program, state, diverged) -> dict[str, Any]:
  """Writes summary.json; raises DivergedError when no member is left."""
  if jax.process_count() > 1:
    from jax.experimental import multihost_utils

    multihost_utils.sync_global_devices("gelujax metrics written")
  steps_per_epoch = program.steps_per_epoch
  diverged_epochs = [
    int(s) // steps_per_epoch + 1 if s >= 0 else None for s in _diverged_steps(program, state)
  ]
  summary = writers.summarize(
    config, writers.read_metrics(workdir), diverged_epochs, task.select_metric
  )
  if jax.process_index() == 0:
    writers.write_json(os.path.join(workdir, writers.SUMMARY_FILE), summary)
  if diverged.all():
    raise DivergedError(
      f"All {len(diverged)} members diverged (their training loss became non-finite, at "
      f"epochs {diverged_epochs}); see {workdir}/metrics.jsonl. Lower the learning rates."
    )
  return summary


def _spec_from_config(base: Task, fields: dict[str, Any]) -> Task:
  """``base`` with the fields of a config.json spec (JSON lists back to tuples)."""
  overrides = {
    k: tuple(v) if isinstance(getattr(base, k), tuple) else v
    for k, v in fields.items()
    if getattr(base, k) != v
  }
  return base.replace(**overrides)


def restore(
  workdir: str, *, spec: Task | None = None, data_dir: str | None = None
) -> tuple[Task, Members, TrainState]:
  """The task, members and stacked state of the newest readable checkpoint in ``workdir``.

  Args:
    workdir: a run's directory.
    spec: the run's task; by default rebuilt from config.json through `gelujax.tasks`.
    data_dir: passed to ``spec.load_data`` (the state's shapes depend on the inputs).

  Returns:
    The task (with the model options its data decide, ``for_data``), the members, and the
    state of the M members, replicated on every device.
  """
  config = workdirs.read_config(workdir)
  if config is None:
    raise ValueError(f"Workdir {workdir} holds no run: it has no config.json and no checkpoint.")
  if spec is None:
    from gelujax import tasks  # Only here: tasks imports models and data.

    spec = _spec_from_config(tasks.get(config["task"]), config["spec"])
  members = Members.from_json(config["members"])
  mesh = make_mesh(len(members))
  splits = spec.load_data(data_dir)
  spec = spec.for_data(splits)
  program = make_program(spec, mesh, splits["train"], len(members), dropout_bits=spec.dropout_bits)
  checkpointer = checkpoints.Checkpointer(workdir, config=config)
  restored = checkpointer.restore_latest(program.abstract_state())
  checkpointer.close()
  if restored is None:
    raise ValueError(f"Workdir {workdir} holds no readable checkpoint under checkpoints/.")
  return spec, members, restored.state


# The program of the last `evaluate_members` call, by the task's repr and the grid's size:
# evaluating one run on many splits of one shape (the noise levels of Fig. 3) compiles once.
_last_evaluation: dict[tuple[str, int], Program] = {}


def evaluate_members(
  task: Task, state: TrainState, split: Mapping[str, np.ndarray]
) -> dict[str, np.ndarray]:
  """Each member's mean metrics over ``split`` (e.g. {"loss": [M], "error": [M]}) for a state of
  M members such as `restore` returns."""
  num = len(state.diverged_step)
  key = (repr(task), num)
  program = _last_evaluation.get(key)
  if program is None:
    _last_evaluation.clear()
    program = _last_evaluation[key] = make_program(task, make_mesh(num), split, num)
  device_split = program.put_eval_split(split)
  return _mean_metrics(program, program.pad(state), device_split, len(split["targets"]))


def _mean_metrics(
  program: Program, state: TrainState, device_split: dict[str, jax.Array], size: int
) -> dict[str, np.ndarray]:
  """Each member's metrics over a split from `put_eval_split`: the sums over its ``size``
  examples divided by ``size``, in float64."""
  totals = program.evaluate(state, device_split)
  return {k: to_host(v)[: program.num_members].astype(np.float64) / size for k, v in totals.items()}
