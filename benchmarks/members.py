"""How a device should take the members of a grid: vmapped or one after another, side by side.

`gelujax.engine.mesh.map_members` trains the members a device holds in one of two ways
(`gelujax.engine.mesh.STRATEGIES`): ``vmap`` batches them into one computation, each product
gaining a members dimension (for a convolution: one grouped convolution of all the members);
``map`` loops over them inside the same compiled program (`jax.lax.map`), each product at one
member's shape. `gelujax.engine.mesh.RULE` chooses between them by platform and by whether the
model convolves; this benchmark measures what the rule rests on.

Each configuration is a task, a grid size and a dtype. For each strategy it makes the trainer's
own program (`gelujax.engine.make_program(..., member_strategy=...)`: the task's model,
optimizer and objective on the mesh `make_mesh` picks, the training segment the trainer runs),
compiles a segment of ``--steps`` steps, runs it once to warm up, then times ``--repeats``
segments, **the strategies alternating** so that other load on the machine falls on both
alike; the median segment gives ms/step. A grid of one member is timed once (both strategies
are the same computation there: the rule vmaps it); it is what "against one member alone"
divides by: members x one member's ms/step is what the same members would take trained one
after another as separate runs. Data are random arrays of the task's shapes (timing only: a
step's speed does not depend on the values). The strategies start from the same parameters
(``init`` is vmapped in both) and see the same batches; the report gives the largest relative
difference of the members' training losses between them after the timed segments (two
programs: float32 rounding, not bits).

Run: python benchmarks/members.py --name members_gpu            (on a GPU; --budget_s 420)
     python benchmarks/members.py --name members_cpu --cpu       (this CPU: small steps)
     python benchmarks/members.py --render --name members_cpu    (the .md again from the .json)
"""

from __future__ import annotations

import time

START = time.perf_counter()  # The budget counts from here: imports and JAX's start included.

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import traceback  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # The device run has the checkout, not an installed gelujax.
sys.path.insert(0, str(Path(__file__).resolve().parent))
RESULTS_DIR = Path(__file__).resolve().parent / "results"

import reports  # noqa: E402

STRATEGIES = ("vmap", "map")


@dataclasses.dataclass(frozen=True)
class Config:
  """A task with ``spec`` overrides, ``members`` members (learning rates 1e-3 x seeds), in
  ``dtype``, timed on segments of at most ``steps`` steps."""

  task: str
  members: int
  dtype: str
  spec: dict = dataclasses.field(default_factory=dict)
  steps: int = 0  # 0: --steps

  @property
  def name(self) -> str:
    return f"{self.task}, {self.members} member{'s' * (self.members > 1)}, {self.dtype}"


_GELU = {"activation": "gelu"}
_MNIST = {"dataset": "fashion_mnist", "dropout": 0.5, "activation": "gelu"}
# The accelerator's list, most telling first: the budget skips what does not fit at the end.
GPU_CONFIGS = (
  *(Config("cifar10", m, "float32", _GELU) for m in (1, 3, 8)),
  Config("mnist", 15, "float32", _MNIST),
  *(Config("cifar10", m, "bfloat16", _GELU) for m in (1, 3, 8)),
  *(Config("cifar100", m, "float32", _GELU) for m in (1, 3, 8)),
  *(Config("cifar100", m, "bfloat16", _GELU) for m in (1, 3, 8)),
  *(Config("vit_fashion_mnist", m, "float32") for m in (1, 10)),
  Config("mnist", 1, "float32", _MNIST),
  Config("mnist", 15, "bfloat16", _MNIST),
)
# This CPU's: the MLP grid, the small convnet, and the paper's CIFAR-10 net on a few steps.
CPU_CONFIGS = (
  Config("mnist", 1, "float32", _MNIST),
  Config("mnist", 15, "float32", _MNIST),
  Config("tiny_cifar", 1, "float32", _GELU),
  Config("tiny_cifar", 4, "float32", _GELU),
  Config("tiny_cifar", 8, "float32", _GELU),
  Config("cifar10", 1, "float32", _GELU, steps=2),
  Config("cifar10", 4, "float32", _GELU, steps=2),
  Config("vit_fashion_mnist", 1, "float32", steps=5),
  Config("vit_fashion_mnist", 10, "float32", steps=5),
)

