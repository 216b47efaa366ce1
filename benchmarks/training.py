"""Training speed of the paper's MNIST classifier and autoencoder, against their own matrix
products: layouts of a grid, one member, the autoencoder grid, and PyTorch.

The ``mnist`` task (784 -> 8x[128, GELU, dropout 0.5] -> 10, Adam, batch 128) on Fashion-MNIST's
55,000 training images, and the ``mnist_ae`` autoencoder's grid (784-1000-500-250-30-...-784,
exact GELU, Adam, batch 64, its 6 members) on all 60,000. Each gelujax contender is the
trainer's public program (`gelujax.engine.make_program`) for one layout, timed for whole epochs
(the on-device shuffle and the compiled `lax.scan` over the epoch's steps; evaluation is a
contender of its own) after a warm-up epoch that compiles:

- one member: on one CPU device whose kernels use every core, the same with XLA's default of
  handing dots to YNNPACK (which gelujax turns off), and on one device per core with the batch
  split over them (data parallelism);
- the 15-member grid (3 learning rates x 5 seeds): on one device, vmapped; on one device per core
  (the mesh's ``members`` axis) with each device's members vmapped together (reports before
  this revision also timed each device's members one at a time, an engine option since
  removed: it measured no faster);
- the autoencoder grid at the layout ``--cpu_devices=auto`` picks, timed for a tenth of an epoch
  (`AE_FRACTION`) and scaled to its epoch;
- where a step's time goes, at the layout ``--cpu_devices=auto`` picks (a fifth of an epoch
  each, one thing changed): threefry dropout bits instead of the hash, ReLU instead of GELU, no
  dropout-off pass for the logged training loss, no dropout.

**What each contender's matrix products reach.** A step's products are listed from the step's
own program (`step_products`: the dot products of its jaxpr, a product the step computes twice
counted once, as XLA does). Each contender's *limit* runs exactly those products (batched over
its members as its layout batches them, on its device count and XLA flags) in a jitted
`lax.scan` over `LIMIT_STEPS` steps (`loop_products`: a step's products in any order, each
step after the one before); PyTorch's runs the same products with ``torch.matmul`` on its
thread count. A contender's GFLOP/s is then reported as a fraction of its own limit's, measured
in the same round.

Every contender and every limit runs in a process of its own (the CPU device count is fixed
when JAX starts) that waits between timings, so each has the machine to itself while it runs;
after a PyTorch timing the next one waits `SETTLE_S` (its OpenMP threads spin for a while after
a call). Contenders run interleaved in rounds (each once per round) so that load from elsewhere
hits them alike; the report gives medians over rounds, and each ratio is the median of the
ratios measured within a round.

Run: python benchmarks/training.py          (3 rounds; about 15 to 20 min on 2 quiet cores)
     python benchmarks/training.py --render (the report again from its JSON, with the summary of
                                             `step_profile.py`'s report beside it)
     python benchmarks/training.py --quick  (a smoke run: the tiny tasks on 320 images, grids of
                                             2, the auto layouts, PyTorch on 2 threads, 1 round)
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import functools
import json
import math
import os
import platform
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

RESULTS_DIR = Path(__file__).resolve().parent / "results"
CLASSIC, TUNED = "PyTorch classic (DataLoader over a list)", "PyTorch tuned (indexed tensors)"
TORCH_THREADS = (2, 1)
# The contenders' tasks: the classifier at dropout 0.5 as in Fig. 2's second half, the
# autoencoder as Fig. 4 trains it, both with the exact GELU on Fashion-MNIST; ``--quick`` trains
# the tiny versions of both.
MNIST = {
  "task": "mnist",
  "spec": {"dataset": "fashion_mnist", "dropout": 0.5, "activation": "gelu"},
}
AE = {"task": "mnist_ae", "spec": {"dataset": "fashion_mnist", "activation": "gelu"}}
QUICK_MNIST = {**MNIST, "task": "tiny_mnist"}
QUICK_AE = {**AE, "spec": {**AE["spec"], "model": "autoencoder_tiny"}}
# The autoencoder's epoch (~2 min as a grid) is timed for 1/AE_FRACTION of its steps a round.
AE_FRACTION = 10
# The profiles time 1/PROFILE_FRACTION of an epoch each and change one thing each.
PROFILE_FRACTION = 5
PROFILES = {
  "as trained": {},
  "threefry dropout bits": {"dropout_bits": "threefry"},
  "relu": {"activation": "relu"},
  "no dropout-off loss pass": {"train_loss": "training_pass"},
  "no dropout": {"dropout": 0.0},
}
# Steps of a limit's scan (enough to amortize a call as an epoch's scan does).
LIMIT_STEPS = 100
# The targets: the MNIST grid, one member and the autoencoder grid each at least this fraction
# of what their own matrix products reach.
LIMIT_TARGET = 0.8
# Seconds to wait after a PyTorch timing, until its OpenMP threads stop spinning.
SETTLE_S = 0.5


def one_member(layout: str) -> str:
  return f"gelujax, 1 member, {layout}"


def grid(members: int, layout: str) -> str:
  return f"gelujax, {members} members, {layout}"


def autoencoder(members: int, layout: str) -> str:
  return f"gelujax autoencoder, {members} members, {layout}"


def evaluation(members: int) -> str:
  return f"gelujax evaluation, {members} member(s), auto (validation + test)"


def torch_name(loop: str, threads: int) -> str:
  return f"{loop}, {threads} thread{'s' * (threads > 1)}"


ONE_DEVICE = "1 device (kernels on every core)"
ONE_DEVICE_YNN = "1 device (kernels on every core), XLA's default YNNPACK dots"
# XLA:CPU's default for the flag that gelujax.host.configure_cpu empties.
YNN_DEFAULT = "--xla_cpu_experimental_ynn_fusion_type=individual_dot"
DATA_PARALLEL = "1 device per core, batch split over them (data)"
PER_CORE = "1 device per core (members axis)"


def auto_layout(settings: dict, members: int) -> str:
  """The layout name of what ``--cpu_devices=auto`` picks for a grid of ``members``."""
  if settings["cpu_devices"] == 1:
    return ONE_DEVICE
  return PER_CORE if members > 1 else DATA_PARALLEL


def gelujax_contenders(
  members: int, ae_members: int, cores: int, auto: dict, profiles: dict[str, dict], quick: bool
) -> dict[str, dict]:
  """Name -> worker settings of every gelujax contender (in ``quick`` mode, of the tiny tasks:
  one member, the grid and the autoencoder grid at their automatic layouts, and ``profiles``)."""
  mnist, ae = (QUICK_MNIST, QUICK_AE) if quick else (MNIST, AE)
  auto_one = one_member(auto_layout(auto[1], 1))
  auto_grid = grid(members, auto_layout(auto[members], members))
  contenders = {
    one_member(ONE_DEVICE): {**mnist, "members": 1, "cpu_devices": 1},
    one_member(ONE_DEVICE_YNN): {
      **mnist, "members": 1, "cpu_devices": 1, "xla_flags": YNN_DEFAULT,
    },
    one_member(DATA_PARALLEL): {**mnist, "members": 1, "cpu_devices": cores, "members_axis": 1},
    grid(members, ONE_DEVICE): {**mnist, "members": members, "cpu_devices": 1},
    grid(members, PER_CORE): {**mnist, "members": members, "cpu_devices": cores},
  }  # fmt: skip
  if quick:
    contenders = {name: contenders[name] for name in (auto_one, auto_grid)}
  contenders[autoencoder(ae_members, auto_layout(auto[ae_members], ae_members))] = {
    **ae, **auto[ae_members], "members": ae_members,
    "fraction": AE_FRACTION,
  }  # fmt: skip
  for variant, options in profiles.items():
    train_loss = {"train_loss": options["train_loss"]} if "train_loss" in options else {}
    spec = {k: v for k, v in options.items() if k != "train_loss"}
    for m in (1, members):
      contenders[f"{'1 member' if m == 1 else f'{m} members'} (auto), {variant}"] = {
        **mnist, "spec": {**mnist["spec"], **spec}, **auto[m], "members": m,
        "fraction": PROFILE_FRACTION, **train_loss,
      }  # fmt: skip
  return contenders


def auto_settings(members: int) -> dict:
  """What train.py's ``--cpu_devices=auto`` picks for a grid of ``members``."""
  from gelujax import host

  return {"cpu_devices": host.choose_cpu_devices(members, host.host_cores())}


