"""A grid's members on a device mesh: the layout, the step functions mapped over members, and
where their arrays live. Every program of the engine is made here, in `make_program`.

- **mesh**: the devices of every process as a 2-D `Mesh` with axes ``("members", "data")``
  (`make_mesh`). Member states, and their batches, are sharded over ``members``: members never
  communicate, so a grid spreads over devices, CPU cores or TPU chips with no traffic. Each batch
  is sharded over ``data``: **data parallelism**, where ``jax.jit`` inserts the gradient
  all-reduce. A grid that does not divide over ``members`` is padded with copies of its last
  member, whose results are dropped.
- **program**: a run's jitted functions on its mesh (`Program`): `init_members`, `shuffle`,
  `train_segment` (`gelujax.engine.step.train_steps` of every member), `evaluate` and
  `predict` (every member's outputs), each a pure module-level function of a `StepConfig` and
  arrays.

Members never exchange values: within one compiled program a member's numbers are bitwise the
same whatever the other members hold. Another grid size or layout is another program, whose
sums XLA may block otherwise: equal to float32 rounding (the README states both guarantees).

**No collective along members.** Every output of every program is sharded over ``members`` (or
computed from replicated inputs), never gathered onto every device: the host reads a result
shard by shard (`to_host`), and the state a checkpoint saves is cut from the shards on the host
(`Program.unpad`). A program that holds a collective (an all-gather, an all-reduce) makes each
device wait in a rendezvous for the others; on XLA's CPU devices, past 32 such programs in
flight (its per-device limit on programs dispatched ahead) the devices wait on each other and
XLA aborts the process after 40 s. A mesh with a ``data`` axis of more than one device, or
several processes, cannot avoid collectives (the gradient all-reduce): there
`Program.holds_collectives` is true and the loop waits for each program before it dispatches the
next (`gelujax.engine.fit`).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import hashlib
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from gelujax import prng
from gelujax.engine import step
from gelujax.engine.step import StepConfig, TrainState
from gelujax.members import Members
from gelujax.parts import Parts

# Evaluation batches hold at least this many examples (more work per scan step).
EVAL_BATCH = 1024


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
      f"`members_axis` {members_axis} does not divide the {count} devices; valid: "
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


def describe_layout(
  num_members: int, mesh: Mesh, strategy: str | None = None, why: str = ""
) -> str:
  """One line on how the grid lies on the mesh, padding included, and (given ``strategy``) how
  each device takes its members and ``why``."""
  text = (
    f"{num_members} member{'s' * (num_members != 1)} on a mesh of {mesh.shape['members']} "
    f"(members) x {mesh.shape['data']} (data) {mesh.devices.flat[0].platform} devices"
  )
  pad = padded_size(num_members, mesh) - num_members
  if pad:
    text += f", padded with {pad} cop{'ies' if pad > 1 else 'y'} of the last member (discarded)"
  if strategy is not None:
    how = "vmapped" if strategy == "vmap" else "one after another (lax.map)"
    text += f"; members {how} on each device ({why})" if why else f"; members {how} on each device"
  return text


# ------------------------------------------------------------------- mapped over members


# How a device trains the members it holds (`map_members`): "vmap" batches them into one
# computation (each product gains a members dimension); "map" takes them one after another in a
# loop inside the same compiled program (`jax.lax.map`), each product at one member's shape.
# `choose_strategy` picks one per program.
STRATEGIES = ("vmap", "map")


def map_members(
  mesh: Mesh,
  fn: Callable[..., Any],
  members: tuple,
  shared: tuple = (),
  strategy: str = "vmap",
) -> Any:
  """``fn(*member, *shared)`` for every member of the leading axis of the ``members`` arrays: a
  ``shard_map`` of a ``vmap`` or of a ``lax.map`` (``strategy``, one of `STRATEGIES`).

  The mesh's ``members`` axis is manual here: a device sees only its members, and vmaps ``fn``
  over them or loops over them; no member's arithmetic reads another's values (how many share
  its device, and the strategy, may change how XLA blocks its sums: another program, the same
  numbers to float32 rounding). The ``shared`` arguments are the same for every member; the
  ``data`` axis stays automatic, so arrays sharded over it (a batch) are split by XLA, which
  inserts the reductions across it.
  """
  if strategy == "vmap":
    local = jax.vmap(fn, in_axes=(0,) * len(members) + (None,) * len(shared))
  elif strategy == "map":

    def local(*args):
      own, common = args[: len(members)], args[len(members) :]
      return jax.lax.map(lambda member: fn(*member, *common), own)

  else:
    raise ValueError(f"member strategy {strategy!r}; valid: {', '.join(STRATEGIES)}.")
  return jax.shard_map(
    local,
    mesh=mesh,
    in_specs=(P("members"),) * len(members) + (P(),) * len(shared),
    out_specs=P("members"),
    axis_names={"members"},
  )(*members, *shared)


def init_members(
  config: StepConfig, mesh: Mesh, seeds: jax.Array, learning_rates: jax.Array
) -> TrainState:
  """`gelujax.engine.step.init_member` of every member, [M, ...]: vmapped whatever the program's
  strategy (it runs once a run, and every strategy starts from the same draw)."""
  return map_members(mesh, functools.partial(step.init_member, config), (seeds, learning_rates))


def shuffle(config: StepConfig, seeds_M: jax.Array, epoch: jax.Array) -> jax.Array:
  """Each member's batches of the epoch as item indices, ``[steps, members, batch_size]``."""
  order_MxN = jax.vmap(functools.partial(step.permute, config), in_axes=(0, None))(seeds_M, epoch)
  return order_MxN.reshape(len(seeds_M), config.steps_per_epoch, -1).transpose(1, 0, 2)