# --quick: the small convnet and the MLP on a few steps (tests/test_benchmarks.py runs it).
# Twitter POS's spelling model, as the re-test trains it (needs --data_dir: its word ids index
# the data's vocabulary, which random data has not).
_SPELLING = {
  "model": "spelling_mlp_twitter_pos",
  "model_options": {"word_dropout": 0.25},
  "dropout": 0.2,
  "preprocessing": ("spell_words",),
  "select_metric": "validation_error",
}
DATA_CPU_CONFIGS = (
  Config("twitter_pos", 30, "float32", _SPELLING, steps=50),
  Config("transformer_twitter_pos", 1, "float32", steps=20),
  Config("transformer_twitter_pos", 10, "float32", steps=20),
)


class DATA:
  """The real data's cache (`accelerator.DataCache`), where --data_dir is given."""

  cache: Any = None


QUICK_CONFIGS = (
  Config("tiny_mnist", 1, "float32", _MNIST, steps=3),
  Config("tiny_mnist", 2, "float32", _MNIST, steps=3),
)


def make_timed(config: Config, strategy: str, steps: int):
  """The trainer's program of ``config`` with ``strategy``, its inputs placed and its segment
  compiled: ``(run, info)``, where ``run()`` times one segment and returns its seconds."""
  import jax
  from accelerator import random_train

  from gelujax import engine, tasks
  from gelujax.members import Members

  spec = tasks.get(config.task).replace(**config.spec, dtype=config.dtype)
  if DATA.cache is not None:  # --data_dir: the task's real training split
    parts, train, _ = DATA.cache.train(spec, 0)
  else:
    train = random_train(spec, 0)
    parts = tasks.build(spec, {"train": train})
  members = Members((1e-3,), tuple(range(config.members)))
  mesh = engine.make_mesh(config.members)
  program = engine.make_program(parts, mesh, config.members, strategy)
  steps = min(steps, program.steps_per_epoch)
  seeds, lrs = program.put_members(members)
  data = program.put_data(train)
  holder = {"state": program.init(seeds, lrs), "epoch": 0, "loss": None}
  batches = program.shuffle(seeds, np.int32(1))
  started = time.perf_counter()
  compiled = program.train_segment.lower(
    holder["state"], data, batches, seeds, lrs, epoch=np.int32(1), first_step=np.int32(0),
    num_steps=steps,
  ).compile()  # fmt: skip
  compile_s = time.perf_counter() - started

  def run() -> float:
    holder["epoch"] += 1
    started = time.perf_counter()
    state, loss = compiled(
      holder["state"], data, batches, seeds, lrs, epoch=np.int32(holder["epoch"]),
      first_step=np.int32(0),
    )  # fmt: skip
    jax.block_until_ready((state, loss))
    holder["state"], holder["loss"] = state, loss
    return time.perf_counter() - started

  info = {
    "strategy": program.strategy,
    "layout": engine.describe_layout(config.members, mesh, program.strategy),
    "steps": steps,
    "compile_s": compile_s,
    "batch_size": spec.batch_size,
    "steps_per_epoch": program.steps_per_epoch,
  }
  return run, info, holder


def measure(config: Config, args) -> dict[str, Any]:
  """One configuration's row: each strategy's compile seconds and segment times."""
  steps = config.steps or args.steps
  strategies = STRATEGIES if config.members > 1 else ("vmap",)
  timed = {s: make_timed(config, s, steps) for s in strategies}
  for run, _, _ in timed.values():  # Warm up.
    run()
  first = _loss_diff(timed, strategies, config.members)
  seconds: dict[str, list[float]] = {s: [] for s in strategies}
  for _ in range(args.repeats):
    for s, (run, _, _) in timed.items():
      seconds[s].append(run())
  row: dict[str, Any] = {"status": "done", "strategies": {}}
  for s, (_, info, _) in timed.items():
    step_s = float(np.median(seconds[s])) / info["steps"]
    row["strategies"][s] = {**info, "seconds": seconds[s], "step_ms": 1e3 * step_s}
  if len(strategies) == 2:
    row["loss_max_rel_diff_first"] = first
    row["loss_max_rel_diff"] = _loss_diff(timed, strategies, config.members)
  return row


def _loss_diff(timed: dict, strategies: tuple[str, ...], members: int) -> float | None:
  """The largest relative difference of a member's mean training loss over the last segment
  between the two strategies (None for one)."""
  if len(strategies) < 2:
    return None
  losses = [np.asarray(timed[s][2]["loss"], np.float64)[:members].mean(axis=1) for s in strategies]
  return float(np.max(np.abs(losses[1] - losses[0]) / np.abs(losses[0])))


