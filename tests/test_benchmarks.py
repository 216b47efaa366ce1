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
  assert result["rounds"] == 1 and result["members"] == 2
  mnist, ae = result["tasks"]["tiny_mnist"], result["tasks"]["mnist_ae"]
  sizes = ("examples_per_epoch", "steps_per_epoch", "batch_size")
  assert [mnist[k] for k in sizes] == [320, 10, 32] and [ae[k] for k in sizes] == [320, 5, 64]
  # A step's products by hand, multiply-adds per example. tiny_mnist, 784 -> 16 -> 16 -> 10:
  # forward and weight gradients of every layer, input gradients of all but the first (the
  # data take none); gelujax's dropout-off pass repeats the forward of all but the first layer
  # (XLA shares that one with the training pass).
  layers = [784 * 16, 16 * 16, 16 * 10]
  torch_step = 2 * 32 * (2 * sum(layers) + sum(layers[1:]))
  gelujax_step = torch_step + 2 * 32 * sum(layers[1:])
  # The quick autoencoder, 784 -> 16 -> 4 -> 16 -> 784 without dropout: no dropout-off pass.
  ae_layers = [784 * 16, 16 * 4, 4 * 16, 16 * 784]
  ae_step = 2 * 64 * (2 * sum(ae_layers) + sum(ae_layers[1:]))
  rows = {row["name"]: row for row in result["rows"]}
  one = rows["gelujax, 1 member, 1 device (kernels on every core)"]
  grid = next(row for name, row in rows.items() if name.startswith("gelujax, 2 members"))
  autoencoder = next(row for name, row in rows.items() if name.startswith("gelujax autoencoder"))
  tuned = rows["PyTorch tuned (indexed tensors), 2 threads"]
  assert one["members"] == 1 and "1 (members) x 1 (data)" in one["layout"]
  assert grid["members"] == 2 and autoencoder["members"] == 2
  limits = {row["name"]: row for row in result["limits"]}
  for row, flops, steps in [
    (one, gelujax_step, 10), (grid, gelujax_step, 10), (autoencoder, ae_step, 5),
    (tuned, torch_step, 10),
  ]:  # fmt: skip
    assert row["flops_per_member_step"] == flops
    assert row["gflop_per_s"] == pytest.approx(
      flops * row["members"] * steps / row["median_s"] / 1e9
    )
    limit = limits[row["limit"]]
    assert sum(p["flops"] for p in limit["products"]) == flops
    if row is not tuned:  # Every member's products, on the contender's own devices, padded.
      devices = int(re.search(r"mesh of (\d+) \(members\)", row["layout"]).group(1))
      assert limit["copies"] == -(-row["members"] // devices) * devices
      assert f"mesh of {devices} (members)" in limit["layout"]
    assert limit["gflop_per_s"] == pytest.approx(
      limit["copies"] * flops * result["limit_steps"] / limit["median_s"] / 1e9
    )
    assert row["limit_fraction"] == pytest.approx(row["gflop_per_s"] / limit["gflop_per_s"])
  assert all(row["median_s"] > 0 and len(row["seconds"]) == 1 for row in rows.values())
  fractions = [t for name, t in result["targets"].items() if "own matrix products" in name]
  assert len(fractions) == 3 and all(t["target"] == 0.8 for t in fractions)
  assert {t["measured"] for t in fractions} == {
    row["limit_fraction"] for row in (one, grid, autoencoder)
  }
  report = (tmp_path / "training.md").read_text()
  assert "python benchmarks/training.py --quick" in report and "## Targets" in report
  assert "of its own products' rate" in report and "matmul 4096" not in report


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
