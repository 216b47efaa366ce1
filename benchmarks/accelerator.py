"""The gelujax engine on whatever device JAX has (a GPU, a TPU, or this CPU): speed of the
paper's accelerator-sized tasks, and the same training steps on the device and on the CPU.

**Speed.** Each configuration is a task, a grid size and a compute dtype (float32, bfloat16):
the ``mnist`` grid of 15 members (3 learning rates x 5 seeds) and one member, the ``mnist_ae``
grid (its paper grid: 2 learning rates x 3 seeds), ``cifar10`` one member and a grid of 3 (its
3 learning rates), ``cifar100``'s Wide ResNet 40-4 one member; the MNIST tasks on Fashion-MNIST
with the exact GELU (the classifier at dropout 0.5, as `training.py` times it), the CIFAR tasks
as specified but with the exact GELU. Each is the trainer's own program
(`gelujax.engine.make_program`: the task's model, optimizer and objective; its
`Program.train_segment` is the compiled `lax.scan` over steps the trainer runs), on the mesh
`gelujax.engine.make_mesh` picks. Per configuration:

- compile seconds of the training segment (``lower`` and ``compile`` of the program, apart;
  the persistent compilation cache is off), and of the initialization (compile and run);
- seconds per step: ``--repeats`` segments of ``--steps`` steps, after one warm-up segment
  (the median); seconds per epoch are extrapolated from it to the task's real steps per epoch,
  and model-epochs per second are members x epochs / s;
- FLOP/s: the matrix products of one member's step (dot products and convolutions, listed from
  the step's own jaxpr as `training.step_products` lists the dots: a product the step computes
  twice counted once), times the members, per second. XLA's cost analysis of the compiled
  segment is recorded beside it (it counts a loop's body once, and every operation, not only
  the products);
- the fraction of the device's own rate for those products: exactly the step's products (the
  same primitives, shapes, dtypes and parameters), batched over the members as the engine's
  ``vmap`` batches them, ``--steps`` steps in a jitted `lax.scan` on the same mesh, each step
  waiting for the one before (`training.py`'s "limit", run on this device), timed in turn with
  the program's segments so that other load on the machine falls on both alike.

**Data.** Real data where the machine has it (Fashion-MNIST: ``--data_dir`` with its IDX files,
else Debian's copy that `gelujax.data` finds), otherwise random arrays of the task's shapes after
its host-side preprocessing (labelled "random data (timing only)"). Nothing is downloaded
(``GELUJAX_OFFLINE=1`` is set). The step's speed does not depend on the values.

**Correctness.** `CHECK_TASK` (``tiny_mnist`` with dropout 0.5 and the exact GELU, 2 members)
trains ``--check_steps`` steps on the device and on ``jax.devices('cpu')[0]``, one segment a
step, from the same initial draw, batches and dropout masks; per-step losses and final
parameters are compared at ``jax_default_matmul_precision='highest'`` (the pass/fail check: at
the default, XLA may compute float32 products on an NVIDIA GPU in TF32, each operand rounded to
10 mantissa bits, a difference of the device's arithmetic rather than of the program) and at the
default precision (reported: what training runs). `CHECK_TOLERANCE` says how close they must be,
and why.

**Budget.** ``--budget_s`` (from the start of the process) skips the configurations that would
not finish in time, recorded as skipped; the JSON is written after every configuration, so a
killed run keeps what finished.

Run: python benchmarks/accelerator.py                (every configuration; --budget_s 330 by
                                                      default, for a 6-minute slot on a GPU)
     python benchmarks/accelerator.py --tasks mnist,mnist_ae --steps 20 --name accelerator_cpu
     python benchmarks/accelerator.py --quick        (tiny tasks, a few steps: a smoke run)
     python benchmarks/accelerator.py --render       (the .md again from its .json)
"""

from __future__ import annotations

import time

START = time.perf_counter()  # The budget counts from here: imports and JAX's start included.

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import traceback  # noqa: E402
from collections import Counter  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # The device run has the checkout, not an installed gelujax.
sys.path.insert(0, str(Path(__file__).resolve().parent))
RESULTS_DIR = Path(__file__).resolve().parent / "results"

import reports  # noqa: E402

RANDOM_DATA = "random data (timing only)"
DTYPES = ("float32", "bfloat16")


@dataclasses.dataclass(frozen=True)
class Config:
  """One timed configuration, less its dtype: ``task`` with ``spec`` overrides, its grid
  (``learning_rates`` x ``seeds``), and ``examples`` training examples (0: all)."""

  task: str
  spec: dict
  learning_rates: tuple[float, ...]
  seeds: int
  examples: int = 0

  @property
  def members(self) -> int:
    return len(self.learning_rates) * self.seeds

  def name(self, dtype: str) -> str:
    model = f" ({self.spec['model']})" if "model" in self.spec else ""
    count = f"{self.members} member{'s' * (self.members > 1)}"
    return f"{self.task}{model}, {count}, {dtype}"


_MNIST = {"dataset": "fashion_mnist", "dropout": 0.5, "activation": "gelu"}
_AE = {"dataset": "fashion_mnist", "activation": "gelu"}
_CIFAR = {"activation": "gelu"}
CONFIGS = (
  Config("mnist", _MNIST, (1e-3, 1e-4, 1e-5), 5),
  Config("mnist", _MNIST, (1e-3,), 1),
  Config("mnist_ae", _AE, (1e-3, 1e-4), 3),
  Config("cifar10", _CIFAR, (1e-3,), 1),
  Config("cifar10", _CIFAR, (1e-3, 1e-4, 1e-5), 1),
  Config("cifar100", _CIFAR, (0.1,), 1),
)
# --quick: tiny versions on a few hundred examples, each in the dtypes named. (No convolution
# net: XLA:CPU compiles one for a quarter of a minute; tests/test_benchmarks.py counts and runs
# the products of one instead.)
QUICK_CONFIGS = (
  (Config("tiny_mnist", _MNIST, (1e-3,), 2, examples=320), DTYPES),
  (Config("mnist_ae", {**_AE, "model": "autoencoder_tiny"}, (1e-3,), 1, examples=320), DTYPES[:1]),
)
# Seconds a configuration is assumed to need on an accelerator before one of its task has run
# (then that one's time is used): a configuration is skipped when less than this is left.
NEEDS_S = {"mnist": 15, "mnist_ae": 15, "cifar10": 40, "cifar100": 90}

