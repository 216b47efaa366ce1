"""Tests for experiments/reproduce.py: its flags, and a reproduction end to end with the real
trainer on MNIST-format files (selection grid -> evaluation seeds -> noise evaluation)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from run_mains import run_mains

REPO = Path(__file__).resolve().parent.parent


def write_idx(path, array):
  """An uncompressed IDX file: zero, zero, dtype 0x08 (ubyte), rank, big-endian dims, data."""
  array = np.asarray(array, np.uint8)
  header = bytes([0, 0, 0x08, array.ndim]) + b"".join(
    int(d).to_bytes(4, "big") for d in array.shape
  )
  path.write_bytes(header + array.tobytes())


def write_tiny_mnist(folder, n_train, n_test):
  """MNIST-format files whose class is the brightness of one 7x7 block (learnable fast)."""
  rng = np.random.default_rng(0)
  for prefix, n in (("train", n_train), ("t10k", n_test)):
    labels = rng.integers(0, 10, n)
    images = rng.integers(0, 60, (n, 28, 28))
    for i, label in enumerate(labels):
      row, col = divmod(int(label), 4)
      images[i, 7 * row : 7 * row + 7, 7 * col : 7 * col + 7] += 190
    write_idx(folder / f"{prefix}-images-idx3-ubyte", images)
    write_idx(folder / f"{prefix}-labels-idx1-ubyte", labels)


def run_reproduce(*flags, cache, expect_success=True):
  """Runs experiments/reproduce.py in a fresh process; returns its stdout (or, with
  ``expect_success=False``, the CompletedProcess)."""
  env = {
    **os.environ,
    "JAX_PLATFORMS": "cpu",
    # This checkout's gelujax, whichever checkout the package is installed from.
    "PYTHONPATH": str(REPO),
    # Later invocations re-use the compilations of earlier ones.
    "JAX_COMPILATION_CACHE_DIR": str(cache),
    "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
    "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
  }
  result = subprocess.run(
    [sys.executable, "experiments/reproduce.py", *flags],
    cwd=REPO,
    env=env,
    capture_output=True,
    text=True,
    timeout=300,
  )
  if not expect_success:
    return result
  assert result.returncode == 0, result.stderr[-3000:]
  return result.stdout


BAD_FLAGS = [
  ("--task=no_such", "no_such"),
  ("--activations=gelu,swish", "--activations 'swish' is not valid for task 'tiny_mnist'"),
  ("--dropout_rates=0,1.5", "--dropout_rates 1.5 is not valid for task 'tiny_mnist'"),
  ("--dataset=cifar10", "--dataset 'cifar10' is not valid for task 'tiny_mnist'"),
  ("--seeds=0", "--seeds '0' is a count"),
  ("--render", "--render: "),
  ("--evaluation_seeds=1,5", "--evaluation_seeds 1,5 shares [1] with --seeds"),
]


@pytest.fixture(scope="module")
def bad_flag_exits(tmp_path_factory):
  """How reproduce.py's main ended for each of BAD_FLAGS (all in one fresh process), and the
  --out folder each was given."""
  root = tmp_path_factory.mktemp("bad_flags")
  outs = [root / str(i) / "out" for i in range(len(BAD_FLAGS))]
  command_lines = [
    (["--task=tiny_mnist", flag] if not flag.startswith("--task") else [flag]) + [f"--out={out}"]
    for (flag, _), out in zip(BAD_FLAGS, outs, strict=True)
  ]
  env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(REPO)}
  ended = run_mains(REPO / "experiments" / "reproduce.py", command_lines, env, REPO)
  return dict(zip([flag for flag, _ in BAD_FLAGS], zip(ended, outs, strict=True), strict=True))


@pytest.mark.parametrize(("flag", "message"), BAD_FLAGS)
def test_bad_flags_fail_in_one_line_and_write_nothing(bad_flag_exits, flag, message):
  (code, stderr), out = bad_flag_exits[flag]
  # sys.exit with a message: Python prints it and a newline to stderr and exits with status 1.
  assert isinstance(code, str) and stderr == ""
  assert code.startswith("reproduce.py: error: ") and "\n" not in code
  assert message in code
  assert not out.exists()


def read_metrics(workdir):
  return (workdir / "metrics.jsonl").read_text().splitlines()


def member_pairs(workdir):
  return [
    (m["learning_rate"], m["seed"])
    for m in json.loads((workdir / "config.json").read_text())["members"]
  ]


@pytest.mark.slow
def test_tiny_mnist_end_to_end_evaluation_seeds_and_noise(tmp_path):
  data = tmp_path / "data"
  data.mkdir()
  # The MNIST loader keeps the first 5,000 train images for validation.
  write_tiny_mnist(data, n_train=5_064, n_test=100)
  out = tmp_path / "results" / "tiny_mnist"
  workdir, evaluation = out / "runs" / "gelu", out / "runs" / "gelu_eval"
  flags = [
    "--task=tiny_mnist",
    f"--data_dir={data}",
    "--activations=gelu",
    "--seeds=2",
    "--learning_rates=3e-3,1e-3",
  ]
  stdout = run_reproduce(*flags, f"--out={out}", cache=tmp_path / "cache")
  # The selection grid, then its evaluation run at the selected lr.
  assert "[1/1] gelu: trained in" in stdout and "[1/1] gelu_eval: trained in" in stdout
  summary = json.loads((workdir / "summary.json").read_text())
  assert summary["epochs"] == 2
  assert member_pairs(workdir) == [(3e-3, 0), (3e-3, 1), (1e-3, 0), (1e-3, 1)]
  # The lr with the lower median best validation loss, selected on seeds 0 and 1; the
  # evaluation run trains tiny_mnist's default evaluation seeds, 100 and 101, at it alone.
  best = {
    lr: np.median(
      [m["best"]["validation_loss"] for m in summary["members"] if m["learning_rate"] == lr]
    )
    for lr in (3e-3, 1e-3)
  }
  selected = min(best, key=best.get)
  assert member_pairs(evaluation) == [(selected, 100), (selected, 101)]
  evaluated = json.loads((evaluation / "summary.json").read_text())
  errors = [m["best"]["test_error"] for m in evaluated["members"]]
  result = json.loads((out / "summary.json").read_text())
  assert result["rows"][0]["selected"]["learning_rate"] == selected
  row = result["evaluation_rows"]["gelu_eval"]
  assert row["selected"]["metrics"]["best.test_error"]["median"] == pytest.approx(np.median(errors))
  table = (out / "table.md").read_text()
  assert f"| gelu | {selected:g} | 0, 1 | 0/2 |" in table
  assert f"| gelu_eval | {selected:g} | 100, 101 | 0/2 |" in table
  readme = (out / "README.md").read_text()
  # The command that reproduces it, from the runs' files (the data directory is the machine's;
  # 2 seeds and evaluation seeds 100, 101 are tiny_mnist's defaults).
  assert (
    "python experiments/reproduce.py --task=tiny_mnist --activations=gelu "
    f"--learning_rates=0.003,0.001 --out={out}" in readme
  )
  assert "- Selection seeds (the grids'): 0, 1" in readme
  assert "- Evaluation seeds: 100, 101 (`runs/<run>_eval/`)" in readme
  assert "None: the paper states no claim for this task." in readme
  assert (out / "loss_curves.png").stat().st_size > 10_000

  # Invoked again, it trains nothing and changes no metrics; so does --render, on its own.
  before = read_metrics(workdir), read_metrics(evaluation)
  stdout = run_reproduce(*flags, f"--out={out}", cache=tmp_path / "cache")
  assert "[1/1] gelu: finished earlier: skipped" in stdout
  assert "[1/1] gelu_eval: finished earlier: skipped" in stdout
  assert "trained in" not in stdout
  stdout = run_reproduce("--task=tiny_mnist", f"--out={out}", "--render", cache=tmp_path / "cache")
  assert "[1/1]" not in stdout and (out / "table.md").read_text() == table
  assert (read_metrics(workdir), read_metrics(evaluation)) == before

  # A later invocation for another activation trains only its runs, and its result covers every
  # run under --out, as a --render does (not only the runs it was asked for).
  relu_flags = [f if f != "--activations=gelu" else "--activations=relu" for f in flags]
  stdout = run_reproduce(*relu_flags, f"--out={out}", cache=tmp_path / "cache")
  assert "[1/1] relu: trained in" in stdout and "gelu" not in stdout.split("Wrote")[0]
  both = (out / "table.md").read_text()
  assert "| gelu | " in both and "| relu | " in both and "| gelu_eval | " in both
  run_reproduce("--task=tiny_mnist", f"--out={out}", "--render", cache=tmp_path / "cache")
  assert (out / "table.md").read_text() == both

  # The noise experiment re-uses the finished no-dropout classifiers beside it.
  noise_out = tmp_path / "results" / "tiny_mnist_noise"
  stdout = run_reproduce(
    *flags, f"--out={noise_out}", "--task=tiny_mnist_noise", cache=tmp_path / "cache"
  )
  assert "[1/1] gelu: finished earlier: skipped" in stdout
  assert "[1/1] gelu_eval: finished earlier: skipped" in stdout
  assert not (noise_out / "runs").exists()
  result = json.loads((noise_out / "noise" / f"gelu_eval_lr{selected:g}.json").read_text())
  assert (result["learning_rate"], result["seeds"]) == (selected, [100, 101])
  assert result["levels"] == pytest.approx(np.linspace(0, 3, 20))
  accuracy = np.asarray(result["accuracy"])
  # At a = 0 the evaluation is the plain test evaluation of the final checkpoint.
  final_errors = [m["final"]["test_error"] for m in evaluated["members"]]
  np.testing.assert_allclose(accuracy[:, 0], 1 - np.asarray(final_errors), atol=1e-6)
  # Pixel noise of half-width 3 swamps this data's signal (a block 0.75 brighter).
  assert np.all(accuracy[:, -1] < accuracy[:, 0])
  # The selection grid's classifiers, at the selected lr, are evaluated too (exploratory).
  kept = json.loads((noise_out / "noise" / f"gelu_lr{selected:g}.json").read_text())
  assert kept["seeds"] == [0, 1]
  noise_table = (noise_out / "table.md").read_text()
  assert f"| gelu_eval | {selected:g} | 100, 101 | 0/2 |" in noise_table
  assert (noise_out / "noise_robustness.png").stat().st_size > 10_000
  # Re-rendered from noise/*.json and the classifiers' files alone.
  run_reproduce("--task=tiny_mnist_noise", f"--out={noise_out}", "--render", cache=tmp_path / "c")
  assert (noise_out / "table.md").read_text() == noise_table
