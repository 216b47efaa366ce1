"""A real run's seconds per epoch: this checkout against an earlier git revision, side by side.

Each tree (this checkout, and the revision in a temporary worktree) runs the same command,
`experiments/train.py` on the ``mnist`` task's default grid (15 members) on Fashion-MNIST, for
one epoch and for two, with a compilation cache the tree's own warm-up run filled. The
difference of the two is one epoch as a run trains it: the compiled loop over the steps, the
evaluations, the records and the checkpoint, whatever the engine's code between them; start-up
cancels out (it is `startup.py`'s subject). Rounds interleave the trees; the report gives each
tree's median epoch and the median over rounds of the ratio measured within each round.

Only the command line is shared between the trees, so the revision may lay its code out in any
way (e.g. before the engine's redesign: `python benchmarks/revisions.py --before e89828b`,
about 10 minutes on 2 cores).

The difference of two processes' times is noisy (one epoch of ~9 s against runs of 13 to 18 s).
With ``--parts``, each round also times the epoch's compiled parts in one process per tree, each
the median of `PART_REPEATS` calls after a warm-up: the training segment of a whole epoch, the
evaluation of the validation and test splits, and the shuffle, on random arrays of
Fashion-MNIST's shapes (timing only). That needs the revision's public engine API
(`engine.make_program` of `tasks.build`'s parts, or before them of the spec and the training
split, and its `Program`), which every revision since the engine's redesign has.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import reports

ROOT = Path(__file__).resolve().parents[1]
PART_REPEATS = 5
# The epoch's compiled parts, timed in one process (run with the tree's code on PYTHONPATH).
PARTS_WORKER = """
import json, sys, time
from gelujax import host
host.configure_cpu(2, 15)
import jax, numpy as np
from gelujax import engine, tasks
from gelujax.members import Members
spec = tasks.get("mnist").replace(dataset="fashion_mnist")
rng = np.random.default_rng(0)
def split(n):
  return {"inputs": rng.integers(0, 256, (n, 28, 28, 1)).astype(np.uint8),
          "targets": rng.integers(0, 10, n).astype(np.int32)}
train, evals = split(55000), [split(5000), split(10000)]
members = Members(spec.learning_rates, range(5))
mesh = engine.make_mesh(len(members))
if hasattr(tasks, "build"):  # the engine takes built parts
  program = engine.make_program(tasks.build(spec, {"train": train}), mesh, len(members))
else:  # a revision whose engine took the spec and the split
  program = engine.make_program(spec, mesh, train, len(members))
seeds, lrs = program.put_members(members)
data = program.put_data(train)
state = program.init(seeds, lrs)
evals = [program.put_eval_split(e) for e in evals]
steps = program.steps_per_epoch
def segment():
  global state
  batches = program.shuffle(seeds, np.int32(1))
  try:  # epoch and first_step keyword-only
    state, loss = program.train_segment(
      state, data, batches, seeds, lrs, epoch=np.int32(1), first_step=np.int32(0),
      num_steps=steps)
  except TypeError:  # a revision that took them in place
    state, loss = program.train_segment(
      state, data, batches, seeds, lrs, np.int32(1), np.int32(0), num_steps=steps)
  loss.block_until_ready()
def evaluate():
  [program.mean_metrics(state, e, 1) for e in evals]
def shuffle():
  program.shuffle(seeds, np.int32(1)).block_until_ready()
found = {}
for name, part in (("training segment", segment), ("evaluation", evaluate), ("shuffle", shuffle)):
  part()
  times = []
  for _ in range(int(sys.argv[1])):
    start = time.perf_counter()
    part()
    times.append(time.perf_counter() - start)
  found[name] = float(np.median(times))