# The correctness check: a task, its grid, its examples.
CHECK_TASK = Config("tiny_mnist", {**_MNIST}, (1e-3,), 2, examples=640)
# The check passes when, at 'highest' precision, every per-step loss is within loss_rtol of the
# CPU's (relative) and the final parameters' difference is within param_rel_l2 of how far
# training moved them (L2 norms over all parameters, the CPU's move from the initial draw). Why
# these: the two runs are one float32 program on two machines whose kernels sum in other orders
# and have their own exp/log/erf, each operation a few ulp apart. `CALIBRATION` holds what this
# check's 20 steps measured on a 2-core AMD EPYC: with XLA:CPU's own dot kernels against
# YNNPACK's (XLA_FLAGS=--xla_cpu_experimental_ynn_fusion_type=individual_dot: another summation
# order), and with every float32 dot of the model's forward pass given operands rounded to TF32's
# 10 mantissa bits (`lax.reduce_precision`), a mild fault. The tolerances lie ~90x and ~170x
# above the first, and 2x and 37x below the second; a real fault (bfloat16, another formula,
# other random bits) lies further. A maximum over parameters would not do: one gradient that
# cancels to rounding noise can flip its sign, and Adam's first step moves that parameter by
# the learning rate either way.
CHECK_TOLERANCE = {"loss_rtol": 1e-5, "param_rel_l2": 1e-4}
CALIBRATION = {
  "another summation order (YNNPACK dots)": {"loss_max_rel": 1.1e-7, "param_rel_l2": 6.0e-7},
  "TF32-rounded forward products": {"loss_max_rel": 1.9e-5, "param_rel_l2": 3.7e-3},
}


# ----------------------------------------------------------------------------- the products


def step_kernels(config, batch_size: int) -> list[dict[str, Any]]:
  """The matrix products (dot products and convolutions) of one member's training step on a
  batch of ``batch_size`` (`gelujax.engine.step.train_step` with ``config`` traced to a jaxpr),
  in program order, a product the step computes twice on the same values listed once (as XLA's
  common-subexpression elimination computes it once); for a dense model, the list of
  `training.step_products`.

  Returns:
    One dict per product: ``kind`` (``dot`` or ``conv``), ``lhs``, ``rhs``, ``out`` (shapes),
    ``dtype`` (the operands'), ``out_dtype``, ``shape`` (a line for the report), ``flops``
    (2 x multiply-adds: ``2 m k n`` for a dot, `conv_multiply_adds` for a convolution), and
    ``eqn``, the jaxpr equation (to run it again; the JSON keeps only the summary).

  Raises:
    ValueError: a product inside a loop or a branch of the step, which this count does not
      cover.
  """
  from training import number_values, step_jaxpr  # beside this file: light imports only

  closed = step_jaxpr(config, batch_size)
  products: list[dict[str, Any]] = []
  inputs = [("input", i) for i in range(len(closed.jaxpr.invars))]
  number_values(closed.jaxpr, inputs, {}, _count_products(products))
  return products


_KINDS = {"dot_general": "dot", "conv_general_dilated": "conv"}


def _count_products(products: list):
  """`training.number_values`' visitor: each new dot product or convolution appended; one inside
  a loop or a branch refused."""
  from training import holds

  def visit(eqn, inner, new):
    name = eqn.primitive.name
    if any(holds(j, tuple(_KINDS)) for j in inner):
      raise ValueError(f"The step holds a {name!r} with a product inside; not counted here.")
    if name in _KINDS and new:
      products.append(_describe(eqn))

  return visit


def _describe(eqn) -> dict[str, Any]:
  lhs, rhs = (tuple(v.aval.shape) for v in eqn.invars)
  out = tuple(eqn.outvars[0].aval.shape)
  if eqn.primitive.name == "dot_general":
    (lhs_contract, _), (lhs_batch, _) = eqn.params["dimension_numbers"]
    batch = math.prod(lhs[d] for d in lhs_batch)
    k = math.prod(lhs[d] for d in lhs_contract)
    flops = 2 * math.prod(out) * k
    shape = f"{f'{batch} x ' if batch > 1 else ''}[{math.prod(lhs) // (batch * k)}x{k}]@[{k}x"
    shape += f"{math.prod(rhs) // (batch * k)}]"
  else:
    flops = 2 * conv_multiply_adds(lhs, rhs, out, eqn.params)
    shape = f"conv {list(lhs)}*{list(rhs)}->{list(out)}"
  return {
    "kind": _KINDS[eqn.primitive.name],
    "lhs": list(lhs),
    "rhs": list(rhs),
    "out": list(out),
    "dtype": str(eqn.invars[0].aval.dtype),
    "out_dtype": str(eqn.outvars[0].aval.dtype),
    "shape": shape,
    "flops": flops,
    "eqn": eqn,
  }


def conv_multiply_adds(lhs: tuple, rhs: tuple, out: tuple, params: dict) -> int:
  """The multiply-adds of a ``conv_general_dilated`` whose two factors are both data: a window
  tap that falls on padding or between dilated input elements (the input gradient of a strided
  convolution) is not counted, as XLA's cost analysis does not count it.

  Each output element (batch, feature) sums over the kernel's input features (of its group)
  and its valid taps; the taps of each spatial dimension are counted apart."""
  lhs_spec, rhs_spec, out_spec = params["dimension_numbers"]
  spatial = len(lhs_spec) - 2
  taps = 1
  for d in range(spatial):
    size, window, out_size = lhs[lhs_spec[2 + d]], rhs[rhs_spec[2 + d]], out[out_spec[2 + d]]
    stride, (low, _) = params["window_strides"][d], params["padding"][d]
    lhs_dilation = (params["lhs_dilation"] or (1,) * spatial)[d]
    rhs_dilation = (params["rhs_dilation"] or (1,) * spatial)[d]
    last = (size - 1) * lhs_dilation  # The dilated input spans positions 0 .. last.
    valid = 0
    for o in range(out_size):
      for k in range(window):
        at = o * stride + k * rhs_dilation - low
        valid += 0 <= at <= last and at % lhs_dilation == 0
    taps *= valid
  return out[out_spec[0]] * out[out_spec[1]] * rhs[rhs_spec[1]] * taps


