"""Every jitted program of the engine lowers for the accelerators it is written for.

No GPU or TPU is attached here, but JAX lowers a program for a platform it does not have:
`jax.export` with ``platforms=["cuda"]`` (or ``["tpu"]``) traces and lowers it as that platform
would, and refuses any custom call without a stable lowering there, such as a host callback
(``jax.pure_callback``, ``jax.debug.print``). So a program that exports for both holds no
CPU-only operation and no callback to the host in its hot path. What lowering does not show
(compiling, running, speed, numerics on those chips) is not verified here; see docs/training.md.

The programs are those a run trains with, made by `gelujax.engine.make_program` from each task's
real data loaders, models and optimizers (on fixture files in the real formats), for one member
(a 1 x 4 mesh: each batch split over 4 devices, the gradients all-reduced) and for a grid (6
members on a 4 x 1 mesh, padded to 8; vmapped, and looped, on each device): `init`, `shuffle`,
`train_segment` (the loop over steps, which holds `gelujax.engine.train_step`) and `evaluate`.
They are lowered in a subprocess with 4 CPU devices (this process has one), which prints what
each export found.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

# End to end (commands, processes, whole runs): the full suite runs it, the fast tier not.
pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[1]
PLATFORMS = ("cuda", "tpu")
# One task of each model family and hot path, each program kind lowered once per family (an
# export's time is that of tracing and lowering the whole program, so a second task of the same
# family costs as much as the first and shows nothing new): the MLP with dropout from the hash
# bits (mnist) and from threefry bits (only the training program differs: mnist_threefry), the
# window MLP over word embeddings (twitter_pos), batches of whole utterances (timit: the training
# program gathers each batch's frames from groups), the convolutional net with input noise, crops,
# flips and BatchNorm (cifar10, without its ZCA whitening, which is NumPy before any program), the
# ViT (vit_fashion_mnist), the tagger's attention over padded tweets with word dropout and the
# per-token loss (transformer_twitter_pos), and the decoder's causal attention, tied head,
# next-character loss and nanoGPT's AdamW (char_lm). Left out as the same family: mnist_ae (the
# MLP, a reconstruction loss), cifar100 (the wide ResNet: the convolutions, BatchNorm and input
# augmentation of cifar10, with residual sums) and vit_cifar10 (the ViT on other images).
TASKS = {
  "mnist": "mnist(dropout=0.5, data_options={'validation_size': 32})",
  "mnist_threefry": (
    "mnist(dropout=0.5, dropout_bits='threefry', data_options={'validation_size': 32})"
  ),
  "twitter_pos": "twitter_pos",
  "timit": "timit",
  "cifar10": "cifar10(preprocessing=(), data_options={'validation_size': 5})",
  "vit_fashion_mnist": "vit_fashion_mnist(data_options={'validation_size': 32})",
  "transformer_twitter_pos": "transformer_twitter_pos",
  "char_lm": "char_lm(model='char_gpt_tiny', data_options={'block_size': 16}, steps_per_epoch=4)",
}
LAYOUTS = {"one member": 1, "grid": 6, "looped grid": 6}
# Each layout's member strategy (`gelujax.engine.mesh.STRATEGIES`): the looped grid is the grid
# with its members one after another on each device, as the rule trains a convolutional model
# on a GPU (this CPU's rule vmaps every model).
STRATEGY = {"one member": "auto", "grid": "vmap", "looped grid": "map"}
# The programs of each layout: a grid runs all four; one member's layout differs from a grid's
# in how a batch is split (over 4 devices, the gradients and metrics summed across them), which
# init and shuffle do not do; a looped grid differs in training and evaluation only (its init
# is vmapped too), and is lowered for the convolutional net (the rule's case) and the MLP.
PROGRAMS = {
  "grid": ("init", "shuffle", "train_segment", "evaluate"),
  "one member": ("train_segment", "evaluate"),
  "looped grid": ("train_segment", "evaluate"),
}
LOOPED = ("mnist", "cifar10")


def programs(task_name: str) -> dict[str, tuple[str, ...]]:
  """The programs exported for ``task_name``, by layout."""
  if task_name == "mnist_threefry":  # the bits differ in the training program alone
    return {"grid": ("train_segment",), "one member": ("train_segment",)}
  return {k: v for k, v in PROGRAMS.items() if k != "looped grid" or task_name in LOOPED}


def write_fixtures(folder: Path) -> dict[str, Path]:
  """Each data set's fixture files in the real formats; the data_dir of each task."""
  from tests.test_reproduce_paper_tasks import (
    write_cifar10,
    write_timit,
    write_twitter_pos,
  )
  from tests.tiny_task import write_mnist_files

  dirs = {}
  for name, write in (
    ("twitter_pos", write_twitter_pos),
    ("timit", write_timit),
    ("cifar10", write_cifar10),
  ):
    dirs[name] = folder / name
    dirs[name].mkdir()
    write(dirs[name])
  write_mnist_files(str(folder / "mnist"), num_train=256, num_test=64)
  for name in ("mnist", "mnist_threefry", "vit_fashion_mnist"):
    dirs[name] = folder / "mnist"
  dirs["transformer_twitter_pos"] = dirs["twitter_pos"]
  from tests.test_char_lm import write_text

  dirs["char_lm"] = folder / "text"
  write_text(dirs["char_lm"])
  return dirs


