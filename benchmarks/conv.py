"""Times a convolution's gradients inside a ``lax.scan`` (as the trainer runs steps) and outside.

JAX's own kernel gradient of a convolution runs far slower on XLA:CPU inside a loop than outside
it (jax-ml/jax#12868); ``gelujax.conv.conv_general_dilated`` computes the same numbers from
explicitly transposed operands. For convolutions of the paper's CIFAR networks this times the
gradients (input and kernel) of ``sum(conv(x, k) * g)`` with each, in a scan of ``STEPS`` steps
and as ``STEPS`` separate calls of one jitted step, median of ``ROUNDS`` interleaved rounds.

Usage: python benchmarks/conv.py [--quick] [--output-dir DIR]
Writes DIR/conv.md and conv.json (default DIR: benchmarks/results).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from gelujax.conv import conv_general_dilated
from gelujax.host import describe_machine

RESULTS = Path(__file__).parent / "results"
ROUNDS = 3
STEPS = 2
# name: (batch, height = width, in channels, out channels, kernel size, stride); batch 32 rather
# than the paper's 100 and 128, to keep JAX's VJP in a loop within minutes on a 2-core CPU.
LAYERS = {
  "CIFAR-10 CNN, 3x3 96->96 at 32x32": (32, 32, 96, 96, 3, 1),
  "CIFAR-10 CNN, 3x3 192->192 at 16x16": (32, 16, 192, 192, 3, 1),
  "WRN-40-4, 3x3 64->128 stride 2 at 32x32": (32, 32, 64, 128, 3, 2),
}
QUICK_LAYERS = {"quick, 3x3 8->8 at 8x8": (4, 8, 8, 8, 3, 1)}
CONVS = {"lax (JAX's VJP)": jax.lax.conv_general_dilated, "gelujax": conv_general_dilated}


def make_step(conv, stride: int):
  """One step: the gradients of sum(conv(x, k) * g) with respect to x and k."""

  def objective(x, kernel, g):
    dims = jax.lax.conv_dimension_numbers(x.shape, kernel.shape, ("NHWC", "HWIO", "NHWC"))
    y = conv(x, kernel, (stride, stride), ((1, 1), (1, 1)), dimension_numbers=dims)
    return jnp.sum(y * g)

  return jax.grad(objective, (0, 1))


def time_layer(shape: tuple[int, ...], rounds: int) -> dict[str, list[float]]:
  """Seconds for STEPS steps, per (conv, in scan / separate calls), over ``rounds`` rounds."""
  batch, size, c_in, c_out, k, stride = shape
  rng = np.random.default_rng(0)
  x = jnp.asarray(rng.normal(size=(batch, size, size, c_in)), jnp.float32)
  kernel = jnp.asarray(rng.normal(size=(k, k, c_in, c_out)), jnp.float32)
  out = (size + 2 - k) // stride + 1
  g = jnp.asarray(rng.normal(size=(batch, out, out, c_out)), jnp.float32)
  programs = {}
  for name, conv in CONVS.items():
    step = make_step(conv, stride)

    def scanned(x, kernel, g, step=step):
      return jax.lax.scan(lambda c, _: (c, step(x, kernel, g)), 0, None, length=STEPS)[1]

    in_scan, single = jax.jit(scanned), jax.jit(step)
    programs[f"{name}, in a scan"] = lambda f=in_scan: jax.block_until_ready(f(x, kernel, g))
    programs[f"{name}, separate calls"] = lambda f=single: [
      jax.block_until_ready(f(x, kernel, g)) for _ in range(STEPS)
    ]
  for run in programs.values():  # compile and warm up
    run()
  seconds = {name: [] for name in programs}
  for _ in range(rounds):
    for name, run in programs.items():
      start = time.perf_counter()
      run()
      seconds[name].append(time.perf_counter() - start)
  return seconds


def main(argv: list[str] | None = None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument(
    "--quick", action="store_true", help="one tiny layer, one round (a smoke test)"
  )
  parser.add_argument("--output-dir", type=Path, default=RESULTS)
  args = parser.parse_args(argv)
  layers, rounds = (QUICK_LAYERS, 1) if args.quick else (LAYERS, ROUNDS)
  command = "python benchmarks/conv.py" + (" --quick" if args.quick else "")
  rows = []
  for layer, shape in layers.items():
    print(f"{layer} ...", flush=True)
    for name, seconds in time_layer(shape, rounds).items():
      rows.append({"layer": layer, "contender": name, "seconds": seconds})
  median = {(r["layer"], r["contender"]): statistics.median(r["seconds"]) for r in rows}
  ratios = {
    layer: {
      "lax in a scan / gelujax in a scan": median[layer, "lax (JAX's VJP), in a scan"]
      / median[layer, "gelujax, in a scan"],
      "gelujax in a scan / gelujax separate calls": median[layer, "gelujax, in a scan"]
      / median[layer, "gelujax, separate calls"],
      "gelujax separate calls / lax separate calls": median[layer, "gelujax, separate calls"]
      / median[layer, "lax (JAX's VJP), separate calls"],
    }
    for layer in layers
  }
  result = {
    "command": command,
    "machine": describe_machine(),
    "versions": f"python {platform.python_version()}, jax {jax.__version__}, "
    f"backend {jax.default_backend()}",
    "steps": STEPS,
    "rounds": rounds,
    "rows": rows,
    "ratios": ratios,
  }
  args.output_dir.mkdir(parents=True, exist_ok=True)
  (args.output_dir / "conv.json").write_text(json.dumps(result, indent=1) + "\n")
  lines = [
    "# Convolution gradients in a loop",
    "",
    f"Command: `{command}`  ",
    f"Machine: {result['machine']}; {result['versions']}  ",
    f"Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; seconds for {STEPS} steps "
    f"(input and kernel gradients of one convolution, float32), median of {rounds} interleaved "
    "rounds after a warm-up call; compilation excluded.",
    "",
    "| layer | contender | median (s) | all rounds (s) |",
    "|---|---|---:|---|",
  ]
  for r in rows:
    all_rounds = ", ".join(f"{s:.4g}" for s in r["seconds"])
    lines.append(
      f"| {r['layer']} | {r['contender']} | {median[r['layer'], r['contender']]:.4g} | "
      f"{all_rounds} |"
    )
  lines += ["", "| layer | ratio of medians | value |", "|---|---|---:|"]
  for layer, values in ratios.items():
    lines += [f"| {layer} | {name} | {value:.2f}x |" for name, value in values.items()]
  (args.output_dir / "conv.md").write_text("\n".join(lines) + "\n")
  print("\n".join(lines))


if __name__ == "__main__":
  main()