# Shapes of products a report names for a step; the rest are summed.
SHOWN_SHAPES = 8


def describe_products(products: list[dict]) -> str:
  """``N products (d dots, c convolutions), X MFLOP: count x shape, ...``, the shapes that
  take the most FLOPs first."""
  counts = Counter(p["kind"] for p in products)
  shapes = Counter((p["shape"], p["flops"], p["dtype"]) for p in products)
  ranked = sorted(shapes.items(), key=lambda s: -s[0][1] * s[1])  # By their FLOPs in all.
  parts = [f"{n} x {shape} {dtype}" for (shape, _, dtype), n in ranked[:SHOWN_SHAPES]]
  if len(ranked) > SHOWN_SHAPES:
    rest = sum(flops * n for (_, flops, _), n in ranked[SHOWN_SHAPES:])
    parts.append(f"{len(ranked) - SHOWN_SHAPES} other shapes ({rest / 1e6:,.1f} MFLOP)")
  flops = sum(p["flops"] for p in products)
  return (
    f"{len(products)} products ({counts['dot']} dots, {counts['conv']} convolutions), "
    f"{flops / 1e6:,.1f} MFLOP: " + ", ".join(parts)
  )


def products_program(products: list[dict], mesh, copies: int, steps: int):
  """A jitted program running ``products`` of ``copies`` copies (on ``mesh``'s ``members`` axis,
  each device's copies vmapped together, as the engine's members) ``steps`` times in a
  `lax.scan`, and its operands (standard normal, made on the devices). A number from the
  previous step's outputs is added to the smaller operand of every product (an elementwise
  pass, small beside the product) so that no product is hoisted out of the loop.

  Returns:
    ``(run, operands)``: ``run(operands)`` returns a scalar per copy.
  """
  import jax
  import jax.numpy as jnp
  from jax.sharding import NamedSharding
  from jax.sharding import PartitionSpec as P

  from gelujax.engine import mesh as meshes

  eqns = [p["eqn"] for p in products]

  def one_step(operands, carried):
    total = jnp.zeros_like(carried)
    for eqn, (lhs, rhs) in zip(eqns, operands, strict=True):
      if lhs.size <= rhs.size:
        lhs = lhs + carried.astype(lhs.dtype)
      else:
        rhs = rhs + carried.astype(rhs.dtype)
      out = eqn.primitive.bind(lhs, rhs, **eqn.params)
      total = total + out[(0,) * out.ndim].astype(jnp.float32)
    return total * jnp.float32(1e-30)  # Keeps the operands' values as they are.

  def one_copy(operands):
    def scan_step(carried, _):
      return one_step(operands, carried), None

    first = operands[0][0]  # The start, of the operands' type (varying over members).
    start = first[(0,) * first.ndim].astype(jnp.float32) * 0
    carried, _ = jax.lax.scan(scan_step, start, length=steps)
    return carried

  def run(operands):
    return meshes.map_members(mesh, one_copy, (operands,))

  def make():
    # Values of unit variance from an integer hash of each element's index: as good as random
    # for timing, and cheap to compile (threefry's rounds took XLA:CPU seconds per operand).
    operands = []
    for i, eqn in enumerate(eqns):
      pair = []
      for j, v in enumerate(eqn.invars):
        shape = (copies, *v.aval.shape)
        h = jax.lax.iota(jnp.uint32, math.prod(shape)) + jnp.uint32(
          0x9E3779B9 * (2 * i + j + 1) % 2**32
        )
        h = (h ^ (h >> 16)) * jnp.uint32(0x85EBCA6B)
        h = (h ^ (h >> 13)) * jnp.uint32(0xC2B2AE35)
        uniform = (h ^ (h >> 16)).astype(jnp.float32) * jnp.float32(2.0**-32) - 0.5
        pair.append((uniform * jnp.float32(math.sqrt(12))).reshape(shape).astype(v.aval.dtype))
      operands.append(tuple(pair))
    return operands

  operands = jax.jit(make, out_shardings=NamedSharding(mesh, P("members")))()
  return jax.jit(run), operands


# ------------------------------------------------------------------------------------ data


# A data set's training file: examples and example shape ([N, *shape] uint8, as gelujax.data
# reads it), and its classes.
_RAW = {
  "mnist": (60_000, (28, 28, 1), 10),
  "fashion_mnist": (60_000, (28, 28, 1), 10),
  "cifar10": (50_000, (32, 32, 3), 10),
  "cifar100": (50_000, (32, 32, 3), 100),
}


def random_train(spec, examples: int) -> dict[str, np.ndarray]:
  """A training split of random values with the shapes and dtypes the task's data have after its
  host-side preprocessing: uint8 images, float32 after ``zca`` or ``pixel_mean`` (values of
  about unit size), twice the examples after ``flip_double``; the validation split held out
  unless ``train_on_all``."""
  if spec.dataset not in _RAW:
    raise ValueError(f"No random stand-in for data set {spec.dataset!r}.")
  size, shape, classes = _RAW[spec.dataset]
  options = spec.data_options
  if not options.get("train_on_all", False):
    size -= options.get("validation_size", 5000)
  if "flip_double" in spec.preprocessing:
    size *= 2
  if examples:
    size = min(size, examples)
  rng = np.random.default_rng(0)
  inputs = rng.integers(0, 256, (size, *shape), dtype=np.uint8)
  if {"zca", "pixel_mean"} & set(spec.preprocessing):
    inputs = (inputs.astype(np.float32) - np.float32(127.5)) / np.float32(64)
  return {"inputs": inputs, "targets": rng.integers(0, classes, size, dtype=np.int32)}