def train_segment(
  config: StepConfig,
  mesh: Mesh,
  state: TrainState,
  data: dict[str, jax.Array],
  batches: jax.Array,
  seeds: jax.Array,
  learning_rates: jax.Array,
  *,
  epoch: jax.Array,
  first_step: jax.Array,
  num_steps: int,
  strategy: str = "vmap",
) -> tuple[TrainState, jax.Array]:
  """Trains every member on ``num_steps`` of the epoch's ``batches`` from step ``first_step``: each
  device its own members, vmapped or one after another (``strategy``, `map_members`), each
  through the whole segment (`gelujax.engine.step.train_steps`). Batches stay sharded over
  ``data`` (automatic: XLA inserts the gradient all-reduce).

  Args:
    config: the run's `StepConfig`.
    mesh: the ``("members", "data")`` mesh.
    state: the stacked state, [M, ...].
    data: the training split's arrays, [N, ...], replicated.
    batches: the epoch's item indices from `shuffle`, [steps, M, B].
    seeds: [M] int32.
    learning_rates: [M] float32.
    epoch: the epoch, from 1 (keyword-only, as ``first_step``: two bare numbers are easily
      swapped).
    first_step: the epoch's step to start at.
    num_steps: steps to take (static).
    strategy: how a device takes its members, one of `STRATEGIES`.

  Returns:
    The next state and each member's training loss at each of these steps, [M, num_steps].
  """
  items_MxSxB = jnp.moveaxis(jax.lax.dynamic_slice_in_dim(batches, first_step, num_steps), 1, 0)
  steps = (epoch - 1) * config.steps_per_epoch + first_step + jnp.arange(num_steps, dtype=jnp.int32)
  return map_members(
    mesh,
    functools.partial(step.train_steps, config),
    (state, learning_rates, seeds, items_MxSxB),
    (data, epoch, steps),
    strategy,
  )


