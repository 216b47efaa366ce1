"""Smoke tests of the benchmarks: each runs end to end in its --quick mode."""

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

# End to end (commands, processes, whole runs): the full suite runs it, the fast tier not.
pytestmark = pytest.mark.e2e

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


# Modules the GPU machine's image lacks (or may lack): the accelerator benchmark must run
# without them, so its smoke run imports none of them.
ABSENT_ON_THE_DEVICE = (
  "tensorflow_datasets", "array_record", "tensorboardX", "torch", "scipy", "matplotlib",
  "tensorflow",
)  # fmt: skip
RUN_WITHOUT = """
import importlib.abc, runpy, sys

class Absent(importlib.abc.MetaPathFinder):
  def find_spec(self, name, path=None, target=None):
    if name.split(".")[0] in {absent!r}:
      raise ImportError(f"{{name}} is not installed on the device")

sys.meta_path.insert(0, Absent())
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def test_train_py_without_the_devices_missing_modules_says_where_it_looked(tmp_path):
  """On the GPU image (no tensorflow-datasets) train.py with no data found ended in a
  ModuleNotFoundError traceback: TFDS is one source, absent there like any other."""
  env = dict(
    os.environ, JAX_PLATFORMS="cpu", GELUJAX_OFFLINE="1", GELUJAX_DATA_DIR=str(tmp_path / "cache"),
    PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "experiments")]),
  )  # fmt: skip
  done = subprocess.run(
    [sys.executable, "-c", RUN_WITHOUT.format(absent=set(ABSENT_ON_THE_DEVICE)),
     str(ROOT / "experiments" / "train.py"), "--task=tiny_mnist", f"--workdir={tmp_path / 'w'}"],
    capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env,
  )  # fmt: skip
  assert done.returncode == 1, done.stderr[-3000:]
  (line,) = [line for line in done.stderr.splitlines() if line.strip()]
  # After the task's other data sets that are here, if any (Debian's Fashion-MNIST).
  assert line.startswith("train.py: error: ")
  assert "Cannot load dataset 'mnist': no source has it." in line
  assert (
    "TFDS 'mnist' (data_dir TFDS default, ~/tensorflow_datasets) (tensorflow-datasets is not "
    "installed (ImportError: tensorflow_datasets is not installed on the device))"
  ) in line


def test_accelerator_benchmark_runs_without_the_modules_the_device_lacks(tmp_path):
  done = subprocess.run(
    [sys.executable, "-c", RUN_WITHOUT.format(absent=set(ABSENT_ON_THE_DEVICE)),
     str(ROOT / "benchmarks" / "accelerator.py"), "--quick", "--out", str(tmp_path)],
    capture_output=True, text=True, timeout=300, cwd=tmp_path,
  )  # fmt: skip
  assert done.returncode == 0, done.stderr[-3000:]
  result = json.loads((tmp_path / "accelerator.json").read_text())
  assert result["device"]["platform"] == "cpu" and result["settings"]["steps"] == 5
  # The correctness check: here the device is the CPU, so its two runs are one program run twice
  # and agree bitwise; its losses are those of real training steps.
  check = result["check"]
  assert check["passed"] and check["members"] == 2 and check["steps"] == 10
  (run,) = check["runs"].values()
  assert run["loss_max_abs"] == 0 and run["param_distance"] == 0 and run["finite"]
  losses = np.array(run["losses_cpu"])
  assert losses.shape == (10, 2) and 1.5 < losses[0].min() and losses[0].max() < 3.5
  # Both members' parameters: 784 -> 16 -> 16 -> 10, kernels and biases.
  assert run["param_movement"] > 0 and run["parameters"] == 2 * (785 * 16 + 17 * 16 + 17 * 10)
  rows = {row["name"]: row for row in result["configs"]}
  assert list(rows) == [
    "tiny_mnist, 2 members, float32",
    "tiny_mnist, 2 members, bfloat16",
    "mnist_ae (autoencoder_tiny), 1 member, float32",
  ]
  assert all(row["status"] == "done" and row["diverged_members"] == 0 for row in rows.values())
  # A step's products by hand, multiply-adds per example (as the training benchmark's test):
  # tiny_mnist at dropout 0.5 with its dropout-off pass, and the tiny autoencoder.
  layers = [784 * 16, 16 * 16, 16 * 10]
  mnist_step = 2 * 32 * (2 * sum(layers) + 2 * sum(layers[1:]))
  ae_layers = [784 * 16, 16 * 4, 4 * 16, 16 * 784]
  ae_step = 2 * 64 * (2 * sum(ae_layers) + sum(ae_layers[1:]))
  for name, row in rows.items():
    flops, spe = (ae_step, 5) if name.startswith("mnist_ae") else (mnist_step, 10)
    assert row["flops_per_member_step"] == flops and row["steps_per_epoch"] == spe
    assert row["steps_timed"] == 5 and len(row["seconds"]) == 2
    assert row["step_s"] == pytest.approx(np.median(row["seconds"]) / 5)
    assert row["epoch_s"] == pytest.approx(row["step_s"] * spe)
    assert row["model_epochs_per_s"] == pytest.approx(row["members"] / row["epoch_s"])
    assert row["flop_per_s"] == pytest.approx(row["members"] * flops / row["step_s"])
    limit = row["limit"]
    assert limit["copies"] == row["members"] and len(limit["seconds"]) == 2
    assert limit["flop_per_s"] == pytest.approx(
      row["members"] * flops * 5 / np.median(limit["seconds"])
    )
    assert row["limit_fraction"] == pytest.approx(row["flop_per_s"] / limit["flop_per_s"])
    # XLA counts every operation of the step (the products and more), its loop body once.
    assert 1 <= row["xla_cost_over_step_products"] < 2
    real = Path("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz").is_file()
    assert row["data"].startswith("Fashion-MNIST") if real else row["data"].startswith("random")
  report = (tmp_path / "accelerator.md").read_text()
  assert "python benchmarks/accelerator.py --quick" in report and "**Passed**" in report
  assert all(f"| {name} |" in report for name in rows)
  # --render writes the same report from the JSON.
  (tmp_path / "accelerator.md").unlink()
  subprocess.run(
    [sys.executable, str(ROOT / "benchmarks" / "accelerator.py"), "--render", "--out",
     str(tmp_path)],
    check=True, capture_output=True, text=True, timeout=120,
  )  # fmt: skip
  assert (tmp_path / "accelerator.md").read_text() == report


def test_accelerator_benchmark_counts_a_convolution_nets_products_as_xla_does():
  sys.path.insert(0, str(ROOT / "benchmarks"))
  import accelerator
  import training

  from gelujax import engine, tasks

  # A dense step: the products training.py lists.
  spec = tasks.get("tiny_mnist").replace(dropout=0.5)
  train = accelerator.random_train(spec, 64)
  program = engine.make_program(tasks.build(spec, {"train": train}), engine.make_mesh(1), 1)
  mine = accelerator.step_kernels(program.config, 32)
  theirs = training.step_products(program.config, 32)
  assert [(p["lhs"], p["rhs"], p["flops"]) for p in mine] == [
    (p["lhs"], p["rhs"], p["flops"]) for p in theirs
  ]
  # The Wide ResNet's step (forward, input and weight gradients of its convolutions, strided
  # ones among them): its products as XLA's cost analysis counts them in their program.
  spec = tasks.get("tiny_cifar")
  train = accelerator.random_train(spec, 64)
  mesh = engine.make_mesh(1)
  program = engine.make_program(tasks.build(spec, {"train": train}), mesh, 1)
  products = accelerator.step_kernels(program.config, spec.batch_size)
  kinds = [p["kind"] for p in products]
  assert kinds.count("conv") == 39 and kinds.count("dot") == 4
  run, operands = accelerator.products_program(products, mesh, 1, 1)
  xla = accelerator.cost_flops(run.lower(operands).compile())
  assert xla / sum(p["flops"] for p in products) == pytest.approx(1, abs=0.01)


def test_members_benchmark_times_both_strategies_side_by_side_without_the_devices_missing_modules(
  tmp_path,
):
  """The member-strategy benchmark's smoke run, as the GPU image would run it: a one-member grid
  timed once, a two-member grid with both strategies, whose members' losses agree to float32
  rounding (two programs from the same draw and batches); --render rewrites the same report."""
  done = subprocess.run(
    [sys.executable, "-c", RUN_WITHOUT.format(absent=set(ABSENT_ON_THE_DEVICE)),
     str(ROOT / "benchmarks" / "members.py"), "--quick", "--out", str(tmp_path), "--name", "q"],
    capture_output=True, text=True, timeout=300, cwd=tmp_path,
  )  # fmt: skip
  assert done.returncode == 0, done.stderr[-3000:]
  result = json.loads((tmp_path / "q.json").read_text())
  one, two = result["configs"]
  assert one["status"] == two["status"] == "done"
  assert list(one["strategies"]) == ["vmap"] and list(two["strategies"]) == ["vmap", "map"]
  for name, row in two["strategies"].items():
    assert row["strategy"] == name and row["steps"] == 3 and len(row["seconds"]) == 3
    assert row["step_ms"] == pytest.approx(1e3 * np.median(row["seconds"]) / 3)
  assert 0 <= two["loss_max_rel_diff"] < 1e-5
  report = (tmp_path / "q.md").read_text()
  assert "| tiny_mnist, 2 members, float32 (3 steps) |" in report
  (tmp_path / "q.md").unlink()
  subprocess.run(
    [sys.executable, str(ROOT / "benchmarks" / "members.py"), "--render", "--out", str(tmp_path),
     "--name", "q"], check=True, capture_output=True, timeout=120,
  )  # fmt: skip
  assert (tmp_path / "q.md").read_text() == report


def test_char_lm_limits_counts_a_steps_products_by_hand_and_sums_their_times():
  """A step of nanoGPT's CPU configuration, counted by hand a token at a time: per block the
  projections 128x384, 128x128, 128x512 and 512x128, the attention's 64x32 scores and values
  for each of 4 heads; then the 128x65 head; 2 FLOPs a multiply-add, 3 products (forward and
  two gradients) for each, 768 tokens. The bound of a record whose products each run at one
  rate is the step's FLOPs over that rate; the report states both steps beside it."""
  sys.path.insert(0, str(ROOT / "benchmarks"))
  import char_lm_limits as limits

  per_block = 2 * (128 * 384 + 128 * 128 + 128 * 512 + 512 * 128) + 2 * 2 * 64 * 32 * 4
  by_hand = 3 * 768 * (4 * per_block + 2 * 128 * 65)
  assert limits.step_flops(limits.step_products()) == by_hand == 3_964_207_104
  rate = 50e9  # FLOP/s
  seconds = {
    limits._key(*p[2:]): {"jax": 2 * math.prod(p[2:]) / rate, "torch": 4 * math.prod(p[2:]) / rate}
    for p in [*limits.step_products(), limits.SQUARE]
  }
  assert limits.bound(limits.step_products(), seconds, "jax") == pytest.approx(by_hand / rate)
  record = {
    "command": "c", "machine": "m", "date": "d", "steps": 5, "repeats": 1, "calls": 2,
    "nanogpt_parameters": 804_096, "product_seconds": seconds,
    "step_seconds": {"gelujax": 0.2, "nanogpt": 0.16},
  }  # fmt: skip
  text = limits.render(record)
  floor = by_hand / rate
  assert f"**{0.16 / floor:.2f}x**, with PyTorch's {0.16 / floor / 2:.2f}x" in text
  assert "0.80x nanoGPT's speed" in text
  assert (
    f"| gelujax | 200.0 | {limits.model_flops_per_step(804_096 - 64 * 128) / 0.2e9:.1f} |" in text
  )


def test_char_lm_speed_counts_model_flops_as_nanogpt_and_as_the_products_by_hand():
  """The MFU's FLOPs a token (nanoGPT's ``estimate_mfu``: 6N + 12·L·H·Q·T) at its CPU
  configuration, N its 804,096 parameters less the 64 x 128 position table; times a step's 768
  tokens it lies within 0.2% of the step's products counted by hand above (the formula also
  counts the layer norms' and the embedding's parameters, the products do not)."""
  sys.path.insert(0, str(ROOT / "benchmarks"))
  import char_lm_limits as limits
  import char_lm_speed as speed

  per_token = speed.flops_per_token(804_096 - 64 * 128, 4, 4, 128, 64)
  assert per_token == 6 * 795_904 + 12 * 4 * 4 * 32 * 64 == 5_168_640
  products = limits.step_flops(limits.step_products())
  assert per_token * 768 == pytest.approx(products, rel=2e-3)
  assert per_token * 768 != pytest.approx(products, rel=1e-3)  # not the same count