# ------------------------------------------------------------------------ a step's products


def step_products(config, batch_size: int) -> list[dict[str, Any]]:
  """The matrix products of one member's training step on a batch of ``batch_size`` examples.

  They are the dot products of the step's own program (`gelujax.engine.step.train_step` with
  ``config``, a `gelujax.engine.step.StepConfig`, traced to a jaxpr): every layer's forward
  product, the gradients of its weights and of its inputs (none for the first layer: the data
  take no gradient), and the forward products of the dropout-off pass that logs the training
  loss. A product whose operands the step computes twice (the dropout-off pass's first layer,
  on the same inputs and weights as the training pass's) is listed once, as XLA's
  common-subexpression elimination computes it once.

  Returns:
    One dict per product, in program order: ``lhs`` and ``rhs`` (operand shapes),
    ``contracting`` and ``batch`` (``lax.dot_general``'s dimension numbers), ``dtype`` (the
    operands') and ``out_dtype``, ``m``, ``k``, ``n`` (as an ``[m, k] @ [k, n]`` product, each
    the product of its dimensions; ``batch_size`` for a batched product) and ``flops``
    (``2 m k n`` per batch element).

  Raises:
    ValueError: the step holds a convolution, or a product inside a loop or branch, which
      this count does not cover.
  """
  closed = step_jaxpr(config, batch_size)
  products: list[dict[str, Any]] = []
  inputs = [("input", i) for i in range(len(closed.jaxpr.invars))]
  number_values(closed.jaxpr, inputs, {}, _count_dots(products))
  return products


def step_jaxpr(config, batch_size: int):
  """One member's training step (`gelujax.engine.step.train_step` with ``config``) on a batch
  of ``batch_size`` examples, traced to a closed jaxpr from shapes alone."""
  import jax
  import jax.numpy as jnp

  from gelujax.engine import step

  state = jax.eval_shape(
    functools.partial(step.init_member, config), jnp.int32(0), jnp.float32(1e-3)
  )
  batch = {
    k: jax.ShapeDtypeStruct((batch_size, *v.shape[1:]), v.dtype) for k, v in config.sample.items()
  }
  keys = jax.eval_shape(
    lambda: jax.tree.map(
      lambda k: k[0],
      step.step_keys(jnp.int32(0), jnp.int32(1), jnp.zeros(1, jnp.int32), config.dropout_bits),
    )
  )
  return jax.make_jaxpr(functools.partial(step.train_step, config))(
    state,
    jax.ShapeDtypeStruct((), jnp.float32),
    batch,
    jax.ShapeDtypeStruct((batch_size,), jnp.float32),
    keys,
    jax.ShapeDtypeStruct((), jnp.int32),
  )


def number_values(jaxpr, inputs: list, numbers: dict, visit: Callable) -> list:
  """Value numbering of ``jaxpr``, whose inputs have the values ``inputs``: two equations of one
  primitive with equal parameters on the same values compute the same values (``numbers`` maps
  each equation seen to its number). Calls (jit, custom_jvp) are followed inside; every other
  equation is passed to ``visit(eqn, inner, new)`` (``inner``: the jaxprs its parameters hold;
  ``new``: not seen before), which may raise or record it. Returns the values of the outputs."""
  from jax.extend import core

  env = dict(zip(jaxpr.invars, inputs, strict=True))
  env.update({v: ("const", id(v)) for v in jaxpr.constvars})

  def key_of(v):
    return ("literal", repr(v.val)) if isinstance(v, core.Literal) else env[v]

  for eqn in jaxpr.eqns:
    args = tuple(key_of(v) for v in eqn.invars)
    inner = sub_jaxprs(eqn.params)
    if len(inner) == 1 and len(inner[0].invars) == len(eqn.invars):  # A call (jit, custom_jvp).
      outputs = number_values(inner[0], list(args), numbers, visit)
    else:
      key = (eqn.primitive.name, repr(sorted((k, str(v)) for k, v in eqn.params.items())), args)
      visit(eqn, inner, key not in numbers)
      number = numbers.setdefault(key, len(numbers))
      outputs = [(number, i) for i in range(len(eqn.outvars))]
    env.update(zip(eqn.outvars, outputs, strict=True))
  return [key_of(v) for v in jaxpr.outvars]


