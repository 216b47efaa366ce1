"""Training speed of the paper's MNIST classifier: layouts of a grid, one member, and PyTorch.

The ``mnist`` task (784 -> 8x[128, GELU, dropout 0.5] -> 10, Adam, batch 128) on Fashion-MNIST's
55,000 training images. Each gelujax contender is the trainer's public program
(`gelujax.engine.make_program`) for one layout, timed for whole epochs (the on-device shuffle
and the compiled `lax.scan` over the epoch's steps; evaluation is a contender of its own) after a
warm-up epoch that compiles:

- one member: on one CPU device whose kernels use every core, the same with XLA's default of
  handing dots to YNNPACK (which gelujax turns off), and on one device per core with the batch
  split over them (data parallelism);
- the 15-member grid (3 learning rates x 5 seeds): on one device, vmapped; on one device per core
  (the mesh's ``members`` axis) with each device's members vmapped together, or trained one at a
  time through each segment (``member_chunk=1``);
- where a step's time goes, at the layout ``--cpu_devices=auto`` picks (a fifth of an epoch
  each, one thing changed): threefry dropout bits instead of the hash, ReLU instead of GELU, no
  dropout-off pass for the logged training loss, no dropout.

A gelujax contender runs in a process of its own (the CPU device count is fixed when JAX starts),
which waits between timings, so every contender has the machine to itself while it runs. The
PyTorch loops (classic: a ``DataLoader`` over a Python list; tuned: preloaded tensors indexed by a
permutation) and a large matmul run in this process. Contenders run interleaved in rounds (each
once per round) so that load from elsewhere hits them alike; the report gives medians over
rounds, and each ratio is the median of the ratios measured within a round.

Run: python benchmarks/training.py          (Fashion-MNIST, 3 rounds; 15 to 30 min on 2 cores)
     python benchmarks/training.py --quick  (tiny_mnist on 320 images, 1 round: a smoke run)
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

RESULTS_DIR = Path(__file__).resolve().parent / "results"
CLASSIC, TUNED = "PyTorch classic (DataLoader over a list)", "PyTorch tuned (indexed tensors)"
TORCH_THREADS = (2, 1)
# The profiles time 1/PROFILE_FRACTION of an epoch each and change one thing each.
PROFILE_FRACTION = 5
PROFILES = {
  "as trained": {},
  "threefry dropout bits": {"dropout_bits": "threefry"},
  "relu": {"activation": "relu"},
  "no dropout-off loss pass": {"train_loss": "training_pass"},
  "no dropout": {"dropout": 0.0},
}
QUICK_PROFILES = ("as trained", "relu")


def one_member(layout: str) -> str:
  return f"gelujax, 1 member, {layout}"


def grid(members: int, layout: str) -> str:
  return f"gelujax, {members} members, {layout}"


ONE_DEVICE = "1 device (kernels on every core)"
ONE_DEVICE_YNN = "1 device (kernels on every core), XLA's default YNNPACK dots"
# XLA:CPU's default for the flag that gelujax.host.configure_cpu empties.
YNN_DEFAULT = "--xla_cpu_experimental_ynn_fusion_type=individual_dot"
DATA_PARALLEL = "1 device per core, batch split over them (data)"
PER_CORE = "1 device per core (members axis)"
PER_CORE_ONE_AT_A_TIME = "1 device per core (members axis), one member at a time"


def gelujax_contenders(
  members: int, cores: int, auto: dict, profiles: dict[str, dict]
) -> dict[str, dict]:
  """Name -> worker settings of every gelujax contender."""
  contenders = {
    one_member(ONE_DEVICE): {"members": 1, "cpu_devices": 1},
    one_member(ONE_DEVICE_YNN): {"members": 1, "cpu_devices": 1, "xla_flags": YNN_DEFAULT},
    one_member(DATA_PARALLEL): {"members": 1, "cpu_devices": cores, "members_axis": 1},
    grid(members, ONE_DEVICE): {"members": members, "cpu_devices": 1},
    grid(members, PER_CORE): {"members": members, "cpu_devices": cores},
    grid(members, PER_CORE_ONE_AT_A_TIME): {
      "members": members, "cpu_devices": cores, "member_chunk": 1,
    },
  }  # fmt: skip
  for variant, options in profiles.items():
    for m in (1, members):
      contenders[f"{'1 member' if m == 1 else f'{m} members'} (auto), {variant}"] = {
        **auto[m], "members": m, "fraction": PROFILE_FRACTION, **options,
      }  # fmt: skip
  return contenders


def auto_settings(members: int) -> dict:
  """What train.py's ``--cpu_devices=auto`` picks for a grid of ``members``."""
  from gelujax import host

  return {"cpu_devices": host.choose_cpu_devices(members, host.host_cores())}