def evaluate(
  config: StepConfig,
  mesh: Mesh,
  state: TrainState,
  split: dict[str, jax.Array],
  *,
  strategy: str = "vmap",
) -> dict[str, jax.Array]:
  """Per-member metric sums over a split from `Program.put_eval_split`, each [M].

  Every member sees every example: the split's batches are shared, sharded over ``data``.
  ``strategy``: how a device takes its members (`map_members`).
  """
  return map_members(
    mesh,
    functools.partial(step.evaluate_member, config),
    (state.params, state.batch_stats),
    (split,),
    strategy,
  )


def predict(
  config: StepConfig,
  mesh: Mesh,
  state: TrainState,
  split: dict[str, jax.Array],
  *,
  strategy: str = "vmap",
) -> jax.Array:
  """Per-member model outputs on a split from `Program.put_eval_split`,
  ``[M, batches, batch, ...]`` float32 (`gelujax.engine.step.predict_member`), the padding's
  rows included.

  Every member sees every example, as in `evaluate`; ``strategy``: how a device takes its
  members (`map_members`).
  """
  return map_members(
    mesh,
    functools.partial(step.predict_member, config),
    (state.params, state.batch_stats),
    (split,),
    strategy,
  )


# The measured rule (`choose_strategy`): by platform and by whether the model's forward pass
# holds a convolution, the strategy a device with several members takes. Measured side by side
# on the trainer's own programs by benchmarks/members.py (map's ms/step over vmap's):
# - cpu (2 AMD EPYC cores, benchmarks/results/members_cpu.md and members_cpu_vit.md): the loop
#   was faster for every model measured (the MLP grid, the small Wide ResNet, the paper's
#   CIFAR-10 net, the ViT), by the least for the MLP;
# - gpu (one NVIDIA H200, benchmarks/results/members_gpu*.md): the loop for convolutions (the
#   CIFAR-10 net and the Wide ResNet), vmap for the MLP grid (many times slower looped).
# A platform it does not name (tpu) vmaps: not measured.
RULE = {
  ("cpu", False): "map",
  ("cpu", True): "map",
  ("gpu", False): "vmap",
  ("gpu", True): "map",
}


def check_strategy(strategy: str) -> None:
  """Refuses a ``member_strategy`` that is neither ``"auto"`` nor one of `STRATEGIES`."""
  if strategy != "auto" and strategy not in STRATEGIES:
    raise ValueError(f"`member_strategy` {strategy!r} is not one of auto, {', '.join(STRATEGIES)}.")


def choose_strategy(
  config: StepConfig, mesh: Mesh, num_members: int, strategy: str = "auto"
) -> tuple[str, str]:
  """``(strategy, why)``: how each device of ``mesh`` takes its members, ``strategy`` unless it
  is ``"auto"``, else by `RULE`: one member a device is vmapped (there is nothing to loop
  over); otherwise the rule's entry for the platform and whether the model holds a convolution
  (a platform it does not name vmaps)."""
  check_strategy(strategy)
  if strategy != "auto":
    return strategy, "as asked"
  per_device = padded_size(num_members, mesh) // mesh.shape["members"]
  if per_device == 1:
    return "vmap", "one member a device"
  platform = mesh.devices.flat[0].platform
  convolution = step.holds_convolution(config)
  found = RULE.get((platform, convolution), "vmap")
  return found, f"the rule for {'a convolutional' if convolution else 'this'} model on {platform}"


# ------------------------------------------------------------------------------ the program


