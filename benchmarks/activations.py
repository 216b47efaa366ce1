"""Throughput and accuracy of gelujax's activations next to jax.nn's, on this machine.

Forward (``y = f(x)``) and forward+backward (``y, dx = f(x), f'(x) * g`` from ``jax.vjp`` in
one jitted program) throughput on float32 and bfloat16 arrays, for every gelujax variant and for
``jax.nn.gelu(approximate=False)``, ``jax.nn.gelu(approximate=True)``, ``jax.nn.relu`` and a copy
kernel (``x * 2``, the memory-bandwidth reference). All cells are timed in interleaved rounds
(every cell once per round) so that load from other processes hits them alike; the report gives
medians, GB/s (bytes read + written) and the time relative to the copy kernel. The accuracy
tables compare float32 and bfloat16 values and derivatives with float64 references (max ulp in
the dtype's own spacing, abs, rel error); bfloat16 over every finite bfloat16 number.

Run: python benchmarks/activations.py            (16M elements, 15 rounds; writes the report)
     python benchmarks/activations.py --quick    (a tiny smoke run)
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from scipy import special

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import gelujax
from gelujax.host import describe_machine

RESULTS_DIR = Path(__file__).resolve().parent / "results"
F32_TINY = float(np.finfo(np.float32).smallest_normal)

VARIANTS: dict[str, Callable] = {
  "gelujax.gelu": gelujax.gelu,
  "gelujax.gelu_tanh": gelujax.gelu_tanh,
  "gelujax.gelu_sigmoid": gelujax.gelu_sigmoid,
  "gelujax.gaussian_gelu": functools.partial(gelujax.gaussian_gelu, mu=0.0, sigma=1.0),
  "gelujax.silu": gelujax.silu,
  "gelujax.elu": gelujax.elu,
  "gelujax.relu": gelujax.relu,
  "jax.nn.gelu(approximate=False)": functools.partial(jax.nn.gelu, approximate=False),
  "jax.nn.gelu(approximate=True)": functools.partial(jax.nn.gelu, approximate=True),
  "jax.nn.relu": jax.nn.relu,
  "copy (x * 2)": lambda x: x * 2,
}
DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}


def ref_gelu(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  pdf = np.exp(-0.5 * x * x) / np.sqrt(2 * np.pi)
  return x * special.ndtr(x), special.ndtr(x) + x * pdf


def ref_gelu_tanh(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  c = np.sqrt(2 / np.pi)
  two_u = 2 * c * (x + 0.044715 * x**3)
  s, s_neg = special.expit(two_u), special.expit(-two_u)
  return x * s, s + x * s * s_neg * 2 * c * (1 + 3 * 0.044715 * x**2)


def ref_scaled_silu(k: float, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  s, s_neg = special.expit(k * x), special.expit(-k * x)
  return x * s, s + k * x * s * s_neg


# variant -> (float64 reference of the formula it implements, its label)
ACCURACY = {
  "gelujax.gelu": (ref_gelu, "x Phi(x)"),
  "jax.nn.gelu(approximate=False)": (ref_gelu, "x Phi(x)"),
  "gelujax.gelu_tanh": (ref_gelu_tanh, "tanh form"),
  "jax.nn.gelu(approximate=True)": (ref_gelu_tanh, "tanh form"),
  "gelujax.gelu_sigmoid": (functools.partial(ref_scaled_silu, 1.702), "x sigma(1.702x)"),
  "gelujax.silu": (functools.partial(ref_scaled_silu, 1.0), "x sigma(x)"),
}


def build_programs(fn: Callable) -> tuple[Callable, Callable]:
  """Jitted forward ``x -> f(x)`` and forward+backward ``(x, g) -> (f(x), vjp(g))``."""

  def forward_backward(x, g):
    y, vjp = jax.vjp(fn, x)
    return y, vjp(g)[0]

  return jax.jit(fn), jax.jit(forward_backward)


def measure_throughput(size: int, rounds: int) -> list[dict]:
  """Median wall time of every (dtype, mode, variant) cell over interleaved rounds."""
  key_x, key_g = jax.random.split(jax.random.key(0))
  cells = []
  for dtype_name, dtype in DTYPES.items():
    x = (3 * jax.random.normal(key_x, (size,), jnp.float32)).astype(dtype)
    g = jax.random.normal(key_g, (size,), jnp.float32).astype(dtype)
    for name, fn in VARIANTS.items():
      forward, forward_backward = build_programs(fn)
      for mode, program, args, arrays in [
        ("forward", forward, (x,), 2),
        ("forward+backward", forward_backward, (x, g), 4),
      ]:
        jax.block_until_ready(program(*args))  # compile and warm up
        cells.append(
          dict(
            dtype=dtype_name,
            mode=mode,
            variant=name,
            program=program,
            args=args,
            bytes=arrays * size * x.dtype.itemsize,
            times=[],
          )
        )
  for _ in range(rounds):
    for cell in cells:
      start = time.perf_counter()
      jax.block_until_ready(cell["program"](*cell["args"]))
      cell["times"].append(time.perf_counter() - start)
  rows = []
  for cell in cells:
    median = float(np.median(cell["times"]))
    rows.append(
      dict(
        dtype=cell["dtype"],
        mode=cell["mode"],
        variant=cell["variant"],
        median_s=median,
        min_s=float(np.min(cell["times"])),
        gb_per_s=cell["bytes"] / median / 1e9,
        times_s=cell["times"],
      )
    )
  for row in rows:
    copy = next(
      r for r in rows
      if r["variant"] == "copy (x * 2)" and r["dtype"] == row["dtype"] and r["mode"] == row["mode"]
    )  # fmt: skip
    row["time_vs_copy"] = row["median_s"] / copy["median_s"]
  return rows


def accuracy_grid(points: int) -> np.ndarray:
  """float32 points over the whole range: dense in [-14, 14], log-spaced magnitudes beyond."""
  magnitudes = np.logspace(-38, np.log10(3e38), points // 10)
  grid = np.concatenate([np.linspace(-14, 14, points), magnitudes, -magnitudes])
  return np.unique(grid.astype(np.float32))


def bfloat16_grid() -> np.ndarray:
  """Every finite bfloat16 number (as float32; 65,280 of them with both zeros)."""
  bits = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
  values = bits.view(ml_dtypes.bfloat16).astype(np.float32)
  return np.unique(values[np.isfinite(values)])


def error_stats(x: np.ndarray, y: np.ndarray, ref: np.ndarray, dtype=np.float32) -> dict:
  """Max ulp, abs and rel error of ``y`` (computed in ``dtype``) against float64 ``ref``.

  An ulp is the spacing of ``dtype`` at the reference rounded to ``dtype`` (float32: 2^-23
  relative, bfloat16: 2^-7). ulp and relative errors count only where ``ref`` is a normal
  number (bfloat16 has float32's exponent range), over the whole range and over |x| <= 10
  (where underflow in intermediates does not enter yet).
  """
  y = np.asarray(y, np.float64)
  normal = np.abs(ref) >= F32_TINY
  err = np.abs(y - ref)
  spacing = np.spacing(np.abs(ref).astype(dtype)).astype(np.float64)
  ulp = np.where(normal, err / np.where(normal, spacing, 1.0), 0)
  core = np.abs(x) <= 10
  return dict(
    max_ulp=float(ulp.max()),
    worst_x=float(x[np.argmax(ulp)]),
    max_ulp_within_10=float(ulp[core].max()),
    worst_x_within_10=float(x[core][np.argmax(ulp[core])]),
    max_abs=float(err.max()),
    max_rel=float((err[normal] / np.abs(ref[normal])).max()),
  )


def measure_accuracy(points: int) -> list[dict]:
  """Each variant's value and derivative in float32 (on `accuracy_grid`) and in bfloat16 (on
  every finite bfloat16 number; inputs, computation and outputs in bfloat16) against float64
  references at the same inputs."""
  grids = {"float32": accuracy_grid(points), "bfloat16": bfloat16_grid()}
  numpy_dtypes = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16}
  rows = []
  for dtype, x in grids.items():
    x64 = x.astype(np.float64)
    for name, (ref, label) in ACCURACY.items():
      inputs = jnp.asarray(x, DTYPES[dtype])
      y, dy = jax.jit(jax.vmap(jax.value_and_grad(VARIANTS[name])))(inputs)
      assert y.dtype == dy.dtype == DTYPES[dtype], (name, dtype, y.dtype, dy.dtype)
      ref_y, ref_dy = ref(x64)
      row = dict(variant=name, reference=label, dtype=dtype, points=len(x))
      for part, value, expected in [("value", y, ref_y), ("derivative", dy, ref_dy)]:
        row[part] = error_stats(x, np.asarray(value, np.float64), expected, numpy_dtypes[dtype])
      exact = ref_gelu(x64)[0]
      row["max_abs_vs_exact_gelu"] = float(np.abs(np.asarray(y, np.float64) - exact).max())
      rows.append(row)
  return rows


def write_report(result: dict, output_dir: Path) -> None:
  output_dir.mkdir(parents=True, exist_ok=True)
  (output_dir / "activations.json").write_text(json.dumps(result, indent=1) + "\n")
  lines = [
    "# Activation benchmark",
    "",
    f"Command: `{result['command']}`  ",
    f"Machine: {result['machine']}  ",
    f"Date: {result['date']}; {result['size']:,} elements, median of {result['rounds']} "
    "interleaved rounds (wall clock).  ",
    f"Load average (1 min) before / after timing: {result['load_average'][0]:.2f} / "
    f"{result['load_average'][1]:.2f} (other processes share this machine's cores).",
    "",
    "GB/s counts bytes read + written (forward: x, y; forward+backward: x, g, y, dx); "
    "'x copy' is the median time relative to the copy kernel of the same dtype and mode.",
    "",
    "## Exact GELU next to jax.nn.gelu",
    "",
    "Time of gelujax.gelu divided by the time of each jax.nn.gelu form: medians over rounds of "
    "the ratio of times measured in the same round (below 1 is faster). The goal: exact GELU "
    "never slower than the tanh approximation, forward+backward, so that nobody needs the "
    "approximation for speed.",
    "",
    "| dtype | mode | / jax.nn.gelu(approximate=True) | / jax.nn.gelu(approximate=False) |",
    "|---|---|---:|---:|",
  ]
  for target in result["targets"]:
    lines.append(
      f"| {target['dtype']} | {target['mode']} | **{target['vs_tanh']:.2f}** | "
      f"{target['vs_exact']:.2f} |"
    )
  for dtype in DTYPES:
    lines += ["", f"## Throughput, {dtype}", ""]
    lines += ["| variant | forward ms | GB/s | x copy | fwd+bwd ms | GB/s | x copy |"]
    lines += ["|---|---:|---:|---:|---:|---:|---:|"]
    for name in VARIANTS:
      cells = [
        next(r for r in result["throughput"] if (r["dtype"], r["mode"], r["variant"]) == key)
        for key in [(dtype, "forward", name), (dtype, "forward+backward", name)]
      ]
      lines.append(
        f"| {name} | "
        + " | ".join(
          f"{c['median_s'] * 1e3:.1f} | {c['gb_per_s']:.2f} | {c['time_vs_copy']:.2f}"
          for c in cells
        )
        + " |"
      )
  lines += [
    "",
    "## Accuracy vs float64, float32 and bfloat16",
    "",
    f"float32: {result['accuracy_points']:,} points, dense in [-14, 14] plus log-spaced "
    "magnitudes up to 3e38. bfloat16: every finite bfloat16 number, each variant computed on "
    "bfloat16 arrays (its value and derivative in bfloat16, as a bfloat16 model computes them). "
    "An ulp is the dtype's own spacing at the reference (bfloat16 keeps 8 significant bits: "
    "2^-7 relative, against 2^-23 for float32). ulp and relative errors are taken where the "
    "reference is a normal number (XLA flushes subnormals to zero on CPU, so an intermediate "
    "that underflows early shows up in the 'all x' columns); 'vs exact' is the max abs "
    "difference from x Phi(x) (float64).",
    "",
    "| dtype | variant | reference | value max ulp, abs(x) <= 10 (at x) | all x (at x) | abs | rel "
    "| derivative max ulp, abs(x) <= 10 (at x) | all x (at x) | abs | rel | value abs vs exact |",
    "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
  ]
  for row in result["accuracy"]:
    cells = [row["dtype"], row["variant"], row["reference"]]
    for stats in (row["value"], row["derivative"]):
      cells += [
        f"{stats['max_ulp_within_10']:.1f} ({stats['worst_x_within_10']:.4g})",
        f"{stats['max_ulp']:.3g} ({stats['worst_x']:.4g})",
        f"{stats['max_abs']:.2e}",
        f"{stats['max_rel']:.2e}",
      ]
    lines.append("| " + " | ".join([*cells, f"{row['max_abs_vs_exact_gelu']:.2e}"]) + " |")
  (output_dir / "activations.md").write_text("\n".join(lines) + "\n")


def summarize_targets(rows: list[dict]) -> list[dict]:
  """gelujax.gelu's time relative to both jax.nn.gelu forms, per dtype and mode, as medians
  over rounds of same-round ratios.

  Pairing by round cancels most of the drift in machine load between rounds (other processes
  on a shared machine), which medians of separately collected times do not.
  """

  def times(dtype, mode, variant):
    key = (dtype, mode, variant)
    return np.array(
      next(r["times_s"] for r in rows if (r["dtype"], r["mode"], r["variant"]) == key)
    )

  targets = []
  for dtype in DTYPES:
    for mode in ("forward", "forward+backward"):
      gelu = times(dtype, mode, "gelujax.gelu")
      tanh = times(dtype, mode, "jax.nn.gelu(approximate=True)")
      exact = times(dtype, mode, "jax.nn.gelu(approximate=False)")
      targets.append(
        dict(
          dtype=dtype,
          mode=mode,
          vs_tanh=float(np.median(gelu / tanh)),
          vs_exact=float(np.median(gelu / exact)),
        )
      )
  return targets


def main(argv: list[str] | None = None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--size", type=int, default=1 << 24, help="elements per array")
  parser.add_argument("--rounds", type=int, default=15, help="interleaved timing rounds")
  parser.add_argument("--accuracy-points", type=int, default=2_000_001)
  parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke test")
  parser.add_argument("--output-dir", type=Path, default=RESULTS_DIR)
  args = parser.parse_args(argv)
  if args.quick:
    args.size, args.rounds, args.accuracy_points = 4096, 3, 20_001
  if args.size < 1 or args.rounds < 1:
    raise ValueError(f"--size ({args.size}) and --rounds ({args.rounds}) must be positive.")
  command = "python benchmarks/activations.py" + (
    " " + " ".join(sys.argv[1:]) if argv is None else ""
  )
  load_before = os.getloadavg()[0]
  throughput = measure_throughput(args.size, args.rounds)
  result = dict(
    command=command.strip(),
    machine=describe_machine(),
    date=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    size=args.size,
    rounds=args.rounds,
    load_average=[load_before, os.getloadavg()[0]],
    accuracy_points=args.accuracy_points,
    targets=summarize_targets(throughput),
    throughput=throughput,
    accuracy=measure_accuracy(args.accuracy_points),
  )
  write_report(result, args.output_dir)
  print((args.output_dir / "activations.md").read_text())


if __name__ == "__main__":
  main()