def sub_jaxprs(params: dict) -> list:
  """The jaxprs an equation's parameters hold (a call's body, a loop's, a branch's), open."""
  from jax.extend import core

  return [j.jaxpr if isinstance(j, core.ClosedJaxpr) else j for j in core.jaxprs_in_params(params)]


def holds(jaxpr, primitives: tuple[str, ...]) -> bool:
  """Whether ``jaxpr``, or a jaxpr inside it, holds one of ``primitives``."""
  return any(
    eqn.primitive.name in primitives or any(holds(j, primitives) for j in sub_jaxprs(eqn.params))
    for eqn in jaxpr.eqns
  )


_PRODUCTS = ("dot_general", "conv_general_dilated")


def _count_dots(products: list) -> Callable:
  """`number_values`' visitor for `step_products`: each new dot product appended."""

  def visit(eqn, inner, new):
    name = eqn.primitive.name
    if name == "conv_general_dilated" or any(holds(j, _PRODUCTS) for j in inner):
      raise ValueError(
        f"The step holds a {name!r} whose matrix products step_products does not count; it "
        "lists the dot products of dense models (the MNIST classifier and autoencoder)."
      )
    if name == "dot_general" and new:
      products.append(_describe_product(eqn))

  return visit


def _describe_product(eqn) -> dict[str, Any]:
  (lhs_contract, rhs_contract), (lhs_batch, rhs_batch) = eqn.params["dimension_numbers"]
  lhs, rhs = (tuple(v.aval.shape) for v in eqn.invars)
  batch = math.prod(lhs[d] for d in lhs_batch)
  k = math.prod(lhs[d] for d in lhs_contract)
  m = math.prod(lhs) // (batch * k)
  n = math.prod(rhs) // (batch * k)
  return {
    "lhs": list(lhs),
    "rhs": list(rhs),
    "contracting": [list(lhs_contract), list(rhs_contract)],
    "batch": [list(lhs_batch), list(rhs_batch)],
    "dtype": str(eqn.invars[0].aval.dtype),
    "out_dtype": str(eqn.outvars[0].aval.dtype),
    "m": m,
    "k": k,
    "n": n,
    "batch_size": batch,
    "flops": 2 * batch * m * k * n,
  }


def describe_products(products: list[dict]) -> str:
  """``N products, X MFLOP: count x [m x k] @ [k x n], ...`` (largest first)."""
  shapes = Counter(
    (p["batch_size"], p["m"], p["k"], p["n"]) for p in products
  )  # fmt: skip
  parts = [
    f"{count} x {f'{b} x ' if b > 1 else ''}[{m}x{k}]@[{k}x{n}]"
    for (b, m, k, n), count in sorted(shapes.items(), key=lambda s: -s[0][1] * s[0][2] * s[0][3])
  ]
  flops = sum(p["flops"] for p in products)
  return f"{len(products)} products, {flops / 1e6:,.1f} MFLOP: " + ", ".join(parts)


def loop_products(products: list[dict], steps: int, operands: list) -> Any:
  """``steps`` steps of ``products`` on one copy's ``operands`` ([(lhs, rhs)], one per product)
  in a `lax.scan`: XLA schedules a step's products as it likes, and each step waits for the one
  before, as a training loop's steps do. A number from the previous step's outputs is added to
  the smaller operand of every product (an elementwise pass, small beside the product), so that
  no product can be hoisted out of the loop. Returns that number."""
  import jax
  import jax.numpy as jnp

  def run_step(carried, _):
    total = jnp.zeros_like(carried)
    for p, (lhs, rhs) in zip(products, operands, strict=True):
      if lhs.size <= rhs.size:
        lhs = lhs + carried.astype(lhs.dtype)
      else:
        rhs = rhs + carried.astype(rhs.dtype)
      out = jax.lax.dot_general(
        lhs,
        rhs,
        (tuple(map(tuple, p["contracting"])), tuple(map(tuple, p["batch"]))),
        preferred_element_type=jnp.dtype(p["out_dtype"]),
      )
      total = total + out[(0,) * out.ndim].astype(jnp.float32)
    return total * jnp.float32(1e-30), None  # Keeps the operands' values as they are.

  first = operands[0][0]  # The start, of the operands' type (varying over members).
  start = first[(0,) * first.ndim].astype(jnp.float32) * 0
  carried, _ = jax.lax.scan(run_step, start, length=steps)
  return carried


def make_operands(products: list[dict], copies: int) -> list[tuple[np.ndarray, np.ndarray]]:
  """Standard normal operands of ``products`` for ``copies`` copies, [copies, ...] each."""
  rng = np.random.default_rng(0)
  return [
    tuple(
      rng.standard_normal((copies, *p[side]), dtype=np.float32).astype(p["dtype"])
      for side in ("lhs", "rhs")
    )
    for p in products
  ]


# ------------------------------------------------------------------------------- the workers


