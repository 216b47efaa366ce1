"""Tests for gelujax.workdir: one writer, the run's config kept or rebuilt, bounds before work.

The lock is tested against a real second process, disks are real tmpfs mounts (full or
read-only), and memory estimates against sizes counted by hand.
"""

import json
import os
import signal
import socket
import subprocess
import sys

import jax
import numpy as np
import pytest

from benchmarks import faults
from gelujax import checkpoints, workdir, writers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = {
  "task": "tiny_mnist",
  "dataset": "mnist",
  "activation": "gelu",
  "spec": {"epochs": 2, "batch_size": 32},
  "members": [{"seed": 0, "learning_rate": 0.001}],
}
needs_mount = pytest.mark.skipif(
  not faults.can_mount(), reason="mounting a tmpfs needs root (CI has it)"
)


def hold_lock(path) -> subprocess.Popen:
  """Another process that takes the workdir's lock and keeps it until killed."""
  code = (
    "import sys, time; from gelujax import workdir; workdir.Lock(sys.argv[1]); "
    "print('locked', flush=True); time.sleep(600)"
  )
  process = subprocess.Popen(
    [sys.executable, "-c", code, str(path)],
    env=dict(os.environ, PYTHONPATH=ROOT, JAX_PLATFORMS="cpu"),
    stdout=subprocess.PIPE,
    text=True,
  )
  assert process.stdout.readline() == "locked\n"
  return process


def test_a_second_process_is_refused_naming_the_holder_and_a_dead_one_blocks_nothing(tmp_path):
  holder = hold_lock(tmp_path / "run")
  try:
    with pytest.raises(workdir.WorkdirError) as error:
      workdir.Lock(str(tmp_path / "run"))
    message = str(error.value)
    assert f"in use by process {holder.pid} on host {socket.gethostname()}" in message
    assert "\n" not in message and "another --workdir" in message
  finally:
    holder.send_signal(signal.SIGKILL)  # kill -9: no clean-up runs
    holder.wait()
  # The lock file is still there, naming the dead process: it blocks nothing.
  assert (tmp_path / "run" / "lock").read_text().startswith(f"{holder.pid} ")
  lock = workdir.Lock(str(tmp_path / "run"))
  assert (tmp_path / "run" / "lock").read_text().startswith(f"{os.getpid()} ")
  lock.release()


def test_the_lock_is_held_until_released(tmp_path):
  lock = workdir.Lock(str(tmp_path))
  with pytest.raises(workdir.WorkdirError, match=f"in use by process {os.getpid()}"):
    workdir.Lock(str(tmp_path))  # another open file description, as another process has
  lock.release()
  workdir.Lock(str(tmp_path)).release()


def test_check_writable(tmp_path):
  workdir.check_writable(str(tmp_path / "new" / "deeper"))  # creatable: fine
  (tmp_path / "file").write_text("x")
  with pytest.raises(workdir.WorkdirError, match="is a file, not a folder"):
    workdir.check_writable(str(tmp_path / "file"))
  with pytest.raises(workdir.WorkdirError, match="is a file, so it cannot hold a folder"):
    workdir.check_writable(str(tmp_path / "file" / "run"))
  assert sorted(os.listdir(tmp_path)) == ["file"]  # nothing created


@needs_mount
def test_check_writable_refuses_a_read_only_disk(tmp_path):
  with faults.tmpfs(tmp_path / "disk", "64k", "ro") as disk:
    with pytest.raises(workdir.WorkdirError, match="is on a read-only file system"):
      workdir.check_writable(str(disk / "run"))


@needs_mount
def test_a_full_disk_is_one_line_naming_the_file(tmp_path):
  with faults.tmpfs(tmp_path / "disk", "64k") as disk:
    faults.fill_disk(disk)
    records = [{"member": 0, "seed": 0, "learning_rate": 0.1, "epoch": 1.0, "step": 1,
                "diverged": False, "loss": 0.5}] * 1000  # fmt: skip
    with pytest.raises(workdir.WorkdirError) as error, workdir.writing(str(disk / "run")):
      metrics = writers.MetricsWriter(str(disk / "run"), [CONFIG["members"][0]], purge_step=0)
      try:
        metrics.write(records)
      finally:
        metrics.close()
  message = str(error.value)
  # The first file that could not be written: TensorBoard's, made before any record.
  assert message.startswith(f"Cannot write {disk}/run/tensorboard (No space left on device)")
  assert "re-run the same command" in message and "\n" not in message