def custom_calls(exported) -> list[str]:
  """The custom-call targets of an exported module."""
  import re

  return sorted(set(re.findall(r"custom_call @(\w+)", exported.mlir_module())))


def export_programs(task_name: str, data_dir: Path) -> dict[str, dict[str, object]]:
  """Exports every program of a task's run for each layout and platform.

  Returns:
    ``"layout/program/platform"`` -> ``{"error": the export's error or None, "custom_calls":
    the targets of its custom calls, "devices": how many devices it spans}``.
  """
  from gelujax import tasks

  task = tasks.get(TASKS[task_name])
  splits = task.load_data(str(data_dir))
  found = {}
  for layout, names in programs(task_name).items():
    calls = program_calls(task, splits, LAYOUTS[layout], STRATEGY[layout])
    for name in names:
      jitted, args, kwargs = calls[name]
      # One export lowered for every platform (traced once) does what one export a platform
      # does, in half the time; where it fails, one a platform says which platform failed.
      for platforms in (PLATFORMS, *[(p,) for p in PLATFORMS]):
        try:
          exported = jax.export.export(jitted, platforms=platforms)(*args, **kwargs)
        except Exception as e:  # Reported, and asserted on by the tests.
          result = {"error": f"{type(e).__name__}: {e}"}
        else:
          result = {
            "error": None,
            "custom_calls": custom_calls(exported),
            "devices": exported.nr_devices,
          }
        for platform in platforms:
          found[f"{layout}/{name}/{platform}"] = result
        if result["error"] is None and platforms == PLATFORMS:
          break
  return found


