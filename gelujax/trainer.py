"""The training engine: a grid of members trained as one program on a device mesh.

A member is one (learning rate, seed) pair. The members' states are stacked on a leading
axis and every step is `jax.vmap`ped over them. Data parallelism is `jax.jit` over a mesh with
one axis, ``data``, spanning every device of every process: batches are sharded on it, states
and datasets replicated, and XLA inserts the gradient all-reduce. An epoch is one jitted
`lax.scan` over batches gathered on device from a permutation drawn on device. All randomness
comes from keys folded from (seed, stream, epoch, step), so a resumed run is bitwise equal to
an uninterrupted one.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import math
import os
from collections.abc import Sequence
from typing import Any

import flax
import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from gelujax import checkpoints, writers
from gelujax import workdir as workdirs

# Random streams, folded into a member's key before (epoch, step).
_INIT, _SHUFFLE, _STEP = 0, 1, 2
# Fields of a spec that may change when a run is resumed.
_RESUMABLE_FIELDS = workdirs.RESUMABLE_FIELDS
# Evaluation batches hold at least this many examples (more work per scan step).
_EVAL_BATCH = 1024
_EVAL_SPLITS = ("validation", "test")


class DivergedError(RuntimeError):
  """Every member of a run diverged (its training loss became non-finite)."""


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


def initialize_distributed(coordinator_address: str, num_processes: int, process_id: int) -> None:
  """Joins a multi-process run; call it first, before anything touches a device.

  Every process runs the same command with its own ``process_id``; process 0 serves as the
  coordinator at ``coordinator_address`` (host:port) and writes the workdir's files. CPU
  processes exchange collectives through gloo (GPUs and TPUs use their own transport).
  """
  jax.config.update("jax_cpu_collectives_implementation", "gloo")
  jax.distributed.initialize(
    coordinator_address=coordinator_address, num_processes=num_processes, process_id=process_id
  )


def make_mesh() -> Mesh:
  """The ``data`` mesh over every device of every process."""
  return Mesh(np.asarray(jax.devices()), ("data",))


def make_members(seeds: Sequence[int], learning_rates: Sequence[float]) -> list[dict[str, Any]]:
  """The members of a grid, learning-rate major, as written to config.json."""
  return [
    {"seed": int(seed), "learning_rate": float(lr)} for lr in learning_rates for seed in seeds
  ]


def make_config(spec: Any, members: Sequence[dict[str, Any]]) -> dict[str, Any]:
  """The config.json object of a run (JSON types only)."""
  return json.loads(
    json.dumps(
      {
        "task": spec.name,
        "dataset": spec.dataset,
        "activation": spec.activation,
        "spec": dataclasses.asdict(spec),
        "members": list(members),
      }
    )
  )


def check_run(
  spec: Any, workdir: str, seeds: Sequence[int], learning_rates: Sequence[float]
) -> None:
  """Checks a run's settings and that ``workdir`` is free or holds this same run.

  Touches nothing; `fit` calls it before any work, and so can a command line.

  Raises:
    ValueError: naming the bad setting, its value and what would be valid.
  """
  if not seeds:
    raise ValueError("--seeds is empty; give a count (e.g. 5) or a list of seeds (e.g. 0,1,2).")
  if len(set(seeds)) != len(seeds):
    raise ValueError(f"--seeds {list(seeds)} repeats a seed; each seed must appear once.")
  if not learning_rates:
    raise ValueError("--learning_rates is empty; give one or more, e.g. 1e-3,1e-4.")
  for lr in learning_rates:
    if not (np.isfinite(lr) and lr > 0):
      raise ValueError(f"--learning_rates has {lr}; every learning rate must be finite and > 0.")
  if len(set(learning_rates)) != len(learning_rates):
    raise ValueError(f"--learning_rates {list(learning_rates)} repeats a value.")
  workdirs.check_grid(seeds, learning_rates)
  if spec.epochs < 1:
    raise ValueError(f"--epochs is {spec.epochs}; it must be at least 1.")
  if spec.batch_size < 1 or spec.batch_size % jax.device_count():
    raise ValueError(
      f"--batch_size is {spec.batch_size}; it must be a positive multiple of the device "
      f"count ({jax.device_count()}), since every batch is split evenly over the devices."
    )
  workdirs.check_writable(workdir)
  old = workdirs.read_config(workdir)
  if old is None:
    return
  new = make_config(spec, make_members(seeds, learning_rates))
  differences = [
    f"{key} {old['spec'].get(key)!r} (now {value!r})"
    for key, value in new["spec"].items()
    if key not in _RESUMABLE_FIELDS and old["spec"].get(key) != value
  ]
  if old["members"] != new["members"]:
    differences.append(
      f"members {_describe_members(old['members'])} (now {_describe_members(new['members'])})"
    )
  if differences:
    raise ValueError(
      f"Workdir {workdir} holds another run (task {old['task']!r}) that differs in: "
      f"{'; '.join(differences)}. Pass another --workdir, or the same settings to resume it "
      "(only --epochs may change)."
    )
  workdirs.check_epochs(workdir, spec.epochs)


def _describe_members(members: Sequence[dict[str, Any]]) -> str:
  lrs = sorted({m["learning_rate"] for m in members}, reverse=True)
  seeds = sorted({m["seed"] for m in members})
  return f"lrs={lrs} seeds={seeds}"


def fold_key(seed: jax.Array, *path: int | jax.Array) -> jax.Array:
  """The key of ``seed`` folded with ``path`` (stream, epoch, step)."""
  key = jax.random.key(seed)
  for part in path:
    key = jax.random.fold_in(key, part)
  return key


def _mix(x: jax.Array) -> jax.Array:
  """MurmurHash3's 32-bit finalizer: a bijection in which every input bit flips ~half the
  output bits."""
  x = (x ^ (x >> 16)) * jnp.uint32(0x85EBCA6B)
  x = (x ^ (x >> 13)) * jnp.uint32(0xC2B2AE35)
  return x ^ (x >> 16)


def _seed_hash_key(seed: jax.Array) -> jax.Array:
  seed = jnp.asarray(seed).astype(jnp.uint32)
  return jnp.stack([_mix(seed ^ jnp.uint32(0x243F6A88)), _mix(seed + jnp.uint32(0x13198A2E))])


def _fold_in_hash_key(key: jax.Array, data: jax.Array) -> jax.Array:
  data = jnp.asarray(data).astype(jnp.uint32)
  return jnp.stack([_mix(key[0] ^ _mix(data + key[1])), _mix(key[1] + _mix(data ^ key[0]))])


def _split_hash_key(key: jax.Array, shape: tuple[int, ...]) -> jax.Array:
  counters = jnp.arange(math.prod(shape), dtype=jnp.uint32)
  return jax.vmap(functools.partial(_fold_in_hash_key, key))(counters).reshape(*shape, 2)


def _hash_random_bits(key: jax.Array, bit_width: int, shape: tuple[int, ...]) -> jax.Array:
  if bit_width > 32:
    raise ValueError(f"The dropout key draws at most 32-bit words, not {bit_width}-bit ones.")
  counters = jax.lax.iota(jnp.uint32, math.prod(shape))
  bits = _mix(_mix(counters * jnp.uint32(0x9E3779B9) + key[0]) ^ key[1])
  return (bits >> (32 - bit_width)).astype(f"uint{bit_width}").reshape(shape)


# Random bits as a keyed hash of a counter: a few integer operations per word where
# threefry needs twenty rounds, and, unlike RBG keys (whose vmapped draws all come from the
# first key), each member's bits depend on its own key only. Used for dropout masks only.
HASH_PRNG = jax.extend.random.define_prng_impl(
  key_shape=(2,),
  seed=_seed_hash_key,
  split=_split_hash_key,
  random_bits=_hash_random_bits,
  fold_in=_fold_in_hash_key,
  name="gelujax_hash32",
)


def make_dropout_key(key: jax.Array) -> jax.Array:
  """A key for the model's 'dropout' stream whose random bits are cheap to draw.

  Dropout needs one random word per hidden unit per example per step, and threefry bits
  dominate a small MLP's step on CPU. The key's words come from ``key``, so the masks
  stay a deterministic function of (seed, epoch, step).
  """
  return jax.random.wrap_key_data(jax.random.bits(key, (2,), jnp.uint32), impl=HASH_PRNG)


def put_replicated(x: np.ndarray, mesh: Mesh) -> jax.Array:
  """A host array copied to every device of the mesh (each process supplies its own)."""
  return jax.make_array_from_callback(x.shape, NamedSharding(mesh, P()), lambda index: x[index])


def put_sharded(x: np.ndarray, mesh: Mesh, spec: P) -> jax.Array:
  """A host array, the same on every process, laid out on the mesh as ``spec`` says."""
  return jax.make_array_from_callback(x.shape, NamedSharding(mesh, spec), lambda index: x[index])


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
  which = jnp.minimum(jnp.searchsorted(ends, slots, side="right"), len(group_ids) - 1)
  mask = slots < ends[-1]
  frames = starts[group_ids[which]] + slots - (ends[which] - sizes[which])
  return jnp.where(mask, frames, 0), mask.astype(jnp.float32)


class _Program:
  """The jitted functions of a run: init, shuffle, a segment of an epoch, evaluation."""

  def __init__(self, spec: Any, mesh: Mesh, train: dict[str, np.ndarray]):
    self.spec, self.mesh = spec, mesh
    self.model = spec.build_model()
    self.replicated = NamedSharding(mesh, P())
    self.groups = None
    if spec.group_batches:
      self.groups = _find_groups(train["groups"], spec.batch_size, mesh.size)
      num_items = len(self.groups.starts)
    else:
      num_items = len(train["targets"])
    self.steps_per_epoch = max(num_items // spec.batch_size, 1)
    self.num_items = num_items
    self.sample = {k: v[:1] for k, v in train.items() if k != "groups"}
    variables = jax.eval_shape(self._init_member, jnp.int32(0), jnp.float32(1.0))
    self.has_batch_stats = bool(jax.tree.leaves(variables.batch_stats))
    self.reuse_train_loss = not self.has_batch_stats and self._is_deterministic_in_training()
    self.init = jax.jit(jax.vmap(self._init_member), out_shardings=self.replicated)
    self.shuffle = jax.jit(self._shuffle, out_shardings=self.replicated)
    self.train_segment = jax.jit(
      self._train_segment,
      static_argnames="num_steps",
      donate_argnums=0,
      out_shardings=self.replicated,
    )
    self.evaluate = jax.jit(self._evaluate, out_shardings=self.replicated)

  def _is_deterministic_in_training(self) -> bool:
    """Whether the model in training mode draws no randomness (no dropout, no SOI map)."""
    inputs, _ = self.spec.prepare_batch(self.sample, False, jax.random.key(0))
    variables = jax.eval_shape(
      functools.partial(self.model.init, train=False), jax.random.key(0), inputs
    )
    try:
      jax.eval_shape(lambda v: self.model.apply(v, inputs, train=True), variables)
    except flax.errors.FlaxError:
      return False
    return True

  def _init_member(self, seed: jax.Array, learning_rate: jax.Array) -> TrainState:
    params_key, other_key = jax.random.split(fold_key(seed, _INIT))
    inputs, _ = self.spec.prepare_batch(self.sample, False, other_key)
    variables = self.model.init({"params": params_key, "dropout": other_key}, inputs, train=False)
    optimizer = self.spec.build_optimizer(learning_rate, self.steps_per_epoch)
    return TrainState(
      params=variables["params"],
      opt_state=optimizer.init(variables["params"]),
      batch_stats=variables.get("batch_stats", {}),
      diverged_step=jnp.int32(-1),
    )

  def abstract_state(self, seeds: jax.Array, learning_rates: jax.Array) -> TrainState:
    """The shapes, dtypes and shardings of the stacked state, for restoring it."""
    shapes = jax.eval_shape(jax.vmap(self._init_member), seeds, learning_rates)
    return jax.tree.map(
      lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=self.replicated), shapes
    )

  def _shuffle(self, seeds: jax.Array, epoch: jax.Array) -> jax.Array:
    """Each member's batches of the epoch as item indices, [steps, members, batch_size]."""
    used = self.steps_per_epoch * self.spec.batch_size

    def permute(seed):
      return jax.random.permutation(fold_key(seed, _SHUFFLE, epoch), self.num_items)[:used]

    order_MxN = jax.vmap(permute)(seeds)
    return order_MxN.reshape(len(seeds), self.steps_per_epoch, -1).transpose(1, 0, 2)

  def _gather(self, data: dict[str, jax.Array], items_B: jax.Array):
    if self.groups is None:
      items_B = jax.lax.with_sharding_constraint(items_B, NamedSharding(self.mesh, P("data")))
      mask_B = jnp.ones(items_B.shape, jnp.float32)
    else:
      items_B, mask_B = _expand_groups(items_B, self.groups)
      items_B = jax.lax.with_sharding_constraint(items_B, NamedSharding(self.mesh, P("data")))
      mask_B = jax.lax.with_sharding_constraint(mask_B, NamedSharding(self.mesh, P("data")))
    return {k: v[items_B] for k, v in data.items()}, mask_B

  def _apply(self, params, batch_stats, inputs, *, train: bool, rng=None):
    variables = {"params": params}
    if self.has_batch_stats:
      variables["batch_stats"] = batch_stats
    if train and self.has_batch_stats:
      outputs, updates = self.model.apply(
        variables, inputs, train=True, rngs={"dropout": rng}, mutable=["batch_stats"]
      )
      return outputs, updates["batch_stats"]
    rngs = {"dropout": rng} if train else {}
    return self.model.apply(variables, inputs, train=train, rngs=rngs), batch_stats

  def _train_member(self, state, learning_rate, seed, batch, mask, epoch, step):
    """One step of one member: its stepped state, its training loss, and whether it trains on
    (it is not diverged and its loss and gradients are finite)."""
    spec = self.spec
    prepare_key, dropout_key = jax.random.split(fold_key(seed, _STEP, epoch, step))
    inputs, targets = spec.prepare_batch(batch, True, prepare_key)

    def compute_loss(params):
      outputs, batch_stats = self._apply(
        params, state.batch_stats, inputs, train=True, rng=make_dropout_key(dropout_key)
      )
      data_loss = spec.loss(outputs, targets, mask)
      return data_loss + spec.regularizer(params), (data_loss, batch_stats)

    (loss, (data_loss, batch_stats)), grads = jax.value_and_grad(compute_loss, has_aux=True)(
      state.params
    )
    if self.reuse_train_loss:
      train_loss = data_loss
    else:  # As the paper logged it: the same batch, dropout off.
      outputs, _ = self._apply(state.params, state.batch_stats, inputs, train=False)
      train_loss = spec.loss(outputs, targets, mask)
    optimizer = spec.build_optimizer(learning_rate, self.steps_per_epoch)
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
    stepped = TrainState(
      optax.apply_updates(state.params, updates), opt_state, batch_stats, state.diverged_step
    )
    finite = jnp.isfinite(loss) & jnp.isfinite(optax.tree.norm(grads))
    return stepped, train_loss, finite & (state.diverged_step < 0)

  def _train_segment(
    self, state, data, batches, seeds, learning_rates, epoch, first, *, num_steps: int
  ):
    """Trains every member on ``num_steps`` of the epoch's ``batches`` from step ``first``.

    Returns the next state and each member's mean training loss over these steps, [M].
    """
    batches = jax.lax.dynamic_slice_in_dim(batches, first, num_steps)
    first_step = (epoch - 1) * self.steps_per_epoch + first

    def train_step(state, xs):
      offset, items_MxB = xs
      batch, mask = jax.vmap(self._gather, in_axes=(None, 0))(data, items_MxB)
      train_member = jax.vmap(self._train_member, in_axes=(0, 0, 0, 0, 0, None, None))
      step = first_step + offset
      stepped, train_loss, trains_M = train_member(
        state, learning_rates, seeds, batch, mask, epoch, step
      )

      def freeze_diverged():
        frozen = state.replace(
          diverged_step=jnp.where(state.diverged_step < 0, step, state.diverged_step)
        )
        return jax.tree.map(
          lambda new, old: jnp.where(trains_M.reshape(-1, *[1] * (new.ndim - 1)), new, old),
          stepped,
          frozen,
        )

      # A conditional, not a select, so that the common step (every member finite) does not
      # pay for another pass over all the members' states.
      return jax.lax.cond(trains_M.all(), lambda: stepped, freeze_diverged), train_loss

    steps = jnp.arange(num_steps, dtype=jnp.int32)
    state, losses_SxM = jax.lax.scan(train_step, state, (steps, batches))
    return state, losses_SxM.mean(axis=0)

  def put_eval_split(self, split: dict[str, np.ndarray]) -> dict[str, jax.Array]:
    """A split padded to whole evaluation batches, [batches, batch, ...], batch sharded."""
    size = len(split["targets"])
    batch = min(max(_EVAL_BATCH, self.spec.batch_size), size)
    batch = -(-batch // self.mesh.size) * self.mesh.size
    num_batches = -(-size // batch)
    arrays = {k: v for k, v in split.items() if k != "groups"}
    arrays["mask"] = np.ones(size, np.float32)
    out = {}
    for k, v in arrays.items():
      padded = np.zeros((num_batches * batch, *v.shape[1:]), v.dtype)
      padded[:size] = v
      out[k] = put_sharded(
        padded.reshape(num_batches, batch, *v.shape[1:]), self.mesh, P(None, "data")
      )
    return out

  def _evaluate(self, state, split):
    """Per-member metric sums over a split from `put_eval_split`, each [M]."""

    def sum_metrics(batch):
      batch = dict(batch)
      mask = batch.pop("mask")
      inputs, targets = self.spec.prepare_batch(batch, False, jax.random.key(0))

      def evaluate_member(params, batch_stats):
        outputs, _ = self._apply(params, batch_stats, inputs, train=False)
        return self.spec.metrics(outputs, targets, mask)

      return jax.vmap(evaluate_member)(state.params, state.batch_stats)

    def evaluate_batch(totals, batch):
      return jax.tree.map(jnp.add, totals, sum_metrics(batch)), None

    first = jax.tree.map(lambda x: x[0], split)
    zeros = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), jax.eval_shape(sum_metrics, first))
    totals, _ = jax.lax.scan(evaluate_batch, zeros, split)
    return totals