@dataclasses.dataclass(frozen=True)
class Program:
  """A run's jitted step functions on its mesh, and where their arrays live.

  Arrays over members are ``[M_padded, ...]`` sharded over ``members``; use `put_members`,
  `put_data`, `put_eval_split` to place inputs, and `unpad` for results.

  Attributes:
    config: the static part of the step functions.
    mesh: the ``("members", "data")`` mesh.
    num_members: the grid's size M (before padding).
    strategy: how each device takes its members in training and evaluation (`STRATEGIES`).
    init: ``(seeds, learning_rates) -> TrainState``.
    shuffle: ``(seeds, epoch) -> batches [steps, M, B]``.
    train_segment: ``(state, data, batches, seeds, learning_rates, *, epoch, first_step,
      num_steps) -> (state, training loss at each step [M, num_steps])``; donates ``state``.
    evaluate: ``(state, split) -> {metric: sums [M]}``.
    predict: ``(state, split) -> outputs [M, batches, batch, ...]`` (`predict`).
    strategy_reason: why ``strategy`` (`choose_strategy`).
  """

  config: StepConfig
  mesh: Mesh
  num_members: int
  strategy: str
  init: Callable[..., TrainState]
  shuffle: Callable[..., jax.Array]
  train_segment: Callable[..., tuple[TrainState, jax.Array]]
  evaluate: Callable[..., dict[str, jax.Array]]
  predict: Callable[..., jax.Array]
  strategy_reason: str = ""

  @property
  def steps_per_epoch(self) -> int:
    return self.config.steps_per_epoch

  @property
  def padded_members(self) -> int:
    return padded_size(self.num_members, self.mesh)

  def _pad_index(self) -> np.ndarray:
    return np.minimum(np.arange(self.padded_members), self.num_members - 1)

  @property
  def holds_collectives(self) -> bool:
    """Whether the training and evaluation programs hold a collective: a ``data`` axis of more
    than one device (the gradient's all-reduce) or devices in several processes (reading a
    result gathers it across them). Such programs are run one at a time: never two in flight."""
    return self.mesh.shape["data"] > 1 or jax.process_count() > 1

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
    batch = min(max(EVAL_BATCH, self.config.batch_size), size)
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

  # Jitted once a program: a function jitted anew at each call is traced and compiled anew.
  @functools.cached_property
  def pad(self) -> Callable[[TrainState], TrainState]:
    """A state of the grid's M members (e.g. restored) as the program's padded, sharded state."""
    index = self._pad_index()
    sharding = NamedSharding(self.mesh, P("members"))
    return jax.jit(lambda s: jax.tree.map(lambda x: x[index], s), out_shardings=sharding)

  def unpad(self, state: TrainState) -> TrainState:
    """The M real members of a padded state, replicated (for checkpoints and the host): read
    shard by shard on the host, cut to M, and put back on every device, with no program (and so
    no collective) on the devices."""
    num = self.num_members
    replicated = NamedSharding(self.mesh, P())
    return jax.tree.map(lambda x: _put(to_host(x)[:num], replicated), state)

  def abstract_state(self) -> TrainState:
    """The shapes, dtypes and (replicated) shardings of an unpadded state: what checkpoints
    hold."""
    return self._abstract_state

  @functools.cached_property
  def _abstract_state(self) -> TrainState:  # Traced once a program: the model's init is slow.
    config, num = self.config, self.num_members
    shapes = jax.eval_shape(
      jax.vmap(functools.partial(step.init_member, config)),
      jax.ShapeDtypeStruct((num,), jnp.int32),
      jax.ShapeDtypeStruct((num,), jnp.float32),
    )
    replicated = NamedSharding(self.mesh, P())
    return jax.tree.map(
      lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=replicated), shapes
    )

  def diverged_steps(self, state: TrainState) -> np.ndarray:
    """The step at which each of the M members diverged (-1: it trains), [M]."""
    return to_host(state.diverged_step)[: self.num_members]

  def mean_metrics(
    self, state: TrainState, device_split: dict[str, jax.Array], size: int
  ) -> dict[str, np.ndarray]:
    """Each member's metrics over a split from `put_eval_split`: the sums divided by ``size``,
    what they were summed over (the objective's `count` of the split: its examples, or its
    tokens), in float64, [M] each."""
    totals = self.evaluate(state, device_split)
    return {k: to_host(v)[: self.num_members].astype(np.float64) / size for k, v in totals.items()}

  def outputs(self, state: TrainState, device_split: dict[str, jax.Array], size: int) -> np.ndarray:
    """Each member's model outputs on a split from `put_eval_split` of ``size`` examples, on
    the host: ``[M, size, ...]`` float32 (the padding's rows and members dropped)."""
    outputs = to_host(self.predict(state, device_split))[: self.num_members]
    flat = outputs.reshape(self.num_members, -1, *outputs.shape[3:])
    return flat[:, :size]