class DataCache:
  """Each task's training split, read once per data set and options: real where the machine
  has it (``data_dir``, else what `gelujax.data.load` finds offline), else random."""

  def __init__(self, data_dir: str | None):
    self.data_dir = data_dir
    self.loaded: dict[str, tuple[Any, str]] = {}

  def train(self, spec, examples: int) -> tuple[Any, dict[str, np.ndarray], str]:
    """``(the parts of spec on its data, training split, where it came from)``: the parts'
    training split is the first ``examples`` of the data's (all for 0)."""
    from gelujax import data, tasks

    key = json.dumps([spec.dataset, spec.data_options, spec.preprocessing], sort_keys=True)
    if key not in self.loaded:
      try:
        splits = spec.load_data(self.data_dir)
        source = splits.info.get("source", spec.dataset)
      except (ValueError, ImportError) as e:  # Not on this machine (or no TFDS to look in).
        first = str(e).split(". ")[0]
        print(f"  {spec.dataset}: not found ({first[:200]}); random data", flush=True)
        splits = data.Splits({"train": random_train(spec, 0)}, {"num_classes": 0})
        source = RANDOM_DATA
      self.loaded[key] = (splits, source)
    splits, source = self.loaded[key]
    train = {k: v[: examples or None] for k, v in splits["train"].items()}
    if spec.dataset != "fashion_mnist" and source != RANDOM_DATA:
      source = f"{spec.dataset}: {source}"
    elif source != RANDOM_DATA:
      source = f"Fashion-MNIST, {source}"
    return tasks.build(spec, data.Splits({"train": train}, splits.info)), train, source


# ------------------------------------------------------------------------------ measuring


def median(values: list[float]) -> float:
  return float(np.median(values))


def cost_flops(compiled) -> float | None:
  """XLA's cost analysis of a compiled program: its ``flops`` (None where there is none)."""
  try:
    analysis = compiled.cost_analysis()
  except Exception:  # Some backends have none.
    return None
  if isinstance(analysis, list | tuple):
    analysis = analysis[0] if analysis else {}
  flops = (analysis or {}).get("flops")
  return float(flops) if flops is not None else None


def measure_config(config: Config, dtype: str, cache: DataCache, args) -> dict[str, Any]:
  """Times one configuration (see the module docstring); returns its row. The program's
  segments and its products' runs alternate, so that whatever else loads the machine meanwhile
  falls on both alike."""
  program = TimedProgram(config, dtype, cache, args.steps)
  row = program.row
  products = None
  if args.limit and program.device_products:
    try:  # Without them the program's times stand.
      products = TimedProducts(
        program.device_products, program.mesh, program.copies, row["steps_timed"]
      )
    except Exception as e:
      traceback.print_exc()
      row["limit_error"] = f"{type(e).__name__}: {str(e)[:500]}"
  seconds, limit_seconds = [], []
  for _ in range(args.repeats):
    seconds.append(program.run())
    if products is not None:
      limit_seconds.append(products.run())
  steps = row["steps_timed"]
  row.update(seconds=seconds, step_s=median(seconds) / steps, diverged_members=program.diverged())
  row["epoch_s"] = row["step_s"] * row["steps_per_epoch"]
  row["model_epochs_per_s"] = row["members"] / row["epoch_s"]
  if row["flops_per_member_step"]:
    row["flop_per_s"] = row["members"] * row["flops_per_member_step"] / row["step_s"]
  if products is not None:
    rate = products.flops * steps / median(limit_seconds)
    row["limit"] = {
      "copies": program.copies,
      "steps": steps,
      "compile_s": products.compile_s,
      "seconds": limit_seconds,
      "flop_per_s": rate,
    }
    row["limit_fraction"] = row["flop_per_s"] / rate
  return row


