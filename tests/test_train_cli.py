"""Tests for experiments/train.py: flags, clear one-line errors, whole runs of tiny_mnist."""

import importlib.util
import os
import shutil
import subprocess
import sys

import pytest
from absl import flags
from tiny_task import hash_tree, write_mnist_files

from gelujax import writers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "experiments", "train.py")
# tiny_mnist on a small MNIST in IDX files: 224 train, 32 validation and 64 test images.
TASK = "--task=tiny_mnist(data_options={'validation_size': 32})"


def load_script():
  spec = importlib.util.spec_from_file_location("gelujax_train_script", SCRIPT)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


@pytest.fixture(scope="module")
def script():
  """experiments/train.py imported once (its flags live in absl's global FLAGS)."""
  return load_script()


def run_main(script, *args: str) -> SystemExit | None:
  """Parses ``args`` as train.py's flags and runs its main; returns how it exited."""
  flags.FLAGS.unparse_flags()
  flags.FLAGS(["train.py", *args])
  try:
    script.main(["train.py"])
  except SystemExit as e:
    return e
  finally:
    flags.FLAGS.unparse_flags()
  return None


def run_command(*args: str, devices: int = 1) -> subprocess.CompletedProcess:
  env = dict(
    os.environ,
    PYTHONPATH=ROOT,
    JAX_PLATFORMS="cpu",
    XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}",
  )
  return subprocess.run(
    [sys.executable, SCRIPT, *args], env=env, cwd=ROOT, capture_output=True, text=True,
    timeout=300,
  )  # fmt: skip


def test_help_lists_every_flag_with_its_default():
  result = run_command("--help")  # absl's --help exits with status 1 after printing.
  for flag in (
    "task", "activation", "dataset", "data_dir", "workdir", "epochs", "batch_size",
    "learning_rates", "seeds", "dropout", "checkpoint_every", "coordinator_address",
    "num_processes", "process_id", "cpu_devices", "members_axis", "compilation_cache",
  ):  # fmt: skip
    assert f"--{flag}" in result.stdout, flag
  assert "(default: '1')" in result.stdout  # --num_processes


@pytest.mark.parametrize(
  ("args", "message"),
  [
    (["--task=no_such_task"], "--task 'no_such_task' is unknown; known: "),
    (
      ["--task=tiny_mnist", "--activation=no_such"],
      "--activation 'no_such' is not valid for task 'tiny_mnist': expected an activation name",
    ),
    (
      ["--task=tiny_mnist", "--dataset=cifar10"],
      "--dataset 'cifar10' is not valid for task 'tiny_mnist': expected one of this task's",
    ),
    (["--task=tiny_mnist", "--dropout=1"], "--dropout 1.0 is not valid"),
    (["--task=tiny_mnist", "--learning_rates=1e-3,0"], "every learning rate must be"),
    (["--task=tiny_mnist", "--learning_rates=-1"], "every learning rate must be"),
    (["--task=tiny_mnist", "--learning_rates=fast"], "not a list of numbers"),
    (["--task=tiny_mnist", "--epochs=0"], "epochs"),
    (["--task=tiny_mnist", "--seeds=0"], "--seeds '0' is a count"),
    (["--task=tiny_mnist", "--seeds=a,b"], "--seeds 'a,b' is not"),
  ],
)
def test_bad_values_fail_in_one_line_before_any_work(script, tmp_path, args, message):
  workdir = str(tmp_path / "run")
  exit_ = run_main(script, *args, f"--workdir={workdir}")
  assert exit_ is not None and isinstance(exit_.code, str)
  assert exit_.code.startswith("train.py: error: ") and "\n" not in exit_.code
  assert message in exit_.code
  assert not os.path.exists(workdir)


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> str:
  """A whole tiny_mnist run through the command line, 2 epochs, 2 members."""
  root = tmp_path_factory.mktemp("cli")
  write_mnist_files(str(root / "mnist"))
  workdir = str(root / "run")
  result = run_command(
    TASK, f"--data_dir={root / 'mnist'}", f"--workdir={workdir}", "--epochs=2", "--seeds=2",
    "--learning_rates=1e-3",
  )  # fmt: skip
  assert result.returncode == 0, result.stderr
  return workdir


def test_a_run_writes_its_files_and_learns(finished_run):
  config = writers.read_json(os.path.join(finished_run, "config.json"))
  assert config["task"] == "tiny_mnist"
  assert config["members"] == [
    {"seed": 0, "learning_rate": 1e-3}, {"seed": 1, "learning_rate": 1e-3}
  ]  # fmt: skip
  records = writers.read_metrics(finished_run)
  assert sorted({r["epoch"] for r in records}) == [1.0, 2.0]
  summary = writers.read_json(os.path.join(finished_run, "summary.json"))
  assert summary["epochs"] == 2 and len(summary["members"]) == 2
  for member in range(2):
    own = [r for r in records if r["member"] == member]
    assert own[-1]["train_loss"] < own[0]["train_loss"]


def test_a_workdir_of_another_run_is_refused_untouched(script, finished_run):
  before = hash_tree(finished_run)
  exit_ = run_main(
    script, TASK, f"--workdir={finished_run}", "--activation=relu", "--epochs=2", "--seeds=2",
    "--learning_rates=1e-3",
  )  # fmt: skip
  assert exit_ is not None and "activation 'gelu_tanh' (now 'relu')" in exit_.code
  assert "\n" not in exit_.code
  assert hash_tree(finished_run) == before


@pytest.mark.parametrize(
  ("args", "message"),
  [
    # 2 members on 4 devices: a 2 (members) x 2 (data) mesh; each batch splits over 2 devices.
    (["--batch_size=5"], "--batch_size is 5; it must be a multiple of the 2 devices"),
    (["--members_axis=1", "--batch_size=6"], "--batch_size is 6; it must be a multiple of the 4"),
    (["--members_axis=3"], "--members_axis 3 does not divide the 4 devices; valid: 1, 2, 4."),
  ],
)
def test_batch_size_must_divide_over_the_data_axis(tmp_path, args, message):
  workdir = str(tmp_path / "run")
  result = run_command("--task=tiny_mnist", f"--workdir={workdir}", *args, devices=4)
  assert result.returncode != 0
  assert result.stderr.strip().splitlines()[-1].startswith(f"train.py: error: {message}")
  assert not os.path.exists(workdir)


def test_more_epochs_continue_a_finished_run(tmp_path, finished_run):
  workdir = str(tmp_path / "run")
  shutil.copytree(finished_run, workdir)
  data_dir = os.path.join(os.path.dirname(finished_run), "mnist")
  result = run_command(
    TASK, f"--data_dir={data_dir}", f"--workdir={workdir}", "--epochs=3", "--seeds=2",
    "--learning_rates=1e-3",
  )  # fmt: skip
  assert result.returncode == 0, result.stderr
  records = writers.read_metrics(workdir)
  assert records[:4] == writers.read_metrics(finished_run)  # epochs 1-2 kept, not re-run
  assert [r["epoch"] for r in records] == [1.0, 1.0, 2.0, 2.0, 3.0, 3.0]
  assert writers.read_json(os.path.join(workdir, "summary.json"))["epochs"] == 3