print(json.dumps(found))
"""
RESULTS_DIR = Path(__file__).resolve().parent / "results"
sys.path.insert(0, str(ROOT))
ARGS = ["--task=mnist", "--dataset=fashion_mnist"]


@contextlib.contextmanager
def checkout(revision: str, folder: Path):
  """A detached worktree of ``revision`` at ``folder``, removed afterwards."""
  subprocess.run(
    ["git", "worktree", "add", "--detach", str(folder), revision], cwd=ROOT, check=True,
    capture_output=True,
  )  # fmt: skip
  try:
    yield folder
  finally:
    subprocess.run(
      ["git", "worktree", "remove", "--force", str(folder)], cwd=ROOT, capture_output=True
    )


def train(tree: Path, workdir: Path, cache: Path, epochs: int) -> float:
  """Seconds of train.py in ``tree`` for ``epochs`` epochs, from an empty workdir."""
  shutil.rmtree(workdir, ignore_errors=True)
  command = [
    sys.executable, "experiments/train.py", *ARGS, f"--epochs={epochs}", f"--workdir={workdir}",
    f"--compilation_cache={cache}",
  ]  # fmt: skip
  start = time.perf_counter()
  result = subprocess.run(
    command, cwd=tree, env=dict(os.environ, PYTHONPATH=str(tree)), capture_output=True,
    text=True, timeout=900,
  )  # fmt: skip
  seconds = time.perf_counter() - start
  if result.returncode != 0:
    raise RuntimeError(f"train.py in {tree} failed:\n{result.stderr[-2000:]}")
  return seconds


def time_parts(tree: Path) -> dict[str, float]:
  """The medians of `PARTS_WORKER` in ``tree``: seconds of each compiled part of an epoch."""
  result = subprocess.run(
    [sys.executable, "-c", PARTS_WORKER, str(PART_REPEATS)], cwd=tree,
    env=dict(os.environ, PYTHONPATH=str(tree)), capture_output=True, text=True, timeout=900,
  )  # fmt: skip
  if result.returncode != 0:
    raise RuntimeError(f"the parts worker in {tree} failed:\n{result.stderr[-2000:]}")
  return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--before", required=True, help="the git revision to compare with")
  parser.add_argument("--rounds", type=int, default=3)
  parser.add_argument("--output-dir", type=Path, default=RESULTS_DIR)
  parser.add_argument(
    "--parts", action="store_true", help="also time the epoch's compiled parts in one process"
  )
  args = parser.parse_args()
  if args.rounds < 1:
    parser.error(f"--rounds must be at least 1, not {args.rounds}")

  scratch = Path(tempfile.mkdtemp(prefix="gelujax-revisions-"))
  names = {"now": "this checkout", "before": f"before ({args.before})"}
  epoch = {name: [] for name in names.values()}
  parts: dict[str, list[dict[str, float]]] = {name: [] for name in names.values()}
  try:
    with checkout(args.before, scratch / "before") as before:
      trees = {"now": ROOT, "before": before}
      for key, tree in trees.items():  # Warm-up: each tree fills its own compilation cache.
        train(tree, scratch / "workdir", scratch / f"cache-{key}", 1)
      for r in range(args.rounds):
        for key, tree in trees.items():
          one, two = (train(tree, scratch / "workdir", scratch / f"cache-{key}", e) for e in (1, 2))
          epoch[names[key]].append(two - one)
          if args.parts:
            parts[names[key]].append(time_parts(tree))
        print(f"round {r + 1}/{args.rounds}: " + ", ".join(f"{s[-1]:.2f}" for s in epoch.values()))
  finally:
    shutil.rmtree(scratch, ignore_errors=True)
  now, old = epoch[names["now"]], epoch[names["before"]]
  ratio = float(np.median([b / n for n, b in zip(now, old, strict=True)]))
  result = {
    **reports.stamp("python benchmarks/revisions.py " + " ".join(sys.argv[1:])),
    "train_command": "python experiments/train.py " + " ".join(ARGS) + " --epochs=1 (and 2)",
    "rounds": args.rounds,
    "seconds_per_epoch": epoch,
    "speed_ratio_now_over_before": ratio,
  }
  if args.parts:
    result["parts_seconds"] = parts
  args.output_dir.mkdir(parents=True, exist_ok=True)
  (args.output_dir / "revisions.json").write_text(json.dumps(result, indent=2) + "\n")
  lines = [
    *reports.header(
      "Seconds per epoch, this checkout against an earlier revision",
      result,
      f"; {args.rounds} interleaved rounds.",
    ),
    f"Each tree runs `{result['train_command']}` (the task's 15-member grid) in fresh processes "
    "with its own warm compilation cache; an epoch is the two-epoch run's time minus the "
    "one-epoch run's: the compiled steps, evaluations, records and checkpoint of one epoch.",
    "",
    "| tree | s per epoch (median) | all rounds (s) |",
    "|---|---:|---|",
  ]
  for name, times in epoch.items():
    lines.append(f"| {name} | {np.median(times):.2f} | {', '.join(f'{t:.2f}' for t in times)} |")
  lines += [
    "",
    f"Speed of this checkout over the revision's (its epoch time over ours, median of the "
    f"ratios within each round): {ratio:.3f}x.",
  ]
  if args.parts:
    lines += [
      "",
      f"The epoch's compiled parts, each in one process per tree and round (`--parts`: median of "
      f"{PART_REPEATS} calls after a warm-up, random arrays of Fashion-MNIST's shapes, timing "
      "only):",
      "",
      "| part | this checkout (s, median) | before (s, median) | ratio (median of rounds) |",
      "|---|---:|---:|---:|",
    ]
    for part in parts[names["now"]][0]:
      mine = [p[part] for p in parts[names["now"]]]
      theirs = [p[part] for p in parts[names["before"]]]
      ratio_part = float(np.median([b / n for n, b in zip(mine, theirs, strict=True)]))
      lines.append(
        f"| {part} | {np.median(mine):.3f} | {np.median(theirs):.3f} | {ratio_part:.3f}x |"
      )
  (args.output_dir / "revisions.md").write_text("\n".join(lines) + "\n")
  print("\n".join(lines))


if __name__ == "__main__":
  main()
