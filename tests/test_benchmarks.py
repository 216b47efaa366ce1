"""Smoke tests of the benchmarks: each runs end to end in its --quick mode."""

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

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


@pytest.mark.slow
def test_training_benchmark_runs_and_writes_its_report(tmp_path):
  subprocess.run(
    [sys.executable, str(ROOT / "benchmarks" / "training.py"), "--quick", "--output-dir",
     str(tmp_path)],
    check=True, capture_output=True, text=True, timeout=600,
  )  # fmt: skip
  result = json.loads((tmp_path / "training.json").read_text())
  # tiny_mnist: 784 -> 16 -> 16 -> 10, so 2 * (784*16 + 16*16 + 16*10) FLOPs per example.
  assert result["forward_flops_per_example"] == 25_920
  # The dropout-off pass repeats every layer but the first (shared with the training pass).
  assert result["dropout_off_pass_flops_per_example"] == 2 * (16 * 16 + 16 * 10)
  assert result["examples_per_epoch"] == 320 and result["members"] == 15
  rows = {row["name"]: row for row in result["rows"]}
  one = rows["gelujax, 1 member, 1 device (kernels on every core)"]
  assert one["members"] == 1 and "1 (members) x 1 (data)" in one["layout"]
  per_core = rows["gelujax, 15 members, 1 device per core (members axis)"]
  assert per_core["members"] == 15 and "(members)" in per_core["layout"]
  assert rows["PyTorch tuned (indexed tensors), 2 threads"]["members"] == 1
  assert all(row["median_s"] > 0 and len(row["seconds"]) == 1 for row in rows.values())
  ratio = result["ratios"][
    "grid (1 device (kernels on every core)) / 1 member (1 device (kernels on every core)), "
    "model-epochs per second"
  ]
  grid = rows["gelujax, 15 members, 1 device (kernels on every core)"]["median_s"]
  assert ratio == pytest.approx(15 * one["median_s"] / grid)
  assert all(t["target"] > 0 for t in result["targets"].values())
  report = (tmp_path / "training.md").read_text()
  assert "python benchmarks/training.py --quick" in report and "## Targets" in report


def test_conv_benchmark_runs_and_writes_its_report(tmp_path):
  subprocess.run(
    [sys.executable, str(ROOT / "benchmarks" / "conv.py"), "--quick", "--output-dir",
     str(tmp_path)],
    check=True, capture_output=True, text=True, timeout=300,
  )  # fmt: skip
  result = json.loads((tmp_path / "conv.json").read_text())
  contenders = {row["contender"] for row in result["rows"]}
  assert contenders == {
    f"{conv}, {how}"
    for conv in ("lax (JAX's VJP)", "gelujax")
    for how in ("in a scan", "separate calls")
  }
  assert all(len(row["seconds"]) == 1 and row["seconds"][0] > 0 for row in result["rows"])
  (ratios,) = result["ratios"].values()
  assert set(ratios) == {
    "lax in a scan / gelujax in a scan",
    "gelujax in a scan / gelujax separate calls",
    "gelujax separate calls / lax separate calls",
  }
  assert "python benchmarks/conv.py --quick" in (tmp_path / "conv.md").read_text()


def test_torch_agreement_reads_the_committed_run_and_trains_pytorch(tmp_path):
  subprocess.run(
    [sys.executable, str(ROOT / "benchmarks" / "torch_agreement.py"), "--runs=relu",
     "--epochs=1", "--seeds=2", "--output-dir", str(tmp_path)],
    check=True, capture_output=True, text=True, timeout=300,
  )  # fmt: skip
  result = json.loads((tmp_path / "torch_agreement.json").read_text())
  run = result["runs"]["relu"]
  assert run["activation"] == "relu" and run["dropout"] == 0 and run["learning_rate"] == 1e-3
  metrics = ROOT / "results" / "fashion_mnist" / "mnist" / "runs" / "relu" / "metrics.jsonl"
  records = [json.loads(line) for line in metrics.read_text().splitlines()]
  first = [r for r in records if r["epoch"] == 1.0 and r["learning_rate"] == 1e-3 and r["seed"] < 2]
  for key in ("test_error", "test_loss"):
    (row,) = run[key]
    values = sorted(r[key] for r in first)
    assert row["gelujax_median"] == pytest.approx(sum(values) / 2)
    assert row["gelujax_range"] == pytest.approx(values)
    assert 0 < row["torch_range"][0] <= row["torch_median"] <= row["torch_range"][1]
    assert 0 < row["p"] <= 1
  # One epoch of the real classifier on Fashion-MNIST leaves it far better than chance.
  assert run["test_error"][0]["torch_range"][1] < 0.5
  report = (tmp_path / "torch_agreement.md").read_text()
  assert "python benchmarks/torch_agreement.py --runs=relu --epochs=1" in report