def _diffs(row: dict) -> str:
  first = row.get("loss_max_rel_diff_first")
  last = f"{row['loss_max_rel_diff']:.1e}"
  return f"{first:.1e}; {last}" if first is not None else last


def _num(value: float) -> str:
  if value >= 100:
    return f"{value:,.0f}"
  return f"{value:.2f}" if value >= 1 else f"{value:.3g}"


# What the timed segments read: random data of the task's shapes, or (--data_dir) its own.
DATA_WORDS = {
  False: "Random data of the task's shapes (timing only).",
  True: "Each task's own training data, from --data_dir (Twitter POS: the ARK files).",
}


def render(result: dict) -> str:
  settings = result["settings"]
  lines = reports.header(
    "How a device takes its members: vmap against map", result,
    f"; {result.get('elapsed_s', 0):.0f} s in all",
  )  # fmt: skip
  lines += [
    f"Device: {result['device']}; load average (1 min) at the start and the end: "
    f"{result['load_average']['start']:.2f}, {result['load_average'].get('end', 0):.2f}.",
    "",
    f"Each configuration is the trainer's program for each member strategy "
    f"(`gelujax.engine.make_program(..., member_strategy=...)`), its training segment compiled "
    f"for {settings['steps']} steps (or fewer, as noted) and timed for {settings['repeats']} "
    "segments after a warm-up one, **the strategies alternating** (the median segment). *One "
    "member alone x M* is M times the one-member grid's ms/step of the same task and dtype: "
    "the members trained one after another as separate runs. *map / vmap* below 1 means the "
    f"loop is faster. {DATA_WORDS[bool(result.get('data_dir'))]} *Loss diff*: the largest "
    "relative difference of a member's mean training loss between the two strategies over the "
    "warm-up segment and over the last timed one (two programs from one draw and the same "
    "batches, each step's arithmetic equal to float32 rounding; training can amplify that "
    "rounding over the steps, as between any two correct programs, and the columns show how far "
    "it grew; a report made before the first was recorded shows the last alone).",
    "",
    "| configuration | vmap ms/step | map ms/step | map / vmap | one member alone x M, ms "
    "| vmap against it | map against it | compile s (vmap; map) | loss diff (first; last) |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
  ]
  alone = {
    (r["task"], r["dtype"]): r["strategies"]["vmap"]["step_ms"]
    for r in result["configs"]
    if r.get("status") == "done" and r["members"] == 1
  }
  skipped = []
  for r in result["configs"]:
    if r.get("status") != "done":
      skipped.append(f"- {r['name']}: {r.get('status')} ({r.get('reason', '')})")
      continue
    v = r["strategies"]["vmap"]
    m = r["strategies"].get("map")
    one = alone.get((r["task"], r["dtype"]))
    base = one * r["members"] if one else None
    steps = f" ({v['steps']} steps)" if v["steps"] != settings["steps"] else ""

    many = r["members"] > 1

    def against(ms: float, base: float | None = base, many: bool = many) -> str:
      return f"{ms / base:.2f}x" if base and many else "-"

    cells = [
      f"{r['name']}{steps}",
      _num(v["step_ms"]),
      _num(m["step_ms"]) if m else "-",
      f"{m['step_ms'] / v['step_ms']:.2f}" if m else "-",
      _num(base) if base and many else "-",
      against(v["step_ms"]),
      against(m["step_ms"]) if m else "-",
      f"{v['compile_s']:.1f}" + (f"; {m['compile_s']:.1f}" if m else ""),
      _diffs(r) if m else "-",
    ]
    lines.append("| " + " | ".join(cells) + " |")
  lines += ["", "*vmap against it* and *map against it*: the strategy's ms/step over one member "
            "alone x M (below 1: the grid beats separate runs).", ""]  # fmt: skip
  if skipped:
    lines += ["Not timed:", "", *skipped, ""]
  lines += ["Layouts:", ""]
  for r in result["configs"]:
    if r.get("status") == "done":
      for s, info in r["strategies"].items():
        lines.append(f"- {r['name']}, {s}: {info['layout']}; segments " + ", ".join(
          f"{x:.4f}" for x in info["seconds"]) + " s")  # fmt: skip
  return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--cpu", action="store_true", help="this CPU's configurations")
  parser.add_argument("--steps", type=int, default=20, help="steps of a timed segment")
  parser.add_argument("--repeats", type=int, default=3, help="timed segments per strategy")
  parser.add_argument("--budget_s", type=float, default=420.0, help="seconds from the start")
  parser.add_argument("--cpu_devices", default="2", help="CPU devices (--cpu): one per core")
  parser.add_argument("--out", type=Path, default=RESULTS_DIR)
  parser.add_argument("--name", default="members_gpu")
  parser.add_argument("--render", action="store_true", help="rewrite the .md from the .json")
  parser.add_argument("--quick", action="store_true", help="tiny configurations: a smoke run")
  parser.add_argument("--only", default="", help="semicolon list: the configurations named")
  parser.add_argument(
    "--data_dir", default="", help="real data (--cpu: adds the tasks that need it, Twitter POS)"
  )
  parser.add_argument(
    "--precision", default="", help="jax_default_matmul_precision (e.g. highest); default: JAX's"
  )
  args = parser.parse_args(argv)
  path = args.out / f"{args.name}.json"
  if args.render:
    result = json.loads(path.read_text())
    (args.out / f"{args.name}.md").write_text(render(result))
    print(render(result))
    return
  os.environ.setdefault("GELUJAX_OFFLINE", "1")
  from gelujax import host

  if args.cpu:
    host.configure_cpu(args.cpu_devices, 2)
  import jax
  from accelerator import describe_device

  jax.config.update("jax_enable_compilation_cache", False)
  if args.precision:
    jax.config.update("jax_default_matmul_precision", args.precision)
  configs = QUICK_CONFIGS if args.quick else CPU_CONFIGS if args.cpu else GPU_CONFIGS
  if args.data_dir:
    from accelerator import DataCache

    DATA.cache = DataCache(args.data_dir)
    configs = (*configs, *DATA_CPU_CONFIGS) if args.cpu else configs
  if args.only:
    names = [n.strip() for n in args.only.split(";")]
    unknown = [n for n in names if n not in {c.name for c in configs}]
    if unknown:
      raise SystemExit(f"--only: no configuration {unknown}; valid: {[c.name for c in configs]}")
    configs = tuple(c for c in configs if c.name in names)
  command = "python benchmarks/members.py " + " ".join(sys.argv[1:] if argv is None else argv)
  device = describe_device()
  result = {
    **reports.stamp(command),
    "device": f"{device['device_count']} x {device['device_kind']} ({device['platform']}); "
    f"CPU: {device['cpu']}; jax {device['versions']['jax']}; default matmul precision: "
    f"{device['matmul_precision']}",
    "load_average": {"start": os.getloadavg()[0]},
    "settings": {"steps": args.steps, "repeats": args.repeats, "budget_s": args.budget_s},
    "data_dir": args.data_dir,
    "configs": [
      {"name": c.name, "task": c.task, "dtype": c.dtype, "members": c.members, "status": "not run"}
      for c in configs
    ],
  }

  def save() -> None:
    result["elapsed_s"] = time.perf_counter() - START
    result["load_average"]["end"] = os.getloadavg()[0]
    args.out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n")
    (args.out / f"{args.name}.md").write_text(render(result))

  spent: dict[str, float] = {}
  for config, row in zip(configs, result["configs"], strict=True):
    elapsed = time.perf_counter() - START
    need = spent.get(config.task, 20.0) * (2 if config.members > 1 else 1)
    if elapsed + need > args.budget_s:
      row.update(status="skipped", reason=f"{elapsed:.0f} s spent of {args.budget_s:g}")
      print(f"skipped: {config.name}", flush=True)
      continue
    print(f"[{elapsed:.0f} s] {config.name}", flush=True)
    started = time.perf_counter()
    try:
      row.update(measure(config, args))
      times = [f"{s} {_num(v['step_ms'])} ms/step" for s, v in row["strategies"].items()]
      print("  " + ", ".join(times), flush=True)
    except Exception as e:  # One failing (memory, say) leaves the others.
      traceback.print_exc()
      row.update(status="failed", reason=f"{type(e).__name__}: {str(e)[:300]}")
    spent[config.task] = (time.perf_counter() - started) / (2 if config.members > 1 else 1)
    gc.collect()
    save()
  save()
  print(render(result), flush=True)


if __name__ == "__main__":
  main()