def _put(x: np.ndarray, sharding: NamedSharding) -> jax.Array:
  """A host array, the same on every process, laid out as ``sharding`` says."""
  return jax.make_array_from_callback(x.shape, sharding, lambda index: x[index])


def to_host(x: jax.Array) -> np.ndarray:
  """An array's whole value as NumPy, read from its shards on the host: no program runs on the
  devices, except in a multi-process run, where the shards other processes hold are gathered
  (call it there only with nothing else in flight: `Program.holds_collectives`)."""
  if x.is_fully_addressable:
    return np.asarray(x)
  if x.sharding.is_fully_replicated:
    return np.asarray(x.addressable_data(0))
  from jax.experimental import multihost_utils

  jax.block_until_ready(x)
  return np.asarray(multihost_utils.process_allgather(x, tiled=True))


# XLA's options for compiling `Program.init` on CPU (see `make_program`).
CPU_INIT_OPTIONS = {"xla_backend_optimization_level": 1}


def _on_cpu(mesh: Mesh) -> bool:
  return mesh.devices.flat[0].platform == "cpu"


# The programs this process made, newest last, by what determines them (`_program_key`): a
# second fit of the same parts (another grid of the same size, the evaluation seeds, a resume,
# the noise levels of Fig. 3) traces and compiles nothing. Bounded: each holds its compiled
# executables, and the model, optimizer and objective its key names by identity.
_PROGRAMS: collections.OrderedDict[tuple, Program] = collections.OrderedDict()
_KEPT_PROGRAMS = 8


def _program_key(parts: Parts, mesh, num_members, strategy, train_loss) -> tuple:
  """Everything a program depends on: the parts' model, optimizer and objective (the objects
  themselves, by identity: the cached program holds them, so no other object takes their
  identity while it is kept), how batches are made, the mesh, the grid's size, the member
  strategy and training loss asked for, the training split's shapes and dtypes, and its groups
  (their boundaries shape the batches); the split's other values, the members' learning rates
  and seeds are arguments."""
  train = parts.train
  shapes = tuple((k, np.shape(v), np.asarray(v[:1]).dtype.str) for k, v in sorted(train.items()))
  groups = train.get("groups") if parts.group_batches else None
  digest = None if groups is None else hashlib.sha256(np.ascontiguousarray(groups)).hexdigest()
  built = (id(parts.model), id(parts.optimizer), id(parts.objective))
  batches = (parts.batch_size, parts.group_batches, parts.dropout_bits, parts.steps_per_epoch)
  return (built, batches, mesh, shapes, digest, num_members, strategy, train_loss)