def train_worker(settings: dict) -> None:
  """A gelujax contender's process: builds its program, then times what stdin asks for."""
  from gelujax import host

  _add_xla_flags(settings)
  host.configure_cpu(settings["cpu_devices"], settings["members"])
  import flax
  import jax

  from gelujax import engine, tasks
  from gelujax.data import Splits
  from gelujax.members import Members

  spec = tasks.get(settings["task"]).replace(**settings["spec"])
  splits = spec.load_data(settings.get("data_dir"))
  limit = settings.get("examples") or None
  train = {k: v[:limit] for k, v in splits["train"].items()}
  evals = {
    name: {k: v[: limit and limit // 4] for k, v in splits[name].items()}
    for name in ("validation", "test")
    if name in splits
  }
  lrs = spec.learning_rates[: max(1, min(3, settings["members"]))]
  members = Members(lrs, range(-(-settings["members"] // len(lrs))))
  num = len(members)
  mesh = engine.make_mesh(num, settings.get("members_axis"))
  parts = tasks.build(spec, Splits({**splits, "train": train}, splits.info))
  # A profile may log the training loss otherwise: the same step, another program.
  program = engine.make_program(parts, mesh, num, train_loss=settings.get("train_loss"))
  seeds_M, lrs_M = program.put_members(members)
  data = program.put_data(train)
  state = program.init(seeds_M, lrs_M)
  steps = max(1, program.steps_per_epoch // settings.get("fraction", 1))
  splits_on_device = [program.put_eval_split(split) for split in evals.values()]
  epoch = 0

  def shuffle():
    nonlocal epoch
    epoch += 1
    return program.shuffle(seeds_M, np.int32(epoch))

  def train(batches) -> None:
    nonlocal state
    state, loss = program.train_segment(
      state, data, batches, seeds_M, lrs_M, epoch=np.int32(epoch), first_step=np.int32(0),
      num_steps=steps,
    )  # fmt: skip
    loss.block_until_ready()

  def run_epoch() -> None:
    train(shuffle())

  def run_profile() -> None:
    """An epoch whose training segment (not its shuffle) is traced by JAX's profiler."""
    batches = jax.block_until_ready(shuffle())
    with jax.profiler.trace(settings["profile_dir"]):
      train(batches)

  def run_evaluation() -> None:
    jax.block_until_ready([program.evaluate(state, split) for split in splits_on_device])

  run_epoch()  # Compiles.
  run_evaluation()
  params = flax.traverse_util.flatten_dict(
    jax.tree.map(lambda x: x[0], program.unpad(state).params)
  )
  # The Dense kernels in layer order (Dense_2 before Dense_10).
  layers = sorted(
    (path for path in params if path[-1] == "kernel"),
    key=lambda path: [int(part.split("_")[-1]) for part in path[:-1]],
  )
  data_devices = mesh.shape["data"]
  config = program.config
  products = step_products(config, spec.batch_size)
  _reply(
    {
      "ready": True,
      "task": spec.name,
      "members": num,
      "layout": engine.describe_layout(num, mesh),
      "devices": jax.device_count(),
      "xla_flags": os.environ.get("XLA_FLAGS", ""),
      "steps_per_epoch": program.steps_per_epoch,
      "steps_timed": steps,
      "examples_per_epoch": program.steps_per_epoch * spec.batch_size,
      "batch_size": spec.batch_size,
      "layer_shapes": [list(params[path].shape) for path in layers],
      # A member's products on its whole batch (its FLOPs), those each device computes of it
      # (its share of the batch when the batch is split over ``data``) and how many such
      # copies the mesh computes in all (padding included), and PyTorch's (no such pass).
      "products": products,
      "device_products": step_products(config, spec.batch_size // data_devices)
      if data_devices > 1
      else products,
      "copies": program.padded_members * data_devices,
      "training_pass_products": step_products(
        dataclasses.replace(config, train_loss="training_pass"), spec.batch_size
      ),
    }
  )
  _serve({"epoch": run_epoch, "evaluate": run_evaluation, "profile": run_profile})


def limit_worker(settings: dict) -> None:
  """A limit's process: a contender's products, on its devices and XLA flags, batched over its
  members (``copies``) as its layout batches them, in a scan of ``steps`` (`loop_products`)."""
  from gelujax import host

  _add_xla_flags(settings)
  host.configure_cpu(settings["cpu_devices"], settings["copies"])
  import jax
  from jax.sharding import NamedSharding
  from jax.sharding import PartitionSpec as P

  from gelujax import engine
  from gelujax.engine import mesh as meshes

  copies, products = settings["copies"], settings["products"]
  mesh = engine.make_mesh(copies, jax.device_count())
  operands = jax.device_put(make_operands(products, copies), NamedSharding(mesh, P("members")))

  def run_copies(operands):
    one = functools.partial(loop_products, products, settings["steps"])
    return meshes.map_members(mesh, one, (operands,))

  program = jax.jit(run_copies)

  def run() -> None:
    program(operands).block_until_ready()

  run()  # Compiles.
  _reply(
    {
      "ready": True,
      "layout": f"{copies} cop{'ies' if copies > 1 else 'y'} of the products on a mesh of "
      f"{mesh.shape['members']} (members) x {mesh.shape['data']} (data) cpu devices",
      "xla_flags": os.environ.get("XLA_FLAGS", ""),
    }
  )
  _serve({"run": run})


def torch_worker(settings: dict) -> None:
  """The PyTorch loops' process: each loop with each thread count, one epoch per command."""
  import torch

  from gelujax import tasks

  spec = tasks.get(settings["task"]).replace(**settings["spec"])
  splits = spec.load_data(settings.get("data_dir"))
  limit = settings.get("examples") or None
  train = {k: v[:limit] for k, v in splits["train"].items()}
  shapes = settings["layer_shapes"]
  contenders = torch_contenders(
    spec, train, [s[1] for s in shapes[:-1]], shapes[0][0], shapes[-1][1], settings["threads"]
  )
  for run in contenders.values():  # Warm-up.
    run()
  _reply({"ready": True, "torch": torch.__version__})
  _serve(contenders)


def torch_limit_worker(settings: dict) -> None:
  """PyTorch's limit: the products of its step (`step_products` without the dropout-off pass)
  as ``torch.matmul`` calls on ``threads`` threads, ``steps`` times."""
  import torch

  torch.set_num_threads(settings["threads"])
  pairs = []
  for p, (lhs, rhs) in zip(
    settings["products"], make_operands(settings["products"], 1), strict=True
  ):
    if len(p["lhs"]) != 2 or len(p["rhs"]) != 2 or p["batch_size"] != 1:
      raise ValueError(f"PyTorch's limit runs 2-D products; got {p['lhs']} @ {p['rhs']}.")
    a, b = torch.from_numpy(lhs[0]), torch.from_numpy(rhs[0])
    # Transposed views where the product contracts another dimension: no copies, as autograd's.
    pairs.append(
      (a if p["contracting"][0] == [1] else a.T, b if p["contracting"][1] == [0] else b.T)
    )

  def run() -> None:
    for _ in range(settings["steps"]):
      for a, b in pairs:
        torch.matmul(a, b)

  run()
  _reply({"ready": True, "layout": f"{settings['threads']} thread(s)", "xla_flags": ""})
  _serve({"run": run})


WORKERS = {
  "train": train_worker,
  "limit": limit_worker,
  "torch": torch_worker,
  "torch_limit": torch_limit_worker,
}


def _add_xla_flags(settings: dict) -> None:
  if settings.get("xla_flags"):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {settings['xla_flags']}".strip()


def _serve(actions: dict[str, Callable[[], object]]) -> None:
  """Runs the action each stdin line names and replies its seconds, until ``quit``."""
  for line in sys.stdin:
    command = line.strip()
    if command == "quit":
      return
    start = time.perf_counter()
    actions[command]()
    _reply({"seconds": time.perf_counter() - start})


def _reply(message: dict) -> None:
  sys.stdout.write(json.dumps(message) + "\n")
  sys.stdout.flush()


class Worker:
  """A running worker process (``settings["kind"]`` names it in `WORKERS`), driven line by
  line; `wait_ready` reads what it built."""

  def __init__(self, settings: dict):
    self.process = subprocess.Popen(
      [sys.executable, __file__, "--worker", json.dumps(settings)],
      stdin=subprocess.PIPE,
      stdout=subprocess.PIPE,
      text=True,
      cwd=ROOT,
    )
    self.settings = settings
    self.info: dict = {}

  def wait_ready(self) -> None:
    self.info = self._read()

  def _read(self) -> dict:
    line = self.process.stdout.readline()
    if not line:
      raise RuntimeError(
        f"A benchmark worker ({self.settings['kind']}) exited with status {self.process.wait()}."
      )
    return json.loads(line)

  def time(self, command: str) -> float:
    self.process.stdin.write(command + "\n")
    self.process.stdin.flush()
    return self._read()["seconds"]

  def close(self) -> None:
    self.process.stdin.write("quit\n")
    self.process.stdin.flush()
    self.process.wait()


# ------------------------------------------------------------------------------ PyTorch


def torch_contenders(
  spec, train, features, num_inputs, num_outputs, thread_counts
) -> dict[str, Callable]:
  """The classic and the tuned PyTorch loops with each thread count, one epoch per call."""
  import torch
  import torch_reference

  batch = spec.batch_size
  loader = torch_reference.make_classic_loader(train["inputs"], train["targets"], batch)
  x_all = torch.from_numpy(train["inputs"].reshape(len(train["inputs"]), -1) / np.float32(255))
  y_all = torch.from_numpy(train["targets"].astype(np.int64))
  contenders = {}
  for threads in thread_counts:
    torch.set_num_threads(threads)
    classic = torch_reference.make_model_and_optimizer(
      num_inputs, features, num_outputs, spec.dropout
    )
    tuned = torch_reference.make_model_and_optimizer(
      num_inputs, features, num_outputs, spec.dropout
    )

    def run_classic(threads=threads, classic=classic):
      torch.set_num_threads(threads)
      torch_reference.train_epoch_classic(*classic, loader)

    def run_tuned(threads=threads, tuned=tuned):
      torch.set_num_threads(threads)
      torch_reference.train_epoch_tuned(*tuned, x_all, y_all, batch)

    contenders[torch_name(CLASSIC, threads)] = run_classic
    contenders[torch_name(TUNED, threads)] = run_tuned
  return contenders


# ---------------------------------------------------------------------------- measuring


def median_ratio(numerator: list[float], denominator: list[float], scale: float = 1.0) -> float:
  return float(np.median(scale * np.asarray(numerator) / np.asarray(denominator)))


def measure(args) -> dict:
  from gelujax import host

  cores = host.host_cores()
  m, ae_m = args.members, args.ae_members
  auto = {k: auto_settings(k) for k in (1, m, ae_m)}
  common = {"kind": "train", "examples": args.examples, "data_dir": args.data_dir}
  profiles = {} if args.quick else PROFILES
  trained = {}
  for name, settings in gelujax_contenders(m, ae_m, cores, auto, profiles, args.quick).items():
    trained[name] = Worker({**common, **settings})  # They compile side by side.
  for name, w in trained.items():
    w.wait_ready()
    print(f"ready: {name}", flush=True)

  # Each contender's limit, in a process of its own; contenders with the same products on the
  # same layout share one.
  limits: dict[str, Worker] = {}
  limit_of: dict[str, str] = {}
  by_key: dict[str, str] = {}
  for name, w in trained.items():
    settings = {
      "kind": "limit",
      "cpu_devices": w.settings["cpu_devices"],
      "xla_flags": w.settings.get("xla_flags", ""),
      "copies": w.info["copies"],
      "products": w.info["device_products"],
      "steps": LIMIT_STEPS,
    }
    key = json.dumps(settings, sort_keys=True)
    if key not in by_key:
      by_key[key] = f"products of: {name}"
      limits[by_key[key]] = Worker(settings)
    limit_of[name] = by_key[key]
  auto_one = one_member(auto_layout(auto[1], 1))
  reference = trained[auto_one].info
  threads = TORCH_THREADS[:1] if args.quick else TORCH_THREADS
  torch_worker_ = Worker(
    {
      "kind": "torch", **(QUICK_MNIST if args.quick else MNIST), "threads": list(threads),
      "layer_shapes": reference["layer_shapes"], "examples": args.examples,
      "data_dir": args.data_dir,
    }
  )  # fmt: skip
  torch_names = [torch_name(loop, t) for t in threads for loop in (CLASSIC, TUNED)]
  for t in threads:
    limit_name = f"products of: PyTorch, {t} thread{'s' * (t > 1)}"
    limits[limit_name] = Worker(
      {
        "kind": "torch_limit", "threads": t, "products": reference["training_pass_products"],
        "steps": LIMIT_STEPS, "copies": 1,
      }
    )  # fmt: skip
    for loop in (CLASSIC, TUNED):
      limit_of[torch_name(loop, t)] = limit_name
  for name, w in [*limits.items(), ("PyTorch", torch_worker_)]:
    w.wait_ready()
    print(f"ready: {name}", flush=True)

  contenders: dict[str, Callable[[], float]] = {}
  for name, w in trained.items():
    contenders[name] = functools.partial(w.time, "epoch")
  auto_grid = grid(m, auto_layout(auto[m], m))
  for size, name in ((1, auto_one), (m, auto_grid)):
    contenders[evaluation(size)] = functools.partial(trained[name].time, "evaluate")
  for name in torch_names:
    contenders[name] = functools.partial(torch_worker_.time, name)
  for name, w in limits.items():
    contenders[name] = functools.partial(w.time, "run")
  seconds = {name: [] for name in contenders}
  for r in range(args.rounds):
    for name, run in contenders.items():
      seconds[name].append(run())  # The worker's own timing, without the pipe.
      if name in torch_names or name.startswith("products of: PyTorch"):
        time.sleep(SETTLE_S)
    print(f"round {r + 1}/{args.rounds} done", flush=True)
  for w in [*trained.values(), *limits.values(), torch_worker_]:
    w.close()

  # Per step: FLOPs of each contender's real members, and of each limit's copies.
  def flops_per_step(name: str) -> int:
    if name in trained:
      info = trained[name].info
      return info["members"] * sum(p["flops"] for p in info["products"])
    return sum(p["flops"] for p in reference["training_pass_products"])

  def gflops(name: str) -> np.ndarray:
    steps = trained[name].info["steps_timed"] if name in trained else reference["steps_per_epoch"]
    return flops_per_step(name) * steps / np.asarray(seconds[name]) / 1e9

  limit_rows = []
  for name, w in limits.items():
    products = w.settings["products"]
    flops = w.settings["copies"] * sum(p["flops"] for p in products)
    rates = flops * LIMIT_STEPS / np.asarray(seconds[name]) / 1e9
    limit_rows.append(
      {
        "name": name,
        "seconds": seconds[name],
        "median_s": float(np.median(seconds[name])),
        "steps": LIMIT_STEPS,
        "copies": w.settings["copies"],
        "products": products,
        "flops_per_step": flops,
        "gflop_per_s": float(np.median(rates)),
        "gflop_per_s_by_round": rates.tolist(),
        "layout": w.info["layout"],
        "xla_flags": w.info["xla_flags"],
        "contenders": [c for c, lim in limit_of.items() if lim == name],
      }
    )
  limit_rates = {row["name"]: np.asarray(row["gflop_per_s_by_round"]) for row in limit_rows}

  rows = []
  for name, times in seconds.items():
    if name in limits:
      continue
    w = trained.get(name)
    if w is not None:  # Seconds per call -> seconds per epoch.
      times = [t * w.info["steps_per_epoch"] / w.info["steps_timed"] for t in times]
    row = {"name": name, "seconds": times, "median_s": float(np.median(times))}
    if w is not None:
      members = w.info["members"]
      row.update(
        task=w.info["task"], members=members, layout=w.info["layout"],
        xla_flags=w.info["xla_flags"], steps_per_epoch=w.info["steps_per_epoch"],
        flops_per_member_step=sum(p["flops"] for p in w.info["products"]),
      )  # fmt: skip
      if w.info["steps_timed"] != w.info["steps_per_epoch"]:
        row["note"] = f"per epoch, from {w.info['steps_timed']}-step segments"
      row["model_epochs_per_s"] = members / row["median_s"]
    elif name in torch_names:
      row.update(
        task="mnist", members=1, model_epochs_per_s=1 / row["median_s"],
        steps_per_epoch=reference["steps_per_epoch"],
        flops_per_member_step=flops_per_step(name),
      )  # fmt: skip
    if name in limit_of:
      rates = gflops(name)
      row["gflop_per_s"] = float(np.median(rates))
      row["limit"] = limit_of[name]
      row["limit_fraction"] = float(np.median(rates / limit_rates[limit_of[name]]))
    rows.append(row)

  def per_epoch(name):
    w = trained[name]
    return [t * w.info["steps_per_epoch"] / w.info["steps_timed"] for t in seconds[name]]

  auto_ae = autoencoder(ae_m, auto_layout(auto[ae_m], ae_m))
  fraction = {row["name"]: row["limit_fraction"] for row in rows if "limit_fraction" in row}
  targets = {
    f"grid / 1 member, model-epochs per second ({auto_grid} / {auto_one})": (
      median_ratio(per_epoch(auto_one), per_epoch(auto_grid), m), 2.0, "x",
    ),
    f"{torch_name(TUNED, 2)} / gelujax 1 member ({auto_one}), time per epoch": (
      median_ratio(seconds[torch_name(TUNED, 2)], per_epoch(auto_one)), 2.5, "x",
    ),
  }  # fmt: skip
  for name in (auto_grid, auto_one, auto_ae):
    targets[f"{name}: GFLOP/s / its own matrix products' GFLOP/s"] = (
      fraction[name], LIMIT_TARGET, "%",
    )  # fmt: skip
  ratios = {
    f"{torch_name(CLASSIC, 2)} / gelujax 1 member ({auto_one}), time per epoch": median_ratio(
      seconds[torch_name(CLASSIC, 2)], per_epoch(auto_one)
    ),
  }
  if not args.quick:
    best_one = min(
      (one_member(ONE_DEVICE), one_member(DATA_PARALLEL)), key=lambda n: np.median(seconds[n])
    )
    ratios[f"best 1-member layout ({best_one}) / {ONE_DEVICE}, time per epoch"] = median_ratio(
      per_epoch(best_one), per_epoch(one_member(ONE_DEVICE))
    )
    ratios[f"1 member, {ONE_DEVICE_YNN} / {ONE_DEVICE}, time per epoch"] = median_ratio(
      per_epoch(one_member(ONE_DEVICE_YNN)), per_epoch(one_member(ONE_DEVICE))
    )
    for layout in (ONE_DEVICE, PER_CORE):
      ratios[f"grid ({layout}) / 1 member ({ONE_DEVICE}), model-epochs per second"] = median_ratio(
        per_epoch(one_member(ONE_DEVICE)), per_epoch(grid(m, layout)), m
      )
  for variant in profiles:
    if variant == "as trained":
      continue
    for size in (1, m):
      who = "1 member" if size == 1 else f"{size} members"
      ratios[f"{variant} / as trained, {who} (auto), time per step"] = median_ratio(
        seconds[f"{who} (auto), {variant}"], seconds[f"{who} (auto), as trained"]
      )
  gflop = {row["name"]: row["gflop_per_s"] for row in rows if "gflop_per_s" in row}
  limit_gflop = {row["name"]: row["gflop_per_s"] for row in limit_rows}
  bounds = {
    key: {
      "name": name,
      "gflop_per_s": gflop[name],
      "limit": limit_of[name],
      "limit_gflop_per_s": limit_gflop[limit_of[name]],
      "fraction": fraction[name],
    }
    for key, name in (("grid", auto_grid), ("one_member", auto_one), ("autoencoder", auto_ae))
  }
  # The grid's GFLOP/s at 2.0x one member's model-epochs per second, against its own products.
  bounds["grid"]["target_gflop_per_s"] = 2.0 * gflop[auto_one]
  # An autoencoder epoch, and its products alone at their own rate.
  ae_epoch_flops = trained[auto_ae].info["steps_per_epoch"] * flops_per_step(auto_ae)
  bounds["autoencoder"].update(
    epoch_s=next(row["median_s"] for row in rows if row["name"] == auto_ae),
    products_epoch_s=ae_epoch_flops / bounds["autoencoder"]["limit_gflop_per_s"] / 1e9,
  )
  tasks = {
    trained[name].info["task"]: {
      key: trained[name].info[key]
      for key in ("examples_per_epoch", "steps_per_epoch", "batch_size", "members", "steps_timed")
    }
    for name in (auto_grid, auto_ae)
  }
  return {
    "tasks": tasks,
    "cores": cores,
    "auto": {str(k): v for k, v in auto.items()},
    "members": m,
    "limit_steps": LIMIT_STEPS,
    "profiles": list(profiles),
    "rows": rows,
    "limits": limit_rows,
    "bounds": bounds,
    "targets": {
      k: {"measured": v, "target": t, "unit": unit} for k, (v, t, unit) in targets.items()
    },
    "ratios": ratios,
  }


def describe_versions() -> dict[str, str]:
  """The versions of Python and the installed packages the benchmark runs (read from their
  metadata: importing torch here alone took 1.6 s)."""
  from importlib.metadata import version

  return {
    "python": platform.python_version(),
    **{name: version(name) for name in ("jax", "flax", "optax", "numpy", "torch")},
  }


def _format(value: float, unit: str) -> str:
  return f"{value:.0%}" if unit == "%" else f"{value:.2f}x"


def profile_summary(output_dir: Path) -> list[str]:
  """A paragraph on where each step's time goes, from `step_profile.py`'s report beside this
  one (none when it has not run)."""
  path = output_dir / "step_profile.json"
  if not path.is_file():
    return []
  profile = json.loads(path.read_text())
  parts = []
  for c in profile["contenders"]:
    span = c["span_ms"]
    shares = [(name, ms / span) for name, ms in c["categories"].items()]
    shares.append(("between thunks", (span - c["thunks_ms"]) / span))
    listed = ", ".join(f"{name} {share:.0%}" for name, share in sorted(shares, key=lambda x: -x[1]))
    parts.append(f"{c['name']} ({c['layout']}; {span:.2f} ms a step traced): {listed}")
  return [
    "",
    "Where a step's time goes, by XLA's own per-operation times in a profiler trace "
    f"(`{profile['command']}`, `step_profile.md`, {profile['date']}; a device's share of the "
    "traced span): " + "; ".join(parts) + ".",
  ]


def revisions_summary(output_dir: Path) -> list[str]:
  """A sentence on a real run's epoch against an earlier revision, from `revisions.py`'s report
  beside this one (none when it has not run)."""
  path = output_dir / "revisions.json"
  if not path.is_file():
    return []
  r = json.loads(path.read_text())
  (now, now_s), (before, before_s) = r["seconds_per_epoch"].items()
  return [
    "",
    f"A real run's epoch against an earlier revision (`{r['command']}`, `revisions.md`, "
    f"{r['date']}; `{r['train_command']}`): {float(np.median(now_s)):.2f} s in {now} against "
    f"{float(np.median(before_s)):.2f} s {before}, a same-round speed ratio of "
    f"{r['speed_ratio_now_over_before']:.3f}x (median of {r['rounds']} rounds).",
  ]


def write_report(result: dict, output_dir: Path) -> None:
  output_dir.mkdir(parents=True, exist_ok=True)
  (output_dir / "training.json").write_text(json.dumps(result, indent=2) + "\n")
  (mnist_name, mnist), (ae_name, ae) = result["tasks"].items()
  lines = [
    "# Training benchmark",
    "",
    f"Command: `{result['command']}`  ",
    f"Machine: {result['machine']}  ",
    "Versions: " + ", ".join(f"{k} {v}" for k, v in result["versions"].items()) + "  ",
    f"Date: {result['date']}; median of {result['rounds']} interleaved rounds after one warm-up "
    "call each (compilation excluded).",
    "",
    f"Task `{mnist_name}` on {MNIST['spec']['dataset']}: {mnist['examples_per_epoch']:,} examples "
    f"per epoch ({mnist['steps_per_epoch']} steps of {mnist['batch_size']}), dropout 0.5, "
    f"exact GELU unless named; the grid is {result['members']} members (learning rates x "
    f"seeds). The autoencoder grid: task `{ae_name}` on {AE['spec']['dataset']}, "
    f"{ae['examples_per_epoch']:,} examples per epoch ({ae['steps_per_epoch']} steps of "
    f"{ae['batch_size']}), exact GELU, no dropout, {ae['members']} members; it is timed for "
    f"{ae['steps_timed']} step{'s' * (ae['steps_timed'] != 1)} a round and its seconds per "
    "epoch scaled from them "
    f"(x {ae['steps_per_epoch']}/{ae['steps_timed']}). A gelujax epoch is the program's shuffle "
    "and compiled loop over the epoch's steps; evaluation is timed separately. "
    "`--cpu_devices=auto` picks: "
    + "; ".join(f"{k} member(s): {v}" for k, v in result["auto"].items())
    + ".",
    "",
    "GFLOP/s counts the matrix products of each step as the step's program computes them "
    "(`step_products`: every layer's forward product and its weight and input gradients, none "
    "for the data; for gelujax, the dropout-off pass that logs the training loss as the paper "
    "did, whose first layer XLA shares with the training pass), times the members trained. "
    "Each contender's *own matrix products' rate* is that of a process running only those "
    f"products, {result['limit_steps']} steps in a `lax.scan` on the contender's devices, XLA "
    "flags and batching over members (padding copies included), a step's products in whatever "
    "order XLA schedules them and each step after the one before; PyTorch's runs the same "
    "products with `torch.matmul` on its threads, one after another. "
    "Fractions are medians over rounds of the fraction measured within each round.",
    "",
    "## Targets",
    "",
    "Medians over rounds of the ratio measured within each round.",
    "",
    "| ratio | measured | target | met |",
    "|---|---:|---:|---|",
  ]
  for name, t in result["targets"].items():
    met = "met" if t["measured"] >= t["target"] else "not met"
    lines.append(
      f"| {name} | {_format(t['measured'], t['unit'])} | >= {_format(t['target'], t['unit'])} "
      f"| {met} |"
    )
  b = result["bounds"]
  need = b["grid"]["target_gflop_per_s"] / b["grid"]["limit_gflop_per_s"]
  beyond = "more than its products alone reach" if need > 1 else "within what its products reach"
  lines += [
    "",
    "What bounds them: "
    + "; ".join(
      f"{who} ({b[key]['name']}) computes {b[key]['gflop_per_s']:.1f} GFLOP/s, "
      f"{b[key]['fraction']:.0%} of the {b[key]['limit_gflop_per_s']:.1f} GFLOP/s its own "
      "matrix products reach"
      for who, key in (
        ("the grid", "grid"),
        ("one member", "one_member"),
        ("the autoencoder grid", "autoencoder"),
      )
    )
    + f". 2.0x one member's model-epochs per second needs the grid at "
    f"{b['grid']['target_gflop_per_s']:.1f} GFLOP/s, {need:.0%} of its products' rate "
    f"({beyond}). An autoencoder epoch takes {b['autoencoder']['epoch_s']:.1f} s, of which its "
    f"products alone would take {b['autoencoder']['products_epoch_s']:.1f} s. The rest of a "
    "step is what is not a product (the optimizer, activations, dropout, the loss)"
    + (
      "; the profiles below (`... / as trained`) change one thing each."
      if result["profiles"]
      else "."
    ),
    *profile_summary(output_dir),
    *revisions_summary(output_dir),
    "",
    "Other ratios (same-round medians):",
    "",
  ]
  lines += [f"- {k}: {v:.2f}x" for k, v in result["ratios"].items()]
  lines += [
    "",
    "## Times",
    "",
    "| contender | s per epoch (median) | all rounds (s) | model-epochs/s | GFLOP/s "
    "| of its own products' rate |",
    "|---|---:|---|---:|---:|---:|",
  ]
  for row in result["rows"]:
    cells = [
      row["name"] + (f" ({row['note']})" if "note" in row else ""),
      f"{row['median_s']:.3f}",
      ", ".join(f"{s:.3f}" for s in row["seconds"]),
      f"{row['model_epochs_per_s']:.3f}" if "model_epochs_per_s" in row else "",
      f"{row['gflop_per_s']:.1f}" if "gflop_per_s" in row else "",
      f"{row['limit_fraction']:.0%}" if "limit_fraction" in row else "",
    ]
    lines.append("| " + " | ".join(cells) + " |")
  lines += [
    "",
    "## Each contender's own matrix products",
    "",
    f"Seconds per call of {result['limit_steps']} steps of the products, in a process of their "
    "own.",
    "",
    "| products of | copies | s per call (median) | all rounds (s) | GFLOP/s |",
    "|---|---:|---:|---|---:|",
  ]
  for row in result["limits"]:
    cells = [
      row["name"].removeprefix("products of: ")
      + "".join(f"; {c}" for c in row["contenders"] if c not in row["name"]),
      str(row["copies"]),
      f"{row['median_s']:.3f}",
      ", ".join(f"{s:.3f}" for s in row["seconds"]),
      f"{row['gflop_per_s']:.1f}",
    ]
    lines.append("| " + " | ".join(cells) + " |")
  lines += ["", "The products of one copy's step:", ""]
  lines += [
    f"- {row['name'].removeprefix('products of: ')}: {describe_products(row['products'])}"
    for row in result["limits"]
  ]
  lines += ["", "Layouts:", ""]
  lines += [
    f"- {row['name']}: {row['layout']}; XLA_FLAGS `{row['xla_flags']}`"
    for row in [*result["rows"], *result["limits"]]
    if "layout" in row
  ]
  (output_dir / "training.md").write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds")
  parser.add_argument("--members", type=int, default=15, help="members of the MNIST grid")
  parser.add_argument(
    "--ae-members", type=int, default=6, help="members of the autoencoder grid (its task's: 6)"
  )
  parser.add_argument("--examples", type=int, default=0, help="training images (0: all)")
  parser.add_argument("--data-dir", default=None, help="passed to gelujax.data.load")
  parser.add_argument(
    "--quick",
    action="store_true",
    help="smoke run: tiny models, 320 images, grids of 2, 1 round, the automatic layouts only, "
    "PyTorch on 2 threads only",
  )
  parser.add_argument("--output-dir", type=Path, default=RESULTS_DIR)
  parser.add_argument(
    "--render",
    action="store_true",
    help="re-write training.md from the training.json in --output-dir (and step_profile.json)",
  )
  parser.add_argument("--worker", help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.worker:
    settings = json.loads(args.worker)
    WORKERS[settings["kind"]](settings)
    return
  if args.render:
    write_report(json.loads((args.output_dir / "training.json").read_text()), args.output_dir)
    print((args.output_dir / "training.md").read_text())
    return
  if args.rounds < 1 or args.members < 2 or args.ae_members < 2 or args.examples < 0:
    raise SystemExit(
      f"--rounds ({args.rounds}) must be positive, --members ({args.members}) and "
      f"--ae-members ({args.ae_members}) at least 2 and --examples ({args.examples}) "
      "non-negative."
    )
  if args.quick:  # Grids of one member per core: XLA compiles more members per device slowly.
    args.rounds, args.examples, args.members, args.ae_members = 1, 320, 2, 2
  from gelujax.host import describe_machine

  command = "python benchmarks/training.py" + (" " + " ".join(sys.argv[1:]) if argv is None else "")
  result = {
    "command": command.strip(),
    "machine": describe_machine(),
    "versions": describe_versions(),
    "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    "rounds": args.rounds,
    **measure(args),
  }
  write_report(result, args.output_dir)
  print((args.output_dir / "training.md").read_text())


if __name__ == "__main__":
  main()
