"""Time from the command to a result, now and before: a one-epoch `train.py` run, and a whole
small reproduction.

**A run that starts at once.** ``train.py`` trains one member of the ``mnist`` task on
Fashion-MNIST for one epoch (the epoch itself takes about a second), so the wall time is mostly
what a run costs besides training: imports, loading the data, tracing and compiling (or loading
compiled programs from the cache), and after it the evaluation, the checkpoint and the summary.
``reproduce.py --task=tiny_mnist --epochs=2 --activations=gelu,relu`` trains four grids (each
activation's selection grid and its evaluation seeds) in one process and writes its README.

Contenders, each a fresh process:

- ``train.py`` in this checkout and in ``--before REV`` (a temporary worktree), each with a
  compilation cache of its own that a first, unrecorded run filled (a re-run or a resume: the
  *warm start*); in this checkout also with an empty cache (a first run) and with
  ``--compilation_cache=none``;
- ``reproduce.py`` in this checkout and before, each with its warm cache.

Rounds interleave the contenders; the report gives medians, and each ratio (now / before) is
the median of the ratios measured within a round. Where a warm start goes is measured after
them, in each tree (`phases`: the imports, tracing, lowering, compiling or loading, the rest of
main, the process's end), and Python's ``-X importtime`` of the modules train.py imports is
reported beside it.

No target: a faster start is welcome only by means that cannot be stale (DESIGN.md, decision 14).

Run: python benchmarks/startup.py --before 544a54c   (about 5 minutes on 2 quiet cores)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import reports
from revisions import checkout

ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = Path(__file__).resolve().parent / "results"
sys.path.insert(0, str(ROOT))
ARGS = [
  "--task=mnist", "--dataset=fashion_mnist", "--epochs=1", "--seeds=1", "--learning_rates=1e-3",
]  # fmt: skip


REPRODUCE_ARGS = [
  "--task=tiny_mnist", "--dataset=fashion_mnist", "--epochs=2", "--activations=gelu,relu",
]  # fmt: skip


def run(tree: Path, workdir: Path, extra: list[str], script: str = "train") -> float:
  """Seconds of one ``train.py`` (or ``reproduce.py``, writing to ``workdir``) in ``tree``."""
  shutil.rmtree(workdir, ignore_errors=True)
  env = dict(os.environ, PYTHONPATH=str(tree))
  if script == "train":
    command = ["experiments/train.py", *ARGS, f"--workdir={workdir}", *extra]
  else:
    command = ["experiments/reproduce.py", *REPRODUCE_ARGS, f"--out={workdir}", *extra]
  start = time.perf_counter()
  result = subprocess.run(
    [sys.executable, *command], cwd=tree, env=env, capture_output=True, text=True, timeout=600,
  )  # fmt: skip
  seconds = time.perf_counter() - start
  if result.returncode != 0:
    raise RuntimeError(f"{command[0]} in {tree} failed:\n{result.stderr[-2000:]}")
  return seconds


# Runs a tree's train.py as its own `python train.py` would, timing its parts: the driver
# imports the script as a module (its imports and flag definitions, not its main), then runs
# its main through absl, with JAX's duration events summed as they come.
_PHASES_DRIVER = """
import collections, importlib.util, json, os, sys, time

def since_start():
  ticks = os.sysconf("SC_CLK_TCK")
  start = int(open("/proc/self/stat").read().split(")")[1].split()[19]) / ticks
  return float(open("/proc/uptime").read().split()[0]) - start

begun = time.perf_counter() - since_start()
script, out, *argv = sys.argv[1:]
sys.path.insert(0, os.path.dirname(script))
import jax.monitoring
events = collections.defaultdict(float)
jax.monitoring.register_event_duration_secs_listener(
  lambda event, seconds, **kw: events.__setitem__(event, events[event] + seconds))
spec = importlib.util.spec_from_file_location("train_script", script)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
imported = time.perf_counter()
from absl import app
sys.argv = [script, *argv]
try:
  app.run(module.main)
except SystemExit:
  pass
done = time.perf_counter()
with open(out, "w") as f:
  json.dump({"imports": imported - begun, "main": done - imported, "events": events}, f)
