"""Tests for gelujax.checkpoints: save, verified restore, damaged and foreign checkpoints, signals.

Damage is done to the files on disk (bytes flipped, files overwritten); signals are real ones,
sent to this process while a save runs.
"""

import glob
import logging
import os
import signal
import threading
import time

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
import pytest

from gelujax import checkpoints, host
from gelujax import workdir as workdirs

CONFIG = {
  "task": "t",
  "dataset": "d",
  "activation": "gelu",
  "spec": {"epochs": 3, "batch_size": 8},
  "members": [{"seed": 0, "learning_rate": 0.1}],
}


def make_records(epoch: int):
  """metrics.jsonl records of one member up to ``epoch``, as a run saves them with a checkpoint."""
  return [
    {"member": 0, "epoch": float(e), "step": 10 * e, "loss": 1 / e} for e in range(1, epoch + 1)
  ]


def make_state(value: float, size: int = 2):
  return {"w": jnp.full((3, size), value, jnp.float32), "step": jnp.int32(value)}


def abstract(state):
  return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding), state)


def assert_state_equal(state, value):
  np.testing.assert_array_equal(state["w"], np.full((3, 2), value, np.float32))
  assert int(state["step"]) == int(value)


def save_epochs(workdir, *epochs, config=CONFIG):
  checkpointer = checkpoints.Checkpointer(str(workdir), config=config)
  for epoch in epochs:
    checkpointer.save(epoch, make_state(epoch), make_records(epoch))
  checkpointer.close()


def restore(workdir, config=CONFIG):
  checkpointer = checkpoints.Checkpointer(str(workdir), config=config)
  try:
    return checkpointer.restore_latest(abstract(make_state(0)))
  finally:
    checkpointer.close()