def test_a_member_count_beyond_host_memory_is_refused_without_listing_it():
  workdir.check_member_count(1000)
  with pytest.raises(workdir.WorkdirError) as error:
    workdir.check_member_count(99_999_999_999_999)
  assert "99,999,999,999,999 members" in str(error.value)
  assert "13,107,200,000.0 GB in all" in str(error.value)  # 1e14 x 128 KiB, by hand


def test_memory_estimate_counts_state_twice_gradients_updates_and_data():
  params = {"w": jax.ShapeDtypeStruct((100, 10), np.float32)}  # 4,000 bytes
  state = {"params": params, "mu": params, "nu": params}  # 12,000 bytes
  splits = {"train": {"inputs": np.zeros((1000, 8), np.uint8)}}  # 8,000 bytes
  workdir.check_memory(state, params, 10, 10, splits)
  members = 2_000_000
  with pytest.raises(workdir.WorkdirError) as error:
    workdir.check_memory(state, params, members, members, splits)
  # 2 x 12,000 + 2 x 4,000 bytes a member on the device, 128 KiB on the host, plus the data.
  expected = members * (32_000 * jax.local_device_count() + 131_072) + 8_000
  message = str(error.value)
  assert f"A grid of 2,000,000 members needs about {expected / 1e9:,.1f} GB" in message
  assert "1,000 parameters" in message and "\n" not in message


def save_checkpoint(path, config, epoch=1):
  checkpointer = checkpoints.Checkpointer(str(path), config=config)
  checkpointer.save(epoch, {"w": np.ones(3, np.float32)})
  checkpointer.close()


def test_read_config_of_a_new_workdir_is_none(tmp_path):
  assert workdir.read_config(str(tmp_path / "new")) is None


def test_read_config_rebuilds_a_missing_or_broken_config_from_the_checkpoint(tmp_path):
  save_checkpoint(tmp_path, CONFIG)
  assert workdir.read_config(str(tmp_path)) == CONFIG  # no config.json at all
  (tmp_path / "config.json").write_text("{}")
  assert workdir.read_config(str(tmp_path)) == CONFIG
  workdir.write_config(str(tmp_path), CONFIG)
  assert (tmp_path / "config.json.damaged").read_text() == "{}"  # kept
  assert json.loads((tmp_path / "config.json").read_text()) == CONFIG


@pytest.mark.parametrize(
  ("text", "match"),
  [
    ("{}", r"config.json is not a run's config: its 'task' is missing"),
    ('{"task": "t",', r"config.json, line 1: not valid JSON"),
    ("[]", r"config.json is not a run's config: it holds a list"),
  ],
)
def test_read_config_without_a_checkpoint_names_the_file(tmp_path, text, match):
  (tmp_path / "config.json").write_text(text)
  with pytest.raises(workdir.WorkdirError, match=match) as error:
    workdir.read_config(str(tmp_path))
  assert "records the run to rebuild it from" in str(error.value)
  assert "delete" not in str(error.value)


def test_results_without_any_record_of_their_run_are_refused(tmp_path):
  (tmp_path / "metrics.jsonl").write_text('{"member": 0, "epoch": 1.0}\n')
  with pytest.raises(workdir.WorkdirError, match=r"holds metrics\.jsonl but no config\.json"):
    workdir.read_config(str(tmp_path))


def test_check_epochs_refuses_fewer_epochs_than_trained(tmp_path):
  save_checkpoint(tmp_path, CONFIG, epoch=3)
  (tmp_path / "checkpoints" / "5.orbax-checkpoint-tmp-1").mkdir()  # unfinished: not counted
  workdir.check_epochs(str(tmp_path), 3)
  workdir.check_epochs(str(tmp_path), 4)
  with pytest.raises(workdir.WorkdirError, match="trained for 3 epochs, more than --epochs 2"):
    workdir.check_epochs(str(tmp_path), 2)
