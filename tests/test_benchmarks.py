"""Smoke test of benchmarks/activations.py: it runs end to end on tiny arrays."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_activation_benchmark_runs_and_writes_its_report(tmp_path):
  subprocess.run(
    [sys.executable, str(ROOT / "benchmarks" / "activations.py"), "--quick", "--output-dir",
     str(tmp_path)],
    check=True, capture_output=True, text=True, timeout=300,
  )  # fmt: skip
  result = json.loads((tmp_path / "activations.json").read_text())
  cells = {(r["dtype"], r["mode"], r["variant"]) for r in result["throughput"]}
  assert ("bfloat16", "forward+backward", "jax.nn.gelu(approximate=False)") in cells
  assert ("float32", "forward", "copy (x * 2)") in cells
  assert len(cells) == 2 * 2 * 11
  assert all(r["gb_per_s"] > 0 and len(r["times_s"]) == 3 for r in result["throughput"])
  gelu = next(r for r in result["accuracy"] if r["variant"] == "gelujax.gelu")
  assert gelu["value"]["max_ulp"] <= 6 and gelu["derivative"]["max_ulp"] <= 5
  report = (tmp_path / "activations.md").read_text()
  assert (
    "python benchmarks/activations.py --quick" in report and "## Throughput, bfloat16" in report
  )
