"""Faults that need real processes: a second writer, kill -9, signals during a save.

Each runs experiments/train.py (or reproduce.py) as a subprocess on tiny_mnist, through the
fault injection of benchmarks/faults.py, and checks what the user sees: the exact stderr
lines, the exit status and the files left behind. (Faults one process can cause, such as bytes
flipped on disk or a full disk, are tested in test_train_cli.py, test_checkpoints.py,
test_writers.py and test_workdir.py.)
"""

import json
import os
import signal
import subprocess
import sys

import pytest

from benchmarks import faults

ROOT = faults.ROOT


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
  return faults.Lab(tmp_path_factory.mktemp("faults"))


@pytest.mark.slow
def test_a_second_writer_is_refused_and_a_killed_writer_blocks_nothing(lab):
  refused, resumed = faults.second_writer(lab)
  assert refused.ok, refused.seen
  assert refused.seen.startswith("exit 1: train.py: error: Workdir ")
  assert "is in use by process" in refused.seen and "another --workdir" in refused.seen
  assert resumed.ok, resumed.seen  # after kill -9 of the holder, the same command resumes
  assert resumed.seen == "exit 0: (nothing)"


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_a_save_finishes_it_and_says_one_line(lab, signum):
  outcome = faults.signal_during_save(lab, signum)
  name = signal.Signals(signum).name
  assert outcome.seen == (
    f"exit {128 + signum}: train.py: interrupted by {name} during the save of the checkpoint "
    "of epoch 3, which was completed first; re-run the same command to resume."
  )
  assert outcome.ok  # checkpoint 3 complete, nothing unfinished left, the rerun resumes


@pytest.mark.slow
def test_reproduce_interrupted_during_a_save_says_one_line_and_resumes(lab, tmp_path):
  out = tmp_path / "out"
  command = [
    sys.executable, str(ROOT / "experiments" / "reproduce.py"),
    "--task=tiny_mnist(model='mlp_mnist', data_options={'validation_size': 32})",
    "--activations=relu", "--seeds=4", "--learning_rates=1e-3", "--epochs=30",
    f"--data_dir={lab.data_dir}", f"--out={out}",
  ]  # fmt: skip
  checkpoints = out / "runs" / "relu" / "checkpoints"
  for _ in range(5):
    process = subprocess.Popen(
      command, env=lab.env(), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert faults.wait_for(lambda: faults._saving(checkpoints, 2), poll=0.0005)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=300)
    if "during the save" in stderr:
      break
  seen = faults.Run(process.returncode, stderr).seen
  assert process.returncode == 130
  assert seen == [
    "reproduce.py: interrupted by SIGINT during the save of the checkpoint of epoch 2, which "
    "was completed first; re-run the same command to resume."
  ]
  assert sorted(os.listdir(checkpoints)) == ["1", "2"]
  timings = json.loads((out / "timings.json").read_text())
  assert timings["relu"]["seconds"] > 0  # the time trained so far is kept


def test_the_fault_script_writes_its_table_and_cifar10_without_data_says_what_to_do(tmp_path):
  result = subprocess.run(
    [sys.executable, str(ROOT / "benchmarks" / "faults.py"), "--only", "no_cifar",
     "--output-dir", str(tmp_path)],
    capture_output=True, text=True, timeout=300,
  )  # fmt: skip
  assert result.returncode == 0, result.stderr
  report = (tmp_path / "faults.md").read_text()
  assert "python benchmarks/faults.py --only no_cifar" in report
  assert "| CIFAR-10 with no data here | `train.py --task=cifar10 --activation=gelu`" in report
  assert "Faults tried: 1; as promised: 1" in report and report.count("| yes |") == 1
  [row] = json.loads((tmp_path / "faults.json").read_text())
  assert row["ok"], row["seen"]  # one line, no download attempt, no ModuleNotFoundError
  assert row["seen"].startswith("exit 1: train.py: error: Cannot load dataset 'cifar10'")
  assert "(no prepared copy)" in row["seen"] and "Pass --data_dir" in row["seen"]


@pytest.mark.slow
def test_a_workdir_that_cannot_be_written_is_refused_in_one_line(lab):
  is_file, read_only, forbidden = faults.bad_workdirs(lab)
  assert is_file.ok and "is a file, not a folder" in is_file.seen, is_file.seen
  assert read_only.ok and "is on a read-only file system" in read_only.seen, read_only.seen
  # root without its capabilities, in a folder of another user: nothing is written there
  assert forbidden.ok and "is not writable by this user" in forbidden.seen, forbidden.seen