# ------------------------------------------------------------------------------- the workers


def worker(settings: dict) -> None:
  """A gelujax contender's process: builds its program, then times what stdin asks for."""
  from gelujax import host

  if settings.get("xla_flags"):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {settings['xla_flags']}".strip()
  host.configure_cpu(settings["cpu_devices"], settings["members"])
  import jax

  from gelujax import engine, tasks
  from gelujax.members import Members

  spec = tasks.get(settings["task"]).replace(
    dataset="fashion_mnist",
    dropout=settings.get("dropout", 0.5),
    activation=settings.get("activation", "gelu"),
    dropout_bits=settings.get("dropout_bits", "hash"),
  )
  splits = spec.load_data(settings.get("data_dir"))
  limit = settings.get("examples") or None
  train = {k: v[:limit] for k, v in splits["train"].items()}
  evals = {
    name: {k: v[: limit and limit // 4] for k, v in splits[name].items()}
    for name in ("validation", "test")
  }
  lrs = spec.learning_rates[: max(1, min(3, settings["members"]))]
  members = Members(lrs, range(-(-settings["members"] // len(lrs))))
  num = len(members)
  mesh = engine.make_mesh(num, settings.get("members_axis"))
  program = engine.make_program(
    spec, mesh, train, num,
    train_loss=settings.get("train_loss", "dropout_off"),
    member_chunk=settings.get("member_chunk", 0),
  )  # fmt: skip
  seeds_M, lrs_M = program.put_members(members)
  data = program.put_data(train)
  state = program.init(seeds_M, lrs_M)
  steps = max(1, program.steps_per_epoch // settings.get("fraction", 1))
  splits_on_device = [program.put_eval_split(split) for split in evals.values()]
  epoch = 0

  def run_epoch() -> None:
    nonlocal state, epoch
    epoch += 1
    batches = program.shuffle(seeds_M, np.int32(epoch))
    state, loss = program.train_segment(
      state, data, batches, seeds_M, lrs_M, np.int32(epoch), np.int32(0), num_steps=steps
    )
    loss.block_until_ready()

  def run_evaluation() -> None:
    jax.block_until_ready([program.evaluate(state, split) for split in splits_on_device])

  run_epoch()  # Compiles.
  run_evaluation()
  params = jax.tree.map(lambda x: x[0], program.unpad(state).params)
  kernels = [params[name]["kernel"] for name in sorted(params, key=lambda n: int(n.split("_")[1]))]
  _reply(
    {
      "ready": True,
      "members": num,
      "layout": engine.describe_layout(num, mesh),
      "devices": jax.device_count(),
      "xla_flags": os.environ.get("XLA_FLAGS", ""),
      "steps_per_epoch": program.steps_per_epoch,
      "steps_timed": steps,
      "examples_per_epoch": program.steps_per_epoch * spec.batch_size,
      "batch_size": spec.batch_size,
      "layer_shapes": [list(k.shape) for k in kernels],
      "dropout_off_pass": program.config.train_loss == "dropout_off",
    }
  )
  actions = {"epoch": run_epoch, "evaluate": run_evaluation}
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
  """A running contender process, driven line by line; `wait_ready` reads what it built."""

  def __init__(self, settings: dict):
    self.process = subprocess.Popen(
      [sys.executable, __file__, "--worker", json.dumps(settings)],
      stdin=subprocess.PIPE,
      stdout=subprocess.PIPE,
      text=True,
      cwd=ROOT,
    )
    self.info: dict = {}

  def wait_ready(self) -> None:
    self.info = self._read()

  def _read(self) -> dict:
    line = self.process.stdout.readline()
    if not line:
      raise RuntimeError(f"A benchmark worker exited with status {self.process.wait()}.")
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


def torch_contenders(spec, train, features, num_inputs, num_outputs) -> dict[str, Callable]:
  """The classic and the tuned PyTorch loops with each thread count, one epoch per call."""
  import torch
  import torch_reference

  batch = spec.batch_size
  loader = torch_reference.make_classic_loader(train["inputs"], train["targets"], batch)
  x_all = torch.from_numpy(train["inputs"].reshape(len(train["inputs"]), -1) / np.float32(255))
  y_all = torch.from_numpy(train["targets"].astype(np.int64))
  contenders = {}
  for threads in TORCH_THREADS:
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

    plural = "s" * (threads > 1)
    contenders[f"{CLASSIC}, {threads} thread{plural}"] = run_classic
    contenders[f"{TUNED}, {threads} thread{plural}"] = run_tuned
  return contenders


def matmul_contenders(size: int) -> dict[str, Callable]:
  """A large float32 matmul in JAX (one device, every core) and in torch: attainable GFLOP/s."""
  import jax
  import jax.numpy as jnp
  import torch

  rng = np.random.default_rng(0)
  a = rng.standard_normal((size, size), dtype=np.float32)
  b = rng.standard_normal((size, size), dtype=np.float32)
  a_jax, b_jax = jnp.asarray(a), jnp.asarray(b)
  matmul = jax.jit(jnp.matmul)
  a_torch, b_torch = torch.from_numpy(a), torch.from_numpy(b)
  return {
    f"matmul {size}x{size} float32, JAX": lambda: matmul(a_jax, b_jax).block_until_ready(),
    f"matmul {size}x{size} float32, torch": lambda: torch.matmul(a_torch, b_torch),
  }


# ---------------------------------------------------------------------------- measuring


def median_ratio(numerator: list[float], denominator: list[float], scale: float = 1.0) -> float:
  return float(np.median(scale * np.asarray(numerator) / np.asarray(denominator)))


def measure(args) -> dict:
  from gelujax import host, tasks

  spec = tasks.get(args.task).replace(dataset="fashion_mnist", dropout=0.5, activation="gelu")
  cores = host.host_cores()
  auto = {m: auto_settings(m) for m in (1, args.members)}
  common = {"task": args.task, "examples": args.examples, "data_dir": args.data_dir}
  workers = {}
  profiles = {k: v for k, v in PROFILES.items() if not args.quick or k in QUICK_PROFILES}
  for name, settings in gelujax_contenders(args.members, cores, auto, profiles).items():
    workers[name] = Worker({**common, **settings})  # They compile side by side.
  for name, w in workers.items():
    w.wait_ready()
    print(f"ready: {name}", flush=True)
  info = workers[one_member(ONE_DEVICE)].info
  splits = spec.load_data(args.data_dir)
  limit = args.examples or None
  train = {k: v[:limit] for k, v in splits["train"].items()}
  shapes = info["layer_shapes"]
  contenders: dict[str, Callable[[], object]] = {}
  for name, w in workers.items():
    contenders[name] = lambda w=w: w.time("epoch")
  for m in (1, args.members):
    w = workers[f"{'1 member' if m == 1 else f'{m} members'} (auto), as trained"]
    contenders[f"gelujax evaluation, {m} member(s), auto (validation + test)"] = lambda w=w: w.time(
      "evaluate"
    )
  contenders |= torch_contenders(
    spec, train, [s[1] for s in shapes[:-1]], shapes[0][0], shapes[-1][1]
  )
  contenders |= matmul_contenders(args.matmul_size)
  for name, run in contenders.items():  # Warm-up: PyTorch and the matmul compile nothing much.
    if name not in workers:
      run()
  seconds = {name: [] for name in contenders}
  for r in range(args.rounds):
    for name, run in contenders.items():
      if name in workers:
        seconds[name].append(run())  # The worker's own timing, without the pipe.
      else:
        start = time.perf_counter()
        run()
        seconds[name].append(time.perf_counter() - start)
    print(f"round {r + 1}/{args.rounds} done", flush=True)
  for w in workers.values():
    w.close()

  examples = info["examples_per_epoch"]
  layer_flops = [2 * a * b for a, b in shapes]
  forward = sum(layer_flops)
  # The dropout-off pass that logs the training loss repeats every layer but the first, whose
  # output XLA shares with the training pass (the same inputs and weights).
  dropout_off = forward - layer_flops[0]
  rows = []
  for name, times in seconds.items():
    w = workers.get(name)
    if w is not None:  # Seconds per call -> seconds per epoch.
      times = [t * w.info["steps_per_epoch"] / w.info["steps_timed"] for t in times]
    row = {"name": name, "seconds": times, "median_s": float(np.median(times))}
    if w is not None:
      members = w.info["members"]
      row.update(members=members, layout=w.info["layout"], xla_flags=w.info["xla_flags"])
      if w.info["steps_timed"] != w.info["steps_per_epoch"]:
        row["note"] = f"per epoch, from {w.info['steps_timed']}-step segments"
      extra = dropout_off if w.info["dropout_off_pass"] else 0
      row["model_epochs_per_s"] = members / row["median_s"]
      row["gflop_per_s"] = (3 * forward + extra) * examples * members / row["median_s"] / 1e9
    elif name.startswith("PyTorch"):
      row.update(members=1, model_epochs_per_s=1 / row["median_s"])
      row["gflop_per_s"] = 3 * forward * examples / row["median_s"] / 1e9
    elif name.startswith("matmul"):
      row["gflop_per_s"] = 2 * args.matmul_size**3 / row["median_s"] / 1e9
    rows.append(row)

  m = args.members
  best_one = min((one_member(ONE_DEVICE), one_member(DATA_PARALLEL)), key=lambda n: np.median(
    seconds[n]))  # fmt: skip
  auto_grid = grid(m, ONE_DEVICE if auto[m]["cpu_devices"] == 1 else PER_CORE)
  auto_one = one_member(ONE_DEVICE if auto[1]["cpu_devices"] == 1 else DATA_PARALLEL)

  def per_epoch(name):
    w = workers[name]
    return [t * w.info["steps_per_epoch"] / w.info["steps_timed"] for t in seconds[name]]

  targets = {
    f"grid / 1 member, model-epochs per second ({auto_grid} / {auto_one})": (
      median_ratio(per_epoch(auto_one), per_epoch(auto_grid), m),
      2.0,
    ),
    f"{TUNED}, 2 threads / gelujax 1 member ({auto_one}), time per epoch": (
      median_ratio(seconds[f"{TUNED}, 2 threads"], per_epoch(auto_one)),
      2.5,
    ),
  }
  ratios = {
    f"{CLASSIC}, 2 threads / gelujax 1 member ({auto_one}), time per epoch": median_ratio(
      seconds[f"{CLASSIC}, 2 threads"], per_epoch(auto_one)
    ),
    f"best 1-member layout ({best_one}) / {ONE_DEVICE}, time per epoch": median_ratio(
      per_epoch(best_one), per_epoch(one_member(ONE_DEVICE))
    ),
    f"1 member, {ONE_DEVICE_YNN} / {ONE_DEVICE}, time per epoch": median_ratio(
      per_epoch(one_member(ONE_DEVICE_YNN)), per_epoch(one_member(ONE_DEVICE))
    ),
  }
  for layout in (ONE_DEVICE, PER_CORE, PER_CORE_ONE_AT_A_TIME):
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
  gflops = {row["name"]: row["gflop_per_s"] for row in rows if "gflop_per_s" in row}
  peak = max(v for k, v in gflops.items() if k.startswith("matmul"))
  limits = {
    "one_member": auto_one,
    "grid": auto_grid,
    "one_member_gflop_per_s": gflops[auto_one],
    "grid_gflop_per_s": gflops[auto_grid],
    "matmul_gflop_per_s": peak,
    # The grid's GFLOP/s at 2.0x one member's model-epochs per second.
    "grid_target_gflop_per_s": 2.0 * gflops[auto_one],
    "matmul_size": args.matmul_size,
  }
  return {
    "limits": limits,
    "task": spec.name,
    "dataset": spec.dataset,
    "cores": cores,
    "auto": {str(k): v for k, v in auto.items()},
    "examples_per_epoch": examples,
    "steps_per_epoch": info["steps_per_epoch"],
    "batch_size": info["batch_size"],
    "members": m,
    "forward_flops_per_example": forward,
    "dropout_off_pass_flops_per_example": dropout_off,
    "rows": rows,
    "targets": {k: {"measured": v, "target": t} for k, (v, t) in targets.items()},
    "ratios": ratios,
  }


def describe_versions() -> dict[str, str]:
  import flax
  import jax
  import optax
  import torch

  return {
    "python": platform.python_version(),
    "jax": jax.__version__,
    "flax": flax.__version__,
    "optax": optax.__version__,
    "numpy": np.__version__,
    "torch": torch.__version__,
  }


def write_report(result: dict, output_dir: Path) -> None:
  output_dir.mkdir(parents=True, exist_ok=True)
  (output_dir / "training.json").write_text(json.dumps(result, indent=2) + "\n")
  lines = [
    "# Training benchmark",
    "",
    f"Command: `{result['command']}`  ",
    f"Machine: {result['machine']}  ",
    "Versions: " + ", ".join(f"{k} {v}" for k, v in result["versions"].items()) + "  ",
    f"Date: {result['date']}; median of {result['rounds']} interleaved rounds after one warm-up "
    "call each (compilation excluded).",
    "",
    f"Task `{result['task']}` on {result['dataset']}: {result['examples_per_epoch']:,} examples "
    f"per epoch ({result['steps_per_epoch']} steps of {result['batch_size']}), dropout 0.5, "
    f"exact GELU unless named; the grid is {result['members']} members (learning rates x "
    "seeds). A gelujax epoch is the program's shuffle and compiled loop over the epoch's steps; "
    "evaluation is timed separately. `--cpu_devices=auto` picks, for 1 member and for the grid: "
    + "; ".join(f"{k} member(s): {v}" for k, v in result["auto"].items())
    + ".",
    "",
    "GFLOP/s counts training as 3 x forward, forward = 2 x sum(fan_in x fan_out) = "
    f"{result['forward_flops_per_example']:,} FLOPs per example; for gelujax, plus the "
    f"dropout-off pass that logs the training loss as the paper did "
    f"({result['dropout_off_pass_flops_per_example']:,} FLOPs per example: every layer but the "
    "first, which XLA shares with the training pass).",
    "",
    "## Targets",
    "",
    "Medians over rounds of the ratio measured within each round.",
    "",
    "| ratio | measured | target | met |",
    "|---|---:|---:|---|",
  ]
  for name, t in result["targets"].items():
    met = "yes" if t["measured"] >= t["target"] else "no"
    lines.append(f"| {name} | {t['measured']:.2f}x | >= {t['target']}x | {met} |")
  lim = result["limits"]
  lines += [
    "",
    "What bounds the grid target: both layouts use every core. One member "
    f"({lim['one_member']}) computes {lim['one_member_gflop_per_s']:.1f} GFLOP/s and the grid "
    f"({lim['grid']}) {lim['grid_gflop_per_s']:.1f} GFLOP/s; 2.0x one member's model-epochs "
    f"per second needs the grid at {lim['grid_target_gflop_per_s']:.1f} GFLOP/s, "
    f"{lim['grid_target_gflop_per_s'] / lim['matmul_gflop_per_s']:.0%} of what a large float32 "
    f"matmul reaches on this machine ({lim['matmul_gflop_per_s']:.1f} GFLOP/s, the best of the "
    f"matmul rows below), whose operands are {lim['matmul_size']} rows to the step's "
    f"{result['batch_size']}. The profiles below (one thing changed each) show what else a step "
    "costs.",
  ]
  lines += ["", "Other ratios (same-round medians):", ""]
  lines += [f"- {k}: {v:.2f}x" for k, v in result["ratios"].items()]
  lines += [
    "",
    "## Times",
    "",
    "| contender | s per epoch (median) | all rounds (s) | model-epochs/s | GFLOP/s |",
    "|---|---:|---|---:|---:|",
  ]
  for row in result["rows"]:
    cells = [
      row["name"] + (f" ({row['note']})" if "note" in row else ""),
      f"{row['median_s']:.3f}",
      ", ".join(f"{s:.3f}" for s in row["seconds"]),
      f"{row['model_epochs_per_s']:.3f}" if "model_epochs_per_s" in row else "",
      f"{row['gflop_per_s']:.1f}" if "gflop_per_s" in row else "",
    ]
    lines.append("| " + " | ".join(cells) + " |")
  lines += ["", "Layouts:", ""]
  lines += [
    f"- {row['name']}: {row['layout']}; XLA_FLAGS `{row['xla_flags']}`"
    for row in result["rows"]
    if "layout" in row
  ]
  (output_dir / "training.md").write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds")
  parser.add_argument("--members", type=int, default=15, help="members of the grid")
  parser.add_argument("--task", default="mnist", help="task spec (trained on fashion_mnist)")
  parser.add_argument("--examples", type=int, default=0, help="training images (0: all)")
  parser.add_argument("--matmul-size", type=int, default=4096)
  parser.add_argument("--data-dir", default=None, help="passed to gelujax.data.load")
  parser.add_argument(
    "--quick",
    action="store_true",
    help="smoke run: tiny_mnist, 320 images, 1 round, 2 profiles",
  )
  parser.add_argument("--output-dir", type=Path, default=RESULTS_DIR)
  parser.add_argument("--worker", help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.worker:
    worker(json.loads(args.worker))
    return
  if args.quick:
    args.rounds, args.task, args.examples, args.matmul_size = 1, "tiny_mnist", 320, 256
  if args.rounds < 1 or args.members < 2 or args.examples < 0 or args.matmul_size < 1:
    raise SystemExit(
      f"--rounds ({args.rounds}) and --matmul-size ({args.matmul_size}) must be positive, "
      f"--members ({args.members}) at least 2 and --examples ({args.examples}) non-negative."
    )
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