def test_torch_agreement_names_an_unknown_run(tmp_path):
  done = subprocess.run(
    [sys.executable, str(ROOT / "benchmarks" / "torch_agreement.py"), "--runs=swish",
     "--output-dir", str(tmp_path)],
    capture_output=True, text=True, timeout=120,
  )  # fmt: skip
  assert done.returncode == 2
  assert "--runs names 'swish'" in done.stderr and not list(tmp_path.iterdir())


TABLE_ROW = re.compile(
  r"^\| (\d+) \| (test_\w+) \| (\S+) \((\S+)–(\S+)\) \| (\S+) \((\S+)–(\S+)\) \| (\S+) \|$"
)


def test_torch_agreement_report_is_rendered_from_its_committed_json(tmp_path):
  committed = ROOT / "benchmarks" / "results"
  (tmp_path / "torch_agreement.json").write_bytes((committed / "torch_agreement.json").read_bytes())
  subprocess.run(
    [sys.executable, str(ROOT / "benchmarks" / "torch_agreement.py"), "--render",
     "--output-dir", str(tmp_path)],
    check=True, capture_output=True, text=True, timeout=120,
  )  # fmt: skip
  report = (tmp_path / "torch_agreement.md").read_text()
  assert report == (committed / "torch_agreement.md").read_text()
  assert "What is compared: epochs 1–10 of the 50 epochs" in report
  # What the report promises, checked against the committed runs themselves: each table row
  # holds the median and range over seeds of the gelujax run's metrics.jsonl at the run's
  # learning rate (test error in %), and the JSON's PyTorch numbers and p-value; the summary
  # counts the p-values below 0.05.
  result = json.loads((committed / "torch_agreement.json").read_text())
  seeds, epochs = result["seeds"], result["epochs"]
  rows, run = {}, None
  for line in report.splitlines():
    if line.startswith("## "):
      run = line[3:].split(":")[0]
    elif match := TABLE_ROW.match(line):
      rows[(run, int(match[1]), match[2])] = [float(v) for v in match.groups()[2:]]
  assert len(rows) == len(result["runs"]) * epochs * 2
  p_values = []
  for name, run in result["runs"].items():
    records = [json.loads(line) for line in (ROOT / run["workdir"] / "metrics.jsonl").open()]
    for metric, scale in (("test_error", 100), ("test_loss", 1)):
      for epoch in range(1, epochs + 1):
        values = [
          r[metric] for r in records
          if r["epoch"] == epoch and r["learning_rate"] == run["learning_rate"]
          and r["seed"] < seeds
        ]  # fmt: skip
        assert len(values) == seeds
        row, want = rows[(name, epoch, metric)], run[metric][epoch - 1]
        gelujax = [np.median(values), min(values), max(values)]
        assert row[:3] == pytest.approx(np.multiply(scale, gelujax), rel=5e-4)
        torch = [want["torch_median"], *want["torch_range"]]
        assert row[3:6] == pytest.approx(np.multiply(scale, torch), rel=5e-4)
        assert row[6] == pytest.approx(want["p"], rel=5e-2)
        # The exact rank-sum test of 5 seeds a side: p is at least 2 / C(10, 5).
        assert 2 / math.comb(2 * seeds, seeds) - 1e-12 <= want["p"] <= 1
        p_values.append(want["p"])
  below = sum(p < 0.05 for p in p_values)
  assert f"Summary: {below} of {len(p_values)} epoch-and-metric comparisons" in report