def to_host(x: jax.Array) -> np.ndarray:
  """A replicated array as NumPy (this process's copy; works in a multi-process run)."""
  return np.asarray(x.addressable_data(0))


def _put_members(members: Sequence[dict[str, Any]], mesh: Mesh) -> tuple[jax.Array, jax.Array]:
  seeds = np.array([m["seed"] for m in members], np.int32)
  learning_rates = np.array([m["learning_rate"] for m in members], np.float32)
  return put_replicated(seeds, mesh), put_replicated(learning_rates, mesh)


def fit(
  spec: Any,
  workdir: str,
  *,
  seeds: Sequence[int],
  learning_rates: Sequence[float],
  data_dir: str | None = None,
  progress: bool = True,
  checkpoint_every: int = 1,
  keep_checkpoints: int = 2,
) -> dict[str, Any]:
  """Trains the grid of ``learning_rates`` x ``seeds`` on ``spec``'s task; see module doc.

  A workdir that holds a checkpoint of this run resumes from its newest readable checkpoint
  (``spec.epochs`` may have grown); results are bitwise equal to an uninterrupted run.

  Args:
    spec: a `gelujax.tasks.TaskSpec` (or any object with its interface).
    workdir: where config.json, metrics.jsonl, tensorboard/, checkpoints/ and summary.json go.
    seeds: the members' seeds.
    learning_rates: the members' learning rates; members are learning-rate major.
    data_dir: passed to ``spec.load_data``.
    progress: show a progress bar (on a terminal only).
    checkpoint_every: save a checkpoint every this many epochs (and after the last one).
    keep_checkpoints: how many of the newest checkpoints to keep (>= 2).

  Returns:
    The summary.json object.

  Raises:
    ValueError: bad settings, or a workdir that holds another run (nothing is written).
    DivergedError: every member diverged (summary.json is written first).
  """
  check_run(spec, workdir, seeds, learning_rates)
  if checkpoint_every < 1:
    raise ValueError(f"checkpoint_every is {checkpoint_every}; it must be at least 1.")
  members = make_members(seeds, learning_rates)
  config = make_config(spec, members)
  splits = spec.load_data(data_dir)
  mesh = make_mesh()
  program = _Program(spec, mesh, splits["train"])
  steps = program.steps_per_epoch
  if program.num_items < spec.batch_size or not 1 <= spec.evals_per_epoch <= steps:
    raise ValueError(
      f"--batch_size {spec.batch_size} with evals_per_epoch {spec.evals_per_epoch} does not "
      f"fit the training split ({program.num_items} items, so {steps} steps per epoch); "
      "use a smaller batch size or fewer evaluations per epoch."
    )
  member = program.abstract_state(np.zeros(1, np.int32), np.ones(1, np.float32))
  workdirs.check_memory(member, member.params, len(members), splits)
  seeds_M, learning_rates_M = _put_members(members, mesh)
  train = {k: put_replicated(v, mesh) for k, v in splits["train"].items() if k != "groups"}
  eval_splits = {
    name: program.put_eval_split(splits[name]) for name in _EVAL_SPLITS if name in splits
  }
  sizes = {name: len(splits[name]["targets"]) for name in eval_splits}

  lead = jax.process_index() == 0
  with workdirs.writing(workdir, lead):  # One writer; a full disk is one line naming the file.
    check_run(spec, workdir, seeds, learning_rates)  # Again, now that no one else writes it.
    checkpointer = checkpoints.Checkpointer(workdir, keep_checkpoints, config)
    restored = checkpointer.restore_latest(program.abstract_state(seeds_M, learning_rates_M))
    start, state = restored or (0, program.init(seeds_M, learning_rates_M))
    if lead:
      writers.truncate_metrics(workdir, start)
      workdirs.write_config(workdir, config)
      writer = writers.MetricsWriter(workdir, members, purge_step=start * steps + 1)
    bounds = [round(i * steps / spec.evals_per_epoch) for i in range(spec.evals_per_epoch + 1)]
    bar = writers.progress_bar(spec.epochs, start, progress and lead)
    diverged = to_host(state.diverged_step) >= 0
    try:
      for epoch in range(start + 1, spec.epochs + 1):
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
          metrics = {"train_loss": to_host(train_loss)}
          for name, split in eval_splits.items():
            for key, mean in _mean_metrics(program, state, split, sizes[name]).items():
              metrics[f"{name}_{key}"] = mean
          diverged = to_host(state.diverged_step) >= 0
          if lead:
            writer.write(
              writers.make_records(
                members, epoch - 1 + last / steps, (epoch - 1) * steps + last, diverged, metrics
              )
            )
        if epoch % checkpoint_every == 0 or epoch == spec.epochs or diverged.all():
          checkpointer.save(epoch, state)
        bar.set_postfix(_describe_progress(metrics, diverged), refresh=False)  # update() draws.
        bar.update(1)
        if diverged.all():
          break
    finally:
      bar.close()
      checkpointer.close()
      if lead:
        writer.close()
    return _finish(workdir, config, spec, state, steps, diverged)


