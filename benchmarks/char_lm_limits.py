"""What bounds the character-level GPT's training step on this CPU: the step of one member
(gelujax's and nanoGPT's, as `char_lm_speed` times them) against the matrix products it is made
of, each timed alone at the shapes the step runs, in JAX and in PyTorch.

A step of nanoGPT's CPU configuration (12 windows of 64 characters, 4 blocks of width 128 with 4
heads, feed-forward 512, 65 characters) multiplies matrices of a few hundred rows: per block the
query-key-value projection, the attention's scores and weighted values (one product per window
and head), its output projection and the feed-forward's two layers, then the head; each forward
product (M x K) @ (K x N) has two in the backward pass, (M x N) @ (N x K) for the input's
gradient and (K x M) @ (M x N) for the weight's (:func:`step_products`). Their time, each
product timed alone and summed over a step (:func:`bound`), is what a step costs if nothing but
its products took time: the fastest step these kernels allow, whichever framework calls them.
A square product of 1024 gives the rate the cores reach on large matrices.

Model FLOPs: nanoGPT's own estimate (``GPT.estimate_mfu``: 6 N + 12 L H Q T a token, N the
parameters less the position embeddings), the same for both frameworks.

Run: python benchmarks/char_lm_limits.py --nanogpt=PATH --data_dir=PATH
     python benchmarks/char_lm_limits.py --render      (the .md again from the .json)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
RESULTS_DIR = Path(__file__).resolve().parent / "results"

import char_lm_speed  # noqa: E402
import reports  # noqa: E402

# nanoGPT's CPU configuration, as `gelujax.tasks.char_lm_task` trains it.
BATCH, BLOCK, LAYERS, HEADS, WIDTH, HIDDEN, VOCAB = 12, 64, 4, 4, 128, 512, 65
SQUARE = ("square, for the cores' rate on large matrices", 1, 1, 1024, 1024, 1024)


def forward_products() -> list[tuple[str, int, int, int, int, int]]:
  """The forward pass's matrix products: (name, count a step, B, M, K, N), B products
  (M x K) @ (K x N) in one batched call (the attention's: one a window and head)."""
  tokens, head, windows = BATCH * BLOCK, WIDTH // HEADS, BATCH * HEADS
  return [
    ("query, key, value", LAYERS, 1, tokens, WIDTH, 3 * WIDTH),
    ("attention scores", LAYERS, windows, BLOCK, head, BLOCK),
    ("attention values", LAYERS, windows, BLOCK, BLOCK, head),
    ("attention output", LAYERS, 1, tokens, WIDTH, WIDTH),
    ("feed-forward in", LAYERS, 1, tokens, WIDTH, HIDDEN),
    ("feed-forward out", LAYERS, 1, tokens, HIDDEN, WIDTH),
    ("head", 1, 1, tokens, WIDTH, VOCAB),
  ]


def step_products() -> list[tuple[str, int, int, int, int, int]]:
  """Every product of a training step: each forward product and its two backward ones, the
  input's gradient (M x N) @ (N x K) and the weight's (K x M) @ (M x N)."""
  found = []
  for name, count, b, m, k, n in forward_products():
    found += [
      (name, count, b, m, k, n),
      (f"{name}, input gradient", count, b, m, n, k),
      (f"{name}, weight gradient", count, b, k, m, n),
    ]
  return found


def step_flops(products) -> int:
  """The multiply-adds of ``products`` as FLOPs: 2 B M K N each, times its count."""
  return sum(2 * count * b * m * k * n for _, count, b, m, k, n in products)


def _key(b: int, m: int, k: int, n: int) -> str:
  return f"{b}x{m}x{k}x{n}"


def model_flops_per_step(parameters: int) -> float:
  """nanoGPT's estimate of a step's FLOPs (``estimate_mfu``): (6 N + 12 L H Q T) per token,
  times the step's tokens; ``parameters`` N without the position embeddings."""
  per_token = 6 * parameters + 12 * LAYERS * HEADS * (WIDTH // HEADS) * BLOCK
  return per_token * BATCH * BLOCK


def time_products(products, repeats: int, calls: int) -> dict[str, dict[str, float]]:
  """Seconds of one call of each distinct (B, M, K, N), median of ``repeats`` timings of
  ``calls`` calls, in JAX (a jitted product, float32, blocked on at the end) and in PyTorch."""
  import jax
  import jax.numpy as jnp
  import numpy as np
  import torch

  product = jax.jit(jnp.matmul)
  found: dict[str, dict[str, float]] = {}
  rng = np.random.default_rng(0)
  for batch, m, k, n in sorted({tuple(p[2:]) for p in products}):
    a = rng.standard_normal((batch, m, k), np.float32)
    b = rng.standard_normal((batch, k, n), np.float32)
    ja, jb = jnp.asarray(a), jnp.asarray(b)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    product(ja, jb).block_until_ready()  # compile
    times = {"jax": [], "torch": []}
    for _ in range(repeats):
      begin = time.perf_counter()
      for _ in range(calls):
        out = product(ja, jb)
      out.block_until_ready()
      times["jax"].append((time.perf_counter() - begin) / calls)
      begin = time.perf_counter()
      for _ in range(calls):
        torch.matmul(ta, tb)
      times["torch"].append((time.perf_counter() - begin) / calls)
    found[_key(batch, m, k, n)] = {name: statistics.median(t) for name, t in times.items()}
  return found


def bound(products, seconds: dict[str, dict[str, float]], framework: str) -> float:
  """A step's seconds were its products all it did: each product's time alone, summed."""
  return sum(count * seconds[_key(b, m, k, n)][framework] for _, count, b, m, k, n in products)


def measure(args) -> dict:
  from gelujax import host

  devices = host.configure_cpu("auto", 1)
  from gelujax import tasks

  spec = tasks.get("char_lm")
  splits = spec.load_data(args.data_dir)
  runs = {}
  runs["gelujax"], parameters, _ = char_lm_speed.time_gelujax(spec, splits, 1, args.steps)
  found = {"cpu_devices": devices, "gelujax_parameters": parameters}
  if args.nanogpt:
    runs["nanogpt"], theirs, threads = char_lm_speed.time_nanogpt(args.nanogpt, splits, args.steps)
    found.update(nanogpt_parameters=theirs, torch_threads=threads)
  for run in runs.values():
    run()  # compile, allocate
  seconds = {name: [] for name in runs}
  for _ in range(args.repeats):
    for name, run in runs.items():
      seconds[name].append(run() / args.steps)
  found["step_seconds"] = {name: statistics.median(t) for name, t in seconds.items()}
  products = step_products()
  square = [SQUARE]
  found["product_seconds"] = time_products(products + square, args.repeats, args.calls)
  return found


def render(record: dict) -> str:
  lines = reports.header("Character-level GPT: what bounds a training step on this CPU", record)
  products = step_products()
  seconds = record["product_seconds"]
  flops = step_flops(products)
  model = model_flops_per_step(record.get("nanogpt_parameters", 804_096) - BLOCK * WIDTH)
  lines += [
    f"One member, {record['steps']} steps a timing, {record['repeats']} timings, the two "
    "frameworks alternating; each product timed alone, "
    f"{record['calls']} calls a timing; medians. A step's products: {flops / 1e9:.2f} GFLOP "
    f"(2 M K N each); nanoGPT's model estimate: {model / 1e9:.2f} GFLOP a step.",
    "",
    "| product (forward, and its backward) | per step | B x M x K x N | JAX ms | PyTorch ms | "
    "JAX GFLOP/s | PyTorch GFLOP/s |",
    "|---|---|---|---|---|---|---|",
  ]
  for name, count, b, m, k, n in [*products, SQUARE]:
    t = seconds[_key(b, m, k, n)]
    rate = {f: 2 * b * m * k * n / t[f] / 1e9 for f in ("jax", "torch")}
    lines.append(
      f"| {name} | {count} | {b} x {m} x {k} x {n} | {1e3 * t['jax']:.3f} | "
      f"{1e3 * t['torch']:.3f} | {rate['jax']:.1f} | {rate['torch']:.1f} |"
    )
  steps = record["step_seconds"]
  lines += [
    "",
    "| | step ms | model GFLOP/s | the step's products alone, JAX's kernels (ms) | "
    "PyTorch's (ms) | share of the step in products |",
    "|---|---|---|---|---|---|",
  ]
  floor = {f: bound(products, seconds, f) for f in ("jax", "torch")}
  kernel = {"gelujax": "jax", "nanogpt": "torch"}
  for name, step in steps.items():
    lines.append(
      f"| {name} | {1e3 * step:.1f} | {model / step / 1e9:.1f} | {1e3 * floor['jax']:.1f} | "
      f"{1e3 * floor['torch']:.1f} | {floor[kernel[name]] / step:.0%} |"
    )
  if "nanogpt" in steps:
    theirs = steps["nanogpt"]
    lines += [
      "",
      f"nanoGPT's step over the products' time alone: with JAX's kernels (XLA's, which "
      f"gelujax's step calls) **{theirs / floor['jax']:.2f}x**, with PyTorch's "
      f"{theirs / floor['torch']:.2f}x: the most a step that multiplies these matrices with "
      "those kernels could gain on nanoGPT's were everything else free (a product timed alone "
      "also pays one dispatch, which a compiled step does not, so these ratios are a little "
      "low). "
      f"gelujax's step is {theirs / steps['gelujax']:.2f}x nanoGPT's speed here.",
    ]
  return "\n".join([*lines, ""])


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--nanogpt", default=None, help="a checkout of karpathy/nanoGPT")
  parser.add_argument("--data_dir", default=None)
  parser.add_argument("--steps", type=int, default=50)
  parser.add_argument("--repeats", type=int, default=5)
  parser.add_argument("--calls", type=int, default=50)
  parser.add_argument("--name", default="char_lm_limits")
  parser.add_argument("--out", default=str(RESULTS_DIR))
  parser.add_argument("--render", action="store_true")
  args = parser.parse_args()
  out = Path(args.out)
  if args.render:
    record = json.loads((out / f"{args.name}.json").read_text())
  else:
    command = "python benchmarks/char_lm_limits.py " + " ".join(sys.argv[1:])
    record = {**reports.stamp(command), "steps": args.steps, "repeats": args.repeats}
    record.update(calls=args.calls, **measure(args))
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{args.name}.json").write_text(json.dumps(record, indent=1) + "\n")
  (out / f"{args.name}.md").write_text(render(record))
  print(render(record))


if __name__ == "__main__":
  main()