"""
# What each phase sums: JAX's duration events, in seconds.
_PHASE_EVENTS = {
  "tracing": ("/jax/core/compile/jaxpr_trace_duration",),
  "lowering": ("/jax/core/compile/jaxpr_to_mlir_module_duration",),
  "compiling, or loading from JAX's cache": ("/jax/core/compile/backend_compile_duration",),
  "saving a checkpoint (its blocking part)": ("/jax/orbax/write/blocking_duration_secs",),
}


def phases(tree: Path, cache: Path, scratch: Path, rounds: int) -> dict[str, float]:
  """Where a warm start of ``tree``'s train.py goes, in seconds, the median of ``rounds`` runs
  part by part: Python's start and the imports, the phases of `_PHASE_EVENTS` within main, the
  rest of main (data, training, evaluation, records), and the process's end (from main's return
  to its exit). A first run fills the cache for the driver (whose programs are keyed apart from
  train.py's own)."""
  out = scratch / "phases.json"
  driver = scratch / "phases_driver.py"
  driver.write_text(_PHASES_DRIVER)
  env = dict(os.environ, PYTHONPATH=str(tree))
  command = [
    sys.executable, str(driver), str(tree / "experiments" / "train.py"), str(out),
    *ARGS, f"--workdir={scratch / 'phases-out'}", f"--compilation_cache={cache}",
  ]  # fmt: skip
  runs = []
  for _ in range(1 + rounds):
    shutil.rmtree(scratch / "phases-out", ignore_errors=True)
    start = time.perf_counter()
    subprocess.run(command, cwd=tree, env=env, capture_output=True, check=True, timeout=600)
    wall = time.perf_counter() - start
    measured = json.loads(out.read_text())
    parts = {"Python's start and the imports": measured["imports"]}
    for name, events in _PHASE_EVENTS.items():
      parts[name] = sum(measured["events"].get(e, 0.0) for e in events)
    inside = sum(list(parts.values())[1:])
    parts["the rest of main (data, training, evaluation, records)"] = measured["main"] - inside
    parts["the process's end (after main)"] = wall - measured["imports"] - measured["main"]
    parts["in all (the process's wall time)"] = wall
    runs.append(parts)
  return {part: float(np.median([r[part] for r in runs[1:]])) for part in runs[0]}


def import_seconds(tree: Path) -> dict[str, float]:
  """``python -X importtime`` of what train.py imports: the total and the largest packages."""
  env = dict(os.environ, PYTHONPATH=str(tree))
  # The modules train.py imports in this tree or in the revision compared (which may name
  # them differently: engine and host were trainer and devices).
  code = (
    "import importlib, importlib.util\n"
    "for m in ('checkpoints', 'data', 'engine', 'host', 'tasks', 'workdir', 'writers', "
    "'trainer', 'devices'):\n"
    "  if importlib.util.find_spec('gelujax.' + m):\n"
    "    importlib.import_module('gelujax.' + m)\n"
  )
  result = subprocess.run(
    [sys.executable, "-X", "importtime", "-c", code], cwd=tree, env=env,
    capture_output=True, text=True, timeout=300,
  )  # fmt: skip
  cumulative = {}
  for line in result.stderr.splitlines():
    match = re.match(r"import time:\s+\d+ \|\s+(\d+) \|( *)(\S+)", line)
    if match and len(match.group(2)) <= 2:  # Top-level and first-level imports.
      cumulative[match.group(3)] = int(match.group(1)) / 1e6
  top = sorted(cumulative.items(), key=lambda kv: -kv[1])[:6]
  return dict(top)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--before", required=True, help="the git revision to compare with")
  parser.add_argument("--rounds", type=int, default=3)
  parser.add_argument("--output-dir", type=Path, default=RESULTS_DIR)
  args = parser.parse_args()

  scratch = Path(tempfile.mkdtemp(prefix="gelujax-startup-"))
  caches = {tree: scratch / f"cache-{tree}" for tree in ("now", "before")}
  trees = {"now": ROOT}
  # name -> (tree, script, compilation cache: "warm" (the tree's own, filled first), "cold"
  # (emptied before each run) or "none").
  contenders = {
    "train.py now, warm cache": ("now", "train", "warm"),
    f"train.py before ({args.before}), warm cache": ("before", "train", "warm"),
    "train.py now, empty cache (first run)": ("now", "train", "cold"),
    "train.py now, --compilation_cache=none": ("now", "train", "none"),
    "reproduce.py now, warm cache": ("now", "reproduce", "warm"),
    f"reproduce.py before ({args.before}), warm cache": ("before", "reproduce", "warm"),
  }
  seconds = {name: [] for name in contenders}

  def time_one(tree: str, script: str, mode: str) -> float:
    cache = scratch / "cache-cold" if mode == "cold" else caches[tree]
    if mode == "cold":
      shutil.rmtree(cache, ignore_errors=True)
    extra = ["--compilation_cache=none"] if mode == "none" else [f"--compilation_cache={cache}"]
    return run(trees[tree], scratch / "out", extra, script)

  try:
    with contextlib.ExitStack() as stack:
      trees["before"] = stack.enter_context(checkout(args.before, scratch / "before"))
      for tree, script, mode in contenders.values():  # Fills each tree's cache; not recorded.
        if mode == "warm":
          time_one(tree, script, mode)
      for r in range(args.rounds):
        for name, contender in contenders.items():
          seconds[name].append(time_one(*contender))
        print(
          f"round {r + 1}/{args.rounds}: " + ", ".join(f"{s[-1]:.1f}" for s in seconds.values()),
          flush=True,
        )
      imports = {tree: import_seconds(path) for tree, path in trees.items()}
      parts = {
        tree: phases(path, caches[tree], scratch, args.rounds) for tree, path in trees.items()
      }
  finally:
    shutil.rmtree(scratch, ignore_errors=True)
  names = list(contenders)
  ratios = {
    "warm start": np.median(np.divide(seconds[names[0]], seconds[names[1]])),
    "reproduce.py end to end": np.median(np.divide(seconds[names[4]], seconds[names[5]])),
  }
  result = {
    **reports.stamp("python benchmarks/startup.py " + " ".join(sys.argv[1:])),
    "train_command": "python experiments/train.py " + " ".join(ARGS),
    "reproduce_command": "python experiments/reproduce.py " + " ".join(REPRODUCE_ARGS),
    "rounds": args.rounds,
    "seconds": seconds,
    "ratios": {k: float(v) for k, v in ratios.items()},
    "imports": imports,
    "phases": parts,
  }
  args.output_dir.mkdir(parents=True, exist_ok=True)
  (args.output_dir / "startup.json").write_text(json.dumps(result, indent=2) + "\n")
  lines = [
    *reports.header("Start-up benchmark", result, f"; median of {args.rounds} interleaved rounds."),
    f"`train.py`: `{result['train_command']}`, one member, one epoch (about a second of "
    "training), so the time is mostly what a run costs besides training. `reproduce.py`: "
    f"`{result['reproduce_command']}` (four grids in one process, and its README). Each in a "
    "fresh process; a warm cache is the tree's own, filled by a first run not recorded.",
    "",
    "| ratio (now / before, median of the rounds' ratios) | measured |",
    "|---|---:|",
  ]
  for name, ratio in result["ratios"].items():
    lines.append(f"| {name} | {ratio:.2f}x |")
  lines += ["", "| contender | s (median) | all rounds (s) |", "|---|---:|---|"]
  for name, times in seconds.items():
    lines.append(f"| {name} | {np.median(times):.1f} | {', '.join(f'{t:.1f}' for t in times)} |")
  lines += [
    "",
    f"Where a warm start goes: {args.rounds} more warm runs of each tree's train.py, their "
    "parts timed in the process (`phases` in benchmarks/startup.py: the imports, JAX's duration "
    "events summed by kind, the rest of main, and the process's end after main), the median of "
    "each part in seconds (the medians need not add up to the median in all):",
    "",
    f"| part | now | before ({args.before}) |",
    "|---|---:|---:|",
  ]
  for part in parts["now"]:
    lines.append(f"| {part} | {parts['now'][part]:.2f} | {parts['before'][part]:.2f} |")
  lines += ["", "Import time (`python -X importtime`, cumulative s) of train.py's modules:", ""]
  for tree, top in imports.items():
    lines.append(f"- {tree}: " + ", ".join(f"{k} {v:.2f}" for k, v in top.items()))
  (args.output_dir / "startup.md").write_text("\n".join(lines) + "\n")
  print("\n".join(lines))


if __name__ == "__main__":
  main()