def flip_byte_in_array_data(workdir, epoch):
  """Flips one byte in the middle of the largest file of the checkpoint's array data."""
  files = glob.glob(str(workdir / "checkpoints" / str(epoch) / "default" / "**" / "d" / "*"))
  path = max(files, key=os.path.getsize)
  data = bytearray(open(path, "rb").read())
  data[len(data) // 2] ^= 0x40
  with open(path, "wb") as f:
    f.write(data)


def test_restore_returns_none_without_checkpoints(tmp_path):
  assert restore(tmp_path) is None


def test_saves_keep_the_newest_two_and_restore_the_newest(tmp_path):
  save_epochs(tmp_path, 1, 2, 3)
  assert sorted(os.listdir(tmp_path / "checkpoints")) == ["2", "3"]
  epoch, state, metrics = restore(tmp_path)
  assert epoch == 3
  assert_state_equal(state, 3)
  assert metrics == make_records(3)


def test_identity_ignores_only_the_resumable_fields():
  longer = {**CONFIG, "spec": {**CONFIG["spec"], "epochs": 50}}
  other_batch = {**CONFIG, "spec": {**CONFIG["spec"], "batch_size": 16}}
  other_members = {**CONFIG, "members": [{"seed": 1, "learning_rate": 0.1}]}
  assert workdirs.identity(longer) == workdirs.identity(CONFIG)
  assert workdirs.identity(other_batch) != workdirs.identity(CONFIG)
  assert workdirs.identity(other_members) != workdirs.identity(CONFIG)


def test_every_checkpoint_records_the_run_and_checksums(tmp_path):
  save_epochs(tmp_path, 1)
  record = checkpoints.Checkpointer(str(tmp_path), config=CONFIG).read_record(1)
  assert record["config"] == CONFIG and record["identity"] == workdirs.identity(CONFIG)
  assert set(record["checksums"]) == {"['step']", "['w']"}


def test_flipped_bytes_fall_back_to_the_previous_checkpoint_in_one_line(tmp_path, caplog, capfd):
  rng = np.random.default_rng(0)
  states = {e: {"w": jnp.asarray(rng.normal(size=(300, 100)), jnp.float32)} for e in (1, 2)}
  checkpointer = checkpoints.Checkpointer(str(tmp_path), config=CONFIG)
  for epoch, state in states.items():
    checkpointer.save(epoch, state, make_records(epoch))
  checkpointer.close()
  flip_byte_in_array_data(tmp_path, 2)
  checkpointer = checkpoints.Checkpointer(str(tmp_path), config=CONFIG)
  with caplog.at_level(logging.WARNING):
    epoch, state, _ = checkpointer.restore_latest(abstract(states[1]))
  checkpointer.close()
  assert epoch == 1
  np.testing.assert_array_equal(state["w"], states[1]["w"])
  [warning] = caplog.records
  text = warning.getMessage()
  assert (
    "\n" not in text and "epoch 2" in text and "Resuming from the checkpoint of epoch 1" in text
  )
  # The flipped byte still decompresses: only the checksum tells that the values changed.
  assert "its arrays do not match the checksums written when it was saved (['w'])" in text
  # Kept, not deleted: moved aside so that epoch 2 can be saved again.
  assert os.path.isdir(tmp_path / "damaged" / "checkpoint-2")
  assert sorted(os.listdir(tmp_path / "checkpoints")) == ["1"]
  err = capfd.readouterr().err
  assert "Exception ignored" not in err and "Traceback" not in err
  checkpointer = checkpoints.Checkpointer(str(tmp_path), config=CONFIG)
  checkpointer.save(2, states[2], make_records(2))
  assert checkpointer.restore_latest(abstract(states[2]))[0] == 2
  checkpointer.close()


def test_every_checkpoint_damaged_refuses_in_one_line_and_keeps_them(tmp_path, capfd):
  save_epochs(tmp_path, 1, 2)
  for epoch in (1, 2):
    for path in glob.glob(str(tmp_path / f"checkpoints/{epoch}/default/**/d/*"), recursive=True):
      with open(path, "wb") as f:
        f.write(b"garbage")
  with pytest.raises(checkpoints.CheckpointError) as error:
    restore(tmp_path)
  message = str(error.value)
  assert "No checkpoint in" in message and "epoch 2: it cannot be read" in message
  assert "epoch 1: it cannot be read" in message and "another `workdir`" in message
  assert "delete" not in message.lower()
  assert sorted(os.listdir(tmp_path / "checkpoints")) == ["1", "2"]  # left as they are
  err = capfd.readouterr().err
  assert "Exception ignored" not in err and "Traceback" not in err


def test_a_checkpoint_of_another_run_is_never_restored(tmp_path, caplog):
  other = {**CONFIG, "members": [{"seed": 7, "learning_rate": 0.1}]}
  save_epochs(tmp_path, 1, config=other)
  with pytest.raises(checkpoints.CheckpointError, match="belongs to another run"):
    restore(tmp_path)
  # Read without knowing the run (e.g. to rebuild config.json), any identity is accepted.
  checkpointer = checkpoints.Checkpointer(str(tmp_path))
  assert checkpointer.restore_latest(abstract(make_state(0)))[0] == 1
  checkpointer.close()


def test_a_checkpoint_without_record_is_restored_unverified_with_a_warning(tmp_path, caplog):
  # What gelujax wrote before checkpoints carried a record: Orbax's state alone.
  manager = ocp.CheckpointManager(
    str(tmp_path / "checkpoints"),
    options=ocp.CheckpointManagerOptions(enable_async_checkpointing=False, create=True),
  )
  manager.save(4, args=ocp.args.StandardSave(make_state(4)), force=True)
  manager.wait_until_finished()
  manager.close()
  with caplog.at_level(logging.WARNING):
    epoch, state, metrics = restore(tmp_path)
  assert epoch == 4
  assert_state_equal(state, 4)
  assert metrics is None  # it holds none: metrics.jsonl is checked against the run's evaluations
  assert "has no checksums" in caplog.text and "restored unverified" in caplog.text


def test_unfinished_checkpoint_is_ignored_and_removed_by_the_next_save(tmp_path, caplog):
  save_epochs(tmp_path, 1)
  # What a save killed midway leaves: a temporary directory that was never renamed.
  os.makedirs(tmp_path / "checkpoints" / "2.orbax-checkpoint-tmp-123" / "default")
  with caplog.at_level(logging.WARNING):
    epoch, state, _ = restore(tmp_path)
  assert epoch == 1
  assert_state_equal(state, 1)
  assert not caplog.records  # never taken for a checkpoint
  save_epochs(tmp_path, 2)
  assert sorted(os.listdir(tmp_path / "checkpoints")) == ["1", "2"]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_a_save_waits_for_the_save(tmp_path, signum):
  """A real signal sent to this process while a (large) save runs."""
  checkpointer = checkpoints.Checkpointer(str(tmp_path), config=CONFIG)
  state = make_state(1, size=2_000_000)  # 24 MB: the save takes a while
  main = threading.get_ident()
  checkpoints_dir = tmp_path / "checkpoints"

  def send_when_the_save_starts():
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
      if any(".orbax-checkpoint-tmp" in n for n in os.listdir(checkpoints_dir)):
        signal.pthread_kill(main, signum)
        return
      time.sleep(0.0005)

  sender = threading.Thread(target=send_when_the_save_starts)
  previous = signal.signal(signal.SIGTERM, host.interrupt)
  try:
    sender.start()
    with pytest.raises(host.Interrupted) as error:
      checkpointer.save(1, state, make_records(1))
  finally:
    sender.join()
    signal.signal(signal.SIGTERM, previous)
    checkpointer.close()
  assert error.value.signum == signum
  assert str(error.value) == (
    f"interrupted by {signal.Signals(signum).name} during the save of the checkpoint of epoch "
    "1, which was completed first"
  )
  assert os.listdir(checkpoints_dir) == ["1"]  # finished, no temporary folder left
  epoch, restored, _ = checkpoints.Checkpointer(str(tmp_path), config=CONFIG).restore_latest(
    abstract(state)
  )
  assert epoch == 1
  np.testing.assert_array_equal(restored["w"], state["w"])


def test_keep_below_two_is_refused(tmp_path):
  with pytest.raises(ValueError, match="at least 2"):
    checkpoints.Checkpointer(str(tmp_path), keep=1)


def test_each_checkpoint_holds_the_records_up_to_its_epoch(tmp_path):
  save_epochs(tmp_path, 1, 2)
  checkpointer = checkpoints.Checkpointer(str(tmp_path), config=CONFIG)
  for epoch in (1, 2):
    record = checkpointer.read_record(epoch)
    assert record["format"] == 2 and record["metrics"] == make_records(epoch)
  checkpointer.close()


def test_records_changed_on_disk_fall_back_to_the_previous_checkpoint(tmp_path, caplog):
  save_epochs(tmp_path, 1, 2)
  path = tmp_path / "checkpoints" / "2" / "gelujax" / "metadata"
  text = path.read_text()
  assert '"loss": 0.5' in text
  path.write_text(text.replace('"loss": 0.5', '"loss": 0.7'))  # still well-formed JSON
  with caplog.at_level(logging.WARNING):
    epoch, state, metrics = restore(tmp_path)
  assert epoch == 1 and metrics == make_records(1)
  assert_state_equal(state, 1)
  assert "its metrics records do not match the checksum written with them" in caplog.text
  assert os.path.isdir(tmp_path / "damaged" / "checkpoint-2")