def _describe_progress(metrics: dict[str, np.ndarray], diverged: np.ndarray) -> dict[str, str]:
  """The progress bar's note: each loss of the best member still training."""
  if diverged.all():
    return {"diverged": "all"}
  return {k: f"{v[~diverged].min():.4g}" for k, v in metrics.items() if "loss" in k}


def _finish(workdir, config, spec, state, steps_per_epoch, diverged) -> dict[str, Any]:
  """Writes summary.json; raises DivergedError when no member is left."""
  if jax.process_count() > 1:
    from jax.experimental import multihost_utils

    multihost_utils.sync_global_devices("gelujax metrics written")
  diverged_steps = to_host(state.diverged_step)
  diverged_epochs = [int(s) // steps_per_epoch + 1 if s >= 0 else None for s in diverged_steps]
  summary = writers.summarize(
    config, writers.read_metrics(workdir), diverged_epochs, spec.select_metric
  )
  if jax.process_index() == 0:
    writers.write_json(os.path.join(workdir, writers.SUMMARY_FILE), summary)
  if diverged.all():
    raise DivergedError(
      f"All {len(diverged)} members diverged (their training loss became non-finite, at "
      f"epochs {diverged_epochs}); see {workdir}/metrics.jsonl. Lower the learning rates."
    )
  return summary


def _spec_from_config(base: Any, fields: dict[str, Any]) -> Any:
  """``base`` with the fields of a config.json spec (JSON lists back to tuples)."""
  overrides = {
    k: tuple(v) if isinstance(getattr(base, k), tuple) else v
    for k, v in fields.items()
    if getattr(base, k) != v
  }
  return base.replace(**overrides)


def restore(
  workdir: str, *, spec: Any = None, data_dir: str | None = None
) -> tuple[Any, list[dict[str, Any]], TrainState]:
  """The spec, members and stacked state of the newest readable checkpoint in ``workdir``.

  Args:
    workdir: a run's directory.
    spec: the run's spec; by default rebuilt from config.json through `gelujax.tasks`.
    data_dir: passed to ``spec.load_data`` (the state's shapes depend on the inputs).
  """
  config = workdirs.read_config(workdir)
  if config is None:
    raise ValueError(f"Workdir {workdir} holds no run: it has no config.json and no checkpoint.")
  if spec is None:
    from gelujax import tasks  # Only here: tasks imports models and data.

    spec = _spec_from_config(tasks.get(config["task"]), config["spec"])
  mesh = make_mesh()
  program = _Program(spec, mesh, spec.load_data(data_dir)["train"])
  checkpointer = checkpoints.Checkpointer(workdir, config=config)
  restored = checkpointer.restore_latest(
    program.abstract_state(*_put_members(config["members"], mesh))
  )
  checkpointer.close()
  if restored is None:
    raise ValueError(f"Workdir {workdir} holds no readable checkpoint under checkpoints/.")
  return spec, config["members"], restored[1]


# The program of the last `evaluate` call, by the spec's repr: evaluating one run on many splits
# of one shape (the noise levels of Fig. 3) compiles once.
_last_evaluation: dict[str, _Program] = {}


def evaluate(spec: Any, state: TrainState, split: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
  """Each member's mean metrics over ``split`` (e.g. {"loss": [M], "error": [M]})."""
  key = repr(spec)
  program = _last_evaluation.get(key)
  if program is None:
    _last_evaluation.clear()
    program = _last_evaluation[key] = _Program(spec, make_mesh(), split)
  return _mean_metrics(program, state, program.put_eval_split(split), len(split["targets"]))


def _mean_metrics(
  program: _Program, state: TrainState, device_split: dict[str, jax.Array], size: int
) -> dict[str, np.ndarray]:
  """Each member's metrics over a split from `put_eval_split`: the sums over its ``size``
  examples divided by ``size``, in float64."""
  totals = program.evaluate(state, device_split)
  return {k: to_host(v).astype(np.float64) / size for k, v in totals.items()}