class TimedProgram:
  """The trainer's program of a configuration, compiled and warmed up: `run` times a segment.

  ``row`` holds what is known before the timing; ``device_products`` are the products of one
  member's step on a device's share of the batch, and ``copies`` how many such copies the
  mesh computes (padding included), as training.py counts them."""

  def __init__(self, config: Config, dtype: str, cache: DataCache, steps: int):
    import jax

    from gelujax import engine, tasks
    from gelujax.members import Members

    spec = tasks.get(config.task).replace(**config.spec, dtype=dtype)
    started = time.perf_counter()
    parts, train, source = cache.train(spec, config.examples)
    data_s = time.perf_counter() - started
    members = Members(config.learning_rates, tuple(range(config.seeds)))
    num = len(members)
    self.mesh = mesh = engine.make_mesh(num)
    self.program = program = engine.make_program(parts, mesh, num)
    steps = min(steps, program.steps_per_epoch)
    self.seeds, self.lrs = program.put_members(members)
    self.data = program.put_data(train)

    started = time.perf_counter()
    self.state = jax.block_until_ready(program.init(self.seeds, self.lrs))
    init_s = time.perf_counter() - started
    self.batches = jax.block_until_ready(program.shuffle(self.seeds, np.int32(1)))
    self.epoch = 0
    started = time.perf_counter()
    lowered = program.train_segment.lower(
      self.state, self.data, self.batches, self.seeds, self.lrs, epoch=np.int32(1),
      first_step=np.int32(0), num_steps=steps,
    )  # fmt: skip
    lower_s = time.perf_counter() - started
    started = time.perf_counter()
    self.compiled = lowered.compile()
    compile_s = time.perf_counter() - started
    print(f"  compiled in {lower_s:.1f} + {compile_s:.1f} s", flush=True)
    warmup_s = self.run()

    data_devices = mesh.shape["data"]
    self.copies = program.padded_members * data_devices
    products, self.device_products, flops, error = [], [], None, None
    try:  # Without a count of the products the times stand.
      products = self.device_products = step_kernels(program.config, spec.batch_size)
      if data_devices > 1:
        self.device_products = step_kernels(program.config, spec.batch_size // data_devices)
      flops = sum(p["flops"] for p in products)
    except Exception as e:
      traceback.print_exc()
      error = f"{type(e).__name__}: {str(e)[:500]}"
    xla_flops = cost_flops(self.compiled)
    counted = 1 if program.strategy == "map" else program.padded_members
    self.row = {
      "status": "done",
      "data": source,
      "members": num,
      "examples_per_epoch": program.steps_per_epoch * spec.batch_size,
      "batch_size": spec.batch_size,
      "steps_per_epoch": program.steps_per_epoch,
      "layout": engine.describe_layout(num, mesh, program.strategy),
      "strategy": program.strategy,
      "steps_timed": steps,
      "data_s": data_s,
      "init_s": init_s,
      "lower_s": lower_s,
      "compile_s": compile_s,
      "warmup_s": warmup_s,
      "flops_per_member_step": flops,
      "xla_cost_flops": xla_flops,
      # XLA counts a loop's body once: the members looped over (`map`) count as one.
      "xla_cost_over_step_products": (
        xla_flops / (counted * flops) if xla_flops and flops else None
      ),
      "products": describe_products(products) if flops else f"not counted ({error})",
    }

  def run(self) -> float:
    """Seconds of one segment (a new epoch's keys, the same batches)."""
    import jax

    self.epoch += 1
    started = time.perf_counter()
    self.state, loss = self.compiled(
      self.state, self.data, self.batches, self.seeds, self.lrs, epoch=np.int32(self.epoch),
      first_step=np.int32(0),
    )  # fmt: skip
    jax.block_until_ready((self.state, loss))
    return time.perf_counter() - started

  def diverged(self) -> int:
    return int((self.program.diverged_steps(self.state) >= 0).sum())


class TimedProducts:
  """`products_program` of ``copies`` copies, compiled and warmed up: `run` times a call."""

  def __init__(self, products: list[dict], mesh, copies: int, steps: int):
    self.program, self.operands = products_program(products, mesh, copies, steps)
    self.flops = copies * sum(p["flops"] for p in products)
    self.compile_s = self.run()  # The first call compiles.

  def run(self) -> float:
    import jax

    started = time.perf_counter()
    jax.block_until_ready(self.program(self.operands))
    return time.perf_counter() - started


def check_correctness(cache: DataCache, steps: int) -> dict[str, Any]:
  """`CHECK_TASK` for ``steps`` steps on the default device and on the CPU, at 'highest' and at
  the default matmul precision (see `CHECK_TOLERANCE`)."""
  import jax

  device = jax.devices()[0]
  cpu = jax.devices("cpu")[0]
  result: dict[str, Any] = {
    "task": CHECK_TASK.task,
    "spec": CHECK_TASK.spec,
    "members": CHECK_TASK.members,
    "steps": steps,
    "device": f"{device.device_kind} ({device.platform})",
    "tolerance": CHECK_TOLERANCE,
    "runs": {},
  }
  # On a CPU the default precision is float32's own: the second run would repeat the first.
  for precision in ("highest", None) if device.platform != "cpu" else ("highest",):
    started = time.perf_counter()
    with jax.default_matmul_precision(precision):
      on_device = train_steps(cache, [device], steps)
      on_cpu = train_steps(cache, [cpu], steps)
    compared = compare(on_device, on_cpu)
    compared["seconds"] = time.perf_counter() - started
    result["runs"][precision or "default"] = compared
    result["data"] = on_cpu["data"]
  highest = result["runs"]["highest"]
  result["passed"] = bool(
    highest["finite"]
    and highest["loss_max_rel"] <= CHECK_TOLERANCE["loss_rtol"]
    and highest["param_rel_l2"] <= CHECK_TOLERANCE["param_rel_l2"]
  )
  return result


def train_steps(cache: DataCache, devices: list, steps: int) -> dict[str, Any]:
  """`CHECK_TASK` on ``devices`` for ``steps`` steps, a segment a step: its initial and final
  parameters and each step's losses, on the host."""
  import jax
  from jax.sharding import Mesh

  from gelujax import engine, tasks
  from gelujax.members import Members

  spec = tasks.get(CHECK_TASK.task).replace(**CHECK_TASK.spec)
  parts, train, source = cache.train(spec, CHECK_TASK.examples)
  members = Members(CHECK_TASK.learning_rates, tuple(range(CHECK_TASK.seeds)))
  mesh = Mesh(
    np.array(devices).reshape(len(devices), 1),
    ("members", "data"),
    axis_types=(jax.sharding.AxisType.Auto,) * 2,
  )
  program = engine.make_program(parts, mesh, len(members))
  seeds_M, lrs_M = program.put_members(members)
  data = program.put_data(train)
  state = program.init(seeds_M, lrs_M)
  initial = jax.device_get(program.unpad(state).params)
  losses = []
  batches, epoch = None, 0
  for i in range(steps):
    if i % program.steps_per_epoch == 0:
      epoch += 1
      batches = program.shuffle(seeds_M, np.int32(epoch))
    first = np.int32(i % program.steps_per_epoch)
    state, loss = program.train_segment(
      state, data, batches, seeds_M, lrs_M, epoch=np.int32(epoch), first_step=first, num_steps=1
    )
    losses.append(np.asarray(jax.device_get(loss))[: program.num_members, 0])
  final = jax.device_get(program.unpad(state).params)
  return {"initial": initial, "final": final, "losses": np.stack(losses), "data": source}


def compare(on_device: dict, on_cpu: dict) -> dict[str, Any]:
  """How far the device's losses and parameters lie from the CPU's."""
  import jax

  def leaves(tree) -> list[np.ndarray]:
    return [np.asarray(x, np.float64) for x in jax.tree.leaves(tree)]

  def distance(a: list[np.ndarray], b: list[np.ndarray]) -> float:
    return math.sqrt(sum(float(np.sum((x - y) ** 2)) for x, y in zip(a, b, strict=True)))

  loss_d, loss_c = on_device["losses"].astype(np.float64), on_cpu["losses"].astype(np.float64)
  final_d, final_c = leaves(on_device["final"]), leaves(on_cpu["final"])
  initial_d, initial_c = leaves(on_device["initial"]), leaves(on_cpu["initial"])
  movement = distance(final_c, initial_c)
  return {
    "finite": bool(np.isfinite(loss_d).all() and all(np.isfinite(x).all() for x in final_d)),
    # Both draw the initial parameters from the same keys: equal up to the rounding of the
    # draws' float arithmetic on each machine.
    "initial_param_max_abs": max(
      float(np.max(np.abs(x - y))) for x, y in zip(initial_d, initial_c, strict=True)
    ),
    "loss_max_abs": float(np.max(np.abs(loss_d - loss_c))),
    "loss_max_rel": float(np.max(np.abs(loss_d - loss_c) / np.abs(loss_c))),
    "param_max_abs": max(
      float(np.max(np.abs(x - y))) for x, y in zip(final_d, final_c, strict=True)
    ),
    "param_distance": distance(final_d, final_c),
    "param_movement": movement,
    "param_rel_l2": distance(final_d, final_c) / movement,
    "parameters": int(sum(x.size for x in final_c)),
    "losses_device": loss_d.tolist(),
    "losses_cpu": loss_c.tolist(),
  }


# ---------------------------------------------------------------------------------- report


def describe_device() -> dict[str, Any]:
  import jax

  from gelujax.host import describe_machine

  device = jax.devices()[0]
  cpu = platform.processor() or platform.machine()
  if Path("/proc/cpuinfo").exists():
    names = [
      line.split(":", 1)[1].strip()
      for line in Path("/proc/cpuinfo").read_text().splitlines()
      if line.startswith("model name")
    ]
    cpu = names[0] if names else cpu
  versions = {"python": platform.python_version()}
  from importlib.metadata import PackageNotFoundError, version

  for name in ("jax", "jaxlib", "flax", "optax", "numpy"):
    try:
      versions[name] = version(name)
    except PackageNotFoundError:
      versions[name] = "?"
  return {
    "machine": describe_machine(),
    "platform": device.platform,
    "device_kind": device.device_kind,
    "device_count": jax.device_count(),
    "cpu": f"{cpu}, {os.cpu_count()} cores",
    "versions": versions,
    "matmul_precision": str(getattr(jax.config, "jax_default_matmul_precision", "?")),
    "xla_flags": os.environ.get("XLA_FLAGS", ""),
  }


def _num(value: float) -> str:
  """Three significant digits, without exponents for the sizes met here."""
  if value >= 100:
    return f"{value:,.0f}"
  return f"{value:.2f}" if value >= 1 else f"{value:.3g}"


def write_report(result: dict, out: Path, name: str) -> None:
  out.mkdir(parents=True, exist_ok=True)
  (out / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
  (out / f"{name}.md").write_text(render(result))


def render(result: dict) -> str:
  d = result["device"]
  s = result["settings"]
  note = f"; {result['elapsed_s']:.0f} s in all" if "elapsed_s" in result else ""
  lines = [
    *reports.header("Accelerator benchmark", result, note),
    f"Device: {d['device_count']} x {d['device_kind']} ({d['platform']}); CPU: {d['cpu']}; "
    + ", ".join(f"{k} {v}" for k, v in d["versions"].items())
    + f"; default matmul precision: {d['matmul_precision']}; XLA_FLAGS `{d['xla_flags']}`"
    + (
      f"; CPU devices: {s['cpu_devices']} (`--cpu_devices`)"
      if s.get("cpu_devices", "none") != "none"
      else ""
    )
    + ".",
    "",
    "Each configuration is the trainer's program (`gelujax.engine.make_program`: the task's "
    "model, optimizer and objective on the mesh `make_mesh` picks), its training segment (a "
    f"compiled `lax.scan` over steps) compiled for {s['steps']} steps (or the epoch's, where "
    f"fewer) and timed for {s['repeats']} segments after a warm-up one (the median); the "
    "persistent compilation cache is off, so compile times are a first run's. **Seconds per "
    "epoch are extrapolated** from the timed steps to the task's real steps per epoch (the "
    "trainer runs the same step in a segment of the whole epoch); model-epochs per second are "
    "members x epochs / s. **GFLOP/s counts the step's matrix products**: the dot products and "
    "convolutions of one member's step as its jaxpr holds them (forward, input and weight "
    "gradients, the dropout-off pass that logs the training loss; a product computed twice "
    "counted once; 2 x multiply-adds, a convolution's taps on padding or between dilated "
    "inputs not counted), times the members. *Of the products' own rate* divides that by the "
    "rate at which this device runs exactly those products (the same primitives, shapes, "
    "dtypes and parameters, the members' copies batched as the engine batches them) in a "
    f"jitted {s['steps']}-step `lax.scan`, each step after the one before, timed in turn with "
    "the program's segments (other load on the machine falls on both alike). *XLA cost / "
    "products*: XLA's cost analysis of the compiled segment (every operation, a loop's body "
    "counted once) over one step's products of all members (of one member where the program "
    "loops over its members, `map`: that loop's body is counted once too).",
    "",
  ]
  load = result.get("load_average")
  if load and "end" in load:
    lines += [
      f"Load average (1 min) at the start and at the end: {load['start']:.2f}, "
      f"{load['end']:.2f} ({d['cpu']}; the end counts this benchmark's own threads, the start "
      "what ran in the minute before it).",
      "",
    ]
  if result.get("check_error"):
    lines += [f"The correctness check failed to run: {result['check_error']}", ""]
  lines += render_check(result.get("check"))
  lines += [
    "## Speed",
    "",
    "| configuration | data | compile s (lower + compile; init) | ms/step | s/epoch "
    "(steps/epoch; extrapolated) | model-epochs/s | GFLOP/s | of the products' own rate "
    "(their GFLOP/s) | XLA cost / products |",
    "|---|---|---:|---:|---:|---:|---:|---:|---:|",
  ]
  notes = []
  for row in result["configs"]:
    if row["status"] != "done":
      reason = f" ({row['reason']})" if row.get("reason") else ""
      notes.append(f"- {row['name']}: {row['status']}{reason}")
      continue
    limit = row.get("limit")
    ratio = row.get("xla_cost_over_step_products")
    cells = [
      row["name"],
      "random" if row["data"] == RANDOM_DATA else "real",
      f"{row['lower_s']:.1f} + {row['compile_s']:.1f}; {row['init_s']:.1f}",
      _num(1e3 * row["step_s"]),
      f"{_num(row['epoch_s'])} ({row['steps_per_epoch']})",
      _num(row["model_epochs_per_s"]),
      _num(row["flop_per_s"] / 1e9) if "flop_per_s" in row else "",
      f"{row['limit_fraction']:.0%} ({_num(limit['flop_per_s'] / 1e9)})" if limit else "",
      "" if ratio is None else f"{ratio:.2f}",
    ]
    lines.append("| " + " | ".join(cells) + " |")
  if notes:
    lines += ["", "Not timed:", "", *notes]
  done = [row for row in result["configs"] if row["status"] == "done"]
  if done:
    lines += ["", "Data (real: read as the trainer reads it; random: timing only):", ""]
    lines += [f"- {source}" for source in sorted({row["data"] for row in done})]
    lines += ["", "Layouts, timed segments and one member's products:", ""]
    for row in done:
      limit = row.get("limit")
      lines.append(
        f"- {row['name']}: {row['layout']}; {row['examples_per_epoch']:,} examples an epoch "
        f"in batches of {row['batch_size']}; segments of {row['steps_timed']} steps: "
        + ", ".join(f"{t:.4f}" for t in row["seconds"])
        + " s"
        + (
          f" (products alone, {limit['copies']} cop{'ies' if limit['copies'] > 1 else 'y'}: "
          + ", ".join(f"{t:.4f}" for t in limit["seconds"])
          + " s)"
          if limit
          else ""
        )
        + f"; {row['products']}"
        + (f"; the products' own rate failed: {row['limit_error']}" if "limit_error" in row else "")
      )
  return "\n".join(lines) + "\n"


def render_check(check: dict | None) -> list[str]:
  if check is None:
    return []
  tol = check["tolerance"]
  same = check["device"].endswith("(cpu)")
  lines = [
    "## Correctness: the device against the CPU",
    "",
    f"`{check['task']}` ({', '.join(f'{k}={v}' for k, v in check['spec'].items())}), "
    f"{check['members']} members, {check['steps']} steps "
    + ("on the CPU twice" if same else f"on {check['device']} and on the CPU")
    + " (one segment a step, the same initial keys, batches and dropout bits), data: "
    f"{check['data']}. **{'Passed' if check['passed'] else 'FAILED'}** at 'highest' matmul "
    f"precision: every step's loss within {tol['loss_rtol']:g} of the CPU's (relative), and the "
    f"final parameters' distance from the CPU's (L2, over all of them) within "
    f"{tol['param_rel_l2']:g} of the distance training moved them. "
    + (
      "Here the device is the CPU itself: the check runs the program twice, which must agree "
      "bitwise. "
      if same
      else "At 'highest' both compute float32 products in float32; at the default precision "
      "XLA may compute them on an NVIDIA GPU in TF32 (operands rounded to 10 mantissa bits), "
      "so the default row shows what training's own precision changes, not a fault. "
    )
    + "Why these tolerances: one float32 program on two machines differs in the order of its "
    "sums and in its exp/log/erf kernels, a few ulp an operation. Calibration (this check on a "
    "2-core AMD EPYC): "
    + "; ".join(
      f"{name}: loss {c['loss_max_rel']:.1e}, parameters {c['param_rel_l2']:.1e}"
      for name, c in CALIBRATION.items()
    )
    + " (the first is what two correct machines differ by; the second, a mild fault, must "
    "fail).",
    "",
    "| precision | max loss diff (relative) | parameters' distance / their move (L2) | max param "
    "diff | initial params' max diff | s |",
    "|---|---:|---:|---:|---:|---:|",
  ]
  for name, run in check["runs"].items():
    lines.append(
      f"| {name} | {run['loss_max_abs']:.2e} ({run['loss_max_rel']:.2e}) | "
      f"{run['param_rel_l2']:.2e} ({run['param_distance']:.2e} / {run['param_movement']:.2e}) "
      f"| {run['param_max_abs']:.2e} | {run['initial_param_max_abs']:.1e} | "
      f"{run['seconds']:.1f} |"
    )
  return [*lines, ""]


# ------------------------------------------------------------------------------------ main


def accelerator_plugins() -> list[str]:
  """The accelerator plugins installed for JAX (``jax_plugins.*``, e.g. ``xla_cuda13``, and
  ``libtpu``): on such a machine the CPU only checks, and keeps JAX's own settings."""
  import importlib.util
  import pkgutil

  found = []
  if importlib.util.find_spec("jax_plugins") is not None:
    import jax_plugins

    found = [m.name for m in pkgutil.iter_modules(jax_plugins.__path__)]
  if importlib.util.find_spec("libtpu") is not None:
    found.append("libtpu")
  return found


def plan(args) -> list[tuple[Config, str]]:
  """The configurations to time, with their dtypes, in order."""
  configs = QUICK_CONFIGS if args.quick else [(c, DTYPES) for c in CONFIGS]
  known = sorted({c.task for c, _ in configs})
  tasks = args.tasks.split(",") if args.tasks else known
  dtypes = args.dtypes.split(",")
  unknown, bad = [t for t in tasks if t not in known], [d for d in dtypes if d not in DTYPES]
  if unknown or bad:
    raise SystemExit(
      f"--tasks takes {', '.join(known)} (got {', '.join(unknown) or 'those'}); --dtypes takes "
      f"{', '.join(DTYPES)} (got {', '.join(bad) or 'those'})."
    )
  return [(c, d) for c, ds in configs if c.task in tasks for d in dtypes if d in ds]


def main(argv: list[str] | None = None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--tasks", default="", help="comma-separated tasks (default: all)")
  parser.add_argument("--dtypes", default=",".join(DTYPES), help="float32,bfloat16")
  parser.add_argument("--steps", type=int, default=50, help="steps of a timed segment")
  parser.add_argument("--repeats", type=int, default=3, help="timed segments per configuration")
  parser.add_argument(
    "--check_steps",
    "--check-steps",
    type=int,
    default=20,
    help="steps of the correctness check (0: none)",
  )
  parser.add_argument(
    "--budget_s",
    "--budget-s",
    type=float,
    default=330.0,
    help="seconds from the start that configurations may use",
  )
  parser.add_argument(
    "--no_limit",
    "--no-limit",
    dest="limit",
    action="store_false",
    help="skip the products' own rate",
  )
  parser.add_argument(
    "--data_dir",
    "--data-dir",
    default=None,
    help="a folder with Fashion-MNIST's IDX files (gzipped or not)",
  )
  parser.add_argument(
    "--cpu_devices",
    "--cpu-devices",
    default="auto",
    help="CPU devices to split the host into (gelujax.host.configure_cpu); 'none': JAX's "
    "own settings; 'auto': 1 without an accelerator plugin, else 'none'",
  )
  parser.add_argument("--quick", action="store_true", help="tiny tasks, 5 steps: a smoke run")
  parser.add_argument("--out", "--output-dir", dest="out", type=Path, default=RESULTS_DIR)
  parser.add_argument("--name", default="accelerator", help="the report's file name, less .json")
  parser.add_argument("--render", action="store_true", help="rewrite the .md from the .json")
  args = parser.parse_args(argv)
  if args.render:
    result = json.loads((args.out / f"{args.name}.json").read_text())
    (args.out / f"{args.name}.md").write_text(render(result))
    print(render(result))
    return
  if args.quick:
    args.steps, args.repeats, args.check_steps = min(args.steps, 5), min(args.repeats, 2), 10
  if args.steps < 1 or args.repeats < 1 or args.check_steps < 0:
    raise SystemExit("--steps and --repeats must be at least 1, --check_steps at least 0.")
  todo = plan(args)
  os.environ.setdefault("GELUJAX_OFFLINE", "1")  # Never a download: timing or no network.
  platforms = os.environ.get("JAX_PLATFORMS", "")
  if platforms and "cpu" not in platforms.split(","):  # The check needs the CPU beside it.
    os.environ["JAX_PLATFORMS"] = f"{platforms},cpu"

  from gelujax import host

  plugins = accelerator_plugins()
  if args.cpu_devices == "auto":
    args.cpu_devices = "none" if plugins else "1"
  if args.cpu_devices != "none":
    host.configure_cpu(args.cpu_devices, 1)
  import jax

  jax.config.update("jax_enable_compilation_cache", False)  # Compile times are measured.
  command = "python benchmarks/accelerator.py" + (
    " " + " ".join(sys.argv[1:]) if argv is None else " " + " ".join(argv)
  )
  device = describe_device()
  result = {
    **reports.stamp(command),
    "device": device,
    "load_average": {"start": os.getloadavg()[0]},
    "settings": {
      "cpu_devices": args.cpu_devices,
      "accelerator_plugins": plugins,
      "steps": args.steps,
      "repeats": args.repeats,
      "budget_s": args.budget_s,
      "limit": args.limit,
      "quick": args.quick,
    },
    "check": None,
    "configs": [
      {"name": c.name(d), "task": c.task, "dtype": d, "members": c.members, "status": "not run"}
      for c, d in todo
    ],
  }
  print(
    f"{device['machine']}; timing on {device['device_kind']} ({device['platform']})", flush=True
  )

  def save() -> None:
    result["elapsed_s"] = time.perf_counter() - START
    result["load_average"]["end"] = os.getloadavg()[0]
    write_report(result, args.out, args.name)

  cache = DataCache(args.data_dir)
  if args.check_steps:
    print(f"correctness check: {args.check_steps} steps of {CHECK_TASK.task}", flush=True)
    try:
      result["check"] = check_correctness(cache, args.check_steps)
      runs = result["check"]["runs"]
      print(
        f"  {'passed' if result['check']['passed'] else 'FAILED'}: "
        + "; ".join(
          f"{p}: loss {r['loss_max_rel']:.1e} (relative), parameters {r['param_rel_l2']:.1e} of "
          "their move"
          for p, r in runs.items()
        ),
        flush=True,
      )
    except Exception as e:  # Recorded; the timings still run.
      traceback.print_exc()
      result["check"] = None
      result["check_error"] = f"{type(e).__name__}: {e}"
    save()

  spent: dict[str, float] = {}  # Seconds the last configuration of each task took.
  for i, (config, dtype) in enumerate(todo):
    row = result["configs"][i]
    elapsed = time.perf_counter() - START
    need = spent.get(config.task, NEEDS_S.get(config.task, 10))
    if elapsed + need > args.budget_s:
      row.update(
        status="skipped",
        reason=f"{elapsed:.0f} s spent of --budget_s {args.budget_s:g}; it needs ~{need:.0f} s",
      )
      print(f"skipped: {row['name']} ({row['reason']})", flush=True)
      save()
      continue
    print(f"[{elapsed:.0f} s] {row['name']}", flush=True)
    started = time.perf_counter()
    row["load_average"] = os.getloadavg()[0]
    try:
      row.update(measure_config(config, dtype, cache, args))
      print(
        f"  {_num(1e3 * row['step_s'])} ms/step, {_num(row['epoch_s'])} s/epoch "
        f"(extrapolated)"
        + (f", {_num(row['flop_per_s'] / 1e9)} GFLOP/s" if "flop_per_s" in row else "")
        + (f", {row['limit_fraction']:.0%} of its products' rate" if "limit" in row else ""),
        flush=True,
      )
    except Exception as e:  # One configuration failing (memory, say) leaves the others.
      traceback.print_exc()
      row.update(status="failed", reason=f"{type(e).__name__}: {str(e)[:500]}")
    row["seconds_in_all"] = time.perf_counter() - started
    spent[config.task] = row["seconds_in_all"]
    gc.collect()
    save()
  save()
  print(render(result), flush=True)
  if result["check"] is not None and not result["check"]["passed"]:
    raise SystemExit("The device's training steps differ from the CPU's beyond the tolerance.")


if __name__ == "__main__":
  main()
