"""Times loading Fashion-MNIST from local IDX files (target: under 2 s).

Usage: python benchmarks/data.py [DATA_DIR]
Without DATA_DIR the files come from Debian's dataset-fashion-mnist
(/usr/share/datasets/fashion-mnist). Prints the median of 5 loads and writes
benchmarks/results/data.md and data.json.
"""

import json
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from gelujax import data

REPEATS = 5
RESULTS = Path(__file__).parent / "results"


def time_load(data_dir: str | None) -> tuple[list[float], data.Splits]:
  """Seconds per load over REPEATS loads (the first one included: files may be cold)."""
  seconds = []
  for _ in range(REPEATS):
    start = time.perf_counter()
    splits = data.load("fashion_mnist", data_dir)
    seconds.append(time.perf_counter() - start)
  return seconds, splits


def main() -> None:
  data_dir = sys.argv[1] if len(sys.argv) > 1 else None
  seconds, splits = time_load(data_dir)
  median = statistics.median(seconds)
  sizes = {k: len(v["targets"]) for k, v in splits.items()}
  megabytes = sum(a.nbytes for split in splits.values() for a in split.values()) / 2**20
  command = "python benchmarks/data.py" + (f" {data_dir}" if data_dir else "")
  print(f"fashion_mnist from {splits.info['source']}: median {median:.3f} s over {REPEATS} loads")
  report = {
    "benchmark": "data.load('fashion_mnist') from local IDX files",
    "command": command,
    "source": splits.info["source"],
    "repeats": REPEATS,
    "seconds": [round(s, 4) for s in seconds],
    "median_seconds": round(median, 4),
    "splits": sizes,
    "megabytes_in_memory": round(megabytes, 1),
    "machine": f"{platform.machine()}, {platform.processor() or 'unknown cpu'}, "
    f"python {platform.python_version()}, numpy {np.__version__}",
  }
  RESULTS.mkdir(exist_ok=True)
  (RESULTS / "data.json").write_text(json.dumps(report, indent=2) + "\n")
  (RESULTS / "data.md").write_text(
    "# Data loading benchmark\n\n"
    f"Command: `{command}`\n\n"
    "| dataset | source | splits | in memory | median load (s) | all loads (s) |\n"
    "|---|---|---|---|---|---|\n"
    f"| fashion_mnist | {report['source']} | {sizes} | {megabytes:.1f} MiB | "
    f"{median:.3f} | {', '.join(f'{s:.3f}' for s in seconds)} |\n\n"
    f"Target: under 2 s. Machine: {report['machine']} (2 cores shared with other jobs).\n"
  )


if __name__ == "__main__":
  main()
