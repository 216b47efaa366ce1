"""Training speed of one member against a grid of 15 on the paper's MNIST MLP.

One epoch of `mnist` (784 -> 8x128 -> 10, batch 128) over 55,000 synthetic images, timed
after compilation for a run of 1 member and one of 15 (3 learning rates x 5 seeds), the two
alternated so that both see the same machine load. Prints seconds per epoch and model-epochs
per second (members x epochs / seconds) for each, and their ratio:

  python benchmarks/trainer_members.py [--dropout=0.5] [--epochs=3]
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np

# This checkout's gelujax, not an installed one.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from gelujax import tasks, trainer


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--dropout", type=float, default=0.5, help="drop rate (paper: 0 or 0.5)")
  parser.add_argument("--epochs", type=int, default=3, help="timed epochs per run")
  args = parser.parse_args()
  spec = tasks.get("mnist").replace(dropout=args.dropout)
  rng = np.random.default_rng(0)
  train = {
    "inputs": rng.integers(0, 256, (55_000, 28, 28, 1), dtype=np.uint8),
    "targets": rng.integers(0, 10, 55_000).astype(np.int32),
  }
  mesh = trainer.make_mesh()
  runs = {}
  for num_members in (1, 15):
    # The trainer's compiled program, without fit's evaluation and checkpoints.
    program = trainer._Program(spec, mesh, train)
    members = [{"seed": i, "learning_rate": 1e-3} for i in range(num_members)]
    seeds, learning_rates = trainer._put_members(members, mesh)
    data = {k: trainer.put_replicated(v, mesh) for k, v in train.items()}
    runs[num_members] = [program, seeds, learning_rates, data, program.init(seeds, learning_rates)]
  seconds = {m: [] for m in runs}
  for epoch in range(1, args.epochs + 2):  # The first epoch compiles.
    for num_members, run in runs.items():
      program, seeds, learning_rates, data, state = run
      start = time.perf_counter()
      batches = program.shuffle(seeds, np.int32(epoch))
      run[4], loss = program.train_segment(
        state, data, batches, seeds, learning_rates, np.int32(epoch), np.int32(0),
        num_steps=program.steps_per_epoch,
      )  # fmt: skip
      loss.block_until_ready()
      if epoch > 1:
        seconds[num_members].append(time.perf_counter() - start)
  rates = {}
  for num_members, times in seconds.items():
    rates[num_members] = num_members / min(times)
    print(
      f"{num_members:2d} member(s), dropout {args.dropout}: {min(times):.2f} s/epoch (median "
      f"{np.median(times):.2f}), {rates[num_members]:.3f} model-epochs/s"
    )
  print(f"15 members vs 1: {rates[15] / rates[1]:.2f}x model-epochs/s")


if __name__ == "__main__":
  main()