def make_program(
  parts: Parts,
  mesh: Mesh,
  num_members: int,
  member_strategy: str = "auto",
  *,
  train_loss: str | None = None,
) -> Program:
  """The jitted programs of ``num_members`` members of ``parts`` on ``mesh``: the one place the
  engine makes them. The parts' model, optimizer and objective become the `StepConfig` the
  step functions receive, and each program is a module-level function with that config and
  the mesh bound.

  Args:
    parts: what is trained (`gelujax.tasks.build`).
    mesh: a ``("members", "data")`` mesh (`make_mesh`).
    num_members: the grid's size; padded to a multiple of the ``members`` axis.
    member_strategy: how each device takes its members: ``"auto"`` (the measured rule,
      `choose_strategy`), ``"vmap"`` or ``"map"``.
    train_loss: how the logged training loss is measured, one of
      `gelujax.engine.step.TRAIN_LOSSES`; None: the paper's, the step's batch with dropout off
      before the update, or, for a model that draws no randomness and keeps no batch
      statistics, its training pass (the same number, for free).

  The process keeps the last programs it made: the same arguments again give the same
  `Program`, whose jitted functions have traced and compiled already.
  """
  key = _program_key(parts, mesh, num_members, member_strategy, train_loss)
  if key in _PROGRAMS:
    _PROGRAMS.move_to_end(key)
    return _PROGRAMS[key]
  if parts.dropout_bits not in prng.DROPOUT_BITS:
    raise ValueError(f"dropout_bits {parts.dropout_bits!r}; valid: {', '.join(prng.DROPOUT_BITS)}.")
  if train_loss is not None and train_loss not in step.TRAIN_LOSSES:
    raise ValueError(f"train_loss {train_loss!r}; valid: {', '.join(step.TRAIN_LOSSES)}.")
  train, groups = parts.train, None
  if parts.group_batches:
    groups = step.find_groups(train["groups"], parts.batch_size, mesh.shape["data"])
  num_items = len(groups.starts) if groups is not None else len(train["targets"])
  whole = max(num_items // parts.batch_size, 1)
  if parts.steps_per_epoch is not None and parts.steps_per_epoch > whole:
    raise ValueError(
      f"steps_per_epoch {parts.steps_per_epoch} is more than the {whole} whole batches of "
      f"{parts.batch_size} that the training split's {num_items} items make; an epoch draws "
      f"its batches without replacement: give at most {whole}, or None."
    )
  config = StepConfig(
    model=parts.model,
    optimizer=parts.optimizer,
    objective=parts.objective,
    # Zeros of one example's shape: the program depends on the split's shapes, not its values.
    sample={k: np.zeros_like(v[:1]) for k, v in train.items() if k != "groups"},
    num_items=num_items,
    batch_size=parts.batch_size,
    steps_per_epoch=parts.steps_per_epoch or whole,
    groups=groups,
    dropout_bits=parts.dropout_bits,
  )
  has_batch_stats = step.holds_batch_stats(config)
  if train_loss is None:  # A deterministic training pass logs the paper's number, for free.
    deterministic = not has_batch_stats and not step.draws_randomness(config)
    train_loss = "training_pass" if deterministic else "dropout_off"
  config = dataclasses.replace(config, has_batch_stats=has_batch_stats, train_loss=train_loss)
  strategy, strategy_reason = choose_strategy(config, mesh, num_members, member_strategy)
  members = NamedSharding(mesh, P("members"))
  # init runs once a run, and on CPU most of its compile time is LLVM optimizing the unrolled
  # threefry rounds of every parameter's initializer: at XLA's level 1 of 3 it compiles up to
  # 3.4x faster and draws the same bits for every task (level 0 does not: the normal
  # initializers' float arithmetic rounds otherwise); benchmarks/init_compile.py measures both.
  init_options = CPU_INIT_OPTIONS if _on_cpu(mesh) else None
  program = _PROGRAMS[key] = Program(
    config=config,
    mesh=mesh,
    num_members=num_members,
    strategy=strategy,
    strategy_reason=strategy_reason,
    init=jax.jit(
      functools.partial(init_members, config, mesh),
      out_shardings=members,
      compiler_options=init_options,
    ),
    shuffle=jax.jit(
      functools.partial(shuffle, config),
      out_shardings=NamedSharding(mesh, P(None, "members", "data")),
    ),
    train_segment=jax.jit(
      functools.partial(train_segment, config, mesh, strategy=strategy),
      static_argnames="num_steps",
      donate_argnums=0,
      out_shardings=(members, members),
    ),
    evaluate=jax.jit(
      functools.partial(evaluate, config, mesh, strategy=strategy), out_shardings=members
    ),
    predict=jax.jit(
      functools.partial(predict, config, mesh, strategy=strategy), out_shardings=members
    ),
  )
  while len(_PROGRAMS) > _KEPT_PROGRAMS:
    _PROGRAMS.popitem(last=False)
  return program