def program_calls(task, splits, num_members: int, strategy: str = "auto") -> dict[str, tuple]:
  """Each jitted program of a run of ``num_members`` (with the member ``strategy``) and abstract
  arguments laid out as a run lays them out: ``name -> (jitted, args, kwargs)``."""
  from jax.sharding import NamedSharding
  from jax.sharding import PartitionSpec as P

  from gelujax import engine, tasks

  mesh = engine.make_mesh(num_members)
  program = engine.make_program(tasks.build(task, splits), mesh, num_members, strategy)
  assert strategy == "auto" or program.strategy == strategy
  config, padded = program.config, program.padded_members
  over_members, replicated = NamedSharding(mesh, P("members")), NamedSharding(mesh, P())

  def stacked(s):
    return jax.ShapeDtypeStruct((padded, *s.shape[1:]), s.dtype, sharding=over_members)

  seeds = jax.ShapeDtypeStruct((padded,), jnp.int32, sharding=over_members)
  lrs = jax.ShapeDtypeStruct((padded,), jnp.float32, sharding=over_members)
  state = jax.tree.map(stacked, program.abstract_state())
  data = {
    k: jax.ShapeDtypeStruct(v.shape, v.dtype, sharding=replicated)
    for k, v in splits["train"].items()
    if k != "groups"
  }
  batches = jax.ShapeDtypeStruct(
    (config.steps_per_epoch, padded, task.batch_size),
    jnp.int32,
    sharding=NamedSharding(mesh, P(None, "members", "data")),
  )
  epoch = np.int32(1)
  return {
    "init": (program.init, (seeds, lrs), {}),
    "shuffle": (program.shuffle, (seeds, epoch), {}),
    "train_segment": (
      program.train_segment,
      (state, data, batches, seeds, lrs),
      {"epoch": epoch, "first_step": np.int32(0), "num_steps": config.steps_per_epoch},
    ),
    "evaluate": (program.evaluate, (state, program.put_eval_split(splits["test"])), {}),
  }


@pytest.fixture(scope="module")
def exports(tmp_path_factory) -> dict[str, dict[str, dict[str, object]]]:
  """What each export found, from one subprocess with 4 CPU devices."""
  out = tmp_path_factory.mktemp("export") / "exports.json"
  result = subprocess.run(
    [sys.executable, __file__, str(out)],
    env=dict(
      os.environ,
      PYTHONPATH=str(ROOT),
      JAX_PLATFORMS="cpu",
      XLA_FLAGS="--xla_force_host_platform_device_count=4",
    ),
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=900,
  )
  assert result.returncode == 0, result.stderr[-3000:]
  return json.loads(out.read_text())


@pytest.mark.slow
@pytest.mark.parametrize("task", TASKS)
def test_every_program_exports_for_cuda_and_tpu(exports, task):
  found = exports[task]
  expected = {f"{l}/{p}/{x}" for l, ps in programs(task).items() for p in ps for x in PLATFORMS}  # noqa: E741
  assert set(found) == expected
  failed = {case: f["error"] for case, f in found.items() if f["error"]}
  assert not failed
  for case, f in found.items():
    assert not [c for c in f["custom_calls"] if "callback" in c], case  # no host callback
    assert f["devices"] == 4, case  # every program spans the 4 devices of its mesh


@pytest.mark.parametrize("platform", PLATFORMS)
def test_an_export_fails_on_a_host_callback(platform):
  """The check has teeth: a step that calls back to the host does not export."""

  def step(x):
    x = jax.pure_callback(np.sin, jax.ShapeDtypeStruct(x.shape, x.dtype), x)
    return x * 2

  # A host callback has no lowering for a platform without a host runtime for it here.
  with pytest.raises(ValueError, match=f"different from the lowering platform {platform}"):
    jax.export.export(jax.jit(step), platforms=[platform])(jax.ShapeDtypeStruct((3,), jnp.float32))
  # Nor for every platform at once (the export tried first), which then tries each alone.
  with pytest.raises(NotImplementedError, match="multi-platform lowering for python_callback"):
    jax.export.export(jax.jit(step), platforms=PLATFORMS)(jax.ShapeDtypeStruct((3,), jnp.float32))
  # The same step without the callback exports.
  exported = jax.export.export(jax.jit(lambda x: jnp.sin(x) * 2), platforms=[platform])(
    jax.ShapeDtypeStruct((3,), jnp.float32)
  )
  assert exported.platforms == (platform,)


def main(out: str) -> None:
  import tempfile

  with tempfile.TemporaryDirectory() as folder:
    dirs = write_fixtures(Path(folder))
    found = {task: export_programs(task, dirs[task]) for task in TASKS}
  Path(out).write_text(json.dumps(found, indent=1))


if __name__ == "__main__":
  main(sys.argv[1])
