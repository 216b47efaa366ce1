"""Compiling each task's `init` at XLA's optimization level 1, as the engine does on CPU, and at
its default level: seconds, and whether both draw the same bits.

`gelujax.engine.mesh.make_program` compiles a run's ``init`` (its members' parameters drawn from
their seeds, and a fresh optimizer state) with `CPU_INIT_OPTIONS`. ``init`` runs once a run; on
CPU most of its compile time was LLVM optimizing the threefry rounds of every parameter's
initializer, which XLA unrolls. This compiles every paper task's ``init`` at its full size for
a grid of 2 members on one device, both ways, in interleaved rounds with JAX's compilation
cache off, and checks that both programs draw every parameter and optimizer state bit for bit
alike. The training data are zeros of each task's shapes (``init`` only reads their shapes).

Run: python benchmarks/init_compile.py   (about 3 minutes on 2 cores)
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from pathlib import Path

import numpy as np
import reports

ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = Path(__file__).resolve().parent / "results"
sys.path.insert(0, str(ROOT))
# Each task's training split as its loader returns it: per-example shape and dtype of the
# inputs (TIMIT: frames, with the utterance of each frame in "groups").
INPUTS = {
  "mnist": ((28, 28, 1), np.uint8),
  "mnist_ae": ((28, 28, 1), np.uint8),
  "twitter_pos": ((150,), np.float32),
  "timit": ((286,), np.float32),
  "cifar10": ((32, 32, 3), np.uint8),
  "cifar100": ((32, 32, 3), np.float32),
}
EXAMPLES = 512
MEMBERS = 2


def split(task: str) -> dict[str, np.ndarray]:
  shape, dtype = INPUTS[task]
  arrays = {
    "inputs": np.zeros((EXAMPLES, *shape), dtype),
    "targets": np.zeros(EXAMPLES, np.int32),
  }
  if task == "timit":
    arrays["groups"] = np.arange(EXAMPLES, dtype=np.int32) // 8  # utterances of 8 frames
  return arrays


def compile_both(task: str) -> dict:
  """Seconds to lower and compile ``init`` both ways, and whether the two draw the same bits."""
  import jax

  from gelujax import engine, tasks
  from gelujax.engine import mesh as meshes
  from gelujax.members import Members

  spec = tasks.get(task)
  mesh = engine.make_mesh(MEMBERS)
  program = engine.make_program(tasks.build(spec, {"train": split(task)}), mesh, MEMBERS)
  seeds, learning_rates = program.put_members(Members([1e-3, 1e-4][:MEMBERS], [0]))
  ways = {
    "level 1": program.init,
    "default": jax.jit(functools.partial(meshes.init_members, program.config, mesh)),
  }
  seconds, states = {}, {}
  for name, jitted in ways.items():
    start = time.perf_counter()
    compiled = jitted.lower(seeds, learning_rates).compile()
    seconds[name] = time.perf_counter() - start
    states[name] = [np.asarray(x) for x in jax.tree.leaves(compiled(seeds, learning_rates))]
  same = all(
    a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)
    for a, b in zip(states["level 1"], states["default"], strict=True)
  )
  return {"seconds": seconds, "same_bits": same, "leaves": len(states["default"])}


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--rounds", type=int, default=3)
  parser.add_argument("--tasks", default=",".join(INPUTS))
  parser.add_argument("--output-dir", type=Path, default=RESULTS_DIR)
  args = parser.parse_args()
  from gelujax import host

  host.configure_cpu("auto", 1)
  import jax

  jax.config.update("jax_enable_compilation_cache", False)
  names = args.tasks.split(",")
  unknown = sorted(set(names) - set(INPUTS))
  if unknown:
    parser.error(f"--tasks: {unknown} are not tasks; valid: {', '.join(INPUTS)}.")
  runs: dict[str, list[dict]] = {name: [] for name in names}
  for r in range(args.rounds):
    for name in names:
      runs[name].append(compile_both(name))
      print(f"round {r + 1}/{args.rounds}: {name} {runs[name][-1]}", flush=True)
  rows = []
  for name, found in runs.items():
    medians = {
      way: float(np.median([f["seconds"][way] for f in found])) for way in ("level 1", "default")
    }
    rows.append(
      {
        "task": name,
        "leaves": found[0]["leaves"],
        "median_s": medians,
        "seconds": {way: [f["seconds"][way] for f in found] for way in medians},
        "speedup": medians["default"] / medians["level 1"],
        "same_bits": all(f["same_bits"] for f in found),
      }
    )
  result = {
    **reports.stamp("python benchmarks/init_compile.py " + " ".join(sys.argv[1:])),
    "rounds": args.rounds,
    "members": MEMBERS,
    "rows": rows,
  }
  args.output_dir.mkdir(parents=True, exist_ok=True)
  (args.output_dir / "init_compile.json").write_text(json.dumps(result, indent=1) + "\n")
  lines = [
    *reports.header(
      "Compiling init: XLA's level 1 against its default",
      result,
      f"; median of {args.rounds} interleaved rounds, JAX's compilation cache off.",
    ),
    f"Each task's `init` at full size for a grid of {MEMBERS} members on one device, lowered "
    "and compiled with `CPU_INIT_OPTIONS` (as `gelujax.engine.mesh.make_program` compiles it on "
    "CPU) and with XLA's defaults; both run once, and their outputs are compared bit for bit.",
    "",
    "| task | arrays drawn | level 1 (s) | default (s) | default / level 1 | same bits |",
    "|---|---:|---:|---:|---:|---|",
  ]
  for row in rows:
    m = row["median_s"]
    lines.append(
      f"| {row['task']} | {row['leaves']} | {m['level 1']:.2f} | {m['default']:.2f} | "
      f"{row['speedup']:.2f}x | {'yes' if row['same_bits'] else '**no**'} |"
    )
  (args.output_dir / "init_compile.md").write_text("\n".join(lines) + "\n")
  print("\n".join(lines))
  if not all(row["same_bits"] for row in rows):
    sys.exit("init compiled at level 1 draws other bits than at the default level: see above.")


if __name__ == "__main__":
  main()
